"""What a user gets from ``pip install`` (issue 26, item 2).

The wheel is built from this tree (without a warning from the build backend),
installed into a fresh virtual environment, and every shipped data set is
loaded from the installed copy, in a process that cannot see the source tree.
The environment reuses this interpreter's dependencies through a ``.pth``
file (appended after its own site-packages, so the installed mvkm wins); the
CI (``.ci/run``) also installs the wheel with its dependencies on Python 3.12
and 3.13 and runs the unit tests there.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = sorted(p.name for p in (ROOT / "mvkm" / "data").iterdir() if p.suffix in (".npz", ".md"))

_LOAD = """
import sys
from pathlib import Path
import numpy as np
import mvkm
from mvkm import datasets
where = Path(mvkm.__file__).resolve()
assert Path(sys.prefix).resolve() in where.parents, f"mvkm imported from {where}, not the venv"
X, y = datasets.load_mnist01()
assert X.shape[0] == y.shape[0] == 500, X.shape
X, y = datasets.load_mnist01(pool=True)
assert X.shape[0] == y.shape[0] == 2128, X.shape
views, y = datasets.load_mfeat()
assert len(views) >= 2 and all(v.shape[0] == y.shape[0] == 2000 for v in views)
try:
    import reservoirpy  # noqa: F401  (the data extra)
except ImportError:
    pass
else:
    assert datasets.load_santafe().shape == (10093,)
import importlib.util
if importlib.util.find_spec("sktime") is not None:   # the data extra's other wheel
    X, labels = datasets.load_basicmotions()
    assert X.shape == (80, 6, 100) and labels.shape == (80,), X.shape
readme = Path(mvkm.__file__).parent / "data" / "README.md"
assert "MNIST" in readme.read_text()
print("loaded from", where.parent)
"""


def _clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH: nothing of the source tree on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src")          # a copy: the build leaves build/ and *.egg-info behind
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "mvkm", src / "mvkm", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-v", "-w", str(out)],
                          capture_output=True, text=True, timeout=600, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout + done.stderr
    warnings = [line.strip() for line in log.splitlines()
                if re.search(r"Warning|deprecated|is absent from", line)]
    assert not warnings, "the wheel's build warns:\n" + "\n".join(warnings)
    (path,) = out.glob("mvkm-*.whl")
    return path


def test_the_wheel_ships_the_data_and_the_licence(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for name in DATA:
        assert f"mvkm/data/{name}" in names, name
    assert "mvkm/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: BSD-3-Clause" in meta
    assert "Requires-Python: >=3.11\n" in meta
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not [r for r in requires if "torch" in r or "reservoirpy" in r], requires


def test_installed_wheel_loads_every_data_set(wheel, tmp_path):
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "--quiet", str(wheel)], capture_output=True, text=True, timeout=300,
                             env=_clean_env())
    assert install.returncode == 0, install.stderr
    # then this interpreter's dependencies, after the venv's own site-packages
    deps = [p for p in site.getsitepackages() + [sysconfig.get_path("purelib")] if Path(p).is_dir()]
    (Path(purelib) / "zz_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    done = subprocess.run([str(python), "-c", _LOAD], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=_clean_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(env.resolve()) in done.stdout
