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
    w, V = kernel_top_eigh(Xs, Linear(), 2)
    w0, V0 = kernel_top_eigh(X0, Linear(), 2)
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


# --- Views on different scales (issue 35, item 1) ---------------------------

def _same_up_to_sign(a, b, rtol):
    s = np.sign(np.sum(a * b, axis=0))
    np.testing.assert_allclose(a * s, b, atol=rtol * np.abs(b).max())


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
@pytest.mark.parametrize("scale", [1e-50, 1e8, 1e16, 1e50])
def test_two_views_on_different_scales(scale, solver):
    # before: view 0's scores 5e-9 off at 1e8, 47 % at 1e16, all zero at 1e50
    # (dense); "n_components=2 is larger than the number of positive
    # eigenvalues of Omega (1)" from 1e8 on (Lanczos). With two views the
    # problem is invariant: lambda scales by `scale`, view 0's scores too.
    ref = MultiViewKPLS(2).fit([X, Y])
    e0, e1 = ref.transform([X, Y])
    m = MultiViewKPLS(2, solver=solver, random_state=0).fit([X * scale, Y])
    f0, f1 = m.transform([X * scale, Y])
    np.testing.assert_allclose(m.eigenvalues_, ref.eigenvalues_ * scale,
                               rtol=1e-12)
    _same_up_to_sign(f0 / scale, e0, 1e-12)
    _same_up_to_sign(f1, e1, 1e-12)


@pytest.mark.parametrize("formulation", ["dual", "primal"])
@pytest.mark.parametrize("scale", [1e8, 1e16, 1e50])
def test_a_small_view_among_large_ones_keeps_its_digits(scale, formulation):
    # with three views the problem is not scale invariant; the check is the
    # eigen-equation's block row of the small view, e_1 = K_c,1 (e_0 + e_2) / lambda,
    # computed here from the large views' scores (accurate to eps)
    import warnings

    Z = rng.standard_normal((40, 2))
    views = [X * scale, Y, Z * scale]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = MultiViewKPLS(2, formulation=formulation).fit(views)
    e = m.transform(views)
    Yc = Y - Y.mean(axis=0)
    ref = (Yc @ Yc.T) @ (e[0] + e[2]) / m.eigenvalues_
    _same_up_to_sign(e[1], ref, 1e-12)


def test_three_views_on_different_scales_leave_the_lanczos_route_saying_so():
    Z = rng.standard_normal((40, 2))
    with pytest.warns(UserWarning, match="differ in scale by"):
        m = MultiViewKPLS(2, solver="lanczos").fit([X * 1e8, Y, Z])
    d = MultiViewKPLS(2, solver="dense").fit([X * 1e8, Y, Z])
    np.testing.assert_allclose(m.eigenvalues_, d.eigenvalues_, rtol=1e-12)


def test_a_constant_view_is_named_on_the_lanczos_route():
    # before: "Omega is zero: every kernel matrix is zero", although view 0's
    # kernel matrix is not zero
    with pytest.raises(ValueError, match=r"views\[1\] is zero"):
        MultiViewKPLS(2, kernels=[mvkm.RBF(1.0), Linear()],
                      solver="lanczos").fit([X, np.full((40, 2), 3.7)])


def test_a_view_constant_up_to_round_off_is_reported():
    # before: eigenvalues of 1e-15 and scores, without a word
    noisy = 3.7 * (1.0 + 1e-15 * rng.standard_normal((40, 2)))
    with pytest.warns(UserWarning, match=r"views\[1\] varies by only"):
        MultiViewKPLS(2).fit([X, noisy])


# --- Inference from a view with a small share (issue 35, item 3) ------------

def _two_views(n=60):
    r = np.random.default_rng(1)
    Z = r.standard_normal((n, 2))
    A = Z @ r.standard_normal((2, 4)) + 0.1 * r.standard_normal((n, 4))
    B = Z @ r.standard_normal((2, 3)) + 0.1 * r.standard_normal((n, 3))
    return A, B


@pytest.mark.parametrize("formulation", ["primal", "dual"])
@pytest.mark.parametrize("scale", [1e-4, 1e-6, 1e-8])
def test_inference_from_a_view_with_a_small_share(scale, formulation):
    # before: 4e-7 relative error at 1e-4, 4e-3 at 1e-6, 86 % at 1e-8
    # (Gamma - U_1^T U_1 formed by subtraction). The reference solves the
    # latent equation (U_0^T U_0) h = U_0^T phi_0(x) from the given view alone.
    from mvkm import MultiViewRKM

    A, B = _two_views()
    A = A * scale
    kw = {} if formulation == "primal" else dict(kernels=[Linear(), Linear()])
    m = MultiViewRKM(2, formulation=formulation, **kw).fit([A, B])
    h = m.transform([A, None])
    Ac = A - A.mean(axis=0)
    if formulation == "primal":
        U0 = m.U_[0]
        ref = np.linalg.solve(U0.T @ U0, (Ac @ U0).T).T
    else:
        H, K0 = m.H_, Ac @ Ac.T                     # centred linear kernel
        ref = np.linalg.solve(H.T @ K0 @ H, (K0 @ H).T).T
    # a 2 x 2 system of condition ~10 from accurate terms: 1e-10
    np.testing.assert_allclose(h, ref, atol=1e-10 * np.abs(ref).max())


def _exact_centred_polynomial(Xi, Ti, degree, c):
    """Centred training Gram and centred test rows of (x'y + c)^p, in exact integer and
    rational arithmetic (integer data), rounded once to float64 at the end."""
    from fractions import Fraction

    def k(a, b):
        return (sum(int(p) * int(q) for p, q in zip(a, b)) + int(c)) ** degree

    n = len(Xi)
    K = [[k(a, b) for b in Xi] for a in Xi]
    r = [Fraction(sum(row), n) for row in K]
    g = Fraction(sum(sum(row) for row in K), n * n)
    Kc = [[float(K[i][j] - r[i] - r[j] + g) for j in range(n)] for i in range(n)]
    rows = []
    for t in Ti:
        kt = [k(t, b) for b in Xi]
        mt = Fraction(sum(kt), n)
        rows.append([float(kt[j] - mt - r[j] + g) for j in range(n)])
    return np.array(Kc), np.array(rows)


@pytest.mark.parametrize("degree, c", [(2, 1.0), (3, 0.0), (3, 2.0)])
@pytest.mark.parametrize("off", [1e5, 1e6])
def test_polynomial_kernels_far_from_the_origin(degree, c, off):
    # Integer data moved by an integer offset: the exact centred values are known. The
    # direct formula's centred matrix was 8e-8 (1e5) and 6e-6 (1e6) off, relative to its
    # largest entry, at degree 2, and its 2nd/3rd eigenvalues lose as many digits.
    from mvkm import Polynomial
    from mvkm.kernels import _center_test_rows, center_gram, centring_equivalent

    ints = np.random.default_rng(1).integers(-5, 6, (24, 3)).astype(float)
    Xs, Ts = ints[:20] + off, ints[20:] + off
    Kc, rows = _exact_centred_polynomial(Xs, Ts, degree, c)
    kernel = Polynomial(degree, c)
    eq = centring_equivalent(kernel, Xs)
    assert repr(eq) == repr(kernel)
    scale = np.abs(Kc).max()
    # a few roundings of values of the size of Kc's entries: 1e-13 relative is ample
    np.testing.assert_allclose(center_gram(eq(Xs)), Kc, rtol=0, atol=1e-13 * scale)
    K_test = eq(Ts, Xs)
    got = _center_test_rows(K_test, eq(Xs).mean(axis=0))
    np.testing.assert_allclose(got, rows, rtol=0, atol=1e-13 * scale)
    w_exact = np.linalg.eigvalsh(Kc)[::-1][:3]
    w, _ = kernel_top_eigh(Xs, kernel, 3)
    np.testing.assert_allclose(w, w_exact, rtol=1e-12)
    assert centring_equivalent(kernel, Xs, polynomial=False) is kernel
    # KernelPPCA fits with the shifted kernel too (it was 1e-5 off at 1e6, 1e-3 at 1e7 and
    # refused the data at 1e8 as "rank 0"); its transform reads centred test rows
    model = KernelPPCA(2, kernel=kernel).fit(Xs)
    np.testing.assert_allclose(model.eigenvalues_[:3], w_exact, rtol=1e-12)
    E = np.linalg.eigh(Kc)[1][:, ::-1][:, :2]
    # the scores up to sign: rows @ E / sqrt(lambda) scaled as the model scales them
    got, ref = model.transform(Ts), rows @ E
    ratio = got / ref
    np.testing.assert_allclose(np.abs(ratio), np.abs(ratio[:1]).repeat(len(Ts), 0), rtol=1e-9)


def _poly2_features(X, c):
    """Explicit features of (x'y + c)^2: [c, sqrt(2c) x, x_i x_j (sqrt 2 off the diagonal)]."""
    i, j = np.triu_indices(X.shape[1])
    w = np.where(i == j, 1.0, np.sqrt(2.0))
    return np.hstack([np.full((len(X), 1), c), np.sqrt(2 * c) * X, X[:, i] * X[:, j] * w])


@pytest.mark.parametrize("off", [0.0, 30.0, 300.0])
@pytest.mark.parametrize("preimage", ["plain", "stable"])
def test_kernel_ppca_polynomial_preimages_far_from_the_origin(off, preimage):
    # The fit's kernel is that of the features moved by phi(m); the pre-image's smoother
    # needs the given kernel's uncentred values k(x_i, x_hat), recovered from k(x_i, m)
    # and k(m, m). Independent: the explicit features of the degree-2 kernel.
    from mvkm import Polynomial
    from mvkm.preimage import kernel_smoother, stable_kernel_smoother

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) + off
    model = KernelPPCA(2, kernel=Polynomial(2, c=1.0)).fit(X)
    H = rng.normal(size=(4, 2))
    F = _poly2_features(X, 1.0)
    k_hat = (F.mean(0) + H @ model.A_.T @ (F - F.mean(0))) @ F.T
    if preimage == "plain":
        ref = kernel_smoother(k_hat, X)
    else:
        tau = 1e-3 * np.mean(np.einsum("ij,ij->i", F, F))
        ref = stable_kernel_smoother(k_hat, X, tau=tau)
    got = model.inverse_transform(H, preimage=preimage)
    # k_hat's entries reach 1e10 at 300 and the weights are their ratios: 1e-10 is ample
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("off", [30.0, 1e4, 1e6])
def test_rkm_polynomial_view_far_from_the_origin(off):
    # MultiViewRKM's dual with a polynomial view: eigenvalues were 5e-10 off at 1e4, 2e-6 at
    # 1e6 and 4e-4 at 1e7; the view is now fitted with the kernel of the features moved by
    # phi(m). References: the centred Gram of centring_equivalent (checked against exact
    # integer arithmetic above) and, for the pre-images, the explicit degree-2 features
    # (near enough to the origin that their uncentred products keep their digits).
    from mvkm import Polynomial
    from mvkm.kernels import center_gram, centring_equivalent
    from mvkm.preimage import kernel_smoother

    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(40, 3)) + off, rng.normal(size=(40, 2))
    model = mvkm.MultiViewRKM(2, kernels=[Polynomial(2, c=1.0), Linear()]).fit([X, Y])
    F = _poly2_features(X, 1.0) if off < 1e3 else None
    Kc = center_gram(centring_equivalent(Polynomial(2, c=1.0), X)(X))
    ref = np.linalg.eigvalsh(Kc + center_gram((Y - Y.mean(0)) @ (Y - Y.mean(0)).T))[::-1][:2]
    np.testing.assert_allclose(model.eigenvalues_, ref, rtol=1e-12)
    if F is not None:
        h = model.transform([None, Y[:5]])
        a = h @ model.H_.T
        k_hat = (F.mean(0) + a @ (F - F.mean(0))) @ F.T
        want = kernel_smoother(k_hat, X)
        got = model.predict([None, Y[:5]], 0)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())


def test_kernel_ppca_matrix_free_linear_far_from_the_origin():
    # Above DENSE_MAX_N the matrix-free route took the linear kernel moved to the data's
    # middle into KernelOperator, which refused it (TypeError), and the rank count read the
    # uncentred norms ("rank 0" at 1e8). The tiles now compute (x - m).(y - m). Reference:
    # the data as stored (X + 1e8 rounded), moved back exactly and centred; the products'
    # round-off is eps times the centred scale, the solver's tol 1e-10: 1e-8 is ample.
    rng = np.random.default_rng(0)
    Xo = rng.normal(size=(2100, 3)) + 1e8
    Xe = Xo - 1e8
    Xe -= Xe.mean(0)
    ref = np.linalg.eigvalsh(Xe.T @ Xe)[::-1]
    model = KernelPPCA(2, kernel_storage="none").fit(Xo)
    np.testing.assert_allclose(model.eigenvalues_[:2], ref[:2], rtol=1e-8)
