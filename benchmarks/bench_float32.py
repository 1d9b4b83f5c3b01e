"""float32 streaming against its own limit: ``feature_moments(..., dtype="float32")`` and the float32 ``syrk``.

Run from the repository root::

    python benchmarks/bench_float32.py                     # one thread, n = 49152, 5 repeats
    python benchmarks/bench_float32.py --threads 2 --repeats 3

Issue 25, item 3. The streamed primal's reduction in float32 computes, per chunk
of ``b`` rows, the random Fourier features (``D = 2000``) plus one linear column
in single precision, subtracts the chunk's mean and adds ``F^T F`` by BLAS
``ssyrk``; the chunks are merged in float64. Its limit is the ``ssyrk`` of the
same chunks alone, timed here in the same process on precomputed float32
features (the reduction also computes the features, so it cannot reach 1.0);
the float64 reduction is timed against ``dsyrk`` the same way. Interleaved
repeats, medians, process CPU time and wall time; the eigenvalues of the
float32 scatter are compared with the float64 one (top 10, relative).
The data are those of ``bench_scale.py``: ``X ~ N(0, I_10)`` through
``RandomFourierFeatures(3.0, 2000)`` and ``y = sin(x_1) + 0.1 e`` as is.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import BATCH, D_RFF, SIGMA, make_views  # noqa: E402  (the same data)

from mvkm import Identity, RandomFourierFeatures  # noqa: E402
from mvkm.covariance import chunk_features, feature_moments  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=49152)
    p.add_argument("--batch", type=int, default=BATCH)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    print("command:", " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv))
    print(f"load average at start: {os.getloadavg()[0]:.1f}; threads {a.threads}")
    X, Y = make_views(a.n)
    maps = [RandomFourierFeatures(SIGMA, D_RFF, random_state=0).fit(X), Identity().fit(Y)]
    starts = range(0, a.n, a.batch)
    with threadpool_limits(a.threads):
        feats = {dt: [chunk_features(maps, [X[i:i + a.batch], Y[i:i + a.batch]], dtype=dt)
                      for i in starts] for dt in ("float32", "float64")}

        def syrk(dt):
            f = blas.ssyrk if dt == "float32" else blas.dsyrk
            for F in feats[dt]:
                f(1.0, F, trans=1, lower=0)

        def moments(dt):
            return feature_moments([X, Y], maps, batch_size=a.batch, dtype=dt)

        runs = {("moments", dt): (lambda dt=dt: moments(dt)) for dt in ("float32", "float64")}
        runs.update({("syrk", dt): (lambda dt=dt: syrk(dt)) for dt in ("float32", "float64")})
        times = {k: [] for k in runs}
        out = {}
        keys = list(runs)
        for r in range(a.repeats):
            for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                w, c = time.perf_counter(), time.process_time()
                res = runs[k]()
                times[k].append((time.perf_counter() - w, time.process_time() - c))
                if k[0] == "moments":
                    out[k[1]] = res
    med = {k: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for k, v in times.items()}
    lam = {dt: np.sort(np.linalg.eigvalsh(out[dt].scatter))[::-1][:10] for dt in out}
    err = float(np.max(np.abs(lam["float32"] / lam["float64"] - 1)))
    print(f"\nn = {a.n}, chunks of {a.batch}, D = 2001; medians of {a.repeats} (wall s / CPU s)\n")
    print("| dtype | feature_moments | syrk of the same chunks | fraction of the syrk rate (wall / CPU) |")
    print("|---|---|---|---|")
    for dt in ("float32", "float64"):
        m, s = med[("moments", dt)], med[("syrk", dt)]
        print(f"| {dt} | {m[0]:.3f} / {m[1]:.3f} | {s[0]:.3f} / {s[1]:.3f} | {s[0] / m[0]:.2f} / {s[1] / m[1]:.2f} |")
    print(f"\ntop-10 eigenvalues, float32 against float64: largest relative difference {err:.1e}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print("reproduce: python benchmarks/bench_float32.py --n", a.n, "--batch", a.batch, "--threads", a.threads,
          "--repeats", a.repeats)


if __name__ == "__main__":
    main()
