"""Tests of mvkm.preimage."""

from __future__ import annotations

import numpy as np
import pytest

from mvkm.preimage import kernel_smoother


def test_kernel_smoother_is_a_weighted_mean():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((7, 3))
    w = rng.uniform(0.1, 1.0, size=(2, 7))
    expected = np.stack([np.average(X, axis=0, weights=row) for row in w])
    assert np.allclose(kernel_smoother(w, X), expected, atol=1e-14)
    assert np.allclose(kernel_smoother(w[0], X), expected[0], atol=1e-14)


def test_kernel_smoother_rejects_zero_sum_and_bad_shapes():
    X = np.arange(6.0).reshape(3, 2)
    with pytest.raises(ValueError, match="sum to zero"):
        kernel_smoother(np.array([[1.0, -1.0, 0.0]]), X)
    with pytest.raises(ValueError, match="columns"):
        kernel_smoother(np.ones((1, 4)), X)
    with pytest.raises(ValueError):
        kernel_smoother(np.array([[np.nan, 1.0, 1.0]]), X)
