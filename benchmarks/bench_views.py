"""Benchmark: the multi-view RKM dual, stored against matrix-free, at large n.

Two RBF views (the data of ``bench_memory.py``: two independent 5-column
Gaussian views, RBF(2.0) each), ``MultiViewRKM(5)``, three routes, each in its
own child process so that one's memory does not weigh on the next:

* ``dense``: ``kernel_storage="dense"``, the two kernel triangles and their sum
  stored, Lanczos on the sum;
* ``matrix-free``: ``kernel_storage="none"``, the summed centred kernel applied
  tile by tile inside the block iteration, from one Nystrom start for the sum
  (``mvkm.matfree._sum_top_eigh``);
* ``matrix-free, random start``: the route before that start (a Gaussian start
  block for ``top_eigh(method="subspace")`` on the summed operator), kept here
  to show what the Nystrom start buys.

Printed: wall seconds, kernel passes (products with one view's kernel), and the
largest relative eigenvalue difference from the first route run. This is the
measurement behind ``kernel_storage="auto"``'s rule for several views (issue 35,
item 11).

Reproduce::

    .venv/bin/python benchmarks/bench_views.py --n 10000 30000

The dense route needs about 1.7 n^2 x 8 bytes (n = 30,000: 11.3 GiB measured by
``bench_memory.py``); ``--routes``
picks routes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time, warnings
import numpy as np, mvkm, mvkm.matfree as M, mvkm.rkm as R
from scipy.sparse.linalg import LinearOperator
n, route = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(0)
A, B = rng.standard_normal((n, 5)), rng.standard_normal((n, 5))
k = [mvkm.RBF(2.0), mvkm.RBF(2.0)]
passes = [0]
product = M.KernelOperator._matmat
def counted(self, Z):
    passes[0] += 1
    return product(self, Z)
M.KernelOperator._matmat = counted
if route == "matrix-free, random start":
    def random_start(self, s, n):
        ops = [M.KernelOperator(X, kv, center=True) for X, kv in zip(self._X_fit, self._kernels)]
        for v, op in enumerate(ops):
            self._kernel_means[v] = op.row_means_
        total = LinearOperator((n, n), dtype=float, matmat=lambda Z: sum(o.matmat(Z) for o in ops),
                               matvec=lambda z: sum(o.matvec(z) for o in ops))
        lam, H = mvkm.linalg.top_eigh(total, s, method="subspace", random_state=0)
        self.H_, self.Gamma_ = H, np.diag(lam)
        KH = [np.asarray(o.matmat(H)) for o in ops]
        self._UtU, self._KH, self._PhiT_H = [H.T @ x for x in KH], KH, [None, None]
    R.MultiViewRKM._fit_dual_matrix_free = random_start
storage = "dense" if route == "dense" else "none"
warnings.simplefilter("ignore")
t = time.perf_counter()
model = mvkm.MultiViewRKM(5, kernels=k, kernel_storage=storage, progress=False).fit([A, B])
print(json.dumps({"seconds": time.perf_counter() - t, "passes": passes[0],
                  "eigenvalues": model.eigenvalues_.tolist()}))
"""

ROUTES = ["dense", "matrix-free", "matrix-free, random start"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 30_000])
    parser.add_argument("--routes", nargs="+", default=ROUTES, choices=ROUTES)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per fit")
    args = parser.parse_args()
    print("command: .venv/bin/python benchmarks/bench_views.py --n "
          + " ".join(map(str, args.n)))
    print("| n | route | seconds | kernel passes | eigenvalues vs first route |")
    print("|---:|---|---:|---:|---:|")
    for n in args.n:
        first = None
        for route in args.routes:
            try:
                out = subprocess.run([sys.executable, "-c", CHILD, str(n), route], check=True,
                                     capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"| {n} | {route} | > {args.timeout:.0f} | | |", flush=True)
                continue
            except subprocess.CalledProcessError as exc:
                print(f"| {n} | {route} | failed: {exc.stderr.strip().splitlines()[-1]} | | |",
                      flush=True)
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            lam = row["eigenvalues"]
            first = first or lam
            diff = max(abs(a - b) / abs(b) for a, b in zip(lam, first))
            print(f"| {n} | {route} | {row['seconds']:.1f} | {row['passes']} | {diff:.1e} |",
                  flush=True)


if __name__ == "__main__":
    main()
