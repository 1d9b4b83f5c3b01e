"""Time series with two-view models: lag embedding and recursive forecasting.

A series :math:`x_1, \\dots, x_T` becomes a two-view regression problem
(section 5 of :cite:`achten2023duality`): view 0 holds the window of the
last :math:`p + 1` values :math:`(x_{l-p}, \\dots, x_l)`, view 1 the next value
:math:`x_{l+1}`. A model trained on these pairs forecasts recursively: each
prediction is appended to the window for the next step.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_array, check_count
from ._validation import check_bool
from ._validation import as_array

__all__ = ["lag_embed", "recursive_forecast"]


def _series(series: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = as_array(series, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    return check_array(arr, name, ndim=1)


def _check_lag(lag: Any) -> int:
    if isinstance(lag, bool) or not isinstance(lag, Integral) or lag < 0:
        raise ValueError(f"lag must be an integer >= 0, got {lag!r}")
    return int(lag)


def lag_embed(series: ArrayLike, lag: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Windows of :math:`p + 1` consecutive values and the value that follows each.

    Row :math:`l` of ``X`` is :math:`(x_l, x_{l+1}, \dots, x_{l+p})` (oldest
    first) and ``Y[l, 0]`` is :math:`x_{l+p+1}`, for
    :math:`l = 0, \dots, T - p - 2`: the autoregression
    :math:`\hat x_{l+1} = f(x_l, \dots, x_{l-p})` of the source. A series of
    length :math:`T` gives :math:`n = T - p - 1` pairs (the Santa Fe set-up:
    :math:`T = 1000`, :math:`p = 70`, :math:`n = 929`).

    Parameters
    ----------
    series : array_like of shape (T,) or (T, 1)
    lag : int
        :math:`p \ge 0`; the windows hold :math:`p + 1` values.

    Returns
    -------
    X : ndarray of shape (T - lag - 1, lag + 1)
    Y : ndarray of shape (T - lag - 1, 1)
    """
    x = _series(series, "series")
    p = _check_lag(lag)
    n = x.size - p - 1
    if n < 1:
        raise ValueError(f"a series of length {x.size} is too short for lag {p}: "
                         f"it needs at least lag + 2 = {p + 2} values")
    X = np.lib.stride_tricks.sliding_window_view(x, p + 1)[:n].copy()
    return X, x[p + 1:, None].copy()


def recursive_forecast(model: Any, history: ArrayLike, n_steps: int, *,
                       progress: bool = False) -> NDArray[np.float64]:
    """Forecast ``n_steps`` values by feeding each prediction back as input.

    Parameters
    ----------
    model : fitted two-view model
        Trained on :func:`lag_embed` pairs: view 0 the windows, view 1 the next
        value; it must provide ``predict(views, target=1)`` (as
        :class:`mvkm.MultiViewRKM`) and ``view_dims_``.
    history : array_like of shape (T,)
        Past values; the last ``view_dims_[0]`` of them form the first window.
    n_steps : int
        Number of values to forecast (>= 1).
    progress : bool, default=False
        Show a ``tqdm`` progress bar.

    Returns
    -------
    ndarray of shape (n_steps,)
    """
    check_bool(progress, "progress")
    dims = getattr(model, "view_dims_", None)
    if dims is None:
        from sklearn.exceptions import NotFittedError
        from sklearn.utils.validation import check_is_fitted

        if not callable(getattr(model, "predict", None)) or not hasattr(model, "get_params"):
            raise TypeError(f"model must be a fitted two-view model with predict(views, "
                            f"target=1), e.g. mvkm.MultiViewRKM, got {type(model).__name__}")
        try:
            check_is_fitted(model)
        except NotFittedError:
            raise ValueError("model must be fitted (it has no view_dims_): call fit first") from None
        raise TypeError(f"model must be a two-view model with predict(views, target=1) and "
                        f"view_dims_, e.g. mvkm.MultiViewRKM; a fitted {type(model).__name__} "
                        "has neither")
    if len(dims) != 2 or dims[1] != 1:
        raise ValueError(f"recursive_forecast needs a two-view model whose second view is the "
                         f"next value (one column), got view dimensions {list(dims)}")
    n_steps = check_count(n_steps, "n_steps")
    window_len = int(dims[0])
    x = _series(history, "history")
    if x.size < window_len:
        raise ValueError(f"history has {x.size} values; the model's windows need {window_len}")
    buffer = np.empty(window_len + int(n_steps))
    buffer[:window_len] = x[-window_len:]
    steps = range(int(n_steps))
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="forecast")
    for k in steps:
        window = buffer[k:k + window_len][None, :]
        buffer[window_len + k] = model.predict([window, None], target=1)[0, 0]
    return buffer[window_len:].copy()
