"""Kernel PCA, top-10 eigenpairs: mvkm versus scikit-learn's KernelPCA (ARPACK), on several data sets.

Run from the repository root::

    python benchmarks/bench_kpca.py                  # every data set, n = 5000 and 10000
    python benchmarks/bench_kpca.py --quick          # n = 1500, 3000, for a smoke test
    python benchmarks/bench_kpca.py --datasets sines70 santafe70 --sizes 4000 --repeats 5
    python benchmarks/bench_kpca.py --threads 1      # one BLAS thread (default: 2)
    python benchmarks/bench_kpca.py --closing-check  # kernel_top_eigh with and without the check
    python benchmarks/bench_kpca.py --closing-check --against 9f49ea5   # ... and at that revision
    python benchmarks/bench_kpca.py --block-products  # a pass with p vectors against p dsymv
    python benchmarks/bench_kpca.py --block-lanczos   # a block Lanczos against top_eigh's

Data sets (``--datasets``; all by default):

* ``gauss2``, ``gauss10``, ``gauss500``: ``X ~ N(0, I_d)`` (``default_rng(0)``);
* ``sines70``: lag windows of 70 values (``mvkm.timeseries.lag_embed``) of a smooth
  series, the book's sum of sines ``sin(2 pi t) + 0.2 sin(40 pi t)`` at
  ``t = 0, 0.01, ...`` (``mvkm.datasets.sum_of_sines``) plus N(0, 0.05^2) noise;
* ``santafe70``: lag windows of 70 values of the Santa Fe laser series
  (``mvkm.datasets.load_santafe``, 10093 values, so n <= 10023).

The RBF kernel ``exp(-||x - y||^2 / (2 sigma^2))`` takes sigma from the median
heuristic on each data set: the median Euclidean distance between 1000 points
drawn without replacement (seed 1). The fast-decaying spectra (gauss2, sines70)
and the flat ones (gauss10, gauss500) stress the eigensolver differently; the
table prints lambda_10 / lambda_1 and the number of ARPACK products.

What is timed, on the same data and the same kernel:

* mvkm (b): ``top_eigh(RBF(sigma)(X), 10, center=True)``, the centring done
  inside the Lanczos products (no pass over the matrix);
* mvkm (a): ``mvkm.kernels.RBF(sigma)(X)`` + ``mvkm.kernels.center_gram(K, copy=False)`` +
  ``mvkm.linalg.top_eigh(Kc, 10)`` (``method="auto"``, default tolerance, input
  checks included);
* mvkm (c): ``mvkm.linalg.kernel_top_eigh(X, RBF(sigma), 10)``: the same
  eigenproblem from the data, with the kernel's upper triangle only (no
  transposed copies of its tiles, no symmetry check: it is symmetric by
  construction) read by the Lanczos products;
* scikit-learn: ``KernelPCA(n_components=10, kernel="rbf", gamma=1/(2 sigma^2),
  eigen_solver="arpack").fit(X)`` (kernel, centring, ``eigsh`` with ``tol=0``).

Each repeat times the four, alternating which goes first; the tables report
medians. A second table gives mvkm (a)'s parts, the two kernels alone (mvkm's
``RBF`` against ``sklearn.metrics.pairwise.rbf_kernel``, interleaved) and the
numbers of matrix-vector products; a third times the eigensolvers alone on the
same centred matrix: ``scipy.sparse.linalg.eigsh(Kc)`` as KernelPCA calls it
(``K @ x`` products), ``top_eigh(method="arpack")`` and
``top_eigh(method="lanczos")`` (both with BLAS ``dsymv`` products, which read
one triangle; "lanczos", full reorthogonalisation with a convergence test after
every product, is what ``method="auto"`` picks for these sizes);
``--subspace`` adds ``top_eigh(method="subspace")``.

Accuracy: ``max_i |lambda_i - lambda_i^ref| / lambda_i^ref`` over the 10
eigenvalues. Reference: LAPACK ``scipy.linalg.eigh(Kc, subset_by_index=...)``
for n <= 5000; above, ARPACK with ``tol=0`` (machine precision), ``ncv=60`` and
its own start vector, because a dense solve at n = 10000 takes minutes.
scikit-learn's ``eigenvalues_`` are the eigenvalues of the centred kernel
matrix (not divided by n), so they compare directly.

Timings on a shared machine are noisy: run on a quiet one for published
numbers, and read the load averages printed at the start and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.linalg
import scipy.sparse.linalg
import scipy.spatial.distance
import sklearn
import sklearn.metrics.pairwise
from sklearn.decomposition import KernelPCA
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
import mvkm  # noqa: E402
from mvkm.datasets import load_santafe, sum_of_sines  # noqa: E402
from mvkm.kernels import RBF, center_gram  # noqa: E402
from mvkm.linalg import kernel_top_eigh, top_eigh  # noqa: E402
from mvkm.timeseries import lag_embed  # noqa: E402

S = 10
DENSE_REFERENCE_MAX_N = 5000
#: Points drawn (without replacement, seed 1) for the median heuristic of sigma.
MEDIAN_SAMPLE = 1000
WINDOW = 70


def _gaussian(d: int):
    def make(n: int) -> np.ndarray:
        return np.random.default_rng(0).standard_normal((n, d))
    return make


def _sines_windows(n: int) -> np.ndarray:
    """Lag windows of length 70 of a smooth series: the book's sum of sines
    (periods of 100 and 5 samples) plus N(0, 0.05^2) noise."""
    x = sum_of_sines(n + WINDOW, dt=0.01)
    x = x + 0.05 * np.random.default_rng(0).standard_normal(x.size)
    return lag_embed(x, WINDOW - 1)[0][:n]


def _santafe_windows(n: int) -> np.ndarray:
    """Lag windows of length 70 of the Santa Fe laser series (10093 values: n <= 10023)."""
    x = load_santafe()
    if n > x.size - WINDOW:
        raise ValueError(f"the Santa Fe series gives at most {x.size - WINDOW} windows of "
                         f"{WINDOW}, got n = {n}")
    return lag_embed(x, WINDOW - 1)[0][:n]


#: name -> (description, maker(n) -> X)
DATASETS = {
    "gauss2": ("X ~ N(0, I_2)", _gaussian(2)),
    "gauss10": ("X ~ N(0, I_10)", _gaussian(10)),
    "gauss500": ("X ~ N(0, I_500)", _gaussian(500)),
    "sines70": ("windows of 70 values of sin(2 pi t) + 0.2 sin(40 pi t) + N(0, 0.05^2), "
                "t = 0, 0.01, ...", _sines_windows),
    "santafe70": ("windows of 70 values of the Santa Fe laser series", _santafe_windows),
}


def median_sigma(X: np.ndarray) -> float:
    """The median heuristic: sigma = median pairwise distance, over MEDIAN_SAMPLE points."""
    n = X.shape[0]
    idx = np.random.default_rng(1).choice(n, min(n, MEDIAN_SAMPLE), replace=False)
    return float(np.median(scipy.spatial.distance.pdist(X[idx])))


class _Counting(scipy.sparse.linalg.LinearOperator):
    """``A @ x`` with a product counter (for ARPACK's number of matrix-vector products)."""

    def __init__(self, A):
        super().__init__(np.float64, A.shape)
        self.A, self.count = A, 0

    def _matvec(self, x):
        self.count += 1
        return self.A @ x


def mvkm_kpca(X: np.ndarray, sigma: float) -> tuple[np.ndarray, dict[str, float]]:
    t0 = time.perf_counter()
    K = RBF(sigma)(X)
    t1 = time.perf_counter()
    Kc = center_gram(K, copy=False)  # in place: K is not needed afterwards
    t2 = time.perf_counter()
    lam, _ = top_eigh(Kc, S)
    t3 = time.perf_counter()
    return lam, {"kernel": t1 - t0, "center": t2 - t1, "solve": t3 - t2, "total": t3 - t0}


def mvkm_kpca_implicit(X: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    lam, _ = top_eigh(RBF(sigma)(X), S, center=True)  # centring inside the products
    return lam, time.perf_counter() - t0


def mvkm_kpca_fused(X: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    lam, _ = kernel_top_eigh(X, RBF(sigma), S)  # upper triangle only, centring in the products
    return lam, time.perf_counter() - t0


def sklearn_kpca(X: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    kpca = KernelPCA(n_components=S, kernel="rbf", gamma=1.0 / (2.0 * sigma**2),
                     eigen_solver="arpack", random_state=0).fit(X)
    return kpca.eigenvalues_, time.perf_counter() - t0


def sklearn_style_eigsh(Kc: np.ndarray) -> np.ndarray:
    """The call inside KernelPCA.fit (sklearn 1.x): eigsh on the ndarray, tol=0."""
    v0 = np.random.RandomState(0).uniform(-1, 1, Kc.shape[0])
    w, _ = scipy.sparse.linalg.eigsh(Kc, S, which="LA", tol=0, v0=v0)
    return w[::-1]


def sklearn_kernel(X: np.ndarray, sigma: float) -> np.ndarray:
    """KernelPCA's kernel: sklearn.metrics.pairwise.rbf_kernel (euclidean_distances + exp)."""
    return sklearn.metrics.pairwise.rbf_kernel(X, gamma=1.0 / (2.0 * sigma**2))


def count_products(Kc: np.ndarray) -> tuple[int, int]:
    """Matrix-vector products of sklearn's eigsh(Kc, tol=0) and of mvkm's ARPACK (tol=1e-10)."""
    op = _Counting(Kc)
    v0 = np.random.RandomState(0).uniform(-1, 1, Kc.shape[0])
    scipy.sparse.linalg.eigsh(op, S, which="LA", tol=0, v0=v0)
    sk = op.count
    counter = {"n": 0}
    real = scipy.sparse.linalg.eigsh

    def counting_eigsh(A, *args, **kwargs):
        inner = A.matvec

        def mv(x):
            counter["n"] += 1
            return inner(x)
        return real(scipy.sparse.linalg.LinearOperator(A.shape, matvec=mv, dtype=np.float64),
                    *args, **kwargs)
    scipy.sparse.linalg.eigsh = counting_eigsh
    try:
        top_eigh(Kc, S, "arpack")
    finally:
        scipy.sparse.linalg.eigsh = real
    return sk, counter["n"], lanczos_products(Kc)


class _CountingBLAS:
    """scipy's BLAS module with a counter on ``dsymv`` (the Lanczos products), and their
    time in ``counter["t"]`` when the counter has that key."""

    def __init__(self, blas, counter):
        self._blas, self._counter = blas, counter

    def __getattr__(self, name):
        return getattr(self._blas, name)

    def dsymv(self, *args, **kwargs):
        t0 = time.perf_counter()
        y = self._blas.dsymv(*args, **kwargs)
        if "t" in self._counter:
            self._counter["t"] += time.perf_counter() - t0
        self._counter["n"] += 1
        return y


def lanczos_products(Kc: np.ndarray) -> int:
    """Matrix-vector products of ``top_eigh(Kc, method="lanczos")`` (the centring means'
    one ``dsymv`` not counted: Kc is passed without center=True)."""
    counter = {"n": 0}
    real = mvkm.linalg._blas
    mvkm.linalg._blas = _CountingBLAS(real, counter)
    try:
        top_eigh(Kc, S, "lanczos")
    finally:
        mvkm.linalg._blas = real
    return counter["n"]


def reference_eigenvalues(Kc: np.ndarray) -> tuple[np.ndarray, str]:
    n = Kc.shape[0]
    if n <= DENSE_REFERENCE_MAX_N:
        w = scipy.linalg.eigh(Kc, subset_by_index=[n - S, n - 1], eigvals_only=True)
        return w[::-1], "LAPACK"
    v0 = np.random.default_rng(12345).uniform(-1, 1, n)
    w = scipy.sparse.linalg.eigsh(Kc, S, which="LA", tol=0, ncv=60, v0=v0,
                                  return_eigenvectors=False)
    return np.sort(w)[::-1], "ARPACK tol=0"


def rel_err(w: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(np.sort(w)[::-1] - ref) / np.abs(ref)))


def timed(f, *args):
    t0 = time.perf_counter()
    out = f(*args)
    return out, time.perf_counter() - t0


def bench_case(name: str, n: int, repeats: int, subspace: bool = False) -> dict:
    X = DATASETS[name][1](n)
    sigma = median_sigma(X)
    t_mv, parts, t_sk, t_im, t_fu = [], [], [], [], []
    lam_mv = lam_sk = lam_im = lam_fu = None
    for r in range(repeats):
        order = (("mvkm", "implicit", "fused", "sklearn") if r % 2 == 0
                 else ("sklearn", "fused", "implicit", "mvkm"))
        for side in order:
            if side == "fused":
                lam_fu, t = mvkm_kpca_fused(X, sigma)
                t_fu.append(t)
            elif side == "mvkm":
                lam_mv, p = mvkm_kpca(X, sigma)
                t_mv.append(p["total"])
                parts.append(p)
            elif side == "implicit":
                lam_im, t = mvkm_kpca_implicit(X, sigma)
                t_im.append(t)
            else:
                lam_sk, t = sklearn_kpca(X, sigma)
                t_sk.append(t)
    # the kernels alone, interleaved
    t_kmv, t_ksk = [], []
    for r in range(repeats):
        for side in (("mvkm", "sklearn") if r % 2 == 0 else ("sklearn", "mvkm")):
            if side == "mvkm":
                _, t = timed(RBF(sigma), X)
                t_kmv.append(t)
            else:
                _, t = timed(sklearn_kernel, X, sigma)
                t_ksk.append(t)
    Kc = center_gram(RBF(sigma)(X), copy=False)
    ref, ref_name = reference_eigenvalues(Kc)
    method = mvkm.linalg._auto_method(Kc, n, S)
    products = count_products(Kc)

    # eigensolvers alone, same matrix, interleaved
    solvers = {
        "eigsh(K) [sklearn]": sklearn_style_eigsh,
        "top_eigh arpack": lambda K: top_eigh(K, S, "arpack")[0],
        "top_eigh lanczos": lambda K: top_eigh(K, S, "lanczos")[0],
    }
    if subspace:
        solvers["top_eigh subspace"] = lambda K: top_eigh(K, S, "subspace")[0]
    solver_t = {k: [] for k in solvers}
    solver_err = {}
    for _ in range(repeats):
        for name_s, f in solvers.items():
            w, t = timed(f, Kc)
            solver_t[name_s].append(t)
            solver_err[name_s] = rel_err(w, ref)
    return {
        "data": name, "n": n, "d": X.shape[1], "sigma": sigma, "method": method, "ref": ref_name,
        "gap": float((ref[S - 1]) / ref[0]),
        "t_mvkm": statistics.median(t_mv), "t_sklearn": statistics.median(t_sk),
        "t_implicit": statistics.median(t_im), "err_implicit": rel_err(lam_im, ref),
        "t_fused": statistics.median(t_fu), "err_fused": rel_err(lam_fu, ref),
        "err_mvkm": rel_err(lam_mv, ref), "err_sklearn": rel_err(lam_sk, ref),
        "parts": {k: statistics.median(p[k] for p in parts) for k in ("kernel", "center", "solve")},
        "t_kernel_mvkm": statistics.median(t_kmv), "t_kernel_sklearn": statistics.median(t_ksk),
        "products": products,
        "solver_t": {k: statistics.median(v) for k, v in solver_t.items()},
        "solver_err": solver_err,
    }


def package_at(rev: str):
    """The ``mvkm`` package of git revision ``rev`` of this checkout, imported as ``mvkm_at_rev``
    (``git archive`` into a temporary folder; the package imports its own modules relatively)."""
    import importlib.util
    import subprocess
    import tarfile
    import tempfile

    root = Path(__file__).resolve().parents[1]
    out = Path(tempfile.mkdtemp(prefix="mvkm-at-rev-"))
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "mvkm"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(out, filter="data")
    spec = importlib.util.spec_from_file_location("mvkm_at_rev", out / "mvkm" / "__init__.py",
                                                  submodule_search_locations=[str(out / "mvkm")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["mvkm_at_rev"] = module
    spec.loader.exec_module(module)
    return importlib.import_module("mvkm_at_rev.linalg"), importlib.import_module("mvkm_at_rev.kernels")


def closing_check_cost(datasets: list[str], sizes: list[int], repeats: int, against: str | None) -> None:
    """``kernel_top_eigh(X, RBF(sigma), 10)`` with the closing multiplicity check of the Lanczos
    solver (the default) and without it (``mvkm.linalg._CHECK_STEPS = 0``: the solver of before
    the check), and, with ``against``, the same call of the package at that git revision (the
    speed to keep), interleaved in one process, rotating which goes first; medians of
    ``repeats`` runs, wall and CPU seconds, and the dsymv products of each."""
    import mvkm.linalg as la

    steps = la._CHECK_STEPS
    old = package_at(against) if against else None
    keys = ("on", "off") + (("rev",) if old else ())

    def rev_args(kernel, X):
        # the revision's order: (kernel, X, n) before issue 33, (X, kernel, n) since
        first = next(iter(inspect.signature(old[0].kernel_top_eigh).parameters))
        return (X, kernel) if first == "X" else (kernel, X)
    print("## kernel_top_eigh with and without the closing check (median seconds, wall (CPU))\n")
    if old:
        print(f"rev: the package at `{against}` (git revision of this checkout), same data and kernel.\n")
    print("| data | n | products with / without | with check | without | with / without (CPU) "
          + ("| rev | with / rev (CPU) " if old else "") + "| max rel. eigenvalue difference |")
    print("|:---|---:|---:|---:|---:|---:|" + ("---:|---:|" if old else "") + "---:|")
    for name in datasets:
        for n in sizes:
            X = DATASETS[name][1](n)
            sigma = median_sigma(X)
            t: dict = {k: [] for k in keys} | {k + "_cpu": [] for k in keys}
            lam, prods = {}, {}
            for r in range(repeats):
                for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                    blas_module = old[0]._blas if key == "rev" else la._blas
                    la._CHECK_STEPS = 0 if key == "off" else steps
                    counter = [0]
                    real = blas_module.dsymv

                    def counting(*a, **k):
                        counter[0] += 1
                        return real(*a, **k)

                    blas_module.dsymv = counting
                    try:
                        t0, c0 = time.perf_counter(), time.process_time()
                        if key == "rev":
                            lam[key] = old[0].kernel_top_eigh(*rev_args(old[1].RBF(sigma), X), S)[0]
                        else:
                            lam[key] = kernel_top_eigh(X, RBF(sigma), S)[0]
                        t[key].append(time.perf_counter() - t0)
                        t[key + "_cpu"].append(time.process_time() - c0)
                    finally:
                        blas_module.dsymv = real
                        la._CHECK_STEPS = steps
                    prods[key] = counter[0]
            m = {k: float(np.median(v)) for k, v in t.items()}
            diff = max(float(np.max(np.abs(lam[k] - lam["off"]) / lam["off"])) for k in keys)
            rev = (f"{m['rev']:.3f} ({m['rev_cpu']:.3f}) | {m['on'] / m['rev']:.2f} "
                   f"({m['on_cpu'] / m['rev_cpu']:.2f}) | ") if old else ""
            print(f"| {name} | {n} | {prods['on']} / {prods['off']} | {m['on']:.3f} ({m['on_cpu']:.3f}) | "
                  f"{m['off']:.3f} ({m['off_cpu']:.3f}) | {m['on'] / m['off']:.2f} "
                  f"({m['on_cpu'] / m['off_cpu']:.2f}) | {rev}{diff:.0e} |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print("reproduce: python benchmarks/bench_kpca.py --closing-check --datasets "
          + " ".join(datasets) + " --sizes " + " ".join(map(str, sizes)) + f" --repeats {repeats}"
          + (f" --against {against}" if against else ""))


def block_product_cost(sizes: list[int], repeats: int, threads: int, widths=(1, 2, 4, 8, 16, 32)) -> None:
    """What a block Krylov method would pay per pass: the product of the kernel matrix with
    ``p`` vectors, read from one triangle (BLAS ``dsymm``, what a block Lanczos on the
    upper triangle of ``kernel_top_eigh`` would call) or from the full square matrix
    (``dgemm``, twice the memory), against ``p`` single-vector ``dsymv`` products (what
    the Lanczos solver spends), and the two ``dtrmm`` of ``GramTriangle.matmat``;
    medians of ``repeats`` runs, wall seconds."""
    from scipy.linalg import blas

    print("## Block products: one pass with p vectors against p single-vector passes (median seconds)\n")
    from mvkm._gram import _triangle_matmat

    print("| n | p | p x dsymv | dsymm (one triangle) | two dtrmm (one triangle) | dgemm (full matrix) | "
          "dsymm / (p x dsymv) | dtrmm / (p x dsymv) | dgemm / (p x dsymv) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        X = _gaussian(10)(n)
        K = RBF(median_sigma(X))(X)
        A = np.asfortranarray(K)
        rng = np.random.default_rng(0)
        one = rng.standard_normal(n)
        t_one = statistics.median(timed(blas.dsymv, 1.0, A, one)[1] for _ in range(repeats))
        for p in widths:
            Z = np.asfortranarray(rng.standard_normal((n, p)))
            t_symm = statistics.median(timed(blas.dsymm, 1.0, A, Z)[1] for _ in range(repeats))
            t_gemm = statistics.median(timed(blas.dgemm, 1.0, A, Z)[1] for _ in range(repeats))
            # GramTriangle.matmat's route: U Z + U^T Z - diag(K) Z from the C-ordered K's upper part
            t_trmm = statistics.median(timed(_triangle_matmat, K, Z)[1] for _ in range(repeats))
            print(f"| {n} | {p} | {p * t_one:.4f} | {t_symm:.4f} | {t_trmm:.4f} | {t_gemm:.4f} | "
                  f"{t_symm / (p * t_one):.2f} | {t_trmm / (p * t_one):.2f} | {t_gemm / (p * t_one):.2f} |",
                  flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print("reproduce: python benchmarks/bench_kpca.py --block-products --sizes "
          + " ".join(map(str, sizes)) + f" --repeats {repeats} --threads {threads}")


def block_lanczos(K: np.ndarray, s: int, p: int, tol: float, rng: np.random.Generator,
                  max_basis: int = 400) -> tuple[np.ndarray, int]:
    """Block Lanczos for the top ``s`` eigenvalues of the symmetric C-ordered ``K``: blocks of
    ``p`` vectors, one BLAS ``dgemm`` on the full matrix per pass, full reorthogonalisation
    (twice), the projection kept from the products, and the stopping rule of
    ``mvkm.linalg._lanczos_top`` (block residuals ``|B_m Y_m| <= max(tol |theta|, 4 n eps)`` on
    ``K / max|K|``). Returns the eigenvalues and the number of passes over ``K``."""
    from scipy.linalg import blas

    n = K.shape[0]
    scale = float(np.abs(K).max())
    A = K.T                                   # the F-contiguous view of a symmetric C array: no copy
    floor = 4 * n * np.finfo(float).eps
    basis = [np.linalg.qr(rng.standard_normal((n, p)))[0]]
    T = np.zeros((0, 0))
    passes = 0
    while True:
        W = blas.dgemm(1.0 / scale, A, basis[-1])
        passes += 1
        Q = np.hstack(basis)
        m = Q.shape[1]
        col = Q.T @ W
        T_new = np.zeros((m, m))
        T_new[:m - p, :m - p] = T
        T_new[:, m - p:], T_new[m - p:, :] = col, col.T
        T = T_new
        R = W - Q @ col
        R -= Q @ (Q.T @ R)
        theta, Y = np.linalg.eigh(T)
        theta, Y = theta[::-1][:s], Y[:, ::-1][:, :s]
        Q_next, B = np.linalg.qr(R)
        res = np.linalg.norm(B @ Y[m - p:], axis=0)
        if np.all(res <= np.maximum(tol * np.abs(theta), floor)) or m + p > max_basis:
            return theta * scale, passes
        basis.append(Q_next)


def block_lanczos_cost(datasets: list[str], sizes: list[int], repeats: int, threads: int,
                       widths=(8, 12, 16)) -> None:
    """A block Krylov solver against the package's Lanczos (``top_eigh(K, 10, "lanczos")``, its
    closing check included) on the same stored, centred kernel matrix: wall seconds (medians),
    passes over the matrix, and the largest eigenvalue difference relative to lambda_1."""
    from mvkm.linalg import _DEFAULT_TOL

    print("## Block Lanczos (dgemm, p vectors per pass) against top_eigh's Lanczos (dsymv), top 10\n")
    print("| data | n | Lanczos (s) | products | " + " | ".join(f"p = {p}: s, passes" for p in widths)
          + " | max rel. diff. |")
    print("|---|---:|---:|---:|" + "---:|" * len(widths) + "---:|")
    for name in datasets:
        for n in sizes:
            X = DATASETS[name][1](n)
            K = np.ascontiguousarray(center_gram(RBF(median_sigma(X))(X)))
            lam_ref = top_eigh(K, 10, "lanczos")[0]
            t_ref = statistics.median(timed(top_eigh, K, 10, "lanczos")[1] for _ in range(repeats))
            cells, diff = [], 0.0
            for p in widths:
                runs = [timed(block_lanczos, K, 10, p, _DEFAULT_TOL, np.random.default_rng(0))
                        for _ in range(repeats)]
                (lam, passes), _ = runs[0]
                diff = max(diff, float(np.abs(lam - lam_ref).max() / lam_ref[0]))
                cells.append(f"{statistics.median(r[1] for r in runs):.3f}, {passes}")
            print(f"| {name} | {n} | {t_ref:.3f} | {lanczos_products(K)} | " + " | ".join(cells)
                  + f" | {diff:.0e} |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print("reproduce: python benchmarks/bench_kpca.py --block-lanczos --datasets " + " ".join(datasets)
          + " --sizes " + " ".join(map(str, sizes)) + f" --repeats {repeats} --threads {threads}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS),
                        metavar="NAME",
                        help=f"data sets (default: all of {', '.join(DATASETS)})")
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000],
                        help="numbers of samples n (default: 5000 10000)")
    parser.add_argument("--quick", action="store_true",
                        help="small run: n = 1500 3000 (overrides --sizes)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case (median reported)")
    parser.add_argument("--subspace", action="store_true",
                        help="also time top_eigh(method='subspace') in the solvers-alone table")
    parser.add_argument("--threads", type=int, default=2,
                        help="limit BLAS threads (default: 2; 0: the library's own choice)")
    parser.add_argument("--closing-check", action="store_true",
                        help="only time kernel_top_eigh with and without the closing check")
    parser.add_argument("--block-products", action="store_true",
                        help="only time products with p vectors (dsymm, dgemm) against p dsymv")
    parser.add_argument("--block-lanczos", action="store_true",
                        help="only time a block Lanczos (p = 8, 12, 16) against top_eigh's Lanczos")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="with --closing-check: also time the package at this git revision")
    args = parser.parse_args(argv)
    sizes = [1500, 3000] if args.quick else args.sizes
    if args.block_products or args.block_lanczos:
        limits = threadpool_limits(args.threads, user_api="blas") if args.threads else contextlib.nullcontext()
        with limits:
            if args.block_products:
                block_product_cost(sizes, args.repeats, args.threads)
            else:
                block_lanczos_cost(args.datasets, sizes, args.repeats, args.threads)
        return
    if args.closing_check:
        limits = threadpool_limits(args.threads, user_api="blas") if args.threads else contextlib.nullcontext()
        with limits:
            closing_check_cost(args.datasets, sizes, args.repeats, args.against)
        return

    limits = threadpool_limits(args.threads, user_api="blas") if args.threads else contextlib.nullcontext()
    with limits:
        blas = [f"{i['internal_api']} {i.get('version', '')} ({i['num_threads']} threads)"
                for i in threadpool_info() if i["user_api"] == "blas"]
        print(f"# Kernel PCA, s = {S}: mvkm {mvkm.__version__} vs scikit-learn {sklearn.__version__} "
              f"KernelPCA(eigen_solver='arpack')")
        print(f"# numpy {np.__version__}, scipy {scipy.__version__}, BLAS: {', '.join(blas)}; "
              f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}")
        print(f"# median of {args.repeats} runs; load average at start: "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print("# data sets (RBF sigma: median heuristic, the median distance between "
              f"{MEDIAN_SAMPLE} points drawn with seed 1):")
        for name in args.datasets:
            print(f"#   {name}: {DATASETS[name][0]}")
        print()
        results = []
        for name in args.datasets:
            for n in sizes:
                results.append(bench_case(name, n, args.repeats, args.subspace))
                print(f"  done {name} n = {n} (load {os.getloadavg()[0]:.1f})",
                      file=sys.stderr, flush=True)

    print("## End to end: kernel + centring + top-10 eigenpairs (wall-clock seconds, median)")
    print()
    print("mvkm (a): RBF + center_gram(copy=False) + top_eigh; "
          "mvkm (b): RBF + top_eigh(center=True) (centring inside the products); "
          "mvkm (c): kernel_top_eigh(X, RBF, 10) (the kernel's upper triangle only, no symmetry "
          "check, centring inside the products). "
          "rel. err: max_i |lambda_i - lambda_i^ref| / lambda_i^ref.")
    print()
    print("| data | d | n | sigma | KernelPCA arpack [s] | mvkm (a) [s] | speed-up (a) | mvkm (b) [s] | "
          "speed-up (b) | mvkm (c) [s] | speed-up (c) | rel. err KernelPCA / (a) / (b) / (c) | "
          "auto method | reference |")
    print("|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|:---|:---|")
    for r in results:
        print(f"| {r['data']} | {r['d']} | {r['n']} | {r['sigma']:.3g} | {r['t_sklearn']:.3f} | "
              f"{r['t_mvkm']:.3f} | {r['t_sklearn'] / r['t_mvkm']:.2f}x | {r['t_implicit']:.3f} | "
              f"{r['t_sklearn'] / r['t_implicit']:.2f}x | {r['t_fused']:.3f} | "
              f"{r['t_sklearn'] / r['t_fused']:.2f}x | {r['err_sklearn']:.0e} / "
              f"{r['err_mvkm']:.0e} / {r['err_implicit']:.0e} / {r['err_fused']:.0e} | "
              f"{r['method']} | {r['ref']} |")
    print()
    print("## Breakdown (median seconds) and ARPACK products")
    print()
    print("Kernels alone: mvkm `RBF(sigma)(X)` against scikit-learn's `rbf_kernel` (interleaved). "
          "Products: matrix-vector products of `eigsh(Kc, tol=0)` (KernelPCA), of "
          "`top_eigh(Kc, method='arpack')` and of `top_eigh(Kc, method='lanczos')` (the "
          "default, 'auto', here); lambda_10/lambda_1 from the reference.")
    print()
    print("| data | n | mvkm (a): RBF | center_gram | top_eigh | RBF alone | sklearn rbf_kernel | "
          "products sklearn / mvkm arpack / mvkm lanczos | lambda_10/lambda_1 |")
    print("|:---|---:|---:|---:|---:|---:|---:|:---|---:|")
    for r in results:
        p = r["parts"]
        print(f"| {r['data']} | {r['n']} | {p['kernel']:.3f} | {p['center']:.3f} | {p['solve']:.3f} | "
              f"{r['t_kernel_mvkm']:.3f} | {r['t_kernel_sklearn']:.3f} | "
              f"{r['products'][0]} / {r['products'][1]} / {r['products'][2]} | {r['gap']:.2g} |")
    print()
    print("## Eigensolvers alone on the same centred kernel (median seconds; rel. err)")
    print()
    names = list(results[0]["solver_t"])
    print("| data | n | " + " | ".join(names) + " | arpack speed-up vs eigsh(K) | "
          "lanczos speed-up vs eigsh(K) |")
    print("|:---|---:|" + "---:|" * len(names) + "---:|---:|")
    for r in results:
        cells = [f"{r['solver_t'][k]:.3f} ({r['solver_err'][k]:.0e})" for k in names]
        base = r["solver_t"]["eigsh(K) [sklearn]"]
        print(f"| {r['data']} | {r['n']} | " + " | ".join(cells) +
              f" | {base / r['solver_t']['top_eigh arpack']:.2f}x"
              f" | {base / r['solver_t']['top_eigh lanczos']:.2f}x |")
    print()
    print(f"# load average at end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
