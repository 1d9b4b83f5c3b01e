"""Course assignments: every chapter in the exercise format builds and grades with otter.

For each such chapter, ``tools/assignments.py`` builds the student notebook,
the key and the autograder (``otter assign``), and three submissions are
graded with otter's local runner (``otter.api.grade_submission``), which
executes the whole notebook:

* the key gets every exercise's points;
* the untouched student version gets zero for every exercise, and no cell of
  it raises: in otter's student version the visible checks run through
  ``grader.check`` and report their failures without raising, so "only the
  stubbed exercises fail" means exactly this (the stubs' checks score zero,
  nothing else errs);
* the student version with only the first exercise solved gets exactly that
  exercise's points (and zero elsewhere), so checks are independent of each
  other's solutions.

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
    """Build one chapter's assignment and grade the key, the student version and one solved exercise."""
    row = assignments.assign(notebook, tmp_path / "build")
    points = {ex.question: ex.points for ex in row["exercises"]}

    key, errors = _graded(row["key"], row["autograder"])
    assert not errors, f"the key raised in cells {errors}"
    assert key == points

    student, errors = _graded(row["student"], row["autograder"])
    assert not errors, f"the student version raised outside the checks, in cells {errors}"
    assert student == {q: 0 for q in points}

    first = row["exercises"][0].question
    one_dir = tmp_path / "one"
    one_dir.mkdir()
    solved = assignments.with_solutions(row["student"], row["key"], {0}, one_dir / row["student"].name)
    one, errors = _graded(solved, row["autograder"])
    assert not errors, f"the one-solved version raised in cells {errors}"
    assert one == {q: (p if q == first else 0) for q, p in points.items()}


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
