"""Sphinx extension: keep the built HTML free of network resources.

Jupyter Book 1.x always loads sphinx-thebe, which writes a hard-coded
``THEBE_JS_URL`` pointing at a CDN into every page even when Thebe is off.
The book has no live-code button (Binder and Colab launch buttons are plain
links), so this extension drops those scripts from each page. Math is served
by the vendored MathJax 4 of ``book/_vendor/mathjax`` (see _config.yml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_DROP = ("sphinx-thebe.js", "THEBE_JS_URL")
_VENDOR = Path(__file__).resolve().parents[1] / "_vendor"    # book/_vendor: mathjax/


def _is_remote_or_thebe(script: Any) -> bool:
    filename = str(getattr(script, "filename", script) or "")
    body = str(getattr(script, "attributes", {}).get("body", ""))
    if filename.startswith(("http://", "https://", "//")):
        return True
    return any(token in filename or token in body for token in _DROP)


def _strip_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_remote_or_thebe(s)]


def _serve_vendored(app: Any, config: Any) -> None:
    # Added here, not in _config.yml's html_static_path: Jupyter Book would inject every
    # .js file under a static path into every page (MathJax's 60 font and extension files).
    config.html_static_path = list(config.html_static_path) + [str(_VENDOR)]


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", _serve_vendored)
    app.connect("html-page-context", _strip_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
