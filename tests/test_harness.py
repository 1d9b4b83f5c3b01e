"""The test harness's own guards (tests/conftest.py, tests/_timebound.py, tools/kernels.py): a hang or a
dead notebook kernel fails its test in bounded time instead of stalling the suite."""

from __future__ import annotations

import signal
import time

import pytest

import conftest
from _timebound import time_bound


def test_kernel_ports_come_from_this_workers_range_below_the_ephemeral_ports():
    from jupyter_client.connect import LocalPortCache

    ports = conftest._kernel_port_range()
    assert ports is not None, "expected a Linux port range"
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        assert ports.stop <= int(f.read().split()[0])
    cache = LocalPortCache.instance()
    taken = [cache.find_available_port("127.0.0.1") for _ in range(5)]
    try:
        assert len(set(taken)) == 5 and all(p in ports for p in taken), taken
    finally:
        for port in taken:
            cache.return_port(port)
    # the two workers draw from ranges that do not meet
    other = "gw1" if conftest.os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0" else "gw0"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_XDIST_WORKER", other)
        assert not set(conftest._kernel_port_range()) & set(ports)


def test_nbval_fails_a_cell_at_once_when_its_kernel_dies():
    from nbval.kernel import RunningKernel

    kernel = RunningKernel("python3", startup_timeout=120)
    try:
        kernel.execute_cell_input("import os; os._exit(3)", allow_stdin=False)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="kernel died"):
            while True:   # the reply never comes: nbval alone would wait the whole timeout
                kernel.get_message(stream="shell", timeout=300)
        assert time.monotonic() - t0 < 30
    finally:
        kernel.stop()


def test_time_bound_gives_back_an_enclosing_alarm():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 50.0)
        with time_bound(5):
            time.sleep(0.01)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 45 < left < 50, left
        with pytest.raises(TimeoutError):
            with time_bound(0.05):
                time.sleep(1)
        assert 40 < signal.getitimer(signal.ITIMER_REAL)[0] < 50
        assert not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_kernel_channel_waits_poll_in_slices():
    """tools/kernels.py: a message that a first poll missed (a lost wake-up) is read by the
    next slice, and a timeout still ends the wait with queue.Empty."""
    import asyncio
    from queue import Empty

    import kernels

    polls = []

    async def whole(self, timeout=None):     # the message is there, but the first 3 polls miss it
        polls.append(timeout)
        if len(polls) <= 3:
            await asyncio.sleep(min(timeout, 0.01))
            raise Empty
        return {"msg_type": "execute_reply"}

    sliced = kernels.in_slices(whole, slice_s=0.01)
    assert asyncio.run(sliced(None, timeout=None)) == {"msg_type": "execute_reply"}
    assert len(polls) == 4 and all(p == 0.01 for p in polls)
    polls.clear()
    t0 = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(sliced(None, timeout=0.025))
    assert 0.02 <= time.monotonic() - t0 < 1 and len(polls) == 3
    # applied once, to jupyter_client's asyncio channel (the gradings import it through assignments)
    from jupyter_client.channels import AsyncZMQSocketChannel

    kernels.poll_in_slices()
    kernels.poll_in_slices()
    assert AsyncZMQSocketChannel.get_msg._in_slices
