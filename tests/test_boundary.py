"""Estimators that fail cleanly (issue 22, items 1-3): atomic fit, booleans, feature-map outputs."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import check_is_fitted

import mvkm
import mvkm.datasets
import mvkm.preimage
import mvkm.timeseries
from mvkm.covariance import feature_moments

rng = np.random.default_rng(0)
X = rng.normal(size=(50, 3))
Y = rng.normal(size=(50, 2))
M = rng.normal(size=(20, 3, 4))
yM = np.repeat([0, 1], 10)


def _fitted_attrs(est):
    return [a for a in vars(est) if a.endswith("_") and not a.startswith("__")]


# (factory, good fit args, bad fit args) for every estimator and errors raised at
# different stages of fit: before any state (input checks), after fitted attributes
# were set (the rank check of MultiViewRKM, sigma2 of KernelPPCA), inside a solver.
FAILING_FITS = {
    "rkm-rank": (lambda: mvkm.MultiViewRKM(6), ([X[:, :2], Y[:, :1]],)),
    "rkm-nan": (lambda: mvkm.MultiViewRKM(2), ([X, np.full_like(Y, np.nan)],)),
    "rkm-primal-rank": (lambda: mvkm.MultiViewRKM(3, formulation="primal"), ([X[:, :1], Y[:, :1]],)),
    "rkm-stiefel-rank": (lambda: mvkm.MultiViewRKM(6, solver="stiefel", random_state=0),
                         ([X[:, :2], Y[:, :1]],)),
    "ppca-sigma2": (lambda: mvkm.KernelPPCA(sigma2=1e6), (X,)),
    "ppca-rank": (lambda: mvkm.KernelPPCA(5), (X[:, :2],)),
    "ppca-nan": (lambda: mvkm.KernelPPCA(1), (np.full_like(X, np.nan),)),
    "kpls-views": (lambda: mvkm.MultiViewKPLS(2), ([X, Y[:10]],)),
    "kpls-nan": (lambda: mvkm.MultiViewKPLS(2), ([X, np.full_like(Y, np.inf)],)),
    "smm-classes": (lambda: mvkm.LowRankSMM(rank=1), (M, np.zeros(20))),
    "smm-rank": (lambda: mvkm.LowRankSMM(rank=9), (M, yM)),
    "rff-gamma": (lambda: mvkm.RandomFourierFeatures(sigma=-1.0, n_features=10), (X,)),
    "nystrom-nan": (lambda: mvkm.Nystrom(mvkm.RBF(1.0), n_landmarks=5), (np.full_like(X, np.nan),)),
    "identity-1d": (lambda: mvkm.Identity(), (np.zeros((2, 2, 2)),)),
}

GOOD_FITS = {
    "rkm": (lambda: mvkm.MultiViewRKM(2), ([X, Y],)),
    "ppca": (lambda: mvkm.KernelPPCA(2), (X,)),
    "kpls": (lambda: mvkm.MultiViewKPLS(2), ([X, Y],)),
    "smm": (lambda: mvkm.LowRankSMM(rank=1), (M, yM)),
    "rff": (lambda: mvkm.RandomFourierFeatures(n_features=10, random_state=0), (X,)),
    "nystrom": (lambda: mvkm.Nystrom(mvkm.RBF(1.0), n_landmarks=5, random_state=0), (X,)),
    "identity": (lambda: mvkm.Identity(), (X,)),
}


@pytest.mark.parametrize("case", sorted(FAILING_FITS))
def test_failed_fit_leaves_estimator_unfitted(case):
    make, args = FAILING_FITS[case]
    est = make()
    params = est.get_params()
    with pytest.raises((ValueError, TypeError)):
        est.fit(*args)
    assert _fitted_attrs(est) == []
    assert [a for a in vars(est) if a.startswith("_") and not a.startswith("_sklearn")] == []
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    assert est.get_params() == params


@pytest.mark.parametrize("case", sorted(FAILING_FITS))
def test_failed_refit_leaves_estimator_unfitted(case):
    """A refit that fails forgets the previous model too (no mix of old and new state)."""
    make, args = FAILING_FITS[case]
    good = GOOD_FITS[case.split("-")[0]]
    est = make()
    fresh = good[0]()
    fresh.set_params(**{k: v for k, v in est.get_params().items() if k in ("kernel", "kernels")})
    est.set_params(**fresh.get_params())
    est.fit(*good[1])
    check_is_fitted(est)
    est.set_params(**make().get_params())
    with pytest.raises((ValueError, TypeError)):
        est.fit(*args)
    assert _fitted_attrs(est) == []
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


def test_rkm_transform_after_failed_fit_raises():
    """The example of the issue: transform and predict worked after the rank error."""
    m = mvkm.MultiViewRKM(6)
    with pytest.raises(ValueError, match="numerical rank"):
        m.fit([X[:, :2], Y[:, :1]])
    with pytest.raises(NotFittedError):
        m.transform([X[:, :2], Y[:, :1]])
    with pytest.raises(NotFittedError):
        m.predict([X[:, :2], None], target=1)


def test_interrupted_fit_leaves_estimator_unfitted(monkeypatch):
    m = mvkm.KernelPPCA(2)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(mvkm.KernelPPCA, "_fit_top", interrupt)
    with pytest.raises(KeyboardInterrupt):
        m.fit(X)
    assert _fitted_attrs(m) == []


# ------------------------------------------------------------------ booleans (item 2)
BOOL_CASES = {
    "MultiViewRKM(rotate)": lambda v: mvkm.MultiViewRKM(2, rotate=v).fit([X, Y]),
    "MultiViewRKM(rescale)": lambda v: mvkm.MultiViewRKM(2, rescale=v).fit([X, Y]),
    "MultiViewRKM(progress)": lambda v: mvkm.MultiViewRKM(2, progress=v).fit([X, Y]),
    "KernelPPCA(progress)": lambda v: mvkm.KernelPPCA(2, progress=v).fit(X),
    "MultiViewKPLS(center)": lambda v: mvkm.MultiViewKPLS(2, center=v).fit([X, Y]),
    "MultiViewKPLS(progress)": lambda v: mvkm.MultiViewKPLS(2, progress=v).fit([X, Y]),
    "LowRankSMM(fit_intercept)": lambda v: mvkm.LowRankSMM(rank=1, fit_intercept=v).fit(M, yM),
    "stable_kernel_smoother(clip)": lambda v: mvkm.preimage.stable_kernel_smoother(
        np.ones((2, 50)), X, clip=v),
    "load_mnist01(as_uint8)": lambda v: mvkm.datasets.load_mnist01(as_uint8=v),
    "load_mnist01(pool)": lambda v: mvkm.datasets.load_mnist01(pool=v),
    "psd_sqrt(inverse)": lambda v: mvkm.psd_sqrt(np.eye(2), inverse=v),
    "top_eigh(center)": lambda v: mvkm.top_eigh(np.eye(3), 1, center=v),
    "top_eigh(check_symmetric)": lambda v: mvkm.top_eigh(np.eye(3), 1, check_symmetric=v),
    "kernel_top_eigh(center)": lambda v: mvkm.kernel_top_eigh(X, mvkm.RBF(1.0), 1, center=v),
    "center_gram(copy)": lambda v: mvkm.center_gram(np.eye(3), copy=v),
    "maximize_trace(rotate)": lambda v: mvkm.maximize_trace(np.eye(3), 1, rotate=v),
    "maximize_trace(return_history)": lambda v: mvkm.maximize_trace(np.eye(3), 1, return_history=v),
    "maximize_trace(progress)": lambda v: mvkm.maximize_trace(np.eye(3), 1, progress=v),
    "matfree_top_eigh(return_info)": lambda v: mvkm.matfree_top_eigh(X, mvkm.RBF(1.0), 1,
                                                                     return_info=v),
    "feature_moments(progress)": lambda v: feature_moments([X], [mvkm.Identity().fit(X)],
                                                           progress=v),
    "recursive_forecast(progress)": lambda v: mvkm.timeseries.recursive_forecast(
        mvkm.MultiViewRKM(1).fit([X[:, :2], X[:, 2:]]), X[:5, 0], 2, progress=v),
}


@pytest.mark.parametrize("case", sorted(BOOL_CASES))
@pytest.mark.parametrize("value", ["no", 0, 1, None, "False"])
def test_boolean_parameters_refuse_non_booleans(case, value):
    if value is None and "progress" in case and case.split("(")[0] in (
            "MultiViewRKM", "KernelPPCA", "MultiViewKPLS", "feature_moments"):
        BOOL_CASES[case](value)          # None means "automatic" there
        return
    name = case.split("(")[1].rstrip(")")
    with pytest.raises(TypeError, match=rf"^{name} must be a bool \(True.*got {value!r} of type"):
        BOOL_CASES[case](value)


@pytest.mark.parametrize("case", sorted(BOOL_CASES))
def test_boolean_parameters_accept_numpy_bools(case):
    BOOL_CASES[case](np.False_)


# ------------------------------------------------------------------ feature maps (item 3)
half = FunctionTransformer(lambda A: A[: len(A) // 2])


@pytest.mark.parametrize("kw", [{}, {"batch_size": 10}])
def test_rkm_checks_feature_map_rows(kw):
    with pytest.raises(ValueError, match=r"feature_maps\[0\]\.transform must return one row per"):
        mvkm.MultiViewRKM(2, formulation="primal", feature_maps=[half, half], **kw).fit([X, Y])


def test_rkm_transform_checks_feature_map_width():
    class Grows(FunctionTransformer):
        pass

    m = mvkm.MultiViewRKM(2, formulation="primal",
                          feature_maps=[FunctionTransformer(), FunctionTransformer()]).fit([X, Y])
    m._maps[1] = FunctionTransformer(lambda A: np.hstack([A, A])).fit(Y)
    with pytest.raises(ValueError, match=r"feature_maps\[1\]\.transform returned 4 columns"):
        m.transform([X, Y])


def test_ppca_and_kpls_check_feature_map_rows():
    with pytest.raises(ValueError, match=r"feature_map\.transform must return one row per"):
        mvkm.KernelPPCA(2, formulation="primal", feature_map=half).fit(X)
    with pytest.raises(ValueError, match=r"kernels\[0\]\.transform must return one row per"):
        mvkm.MultiViewKPLS(2, formulation="primal", kernels=[half, half]).fit([X, Y])


class _Alternating:
    """A map whose width changes from call to call (1, 2, 1, 2, ... copies of the input)."""

    def __init__(self):
        self.calls = 0

    def fit(self, X, y=None):
        return self

    def transform(self, A):
        self.calls += 1
        return np.hstack([A] * (1 + self.calls % 2))


def test_feature_moments_checks_rows_and_width():
    with pytest.raises(ValueError, match=r"feature_maps\[0\]\.transform must return one row"):
        feature_moments([X, Y], [half.fit(X), half.fit(Y)], batch_size=10)
    with pytest.raises(ValueError, match="fixed output width"):
        feature_moments([X], [_Alternating()], batch_size=10)


# ------------------------------------------------------------------ KernelPPCA at a tie (item 4)
@pytest.mark.parametrize("q", [1, 2])
def test_ppca_refuses_zero_signal_at_tied_eigenvalues(q):
    """RBF(1.0) on raw pixels: K = I to round-off, sigma2_ = lambda_q / N, A = 0."""
    Xm = mvkm.datasets.load_mnist01(as_uint8=True)[0][:200].astype(float)
    m = mvkm.KernelPPCA(q, kernel=mvkm.RBF(1.0))
    with pytest.raises(ValueError, match=r"lambda_q / N = 0\.005 .*bandwidth.*RBF\(sigma=1\.0\)"):
        m.fit(Xm)
    with pytest.raises(NotFittedError):
        check_is_fitted(m)
    # a bandwidth at the data's scale keeps sigma2 below the bound (the check lets it through)
    ok = mvkm.KernelPPCA(q, kernel=mvkm.RBF(3000.0)).fit(Xm)
    assert ok.sigma2_ < 0.9 * ok.eigenvalues_[q - 1] / 200


# ------------------------------------------------------------------ messages (items 6, 7, 8)
def _unknown_chunks(A):
    da = pytest.importorskip("dask.array")
    dA = da.from_array(A, chunks=10)
    return dA[dA[:, 0] > -100]


@pytest.mark.parametrize("case", ["ppca", "feature_moments", "rkm", "kpls"])
def test_dask_unknown_chunk_sizes_say_compute_chunk_sizes(case):
    uX, uY = _unknown_chunks(X), _unknown_chunks(np.hstack([X[:, :1], Y]))
    fit = {
        "ppca": lambda: mvkm.KernelPPCA(2, formulation="primal").fit(uX),
        "feature_moments": lambda: feature_moments([uX], [mvkm.Identity().fit(X)]),
        "rkm": lambda: mvkm.MultiViewRKM(2, formulation="primal").fit([uX, uY]),
        "kpls": lambda: mvkm.MultiViewKPLS(2, formulation="primal").fit([uX, uY]),
    }[case]
    with pytest.raises(ValueError, match=r"unknown chunk sizes.*compute_chunk_sizes\(\)"):
        fit()


class _NanKernel(mvkm.RBF):
    def __call__(self, A, B=None):
        return np.full((len(A), len(A) if B is None else len(B)), np.nan)


RAW_ERRORS = {
    "rkm primal, constant views": (
        lambda: mvkm.MultiViewRKM(2, formulation="primal").fit([np.ones((50, 3)), np.ones((50, 2))]),
        r"n_components=2 exceeds the numerical rank.*every view is constant"),
    "rkm stiefel at 1e100": (
        lambda: mvkm.MultiViewRKM(2, solver="stiefel").fit([X * 1e100, Y * 1e100]),
        r"kernel matrix has entries up to .*rescale the views"),
    "kpls primal at 1e300": (
        lambda: mvkm.MultiViewKPLS(2, formulation="primal").fit([X * 1e300, Y * 1e300]),
        r"cross-covariance of the features is not finite.*rescale views"),
    "ppca streamed at 1e200": (
        lambda: mvkm.KernelPPCA(2, formulation="primal", batch_size=10).fit(X * 1e200),
        r"scatter of the features is not finite"),
    "ppca at 1e300": (lambda: mvkm.KernelPPCA(2).fit(X * 1e300), r"not finite.*rescale"),
    "nystrom with a NaN kernel": (
        lambda: mvkm.Nystrom(_NanKernel(1.0), n_landmarks=5).fit(X),
        r"landmark Gram matrix kernel\(landmarks\) is not finite"),
}


@pytest.mark.parametrize("case", sorted(RAW_ERRORS))
def test_no_raw_lapack_errors(case):
    fit, pattern = RAW_ERRORS[case]
    with pytest.raises(ValueError, match=pattern):
        fit()


def test_smm_at_1e300_names_the_scale():
    est = mvkm.LowRankSMM(rank=1)
    with pytest.raises(ValueError, match=r"^X: the projected Gram matrix .* not finite.*rescale X"):
        est.fit(M * 1e300, yM)
    assert not hasattr(est, "dual_coef_")                      # the failed fit left it unfitted


def test_kernel_top_eigh_on_an_underflowing_gram_names_x():
    """A linear kernel on data of scale 1e-160 (entries near 1e-319, five digits left) or 1e-300
    (all 0): a clear error, on the dense (n <= 1000) and the Lanczos (n > 1000) routes; at 1e-150
    (entries near 1e-299, normal) the eigenvalues are those of the unscaled data times 1e-300."""
    rng = np.random.default_rng(0)
    for n in (40, 1100):
        Xn = rng.standard_normal((n, 3))
        for scale in (1e-160, 1e-300):
            with pytest.raises(ValueError, match=r"^X: the Gram matrix of Linear\(\) underflows"):
                mvkm.kernel_top_eigh(Xn * scale, mvkm.Linear(), 2)
        lam = mvkm.kernel_top_eigh(Xn * 1e-150, mvkm.Linear(), 2)[0]
        np.testing.assert_allclose(lam, mvkm.kernel_top_eigh(Xn, mvkm.Linear(), 2)[0] * 1e-300, rtol=1e-12)
    # all-zero data: a Gram matrix of zeros is exact, and so are its zero eigenvalues
    assert np.all(mvkm.kernel_top_eigh(np.zeros((40, 3)), mvkm.Linear(), 2)[0] == 0)


MISLEADING = {
    "psd_sqrt rcond=-1": (lambda: mvkm.psd_sqrt(np.eye(2), rcond=-1), ValueError,
                          r"^rcond must be finite and >= 0, got -1"),
    "recursive_forecast(KernelPPCA)": (
        lambda: mvkm.timeseries.recursive_forecast(mvkm.KernelPPCA(2).fit(X), X[:, 0], 3),
        TypeError, r"^model must be a fitted two-view model with predict.*got KernelPPCA"),
    "recursive_forecast(unfitted)": (
        lambda: mvkm.timeseries.recursive_forecast(mvkm.MultiViewRKM(1), X[:, 0], 3),
        ValueError, r"^model must be fitted"),
    "feature_moments 3-d view": (
        lambda: feature_moments([np.zeros((5, 2, 2))], [mvkm.Identity().fit(X)]), ValueError,
        r"^views\[0\] must be a 1-D or 2-D array, got shape \(5, 2, 2\)"),
    "kpls None view": (lambda: mvkm.MultiViewKPLS(2).fit([X, None]), TypeError,
                       r"^views\[1\] is None"),
    "random_state=-1 (stiefel)": (
        lambda: mvkm.MultiViewRKM(2, solver="stiefel", random_state=-1).fit([X, Y]), ValueError,
        r"^random_state must be None, an int >= 0 or a numpy Generator, got -1"),
    "random_state=-1 (rff)": (
        lambda: mvkm.RandomFourierFeatures(random_state=-1).fit(X), ValueError,
        r"^random_state must be None, an int >= 0"),
    "load_mfeat(None)": (lambda: mvkm.datasets.load_mfeat(None), TypeError,
                         r"^views must be a list or tuple of view names"),
    "feature_moments None view": (
        lambda: feature_moments([X, None], [mvkm.Identity().fit(X)] * 2), TypeError,
        r"^views\[1\] is None"),
    "feature_moments map without transform": (
        lambda: feature_moments([X], [object()]), TypeError,
        r"^feature_maps\[0\] must be a fitted feature map with a transform method"),
}


@pytest.mark.parametrize("case", sorted(MISLEADING))
def test_messages_say_what_is_wrong(case):
    fit, exc, pattern = MISLEADING[case]
    with pytest.raises(exc, match=pattern):
        fit()


DEVICES = ["mps", "xpu", "vulkan", "meta", "cuda", "cuda:7", "nonsense"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("where", ["rkm", "ppca", "maximize_trace", "feature_moments"])
def test_every_device_string_gets_a_clear_error(device, where):
    torch = pytest.importorskip("torch")
    if device.startswith("cuda") and torch.cuda.is_available() and device == "cuda":
        pytest.skip("a CUDA GPU is present")
    fit = {
        "rkm": lambda: mvkm.MultiViewRKM(2, formulation="primal", device=device).fit([X, Y]),
        "ppca": lambda: mvkm.KernelPPCA(2, formulation="primal", device=device).fit(X),
        "maximize_trace": lambda: mvkm.maximize_trace(np.eye(3), 1, device=device),
        "feature_moments": lambda: feature_moments([X], [mvkm.Identity().fit(X)], device=device),
    }[where]
    with pytest.raises(ValueError, match=r"^device(=| must be)"):
        fit()


def test_single_view_rkm_refuses_1d_input():
    with pytest.raises(ValueError, match=r"views\[0\] must be a 2-D array.*reshape\(-1, 1\)"):
        mvkm.MultiViewRKM(1).fit([X[:, 0]])
    # two views: a 1-D view is still one column (the book's time-series target view)
    m = mvkm.MultiViewRKM(1).fit([X[:, :2], X[:, 2]])
    assert m.view_dims_ == [2, 1]


# ------------------------------------------------------------------ MultiViewKPLS (item 10)
def test_kpls_does_not_keep_its_kernel_matrices():
    """Pickled size O(N k) per view (plus the training views), not V N^2 kernel entries."""
    import pickle

    N = 400
    Xs = [rng.normal(size=(N, 2)) for _ in range(3)]
    for solver in ("dense", "lanczos"):
        m = mvkm.MultiViewKPLS(3, kernels=mvkm.RBF(1.0), solver=solver, random_state=0).fit(Xs)
        size = len(pickle.dumps(m))
        # views 3 N 2, dual_coef_ 3 N 3, train means 3 N: 18 N numbers; V N^2 = 1200 N
        assert size < 8 * 40 * N, (solver, size)
        assert not any(isinstance(a, list) and a and getattr(a[0], "shape", ()) == (N, N)
                       for a in vars(m).values())


def test_kpls_explained_variance_ratio_on_the_lanczos_route():
    """Small V N: computed during fit (equal to the dense route); large: a clear AttributeError."""
    Xs = [rng.normal(size=(60, 2)) for _ in range(3)]
    dense = mvkm.MultiViewKPLS(3, kernels=mvkm.RBF(1.0), solver="dense").fit(Xs)
    lz = mvkm.MultiViewKPLS(3, kernels=mvkm.RBF(1.0), solver="lanczos", random_state=0).fit(Xs)
    np.testing.assert_allclose(lz.explained_variance_ratio_, dense.explained_variance_ratio_,
                               rtol=1e-8)
    big = [rng.normal(size=(520, 2)) for _ in range(3)]
    m = mvkm.MultiViewKPLS(2, kernels=mvkm.RBF(1.0), solver="lanczos", random_state=0).fit(big)
    with pytest.raises(AttributeError, match="solver='dense'"):
        m.explained_variance_ratio_


def test_kpls_n_features_in_is_an_int_with_view_dims():
    m = mvkm.MultiViewKPLS(2).fit([X, Y])
    assert m.n_features_in_ == 5 and isinstance(m.n_features_in_, int)
    assert m.view_dims_ == [3, 2]
    with pytest.raises(ValueError, match=r"views\[1\] has 3 features"):
        m.transform([X, X])


def test_kpls_accepts_sklearn_kernels_and_precomputed():
    """Same eigenvalues and scores (up to column signs) as the mvkm kernel they equal."""
    from sklearn.gaussian_process.kernels import RBF as SkRBF
    from sklearn.metrics.pairwise import rbf_kernel

    ref = mvkm.MultiViewKPLS(2, kernels=mvkm.RBF(1.0)).fit([X, Y])
    Xn, Yn = X[:5] + 0.1, Y[:5] - 0.1
    want = ref.transform([Xn, Yn])
    fits = {
        "sklearn kernel": (mvkm.MultiViewKPLS(2, kernels=SkRBF(1.0)).fit([X, Y]), [Xn, Yn]),
        "function": (mvkm.MultiViewKPLS(2, kernels=lambda A, B: rbf_kernel(A, B, gamma=0.5))
                     .fit([X, Y]), [Xn, Yn]),
        "precomputed": (mvkm.MultiViewKPLS(2, kernels="precomputed")
                        .fit([mvkm.RBF(1.0)(X), mvkm.RBF(1.0)(Y)]),
                        [mvkm.RBF(1.0)(Xn, X), mvkm.RBF(1.0)(Yn, Y)]),
    }
    for name, (m, new) in fits.items():
        np.testing.assert_allclose(m.eigenvalues_, ref.eigenvalues_, rtol=1e-10, err_msg=name)
        for v in range(2):
            np.testing.assert_allclose(np.abs(m.transform(new)[v]), np.abs(want[v]),
                                       atol=1e-10, err_msg=name)
    with pytest.raises(ValueError, match=r"kernels\[0\]\(X, Y\) must return a Gram matrix"):
        mvkm.MultiViewKPLS(2, kernels=lambda A, B: A).fit([X, Y])
    with pytest.raises(ValueError, match=r"views\[0\] must be a square matrix"):
        mvkm.MultiViewKPLS(2, kernels="precomputed").fit([X, Y])


def test_automatic_progress_bar_waits_past_the_first_chunk(monkeypatch):
    """A 50-row streamed fit showed a bar: importing torch in the first chunk used up the 5 s delay."""
    import tqdm.auto

    made = []

    class Fake:
        def __init__(self, **kw):
            made.append(kw)

        def update(self, n):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Fake)
    monkeypatch.delenv("MVKM_PROGRESS", raising=False)
    bar = mvkm.covariance.progress_bar(50, "feature moments", None)
    assert made == []                                  # nothing is timed before the first chunk
    bar.update(10)
    assert made and made[0]["delay"] == 5.0 and made[0]["initial"] == 10
    bar.close()
    made.clear()
    mvkm.covariance.progress_bar(50, "x", True)
    assert made and made[0]["delay"] == 0.0            # progress=True: at once


def test_automatic_progress_bar_prints_nothing_before_its_delay(monkeypatch, capsys):
    """Issue 33: a postfix drew the automatic bar at once (tqdm's set_postfix refreshes,
    whatever the delay) and close() left the line: a 0.06 s matfree_top_eigh printed one."""
    monkeypatch.delenv("MVKM_PROGRESS", raising=False)
    bar = mvkm.covariance.progress_bar(None, "solver", None, unit="product")
    bar.set_postfix(residual="1e-3")                   # before the first update: kept for later
    bar.update(1)
    bar.set_postfix(locked=0, residual="1e-15")
    bar.set_postfix(refresh=True, residual="1e-16")    # as tqdm's own argument: still no refresh
    bar.update(1)
    bar.close()
    assert capsys.readouterr().err == ""
    assert bar.bar.postfix == "residual=1e-16"


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
def test_kpls_dual_float32(solver):
    """dtype='float32' in the dual (it raised): float32 kernels, float64 eigenproblem.

    Kernel entries rounded to 2^-24 relative move the eigenvalues by about that
    much times the conditioning of these well-separated pairs: 1e-5 relative.
    """
    r = np.random.default_rng(3)
    Xs = [r.normal(size=(80, 3)), r.normal(size=(80, 2)), r.normal(size=(80, 4))]
    kw = dict(kernels=mvkm.RBF(2.0), solver=solver, random_state=0)
    ref = mvkm.MultiViewKPLS(3, **kw).fit(Xs)
    m = mvkm.MultiViewKPLS(3, dtype="float32", **kw).fit(Xs)
    np.testing.assert_allclose(m.eigenvalues_, ref.eigenvalues_, rtol=1e-5)
    for a, b in zip(m.transform(Xs), ref.transform(Xs)):
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, b, atol=1e-4 * np.abs(b).max())
    with pytest.raises(ValueError, match="dtype must be 'float64' or 'float32'"):
        mvkm.MultiViewKPLS(3, dtype="float16").fit(Xs)
