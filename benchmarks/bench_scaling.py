"""The honest scaling law of the exact decomposition and of both Nyström readings (App. C.7).

Exact costs O(n H^2 + H^3) to fit and O(n H) per query. This benchmark measures, in one run:

* fit time and per-query time of ``CaseInfluence`` (exact, with the ridge below) and of
  ``NystromCaseInfluence`` with rank H/2 (``method="features"``, the paper's reading, and
  ``method="cases"``, Williams & Seeger's), all with the same ridge
  lambda = 1e-3 tr(G)/H;
* the machine floor of the same shapes: for a query batch, the bare GEMM
  (m, H) @ (H, n) into a preallocated (m, n) output; for the fit, the Gram GEMM
  (H, n) @ (n, H) into a preallocated (H, H) output;

as n grows (H = 64) and as H grows (n fixed), and writes ``benchmarks/results/scaling.csv``
plus ``scaling_meta.json`` (date, CPU, cores, BLAS threads); every row carries the CPU
model, the GEMM peak measured at the start of the run and numpy's BLAS core type. Fitted log-log exponents are
printed. Per-query time = time of ``coefficients`` for a batch of m queries, divided by m
(m = min(256, 2**26 // n) so the (m, n) output stays at 512 MB). Nyström is run up to
n = 10**6 only: its fit holds three (n, H) arrays at once (about 15 GB at n = 10**7).

Run: ``python benchmarks/bench_scaling.py [--quick]`` (``--quick``: small sizes, seconds).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    fit_exponent,
    gemm_peak_gflops,
    machine,
    machine_columns,
    median_time,
)

import cbdt  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def representation(n: int, H: int, seed: int = 0) -> np.ndarray:
    """A tanh representation of full column rank (a random two-layer map)."""
    rng = np.random.default_rng(seed)
    Phi = np.empty((n, H))
    W = rng.normal(size=(H, H)) / np.sqrt(H)
    for s in range(0, n, 1 << 18):  # in blocks: no (n, H) temporaries
        block = rng.normal(size=(min(1 << 18, n - s), H))
        np.tanh(block @ W, out=Phi[s : s + block.shape[0]])
    return Phi


def measure(n: int, H: int, sweep: str, nystrom: bool, big: bool) -> list[dict]:
    Phi = representation(n, H)
    R = np.random.default_rng(1).normal(size=(n, 3))
    m = int(min(256, max(1, 2**26 // n)))
    Q = representation(m, H, seed=2)
    lam = 1e-3 * float(np.einsum("ij,ij->", Phi, Phi)) / H
    rep_fit = 1 if big else 3
    rep_q = 3 if big else 5
    rows = []

    G = np.empty((H, H))
    t = median_time(lambda: np.matmul(Phi.T, Phi, out=G), rep_fit)
    out = np.empty((m, n))
    tq = median_time(lambda: np.matmul(Q, Phi.T, out=out), rep_q)
    rows.append(dict(method="floor (GEMM)", fit_s=t, query_s=tq / m))

    models = [("exact", lambda: cbdt.CaseInfluence(ridge=lam))]
    if nystrom:
        for meth in ("features", "cases"):
            models.append(
                (f"Nystrom {meth}", lambda meth=meth: cbdt.NystromCaseInfluence(
                    n_components=max(1, H // 2), method=meth, ridge=lam, random_state=0))
            )
    for name, make in models:
        est = make()
        t_fit = median_time(lambda est=est: est.fit(Phi, R), rep_fit, warm=not big)
        t_q = median_time(lambda est=est: est._alpha(Q, out=out), rep_q)
        rows.append(dict(method=name, fit_s=t_fit, query_s=t_q / m))
        del est
        gc.collect()
    for r in rows:
        r.update(sweep=sweep, n=n, H=H, m=m)
    print("  ".join(f"{r['method']}: fit {r['fit_s']:.3g}s q {r['query_s']*1e6:.3g}us"
                    for r in rows), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n-max", type=int, default=10**7)
    ap.add_argument("--H-max", type=int, default=4096)
    args = ap.parse_args(argv)
    if args.quick:
        ns, Hs, n_fixed = [10**3, 10**4], [32, 64, 128], 4000
    else:
        ns = [n for n in (10**3, 10**4, 10**5, 10**6, 10**7) if n <= args.n_max]
        Hs = [H for H in (32, 64, 128, 256, 512, 1024, 2048, 4096) if H <= args.H_max]
        n_fixed = 20_000
    peak = gemm_peak_gflops()
    print(f"GEMM peak: {peak:.1f} GFLOP/s", flush=True)
    rows = []
    for n in ns:
        print(f"n = {n:,}, H = 64", flush=True)
        rows += measure(n, 64, "n", nystrom=n <= 10**6, big=n >= 10**6)
    for H in Hs:
        print(f"n = {n_fixed:,}, H = {H}", flush=True)
        rows += measure(n_fixed, H, "H", nystrom=True, big=H >= 1024)
    df = pd.DataFrame(rows)[["sweep", "n", "H", "m", "method", "fit_s", "query_s"]]
    for c, v in machine_columns(peak).items():
        df[c] = v
    meta = machine() | {"peak_gflops": f"{peak:.1f}"}
    print(meta)
    for sweep, x in (("n", "n"), ("H", "H")):
        sub = df[df.sweep == sweep]
        for meth, g in sub.groupby("method", sort=False):
            print(f"{sweep}-sweep {meth:18s} fit exponent {fit_exponent(g[x], g.fit_s):5.2f}"
                  f"   per-query exponent {fit_exponent(g[x], g.query_s):5.2f}")
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        df.to_csv(RESULTS / "scaling.csv", index=False)
        (RESULTS / "scaling_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"wrote {RESULTS / 'scaling.csv'}")


if __name__ == "__main__":
    main()
