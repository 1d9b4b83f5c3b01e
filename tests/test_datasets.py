"""Tests of mvkm.datasets: the offline datasets of the book."""

from __future__ import annotations

import numpy as np
import pytest

from mvkm import datasets


def test_sum_of_sines_matches_its_formula_and_periods():
    x = datasets.sum_of_sines()
    t = 0.01 * np.arange(500)
    assert x.shape == (500,)
    assert np.allclose(x, np.sin(2 * np.pi * t) + 0.2 * np.sin(40 * np.pi * t), atol=1e-14)
    # periods of 100 and 5 samples: the series repeats every 100 samples
    assert np.allclose(x[100:], x[:-100], atol=1e-12)


@pytest.mark.parametrize("kwargs", [{"n_samples": 0}, {"dt": -1.0}, {"frequencies": (1.0,)},
                                    {"amplitudes": (np.nan, 1.0)}])
def test_sum_of_sines_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        datasets.sum_of_sines(**kwargs)


def test_santafe_is_the_competition_series():
    x = datasets.load_santafe()
    assert x.shape == (10093,) and x.dtype == np.float64
    # integer intensities of an 8-bit digitiser; the series starts 86, 141, 95 (data set A)
    assert np.array_equal(x, np.rint(x)) and x.min() >= 0 and x.max() <= 255
    assert x[:3].tolist() == [86.0, 141.0, 95.0]
