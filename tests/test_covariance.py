"""The streamed reduction (mvkm.covariance) and the streamed primal fits built on it.

Every check compares a streamed computation (numpy chunks, torch, Dask) with
an independent in-memory one: the features formed whole and centred before
their product, or the in-memory fit of the same estimator.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from mvkm import (
    RBF,
    Identity,
    KernelPPCA,
    MultiViewKPLS,
    MultiViewRKM,
    Nystrom,
    RandomFourierFeatures,
)
from mvkm.covariance import FeatureMoments, feature_moments
from mvkm._optional import optional_torch

torch = optional_torch()   # None where torch is absent: the device tests skip (tests/conftest.py)
CUDA = torch is not None and torch.cuda.is_available()

try:
    import dask.array as da
except ImportError:  # pragma: no cover - dask is in the test extra; the GPU machine may lack it
    da = None
needs_dask = pytest.mark.skipif(da is None, reason="dask is not installed")


def _views(n: int = 2000, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * [1.0, 2.0, 0.5, 3.0] + 10.0
    Y = np.c_[np.sin(X[:, 0]), X[:, 1] * X[:, 2]] + 0.1 * rng.normal(size=(n, 2))
    return X, Y


def _in_memory(views, maps):
    Phi = np.hstack([m.transform(X) for m, X in zip(maps, views)])
    mean = Phi.mean(axis=0)
    Pc = Phi - mean
    return mean, Pc.T @ Pc, float(np.max(np.einsum("ij,ij->i", Phi, Phi)))


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# ------------------------------------------------------------------ the reduction
@pytest.mark.parametrize("batch_size", [1, 7, 256, 1999, 2000, None])
def test_moments_equal_the_in_memory_scatter_for_every_batch_size(batch_size):
    X, Y = _views()
    maps = [RandomFourierFeatures(2.0, 64, random_state=0).fit(X), Identity().fit(Y)]
    mean, S, maxsq = _in_memory([X, Y], maps)
    m = feature_moments([X, Y], maps, batch_size=batch_size)
    assert m.n_samples == 2000 and m.dims == [64, 2]
    assert _rel(m.scatter, S) < 1e-12
    assert np.allclose(m.mean, mean, rtol=1e-13, atol=1e-13)
    assert m.max_sq_norm == pytest.approx(maxsq, rel=1e-12)
    assert np.array_equal(m.scatter, m.scatter.T)
    assert all(np.allclose(a, b) for a, b in zip(m.view_means(), (mean[:64], mean[64:])))
    assert np.allclose(m.block(0, 1), S[:64, 64:])


def test_merge_is_the_moments_of_the_union():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(30, 3)) + 5, rng.normal(size=(50, 3)) * 2
    ma, mb = (feature_moments([Z], [Identity().fit(Z)]) for Z in (A, B))
    both = ma.merge(mb)
    mean, S, _ = _in_memory([np.vstack([A, B])], [Identity().fit(A)])
    assert both.n_samples == 80
    assert _rel(both.scatter, S) < 1e-13 and np.allclose(both.mean, mean)
    empty = FeatureMoments(0, np.zeros(3), np.zeros((3, 3)), [3])
    assert empty.merge(ma) is ma and ma.merge(empty) is ma


def test_streaming_is_stable_at_a_million_points_with_a_large_mean():
    """1e-10 relative at n = 10^6, where the one-pass textbook formula loses every digit."""
    rng = np.random.default_rng(2)
    n = 1_000_000
    X = rng.normal(size=(n, 6)) * [1.0, 0.1, 2.0, 1.0, 0.5, 3.0] + 1e4
    m = feature_moments([X], [Identity().fit(X)], batch_size=65_536)
    Xc = X - X.mean(axis=0)
    S = Xc.T @ Xc
    assert _rel(m.scatter, S) < 1e-10
    naive = X.T @ X - n * np.outer(X.mean(axis=0), X.mean(axis=0))
    assert _rel(naive, S) > 1e-6                      # why the merge is needed


def test_torch_cpu_and_float32_against_numpy():
    X, Y = _views()
    maps = [RandomFourierFeatures(1.5, 96, random_state=3).fit(X), Identity().fit(Y)]
    _, S, _ = _in_memory([X, Y], maps)
    assert _rel(feature_moments([X, Y], maps, batch_size=300, device="cpu").scatter, S) < 1e-12
    # float32 features and chunk products, merged in float64: relative error ~ sqrt(b) eps_32
    for device in (None, "cpu"):
        err = _rel(feature_moments([X, Y], maps, batch_size=300, dtype="float32",
                                   device=device).scatter, S)
        assert 1e-10 < err < 1e-5


@pytest.mark.parametrize("offset", [1e4, 1e6, 1e8])
@pytest.mark.parametrize("device", [None, "cpu"])
def test_float32_keeps_its_digits_on_data_with_a_large_mean(offset, device):
    # issue 21, item 3: the views are shifted in float64 before the cast, so the bound
    # sqrt(b) eps_32 ~ 1e-6 holds whatever the mean (before: 7e-6, 1e-3 and 1.0 for identity
    # features at these offsets, 5e-2 and 1.0 for random Fourier features at 1e6 and 1e8)
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(3000, 4)) * [1.0, 2.0, 0.5, 3.0]
    X = offset + Z
    maps = [Identity().fit(X), RandomFourierFeatures(2.0, 40, random_state=0).fit(X)]
    Phi = np.hstack([Z, maps[1].transform(X)])     # Z: the identity features, centred exactly
    Phi_c = Phi - Phi.mean(axis=0)
    m = feature_moments([X, X], maps, batch_size=500, dtype="float32", device=device)
    assert _rel(m.scatter, Phi_c.T @ Phi_c) < 1e-5
    mean = np.r_[X.mean(axis=0), Phi[:, 4:].mean(axis=0)]
    assert np.allclose(m.mean, mean, rtol=1e-12, atol=1e-6)
    norms = (np.hstack([X, Phi[:, 4:]]) ** 2).sum(axis=1).max()
    assert abs(m.max_sq_norm / norms - 1.0) < 1e-5


@pytest.mark.parametrize("kwargs, scale", [({}, 1e200), ({"device": "cpu"}, 1e200),
                                           ({"dtype": "float32"}, 1e30)])
def test_overflowing_scatter_is_a_clear_error(kwargs, scale):
    # issue 21, item 6: finite features whose products overflow gave an infinite scatter
    X = np.random.default_rng(0).uniform(-1.0, 1.0, size=(50, 3)) * scale
    with pytest.raises(ValueError, match="scatter of the features is not finite.*rescale"):
        feature_moments([X], [Identity().fit(X)], **kwargs)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_cuda_matches_numpy():  # pragma: no cover - CI has no GPU
    X, Y = _views()
    maps = [RandomFourierFeatures(1.5, 96, random_state=3).fit(X), Identity().fit(Y)]
    _, S, _ = _in_memory([X, Y], maps)
    assert _rel(feature_moments([X, Y], maps, batch_size=300, device="cuda").scatter, S) < 1e-11
    model = MultiViewRKM(4, feature_maps=maps, formulation="primal", device="cuda").fit([X, Y])
    ref = MultiViewRKM(4, feature_maps=maps, formulation="primal").fit([X, Y])
    assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-10)


@needs_dask
def test_dask_threads_scheduler_matches_numpy():
    X, Y = _views()
    maps = [Nystrom(RBF(2.0), 50, random_state=0).fit(X), Identity().fit(Y)]
    _, S, _ = _in_memory([X, Y], maps)
    m = feature_moments([da.from_array(X, chunks=333), da.from_array(Y, chunks=(500, 2))], maps)
    assert m.n_samples == 2000 and _rel(m.scatter, S) < 1e-12


def test_the_streamed_fit_never_allocates_n_by_D():
    """tracemalloc sees every numpy allocation: the peak stays far below the n x D features."""
    rng = np.random.default_rng(4)
    n, m = 20_000, 300
    X = rng.normal(size=(n, 5))
    Y = rng.normal(size=(n, 1))
    fm = [Nystrom(RBF(3.0), m, random_state=0), Identity()]
    full = n * (m + 1) * 8                             # 48 MB of features
    model = MultiViewRKM(5, feature_maps=fm, formulation="primal", batch_size=500)
    tracemalloc.start()
    model.fit([X, Y])
    model.transform([X, Y])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < full / 4, (peak, full)             # measured: 6.4 MB of 48 MB
    tracemalloc.start()
    MultiViewRKM(5, feature_maps=fm, formulation="primal").fit([X, Y])
    _, peak_in_memory = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak_in_memory > full                        # the in-memory fit does hold them


# ------------------------------------------------------------------ estimators
def _check_same_rkm(model, ref, X, Y, rtol):
    assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=rtol)
    assert np.allclose(np.abs(model.H_), np.abs(ref.H_), atol=rtol * 10)
    T = np.asarray(model.transform([X[:40], Y[:40]]))
    assert np.allclose(np.abs(T), np.abs(ref.transform([X[:40], Y[:40]])), atol=rtol * 10)
    P = np.asarray(model.predict([X[:40], None], target=1))
    assert np.allclose(P, ref.predict([X[:40], None], target=1), atol=rtol * 100)


@pytest.mark.parametrize("kw, rtol", [({"batch_size": 128}, 1e-10), ({"device": "cpu"}, 1e-10),
                                      ({"batch_size": 500, "dtype": "float32"}, 1e-4)])
def test_rkm_primal_streamed_equals_in_memory(kw, rtol):
    X, Y = _views()
    fm = [RandomFourierFeatures(2.0, 80, random_state=1), Identity()]
    ref = MultiViewRKM(4, feature_maps=fm, formulation="primal").fit([X, Y])
    model = MultiViewRKM(4, feature_maps=fm, formulation="primal", **kw).fit([X, Y])
    _check_same_rkm(model, ref, X, Y, rtol)
    assert not hasattr(model, "_Phi_c") or all(P is None for P in model._Phi_c)


@pytest.mark.parametrize("sigma", [2.0, 40.0])
@pytest.mark.parametrize("other", ["identity", "rff", "nystrom"])
@pytest.mark.parametrize("nystrom_first", [True, False])
def test_rkm_primal_streamed_with_a_nystrom_view_equals_in_memory(nystrom_first, other, sigma):
    # the second pass multiplies the raw rows K(X, L) by N_v W_v formed once (fold_raw): its
    # latent variables must equal the in-memory fit's, with the Nystrom view first or second,
    # beside an identity, random-feature or second Nystrom view (another m), and with r = m
    # (sigma = 2) or r < m (sigma = 40: K_mm of numerical rank below m, so that the raw width
    # m and the feature width r differ)
    X, Y = _views()
    nys = Nystrom(RBF(sigma), 70, random_state=0)
    second = {"identity": Identity(), "rff": RandomFourierFeatures(2.0, 30, random_state=1),
              "nystrom": Nystrom(RBF(1.5), 40, random_state=2)}[other]
    fm, views = [nys, second], [X, Y]
    if not nystrom_first:
        fm, views = fm[::-1], views[::-1]
    ref = MultiViewRKM(4, feature_maps=fm, formulation="primal").fit(views)
    model = MultiViewRKM(4, feature_maps=fm, formulation="primal", batch_size=128).fit(views)
    r = model._maps[fm.index(nys)].n_features_out_
    assert (r < 70) if sigma == 40.0 else (r == 70)
    assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    assert np.allclose(np.abs(model.H_), np.abs(ref.H_), atol=1e-8)
    if other != "identity":   # (a 2-d identity view cannot determine 4 latent components)
        # predicting the Nystrom view recomputes its training features from the raw rows
        given = [None, None]
        given[1 - fm.index(nys)] = views[1 - fm.index(nys)][:30]
        P = np.asarray(model.predict(given, target=fm.index(nys)))
        P_ref = np.asarray(ref.predict(given, target=fm.index(nys)))
        assert np.allclose(P, P_ref, rtol=0, atol=1e-9 * np.abs(P_ref).max())


def test_rkm_predict_through_a_preimage_recomputes_the_training_features():
    X, Y = _views(600)
    fm = [Identity(), RandomFourierFeatures(1.0, 60, random_state=2)]
    ref = MultiViewRKM(3, feature_maps=fm, formulation="primal").fit([X, Y])
    model = MultiViewRKM(3, feature_maps=fm, formulation="primal", batch_size=77).fit([X, Y])
    assert np.allclose(model.predict([X[:30], None], 1), ref.predict([X[:30], None], 1), atol=1e-9)


@needs_dask
def test_rkm_on_dask_views_returns_dask_and_equals_in_memory():
    X, Y = _views()
    fm = [Nystrom(RBF(2.0), 60, random_state=0), Identity()]
    ref = MultiViewRKM(4, feature_maps=fm, formulation="primal").fit([X, Y])
    model = MultiViewRKM(4, feature_maps=fm, formulation="primal").fit(
        [da.from_array(X, chunks=400), da.from_array(Y, chunks=300)])
    assert isinstance(model.H_, np.ndarray)
    assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert np.allclose(model._maps[0].landmarks_, ref._maps[0].landmarks_ if hasattr(ref, "_maps")
                       else fm[0].fit(X).landmarks_)
    T = model.transform([da.from_array(X[:100], chunks=30), None])
    assert isinstance(T, da.Array)
    assert np.allclose(T.compute(), ref.transform([X[:100], None]), atol=1e-9)


@needs_dask
def test_ppca_primal_streamed_equals_in_memory():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 5)) * [3.0, 2.0, 1.0, 0.5, 0.2] + 4.0
    for fm in (Identity(), RandomFourierFeatures(2.0, 60, random_state=0)):
        ref = KernelPPCA(2, feature_map=fm, formulation="primal").fit(X)
        for model in (KernelPPCA(2, feature_map=fm, formulation="primal", batch_size=100).fit(X),
                      KernelPPCA(2, feature_map=fm, formulation="primal").fit(
                          da.from_array(X, chunks=400))):
            assert model.rank_ == ref.rank_ and model.n_components_ == ref.n_components_
            assert model.sigma2_ == pytest.approx(ref.sigma2_, rel=1e-10)
            assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
            assert np.allclose(model.W_, ref.W_, atol=1e-10)
            T = np.asarray(model.transform(X[:20]))
            assert np.allclose(T, ref.transform(X[:20]), atol=1e-10)
            assert np.allclose(model.score_samples(X[:5]), ref.score_samples(X[:5]), rtol=1e-10)
            assert np.allclose(model.inverse_transform(T[:3]), ref.inverse_transform(T[:3]), atol=1e-9)
            assert np.allclose(model.eigenvectors_[:, :2], ref.eigenvectors_[:, :2], atol=1e-9)
            assert not hasattr(model, "Phi_fit_")


@needs_dask
def test_kpls_primal_streamed_equals_in_memory():
    rng = np.random.default_rng(6)
    t = rng.uniform(0, 6, 1200)
    views = [np.c_[np.cos(t), np.sin(t)] + 0.05 * rng.normal(size=(1200, 2)),
             np.c_[t, np.sqrt(t)] + 0.05 * rng.normal(size=(1200, 2))]
    kernels = [RandomFourierFeatures(1.0, 40, random_state=0), RandomFourierFeatures(2.0, 30, random_state=1)]
    ref = MultiViewKPLS(3, kernels=kernels, formulation="primal").fit(views)
    for model in (MultiViewKPLS(3, kernels=kernels, formulation="primal", batch_size=97).fit(views),
                  MultiViewKPLS(3, kernels=kernels, formulation="primal").fit(
                      [da.from_array(v, chunks=250) for v in views])):
        assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
        for a, b in zip(model.dual_coef_, ref.dual_coef_):
            assert np.allclose(a, b, atol=1e-10)
        for a, b in zip(model.transform([v[:30] for v in views]), ref.transform([v[:30] for v in views])):
            assert np.allclose(np.asarray(a), b, atol=1e-10)


def test_progress_bar_shows_when_asked(capsys):
    X, Y = _views(500)
    MultiViewRKM(2, formulation="primal", batch_size=50, progress=True).fit([X, Y])
    assert "feature moments" in capsys.readouterr().err


# ------------------------------------------------------------------ errors
@needs_dask
def test_clear_errors():
    X, Y = _views(200)
    with pytest.raises(ValueError, match="batch_size"):
        MultiViewRKM(2, formulation="primal", batch_size=0).fit([X, Y])
    with pytest.raises(ValueError, match="dtype"):
        MultiViewRKM(2, formulation="primal", dtype="float16").fit([X, Y])
    with pytest.raises(ValueError, match="primal"):
        MultiViewRKM(2, formulation="dual", batch_size=10).fit([X, Y])
    with pytest.raises(ValueError, match="primal"):
        KernelPPCA(2, batch_size=10).fit(X)
    with pytest.raises(ValueError, match="device"):
        MultiViewRKM(2, formulation="primal", device="not-a-device").fit([X, Y])
    if not CUDA:
        with pytest.raises(ValueError, match="CUDA"):
            MultiViewRKM(2, formulation="primal", device="cuda").fit([X, Y])
    with pytest.raises(ValueError, match="dask arrays need formulation='primal'"):
        MultiViewRKM(2).fit([da.from_array(X), da.from_array(Y)])
    bad = X.copy()
    bad[150, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MultiViewRKM(2, formulation="primal").fit([da.from_array(bad, chunks=50), Y])
    with pytest.raises(ValueError, match="same number of samples"):
        feature_moments([X, Y[:100]], [Identity().fit(X), Identity().fit(Y)])
    with pytest.raises(ValueError, match="2 views but 1 feature maps"):
        feature_moments([X, Y], [Identity().fit(X)])
    with pytest.raises(ValueError, match="dask views"):
        from sklearn.preprocessing import StandardScaler
        MultiViewRKM(2, formulation="primal", feature_maps=[StandardScaler(), Identity()]).fit(
            [da.from_array(X), da.from_array(Y)])


@needs_dask
def test_local_cluster_of_two_processes_equals_in_memory():
    """The issue's set-up: LocalCluster(n_workers=2, processes=True), started here, no network."""
    distributed = pytest.importorskip("distributed")
    X, Y = _views(6000, seed=7)
    fm = [RandomFourierFeatures(2.0, 100, random_state=0), Identity()]
    ref = MultiViewRKM(5, feature_maps=fm, formulation="primal").fit([X, Y])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        model = MultiViewRKM(5, feature_maps=fm, formulation="primal").fit(
            [da.from_array(X, chunks=1000), da.from_array(Y, chunks=1000)])
        T = model.transform([da.from_array(X[:500], chunks=100), None]).compute()
    rel = np.max(np.abs(model.eigenvalues_ / ref.eigenvalues_ - 1))
    assert rel < 1e-10, rel
    assert np.allclose(np.abs(model.H_), np.abs(ref.H_), atol=1e-10)
    assert np.allclose(T, ref.transform([X[:500], None]), atol=1e-9)


# ------------------------------------------------------------------ the matrix-free dual in the estimators
@pytest.mark.parametrize("kernels", [[RBF(2.0)], [RBF(2.0), RBF(1.0)], [RBF(2.0), None]],
                         ids=["one-kernel", "two-kernels", "kernel-and-linear"])
def test_rkm_dual_without_stored_kernels_equals_the_dense_dual(kernels):
    from mvkm import Linear

    X, Y = _views(900)
    X, Y = ((Z - Z.mean(0)) / Z.std(0) for Z in (X, Y))
    ks = [Linear() if k is None else k for k in kernels]
    views = [X, Y][:len(ks)]
    ref = MultiViewRKM(4, kernels=ks, kernel_storage="dense").fit(views)
    model = MultiViewRKM(4, kernels=ks, kernel_storage="none").fit(views)
    assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    assert np.allclose(model.H_, ref.H_, atol=1e-8)
    assert np.allclose(model.transform([v[:25] for v in views]), ref.transform([v[:25] for v in views]),
                       atol=1e-8)
    if len(ks) == 2:
        assert np.allclose(model.predict([X[:25], None], 1), ref.predict([X[:25], None], 1), atol=1e-7)
    with pytest.raises(ValueError, match="kernel_storage"):
        MultiViewRKM(2, kernels=ks, kernel_storage="sometimes").fit(views)


def test_several_views_matrix_free_start_from_one_nystrom_start(monkeypatch):
    # issue 35, item 11: the summed operator's random start took 34 kernel passes here
    # (17 per view; each view's own Nystrom-started solve takes 4-6), each pass recomputing
    # a view's tiles; at n = 30,000 two RBF views did not finish in 600 s. One Nystrom start
    # for the sum: 12 passes (6 per view), plus one per view for the scores
    import mvkm.matfree as matfree

    X, Y = _views(900)
    X, Y = ((Z - Z.mean(0)) / Z.std(0) for Z in (X, Y))
    passes = [0]
    product = matfree.KernelOperator._matmat

    def counted(self, Z):
        passes[0] += 1
        return product(self, Z)

    monkeypatch.setattr(matfree.KernelOperator, "_matmat", counted)
    model = MultiViewRKM(4, kernels=[RBF(2.0), RBF(1.0)], kernel_storage="none").fit([X, Y])
    assert passes[0] <= 16
    ref = MultiViewRKM(4, kernels=[RBF(2.0), RBF(1.0)], kernel_storage="dense").fit([X, Y])
    assert np.allclose(model.eigenvalues_, ref.eigenvalues_, rtol=1e-10)


def test_ppca_dual_without_stored_kernel_equals_the_dense_dual():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(2100, 3))                    # above DENSE_MAX_N: only the top q
    ref = KernelPPCA(3, kernel=RBF(2.0), kernel_storage="dense").fit(X)
    model = KernelPPCA(3, kernel=RBF(2.0), kernel_storage="none").fit(X)
    assert model.rank_ == ref.rank_
    assert model.sigma2_ == pytest.approx(ref.sigma2_, rel=1e-10)
    assert np.allclose(model.A_, ref.A_, atol=1e-10)
    assert np.allclose(model.transform(X[:10]), ref.transform(X[:10]), atol=1e-9)
    assert np.allclose(model.score_samples(X[:5]), ref.score_samples(X[:5]), rtol=1e-9)


def test_nystrom_raw_reduction_and_folded_second_pass():
    # issue 25, item 2: the scatter of the raw K(X, L) mapped by N once equals the scatter of
    # the features K(X, L) N on its leading eigenvalues (round-off), and features_times folds N
    # into the m x k matrix: the same product as the features times A
    from mvkm.covariance import features_times

    X, Y = _views(3000)
    maps = [Nystrom(RBF(2.0), 300, random_state=0).fit(X), Identity().fit(Y)]
    mean, S, exact = _in_memory([X, Y], maps)
    Phi = np.hstack([m.transform(Z) for m, Z in zip(maps, [X, Y])])
    raw = feature_moments([X, Y], maps, batch_size=700, nystrom_raw=True)
    lam = np.sort(np.linalg.eigvalsh(raw.scatter))[::-1][:10]
    lam_ref = np.sort(np.linalg.eigvalsh(S))[::-1][:10]
    assert np.allclose(lam, lam_ref, rtol=1e-11)
    assert np.allclose(raw.mean, mean, rtol=0, atol=1e-12)
    assert raw.dims == [maps[0].n_features_out_, 2]
    # max_sq_norm: the Nystrom part bounded by k(x, x) = 1, the identity part exact
    assert exact <= raw.max_sq_norm <= exact + 1.0
    A = np.random.default_rng(1).normal(size=(Phi.shape[1], 4))
    assert np.allclose(features_times(maps, [X[:500], Y[:500]], A), Phi[:500] @ A,
                       rtol=0, atol=1e-9 * np.abs(Phi[:500] @ A).max())


def test_nystrom_raw_single_view_uses_the_kernel_rows_buffer():
    # issue 25, item 2: with one Nystrom view the raw rows K(X, L) are computed column-major
    # (as K(L, X)^T) and reduced without a copy into the chunk buffer; the moments must equal
    # the in-memory ones (add() subtracts the chunk mean in place from the buffer it is given)
    from mvkm.covariance import chunk_features

    X, _ = _views(2500)
    fm = Nystrom(RBF(2.0), 200, random_state=0).fit(X)
    work = np.empty(300 * 200)
    F = chunk_features([fm], [X[:300]], raw=True, out=work)
    K_rows = RBF(2.0)(X[:300], fm.landmarks_)
    assert F.flags.f_contiguous and F.shape == K_rows.shape and not np.shares_memory(F, work)
    assert np.allclose(F, K_rows, rtol=0, atol=1e-14)
    # a user's callable kernel may hand back an array it keeps: that one is copied into out
    cached = {}

    def keeping(A, B=None):
        cached["K"] = RBF(2.0)(A, B)
        return cached["K"]

    fm_user = Nystrom(keeping, 200, random_state=0).fit(X)
    F_user = chunk_features([fm_user], [X[:300]], raw=True, out=work)
    assert np.shares_memory(F_user, work) and not np.shares_memory(F_user, cached["K"])
    mean, S, _ = _in_memory([X], [fm])
    raw = feature_moments([X], [fm], batch_size=600, nystrom_raw=True)
    lam = np.sort(np.linalg.eigvalsh(raw.scatter))[::-1][:10]
    assert np.allclose(lam, np.sort(np.linalg.eigvalsh(S))[::-1][:10], rtol=1e-11)
    assert np.allclose(raw.mean, mean, rtol=0, atol=1e-12)
