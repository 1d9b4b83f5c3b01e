"""Multi-view kernel PLS fit time against N: matrix-free Lanczos, dense routes, and a peer.

Usage::

    python benchmarks/bench_kpls.py            # N = 250 ... 2000; dense routes up to N = 1000
    python benchmarks/bench_kpls.py --full     # also the dense routes and the peer at N = 2000 (minutes)

Data: the UCI Multiple Features digits, views fou, fac, kar (d = 76, 216, 64),
standardised, the first N rows of a fixed permutation; RBF kernels with
gamma = 1/d (sigma = sqrt(d / 2)), centred; k = 10 components. Every time
includes the kernel matrices. Routes:

* ``lanczos``: ``MultiViewKPLS(solver="lanczos")`` (the default for V N > 1500);
* ``dense S``: ``MultiViewKPLS(solver="dense")``, eigh of the symmetric
  V N x V N matrix S = D^{1/2} E D^{1/2};
* ``eig(Omega)``: the source's route, ``numpy.linalg.eig`` of the non-symmetric
  V N x V N matrix Omega (kernels built with the package);
* ``cca-zoo KCCA``: ``cca_zoo.nonparametric.KCCA(shrinkage=1.0)`` (kernel CCA
  with full regularisation is kernel PLS), if cca-zoo is installed (it is not
  a dependency of mvkm: ``pip install cca-zoo==4.0.1``).

Accuracy: the largest relative difference of the top-10 eigenvalues from the
dense S route (same N). cca-zoo's KCCA reports its eigenvalues on another scale
(canonical "correlations"), so they are not compared; instead, for N <= 500, its
out-of-sample scores on 200 held-out rows must be those of ``MultiViewKPLS`` up
to the sign and scale of each component: 1 - |corr| < 1e-8 per view and
component is asserted (kernel CCA with full regularisation is kernel PLS, see
the chapter "From PLS to kernel PLS"). cca-zoo is not installed where the book is
built and tested, so that assertion has not been run there.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mvkm
from mvkm import MultiViewKPLS
from mvkm.datasets import load_mfeat
from mvkm.kernels import center_gram


def timed(f, repeat=1):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def peer_disagreement(theirs, ours) -> float:
    """Largest 1 - |corr| between the peer's and the package's scores, over views and components."""
    worst = 0.0
    for a, b in zip(theirs, ours):
        a, b = np.asarray(a), np.asarray(b)
        for j in range(b.shape[1]):
            worst = max(worst, 1.0 - abs(float(np.corrcoef(a[:, j], b[:, j])[0, 1])))
    return worst


def eig_omega(views, kernels, k):
    Ks = [center_gram(kern(X)) for kern, X in zip(kernels, views)]
    V, N = len(Ks), Ks[0].shape[0]
    Om = np.zeros((V * N, V * N))
    for v in range(V):
        for u in range(V):
            if u != v:
                Om[v * N:(v + 1) * N, u * N:(u + 1) * N] = Ks[u]
    lam = np.linalg.eigvals(Om).real
    return np.sort(lam)[::-1][:k]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="dense routes and the peer at N = 2000 too")
    args = parser.parse_args()
    views, _ = load_mfeat(views=("fou", "fac", "kar"))
    perm = np.random.default_rng(0).permutation(2000)
    views = [((X - X.mean(0)) / X.std(0))[perm] for X in views]
    kernels = [mvkm.RBF(np.sqrt(X.shape[1] / 2)) for X in views]
    try:
        from cca_zoo.nonparametric import KCCA
    except ImportError:
        KCCA = None
    k = 10
    warm = [X[:100] for X in views]              # first calls pay imports and allocations
    MultiViewKPLS(k, kernels=kernels, solver="lanczos", random_state=0).fit(warm)
    MultiViewKPLS(k, kernels=kernels, solver="dense").fit(warm)
    if KCCA is not None:
        KCCA(k, shrinkage=1.0, kernel="rbf", gamma=[1.0 / X.shape[1] for X in warm]).fit(warm)
    dense_max = 2000 if args.full else 1000
    rows = []
    for N in (250, 500, 1000, 2000):
        sub = [X[:N] for X in views]
        rep = 3 if N <= 1000 else 2
        t_l, lan = timed(lambda: MultiViewKPLS(k, kernels=kernels, solver="lanczos", random_state=0).fit(sub), rep)
        row = {"N": N, "lanczos": t_l}
        if N <= dense_max:
            t_d, den = timed(lambda: MultiViewKPLS(k, kernels=kernels, solver="dense").fit(sub), rep)
            row["dense"] = t_d
            row["err_l"] = np.abs(lan.eigenvalues_ / den.eigenvalues_ - 1).max()
            if N <= (2000 if args.full else 500):
                t_e, lam_e = timed(lambda: eig_omega(sub, kernels, k), rep)
                row["eig"] = t_e
                row["err_e"] = np.abs(lam_e / den.eigenvalues_ - 1).max()
            if KCCA is not None:
                gammas = [1.0 / X.shape[1] for X in sub]
                t_c, kcca = timed(lambda: KCCA(k, shrinkage=1.0, kernel="rbf", gamma=gammas).fit(sub), rep)
                row["kcca"] = t_c
                if N <= 500:
                    held_out = [X[N:N + 200] for X in views]
                    row["peer"] = peer_disagreement(kcca.transform(held_out), lan.transform(held_out))
                    assert row["peer"] < 1e-8, f"cca-zoo's KCCA disagrees at N = {N}: {row['peer']:.1e}"
        rows.append(row)
        print(f"N = {N} done", flush=True)

    def cell(row, key, fmt="{:.3f}"):
        return fmt.format(row[key]) if key in row else "-"

    print()
    print("| N | V N | lanczos [s] | dense S [s] | eig(Omega) [s] | cca-zoo KCCA [s] | "
          "rel. err lanczos / eig(Omega) vs dense S |")
    print("|---:|---:|---:|---:|---:|---:|:---|")
    for r in rows:
        print(f"| {r['N']} | {3 * r['N']} | {cell(r, 'lanczos')} | {cell(r, 'dense')} | {cell(r, 'eig')} | "
              f"{cell(r, 'kcca')} | {cell(r, 'err_l', '{:.0e}')} / {cell(r, 'err_e', '{:.0e}')} |")
    if KCCA is None:
        print("\ncca-zoo is not installed: no peer column and no check of its scores "
              "(pip install cca-zoo==4.0.1).")
    else:
        print("\ncca-zoo's out-of-sample scores, largest 1 - |corr| against MultiViewKPLS:",
              {r["N"]: f"{r['peer']:.0e}" for r in rows if "peer" in r})


if __name__ == "__main__":
    main()
