"""Helpers shared by the chapters of Part V (at scale).

The data of the part (two noisy nonlinear views of a shared latent
variable), the random Fourier maps of its Gaussian kernels, and the small
numerical helpers that several chapters use.
"""

import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mvkm import RandomFourierFeatures

# No progress bars in the chapters' stored outputs: a bar appears only when a
# step lasts over 5 s, which depends on the machine's load.
os.environ.setdefault("MVKM_PROGRESS", "0")


def two_views(n, seed=0):
    """Two noisy nonlinear views (3 and 4 inputs) of a shared 2-d latent."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    X1 = np.c_[z, np.sin(z[:, 0])] + 0.2 * rng.standard_normal((n, 3))
    X2 = (np.c_[np.tanh(z), z[:, 0] * z[:, 1], rng.standard_normal(n)]
          + 0.2 * rng.standard_normal((n, 4)))
    return [X1, X2]


def rff_maps(n_features, seed=0):
    """Random Fourier features of each view's Gaussian, sigma = sqrt(d_v)."""
    return [RandomFourierFeatures(np.sqrt(3), n_features, random_state=seed),
            RandomFourierFeatures(np.sqrt(4), n_features,
                                  random_state=seed + 1)]


def rel_diff(A, B):
    """Relative difference ||A - B|| / ||B|| (Frobenius)."""
    A, B = np.asarray(A), np.asarray(B)
    return np.linalg.norm(A - B) / np.linalg.norm(B)


def align_signs(A, B):
    """B with each column's sign flipped to agree with A's."""
    return B * np.sign(np.sum(A * B, axis=0))


def cpu_best_time(f, repeat=3):
    """Best of `repeat` runs of f() on one BLAS thread, in CPU seconds.

    One thread, so that the CPU time of this process is the work done, not
    the spinning of idle BLAS threads on a machine that other jobs load.
    """
    best = np.inf
    with threadpool_limits(1):
        for _ in range(repeat):
            t0 = time.process_time()
            f()
            best = min(best, time.process_time() - t0)
    return best
