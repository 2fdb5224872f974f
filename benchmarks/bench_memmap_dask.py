"""Case memories beyond RAM and beyond one machine: n = 10**7, H = 64 as a memmap and on dask.

Measures, in one run on this machine (medians of ``--repeats``):

* ``fit`` of a float64 and of a float32 ``numpy.memmap`` (a tall-skinny QR over row chunks),
  and ``top_cases`` of 16 queries (one pass over the file for all of them), against two
  floors: one streaming pass over the file (``np.copyto`` of every chunk into a reused
  float64 buffer) and the bare GEMM (16, 64) @ (64, n) into a preallocated output;
* the same fit and queries with ``Phi`` as a ``dask.array`` of row chunks read by the
  workers of a ``dask.distributed.LocalCluster`` (2 processes, 1 thread each, loopback);
* peak memory: the tracemalloc peak of numpy allocations in this process during each call
  (the file's pages mapped by a memmap are page cache, not counted), and the largest RSS of
  any dask worker, sampled every 20 ms (a forked worker's ``ru_maxrss`` would report the
  parent's size);
* memory bounds in RAM at n = 2,000,000: tracemalloc peaks of ``top_cases``, ``explain`` and
  ``audit_signals`` for 1,024 queries (their (m, n) contributions would be 16 GB).

Run: ``python benchmarks/bench_memmap_dask.py [--n 10000000] [--dir /tmp]``; the files
(5.1 GB + 2.6 GB at the default n) are deleted afterwards. Writes
``benchmarks/results/memmap_dask.csv``; every row carries the CPU model, the GEMM peak
measured at the start of the run and numpy's BLAS core type.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _common import gemm_peak_gflops, machine, machine_columns, median_time  # noqa: E402

import cbdt  # noqa: E402

RESULTS = Path(__file__).parent / "results"
H = 64


def write_phi(path: Path, n: int, dtype: type) -> np.memmap:
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, H))
    rng = np.random.default_rng(0)
    W = rng.normal(size=(H, H)) / 8
    for s in range(0, n, 1 << 20):
        e = min(n, s + (1 << 20))
        mm[s:e] = np.tanh(rng.normal(size=(e - s, H)) @ W)
    mm.flush()
    del mm
    return np.load(path, mmap_mode="r")


def peak_alloc(fn) -> tuple[float, float]:
    """(seconds, tracemalloc peak in MB) of one call."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return t, peak


class RssPeak:
    """Largest resident set (MB) of any of ``pids`` while the block runs (sampled every 20 ms).

    Dask's worker processes are forked from this one, so their ``ru_maxrss`` starts at this
    process's size; sampling their current RSS measures what they really hold.
    """

    def __init__(self, pids: list[int]) -> None:
        import psutil

        self.procs = [psutil.Process(p) for p in pids]
        self.peak_mb = 0.0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            for p in self.procs:
                self.peak_mb = max(self.peak_mb, p.memory_info().rss / 2**20)
            time.sleep(0.02)

    def __enter__(self) -> RssPeak:
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def gemm_16(Q: np.ndarray, n: int, out: np.ndarray, rep: int) -> float:
    """The floor of a query batch: (16, H) @ (H, n) into a preallocated output."""
    D = np.random.default_rng(3).normal(size=(n, H))
    return median_time(lambda: np.matmul(Q, D.T, out=out), rep)


def gemm_64(Q: np.ndarray, D: np.ndarray) -> float:
    out = np.empty((Q.shape[0], D.shape[0]))
    return median_time(lambda: np.matmul(Q, D.T, out=out), 3)


def load_rows(path: str, s: int, e: int) -> np.ndarray:
    return np.asarray(np.load(path, mmap_mode="r")[s:e])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    n, rep = args.n, args.repeats
    peak = gemm_peak_gflops()
    print(f"GEMM peak: {peak:.1f} GFLOP/s", flush=True)
    tmp = Path(tempfile.mkdtemp(dir=args.dir, prefix="cbdt-bench-"))
    rows = []
    rng = np.random.default_rng(1)
    R = rng.normal(size=(n, 3))
    Q = np.tanh(rng.normal(size=(16, H)) @ rng.normal(size=(H, H)) / 8)

    def row(what, t, mem=None, floor=None, floor_what=""):
        rows.append(dict(measurement=what, seconds=t, peak_MB=mem, floor_s=floor,
                         floor=floor_what, ratio=None if floor is None else t / floor))
        print(rows[-1], flush=True)

    try:
        out = np.empty((16, n))
        t_gemm = gemm_16(Q, n, out, rep)
        row(f"GEMM (16, {H}) @ ({H}, n) into preallocated", t_gemm)
        for dtype in (np.float64, np.float32):
            name = np.dtype(dtype).name
            mm = write_phi(tmp / f"phi_{name}.npy", n, dtype)
            buf = np.empty((65_536, H))

            def stream(mm=mm, buf=buf):
                for s in range(0, n, 65_536):
                    blk = mm[s : s + 65_536]
                    np.copyto(buf[: blk.shape[0]], blk)

            t_read = median_time(stream, rep)
            row(f"memmap {name}: one streaming pass over the file", t_read)
            ci = cbdt.CaseInfluence()
            t_fit = median_time(lambda ci=ci, mm=mm: ci.fit(mm, R), 1, warm=False)
            _, mem_fit = peak_alloc(lambda ci=ci, mm=mm: ci.fit(mm, R))
            row(f"memmap {name}: fit", t_fit, mem_fit, t_read, "streaming pass")
            t_q = median_time(lambda ci=ci: ci.top_cases(Q, 1, k=10), rep)
            _, mem_q = peak_alloc(lambda ci=ci: ci.top_cases(Q, 1, k=10))
            row(f"memmap {name}: top_cases of 16 queries", t_q, mem_q,
                max(t_read, t_gemm), "max(streaming pass, GEMM)")
            del ci, mm

        # dask: row chunks read by the workers from the float32 file
        import dask
        import dask.array as da
        from dask.distributed import Client, LocalCluster

        path = str(tmp / "phi_float32.npy")
        step = 1 << 20
        blocks = [
            da.from_delayed(dask.delayed(load_rows)(path, s, min(n, s + step)),
                            shape=(min(n, s + step) - s, H), dtype=np.float32)
            for s in range(0, n, step)
        ]
        X = da.concatenate(blocks)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None) as cluster, \
                Client(cluster) as client:
            pids = list(client.run(os.getpid).values())
            ci = cbdt.CaseInfluence()
            with RssPeak(pids) as fit_peak:
                t0 = time.perf_counter()
                ci.fit(X, R)
                t_fit = time.perf_counter() - t0
            row("dask (2 local workers): fit", t_fit, fit_peak.peak_mb)
            with RssPeak(pids) as q_peak:
                t_q = median_time(lambda: ci.top_cases(Q, 1, k=10), rep)
            row("dask (2 local workers): top_cases of 16 queries", t_q, q_peak.peak_mb,
                max(t_read, t_gemm), "max(streaming pass, GEMM)")
            ref = cbdt.CaseInfluence().fit(np.load(path, mmap_mode="r"), R)
            a, b = ci.top_cases(Q, 1, k=10), ref.top_cases(Q, 1, k=10)
            same = bool(np.array_equal(a.indices, b.indices)) and bool(
                np.allclose(a.contributions, b.contributions, rtol=1e-10, atol=0))
            print(f"dask result equals the memmap result: {same}")

        # memory bounds in RAM at n = 2,000,000
        n2 = 2_000_000
        P2 = np.tanh(np.random.default_rng(4).normal(size=(n2, H)) / 2)
        ci2 = cbdt.CaseInfluence().fit(P2, R[:n2])
        del P2
        Q2 = np.tanh(np.random.default_rng(5).normal(size=(1024, H)) / 2)
        # a (1024, n) output would be 16 GB: 16 GEMMs of 64 queries against an (n, H) matrix
        t_gemm2 = 16 * gemm_64(Q2[:64], np.ascontiguousarray(ci2._Phi[:, :H]))
        for what, fn in (
            ("top_cases", lambda: ci2.top_cases(Q2, 1, k=10)),
            ("explain", lambda: ci2.explain(Q2, k=10)),
            ("audit_signals", lambda: cbdt.audit_signals(ci2, Q2, k=10)),
        ):
            t = median_time(fn, 1, warm=False)  # timed without tracemalloc's overhead
            _, mem = peak_alloc(fn)
            row(f"n = 2,000,000 in RAM: {what} of 1,024 queries", t, mem, t_gemm2,
                "16 x GEMM (64, 64) @ (64, n) into preallocated")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    df = pd.DataFrame(rows)
    for c, v in machine_columns(peak).items():
        df[c] = v
    meta = machine() | {"n": str(n), "peak_gflops": f"{peak:.1f}"}
    print(meta)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        df.to_csv(RESULTS / "memmap_dask.csv", index=False)
        (RESULTS / "memmap_dask_meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
