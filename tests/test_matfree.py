"""Tests of mvkm.matfree: the matrix-free kernel operator and its eigensolver.

Every result is compared with the dense path (``kernel(X)``, ``center_gram``,
``top_eigh(method="dense")``) on small problems (n <= 1000), with tiles
smaller than n so that several tiles, and ragged edge tiles, are exercised.
Every test runs on both backends of the tiles: torch (``mvkm[torch]``) and
numpy (what the module uses without torch; here by setting ``matfree.torch``
to ``None``). Without torch installed, only the numpy backend runs.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse.linalg

try:
    import torch
except ImportError:             # the wheel's tests without mvkm[torch]: numpy tiles only
    torch = None

import mvkm.matfree as matfree
from mvkm.kernels import RBF, Laplacian, Linear, Polynomial, center_gram, center_test_gram
from mvkm.linalg import ConvergenceWarning, top_eigh
from mvkm.matfree import KernelOperator, matfree_top_eigh

BACKENDS = (["torch"] if torch is not None else []) + ["numpy"]


@pytest.fixture(params=BACKENDS, autouse=True)
def backend(request, monkeypatch):
    """The tiles' backend of the test: torch, or numpy as without torch."""
    if request.param == "numpy":
        monkeypatch.setattr(matfree, "torch", None)
    return request.param


def needs_torch_backend(backend):
    if backend != "torch":
        pytest.skip("a torch-only feature (CUDA, torch's threads or profiler)")

KERNELS = [RBF(2.0), Laplacian(3.0), Polynomial(3, 1.0), Linear()]
IDS = ["rbf", "laplacian", "polynomial", "linear"]
TILE = 256  # n = 700: tiles of 256, 256 and 188 rows


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((700, 5)), rng.standard_normal((700, 6)), rng.standard_normal((90, 5))


def _dense(kernel, X, center):
    K = kernel(X)
    return center_gram(K) if center else K


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_operator_equals_dense_product(data, kernel, center):
    X, Z, _ = data
    op = KernelOperator(X, kernel, center=center, tile_size=TILE)
    K = _dense(kernel, X, center)
    ref = K @ Z
    assert isinstance(op, scipy.sparse.linalg.LinearOperator)
    assert op.shape == (700, 700) and op.dtype == np.float64
    out = op @ Z
    assert out.dtype == np.float64 and out.shape == (700, 6)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_allclose(op.matvec(Z[:, 0]), ref[:, 0], rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_allclose(op.T @ Z, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    K_raw = kernel(X)
    big = np.abs(K_raw).max()
    np.testing.assert_allclose(op.row_means_, K_raw.mean(axis=1), rtol=0, atol=1e-13 * big)
    assert op.grand_mean_ == pytest.approx(K_raw.mean(), abs=1e-13 * big)
    np.testing.assert_allclose(op.diag(), np.diag(K), rtol=1e-12, atol=1e-12 * np.abs(K).max())
    assert op.trace() == pytest.approx(np.trace(K), rel=1e-12)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_top_eigh_equals_dense_solver(data, kernel, center):
    X = data[0]
    lam, V = matfree_top_eigh(X, kernel, 5, center=center, tile_size=TILE)
    lam_d, V_d = top_eigh(_dense(kernel, X, center), 5, method="dense")
    assert lam.dtype == np.float64 and V.shape == (700, 5)
    np.testing.assert_allclose(lam, lam_d, rtol=1e-10, atol=0)
    # both signs fixed by flip_signs: equal, not just up to sign
    np.testing.assert_allclose(V, V_d, rtol=0, atol=1e-8)


def test_top_eigh_info_and_random_start(data):
    X = data[0]
    lam, V, info = matfree_top_eigh(X, RBF(2.0), 4, tile_size=TILE, return_info=True)
    lam_r, V_r, info_r = matfree_top_eigh(X, RBF(2.0), 4, tile_size=TILE, warm_start="random",
                                          return_info=True)
    np.testing.assert_allclose(lam_r, lam, rtol=1e-10)
    np.testing.assert_allclose(V_r, V, atol=1e-8)
    assert info["n_products"] < info_r["n_products"]  # the Nystrom start saves full passes
    assert info["residuals"].max() <= 1e-10 and info["tol"] == 1e-10
    assert info["nystrom_eigenvalues"].shape == (info["block_size"],)
    assert np.all(info["nystrom_eigenvalues"][:4] <= lam * (1 + 1e-12))  # Nystrom: K_nys <= K
    assert set(info["seconds"]) == {"setup", "warm_start", "iterations"}


def test_float32_tiles_within_stated_tolerance(data):
    X, Z, _ = data
    kernel = RBF(2.0)
    K = center_gram(kernel(X))
    op = KernelOperator(X, kernel, dtype="float32", tile_size=TILE)
    assert str(op.tile_dtype).removeprefix("torch.") == "float32"
    out = op @ Z
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, K @ Z, rtol=0, atol=1e-5 * np.abs(K @ Z).max())
    lam, V, info = matfree_top_eigh(X, kernel, 5, dtype="float32", tile_size=TILE,
                                    return_info=True)
    lam_d, V_d = top_eigh(K, 5, method="dense")
    assert info["tol"] == 1e-5  # tol raised to the float32 floor
    np.testing.assert_allclose(lam, lam_d, rtol=1e-6)       # the documented accuracy
    np.testing.assert_allclose(V, V_d, rtol=0, atol=1e-4)
    # the same with a numpy spelling of the dtype
    lam2, _ = matfree_top_eigh(X, kernel, 5, dtype=np.float32, tile_size=TILE)
    np.testing.assert_array_equal(lam2, lam)


def test_explicit_cpu_device(data, backend):
    X, Z, _ = data
    ref = KernelOperator(X, RBF(2.0), tile_size=TILE) @ Z
    devices = ("cpu", torch.device("cpu")) if backend == "torch" else ("cpu",)
    for device in devices:
        op = KernelOperator(X, RBF(2.0), device=device, tile_size=TILE)
        assert op.device == (torch.device("cpu") if backend == "torch" else "cpu")
        assert op.device.type == "cpu"
        np.testing.assert_array_equal(op @ Z, ref)
        # an estimator hands the operator's device back to matfree_top_eigh
        assert KernelOperator(X, RBF(2.0), device=op.device, tile_size=TILE).device == op.device
    lam, _ = matfree_top_eigh(X, RBF(2.0), 3, device="cpu", tile_size=TILE)
    lam0, _ = matfree_top_eigh(X, RBF(2.0), 3, tile_size=TILE)
    np.testing.assert_array_equal(lam, lam0)


def test_threaded_tile_rows_equal_serial(data, backend, monkeypatch):
    """With several threads, tile rows are spread over Python threads."""
    X, Z, Xt = data
    if backend == "numpy":      # numpy: the worker count is mvkm's n_threads() at construction
        monkeypatch.setattr(matfree, "n_threads", lambda: 1)
        op = KernelOperator(X, Laplacian(3.0), tile_size=128)
        serial, serial_t = op @ Z, op.test_matmat(Xt, Z)
        monkeypatch.setattr(matfree, "n_threads", lambda: 2)
        op = KernelOperator(X, Laplacian(3.0), tile_size=128)
        assert op._workers() == 2
        threaded, threaded_t = op @ Z, op.test_matmat(Xt, Z)
        np.testing.assert_allclose(threaded, serial, rtol=0, atol=1e-12 * np.abs(serial).max())
        np.testing.assert_allclose(threaded_t, serial_t, rtol=0, atol=1e-12 * np.abs(serial_t).max())
        return
    op = KernelOperator(X, Laplacian(3.0), tile_size=128)
    serial, serial_t = op @ Z, op.test_matmat(Xt, Z)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        op = KernelOperator(X, Laplacian(3.0), tile_size=128)
        threaded, threaded_t = op @ Z, op.test_matmat(Xt, Z)
        assert torch.get_num_threads() == 2  # restored after the product
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_allclose(threaded, serial, rtol=0, atol=1e-12 * np.abs(serial).max())
    np.testing.assert_allclose(threaded_t, serial_t, rtol=0, atol=1e-12 * np.abs(serial_t).max())


def test_default_tile_size_and_single_tile(data):
    X, Z, _ = data
    op = KernelOperator(X, RBF(2.0))  # default tile (1024) larger than n: one tile
    assert op.tile_size == 1024
    K = center_gram(RBF(2.0)(X))
    np.testing.assert_allclose(op @ Z, K @ Z, atol=1e-12 * np.abs(K @ Z).max(), rtol=0)


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_device_equals_cpu(data, backend):
    needs_torch_backend(backend)
    X, Z, Xt = data
    for kernel in (RBF(2.0), Laplacian(3.0), Polynomial(3, 1.0)):
        cpu = KernelOperator(X, kernel, tile_size=TILE)
        gpu = KernelOperator(X, kernel, device="cuda", tile_size=TILE)
        ref = cpu @ Z
        np.testing.assert_allclose(gpu @ Z, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        A = Z[:, :3]
        np.testing.assert_allclose(gpu.test_matmat(Xt, A), cpu.test_matmat(Xt, A), rtol=1e-11,
                                   atol=1e-11)
        lam, V = matfree_top_eigh(X, kernel, 5, device="cuda")
        lam_d, V_d = top_eigh(_dense(kernel, X, True), 5, method="dense")
        np.testing.assert_allclose(lam, lam_d, rtol=1e-10)
        np.testing.assert_allclose(V, V_d, atol=1e-8)
    torch.cuda.reset_peak_memory_stats()
    n = 20000  # n x n float64 would be 3.2 GB; tiles of 1024^2 are 8 MB
    Xb = np.random.default_rng(1).standard_normal((n, 10))
    op = KernelOperator(Xb, RBF(3.0), device="cuda", tile_size=1024)
    op @ np.ones((n, 20))
    assert torch.cuda.max_memory_allocated() < 64 * 2**20


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_test_rows_product(data, kernel):
    X, Z, Xt = data
    A = Z[:, :3]
    op = KernelOperator(X, kernel, center=False, tile_size=TILE)
    Kt = kernel(Xt, X)
    ref = Kt @ A
    scale = np.abs(ref).max()
    np.testing.assert_allclose(op.test_matmat(Xt, A), ref, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(op.test_matmat(Xt, A[:, 0]), ref[:, 0], rtol=0, atol=1e-12 * scale)
    ref_c = center_test_gram(Kt, kernel(X)) @ A
    np.testing.assert_allclose(op.test_matmat(Xt, A, center=True), ref_c, rtol=0,
                               atol=1e-12 * scale)
    op_c = KernelOperator(X, kernel, tile_size=TILE)  # centred by default
    np.testing.assert_allclose(op_c.test_matmat(Xt, A), ref_c, rtol=0, atol=1e-12 * scale)


def test_out_of_sample_projection_of_training_points(data):
    """Projecting the training points themselves gives sqrt(lambda) * V (kernel PCA)."""
    X = data[0]
    lam, V = matfree_top_eigh(X, RBF(2.0), 3, tile_size=TILE)
    op = KernelOperator(X, RBF(2.0), tile_size=TILE)
    np.testing.assert_allclose(op.test_matmat(X, V / np.sqrt(lam)), V * np.sqrt(lam), atol=1e-8)


def test_linalg_top_eigh_accepts_the_operator(data):
    X = data[0]
    op = KernelOperator(X, Laplacian(3.0), tile_size=TILE)
    lam, V = top_eigh(op, 4, method="subspace")
    lam_d, V_d = top_eigh(center_gram(Laplacian(3.0)(X)), 4, method="dense")
    np.testing.assert_allclose(lam, lam_d, rtol=1e-10)
    np.testing.assert_allclose(V, V_d, atol=1e-8)


def test_convergence_warning_at_max_iter(data):
    X = data[0]
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        lam, V = matfree_top_eigh(X, RBF(2.0), 4, max_iter=1, warm_start="random",
                                  tile_size=TILE)
    assert lam.shape == (4,) and np.all(np.diff(lam) <= 0)


def test_progress_bar_runs(data, capsys):
    X = data[0][:300]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tqdm.auto may warn about missing ipywidgets
        lam, _ = matfree_top_eigh(X, RBF(2.0), 2, progress=True, tile_size=128)
    lam0, _ = matfree_top_eigh(X, RBF(2.0), 2, tile_size=128)
    np.testing.assert_array_equal(lam, lam0)
    assert "matfree_top_eigh" in capsys.readouterr().err


def test_memory_stays_linear_in_n(backend):
    """No n x n array: numpy peak (tracemalloc) and every torch op's operands (profiler)."""
    n, d, b, tile = 3000, 10, 20, 256  # n x n float64: 72 MB; a tile: 0.5 MB
    X = np.random.default_rng(0).standard_normal((n, d))
    op = KernelOperator(X, RBF(3.0), tile_size=tile)
    Z = np.ones((n, b))
    tracemalloc.start()
    op @ Z
    op.test_matmat(X, Z)
    _, peak_product = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    matfree_top_eigh(X, RBF(3.0), 10, tile_size=tile)
    _, peak_solver = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak_product < 8 * n * b * 8          # a few n x b blocks (0.5 MB each; K: 72 MB)
    assert peak_solver < 40 * n * (d + b) * 8    # O(n (d + s)) and m x m Nystrom: << 72 MB
    if backend == "numpy":                       # numpy's arrays are all seen by tracemalloc
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        op @ Z
    largest = max(int(np.prod(s)) for ev in prof.events() for s in (ev.input_shapes or [])
                  if isinstance(s, (list, tuple)) and s and all(isinstance(v, int) for v in s))
    assert largest <= max(tile * tile, n * b)


def _bad(**kw):
    X = np.random.default_rng(0).standard_normal((50, 3))
    args = dict(X=X, kernel=RBF(1.0), n_components=3)
    args.update(kw)
    return matfree_top_eigh(args.pop("X"), args.pop("kernel"), args.pop("n_components"), **args)


class _MyRBF(RBF):
    pass


@pytest.mark.parametrize("kernel", [lambda X, Y=None: X @ X.T, "rbf", _MyRBF(1.0), None])
def test_unsupported_kernel_is_a_type_error(kernel):
    with pytest.raises(TypeError, match="kernel must be one of"):
        _bad(kernel=kernel)
    with pytest.raises(TypeError, match="kernel must be one of"):
        KernelOperator(np.ones((5, 2)), kernel)


def test_the_data_come_first_and_the_other_order_warns():
    """Issue 33: the order of kernel_top_eigh's former signature, (kernel, X, n), gives the
    same eigenpairs with a FutureWarning; an array where the kernel goes is a short TypeError
    (it printed the whole array)."""
    X = np.random.default_rng(0).standard_normal((80, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lam, V = matfree_top_eigh(X, RBF(1.0), 3, tile_size=TILE)
    with pytest.warns(FutureWarning, match=r"matfree_top_eigh\(X, kernel, n_components\)") as rec:
        lam_old, V_old = matfree_top_eigh(RBF(1.0), X, 3, tile_size=TILE)
    assert rec[0].filename == __file__
    np.testing.assert_array_equal(lam_old, lam)
    np.testing.assert_array_equal(V_old, V)
    with pytest.raises(TypeError, match=r"got ndarray of shape \(80, 3\)$") as err:
        matfree_top_eigh(X, X, 3)
    assert len(str(err.value)) < 200


def test_lazy_import_from_the_package():
    import mvkm

    assert mvkm.matfree_top_eigh is matfree_top_eigh and mvkm.KernelOperator is KernelOperator


def test_validation_errors(backend):
    X = np.random.default_rng(0).standard_normal((50, 3))
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        _bad(X=X_nan)
    with pytest.raises(ValueError, match="X contains NaN"):
        KernelOperator(X_nan, RBF(1.0))
    for s in (0, 50, -1):
        with pytest.raises(ValueError, match=rf"n_components must be between 1 and 49 .*got {s}"):
            _bad(n_components=s)
    with pytest.raises(TypeError, match="n_components must be an integer"):
        _bad(n_components=2.0)
    for device in ("tpu", "gpu0", 3, "meta"):
        with pytest.raises(ValueError, match="device must be"):
            _bad(device=device)
    if backend == "numpy":      # without torch, CUDA is the ImportError that names the extra
        with pytest.raises(ImportError, match=r"mvkm\[torch\]"):
            KernelOperator(X, RBF(1.0), device="cuda")
        with pytest.raises(ImportError, match=r"mvkm\[torch\]"):
            _bad(device="cuda:0")
    elif not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            KernelOperator(X, RBF(1.0), device="cuda")
    bad_dtypes = ["int32", np.float16] + ([torch.float16, torch.int64] if backend == "torch" else [])
    for dtype in bad_dtypes:
        with pytest.raises(ValueError, match="dtype must be"):
            _bad(dtype=dtype)
    for tol in (0.0, -1.0, np.nan, "1e-8"):
        with pytest.raises(ValueError, match="tol must be"):
            _bad(tol=tol)
    with pytest.raises(ValueError, match="max_iter must be >= 1, got 0"):
        _bad(max_iter=0)
    with pytest.raises(TypeError, match="max_iter must be an integer"):
        _bad(max_iter=2.5)
    with pytest.raises(ValueError, match="warm_start must be"):
        _bad(warm_start="pca")
    with pytest.raises(ValueError, match="n_landmarks must be between"):
        _bad(n_landmarks=5)
    with pytest.raises(ValueError, match="tile_size must be a positive integer, got 0"):
        _bad(tile_size=0)
    with pytest.raises(ValueError, match="needs n >= 2"):
        _bad(X=X[:1], n_components=1)
    with pytest.raises(TypeError, match="center must be a bool"):
        KernelOperator(X, RBF(1.0), center="yes")
    op = KernelOperator(X, RBF(1.0))
    with pytest.raises(ValueError, match="X and X_test must have the same number of features"):
        op.test_matmat(np.ones((4, 2)), np.ones(50))
    with pytest.raises(ValueError, match="A must have n = 50 rows"):
        op.test_matmat(X, np.ones((49, 2)))
    with pytest.raises(ValueError, match="not finite"):
        KernelOperator(np.full((4, 2), 1e200), Polynomial(3, 1.0))


def test_linear_and_polynomial_tiles_far_from_the_origin_say_so():
    # issue 35, item 2: the stored routes compute the centred values from the data's middle;
    # the tiles cannot (they are not shift-invariant), and at an offset of 1e6 the eigenvalues
    # were 1e-8 (linear) and 4e-7 (degree 2) off without a word
    X = np.random.default_rng(0).normal(size=(300, 3))
    for kernel in (Linear(), Polynomial(2, c=1.0)):
        with pytest.warns(RuntimeWarning, match="far from the origin"):
            KernelOperator(X + 1e6, kernel)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            KernelOperator(X + 1e2, kernel)
            KernelOperator(X + 1e6, kernel, center=False)
