"""Course assignments: every chapter in the exercise format builds and grades with otter.

For each such chapter, ``tools/assignments.py`` builds the student notebook,
the key and the autograder (``otter assign``), and two submissions are graded
with otter's local runner (``otter.api.grade_submission``), which executes the
whole notebook: the student version with the exercises at even positions
(1st, 3rd, ...) solved with the key's code, and the one with those at odd
positions solved. Each must get exactly the points of its solved exercises and
zero for its stubs, and no cell of it may raise: in otter's student version the
visible checks run through ``grader.check`` and report their failures without
raising, so "only the stubbed exercises fail" means exactly this. Together the
two executions check what three did before (the key, the untouched student
version, the first exercise solved):

* every exercise's solution gets its points from the autograder (in one of the
  two), and every exercise's stub gets zero (in the other);
* no cell raises because some exercise is a stub: a cell that needs a stubbed
  exercise's result raises in the submission where that exercise is a stub;
* checks are independent of each other's solutions: each submission mixes
  solved exercises and stubs, and each exercise's score follows its own cell.

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
    """Build one chapter's assignment; grade it with the even, then the odd exercises solved."""
    row = assignments.assign(notebook, tmp_path / "build")
    exercises = row["exercises"]
    for half in (0, 1):
        solved = set(range(half, len(exercises), 2))
        folder = tmp_path / f"solved{half}"
        folder.mkdir()
        submission = assignments.with_solutions(row["student"], row["key"], solved, folder / row["student"].name)
        scores, errors = _graded(submission, row["autograder"])
        assert not errors, f"with exercises {sorted(solved)} solved, cells raised outside the checks: {errors}"
        assert scores == {ex.question: (ex.points if k in solved else 0) for k, ex in enumerate(exercises)}


def chapters_of(part: str) -> list[Path]:
    return [nb for p, nb in FORMATTED if p == part]


def test_every_part_has_its_grading_file():
    have = {p.stem.removeprefix("test_assignments_") for p in Path(__file__).parent.glob("test_assignments_*.py")}
    assert set(PARTS) <= have, f"add tests/test_assignments_<part>.py for {sorted(set(PARTS) - have)}"


def test_summary_lists_every_formatted_chapter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                       # a relative folder, as `make assignments` gives
    rows = assignments.build(Path("out"))
    summary = (tmp_path / "out" / "SUMMARY.md").read_text()
    assert len(rows) == len(FORMATTED)
    for row in rows:
        assert str(row["notebook"].relative_to(ROOT)) in summary
        student = nbformat.read(row["student"], as_version=4)
        text = "\n".join(c.source for c in student.cells)
        # no solution reaches the student: neither the prose nor the code of any solution cell
        assert "{solution}" not in text
        key = nbformat.read(row["notebook"], as_version=4)
        for ex in row["exercises"]:
            body = key.cells[ex.solution].source.split("\n", 1)[1].strip()
            assert body and body not in text
