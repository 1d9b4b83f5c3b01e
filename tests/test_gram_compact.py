"""The dense duals on the compact path (mvkm._gram): one triangle per kernel, centred implicitly.

Each estimator's answer is compared with an independent computation on the full,
explicitly centred matrices (center_gram, LAPACK); the tolerances are those of
round-off (1e-12 relative on eigenvalues) and of the Lanczos tolerance 1e-10 on
eigenvectors (angles of order tol lambda_1 / gap).
"""

from __future__ import annotations

import numpy as np
import pytest

from mvkm import RBF, KernelPPCA, Laplacian, MultiViewKPLS, MultiViewRKM, Polynomial
from mvkm._gram import GramTriangle, features_triangle, kernel_triangle, upper_sum
from mvkm.kernels import Linear, center_gram
from mvkm.linalg import flip_signs, top_eigh


def _data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = np.c_[np.sin(X[:, 0]), X[:, 1] * X[:, 2]] + 0.1 * rng.normal(size=(n, 2))
    Z = X[:, :2] + 0.3 * rng.normal(size=(n, 2))
    return X, Y, Z


def _with_nan_below(T: GramTriangle) -> GramTriangle:
    K = T.K.copy()
    K[np.tril_indices(K.shape[0], -1)] = np.nan
    return GramTriangle(K, center=T.center)


def test_triangle_products_trace_and_dense_form():
    X, _, Z = _data(700)
    K = RBF(1.5)(X)
    Kc = center_gram(K)
    T = _with_nan_below(kernel_triangle(RBF(1.5), X))     # the strict lower part is never read
    B = np.random.default_rng(1).normal(size=(700, 3))
    assert np.allclose(T.matmat(B), Kc @ B, rtol=0, atol=1e-12 * np.abs(Kc).max() * 700)
    assert np.allclose(T @ B[:, 0], Kc @ B[:, 0], rtol=0, atol=1e-12 * np.abs(Kc).max() * 700)
    assert np.allclose(T @ B[:, :1], Kc @ B[:, :1], rtol=0, atol=1e-12 * np.abs(Kc).max() * 700)
    B5 = np.random.default_rng(2).normal(size=(700, 5))          # the dtrmm route (4 columns or more)
    assert np.allclose(T @ B5, Kc @ B5, rtol=0, atol=1e-12 * np.abs(Kc).max() * 700)
    assert (T @ B[:, :0]).shape == (700, 0)
    assert np.allclose(T.dense(), Kc, rtol=0, atol=1e-14)
    assert np.isclose(T.trace(), np.trace(Kc), rtol=1e-13)
    assert np.allclose(T.row_means, K.mean(axis=0), rtol=1e-13)
    S = upper_sum([T, _with_nan_below(kernel_triangle(Polynomial(2, 1.0), Z))], [Z - Z.mean(0)],
                  n=700)
    ref = center_gram(K + Polynomial(2, 1.0)(Z)) + (Z - Z.mean(0)) @ (Z - Z.mean(0)).T
    assert np.allclose(S.dense(), ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    F = features_triangle(Z, center=False)
    assert np.allclose(F.dense(), Z @ Z.T, rtol=0, atol=1e-14 * np.abs(Z @ Z.T).max())


@pytest.mark.parametrize("n", [600, 1500])     # LAPACK (n <= 1000) and Lanczos on the triangle
def test_triangle_top_eigh_equals_top_eigh_of_the_centred_matrix(n):
    X, _, _ = _data(n)
    lam, V = _with_nan_below(kernel_triangle(Laplacian(2.0), X)).top_eigh(6)
    lam_ref, V_ref = top_eigh(center_gram(Laplacian(2.0)(X)), 6, "dense")
    assert np.allclose(lam, lam_ref, rtol=1e-12)
    assert np.allclose(V, V_ref, atol=1e-8)


@pytest.mark.parametrize("n", [600, 1500])
def test_rkm_dual_equals_the_full_centred_sum(n):
    X, Y, Z = _data(n)
    kernels = [RBF(1.5), Linear(), Polynomial(2, 1.0)]
    model = MultiViewRKM(4, kernels=kernels).fit([X, Y, Z])
    Yc = Y - Y.mean(axis=0)
    grams = [center_gram(RBF(1.5)(X)), Yc @ Yc.T, center_gram(Polynomial(2, 1.0)(Z))]
    lam, H = top_eigh(sum(grams), 4, "dense")
    assert np.allclose(model.eigenvalues_, lam, rtol=1e-12)
    assert np.allclose(model.H_, H, atol=1e-8)
    for v in (0, 2):                                    # the stored K_v H of the kernel views
        assert np.allclose(model._KH[v], grams[v] @ model.H_, rtol=0,
                           atol=1e-10 * np.abs(grams[v]).max())
        assert np.allclose(model._kernel_means[v], [RBF(1.5)(X), None, Polynomial(2, 1.0)(Z)][v]
                           .mean(axis=0), rtol=1e-13)
    # the one-view fit stores nothing n x n: every attribute is O(n s) or O(n)
    single = MultiViewRKM(3, kernels=[RBF(1.5)]).fit([X])
    lam1, H1 = top_eigh(grams[0], 3, "dense")
    assert np.allclose(single.eigenvalues_, lam1, rtol=1e-12)
    assert np.allclose(single.H_, H1, atol=1e-8)
    big = [k for k, a in vars(single).items() if isinstance(a, np.ndarray) and a.size >= n * n]
    assert big == []


def test_rkm_two_views_hold_two_triangles_and_one_product_comes_from_the_eigen_equation():
    """Two kernel views: the sum goes into the triangle of the view with the larger centred
    trace, so the fit holds two n x n arrays at its peak, not three; that view's K_v H is
    H Gamma - K_u H (the eigen-equation of the sum), equal to the product to the Lanczos
    tolerance, and the other view's is a product, equal to round-off."""
    import tracemalloc

    n = 1200                                          # above 1000: Lanczos on the triangle
    X, Y, _ = _data(n)
    tracemalloc.start()
    model = MultiViewRKM(4, kernels=[RBF(1.5), RBF(1.0)]).fit([X, Y])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # two triangles plus the kernel build's blocks of rows (measured 2.39 n^2 in all; three
    # triangles, the sum in a new array, measured 3.39)
    assert peak < 2.7 * n * n * 8, peak / (n * n * 8)
    grams = [center_gram(RBF(1.5)(X)), center_gram(RBF(1.0)(Y))]
    lam, H = top_eigh(grams[0] + grams[1], 4, "dense")
    assert np.allclose(model.eigenvalues_, lam, rtol=1e-12)
    big = int(np.argmax([np.trace(G) for G in grams]))
    # the product: round-off; the equation: the Lanczos residual, each column's 2-norm at most
    # tol theta_i <= 1e-10 lambda_1
    other = 1 - big
    assert np.allclose(model._KH[other], grams[other] @ model.H_, rtol=0,
                       atol=1e-12 * np.abs(grams[other]).max() * n)
    assert np.allclose(model._KH[big], grams[big] @ model.H_, rtol=0, atol=1e-10 * lam[0])
    # the missing-view prediction that uses it: the same as from the explicit product
    views = [X[:50], Y[:50]]
    views[big] = None
    Z = model.predict(views, target=big)
    model._KH[big] = grams[big] @ model.H_
    assert np.allclose(Z, model.predict(views, target=big), rtol=0, atol=1e-9 * np.abs(Z).max())


def test_rkm_the_view_from_the_eigen_equation_is_the_largest():
    """A view a thousand times smaller than the other keeps its K_v H to round-off: the
    eigen-equation, whose error is relative to lambda_1, gives the large view's."""
    X, Y, _ = _data(1200)
    for kernels in ([RBF(1.0), RBF(300.0)], [RBF(300.0), RBF(1.0)]):
        model = MultiViewRKM(3, kernels=kernels).fit([X, Y])
        grams = [center_gram(k(A)) for k, A in zip(kernels, (X, Y))]
        small = int(np.argmin([np.trace(G) for G in grams]))
        ref = grams[small] @ model.H_
        assert np.abs(ref).max() < 1e-3 * np.abs(grams[1 - small] @ model.H_).max()
        assert np.allclose(model._KH[small], ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_rkm_stiefel_dual_on_the_compact_sum():
    X, Y, _ = _data(400)
    model = MultiViewRKM(3, kernels=[RBF(1.5), RBF(1.0)], solver="stiefel", random_state=0,
                         tol=1e-10, max_iter=3000).fit([X, Y])
    lam = top_eigh(center_gram(RBF(1.5)(X)) + center_gram(RBF(1.0)(Y)), 3, "dense")[0]
    assert np.allclose(model.eigenvalues_, lam, rtol=1e-6)


def test_kernel_ppca_large_n_equals_the_full_centred_matrix():
    X, _, _ = _data(2300)                     # above DENSE_MAX_N: the top-q route
    model = KernelPPCA(2, kernel=RBF(1.5)).fit(X)
    K = RBF(1.5)(X)
    lam, E = top_eigh(center_gram(K), 2, "dense")
    assert np.allclose(model._lam_q, lam, rtol=1e-12)
    assert np.allclose(model._E_q, E, atol=1e-8)
    assert np.allclose(model._train_means, K.mean(axis=0), rtol=1e-13)
    assert np.isclose(model._trace, np.trace(center_gram(K)), rtol=1e-12)


def test_kpls_lanczos_route_on_triangles_equals_the_dense_route():
    X, Y, Z = _data(600)                      # V N = 1800 > 1500: Lanczos on triangles
    kernels = [RBF(1.5), RBF(1.0), Polynomial(2, 1.0)]
    fast = MultiViewKPLS(3, kernels=kernels, random_state=0).fit([X, Y, Z])
    assert not hasattr(fast, "_Ks")           # the triangles are not kept after fit (issue 22)
    dense = MultiViewKPLS(3, kernels=kernels, solver="dense").fit([X, Y, Z])
    assert np.allclose(fast.eigenvalues_, dense.eigenvalues_, rtol=1e-10)
    scale = max(np.abs(a).max() for a in dense.dual_coef_)
    for a, b in zip(fast.dual_coef_, dense.dual_coef_):
        assert np.allclose(a, b, atol=1e-7 * scale)
    with pytest.raises(AttributeError, match="solver='dense'"):
        fast.explained_variance_ratio_           # V N > 1500: not computed on the Lanczos route


# ---------------------------------------------------------------- the memory guard (issue 21, item 10)
def _scarce(monkeypatch, nbytes: int = 10**6) -> None:
    import mvkm._gram

    monkeypatch.setattr(mvkm._gram, "available_memory", lambda: nbytes)


def test_rkm_auto_takes_the_matrix_free_route_when_memory_is_short(monkeypatch):
    X, Y, _ = _data(400)
    dense = MultiViewRKM(3, kernels=[RBF(1.5), RBF(1.0)]).fit([X, Y])
    _scarce(monkeypatch)                       # 1 MB: the dense route needs about 2.6 MB
    calls = []
    real = MultiViewRKM._fit_dual_matrix_free
    monkeypatch.setattr(MultiViewRKM, "_fit_dual_matrix_free",
                        lambda self, s, n: calls.append(n) or real(self, s, n))
    model = MultiViewRKM(3, kernels=[RBF(1.5), RBF(1.0)]).fit([X, Y])
    assert calls == [400]
    assert np.allclose(model.eigenvalues_, dense.eigenvalues_, rtol=1e-8)


@pytest.mark.parametrize("kwargs", [{"kernel_storage": "dense"},
                                    {"solver": "stiefel", "random_state": 0}])
def test_rkm_dense_dual_that_does_not_fit_is_a_clear_error(monkeypatch, kwargs):
    X, Y, _ = _data(400)
    _scarce(monkeypatch)
    with pytest.raises(MemoryError, match=r"needs about .* GiB .* kernel_storage='none'.*primal"):
        MultiViewRKM(3, kernels=[RBF(1.5), RBF(1.0)], **kwargs).fit([X, Y])
    assert not hasattr(MultiViewRKM(3), "H_")


def test_kernel_ppca_memory_guard(monkeypatch):
    X, _, _ = _data(2100)                     # above DENSE_MAX_N
    _scarce(monkeypatch)
    with pytest.raises(MemoryError, match=r"needs about .* GiB .* kernel_storage='none'"):
        KernelPPCA(2, kernel=RBF(1.5), kernel_storage="dense").fit(X)
    calls = []
    import mvkm.matfree

    real = mvkm.matfree.matfree_top_eigh
    monkeypatch.setattr(mvkm.matfree, "matfree_top_eigh",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    auto = KernelPPCA(2, kernel=RBF(1.5)).fit(X)
    assert calls == [1]
    monkeypatch.undo()
    ref = KernelPPCA(2, kernel=RBF(1.5)).fit(X)
    assert np.allclose(auto._lam_q, ref._lam_q, rtol=1e-8)


def test_dense_dual_estimate():
    # the estimate counts whole n x n allocations (tests/test_memory_guard.py measures it)
    from mvkm._gram import _WORKSPACE_COLUMNS, dense_dual_bytes, triangle_bytes

    n = 10_000
    work = 8.0 * n * _WORKSPACE_COLUMNS
    assert triangle_bytes(n) == 8 * n * n
    one = dense_dual_bytes(n, [RBF(1.0)])
    assert one == triangle_bytes(n) + work                        # the matrix and the basis
    two = dense_dual_bytes(n, [RBF(1.0), Polynomial(2)])          # + a full matrix + the sum
    assert two == 3 * 8.0 * n * n + work
    assert dense_dual_bytes(n, [RBF(1.0)], dense_copy=True) == one + 8.0 * n * n
    # the eigen-solver sums into a view's own triangle: no matrix for the sum
    assert dense_dual_bytes(n, [RBF(1.0), Polynomial(2)], sum_in_place=True) == two - 8.0 * n * n
    assert dense_dual_bytes(n, [], n_feature_views=2, sum_in_place=True) == triangle_bytes(n) + work