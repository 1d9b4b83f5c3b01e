"""Low-rank SMM: the parts of one alternation, its box QPs against clarabel and libsvm, and fit time against n.

Usage::

    python benchmarks/bench_smm.py            # parts at n = 2000; fit for n = 250 ... 4000 (a few minutes)
    python benchmarks/bench_smm.py --quick    # parts at n = 500; fit for n = 250, 500, 1000 (under a minute)

Data: scikit-learn's digits (1797 images of 8 x 8, intensities / 16), labels
+1 for a digit < 5 and -1 otherwise. Sizes beyond 1797 append one-pixel-shifted
copies (zero fill), first all images shifted right by one pixel, then shifted
down: n = 2000 is the 1797 images plus the first 203 shifted right; n = 4000
adds all 1797 shifted right and the first 406 shifted down. Model:
``LowRankSMM(rank=2, row_kernel=RBF(1), col_kernel=RBF(1), C=1)``, no
intercept (the source's model), so each half-step's dual is the box QP
``min 1/2 a'Qa - 1'a, 0 <= a <= C``.

Part 1, one alternation (a P-step, then a C-step) at ``--n`` matrices, from the
state a fit reaches after its SVD start and first C-step (the package's own
half-step code: ``LowRankSMM._p_step``, ``LowRankSMM._c_step`` and the
per-side kernel object ``mvkm.smm._Side``; private, so this script follows
the package's internals). Timed separately:

* P-step contractions: ``C^T Phi(X_i)`` for rows and columns (kernel values
  between the support matrices' rows and all rows, contracted with beta and
  P), ``C^T C``, the features ``Z`` and ``K_P = Z Z^T``;
* C-step projected kernel: ``tr(W_r K_r(i, j)) + tr(W_c K_c(i, j))`` for all pairs;
* each QP by ``mvkm.smm.solve_box_qp``: warm (started at |beta| of the
  previous half-step, as ``fit`` does) and cold (from 0);
* the same QP by clarabel (a generic interior-point QP solver; Q given as a
  dense upper triangle; set-up and solve, tolerances 1e-12 as in the tests),
  cold: the speed-up column divides clarabel's time by the cold
  ``solve_box_qp`` time;
* ``sklearn.svm.SVC(kernel="precomputed", C=1)`` (libsvm, tol 1e-3) on the
  same kernel, for reference only: it solves the variant *with* intercept
  (an extra equality constraint), so its objective is not comparable.

The agreement column is |D_ours - D_clarabel| / |D_clarabel| for the dual
objective D(a) = 1/2 a'Qa - 1'a (goal 1e-7); the target speed-up is 50x.
Both whole half-steps (``_p_step`` and ``_c_step``, which include their QP)
are timed too, to check that the parts add up.

Part 2, ``LowRankSMM.fit`` against n: ``max_iter=--fit-iter`` alternations
with ``tol=0`` (a fixed amount of work: the SVD start's full-rank C-step, the
first C-step and that many alternations; fits on these data need tens of
alternations to meet the default tol, which at n = 4000 would take many
minutes), against a peer: one SVM, ``SVC(kernel="precomputed")`` on the
full-rank sum kernel (what the model is at rank = 8), kernel build included.
The log-log plot goes to ``benchmarks/results/bench_smm.png`` with the
fitted slopes. The package keeps each side's n^2 d^2 block kernel in memory
when it has at most 2^24 entries (n <= 512 here) and recomputes kernel tiles
otherwise, so the slope is also fitted on n >= 1000 alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC
from threadpoolctl import threadpool_info

import mvkm
from mvkm import LowRankSMM
from mvkm.linalg import ConvergenceWarning
from mvkm.smm import _Side, solve_box_qp, svm_objective

SIGMA, RANK, C = 1.0, 2, 1.0
RESULTS = Path(__file__).resolve().parent / "results"


def shifted(X: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Images moved by (dy, dx) pixels, zero fill (no wrap-around)."""
    out = np.zeros_like(X)
    h, w = X.shape[1:]
    out[:, max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        X[:, max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
    return out


def digits_matrices(n: int) -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    X, y = d.images / 16.0, np.where(d.target < 5, 1.0, -1.0)
    blocks = [X, shifted(X, 0, 1), shifted(X, 1, 0), shifted(X, 0, -1)]
    if n > len(X) * len(blocks):
        raise ValueError(f"n must be at most {len(X) * len(blocks)}")
    return np.concatenate(blocks)[:n], np.tile(y, len(blocks))[:n]


class Time(float):
    """Median wall-clock seconds, with the median CPU seconds of this process as ``.cpu``."""

    cpu: float

    def __new__(cls, wall: float, cpu: float) -> "Time":
        obj = super().__new__(cls, wall)
        obj.cpu = cpu
        return obj

    def __format__(self, spec: str) -> str:
        return f"{float(self):{spec}} ({self.cpu:{spec}})"


def timed(f, repeat: int = 1):
    """(Time: median wall-clock and CPU seconds, last result). On a shared machine the CPU time of
    this single-threaded process (BLAS limited to one thread) measures the work; wall time adds the
    waiting for a core."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = f()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return Time(statistics.median(walls), statistics.median(cpus)), out


def dual_objective(Q: np.ndarray, a: np.ndarray) -> float:
    return float(0.5 * a @ Q @ a - a.sum())


def clarabel_box_qp(Q: np.ndarray, upper: float) -> np.ndarray:
    """min 1/2 a'Qa - 1'a s.t. 0 <= a <= upper by clarabel (as tests/test_smm.py::clarabel_svm)."""
    import clarabel

    n = Q.shape[0]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
    A = sp.vstack([sp.eye(n), -sp.eye(n)]).tocsc()
    b = np.concatenate([np.full(n, float(upper)), np.zeros(n)])
    sol = clarabel.DefaultSolver(sp.csc_matrix(np.triu(0.5 * (Q + Q.T))), -np.ones(n), A, b,
                                 [clarabel.NonnegativeConeT(2 * n)], settings).solve()
    return np.asarray(sol.x)


def p_step_features(model: LowRankSMM, sides, Ur, Uc, beta) -> np.ndarray:
    """The P-step's kernel K_P = Z Z^T, as LowRankSMM._p_step builds it (contractions included)."""
    feats = []
    for side, U in zip(sides, (Ur, Uc)):
        V = side.contract(beta, U)
        CtC = np.einsum("i,ikq,qj->kj", beta, V, U)
        CtC = 0.5 * (CtC + CtC.T)
        evals, evecs = np.linalg.eigh(CtC)
        keep = evals > CtC.shape[0] * np.finfo(float).eps * max(float(evals.max()), 0.0)
        inv_half = (evecs[:, keep] / np.sqrt(evals[keep])) @ evecs[:, keep].T
        feats.append(np.einsum("kj,ijq->ikq", inv_half, V).reshape(len(beta), -1))
    Z = np.hstack(feats)
    return Z @ Z.T


def qp_row(name: str, K: np.ndarray, y: np.ndarray, alpha0: np.ndarray, repeat: int, peers: bool) -> dict:
    Q = K * np.outer(y, y)
    t_warm, (a_warm, it_warm) = timed(lambda: solve_box_qp(Q, C, alpha0=alpha0), repeat)
    t_cold, (a_cold, it_cold) = timed(lambda: solve_box_qp(Q, C), repeat)
    row = {"qp": name, "n": len(y), "t_warm": t_warm, "t_cold": t_cold, "it_warm": it_warm, "it_cold": it_cold,
           "D": dual_objective(Q, a_cold), "D_warm": dual_objective(Q, a_warm),
           "n_sv": int(np.sum(a_cold > 0)), "n_bound": int(np.sum(a_cold >= C))}
    # the primal objective of our classifier (its duality gap closes to ~1e-12)
    row["P"] = svm_objective(K, y, y * a_cold, C)
    if peers:
        row["t_clarabel"], a_cl = timed(lambda: clarabel_box_qp(Q, C))
        row["D_clarabel"] = dual_objective(Q, a_cl)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row["t_svc"], svc = timed(lambda: SVC(kernel="precomputed", C=C, cache_size=1000).fit(K, y))
        beta = np.zeros(len(y))
        beta[svc.support_] = svc.dual_coef_[0]
        row["P_svc"] = svm_objective(K, y, beta, C, float(svc.intercept_[0]))
    return row


def one_alternation(n: int, repeat: int, peers: bool) -> tuple[list[dict], dict]:
    X, y = digits_matrices(n)
    model = LowRankSMM(rank=RANK, row_kernel=mvkm.RBF(SIGMA), col_kernel=mvkm.RBF(SIGMA), C=C)
    Xr, Xc = X, np.ascontiguousarray(X.transpose(0, 2, 1))
    sides = (_Side(model.row_kernel, Xr), _Side(model.col_kernel, Xc))
    cached = sides[0].T is not None
    # the state of fit after the SVD start and the first C-step
    beta0, _, _ = model._c_step(sides, np.eye(8), np.eye(8), y, None)
    Ur, Uc = (model._svd_start(side, beta0, RANK) for side in sides)
    beta, _, obj0 = model._c_step(sides, Ur, Uc, y, np.abs(beta0))

    parts = {"n": n, "cached": cached, "obj0": obj0}
    parts["t_contract"], K_P = timed(lambda: p_step_features(model, sides, Ur, Uc, beta), repeat)
    parts["t_p_step"], (Ur2, Uc2, obj_p, beta_p) = timed(lambda: model._p_step(sides, Ur, Uc, beta, y), repeat)
    parts["t_gram"], K_C = timed(lambda: sides[0].gram(Ur2) + sides[1].gram(Uc2), repeat)
    parts["t_c_step"], (beta_c, _, obj_c) = timed(lambda: model._c_step(sides, Ur2, Uc2, y, np.abs(beta_p)), repeat)
    parts["obj_p"], parts["obj_c"] = obj_p, obj_c
    rows = [qp_row("P-step", K_P, y, np.abs(beta), repeat, peers),
            qp_row("C-step", K_C, y, np.abs(beta_p), repeat, peers)]
    return rows, parts


def sum_kernel_svm(X: np.ndarray, y: np.ndarray) -> SVC:
    """The full-rank model (rank = 8): SVC on k(X, X') = sum_p k(row_p, row_p') + sum_q k(col_q, col_q')."""
    g = 1.0 / (2.0 * SIGMA**2)
    K = sum(rbf_kernel(X[:, p, :], gamma=g) for p in range(X.shape[1]))
    K += sum(rbf_kernel(X[:, :, q], gamma=g) for q in range(X.shape[2]))
    return SVC(kernel="precomputed", C=C, cache_size=1000).fit(K, y)


def fit_scaling(sizes: list[int], fit_iter: int) -> list[dict]:
    rows = []
    for n in sizes:
        X, y = digits_matrices(n)
        model = LowRankSMM(rank=RANK, row_kernel=mvkm.RBF(SIGMA), col_kernel=mvkm.RBF(SIGMA), C=C,
                           max_iter=fit_iter, tol=0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t_fit, _ = timed(lambda: model.fit(X, y))
        t_svc, svc = timed(lambda: sum_kernel_svm(X, y))
        rows.append({"n": n, "t_fit": t_fit, "n_iter": model.n_iter_, "obj": model.objective_[-1],
                     "train_acc": model.score(X, y), "t_svc": t_svc})
        print(f"  fit n = {n}: {t_fit:.2f} s wall (CPU)", flush=True)
    return rows


def slope(ns, ts) -> float:
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small run: parts at n = 500, fit for n = 250 500 1000")
    parser.add_argument("--n", type=int, default=2000, help="size of part 1 (default 2000)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000],
                        help="sizes of part 2 (default 250 500 1000 2000 4000)")
    parser.add_argument("--fit-iter", type=int, default=2, help="alternations per fit in part 2 (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each cheap timing (median)")
    parser.add_argument("--clarabel-max", type=int, default=2000, help="largest n given to clarabel")
    args = parser.parse_args(argv)
    n1 = 500 if args.quick else args.n
    sizes = [250, 500, 1000] if args.quick else args.sizes
    t_start = time.perf_counter()

    blas = [f"{i['internal_api']} ({i['num_threads']} threads)" for i in threadpool_info()
            if i["user_api"] == "blas"]
    print(f"# Low-rank SMM: mvkm {mvkm.__version__}, numpy {np.__version__}, BLAS {', '.join(blas)}; "
          f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print(f"# data: scikit-learn digits / 16 (+ one-pixel-shifted copies), y = +1 for digit < 5; "
          f"rank {RANK}, RBF sigma = {SIGMA} on rows and columns, C = {C}, no intercept")
    print(f"# load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")

    # warm-up: numba compilation (cached on disk after the first run) and imports
    Xw, yw = digits_matrices(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        LowRankSMM(rank=RANK, row_kernel=mvkm.RBF(SIGMA), col_kernel=mvkm.RBF(SIGMA), max_iter=1).fit(Xw, yw)
    clarabel_box_qp(np.eye(3), 1.0)

    rows, parts = one_alternation(n1, args.repeats, peers=n1 <= args.clarabel_max)
    print()
    print(f"## One alternation at n = {n1} ({'block kernel cached' if parts['cached'] else 'kernel tiles recomputed'}),"
          f" wall-clock (CPU) seconds, median of {args.repeats}; clarabel and SVC once")
    print()
    print("| part | wall (CPU) [s] |")
    print("|:---|---:|")
    print(f"| P-step contractions (C^T Phi(X_i) both sides, C^T C, Z, K_P = Z Z^T) | {parts['t_contract']:.3f} |")
    print(f"| P-step QP, solve_box_qp warm | {rows[0]['t_warm']:.3f} |")
    print(f"| whole P-step (`_p_step`) | {parts['t_p_step']:.3f} |")
    print(f"| C-step projected kernel (both sides) | {parts['t_gram']:.3f} |")
    print(f"| C-step QP, solve_box_qp warm | {rows[1]['t_warm']:.3f} |")
    print(f"| whole C-step (`_c_step`) | {parts['t_c_step']:.3f} |")
    both = Time(parts['t_p_step'] + parts['t_c_step'], parts['t_p_step'].cpu + parts['t_c_step'].cpu)
    print(f"| one alternation (whole P-step + whole C-step) | {both:.3f} |")
    print()
    print(f"Objective: {parts['obj0']:.6f} after the first C-step, {parts['obj_p']:.6f} after the P-step, "
          f"{parts['obj_c']:.6f} after the C-step.")
    print()
    print("## The box QPs of that alternation: solve_box_qp against clarabel (cold) and libsvm")
    print()
    print("Times: wall (CPU) seconds; speed-ups: wall (CPU).")
    print()
    print("| QP | n | support (at C) | solve_box_qp warm [s] | updates | cold [s] | updates | clarabel [s] | "
          "speed-up cold vs clarabel | warm vs clarabel | rel. diff. dual objective vs clarabel | "
          "dual gap ours | SVC with intercept [s] |")
    print("|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    speedups, agreements = [], []
    for r in rows:
        if "t_clarabel" in r:
            s_cold = (r["t_clarabel"] / r["t_cold"], r["t_clarabel"].cpu / r["t_cold"].cpu)
            s_warm = (r["t_clarabel"] / r["t_warm"], r["t_clarabel"].cpu / r["t_warm"].cpu)
            agree = abs(r["D"] - r["D_clarabel"]) / abs(r["D_clarabel"])
            speedups.append(s_cold)
            agreements.append(agree)
            cl = (f"{r['t_clarabel']:.2f} | {s_cold[0]:.0f}x ({s_cold[1]:.0f}x) | "
                  f"{s_warm[0]:.0f}x ({s_warm[1]:.0f}x) | {agree:.1e}")
            svc = f"{r['t_svc']:.2f}"
        else:
            cl, svc = "- | - | - | -", "-"
        gap = (r["P"] + r["D"]) / max(1.0, abs(r["P"]))
        print(f"| {r['qp']} | {r['n']} | {r['n_sv']} ({r['n_bound']}) | {r['t_warm']:.3f} | {r['it_warm']} | "
              f"{r['t_cold']:.3f} | {r['it_cold']} | {cl} | {gap:.0e} | {svc} |")
    if speedups:
        worst = min(min(s) for s in speedups)
        print()
        print(f"Goals: speed-up >= 50x against clarabel (cold, wall and CPU): smallest {worst:.0f}x, "
              f"{'met' if worst >= 50 else 'NOT met'}; agreement <= 1e-7: largest {max(agreements):.1e}, "
              f"{'met' if max(agreements) <= 1e-7 else 'NOT met'}.")
    print()
    for r in rows:
        if "D_clarabel" in r:
            print(f"{r['qp']}: dual objective ours {r['D']:.10f} (warm {r['D_warm']:.10f}), clarabel "
                  f"{r['D_clarabel']:.10f}; SVC's primal objective with intercept {r['P_svc']:.6f} "
                  f"(ours without: {r['P']:.6f}; another problem, for reference).")

    print()
    fits = fit_scaling(sizes, args.fit_iter)
    ns = np.array([r["n"] for r in fits], dtype=float)
    tf = np.array([r["t_fit"].cpu for r in fits])            # CPU seconds: the work, whatever the load
    ts = np.array([r["t_svc"].cpu for r in fits])
    tf_wall = np.array([float(r["t_fit"]) for r in fits])
    print()
    print(f"## LowRankSMM.fit against n (max_iter={args.fit_iter}, tol=0: SVD start + first C-step + "
          f"{args.fit_iter} alternations), peer: SVC on the full-rank sum kernel (kernel included)")
    print()
    print("| n | fit wall (CPU) [s] | alternations | objective | training accuracy | "
          "SVC on sum kernel wall (CPU) [s] | fit / SVC (CPU) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in fits:
        print(f"| {r['n']} | {r['t_fit']:.2f} | {r['n_iter']} | {r['obj']:.4f} | {r['train_acc']:.3f} | "
              f"{r['t_svc']:.2f} | {r['t_fit'].cpu / r['t_svc'].cpu:.1f} |")
    big = ns >= 1000
    s_all, s_svc, s_wall = slope(ns, tf), slope(ns, ts), slope(ns, tf_wall)
    s_big = slope(ns[big], tf[big]) if big.sum() >= 2 else float("nan")
    print()
    print(f"Fitted log-log slope of fit CPU time: {s_all:.2f} over all n, {s_big:.2f} over n >= 1000 "
          f"(wall time: {s_wall:.2f} over all n); SVC peer (CPU): {s_svc:.2f}.")

    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.loglog(ns, tf, "o-", label=f"LowRankSMM.fit, {args.fit_iter} alternations (slope {s_all:.2f})")
    ax.loglog(ns, ts, "s--", label=f"SVC on the sum kernel (slope {s_svc:.2f})")
    ax.loglog(ns, tf[-1] * (ns / ns[-1]) ** 2, ":", color="grey", label="slope 2")
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("n (8 x 8 matrices)")
    ax.set_ylabel("CPU time [s] (one thread)")
    ax.set_title("Low-rank SMM on digits, rank 2, RBF rows and columns", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    out = RESULTS / "bench_smm.png"
    fig.savefig(out, dpi=120)
    print(f"Plot: {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    print()
    print(f"# total wall time {time.perf_counter() - t_start:.0f} s; "
          f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
