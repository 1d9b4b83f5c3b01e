r"""Compact Gram matrices of the dense duals: one triangle per kernel, centred implicitly.

The dual estimators (:class:`~mvkm.rkm.MultiViewRKM`, :class:`~mvkm.ppca.KernelPPCA`,
:class:`~mvkm.kpls.MultiViewKPLS`) take the path of
:func:`mvkm.linalg.kernel_top_eigh`: each kernel's Gram matrix is built once,
upper triangle only (:func:`mvkm.kernels.upper_gram`: the tiled kernels skip
the transposed copies of their tiles and never touch the strictly lower
triangle's memory), and the centred matrix :math:`K_c = M_c K M_c` is never
formed: every product is :math:`K_c Z = K Z - r\,(1^\top Z) - 1\,(r^\top Z) + g\,1\,(1^\top Z)`
with the row means :math:`r` and the grand mean :math:`g` of :math:`K` (one BLAS
``dsymv``/``dsymm`` on the triangle, then :math:`O(n)` work per column). A
:class:`GramTriangle` is that triangle with its means; it is also the form in
which a fitted model keeps a kernel it needs later.

:func:`dense_dual_bytes` estimates the peak memory of such a fit and
:func:`available_memory` reads what the machine has, so that the estimators
choose their matrix-free route, or stop with a clear error, before they allocate.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import blas as _blas

from ._validation import check_finite_result
from .linalg import (
    _AUTO_DENSE_FRACTION,
    _AUTO_DENSE_MAX_N,
    _checked_tol,
    _subtract_centering,
    _symv_operand,
    _triangle_means,
    _triangle_top,
    top_eigh,
)

Array = NDArray[np.float64]

#: Rows per block when a triangle is copied or summed (the strict lower part untouched).
_ROWS = 256


def _triangle_matmat(K: Array, Z: Array) -> Array:
    r""":math:`K Z` for the symmetric :math:`K` held in the upper triangle of the C-ordered ``K``
    (``Z`` of shape (n, k), k >= 1; :class:`GramTriangle` holds C-ordered arrays only).

    :math:`K = U + U^\top - \operatorname{diag}(K)` with :math:`U` the upper triangle
    (diagonal included): two BLAS ``dtrmm`` (:math:`U Z` and :math:`U^\top Z`, each reading
    the triangle once, the strict lower part never) and the diagonal's correction. On
    OpenBLAS it is 1.3 to 1.9 times faster than ``dsymm`` on the same triangle for 8 to 32
    columns (n = 5000 and 10000, one and two threads; ``benchmarks/bench_kpca.py
    --block-products``).
    """
    A = K.T                                   # Fortran-ordered; its lower triangle is K's upper
    Zf = np.asfortranarray(Z)
    out = _blas.dtrmm(1.0, A, Zf, lower=1, trans_a=1)           # U Z
    out += _blas.dtrmm(1.0, A, Zf, lower=1, trans_a=0)          # U^T Z
    out -= np.diagonal(K)[:, None] * Zf
    return out


class GramTriangle:
    r"""A symmetric Gram matrix kept as the upper triangle of a C-ordered ``n x n`` array.

    Parameters
    ----------
    K : ndarray of shape (n, n), C-ordered float64
        Its upper triangle (diagonal included) holds the matrix; the strict
        lower triangle is never read (it may be uninitialised memory).
    center : bool, default=True
        Whether the products, the trace and the eigenpairs are those of the
        centred :math:`K_c = M_c K M_c` (applied implicitly) or of :math:`K`.

    Attributes
    ----------
    row_means : ndarray of shape (n,)
        :math:`r = \frac1n K 1` (= the column means), what test-time centring needs.
    grand_mean : float
        :math:`g = \frac1n 1^\top r`.
    """

    def __init__(self, K: Array, *, center: bool = True) -> None:
        if not (isinstance(K, np.ndarray) and K.ndim == 2 and K.shape[0] == K.shape[1]
                and K.dtype == np.float64 and K.flags.c_contiguous):
            raise ValueError("K must be a square C-ordered float64 array")
        self.K = K
        self.n = int(K.shape[0])
        self.center = bool(center)
        self._means = _triangle_means(K, upper=True)
        self.row_means = self._means[0]
        self.grand_mean = self._means[2]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def diagonal(self) -> Array:
        return np.diagonal(self.K)

    def trace(self) -> float:
        """:math:`\\operatorname{tr} K_c = \\operatorname{tr} K - n g` (or :math:`\\operatorname{tr} K`)."""
        t = float(np.trace(self.K))
        return t - self.n * self.grand_mean if self.center else t

    def matmat(self, Z: Array) -> Array:
        """:math:`K_c Z` (or :math:`K Z`) for ``Z`` of shape (n,) or (n, k): one ``dsymv`` per
        column for ``k < 4``, else two ``dtrmm`` (:func:`_triangle_matmat`)."""
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim == 2 and Z.shape[1] >= 4:
            out = _triangle_matmat(self.K, Z)
        else:
            # a vector, or a few columns: one memory-bound dsymv each is cheaper than a BLAS-3
            # pass (benchmarks/bench_kpca.py --block-products: equal at 4 columns)
            A, lower = _symv_operand(self.K, upper=True)
            cols = Z.reshape(self.n, -1)
            out = np.empty(cols.shape)
            for j in range(cols.shape[1]):
                out[:, j] = _blas.dsymv(1.0, A, cols[:, j], lower=lower)
            out = out.reshape(Z.shape)
        if self.center:
            _subtract_centering(out, Z, self._means, 1.0)
        return out

    __matmul__ = matmat

    def center_explicitly(self) -> None:
        r"""Centre the triangle itself, :math:`K_{ij} - r_i - r_j + g` on and above the diagonal.

        After it the products read :math:`K_c` directly (``center`` becomes
        False). An iteration that resolves eigenvalues far below the size of the
        uncentred entries (MultiViewKPLS' D-inner-product Lanczos on a wide RBF:
        entries near 1, centred eigenvalues near 1e-6) keeps the round-off of
        :func:`mvkm.kernels.center_gram`, where centring inside every product
        cancels ``n`` times more. ``row_means`` keeps the uncentred means that
        test-time centring needs.
        """
        r, g = self.row_means, self.grand_mean
        with np.errstate(all="ignore"):          # the strict lower part is never read
            for i0 in range(0, self.n, _ROWS):
                i1 = min(self.n, i0 + _ROWS)
                blk = self.K[i0:i1, i0:]
                blk -= r[i0:i1, None]
                blk -= r[None, i0:]
                blk += g
        self.center = False

    def dense(self) -> Array:
        """The full symmetric matrix (:math:`K_c`, or :math:`K`): a new ``n x n`` array."""
        from .covariance import _symmetrize_upper

        out = np.empty((self.n, self.n))
        for i0 in range(0, self.n, _ROWS):
            out[i0:i0 + _ROWS, i0:] = self.K[i0:i0 + _ROWS, i0:]
        _symmetrize_upper(out)
        if self.center:
            r, g = self.row_means, self.grand_mean
            out -= r[:, None]
            out -= r[None, :]
            out += g
        return out

    def top_eigh(self, n_components: int, *, tol: float | None = None,
                 random_state: Any = 0) -> tuple[Array, Array]:
        """The top eigenpairs of :math:`K_c` (or :math:`K`), as ``top_eigh`` gives them.

        The route of :func:`mvkm.linalg.kernel_top_eigh`: LAPACK on the full
        matrix for :math:`n \\le 1000` or :math:`s > 0.08\\,n` (``top_eigh``'s
        ``"auto"``), else Lanczos with ``dsymv`` on the triangle and the centring
        inside each product.
        """
        n, s = self.n, int(n_components)
        if n <= _AUTO_DENSE_MAX_N or s > _AUTO_DENSE_FRACTION * n:
            return top_eigh(self.dense(), s, "dense", check_symmetric=False)
        from ._validation import check_random_state

        return _triangle_top(self.K, s, _checked_tol(tol), check_random_state(random_state),
                             self.center, "the Gram matrix", means=self._means)


def kernel_triangle(kernel: Any, X: Array, *, center: bool = True,
                    n_jobs: int | None = None) -> GramTriangle:
    """The Gram matrix of ``kernel`` on ``X`` as a :class:`GramTriangle`.

    An :class:`mvkm.kernels.Kernel` builds its upper triangle only
    (:func:`mvkm.kernels.upper_gram`); any other callable returns its whole
    matrix (the caller checks its symmetry), of which the upper triangle is used.
    """
    from .kernels import Kernel, upper_gram

    if isinstance(kernel, Kernel):
        K = upper_gram(kernel, X, n_jobs=n_jobs)
    else:
        K = np.ascontiguousarray(kernel(X), dtype=np.float64)
    T = GramTriangle(K, center=center)
    # a NaN or inf anywhere in the triangle reaches its row sums: a free check
    check_finite_result(T.row_means, "the Gram matrix", "the view")
    return T


def upper_sum(triangles: Sequence[GramTriangle], features: Sequence[Array] = (), *,
              n: int, center: bool = True, into: GramTriangle | None = None) -> GramTriangle:
    r"""The triangle of :math:`\sum_v K_v + \sum_w \Phi_w \Phi_w^\top`.

    The kernels' triangles are added block row by block row (the strict lower
    part is never touched, so its memory is never committed); each feature
    block adds :math:`\Phi\Phi^\top` by BLAS ``dsyrk`` in place. Centring is
    linear, so :math:`M_c (\sum_v K_v) M_c = \sum_v M_c K_v M_c`: the sum of the
    centred kernels is the centred sum.

    The sum goes into a new array, or, with ``into`` (one of ``triangles``), into
    that triangle's own array: no new ``n x n`` array, and its means are those of
    the parts added up, not recomputed. ``into`` is returned, holding the sum.
    """
    if into is not None and not any(T is into for T in triangles):
        raise ValueError("into must be one of the triangles")
    if into is not None:
        S, first, rest = into.K, None, [T for T in triangles if T is not into]
    elif triangles:
        S, first, rest = np.empty((n, n)), triangles[0], list(triangles[1:])
    else:
        S, first, rest = np.zeros((n, n)), None, []
    for i0 in range(0, n, _ROWS):
        i1 = min(n, i0 + _ROWS)
        if first is not None:
            np.copyto(S[i0:i1, i0:], first.K[i0:i1, i0:])
        for T in rest:
            S[i0:i1, i0:] += T.K[i0:i1, i0:]
    for P in features:
        # S's upper triangle is the lower triangle of the Fortran-ordered S.T
        out = _blas.dsyrk(1.0, np.asfortranarray(P), beta=1.0, c=S.T, trans=0, lower=1,
                          overwrite_c=1)
        if not np.shares_memory(out, S):                 # pragma: no cover - f2py copied
            S = np.ascontiguousarray(out.T)
    if into is not None and S is into.K:
        # the row means of a sum are the sums of the row means (Phi Phi^T 1 / n for a feature block)
        row = sum(T.row_means for T in triangles) + sum(P @ (P.sum(axis=0) / n) for P in features)
        into.center, into.row_means, into.grand_mean = bool(center), row, float(row.mean())
        into._means = (row, row, into.grand_mean)
        T = into
    else:
        T = GramTriangle(S, center=center)
    if features:   # Phi Phi^T of finite features can overflow: its row sums show it, for free
        check_finite_result(T.row_means, "the kernel matrix of the explicit features", "views")
    return T


def features_triangle(P: Array, *, center: bool = True) -> GramTriangle:
    r""":math:`\Phi\Phi^\top` as a :class:`GramTriangle` (one ``dsyrk``, upper triangle)."""
    return upper_sum([], [P], n=int(P.shape[0]), center=center)


# ---------------------------------------------------------------- memory guard
def _cgroup_room() -> int | None:
    """Bytes left under this process's cgroup memory limit (v2 or v1); ``None`` if unlimited."""
    pairs = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
             ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
              "/sys/fs/cgroup/memory/memory.usage_in_bytes"))
    for limit_file, usage_file in pairs:
        try:
            with open(limit_file) as fh:
                raw = fh.read().strip()
            if raw == "max":
                return None
            limit = int(raw)
            if limit >= 1 << 60:              # cgroup v1's "unlimited"
                return None
            with open(usage_file) as fh:
                usage = int(fh.read().strip())
            return max(limit - usage, 0)
        except (OSError, ValueError):
            continue
    return None


def _address_space_room() -> int | None:
    """Bytes left under ``ulimit -v`` (RLIMIT_AS), from this process's virtual size."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft < 0:
            return None
        with open("/proc/self/statm") as fh:
            size = int(fh.read().split()[0]) * resource.getpagesize()
        return max(int(soft) - size, 0)
    except (ImportError, OSError, ValueError):
        return None


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation; ``None`` when unknown.

    The smallest of: the machine's ``MemAvailable`` (``/proc/meminfo``, or psutil's
    ``available``), the room left under the process's cgroup limit (a container,
    a Binder pod: ``memory.max`` minus ``memory.current``, or cgroup v1's files)
    and the room left under ``ulimit -v`` (RLIMIT_AS minus the virtual size).
    """
    machine: int | None = None
    try:
        import psutil  # type: ignore[import-untyped]

        machine = int(psutil.virtual_memory().available)
    except Exception:
        try:
            with open("/proc/meminfo") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        machine = int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    rooms = [r for r in (machine, _cgroup_room(), _address_space_room()) if r is not None]
    return min(rooms) if rooms else None


#: Columns of the largest working set besides the matrices (the Lanczos basis, 300
#: vectors, and its products), in units of ``8 n`` bytes.
_WORKSPACE_COLUMNS = 320


def triangle_bytes(n: int) -> float:
    """Memory a stored kernel matrix takes: the whole ``8 n^2``.

    A triangle writes only its upper half, but the ``n x n`` array is allocated
    whole: an allocation counts it under an address-space limit (``ulimit -v``) and
    where the system does not overcommit, and numpy's "Unable to allocate" is
    raised for the whole array. (The estimate counted half and was half the
    measured peak.)
    """
    return 8.0 * n * n


def dense_dual_bytes(n: int, kernels: Sequence[Any], *, n_feature_views: int = 0,
                     dense_copy: bool = False, sum_in_place: bool = False) -> float:
    r"""Estimated peak memory (bytes) of a dense dual fit on ``n`` points.

    One triangle per kernel (the whole ``8 n^2`` for kernels that are not
    :class:`mvkm.kernels.Kernel` tiles: they return their full matrix), the
    triangle of their sum when there is more than one term (unless
    ``sum_in_place``: the sum goes into one kernel's triangle, :func:`upper_sum`'s
    ``into``), and a full ``8 n^2`` copy when the route needs the centred matrix
    whole (``dense_copy``: LAPACK for small ``n``, the Stiefel solver).
    """
    from .kernels import Laplacian, RBF

    per = [triangle_bytes(n) if isinstance(k, (RBF, Laplacian)) else 8.0 * n * n for k in kernels]
    total = sum(per) + 8.0 * n * _WORKSPACE_COLUMNS
    if not kernels or (len(kernels) + n_feature_views > 1 and not sum_in_place):
        total += triangle_bytes(n)
    if dense_copy:
        total += 8.0 * n * n
    return float(total)


def memory_verdict(need: float, *, headroom: float = 0.9) -> tuple[bool, int | None]:
    """Whether ``need`` bytes fit in ``headroom`` times the available memory (True when
    unknown), and the available memory."""
    avail = available_memory()
    return (avail is None or need <= headroom * avail), avail


def gib(nbytes: float | None) -> str:
    return "unknown" if nbytes is None else f"{nbytes / 2**30:.3g} GiB"
