"""Pages of the fit's own copy of ``Phi``, mapped in one call before the passes write them.

An in-memory fit writes its read-only copy ``[s Phi, 1]`` (:mod:`cbdt._tsqr`) block by block
between the BLAS calls of its passes. Left to the page-fault handler, every first write of a
page traps into the kernel in the middle of that work, on every Python thread at once.
Measured on the benchmark machine (2-core Xeon VM, Linux 6.18, numpy's huge-page request
on), whole fits at n = 1e6 on two threads, three interleaved pairs: 4.7-6.2 s without and
3.7-3.8 s with the pages mapped first at H = 256; 9.3-9.9 s against 7.9-8.1 s at H = 1024
(n = 2.5e5); no difference at H = 64 (0.54-0.66 s either way).

:func:`populate` asks Linux (5.14 or later) to map and zero every page of a fresh array in
one ``madvise(MADV_POPULATE_WRITE)`` call (one per thread: the fit cuts it between its
threads). Elsewhere, or where the kernel refuses, it does
nothing and the pages are mapped on first write as before: the values are the same either
way (only the time differs).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from functools import cache
from typing import Any

import numpy as np

MADV_POPULATE_WRITE = 23  # <linux/mman.h>, Linux 5.14
_PAGE = 4096


@cache
def _madvise() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):  # pragma: no cover - a libc without madvise
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def populate(a: np.ndarray, threads: int = 1) -> bool:
    """Map (and zero) every page of the fresh, C-contiguous array ``a`` now, in one call
    per thread.

    Returns True when the kernel did so, False where it is not available (not Linux, a
    kernel before 5.14) or refused (some pages may then be mapped already); the array is
    usable either way. Only for an array whose contents do not matter yet (just
    allocated): pages already mapped keep their contents, but no guarantee is made for
    them.

    ``threads > 1`` cuts the range into as many page-aligned parts, each mapped by its own
    call on its own thread (ctypes releases the GIL): the kernel zeroes the pages on the
    core that asks, so one call zeroes on one core. Measured on the benchmark machine
    (2 cores), medians of 3 fresh arrays: 512 MB in 0.064 s on one thread and 0.034 s on
    two, 2 GB in 0.245 s and 0.134 s.
    """
    fn = _madvise()
    if fn is None or a.nbytes == 0 or not a.flags.c_contiguous:
        return False
    addr = a.ctypes.data
    start = addr - addr % _PAGE  # madvise wants a page-aligned start
    end = addr + a.nbytes
    pages = -(-(end - start) // _PAGE)
    parts = max(1, min(int(threads), pages // 256))  # at least 1 MB a part
    if parts == 1:
        return fn(start, end - start, MADV_POPULATE_WRITE) == 0
    cuts = [start + (pages * j // parts) * _PAGE for j in range(parts)] + [end]
    done = [False] * parts

    def part(j: int) -> None:
        done[j] = fn(cuts[j], cuts[j + 1] - cuts[j], MADV_POPULATE_WRITE) == 0

    helpers = [threading.Thread(target=part, args=(j,), daemon=True) for j in range(1, parts)]
    for t in helpers:
        t.start()
    part(0)
    for t in helpers:
        t.join()
    return all(done)
