"""Every ```python block of README.md runs as written, on its own (issue 14, item 12).

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


def _blocks() -> list[tuple[int, str]]:
    text = (ROOT / "README.md").read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def test_the_readme_has_python_blocks():
    assert _blocks(), "README.md has no ```python block"


@pytest.mark.parametrize("line, code", _blocks(), ids=[f"line{l}" for l, _ in _blocks()])
def test_readme_python_block_runs_on_its_own(line, code, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
