"""Boundary checks shared by every public function of :mod:`mvkm`.

Each helper raises a :class:`ValueError` (or :class:`TypeError`) whose message
names the argument, what was expected and what was received, so that a reader
who passes a wrong shape learns which argument to fix.
"""

from __future__ import annotations

import functools
import warnings
from numbers import Integral, Real
from typing import Any, Callable, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "as_array",
    "check_array",
    "check_not_sparse",
    "reset_fitted",
    "check_square",
    "check_symmetric",
    "check_sparse_symmetric",
    "max_asymmetry",
    "max_abs",
    "symmetric_scale",
    "SYMMETRY_RTOL",
    "check_positive",
    "check_n_components",
    "check_random_state",
    "check_same_n_features",
    "atomic_fit",
    "check_bool",
    "check_map_output",
    "check_dask_chunks",
    "data_then_kernel",
    "describe",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def _ragged_where(X: Any, name: str) -> str | None:
    """Where a nested sequence stops being rectangular, e.g. ``"X[1] has 2 entries where X[0]
    has 3"``; ``None`` if no such place is found (read only on the error path)."""
    if isinstance(X, (str, bytes)) or not hasattr(X, "__len__") or not hasattr(X, "__getitem__"):
        return None
    try:
        items = [X[i] for i in range(len(X))]
    except Exception:  # noqa: BLE001 - an exotic container: no detail
        return None

    def length(item: Any) -> int | None:
        if isinstance(item, (str, bytes)) or not hasattr(item, "__len__"):
            return None
        try:
            return len(item)
        except TypeError:                   # a 0-d numpy array
            return None

    lengths = [length(item) for item in items]
    for i, L in enumerate(lengths[1:], start=1):
        if L != lengths[0]:
            def what(L: int | None) -> str:
                return "a single value" if L is None else f"{L} entr{'y' if L == 1 else 'ies'}"
            return f"{name}[{i}] has {what(L)} where {name}[0] has {what(lengths[0])}"
    for i, item in enumerate(items):
        if lengths[i] is not None:
            found = _ragged_where(item, f"{name}[{i}]")
            if found is not None:
                return found
    return None


def as_array(X: Any, name: str = "X") -> Any:
    """``np.asarray(X)``, with a clear ``ValueError`` naming ``name`` for a ragged nested list.

    numpy's own error ("setting an array element with a sequence. The requested
    array has an inhomogeneous shape ...") names neither the argument nor the row;
    this one says which entry has another length than the first.
    """
    try:
        return np.asarray(X)
    except ValueError as exc:
        where = _ragged_where(X, name)
        detail = where if where is not None else str(exc)
        raise ValueError(f"{name} must be a rectangular array (every row of the same length), "
                         f"got a ragged {type(X).__name__}: {detail}") from exc


def check_array(
    X: ArrayLike,
    name: str = "X",
    *,
    ndim: int = 2,
    allow_nan: bool = False,
    dtype: Any = np.float64,
) -> NDArray[np.float64]:
    """Convert ``X`` to a float array of ``ndim`` dimensions and check it is finite.

    Parameters
    ----------
    X : array_like
        The input.
    name : str
        The argument's name, used in error messages.
    ndim : int, default=2
        The required number of dimensions.
    allow_nan : bool, default=False
        Whether NaN/inf entries are tolerated.
    dtype : numpy dtype, default=float64
        The dtype of the returned array.

    Returns
    -------
    ndarray
        ``X`` as a C-contiguous array of ``dtype``.

    Raises
    ------
    TypeError
        If ``X`` cannot be converted to a numeric array.
    ValueError
        If ``X`` is a ragged nested list, has the wrong number of dimensions, is
        empty, or holds NaN/inf.
    """
    if X is None:
        raise TypeError(f"{name} must be an array, got None")
    check_not_sparse(X, name)
    try:
        raw = as_array(X, name)   # a ragged list: a ValueError naming the entry
    except TypeError as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(X).__name__}") from exc
    if raw.dtype.kind in "USa" or (raw.dtype == object and any(
            isinstance(v, (str, bytes)) for v in raw.ravel())):
        raise TypeError(
            f"{name} must be a numeric array, got strings (dtype {raw.dtype}); convert "
            "them to numbers explicitly, e.g. X.astype(float)"
        )
    if np.iscomplexobj(raw) or (raw.dtype == object and any(
            isinstance(v, (complex, np.complexfloating)) for v in raw.ravel())):
        raise ValueError(f"{name} must be real-valued: Complex data not supported, got a complex array")
    try:
        arr = np.asarray(raw, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be a numeric array, got {type(X).__name__} of dtype {raw.dtype} ({exc})"
        ) from exc
    if arr.ndim != ndim:
        hint = ("; Reshape your data either using array.reshape(-1, 1) if it has a single "
                "feature or array.reshape(1, -1) if it contains a single sample"
                if ndim == 2 and arr.ndim == 1 else "")
        raise ValueError(
            f"{name} must be a {ndim}-D array, got an array of shape {arr.shape}{hint}"
        )
    if arr.size == 0:
        what = ""
        if arr.ndim == 2:
            what = (f": 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required."
                    if arr.shape[0] == 0 else
                    f": 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
        raise ValueError(f"{name} must be non-empty, got shape {arr.shape}{what}")
    # A sum is NaN/inf if any entry is (one cheap pass, no boolean n x n array);
    # only when the sum overflows do we look entry by entry.
    if not allow_nan and not np.isfinite(arr.sum()) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return np.ascontiguousarray(arr)


def check_not_sparse(X: Any, name: str = "X") -> None:
    """Raise the package's one error for a scipy sparse matrix where a dense array is needed."""
    import scipy.sparse as sp

    if sp.issparse(X):
        raise TypeError(
            f"{name}: sparse input is not supported (got {type(X).__name__}); pass a dense "
            "array, e.g. X.toarray()"
        )


def reset_fitted(estimator: Any) -> None:
    """Delete the fitted attributes (names ending in ``_``) of ``estimator``.

    Called first by every ``fit``: a refit with other parameters (another
    formulation or solver) must not leave attributes of the previous fit behind.
    Parameters (set in ``__init__``) never end in ``_`` and are kept.
    """
    for attr in [a for a in vars(estimator) if a.endswith("_") and not a.startswith("__")]:
        delattr(estimator, attr)


#: Relative asymmetry, max|K - K^T| / max|K|, tolerated in a "symmetric" matrix.
SYMMETRY_RTOL = 1e-8


def check_square(K: ArrayLike, name: str = "K", *, allow_nan: bool = False) -> NDArray[np.float64]:
    """Check that ``K`` is a (finite, unless ``allow_nan``) square matrix and return it as float64."""
    K = check_array(K, name, allow_nan=allow_nan)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    return K


def max_asymmetry(K: NDArray[np.float64], tile: int = 256) -> float:
    """``max|K_ij - K_ji|`` over ``tile x tile`` blocks of the upper triangle.

    Each block is compared with its mirror through a small buffer, so the matrix
    is read once and no ``n x n`` temporary is made (``np.abs(K - K.T)`` would
    allocate two); rows of blocks run on several threads for large ``n``. A NaN
    entry makes the result NaN, an infinite one inf or NaN.
    """
    from ._parallel import run_parallel

    n = K.shape[0]

    def row_of_tiles(i0: int) -> float:
        i1 = min(n, i0 + tile)
        buf = np.empty((i1 - i0, min(tile, n)))
        asym = 0.0
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, reported below
            for j0 in range(i0, n, tile):
                j1 = min(n, j0 + tile)
                out = buf[:, : j1 - j0]
                np.subtract(K[i0:i1, j0:j1], K[j0:j1, i0:i1].T, out=out)
                hi, lo = float(out.max()), float(out.min())
                if not (np.isfinite(hi) and np.isfinite(lo)):
                    return np.nan if np.isnan(hi) or np.isnan(lo) else np.inf
                asym = max(asym, hi, -lo)
        return asym

    parts = run_parallel(row_of_tiles, range(0, n, tile), n)
    if any(np.isnan(p) for p in parts):
        return np.nan
    return max(parts, default=0.0)


def _symmetry_error(name: str, asym: float, scale: float, rtol: float) -> ValueError:
    return ValueError(
        f"{name} must be symmetric; max |{name} - {name}^T| = {asym:.3g} "
        f"exceeds {rtol:g} * max|{name}| = {rtol * scale:.3g}"
    )


def max_abs(K: NDArray[np.float64]) -> float:
    """``max|K_ij|`` in two reductions, without the temporary of ``np.abs(K)``."""
    return max(float(K.max()), -float(K.min()))


def symmetric_scale(K: NDArray[np.float64], name: str = "K", *,
                    rtol: float = SYMMETRY_RTOL) -> float:
    """Check a square float array for NaN/inf and symmetry; return its scale.

    One tiled read (:func:`max_asymmetry`) settles both: any NaN or infinite
    entry makes the asymmetry non-finite. The scale is ``max|K_ii|`` when that
    already settles the test (it equals ``max|K_ij|`` for a PSD matrix), else
    ``max|K_ij|``. Raises a ``ValueError`` naming ``name`` otherwise.
    """
    asym = max_asymmetry(K)
    diag = float(np.max(np.abs(np.diagonal(K))))
    if not (np.isfinite(asym) and np.isfinite(diag)) and not np.all(np.isfinite(K)):
        raise ValueError(f"{name} contains NaN or infinite values")
    scale = diag
    if not asym <= rtol * scale or scale == 0.0:
        scale = max_abs(K)
    if not asym <= rtol * max(scale, np.finfo(float).tiny):
        raise _symmetry_error(name, asym, scale, rtol)
    return scale


def check_symmetric(
    K: ArrayLike, name: str = "K", *, rtol: float = SYMMETRY_RTOL
) -> NDArray[np.float64]:
    """Check that ``K`` is square, finite and symmetric up to ``rtol`` (relative, max norm).

    The comparison runs tile by tile (:func:`max_asymmetry`): no ``n x n``
    temporary, one read of the matrix, which also finds NaN and inf.
    """
    K = check_square(K, name, allow_nan=True)
    symmetric_scale(K, name, rtol=rtol)
    return K


def check_sparse_symmetric(K: Any, name: str = "K", *, rtol: float = SYMMETRY_RTOL) -> Any:
    """Check a scipy sparse matrix: square, finite, symmetric; return it as CSR float64."""
    import scipy.sparse as sp

    K = sp.csr_array(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    if not np.all(np.isfinite(K.data)):
        raise ValueError(f"{name} contains NaN or infinite values")
    scale = float(abs(K).max()) if K.nnz else 0.0
    asym = float(abs(K - K.T).max()) if K.nnz else 0.0
    if asym > rtol * max(scale, np.finfo(float).tiny):
        raise _symmetry_error(name, asym, scale, rtol)
    return K


def check_positive(value: Any, name: str, *, strict: bool = True) -> float:
    """Check that ``value`` is a finite real number > 0 (or >= 0 if not strict)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (strict and value == 0):
        bound = "> 0" if strict else ">= 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return value


def check_count(value: Any, name: str) -> int:
    """Check that ``value`` is an integer >= 1 (not a bool) and return it as an ``int``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_n_components(n_components: Any, upper: int, name: str = "n_components",
                       *, what: str = "the matrix size") -> int:
    """Check ``1 <= n_components <= upper`` and return it as an ``int``."""
    if isinstance(n_components, bool) or not isinstance(n_components, Integral):
        raise TypeError(f"{name} must be an integer, got {n_components!r}")
    n_components = int(n_components)
    if not 1 <= n_components <= upper:
        raise ValueError(
            f"{name} must be between 1 and {upper} ({what}), got {n_components}"
        )
    return n_components


def check_random_state(random_state: Any) -> np.random.Generator:
    """Turn ``None``, an int or a Generator into a :class:`numpy.random.Generator`."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, (Integral, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be None, an int >= 0 or a numpy Generator, "
                             f"got {random_state!r}")
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        "random_state must be None, an int or a numpy Generator, "
        f"got {type(random_state).__name__}"
    )


def check_same_n_features(X: NDArray[Any], Y: NDArray[Any],
                          names: tuple[str, str] = ("X", "Y")) -> None:
    """Check that ``X`` and ``Y`` have the same number of columns."""
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same number of features, "
            f"got {X.shape[1]} and {Y.shape[1]}"
        )


def atomic_fit(fit: _F) -> _F:
    """Make an estimator's ``fit`` atomic: on any exception it leaves the estimator unfitted.

    The fitted attributes (names ending in ``_``) appear only when ``fit``
    returns. If ``fit`` raises (bad input, a rank check, an interrupt), every
    attribute that ``fit`` set is removed and the estimator keeps only its
    parameters (and scikit-learn's output configuration, ``set_output``) as
    they were before the call: a refit that fails does not restore the previous
    model, whose parameters may no longer be the estimator's, nor leave a mix
    of old and new state. ``check_is_fitted`` then raises.
    """
    @functools.wraps(fit)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        snapshot = dict(vars(self))
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            params = set(type(self)._get_param_names())
            state = vars(self)
            state.clear()
            state.update({k: v for k, v in snapshot.items()
                          if k in params or k.startswith("_sklearn")})
            raise

    return wrapper  # type: ignore[return-value]


def check_bool(value: Any, name: str, *, allow_none: bool = False) -> bool | None:
    """Check that ``value`` is a bool (``True``/``False``, numpy's included) and return it.

    A string such as ``"no"`` is truthy and would silently mean ``True``; the
    one message of the package for every boolean parameter says so.
    """
    if allow_none and value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    what = "True, False or None" if allow_none else "True or False"
    raise TypeError(f"{name} must be a bool ({what}), got {value!r} of type {type(value).__name__}")


def check_map_output(Phi: Any, n: int, name: str, width: int | None = None) -> Any:
    """Check what a feature map returned: a 2-D array of ``n`` rows (and ``width`` columns).

    ``name`` names the map's call (e.g. ``"feature_maps[0].transform(views[0])"``).
    A map that drops rows or changes its width between chunks would otherwise
    give a silently wrong mean or a numpy broadcast error far from its cause.
    """
    shape = getattr(Phi, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"{name} must return a 2-D array of {n} rows, got "
                         f"{type(Phi).__name__} of shape {shape}")
    if int(shape[0]) != n:
        raise ValueError(f"{name} must return one row per input row ({n}), got shape "
                         f"{tuple(shape)}")
    if width is not None and int(shape[1]) != width:
        raise ValueError(f"{name} returned {int(shape[1])} columns where an earlier chunk had "
                         f"{width}: a feature map must have a fixed output width")
    return Phi


def check_dask_chunks(X: Any, name: str = "X") -> None:
    """Raise a clear error for a dask array whose chunk sizes are unknown (NaN)."""
    shape = getattr(X, "shape", ())
    if any(isinstance(d, float) and not np.isfinite(d) for d in shape):
        raise ValueError(
            f"{name} is a dask array with unknown chunk sizes (shape {shape}), e.g. after "
            f"boolean indexing; call {name}.compute_chunk_sizes() first")


def check_torch_device(device: Any, name: str = "device") -> Any:
    """A ``torch.device`` from a string or device, checked to be usable on this machine.

    Every device type gets the same clear ``ValueError`` naming ``name``: an
    unknown string, a CUDA device without a GPU (or with a too-large index),
    and any other backend (``"mps"``, ``"xpu"``, ``"vulkan"``, ...) that torch
    cannot allocate on here. ``"meta"`` holds no data and is refused. Raises
    ``ImportError`` (``pip install "mvkm[torch]"``) where torch is not installed.
    """
    from ._optional import require_torch

    torch = require_torch(f"{name}={device!r}")

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a torch device such as 'cpu' or 'cuda', "
                         f"got {device!r}") from exc
    if dev.type == "cpu":
        return dev
    if dev.type == "meta":
        raise ValueError(f"{name}={device!r} holds no data (shapes only); use 'cpu' or 'cuda'")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name}={device!r} was asked for, but torch sees no CUDA GPU here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"{name}={device!r} was asked for, but torch sees only "
                             f"{torch.cuda.device_count()} CUDA GPU(s) here")
        return dev
    try:
        torch.zeros(1, device=dev).cpu()
    except Exception as exc:  # noqa: BLE001 - each backend raises its own type
        raise ValueError(f"{name}={device!r} was asked for, but torch cannot use a "
                         f"{dev.type!r} device here ({type(exc).__name__}); use 'cpu' or "
                         "'cuda'") from exc
    return dev


def check_views_and_maps(views: Any, maps: Any) -> None:
    """Check each view of a streamed reduction (2-D or 1-D, known chunk sizes) and each map.

    ``None`` views, 3-D views, dask arrays of unknown chunk sizes and maps
    without ``transform`` each get an error naming ``views[v]`` or
    ``feature_maps[v]`` (not an ``AttributeError`` or a shape mismatch later).
    """
    for v, (X, fm) in enumerate(zip(views, maps)):
        if X is None:
            raise TypeError(f"views[{v}] is None: every view is needed here")
        check_dask_chunks(X, f"views[{v}]")
        ndim = getattr(X, "ndim", None)
        if ndim is None:
            ndim = as_array(X, f"views[{v}]").ndim
        if ndim not in (1, 2):
            raise ValueError(f"views[{v}] must be a 1-D or 2-D array, got shape "
                             f"{getattr(X, 'shape', np.shape(X))}")
        if not callable(getattr(fm, "transform", None)):
            raise TypeError(f"feature_maps[{v}] must be a fitted feature map with a transform "
                            f"method, got {type(fm).__name__}")


def check_finite_result(A: Any, what: str, inputs: str) -> Any:
    """Raise a clear error when a quantity computed from the inputs is not finite.

    ``what`` names the quantity (e.g. ``"the cross-covariance of the features"``),
    ``inputs`` the argument it comes from (``"views"``). Finite inputs whose
    products overflow float64 (entries near 1e155 and beyond) are the usual
    cause; the message says to rescale them instead of a LAPACK error later.
    """
    arr = np.asarray(A)
    if not np.isfinite(arr.sum()) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} is not finite (an entry overflowed float64 or is NaN): "
                         f"the values of {inputs} are too large for this computation, or a "
                         f"map or kernel returned NaN; rescale {inputs} (e.g. "
                         "sklearn.preprocessing.StandardScaler)")
    return A


def gram_of_view(kernel: Any, X: Any, name: str) -> Any:
    """``kernel(X)``, its errors (a Gram matrix that overflowed, ...) prefixed with the view's name."""
    try:
        return kernel(X)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc


def own_copy(stored: Any, given: Any, copy: bool) -> Any:
    """``stored`` (a validated form of the caller's ``given``), copied if the two share memory.

    A fitted model keeps its training data; with ``copy=True`` (the estimators'
    ``copy_X``) an edit of the caller's array afterwards cannot change it.
    Validation already made a new array where it converted or reordered the
    input, so only an array that is the caller's own memory is copied.
    Memory-mapped and dask arrays are kept as they are: they are passed to
    avoid loading the data, and a streamed fit reads them chunk by chunk.
    """
    if not copy or not isinstance(stored, np.ndarray) or isinstance(stored, np.memmap):
        return stored
    if isinstance(given, np.ndarray) and np.may_share_memory(stored, given):
        return stored.copy()
    return stored


def describe(value: Any) -> str:
    """A short description of a received value for an error message: an array by its type and
    shape (its repr would print every entry), anything else by a repr cut at 80 characters."""
    shape = getattr(value, "shape", None)
    if shape is not None and not callable(value):
        return f"{type(value).__name__} of shape {tuple(shape)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def data_then_kernel(X: Any, kernel: Any, func: str) -> tuple[Any, Any]:
    """``(X, kernel)`` for a function that takes the data first, ``func(X, kernel, n_components)``.

    ``kernel_top_eigh`` used to take ``(kernel, X, n_components)``, the opposite order of
    ``matfree_top_eigh`` and ``KernelOperator``. A call in that order, a
    :class:`mvkm.kernels.Kernel` where ``X`` is expected and something that is not one where
    the kernel is, still works: the two are swapped back, with a ``FutureWarning`` that names
    the new order. ``func`` names the function in the warning; the warning points to the
    caller of that function.
    """
    from .kernels import Kernel

    if isinstance(X, Kernel) and not isinstance(kernel, Kernel):
        warnings.warn(
            f"{func}(kernel, X, n_components) is deprecated: the data come first, as in "
            f"{func}(X, kernel, n_components); the old order will raise an error in a "
            "future version", FutureWarning, stacklevel=3)
        return kernel, X
    return X, kernel
