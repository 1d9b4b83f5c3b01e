"""Low-rank SMM: the parts of one alternation, its QPs by the package's solver against libsvm, liblinear and clarabel, fits with each, and fit time against n.

Usage::

    python benchmarks/bench_smm.py            # parts at n = 2000; peer fits at n = 500; fit for n = 250 ... 4000
    python benchmarks/bench_smm.py --quick    # parts at n = 500; peer fits at n = 250; fit for n = 250, 500, 1000

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
the package's internals). Timed separately: the P-step's contractions
(``C^T Phi(X_i)`` for rows and columns, ``C^T C``, the features ``Z`` and
``K_P = Z Z^T``), the C-step's projected kernel, and both whole half-steps.

Part 2, the two QPs of that alternation by every solver, run round-robin
``--peer-repeats`` times (a change of the machine's load hits all alike; best
of the runs, median beside it):

* ``mvkm.smm.solve_box_qp`` warm (from |beta| of the previous half-step, as
  ``fit`` starts it) and cold (from 0); duality gap ~1e-12 (active-set finish);
* liblinear, ``LinearSVC(dual=True, loss="hinge", fit_intercept=False)`` on
  the P-step's explicit features ``Z`` (n x 32; the C-step's kernel has no
  small explicit features), tol 1e-4 (its default) and 1e-10;
* libsvm on the same problem without intercept: ``SVC(kernel="precomputed")``
  on the mirrored 2n points (x_i, y_i), (-x_i, -y_i) with cost C/2, whose
  optimal intercept is 0 (``libsvm_mirrored``), tol 1e-3 (its default) and 1e-10;
* the problem *with* intercept (the model's ``fit_intercept=True``): libsvm
  ``SVC`` on K (tol 1e-3 and 1e-10) against the package's exact route
  (``mvkm.smm._svm_with_intercept``: libsvm's answer, then a root search on b
  over box QPs);
* clarabel (a generic interior-point QP solver, tolerances 1e-12), once.

The accuracy of each answer is its classifier's primal objective P relative
to a certified lower bound L of the optimum (the largest dual objective among
the answers): (P - L) / L. libsvm keeps its kernel cache in single precision,
so no tol takes it much below 1e-7.

Part 3, ``LowRankSMM.fit`` to its default tol (1e-6) at ``--peer-fit-n`` with
each set of half-step solvers (``PeerSMM``): the package's; liblinear's
P-step (from w alone) at tol 1e-10 and 1e-6 with the package's C-step;
liblinear and libsvm (mirrored) tight; and both at their defaults. Reported: time (and the part
spent in QPs), alternations, how the fit stopped (the fit stops with a
warning when a half-step raises the objective beyond 1e-8 of it: each
half-step is meant to be solved exactly), the final objective, the largest
rise between half-steps and the decision values against the package's fit.

Part 4, ``LowRankSMM.fit`` against n: ``max_iter=--fit-iter`` alternations
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
from sklearn.svm import SVC, LinearSVC
from threadpoolctl import threadpool_info

import mvkm
from mvkm import LowRankSMM
from mvkm.linalg import ConvergenceWarning
import mvkm.smm as smm_module
from mvkm.smm import _Side, _orthonormal, _svm_objective, _svm_with_intercept, solve_box_qp, svm_objective

SIGMA, RANK, C = 1.0, 2, 1.0
LIBLINEAR_TOLS = (1e-4, 1e-10)          # its default, and tight
LIBSVM_TOLS = (1e-3, 1e-10)             # its default, and tight
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


def p_step_features(model: LowRankSMM, sides, Ur, Uc, beta, features: bool = False) -> np.ndarray:
    """The P-step's kernel K_P = Z Z^T, as LowRankSMM._p_step builds it (contractions included);
    its features Z if ``features``."""
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
    return Z if features else Z @ Z.T


def primal_features(Z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The SVM primal objective 1/2 |w|^2 + C sum max(0, 1 - y_i z_i'w) of explicit features Z."""
    return float(0.5 * w @ w + C * np.maximum(0.0, 1.0 - y * (Z @ w)).sum())


LIBLINEAR_MAX_ITER = 100_000
LIBLINEAR_CAPPED = [0]                  # liblinear runs that ended at max_iter (its tol not met)


def liblinear_w(Z: np.ndarray, y: np.ndarray, tol: float) -> np.ndarray:
    """LIBLINEAR's dual coordinate descent on the features Z, no intercept: the same SVM as the QP
    (scikit-learn exposes w, not the dual; random_state fixes its order of coordinates)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lin = LinearSVC(dual=True, loss="hinge", fit_intercept=False, C=C, tol=tol,
                        max_iter=LIBLINEAR_MAX_ITER, random_state=0).fit(Z, y)
    LIBLINEAR_CAPPED[0] += int(lin.n_iter_ >= LIBLINEAR_MAX_ITER)
    return lin.coef_[0]


def libsvm_beta(K: np.ndarray, y: np.ndarray, tol: float) -> tuple[np.ndarray, float]:
    """libsvm (SVC, kernel precomputed) on K: the SVM *with* intercept. Returns (beta = y alpha, b)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svc = SVC(kernel="precomputed", C=C, tol=tol, cache_size=1000, max_iter=10**7).fit(K, y)
    beta = np.zeros(len(y))
    beta[svc.support_] = svc.dual_coef_[0]
    return beta, float(svc.intercept_[0])


def libsvm_mirrored(K: np.ndarray, y: np.ndarray, tol: float) -> tuple[np.ndarray, float]:
    """libsvm on the SVM *without* intercept: the 2n points (x_i, y_i) and (-x_i, -y_i), kernel
    [[K, -K], [-K, K]], cost C/2 each. By convexity (Jensen on the two hinges) the optimal
    intercept is 0 and the solution is the SVM without intercept with cost C; beta_i is
    beta_i - beta_{n+i} of the doubled problem (the kernel's construction is timed)."""
    n = len(y)
    Ka = np.block([[K, -K], [-K, K]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svc = SVC(kernel="precomputed", C=C / 2, tol=tol, cache_size=1000, max_iter=10**7).fit(
            Ka, np.concatenate([y, -y]))
    ba = np.zeros(2 * n)
    ba[svc.support_] = svc.dual_coef_[0]
    return ba[:n] - ba[n:], float(svc.intercept_[0])


def interleaved(solvers: dict, repeat: int) -> dict:
    """Each solver run `repeat` times, round-robin (so that a change of the machine's load hits all
    of them alike): {name: (best wall, best CPU, median wall, last result)}."""
    walls = {k: [] for k in solvers}
    cpus = {k: [] for k in solvers}
    outs = {}
    for _ in range(repeat):
        for k, f in solvers.items():
            t0, c0 = time.perf_counter(), time.process_time()
            outs[k] = f()
            walls[k].append(time.perf_counter() - t0)
            cpus[k].append(time.process_time() - c0)
    return {k: (min(walls[k]), min(cpus[k]), statistics.median(walls[k]), outs[k]) for k in solvers}


def qp_peers(name: str, K: np.ndarray, y: np.ndarray, alpha0: np.ndarray, Z: np.ndarray | None,
             repeat: int, clarabel_too: bool) -> list[dict]:
    """The QP of one half-step by every solver, interleaved; the accuracy of each answer.

    Accuracy: the primal objective P of the classifier each solver returns (``svm_objective``;
    from w for liblinear), relative to a certified lower bound of the optimum: the largest dual
    objective 1'a - 1/2 a'Qa among the answers (the package's, whose duality gap closes to
    ~1e-12; for the problem with intercept, among the answers with y'a = 0)."""
    Q = K * np.outer(y, y)
    solvers = {("no", "solve_box_qp, warm (as fit)"): lambda: (solve_box_qp(Q, C, alpha0=alpha0)[0] * y, 0.0),
               ("no", "solve_box_qp, cold"): lambda: (solve_box_qp(Q, C)[0] * y, 0.0)}
    if Z is not None:
        for tol in LIBLINEAR_TOLS:
            solvers[("no", f"liblinear on Z, tol {tol:g}")] = (lambda t=tol: (liblinear_w(Z, y, t), None))
    for tol in LIBSVM_TOLS:
        solvers[("no", f"libsvm, mirrored 2n, tol {tol:g}")] = (lambda t=tol: libsvm_mirrored(K, y, t))
    solvers[("with", "mvkm (root search on b, from libsvm)")] = lambda: _svm_with_intercept(K, y, C, alpha0)
    for tol in LIBSVM_TOLS:
        solvers[("with", f"libsvm SVC, tol {tol:g}")] = (lambda t=tol: libsvm_beta(K, y, t))
    res = interleaved(solvers, repeat)
    if clarabel_too:          # slow (seconds): once, not interleaved
        t, a_cl = timed(lambda: clarabel_box_qp(Q, C))
        res[("no", "clarabel (interior point), once")] = (float(t), t.cpu, float(t), (a_cl * y, 0.0))

    rows = []
    lower = {"no": -np.inf, "with": -np.inf}
    for (problem, solver), (*_, (coef, b)) in res.items():
        if b is None:                    # liblinear: primal w only
            continue
        a = y * coef
        if problem == "with" and abs(y @ a) > 1e-9 * max(1.0, np.abs(a).sum()):
            continue
        lower[problem] = max(lower[problem], float(a.sum() - 0.5 * a @ Q @ a))
    for (problem, solver), (wall, cpu, med, (coef, b)) in res.items():
        P = primal_features(Z, y, coef) if b is None else svm_objective(K, y, coef, C, float(b) if problem == "with" else 0.0)
        rows.append({"qp": name, "n": len(y), "problem": problem, "solver": solver, "wall": wall, "cpu": cpu,
                     "median": med, "P": P, "err": (P - lower[problem]) / abs(lower[problem]),
                     "b": b if problem == "no" and b is not None and "libsvm" in solver else None})
    return rows


class PeerSMM(LowRankSMM):
    """LowRankSMM whose half-step QPs are solved by the peers (this benchmark only).

    ``p_tol``: the P-step by liblinear on its features Z at that tol (``None``: the package's
    solver). liblinear gives w = Z'beta, not beta; the P-step needs only w, since
    ``sum_i beta_i V_i = (C^T C)^{1/2} W`` on each side (W: w's block as an r x d matrix), and
    the next C-step's start (|beta| in ``fit``) is taken as C at the margin violators.
    ``c_tol``: the C-step by libsvm on the mirrored kernel at that tol (``None``: the package's).
    The seconds spent in the QPs, whoever solves them, add up in ``qp_seconds``."""

    p_tol: float | None = None
    c_tol: float | None = None

    def _c_step(self, sides, Ur, Uc, y, alpha0):
        if self.c_tol is None:
            return LowRankSMM._c_step(self, sides, Ur, Uc, y, alpha0)
        K = sides[0].gram(Ur) + sides[1].gram(Uc)
        t0 = time.perf_counter()
        beta, _ = libsvm_mirrored(K, y, self.c_tol)
        self.qp_seconds += time.perf_counter() - t0
        return beta, 0.0, _svm_objective(K, y, beta, C, 0.0)

    def _p_step(self, sides, Ur, Uc, beta, y):
        if self.p_tol is None:
            return LowRankSMM._p_step(self, sides, Ur, Uc, beta, y)
        feats, parts = [], []
        for side, U in zip(sides, (Ur, Uc)):
            V = side.contract(beta, U)                             # as LowRankSMM._p_step
            CtC = np.einsum("i,ikq,qj->kj", beta, V, U)
            CtC = 0.5 * (CtC + CtC.T)
            evals, evecs = np.linalg.eigh(CtC)
            keep = evals > CtC.shape[0] * np.finfo(float).eps * max(float(evals.max()), 0.0)
            E, s = evecs[:, keep], evals[keep]
            feats.append(np.einsum("kj,ijq->ikq", (E / np.sqrt(s)) @ E.T, V).reshape(len(y), -1))
            parts.append(((E * np.sqrt(s)) @ E.T, (E / s) @ E.T, V.shape[1:]))
        Z = np.hstack(feats)
        t0 = time.perf_counter()
        w = liblinear_w(Z, y, self.p_tol)
        self.qp_seconds += time.perf_counter() - t0
        new, off = [], 0
        for (half, inv, (r, d)), U in zip(parts, (Ur, Uc)):
            S = half @ w[off:off + r * d].reshape(r, d)            # sum_i beta_i V_i
            off += r * d
            Un = _orthonormal(S.T @ inv)
            new.append(Un if Un.shape[1] else U)
        beta_p = C * y * (y * (Z @ w) < 1.0)
        return new[0], new[1], primal_features(Z, y, w), beta_p


def timed_box_qp(model):
    """Wrap mvkm.smm._box_qp so that the package's QP seconds add up in model.qp_seconds."""
    inner = smm_module._box_qp

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            model.qp_seconds += time.perf_counter() - t0
    return inner, wrapper


FIT_VARIANTS = [  # (label, p_tol, c_tol)
    ("mvkm: solve_box_qp both half-steps", None, None),
    ("liblinear P-step (tol 1e-10), solve_box_qp C-step", 1e-10, None),
    ("liblinear P-step (tol 1e-6), solve_box_qp C-step", 1e-6, None),
    ("peers, tight: liblinear 1e-10, libsvm mirrored 1e-10", 1e-10, 1e-10),
    ("peers, defaults: liblinear 1e-4, libsvm mirrored 1e-3", 1e-4, 1e-3),
]


def peer_fits(n: int, repeat: int) -> list[dict]:
    """LowRankSMM.fit to its default tol (1e-6) with each half-step solver, interleaved."""
    X, y = digits_matrices(n)
    out = {}
    times = {label: [] for label, *_ in FIT_VARIANTS}
    for _ in range(repeat):
        for label, p_tol, c_tol in FIT_VARIANTS:
            model = PeerSMM(rank=RANK, row_kernel=mvkm.RBF(SIGMA), col_kernel=mvkm.RBF(SIGMA), C=C)
            model.p_tol, model.c_tol, model.qp_seconds = p_tol, c_tol, 0.0
            inner, wrapper = timed_box_qp(model)
            LIBLINEAR_CAPPED[0] = 0
            smm_module._box_qp = wrapper
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ConvergenceWarning)
                    t, _ = timed(lambda: model.fit(X, y))
            finally:
                smm_module._box_qp = inner
            times[label].append((float(t), t.cpu, model.qp_seconds))
            capped = LIBLINEAR_CAPPED[0]
            stop = "converged (tol 1e-6)"
            for w in caught:
                text = str(w.message)
                stop = ("objective rose: stopped" if "raised the objective" in text else
                        "stagnated" if "stagnated" in text else "max_iter" if "did not converge" in text
                        else stop)
            if capped:
                stop += f"; liblinear at max_iter in {capped} P-steps"
            obj = model.objective_
            rises = np.diff(obj)                                 # half-step to half-step
            out[label] = {"variant": label, "n_iter": model.n_iter_, "obj": obj[-1], "stop": stop,
                          "rise": float(max(rises.max(), 0.0) / abs(obj[-1])) if rises.size else 0.0,
                          "acc": model.score(X, y), "f": model.decision_function(X)}
    rows = []
    f0 = out[FIT_VARIANTS[0][0]]["f"]
    obj0 = out[FIT_VARIANTS[0][0]]["obj"]
    for label, *_ in FIT_VARIANTS:
        r = out[label]
        best = min(times[label])
        r.update(wall=best[0], cpu=min(c for _, c, _ in times[label]), qp=best[2],
                 dobj=(r["obj"] - obj0) / abs(obj0),
                 df=float(np.abs(r.pop("f") - f0).max() / np.abs(f0).max()))
        rows.append(r)
    return rows


def one_alternation(n: int, repeat: int, peer_repeat: int, peers: bool) -> tuple[list[dict], dict]:
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
    Z = p_step_features(model, sides, Ur, Uc, beta, features=True)
    parts["t_zzt"], _ = timed(lambda: Z @ Z.T, repeat)
    rows = (qp_peers("P-step", K_P, y, np.abs(beta), Z, peer_repeat, peers)
            + qp_peers("C-step", K_C, y, np.abs(beta_p), None, peer_repeat, peers))
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
    parser.add_argument("--peer-repeats", type=int, default=6,
                        help="interleaved runs of each QP solver (best of)")
    parser.add_argument("--fit-repeats", type=int, default=2, help="interleaved runs of each peer fit (best of)")
    parser.add_argument("--peer-fit-n", type=int, default=500, help="n of the fits with each solver (default 500)")
    parser.add_argument("--clarabel-max", type=int, default=2000, help="largest n given to clarabel")
    args = parser.parse_args(argv)
    n1 = 500 if args.quick else args.n
    sizes = [250, 500, 1000] if args.quick else args.sizes
    if args.quick:
        args.peer_fit_n = min(args.peer_fit_n, 250)
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
    liblinear_w(np.eye(4), np.array([1.0, -1.0, 1.0, -1.0]), 1e-4)

    rows, parts = one_alternation(n1, args.repeats, args.peer_repeats, peers=n1 <= args.clarabel_max)
    print()
    print(f"## One alternation at n = {n1} ({'block kernel cached' if parts['cached'] else 'kernel tiles recomputed'}),"
          f" wall-clock (CPU) seconds, median of {args.repeats}")
    print()
    print("| part | wall (CPU) [s] |")
    print("|:---|---:|")
    qp = {(r["qp"], r["solver"]): r for r in rows}
    warm_p, warm_c = qp[("P-step", "solve_box_qp, warm (as fit)")], qp[("C-step", "solve_box_qp, warm (as fit)")]
    print(f"| P-step contractions (C^T Phi(X_i) both sides, C^T C, Z, K_P = Z Z^T) | {parts['t_contract']:.3f} |")
    print(f"| of which K_P = Z Z^T | {parts['t_zzt']:.3f} |")
    print(f"| whole P-step (`_p_step`) | {parts['t_p_step']:.3f} |")
    print(f"| C-step projected kernel (both sides) | {parts['t_gram']:.3f} |")
    print(f"| whole C-step (`_c_step`) | {parts['t_c_step']:.3f} |")
    both = Time(parts['t_p_step'] + parts['t_c_step'], parts['t_p_step'].cpu + parts['t_c_step'].cpu)
    print(f"| one alternation (whole P-step + whole C-step) | {both:.3f} |")
    share = (warm_p["cpu"] + warm_c["cpu"]) / both.cpu
    print()
    print(f"The two QPs (solve_box_qp warm, best CPU of the table below: {warm_p['cpu']:.3f} + {warm_c['cpu']:.3f} s) "
          f"are {100 * share:.0f} % of the alternation's CPU time.")
    print(f"Objective: {parts['obj0']:.6f} after the first C-step, {parts['obj_p']:.6f} after the P-step, "
          f"{parts['obj_c']:.6f} after the C-step.")
    print()
    print(f"## The QPs of that alternation by every solver, interleaved: best of {args.peer_repeats} "
          f"(median wall in the last column)")
    print()
    print("Problem 'no': the SVM without intercept (the model's half-step, the box QP); 'with': the SVM with "
          "intercept (the model with fit_intercept=True). Error: (P - L) / L, P the primal objective of the "
          "solver's classifier, L the largest dual objective among the answers (a certified lower bound of "
          "the optimum). liblinear works on the P-step's features Z (n x 32), the others on the n x n kernel; "
          "'mirrored 2n': libsvm on the kernel [[K, -K], [-K, K]], cost C/2, whose optimal intercept is 0.")
    print()
    print("| QP | problem | solver | wall [s] | CPU [s] | error of objective | median wall [s] |")
    print("|:---|:---|:---|---:|---:|---:|---:|")
    for r in rows:
        b = f" (b = {r['b']:.0e})" if r["b"] is not None else ""
        print(f"| {r['qp']} | {r['problem']} | {r['solver']}{b} | {r['wall']:.4f} | {r['cpu']:.4f} | "
              f"{max(r['err'], 0.0):.1e} | {r['median']:.4f} |")
    print()
    print("## LowRankSMM.fit to its default tol (1e-6) with each half-step solver, "
          f"n = {args.peer_fit_n}, best of {args.fit_repeats} (interleaved)")
    print()
    print("| half-step solvers | fit wall (CPU) [s] | of which QPs [s] | alternations | stop | objective | "
          "rel. diff. vs mvkm | largest rise of objective (rel.) | max diff. of decision values (rel.) | "
          "training accuracy |")
    print("|:---|---:|---:|---:|:---|---:|---:|---:|---:|---:|")
    for r in peer_fits(args.peer_fit_n, args.fit_repeats):
        print(f"| {r['variant']} | {r['wall']:.2f} ({r['cpu']:.2f}) | {r['qp']:.2f} | {r['n_iter']} | {r['stop']} | "
              f"{r['obj']:.8f} | {r['dobj']:.1e} | {r['rise']:.1e} | {r['df']:.1e} | {r['acc']:.4f} |")

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
