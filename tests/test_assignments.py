"""Course assignments: every chapter in the exercise format builds and grades with otter.

For each such chapter, ``tools/assignments.py`` builds the student notebook,
the key and the autograder (``otter assign``), and grades two students with
otter's local runner (``otter.api.grade_submission``): one with the exercises
at even positions (1st, 3rd, ...) solved with the key's code, one with those
at odd positions solved. The exercises a student did not solve are answered
by copying their visible checks (``assignments.copied_check``: the stub, then
any value the check's own code computes that passes the check). Both are
graded in one execution of the chapter (``assignments.two_pass_submission``):
the chapter's body runs once, then its exercise section runs twice, once per
student; between the two passes otter's check results are saved and cleared
and the names the first pass created are deleted. Each student must get
exactly the points of its solved exercises and less than full points for each
copied one, and no cell may raise: in otter's student version the visible
checks run through ``grader.check`` and report their failures without raising,
so "only the unsolved exercises fail" means exactly this. Together the two
passes check:

* every exercise's solution gets its points from the autograder (in one of the
  two passes), and copying its visible check does not (in the other): the
  visible checks test properties, and the hidden tests the answer;
* no cell raises because some exercise is unsolved: a cell that needs an
  unsolved exercise's result raises in the pass where it is unsolved (its
  names are stubs there, and the first pass's other names are gone);
* checks are independent of each other's solutions: each pass mixes solved
  and unsolved exercises, and each exercise's score follows its own cell.

That a stub scores exactly 0 is checked on the autograder zip
(``check_zip_alone``, two chapters).

What one execution cannot see: an exercise cell that mutates an object of the
chapter's body in place (an array, a random generator) hands the second pass a
changed object. One exercise does so (``ppca/primal``, exercise 3, draws its BFGS
start from the chapter's generator); its checks are on the optimum, which does not
depend on the start.

The key itself (the chapter with every solution and its test cells) is the
book's notebook, which nbval executes and compares.

Each part has its own test file (``test_assignments_<part>.py``), so that
pytest-xdist, which hands out whole files (``--dist loadfile``, needed by
nbval), spreads the gradings over its workers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import assignments  # noqa: E402

FORMATTED = [(part, nb) for part, nb in assignments.chapters()
             if assignments.exercises(nbformat.read(nb, as_version=4))]
PARTS = sorted({part for part, _ in FORMATTED})


def _graded(path: Path, autograder: Path) -> tuple[dict, list]:
    scores = assignments.grade(path, autograder)
    return scores, scores.pop("__errors__")


def check_chapter(notebook: Path, tmp_path: Path) -> None:
    """Build one chapter's assignment; grade it with the even, then the odd exercises solved,
    the others answered by a student who copied their visible checks (less than full)."""
    row = assignments.assign(notebook, tmp_path / "build")
    exercises = row["exercises"]
    check_no_solution_reaches_the_student(row)
    folder = tmp_path / "graded"
    folder.mkdir()
    passes = assignments.grade_two_pass(row["student"], row["key"], row["autograder"], folder,
                                        assignments.copied_checks(notebook))
    for half, scores in enumerate(passes):
        solved = set(range(half, len(exercises), 2))
        errors = scores.pop("__errors__")
        assert not errors, f"with exercises {sorted(solved)} solved, cells raised outside the checks: {errors}"
        assert set(scores) == {ex.question for ex in exercises}
        for k, ex in enumerate(exercises):
            if k in solved:
                assert scores[ex.question] == ex.points, (ex.label, "solved", scores)
            else:
                assert scores[ex.question] < ex.points, (ex.label, "copied its visible check", scores)


def grading_python() -> Path | None:
    """The Python of otter's grading environment (its environment.yml asks for 3.13)."""
    import glob
    import shutil

    found = sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.13.*" / "bin" / "python3.13")))
    return Path(found[-1]) if found else (Path(shutil.which("python3.13")) if shutil.which("python3.13") else None)


def check_zip_alone(notebook: Path, tmp_path: Path) -> None:
    """A grading service's round trip: an environment built from nothing but the chapter's
    autograder zip (a fresh venv, ``pip install`` of its environment.yml's pip list, run in
    the unzipped folder as conda runs it) grades the key to full points, the stub to 0, and
    a student who copied every visible check into the answer cells to less than full on
    every exercise (:func:`assignments.copied_check`)."""
    import json as _json
    import os
    import subprocess
    import venv
    import zipfile

    import yaml

    python = grading_python()
    if python is None:
        pytest.skip("no Python 3.13 here (otter's grading environment asks for it)")
    row = assignments.assign(notebook, tmp_path / "build")
    source = tmp_path / "source"                       # a grading service's /autograder/source
    with zipfile.ZipFile(row["autograder"]) as zf:
        zf.extractall(source)
    env = yaml.safe_load((source / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert f"./files/{assignments.package_wheel().name}" in pip and (source / "files").is_dir()
    (source / "requirements-pip.txt").write_text("\n".join(pip) + "\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MVKM"))}
    subprocess.run([str(python), "-m", "venv", str(tmp_path / "env")], check=True, env=clean)
    bin_ = tmp_path / "env" / "bin"
    subprocess.run([str(bin_ / "python"), "-m", "pip", "install", "--quiet", "-r", "requirements-pip.txt"],
                   cwd=source, check=True, env=clean, capture_output=True)
    copied = assignments.with_solutions(nbformat.read(row["student"], as_version=4),
                                        nbformat.read(row["key"], as_version=4), set(),
                                        assignments.copied_checks(notebook))
    row["copied"] = tmp_path / "copied.ipynb"
    nbformat.write(copied, row["copied"])
    for which, expected in (("key", row["points"]), ("student", 0), ("copied", None)):
        folder = tmp_path / which
        folder.mkdir()
        submission = folder / row["student"].name
        submission.write_bytes(row[which].read_bytes())
        subprocess.run([str(bin_ / "otter"), "run", "-a", str(row["autograder"]), "-o", str(folder),
                        submission.name], cwd=folder, check=True, env=clean, capture_output=True)
        results = _json.loads((folder / "results.json").read_text())
        scores = {t["name"]: t["score"] for t in results["tests"] if "score" in t}
        assert set(scores) == {ex.question for ex in row["exercises"]}
        if expected is None:
            assert all(scores[ex.question] < ex.points for ex in row["exercises"]), scores
        else:
            assert sum(scores.values()) == expected, (which, scores)


def chapters_of(part: str) -> list[Path]:
    return [nb for p, nb in FORMATTED if p == part]


def test_every_part_has_its_grading_file():
    have = {p.stem.removeprefix("test_assignments_") for p in Path(__file__).parent.glob("test_assignments_*.py")}
    assert set(PARTS) <= have, f"add tests/test_assignments_<part>.py for {sorted(set(PARTS) - have)}"


def check_no_solution_reaches_the_student(row: dict) -> None:
    """Neither the prose nor the code of any solution cell is in the student notebook."""
    student = nbformat.read(row["student"], as_version=4)
    text = "\n".join(c.source for c in student.cells)
    assert "{solution}" not in text
    key = nbformat.read(row["notebook"], as_version=4)
    for ex in row["exercises"]:
        body = key.cells[ex.solution].source.split("\n", 1)[1].strip()
        assert body and body not in text


def test_summary_lists_the_formatted_chapters(tmp_path, monkeypatch):
    """``make assignments`` (``assignments.build``) into a relative folder: a chapter with
    exercises is built and listed, one without is skipped. Every chapter's own build is
    checked by its grading test (``check_chapter``); two chapters keep this one short."""
    plain = [(p, nb) for p, nb in assignments.chapters() if (p, nb) not in FORMATTED]
    subset = FORMATTED[:1] + plain[:1]
    monkeypatch.setattr(assignments, "chapters", lambda root=ROOT: subset)
    monkeypatch.chdir(tmp_path)                       # a relative folder, as `make assignments` gives
    rows = assignments.build(Path("out"))
    summary = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert [row["notebook"] for row in rows] == [FORMATTED[0][1]]
    assert str(FORMATTED[0][1].relative_to(ROOT)) in summary
    for _, nb in plain[:1]:
        assert str(nb.relative_to(ROOT)) not in summary
    check_no_solution_reaches_the_student(rows[0])


def test_two_pass_submission_runs_the_body_once_and_the_exercises_twice(tmp_path):
    """The graded submission: the chapter's body, then its exercise section with the even
    exercises solved, the cell between the passes, the section again with the odd ones solved."""
    notebook = FORMATTED[0][1]
    row = assignments.assign(notebook, tmp_path / "build")
    sub, second = assignments.two_pass_submission(row["student"], row["key"], tmp_path / "sub.ipynb",
                                                  tmp_path / "scores.pkl")
    stu = nbformat.read(row["student"], as_version=4)
    got = nbformat.read(sub, as_version=4)
    start = assignments.exercise_section(stu)
    section = len(stu.cells) - start
    assert len(got.cells) == start + 1 + section + 1 + section and second == start + section + 2
    assert [c.source for c in got.cells[:start]] == [c.source for c in stu.cells[:start]]
    # the key's solution code, read here from the key's cells, not through the tool's helpers
    key = nbformat.read(row["key"], as_version=4)
    bodies = [c.source.split("# END SOLUTION")[0].replace("# BEGIN SOLUTION NO PROMPT\n", "", 1)
              for c in key.cells if c.cell_type == "code"
              and "otter_assign_solution_cell" in c.metadata.get("tags", [])]
    stubs = [c.source for c in stu.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
    assert len(bodies) == len(stubs) >= 2
    for half, first in ((0, start + 1), (1, second)):
        answers = [c.source for c in got.cells[first:first + section]
                   if "otter_answer_cell" in c.metadata.get("tags", [])]
        assert answers == [bodies[k] if k % 2 == half else stubs[k] for k in range(len(stubs))]
    assert "clear_results()" in got.cells[second - 1].source
    assert len({c.id for c in got.cells}) == len(got.cells)


def test_dead_kernels_are_restarted_up_to_three_times():
    calls = []

    def start(fail_times):
        calls.append(1)
        if len(calls) <= fail_times:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "kernel"

    with pytest.warns(UserWarning, match="died at start-up"):
        assert assignments.restarting_dead_kernels(start)(2) == "kernel"
    calls.clear()
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="Kernel died"):
        assignments.restarting_dead_kernels(start)(3)
    assert len(calls) == 3
    with pytest.raises(RuntimeError, match="other"):                # any other error: at once
        assignments.restarting_dead_kernels(lambda: (_ for _ in ()).throw(RuntimeError("other")))()


def test_gradebook_grades_a_folder_into_a_csv(tmp_path):
    """``tools/assignments.py grade``: a folder of submissions, whatever their file names,
    into one CSV; a key gets full points, a stub none, and a notebook of another chapter
    with the same chapter name (Part I's ``primal`` handed to Part II's autograder) is
    refused by name instead of scored 0."""
    import csv
    import shutil

    row = assignments.assign(ROOT / "book" / "ppca" / "primal.ipynb", tmp_path / "ppca")
    other = assignments.assign(ROOT / "book" / "rkm" / "primal.ipynb", tmp_path / "rkm")
    assert row["student"].name == "ppca-primal.ipynb" and other["student"].name == "rkm-primal.ipynb"
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(row["key"], subs / "alice.ipynb")
    shutil.copy(row["student"], subs / "bob.ipynb")
    shutil.copy(other["key"], subs / "carol.ipynb")
    assignments.gradebook(row["autograder"], subs, tmp_path / "grades.csv", jobs=2)
    with (tmp_path / "grades.csv").open() as fh:
        got = {r["submission"]: r for r in csv.DictReader(fh)}
    assert sorted(got) == ["alice.ipynb", "bob.ipynb", "carol.ipynb"]
    questions = [ex.question for ex in row["exercises"]]
    assert float(got["alice.ipynb"]["total"]) == float(got["alice.ipynb"]["possible"]) == row["points"]
    assert [float(got["alice.ipynb"][q]) for q in questions] == [ex.points for ex in row["exercises"]]
    assert not got["alice.ipynb"]["problems"] and not got["bob.ipynb"]["problems"]
    assert float(got["bob.ipynb"]["total"]) == 0
    assert float(got["carol.ipynb"]["total"]) == 0 and "rkm-primal" in got["carol.ipynb"]["problems"]
    with pytest.raises(ValueError, match="autograder must be an existing .zip"):
        assignments.gradebook(tmp_path / "missing.zip", subs, tmp_path / "x.csv")
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        assignments.gradebook(row["autograder"], subs, tmp_path / "x.csv", jobs=0)


def test_a_copied_visible_check_takes_what_the_check_computes():
    """The cheating student of ``check_chapter``: a check that recomputes the answer hands
    it over (from an assert's expression or from a variable); a check of properties
    leaves the stubs."""
    import numpy as np

    body = {"np": np, "K": np.diag([4.0, 1.0])}
    recomputing = ("assert all(v is not ... for v in (top,))\n"
                   "assert np.isclose(float(top), np.linalg.eigvalsh(K)[-1] ** 0.5)\n")
    by_variable = ("assert all(v is not ... for v in (top, low))\n"
                   "ev_t = np.linalg.eigvalsh(K)\n"
                   "assert np.isclose(top, ev_t[-1]) and np.isclose(low, ev_t[0])\n")
    properties = ("assert all(v is not ... for v in (top,))\n"
                  "top_t = float(top)\n"
                  "assert top_t > 0 and top_t ** 2 <= np.trace(K)\n")
    found = {}
    for key, check, names in (("expr", recomputing, ["top"]), ("var", by_variable, ["top", "low"]),
                              ("prop", properties, ["top"])):
        space = dict(body)
        exec(assignments.copied_check(names, check, budget=2.0), space)
        found[key] = [space[n] for n in names]
    assert found["expr"] == [2.0]
    assert [float(v) for v in found["var"]] == [4.0, 1.0]
    assert found["prop"] == [...]
