"""The code the chapters of Part II share.

A helper that a second chapter of Part II needs is written here once; the
chapter that teaches it shows its source (``mvkm.plotting.show_source``) and
every later chapter imports it. It is not part of the package: anything a user
of ``mvkm`` would call belongs in ``mvkm``.
"""

import numpy as np

__all__: list[str] = []

# --- Spectra (ppca/dual, ppca/sampling, ppca/novelty) -----------------------

__all__ += ["eig_desc", "numerical_rank"]


def eig_desc(S):
    """Eigenvalues (descending) and eigenvectors of a symmetric matrix."""
    lam, U = np.linalg.eigh(S)
    return lam[::-1], U[:, ::-1]


def numerical_rank(lam, K):
    """The number of eigenvalues ``lam`` of the n x n matrix ``K`` above zero.

    Eigenvalues of a symmetric n x n matrix carry round-off of about
    n * eps * ||K||; below that they are zero (the rule of mvkm.KernelPPCA).
    """
    scale = max(lam[0], np.diag(K).max())
    return int(np.sum(lam > len(K) * np.finfo(float).eps * scale))
