"""Tests of mvkm.ppca.KernelPPCA: probabilistic PCA in primal and dual (De Plaen and Suykens, 2023).

Tolerances: quantities that two formulations compute through different
factorisations (an SVD of Phi_c against an eigendecomposition of K_c) agree to
round-off, a few hundred ulps of the largest entry; we use 1e-9 relative to the
scale of the compared quantity unless a comment says otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA, KernelPCA

from mvkm import RBF, Identity, Linear, RandomFourierFeatures, center_gram, top_eigh
from mvkm.kernels import center_test_gram
from mvkm.ppca import KernelPPCA


def _data(n=30, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * np.linspace(3.0, 0.5, d) + 1.0


def _close(a, b, rtol=1e-9):
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1.0)


@pytest.mark.parametrize("feature_map", [Identity(), RandomFourierFeatures(1.5, 8, random_state=0),
                                         RandomFourierFeatures(1.5, 60, random_state=1)])
def test_primal_equals_dual_with_explicit_features(feature_map):
    X = _data()
    Xt = _data(5, seed=1)
    q = 3
    prim = KernelPPCA(n_components=q, feature_map=feature_map, formulation="primal").fit(X)
    dual = KernelPPCA(n_components=q, feature_map=feature_map, formulation="dual").fit(X)
    N = X.shape[0]
    Phi = prim.feature_map_.transform(X)
    d = Phi.shape[1]
    assert prim.rank_ == dual.rank_ == min(d, N - 1)
    assert _close(prim.eigenvalues_, dual.eigenvalues_)
    assert np.isclose(prim.sigma2_, dual.sigma2_, rtol=1e-9)
    # W = Phi_c^T A (Prop. 5), hence W W^T = Phi_c^T A A^T Phi_c (rotation-invariant)
    Phi_c = Phi - Phi.mean(axis=0)
    assert _close(prim.W_ @ prim.W_.T, Phi_c.T @ dual.A_ @ dual.A_.T @ Phi_c)
    # same sign convention in both: latents agree entry by entry (eq. 8 = eq. 16)
    assert _close(prim.transform(Xt), dual.transform(Xt))
    mp, cp = prim.posterior(Xt)
    md, cd = dual.posterior(Xt)
    assert _close(cp, cd) and _close(mp, md)
    # MAP reconstructions: kernel space (eq. 10 vs eq. 17/22) and input space (pre-image)
    assert _close(prim.reconstruct(Xt, output="kernel"), dual.reconstruct(Xt, output="kernel"))
    assert _close(prim.reconstruct(Xt), dual.reconstruct(Xt))
    assert _close(prim.B_, dual.B_)
    assert _close(prim.score_samples(Xt), dual.score_samples(Xt))


def test_dual_uncentring_gives_the_kernel_of_the_reconstruction():
    """k(x_i, x_hat) from the dual's un-centring equals phi_i^T phi_hat computed in the primal."""
    X, Xt = _data(), _data(4, seed=2)
    fm = RandomFourierFeatures(1.0, 12, random_state=3).fit(X)
    prim = KernelPPCA(n_components=2, feature_map=fm, formulation="primal").fit(X)
    dual = KernelPPCA(n_components=2, feature_map=fm).fit(X)
    phi_hat = prim.reconstruct(Xt, output="feature")
    expected = phi_hat @ fm.transform(X).T
    H = dual.transform(Xt)
    a = H @ dual.A_.T
    kc = dual.reconstruct(Xt, output="kernel")
    m = dual.K_fit_.mean(axis=1)
    k = kc + m + (a @ (m - m.mean()))[:, None]
    assert _close(k, expected)


def test_primal_matches_sklearn_pca():
    """Tipping-Bishop in sklearn uses N - 1 and d - q; with d < N, r = d and only N - 1 differs."""
    X, Xt = _data(40, 5), _data(6, 5, seed=4)
    N, d, q = 40, 5, 2
    ours = KernelPPCA(n_components=q, formulation="primal").fit(X)
    sk = PCA(n_components=q).fit(X)
    c = N / (N - 1)
    assert ours.rank_ == d
    assert np.isclose(sk.noise_variance_, c * ours.sigma2_, rtol=1e-10)
    assert _close(sk.get_covariance(), c * ours.get_covariance())
    assert _close(ours.mean_, sk.mean_)
    # sklearn's density is N(mu, c C); ours N(mu, C): N(x; mu, cC) = c^{-d/2} N(mu + (x-mu)/sqrt(c); mu, C)
    shrunk = ours.mean_ + (Xt - ours.mean_) / np.sqrt(c)
    assert _close(sk.score_samples(Xt), ours.score_samples(shrunk) - 0.5 * d * np.log(c))
    # and ours is the Gaussian log-density with the model covariance (eq. 3)
    from scipy.stats import multivariate_normal
    logp = multivariate_normal(ours.mean_, ours.get_covariance()).logpdf(Xt)
    assert _close(ours.score_samples(Xt), logp)
    assert np.isclose(ours.score(Xt), logp.mean(), rtol=1e-10)


def test_sigma2_conventions_and_explained_variance():
    X = _data(25, 6)
    m = KernelPPCA(n_components=2, kernel=RBF(2.0)).fit(X)
    lam, N, r, q = m.eigenvalues_, 25, m.rank_, 2
    Kc = center_gram(RBF(2.0)(X))
    assert r == N - 1 and _close(lam, np.linalg.eigvalsh(Kc)[::-1][:r])
    assert np.isclose(m.sigma2_, lam[q:].sum() / (N * (r - q)), rtol=1e-12)
    assert np.isclose(m.sigma2_source_, lam[q:].sum() / (N * (N - q)), rtol=1e-12)
    assert m.sigma2_ < lam[q - 1] / N
    assert np.allclose(m.explained_variance_ratio_, lam[:q] / np.trace(Kc), rtol=1e-10)
    # A = E_q (I/N - sigma^2 Lambda_q^{-1})^{1/2} (eq. 13): A^T K_c A = Lambda_q/N - sigma^2 I
    assert _close(m.A_.T @ Kc @ m.A_, np.diag(lam[:q] / N - m.sigma2_))
    # posterior covariance (Prop. 8) = N sigma^2 Lambda_q^{-1}
    assert _close(m.posterior(X[:2])[1], np.diag(N * m.sigma2_ / lam[:q]))


@pytest.mark.parametrize("formulation", ["primal", "dual"])
def test_n_components_and_sigma2_round_trip(formulation):
    X = _data(20, 6)
    for q in range(1, 6):
        m = KernelPPCA(n_components=q, formulation=formulation).fit(X)
        back = KernelPPCA(sigma2=m.sigma2_, formulation=formulation).fit(X)
        assert back.n_components_ == q
        assert np.isclose(back.sigma2_ml_, m.sigma2_, rtol=1e-12)
        assert back.sigma2_ < back.eigenvalues_[q - 1] / 20          # Prop. 3
    # a sigma2 between two ML levels keeps the fewest components that reach it
    m1 = KernelPPCA(n_components=1).fit(X)
    m2 = KernelPPCA(n_components=2).fit(X)
    mid = KernelPPCA(sigma2=0.5 * (m1.sigma2_ + m2.sigma2_)).fit(X)
    assert mid.n_components_ == 2
    # below every ML level: all but one direction (q = r - 1)
    tiny = KernelPPCA(sigma2=1e-12).fit(X)
    assert tiny.n_components_ == tiny.rank_ - 1


def test_sigma2_to_zero_gives_kernel_pca():
    X, Xt = _data(25, 3), _data(5, 3, seed=5)
    kern, q = RBF(1.5), 3
    m0 = KernelPPCA(n_components=q, kernel=kern).fit(X).with_sigma2(0.0)
    K = kern(X)
    lam, E = top_eigh(center_gram(K), q)
    kc = center_test_gram(kern(Xt, X), K)
    # kernel-space reconstruction = projection of k_c onto the top-q eigenvectors
    assert _close(m0.reconstruct(Xt, output="kernel"), kc @ E @ E.T)
    # latents = sqrt(N / lambda_p) x the kernel PCA scores of scikit-learn (up to sign)
    sk = KernelPCA(q, kernel="rbf", gamma=1 / (2 * 1.5**2)).fit(X)
    h = m0.transform(Xt) / np.sqrt(25 / lam)
    s = sk.transform(Xt)
    assert _close(np.abs(h), np.abs(s), rtol=1e-7)  # ARPACK/dense eigenvectors: 1e-7 is ample
    # continuity: a tiny sigma2 is within O(sigma2 N / lambda_q) of the limit
    m_small = m0.with_sigma2(1e-10)
    assert _close(m_small.reconstruct(Xt, output="kernel"), kc @ E @ E.T, rtol=1e-6)
    # the primal identity-map model at sigma2 = 0 reconstructs by PCA projection
    p0 = KernelPPCA(n_components=2, formulation="primal").fit(X).with_sigma2(0.0)
    pca = PCA(2).fit(X)
    assert _close(p0.reconstruct(Xt), pca.inverse_transform(pca.transform(Xt)))


def test_linear_dual_has_exact_preimage_equal_to_primal():
    X, Xt = _data(), _data(3, seed=6)
    dual = KernelPPCA(n_components=2).fit(X)                 # kernel None: linear
    dual_lin = KernelPPCA(n_components=2, kernel=Linear()).fit(X)
    prim = KernelPPCA(n_components=2, formulation="primal").fit(X)
    expected = prim.W_ @ np.linalg.solve(prim._M, prim.W_.T @ (Xt - prim.mean_).T)
    expected = expected.T + prim.mean_                       # eq. 10
    for model in (dual, dual_lin, prim):
        assert _close(model.reconstruct(Xt), expected)


def test_sampling_covariance_monte_carlo():
    """Cov(k_c) of primal samples (explicit map) = B^2 of the dual; eq. 18's matrix is not it.

    An entry of the empirical covariance of n Gaussian vectors has standard deviation
    sqrt((S_ii S_jj + S_ij^2) / n) (Isserlis); by the CLT its z-score is standard normal,
    and with ~100 entries a bound of 5 fails with probability < 1e-4 (union bound over
    P(|Z| > 5) = 5.7e-7 per entry). The runs are seeded, so the test is deterministic.
    """
    X = _data(12, 3)
    fm = RandomFourierFeatures(1.0, 6, random_state=0).fit(X)
    prim = KernelPPCA(n_components=2, feature_map=fm, formulation="primal").fit(X)
    dual = KernelPPCA(n_components=2, feature_map=fm).fit(X)
    S = dual.get_kernel_covariance()
    lam, E, q, N, s2 = dual.eigenvalues_, dual.eigenvectors_, 2, 12, dual.sigma2_
    b2 = np.concatenate([lam[:q] ** 2 / N, s2 * lam[q:]])
    assert _close(S, (E * b2) @ E.T) and _close(dual.B_ @ dual.B_, S)
    n = 40000

    def zmax(samples, Sigma):
        emp = samples.T @ samples / n                        # mean is 0 in the model
        sd = np.sqrt((np.outer(np.diag(Sigma), np.diag(Sigma)) + Sigma**2) / n)
        return np.max(np.abs(emp - Sigma) / sd)

    kc_primal = prim.sample(n, random_state=1, output="kernel")
    kc_dual = dual.sample(n, random_state=2, output="kernel")
    assert zmax(kc_primal, S) < 5
    assert zmax(kc_dual, S) < 5
    # the matrix of the source's eq. (18), A A^T + sigma^2 K_c^+, is the covariance of
    # a = K_c^+ k_c, not of k_c: the test rejects it by a wide margin
    Kc_pinv = (E / lam) @ E.T
    wrong = dual.A_ @ dual.A_.T + s2 * Kc_pinv
    a = kc_primal @ Kc_pinv
    assert zmax(a, wrong) < 5
    assert zmax(kc_primal, wrong) > 100


def test_samples_lie_in_the_model_and_are_reproducible():
    X = _data(20, 3)
    m = KernelPPCA(n_components=2, kernel=RBF(2.0)).fit(X)
    s1 = m.sample(7, random_state=0)
    assert s1.shape == (7, 3) and np.all(np.isfinite(s1))
    assert np.array_equal(s1, m.sample(7, random_state=0))
    kc = m.sample(5, random_state=0, output="kernel")
    assert kc.shape == (5, 20) and np.allclose(kc.sum(axis=1), 0, atol=1e-10 * np.abs(kc).max())
    p = KernelPPCA(n_components=2, formulation="primal").fit(X)
    assert p.sample(4, random_state=0, output="feature").shape == (4, 3)
    # generation grid through the latent space (eq. 17 then pre-image)
    grid = m.inverse_transform(np.array([[-1.0, 0.0], [0.0, 1.0]]))
    assert grid.shape == (2, 3)


def test_stable_preimage_warns_and_plain_is_available():
    X = _data(20, 3)
    m = KernelPPCA(n_components=2, kernel=RBF(1.0)).fit(X)
    with pytest.warns(RuntimeWarning, match="normaliser"):
        out = m.reconstruct(X[:2], tau=1e6)                  # stabilisation dominates
    assert np.allclose(out, X.mean(axis=0), atol=1e-3 * np.abs(X).max())
    plain = m.reconstruct(X[:2], preimage="plain")
    stable0 = m.reconstruct(X[:2], tau=0.0)
    assert np.all(np.isfinite(plain)) and np.all(np.isfinite(stable0))


@pytest.mark.parametrize("kwargs, match", [
    ({"n_components": 2, "sigma2": 0.1}, "not both"),
    ({}, "n_components .* or sigma2"),
    ({"n_components": 0}, ">= 1"),
    ({"n_components": 6}, "below the rank r = 6"),
    ({"sigma2": 1e6}, r"lambda_1 / N = "),
    ({"sigma2": -1.0}, "sigma2 must be finite and > 0"),
    ({"n_components": 2, "formulation": "primal", "kernel": RBF(1.0)}, "explicit feature map"),
    ({"n_components": 2, "kernel": RBF(1.0), "feature_map": Identity()}, "at most one"),
    ({"n_components": 2, "formulation": "kernel"}, "formulation must be"),
])
def test_bad_parameters_raise_clear_errors(kwargs, match):
    X = _data(20, 6)[:, :6]
    X = X[:7]                                   # rank of K_c: 6
    with pytest.raises(ValueError, match=match):
        KernelPPCA(**kwargs).fit(X)


def test_bad_inputs_raise_clear_errors():
    X = _data(20, 3)
    with pytest.raises(ValueError, match="NaN"):
        KernelPPCA(n_components=1).fit(np.where(X > 2, np.nan, X))
    with pytest.raises(ValueError, match="not positive semi-definite"):
        KernelPPCA(n_components=1, kernel=lambda A, B=None: -RBF(1.0)(A, B)).fit(X)
    with pytest.raises(ValueError, match="not fitted"):
        KernelPPCA(n_components=1).transform(X)
    m = KernelPPCA(n_components=2).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        m.transform(np.full((1, 3), np.nan))
    with pytest.raises(ValueError, match="features"):
        m.transform(X[:, :2])
    bound = m.eigenvalues_[1] / 20
    with pytest.raises(ValueError, match=f"lambda_2 / N = {bound:.6g}"):
        m.with_sigma2(bound)
    with pytest.raises(ValueError, match="sigma2 > 0"):
        m.with_sigma2(0.0).score_samples(X)
    with pytest.raises(ValueError, match="primal"):
        m.get_covariance()
    with pytest.raises(ValueError, match="output"):
        m.reconstruct(X, output="feature")


def test_fit_transform_and_sklearn_conventions():
    X = _data(20, 3)
    m = KernelPPCA(n_components=2, kernel=RBF(2.0))
    assert m.get_params()["n_components"] == 2 and not hasattr(m, "sigma2_")
    H = m.fit_transform(X)
    assert H.shape == (20, 2) and np.allclose(H, m.transform(X))
    m2 = m.with_sigma2(0.5 * m.sigma2_)
    assert m2.sigma2_ != m.sigma2_ and m2.n_components_ == m.n_components_
