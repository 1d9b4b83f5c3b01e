"""Every dual estimator against its floor, ``kernel_top_eigh``, and against scikit-learn's KernelPCA.

Run from the repository root (the machine's thread limit is set inside, so start
Python with at least as many threads as you ask for)::

    OMP_NUM_THREADS=2 python benchmarks/bench_estimators.py                 # n = 5000, 10000
    OMP_NUM_THREADS=2 python benchmarks/bench_estimators.py --sizes 3000 --repeats 2 --threads 1

Issue 25, item 1: the estimators take the path of
:func:`mvkm.linalg.kernel_top_eigh` (the upper triangle of each Gram matrix,
centred inside the Lanczos products, :mod:`mvkm._gram`). What is timed, on the
same data, the same RBF kernel (sigma from the median heuristic, as in
``bench_kpca.py``) and 10 components:

* ``kte``: ``kernel_top_eigh(X, RBF(sigma), 10)``, the floor;
* ``rkm1``: ``MultiViewRKM(10, kernels=[RBF(sigma)], kernel_storage="dense").fit([X])``;
* ``ppca``: ``KernelPPCA(10, kernel=RBF(sigma)).fit(X)`` (the top-q route, n > 2000);
* ``rkm2``: ``MultiViewRKM(10, kernels=[RBF(sigma), RBF(sigma2)], kernel_storage="dense")``
  on two views ``[X, X2]`` (``X2``: the windows shifted by one step); its floor
  is ``kte`` plus a second triangle (``upper_gram``) and the pass that sums
  them, so it is reported against ``kte + gram2``, and against ``sum2``;
* ``sum2``: the same two-view eigenproblem on the primitive path: both triangles
  (``kernel_triangle``), the first added into the second (``upper_sum``'s ``into``),
  and Lanczos on the centred sum (``GramTriangle.top_eigh``, the solver of
  ``kernel_top_eigh``); ``rkm2`` does this plus one product ``K_v H``, and its
  eigenvalues must agree;
* ``kpls``: ``MultiViewKPLS(10, kernels=[RBF(sigma), RBF(sigma2)])`` on the two views:
  a different eigenproblem (Omega = E D), reported for its kernel products only;
* ``sk``: ``sklearn.decomposition.KernelPCA(10, kernel="rbf",
  eigen_solver="arpack").fit(X)``.

Each repeat runs them all in one process, the order rotated from repeat to
repeat; the table gives the medians and the ratios. The data sets are those
of ``bench_kpca.py`` (nothing here is tuned on them).

Before every timed call, 3 n^2 doubles are touched (one write per 4 KiB page)
and freed, untimed (``--no-warm`` turns it off). On the virtual machine these
tables were measured on, memory left unused for a few seconds goes back to the
host, and touching it again cost about 2-5 s per GiB: a fit that needed a second
n x n triangle right after one that needed one paid it, the next did not
(measured: ``kernel_triangle`` at n = 10000 took 0.45 s, or 1.3-2.2 s for the
second of two alive at once after a step that held only one). With the
memory warmed, every method, scikit-learn's included, starts from the same
state.

``--floor`` answers a different question: how fast can any estimator on this
path be, on this machine? It times ``kernel_top_eigh`` with a clock around each
of its ``dsymv`` products (the Lanczos products and the centring means, which
read the triangle at the memory's bandwidth), a separate ``upper_gram`` (the
triangle every estimator builds) and ``KernelPCA``, interleaved, and prints the
floor ``build + products`` and the largest speed-up over ``KernelPCA`` that a
solver with no other work could reach, ``KernelPCA / floor``::

    OMP_NUM_THREADS=2 python benchmarks/bench_estimators.py --floor --threads 1 2 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.decomposition import KernelPCA
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from bench_kpca import DATASETS, _CountingBLAS, median_sigma  # noqa: E402

from mvkm import KernelPPCA, MultiViewKPLS, MultiViewRKM  # noqa: E402
from mvkm._gram import kernel_triangle, upper_sum  # noqa: E402
from mvkm.kernels import RBF, upper_gram  # noqa: E402
from mvkm.linalg import kernel_top_eigh  # noqa: E402

S = 10


def warm_memory(n: int, on: bool = True) -> None:
    """Touch and free 3 n^2 doubles (one write per 4 KiB page), untimed: see the docstring."""
    if on:
        a = np.empty(3 * n * n)
        a[::512] = 0.0
        del a


def cases(X: np.ndarray, X2: np.ndarray, sigma: float, sigma2: float):
    gamma = 1.0 / (2.0 * sigma**2)
    return {
        "kte": lambda: kernel_top_eigh(X, RBF(sigma), S)[0],
        "gram2": lambda: upper_gram(RBF(sigma2), X2)[0, :1],
        "rkm1": lambda: MultiViewRKM(S, kernels=[RBF(sigma)], kernel_storage="dense")
        .fit([X]).eigenvalues_,
        "ppca": lambda: KernelPPCA(S, kernel=RBF(sigma)).fit(X)._lam_q,
        "sum2": lambda: sum_of_two(X, X2, sigma, sigma2),
        "rkm2": lambda: MultiViewRKM(S, kernels=[RBF(sigma), RBF(sigma2)], kernel_storage="dense")
        .fit([X, X2]).eigenvalues_,
        "kpls": lambda: MultiViewKPLS(S, kernels=[RBF(sigma), RBF(sigma2)], random_state=0)
        .fit([X, X2]).eigenvalues_,
        "sk": lambda: KernelPCA(S, kernel="rbf", gamma=gamma, eigen_solver="arpack",
                                random_state=0).fit(X).eigenvalues_,
    }


def sum_of_two(X: np.ndarray, X2: np.ndarray, sigma: float, sigma2: float) -> np.ndarray:
    """The top eigenvalues of K_1,c + K_2,c on the primitive path (see ``sum2`` above)."""
    T1, T2 = kernel_triangle(RBF(sigma), X), kernel_triangle(RBF(sigma2), X2)
    return upper_sum([T1, T2], n=len(X), into=T2).top_eigh(S)[0]


def run(name: str, n: int, threads: int, repeats: int, skip: set[str],
        clock=time.perf_counter, warm: bool = True) -> dict[str, float]:
    desc, make = DATASETS[name]
    Xall = make(n + 1)
    X, X2 = np.ascontiguousarray(Xall[:n]), np.ascontiguousarray(Xall[1:n + 1])
    sigma, sigma2 = median_sigma(X), median_sigma(X2)
    fns = {k: f for k, f in cases(X, X2, sigma, sigma2).items() if k not in skip}
    times: dict[str, list[float]] = {k: [] for k in fns}
    out: dict[str, np.ndarray] = {}
    keys = list(fns)
    with threadpool_limits(threads):
        for r in range(repeats):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for k in order:
                warm_memory(n, warm)
                t0 = clock()
                out[k] = np.asarray(fns[k]())
                times[k].append(clock() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    # the same eigenvalues: the estimators' agree with kernel_top_eigh's
    for k in ("rkm1", "ppca", "sk"):
        if k in out and "kte" in out:
            err = float(np.max(np.abs(out[k] / out["kte"] - 1.0)))
            med[k + "_err"] = err
    if "rkm2" in out and "sum2" in out:
        med["rkm2_err"] = float(np.max(np.abs(out["rkm2"] / out["sum2"] - 1.0)))
    return med


def floor(name: str, n: int, threads: int, repeats: int, warm: bool = True) -> dict[str, float]:
    """Medians of KernelPCA, kernel_top_eigh, its dsymv products (count and time) and a
    separate upper_gram, interleaved (see ``--floor`` in the module's docstring)."""
    import mvkm.linalg

    X = np.ascontiguousarray(DATASETS[name][1](n))
    sigma = median_sigma(X)
    gamma = 1.0 / (2.0 * sigma**2)
    rec: dict[str, list[float]] = {k: [] for k in ("sk", "kte", "build", "prod", "count")}
    real = mvkm.linalg._blas
    with threadpool_limits(threads):
        for r in range(repeats):
            for k in (["sk", "kte", "build"] if r % 2 == 0 else ["build", "kte", "sk"]):
                warm_memory(n, warm)
                t0 = time.perf_counter()
                if k == "sk":
                    KernelPCA(S, kernel="rbf", gamma=gamma, eigen_solver="arpack",
                              random_state=0).fit(X)
                elif k == "build":
                    upper_gram(RBF(sigma), X)
                else:
                    tally = {"t": 0.0, "n": 0}
                    mvkm.linalg._blas = _CountingBLAS(real, tally)
                    try:
                        kernel_top_eigh(X, RBF(sigma), S)
                    finally:
                        mvkm.linalg._blas = real
                    if tally["n"] == 0:    # the products no longer go through linalg._blas
                        raise RuntimeError("no dsymv call of kernel_top_eigh was timed")
                    rec["prod"].append(tally["t"])
                    rec["count"].append(tally["n"])
                rec[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in rec.items()}


def main_floor(a: argparse.Namespace) -> None:
    print(f"load average at start: {os.getloadavg()}")
    floor("gauss10", 2100, max(a.threads), 1)     # warm-up: imports, thread pools
    print("wall seconds, medians; floor = build + products; bound = KernelPCA / floor, the "
          "largest speed-up a solver on this path with no other work could have")
    print(f"{'data':10s} {'n':>6s} {'thr':>3s} | {'sk':>6s} {'kte':>6s} {'build':>6s} "
          f"{'#prod':>5s} {'prod':>6s} {'floor':>6s} | {'kte x sk':>8s} {'bound x sk':>10s}")
    for name in a.datasets:
        for n in a.sizes:
            for t in a.threads:
                m = floor(name, n, t, a.repeats, not a.no_warm)
                fl = m["build"] + m["prod"]
                print(f"{name:10s} {n:6d} {t:3d} | {m['sk']:6.2f} {m['kte']:6.2f} "
                      f"{m['build']:6.2f} {m['count']:5.0f} {m['prod']:6.2f} {fl:6.2f} | "
                      f"{m['sk'] / m['kte']:8.2f} {m['sk'] / fl:10.2f}", flush=True)
    print(f"load average at end: {os.getloadavg()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["santafe70", "sines70", "gauss10"])
    p.add_argument("--sizes", nargs="+", type=int, default=[5000, 10000])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip", nargs="*", default=[])
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall-clock time, or the process's CPU time (all threads; less "
                        "sensitive to other processes on a loaded machine)")
    p.add_argument("--floor", action="store_true",
                   help="time kernel_top_eigh's parts (build, dsymv products) and print the "
                        "largest speed-up over KernelPCA any solver on this path could reach")
    p.add_argument("--no-warm", action="store_true",
                   help="do not touch 3 n^2 doubles before each timed call (see the docstring)")
    a = p.parse_args()
    print(f"memory warmed before each timed call: {not a.no_warm}")
    if a.floor:
        main_floor(a)
        return
    clock = time.perf_counter if a.clock == "wall" else time.process_time
    print(f"load average at start: {os.getloadavg()}")
    Xw = DATASETS["gauss10"][1](2101)            # warm-up: imports (torch), thread pools
    for f in cases(Xw[:2100], Xw[1:], 4.0, 4.0).values():
        f()
    print(f"clock: {a.clock}; ratios: time / kernel_top_eigh's (rkm2 and kpls / (kte + gram2); "
          "r2/s2: rkm2 / sum2); speed-up = KernelPCA / time")
    head = (f"{'data':10s} {'n':>6s} {'thr':>3s} {'kte s':>7s} | {'rkm1':>5s} {'ppca':>5s} "
            f"{'rkm2':>5s} {'kpls':>5s} {'r2/s2':>5s} | x sk: {'kte':>5s} {'rkm1':>5s} {'ppca':>5s} "
            f"| max rel err")
    print(head)
    for name in a.datasets:
        for n in a.sizes:
            for t in a.threads:
                m = run(name, n, t, a.repeats, set(a.skip), clock, not a.no_warm)
                kte = m["kte"]

                def ratio(k: str, base: float = kte) -> str:
                    return f"{m[k] / base:5.2f}" if k in m else "    -"

                def speed(k: str) -> str:
                    return f"{m['sk'] / m[k]:5.2f}" if k in m and "sk" in m else "    -"

                floor2 = kte + m.get("gram2", float("nan"))
                errs = max(m.get(k + "_err", 0.0) for k in ("rkm1", "ppca", "sk", "rkm2"))
                print(f"{name:10s} {n:6d} {t:3d} {kte:7.2f} | {ratio('rkm1')} {ratio('ppca')} "
                      f"{ratio('rkm2', floor2)} {ratio('kpls', floor2)} "
                      f"{ratio('rkm2', m.get('sum2', float('nan')))} | x sk: {speed('kte')} "
                      f"{speed('rkm1')} {speed('ppca')} | {errs:.1e}", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
