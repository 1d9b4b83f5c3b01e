"""Pre-image maps: from a feature-space or kernel-space estimate back to input space.

The kernel smoother (Nadaraya-Watson form) of Schreurs and Suykens (2018) turns
a vector of predicted kernel values :math:`\\hat k_i \\approx k(x_i, x^\\star)`
between an unknown point :math:`x^\\star` and the training points into the
weighted mean :math:`\\sum_i \\hat k_i x_i / \\sum_i \\hat k_i`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array

__all__ = ["kernel_smoother"]


def kernel_smoother(k_hat: ArrayLike, X_train: ArrayLike) -> NDArray[np.float64]:
    r"""The kernel-smoother pre-image :math:`x^\star = \sum_i \hat k_i x_i / \sum_i \hat k_i`.

    Parameters
    ----------
    k_hat : array_like of shape (m, n) or (n,)
        Predicted *uncentred* kernel values between each of ``m`` unknown points
        and the ``n`` training points.
    X_train : array_like of shape (n, d)
        The training points of the view to reconstruct.

    Returns
    -------
    ndarray of shape (m, d) (or (d,) for a 1-D ``k_hat``)

    Raises
    ------
    ValueError
        On shape mismatch, NaN, or a row whose weights sum to zero (the smoother
        is undefined there; a stabilised variant is the remedy).
    """
    one = np.ndim(k_hat) == 1
    k = check_array(np.atleast_2d(k_hat), "k_hat")
    X = check_array(X_train, "X_train")
    if k.shape[1] != X.shape[0]:
        raise ValueError(f"k_hat has {k.shape[1]} columns but X_train has {X.shape[0]} rows")
    total = k.sum(axis=1)
    scale = np.abs(k).sum(axis=1)
    bad = np.abs(total) <= 1e-12 * np.maximum(scale, np.finfo(float).tiny)
    if np.any(bad):
        raise ValueError(f"the kernel-smoother weights sum to zero for row(s) {np.flatnonzero(bad)[:5].tolist()}")
    out = (k @ X) / total[:, None]
    return out[0] if one else out
