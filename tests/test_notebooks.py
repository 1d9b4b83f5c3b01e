"""The stored outputs the book renders (``execute_notebooks: "off"``, issue 26 item 4).

``make book`` renders the outputs committed in the notebooks instead of
executing them again; nbval (``make test``) has executed every notebook and
compared each cell's output with the stored one. What the forced build checked
besides, these tests check on the stored outputs:

* every code cell was executed, top to bottom, in one kernel (execution counts
  1, 2, 3, ...), so no page shows a stale or missing output;
* no stored output is an error, unless the cell is tagged ``raises-exception``
  (a failing cell failed the forced build; nbval only compares, and a cell
  tagged ``nbval-ignore-output`` that now raises would be compared with nothing);
* no stored output went to stderr (warnings, log lines): the book turns such an
  output into a Sphinx warning (``nb_output_stderr: warn``), which fails the build.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "book").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def stored_output_problems(nb: nbformat.NotebookNode) -> list[str]:
    """What is wrong with a notebook's stored outputs, one line per problem (empty: fine)."""
    problems = []
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for k, (i, cell) in enumerate(code, start=1):
        first = cell.source.splitlines()[0] if cell.source else ""
        if cell.execution_count != k:
            problems.append(f"cell {i} ({first!r}): execution count {cell.execution_count}, expected {k} "
                            "(execute the notebook top to bottom in a fresh kernel)")
        tags = cell.metadata.get("tags", [])
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and "raises-exception" not in tags:
                problems.append(f"cell {i} ({first!r}): stored error {out.get('ename')}: {out.get('evalue')}")
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                problems.append(f"cell {i} ({first!r}): stored stderr output {out.get('text', '')[:200]!r}")
    return problems


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 20


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "book")))
def test_stored_outputs_are_complete_and_clean(path):
    problems = stored_output_problems(nbformat.read(path, as_version=4))
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    for k, (source, outputs, tags) in enumerate(cells, start=1):
        cell = nbformat.v4.new_code_cell(source, execution_count=k, outputs=outputs)
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


_ERROR = nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[])
_STDERR = nbformat.v4.new_output("stream", name="stderr", text="UserWarning: careful\n")
_STDOUT = nbformat.v4.new_output("stream", name="stdout", text="checks pass\n")


@pytest.mark.parametrize(
    "cells, bad",
    [
        ([("x = 1", [], []), ("print(x)", [_STDOUT], [])], False),
        ([("f(0)", [_ERROR], [])], True),                             # a failing cell
        ([("f(0)", [_ERROR], ["nbval-ignore-output"])], True),       # ignoring the output does not excuse it
        ([("f(0)", [_ERROR], ["raises-exception"])], False),         # an intended exception
        ([("warn()", [_STDERR], [])], True),                          # a printed warning
        ([("warn()", [_STDERR], ["nbval-ignore-output"])], True),
    ],
)
def test_stored_output_checker(cells, bad):
    assert bool(stored_output_problems(_nb(*cells))) is bad


def test_stored_output_checker_wants_cells_executed_in_order():
    nb = _nb(("x = 1", [], []), ("y = 2", [], []))
    assert not stored_output_problems(nb)
    nb.cells[1].execution_count = None                               # a cell never executed
    assert stored_output_problems(nb)
    nb.cells[1].execution_count = 5                                   # executed out of order
    assert stored_output_problems(nb)
