r"""Multi-view restricted kernel machines in primal and dual (Part I of the book).

One objective (eq. (4) of :cite:`achten2023duality`),

.. math::

    J = \tfrac12 \sum_v \mathrm{Tr}(U_v^\top U_v) + \tfrac12 \sum_i h_i^\top \Gamma h_i
        - \sum_{v,i} \phi_v(x_{v,i})^\top U_v h_i + \tfrac12 \sum_{v,i} \|\phi_v(x_{v,i})\|^2,

two settings: the primal eigenproblem of the cross-covariance
:math:`C = \Phi^\top \Phi` of the concatenated centred features (Algorithms 1
and 3) and the dual eigenproblem of the summed centred kernels
:math:`K = \sum_v M_c K_v M_c` (Algorithms 2 and 4). Either can be solved by
an eigensolver or on the Stiefel manifold; :class:`MultiViewRKM` offers all
four, the inference of missing views (eqs. (15)-(16)) and pre-images.
"""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from ._validation import (
    check_array,
    check_count,
    check_n_components,
    reset_fitted,
    check_not_sparse,
    check_positive,
)
from ._validation import (atomic_fit, check_bool, check_dask_chunks, check_finite_result,
                          check_map_output, gram_of_view, own_copy)
from ._validation import as_array
from ._parallel import check_n_jobs, limit_threads
from .covariance import (
    check_stream_params,
    feature_moments,
    features_times,
    fit_feature_map,
    fold_raw,
    is_dask_array,
    map_rows,
    raw_dims,
    raw_transforms,
)
from .features import Identity
from ._gram import dense_dual_bytes, gib, kernel_triangle, memory_verdict, upper_sum
from .kernels import (Kernel, Linear, Polynomial, _center_test_rows, _origin_kernel_values,
                      _unshift_kernel_values, centring_equivalent, uncenter_kernel_values)
from .linalg import (
    _AUTO_DENSE_FRACTION,
    _AUTO_DENSE_MAX_N,
    flip_signs,
    psd_sqrt,
    rotate_to_diagonal,
    top_eigh,
)
from .preimage import kernel_smoother

__all__ = ["MultiViewRKM", "choose_algorithm"]

_FORMULATIONS = ("primal", "dual")
_SOLVERS = ("eig", "stiefel")
_STIEFEL_METHODS = ("cayley-bb", "cayley-adam")
#: kernel_storage="auto" leaves the dual's kernel matrices unstored above this size (4 GiB)
_DENSE_KERNEL_BYTES = 4 * 2**30


def choose_algorithm(n_samples: int, feature_dim: int | None = None, *, explicit: bool = True,
                     parametric: bool = False, stiefel: bool = False) -> str:
    r"""Pick a training algorithm by the flowchart of :cite:`achten2023duality` (their Figure 1).

    The four algorithms solve the same problem; they differ in cost. The
    decisions, in order:

    1. Is the feature map explicitly known (or approximated, e.g. by random
       Fourier features)? If not, only kernels are available and only the
       dual can be used: Algorithm 2 (Algorithm 4 if ``stiefel``).
    2. Are the feature or pre-image maps parametric (:math:`\phi(\cdot;\theta)`,
       :math:`\psi(\cdot;\eta)`)? Then their parameters are trained jointly by
       gradient steps with a reconstruction loss added to the objective, so an
       eigendecomposition at every step is out: a Stiefel algorithm (3 or 4).
    3. Otherwise (or for the Stiefel choice) compare sizes: the primal works
       with the :math:`d_f \times d_f` covariance, the dual with the
       :math:`n \times n` kernel matrix; take the smaller. Ties go to the primal.

    Parameters
    ----------
    n_samples : int
        Number :math:`n` of training points.
    feature_dim : int, optional
        Total feature dimension :math:`d_f = \sum_v d_{f,v}`; required when
        ``explicit`` is true.
    explicit : bool, default=True
        Whether every feature map is known explicitly (or approximated).
    parametric : bool, default=False
        Whether the feature/pre-image maps have trainable parameters (implies
        a Stiefel algorithm and an added reconstruction loss; needs ``explicit``).
    stiefel : bool, default=False
        Ask for a Stiefel algorithm even for fixed maps.

    Returns
    -------
    str
        ``"Algorithm 1"`` (primal, eigendecomposition), ``"Algorithm 2"`` (dual,
        eigendecomposition), ``"Algorithm 3"`` (primal, Stiefel) or
        ``"Algorithm 4"`` (dual, Stiefel).

    Examples
    --------
    >>> choose_algorithm(929, 5001)    # Santa Fe, 5000 random features
    'Algorithm 2'
    >>> choose_algorithm(929, 5001, stiefel=True)
    'Algorithm 4'
    >>> choose_algorithm(10_000, explicit=False)
    'Algorithm 2'
    """
    n = check_count(n_samples, "n_samples")
    for flag, name in ((explicit, "explicit"), (parametric, "parametric"), (stiefel, "stiefel")):
        check_bool(flag, name)               # a string such as "no" is truthy
    if parametric and not explicit:
        raise ValueError("parametric feature maps are explicit: parametric=True needs explicit=True")
    if not explicit:
        return "Algorithm 4" if stiefel else "Algorithm 2"
    if feature_dim is None:
        raise ValueError("feature_dim is required when the feature maps are explicit")
    d_f = check_count(feature_dim, "feature_dim")
    primal = d_f <= n
    if parametric or stiefel:
        return "Algorithm 3" if primal else "Algorithm 4"
    return "Algorithm 1" if primal else "Algorithm 2"


def _ndim(X: Any, name: str = "X") -> int:
    """The number of dimensions of an array-like (its own ``ndim``, else that of ``np.asarray``)."""
    return int(X.ndim) if hasattr(X, "ndim") else as_array(X, name).ndim


def _as_2d(X: ArrayLike, name: str) -> Any:
    """A view as an n x d float array (1-D input is one column).

    A ``dask.array.Array`` stays lazy (its values are checked chunk by chunk
    when they are read); only its number of dimensions is checked here.
    """
    if is_dask_array(X):
        check_dask_chunks(X, name)
        if X.ndim not in (1, 2):
            raise ValueError(f"{name} must be a 1-D or 2-D array, got a dask array of shape {X.shape}")
        return X[:, None] if X.ndim == 1 else X
    check_not_sparse(X, name)
    arr = as_array(X, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    return check_array(arr, name)


#: Largest max|B| handed to the Stiefel solver: its squared norms (about n max|B|^2) stay finite.
_STIEFEL_MAX_SCALE = 1e150


def _checked_gamma_spectrum(Gamma: NDArray[np.float64]) -> NDArray[np.float64]:
    """The eigenvalues of Gamma (descending); a clear error if s exceeds the numerical rank."""
    s = Gamma.shape[0]
    ev = np.sort(np.linalg.eigvalsh(0.5 * (Gamma + Gamma.T)))[::-1]
    if not ev[-1] > 1e-12 * max(ev[0], np.finfo(float).tiny):
        raise ValueError(
            f"n_components={s} exceeds the numerical rank of the training data: "
            f"Gamma's smallest eigenvalue is {ev[-1]:.3g} (largest {ev[0]:.3g}); use fewer "
            "components" + (" (the centred views are zero: every view is constant, or its values "
                            "are so small, below about 1e-154, that their products underflow)"
                            if ev[0] == 0 else ""))
    return ev


#: Relative round-off below zero tolerated in the checks that a user's kernel is positive
#: semi-definite (of the size of its uncentred entries or of its largest eigenvalue).
_PSD_RTOL = 1e-8


def _is_mercer(kernel: Any) -> bool:
    """Whether ``kernel`` is one of mvkm's kernels, positive semi-definite by construction."""
    from .kernels import RBF, Laplacian, Polynomial

    return type(kernel) in (Linear, RBF, Laplacian, Polynomial)


def _ritz_extremes(T: Any, rng: np.random.Generator) -> tuple[float, float]:
    """Smallest and largest Ritz values of ``T`` (a centred :class:`GramTriangle`) on a small
    block Krylov space (:func:`mvkm.linalg.ritz_extremes`)."""
    from .linalg import ritz_extremes

    return ritz_extremes(T.matmat, T.n, rng)


def _extreme_eigenvalues(T: Any) -> tuple[float, float]:
    """The most negative and the largest eigenvalue of ``T``'s centred matrix (an error path):
    LAPACK up to n = 2000, else ARPACK (its partial answer if it stops short)."""
    import scipy.linalg
    import scipy.sparse.linalg as spla

    if T.n <= 2000:
        w = scipy.linalg.eigvalsh(T.dense())
        return float(w[0]), float(w[-1])
    op = spla.LinearOperator((T.n, T.n), matvec=T.matmat, matmat=T.matmat, dtype=np.float64)
    out = []
    for which in ("SA", "LA"):
        try:
            w = spla.eigsh(op, k=1, which=which, tol=1e-6, maxiter=300, return_eigenvectors=False)
        except spla.ArpackNoConvergence as exc:
            w = exc.eigenvalues if len(exc.eigenvalues) else np.array([np.nan])
        out.append(float(w[0]))
    return out[0], out[1]


def _indefinite_kernel_error(T: Any, v: int, kernel: Any, why: str) -> ValueError:
    lo, hi = _extreme_eigenvalues(T)
    return ValueError(
        f"kernels[{v}] = {kernel!r} is not positive semi-definite on views[{v}]: {why}; the most "
        f"negative eigenvalue of its centred kernel matrix is {lo:.3g} (the largest {hi:.3g}). "
        "MultiViewRKM needs positive semi-definite kernels (Gram matrices of feature maps): use a "
        "Mercer kernel (mvkm.RBF, Laplacian, Linear, Polynomial) or correct the kernel")


def _check_user_kernel(T: Any, v: int, kernel: Any, rng: np.random.Generator) -> None:
    r"""A user's kernel (not one of mvkm's) must give a positive semi-definite centred Gram matrix.

    Two cheap necessary checks (:math:`O(n)` and four block products): the centred diagonal
    :math:`(K_c)_{ii} = (M_c e_i)^\top K (M_c e_i)` is non-negative, and no Ritz value of a
    small block Krylov space of :math:`K_c` is negative, each beyond ``_PSD_RTOL`` times the
    size of the uncentred kernel. Either proves :math:`K_c` indefinite; the error then gives
    its most negative eigenvalue (one more eigensolve, on the error path only).
    """
    scale = max(float(np.abs(T.diagonal()).max()), float(np.abs(T.row_means).max()),
                np.finfo(float).tiny)
    d = T.diagonal() - 2.0 * T.row_means + T.grand_mean
    i = int(np.argmin(d))
    if d[i] < -_PSD_RTOL * scale:
        raise _indefinite_kernel_error(T, v, kernel, f"the centred diagonal entry [{i}, {i}] is "
                                                     f"{d[i]:.3g} < 0")
    lo, hi = _ritz_extremes(T, rng)
    if lo < -_PSD_RTOL * max(abs(hi), scale):
        raise _indefinite_kernel_error(T, v, kernel, f"a Ritz value of its centred kernel matrix "
                                                     f"is {lo:.3g} < 0")


class MultiViewRKM(BaseEstimator):
    r"""Multi-view restricted kernel machine (multi-view kernel PCA), primal or dual.

    Solves Problem (8) (primal) or (12) (dual) of :cite:`achten2023duality`,
    the two faces of one objective (eq. (4)):

    * primal (Algorithms 1 and 3): :math:`C \tilde U = \tilde U \Lambda` with
      the cross-covariance :math:`C = \Phi^\top\Phi` (eq. (10)) of the
      concatenated centred features :math:`\Phi = [\Phi_1, \dots, \Phi_V]`;
      then :math:`U = \tilde U \Lambda^{1/2}`, :math:`\Gamma = \Lambda`
      (Corollary 3.4) and :math:`H = \Phi U \Gamma^{-1}` (eq. (6));
    * dual (Algorithms 2 and 4): :math:`K H = H \Lambda` with
      :math:`K = \sum_v M_c K_v M_c`, :math:`\Gamma = \Lambda` (eq. (13),
      Corollary 3.6).

    With ``solver="stiefel"`` the same problems are solved on the Stiefel
    manifold (:func:`mvkm.stiefel.maximize_trace`); the solution
    :math:`\tilde U'` (or :math:`H'`) is then rotated so that
    :math:`\Gamma` is diagonal (``rotate=True``), which makes all four
    algorithms return the same model up to column signs.

    Parameters
    ----------
    n_components : int, default=2
        Number :math:`s` of latent components; at most ``n - 1`` (centred data
        has rank at most ``n - 1``) and, in the primal, at most the feature
        dimension. The default, 2, gives a latent plane to plot.
    kernels : list of Kernel, optional
        One kernel per view (e.g. ``[mvkm.RBF(2.0), mvkm.Linear()]``). Only
        the dual can use a kernel without an explicit feature map; in the
        primal a :class:`~mvkm.kernels.Linear` kernel is taken as the identity
        map.
    feature_maps : list of transformers, optional
        One explicit feature map per view (:class:`~mvkm.features.Identity`,
        :class:`~mvkm.features.RandomFourierFeatures`,
        :class:`~mvkm.features.Nystrom`, or any scikit-learn transformer);
        cloned and fitted on the training view. Give ``kernels`` or
        ``feature_maps``, not both; with neither every view uses the linear
        kernel (identity map).
    formulation : {"dual", "primal"}, default="dual"
        ``"dual"``: the eigenproblem of the summed, centred ``n x n`` kernel
        matrices (Part I, "The dual"), for any kernel; ``"primal"``: the
        eigenproblem of the ``D x D`` covariance of the concatenated explicit
        features (Part I, "The primal"), for feature maps (or the linear
        kernel), cheaper when ``D < n`` and the one that streams
        (``batch_size``, ``device``, dask arrays). Both give the same model
        up to the signs of its components where both apply.
    solver : {"eig", "stiefel"}, default="eig"
        ``"eig"``: :func:`mvkm.linalg.top_eigh` (Algorithms 1-2);
        ``"stiefel"``: :func:`mvkm.stiefel.maximize_trace` (Algorithms 3-4).
    rotate : bool, default=True
        For ``solver="stiefel"``: rotate the solution to a diagonal
        :math:`\Gamma` (steps 7-9 of Algorithms 3-4). Without rotation the
        model is equally optimal, with a non-diagonal :math:`\Gamma'`.
    rescale : bool, default=True
        Primal only: :math:`U = \tilde U \Gamma^{1/2}` (step 6 of Algorithm 1,
        step 13 of Algorithm 3). ``False`` sets :math:`U = \tilde U`, the
        ablation of Fig. 7 of the source, which breaks inference.
    random_state : None, int or numpy.random.Generator
        Seed of the Stiefel starting point and of the iterative eigensolvers.
    tol : float, default=1e-8
        ``solver="stiefel"``: tolerance on the relative Riemannian gradient
        (see :func:`mvkm.stiefel.maximize_trace`).
    max_iter : int, optional
        ``solver="stiefel"``: iteration cap.
    stiefel_method : {"cayley-bb", "cayley-adam"}, default="cayley-bb"
        The Stiefel optimiser: Cayley steps with Barzilai-Borwein step sizes,
        or the Cayley-Adam optimiser used by the source.
    progress : bool or None, default=None
        Progress bars: ``True`` shows one during Stiefel training and during
        streamed passes over the data; ``None`` shows the streamed passes' bar
        only once a pass has lasted 5 seconds (not during Stiefel training);
        ``False`` never. ``MVKM_PROGRESS=0`` in the environment turns the
        automatic bar off.
    eig_method : {"auto", "covariance", "qr"}, default="auto"
        How the primal applies :math:`C = \Phi^\top\Phi`. ``"covariance"``
        forms the :math:`D \times D` matrix (eq. (10)) and hands it to the
        solver: :math:`O(D^3)` for ``solver="eig"``. ``"qr"`` never forms it:
        with the thin QR factorisation :math:`\Phi^\top = QR`,
        :math:`C = Q (R R^\top) Q^\top`, so the eigenpairs of :math:`C` are
        :math:`(\lambda, Q w)` for those of the :math:`n \times n` matrix
        :math:`RR^\top` (exact, :math:`O(n^2 D)`); the Stiefel solver applies
        :math:`C A = \Phi^\top(\Phi A)`. ``"auto"`` takes ``"qr"`` when
        :math:`2n \le D`.
    n_jobs : int, optional
        Threads for the passes over the ``n x n`` kernel matrices during ``fit``
        (``-1``: every usable core). ``None``: the user's BLAS/OpenMP limit
        (``threadpoolctl`` or ``OMP_NUM_THREADS``), at most 8 (docs/package.md, "Threads").
    batch_size : int, optional
        Primal only: stream the views ``batch_size`` rows at a time
        (:func:`mvkm.covariance.feature_moments`): ``fit`` then forms
        :math:`C = \Phi_c^\top\Phi_c` from the means and the scatter of the
        features, chunk by chunk, and never holds the ``n x D`` feature matrix
        (peak memory :math:`O(D^2 + \text{batch\_size}\cdot D)`); ``transform``
        and ``predict`` run chunk by chunk too. ``None`` (default): everything
        in memory, as in the book's chapters, unless ``device``, ``dtype`` or
        dask views ask for the streamed fit (then chunks of about 64 MiB).
        Views given as ``dask.array.Array`` are always streamed, block by
        block, on the active Dask scheduler (a ``dask.distributed`` client if
        one is connected); ``transform`` and ``predict`` then return dask arrays.
    device : str or torch.device, optional
        Primal, streamed: compute the features (identity, random Fourier
        features) and the covariance with torch on this device (``"cpu"``,
        ``"cuda"``). ``None``: numpy.
    dtype : {"float64", "float32"}, default="float64"
        Primal, streamed: precision of the features and of each chunk's
        product (chunks are merged in float64). float32 is about twice as
        fast and gives eigenvalues to a relative :math:`10^{-6}`-:math:`10^{-5}`
        (module notes of :mod:`mvkm.covariance`).
    kernel_storage : {"auto", "dense", "none"}, default="auto"
        Dual only. ``"dense"`` forms the ``n x n`` kernel matrices;
        ``"none"`` never stores them: the summed centred kernel is applied
        tile by tile (:class:`mvkm.matfree.KernelOperator`, memory
        :math:`O(n(d + s))`, on ``device`` if given) inside a block subspace
        iteration from a Nystrom warm start (:func:`mvkm.matfree.matfree_top_eigh`
        for one kernel view; for several, one start for the summed kernel). ``"dense"`` keeps the upper triangle of
        each kernel view's matrix (and of their sum) and centres implicitly,
        as :func:`mvkm.linalg.kernel_top_eigh` does (``mvkm._gram``).
        ``"auto"``: ``"none"`` when a single view's ``n x n`` float64 matrix
        would exceed 4 GiB (``n`` above about 23,000; its matrix-free route,
        Nystrom-started, is then the faster), when a ``device`` is given, or
        when the dense route's estimated peak memory exceeds 90 % of the
        available memory (the room under a cgroup or ``ulimit -v`` included);
        else ``"dense"`` (several views stay dense while they fit: their
        matrix-free route recomputes every view's tiles in every product, and
        took twice the dense route's time with two RBF views at n = 30,000,
        ``benchmarks/bench_views.py``).
        ``"dense"`` (or ``"auto"`` with the Stiefel
        solver) raises a ``MemoryError`` giving the estimate when it does not
        fit. ``"none"`` only with ``solver="eig"``.
    copy_X : bool, default=True
        Keep a copy of the training data, so that changing the caller's
        array after ``fit`` cannot change the model. ``False`` keeps a
        reference (saves the memory of one copy; the caller must then leave
        the array unchanged). Memory-mapped and dask arrays are never copied.

    Attributes
    ----------
    H_ : ndarray of shape (n, s)
        Latent variables of the training points (orthonormal columns).
    Gamma_ : ndarray of shape (s, s)
        The hidden-unit matrix :math:`\Gamma` (diagonal unless a Stiefel
        solution is left unrotated).
    eigenvalues_ : ndarray of shape (s,)
        Eigenvalues of ``Gamma_``, descending.
    U_ : list of ndarray of shape (D_v, s)
        Primal only: the interconnection matrix of each view.
    n_views_ : int
    n_samples_ : int
    view_dims_ : list of int
        Input dimension :math:`d_v` of each view.
    feature_dims_ : list of int
        Feature dimension :math:`D_v` of each view (explicit maps only).
    stiefel_history_ : dict
        ``solver="stiefel"``: the convergence history of the optimiser.
    Gamma_prime_ : ndarray of shape (s, s)
        ``solver="stiefel"``: :math:`\Gamma'` of the unrotated solution.
    components_prime_ : ndarray
        ``solver="stiefel"``: the unrotated Stiefel solution (:math:`\tilde U'`
        in the primal, :math:`H'` in the dual).

    See Also
    --------
    choose_algorithm : the source's flowchart for picking primal or dual.
    mvkm.timeseries.recursive_forecast : forecasting with a two-view model.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm import MultiViewRKM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((50, 3))
    >>> Y = X @ rng.standard_normal((3, 2))
    >>> dual = MultiViewRKM(2).fit([X, Y])
    >>> primal = MultiViewRKM(2, formulation="primal").fit([X, Y])
    >>> bool(np.allclose(np.abs(dual.H_), np.abs(primal.H_)))
    True
    >>> dual.predict([X[:3], None], target=1).shape
    (3, 2)
    """

    def __init__(self, n_components: int = 2, kernels: Sequence[Kernel] | None = None,
                 feature_maps: Sequence[Any] | None = None, formulation: str = "dual",
                 solver: str = "eig", rotate: bool = True, rescale: bool = True,
                 random_state: Any = None, *, tol: float = 1e-8, max_iter: int | None = None,
                 stiefel_method: str = "cayley-bb", progress: bool | None = None,
                 eig_method: str = "auto", n_jobs: int | None = None,
                 batch_size: int | None = None, device: Any = None,
                 dtype: str = "float64", kernel_storage: str = "auto",
                 copy_X: bool = True) -> None:
        self.n_components = n_components
        self.kernels = kernels
        self.feature_maps = feature_maps
        self.formulation = formulation
        self.solver = solver
        self.rotate = rotate
        self.rescale = rescale
        self.random_state = random_state
        self.tol = tol
        self.max_iter = max_iter
        self.stiefel_method = stiefel_method
        self.progress = progress
        self.eig_method = eig_method
        self.n_jobs = n_jobs
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.kernel_storage = kernel_storage
        self.copy_X = copy_X

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        check_bool(self.copy_X, "copy_X")
        if self.formulation not in _FORMULATIONS:
            raise ValueError(f"formulation must be 'primal' or 'dual', got {self.formulation!r}")
        if self.solver not in _SOLVERS:
            raise ValueError(f"solver must be 'eig' or 'stiefel', got {self.solver!r}")
        if self.stiefel_method not in _STIEFEL_METHODS:
            raise ValueError(f"stiefel_method must be one of {_STIEFEL_METHODS}, "
                             f"got {self.stiefel_method!r}")
        if self.eig_method not in ("auto", "covariance", "qr"):
            raise ValueError(f"eig_method must be 'auto', 'covariance' or 'qr', got {self.eig_method!r}")
        if self.kernels is not None and self.feature_maps is not None:
            raise ValueError("give kernels or feature_maps, not both")
        check_positive(self.tol, "tol")
        check_bool(self.rotate, "rotate")
        check_bool(self.rescale, "rescale")
        check_bool(self.progress, "progress", allow_none=True)
        check_stream_params(self.formulation, self.batch_size, self.device, self.dtype,
                            dual_device=True)
        if self.kernel_storage not in ("auto", "dense", "none"):
            raise ValueError(f"kernel_storage must be 'auto', 'dense' or 'none', got {self.kernel_storage!r}")
        if self.formulation == "dual" and self.kernel_storage == "none" and self.solver != "eig":
            raise ValueError("kernel_storage='none' needs solver='eig' (a block subspace iteration)")

    @staticmethod
    def _check_views(views: Any, n_views: int | None = None, *,
                     allow_missing: bool = False) -> list[NDArray[np.float64] | None]:
        if isinstance(views, np.ndarray) or not isinstance(views, (list, tuple)):
            raise ValueError("views must be a list of arrays (one n x d_v array per view), "
                             f"got {type(views).__name__}")
        if n_views is not None and len(views) != n_views:
            raise ValueError(f"expected {n_views} views (as in fit), got {len(views)}")
        if len(views) == 0:
            raise ValueError("views is empty: give at least one view")
        if len(views) == 1 and views[0] is not None and _ndim(views[0], "views[0]") == 1:
            # one view: the model is scikit-learn's single-array estimator, which refuses 1-D X
            raise ValueError(
                "views[0] must be a 2-D array (one view: 1-D input is ambiguous), got shape "
                f"{np.shape(views[0])}; Reshape your data either using array.reshape(-1, 1) if it "
                "has a single feature or array.reshape(1, -1) if it contains a single sample")
        out: list[NDArray[np.float64] | None] = []
        for v, X in enumerate(views):
            if X is None:
                if not allow_missing:
                    raise ValueError(f"views[{v}] is None: every view is needed here")
                out.append(None)
            else:
                out.append(_as_2d(X, f"views[{v}]"))
        sizes = {v: X.shape[0] for v, X in enumerate(out) if X is not None}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"all views must have the same number of samples, got {sizes}")
        return out

    def _view_maps(self, n_views: int) -> list[tuple[str, Any]]:
        """Per view: ("map", unfitted transformer) or ("kernel", Kernel)."""
        def check_len(seq: Any, name: str) -> list[Any]:
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
                raise ValueError(f"{name} must be a list with one entry per view")
            if len(seq) != n_views:
                raise ValueError(f"{name} has {len(seq)} entries but there are {n_views} views")
            return list(seq)

        if self.feature_maps is not None:
            maps = check_len(self.feature_maps, "feature_maps")
            for v, m in enumerate(maps):
                if not (hasattr(m, "fit") and hasattr(m, "transform")):
                    raise ValueError(f"feature_maps[{v}] must be a transformer with fit and "
                                     f"transform, got {m!r}")
            return [("map", clone(m)) for m in maps]
        if self.kernels is None:
            return [("map", Identity()) for _ in range(n_views)]
        kernels = check_len(self.kernels, "kernels")
        out: list[tuple[str, Any]] = []
        for v, k in enumerate(kernels):
            if not isinstance(k, Kernel):
                raise ValueError(f"kernels[{v}] must be an mvkm kernel (e.g. mvkm.RBF(1.0)), got {k!r}")
            if type(k) is Linear:
                out.append(("map", Identity()))
            elif self.formulation == "primal":
                raise ValueError(
                    f"kernels[{v}] = {k!r} has no explicit feature map, so the primal "
                    "formulation cannot use it: use formulation='dual', or an explicit "
                    "approximation such as random Fourier features, "
                    "feature_maps=[mvkm.RandomFourierFeatures(...), ...] "
                    "(see choose_algorithm, the flowchart)")
            else:
                out.append(("kernel", k))
        return out

    def _streamed(self, Xs: Sequence[Any]) -> bool:
        """Whether the primal is fitted by the streamed reduction (batch_size, device, dtype, dask)."""
        if self.formulation == "dual" and not any(is_dask_array(X) for X in Xs if X is not None):
            return False
        return (self.batch_size is not None or self.device is not None or self.dtype != "float64"
                or any(is_dask_array(X) for X in Xs if X is not None))

    def _matrix_free(self, n: int, s: int) -> bool:
        """Whether the dual leaves its kernel matrices unstored (kernel_storage).

        Before anything n x n is allocated, the dense route's peak memory is
        estimated (:func:`mvkm._gram.dense_dual_bytes`: one triangle per kernel
        view, one for the sum with the Stiefel solver (the eigen-solver sums into a
        view's own), a full copy for LAPACK or the Stiefel solver) and
        compared with the available memory: ``"auto"`` then takes the
        matrix-free route, ``"dense"`` (or a Stiefel solver) stops with a
        ``MemoryError`` that gives the estimate and the ways out.
        """
        if self.kernel_storage == "none":
            return True
        can_stream = self.solver == "eig"
        kernels = [k for k in self._kernels if k is not None]
        # One kernel view above 4 GiB: the matrix-free route (a Nystrom-started block
        # iteration, matfree_top_eigh) beats building the matrix. With several views every
        # product recomputes every view's tiles: from one Nystrom start for the sum
        # (_sum_top_eigh) two RBF views at n = 30,000 took 16 kernel passes and 328 s, the
        # dense route 157 s in the same run (benchmarks/bench_views.py; a random start
        # took 36 passes and over 600 s). So several views stay dense while they fit.
        if self.kernel_storage == "auto" and can_stream and (
                self.device is not None
                or (8.0 * n * n > _DENSE_KERNEL_BYTES and self.n_views_ == 1)):
            return True
        dense_copy = (self.solver != "eig" or n <= _AUTO_DENSE_MAX_N
                      or s > _AUTO_DENSE_FRACTION * n)
        need = dense_dual_bytes(n, kernels, n_feature_views=self.n_views_ - len(kernels),
                                dense_copy=dense_copy, sum_in_place=self.solver == "eig")
        fits, avail = memory_verdict(need)
        if fits:
            return False
        if self.kernel_storage == "auto" and can_stream:
            return True
        raise MemoryError(
            f"the dense dual needs about {gib(need)} for its kernel matrices (n = {n}, "
            f"{self.n_views_} view(s)) but {gib(avail)} of memory is available: use "
            "kernel_storage='none' (the matrix-free route, O(n (d + s)) memory, solver='eig'), "
            "or formulation='primal' with explicit features (e.g. "
            "feature_maps=[mvkm.RandomFourierFeatures(...), ...])")

    def _check_fitted(self) -> None:
        if not hasattr(self, "H_"):
            raise NotFittedError("this MultiViewRKM is not fitted yet: call fit(views) first")

    # --------------------------------------------------------------------- fit
    @atomic_fit
    def fit(self, views: Sequence[ArrayLike], y: Any = None) -> "MultiViewRKM":
        """Train on the views (Algorithms 1-4 of the source).

        Parameters
        ----------
        views : list of array_like, each of shape (n, d_v)
            The training data, one array per view, same ``n``.
        y : ignored

        Returns
        -------
        self
        """
        self._check_params()
        reset_fitted(self)
        with limit_threads(check_n_jobs(self.n_jobs)):
            return self._fit(views)

    def _fit(self, views: Sequence[ArrayLike]) -> "MultiViewRKM":
        Xs = self._check_views(views)
        n = int(Xs[0].shape[0])  # type: ignore[union-attr]
        V = len(Xs)
        streamed = self._streamed(Xs)
        if streamed and self.formulation == "dual":
            raise ValueError("views given as dask arrays need formulation='primal' (a streamed "
                             "covariance of explicit features)")
        if n < 2:
            raise ValueError(f"views must have at least 2 rows (samples), got n_samples = {n}")
        specs = self._view_maps(V)
        self.n_views_ = V
        self.n_samples_ = n
        self.view_dims_ = [X.shape[1] for X in Xs]  # type: ignore[union-attr]
        self._kinds = [kind for kind, _ in specs]
        self._X_fit = [own_copy(X, g, self.copy_X) for X, g in zip(Xs, views)]
        self._maps: list[Any] = [None] * V
        self._kernels: list[Any] = [None] * V
        self._feature_means: list[Any] = [None] * V
        self._Phi_c: list[Any] = [None] * V
        self._kernel_means: list[Any] = [None] * V
        self._origin_values: list[Any] = [None] * V
        for v, (kind, obj) in enumerate(specs):
            if kind == "map" and streamed:
                self._maps[v] = fit_feature_map(obj, Xs[v])
            elif kind == "map":
                Phi = np.asarray(check_map_output(obj.fit(Xs[v]).transform(Xs[v]), n,
                                                  f"feature_maps[{v}].transform"), dtype=np.float64)
                mean = Phi.mean(axis=0)
                self._maps[v] = obj
                self._feature_means[v] = mean
                self._Phi_c[v] = Phi - mean
            else:
                self._kernels[v] = obj
        explicit = all(kind == "map" for kind in self._kinds)
        if streamed:
            # the top s eigenpairs only: Nystrom views reduced as raw kernel rows (one n m^2 pass)
            moments = feature_moments(Xs, self._maps, batch_size=self.batch_size, device=self.device,
                                      dtype=self.dtype, progress=self.progress, nystrom_raw=True)
            self._feature_means = moments.view_means()
            self.feature_dims_ = list(moments.dims)
        elif explicit:
            self.feature_dims_ = [P.shape[1] for P in self._Phi_c]
        s_max = n - 1 if self.formulation == "dual" else min(n - 1, sum(self.feature_dims_))
        what = ("n - 1: centred data have rank at most n - 1" if self.formulation == "dual"
                else "min(n - 1, feature dimension)")
        s = check_n_components(self.n_components, s_max, what=what)
        if streamed:
            self._fit_primal_streamed(s, moments.scatter, Xs)
        elif self.formulation == "primal":
            self._fit_primal(s)
        else:
            self._fit_dual(s, n)
        try:
            self.eigenvalues_ = _checked_gamma_spectrum(self.Gamma_)
        except ValueError as exc:
            self._explain_rank_error(exc)
            raise
        # At a stationary point Gamma = sum_v U_v^T U_v (eqs. (5)-(6)); then the latent
        # equation with missing views is solved from the given views' own terms (no
        # subtraction from Gamma). Not so with rescale=False (U^T U = I).
        residual = self.Gamma_ - sum(self._UtU, np.zeros_like(self.Gamma_))
        self._stationary = bool(np.linalg.norm(residual) <= 1e-6 * np.linalg.norm(self.Gamma_))
        return self

    def _explain_rank_error(self, exc: ValueError) -> None:
        """A rank error of a fit with a user's kernel: if that kernel is indefinite on its view,
        say so (with its most negative eigenvalue) instead. Runs on the error path only."""
        for v in range(self.n_views_):
            k = self._kernels[v]
            if self._kinds[v] != "kernel" or _is_mercer(k):
                continue
            T = kernel_triangle(k, self._X_fit[v])
            lo, hi = _extreme_eigenvalues(T)
            scale = max(float(np.abs(T.diagonal()).max()), np.finfo(float).tiny)
            if lo < -_PSD_RTOL * max(abs(hi), scale):
                raise _indefinite_kernel_error(T, v, k, "Gamma is singular because of it") from exc

    def fit_transform(self, views: Sequence[ArrayLike], y: Any = None) -> NDArray[np.float64]:
        """Fit on the views and return the latent variables of the training points.

        The same as ``fit(views).transform(views)`` (eq. (6) on the training
        points gives back :math:`H`), without the second pass.

        Parameters
        ----------
        views : list of array_like, each of shape (n, d_v)
        y : ignored

        Returns
        -------
        H : ndarray of shape (n, n_components)
            A copy of ``H_``.
        """
        return self.fit(views, y).H_.copy()

    def _solve(self, B: Any, s: int, *, size: int | None = None
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Top-s solution (A, Gamma) of max Tr(A^T B A) on St(., s), by eig or on the manifold.

        ``B`` is a symmetric matrix or, for the Stiefel solver only, a callable
        ``X -> B @ X`` of ``size`` rows.
        """
        if self.solver == "eig":
            lam, A = top_eigh(B, s, random_state=0 if self.random_state is None else self.random_state,
                              check_symmetric=False)
            return A, np.diag(lam)
        from .stiefel import maximize_trace  # torch is imported only for Stiefel training

        # max |B_ij| by two reductions, without an n x n temporary (np.abs(B) was one more
        # matrix at the route's peak)
        top = None if callable(B) else max(float(np.max(B)), -float(np.min(B)))
        if top is not None and not top < _STIEFEL_MAX_SCALE:
            raise ValueError(
                f"the {'kernel' if self.formulation == 'dual' else 'covariance'} matrix has entries "
                f"up to {top:.3g}, beyond {_STIEFEL_MAX_SCALE:.0e}: the Stiefel "
                "solver's squared norms would overflow float64; rescale the views (e.g. "
                "sklearn.preprocessing.StandardScaler) or use solver='eig'")
        A_prime, history = maximize_trace(
            B, s, method=self.stiefel_method, n=size, tol=self.tol, max_iter=self.max_iter,
            random_state=self.random_state, progress=bool(self.progress), return_history=True,
            rotate=False)
        BA = B(A_prime) if callable(B) else B @ A_prime
        Gamma_prime = A_prime.T @ BA
        Gamma_prime = 0.5 * (Gamma_prime + Gamma_prime.T)
        self.stiefel_history_ = history
        self.Gamma_prime_ = Gamma_prime
        self.components_prime_ = A_prime
        if self.rotate:
            A, lam = rotate_to_diagonal(A_prime, Gamma_prime)
            return A, np.diag(lam)
        return A_prime, Gamma_prime

    def _fit_primal(self, s: int) -> None:
        Phi = np.hstack(self._Phi_c)
        n, D = Phi.shape
        route = self.eig_method
        if route == "auto":
            route = "qr" if 2 * n <= D else "covariance"
        if self.solver == "stiefel" and route == "qr":
            # C = Phi^T Phi applied as two thin products, 4nDs flops instead of 2D^2 s
            U_tilde, Gamma = self._solve(lambda A: Phi.T @ (Phi @ A), s, size=D)
        elif route == "qr":
            # C = Phi^T Phi = Q (R R^T) Q^T with Phi^T = QR (Q: D x n): the eigenpairs of C
            # are (lam, Q w) for those (lam, w) of the n x n matrix R R^T, in O(n^2 D)
            Q, R = np.linalg.qr(Phi.T, mode="reduced")
            RRt = check_finite_result(R @ R.T, "the covariance of the features", "views")
            lam, W = top_eigh(RRt, s, check_symmetric=False,
                              random_state=0 if self.random_state is None else self.random_state)
            U_tilde, Gamma = flip_signs(Q @ W), np.diag(lam)
        else:
            C = check_finite_result(Phi.T @ Phi, "the covariance of the features", "views")
            U_tilde, Gamma = self._solve(C, s)                 # eq. (10)
        self._set_primal(U_tilde, Gamma)
        U = np.vstack(self.U_)
        self.H_ = np.linalg.solve(Gamma, (Phi @ U).T).T       # eq. (6), Gamma symmetric

    def _fit_primal_streamed(self, s: int, C: NDArray[np.float64], Xs: Sequence[Any]) -> None:
        """Algorithm 1 or 3 on the streamed covariance; H by a second pass (eq. (6))."""
        U_tilde, Gamma = self._solve(C, s)                    # eq. (10), C from the moments
        self._set_primal(U_tilde, Gamma)
        W = np.linalg.solve(Gamma, np.vstack(self.U_).T).T     # H = Phi_c U Gamma^{-1} = Phi_c W
        offset = np.concatenate(self._feature_means) @ W        # the features' mean, projected

        step = self.batch_size or int(Xs[0].shape[0])
        width = sum(raw_dims(self._maps, self.feature_dims_))        # m for a Nystrom view
        work = None if any(is_dask_array(X) for X in Xs) else np.empty(
            min(step, int(Xs[0].shape[0])) * width)                  # reused by every chunk

        Wr = fold_raw(raw_transforms(self._maps), self.feature_dims_, W)   # N_v W_v, once

        def latent(*chunks: Any) -> NDArray[np.float64]:
            return features_times(self._maps, chunks, Wr, out=work, folded=True) - offset

        H = map_rows(latent, Xs, batch_size=self.batch_size, n_out=s, progress=self.progress,
                     desc="latent variables")
        self.H_ = np.asarray(H.compute() if is_dask_array(H) else H)

    def _set_primal(self, U_tilde: NDArray[np.float64], Gamma: NDArray[np.float64]) -> None:
        """U = U~ Gamma^{1/2} (step 6 of Algorithm 1) split per view, and U_v^T U_v."""
        _checked_gamma_spectrum(Gamma)          # before Gamma^{-1} in H = Phi U Gamma^{-1}
        U = U_tilde @ psd_sqrt(Gamma) if self.rescale else U_tilde
        self.U_tilde_ = U_tilde
        self.Gamma_ = Gamma
        bounds = np.cumsum([0] + self.feature_dims_)
        self.U_ = [U[bounds[v]:bounds[v + 1]] for v in range(self.n_views_)]
        self._UtU = [Uv.T @ Uv for Uv in self.U_]

    def _fit_dual(self, s: int, n: int) -> None:
        """Algorithm 2 on K = sum_v K_v,c, stored compactly (:mod:`mvkm._gram`).

        Each kernel view's Gram matrix is built once, upper triangle only, and
        centred implicitly; the explicit views add Phi_c Phi_c^T by ``dsyrk``;
        the solver reads the triangle of the sum (one ``dsymv`` per Lanczos
        product), as :func:`mvkm.linalg.kernel_top_eigh` does. One triangle per
        kernel view: with the eigen-solver the sum is built in the triangle of the
        view with the largest centred trace, whose :math:`K_v H` then comes from the
        eigen-equation;
        the Stiefel solver, which needs every :math:`K_v H` from its product,
        sums into one more.
        """
        if self._matrix_free(n, s):
            return self._fit_dual_matrix_free(s, n)
        V = self.n_views_
        tris: list[Any] = [None] * V
        for v in range(V):
            if self._kinds[v] == "kernel":
                self._shift_polynomial(v)
                tris[v] = gram_of_view(lambda A, k=self._kernels[v]: kernel_triangle(k, A),
                                       self._X_fit[v], f"views[{v}]")
                self._kernel_means[v] = tris[v].row_means
                if not _is_mercer(self._kernels[v]):
                    _check_user_kernel(tris[v], v, self._kernels[v], np.random.default_rng(
                        0 if self.random_state is None else self.random_state))
        kernel_tris = [T for T in tris if T is not None]
        features = [P for P in self._Phi_c if P is not None]
        # With the eigen-solver, one kernel view's product K_v H comes from the eigen-equation
        # (below), so that view's triangle receives the sum in place: no new n x n array. It is
        # the view with the largest centred trace, whose K_v H the equation's error (the Lanczos
        # residual, relative to lambda_1) disturbs least.
        from_equation = self.solver == "eig" and bool(kernel_tris)
        if from_equation:
            big = max((v for v in range(V) if tris[v] is not None), key=lambda v: tris[v].trace())
            total = (upper_sum(kernel_tris, features, n=n, into=tris[big])
                     if len(kernel_tris) + len(features) > 1 else tris[big])
            tris[big] = None                                   # its array now holds the sum
        elif len(kernel_tris) == 1 and not features:
            total = kernel_tris[0]
        else:
            total = upper_sum(kernel_tris, features, n=n)
        if self.solver == "eig":
            lam, H = total.top_eigh(s, random_state=0 if self.random_state is None
                                    else self.random_state)
            Gamma = np.diag(lam)
        else:
            H, Gamma = self._solve(total.dense(), s)
        del total
        self.H_ = H
        self.Gamma_ = Gamma
        # Phi_v^T H (= U_v by eq. (5)) for the explicit views, K_v H for the kernel views
        # (eq. (16)): every prediction needs them
        self._PhiT_H: list[Any] = [P.T @ H if P is not None else None for P in self._Phi_c]
        KH = [tris[v].matmat(H) if tris[v] is not None
              else (P @ PtH if P is not None else None)
              for v, (P, PtH) in enumerate(zip(self._Phi_c, self._PhiT_H))]
        if from_equation:
            # sum_v K_v,c H = H Gamma (to the solver's tolerance): one n^2 s product fewer (with
            # one view, no product at all)
            KH[big] = H * lam - sum(KvH for v, KvH in enumerate(KH) if v != big and KvH is not None)
        self._UtU = [H.T @ KvH for KvH in KH]                  # U_v^T U_v = H^T K_v H
        self._KH = [KvH if self._kinds[v] == "kernel" else None for v, KvH in enumerate(KH)]

    def _fit_dual_matrix_free(self, s: int, n: int) -> None:
        """Algorithm 2 with K = sum_v K_v,c applied tile by tile, never stored."""
        from scipy.sparse.linalg import LinearOperator

        from .matfree import KernelOperator, _sum_top_eigh, matfree_top_eigh

        seed = 0 if self.random_state is None else self.random_state
        ops: list[Any] = []
        for v in range(self.n_views_):
            if self._kinds[v] == "map":
                P = self._Phi_c[v]
                ops.append(LinearOperator((n, n), dtype=np.float64, matmat=lambda Z, P=P: P @ (P.T @ Z),
                                          matvec=lambda z, P=P: P @ (P.T @ z)))
            else:
                op = KernelOperator(self._X_fit[v], self._kernels[v], center=True, device=self.device,
                                    progress=bool(self.progress))
                self._kernel_means[v] = op.row_means_
                ops.append(op)
        self._check_not_round_off(ops)
        if self.n_views_ == 1 and self._kinds[0] == "kernel":
            lam, H = matfree_top_eigh(self._X_fit[0], self._kernels[0], s, device=self.device,
                                      random_state=seed, progress=bool(self.progress))
        elif any(kind == "kernel" for kind in self._kinds):
            # one Nystrom start for the whole sum (a random start took several times as many
            # products, each recomputing every view's tiles)
            lam, H = _sum_top_eigh([op for op, kind in zip(ops, self._kinds) if kind == "kernel"],
                                   [P for P, kind in zip(self._Phi_c, self._kinds) if kind == "map"],
                                   s, random_state=seed, progress=bool(self.progress))
        else:
            total = LinearOperator((n, n), dtype=np.float64,
                                   matmat=lambda Z: sum(op.matmat(Z) for op in ops),
                                   matvec=lambda z: sum(op.matvec(z) for op in ops))
            lam, H = top_eigh(total, s, method="subspace", random_state=seed)
        self.H_ = H
        self.Gamma_ = np.diag(lam)
        KH = [np.asarray(op.matmat(H)) for op in ops]
        self._UtU = [H.T @ KvH for KvH in KH]
        self._KH = [KvH if self._kinds[v] == "kernel" else None for v, KvH in enumerate(KH)]
        self._PhiT_H = [P.T @ H if P is not None else None for P in self._Phi_c]

    def _shift_polynomial(self, v: int) -> None:
        """A polynomial kernel on a view far from the origin: fit with the kernel of the
        features moved by phi(m) (:func:`mvkm.kernels.centring_equivalent`), whose centred
        values are the same, computed without cancellation; the pre-images' uncentred
        values come back from k(x_i, m) and k(m, m) (``_predict``)."""
        given, X = self._kernels[v], self._X_fit[v]
        if type(given) is not Polynomial or not isinstance(X, np.ndarray):
            return
        shifted = centring_equivalent(given, X)
        self._kernels[v] = shifted
        self._origin_values[v] = _origin_kernel_values(given, shifted, X)

    def _check_not_round_off(self, ops: list[Any]) -> None:
        r"""A clear error when sum_v K_v,c is zero to round-off (matrix-free route).

        Its trace, the sum of its eigenvalues, is then below the round-off of one
        product, :math:`n \varepsilon \sum_v \max_i k_v(x_i, x_i)`: every kernel is constant
        on its view in float64 (an RBF width far above the spread of the data), and the
        eigensolver has nothing to find (ARPACK stopped with its error -9).
        """
        n = self.n_samples_
        trace, size = 0.0, 0.0
        for v, op in enumerate(ops):
            if self._kinds[v] == "kernel":
                trace += op.trace()
                size += float(np.abs(op._kdiag).max())
            else:
                P = self._Phi_c[v]
                trace += float(np.einsum("ij,ij->", P, P))
                size += float(np.einsum("ij,ij->i", P, P).max())
        floor = n * np.finfo(float).eps * size
        if not trace > floor:
            kernels = ", ".join(f"kernels[{v}] = {self._kernels[v]!r}" for v in range(self.n_views_)
                                if self._kinds[v] == "kernel")
            raise ValueError(
                f"views: the sum of the centred kernel matrices is zero to round-off (its trace "
                f"{trace:.3g} is below n eps sum_v max k_v(x, x) = {floor:.3g}): each kernel is "
                f"constant on its view in float64 ({kernels}), e.g. an RBF width far larger than "
                "the spread of the data, so there is no direction to find; use smaller widths "
                "or rescale the views")

    # --------------------------------------------------------------- inference
    def _projections(self, v: int, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """U_v^T phi_v(x) for each row x (m x s), with training-mean centring."""
        if self._kinds[v] == "map":
            phi_c = self._features(v, X)
            if self.formulation == "primal":
                return phi_c @ self.U_[v]
            return phi_c @ self._PhiT_H[v]                    # H^T k_v(x), k_v = Phi_c phi_c
        return self._centred_kernel(v, X) @ self.H_

    def _features(self, v: int, X: NDArray[np.float64]) -> NDArray[np.float64]:
        Phi = check_map_output(self._maps[v].transform(X), X.shape[0], f"feature_maps[{v}].transform",
                               width=self._feature_means[v].shape[0])
        return np.asarray(Phi, dtype=np.float64) - self._feature_means[v]

    def _training_feature_products(self, v: int, A: NDArray[np.float64],
                                   X: Any = None) -> NDArray[np.float64]:
        """``A @ Phi_v^T`` with the uncentred training features of view v (m x n).

        In memory when the fit kept the features; after a streamed fit they are
        recomputed from the training view (``X``, or the stored one) chunk by chunk.
        """
        if self._Phi_c[v] is not None:
            return A @ (self._Phi_c[v] + self._feature_means[v]).T
        X = self._X_fit[v] if X is None else X
        n = int(X.shape[0])
        out = np.empty((A.shape[0], n))
        maps, dims = [self._maps[v]], [self.feature_dims_[v]]
        width = raw_dims(maps, dims)[0]                             # m for a Nystrom map
        Ar = fold_raw(raw_transforms(maps), dims, A.T)              # N_v A^T, once
        step = self.batch_size or max(1, (32 << 20) // (8 * max(1, width)))
        work = np.empty(min(step, n) * width)                      # reused by every chunk
        for i0 in range(0, n, step):
            sl = slice(i0, min(n, i0 + step))
            out[:, sl] = features_times(maps, [X[sl]], Ar, out=work, folded=True).T
        return out

    def _centred_kernel(self, v: int, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Test kernel rows centred with the *training* means (as center_test_gram)."""
        return _center_test_rows(self._kernels[v](X, self._X_fit[v]), self._kernel_means[v])

    def transform(self, views: Sequence[ArrayLike | None]) -> NDArray[np.float64]:
        r"""Latent variables :math:`h` of new points.

        With every view given this is eq. (6),
        :math:`h = \Gamma^{-1} \sum_v U_v^\top \phi_v(x_v)` (dual:
        :math:`U_v^\top \phi_v(x_v) = H^\top k_v(x_v)`). Views passed as
        ``None`` are treated as missing and eliminated with eq. (7),
        :math:`\phi_v = U_v h`, which gives

        .. math::
            h = \Bigl(\Gamma - \sum_{v \in \mathcal M} U_v^\top U_v\Bigr)^{-1}
                \sum_{w \notin \mathcal M} U_w^\top \phi_w(x_w),

        with :math:`U_v^\top U_v = H^\top K_v H` in the dual (the common core
        of eqs. (15) and (16)). Test features and kernel vectors are centred
        with the training means.

        Parameters
        ----------
        views : list of array_like (m, d_v) or None
            At least one view must be given.

        Returns
        -------
        ndarray of shape (m, s)
        """
        Xs, M = self._transform_inputs(views)

        def latent(*chunks: Any) -> NDArray[np.float64]:
            rhs = np.sum([self._projections(v, np.asarray(X)) for v, X in enumerate(chunks)
                          if X is not None], axis=0)
            return np.linalg.solve(M, np.asarray(rhs).T).T

        return map_rows(latent, Xs, batch_size=self.batch_size, n_out=M.shape[0],
                        progress=self.progress, desc="transform")

    def _transform_inputs(self, views: Sequence[Any]) -> tuple[list[Any], NDArray[np.float64]]:
        """Checked views and the matrix M of the latent equation (with a warning if ill-posed)."""
        self._check_fitted()
        Xs = self._check_views(views, self.n_views_, allow_missing=True)
        given = [v for v, X in enumerate(Xs) if X is not None]
        if not given:
            raise ValueError("at least one view must be given (all are None)")
        present = {v: X for v, X in enumerate(Xs) if X is not None}
        for v, X in present.items():
            if X.shape[1] != self.view_dims_[v]:
                raise ValueError(f"views[{v}] has {X.shape[1]} columns, "
                                 f"expected {self.view_dims_[v]} as in fit")
        missing = [v for v in range(self.n_views_) if Xs[v] is None]
        if missing and self._stationary:
            # Gamma - sum over the missing views = sum over the given ones, computed from
            # their own terms: a given view that carries a small share of Gamma keeps its
            # digits (by subtraction: 4e-3 relative error at a share of 1e-6, 86 % at 1e-8)
            M = sum((self._UtU[v] for v in given), np.zeros_like(self.Gamma_))
        else:
            M = self.Gamma_ - sum((self._UtU[v] for v in missing), np.zeros_like(self.Gamma_))
            lost = np.finfo(float).eps * np.linalg.norm(self.Gamma_) / max(
                np.linalg.norm(M), np.finfo(float).tiny)
            if missing and lost > 1e-8:
                warnings.warn(
                    f"the given views {given} carry a share of {1 / lost * np.finfo(float).eps:.1e} "
                    "of Gamma, and this model is not at a stationary point (rescale=False), so "
                    "Gamma - sum of U_v^T U_v over the missing views is formed by subtraction: "
                    f"the latent equation keeps about {max(0.0, -np.log10(lost)):.0f} digits",
                    RuntimeWarning, stacklevel=3)
        cond = np.linalg.cond(M)
        if cond > 1e12:
            warnings.warn(
                f"the given views {given} cannot determine the {M.shape[0]} latent components: "
                f"Gamma - sum of U_v^T U_v over the missing views {missing} has condition number "
                f"{cond:.2g}, so the inferred h is ill-posed; use fewer components or give more views",
                RuntimeWarning, stacklevel=3)
        return Xs, M

    def predict(self, views: Sequence[ArrayLike | None], target: int) -> NDArray[np.float64]:
        r"""Infer view ``target`` of new points from the other views.

        The latent :math:`h` comes from :meth:`transform` with the target view
        missing; then eq. (15) (primal, :math:`\hat\phi_t = U_t h`) or eq. (16)
        (dual, :math:`\hat k_t = K_t H h`, centred), and a pre-image:

        * identity feature map / linear kernel: exact,
          :math:`\hat x_t = \hat\phi_t + \bar\phi_t` (dual:
          :math:`\hat\phi_t = \Phi_t^\top H h`);
        * any other map or kernel: the kernel smoother
          (:func:`mvkm.preimage.kernel_smoother`) on the predicted uncentred
          kernel values with the training points. For a kernel the predicted
          feature is :math:`\hat\phi_t = \bar\phi_t + \Phi_{t,c}^\top \alpha`
          with :math:`\alpha = H h`, whose uncentred kernel values are exactly
          :math:`(K_{t,c}\alpha)_j + r_j + \alpha^\top(r - g 1)` (:math:`r`:
          row means of the training Gram matrix, :math:`g`: its grand mean).

        Parameters
        ----------
        views : list of array_like (m, d_v) or None
            ``views[target]`` may be None (it is ignored either way).
        target : int
            Index of the view to infer.

        Returns
        -------
        ndarray of shape (m, d_target)
        """
        self._check_fitted()
        if isinstance(target, bool) or not isinstance(target, Integral) \
                or not 0 <= target < self.n_views_:
            raise ValueError(f"target must be a view index in [0, {self.n_views_ - 1}], got {target!r}")
        t = int(target)
        if not isinstance(views, (list, tuple)):
            raise ValueError("views must be a list of arrays (one n x d_v array per view), "
                             f"got {type(views).__name__}")
        views = list(views)
        if len(views) != self.n_views_:
            raise ValueError(f"expected {self.n_views_} views (as in fit), got {len(views)}")
        views[t] = None
        Xs = self._check_views(views, self.n_views_, allow_missing=True)
        if not (self.batch_size is not None or any(is_dask_array(X) for X in Xs if X is not None)):
            return self._predict(views, t)
        self._transform_inputs(Xs)                      # checked once, not per chunk
        X_t = None
        if not (self._kinds[t] == "map" and isinstance(self._maps[t], Identity)):
            X_t = np.asarray(self._X_fit[t])             # the pre-image's points, gathered once
        return map_rows(lambda *chunks: self._predict(list(chunks), t, X_t), Xs,
                        batch_size=self.batch_size, n_out=self.view_dims_[t],
                        progress=self.progress, desc="predict")

    def _predict(self, views: list[Any], t: int, X_t: Any = None) -> NDArray[np.float64]:
        """predict on views held in memory (one chunk of a streamed predict)."""
        h = np.asarray(self.transform(views))
        if self._kinds[t] == "map":
            if self.formulation == "primal":
                phi_c = h @ self.U_[t].T                         # eq. (15)
            else:
                phi_c = h @ self._PhiT_H[t].T                     # Phi_t^T H h
            if isinstance(self._maps[t], Identity):
                return phi_c + self._feature_means[t]
            k_hat = self._training_feature_products(t, phi_c + self._feature_means[t], X_t)
            return kernel_smoother(k_hat, np.asarray(self._X_fit[t]) if X_t is None else X_t)
        k_c = h @ self._KH[t].T                                    # eq. (16): K_t H h
        # phi_hat = mean + Phi_c^T alpha with alpha = H h: uncentre exactly
        alpha = h @ self.H_.T
        k_hat = uncenter_kernel_values(k_c, alpha, self._kernel_means[t])
        # the fit's kernel may be the given one with the features moved by phi(m)
        k_hat = _unshift_kernel_values(k_hat, alpha,
                                       (getattr(self, "_origin_values", None) or [None] * (t + 1))[t])
        return kernel_smoother(k_hat, self._X_fit[t])
