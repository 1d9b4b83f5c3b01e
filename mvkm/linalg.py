r"""Linear-algebra core: top eigenpairs, sign conventions, PSD roots, rotations.

Every model of the book ends in a symmetric eigenproblem or a Stiefel
optimisation over a Gram matrix. This module holds the shared pieces:

* :func:`top_eigh`: the ``s`` largest eigenpairs of a symmetric (PSD) matrix,
  with three solvers (dense LAPACK, ARPACK's Lanczos, a Chebyshev-filtered block
  subspace iteration) and an ``"auto"`` rule that picks one;
* :func:`flip_signs`: the sign convention of every eigenvector the package returns;
* :func:`psd_sqrt`: symmetric (pseudo-inverse) square roots;
* :func:`rotate_to_diagonal`: the rotation that diagonalises a Stiefel solution's
  :math:`\Gamma`.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any, Callable

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import blas as _blas

from ._validation import (
    SYMMETRY_RTOL,
    check_array,
    check_n_components,
    check_random_state,
    check_sparse_symmetric,
    check_square,
    check_symmetric,
    max_abs,
    symmetric_scale,
)
from ._progress import progress_bar
from ._validation import check_bool, check_positive, data_then_kernel, describe

__all__ = ["ConvergenceWarning", "flip_signs", "kernel_top_eigh", "psd_sqrt", "rotate_to_diagonal",
           "top_eigh"]


def flip_signs(V: ArrayLike) -> NDArray[np.float64]:
    r"""Deterministic sign convention for eigenvectors (columns of ``V``).

    Each column is multiplied by :math:`\pm 1` so that its entry of largest
    absolute value is positive (the first such entry on ties), as scikit-learn's
    ``svd_flip`` does. Eigenvectors are only defined up to sign; fixing it makes
    results comparable across solvers and runs.

    Parameters
    ----------
    V : array_like of shape (n, s)

    Returns
    -------
    V_flipped : ndarray of shape (n, s)
    """
    V = check_array(V, "V")
    return V * sign_convention(V)


def sign_convention(V: NDArray[np.float64]) -> NDArray[np.float64]:
    """The signs (+1 or -1, one per column) that :func:`flip_signs` applies to ``V``.

    Use it to flip a pair of factors consistently, e.g. both ``U`` and ``Vt``
    of an SVD.
    """
    if V.shape[1] == 0:
        return np.ones(0)
    idx = np.argmax(np.abs(V), axis=0)
    signs = np.sign(V[idx, np.arange(V.shape[1])])
    signs[signs == 0] = 1.0
    return signs


def psd_sqrt(A: ArrayLike, *, inverse: bool = False, rcond: float | None = None) -> NDArray[np.float64]:
    r"""Symmetric square root :math:`A^{1/2}` (or pseudo-inverse root :math:`A^{+1/2}`) of a PSD matrix.

    Eigenvalues below ``rcond * max(eigenvalue)`` are treated as zero (round-off
    negatives included).

    Parameters
    ----------
    A : array_like of shape (n, n)
        Symmetric positive semi-definite.
    inverse : bool, default=False
        Return the Moore-Penrose pseudo-inverse of the square root instead.
    rcond : float, optional
        Relative cut-off; defaults to ``n * eps``.

    Returns
    -------
    R : ndarray of shape (n, n)
        Symmetric with ``R @ R == A`` (or ``R @ R == pinv(A)``) up to round-off.
    """
    check_bool(inverse, "inverse")
    if rcond is not None:
        check_positive(rcond, "rcond", strict=False)
    A = check_symmetric(A, "A")
    evals, evecs = np.linalg.eigh(0.5 * (A + A.T))
    if rcond is None:
        rcond = A.shape[0] * np.finfo(float).eps
    top = max(float(evals.max()), 0.0)
    if evals.min() < -1e3 * rcond * max(top, 1.0):
        raise ValueError(
            f"A must be positive semi-definite; its smallest eigenvalue is {evals.min():.3g}"
        )
    keep = evals > rcond * top
    roots = np.zeros_like(evals)
    roots[keep] = np.sqrt(evals[keep])
    if inverse:
        roots[keep] = 1.0 / roots[keep]
    return (evecs * roots) @ evecs.T


def rotate_to_diagonal(A: ArrayLike, Gamma: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Rotate a Stiefel solution so that its (non-diagonal) Gamma becomes diagonal.

    A maximiser :math:`A \in \mathrm{St}(n, s)` of :math:`\mathrm{Tr}(A^\top B A)`
    is only determined up to a rotation :math:`A \mapsto A Q`; its
    :math:`\Gamma' = A^\top B A` is then symmetric but in general not diagonal.
    With the eigendecomposition :math:`\Gamma' = Q \Lambda Q^\top` (eigenvalues
    descending), :math:`A Q` spans the same subspace, has the same trace and
    satisfies :math:`(AQ)^\top B (AQ) = \Lambda`: its columns are eigenvectors of
    :math:`B` when :math:`A` spans an invariant subspace.

    Parameters
    ----------
    A : array_like of shape (n, s)
        Orthonormal columns.
    Gamma : array_like of shape (s, s)
        The symmetric matrix :math:`A^\top B A`.

    Returns
    -------
    A_rot : ndarray of shape (n, s)
        :math:`A Q`, signs fixed with :func:`flip_signs`.
    eigenvalues : ndarray of shape (s,)
        The diagonal of :math:`\Lambda`, descending.
    """
    A = check_array(A, "A")
    Gamma = check_symmetric(Gamma, "Gamma", rtol=1e-6)
    if Gamma.shape[0] != A.shape[1]:
        raise ValueError(
            f"Gamma must be s x s with s = A.shape[1] = {A.shape[1]}, got shape {Gamma.shape}"
        )
    evals, Q = np.linalg.eigh(0.5 * (Gamma + Gamma.T))
    order = np.argsort(evals)[::-1]
    return flip_signs(A @ Q[:, order]), evals[order]


# ---------------------------------------------------------------------------
# top_eigh: the s largest eigenpairs of a symmetric (PSD) matrix
# ---------------------------------------------------------------------------

_METHODS = ("auto", "dense", "lanczos", "arpack", "subspace")

#: Default residual tolerance of the iterative methods, relative to lambda_1.
_DEFAULT_TOL = 1e-10
#: Default cap on outer (Rayleigh-Ritz) iterations of ``method="subspace"``.
_DEFAULT_SUBSPACE_MAX_ITER = 500
#: ``"auto"`` uses LAPACK when n <= this or when n_components > _AUTO_DENSE_FRACTION * n.
_AUTO_DENSE_MAX_N = 1000
_AUTO_DENSE_FRACTION = 0.08
#: ``"lanczos"``: largest Krylov basis before a thick restart.
_LANCZOS_MAX_BASIS = 300
#: ``"lanczos"``: default cap on thick restarts (each adds at most ~150 products), so
#: a call makes at most about 3300 products instead of running for hours.
_LANCZOS_MAX_RESTARTS = 20
#: Residual floor of the Lanczos stopping test, in units of n eps max|K| (the
#: round-off of one product).
_FLOOR_FACTOR = 4.0
#: Products of the closing multiplicity check (:func:`_closing_check`): at least
#: ``_CHECK_STEPS``, then until the complement's top Ritz pair converges, at most
#: ``_CHECK_MAX_STEPS``.
_CHECK_STEPS = 3
_CHECK_MAX_STEPS = 60
_EPS23 = np.finfo(float).eps ** (2.0 / 3.0)
#: ``"arpack"``: default cap on implicit restarts (scipy's default is 10 n).
_ARPACK_MAX_RESTARTS = 1000
#: ``"dense"`` computes all eigenpairs (``syevd``) when n_components > this * n.
_DENSE_SUBSET_FRACTION = 0.3
#: Subspace iteration: block size s + max(_MIN_OVERSAMPLING, s).
_MIN_OVERSAMPLING = 10
#: Chebyshev filter: highest degree, and largest growth ratio allowed between the
#: best and the worst wanted Ritz vector within one filter application.
_MAX_FILTER_DEGREE = 8
_MAX_FILTER_GROWTH = 1e8


#: ``"subspace"``: a Ritz value below ``-_PSD_RTOL`` times the largest magnitude proves K not PSD.
_PSD_RTOL = 1e-8


class ConvergenceWarning(RuntimeWarning):
    """An iterative eigensolver stopped at ``max_iter`` before meeting ``tol``."""


def _validate_matrix(K: Any, check_sym: bool) -> tuple[Any, float | None]:
    """Validate ``K``; return it (ndarray, sparse or LinearOperator) and a scale.

    The scale (``max|K_ij|``, or ``max|K_ii|`` when that suffices, which is the
    same number for a PSD matrix) is only used to normalise ARPACK's stopping test.
    """
    if isinstance(K, scipy.sparse.linalg.LinearOperator):
        if len(K.shape) != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be a square operator, got shape {K.shape}")
        return K, None
    if scipy.sparse.issparse(K):
        return check_sparse_symmetric(K, "K", rtol=SYMMETRY_RTOL if check_sym else np.inf), None
    if not check_sym:
        return check_square(K, "K"), None
    K = check_square(K, "K", allow_nan=True)
    return K, symmetric_scale(K, "K")


def _dense_top(K: NDArray[np.float64], s: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """LAPACK: ``syevr`` on the top-``s`` subset, or full ``syevd`` when ``s`` is a large
    fraction of ``n`` (where it is faster: subset ``syevr`` costs 2.8x ``syevd`` at
    ``s = n/2``, n = 2000). Eigenvalues descending."""
    n = K.shape[0]
    if s <= _DENSE_SUBSET_FRACTION * n:
        w, V = scipy.linalg.eigh(K, subset_by_index=[n - s, n - 1], driver="evr", check_finite=False)
        if V.shape[1] == s and w.size == s and np.all(np.isfinite(w)):
            return w[::-1], V[:, ::-1]
        # syevr's subset search can return no vectors on a degenerate spectrum
        # (e.g. an RBF Gram matrix of raw MNIST pixels, n = 200): all of them by syevd
    w, V = scipy.linalg.eigh(K, driver="evd", check_finite=False)
    return w[::-1][:s], V[:, ::-1][:, :s]


def _centering_means(K: Any, is_array: bool) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Row means, column means and grand mean of ``K`` (for ``center=True``).

    For an array these are the row means of the symmetric matrix that the
    solvers see, the one whose lower triangle is ``K``'s (``dsymv``, LAPACK's
    ``syevr`` and ARPACK's products read that triangle): one ``dsymv`` with a
    vector of ones, which reads half of ``K`` (1/5 of the time of a full pass
    with row and column sums, measured at n = 5000); row and column means are
    then equal.
    """
    if is_array:
        return _triangle_means(K)
    if scipy.sparse.issparse(K):
        row = np.asarray(K.mean(axis=1)).ravel()
        col = np.asarray(K.mean(axis=0)).ravel()
    else:
        raise ValueError(
            "center=True needs K as an array or a sparse matrix, not a LinearOperator: "
            "centre the operator yourself"
        )
    return row, col, float(row.mean())


#: Below this ``max|K|`` the Krylov solvers work on ``K`` times a power of two
#: (``1 / max|K|`` would overflow, or the products would be subnormal).
_TINY_SCALE = 2.0 ** -500


def _unit_scaled(K: NDArray[np.float64], scale: float | None
                 ) -> tuple[NDArray[np.float64], float | None, int]:
    """``K``, its scale and 0; or, when ``0 < max|K| < _TINY_SCALE``, ``K * 2**e``
    (exact), the scale times ``2**e`` and ``e``, with ``e`` making the scale about 1.

    ARPACK and Lanczos scale ``K`` by ``1 / max|K|`` in each product, which
    overflows for a subnormal ``K`` (found by the property test: ``A A^T`` with
    entries of 5e-319). The eigenvalues are scaled back by ``2**-e``.
    """
    big = scale if scale is not None else max_abs(K)
    if not 0.0 < big < _TINY_SCALE:
        return K, big, 0
    e = -int(np.floor(np.log2(big)))
    with np.errstate(over="ignore", invalid="ignore"):   # a Gram triangle's unwritten half
        return np.ldexp(K, e), float(np.ldexp(big, e)), e


def _checked_tol(tol: Any) -> float:
    """The iterative solvers' tolerance: ``_DEFAULT_TOL`` for ``None``, else a finite
    number >= 0 (a clear ``ValueError`` otherwise)."""
    if tol is None:
        return _DEFAULT_TOL
    if isinstance(tol, bool) or not isinstance(tol, Real) or not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    return float(tol)


def _triangle_means(K: NDArray[np.float64], upper: bool = False
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Row (= column) means and grand mean of the symmetric matrix with ``K``'s lower
    (``upper=True``: upper) triangle: one ``dsymv`` with a vector of ones."""
    n = K.shape[0]
    A, lower = _symv_operand(K, upper)
    row = _blas.dsymv(1.0 / n, A, np.ones(n), lower=lower)
    return row, row, float(row.mean())


def _symv_operand(K: NDArray[np.float64], upper: bool = False) -> tuple[NDArray[np.float64], int]:
    """``K`` as BLAS ``dsymv`` reads it without a copy, and the ``lower`` flag that
    makes it read ``K``'s lower triangle (``upper=True``: its upper triangle); a
    C-ordered ``K`` is passed as ``K.T``."""
    if K.flags.c_contiguous:
        return K.T, int(upper)
    if K.flags.f_contiguous:
        return K, int(not upper)
    return np.ascontiguousarray(K).T, int(upper)


def _subtract_centering(KZ: NDArray[np.float64], Z: NDArray[np.float64],
                        means: tuple[NDArray[np.float64], NDArray[np.float64], float],
                        alpha: float) -> None:
    """In place: ``KZ -= alpha * (r 1^T Z + 1 c^T Z - g 1 1^T Z)``, i.e. ``KZ`` becomes ``alpha K_c Z``."""
    row, col, grand = means
    sums = Z.sum(axis=0)
    if KZ.ndim == 1:
        KZ -= alpha * (row * sums + (col @ Z - grand * sums))
    else:
        KZ -= alpha * (row[:, None] * sums[None, :] + (col @ Z - grand * sums)[None, :])


#: ARPACK's restart counter is a 32-bit integer (scipy's eigsh fails with "ARPACK error -4" above).
_ARPACK_INT_MAX = 2**31 - 1


def _arpack_top(K: Any, s: int, tol: float, max_iter: int | None, rng: np.random.Generator,
                scale: float | None, means: Any = None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """ARPACK (implicitly restarted Lanczos) for the ``s`` algebraically largest eigenpairs.

    For an ndarray the product is BLAS ``dsymv``, which reads one triangle only:
    half the memory traffic of ``K @ x`` (the product is memory-bound). ``K`` is
    scaled by ``1/max|K|`` inside the product, so that ARPACK's absolute floor
    ``eps**(2/3)`` in its stopping test does not depend on the units of ``K``.
    """
    n = K.shape[0]
    if isinstance(K, np.ndarray):
        if scale is None:
            scale = max_abs(K)
        if scale == 0.0:  # K = 0: every unit vector is an eigenvector (ARPACK would fail)
            return np.zeros(s), np.eye(n, s)
        alpha = 1.0 / scale
        A, lower = _symv_operand(K)   # K's lower triangle, without a copy

        def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
            x = np.ravel(x)
            y = _blas.dsymv(alpha, A, x, lower=lower)
            if means is not None:
                _subtract_centering(y, x, means, alpha)
            return y

        op = scipy.sparse.linalg.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    elif means is not None:  # sparse K, centred implicitly
        alpha = 1.0

        def matvec_sparse(x: NDArray[np.float64]) -> NDArray[np.float64]:
            x = np.ravel(x)
            y = np.asarray(K @ x, dtype=np.float64).ravel()
            _subtract_centering(y, x, means, 1.0)
            return y

        op = scipy.sparse.linalg.LinearOperator((n, n), matvec=matvec_sparse, dtype=np.float64)
    else:
        alpha = 1.0
        op = K
    v0 = rng.uniform(-1.0, 1.0, n)
    # ARPACK counts its restarts in a 32-bit integer: a larger cap (never reached) is that maximum
    arpack_restarts = _ARPACK_MAX_RESTARTS if max_iter is None else min(max_iter, _ARPACK_INT_MAX)
    try:
        w, V = scipy.sparse.linalg.eigsh(op, k=s, which="LA", v0=v0, tol=tol,
                                         maxiter=arpack_restarts)
    except scipy.sparse.linalg.ArpackNoConvergence as exc:
        raise scipy.sparse.linalg.ArpackNoConvergence(
            f"top_eigh(method='arpack'): ARPACK did not converge within max_iter="
            f"{_ARPACK_MAX_RESTARTS if max_iter is None else max_iter} restarts ({len(exc.eigenvalues)} of {s} eigenpairs met tol={tol:g}); "
            "raise max_iter or tol, or use method='dense' or 'subspace'",
            exc.eigenvalues / alpha, exc.eigenvectors,
        ) from exc
    except scipy.sparse.linalg.ArpackError as exc:
        if not str(exc).startswith("ARPACK error -9:"):    # scipy keeps the code in the message only
            raise
        # -9, "starting vector is zero": every start vector ARPACK drew was mapped to zero (to
        # round-off), so K has no direction to find (an operator that is zero to round-off)
        raise ValueError(
            "K is zero to round-off: ARPACK found no start vector that K does not map to zero "
            "(ARPACK error -9, 'starting vector is zero'), so K has no top eigenvectors to find; "
            "check what K is built from (a constant kernel matrix, once centred, is zero)") from exc
    order = np.argsort(w)[::-1]
    w, V = w[order], np.asfortranarray(V[:, order])
    # the closing multiplicity check of "lanczos" (ARPACK misses repeated eigenvalues too)
    eps = np.finfo(float).eps
    big = 1.0 if isinstance(K, np.ndarray) else max(float(np.max(np.abs(w))), np.finfo(float).tiny)
    floor = _FLOOR_FACTOR * n * eps * big
    tol_eff = tol if tol > 0.0 else eps
    restarts = _LANCZOS_MAX_RESTARTS if max_iter is None else max_iter
    vec = scipy.sparse.linalg.aslinearoperator(op).matvec
    # ARPACK's test: ||K v - theta v|| <= tol |theta| (V^T K V = diag(w): Ritz vectors)
    res = np.maximum(tol_eff * np.abs(w), floor)
    # the basis is V alone (ARPACK keeps its Krylov basis), so the check runs as many
    # products as one ARPACK restart (2 s + 1), to see past lambda_{s+1}, lambda_{s+2}, ...
    if not _closing_check(vec, V, np.diag(w), w, res, floor, rng,
                          steps=max(_CHECK_STEPS, 2 * s + 1)):
        return w / alpha, V
    theta = w
    for _ in range(s):
        theta, V, res, missed = _deflated_round(vec, n, s, tol_eff, floor, restarts, rng, V,
                                                float(theta[-1]))
        if not missed:
            break
    return theta / alpha, V


def _lanczos_top(K: NDArray[np.float64], s: int, tol: float, max_iter: int | None,
                 rng: np.random.Generator, scale: float, means: Any = None,
                 upper: bool = False, progress: bool | None = None
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Lanczos with full reorthogonalisation, thick restarts and a closing multiplicity check.

    The basis :math:`Q_m` grows one BLAS ``dsymv`` product at a time (one
    triangle of ``K`` read per product, as in :func:`_arpack_top`); each new
    vector is orthogonalised against the whole basis twice (classical
    Gram-Schmidt, "twice is enough"), so no spurious copies of converged
    eigenvalues appear. The projection :math:`T_m = Q_m^\top K Q_m` is kept
    from those coefficients, and after step :math:`m`

    .. math::
        K Q_m = Q_m T_m + \beta_m q_{m+1} e_m^\top ,

    so a Ritz pair :math:`(\theta_i, Q_m y_i)` has residual norm exactly
    :math:`|\beta_m (y_i)_m|`: convergence is checked after every product (every
    few once the basis is large), where ARPACK checks only at its restarts,
    after a full basis of :math:`2s + 1` products. It stops when the ``s`` largest satisfy
    :math:`|\beta_m (y_i)_m| \le \max(\mathrm{tol}\,|\theta_i|,\ 4 n \epsilon)`
    on :math:`K / \max|K|`: the absolute floor is the round-off of one product
    (:math:`|fl(Kx) - Kx| \lesssim n \epsilon \max|K|`), so eigenvalues that are
    zero to round-off (``K`` of rank below ``s``) converge and are returned as
    such instead of being iterated on forever. When the basis reaches
    ``_LANCZOS_MAX_BASIS`` vectors it restarts thick (Wu and Simon, 2000): it
    keeps the leading half of the Ritz vectors and the next Lanczos vector,
    whose couplings to them come back as the first coefficients of the next
    product. ``max_iter`` caps the restarts (default ``_LANCZOS_MAX_RESTARTS``,
    so at most about :math:`300 + 20 \cdot 150` products).

    A single-vector Krylov space holds one vector of each eigenspace (in exact
    arithmetic), so Lanczos alone returns a repeated eigenvalue once. The closing
    check (:func:`_closing_check`) runs ``_CHECK_STEPS`` more products from a
    random vector orthogonal to the basis and proves a miss when the Ritz values
    of the enlarged basis exceed the returned ones by more than their residuals;
    then Lanczos restarts orthogonal to the ``s`` pairs found (deflation), and the
    top ``s`` of both are checked again, until no miss is found. ``upper=True``
    reads the upper triangle of ``K`` instead of the lower one. ``progress``: a
    bar of the products (:func:`mvkm._progress.progress_bar`; ``None`` shows it
    once the solve has run for 5 seconds).
    """
    n = K.shape[0]
    if scale == 0.0:  # K = 0: every unit vector is an eigenvector
        return np.zeros(s), np.eye(n, s)
    bar = progress_bar(None, "top_eigh (lanczos)", progress, unit="product")
    try:
        return _lanczos_solve(K, s, tol, max_iter, rng, scale, means, upper, bar)
    finally:
        if bar is not None:
            bar.close()


def _lanczos_solve(K: NDArray[np.float64], s: int, tol: float, max_iter: int | None,
                   rng: np.random.Generator, scale: float, means: Any, upper: bool,
                   bar: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The body of :func:`_lanczos_top` (``bar``: a progress bar or ``None``)."""
    n = K.shape[0]
    alpha = 1.0 / scale
    A, lower = _symv_operand(K, upper)   # one triangle of K, without a copy

    def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
        y = _blas.dsymv(alpha, A, x, lower=lower)
        if means is not None:
            _subtract_centering(y, x, means, alpha)
        if bar is not None:
            bar.update(1)
        return y

    eps = np.finfo(float).eps
    tol = tol if tol > 0.0 else eps
    floor = _FLOOR_FACTOR * n * eps          # round-off of one product of K / max|K|
    restarts = _LANCZOS_MAX_RESTARTS if max_iter is None else max_iter
    theta, X, res, (Qm, T, w, exact) = _lanczos_run(matvec, n, s, tol, floor, restarts, rng, None)
    if exact:
        return theta / alpha, X
    if not _closing_check(matvec, Qm, T, theta, res, floor, rng):   # Q_m^T K Q_m = T_m
        return theta / alpha, X
    # a repeated eigenvalue was missed: restart orthogonal to the pairs found (deflation)
    for _ in range(s):
        theta, X, res, missed = _deflated_round(matvec, n, s, tol, floor, restarts, rng, X,
                                                float(theta[-1]))
        if not missed:
            return theta / alpha, X
    warnings.warn(
        f"top_eigh(method='lanczos'): the closing check still finds eigenvalues above the "
        f"{s} returned after {s} deflated restarts; use method='dense'",
        ConvergenceWarning, stacklevel=3)
    return theta / alpha, X


def _lanczos_run(matvec: Callable[[NDArray[np.float64]], NDArray[np.float64]], n: int, s: int,
                 tol: float, floor: float, restarts: int, rng: np.random.Generator,
                 L: NDArray[np.float64] | None, threshold: float = -np.inf):
    """One Lanczos run (see :func:`_lanczos_top`) for the top ``s`` eigenpairs of ``P K P``,
    ``P`` the projector on the complement of the orthonormal columns of ``L`` (none: ``K``).

    Returns the Ritz values (descending), vectors and residual norms of the top
    ``s``, and ``(Q_m, T_m, w)`` with :math:`P K P Q_m = Q_m T_m + w e_m^\\top` for the
    closing check, and whether the basis filled the whole space (then it is exact).
    With a ``threshold`` (a deflated restart), only the Ritz pairs above it (at least
    one) need to converge: those below cannot enter the top ``s`` of the union.
    """
    l = 0 if L is None else L.shape[1]
    dim = n - l
    m_max = min(dim, max(_LANCZOS_MAX_BASIS, 3 * s + 20))
    keep = min(m_max - 2, max(s + 10, m_max // 2))
    Q = np.empty((n, l + m_max), order="F")
    T = np.zeros((m_max, m_max))
    q = rng.uniform(-1.0, 1.0, n)
    if l:
        Q[:, :l] = L
        for _ in range(2):
            q = _blas.dgemv(-1.0, L, _blas.dgemv(1.0, L, q, trans=1), beta=1.0, y=q, overwrite_y=1)
    Q[:, l] = q / np.linalg.norm(q)
    m = 1                                          # basis size (locked columns not counted)
    since_check = 0
    restarts_left = restarts
    while True:
        w = matvec(Q[:, l + m - 1])
        norm0 = float(np.linalg.norm(w))
        Qm = Q[:, :l + m]
        # classical Gram-Schmidt twice, with the BLAS that runs dsymv (scipy's): a call
        # into another BLAS library (numpy's) leaves its threads spinning for a while,
        # which halves the speed of the next dsymv (measured)
        h = _blas.dgemv(1.0, Qm, w, trans=1)
        w = _blas.dgemv(-1.0, Qm, h, beta=1.0, y=w, overwrite_y=1)
        h2 = _blas.dgemv(1.0, Qm, w, trans=1)
        w = _blas.dgemv(-1.0, Qm, h2, beta=1.0, y=w, overwrite_y=1)
        h += h2
        T[:m, m - 1] = h[l:]
        T[m - 1, :m] = h[l:]
        beta = float(np.linalg.norm(w))
        since_check += 1
        full = m == m_max
        if m >= s and (m <= 60 or since_check >= max(1, m // 10) or full or m == dim):
            since_check = 0
            theta, Y = scipy.linalg.eigh(T[:m, :m], check_finite=False)
            theta, Y = theta[::-1], Y[:, ::-1]
            residual = np.abs(beta * Y[m - 1, :s])
            ok = residual <= np.maximum(tol * np.abs(theta[:s]), floor)
            wanted = max(1, int(np.sum(theta[:s] > threshold)))
            if m == dim or np.all(ok[:wanted]):
                X = _times_columns(Q[:, l:l + m], Y[:, :s])
                return theta[:s], X, residual, (Q[:, l:l + m], T[:m, :m], w, m == dim)
        if beta <= 1e-12 * max(norm0, _EPS23):     # invariant subspace: start a new direction
            q = rng.uniform(-1.0, 1.0, n)
            for _ in range(2):
                q = _blas.dgemv(-1.0, Qm, _blas.dgemv(1.0, Qm, q, trans=1), beta=1.0, y=q, overwrite_y=1)
            beta = float(np.linalg.norm(q))
            w = q
        if not full:
            Q[:, l + m] = w / beta
            m += 1
            continue
        if restarts_left == 0:
            raise scipy.sparse.linalg.ArpackNoConvergence(
                f"top_eigh(method='lanczos'): not converged within max_iter={restarts} "
                f"restarts ({int(np.sum(ok))} of {s} eigenpairs met tol={tol:g}, "
                f"residual floor {floor:.2g} max|K|); raise max_iter or tol, or use "
                "method='dense' or 'arpack'",
                theta[:s], _times_columns(Qm[:, l:], Y[:, :s]))
        restarts_left -= 1
        Q[:, l:l + keep] = _times_columns(Qm[:, l:], Y[:, :keep])   # thick restart
        T[:] = 0.0
        T[np.arange(keep), np.arange(keep)] = theta[:keep]
        Q[:, l + keep] = w / beta
        m = keep + 1
        since_check = 0


#: The block Krylov probe of :func:`ritz_extremes`: a block of this many vectors, this many products.
_PROBE_BLOCK, _PROBE_STEPS = 8, 4


def ritz_extremes(times: Callable[[NDArray[np.float64]], NDArray[np.float64]], n: int,
                  rng: np.random.Generator) -> tuple[float, float]:
    r"""Smallest and largest Ritz values of a symmetric ``n x n`` operator on a small block
    Krylov space.

    ``_PROBE_STEPS`` products of the operator (``times(Q) = K Q``) with a block of
    ``_PROBE_BLOCK`` vectors span a Krylov space of up to 32 vectors from a random start;
    its smallest Ritz value is an upper bound of :math:`\lambda_{\min}(K)`, and extreme
    eigenvalues, a clearly negative one included, appear in it first. The cheap check
    that a kernel matrix is positive semi-definite (:func:`mvkm.kpls._psd_probe`, and
    :class:`mvkm.MultiViewRKM` with a user's kernel); probabilistic: a negative
    eigenvalue small against the spread of the spectrum may go unseen.
    """
    Q = np.linalg.qr(rng.standard_normal((n, min(_PROBE_BLOCK, n))))[0]
    basis, images = [], []
    for _ in range(_PROBE_STEPS):
        KQ = times(Q)
        basis.append(Q)
        images.append(KQ)
        B = np.hstack(basis)
        if B.shape[1] >= n:
            break
        Z = KQ
        for _ in range(2):
            Z = Z - B @ (B.T @ Z)
        Q, R = np.linalg.qr(Z)
        keep = np.abs(np.diagonal(R)) > 1e-10 * max(float(np.abs(KQ).max()), np.finfo(float).tiny)
        if not keep.any():
            break
        Q = Q[:, keep]
    B, KB = np.hstack(basis), np.hstack(images)
    mu = np.linalg.eigvalsh(0.5 * (B.T @ KB + KB.T @ B))
    return float(mu[0]), float(mu[-1])


def _closing_check(matvec: Callable[[NDArray[np.float64]], NDArray[np.float64]],
                   B: NDArray[np.float64], H_B: NDArray[np.float64], theta: NDArray[np.float64],
                   residual: NDArray[np.float64], floor: float, rng: np.random.Generator,
                   steps: int | None = None) -> bool:
    r"""Whether ``K`` has an eigenvalue that the pairs ``theta`` (from the basis ``B``) missed.

    ``B`` (orthonormal, ``n x w``) and ``H_B = B^T K B`` (Lanczos' :math:`T_m`, or the
    diagonal of Ritz values) come from a run whose top ``s`` Ritz values ``theta`` have
    residual norms ``residual``; ``K B`` is not needed (:math:`B^\top K Z` is read off
    :math:`(KZ)^\top B`).
    From a random vector orthogonal to ``B``, Lanczos products build :math:`Z` (a
    Krylov space of the complement); a Rayleigh-Ritz step on :math:`[B, Z]` gives Ritz
    values :math:`\theta^u_k \ge \theta_k` (interlacing). If no eigenvalue was missed,
    :math:`\lambda_k \le \theta_k + r_k` (an eigenvalue lies within :math:`r_k` of
    :math:`\theta_k`) and :math:`\theta^u_k \le \lambda_k`; so
    :math:`\theta^u_k > \theta_k + \max(r_k, \mathrm{floor})` proves a miss. An
    eigenvector missed by the single-vector run is orthogonal to ``B`` (up to
    round-off) and has a component of order :math:`n^{-1/2}` along the random start;
    the products amplify it, by how much depends on the gap between it and the rest
    of the complement's spectrum: 3 products suffice for a repeated 10 above [0, 1],
    but with 9, 8.97, ... just below it (a 6-fold 10 at n = 300) they do not. So the
    check runs at least ``steps`` (default ``_CHECK_STEPS``) products and then goes
    on until the top Ritz pair :math:`(\mu, r_\mu)` of the complement's space has
    converged (:math:`r_\mu \le \max(10^{-6} |\mu|, \mathrm{floor})`) or stands
    ten residuals below the threshold (:math:`\mu + 10 r_\mu < \theta_s + r_s`):
    that pair is the largest
    eigenvalue the run missed (the start vector has a component along every
    eigenvector with probability one), and a miss is then seen wherever it lies. At
    most ``_CHECK_MAX_STEPS`` products (or the whole complement).
    """
    n, wdim = B.shape
    s = theta.size
    least = _CHECK_STEPS if steps is None else steps
    most = min(max(least, _CHECK_MAX_STEPS), n - wdim)
    least = min(least, most)
    if most <= 0:
        return False
    U = np.empty((n, wdim + most), order="F")
    KZ = np.empty((n, most), order="F")
    U[:, :wdim] = B
    H = np.empty((wdim + most, wdim + most))
    H[:wdim, :wdim] = H_B
    z = rng.uniform(-1.0, 1.0, n)
    used = wdim
    threshold = theta + np.maximum(residual, floor)
    for _ in range(most):
        Uj = U[:, :used]
        norm0 = float(np.linalg.norm(z))
        for _ in range(2):
            z = _blas.dgemv(-1.0, Uj, _blas.dgemv(1.0, Uj, z, trans=1), beta=1.0, y=z, overwrite_y=1)
        nz = float(np.linalg.norm(z))
        if nz <= 1e-12 * norm0:   # the complement's Krylov space is invariant
            break
        U[:, used] = z / nz
        k = used - wdim
        KZ[:, k] = matvec(U[:, used])
        z = KZ[:, k].copy()
        used += 1
        H[:used, used - 1] = _blas.dgemv(1.0, U[:, :used], KZ[:, k], trans=1)
        H[used - 1, :used] = H[:used, used - 1]
        if used - wdim < least:
            continue
        m = used - wdim
        Hu = 0.5 * (H[:used, :used] + H[:used, :used].T)
        theta_u = scipy.linalg.eigvalsh(Hu, check_finite=False)[::-1][:s]
        if np.any(theta_u > threshold):
            return True
        # the complement's top Ritz pair (P K P on span Z, P = I - B B^T) and its residual
        HZ = Hu[wdim:, wdim:]
        mu, y = scipy.linalg.eigh(HZ, subset_by_index=[m - 1, m - 1], check_finite=False)
        Zy = _times_columns(U[:, wdim:used], y)[:, 0]
        PKZy = _times_columns(KZ[:, :m], y)[:, 0]
        PKZy -= _times_columns(B, (Hu[:wdim, wdim:] @ y))[:, 0]
        r_c = float(np.linalg.norm(PKZy - mu[0] * Zy))
        # converged, or converged enough to stand clear below the threshold: ten
        # residuals below it (a Ritz value lies within its residual of an eigenvalue)
        if r_c <= max(1e-6 * abs(float(mu[0])), floor) or float(mu[0]) + 10.0 * r_c < threshold[-1]:
            return False
    if used == wdim:
        return False
    Hu = 0.5 * (H[:used, :used] + H[:used, :used].T)
    theta_u = scipy.linalg.eigvalsh(Hu, check_finite=False)[::-1][:s]
    return bool(np.any(theta_u > threshold))


def _deflated_round(matvec: Callable[[NDArray[np.float64]], NDArray[np.float64]], n: int, s: int,
                    tol: float, floor: float, restarts: int, rng: np.random.Generator,
                    L: NDArray[np.float64], threshold: float):
    """One deflated restart of :func:`_lanczos_top`: Lanczos orthogonal to the pairs
    ``L`` found so far, the top ``s`` of the union by Rayleigh-Ritz (explicit residuals),
    and the closing check on that union (pairs of the deflated run below ``threshold``,
    the smallest value found so far, need not converge). Returns values, vectors, residuals and
    whether a miss (or an unconverged pair) remains."""
    l = L.shape[1]
    s2 = min(s, n - l - 1)
    KL = np.empty_like(L, order="F")
    for j in range(l):
        KL[:, j] = matvec(np.ascontiguousarray(L[:, j]))
    if s2 < 1:   # nothing left
        B, KB = L, KL
    else:
        _, _, _, (Q2, T2, w2, _) = _lanczos_run(matvec, n, s2, tol, floor, restarts, rng, L,
                                                threshold)
        # K Q2 = L (KL^T Q2) + Q2 T2 + w2 e_m^T (the run orthogonalised K q against L and Q2)
        KQ2 = _times_columns(Q2, T2)
        KQ2[:, -1] += w2
        KQ2 += _times_columns(L, _blas.dgemm(1.0, KL, Q2, trans_a=1))
        B, KB = np.hstack([L, Q2]), np.hstack([KL, KQ2])
    H = _blas.dgemm(1.0, B, KB, trans_a=1)
    H = 0.5 * (H + H.T)
    theta, Y = scipy.linalg.eigh(H, check_finite=False)
    theta, Y = theta[::-1][:s], Y[:, ::-1][:, :s]
    X = _times_columns(B, Y)
    R = _times_columns(KB, Y) - X * theta
    res = np.linalg.norm(R, axis=0)
    ok = np.all(res <= np.maximum(tol * np.abs(theta), floor))
    if not ok:
        return theta, X, res, True
    return theta, X, res, _closing_check(matvec, B, H, theta, res, floor, rng)


def kernel_top_eigh(
    X: ArrayLike,
    kernel: Any,
    n_components: int,
    *,
    center: bool = True,
    tol: float | None = None,
    random_state: int | np.random.Generator | None = 0,
    n_jobs: int | None = None,
    progress: bool | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Kernel PCA's eigenproblem from the data: the top eigenpairs of the (centred) Gram matrix.

    The same numbers as ``top_eigh(kernel(X), n_components, center=center)``
    (to round-off), computed with less work: the Gram matrix is built once,
    upper triangle only (:func:`mvkm.kernels.upper_gram`: no transposed copies
    of its tiles), it is symmetric by construction so it is not checked, and
    the ``"lanczos"`` solver and the centring means read that triangle with
    BLAS ``dsymv``. Small problems (:math:`n \le 1000`, or
    :math:`s > 0.08\,n`) go to LAPACK on the full matrix, as ``top_eigh``'s
    ``"auto"`` does. The guarantees are those of :func:`top_eigh`'s ``"lanczos"``
    and ``"dense"``: the closing check for repeated eigenvalues, the stopping
    test's floor at the round-off of one product (a kernel of rank below
    :math:`s` gives eigenvalues zero to round-off, as LAPACK does, in
    milliseconds), at most 20 thick restarts.

    The data come first, as in :func:`mvkm.matfree.matfree_top_eigh` and
    :class:`mvkm.matfree.KernelOperator`. The former order ``(kernel, X,
    n_components)`` still works, with a ``FutureWarning``.

    Parameters
    ----------
    X : array_like of shape (n, d)
        The points.
    kernel : mvkm.kernels.Kernel
        The kernel, e.g. :class:`mvkm.kernels.RBF`.
    n_components : int
        Number :math:`s` of eigenpairs, ``1 <= s <= n - 1``.
    center : bool, default=True
        Eigenpairs of the centred Gram matrix :math:`K_c = M_c K M_c` (kernel
        PCA), with the centring applied inside each product, or of :math:`K`.
    tol, random_state
        As in :func:`top_eigh`: the residual tolerance and the seed of the
        ``"lanczos"`` route. Both are checked on every call; the LAPACK route
        (:math:`n \le 1000` or :math:`s > 0.08\,n`) uses neither, since its
        eigenpairs are exact to round-off, below any ``tol``.
    n_jobs : int, optional
        Threads for the kernel's tiles (see :class:`mvkm.kernels.Kernel`).
    progress : bool or None, default=None
        As in :func:`top_eigh`.

    Returns
    -------
    eigenvalues : ndarray of shape (n_components,)
        Descending.
    eigenvectors : ndarray of shape (n, n_components)
        Orthonormal, signs fixed by :func:`flip_signs`.

    Raises
    ------
    TypeError
        If ``kernel`` is not a :class:`mvkm.kernels.Kernel`.
    ValueError
        On bad ``X`` (NaN, inf, wrong shape), ``n_components`` or ``tol``, or
        a Gram matrix that is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.kernels import RBF
    >>> from mvkm.linalg import kernel_top_eigh, top_eigh
    >>> X = np.random.default_rng(0).normal(size=(1500, 3))
    >>> lam, V = kernel_top_eigh(X, RBF(1.0), 5)
    >>> lam_ref, V_ref = top_eigh(RBF(1.0)(X), 5, center=True)
    >>> bool(np.allclose(lam, lam_ref, rtol=1e-12))
    True
    >>> bool(np.allclose(V, V_ref, atol=1e-8))
    True
    """
    check_bool(center, "center")
    check_bool(progress, "progress", allow_none=True)
    from .kernels import Kernel, centring_equivalent, upper_gram

    X, kernel = data_then_kernel(X, kernel, "kernel_top_eigh")
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be an mvkm.kernels.Kernel, got {describe(kernel)} "
                        "(the arguments are kernel_top_eigh(X, kernel, n_components))")
    Xa = check_array(X, "X")
    if center:      # a linear kernel far from the origin: computed from the middle of X
        kernel = centring_equivalent(kernel, Xa)
    n = Xa.shape[0]
    if n < 2:
        raise ValueError(f"X must have n >= 2 rows (points) for kernel_top_eigh, got {n}")
    s = check_n_components(n_components, n - 1, what="n - 1")
    tol = _checked_tol(tol)                  # checked on both routes (LAPACK's needs none)
    rng = check_random_state(random_state)
    if n <= _AUTO_DENSE_MAX_N or s > _AUTO_DENSE_FRACTION * n:
        K = kernel(Xa, n_jobs=n_jobs)
        _check_gram_range(K, Xa, kernel)
        return top_eigh(K, s, "dense", center=center, check_symmetric=False)
    K = upper_gram(kernel, Xa, n_jobs=n_jobs)
    _check_gram_range(K, Xa, kernel)
    return _triangle_top(K, s, tol, rng, center, f"the Gram matrix of {kernel!r}", progress=progress)


def _triangle_abs_max(K: NDArray[np.float64]) -> float:
    """max |K_ij| over the upper triangle, in blocks of 512 rows (``K`` may hold only that triangle)."""
    return max(float(np.max(np.abs(np.triu(K[i:i + 512, i:])))) for i in range(0, K.shape[0], 512))


def _check_gram_range(K: NDArray[np.float64], X: NDArray[np.float64], kernel: Any) -> None:
    """A Gram matrix computed from nonzero ``X`` whose nonzero entries all lie below the smallest
    normal float64 has lost its digits to underflow (e.g. a linear kernel on data of scale 1e-160:
    entries near 1e-319 keep about five digits), and so has an inner-product kernel's Gram
    matrix of zeros (at 1e-300): a clear error naming ``X``, since its eigenvalues cannot be
    computed to the promised accuracy. Reads the upper triangle only (``K`` may be one)."""
    tiny = np.finfo(np.float64).tiny
    if float(np.max(np.abs(np.diagonal(K)))) >= tiny:
        return
    from .kernels import Linear, Polynomial

    big = _triangle_abs_max(K)
    # K = 0 exactly is a fact for a kernel that may vanish (a user's kernel), and underflow for
    # an inner-product kernel on nonzero data
    inner = isinstance(kernel, Linear) or (isinstance(kernel, Polynomial) and kernel.c == 0)
    if (0 < big < tiny or (big == 0 and inner)) and np.any(X != 0):
        raise ValueError(
            f"X: the Gram matrix of {kernel!r} underflows float64 (its largest entry is {big:.1e}, "
            f"below the smallest normal number {tiny:.1e}), so its eigenvalues have lost their "
            "digits; rescale X (the eigenvalues of a linear kernel scale with the square of X)")


def _triangle_top(K: NDArray[np.float64], s: int, tol: float, rng: np.random.Generator,
                  center: bool, what: str, means: Any = None, progress: bool | None = None
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Lanczos on the upper triangle of a symmetric ``K`` (centred inside the products when
    ``center``): the route of :func:`kernel_top_eigh` and :meth:`mvkm._gram.GramTriangle.top_eigh`.

    ``means``: the triangle's centring means (:func:`_triangle_means`) if already known;
    ``what`` names ``K`` in the error raised when it is not finite.
    """
    n = K.shape[0]
    diag = np.diagonal(K)
    if not np.all(np.isfinite(diag)):
        raise ValueError(f"{what} is not finite: rescale the data")
    scale = float(np.max(np.abs(diag)))     # max|K_ij| for a positive semi-definite kernel
    if scale == 0.0:                          # not PSD (or K = 0): max|K_ij| over the triangle
        scale = _triangle_abs_max(K)
    K, scale, exponent = _unit_scaled(K, scale)
    if center and (means is None or exponent != 0):
        means = _triangle_means(K, upper=True)
    w, V = _lanczos_top(K, s, tol, None, rng, scale, means if center else None, upper=True,
                        progress=progress)
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(V))):
        raise ValueError(f"{what} is not finite: rescale the data")
    lam = np.ascontiguousarray(np.ldexp(w, -exponent) if exponent else w, dtype=np.float64)
    return lam, flip_signs(V)


def _times_columns(Q: NDArray[np.float64], Y: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Q @ Y`` by scipy's BLAS ``dgemm`` (the library of the Lanczos products; see
    :func:`_lanczos_top` on mixing BLAS libraries)."""
    return _blas.dgemm(1.0, Q, np.asfortranarray(Y))


def _orthonormal_basis(Z: NDArray[np.float64]) -> NDArray[np.float64]:
    Q, _ = scipy.linalg.qr(Z, mode="economic", overwrite_a=True, check_finite=False)
    return Q


def _rayleigh_ritz(Q: NDArray[np.float64], KQ: NDArray[np.float64]):
    """Ritz values (descending), Ritz vectors and their images from a basis and ``K @ basis``."""
    H = Q.T @ KQ
    H = 0.5 * (H + H.T)
    theta, W = scipy.linalg.eigh(H, check_finite=False)
    theta, W = theta[::-1], W[:, ::-1]
    return theta, Q @ W, KQ @ W


def _chebyshev_filter(matmat: Callable[[NDArray[np.float64]], NDArray[np.float64]],
                      V: NDArray[np.float64], KV: NDArray[np.float64],
                      theta: NDArray[np.float64], k: int, need: float | None = None
                      ) -> NDArray[np.float64]:
    r"""Apply :math:`p_m(K)` to the Ritz vectors ``V``, with :math:`p_m` the Chebyshev
    polynomial of the interval :math:`[0, \theta_b]` (damped) mapped to :math:`[-1, 1]`.

    Eigencomponents in :math:`[0, \theta_b]` (:math:`\theta_b` the smallest Ritz
    value of the block, an estimate of the unwanted part of the spectrum) stay
    bounded by 1 while a wanted :math:`\lambda > \theta_b` grows like
    :math:`\cosh(m\,\mathrm{arccosh}(2\lambda/\theta_b - 1))`: per product with
    ``K`` this beats the power step's :math:`\lambda/\theta_b` (Zhou & Saad, 2007).
    The degree is capped so that the growth of the best wanted Ritz vector over
    the worst stays below ``_MAX_FILTER_GROWTH``, which keeps the worst one
    resolvable after the QR factorisation. ``KV = K @ V`` is the first product.

    ``need`` (used by :mod:`mvkm.matfree`, where each product is a full pass over
    the kernel): also cap the degree at the smallest :math:`m` with
    :math:`T_m(x_k) \ge` ``need`` (the largest residual over its target), plus
    one for safety, :math:`x_k = 2\theta_k/\theta_b - 1`; the filter shrinks the
    unwanted components of the worst wanted Ritz vector by :math:`1/T_m(x_k)`.
    """
    c = float(theta[-1])
    if not c > 0.0 or k == 0:
        return KV.copy()  # plain power step (PSD assumption broken or nothing left)
    half = 0.5 * c
    x_best = (float(theta[0]) - half) / half
    x_worst = (float(theta[k - 1]) - half) / half
    if x_worst <= 1.0:
        return KV.copy()
    spread = np.arccosh(x_best) - np.arccosh(x_worst)
    if spread <= 0.0:
        degree = _MAX_FILTER_DEGREE
    else:
        degree = int(np.clip(np.log(_MAX_FILTER_GROWTH) // spread, 1, _MAX_FILTER_DEGREE))
    if need is not None:
        degree = min(degree, int(np.ceil(np.arccosh(max(need, 1.0)) / np.arccosh(x_worst))) + 1)
    X_prev = V
    X = (KV - half * V) / half
    for _ in range(degree - 1):
        X_next = (2.0 / half) * (matmat(X) - half * X) - X_prev
        norms = np.linalg.norm(X_next, axis=0)
        norms[norms == 0.0] = 1.0
        X_prev, X = X / norms, X_next / norms
    return X


def _subspace_top(matmat: Callable[[NDArray[np.float64]], NDArray[np.float64]], n: int, s: int,
                  tol: float, max_iter: int, rng: np.random.Generator
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Chebyshev-filtered block subspace iteration with Rayleigh-Ritz and hard locking.

    Also returns the smallest Ritz value met relative to the largest magnitude: a
    negative Rayleigh quotient proves that ``K`` is not PSD (the method's assumption).
    """
    worst = 0.0
    b = min(n, s + max(_MIN_OVERSAMPLING, s))
    Q = _orthonormal_basis(rng.standard_normal((n, b)))
    KQ = matmat(Q)
    X_locked = np.empty((n, 0))
    lam_locked = np.empty(0)
    converged = False
    for iteration in range(1, max_iter + 1):
        theta, V, KV = _rayleigh_ritz(Q, KQ)
        big = max(abs(float(theta[0])), abs(float(theta[-1])), np.finfo(float).tiny)
        worst = min(worst, float(theta[-1]) / big)
        k = s - lam_locked.size  # wanted pairs still active
        lam_1 = max(float(theta[0]), float(lam_locked[0]) if lam_locked.size else -np.inf)
        residuals = np.linalg.norm(KV[:, :k] - V[:, :k] * theta[:k], axis=0)
        # absolute floor: the round-off of one product, 4 n eps ||K|| (>= max|K_ij|; the
        # largest Ritz magnitude stands for ||K||), as in "lanczos"
        ok = residuals <= max(tol * abs(lam_1),
                              _FLOOR_FACTOR * n * np.finfo(float).eps * max(big, abs(lam_1)))
        n_ok = lam_locked.size + int(np.sum(ok))
        if ok.all():
            converged = True
            break
        if iteration == max_iter:
            break
        n_new = int(np.argmin(ok))  # leading run of converged pairs: lock them
        if n_new:
            X_locked = np.hstack([X_locked, V[:, :n_new]])
            lam_locked = np.concatenate([lam_locked, theta[:n_new]])
            V, KV, theta, k = V[:, n_new:], KV[:, n_new:], theta[n_new:], k - n_new
        Z = _chebyshev_filter(matmat, V, KV, theta, k)
        if lam_locked.size:
            for _ in range(2):  # twice is enough (Kahan, Giraud et al.)
                Z -= X_locked @ (X_locked.T @ Z)
        Q = _orthonormal_basis(Z)
        KQ = matmat(Q)
    if not converged:
        warnings.warn(
            f"top_eigh(method='subspace') stopped at max_iter={max_iter} iterations with "
            f"{n_ok} of {s} residuals "
            f"||K v - lambda v|| below tol * lambda_1 = {tol * abs(lam_1):.3g} "
            f"(largest {float(residuals.max()):.3g}); raise max_iter or tol, or use "
            "method='arpack' or 'dense'",
            ConvergenceWarning,
            stacklevel=3,
        )
    w = np.concatenate([lam_locked, theta[:k]])
    V_all = np.hstack([X_locked, V[:, :k]])
    order = np.argsort(-w, kind="stable")
    return w[order], V_all[:, order], worst


def _auto_method(K: Any, n: int, s: int) -> str:
    if not isinstance(K, np.ndarray):
        return "arpack"
    if n <= _AUTO_DENSE_MAX_N or s > _AUTO_DENSE_FRACTION * n:
        return "dense"
    return "lanczos"


def top_eigh(
    K: ArrayLike | scipy.sparse.linalg.LinearOperator,
    n_components: int,
    method: str = "auto",
    *,
    tol: float | None = None,
    max_iter: int | None = None,
    random_state: int | np.random.Generator | None = 0,
    check_symmetric: bool = True,
    center: bool = False,
    progress: bool | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""The ``n_components`` largest eigenpairs of a symmetric positive semi-definite matrix.

    Returns :math:`\lambda_1 \ge \dots \ge \lambda_s` and orthonormal
    :math:`V = [v_1, \dots, v_s]` with :math:`K v_i = \lambda_i v_i`, the top-:math:`s`
    eigenproblem :math:`K V = V \Lambda,\ V^\top V = I_s` behind kernel PCA and
    every dual model of the book. Each eigenvector's sign follows
    :func:`flip_signs` (largest-magnitude entry positive), so results do not
    depend on the solver or the run.

    Parameters
    ----------
    K : array_like of shape (n, n), sparse matrix or scipy.sparse.linalg.LinearOperator
        Symmetric; positive semi-definite for ``method="subspace"`` (the other
        methods accept any symmetric matrix and return its algebraically
        largest eigenvalues). The subspace iteration checks this: a Ritz value
        below ``-1e-8`` times the largest magnitude proves ``K`` indefinite, and
        the eigenpairs are then computed by ``"arpack"`` with a ``RuntimeWarning``. Sparse matrices and ``LinearOperator`` (which must
        implement ``matmat`` efficiently for ``"subspace"``) are accepted by the
        iterative methods; a ``LinearOperator`` is not checked for symmetry.
    n_components : int
        Number :math:`s` of eigenpairs: ``1 <= s <= n`` for ``"dense"`` and
        ``"auto"``, ``1 <= s <= n - 1`` for ``"arpack"`` and ``"subspace"``.
    method : {"auto", "dense", "lanczos", "arpack", "subspace"}, default="auto"
        What each method guarantees (``tests/test_hard_spectra.py`` checks it on
        repeated, clustered, flat, rank-deficient, round-off, indefinite and
        extremely scaled spectra against LAPACK, with a time bound):

        * ``"dense"``: LAPACK, :math:`O(n^3)`, exact to round-off: ``syevr``
          restricted to the top :math:`s` (:func:`scipy.linalg.eigh` with
          ``subset_by_index``) when :math:`s \le 0.3\,n`, else the full
          divide-and-conquer ``syevd`` (measured faster there; ``syevx`` was
          never faster than ``syevr``). When ``syevr``'s subset search returns
          fewer vectors than asked (it can on a degenerate spectrum, e.g. an RBF
          Gram matrix that is the identity to round-off), ``syevd`` answers.
          *Guarantee*: the top :math:`s` eigenpairs, multiplicities included, to
          backward error :math:`O(n \epsilon \|K\|)`.
        * ``"lanczos"`` (dense arrays only): Lanczos with full
          reorthogonalisation and thick restarts, BLAS ``dsymv`` products (one
          triangle of ``K`` read per product) from a start vector drawn from
          ``random_state``. The residual of every Ritz pair is known exactly
          after each product, so it stops as soon as the ``s`` largest satisfy
          :math:`\|K v_i - \theta_i v_i\| \le \max(\mathrm{tol}\,|\theta_i|,\
          4 n \epsilon \max|K|)`, where ARPACK checks only after a full basis of
          :math:`2s + 1` products: 23-24 products instead of 28-33 for
          :math:`s = 10` on the kernels of ``benchmarks/bench_kpca.py``. The
          absolute floor is the round-off of one product, so eigenvalues that are
          zero to round-off (``K`` of rank below :math:`s`) are returned as such,
          within that floor of zero, as by ``"dense"``. A single-vector Krylov
          space holds one vector per eigenspace, so Lanczos alone returns a
          repeated eigenvalue once; it therefore ends with a *closing check*:
          Lanczos products from a random vector orthogonal to its basis (at
          least 3, then until the top Ritz pair of that complement has converged
          or stands ten residuals below :math:`\theta_s`, at most 60) and a
          Rayleigh-Ritz step on the union. A Ritz value there above a returned one by
          more than its residual proves that an eigenvalue was missed, and Lanczos
          restarts orthogonal to the pairs found (deflation) until the check
          passes. *Guarantee*: every returned pair has a residual within the test
          above; the values are the top :math:`s` unless a missed eigenvalue is
          so close to the rest of the complement's spectrum that 60 products do
          not resolve it (a 4- and a 6-fold 10 directly above 9, 8.97, ... at
          n = 300 are tested, over ten random bases each; the check costs 0-7
          products more than a fixed 3 on RBF kernels). Eigenvalues that
          agree to round-off within a cluster cannot be told apart by any method
          and come back as a valid set of eigenpairs of that cluster. At most 20
          thick restarts by default (about 3300 products), then
          ``ArpackNoConvergence``.
        * ``"arpack"``: implicitly restarted Lanczos (:func:`scipy.sparse.linalg.eigsh`,
          ``which="LA"``) from a start vector drawn from ``random_state``. For an
          ndarray the matrix-vector product is BLAS ``dsymv``, which reads one
          triangle of ``K`` and so moves half the memory of ``K @ x``: 1.5-1.9x
          faster than ``eigsh(K)``, scikit-learn's ``KernelPCA`` solver, in
          ``benchmarks/bench_kpca.py`` (same matrix, same accuracy).
          Stops when :math:`\|K v_i - \theta_i v_i\| \le \mathrm{tol}\,|\theta_i|`
          (ARPACK's test, on ``K / max|K|``). ARPACK misses repeated eigenvalues
          too, so it gets the same closing check (with :math:`2s + 1` products,
          since ARPACK does not return its Krylov basis: about 50 % more
          products than ARPACK alone), and the same deflated Lanczos restarts when it
          finds a miss. *Guarantee*: as ``"lanczos"``. At most 1000 restarts
          by default (scipy's default is :math:`10 n`).
        * ``"subspace"``: block subspace iteration (Halko, Martinsson & Tropp,
          2011, Alg. 4.4, with a Rayleigh-Ritz step every iteration) on a block of
          :math:`b = s + \max(10, s)` columns, accelerated by a Chebyshev filter
          that damps :math:`[0, \theta_b]` (Zhou & Saad, 2007), with hard locking
          of converged leading Ritz pairs. Stops when every residual satisfies
          :math:`\|K v_i - \theta_i v_i\| \le \mathrm{tol}\,\theta_1`, so it
          stays accurate for clustered spectra (unlike a fixed number of power
          steps, as in scikit-learn's ``eigen_solver="randomized"``).
          *Guarantee*: a block method, it sees multiplicities up to
          :math:`b - s + 1 \ge 11` for a positive semi-definite ``K`` whose
          spectrum decays towards 0 (kernel matrices); on a flat spectrum (all
          eigenvalues far from 0 and close together) the filter gains little and
          it may stop at ``max_iter`` with a ``ConvergenceWarning``. An
          indefinite ``K`` is detected and handed to ``"arpack"``.
        * ``"auto"``: ``"dense"`` when :math:`n \le 1000` (exact, under
          0.2 s) or :math:`s > 0.08\,n`, otherwise ``"lanczos"`` for an
          array and ``"arpack"`` for a sparse matrix or an operator; each with
          its guarantee above. Measured on one core
          of the reference machine for centred RBF kernels (Gaussian data,
          :math:`d = 10`): at :math:`s = 10`, ARPACK takes 0.02 / 0.12 / 0.23 s
          where LAPACK takes 0.15 / 1.3 / 5.4 s at :math:`n = 1000 / 2000 / 3000`;
          the two cross near :math:`s \approx 0.08\,n`; the subspace
          iteration was 1.1-3.3x slower than ARPACK with ``dsymv`` everywhere
          (OpenBLAS's matrix-times-thin-block products are far from peak speed).
    tol : float, optional
        Residual tolerance of the iterative methods (ignored by ``"dense"``).
        Defaults to ``1e-10``. Eigenvalue errors are then of order
        :math:`\mathrm{tol}^2\lambda_1^2/\mathrm{gap}` (far below ``tol``) and
        eigenvector angles of order :math:`\mathrm{tol}\,\lambda_1/\mathrm{gap}`.
        ``tol=0`` means machine precision for ``"lanczos"`` and ``"arpack"``;
        ``"subspace"`` needs ``tol > 0``.
    max_iter : int, optional
        Iteration cap of the iterative methods (ignored by ``"dense"``): Lanczos
        thick restarts (default 20, each at most 150 products past the first
        300), ARPACK restarts (default 1000; ARPACK counts them in a 32-bit
        integer, so a cap above ``2**31 - 1`` acts as ``2**31 - 1``) or
        subspace Rayleigh-Ritz iterations (default 500).
    random_state : int, numpy.random.Generator or None, default=0
        Seed of the start vector (``"lanczos"``, ``"arpack"``) or start block
        (``"subspace"``).
        The default makes every call deterministic.
    check_symmetric : bool, default=True
        Check that ``K`` is finite and symmetric up to ``1e-8 * max|K|``
        (tile by tile, without an :math:`n \times n` temporary). With ``False``
        only finiteness is checked; ``"dense"``, ``"lanczos"`` and ``"arpack"``
        then read the lower triangle of ``K`` only, ``"subspace"`` the whole matrix.
    center : bool, default=False
        Return the eigenpairs of the centred matrix
        :math:`K_c = M_c K M_c` (:math:`M_c = I - \frac1n 1 1^\top`) without
        forming it: with the row means :math:`r`, column means :math:`c` and
        grand mean :math:`g` of ``K``, each product is
        :math:`K_c x = K x - r\,(1^\top x) - 1\,(c^\top x) + g\,1\,(1^\top x)`,
        :math:`O(n)` work on top of :math:`Kx` and no pass over an ``n x n``
        matrix; ``K`` is left as it is. The same numbers as
        ``top_eigh(mvkm.kernels.center_gram(K), ...)``, one pass over ``K``
        cheaper. For an array the means are those of the symmetric matrix
        with ``K``'s lower triangle, which the solvers read (so :math:`r = c`;
        one ``dsymv`` with a vector of ones). ``"dense"`` centres a copy
        explicitly. Not available for a ``LinearOperator``.
    progress : bool or None, default=None
        A progress bar of the ``"lanczos"`` products: ``True`` at once,
        ``False`` never, ``None`` once the solve has run for 5 seconds (as the
        streamed fits and :func:`mvkm.matfree.matfree_top_eigh` do;
        ``MVKM_PROGRESS=0`` turns it off). The other methods show none.

    Returns
    -------
    eigenvalues : ndarray of shape (n_components,)
        :math:`\lambda_1 \ge \lambda_2 \ge \dots \ge \lambda_s`.
    eigenvectors : ndarray of shape (n, n_components)
        Orthonormal columns, column ``i`` for ``eigenvalues[i]``, signs fixed by
        :func:`flip_signs`.

    Raises
    ------
    ValueError
        If ``K`` is not square, finite and symmetric, if ``n_components`` is
        out of range, if ``method`` is unknown, or if ``tol``/``max_iter`` are invalid.
    TypeError
        If ``n_components`` or ``max_iter`` is not an integer, or ``method="dense"``
        is asked for a ``LinearOperator``.
    scipy.sparse.linalg.ArpackNoConvergence
        If ARPACK or Lanczos reaches ``max_iter`` (a ``RuntimeError``): the
        error names the pairs that met the test and the residual floor.
    TypeError
        If ``method="lanczos"`` is asked for a sparse matrix or an operator.

    Warns
    -----
    ConvergenceWarning
        (a ``RuntimeWarning``) if ``"subspace"`` reaches ``max_iter``, or if the
        closing check of ``"lanczos"``/``"arpack"`` still finds a missed eigenvalue
        after ``s`` deflated restarts; the current approximations are returned.

    See Also
    --------
    numpy.linalg.eigh : all eigenpairs, ascending.
    scipy.linalg.eigh : LAPACK drivers, ``subset_by_index``.
    scipy.sparse.linalg.eigsh : ARPACK.
    sklearn.decomposition.KernelPCA : kernel PCA, whose ``eigen_solver="arpack"``
        calls ``eigsh`` on the centred kernel matrix.
    flip_signs : the sign convention.

    References
    ----------
    N. Halko, P.-G. Martinsson and J. A. Tropp, "Finding structure with
    randomness", SIAM Review 53(2), 2011. Y. Zhou and Y. Saad, "A
    Chebyshev-Davidson algorithm for large symmetric eigenproblems", SIAM J.
    Matrix Anal. Appl. 29(3), 2007. R. B. Lehoucq, D. C. Sorensen and C. Yang,
    ARPACK Users' Guide, SIAM, 1998.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.linalg import top_eigh
    >>> rng = np.random.default_rng(0)
    >>> Phi = rng.standard_normal((50, 5))
    >>> K = Phi @ Phi.T                                  # PSD, rank 5
    >>> lam, V = top_eigh(K, 3)
    >>> lam.shape, V.shape
    ((3,), (50, 3))
    >>> bool(np.all(np.diff(lam) <= 0))                 # descending
    True
    >>> bool(np.allclose(K @ V, V * lam))     # K v_i = lambda_i v_i
    True
    >>> lam_sub, V_sub = top_eigh(K, 3, method="subspace")
    >>> bool(np.allclose(lam_sub, lam) and np.allclose(V_sub, V))
    True
    """
    check_bool(center, "center")
    check_bool(progress, "progress", allow_none=True)
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, _METHODS))}; got {method!r}")
    check_bool(check_symmetric, "check_symmetric")
    K, scale = _validate_matrix(K, bool(check_symmetric))
    n = K.shape[0]
    is_array = isinstance(K, np.ndarray)
    if method == "dense" and isinstance(K, scipy.sparse.linalg.LinearOperator):
        raise TypeError("method='dense' needs K as an array or a sparse matrix, got a LinearOperator")
    if method == "lanczos" and not is_array:
        raise TypeError(f"method='lanczos' needs K as a dense array, got {type(K).__name__}: "
                        "use method='arpack' for sparse matrices and operators")
    iterative = method in ("lanczos", "arpack", "subspace") or (method == "auto" and not is_array)
    if iterative:
        if n < 2:
            raise ValueError(f"method={method!r} needs n >= 2, got K of shape {K.shape}")
        s = check_n_components(n_components, n - 1, what=f"n - 1 for method={method!r}")
    else:
        s = check_n_components(n_components, n, what="the size of K")
    if method == "auto":
        method = _auto_method(K, n, s)
    tol = _checked_tol(tol)
    if method == "subspace" and tol == 0.0:
        raise ValueError("tol must be > 0 for method='subspace', got 0")
    if max_iter is not None:
        if isinstance(max_iter, bool) or not isinstance(max_iter, Integral):
            raise TypeError(f"max_iter must be an integer or None, got {max_iter!r}")
        if max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}")
        max_iter = int(max_iter)
    rng = check_random_state(random_state)

    exponent = 0
    if is_array and method in ("lanczos", "arpack"):
        K, scale, exponent = _unit_scaled(K, scale)
    means = _centering_means(K, is_array) if center else None
    if method == "dense":
        K_dense = K.toarray() if scipy.sparse.issparse(K) else K
        if means is not None:
            row, col, grand = means
            K_dense = K_dense - (row[:, None] + col[None, :] - grand)
        w, V = _dense_top(K_dense, s)
    elif method == "lanczos":
        w, V = _lanczos_top(K, s, tol, max_iter, rng, scale, means, progress=progress)
    elif method == "arpack":
        w, V = _arpack_top(K, s, tol, max_iter, rng, scale, means)
    else:
        # Near overflow (|K Z| <= n max|K| max|Z|), K is applied as K / max|K| to Z shrunk
        # by n max|Z|, and the eigenvalues are scaled back at the end. Near underflow
        # (max|K| < 1e-100) K is applied as K / max|K| too: the Chebyshev filter and the
        # Rayleigh-Ritz step form products of products, which would leave the normal
        # range (at max|K| = 1e-200 the eigenvalues came out 40 % low).
        unit = 1.0
        if is_array:
            big = scale if scale is not None else max_abs(K)
            huge = big * n > 1e300
            tiny = 0.0 < big < 1e-100
            unit = big if huge or tiny else 1.0

            def product(Z: NDArray[np.float64]) -> NDArray[np.float64]:
                if tiny:
                    KZ = K @ Z
                    KZ /= unit
                    return KZ
                if not huge:
                    return K @ Z
                pre = n * max(max_abs(Z), np.finfo(float).tiny)
                KZ = K @ (Z / pre)
                KZ *= pre / unit
                return KZ
        elif scipy.sparse.issparse(K):
            def product(Z: NDArray[np.float64]) -> NDArray[np.float64]:
                return np.asarray(K @ Z)
        else:
            def product(Z: NDArray[np.float64]) -> NDArray[np.float64]:
                return np.asarray(K.matmat(Z), dtype=np.float64)

        def matmat(Z: NDArray[np.float64]) -> NDArray[np.float64]:
            KZ = product(Z)
            if means is not None:
                _subtract_centering(KZ, Z, means, 1.0 / unit)
            return KZ

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            w, V, worst = _subspace_top(matmat, n, s, tol,
                                        _DEFAULT_SUBSPACE_MAX_ITER if max_iter is None else max_iter,
                                        check_random_state(random_state))
        w = w * unit
        if worst < -_PSD_RTOL:
            # a negative Rayleigh quotient: K is not PSD, and the filtered iteration may
            # have converged to eigenvalues of largest magnitude instead of the largest
            warnings.warn(
                f"top_eigh(method='subspace') needs a positive semi-definite K, but K has a "
                f"negative Rayleigh quotient ({worst:.3g} times the largest magnitude): K is "
                "not positive semi-definite; the eigenpairs were computed with method='arpack'",
                RuntimeWarning, stacklevel=2)
            w, V = _arpack_top(K, s, tol, max_iter, rng, scale, means)
        else:
            for item in caught:
                warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(V))):
        raise ValueError(
            f"top_eigh(method={method!r}) produced non-finite eigenpairs: K's entries "
            "(or the centring of K) overflow float64 in the solver; rescale K"
        )
    w = np.ldexp(w, -exponent) if exponent else w
    return np.ascontiguousarray(w, dtype=np.float64), flip_signs(V)
