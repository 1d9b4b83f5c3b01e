"""mvkm: multi-view kernel machines, the package behind the mvkm book.

Modules follow the data flow of every model in the book: views ->
:mod:`mvkm.kernels` / :mod:`mvkm.features` -> centering -> a linear-algebra
core (:mod:`mvkm.linalg`, :mod:`mvkm.stiefel`) -> an estimator
(:class:`MultiViewRKM` in :mod:`mvkm.rkm`, :class:`KernelPPCA` in
:mod:`mvkm.ppca`, :class:`MultiViewKPLS` in :mod:`mvkm.kpls`, :class:`LowRankSMM` in :mod:`mvkm.smm`) -> inference, forecasting (:mod:`mvkm.timeseries`),
sampling and pre-images (:mod:`mvkm.preimage`).

:mod:`mvkm.stiefel` needs PyTorch; it (and its names ``CayleyAdam`` and
``maximize_trace``) is imported on first use, so ``import mvkm`` stays fast
for code that never touches the Stiefel manifold. So is :mod:`mvkm.matfree`
(``KernelOperator``, ``matfree_top_eigh``: kernel matrices too large to store),
which computes its tiles with torch where it is installed and with numpy
otherwise.
:mod:`mvkm.covariance` holds the streamed reduction of every primal model
(``feature_moments``: means and scatter of the stacked features, in chunks, on
a torch device or a Dask cluster); it imports torch and dask only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import (covariance, datasets, evaluation, features, kernels, kpls, linalg, plotting, ppca,
               preimage, rkm, smm, timeseries)
from .features import Identity, Nystrom, RandomFourierFeatures, poly2_features
from .kernels import RBF, Laplacian, Linear, Polynomial, center_gram, center_test_gram
from .linalg import flip_signs, kernel_top_eigh, psd_sqrt, rotate_to_diagonal, top_eigh
from .kpls import MultiViewKPLS
from .ppca import KernelPPCA
from .rkm import MultiViewRKM, choose_algorithm
from .smm import LowRankSMM

# The version, set here only: pyproject.toml reads it (dynamic, [tool.setuptools.dynamic]).
__version__ = "0.1.0"

_LAZY = {"stiefel": None, "CayleyAdam": "stiefel", "maximize_trace": "stiefel",
         "matfree": None, "KernelOperator": "matfree", "matfree_top_eigh": "matfree"}

__all__ = [
    "covariance",
    "datasets",
    "evaluation",
    "plotting",
    "ppca",
    "preimage",
    "rkm",
    "timeseries",
    "KernelPPCA",
    "MultiViewKPLS",
    "kpls",
    "MultiViewRKM",
    "choose_algorithm",
    "LowRankSMM",
    "smm",
    "features",
    "kernels",
    "linalg",
    "stiefel",
    "Identity",
    "Nystrom",
    "RandomFourierFeatures",
    "poly2_features",
    "Linear",
    "RBF",
    "Polynomial",
    "Laplacian",
    "center_gram",
    "center_test_gram",
    "flip_signs",
    "psd_sqrt",
    "rotate_to_diagonal",
    "top_eigh",
    "kernel_top_eigh",
    "CayleyAdam",
    "maximize_trace",
    "matfree",
    "KernelOperator",
    "matfree_top_eigh",
]


def __getattr__(name: str) -> Any:
    """Import :mod:`mvkm.stiefel` (torch) and :mod:`mvkm.matfree` lazily (PEP 562)."""
    if name in _LAZY:
        module = importlib.import_module("." + (_LAZY[name] or name), __name__)
        return module if _LAZY[name] is None else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
