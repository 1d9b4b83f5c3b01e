"""The reading path of the chapters that follow the book's frame (docs/writing.md).

``tools/reading_path.py`` measures, from the notebooks, what a reader sees of
each chapter's code; the chapters in ``FRAMED`` are held to the frame's limits.
A part joins ``FRAMED`` when its chapters have been rewritten to the frame
(Parts II-V: the issues "A book people learn from (2 of 3)" and "(3 of 3)").
The rendered pages are measured in a browser by ``tools/check_rendering.py``
(CI runs it after ``make book``), against the same list.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import reading_path  # noqa: E402

FRAMED, METHOD = reading_path.FRAMED, reading_path.METHOD
MIN_FIGURES = 4
MAX_MEDIAN, MAX_LINES, MAX_ASSERTS = 6, 20, 3

CHAPTERS = {ch.key: ch for ch in reading_path.measure_all()}


def test_the_framed_chapters_exist():
    assert FRAMED <= set(CHAPTERS), sorted(FRAMED - set(CHAPTERS))
    assert METHOD <= FRAMED


@pytest.mark.parametrize("key", sorted(FRAMED))
def test_code_in_view_is_short(key):
    ch = CHAPTERS[key]
    assert ch.median <= MAX_MEDIAN, f"median cell in view {ch.median} lines (at most {MAX_MEDIAN})"
    assert ch.longest <= MAX_LINES, f"a cell in view has {ch.longest} lines (at most {MAX_LINES})"
    assert ch.wide == 0, f"{ch.wide} lines in view are longer than {reading_path.MAX_WIDTH} characters"


@pytest.mark.parametrize("key", sorted(FRAMED))
def test_checks_stay_out_of_the_reading_path(key):
    ch = CHAPTERS[key]
    assert ch.asserts <= MAX_ASSERTS, f"{ch.asserts} asserts in view (at most {MAX_ASSERTS})"
    assert not ch.passed, f"printed lines that only say a check passed: {ch.passed[:3]}"


@pytest.mark.parametrize("key", sorted(FRAMED))
def test_figures_are_captioned(key):
    ch = CHAPTERS[key]
    assert ch.captioned == ch.figures, f"{ch.figures - ch.captioned} of {ch.figures} figures lack a caption"
    if key in METHOD:
        assert ch.figures >= MIN_FIGURES, f"{ch.figures} figures (a method chapter has {MIN_FIGURES})"


@pytest.mark.parametrize("key", sorted(FRAMED))
def test_no_function_is_defined_twice(key):
    assert not CHAPTERS[key].shared, f"also defined elsewhere: {sorted(CHAPTERS[key].shared)}"


def test_the_measure_sees_what_it_should(tmp_path):
    """The measure on a made-up notebook: what is in view, folded, captioned, passed."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    shown = nbformat.v4.new_code_cell("x = 1\n" + "y = 2  # " + "z" * 80 + "\nassert x == 1")
    shown.outputs = [nbformat.v4.new_output("stream", text="all checks pass\nvalue 3\n")]
    hidden = nbformat.v4.new_code_cell("assert True\n" * 30, metadata={"tags": ["remove-cell"]})
    hidden.outputs = [nbformat.v4.new_output("stream", text="True\n")]
    fig = nbformat.v4.new_code_cell("def plot_it():\n    pass", metadata={
        "mystnb": {"figure": {"caption": "A figure."}}})
    fig.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": ""})]
    bare = nbformat.v4.new_code_cell("plot_it()")
    bare.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "", "text/plain": ""})]
    nb.cells = [shown, hidden, fig, bare]
    path = tmp_path / "made_up.ipynb"
    nbformat.write(nb, path)
    ch = reading_path.measure(path)
    assert ch.lines == [3, 2, 1] and ch.longest == 3 and ch.wide == 1 and ch.asserts == 1
    assert ch.passed == ["all checks pass"]
    assert (ch.figures, ch.captioned) == (2, 1)
    assert ch.defines == {"plot_it"}
