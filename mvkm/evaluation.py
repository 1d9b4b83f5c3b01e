"""Comparing two methods over repeated splits: seeds and paired intervals.

The book's experiment chapters draw their splits from seeds that one
environment variable, ``MVKM_SEEDS``, overrides (``MVKM_SEEDS=300-309 make
test`` reruns every experiment on other splits), and report a comparison as
the mean paired difference with a Student-t interval. A verdict ("higher",
"lower") is given only where the interval excludes zero.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["parse_seeds", "experiment_seeds", "paired_interval"]

#: The environment variable that overrides an experiment's default seeds.
SEEDS_VARIABLE = "MVKM_SEEDS"


def parse_seeds(text: str | int) -> list[int]:
    """Seeds from a string such as ``"300-309"``, ``"1,4,7"`` or ``"0-3,10"``.

    Parameters
    ----------
    text : str or int
        Comma-separated non-negative integers or inclusive ranges ``a-b``.

    Returns
    -------
    list of int
        The seeds, in the order given.

    Raises
    ------
    ValueError
        If ``text`` holds no seed, a part that is not an integer or a range,
        or a range whose end is below its start.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, np.integer)):
        raise TypeError(f"seeds must be a string such as '300-309' or an int, "
                        f"got {type(text).__name__}")
    seeds: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:                  # a range "a-b", both ends included
                lo, hi = (int(p) for p in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"seeds: expected integers or ranges such as "
                             f"'300-309' or '1,4,7', got {part!r} in "
                             f"{str(text)!r}") from None
    if not seeds:
        raise ValueError(f"seeds: expected at least one seed, got {text!r}")
    return seeds


def experiment_seeds(default: str | int) -> list[int]:
    """The seeds of an experiment: ``MVKM_SEEDS`` if it is set, else ``default``.

    Parameters
    ----------
    default : str or int
        The experiment's own seeds, in the syntax of :func:`parse_seeds`.

    Returns
    -------
    list of int
    """
    return parse_seeds(os.environ.get(SEEDS_VARIABLE) or default)


def paired_interval(a: Any, b: Any, level: float = 0.95) -> dict[str, Any]:
    r"""Mean of the paired differences ``a - b`` with a Student-t interval.

    With :math:`d_j = a_j - b_j` over :math:`m` pairs, the interval is
    :math:`\bar d \pm t_{m-1}\, s_d / \sqrt m`, with :math:`t_{m-1}` the
    quantile of level ``0.5 + level / 2``.

    Parameters
    ----------
    a, b : array-like of shape (m,)
        The two methods' scores on the same m splits.
    level : float, default 0.95
        Confidence level, in (0, 1).

    Returns
    -------
    dict
        ``mean``, ``low``, ``high``, ``wins`` (the number of pairs with
        ``a > b``), ``n`` (m) and ``verdict``: ``"higher"`` (the interval
        lies above zero), ``"lower"`` (below zero) or ``"tied"`` (it contains
        zero, or there are fewer than two pairs).
    """
    from scipy import stats

    a_ = np.asarray(a, dtype=float)
    b_ = np.asarray(b, dtype=float)
    if a_.ndim != 1 or a_.shape != b_.shape:
        raise ValueError(f"a and b: expected two 1-d arrays of the same "
                         f"length, got shapes {a_.shape} and {b_.shape}")
    if not (isinstance(level, (float, int)) and 0 < level < 1):
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    d = a_ - b_
    if not np.all(np.isfinite(d)):
        raise ValueError("a and b: expected finite scores")
    mean = float(d.mean()) if d.size else float("nan")
    wins = int(np.sum(d > 0))
    if d.size < 2:
        return dict(mean=mean, low=float("nan"), high=float("nan"),
                    wins=wins, n=int(d.size), verdict="tied")
    half = stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1)
    half /= np.sqrt(d.size)
    low, high = mean - half, mean + half
    verdict = "higher" if low > 0 else "lower" if high < 0 else "tied"
    return dict(mean=mean, low=float(low), high=float(high), wins=wins,
                n=int(d.size), verdict=verdict)
