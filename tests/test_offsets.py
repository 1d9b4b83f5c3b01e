"""Data far from the origin (issue 35, item 2): every centred quantity of a
linear kernel is computed from the data's middle, so an offset costs no digits.

The reference is the same data with the offset taken off exactly (``Xs - off``
is exact in float64 for these magnitudes), fitted by the same code."""

import numpy as np
import pytest

import mvkm
from mvkm import KernelPPCA, Linear, MultiViewKPLS, kernel_top_eigh

rng = np.random.default_rng(0)
X = rng.standard_normal((40, 3))
Y = rng.standard_normal((40, 2))
OFFSETS = [1e6, 1e8, 1e12]


def _moved(off):
    Xs = X + off
    return Xs, Xs - off          # the data, and the data at the origin


@pytest.mark.parametrize("off", OFFSETS)
def test_kernel_top_eigh_of_a_linear_kernel(off):
    # before: [90.98, 86.89] at 1e8 for [51.31, 29.87]
    Xs, X0 = _moved(off)
    w, V = kernel_top_eigh(Linear(), Xs, 2)
    w0, V0 = kernel_top_eigh(Linear(), X0, 2)
    # both the same centred matrix to round-off: eigenvalues to 1e-12
    np.testing.assert_allclose(w, w0, rtol=1e-12)
    np.testing.assert_allclose(np.abs(V), np.abs(V0), atol=1e-10)


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
@pytest.mark.parametrize("off", OFFSETS)
def test_kpls_with_linear_kernels(off, solver):
    # before: eigenvalues [24.58, 19.46] at 1e8 for the primal's [11.24, 5.89]
    Xs, X0 = _moved(off)
    kw = dict(kernels=[Linear(), Linear()], solver=solver, random_state=0)
    a = MultiViewKPLS(2, **kw).fit([Xs, Y])
    b = MultiViewKPLS(2, **kw).fit([X0, Y])
    np.testing.assert_allclose(a.eigenvalues_, b.eigenvalues_, rtol=1e-9)
    for u, w in zip(a.transform([Xs, Y]), b.transform([X0, Y])):
        np.testing.assert_allclose(u, w, atol=1e-9 * np.abs(w).max())


@pytest.mark.parametrize("off", OFFSETS)
def test_kernel_ppca_with_the_linear_kernel(off):
    # before: "the centred kernel matrix has rank 0" at 1e8
    Xs, X0 = _moved(off)
    a, b = KernelPPCA(1).fit(Xs), KernelPPCA(1).fit(X0)
    np.testing.assert_allclose(a.sigma2_, b.sigma2_, rtol=1e-12)
    np.testing.assert_allclose(np.abs(a.transform(Xs)), np.abs(b.transform(X0)),
                               atol=1e-12)
    np.testing.assert_allclose(a.score_samples(Xs), b.score_samples(X0),
                               rtol=1e-12)


def test_data_near_the_origin_use_the_kernel_as_given():
    # the shift only where it gains digits: same bits as before near 0
    from mvkm.kernels import centring_equivalent

    k = Linear()
    assert centring_equivalent(k, X) is k
    assert centring_equivalent(mvkm.RBF(1.0), X + 1e8) == mvkm.RBF(1.0)
    moved = centring_equivalent(k, X + 1e8)
    assert repr(moved) == "Linear()"
    Kc = mvkm.center_gram(moved(X + 1e8))
    np.testing.assert_allclose(Kc, mvkm.center_gram(X @ X.T), atol=1e-6)
