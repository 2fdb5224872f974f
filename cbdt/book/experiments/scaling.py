"""Accuracy and scaling of the exact decomposition and its Nyström approximation (ch. 10).

Helpers of chapter 10: the accuracy of the coefficients against a 50-digit reference at a
range of condition numbers (normal equations against the QR-based fit of
:class:`cbdt.CaseInfluence`), the fitted scaling exponents and the verdict sentences of the
scaling benchmark (``benchmarks/bench_scaling.py``), and a small run on a
``dask.distributed.LocalCluster`` compared with the numpy path.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cbdt.exceptions import InputError
from cbdt.influence import CaseInfluence

__all__ = [
    "with_condition",
    "accuracy_table",
    "accuracy_against_bounds",
    "fit_table",
    "ACCURACY_FACTOR",
    "ACCURACY_PATHS",
    "scaling_exponents",
    "nystrom_wins",
    "dask_check",
    "load_benchmark",
    "machine_line",
    "query_sweep_table",
    "MACHINE_COLUMNS",
]

#: The columns every stored benchmark row carries (``benchmarks/_common.machine_columns``):
#: the CPU model, the GEMM peak measured in the run (GFLOP/s) and numpy's BLAS core type.
MACHINE_COLUMNS = ("cpu", "peak_gflops", "blas_core")

_EPS = float(np.finfo(np.float64).eps)


def with_condition(seed: int, n: int, H: int, cond: float) -> np.ndarray:
    """``Phi = U diag(s) V^T`` (n x H) with singular values log-spaced from 1 down to 1/cond.

    Parameters
    ----------
    seed : int
    n, H : int
        ``n >= H``.
    cond : float
        The condition number of ``Phi`` (>= 1).

    Returns
    -------
    ndarray of shape (n, H)
    """
    if not (n >= H >= 1) or not cond >= 1:
        raise InputError(f"need n >= H >= 1 and cond >= 1, got n={n}, H={H}, cond={cond}.")
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(n, H)))
    V, _ = np.linalg.qr(rng.normal(size=(H, H)))
    return (U * np.logspace(0, -np.log10(cond), H)) @ V.T


def _alpha_mp(Phi: np.ndarray, phi: np.ndarray, dps: int) -> np.ndarray:
    """``alpha = Phi (Phi^T Phi)^-1 phi`` with ``Phi^T Phi`` exact and a ``dps``-digit solve.

    Every float64 is an integer times a power of two, so the Gram matrix of the integers
    (Python integers, summed by numpy's object-array product) is exact; only the
    :math:`H\\times H` solve and the final product are rounded, at ``dps`` digits (mpmath).
    """
    import mpmath

    mant, expo = np.frexp(Phi)  # Phi = mant * 2^expo exactly, |mant| in [0.5, 1)
    ints = (mant * 2.0**53).astype(np.int64)  # exact: 53-bit integer mantissas
    shift = expo.astype(np.int64) - 53
    low = int(shift.min()) if Phi.size else 0
    P = np.empty(Phi.shape, dtype=object)  # Phi = P * 2^low, P exact Python integers
    flat = P.reshape(-1)
    for k, (m, e) in enumerate(zip(ints.ravel().tolist(), shift.ravel().tolist(), strict=True)):
        flat[k] = m << (e - low)
    G = P.T.dot(P)  # exact: Phi^T Phi = G * 2^(2 low)
    with mpmath.workdps(dps):
        Gm = mpmath.matrix(G.tolist())
        rhs = mpmath.matrix([mpmath.ldexp(mpmath.mpf(float(v)), -2 * low) for v in phi])
        z = mpmath.lu_solve(Gm, rhs)  # (Phi^T Phi)^-1 phi = z 2^(-2 low)
        zs = [z[j] for j in range(len(phi))]
        unit = mpmath.ldexp(1, low)
        rows = [mpmath.fsum(p * zj for p, zj in zip(row, zs, strict=True)) for row in P.tolist()]
        return np.array([float(r * unit) for r in rows], dtype=np.float64)


#: The coefficients' relative error must stay within this many times eps * cond(Phi).
ACCURACY_FACTOR = 10


def accuracy_table(
    conds: Sequence[float] = (1e2, 1e4, 1e5, 1e7, 1e9, 1e11),
    n: int = 200,
    H: int | Sequence[int] = (10, 64),
    seed: int = 0,
    dps: int = 50,
) -> pd.DataFrame:
    """Relative error of :math:`\\alpha(x)` (eq. 10) against a ``dps``-digit reference, on
    every path of the fit.

    For each width and condition number, :math:`\\Phi` from :func:`with_condition`, one
    query, and the relative 2-norm error of: the normal equations (Cholesky of
    :math:`G = \\Phi^\\top\\Phi`; NaN where that Cholesky fails), ``CaseInfluence`` in memory
    with the default ``factorization="auto"`` (CholeskyQR2, or its fallback: the path taken
    is in ``path_in_memory``), in memory with ``factorization="householder_tsqr"``, on a
    float64 memmap (``path_memmap``) and on a ``dask.array`` of four row chunks (the
    synchronous scheduler; ``path_dask``). ``max_condition`` is lifted so that every row is
    fitted. The reference solves the normal equations in ``dps``-digit arithmetic (mpmath),
    where their :math:`\\mathrm{cond}^2` is harmless.

    Returns
    -------
    DataFrame
        Columns ``H``, ``cond_phi``, ``normal_equations``, ``cbdt_in_memory``,
        ``cbdt_householder``, ``cbdt_memmap``, ``cbdt_dask``, ``path_in_memory``,
        ``path_memmap``, ``path_dask``, ``eps_cond`` (:math:`\\epsilon\\,\\mathrm{cond}(\\Phi)`)
        and ``eps_cond2``; ``attrs`` hold ``n``, ``H`` and ``dps``.
    """
    import dask
    import dask.array as da
    from scipy import linalg

    widths = [int(H)] if np.isscalar(H) else [int(h) for h in H]
    rows = []
    rng = np.random.default_rng(seed + 1)
    kw: dict[str, Any] = {"max_condition": 1e300}
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(scheduler="synchronous"):
        for h in widths:
            for i, cond in enumerate(conds):
                Phi = with_condition(seed + i, n, h, float(cond))
                phi = rng.normal(size=h)
                ref = _alpha_mp(Phi, phi, dps)
                try:
                    ne = Phi @ linalg.cho_solve(linalg.cho_factor(Phi.T @ Phi), phi)
                except linalg.LinAlgError:  # G is not positive definite in float64
                    ne = np.full(n, np.nan)
                path = Path(tmp) / f"phi{h}_{i}.npy"
                mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64,
                                               shape=Phi.shape)
                mm[:] = Phi
                mm.flush()
                del mm
                ones = np.ones((n, 1))
                fits = {
                    "in_memory": CaseInfluence(**kw).fit(Phi, ones),
                    "householder": CaseInfluence(factorization="householder_tsqr", **kw).fit(
                        Phi, ones),
                    "memmap": CaseInfluence(**kw).fit(np.load(path, mmap_mode="r"), ones),
                    "dask": CaseInfluence(**kw).fit(
                        da.from_array(Phi, chunks=(-(-n // 4), h)), ones),
                }

                def rel(a: np.ndarray, ref: np.ndarray = ref) -> float:
                    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))

                row: dict[str, Any] = {
                    "H": h,
                    "cond_phi": float(np.linalg.cond(Phi)),
                    "normal_equations": rel(ne),
                }
                row |= {f"cbdt_{k}": rel(f.coefficients(phi)) for k, f in fits.items()}
                row |= {f"path_{k}": fits[k].factorization_ for k in ("in_memory", "memmap",
                                                                       "dask")}
                row |= {"eps_cond": _EPS * float(cond), "eps_cond2": _EPS * float(cond) ** 2}
                rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs.update(n=int(n), H=widths, dps=int(dps))
    return out


#: The fit paths of the accuracy table (columns of :func:`accuracy_table`).
ACCURACY_PATHS = ("cbdt_in_memory", "cbdt_householder", "cbdt_memmap", "cbdt_dask")


def accuracy_against_bounds(acc: pd.DataFrame) -> pd.DataFrame:
    """The accuracy table as verdicts against the rounding bounds, the same on every CPU.

    A rounding error's last digits depend on the order in which the CPU's vector unit and
    BLAS kernels add (AVX-512, AVX2, generic SSE, NEON), so the book shows each error against
    its bound rather than its value: the QR-based fit against
    :math:`\\epsilon\\,\\mathrm{cond}(\\Phi)`, the normal equations against
    :math:`\\epsilon\\,\\mathrm{cond}(\\Phi)` and :math:`\\epsilon\\,\\mathrm{cond}(\\Phi)^2`.
    The bounds come from the condition number asked of :func:`with_condition`, not from a
    measurement.

    Parameters
    ----------
    acc : DataFrame
        Output of :func:`accuracy_table`.

    Returns
    -------
    DataFrame
        One row per width and condition number, all strings: ``H``, ``cond(Φ)``, ``bound 10
        ε·cond(Φ)`` (:data:`ACCURACY_FACTOR`), ``path taken`` (by the default fit in memory: CholeskyQR2, or beyond it, see
        :func:`_path_group`), ``cbdt, 4 paths`` (``all within`` that bound, or the paths
        ``ABOVE`` it: auto, Householder, memmap, Dask),
        ``bound ε·cond(Φ)²`` and ``normal equations`` (``between the bounds``,
        ``below ε·cond(Φ)``, ``above ε·cond(Φ)²``, or ``no digit left`` where
        :math:`\\epsilon\\,\\mathrm{cond}(\\Phi)^2 \\ge 1`).
    """
    need = {"normal_equations", *ACCURACY_PATHS, "eps_cond", "eps_cond2"}
    if not need <= set(acc.columns):
        raise InputError(f"acc needs the columns {sorted(need)} (accuracy_table), got "
                         f"{list(acc.columns)}.")
    f = ACCURACY_FACTOR

    names = {"cbdt_in_memory": "auto", "cbdt_householder": "Householder",
             "cbdt_memmap": "memmap", "cbdt_dask": "Dask"}

    def qr(r: Any) -> str:
        above = [names[c] for c in ACCURACY_PATHS if not getattr(r, c) <= f * r.eps_cond]
        return "all within" if not above else "ABOVE: " + ", ".join(above)

    def ne(err: float, b1: float, b2: float) -> str:
        if b2 >= 1:  # G is singular to working precision: whether its Cholesky even runs
            return "no digit left"  # is a rounding accident
        if err <= b1:
            return "below ε·cond(Φ)"
        return "between the bounds" if err <= b2 else "above ε·cond(Φ)²"

    rows = [{
        "H": str(r.H),
        "cond(Φ)": f"{r.eps_cond / _EPS:.0e}",
        f"bound {f} ε·cond(Φ)": f"{f * r.eps_cond:.1e}",
        "path taken": _path_group(r.path_in_memory),
        "cbdt, 4 paths": qr(r),
        "bound ε·cond(Φ)²": f"{r.eps_cond2:.1e}",
        "normal equations": ne(r.normal_equations, r.eps_cond, r.eps_cond2),
    } for r in acc.itertuples()]
    return pd.DataFrame(rows)


_PATH_NAMES = {"cholesky_qr2": "CholeskyQR2", "cholesky_qr3": "CholeskyQR3",
               "householder_tsqr": "Householder (fallback)"}


def _path_group(path: str) -> str:
    """The path of the default fit as the verdict table shows it. Beyond CholeskyQR2's range
    whether a Cholesky factorisation of a Gram matrix of condition number above 1/eps
    succeeds is itself a rounding accident, so CholeskyQR3 and the Householder fallback are
    shown together (the measured table names the one taken on this machine)."""
    return "CholeskyQR2" if path == "cholesky_qr2" else "CQR3 / Householder"


def scaling_exponents(df: pd.DataFrame) -> pd.DataFrame:
    """Least-squares slopes of log time against log n (or log H), per sweep and method.

    Parameters
    ----------
    df : DataFrame
        ``benchmarks/results/scaling.csv`` (columns ``sweep, n, H, method, fit_s, query_s``).

    Returns
    -------
    DataFrame
        Indexed by ``(sweep, method)``: ``fit`` and ``query`` exponents, ``points``.
    """
    need = {"sweep", "n", "H", "method", "fit_s", "query_s"}
    if not need <= set(df.columns):
        raise InputError(f"df needs the columns {sorted(need)}, got {list(df.columns)}.")
    rows = []
    for (sweep, meth), g in df.groupby(["sweep", "method"], sort=False):
        x = np.log(g[sweep].to_numpy(float))
        row: dict[str, Any] = {"sweep": sweep, "method": meth, "points": len(g)}
        for col, name in (("fit_s", "fit"), ("query_s", "query")):
            y = np.log(g[col].to_numpy(float))
            row[name] = float(np.polyfit(x, y, 1)[0]) if len(g) >= 2 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows).set_index(["sweep", "method"])


def nystrom_wins(df: pd.DataFrame, margin: float = 1.2) -> pd.DataFrame:
    """Where a Nyström reading beats the exact fit or query in a scaling benchmark.

    A method "wins" at a size when the exact time is more than ``margin`` times its time
    there (the benchmark's medians; smaller gaps are within the benchmark machine's noise). Wins that
    hold from some size up to the largest form the *tail* (a trend, "from ... on"); the
    others are *isolated*.

    Parameters
    ----------
    df : DataFrame
        ``benchmarks/results/scaling.csv`` (columns ``sweep, n, H, method, fit_s, query_s``).
    margin : float, default=1.2

    Returns
    -------
    DataFrame
        One row per (sweep, Nyström method, measure): ``sweep`` (``"n"`` or ``"H"``),
        ``method``, ``what`` (``"fit"`` or ``"per-query time"``), ``ratio`` (a Series of
        exact/Nyström time ratios indexed by size), ``tail`` (sizes from which every ratio
        exceeds ``margin``) and ``isolated`` (the other sizes where it does).
    """
    need = {"sweep", "n", "H", "method", "fit_s", "query_s"}
    if not need <= set(df.columns):
        raise InputError(f"df needs the columns {sorted(need)}, got {list(df.columns)}.")
    rows = []
    for sweep in ("n", "H"):
        sub = df[df["sweep"] == sweep]
        ex = sub[sub["method"] == "exact"].set_index(sweep)
        for meth in [m for m in sub["method"].unique() if m.startswith("Nystrom")]:
            ny = sub[sub["method"] == meth].set_index(sweep)
            common = ex.index.intersection(ny.index)
            for col, what in (("fit_s", "fit"), ("query_s", "per-query time")):
                ratio = ex.loc[common, col] / ny.loc[common, col]
                wins = ratio[ratio > margin]
                sizes = list(ratio.index)
                tail = [v for i, v in enumerate(sizes) if (ratio.iloc[i:] > margin).all()]
                rows.append({
                    "sweep": sweep, "method": meth, "what": what, "ratio": ratio,
                    "tail": tail, "isolated": [v for v in wins.index if v not in tail],
                })
    return pd.DataFrame(rows)


def dask_check(
    n: int = 20_000, H: int = 16, chunks: int = 4_000, n_queries: int = 20, seed: int = 0
) -> dict[str, Any]:
    """Fit and query a dask ``Phi`` on a local cluster; compare with the numpy path.

    Starts a ``dask.distributed.LocalCluster`` (2 worker processes, 1 thread each, loopback
    only), fits ``CaseInfluence`` on ``da.from_array(Phi, chunks=(chunks, H))`` and on the
    numpy array, and compares readout, coefficients, top-10 cases and audit signals.

    Returns
    -------
    dict
        ``workers``, ``chunks``, ``max_abs_diff`` of each quantity, ``same_top_cases``.
    """
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    rng = np.random.default_rng(seed)
    Phi = np.tanh(rng.normal(size=(n, H)) @ rng.normal(size=(H, H)) / 4)
    R = rng.normal(size=(n, 3))
    Q = np.tanh(rng.normal(size=(n_queries, H)) @ rng.normal(size=(H, H)) / 4)
    ref = CaseInfluence().fit(Phi, R)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        X = da.from_array(Phi, chunks=(chunks, H))
        ci = CaseInfluence().fit(X, R)
        a, b = ci.top_cases(Q, 1, k=10), ref.top_cases(Q, 1, k=10)
        ea, eb = ci.explain(Q, k=10), ref.explain(Q, k=10)
        res = {
            "workers": len(client.scheduler_info()["workers"]),
            "chunks": len(X.chunks[0]),
            "readout": float(np.abs(ci.readout_ - ref.readout_).max()),
            "coefficients": float(np.abs(ci.coefficients(Q) - ref.coefficients(Q)).max()),
            "top10_contributions": float(np.abs(a.contributions - b.contributions).max()),
            "signals": float(np.abs(ea.signals.to_numpy(float) - eb.signals.to_numpy(float)).max()),
            "same_top_cases": bool(np.array_equal(a.indices, b.indices)),
        }
    return res


def load_benchmark(name: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """A stored benchmark table and its machine description.

    Parameters
    ----------
    name : {"scaling", "limits", "query_sweep", "memmap_dask", "attribution", "fit"}
        ``benchmarks/results/<name>.csv`` and ``<name>_meta.json`` of the repository (written
        by ``benchmarks/bench_scaling.py``, ``bench_influence.py`` (``limits`` and
        ``query_sweep``), ``bench_memmap_dask.py``, ``bench_attribution.py``,
        ``bench_fit.py``).

    Returns
    -------
    (DataFrame, dict)
    """
    import json

    root = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
    csv, meta = root / f"{name}.csv", root / f"{name}_meta.json"
    if not csv.exists() or not meta.exists():
        raise InputError(
            f"no stored benchmark {name!r} at {root}: run `make bench` (or the script in "
            "benchmarks/) from a checkout of the repository to write it."
        )
    return pd.read_csv(csv), json.loads(meta.read_text())


def query_sweep_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """The single and small-batch query sweep (``benchmarks/bench_influence.py``) as the
    appendix shows it: one row per memory size and storage, one column per (queries, call),
    the time over its floor measured in the same run (one float64 GEMV, or a small GEMM, +
    ``argpartition`` in memory; one streaming pass over the file for a memmap).

    Parameters
    ----------
    sweep : DataFrame
        ``benchmarks/results/query_sweep.csv``.

    Returns
    -------
    DataFrame
        Indexed by ``("n", "storage")`` in the stored order; NaN where a call was not timed
        (``explain`` on the memmap).
    """
    need = {"n", "storage", "m", "call", "ratio"}
    if not need <= set(sweep.columns):
        raise InputError(f"query_sweep_table needs the columns {sorted(need)} of "
                         "benchmarks/results/query_sweep.csv.")
    col = sweep["m"].map(lambda m: f"{m} quer{'y' if m == 1 else 'ies'}") + ": " + sweep["call"]
    out = sweep.assign(col=col).pivot_table(
        index=["n", "storage"], columns="col", values="ratio", sort=False)
    out.columns.name = None
    return out[list(dict.fromkeys(col))]


def machine_line(df: pd.DataFrame, meta: dict[str, str]) -> str:
    """Where a stored benchmark ran, read from its rows: the date and core count of the run
    (``meta``), and the CPU model, GEMM peak and BLAS core type that every row carries
    (:data:`MACHINE_COLUMNS`). A table whose rows come from more than one machine or run
    (``fit.csv`` keeps its file rows when its in-memory rows are re-measured) names each,
    with its number of rows, in the order the rows first appear.

    Parameters
    ----------
    df : DataFrame
        A table of :func:`load_benchmark`.
    meta : dict
        Its machine description (``date``, ``cores``).

    Returns
    -------
    str
        E.g. ``"benchmark of 2026-11-28, 2 cores: Intel(R) Xeon(R) Processor, openblas
        SkylakeX, GEMM peak 180 GFLOP/s"``.

    Raises
    ------
    InputError
        If the rows do not carry the machine columns (a table written before they were
        added: re-run its script in ``benchmarks/``).
    """
    missing = [c for c in MACHINE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"the stored benchmark rows lack the machine columns {missing}: they were written "
            "by an older script. Re-run it (`make bench`, or the script in benchmarks/)."
        )
    rows = df[list(MACHINE_COLUMNS)].astype({"peak_gflops": float}).round({"peak_gflops": 0})
    counts = rows.value_counts(sort=False)
    machines = rows.drop_duplicates()  # in the order the rows first appear
    parts = []
    for key in machines.itertuples(index=False, name=None):
        cpu, peak, core = key
        part = f"{cpu}, {core}, GEMM peak {peak:.0f} GFLOP/s"
        if len(machines) > 1:
            count = int(counts.loc[key])
            part += f" ({count} row{'s' if count != 1 else ''})"
        parts.append(part)
    return f"benchmark of {meta['date']}, {meta['cores']} cores: " + "; ".join(parts)


# ---------------------------------------------------------------------------------------
# the chapter's "beyond the paper" notes, from the stored benchmarks
# ---------------------------------------------------------------------------------------


def fit_table(fit: pd.DataFrame) -> pd.DataFrame:
    """The stored fit benchmark (``benchmarks/bench_fit.py``) as the chapter shows it.

    Parameters
    ----------
    fit : DataFrame
        ``benchmarks/results/fit.csv``.

    Returns
    -------
    DataFrame
        One row per measured case (the model's extrapolations left out): what, n, H, the
        fit's time, its floor (the Gram product, a streaming pass or the Dask cost model)
        and the ratio (:func:`cbdt.book.claims.ch10_nystrom.fit_notes` gives the reads of ``Phi`` and the Gram products
        on threads).
    """
    need = {"case", "dtype", "n", "H", "floor", "floor_s", "threaded_gram_s", "fit_s",
            "ratio", "factorization"}
    if not need <= set(fit.columns):
        raise InputError(f"fit needs the columns {sorted(need)} (bench_fit.py), got "
                         f"{list(fit.columns)}.")
    rows = fit[fit["repeats"] > 0]
    short = {"numpy Phi.T @ Phi": "Gram product", "one streaming pass": "streaming pass"}
    return pd.DataFrame({
        "case": [f"{c} ({d})" for c, d in zip(rows["case"], rows["dtype"], strict=True)],
        "n": [f"{int(v):,}" for v in rows["n"]],
        "H": [f"{int(v):,}" for v in rows["H"]],
        "fit (s)": rows["fit_s"].to_numpy(),
        "floor": [short.get(f, "cost model" if f.startswith("cost model") else f)
                  for f in rows["floor"]],
        "floor (s)": rows["floor_s"].to_numpy(),
        "fit / floor": rows["ratio"].to_numpy(),
    })


