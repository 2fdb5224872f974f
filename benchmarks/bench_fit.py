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
  the same rows read from the file.

Run: ``python benchmarks/bench_fit.py [--n 1000000] [--n-memmap 10000000] [--widths 64 256
1024]``; writes ``benchmarks/results/fit.csv`` and ``fit_meta.json``. The memmap files (5.1 GB
+ 2.6 GB at the default size) are written to ``--dir`` and deleted afterwards.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine  # noqa: E402

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


def representations(n: int, H: int, seed: int = 0) -> np.ndarray:
    """tanh features of a random linear layer (cond(Phi) of a few units), C order."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(H, H)) / np.sqrt(H)
    Phi = np.empty((n, H))
    for s in range(0, n, 1 << 16):
        e = min(n, s + (1 << 16))
        np.tanh(rng.normal(size=(e - s, H)) @ W, out=Phi[s:e])
    return Phi


def in_memory(n: int, H: int, repeats: int) -> dict:
    Phi = representations(n, H)
    R = np.random.default_rng(1).normal(size=(n, 3))
    t_gram = timed(lambda: Phi.T @ Phi, repeats)
    t_tgram = timed(lambda: threaded_gram(Phi), repeats)
    ci = cbdt.CaseInfluence()
    t_fit = timed(lambda: ci.fit(Phi, R), repeats)
    row = {
        "case": "in memory", "dtype": "float64", "n": n, "H": H, "repeats": repeats,
        "floor": "numpy Phi.T @ Phi", "floor_s": t_gram, "threaded_gram_s": t_tgram,
        "fit_s": t_fit, "ratio": t_fit / t_gram, "ratio_threaded_gram": t_fit / t_tgram,
        "factorization": ci.factorization_, "omega": ci.orthogonality_loss_,
    }
    del Phi, ci
    gc.collect()
    return row


def on_file(n: int, dtype: type, folder: Path, repeats: int, H: int = 64) -> dict:
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
    row = {
        "case": "memmap", "dtype": np.dtype(dtype).name, "n": n, "H": H, "repeats": repeats,
        "floor": "one streaming pass", "floor_s": t_stream, "threaded_gram_s": t_gram,
        "fit_s": t_fit, "ratio": t_fit / t_stream, "ratio_threaded_gram": t_fit / t_gram,
        "factorization": ci.factorization_, "omega": ci.orthogonality_loss_,
    }
    del Phi, ci
    path.unlink()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--n-memmap", type=int, default=10_000_000)
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = []
    for H in args.widths:
        reps = args.repeats if H <= 256 else max(1, args.repeats - 2)  # 1024: ~1 min a call
        rows.append(in_memory(args.n, H, reps))
        print(rows[-1], flush=True)
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        for dtype in (np.float64, np.float32):
            rows.append(on_file(args.n_memmap, dtype, folder, args.repeats))
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        df.to_csv(RESULTS / "fit.csv", index=False)
        meta = machine() | {"blas_threads": str(blas_threads())}
        (RESULTS / "fit_meta.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
