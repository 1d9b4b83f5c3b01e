"""Tests of mvkm.kernels: the four kernels, pairwise distances and centering.

Every kernel is compared with its formula evaluated pair by pair and, where one
exists, with scikit-learn; centering is compared with M_c K M_c and with
explicitly centred features. Tolerances are round-off level: all entries are
O(1) sums of a few products, so 1e-12 (relative) leaves a margin of ~100 ulps.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import (
    euclidean_distances,
    laplacian_kernel,
    linear_kernel,
    polynomial_kernel,
    rbf_kernel,
)

from mvkm.features import Identity, RandomFourierFeatures
from mvkm.kernels import (
    RBF,
    Kernel,
    Laplacian,
    Linear,
    Polynomial,
    center_gram,
    center_test_gram,
    centering_matrix,
    squared_distances,
)

EPS = np.finfo(float).eps


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((30, 4)), rng.standard_normal((17, 4)) + 0.3


SIGMA, P, C = 1.3, 3, 0.5
NAIVE = {
    "linear": (Linear(), lambda x, y: float(np.dot(x, y))),
    "rbf": (RBF(SIGMA), lambda x, y: np.exp(-np.sum((x - y) ** 2) / (2 * SIGMA**2))),
    "poly": (Polynomial(P, C), lambda x, y: (np.dot(x, y) + C) ** P),
    "laplacian": (Laplacian(SIGMA), lambda x, y: np.exp(-np.sqrt(np.sum((x - y) ** 2)) / SIGMA)),
}


def _loop(k, X, Y):
    return np.array([[k(x, y) for y in Y] for x in X])


# ---------------------------------------------------------------------------
# kernels against formulas and scikit-learn


@pytest.mark.parametrize("name", list(NAIVE))
def test_kernel_matches_double_loop(name, data):
    X, Y = data
    kern, k = NAIVE[name]
    # GEMM distances differ from sum((x-y)^2) by ~eps*(|x|^2+|y|^2) ~ 1e-14; the
    # Laplacian's square root amplifies this by 1/(2|x-y|) and no pair is closer than 0.1.
    assert cdist(X, Y).min() > 0.1
    for A, B in [(X, Y), (X, X)]:
        ref = _loop(k, A, B)
        got = kern(A, B)
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= 1e-10 * np.abs(ref).max()


def test_kernels_match_sklearn(data):
    X, Y = data
    pairs = [
        (Linear()(X, Y), linear_kernel(X, Y)),
        (RBF(SIGMA)(X, Y), rbf_kernel(X, Y, gamma=1 / (2 * SIGMA**2))),
        (Polynomial(P, C)(X, Y), polynomial_kernel(X, Y, degree=P, gamma=1.0, coef0=C)),
        # mvkm's Laplacian is Euclidean; sklearn's laplacian_kernel is l1 (checked below)
        (Laplacian(SIGMA)(X, Y), np.exp(-euclidean_distances(X, Y) / SIGMA)),
    ]
    for ours, theirs in pairs:
        assert np.abs(ours - theirs).max() <= 1e-12 * np.abs(theirs).max()


def test_laplacian_is_euclidean_not_l1(data):
    X, Y = data
    ours = Laplacian(SIGMA)(X, Y)
    ref = np.exp(-cdist(X, Y, "euclidean") / SIGMA)
    assert np.abs(ours - ref).max() < 1e-12
    # sklearn's l1 version is a different kernel: the gap is O(0.1), not round-off
    assert np.abs(ours - laplacian_kernel(X, Y, gamma=1 / SIGMA)).max() > 1e-2


def test_homogeneous_polynomial_explicit_features(data):
    X, _ = data
    # (x^T y)^2 = <vec(x x^T), vec(y y^T)>: an independent explicit feature map
    Phi = np.einsum("ni,nj->nij", X, X).reshape(len(X), -1)
    assert np.abs(Polynomial(2, 0.0)(X) - Phi @ Phi.T).max() < 1e-12 * np.abs(Phi @ Phi.T).max()


@pytest.mark.parametrize("name", list(NAIVE))
def test_gram_symmetric_psd_and_diag(name, data):
    X, _ = data
    kern, _ = NAIVE[name]
    K = kern(X)
    assert np.array_equal(K, K.T)
    lam = np.linalg.eigvalsh(K)
    # eigvalsh is backward stable: a PSD matrix has computed eigenvalues >= -n eps |K|
    assert lam.min() >= -len(X) * EPS * lam.max()
    assert np.allclose(kern.diag(X), np.diag(K), rtol=1e-13, atol=0)


def test_default_diag_of_base_class(data):
    X, _ = data

    class Cosine(Kernel):  # uses Kernel.diag's generic one-row evaluation
        def _gram(self, X, Y):
            Y = X if Y is None else Y
            nx = np.linalg.norm(X, axis=1)[:, None]
            ny = np.linalg.norm(Y, axis=1)[None, :]
            return (X @ Y.T) / (nx * ny)

    k = Cosine()
    assert np.allclose(k.diag(X), np.diag(k(X)), rtol=1e-14, atol=0)
    assert np.allclose(k.diag(X), 1.0, rtol=1e-14, atol=0)


def test_kernel_equality_hash_repr():
    assert RBF(2.0) == RBF(2) and hash(RBF(2.0)) == hash(RBF(2))
    assert RBF(2.0) != RBF(1.0) and RBF(1.0) != Laplacian(1.0)
    assert repr(Polynomial(3, 0.5)) == "Polynomial(degree=3, c=0.5)"


# ---------------------------------------------------------------------------
# squared distances


def test_squared_distances(data):
    X, Y = data
    D = squared_distances(X, Y)
    assert np.abs(D - cdist(X, Y, "sqeuclidean")).max() < 1e-12  # |x|^2 < 40 here
    DX = squared_distances(X)
    assert np.array_equal(DX, DX.T)
    assert np.all(np.diag(DX) == 0) and DX.min() >= 0


def test_squared_distances_near_duplicates_are_accurate():
    # Far from the origin the plain expansion |x|^2 + |y|^2 - 2 x^T y cancels: its
    # absolute error ~ eps * 2|x|^2 ~ 1e-7 here, against squared distances ~ 3e-6.
    # mvkm recomputes such entries directly; the direct sum has relative error ~ d eps.
    rng = np.random.default_rng(1)
    A = 1e4 + rng.standard_normal((20, 3))
    B = A + 1e-3 * rng.standard_normal((20, 3))
    exact = np.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=2)
    D = squared_distances(A, B)
    assert D.min() >= 0
    assert np.max(np.abs(D - exact) / exact) < 1e-12
    plain = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2 * A @ B.T
    assert np.max(np.abs(np.diag(plain) - np.diag(exact)) / np.diag(exact)) > 1e-3


def test_same_points_passed_twice_give_exact_zeros(data):
    X, _ = data
    # Y = a copy of X (not None): the diagonal is recomputed, so exactly zero, and the
    # Laplacian (whose square root would turn eps * |x|^2 into ~1e-8) is exactly 1 there.
    assert np.all(np.diag(squared_distances(X, X.copy())) == 0)
    assert np.all(np.diag(Laplacian(0.5)(X, X.copy())) == 1)


# ---------------------------------------------------------------------------
# centering


def test_centering_matrix():
    M = centering_matrix(7)
    assert np.allclose(M @ np.ones(7), 0, atol=1e-15)
    assert np.allclose(M @ M, M, atol=1e-15) and np.array_equal(M, M.T)
    assert np.allclose(M, np.eye(7) - np.ones((7, 7)) / 7, atol=0)


@pytest.mark.parametrize("kern", [Linear(), RBF(1.0), Polynomial(2, 1.0), Laplacian(2.0)])
def test_center_gram_equals_Mc_K_Mc(kern, data):
    X, _ = data
    K = kern(X)
    K_before = K.copy()
    M = centering_matrix(len(X))
    Kc = center_gram(K)
    assert np.abs(Kc - M @ K @ M).max() <= 1e-12 * np.abs(K).max()
    assert np.array_equal(K, K_before)  # input not modified


@pytest.mark.parametrize(
    "fmap", [Identity(), RandomFourierFeatures(sigma=1.0, n_features=200, random_state=0)]
)
def test_center_gram_equals_explicit_centred_features(fmap, data):
    X, _ = data
    Phi = fmap.fit_transform(X)
    Phi_c = Phi - Phi.mean(axis=0)
    assert np.abs(center_gram(Phi @ Phi.T) - Phi_c @ Phi_c.T).max() < 1e-12


def test_center_test_gram_equals_explicit_rff_features():
    """The identity of the issue: test rows centred with the TRAINING feature mean."""
    rng = np.random.default_rng(2)
    X_tr = rng.standard_normal((50, 3))
    X_te = rng.standard_normal((12, 3)) + 0.5
    rff = RandomFourierFeatures(sigma=1.2, n_features=300, random_state=3).fit(X_tr)
    Z_tr, Z_te = rff.transform(X_tr), rff.transform(X_te)
    mu = Z_tr.mean(axis=0)
    explicit = (Z_te - mu) @ (Z_tr - mu).T
    got = center_test_gram(Z_te @ Z_tr.T, Z_tr @ Z_tr.T)
    assert got.shape == (12, 50)
    assert np.abs(got - explicit).max() < 1e-12
    # centring test rows with their own (test) means is NOT the same thing
    K_te = Z_te @ Z_tr.T
    self_centred = K_te - K_te.mean(1, keepdims=True) - K_te.mean(0, keepdims=True) + K_te.mean()
    assert np.abs(self_centred - explicit).max() > 1e-3


def test_center_test_gram_reduces_to_center_gram(data):
    X, _ = data
    K = RBF(1.0)(X)
    assert np.abs(center_test_gram(K, K) - center_gram(K)).max() < 1e-14


def test_center_test_gram_matrix_form(data):
    X, Y = data
    K, K_te = Laplacian(1.0)(X), Laplacian(1.0)(Y, X)
    n, m = len(X), len(Y)
    ref = (K_te - np.ones((m, n)) @ K / n) @ centering_matrix(n)
    assert np.abs(center_test_gram(K_te, K) - ref).max() < 1e-13


# ---------------------------------------------------------------------------
# property tests

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(
    X=st.integers(2, 12).flatmap(lambda n: arrays(np.float64, (n, 3), elements=finite)),
    sigma=st.floats(0.1, 10),
)
def test_centred_gram_zero_sums_and_psd(X, sigma):
    for kern in (RBF(sigma), Laplacian(sigma), Linear()):
        K = kern(X)
        Kc = center_gram(K)
        scale = max(np.abs(K).max(), 1.0)
        n = len(X)
        # row sums of n entries of size <= 4*scale: round-off ~ n eps scale
        assert np.abs(Kc.sum(axis=1)).max() <= 1e3 * n * EPS * scale
        assert np.abs(Kc.sum(axis=0)).max() <= 1e3 * n * EPS * scale
        lam = np.linalg.eigvalsh(0.5 * (Kc + Kc.T))
        assert lam.min() >= -1e2 * n * EPS * scale


@settings(max_examples=40, deadline=None)
@given(X=st.integers(1, 10).flatmap(lambda n: arrays(np.float64, (n, 2), elements=finite)))
def test_squared_distances_properties(X):
    D = squared_distances(X)
    assert np.array_equal(D, D.T) and np.all(np.diag(D) == 0) and D.min() >= 0
    ref = cdist(X, X, "sqeuclidean")
    # absolute round-off of the expansion: a few eps * (|x|^2 + |y|^2) <= 2 * 200
    assert np.abs(D - ref).max() <= 1e2 * EPS * (1 + 2 * np.max(np.sum(X**2, axis=1)))


# ---------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("cls", [RBF, Laplacian])
@pytest.mark.parametrize("sigma", [0.0, -1.0, np.nan, np.inf])
def test_bad_sigma(cls, sigma):
    with pytest.raises(ValueError, match="sigma"):
        cls(sigma)


def test_bad_sigma_type():
    with pytest.raises(TypeError, match="sigma"):
        RBF("1.0")


@pytest.mark.parametrize("degree", [0, -2, 1.5, True])
def test_bad_degree(degree):
    with pytest.raises(ValueError, match="degree"):
        Polynomial(degree)


def test_bad_offset():
    with pytest.raises(ValueError, match="c must be"):
        Polynomial(2, -1.0)
    with pytest.raises(TypeError, match="c must be"):
        Polynomial(2, "1")


def test_nan_and_shape_errors(data):
    X, Y = data
    Xn = X.copy()
    Xn[0, 0] = np.nan
    for kern in (Linear(), RBF(), Polynomial(), Laplacian()):
        with pytest.raises(ValueError, match="X contains NaN"):
            kern(Xn)
        with pytest.raises(ValueError, match="Y contains NaN"):
            kern(X, Xn)
        with pytest.raises(ValueError, match="same number of features"):
            kern(X, Y[:, :3])
        with pytest.raises(ValueError, match="2-D"):
            kern(X[0])
        with pytest.raises(ValueError, match="X"):
            kern.diag(Xn)
    with pytest.raises(ValueError, match="same number of features"):
        squared_distances(X, Y[:, :2])


def test_center_gram_errors():
    with pytest.raises(ValueError, match="K must be a square matrix"):
        center_gram(np.ones((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        center_gram(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="n must be a positive integer"):
        centering_matrix(0)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        centering_matrix(True)


def test_center_test_gram_errors():
    K = np.eye(5)
    with pytest.raises(ValueError, match="one column per training point"):
        center_test_gram(np.ones((2, 4)), K)
    with pytest.raises(ValueError, match="K_train must be a square matrix"):
        center_test_gram(np.ones((2, 5)), np.ones((5, 4)))
    with pytest.raises(ValueError, match="K_test must be a 2-D"):
        center_test_gram(np.ones(5), K)


def test_center_gram_in_place_and_exactly_symmetric():
    from mvkm.kernels import RBF, center_gram, centering_matrix

    X = np.random.default_rng(3).normal(size=(700, 4))
    K = RBF(1.3)(X)
    assert np.array_equal(K, K.T)
    expected = centering_matrix(len(K)) @ K @ centering_matrix(len(K))
    Kc = center_gram(K)  # copy: K untouched
    assert Kc is not K and not np.allclose(K.sum(axis=0), 0)
    np.testing.assert_allclose(Kc, expected, atol=1e-12)  # O(1) entries, round-off of n-term means
    assert np.array_equal(Kc, Kc.T)
    K2 = K.copy()
    out = center_gram(K2, copy=False)
    assert out is K2 and np.array_equal(out, Kc)
    # a non-contiguous or integer input is never modified, even with copy=False
    Kint = np.arange(16).reshape(4, 4)
    Kint = Kint + Kint.T
    before = Kint.copy()
    center_gram(Kint, copy=False)
    assert np.array_equal(Kint, before)


@pytest.mark.parametrize("threaded", [False, True])
def test_blockwise_passes_cover_every_row(monkeypatch, threaded):
    import mvkm._parallel as par
    import mvkm.kernels as kmod

    # force tiny row blocks so that many blocks (and a ragged last one) are used,
    # and (threaded=True) the thread pool even for this small matrix
    monkeypatch.setattr(par, "_BLOCK_BYTES", 8 * 23 * 3)
    monkeypatch.setattr(par, "_PARALLEL_MIN_N", 1 if threaded else 10**9)
    monkeypatch.setattr(par, "n_threads", lambda: 3)
    monkeypatch.setattr(kmod, "_TILE", 7)  # 37 = 5 * 7 + 2: a ragged last tile
    X = np.random.default_rng(4).normal(size=(37, 3))
    Y = np.random.default_rng(5).normal(size=(23, 3))
    from scipy.spatial.distance import cdist

    np.testing.assert_allclose(kmod.squared_distances(X, Y), cdist(X, Y, "sqeuclidean"), atol=1e-12)
    K_rbf = kmod.RBF(1.0)(X)
    assert np.array_equal(K_rbf, K_rbf.T) and np.all(K_rbf.diagonal() == 1.0)
    np.testing.assert_allclose(K_rbf, np.exp(-cdist(X, X, "sqeuclidean") / 2), atol=1e-14)
    from mvkm._validation import max_asymmetry

    A = np.random.default_rng(6).normal(size=(37, 37))
    assert max_asymmetry(A) == np.abs(A - A.T).max()
    D = kmod.squared_distances(X)
    assert np.array_equal(D, D.T) and not D.diagonal().any()
    np.testing.assert_allclose(D, cdist(X, X, "sqeuclidean"), atol=1e-12)
    K = kmod.Laplacian(2.0)(X)
    np.testing.assert_allclose(K, np.exp(-cdist(X, X) / 2.0), atol=1e-14)
    np.testing.assert_allclose(kmod.center_gram(K), kmod.centering_matrix(37) @ K @ kmod.centering_matrix(37),
                               atol=1e-13)


def test_uncenter_kernel_values_matches_explicit_features():
    from mvkm.kernels import uncenter_kernel_values

    rng = np.random.default_rng(7)
    Phi = rng.standard_normal((9, 4)) + 2.0          # explicit features, non-zero mean
    mean = Phi.mean(axis=0)
    Phi_c = Phi - mean
    alpha = rng.standard_normal((3, 9))
    phi_hat = mean + alpha @ Phi_c                   # points of the centred span
    K = Phi @ Phi.T
    Kc_alpha = alpha @ (Phi_c @ Phi_c.T)             # K_c symmetric
    got = uncenter_kernel_values(Kc_alpha, alpha, K.mean(axis=0))
    # independent: the inner products phi_i^T phi_hat; round-off ~ 1e-15 * |K|
    assert np.allclose(got, phi_hat @ Phi.T, atol=1e-12 * np.abs(K).max())
    with pytest.raises(ValueError, match="same shape"):
        uncenter_kernel_values(Kc_alpha[:, :5], alpha, K.mean(axis=0))
