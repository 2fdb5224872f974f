"""The fit against the machine: ``CaseInfluence().fit`` beside the Gram product and a streaming read.

Measures, in one run on this machine (medians of ``--repeats``, 0.3 s pause before every call
so that OpenBLAS's spinning threads of the previous call are asleep):

* in memory, n = 10**6 and H in {64, 256, 1024}: the Gram product ``Phi.T @ Phi`` (numpy, its
  own BLAS threads: the floor the fit is judged against), the same Gram blocked over as many
  Python threads as numpy's BLAS has (what the fit's first pass does), and the whole fit
  (everything before the first query can be answered: both passes, the factor, the rank and
  condition diagnosis, the copy of Phi the queries read); the path taken
  (``factorization_``) is stored beside;
* memmap, n = 10**7, H = 64, float64 and float32 files: the fit against one streaming pass over
  the file (``np.copyto`` of every chunk into a reused float64 buffer) and against the Gram of
  the same rows read from the file; the reads of the file the fit made (``passes``);
* the machine's arithmetic rate: a square float64 matrix product (numpy, its own BLAS threads,
  the fastest of ``--repeats + 2`` calls), in GFLOP/s (``peak_gflops``), and for every row the
  time one symmetric Gram product of its rows would take at that rate (``gram_at_peak_s``,
  :math:`nH(H+1)` flops): the arithmetic floor of a pass, which the streaming floor of a memmap
  is compared with;
* dask on a two-process ``LocalCluster``, n = 10**7 in chunks of 10**6 rows read by the
  workers from the float64 file: the fit against a cost model built from per-chunk times
  measured in this process (:func:`dask_cost_model`), and the model's prediction for
  n = 10**9 rows on 16, 64 and 256 workers;
* beside every in-memory fit, the same fit with numpy's huge-page request switched off
  (``fit_small_pages_s``: the fit's copy of Phi then lies in the kernel's default pages; the
  setting and the kernel's ``transparent_hugepage`` policy in ``numpy_hugepages``), and one
  query's top 10 cases on each fit's copy, timed in turn (``query_top10_s``,
  ``query_top10_small_pages_s``): what the page size costs the fit once and every query after;
* beside every in-memory fit, the same fit with ``copy=False`` (``fit_nocopy_s``,
  ``ratio_nocopy``): ``Phi`` kept by reference, so no copy of it is mapped and written;
* beside every in-memory fit, what a user would pick instead: scikit-learn's
  ``Ridge(solver="cholesky")`` on the same data (the normal equations: errors of order
  cond(Phi)^2 eps), timed in the same rounds (``ridge_cholesky_s``);
* a profile of the in-memory fit (:func:`profile`), on one thread (BLAS pinned, one Python
  thread): the time inside the BLAS-3/LAPACK kernels of the passes (``trsm``, with the
  ``dgemm`` calls of the recursive solve, ``syrk``, ``potrf``, each call timed) and everything else (copies, checks, small factorisations,
  Python), as a share of the fit (``outside_share``; target: at most 10%, the proxy for a
  machine whose GEMM is 4x faster than this one's), on wall time and on the thread's CPU
  time (``_cpu``: robust to a shared machine's load), and beside it the first touch of the
  fit's own copy of Phi (:func:`first_touch`: the kernel mapping and zeroing n H' float64 of
  fresh pages, a cost of the owned copy that no change of the fit's kernels removes; the fit
  has it done in one call, :func:`cbdt._pages.populate`, timed with the copy in
  ``profile_copy_cpu_s``).

Every row carries the CPU model, the GEMM peak measured in this run (``peak_gflops``) and
numpy's BLAS core type (``blas_core``: threadpoolctl's ``internal_api`` and
``architecture``).

Run: ``python benchmarks/bench_fit.py [--n 1000000] [--n-memmap 10000000] [--widths 64 256
1024] [--n-wide 250000] [--no-files]``; ``--n-wide`` is n for H >= 1024 (n H floats, twice:
Phi and the fit's copy, must fit in memory). Writes ``benchmarks/results/fit.csv`` and
``fit_meta.json``; with ``--no-files`` (the in-memory rows and profiles alone)
``fit_profile.csv`` and ``fit_profile_meta.json`` instead.
The memmap files (5.1 GB + 2.6 GB at the default size) are written to ``--dir`` and deleted
afterwards.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _common import gemm_peak_gflops, load_average, machine, machine_columns  # noqa: E402

import cbdt  # noqa: E402
from cbdt._threads import blas_threads, single_threaded_blas  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def timed(fn, repeats: int) -> float:
    """Median of ``repeats`` calls, each after a 0.3 s pause (no warm-up call: a fit's first
    touch of its own memory is part of what a user pays)."""
    times = []
    for _ in range(repeats):
        gc.collect()
        time.sleep(0.3)
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        del out
    return float(np.median(times))


def peak_gflops(repeats: int, size: int = 2048) -> float:
    """GFLOP/s of a square float64 product (:func:`_common.gemm_peak_gflops`)."""
    return gemm_peak_gflops(repeats, size)


def threaded_gram(Phi: np.ndarray, rows: int = 4096) -> np.ndarray:
    """``Phi.T @ Phi`` over row blocks on as many Python threads as numpy's BLAS has."""
    from concurrent.futures import ThreadPoolExecutor

    t = blas_threads()
    n, H = Phi.shape
    cuts = np.linspace(0, n, t + 1).round().astype(int)

    def part(j: int) -> np.ndarray:
        G = np.zeros((H, H))
        for a in range(cuts[j], cuts[j + 1], rows):
            X = Phi[a : min(cuts[j + 1], a + rows)]
            G += X.T @ X
        return G

    with single_threaded_blas(), ThreadPoolExecutor(t) as pool:
        return sum(pool.map(part, range(t)))


def _hugepage_setter():
    """numpy's switch of its huge-page request on large allocations (Linux), or None."""
    try:
        from numpy._core import multiarray
    except ImportError:  # pragma: no cover - numpy < 2
        from numpy.core import multiarray
    return getattr(multiarray, "_set_madvise_hugepage", None)


def hugepages_default() -> str:
    """Whether numpy asks for transparent huge pages on large allocations here, and the
    kernel's ``transparent_hugepage`` settings (``enabled``/``defrag``)."""
    setter = _hugepage_setter()
    if setter is None:  # pragma: no cover
        asks = "unknown"
    else:
        old = setter(True)
        setter(old)
        asks = str(bool(old))
    kernel = []
    for what in ("enabled", "defrag"):
        try:
            text = Path(f"/sys/kernel/mm/transparent_hugepage/{what}").read_text()
            kernel.append(f"{what}={text.split('[')[1].split(']')[0]}")
        except (OSError, IndexError):
            kernel.append(f"{what}=?")
    return f"numpy asks: {asks}; " + ", ".join(kernel)


@contextmanager
def numpy_hugepages(enabled: bool):
    """numpy's huge-page request (``madvise(MADV_HUGEPAGE)`` on allocations from 4 MiB, the
    ``NUMPY_MADVISE_HUGEPAGE`` switch) set to ``enabled`` for the block, restored after.
    Where the kernel's ``defrag`` is ``madvise``, a fault in such memory that finds no free
    huge page waits for a compaction (numpy/numpy#31590): this times the fit both ways."""
    setter = _hugepage_setter()
    if setter is None:  # pragma: no cover - not available: numpy's default
        yield
        return
    old = setter(enabled)
    try:
        yield
    finally:
        setter(old)


def representations(n: int, H: int, seed: int = 0) -> np.ndarray:
    """tanh features of a random linear layer (cond(Phi) of a few units), C order."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(H, H)) / np.sqrt(H)
    Phi = np.empty((n, H))
    for s in range(0, n, 1 << 16):
        e = min(n, s + (1 << 16))
        np.tanh(rng.normal(size=(e - s, H)) @ W, out=Phi[s:e])
    return Phi


def rounds_timed(fns: list, repeats: int) -> list[float]:
    """Medians of ``fns`` timed in turn, ``repeats`` rounds, the order rotating, each call
    after a 0.3 s pause (no warm-up call: a fit's first touch of its own memory is part of
    what a user pays); a shared machine's load then hits every function alike."""
    times: list[list[float]] = [[] for _ in fns]
    for i in range(repeats):
        for j in [(i + s) % len(fns) for s in range(len(fns))]:
            gc.collect()
            time.sleep(0.3)
            t0 = time.perf_counter()
            out = fns[j]()
            times[j].append(time.perf_counter() - t0)
            del out
    return [float(np.median(t)) for t in times]


def first_touch(Phi: np.ndarray, repeats: int) -> dict:
    """What the fit's owned copy of ``Phi`` costs the operating system: a fresh ``(n, H')``
    float64 array filled by a copy of ``Phi`` (the kernel maps and zeroes every page on its
    first write), against the same copy into an array already touched. Medians of ``repeats``
    interleaved pairs, on one thread, in thread CPU time (the page faults are the thread's
    system time)."""
    src = Phi
    warm = np.empty(Phi.shape)
    np.copyto(warm, src)
    fresh_t, warm_t = [], []
    for _ in range(repeats):
        gc.collect()
        t0 = time.thread_time()
        out = np.empty(Phi.shape)
        np.copyto(out, src)
        fresh_t.append(time.thread_time() - t0)
        del out
        t0 = time.thread_time()
        np.copyto(warm, src)
        warm_t.append(time.thread_time() - t0)
    fresh, w = float(np.median(fresh_t)), float(np.median(warm_t))
    return {"copy_fresh_cpu_s": fresh, "copy_warm_cpu_s": w, "first_touch_cpu_s": fresh - w}


def stream_1thread(Phi: np.ndarray, repeats: int) -> float:
    """One thread's CPU time for one streaming read of ``Phi``: every piece of about 512 kB
    copied into one reused buffer (the read any pass over ``Phi`` makes, and all that the
    numpy Gram of a narrow ``Phi`` waits for); median of ``repeats``."""
    rows = max(1, (1 << 19) // (8 * Phi.shape[1]))
    buf = np.empty((rows, Phi.shape[1]))
    times = []
    for _ in range(repeats):
        t0 = time.thread_time()
        for a in range(0, Phi.shape[0], rows):
            blk = Phi[a : a + rows]
            np.copyto(buf[: blk.shape[0]], blk)
        times.append(time.thread_time() - t0)
    return float(np.median(times))


def profile(Phi: np.ndarray, R: np.ndarray, repeats: int, copy: bool = True) -> dict:
    """The fit on one thread (BLAS pinned to one thread, so the fit runs one Python thread),
    every call of its pass kernels timed: ``trsm`` (:func:`cbdt._blas.trsm_right_upper` or
    :func:`cbdt._blas.trsm_right_upper_recursive`, whichever pass 2 uses at this width: the
    latter's ``dgemm`` calls count as ``trsm``), ``syrk``
    (``cbdt._tsqr._syrk``, both passes' Gram products) and ``potrf`` (LAPACK's Cholesky).
    Each is timed on two clocks: wall time and the thread's CPU time (user + system: on a
    shared machine the time this thread ran, not the time it waited for a core). Returns
    the medians over ``repeats`` fits of the total, of each kernel's sum, and of the rest
    (``outside``) and its share of the fit; ``outside_share`` is on wall time,
    ``outside_share_cpu`` on CPU time. The first touch of the fit's own copy (page faults,
    :func:`first_touch`) is part of ``outside``; ``outside_share_cpu_less_first_touch``
    takes out that cost as measured apart, ``outside_share_cpu_less_copy`` the time of the
    fit's own writes of its copy (``profile_copy_cpu_s``: mapping its pages
    (:func:`cbdt._pages.populate`), reading each block of ``Phi`` and writing it into the
    copy), timed inside the same fits.

    ``copy=False`` profiles ``CaseInfluence(copy=False)`` (no copy: ``Phi`` is read in
    place) and returns its numbers under ``profile_nocopy_*`` and ``outside_share_nocopy*``,
    with one thread's streaming read of ``Phi`` (:func:`stream_1thread`,
    ``stream_1thread_cpu_s``) and the share outside the kernels less that read
    (``outside_share_nocopy_cpu_less_stream``: the read of ``Phi`` is the floor of any
    pass, the numpy Gram's included)."""
    import scipy.linalg.lapack as lapack
    from threadpoolctl import threadpool_limits

    import cbdt._tsqr as ts

    names = ("trsm", "syrk", "potrf")
    acc = {k: 0.0 for k in names}
    cpu = {k: 0.0 for k in names}

    def wrap(name: str, f):
        def g(*a, **kw):
            t0, c0 = time.perf_counter(), time.thread_time()
            out = f(*a, **kw)
            acc[name] += time.perf_counter() - t0
            cpu[name] += time.thread_time() - c0
            return out
        return g

    orig = (ts.trsm_right_upper_recursive, ts.trsm_right_upper, ts._syrk, lapack.dpotrf,
            ts.populate)
    ts.trsm_right_upper_recursive = wrap("trsm", orig[0])
    ts.trsm_right_upper = wrap("trsm", orig[1])
    ts._syrk = wrap("syrk", orig[2])
    lapack.dpotrf = wrap("potrf", orig[3])
    # the writes of the fit's own copy (reading Phi, writing the fresh pages): not BLAS,
    # timed apart so that what else is outside BLAS can be read off
    fill_orig = ts._Source.fill
    fill_cpu = [0.0]

    def fill(self, a, e, out, scale):
        if self.memory is None or not np.shares_memory(out, self.memory):
            return fill_orig(self, a, e, out, scale)
        c0 = time.thread_time()
        got = fill_orig(self, a, e, out, scale)
        fill_cpu[0] += time.thread_time() - c0
        return got

    def populate(a, threads=1):  # one thread here: all its time is this thread's
        c0 = time.thread_time()
        got = orig[4](a, threads)
        fill_cpu[0] += time.thread_time() - c0
        return got

    ts._Source.fill, ts.populate = fill, populate
    rec: dict[str, list[float]] = {k: [] for k in ("total", "total_cpu", "fill_cpu", *names,
                                                    *(f"{k}_cpu" for k in names))}
    try:
        with threadpool_limits(1):
            for _ in range(repeats):
                for k in names:
                    acc[k] = cpu[k] = 0.0
                fill_cpu[0] = 0.0
                gc.collect()
                time.sleep(0.3)
                ci = cbdt.CaseInfluence(copy=copy)
                t0, c0 = time.perf_counter(), time.thread_time()
                ci.fit(Phi, R)
                rec["total"].append(time.perf_counter() - t0)
                rec["total_cpu"].append(time.thread_time() - c0)
                rec["fill_cpu"].append(fill_cpu[0])
                for k in names:
                    rec[k].append(acc[k])
                    rec[f"{k}_cpu"].append(cpu[k])
                del ci
    finally:
        ts.trsm_right_upper_recursive, ts.trsm_right_upper, ts._syrk = orig[:3]
        lapack.dpotrf, ts.populate = orig[3], orig[4]
        ts._Source.fill = fill_orig
    tot, tot_cpu = np.array(rec["total"]), np.array(rec["total_cpu"])
    inside = sum(np.array(rec[k]) for k in names)
    inside_cpu = sum(np.array(rec[f"{k}_cpu"]) for k in names)
    if not copy:
        out = {"profile_nocopy_fit_1thread_s": float(np.median(tot)),
               "profile_nocopy_fit_1thread_cpu_s": float(np.median(tot_cpu))}
        for k in names:
            out[f"profile_nocopy_{k}_cpu_s"] = float(np.median(rec[f"{k}_cpu"]))
        out["outside_share_nocopy"] = float(np.median((tot - inside) / tot))
        out["outside_share_nocopy_cpu"] = float(np.median((tot_cpu - inside_cpu) / tot_cpu))
        st = stream_1thread(Phi, repeats)
        out["stream_1thread_cpu_s"] = st
        out["outside_share_nocopy_cpu_less_stream"] = float(np.median(
            (tot_cpu - inside_cpu - st) / tot_cpu))
        return out
    out = {"profile_fit_1thread_s": float(np.median(tot)),
           "profile_fit_1thread_cpu_s": float(np.median(tot_cpu))}
    for k in names:
        out[f"profile_{k}_s"] = float(np.median(rec[k]))
        out[f"profile_{k}_cpu_s"] = float(np.median(rec[f"{k}_cpu"]))
    out["profile_outside_s"] = float(np.median(tot - inside))
    out["profile_outside_cpu_s"] = float(np.median(tot_cpu - inside_cpu))
    out["outside_share"] = float(np.median((tot - inside) / tot))
    out["outside_share_cpu"] = float(np.median((tot_cpu - inside_cpu) / tot_cpu))
    fills = np.array(rec["fill_cpu"])
    out["profile_copy_cpu_s"] = float(np.median(fills))
    out["outside_share_cpu_less_copy"] = float(np.median(
        (tot_cpu - inside_cpu - fills) / tot_cpu))
    ft = first_touch(Phi, repeats)
    out |= ft
    out["outside_share_cpu_less_first_touch"] = float(np.median(
        (tot_cpu - inside_cpu - ft["first_touch_cpu_s"]) / tot_cpu))
    return out


def in_memory(n: int, H: int, repeats: int, prof: bool = True) -> dict:
    from sklearn.linear_model import Ridge

    Phi = representations(n, H)
    R = np.random.default_rng(1).normal(size=(n, 3))
    ci = cbdt.CaseInfluence()
    ci_ref = cbdt.CaseInfluence(copy=False)  # Phi kept by reference: no copy written
    ridge = Ridge(solver="cholesky", fit_intercept=bool(ci.intercept))
    ci_small = cbdt.CaseInfluence()

    def fit_small_pages():
        with numpy_hugepages(False):
            return ci_small.fit(Phi, R)

    t_gram, t_tgram, t_fit, t_ridge, t_small, t_ref = rounds_timed(
        [lambda: Phi.T @ Phi, lambda: threaded_gram(Phi), lambda: ci.fit(Phi, R),
         lambda: ridge.fit(Phi, R), fit_small_pages, lambda: ci_ref.fit(Phi, R)], repeats)
    # what the page size of the fit's copy costs each query afterwards: one query's top 10
    # on the copy in huge pages (numpy's request) and in small ones, timed in turn
    q = Phi[:1].copy()
    t_q, t_q_small = rounds_timed([lambda: ci.top_cases(q, 0, k=10),
                                   lambda: ci_small.top_cases(q, 0, k=10)], 5 * repeats)
    row = {
        "case": "in memory", "dtype": "float64", "n": n, "H": H, "repeats": repeats,
        "floor": "numpy Phi.T @ Phi", "floor_s": t_gram, "threaded_gram_s": t_tgram,
        "fit_s": t_fit, "ratio": t_fit / t_gram, "ratio_threaded_gram": t_fit / t_tgram,
        "factorization": ci.factorization_, "omega": ci.orthogonality_loss_,
        "passes": ci._fit_passes, "ridge_cholesky_s": t_ridge, "ratio_ridge": t_fit / t_ridge,
        "fit_small_pages_s": t_small, "query_top10_s": t_q, "query_top10_small_pages_s": t_q_small,
        "numpy_hugepages": hugepages_default(),
        "fit_nocopy_s": t_ref, "ratio_nocopy": t_ref / t_gram,
        "ratio_ridge_nocopy": t_ref / t_ridge,
    }
    ci = ci_small = ci_ref = None  # their copies of Phi freed before the profile's fits
    if prof:
        row |= profile(Phi, R, repeats)
        row |= profile(Phi, R, repeats, copy=False)
    gc.collect()
    return row


def load_rows(path: str, a: int, e: int) -> np.ndarray:
    """Rows ``a..e`` of the ``.npy`` file as float64 (a dask task: the worker reads them)."""
    return np.array(np.load(path, mmap_mode="r")[a:e], dtype=np.float64)  # read: a copy


def dask_cost_model(path: Path, n: int, H: int, chunk: int, repeats: int,
                    big_n: float = 1e9) -> list[dict]:
    """The fit on a two-process ``LocalCluster`` against a cost model from per-chunk times.

    Per chunk of ``chunk`` rows, measured in this process on one thread: reading it
    (``t_read``), pass 1 (its Gram matrix, ``t_gram``) and pass 2 (its triangular solve and
    Gram matrix, ``t_q``). The model of the fit on ``W`` workers is ``ceil(chunks / W) (2
    t_read + t_gram + t_q)`` plus the client's small reductions; it is checked against the
    measured fit at ``n`` on 2 workers and extrapolated to ``big_n`` rows.
    """
    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster
    from threadpoolctl import threadpool_limits

    from cbdt._tsqr import _chunk_gram, _chunk_q

    R = np.random.default_rng(1).normal(size=(n, 3))
    with threadpool_limits(1):
        t_read = timed(lambda: load_rows(str(path), 0, chunk), repeats)
        X = load_rows(str(path), 0, chunk)
        t_gram = timed(lambda: _chunk_gram(X, False, 1.0), repeats)
        G = _chunk_gram(X, False, 1.0)
        R1 = np.linalg.cholesky(G * (n / chunk)).T
        t_q = timed(lambda: _chunk_q(X, R[:chunk], R1, False, 1.0, 1.0), repeats)
    per_chunk = 2 * t_read + t_gram + t_q
    chunks = -(-n // chunk)
    blocks = [da.from_delayed(dask.delayed(load_rows)(str(path), a, min(n, a + chunk)),
                              shape=(min(n, a + chunk) - a, H), dtype=np.float64)
              for a in range(0, n, chunk)]
    Phi = da.concatenate(blocks)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        ci = cbdt.CaseInfluence()
        t_fit = timed(lambda: ci.fit(Phi, R), repeats)
    model = -(-chunks // 2) * per_chunk
    rows = [{
        "case": "dask, 2 local workers", "dtype": "float64", "n": n, "H": H,
        "repeats": repeats, "floor": "cost model: ceil(chunks / 2) (2 read + gram + q)",
        "floor_s": model, "threaded_gram_s": np.nan, "fit_s": t_fit, "ratio": t_fit / model,
        "ratio_threaded_gram": np.nan, "factorization": ci.factorization_,
        "omega": ci.orthogonality_loss_, "chunk_rows": chunk, "t_read_s": t_read,
        "t_gram_s": t_gram, "t_q_s": t_q,
    }]
    big_chunks = int(np.ceil(big_n / chunk))
    for W in (16, 64, 256):
        rows.append({
            "case": f"dask model, {W} workers", "dtype": "float64", "n": int(big_n), "H": H,
            "repeats": 0, "floor": "cost model", "floor_s": np.nan, "threaded_gram_s": np.nan,
            "fit_s": -(-big_chunks // W) * per_chunk, "ratio": np.nan,
            "ratio_threaded_gram": np.nan, "factorization": "cholesky_qr2", "omega": np.nan,
            "chunk_rows": chunk, "t_read_s": t_read, "t_gram_s": t_gram, "t_q_s": t_q,
        })
    return rows


def on_file(n: int, dtype: type, folder: Path, repeats: int, H: int = 64) -> list[dict]:
    path = folder / f"phi_{np.dtype(dtype).name}.npy"
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, H))
    step = 1 << 20
    for s in range(0, n, step):
        e = min(n, s + step)
        mm[s:e] = representations(e - s, H, seed=s)
    mm.flush()
    del mm
    Phi = np.load(path, mmap_mode="r")
    R = np.random.default_rng(1).normal(size=(n, 3))
    buf = np.empty((1 << 16, H))

    def stream() -> None:
        for s in range(0, n, 1 << 16):
            blk = Phi[s : s + (1 << 16)]
            np.copyto(buf[: blk.shape[0]], blk)

    def gram() -> np.ndarray:
        G = np.zeros((H, H))
        for s in range(0, n, 1 << 16):
            np.copyto(buf[: min(n - s, 1 << 16)], Phi[s : s + (1 << 16)])
            X = buf[: min(n - s, 1 << 16)]
            G += X.T @ X
        return G

    stream()  # the file in the page cache (the floor and the fit then read the same way)
    t_stream = timed(stream, repeats)
    t_gram = timed(gram, repeats)
    ci = cbdt.CaseInfluence()
    t_fit = timed(lambda: ci.fit(Phi, R), repeats)
    rows = [{
        "case": "memmap", "dtype": np.dtype(dtype).name, "n": n, "H": H, "repeats": repeats,
        "floor": "one streaming pass", "floor_s": t_stream, "threaded_gram_s": t_gram,
        "fit_s": t_fit, "ratio": t_fit / t_stream, "ratio_threaded_gram": t_fit / t_gram,
        "factorization": ci.factorization_, "omega": ci.orthogonality_loss_,
        "passes": ci._fit_passes,
    }]
    if dtype == np.float64:
        rows += dask_cost_model(path, n, H, chunk=1_000_000, repeats=repeats)
    path.unlink()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--n-memmap", type=int, default=10_000_000)
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--n-wide", type=int, default=250_000,
                    help="n for H >= 1024 (Phi and the fit's copy must fit in memory)")
    ap.add_argument("--no-files", action="store_true",
                    help="in-memory rows only (no memmap files, no dask), written to "
                         "fit_profile.csv")
    ap.add_argument("--no-profile", action="store_true", help="skip the one-thread profile")
    ap.add_argument("--update-in-memory", action="store_true",
                    help="in-memory rows only, replacing those of the stored fit.csv (its "
                         "memmap and dask rows kept, with their own date in fit_meta.json)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    load_start = load_average()
    peak = peak_gflops(args.repeats)
    print(f"peak: {peak:.1f} GFLOP/s", flush=True)
    rows = []
    for H in args.widths:
        n = args.n if H < 1024 else min(args.n, args.n_wide)
        rows.append(in_memory(n, H, args.repeats, prof=not args.no_profile)
                    | {"load_average": load_average()})
        print(rows[-1], flush=True)
    if not args.no_files and not args.update_in_memory:
        folder = Path(tempfile.mkdtemp(dir=args.dir))
        try:
            for dtype in (np.float64, np.float32):
                rows += on_file(args.n_memmap, dtype, folder, args.repeats)
                print(rows[-1], flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    df = pd.DataFrame(rows)
    for c, v in machine_columns(peak).items():
        df[c] = v
    df["gram_at_peak_s"] = df["n"] * df["H"] * (df["H"] + 1) / (peak * 1e9)
    print(df.to_string(index=False))
    for r in df[df["case"] == "in memory"].itertuples():
        if args.no_profile:
            print(f"H = {r.H}, n = {r.n:,}: fit {r.fit_s:.3f} s = {r.ratio:.2f}x numpy's Gram "
                  f"({r.floor_s:.3f} s), copy=False {r.fit_nocopy_s:.3f} s = "
                  f"{r.ratio_nocopy:.2f}x, Ridge(cholesky) {r.ridge_cholesky_s:.3f} s")
            continue
        print(f"H = {r.H}, n = {r.n:,}: fit {r.fit_s:.3f} s, without numpy's huge-page "
              f"request {r.fit_small_pages_s:.3f} s; one query's top 10 afterwards "
              f"{1e3 * r.query_top10_s:.2f} ms and {1e3 * r.query_top10_small_pages_s:.2f} ms "
              f"({r.numpy_hugepages})")
        print(f"H = {r.H}, n = {r.n:,}: fit {r.fit_s:.3f} s = {r.ratio:.2f}x numpy's Gram "
              f"({r.floor_s:.3f} s; target <= 3), Ridge(cholesky) {r.ridge_cholesky_s:.3f} s; "
              f"profile on 1 thread: fit {r.profile_fit_1thread_s:.3f} s, trsm "
              f"{r.profile_trsm_s:.3f}, syrk {r.profile_syrk_s:.3f}, potrf "
              f"{r.profile_potrf_s:.4f}, outside {r.profile_outside_s:.3f} s = "
              f"{100 * r.outside_share:.1f}% (target <= 10%); on CPU time "
              f"{100 * r.outside_share_cpu:.1f}%, less the first touch of the copy "
              f"({r.first_touch_cpu_s:.3f} s) {100 * r.outside_share_cpu_less_first_touch:.1f}%")
        print(f"H = {r.H}, n = {r.n:,}, copy=False: fit {r.fit_nocopy_s:.3f} s = "
              f"{r.ratio_nocopy:.2f}x numpy's Gram; profile on 1 thread: fit "
              f"{r.profile_nocopy_fit_1thread_cpu_s:.3f} s CPU, outside "
              f"{100 * r.outside_share_nocopy_cpu:.1f}%, less one streaming read "
              f"({r.stream_1thread_cpu_s:.3f} s) "
              f"{100 * r.outside_share_nocopy_cpu_less_stream:.1f}%")
    if not args.no_write and args.update_in_memory:
        old = pd.read_csv(RESULTS / "fit.csv")
        kept = old[old["case"] != "in memory"]
        pd.concat([df, kept], ignore_index=True).to_csv(RESULTS / "fit.csv", index=False)
        meta_path = RESULTS / "fit_meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        meta["files_rows"] = {k: meta[k] for k in ("date", "load_average_start",
                                                   "load_average_end") if k in meta}
        meta |= machine() | {"blas_threads": str(blas_threads()), "peak_gflops": f"{peak:.1f}",
                             "load_average_start": load_start,
                             "load_average_end": load_average(),
                             "in_memory_rows": "measured in a later run (--update-in-memory)"}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    elif not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        # a run without the files (in-memory rows and their profile only) never overwrites
        # the full table: it goes to fit_profile.csv
        name = "fit_profile" if args.no_files else "fit"
        df.to_csv(RESULTS / f"{name}.csv", index=False)
        meta = machine() | {"blas_threads": str(blas_threads()), "peak_gflops": f"{peak:.1f}",
                            "load_average_start": load_start, "load_average_end": load_average()}
        (RESULTS / f"{name}_meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
