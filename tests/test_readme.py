"""Every ```python block of README.md and its pages runs as written, on its own (issue 14, item 12).

Each block is executed in a fresh namespace, in a subprocess-free ``exec``,
from the repository root: a reader who pastes one block into a fresh
interpreter must get no NameError. New blocks are picked up automatically.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


# The README and the pages it links to for the rest (issue 26, item 5)
PAGES = ["README.md", "docs/package.md", "docs/teaching.md", "benchmarks/README.md", "tests/MUTANTS.md"]


def _blocks(page: str = "README.md") -> list[tuple[int, str]]:
    text = (ROOT / page).read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


ALL = [(page, line, code) for page in PAGES for line, code in _blocks(page)]


def test_the_readme_has_python_blocks():
    assert _blocks(), "README.md has no ```python block"


def test_every_markdown_page_with_python_blocks_is_executed():
    pages = [p for p in ROOT.glob("*.md")] + list((ROOT / "docs").glob("*.md")) \
        + [ROOT / "benchmarks" / "README.md", ROOT / "tests" / "MUTANTS.md"]
    with_code = {str(p.relative_to(ROOT)) for p in pages if p.is_file() and _BLOCK.search(p.read_text())}
    assert with_code <= set(PAGES), f"add to PAGES: {sorted(with_code - set(PAGES))}"


def test_the_readme_is_short_and_links_to_the_rest():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) < 12 * 1024, len(text.encode())
    for page in PAGES[1:] + ["mvkm/data/README.md"]:
        assert f"]({page})" in text, page
        assert (ROOT / page).is_file(), page


@pytest.mark.parametrize("page, line, code", ALL, ids=[f"{p}:{l}" for p, l, _ in ALL])
def test_readme_python_block_runs_on_its_own(page, line, code, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__readme__"})
