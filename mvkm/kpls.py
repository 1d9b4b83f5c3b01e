r"""Multi-view kernel partial least squares (MvKPLS), Part III of the book.

The model of :cite:`zeng2024mvkpls` maximises the pairwise covariances of the
views' scores. Its dual (source eq. (3)) is the eigenproblem

.. math::
    \Omega \alpha = \lambda \alpha, \qquad
    \Omega = E D, \quad E = (1 1^\top - I_V) \otimes I_N, \quad
    D = \operatorname{blockdiag}(K_1, \dots, K_V),

whose positive eigenvalues are :math:`\lambda = 1/\gamma`. :math:`\Omega` is not
symmetric, but it is self-adjoint in the inner product
:math:`\langle x, y\rangle_D = x^\top D y`, so its spectrum is real; its nonzero
eigenvalues are those of the symmetric :math:`S = D^{1/2} E D^{1/2}`, and
:math:`\operatorname{tr}\Omega = 0`. The out-of-sample scores of view
:math:`v` are :math:`k_v(x, X_v)^\top \alpha^{[v]}` (source eq. (4)), with the test kernel
rows centred by the training means when the kernels are centred (bias terms).

Two routes compute the top ``k`` eigenpairs:

* ``solver="dense"``: the symmetric :math:`S` formed from the square roots of
  the :math:`K_v`, and a dense symmetric eigensolver, :math:`O((VN)^3)`;
* ``solver="lanczos"``: Lanczos on :math:`\Omega` in the :math:`D` inner
  product, with full re-orthogonalisation. Each step costs one product with
  :math:`D` (:math:`V N^2`, one kernel product per view) and one with
  :math:`E` (:math:`O(VN)`: a sum minus the view itself); no square root of a
  kernel matrix is needed, so singular (centred) kernels are no problem.
  Ritz pairs are accepted when their residual is below ``tol`` relative to
  :math:`\lambda_1`. An invariant Krylov space (kernels of low rank, kernels
  equal to the identity) restarts in its complement; a nearly degenerate top
  of the spectrum defeats a single-vector Lanczos: after
  ``max(10 k + 100, 200)`` steps the route warns (``ConvergenceWarning``) and
  solves the dense problem instead. The iteration runs on :math:`D/c` (scale
  invariant: kernels at :math:`10^{\pm 150}` are fine).

Both routes assume every :math:`K_v` positive semi-definite (the
:math:`D` inner product, the square roots). This is checked, and a
``ValueError`` names the view whose kernel fails: on every route, the diagonal;
on the dense
route every eigenvalue of :math:`K_v` (from the decomposition the square root
needs anyway); on the Lanczos route the Ritz values of :math:`K_v` on a
32-vector block Krylov space (four passes over :math:`K_v`), which finds a
clearly negative eigenvalue but may miss one small against the spread of the
spectrum.
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from ._validation import check_array, check_random_state, check_symmetric, reset_fitted
from ._validation import as_array
from ._validation import (atomic_fit, check_bool, check_dask_chunks, check_finite_result,
                          check_map_output, gram_of_view, own_copy)
from .features import Identity
from .covariance import (
    check_stream_params,
    feature_moments,
    fit_feature_map,
    is_dask_array,
    map_rows,
)
from ._gram import GramTriangle, kernel_triangle
from .kernels import Kernel, Linear, _center_test_rows, center_gram, centring_equivalent
from .linalg import ConvergenceWarning, sign_convention

__all__ = ["MultiViewKPLS"]

_DENSE_MAX = 1500  # solver="auto": the dense route up to V N = 1500


def _warn_round_off_view(X: NDArray[np.float64], v: int) -> None:
    """Warn if view ``v`` varies only at the round-off of its values (but is not constant).

    Such a view's centred kernel holds the rounding of its entries; an exactly
    constant view has a zero centred kernel, and the fit says so.
    """
    top = float(np.max(np.abs(X)))
    spread = float(np.max(X.max(axis=0) - X.min(axis=0)))
    if top > 0.0 and 0.0 < spread <= 1e3 * np.finfo(float).eps * top:
        warnings.warn(
            f"views[{v}] varies by only {spread / top:.1e} of its magnitude ({top:.3g}), at "
            "the round-off of its values: its centred kernel, and the components it takes part "
            "in, describe that rounding (remove the view, or check how it was computed)",
            UserWarning, stacklevel=4)


#: With more than two views, kernels whose scales differ by more than this leave the Lanczos route.
_LANCZOS_MAX_SCALE_RATIO = 1e6


def _lanczos_cap(k: int, n: int) -> int:
    """Largest Krylov basis the Lanczos route builds before it gives up (the cost grows like n m^2)."""
    return min(n, max(10 * k + 100, 200))


def _offdiag_sum(x: NDArray[np.float64], V: int) -> NDArray[np.float64]:
    """:math:`E x` for ``x`` of shape (V N,) or (V N, m): each block becomes the sum of the others.

    Summed from the others (a prefix and a suffix sum), never as the total minus the block
    itself: with views on different scales (one view's block 1e8 times the other's) that
    difference cancels the small blocks' digits (at 1e16 half of them, at 1e50 all).
    """
    xs = x.reshape(V, -1, *x.shape[1:])
    out = np.zeros_like(xs)
    for v in range(1, V):                  # out[v] = xs[0] + ... + xs[v - 1]
        out[v] = out[v - 1] + xs[v - 1]
    after = np.zeros_like(xs[0])
    for v in range(V - 2, -1, -1):         # + xs[v + 1] + ... + xs[V - 1]
        after += xs[v + 1]
        out[v] += after
    return out.reshape(x.shape)


def _full(K: Any) -> NDArray[np.float64]:
    """A kernel block as a full array (a :class:`~mvkm._gram.GramTriangle` expanded)."""
    return K.dense() if isinstance(K, GramTriangle) else K


def _diag(K: Any) -> NDArray[np.float64]:
    """The diagonal of a kernel block (of :math:`K_c` for a centring :class:`~mvkm._gram.GramTriangle`)."""
    if isinstance(K, GramTriangle):
        d = np.diagonal(K.K)
        return d - 2.0 * K.row_means + K.grand_mean if K.center else d
    return np.diagonal(K)


#: Relative round-off allowed below zero in the positive semi-definiteness checks.
_PSD_RTOL = 1e-10


def _psd_rtol(K: Any) -> float:
    """``_PSD_RTOL``, or ten units of round-off of a float32 kernel (``dtype='float32'``)."""
    dt = getattr(K, "dtype", np.float64)
    return max(_PSD_RTOL, 10.0 * float(np.finfo(dt).eps))


def _not_psd(v: int, kernel: Any, why: str) -> ValueError:
    """The error for a view whose kernel matrix is not positive semi-definite."""
    return ValueError(
        f"the kernel of view {v} ({kernel!r}) is not positive semi-definite on these data: {why}. "
        "MultiViewKPLS needs positive semi-definite kernels (D = blockdiag(K_v) is the inner "
        "product of its eigenproblem): use a Mercer kernel (RBF, Laplacian, Linear, Polynomial "
        "with c >= 0) or formulation='primal' with explicit features")


def _check_psd_diagonal(Ks: list[NDArray[np.float64]], kernels: Sequence[Any],
                        scales: Sequence[float]) -> None:
    r"""A PSD matrix has a non-negative diagonal: checked on each :math:`K_v` in :math:`O(N)`.

    The round-off allowance is ``_PSD_RTOL`` times ``scales[v]``, the size of the
    uncentred kernel (centring a kernel with entries near 1, a wide RBF, leaves
    errors of order :math:`N\varepsilon` in entries that may all be small).
    Necessary only: the dense route then checks every eigenvalue of
    :math:`K_v`, the Lanczos route its Ritz values (:func:`_psd_probe`).
    """
    for v, (K, kernel, scale) in enumerate(zip(Ks, kernels, scales)):
        d = _diag(K)
        if d.min() < -_psd_rtol(K) * max(scale, np.finfo(float).tiny):
            i = int(np.argmin(d))
            raise _not_psd(v, kernel, f"its diagonal entry K[{i}, {i}] = {d[i]:.3g} is negative")




def _psd_probe(K: NDArray[np.float64], v: int, kernel: Any, rng: np.random.Generator,
               scale: float) -> None:
    r"""Look for a negative eigenvalue of :math:`K` with a small block Krylov space.

    Four thin block products per view (:func:`mvkm.linalg.ritz_extremes`: +10 % CPU
    time on a whole Lanczos-route fit at N = 2000, V = 2, k = 5) span a Krylov
    space of 32 vectors from a random start; its smallest Ritz value is an upper
    bound of :math:`\lambda_{\min}(K)`. Below ``-_PSD_RTOL`` times the largest Ritz
    value (or than ``scale``, the size of the uncentred kernel) it proves
    :math:`K` indefinite. Probabilistic: a negative eigenvalue
    small against the spread of the spectrum may go unseen.
    """
    from .linalg import ritz_extremes

    if isinstance(K, GramTriangle):
        times = K.matmat
    else:               # (Q^T K)^T: K is symmetric, and the thin GEMM is faster this way round
        def times(Q: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.ascontiguousarray((Q.T @ K).T)
    lo, hi = ritz_extremes(times, K.shape[0], rng)
    if lo < -_psd_rtol(K) * max(abs(lo), abs(hi), scale, np.finfo(float).tiny):
        raise _not_psd(v, kernel, f"a Ritz value of its kernel matrix is {lo:.3g} < 0 (an upper "
                                  f"bound of its smallest eigenvalue; largest Ritz value {hi:.3g})")


def _symmetric_form(Ks: list[NDArray[np.float64]], kernels: Sequence[Any] | None = None,
                    scales: Sequence[float] | None = None
                    ) -> tuple[list[NDArray[np.float64]], NDArray[np.float64]]:
    """``(R_v, S)``: the square roots of the kernels and :math:`S = R E R` (V N x V N, symmetric).

    A ``ValueError`` naming the view (and its entry of ``kernels``) if a
    :math:`K_v` has a negative eigenvalue beyond round-off (``_PSD_RTOL`` times
    its largest eigenvalue or ``scales[v]``, the size of the uncentred kernel).
    """
    V, N = len(Ks), Ks[0].shape[0]
    Rs = []
    for v, K in enumerate(Ks):
        w, U = np.linalg.eigh(0.5 * (K + K.T))     # the square root's own decomposition
        top = max(float(np.abs(w).max()), np.finfo(float).tiny)
        if w[0] < -_psd_rtol(K) * max(top, 0.0 if scales is None else scales[v]):
            raise _not_psd(v, None if kernels is None else kernels[v],
                           f"the smallest eigenvalue of its kernel matrix is {w[0]:.3g} "
                           f"(largest {w[-1]:.3g})")
        roots = np.where(w > N * float(np.finfo(K.dtype).eps) * max(float(w[-1]), 0.0),
                         np.sqrt(np.clip(w, 0.0, None)), 0.0)
        Rs.append((U * roots) @ U.T)                # as linalg.psd_sqrt(K): round-off negatives cut
    S = np.zeros((V * N, V * N))
    for u in range(V):
        for v in range(u + 1, V):
            block = Rs[u] @ Rs[v]
            S[u * N:(u + 1) * N, v * N:(v + 1) * N] = block
            S[v * N:(v + 1) * N, u * N:(u + 1) * N] = block.T
    return Rs, S


def _times(K: NDArray[Any], x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``K @ x`` in the precision of ``K`` (a float32 K is not copied to float64), as float64;
    a :class:`~mvkm._gram.GramTriangle` multiplies from its triangle."""
    if isinstance(K, GramTriangle):
        return K @ x
    return np.asarray(K @ x.astype(K.dtype, copy=False), dtype=np.float64)


class _CallableKernel:
    """A user's kernel callable ``k(X, Y) -> Gram`` (e.g. a scikit-learn kernel), its output checked."""

    def __init__(self, k: Any, name: str) -> None:
        self.k, self.name = k, name

    def __call__(self, X: NDArray[np.float64], Y: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        B = X if Y is None else Y
        G = np.asarray(self.k(X, B), dtype=np.float64)
        if G.shape != (X.shape[0], B.shape[0]):
            raise ValueError(f"{self.name}(X, Y) must return a Gram matrix of shape "
                             f"{(X.shape[0], B.shape[0])}, got shape {G.shape}")
        return check_finite_result(G, f"the Gram matrix of {self.name}", "views")

    def __repr__(self) -> str:
        return repr(self.k)


class MultiViewKPLS(BaseEstimator):
    r"""Multi-view kernel partial least squares: features shared by V >= 2 views.

    Solves the dual eigenproblem (3) of :cite:`zeng2024mvkpls`,
    :math:`\Omega\alpha = \lambda\alpha` with :math:`\Omega = ED` (see the
    module docstring), for the ``k`` largest positive eigenvalues, or its
    primal :math:`C_{\mathrm{off}} w = \lambda w` with explicit feature maps,
    where :math:`C_{\mathrm{off}}` has the blocks :math:`\Phi_u^\top\Phi_v`
    (:math:`u \ne v`) and zero diagonal blocks. Both give the same scores.

    Parameters
    ----------
    n_components : int or float, default=10
        The number ``k`` of features per view; a float in (0, 1) keeps the
        smallest ``k`` whose explained-variance ratio (over the positive
        eigenvalues, ``explained_variance_ratio_``) reaches it, the source's
        95 % rule with ``0.95``. A float needs the whole positive spectrum,
        so it uses the dense route.
    kernels : Kernel, sequence of Kernel, or None, default=None
        One kernel for every view or one per view (``mvkm.kernels`` objects);
        ``None`` is the linear kernel. With ``formulation="primal"`` each must
        have an explicit feature map: :class:`~mvkm.kernels.Linear` (the
        identity) or a feature map of :mod:`mvkm.features` (e.g.
        ``RandomFourierFeatures``), which is cloned and fitted per view.
    center : bool, default=True
        Centre the kernels (features) with the training means, which is what
        bias terms in the score equations give; the source omits them.
    formulation : {"dual", "primal"}, default="dual"
    solver : {"auto", "dense", "lanczos"}, default="auto"
        Dual eigensolver (see the module docstring); ``"auto"`` takes the
        dense route for ``V N <= 1500`` or a float ``n_components``, else
        Lanczos. The primal always solves its symmetric problem densely.
    random_state : int, Generator or None, default=None
        Seed of the Lanczos start vector.
    tol : float, default=1e-10
        Lanczos: accept a Ritz pair when the D-norm of its residual is below
        ``tol * lambda_1``.
    batch_size : int, optional
        Primal only: stream the views ``batch_size`` rows at a time
        (:func:`mvkm.covariance.feature_moments`). The primal needs only the
        feature means and the off-diagonal blocks :math:`\Phi_u^\top\Phi_v` of
        the scatter, so ``fit`` never holds the ``N x D`` features; the scores
        of the training rows come from a second pass. Views given as
        ``dask.array.Array`` are always streamed on the active Dask scheduler,
        and ``transform`` then returns dask arrays.
    device : str or torch.device, optional
        Primal, streamed: features and scatter with torch on this device.
    dtype : {"float64", "float32"}, default="float64"
        Primal, streamed: precision of the features and of each chunk's product.
        Dual: precision of the centred kernel matrices held during ``fit`` and of
        the products with them (half the memory; eigenvalues to about
        :math:`10^{-6}` relative); the eigenproblem is solved in float64.
    progress : bool or None, default=None
        A tqdm bar over the streamed passes (``None``: once a pass lasts 5 s).
    copy_X : bool, default=True
        Keep a copy of the training data, so that changing the caller's
        array after ``fit`` cannot change the model. ``False`` keeps a
        reference (saves the memory of one copy; the caller must then leave
        the array unchanged). Memory-mapped and dask arrays are never copied.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (k,)
        The k largest positive eigenvalues of Omega, descending.
    dual_coef_ : list of ndarray of shape (N, k)
        :math:`\alpha^{[v]}` per view, normalised so that
        :math:`\sum_v \alpha^{[v]\top} K_v \alpha^{[v]} = 1` per component (the
        columns of :math:`D^{1/2}\alpha` are orthonormal).
    explained_variance_ratio_ : ndarray of shape (k,)
        :math:`\lambda_j / \sum_{\lambda_i > 0}\lambda_i`. The denominator
        needs the whole spectrum: the dense route has it; the Lanczos route
        computes it during ``fit`` when :math:`VN \le 1500` and otherwise
        leaves the attribute out (reading it raises ``AttributeError``). The
        kernel matrices are never kept after ``fit``.
    n_components_ : int
    n_features_in_ : int
        The total number of input features, :math:`\sum_v d_v`.
    view_dims_ : list of int
        The number of input features :math:`d_v` of each view.
    n_views_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm import MultiViewKPLS, RBF
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(0, 6, 100)
    >>> views = [np.c_[np.cos(t), np.sin(t)], np.c_[t, t**2]]
    >>> model = MultiViewKPLS(n_components=2, kernels=RBF(1.0)).fit(views)
    >>> [s.shape for s in model.transform(views)]
    [(100, 2), (100, 2)]
    """

    def __init__(self, n_components: int | float = 10, kernels: Any = None, center: bool = True,
                 formulation: str = "dual", solver: str = "auto", random_state: Any = None,
                 *, tol: float = 1e-10, batch_size: int | None = None, device: Any = None,
                 dtype: str = "float64", progress: bool | None = None,
                 copy_X: bool = True) -> None:
        self.n_components = n_components
        self.kernels = kernels
        self.center = center
        self.formulation = formulation
        self.solver = solver
        self.random_state = random_state
        self.tol = tol
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.progress = progress
        self.copy_X = copy_X

    # -- validation -------------------------------------------------------------------------
    @staticmethod
    def _check_views(views: Any, n_views: int | None = None) -> list[NDArray[np.float64]]:
        if isinstance(views, np.ndarray) or not isinstance(views, (list, tuple)):
            raise ValueError(f"views must be a list of arrays (one per view), got {type(views).__name__}")
        if n_views is None and len(views) < 2:
            raise ValueError(f"views must hold at least 2 views, got {len(views)}")
        if n_views is not None and len(views) != n_views:
            raise ValueError(f"views must hold {n_views} views, as in fit, got {len(views)}")
        out = []
        for v, X in enumerate(views):
            if is_dask_array(X):
                check_dask_chunks(X, f"views[{v}]")
                if X.ndim not in (1, 2):
                    raise ValueError(f"views[{v}] must be 1-D or 2-D, got a dask array of shape {X.shape}")
                out.append(X[:, None] if X.ndim == 1 else X)
                continue
            if X is None:
                raise TypeError(f"views[{v}] is None: every view is needed here")
            arr = as_array(X, f"views[{v}]") if not hasattr(X, "tocsr") else X
            if getattr(arr, "ndim", 2) == 1:
                arr = arr[:, None]
            out.append(check_array(arr, f"views[{v}]"))
        rows = {X.shape[0] for X in out}
        if len(rows) > 1:
            raise ValueError(f"all views must have the same number of rows, got {[X.shape[0] for X in out]}")
        return out

    def _check_params(self, V: int) -> list[Any]:
        check_bool(self.copy_X, "copy_X")
        nc = self.n_components
        if isinstance(nc, bool) or not isinstance(nc, (Integral, Real)):
            raise ValueError(f"n_components must be a positive int or a float in (0, 1), got {nc!r}")
        if isinstance(nc, Integral) and nc < 1:
            raise ValueError(f"n_components must be a positive int or a float in (0, 1), got {nc!r}")
        if not isinstance(nc, Integral) and not 0 < nc < 1:
            raise ValueError(f"n_components as a float must lie in (0, 1), got {nc!r}")
        if self.formulation not in ("dual", "primal"):
            raise ValueError(f"formulation must be 'dual' or 'primal', got {self.formulation!r}")
        if self.solver not in ("auto", "dense", "lanczos"):
            raise ValueError(f"solver must be 'auto', 'dense' or 'lanczos', got {self.solver!r}")
        check_bool(self.center, "center")
        check_bool(self.progress, "progress", allow_none=True)
        if not (isinstance(self.tol, Real) and 0 < self.tol < 1):
            raise ValueError(f"tol must be a float in (0, 1), got {self.tol!r}")
        if not isinstance(self.dtype, str) or self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        # the dual takes dtype too (its kernel matrices); batch_size and device stream the primal
        check_stream_params(self.formulation, self.batch_size, self.device,
                            self.dtype if self.formulation == "primal" else "float64",
                            dual_device=False)
        kernels = self.kernels
        if kernels is None:
            kernels = Linear()
        if not isinstance(kernels, (list, tuple)):
            kernels = [kernels] * V
        if len(kernels) != V:
            raise ValueError(f"kernels must be one kernel or {V} (one per view), got {len(kernels)}")
        out = []
        for v, k in enumerate(kernels):
            if self.formulation == "primal":
                if isinstance(k, Linear):
                    out.append(Identity())
                elif hasattr(k, "fit") and hasattr(k, "transform"):
                    out.append(clone(k))
                else:
                    raise ValueError(
                        f"kernels[{v}] = {k!r} has no explicit feature map, so the primal cannot be "
                        "formed: use formulation='dual', or an explicit map such as "
                        "mvkm.RandomFourierFeatures")
            elif isinstance(k, Kernel) or (isinstance(k, str) and k == "precomputed"):
                out.append(k)
            elif callable(k):
                out.append(_CallableKernel(k, f"kernels[{v}]"))
            else:
                raise ValueError(f"kernels[{v}] must be an mvkm kernel (e.g. mvkm.RBF(1.0)), a "
                                 "callable k(X, Y) -> Gram matrix (e.g. a scikit-learn kernel) or "
                                 f"'precomputed', got {k!r}")
        return out

    # -- fitting ----------------------------------------------------------------------------
    @atomic_fit
    def fit(self, views: Sequence[ArrayLike], y: Any = None) -> "MultiViewKPLS":
        """Fit the model on ``views`` (a list of V >= 2 arrays of shape (N, d_v)); return ``self``."""
        reset_fitted(self)
        Xs = self._check_views(views)
        V, N = len(Xs), int(Xs[0].shape[0])
        maps = self._check_params(V)
        streamed = (self.batch_size is not None or self.device is not None
                    or (self.formulation == "primal" and self.dtype != "float64")
                    or any(is_dask_array(X) for X in Xs))
        if streamed and self.formulation == "dual":
            raise ValueError("views given as dask arrays need formulation='primal' (a streamed "
                             "scatter of explicit features)")
        if N < 2:
            raise ValueError(f"views must have at least 2 rows (samples), got n_samples = {N}")
        self.n_views_ = V
        self.view_dims_ = [int(X.shape[1]) for X in Xs]
        self.n_features_in_ = int(sum(self.view_dims_))
        self.n_samples_ = N
        self._X_fit = [None if isinstance(k, str) else own_copy(X, g, self.copy_X)
                       for X, g, k in zip(Xs, views, maps)]
        if self.center and not streamed:
            for v, X in enumerate(Xs):
                _warn_round_off_view(X, v)
        if self.center and not streamed and self.formulation == "dual":
            # a linear kernel far from the origin: the same centred values, from the middle
            maps = [centring_equivalent(k, X) if isinstance(k, Kernel) else k
                    for k, X in zip(maps, Xs)]
        self._maps = maps
        if streamed:
            lam, alphas, total = self._fit_primal_streamed(Xs, maps)
        elif self.formulation == "primal":
            lam, alphas, total = self._fit_primal(Xs, maps)
        else:
            lam, alphas, total = self._fit_dual(Xs, maps)
        self.n_components_ = lam.shape[0]
        self.eigenvalues_ = lam
        self.dual_coef_ = alphas
        self._positive_total = total
        return self

    def _kernel_blocks(self, Xs: list[NDArray[np.float64]], kernels: list[Kernel], *,
                       compact: bool = False) -> list[Any]:
        """The (centred) kernel matrices; ``compact``: as :class:`~mvkm._gram.GramTriangle`
        (one triangle per view, centred implicitly, the Lanczos route's products by ``dsymv``)."""
        Ks: list[Any] = []
        self._train_means = []
        for v, (X, k) in enumerate(zip(Xs, kernels)):
            if compact and not isinstance(k, str) and self.dtype != "float32":
                T = gram_of_view(lambda A: kernel_triangle(k, A, center=False), X, f"views[{v}]")
                if self.center:
                    T.center_explicitly()
                self._train_means.append(T.row_means)
                Ks.append(T)
                continue
            if isinstance(k, str):                       # "precomputed": the view is K_v itself
                K = check_symmetric(X, f"views[{v}]").copy()
            else:
                K = gram_of_view(k, X, f"views[{v}]")
            self._train_means.append(K.mean(axis=0))
            K = center_gram(K, copy=False) if self.center else K
            # dtype="float32": the kernel matrices held during fit take half the memory, and
            # every product with them runs in float32 (_times); the eigenproblem stays float64
            Ks.append(K.astype(np.float32) if self.dtype == "float32" else K)
        return Ks

    def _select(self, lam: NDArray[np.float64], total: float) -> int:
        """k from n_components and the positive eigenvalues ``lam`` (descending)."""
        n_pos = int(np.sum(lam > 1e-12 * max(lam[0], 0.0))) if lam.size and lam[0] > 0 else 0
        nc = self.n_components
        if isinstance(nc, Integral):
            if nc > n_pos:
                raise ValueError(f"n_components={nc} is larger than the number of positive "
                                 f"eigenvalues of Omega ({n_pos}) for these views (a view whose "
                                 "centred kernel matrix is zero, e.g. a constant view or values so "
                                 "small that their products underflow, adds none)")
            return int(nc)
        ratios = np.cumsum(lam[:n_pos]) / total
        return int(min(np.searchsorted(ratios, nc - 1e-12) + 1, n_pos))

    def _finish(self, alpha: NDArray[np.float64], Ks_or_scores: Any, V: int, N: int) -> list[NDArray[np.float64]]:
        """Split alpha (V N x k) per view with the package's sign convention (on the scores)."""
        signs = sign_convention(Ks_or_scores)
        alpha = alpha * signs
        return [alpha[v * N:(v + 1) * N].copy() for v in range(V)]

    def _fit_dual(self, Xs, kernels):
        V, N = len(Xs), Xs[0].shape[0]
        solver = self.solver
        if solver == "auto":
            solver = "dense" if (V * N <= _DENSE_MAX or not isinstance(self.n_components, Integral)) \
                else "lanczos"
        Ks = self._kernel_blocks(Xs, kernels, compact=solver == "lanczos")
        # every route relies on D = blockdiag(K_v) >= 0; round-off is relative to the uncentred K_v
        scales = [max(float(np.abs(m).max()), float(np.abs(_diag(K)).max()))
                  for m, K in zip(self._train_means, Ks)]
        _check_psd_diagonal(Ks, kernels, scales)
        if solver == "dense":
            lam, alpha, total = self._dense(Ks, kernels, scales)
        else:
            if not isinstance(self.n_components, Integral):
                raise ValueError("a float n_components needs the whole spectrum: use solver='dense' or 'auto'")
            rng = check_random_state(self.random_state)
            for v, (K, kernel) in enumerate(zip(Ks, kernels)):
                _psd_probe(K, v, kernel, rng, scales[v])   # the dense route checks every eigenvalue
            tops = [float(np.abs(_diag(K)).max()) for K in Ks]
            ratio = max(tops) / max(min(tops), np.finfo(float).tiny)
            if V > 2 and ratio > _LANCZOS_MAX_SCALE_RATIO:
                # two views are balanced exactly (_lanczos); with more, the D-norms of the
                # smaller views fall below the round-off of the larger ones
                warnings.warn(
                    f"the views' centred kernel matrices differ in scale by {ratio:.1e} (largest "
                    f"diagonal entries {min(tops):.3g} to {max(tops):.3g}): with V = {V} views the "
                    "Lanczos route cannot resolve the smaller views; solving the dense symmetric "
                    "problem instead (standardise the views, or scale their kernels, to keep the "
                    "Lanczos route's memory)", UserWarning, stacklevel=3)
                lam, alpha, total = self._dense([_full(K) for K in Ks], kernels, scales)
                found = False
            else:
                found = self._lanczos(Ks, int(self.n_components), list(scales))
            if found is False:
                pass
            elif found is None:
                warnings.warn(
                    f"Lanczos did not converge in {_lanczos_cap(int(self.n_components), V * N)} steps (the top of "
                    "the spectrum is (nearly) degenerate, e.g. kernels close to the identity): solving the "
                    "dense symmetric problem instead", ConvergenceWarning, stacklevel=3)
                lam, alpha, total = self._dense([_full(K) for K in Ks], kernels, scales)
            else:
                (lam, alpha), total = found, None
                if V * N <= _DENSE_MAX:     # small: the whole spectrum costs what the dense route does
                    mu = np.linalg.eigvalsh(_symmetric_form([_full(K) for K in Ks], kernels, scales)[1])
                    total = float(mu[mu > 0].sum())
        scores = np.vstack([_times(K, alpha[v * N:(v + 1) * N]) for v, K in enumerate(Ks)])
        # the kernel matrices are not kept (V N^2 numbers): the model stores O(N k) per view
        return lam, self._finish(alpha, scores, V, N), total

    def _dense(self, Ks, kernels=None, scales=None):
        """Top eigenpairs through the symmetric S = R E R with R = D^{1/2} (blockwise)."""
        V, N = len(Ks), Ks[0].shape[0]
        Rs, S = _symmetric_form(Ks, kernels, scales)
        mu, B = np.linalg.eigh(S)
        mu, B = mu[::-1], B[:, ::-1]
        pos = mu[mu > 0]
        k = self._select(mu, float(pos.sum()))
        lam, B = mu[:k], B[:, :k]
        # alpha = E R beta / lambda solves Omega alpha = lambda alpha, alpha^T D alpha = 1.
        RB = np.vstack([Rs[v] @ B[v * N:(v + 1) * N] for v in range(V)])
        alpha = _offdiag_sum(RB, V) / lam
        return lam, alpha, float(pos.sum())

    def _lanczos(self, Ks, k, raw_scale=0.0):
        """Lanczos on Omega = E D in the D inner product (full re-orthogonalisation).

        The D inner product needs every K_v positive semi-definite: the caller
        checks it first (:func:`_check_psd_diagonal`, :func:`_psd_probe`). The
        iteration runs on D / c, c a power of two near the largest diagonal entry
        (scale invariance: kernels at 1e-150 would underflow every D-norm), and
        the eigenpairs are scaled back; with two views each kernel gets its own
        c_v (the problem is invariant under it), so views on scales far apart keep
        their digits. A new direction that loses all but
        1e-13 of its D-norm to the projection is treated as lying in the basis
        (an invariant subspace, e.g. kernels of rank below k), and so is one
        whose D-norm is at the round-off of D, ``100 N eps raw_scale`` per unit
        length (``raw_scale``: the size of the uncentred kernels, whose round-off
        the centred ones carry): beyond the numerical rank of the kernels,
        Krylov vectors are noise that would corrupt the basis; so is one whose
        D-norm is below the round-off of its updated product, ``1e-10 |p| |D p|``.
        Ritz pairs are returned only when their residuals meet ``tol``: a basis
        that cannot grow without meeting it returns None (the dense fallback).
        """
        V, N = len(Ks), Ks[0].shape[0]
        n = V * N
        rng = check_random_state(self.random_state)
        raw = list(raw_scale) if isinstance(raw_scale, (list, tuple)) else [float(raw_scale)] * V

        def power_of_two(top: float) -> float:
            return math.ldexp(1.0, min(max(math.frexp(top)[1] - 1, -1000), 1000)) if top > 0.0 else 1.0

        tops = [float(np.abs(_diag(K)).max()) for K in Ks]
        if V == 2:
            # Two views: each kernel is scaled by its own c_v. The problem is invariant:
            # with K_v = c_v K'_v, lambda = lambda' sqrt(c_1 c_2) and alpha_v = alpha'_v /
            # sqrt(c_v), so views on scales 1e50 apart cost no digits (one global c left
            # the smaller view's D-norms below round-off: "n_components larger than the
            # number of positive eigenvalues"). With V > 2 the problem is not invariant.
            cs = [power_of_two(t) for t in tops]
        else:
            cs = [power_of_two(max(tops))] * V
        inv_cs = [1.0 / c for c in cs]

        def D(x):
            return np.concatenate([_times(K, x[v * N:(v + 1) * N]) * inv_cs[v]
                                   for v, K in enumerate(Ks)])

        Q = np.zeros((n, 0))
        Y = np.zeros((n, 0))

        def extend(p):
            Dp = D(p)
            before = float(p @ Dp)
            size = float(np.linalg.norm(Dp))
            for _ in range(2):
                coef = Y.T @ p
                p = p - Q @ coef
                Dp = Dp - Y @ coef
            nrm2 = float(p @ Dp)
            # Dp is updated, not recomputed: its error ~ eps |D p_before| makes p^T Dp
            # meaningless below ~ eps |p| |D p_before| (a corrupted basis vector, spurious
            # Ritz values): such a direction is treated as already in the basis
            if nrm2 <= 1e-13 * before or nrm2 <= 1e-10 * float(np.linalg.norm(p)) * size:
                nrm2 = min(nrm2, 0.0)
            return p, Dp, nrm2

        # the round-off of D per unit length, view by view (each at its own scale)
        traces = [K.trace() if isinstance(K, GramTriangle) else float(np.trace(K)) for K in Ks]
        eps = float(np.finfo(float).eps)
        if V == 2:
            floors = np.array([max(t * 1e-13, 100.0 * N * eps * r) * ic
                               for t, r, ic in zip(traces, raw, inv_cs)])
        else:
            floors = np.full(V, max(sum(traces) * 1e-13, 100.0 * N * eps * max(raw)) * inv_cs[0])

        def below_roundoff(p, nrm2):
            return nrm2 <= float(floors @ np.einsum("vi,vi->v", p.reshape(V, N), p.reshape(V, N)))
        # float32 kernels (dtype='float32') resolve residuals to about 1e-6 lambda_1, not below
        tol = max(self.tol, 1e-5) if getattr(Ks[0], "dtype", None) == np.float32 else self.tol
        p, Dp, nrm2 = extend(_offdiag_sum(D(rng.standard_normal(n)), V))
        if nrm2 <= 0:
            zero = [v for v, t in enumerate(traces) if not t > 0.0]
            raise ValueError(
                f"Omega has no positive eigenvalue: the centred kernel matrix of "
                f"{', '.join(f'views[{v}]' for v in zero) or 'every view'} is zero (a constant "
                "view, or values so small that their products underflow), and Omega pairs each "
                "view only with the others")
        Q, Y = (p / np.sqrt(nrm2))[:, None], (Dp / np.sqrt(nrm2))[:, None]
        m_check = min(n, 2 * k + 20)
        cap = _lanczos_cap(k, n)
        exhausted = False
        while True:
            while Q.shape[1] < m_check and not exhausted:
                p, Dp, nrm2 = extend(_offdiag_sum(Y[:, -1], V))
                if below_roundoff(p, nrm2):  # invariant subspace: restart in the complement
                    p, Dp, nrm2 = extend(_offdiag_sum(D(rng.standard_normal(n)), V))
                    if below_roundoff(p, nrm2):
                        exhausted = True
                        break
                Q = np.hstack([Q, (p / np.sqrt(nrm2))[:, None]])
                Y = np.hstack([Y, (Dp / np.sqrt(nrm2))[:, None]])
            EY = _offdiag_sum(Y, V)
            T = Y.T @ EY
            theta, W = np.linalg.eigh(0.5 * (T + T.T))
            theta, W = theta[::-1], W[:, ::-1]
            n_pos = int(np.sum(theta > 1e-12 * max(theta[0], 0.0))) if theta[0] > 0 else 0
            if n_pos >= k or exhausted or Q.shape[1] >= n:
                if k > n_pos:
                    raise ValueError(f"n_components={k} is larger than the number of positive "
                                     f"eigenvalues of Omega ({n_pos})")
                lam, Wk = theta[:k], W[:, :k]
                alpha = (EY @ Wk) / lam              # Omega x = E Y w; alpha = Omega x / theta
                Dalpha = np.column_stack([D(a) for a in alpha.T])
                resid = _offdiag_sum(Dalpha, V) - alpha * lam
                # D-norm of the residual through D resid = D E D alpha - lambda D alpha
                res = np.sqrt(np.abs(np.einsum("ij,ij->j", resid,
                                               np.column_stack([D(r) for r in resid.T]))))
                norms = np.sqrt(np.einsum("ij,ij->j", alpha, Dalpha))
                if np.all(res <= tol * lam[0] * norms):
                    alpha = alpha / norms
                    for v in range(V):
                        alpha[v * N:(v + 1) * N] /= math.sqrt(cs[v])
                    lam_scale = math.sqrt(cs[0] * cs[1]) if V == 2 else cs[0]
                    return lam * lam_scale, alpha
                if exhausted or Q.shape[1] >= n:
                    return None    # a basis that cannot grow, residuals too large: the dense route
            m_check = min(n, Q.shape[1] + k + 10)
            if m_check > cap and cap < n:
                return None                                   # the caller falls back to the dense route

    def _fit_primal(self, Xs, maps):
        V, N = len(Xs), Xs[0].shape[0]
        Phis = []
        self._feature_means = []
        for X, fm in zip(Xs, maps):
            Phi = np.asarray(check_map_output(fm.fit(X).transform(X), N,
                                              f"kernels[{len(Phis)}].transform"), dtype=np.float64)
            mean = Phi.mean(axis=0) if self.center else np.zeros(Phi.shape[1])
            self._feature_means.append(mean)
            Phis.append(Phi - mean)
        dims = np.cumsum([0] + [P.shape[1] for P in Phis])
        C = np.zeros((dims[-1], dims[-1]))
        for u in range(V):
            for v in range(u + 1, V):
                block = Phis[u].T @ Phis[v]
                C[dims[u]:dims[u + 1], dims[v]:dims[v + 1]] = block
                C[dims[v]:dims[v + 1], dims[u]:dims[u + 1]] = block.T
        check_finite_result(C, "the cross-covariance of the features", "views")
        lam, W, total = self._primal_eig(C)
        es = [Phis[v] @ W[dims[v]:dims[v + 1]] for v in range(V)]     # scores e_v = Phi_v w_v
        if V > 2:
            # eigh resolves each w_v to eps |w|: a view on a scale 1e8 below the others has
            # w_v that small and keeps ~8 digits. One pass of the eigen-equation's block
            # rows, w_v = Phi_v^T sum_{u != v} e_u / lambda, recomputes it from the other
            # views' accurate scores (a no-op, to round-off, for views on a common scale).
            others = _offdiag_sum(np.vstack(es), V) / lam
            W = np.vstack([Phis[v].T @ others[v * N:(v + 1) * N] for v in range(V)])
            es = [Phis[v] @ W[dims[v]:dims[v + 1]] for v in range(V)]
        return self._primal_finish(lam, W, np.vstack(es), dims, total)

    def _primal_eig(self, C: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """The top k eigenpairs of C (the book's eq. kplso-eq-primal-eig: the off-diagonal blocks
        Phi_u^T Phi_v, dense) and the sum of its positive eigenvalues."""
        lam, Wfull = np.linalg.eigh(C)
        lam, Wfull = lam[::-1], Wfull[:, ::-1]
        total = float(lam[lam > 0].sum())
        k = self._select(lam, total)
        return lam[:k], Wfull[:, :k], total

    def _primal_finish(self, lam, W, scores, dims, total):
        """alpha^{[v]} = sum_{u != v} e^{[u]} / lambda from the stacked scores (V N x k), with signs."""
        V = len(dims) - 1
        alpha = _offdiag_sum(scores, V) / lam                            # alpha^{[v]} = sum_{u != v} e^{[u]} / lambda
        signs = sign_convention(scores)
        self._W = [W[dims[v]:dims[v + 1]] * signs for v in range(V)]
        return lam, [a * signs for a in np.split(alpha, V)], total

    def _fit_primal_streamed(self, Xs, maps):
        """The primal from the streamed scatter: C = its off-diagonal blocks (uncentred
        scatter S + N mean mean^T when ``center=False``); the scores by a second pass."""
        V = len(Xs)
        fitted = [fit_feature_map(fm, X) for fm, X in zip(maps, Xs)]
        mom = feature_moments(Xs, fitted, batch_size=self.batch_size, device=self.device,
                              dtype=self.dtype, progress=self.progress)
        S = mom.scatter if self.center else mom.scatter + mom.n_samples * np.outer(mom.mean, mom.mean)
        means = mom.view_means() if self.center else [np.zeros(d) for d in mom.dims]
        dims = np.cumsum([0] + list(mom.dims))
        C = S.copy()
        for v in range(V):
            C[dims[v]:dims[v + 1], dims[v]:dims[v + 1]] = 0.0
        lam, W, total = self._primal_eig(C)
        k = lam.size

        def scores(*chunks):
            return np.hstack([(np.asarray(check_map_output(fm.transform(np.asarray(X)), len(X),
                                                           f"kernels[{v}].transform",
                                                           width=mean.shape[0]),
                                          dtype=np.float64) - mean)
                              @ W[dims[v]:dims[v + 1]]
                              for v, (fm, X, mean) in enumerate(zip(fitted, chunks, means))])

        E = map_rows(scores, Xs, batch_size=self.batch_size, n_out=V * k, progress=self.progress,
                     desc="scores")
        E = np.asarray(E.compute() if is_dask_array(E) else E)
        self._maps = fitted
        self._feature_means = means
        stacked = np.vstack([E[:, v * k:(v + 1) * k] for v in range(V)])
        return self._primal_finish(lam, W, stacked, dims, total)

    # -- using the model --------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "eigenvalues_"):
            raise NotFittedError("this MultiViewKPLS is not fitted yet: call fit(views) first")

    @property
    def explained_variance_ratio_(self) -> NDArray[np.float64]:
        """Eigenvalues over the sum of all positive eigenvalues of Omega (the sum is computed during ``fit``)."""
        self._check_fitted()
        if self._positive_total is None:
            raise AttributeError(
                "explained_variance_ratio_ needs the sum of every positive eigenvalue of Omega, "
                f"which the Lanczos route does not compute for V N > {_DENSE_MAX} (a dense "
                "O((V N)^3) eigensolve, and the kernel matrices are not kept): fit with "
                "solver='dense' or a float n_components to get it")
        return self.eigenvalues_ / self._positive_total

    def transform(self, views: Sequence[ArrayLike]) -> list[NDArray[np.float64]]:
        """Scores of new rows: a list of V arrays of shape (n, k), source eq. (4).

        The test kernel rows are centred with the training means when ``center``
        (on the training rows this gives the training scores :math:`K_v\\alpha^{[v]}`).
        """
        self._check_fitted()
        Xs = self._check_views(views, self.n_views_)
        for v, (X, d) in enumerate(zip(Xs, self.view_dims_)):
            if X.shape[1] != d:
                raise ValueError(f"views[{v}] has {X.shape[1]} features, but the model was fitted "
                                 f"with {d}")
        if self.formulation == "primal" and (self.batch_size is not None
                                             or any(is_dask_array(X) for X in Xs)):
            k = self.n_components_
            stacked = map_rows(lambda *chunks: np.hstack(self._transform(list(chunks))), Xs,
                               batch_size=self.batch_size, n_out=self.n_views_ * k,
                               progress=self.progress, desc="transform")
            return [stacked[:, v * k:(v + 1) * k] for v in range(self.n_views_)]
        return self._transform(Xs)

    def _transform(self, Xs):
        out = []
        for v, X in enumerate(Xs):
            if self.formulation == "primal":
                Phi = check_map_output(self._maps[v].transform(X), X.shape[0], f"kernels[{v}].transform",
                                       width=self._feature_means[v].shape[0])
                out.append((Phi - self._feature_means[v]) @ self._W[v])
            elif isinstance(self._maps[v], str):         # "precomputed": k(new rows, training rows)
                Kt = X
                if Kt.shape[1] != self.n_samples_:
                    raise ValueError(f"views[{v}] must be a precomputed kernel between the new rows "
                                     f"and the {self.n_samples_} training rows, got shape {Kt.shape}")
            else:
                Kt = self._maps[v](X, self._X_fit[v])
            if self.formulation == "dual":
                if self.center:
                    Kt = _center_test_rows(Kt, self._train_means[v])
                out.append(Kt @ self.dual_coef_[v])
        return out

    def fit_transform(self, views: Sequence[ArrayLike], y: Any = None) -> list[NDArray[np.float64]]:
        """Fit, then return the training scores (a list of V arrays of shape (N, k))."""
        return self.fit(views).transform(views)
