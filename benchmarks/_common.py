"""Shared helpers of the benchmarks: medians of repeats, machine description, floors.

Every benchmark reports medians over repeats (this machine is noisy) and a floor measured in
the same run: a bare GEMM of the same shape into a preallocated output, or a streaming read.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def median_time(fn: Callable[[], Any], repeats: int = 5, inner: int = 1, warm: bool = True) -> float:
    """Median wall time of ``fn`` in seconds over ``repeats`` runs of ``inner`` calls."""
    if warm:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def gemm_floor(m: int, h: int, n: int, repeats: int = 5, seed: int = 0) -> float:
    """Median time of ``(m, h) @ (h, n)`` into a preallocated (m, n) output (numpy's BLAS)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, h))
    B = rng.normal(size=(n, h))  # C order, used transposed like the case memory
    out = np.empty((m, n))
    return median_time(lambda: np.matmul(A, B.T, out=out), repeats)


def blas_description() -> str:
    """numpy's and scipy's BLAS libraries and their thread counts."""
    try:
        from threadpoolctl import threadpool_info

        return "; ".join(
            f"{os.path.basename(os.path.dirname(i['filepath']))}/{i['internal_api']} "
            f"{i['num_threads']} thr"
            for i in threadpool_info()
            if i["user_api"] == "blas"
        )
    except Exception:  # pragma: no cover - informational only
        return "unknown"


def machine() -> dict[str, str]:
    """Date, CPU, core count and BLAS of this run (stored beside every result table)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:  # pragma: no cover - not Linux
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cores = os.cpu_count() or 0
    return {
        "date": _dt.date.today().isoformat(),
        "cpu": cpu,
        "cores": str(cores),
        "blas": blas_description(),
        "blas_core": blas_core(),
        "numpy": np.__version__,
        "load_average": load_average(),
    }


def load_average() -> str:
    """``os.getloadavg()`` (1, 5, 15 minutes) now, as text: how busy the machine was."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not available
        return "unknown"


def page_cache_fraction(path: Any) -> float:
    """Fraction of the file's pages in the page cache now (``mincore`` of a read-only
    mapping; nan where that is not available): whether a "streaming pass" over it read
    memory or the disk."""
    import ctypes
    import ctypes.util
    import mmap

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return 1.0
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                return float("nan")
            try:
                pages = -(-size // mmap.PAGESIZE)
                vec = ctypes.create_string_buffer(pages)
                if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                    return float("nan")
                return float(np.frombuffer(vec.raw, dtype=np.uint8)[:pages].__and__(1).mean())
            finally:
                libc.munmap(ctypes.c_void_p(addr), size)
        finally:
            os.close(fd)
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not Linux
        return float("nan")


def gemm_peak_gflops(repeats: int = 3, size: int = 2048) -> float:
    """GFLOP/s of a square float64 product ``A @ B`` (numpy's BLAS, its threads as set),
    the fastest of ``repeats + 2`` calls after a warm-up, 0.3 s apart: the machine's
    arithmetic rate, as high as this BLAS gets it."""
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(size, size)), rng.normal(size=(size, size))
    A @ B
    best = np.inf
    for _ in range(repeats + 2):
        time.sleep(0.3)
        t0 = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best / 1e9


def blas_core() -> str:
    """The core type numpy's BLAS dispatched to (threadpoolctl's ``internal_api`` and
    ``architecture``, e.g. ``openblas SkylakeX``)."""
    try:
        from threadpoolctl import threadpool_info

        for i in threadpool_info():
            if i["user_api"] == "blas" and "numpy" in os.path.basename(
                    os.path.dirname(i["filepath"])):
                return f"{i['internal_api']} {i.get('architecture') or ''}".strip()
        for i in threadpool_info():
            if i["user_api"] == "blas":
                return f"{i['internal_api']} {i.get('architecture') or ''}".strip()
    except Exception:  # pragma: no cover - informational only
        pass
    return "unknown"


def machine_columns(peak: float) -> dict[str, Any]:
    """The columns every stored row carries: the CPU model, its GEMM peak measured in the
    same run (GFLOP/s) and numpy's BLAS core type."""
    return {"cpu": machine()["cpu"], "peak_gflops": peak, "blas_core": blas_core()}


def fit_exponent(x: np.ndarray, t: np.ndarray) -> float:
    """Slope of log t against log x (least squares): the empirical scaling exponent."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    ok = np.isfinite(t) & (t > 0)
    return float(np.polyfit(np.log(x[ok]), np.log(t[ok]), 1)[0])
