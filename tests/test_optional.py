"""Without its optional dependencies (issue 26, item 1): torch (``mvkm[torch]``), reservoirpy (``mvkm[data]``).

``import mvkm`` and every CPU path work without torch; where torch only
speeds up a CPU pass, numpy gives the same numbers; a path that needs torch,
and ``load_santafe`` without reservoirpy, raise an ImportError naming the
extra to install. The subprocess tests hide the modules with an import hook
(a fresh interpreter in which ``import torch`` fails as if it were absent).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import numpy as np
import pytest

import mvkm
from mvkm import covariance
from mvkm._optional import DATA_HINT, TORCH_HINT


_HIDE = """
import sys
class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {hidden!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Hide())
"""


def _run_without(modules: set[str], code: str) -> subprocess.CompletedProcess:
    src = _HIDE.format(hidden=sorted(modules)) + textwrap.dedent(code)
    # run outside the source tree: the mvkm on the path (installed, or PYTHONPATH's) is imported
    return subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120,
                          cwd=tempfile.gettempdir())


def test_import_and_cpu_models_without_torch():
    code = """
    import numpy as np, sys
    import mvkm
    from mvkm import KernelPPCA, MultiViewKPLS, MultiViewRKM, RBF, RandomFourierFeatures
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((60, 3)), rng.standard_normal((60, 2))
    KernelPPCA(2, kernel=RBF(1.0)).fit(X)
    KernelPPCA(2, kernel=RBF(1.0)).fit(rng.standard_normal((2500, 2)))   # dense dual above DENSE_MAX_N
    MultiViewRKM(2).fit([X, Y])
    MultiViewKPLS(2).fit([X, Y])
    rff = RandomFourierFeatures(1.5, n_features=40, random_state=0)
    MultiViewRKM(2, feature_maps=[rff, mvkm.Identity()], formulation="primal", batch_size=16).fit([X, Y])
    # the matrix-free dual on numpy's tiles: the same eigenvalues as the stored matrix
    Z = rng.standard_normal((400, 3))
    stored = KernelPPCA(3, kernel=RBF(1.5), kernel_storage="dense").fit(Z)
    tiles = KernelPPCA(3, kernel=RBF(1.5), kernel_storage="none").fit(Z)
    assert np.allclose(tiles.eigenvalues_, stored.eigenvalues_, rtol=1e-9)
    rkm = MultiViewRKM(2, kernels=[RBF(1.5)], kernel_storage="none").fit([Z])
    assert np.allclose(rkm.eigenvalues_, MultiViewRKM(2, kernels=[RBF(1.5)]).fit([Z]).eigenvalues_, rtol=1e-9)
    from mvkm.matfree import matfree_top_eigh
    lam = matfree_top_eigh(Z, RBF(1.5), 3, tile_size=128)[0]
    assert np.allclose(lam, np.linalg.eigvalsh(mvkm.center_gram(RBF(1.5)(Z)))[::-1][:3], rtol=1e-9)
    assert "torch" not in sys.modules
    print("ok")
    """
    done = _run_without({"torch"}, code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("code, what", [
    ("import mvkm.stiefel", "Stiefel"),
    ("from mvkm import maximize_trace", "Stiefel"),
    ("from mvkm.matfree import KernelOperator; KernelOperator([[0.0], [1.0]], mvkm.RBF(1.0), device='cuda')",
     "device='cuda'"),
    ("from mvkm.covariance import check_device; check_device('cpu')", "device='cpu'"),
])
def test_paths_that_need_torch_say_how_to_install_it(code, what):
    done = _run_without({"torch"}, "import mvkm\n" + code)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and TORCH_HINT in last and what in last, done.stderr


def test_load_santafe_without_reservoirpy_says_how_to_install_it():
    done = _run_without({"reservoirpy"}, "import mvkm; mvkm.datasets.load_santafe()")
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and DATA_HINT in last, done.stderr


def test_cpu_fallbacks_give_torchs_numbers(monkeypatch):
    """The numpy fallbacks of the streamed primal (RFF cosine, column sums, features_times) agree with torch."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((300, 4)), rng.standard_normal((300, 3))
    maps = [mvkm.RandomFourierFeatures(2.0, n_features=64, random_state=0).fit(X), mvkm.Identity().fit(Y)]
    A = rng.standard_normal((67, 5))

    def run():
        mom = covariance.feature_moments([X, Y], maps, batch_size=70)
        prod = covariance.features_times(maps, [X[:50], Y[:50]], A)
        return mom.mean, mom.scatter, prod

    with_torch = run()
    monkeypatch.setattr(covariance, "optional_torch", lambda: None)
    without = run()
    for a, b in zip(with_torch, without):
        # the same sums in another order: a few ulps of the entries' size
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * np.abs(a).max())


def test_load_basicmotions_without_sktime_says_how_to_install_it():
    done = _run_without({"sktime"}, "import mvkm; mvkm.datasets.load_basicmotions()")
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and DATA_HINT in last and "sktime" in last, done.stderr
