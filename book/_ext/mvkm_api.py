"""Sphinx extension: the API reference (book/reference/) names objects as users import them.

``mvkm`` re-exports its main objects (``from mvkm import KernelPPCA``), and the
reference documents them under that public name (``mvkm.KernelPPCA``), as
scikit-learn does. The docstrings, written inside their modules, cite them by
the defining module's path (``:func:`mvkm.linalg.top_eigh```) or by the bare
name (``:func:`top_eigh``` in :mod:`mvkm.linalg`). Both are the same object:
a reference that Sphinx cannot resolve is tried again under the public name, so
``mvkm.linalg.top_eigh`` and ``mvkm.features.Nystrom.fit`` link to
``mvkm.top_eigh`` and ``mvkm.Nystrom.fit``. A reference to anything else that is
missing stays missing (a warning, so ``-W`` fails).

It also leaves out of the reference the ``set_*_request`` methods that
scikit-learn adds to every estimator for metadata routing (their docstrings are
scikit-learn's, with references into scikit-learn's own documentation).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_ROUTING = re.compile(r"^set_\w+_request$")


def _public_names() -> dict[str, str]:
    """``{"mvkm.linalg.top_eigh": "mvkm.top_eigh", ...}``: each re-exported object's two paths."""
    mvkm = importlib.import_module("mvkm")
    aliases = {}
    for name in mvkm.__all__:
        obj = getattr(mvkm, name)
        module = getattr(obj, "__module__", None)
        if module and module != "mvkm" and not isinstance(obj, type(mvkm)):
            aliases[f"{module}.{name}"] = f"mvkm.{name}"
    return aliases


def _candidates(node: Any, aliases: dict[str, str]) -> list[str]:
    """The full paths a missing ``py`` reference may mean, most specific first."""
    target = node["reftarget"].lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    paths = [target]
    if module:
        paths.append(f"{module}.{target}")       # a bare name in a module's docstring
    if module and cls:
        # a bare name in the docstring of a re-exported class (``mvkm.CayleyAdam``):
        # the names of its defining module (``mvkm.stiefel``)
        defining = {public: private for private, public in aliases.items()}.get(f"{module}.{cls}")
        if defining:
            paths.append(f"{defining.rsplit('.', 1)[0]}.{target}")
    found = []
    for path in paths:
        found.append(path)
        for private, public in aliases.items():
            if path == private or path.startswith(private + "."):
                found.append(public + path[len(private):])
    return list(dict.fromkeys(found))


def _resolve_public(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    for path in _candidates(node, app.env.mvkm_public_names):
        resolved = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], path,
                                       node, contnode)
        if resolved is not None:
            return resolved
    return None


def _skip_routing(app: Any, what: str, name: str, obj: Any, skip: bool, options: Any) -> bool | None:
    return True if what == "class" and _ROUTING.match(name) else None


def _load(app: Any) -> None:
    app.env.mvkm_public_names = _public_names()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _load)
    app.connect("missing-reference", _resolve_public)
    app.connect("autodoc-skip-member", _skip_routing)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
