"""Numerical edges of the kernels and of the non-Lanczos eigensolvers (issue 21, items 2, 4, 5, 6, 8).

Each case checks an answer against an independent computation (the same
kernel on data moved back to the origin, LAPACK's ``eigh``, a direct sum), or
that a clear error is raised, within a time bound: a hang is a failure.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _timebound import time_bound

from mvkm.kernels import RBF, Kernel, Laplacian, Linear, Polynomial, center_gram, squared_distances, upper_gram


# ---------------------------------------------------------------------------
# item 2: kernels far from the origin

OFFSETS = [1e4, 1e6, 1e8]
RADIAL = [RBF(1.0), RBF(0.3), Laplacian(1.0)]


def _offset_data(offset: float, n: int = 300, m: int = 7, d: int = 3):
    """Points ``offset + z`` and the same points moved back exactly (``x - offset`` is exact)."""
    rng = np.random.default_rng(int(np.log10(offset)))
    X = offset + rng.normal(size=(n, d))
    Xt = offset + rng.normal(size=(m, d))
    return X, Xt, X - offset, Xt - offset


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("kernel", RADIAL, ids=repr)
def test_radial_kernels_do_not_depend_on_an_offset(kernel, offset):
    # Distances do not depend on the origin: every Gram path on data at 1e8 must
    # agree with the same path on the data moved back to 0 (before the fix: 0.91
    # for RBF(1) at 1e8, 4e-4 at 1e6, 5e-8 at 1e4).
    X, Xt, X0, Xt0 = _offset_data(offset)
    with time_bound(10):
        assert np.abs(kernel(X) - kernel(X0)).max() < 1e-12
        iu = np.triu_indices(len(X))
        assert np.abs(upper_gram(kernel, X)[iu] - upper_gram(kernel, X0)[iu]).max() < 1e-12
        assert np.abs(kernel(Xt, X) - kernel(Xt0, X0)).max() < 1e-12
        assert np.abs(kernel(X, Xt) - kernel(X0, Xt0)).max() < 1e-12
        D, D0 = squared_distances(Xt, X), squared_distances(Xt0, X0)
        assert np.abs(D - D0).max() < 1e-12 * D0.max()


@pytest.mark.parametrize("outlier", [1e10, 1e200])
@pytest.mark.parametrize("kernel", RADIAL, ids=repr)
def test_an_outlier_does_not_cost_the_other_points_their_digits(kernel, outlier):
    # the shift is a median (robust), and the overflow rescaling divides by as
    # little as it can: a point at 1e200 once made every other distance underflow
    # to 0 (kernel value 1), and a shift to a midpoint or mean would cancel them
    X = np.random.default_rng(5).normal(size=(40, 3)) + 1e6
    F = np.vstack([X, np.full((1, 3), outlier)])
    ref = kernel(X - 1e6)
    assert np.abs(kernel(F)[:40, :40] - ref).max() < 1e-12
    assert np.abs(kernel(X, F)[:, :40] - ref).max() < 1e-12
    assert np.abs(kernel(F, X)[:40] - ref).max() < 1e-12


def test_the_issue_example():
    rng = np.random.default_rng(0)
    X = 1e8 + rng.normal(size=(5, 2))
    assert np.abs(RBF(1.0)(X) - RBF(1.0)(X - 1e8)).max() < 1e-12


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("kernel", RADIAL, ids=repr)
def test_kernel_operator_and_its_test_rows_at_an_offset(kernel, offset):
    # mvkm.matfree.KernelOperator (the matrix-free route) against the dense
    # Gram matrix of the data at the origin.
    from mvkm.matfree import KernelOperator

    X, Xt, X0, Xt0 = _offset_data(offset, n=200)
    A = np.random.default_rng(1).normal(size=(len(X), 3))
    with time_bound(10):
        op = KernelOperator(X, kernel)
        assert np.abs(op @ A - center_gram(kernel(X0)) @ A).max() < 1e-11
        raw = KernelOperator(X, kernel, center=False).test_matmat(Xt, A)
        assert np.abs(raw - kernel(Xt0, X0) @ A).max() < 1e-11


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("kernel", [Linear(), Polynomial(2, 1.0), Polynomial(3, 0.0)], ids=repr)
def test_origin_dependent_kernels_are_accurate_relative_to_their_size(kernel, offset):
    # x^T y and (x^T y + c)^p depend on the origin by definition: an offset
    # changes the kernel, so "accurate" means a relative error of a few eps
    # against an exact evaluation (80-bit long double here), entry by entry,
    # relative to (|x| |y| + c)^p. A guard: these passed before the fix too.
    X, Xt, _, _ = _offset_data(offset, n=60)
    p = getattr(kernel, "degree", 1)
    c = getattr(kernel, "c", 0.0)
    ld = np.longdouble
    for A, B in ((X, X), (Xt, X)):
        exact = (A.astype(ld) @ B.astype(ld).T + ld(c)) ** p
        size = (np.linalg.norm(A, axis=1)[:, None] * np.linalg.norm(B, axis=1)[None, :] + c) ** p
        K = kernel(A) if A is B else kernel(A, B)
        assert np.max(np.abs((K - exact).astype(float)) / size) < 1e-13


# ---------------------------------------------------------------------------
# item 4: the Stiefel solver reports only the convergence it reached


def _spd(n: int, seed: int) -> np.ndarray:
    M = np.random.default_rng(seed).normal(size=(n, n))
    return M @ M.T / n


@pytest.mark.parametrize("scale", [1e-200, 1e-150, 1e-100, 1e-50, 1e50, 1e150])
@pytest.mark.parametrize("method", ["cayley-bb", "cayley-adam"])
def test_maximize_trace_is_scale_invariant(scale, method):
    # before: B * 1e-200 "converged" at iteration 0 (the squared norms underflow
    # to 0), and 1e+-50 did not converge (step sizes clamped at 1e+-20)
    from mvkm.stiefel import maximize_trace

    B = _spd(30, 0)
    lam = np.linalg.eigvalsh(B)[::-1][:3]
    kw = {} if method == "cayley-bb" else {"tol": 1e-5, "max_iter": 3000}
    with time_bound(20), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        A, hist = maximize_trace(B * scale, 3, method=method, random_state=0,
                                 return_history=True, **kw)
    assert hist["converged"] and hist["n_iter"] > 0
    rtol = 1e-12 if method == "cayley-bb" else 1e-6
    np.testing.assert_allclose(np.diag(hist["Gamma"]) / scale, lam, rtol=rtol)
    np.testing.assert_allclose(np.diag(A.T @ (B @ A)), lam, rtol=rtol)


@pytest.mark.parametrize("tol", [0.0, -1e-3, 1.0, 2.0, np.inf, np.nan])
def test_maximize_trace_rejects_a_tolerance_outside_0_1(tol):
    from mvkm.stiefel import maximize_trace

    with pytest.raises(ValueError, match="tol"):
        maximize_trace(np.diag([3.0, 2.0, 1.0]), 1, tol=tol)


@pytest.mark.parametrize("start, s", [(3, 1), (2, 1), (1, 1), ([2, 3], 2), ([1, 3], 2)])
def test_maximize_trace_does_not_stop_at_a_saddle(start, s):
    # an exact eigenvector start has zero gradient; before: "converged" at trace
    # 0.5 of an optimum 3
    from mvkm.stiefel import maximize_trace

    lam = np.array([3.0, 2.0, 1.0, 0.5])
    A0 = np.eye(4)[:, np.atleast_1d(start)]
    with time_bound(10):
        A, hist = maximize_trace(np.diag(lam), s, A0=A0, return_history=True)
    assert hist["converged"]
    np.testing.assert_allclose(np.trace(hist["Gamma"]), lam[:s].sum(), rtol=1e-12)


def _spectrum_cases(n: int = 60):
    flat = np.linspace(1.0, 0.0, n - 3)
    return {
        "repeated top (x3), s=2": (np.r_[5.0, 5.0, 5.0, flat], 2),
        "repeated across s": (np.r_[5.0, 4.0, 4.0, flat], 2),
        "rank 1 below s=3": (np.r_[3.0, np.zeros(n - 1)], 3),
        "round-off eigenvalues": (np.r_[1.0, np.full(n - 1, 1e-17)], 3),
        "flat": (np.ones(n), 3),
        "s = n - 1": (np.linspace(2.0, 1.0, n), n - 1),
        "indefinite": (np.linspace(2.0, -3.0, n), 3),
    }


@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
@pytest.mark.parametrize("case", list(_spectrum_cases()))
def test_maximize_trace_on_hard_spectra(case, scale):
    # the optimum is the sum of the s largest eigenvalues (LAPACK), whatever the
    # multiplicities, the rank or the scale
    from mvkm.stiefel import maximize_trace

    lam, s = _spectrum_cases()[case]
    n = lam.size
    Q, _ = np.linalg.qr(np.random.default_rng(7).normal(size=(n, n)))
    B = (Q * lam) @ Q.T
    B = 0.5 * (B + B.T)
    with time_bound(10), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        A, hist = maximize_trace(B * scale, s, random_state=0, return_history=True)
    assert hist["converged"]
    best = np.linalg.eigvalsh(B)[::-1][:s].sum()
    assert abs(np.trace(A.T @ B @ A) - best) < 1e-12 * n * np.abs(lam).max()
    assert abs(np.trace(hist["Gamma"]) / scale - best) < 1e-12 * n * np.abs(lam).max()


def test_stiefel_rkm_at_1e_minus_100_matches_the_eigensolver():
    from mvkm.rkm import MultiViewRKM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    Y = X[:, :2] @ rng.normal(size=(2, 3)) + 0.3 * rng.normal(size=(60, 3))
    with time_bound(20):
        ref = MultiViewRKM(2).fit([X, Y]).eigenvalues_
        model = MultiViewRKM(2, solver="stiefel", random_state=0).fit([X * 1e-100, Y * 1e-100])
    assert model.stiefel_history_["converged"] and model.stiefel_history_["n_iter"] > 0
    np.testing.assert_allclose(model.eigenvalues_, ref * 1e-200, rtol=1e-10)


# ---------------------------------------------------------------------------
# item 5: MultiViewKPLS checks that its kernels are positive semi-definite


class _Tanh(Kernel):
    """The sigmoid 'kernel' tanh(2 x^T y - 1): not positive semi-definite."""

    def _gram(self, X, Y):
        return np.tanh(2.0 * X @ (X if Y is None else Y).T - 1.0)


class _Table(Kernel):
    """A fixed Gram matrix indexed by the (integer) first column: Q diag(mu) Q^T."""

    def __init__(self, M):
        self.M = M

    def _gram(self, X, Y):
        Y = X if Y is None else Y
        return self.M[np.ix_(X[:, 0].astype(int), Y[:, 0].astype(int))]

    def __repr__(self):
        return "_Table()"


def _kpls_views(N: int = 800):
    rng = np.random.default_rng(0)
    X1 = rng.normal(size=(N, 3))
    return [X1, X1[:, :2] + 0.5 * rng.normal(size=(N, 2))]


@pytest.mark.parametrize("solver", ["auto", "lanczos", "dense"])
def test_kpls_names_the_view_with_an_indefinite_kernel(solver):
    # before: Lanczos (and "auto" at V N = 1600) returned wrong eigenvalues without a
    # word; "dense" raised "A must be positive semi-definite" (an internal name)
    from mvkm.kpls import MultiViewKPLS

    with time_bound(20), pytest.raises(ValueError, match=r"view 0 \(_Tanh\(\)\) is not positive semi-definite"):
        MultiViewKPLS(2, kernels=[_Tanh(), RBF(1.0)], solver=solver, random_state=0).fit(_kpls_views())


@pytest.mark.parametrize("solver", ["lanczos", "dense"])
def test_kpls_finds_a_negative_eigenvalue_behind_a_positive_diagonal(solver):
    # diagonal ~ 1 and small off-diagonal entries, one eigenvalue -1: only the
    # spectrum (all of it, or the probe's Ritz values) shows it
    from mvkm.kpls import MultiViewKPLS

    N = 800
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(N, N)))
    mu = rng.uniform(0.5, 1.5, N)
    mu[0] = -1.0
    M = (Q * mu) @ Q.T
    views = [rng.normal(size=(N, 2)), np.arange(N, dtype=float)[:, None]]
    with time_bound(20), pytest.raises(ValueError, match=r"view 1 \(_Table\(\)\) is not positive semi-definite"):
        MultiViewKPLS(2, kernels=[RBF(1.0), _Table(M)], solver=solver, center=False,
                      random_state=0).fit(views)


def _omega_reference(Xs, kernel, k):
    """Top eigenvalues of Omega = E D from LAPACK's general eigensolver (real spectrum)."""
    Ks = [center_gram(kernel(X)) for X in Xs]
    V, N = len(Ks), Ks[0].shape[0]
    D = np.zeros((V * N, V * N))
    for v, K in enumerate(Ks):
        D[v * N:(v + 1) * N, v * N:(v + 1) * N] = K
    E = np.kron(np.ones((V, V)) - np.eye(V), np.eye(N))
    return np.sort(np.linalg.eigvals(E @ D).real)[::-1][:k]


@pytest.mark.parametrize("solver", ["lanczos", "dense"])
@pytest.mark.parametrize("scale", [1e-75, 1.0, 1e75])
@pytest.mark.parametrize("kernel", [Linear(), RBF(1.0), RBF(1e3)], ids=repr)
def test_kpls_routes_on_hard_spectra(kernel, scale, solver):
    # Linear on 3 + 3 columns: Omega has rank 6 (3 positive eigenvalues, k = 3: rank
    # at the limit); kernels at 1e+-150 (data at 1e+-75); a wide RBF, whose centred
    # kernel has eigenvalues ~1e-4 over round-off ~1e-13 of the uncentred one.
    # Right eigenvalues or a clear error, no warning. Before: Lanczos said "Omega is
    # zero" at 1e-75 and warned and fell back to the dense route on the rank-6 problem.
    from mvkm.kpls import MultiViewKPLS

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    Y = X[:, :2] @ rng.normal(size=(2, 3)) + 0.3 * rng.normal(size=(120, 3))
    Xs = [X * scale, Y * scale]
    model = MultiViewKPLS(3, kernels=kernel, solver=solver, random_state=0)
    with time_bound(20), warnings.catch_warnings():
        warnings.simplefilter("error")
        if isinstance(kernel, RBF) and scale == 1e-75:
            # the kernel is the all-ones matrix to round-off: the centred one is zero
            with pytest.raises(ValueError, match="zero|positive eigenvalues"):
                model.fit(Xs)
            return
        lam = model.fit(Xs).eigenvalues_
    ref = _omega_reference(Xs, kernel, 3)
    # eigenvalues far below the uncentred kernel (RBF(1e3): 1e-6 of it) carry its round-off
    raw = max(np.abs(kernel(X)).max() for X in Xs)
    np.testing.assert_allclose(lam, ref, rtol=1e-9, atol=1e-12 * raw)


def test_kpls_more_components_than_positive_eigenvalues_is_a_clear_error():
    from mvkm.kpls import MultiViewKPLS

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    Y = X[:, :2] @ rng.normal(size=(2, 3)) + 0.3 * rng.normal(size=(120, 3))
    for solver in ("lanczos", "dense"):
        with time_bound(20), pytest.raises(ValueError, match="larger than the number of positive"):
            MultiViewKPLS(4, kernels=Linear(), solver=solver, random_state=0).fit([X, Y])


# ---------------------------------------------------------------------------
# item 6 (KernelPPCA part): finite input, finite score or a clear error


@pytest.mark.parametrize("formulation", ["dual", "primal"])
def test_kernel_ppca_score_samples_far_away(formulation):
    # before: [nan] for a point at 1e200 (inf - inf in the residual)
    from mvkm.ppca import KernelPPCA

    X = np.random.default_rng(0).normal(size=(50, 3))
    model = KernelPPCA(2, formulation=formulation).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="not representable in float64"):
            model.score_samples(np.full((1, 3), 1e200))
        with pytest.raises(ValueError, match=r"row 1 first"):
            model.score_samples(np.vstack([X[:1], np.full((1, 3), 1e300)]))
        near = model.score_samples(np.full((1, 3), 1e150))     # about -1.7e300: finite
    assert np.isfinite(near).all() and near[0] < -1e299
    other = KernelPPCA(2, formulation="dual" if formulation == "primal" else "primal").fit(X)
    np.testing.assert_allclose(near, other.score_samples(np.full((1, 3), 1e150)), rtol=1e-10)


def test_kernel_ppca_rbf_score_of_a_far_point_is_finite():
    from mvkm.ppca import KernelPPCA

    X = np.random.default_rng(0).normal(size=(50, 3))
    model = KernelPPCA(2, kernel=RBF(1.0)).fit(X)
    far = model.score_samples(np.array([[1e200, 1e200, 1e200], [1e3, 0.0, 0.0]]))
    assert np.isfinite(far).all() and far[0] == pytest.approx(far[1], rel=1e-12)


# ---------------------------------------------------------------------------
# item 8: matfree_top_eigh stops at the attainable floor, and shows progress


def _lapack_top(X, kernel, s):
    return np.linalg.eigvalsh(center_gram(kernel(X)))[::-1][:s]


def test_matfree_stops_when_the_residuals_stagnate_at_round_off():
    # RBF(3000) on unit-scale data: theta_1 ~ 2e-4, the products' round-off
    # n eps ~ 2e-13 is above tol * theta_1 = 2e-14. Before: 100 iterations
    # (200 products; 11 s at n = 2000, hours at n = 1e5), then a max_iter warning.
    from mvkm.linalg import ConvergenceWarning
    from mvkm.matfree import matfree_top_eigh

    X = np.random.default_rng(0).normal(size=(1000, 5))
    with time_bound(15), pytest.warns(ConvergenceWarning, match="stagnated"):
        lam, V, info = matfree_top_eigh(X, RBF(3000.0), 5, return_info=True)
    assert info["n_products"] <= 20
    ref = _lapack_top(X, RBF(3000.0), 5)
    assert np.abs(lam - ref).max() < 1e-9 * ref[0]
    Kc = center_gram(RBF(3000.0)(X))
    assert np.linalg.norm(Kc @ V - V * lam, axis=0).max() < 1e-8 * ref[0]


_CIRCLE = np.c_[np.cos(np.arange(400) * 2 * np.pi / 400), np.sin(np.arange(400) * 2 * np.pi / 400)]


@pytest.mark.parametrize("name, X, kernel, s", [
    ("repeated (circulant: pairs)", _CIRCLE, RBF(0.5), 5),
    ("rank 2 below s = 4", np.random.default_rng(1).normal(size=(600, 2)), Linear(), 4),
    ("kernel at 1e-150", np.random.default_rng(2).normal(size=(600, 3)) * 1e-75, Linear(), 2),
    ("kernel at 1e+150", np.random.default_rng(3).normal(size=(600, 3)) * 1e75, Linear(), 2),
    ("offset 1e8", np.random.default_rng(4).normal(size=(600, 3)) + 1e8, RBF(1.0), 4),
])
def test_matfree_on_hard_spectra(name, X, kernel, s):
    # a catalogue case: the answer against LAPACK (eigenvalues that are zero to
    # round-off reported as such), within a time bound
    from mvkm.matfree import matfree_top_eigh

    with time_bound(15), warnings.catch_warnings():
        warnings.simplefilter("error")
        lam, V = matfree_top_eigh(X, kernel, s)
    ref = _lapack_top(X, kernel, s)
    assert np.abs(lam - ref).max() < 1e-10 * abs(ref[0])
    np.testing.assert_allclose(V.T @ V, np.eye(s), atol=1e-10)


def test_matfree_shows_progress_after_a_few_seconds(monkeypatch, capsys):
    # progress=None (the default) asks for a bar that appears after 5 s, as the
    # streamed primal does; MVKM_PROGRESS=0 (the test suite) turns it off
    import mvkm.matfree as matfree

    bars = []
    original = matfree.progress_bar

    def spy(total, desc, progress, **kwargs):
        bar = original(total, desc, progress, **kwargs)
        bars.append((progress, bar))
        return bar

    monkeypatch.setattr(matfree, "progress_bar", spy)
    monkeypatch.setenv("MVKM_PROGRESS", "1")
    X = np.random.default_rng(0).normal(size=(300, 3))
    with time_bound(15):
        matfree.matfree_top_eigh(X, RBF(1.0), 2)
    assert bars and bars[0][0] is None and bars[0][1] is not None and bars[0][1].delay == 5.0
    # issue 33, item 11: a solve shorter than the delay leaves nothing on the screen (its
    # residuals in the postfix drew the bar at once, and tqdm's close left that line)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("MVKM_PROGRESS", "0")
    bars.clear()
    matfree.matfree_top_eigh(X, RBF(1.0), 2)
    assert bars[0][1] is None


@pytest.mark.parametrize("sigma", [8.0, 10.0, 12.0])
def test_kpls_lanczos_on_a_clustered_spectrum_matches_the_dense_route(sigma):
    # kernels near the identity (points 50 apart): the top eigenvalues of Omega
    # cluster near V - 1 = 2. Before, the Lanczos basis took in a vector whose
    # D-norm was below its round-off and, once it could not grow, returned
    # spurious Ritz values: [674.8, 6.1, 2.71, 2.69] for RBF(12) instead of
    # [2.73, 2.70, 2.67, 2.65]. Now: the dense route's answer (with a warning).
    from mvkm.kpls import MultiViewKPLS

    rng = np.random.default_rng(3)
    views = [rng.standard_normal((300, 4)) * 50 for _ in range(3)]
    with time_bound(20), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lam = MultiViewKPLS(4, kernels=RBF(sigma), solver="lanczos", random_state=0).fit(views).eigenvalues_
    dense = MultiViewKPLS(4, kernels=RBF(sigma), solver="dense").fit(views).eigenvalues_
    np.testing.assert_allclose(lam, dense, rtol=1e-10)


@pytest.mark.parametrize("spread", [1e2, 1e4, 1e6, 1e7])
def test_rbf_is_exact_on_data_spread_far_wider_than_sigma(spread):
    """Issue 35, item 2: with data spread 1e6 sigma, RBF(X, Y) gave
    k(x, x) = 0.9990 for a point in both arguments, and relative errors of
    1e-4-1e-3 for near pairs (the expansion's error in the exponent)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3)) * spread
    near = X[:50] + 0.5 * rng.standard_normal((50, 3))
    Y = np.vstack([X[:50], near])
    K = RBF(1.0)(X, Y)
    diff = X[:, None, :] - Y[None, :, :]
    ref = np.exp(-0.5 * np.einsum("ijk,ijk->ij", diff, diff))
    # the promise: a relative error of at most 1e-12 (_RBF_EXPONENT_TOL, the
    # exponent's error) except for values below 1e-17 of k(x, x) = 1
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=1e-17)
    G = RBF(1.0)(X)
    assert np.array_equal(G, G.T) and np.all(np.diag(G) == 1.0)
