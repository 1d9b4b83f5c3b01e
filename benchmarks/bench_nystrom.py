"""The streamed Nystrom primal against scikit-learn's ``Nystroem`` + ``PCA(svd_solver="covariance_eigh")``.

Run from the repository root::

    OMP_NUM_THREADS=2 python benchmarks/bench_nystrom.py                       # n = 30000, 50000
    OMP_NUM_THREADS=2 python benchmarks/bench_nystrom.py --sizes 30000 --landmarks 1500

Issue 25, item 2. With landmarks :math:`L` (m of them) and :math:`N = K_{mm}^{-1/2}`
(m x r), the features are :math:`K(X, L) N`. The streamed primal
(``MultiViewRKM(10, feature_maps=[Nystrom(...)], formulation="primal",
batch_size=4096)``) now reduces the scatter of the raw rows :math:`K(X, L)` (one
``syrk``, :math:`n m^2 / 2` multiply-adds) and applies :math:`N` on both sides
once (:math:`m^3`); its second pass computes :math:`K(X, L)\,(N W)` with the
:math:`m \times s` matrix :math:`N W` formed once. Before, each pass formed the
features :math:`K(X, L) N` (:math:`n m r` each): about :math:`5 n m^2` flops
became :math:`n m^2`.

Timed, interleaved in one process (the order rotated between repeats), same data,
same kernel ``RBF(sigma)`` (median heuristic), 10 components:

* ``pass1 raw`` / ``pass1 feat``: ``feature_moments`` of the Nystrom view with
  ``nystrom_raw=True`` (now) and ``False`` (the features formed, as before);
* ``mvkm``: the whole streamed RKM fit (landmarks, both passes, eigensolver);
* ``sklearn``: ``Nystroem(kernel="rbf", gamma, n_components=m).fit_transform(X)``
  then ``PCA(10, svd_solver="covariance_eigh").fit``.

The eigenvalues of the two mvkm pass-1 scatters are compared (top 10, relative).

``--floor`` adds, timed in the same run, the parts that any fit streaming the raw
rows must do: the ``Nystrom`` map's fit (landmarks, :math:`K_{mm}` and its
eigendecomposition for :math:`N`), the kernel rows :math:`K(X, L)` of both passes,
the ``syrk`` of the raw rows (chunks of ``BATCH`` rows, as the fit) and
:math:`N^\top C N`; their sum is the floor, and ``sklearn / floor`` the largest
speed-up such a fit could have::

    OMP_NUM_THREADS=2 python benchmarks/bench_nystrom.py --floor --datasets gauss10 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import Nystroem
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from bench_kpca import DATASETS, median_sigma  # noqa: E402

from mvkm import MultiViewRKM, Nystrom  # noqa: E402
from scipy.linalg import blas  # noqa: E402

from mvkm.covariance import _raw_rows, feature_moments  # noqa: E402
from mvkm.kernels import RBF  # noqa: E402

S = 10
BATCH = 4096


def floor_parts(X: np.ndarray, sigma: float, m: int) -> dict[str, float]:
    """Wall seconds of the irreducible parts of a streamed fit on the raw rows (see ``--floor``)."""
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    fm = Nystrom(RBF(sigma), m, random_state=0).fit(X)
    t["map"] = time.perf_counter() - t0
    C = np.zeros((m, m), order="F")
    t["rows"] = t["syrk"] = 0.0
    for i in range(0, len(X), BATCH):      # one chunk alive at a time, as in the fit
        t0 = time.perf_counter()
        R = _raw_rows(fm, X[i:i + BATCH])
        t1 = time.perf_counter()
        C = blas.dsyrk(1.0, R, beta=1.0, c=C, trans=1, lower=0, overwrite_c=1)
        t["rows"] += 2.0 * (t1 - t0)                          # once per pass
        t["syrk"] += time.perf_counter() - t1
        del R
    N = fm.normalization_
    C = np.triu(C) + np.triu(C, 1).T
    t0 = time.perf_counter()
    N.T @ C @ N
    t["N"] = time.perf_counter() - t0
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["sines70", "gauss10"])
    p.add_argument("--sizes", nargs="+", type=int, default=[30000, 50000])
    p.add_argument("--landmarks", nargs="+", type=int, default=[1500, 2000])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--floor", action="store_true",
                   help="also time the irreducible parts of a streamed fit and print "
                        "sklearn / their sum, the largest speed-up such a fit could have")
    a = p.parse_args()
    print(f"load average at start: {os.getloadavg()}; threads {a.threads}")
    print(f"{'data':9s} {'n':>6s} {'m':>5s} | {'pass1 raw':>9s} {'pass1 feat':>10s} "
          f"{'mvkm':>7s} {'sklearn':>8s} | {'feat/raw':>8s} {'sk/mvkm':>7s} | eig rel diff")
    with threadpool_limits(a.threads):
        for name in a.datasets:
            for n in a.sizes:
                X = np.ascontiguousarray(DATASETS[name][1](n))
                sigma = median_sigma(X)
                for m in a.landmarks:
                    fm = Nystrom(RBF(sigma), m, random_state=0).fit(X)
                    res: dict[str, np.ndarray] = {}
                    fns = {
                        "raw": lambda: feature_moments([X], [fm], batch_size=BATCH,
                                                       nystrom_raw=True).scatter,
                        "feat": lambda: feature_moments([X], [fm], batch_size=BATCH).scatter,
                        "mvkm": lambda: MultiViewRKM(
                            S, feature_maps=[Nystrom(RBF(sigma), m, random_state=0)],
                            formulation="primal", batch_size=BATCH).fit([X]).eigenvalues_,
                        "sk": lambda: PCA(S, svd_solver="covariance_eigh").fit(
                            Nystroem(kernel="rbf", gamma=1.0 / (2.0 * sigma**2), n_components=m,
                                     random_state=0).fit_transform(X)).explained_variance_,
                    }
                    if a.floor:
                        fns["floor"] = lambda: floor_parts(X, sigma, m)
                    times: dict[str, list[float]] = {k: [] for k in fns}
                    parts: dict[str, list[float]] = {}
                    keys = list(fns)
                    for r in range(a.repeats):
                        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                            t0 = time.perf_counter()
                            res[k] = fns[k]()
                            times[k].append(time.perf_counter() - t0)
                            if k == "floor":
                                for q, v in res[k].items():
                                    parts.setdefault(q, []).append(v)
                    t = {k: statistics.median(v) for k, v in times.items()}
                    top = [np.sort(np.linalg.eigvalsh(res[k]))[::-1][:S] for k in ("raw", "feat")]
                    err = float(np.max(np.abs(top[0] / top[1] - 1.0)))
                    print(f"{name:9s} {n:6d} {m:5d} | {t['raw']:9.2f} {t['feat']:10.2f} "
                          f"{t['mvkm']:7.2f} {t['sk']:8.2f} | {t['feat'] / t['raw']:8.2f} "
                          f"{t['sk'] / t['mvkm']:7.2f} | {err:.1e}", flush=True)
                    if a.floor:
                        fp = {q: statistics.median(v) for q, v in parts.items()}
                        total = sum(fp.values())
                        print(f"    floor {total:.2f} s (map {fp['map']:.2f}, kernel rows of both "
                              f"passes {fp['rows']:.2f}, syrk {fp['syrk']:.2f}, N^T C N "
                              f"{fp['N']:.2f}); sklearn / floor {t['sk'] / total:.2f}", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
