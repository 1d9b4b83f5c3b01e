"""Tests of mvkm.features: Identity, random Fourier features and Nystrom.

The explicit maps are checked against the kernels they represent (exactly for
Identity, exactly on the landmarks for Nystrom, in expectation with the
1/sqrt(D) rate for random Fourier features) and against independent inline
implementations of their formulas.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone

import mvkm
from mvkm.features import Identity, Nystrom, RandomFourierFeatures
from mvkm.kernels import RBF, Laplacian, Linear, Polynomial

EPS = np.finfo(float).eps


@pytest.fixture
def X():
    return np.random.default_rng(0).standard_normal((60, 3))


# ---------------------------------------------------------------------------
# Identity


def test_identity(X):
    idm = Identity()
    assert idm.fit(X) is idm
    Z = idm.transform(X)
    assert np.array_equal(Z, X) and Z is not X
    assert idm.n_features_in_ == idm.n_features_out_ == 3
    assert idm.kernel == Linear()
    assert np.abs(Z @ Z.T - idm.kernel(X)).max() == 0.0


# ---------------------------------------------------------------------------
# Random Fourier features


def test_rff_formula(X):
    rff = RandomFourierFeatures(sigma=0.7, n_features=50, random_state=1).fit(X)
    assert rff.omega_.shape == (3, 50) and rff.offset_.shape == (50,)
    assert np.all((rff.offset_ >= 0) & (rff.offset_ <= 2 * np.pi))
    Z = rff.transform(X)
    ref = np.sqrt(2 / 50) * np.cos(X @ rff.omega_ + rff.offset_)
    assert np.abs(Z - ref).max() < 1e-14
    assert rff.kernel == RBF(0.7)
    assert rff.n_features_in_ == 3 and rff.n_features_out_ == 50


def test_rff_frequencies_have_the_right_distribution():
    # omega ~ N(0, I / sigma^2): sample std within 5 standard errors (1/sqrt(2N)) of 1/sigma
    sigma = 2.5
    rff = RandomFourierFeatures(sigma=sigma, n_features=20000, random_state=2).fit(np.zeros((1, 2)))
    N = rff.omega_.size
    assert abs(rff.omega_.std() * sigma - 1) < 5 / np.sqrt(2 * N)
    assert abs(rff.omega_.mean() * sigma) < 5 / np.sqrt(N)


def test_rff_reproducible_and_seed_dependent(X):
    a = RandomFourierFeatures(n_features=20, random_state=3).fit_transform(X)
    b = RandomFourierFeatures(n_features=20, random_state=3).fit(X).transform(X)
    c = RandomFourierFeatures(n_features=20, random_state=4).fit_transform(X)
    assert np.array_equal(a, b) and not np.allclose(a, c)


def test_rff_error_falls_like_inverse_sqrt_D():
    """Regression of log(mean |ZZ^T - K|) on log D: the slope must be close to -1/2.

    Each entry of ZZ^T is an average of D i.i.d. bounded terms with variance
    1 - k^2 + k^4/2, so its error has standard deviation proportional to D^{-1/2}.
    Individual seeds give slopes within ~0.05 of -1/2 (Monte Carlo noise and the
    non-Gaussian regime at small D); averaging 4 seeds, [-0.6, -0.4] is a safe band.
    """
    rng = np.random.default_rng(5)
    X = rng.standard_normal((80, 4))
    sigma = 1.5
    K = RBF(sigma)(X)
    Ds = np.array([32, 64, 128, 256, 512, 1024, 2048])
    err = np.zeros(len(Ds))
    for seed in range(4):
        for j, D in enumerate(Ds):
            Z = RandomFourierFeatures(sigma, int(D), random_state=seed).fit_transform(X)
            err[j] += np.abs(Z @ Z.T - K).mean() / 4
    slope = np.polyfit(np.log(Ds), np.log(err), 1)[0]
    assert -0.6 < slope < -0.4
    # and the level agrees with the central limit theorem, E|N(0, s^2)| = sqrt(2/pi) s,
    # within 20% (entries share their frequencies: fewer independent errors than it seems)
    pred = np.sqrt(2 / np.pi) * np.sqrt(1 - K**2 + K**4 / 2).mean() / np.sqrt(Ds)
    assert np.all(np.abs(err / pred - 1) < 0.2)


def test_rff_unbiased_single_term_variance():
    """Mean and variance of one term 2cos(w'x+b)cos(w'y+b): k and 1 - k^2 + k^4/2."""
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    sigma = 1.1
    k = RBF(sigma)(x[None], y[None])[0, 0]
    rff = RandomFourierFeatures(sigma, n_features=200_000, random_state=7).fit(x[None])
    t = 2 * np.cos(x @ rff.omega_ + rff.offset_) * np.cos(y @ rff.omega_ + rff.offset_)
    N = t.size
    se_mean = np.sqrt(t.var() / N)
    se_var = np.sqrt((np.mean((t - t.mean()) ** 4) - t.var() ** 2) / N)
    assert abs(t.mean() - k) < 5 * se_mean
    assert abs(t.var() - (1 - k**2 + k**4 / 2)) < 5 * se_var


@settings(max_examples=30, deadline=None)
@given(
    X=st.integers(1, 8).flatmap(
        lambda n: arrays(np.float64, (n, 2), elements=st.floats(-50, 50, allow_nan=False))
    ),
    D=st.integers(1, 40),
)
def test_rff_features_bounded(X, D):
    Z = RandomFourierFeatures(n_features=D, random_state=0).fit_transform(X)
    assert Z.shape == (len(X), D)
    assert np.abs(Z).max() <= np.sqrt(2 / D) * (1 + 1e-15)
    # z(x)^T z(x) = (2/D) sum cos^2 lies in [0, 2]
    diag = np.einsum("ij,ij->i", Z, Z)
    assert diag.min() >= 0 and diag.max() <= 2 + 1e-12


# ---------------------------------------------------------------------------
# Nystrom


def test_nystrom_exact_on_landmarks(X):
    kern = RBF(1.0)
    ny = Nystrom(kern, n_landmarks=12, random_state=0).fit(X)
    L = ny.landmarks_
    assert L.shape == (12, 3)
    # landmarks are rows of X
    assert all(np.any(np.all(X == l, axis=1)) for l in L)
    Z_L = ny.transform(L)
    Kmm = kern(L)
    # K_mm K_mm^+ K_mm = K_mm up to cond(K_mm) * eps (cond < 1e4 here)
    assert np.linalg.cond(Kmm) < 1e4
    assert np.abs(Z_L @ Z_L.T - Kmm).max() < 1e-10


def test_nystrom_induced_kernel_formula(X):
    kern = Laplacian(1.5)
    ny = Nystrom(kern, n_landmarks=10, random_state=1).fit(X)
    Z = ny.transform(X)
    KL = kern(X, ny.landmarks_)
    ref = KL @ np.linalg.pinv(kern(ny.landmarks_), hermitian=True) @ KL.T
    assert np.abs(Z @ Z.T - ref).max() < 1e-10
    # the residual K - ZZ^T is PSD (Gram of the projected-out features)
    lam = np.linalg.eigvalsh(kern(X) - Z @ Z.T)
    assert lam.min() > -1e-10


def test_nystrom_converges_as_m_grows():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((120, 2))
    kern = RBF(1.0)
    K = kern(X)
    ms = [5, 10, 20, 40, 80, 120]
    err = []
    for m in ms:
        e = 0.0
        for seed in range(3):
            Z = Nystrom(kern, n_landmarks=m, random_state=seed).fit_transform(X)
            e += np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K) / 3
        err.append(e)
    assert np.all(np.diff(err) < 0)
    # with every point a landmark the approximation is K K^+ K = K, up to the
    # eigenvalues below the cut-off m * eps * lambda_max that the pseudo-inverse drops
    assert err[-1] < 1e-6 and err[0] > 0.1


def test_nystrom_linear_kernel_is_exact_with_spanning_landmarks(X):
    # the linear kernel has rank d = 3: three generic landmarks span the feature space
    ny = Nystrom(Linear(), n_landmarks=5, random_state=3).fit(X)
    assert ny.n_features_out_ == 3
    Z = ny.transform(X)
    assert np.abs(Z @ Z.T - X @ X.T).max() < 1e-10


def test_nystrom_rank_deficient_drops_null_directions(X):
    ny = Nystrom(Polynomial(1, 0.0), n_landmarks=20, random_state=0).fit(X)
    assert ny.n_features_out_ == 3 and ny.normalization_.shape == (20, 3)


def test_nystrom_default_kernel_is_rbf(X):
    a = Nystrom(n_landmarks=8, random_state=4).fit_transform(X)
    b = Nystrom(RBF(1.0), n_landmarks=8, random_state=4).fit_transform(X)
    assert np.array_equal(a, b)


def test_nystrom_accepts_a_callable():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((20, 2))
    f = lambda A, B=None: RBF(2.0)(A, B)  # noqa: E731
    a = Nystrom(f, n_landmarks=6, random_state=0).fit_transform(X)
    b = Nystrom(RBF(2.0), n_landmarks=6, random_state=0).fit_transform(X)
    assert np.array_equal(a, b)


# ---------------------------------------------------------------------------
# scikit-learn conventions


@pytest.mark.parametrize(
    "est",
    [Identity(), RandomFourierFeatures(sigma=0.5, n_features=7, random_state=0),
     Nystrom(RBF(0.5), n_landmarks=7, random_state=0)],
)
def test_sklearn_conventions(est, X):
    c = clone(est)
    assert c.get_params() == est.get_params()
    assert not hasattr(c, "n_features_in_")
    assert np.array_equal(c.fit_transform(X), clone(est).fit(X).transform(X))


# ---------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    "est", [Identity(), RandomFourierFeatures(), Nystrom(n_landmarks=5)]
)
def test_not_fitted(est, X):
    with pytest.raises(ValueError, match="not fitted"):
        est.transform(X)


@pytest.mark.parametrize(
    "est", [Identity(), RandomFourierFeatures(random_state=0), Nystrom(n_landmarks=5, random_state=0)]
)
def test_wrong_n_features_and_nan(est, X):
    est.fit(X)
    with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
        est.transform(X[:, :2])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.transform(Xn)
    with pytest.raises(ValueError, match="NaN"):
        clone(est).fit(Xn)


@pytest.mark.parametrize("sigma", [0.0, -1.0, np.nan])
def test_rff_bad_sigma(sigma, X):
    with pytest.raises(ValueError, match="sigma"):
        RandomFourierFeatures(sigma=sigma).fit(X)


@pytest.mark.parametrize("D", [0, -3, 2.5, True])
def test_rff_bad_n_features(D, X):
    with pytest.raises(ValueError, match="n_features"):
        RandomFourierFeatures(n_features=D).fit(X)


def test_nystrom_bad_landmarks(X):
    with pytest.raises(ValueError, match="n_landmarks must be at most the number of samples"):
        Nystrom(n_landmarks=61).fit(X)
    with pytest.raises(ValueError, match="n_landmarks must be a positive integer"):
        Nystrom(n_landmarks=0).fit(X)


def test_nystrom_bad_kernel(X):
    with pytest.raises(TypeError, match="kernel must be a callable"):
        Nystrom(kernel="rbf", n_landmarks=3).fit(X)


def test_bad_random_state(X):
    with pytest.raises(TypeError, match="random_state"):
        RandomFourierFeatures(random_state="seed").fit(X)


def test_every_feature_map_exposes_the_kernel_it_induces():
    from mvkm.features import Identity, Nystrom, RandomFourierFeatures
    from mvkm.kernels import RBF, Laplacian, Linear

    assert Identity().kernel == Linear()
    assert RandomFourierFeatures(sigma=2.0).kernel == RBF(2.0)
    assert Nystrom().kernel == RBF(1.0)
    assert Nystrom(Laplacian(3.0)).kernel == Laplacian(3.0)
    with pytest.raises(TypeError, match="kernel must be a callable"):
        Nystrom(kernel="rbf", n_landmarks=2).fit(np.ones((5, 2)))


def test_rff_phases_that_overflow_are_a_clear_error():
    # issue 21, item 6: inputs of 1e308 gave a NaN column (cos of an infinite phase)
    fm = RandomFourierFeatures(1.0, 10, random_state=0).fit(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="phases .* overflow float64"):
        fm.transform(np.full((1, 3), 1e308))
    assert np.isfinite(fm.transform(np.full((1, 3), 1e300))).all()


@pytest.mark.parametrize("c", [0.0, 0.7, 2.0])
def test_poly2_features_reproduce_the_degree_two_kernel(c):
    X = np.random.default_rng(3).standard_normal((12, 4))
    Y = np.random.default_rng(4).standard_normal((5, 4))
    F, G = mvkm.poly2_features(X, c), mvkm.poly2_features(Y, c)
    assert F.shape == (12, 1 + 2 * 4 + 4 * 3 // 2)
    # the kernel by its own formula, (x'y + c)^2, entries O(10): round-off 1e-13
    assert np.allclose(F @ G.T, (X @ Y.T + c) ** 2, rtol=1e-12, atol=1e-12)
    assert np.allclose(F @ G.T, mvkm.Polynomial(degree=2, c=c)(X, Y), rtol=1e-12, atol=1e-12)


def test_poly2_features_name_a_bad_argument():
    with pytest.raises(ValueError, match="c must be"):
        mvkm.poly2_features(np.ones((2, 2)), c=-1.0)
    with pytest.raises(ValueError, match="X"):
        mvkm.poly2_features(np.ones(3))
