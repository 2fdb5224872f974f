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

from ..exceptions import InputError
from ..influence import CaseInfluence

__all__ = [
    "with_condition",
    "accuracy_table",
    "scaling_exponents",
    "scaling_verdicts",
    "dask_check",
    "load_benchmark",
]

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
    import mpmath

    with mpmath.workdps(dps):
        P = mpmath.matrix(Phi.tolist())
        z = mpmath.lu_solve(P.T * P, mpmath.matrix(phi.tolist()))
        return np.array([float(v) for v in P * z], dtype=np.float64)


def accuracy_table(
    conds: Sequence[float] = (1e2, 1e4, 1e5, 8e5, 1e6),
    n: int = 200,
    H: int = 10,
    seed: int = 0,
    dps: int = 50,
) -> pd.DataFrame:
    """Relative error of :math:`\\alpha(x)` (eq. 10) against a ``dps``-digit reference.

    For each condition number, :math:`\\Phi` from :func:`with_condition`, one query, and the
    relative 2-norm error of: the normal equations (Cholesky of :math:`G = \\Phi^\\top\\Phi`,
    what ``CaseInfluence`` did before it factored :math:`\\Phi`), ``CaseInfluence`` on an
    in-memory :math:`\\Phi` (the cached dual matrix), and ``CaseInfluence`` on a memmap
    (:math:`\\Phi\\,R^{-1}R^{-\\top}\\varphi`). The reference solves the normal equations in
    ``dps``-digit arithmetic (mpmath), where their :math:`\\mathrm{cond}^2` is harmless.

    Returns
    -------
    DataFrame
        Columns ``cond_phi``, ``normal_equations``, ``cbdt_in_memory``, ``cbdt_memmap``,
        ``eps_cond`` (:math:`\\epsilon\\,\\mathrm{cond}(\\Phi)`) and ``eps_cond2``.
    """
    from scipy import linalg

    rows = []
    rng = np.random.default_rng(seed + 1)
    with tempfile.TemporaryDirectory() as tmp:
        for i, cond in enumerate(conds):
            Phi = with_condition(seed + i, n, H, float(cond))
            phi = rng.normal(size=H)
            ref = _alpha_mp(Phi, phi, dps)
            G = Phi.T @ Phi
            ne = Phi @ linalg.cho_solve(linalg.cho_factor(G), phi)
            path = Path(tmp) / f"phi{i}.npy"
            mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=Phi.shape)
            mm[:] = Phi
            mm.flush()
            del mm
            ones = np.ones((n, 1))
            kw: dict[str, Any] = {"max_condition": 1e30}
            a_mem = CaseInfluence(**kw).fit(Phi, ones).coefficients(phi)
            a_mm = CaseInfluence(**kw).fit(np.load(path, mmap_mode="r"), ones).coefficients(phi)

            def rel(a: np.ndarray, ref: np.ndarray = ref) -> float:
                return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))

            rows.append({
                "cond_phi": float(np.linalg.cond(Phi)),
                "normal_equations": rel(ne),
                "cbdt_in_memory": rel(a_mem),
                "cbdt_memmap": rel(a_mm),
                "eps_cond": _EPS * float(cond),
                "eps_cond2": _EPS * float(cond) ** 2,
            })
    return pd.DataFrame(rows)


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


def scaling_verdicts(df: pd.DataFrame, margin: float = 1.2) -> list[str]:
    """Sentences on where, if anywhere, a Nyström reading beats the exact fit or query.

    A method "wins" at a size when the exact time is more than ``margin`` times its time
    there (the benchmark's medians; smaller gaps are within this machine's noise). Wins that
    hold from some size up to the largest are reported as a trend ("from ... on"); others
    as isolated sizes.

    Returns
    -------
    list of str
    """
    out = []
    for sweep in ("n", "H"):
        sub = df[df["sweep"] == sweep]
        ex = sub[sub["method"] == "exact"].set_index(sweep)
        fl = sub[sub["method"] == "floor (GEMM)"].set_index(sweep)
        for meth in [m for m in sub["method"].unique() if m.startswith("Nystrom")]:
            ny = sub[sub["method"] == meth].set_index(sweep)
            common = ex.index.intersection(ny.index)
            for col, what in (("fit_s", "fit"), ("query_s", "per-query time")):
                ratio = ex.loc[common, col] / ny.loc[common, col]
                wins = ratio[ratio > margin]
                size = "n" if sweep == "n" else "H"
                if wins.empty:
                    out.append(
                        f"{meth}, {what}, growing {size}: never faster than exact by more than "
                        f"{margin}x (exact/Nyström ratio {ratio.min():.2f} to {ratio.max():.2f})."
                    )
                else:
                    sizes = list(ratio.index)
                    tail = [v for i, v in enumerate(sizes) if (ratio.iloc[i:] > margin).all()]
                    lone = [v for v in wins.index if v not in tail]
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
                            + "), which this machine's timing noise can produce"
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
    name : {"scaling", "limits", "memmap_dask"}
        ``benchmarks/results/<name>.csv`` and ``<name>_meta.json`` of the repository (written
        by ``benchmarks/bench_scaling.py``, ``bench_influence.py``, ``bench_memmap_dask.py``).

    Returns
    -------
    (DataFrame, dict)
    """
    import json

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    csv, meta = root / f"{name}.csv", root / f"{name}_meta.json"
    if not csv.exists() or not meta.exists():
        raise InputError(
            f"no stored benchmark {name!r} at {root}: run `make bench` (or the script in "
            "benchmarks/) from a checkout of the repository to write it."
        )
    return pd.read_csv(csv), json.loads(meta.read_text())
