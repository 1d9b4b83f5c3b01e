"""Check that a built HTML book works with the network off.

Usage: ``python tests/check_offline_html.py _build/html``

Fails (exit 1) if any HTML page loads a script, stylesheet or font from another
host (a CDN), or if a page that contains math does not load the vendored
MathJax 4 from ``_static``, or if a page with display math does not load
``_static/mvkm.css`` (which lets long equations and code lines scroll
sideways instead of being clipped at the column edge), or if an exercise's
solution (its ``{solution}`` prose or its solution cell) is shown without a
click, or if TeX shows as text on a page (a control word such as ``\\frac`` or a
dollar sign outside math, code and scripts: what Markdown leaves when a line of an
inline formula starts with ``+ `` or a bibliography entry uses ``\\texttt``).
Links (``<a href=...>``, e.g. the Binder and Colab
launch buttons) are allowed: they are navigation, not resources.

Explorer pages: a notebook whose code calls matplotlib's ``to_jshtml`` gives
the HTML reader precomputed frames behind a slider, the control that works
without a Python kernel (an ipywidget does not). Its page must contain that
control: a ``<div class="animation">`` with an ``<input type="range">``
inside. The rule is keyed on the page's source notebook (found under
``_sources/`` of the build, or in the repository the build sits in), and,
where no source is found, on the page itself (its code shows ``to_jshtml``).
Any animation player on any page must have its slider. A page without
animation code and without a player is not concerned.
"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

# Resources a page loads by itself: <script src>, <link href> (stylesheets,
# preloads, fonts), <img src>, <iframe src>, and CSS @import / url().
_RESOURCE = re.compile(
    r"""<(?:script|img|iframe|source)\b[^>]*\bsrc\s*=\s*["']([^"']+)["']"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']([^"']+)["']"""
    r"""|@import\s+(?:url\()?["']?([^"')\s]+)"""
    r"""|url\(\s*["']?(https?:[^"')\s]+)""",
    re.IGNORECASE,
)
_CDN_WORD = re.compile(r"cdn\.|cdnjs|jsdelivr|unpkg\.com|googleapis", re.IGNORECASE)
_MATH = re.compile(r'class="[^"]*\bmath\b')
_DISPLAY_MATH = re.compile(r'<div class="math\b')
_SOLUTION_DIV = re.compile(r'<div class="solution\b([^"]*)"')
# the first line of a solution cell, "# Exercise 2 (3 points): ...", as Pygments highlights it
_SOLUTION_CELL = re.compile(r'<span class="c1">#\s*Exercise [\d.]+ \(\d+ points?\)')


class _AnimationPlayers(HTMLParser):
    """Count matplotlib jshtml players (``<div class="animation">``) and those with a range input inside."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.players = 0
        self.with_slider = 0
        self._depth = 0            # <div> nesting inside the current player; 0: outside any player
        self._has_slider = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag == "div":
            if self._depth:
                self._depth += 1
            elif "animation" in a.get("class", "").split():
                self._depth, self._has_slider = 1, False
                self.players += 1
        elif tag == "input" and self._depth and a.get("type", "").lower() == "range" and not self._has_slider:
            self._has_slider = True
            self.with_slider += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._depth:
            self._depth -= 1


def animation_problems(html: str, animated: bool | None = None) -> list[str]:
    """Problems of a page's precomputed-frames control (see the module docstring).

    ``animated`` says whether the page's source notebook builds a ``to_jshtml``
    animation; ``None`` (source unknown) infers it from the page's own code.
    """
    if animated is None:
        animated = "to_jshtml" in html
    if not animated and 'class="animation' not in html:
        return []
    parser = _AnimationPlayers()
    parser.feed(html)
    parser.close()
    found = []
    if animated and parser.players == 0:
        found.append("the notebook builds a to_jshtml animation but the page has no player "
                     '(<div class="animation">): the HTML reader gets no control that works without a kernel')
    if parser.with_slider < parser.players:
        found.append('an animation player (<div class="animation">) has no slider (<input type="range">) inside')
    return found


#: The calls that build matplotlib's JavaScript player in a chapter's code.
_PLAYER_CALLS = ("to_jshtml", "animation_html")
_MYST_CODE_CELL = re.compile(r"^(`{3,}|~{3,})\{code-cell\}[^\n]*\n(.*?)^\1", re.S | re.M)


def builds_animation(source: Path) -> bool:
    """Whether a chapter's source (a notebook, or MyST text) builds a player in its code cells.

    ``to_jshtml`` directly, or ``mvkm.plotting.animation_html``, which calls it.
    """
    text = source.read_text(encoding="utf-8", errors="replace")
    try:
        nb = json.loads(text)
    except ValueError:
        # MyST markdown: its code cells only (the API reference's page of mvkm.plotting names
        # animation_html in an autodoc directive and builds no player)
        return any(word in cell.group(2)
                   for cell in _MYST_CODE_CELL.finditer(text) for word in _PLAYER_CALLS)
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    return any(c.get("cell_type") == "code"
               and any(word in "".join(c.get("source", "")) for word in _PLAYER_CALLS)
               for c in cells)


def source_of(page: Path, root: Path) -> Path | None:
    """The source notebook (or .md) a page was built from, if it can be found, else None."""
    rel = page.relative_to(root).with_suffix("")
    for base in (root / "_sources", root.parent.parent):   # the build's copy; <repo>/_build/html
        for suffix in (".ipynb", ".ipynb.txt", ".md", ".md.txt"):
            candidate = base / f"{rel}{suffix}"
            if candidate.is_file():
                return candidate
    return None


class _ProseText(HTMLParser):
    """The text a reader sees as prose: outside math, code, scripts and the navigation."""

    _SKIP_TAGS = {"script", "style", "pre", "code", "nav", "head", "svg", "textarea"}
    _SKIP_CLASSES = {"math", "highlight", "cell_input", "cell_output", "bd-sidebar-primary",
                     "bd-toc", "search-button", "prev-next-area", "MathJax"}
    _VOID = {"br", "img", "input", "meta", "link", "hr", "source", "wbr", "area", "col", "embed"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []           # per open element: does it start a skipped region
        self.skipped = 0
        self.chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = tag in self._SKIP_TAGS or bool(classes & self._SKIP_CLASSES)
        self.stack.append(skip)
        self.skipped += skip

    def handle_endtag(self, tag: str) -> None:
        if tag in self._VOID or not self.stack:
            return
        self.skipped -= self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not self.skipped:
            self.chunks.append(data)


# TeX that reached the page as text: a control word (\\frac, \\texttt), or a dollar sign
# that no math role took (the book's prose has no other use for one).
_RAW_TEX = re.compile(r"\\(?:[A-Za-z]{2,}|[{}_^])|\$")


def raw_tex(html: str) -> list[str]:
    """TeX shown as text on a page (outside math, code and scripts), at most 5 snippets."""
    parser = _ProseText()
    parser.feed(html)
    parser.close()
    text = " ".join(parser.chunks)
    return [text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ")
            for m in _RAW_TEX.finditer(text)][:5]


def problems_in_page(html: str, animated: bool | None = None) -> list[str]:
    """Return the problems of one page: external resources and CDN URLs, math, solutions, animations.

    ``animated``: whether the page's source builds a ``to_jshtml`` animation
    (``None``: unknown, inferred from the page).
    """
    found: list[str] = []
    for match in _RESOURCE.finditer(html):
        url = next(g for g in match.groups() if g)
        if re.match(r"(https?:)?//", url):
            # A <link rel="canonical"> or similar is not loaded by the browser.
            tag = html[max(0, match.start()) : match.end()]
            if tag.lower().startswith("<link") and not re.search(
                r"""rel\s*=\s*["'][^"']*(stylesheet|preload|icon|modulepreload)""", tag, re.I
            ):
                continue
            found.append(f"external resource {url}")
    for match in _CDN_WORD.finditer(html):
        start = max(0, match.start() - 60)
        found.append(f"CDN reference ...{html[start:match.end() + 40]!r}...")
    if _MATH.search(html) and "_static/mathjax/tex-chtml.js" not in html:
        found.append("page has math but does not load the vendored _static/mathjax/tex-chtml.js")
    for match in _SOLUTION_DIV.finditer(html):
        if "dropdown" not in match.group(1).split():
            found.append("a {solution} is shown open: give it :class: dropdown")
    for match in _SOLUTION_CELL.finditer(html):
        # the cell (input and output) sits in a closed <details> of a hide-cell cell
        cell = max(html.rfind('<div class="cell ', 0, match.start()),
                   html.rfind('<div class="cell"', 0, match.start()))
        opened = html.rfind("<details", 0, match.start())
        if cell < 0 or "tag_hide-cell" not in html[cell:html.find(">", cell)] or opened < cell \
                or html.rfind("</details>", 0, match.start()) > opened \
                or re.search(r"\bopen\b", html[opened:html.find(">", opened)]):
            found.append("a solution cell is shown open: tag it hide-cell")
    if _DISPLAY_MATH.search(html) and "_static/mvkm.css" not in html:
        found.append("page has display math but does not load _static/mvkm.css (long equations clipped)")
    found += animation_problems(html, animated)
    found += [f"raw TeX on the page: ...{t}..." for t in raw_tex(html)]
    return found


def check_tree(root: Path) -> dict[str, list[str]]:
    """Check every ``*.html`` file under ``root``; map page -> problems."""
    if not root.is_dir():
        raise SystemExit(f"{root} is not a directory: build the book first (make book)")
    report = {}
    for page in sorted(root.rglob("*.html")):
        source = source_of(page, root)
        animated = builds_animation(source) if source is not None else None
        problems = problems_in_page(page.read_text(encoding="utf-8", errors="replace"), animated)
        if problems:
            report[str(page.relative_to(root))] = problems
    mathjax = root / "_static" / "mathjax" / "tex-chtml.js"
    if not mathjax.is_file():
        report["_static/mathjax"] = ["vendored MathJax 4 (tex-chtml.js, from book/_vendor/mathjax) is missing"]
    return report


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "_build/html")
    report = check_tree(root)
    n_pages = len(list(root.rglob("*.html")))
    if report:
        for page, problems in report.items():
            for problem in problems:
                print(f"{page}: {problem}")
        print(f"offline check FAILED: {len(report)} of {n_pages} pages need the network")
        return 1
    print(f"offline check passed: {n_pages} pages, math served from _static/mathjax")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
