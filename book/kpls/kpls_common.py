"""The code the chapters of Part III share.

A helper that a second chapter of Part III needs is written here once; the
chapter that teaches it shows its source (``mvkm.plotting.show_source``) and
every later chapter imports it. It is not part of the package: anything a user
of ``mvkm`` would call belongs in ``mvkm``.
"""

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

import mvkm
from mvkm import MultiViewKPLS

__all__: list[str] = []

# --- The eigenproblem (kpls/from_pls, kpls/objective) -----------------------

__all__ += ["real_eig"]


def real_eig(A):
    """Eigenvalues (descending) and eigenvectors of a matrix whose spectrum
    we expect to be real."""
    lam, vec = np.linalg.eig(A)
    # eig of a non-symmetric matrix: imaginary parts of a real spectrum are
    # round-off. For a simple eigenvalue they are ~ eps * ||A||; a zero
    # eigenvalue in a Jordan block (singular kernels) moves by
    # ~ sqrt(eps) * ||A|| ~ 1e-8 ||A||: 1e-6 * max|lambda| covers both.
    assert np.abs(lam.imag).max() < 1e-6 * np.abs(lam).max()
    order = np.argsort(-lam.real)
    return lam.real[order], vec.real[:, order]


# --- An independent computation, for the checks of every chapter ------------

__all__ += ["independent_kpls", "check_package"]


def _gauss(A, B, s):
    return np.exp(-cdist(A, B, "sqeuclidean") / (2 * s ** 2))


def independent_kpls(train, test, sigmas, k):
    """MvKPLS without mvkm.

    Omega of centred Gaussian kernels (scipy distances), NumPy's general
    eig, alpha^T D alpha = 1, training scores K_c alpha, test rows centred
    with the training means. Returns eigenvalues, alphas, training and
    test scores.
    """
    n, V = len(train[0]), len(train)
    Kr = [_gauss(a, a, s) for a, s in zip(train, sigmas)]
    Kt = [_gauss(b, a, s) for a, b, s in zip(train, test, sigmas)]
    Kc = [K - K.mean(axis=0)[None] - K.mean(axis=1)[:, None] + K.mean()
          for K in Kr]
    Om = np.block([[Kc[u] if u != v else np.zeros((n, n)) for u in range(V)]
                   for v in range(V)])
    lam, vec = np.linalg.eig(Om)
    order = np.argsort(-lam.real)[:k]
    A = vec.real[:, order]
    D = scipy.linalg.block_diag(*Kc)
    A = A / np.sqrt(np.einsum("ij,ij->j", A, D @ A))
    alphas = [A[v * n:(v + 1) * n] for v in range(V)]
    train_sc = [K @ a for K, a in zip(Kc, alphas)]
    test_sc = [(T - T.mean(axis=1)[:, None] - K.mean(axis=0)[None]
                + K.mean()) @ a for T, K, a in zip(Kt, Kr, alphas)]
    return lam.real[order], alphas, train_sc, test_sc


def check_package(train, test, sigmas, k):
    """Both of the package's solvers against independent_kpls.

    Asserts eigenvalues, alpha and scores; returns the eigenvalues.
    """
    lam_r, alpha_r, train_r, test_r = independent_kpls(train, test, sigmas, k)
    for solver in ("dense", "lanczos"):
        fit = MultiViewKPLS(n_components=k,
                            kernels=[mvkm.RBF(s) for s in sigmas],
                            solver=solver, random_state=0).fit(train)
        # Three eigensolvers (general eig, symmetric eigh, Lanczos to
        # 1e-10): ~1e-11; assert 1e-8.
        assert np.allclose(fit.eigenvalues_, lam_r, rtol=1e-8), solver
        p_train, p_test = fit.transform(train), fit.transform(test)
        sgn = np.sign(np.sum(p_train[0] * train_r[0], axis=0))
        for v in range(len(train)):
            # Simple eigenvalues: eigenvectors to ~1e-9 of their scale;
            # assert 1e-6.
            for got, ref in ((fit.dual_coef_[v], alpha_r[v]),
                             (p_train[v], train_r[v]),
                             (p_test[v], test_r[v])):
                tol = 1e-6 * np.abs(ref).max()
                assert np.allclose(got * sgn, ref, atol=tol), solver
    return lam_r
