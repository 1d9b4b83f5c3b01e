r"""Kernel functions and the centering of Gram matrices.

Every kernel is a small callable object: ``k(X, Y=None)`` returns the Gram
matrix :math:`[k(x_i, y_j)]_{ij}` of shape ``(len(X), len(Y))`` (``Y=None``
means ``Y = X``). Distances are computed with one matrix product (GEMM),
:math:`\|x-y\|^2 = \|x\|^2 + \|y\|^2 - 2 x^\top y`, never with Python loops,
on data shifted by a coordinate-wise median of the reference points (the same
shift for both arguments): the expansion's round-off is then relative to the
spread of the data, not to its distance from the origin.

Centering in feature space, :math:`\phi_c(x) = \phi(x) - \frac1n\sum_i \phi(x_i)`,
is done on the Gram matrix in :math:`O(n^2)` by subtracting row and column
means (never by forming :math:`M_c K M_c` with :math:`M_c = I - \frac1n 1 1^\top`,
which costs :math:`O(n^3)`). Test rows are centred with the *training* means.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray

from contextlib import nullcontext
from contextvars import ContextVar

from ._parallel import limit_threads
from ._parallel import row_blocks as _row_blocks
from ._parallel import row_col_means
from ._parallel import run_parallel as _run_parallel
from ._validation import (
    check_array,
    check_count,
    check_positive,
    check_same_n_features,
    check_square,
)
from ._validation import check_bool

__all__ = [
    "Kernel",
    "Linear",
    "RBF",
    "Polynomial",
    "Laplacian",
    "squared_distances",
    "centering_matrix",
    "center_gram",
    "center_test_gram",
    "uncenter_kernel_values",
    "upper_gram",
]


#: Set by :func:`upper_gram`: symmetric tiled Gram matrices skip their mirrored tiles.
_UPPER_ONLY: ContextVar[bool] = ContextVar("mvkm_upper_only", default=False)

_CANCELLATION_RATIO = 1e-4
_REFINE_CHUNK = 1 << 15
# Tiles of 512 x 512 (2 MiB): each is finished while it sits in cache.
_TILE = 512


def _refine_cancelled(D: NDArray[np.float64], X: NDArray[np.float64], Y: NDArray[np.float64],
                      xx: NDArray[np.float64], yy: NDArray[np.float64]) -> None:
    """Recompute, in place, the entries of ``D`` where the GEMM expansion cancels.

    Candidates are found with one scalar comparison (a boolean pass over ``D``),
    then filtered with the per-entry bound ``D_ij < r (|x_i|^2 + |y_j|^2)``.
    """
    bound = _CANCELLATION_RATIO * (float(xx.max()) + float(yy.max()))
    rows, cols = np.nonzero(D < bound)
    if rows.size == 0:
        return
    keep = D[rows, cols] < _CANCELLATION_RATIO * (xx[rows] + yy[cols])
    rows, cols = rows[keep], cols[keep]
    for start in range(0, rows.size, _REFINE_CHUNK):
        r = rows[start : start + _REFINE_CHUNK]
        c = cols[start : start + _REFINE_CHUNK]
        diff = X[r] - Y[c]
        D[r, c] = np.einsum("ij,ij->i", diff, diff)


#: The largest error of an RBF exponent left unrefined: the kernel value's relative error.
_RBF_EXPONENT_TOL = 1e-12
#: Exponents below minus this are kernel values under 1e-17 of k(x, x) = 1: not refined.
_RBF_NEGLIGIBLE = 40.0


def _refine_exponent(T: NDArray[np.float64], Z: NDArray[np.float64], W: NDArray[np.float64],
                     hz: NDArray[np.float64], hw: NDArray[np.float64], err: float) -> None:
    """Recompute, in place, the RBF exponents of ``T`` whose expansion is not accurate.

    ``T`` holds :math:`z_i^\top w_j - |z_i|^2/2 - |w_j|^2/2`, with an absolute
    error of about ``err * (hz_i + hw_j)``. Entries where that bound exceeds
    ``_RBF_EXPONENT_TOL`` and the exponent may be above ``-_RBF_NEGLIGIBLE``
    become :math:`-|z_i - w_j|^2 / 2` from the differences (exactly symmetric:
    the difference of a pair is negated, not rounded differently).
    """
    slack = err * (float(hz.max()) + float(hw.max()))
    rows, cols = np.nonzero(T > -(_RBF_NEGLIGIBLE + slack))
    if rows.size == 0:
        return
    keep = err * (hz[rows] + hw[cols]) > _RBF_EXPONENT_TOL
    rows, cols = rows[keep], cols[keep]
    for start in range(0, rows.size, _REFINE_CHUNK):
        r = rows[start : start + _REFINE_CHUNK]
        c = cols[start : start + _REFINE_CHUNK]
        diff = Z[r] - W[c]
        T[r, c] = -0.5 * np.einsum("ij,ij->i", diff, diff)


def _tiled_product(X: NDArray[np.float64], Y: NDArray[np.float64] | None, finish) -> NDArray[np.float64]:
    """The matrix whose tile ``(I, J)`` is ``finish`` applied to ``X[I] @ Y[J].T``.

    ``finish(tile, I, J, diagonal)`` turns the product tile into the wanted
    entries, in place, while it sits in cache; each tile is written once.
    ``Y is None`` means ``Y = X`` and a symmetric result: only the tiles on and
    above the diagonal are computed (half the products and half the element-wise
    work) and each one's transpose fills its mirror. Diagonal tiles come from a
    SYRK (``A @ A.T``), so as long as ``finish`` only adds symmetric terms the
    result is exactly symmetric. Rows of tiles run on several threads for large
    matrices (they write disjoint parts of the output).
    """
    symmetric = Y is None
    mirror = symmetric and not _UPPER_ONLY.get()    # read here: worker threads do not see it
    Yv = X if Y is None else Y
    n, m = X.shape[0], Yv.shape[0]
    out = np.empty((n, m))

    def tile_row(i0: int) -> None:
        I = slice(i0, min(i0 + _TILE, n))
        XI = X[I]
        for j0 in range(i0 if symmetric else 0, m, _TILE):
            J = slice(j0, min(j0 + _TILE, m))
            diagonal = symmetric and j0 == i0
            tile = XI @ XI.T if diagonal else XI @ Yv[J].T
            finish(tile, I, J, diagonal)
            out[I, J] = tile
            if mirror and not diagonal:
                out[J, I] = tile.T

    _run_parallel(tile_row, range(0, n, _TILE), max(n, m))
    return out


def _row_norms(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Squared Euclidean norms of the rows of ``X``."""
    return np.einsum("ij,ij->i", X, X)


#: Rows of the sample whose coordinate-wise median is the shift of the distance computations.
_SHIFT_SAMPLE = 64


def _shift_to_middle(X: NDArray[np.float64], Y: NDArray[np.float64] | None
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None, float]:
    r"""``X - c``, ``Y - c`` and their largest ``|entry|``; ``c`` a coordinate-wise median.

    Distances do not depend on the origin, but the expansion
    :math:`\|x\|^2 + \|y\|^2 - 2 x^\top y` has an absolute round-off of about
    :math:`\varepsilon (\|x\|^2 + \|y\|^2)`: far from the origin (data at
    :math:`10^8`) it cancels every digit. After the shift the round-off of the
    pair :math:`(x_i, y_j)` is :math:`\varepsilon (\|x_i - c\|^2 + \|y_j - c\|^2)`,
    relative to the spread of the data, not to their offset. The reference
    points are ``Y`` (the training points of test rows ``K(X_test, X)``), or
    ``X`` when ``Y`` is None; ``c`` is the coordinate-wise median of about
    ``_SHIFT_SAMPLE`` of their rows (evenly strided), so that a few outliers do
    not move it (a midpoint or a mean would: one point at :math:`10^{200}`
    would cost every other pair its digits). Points far from ``c`` keep the
    accuracy they had: a pair close to each other but far from ``c`` is no
    worse off than without the shift. Data whose median lies within their
    median absolute deviation of the origin (largest over the columns) are left
    as they are (little to gain), so centred data give the same bits as
    without the shift. If the shift overflows (data near
    :math:`\pm 10^{308}` on both sides) the data are used unshifted. Cost: a
    median of about 64 rows, one subtraction of each array and the pass for
    the largest entry (which the overflow guard of the radial kernels needs
    anyway).
    """
    R = X if Y is None else Y
    step = max(1, R.shape[0] // _SHIFT_SAMPLE)
    sample = R[::step]
    c = np.median(sample, axis=0)
    with np.errstate(over="ignore", invalid="ignore"):
        spread = float(np.median(np.abs(sample - c), axis=0).max())   # robust: a MAD
    if not float(np.abs(c).max()) > spread:   # near the origin already: little to gain
        return X, Y, _max_abs(X, Y)
    with np.errstate(over="ignore", invalid="ignore"):
        Xs = X - c
        Ys = None if Y is None else Y - c
        top = _max_abs(Xs, Ys)     # also the check: inf if the shift overflowed
    if not np.isfinite(top):
        return X, Y, _max_abs(X, Y)
    return Xs, Ys, top


def _squared_distances(X: NDArray[np.float64], Y: NDArray[np.float64] | None, *,
                       refine: bool, post=None) -> NDArray[np.float64]:
    r"""Squared distances of validated inputs (``Y is None``: ``X`` to itself), tile by tile.

    Each tile is :math:`\|x_i\|^2 + \|y_j\|^2 - 2 x_i^\top y_j`, optionally
    refined where the expansion cancels, clipped at zero, zero on the diagonal
    when ``Y is None``, and then mapped by ``post(tile)`` in place.
    """
    Yv = X if Y is None else Y
    xx = _row_norms(X)
    yy = xx if Y is None else _row_norms(Y)

    def finish(tile, I, J, diagonal):
        tile *= -2.0
        tile += xx[I, None] + yy[None, J]
        if refine:
            _refine_cancelled(tile, X[I], Yv[J], xx[I], yy[J])
        np.maximum(tile, 0.0, out=tile)
        if diagonal:
            np.fill_diagonal(tile, 0.0)
        if post is not None:
            post(tile)

    return _tiled_product(X, Y, finish)


def squared_distances(X: ArrayLike, Y: ArrayLike | None = None) -> NDArray[np.float64]:
    r"""Pairwise squared Euclidean distances via one GEMM.

    Computes :math:`D_{ij} = \|x_i\|^2 + \|y_j\|^2 - 2 x_i^\top y_j`, clipped at
    zero (round-off can make it slightly negative). When ``Y`` is ``None`` the
    result is exactly symmetric with a zero diagonal. The matrix is built tile by
    tile (each tile's product and element-wise passes run in cache), and when
    ``Y`` is ``None`` only the tiles on and above the diagonal are computed.

    Both arguments are first shifted by the same vector, a coordinate-wise
    median of ``Y`` (or of ``X`` when ``Y`` is None), so that an offset of the
    data (points near :math:`10^8`) does not enter the norms. The expansion still loses relative accuracy when
    :math:`\|x_i - y_j\|^2` is tiny compared with :math:`\|x_i\|^2 + \|y_j\|^2`
    (norms after the shift; its absolute round-off is about
    :math:`\varepsilon (\|x_i\|^2 + \|y_j\|^2)`). Entries with
    :math:`D_{ij} < 10^{-4} (\|x_i\|^2 + \|y_j\|^2)` (near-duplicate points) are
    therefore recomputed directly as :math:`\sum_k (x_{ik} - y_{jk})^2`, so every
    entry has a relative error of order :math:`10^{4}\varepsilon` at worst; without
    this, a point passed both as ``X`` and ``Y`` would get a distance of order
    :math:`\sqrt{\varepsilon}\,\|x\|` to itself under a square root (Laplacian).

    Parameters
    ----------
    X : array_like of shape (n, d)
    Y : array_like of shape (m, d), optional

    Returns
    -------
    D : ndarray of shape (n, m)
    """
    Xs, Ys, _ = _shift_to_middle(*_check_pair(X, Y))
    return _squared_distances(Xs, Ys, refine=True)


def _check_pair(X: ArrayLike, Y: ArrayLike | None) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    """Validate the two arguments of a Gram matrix (``Y`` may be ``None``)."""
    Xa = check_array(X, "X")
    Ya = None if Y is None else check_array(Y, "Y")
    if Ya is not None:
        check_same_n_features(Xa, Ya)
    return Xa, Ya


class Kernel(ABC):
    """Base class of the kernels: a callable ``k(X, Y=None) -> Gram matrix``."""

    @abstractmethod
    def _gram(self, X: NDArray[np.float64], Y: NDArray[np.float64] | None) -> NDArray[np.float64]:
        """Gram matrix of validated inputs (``Y is None`` means ``Y = X``)."""

    def __call__(self, X: ArrayLike, Y: ArrayLike | None = None, *,
                 n_jobs: int | None = None) -> NDArray[np.float64]:
        """Return the Gram matrix ``[k(x_i, y_j)]`` of shape ``(len(X), len(Y))``.

        Parameters
        ----------
        X : array_like of shape (n, d)
        Y : array_like of shape (m, d), optional
            Defaults to ``X``; the result is then symmetric.
        n_jobs : int, optional
            Threads for the tiles of a large matrix (``-1``: every usable core).
            ``None``: the user's BLAS/OpenMP limit (``threadpoolctl`` or
            ``OMP_NUM_THREADS``), at most 8 (see docs/package.md, "Threads").

        Returns
        -------
        K : ndarray of shape (n, m)
        """
        with limit_threads(n_jobs) if n_jobs is not None else nullcontext():
            return self._gram(*_check_pair(X, Y))

    def diag(self, X: ArrayLike) -> NDArray[np.float64]:
        """Return :math:`k(x_i, x_i)` for every row of ``X`` without the full Gram matrix."""
        Xa = check_array(X, "X")
        return np.array([self._gram(Xa[i : i + 1], None)[0, 0] for i in range(len(Xa))])

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(vars(self).items()))))


class Linear(Kernel):
    r"""The linear kernel :math:`k(x, y) = x^\top y` (feature map: the identity)."""

    def _gram(self, X, Y):
        with np.errstate(over="ignore", invalid="ignore"):
            K = X @ (X if Y is None else Y).T
        return _check_finite_gram(K, self)

    def diag(self, X: ArrayLike) -> NDArray[np.float64]:
        Xa = check_array(X, "X")
        with np.errstate(over="ignore", invalid="ignore"):
            d = np.einsum("ij,ij->i", Xa, Xa)
            return _check_finite_gram(d, self)     # the error of self(X), not inf


# Squared norms of rows are safe from overflow while (max|x_ij| / scale)^2 * 4 d stays below this.
_OVERFLOW_GUARD = 1e300


def _max_abs(X: NDArray[np.float64], Y: NDArray[np.float64] | None) -> float:
    """``max |entry|`` of ``X`` and ``Y`` (two reductions each, no temporary array)."""
    s = max(float(X.max()), -float(X.min()))
    return s if Y is None else max(s, float(Y.max()), -float(Y.min()))


def _check_finite_gram(K: NDArray[np.float64], kernel: "Kernel") -> NDArray[np.float64]:
    """Raise a ``ValueError`` naming the kernel if the Gram matrix overflowed."""
    if not np.isfinite(K.sum()) and not np.all(np.isfinite(K)):
        raise ValueError(
            f"the Gram matrix of {kernel!r} is not finite: the inputs X (and Y) are too large "
            "for float64 in this kernel (an entry overflowed); rescale the data"
        )
    return K


class _OriginShiftedLinear(Linear):
    r"""The linear kernel of data moved to a new origin: :math:`(x - c)^\top (y - c)`.

    It differs from :math:`x^\top y` by :math:`-c^\top x - c^\top y + c^\top c`, a
    function of one argument plus a function of the other, which double centring
    removes exactly: the centred Gram matrix, its eigenpairs and centred test rows
    are those of the linear kernel. Computed near the data's middle they keep the
    digits that an offset (data near :math:`10^8`) would cancel. Internal: the
    estimators use it in place of ``Linear()`` where they only read centred values
    (:func:`centring_equivalent`); its ``repr`` is ``Linear()``.
    """

    def __init__(self, origin: NDArray[np.float64]) -> None:
        self.origin = origin

    def __repr__(self) -> str:
        return "Linear()"

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self)
                and np.array_equal(self.origin, other.origin))    # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.origin.tobytes()))

    def _gram(self, X, Y):
        return super()._gram(X - self.origin, None if Y is None else Y - self.origin)

    def diag(self, X: ArrayLike) -> NDArray[np.float64]:
        Xa = check_array(X, "X") - self.origin
        return np.einsum("ij,ij->i", Xa, Xa)


class _OriginShiftedPolynomial(Kernel):
    r"""The polynomial kernel with its feature map moved by :math:`\phi(m)`:

    .. math::

        \tilde k(x, y) = \langle \phi(x) - \phi(m), \phi(y) - \phi(m) \rangle
        = k(x, y) - k(x, m) - k(y, m) + k(m, m).

    It differs from :math:`k` by a function of one argument plus a function of
    the other, which double centring removes exactly, so the centred Gram
    matrix and centred test rows are those of ``Polynomial(degree, c)``. With
    :math:`x = m + x'`, :math:`y = m + y'`, :math:`g = x'^\top y'`,
    :math:`u = m^\top x'`, :math:`v = m^\top y'` and
    :math:`s = m^\top m + c`, the binomial and trinomial expansions give

    .. math::

        \tilde k = \sum_{i=1}^{p} \binom{p}{i} g^i (u + v + s)^{p-i}
        + \sum_{j, k \geq 1}^{j + k \leq p} \frac{p!}{j!\,k!\,(p-j-k)!}\,
          u^j v^k s^{p-j-k},

    every term a product of the small quantities that vary with the data, so
    nothing cancels: computed near the data's middle :math:`m`, the centred
    values keep the digits that the direct formula loses to an offset (data
    near :math:`10^6` lose about twelve of them at degree 2). Internal
    (:func:`centring_equivalent`); its ``repr`` is the polynomial kernel's.
    """

    def __init__(self, degree: int, c: float, origin: NDArray[np.float64]) -> None:
        self.degree, self.c, self.origin = degree, c, origin
        p = degree
        s = float(origin @ origin) + c
        coef = np.zeros((p, p))
        for j in range(1, p + 1):
            for k in range(1, p + 1 - j):
                coef[j - 1, k - 1] = (math.factorial(p) / (math.factorial(j) * math.factorial(k)
                                      * math.factorial(p - j - k))) * s ** (p - j - k)
        self._s, self._coef = s, coef

    def __repr__(self) -> str:
        return repr(Polynomial(self.degree, self.c))

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and (self.degree, self.c) == (other.degree, other.c)
                and np.array_equal(self.origin, other.origin))    # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.degree, self.c, self.origin.tobytes()))

    def _terms(self, g, u, v):
        p, s = self.degree, self._s
        T = u + v + s
        with np.errstate(over="ignore", invalid="ignore"):
            K = np.zeros(np.broadcast(g, T).shape)
            for i in range(1, p + 1):
                K += math.comb(p, i) * g ** i * T ** (p - i)
            if p >= 2:
                Pu = np.stack([u ** j for j in range(1, p + 1)], axis=-1)
                Pv = np.stack([v ** k for k in range(1, p + 1)], axis=-1)
                K += np.einsum("...j,jk,...k->...", Pu, self._coef, Pv)
        return K

    def _gram(self, X, Y):
        Xc = X - self.origin
        Yc = Xc if Y is None else Y - self.origin
        u, v = Xc @ self.origin, Yc @ self.origin
        K = self._terms(Xc @ Yc.T, u[:, None], v[None, :])
        return _check_finite_gram(K, self)

    def diag(self, X: ArrayLike) -> NDArray[np.float64]:
        Xc = check_array(X, "X") - self.origin
        u = Xc @ self.origin
        return _check_finite_gram(self._terms(np.einsum("ij,ij->i", Xc, Xc), u, u), self)


def centring_equivalent(kernel: "Kernel", X: NDArray[np.float64], *,
                        polynomial: bool = True) -> "Kernel":
    r"""A kernel with the same centred Gram matrix as ``kernel`` on ``X``, computed accurately.

    On data whose middle :math:`m` lies far from the origin (beyond the data's
    spread; a coordinate-wise median of about 64 rows, as the radial kernels'
    shift): for ``Linear()`` the linear kernel of the data moved to :math:`m`;
    for ``Polynomial(p, c)`` (with ``polynomial=True``) the kernel of the
    features moved by :math:`\phi(m)` (:class:`_OriginShiftedPolynomial`). Any
    other kernel, or data near the origin, is returned as it is. Only for
    values that are centred before use: the uncentred values differ (a caller
    that reads uncentred values, as a kernel-smoother pre-image does, adds
    them back from :math:`k(x, m)` and :math:`k(m, m)`, as ``KernelPPCA`` does,
    or passes ``polynomial=False``).
    """
    if type(kernel) is not Linear and not (polynomial and type(kernel) is Polynomial):
        return kernel
    Xs, _, _ = _shift_to_middle(X, None)
    if Xs is X:
        return kernel
    if type(kernel) is Polynomial:
        return _OriginShiftedPolynomial(kernel.degree, kernel.c, X[0] - Xs[0])
    return _OriginShiftedLinear(X[0] - Xs[0])


class _RadialKernel(Kernel):
    r"""A kernel of the distance :math:`\|x - y\|` with a length scale ``sigma``, equal to 1 at 0.

    Inputs so large (or ``sigma`` so small) that :math:`\|x\|^2 / \sigma^2` would
    overflow are handled by scaling first: with :math:`s` a little above
    :math:`10^{-150}\max|x_{ij}|` (as small as overflow allows, so that small
    distances do not underflow), the distances of :math:`x / s` are computed and the exponent
    :math:`\|x - y\|^p / (c\,\sigma^p)` is assembled in logarithms,
    :math:`\exp(\log(\|x/s - y/s\|^p / c) + p \log(s / \sigma))`, which is
    finite or overflows to :math:`+\infty` (a kernel value of exactly 0), never NaN.
    Ordinary inputs take the direct path.
    """

    #: the exponent is ||x - y||^_POWER / (_DIVISOR sigma^_POWER)
    _POWER: float = 2.0
    _DIVISOR: float = 2.0

    def __init__(self, sigma: float = 1.0) -> None:
        self.sigma = check_positive(sigma, "sigma")

    def _needs_rescaling(self, X: NDArray[np.float64], s: float, unit: float) -> bool:
        """Whether squared norms of ``X / unit`` could overflow, given ``s = max|x_ij|``."""
        ratio = s / unit
        return not (np.isfinite(ratio) and ratio * ratio * 4 * X.shape[1] < _OVERFLOW_GUARD)

    def _gram_rescaled(self, X: NDArray[np.float64], Y: NDArray[np.float64] | None,
                       s: float) -> NDArray[np.float64]:
        """The Gram matrix through the distances of ``X / s'`` and the exponent in logarithms.

        ``s = max|x_ij|``; the divisor ``s'`` is the smallest that keeps the squared
        norms a factor 4 below the overflow guard, not ``s`` itself: dividing by
        ``s`` would make the distance of two ordinary points next to one at
        :math:`10^{200}` underflow to 0 (a kernel value of 1).
        """
        s = s * 2.0 * np.sqrt(4.0 * X.shape[1] / _OVERFLOW_GUARD)
        log_scale = self._POWER * (np.log(s) - np.log(self.sigma))
        half_power = 0.5 * self._POWER
        log_div = np.log(self._DIVISOR)

        def to_kernel(tile):
            with np.errstate(divide="ignore", over="ignore"):
                np.log(tile, out=tile)                        # log 0 = -inf: kernel value 1
                tile *= half_power
                tile += log_scale - log_div
                np.exp(tile, out=tile)                        # the exponent, maybe +inf
            np.negative(tile, out=tile)
            np.exp(tile, out=tile)

        return _squared_distances(X / s, None if Y is None else Y / s, refine=True,
                                  post=to_kernel)

    def diag(self, X: ArrayLike) -> NDArray[np.float64]:
        return np.ones(check_array(X, "X").shape[0])


class RBF(_RadialKernel):
    r"""The Gaussian kernel :math:`k(x, y) = \exp(-\|x - y\|^2 / (2\sigma^2))`.

    Parameters
    ----------
    sigma : float
        Bandwidth :math:`\sigma > 0`. scikit-learn's ``gamma`` is
        :math:`1 / (2\sigma^2)`.
    """

    def _gram(self, X, Y):
        X0 = X
        X, Y, s = _shift_to_middle(X, Y)   # the expansion below is exact only near the origin
        if self._needs_rescaling(X, s, self.sigma):
            return self._gram_rescaled(X, Y, s)
        # With z = x / sigma the exponent is z_i^T z_j - |z_i|^2/2 - |z_j|^2/2
        # = -|x_i - x_j|^2 / (2 sigma^2): per tile one product, one subtraction,
        # a clip at 0 and an exp. The expansion's absolute error in the exponent,
        # about 4 eps (|z_i|^2 + |z_j|^2) / 2, is the kernel value's relative
        # error: harmless for data within some 40 sigma of the shift (1e-12 or
        # less), but 2e-4 for data spread 1e6 sigma (k(x, x) = 0.9998). Where
        # that bound exceeds _RBF_EXPONENT_TOL and the kernel value is not
        # negligible, the exponent is recomputed from the differences.
        if X is X0:                     # not shifted: the caller's arrays
            Z = X / self.sigma
            W = None if Y is None else Y / self.sigma
        else:                           # shifted copies: scale them in place (no third copy)
            Z, W = X, Y
            Z *= 1.0 / self.sigma
            if W is not None:
                W *= 1.0 / self.sigma
        hz = 0.5 * _row_norms(Z)
        hw = hz if W is None else 0.5 * _row_norms(W)

        Wv = Z if W is None else W
        err = 4.0 * np.finfo(float).eps        # exponent error per unit of hz + hw
        refine = err * (float(hz.max()) + float(hw.max())) > _RBF_EXPONENT_TOL

        def finish(tile, I, J, diagonal):
            tile -= hz[I, None] + hw[None, J]
            if refine:
                _refine_exponent(tile, Z[I], Wv[J], hz[I], hw[J], err)
            np.minimum(tile, 0.0, out=tile)
            if diagonal:
                np.fill_diagonal(tile, 0.0)
            np.exp(tile, out=tile)

        return _tiled_product(Z, W, finish)


class Laplacian(_RadialKernel):
    r"""The Laplacian (exponential) kernel :math:`k(x, y) = \exp(-\|x - y\|_2 / \sigma)`.

    It uses the Euclidean norm, so the distance is still one GEMM.
    (scikit-learn's ``laplacian_kernel`` uses the :math:`\ell_1` norm instead.)

    Parameters
    ----------
    sigma : float
        Length scale :math:`\sigma > 0`.
    """

    _POWER = 1.0
    _DIVISOR = 1.0

    def _gram(self, X, Y):
        X, Y, s = _shift_to_middle(X, Y)
        if self._needs_rescaling(X, s, 1.0):
            return self._gram_rescaled(X, Y, s)
        scale = -1.0 / self.sigma

        def to_laplacian(tile):
            np.sqrt(tile, out=tile)  # distances refined where they cancel
            tile *= scale
            np.exp(tile, out=tile)

        return _squared_distances(X, Y, refine=True, post=to_laplacian)


class Polynomial(Kernel):
    r"""The polynomial kernel :math:`k(x, y) = (x^\top y + c)^{p}`.

    Parameters
    ----------
    degree : int
        The degree :math:`p \geq 1`.
    c : float
        The offset :math:`c \geq 0` (``c = 0`` gives the homogeneous kernel).
    """

    def __init__(self, degree: int = 2, c: float = 1.0) -> None:
        if isinstance(degree, bool) or not isinstance(degree, Integral) or degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
        if isinstance(c, bool) or not isinstance(c, Real):
            raise TypeError(f"c must be a real number, got {c!r}")
        self.degree: int = int(degree)
        self.c: float = check_positive(c, "c", strict=False)

    def _gram(self, X, Y):
        K = X @ (X if Y is None else Y).T
        K += self.c
        with np.errstate(over="ignore", invalid="ignore"):
            np.power(K, self.degree, out=K)
        return _check_finite_gram(K, self)

    def diag(self, X: ArrayLike) -> NDArray[np.float64]:
        Xa = check_array(X, "X")
        with np.errstate(over="ignore", invalid="ignore"):
            d = (np.einsum("ij,ij->i", Xa, Xa) + self.c) ** self.degree
            return _check_finite_gram(d, self)     # the error of self(X), not inf


def upper_gram(kernel: "Kernel", X: ArrayLike, *, n_jobs: int | None = None) -> NDArray[np.float64]:
    """``kernel(X)`` of which only the upper triangle (diagonal included) is guaranteed.

    The tiled kernels (:class:`RBF`, :class:`Laplacian`) then skip the
    transposed copies of their off-diagonal tiles, which cost as much as the
    exponentials (measured 0.54 of 1.2 ms per 512 x 512 tile on one core), and
    never touch the memory of the strictly lower triangle; other kernels return
    their whole matrix. For solvers that read one triangle
    (:func:`mvkm.linalg.kernel_top_eigh`).
    """
    token = _UPPER_ONLY.set(True)
    try:
        return kernel(X, n_jobs=n_jobs)
    finally:
        _UPPER_ONLY.reset(token)


def centering_matrix(n: int) -> NDArray[np.float64]:
    r"""The centering matrix :math:`M_c = I_n - \frac1n 1_n 1_n^\top`.

    For teaching and checking only: :func:`center_gram` never forms it.
    """
    n = check_count(n, "n")
    return np.eye(n) - np.full((n, n), 1.0 / n)


def center_gram(K: ArrayLike, *, copy: bool = True, n_jobs: int | None = None) -> NDArray[np.float64]:
    r"""Centre a training Gram matrix in feature space, in :math:`O(n^2)`.

    Returns :math:`K_c = M_c K M_c` with :math:`M_c = I - \frac1n 1 1^\top`,
    computed as :math:`K_{ij} - \bar k_{i\cdot} - \bar k_{\cdot j} + \bar k_{\cdot\cdot}`
    (row means, column means and the grand mean), which is the Gram matrix of
    the centred features :math:`\phi(x_i) - \frac1n \sum_l \phi(x_l)`.
    When the row and column means agree to round-off (a symmetric ``K``) their
    average is used for both, so a symmetric ``K`` gives an exactly symmetric
    :math:`K_c`.

    Parameters
    ----------
    K : array_like of shape (n, n)
        An uncentred Gram matrix.
    copy : bool, default=True
        If False and ``K`` is a C-contiguous float64 array, centre it in place
        and return it (no ``n x n`` allocation: the fast path for large ``n``).
    n_jobs : int, optional
        Threads for the passes over a large ``K`` (``-1``: every usable core);
        ``None``: the user's BLAS/OpenMP limit, at most 8 (docs/package.md, "Threads").

    Returns
    -------
    K_c : ndarray of shape (n, n)
        A new array, or ``K`` itself when ``copy=False`` allowed it.

    See Also
    --------
    center_test_gram : centre test-versus-train rows with the training means.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.kernels import RBF, center_gram
    >>> X = np.random.default_rng(0).normal(size=(5, 2))
    >>> Kc = center_gram(RBF(1.0)(X))
    >>> bool(np.allclose(Kc.sum(axis=0), 0))
    True
    """
    check_bool(copy, "copy")
    if n_jobs is not None:
        with limit_threads(n_jobs):
            return center_gram(K, copy=copy)
    Kc = check_square(K, "K")
    if copy or Kc is not K:  # never modify the caller's array unless asked to
        Kc = Kc.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        row, col = row_col_means(Kc)
        scale = float(np.abs(row).max()) + float(np.abs(col).max())
        if np.abs(row - col).max() <= 1e-12 * max(scale, np.finfo(float).tiny):
            row = col = 0.5 * (row + col)
        grand = float(row.mean())

    def subtract(blk: slice) -> bool:
        # one subtraction of (row_i + col_j - grand): symmetric when row == col;
        # the block's sum, taken while it is in cache, tells whether it stayed finite
        Kc[blk] -= (row[blk, None] + col[None, :]) - grand
        return bool(np.isfinite(Kc[blk].sum())) or bool(np.all(np.isfinite(Kc[blk])))

    with np.errstate(over="ignore", invalid="ignore"):
        finite = all(_run_parallel(subtract, _row_blocks(*Kc.shape), Kc.shape[0]))
    if not (finite and np.isfinite(grand)):
        raise ValueError(
            f"center_gram(K): the centred matrix is not finite (max|K| = {np.abs(K).max():.3g} "
            "overflows float64 in the row, column or grand means); rescale K"
        )
    return Kc


def center_test_gram(K_test: ArrayLike, K_train: ArrayLike) -> NDArray[np.float64]:
    r"""Centre test-versus-train kernel rows with the *training* feature mean.

    With :math:`\bar\phi = \frac1n \sum_{j} \phi(x_j)` the training mean, the
    centred kernel between a test point :math:`z` and a training point
    :math:`x_j` is

    .. math::
        \langle \phi(z) - \bar\phi, \phi(x_j) - \bar\phi \rangle
        = k(z, x_j) - \frac1n \sum_l k(z, x_l) - \frac1n \sum_l k(x_l, x_j)
          + \frac1{n^2} \sum_{l,m} k(x_l, x_m).

    The last two terms use the training Gram matrix only: centering the test
    rows with their own means instead is a common bug that shifts every
    out-of-sample projection.

    Parameters
    ----------
    K_test : array_like of shape (m, n)
        Uncentred kernel values :math:`k(z_i, x_j)` between test and training points.
    K_train : array_like of shape (n, n)
        The uncentred training Gram matrix.

    Returns
    -------
    K_test_c : ndarray of shape (m, n)
    """
    K_test = check_array(K_test, "K_test")
    K_train = check_square(K_train, "K_train")
    if K_test.shape[1] != K_train.shape[0]:
        raise ValueError(
            "K_test must have one column per training point: got K_test of shape "
            f"{K_test.shape} and K_train of shape {K_train.shape}"
        )
    return _center_test_rows(K_test, K_train.mean(axis=0))


def _center_test_rows(K_test: NDArray[np.float64],
                      train_means: NDArray[np.float64]) -> NDArray[np.float64]:
    """:func:`center_test_gram` from the column means of the training Gram matrix alone."""
    Kc = K_test - K_test.mean(axis=1)[:, None]
    Kc -= train_means[None, :]
    Kc += train_means.mean()
    return Kc


def _origin_kernel_values(kernel: "Kernel", shifted: "Kernel", X: NDArray[np.float64]
                  ) -> tuple[NDArray[np.float64], float] | None:
    r"""What :func:`_unshift_kernel_values` needs of a kernel moved by :math:`\phi(m)`.

    ``shifted`` is ``centring_equivalent(kernel, X)``. Returns
    :math:`(k(x_i, m))_i` and :math:`k(m, m)` when ``shifted`` is the polynomial
    kernel of the features moved by :math:`\phi(m)`, else ``None``.
    """
    if not isinstance(shifted, _OriginShiftedPolynomial):
        return None
    m = shifted.origin[None, :]
    return (np.asarray(kernel(X, m), dtype=np.float64)[:, 0],
            float(np.asarray(kernel(m, m))[0, 0]))


def _unshift_kernel_values(k_shifted: NDArray[np.float64], alpha: NDArray[np.float64],
                          values: tuple[NDArray[np.float64], float] | None
                          ) -> NDArray[np.float64]:
    r"""Uncentred values of the given kernel from those of the kernel moved by :math:`\phi(m)`.

    With :math:`k'(x, y) = k(x, y) - k(x, m) - k(y, m) + k(m, m)` (the features
    moved by :math:`\phi(m)`) and :math:`\hat\phi = \bar\phi + \Phi_c^\top \alpha`,

    .. math::
        k(x_i, \hat x) = k'(x_i, \hat x) + k(x_i, m) + \bar k_m - k(m, m)
        + \alpha^\top (k_m - \bar k_m 1),

    :math:`k_m = (k(x_j, m))_j` and :math:`\bar k_m` its mean (expand
    :math:`\phi_i^\top \hat\phi` with :math:`\phi = \phi' + \phi(m)`). ``values``:
    :func:`_origin_kernel_values` (``None``: nothing to add).
    """
    if values is None:
        return k_shifted
    km, kmm = values
    return k_shifted + km[None, :] + (km.mean() - kmm + alpha @ (km - km.mean()))[:, None]


def uncenter_kernel_values(Kc_alpha: ArrayLike, alpha: ArrayLike,
                           train_means: ArrayLike) -> NDArray[np.float64]:
    r"""Uncentred kernel values of points given by dual coefficients.

    A point :math:`\hat\phi = \bar\phi + \Phi_c^\top \alpha` of the span of the
    centred training features (a reconstruction, a prediction or a sample of a
    dual model) has centred kernel values :math:`K_c \alpha` with the training
    points; its uncentred ones are

    .. math::
        k(x_i, \hat x) = \phi_i^\top \hat\phi
        = (K_c \alpha)_i + m_i + \alpha^\top (m - \bar m 1),

    with :math:`m_i = \frac1n \sum_j k(x_i, x_j) = \phi_i^\top \bar\phi` and
    :math:`\bar m = \frac1n \sum_i m_i = \bar\phi^\top\bar\phi` (expand
    :math:`\phi_i^\top \hat\phi` with :math:`\phi_i = \bar\phi + (\phi_i - \bar\phi)`).
    These are what a kernel-smoother pre-image needs.

    Parameters
    ----------
    Kc_alpha : array_like of shape (m, n)
        Rows :math:`(K_c \alpha)^\top`, one per point.
    alpha : array_like of shape (m, n)
        The dual coefficients of each point.
    train_means : array_like of shape (n,)
        :math:`m`, the row (= column) means of the uncentred training Gram matrix.

    Returns
    -------
    ndarray of shape (m, n)
    """
    Kc_alpha = check_array(Kc_alpha, "Kc_alpha")
    alpha = check_array(alpha, "alpha")
    m = check_array(train_means, "train_means", ndim=1)
    if not (Kc_alpha.shape == alpha.shape and alpha.shape[1] == m.shape[0]):
        raise ValueError(f"Kc_alpha {Kc_alpha.shape} and alpha {alpha.shape} must have the same "
                         f"shape (m, n) with n = len(train_means) = {m.shape[0]}")
    return Kc_alpha + m[None, :] + (alpha @ (m - m.mean()))[:, None]
