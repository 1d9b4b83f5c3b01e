"""Pre-image maps: from a feature-space or kernel-space estimate back to input space.

The kernel smoother (Nadaraya-Watson form) of Schreurs and Suykens (2018) turns
a vector of predicted kernel values :math:`\\hat k_i \\approx k(x_i, x^\\star)`
between an unknown point :math:`x^\\star` and the training points into the
weighted mean :math:`\\sum_i \\hat k_i x_i / \\sum_i \\hat k_i`
(:func:`kernel_smoother`). Its normaliser can vanish: predicted kernel values
may be negative, and a *centred* kernel vector always sums to zero.
:func:`stable_kernel_smoother` is the regularised version used by
:class:`mvkm.ppca.KernelPPCA`: weights clipped at zero and a pull of strength
``tau`` toward the training mean.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array, check_bool, check_positive
from ._validation import as_array

__all__ = ["kernel_smoother", "stable_kernel_smoother"]


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
    one = as_array(k_hat, "k_hat").ndim == 1
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


def stable_kernel_smoother(k_hat: ArrayLike, X_train: ArrayLike, *, tau: float = 1e-3,
                           clip: bool = True) -> NDArray[np.float64]:
    r"""Stabilised kernel smoother: clipped weights and a pull of strength ``tau`` toward the mean.

    The plain smoother (eq. 19 of De Plaen and Suykens, 2023) is the minimiser of
    :math:`\sum_i \hat k_i \|x - x_i\|^2`, which is a well-posed problem only when the
    weights are non-negative and do not all vanish. Clipping the weights,
    :math:`w_i = \max(\hat k_i, 0)`, and adding the Tikhonov term
    :math:`\tau \|x - \bar x\|^2` (:math:`\bar x` the mean of ``X_train``) makes
    the objective strictly convex for any :math:`\tau > 0`; setting its gradient
    to zero gives

    .. math::
        x^\star = \frac{\sum_i w_i x_i + \tau \bar x}{\sum_i w_i + \tau},

    a convex combination of the training points whose denominator is at least
    :math:`\tau`. When every :math:`\hat k_i \ge 0` and :math:`\tau \to 0` it is
    the plain smoother; when the weights vanish (a query far from every training
    point, or a centred kernel vector clipped to nothing) it returns
    :math:`\bar x` instead of dividing by zero. The relative pull toward the mean
    is :math:`\tau / (\sum_i w_i + \tau)`.

    Parameters
    ----------
    k_hat : array_like of shape (m, n) or (n,)
        Predicted *uncentred* kernel values between each of ``m`` unknown points
        and the ``n`` training points.
    X_train : array_like of shape (n, d)
        The training points of the view to reconstruct.
    tau : float, default=1e-3
        Strength :math:`\tau \ge 0` of the pull toward the mean, in the units of
        the kernel values (for kernels with :math:`k(x, x) = 1`, such as the RBF
        kernel, one exact match among the training points weighs 1). ``tau=0``
        with ``clip=False`` is the plain smoother.
    clip : bool, default=True
        Clip negative weights at zero.

    Returns
    -------
    ndarray of shape (m, d) (or (d,) for a 1-D ``k_hat``)

    Raises
    ------
    ValueError
        On shape mismatch, NaN, a negative ``tau``, or (only possible with
        ``tau=0``) a row whose weights sum to zero.

    See Also
    --------
    kernel_smoother : the plain smoother, which raises where the weights sum to zero.
    """
    tau = check_positive(tau, "tau", strict=False)
    check_bool(clip, "clip")
    one = as_array(k_hat, "k_hat").ndim == 1
    k = check_array(np.atleast_2d(k_hat), "k_hat")
    X = check_array(X_train, "X_train")
    if k.shape[1] != X.shape[0]:
        raise ValueError(f"k_hat has {k.shape[1]} columns but X_train has {X.shape[0]} rows")
    w = np.maximum(k, 0.0) if clip else k
    total = w.sum(axis=1) + tau
    scale = np.abs(w).sum(axis=1) + tau
    bad = np.abs(total) <= 1e-12 * np.maximum(scale, np.finfo(float).tiny)
    if np.any(bad):
        raise ValueError(
            f"the kernel-smoother weights sum to zero for row(s) {np.flatnonzero(bad)[:5].tolist()}; "
            "use tau > 0"
        )
    out = (w @ X + tau * X.mean(axis=0)) / total[:, None]
    return out[0] if one else out
