r"""Probabilistic (kernel) PCA in a Hilbert space, primal and dual (De Plaen and Suykens, 2023).

The model (Tipping and Bishop, 1999, lifted to a feature space) is the factor
analysis :math:`\phi = W h + \mu + \zeta` (eq. 1) with a latent
:math:`h \sim \mathcal N(0, I_q)` and an isotropic noise
:math:`\zeta \sim \mathcal N(0, \sigma^2 I_{\mathcal H_E})` in the finite feature
space :math:`\mathcal H_E = \operatorname{span}\{\phi(x_i) - \bar\phi\}`.
Its marginal is :math:`\phi \sim \mathcal N(\mu, W W^\top + \sigma^2 I)` (eq. 3).

Conventions (shared by the chapters of Part II of the book)
---------------------------------------------------------------
* :math:`N` samples, feature matrix :math:`\Phi` (``N x d``) with rows
  :math:`\phi(x_i)^\top`, centred :math:`\Phi_c`, centred Gram matrix
  :math:`K_c = \Phi_c \Phi_c^\top = E \Lambda E^\top`.
* :math:`\lambda_1 \ge \lambda_2 \ge \dots` are the eigenvalues of :math:`K_c`
  (equivalently of :math:`\Phi_c^\top \Phi_c`, Lemma 1), *unnormalised* as in
  the source: the covariance :math:`\Phi_c^\top \Phi_c / N` has eigenvalues
  :math:`\lambda_p / N`. :math:`v_p = \lambda_p^{-1/2} \Phi_c^\top e_p`.
* :math:`r` is the numerical rank of :math:`K_c`, the dimension of
  :math:`\mathcal H_E` (at most :math:`N - 1` because of the centring, and at
  most :math:`d` for ``d``-dimensional features).
* Maximum likelihood (Props. 3 and 6, eqs. 4-6 and 13), rotation :math:`R = I`:

  .. math::
      \mu = \bar\phi, \quad
      W = V_q (\Lambda_q / N - \sigma^2 I)^{1/2}, \quad
      A = E_q (I / N - \sigma^2 \Lambda_q^{-1})^{1/2}, \quad W = \Phi_c^\top A,

      \sigma^2_{\mathrm{ML}} = \frac{1}{N (r - q)} \sum_{p = q + 1}^{r} \lambda_p .

  The source's eq. (6) divides by :math:`N (N - q)`: it counts :math:`N`
  dimensions for :math:`\mathcal H_E`, although a centred :math:`K_c` has rank
  at most :math:`N - 1`. We use the dimension :math:`r` of the space the noise
  lives in (for :math:`d < N` features this is the Tipping-Bishop estimator,
  whose denominator is :math:`N (d - q)`); the source's value is kept in
  ``sigma2_source_``. Both formulas agree that :math:`\sigma^2 < \lambda_q / N`
  (Prop. 3).

Dual kernel sampling
--------------------
For :math:`\phi \sim \mathcal N(\mu, W W^\top + \sigma^2 I_{\mathcal H_E})`, the
centred kernel vector :math:`k_c = \Phi_c (\phi - \mu)` has covariance

.. math::
    \Phi_c (W W^\top + \sigma^2 P_{\mathcal H_E}) \Phi_c^\top
    = K_c A A^\top K_c + \sigma^2 K_c
    = E \operatorname{diag}\Big(\underbrace{\lambda_p^2 / N}_{p \le q},\;
      \underbrace{\sigma^2 \lambda_p}_{q < p \le r}\Big) E^\top = B^2,

so :math:`k_c = B \xi`, :math:`\xi \sim \mathcal N(0, I_N)`, with
:math:`B = E \operatorname{diag}(\lambda_p / \sqrt N,\ \sigma \sqrt{\lambda_p}) E^\top`;
this is the :math:`B` of the source's section 4.4 and Table 4. The covariance
the source writes in eq. (18) and Prop. 9, :math:`A A^\top + \sigma^2 K_c^{-1}
= E \operatorname{diag}(1/N,\ \sigma^2/\lambda_p) E^\top`, is instead the
covariance of the dual coefficients :math:`a = K_c^{+} k_c` (with
:math:`\phi - \mu = \Phi_c^\top a`); Prop. 9's quadratic form (its eq. 57) is
the inverse of :math:`B^2`, so its density is right once :math:`\Sigma_k` is read
as :math:`B^2`.
"""

from __future__ import annotations

import copy
import warnings
from math import comb
from numbers import Integral, Real
from typing import Any, Callable

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from ._validation import (
    check_array,
    check_count,
    check_n_components,
    check_positive,
    check_random_state,
    check_symmetric,
    reset_fitted,
)
from ._validation import atomic_fit, check_bool, check_dask_chunks, check_map_output, own_copy
from ._parallel import check_n_jobs, limit_threads
from .covariance import (
    check_stream_params,
    feature_moments,
    fit_feature_map,
    is_dask_array,
    iter_row_chunks,
    map_rows,
    progress_bar,
)
from .features import Identity
from ._gram import (
    GramTriangle,
    dense_dual_bytes,
    features_triangle,
    gib,
    kernel_triangle,
    memory_verdict,
)
from .kernels import (Kernel, Linear, Polynomial, _center_test_rows,
                      _origin_kernel_values, _unshift_kernel_values, center_gram,
                      centring_equivalent, uncenter_kernel_values)
from .linalg import flip_signs, sign_convention, top_eigh
from .preimage import kernel_smoother, stable_kernel_smoother

__all__ = ["KernelPPCA", "PSD_RTOL", "RANK_RTOL", "DENSE_MAX_N"]

#: A centred kernel matrix whose most negative eigenvalue is below
#: ``-PSD_RTOL * largest`` is rejected as not positive semi-definite.
PSD_RTOL = 1e-8

#: Eigenvalues of K_c below ``RANK_RTOL * lambda_1`` (or below the round-off level
#: ``N * eps * max(lambda_1, max k(x, x))``) count as zero: they and their eigenvectors
#: are not determined by the data to better than ``eps * lambda_1 / lambda_p``, and
#: samples drawn along them changed with the BLAS thread count. 1e-12 keeps every
#: direction the book's chapters count (the smallest is 2.6e-12 lambda_1, the 40-point
#: half circle of the sampling chapter). A larger cut-off is stabler (README example,
#: relative change of samples between 1 and 2 threads: 2e-7 without a cut-off, 4e-8
#: at 1e-12, 9e-9 at 1e-11, 3e-10 at 1e-10) but drops directions those chapters keep.
RANK_RTOL = 1e-12

#: The dual computes every eigenpair of K_c (LAPACK, O(N^3), exact numerical rank)
#: up to this N; above it only the top q (:func:`mvkm.top_eigh`) and the trace.
DENSE_MAX_N = 2000

_FORMULATIONS = ("primal", "dual")
_OUTPUTS = ("input", "feature", "kernel")
_PREIMAGES = ("stable", "plain")

Array = NDArray[np.float64]


#: Relative gap below which sigma^2 counts as equal to lambda_q / N (no signal; see _check_signal).
TIE_RTOL = 1e-8


def _checked_features(fmap: Any, X: Any) -> Array:
    """``fmap.transform(X)`` as a finite float array, checked to hold one row per row of ``X``."""
    F = check_array(fmap.transform(X), "feature_map.transform(X)")
    return check_map_output(F, len(X), "feature_map.transform")


class KernelPPCA(TransformerMixin, BaseEstimator):
    r"""Probabilistic PCA in feature space (primal) or kernel space (dual).

    De Plaen and Suykens (2023) lift probabilistic PCA (Tipping and Bishop,
    1999) to the finite feature space :math:`\mathcal H_E` spanned by the
    centred training features and show that the maximum-likelihood solution
    has a dual representation :math:`W = \Phi_c^\top A`, so that the model can
    be trained, used for dimensionality reduction and *sampled* with a kernel
    matrix alone. As :math:`\sigma^2 \to 0` it becomes (kernel) PCA.

    Give ``n_components`` (then :math:`\sigma^2` follows from eq. 6) or
    ``sigma2`` (then ``n_components`` follows), not both; see
    :meth:`with_sigma2` to set both (the source's "no noise" limit).

    Parameters
    ----------
    n_components : int, optional
        Latent dimension :math:`q`, with ``1 <= q < r`` (``r`` the rank of the
        centred kernel matrix). :math:`\sigma^2` is then the maximum-likelihood
        value :math:`\sum_{p > q} \lambda_p / (N (r - q))` (eq. 6, with ``r`` in
        place of the source's ``N``; see the module notes).
    sigma2 : float, optional
        Noise variance :math:`\sigma^2 > 0`, which must satisfy
        :math:`\sigma^2 < \lambda_1 / N`. ``n_components`` is then the
        *smallest* :math:`q \ge 1` whose maximum-likelihood noise level
        :math:`\sigma^2_{\mathrm{ML}}(q)` is at most ``sigma2`` (capped at
        ``r - 1``), so that fitting with ``sigma2=m.sigma2_`` gives back the
        ``q`` of a model ``m`` fitted with ``n_components=q``. This rule inverts
        eq. 6; it is not the likelihood-optimal dimension for a fixed
        :math:`\sigma^2`, which is :math:`\#\{p : \lambda_p / N > \sigma^2\}`
        and never smaller (Part II, chapter 2, exercise on choosing q). It always
        satisfies :math:`\sigma^2 < \lambda_q / N` (Prop. 3). The model then
        uses the given :math:`\sigma^2`, not :math:`\sigma^2_{\mathrm{ML}}(q)`.
    kernel : callable, optional
        A kernel ``k(X, Y) -> Gram`` such as :class:`mvkm.RBF` ``(sigma)``
        (dual formulation). ``None`` means the linear kernel in the dual and
        the identity feature map in the primal. In the primal only the
        linear kernel is accepted (it is the identity map).
    feature_map : transformer, optional
        An explicit feature map with ``fit``/``transform``
        (:class:`mvkm.Identity`, :class:`mvkm.RandomFourierFeatures`,
        :class:`mvkm.Nystrom`). A fitted map is used as given; an unfitted one
        is cloned and fitted on ``X``. Give at most one of ``kernel`` and
        ``feature_map``.
    formulation : {"dual", "primal"}, default="dual"
        Solve with the ``N x N`` kernel matrix (Props. 5-9) or with the
        ``N x d`` feature matrix (Props. 1-4; needs a finite feature map).
    n_jobs : int, optional
        Threads for the passes over the ``N x N`` kernel matrix during ``fit``
        (``-1``: every usable core). ``None``: the user's BLAS/OpenMP limit
        (``threadpoolctl`` or ``OMP_NUM_THREADS``), at most 8 (docs/package.md, "Threads").
    batch_size : int, optional
        Primal only: stream ``X`` ``batch_size`` rows at a time
        (:func:`mvkm.covariance.feature_moments`): the model needs only the
        mean and the scatter :math:`\Phi_c^\top\Phi_c` of the features (its
        eigenvalues are those of :math:`K_c`), so ``fit`` never holds the
        ``N x d`` feature matrix (peak memory :math:`O(d^2 + \text{batch\_size}\cdot d)`)
        and ``Phi_fit_`` is not kept: what needs the training features (pre-images,
        ``output="kernel"``, ``eigenvectors_``) recomputes them chunk by chunk. The
        eigenvector signs follow :func:`mvkm.flip_signs` on :math:`e_p` for the
        ``q`` latent directions (found in a second pass) and on :math:`v_p` for
        the other ``rank_ - q``. ``X`` given as a ``dask.array.Array`` is always
        streamed on the active Dask scheduler; ``transform`` then returns a dask array.
    device : str or torch.device, optional
        Primal, streamed: compute the features and their scatter with torch on
        this device (``"cpu"``, ``"cuda"``). ``None``: numpy.
    dtype : {"float64", "float32"}, default="float64"
        Primal, streamed: precision of the features and of each chunk's product
        (merged in float64; see :mod:`mvkm.covariance` for the accuracy).
    progress : bool or None, default=None
        A tqdm bar over the streamed passes: ``None`` shows it once a pass has
        lasted 5 seconds, ``True`` at once, ``False`` never.
    kernel_storage : {"auto", "dense", "none"}, default="auto"
        Dual with a ``kernel`` and ``N > DENSE_MAX_N``: ``"none"`` never stores
        the ``N x N`` kernel matrix; its top ``q`` eigenpairs come from
        :func:`mvkm.matfree.matfree_top_eigh` (tiles recomputed per product,
        memory :math:`O(N(d + q))`, on ``device`` if given), the trace and the
        row means from one pass. ``"dense"`` builds the upper triangle of the
        matrix once and centres it inside the eigensolver's products, as
        :func:`mvkm.linalg.kernel_top_eigh` does. ``"auto"``: ``"none"`` when
        the matrix would exceed 4 GiB (``N`` above about 23,000), when a
        ``device`` is given, or when the triangle's estimated memory exceeds
        90 % of the available memory; ``"dense"`` then raises a ``MemoryError``
        giving the estimate.
        ``K_fit_``, ``eigenvalues_``, ``B_`` and :meth:`sample` still form it on use.
    copy_X : bool, default=True
        Keep a copy of the training data, so that changing the caller's
        array after ``fit`` cannot change the model. ``False`` keeps a
        reference (saves the memory of one copy; the caller must then leave
        the array unchanged). Memory-mapped and dask arrays are never copied.

    Attributes
    ----------
    n_components_ : int
        The latent dimension :math:`q`.
    sigma2_ : float
        The noise variance :math:`\sigma^2` of the model.
    sigma2_ml_ : float
        The maximum-likelihood :math:`\sigma^2` for this :math:`q`,
        :math:`\sum_{p>q}\lambda_p / (N (r - q))` (equal to ``sigma2_`` when
        ``n_components`` was given).
    sigma2_source_ : float
        The source's eq. (6) for this :math:`q`,
        :math:`\sum_{p>q}\lambda_p / (N (N - q)) = \sigma^2_{\mathrm{ML}} (r - q) / (N - q)`.
    rank_ : int
        :math:`r`, the rank of :math:`K_c` (dimension of :math:`\mathcal H_E`). In the
        primal, and in the dual for ``n_samples <= DENSE_MAX_N`` (2000), the
        numerical rank: the number of eigenvalues above
        ``max(N eps max(lambda_1, max k(x, x)), RANK_RTOL lambda_1)`` (``RANK_RTOL
        = 1e-12``). In the dual for larger ``N`` (where only the top ``q``
        eigenpairs are computed) the generic rank: the number of distinct
        training points minus one, capped by the dimension of a finite feature
        space (explicit map, linear or polynomial kernel). For a smooth kernel on
        low-dimensional data the two differ (the generic rank counts directions
        whose eigenvalues are lost to round-off), and so does ``sigma2_``.
    eigenvalues_ : ndarray of shape (rank_,)
        :math:`\lambda_1 \ge \dots \ge \lambda_r > 0`, the non-zero eigenvalues
        of :math:`K_c` (and of :math:`\Phi_c^\top \Phi_c`), unnormalised. For
        ``N > DENSE_MAX_N`` (dual) the fit computes only the top ``n_components_``
        (and the trace), and this attribute holds those: reading it never starts
        an :math:`O(N^3)` computation. ``B_`` and :meth:`sample` need every
        eigenpair: they compute them once (with a warning, after a memory check
        that raises ``MemoryError`` when they do not fit), and from then on this
        attribute holds all of them, above the cut-off.
    eigenvectors_ : ndarray of shape (n_samples, rank_)
        :math:`E_r`, the matching eigenvectors of :math:`K_c`; the sign of each
        makes its largest-magnitude entry positive (:func:`mvkm.flip_signs`), in
        both formulations, so primal and dual latents agree. The top
        ``n_components_`` only, like ``eigenvalues_``, for ``N > DENSE_MAX_N``.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        :math:`\lambda_p / \sum_{l} \lambda_l`, :math:`p \le q`. Its sum is the
        "explained variance" the source reports.
    A_ : ndarray of shape (n_samples, n_components_)
        Dual interconnection matrix :math:`A = E_q (I/N - \sigma^2\Lambda_q^{-1})^{1/2}`
        (eq. 13 / Prop. 6), dual formulation only.
    W_ : ndarray of shape (n_features_out, n_components_)
        Primal interconnection matrix :math:`W = V_q (\Lambda_q/N - \sigma^2 I)^{1/2}`
        (eq. 5 / Prop. 3), primal formulation only.
    mean_ : ndarray of shape (n_features_out,)
        :math:`\mu = \bar\phi` (eq. 4), primal formulation only.
    components_ : ndarray of shape (rank_, n_features_out)
        :math:`V_r^\top`, the principal directions in feature space, primal only.
    B_ : ndarray of shape (n_samples, n_samples)
        The symmetric square root of the covariance of :math:`k_c` (module
        notes), built on each access (never stored: :meth:`sample` applies it
        in the eigenbasis). It needs every eigenpair (see ``eigenvalues_``).
    X_fit_ : ndarray of shape (n_samples, n_features_in_)
        The training inputs (needed for test kernels and pre-images).
    K_fit_ : ndarray of shape (n_samples, n_samples)
        The uncentred training Gram matrix (dual only): kept for
        ``N <= DENSE_MAX_N``, recomputed on access above (fit then holds a
        single ``N x N`` matrix, centred in place, and keeps only its means).
    feature_map_ : transformer or None
        The fitted feature map (primal, or dual with ``feature_map``).
    n_features_in_ : int

    See Also
    --------
    sklearn.decomposition.PCA : the primal model with the identity map
        (normalised by ``N - 1`` and ``d - q``: ``noise_variance_`` is
        ``sigma2_ * N / (N - 1)`` when ``r = d < N``; with ``r < d``, e.g. a
        constant feature, multiply also by ``(r - q) / (d - q)``).
    sklearn.decomposition.KernelPCA : the :math:`\sigma^2 \to 0` limit of the dual.

    References
    ----------
    H. De Plaen and J. A. K. Suykens, "Probabilistic PCA in Hilbert spaces" (2023).
    M. E. Tipping and C. M. Bishop, "Probabilistic principal component analysis",
    JRSS B 61(3), 1999.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm import RBF
    >>> from mvkm.ppca import KernelPPCA
    >>> X = np.random.default_rng(0).normal(size=(20, 2))
    >>> model = KernelPPCA(n_components=3, kernel=RBF(2.0)).fit(X)
    >>> model.transform(X).shape, model.sample(5, random_state=0).shape
    ((20, 3), (5, 2))
    """

    def __init__(self, n_components: int | None = None, sigma2: float | None = None,
                 kernel: Callable[..., Any] | None = None, feature_map: Any = None,
                 formulation: str = "dual", n_jobs: int | None = None, *,
                 batch_size: int | None = None, device: Any = None, dtype: str = "float64",
                 progress: bool | None = None, kernel_storage: str = "auto",
                 copy_X: bool = True) -> None:
        self.n_components = n_components
        self.sigma2 = sigma2
        self.kernel = kernel
        self.feature_map = feature_map
        self.formulation = formulation
        self.n_jobs = n_jobs
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.progress = progress
        self.kernel_storage = kernel_storage
        self.copy_X = copy_X

    # ------------------------------------------------------------------ fit
    def _check_params(self) -> None:
        check_bool(self.progress, "progress", allow_none=True)
        check_bool(self.copy_X, "copy_X")
        if self.formulation not in _FORMULATIONS:
            raise ValueError(f"formulation must be 'primal' or 'dual', got {self.formulation!r}")
        if self.n_components is not None and self.sigma2 is not None:
            raise ValueError(
                "give n_components or sigma2, not both: each determines the other "
                f"(eq. 6); got n_components={self.n_components!r} and sigma2={self.sigma2!r}. "
                "To fix both, fit with n_components and call with_sigma2(sigma2)"
            )
        if self.n_components is None and self.sigma2 is None:
            raise ValueError("give n_components (then sigma2 follows from eq. 6) or sigma2")
        if self.sigma2 is not None:
            check_positive(self.sigma2, "sigma2")
        if self.n_components is not None:
            if isinstance(self.n_components, bool) or not isinstance(self.n_components, Integral):
                raise TypeError(f"n_components must be an integer, got {self.n_components!r}")
            if self.n_components < 1:
                raise ValueError(f"n_components must be >= 1, got {self.n_components}")
        if self.kernel is not None and self.feature_map is not None:
            raise ValueError("give at most one of kernel and feature_map, got both "
                             f"(kernel={self.kernel!r}, feature_map={self.feature_map!r})")
        if self.kernel is not None and not callable(self.kernel):
            raise TypeError(f"kernel must be a callable k(X, Y) -> Gram matrix, got {self.kernel!r}")
        if self.feature_map is not None and not (hasattr(self.feature_map, "fit")
                                                 and hasattr(self.feature_map, "transform")):
            raise TypeError(f"feature_map must have fit and transform, got {self.feature_map!r}")
        check_stream_params(self.formulation, self.batch_size, self.device, self.dtype,
                            dual_device=True)
        if self.kernel_storage not in ("auto", "dense", "none"):
            raise ValueError(f"kernel_storage must be 'auto', 'dense' or 'none', got {self.kernel_storage!r}")
        if (self.formulation == "primal" and self.kernel is not None
                and not isinstance(self.kernel, Linear)):
            raise ValueError(
                f"formulation='primal' needs an explicit feature map, but kernel={self.kernel!r} "
                "is given implicitly; pass feature_map (Identity, RandomFourierFeatures, "
                "Nystrom) or use formulation='dual'"
            )

    def _fit_feature_map(self, X: Array) -> None:
        fm = self.feature_map
        if fm is None and self.formulation == "primal":
            fm = Identity()
        if fm is None:
            self.feature_map_ = None
            return
        fitted = hasattr(fm, "n_features_in_")
        self.feature_map_ = fm if fitted else fit_feature_map(clone(fm), X)

    @atomic_fit
    def fit(self, X: ArrayLike, y: Any = None) -> "KernelPPCA":
        r"""Fit the maximum-likelihood model (Prop. 3 in the primal, Prop. 6 in the dual).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : KernelPPCA

        Raises
        ------
        ValueError
            On NaN or infinite inputs, inconsistent parameters, a kernel matrix
            that is not positive semi-definite beyond round-off, ``n_components``
            not below the rank of :math:`K_c`, or ``sigma2 >= lambda_1 / N``.
            (For ``N > DENSE_MAX_N`` in the dual only the computed top eigenvalues
            are checked for positivity: the bottom of the spectrum is never formed.)

        Notes
        -----
        Cost of the dual: for ``N <= DENSE_MAX_N`` one LAPACK eigendecomposition
        of :math:`K_c` (:math:`O(N^3)`, every eigenpair, the exact numerical rank);
        above, the kernel matrix is centred in place and only its top ``q``
        eigenpairs are computed (:func:`mvkm.top_eigh`, ARPACK), with
        :math:`\sum_{p>q}\lambda_p = \operatorname{tr}K_c - \sum_{p\le q}\lambda_p`
        for eq. 6: one :math:`N \times N` matrix in memory and
        :math:`O(N^2 q)` work per Lanczos sweep. ``sample``, ``B_`` and
        ``eigenvalues_`` then compute the full spectrum once, on first use.
        """
        self._check_params()
        reset_fitted(self)
        with limit_threads(check_n_jobs(self.n_jobs)):
            return self._fit(X)

    def _streamed(self, X: Any) -> bool:
        if self.formulation == "dual" and not is_dask_array(X):
            return False
        return (self.batch_size is not None or self.device is not None or self.dtype != "float64"
                or is_dask_array(X))

    def _matrix_free(self, N: int) -> bool:
        """Whether the dual leaves K unstored: a kernel (not a feature map), N > DENSE_MAX_N.

        ``"auto"`` also when the dense route's estimated memory (one triangle,
        :func:`mvkm._gram.dense_dual_bytes`) exceeds 90 % of the available
        memory; ``"dense"`` then raises a ``MemoryError`` with the estimate.
        """
        if self.feature_map_ is not None or N <= DENSE_MAX_N:
            return False
        kernel = Linear() if self.kernel is None else self.kernel
        wanted = self.kernel_storage == "none" or (self.kernel_storage == "auto" and (
            self.device is not None or 8.0 * N * N > 4 * 2**30))
        short = None
        if not wanted:
            need = dense_dual_bytes(N, [kernel])
            fits, avail = memory_verdict(need)
            if fits:
                return False
            short = MemoryError(
                f"the dense dual needs about {gib(need)} for its kernel matrix (N = {N}) "
                f"but {gib(avail)} of memory is available: use kernel_storage='none' (the "
                "matrix-free route, for an mvkm kernel) or formulation='primal' with an "
                "explicit feature_map")
            if self.kernel_storage == "dense":
                raise short
        from .matfree import _check_kernel

        try:
            _check_kernel(kernel)
        except TypeError:
            if self.kernel_storage == "none":
                raise
            if short is not None:
                raise short from None
            return False
        return True

    def _fit(self, X: ArrayLike) -> "KernelPPCA":
        given = X
        streamed = self._streamed(X)
        if is_dask_array(X):
            check_dask_chunks(X, "X")
            if self.formulation != "primal":
                raise ValueError("X given as a dask array needs formulation='primal' (a streamed "
                                 "scatter of explicit features)")
            if X.ndim != 2:
                raise ValueError(f"X must be a 2-D array, got a dask array of shape {X.shape}")
        else:
            X = check_array(X, "X")
        N = int(X.shape[0])
        if N < 2:
            raise ValueError(f"X must have at least 2 samples (rows) for KernelPPCA, got n_samples = {N}")
        self._fit_feature_map(X)
        self.X_fit_ = own_copy(X, given, self.copy_X)
        self._kernel_fit = None
        self._origin_values: tuple[Array, float] | None = None
        if self.feature_map_ is None and isinstance(X, np.ndarray) and not streamed:
            # every value the fit reads is centred; the kernel-smoother pre-image's uncentred
            # values are recovered from the origin's kernel values (_from_coefficients)
            self._kernel_fit = centring_equivalent(self._k(), X)
        self.n_features_in_ = X.shape[1]
        self.n_samples_ = N
        self._spectrum_cache: tuple[Array, Array] | None = None
        self._K_cache: Array | None = None
        if streamed:
            self._fit_primal_streamed(X)
        elif self.formulation == "primal":
            assert self.feature_map_ is not None
            Phi = _checked_features(self.feature_map_, X)
            self.mean_ = Phi.mean(axis=0)
            Phi_c = Phi - self.mean_
            U, s, Vt = scipy.linalg.svd(Phi_c, full_matrices=False)
            lam = s**2
            scale = max(float(lam[0]), float(np.einsum("ij,ij->i", Phi, Phi).max()))
            r = int(np.sum(lam > max(max(N, Phi.shape[1]) * np.finfo(float).eps * scale,
                                     RANK_RTOL * float(lam[0]))))
            # sign convention on e_p = Phi_c v_p / sqrt(lambda_p), as in the dual
            signs = sign_convention(U[:, :r])
            E = U[:, :r] * signs                        # N x r, r <= d: O(N d) memory
            self.components_ = Vt[:r] * signs[:, None]
            self.Phi_fit_ = Phi
            self._diag_scale = float(np.mean(np.einsum("ij,ij->i", Phi, Phi)))
            self._row_means = Phi @ self.mean_          # m_i = phi_i^T mu = mean_j k(x_i, x_j)
            self._train_means = self._row_means
            self._spectrum_cache = (np.asarray(lam[:r], dtype=np.float64).copy(),
                                    np.ascontiguousarray(E))
            self.rank_ = r
            self._trace = float(lam[:r].sum())
            self._fit_top(None)
        elif self._matrix_free(N):
            from .matfree import _SUPPORTED, KernelOperator

            if type(self._k()) not in _SUPPORTED:
                self._kernel_fit = None             # a kernel whose tiles the operator lacks
            op = KernelOperator(X, self._k(), center=True,
                                device=self.device, progress=bool(self.progress))
            self._diag_scale = float(np.mean(op.diag()))
            self._row_means = op.row_means_
            self._train_means = op.row_means_
            self.rank_ = self._generic_rank(X)
            self._trace = float(op.trace())
            self._fit_top(op)
        elif N <= DENSE_MAX_N:
            K = check_symmetric(self._gram(X, None), "K")
            self._diag_scale = float(np.mean(np.diagonal(K)))
            self._row_means = K.mean(axis=1)
            self._train_means = K.mean(axis=0)
            scale_diag = float(np.abs(np.diagonal(K)).max())
            self._K_cache = K
            self._fit_dense_spectrum(center_gram(K), scale_diag)
            self._fit_top(None)
        else:
            T = self._gram_triangle(X)              # one triangle, centred implicitly
            self._diag_scale = float(np.mean(T.diagonal()))
            self._row_means = T.row_means
            self._train_means = T.row_means
            self.rank_ = self._generic_rank(X)
            self._trace = T.trace()
            self._fit_top(T)
        if self._kernel_fit is not None:
            # the fit's kernel may be that of the features moved by phi(m); the pre-images'
            # smoother reads the given kernel's uncentred values: k(x_i, m) and k(m, m)
            self._origin_values = _origin_kernel_values(self._kernel_given(),
                                                        self._kernel_fit, X)
            if self._origin_values is not None:
                self._diag_scale = float(np.mean(self._kernel_given().diag(X)))
        q, N, r = self.n_components_, self.n_samples_, self.rank_
        lam_q = self._lam_q
        tail = self._tail
        self.sigma2_ml_ = tail / (N * (r - q))
        self.sigma2_source_ = tail / (N * (N - q))
        self.explained_variance_ratio_ = lam_q / self._trace
        self._set_noise(self._sigma2_init)
        return self

    def _fit_primal_streamed(self, X: Any) -> None:
        r"""Prop. 3 from the streamed mean and scatter :math:`S = \Phi_c^\top\Phi_c`.

        The non-zero eigenvalues of :math:`S` are those of :math:`K_c`; the rank
        cut-off is the in-memory one (scale :math:`\max(\lambda_1, \max_i\|\phi_i\|^2)`).
        A second pass gives the row means :math:`m_i = \phi_i^\top\mu`, the latent
        eigenvectors :math:`e_p = \Phi_c v_p / \sqrt{\lambda_p}` (``p <= q``) and
        their signs.
        """
        fm = self.feature_map_
        mom = feature_moments([X], [fm], batch_size=self.batch_size, device=self.device,
                              dtype=self.dtype, progress=self.progress)
        N, D = mom.n_samples, mom.dims[0]
        evals, evecs = scipy.linalg.eigh(mom.scatter)
        lam_all, V = evals[::-1], evecs[:, ::-1]
        scale = max(float(lam_all[0]), mom.max_sq_norm)
        r = int(np.sum(lam_all > max(max(N, D) * np.finfo(float).eps * scale,
                                     RANK_RTOL * float(lam_all[0]))))
        self.mean_ = mom.mean
        self.rank_ = r
        lam = np.ascontiguousarray(lam_all[:r])
        V = V[:, :r] * sign_convention(V[:, :r])
        self._trace = float(lam.sum())
        self._diag_scale = float(np.trace(mom.scatter)) / N + float(mom.mean @ mom.mean)
        if r < 2:
            self._spectrum_cache = (lam, np.zeros((N, r)))
            self._fit_top(None)                          # raises: the model needs rank >= 2
        q, sigma2 = self._choose_q_sigma2(lam, float(lam.sum()))
        # second pass: m_i = phi_i^T mu and E_q = Phi_c V_q Lambda_q^{-1/2}, with its signs
        Vq = V[:, :q] / np.sqrt(lam[:q])
        fmap, mean = self.feature_map_, self.mean_

        def row_stats(Xc: Any) -> Array:
            F = _checked_features(fmap, np.asarray(Xc))
            return np.column_stack([F @ mean, (F - mean) @ Vq])

        out = map_rows(row_stats, [X], batch_size=self.batch_size, n_out=q + 1,
                       progress=self.progress, desc="latent eigenvectors")
        out = np.asarray(out.compute() if is_dask_array(out) else out)
        E_q = out[:, 1:]
        signs = sign_convention(E_q)
        V[:, :q] *= signs
        self.components_ = np.ascontiguousarray(V.T)
        self._row_means = np.ascontiguousarray(out[:, 0])
        self._train_means = self._row_means
        self._spectrum_cache = None                      # E_r computed on first use (N x r)
        self._streamed_spectrum = lam
        self._lam_q, self._E_q = lam[:q].copy(), np.ascontiguousarray(E_q * signs)
        self._tail = float(lam[q:].sum())
        self.n_components_ = q
        self._sigma2_init = sigma2

    def _training_features(self) -> Any:
        """Row chunks of the training features (primal), from Phi_fit_ or recomputed."""
        if hasattr(self, "Phi_fit_"):
            yield slice(0, self.n_samples_), self.Phi_fit_
            return
        step = self.batch_size or max(1, (32 << 20) // (8 * max(1, self.components_.shape[1])))
        bar = progress_bar(self.n_samples_, "training features", self.progress)
        for sl in iter_row_chunks(self.n_samples_, step):
            yield sl, check_array(self.feature_map_.transform(np.asarray(self.X_fit_[sl])),
                                  "feature_map.transform(X)")
            if bar is not None:
                bar.update(sl.stop - sl.start)
        if bar is not None:
            bar.close()

    def _training_feature_products(self, A: Array, *, centred: bool = False) -> Array:
        """``A @ Phi^T`` (or ``A @ Phi_c^T``) with the training features, m x N."""
        out = np.empty((A.shape[0], self.n_samples_))
        for sl, F in self._training_features():
            out[:, sl] = A @ (F - self.mean_ if centred else F).T
        return out

    # ------------------------------------------------------- the spectrum
    def _fit_dense_spectrum(self, K_c: Array, scale_diag: float) -> None:
        """All eigenpairs of K_c (LAPACK), the PSD check and the numerical rank (N <= DENSE_MAX_N)."""
        N = K_c.shape[0]
        evals, evecs = scipy.linalg.eigh(K_c)
        evals, evecs = evals[::-1], evecs[:, ::-1]
        top = max(float(evals[0]), 0.0)
        tol_rank = N * np.finfo(float).eps * max(top, scale_diag)
        if evals[-1] < -max(PSD_RTOL * top, tol_rank):
            raise ValueError(
                "the centred kernel matrix is not positive semi-definite: its most negative "
                f"eigenvalue {evals[-1]:.3g} is beyond round-off (below -{PSD_RTOL:g} * the "
                f"largest = {-PSD_RTOL * top:.3g}); use a positive semi-definite kernel"
            )
        r = int(np.sum(evals > max(tol_rank, RANK_RTOL * top)))
        E = flip_signs(evecs[:, :r]) if r else evecs[:, :0]
        self._spectrum_cache = (np.asarray(evals[:r], dtype=np.float64).copy(), np.ascontiguousarray(E))
        self.rank_ = r
        self._trace = float(self._spectrum_cache[0].sum())

    def _generic_rank(self, X: Array) -> int:
        r"""The rank of :math:`K_c` without its spectrum (N > DENSE_MAX_N).

        ``#distinct rows - 1`` (centring removes one dimension; repeated points
        add none), capped by the dimension of the feature space when it is finite
        and known: the numerical rank of the centred explicit features (feature
        map or linear kernel, by an SVD of the ``N x d`` features when ``d < N``),
        or :math:`\binom{d + p}{p}` (:math:`\binom{d + p - 1}{p}` for
        :math:`c = 0`) for a polynomial kernel of degree :math:`p`.
        """
        N, d = X.shape
        r = len(np.unique(X, axis=0)) - 1
        F = None
        if self.feature_map_ is not None:
            F = _checked_features(self.feature_map_, X)
        elif self.kernel is None or isinstance(self.kernel, Linear):
            # moved to the data's middle where the fit's kernel is (centring_equivalent):
            # the round-off of the uncentred norms would hide a far-away data's rank
            F = X - getattr(self._k(), "origin", 0.0)
        elif isinstance(self.kernel, Polynomial):
            p = self.kernel.degree
            r = min(r, comb(d + p, p) if self.kernel.c > 0 else comb(d + p - 1, p))
        if F is not None:
            if F.shape[1] < N:
                s = scipy.linalg.svdvals(F - F.mean(axis=0))
                scale = max(float(s[0]) ** 2, float(np.einsum("ij,ij->i", F, F).max()))
                r = min(r, int(np.sum(s**2 > max(N, F.shape[1]) * np.finfo(float).eps * scale)))
            else:
                r = min(r, F.shape[1])
        return int(r)

    def _fit_top(self, K_c: Array | None) -> None:
        r"""Choose q and sigma^2 and keep the top-q eigenpairs of K_c.

        With the full spectrum (``K_c is None``) they are read from it; otherwise
        :func:`mvkm.top_eigh` computes the top ``q`` only, and the discarded
        variance comes from the trace,
        :math:`\sum_{p > q} \lambda_p = \operatorname{tr} K_c - \sum_{p \le q} \lambda_p`
        (the eigenvalues of :math:`K_c` sum to its trace, and those beyond the rank
        vanish): eq. 6 needs nothing else.
        """
        N, r = self.n_samples_, self.rank_
        if r < 2:
            raise ValueError(
                f"the centred kernel matrix has rank {r}: the model needs rank >= 2 "
                "(one latent direction and at least one noise direction); X has "
                f"n_samples = {N} and n_features = {self.n_features_in_}"
            )
        if K_c is None:
            lam, E = self._spectrum_cache  # type: ignore[misc]
            q, sigma2 = self._choose_q_sigma2(lam, float(lam.sum()))
            self._lam_q, self._E_q = lam[:q].copy(), np.ascontiguousarray(E[:, :q])
            self._tail = float(lam[q:].sum())
        else:
            if self.n_components is not None:
                k = check_n_components(self.n_components, r - 1, what=self._q_what())
            else:
                k = min(16, r - 1)
            while True:
                if isinstance(K_c, GramTriangle):
                    lam, E = K_c.top_eigh(k)
                elif isinstance(K_c, np.ndarray):
                    lam, E = top_eigh(K_c, k, check_symmetric=False)
                else:                                   # a KernelOperator: K_c never stored
                    from .matfree import matfree_top_eigh

                    lam, E = matfree_top_eigh(K_c.X, K_c.kernel, k, device=K_c.device,
                                              progress=bool(self.progress))
                if lam[0] <= 0 or (lam[-1] < -PSD_RTOL * lam[0]):
                    raise ValueError("the centred kernel matrix is not positive semi-definite "
                                     f"(top eigenvalues {lam[:3]}); use a positive semi-definite kernel")
                q, sigma2 = self._choose_q_sigma2(lam, self._trace, partial=k < r - 1)
                if q > 0:
                    break
                k = min(2 * k, r - 1)                   # sigma2 given, q not reached yet
            self._lam_q, self._E_q = lam[:q].copy(), np.ascontiguousarray(E[:, :q])
            self._tail = max(self._trace - float(lam[:q].sum()), 0.0)
        self._check_signal(q, sigma2)
        self.n_components_ = q
        self._sigma2_init = sigma2

    def _check_signal(self, q: int, sigma2: float) -> None:
        r"""Refuse :math:`\sigma^2 \ge \lambda_q / N` (to a relative ``TIE_RTOL``): a model with no signal.

        Prop. 3 needs :math:`\sigma^2 < \lambda_q / N`; at equality, which the
        maximum-likelihood :math:`\sigma^2` (eq. 6) reaches when the eigenvalues
        from :math:`\lambda_q` on all tie, :math:`A = 0` and ``transform`` returns
        round-off. A kernel far narrower than the spacing of the data (so that
        :math:`K \approx I`) is the usual cause.
        """
        bound = float(self._lam_q[q - 1]) / self.n_samples_
        if sigma2 < bound * (1.0 - TIE_RTOL):
            return
        raise ValueError(
            f"sigma2={sigma2:.6g} reaches the bound lambda_q / N = {bound:.6g} of Prop. 3 "
            f"(q = {q}; the eigenvalues of the centred kernel matrix tie from lambda_q on, to a "
            f"relative {TIE_RTOL:g}): the model would have no signal (A = 0). The likely cause "
            f"is the kernel's bandwidth, far below the spacing of the data ("
            f"{self.kernel if self.feature_map is None else self.feature_map!r} makes K close "
            "to the identity): "
            "widen it, e.g. to the median pairwise distance of X")

    def _q_what(self) -> str:
        return (f"below the rank r = {self.rank_} of the centred kernel matrix, "
                "the dimension of H_E; eq. 6 needs a discarded direction")

    def _choose_q_sigma2(self, lam: Array, trace: float, *, partial: bool = False) -> tuple[int, float]:
        """q and sigma^2 from the leading eigenvalues ``lam`` and the trace of K_c.

        ``partial``: ``lam`` holds only the leading eigenvalues; returns q = 0 when
        more are needed to find the q of a given ``sigma2``.
        """
        N, r = self.n_samples_, self.rank_
        # sigma2_ML(q) = sum_{p > q} lambda_p / (N (r - q)) (eq. 6) for q = 1 .. len(ml), by one
        # formula in both directions: a model refitted with sigma2=m.sigma2_ compares the very
        # numbers that gave m.sigma2_, so the round trip to m's q does not hang on a last bit
        if lam.size >= r and not partial:
            tails = np.cumsum(lam[:0:-1])[::-1][: r - 1]       # tails[q - 1] = sum_{p > q} lambda_p
        else:
            tails = np.maximum(trace - np.cumsum(lam), 0.0)[: r - 1]
        ml = tails / (N * (r - np.arange(1, tails.size + 1)))
        if self.n_components is not None:
            q = check_n_components(self.n_components, r - 1, what=self._q_what())
            return q, float(ml[q - 1])
        sigma2 = float(self.sigma2)  # type: ignore[arg-type]
        if sigma2 >= lam[0] / N:
            raise ValueError(
                f"sigma2={sigma2:.6g} violates sigma^2 < lambda_q / N (Prop. 3) even for q = 1: "
                f"the bound is lambda_1 / N = {lam[0] / N:.6g}"
            )
        ok = np.flatnonzero(ml <= sigma2)
        if ok.size:
            return int(ok[0]) + 1, sigma2
        if partial:
            return 0, sigma2
        return r - 1, sigma2

    def _spectrum(self) -> tuple[Array, Array]:
        """All ``rank_`` eigenpairs of K_c: kept from fit, or computed once on first use (O(N^3))."""
        check_is_fitted(self, "sigma2_")
        if self._spectrum_cache is None and self.formulation == "primal":
            lam = self._streamed_spectrum                # streamed fit: E_r = Phi_c V_r Lambda^{-1/2}
            Vs = self.components_.T / np.sqrt(lam)
            E = np.empty((self.n_samples_, lam.size))
            for sl, F in self._training_features():
                E[sl] = (F - self.mean_) @ Vs
            self._spectrum_cache = (lam, E)
        if self._spectrum_cache is None:
            n = self.n_samples_
            # the uncentred matrix, LAPACK's copy of it and the eigenvectors, plus workspace
            need = 3.0 * 8.0 * n * n + 8.0 * 32 * n
            fits, avail = memory_verdict(need)
            if not fits:
                raise MemoryError(
                    f"this needs every eigenpair of the {n} x {n} centred kernel matrix, an "
                    f"O(N^3) eigendecomposition that needs about {gib(need)} ({gib(avail)} "
                    "available); the fit computed only the top n_components_ (eigenvalues_, "
                    "eigenvectors_): fit on fewer samples to sample or read B_")
            warnings.warn(
                f"computing every eigenpair of the {n} x {n} centred kernel matrix (O(N^3), "
                f"about {gib(need)}; the fit kept only the top n_components_): done once, "
                "then kept", UserWarning, stacklevel=3)
            K_c = center_gram(self.K_fit_, copy=False)
            evals, evecs = scipy.linalg.eigh(K_c)
            evals, evecs = evals[::-1], evecs[:, ::-1]
            # at most rank_ pairs, and only those above the cut-off (the generic rank_ of
            # a large N may count directions whose eigenvalues are lost to round-off)
            r = min(self.rank_, int(np.sum(evals > RANK_RTOL * max(float(evals[0]), 0.0))))
            evals, evecs = evals[:r], flip_signs(evecs[:, :r])
            self._spectrum_cache = (np.ascontiguousarray(evals), np.ascontiguousarray(evecs))
        return self._spectrum_cache

    def _top_only(self) -> bool:
        """Whether the fit kept only the top n_components_ eigenpairs (a dual with N >
        DENSE_MAX_N whose whole spectrum has not been computed since)."""
        check_is_fitted(self, "sigma2_")
        return self._spectrum_cache is None and self.formulation == "dual"

    @property
    def eigenvalues_(self) -> Array:
        r""":math:`\lambda_1 \ge \dots \ge \lambda_r`, shape ``(rank_,)``, or the top
        ``n_components_`` after a dual fit on ``N > DENSE_MAX_N`` (see the class notes)."""
        if self._top_only():
            return self._lam_q.copy()
        return self._spectrum()[0]

    @property
    def eigenvectors_(self) -> Array:
        """:math:`E_r`, shape ``(n_samples, rank_)``, or the top ``n_components_`` columns after
        a dual fit on ``N > DENSE_MAX_N`` (see the class notes)."""
        if self._top_only():
            return self._E_q.copy()
        return self._spectrum()[1]

    @property
    def K_fit_(self) -> Array:
        """The uncentred training Gram matrix (dual), kept for N <= DENSE_MAX_N, else recomputed."""
        check_is_fitted(self, "sigma2_")
        if self.formulation == "primal":
            raise AttributeError("K_fit_ is an attribute of the dual formulation")
        if self._K_cache is not None:
            return self._K_cache
        return self._gram(self.X_fit_, None)

    @property
    def B_(self) -> Array:
        """The symmetric square root of the covariance of k_c (module notes), n x n, built on access."""
        lam, E = self._spectrum()
        return (E * self._b(lam)) @ E.T

    def _b(self, lam: Array) -> Array:
        """The eigenvalues of B: lambda_p / sqrt(N) (p <= q), sigma sqrt(lambda_p) (p > q)."""
        q, N = self.n_components_, self.n_samples_
        return np.concatenate([lam[:q] / np.sqrt(N), np.sqrt(self.sigma2_ * lam[q:])])

    def _set_noise(self, sigma2: float) -> None:
        """Set sigma2_ and everything that depends on it: W_ / A_ (eqs. 5, 13) and M."""
        q, N = self.n_components_, self.n_samples_
        lam, E = self._lam_q, self._E_q
        self.sigma2_ = float(sigma2)
        d2 = 1.0 / N - self.sigma2_ / lam[:q]           # (I/N - sigma^2 Lambda_q^{-1}), eq. 13
        d2 = np.maximum(d2, 0.0)
        if self.formulation == "primal":
            self.W_ = self.components_[:q].T * np.sqrt(lam[:q] / N - self.sigma2_).clip(0.0)
            self._M = self.W_.T @ self.W_ + self.sigma2_ * np.eye(q)
        else:
            self.A_ = E[:, :q] * np.sqrt(d2)
            KcA = (E * lam) @ (E.T @ self.A_)               # K_c A
            self._M = self.A_.T @ KcA + self.sigma2_ * np.eye(q)
            self._M = 0.5 * (self._M + self._M.T)

    def with_sigma2(self, sigma2: float) -> "KernelPPCA":
        r"""A copy of this fitted model with the same :math:`q` and another :math:`\sigma^2`.

        The source's "no noise" paragraphs (sections 3.4 and 4.3) fix both
        :math:`q` and :math:`\sigma^2`; with :math:`\sigma^2 \to 0` the MAP
        reductions become (kernel) PCA's. ``W_`` / ``A_`` and ``B_`` are
        recomputed with eqs. (5) / (13); the eigendecomposition is reused.

        Parameters
        ----------
        sigma2 : float
            :math:`0 \le \sigma^2 < \lambda_q / N` (Prop. 3). ``0`` is the
            noiseless limit itself (:meth:`score_samples` then raises).

        Returns
        -------
        KernelPPCA
            A new fitted estimator (``self`` is unchanged).
        """
        check_is_fitted(self, "sigma2_")
        if isinstance(sigma2, bool) or not isinstance(sigma2, Real):
            raise TypeError(f"sigma2 must be a real number, got {sigma2!r}")
        sigma2 = check_positive(sigma2, "sigma2", strict=False)
        q, N = self.n_components_, self.n_samples_
        bound = float(self._lam_q[q - 1]) / N
        if not sigma2 < bound:
            raise ValueError(
                f"sigma2={sigma2:.6g} violates sigma^2 < lambda_q / N (Prop. 3): with "
                f"q = {q} the bound is lambda_{q} / N = {bound:.6g}"
            )
        new = copy.deepcopy(self)
        new._set_noise(sigma2)
        return new

    # ------------------------------------------------------------ helpers
    def _kernel_given(self) -> Any:
        """The kernel as the user gave it (``Linear()`` if None)."""
        return Linear() if self.kernel is None else self.kernel

    def _k(self) -> Any:
        """The kernel of the fitted dual: ``kernel`` (``Linear()`` if None), or for a linear
        or polynomial kernel on data far from the origin one with the same centred values,
        computed from the data's middle (:func:`mvkm.kernels.centring_equivalent`): every
        value the model reads is centred, so an offset of the data costs no digits; the
        pre-images' uncentred values are recovered in ``_from_coefficients``."""
        fitted = getattr(self, "_kernel_fit", None)
        if fitted is not None:
            return fitted
        return Linear() if self.kernel is None else self.kernel

    def _gram(self, X: Array, Y: Array | None) -> Array:
        """Uncentred kernel matrix k(X, Y) of the dual (Y=None: X with itself)."""
        if self.feature_map_ is not None:
            F = _checked_features(self.feature_map_, X)
            G = F if Y is None else check_array(self.feature_map_.transform(Y),
                                                "feature_map.transform(X_fit)")
            return F @ G.T
        kernel = self._k()
        K = np.asarray(kernel(X, Y), dtype=np.float64)
        expected = (X.shape[0], X.shape[0] if Y is None else Y.shape[0])
        if K.shape != expected:
            raise ValueError(f"kernel(X, Y) must return shape {expected}, got {K.shape}")
        return K

    def _gram_triangle(self, X: Array) -> GramTriangle:
        """The training Gram matrix as one triangle (:mod:`mvkm._gram`): ``upper_gram`` for a
        package kernel, one ``dsyrk`` for a feature map; another callable's whole matrix,
        checked for symmetry."""
        if self.feature_map_ is not None:
            F = check_array(self.feature_map_.transform(X), "feature_map.transform(X)")
            return features_triangle(F)
        kernel = self._k()
        if isinstance(kernel, Kernel):
            return kernel_triangle(kernel, X)
        return GramTriangle(np.ascontiguousarray(check_symmetric(self._gram(X, None), "K")))

    def _check_X(self, X: ArrayLike) -> Array:
        check_is_fitted(self, "sigma2_")
        Xa = check_array(X, "X")
        if Xa.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xa.shape[1]} features, but KernelPPCA is expecting "
                             f"{self.n_features_in_} features as input (the number seen in fit)")
        return Xa

    def _centred(self, X: Array) -> Array:
        """Primal: phi(X) - mu (m x d). Dual: centred test kernel vectors k_c (m x N)."""
        if self.formulation == "primal":
            assert self.feature_map_ is not None
            return _checked_features(self.feature_map_, X) - self.mean_
        return _center_test_rows(self._gram(X, self.X_fit_), self._train_means)

    def _exact_preimage(self) -> bool:
        if self.feature_map_ is not None:
            return isinstance(self.feature_map_, Identity)
        return self.kernel is None or isinstance(self.kernel, Linear)

    def _loadings(self) -> Array:
        """W (primal, d x q) or A (dual, N x q)."""
        return self.W_ if self.formulation == "primal" else self.A_

    # ------------------------------------------------------------ inference
    def transform(self, X: ArrayLike) -> Array:
        r"""MAP latent :math:`h` of each point (eq. 8 in the primal, eq. 16 in the dual).

        Primal: :math:`h = (W^\top W + \sigma^2 I)^{-1} W^\top (\phi(x) - \mu)`.
        Dual: :math:`h = (A^\top K_c A + \sigma^2 I)^{-1} A^\top k_c(x)`, with
        :math:`k_c(x)` the test kernel vector centred with the *training* means
        (:func:`mvkm.center_test_gram`). Both equal
        :math:`N \Lambda_q^{-1} (\Lambda_q / N - \sigma^2 I)^{1/2} V_q^\top (\phi - \mu)`.

        Parameters
        ----------
        X : array_like of shape (m, n_features_in_)

        Returns
        -------
        H : ndarray of shape (m, n_components_)
            A dask array for a dask ``X`` (computed block by block); with
            ``batch_size`` the rows are processed in chunks.
        """
        if is_dask_array(X) or (self.batch_size is not None and self.formulation == "primal"):
            check_is_fitted(self, "sigma2_")
            check_dask_chunks(X, "X")
            if not is_dask_array(X):
                X = check_array(X, "X")         # a list, a DataFrame: as fit reads it
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X must have shape (m, {self.n_features_in_}), got {X.shape}")
            return map_rows(lambda Xc: self._transform(np.asarray(Xc)), [X],
                            batch_size=self.batch_size, n_out=self.n_components_,
                            progress=self.progress, desc="transform")
        return self._transform(X)

    def _transform(self, X: ArrayLike) -> Array:
        Z = self._centred(self._check_X(X))
        return np.linalg.solve(self._M, (Z @ self._loadings()).T).T

    def posterior(self, X: ArrayLike) -> tuple[Array, Array]:
        r"""Posterior :math:`p(h \mid x)` (Prop. 4 in the primal, Prop. 8 / eq. 15 in the dual).

        :math:`h \mid \phi \sim \mathcal N(M^{-1} W^\top (\phi - \mu),\ \sigma^2 M^{-1})`
        with :math:`M = W^\top W + \sigma^2 I = A^\top K_c A + \sigma^2 I = \Lambda_q / N`
        at the maximum likelihood. The covariance is the same for every point.

        Parameters
        ----------
        X : array_like of shape (m, n_features_in_)

        Returns
        -------
        mean : ndarray of shape (m, n_components_)
            The MAP latents (:meth:`transform`).
        covariance : ndarray of shape (n_components_, n_components_)
            :math:`\sigma^2 M^{-1} = N \sigma^2 \Lambda_q^{-1}`.
        """
        mean = self.transform(X)
        cov = self.sigma2_ * np.linalg.inv(self._M)
        return mean, 0.5 * (cov + cov.T)

    def inverse_transform(self, H: ArrayLike, *, output: str = "input", preimage: str = "stable",
                          tau: float | None = None) -> Array:
        r"""Map latents to the feature, kernel or input space (eq. 9 primal, eq. 17 dual).

        Primal: :math:`\hat\phi = W h + \mu` (eq. 9). Dual:
        :math:`\hat k_c = K_c A h` (eq. 17), the centred kernel vector of
        :math:`\hat\phi = \mu + \Phi_c^\top A h`. The input-space point is exact for
        the identity map / linear kernel (:math:`\hat x = \bar x + X_c^\top A h` in
        the dual) and otherwise a kernel-smoother pre-image (eq. 19) of the
        *uncentred* kernel vector

        .. math::
            \hat k_i = k(x_i, \hat x) = (\hat k_c)_i + m_i + a^\top (m - \bar m 1),
            \qquad a = A h,\ m_i = \tfrac1N \sum_j k(x_i, x_j),\ \bar m = \tfrac1N \sum_i m_i,

        (from :math:`\phi_i^\top\hat\phi = (\phi_i - \mu)^\top(\hat\phi - \mu)
        + (\phi_i - \mu)^\top\mu + \mu^\top\mu + \mu^\top(\hat\phi - \mu)` with
        :math:`\hat\phi - \mu = \Phi_c^\top a`).

        Parameters
        ----------
        H : array_like of shape (m, n_components_)
        output : {"input", "feature", "kernel"}, default="input"
            ``"feature"``: :math:`\hat\phi` (primal only); ``"kernel"``: the centred
            kernel vectors :math:`\hat k_c` (shape (m, n_samples)).
        preimage : {"stable", "plain"}, default="stable"
            :func:`mvkm.preimage.stable_kernel_smoother` or the plain
            :func:`mvkm.preimage.kernel_smoother` (which raises where the weights
            sum to zero). Ignored when the pre-image is exact.
        tau : float, optional
            Strength of the stabilisation; defaults to ``1e-3`` times the mean of
            :math:`k(x_i, x_i)` over the training set.

        Returns
        -------
        ndarray of shape (m, n_features_in_), (m, d) or (m, n_samples)

        Warns
        -----
        RuntimeWarning
            When the (clipped) weights of a row sum to less than ``tau``: the plain
            smoother is unstable there and the stabilised pre-image is pulled
            toward the training mean.
        """
        check_is_fitted(self, "sigma2_")
        self._check_output(output, preimage)
        Hm = check_array(H, "H")
        if Hm.shape[1] != self.n_components_:
            raise ValueError(f"H must have n_components_ = {self.n_components_} columns, "
                             f"got shape {Hm.shape}")
        if self.formulation == "primal":
            return self._from_feature(Hm @ self.W_.T + self.mean_, output, preimage, tau)
        return self._from_coefficients(Hm @ self.A_.T, output, preimage, tau)

    def reconstruct(self, X: ArrayLike, *, output: str = "input", preimage: str = "stable",
                    tau: float | None = None) -> Array:
        r"""MAP reconstruction: :meth:`transform` then :meth:`inverse_transform`.

        Primal (eq. 10): :math:`\hat\phi = W M^{-1} W^\top (\phi - \mu) + \mu`.
        Dual (eqs. 17 and 22): :math:`\hat k_c = K_c A M^{-1} A^\top k_c`. As
        :math:`\sigma^2 \to 0` (:meth:`with_sigma2`) these are the (kernel) PCA
        projections onto the top :math:`q` directions. Parameters as in
        :meth:`inverse_transform`.

        Parameters
        ----------
        X : array_like of shape (m, n_features_in_)
        output, preimage, tau : see :meth:`inverse_transform`

        Returns
        -------
        ndarray of shape (m, n_features_in_), (m, d) or (m, n_samples)
        """
        return self.inverse_transform(self.transform(X), output=output, preimage=preimage, tau=tau)

    def sample(self, n_samples: int = 1, random_state: Any = None, *, output: str = "input",
               preimage: str = "stable", tau: float | None = None) -> Array:
        r"""Generate from the model's marginal (eq. 3 primal, eq. 24 dual).

        Primal: :math:`\phi = \mu + W z + \sigma V_r \varepsilon` with
        :math:`z \sim \mathcal N(0, I_q)` (the latent prior) and
        :math:`\varepsilon \sim \mathcal N(0, I_r)` (the noise in
        :math:`\mathcal H_E`), i.e. :math:`\phi \sim \mathcal N(\mu, W W^\top + \sigma^2 I_{\mathcal H_E})`.
        Dual: :math:`k_c = B \xi`, :math:`\xi \sim \mathcal N(0, I_N)`, with ``B_``
        the symmetric square root of the covariance of :math:`k_c` (module
        notes; the :math:`B` of the source's section 4.4, *not* the square root
        of its eq. 18). The sampled point is :math:`\mu + \Phi_c^\top a` with
        :math:`a = K_c^{+} k_c`, mapped to input space as in
        :meth:`inverse_transform`.

        Parameters
        ----------
        n_samples : int, default=1
        random_state : int, numpy Generator or None
        output, preimage, tau : see :meth:`inverse_transform`

        Returns
        -------
        ndarray of shape (n_samples, n_features_in_), (n_samples, d) or (n_samples, N)
        """
        check_is_fitted(self, "sigma2_")
        self._check_output(output, preimage)
        n_samples = check_count(n_samples, "n_samples")
        rng = check_random_state(random_state)
        if self.formulation == "primal":
            z = rng.standard_normal((n_samples, self.n_components_))
            eps = rng.standard_normal((n_samples, self.rank_))
            phi = self.mean_ + z @ self.W_.T + np.sqrt(self.sigma2_) * (eps @ self.components_)
            return self._from_feature(phi, output, preimage, tau)
        lam, E = self._spectrum()
        q = self.n_components_
        xi = rng.standard_normal((n_samples, self.n_samples_))
        c = xi @ E                                          # xi in the eigenbasis of K_c
        kc = (c * self._b(lam)) @ E.T                       # k_c = B xi (rows)
        if output == "kernel":
            return kc
        # a = K_c^+ k_c = E diag(b_p / lambda_p) E^T xi, formed from xi: b_p / lambda_p is
        # 1/sqrt(N) (p <= q) or sigma / sqrt(lambda_p) (p > q). Dividing the rounded k_c by
        # lambda_p instead amplifies its round-off by lambda_1 / lambda_p (up to 1e13 at the
        # rank cut-off), which made samples depend on the BLAS thread count.
        ratio = np.concatenate([np.full(q, 1.0 / np.sqrt(self.n_samples_)),
                                np.sqrt(self.sigma2_ / lam[q:])])
        a = (c * ratio) @ E.T
        return self._from_coefficients(a, output, preimage, tau, kc=kc)

    def score_samples(self, X: ArrayLike) -> Array:
        r"""Log-likelihood of each point, the part of :math:`\phi(x)` outside :math:`\mathcal H_E` included.

        The model's covariance :math:`C = W W^\top + \sigma^2 I` has the eigenvalues
        :math:`\lambda_p / N` along :math:`v_1, \dots, v_q` and :math:`\sigma^2` in
        every other direction, inside :math:`\mathcal H_E` or not. With
        :math:`z = \phi(x) - \mu`, :math:`c_p = v_p^\top z = e_p^\top k_c / \sqrt{\lambda_p}`
        and the residual :math:`\|z\|^2 - \sum_{p \le q} c_p^2` (the squared
        reconstruction error of kernel PCA, computable from kernel values alone:
        :math:`\|z\|^2 = k(x, x) - \tfrac2N \sum_j k(x, x_j) + \tfrac1{N^2}\sum_{ij} k(x_i, x_j)`),
        this returns

        .. math::
            s(x) = -\tfrac12\Big(r \log 2\pi + \sum_{p \le q} \log\frac{\lambda_p}{N}
                + (r - q)\log\sigma^2 + \sum_{p\le q}\frac{N c_p^2}{\lambda_p}
                + \frac{\|z\|^2 - \sum_{p \le q} c_p^2}{\sigma^2}\Big).

        In a feature space of finite dimension :math:`d \ge r` this is the Gaussian
        log-density :math:`\log \mathcal N(\phi; \mu, C)` plus the constant
        :math:`\tfrac{d - r}2 \log(2\pi\sigma^2)`, the same for every point: the
        normalisation of the :math:`d - r` noise directions outside
        :math:`\mathcal H_E`. In an infinite-dimensional RKHS (an RBF kernel) no
        density exists (that constant diverges), but :math:`s` is still defined and
        differences :math:`s(x) - s(x')` are the log-likelihood ratios of every
        finite-dimensional version of the model. For points of :math:`\mathcal H_E`
        (e.g. the training points) :math:`s` is the density of the coordinates in
        :math:`\mathcal H_E` (Prop. 9, the source's eq. 57); a point far from the data
        has a large residual and scores far below them. For ``d``-dimensional
        features of full rank (:math:`r = d < N`) :math:`s` is the ordinary Gaussian
        log-density (compare scikit-learn's ``PCA.score_samples``).

        Parameters
        ----------
        X : array_like of shape (m, n_features_in_)

        Returns
        -------
        ndarray of shape (m,)
        """
        Xa = self._check_X(X)
        if not self.sigma2_ > 0:
            raise ValueError("score_samples needs sigma2 > 0: the noiseless model is degenerate")
        lam, q, N, r = self._lam_q, self.n_components_, self.n_samples_, self.rank_
        # Far from the data (x ~ 1e200 with a linear kernel) the squared norms, and then
        # the score itself, overflow; inf - inf would give NaN: checked below instead.
        with np.errstate(over="ignore", invalid="ignore"):
            if self.formulation == "primal":
                Z = self._centred(Xa)
                c = Z @ self.components_[:q].T
                norm2 = np.einsum("ij,ij->i", Z, Z)
            else:
                K_test = self._gram(Xa, self.X_fit_)
                kc = _center_test_rows(K_test, self._train_means)
                c = (kc @ self._E_q) / np.sqrt(lam)
                norm2 = self._kernel_diag(Xa) - 2.0 * K_test.mean(axis=1) + self._train_means.mean()
            residual = np.maximum(norm2 - np.einsum("ij,ij->i", c, c), 0.0)
            log_det = np.log(lam / N).sum() + (r - q) * np.log(self.sigma2_)
            score = -0.5 * (r * np.log(2 * np.pi) + log_det + (c**2 * (N / lam)).sum(axis=1)
                            + residual / self.sigma2_)
        bad = ~np.isfinite(score)
        if bad.any():
            rows = np.flatnonzero(bad)
            raise ValueError(
                f"score_samples: the log-likelihood of {rows.size} row(s) of X (row {rows[0]} first, "
                f"max|x| = {np.abs(Xa[rows[0]]).max():.3g}) is not representable in float64: the "
                "squared norms or kernel values of these points overflow (they lie so far from "
                "the training data that the score is below about -1e308); rescale X as the "
                "training data were, or drop these rows")
        return score

    def _kernel_diag(self, X: Array) -> Array:
        """k(x, x) for each row of X (dual): from the feature map, the kernel's diag, or row by row."""
        if self.feature_map_ is not None:
            F = _checked_features(self.feature_map_, X)
            return np.einsum("ij,ij->i", F, F)
        kernel = self._k()
        if hasattr(kernel, "diag"):
            try:
                return np.asarray(kernel.diag(X), dtype=np.float64)
            except ValueError:
                # mvkm's kernels raise, as their Gram matrices do, where k(x, x) overflows
                # float64 (X was checked): inf for those rows, so that score_samples names them
                def one(x: Array) -> float:
                    try:
                        return float(kernel.diag(x[None, :])[0])
                    except ValueError:
                        return np.inf
                return np.array([one(x) for x in X])
        return np.array([float(np.asarray(kernel(X[i:i + 1], X[i:i + 1]))[0, 0])
                         for i in range(X.shape[0])])

    def score(self, X: ArrayLike, y: Any = None) -> float:
        """Mean log-likelihood of the points of ``X`` (:meth:`score_samples`)."""
        return float(np.mean(self.score_samples(X)))

    def get_covariance(self) -> Array:
        r"""Model covariance in feature space, :math:`W W^\top + \sigma^2 V_r V_r^\top` (eq. 3), primal only.

        Equal to :math:`W W^\top + \sigma^2 I_d` when the features have full rank
        (:math:`r = d`); scikit-learn's ``PCA.get_covariance()`` is this times
        :math:`N / (N - 1)` (for :math:`d < N`).

        Returns
        -------
        ndarray of shape (d, d)
        """
        check_is_fitted(self, "sigma2_")
        if self.formulation != "primal":
            raise ValueError("get_covariance needs formulation='primal' (a feature space); "
                             "in the dual use get_kernel_covariance()")
        return self.W_ @ self.W_.T + self.sigma2_ * (self.components_.T @ self.components_)

    def get_kernel_covariance(self) -> Array:
        r"""Covariance of the centred kernel vector :math:`k_c = \Phi_c(\phi - \mu)`, :math:`B^2`.

        :math:`K_c A A^\top K_c + \sigma^2 K_c = E\,\operatorname{diag}(\lambda_p^2/N\ (p\le q),\
        \sigma^2\lambda_p\ (p > q))\,E^\top` (module notes), in both formulations.

        Returns
        -------
        ndarray of shape (n_samples, n_samples)
        """
        lam, E = self._spectrum()
        return (E * self._b(lam) ** 2) @ E.T

    # ------------------------------------------------------------ pre-images
    def _check_output(self, output: str, preimage: str) -> None:
        if output not in _OUTPUTS:
            raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
        if output == "feature" and self.formulation != "primal":
            raise ValueError("output='feature' needs formulation='primal'")
        if preimage not in _PREIMAGES:
            raise ValueError(f"preimage must be one of {_PREIMAGES}, got {preimage!r}")

    def _from_feature(self, phi: Array, output: str, preimage: str, tau: float | None) -> Array:
        """Primal: feature vectors -> requested output."""
        if output == "feature":
            return phi
        if output == "kernel":
            return self._training_feature_products(phi - self.mean_, centred=True)
        if self._exact_preimage():
            return phi
        return self._smooth(self._training_feature_products(phi), preimage, tau)

    def _from_coefficients(self, a: Array, output: str, preimage: str, tau: float | None,
                           kc: Array | None = None) -> Array:
        r"""Dual: coefficients a (phi - mu = Phi_c^T a) -> requested output.

        ``kc = K_c a`` may be given; otherwise ``a`` must lie in the span of
        :math:`E_q` (a MAP reconstruction, ``a = A h``), where
        :math:`K_c a = E_q \Lambda_q E_q^\top a`.
        """
        if kc is None:
            E, lam = self._E_q, self._lam_q
            kc = ((a @ E) * lam) @ E.T                      # K_c a
        if output == "kernel":
            return kc
        if self._exact_preimage():
            X = self.X_fit_
            xbar = X.mean(axis=0)
            return xbar + a @ (X - xbar)
        k = uncenter_kernel_values(kc, a, self._row_means)  # uncentred k(x_i, x_hat)
        k = _unshift_kernel_values(k, a, getattr(self, "_origin_values", None))
        return self._smooth(k, preimage, tau)

    def _smooth(self, k: Array, preimage: str, tau: float | None) -> Array:
        if preimage == "plain":
            total, size = k.sum(axis=1), np.abs(k).sum(axis=1)
            weak = np.abs(total) < 1e-3 * size
            if np.any(weak):
                warnings.warn(
                    f"the kernel-smoother normaliser sum_i k_i is below 1e-3 * sum_i |k_i| for "
                    f"{int(weak.sum())} row(s): the plain pre-image (eq. 19) is unstable there; "
                    "use preimage='stable'", RuntimeWarning, stacklevel=3)
            return kernel_smoother(k, self.X_fit_)
        t = 1e-3 * self._diag_scale if tau is None else check_positive(tau, "tau", strict=False)
        weights = np.maximum(k, 0.0).sum(axis=1)
        weak = weights < t
        if np.any(weak):
            warnings.warn(
                f"the kernel-smoother normaliser sum_i max(k_i, 0) is below tau = {t:.3g} for "
                f"{int(weak.sum())} row(s): the plain smoother (eq. 19) is unstable there and the "
                "stabilised pre-image is pulled toward the training mean", RuntimeWarning,
                stacklevel=3)
        return stable_kernel_smoother(k, self.X_fit_, tau=t)
