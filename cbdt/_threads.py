"""Deliberate BLAS thread settings (``threadpoolctl``).

numpy and scipy each load their own OpenBLAS, each with a pool of one thread per core. The
fused top-k scan of :class:`cbdt.CaseInfluence` runs many small, cache-sized GEMMs: a BLAS
pool would spin up its threads for each of them and, with scipy's pool also awake, the two
fight for the cores. The scan therefore pins BLAS to one thread and runs its query groups on
as many Python threads as numpy's BLAS would have used (numpy releases the GIL in GEMM).

After a multi-threaded call, OpenBLAS's worker threads busy-wait for more work before they
sleep (``THREAD_TIMEOUT``, about 0.1 s of CPU each on the benchmark machine; the environment
variable ``OPENBLAS_THREAD_TIMEOUT`` shortens it). Code that runs its own threads in that
window, such as the batched scan right after a large numpy GEMM, shares the cores with them;
``benchmarks/bench_influence.py`` measures the spin and pauses longer than it between calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["blas_threads", "single_threaded_blas"]

_CONTROLLER: Any = None


def _controller() -> Any:
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()  # inspects the loaded libraries once (~ms)
    return _CONTROLLER


def blas_threads() -> int:
    """Threads numpy's BLAS uses now (the cores, unless the user limited it)."""
    for lib in _controller().lib_controllers:
        if lib.user_api == "blas" and "numpy" in os.path.basename(os.path.dirname(lib.filepath)):
            return max(1, int(lib.num_threads))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Every loaded BLAS at one thread for the duration (restored afterwards)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield
