"""Accuracy and scaling of the exact decomposition and its Nyström approximation (ch. 10).

Helpers of chapter 10: the accuracy of the coefficients against a 50-digit reference at a
range of condition numbers (normal equations against the QR-based fit of
:class:`cbdt.CaseInfluence`), the fitted scaling exponents and the verdict sentences of the
scaling benchmark (``benchmarks/bench_scaling.py``), and a small run on a
``dask.distributed.LocalCluster`` compared with the numpy path.
"""

from __future__ import annotations

import re
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
    "fit_notes",
    "ACCURACY_FACTOR",
    "scaling_exponents",
    "nystrom_wins",
    "scaling_verdicts",
    "benchmark_notes",
    "PAPER_APP_D_MS",
    "dask_check",
    "load_benchmark",
]

_EPS = float(np.finfo(np.float64).eps)

#: Appendix D: "the cached online audit averages 58.6 ms per query in our implementation"
#: (Table C3: 58.560 +- 130.335 ms).
PAPER_APP_D_MS: float = 58.56


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


_PATHS = ("cbdt_in_memory", "cbdt_householder", "cbdt_memmap", "cbdt_dask")


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
    need = {"normal_equations", *_PATHS, "eps_cond", "eps_cond2"}
    if not need <= set(acc.columns):
        raise InputError(f"acc needs the columns {sorted(need)} (accuracy_table), got "
                         f"{list(acc.columns)}.")
    f = ACCURACY_FACTOR

    names = {"cbdt_in_memory": "auto", "cbdt_householder": "Householder",
             "cbdt_memmap": "memmap", "cbdt_dask": "Dask"}

    def qr(r: Any) -> str:
        above = [names[c] for c in _PATHS if not getattr(r, c) <= f * r.eps_cond]
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


def scaling_verdicts(df: pd.DataFrame, margin: float = 1.2) -> list[str]:
    """Sentences on where, if anywhere, a Nyström reading beats the exact fit or query.

    A method "wins" at a size when the exact time is more than ``margin`` times its time
    there (the benchmark's medians; smaller gaps are within the benchmark machine's noise). Wins that
    hold from some size up to the largest are reported as a trend ("from ... on"); others
    as isolated sizes (:func:`nystrom_wins`).

    Returns
    -------
    list of str
    """
    wins_all = nystrom_wins(df, margin)
    out = []
    for sweep in ("n", "H"):
        sub = df[df["sweep"] == sweep]
        ex = sub[sub["method"] == "exact"].set_index(sweep)
        fl = sub[sub["method"] == "floor (GEMM)"].set_index(sweep)
        size = "n" if sweep == "n" else "H"
        for _, w in wins_all[wins_all["sweep"] == sweep].iterrows():
            meth, what, ratio, tail, lone = w["method"], w["what"], w["ratio"], w["tail"], w[
                "isolated"]
            meth = meth.replace("Nystrom", "Nyström")  # the benchmark's key, as the text spells it
            if not tail and not lone:
                out.append(
                    f"{meth}, {what}, growing {size}: never faster than exact by more than "
                    f"{margin}x (exact/Nyström ratio {ratio.min():.2f} to {ratio.max():.2f})."
                )
                continue
            parts = []
            if tail:
                parts.append(
                    f"faster than exact from {size}={int(tail[0]):,} on ("
                    + ", ".join(f"{ratio[v]:.1f}x" for v in tail) + ")"
                )
            if lone:
                parts.append(
                    "faster at isolated sizes only, not at the next larger one ("
                    + ", ".join(f"{size}={int(v):,}: {ratio[v]:.1f}x" for v in lone)
                    + "), which the benchmark machine's timing noise can produce"
                )
            out.append(f"{meth}, {what}, growing {size}: " + "; ".join(parts) + ".")
        if not fl.empty and not ex.empty:
            r = (ex["query_s"] / fl["query_s"]).dropna()
            out.append(
                f"Exact per-query time over the GEMM floor, growing {sweep}: {r.min():.2f}x to "
                f"{r.max():.2f}x."
            )
    return out


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
    name : {"scaling", "limits", "memmap_dask", "attribution", "fit"}
        ``benchmarks/results/<name>.csv`` and ``<name>_meta.json`` of the repository (written
        by ``benchmarks/bench_scaling.py``, ``bench_influence.py``, ``bench_memmap_dask.py``,
        ``bench_attribution.py``, ``bench_fit.py``).

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


# ---------------------------------------------------------------------------------------
# the chapter's "beyond the paper" notes, from the stored benchmarks
# ---------------------------------------------------------------------------------------


def _sci(x: float, digits: int = 1) -> str:
    """``x`` as Markdown math, e.g. ``3.5\\times10^{-8}``, ``10^5``, ``8\\times10^5``."""
    x = float(x)
    if x == 0 or not np.isfinite(x):
        return f"{x:g}"
    exp = int(np.floor(np.log10(abs(x))))
    mant = round(x / 10.0**exp, digits)
    if abs(mant) >= 10:
        mant, exp = mant / 10, exp + 1
    e = f"10^{{{exp}}}" if not 0 <= exp <= 9 else f"10^{exp}"
    if mant == 1 and digits == 0:
        return e
    m = f"{mant:.{digits}f}"
    return f"{m}\\times{e}"


def _g(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` significant digits, no trailing zeros (``0.2``, ``58.6``)."""
    return f"{float(x):.{digits}g}"


def _int(v: float) -> str:
    """An integer with a thin-space-free thousands separator, as Markdown math."""
    return f"{int(v):,}".replace(",", "{,}")


def _machine(meta: dict[str, str]) -> str:
    blas = sorted({part.strip().split("/")[-1].split()[0]
                   for part in str(meta.get("blas", "")).split(";") if part.strip()})
    cores = meta.get("cores", "?")
    return (f"{cores} cores ({meta.get('cpu', 'unknown CPU')}"
            + (f", {', '.join(b.replace('openblas', 'OpenBLAS') for b in blas)}" if blas else "")
            + f") on {meta.get('date', 'an unknown date')}")


def _size_range(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    if lo > 0 and hi > 0 and np.log10(lo).is_integer() and np.log10(hi).is_integer() and hi >= 1e4:
        return f"$10^{int(np.log10(lo))}$-$10^{int(np.log10(hi))}$"
    return f"{int(lo):,}-{int(hi):,}"


def _wins_sentence(sc: pd.DataFrame, margin: float) -> str:
    """Where a Nyström reading is faster than exact, in one sentence (:func:`nystrom_wins`)."""
    wins = nystrom_wins(sc, margin)
    fixed = {sw: sorted(sc.loc[sc["sweep"] == sw, "H" if sw == "n" else "n"].unique())
             for sw in ("n", "H")}
    said: dict[str, list[str]] = {}
    lone: dict[str, dict[tuple[str, int], float]] = {}
    for what in ("fit", "per-query time"):
        pos, neg = [], []
        for sweep in ("n", "H"):
            w = wins[(wins["what"] == what) & (wins["sweep"] == sweep)]
            tails = [(int(r["tail"][0]), [float(r["ratio"][v]) for v in r["tail"]])
                     for _, r in w.iterrows() if r["tail"]]
            if tails:
                start = min(t[0] for t in tails)
                rs = [x for t in tails for x in t[1]]
                who = "" if len(tails) == len(w) and all(t[0] == start for t in tails) else (
                    " (not both readings)")
                pos.append(f"from ${sweep} = {_int(start)}$ on{who} ({min(rs):.1f}-"
                           f"{max(rs):.1f}x)")
            else:
                other = "H" if sweep == "n" else "n"
                at = f" at ${other} = {_int(fixed[sweep][0])}$" if len(fixed[sweep]) == 1 else ""
                neg.append(f"never as ${sweep}$ grows{at}")
            for _, r in w.iterrows():
                for v in r["isolated"]:
                    key = (sweep, int(v))
                    d = lone.setdefault(what, {})
                    d[key] = max(d.get(key, 0.0), float(r["ratio"][v]))
        said[what] = pos + neg
    fit = said["fit"]
    query = said["per-query time"]
    q = ("is never faster per query" if not any(p.startswith("from") for p in query)
         else "is faster per query " + ", ".join(query))
    out = (f"Beyond a {margin}x noise margin, a Nyström reading fits faster than exact "
           f"{', '.join(fit)}, and {q}")
    if lone:
        items = []
        for what, label in (("fit", "fit"), ("per-query time", "per query")):
            if what in lone:
                items.append(f"{label} at " + ", ".join(
                    f"${sw} = {_int(v)}$ ({r:.1f}x)" for (sw, v), r in sorted(lone[what].items())))
        out += ("; isolated wins at single sizes, not repeated at the next larger one: "
                + "; ".join(items))
    return out + "."


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
        and the ratio (:func:`fit_notes` gives the reads of ``Phi`` and the Gram products
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


def fit_notes(fit: pd.DataFrame) -> list[str]:
    """Sentences on the fit benchmark, generated from its stored rows: the in-memory ratio
    to the Gram product per width, the memmap's to a streaming read and to its Gram, and the
    Dask cost model checked at the measured size and extrapolated."""
    out = []
    mem = fit[fit["case"] == "in memory"]
    if len(mem):
        parts = [f"{r.ratio:.1f}x at $H = {_int(r.H)}$ ({r.fit_s:.2f} s against "
                 f"{r.floor_s:.2f} s)" for r in mem.itertuples()]
        out.append(
            f"In memory at $n = {_sci(float(mem['n'].iloc[0]), 0)}$ the fit takes "
            + "; ".join(parts)
            + " of numpy's Gram product $\\Phi^\\top\\Phi$ of the same matrix."
        )
    mm = fit[fit["case"] == "memmap"]
    for r in mm.itertuples():
        out.append(
            f"A {r.dtype} memmap of $n = {_sci(float(r.n), 0)}$ rows is fitted in "
            f"{r.fit_s:.2f} s reading the file {getattr(r, 'passes', float('nan')):.3g} times: "
            f"{r.ratio:.1f}x one streaming pass over it ({r.floor_s:.2f} s) and "
            f"{r.ratio_threaded_gram:.1f}x the Gram product of its rows ({r.threaded_gram_s:.2f} s)."
        )
    dk = fit[fit["case"].str.startswith("dask,")]
    model = fit[fit["case"].str.startswith("dask model")]
    if len(dk):
        d = dk.iloc[0]
        out.append(
            f"On a two-process local Dask cluster the fit of $n = {_sci(float(d.n), 0)}$ rows "
            f"takes {d.fit_s:.1f} s; the cost model (per chunk of ${_int(d.chunk_rows)}$ rows: "
            f"read {d.t_read_s:.2f} s, pass 1 {d.t_gram_s:.2f} s, pass 2 {d.t_q_s:.2f} s, two "
            f"reads per chunk, the chunks shared by the workers) predicts {d.floor_s:.1f} s, "
            f"{d.ratio:.1f}x less."
        )
    if len(model):
        parts = [(f"{r.fit_s / 60:.1f} min" if r.fit_s >= 120 else f"{r.fit_s:.0f} s")
                 + f" on {r.case.split(',')[1].strip()}" for r in model.itertuples()]
        out.append(
            f"For $n = {_sci(float(model['n'].iloc[0]), 0)}$ rows the model gives "
            + ", ".join(parts)
            + " (compute alone; the measured local run shows what scheduling and transfers add)."
        )
    return out


def benchmark_notes(
    benchmarks: dict[str, tuple[pd.DataFrame, dict[str, str]]],
    accuracy: pd.DataFrame | None = None,
    margin: float = 1.2,
) -> list[str]:
    """The "beyond the paper" paragraphs of chapter 10, from the stored benchmarks.

    Every number comes from the stored, dated results of ``benchmarks/`` (never from a
    timing of the current run), or from the deterministic :func:`accuracy_table`.

    Parameters
    ----------
    benchmarks : dict
        ``{"scaling": (df, meta), "limits": (df, meta), "memmap_dask": (df, meta)}``, each
        as :func:`load_benchmark` returns it, and optionally ``"fit"`` (:func:`fit_notes`).
    accuracy : DataFrame, optional
        :func:`accuracy_table` (the accuracy paragraph is left out without it).
    margin : float, default=1.2
        A Nyström reading counts as faster when the exact time exceeds ``margin`` times its
        time (:func:`nystrom_wins`).

    Returns
    -------
    list of str
        Markdown paragraphs: a heading line and one bullet per topic.
    """
    missing = {"scaling", "limits", "memmap_dask"} - set(benchmarks)  # "fit" is optional
    if missing:
        raise InputError(f"benchmarks lacks {sorted(missing)}; pass load_benchmark(...) pairs.")
    sc, sc_meta = benchmarks["scaling"]
    lim, lim_meta = benchmarks["limits"]
    mmd, mmd_meta = benchmarks["memmap_dask"]
    machines = list(dict.fromkeys(_machine(m) for m in (sc_meta, lim_meta, mmd_meta)))
    out = [
        f"Beyond the paper (book only): measured by `benchmarks/` on {'; '.join(machines)}, "
        "and stored in `benchmarks/results/`:"
    ]

    if accuracy is not None and len(accuracy):
        acc = accuracy

        def near(c: float) -> pd.Series:
            return acc.loc[(acc["cond_phi"] - c).abs().idxmin()]

        r5 = near(1e5)
        fct = ACCURACY_FACTOR
        paths = [c for c in _PATHS if c in acc.columns]
        qr_ok = bool((acc[paths].max(axis=1) <= fct * acc["eps_cond"]).all())
        ok_ne = acc["eps_cond2"] < 1  # beyond, G is singular in float64
        ne_above = bool((acc["normal_equations"][ok_ne] > acc["eps_cond"][ok_ne]).all())
        ne_within = bool((acc["normal_equations"][ok_ne] <= acc["eps_cond2"][ok_ne]).all())
        n_fail = int((~ok_ne).sum())
        conds = [_sci(c, 0) for c in sorted(set(acc["eps_cond"] / _EPS))]
        dps, n, H = (acc.attrs.get(k) for k in ("dps", "n", "H"))
        widths = ", ".join(_int(h) for h in (H if isinstance(H, list | tuple) else [H])) if H \
            else ""
        setting = ", ".join(s for s in (
            f"{dps}-digit mpmath reference" if dps else "high-precision reference",
            f"$n = {_int(n)}$" if n else "", f"$H = {widths}$" if H else "") if s)
        ne_txt = ("above $\\epsilon\\,\\mathrm{cond}(\\Phi)$ at every one"
                  if ne_above else "not above $\\epsilon\\,\\mathrm{cond}(\\Phi)$ everywhere")
        ne_txt += (" and within $\\epsilon\\,\\mathrm{cond}(\\Phi)^2$" if ne_within
                   else " and above $\\epsilon\\,\\mathrm{cond}(\\Phi)^2$ somewhere")
        if n_fail:
            ne_txt += (f" where $\\epsilon\\,\\mathrm{{cond}}(\\Phi)^2 < 1$ (in the other {n_fail} "
                       f"of {len(acc)} rows $G$ is singular in float64)")
        which = ("in memory (default and Householder), on a memmap and on Dask"
                 if len(paths) == 4 else "in memory and on a memmap")
        out.append(
            f"- **Accuracy** ({setting}; computed in the chapter): at $\\mathrm{{cond}}(\\Phi) = "
            f"{', '.join(conds)}$ the fit's relative error of $\\alpha$ ({which}) is "
            + ("within" if qr_ok else "NOT within")
            + f" ${fct}\\,\\epsilon\\,\\mathrm{{cond}}(\\Phi)$ "
            f"(${_sci(fct * r5['eps_cond'])}$ at $\\mathrm{{cond}}(\\Phi) = "
            f"{_sci(r5['eps_cond'] / _EPS, 0)}$); "
            f"the normal equations' error is {ne_txt} "
            f"(${_sci(r5['eps_cond2'])}$ there). The errors themselves move in their last digits "
            "with the CPU's vector unit and are not stored."
        )

    exps = scaling_exponents(sc)
    sw: dict[str, str] = {}
    for sweep, other in (("n", "H"), ("H", "n")):
        sub = sc[sc["sweep"] == sweep]
        fixed = sorted(sub[other].unique())
        e, f = exps.loc[(sweep, "exact")], exps.loc[(sweep, "floor (GEMM)")]
        fixed_txt = f"${other} = {_int(fixed[0])}$" if len(fixed) == 1 else f"{other} varies"
        sw[sweep] = (
            f"growing ${sweep}$ ({_size_range(list(sub[sweep].unique()))}, {fixed_txt}): fit "
            f"{e['fit']:.2f}, per query {e['query']:.2f} (floor {f['fit']:.2f} / "
            f"{f['query']:.2f})"
        )
    out.append(f"- **Scaling exponents** (log-log slopes of the exact decomposition): {sw['n']}; "
               f"{sw['H']}. " + _wins_sentence(sc, margin))

    nsw = sc[sc["sweep"] == "n"]
    n_max = int(nsw["n"].max())
    big = nsw[nsw["n"] == n_max].set_index("method")
    H_big = int(big["H"].iloc[0])

    def mrow(prefix: str) -> pd.Series:
        hit = mmd[mmd["measurement"].str.startswith(prefix)]
        if hit.empty:
            raise InputError(f"the memmap_dask benchmark has no row {prefix!r}.")
        return hit.iloc[0]

    f64, f32 = mrow("memmap float64: fit"), mrow("memmap float32: fit")
    q64, q32 = mrow("memmap float64: top_cases"), mrow("memmap float32: top_cases")
    dq = mmd[mmd["measurement"].str.startswith("dask") & mmd["measurement"].str.contains(
        "top_cases")].iloc[0]
    workers = re.search(r"\((\d+) local workers\)", dq["measurement"])
    nq = re.search(r"of (\d+) queries", q64["measurement"])
    n_mm = int(float(mmd_meta.get("n", n_max)))
    same_n = n_mm == n_max
    out.append(
        f"- **At $n = {_sci(n_max, 0)}$, $H = {H_big}$**: exact fit "
        f"{big.loc['exact', 'fit_s']:.1f} s in RAM (Gram product "
        f"{big.loc['floor (GEMM)', 'fit_s']:.1f} s), per query "
        f"{big.loc['exact', 'query_s'] * 1e3:.0f} ms (floor "
        f"{big.loc['floor (GEMM)', 'query_s'] * 1e3:.0f} ms); "
        + ("" if same_n else f"at $n = {_sci(n_mm, 0)}$: ")
        + f"memmap fit {f64['seconds']:.1f} s (float64) and {f32['seconds']:.1f} s (float32); "
        f"{nq.group(1) if nq else 'a batch of'} queries' top-10 cases in "
        f"{q64['seconds']:.2f} s (float64 memmap), {q32['seconds']:.2f} s (float32 memmap), "
        f"{dq['seconds']:.2f} s (Dask, {workers.group(1) if workers else 'local'} local workers, "
        f"peak worker RSS {dq['peak_MB'] / 1024:.1f} GB) against a floor of "
        f"{q64['floor_s']:.2f} s."
    )

    single = lim[lim["measurement"].str.startswith("single query") & lim["target"].notna()]
    batch = lim[lim["measurement"].str.startswith("batch of") & lim["target"].notna()]
    shape = re.search(r"\((\d+),(\d+)\)@\((\d+),(\d+)\)", " ".join(lim["floor"].astype(str)))
    where = (f"$n = {_int(shape.group(4))}$, $H = {_int(shape.group(2))}$" if shape
             else "the paper's PJM scale")
    parts = []
    for _, r in single.iterrows():
        parts.append(
            f"one query's coefficients and top-10 cases {r['ratio']:.2f}x a {r['floor']}")
    for _, r in batch.iterrows():
        m = re.search(r"batch of (\d+)", r["measurement"])
        m_q = int(m.group(1)) if m else 1
        parts.append(
            f"{m_q:,} queries' top-10 cases {r['ratio']:.2f}x the bare GEMM of the same shape, "
            f"{r['median_ms'] / m_q:.3f} ms per query against the paper's "
            f"{_g(PAPER_APP_D_MS, 3)} ms")
    text = f"- **App. D extended** ({where}): " + "; ".join(parts) + "."
    two = mmd[mmd["measurement"].str.contains("in RAM: top_cases")]
    if not two.empty:
        r = two.iloc[0]
        mm = re.search(r"n = ([\d,]+) in RAM: top_cases of ([\d,]+) queries", r["measurement"])
        fl = re.search(r"^(\d+) x GEMM \((\d+),", str(r["floor"]))
        if mm:
            n2, q2 = int(mm.group(1).replace(",", "")), int(mm.group(2).replace(",", ""))
            floor_txt = (f"{r['ratio']:.1f}x {fl.group(1)} GEMMs of {fl.group(2)} queries"
                         if fl else f"{r['ratio']:.1f}x its floor")
            text += (
                f" At $n = {_sci(n2, 0)}$, {q2:,} queries' top-10 cases take "
                f"{r['seconds']:.1f} s ({floor_txt}) with a {r['peak_MB']:.0f} MB peak; the "
                f"$(m, n)$ contributions would be {q2 * n2 * 8 / 2**30:.0f} GB."
            )
    out.append(text)
    if "fit" in benchmarks:
        fit, fit_meta = benchmarks["fit"]
        out.append(f"- **The fit against the machine** ({_machine(fit_meta)}): "
                   + " ".join(fit_notes(fit)))
    return out
