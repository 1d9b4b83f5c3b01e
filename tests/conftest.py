"""Test-session set-up shared by the unit tests and the notebooks (nbval).

The suite runs on two pytest-xdist workers. Each worker, and each notebook
kernel it starts, is held to one BLAS/OpenMP thread: two workers with
multi-threaded BLAS on two cores oversubscribe them, and small products
then become many times slower while threads wait on each other.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # inherited by notebook kernels
# no automatic progress bars of streamed fits in the tests (mvkm.covariance.progress_bar)
os.environ.setdefault("MVKM_PROGRESS", "0")

if os.environ.get("MVKM_TEST_INSTALLED"):  # `make test-wheel`: the installed wheel, not this tree
    import mvkm

    assert "site-packages" in mvkm.__file__, f"mvkm imported from {mvkm.__file__}, not the installed wheel"

try:  # this process may have loaded numpy before the variables were set
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
    pass


import pytest  # noqa: E402


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Without an optional extra (``pip install mvkm`` alone), a test that reaches a path needing
    torch (``mvkm[torch]``), reservoirpy or sktime (``mvkm[data]``) is skipped, with the package's own
    ImportError as the reason; where the extra is installed the test runs as always."""
    try:
        return (yield)
    except ImportError as exc:
        import importlib.util

        from mvkm._optional import DATA_HINT, TORCH_HINT

        for hint, modules in ((TORCH_HINT, ("torch",)), (DATA_HINT, ("reservoirpy", "sktime"))):
            if hint in str(exc):
                for module in modules:
                    if module in str(exc) and importlib.util.find_spec(module) is None:
                        pytest.skip(f"needs {module}, not installed here: {exc}")
        raise


# The longest test files first. pytest-xdist hands out whole files (--dist loadfile) and,
# by default, the files with the most tests first, which put the gradings (a few long
# tests each) at the end, where one worker ran them while the other had nothing left
# (--no-loadscope-reorder in pyproject.toml keeps the order below instead). Measured
# with --durations on the 2-core machine (seconds of one worker): the gradings of Parts
# IV, III and I about 125, 95 and 90; the notebooks kpls/experiments 75, smm/experiments
# 50, smm/images 45, smm/motion 30, rkm/explorer and rkm/santafe 20-30, scale/streaming 20.
# A stale order costs only time.
_LONGEST_FIRST = (
    "tests/test_assignments_smm.py", "tests/test_assignments_kpls.py", "tests/test_assignments_rkm.py",
    "book/kpls/experiments.ipynb", "book/smm/experiments.ipynb", "tests/test_assignments_ppca.py",
    "book/smm/images.ipynb", "book/smm/motion.ipynb",
    "tests/test_assignments_scale.py", "tests/test_assignments_foundations.py",
    "book/rkm/explorer.ipynb", "book/rkm/santafe.ipynb", "book/scale/streaming.ipynb",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: k for k, path in enumerate(_LONGEST_FIRST)}

    def key(item):
        path = item.nodeid.split("::", 1)[0]
        if path in rank:
            return (0, rank[path])
        return (1, 0) if path.endswith(".ipynb") else (2, 0)   # notebooks, then unit tests

    items.sort(key=key)   # stable: each file keeps its own order


# A notebook kernel can die before it answers (two kernels started at once by the two xdist
# workers can be handed the same free TCP port; seen once in CI: every cell of one notebook
# "Kernel died before replying to kernel_info"): nbval starts it again, with the policy of
# the gradings (tools/assignments.py: restarting_dead_kernels).
from pathlib import Path as _Path  # noqa: E402

_TOOLS = _Path(__file__).resolve().parents[1] / "tools"
try:
    import nbval.kernel as _nbval_kernel
except ImportError:  # pragma: no cover - the wheel's tests run without nbval
    _nbval_kernel = None
# the sdist's tests have no tools/ (and no notebooks): nothing to patch there
if _nbval_kernel is not None and (_TOOLS / "assignments.py").is_file():
    import sys as _sys

    _sys.path.insert(0, str(_TOOLS))
    from assignments import restarting_dead_kernels  # noqa: E402

    _nbval_kernel.start_new_kernel = restarting_dead_kernels(_nbval_kernel.start_new_kernel)

    from queue import Empty as _Empty

    from kernels import slices as _slices  # noqa: E402

    _get_message = _nbval_kernel.RunningKernel.get_message

    def _get_message_while_alive(self, stream, timeout=None):
        """nbval's wait for a kernel message, in slices of 5 s that check the kernel is alive.

        nbval waits a whole cell timeout (2000 s) for the reply of a kernel that has died
        during the cell; this fails the cell at once instead, and the next cells fail at
        their start (\"Kernel dead on test start\").
        """
        for step in _slices(timeout, 5.0):
            try:
                return _get_message(self, stream, timeout=step)
            except _Empty:
                if not self.is_alive():
                    raise RuntimeError("the notebook's kernel died while it ran this cell") from None
        raise _Empty

    _nbval_kernel.RunningKernel.get_message = _get_message_while_alive


# Notebook kernels' ports (nbval's and the gradings' through otter, both jupyter_client's
# LocalPortCache). jupyter_client picks each of a kernel's five ports by binding port 0 and
# closing the socket; the kernel binds them again about a second later. Meanwhile the other
# xdist worker, starting a kernel of its own, can be handed the same port, and so can any
# outgoing connection (connect() takes its local port from the same ephemeral range, a
# client's retries to a kernel still starting included): the kernel then dies at start-up
# or a client talks to a socket that is not its kernel's. Each worker takes its kernels'
# ports from a range of its own below the ephemeral range, which nothing else draws from.
def _kernel_port_range() -> range | None:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux: jupyter's own choice
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    start = 20000 + 1000 * (int(worker) % 8 if worker.isdigit() else 0)
    return range(start, start + 1000) if start + 1000 <= ephemeral_low else None


def _own_ports(ports: range) -> None:
    import itertools
    import socket

    from jupyter_client.connect import LocalPortCache

    cycle = itertools.cycle(ports)

    def find_available_port(self, ip: str) -> int:
        for _ in range(len(ports)):
            port = next(cycle)
            if port in self.currently_used_ports:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind((ip, port))
                except OSError:
                    continue
            self.currently_used_ports.add(port)
            return port
        raise RuntimeError(f"no free port for a notebook kernel in {ports.start}..{ports.stop - 1}")

    LocalPortCache.find_available_port = find_available_port


_PORTS = _kernel_port_range()
if _PORTS is not None:
    try:
        _own_ports(_PORTS)
    except ImportError:  # pragma: no cover - the wheel's tests start no kernel
        pass
