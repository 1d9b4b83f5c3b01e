"""Row blocks and a small thread pool for the element-wise passes over n x n matrices.

numpy releases the GIL inside its element-wise loops and BLAS calls, so blocks
of a Gram matrix can be processed truly in parallel with threads. Private:
used by :mod:`mvkm.kernels` and :mod:`mvkm._validation`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from numbers import Integral
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

T = TypeVar("T")

# Row blocks of about 4 MiB: passes run block by block while the block is in
# cache, and temporaries stay small.
_BLOCK_BYTES = 1 << 22
# Below this size a Gram matrix is built serially (threads cost more than they save).
_PARALLEL_MIN_N = 2048


_N_JOBS: ContextVar[int | None] = ContextVar("mvkm_n_jobs", default=None)
_CONTROLLER: Any = None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_n_jobs(n_jobs: Any, name: str = "n_jobs") -> int | None:
    """``None``, ``-1`` (every usable core) or a positive integer; raise a ``ValueError`` otherwise."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or not (n_jobs >= 1 or n_jobs == -1):
        raise ValueError(f"{name} must be None, -1 or a positive integer, got {n_jobs!r}")
    return int(n_jobs)


@contextmanager
def limit_threads(n_jobs: int | None) -> Iterator[None]:
    """Within the block, mvkm's thread pool uses ``n_jobs`` workers (``None``: the default rule)."""
    token = _N_JOBS.set(check_n_jobs(n_jobs))
    try:
        yield
    finally:
        _N_JOBS.reset(token)


def _controller() -> Any:
    """One ``threadpoolctl.ThreadpoolController`` for the process (made at first use).

    ``threadpool_limits`` scans the loaded libraries at every call (2 ms, measured),
    which a pass over a 1000 x 1000 matrix does not repay; the controller keeps
    the libraries found when it was made (numpy's and scipy's BLAS are loaded by
    then, since :mod:`mvkm` imports both).
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def _user_limit() -> int | None:
    """The thread limit the user set: threadpoolctl's current BLAS/OpenMP limit, or the
    environment (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``)."""
    limits: list[int] = []
    try:  # the current limits: the environment at start-up, or a threadpool_limits block
        limits = [int(info["num_threads"]) for info in _controller().info()
                  if info.get("user_api") in ("blas", "openmp") and info.get("num_threads")]
    except Exception:  # pragma: no cover - threadpoolctl unusable: the environment decides
        pass
    if not limits:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            value = os.environ.get(var, "").strip().split(",")[0]
            if value.isdigit() and int(value) >= 1:
                limits.append(int(value))
    return min(limits) if limits else None


def n_threads(n_jobs: int | None = None) -> int:
    """Worker threads for the element-wise passes over n x n matrices.

    In order: ``n_jobs`` if given (``-1``: every usable core), else the ``n_jobs``
    of an enclosing :func:`limit_threads` (an estimator's ``n_jobs``), else the
    usable cores, at most 8, and at most the limit the user set for BLAS/OpenMP
    (``threadpoolctl.threadpool_limits`` or ``OMP_NUM_THREADS`` and friends),
    so that a process held to one thread (a Dask worker, a shared machine) stays
    on one.
    """
    cores = _cores()
    n_jobs = check_n_jobs(n_jobs)
    if n_jobs is None:
        n_jobs = _N_JOBS.get()
    if n_jobs is not None:
        return cores if n_jobs == -1 else max(1, min(n_jobs, cores))
    limit = _user_limit()
    return max(1, min(cores, 8, limit if limit is not None else cores))


def run_parallel(task: Callable[[T], Any], items: Iterable[T], n: int) -> list[Any]:
    """Return ``[task(item) for item in items]``, computed on threads when ``n`` is large.

    ``n`` is the size of the matrix being processed: below ``_PARALLEL_MIN_N``
    the items run serially; above, on :func:`n_threads` workers. BLAS is held to
    one thread meanwhile, so that tile products do not oversubscribe the cores.
    """
    items = list(items)
    if len(items) <= 1:
        return [task(item) for item in items]
    workers = n_threads() if n >= _PARALLEL_MIN_N else 1
    with _controller().limit(limits=1, user_api="blas"):
        if workers == 1:
            return [task(item) for item in items]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(task, items))


def row_blocks(n_rows: int, n_cols: int) -> Iterator[slice]:
    """Yield slices of rows covering ``range(n_rows)``, about 4 MiB each."""
    step = max(1, _BLOCK_BYTES // (8 * max(n_cols, 1)))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def row_col_means(K: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Row and column means of ``K`` in one (threaded) pass over its row blocks."""
    blocks = list(row_blocks(*K.shape))
    row = np.empty(K.shape[0])
    col_parts = np.zeros((len(blocks), K.shape[1]))

    def sums(item: tuple[int, slice]) -> None:
        b, blk = item
        part = K[blk]
        row[blk] = part.sum(axis=1)
        part.sum(axis=0, out=col_parts[b])

    run_parallel(sums, enumerate(blocks), K.shape[0])
    row /= K.shape[1]
    col = col_parts.sum(axis=0)
    col /= K.shape[0]
    return row, col
