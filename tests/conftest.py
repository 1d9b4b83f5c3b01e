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

try:  # this process may have loaded numpy before the variables were set
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
    pass
