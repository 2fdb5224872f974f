"""Per-query attribution time of the five methods of Table 1 (Sec. 5.3, Appendix D).

Two scales, measured in one run:

* n = 500: the synthetic CBDT task (seed 0), the trained network's representation (H = 64);
* n = 14,000, H = 64: random tanh features, random returns and 10 random "checkpoints" for
  TracIn (timing does not depend on what the numbers mean).

Every method is fitted first (its ``fit`` caches everything that does not depend on the
query); then each query is audited alone - all n per-case contributions to one action's
score, from the query's representation(s) - and the mean time per query over ``--queries``
queries is taken; the table reports the median over ``--repeats`` passes and the ratio to
the fastest of the five methods. ``Ours (alpha), per-query solve`` is
``ExactCoefficient(precompute=False)``, for reference: the same exact contributions without
any cached dual matrix - per query two triangular solves with the probe's (H+1) x (H+1) QR
factor R (R^T R = G~), z = R^-1 R^-T phi~(x), and one matrix-vector product with the kept
augmented training representations Phi~ = [Phi, 1], alpha(x) = Phi~ z.

BLAS runs single-threaded (``OPENBLAS_NUM_THREADS=1`` etc. unless already set): one query is
a single (n, H) matrix-vector product, which threads do not speed up but which is very
sensitive to thread contention on a shared machine; every method runs under the same setting.

Writes ``benchmarks/results/attribution.csv`` (one row per scale and method: per-query and fit
milliseconds, ratio to the fastest of the five methods) and ``attribution_meta.json`` (date, CPU,
cores, BLAS, and the settings of the run; every row also carries the CPU model, the GEMM peak
measured in the run at its BLAS setting and numpy's BLAS core type); chapter 06 reads them for its per-query cost claim
(``cbdt.book.experiments.scaling.load_benchmark("attribution")``).

Run: ``python benchmarks/bench_attribution.py [--repeats 7] [--queries 50] [--skip-synthetic]
[--no-save]`` (``--no-save``: print only, keep the stored results).
Target (issue 3): the exact coefficient within 2x of the fastest baseline per query (the
paper reports 170x).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy is imported

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from _common import gemm_peak_gflops, machine, machine_columns  # noqa: E402

import cbdt  # noqa: E402
from cbdt.baselines import (  # noqa: E402
    ExactCoefficient,
    HeadCheckpoint,
    InfluenceFunction,
    InnerProduct,
    RepresenterPoint,
    TracIn,
)
from cbdt.book.experiments.synthetic import median_per_query  # noqa: E402

RESULTS = Path(__file__).parent / "results"
NOCACHE = "Ours (alpha), per-query solve"
ORDER = (
    "Ours (alpha)",
    "Representer Point",
    "TracIn",
    "Influence Functions",
    "Inner product",
    NOCACHE,
)


def fit_all(
    Phi: np.ndarray,
    R: np.ndarray,
    checkpoints: list[HeadCheckpoint],
    weight: np.ndarray,
    bias: np.ndarray,
) -> tuple[dict[str, object], dict[str, float]]:
    """Fit every method, returning the fitted methods and their fit (cache) times in s."""
    makers: dict[str, Callable[[], object]] = {
        "Ours (alpha)": lambda: ExactCoefficient().fit(Phi, R),
        "Representer Point": lambda: RepresenterPoint().fit(Phi, R),
        "TracIn": lambda: TracIn().fit(checkpoints, R),
        "Influence Functions": lambda: InfluenceFunction().fit(Phi, R, weight=weight, bias=bias),
        "Inner product": lambda: InnerProduct().fit(Phi, R),
        NOCACHE: lambda: ExactCoefficient(precompute=False).fit(Phi, R),
    }
    methods, fit_s = {}, {}
    for name, make in makers.items():
        t0 = time.perf_counter()
        methods[name] = make()
        fit_s[name] = time.perf_counter() - t0
    return methods, fit_s


def time_all(
    methods: dict[str, object],
    phi: np.ndarray,
    phi_t: np.ndarray,
    acts: np.ndarray,
    n_queries: int,
    repeats: int,
) -> dict[str, float]:
    """Median per-query seconds of every method (single queries, one action each)."""
    out = {}
    for name, meth in methods.items():
        if isinstance(meth, TracIn):
            out[name] = median_per_query(
                lambda j, m=meth: m.contributions(phi_t[:, j], acts[j]), n_queries, repeats
            )
        else:
            out[name] = median_per_query(
                lambda j, m=meth: m.contributions(phi[j], acts[j]), n_queries, repeats
            )
    return out


def synthetic_case(n_queries: int) -> tuple:
    """The n = 500 synthetic task (seed 0) with its trained network."""
    from cbdt.book.experiments.synthetic import synthetic_run

    run = synthetic_run(0)
    net, d = run.network, run.data
    cks = [
        HeadCheckpoint(net.represent(d.X_train, checkpoint=t), c.head_weight, c.head_bias, c.lr)
        for t, c in enumerate(net.checkpoints_)
    ]
    Xq = d.X_test[:n_queries]
    return (
        run.Phi_train,
        d.R_train,
        cks,
        net.head_weight_,
        net.head_bias_,
        net.represent(Xq),
        net.represent_checkpoints(Xq),
        net.decide(Xq),
    )


def random_case(n: int, H: int, A: int, T: int, n_queries: int, seed: int = 0) -> tuple:
    """Random tanh features at scale n x H, T random checkpoints."""
    rng = np.random.default_rng(seed)

    def feats(m: int) -> np.ndarray:
        return np.tanh(rng.normal(size=(m, H)))

    Phi = feats(n)
    R = Phi @ rng.normal(size=(H, A)) / np.sqrt(H) + 0.1 * rng.normal(size=(n, A))
    W, b = rng.normal(size=(A, H)) / np.sqrt(H), rng.normal(size=A)
    cks = [
        HeadCheckpoint(np.tanh(np.arctanh(np.clip(Phi, -0.999, 0.999)) + 0.1 * t), W, b, 1e-2)
        for t in range(T)
    ]
    phi = feats(n_queries)
    phi_t = np.stack([phi] * T)
    acts = rng.integers(0, A, size=n_queries)
    return Phi, R, cks, W, b, phi, phi_t, acts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--n", type=int, default=14_000)
    ap.add_argument("--H", type=int, default=64)
    ap.add_argument("--checkpoints", type=int, default=10)
    ap.add_argument("--skip-synthetic", action="store_true", help="skip the n = 500 task")
    ap.add_argument("--no-save", action="store_true", help="do not write benchmarks/results")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    cases: list[tuple[str, tuple]] = []
    if not args.skip_synthetic:
        cases.append(("n=500 (synthetic)", synthetic_case(args.queries)))
    cases.append(
        (
            f"n={args.n:,}",
            random_case(args.n, args.H, 3, args.checkpoints, args.queries),
        )
    )

    results: dict[str, dict[str, float]] = {}
    fits: dict[str, dict[str, float]] = {}
    for label, (Phi, R, cks, W, b, phi, phi_t, acts) in cases:
        methods, fit_s = fit_all(Phi, R, cks, W, b)
        results[label] = time_all(methods, phi, phi_t, acts, len(acts), args.repeats)
        fits[label] = fit_s

    print(
        f"cbdt {cbdt.__version__} | numpy {np.__version__} | torch {torch.__version__} | "
        f"{platform.processor() or platform.machine()} | torch threads "
        f"{torch.get_num_threads()} | OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
    )
    print(
        f"per-query attribution after caching: single queries, all n contributions to one "
        f"action; medians of {args.repeats} passes over {args.queries} queries; H = "
        f"{args.H}, |A| = 3, TracIn T = {args.checkpoints} checkpoints\n"
    )
    header = f"{'method':<32}"
    for label in results:
        header += f" | {label + ' ms':>20} {'ratio':>6} {'fit ms':>9}"
    print(header)
    print("-" * len(header))
    fastest = {lab: min(v for k, v in r.items() if k != NOCACHE) for lab, r in results.items()}
    for name in ORDER:
        line = f"{name:<32}"
        for label, r in results.items():
            line += (
                f" | {r[name] * 1e3:>20.4f} {r[name] / fastest[label]:>5.2f}x"
                f" {fits[label][name] * 1e3:>9.2f}"
            )
        print(line)
    print()
    for label, r in results.items():
        ratio = r["Ours (alpha)"] / fastest[label]
        verdict = "meets" if ratio <= 2 else "MISSES"
        print(
            f"{label}: exact coefficient {ratio:.2f}x the fastest method ({verdict} the 2x target)"
        )
    if args.no_save:
        return
    rows = []
    for (label, case), (_, r) in zip(cases, results.items(), strict=True):
        n_cases, width = case[0].shape
        for name in ORDER:
            rows.append(
                dict(
                    case=label,
                    n=n_cases,
                    H=width,
                    method=name,
                    query_ms=r[name] * 1e3,
                    ratio=r[name] / fastest[label],
                    fit_ms=fits[label][name] * 1e3,
                )
            )
    peak = gemm_peak_gflops()  # at the run's BLAS setting (one thread)
    for r in rows:
        r |= machine_columns(peak)
    meta = machine()
    meta.update(
        peak_gflops=f"{peak:.1f}",
        repeats=str(args.repeats),
        queries=str(args.queries),
        checkpoints=str(args.checkpoints),
        blas_threads=os.environ["OPENBLAS_NUM_THREADS"],
        ratio="query_ms divided by the fastest of the five methods of the same case",
        runtime_s=f"{time.perf_counter() - t_start:.0f}",
    )
    RESULTS.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(RESULTS / "attribution.csv", index=False)
    (RESULTS / "attribution_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {RESULTS / 'attribution.csv'}")


if __name__ == "__main__":
    main()
