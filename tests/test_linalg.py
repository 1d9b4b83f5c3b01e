"""Tests of mvkm.linalg: top_eigh (every solver), flip_signs, psd_sqrt, rotate_to_diagonal.

The reference is numpy.linalg.eigh (LAPACK syevd, an independent code path from
the subset syevr, ARPACK and the subspace iteration under test).

Tolerances. The iterative solvers stop when every residual satisfies
||K v_i - theta_i v_i|| <= tol * lambda_1 (tol = 1e-10 by default; ARPACK's own
test ||r_i|| <= tol |theta_i| is stricter). For a Ritz pair this bounds the
eigenvalue error by ||r||^2 / gap (<= ||r|| always) and the angle between v_i and
the true eigenvector (or invariant subspace) by ||r|| / gap. So:

* eigenvalues to 1e-8 * lambda_1 (the accuracy the benchmark asks for; the bound
  above gives ~1e-10 even without a gap, and round-off adds ~n eps);
* eigenvectors / subspaces to 1e-10 / (relative gap) <= 1e-7 for the relative gaps
  (>= 1e-3) of the matrices built below;
* residuals to 1e-9 * lambda_1 (tol with a 10x margin for the round-off of
  recomputing K V in a different order).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.sparse.linalg import ArpackNoConvergence, aslinearoperator
from sklearn.utils.extmath import randomized_svd
from threadpoolctl import threadpool_limits

import mvkm.linalg as linalg_module
from mvkm.kernels import RBF, Laplacian, Linear, Polynomial, center_gram, upper_gram
from mvkm.linalg import (ConvergenceWarning, flip_signs, kernel_top_eigh, psd_sqrt, rotate_to_diagonal,
                         top_eigh)

METHODS = ["dense", "lanczos", "arpack", "subspace", "auto"]
EIG_RTOL = 1e-8      # eigenvalues, relative to lambda_1 (see module docstring)
VEC_TOL = 1e-7       # eigenvectors / subspaces (residual tol / relative gap)
RES_RTOL = 1e-9      # residual norms, relative to lambda_1


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """The matrices here are small: with a second BLAS thread on a shared, loaded
    2-core machine OpenBLAS was measured 10-50x slower (threads wait on each other)."""
    with threadpool_limits(1, user_api="blas"):
        yield


def reference(K, s):
    """Top-s eigenpairs from numpy (syevd), descending, signs fixed by flip_signs."""
    w, V = np.linalg.eigh(K)
    return w[::-1][:s], flip_signs(V[:, ::-1][:, :s])


def projector_distance(V, U):
    """||V V^T - U U^T||_2 = sine of the largest principal angle (equal dimensions)."""
    return float(np.max(np.sin(scipy.linalg.subspace_angles(V, U))))


def residuals(K, w, V):
    return np.linalg.norm(K @ V - V * w, axis=0)


def with_spectrum(lam, seed):
    """Q diag(lam) Q^T with a Haar-random orthogonal Q."""
    n = lam.size
    Q, R = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    Q *= np.sign(np.diag(R))
    K = (Q * lam) @ Q.T
    return 0.5 * (K + K.T)


@pytest.fixture(scope="module")
def separated():
    """n = 200, geometric spectrum 0.8^i (relative gaps 20%, well separated)."""
    return with_spectrum(0.8 ** np.arange(200), seed=1)


@pytest.fixture(scope="module")
def wishart():
    """A random PSD matrix A A^T / m (Marchenko-Pastur bulk, small top gaps)."""
    A = np.random.default_rng(2).standard_normal((150, 300))
    return A @ A.T / 300


@pytest.fixture(scope="module")
def rbf_centred():
    """A centred RBF Gram matrix, n = 300, d = 3, sigma = 1."""
    X = np.random.default_rng(3).standard_normal((300, 3))
    return center_gram(RBF(1.0)(X))


# ---------------------------------------------------------------------------
# top_eigh against numpy.linalg.eigh
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_top_eigh_separated_spectrum(method, separated):
    s = 8
    w_ref, V_ref = reference(separated, s)
    w, V = top_eigh(separated, s, method)
    assert w.shape == (s,) and V.shape == (separated.shape[0], s)
    assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
    # well-separated eigenvalues: the vectors themselves agree, sign convention included
    assert np.max(np.abs(V - V_ref)) <= VEC_TOL
    assert np.max(np.abs(V.T @ V - np.eye(s))) <= 1e-12
    assert np.max(residuals(separated, w, V)) <= RES_RTOL * w[0]


@pytest.mark.parametrize("method", METHODS)
def test_top_eigh_wishart(method, wishart):
    s = 10
    w_ref, V_ref = reference(wishart, s)
    rel_gaps = -np.diff(np.linalg.eigvalsh(wishart)[::-1][: s + 1]) / w_ref[0]
    w, V = top_eigh(wishart, s, method)
    assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
    # per-vector bound: residual / gap, gaps here are >= 1e-3 lambda_1 (checked)
    assert rel_gaps.min() > 1e-3
    assert np.max(np.abs(np.abs(V_ref.T @ V) - np.eye(s))) <= VEC_TOL
    assert projector_distance(V, V_ref) <= VEC_TOL
    assert np.max(residuals(wishart, w, V)) <= RES_RTOL * w[0]


@pytest.mark.parametrize("method", METHODS)
def test_top_eigh_centred_rbf(method, rbf_centred):
    s = 6
    w_ref, V_ref = reference(rbf_centred, s)
    w, V = top_eigh(rbf_centred, s, method)
    assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
    assert np.max(np.abs(np.abs(V_ref.T @ V) - np.eye(s))) <= VEC_TOL
    assert np.max(np.abs(V - V_ref)) <= VEC_TOL   # same signs as the reference
    assert np.max(residuals(rbf_centred, w, V)) <= RES_RTOL * w[0]
    # a centred kernel annihilates the constant vector: so must the eigenvectors
    assert np.max(np.abs(V.sum(axis=0))) <= 1e-8


@pytest.fixture(scope="module")
def clustered():
    """n = 600, eigenvalues in clusters of four (internal splitting 1e-9 relative),
    clusters decaying by 0.97; the cluster of indices 142..145 straddles s = 144.

    The top-144 subspace is then ill-defined, but the eigenvalues are, and so are
    the top-142 eigenspace (gap 3% to the straddling cluster) and the top-146 one.
    """
    n = 600
    i = np.arange(n)
    lam = 0.97 ** ((i + 2) // 4) * (1.0 + 1e-9 * (3 - (i + 2) % 4))
    return with_spectrum(lam, seed=4), lam


def test_clustered_spectrum_is_hard_for_fixed_power_iterations(clustered):
    """Witness: scikit-learn's randomized SVD (fixed power iterations, 10 extra
    columns) misses these eigenvalues by far more than 1e-8."""
    K, lam = clustered
    _, sv, _ = randomized_svd(K, 144, random_state=0)
    assert np.max(np.abs(sv - lam[:144])) > 1e-4 * lam[0]


@pytest.mark.parametrize("method", METHODS)
def test_top_eigh_clustered_spectrum_s144(method, clustered):
    K, lam = clustered
    s = 144
    _, U = np.linalg.eigh(K)
    U = U[:, ::-1]
    w, V = top_eigh(K, s, method)
    assert np.max(np.abs(w - lam[:s])) <= EIG_RTOL * lam[0]
    assert np.all(np.diff(w) <= 0)
    assert np.max(np.abs(V.T @ V - np.eye(s))) <= 1e-10
    assert np.max(residuals(K, w, V)) <= RES_RTOL * lam[0]
    # span(V) contains the well-separated top-142 eigenspace ...
    U142 = U[:, :142]
    assert np.linalg.norm(U142 - V @ (V.T @ U142), 2) <= VEC_TOL
    # ... and lies inside the top-146 eigenspace (the last two columns are some
    # orthonormal pair within the straddling cluster)
    U146 = U[:, :146]
    assert np.linalg.norm(V - U146 @ (U146.T @ V), 2) <= VEC_TOL


def test_methods_agree_on_clustered_eigenvalues(clustered):
    K, _ = clustered
    w_dense, _ = top_eigh(K, 144, "dense")
    for method in ("lanczos", "arpack", "subspace"):
        w, _ = top_eigh(K, 144, method)
        assert np.max(np.abs(w - w_dense)) <= EIG_RTOL * w_dense[0]


# ---------------------------------------------------------------------------
# conventions: order, signs, determinism, auto rule, inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_descending_and_sign_convention(method, rbf_centred):
    w1, V1 = top_eigh(rbf_centred, 5, method)
    w2, V2 = top_eigh(rbf_centred, 5, method)
    assert np.array_equal(w1, w2) and np.array_equal(V1, V2)   # bitwise, same seed
    assert np.all(np.diff(w1) <= 0)
    big = V1[np.argmax(np.abs(V1), axis=0), np.arange(5)]
    assert np.all(big > 0)                                     # flip_signs convention
    assert np.array_equal(flip_signs(V1), V1)


@pytest.mark.parametrize("method", ["lanczos", "arpack", "subspace"])
def test_random_state_changes_start_not_result(method, separated):
    w0, V0 = top_eigh(separated, 4, method, random_state=0)
    w1, V1 = top_eigh(separated, 4, method, random_state=np.random.default_rng(123))
    assert np.max(np.abs(w0 - w1)) <= EIG_RTOL * w0[0]
    assert np.max(np.abs(V0 - V1)) <= VEC_TOL


def test_auto_rule(monkeypatch, separated):
    K = separated[:100, :100]
    monkeypatch.setattr(linalg_module, "_AUTO_DENSE_MAX_N", 50)
    for s, expected in [(5, "lanczos"), (20, "dense")]:    # 20 > 0.08 * 100
        w_a, V_a = top_eigh(K, s, "auto")
        w_e, V_e = top_eigh(K, s, expected)
        assert np.array_equal(w_a, w_e) and np.array_equal(V_a, V_e)
    monkeypatch.setattr(linalg_module, "_AUTO_DENSE_MAX_N", 1000)
    w_a, V_a = top_eigh(K, 5, "auto")
    w_e, V_e = top_eigh(K, 5, "dense")
    assert np.array_equal(w_a, w_e) and np.array_equal(V_a, V_e)


@pytest.mark.parametrize("s", [1, 30, 59, 60])
def test_dense_subset_and_full_drivers(s):
    """Both LAPACK paths (subset syevr for s <= 0.3 n, full syevd above) and s = n."""
    K = with_spectrum(np.linspace(2.0, 0.0, 60) ** 2, seed=5)
    w_ref, V_ref = reference(K, s)
    w, V = top_eigh(K, s, "dense")
    assert w.shape == (s,) and V.shape == (60, s)
    assert np.max(np.abs(w - w_ref)) <= 1e-12 * w_ref[0]
    assert np.max(np.abs(V.T @ V - np.eye(s))) <= 1e-12
    assert np.max(residuals(K, w, V)) <= 1e-12 * w_ref[0]


@pytest.mark.parametrize("method", ["arpack", "subspace", "auto"])
def test_linear_operator_and_sparse_inputs(method, separated):
    w_ref, V_ref = reference(separated, 4)
    for K in (aslinearoperator(separated), sp.csr_array(separated)):
        w, V = top_eigh(K, 4, method)
        assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
        assert np.max(np.abs(V - V_ref)) <= VEC_TOL


def test_sparse_input_dense_method(separated):
    w, V = top_eigh(sp.csr_array(separated), 3, "dense")
    w_ref, V_ref = reference(separated, 3)
    assert np.max(np.abs(w - w_ref)) <= 1e-12 and np.max(np.abs(V - V_ref)) <= 1e-10


def test_rank_deficient_matrix():
    """A centred linear kernel of rank 4 asked for 6 pairs: two zero eigenvalues."""
    X = np.random.default_rng(6).standard_normal((80, 4))
    K = center_gram(X @ X.T)
    w_ref, _ = reference(K, 6)
    for method in ("dense", "lanczos", "arpack", "subspace"):
        w, V = top_eigh(K, 6, method)
        assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
        assert np.max(np.abs(w[4:])) <= 1e-10 * w_ref[0]
        assert np.max(np.abs(V.T @ V - np.eye(6))) <= 1e-10
        assert np.max(residuals(K, w, V)) <= RES_RTOL * w[0]


def test_indefinite_symmetric_dense_and_arpack():
    """Not PSD: dense and ARPACK still return the algebraically largest pairs."""
    K = with_spectrum(np.linspace(-5.0, 1.0, 50), seed=7)
    w_ref, _ = reference(K, 3)
    for method in ("dense", "lanczos", "arpack"):
        w, _ = top_eigh(K, 3, method)
        assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * 5.0


def test_check_symmetric_false_skips_the_symmetry_test(separated):
    K = separated.copy()
    K[0, 1] += 1e-3                      # clearly asymmetric
    with pytest.raises(ValueError, match="symmetric"):
        top_eigh(K, 3)
    w_low, _ = reference(np.tril(K) + np.tril(K, -1).T, 3)
    for method in ("dense", "lanczos", "arpack"):   # all read the lower triangle only
        w, _ = top_eigh(K, 3, method, check_symmetric=False)
        assert np.max(np.abs(w - w_low)) <= EIG_RTOL * w_low[0]
    K[5, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        top_eigh(K, 3, check_symmetric=False)


def test_subspace_warns_at_max_iter(clustered):
    K, _ = clustered
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        w, V = top_eigh(K, 144, "subspace", max_iter=1)
    assert w.shape == (144,) and V.shape == (600, 144)
    assert issubclass(ConvergenceWarning, RuntimeWarning)


def test_arpack_raises_at_max_iter(wishart):
    with pytest.raises(ArpackNoConvergence, match="max_iter=1"):
        top_eigh(wishart, 3, "arpack", max_iter=1)


def test_lanczos_thick_restarts(monkeypatch, wishart, clustered):
    """With the basis capped at 3s + 20 vectors the solver must restart (it counts
    more products than the cap) and still return numpy's eigenpairs; max_iter caps
    the restarts, and the error carries the current approximations."""
    from mvkm import linalg as L

    monkeypatch.setattr(L, "_LANCZOS_MAX_BASIS", 1)     # cap = 3 s + 20
    for K, s in ((wishart, 3), (clustered[0], 10)):
        counter = {"n": 0}
        real = L._blas

        class Counting:
            def __getattr__(self, name):
                return getattr(real, name)

            def dsymv(self, *args, **kwargs):
                counter["n"] += 1
                return real.dsymv(*args, **kwargs)

        monkeypatch.setattr(L, "_blas", Counting())
        w, V = top_eigh(K, s, "lanczos")
        monkeypatch.setattr(L, "_blas", real)
        assert counter["n"] > 3 * s + 20                # restarted at least once
        w_ref, V_ref = reference(K, s)
        assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
        assert np.max(np.abs(V.T @ V - np.eye(s))) <= 1e-10
        assert np.max(residuals(K, w, V)) <= RES_RTOL * w_ref[0]
    with pytest.raises(ArpackNoConvergence, match="max_iter=1") as info:
        top_eigh(clustered[0], 10, "lanczos", max_iter=1)
    assert info.value.eigenvalues.shape == (10,) and info.value.eigenvectors.shape == (600, 10)


def test_lanczos_breakdown_and_input_order():
    """A rank-2 matrix asked for 4 pairs: the Krylov space is invariant after 2
    products, and the solver must restart from new directions (the zero pairs);
    a Fortran-ordered K gives the same numbers without a copy."""
    X = np.random.default_rng(9).standard_normal((40, 2))
    K = X @ X.T
    w_ref, _ = reference(K, 4)
    w, V = top_eigh(K, 4, "lanczos")
    assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * w_ref[0]
    assert np.max(np.abs(w[2:])) <= 1e-10 * w_ref[0]
    assert np.max(np.abs(V.T @ V - np.eye(4))) <= 1e-10
    wf, Vf = top_eigh(np.asfortranarray(K), 4, "lanczos")
    assert np.max(np.abs(wf - w)) <= 1e-12 * w[0]
    with pytest.raises(TypeError, match="method='lanczos' needs K as a dense array"):
        top_eigh(sp.csr_array(K), 2, "lanczos")


def test_no_warning_on_normal_use(rbf_centred):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in METHODS:
            top_eigh(rbf_centred, 3, method)


@settings(max_examples=40, deadline=None)
@given(
    A=st.integers(2, 9).flatmap(
        lambda n: st.integers(1, n).flatmap(
            lambda r: arrays(np.float64, (n, r), elements=st.floats(-10, 10, allow_subnormal=False))
        )
    ),
    data=st.data(),
)
def test_property_small_psd_matrices(A, data):
    """Random small PSD matrices (any rank, repeated eigenvalues allowed): every
    method returns numpy's eigenvalues, orthonormal vectors and small residuals."""
    K = A @ A.T
    n = K.shape[0]
    lam_1 = max(float(np.linalg.eigvalsh(K)[-1]), 1e-300)
    method = data.draw(st.sampled_from(["dense", "lanczos", "arpack", "subspace"]))
    upper = n if method == "dense" else n - 1
    s = data.draw(st.integers(1, upper))
    w_ref = np.linalg.eigvalsh(K)[::-1][:s]
    w, V = top_eigh(K, s, method)
    # round-off of the eigenvalues is ~ n eps lambda_1: 1e-8 leaves ample margin
    assert np.max(np.abs(w - w_ref)) <= EIG_RTOL * lam_1
    assert np.max(np.abs(V.T @ V - np.eye(s))) <= 1e-10
    assert np.max(residuals(K, w, V)) <= RES_RTOL * lam_1 + 1e-300
    assert np.array_equal(flip_signs(V), V)


# ---------------------------------------------------------------------------
# bad inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "K, match",
    [
        (np.ones((3, 4)), "square"),
        (np.ones(5), "2-D"),
        (np.array([[1.0, 2.0], [0.0, 1.0]]), "symmetric"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), "NaN"),
        (np.array([[np.inf, 0.0], [0.0, 1.0]]), "NaN or infinite"),
    ],
)
def test_bad_matrix(K, match):
    with pytest.raises(ValueError, match=match):
        top_eigh(K, 1)


@pytest.mark.parametrize(
    "method, s, exc, match",
    [
        ("dense", 0, ValueError, "n_components"),
        ("dense", 7, ValueError, "n_components must be between 1 and 6"),
        ("arpack", 6, ValueError, "n_components must be between 1 and 5"),
        ("subspace", 6, ValueError, "n_components must be between 1 and 5"),
        ("auto", -1, ValueError, "n_components"),
        ("auto", 2.5, TypeError, "n_components must be an integer"),
        ("auto", True, TypeError, "n_components must be an integer"),
        ("auto", "2", TypeError, "n_components must be an integer"),
    ],
)
def test_bad_n_components(method, s, exc, match):
    with pytest.raises(exc, match=match):
        top_eigh(np.eye(6), s, method)


def test_bad_options():
    K = np.eye(6)
    with pytest.raises(ValueError,
                       match="method must be one of 'auto', 'dense', 'lanczos', 'arpack', 'subspace'"):
        top_eigh(K, 2, "lobpcg")
    with pytest.raises(ValueError, match="tol"):
        top_eigh(K, 2, "arpack", tol=-1.0)
    with pytest.raises(ValueError, match="tol must be > 0 for method='subspace'"):
        top_eigh(K, 2, "subspace", tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        top_eigh(K, 2, "subspace", max_iter=0)
    with pytest.raises(TypeError, match="max_iter"):
        top_eigh(K, 2, "subspace", max_iter=2.5)
    with pytest.raises(TypeError, match="LinearOperator"):
        top_eigh(aslinearoperator(K), 2, "dense")
    with pytest.raises(ValueError, match="square"):
        top_eigh(aslinearoperator(np.ones((3, 4))), 1, "arpack")
    with pytest.raises(TypeError, match="check_symmetric"):
        top_eigh(K, 2, check_symmetric="yes")
    with pytest.raises(TypeError, match="random_state"):
        top_eigh(K, 2, "arpack", random_state="seed")


def test_arpack_tol_zero_is_machine_precision(separated):
    w, _ = top_eigh(separated, 3, "arpack", tol=0.0)
    w_ref, _ = reference(separated, 3)
    assert np.max(np.abs(w - w_ref)) <= 1e-13


# ---------------------------------------------------------------------------
# flip_signs, psd_sqrt, rotate_to_diagonal
# ---------------------------------------------------------------------------


def test_flip_signs():
    V = np.array([[0.1, -3.0, 0.0, 2.0],
                  [-0.9, 1.0, 0.0, -2.0],
                  [0.5, 2.9, 0.0, 1.0]])
    F = flip_signs(V)
    expected_signs = np.array([-1.0, -1.0, 1.0, 1.0])   # tie in column 4: first entry wins
    assert np.array_equal(F, V * expected_signs)
    assert np.array_equal(flip_signs(F), F)              # idempotent
    assert np.array_equal(flip_signs(-V), F)             # sign-invariant


def test_psd_sqrt():
    rng = np.random.default_rng(8)
    A = rng.standard_normal((20, 20))
    A = A @ A.T + 0.1 * np.eye(20)
    R = psd_sqrt(A)
    assert np.allclose(R, R.T, atol=0)
    # R R = A to round-off (cond(A) ~ 1e3 here: 1e-11 relative is ~1e4 eps)
    assert np.linalg.norm(R @ R - A) <= 1e-11 * np.linalg.norm(A)
    assert np.linalg.norm(R - scipy.linalg.sqrtm(A).real) <= 1e-10 * np.linalg.norm(R)
    R_inv = psd_sqrt(A, inverse=True)
    assert np.linalg.norm(R_inv @ R - np.eye(20)) <= 1e-10
    assert np.linalg.norm(R_inv @ R_inv - np.linalg.inv(A)) <= 1e-9 * np.linalg.norm(np.linalg.inv(A))


def test_psd_sqrt_rank_deficient_and_not_psd():
    X = np.random.default_rng(9).standard_normal((10, 3))
    A = X @ X.T                                        # rank 3
    R, R_inv = psd_sqrt(A), psd_sqrt(A, inverse=True)
    assert np.linalg.norm(R @ R - A) <= 1e-12 * np.linalg.norm(A)
    P = X @ np.linalg.pinv(X)                          # projector onto range(A)
    assert np.linalg.norm(R_inv @ R - P) <= 1e-10
    assert np.linalg.norm(R_inv @ R_inv - np.linalg.pinv(A)) <= 1e-10 * np.linalg.norm(np.linalg.pinv(A))
    with pytest.raises(ValueError, match="positive semi-definite"):
        psd_sqrt(np.diag([1.0, -1.0]))


@pytest.mark.parametrize("invariant", [True, False])
def test_rotate_to_diagonal(invariant):
    rng = np.random.default_rng(10)
    n, s = 30, 4
    B = with_spectrum(2.0 ** -np.arange(n), seed=11)
    if invariant:
        _, V_top = reference(B, s)
        Q, _ = np.linalg.qr(rng.standard_normal((s, s)))
        A = V_top @ Q                                   # rotated optimum
    else:
        A, _ = np.linalg.qr(rng.standard_normal((n, s)))  # any orthonormal A
    Gamma = A.T @ B @ A
    A_rot, lam = rotate_to_diagonal(A, Gamma)
    G_rot = A_rot.T @ B @ A_rot
    assert np.max(np.abs(G_rot - np.diag(lam))) <= 1e-12          # diagonalised
    assert np.all(np.diff(lam) <= 0)
    assert abs(lam.sum() - np.trace(Gamma)) <= 1e-12               # same trace
    assert np.max(np.abs(A_rot.T @ A_rot - np.eye(s))) <= 1e-12    # orthonormal
    assert projector_distance(A_rot, A) <= 1e-7                    # same subspace
    assert np.array_equal(flip_signs(A_rot), A_rot)
    if invariant:                                                  # = eigenvectors of B
        w_ref, V_ref = top_eigh(B, s, "dense")
        assert np.max(np.abs(lam - w_ref)) <= 1e-12
        assert np.max(np.abs(A_rot - V_ref)) <= 1e-10


def test_rotate_to_diagonal_bad_gamma():
    A = np.linalg.qr(np.random.default_rng(12).standard_normal((10, 3)))[0]
    with pytest.raises(ValueError, match="Gamma must be s x s"):
        rotate_to_diagonal(A, np.eye(4))


@pytest.mark.parametrize("method", ["dense", "lanczos", "arpack", "subspace", "auto"])
def test_implicit_centering_matches_explicit_center_gram(method):
    # top_eigh(K, center=True) must give the eigenpairs of M_c K M_c (formed
    # explicitly by center_gram, an independent O(n^2) formula): eigenvalues to
    # round-off relative to lambda_1, vectors equal (signs fixed by flip_signs;
    # the top eigenvalues of this kernel are well separated).
    from mvkm.kernels import RBF, center_gram

    X = np.random.default_rng(11).normal(size=(300, 4))
    K = RBF(1.5)(X)
    w_ref, V_ref = top_eigh(center_gram(K), 6, method="dense")
    before = K.copy()
    w, V = top_eigh(K, 6, method=method, center=True)
    assert np.array_equal(K, before)  # K itself is not centred in place
    np.testing.assert_allclose(w, w_ref, rtol=0, atol=1e-9 * w_ref[0])
    np.testing.assert_allclose(V, V_ref, atol=1e-6)


def test_implicit_centering_sparse_and_operator():
    import scipy.sparse as sp
    from scipy.sparse.linalg import aslinearoperator

    from mvkm.kernels import center_gram

    A = sp.random(200, 200, density=0.05, random_state=12)
    S = (A @ A.T + sp.eye(200)).tocsr()
    w_ref, _ = top_eigh(center_gram(S.toarray()), 4, method="dense")
    w, _ = top_eigh(S, 4, method="arpack", center=True)
    np.testing.assert_allclose(w, w_ref, rtol=0, atol=1e-9 * w_ref[0])
    with pytest.raises(ValueError, match="center=True needs K as an array or a sparse matrix"):
        top_eigh(aslinearoperator(S), 4, method="arpack", center=True)


# ---------------------------------------------------------------------------
# kernel_top_eigh: kernel PCA's eigenproblem from the data, one triangle
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", [RBF(1.3), Laplacian(2.0), Linear(), Polynomial(2, 1.0)],
                         ids=lambda k: type(k).__name__)
def test_upper_gram_upper_triangle_is_the_gram_matrix(kernel):
    X = np.random.default_rng(21).standard_normal((1100, 3))
    K, U = kernel(X), upper_gram(kernel, X)
    iu = np.triu_indices(1100)
    assert np.array_equal(U[iu], K[iu])                        # bitwise: the same tiles
    assert np.array_equal(kernel(X), K)                        # the flag does not leak


@pytest.mark.parametrize("n", [400, 1300])                     # LAPACK, then Lanczos
@pytest.mark.parametrize("kernel", [RBF(1.3), Laplacian(2.0), Linear()],
                         ids=lambda k: type(k).__name__)
@pytest.mark.parametrize("center", [True, False])
def test_kernel_top_eigh_equals_top_eigh_of_the_gram_matrix(kernel, n, center):
    """The eigenpairs of the (centred) Gram matrix, against LAPACK on the explicitly
    centred full matrix (an independent route: center_gram, syevr)."""
    X = np.random.default_rng(22).standard_normal((n, 8))   # rank >= 8 > 5 for Linear
    K = kernel(X)
    w_ref, V_ref = top_eigh(center_gram(K) if center else K, 5, "dense")
    w, V = kernel_top_eigh(X, kernel, 5, center=center)
    assert np.max(np.abs(w - w_ref)) <= 1e-10 * w_ref[0]
    assert np.max(np.abs(V - V_ref)) <= VEC_TOL
    assert np.max(np.abs(V.T @ V - np.eye(5))) <= 1e-10


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the overflowing Linear Gram matrix
def test_kernel_top_eigh_bad_input():
    X = np.random.default_rng(23).standard_normal((50, 2))
    with pytest.raises(TypeError, match="kernel must be an mvkm.kernels.Kernel"):
        kernel_top_eigh(X, lambda A: A @ A.T, 2)
    with pytest.raises(ValueError, match="n_components"):
        kernel_top_eigh(X, RBF(1.0), 50)
    with pytest.raises(ValueError, match="n >= 2"):
        kernel_top_eigh(X[:1], RBF(1.0), 1)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        kernel_top_eigh(bad, RBF(1.0), 2)
    big = np.random.default_rng(24).standard_normal((1200, 2)) * 1e200
    with pytest.raises(ValueError, match="not finite"):
        kernel_top_eigh(big, Linear(), 3)
    with pytest.raises(ValueError, match="tol"):
        kernel_top_eigh(np.random.default_rng(25).standard_normal((1200, 2)), RBF(1.0), 3, tol=-1.0)


def test_kernel_top_eigh_takes_the_data_first_and_the_old_order_with_a_warning():
    """Issue 33: kernel_top_eigh took (kernel, X, n), matfree_top_eigh (X, kernel, n). Both take
    the data first now; the old order still gives the same eigenpairs, with a FutureWarning
    that names the new one and points to the caller's line."""
    X = np.random.default_rng(27).standard_normal((60, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w, V = kernel_top_eigh(X, RBF(1.0), 3)
    with pytest.warns(FutureWarning, match=r"kernel_top_eigh\(X, kernel, n_components\)") as rec:
        w_old, V_old = kernel_top_eigh(RBF(1.0), X, 3)
    assert rec[0].filename == __file__
    np.testing.assert_array_equal(w_old, w)
    np.testing.assert_array_equal(V_old, V)
    # two arrays: a short TypeError that names the order, not the array's entries
    with pytest.raises(TypeError, match=r"got ndarray of shape \(60, 3\) \(the arguments are "
                                        r"kernel_top_eigh\(X, kernel, n_components\)\)") as err:
        kernel_top_eigh(X, X, 3)
    assert len(str(err.value)) < 200


@pytest.mark.parametrize("method", ["lanczos", "arpack"])
def test_krylov_methods_on_a_subnormal_matrix(method):
    """K = A A^T with entries of 5e-319 (found by the property test): 1 / max|K|
    overflows, so the solvers work on K times an exact power of two; and a Gram
    matrix of entries near 1e-303 (normal numbers, below the rescaling threshold)."""
    A = np.full((2, 1), 7.11664451e-160)
    K = A @ A.T
    w, V = top_eigh(K, 1, method)
    w_ref = np.linalg.eigvalsh(K)[-1:]
    assert np.isfinite(w).all() and abs(w[0] - w_ref[0]) <= 1e-8 * w_ref[0]
    assert abs(abs(V[0, 0]) - np.sqrt(0.5)) <= 1e-12
    X = np.full((1200, 1), 1e-152) * np.random.default_rng(26).standard_normal((1200, 1))
    lam, _ = kernel_top_eigh(X, Linear(), 1, center=False)
    assert abs(lam[0] - float(X[:, 0] @ X[:, 0])) <= 1e-8 * lam[0]


@pytest.mark.parametrize("scale", [1e-300, 1e-250, 1e-200, 1e-150, 1e150, 1e300])
@pytest.mark.parametrize("method", ["dense", "lanczos", "arpack", "subspace"])
@pytest.mark.parametrize("center", [False, True])
def test_top_eigh_is_exact_at_every_scale(scale, method, center):
    """Issue 35, item 6: the subspace method returned eigenvalues 40 % low at
    1e-200 (its filter's products of products left the normal range)."""
    from mvkm import center_gram, top_eigh

    A = np.random.default_rng(0).standard_normal((60, 60))
    K = A @ A.T
    ref = np.linalg.eigvalsh(center_gram(K) if center else K)[::-1][:3]
    w, _ = top_eigh(K * scale, 3, method=method, center=center)
    # eigh vs an iterative solver at tol 1e-10 on a well-separated top: 1e-8.
    np.testing.assert_allclose(w / scale, ref, rtol=1e-8)
