r"""The one streamed reduction every primal model needs: means and scatter of stacked features.

With explicit feature maps :math:`\phi_v` (identity, random Fourier features,
Nystrom) every primal model of the book needs only two sums over the points:
the means :math:`\bar\phi_v` and the scatter (the uncentred-by-:math:`1/n`
covariance) of the stacked centred features
:math:`\phi(x_i) = [\phi_1(x_{1,i}); \dots; \phi_V(x_{V,i})] \in \mathbb R^D`,

.. math::
    S = \sum_{i=1}^n (\phi(x_i) - \bar\phi)(\phi(x_i) - \bar\phi)^\top
      = \Phi_c^\top \Phi_c ,

whose diagonal blocks :math:`\Phi_{v,c}^\top \Phi_{v,c}` and off-diagonal
blocks :math:`\Phi_{u,c}^\top \Phi_{v,c}` are the covariance of Part I's
multi-view RKM (eq. (10) of :cite:`achten2023duality`), Part II's primal
kernel PCA and Part III's primal kernel PLS. :func:`feature_moments` computes
them without ever holding the :math:`n \times D` feature matrix: the views
are read ``batch_size`` rows at a time, the features of one chunk are
computed, and the chunk's moments are merged into the running ones with the
pairwise update of Chan, Golub and LeVeque (1979),

.. math::
    n = n_a + n_b,\quad
    \bar\phi = \bar\phi_a + \tfrac{n_b}{n}\,\delta,\quad
    S = S_a + S_b + \tfrac{n_a n_b}{n}\,\delta\delta^\top,\qquad
    \delta = \bar\phi_b - \bar\phi_a ,

where each chunk's :math:`S_b` is computed from features centred on the
chunk's own mean, so no large sum of squares is ever cancelled against a
large squared mean (the textbook :math:`\sum\phi\phi^\top - n\bar\phi\bar\phi^\top`
loses every digit once the mean dominates the spread). Peak memory is
:math:`O(D^2 + \text{batch\_size}\cdot D)`.

The same reduction runs

* in numpy (``device=None``): each chunk's :math:`S_b` is one BLAS ``syrk``
  (half the flops of a general product), accumulated in place;
* in torch on any device (``device="cpu"``, ``"cuda"``, ...): the chunk is
  moved to the device and, for :class:`~mvkm.features.Identity` and
  :class:`~mvkm.features.RandomFourierFeatures`, its features are computed
  there; other maps run in numpy and their output is moved;
* on a Dask scheduler, when the views are ``dask.array.Array``: one partial
  :class:`FeatureMoments` per block of rows, combined pairwise by a tree
  reduction (the same merge), computed on the active scheduler (a
  ``dask.distributed`` client if one is connected); only the :math:`D \times D`
  result comes back.

``dtype="float32"`` computes features and each chunk's product in single
precision and merges chunks in double precision; before the cast a float64
shift, the first chunk's mean, is subtracted (``float32_shifts``), so a
large mean of the data costs no digits: about twice as fast on a
CPU (more on most GPUs); each entry of :math:`S` then carries a relative
error of order :math:`\sqrt{b}\,\epsilon_{32} \approx 10^{-6}`–:math:`10^{-5}`
(``b`` the batch size, :math:`\epsilon_{32} = 6\times10^{-8}`), and so do the
leading eigenvalues. The default is float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import blas as _blas

from ._optional import optional_torch, require_torch
from ._progress import _BarAfterFirstChunk, progress_bar  # noqa: F401 - re-exported
from ._validation import check_array
from ._validation import (check_bool, check_map_output, check_torch_device,
                          check_views_and_maps)

__all__ = ["FeatureMoments", "chunk_features", "feature_moments", "features_times", "fit_feature_map",
           "is_dask_array", "view_scales", "column_scales",
           "check_batch_size", "check_stream_params",
           "check_device", "iter_row_chunks", "map_rows", "progress_bar"]

Array = NDArray[np.float64]

#: Rows per chunk when a streamed fit is asked for without a batch size:
#: chunks of about 64 MiB of float64 features.
_DEFAULT_CHUNK_BYTES = 64 << 20

_DTYPES = ("float64", "float32")


def is_dask_array(X: Any) -> bool:
    """Whether ``X`` is a ``dask.array.Array`` (without importing dask)."""
    return type(X).__module__.startswith("dask.array") and hasattr(X, "chunks")


def check_batch_size(batch_size: Any, name: str = "batch_size") -> int | None:
    """``None`` or a positive integer; a clear ``ValueError`` otherwise."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"{name} must be None or a positive integer, got {batch_size!r}")
    return int(batch_size)


def _check_dtype(dtype: Any) -> str:
    name = getattr(dtype, "__name__", None) or str(dtype)
    name = name.replace("torch.", "").replace("numpy.", "")
    if name not in _DTYPES:
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return name


def check_stream_params(formulation: str, batch_size: Any, device: Any, dtype: Any, *,
                        dual_device: bool) -> None:
    """The estimators' checks of ``batch_size``, ``device`` and ``dtype`` (clear errors).

    They stream the primal; in the dual they are an error, except ``device``
    where the dual can use it (``dual_device``: the tiles of the matrix-free dual).
    """
    check_batch_size(batch_size)
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    if formulation == "dual" and (batch_size is not None or dtype != "float64"
                                  or (device is not None and not dual_device)):
        hint = (" (the dual's kernel matrices can be left unstored with kernel_storage='none')"
                if dual_device else "")
        raise ValueError(
            "batch_size, dtype and device stream the primal formulation (the scatter of "
            f"explicit features); got formulation='dual' with batch_size={batch_size!r}, "
            f"dtype={dtype!r}, device={device!r}{hint}")
    if device is not None:
        check_device(device)


def default_batch_size(n_features: int) -> int:
    """Rows per chunk so that one chunk of float64 features is about 64 MiB."""
    return max(256, _DEFAULT_CHUNK_BYTES // (8 * max(int(n_features), 1)))


def iter_row_chunks(n: int, batch_size: int) -> Iterator[slice]:
    """Consecutive row slices of at most ``batch_size`` rows covering ``range(n)``.

    ``n`` is an integer >= 0 and ``batch_size`` one >= 1, checked at the call
    (not at the first ``next``): a ``ValueError`` naming the argument otherwise.
    """
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 0:
        raise ValueError(f"n must be an integer >= 0 (a number of rows), got {n!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer (rows per chunk), got {batch_size!r}")
    n, step = int(n), int(batch_size)
    return (slice(i0, min(n, i0 + step)) for i0 in range(0, n, step))


@dataclass
class FeatureMoments:
    r"""Count, mean and scatter of stacked feature vectors; mergeable (Chan et al., 1979).

    Attributes
    ----------
    n_samples : int
        Number :math:`n` of points summed.
    mean : ndarray of shape (D,)
        :math:`\bar\phi`, the mean of the stacked features.
    scatter : ndarray of shape (D, D)
        :math:`S = \Phi_c^\top\Phi_c = \sum_i (\phi_i - \bar\phi)(\phi_i - \bar\phi)^\top`
        (symmetric; the covariance is :math:`S / n`).
    dims : list of int
        Feature dimension :math:`D_v` of each view (they sum to ``D``).
    max_sq_norm : float
        :math:`\max_i \|\phi_i\|^2` of the uncentred stacked features (the
        scale of round-off in rank decisions).
    """

    n_samples: int
    mean: Array
    scatter: Array
    dims: list[int] = field(default_factory=list)
    max_sq_norm: float = 0.0

    def merge(self, other: "FeatureMoments") -> "FeatureMoments":
        """The moments of the union of the two sets of points (a new object)."""
        if self.n_samples == 0:
            return other
        if other.n_samples == 0:
            return self
        n = self.n_samples + other.n_samples
        delta = other.mean - self.mean
        mean = self.mean + (other.n_samples / n) * delta
        scatter = self.scatter + other.scatter
        scatter += (self.n_samples * other.n_samples / n) * np.outer(delta, delta)
        return FeatureMoments(n, mean, scatter, list(self.dims or other.dims),
                              max(self.max_sq_norm, other.max_sq_norm))

    def view_means(self) -> list[Array]:
        """:math:`\\bar\\phi_v` for each view."""
        b = np.cumsum([0] + list(self.dims))
        return [self.mean[b[v]:b[v + 1]].copy() for v in range(len(self.dims))]

    def block(self, u: int, v: int) -> Array:
        r""":math:`\Phi_{u,c}^\top \Phi_{v,c}`, the (u, v) block of the scatter."""
        b = np.cumsum([0] + list(self.dims))
        return self.scatter[b[u]:b[u + 1], b[v]:b[v + 1]]


# ---------------------------------------------------------------- chunk features
def chunk_features(maps: Sequence[Any], chunks: Sequence[Any], dtype: str = "float64", *,
                   out: NDArray[Any] | None = None, scaled: bool = True,
                   shifts: Sequence["_Shift"] | None = None, raw: bool = False) -> NDArray[Any]:
    r"""The stacked features :math:`[\phi_1(X_1), \dots, \phi_V(X_V)]` of one chunk of rows.

    A ``b x D`` array in Fortran (column-major) order (float64, or float32
    with ``dtype="float32"``), written view by view into one buffer: each view's
    columns are then one contiguous block, which random Fourier features fill in
    place (``_rff_into``, no copy; equal to
    :meth:`~mvkm.features.RandomFourierFeatures.transform` up to round-off), and
    BLAS ``syrk`` reads the buffer without a copy. Other maps run their ``transform``.

    ``out`` is a workspace reused from chunk to chunk (a fresh buffer of 100 MB
    costs its page faults again at every chunk): a 1-d array of the right dtype
    with at least ``b * D`` entries, whose first ``b * D`` entries become the
    result (so a smaller last chunk reuses it too). Otherwise a new array is
    returned. ``scaled=False`` leaves out the
    constant factor :math:`\sqrt{2/D_v}` of random Fourier features (the
    caller applies :func:`view_scales` to the products instead: one pass over
    the chunk fewer).

    ``shifts`` (one ``_Shift`` per view, from ``float32_shifts``)
    subtract a float64 vector from each view before the cast to ``dtype``:
    from the features of identity and other maps, and from the inputs of random
    Fourier features (the phases absorb it, so the features are unchanged).

    ``raw=True`` writes, for a :class:`~mvkm.features.Nystrom` map, the raw
    kernel rows :math:`K(X, L)` (``b x m``) instead of its features
    :math:`K(X, L) N`: the caller applies :math:`N` to the reduced result
    (``raw_transforms``), which saves the ``b m r`` product per chunk.
    With a single such view whose kernel is an :class:`mvkm.kernels.Kernel`,
    the result is the kernel's own new column-major array, not a view of ``out``.
    """
    from .features import RandomFourierFeatures
    from .kernels import Kernel

    b = int(chunks[0].shape[0])
    shifts = list(shifts) if shifts is not None else [_Shift()] * len(maps)
    want = np.float32 if dtype == "float32" else np.float64
    Xs = [np.asarray(X) for X in chunks]
    dims = [fm.n_features_out_ if isinstance(fm, RandomFourierFeatures) else None for fm in maps]
    parts: list[Any] = [None if D else check_map_output(
                            np.asarray(_raw_rows(fm, X) if raw and _is_nystrom(fm) else fm.transform(X)),
                            b, f"feature_maps[{v}].transform")
                        for v, (fm, X, D) in enumerate(zip(maps, Xs, dims))]
    if (raw and len(maps) == 1 and _is_nystrom(maps[0]) and isinstance(maps[0]._kernel(), Kernel)
            and shifts[0].features is None and parts[0].dtype == want and parts[0].flags.f_contiguous):
        # the kernel rows' own fresh buffer (an mvkm Kernel returns a new array), already
        # column-major: no copy; a user's callable might return a cached array, which the
        # caller's in-place centring would change, so it is copied as before
        return parts[0]
    widths = [D if D else p.shape[1] for D, p in zip(dims, parts)]
    shape = (b, sum(widths))
    size = shape[0] * shape[1]
    if out is not None and out.ndim == 1 and out.dtype == want and out.size >= size:
        F = out[:size].reshape(shape, order="F")
    else:
        F = np.empty(shape, dtype=want, order="F")
    a = 0
    for fm, X, p, w, sh in zip(maps, Xs, parts, widths, shifts):
        if p is None:
            _rff_into(fm, X, F[:, a:a + w].T, scaled=scaled, shift=sh.inputs)
        elif sh.features is not None:     # in float64, then cast
            np.subtract(p, sh.features, out=F[:, a:a + w], casting="unsafe")
        else:
            F[:, a:a + w] = p
        a += w
    return F


def _is_nystrom(fm: Any) -> bool:
    from .features import Nystrom

    return isinstance(fm, Nystrom)


def _raw_rows(fm: Any, X: Any) -> Array:
    """A Nystrom map's raw kernel rows K(X, L) (its features are K(X, L) N), in Fortran order.

    Computed as the transpose of K(L, X): the chunk buffer of :func:`chunk_features` is
    column-major, and copying a C-ordered b x m block into it was a transposing copy that
    cost more than the kernel itself (44 ms against 29 ms per chunk of 4096 x 1500 rows,
    measured on two threads); the copy is now contiguous.
    """
    return np.asarray(fm._kernel()(fm.landmarks_, np.asarray(X, dtype=np.float64)),
                      dtype=np.float64).T


def raw_dims(maps: Sequence[Any], dims: Sequence[int]) -> list[int]:
    """The widths of ``chunk_features(..., raw=True)``: m for a Nystrom map, D_v otherwise."""
    return [int(fm.landmarks_.shape[0]) if _is_nystrom(fm) else int(d)
            for fm, d in zip(maps, dims)]


def raw_transforms(maps: Sequence[Any]) -> list[Array | None]:
    """Per view, the matrix N (m x r) that maps raw Nystrom rows to features; None otherwise."""
    return [fm.normalization_ if _is_nystrom(fm) else None for fm in maps]


def _block_transform(Ts: Sequence[Array | None], dims: Sequence[int],
                     dims_raw: Sequence[int]) -> Array:
    """The block-diagonal (D_raw x D) matrix with N_v (or the identity) on its diagonal."""
    T = np.zeros((int(sum(dims_raw)), int(sum(dims))))
    r0 = c0 = 0
    for Tv, d, dr in zip(Ts, dims, dims_raw):
        T[r0:r0 + dr, c0:c0 + d] = np.eye(d) if Tv is None else Tv
        r0, c0 = r0 + dr, c0 + d
    return T


def fold_raw(Ts: Sequence[Array | None], dims: Sequence[int], A: Array) -> Array:
    """``_block_transform(Ts, dims, ...) @ A``, view by view: rows ``N_v A_v`` for a Nystrom
    view, ``A_v`` otherwise (A: D x k, stacked by the views' widths ``dims``; ``Ts`` from
    :func:`raw_transforms`). The coefficients of raw rows for :func:`features_times`."""
    if A.shape[0] != int(sum(dims)):
        raise ValueError(f"A must have {int(sum(dims))} rows (the views' feature widths "
                         f"{list(map(int, dims))}), got {A.shape[0]}")
    parts, c0 = [], 0
    for Tv, d in zip(Ts, dims):
        Av = A[c0:c0 + int(d)]
        parts.append(Av if Tv is None else Tv @ Av)
        c0 += int(d)
    return np.vstack(parts)


@dataclass
class _Shift:
    """A float64 vector subtracted from one view before the cast to float32: from its
    features (``features``, length D_v) or, for random Fourier features, from its
    inputs (``inputs``, length d_v; the phases absorb it)."""

    features: Array | None = None
    inputs: Array | None = None


def float32_shifts(maps: Sequence[Any], chunks: Sequence[Any], raw: bool = False) -> list[_Shift]:
    r"""The shifts of a float32 reduction: the means of the first chunk, in float64.

    Features cast to float32 before they are centred lose every digit of their
    spread once their mean dominates it (the cast rounds to
    :math:`\epsilon_{32}\,|\bar\phi|`): identity features of ``1e8 + Z`` keep
    nothing of ``Z``. Subtracting, in float64, a vector close to the mean (the
    first chunk's) before the cast leaves float32 numbers of the size of the
    spread, so the documented :math:`\sqrt b\,\epsilon_{32}` bound holds for any
    mean. For random Fourier features the inputs are shifted by their first
    chunk's mean :math:`c` and the phases become
    :math:`b + \Omega^\top c \bmod 2\pi` (computed in float64): the same cosines,
    without a float32 phase of the size of :math:`\Omega^\top x`. The shift is
    added back to the mean; the scatter does not depend on it.
    """
    from .features import Identity, RandomFourierFeatures

    out = []
    for fm, X in zip(maps, chunks):
        X = np.asarray(X, dtype=np.float64)
        if isinstance(fm, RandomFourierFeatures):
            out.append(_Shift(inputs=X.mean(axis=0)))
        elif isinstance(fm, Identity):
            out.append(_Shift(features=X.mean(axis=0)))
        elif raw and _is_nystrom(fm):
            out.append(_Shift(features=_raw_rows(fm, X).mean(axis=0)))
        else:
            out.append(_Shift(features=np.asarray(fm.transform(X), dtype=np.float64).mean(axis=0)))
    return out


def _feature_shift(shifts: Sequence[_Shift], dims: Sequence[int]) -> Array:
    """The stacked feature shift (zeros for the views shifted at their inputs)."""
    return np.concatenate([sh.features if sh.features is not None else np.zeros(int(d))
                           for sh, d in zip(shifts, dims)])


def view_scales(maps: Sequence[Any]) -> list[float]:
    r"""The factor that ``chunk_features`` with ``scaled=False`` leaves out of each view's features.

    :math:`\sqrt{2/D_v}` for random Fourier features, 1 for every other map.
    """
    from .features import RandomFourierFeatures

    return [float(np.sqrt(2.0 / fm.n_features_out_)) if isinstance(fm, RandomFourierFeatures)
            else 1.0 for fm in maps]


def column_scales(maps: Sequence[Any], dims: Sequence[int]) -> Array:
    """:func:`view_scales` repeated over each view's ``D_v`` columns (a vector of length D)."""
    return np.repeat(np.asarray(view_scales(maps)), np.asarray(dims, dtype=int))


def features_times(maps: Sequence[Any], chunks: Sequence[Any], A: Array, *,
                   out: NDArray[Any] | None = None, folded: bool = False) -> Array:
    """``chunk_features(maps, chunks) @ A`` for one chunk of rows (b x k), in one pass.

    The features are computed unscaled into the workspace ``out`` (see
    :func:`chunk_features`) and the scale of random Fourier features is folded
    into the rows of ``A``; the product runs in torch, as the features do (one
    thread pool for the whole pass). Without torch, numpy's BLAS does it.
    ``folded=True``: ``A`` already has each Nystrom view's ``N_v`` folded into its rows
    (``fold_raw``), which a pass over many chunks with the same ``A`` does once.
    """
    dims = _feature_dims(maps, chunks)
    Ts = raw_transforms(maps)
    if folded:
        dims = raw_dims(maps, dims)
        if A.shape[0] != int(sum(dims)):
            raise ValueError(f"A (folded=True) must have {int(sum(dims))} rows (the raw widths "
                             f"{list(map(int, dims))}, from fold_raw), got {A.shape[0]}")
    elif any(T is not None for T in Ts):
        # Nystrom views: K(X, L) (N A_v), the m x k matrix N A_v (m r k) instead of the
        # features K(X, L) N (b m r per chunk); view by view, without the block-diagonal
        # matrix of _block_transform (a D_raw x D fill and copy per chunk)
        A = fold_raw(Ts, dims, A)
        dims = raw_dims(maps, dims)
    F = chunk_features(maps, chunks, out=out, scaled=False, raw=True)
    c = column_scales(maps, dims)
    AcT = np.ascontiguousarray((A * c[:, None]).T)
    torch = optional_torch()
    if torch is None:
        return (AcT @ F.T).T
    # (A^T F^T)^T: F^T is C-ordered, which torch's BLAS reads 3x faster than F (measured)
    return torch.mm(torch.from_numpy(AcT), torch.from_numpy(F).T).numpy().T


def _rff_into(fm: Any, X: Array, out_T: NDArray[Any], scaled: bool = True,
              shift: Array | None = None) -> None:
    r"""Write :math:`\sqrt{2/D}\cos(\Omega^\top x + b)` for the rows of ``X`` into ``out_T``.

    ``out_T`` is the (D x b) C-contiguous transpose of a column block of the
    chunk's buffer. One GEMM with the phases folded in
    (:math:`[\Omega; b]^\top [X, 1]^\top`), then torch's multi-threaded cosine
    in place (measured 4.4 ns per entry against numpy's 19 on 2 cores); both
    in torch, so that the pass does not switch between two thread pools
    (BLAS's threads spin for a while after each call and slow the next one of
    another pool). ``scaled=False`` leaves out :math:`\sqrt{2/D}`. ``shift``
    (float64, length d) is subtracted from ``X`` before the cast and added to
    the phases, :math:`b + \Omega^\top c \bmod 2\pi` (see :func:`float32_shifts`).
    Without torch, numpy does both (its single-threaded cosine, about 4x slower).
    """
    dt = out_T.dtype
    phases, Xa = _shifted_phases(fm, shift), np.empty((X.shape[0], X.shape[1] + 1), dtype=dt)
    W = np.vstack([fm.omega_, phases[None, :]]).astype(dt)
    if shift is None:
        Xa[:, :-1] = X
    else:
        np.subtract(X, shift, out=Xa[:, :-1], casting="unsafe")   # in float64, then cast
    Xa[:, -1] = 1.0
    torch = optional_torch()
    if torch is None:
        np.matmul(W.T, Xa.T, out=out_T)
        np.cos(out_T, out=out_T)
        if scaled:
            out_T *= dt.type(np.sqrt(2.0 / fm.n_features_out_))
        return
    T = torch.from_numpy(out_T)
    torch.mm(torch.from_numpy(W).T, torch.from_numpy(Xa).T, out=T)
    T.cos_()
    if scaled:
        T.mul_(float(np.sqrt(2.0 / fm.n_features_out_)))


def _shifted_phases(fm: Any, shift: Array | None) -> Array:
    """The phases of random Fourier features of inputs shifted by ``shift``: ``b + Omega^T c``
    reduced mod 2 pi, in float64 (``b`` itself when there is no shift)."""
    if shift is None:
        return fm.offset_
    return np.mod(fm.offset_ + shift @ fm.omega_, 2.0 * np.pi)


def _rff_torch(fm: Any, X: Array, device: Any, dtype: str, shift: Array | None = None) -> Any:
    """Random Fourier features :math:`\\sqrt{2/D}\\cos(X\\Omega + b)` computed by torch.

    torch's vectorised, multi-threaded cosine is several times faster than
    numpy's on the CPU (measured 4.4 ns against 19 ns per entry on 2 cores),
    and it runs on a GPU unchanged. Same formula as
    :meth:`mvkm.features.RandomFourierFeatures.transform`.
    """
    import torch

    tdt = torch.float32 if dtype == "float32" else torch.float64
    X = np.asarray(X) if shift is None else np.asarray(X, dtype=np.float64) - shift
    Xt = torch.as_tensor(X, device=device).to(tdt)
    omega = torch.as_tensor(fm.omega_, device=device).to(tdt)
    offset = torch.as_tensor(_shifted_phases(fm, shift), device=device).to(tdt)
    Z = torch.addmm(offset, Xt, omega)
    Z.cos_()
    Z.mul_(float(np.sqrt(2.0 / fm.n_features_out_)))
    return Z


def _features_torch(maps: Sequence[Any], chunks: Sequence[Array], device: Any, dtype: str,
                    shifts: Sequence[_Shift] | None = None) -> Any:
    """The stacked features of one chunk as a torch tensor on ``device`` (``shifts``
    subtracted in float64 before the cast, as in :func:`chunk_features`)."""
    import torch

    from .features import Identity, RandomFourierFeatures

    tdt = torch.float32 if dtype == "float32" else torch.float64
    shifts = list(shifts) if shifts is not None else [_Shift()] * len(maps)
    parts = []
    for fm, X, sh in zip(maps, chunks, shifts):
        if isinstance(fm, RandomFourierFeatures):
            parts.append(_rff_torch(fm, X, device, dtype, sh.inputs))
            continue
        P = np.asarray(X) if isinstance(fm, Identity) else check_map_output(
            np.asarray(fm.transform(X), dtype=np.float64), len(X), f"feature_maps[{len(parts)}].transform")
        if sh.features is not None:
            P = np.asarray(P, dtype=np.float64) - sh.features
        parts.append(torch.as_tensor(P, device=device).to(tdt))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _check_chunk(F: Any, i0: int) -> None:
    total = float(F.sum())
    if not np.isfinite(total):
        raise ValueError(
            f"the features of rows {i0}.. are not finite (NaN or inf): check the views "
            "and the feature maps")


# ---------------------------------------------------------------- accumulators
class _NumpyAccumulator:
    r"""Running moments in numpy: per chunk one ``syrk`` into the upper triangle.

    Chunks arrive with the features of random Fourier maps unscaled
    (``chunk_features(..., scaled=False)``); the per-view factors are applied
    once to the result (:math:`S \leftarrow \mathrm{diag}(c)\, S\, \mathrm{diag}(c)`,
    :math:`\bar\phi \leftarrow c \odot \bar\phi`), which is exact since
    the scatter and the mean are bilinear and linear in the columns. Chan's
    rank-one merge terms :math:`\tfrac{n_a n_b}{n}\delta\delta^\top` are kept
    as rows :math:`\sqrt{n_a n_b / n}\,\delta^\top` and added at the end by one
    ``syrk`` (the same sum, one product instead of a D x D update per chunk).
    """

    def __init__(self, maps: Sequence[Any], dims: Sequence[int], dtype: str,
                 shift: Array | None = None, out_dims: Sequence[int] | None = None) -> None:
        D = int(sum(dims))
        self.shift = shift                              # added back to the mean (float32 shifts)
        # raw Nystrom columns: K(X, L), mapped by N at the end (raw_transforms)
        self.Ts = raw_transforms(maps) if out_dims is not None else [None] * len(maps)
        self.out_dims = list(out_dims) if out_dims is not None else [int(d) for d in dims]
        self.norm_shift = None if shift is None else shift.copy()   # for the row norms
        if shift is not None:
            for T, lo, hi in zip(self.Ts, np.cumsum([0] + list(dims))[:-1], np.cumsum(dims)):
                if T is not None:
                    self.norm_shift[lo:hi] = 0.0
        self.n = 0
        self.mean = np.zeros(D)
        self.S = np.zeros((D, D), order="F")           # upper triangle in use
        self.maxsq = 0.0
        self.single = dtype == "float32"
        self.scale = view_scales(maps)                  # per view, for the row norms
        self.col = column_scales(maps, dims)            # per column, for the result
        self.bounds = np.cumsum([0] + [int(d) for d in dims])
        self.cross: list[Array] = []

    def add(self, F: NDArray[Any], i0: int, extra_sq: Array | None = None) -> None:
        """Add one chunk; ``extra_sq``: squared feature norms of the raw (Nystrom) views."""
        torch = optional_torch()
        b = F.shape[0]
        T = None if torch is None else torch.from_numpy(F)
        if self.single or T is None:
            # numpy's float64-accumulated column sums of a Fortran-ordered float32 block:
            # 5x faster than torch's (measured 0.017 s against 0.09 s for 8192 x 2001)
            mean_b = F.sum(axis=0, dtype=np.float64) / b
        else:
            mean_b = T.sum(dim=0, dtype=torch.float64).numpy() / b     # multi-threaded
        if not np.isfinite(mean_b).all():               # a NaN or inf anywhere reaches its column sum
            raise ValueError(
                f"the features of rows {i0}.. are not finite (NaN or inf): check the views "
                "and the feature maps")
        rowsq = np.zeros(b) if extra_sq is None else np.array(extra_sq, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):   # overflow: reported by result()
            for c, lo, hi, Nv in zip(self.scale, self.bounds[:-1], self.bounds[1:], self.Ts):
                if Nv is None:
                    Fv = F[:, lo:hi]
                    rowsq += (c * c) * np.einsum("ij,ij->i", Fv, Fv)
            if self.norm_shift is not None:  # |F_i + c|^2 (the shift is 0 on the scaled views)
                sh = self.norm_shift
                rowsq += 2.0 * (F @ sh.astype(F.dtype)) + float(sh @ sh)
        self.maxsq = max(self.maxsq, float(rowsq.max()))
        if torch is None:
            F -= mean_b.astype(F.dtype)
        else:
            T.sub_(torch.from_numpy(mean_b.astype(F.dtype)))   # F is chunk_features' own buffer
        if self.single:
            Sb = _blas.ssyrk(1.0, F, trans=1, lower=0)     # F^T F in float32
            self.S += Sb
        else:
            # F is Fortran-ordered: syrk reads it without a copy and adds F^T F in place
            self.S = _blas.dsyrk(1.0, F, beta=1.0, c=self.S, trans=1, lower=0, overwrite_c=1)
        self._merge_mean(mean_b, b)

    def _merge_mean(self, mean_b: Array, b: int) -> None:
        if self.n == 0:
            self.n, self.mean = b, mean_b
            return
        n = self.n + b
        delta = mean_b - self.mean
        self.cross.append(np.sqrt(self.n * b / n) * delta)   # Chan's term, added in result()
        self.mean = self.mean + (b / n) * delta
        self.n = n

    def result(self, dims: list[int]) -> FeatureMoments:
        S = self.S
        if self.cross:
            R = np.asfortranarray(np.array(self.cross))
            S = _blas.dsyrk(1.0, R, beta=1.0, c=S, trans=1, lower=0, overwrite_c=1)
        mean = self.mean if self.shift is None else self.mean + self.shift
        if np.any(self.col != 1.0):
            S *= self.col[:, None]
            S *= self.col[None, :]
            mean = mean * self.col
        _symmetrize_upper(S)
        if any(T is not None for T in self.Ts):
            # the scatter of K(X, L) N is N^T (scatter of K(X, L)) N: m^3 once, not b m r per chunk
            T = _block_transform(self.Ts, self.out_dims, list(np.diff(self.bounds)))
            S = np.asfortranarray(T.T @ (S @ T))
            S = 0.5 * (S + S.T)
            mean = T.T @ mean
        # S is symmetric and Fortran-ordered: its transpose is the C-ordered matrix, no copy
        return FeatureMoments(self.n, mean, np.ascontiguousarray(S.T), dims, self.maxsq)


def _symmetrize_upper(S: NDArray[Any], block: int = 256) -> None:
    """Copy the upper triangle of the square ``S`` onto its lower triangle, in place."""
    D = S.shape[0]
    for i0 in range(0, D, block):
        i1 = min(D, i0 + block)
        S[i1:, i0:i1] = S[i0:i1, i1:].T
        d = S[i0:i1, i0:i1]
        low = np.tril_indices(i1 - i0, -1)
        d[low] = d.T[low]


class _TorchAccumulator:
    """Running moments in torch on one device: per chunk ``S += F^T F`` (addmm)."""

    def __init__(self, D: int, device: Any, dtype: str, shift: Array | None = None) -> None:
        import torch

        self.torch = torch
        self.shift = None if shift is None else torch.as_tensor(shift, device=device)
        self.device = device
        self.n = 0
        self.mean = torch.zeros(D, dtype=torch.float64, device=device)
        self.S = torch.zeros((D, D), dtype=torch.float64, device=device)
        self.maxsq = 0.0
        self.single = dtype == "float32"

    def add(self, F: Any) -> None:
        torch = self.torch
        b = F.shape[0]
        Fu = F if self.shift is None else F.to(torch.float64) + self.shift   # uncentred
        self.maxsq = max(self.maxsq, float((Fu * Fu).sum(dim=1).max()))
        mean_b = F.to(torch.float64).mean(dim=0)
        F = F - mean_b.to(F.dtype)
        if self.single:
            self.S += (F.T @ F).to(torch.float64)
        else:
            self.S.addmm_(F.T, F)
        if self.n == 0:
            self.n, self.mean = b, mean_b
            return
        n = self.n + b
        delta = mean_b - self.mean
        self.S.add_(torch.outer(delta, delta), alpha=self.n * b / n)
        self.mean = self.mean + (b / n) * delta
        self.n = n

    def result(self, dims: list[int]) -> FeatureMoments:
        S = self.S.cpu().numpy()
        S = 0.5 * (S + S.T)
        mean = self.mean if self.shift is None else self.mean + self.shift
        return FeatureMoments(self.n, mean.cpu().numpy(), S, dims, self.maxsq)


# ---------------------------------------------------------------- the reduction
def _chunk_moments(maps: Sequence[Any], chunks: Sequence[Array], dims: list[int],
                   dtype: str, device: Any = None, batch_size: int | None = None) -> FeatureMoments:
    """The moments of one block of rows (one Dask block), itself streamed in batches."""
    out = feature_moments([np.asarray(c) for c in chunks], maps, batch_size=batch_size,
                          device=device, dtype=dtype, progress=False)
    out.dims = list(dims)
    return out


def _merge_all(*parts: FeatureMoments) -> FeatureMoments:
    out = parts[0]
    for p in parts[1:]:
        out = out.merge(p)
    return out


def _tree_reduce(items: list[Any], combine: Callable[..., Any], split_every: int = 4) -> Any:
    """Combine delayed partial results ``split_every`` at a time, level by level."""
    while len(items) > 1:
        items = [combine(*items[i:i + split_every]) if len(items[i:i + split_every]) > 1
                 else items[i] for i in range(0, len(items), split_every)]
    return items[0]


def aligned_blocks(views: Sequence[Any]) -> tuple[list[list[Any]], tuple[int, ...]]:
    """Views as lists of delayed row blocks with the first dask view's row chunks in every
    view (numpy views are wrapped); also the row count of each block."""
    import dask.array as da

    first = next(v for v in views if is_dask_array(v))
    rows = first.chunks[0]
    arrays = [(v if is_dask_array(v) else da.from_array(np.asarray(v), chunks=(rows, -1)))
              for v in views]
    arrays = [(a if a.ndim == 2 else a[:, None]).rechunk((rows, -1)) for a in arrays]
    return [list(a.to_delayed().ravel()) for a in arrays], tuple(int(r) for r in rows)


def feature_moments(views: Sequence[Any], maps: Sequence[Any], *, batch_size: int | None = None,
                    device: Any = None, dtype: str = "float64", progress: bool | None = None,
                    split_every: int = 4, nystrom_raw: bool = False) -> FeatureMoments:
    r"""Means and scatter :math:`\Phi_c^\top\Phi_c` of the stacked features, streamed.

    Parameters
    ----------
    views : list of array_like of shape (n, d_v), or of ``dask.array.Array``
        The views, same ``n``. numpy views are read ``batch_size`` rows at a
        time; dask views are reduced block by block on the active Dask
        scheduler (their row chunks are aligned to the first view's).
    maps : list of fitted feature maps
        One per view, each with ``transform`` (and ``n_features_out_``, or an
        output width found from the first chunk).
    batch_size : int, optional
        Rows per chunk. ``None``: chunks of about 64 MiB of features. Dask
        views are reduced block by block, each block in chunks of this size.
    device : str or torch.device, optional
        ``None``: numpy (BLAS ``syrk``). Otherwise a torch device such as
        ``"cpu"`` or ``"cuda"``: features (for the identity and random
        Fourier features) and products are computed there.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the features and of each chunk's product; chunks are
        always merged in float64 (module notes: accuracy of float32).
    progress : bool or None, default=None
        A tqdm bar over the rows; ``None`` shows it only if the reduction
        lasts over 5 seconds (see :func:`progress_bar`).
    split_every : int, default=4
        Fan-in of the Dask tree reduction, ``>= 2`` (checked also for numpy
        views, where it is not used).
    nystrom_raw : bool, default=False
        numpy, float64: reduce a :class:`~mvkm.features.Nystrom` view as its
        raw kernel rows :math:`K(X, L)` and map the result once,
        :math:`S = N^\top S_{\mathrm{raw}} N` (:math:`m^3`), instead of
        forming the features :math:`K(X, L)N` chunk by chunk (:math:`n m r`
        multiply-adds saved, the largest cost of the pass). The leading
        eigenvalues of :math:`S` are unchanged to round-off, but the entries
        along the smallest eigenvalues of :math:`K_{mm}` carry an error of
        order :math:`\epsilon\,\|S_{\mathrm{raw}}\|\,\|N\|^2` (about
        :math:`10^{-8}\|S\|`), so it is for models that use the top of the
        spectrum only (the streamed :class:`~mvkm.rkm.MultiViewRKM`), not for a
        full-spectrum rank or trace.

    Returns
    -------
    FeatureMoments
        ``n_samples``, ``mean`` (D,), ``scatter`` (D, D), ``dims``, ``max_sq_norm``.

    Raises
    ------
    ValueError
        On views of different lengths, a number of maps other than the number
        of views, a bad ``batch_size`` or ``dtype``, or non-finite features.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.features import Identity
    >>> from mvkm.covariance import feature_moments
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(1000, 3)), rng.normal(size=(1000, 2))
    >>> maps = [Identity().fit(X), Identity().fit(Y)]
    >>> m = feature_moments([X, Y], maps, batch_size=128)
    >>> Phi = np.hstack([X, Y]) - np.hstack([X, Y]).mean(axis=0)
    >>> bool(np.allclose(m.scatter, Phi.T @ Phi)), m.dims
    (True, [3, 2])
    """
    check_bool(progress, "progress", allow_none=True)
    if len(views) != len(maps):
        raise ValueError(f"got {len(views)} views but {len(maps)} feature maps")
    if len(views) == 0:
        raise ValueError("views is empty: give at least one view")
    dtype = _check_dtype(dtype)
    batch_size = check_batch_size(batch_size)
    if isinstance(split_every, bool) or not isinstance(split_every, Integral) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2 (the fan-in of the Dask tree "
                         f"reduction), got {split_every!r}")
    check_views_and_maps(views, maps)
    sizes = {v: len(X) for v, X in enumerate(views)}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"all views must have the same number of samples, got {sizes}")
    n = sizes[0]
    if device is not None:
        device = check_device(device)
    if any(is_dask_array(X) for X in views):
        return _dask_moments(views, maps, dtype=dtype, device=device, split_every=split_every,
                             batch_size=batch_size)
    Xs = [check_array(np.asarray(X)[:, None] if np.ndim(X) == 1 else X, f"views[{v}]")
          for v, X in enumerate(views)]
    dims = _feature_dims(maps, Xs)
    D = int(sum(dims))
    bs = batch_size or default_batch_size(D)
    # numpy: Nystrom views reduced as raw kernel rows K(X, L), N applied once at the end
    raw = (nystrom_raw and device is None and dtype == "float64"
           and any(_is_nystrom(fm) for fm in maps))
    wdims = raw_dims(maps, dims) if raw else dims
    # float32: subtract a float64 shift (the first chunk's means) before the cast
    shifts = float32_shifts(maps, [X[:bs] for X in Xs], raw) if dtype == "float32" else None
    shift = _feature_shift(shifts, wdims) if shifts is not None else None
    acc: Any = (_NumpyAccumulator(maps, wdims, dtype, shift, dims if raw else None)
                if device is None else _TorchAccumulator(D, device, dtype, shift))
    bar = progress_bar(n, "feature moments", progress)
    # one workspace for every chunk, the last (smaller) one included
    work = np.empty(min(bs, n) * int(sum(wdims)),
                    dtype=np.float32 if dtype == "float32" else np.float64)
    try:
        for sl in iter_row_chunks(n, bs):
            chunks = [X[sl] for X in Xs]
            if device is None:
                F = chunk_features(maps, chunks, dtype, out=work, scaled=False,
                                   shifts=shifts, raw=raw)
                check_map_output(F, sl.stop - sl.start, "feature_maps", width=int(sum(wdims)))
                acc.add(F, sl.start, _nystrom_sq_norms(maps, chunks) if raw else None)
            else:
                F = _features_torch(maps, chunks, device, dtype, shifts)
                check_map_output(F, sl.stop - sl.start, "feature_maps", width=D)
                _check_chunk(F, sl.start)
                acc.add(F)
            if bar is not None:
                bar.update(sl.stop - sl.start)
    finally:
        if bar is not None:
            bar.close()
    return _checked_result(acc.result(dims), dtype)


def _nystrom_sq_norms(maps: Sequence[Any], chunks: Sequence[Any]) -> Array:
    r"""An upper bound of the squared feature norms of the Nystrom views, per row.

    :math:`\|N^	op k_L(x)\|^2 = k_L(x)^	op K_{mm}^{+} k_L(x) \le k(x, x)` (the
    Schur complement of a positive semi-definite Gram matrix), so the kernel's
    diagonal bounds them without the ``b m r`` product; it is what
    ``max_sq_norm`` (the scale of round-off in rank decisions) needs. A kernel
    without ``diag`` gets the exact norms.
    """
    b = int(chunks[0].shape[0])
    out = np.zeros(b)
    for fm, X in zip(maps, chunks):
        if _is_nystrom(fm):
            diag = getattr(fm._kernel(), "diag", None)
            if diag is not None:
                out += np.asarray(diag(np.asarray(X, dtype=np.float64)), dtype=np.float64)
            else:
                P = np.asarray(fm.transform(X))
                out += np.einsum("ij,ij->i", P, P)
    return out


def _checked_result(m: FeatureMoments, dtype: str) -> FeatureMoments:
    """``m``, or a clear ``ValueError`` when its scatter overflowed (finite features whose
    products exceed the largest float: data of size 1e200, or 1e20 in float32)."""
    if not np.isfinite(m.scatter).all():
        limit = "3.4e38 in float32; dtype='float64' reaches 1.8e308" if dtype == "float32" \
            else "1.8e308 in float64"
        raise ValueError(
            f"the scatter of the features is not finite although the features are: their "
            f"products overflow ({limit}); rescale the views (e.g. divide them by their "
            "largest absolute value)")
    return m


def _feature_dims(maps: Sequence[Any], Xs: Sequence[Any]) -> list[int]:
    dims = []
    for fm, X in zip(maps, Xs):
        D = getattr(fm, "n_features_out_", None)
        if D is None:
            D = check_map_output(np.asarray(fm.transform(np.asarray(X[:1]))), 1,
                                 f"feature_maps[{len(dims)}].transform").shape[1]
        dims.append(int(D))
    return dims


def _dask_moments(views: Sequence[Any], maps: Sequence[Any], *, dtype: str, device: Any,
                  split_every: int, batch_size: int | None) -> FeatureMoments:
    import dask

    blocks, _ = aligned_blocks(views)
    dims = _feature_dims(maps, [np.asarray(v[:1]) for v in views])
    part = dask.delayed(_chunk_moments, pure=True)
    merge = dask.delayed(_merge_all, pure=True)
    partials = [part(list(maps), list(chunk), dims, dtype, device, batch_size)
                for chunk in zip(*blocks)]
    total = _tree_reduce(partials, merge, split_every=max(2, int(split_every)))
    (result,) = dask.compute(total)
    return _checked_result(result, dtype)


def fit_feature_map(fm: Any, X: Any) -> Any:
    """Fit the feature map ``fm`` on the view ``X`` (numpy or dask); return it.

    numpy views: ``fm.fit(X)``. Dask views are never gathered: the identity map
    and random Fourier features need only the input dimension (they are fitted
    on the first rows, which gives the same map), and a Nystrom map draws its
    landmark indices exactly as :meth:`mvkm.features.Nystrom.fit` does and
    gathers those rows only. Other transformers would need the whole view.
    """
    if not is_dask_array(X):
        return fm.fit(X)
    from .features import Identity, Nystrom, RandomFourierFeatures

    if isinstance(fm, (Identity, RandomFourierFeatures)):
        return fm.fit(np.asarray(X[:1]))
    if isinstance(fm, Nystrom):
        idx = fm._landmark_indices(int(X.shape[0]))
        return fm._fit_landmarks(np.asarray(X[idx]))
    raise ValueError(
        f"with dask views the feature maps must be Identity, RandomFourierFeatures or "
        f"Nystrom (fitted without gathering the view), got {fm!r}")


# ---------------------------------------------------------------- devices and row maps
def check_device(device: Any) -> Any:
    """A torch device from a string or device; a clear ``ValueError`` if it is unknown or absent."""
    return check_torch_device(device)


def map_rows(func: Callable[..., Array], views: Sequence[Any], *, batch_size: int | None,
             n_out: int, progress: bool | None = None, desc: str = "transform") -> Any:
    """Apply ``func(chunk_0, ..., chunk_V)`` (row-wise, m x n_out out) chunk by chunk.

    numpy views: in chunks of ``batch_size`` rows (all at once when ``None``),
    the results stacked into one array. Dask views (``None`` entries are
    passed through as ``None``): a dask array of shape (n, n_out), one block
    per row block, computed lazily on the active scheduler.
    """
    present = [X for X in views if X is not None]
    if any(is_dask_array(X) for X in present):
        import dask
        import dask.array as da

        idx = [v for v, X in enumerate(views) if X is not None]
        blocks, lengths = aligned_blocks([views[v] for v in idx])
        out = []
        call = dask.delayed(_apply_block, pure=True)
        for j, length in enumerate(lengths):
            args: list[Any] = [None] * len(views)
            for k, v in enumerate(idx):
                args[v] = blocks[k][j]
            out.append(da.from_delayed(call(func, *args), shape=(length, n_out), dtype=np.float64))
        return da.concatenate(out, axis=0)
    n = present[0].shape[0]
    if batch_size is None or batch_size >= n:
        return func(*views)
    res = np.empty((n, n_out))
    bar = progress_bar(n, desc, progress)
    for sl in iter_row_chunks(n, batch_size):
        res[sl] = func(*[None if X is None else X[sl] for X in views])
        if bar is not None:
            bar.update(sl.stop - sl.start)
    if bar is not None:
        bar.close()
    return res


def _apply_block(func: Callable[..., Array], *chunks: Any) -> Array:
    return np.asarray(func(*chunks), dtype=np.float64)
