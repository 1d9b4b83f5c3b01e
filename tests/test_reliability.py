"""Regression tests of issue 14 (reliability pass): each test failed before its fix.

Silent wrong answers (items 1-8), structural defects (9-11) and the README (12).
Tolerances are justified where they appear.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import mvkm

ROOT = Path(__file__).resolve().parents[1]
# Control characters other than newline: a non-raw docstring with "\a", "\b", "\t",
# "\f" holds BEL/BS/TAB/FF where "\alpha", "\bar", "\top", "\frac" were meant.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# ---------------------------------------------------------------- item 8
def _python_files():
    return sorted(p for d in ("mvkm", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_control_characters_in_sources_or_docstrings(path):
    text = path.read_text()
    bad = [i + 1 for i, line in enumerate(text.splitlines()) if _CONTROL.search(line)]
    assert not bad, f"{path.name}: control characters on lines {bad}"
    # A docstring's *value* (escape sequences decoded) must be free of them too.
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and _CONTROL.search(doc.replace("\n", " ")):
                name = getattr(node, "name", "<module>")
                raise AssertionError(f"{path.name}: the docstring of {name} holds control characters")


def test_no_control_characters_in_imported_docstrings():
    import mvkm.kernels

    for _, obj in inspect.getmembers(mvkm.kernels, inspect.isfunction):
        assert not _CONTROL.search((obj.__doc__ or "").replace("\n", " ")), obj.__name__
