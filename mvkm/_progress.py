"""Progress bars of long loops (streamed passes, Krylov solvers): one policy for the package.

A bar appears at once with ``progress=True``, never with ``False``, and with
``None`` (the default of every long routine) only once the loop has run for
5 seconds after its first step. ``MVKM_PROGRESS=0`` in the environment turns
the automatic bar off (the test suite sets it).
"""

from __future__ import annotations

import os
from typing import Any


def progress_bar(total: int, desc: str, progress: bool | None, unit: str = "rows") -> Any:
    """A tqdm bar over ``total`` units, or ``None``.

    ``progress=True`` shows it at once; ``None`` (auto) shows it only once the
    loop has run for 5 seconds (tqdm's ``delay``) after its first chunk, so
    short fits print nothing even when the first chunk pays a one-time cost
    (importing torch took 9 s of a 50-row fit); ``False`` never. The
    environment variable ``MVKM_PROGRESS=0`` turns the automatic bar off (the
    test suite sets it).
    """
    if progress is False or (progress is None and os.environ.get("MVKM_PROGRESS", "1") == "0"):
        return None
    kw = dict(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)
    if progress is None:
        return _BarAfterFirstChunk(kw)
    from tqdm.auto import tqdm

    return tqdm(delay=0.0, **kw)


class _BarAfterFirstChunk:
    """The automatic bar: created at the first ``update`` with a 5-second delay from then."""

    delay = 5.0

    def __init__(self, kw: dict[str, Any]) -> None:
        self.kw, self.bar, self.postfix = kw, None, {}

    def update(self, n: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(initial=n, delay=self.delay, **self.kw)
            if self.postfix:
                self.bar.set_postfix(refresh=False, **self.postfix)
        else:
            self.bar.update(n)

    def set_postfix(self, refresh: bool = False, **kw: Any) -> None:
        # ``refresh`` is ignored: the automatic bar never refreshes. tqdm's refresh draws
        # the bar at once, whatever its delay, and close() then leaves that line on the
        # screen (it clears only a bar drawn after its delay): matfree_top_eigh's
        # residuals left a bar after a 0.06 s solve. The postfix shows with the first
        # update that the delay lets through.
        self.postfix = kw
        if self.bar is not None:
            self.bar.set_postfix(refresh=False, **kw)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
