"""Grade book/smm/experiments.ipynb with otter (see tests/test_assignments_smm.py for why apart)."""

import pytest

from test_assignments import chapters_of, check_chapter


@pytest.mark.parametrize("notebook", [nb for nb in chapters_of("smm") if nb.stem == "experiments"],
                         ids=lambda nb: nb.stem)
def test_chapter_grades_key_student_and_one_solved(notebook, tmp_path):
    check_chapter(notebook, tmp_path)
