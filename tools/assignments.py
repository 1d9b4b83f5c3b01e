"""Course assignments from the book's chapters, built and graded with otter-grader.

Usage::

    python tools/assignments.py [OUT]        # default OUT: _build/assignments
    python tools/assignments.py grade AUTOGRADER_ZIP SUBMISSIONS [-o CSV] [-j JOBS]

For every chapter of ``_toc.yml`` with exercises, the first form writes
``OUT/<part>-<chapter>/`` with (the assignment's name is ``<part>-<chapter>``,
e.g. ``rkm-primal``, unique in the book)

* ``student/<part>-<chapter>.ipynb``: the notebook to hand out; each solution
  cell is replaced by a stub (``name = ...`` for the results the checks use),
  the prose solutions are removed, and the visible checks run through
  ``grader.check("<question>")``;
* ``autograder/<part>-<chapter>.ipynb``: the instructor key (the chapter with
  every solution, prose and code);
* ``autograder/<part>-<chapter>-autograder_*.zip``: what ``otter run -a``
  needs to grade a submission (visible and hidden checks, points);

and ``OUT/SUMMARY.md``, a table of chapters, exercises and points.

The second form grades every ``*.ipynb`` under the folder SUBMISSIONS with one
autograder, JOBS at a time (default: the CPUs available, at most 4), and
writes a gradebook CSV (default ``grades.csv``): one row per submission, one
column per exercise, the total, the points possible and what went wrong
(a submission for another assignment, a notebook that does not run).

The chapters keep the book's exercise format (see docs/teaching.md, "For
teachers"): after the ``{exercise}``/``{solution}`` markdown come a *solution
cell* with metadata ``mvkm = {exercise, role: "solution", points, names}``, a
*test cell* with ``mvkm = {exercise, role: "tests"}`` and optionally a cell
with ``role: "hidden-tests"``. This module turns that into otter's master
format (``# BEGIN QUESTION`` ... raw cells) and runs ``otter assign``.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels import poll_in_slices  # noqa: E402

# otter grades through nbclient, whose waits on a kernel channel can miss a wake-up and then
# last for ever (tools/kernels.py): they poll in slices of one second instead
poll_in_slices()
ROLES = ("solution", "tests", "hidden-tests")
_WIDGET = re.compile(r"\bwidgets\.Output\(")
_SOLUTION_FENCE = re.compile(r"^(`{3,}|:{3,})\{solution\}.*?^\1[ \t]*$\n?", re.M | re.S)
_IMPORTED = re.compile(r"^\s*(?:from|import)\s+(\w+)", re.M)
_EXERCISE_LABEL = re.compile(r"\{exercise\}[^\n]*\n(?:[ \t]*:[^\n]*\n)*?[ \t]*:label:[ \t]*(\S+)")


@dataclass
class Exercise:
    """One graded exercise of a chapter."""

    label: str
    points: int
    names: list[str]
    statement: int  # index of the markdown cell with the {exercise} directive
    solution: int  # index of the solution cell
    tests: list[int] = field(default_factory=list)  # test cell, then hidden-test cells
    describe: dict[str, str] = field(default_factory=dict)  # name -> what it holds (the stub's comments)

    @property
    def question(self) -> str:
        """The otter question name: the label with '-' -> '_' (a valid file stem)."""
        return self.label.replace("-", "_")


def chapters(root: Path = ROOT) -> list[tuple[str, Path]]:
    """``(part slug, notebook path)`` of every notebook chapter in ``_toc.yml``, in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    out = []
    for part in toc.get("parts", []):
        for ch in part["chapters"]:
            path = root / f"{ch['file']}.ipynb"
            if path.is_file():
                out.append((Path(ch["file"]).parent.name, path))
    return out


def role(cell: dict) -> str | None:
    """The exercise role of a cell ('solution', 'tests', 'hidden-tests') or None."""
    meta = cell.get("metadata", {}).get("mvkm", {})
    return meta.get("role") if isinstance(meta, dict) else None


def exercise_labels(markdown: str) -> list[str]:
    """Labels of the ``{exercise}`` directives in a markdown source."""
    return _EXERCISE_LABEL.findall(markdown)


def exercises(nb: nbformat.NotebookNode) -> list[Exercise]:
    """The exercises of a notebook in the book's format, in order.

    Raises ``ValueError`` if a solution cell lacks its statement, points or
    names, or is not followed by its test cell.
    """
    statements = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for label in exercise_labels(cell.source):
                statements[label] = i
    found: list[Exercise] = []
    for i, cell in enumerate(nb.cells):
        if role(cell) != "solution":
            continue
        meta = cell.metadata["mvkm"]
        label = meta.get("exercise")
        if label not in statements:
            raise ValueError(f"solution cell {i}: no {{exercise}} with label {label!r} before it")
        points, names = meta.get("points"), meta.get("names")
        if not (isinstance(points, int) and points >= 1):
            raise ValueError(f"{label}: points must be a positive integer, got {points!r}")
        if not (isinstance(names, list) and names and all(isinstance(n, str) and n.isidentifier()
                                                           for n in names)):
            raise ValueError(f"{label}: names must be a non-empty list of identifiers, got {names!r}")
        describe = meta.get("describe", {})
        if not (isinstance(describe, dict) and set(describe) <= set(names)
                and all(isinstance(t, str) for t in describe.values())):
            raise ValueError(f"{label}: describe must map some of names {names} to strings, "
                             f"got {describe!r}")
        ex = Exercise(label, points, names, statements[label], i, describe=dict(describe))
        j = i + 1
        while j < len(nb.cells) and role(nb.cells[j]) in ("tests", "hidden-tests") \
                and nb.cells[j].metadata["mvkm"].get("exercise") == label:
            ex.tests.append(j)
            j += 1
        if not ex.tests or role(nb.cells[ex.tests[0]]) != "tests":
            raise ValueError(f"{label}: the solution cell must be followed by its test cell")
        found.append(ex)
    return found


def stub(ex: Exercise, source: str) -> str:
    """The student's version of a solution cell: its specification (:func:`header`, the
    leading comment's first sentence) and ``name = ...``.

    The exercise's statement in the book says what to compute in words; the names the
    checks read are the grader's business and appear here only, each with its
    description from the solution cell's ``mvkm.describe`` (name -> text), if any.
    """
    lines = header(source) or [f"# Exercise {ex.label}"]
    lines.append("# Your code here: compute the results below (the checks read these names).")
    for name in ex.names:
        text = ex.describe.get(name, "")
        lines += [f"# {name}: {text}" if text else f"# {name}", f"{name} = ..."]
    return "\n".join(lines)


_SENTENCE_END = re.compile(r"[.?!][)\"']?$")


def header(source: str, most: int = 3) -> list[str]:
    """The specification a stub shows: the solution cell's leading comment lines up to
    the end of its first sentence (at most ``most`` lines), or ``[]`` if it has none.

    A header whose sentence runs past ``most`` lines is cut there;
    ``tests/test_exercise_format.py`` holds every chapter to whole sentences.
    """
    lines = []
    for line in source.splitlines():
        if not line.startswith("#") or len(lines) == most:
            break
        lines.append(line.rstrip())
        if _SENTENCE_END.search(line.rstrip()):
            break
    return lines


def copied_check(names: Sequence[str], visible: str, budget: float = 5.0) -> str:
    """The answer cell of a student who copies the exercise's visible check.

    The cell binds every name to ``...`` (the stub) and runs the visible check's
    code without its asserts, statement by statement (a statement that fails is
    skipped). Its candidate answers are the expressions inside the asserts that do
    not involve the exercise's names (``expected`` in ``np.isclose(name, expected)``),
    then the variables the code bound: the first assignment of them to ``names``
    that passes the whole visible check is kept (each trial in a copy of the
    namespace, at most ``budget`` seconds in all). A visible check that only tests
    properties computes no answer, and the names stay stubs; one that recomputes
    the answer hands it over, and then only the hidden tests stand between the
    copy and full points (``tests/test_assignments.py`` demands less than full).
    """
    return f"""\
# A copied visible check (tools/assignments.copied_check)
{chr(10).join(f"{n} = ..." for n in names)}


def _mvkm_copy_the_check(names={tuple(names)!r}, source={visible!r}, budget={budget!r}):
    import ast
    import itertools
    import time
    import types

    g = globals()
    tree = ast.parse(source)
    tainted = set(names)      # the names, and what the check derives from them
    kept, asserts = [], []
    for stmt in tree.body:
        loads = {{n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}}
        if isinstance(stmt, ast.Assert):
            asserts.append(stmt)
            continue
        if loads & tainted:
            tainted |= {{n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store)}}
        kept.append(stmt)
    scratch = dict(g)
    for stmt in kept:
        try:
            exec(compile(ast.Module([stmt], []), "<copied>", "exec"), scratch)
        except Exception:
            pass
    values = []
    for stmt in asserts:
        for node in ast.walk(stmt):
            free = {{n.id for n in ast.walk(node) if isinstance(n, ast.Name)}}
            if (isinstance(node, ast.expr) and not isinstance(node, (ast.Name, ast.Constant))
                    and free and not free & tainted):
                try:
                    values.append(eval(compile(ast.Expression(node), "<copied>", "eval"),
                                       scratch))
                except Exception:
                    pass
    values += [v for k, v in scratch.items() if k not in tainted and not k.startswith("_")
               and (k not in g or g[k] is not v)]
    unique = {{}}
    for v in values:
        if not (callable(v) or isinstance(v, (types.ModuleType, bool, type(None)))):
            unique.setdefault(id(v), v)
    check = compile(tree, "<visible>", "exec")
    start = time.monotonic()
    for trial in itertools.product(list(unique.values())[:24], repeat=len(names)):
        if time.monotonic() - start > budget:
            return
        try:
            exec(check, dict(g, **dict(zip(names, trial))))
        except Exception:
            continue
        g.update(zip(names, trial))
        return


_mvkm_copy_the_check()
"""


def master(nb: nbformat.NotebookNode, name: str, files: Sequence[str] = (),
           wheel: str | None = None) -> nbformat.NotebookNode:
    """The otter-assign master notebook of a book chapter.

    ``files``: support files beside the chapter (:func:`local_modules`), shipped with
    the student notebook and the autograder. ``wheel``: the mvkm wheel's file name, shipped
    in the autograder only, with the grading environment's ``requirements.txt``.
    """
    exs = exercises(nb)
    by_statement = {ex.statement: ex for ex in exs}
    by_solution = {ex.solution: ex for ex in exs}
    in_tests = {j for ex in exs for j in ex.tests}
    raw = nbformat.v4.new_raw_cell
    config = {"name": name, "init_cell": True, "check_all_cell": False, "export_cell": False,
              "run_tests": False, "solutions_pdf": False, "generate": True,
              "tests": {"files": False}}
    if files or wheel:
        config["files"] = list(files) + ([wheel] if wheel else [])
    if wheel:
        config["requirements"] = "requirements.txt"
    cells = [raw("# ASSIGNMENT CONFIG\n" + yaml.safe_dump(config, sort_keys=False))]
    for i, cell in enumerate(nb.cells):
        cell = copy.deepcopy(cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if _WIDGET.search(cell.source):
                # An interactive explorer drawing into an ipywidgets Output: students keep
                # it, grading skips it (otter's tag). Run by otter's grader, such a cell
                # can leave the kernel idle with the next cell's request unanswered. (Its
                # names must not be needed by later cells; interact-style cells are kept.)
                cell.metadata["tags"] = list(cell.metadata.get("tags", [])) + ["otter_ignore"]
        if i in in_tests:
            continue  # emitted with their solution cell
        if i in by_statement:
            ex = by_statement[i]
            prose = _SOLUTION_FENCE.search(cell.source)
            cell.source = _SOLUTION_FENCE.sub("", cell.source).rstrip() + "\n"
            cells += [raw(f"# BEGIN QUESTION\nname: {ex.question}\npoints: {ex.points}"), cell]
            if prose:
                cells += [raw("# BEGIN SOLUTION"),
                          nbformat.v4.new_markdown_cell(prose.group(0).strip()),
                          raw("# END SOLUTION")]
            continue
        if i in by_solution:
            ex = by_solution[i]
            cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t not in ("hide-cell", "hide-input")]
            cell.source = ("# BEGIN SOLUTION NO PROMPT\n" + cell.source.rstrip() + "\n# END SOLUTION\n"
                           '""" # BEGIN PROMPT\n' + stub(ex, cell.source) + '\n""" # END PROMPT')
            cells += [raw("# BEGIN SOLUTION"), cell, raw("# END SOLUTION"), raw("# BEGIN TESTS")]
            for j in ex.tests:
                test = copy.deepcopy(nb.cells[j])
                # otter turns a test cell into a doctest whose expected output is the
                # cell's stored output (the executed book's "checks pass" line)
                test.outputs = [o for o in test.outputs if o.get("output_type") == "stream"
                                and o.get("name") == "stdout"]
                test.execution_count = None
                if role(test) == "hidden-tests":
                    test.source = ('""" # BEGIN TEST CONFIG\nhidden: true\n""" # END TEST CONFIG\n'
                                   + test.source)
                cells.append(test)
            cells += [raw("# END TESTS"), raw("# END QUESTION")]
            continue
        cells.append(cell)
    out = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(nb.metadata))
    return out


def _code_of(path: Path) -> str:
    """The code of a notebook (its code cells, joined) or of a Python module."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def local_modules(notebook: Path) -> list[Path]:
    """The Python modules beside a chapter that its code cells import (Part IV's experiment
    chapters import ``book/smm/smm_common.py``): what its assignment ships with it."""
    names = dict.fromkeys(_IMPORTED.findall(_code_of(notebook)))
    return [notebook.parent / f"{name}.py" for name in names if (notebook.parent / f"{name}.py").is_file()]


def assignment_name(notebook: Path) -> str:
    """``<part>-<chapter>`` (``book/rkm/primal.ipynb`` -> ``rkm-primal``): chapter names
    repeat across parts (three are called ``primal``), so the part is part of the name;
    otter refuses a submission whose notebook names another assignment."""
    return f"{notebook.parent.name}-{notebook.stem}"


_WHEELS: dict[Path, Path] = {}


def package_wheel(root: Path = ROOT) -> Path:
    """The wheel of the package in ``root``, built once per process (``pip wheel --no-deps``)
    into ``root/_build/assignments-wheel``: the autograder ships it, since mvkm is not on PyPI."""
    import fcntl
    import os

    if root not in _WHEELS or not _WHEELS[root].is_file():
        base = root / "_build" / "assignments-wheel"
        base.mkdir(parents=True, exist_ok=True)
        out = base / str(os.getpid())           # one folder per process (parallel test workers)
        # one build at a time: setuptools builds in the source tree (build/, *.egg-info)
        with open(base / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            result = subprocess.run([sys.executable, "-m", "pip", "wheel", str(root), "--no-deps",
                                     "--quiet", "-w", str(out)], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building the mvkm wheel failed:\n{result.stdout}\n{result.stderr}")
        _WHEELS[root] = next(out.glob("mvkm-*.whl"))
    return _WHEELS[root]


# what a chapter's imports need beyond the wheel's own dependencies, and the data extra's
# packages that mvkm.datasets' loaders read (pyproject's [data] extra)
_DISTRIBUTION = {"sklearn": "scikit-learn", "skimage": "scikit-image", "IPython": "ipython"}
_DATA_LOADERS = {"load_santafe": "reservoirpy>=0.4.2", "load_basicmotions": "sktime>=0.30"}
_CPU_TORCH = "--extra-index-url https://download.pytorch.org/whl/cpu"


def requirements(notebook: Path, wheel: Path) -> list[str]:
    """The pip requirements of a chapter's grading environment: the mvkm wheel (shipped in
    the autograder's ``files/``), the third-party packages its code and its local modules
    import (with the lower bounds of pyproject's extras), and the data extra's package
    where it loads the Santa Fe or BasicMotions data. torch comes from PyTorch's CPU index."""
    sources = [notebook, *local_modules(notebook)]
    code = "\n".join(_code_of(path) for path in sources)
    local = {p.stem for p in sources}
    bounds = {}
    for line in re.findall(r'"([A-Za-z][\w.-]*(?:\[[\w,]+\])?>=[^"]+)"', (ROOT / "pyproject.toml").read_text()):
        bounds.setdefault(re.split(r"[\[>]", line)[0].lower(), line)
    names = []
    for module in dict.fromkeys(_IMPORTED.findall(code)):
        if module in sys.stdlib_module_names or module in local or module in ("mvkm", "__future__"):
            continue
        dist = _DISTRIBUTION.get(module, module)
        names.append(bounds.get(dist.lower(), dist))
    names += [req for loader, req in _DATA_LOADERS.items() if loader in code]
    lines = [f"./files/{wheel.name}"]
    if any(n.startswith("torch") for n in names):
        lines.insert(0, _CPU_TORCH)
    return lines + sorted(dict.fromkeys(names))


def assign(notebook: Path, out_dir: Path) -> dict:
    """Run ``otter assign`` on one chapter; return its summary row.

    The autograder zip is self-contained: it carries the chapter's local modules and
    the mvkm wheel in ``files/``, and its ``environment.yml`` lists what the chapter
    imports (:func:`requirements`), so that a grading service builds a working
    environment from the zip alone.
    """
    nb = nbformat.read(notebook, as_version=4)
    exs = exercises(nb)
    name = assignment_name(notebook)
    out_dir = out_dir.resolve()                # otter runs in a temporary folder
    out_dir.mkdir(parents=True, exist_ok=True)
    support = [p.name for p in local_modules(notebook)]
    wheel = package_wheel()
    with tempfile.TemporaryDirectory() as tmp:
        for f in support:
            shutil.copy(notebook.parent / f, tmp)
        shutil.copy(wheel, tmp)
        (Path(tmp) / "requirements.txt").write_text("\n".join(requirements(notebook, wheel)) + "\n")
        src = Path(tmp) / f"{name}.ipynb"
        nbformat.write(master(nb, name, support, wheel.name), src)
        result = subprocess.run([sys.executable, "-m", "otter", "assign", str(src), str(out_dir)],
                                capture_output=True, text=True, cwd=tmp)
    if result.returncode != 0:
        raise RuntimeError(f"otter assign failed on {notebook}:\n{result.stdout}\n{result.stderr}")
    zips = sorted((out_dir / "autograder").glob("*.zip"))
    return {"notebook": notebook, "exercises": exs, "points": sum(e.points for e in exs),
            "student": out_dir / "student" / f"{name}.ipynb",
            "key": out_dir / "autograder" / f"{name}.ipynb", "autograder": zips[-1],
            "goals": nb.metadata.get("mvkm", {}).get("goals", [])}


def answer_cells(nb: nbformat.NotebookNode) -> list:
    """The student's answer cells (otter's ``otter_answer_cell`` tag), in exercise order."""
    return [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]


def solution_bodies(key: nbformat.NotebookNode) -> list[str]:
    """The code of the key's solution cells, in exercise order, without otter's markers."""
    return [c.source.split("# END SOLUTION")[0].replace("# BEGIN SOLUTION NO PROMPT\n", "", 1)
            for c in key.cells
            if c.cell_type == "code" and "otter_assign_solution_cell" in c.metadata.get("tags", [])]


def with_solutions(student: nbformat.NotebookNode, key: nbformat.NotebookNode,
                   solved: set[int], others: Sequence[str] | None = None) -> nbformat.NotebookNode:
    """A copy of the student notebook in which exercises ``solved`` are solved.

    ``solved`` holds positions in the chapter's exercise order. The answer
    cells of those exercises get the key's solution code; the others keep the
    student's stub, or get ``others[k]`` where given (one answer cell per
    exercise, e.g. :func:`copied_check`).
    """
    out = copy.deepcopy(student)
    bodies, answers = solution_bodies(key), answer_cells(out)
    if len(bodies) != len(answers) or (others is not None and len(others) != len(answers)):
        raise ValueError(f"{len(answers)} answer cells but {len(bodies)} solutions in the key"
                         + ("" if others is None else f" and {len(others)} other answers"))
    for k in range(len(answers)):
        if k in solved:
            answers[k].source = bodies[k]
        elif others is not None:
            answers[k].source = others[k]
    return out


def copied_checks(notebook: Path) -> list[str]:
    """:func:`copied_check` for every exercise of a book chapter, in exercise order."""
    nb = nbformat.read(notebook, as_version=4)
    return [copied_check(ex.names, nb.cells[ex.tests[0]].source) for ex in exercises(nb)]


# Cells that the two-pass submission (``two_pass_submission``) adds between its parts. They
# run in the grading kernel: otter's Checker keeps one result per ``grader.check`` call,
# so the first pass's results are saved and cleared before the second pass starts, and the
# names the first pass created are deleted (names starting with "_" are IPython's or ours).
_SNAPSHOT_CELL = "_mvkm_body_names = {n for n in globals() if not n.startswith('_')}"
_BETWEEN_PASSES_CELL = """\
import pickle as _mvkm_pickle
from otter.execute import Checker as _MvkmChecker
from otter.test_files import GradingResults as _MvkmResults
_mvkm_results = _MvkmResults(_MvkmChecker.get_results())
with open({path!r}, "wb") as _mvkm_f:
    _mvkm_pickle.dump({{q: _mvkm_results.get_score(q) for q in _mvkm_results.test_files}}, _mvkm_f)
_MvkmChecker.clear_results()
for _mvkm_n in [n for n in globals() if not n.startswith('_') and n not in _mvkm_body_names]:
    del globals()[_mvkm_n]
"""


def exercise_section(nb: nbformat.NotebookNode) -> int:
    """Index of the first cell of a notebook's exercise section (its first ``{exercise}``)."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and exercise_labels(cell.source):
            return i
    raise ValueError("the notebook has no {exercise}")


def two_pass_submission(student: Path, key: Path, dest: Path, first_pass_scores: Path,
                        others: Sequence[str] | None = None) -> tuple[Path, int]:
    """One submission that grades two students in one execution of the chapter.

    The chapter's cells before its exercise section run once; then the exercise
    section runs twice: first with the exercises at even positions (1st, 3rd,
    ...) solved, then with the odd ones solved; an exercise not solved in a
    pass keeps its stub, or gets ``others[k]`` (:func:`with_solutions`). Between
    the passes a cell writes the first pass's scores (otter's own check results)
    to ``first_pass_scores``, clears them, and deletes the names that the first
    pass created, so that a cell of the second pass cannot use a result of the
    first (names of the chapter's body, which both passes share, stay).

    Returns the submission's path and the index of its first second-pass cell.
    """
    stu, key_nb = nbformat.read(student, as_version=4), nbformat.read(key, as_version=4)
    start = exercise_section(stu)
    n_ex = len(answer_cells(stu))
    passes = [with_solutions(stu, key_nb, set(range(half, n_ex, 2)), others).cells[start:]
              for half in (0, 1)]
    code = nbformat.v4.new_code_cell
    cells = (stu.cells[:start] + [code(_SNAPSHOT_CELL)] + passes[0]
             + [code(_BETWEEN_PASSES_CELL.format(path=str(first_pass_scores.resolve())))])
    second = len(cells)
    stu.cells = cells + passes[1]
    for k, cell in enumerate(stu.cells):        # the copies of the section need ids of their own
        cell["id"] = f"mvkm-{k}"
    nbformat.write(stu, dest)
    return dest, second


def grade_two_pass(student: Path, key: Path, autograder: Path, folder: Path,
                   others: Sequence[str] | None = None) -> list[dict]:
    """Grade a chapter's two half-solved students in one execution (``two_pass_submission``).

    Returns one dict per pass (even exercises solved, then odd): question ->
    score, and ``"__errors__"``, the cells of that pass that raised, as
    ``(index, first line)`` in the executed notebook (the chapter's body counts
    with the first pass).
    """
    import pickle

    first = folder / "first-pass-scores.pkl"
    submission, _ = two_pass_submission(student, key, folder / student.name, first, others)
    results = grade(submission, autograder)
    errors = results.pop("__errors__")
    with open(first, "rb") as f:
        scores0 = pickle.load(f)
    split = results.pop("__between__")
    return [dict(scores0, __errors__=[e for e in errors if e[0] <= split]),
            dict(results, __errors__=[e for e in errors if e[0] > split])]


def restarting_dead_kernels(start: Callable[..., Any], attempts: int = 3) -> Callable[..., Any]:
    """``start`` (a call that starts a notebook kernel and runs it), called again when the
    kernel dies before it answers, up to ``attempts`` times in all.

    Two kernels started at the same moment by parallel test workers can be handed the same
    free TCP port (jupyter_client binds port 0 and releases it before the kernel binds it):
    one of them then dies with "Kernel died before replying to kernel_info". Used for
    otter's gradings here and for nbval's kernels in ``tests/conftest.py``.
    """
    def call(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(attempts):
            try:
                return start(*args, **kwargs)
            except RuntimeError as exc:
                if "Kernel died before replying" not in str(exc) or attempt == attempts - 1:
                    raise
                warnings.warn(f"a notebook kernel died at start-up ({exc}); starting it again")
    return call


def grade(submission: Path, autograder: Path) -> dict[str, float]:
    """Grade one submission with otter's local runner: question -> score.

    Cells of the submission that raise are recorded too, under the key
    ``"__errors__"`` (a list of cell indices), so that a caller can tell a
    failing check from a broken notebook.
    """
    from otter.api import grade_submission

    results = restarting_dead_kernels(grade_submission)(str(submission), str(autograder), quiet=True)
    scores: dict = {name: results.get_score(name) for name in results.test_files}
    errors = []
    if results.notebook is not None:
        for k, cell in enumerate(results.notebook.cells):
            if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                errors.append((k, cell.source.splitlines()[0] if cell.source else ""))
            if cell.cell_type == "code" and cell.source.startswith("import pickle as _mvkm_pickle"):
                scores["__between__"] = k       # a two-pass submission's cell between its passes
    scores["__errors__"] = errors
    return scores


def build(out: Path = ROOT / "_build" / "assignments") -> list[dict]:
    """Build every chapter's assignment under ``out`` and write ``out/SUMMARY.md``."""
    out = out.resolve()
    rows = []
    for part, notebook in chapters():
        nb = nbformat.read(notebook, as_version=4)
        if not exercises(nb):
            continue
        row = assign(notebook, out / f"{part}-{notebook.stem}")
        rows.append(row)
        print(f"{part}/{notebook.stem}: {len(row['exercises'])} exercises, {row['points']} points")
    lines = ["| chapter | exercises | points | folder |", "|---|---:|---:|---|"]
    for row in rows:
        folder = row["student"].parent.parent.relative_to(out)
        lines.append(f"| {row['notebook'].relative_to(ROOT)} | {len(row['exercises'])} | "
                     f"{row['points']} | {folder} |")
    total = sum(r["points"] for r in rows)
    lines.append(f"| total | {sum(len(r['exercises']) for r in rows)} | {total} | |")
    (out / "SUMMARY.md").write_text("# Assignments\n\n" + "\n".join(lines) + "\n")
    print(f"wrote {out / 'SUMMARY.md'}: {len(rows)} chapters, {total} points")
    return rows


def grade_row(submission: Path, autograder: Path) -> dict[str, Any]:
    """One gradebook row: the submission's points per exercise, total, possible, problems."""
    from otter.api import grade_submission

    row: dict[str, Any] = {"submission": submission.name}
    try:
        # graded under the hand-out's file name (its first cell opens otter.Notebook("<name>.ipynb"))
        meta = json.loads(submission.read_text()).get("metadata", {}).get("otter", {})
        with tempfile.TemporaryDirectory() as tmp:
            named = Path(tmp) / f"{meta.get('assignment_name') or submission.stem}.ipynb"
            shutil.copy(submission, named)
            results = restarting_dead_kernels(grade_submission)(str(named), str(autograder),
                                                                quiet=True)
    except Exception as exc:  # a submission for another assignment, not a notebook, ...
        message = " ".join(str(exc).split()) or type(exc).__name__
        return dict(row, total=0.0, possible="", problems=message[:300])
    for name in sorted(results.test_files):
        row[name] = results.get_score(name)
    row["total"], row["possible"] = results.total, results.possible
    problems = []
    if results.notebook is not None:
        for cell in results.notebook.cells:
            for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
                if out.get("output_type") == "error":
                    problems.append(f"{out.get('ename')}: {out.get('evalue', '')}"[:120])
    row["problems"] = "; ".join(dict.fromkeys(problems))
    return row


def gradebook(autograder: Path, submissions: Path, out: Path, jobs: int | None = None) -> list[dict]:
    """Grade every ``*.ipynb`` under ``submissions`` with ``autograder`` into the CSV ``out``.

    Gradings run in ``jobs`` worker processes (each starts its own kernel); the
    rows are in the submissions' sorted order whatever order they finish in.
    """
    import csv
    import os
    from concurrent.futures import ProcessPoolExecutor

    autograder, submissions = Path(autograder).resolve(), Path(submissions)
    if not autograder.is_file() or autograder.suffix != ".zip":
        raise ValueError(f"autograder must be an existing .zip file (an autograder/*-autograder_*.zip "
                         f"of make assignments); got {str(autograder)!r}")
    if not submissions.is_dir():
        raise ValueError(f"submissions must be a folder of .ipynb files; got {str(submissions)!r}")
    files = sorted(p.resolve() for p in submissions.rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
    if not files:
        raise ValueError(f"submissions: no .ipynb file under {str(submissions)!r}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if jobs is not None and not (isinstance(jobs, int) and jobs >= 1):
        raise ValueError(f"jobs must be a positive integer; got {jobs!r}")
    jobs = min(jobs or min(cpus, 4), len(files))
    print(f"grading {len(files)} submissions with {autograder.name}, {jobs} at a time", flush=True)
    rows: list[dict] = []
    with ProcessPoolExecutor(jobs) as pool:
        for k, row in enumerate(pool.map(grade_row, files, [autograder] * len(files)), 1):
            rows.append(row)
            shown = row["problems"] or "ok"
            print(f"[{k}/{len(files)}] {row['submission']}: {row['total']}/{row['possible']}  {shown}",
                  flush=True)
    questions = sorted({key for row in rows for key in row} - {"submission", "total", "possible",
                                                              "problems"})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, ["submission", *questions, "total", "possible", "problems"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["grade"]:
        build(Path(argv[0]) if argv else ROOT / "_build" / "assignments")
        return
    parser = argparse.ArgumentParser(prog="tools/assignments.py grade",
                                     description="Grade a folder of submissions into a CSV gradebook.")
    parser.add_argument("autograder", type=Path, help="the chapter's autograder zip")
    parser.add_argument("submissions", type=Path, help="a folder of submitted .ipynb files")
    parser.add_argument("-o", "--out", type=Path, default=Path("grades.csv"), help="the CSV to write")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="gradings at a time (default: the CPUs, at most 4)")
    args = parser.parse_args(argv[1:])
    try:
        gradebook(args.autograder, args.submissions, args.out, args.jobs)
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
