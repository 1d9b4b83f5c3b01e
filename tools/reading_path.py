"""What a reader of the book sees of each chapter's code, measured from the notebooks.

Usage::

    python tools/reading_path.py [NOTEBOOK ...]     # default: every chapter of _toc.yml

prints one row per chapter. ``tests/test_reading_path.py`` holds the chapters that
follow the book's frame (docs/writing.md) to its limits.

A code cell is *in view* unless a tag removes or folds its input (``remove-cell``,
``remove-input``, ``hide-cell``, ``hide-input``); its output is in view unless a tag
removes or folds the output. For each chapter:

* ``median``, ``longest``: lines of code per cell in view;
* ``wide``: lines of code in view longer than 79 characters;
* ``asserts``: ``assert`` statements in view;
* ``passed``: printed lines in view that only say a check passed (``... True``,
  ``checks pass``);
* ``figures``, ``captioned``: images in view, and those whose cell gives a caption
  (cell metadata ``mystnb.figure.caption``);
* ``shared``: the functions and classes this chapter defines that another chapter
  (or a part's module, ``book/*/*.py``) defines too.
"""

from __future__ import annotations

import ast
import json
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
#: Chapters written to the book's frame (docs/writing.md), as ``<part>/<chapter>``: held to its
#: limits by tests/test_reading_path.py, their pages measured by tools/check_rendering.py.
#: A part joins when its chapters are rewritten (Parts II-V: issues 36 and 37).
FRAMED = {
    "foundations/kernels", "foundations/features", "foundations/duality", "foundations/stiefel",
    "rkm/objective", "rkm/primal", "rkm/dual", "rkm/inference",
    "rkm/sines", "rkm/santafe", "rkm/explorer", "rkm/parametric",
    "ppca/spaces", "ppca/primal", "ppca/dual", "ppca/sampling", "ppca/preimage",
    "ppca/experiments", "ppca/novelty",
    "kpls/from_pls", "kpls/objective", "kpls/computing", "kpls/experiments",
    "kpls/explorer",
    "smm/matrix_inputs", "smm/primal", "smm/symmetric", "smm/experiments",
    "smm/images", "smm/motion", "smm/explorer",
    "scale/cost", "scale/streaming", "scale/matfree", "scale/dask",
}
#: Method chapters (not experiments or explorers): at least 4 captioned figures each.
METHOD = {
    "foundations/kernels", "foundations/features", "foundations/duality", "foundations/stiefel",
    "rkm/objective", "rkm/primal", "rkm/dual", "rkm/inference", "rkm/parametric",
    "ppca/spaces", "ppca/primal", "ppca/dual", "ppca/sampling", "ppca/preimage",
    "ppca/novelty",
    "kpls/from_pls", "kpls/objective", "kpls/computing",
    "smm/matrix_inputs", "smm/primal", "smm/symmetric",
    "scale/cost", "scale/streaming", "scale/matfree", "scale/dask",
}
HIDE_INPUT = {"remove-cell", "remove-input", "hide-cell", "hide-input"}
HIDE_OUTPUT = {"remove-cell", "remove-output", "hide-cell", "hide-output"}
MAX_WIDTH = 79
_PASSED = re.compile(r"(\bTrue\s*$)|\bchecks? pass|\ball (the )?checks\b|\bpassed\b", re.I)
_IMAGE = ("image/png", "image/svg+xml", "image/jpeg")


@dataclass
class Chapter:
    """The reading-path figures of one chapter."""

    path: Path
    lines: list[int] = field(default_factory=list)
    wide: int = 0
    asserts: int = 0
    passed: list[str] = field(default_factory=list)
    figures: int = 0
    captioned: int = 0
    defines: set[str] = field(default_factory=set)
    shared: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        try:
            return str(self.path.resolve().relative_to(ROOT / "book").with_suffix(""))
        except ValueError:
            return str(self.path.with_suffix(""))

    @property
    def median(self) -> float:
        return statistics.median(self.lines) if self.lines else 0.0

    @property
    def longest(self) -> int:
        return max(self.lines, default=0)


def chapters() -> list[Path]:
    """The notebook chapters of ``_toc.yml``, in order (as the assignment builder lists them)."""
    from assignments import chapters as toc_chapters

    return [path for _, path in toc_chapters(ROOT)]


def _defined(source: str) -> set[str]:
    code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    data = output.get("data", {})
    if any(k in data for k in _IMAGE) or "text/html" in data:
        return ""
    return "".join(data.get("text/plain", ""))


def measure(path: Path) -> Chapter:
    """The figures of one notebook (``shared`` is filled in by :func:`measure_all`)."""
    nb = json.loads(Path(path).read_text())
    ch = Chapter(Path(path))
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = cell.get("metadata", {})
        tags = set(meta.get("tags", []))
        source = "".join(cell["source"])
        ch.defines |= _defined(source)
        if not tags & HIDE_INPUT and source.strip():
            lines = source.rstrip("\n").split("\n")
            ch.lines.append(len(lines))
            ch.wide += sum(len(ln) > MAX_WIDTH for ln in lines)
            ch.asserts += sum(ln.strip().startswith("assert ") for ln in lines)
        if tags & HIDE_OUTPUT:
            continue
        caption = (meta.get("mystnb", {}).get("figure", {}) or {}).get("caption", "")
        for out in cell.get("outputs", []):
            if any(k in out.get("data", {}) for k in _IMAGE):
                ch.figures += 1
                ch.captioned += bool(str(caption).strip())
            for ln in _text(out).splitlines():
                if _PASSED.search(ln):
                    ch.passed.append(ln.strip())
    return ch


def part_modules() -> list[Path]:
    """The modules beside the chapters (``book/<part>/*.py``), which chapters import."""
    return sorted(p for p in (ROOT / "book").glob("*/*.py") if p.parent.name != "_ext")


def measure_all(paths: list[Path] | None = None) -> list[Chapter]:
    """The figures of every chapter, with the names defined in more than one place."""
    every = [measure(p) for p in chapters()]
    where: dict[str, set[str]] = defaultdict(set)
    for ch in every:
        for name in ch.defines:
            where[name].add(ch.key)
    for mod in part_modules():
        for name in _defined(mod.read_text()):
            where[name].add(str(mod.relative_to(ROOT)))
    wanted = every if paths is None else [measure(p) for p in paths]
    for ch in wanted:
        ch.shared = {name for name in ch.defines if len(where[name] - {ch.key}) > 0}
    return wanted


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or None
    rows = measure_all(paths)
    print(f"{'chapter':28} {'median':>6} {'longest':>7} {'wide':>4} {'asserts':>7} "
          f"{'passed':>6} {'figures':>7} {'captioned':>9}  shared")
    for ch in rows:
        print(f"{ch.key:28} {ch.median:6.1f} {ch.longest:7d} {ch.wide:4d} {ch.asserts:7d} "
              f"{len(ch.passed):6d} {ch.figures:7d} {ch.captioned:9d}  {', '.join(sorted(ch.shared))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
