"""Optional dependencies: PyTorch (``mvkm[torch]``), reservoirpy and sktime (``mvkm[data]``).

``import mvkm`` and every model on the CPU work without torch. A path that
cannot run without it (the Stiefel solvers, ``device=``, parametric maps)
calls :func:`require_torch`, which raises an ``ImportError`` naming the extra
to install. Where torch only speeds up a CPU pass (the cosine of random Fourier
features and the column sums of the streamed primal, the product of
:func:`mvkm.covariance.features_times`, the kernel tiles of the matrix-free
operator :mod:`mvkm.matfree`), :func:`optional_torch` returns ``None`` without
it and the caller falls back to numpy: measured on one thread, n = 20,000 rows,
D = 1010 features, the streamed moments take 2.0x the CPU time (0.77 s against
0.38 s) and ``features_times`` 4x (0.41 s against 0.10 s); on one and two
threads, n = 8000 and 20,000, RBF, a matrix-free block product (b = 20) takes
1.3-1.6x the CPU time and ``matfree_top_eigh`` (top 10) 1.1-1.5x
(``benchmarks/bench_matfree.py --numpy``; ``benchmarks/README.md``).
"""

from __future__ import annotations

import functools
from typing import Any

TORCH_HINT = 'pip install "mvkm[torch]"'
DATA_HINT = 'pip install "mvkm[data]"'


@functools.cache
def optional_torch() -> Any | None:
    """The ``torch`` module, or ``None`` where it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def require_torch(what: str) -> Any:
    """The ``torch`` module; an ``ImportError`` saying how to install it if it is absent.

    Parameters
    ----------
    what : str
        What needs torch, for the message (e.g. ``"device='cuda'"``).
    """
    torch = optional_torch()
    if torch is None:
        raise ImportError(f"{what} needs PyTorch, which is not installed here: {TORCH_HINT}")
    return torch
