"""The code the chapters of Part I share.

A helper that a second chapter of Part I needs is written here once; the
chapter that teaches it shows its source (``mvkm.plotting.show_source``) and
every later chapter imports it. It is not part of the package: anything a user
of ``mvkm`` would call belongs in ``mvkm``.
"""

import numpy as np

__all__: list[str] = []

# --- The objective and the primal model (rkm/objective, rkm/primal) -------------------

# --- The dual model and inference (rkm/dual, rkm/inference) ---------------------------

# --- Forecasting experiments (rkm/sines, rkm/santafe) ---------------------------------

# --- Parametric maps and the explorer (rkm/parametric, rkm/explorer) ------------------
