"""Grade every chapter of book/ppca/ with otter (see tests/test_assignments.py)."""

import pytest

from test_assignments import ROOT, chapters_of, check_chapter, check_zip_alone


@pytest.mark.parametrize("notebook", chapters_of("ppca"), ids=lambda nb: nb.stem)
def test_chapter_grades_key_student_and_one_solved(notebook, tmp_path):
    check_chapter(notebook, tmp_path)


# pip installs otter and the chapter's packages into a fresh environment: about 5 minutes on
# an idle machine, 15 on a loaded one, beyond the suite's 15-minute limit per test
@pytest.mark.timeout(2400)
def test_an_environment_built_from_the_zip_alone_grades_the_key_and_the_stub(tmp_path):
    check_zip_alone(ROOT / "book" / "ppca" / "primal.ipynb", tmp_path)
