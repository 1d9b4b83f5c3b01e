"""Tests of mvkm.MultiViewKPLS (Part III): the dual eigenproblem (3) and the scores (4)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import mvkm
from mvkm import MultiViewKPLS
from mvkm.kernels import center_gram


def _views(N=60, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 6, N)
    return [np.c_[np.cos(t), np.sin(t)] + 0.05 * rng.standard_normal((N, 2)),
            np.c_[t, t ** 2 / 6],
            rng.standard_normal((N, 3)) + t[:, None]]


KERNELS = [mvkm.RBF(1.0), mvkm.RBF(2.0), mvkm.Laplacian(3.0)]


def _omega_eig(Ks):
    """Dense eig of Omega = E D, formed block by block (independent of the package's routes)."""
    V, N = len(Ks), Ks[0].shape[0]
    Om = np.zeros((V * N, V * N))
    for v in range(V):
        for u in range(V):
            if u != v:
                Om[v * N:(v + 1) * N, u * N:(u + 1) * N] = Ks[u]
    lam, vec = np.linalg.eig(Om)
    order = np.argsort(-lam.real)
    # A real spectrum (self-adjoint in the D inner product): imaginary parts are round-off.
    assert np.abs(lam.imag).max() < 1e-8 * np.abs(lam).max()
    return lam.real[order], vec[:, order].real


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
@pytest.mark.parametrize("center", [True, False])
def test_estimator_matches_dense_eig_of_omega(solver, center):
    views = _views()
    Ks = [k(X) for k, X in zip(KERNELS, views)]
    Ks = [center_gram(K) for K in Ks] if center else Ks
    lam, vec = _omega_eig(Ks)
    model = MultiViewKPLS(5, kernels=KERNELS, center=center, solver=solver, random_state=0).fit(views)
    # eig of a 180 x 180 non-symmetric matrix vs a symmetric route: ~1e-14 relative here.
    np.testing.assert_allclose(model.eigenvalues_, lam[:5], rtol=1e-10)
    scores = model.transform(views)
    N = views[0].shape[0]
    for j in range(5):
        ref = np.concatenate([Ks[v] @ vec[v * N:(v + 1) * N, j] for v in range(3)])
        got = np.concatenate([s[:, j] for s in scores])
        cos = abs(got @ ref) / np.linalg.norm(got) / np.linalg.norm(ref)
        assert cos > 1 - 1e-9                           # the same direction, up to sign
    # sum_v alpha_v^T K_v alpha_v = 1 for every component (D-orthonormal columns)
    G = sum(a.T @ K @ a for a, K in zip(model.dual_coef_, Ks))
    np.testing.assert_allclose(G, np.eye(5), atol=1e-9)


def test_two_views_pair_with_sqrt_eig_K1K2():
    views = _views()[:2]
    Ks = [center_gram(k(X)) for k, X in zip(KERNELS, views)]
    mu = np.sort(np.linalg.eigvals(Ks[0] @ Ks[1]).real)[::-1]
    model = MultiViewKPLS(6, kernels=KERNELS[:2]).fit(views)
    np.testing.assert_allclose(model.eigenvalues_, np.sqrt(mu[:6]), rtol=1e-9)
    lam, _ = _omega_eig(Ks)
    np.testing.assert_allclose(lam[-6:][::-1], -np.sqrt(mu[:6]), rtol=1e-8)   # and the negatives


def test_primal_with_explicit_features_equals_dual():
    views = _views()[:2]
    rff = mvkm.RandomFourierFeatures(1.0, 150, random_state=3)
    primal = MultiViewKPLS(2, kernels=[rff, mvkm.Linear()], formulation="primal").fit(views)
    Phi = mvkm.RandomFourierFeatures(1.0, 150, random_state=3).fit(views[0]).transform(views[0])
    dual = MultiViewKPLS(2, kernels=mvkm.Linear()).fit([Phi, views[1]])
    np.testing.assert_allclose(primal.eigenvalues_, dual.eigenvalues_, rtol=1e-10)
    for a, b in zip(primal.transform(views), dual.transform([Phi, views[1]])):
        np.testing.assert_allclose(a, b, atol=1e-9)
    for a, b in zip(primal.dual_coef_, dual.dual_coef_):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_out_of_sample_on_training_rows_equals_training_scores():
    views = _views()
    model = MultiViewKPLS(4, kernels=KERNELS).fit(views)
    Ks = [center_gram(k(X)) for k, X in zip(KERNELS, views)]
    for K, a, s in zip(Ks, model.dual_coef_, model.transform(views)):
        np.testing.assert_allclose(s, K @ a, atol=1e-10)
    # and new rows are centred with the training means, not their own
    new = [X[:7] + 0.3 for X in views]
    for v, (k, X, Xn) in enumerate(zip(KERNELS, views, new)):
        Kt = mvkm.center_test_gram(k(Xn, X), k(X))
        np.testing.assert_allclose(model.transform(new)[v], Kt @ model.dual_coef_[v], atol=1e-10)


def test_float_n_components_is_the_explained_variance_rule():
    views = _views()
    Ks = [center_gram(k(X)) for k, X in zip(KERNELS, views)]
    lam, _ = _omega_eig(Ks)
    ratio = np.cumsum(lam[lam > 0]) / lam[lam > 0].sum()
    k_ref = int(np.argmax(ratio >= 0.9)) + 1
    model = MultiViewKPLS(0.9, kernels=KERNELS).fit(views)
    assert model.n_components_ == k_ref
    np.testing.assert_allclose(model.explained_variance_ratio_, lam[:k_ref] / lam[lam > 0].sum(),
                               rtol=1e-9)
    # trace(Omega) = 0: the positive eigenvalues sum to minus the negative ones
    assert abs(lam[lam > 0].sum() + lam[lam < 0].sum()) < 1e-9 * lam[0]
    lanczos = MultiViewKPLS(3, kernels=KERNELS, solver="lanczos", random_state=1).fit(views)
    np.testing.assert_allclose(lanczos.explained_variance_ratio_,
                               lam[:3] / lam[lam > 0].sum(), rtol=1e-9)


def test_bad_inputs():
    views = _views()
    with pytest.raises(ValueError, match="at least 2 views"):
        MultiViewKPLS(2).fit(views[:1])
    with pytest.raises(ValueError, match="same number of rows"):
        MultiViewKPLS(2).fit([views[0], views[1][:-1]])
    bad = views[0].copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MultiViewKPLS(2).fit([bad, views[1]])
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        MultiViewKPLS(2).fit([bad, views[1]])
    with pytest.raises(ValueError, match="non-empty"):
        MultiViewKPLS(2).fit([np.zeros((60, 0)), views[1]])
    with pytest.raises(ValueError, match="positive eigenvalues"):
        MultiViewKPLS(5, kernels=mvkm.Linear()).fit(views[:2])     # rank 2 cross-covariance
    with pytest.raises(ValueError, match="positive eigenvalues"):
        MultiViewKPLS(5, kernels=mvkm.Linear(), solver="lanczos").fit(views[:2])
    for nc in (0, -1, 1.5, 0.0, "3", True):
        with pytest.raises(ValueError, match="n_components"):
            MultiViewKPLS(nc).fit(views)
    with pytest.raises(ValueError, match="formulation"):
        MultiViewKPLS(2, formulation="both").fit(views)
    with pytest.raises(ValueError, match="solver"):
        MultiViewKPLS(2, solver="eig").fit(views)
    with pytest.raises(ValueError, match="kernels"):
        MultiViewKPLS(2, kernels=[mvkm.RBF(1.0)] * 2).fit(views)
    with pytest.raises(ValueError, match="explicit feature map"):
        MultiViewKPLS(2, kernels=mvkm.RBF(1.0), formulation="primal").fit(views)
    with pytest.raises(NotFittedError):
        MultiViewKPLS(2).transform(views)
    model = MultiViewKPLS(2, kernels=KERNELS).fit(views)
    with pytest.raises(ValueError, match="3 views"):
        model.transform(views[:2])
    with pytest.raises(ValueError, match="features"):
        model.transform([views[0][:, :1], views[1], views[2]])


def test_refit_starts_clean_and_fit_transform():
    views = _views()
    model = MultiViewKPLS(3, kernels=KERNELS)
    scores = model.fit_transform(views)
    assert [s.shape for s in scores] == [(60, 3)] * 3
    model.set_params(n_components=2, kernels=KERNELS[:2]).fit(views[:2])
    assert model.n_views_ == 2 and len(model.dual_coef_) == 2 and model.eigenvalues_.shape == (2,)


def test_lanczos_falls_back_on_a_degenerate_spectrum():
    """Kernels close to the identity: the top eigenvalue V - 1 of Omega = E (x) M_c is repeated
    N - 1 times. With K = I to round-off each Krylov space is invariant after two steps and the
    restarts in its complement find the repeated eigenvalue; a nearly degenerate cluster
    (RBF(10): eigenvalues 2.48-2.54), which one Lanczos vector cannot resolve in the step
    budget, makes the fit warn and solve densely."""
    from mvkm.linalg import ConvergenceWarning

    rng = np.random.default_rng(3)
    views = [rng.standard_normal((300, 4)) * 50 for _ in range(3)]    # far apart: K = I to round-off
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = MultiViewKPLS(4, kernels=mvkm.RBF(1e-3), solver="lanczos", random_state=0).fit(views)
    np.testing.assert_allclose(model.eigenvalues_, 2.0, rtol=1e-10)   # E (x) M_c: V - 1 = 2
    with pytest.warns(ConvergenceWarning, match="dense"):
        model = MultiViewKPLS(4, kernels=mvkm.RBF(10.0), solver="lanczos", random_state=0).fit(views)
    dense = MultiViewKPLS(4, kernels=mvkm.RBF(10.0), solver="dense").fit(views)
    np.testing.assert_allclose(model.eigenvalues_, dense.eigenvalues_, rtol=1e-12)
