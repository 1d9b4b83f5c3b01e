"""Grade the chapters of book/smm/ with otter (see tests/test_assignments.py).

The experiments chapter, the longest of the book, is graded in its own file
(tests/test_assignments_smm_experiments.py): pytest-xdist hands out whole
files, so the two can run on the two workers side by side.
"""

import pytest

from test_assignments import chapters_of, check_chapter


@pytest.mark.parametrize("notebook", [nb for nb in chapters_of("smm") if nb.stem != "experiments"],
                         ids=lambda nb: nb.stem)
def test_chapter_grades_key_student_and_one_solved(notebook, tmp_path):
    check_chapter(notebook, tmp_path)
