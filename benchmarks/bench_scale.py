"""At scale: the streamed primal multi-view RKM on numpy, torch and a Dask cluster.

Run from the repository root::

    python benchmarks/bench_scale.py                   # n up to 10^6 (several minutes)
    python benchmarks/bench_scale.py --quick           # n up to 10^5, a smoke test
    python benchmarks/bench_scale.py --device cuda     # add a torch run on the GPU

What is measured (each configuration in a fresh subprocess, so that its peak
resident memory is its own):

* **Primal MV-RKM, 2 views**: view 1 is ``X ~ N(0, I_10)`` through random
  Fourier features (``D_1 = 2000``, sigma = 3), view 2 is one linear column
  ``y = sin(x_1) + 0.1 e``; ``D = 2001``, ``n_components = 10``,
  ``MultiViewRKM(formulation="primal", batch_size=8192)``. The fit is one
  pass of :func:`mvkm.covariance.feature_moments` (``n D^2`` flops in ``syrk``
  plus ``n D`` cosines), the eigenproblem of the ``D x D`` covariance and a
  second pass for ``H`` (``n D s``).
* **The physical limit in the same run**: a plain ``A.T @ A`` (numpy, BLAS
  ``syrk``) of one ``8192 x 2001`` float64 block, timed in the same process;
  the fit's achieved rate is ``n D^2 / t`` against that block's rate.
* **Linear in n**: the same fit at n = 10^4, 10^5, 10^6; the ratio of the
  times for 100x the data.
* **float32**: features and chunk products in single precision, merged in
  float64; eigenvalues against the float64 fit.
* **Dask**: the same fit on ``dask.array`` views (row blocks of 62,500, each
  reduced by its worker in chunks of 8192 rows) on a
  ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``; its
  eigenvalues against the streamed numpy fit, and its wall time over it.
* ``--device cuda``: the torch path on the GPU (features and products there).

Each child first runs an untimed warm-up fit on 10,000 rows (a full chunk and
a partial one): torch's and BLAS's first-call set-up and the allocator's first
touch of the chunk-sized workspace happen once per process, and later fits
reuse that memory, so they are not part of a fit's cost (on a fresh process the
first fit pays about 0.2 s more for them). Peak memory is the subprocess's peak
resident set (``ru_maxrss``) minus its resident set just before the warm-up
(after imports, torch included, and the data): an upper bound of what either
fit needs; the process's whole peak is given beside
it, and the data alone (``n x 11`` float64).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

D_RFF = 2000
SIGMA = 3.0
S = 10
BATCH = 8192


def make_views(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 10))
    y = np.sin(X[:, :1]) + 0.1 * rng.standard_normal((n, 1))
    return X, y


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(config: dict) -> dict:
    """One fit, in this (fresh) process; returns its numbers."""
    import torch  # noqa: F401  (the library's own memory is not the fit's)

    import mvkm
    from mvkm import Identity, MultiViewRKM, RandomFourierFeatures

    n = config["n"]
    X, y = make_views(n)
    maps = [RandomFourierFeatures(SIGMA, D_RFF, random_state=0), Identity()]
    out: dict = {"n": n, "mode": config["mode"], "mvkm": mvkm.__file__}
    kw = dict(feature_maps=maps, formulation="primal", batch_size=BATCH, progress=False)
    if config["mode"] == "float32":
        kw["dtype"] = "float32"
    if config["mode"].startswith("cuda"):
        kw["device"] = "cuda"
        if config["mode"] == "cuda32":
            kw["dtype"] = "float32"
    views = [X, y]
    # the cluster (mode "dask") lives in this `with` block: its client and its workers are
    # closed when the fit is measured, also if it raises
    with contextlib.ExitStack() as stack:
        if config["mode"] == "dask":
            import dask.array as da
            from distributed import Client, LocalCluster

            cluster = stack.enter_context(LocalCluster(n_workers=2, threads_per_worker=1,
                                                       processes=True, dashboard_address=":0"))
            stack.enter_context(Client(cluster))
            chunk = max(1000, n // 16)
            views = [da.from_array(X, chunks=(chunk, -1)), da.from_array(y, chunks=(chunk, -1))]
            # batch_size: each worker reduces its blocks in chunks of this many rows
        # warm-up fit on 10,000 rows (a full chunk and a partial one), not timed: torch's and
        # BLAS's first-call set-up and the allocator's first touch of the chunk-sized workspace
        # (once per process: later fits reuse that memory) are not part of a fit's cost
        warm = [X[:10_000], y[:10_000]]
        if config["mode"] == "dask":                      # the workers' imports too
            warm = [da.from_array(X[:2000], chunks=(1000, -1)),
                    da.from_array(y[:2000], chunks=(1000, -1))]
        rss0 = _rss_mb()     # before the warm-up: the peak below bounds either fit's own need
        MultiViewRKM(S, **kw).fit(warm)
        t = time.perf_counter()
        model = MultiViewRKM(S, **kw).fit(views)
        out["fit_s"] = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["peak_fit_mb"] = peak - rss0
    out["peak_process_mb"] = peak
    out["data_mb"] = (X.nbytes + y.nbytes) / 2**20
    out["eigenvalues"] = model.eigenvalues_.tolist()
    out["fit_gflops"] = n * (D_RFF + 1) ** 2 / out["fit_s"] / 1e9
    # the physical limit, after the fit (so that the fit's peak memory is its own):
    # one block's A^T A (BLAS syrk), same process, same threads
    A = np.random.default_rng(1).standard_normal((BATCH, D_RFF + 1))
    A.T @ A
    t = time.perf_counter()
    for _ in range(3):
        A.T @ A
    out["block_gflops"] = 3 * BATCH * (D_RFF + 1) ** 2 / (time.perf_counter() - t) / 1e9
    return out


def run(config: dict, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, __file__, "--child", json.dumps(config)],
                         capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{config}: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n up to 10^5")
    parser.add_argument("--device", default=None, help="also run the torch path on this device (cuda)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="n of the numpy runs")
    parser.add_argument("--modes", default="float32,dask",
                        help="runs at the largest n besides numpy: float32, dask (comma-separated)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child))))
        return
    sizes = args.sizes or ([10_000, 100_000] + ([] if args.quick else [1_000_000]))
    big = sizes[-1]
    modes = [m for m in args.modes.split(",") if m]
    print(f"# bench_scale: {platform.machine()}, {os.cpu_count()} cores, {args.threads} threads, "
          f"load {os.getloadavg()[0]:.1f}; D = {D_RFF} RFF + 1 linear, s = {S}, batch {BATCH}\n")
    rows = []
    for n in sizes:
        rows.append(run({"n": n, "mode": "numpy"}, args.threads))
    ref = rows[-1]
    extra = [run({"n": big, "mode": mode}, args.threads) for mode in modes]
    if args.device:
        extra.append(run({"n": big, "mode": "cuda"}, args.threads))
        extra.append(run({"n": big, "mode": "cuda32"}, args.threads))
    lam_ref = np.array(ref["eigenvalues"])
    print("| mode | n | fit [s] | GFLOP/s (n D^2 / t) | A^T A block GFLOP/s | fraction | "
          "peak memory of fit [MiB] | process peak [MiB] | data [MiB] | max rel. diff. of eigenvalues vs numpy float64 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows + extra:
        same_n = r["n"] == ref["n"]
        diff = (f"{np.max(np.abs(np.array(r['eigenvalues']) / lam_ref - 1)):.1e}"
                if same_n and r is not ref else "(reference)" if r is ref else "")
        print(f"| {r['mode']} | {r['n']:,} | {r['fit_s']:.2f} | {r['fit_gflops']:.1f} | "
              f"{r['block_gflops']:.1f} | {r['fit_gflops'] / r['block_gflops']:.2f} | "
              f"{r['peak_fit_mb']:.0f} | {r['peak_process_mb']:.0f} | {r['data_mb']:.0f} | {diff} |")
    t = {r["n"]: r["fit_s"] for r in rows}
    print()
    for a, b in zip(sizes, sizes[1:]):
        print(f"- time ratio for {b // a}x the data (n = {a:,} -> {b:,}): {t[b] / t[a]:.1f}x")
    if len(sizes) == 3:
        print(f"- time ratio for 100x the data (n = {sizes[0]:,} -> {sizes[2]:,}): "
              f"{t[sizes[2]] / t[sizes[0]]:.1f}x")
    dask_row = next((r for r in extra if r["mode"] == "dask"), None)
    if dask_row is not None:
        print(f"- Dask LocalCluster(2 workers) / numpy streamed wall time at n = {big:,}: "
              f"{dask_row['fit_s'] / ref['fit_s']:.2f}x")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ns = np.array(sizes, dtype=float)
        ax.loglog(ns, [t[n] for n in sizes], "o-", label="primal MV-RKM, streamed (numpy)")
        ax.loglog(ns, t[sizes[0]] * ns / ns[0], "k--", lw=0.8, label="linear in n")
        ax.set_xlabel("n")
        ax.set_ylabel("fit time [s]")
        ax.legend(fontsize=8)
        fig.tight_layout()
        out = ROOT / "benchmarks" / "results"
        out.mkdir(exist_ok=True)
        fig.savefig(out / "bench_scale.png", dpi=120)
        print(f"\nlog-log plot: {out / 'bench_scale.png'}")
    except ImportError:  # pragma: no cover
        pass


if __name__ == "__main__":
    main()
