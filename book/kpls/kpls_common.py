"""The code the chapters of Part III share.

A helper that a second chapter of Part III needs is written here once; the
chapter that teaches it shows its source (``mvkm.plotting.show_source``) and
every later chapter imports it. It is not part of the package: anything a user
of ``mvkm`` would call belongs in ``mvkm``.
"""

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

import mvkm
from mvkm import MultiViewKPLS

__all__: list[str] = []

# --- The eigenproblem (kpls/from_pls, kpls/objective) -----------------------

__all__ += ["real_eig"]


def real_eig(A):
    """Eigenvalues (descending) and eigenvectors of a matrix whose spectrum
    we expect to be real."""
    lam, vec = np.linalg.eig(A)
    # eig of a non-symmetric matrix: imaginary parts of a real spectrum are
    # round-off. For a simple eigenvalue they are ~ eps * ||A||; a zero
    # eigenvalue in a Jordan block (singular kernels) moves by
    # ~ sqrt(eps) * ||A|| ~ 1e-8 ||A||: 1e-6 * max|lambda| covers both.
    assert np.abs(lam.imag).max() < 1e-6 * np.abs(lam).max()
    order = np.argsort(-lam.real)
    return lam.real[order], vec.real[:, order]


# --- The dual matrix Omega (kpls/from_pls, kpls/objective) ------------------

__all__ += ["omega_matrix"]


def omega_matrix(Ks):
    """Omega = E blockdiag(K_1, ..., K_V) of the kernel PLS dual.

    Block (v, u) is K_u for u != v; the diagonal blocks are zero. For two
    views it is [[0, K_2], [K_1, 0]].
    """
    n, V = Ks[0].shape[0], len(Ks)
    zero = np.zeros((n, n))
    return np.block([[Ks[u] if u != v else zero for u in range(V)]
                     for v in range(V)])


# --- An independent computation, for the checks of every chapter ------------

__all__ += ["independent_kpls", "check_package"]


def _gauss(A, B, s):
    return np.exp(-cdist(A, B, "sqeuclidean") / (2 * s ** 2))


def independent_kpls(train, test, sigmas, k):
    """MvKPLS without mvkm.

    Omega of centred Gaussian kernels (scipy distances), NumPy's general
    eig, alpha^T D alpha = 1, training scores K_c alpha, test rows centred
    with the training means. Returns eigenvalues, alphas, training and
    test scores.
    """
    n, V = len(train[0]), len(train)
    Kr = [_gauss(a, a, s) for a, s in zip(train, sigmas)]
    Kt = [_gauss(b, a, s) for a, b, s in zip(train, test, sigmas)]
    Kc = [K - K.mean(axis=0)[None] - K.mean(axis=1)[:, None] + K.mean()
          for K in Kr]
    Om = np.block([[Kc[u] if u != v else np.zeros((n, n)) for u in range(V)]
                   for v in range(V)])
    lam, vec = np.linalg.eig(Om)
    order = np.argsort(-lam.real)[:k]
    A = vec.real[:, order]
    D = scipy.linalg.block_diag(*Kc)
    A = A / np.sqrt(np.einsum("ij,ij->j", A, D @ A))
    alphas = [A[v * n:(v + 1) * n] for v in range(V)]
    train_sc = [K @ a for K, a in zip(Kc, alphas)]
    test_sc = [(T - T.mean(axis=1)[:, None] - K.mean(axis=0)[None]
                + K.mean()) @ a for T, K, a in zip(Kt, Kr, alphas)]
    return lam.real[order], alphas, train_sc, test_sc


def check_package(train, test, sigmas, k):
    """Both of the package's solvers against independent_kpls.

    Asserts eigenvalues, alpha and scores; returns the eigenvalues.
    """
    lam_r, alpha_r, train_r, test_r = independent_kpls(train, test, sigmas, k)
    for solver in ("dense", "lanczos"):
        fit = MultiViewKPLS(n_components=k,
                            kernels=[mvkm.RBF(s) for s in sigmas],
                            solver=solver, random_state=0).fit(train)
        # Three eigensolvers (general eig, symmetric eigh, Lanczos to
        # 1e-10): ~1e-11; assert 1e-8.
        assert np.allclose(fit.eigenvalues_, lam_r, rtol=1e-8), solver
        p_train, p_test = fit.transform(train), fit.transform(test)
        sgn = np.sign(np.sum(p_train[0] * train_r[0], axis=0))
        for v in range(len(train)):
            # Simple eigenvalues: eigenvectors to ~1e-9 of their scale;
            # assert 1e-6.
            for got, ref in ((fit.dual_coef_[v], alpha_r[v]),
                             (p_train[v], train_r[v]),
                             (p_test[v], test_r[v])):
                tol = 1e-6 * np.abs(ref).max()
                assert np.allclose(got * sgn, ref, atol=tol), solver
    return lam_r


# --- The clustering experiment (kpls/experiments) ---------------------------
#
# The protocol of the chapter "Experiments: clustering handwritten digits",
# written once so that the chapter shows one call per table: seeded splits of
# the UCI multiple-features digits; kernel PCA, kernel CCA and MvKPLS
# features, each method's kernel (and c) chosen on the k-means NMI of its
# validation features; the test NMI of k-means and spectral clustering.

import functools
import warnings

import pandas as pd
from joblib import Parallel, delayed
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.metrics import normalized_mutual_info_score
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from mvkm.datasets import load_mfeat
from mvkm.evaluation import paired_interval

__all__ += ["DIGIT_VIEWS", "KERNEL_GRID", "KCCA_C", "digits_split",
            "digit_kernel", "nmi_kmeans", "nmi_spectral", "centred_eigh",
            "centre_rows", "kpca_scores", "kernel_cca", "digits_scores",
            "digits_clustering", "nmi_mean_sd", "paired_nmi",
            "plot_paired_nmi"]

#: The three views (of six) and the kernel grid: (kind, bandwidth factor f).
DIGIT_VIEWS = ("fou", "fac", "kar")
KERNEL_GRID = (("RBF", 0.5), ("RBF", 1.0), ("RBF", 2.0), ("Laplacian", 0.5))
#: Kernel CCA's grid for c; c = 1 is MvKPLS (kplsf-prop-kcca).
KCCA_C = (0.1, 0.5, 0.9, 0.99, 0.999, 1.0)


@functools.lru_cache(maxsize=1)
def _digits():
    return load_mfeat(views=DIGIT_VIEWS)


def digits_split(seed, n_sub=800):
    """Split `seed`: `n_sub` digits, 60/20/20, each view standardised with
    its training means and deviations.

    Returns ``(train, val, test), (y_train, y_val, y_test)``, each of the
    first three a list of V arrays.
    """
    Xs, y = _digits()
    perm = np.random.default_rng(seed).permutation(len(y))[:n_sub]
    a, b = int(0.6 * n_sub), int(0.8 * n_sub)
    idx = np.sort(perm[:a]), np.sort(perm[a:b]), np.sort(perm[b:])
    Z = []
    for X in Xs:
        mu, sd = X[idx[0]].mean(axis=0), X[idx[0]].std(axis=0)
        Z.append((X - mu) / np.where(sd > 0, sd, 1.0))
    return [[z[i] for z in Z] for i in idx], [y[i] for i in idx]


def digit_kernel(kind, f, d):
    """The Gaussian kernel with sigma = f sqrt(d / 2) or the Laplacian with
    sigma = f sqrt(2 d), for a view of input dimension d."""
    if kind == "RBF":
        return mvkm.RBF(f * np.sqrt(d / 2))
    return mvkm.Laplacian(f * np.sqrt(2 * d))


def nmi_kmeans(F, labels, seed, scale=False):
    """NMI of k-means (10 clusters, 10 restarts) on the rows of F."""
    F = StandardScaler().fit_transform(F) if scale else F
    pred = KMeans(10, n_init=10, random_state=seed).fit_predict(F)
    return normalized_mutual_info_score(labels, pred)


def nmi_spectral(F, labels, seed, scale=False):
    """NMI of spectral clustering on the 10-nearest-neighbour graph of F."""
    F = StandardScaler().fit_transform(F) if scale else F
    sc = SpectralClustering(10, affinity="nearest_neighbors",
                            n_neighbors=10, random_state=seed)
    with warnings.catch_warnings():
        # A 10-nearest-neighbour graph of 160 points may have several
        # components; the spectral embedding is still defined.
        warnings.filterwarnings("ignore", message="Graph is not fully")
        pred = sc.fit_predict(F)
    return normalized_mutual_info_score(labels, pred)


_CLUSTERINGS = {"k-means": nmi_kmeans, "spectral": nmi_spectral}


def centred_eigh(K):
    """Eigenvalues (descending), eigenvectors and trace of K_c = M_c K M_c."""
    Kc = K - K.mean(axis=0)[None] - K.mean(axis=1)[:, None] + K.mean()
    lam, A = np.linalg.eigh(Kc)
    return lam[::-1], A[:, ::-1], np.trace(Kc)


def centre_rows(K, K_rows):
    """Kernel rows against the training points, centred with the training
    means (the out-of-sample centring)."""
    m = K.mean(axis=0)
    return K_rows - K_rows.mean(axis=1)[:, None] - m[None] + m.mean()


def kpca_scores(eig, rows, s):
    """Kernel PCA scores of centred kernel rows: s components, or, for
    s < 1, as many as explain the share s of the centred trace."""
    lam, A, trace = eig
    if s < 1:
        s = int(np.searchsorted(np.cumsum(lam) / trace, s) + 1)
    return rows @ (A[:, :s] / np.sqrt(lam[:s]))


def kernel_cca(eigs, rows, c, s=10):
    """Multi-view kernel CCA (kplsf-eq-mkcca) with regularisation c.

    From each view's centred eigendecomposition K_{c,v} = A_v L_v A_v^T
    (positive part): alpha_v = A_v ((1-c) L_v^2 + c L_v)^{-1/2} z_v turns
    the generalised problem into the symmetric eigenproblem of
    G^T G - diag(G^T G), G = [A_1 S_1, ..., A_V S_V],
    S_v = (L_v / ((1-c) L_v + c))^{1/2}, solved by ARPACK from products
    with G. Returns the top s values rho and, per view, the scores
    rows[v] @ alpha_v.
    """
    G, back = [], []
    for lam, A, _ in eigs:
        keep = lam > 1e-10 * lam[0]       # the null space adds rho = 0 only
        l, d = lam[keep], (1 - c) * lam[keep] + c
        G.append(A[:, keep] * np.sqrt(l / d))
        back.append(A[:, keep] / np.sqrt(l * d))
    cut = np.cumsum([0] + [g.shape[1] for g in G])
    Ga = np.hstack(G)
    diag = np.einsum("ij,ij->j", Ga, Ga)     # blocks S_v^2 (A_v orthonormal)
    op = LinearOperator((cut[-1], cut[-1]), dtype=float,
                        matvec=lambda x: Ga.T @ (Ga @ x) - diag * x)
    v0 = np.random.default_rng(0).standard_normal(cut[-1])
    rho, z = eigsh(op, s, which="LA", tol=1e-10, ncv=4 * s, v0=v0)
    order = np.argsort(rho)[::-1]
    rho, z = rho[order], z[:, order]
    return rho, [r @ (b @ z[cut[v]:cut[v + 1]])
                 for v, (r, b) in enumerate(zip(rows, back))]


def _grid_features(Z_tr, Z_va, Z_te, grid, cs):
    """Per grid point: each view's centred eigendecomposition and kernel rows
    (validation, then test), the kernel PCA and the kernel CCA features."""
    out = {}
    for g in grid:
        eigs, rows = [], []
        for tr, va, te in zip(Z_tr, Z_va, Z_te):
            kern = digit_kernel(*g, tr.shape[1])
            K = kern(tr)
            eigs.append(centred_eigh(K))
            rows.append(centre_rows(K, kern(np.vstack([va, te]), tr)))
        out["eig", g], out["rows", g] = eigs, rows
        out["KPCA", g] = [kpca_scores(e, r, 10) for e, r in zip(eigs, rows)]
        for c in cs:
            out["KCCA", g, c] = kernel_cca(eigs, rows, c)[1]
    return out


def _mean(parts):
    return sum(parts) / len(parts)


def _digits_scores(seed, n_sub, grid, cs):
    (Z_tr, Z_va, Z_te), (_, y_va, y_te) = digits_split(seed, n_sub)
    n_va = len(y_va)
    F = _grid_features(Z_tr, Z_va, Z_te, grid, cs)
    # Validation: every method takes the grid point whose multi-view
    # features give the highest k-means NMI (MvKPLS is kernel CCA at c = 1).
    val = functools.lru_cache(maxsize=None)(
        lambda key, how: nmi_kmeans(how(F[key])[:n_va], y_va, seed))
    best = lambda pts, how: max(pts, key=lambda key: val(key, how))
    g_mv = best([("KCCA", g, 1.0) for g in grid], _mean)[1]
    g_kp = best([("KPCA", g) for g in grid], np.hstack)[1]
    kp_avg = best([("KPCA", g) for g in grid], _mean)
    cca = best([("KCCA", g, c) for g in grid for c in cs], _mean)
    # The package on the kernel chosen for MvKPLS: the 95 % rule (its first
    # 10 columns are the s = 10 model) and the source's uncentred model.
    kerns = [digit_kernel(*g_mv, z.shape[1]) for z in Z_tr]
    m95 = MultiViewKPLS(0.95, kernels=kerns, solver="dense").fit(Z_tr)
    mv95 = m95.transform(Z_te)
    mv = [e[:, :10] for e in mv95]
    unc = MultiViewKPLS(10, kernels=kerns, center=False, solver="lanczos",
                        random_state=0).fit(Z_tr)
    te = lambda parts: [p[n_va:] for p in parts]
    test = {("raw", "concat", "10"): np.hstack(Z_te),
            ("MvKPLS", "avg", "10"): _mean(mv),
            ("MvKPLS", "concat", "10"): np.hstack(mv),
            ("MvKPLS uncentred", "avg", "10"): _mean(unc.transform(Z_te)),
            ("KPCA", "avg", "10"): _mean(te(F[kp_avg])),
            ("KPCA", "concat", "10"): np.hstack(te(F["KPCA", g_kp])),
            ("KCCA", "avg", "10"): _mean(te(F[cca]))}
    kp95 = [kpca_scores(e, r[n_va:], 0.95)
            for e, r in zip(F["eig", g_kp], F["rows", g_kp])]
    for v, name in enumerate(DIGIT_VIEWS):
        test["raw", name, "10"] = Z_te[v]
        test["MvKPLS", name, "10"] = mv[v]
        test["KPCA", name, "10"] = F["KPCA", g_kp][v][n_va:]
        test["MvKPLS", name, "95%"] = mv95[v]
        test["KPCA", name, "95%"] = kp95[v]
    scores = {}
    for (method, feats, rule), X in test.items():
        for cl, nmi in _CLUSTERINGS.items():
            scores[method, feats, rule, cl] = nmi(X, y_te, seed)
            if rule == "95%":
                scores[method, feats, "95% std", cl] = nmi(X, y_te, seed,
                                                           scale=True)
    # The package's s = 10 features against the grid's (c = 1), up to sign.
    ref = F["KCCA", g_mv, 1.0][0][n_va:]
    sgn = np.sign(np.sum(ref * mv[0], axis=0))
    info = {"MvKPLS": g_mv, "KPCA avg": kp_avg[1], "KPCA concat": g_kp,
            "kernel CCA": cca[1], "c": cca[2],
            "s95 MvKPLS": m95.n_components_,
            "s95 KPCA": [e.shape[1] for e in kp95],
            "package vs grid": np.abs(ref * sgn - mv[0]).max()
            / np.abs(mv[0]).max()}
    return scores, info


def digits_scores(seed, n_sub=800, grid=KERNEL_GRID, cs=KCCA_C):
    """Every test NMI of split `seed`, and the hyper-parameters chosen.

    Returns ``(scores, info)``: scores maps (method, features, rule,
    clustering) to the test NMI; features is a view, "avg" or "concat";
    rule is "10", "95%" or "95% std" (every column standardised).
    """
    with threadpool_limits(1):       # small problems: one thread each
        return _digits_scores(seed, n_sub, grid, cs)


def digits_clustering(seeds, n_jobs=2, **kw):
    """digits_scores on every split, `n_jobs` splits at a time.

    Returns two DataFrames indexed by the seeds: the test NMIs (columns
    (method, features, rule, clustering)) and the choices of each split.
    """
    out = Parallel(n_jobs=n_jobs)(delayed(digits_scores)(s, **kw)
                                  for s in seeds)
    runs = pd.DataFrame([o[0] for o in out], index=list(seeds))
    runs.columns = pd.MultiIndex.from_tuples(runs.columns)
    for cl in _CLUSTERINGS:          # the best single view of either method
        runs["best view", "max", "10", cl] = np.max(
            [runs[m, v, "10", cl] for m in ("MvKPLS", "KPCA")
             for v in DIGIT_VIEWS], axis=0)
    return runs, pd.DataFrame([o[1] for o in out], index=list(seeds))


def nmi_mean_sd(runs, table):
    """'mean ± sd' of the test NMI over the splits, as a DataFrame.

    table maps a row label to {column label: (method, features, rule,
    clustering)}.
    """
    def cell(key):
        x = runs[key]
        return f"{x.mean():.3f} ± {x.std(ddof=1):.3f}"
    return pd.DataFrame({r: {c: cell(k) for c, k in cols.items()}
                         for r, cols in table.items()}).T


_VERDICT = {"higher": "ahead", "lower": "behind", "tied": "tied"}


def paired_nmi(runs, pairs):
    """Mean paired difference a - b over the splits with its 95 % interval,
    and the verdict with the number of splits on which a is ahead.

    pairs maps a label to (a, b), each (method, features, rule); one pair
    of columns per clustering.
    """
    table = {}
    for label, (a, b) in pairs.items():
        for cl in _CLUSTERINGS:
            r = paired_interval(runs[a + (cl,)], runs[b + (cl,)])
            table[label, (cl, "difference")] = (
                f"{r['mean']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]")
            table[label, (cl, "verdict")] = (
                f"{_VERDICT[r['verdict']]} ({r['wins']}/{r['n']})")
    out = pd.Series(table).unstack()
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return out.loc[list(pairs)]


def plot_paired_nmi(runs, pairs, axes):
    """Per-split differences a - b (dots), their mean and 95 % interval
    (bar), one row per pair and one axis per clustering."""
    for ax, cl in zip(axes, _CLUSTERINGS):
        for j, (a, b) in enumerate(pairs.values()):
            d = runs[a + (cl,)] - runs[b + (cl,)]
            r = paired_interval(runs[a + (cl,)], runs[b + (cl,)])
            jitter = np.linspace(-0.2, 0.2, len(d))
            ax.plot(d, j + jitter, ".", color="0.6", ms=3)
            ax.plot([r["low"], r["high"]], [j, j], color="C3", lw=2)
            ax.plot(r["mean"], j, "o", color="C3", ms=4)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_xlabel(f"difference in NMI, {cl}")
        ax.tick_params(labelleft=False)
    axes[0].set_yticks(range(len(pairs)), list(pairs))
    axes[0].tick_params(labelleft=True)
    axes[0].set_ylim(len(pairs) - 0.5, -0.5)
