"""KernelPPCA fit: time and peak memory, dual and primal, against MultiViewRKM's dual.

Each measurement runs in a fresh subprocess (so that peak memory is that of one
fit): wall time of ``fit`` and the peak of numpy's allocations during it
(``tracemalloc``, which sees numpy's data buffers), plus the process's peak
resident set (``ru_maxrss``, which includes the interpreter and the data).

Data: X ~ N(0, I_10), RBF kernel with sigma = 3 (the same as bench_kpca.py),
q = s = 10 latent components; the primal uses 200 random Fourier features.

Usage::

    .venv/bin/python benchmarks/bench_ppca.py                      # the sizes of issue 14
    .venv/bin/python benchmarks/bench_ppca.py --sizes 5000 --models ppca-dual
    .venv/bin/python benchmarks/bench_ppca.py --package /path/to/old/checkout   # "before"

``--package`` imports ``mvkm`` from another checkout (e.g. a ``git worktree`` of
the commit before the change) to measure before and after in the same run.

Measured for issue 14 on the development machine (2 cores shared with other
jobs, OMP_NUM_THREADS=1, OpenBLAS; "before" = commit c88fa04's KernelPPCA,
the full ``scipy.linalg.eigh`` of K_c and an n x n ``B_`` in both formulations):

| model | n | before: fit [s] | before: peak numpy | after: fit [s] | after: peak numpy |
|:---|---:|---:|---:|---:|---:|
| KernelPPCA dual | 5000 | 26.37 | 1.119 GiB (6.00 n^2 doubles) | 0.57 | 0.195 GiB (1.05 n^2) |
| KernelPPCA dual | 6500 | 56.76 | 1.890 GiB (6.00 n^2) | | |
| KernelPPCA dual | 10000 | | | 2.04 | 0.760 GiB (1.02 n^2) |
| KernelPPCA dual | 15000 | about 650 (estimated*) | about 10.1 GiB (6.00 n^2, estimated) | 4.84 | 1.727 GiB (1.03 n^2) |
| MultiViewRKM dual (same kernel, s = q) | 10000 | | | 3.10 | 1.505 GiB (2.02 n^2) |
| KernelPPCA primal, 200 RFF | 5000 | 0.30 | 0.232 GiB (1.24 n^2) | 0.09 | 0.038 GiB |
| KernelPPCA primal, 200 RFF | 15000 | 3.80 | 1.811 GiB (1.08 n^2) | 0.25 | 0.114 GiB (O(n D)) |

(*) not run (it would hold the shared machine for about 11 minutes and 10 GB):
t(15000) = t(6500) (15000/6500)^2.92, with the exponent 2.92 fitted to the
5000 and 6500 runs; memory 6.00 n^2 doubles as measured at both sizes.
sigma2_ agrees to all printed digits before and after (5.67192e-05 at n = 5000:
10-D data, whose K_c has full numerical rank, so the generic rank of the
top-q path equals the numerical rank of the full eigendecomposition).
The target of issue 14, KernelPPCA dual within 2x of MultiViewRKM dual at
n = 10000, is met: 2.04 s against 3.10 s (0.66x).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
import numpy as np
import mvkm
model, n, q = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
X = np.random.default_rng(0).normal(size=(n, 10))
if model == "ppca-dual":
    est = mvkm.KernelPPCA(n_components=q, kernel=mvkm.RBF(3.0))
    fit = lambda: est.fit(X)
elif model == "ppca-primal":
    fm = mvkm.RandomFourierFeatures(3.0, 200, random_state=0).fit(X)
    est = mvkm.KernelPPCA(n_components=q, feature_map=fm, formulation="primal")
    fit = lambda: est.fit(X)
else:
    est = mvkm.MultiViewRKM(q, kernels=[mvkm.RBF(3.0)], formulation="dual", random_state=0)
    fit = lambda: est.fit([X])
tracemalloc.start()
t0 = time.perf_counter()
fit()
wall = time.perf_counter() - t0
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
sigma2 = float(getattr(est, "sigma2_", float("nan")))
print(json.dumps({"wall": wall, "peak": peak, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "sigma2": sigma2, "file": mvkm.__file__}))
"""


def measure(package: str, model: str, n: int, q: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, package, model, str(n), str(q)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 15000])
    p.add_argument("--models", nargs="+", default=["ppca-dual", "rkm-dual", "ppca-primal"],
                   choices=["ppca-dual", "rkm-dual", "ppca-primal"])
    p.add_argument("--q", type=int, default=10)
    p.add_argument("--package", default=root, help="checkout whose mvkm is imported")
    args = p.parse_args()
    print(f"mvkm from {args.package}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}\n")
    print("| model | n | fit [s] | peak numpy [GiB] | peak numpy / n^2 doubles | peak RSS [GiB] | sigma2_ |")
    print("|:---|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        for model in args.models:
            r = measure(args.package, model, n, args.q)
            print(f"| {model} | {n} | {r['wall']:.2f} | {r['peak'] / 2**30:.3f} | "
                  f"{r['peak'] / (8 * n * n):.2f} | {r['rss'] / 2**30:.3f} | {r['sigma2']:.6g} |", flush=True)


if __name__ == "__main__":
    main()
