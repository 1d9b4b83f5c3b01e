#!/usr/bin/env python
r"""Mutation check of the book: does some notebook fail when the package is wrong?

Each *mutant* is one deliberate, plausible fault in :mod:`mvkm`: a name, a
description, the file, an exact ``old`` snippet (which must occur exactly
once in that file, so the list fails loudly when the code moves on) and its
``new`` replacement. For every mutant the script copies the package to a
temporary directory, applies the replacement there (the working tree is never
touched), and executes every chapter notebook with ``PYTHONPATH`` pointing at
the copy, which shadows the editable install (notebook kernels inherit the
environment). A notebook *catches* a mutant when one of its cells raises (an
``assert`` or any other exception); execution stops at the first failing cell,
so a caught mutant is cheap. A notebook that runs past ``--timeout`` counts as
caught by timeout and is reported separately.

Before the mutants, the unmutated package runs once: every notebook must pass,
or the matrix would mean nothing (exit status 2). That run also records, with
coverage.py inside each kernel, which lines of the package each notebook
executes; a mutant whose snippet a notebook never executes cannot change that
notebook's behaviour, so the pair is reported as "not reached" without being
run (``--no-skip`` runs it anyway).

Notebooks are the chapters listed in ``_toc.yml``, except the back matter
(``book/course.ipynb`` lists the chapters and has no check of ``mvkm``), and
any notebook that does not import ``mvkm``; a listed file that does not exist
yet is skipped with a warning.

Usage (``make mutants`` runs the first)::

    python tests/mutants.py --out _build/mutants.md
    python tests/mutants.py --mutants top_eigh_scaled,ppca_sigma2_source --notebooks 'book/ppca/*'
    python tests/mutants.py --notebooks '!book/smm/*' --jobs 1
    python tests/mutants.py --list

Exit status: 0 when every mutant is caught by at least one notebook and every
notebook catches at least one mutant; 1 otherwise; 2 when the unmutated
package already fails a notebook.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mvkm"
TOC = ROOT / "_toc.yml"
BACK_MATTER = "Back matter"


# ---------------------------------------------------------------------------
# The mutants
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    file: str          # relative to mvkm/
    old: str
    new: str
    target: str        # the public estimator or routine it breaks
    trace: bool = True  # False: the snippet runs where coverage cannot see it (numba): always run


MUTANTS: list[Mutant] = [
    # -- kernels and feature maps ------------------------------------------------------------
    Mutant(
        "center_test_gram_test_mean",
        "test kernel rows centred with the test set's own column and grand means "
        "instead of the training means",
        "kernels.py",
        "    Kc -= train_means[None, :]\n    Kc += train_means.mean()\n",
        "    Kc -= K_test.mean(axis=0)[None, :]\n    Kc += K_test.mean()\n",
        "center_test_gram (MultiViewRKM, KernelPPCA, MultiViewKPLS out of sample)",
    ),
    Mutant(
        "rff_other_seed",
        "random Fourier features drawn from another seed than random_state",
        "features.py",
        "        rng = check_random_state(self.random_state)\n        d = X.shape[1]\n",
        "        rng = check_random_state(self.random_state)\n"
        "        rng = np.random.default_rng(rng.integers(2**32))\n        d = X.shape[1]\n",
        "RandomFourierFeatures",
    ),
    Mutant(
        "rff_scale",
        "random Fourier features scaled by sqrt(1/D) instead of sqrt(2/D): "
        "z(x)^T z(y) estimates k/2",
        "features.py",
        "        Z *= np.sqrt(2.0 / self.n_features_out_)\n",
        "        Z *= np.sqrt(1.0 / self.n_features_out_)\n",
        "RandomFourierFeatures",
    ),
    # -- linear algebra ------------------------------------------------------------------------
    Mutant(
        "top_eigh_scaled",
        "top_eigh returns its eigenvalues scaled by 1 + 1e-6",
        "linalg.py",
        "    return np.ascontiguousarray(w, dtype=np.float64), flip_signs(V)\n",
        "    return np.ascontiguousarray(w * (1 + 1e-6), dtype=np.float64), flip_signs(V)\n",
        "top_eigh (every eig-based fit)",
    ),
    Mutant(
        "top_eigh_sign_not_undone",
        "top_eigh flips the sign of its last eigenvector after the sign convention "
        "(a sign flip of one component not undone)",
        "linalg.py",
        "    return np.ascontiguousarray(w, dtype=np.float64), flip_signs(V)\n",
        "    return np.ascontiguousarray(w, dtype=np.float64), "
        "flip_signs(V) * np.where(np.arange(V.shape[1]) == V.shape[1] - 1, -1.0, 1.0)\n",
        "top_eigh, flip_signs convention",
    ),
    Mutant(
        "lanczos_residual_dropped",
        "Lanczos takes every Ritz residual |beta (y_i)_m| for zero: it returns the Ritz "
        "pairs of the first s products, unconverged",
        "linalg.py",
        "            residual = np.abs(beta * Y[m - 1, :s])\n",
        "            residual = 0.0 * np.abs(beta * Y[m - 1, :s])\n",
        "top_eigh(method='lanczos'), the default for dense n > 1000",
    ),
    Mutant(
        "lanczos_closing_check_skipped",
        "Lanczos skips its closing multiplicity check: a repeated top eigenvalue is returned "
        "once (the single-vector Krylov space holds one vector of each eigenspace)",
        "linalg.py",
        "    if not _closing_check(matvec, Qm, T, theta, res, floor, rng):   # Q_m^T K Q_m = T_m\n",
        "    if True or not _closing_check(matvec, Qm, T, theta, res, floor, rng):   # Q_m^T K Q_m = T_m\n",
        "top_eigh(method='lanczos'), the default for dense n > 1000",
    ),
    Mutant(
        "rotate_unordered",
        "rotate_to_diagonal sorts Gamma's eigenvalues descending but rotates with the "
        "eigenvectors in eigh's ascending order",
        "linalg.py",
        "    return flip_signs(A @ Q[:, order]), evals[order]\n",
        "    return flip_signs(A @ Q), evals[order]\n",
        "rotate_to_diagonal (MultiViewRKM Stiefel, maximize_trace)",
    ),
    Mutant(
        "cayley_step_sign",
        "the Cayley/Barzilai-Borwein step of maximize_trace moves against the "
        "Riemannian gradient",
        "stiefel.py",
        "            Y = (twoX + tau * R) @ ops.inv_spd(eye + (0.25 * tau * tau) * S) - X\n",
        "            Y = (twoX - tau * R) @ ops.inv_spd(eye + (0.25 * tau * tau) * S) - X\n",
        "maximize_trace (MultiViewRKM solver='stiefel')",
    ),
    # -- Part I: MultiViewRKM --------------------------------------------------------------------
    Mutant(
        "rkm_primal_no_gamma_inverse",
        "primal latents H = Phi U instead of Phi U Gamma^{-1} (eq. 6 without Gamma^{-1})",
        "rkm.py",
        "        self.H_ = np.linalg.solve(Gamma, (Phi @ U).T).T       # eq. (6), Gamma symmetric\n",
        "        self.H_ = Phi @ U       # eq. (6), Gamma symmetric\n",
        "MultiViewRKM primal",
    ),
    Mutant(
        "rkm_dual_uncentred",
        "dual: the kernel views' Gram matrices are summed without centring",
        "rkm.py",
        "            tris[big] = None                                   # its array now holds the sum\n",
        "            total.center = False\n"
        "            tris[big] = None                                   # its array now holds the sum\n",
        "MultiViewRKM dual",
    ),
    Mutant(
        "rkm_missing_view_kept",
        "inference: the missing views' U_v^T U_v are not subtracted from Gamma "
        "(eq. 7 not eliminated)",
        "rkm.py",
        "            M = sum((self._UtU[v] for v in given), np.zeros_like(self.Gamma_))",
        "            M = sum((self._UtU[v] for v in range(self.n_views_)), "
        "np.zeros_like(self.Gamma_))",
        "MultiViewRKM transform / predict",
    ),
    # -- Part II: KernelPPCA -----------------------------------------------------------------------
    Mutant(
        "ppca_sigma2_source",
        "sigma^2 from the source's N - q instead of r - q (off by (r - q)/(N - q))",
        "ppca.py",
        "        ml = tails / (N * (r - np.arange(1, tails.size + 1)))\n",
        "        ml = tails / (N * (N - np.arange(1, tails.size + 1)))\n",
        "KernelPPCA (sigma2_)",
    ),
    Mutant(
        "ppca_posterior_no_sigma2",
        "posterior covariance M^{-1} instead of sigma^2 M^{-1}",
        "ppca.py",
        "        cov = self.sigma2_ * np.linalg.inv(self._M)\n",
        "        cov = np.linalg.inv(self._M)\n",
        "KernelPPCA.posterior",
    ),
    Mutant(
        "ppca_sample_sigma_squared",
        "dual sampling: B's noise eigenvalues sigma^2 sqrt(lambda) instead of "
        "sigma sqrt(lambda)",
        "ppca.py",
        "np.sqrt(self.sigma2_ * lam[q:])])",
        "self.sigma2_ * np.sqrt(lam[q:])])",
        "KernelPPCA.sample / B_ / get_kernel_covariance",
    ),
    Mutant(
        "ppca_score_norm",
        "score_samples: ||phi(x) - mu||^2 with -mean k(x, x_j) instead of -2 mean k(x, x_j)",
        "ppca.py",
        "        norm2 = self._kernel_diag(Xa) - 2.0 * K_test.mean(axis=1)",
        "        norm2 = self._kernel_diag(Xa) - K_test.mean(axis=1)",
        "KernelPPCA.score_samples",
    ),
    Mutant(
        "preimage_unstabilised",
        "stable_kernel_smoother without its stabilisation: no clipping, tau = 0 "
        "(the plain smoother)",
        "preimage.py",
        "    w = np.maximum(k, 0.0) if clip else k\n",
        "    w, tau = k, 0.0\n",
        "stable_kernel_smoother (KernelPPCA pre-images)",
    ),
    Mutant(
        "lag_off_by_one",
        "lag_embed pairs each window with its own last value instead of the next one",
        "timeseries.py",
        "    return X, x[p + 1:, None].copy()\n",
        "    return X, x[p:x.size - 1, None].copy()\n",
        "timeseries.lag_embed (forecasting)",
    ),
    # -- Part III: MultiViewKPLS ---------------------------------------------------------------------
    Mutant(
        "kpls_with_diagonal",
        "E = 1 1^T instead of 1 1^T - I: each view's own block kept in Omega",
        "kpls.py",
        "    return out.reshape(x.shape)\n",
        "    return (out + xs).reshape(x.shape)\n",
        "MultiViewKPLS (eigenproblem)",
    ),
    Mutant(
        "kpls_test_means_aliased",
        "training kernel means taken after the in-place centring (all zero): test "
        "rows centred with the wrong means",
        "kpls.py",
        "            self._train_means.append(K.mean(axis=0))\n"
        "            K = center_gram(K, copy=False) if self.center else K\n",
        "            K = center_gram(K, copy=False) if self.center else K\n"
        "            self._train_means.append(K.mean(axis=0))\n",
        "MultiViewKPLS.transform (out-of-sample centring)",
    ),
    Mutant(
        "kpls_alpha_euclidean",
        "dual coefficients normalised to unit Euclidean norm instead of alpha^T D alpha = 1",
        "kpls.py",
        "        alpha = alpha * signs\n",
        "        alpha = alpha * signs / np.linalg.norm(alpha, axis=0)\n",
        "MultiViewKPLS (normalisation of dual_coef_, scores)",
    ),
    Mutant(
        "kpls_test_uncentred",
        "test kernel rows left uncentred in transform",
        "kpls.py",
        "                    Kt = _center_test_rows(Kt, self._train_means[v])\n",
        "                    Kt = Kt + 0.0\n",
        "MultiViewKPLS.transform (out-of-sample centring)",
    ),
    Mutant(
        "kpls_lanczos_wrong_kernel",
        "the Lanczos operator D pairs block v with the kernel of view v + 1",
        "kpls.py",
        "            return np.concatenate([_times(K, x[v * N:(v + 1) * N]) * inv_cs[v]\n"
        "                                   for v, K in enumerate(Ks)])\n",
        "            return np.concatenate([_times(Ks[(v + 1) % V], x[v * N:(v + 1) * N]) * inv_cs[v]\n"
        "                                   for v in range(V)])\n",
        "MultiViewKPLS(solver='lanczos')",
    ),
    Mutant(
        "kpls_test_own_means",
        "test kernel rows centred with the test rows' own column means instead of the training means",
        "kpls.py",
        "                    Kt = _center_test_rows(Kt, self._train_means[v])\n",
        "                    Kt = _center_test_rows(Kt, Kt.mean(axis=0))\n",
        "MultiViewKPLS.transform (out-of-sample centring)",
    ),
    Mutant(
        "kpls_lanczos_scale_not_undone",
        "the Lanczos route runs on D / c_v (c_v a power of two near view v's largest "
        "centred diagonal entry) and forgets to scale back: eigenvalues lambda' instead "
        "of lambda' sqrt(c_1 c_2), alpha_v without the 1 / sqrt(c_v)",
        "kpls.py",
        "                    for v in range(V):\n"
        "                        alpha[v * N:(v + 1) * N] /= math.sqrt(cs[v])\n"
        "                    lam_scale = math.sqrt(cs[0] * cs[1]) if V == 2 else cs[0]\n"
        "                    return lam * lam_scale, alpha\n",
        "                    return lam, alpha\n",
        "MultiViewKPLS(solver='lanczos')",
    ),
    # -- Part IV: LowRankSMM -------------------------------------------------------------------------
    Mutant(
        "smm_box_upper",
        "box QP of the SVM dual without intercept solved with the upper bound C / n "
        "instead of C",
        "smm.py",
        "        alpha, _ = _box_qp(Q, np.full(len(y), C), np.ones(len(y)), start, _QP_TOL, 20)\n",
        "        alpha, _ = _box_qp(Q, np.full(len(y), C / len(y)), np.ones(len(y)), start, _QP_TOL, 20)\n",
        "LowRankSMM (C-step and P-step duals)",
    ),
    Mutant(
        "smm_projector_not_orthonormal",
        "P-step keeps P itself, not an orthonormal basis of its range: "
        "W = P P^T is not an idempotent projector",
        "smm.py",
        "            Un = _orthonormal(P)\n",
        "            Un = P\n",
        "LowRankSMM (P-step, row_projection_ / col_projection_)",
    ),
    Mutant(
        "covariance_merge_no_cross_term",
        "streamed scatter merged without Chan's (n_a n_b / n) delta delta^T term: each chunk "
        "centred on its own mean only",
        "covariance.py",
        "        self.cross.append(np.sqrt(self.n * b / n) * delta)   # Chan's term, added in result()\n",
        "        self.cross.append(0.0 * delta)\n",
        "feature_moments and the streamed primal fits (numpy chunks)",
    ),
    Mutant(
        "matfree_grand_mean_dropped",
        "matrix-free centring K_c Z = K Z - r 1^T Z - 1 r^T Z + g 1 1^T Z without its g term",
        "matfree.py",
        "            KZ -= (self._r @ Z64 - self._g * sums)[None, :]\n",
        "            KZ -= (self._r @ Z64)[None, :]\n",
        "KernelOperator, matfree_top_eigh, kernel_storage='none'",
    ),
    Mutant(
        "smm_decision_untransposed",
        "decision_function applies the column kernel to the test matrices' rows "
        "(test matrices not transposed)",
        "smm.py",
        "             + _projected(kc, np.ascontiguousarray(Xa.transpose(0, 2, 1)),\n",
        "             + _projected(kc, np.ascontiguousarray(Xa),\n",
        "LowRankSMM.decision_function / predict",
    ),
    Mutant(
        "smm_decision_no_intercept",
        "decision_function drops the intercept b (fits with fit_intercept=True predict without it)",
        "smm.py",
        "        return G @ self.dual_coef_[sv] + self.intercept_\n",
        "        return G @ self.dual_coef_[sv]\n",
        "LowRankSMM.decision_function / predict (with intercept)",
    ),
    Mutant(
        "smm_svd_start_bottom",
        "SVD start from the bottom r eigenvectors of A^T A instead of the top r",
        "smm.py",
        "        return evecs[:, ::-1][:, :r].copy()\n",
        "        return evecs[:, :r].copy()\n",
        "LowRankSMM (init='svd')",
    ),
    Mutant(
        "smm_pstep_features_unscaled",
        "P-step features (C^T C)^{-1} C^T Phi(X_i) instead of (C^T C)^{-1/2} C^T Phi(X_i): the P-step "
        "solves the SVM of another problem",
        "smm.py",
        '            feats.append(np.einsum("kj,ijq->ikq", inv_half, V).reshape(len(y), -1))\n',
        '            feats.append(np.einsum("kj,ijq->ikq", inv, V).reshape(len(y), -1))\n',
        "LowRankSMM (P-step)",
    ),
    Mutant(
        "smm_embedding_blocks_swapped",
        "symmetric_embedding puts X in the bottom-left block and X^T in the top-right: "
        "it embeds X^T, so rows and columns trade places",
        "smm.py",
        "    out[:, :d1, d1:] = Xa\n    out[:, d1:, :d1] = Xa.transpose(0, 2, 1)\n",
        "    out[:, d2:, :d2] = Xa\n    out[:, :d2, d2:] = Xa.transpose(0, 2, 1)\n",
        "mvkm.smm.symmetric_embedding",
    ),
]


def find_mutant(name: str) -> Mutant:
    for m in MUTANTS:
        if m.name == name:
            return m
    raise SystemExit(f"unknown mutant {name!r}; known: {', '.join(m.name for m in MUTANTS)}")


def snippet_count(mutant: Mutant, package: Path = PACKAGE) -> int:
    """How often the mutant's ``old`` snippet occurs in ``package/<file>``."""
    return (package / mutant.file).read_text().count(mutant.old)


def check_snippets(mutants: list[Mutant], package: Path = PACKAGE) -> list[str]:
    """Problems with the mutants' snippets in ``package``: each must occur exactly once."""
    problems = []
    names = [m.name for m in MUTANTS]
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(f"mutant name {name!r} is used more than once")
    for m in mutants:
        path = package / m.file
        if not path.exists():
            problems.append(f"{m.name}: {path} does not exist")
            continue
        count = snippet_count(m, package)
        if count != 1:
            problems.append(f"{m.name}: its old snippet occurs {count} times in mvkm/{m.file} "
                            f"(must be exactly once): {m.old.strip()[:80]!r}")
        if m.old == m.new:
            problems.append(f"{m.name}: old and new are the same")
    return problems


def copy_package(src: Path, dest_root: Path) -> Path:
    """Copy the package ``src`` to ``dest_root/mvkm`` (without bytecode caches)."""
    dest = dest_root / "mvkm"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def apply_mutant(mutant: Mutant, package: Path) -> None:
    """Apply ``mutant`` to the package copy at ``package`` (in place), failing loudly."""
    path = package / mutant.file
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"mutant {mutant.name}: old snippet occurs {count} times in "
                         f"{path} (must be exactly once); update tests/mutants.py")
    path.write_text(text.replace(mutant.old, mutant.new))


def snippet_statement_lines(mutant: Mutant, package: Path) -> set[int]:
    """First lines of the innermost statements overlapping the snippet (what coverage records)."""
    text = (package / mutant.file).read_text()
    start = text.index(mutant.old)
    first = text.count("\n", 0, start) + 1
    last = first + mutant.old.rstrip("\n").count("\n")
    tree = ast.parse(text)
    lines = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        if end < first or node.lineno > last:
            continue
        inner = [c for c in ast.walk(node) if c is not node and isinstance(c, ast.stmt)
                 and not ((c.end_lineno or c.lineno) < first or c.lineno > last)]
        if not inner:
            lines.add(node.lineno)
    return lines


# ---------------------------------------------------------------------------
# The notebooks
# ---------------------------------------------------------------------------

def discover_notebooks(pattern: str | None = None) -> tuple[list[str], list[str]]:
    """Chapter notebooks from ``_toc.yml`` (relative paths) and warnings about skipped entries."""
    import yaml

    toc = yaml.safe_load(TOC.read_text())
    notebooks, notes = [], []

    def visit(entries: list[dict[str, Any]], caption: str) -> None:
        for entry in entries or []:
            if "file" in entry:
                rel = entry["file"]
                path = ROOT / rel
                if not path.suffix:
                    candidates = [path.with_suffix(s) for s in (".ipynb", ".md")]
                    path = next((c for c in candidates if c.exists()), candidates[0])
                relpath = str(path.relative_to(ROOT))
                if caption == BACK_MATTER:
                    notes.append(f"{relpath}: back matter, not a chapter (no check of mvkm): skipped")
                elif not path.exists():
                    notes.append(f"WARNING: {rel} is in _toc.yml but does not exist (yet): skipped")
                elif path.suffix != ".ipynb":
                    pass
                elif not _imports_mvkm(path):
                    notes.append(f"{relpath}: does not import mvkm: skipped")
                else:
                    notebooks.append(relpath)
            visit(entry.get("chapters", []) + entry.get("sections", []), caption)

    for part in toc.get("parts", []):
        visit(part.get("chapters", []), part.get("caption", ""))
    visit(toc.get("chapters", []), "")
    if pattern:
        globs = [g.strip() for g in pattern.split(",") if g.strip()]
        include = [g for g in globs if not g.startswith("!")]
        exclude = [g[1:] for g in globs if g.startswith("!")]

        def match(nb: str, gs: list[str]) -> bool:
            return any(fnmatch.fnmatch(nb, g) or fnmatch.fnmatch(nb, g + ".ipynb") for g in gs)

        notebooks = [nb for nb in notebooks
                     if (not include or match(nb, include)) and not match(nb, exclude)]
    return notebooks, notes


_IMPORT_MVKM = re.compile(r"^\s*(from|import)\s+mvkm\b", re.M)


def _local_modules(path: Path) -> list[Path]:
    """The modules a chapter's assignment ships (``tools/assignments.local_modules``)."""
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))
    from assignments import local_modules

    return local_modules(path)


def _imports_mvkm(path: Path) -> bool:
    """Whether the notebook imports mvkm, itself or through a module beside it
    (Part IV's experiment chapters import ``smm_common.py``, which imports mvkm)."""
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return any(_IMPORT_MVKM.search(text) for text in
               [code] + [module.read_text() for module in _local_modules(path)])


# ---------------------------------------------------------------------------
# Executing one notebook (in a child process, so that its kernel gets PYTHONPATH)
# ---------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_COVERAGE_START = """\
import coverage as _mutants_coverage
_mutants_cov = _mutants_coverage.Coverage(data_file={data!r}, include=[{include!r}],
                                          config_file=False)
_mutants_cov.start()
"""
_COVERAGE_STOP = "_mutants_cov.stop(); _mutants_cov.save()"


def _run_one(notebook: str, timeout: float, coverage_file: str | None, package: str) -> dict[str, Any]:
    """Execute ``notebook`` cell by cell in this process's environment; stop at the first error."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    sys.path.insert(0, str(ROOT / "tools"))
    from kernels import poll_in_slices

    poll_in_slices()   # a lost wake-up would otherwise count as a catch by timeout (tools/kernels.py)
    path = ROOT / notebook
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=int(timeout), kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    result: dict[str, Any] = {"status": "passed"}
    start = time.monotonic()
    with client.setup_kernel():
        if coverage_file:  # before mvkm is imported, so that import-time lines count too
            client.execute_cell(nbformat.v4.new_code_cell(_COVERAGE_START.format(
                data=coverage_file, include=package + "/*")), -1, store_history=False)
        probe = nbformat.v4.new_code_cell("import mvkm as _m; print(_m.__file__); del _m")
        client.execute_cell(probe, -1, store_history=False)
        loaded = "".join(o.get("text", "") for o in probe.outputs).strip()
        if not loaded.startswith(package):
            return {"status": "error", "cell": -1, "error": f"mvkm imported from {loaded}, "
                    f"not from the copy {package}", "seconds": 0.0}
        for index, cell in enumerate(nb.cells):
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                result = {"status": "timeout", "cell": index, "error": "cell timed out"}
                break
            except DeadKernelError as exc:
                result = {"status": "caught", "cell": index, "error": f"DeadKernelError: {exc}"}
                break
            except CellExecutionError as exc:
                where = ""
                for line in _ANSI.sub("", str(exc.traceback or "")).splitlines():
                    arrow = re.match(r"\s*-+>\s*\d+\s?(.*)", line)  # IPython's "---> 12 code"
                    if arrow:
                        where = arrow.group(1).strip()
                evalue = " ".join(str(exc.evalue or "").split())
                msg = f"{exc.ename}: {evalue}" if evalue else str(exc.ename)
                if where:
                    msg += f" at `{where}`"
                result = {"status": "caught", "cell": index, "error": msg[:300]}
                break
        if coverage_file and result["status"] == "passed":
            client.execute_cell(nbformat.v4.new_code_cell(_COVERAGE_STOP), -1, store_history=False)
    result["seconds"] = round(time.monotonic() - start, 1)
    return result


def run_notebook(notebook: str, package_root: Path, timeout: float,
                 coverage_file: Path | None = None) -> dict[str, Any]:
    """Run ``notebook`` in a child process whose kernels import mvkm from ``package_root``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(package_root)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env.setdefault("MPLBACKEND", "Agg")
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_run", notebook,
           "--_package", str(package_root / "mvkm"), "--timeout", str(timeout)]
    if coverage_file is not None:
        cmd += ["--_coverage", str(coverage_file)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"status": "timeout", "cell": None, "error": f"over {timeout:.0f} s",
                "seconds": round(time.monotonic() - start, 1)}
    finally:
        with contextlib.suppress(ProcessLookupError):  # a kernel left behind
            os.killpg(proc.pid, signal.SIGKILL)
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            result["seconds"] = round(time.monotonic() - start, 1)
            return result
    tail = " | ".join(err.strip().splitlines()[-3:])
    return {"status": "error", "cell": None, "error": f"runner failed (rc {proc.returncode}): {tail}"[:300],
            "seconds": round(time.monotonic() - start, 1)}


# ---------------------------------------------------------------------------
# The matrix
# ---------------------------------------------------------------------------

SYMBOL = {"caught": "X", "timeout": "T", "passed": ".", "unreached": " ", "error": "E"}


def short(notebook: str) -> str:
    return notebook.removeprefix("book/").removesuffix(".ipynb")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_matrix(args: argparse.Namespace) -> int:
    mutants = ([find_mutant(n.strip()) for n in args.mutants.split(",") if n.strip()]
               if args.mutants else list(MUTANTS))
    notebooks, notes = discover_notebooks(args.notebooks)
    for note in notes:
        log(note)
    if not notebooks:
        raise SystemExit(f"no notebook matches {args.notebooks!r}")
    problems = check_snippets(mutants)
    if problems:
        raise SystemExit("mutants out of sync with mvkm/:\n  " + "\n  ".join(problems))

    t_start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="mvkm-mutants-"))
    out_md = Path(args.out) if args.out else None
    out_json = out_md.with_suffix(".json") if out_md else None
    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "notebooks": notebooks, "notes": notes,
        "mutants": [dataclasses.asdict(m) for m in mutants], "baseline": {}, "results": {},
        "jobs": args.jobs, "timeout": args.timeout, "skip_unreached": not args.no_skip,
    }
    lock = threading.Lock()

    def save() -> None:
        if out_json:
            out_json.parent.mkdir(parents=True, exist_ok=True)
            with lock:
                out_json.write_text(json.dumps(report, indent=1))

    try:
        # one snapshot of the package: the baseline and every mutant derive from it, so
        # edits made to mvkm/ while the matrix runs do not mix into it
        base_root = work / "base"
        base_pkg = copy_package(PACKAGE, base_root)
        roots: dict[str, Path] = {}
        for m in mutants:
            roots[m.name] = work / m.name
            apply_mutant(m, copy_package(base_pkg, roots[m.name]))

        # 1. the unmutated package: every notebook must pass (and tells what it executes)
        log(f"baseline: {len(notebooks)} notebooks, {args.jobs} at a time")
        trace = not args.no_skip
        covdir = work / "coverage"
        covdir.mkdir()
        executed: dict[str, dict[str, set[int]]] = {}

        def baseline(nb: str) -> tuple[str, dict[str, Any]]:
            cov = covdir / (short(nb).replace("/", "__") + ".cov") if trace else None
            res = run_notebook(nb, base_root, args.timeout, cov)
            if cov is not None and res["status"] == "passed":
                import coverage

                data = coverage.CoverageData(basename=str(cov))
                data.read()
                executed[nb] = {Path(f).name: set(data.lines(f) or ()) for f in data.measured_files()}
            return nb, res

        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for nb, res in pool.map(baseline, notebooks):
                report["baseline"][nb] = res
                log(f"baseline {short(nb)}: {res['status']} ({res['seconds']} s)"
                    + (f" cell {res['cell']}: {res['error']}" if res["status"] != "passed" else ""))
        save()
        failed = [nb for nb, r in report["baseline"].items() if r["status"] != "passed"]
        if failed:
            log(f"the unmutated package fails {len(failed)} notebook(s): {failed}; no matrix")
            report["elapsed_s"] = round(time.monotonic() - t_start)
            if out_md:
                out_md.write_text(render(report))
            save()
            return 2

        # 2. the mutants
        tasks = []
        for m in mutants:
            lines = snippet_statement_lines(m, base_pkg)
            report["results"][m.name] = {}
            for nb in notebooks:
                reached = (not trace or not m.trace
                           or bool(lines & executed.get(nb, {}).get(Path(m.file).name, set())))
                if reached:
                    tasks.append((m, nb))
                else:
                    report["results"][m.name][nb] = {"status": "unreached", "cell": None,
                                                     "error": "", "seconds": 0.0}
        log(f"{len(tasks)} mutant x notebook runs "
            f"({len(mutants) * len(notebooks) - len(tasks)} pairs not reached, not run)")

        def one(task: tuple[Mutant, str]) -> tuple[Mutant, str, dict[str, Any]]:
            m, nb = task
            return m, nb, run_notebook(nb, roots[m.name], args.timeout)

        done = 0
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for m, nb, res in pool.map(one, tasks):
                done += 1
                with lock:
                    report["results"][m.name][nb] = res
                log(f"[{done}/{len(tasks)}] {m.name} x {short(nb)}: {res['status']} "
                    f"({res['seconds']} s)" + (f" cell {res['cell']}: {res['error']}"
                                               if res["status"] != "passed" else ""))
                save()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report["elapsed_s"] = round(time.monotonic() - t_start)
    summary = summarise(report)
    report["summary"] = summary
    save()
    md = render(report)
    if out_md:
        out_md.parent.mkdir(parents=True, exist_ok=True)
        out_md.write_text(md)
        log(f"wrote {out_md} and {out_json}")
    print(md)
    return 0 if summary["ok"] else 1


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    results = report["results"]
    caught_by = {m: [nb for nb, r in row.items() if r["status"] in ("caught", "timeout")]
                 for m, row in results.items()}
    catches = {nb: [m for m in results if results[m][nb]["status"] in ("caught", "timeout")]
               for nb in report["notebooks"]}
    uncaught = [m for m, nbs in caught_by.items() if not nbs]
    idle = [nb for nb, ms in catches.items() if not ms]
    errors = [(m, nb) for m, row in results.items() for nb, r in row.items() if r["status"] == "error"]
    return {"caught_by": caught_by, "catches": catches, "uncaught": uncaught,
            "notebooks_catching_none": idle, "errors": errors,
            "ok": not uncaught and not idle and not errors}


def render(report: dict[str, Any]) -> str:
    notebooks = report["notebooks"]
    lines = ["# Mutation check of the book", "",
             f"Started {report['started']}, {len(report['mutants'])} mutants x "
             f"{len(notebooks)} notebooks, {report['jobs']} at a time, timeout "
             f"{report['timeout']:.0f} s per notebook; run time "
             f"{report.get('elapsed_s', 0) // 60} min {report.get('elapsed_s', 0) % 60} s.", ""]
    base = report["baseline"]
    bad = {nb: r for nb, r in base.items() if r["status"] != "passed"}
    total = sum(r["seconds"] for r in base.values())
    lines.append(f"**Unmutated package**: {len(base) - len(bad)} of {len(notebooks)} notebooks pass "
                 f"({total:.0f} s of notebook time).")
    for nb, r in bad.items():
        lines.append(f"- {nb}: {r['status']} at cell {r['cell']}: {r['error']}")
    lines.append("")
    if report["notes"]:
        lines += ["Notebooks left out:", ""] + [f"- {n}" for n in report["notes"]] + [""]
    if bad or not report["results"]:
        return "\n".join(lines) + "\n"
    summary = summarise(report)
    results = report["results"]
    cols = [f"{i + 1}" for i in range(len(notebooks))]
    lines += ["## Matrix", "",
              "`X` caught (a cell raised), `T` caught by timeout, `.` ran and passed, blank: "
              "the notebook never executes the mutated line (not run), `E` the runner failed. "
              "Columns are numbered as in the list below the table.", "",
              "| mutant | " + " | ".join(cols) + " | caught by |",
              "|---|" + "---|" * len(cols) + "---:|"]
    for m in report["mutants"]:
        row = results[m["name"]]
        cells = [SYMBOL[row[nb]["status"]] for nb in notebooks]
        lines.append(f"| `{m['name']}` | " + " | ".join(cells) + f" | {len(summary['caught_by'][m['name']])} |")
    lines.append("| **mutants caught** | " + " | ".join(str(len(summary["catches"][nb])) for nb in notebooks)
                 + " | |")
    lines += ["", "Notebooks: " + "; ".join(f"{i + 1} `{short(nb)}`" for i, nb in enumerate(notebooks)), ""]
    lines += ["## Mutants", "", "| mutant | fault | breaks | caught by (first failing cell) |",
              "|---|---|---|---|"]
    for m in report["mutants"]:
        row = results[m["name"]]
        hits = []
        for nb in notebooks:
            r = row[nb]
            if r["status"] in ("caught", "timeout"):
                err = r["error"].replace("|", "\\|")
                if len(err) > 140:
                    err = err[:137] + "..."
                hits.append(f"`{short(nb)}` cell {r['cell']}: {err}" if r["status"] == "caught"
                            else f"`{short(nb)}`: timeout ({err})")
        lines.append(f"| `{m['name']}` | {m['description']} | {m['target']} | "
                     + ("<br>".join(hits) if hits else "**none**") + " |")
    lines += ["", "## Done when", ""]
    lines.append(f"- every mutant is caught by at least one notebook: "
                 + ("yes" if not summary["uncaught"] else
                    "**no**: " + ", ".join(f"`{m}`" for m in summary["uncaught"])))
    lines.append(f"- every notebook catches at least one mutant: "
                 + ("yes" if not summary["notebooks_catching_none"] else
                    "**no**: " + ", ".join(f"`{short(nb)}`" for nb in summary["notebooks_catching_none"])))
    if summary["errors"]:
        lines.append("- runner errors: " + ", ".join(f"{m} x {short(nb)}" for m, nb in summary["errors"]))
    timeouts = [(m, nb) for m, row in results.items() for nb, r in row.items() if r["status"] == "timeout"]
    lines.append("- pairs caught by timeout (not by a failing cell): "
                 + (", ".join(f"`{m}` x `{short(nb)}`" for m, nb in timeouts) if timeouts else "none"))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutants", help="comma-separated mutant names (default: all)")
    parser.add_argument("--notebooks", help="comma-separated globs on the notebook paths, e.g. "
                        "'book/rkm/*,book/ppca/*'; a glob starting with ! excludes ('!book/smm/*')")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    parser.add_argument("--out", help="markdown report (the JSON goes beside it, .json)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds per notebook before it counts as caught by timeout (default 300)")
    parser.add_argument("--no-skip", action="store_true",
                        help="run every pair, also where the notebook never executes the mutated line")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--_run", help=argparse.SUPPRESS)
    parser.add_argument("--_package", help=argparse.SUPPRESS)
    parser.add_argument("--_coverage", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._run:
        print(json.dumps(_run_one(args._run, args.timeout, args._coverage, args._package)))
        return 0
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:32s} mvkm/{m.file:14s} {m.description}")
        return 0
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    return run_matrix(args)


if __name__ == "__main__":
    sys.exit(main())
