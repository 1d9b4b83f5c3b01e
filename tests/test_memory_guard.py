"""The memory guard tells the truth (issue 35, item 9).

The dense dual's estimated peak (:func:`mvkm._gram.dense_dual_bytes`) is
compared with the peak that tracemalloc measures (numpy reports its
allocations to it) on every dense route, at a size where the n x n matrices
dominate; the available memory respects ``ulimit -v`` and the cgroup."""

import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import mvkm
from mvkm._gram import _cgroup_room, available_memory, dense_dual_bytes

N = 2500
rng = np.random.default_rng(0)
A, B = rng.standard_normal((N, 5)), rng.standard_normal((N, 5))
RBFS = [mvkm.RBF(2.0), mvkm.RBF(2.0)]

ROUTES = {
    "KernelPPCA, dense": (
        lambda: mvkm.KernelPPCA(3, kernel=RBFS[0], kernel_storage="dense").fit(A),
        lambda: dense_dual_bytes(N, RBFS[:1])),
    "MultiViewRKM, one kernel view": (
        lambda: mvkm.MultiViewRKM(3, kernels=RBFS[:1],
                                  kernel_storage="dense").fit([A]),
        lambda: dense_dual_bytes(N, RBFS[:1], sum_in_place=True)),
    "MultiViewRKM, two kernel views": (
        lambda: mvkm.MultiViewRKM(3, kernels=RBFS,
                                  kernel_storage="dense").fit([A, B]),
        lambda: dense_dual_bytes(N, RBFS, sum_in_place=True)),
    "MultiViewRKM, Stiefel": (
        lambda: mvkm.MultiViewRKM(3, kernels=RBFS, solver="stiefel",
                                  max_iter=2).fit([A, B]),
        lambda: dense_dual_bytes(N, RBFS, dense_copy=True)),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_the_estimate_is_within_20_percent_of_the_measured_peak(route):
    # before: half the measured peak on every route (a triangle counted as
    # half a matrix; the whole array is allocated)
    if "Stiefel" in route:
        pytest.importorskip("torch")
    fit, estimate = ROUTES[route]
    import warnings

    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # the Stiefel solver's max_iter
            fit()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0.8 <= peak / estimate() <= 1.2, (peak, estimate())


def test_available_memory_respects_an_address_space_limit():
    # before: MemAvailable only; a container's or ulimit's limit was ignored
    code = textwrap.dedent("""
        import resource
        from mvkm._gram import available_memory
        with open("/proc/self/statm") as fh:
            size = int(fh.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, resource.RLIM_INFINITY))
        print(available_memory())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert 0 < int(out) <= 2**30


def test_the_cgroup_limit_is_read(monkeypatch, tmp_path):
    files = {"/sys/fs/cgroup/memory.max": "3221225472\n",
             "/sys/fs/cgroup/memory.current": "1073741824\n"}
    real_open = open

    def fake_open(path, *args, **kwargs):
        if str(path) in files:
            target = tmp_path / str(path).replace("/", "_")
            target.write_text(files[str(path)])
            return real_open(target, *args, **kwargs)
        if str(path).startswith("/sys/fs/cgroup"):
            raise OSError(path)
        return real_open(path, *args, **kwargs)

    import builtins

    monkeypatch.setattr(builtins, "open", fake_open)
    assert _cgroup_room() == 2 * 2**30
    assert available_memory() <= 2 * 2**30
    files["/sys/fs/cgroup/memory.max"] = "max\n"
    assert _cgroup_room() is None


def test_auto_keeps_several_views_dense_while_they_fit(monkeypatch):
    # issue 35, item 11: two RBF views at n = 30,000 took the matrix-free
    # route (over 600 s) where the dense one took 219 s
    import mvkm.rkm as rkm

    monkeypatch.setattr(rkm, "_DENSE_KERNEL_BYTES", 1.0)    # "above 4 GiB"
    monkeypatch.setattr(rkm, "memory_verdict", lambda need: (True, 10**12))
    X = rng.standard_normal((200, 3))
    two = mvkm.MultiViewRKM(2, kernels=RBFS).fit([X, X[::-1]])
    assert two._matrix_free(200, 2) is False
    one = mvkm.MultiViewRKM(2, kernels=RBFS[:1]).fit([X])
    assert one._matrix_free(200, 2) is True
    monkeypatch.setattr(rkm, "memory_verdict", lambda need: (False, 10))
    assert two._matrix_free(200, 2) is True                   # no room: matrix-free
