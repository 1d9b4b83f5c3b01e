"""A catalogue of hard spectra for every eigensolver route, each case against LAPACK.

Every route that returns the top eigenpairs of a symmetric matrix is run on
every spectrum of :data:`CASES` and compared with ``scipy.linalg.eigh`` (all
eigenvalues, LAPACK ``syevd``) of the matrix that route solves (``K`` or its
centred ``M_c K M_c``), within a time bound: a route that hangs fails (a
``SIGALRM`` timer, :func:`time_bound`), a route that gives a wrong answer
fails, and a route that cannot solve a case must raise a clear error.

To add a route (``matfree_top_eigh``, the KPLS routes, ``maximize_trace``):
append a :class:`Route` to :data:`ROUTES` with a function ``solve(K, s)``
returning ``(eigenvalues, eigenvectors)`` of ``K`` (or of the centred ``K`` with
``centred=True``), the largest ``n_components`` it accepts relative to ``n``,
and whether it assumes a positive semi-definite ``K``. To add a spectrum,
append a :class:`Case` to :data:`CASES`.

What is asserted, with ``lam`` the LAPACK eigenvalues (descending) of the
matrix solved, ``M = max|K_ij|`` and ``floor = 50 n eps M`` (the round-off of a few
products, which is what a Krylov method can resolve):

* eigenvalues: ``|w_i - lam_i| <= 1e-8 |lam_1| + floor`` (the solvers' default
  ``tol = 1e-10`` on residuals gives eigenvalue errors far below that);
* eigenpairs: ``||K v_i - w_i v_i|| <= 1e-8 |lam_1| + floor`` and ``V^T V = I``
  to 1e-8, so a returned pair is a true eigenpair even inside a cluster or a
  repeated eigenvalue, where individual eigenvectors are not unique;
* eigenvalues that are zero to round-off (rank below ``s``) come back as such
  (within ``floor`` of zero): one behaviour on every route.

Whole file: about 20 s on one core.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import pytest
import scipy.linalg

from _timebound import time_bound

from mvkm.kernels import Kernel, center_gram
from mvkm.linalg import ConvergenceWarning, kernel_top_eigh, top_eigh

#: Seconds a route may take on one case (the slowest pass takes under 2 s on one core).
TIME_BOUND = 20.0
#: n of the "large" cases: above 1000, so that method="auto" and kernel_top_eigh
#: take the Lanczos route (n <= 1000 goes to LAPACK).
N_LARGE = 1100


# ---------------------------------------------------------------------------
# spectra
# ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _orthogonal(n: int) -> np.ndarray:
    Q, R = np.linalg.qr(np.random.default_rng(n).standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def _with_spectrum(top, n: int, bulk: tuple[float, float] = (0.0, 1.0), seed: int = 0) -> np.ndarray:
    """``Q diag(lam) Q^T``: ``top`` above ``n - len(top)`` values uniform in ``bulk``."""
    rng = np.random.default_rng(seed)
    lam = np.concatenate([np.asarray(top, float), rng.uniform(*bulk, n - len(top))])
    Q = _orthogonal(n)
    K = (Q * lam) @ Q.T
    return 0.5 * (K + K.T)


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], np.ndarray]      # the symmetric matrix K
    s: Callable[[int], int]             # n_components for a route accepting s <= s_max
    psd: bool = True


def _low_rank(n: int, rank: int) -> np.ndarray:
    Phi = np.random.default_rng(3).standard_normal((n, rank))
    K = Phi @ Phi.T
    return 0.5 * (K + K.T)


CASES = [
    Case("separated", lambda: _with_spectrum(10.0 - np.arange(10), N_LARGE), lambda m: 5),
    Case("multiplicity 2", lambda: _with_spectrum([10, 10, 9, 8, 7, 6, 5, 4, 3, 2], N_LARGE),
         lambda m: 3),
    Case("multiplicity 3", lambda: _with_spectrum([10, 10, 10, 9, 8, 7, 6, 5], N_LARGE),
         lambda m: 5),
    Case("multiplicity 4", lambda: _with_spectrum([10, 10, 10, 10, 9, 8, 7, 6], N_LARGE, seed=1),
         lambda m: 5),
    Case("repeated in the middle", lambda: _with_spectrum([10, 9, 9, 8, 7, 6], N_LARGE, seed=2),
         lambda m: 4),
    Case("cluster of 8 within 1e-9", lambda: _with_spectrum(1.0 + 1e-9 * np.arange(8), N_LARGE,
                                                             bulk=(0.0, 0.5)), lambda m: 5),
    Case("flat [1, 1.001]", lambda: _with_spectrum([], 200, bulk=(1.0, 1.001)), lambda m: 3),
    Case("rank 2 below s = 4", lambda: _low_rank(N_LARGE, 2), lambda m: 4),
    Case("rank 2, kron of ones", lambda: np.kron([[2.0, 1.0], [1.0, 2.0]], np.ones((550, 550))),
         lambda m: 4),
    Case("eigenvalues at round-off", lambda: _with_spectrum([1.0, 0.5, 1e-13, 1e-14, 3e-15],
                                                            N_LARGE, bulk=(0.0, 1e-16)),
         lambda m: 5),
    Case("K = 0", lambda: np.zeros((N_LARGE, N_LARGE)), lambda m: 3),
    Case("s close to n", lambda: _with_spectrum(np.linspace(2, 1, 40), 60), lambda m: m - 1),
    Case("indefinite", lambda: _with_spectrum([5, 3, 2, -10, -8], N_LARGE, bulk=(-1.0, 1.0)),
         lambda m: 3, psd=False),
    Case("scaled by 1e150", lambda: 1e150 * _with_spectrum([10, 10, 9, 8, 7], N_LARGE),
         lambda m: 3),
    Case("scaled by 1e-150", lambda: 1e-150 * _with_spectrum([10, 10, 9, 8, 7], N_LARGE),
         lambda m: 3),
]


@lru_cache(maxsize=None)
def _matrix(name: str) -> np.ndarray:
    K = next(c for c in CASES if c.name == name).make()
    K.setflags(write=False)
    return K


@lru_cache(maxsize=None)
def _reference(name: str, centred: bool) -> np.ndarray:
    """LAPACK (syevd, all eigenvalues), descending, of K or of its centred form."""
    K = _matrix(name)
    A = center_gram(K) if centred else K
    return scipy.linalg.eigh(A, eigvals_only=True, driver="evd")[::-1]


# ---------------------------------------------------------------------------
# routes
# ---------------------------------------------------------------------------

class _Precomputed(Kernel):
    """A kernel of the integer rows ``[[0], [1], ...]`` that looks up a fixed matrix, so that
    ``kernel_top_eigh`` can be given any spectrum."""

    def __init__(self, K: np.ndarray):
        self.K = K

    def _gram(self, X, Y):
        i = X[:, 0].astype(int)
        j = i if Y is None else Y[:, 0].astype(int)
        return np.array(self.K[np.ix_(i, j)])


def _kernel_route(center: bool):
    def solve(K: np.ndarray, s: int):
        return kernel_top_eigh(np.arange(K.shape[0], dtype=float)[:, None], _Precomputed(K), s,
                               center=center)
    return solve


@dataclass(frozen=True)
class Route:
    name: str
    solve: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
    centred: bool = False           # solves M_c K M_c instead of K
    s_max_offset: int = 1           # accepts n_components <= n - s_max_offset
    psd_only: bool = False          # warns and falls back on an indefinite K
    #: cases outside the route's documented guarantee, where it may stop at max_iter
    #: with a ConvergenceWarning (a clear signal) instead of converging
    may_stop_short: frozenset = frozenset()


def _top(method: str, center: bool = False):
    return lambda K, s: top_eigh(K, s, method, center=center)


#: A flat spectrum gives the Chebyshev filter of "subspace" (which damps [0, theta_b]) no
#: room: it is outside that method's guarantee (see top_eigh's docstring).
_FLAT = frozenset({"flat [1, 1.001]"})

ROUTES = [
    Route("top_eigh dense", _top("dense"), s_max_offset=0),
    Route("top_eigh lanczos", _top("lanczos")),
    Route("top_eigh arpack", _top("arpack")),
    Route("top_eigh subspace", _top("subspace"), psd_only=True, may_stop_short=_FLAT),
    Route("top_eigh auto", _top("auto"), s_max_offset=0),
    Route("top_eigh dense center", _top("dense", True), centred=True, s_max_offset=0),
    Route("top_eigh lanczos center", _top("lanczos", True), centred=True),
    Route("top_eigh arpack center", _top("arpack", True), centred=True),
    Route("top_eigh subspace center", _top("subspace", True), centred=True, psd_only=True,
          may_stop_short=_FLAT),
    Route("top_eigh auto center", _top("auto", True), centred=True, s_max_offset=0),
    Route("kernel_top_eigh", _kernel_route(True), centred=True),
    Route("kernel_top_eigh center=False", _kernel_route(False)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_route_on_hard_spectrum(route: Route, case: Case):
    K = _matrix(case.name)
    n = K.shape[0]
    s = min(case.s(n - route.s_max_offset), n - route.s_max_offset)
    ref = _reference(case.name, route.centred)
    with time_bound(TIME_BOUND), warnings.catch_warnings():
        # the subspace method warns when it meets an indefinite K, and answers by ARPACK
        warnings.simplefilter("error")
        if route.psd_only and not case.psd:
            warnings.filterwarnings("ignore", "top_eigh.*positive semi-definite", RuntimeWarning)
        if case.name in route.may_stop_short:
            try:
                w, V = route.solve(K, s)
            except ConvergenceWarning:
                return
        else:
            w, V = route.solve(K, s)
    A = center_gram(K) if route.centred else K
    big = float(np.max(np.abs(K)))
    floor = 50 * n * np.finfo(float).eps * big
    bound = 1e-8 * abs(ref[0]) + floor
    assert w.shape == (s,) and V.shape == (n, s)
    assert np.all(np.diff(w) <= bound), "eigenvalues not descending"
    np.testing.assert_allclose(w, ref[:s], rtol=0, atol=bound,
                               err_msg=f"{route.name} on {case.name}: eigenvalues")
    residual = np.linalg.norm(A @ V - V * w, axis=0)
    assert np.all(residual <= bound), f"residuals {residual} above {bound:.3g}"
    np.testing.assert_allclose(V.T @ V, np.eye(s), atol=1e-8)


# ---------------------------------------------------------------------------
# the examples of issue 21 (items 1, 7 and 9), each failing on the code before it
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("multiplicity", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_solver_sees_a_repeated_top_eigenvalue(multiplicity, seed):
    """n = 1200 (the Lanczos route of method="auto"): lam = [10] * m + [9, 8, ...] above a
    [0, 1] bulk; a single-vector Krylov method returned 10 once ([10, 9, 8])."""
    n, s = 1200, multiplicity + 1
    top = [10.0] * multiplicity + [9.0, 8.0, 7.0, 6.0, 5.0]
    rng = np.random.default_rng(100 + seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.concatenate([top, rng.uniform(0.0, 1.0, n - len(top))])
    K = (Q * lam) @ Q.T
    K = 0.5 * (K + K.T)
    with time_bound(TIME_BOUND):
        w, V = top_eigh(K, s, random_state=seed)
    np.testing.assert_allclose(w, [10.0] * multiplicity + [9.0], rtol=1e-9)
    np.testing.assert_allclose(K @ V, V * w, atol=1e-8)


def test_lanczos_on_a_rank_two_matrix_stops_with_round_off_eigenvalues():
    """Took about 40 minutes: the stopping test's floor (4e-21) was below the round-off of
    one product. The two zero eigenvalues come back as round-off."""
    K = np.kron([[2.0, 1.0], [1.0, 2.0]], np.ones((750, 750)))
    for method in ("lanczos", "arpack", "subspace", "auto"):
        with time_bound(5.0):
            w, V = top_eigh(K, 4, method)
        np.testing.assert_allclose(w[:2], [2250.0, 750.0], rtol=1e-10)
        assert np.all(np.abs(w[2:]) <= 1500 * np.finfo(float).eps * 2.0 * 10)
        assert np.linalg.norm(K @ V - V * w) <= 1e-9 * 2250.0


@pytest.mark.parametrize("method", ["lanczos", "arpack", "subspace"])
def test_a_tolerance_below_round_off_still_stops(method):
    """tol = 1e-17 asks for residuals below the round-off of one product: the test's floor
    (4 n eps max|K|) stops the iteration instead of max_iter (or hours)."""
    K = _with_spectrum([3.0, 2.0, 1.5], 400, bulk=(0.0, 0.5))
    ref = scipy.linalg.eigh(K, eigvals_only=True)[::-1][:3]
    with time_bound(5.0), warnings.catch_warnings():
        warnings.simplefilter("error")
        w, V = top_eigh(K, 3, method, tol=1e-17)
    np.testing.assert_allclose(w, ref, rtol=1e-12)
    assert np.linalg.norm(K @ V - V * w) <= 1e-12


@pytest.mark.parametrize("kernel, s", [("linear", 4), ("rbf100", 10)])
def test_kernel_top_eigh_below_the_rank_finishes(kernel, s):
    """kernel_top_eigh(X, Linear(), 4) on 1500 points in 2-D (rank 2) ran over a minute,
    RBF(100) with lambda_10 / lambda_1 = 2e-12 as long."""
    from mvkm.kernels import RBF, Linear
    X = np.random.default_rng(0).normal(size=(1500, 2))
    k = Linear() if kernel == "linear" else RBF(100.0)
    with time_bound(5.0):
        w, V = kernel_top_eigh(X, k, s)
    Kc = center_gram(k(X))
    ref = scipy.linalg.eigh(Kc, eigvals_only=True)[::-1][:s]
    floor = 50 * 1500 * np.finfo(float).eps * np.abs(k(X)).max()   # round-off of products with K
    np.testing.assert_allclose(w, ref, rtol=1e-9, atol=floor)
    assert np.all(np.linalg.norm(Kc @ V - V * w, axis=0) <= 1e-9 * ref[0] + floor)


def test_two_view_rkm_on_three_distinct_points_says_rank():
    """1500 rows made of 3 distinct points: ran over 15 minutes on the Lanczos route; the
    dense route (n = 1000) says "exceeds the numerical rank" in 0.3 s, and so must this."""
    from mvkm import MultiViewRKM
    from mvkm.kernels import RBF
    P = np.random.default_rng(0).normal(size=(3, 2))
    for n in (1000, 1500):
        X = P[np.arange(n) % 3]
        with time_bound(10.0), pytest.raises(ValueError, match="exceeds the numerical rank"):
            MultiViewRKM(4, kernels=[RBF(1.0)] * 2).fit([X, X])


def test_dense_path_when_the_subset_driver_returns_no_vectors():
    """LAPACK's syevr on an RBF(0.01) Gram matrix of 200 raw MNIST images (the identity to
    round-off) returned no eigenvectors: "V must be non-empty, got shape (200, 0)"."""
    from mvkm import MultiViewRKM
    from mvkm.datasets import load_mnist01
    from mvkm.kernels import RBF
    X = load_mnist01(as_uint8=True)[0][:200].astype(float)
    with time_bound(TIME_BOUND):
        w, V = kernel_top_eigh(X, RBF(0.01), 2)
        model = MultiViewRKM(2, kernels=[RBF(1.0)]).fit([X])
    Kc = center_gram(RBF(0.01)(X))
    ref = scipy.linalg.eigh(Kc, eigvals_only=True, driver="evd")[::-1][:2]
    np.testing.assert_allclose(w, ref, rtol=1e-12)
    np.testing.assert_allclose(Kc @ V, V * w, atol=1e-12)
    np.testing.assert_allclose(V.T @ V, np.eye(2), atol=1e-12)
    assert model.H_.shape == (200, 2)


@pytest.mark.parametrize("route", ["top_eigh", "kernel_top_eigh"])
def test_long_lanczos_solves_show_progress(monkeypatch, route):
    # issue 21, item 8: a Lanczos solve shows a bar of its products once it has run
    # for 5 s (progress=None, as the streamed fits and matfree_top_eigh do); True at
    # once, False or MVKM_PROGRESS=0 never; the answer is the same
    import mvkm.linalg as linalg
    from mvkm.kernels import RBF

    made = []

    def spy(total, desc, progress, **kwargs):
        bar = original(total, desc, progress, **kwargs)
        made.append((progress, bar))
        return bar

    original = linalg.progress_bar
    monkeypatch.setattr(linalg, "progress_bar", spy)
    X = np.random.default_rng(0).normal(size=(1200, 3))

    def solve(**kw):
        if route == "top_eigh":
            return top_eigh(RBF(1.0)(X), 4, "lanczos", center=True, **kw)
        return kernel_top_eigh(X, RBF(1.0), 4, **kw)

    monkeypatch.setenv("MVKM_PROGRESS", "1")
    lam_auto, _ = solve()
    assert made[-1][0] is None and made[-1][1] is not None and made[-1][1].delay == 5.0
    assert made[-1][1].bar is not None and made[-1][1].bar.n >= 4   # one update per product
    lam_on, _ = solve(progress=True)
    assert made[-1][1] is not None and made[-1][1].n >= 4
    lam_off, _ = solve(progress=False)
    assert made[-1][1] is None
    monkeypatch.setenv("MVKM_PROGRESS", "0")
    solve()
    assert made[-1][1] is None
    np.testing.assert_array_equal(lam_auto, lam_on)
    np.testing.assert_array_equal(lam_auto, lam_off)
    with pytest.raises(TypeError, match="progress must be a bool"):
        solve(progress="no")


@pytest.mark.parametrize("method", ["lanczos", "arpack"])
@pytest.mark.parametrize("fold", [4, 6])
def test_a_repeated_top_eigenvalue_with_the_spectrum_just_below(method, fold):
    """Issue 35, item 5: a 6-fold 10 above 9, 8.97, ... at n = 300 came back
    as [10, 10, 10, 10, 10, 9] (arpack) and [10, 10, 10, 10, 9, 8.97]
    (lanczos): three products of the closing check could not lift the missed
    copy's Ritz value above 9 when the complement's spectrum sits just below
    it. Ten random bases per case."""
    from mvkm import top_eigh

    n = 300
    below = 9.0 - np.arange(n - fold) * 8.0 / (n - fold)
    spectrum = np.concatenate([np.full(fold, 10.0), below])
    for seed in range(10):
        Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
        K = (Q * spectrum) @ Q.T
        K = 0.5 * (K + K.T)
        w, V = top_eigh(K, fold, method=method, random_state=seed)
        # the copies to the solvers' tolerance (1e-10 relative, 1e-8 here)
        np.testing.assert_allclose(w, 10.0, rtol=1e-8)
        np.testing.assert_allclose(V.T @ V, np.eye(fold), atol=1e-8)
