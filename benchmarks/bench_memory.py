"""Benchmark: the dense dual's memory guard against the measured peak.

For each dense route, at each n, one child process fits the model under
tracemalloc (numpy reports its allocations to it) and prints the peak beside
the estimate of :func:`mvkm._gram.dense_dual_bytes`, the number the guard
compares with the available memory. The estimate must stay within 20 % of the
peak (issue 35, item 9; ``tests/test_memory_guard.py`` checks it at n = 2,500
in ``make test``).

Reproduce::

    .venv/bin/python benchmarks/bench_memory.py --n 10000 20000

Each run needs about 4 n^2 x 8 bytes (the Stiefel route at n = 20,000:
12 GiB).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import sys, tracemalloc, warnings
import numpy as np, mvkm
from mvkm._gram import dense_dual_bytes
n, route = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(0)
A, B = rng.standard_normal((n, 5)), rng.standard_normal((n, 5))
k = [mvkm.RBF(2.0), mvkm.RBF(2.0)]
warnings.simplefilter("ignore")
tracemalloc.start()
if route == "KernelPPCA":
    mvkm.KernelPPCA(5, kernel=k[0], kernel_storage="dense").fit(A)
    est = dense_dual_bytes(n, k[:1])
elif route == "RKM, 1 view":
    mvkm.MultiViewRKM(5, kernels=k[:1], kernel_storage="dense").fit([A])
    est = dense_dual_bytes(n, k[:1], sum_in_place=True)
elif route == "RKM, 2 views":
    mvkm.MultiViewRKM(5, kernels=k, kernel_storage="dense").fit([A, B])
    est = dense_dual_bytes(n, k, sum_in_place=True)
else:
    mvkm.MultiViewRKM(5, kernels=k, solver="stiefel", max_iter=2,
                      kernel_storage="dense").fit([A, B])
    est = dense_dual_bytes(n, k, dense_copy=True)
peak = tracemalloc.get_traced_memory()[1]
print(peak, est)
"""

ROUTES = ["KernelPPCA", "RKM, 1 view", "RKM, 2 views", "RKM, Stiefel"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 20_000])
    parser.add_argument("--routes", nargs="+", default=ROUTES)
    args = parser.parse_args()
    print("command: .venv/bin/python benchmarks/bench_memory.py --n "
          + " ".join(map(str, args.n)))
    print(f"| route | n | measured peak (GiB) | estimate (GiB) | estimate / peak |")
    print("|---|---|---|---|---|")
    for n in args.n:
        for route in args.routes:
            out = subprocess.run([sys.executable, "-c", CHILD, str(n), route],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"| {route} | {n} | failed: {out.stderr.strip().splitlines()[-1]} | | |")
                continue
            peak, est = map(float, out.stdout.split())
            print(f"| {route} | {n:,} | {peak / 2**30:.2f} | {est / 2**30:.2f} | "
                  f"{est / peak:.2f} |", flush=True)


if __name__ == "__main__":
    main()
