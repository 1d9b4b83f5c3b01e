"""The code the three experiment chapters of Part IV share.

`experiments` (simulations), `images` (a nonlinear rule, digits and faces) and
`motion` (channels by time) import it from here, the folder of the chapters;
`experiments` explains it (its Protocol section, with `svc_cv`). It holds:

* `fit_smm` and `rbf_smm`: `LowRankSMM` with the chapters' defaults, its warnings
  counted in `SOLVER_WARNINGS` (each chapter prints the count at its end);
* the vectorised baselines: scikit-learn's `SVC` on vec(X), linear or RBF, its grid
  point chosen by stratified 3-fold cross-validation on the training set (`svc_cv`);
* the convex baseline, the nuclear-norm SMM of Luo et al. (2015), by three solvers
  (an interior-point SDP, FISTA on its dual, and that dual started by SLSQP), with
  tau chosen by the same cross-validation (`nuclear_cv`);
* the random splits of the real data sets (`split`), all the methods on one split
  (`four_methods`), and the mean and its standard error (`mean_se`, `fmt`).

It is not part of the package: the baselines are the chapters' independent
comparisons, written here once so that the three chapters run the same code.
"""

import warnings
from collections import Counter

import clarabel
import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import SVC

import mvkm
from mvkm import LowRankSMM
from mvkm.evaluation import paired_interval

SOLVER_WARNINGS = Counter()


def fit_smm(X, y, **params):
    # LowRankSMM with the chapters' defaults (C = 1, tol = 1e-3, no intercept); warnings are counted.
    params = {"C": 1.0, "tol": 1e-3, **params}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = LowRankSMM(**params).fit(X, y)
    for w in caught:
        SOLVER_WARNINGS[" ".join(str(w.message).split()[:3])] += 1
    return model


def sq_dists(A, B):
    return np.maximum((A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T, 0.0)


def median_sigma(S, max_vectors=800, seed=0):
    # Median heuristic on the rows of the matrices S (n, d, m): sigma^2 = median |a - b|^2 / 2.
    V = S.reshape(-1, S.shape[-1])
    if len(V) > max_vectors:
        V = V[np.random.default_rng(seed).choice(len(V), max_vectors, replace=False)]
    return float(np.sqrt(np.median(sq_dists(V, V)[np.triu_indices(len(V), 1)]) / 2))


def rbf_smm(X, y, rank, **params):
    # RBF row and column kernels, bandwidths by the median heuristic on the training matrices.
    kernels = dict(row_kernel=mvkm.RBF(median_sigma(X)),
                   col_kernel=mvkm.RBF(median_sigma(X.transpose(0, 2, 1))))
    return fit_smm(X, y, rank=rank, **kernels, **params)


C_LINEAR, C_RBF, GAMMA_FACTORS = (0.01, 0.1, 1.0, 10.0), (1.0, 10.0, 100.0), (0.5, 1.0, 2.0)


def svc_grid(V_tr, V_te, kind):
    # (parameters, training kernel, test-by-training kernel) for every grid point of a baseline.
    if kind == "linear":
        K, K_te = V_tr @ V_tr.T, V_te @ V_tr.T
        return [({"C": c}, K, K_te) for c in C_LINEAR]
    gamma0 = 1.0 / (V_tr.shape[1] * V_tr.var())            # scikit-learn's gamma="scale"
    D, D_te = sq_dists(V_tr, V_tr), sq_dists(V_te, V_tr)
    return [({"C": c, "gamma": f * gamma0}, np.exp(-f * gamma0 * D), np.exp(-f * gamma0 * D_te))
            for f in GAMMA_FACTORS for c in C_RBF]


def svc_decision(K, y, c, K_eval):
    svc = SVC(kernel="precomputed", C=c).fit(K, y)
    return K_eval[:, svc.support_] @ svc.dual_coef_[0] + svc.intercept_[0]


def accuracy(f, y):
    # labels are -1 / +1 throughout; a score f > 0 predicts +1
    return float(np.mean(np.where(f > 0, 1, -1) == y))


def svc_cv(X_tr, y_tr, X_te, kind, folds=3, seed=0):
    # The vectorised baseline: SVC on vec(X), its grid point chosen by
    # stratified k-fold cross-validation on the training set only.
    V_tr = X_tr.reshape(len(X_tr), -1)
    V_te = X_te.reshape(len(X_te), -1)
    grid = svc_grid(V_tr, V_te, kind)
    folds = StratifiedKFold(folds, shuffle=True, random_state=seed)
    splits = list(folds.split(V_tr, y_tr))

    def cv_accuracy(p, K):
        return np.mean([
            accuracy(svc_decision(K[np.ix_(a, a)], y_tr[a], p["C"],
                                  K[np.ix_(b, a)]), y_tr[b])
            for a, b in splits])

    cv = [cv_accuracy(p, K) for p, K, _ in grid]
    params, K, K_te = grid[int(np.argmax(cv))]
    return svc_decision(K, y_tr, params["C"], K_te), params


def mean_se(a):
    a = np.asarray(a, dtype=float)
    return a.mean(), a.std(ddof=1) / np.sqrt(len(a))


def fmt(a):
    m, s = mean_se(a)
    return f"{m:.3f} ± {s:.3f}"


# the nuclear-norm weights tried, most regularised first (ties go to it); the
# grid reaches 100 so that cross-validation does not stop at its edge
TAUS = (100.0, 30.0, 10.0, 3.0, 1.0, 0.1)


def nuclear_smm_sdp(X, y, tau, C=1.0):
    # The convex support matrix machine of Luo et al. (2015), with intercept:
    #   min 1/2 |W|_F^2 + tau |W|_* + C sum_i max(0, 1 - y_i (<W, X_i> + b)),
    # a conic program for clarabel, with |W|_* = min (tr Z11 + tr Z22) / 2 over
    # Z = [[Z11, W], [W^T, Z22]] positive semi-definite. The variables are the packed upper
    # triangle z of Z (column by column, off-diagonal entries times sqrt 2: clarabel's
    # PSD-triangle convention), b and the slacks xi. Returns W, b and the multipliers alpha
    # of the margin constraints (for the check in smm/experiments).
    n, d1, d2 = X.shape
    D = d1 + d2
    m = D * (D + 1) // 2
    col = np.concatenate([np.full(j + 1, j) for j in range(D)])
    row = np.concatenate([np.arange(j + 1) for j in range(D)])
    kW = np.flatnonzero((row < d1) & (col >= d1))          # packed entries holding W
    p_idx, q_idx = row[kW], col[kW] - d1
    nv = m + 1 + n
    s2 = np.sqrt(2.0)
    P = sp.diags(np.where(np.isin(np.arange(nv), kW), 0.5, 0.0)).tocsc()   # 1/2 |W|^2 = 1/4 sum z_k^2
    q = np.zeros(nv)
    q[np.flatnonzero(row == col)] = tau / 2
    q[m + 1:] = C
    yX = y[:, None] * X[:, p_idx, q_idx] / s2               # y_i <W, X_i> = yX_i . z[kW]
    margin = sp.hstack([sp.csc_matrix((-yX.ravel(), (np.repeat(np.arange(n), kW.size), np.tile(kW, n))),
                                      shape=(n, m)), sp.csc_matrix(-y[:, None].astype(float)), -sp.eye(n)])
    A = sp.vstack([margin, sp.hstack([sp.csc_matrix((n, m + 1)), -sp.eye(n)]),
                   sp.hstack([-sp.eye(m), sp.csc_matrix((m, 1 + n))])]).tocsc()
    rhs = np.r_[-np.ones(n), np.zeros(n + m)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    sol = clarabel.DefaultSolver(P, q, A, rhs, [clarabel.NonnegativeConeT(2 * n), clarabel.PSDTriangleConeT(D)],
                                 settings).solve()
    assert str(sol.status) == "Solved", sol.status
    x = np.asarray(sol.x)
    W = np.zeros((d1, d2))
    W[p_idx, q_idx] = x[kW] / s2
    return W, float(x[m]), np.asarray(sol.z)[:n]


def svt(A, tau):
    # singular value thresholding: the singular values of A shrunk by tau; returns them too
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    return (U * s) @ Vt, s


def project_box_hyperplane(v, y, C):
    # Euclidean projection onto {0 <= a <= C, y . a = 0}: a = clip(v - nu y, 0, C), where
    # h(nu) = y . clip(v - nu y, 0, C) is non-increasing and piecewise linear: term i falls with
    # slope -1 on the interval of length C where 0 < v_i - nu y_i < C and is flat elsewhere, and
    # h(-inf) = C #{y_i = +1}. One sort of the 2n ends and a running sum of the slopes give h at
    # every end (O(n log n)); the root lies between two consecutive ends, where h is recomputed
    # exactly and interpolated linearly.
    lo = y * v - C * (y > 0)
    ends = np.concatenate([lo, lo + C])
    order = np.argsort(ends, kind="stable")
    ends = ends[order]
    slope = np.cumsum(np.concatenate([-np.ones(len(v)), np.ones(len(v))])[order])
    h = C * np.count_nonzero(y > 0) + np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(ends))])
    k = int(np.searchsorted(-h, 0.0))
    if 0 < k < len(ends):
        h0, h1 = (y @ np.clip(v - e * y, 0.0, C) for e in ends[k - 1:k + 1])
        if h0 != h1:
            return np.clip(v - (ends[k - 1] + (ends[k] - ends[k - 1]) * h0 / (h0 - h1)) * y, 0.0, C)
    return np.clip(v - ends[min(k, len(ends) - 1)] * y, 0.0, C)


def nuclear_smm_dual(X, y, tau, C=1.0, tol=1e-10, max_iter=50_000, alpha0=None):
    # The same problem through its dual (equation smme-eq-nuc-dual): maximise
    #   D(alpha) = sum(alpha) - 1/2 |SVT_tau(A(alpha))|_F^2,  A(alpha) = sum_i alpha_i y_i X_i,
    # over 0 <= alpha <= C, y . alpha = 0, by accelerated projected gradient (FISTA with adaptive
    # restart). grad D_i = 1 - y_i <SVT_tau(A), X_i>, Lipschitz with L = |Z|_2^2 (rows y_i vec X_i).
    # Stops when the duality gap P(W, b*) - D(alpha), with W = SVT_tau(A(alpha)) and the best b*,
    # is below tol (relative); b is then libsvm's rule, the mean of y_i - <W, X_i> over the
    # multipliers strictly inside (0, C). alpha0: a feasible start (default 0).
    n, d1, d2 = X.shape
    y = np.asarray(y, dtype=float)
    F = X.reshape(n, -1)
    Z = y[:, None] * F
    L = np.linalg.norm(Z, 2) ** 2
    alpha = np.zeros(n) if alpha0 is None else np.asarray(alpha0, dtype=float).copy()
    z, t = alpha.copy(), 1.0
    for it in range(1, max_iter + 1):
        W, _ = svt((Z.T @ z).reshape(d1, d2), tau)
        new = project_box_hyperplane(z + (1.0 - Z @ W.ravel()) / L, y, C)
        if (z - new) @ (new - alpha) > 0:         # the step turned back: restart the momentum
            z, t = new.copy(), 1.0
        else:
            t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
            z, t = new + (t - 1) / t_next * (new - alpha), t_next
        alpha = new
        if it % 10 == 0:
            W, s = svt((Z.T @ alpha).reshape(d1, d2), tau)
            f = F @ W.ravel()
            # the hinge sum is convex and piecewise linear in b: its minimum is at a breakpoint y_i - f_i
            hinge = np.maximum(0.0, 1.0 - y[None, :] * (f[None, :] + (y - f)[:, None])).sum(1).min()
            primal, dual = 0.5 * s @ s + tau * s.sum() + C * hinge, alpha.sum() - 0.5 * s @ s
            if primal - dual <= tol * max(1.0, primal):
                break
    else:
        raise RuntimeError(f"nuclear_smm_dual: duality gap {primal - dual:.1e} after {max_iter} steps")
    free = (alpha > 1e-8 * C) & (alpha < (1 - 1e-8) * C)
    b = float(np.mean((y - f)[free])) if free.any() else float(np.median(y - f))
    return W, b, alpha


def nuclear_smm_sqp(X, y, tau, C=1.0, tol=1e-6):
    # The same dual, started by SciPy's SLSQP (sequential quadratic programming on the n multipliers,
    # the box and the hyperplane as constraints, the gradient of D above) and finished by the FISTA
    # above from its multipliers, until the duality gap is below tol (relative). On the faces and
    # motion problems SLSQP gets close in 20 to 50 iterations where FISTA from zero needs thousands;
    # its own stopping rule certifies nothing, the gap does.
    n, d1, d2 = X.shape
    y = np.asarray(y, dtype=float)
    Z = y[:, None] * X.reshape(n, -1)

    def neg_dual(a):
        W, s = svt((Z.T @ a).reshape(d1, d2), tau)
        return -(a.sum() - 0.5 * s @ s), Z @ W.ravel() - 1.0

    start = minimize(neg_dual, np.zeros(n), jac=True, method="SLSQP", bounds=[(0.0, C)] * n,
                     constraints=[{"type": "eq", "fun": lambda a: y @ a, "jac": lambda a: y}],
                     options=dict(maxiter=1000, ftol=1e-12)).x
    return nuclear_smm_dual(X, y, tau, C, tol=tol, alpha0=project_box_hyperplane(start, y, C))


def nuclear_smm(X, y, tau, C=1.0):
    # The interior-point SDP for small matrices (its PSD cone has side d1 + d2),
    # the dual for larger ones (both timed at 20 x 20 in smm/experiments). On a
    # small matrix with many training points the dual is the slower one: its Gram matrix has
    # rank d1 d2 < n, and the accelerated gradient then needs thousands of steps.
    solve = nuclear_smm_sdp if X.shape[1] + X.shape[2] <= 24 else nuclear_smm_dual
    return solve(X, y, tau, C)


def nuclear_cv(X_tr, y_tr, X_te, folds=3, seed=0, solve=nuclear_smm):
    # The nuclear-norm SMM (C = 1, as LowRankSMM), tau chosen by stratified k-fold CV on the training set.
    splits = list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(X_tr.reshape(len(X_tr), -1), y_tr))

    def decision(W, b, Xe):
        return np.einsum("pq,ipq->i", W, Xe) + b

    cv = [np.mean([accuracy(decision(*solve(X_tr[a], y_tr[a], tau)[:2], X_tr[b]), y_tr[b]) for a, b in splits])
          for tau in TAUS]
    tau = TAUS[int(np.argmax(cv))]
    W, b, _ = solve(X_tr, y_tr, tau)
    return decision(W, b, X_te), tau


def split(m, s, y):
    # m training images per class, chosen at random; all the others are the test set
    rng = np.random.default_rng([m, s])
    tr = np.concatenate([rng.choice(np.flatnonzero(y == c), m, replace=False) for c in (-1, 1)])
    return tr, np.setdiff1d(np.arange(len(y)), tr)


METHODS = ("SMM linear", "SMM RBF", "SVC linear", "SVC RBF")
METHODS_DIG = METHODS + ("nuclear SMM",)


def four_methods(X_tr, y_tr, X_te, y_te, rank, nuclear=None):
    # the four methods, and with a nuclear-norm SMM solver (nuclear_smm, or nuclear_smm_sqp for the
    # faces and motion tables) the nuclear-norm SMM, tau by 3-fold CV, as a fifth
    acc = {"SMM linear": fit_smm(X_tr, y_tr, rank=rank).score(X_te, y_te),
           "SMM RBF": rbf_smm(X_tr, y_tr, rank=rank).score(X_te, y_te),
           "SVC linear": accuracy(svc_cv(X_tr, y_tr, X_te, "linear")[0], y_te),
           "SVC RBF": accuracy(svc_cv(X_tr, y_tr, X_te, "rbf")[0], y_te)}
    if nuclear is not None:
        acc["nuclear SMM"] = accuracy(nuclear_cv(X_tr, y_tr, X_te, solve=nuclear)[0], y_te)
    return acc


# -- Shared by the method chapters (matrix_inputs, primal, symmetric, explorer) --


def random_projector(d, r, rng):
    """An orthogonal projector of rank r onto a random subspace of R^d."""
    Q = np.linalg.qr(rng.standard_normal((d, r)))[0]
    return Q @ Q.T


def clarabel_svm(K, y, C, intercept=False, tol=1e-12):
    """The SVM dual by clarabel, a generic interior-point QP solver.

    Solves min 1/2 a'Qa - 1'a subject to 0 <= a <= C (and y'a = 0 with
    an intercept), Q = diag(y) K diag(y). Returns (a, dual minimum); the
    primal optimum is minus the dual minimum.
    """
    m = len(y)
    Q = K * np.outer(y, y)
    Q = 0.5 * (Q + Q.T)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = tol
    A = sp.vstack([sp.eye(m), -sp.eye(m)]).tocsc()
    b = np.concatenate([np.full(m, float(C)), np.zeros(m)])
    cones = [clarabel.NonnegativeConeT(2 * m)]
    if intercept:
        A = sp.vstack([sp.csc_matrix(y[None, :]), A]).tocsc()
        b = np.r_[0.0, b]
        cones = [clarabel.ZeroConeT(1)] + cones
    sol = clarabel.DefaultSolver(sp.csc_matrix(np.triu(Q)), -np.ones(m), A, b,
                                 cones, settings).solve()
    a = np.asarray(sol.x)
    return a, 0.5 * a @ Q @ a - a.sum()


# -- Shared by images and motion: five methods on a split, paired differences --


def nuclear_cv_over(X_tr, y_tr, X_te, taus, solve, folds=3, seed=0):
    """nuclear_cv over a grid of one's own (most regularised first): for data
    whose scale puts the optimal tau beyond TAUS (motion)."""
    splits = list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(
        X_tr.reshape(len(X_tr), -1), y_tr))

    def decision(W, b, Xe):
        return np.einsum("pq,ipq->i", W, Xe) + b

    cv = [np.mean([accuracy(decision(*solve(X_tr[a], y_tr[a], tau)[:2], X_tr[b]),
                            y_tr[b]) for a, b in splits]) for tau in taus]
    tau = taus[int(np.argmax(cv))]
    return decision(*solve(X_tr, y_tr, tau)[:2], X_te), tau


def methods_and_tau(X_tr, y_tr, X_te, y_te, rank, nuclear, taus=None):
    """The test accuracies of four_methods with the nuclear-norm SMM, and the
    tau its cross-validation chose (over TAUS, or over taus if given)."""
    acc = four_methods(X_tr, y_tr, X_te, y_te, rank)
    if taus is None:
        f, tau = nuclear_cv(X_tr, y_tr, X_te, solve=nuclear)
    else:
        f, tau = nuclear_cv_over(X_tr, y_tr, X_te, taus, nuclear)
    acc["nuclear SMM"] = accuracy(f, y_te)
    return acc, tau


def mean_sd_table(frames, index):
    """Mean +- sd of accuracies in percent: frames maps a row label to a
    DataFrame of accuracies (splits by methods); index names the rows."""
    def cell(a):
        return f"{100 * np.mean(a):.1f} ± {100 * np.std(a, ddof=1):.1f}"
    df = pd.DataFrame({row: f.apply(cell) for row, f in frames.items()}).T
    return df.rename_axis(index=index)


VERDICT_WORDS = {"higher": "ahead", "lower": "behind", "tied": "tied"}


def paired_accuracy_table(diffs):
    """Paired differences a - b of accuracies, in points: diffs maps a label
    to (a, b), two arrays over the same splits. Mean, 95 % interval (Student
    t, mvkm.evaluation.paired_interval), splits where a is ahead, verdict."""
    rows = {}
    for label, (a, b) in diffs.items():
        p = paired_interval(100 * np.asarray(a), 100 * np.asarray(b))
        rows[label] = {"mean": p["mean"], "low": p["low"], "high": p["high"],
                       "ahead on": f"{p['wins']}/{p['n']}",
                       "verdict": VERDICT_WORDS[p["verdict"]]}
    df = pd.DataFrame(rows).T
    df[["mean", "low", "high"]] = df[["mean", "low", "high"]].astype(float).round(1)
    return df


def paired_verdict(a, b):
    """ahead, behind or tied: the verdict of paired_accuracy_table for one pair."""
    return VERDICT_WORDS[paired_interval(a, b)["verdict"]]


def interval_grid(frames, pairs, index):
    """Paired differences in points as "mean [low, high]", one row per key of
    frames (DataFrames of accuracies, splits by methods), one column per pair
    (a, b) of methods; index names the rows."""
    def cell(f, a, b):
        p = paired_interval(100 * f[a].to_numpy(), 100 * f[b].to_numpy())
        return f"{p['mean']:+.1f} [{p['low']:+.1f}, {p['high']:+.1f}]"
    df = pd.DataFrame({f"{a} − {b}": {row: cell(f, a, b) for row, f in frames.items()}
                       for a, b in pairs})
    return df.rename_axis(index=index)


def plot_paired_accuracy(ax, diffs, title=None):
    """One row per label: the per-split differences a - b in points (grey), their
    mean and 95 % interval (red), zero dashed."""
    labels = list(diffs)
    for i, label in enumerate(labels):
        a, b = (100 * np.asarray(v, dtype=float) for v in diffs[label])
        p = paired_interval(a, b)
        jitter = np.linspace(-0.15, 0.15, len(a))
        ax.plot(a - b, i + jitter, "o", color="0.6", ms=3)
        ax.errorbar(p["mean"], i, xerr=[[p["mean"] - p["low"]], [p["high"] - p["mean"]]],
                    fmt="s", color="C3", ms=5, capsize=3)
    ax.axvline(0, color="k", ls="--", lw=0.8)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("difference in accuracy [points]")
    if title:
        ax.set_title(title, fontsize=10)
