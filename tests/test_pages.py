"""The fit's copy mapped in one call (:mod:`cbdt._pages`)."""

from __future__ import annotations

import mmap
import platform
import sys

import numpy as np
import pytest

from cbdt._pages import populate


def _rss_kb() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")  # pragma: no cover


def _kernel_at_least(major: int, minor: int) -> bool:
    got = [int("".join(c for c in x if c.isdigit()) or 0)
           for x in (platform.release().split(".") + ["0"])[:2]]
    return tuple(got) >= (major, minor)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_POPULATE_WRITE is Linux")
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_populate_maps_every_page_of_a_fresh_mapping(threads: int) -> None:
    """A fresh anonymous mapping of 32 MB (an odd number of pages, not page-aligned at its
    start): on Linux 5.14+ one call per thread maps all its pages (the resident set grows
    by its size before anything is written) and they read as zeros; an older kernel
    refuses (False). Either way the array is then written and read as any other."""
    size = (32 << 20) + 3 * 4096
    buf = mmap.mmap(-1, size)
    try:
        a = np.frombuffer(buf, dtype=np.float64)[3:]  # starts 24 B into its first page
        before = _rss_kb()
        done = populate(a, threads)
        grown = _rss_kb() - before
        if _kernel_at_least(5, 14):
            assert done
            assert grown >= 0.9 * size / 1024, grown
            assert not a.any()  # fresh anonymous pages are zero
        a[:] = 2.5
        assert float(a.sum()) == 2.5 * a.size
        del a
    finally:
        buf.close()


def test_populate_declines_what_it_cannot_map() -> None:
    """An empty or non-contiguous array: nothing to map in one range, False."""
    assert populate(np.empty((0, 5))) is False
    assert populate(np.empty((10, 6))[:, ::2]) is False
