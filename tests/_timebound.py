"""A time bound for tests: a solver that hangs fails its test instead of the suite."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


@contextmanager
def time_bound(seconds: float):
    """Fail with ``TimeoutError`` after ``seconds`` (a hang is a failure).

    A ``SIGALRM`` timer interrupts the Python loops of the iterative solvers
    between BLAS calls; where signals are not available (another thread, Windows)
    the bound is checked after the call instead.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        import time
        t0 = time.monotonic()
        yield
        assert time.monotonic() - t0 <= seconds, f"took over {seconds} s"
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s: the solver hangs")

    import time

    previous = signal.signal(signal.SIGALRM, on_alarm)
    t0 = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)   # an enclosing alarm (pytest-timeout's)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:   # the enclosing alarm again, for what was left of it (at least 1 ms)
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - t0), 1e-3))
