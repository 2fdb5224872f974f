"""``cbdt`` on the command line: reproduce the paper's tables and figures.

Usage::

    cbdt list                                   # what can be reproduced, and where the book shows it
    cbdt reproduce                              # everything (about 10 minutes on 2 cores)
    cbdt reproduce --only table1,table-c2 --seeds 5 --out cbdt-results

(``python -m cbdt ...`` is the same; ``--out`` defaults to ``cbdt-results``.) Each artifact
runs the functions of :mod:`cbdt.book.experiments` that its chapter calls, with explicit seeds,
and writes its tables as CSV (the library's column names) and Markdown (the chapters' column
names) and its figures as PNG under ``OUT/<artifact>/``.

Each artifact's ``summary.md`` says where this run agrees with the paper and where it departs:
one line per claim of its chapter (:mod:`cbdt.book.claims`: *agrees*, *agrees in shape*,
*differs*, *does not hold*, *not comparable*, *book only*), with the paper's value, this run's
and the short form of the reason. The lines are computed from this run's own numbers by the
functions the chapters use for the book's reproducibility page (with ``--seeds 2`` they
describe two seeds, not the book's five); ``OUT/summary.md`` gathers them with every file and
the time it took. The real-data artifacts read their files through
:func:`cbdt.datasets.fetch` (``CBDT_DATA_DIR``, the cache, a verified download).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ARTIFACTS", "Artifact", "main", "reproduce"]


@dataclass(frozen=True)
class Artifact:
    """One reproducible item of the paper.

    Parameters
    ----------
    name : str
        What ``--only`` selects.
    paper : str
        The paper's table or figure.
    chapter : str
        The book's chapter that shows and discusses it.
    minutes : float
        Rough run time with five seeds on 2 cores.
    run : callable
        ``run(seeds) -> (tables, figures, claims)``: dicts of name to DataFrame / Figure,
        and the list of :class:`cbdt.book.claims.Claim` of the chapter that this run's numbers
        decide (built by the chapter's own claims function where it has one).
    downloads : str, default=""
        The public data it reads through :func:`cbdt.datasets.fetch` (downloaded on first
        use, or found in ``CBDT_DATA_DIR``); empty for an artifact that generates its data.
    """

    name: str
    paper: str
    chapter: str
    minutes: float
    run: Callable[[tuple[int, ...]], tuple[dict[str, pd.DataFrame], dict[str, Any], list[Any]]]
    downloads: str = ""


# ------------------------------------------------------------------------------ artifacts
def _table1(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import synthetic as syn

    cmp = syn.attribution_comparison(seeds)
    summary = syn.summarize_comparison(cmp)
    fig = plots.plot_attribution_comparison(summary)
    return ({"table1_attribution": summary, "per_seed": cmp}, {"figC5_attribution": fig},
            _table1_claims(cmp))


def _table_cost(seeds: tuple[int, ...]):
    from .experiments import synthetic as syn

    timing = syn.attribution_timing(seeds)
    return ({"tableD_cost": syn.summarize_timing(timing), "per_seed": timing}, {},
            _cost_claims(timing))


def _fig_synthetic(seeds: tuple[int, ...]):
    from . import plots
    from .claims import ch05_06_synthetic
    from .experiments import synthetic as syn

    rec = syn.synthetic_recovery(seeds)
    regions = syn.decision_regions(seed=seeds[0])
    recon = syn.support_reconstruction(seed=seeds[0])
    fig = plots.plot_synthetic_recovery(regions, recon)
    return ({"recovery_per_seed": rec, "support_reconstruction": recon},
            {"figA_synthetic_recovery": fig}, ch05_06_synthetic.recovery_claims(rec).claims)


def _pjm_runs(seeds: tuple[int, ...]):
    from .experiments import pjm

    return pjm.pjm_runs(seeds)


#: Chapter 07's claims about the signed geometry (fig-signed); the others belong to fig-pjm.
_SIGNED = re.compile(r"distance|top-5|magnitude", re.I)


def _pjm_claims(runs, seeds: tuple[int, ...], signed: bool) -> list[Any]:
    """Chapter 07's claims from these runs (``signed``: the geometry rows, else the others)."""
    from .claims import ch07_pjm
    from .experiments import pjm

    geometry = pjm.geometry_summary([pjm.signed_geometry(r) for r in runs], seeds)
    chapter = ch07_pjm.chapter_claims(pjm.decision_agreement(runs), pjm.disagreement_by_margin(runs),
                                 pjm.support_alignment(runs), geometry)
    return [c for c in chapter.claims if bool(_SIGNED.search(c.claim)) == signed]


def _fig_pjm(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import pjm

    runs = _pjm_runs(seeds)
    run0 = runs[0]
    agreement = pjm.decision_agreement(runs)
    alignment = pjm.support_alignment(runs)
    rho0 = alignment[alignment["seed"] == run0.seed]["rho_support"].to_numpy()
    figs = {
        "figA_pjm_agreement": plots.plot_pjm_agreement(
            pjm.disagreement_profile(run0), pjm.transition_loads(run0.problem)
        ),
        "figA_pjm_support": plots.plot_pjm_support_alignment(
            run0.probe_scores, run0.cbdt_average, rho0
        ),
    }
    tables = {
        "agreement": agreement,
        "support_alignment": alignment,
        "disagreement_by_margin": pjm.disagreement_by_margin(runs),
    }
    return tables, figs, _pjm_claims(runs, seeds, signed=False)


def _fig_signed(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import pjm

    runs = _pjm_runs(seeds)
    geoms = [pjm.signed_geometry(r) for r in runs]
    summary = pjm.geometry_summary(geoms, seeds)
    g = geoms[0]
    figs = {
        "figA_signed_geometry": plots.plot_signed_geometry(g.cases),
        "figC2_alpha_distance": plots.plot_alpha_distance(g.alpha, g.distance, g.cases),
    }
    return {"signed_geometry": summary}, figs, _pjm_claims(runs, seeds, signed=True)


def _table2(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import pjm

    run0 = _pjm_runs(seeds[:1])[0]
    audit = pjm.audit_query(run0, pjm.default_audit_index(run0))
    return ({"table2_case_audit": audit.cases},
            {"table2_case_audit": plots.plot_case_audit(audit)}, [])


def _fig_uci(seeds: tuple[int, ...]):
    from cbdt import datasets

    from . import plots
    from .claims import ch08_uci
    from .experiments import uci

    adult = uci.uci_audit("adult", seeds)
    credit = uci.uci_audit("default_credit", seeds)
    panels = {"Adult": uci.figure4_panel(adult.runs[0]),
              "Default": uci.figure4_panel(credit.runs[0])}
    tables = {
        "adult_vs_paper": uci.paper_comparison(adult),
        "default_credit_vs_paper": uci.paper_comparison(credit),
        "adult_per_seed": adult.per_seed,
        "default_credit_per_seed": credit.per_seed,
    }
    optimal = uci.optimal_action_counts(
        datasets.default_credit_proxy_returns(datasets.load_default_credit()),
        uci.DEFAULT_CREDIT_ACTION_LABELS)
    claims = ch08_uci.chapter_claims(adult, credit, optimal).claims
    return tables, {"figA_uci": plots.plot_uci_figure4(panels)}, claims


def _drift(seeds: tuple[int, ...]):
    from . import plots
    from .claims import ch09_drift
    from .experiments import drift

    grid = drift.drift_grid(seeds=seeds)
    summary = drift.summarize_grid(grid)
    paired = drift.paired_vs_margin(grid)
    figs = {"figC3_drift_grid": plots.plot_drift_grid(summary),
            "figC4_paired": plots.plot_drift_paired(paired)}
    return ({"drift_auc": summary, "paired_vs_margin": paired,
             "claims_C4": ch09_drift.claim_check(paired)}, figs,
            ch09_drift.chapter_claims(summary, paired).claims)


def _table_c2(seeds: tuple[int, ...]):
    from cbdt.exceptions import InputError

    from . import plots
    from .claims import ch10_nystrom
    from .experiments import nystrom as nys
    from .experiments import scaling
    from .experiments import synthetic as syn

    tab = pd.concat([nys.nystrom_table(method="features", seeds=seeds),
                     nys.nystrom_table(method="cases", seeds=seeds)])
    summary = nys.summarize_nystrom(tab)
    ranks = []
    for H in nys.WIDTHS:
        for seed in seeds:
            s2 = np.linalg.svd(syn.synthetic_run(seed, nys.nystrom_config(H)).Phi_train,
                               compute_uv=False) ** 2  # eigenvalues of G, as in ch. 10
            lam = 1e-3 * s2.sum() / H  # the ridge both estimators use
            ranks.append({"H": H, "seed": seed, "rank": int((s2 > 1e-12 * s2[0]).sum()),
                          "d_eff": float((s2 / (s2 + lam)).sum())})
    try:  # the timing rows read the stored, dated benchmarks of a checkout
        benchmarks = {b: scaling.load_benchmark(b) for b in ("scaling", "limits", "memmap_dask")}
    except InputError:
        claims: list[Any] = []
    else:
        claims = ch10_nystrom.chapter_claims(summary, pd.DataFrame(ranks), benchmarks).claims
    return ({"tableC2_nystrom": summary, "per_seed": tab},
            {"tableC2_agreement": plots.plot_nystrom_agreement(summary, k=30)}, claims)


# ------------------------------------------------------------------------------ claims
def _table1_claims(cmp: pd.DataFrame) -> list[Any]:
    """Chapter 06's Table 1 rows and its ranking claim, from this run's per-seed table.

    The status rules are :func:`cbdt.book.claims.ch05_06_synthetic.attribution_claims`'s (the paper's
    mean inside this run's 95% interval: agrees); the reasons name what ch. 06 shows.
    """
    from cbdt.metrics import paired_test

    from .claims import Claim, ch05_06_synthetic, mean_ci_math
    from .experiments import synthetic as syn

    methods = [m for m in syn.PAPER_TABLE1 if m in set(cmp["method"])]
    summ = syn.summarize_comparison(cmp[cmp["method"].isin(methods)], with_paper=False)
    ours = methods[0]

    def book(m: str, col: str) -> tuple[float, float]:
        return (round(float(summ.at[m, f"{col}_mean"]), 3),
                round(float(summ.at[m, f"{col}_ci"]), 3))

    def paper(m: str, col: str) -> tuple[float, float]:
        t = syn.PAPER_TABLE1[m]
        return (t[0], t[1]) if col == "top30" else (t[2], t[3])

    why = {
        ours: "the OLS probe's $\\alpha$ is a signed, ill-conditioned Gram inverse, while the "
              "ground truth is a non-negative similarity",
        "Inner product": "on the smooth tanh representation $\\varphi(x)^\\top\\varphi(x_i)$ "
                         "is itself a similarity",
    }
    for m in ("Representer Point", "TracIn", "Influence Functions"):
        why[m] = "as defined, it ranks by training residuals, which are mostly the return noise"
    rows = []
    for col, label in (("top30", "Top-30 action consistency"),
                       ("pearson", "Pearson with the ground-truth contributions")):
        st, where = ch05_06_synthetic.against_paper(*paper(ours, col), *book(ours, col))
        rows.append(Claim(f"{label}, ours ($\\alpha$)", mean_ci_math(*paper(ours, col)),
                          mean_ci_math(*book(ours, col)), st,
                          where + ("" if st == "agrees" else f"; {why[ours]}")))
    for m in methods[1:]:
        parts = [(col, *ch05_06_synthetic.against_paper(*paper(m, col), *book(m, col)))
                 for col in ("top30", "pearson")]
        status = "agrees" if all(st == "agrees" for _, st, _ in parts) else "differs"
        where = "; ".join(f"{'Top-30' if col == 'top30' else 'Pearson'}: {w}"
                          for col, _, w in parts)
        rows.append(Claim(
            claim=f"Top-30 / Pearson, {m}",
            paper=" / ".join(mean_ci_math(*paper(m, c)) for c in ("top30", "pearson")),
            book=" / ".join(mean_ci_math(*book(m, c)) for c in ("top30", "pearson")),
            status=status, reason=where + ("" if status == "agrees" else f"; {why[m]}")))
    top = {m: book(m, "top30")[0] for m in methods}
    best = max(methods, key=lambda m: (top[m], m == ours))
    per_seed = cmp.pivot(index="seed", columns="method", values="top30")
    if best == ours:
        second = max(methods[1:], key=top.__getitem__)
        t = paired_test(per_seed[ours], per_seed[second])
        rows.append(Claim(
            '"ours has the highest Top-30 consistency" (Sec. 5.3)', "yes (Table 1)",
            f"yes: {mean_ci_math(*book(ours, 'top30'))} against {second} "
            f"{mean_ci_math(*book(second, 'top30'))}", "agrees in shape",
            f"ours is higher than {second} in {t.wins} of {t.n} seeds"))
    else:
        t = paired_test(per_seed[best], per_seed[ours])
        rows.append(Claim(
            '"ours has the highest Top-30 consistency" (Sec. 5.3)', "yes (Table 1)",
            f"no: {best} beats $\\alpha$ here (Top-30 {book(best, 'top30')[0]:.3f} vs "
            f"{book(ours, 'top30')[0]:.3f}, Pearson {book(best, 'pearson')[0]:.3f} vs "
            f"{book(ours, 'pearson')[0]:.3f}), in {t.wins} of {t.n} seeds",
            "does not hold", why.get(best, why[ours])))
    return rows


def _cost_claims(timing: pd.DataFrame) -> list[Any]:
    """Chapter 06's per-query cost claim (App. D, Table C3), timed by this run on this machine."""
    from cbdt.metrics import mean_ci

    from .claims import Claim, ch05_06_synthetic
    from .claims import mean_ci_math as ci_md
    from .experiments import synthetic as syn

    ours, baselines = "Ours (alpha)", [m for m in syn.PAPER_TIMING if m != "Ours (alpha)"]
    ms = timing.pivot(index="seed", columns="method", values="scores_ms")
    if ours not in ms or not set(baselines) & set(ms.columns):
        return []
    fastest = ms[[b for b in baselines if b in ms]].min(axis=1)
    m, h = mean_ci((ms[ours] / fastest).to_numpy(dtype=float))
    paper_ms, paper_ci, paper_ratio = syn.PAPER_TIMING[ours]
    ok = max(m / paper_ratio, paper_ratio / m) <= ch05_06_synthetic.COST_RATIO_TOLERANCE
    return [Claim(
        "per-query audit cost of ours vs the fastest baseline (App. D, Table C3)",
        f"{paper_ratio:.1f}x (${paper_ms:.3f}\\pm{paper_ci:.3f}$ ms)",
        f"{ci_md(m, h, 2)}x ({float(ms[ours].mean()):.3f} ms per query on this machine)",
        "agrees" if ok else "differs",
        f"the book's ratio is within a factor {ch05_06_synthetic.COST_RATIO_TOLERANCE:g} of the paper's" if ok
        else "implementation: once the dual matrix is cached, a query is one matrix-vector "
             "product, the operation of the inner product")]


_PJM_DATA = "the PJM hourly load data"

ARTIFACTS: dict[str, Artifact] = {
    a.name: a
    for a in (
        Artifact("fig-synthetic", "Fig. (synthetic CBDT recovery)",
                 "05_synthetic_recovery", 0.3, _fig_synthetic),
        Artifact("table1", "Table 1 and Fig. C5 (attribution baselines)",
                 "06_attribution_baselines", 0.7, _table1),
        Artifact("table-cost", "Table D (cost of attribution baselines)",
                 "06_attribution_baselines", 0.5, _table_cost),
        Artifact("fig-pjm", "Fig. (PJM audit: agreement, support alignment)",
                 "07_pjm_audit", 1.5, _fig_pjm, _PJM_DATA),
        Artifact("fig-signed", "Fig. (signed case influence) and Fig. C2 (alpha-distance)",
                 "07_pjm_audit", 0.5, _fig_signed, _PJM_DATA),
        Artifact("table2", "Table 2 (PJM case audit of one decision)",
                 "07_pjm_audit", 0.3, _table2, _PJM_DATA),
        Artifact("fig-uci", "Fig. (UCI Adult and Default Credit audits)",
                 "08_uci_audits", 2.0, _fig_uci, "the UCI Adult and Default Credit data"),
        Artifact("drift", "Fig. C3 (risk drift grid) and Fig. C4 (paired comparison)",
                 "09_drift_grid", 2.0, _drift),
        Artifact("table-c2", "Table C2 (Nystrom approximation)",
                 "10_nystrom_scaling", 0.5, _table_c2),
    )
}


# ------------------------------------------------------------------------------ writing
#: Column names of the library's tables, as the chapters print them (Markdown only; the CSV
#: files keep the library's names, which code reads).
_LABELS: dict[str, str] = {
    "top30": "Top-30", "pearson": "Pearson", "n": "seeds", "n_seeds": "seeds",
    "network_agreement": "agreement, network", "probe_solver": "probe solver",
    "condition_number": "cond(G)", "true_support": "true support",
    "probe_score": "probe score", "network_score": "network score",
    "scores_ms": "query time (ms)", "featurize_ms": "features (ms)",
    "total_ms": "total time (ms)", "relative_cost": "relative cost",
    "paper_ms": "query time (ms), paper", "final_loss": "final training loss",
    "n_test": "test cases", "n_train": "training cases", "n_agree": "agreements",
    "probe_cbdt_agreement": "agreement, probe-CBDT",
    "nn_probe_agreement": "agreement, network-probe",
    "return_nn": "return, network", "return_cbdt": "return, CBDT",
    "return_oracle": "return, oracle", "return_best_constant": "return, best constant action",
    "return_nn_on_disagreements": "network's return where they disagree",
    "return_cbdt_on_disagreements": "CBDT's return where they disagree",
    "test_mse_nn": "test MSE, network", "test_mse_cbdt": "test MSE, CBDT",
    "test_mse": "test MSE", "train_loss": "training loss",
    "rho_support": "ρ_support", "rho_support_raw": "ρ_support, raw", "rho_recon": "ρ_recon",
    "pos_distance": "distance, positive", "neg_distance": "distance, negative",
    "dist_ratio": "distance ratio", "dist_ratio_coordstd": "ratio, coord. std.",
    "pos_match": "match, positive", "neg_match": "match, negative",
    "pos_abs_alpha": "|α|, positive", "neg_abs_alpha": "|α|, negative",
    "magnitude_ratio": "|α| ratio", "negative_share": "share α < 0",
    "alpha": "α", "a_star": "a*", "contribution": "ψ = α r",
    "label_accuracy": "label accuracy", "optimal_accuracy": "optimal accuracy",
    "optimal_set_accuracy": "optimal-set accuracy",
    "cbdt_label_accuracy": "CBDT label accuracy", "bandwidth_multiple": "bandwidth multiple ν",
    "book_mean": "book mean", "book_ci": "book 95% CI ±", "paper_mean": "paper",
    "paper_ci": "paper ±", "mean_diff": "AUC difference to the margin (mean)",
    "ci": "95% CI ±", "t_pvalue": "paired t p", "wilcoxon_pvalue": "Wilcoxon p",
    "wins": "seeds above the margin", "seed_wins": "seed-level wins",
    "seed_pairs": "seed-level pairs", "holds": "claim holds", "auc": "AUC",
    "error_rate": "share of wrong decisions", "n_wrong": "wrong decisions",
}
#: Words of a key without a label of its own (``exact_fit_ms`` -> ``exact fit ms``).
_WORDS: dict[str, str] = {"nystrom": "Nyström", "nn": "network", "cbdt": "CBDT", "mse": "MSE",
                          "auc": "AUC", "n": "number of"}
_SUFFIXES = (("_mean", "{}, mean"), ("_ci", "{}, 95% CI ±"))


def _label(col: Any) -> str:
    """A column of the library's tables as the chapters name it (no ``snake_case`` keys)."""
    if isinstance(col, tuple):
        return " ".join(_label(c) for c in col if str(c))
    col = str(col)
    if col in _LABELS:
        return _LABELS[col]
    for suffix, form in _SUFFIXES:
        if col.endswith(suffix) and len(col) > len(suffix):
            return form.format(_label(col[: -len(suffix)]))
    if col.startswith("paper_"):
        return f"{_label(col[6:])}, paper"
    m = re.fullmatch(r"(support_corr|rho_recon|rho_support)_a?(\d+)", col)
    if m:
        base = {"support_corr": "support corr."}.get(m.group(1), _LABELS.get(m.group(1), ""))
        return f"{base}, a{m.group(2)}"
    return " ".join(_WORDS.get(w, w) for w in col.split("_"))


def _cell(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return "" if np.isnan(v) else f"{v:.4g}"
    return str(v)


def _readable(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows of ``df`` as the chapters print them: ``x_mean`` and ``x_ci`` become
    one column ``x, mean ± 95% CI``, every other key its label (:func:`_label`)."""
    named = any(n is not None for n in df.index.names)
    flat = df.reset_index() if named else df  # an unnamed index is only row numbers
    cols = list(flat.columns)
    keys = [str(c) for c in cols]

    def mean_of(ci_key: str) -> str | None:
        base = ci_key[:-3]
        return next((k for k in (base + "_mean", base) if k in keys), None)

    header: list[str] = []
    cells: list[Callable[[Any], str]] = []
    for j, key in enumerate(keys):
        if key.endswith("_ci") and mean_of(key):
            continue  # shown beside its mean
        ci_key = key.removesuffix("_mean") + "_ci"
        if ci_key in keys and mean_of(ci_key) == key:
            i = keys.index(ci_key)
            label = _label(key.removesuffix("_mean"))
            header.append(label + (", mean ± 95% CI" if key.endswith("_mean") else " ± 95% CI"))
            cells.append(lambda r, j=j, i=i: _cell(r[j]) + (
                "" if _cell(r[i]) == "" else f" ± {_cell(r[i])}"))
        else:
            header.append(_label(cols[j]))
            cells.append(lambda r, j=j: _cell(r[j]))
    rows = [[f(r) for f in cells] for r in flat.itertuples(index=False)]
    return header, rows


def _markdown(df: pd.DataFrame) -> str:
    from .claims import md_table

    return "\n".join(md_table(*_readable(df))) + "\n"


#: Clauses of a reason that restate where the paper's value lies (the line shows both values).
_RESTATES = re.compile(r"^(?:[\w -]+: )?the paper's .* lies |^the two intervals overlap$")


def _short_reason(reason: str, limit: int = 200, restated: bool = True) -> str:
    """The reason's first clause that explains rather than restates the comparison, at most
    ``limit`` characters (cut at a word); with ``restated=False``, ``""`` when every clause
    only restates where the paper's value lies."""
    clauses, depth, start = [], 0, 0
    for i, ch in enumerate(reason):  # split at "; " outside parentheses
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and reason.startswith("; ", i):
            clauses.append(reason[start:i])
            start = i + 2
    clauses = [c.strip() for c in [*clauses, reason[start:]] if c.strip()]
    why = [c for c in clauses if not _RESTATES.search(c)]
    if not why and not restated:
        return ""
    text = re.sub(r"\s*\((?:note|see) below\)|,? see below", "", (why or clauses or [""])[0])
    text = text.replace("the book's interval", "this run's interval")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return text


#: Statuses by whether the book departs from the paper (lines in this order).
_DEPARTS = ("does not hold", "differs", "not comparable")
_AGREES = ("agrees in shape", "agrees", "book only")


def _claim_line(c: Any, chapter: str) -> str:
    why = _short_reason(c.reason, restated=c.status in _DEPARTS)
    line = f"- **{c.status}**: {c.claim}: paper {c.paper}; this run {c.book}."
    if why:
        line += f" {why[0].upper()}{why[1:]}"
        line += f" (ch. {int(chapter[:2]):d} explains it)." if c.status in _DEPARTS else "."
    return line


def _departures(art: Artifact, claims: Sequence[Any], seeds: tuple[int, ...]) -> list[str]:
    """The Markdown lines that say where this run agrees with the paper and where it departs."""
    ch = int(art.chapter[:2])
    if not claims:
        return [f"No claim of the paper is decided by this artifact's numbers alone; chapter "
                f"{ch} ({art.chapter}) compares the rest with the paper."]
    n = len(seeds)
    counts = {s: sum(c.status == s for c in claims) for s in (*_DEPARTS, *_AGREES)}
    lines = [
        f"Chapter {ch}'s claims, decided by this run's {n} seed{'s' if n != 1 else ''} with the "
        "book's rule (*agrees* only when the paper's value lies inside this run's 95% "
        "interval): " + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ".",
    ]
    if n < 5:
        lines.append(f"The book uses 5 seeds; a 95% interval over {n} is wider (Student t with "
                     f"{n - 1} degree{'s' if n != 2 else ''} of freedom), so a row can agree "
                     "here and differ in the book.")
    lines.append("")
    for title, group in (("Where it departs from the paper", _DEPARTS),
                         ("Where it agrees", _AGREES)):
        mine = [c for s in group for c in claims if c.status == s]
        if mine:
            lines += [f"{title}:", "", *(_claim_line(c, art.chapter) for c in mine), ""]
    return lines[:-1] if lines[-1] == "" else lines


def _write(art: Artifact, tables: dict[str, pd.DataFrame], figures: dict[str, Any],
           claims: Sequence[Any], seeds: tuple[int, ...], out: Path) -> tuple[list[Path], str]:
    import matplotlib.pyplot as plt

    d = out / art.name
    d.mkdir(parents=True, exist_ok=True)
    files = []
    for name, df in tables.items():
        df.to_csv(d / f"{name}.csv")
        (d / f"{name}.md").write_text(_markdown(df), encoding="utf-8")
        files += [d / f"{name}.csv", d / f"{name}.md"]
    for name, fig in figures.items():
        fig.savefig(d / f"{name}.png", dpi=150, bbox_inches="tight")
        plt.close(fig)
        files.append(d / f"{name}.png")
    section = "\n".join(_departures(art, claims, seeds))
    text = "\n".join([
        f"# {art.name}: {art.paper}", "",
        f"Seeds {', '.join(map(str, seeds))}; the book's chapter: "
        f"`notebooks/{art.chapter}.ipynb` (in the HTML book: `{art.chapter}.html`).", "",
        "## This run beside the paper", "", section, "",
        "## Files", "",
        *(f"- `{f.name}`" for f in files),
        "", "The CSV files keep the library's column names; the Markdown tables use the "
        "chapters' names.", "",
    ])
    (d / "summary.md").write_text(text, encoding="utf-8")
    files.append(d / "summary.md")
    return files, section


def reproduce(
    names: Sequence[str] | None = None,
    *,
    seeds: int = 5,
    out: str | Path = "cbdt-results",
    progress: bool = True,
) -> pd.DataFrame:
    """Run artifacts and write their tables (CSV, Markdown) and figures (PNG).

    Parameters
    ----------
    names : sequence of str, optional
        Keys of :data:`ARTIFACTS`; default all of them.
    seeds : int, default=5
        Seeds ``0..seeds-1`` (the paper uses five; at least two, for the intervals).
    out : str or path-like, default="cbdt-results"
        Output folder; one subfolder per artifact, plus ``summary.md``.
    progress : bool, default=True
        Show a tqdm progress bar on stderr.

    Returns
    -------
    pandas.DataFrame
        One row per artifact: ``artifact, paper, chapter, seconds, files``.

    Raises
    ------
    SystemExit
        For an unknown artifact, fewer than two seeds, or an artifact whose data files are
        neither in ``CBDT_DATA_DIR`` or the cache nor downloadable (offline): one message
        naming the artifact and the file, no traceback. A failed run removes ``out`` when
        it created it and wrote nothing there.
    """
    from cbdt._optional import require

    tqdm = require("tqdm.auto", "cbdt reproduce").tqdm

    names = list(ARTIFACTS) if not names else list(names)
    unknown = [n for n in names if n not in ARTIFACTS]
    if unknown:
        raise SystemExit(
            f"cbdt reproduce: unknown artifact(s) {', '.join(unknown)}; choose from "
            f"{', '.join(ARTIFACTS)} (see `cbdt list`)."
        )
    if int(seeds) < 2:
        raise SystemExit(
            f"cbdt reproduce: --seeds must be at least 2 (the tables give 95% intervals over "
            f"seeds), got {seeds}."
        )
    seed_tuple = tuple(range(int(seeds)))
    out = Path(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    sections = []
    bar = tqdm(names, desc="cbdt reproduce", unit="artifact", disable=not progress)
    try:
        for name in bar:
            art = ARTIFACTS[name]
            bar.set_postfix_str(name)
            t0 = time.perf_counter()
            try:
                tables, figures, claims = art.run(seed_tuple)
            except Exception as err:
                if not _is_data_error(err):
                    raise
                raise SystemExit(
                    f"cbdt reproduce: {name} needs {art.downloads or 'a data file'}, which is "
                    f"not available here. {err}"
                ) from None
            files, section = _write(art, tables, figures, claims, seed_tuple, out)
            sections += [f"## {name}: {art.paper}", "", section, ""]
            rows.append({"artifact": name, "paper": art.paper, "chapter": art.chapter,
                         "seconds": round(time.perf_counter() - t0, 1),
                         "files": ", ".join(str(f.relative_to(out)) for f in files)})
    except BaseException:
        if created:
            _remove_empty(out)  # a failed run leaves no empty folder behind
        raise
    summary = pd.DataFrame(rows)
    head = (f"# cbdt reproduce\n\nSeeds: {', '.join(map(str, seed_tuple))}. Below, for each "
            "artifact, where this run agrees with the paper and where it departs (one line per "
            "claim of its chapter, with the short form of the reason); each chapter of the book "
            "discusses its numbers beside the paper's.\n\n")
    text = head + _markdown(summary) + "\n" + "\n".join(sections)
    (out / "summary.md").write_text(text.rstrip() + "\n", encoding="utf-8")
    return summary


def _is_data_error(err: BaseException) -> bool:
    """Whether ``err`` is a :class:`cbdt.datasets.DataError` (a data file missing, damaged
    or not downloadable), without importing :mod:`cbdt.datasets` (it needs the data extra)."""
    registry = sys.modules.get("cbdt.datasets._registry")
    return registry is not None and isinstance(err, registry.DataError)


def _remove_empty(folder: Path) -> None:
    """Remove ``folder`` and its subfolders when they hold no file (files are kept)."""
    for d in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass
    try:
        folder.rmdir()
    except OSError:
        pass


def _list() -> str:
    lines = [f"{'artifact':<14} {'minutes':>7}  {'chapter':<26} {'data':<9} paper"]
    for a in ARTIFACTS.values():
        data = "download" if a.downloads else ""
        lines.append(f"{a.name:<14} {a.minutes:>7.1f}  {a.chapter:<26} {data:<9} {a.paper}")
    lines.append("")
    lines.append("data: 'download' marks the artifacts that read public data files, downloaded "
                 "on first use and verified;")
    lines.append("      offline (CBDT_OFFLINE=1), put the files in a folder and set "
                 "CBDT_DATA_DIR to it.")
    lines.append("")
    lines.append("cbdt reproduce [--only NAME,...] [--seeds N] [--out DIR]")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cbdt`` console script and of ``python -m cbdt``.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments; default ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status.
    """
    ap = argparse.ArgumentParser(
        prog="cbdt", description="Reproduce the tables and figures of the CBDT paper."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="name what can be reproduced and which chapter shows it")
    rp = sub.add_parser("reproduce", help="write tables (CSV, Markdown) and figures (PNG)")
    rp.add_argument("--only", default="", help="comma-separated artifact names (cbdt list)")
    rp.add_argument("--seeds", type=int, default=5, help="number of seeds, 0..N-1 (default 5)")
    rp.add_argument("--out", default="cbdt-results", help="output folder")
    rp.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.command == "list":  # needs no extra
        print(_list())
        return 0
    from cbdt._optional import require
    from cbdt.exceptions import MissingExtraError

    try:
        require("matplotlib", "cbdt reproduce").use("Agg")  # files only, no display needed
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        summary = reproduce(names, seeds=args.seeds, out=args.out,
                            progress=not args.no_progress)
    except MissingExtraError as err:  # one line, no traceback (the lean install)
        print(f"{err}; everything the artifacts need: pip install 'cbdt[book]'",
              file=sys.stderr)
        return 1
    n_files = sum(len(f.split(", ")) for f in summary["files"])
    print(f"\nWrote {n_files} files under {Path(args.out).resolve()}:")
    for r in summary.itertuples(index=False):
        print(f"  {r.artifact:<14} {r.seconds:>7.1f} s  {r.paper}  (book: {r.chapter})")
    print(f"Summary: {Path(args.out) / 'summary.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
