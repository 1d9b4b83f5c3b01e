"""Grade every chapter of book/smm/ with otter (see tests/test_assignments.py)."""

import pytest

from test_assignments import chapters_of, check_chapter


@pytest.mark.parametrize("notebook", chapters_of("smm"), ids=lambda nb: nb.stem)
def test_chapter_grades_key_student_and_one_solved(notebook, tmp_path):
    check_chapter(notebook, tmp_path)
