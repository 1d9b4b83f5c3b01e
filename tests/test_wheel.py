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
import tarfile
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


def _venv_with(wheel: Path, tmp_path: Path) -> Path:
    """A fresh venv with ``wheel`` installed (no dependencies, no index) and this interpreter's
    site-packages after its own, for the dependencies; returns its python."""
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "--quiet", str(wheel)], capture_output=True, text=True, timeout=300,
                             env=_clean_env())
    assert install.returncode == 0, install.stderr
    deps = [p for p in site.getsitepackages() + [sysconfig.get_path("purelib")] if Path(p).is_dir()]
    (Path(purelib) / "zz_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    return python


def test_installed_wheel_loads_every_data_set(wheel, tmp_path):
    python = _venv_with(wheel, tmp_path)
    done = subprocess.run([str(python), "-c", _LOAD], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=_clean_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert str((tmp_path / "venv").resolve()) in done.stdout


# ---------------------------------------------------------------------------
# The source distribution (issue 33, item 8): what `make dist` publishes beside the wheel.

_HOOK = ("import sys\nfrom setuptools import build_meta\n"
         "print('BUILT', getattr(build_meta, sys.argv[1])(sys.argv[2]))")
# the environment's own setting (PYTHONDONTWRITEBYTECODE), not the project's
_HARMLESS = ("byte-compiling is disabled",)
_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "_build", "build", "dist", "*.egg-info", "__pycache__",
                                      ".hypothesis", ".pytest_cache", ".ipynb_checkpoints")


def _build(hook: str, src: Path, out: Path) -> Path:
    """The PEP 517 hook ``hook`` of setuptools in ``src``, in this environment (no isolation, no
    network), as ``python -m build`` calls it; fails on any warning of the build."""
    done = subprocess.run([sys.executable, "-c", _HOOK, hook, str(out)], cwd=src, capture_output=True,
                          text=True, timeout=600, env=_clean_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    warnings = [line.strip() for line in (done.stdout + done.stderr).splitlines()
                if re.search(r"warn|deprecat|is absent from", line, re.I)
                and not any(h in line for h in _HARMLESS)]
    assert not warnings, f"{hook} warns:\n" + "\n".join(warnings)
    return out / done.stdout.split("BUILT ")[-1].strip()


def _package_tests() -> set[str]:
    make = (ROOT / "Makefile").read_text()
    block = re.search(r"PACKAGE_TESTS := \$\(addsuffix \.py,\$\(addprefix tests/test_,(.*?)\)\)", make, re.S)
    assert block, "Makefile: PACKAGE_TESTS not found"
    return {f"tests/test_{name}.py" for name in block.group(1).replace("\\", " ").split()}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("repo") / "mvkm-src"     # a copy: the build leaves *.egg-info behind
    shutil.copytree(ROOT, src, ignore=_COPY_IGNORE)
    return _build("build_sdist", src, tmp_path_factory.mktemp("sdist"))


def test_the_sdist_holds_the_package_and_its_unit_tests(sdist):
    with tarfile.open(sdist) as tar:
        top = f"{sdist.name.removesuffix('.tar.gz')}/"
        names = {m.name.removeprefix(top) for m in tar.getmembers() if m.isfile()}
        pkg_info = tar.extractfile(top + "PKG-INFO").read().decode()
    # every file of the package, its data and their scripts included
    package = {str(p.relative_to(ROOT)) for p in (ROOT / "mvkm").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert package <= names, f"missing from the sdist: {sorted(package - names)}"
    assert {"pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "PKG-INFO"} <= names
    # the package's unit tests (the Makefile's PACKAGE_TESTS) and what they import, nothing else
    tests = {n for n in names if n.startswith("tests/")}
    assert tests == _package_tests() | {"tests/conftest.py", "tests/_timebound.py"}, (
        f"MANIFEST.in: add {sorted(_package_tests() - tests)}; leave out "
        f"{sorted(tests - _package_tests() - {'tests/conftest.py', 'tests/_timebound.py'})}")
    tops = {n.split("/", 1)[0] for n in names}
    assert not tops & {"book", "benchmarks", "tools", "docs", "_static", ".ci"}, tops
    # the metadata: the one version, the one repository URL
    init = (ROOT / "mvkm" / "__init__.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"$', init, re.M).group(1)
    assert sdist.name == f"mvkm-{version}.tar.gz"
    assert f"\nVersion: {version}\n" in pkg_info
    url = re.search(r"^repository:\n  url: (\S+)$", (ROOT / "_config.yml").read_text(), re.M).group(1)
    assert f"\nProject-URL: Repository, {url}\n" in pkg_info
    assert "\nDescription-Content-Type: text/markdown\n" in pkg_info


def test_a_wheel_built_from_the_sdist_passes_the_sdists_tests(sdist, tmp_path):
    """What `python -m build` does (the wheel from the unpacked sdist, without a warning), then
    the sdist's tests run against that wheel installed: one file, test_validation.py."""
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    (unpacked,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    whl = _build("build_wheel", unpacked, tmp_path)
    python = _venv_with(whl, tmp_path)
    done = subprocess.run([str(python), "-P", "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-q",
                           "tests/test_validation.py"], capture_output=True, text=True, timeout=600,
                          cwd=unpacked, env=_clean_env() | {"MVKM_TEST_INSTALLED": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-500:]


def test_twine_accepts_the_sdist_and_the_wheel(sdist, wheel):
    """`make dist` runs `twine check --strict` (twine is installed there on first use)."""
    pytest.importorskip("twine")
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
                          capture_output=True, text=True, timeout=300, env=_clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
