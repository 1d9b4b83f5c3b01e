"""The exercise format of the book (see docs/teaching.md), checked statically.

Every exercise is a ``{exercise}`` directive with a collapsed ``{solution}``,
then a solution cell (metadata ``mvkm.role = "solution"``, points, the names
of its results, collapsed in the HTML with ``hide-input``), then its test
cell (``role = "tests"``) and optional hidden tests. A name a solution cell
defines is used by no cell outside its exercise, so the student version, with
the solution stubbed, runs everywhere else.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import assignments  # noqa: E402

NOTEBOOKS = [nb for _, nb in assignments.chapters()]

#: Chapters whose exercises are not (yet) in the format: none. A chapter added with
#: exercises in the old single-check style would have to be listed here, and fails
#: the test below until it is.
PENDING: set[str] = set()


def _key(nb_path: Path) -> str:
    return str(nb_path.relative_to(ROOT).with_suffix(""))


def _names(source: str, ctx: type) -> set[str]:
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    return {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def test_pending_list_matches_the_notebooks():
    unconverted = set()
    for nb_path in NOTEBOOKS:
        nb = nbformat.read(nb_path, as_version=4)
        labels = [lab for c in nb.cells if c.cell_type == "markdown"
                  for lab in assignments.exercise_labels(c.source)]
        if labels and not assignments.exercises(nb):
            unconverted.add(_key(nb_path))
    assert unconverted == PENDING


@pytest.mark.parametrize("nb_path", [p for p in NOTEBOOKS if _key(p) not in PENDING],
                         ids=lambda p: _key(p))
def test_every_exercise_follows_the_format(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    exs = {ex.label: ex for ex in assignments.exercises(nb)}
    labels = [lab for c in nb.cells if c.cell_type == "markdown" for lab in assignments.exercise_labels(c.source)]
    assert sorted(labels) == sorted(exs), "every {exercise} needs its solution and test cells"
    if labels:
        goals = nb.metadata.get("mvkm", {}).get("goals", [])
        assert 2 <= len(goals) <= 4 and all(isinstance(g, str) and g for g in goals)
    for label, ex in exs.items():
        statement = nb.cells[ex.statement].source
        fence = re.search(r"\{solution\}[ \t]*" + re.escape(label) + r"\s*\n((?:[ \t]*:[^\n]*\n)*)", statement)
        assert fence and ":class: dropdown" in fence.group(1), f"{label}: the {{solution}} must be a dropdown"
        sol = nb.cells[ex.solution]
        assert "hide-cell" in sol.metadata.get("tags", []), f"{label}: the solution cell must be collapsed"
        defined = _names(sol.source, ast.Store)
        assert set(ex.names) <= defined, f"{label}: names not assigned in the solution cell"
        # names defined only by this solution cell are used nowhere outside its exercise
        own = set(ex.tests) | {ex.solution}
        elsewhere_defined = set()
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and i not in own and assignments.role(cell) != "solution":
                elsewhere_defined |= _names(cell.source, ast.Store)
        private = defined - elsewhere_defined
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and i not in own and i > ex.solution:
                leaked = private & _names(cell.source, ast.Load)
                assert not leaked, f"{label}: cell {i} uses {sorted(leaked)} from the solution"
        functions = {n.name for n in ast.walk(ast.parse(sol.source)) if isinstance(n, ast.FunctionDef)}
        functions |= {t.id for n in ast.walk(ast.parse(sol.source)) if isinstance(n, ast.Assign)
                      and isinstance(n.value, ast.Lambda) for t in n.targets if isinstance(t, ast.Name)}
        for j in ex.tests:
            used = _names(nb.cells[j].source, ast.Load)
            assert set(ex.names) & used, f"{label}: the test cell checks none of the names"
            assert not (functions & used), f"{label}: the test cell calls the solution's {sorted(functions & used)}"
        kinds = [assignments.role(nb.cells[j]) for j in ex.tests]
        assert kinds[0] == "tests" and "hidden-tests" in kinds[1:], \
            f"{label}: a visible test cell, then hidden tests (the visible checks test properties)"
        for j in ex.tests:
            assert "remove-cell" in nb.cells[j].metadata.get("tags", []), \
                f"{label}: test cells are removed from the HTML"
        head = assignments.header(sol.source)
        assert head and re.match(r"# Exercise \d+\.\d+ \(\d+ points?\): ", head[0]), \
            f"{label}: the solution cell opens with '# Exercise N.M (P points): ...'"
        assert re.search(r"[.?!]\)?$", head[-1]), \
            f"{label}: the stub's specification is one whole sentence of at most 3 lines: {head}"


def test_the_stub_shows_the_whole_first_sentence():
    source = ("# Exercise 1.2 (2 points): the rank of K and\n# the order of the recurrence.\n"
              "# Hint, not shown.\nx = 1\n")
    assert assignments.header(source) == source.splitlines()[:2]
    ex = assignments.Exercise("a-b", 2, ["r"], 0, 1, describe={"r": "the rank"})
    stub = assignments.stub(ex, source)
    assert "the order of the recurrence." in stub and "Hint" not in stub
    assert stub.endswith("# r: the rank\nr = ...")
    assert assignments.header("x = 1\n# late comment.\n") == []
