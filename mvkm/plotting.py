"""What the book's chapters show beside their figures.

* :func:`animation_html`: matplotlib's JavaScript player for an animation, made
  to work offline (no icon font from a CDN);
* :func:`show_source`: the source of a helper, as a highlighted listing, so
  that a chapter shows the code it teaches without defining it a second time.

Importing this module imports neither matplotlib nor IPython.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["animation_html", "offline_player", "show_source"]

#: The player's Font Awesome icons, written as plain characters.
_ICONS = {
    "play": "&#9654;",
    "pause": "&#10074;&#10074;",
    "step-forward": "&#8250;",
    "step-backward": "&#8249;",
    "fast-forward": "&#187;",
    "fast-backward": "&#171;",
    "plus": "+",
    "minus": "&minus;",
}
_STYLESHEET = re.compile(r'<link rel="stylesheet"\s*href="https?://[^"]*font-awesome[^"]*">')
_ICON = re.compile(r'<i class="fa fa-([a-z-]+)( fa-flip-horizontal)?"></i>')


def _icon(match: re.Match[str]) -> str:
    if match.group(2):                      # the reversed "play" button
        return "&#9664;"
    return _ICONS.get(match.group(1), match.group(1))


def offline_player(html: str) -> str:
    """Rewrite the HTML of ``FuncAnimation.to_jshtml`` so that it needs no network.

    matplotlib's player links Font Awesome's stylesheet from a CDN for its
    buttons' icons; this drops the link and writes each icon as a character.

    Parameters
    ----------
    html : str
        The player, as returned by ``matplotlib.animation.Animation.to_jshtml``.

    Returns
    -------
    str
        The same player with no remote resource and no Font Awesome class.

    Raises
    ------
    TypeError
        If ``html`` is not a string.
    ValueError
        If ``html`` has no slider (it is not matplotlib's player), or still
        names a remote resource after the rewrite.
    """
    if not isinstance(html, str):
        raise TypeError(f"html must be a str (the output of to_jshtml), got {type(html).__name__}")
    if not re.search(r'<input[^>]*type="range"', html):
        raise ValueError("html has no slider (<input type=\"range\">): "
                         "pass the output of FuncAnimation(...).to_jshtml()")
    out = _ICON.sub(_icon, _STYLESHEET.sub("", html))
    if re.search(r'(?:src|href)="(?:https?:)?//', out) or "fa fa-" in out:
        raise ValueError("the player still loads a remote resource after the rewrite")
    return out


def animation_html(anim: Any, *, default_mode: str = "once") -> Any:
    """An animation as a player the HTML book can show offline.

    The frames are rendered now (``anim.to_jshtml``), so the reader of the
    HTML moves the slider without a kernel; the figure is closed, so that the
    notebook does not also show its last frame.

    Parameters
    ----------
    anim : matplotlib.animation.Animation
        The animation, e.g. a ``FuncAnimation``.
    default_mode : {"once", "loop", "reflect"}
        What the player does at the last frame.

    Returns
    -------
    IPython.display.HTML
        The player; display it, or make it a cell's last expression.
    """
    if not hasattr(anim, "to_jshtml"):
        raise TypeError("anim must be a matplotlib Animation (with to_jshtml), "
                        f"got {type(anim).__name__}")
    if default_mode not in ("once", "loop", "reflect"):
        raise ValueError(f"default_mode must be 'once', 'loop' or 'reflect', got {default_mode!r}")
    import matplotlib.pyplot as plt
    from IPython.display import HTML

    html = offline_player(anim.to_jshtml(default_mode=default_mode))
    fig = getattr(anim, "_fig", None)
    if fig is not None:
        plt.close(fig)
    return HTML(html)


def show_source(obj: Any) -> Any:
    """The source of a function or class, as a highlighted listing for a notebook.

    A chapter that teaches a helper kept in a module shows its code with this,
    so that the code is written once and read where it is taught.

    Parameters
    ----------
    obj : function or class
        Anything :func:`inspect.getsource` accepts.

    Returns
    -------
    IPython.display.Code
        The listing; make it a cell's last expression.
    """
    import inspect

    from IPython.display import Code

    try:
        source = inspect.getsource(obj)
    except (TypeError, OSError) as exc:
        raise TypeError(f"obj must be a function or class defined in a file, got {obj!r}") from exc
    return Code(inspect.cleandoc(source) if source.startswith(" ") else source, language="python")
