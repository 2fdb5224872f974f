"""Speed of the exact case-influence audit at the paper's PJM scale.

n = 14,000 training cases, H = 64 features, |A| = 3 actions (Sec. 5.4, Appendix D).
Prints medians over repeats of: fit (Gram accumulation + Cholesky), a single query's
coefficients + top-10 cases, the per-query time inside a batch of 1,000 queries, and a naive
per-query ``np.linalg.solve(G, phi)`` baseline measured in the same run.

Run: ``python benchmarks/bench_influence.py [--repeats 7] [--n 14000] [--H 64]``.
Targets (issue 2): single query <= 1 ms; batched <= 0.1 ms per query (the paper reports
58.6 ms per query for its implementation).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

import cbdt


def median_time(fn, repeats: int, inner: int = 1) -> float:
    """Median wall time of ``fn`` in seconds, over ``repeats`` runs of ``inner`` calls."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=14_000)
    ap.add_argument("--H", type=int, default=64)
    ap.add_argument("--actions", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    Phi = np.tanh(rng.normal(size=(args.n, args.H)) @ rng.normal(size=(args.H, args.H)) / 8)
    R = rng.normal(size=(args.n, args.actions))
    Qb = np.tanh(rng.normal(size=(args.batch, args.H)) @ rng.normal(size=(args.H, args.H)) / 8)
    q = Qb[0]

    ci = cbdt.CaseInfluence()
    t_fit = median_time(lambda: ci.fit(Phi, R), args.repeats)
    ci.fit(Phi, R)

    def single():
        ci.coefficients(q)
        ci.top_cases(q, 1, k=10)

    t_single = median_time(single, args.repeats, inner=50)
    t_alpha1 = median_time(lambda: ci.coefficients(q), args.repeats, inner=50)
    t_batch = median_time(lambda: ci.coefficients(Qb), args.repeats) / args.batch
    t_batch_top = median_time(lambda: ci.top_cases(Qb, 1, k=10), args.repeats) / args.batch

    G = Phi.T @ Phi

    def naive():  # what a direct implementation does per query
        a = Phi @ np.linalg.solve(G, q)
        np.argsort(-np.abs(a * R[:, 1]))[:10]

    t_naive = median_time(naive, args.repeats, inner=20)

    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{i['internal_api']}({i['num_threads']} thr)" for i in threadpool_info())
    except Exception:  # pragma: no cover - informational only
        blas = "unknown"
    print(f"cbdt {cbdt.__version__} | numpy {np.__version__} | {platform.processor() or platform.machine()} | BLAS: {blas}")
    print(f"n = {args.n:,}, H = {args.H}, |A| = {args.actions}; medians of {args.repeats} repeats\n")
    rows = [
        ("fit (Gram + Cholesky + readout)", t_fit, None),
        ("single query: coefficients", t_alpha1, t_naive),
        ("single query: coefficients + top-10", t_single, t_naive),
        (f"batch of {args.batch}: coefficients, per query", t_batch, t_naive),
        (f"batch of {args.batch}: coefficients + top-10, per query", t_batch_top, t_naive),
        ("naive np.linalg.solve + argsort, per query", t_naive, t_naive),
    ]
    print(f"{'measurement':<52}{'median (ms)':>12}{'vs naive':>10}")
    for name, t, base in rows:
        ratio = f"{base / t:8.1f}x" if base else ""
        print(f"{name:<52}{t * 1e3:>12.4f}{ratio:>10}")
    print()
    def verdict(t: float, target: float) -> str:
        return "met" if t <= target else f"NOT met ({t / target:.1f}x the target)"

    print(f"target single query (coefficients + top-10) <= 1 ms:     {verdict(t_single, 1e-3)}")
    print(f"target batched, coefficients <= 0.1 ms per query:        {verdict(t_batch, 1e-4)}")
    print(f"target batched, coefficients + top-10 <= 0.1 ms per query: {verdict(t_batch_top, 1e-4)}")
    print("paper (Appendix D): 58.6 ms per query")


if __name__ == "__main__":
    main()
