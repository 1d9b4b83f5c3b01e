"""Regression tests of issue 14 (reliability pass): each test failed before its fix.

Silent wrong answers (items 1-8), structural defects (9-11) and the README (12).
Tolerances are justified where they appear.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import mvkm

ROOT = Path(__file__).resolve().parents[1]
# Control characters other than newline: a non-raw docstring with "\a", "\b", "\t",
# "\f" holds BEL/BS/TAB/FF where "\alpha", "\bar", "\top", "\frac" were meant.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# ---------------------------------------------------------------- item 8
def _python_files():
    return sorted(p for d in ("mvkm", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_control_characters_in_sources_or_docstrings(path):
    text = path.read_text()
    bad = [i + 1 for i, line in enumerate(text.splitlines()) if _CONTROL.search(line)]
    assert not bad, f"{path.name}: control characters on lines {bad}"
    # A docstring's *value* (escape sequences decoded) must be free of them too.
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and _CONTROL.search(doc.replace("\n", " ")):
                name = getattr(node, "name", "<module>")
                raise AssertionError(f"{path.name}: the docstring of {name} holds control characters")


def test_no_control_characters_in_imported_docstrings():
    import mvkm.kernels

    for _, obj in inspect.getmembers(mvkm.kernels, inspect.isfunction):
        assert not _CONTROL.search((obj.__doc__ or "").replace("\n", " ")), obj.__name__


# ---------------------------------------------------------------- item 4
def test_nystrom_with_a_zero_landmark_gram_raises():
    with pytest.raises(ValueError, match="landmark Gram matrix"):
        mvkm.Nystrom(mvkm.Linear(), 3, random_state=0).fit(np.zeros((5, 2)))


# ---------------------------------------------------------------- item 5
def _bad_inputs():
    import scipy.sparse as sp

    X = np.random.default_rng(0).normal(size=(6, 2))
    return X, sp.csr_matrix(X), X.astype(str)


@pytest.mark.parametrize("call", [
    lambda A: mvkm.kernels.RBF(1.0)(A),
    lambda A: mvkm.MultiViewRKM(1).fit([A, A]),
    lambda A: mvkm.KernelPPCA(n_components=1).fit(A),
    lambda A: mvkm.Identity().fit(A),
])
def test_sparse_input_is_refused_with_the_same_words_everywhere(call):
    _, S, _ = _bad_inputs()
    with pytest.raises(TypeError, match="sparse input is not supported"):
        call(S)


@pytest.mark.parametrize("call", [
    lambda A: mvkm.kernels.RBF(1.0)(A),
    lambda A: mvkm.MultiViewRKM(1).fit([A, A]),
    lambda A: mvkm.KernelPPCA(n_components=1).fit(A),
])
def test_strings_of_numbers_are_refused(call):
    _, _, Xs = _bad_inputs()
    with pytest.raises(TypeError, match="strings"):
        call(Xs)


def test_complex_check_after_conversion():
    # a list of complex numbers (not an ndarray): np.iscomplexobj(list) is False before conversion
    from mvkm._validation import check_array

    with pytest.raises(ValueError, match="real-valued"):
        check_array([[1 + 1j, 2.0]], "X")
    with pytest.raises(ValueError, match="real-valued"):
        check_array(np.array([[1 + 0j, 2.0]], dtype=object), "X")


# ---------------------------------------------------------------- item 6
def test_refit_starts_from_a_clean_state():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=(30, 2))
    model = mvkm.MultiViewRKM(2, formulation="primal").fit([X, Y])
    assert hasattr(model, "U_") and hasattr(model, "U_tilde_")
    model.set_params(formulation="dual").fit([X, Y])
    assert not hasattr(model, "U_") and not hasattr(model, "U_tilde_")
    model.set_params(solver="stiefel").fit([X, Y])
    assert hasattr(model, "stiefel_history_")
    model.set_params(solver="eig").fit([X, Y])
    assert not any(hasattr(model, a) for a in ("stiefel_history_", "Gamma_prime_", "components_prime_"))
    # KernelPPCA: primal attributes do not survive a dual refit, and vice versa
    ppca = mvkm.KernelPPCA(n_components=1, formulation="primal").fit(X)
    ppca.set_params(formulation="dual").fit(X)
    assert not any(hasattr(ppca, a) for a in ("W_", "mean_", "components_", "Phi_fit_"))
    ppca.set_params(formulation="primal").fit(X)
    assert not any(hasattr(ppca, a) for a in ("A_", "K_fit_"))


# ---------------------------------------------------------------- item 2
_X = np.random.default_rng(0).normal(size=(20, 3))


@pytest.mark.parametrize("kernel, X, sigma_eff", [
    (mvkm.RBF(1.0), _X * 1e160, 1e-160),        # exact Gram matrix: that of RBF(1e-160) on _X
    (mvkm.RBF(1e-300), _X, 1e-300),
    (mvkm.RBF(3.0e150), _X * 1e150, 3.0),        # far from overflow in exact arithmetic: RBF(3) on _X
    (mvkm.Laplacian(1.0), _X * 1e160, 1e-160),
    (mvkm.Laplacian(2.0e155), _X * 1e155, 2.0),
])
def test_radial_kernels_do_not_overflow_on_finite_input(kernel, X, sigma_eff):
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no overflow or NaN
        K = kernel(X)
    # independent: the same kernel of the scaled-down data, computed with scipy's distances
    from scipy.spatial.distance import cdist

    d = cdist(_X, _X) / sigma_eff
    expected = np.exp(-0.5 * d**2) if isinstance(kernel, mvkm.RBF) else np.exp(-d)
    assert np.all(np.isfinite(K))
    # relative error of the exponent ~ 1e-15 (a few roundings): 1e-10 absolute on values in [0, 1]
    assert np.abs(K - expected).max() < 1e-10


def test_radial_kernels_keep_their_fast_path_bit_for_bit():
    # the rescaled path is only taken near overflow: ordinary inputs give the same bits as before
    K = mvkm.RBF(2.0)(_X)
    Z = _X / 2.0
    h = 0.5 * np.einsum("ij,ij->i", Z, Z)
    E = np.minimum(Z @ Z.T - h[:, None] - h[None, :], 0.0)
    np.fill_diagonal(E, 0.0)
    assert np.abs(K - np.exp(E)).max() < 1e-15


@pytest.mark.parametrize("kernel", [mvkm.Linear(), mvkm.Polynomial(3)])
def test_non_radial_kernels_raise_when_the_gram_matrix_overflows(kernel):
    with pytest.raises(ValueError, match="not finite"):
        kernel(_X * 1e160)


def test_center_gram_and_top_eigh_check_their_outputs():
    K = mvkm.RBF(2.0)(_X)
    with pytest.raises(ValueError, match="not finite"):
        mvkm.center_gram(np.full((4, 4), 1.7e308) - np.diag([1.7e308, 0, 0, 0]))
    for method in ("dense", "arpack", "subspace"):
        lam, V = mvkm.top_eigh(K * 1e307, 2, method=method)
        lam0, V0 = mvkm.top_eigh(K, 2, method="dense")
        # the scaled problem has the scaled eigenvalues and the same eigenvectors; the
        # iterative methods stop at residual 1e-10 lambda_1: 1e-8 relative is safe
        assert np.allclose(lam / 1e307, lam0, rtol=1e-8) and np.allclose(V, V0, atol=1e-6)


# ---------------------------------------------------------------- item 3
def test_subspace_on_a_matrix_that_is_not_psd_gives_the_right_eigenvalues():
    X = np.random.default_rng(0).normal(size=(60, 3))
    K = mvkm.center_gram(mvkm.RBF(1.0)(X))
    truth = np.sort(np.linalg.eigvalsh(-K))[::-1][:2]     # LAPACK, all eigenvalues
    with pytest.warns(RuntimeWarning, match="not positive semi-definite"):
        lam, V = mvkm.top_eigh(-K, 2, method="subspace")
    # the fallback (ARPACK) stops at residual 1e-10 * |lambda|: eigenvalues to ~1e-12 absolute
    assert np.allclose(lam, truth, rtol=0, atol=1e-9 * np.abs(truth).max() + 1e-12)
    assert np.allclose(-K @ V, V * lam, atol=1e-8)
    # a PSD matrix is unaffected: no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mvkm.top_eigh(K, 2, method="subspace")
