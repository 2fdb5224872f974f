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

The pin is process-wide (one setting per BLAS library): :func:`single_threaded_blas` sections
that overlap, nested or in several Python threads, share one pin, and the limits in force
before the first are restored when the last exits.
"""

from __future__ import annotations

import os
import threading
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


# The pinning is process-wide (BLAS has one thread setting per library), so sections that
# overlap in different Python threads share one pin: the first to enter saves the limits and
# sets them to 1, the last to leave restores what the first saved. Saving and restoring per
# section would interleave (A saves N, B saves A's 1, A restores N, B restores 1) and leave
# BLAS at one thread for the rest of the process.
_PIN_LOCK = threading.Lock()
_PIN_DEPTH = 0
_PIN_LIMITER: Any = None


@contextmanager
def _blas_control() -> Iterator[None]:
    """Make the calling thread the one whose limits OpenBLAS obeys, for the duration.

    threadpoolctl >= 3.6 lets only one "controlling" Python thread change a pthreads
    OpenBLAS (the first to set a limit; the others are silently ignored until it exits). The
    pin is set and restored under :data:`_PIN_LOCK` from whichever thread enters first or
    leaves last, so it takes control for that moment and hands it back (a later
    ``threadpool_limits`` in any thread then takes it again).
    """
    try:
        from threadpoolctl import OpenBLASController

        clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    except ImportError:  # pragma: no cover - threadpoolctl without the class
        clear = None
    if clear is not None:
        clear(force=True)
    try:
        yield
    finally:
        if clear is not None:
            clear()  # this thread holds it now (if it set anything): release it


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Every loaded BLAS at one thread for the duration (restored afterwards).

    Reentrant and thread-safe: overlapping sections (nested, or in several Python threads)
    share one pin, and the limits in force before the first of them are restored when the
    last one exits, whatever the order of exits.
    """
    global _PIN_DEPTH, _PIN_LIMITER
    with _PIN_LOCK:
        if _PIN_DEPTH == 0:
            with _blas_control():  # saves the current limits, then sets 1
                _PIN_LIMITER = _controller().limit(limits=1, user_api="blas")
        _PIN_DEPTH += 1
    try:
        yield
    finally:
        with _PIN_LOCK:
            _PIN_DEPTH -= 1
            if _PIN_DEPTH == 0:
                limiter, _PIN_LIMITER = _PIN_LIMITER, None
                with _blas_control():
                    limiter.restore_original_limits()  # those saved by the first section
