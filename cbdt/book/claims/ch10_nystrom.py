"""Chapter 10, Nystrom and scaling: the paper beside the book.

:func:`chapter_claims` phrases :mod:`cbdt.book.experiments.nystrom`'s results as the chapter's
claims; :func:`scaling_verdicts`, :func:`scaling_notes`, :func:`fit_notes` and
:func:`benchmark_notes` phrase the stored benchmarks of :mod:`cbdt.book.experiments.scaling`
(the last two in the optional appendix, ``notebooks/12_engineering_appendix``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cbdt.exceptions import InputError
from cbdt.nystrom import DEFAULT_RIDGE_MULTIPLE

from ..experiments.nystrom import PAPER_TABLE_C2
from ..experiments.scaling import (
    ACCURACY_FACTOR,
    ACCURACY_PATHS,
    nystrom_wins,
    scaling_exponents,
)
from ..experiments.synthetic import SyntheticConfig
from . import TRAINED_TOLERANCE, ChapterClaims, Claim, interval_status, mean_ci_math

__all__ = [
    "chapter_claims",
    "PAPER_APP_D_MS",
    "scaling_verdicts",
    "fit_notes",
    "query_sweep_notes",
    "benchmark_notes",
    "scaling_notes",
    "APPENDIX_NOTE",
]

_EPS = float(np.finfo(np.float64).eps)


def _d_eff_range(ranks: pd.DataFrame, H: int) -> tuple[float, float]:
    g = ranks[ranks["H"] == H]["d_eff"]
    if g.empty:
        raise InputError(f"ranks has no row for H = {H}.")
    return float(g.min()), float(g.max())


def _c2_row(summary: pd.DataFrame, method: str, H: int) -> pd.Series:
    try:
        return summary.loc[(method, H)]
    except KeyError as err:
        raise InputError(f"summary has no row ({method!r}, {H}); pass summarize_nystrom of "
                         "nystrom_table for both methods.") from err


def _agreement_note(summary: pd.DataFrame, ranks: pd.DataFrame, widths: Sequence[int],
                    k: int) -> str:
    below, above, around = [], [], []
    for H in widths:
        lo, hi = _d_eff_range(ranks, H)
        m = int(_c2_row(summary, "features", H)["rank"])
        ov = float(_c2_row(summary, "features", H)[f"top{k}_mean"])
        item = (H, lo, hi, m, ov)
        (below if hi < m else above if lo > m else around).append(item)

    def span(items: list[tuple[int, float, float, int, float]]) -> str:
        return " and ".join(f"{lo:.0f}-{hi:.0f} at $H = {H}$" for H, lo, hi, _, _ in items)

    def cols(items: list[tuple[int, float, float, int, float]]) -> str:
        return " and ".join(str(m) for *_, m, _ in items)

    def ovs(items: list[tuple[int, float, float, int, float]]) -> str:
        return " and ".join(f"{ov:.3f}" for *_, ov in items)

    parts = [
        "Why the agreement differs: a rank-$m$ Nyström approximation must capture the "
        "directions of $G$ that the ridge leaves active, the effective dimension "
        "$d_\\lambda = \\sum_j\\sigma_j^2/(\\sigma_j^2+\\lambda)$, not all $H$ of them."
    ]
    if below:
        parts.append(
            f"On this task $d_\\lambda$ is {span(below)} (across seeds), below the "
            f"{cols(below)} sampled columns, so the approximation is nearly exact there "
            f"(Top-{k} overlap {ovs(below)})."
        )
    if above:
        parts.append(
            f"It is {span(above)}, above the {cols(above)} sampled columns, where the overlap "
            f"is {ovs(above)}."
        )
    if around:
        parts.append(
            f"It is {span(around)}, about the {cols(around)} sampled columns (overlap "
            f"{ovs(around)})."
        )
    parts.append(
        "On a representation whose effective dimension exceeds $H/2$ the approximation stays "
        "coarse at every width (exercise 10.2). The paper's network, data and $\\lambda$ are "
        "not given."
    )
    return " ".join(parts)


def chapter_claims(
    summary: pd.DataFrame,
    ranks: pd.DataFrame,
    benchmarks: dict[str, tuple[pd.DataFrame, dict[str, str]]],
    accuracy: pd.DataFrame | None = None,
    *,
    n_train: int | None = None,
    k: int = 30,
    margin: float = 1.2,
) -> ChapterClaims:
    """Chapter 10's rows of the reproducibility page: Table C2 and App. C.7 beside the book.

    Built from results the chapter has already computed (nothing is re-run): the agreement
    columns of Table C2 from :func:`cbdt.book.experiments.nystrom.summarize_nystrom`, the reasons from the effective
    dimensions of the chapter's representations, and every timing from the *stored, dated*
    benchmarks (:func:`cbdt.book.experiments.scaling.load_benchmark`), never from a timing of
    the current run.

    Parameters
    ----------
    summary : DataFrame
        :func:`cbdt.book.experiments.nystrom.summarize_nystrom` of :func:`cbdt.book.experiments.nystrom.nystrom_table` for ``method="features"`` and
        ``"cases"``, indexed by ``(method, H)``.
    ranks : DataFrame
        One row per (H, seed) with the effective dimension ``d_eff`` of :math:`G` at the
        ridge both estimators use.
    benchmarks : dict
        ``{"scaling": (df, meta)}``, optionally with ``"limits"``, ``"memmap_dask"`` and
        ``"fit"``, as :func:`~cbdt.book.experiments.scaling.load_benchmark` returns them. The
        claims need ``"scaling"`` only. With ``"limits"`` and ``"memmap_dask"`` the notes are
        all of :func:`benchmark_notes`; without them (chapter 10, whose engineering benchmarks
        moved to the optional appendix) they are :func:`scaling_notes`.
    accuracy : DataFrame, optional
        :func:`~cbdt.book.experiments.scaling.accuracy_table`, for the accuracy note (used
        with the full set of benchmarks only).
    n_train : int, optional
        Training cases of the Table C2 runs (default: :class:`cbdt.book.experiments.synthetic.SyntheticConfig`'s).
    k : int, default=30
        The top-k overlap compared (Table C2 reports top-30).
    margin : float, default=1.2
        A Nyström time counts as a gain when the exact time exceeds ``margin`` times it
        (smaller gaps are within the benchmark machine's timing noise).

    Returns
    -------
    ChapterClaims

    Notes
    -----
    Status rules: a Table C2 value ``agrees`` only when the paper's value lies in the
    book's 95% interval (:func:`cbdt.book.claims.interval_status`); the qualitative claims
    (overlap rising with :math:`H`, per-query gains beyond ``margin``) at most ``agrees in
    shape``; a timing, a single stored median without an interval, never ``agrees``: it
    ``differs`` when more than 2x from the paper's, else it is ``not comparable``.
    """
    if "scaling" not in benchmarks:
        raise InputError("benchmarks needs the stored 'scaling' benchmark (load_benchmark).")
    n_train = SyntheticConfig().n_train if n_train is None else int(n_train)
    widths = sorted(int(H) for H in PAPER_TABLE_C2
                    if ("features", H) in summary.index and ("cases", H) in summary.index)
    if not widths:
        raise InputError("summary holds none of Table C2's widths for both methods.")
    feat = {H: _c2_row(summary, "features", H) for H in widths}
    case = {H: _c2_row(summary, "cases", H) for H in widths}
    paper = {H: PAPER_TABLE_C2[H] for H in widths}
    n_seeds = int(max(int(feat[H]["n"]) for H in widths))
    top = f"top{k}"
    rows: list[Claim] = []

    for H in widths:
        f, c, p = feat[H], case[H], paper[H]
        status = interval_status(p["top30"], f[f"{top}_mean"], f[f"{top}_ci"])
        lo, hi = _d_eff_range(ranks, H)
        m = int(f["rank"])
        rel = "below" if hi < m else "above" if lo > m else "about"
        reason = (f"effective dimension $d_\\lambda$ = {lo:.0f}-{hi:.0f}, {rel} the $H/2 = {m}$ "
                  "sampled columns (note below)")
        if status == "agrees":
            reason = ("the features reading (the paper's) holds the paper's value; the cases "
                      f"reading {'too' if interval_status(p['top30'], c[f'{top}_mean'], c[f'{top}_ci']) == 'agrees' else 'does not'}; "
                      + reason)
        rows.append(Claim(
            f"Top-{k} overlap, $H = {H}$",
            mean_ci_math(p["top30"], p["top30_ci"]),
            f"{mean_ci_math(f[f'{top}_mean'], f[f'{top}_ci'])} (features), "
            f"{mean_ci_math(c[f'{top}_mean'], c[f'{top}_ci'])} (cases)",
            status,
            reason,
        ))

    outside = [H for H in widths if interval_status(
        paper[H]["pearson"], feat[H]["pearson_mean"], feat[H]["pearson_ci"]) == "differs"]
    hs = " / ".join(str(H) for H in widths)
    rows.append(Claim(
        f"Pearson $r$, $H = {hs}$",
        " / ".join(mean_ci_math(paper[H]["pearson"], paper[H]["pearson_ci"]) for H in widths),
        " / ".join(mean_ci_math(feat[H]["pearson_mean"], feat[H]["pearson_ci"]) for H in widths)
        + " (features)",
        "differs" if outside else "agrees",
        (f"the paper's value lies outside the book's interval at $H = "
         f"{', '.join(str(H) for H in outside)}$; same cause as the overlap (note below)")
        if outside else "the paper's value lies in the book's interval at every width",
    ))

    seq_f = [float(feat[H][f"{top}_mean"]) for H in widths]
    seq_c = [float(case[H][f"{top}_mean"]) for H in widths]

    def rises(seq: list[float]) -> bool:
        return all(b >= a for a, b in zip(seq, seq[1:], strict=False)) and seq[-1] > seq[0]

    arrow = " $\\to$ "
    rows.append(Claim(
        '"The overlap improves with representation dimension"',
        "yes",
        f"{'yes' if rises(seq_f) else 'no'} (features: {arrow.join(f'{v:.3f}' for v in seq_f)}); "
        f"{'yes' if rises(seq_c) else 'no'} (cases: {arrow.join(f'{v:.3f}' for v in seq_c)})",
        "agrees in shape" if rises(seq_f) else "does not hold",
        "the direction holds for the paper's (features) reading; the magnitudes differ (rows "
        "above)" if rises(seq_f) else "the overlap does not rise with $H$ in the features reading",
    ))

    sc, sc_meta = benchmarks["scaling"]
    hsw = sc[sc["sweep"] == "H"]
    n_b = sorted(hsw["n"].unique())
    n_txt = f"$n = {int(n_b[0]):,}$".replace(",", "{,}") if len(n_b) == 1 else "growing $n$"
    src = f"stored benchmark, {n_txt}, {sc_meta.get('date', 'undated')}"
    by = {meth: g.set_index("H") for meth, g in hsw.groupby("method")}
    big = [H for H in widths if H >= 128 and H in by["exact"].index
           and H in by["Nystrom features"].index]
    q_ratio = {H: float(by["exact"].loc[H, "query_s"] / by["Nystrom features"].loc[H, "query_s"])
               for H in big}
    f_ratio = {H: float(by["exact"].loc[H, "fit_s"] / by["Nystrom features"].loc[H, "fit_s"])
               for H in big}
    gains = bool(big) and all(r > margin for r in q_ratio.values())
    rows.append(Claim(
        '"Runtime gains appear from $H = 128$ onward" (per query, as Table C2 times it)',
        ", ".join(f"Nyström {paper[H]['nystrom_ms']:.1f} vs exact {paper[H]['exact_ms']:.1f} ms "
                  f"($H = {H}$)" for H in widths if H >= 128),
        "exact / Nyström per query " + ", ".join(f"{q_ratio[H]:.2f}x ($H = {H}$)" for H in big)
        + f", features reading ({src})",
        "agrees in shape" if gains else "differs",
        (f"the Nyström query is more than {margin}x faster at every width from 128 on; the "
         "times are single benchmark medians on another machine, not on the paper's scale")
        if gains else
        ("in the book's implementation both estimators answer a query with one product by a "
         "cached $n\\times H$ matrix ($2nH$ flops), so no per-query gain can appear; the "
         f"measured ratios are within the {margin}x timing noise"
         if all(abs(np.log(r)) <= np.log(margin) for r in q_ratio.values()) else
         "in the book's implementation both estimators answer a query with one product by a "
         "cached $n\\times H$ matrix ($2nH$ flops)"),
    ))

    wins = nystrom_wins(sc, margin)
    wf = wins[(wins["sweep"] == "H") & (wins["method"] == "Nystrom features")
              & (wins["what"] == "fit")]
    tail = list(wf["tail"].iloc[0]) if len(wf) else []
    ratio = wf["ratio"].iloc[0] if len(wf) else pd.Series(dtype=float)
    tail_txt = (f"from $H = {int(tail[0]):,}$ on (".replace(",", "{,}")
                + ", ".join(f"{ratio[v]:.1f}x" for v in tail) + ")") if tail else "at no width"
    rows.append(Claim(
        "Runtime gains in the fit (the book's reading: Table C2 times queries only)",
        "-",
        f"Nyström (features) fits faster than exact by more than {margin}x {tail_txt}; "
        + " / ".join(f"{f_ratio[H]:.2f}x" for H in big)
        + f" at $H = {' / '.join(str(H) for H in big)}$ ({src})",
        "not comparable",
        "the paper reports no fit times",
    ))

    ex_ms = {H: float(by["exact"].loc[H, "query_s"]) * 1e3 for H in widths
             if H in by["exact"].index}
    fac = [paper[H]["exact_ms"] / ex_ms[H] for H in ex_ms]
    far = any(r > 2 or r < 0.5 for r in fac)
    rows.append(Claim(
        f"Per-query time, exact, $H = {' / '.join(str(H) for H in ex_ms)}$",
        " / ".join(mean_ci_math(paper[H]["exact_ms"], paper[H]["exact_ms_ci"], 1) for H in ex_ms)
        + " ms",
        " / ".join(f"{v:.3f}" for v in ex_ms.values()) + f" ms ({src})",
        "differs" if far else "not comparable",
        (f"the paper's times are {min(fac):.0f}-{max(fac):.0f} times the book's; another "
         "implementation and machine (the paper gives neither its $n$ nor its hardware)")
        if far else ("within a factor 2 of the book's, but a single timing on another machine "
                     "has no interval that could hold the paper's value; the paper gives "
                     "neither its $n$ nor its hardware"),
    ))

    ranks_txt = ("rank $H/2$" if all(int(feat[H]["rank"]) * 2 == H for H in widths)
                 else "rank " + " / ".join(str(int(feat[H]["rank"])) for H in widths))
    lam = f"{DEFAULT_RIDGE_MULTIPLE:.0e}".split("e")
    lam_txt = (f"10^{{{int(lam[1])}}}" if float(lam[0]) == 1
               else f"{lam[0]}\\times10^{{{int(lam[1])}}}")
    intro = [
        f"Table C2 (synthetic task of chapters 05/06, last hidden layer of width $H$, "
        f"$n = {n_train}$, {ranks_txt}, $\\lambda = {lam_txt}\\,\\mathrm{{tr}}(G)/H$ for both "
        f"estimators, {n_seeds} seeds; the paper's reading samples Gram columns (features), "
        "the sample-side reading samples cases). The timing rows read the stored, dated "
        "benchmark of `benchmarks/bench_scaling.py`, not a timing of the chapter's run."
    ]
    notes = [_agreement_note(summary, ranks, widths, k)]
    if {"limits", "memmap_dask"} <= set(benchmarks):  # every benchmark: all the notes
        notes += benchmark_notes(benchmarks, accuracy, margin)
    else:  # the chapter's course path: the scaling law; the rest is in the appendix
        notes += scaling_notes(benchmarks, margin)
    return ChapterClaims(
        chapter="10",
        title="Nyström scaling and exact audits at the limit",
        doc="notebooks/10_nystrom_scaling",
        claims=rows,
        intro=intro,
        notes=notes,
        tolerance=TRAINED_TOLERANCE,
    )


#: Appendix D: "the cached online audit averages 58.6 ms per query in our implementation"
#: (Table C3: 58.560 +- 130.335 ms).
PAPER_APP_D_MS: float = 58.56


def scaling_verdicts(df: pd.DataFrame, margin: float = 1.2) -> list[str]:
    """Sentences on where, if anywhere, a Nyström reading beats the exact fit or query.

    A method "wins" at a size when the exact time is more than ``margin`` times its time
    there (the benchmark's medians; smaller gaps are within the benchmark machine's noise). Wins that
    hold from some size up to the largest are reported as a trend ("from ... on"); others
    as isolated sizes (:func:`cbdt.book.experiments.scaling.nystrom_wins`).

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


#: Chapter 10's note on what moved to the optional appendix (issue 32): the engineering
#: benchmarks are measured there, not in the chapter's claims.
APPENDIX_NOTE: str = (
    "- **The exact fit at the machine's limit** (the fit's accuracy against a 50-digit "
    "reference, queries and the fit against the machine's floor, memmaps and Dask at $10^7$ "
    "cases): engineering beyond the paper's claims, measured in the optional "
    "[appendix](../notebooks/12_engineering_appendix.ipynb)."
)


def _scaling_note(sc: pd.DataFrame, margin: float) -> str:
    """The scaling-exponents bullet: log-log slopes of the exact decomposition and its floor,
    and where a Nyström reading is faster (:func:`_wins_sentence`)."""
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
    return (f"- **Scaling exponents** (log-log slopes of the exact decomposition): {sw['n']}; "
            f"{sw['H']}. " + _wins_sentence(sc, margin))


def scaling_notes(
    benchmarks: dict[str, tuple[pd.DataFrame, dict[str, str]]],
    margin: float = 1.2,
) -> list[str]:
    """Chapter 10's "beyond the paper" paragraphs from the scaling benchmark alone.

    The chapter keeps the scaling law; the engineering benchmarks (accuracy, limits, the fit,
    memmaps and Dask) are measured in the optional appendix
    (``notebooks/12_engineering_appendix``, :func:`benchmark_notes`), to which the last
    paragraph points.

    Parameters
    ----------
    benchmarks : dict
        ``{"scaling": (df, meta)}`` as :func:`cbdt.book.experiments.scaling.load_benchmark`
        returns it (other entries are ignored).
    margin : float, default=1.2
        A Nyström reading counts as faster when the exact time exceeds ``margin`` times its
        time (:func:`cbdt.book.experiments.scaling.nystrom_wins`).

    Returns
    -------
    list of str
        Markdown paragraphs: a heading line, the scaling bullet and the pointer to the appendix.
    """
    if "scaling" not in benchmarks:
        raise InputError("benchmarks needs the stored 'scaling' benchmark (load_benchmark).")
    sc, sc_meta = benchmarks["scaling"]
    return [
        f"Beyond the paper (book only): measured by `benchmarks/bench_scaling.py` on "
        f"{_machine(sc_meta)}, and stored in `benchmarks/results/`:",
        _scaling_note(sc, margin),
        APPENDIX_NOTE,
    ]


def _wins_sentence(sc: pd.DataFrame, margin: float) -> str:
    """Where a Nyström reading is faster than exact, in one sentence (:func:`cbdt.book.experiments.scaling.nystrom_wins`)."""
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


#: The one-thread profile columns of ``fit.csv`` (``benchmarks/bench_fit.py``'s ``profile``).
_PROFILE_COLUMNS = ("profile_fit_1thread_cpu_s", "profile_copy_cpu_s", "outside_share_cpu")
#: The page-size columns of ``fit.csv``: the fit and one query without numpy's huge-page request.
_PAGE_COLUMNS = ("fit_small_pages_s", "query_top10_s", "query_top10_small_pages_s")
#: the fit with copy=False (Phi kept by reference) and its one-thread profile
_NOCOPY_COLUMNS = ("fit_nocopy_s", "ratio_nocopy", "outside_share_nocopy_cpu",
                   "stream_1thread_cpu_s", "outside_share_nocopy_cpu_less_stream")


def _rows_with(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """The rows of ``df`` with every column of ``cols`` filled; none when a column is
    missing (a table stored before the column was added)."""
    return df.dropna(subset=list(cols)) if set(cols) <= set(df.columns) else df.iloc[:0]


def _listed(values: Any, fmt: str) -> str:
    """``values`` formatted by ``fmt`` and joined by commas, in order."""
    return ", ".join(fmt.format(v) for v in values)


def fit_notes(fit: pd.DataFrame) -> list[str]:
    """Sentences on the fit benchmark, generated from its stored rows: the in-memory ratio
    to the Gram product per width, the one-thread profile's shares (outside BLAS, the copy
    of ``Phi``) where stored, the memmap's to a streaming read and to its Gram, and the
    Dask cost model checked at the measured size and extrapolated."""
    out = []
    mem = fit[fit["case"] == "in memory"]
    if len(mem):
        one_n = mem["n"].nunique() == 1  # else each width names its n
        parts = [f"{r.ratio:.1f}x at $H = {_int(r.H)}$"
                 + ("" if one_n else f", $n = {_int(r.n)}$")
                 + f" ({r.fit_s:.2f} s against {r.floor_s:.2f} s)" for r in mem.itertuples()]
        out.append(
            (f"In memory at $n = {_sci(float(mem['n'].iloc[0]), 0)}$ the fit takes "
             if one_n else "In memory the fit takes ")
            + "; ".join(parts)
            + " of numpy's Gram product $\\Phi^\\top\\Phi$ of the same matrix."
        )
    prof = _rows_with(mem, _PROFILE_COLUMNS)
    if len(prof):
        copy = prof["profile_copy_cpu_s"] / prof["profile_fit_1thread_cpu_s"]
        rest = prof["outside_share_cpu"] - copy
        widths = ", ".join(f"$H = {_int(h)}$" for h in prof["H"])
        out.append(
            f"Profiled on one thread (its CPU time; widths {widths}), the share of the fit "
            f"outside the BLAS-3 and LAPACK kernels (triangular solves, Gram products, "
            f"Cholesky factorisations) is {_listed(100 * prof['outside_share_cpu'], '{:.0f} %')}. "
            f"Writing the copy of $\\Phi$ that the queries read, with the first touch of its "
            f"fresh pages, takes {_listed(100 * copy, '{:.0f} %')} of the fit; the rest "
            f"({_listed(100 * rest, '{:.0f} %')}) is each block's copy into the buffer of its "
            "triangular solve, the row norms the exact ranking keeps, the diagnosis of rank "
            "and condition from the small factor, and Python. These steps "
            "are bound by memory, not arithmetic: on a machine with a faster matrix product "
            "they weigh more."
        )
    kept = _rows_with(mem, _NOCOPY_COLUMNS)
    if len(kept):
        out.append(
            "With `copy=False` ($\\Phi$ kept by reference, so the fit writes no copy of it) "
            f"the fit takes {_listed(kept['ratio_nocopy'], '{:.1f}x')} the Gram product "
            f"({_listed(kept['fit_nocopy_s'], '{:.2f} s')}). Profiled on one thread, its share "
            f"outside the kernels is {_listed(100 * kept['outside_share_nocopy_cpu'], '{:.0f} %')}"
            "; less one streaming read of $\\Phi$ on one thread (the read every pass makes, "
            "all that numpy's Gram product waits for at narrow widths: "
            f"{_listed(kept['stream_1thread_cpu_s'], '{:.2f} s')}) it is "
            f"{_listed(100 * kept['outside_share_nocopy_cpu_less_stream'], '{:.0f} %')}."
        )
    pages = _rows_with(mem, _PAGE_COLUMNS)
    if len(pages):
        policy = pages["numpy_hugepages"].iloc[0] if "numpy_hugepages" in pages else ""
        out.append(
            "With numpy's request for transparent huge pages switched off (the fit's copy "
            "then lies in the kernel's default pages), at the same widths the fit takes "
            f"{_listed(pages['fit_small_pages_s'], '{:.2f} s')} against "
            f"{_listed(pages['fit_s'], '{:.2f} s')}, and one query's top 10 cases read from "
            f"that copy afterwards {_listed(1e3 * pages['query_top10_small_pages_s'], '{:.1f} ms')} "
            f"against {_listed(1e3 * pages['query_top10_s'], '{:.1f} ms')}: the page size "
            "trades the first touch of the copy, paid once, against every later read"
            + (f" ({policy})." if policy else ".")
        )
    mm = fit[fit["case"] == "memmap"]
    for r in mm.itertuples():
        out.append(
            f"A {r.dtype} memmap of $n = {_sci(float(r.n), 0)}$ rows is fitted in "
            f"{r.fit_s:.2f} s reading the file {getattr(r, 'passes', float('nan')):.3g} times: "
            f"{r.ratio:.1f}x one streaming pass over it ({r.floor_s:.2f} s) and "
            f"{r.ratio_threaded_gram:.1f}x the Gram product of its rows ({r.threaded_gram_s:.2f} s)."
        )
    if len(mm) and "gram_at_peak_s" in mm.columns:
        r = mm.iloc[0]
        g, s = float(r["gram_at_peak_s"]), float(r["floor_s"])
        head = (
            f"The arithmetic floor: at the machine's peak rate ({float(r['peak_gflops']):.0f} "
            f"GFLOP/s, a square matrix product timed in the same run) one Gram product of the "
            f"{r['dtype']} file's rows takes {g:.2f} s, {g / s:.1f}x its streaming pass. "
            f"CholeskyQR2's second pass does that arithmetic twice (a triangular solve and a "
            f"Gram product), as a Householder QR does in its $2nH^2$ flops"
        )
        if 2 * g >= s:
            out.append(head + f", so on this machine no fit with the accuracy of a QR can come "
                       f"within {2 * g / s:.1f}x of the stream, however its kernels are written.")
        else:  # the peak rate would hide the arithmetic behind the read: the kernels' rate
            out.append(
                head + f": {2 * g / s:.1f}x the stream at that rate, so the arithmetic alone "
                f"need not keep a fit from the stream here; the rate the kernels reach on blocks "
                f"of the file does (the Gram product of its rows alone took "
                f"{float(r['threaded_gram_s']) / s:.1f}x the stream)."
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


def _time(ms: float) -> str:
    return f"{ms * 1e3:.0f} µs" if ms < 1 else f"{ms:.1f} ms"


def query_sweep_notes(sweep: pd.DataFrame) -> list[str]:
    """Sentences on the query sweep of ``benchmarks/bench_influence.py``, generated from its
    stored rows: per number of queries and call, the sizes from which every in-memory
    ratio to the floor is within the row's target, the ratio where a smaller size is not,
    and the memmaps' ratios (float64, float32) to one streaming pass over the file."""
    need = {"n", "m", "call", "storage", "ratio", "target", "median_ms", "floor_ms", "floor"}
    if not need <= set(sweep.columns):
        raise InputError(f"query_sweep_notes needs the columns {sorted(need)} of "
                         "benchmarks/results/query_sweep.csv.")
    out = []
    mem = sweep[sweep["storage"] == "in memory"]
    short = False  # some call misses its target at the small sizes only
    for m, gm in mem.groupby("m", sort=True):
        parts = []
        for call, g in gm.groupby("call", sort=False):
            g = g.sort_values("n")
            ok = (g["ratio"] <= g["target"]).to_numpy()
            first = next((i for i in range(len(g)) if ok[i:].all()), None)
            tgt = float(g["target"].iloc[0])
            lo, hi = g["n"].iloc[0], g["n"].iloc[-1]
            if first == 0:
                part = (f"`{call}` is within {tgt:.2f}x of it at every size from $n = "
                        f"{_int(lo)}$ to ${_int(hi)}$ ({g['ratio'].min():.2f}x to "
                        f"{g['ratio'].max():.2f}x)")
            elif first is None:
                part = (f"`{call}` is above {tgt:.2f}x at $n = {_int(hi)}$ "
                        f"({g['ratio'].iloc[-1]:.2f}x)")
            else:
                short = True
                small = g.iloc[0]
                part = (f"`{call}` is within {tgt:.2f}x from $n = {_int(g['n'].iloc[first])}$ "
                        f"on (at $n = {_int(lo)}$: {_time(small.median_ms)} against "
                        f"{_time(small.floor_ms)}, {small.ratio:.2f}x)")
            parts.append(part)
        what = "one query" if m == 1 else f"{m} queries"
        out.append(f"Against its floor ({gm['floor'].iloc[0]}), for {what} "
                   + "; ".join(parts) + ".")
    if short:
        out.append("At the small sizes the fixed cost of a call outweighs a product that "
                   "small: the checks of the input, the exact refinement of the candidates "
                   "and the result, for `explain` two pandas tables.")
    b2b: list[str] = []  # the same rows timed back to back, where the sweep kept them
    timed_b2b = {"ratio_back_to_back", "pause_s"} <= set(sweep.columns)
    for storage, dtype, how in (
            ("memmap", "float64", ""),
            ("memmap float32", "float32", " (its pass widens the file to float64; the bare "
                                          "product is a float32 one)")):
        mm = sweep[sweep["storage"] == storage].sort_values("m")
        if len(mm):
            what = ["one query" if r.m == 1 else f"{r.m} queries" for r in mm.itertuples()]
            parts = [f"{r.ratio:.2f}x for {w}"
                     + ("" if pd.isna(getattr(r, "ratio_max_floor", np.nan))
                        or r.ratio_max_floor == r.ratio else
                        f" ({r.ratio_max_floor:.2f}x the larger of the pass and the bare "
                        "product)")
                     for r, w in zip(mm.itertuples(), what, strict=True)]
            out.append(f"On a {dtype} memmap of $n = {_int(mm['n'].iloc[0])}$ rows, "
                       f"`top_cases` takes {', '.join(parts)} of one streaming pass over the "
                       f"file{how}.")
            if timed_b2b:
                b2b += [f"{r.ratio_back_to_back:.2f}x ({dtype}, {w})"
                        for r, w in zip(mm.itertuples(), what, strict=True)]
    mm = sweep[sweep["storage"].str.startswith("memmap")]
    if b2b and bool(mm["ratio_back_to_back"].notna().all()):
        spin = (f"for {float(mm['blas_spin_s'].iloc[0]):.2f} s (measured in the same run)"
                if "blas_spin_s" in mm.columns and bool(mm["blas_spin_s"].notna().all())
                else "for a while")
        out.append(f"Each of those calls follows a pause of {float(mm['pause_s'].iloc[0]):.2f} s. "
                   "Timed back to back instead, a query that follows the bare product shares "
                   f"the cores with OpenBLAS's worker threads, which spin {spin} after it: "
                   + ", ".join(b2b) + ".")
    return out


def benchmark_notes(
    benchmarks: dict[str, tuple[pd.DataFrame, dict[str, str]]],
    accuracy: pd.DataFrame | None = None,
    margin: float = 1.2,
) -> list[str]:
    """The "beyond the paper" paragraphs of the appendix (chapter 12), from the stored benchmarks.

    Every number comes from the stored, dated results of ``benchmarks/`` (never from a
    timing of the current run), or from the deterministic :func:`cbdt.book.experiments.scaling.accuracy_table`.

    Parameters
    ----------
    benchmarks : dict
        ``{"scaling": (df, meta), "limits": (df, meta), "memmap_dask": (df, meta)}``, each
        as :func:`cbdt.book.experiments.scaling.load_benchmark` returns it, and optionally ``"fit"`` (:func:`fit_notes`).
    accuracy : DataFrame, optional
        :func:`cbdt.book.experiments.scaling.accuracy_table` (the accuracy paragraph is left out without it).
    margin : float, default=1.2
        A Nyström reading counts as faster when the exact time exceeds ``margin`` times its
        time (:func:`cbdt.book.experiments.scaling.nystrom_wins`).

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
        paths = [c for c in ACCURACY_PATHS if c in acc.columns]
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

    out.append(_scaling_note(sc, margin))

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
