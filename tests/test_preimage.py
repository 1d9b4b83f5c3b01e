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


# --- the stabilised smoother ---------------------------------------------------

from mvkm.preimage import stable_kernel_smoother  # noqa: E402


def test_stable_smoother_reduces_to_the_plain_one():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((6, 2))
    w = rng.uniform(0.1, 1.0, size=(3, 6))
    assert np.allclose(stable_kernel_smoother(w, X, tau=0.0), kernel_smoother(w, X), atol=1e-14)
    # tau -> 0 is continuous: the change is O(tau / sum(w))
    diff = np.abs(stable_kernel_smoother(w, X, tau=1e-9) - kernel_smoother(w, X)).max()
    assert diff < 1e-8 * np.abs(X).max()


def test_stable_smoother_is_the_regularised_weighted_mean():
    """x* minimises sum_i w_i |x - x_i|^2 + tau |x - xbar|^2 (w clipped at 0): zero gradient."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((8, 3))
    k = rng.standard_normal((4, 8))            # negative weights included
    tau = 0.3
    x = stable_kernel_smoother(k, X, tau=tau)
    w = np.maximum(k, 0.0)
    grad = (w.sum(1)[:, None] * x - w @ X) + tau * (x - X.mean(0))
    assert np.abs(grad).max() < 1e-12
    # a convex combination of the training points: inside their bounding box
    assert np.all(x >= X.min(0) - 1e-12) and np.all(x <= X.max(0) + 1e-12)


def test_stable_smoother_survives_where_the_plain_one_fails():
    X = np.arange(8.0).reshape(4, 2)
    centred = np.array([[1.0, -1.0, 0.5, -0.5]])   # a centred kernel vector sums to zero
    with pytest.raises(ValueError, match="sum to zero"):
        kernel_smoother(centred, X)
    out = stable_kernel_smoother(centred, X, tau=1e-3)
    assert np.all(np.isfinite(out))
    # all weights non-positive: the result is the training mean
    assert np.allclose(stable_kernel_smoother(-np.ones((1, 4)), X), X.mean(0))
    with pytest.raises(ValueError, match="tau > 0"):
        stable_kernel_smoother(-np.ones((1, 4)), X, tau=0.0)
    with pytest.raises(ValueError, match="tau"):
        stable_kernel_smoother(centred, X, tau=-1.0)
    with pytest.raises(ValueError, match="columns"):
        stable_kernel_smoother(np.ones((1, 3)), X)
    assert stable_kernel_smoother(np.ones(4), X).shape == (2,)
