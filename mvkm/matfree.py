r"""Matrix-free kernel matrices: products and top eigenpairs without storing :math:`K`.

Every dual model of the book ends in the top eigenpairs of a centred Gram
matrix :math:`K_c = M_c K M_c` (:math:`M_c = I - \frac1n 1 1^\top`). Stored,
:math:`K` takes :math:`8 n^2` bytes: 80 GB at :math:`n = 10^5`. This module
never forms it. :class:`KernelOperator` applies :math:`K_c` to a block
:math:`Z \in \mathbb{R}^{n \times b}` by recomputing square tiles
:math:`K_{IJ} = [k(x_i, x_j)]_{i \in I, j \in J}` from the data at every
product (the idea behind KeOps' symbolic matrices, Charlier et al., 2021), in
memory :math:`O(n (d + b))` plus one tile, and :func:`matfree_top_eigh` finds
the top eigenpairs with a block eigensolver started from a Nystrom
approximation (Williams & Seeger, 2001), so that each :math:`n^2` pass over the
kernel serves :math:`b \approx 2s` vectors and few passes are needed.

The tiles are computed in ``torch`` on the CPU or, when available, on a CUDA
device; numpy arrays go in and come out (float64). Without torch (it is the
extra ``mvkm[torch]``) numpy computes them on the CPU, with the same tiles, the
same Python threads over tile rows (numpy releases the GIL in its products and
element-wise passes) and the same numbers to round-off; measured by
``benchmarks/bench_matfree.py --numpy``: see ``benchmarks/README.md``.
``device="cuda"`` needs torch.

References
----------
B. Charlier, J. Feydy, J. A. Glaunes, F.-D. Collin and G. Durif, "Kernel
operations on the GPU, with autodiff, without memory overflows", JMLR 22(74),
2021. C. K. I. Williams and M. Seeger, "Using the Nystrom method to speed up
kernel machines", NIPS 13, 2001. Y. Zhou and Y. Saad, "A Chebyshev-Davidson
algorithm for large symmetric eigenproblems", SIAM J. Matrix Anal. Appl.
29(3), 2007.
"""

from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse.linalg
from numpy.typing import ArrayLike, NDArray

from ._optional import TORCH_HINT, optional_torch
from ._parallel import _controller, n_threads
from ._validation import (
    check_array,
    check_count,
    check_n_components,
    check_random_state,
    check_same_n_features,
)
from ._validation import check_bool, data_then_kernel, describe
from .covariance import progress_bar
from .kernels import RBF, Kernel, Laplacian, Linear, Polynomial, _OriginShiftedLinear
from .linalg import (
    _MIN_OVERSAMPLING,
    ConvergenceWarning,
    _chebyshev_filter,
    _orthonormal_basis,
    _rayleigh_ritz,
    flip_signs,
)

#: The tiles' backend: torch where it is installed, else None (numpy computes the tiles).
torch = optional_torch()


class _NumpyCPU:
    """The device of the numpy backend (what ``torch.device("cpu")`` is to torch's)."""

    type = "cpu"
    index = None

    def __repr__(self) -> str:
        return "cpu"

    def __eq__(self, other: object) -> bool:
        return other == "cpu" or isinstance(other, _NumpyCPU)

    def __hash__(self) -> int:
        return hash("cpu")


def _is_float32(dtype: Any) -> bool:
    return str(dtype).removeprefix("torch.") == "float32"


def _eps(dtype: Any) -> float:
    return float(np.finfo(np.float32 if _is_float32(dtype) else np.float64).eps)

__all__ = ["KernelOperator", "matfree_top_eigh"]

#: Default tile edge on the CPU: 1024 x 1024 float64 tiles (8 MiB). Measured on the
#: 2-core reference machine (RBF, d = 10, b = 20): 512-1024 are the fastest, 2048
#: (32 MiB) is 5% slower and 4096 (128 MiB) 30% slower (the element-wise passes
#: then stream through memory instead of cache).
_CPU_TILE = 1024
#: Default tile edge on a GPU: 4096 x 4096 (128 MiB in float64, 64 MiB in float32).
_GPU_TILE = 4096
#: With float32 tiles, residuals below this times lambda_1 are not resolvable:
#: the stopping tolerance is raised to it (measured floor: ~1e-7, see the tests).
_FLOAT32_TOL = 1e-5
#: Default cap on Rayleigh-Ritz iterations (each costs up to 8 full kernel passes).
_DEFAULT_MAX_ITER = 100
#: Stagnation: no halving of the largest residual over this many iterations...
_STAGNATION_WINDOW = 3
#: ... while it is below this multiple of the round-off of a product.
_STAGNATION_FACTOR = 100.0
#: Nystrom warm start: m = min(n, max(_NYSTROM_PER_COMPONENT * s, _NYSTROM_MIN)) landmarks.
_NYSTROM_PER_COMPONENT = 20
_NYSTROM_MIN = 500
#: the kernels whose tiles the operator computes (a linear kernel moved to the data's middle,
#: as the estimators' centring_equivalent gives it, included)
_SUPPORTED = (Linear, _OriginShiftedLinear, RBF, Laplacian, Polynomial)
#: Cap the Chebyshev degree by the reduction the residuals still need (see _filter).
_ADAPTIVE_DEGREE = True
#: Spread tile rows over Python threads (torch single-threaded in each) on the CPU.
_PARALLEL_TILE_ROWS = True


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------

def _check_device(device: Any) -> Any:
    """``None``/"cpu"/"cuda"/"cuda:k"/torch.device -> torch.device; CUDA only if available.

    Without torch: ``None`` or ``"cpu"`` -> the numpy backend's CPU; a CUDA device
    raises the ImportError that names ``mvkm[torch]``."""
    if isinstance(device, _NumpyCPU):
        return device
    if torch is None:
        if device is None or (isinstance(device, str) and device == "cpu"):
            return _NumpyCPU()
        if isinstance(device, str) and device.split(":")[0] == "cuda":
            raise ImportError(f"device={device!r} needs PyTorch, which is not installed here: "
                              f"{TORCH_HINT}")
        raise ValueError(f"device must be None or 'cpu' without torch ('cuda' needs "
                         f"mvkm[torch]), got {device!r}")
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise ValueError(f"device must be None, 'cpu', 'cuda' or 'cuda:<k>', got {device!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"device must be None, 'cpu', 'cuda' or 'cuda:<k>', got {device!r}") from exc
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be None, 'cpu', 'cuda' or 'cuda:<k>', got {device!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} asks for CUDA, but torch.cuda.is_available() "
                             "is False on this machine; use device=None (the CPU)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: only {torch.cuda.device_count()} CUDA "
                             "device(s) are available")
    return dev


def _check_dtype(dtype: Any) -> Any:
    """``None``/torch.float64/torch.float32 (or numpy/str spellings) -> torch dtype.

    Without torch: ``None``/numpy or str spellings -> numpy dtype."""
    if torch is None:
        try:
            np_dtype = np.dtype("float64" if dtype is None else dtype)
        except TypeError:
            np_dtype = None
        if np_dtype in (np.float64, np.float32):
            return np_dtype
        raise ValueError(f"dtype must be float64 (default) or float32, got {dtype!r}")
    if dtype is None:
        return torch.float64
    if isinstance(dtype, torch.dtype):
        if dtype in (torch.float64, torch.float32):
            return dtype
    else:
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        if np_dtype == np.float64:
            return torch.float64
        if np_dtype == np.float32:
            return torch.float32
    raise ValueError(f"dtype must be torch.float64 (default) or torch.float32, got {dtype!r}")


def _check_kernel(kernel: Any) -> Kernel:
    if type(kernel) not in _SUPPORTED:
        raise TypeError(
            "kernel must be one of mvkm.kernels.Linear, RBF, Laplacian or Polynomial (whose "
            f"tiles the matrix-free operator knows how to recompute), got {describe(kernel)}"
        )
    return kernel


# ---------------------------------------------------------------------------
# the operator
# ---------------------------------------------------------------------------

class KernelOperator(scipy.sparse.linalg.LinearOperator):
    r"""The (centred) Gram matrix of a kernel as a matrix-free ``LinearOperator``.

    Applies :math:`K_c = M_c K M_c` (or :math:`K` when ``center=False``), with
    :math:`K_{ij} = k(x_i, x_j)` and :math:`M_c = I - \frac1n 1 1^\top`, to a
    block :math:`Z` of shape ``(n, b)`` without storing :math:`K`: at every
    product the kernel is recomputed from ``X`` in square tiles
    :math:`K_{IJ}` of ``tile_size`` rows and columns (as KeOps' symbolic
    matrices do, Charlier et al., 2021). :math:`K` is symmetric, so only the
    tiles on and above the diagonal are evaluated and each one serves twice,
    :math:`(KZ)_I \mathrel{+}= K_{IJ} Z_J` and :math:`(KZ)_J \mathrel{+}= K_{IJ}^\top Z_I`:
    :math:`n^2/2` kernel evaluations per product, whatever ``b``. Memory is
    :math:`O(n(d + b))` plus one tile.

    The centring is implicit. One pass at construction gives the row means
    :math:`r = \frac1n K 1` and the grand mean :math:`g = \frac1n 1^\top r`;
    then

    .. math::
        K_c Z = K Z - r\,(1^\top Z) - 1\,(r^\top Z) + g\,1\,(1^\top Z),

    :math:`O(nb)` on top of :math:`KZ`.

    Tiles, with :math:`z = (x - \bar x)/\sigma` for the radial kernels (a
    translation, which leaves them unchanged and keeps the expansion below
    accurate) and one GEMM per tile on augmented factors:

    * ``RBF(sigma)``: :math:`\exp(\min(0,\ z_i^\top z_j - \tfrac12\|z_i\|^2 - \tfrac12\|z_j\|^2))`;
    * ``Laplacian(sigma)``: :math:`\exp(-\sqrt{\max(0,\ \|z_i\|^2 + \|z_j\|^2 - 2 z_i^\top z_j)})`
      (unlike :class:`mvkm.kernels.Laplacian`, near-duplicate pairs are not
      recomputed directly: a pair at distance :math:`\delta` gets an absolute
      error of about :math:`\varepsilon \|z\|^2 / \delta` in its distance; the
      diagonal is exact);
    * ``Polynomial(degree, c)``: :math:`(x_i^\top x_j + c)^p`;
    * ``Linear()``: :math:`KZ = X (X^\top Z)`, exact and :math:`O(ndb)`: no tiles.

    Parameters
    ----------
    X : array_like of shape (n, d)
        The training points (rows).
    kernel : Linear, RBF, Laplacian or Polynomial
        An :mod:`mvkm.kernels` kernel; any other raises a ``TypeError``.
    center : bool, default=True
        Apply :math:`K_c` (feature-space centring) instead of :math:`K`.
    device : None, "cpu", "cuda", "cuda:<k>" or torch.device, default=None
        Where the tiles are computed (``None``: the CPU). CUDA only when
        ``torch.cuda.is_available()``.
    dtype : torch.float64 or torch.float32, default=None (float64)
        Precision of the tiles: kernel evaluation and the tile products. Every
        block product is accumulated over tiles in float64. float32 tiles are
        about 2x faster on a CPU (more on most GPUs) and give products with a
        relative error of about :math:`10^{-7}` (kernel entries have a relative
        error of a few :math:`10^{-8}`, each tile product sums ``tile_size``
        terms in float32).
    tile_size : int, optional
        Rows and columns of a tile. Default: 1024 on the CPU (8 MiB in
        float64; 512-1024 were fastest on the reference machine, 2048 5%
        slower, 4096 30% slower), 4096 on a GPU.
    progress : bool, default=False
        Show a ``tqdm`` bar (over tile rows) during each product.

    Attributes
    ----------
    row_means_ : ndarray of shape (n,)
        :math:`r = \frac1n K 1` (uncentred :math:`K`); with ``center=False``
        also computed, so that :meth:`test_matmat` can centre.
    grand_mean_ : float
        :math:`g = \frac1{n^2} 1^\top K 1`.
    n_products_ : int
        Number of full passes over the kernel so far (the row means included).
    tile_size : int
    device : torch.device
    tile_dtype : torch.dtype

    Notes
    -----
    Cost per product: :math:`n^2/2` kernel evaluations (one GEMM of inner size
    :math:`d + 2`, a clip and an ``exp`` per entry) and :math:`2 n^2 b` flops
    for the two tile products. At :math:`n = 10^5`, :math:`d = 10`,
    :math:`b = 20`, RBF, on the shared 2-core reference machine: 21-23 s of
    CPU time per product in float64, 11 s with float32 tiles (35 s and 12 s
    wall under a load average of 4-6); see ``benchmarks/bench_matfree.py``.

    On a CPU with several torch threads, tile rows are spread over Python
    threads that each run torch single-threaded. Where other jobs share the
    cores, start Python with ``OMP_WAIT_POLICY=PASSIVE``: spinning OpenMP
    waiters made 2-thread torch/BLAS calls (the Nystrom start, the small
    eigenproblems) up to 50x slower there.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.kernels import RBF, center_gram
    >>> from mvkm.matfree import KernelOperator
    >>> X = np.random.default_rng(0).normal(size=(300, 3))
    >>> op = KernelOperator(X, RBF(1.0))
    >>> Z = np.random.default_rng(1).normal(size=(300, 4))
    >>> bool(np.allclose(op @ Z, center_gram(RBF(1.0)(X)) @ Z))
    True
    """

    def __init__(self, X: ArrayLike, kernel: Kernel, *, center: bool = True,
                 device: Any = None, dtype: Any = None, tile_size: int | None = None,
                 progress: bool = False) -> None:
        self.kernel = _check_kernel(kernel)
        X = check_array(X, "X")
        self.center = check_bool(center, "center")
        check_bool(progress, "progress")
        self.device = _check_device(device)
        self.tile_dtype = _check_dtype(dtype)
        if tile_size is None:
            tile_size = _GPU_TILE if self.device.type == "cuda" else _CPU_TILE
        self.tile_size = check_count(tile_size, "tile_size")
        self.progress = bool(progress)
        n = X.shape[0]
        super().__init__(dtype=np.float64, shape=(n, n))
        self.X = X
        self.n_products_ = 0
        self._shift = X.mean(axis=0) if isinstance(kernel, (RBF, Laplacian)) else None
        self._torch = torch
        # numpy's worker threads, decided here (a caller may hold BLAS to one thread later)
        self._numpy_workers = n_threads()
        self._left, self._right = self._factors(X)
        r = self._raw_matmat(self._to_tiles(np.ones((n, 1))))[:, 0] / n
        self._r = r
        self._g = float(r.mean())
        self.row_means_ = self._numpy(r)
        if not (np.isfinite(self._g) and bool(np.isfinite(self.row_means_).all())):
            raise ValueError(
                f"the Gram matrix of {kernel!r} on X is not finite (an entry overflows "
                f"{str(self.tile_dtype).replace('torch.', '')}); rescale the data")
        self.grand_mean_ = self._g
        self._kdiag = self.kernel.diag(X)
        self._warn_far_from_origin()

    def _warn_far_from_origin(self) -> None:
        """Linear and polynomial tiles are not shift-invariant: on data far from the origin the
        centred values are small differences of large uncentred ones, and the products keep
        only the digits of that ratio. The stored routes compute them from the data's middle
        (:func:`mvkm.kernels.centring_equivalent`); here the loss is said, not hidden."""
        if type(self.kernel) not in (Linear, Polynomial) or not self.center:
            return
        big = float(np.abs(self._kdiag).max())
        spread = float(np.mean(self._kdiag)) - self._g          # trace(K_c) / n
        eps = _eps(self.tile_dtype)
        if big > 0 and not spread > 1e6 * eps * big:
            ratio = big / max(spread, np.finfo(float).tiny)
            warnings.warn(
                f"{self.kernel!r} on data far from the origin: the centred kernel values are "
                f"{ratio:.2g} times smaller than the uncentred ones they are computed from, so "
                f"the matrix-free products carry round-off up to {min(1.0, eps * ratio):.1g} of "
                "them (eigenvalues lose fewer digits, but not none); move the data to the "
                "origin first (X - X.mean(axis=0) leaves a linear kernel's centred values "
                "unchanged), or use the stored route (kernel_storage='dense'), which computes "
                "them from the data's middle", RuntimeWarning, stacklevel=3)

    # -- tiles ---------------------------------------------------------------
    # -- the backend (torch, or numpy without it) ---------------------------
    def _to_tiles(self, A: NDArray[np.float64]) -> Any:
        """A numpy array as a contiguous array of the backend, in the tile dtype."""
        A = np.ascontiguousarray(A, dtype=np.float64)
        if self._torch is None:
            return A.astype(self.tile_dtype, copy=False)
        return self._torch.as_tensor(A).to(device=self.device, dtype=self.tile_dtype)

    def _to_float64(self, A: NDArray[np.float64]) -> Any:
        A = np.asarray(A, dtype=np.float64)
        return A if self._torch is None else self._torch.as_tensor(A).to(self.device)

    def _numpy(self, t: Any) -> NDArray[np.float64]:
        return np.asarray(t, dtype=np.float64) if self._torch is None else t.cpu().numpy()

    def _zeros(self, *shape: int) -> Any:
        """A float64 array of zeros of the backend (the accumulators)."""
        if self._torch is None:
            return np.zeros(shape)
        return self._torch.zeros(*shape, dtype=self._torch.float64, device=self.device)

    def _buffer(self, size: int) -> Any:
        if self._torch is None:
            return np.empty(size, dtype=self.tile_dtype)
        return self._torch.empty(size, dtype=self.tile_dtype, device=self.device)

    def _tile_product(self, buf: Any, left: Any, right: Any) -> Any:
        """``left @ right.T`` written into the front of the flat buffer ``buf``."""
        shape = (left.shape[0], right.shape[0])
        if self._torch is None:
            tile = buf[: shape[0] * shape[1]].reshape(shape)
            np.matmul(left, right.T, out=tile)
        else:
            tile = buf[: shape[0] * shape[1]].view(*shape)
            self._torch.mm(left, right.T, out=tile)
        return tile

    def _factors(self, Y: NDArray[np.float64]) -> tuple[Any, Any]:
        r"""Left and right factors ``(A, B)`` of the rows of ``Y``: a tile is ``finish(A_I B_J^T)``."""
        k = self.kernel
        if isinstance(k, (RBF, Laplacian)):
            Z = (Y - self._shift) / k.sigma
            sq = np.einsum("ij,ij->i", Z, Z)[:, None]
            one = np.ones_like(sq)
            if isinstance(k, RBF):   # z_i.z_j - |z_i|^2/2 - |z_j|^2/2
                A = np.hstack([Z, -0.5 * sq, -one])
                B = np.hstack([Z, one, 0.5 * sq])
            else:                    # |z_i|^2 + |z_j|^2 - 2 z_i.z_j
                A = np.hstack([-2.0 * Z, sq, one])
                B = np.hstack([Z, one, sq])
        elif isinstance(k, Polynomial):  # x_i.x_j + c
            A = np.hstack([Y, np.full((len(Y), 1), k.c)])
            B = np.hstack([Y, np.ones((len(Y), 1))])
        elif isinstance(k, _OriginShiftedLinear):  # (x - c).(y - c): no cancellation near c
            A = B = Y - k.origin
        else:
            A = B = Y
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
            raise ValueError(f"X is too large for {k!r} in float64 (its squared norms overflow); "
                             "rescale the data")
        At = self._to_tiles(A)
        return At, (At if B is A else self._to_tiles(B))

    def _finish(self, tile: Any, diagonal: bool) -> None:
        """Turn ``A_I B_J^T`` into the kernel tile, in place (``diagonal``: I == J); the same
        element-wise steps on either backend (numpy's and torch's ufuncs with ``out=``)."""
        k = self.kernel
        if isinstance(k, Polynomial):
            if k.degree != 1:
                tile **= k.degree
            return
        if not isinstance(k, (RBF, Laplacian)):
            return
        xp = np if self._torch is None else self._torch
        rbf = isinstance(k, RBF)
        # round-off guard: the RBF exponent is <= 0, the Laplacian's squared distance >= 0
        (np.clip if xp is np else xp.clamp)(tile, None if rbf else 0.0, 0.0 if rbf else None, out=tile)
        if diagonal:                 # a point's distance to itself is exactly 0
            np.fill_diagonal(tile, 0.0) if xp is np else tile.fill_diagonal_(0.0)
        if not rbf:
            xp.sqrt(tile, out=tile)
            xp.negative(tile, out=tile)
        xp.exp(tile, out=tile)

    def _progress(self, total: int):
        if not self.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="kernel tiles", unit="tile row", leave=False)

    def _workers(self) -> int:
        """Threads over tile rows: torch's intra-op thread count on the CPU, 1 on a GPU;
        with numpy, :func:`mvkm._parallel.n_threads` at construction."""
        if self._torch is None:
            return self._numpy_workers
        return 1 if self.device.type == "cuda" else max(1, self._torch.get_num_threads())

    def _over_rows(self, rows: list[int], new_state: Callable[[], Any],
                   row: Callable[[int, Any], None]) -> list[Any]:
        """Run ``row(i0, state)`` for every tile row; return the workers' states.

        On the CPU with ``w = torch.get_num_threads() > 1``, ``w`` Python threads
        take tile rows from a shared queue, each with its own ``state`` and torch
        single-threaded (torch releases the GIL), instead of torch's own
        multi-threaded ops: on the loaded 2-core reference machine, with the
        default (spinning) OpenMP wait policy, a product at n = 8000 took 0.42 s
        this way against 1.3-2.8 s with torch's 2-thread ops (their barriers,
        one per tile operation, wait on descheduled threads); with
        ``OMP_WAIT_POLICY=PASSIVE`` the two were on par (21-23 s at n = 1e5).
        Rows must write disjoint parts of shared outputs.
        """
        workers = min(self._workers(), len(rows)) if _PARALLEL_TILE_ROWS else 1
        states = [new_state() for _ in range(max(workers, 1))]
        bar = self._progress(len(rows))
        try:
            if workers <= 1:
                for i0 in rows:
                    row(i0, states[0])
                    if bar is not None:
                        bar.update(1)
                return states
            pending = iter(rows)
            lock = threading.Lock()

            def work(state: Any) -> None:
                while True:
                    with lock:
                        i0 = next(pending, None)
                    if i0 is None:
                        return
                    row(i0, state)
                    if bar is not None:
                        bar.update(1)

            def run() -> None:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    for future in [pool.submit(work, st) for st in states]:
                        future.result()

            if self._torch is None:     # numpy's BLAS single-threaded in each worker
                with _controller().limit(limits=1, user_api="blas"):
                    run()
                return states
            threads = self._torch.get_num_threads()
            self._torch.set_num_threads(1)
            try:
                run()
            finally:
                self._torch.set_num_threads(threads)
            return states
        finally:
            if bar is not None:
                bar.close()

    def _raw_matmat(self, Z: Any) -> Any:
        r""":math:`K Z` (uncentred) for ``Z`` of shape (n, b) in the tile dtype; float64 out.

        Tiles on and above the diagonal only; row block ``I`` adds
        :math:`K_{IJ} Z_J` to its own rows and each worker accumulates
        :math:`(K_{IJ}^\top Z_I)^\top` in its own ``b x n`` buffer.
        """
        self.n_products_ += 1
        if isinstance(self.kernel, Linear):
            KZ = self._left @ (self._left.T @ Z)
            return KZ.astype(np.float64) if self._torch is None else KZ.to(self._torch.float64)
        n, b, T = Z.shape[0], Z.shape[1], self.tile_size
        L, R = self._left, self._right
        acc = self._zeros(n, b)
        ZT = np.ascontiguousarray(Z.T) if self._torch is None else Z.T.contiguous()
        same = self._torch is not None and self.tile_dtype == self._torch.float64
        rows = list(range(0, n, T))

        def new_state() -> tuple[Any, Any]:
            # a tile buffer and this worker's (K_IJ^T Z_I)^T accumulator (lower half)
            return self._buffer(min(T, n) ** 2), self._zeros(b, n)

        def tile_row(i0: int, state: tuple[Any, Any]) -> None:
            buf, accT = state
            i1 = min(n, i0 + T)
            LI = L[i0:i1]
            for j0 in range(i0, n, T):
                j1 = min(n, j0 + T)
                tile = self._tile_product(buf, LI, R[j0:j1])
                self._finish(tile, j0 == i0)
                # the Z^T side as (b x T) @ (T x T): 3-4x faster than tile.T @ Z with MKL
                if same:
                    acc[i0:i1].addmm_(tile, Z[j0:j1])
                    if j0 != i0:
                        accT[:, j0:j1].addmm_(ZT[:, i0:i1], tile)
                else:
                    acc[i0:i1] += tile @ Z[j0:j1]
                    if j0 != i0:
                        accT[:, j0:j1] += ZT[:, i0:i1] @ tile

        states = self._over_rows(rows, new_state, tile_row)
        accT = states[0][1]
        for st in states[1:]:
            accT += st[1]
        acc += accT.T
        return acc

    def _cross_matmat(self, left: Any, A: Any) -> Any:
        r""":math:`K(Y, X) A` for the left factors of rows ``Y`` and ``A`` (n, b); float64 out."""
        if isinstance(self.kernel, Linear):
            KA = left @ (self._left.T @ A)
            return KA.astype(np.float64) if self._torch is None else KA.to(self._torch.float64)
        m, n, T = left.shape[0], self._right.shape[0], self.tile_size
        acc = self._zeros(m, A.shape[1])

        def new_state() -> Any:
            return self._buffer(min(T, m) * min(T, n))

        def tile_row(i0: int, buf: Any) -> None:
            i1 = min(m, i0 + T)
            for j0 in range(0, n, T):
                j1 = min(n, j0 + T)
                tile = self._tile_product(buf, left[i0:i1], self._right[j0:j1])
                self._finish(tile, False)
                acc[i0:i1] += tile @ A[j0:j1]

        self._over_rows(list(range(0, m, T)), new_state, tile_row)
        return acc

    def _block(self, rows: slice | NDArray[np.intp], cols: NDArray[np.intp],
               diagonal: bool = False) -> Any:
        """The kernel block ``K[rows][:, cols]`` (small blocks only: the Nystrom start)."""
        tile = self._left[rows] @ self._right[cols].T
        self._finish(tile, diagonal)
        return tile.astype(np.float64) if self._torch is None else tile.to(self._torch.float64)

    # -- LinearOperator interface ---------------------------------------------
    def _matmat(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        Z = np.asarray(Z, dtype=np.float64)
        return self._numpy(self._apply(self._to_tiles(Z), self._to_float64(Z)))

    def _apply(self, Zt: Any, Z64: Any) -> Any:
        """``K_c Z`` (or ``K Z``) as a float64 tensor; ``Zt`` in the tile dtype, ``Z64`` float64."""
        KZ = self._raw_matmat(Zt)
        if self.center:
            sums = Z64.sum(0)
            KZ -= self._r[:, None] * sums[None, :]
            KZ -= (self._r @ Z64 - self._g * sums)[None, :]
        return KZ

    def _matvec(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._matmat(np.reshape(x, (-1, 1))).ravel()

    def _rmatmat(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._matmat(Z)

    def _rmatvec(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._matvec(x)

    def _adjoint(self) -> "KernelOperator":
        return self

    def _transpose(self) -> "KernelOperator":
        return self

    # -- cheap summaries -------------------------------------------------------
    def diag(self) -> NDArray[np.float64]:
        r"""The diagonal: :math:`k(x_i, x_i) - 2 r_i + g` (centred) or :math:`k(x_i, x_i)`.

        Returns
        -------
        ndarray of shape (n,)
        """
        if not self.center:
            return self._kdiag.copy()
        return self._kdiag - 2.0 * self.row_means_ + self.grand_mean_

    def trace(self) -> float:
        r"""The trace: :math:`\sum_i k(x_i, x_i) - n g` (centred) or :math:`\sum_i k(x_i, x_i)`.

        It is the sum of all eigenvalues (the total variance in feature space
        times :math:`n`), so ``eigenvalues.sum() / op.trace()`` is the fraction
        explained by the top ones.
        """
        total = float(self._kdiag.sum())
        return total - self.shape[0] * self.grand_mean_ if self.center else total

    # -- test rows ---------------------------------------------------------------
    def test_matmat(self, X_test: ArrayLike, A: ArrayLike, *,
                    center: bool | None = None) -> NDArray[np.float64]:
        r"""Kernel rows of test points times ``A``, tile by tile: :math:`K(X_{test}, X)\,A`.

        Centred (the default when the operator is), every test row is centred
        with the *training* means, :math:`k_c(z, x_j) = k(z, x_j) - \frac1n
        \sum_l k(z, x_l) - r_j + g` (cf. :func:`mvkm.kernels.center_test_gram`),
        so that

        .. math::
            K_c(X_{test}, X)\,A = K(X_{test}, X)\,A - \tfrac1n K(X_{test}, X) 1\,(1^\top A)
            - 1\,(r^\top A) + g\,1\,(1^\top A),

        computed with one pass over the test-by-training kernel (``A`` gets one
        extra column of :math:`1/n`). Out-of-sample projections of kernel PCA
        are ``test_matmat(X_test, V / sqrt(lambda))``.

        Parameters
        ----------
        X_test : array_like of shape (m, d)
        A : array_like of shape (n,) or (n, b)
        center : bool, optional
            Defaults to the operator's ``center``.

        Returns
        -------
        ndarray of shape (m,) or (m, b)
        """
        Xt = check_array(X_test, "X_test")
        check_same_n_features(self.X, Xt, ("X", "X_test"))
        A_arr = np.asarray(A)
        vector = A_arr.ndim == 1
        A2 = check_array(A_arr.reshape(-1, 1) if vector else A_arr, "A")
        n = self.shape[0]
        if A2.shape[0] != n:
            raise ValueError(f"A must have n = {n} rows (one per training point), got shape "
                             f"{A_arr.shape}")
        if center is None:
            center = self.center
        check_bool(center, "center")
        cols = np.hstack([A2, np.full((n, 1), 1.0 / n)]) if center else A2
        left, _ = self._factors(Xt)
        out = self._numpy(self._cross_matmat(left, self._to_tiles(cols)))
        if center:
            kbar = out[:, -1:]                  # (1/n) K(X_test, X) 1
            out = out[:, :-1]
            sums = A2.sum(axis=0)
            out -= kbar * sums[None, :]
            out -= (self.row_means_ @ A2 - self.grand_mean_ * sums)[None, :]
        return out.ravel() if vector else out


# ---------------------------------------------------------------------------
# the eigensolver
# ---------------------------------------------------------------------------

def _pinv_sqrt(W: Any, eigh: Callable[[Any], Any]) -> Any:
    """:math:`W^{+1/2}` on the numerical range of a landmark block ``W`` (m x r): the
    eigenvectors of eigenvalues above ``m eps max(w)``, each divided by its root."""
    w, U = eigh(0.5 * (W + W.T))
    keep = w > max(float(w.max()), np.finfo(float).tiny) * W.shape[0] * np.finfo(float).eps
    return U[:, keep] / (w[keep] ** 0.5)


def _nystrom_start(op: KernelOperator, b: int, m: int,
                   rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Top-``b`` eigenvectors of the centred Nystrom approximation of ``op`` (m landmarks).

    With landmarks :math:`L`, :math:`C = K(X, L)` and :math:`W = K(L, L)`,
    :math:`K \approx C W^{+} C^\top` (Williams & Seeger, 2001), so
    :math:`K_c \approx F F^\top` with :math:`F = M_c C W^{+1/2}`. The left
    singular vectors of :math:`F` come from the :math:`m \times m` matrix
    :math:`F^\top F = W^{+1/2} (C^\top C - \frac1n C^\top 1 1^\top C) W^{+1/2}`,
    accumulated over row chunks of :math:`C` (never stored: two passes of
    :math:`nm` kernel evaluations). Returns the block and the Nystrom eigenvalues.
    """
    n = op.shape[0]
    idx = np.sort(rng.choice(n, size=m, replace=False))
    torch = op._torch
    if torch is not None:
        idx = torch.as_tensor(idx, device=op.device)
        # the small eigenproblems in torch: numpy's OpenBLAS (busy-waiting threads) took
        # 4.9 s instead of 0.03 s for m = 500 on the loaded 2-core reference machine
        eigh = torch.linalg.eigh
    else:           # numpy: its BLAS held to one thread (as run_parallel does)
        eigh = np.linalg.eigh
    with _controller().limit(limits=1, user_api="blas"):
        Wih = _pinv_sqrt(op._block(idx, idx, diagonal=True), eigh)   # m x r
        T = op.tile_size
        G, c = op._zeros(m, m), op._zeros(m)
        for i0 in range(0, n, T):
            C = op._block(slice(i0, min(n, i0 + T)), idx)
            G += C.T @ C
            c += C.sum(0)
        if op.center:
            G -= c[:, None] * c[None, :] / n
        H = Wih.T @ G @ Wih
        theta, P = eigh(0.5 * (H + H.T))
        theta, P = op._numpy(theta)[::-1][:b].copy(), op._numpy(P)[:, ::-1][:, :b].copy()
        theta = np.maximum(theta, theta[0] * 1e-14 + np.finfo(float).tiny)
        Gb = op._to_float64(op._numpy(Wih) @ (P / np.sqrt(theta)))   # m x b: Q = M_c C Gb
        shift = (c @ Gb) / n if op.center else 0.0
        Q = np.empty((n, Gb.shape[1]))
        for i0 in range(0, n, T):
            i1 = min(n, i0 + T)
            Q[i0:i1] = op._numpy(op._block(slice(i0, i1), idx) @ Gb - shift)
    if Q.shape[1] < b:  # the Nystrom kernel has rank < b (e.g. Linear with d < b)
        Q = np.hstack([Q, rng.standard_normal((n, b - Q.shape[1]))])
    return Q, theta


def _sum_top_eigh(ops: Sequence[KernelOperator], features: Sequence[NDArray[np.float64]],
                  n_components: int, *, tol: float = 1e-10, max_iter: int | None = None,
                  random_state: int | np.random.Generator | None = 0,
                  progress: bool | None = None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Top eigenpairs of a sum of centred kernel matrices and feature Gram matrices.

    Solves :math:`K V = V \Lambda` for :math:`K = \sum_v K_{v,c} + \sum_u
    \Phi_u \Phi_u^\top` (the multi-view dual of the RKM with kernel views applied
    by centring :class:`KernelOperator` s and views of explicit, centred features
    :math:`\Phi_u`), by the block iteration of :func:`matfree_top_eigh` from a
    Nystrom start for the whole sum: with :math:`F_v = M_c C_v W_v^{+1/2}` for each
    kernel view (its own :math:`m` landmarks) and :math:`F_u = \Phi_u`,
    :math:`K \approx F F^\top` with :math:`F = [F_1, \dots]`, and the start block
    holds the top left singular vectors of :math:`F`, from :math:`F^\top F`
    accumulated over row chunks (:math:`F` is never stored).

    A random start (``top_eigh(method="subspace")`` on the summed operator) took
    several times as many products as one view's Nystrom-started solve, each
    product recomputing every view's tiles: at n = 30,000 with two RBF views it
    did not finish in 600 s; from this start it took 16 kernel passes and 328 s
    (``benchmarks/bench_views.py``).
    """
    if not ops:
        raise ValueError("_sum_top_eigh needs at least one kernel view (ops)")
    if any(not op.center for op in ops):
        raise ValueError("_sum_top_eigh needs centring operators (center=True)")
    n = ops[0].shape[0]
    s = check_n_components(n_components, n - 1, what="n - 1")
    tol = _check_tol(tol)
    rng = check_random_state(random_state)
    b = min(n, s + max(_MIN_OVERSAMPLING, s))
    m = min(n, max(_NYSTROM_PER_COMPONENT * s, _NYSTROM_MIN))
    feats = [np.asarray(P, dtype=np.float64) for P in features]
    with _controller().limit(limits=1, user_api="blas"):
        factors = []                      # per kernel view: landmarks, W^{+1/2}
        for op in ops:
            idx = np.sort(rng.choice(n, size=m, replace=False))
            sel = idx if op._torch is None else op._torch.as_tensor(idx, device=op.device)
            W = op._numpy(op._block(sel, sel, diagonal=True))
            factors.append((sel, _pinv_sqrt(W, np.linalg.eigh)))
        T = ops[0].tile_size

        def chunk(i0: int, i1: int) -> NDArray[np.float64]:
            cols = [op._numpy(op._block(slice(i0, i1), sel)) @ Wih
                    for op, (sel, Wih) in zip(ops, factors)]
            return np.hstack(cols + [P[i0:i1] for P in feats])

        r = sum(Wih.shape[1] for _, Wih in factors) + sum(P.shape[1] for P in feats)
        G, c = np.zeros((r, r)), np.zeros(r)
        for i0 in range(0, n, T):
            F = chunk(i0, min(n, i0 + T))
            G += F.T @ F
            c += F.sum(0)
        G -= np.outer(c, c) / n
        theta, P_ = np.linalg.eigh(0.5 * (G + G.T))
        theta, P_ = theta[::-1][:b], P_[:, ::-1][:, :b]
        theta = np.maximum(theta, theta[0] * 1e-14 + np.finfo(float).tiny)
        Gb = P_ / np.sqrt(theta)
        shift = (c @ Gb) / n
        Q0 = np.empty((n, Gb.shape[1]))
        for i0 in range(0, n, T):
            i1 = min(n, i0 + T)
            Q0[i0:i1] = chunk(i0, i1) @ Gb - shift
    if Q0.shape[1] < b:
        Q0 = np.hstack([Q0, rng.standard_normal((n, b - Q0.shape[1]))])
    bar = progress_bar(None, "MultiViewRKM (matrix-free)", progress, unit="product")
    size = sum(float(np.abs(op._kdiag).max()) for op in ops)
    size += sum(float(np.einsum("ij,ij->i", P, P).max()) for P in feats if P.size)
    floor = n * np.finfo(float).eps * max(size, np.finfo(float).tiny)

    def matmat(Z: NDArray[np.float64]) -> NDArray[np.float64]:
        out = sum(op._matmat(Z) for op in ops)
        for P in feats:
            out = out + P @ (P.T @ Z)
        if bar is not None:
            bar.update(1)
        return out

    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            w, V, _, _ = _block_subspace(matmat, Q0, s, tol,
                                         _DEFAULT_MAX_ITER if max_iter is None else int(max_iter),
                                         bar, floor=floor)
    finally:
        if bar is not None:
            bar.close()
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(V))):
        raise ValueError("multi-view matrix-free solve produced non-finite eigenpairs; rescale the views")
    return np.ascontiguousarray(w, dtype=np.float64), flip_signs(V)


def _check_tol(tol: Any) -> float:
    if isinstance(tol, bool) or not isinstance(tol, Real) or not np.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be a finite number > 0, got {tol!r}")
    return float(tol)


def matfree_top_eigh(
    X: ArrayLike,
    kernel: Kernel,
    n_components: int,
    *,
    center: bool = True,
    device: Any = None,
    dtype: Any = None,
    tol: float = 1e-10,
    max_iter: int | None = None,
    random_state: int | np.random.Generator | None = 0,
    warm_start: str | None = "nystrom",
    n_landmarks: int | None = None,
    tile_size: int | None = None,
    progress: bool | None = None,
    return_info: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | tuple[NDArray[np.float64], NDArray[np.float64], dict[str, Any]]:
    r"""Top eigenpairs of a (centred) kernel matrix too large to store.

    Solves :math:`K_c V = V \Lambda,\ V^\top V = I_s` for the :math:`s` largest
    eigenvalues of :math:`K_c = M_c K M_c`, :math:`K_{ij} = k(x_i, x_j)`
    (or of :math:`K` with ``center=False``), the eigenproblem of kernel PCA,
    with :math:`K` applied by :class:`KernelOperator` (tiles recomputed at
    every product, memory :math:`O(n(d + s))`). Each product costs
    :math:`n^2/2` kernel evaluations, so the solver works on a block of
    :math:`b = s + \max(10, s)` vectors at once (single-vector Lanczos would
    recompute the kernel :math:`b` times as often):

    1. warm start (``warm_start="nystrom"``): the top-:math:`b` eigenvectors of
       the centred Nystrom approximation :math:`M_c C W^{+} C^\top M_c` on
       :math:`m` random landmarks (Williams & Seeger, 2001), computed in
       :math:`O(nm\,d + nm^2)` without storing :math:`C`;
    2. Chebyshev-filtered block subspace iteration with Rayleigh-Ritz and hard
       locking of converged leading pairs, the machinery of
       :func:`mvkm.linalg.top_eigh` ``(method="subspace")`` (its filter and
       Rayleigh-Ritz step are reused), here from the warm start block;
    3. stop when every residual satisfies
       :math:`\|K_c v_i - \theta_i v_i\| \le \mathrm{tol}\,\theta_1`, the rule
       of ``top_eigh(method="subspace")``, or, with a ``ConvergenceWarning``,
       when the residuals have stagnated at the round-off of a product: no
       halving over 3 iterations while the largest is below
       :math:`100\, n \varepsilon \max_i |k(x_i, x_i)|` (the attainable floor;
       e.g. RBF(3000) on unit-scale data, where ``tol * theta_1`` lies below
       it: 5 iterations instead of ``max_iter``).

    The arguments come in the order of :func:`mvkm.linalg.kernel_top_eigh`, the
    stored route: the data, the kernel, the number of eigenpairs. The order
    ``(kernel, X, n_components)``, which ``kernel_top_eigh`` used to take, also
    works, with a ``FutureWarning``.

    Parameters
    ----------
    X : array_like of shape (n, d)
    kernel : Linear, RBF, Laplacian or Polynomial
        An :mod:`mvkm.kernels` kernel (any other raises a ``TypeError``).
    n_components : int
        Number :math:`s` of eigenpairs, ``1 <= s <= n - 1``.
    center : bool, default=True
        Eigenpairs of :math:`K_c` (kernel PCA) or of :math:`K`.
    device : None, "cpu", "cuda", "cuda:<k>" or torch.device, default=None
        Where the kernel tiles are computed; ``None`` is the CPU.
    dtype : torch.float64 or torch.float32, default=None (float64)
        Precision of the tiles (see :class:`KernelOperator`). With float32 the
        residuals cannot fall much below :math:`10^{-7}\,\theta_1` (measured
        1-3e-7 for RBF, Laplacian and Polynomial kernels, n = 1000-3000), so
        ``tol`` is raised to at least ``1e-5``. Stated accuracy: eigenvalues
        within :math:`10^{-6}` relative, eigenvector entries within
        :math:`10^{-4}` (tested); measured errors were about :math:`10^{-8}`
        and :math:`10^{-7}` (n = 1000-8000, against float64).
    tol : float, default=1e-10
        Residual tolerance relative to :math:`\theta_1`. Eigenvalue errors are
        of order :math:`\mathrm{tol}^2 \lambda_1^2/\mathrm{gap}`, eigenvector
        angles of order :math:`\mathrm{tol}\,\lambda_1/\mathrm{gap}`.
    max_iter : int, optional
        Cap on Rayleigh-Ritz iterations (each costs 1 to 8 products); default 100.
    random_state : int, numpy.random.Generator or None, default=0
        Seed of the landmarks (or of the random start block).
    warm_start : {"nystrom", "random"} or None, default="nystrom"
        ``"random"``/``None``: a Gaussian start block, as ``top_eigh``.
    n_landmarks : int, optional
        Nystrom landmarks :math:`m`; default ``min(n, max(20 s, 500))``.
    tile_size : int, optional
        See :class:`KernelOperator`.
    progress : bool or None, default=None
        ``tqdm`` bars: products so far (with the largest residual over its
        target) and, with ``True``, nested, the tiles of the current product.
        ``None`` (auto): the products bar appears only once the solve has run
        for 5 seconds (:func:`mvkm.covariance.progress_bar`; ``MVKM_PROGRESS=0``
        in the environment turns it off); ``False``: never.
    return_info : bool, default=False
        Also return a dict: ``n_products`` (full kernel passes, the row means
        included), ``n_iter``, ``residuals`` (final, relative to
        :math:`\theta_1`), ``nystrom_eigenvalues``, ``tol`` (the one used),
        ``seconds`` (``"setup"``, ``"warm_start"``, ``"iterations"``).

    Returns
    -------
    eigenvalues : ndarray of shape (n_components,)
        Descending.
    eigenvectors : ndarray of shape (n, n_components)
        Orthonormal, signs fixed by :func:`mvkm.linalg.flip_signs`.
    info : dict
        Only with ``return_info=True``.

    Raises
    ------
    TypeError
        For an unsupported kernel or a non-integer ``n_components``/``max_iter``.
    ValueError
        For NaN/inf in ``X``, ``n_components`` outside ``[1, n - 1]``, a bad
        ``device``, ``dtype``, ``tol``, ``warm_start`` or ``n_landmarks``.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` is reached, or when the residuals stagnate at the
        round-off floor above ``tol``; the current Ritz pairs are returned.

    See Also
    --------
    KernelOperator : the operator; ``mvkm.linalg.top_eigh(KernelOperator(X, k), s,
        method="subspace")`` also works (random start, no Nystrom).
    mvkm.linalg.top_eigh : the dense/ARPACK/subspace solver on a stored matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.kernels import RBF, center_gram
    >>> from mvkm.linalg import top_eigh
    >>> from mvkm.matfree import matfree_top_eigh
    >>> X = np.random.default_rng(0).normal(size=(400, 5))
    >>> lam, V = matfree_top_eigh(X, RBF(2.0), 3)
    >>> lam_d, V_d = top_eigh(center_gram(RBF(2.0)(X)), 3, method="dense")
    >>> bool(np.allclose(lam, lam_d, rtol=1e-10))
    True
    >>> bool(np.allclose(V, V_d, atol=1e-7))
    True
    """
    check_bool(center, "center")
    check_bool(progress, "progress", allow_none=True)
    check_bool(return_info, "return_info")
    t_start = time.perf_counter()
    X, kernel = data_then_kernel(X, kernel, "matfree_top_eigh")
    _check_kernel(kernel)
    X = check_array(X, "X")
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"matfree_top_eigh needs n >= 2 points, got X of shape {X.shape}")
    s = check_n_components(n_components, n - 1, what="n - 1")
    tol = _check_tol(tol)
    if max_iter is None:
        max_iter = _DEFAULT_MAX_ITER
    elif isinstance(max_iter, bool) or not isinstance(max_iter, Integral):
        raise TypeError(f"max_iter must be an integer or None, got {max_iter!r}")
    elif max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    max_iter = int(max_iter)
    if warm_start not in ("nystrom", "random", None):
        raise ValueError(f"warm_start must be 'nystrom', 'random' or None, got {warm_start!r}")
    b = min(n, s + max(_MIN_OVERSAMPLING, s))
    if n_landmarks is None:
        m = min(n, max(_NYSTROM_PER_COMPONENT * s, _NYSTROM_MIN))
    else:
        m = check_count(n_landmarks, "n_landmarks")
        if not b <= m <= n:
            raise ValueError(f"n_landmarks must be between the block size {b} and n = {n}, got {m}")
    rng = check_random_state(random_state)
    torch_dtype = _check_dtype(dtype)
    if _is_float32(torch_dtype):
        tol = max(tol, _FLOAT32_TOL)

    op = KernelOperator(X, kernel, center=center, device=device, dtype=torch_dtype,
                        tile_size=tile_size, progress=progress is True)
    t_setup = time.perf_counter()
    nystrom_eigenvalues = np.empty(0)
    if warm_start == "nystrom":
        Q0, nystrom_eigenvalues = _nystrom_start(op, b, m, rng)
    else:
        Q0 = rng.standard_normal((n, b))
    t_warm = time.perf_counter()

    bar = progress_bar(None, "matfree_top_eigh", progress, unit="product")
    # round-off of one product with K_c: about n eps max|K| (|K_ij| <= max_i k(x_i, x_i))
    eps = _eps(torch_dtype)
    floor = n * eps * max(float(np.abs(op._kdiag).max()), np.finfo(float).tiny)

    def matmat(Z: NDArray[np.float64]) -> NDArray[np.float64]:
        out = op._matmat(Z)
        if bar is not None:
            bar.update(1)
        return out

    try:
        # The solver's own numpy work is O(n b^2) per iteration (QR, Rayleigh-Ritz),
        # negligible next to a product: one BLAS thread. With two busy-waiting
        # OpenBLAS threads it took 1.0-1.5 s instead of 0.1 s at n = 3000 on the
        # loaded 2-core reference machine. torch (the products) is not affected.
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            w, V, residuals, n_iter = _block_subspace(matmat, Q0, s, tol, max_iter, bar,
                                                      floor=floor)
    finally:
        if bar is not None:
            bar.close()
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(V))):
        raise ValueError("matfree_top_eigh produced non-finite eigenpairs; rescale X")
    w = np.ascontiguousarray(w, dtype=np.float64)
    V = flip_signs(V)
    if not return_info:
        return w, V
    t_end = time.perf_counter()
    info = {
        "n_products": op.n_products_, "n_iter": n_iter, "residuals": residuals,
        "nystrom_eigenvalues": nystrom_eigenvalues, "tol": tol, "block_size": b,
        "n_landmarks": m if warm_start == "nystrom" else 0,
        "seconds": {"setup": t_setup - t_start, "warm_start": t_warm - t_setup,
                    "iterations": t_end - t_warm},
    }
    return w, V, info


def _filter(matmat: Callable[[NDArray[np.float64]], NDArray[np.float64]],
            V: NDArray[np.float64], KV: NDArray[np.float64], theta: NDArray[np.float64],
            k: int, need: float) -> NDArray[np.float64]:
    """:func:`mvkm.linalg._chebyshev_filter` with its degree also capped by what is needed.

    Each product is a full pass over the kernel, so the degree is the smallest
    that shrinks the largest residual to its target (plus one), if that is below
    linalg's degree (its growth cap, at most 8). With a Nystrom start one pass of
    degree 4-5 often finishes where linalg's rule would spend 8 products.
    """
    return _chebyshev_filter(matmat, V, KV, theta, k, need=need if _ADAPTIVE_DEGREE else None)


def _block_subspace(matmat: Callable[[NDArray[np.float64]], NDArray[np.float64]],
                    Q0: NDArray[np.float64], s: int, tol: float, max_iter: int, bar: Any,
                    floor: float = 0.0
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], int]:
    """``mvkm.linalg._subspace_top`` from a given start block (same filter, Rayleigh-Ritz,
    locking and stopping rule); also returns the final residuals over theta_1.

    Stops early, with a ``ConvergenceWarning``, when the largest unconverged
    residual has not halved over ``_STAGNATION_WINDOW`` iterations while it is
    below ``_STAGNATION_FACTOR * floor`` (``floor``: the absolute round-off of a
    product; 0 turns the rule off): ``tol`` is then below what the products
    can attain, and more iterations only repeat the same round-off.
    """
    n = Q0.shape[0]
    Q = _orthonormal_basis(Q0)
    KQ = matmat(Q)
    X_locked = np.empty((n, 0))
    lam_locked = np.empty(0)
    res_locked = np.empty(0)
    converged = stagnated = False
    worst: list[float] = []
    for iteration in range(1, max_iter + 1):
        theta, V, KV = _rayleigh_ritz(Q, KQ)
        k = s - lam_locked.size
        lam_1 = max(float(theta[0]), float(lam_locked[0]) if lam_locked.size else -np.inf)
        scale = max(abs(lam_1), np.finfo(float).tiny)
        residuals = np.linalg.norm(KV[:, :k] - V[:, :k] * theta[:k], axis=0)
        ok = residuals <= tol * scale
        if bar is not None:
            bar.set_postfix(locked=lam_locked.size, residual=f"{residuals.max() / scale:.2e}")
        if ok.all():
            converged = True
            break
        worst.append(float(residuals[~ok].max()))
        w_ = _STAGNATION_WINDOW
        if (len(worst) > w_ and worst[-1] <= _STAGNATION_FACTOR * floor
                and min(worst[-w_:]) > 0.5 * min(worst[:-w_])):
            stagnated = True
            break
        if iteration == max_iter:
            break
        n_new = int(np.argmin(ok))
        if n_new:
            X_locked = np.hstack([X_locked, V[:, :n_new]])
            lam_locked = np.concatenate([lam_locked, theta[:n_new]])
            res_locked = np.concatenate([res_locked, residuals[:n_new] / scale])
            V, KV, theta, k = V[:, n_new:], KV[:, n_new:], theta[n_new:], k - n_new
        need = float(residuals[n_new:].max()) / (tol * scale) if k else 1.0
        Z = _filter(matmat, V, KV, theta, k, need)
        if lam_locked.size:
            for _ in range(2):
                Z -= X_locked @ (X_locked.T @ Z)
        Q = _orthonormal_basis(Z)
        KQ = matmat(Q)
    if stagnated:
        warnings.warn(
            f"matfree_top_eigh stopped after {iteration} iterations: the residuals "
            f"||K v - lambda v|| stagnated at {worst[-1]:.3g} ({worst[-1] / scale:.3g} lambda_1), "
            f"the round-off of the kernel products (n eps max|K| = {floor:.3g}); tol * lambda_1 = "
            f"{tol * scale:.3g} is below it. {lam_locked.size + int(np.sum(ok))} of {s} pairs "
            "met tol; the others are as accurate as float64 products allow: raise tol to "
            f"about {2 * worst[-1] / scale:.1g} to silence this",
            ConvergenceWarning, stacklevel=3)
    elif not converged:
        warnings.warn(
            f"matfree_top_eigh stopped at max_iter={max_iter} iterations with "
            f"{lam_locked.size + int(np.sum(ok))} of {s} residuals ||K v - lambda v|| below "
            f"tol * lambda_1 = {tol * scale:.3g} (largest {float(residuals.max()):.3g}); "
            "raise max_iter or tol",
            ConvergenceWarning, stacklevel=3)
    w = np.concatenate([lam_locked, theta[:k]])
    V_all = np.hstack([X_locked, V[:, :k]])
    res = np.concatenate([res_locked, residuals / scale])
    order = np.argsort(-w, kind="stable")
    return w[order], V_all[:, order], res[order], iteration
