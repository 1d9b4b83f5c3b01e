"""The mutation check's list stays in sync with the package (no notebook is executed here).

``tests/mutants.py`` (``make mutants``) injects one named fault at a time into a
copy of ``mvkm`` by an exact textual replacement. A refactor that moves or
rewrites a mutated line orphans its mutant; these tests make ``make test`` fail
then, so the list is updated with the code.
"""

from __future__ import annotations

import filecmp
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mvkm_mutants", ROOT / "tests" / "mutants.py")
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mvkm_mutants"] = mutants
_spec.loader.exec_module(mutants)

MUTANTS = mutants.MUTANTS


def test_names_are_unique_and_the_list_is_targeted():
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names)
    assert 12 <= len(MUTANTS) <= 34      # issue 23 added four faults of Part III, issue 36 one, issue 37 one


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_old_snippet_occurs_exactly_once(mutant):
    assert mutant.old != mutant.new
    assert (mutants.PACKAGE / mutant.file).exists(), mutant.file
    count = mutants.snippet_count(mutant)
    assert count == 1, (f"mutant {mutant.name}: its old snippet occurs {count} times in "
                        f"mvkm/{mutant.file}; update it in tests/mutants.py")
    assert mutants.snippet_statement_lines(mutant, mutants.PACKAGE)


def test_every_public_estimator_and_core_module_is_mutated():
    files = {m.file for m in MUTANTS}
    assert {"rkm.py", "ppca.py", "kpls.py", "smm.py", "kernels.py", "features.py", "linalg.py",
            "stiefel.py", "preimage.py", "timeseries.py"} <= files


@pytest.mark.parametrize("mutant", [MUTANTS[0], MUTANTS[-1]], ids=lambda m: m.name)
def test_applying_a_mutant_changes_exactly_its_file(mutant, tmp_path):
    copy = mutants.copy_package(mutants.PACKAGE, tmp_path)
    mutants.apply_mutant(mutant, copy)
    changed = []
    for path in sorted(mutants.PACKAGE.rglob("*.py")):
        rel = path.relative_to(mutants.PACKAGE)
        if "__pycache__" in rel.parts:
            continue
        if not filecmp.cmp(path, copy / rel, shallow=False):
            changed.append(str(rel))
    assert changed == [mutant.file]
    text = (copy / mutant.file).read_text()
    assert mutant.new in text and text.count(mutant.old) == 0 or mutant.old in mutant.new
    # the working tree is untouched
    assert mutants.snippet_count(mutant) == 1


def test_a_snippet_that_no_longer_matches_fails_loudly(tmp_path):
    copy = mutants.copy_package(mutants.PACKAGE, tmp_path)
    orphan = mutants.Mutant("orphan", "no such code", "rkm.py", "this line is not in rkm.py\n",
                            "x\n", "nothing")
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutants.apply_mutant(orphan, copy)
    assert mutants.check_snippets([orphan])


def test_a_chapter_that_imports_mvkm_through_a_module_beside_it_is_checked(tmp_path):
    """Part IV's experiment chapters import mvkm only through ``smm_common.py``: they must
    not be skipped as chapters that do not use the package."""
    import json

    def chapter(folder: Path, source: str) -> Path:
        folder.mkdir(exist_ok=True)
        path = folder / "chapter.ipynb"
        path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": [source]}]}))
        return path

    assert mutants._imports_mvkm(chapter(tmp_path / "direct", "import numpy as np\nfrom mvkm import RBF"))
    assert not mutants._imports_mvkm(chapter(tmp_path / "none", "import numpy as np"))
    helper = chapter(tmp_path / "helper", "from helpers import fit\nfit()")
    assert not mutants._imports_mvkm(helper)                     # no helpers.py yet
    (tmp_path / "helper" / "helpers.py").write_text("import numpy\n")
    assert not mutants._imports_mvkm(helper)                     # a helper without mvkm
    (tmp_path / "helper" / "helpers.py").write_text("import numpy\nimport mvkm\n")
    assert mutants._imports_mvkm(helper)
    book = Path(mutants.ROOT) / "book" / "smm"
    for name in ("experiments", "images", "motion"):
        assert mutants._imports_mvkm(book / f"{name}.ipynb"), name
