"""The torch paths on a GPU: streamed primal MV-RKM and the matrix-free dual, against the CPU.

Run on a machine with a CUDA GPU, from the repository root::

    python benchmarks/bench_gpu.py            # n = 10^6 primal, n = 10^5 matrix-free dual
    python benchmarks/bench_gpu.py --quick

Prints two markdown tables. Each GPU result is compared, in the same run,
with the same computation on the CPU (numpy, every core of the machine) or
with an exact reference: eigenvalues as the largest relative difference.
Nothing here is needed by the tests or the book; CI has no GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mvkm import RBF, Identity, MultiViewRKM, RandomFourierFeatures, center_gram, top_eigh  # noqa: E402
from mvkm.matfree import matfree_top_eigh  # noqa: E402


def rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) / np.asarray(b) - 1)))


def timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU: nothing to measure")
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads\n")
    n = 100_000 if args.quick else 1_000_000
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 10))
    y = np.sin(X[:, :1]) + 0.1 * rng.standard_normal((n, 1))
    maps = [RandomFourierFeatures(3.0, 2000, random_state=0), Identity()]
    rows = []
    MultiViewRKM(10, feature_maps=maps, formulation="primal", device="cuda").fit([X[:20000], y[:20000]])
    for label, kw in [("numpy, CPU", {}), ("torch cuda float64", {"device": "cuda"}),
                      ("torch cuda float32", {"device": "cuda", "dtype": "float32"})]:
        model, t = timed(lambda: MultiViewRKM(10, feature_maps=maps, formulation="primal",
                                              batch_size=65536 if kw else 8192, **kw).fit([X, y]))
        rows.append((label, t, model.eigenvalues_))
    print(f"Streamed primal MV-RKM, n = {n:,}, D = 2001, s = 10\n")
    print("| path | fit [s] | GFLOP/s (n D^2 / t) | max rel. diff. of eigenvalues vs numpy |")
    print("|---|---:|---:|---|")
    for label, t, lam in rows:
        print(f"| {label} | {t:.2f} | {n * 2001**2 / t / 1e9:.0f} | "
              f"{'(reference)' if label.startswith('numpy') else f'{rel(lam, rows[0][2]):.1e}'} |")

    print("\nMatrix-free dual, RBF (sigma = 3), d = 10, top 10\n")
    print("| n | path | time [s] | max rel. diff. of eigenvalues | against |")
    print("|---:|---|---:|---|---|")
    Xs = rng.standard_normal((5000, 10))
    ref = top_eigh(center_gram(RBF(3.0)(Xs)), 10, method="dense")[0]
    (lam, _), t = timed(lambda: matfree_top_eigh(Xs, RBF(3.0), 10, device="cuda"))
    print(f"| 5,000 | cuda float64 | {t:.2f} | {rel(lam, ref):.1e} | dense LAPACK on the CPU |")
    m = 20_000 if args.quick else 100_000
    Xb = rng.standard_normal((m, 10))
    (lam64, _), t64 = timed(lambda: matfree_top_eigh(Xb, RBF(3.0), 10, device="cuda"))
    print(f"| {m:,} | cuda float64 | {t64:.2f} | (reference) | |")
    (lam32, _), t32 = timed(lambda: matfree_top_eigh(Xb, RBF(3.0), 10, device="cuda",
                                                      dtype=torch.float32, tol=1e-6))
    print(f"| {m:,} | cuda float32 tiles | {t32:.2f} | {rel(lam32, lam64):.1e} | cuda float64 |")


if __name__ == "__main__":
    main()
