r"""Explicit feature maps and the kernels they induce.

A feature map :math:`\phi: \mathbb R^d \to \mathbb R^D` turns a kernel method
into a linear one: with :math:`\Phi = [\phi(x_1), \dots, \phi(x_n)]^\top` the
Gram matrix is :math:`K = \Phi \Phi^\top`. Each map here has ``fit`` /
``transform`` (scikit-learn conventions) and a ``kernel`` attribute, the kernel
it represents exactly (:class:`Identity`) or approximates
(:class:`RandomFourierFeatures`, :class:`Nystrom`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin

from ._validation import check_array, check_count, check_positive, check_random_state
from ._validation import atomic_fit, check_finite_result
from .kernels import RBF, Kernel, Linear

__all__ = ["Identity", "RandomFourierFeatures", "Nystrom", "poly2_features"]


def _check_fitted(est: Any, attr: str) -> None:
    if not hasattr(est, attr):
        raise ValueError(
            f"This {type(est).__name__} is not fitted yet: call fit(X) before transform(X)"
        )


def _check_n_features(est: Any, X: NDArray[Any]) -> None:
    if X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
            f"{est.n_features_in_} features as input (the number seen in fit)"
        )


class Identity(TransformerMixin, BaseEstimator):
    r"""The identity feature map :math:`\phi(x) = x`; it induces :class:`~mvkm.kernels.Linear`.

    Attributes
    ----------
    n_features_in_ : int
        Input dimension seen in ``fit``.
    n_features_out_ : int
        Output dimension (equal to ``n_features_in_``).
    """

    @atomic_fit
    def fit(self, X: ArrayLike, y: Any = None) -> "Identity":
        """Record the input dimension. Returns ``self``."""
        X = check_array(X, "X")
        self.n_features_in_ = X.shape[1]
        self.n_features_out_ = X.shape[1]
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Return a float64 copy of ``X``, shape (n, d)."""
        _check_fitted(self, "n_features_in_")
        X = check_array(X, "X")
        _check_n_features(self, X)
        return X.copy()

    @property
    def kernel(self) -> Kernel:
        """The kernel this map represents, :class:`~mvkm.kernels.Linear`."""
        return Linear()


class RandomFourierFeatures(TransformerMixin, BaseEstimator):
    r"""Random Fourier features for the Gaussian kernel (Rahimi and Recht, 2007).

    By Bochner's theorem :math:`\exp(-\|x-y\|^2/(2\sigma^2)) =
    \mathbb E_{\omega, b}[2 \cos(\omega^\top x + b)\cos(\omega^\top y + b)]`
    with :math:`\omega \sim \mathcal N(0, \sigma^{-2} I)` and
    :math:`b \sim \mathcal U[0, 2\pi]`. The map

    .. math:: z(x) = \sqrt{2/D}\, \cos(\Omega^\top x + b) \in \mathbb R^D

    gives :math:`z(x)^\top z(y)`, an unbiased Monte Carlo estimate of the kernel
    whose error falls like :math:`1/\sqrt D`.

    Parameters
    ----------
    sigma : float, default=1.0
        Bandwidth of the approximated :class:`~mvkm.kernels.RBF` kernel.
    n_features : int, default=100
        Number :math:`D` of random features.
    random_state : int, Generator or None
        Seed of the frequencies and phases.

    Attributes
    ----------
    omega_ : ndarray of shape (d, n_features)
        The sampled frequencies.
    offset_ : ndarray of shape (n_features,)
        The sampled phases.
    n_features_in_ : int
    n_features_out_ : int
    """

    def __init__(self, sigma: float = 1.0, n_features: int = 100,
                 random_state: Any = None) -> None:
        self.sigma = sigma
        self.n_features = n_features
        self.random_state = random_state

    @atomic_fit
    def fit(self, X: ArrayLike, y: Any = None) -> "RandomFourierFeatures":
        """Sample the frequencies for inputs of ``X``'s dimension. Returns ``self``."""
        sigma = check_positive(self.sigma, "sigma")
        D = check_count(self.n_features, "n_features")
        X = check_array(X, "X")
        rng = check_random_state(self.random_state)
        d = X.shape[1]
        self.omega_ = rng.standard_normal((d, D)) / sigma
        self.offset_ = rng.uniform(0.0, 2.0 * np.pi, size=D)
        self.n_features_in_ = d
        self.n_features_out_ = D
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        r"""Map ``X`` (n, d) to features (n, n_features).

        Raises
        ------
        ValueError
            If a phase :math:`\omega^\top x + b` overflows float64 (inputs of
            size about 1e308 / max|omega|): its cosine would be NaN.
        """
        _check_fitted(self, "omega_")
        X = check_array(X, "X")
        _check_n_features(self, X)
        with np.errstate(over="ignore", invalid="ignore"):
            Z = X @ self.omega_
            Z += self.offset_
        if not np.isfinite(Z).all():
            raise ValueError(
                f"the random Fourier phases X @ omega_ + offset_ overflow float64 (max|X| = "
                f"{float(np.max(np.abs(X))):.3g}): their cosines are undefined; rescale X "
                "(and sigma with it)")
        np.cos(Z, out=Z)
        Z *= np.sqrt(2.0 / self.n_features_out_)
        return Z

    @property
    def kernel(self) -> Kernel:
        """The approximated kernel, :class:`~mvkm.kernels.RBF` ``(sigma)``."""
        return RBF(self.sigma)


class Nystrom(TransformerMixin, BaseEstimator):
    r"""Nystrom feature map built on random landmarks (Williams and Seeger, 2001).

    With landmarks :math:`L = \{l_1, \dots, l_m\}` drawn from the training set,
    :math:`K_{mm} = [k(l_a, l_b)]` and :math:`k_L(x) = [k(x, l_a)]_a`, the map
    :math:`z(x) = K_{mm}^{-1/2} k_L(x)` (pseudo-inverse square root) induces the
    kernel :math:`k_L(x)^\top K_{mm}^{+} k_L(y)`, which is exact on the
    landmarks and approximates :math:`k` elsewhere.

    Parameters
    ----------
    kernel : Kernel, default=RBF(1.0)
        The kernel to approximate (any callable ``k(X, Y) -> Gram``); also
        available, as for the other maps, as the ``kernel`` attribute.
    n_landmarks : int, default=100
        Number :math:`m` of landmarks (at most the number of training points).
    random_state : int, Generator or None
        Seed of the landmark choice.

    Attributes
    ----------
    landmarks_ : ndarray of shape (m, d)
    normalization_ : ndarray of shape (m, r)
        :math:`K_{mm}^{-1/2}` restricted to its numerical range (rank ``r``).
    n_features_in_ : int
    n_features_out_ : int
        The numerical rank ``r`` of :math:`K_{mm}`.
    """

    def __init__(self, kernel: Kernel = RBF(1.0), n_landmarks: int = 100,
                 random_state: Any = None) -> None:
        self.kernel = kernel
        self.n_landmarks = n_landmarks
        self.random_state = random_state

    def _kernel(self) -> Kernel:
        k = self.kernel
        if not callable(k):
            raise TypeError(f"kernel must be a callable k(X, Y), got {k!r}")
        return k

    @atomic_fit
    def fit(self, X: ArrayLike, y: Any = None) -> "Nystrom":
        """Choose landmarks among the rows of ``X`` and factor their Gram matrix.

        Raises
        ------
        ValueError
            If the landmark Gram matrix has no positive eigenvalue (0 features).
        """
        self._kernel()
        X = check_array(X, "X")
        return self._fit_landmarks(X[self._landmark_indices(X.shape[0])].copy())

    def _landmark_indices(self, n_samples: int) -> NDArray[np.int64]:
        """The sorted rows chosen as landmarks among ``n_samples`` (from ``random_state``)."""
        m = check_count(self.n_landmarks, "n_landmarks")
        if m > n_samples:
            raise ValueError(
                f"n_landmarks must be at most the number of samples (n_samples = {n_samples}), got {m}"
            )
        rng = check_random_state(self.random_state)
        return np.sort(rng.choice(n_samples, size=m, replace=False))

    def _fit_landmarks(self, landmarks: NDArray[np.float64]) -> "Nystrom":
        """Fit on the given landmark rows (what :meth:`fit` does after choosing them)."""
        kernel = self._kernel()
        landmarks = check_array(landmarks, "landmarks")
        m = landmarks.shape[0]
        self.landmarks_ = landmarks
        Kmm = check_finite_result(kernel(self.landmarks_), "the landmark Gram matrix "
                                  "kernel(landmarks)", "X")
        evals, evecs = np.linalg.eigh(0.5 * (Kmm + Kmm.T))
        top = float(evals.max())
        if not np.all(np.isfinite(evals)) or not top > 0.0:
            raise ValueError(
                f"the landmark Gram matrix kernel(landmarks) has no positive eigenvalue "
                f"(largest {top:.3g}): the Nystrom map would have 0 features; check the "
                "kernel and X (e.g. a linear kernel on all-zero rows, or values so small that "
                "their products underflow)"
            )
        keep = evals > top * m * np.finfo(float).eps
        self.normalization_ = evecs[:, keep] / np.sqrt(evals[keep])
        self.n_features_in_ = landmarks.shape[1]
        self.n_features_out_ = int(keep.sum())
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Map ``X`` (n, d) to features ``(n, n_features_out_)``."""
        _check_fitted(self, "landmarks_")
        X = check_array(X, "X")
        _check_n_features(self, X)
        return self._kernel()(X, self.landmarks_) @ self.normalization_


def poly2_features(X: ArrayLike, c: float = 1.0) -> NDArray[np.float64]:
    r"""The explicit feature map of the degree-2 polynomial kernel.

    :math:`\varphi(x) = (c,\ \sqrt{2c}\,x_1, \dots, \sqrt{2c}\,x_d,\ x_1^2, \dots, x_d^2,\
    \sqrt2\,x_jx_k\ (j < k))`, with :math:`1 + 2d + d(d-1)/2` coordinates, so that
    :math:`\varphi(x)^\top\varphi(y) = (x^\top y + c)^2`, the kernel
    :class:`mvkm.Polynomial` ``(degree=2, c=c)`` (Foundations, "Kernels and feature maps",
    where a reader derives it as an exercise).

    Parameters
    ----------
    X : array_like of shape (n, d)
        The inputs.
    c : float, default=1.0
        The kernel's offset, :math:`c \ge 0`.

    Returns
    -------
    ndarray of shape (n, 1 + 2d + d(d-1)/2)
        The features, one row per input.
    """
    X = check_array(X, "X")
    c = check_positive(c, "c", strict=False)
    n, d = X.shape
    j, k = np.triu_indices(d, k=1)
    return np.hstack([np.full((n, 1), c), np.sqrt(2 * c) * X, X**2,
                      np.sqrt(2) * X[:, j] * X[:, k]])
