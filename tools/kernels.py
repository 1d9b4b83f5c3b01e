"""A lost wake-up in notebook execution, worked around: nbclient's waits on a kernel channel
poll in slices of one second.

nbclient (under otter's gradings, nbconvert's ``--execute``, jupyter-book and
``tests/mutants.py``) waits for a kernel's reply with ``await socket.poll(timeout)`` on an
asyncio ZMQ socket (jupyter_client's ``AsyncZMQSocketChannel.get_msg``). ZMQ signals
readiness on an edge-triggered file descriptor, and now and then the wake-up is lost while a
message sits in the socket: the wait then lasts its whole timeout (forever without one)
although the reply has arrived. Measured here on the first four cells of
``book/kpls/explorer.ipynb`` (its widget cell sends many messages at once): 2 runs of 8 hung
(jupyter_client 8.10, pyzmq 27.3, ipykernel 7.4 and 6.31 alike), as did 6 of 14 runs of
the whole chapter under ``jupyter nbconvert --execute``; with the slices, 0 of 24. The reported upstream issue is
jupyter/nbclient#312. A wait in slices asks the socket again every second, so a lost
wake-up costs at most one second. Usage: ``import kernels; kernels.poll_in_slices()``
(idempotent), or ``python tools/kernels.py NOTEBOOK...`` to execute notebooks in place
with it, as the tests do (one BLAS thread, no progress bars).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from queue import Empty
from typing import Any

#: Longest single poll of a kernel channel (seconds).
SLICE = 1.0


def slices(timeout: float | None, slice_s: float = SLICE) -> Iterator[float]:
    """The timeouts of successive polls that together wait ``timeout`` seconds (``None``: for
    ever): ``slice_s`` each, the last one what is left; ends once the deadline has passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        yield slice_s if deadline is None else min(slice_s, max(0.0, deadline - time.monotonic()))
        if deadline is not None and time.monotonic() >= deadline:
            return


def in_slices(whole: Any, slice_s: float = SLICE) -> Any:
    """``whole(self, timeout)`` (an async ``get_msg`` that raises ``queue.Empty`` when its
    poll times out) as a wait in polls of at most ``slice_s`` seconds (:func:`slices`), up to
    ``timeout`` (``None``: for ever)."""
    async def get_msg(self: Any, timeout: float | None = None) -> dict:
        for step in slices(timeout, slice_s):
            try:
                return await whole(self, timeout=step)
            except Empty:
                pass
        raise Empty

    get_msg._in_slices = True  # type: ignore[attr-defined]
    return get_msg


def poll_in_slices() -> None:
    """Make jupyter_client's ``AsyncZMQSocketChannel.get_msg`` poll in slices of
    :data:`SLICE` seconds (:func:`in_slices`), once per process."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    if not getattr(AsyncZMQSocketChannel.get_msg, "_in_slices", False):
        AsyncZMQSocketChannel.get_msg = in_slices(AsyncZMQSocketChannel.get_msg)  # type: ignore[method-assign]


def execute_in_place(path: str, timeout: int = 1200) -> None:
    """Execute the notebook at ``path`` top to bottom and write it back (nbconvert's
    ``--execute --inplace``), with :func:`poll_in_slices`."""
    import os

    import nbformat
    from nbclient import NotebookClient

    poll_in_slices()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("MVKM_PROGRESS", "0")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}}).execute()
    nbformat.write(nb, path)


if __name__ == "__main__":
    import sys

    for notebook in sys.argv[1:]:
        t0 = time.perf_counter()
        execute_in_place(notebook)
        print(f"{notebook}: executed in {time.perf_counter() - t0:.1f} s", flush=True)
