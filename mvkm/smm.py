r"""A low-rank support matrix machine with row and column kernels (Part IV).

The model of :cite:`lee2020algorithmic` classifies matrices :math:`X \in \mathbb{R}^{d_1 \times d_2}`
without vectorising them. Every row of ``X`` is mapped by a row kernel
:math:`k_r` and every column by a column kernel :math:`k_c`; the decision
function is

.. math::

    f(X) = \sum_{k=1}^n \gamma_k \Big( \sum_{p,q=1}^{d_1} [W_r]_{pq}\,
           k_r([X_k]_{p:}, [X]_{q:}) + \sum_{p,q=1}^{d_2} [W_c]_{pq}\,
           k_c([X_k]_{:p}, [X]_{:q}) \Big) + b,

where :math:`W_r` and :math:`W_c` are orthogonal projectors of rank at most ``rank``
(the low-rank factorisation :math:`B = CP^\top` of the hinge-loss primal) and
:math:`\gamma = y \circ \alpha`. Training alternates two convex half-steps:

* the **C-step** (``P`` fixed) is an SVM dual whose kernel is the *projected
  kernel* :math:`k_P(i, j) = \operatorname{tr}(W_r K_r(i, j)) +
  \operatorname{tr}(W_c K_c(i, j))`;
* the **P-step** (``C`` fixed) is an SVM dual with the finite-dimensional
  features :math:`(C^\top C)^{-1/2} C^\top \Phi(X_i)`, computed from kernel
  contractions only.

Without an intercept each dual is a box-constrained QP, solved exactly by
:func:`solve_box_qp` (greedy coordinate descent, then an active-set finish on
the face it found); with one it has an equality constraint: for a fixed
intercept ``b`` the dual is again a box QP, and ``b`` is found by a root
search (regula falsi, Illinois variant) on the slope :math:`\sum_i y_i\alpha_i(b)`
of its optimal value, started at scikit-learn's ``SVC(kernel="precomputed")``;
the dual returned is the combination of the two sides of the root with
:math:`\sum_i y_i\alpha_i = 0`. The
:math:`n \times n \times d \times d` block kernel of a side (rows or
columns) is stored during a fit when it has at most ``2**24`` entries
(128 MB) and the kernel is not linear; otherwise, and always in
``decision_function``, its tiles are computed from the data and contracted
at once (memory :math:`O(n^2 + \text{tile})`).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning as ConvergenceWarning_sklearn
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from ._validation import check_array, check_positive, check_random_state, reset_fitted
from ._validation import atomic_fit, check_bool, own_copy
from ._validation import as_array
from ._validation import SYMMETRY_RTOL, symmetric_scale
from .kernels import Kernel, Linear
from .linalg import ConvergenceWarning

__all__ = [
    "LowRankSMM",
    "solve_box_qp",
    "projected_gram",
    "symmetric_embedding",
    "svm_objective",
]

#: Entries of one kernel tile (float64): 4M entries = 32 MB.
_TILE_ENTRIES = 1 << 22
#: Largest block kernel (n^2 d^2 entries, one side) kept in memory during a fit: 128 MB.
_CACHE_ENTRIES = 1 << 24


# --------------------------------------------------------------------------
# The box-constrained SVM dual
# --------------------------------------------------------------------------

def solve_box_qp(
    Q: ArrayLike,
    upper: float | ArrayLike,
    *,
    alpha0: ArrayLike | None = None,
    linear: ArrayLike | None = None,
    tol: float = 1e-12,
    max_rounds: int = 20,
) -> tuple[NDArray[np.float64], int]:
    r"""Solve :math:`\min_\alpha \tfrac12 \alpha^\top Q\alpha - c^\top\alpha` subject to :math:`0 \le \alpha \le u` (:math:`c = \mathbf 1` by default).

    This is the dual of an SVM without intercept (:math:`Q = \operatorname{diag}(y)
    K \operatorname{diag}(y)`). Without the equality constraint of the SVM
    with intercept, one coordinate can move alone, and its best move has a
    closed form (a clipped Newton step on a parabola). The solver runs in
    rounds:

    1. *greedy coordinate descent* (compiled with numba): at every update the
       coordinate whose clipped step lowers the objective most (the
       second-order working-set choice of SMO, here with one variable) moves,
       and the gradient :math:`g = Q\alpha - \mathbf 1` is updated with one
       row of ``Q``;
    2. *an active-set finish* from that point: the variables strictly inside
       the box form the free set ``F``, the others stay at their bounds; a
       Newton step on ``F`` (the face's stationarity conditions
       :math:`Q_{FF}\alpha_F = \mathbf 1 - Q_{FU} u_U`; along a null
       direction of a singular :math:`Q_{FF}`, the linear descent) is taken
       as far as the box allows, a variable reaching its bound leaves ``F``,
       and at the face's minimiser a bound variable with the wrong
       multiplier sign joins it. Once the descent has found nearly the right
       face (usually in the first round) a few such steps end at the exact
       optimum, which coordinate descent alone reaches only slowly on
       ill-conditioned kernels. If they do not, the next round resumes the
       descent with a tolerance a hundred times smaller.

    The stopping rule is the duality gap of the SVM: with :math:`g_i = (Q\alpha)_i - 1`,
    the primal objective of the classifier defined by :math:`\alpha` is
    :math:`P = \tfrac12\alpha^\top Q\alpha + \sum_i u_i\max(0, -g_i)` and
    :math:`P - (\mathbf 1^\top\alpha - \tfrac12\alpha^\top Q\alpha) =
    \sum_i \alpha_i g_i + u_i \max(0, -g_i) \ge 0` bounds the distance of
    both objectives to the optimum. It is zero exactly at the optimum, also
    when :math:`Q` is singular and the optimal :math:`\alpha` is not unique.

    Parameters
    ----------
    Q : array_like of shape (n, n)
        Symmetric positive semi-definite.
    upper : float or array_like of shape (n,)
        The box :math:`u > 0` (the SVM's ``C``).
    alpha0 : array_like of shape (n,), optional
        A warm start (clipped into the box); zeros by default.
    linear : array_like of shape (n,), optional
        The vector :math:`c` (ones by default). With :math:`c_i = 1 - y_i b`
        the problem is the dual of the SVM whose intercept is held at ``b``.
    tol : float, default=1e-12
        Stop when the duality gap is below ``tol * max(1, P)`` (plus the
        round-off floor :math:`100\,\epsilon\,|\alpha|^\top|Q||\alpha|` of its
        computation).
    max_rounds : int, default=20
        Rounds of descent and polish, ``>= 1``.

    Returns
    -------
    alpha : ndarray of shape (n,)
    n_iter : int
        Coordinate updates taken. A :class:`~mvkm.linalg.ConvergenceWarning` is
        raised if ``max_rounds`` end before the tolerance is met.

    Raises
    ------
    ValueError
        If ``Q`` is not a finite symmetric matrix (up to ``1e-8`` relative) or
        has a negative diagonal entry (so it is not positive semi-definite);
        ``upper``, ``alpha0`` or ``linear`` is not a finite vector of length
        ``n`` (``upper`` may be a number), ``upper`` is not > 0, ``tol`` is not
        > 0 or ``max_rounds`` is not a positive integer.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.smm import solve_box_qp
    >>> alpha, _ = solve_box_qp(np.array([[2.0, 1.0], [1.0, 2.0]]), 1.0)
    >>> np.round(alpha, 6)    # the unconstrained optimum is in the box
    array([0.333333, 0.333333])
    """
    Q = check_array(Q, "Q")
    n = Q.shape[0]
    if Q.shape != (n, n):
        raise ValueError(f"Q must be square, got shape {Q.shape}")
    size = symmetric_scale(Q, "Q")           # finite and symmetric (tile by tile)
    if float(np.diagonal(Q).min()) < -SYMMETRY_RTOL * size:    # beyond round-off
        i = int(np.argmin(np.diagonal(Q)))
        raise ValueError(f"Q must be positive semi-definite, but its diagonal entry Q[{i}, {i}] = "
                         f"{Q[i, i]:.3g} is negative")
    u = _vector(upper, "upper", n, scalar=True)
    if not np.all(u > 0):
        raise ValueError(f"upper must be > 0 (the box of the dual), got {float(u.min())!r} at "
                         f"index {int(np.argmin(u))}")
    check_positive(tol, "tol")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, Integral) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    Q = np.ascontiguousarray(Q)
    c = np.ones(n) if linear is None else check_array(linear, "linear", ndim=1)
    if c.shape != (n,):
        raise ValueError(f"linear must have shape ({n},), got {c.shape}")
    a = np.zeros(n) if alpha0 is None else np.clip(_vector(alpha0, "alpha0", n), 0.0, u)
    return _box_qp(Q, u, c, a, tol, max_rounds)


def _box_qp(Q: NDArray[np.float64], u: NDArray[np.float64], c: NDArray[np.float64],
            a: NDArray[np.float64], tol: float, max_rounds: int) -> tuple[NDArray[np.float64], int]:
    """:func:`solve_box_qp` on checked arguments: ``Q`` a symmetric C-ordered float64 matrix,
    ``u``, ``c`` and the start ``a`` (in the box) float vectors of its size. LowRankSMM's
    half-steps call it directly: their ``Q`` is symmetric by construction, and the public
    checks (a tiled symmetry test) would cost more than a product with ``Q``."""
    n = Q.shape[0]
    g = Q @ a - c
    scale = max(1.0, float(np.diag(Q).max()))
    eps = 1e-3 * scale * max(1.0, float(np.abs(c).max()))
    total = 0

    def done(x: NDArray[np.float64]) -> tuple[bool, NDArray[np.float64]]:
        # The gradient is updated incrementally by the descent and the finish, which
        # accumulates round-off: the stopping test recomputes it. The gap cannot be
        # resolved below the round-off of Q x, about eps |x|'|Q||x| (large when the
        # products cancel), so that floor is allowed too.
        gx = Q @ x - c
        floor = 100 * np.finfo(float).eps * float(np.abs(x) @ (np.abs(Q) @ np.abs(x)) + np.abs(x) @ np.abs(c))
        return _duality_gap(x, gx, u) <= tol * max(1.0, abs(_primal(x, gx, u, c))) + floor, gx

    for _ in range(max_rounds):
        total += int(_greedy_cd(Q, u, c, a, g, eps, tol, max(200 * n, 100_000)))
        ok, g = done(a)
        if ok:
            return a, total
        b, gb = a.copy(), g.copy()
        if _active_set(Q, u, c, b, gb, tol, 4 * n):
            ok, gb = done(b)
            if ok:
                return b, total
        gb = Q @ b - c
        if _primal(b, gb, u, c) <= _primal(a, g, u, c):
            a, g = b, gb
        eps *= 1e-2
    gap = _duality_gap(a, g, u)
    warnings.warn(
        f"solve_box_qp stopped after {max_rounds} rounds ({total} coordinate updates) with a "
        f"duality gap of {gap:.2e} > {tol:.1e} * max(1, |P|)",
        ConvergenceWarning,
        stacklevel=3,
    )
    return a, total


def _primal(a: NDArray[np.float64], g: NDArray[np.float64], u: NDArray[np.float64],
            c: NDArray[np.float64]) -> float:
    """SVM primal objective of ``a`` (gradient ``g = Q a - c``): 1/2 a'Qa + sum u max(0, -g)."""
    return float(0.5 * a @ (g + c) + u @ np.maximum(0.0, -g))


def _duality_gap(a: NDArray[np.float64], g: NDArray[np.float64], u: NDArray[np.float64]) -> float:
    """Primal minus dual objective, ``sum a g + u max(0, -g)``: >= 0, zero exactly at the optimum."""
    return float(a @ g + u @ np.maximum(0.0, -g))


def _face_direction(QFF: NDArray[np.float64], gF: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
    """Direction on the free set: Newton ``-Q_FF^+ g_F`` (flag True) or, where ``g_F`` has a part in the
    null space of a singular ``Q_FF``, minus that part, along which the objective falls linearly (False)."""
    try:
        L = np.linalg.cholesky(QFF)
        if np.diag(L).min() ** 2 > 1e-12 * np.diag(QFF).max():
            return -np.linalg.solve(L.T, np.linalg.solve(L, gF)), True
    except np.linalg.LinAlgError:
        pass
    evals, evecs = np.linalg.eigh(QFF)
    keep = evals > gF.size * 1e-13 * max(float(evals[-1]), 0.0)
    null = evecs[:, ~keep]
    g_null = null @ (null.T @ gF)
    # For a PSD Q the null part of g_F is that of -c alone (Q_FF v = 0 implies Q v = 0):
    # not round-off, however small, so it is judged relative to g_F.
    if np.linalg.norm(g_null) > 0.1 * np.linalg.norm(gF):
        return -g_null, False
    V = evecs[:, keep]
    return -V @ ((V.T @ gF) / evals[keep]), True


def _active_set(Q: NDArray[np.float64], u: NDArray[np.float64], c: NDArray[np.float64],
                a: NDArray[np.float64], g: NDArray[np.float64], tol: float, max_iter: int) -> bool:
    r"""Finish the box QP from a nearly optimal ``a`` by a primal active-set method, in place.

    The variables strictly inside the box form the free set ``F``; the others
    stay at their bounds. Each iteration moves ``a_F`` towards the minimiser
    of the quadratic on that face (the Newton direction; along a null
    direction of a singular :math:`Q_{FF}`, the linear descent), as far as
    the box allows: a variable that reaches its bound leaves ``F``. At the
    face's minimiser (after a full Newton step, or when the step is below
    round-off) a bound variable whose gradient points into the box (a
    negative multiplier) joins ``F``. Each step lowers the objective, so the
    method ends in finitely many steps, with the exact optimum (KKT
    conditions to round-off). Returns whether the duality gap reached
    ``tol * max(1, |P|)``.
    """
    at_minimiser = False
    released = -1
    for _ in range(max_iter):
        P = _primal(a, g, u, c)
        if _duality_gap(a, g, u) <= tol * max(1.0, abs(P)):
            return True
        free = (a > 0.0) & (a < u)
        if not free.any() or at_minimiser:
            # Release the bound variable violating its KKT sign most.
            viol = np.where(a <= 0.0, -g, np.where(a >= u, g, 0.0))
            if released >= 0:
                viol[released] = 0.0          # released last time without moving: not again
            i = int(np.argmax(viol))
            if viol[i] <= 0.0:
                return True
            free[i] = True
            released = i
        else:
            released = -1
        F = np.flatnonzero(free)
        d, newton = _face_direction(Q[np.ix_(F, F)], g[F])
        if float(g[F] @ d) >= 0.0:       # not a descent direction (round-off): projected gradient
            d = -g[F]
            newton = False
        aF = a[F]
        d = np.where(((aF <= 0.0) & (d < 0.0)) | ((aF >= u[F]) & (d > 0.0)), 0.0, d)
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(d > 0.0, (u[F] - aF) / d, np.where(d < 0.0, -aF / d, np.inf))
        t_max = float(room.min()) if room.size else np.inf
        t = t_max if not newton else min(1.0, t_max)
        if not np.isfinite(t):
            return False
        new = aF + t * d
        if t == t_max:
            hit = room <= t_max
            new[hit] = np.where(d[hit] > 0.0, u[F][hit], 0.0)
        new = np.clip(new, 0.0, u[F])
        step = new - aF
        # At the face's minimiser after a full Newton step, or when the step is lost in round-off.
        at_minimiser = (newton and t == 1.0 and t < t_max) or not step.any()
        if step.any():
            a[F] = new
            g += Q[:, F] @ step
    return _duality_gap(a, g, u) <= tol * max(1.0, abs(_primal(a, g, u, c)))


def _greedy_cd_python(Q, u, c, a, g, pg_tol, gap_tol, max_updates):  # pragma: no cover - numba
    """Greedy coordinate descent on the box QP, in place on ``a`` and ``g``.

    Stops when the largest projected gradient is below ``pg_tol`` (the face is
    then found well enough to polish) or the duality gap below
    ``gap_tol * max(1, P)``; returns the number of updates.
    """
    n = a.shape[0]
    for it in range(max_updates):
        best = 0.0
        worst = 0.0
        ib = -1
        db = 0.0
        quad = 0.0
        hinge = 0.0
        gap = 0.0
        for i in range(n):
            gi = g[i]
            ai = a[i]
            loss = u[i] * max(0.0, -gi)
            quad += ai * (gi + c[i])
            hinge += loss
            gap += ai * gi + loss
            if ai <= 0.0:
                pg = min(gi, 0.0)
            elif ai >= u[i]:
                pg = max(gi, 0.0)
            else:
                pg = gi
            if pg == 0.0:
                continue
            if abs(pg) > worst:
                worst = abs(pg)
            qii = Q[i, i]
            if qii > 0.0:
                new = min(max(ai - gi / qii, 0.0), u[i])
            else:
                new = u[i] if gi < 0.0 else 0.0
            d = new - ai
            gain = -(gi * d + 0.5 * qii * d * d)
            if gain > best:
                best = gain
                ib = i
                db = d
        if worst <= pg_tol or ib < 0 or gap <= gap_tol * max(1.0, abs(0.5 * quad + hinge)):
            return it
        a[ib] += db
        row = Q[ib]
        for j in range(n):
            g[j] += db * row[j]
    return max_updates


_GREEDY_CD: Any = None


def _greedy_cd(*args: Any) -> int:
    """:func:`_greedy_cd_python` compiled by numba on first use (so ``import mvkm`` stays fast)."""
    global _GREEDY_CD
    if _GREEDY_CD is None:
        from numba import njit

        _GREEDY_CD = njit(cache=True, nogil=True)(_greedy_cd_python)
    return _GREEDY_CD(*args)


def _solve_svm(K: NDArray[np.float64], y: NDArray[np.float64], C: float, fit_intercept: bool,
               alpha0: NDArray[np.float64] | None) -> tuple[NDArray[np.float64], float]:
    """The SVM dual with kernel ``K`` and labels ``y`` in {-1, +1}: ``(y * alpha, b)``."""
    if not fit_intercept:
        Q = K * np.outer(y, y)
        start = np.zeros(len(y)) if alpha0 is None else np.clip(alpha0, 0.0, C)
        alpha, _ = _box_qp(Q, np.full(len(y), C), np.ones(len(y)), start, _QP_TOL, 20)
        return y * alpha, 0.0
    return _svm_with_intercept(K, y, C, alpha0)


def _svm_with_intercept(K: NDArray[np.float64], y: NDArray[np.float64], C: float,
                        alpha0: NDArray[np.float64] | None) -> tuple[NDArray[np.float64], float]:
    r"""The SVM with intercept, exactly: a root search on ``b`` over box QPs.

    For a fixed intercept ``b`` the SVM is one without intercept and with
    margins :math:`1 - y_i b`; its dual is the box QP with :math:`c_i = 1 - y_i b`,
    solved exactly by :func:`solve_box_qp`, and its optimal value :math:`V(b)`
    is convex in ``b`` with slope :math:`-s(b)`, :math:`s(b) = \sum_i y_i \alpha_i(b)`
    (non-increasing). The optimal intercept is where :math:`s` changes sign
    (the equality constraint :math:`y^\top\alpha = 0` of the usual dual), found
    by bracketing and the Illinois variant of regula falsi: exact in one or
    two steps where :math:`\alpha(b)` is linear, bisection-like at a kink.
    libsvm (``SVC(kernel="precomputed")`` at a loose tolerance) gives the start.
    """
    from sklearn.svm import SVC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning_sklearn)
        svc = SVC(kernel="precomputed", C=C, tol=1e-3, max_iter=max(10**6, 100 * len(y))).fit(K, y)
    Q = K * np.outer(y, y)
    box = np.full(len(y), C)
    warm = np.zeros(len(y)) if alpha0 is None else np.clip(alpha0, 0.0, C)
    warm[svc.support_] = np.abs(svc.dual_coef_[0])

    def at(b: float) -> tuple[float, NDArray[np.float64]]:
        nonlocal warm
        alpha, _ = _box_qp(Q, box, 1.0 - y * b, np.clip(warm, 0.0, C), _QP_TOL, 20)
        warm = alpha
        return float(y @ alpha), alpha

    b0 = float(svc.intercept_[0])
    s0, a0 = at(b0)
    tiny = 1e-13 * max(1.0, float(np.abs(a0).sum()))
    if abs(s0) <= tiny:
        return y * a0, b0
    # Bracket the sign change: s is non-increasing in b.
    width = max(1e-3, 1e-2 * abs(b0))
    lo, s_lo, a_lo, hi, s_hi, a_hi = (b0, s0, a0, None, None, None) if s0 > 0 else (None, None, None, b0, s0, a0)
    for _ in range(200):
        if lo is not None and hi is not None:
            break
        trial = b0 + width if hi is None else b0 - width
        st, at_ = at(trial)
        if st > 0:
            lo, s_lo, a_lo = trial, st, at_
        else:
            hi, s_hi, a_hi = trial, st, at_
        width *= 4.0
    if lo is None or hi is None:
        raise RuntimeError("no sign change of y'alpha(b) found for the intercept")
    side = 0
    for _ in range(200):
        if hi - lo <= 4 * np.finfo(float).eps * max(1.0, abs(lo), abs(hi)):
            break
        b = hi - s_hi * (hi - lo) / (s_hi - s_lo)          # regula falsi on the bracket
        if not lo < b < hi:
            b = 0.5 * (lo + hi)
        sb, ab = at(b)
        if abs(sb) <= tiny:
            return y * ab, float(b)
        if sb > 0:
            lo, s_lo, a_lo = b, sb, ab
            if side == 1:
                s_hi *= 0.5                                 # Illinois: halve the stale end
            side = 1
        else:
            hi, s_hi, a_hi = b, sb, ab
            if side == -1:
                s_lo *= 0.5
            side = -1
    # The bracket has closed on the kink b* of V (to round-off, or after 200 steps): alpha(lo) and
    # alpha(hi) are optimal duals on either side of it, with y'alpha > 0 and < 0. The dual of the SVM
    # with intercept at b* is the combination of the two with y'alpha = 0 (the optimal set of the box
    # QP at b* is convex and holds both, up to the bracket's width); its classifier is that of either
    # end (the primal solution w(b) is continuous in b), and it satisfies the KKT condition
    # sum_i y_i alpha_i = 0 that the ends do not.
    t_lo, t_hi = float(y @ a_lo), float(y @ a_hi)        # the true slopes (Illinois halved the stored ones)
    theta = t_hi / (t_hi - t_lo)                           # in (0, 1): theta t_lo + (1 - theta) t_hi = 0
    a = theta * a_lo + (1.0 - theta) * a_hi
    b = theta * lo + (1.0 - theta) * hi
    return y * a, float(b)


def _vector(value: Any, name: str, n: int, *, scalar: bool = False) -> NDArray[np.float64]:
    """A finite float vector of length ``n`` (a scalar broadcast to it if ``scalar``); a clear
    ``ValueError``/``TypeError`` naming ``name`` otherwise."""
    if scalar and isinstance(value, Real) and not isinstance(value, bool):
        value = np.full(n, float(value))
    v = check_array(value, name, ndim=1)
    if v.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},){' or be a number' if scalar else ''}, "
                         f"got shape {v.shape}")
    return v


def svm_objective(K: ArrayLike, y: ArrayLike, dual_coef: ArrayLike, C: float,
                  intercept: float = 0.0) -> float:
    r"""The SVM primal objective of the classifier :math:`f = K\beta + b`.

    :math:`\tfrac12 \beta^\top K\beta + C\sum_i \max(0, 1 - y_i f_i)`: by the
    representer theorem :math:`\beta^\top K \beta` is :math:`\|w\|^2` of the
    classifier's weight, so this is the primal objective of any
    :math:`\beta`, optimal or not.

    Parameters
    ----------
    K : array_like of shape (n, n)
    y : array_like of shape (n,)
        Labels in {-1, +1}.
    dual_coef : array_like of shape (n,)
        :math:`\beta = y \circ \alpha`.
    C : float
    intercept : float, default=0

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``K`` is not a finite square matrix, ``y`` or ``dual_coef`` is not a
        finite vector of its length, ``y`` holds a label other than -1 and +1,
        ``C`` is not finite and > 0, or ``intercept`` is not finite.
    TypeError
        If ``C`` or ``intercept`` is not a real number.
    """
    K = check_array(K, "K")
    n = K.shape[0]
    if K.shape != (n, n):
        raise ValueError(f"K must be square (n, n), got shape {K.shape}")
    y = _vector(y, "y", n)
    labels = np.unique(y)
    if not np.all(np.isin(labels, (-1.0, 1.0))):
        raise ValueError(f"y must hold labels in {{-1, +1}}, got {labels[~np.isin(labels, (-1.0, 1.0))][:5]}")
    beta = _vector(dual_coef, "dual_coef", n)
    C = check_positive(C, "C")
    if isinstance(intercept, bool) or not isinstance(intercept, Real):
        raise TypeError(f"intercept must be a real number, got {intercept!r}")
    if not np.isfinite(intercept):
        raise ValueError(f"intercept must be finite, got {intercept!r}")
    return _svm_objective(K, y, beta, C, float(intercept))


def _svm_objective(K: NDArray[np.float64], y: NDArray[np.float64], beta: NDArray[np.float64],
                   C: float, intercept: float) -> float:
    """:func:`svm_objective` on checked arguments (LowRankSMM's half-steps)."""
    f = K @ beta + intercept
    return float(0.5 * beta @ (K @ beta) + C * np.maximum(0.0, 1.0 - y * f).sum())


# --------------------------------------------------------------------------
# Kernel contractions (never the n x n x d x d block kernel)
# --------------------------------------------------------------------------

def _is_linear(kernel: Kernel) -> bool:
    return type(kernel) is Linear


def _tiles(n_rows: int, cost_per_row: int):
    b = max(1, _TILE_ENTRIES // max(1, cost_per_row))
    for start in range(0, n_rows, b):
        yield slice(start, min(start + b, n_rows))


def _projected(kernel: Kernel, A: NDArray[np.float64], B: NDArray[np.float64] | None,
               W: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""``G[i, j] = sum_pq W[p, q] k(A[i, p], B[j, q])`` for stacks of rows ``A`` (na, d, m), ``B`` (nb, d, m)."""
    sym = B is None
    B = A if B is None else B
    na, d, m = A.shape
    nb = B.shape[0]
    if _is_linear(kernel):
        # k(a, b) = a.b: G[i, j] = <A_i, W B_j>_F.
        WB = np.einsum("pq,jqm->jpm", W, B)
        return A.reshape(na, d * m) @ WB.reshape(nb, d * m).T
    G = np.empty((na, nb))
    Bf = B.reshape(nb * d, m)
    for I in _tiles(na, nb * d * d):
        # For the training Gram only the tiles right of the diagonal are computed.
        J = slice(I.start, nb) if sym else slice(0, nb)
        T = kernel(A[I].reshape(-1, m), Bf[J.start * d: J.stop * d])
        T = T.reshape(I.stop - I.start, d, J.stop - J.start, d)
        # sum_pq W[p, q] T[i, p, j, q], one batched matrix-vector product per p
        # (much faster than a 4-index einsum, which transposes the tile).
        block = T[:, 0] @ W[0]
        for p in range(1, d):
            block += T[:, p] @ W[p]
        G[I, J] = block
        if sym:
            G[J, I] = block.T
    return G


def _contract(kernel: Kernel, S: NDArray[np.float64], beta: NDArray[np.float64],
              U: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""``V[i, k, q] = sum_l beta_l sum_p U[p, k] k(S[l, p], S[i, q])``: the rows of :math:`C^\top\Phi(X_i)`."""
    n, d, m = S.shape
    sv = np.flatnonzero(beta)
    if sv.size == 0:
        return np.zeros((n, U.shape[1], d))
    if _is_linear(kernel):
        T = np.einsum("l,pk,lpm->km", beta[sv], U, S[sv])
        return np.einsum("km,iqm->ikq", T, S)
    V = np.empty((n, U.shape[1], d))
    Ssv = S[sv].reshape(-1, m)
    for I in _tiles(n, max(1, sv.size) * d * d):
        T = kernel(Ssv, S[I].reshape(-1, m)).reshape(sv.size, d, I.stop - I.start, d)
        Tb = (beta[sv] @ T.reshape(sv.size, -1)).reshape(d, I.stop - I.start, d)
        V[I] = np.einsum("pk,piq->ikq", U, Tb, optimize=True)
    return V


def _check_finite_gram(K: NDArray[np.float64]) -> None:
    """A half-step's Gram matrix must be finite: a kernel value that overflows float64 (data of
    a scale like 1e300 with a linear kernel) is a clear error naming ``X``, not the QP's NaN."""
    if not np.all(np.isfinite(K)):
        raise ValueError("X: the projected Gram matrix of the row and column kernels is not finite "
                         "(a kernel value overflows float64 at the scale of X); rescale X")


class _Side:
    """One side (rows or columns) of the training matrices: its kernel, the stack ``S`` (n, d, m),
    and, when it fits in :data:`_CACHE_ENTRIES`, the block kernel ``T[l, i, p, q] = k(S[l, p], S[i, q])``.

    With the block kernel cached, a C-step's projected Gram matrix is one product of the
    (n^2, d^2) matrix with vec(W) and a P-step's contraction one product with ``beta``;
    without it both are recomputed tile by tile from the data (memory O(n^2 + tile)).
    """

    def __init__(self, kernel: Kernel, S: NDArray[np.float64]) -> None:
        self.kernel, self.S = kernel, S
        n, d, m = S.shape
        self.T: NDArray[np.float64] | None = None
        if not _is_linear(kernel) and n * n * d * d <= _CACHE_ENTRIES:
            M = kernel(S.reshape(n * d, m)).reshape(n, d, n, d)
            self.T = np.ascontiguousarray(M.transpose(0, 2, 1, 3))

    def gram(self, U: NDArray[np.float64]) -> NDArray[np.float64]:
        """The projected Gram matrix with ``W = U U^T``."""
        W = U @ U.T
        if self.T is None:
            return _projected(self.kernel, self.S, None, W)
        n, d = self.S.shape[:2]
        G = (self.T.reshape(n * n, d * d) @ W.ravel()).reshape(n, n)
        return 0.5 * (G + G.T)

    def contract(self, beta: NDArray[np.float64], U: NDArray[np.float64]) -> NDArray[np.float64]:
        r"""``V[i, k, q] = sum_l beta_l sum_p U[p, k] k(S[l, p], S[i, q])``: :math:`C^\top\Phi(X_i)`."""
        if self.T is None:
            return _contract(self.kernel, self.S, beta, U)
        n, d = self.S.shape[:2]
        A = (beta @ self.T.reshape(n, n * d * d)).reshape(n, d, d)      # [i, p, q]
        return np.einsum("pk,ipq->ikq", U, A, optimize=True)


def projected_gram(X: ArrayLike, Y: ArrayLike | None = None, *, kernel: Kernel | None = None,
                   W: ArrayLike | None = None) -> NDArray[np.float64]:
    r"""The projected row kernel :math:`G_{ij} = \operatorname{tr}(W K(i, j)) = \sum_{p,q} W_{pq}\, k([X_i]_{p:}, [Y_j]_{q:})`.

    For the column kernel pass the transposed matrices (``X.transpose(0, 2, 1)``).
    Computed tile by tile: the :math:`(n d)^2` kernel between all rows is
    never stored.

    Parameters
    ----------
    X : array_like of shape (n, d1, d2)
    Y : array_like of shape (m, d1, d2), optional
        Defaults to ``X`` (the result is then symmetric).
    kernel : Kernel, optional
        A :mod:`mvkm.kernels` kernel on rows (vectors of length ``d2``);
        linear by default.
    W : array_like of shape (d1, d1), optional
        Symmetric; the identity by default.

    Returns
    -------
    G : ndarray of shape (n, m)
    """
    Xa = check_array(X, "X", ndim=3)
    Ya = None if Y is None else check_array(Y, "Y", ndim=3)
    if Ya is not None and Ya.shape[1:] != Xa.shape[1:]:
        raise ValueError(f"X and Y must hold matrices of one shape, got {Xa.shape[1:]} and {Ya.shape[1:]}")
    kernel = _check_kernel(kernel, "kernel")
    d = Xa.shape[1]
    Wa = np.eye(d) if W is None else check_array(W, "W")
    if Wa.shape != (d, d):
        raise ValueError(f"W must have shape ({d}, {d}), got {Wa.shape}")
    if not np.allclose(Wa, Wa.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(Wa).max()))):
        raise ValueError("W must be symmetric")
    return _projected(kernel, Xa, Ya, Wa)


def symmetric_embedding(X: ArrayLike) -> NDArray[np.float64]:
    r"""The symmetric trick: :math:`\tilde X = \begin{pmatrix} 0 & X \\ X^\top & 0\end{pmatrix}`.

    Parameters
    ----------
    X : array_like of shape (n, d1, d2) or (d1, d2)

    Returns
    -------
    ndarray of shape (n, d1 + d2, d1 + d2) (or (d1 + d2, d1 + d2))
        The top-left zero block is :math:`d_1 \times d_1`, the bottom-right
        :math:`d_2 \times d_2`.
    """
    Xa = np.asarray(X, dtype=float)
    single = Xa.ndim == 2
    Xa = check_array(Xa[None] if single else Xa, "X", ndim=3)
    n, d1, d2 = Xa.shape
    out = np.zeros((n, d1 + d2, d1 + d2))
    out[:, :d1, d1:] = Xa
    out[:, d1:, :d1] = Xa.transpose(0, 2, 1)
    return out[0] if single else out


def _check_kernel(kernel: Any, name: str) -> Kernel:
    if kernel is None:
        return Linear()
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{name} must be an mvkm.kernels Kernel (e.g. mvkm.RBF(1.0)) or None, "
                        f"got {type(kernel).__name__}")
    return kernel


def _orthonormal(P: NDArray[np.float64]) -> NDArray[np.float64]:
    """An orthonormal basis of the range of ``P`` (columns below round-off dropped)."""
    Uf, s, _ = np.linalg.svd(P, full_matrices=False)
    keep = s > max(P.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0)
    return Uf[:, keep]


# --------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------

#: Alternations over which LowRankSMM's objective must fall beyond round-off not to stagnate.
_STAGNATION_WINDOW = 10
#: The duality-gap tolerance of the half-steps' box QPs (solve_box_qp's default), relative to
#: max(1, objective): the accuracy of each objective value the alternation compares.
_QP_TOL = 1e-12


def _stagnation_floor(obj: float, n: int) -> float:
    """The round-off of a difference of two objective values: two QP solutions' accuracy
    (``_QP_TOL * max(1, |P|)`` each) and the float64 round-off of the sums (``n eps |P|``)."""
    return 2.0 * _QP_TOL * max(1.0, abs(obj)) + n * np.finfo(float).eps * abs(obj)


#: Alternations over which LowRankSMM measures a crawl (``_smm_crawling``).
_CRAWL_WINDOW = 100
#: The mean relative decrease per alternation below which a tol under it is not waited for.
_CRAWL_PACE = float(np.sqrt(np.finfo(float).eps))


def _smm_crawling(objective: list[float], tol: float) -> bool:
    """Whether ``tol`` asks for less than :data:`_CRAWL_PACE` and the C-step objectives fell
    by less than that pace, relative and per alternation, over the last ``_CRAWL_WINDOW``."""
    w = _CRAWL_WINDOW
    if tol >= _CRAWL_PACE or len(objective) < 2 * w + 1:
        return False
    scale = max(abs(objective[-1]), np.finfo(float).tiny)
    return (objective[-1 - 2 * w] - objective[-1]) / w < _CRAWL_PACE * scale


def _smm_stagnated(objective: list[float], n: int) -> bool:
    """Whether the C-step objectives fell by no more than their round-off over the last
    ``_STAGNATION_WINDOW`` alternations (the list holds C, P, C, ... half-step values)."""
    w = _STAGNATION_WINDOW
    if len(objective) < 2 * w + 1:
        return False
    return objective[-1 - 2 * w] - objective[-1] <= _stagnation_floor(objective[-1], n)


class LowRankSMM(ClassifierMixin, BaseEstimator):
    r"""Low-rank support matrix machine with row and column kernels.

    A binary classifier of matrices (images, channel x time recordings,
    spectrograms) after :cite:`lee2020algorithmic`, with the margin constraint of its
    problem (2) written the right way round (:math:`y_i f(X_i) \ge 1 - \xi_i`).
    See the module docstring for the model and Part IV of the book for the
    derivations.

    Parameters
    ----------
    rank : int, default=1
        The rank ``r`` of the row and of the column projector,
        ``1 <= r <= min(d1, d2)``.
    row_kernel, col_kernel : Kernel or None, default=None
        Kernels of :mod:`mvkm.kernels` on the rows (vectors of length ``d2``)
        and on the columns (length ``d1``); ``None`` is the linear kernel.
    C : float, default=1.0
        The hinge-loss weight (the box of the duals), ``> 0``.
    fit_intercept : bool, default=False
        Add an intercept ``b`` (the source has none). Each half-step's dual
        then has the equality constraint :math:`\sum_i y_i\alpha_i = 0`.
    max_iter : int, default=300
        The most alternations (a P-step followed by a C-step). In the book's
        chapter on the primal problem (``book/smm/primal.ipynb``), fits from
        the SVD start need 10 to 39 alternations at ``tol=1e-6`` and fits from
        random starts up to 258. A fit that reaches ``max_iter`` warns.
    tol : float, default=1e-6
        Stop when an alternation lowers the objective by less than
        ``tol`` times its value. A ``tol`` below what the objective can
        resolve (``tol=0``; each half-step's QP is solved to a duality gap of
        ``1e-12 * max(1, P)``, so two objective values differ by round-off up
        to about ``2e-12 * max(1, P)``) is not waited for: the fit stops, with
        a ``ConvergenceWarning`` that says so, once 10 alternations have
        lowered the objective by no more than that round-off in all
        (stagnation; it can come first only for ``tol`` below about
        ``2e-13``). A ``tol`` below :math:`\sqrt{\epsilon} \approx 1.5\times
        10^{-8}` is not waited for either when the alternation crawls: once
        the last 100 alternations have lowered the objective by less than
        :math:`\sqrt{\epsilon}` of its value each on average, the fit stops
        with a ``ConvergenceWarning`` giving the pace (on random data the
        alternation can go on lowering the objective by ``1e-9`` of its value
        per alternation for tens of thousands of alternations, 2e-5 in all).
    init : {"svd", "random"} or tuple of two arrays, default="svd"
        ``"svd"``: solve the full-rank problem (:math:`W = I`, one SVM) and
        start from the top ``rank`` right singular vectors of its row and
        column coefficients; ``"random"``: random orthonormal factors (the
        problem is not jointly convex and such starts can get stuck); a pair
        ``(P_r, P_c)`` of arrays of shapes ``(d1, rank)`` and ``(d2, rank)``:
        start from the projectors onto their column spaces (e.g. to resume the
        alternation from a point found by another method).
    random_state : int, Generator or None, default=None
        Seed of ``init="random"``.
    verbose : bool, default=False
        Print the objective after every alternation.
    copy_X : bool, default=True
        Keep a copy of the training data, so that changing the caller's
        array after ``fit`` cannot change the model. ``False`` keeps a
        reference (saves the memory of one copy; the caller must then leave
        the array unchanged). Memory-mapped and dask arrays are never copied.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The labels; ``classes_[1]`` is the positive class.
    dual_coef_ : ndarray of shape (n,)
        :math:`\gamma = y \circ \alpha` of the final C-step's dual (``y`` in
        {-1, +1}); with ``fit_intercept`` it satisfies :math:`\sum_i\gamma_i = 0`.
    intercept_ : float
        ``b`` (0 without ``fit_intercept``).
    row_projection_ : ndarray of shape (d1, d1)
        :math:`W_r = P_r(P_r^\top P_r)^{-1}P_r^\top`, of rank ``rank`` or less: a
        P-step drops a direction the data cannot reach (e.g. an image column
        that is blank in every training matrix).
    col_projection_ : ndarray of shape (d2, d2)
        :math:`W_c`, likewise.
    objective_ : ndarray
        The primal objective after every half-step (C, P, C, ..., C),
        non-increasing.
    n_iter_ : int
        The number of alternations (P-steps) taken.
    support_ : ndarray of int
        Indices of the training matrices with :math:`\alpha_i > 0`.
    shape_ : tuple of int
        ``(d1, d2)``.
    n_features_in_ : int
        ``d1 * d2``, the number of entries of one matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm import LowRankSMM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (300, 6, 5))
    >>> u, v = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 5)
    >>> y = np.sign(np.einsum("p,ipq,q->i", u, X, v))    # a rank-1 truth
    >>> model = LowRankSMM(rank=1, C=1.0, max_iter=100)
    >>> model = model.fit(X[:100], y[:100])
    >>> round(model.score(X[100:], y[100:]), 2)
    0.93
    """

    def __init__(self, rank: int = 1, row_kernel: Kernel | None = None,
                 col_kernel: Kernel | None = None, C: float = 1.0, fit_intercept: bool = False,
                 max_iter: int = 300, tol: float = 1e-6, init: str = "svd",
                 random_state: Any = None, verbose: bool = False,
                 copy_X: bool = True) -> None:
        self.rank = rank
        self.row_kernel = row_kernel
        self.col_kernel = col_kernel
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.random_state = random_state
        self.verbose = verbose
        self.copy_X = copy_X

    def __sklearn_tags__(self):  # noqa: D105 - scikit-learn's estimator tags
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False          # a binary classifier
        return tags

    # -- validation ---------------------------------------------------------
    def _check_params(self, d1: int, d2: int) -> None:
        check_bool(self.copy_X, "copy_X")
        if isinstance(self.rank, bool) or not isinstance(self.rank, Integral):
            raise ValueError(f"rank must be an integer, got {self.rank!r}")
        if not 1 <= self.rank <= min(d1, d2):
            raise ValueError(f"rank must be between 1 and min(d1, d2) = {min(d1, d2)} "
                             f"for {d1} x {d2} matrices, got {self.rank}")
        if isinstance(self.C, bool) or not isinstance(self.C, Real) or not np.isfinite(self.C) \
                or self.C <= 0:
            raise ValueError(f"C must be a finite number > 0, got {self.C!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, Integral) \
                or self.max_iter < 0:
            raise ValueError(f"max_iter must be an integer >= 0, got {self.max_iter!r}")
        check_positive(self.tol, "tol", strict=False)
        if isinstance(self.init, tuple):
            if len(self.init) != 2:
                raise ValueError(f"init as a tuple must hold two arrays (P_r, P_c), got {len(self.init)} items")
            for name, P0, d in (("init[0]", self.init[0], d1), ("init[1]", self.init[1], d2)):
                arr = check_array(P0, name)
                if arr.shape != (d, self.rank):
                    raise ValueError(f"{name} must have shape ({d}, {self.rank}) (rank={self.rank}), "
                                     f"got {arr.shape}")
                if _orthonormal(arr).shape[1] != self.rank:
                    raise ValueError(f"{name} must have full column rank {self.rank}")
        elif not isinstance(self.init, str) or self.init not in ("svd", "random"):
            raise ValueError(f"init must be 'svd', 'random' or a pair of arrays (P_r, P_c), got {self.init!r}")
        check_bool(self.fit_intercept, "fit_intercept")

    @staticmethod
    def _check_X(X: ArrayLike, name: str = "X") -> NDArray[np.float64]:
        arr = as_array(X, name) if not hasattr(X, "toarray") else X
        if hasattr(arr, "toarray"):
            raise TypeError(f"{name}: sparse input is not supported (a stack of matrices is a dense "
                            f"3-D array), got {type(X).__name__}")
        if hasattr(arr, "ndim") and arr.ndim != 3:
            raise ValueError(f"{name} must be a 3-D array of matrices (n, d1, d2), "
                             f"got shape {getattr(arr, 'shape', None)}. Reshape your data: "
                             "X.reshape(n, d1, d2) for n flattened matrices")
        return check_array(X, name, ndim=3)

    # -- the two half-steps ---------------------------------------------------
    def _c_step(self, sides, Ur, Uc, y, alpha0):
        with np.errstate(over="ignore", invalid="ignore"):
            K = sides[0].gram(Ur) + sides[1].gram(Uc)
        _check_finite_gram(K)
        beta, b = _solve_svm(K, y, float(self.C), self.fit_intercept, alpha0)
        return beta, b, _svm_objective(K, y, beta, float(self.C), b)

    def _p_step(self, sides, Ur, Uc, beta, y):
        parts = []
        feats = []
        for side, U in zip(sides, (Ur, Uc)):
            V = side.contract(beta, U)                             # C^T Phi(X_i), (n, r, d)
            CtC = np.einsum("i,ikq,qj->kj", beta, V, U)            # C^T C
            CtC = 0.5 * (CtC + CtC.T)
            evals, evecs = np.linalg.eigh(CtC)
            keep = evals > CtC.shape[0] * np.finfo(float).eps * max(float(evals.max()), 0.0)
            inv_half = (evecs[:, keep] / np.sqrt(evals[keep])) @ evecs[:, keep].T
            inv = (evecs[:, keep] / evals[keep]) @ evecs[:, keep].T
            feats.append(np.einsum("kj,ijq->ikq", inv_half, V).reshape(len(y), -1))
            parts.append((V, inv))
        Z = np.hstack(feats)
        with np.errstate(over="ignore", invalid="ignore"):
            K = Z @ Z.T
        _check_finite_gram(K)
        beta_p, b = _solve_svm(K, y, float(self.C), self.fit_intercept, np.abs(beta))
        obj = _svm_objective(K, y, beta_p, float(self.C), b)
        new = []
        for (V, inv), U in zip(parts, (Ur, Uc)):
            P = np.einsum("i,ikq->qk", beta_p, V) @ inv             # P = (sum_i beta_i V_i)^T (C^T C)^{-1}
            Un = _orthonormal(P)
            new.append(Un if Un.shape[1] else U)
        return new[0], new[1], obj, beta_p

    # -- public API -----------------------------------------------------------
    @atomic_fit
    def fit(self, X: ArrayLike, y: ArrayLike) -> "LowRankSMM":
        """Fit the classifier by alternating C- and P-steps.

        Parameters
        ----------
        X : array_like of shape (n, d1, d2)
            The training matrices.
        y : array_like of shape (n,)
            Two distinct labels of any type.

        Returns
        -------
        self
        """
        reset_fitted(self)
        Xa = self._check_X(X)
        n, d1, d2 = Xa.shape
        if y is None:
            raise ValueError("LowRankSMM requires y to be passed, but the target y is None")
        y_arr = np.asarray(y)
        if y_arr.ndim == 2 and y_arr.shape[1] == 1:
            warnings.warn("A column-vector y was passed when a 1d array was expected; it is raveled "
                          "(shape (n,) expected)", DataConversionWarning, stacklevel=2)
            y_arr = y_arr.ravel()
        if y_arr.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y_arr.shape}")
        if y_arr.shape[0] != n:
            raise ValueError(f"X and y must have the same number of samples, got {n} and {y_arr.shape[0]}")
        if y_arr.dtype.kind == "f" and not np.all(np.isfinite(y_arr)):
            raise ValueError("y contains NaN or infinite values")
        if y_arr.dtype == object and any(v is None for v in y_arr):
            raise ValueError("y contains None; expected two distinct labels, one per matrix")
        kind = type_of_target(y_arr, input_name="y")
        if kind in ("continuous", "continuous-multioutput"):
            raise ValueError(f"Unknown label type: {kind}; y must hold two class labels, "
                             "not a continuous target")
        classes = np.unique(y_arr)
        if classes.size > 2:
            raise ValueError(f"Only binary classification is supported: y must hold exactly two classes, "
                             f"got {classes.size} ({classes[:5]!r}; the type of the target is {kind})")
        if classes.size != 2:
            raise ValueError(f"y must hold exactly two classes, got {classes.size} class: {classes!r}")
        self._check_params(d1, d2)
        kr = _check_kernel(self.row_kernel, "row_kernel")
        kc = _check_kernel(self.col_kernel, "col_kernel")
        ys = np.where(y_arr == classes[1], 1.0, -1.0)
        Xr, Xc = Xa, np.ascontiguousarray(Xa.transpose(0, 2, 1))
        r = int(self.rank)

        sides = (_Side(kr, Xr), _Side(kc, Xc))
        if isinstance(self.init, tuple):
            Ur, Uc = (_orthonormal(check_array(P0, "init")) for P0 in self.init)
            beta0 = None
        elif self.init == "svd":
            beta0, _, _ = self._c_step(sides, np.eye(d1), np.eye(d2), ys, None)
            Ur, Uc = (self._svd_start(side, beta0, r) for side in sides)
        else:
            rng = check_random_state(self.random_state)
            Ur = np.linalg.qr(rng.standard_normal((d1, r)))[0]
            Uc = np.linalg.qr(rng.standard_normal((d2, r)))[0]
            beta0 = None

        alpha0 = None if beta0 is None else np.abs(beta0)
        beta, b, obj = self._c_step(sides, Ur, Uc, ys, alpha0)
        objective = [obj]
        n_iter = 0
        converged = self.max_iter == 0
        stagnated = crawling = False
        for n_iter in range(1, int(self.max_iter) + 1):
            Ur, Uc, obj_p, beta_p = self._p_step(sides, Ur, Uc, beta, ys)
            objective.append(obj_p)
            beta, b, obj = self._c_step(sides, Ur, Uc, ys, np.abs(beta_p))
            objective.append(obj)
            if self.verbose:
                print(f"LowRankSMM: alternation {n_iter}: objective {obj:.6g}")
            change = objective[-3] - obj
            # Each half-step solves its convex problem exactly, so the objective cannot rise beyond
            # the round-off of the QP solutions (about 1e-10 of it): a larger rise is a failure of a
            # solver, never convergence.
            if change < -1e-8 * max(abs(objective[-3]), np.finfo(float).tiny):
                warnings.warn(
                    f"LowRankSMM: alternation {n_iter} raised the objective from {objective[-3]:.10g} "
                    f"to {obj:.10g} (beyond round-off): a half-step was not solved exactly; stopping",
                    ConvergenceWarning, stacklevel=2)
                break
            if change <= float(self.tol) * max(abs(obj), np.finfo(float).tiny):
                converged = True
                break
            if _smm_stagnated(objective, len(ys)):
                stagnated = True
                break
            if _smm_crawling(objective, float(self.tol)):
                crawling = True
                break
        else:
            n_iter = int(self.max_iter)
        if stagnated:
            w, floor = _STAGNATION_WINDOW, _stagnation_floor(objective[-1], len(ys))
            warnings.warn(
                f"LowRankSMM stopped after {n_iter} alternations: it has stagnated, the objective "
                f"falling by {objective[-1 - 2 * w] - objective[-1]:.3g} over the last {w} "
                f"alternations, within its round-off ({floor:.3g}, the accuracy of the half-steps' "
                f"QP solutions); tol={self.tol!r} asks for a decrease that float64 cannot show: "
                f"raise tol to about {floor / max(abs(objective[-1]), np.finfo(float).tiny):.1g} "
                "to silence this", ConvergenceWarning, stacklevel=2)
        elif crawling:
            w = _CRAWL_WINDOW
            pace = (objective[-1 - 2 * w] - objective[-1]) / w / abs(objective[-1])
            warnings.warn(
                f"LowRankSMM stopped after {n_iter} alternations: it is crawling, the objective "
                f"falling by {pace:.2g} of its value per alternation over the last {w} (below "
                f"sqrt(eps) = {_CRAWL_PACE:.2g}); tol={self.tol!r} asks for a decrease that this "
                f"alternation reaches only after many more alternations at this pace; the fit is "
                f"returned as it stands: raise tol to {_CRAWL_PACE:.2g} or more to silence this",
                ConvergenceWarning, stacklevel=2)
        elif not converged and objective[-3] - objective[-1] >= 0:
            warnings.warn(
                f"LowRankSMM did not converge in max_iter={self.max_iter} alternations "
                f"(last decrease {objective[-3] - objective[-1]:.3g}); raise max_iter",
                ConvergenceWarning, stacklevel=2)

        self.classes_ = classes
        self.dual_coef_ = beta
        self.intercept_ = float(b)
        self.row_projection_ = Ur @ Ur.T
        self.col_projection_ = Uc @ Uc.T
        self.objective_ = np.asarray(objective)
        self.n_iter_ = n_iter
        self.support_ = np.flatnonzero(beta)
        self.shape_ = (d1, d2)
        self.n_features_in_ = d1 * d2
        self.X_fit_ = own_copy(Xa, X, self.copy_X)
        return self

    @staticmethod
    def _svd_start(side: _Side, beta: NDArray[np.float64], r: int) -> NDArray[np.float64]:
        """Top-r eigenvectors of A = B^T B for the full-rank coefficient B = sum_i beta_i Phi(X_i)."""
        d = side.S.shape[1]
        V = side.contract(beta, np.eye(d))              # M_i, (n, d, d)
        A = np.einsum("i,ikq->kq", beta, V)
        A = 0.5 * (A + A.T)
        evals, evecs = np.linalg.eigh(A)
        return evecs[:, ::-1][:, :r].copy()

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Signed distance-like score, positive for ``classes_[1]``.

        Parameters
        ----------
        X : array_like of shape (m, d1, d2)

        Returns
        -------
        ndarray of shape (m,)
        """
        check_is_fitted(self, "dual_coef_")
        Xa = self._check_X(X)
        if Xa.shape[1:] != self.shape_:
            raise ValueError(f"X has {Xa.shape[1] * Xa.shape[2]} features, but {type(self).__name__} is "
                             f"expecting {self.shape_[0] * self.shape_[1]} features as input: X holds "
                             f"{Xa.shape[1]} x {Xa.shape[2]} matrices but the model was "
                             f"fitted on {self.shape_[0]} x {self.shape_[1]} matrices")
        sv = self.support_
        Xs = self.X_fit_[sv]
        kr = _check_kernel(self.row_kernel, "row_kernel")
        kc = _check_kernel(self.col_kernel, "col_kernel")
        G = (_projected(kr, Xa, Xs, self.row_projection_)
             + _projected(kc, np.ascontiguousarray(Xa.transpose(0, 2, 1)),
                          np.ascontiguousarray(Xs.transpose(0, 2, 1)), self.col_projection_))
        return G @ self.dual_coef_[sv] + self.intercept_

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Predicted labels (values of ``classes_``).

        Parameters
        ----------
        X : array_like of shape (m, d1, d2)

        Returns
        -------
        ndarray of shape (m,)
        """
        check_is_fitted(self, "dual_coef_")
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Accuracy on ``(X, y)``.

        Parameters
        ----------
        X : array_like of shape (m, d1, d2)
        y : array_like of shape (m,)
        sample_weight : array_like of shape (m,), optional

        Returns
        -------
        float
        """
        return super().score(X, y, sample_weight)
