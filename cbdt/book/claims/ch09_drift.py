"""Chapter 09, the drift grid: the paper beside the book.

:func:`chapter_claims` phrases the results of :mod:`cbdt.book.experiments.drift`,
:mod:`~cbdt.book.experiments.classifier` and :mod:`~cbdt.book.experiments.pjm_drift` as the
chapter's claims (:func:`classifier_rows` and :func:`pjm_drift_rows` are its last rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cbdt.exceptions import InputError

from ..experiments import pjm_drift
from ..experiments.drift import CASE_SCORES, SCORES, SHIFTS, DriftConfig
from . import TRAINED_TOLERANCE, ChapterClaims, Claim, mean_ci_math

__all__ = [
    "PROBE_VARIANT",
    "claim_check",
    "claim_status",
    "claim_sentences",
    "chapter_claims",
    "classifier_rows",
    "pjm_drift_rows",
]


def claim_check(
    paired: pd.DataFrame, alpha: float = 0.05, from_level: float = 2.0
) -> pd.DataFrame:
    """Check the two claims of App. C.4 on the paired table (:func:`cbdt.book.experiments.drift.paired_vs_margin`).

    Claim ``covariate``: "from drift strength 2.0 onward, the case-influence scores
    consistently exceed the network-margin baseline in paired seed comparisons". Read as: at
    every covariate level :math:`\\ge 2`, the score's mean AUC difference to the margin is
    positive and the paired t-test gives :math:`p < 0.05`.

    Claim ``variance``: "variance shifts are better handled by the margin baseline". Read as:
    at every variance level :math:`\\ge 2` the margin's AUC is higher (mean difference
    negative) and significantly so.

    Returns
    -------
    pandas.DataFrame
        One row per (claim, score) with ``levels`` (how many levels :math:`\\ge` from_level),
        ``favourable`` (levels where the mean difference has the claimed sign),
        ``significant`` (of those, with t-test :math:`p <` alpha), ``seed_wins`` (seed-level
        comparisons in the claimed direction, of ``seed_pairs``), ``mean_diff`` (average over
        the levels) and ``holds`` (every level favourable and significant).
    """
    rows = []
    for claim, sign in (("covariate", 1.0), ("variance", -1.0)):
        sub = paired[(paired["shift"] == claim) & (paired["level"] >= from_level)]
        for score in CASE_SCORES:
            s = sub[sub["score"] == score]
            if s.empty:
                continue
            fav = sign * s["mean_diff"] > 0
            sig = fav & (s["t_pvalue"] < alpha)
            wins = s["wins"] if sign > 0 else s["n_seeds"] - s["wins"]
            rows.append(
                {
                    "claim": claim,
                    "score": score,
                    "levels": len(s),
                    "favourable": int(fav.sum()),
                    "significant": int(sig.sum()),
                    "seed_wins": int(wins.sum()),
                    "seed_pairs": int(s["n_seeds"].sum()),
                    "mean_diff": float(s["mean_diff"].mean()),
                    "holds": bool(sig.all() and len(s) > 0),
                }
            )
    return pd.DataFrame(rows)


def claim_status(check: pd.DataFrame, claim: str) -> str:
    """The status of a claim of App. C.4 (:data:`cbdt.book.claims.STATUSES`), from
    :func:`claim_check`'s table of every case-influence score: the words of the claims table.

    * ``"covariate"`` (the case-influence scores exceed the margin from level 2 on):
      ``"agrees"`` when the claim holds for every score (favourable and significant at every
      level), else ``"does not hold"``;
    * ``"variance"`` (the margin is better): ``"agrees"`` when it holds for every score,
      ``"agrees in shape"`` when every score's mean difference is negative but not
      significant at every level, else ``"does not hold"``.

    Parameters
    ----------
    check : pandas.DataFrame
        :func:`claim_check`'s result.
    claim : {"covariate", "variance"}

    Returns
    -------
    str
    """
    rows = check[check["claim"] == claim]
    if rows.empty:
        raise InputError(f"the claim check has no rows for {claim!r}.")
    if claim == "covariate":
        return "agrees" if bool(rows["holds"].all()) else "does not hold"
    if claim == "variance":
        if bool(rows["holds"].all()):
            return "agrees"
        return "agrees in shape" if bool((rows["mean_diff"] < 0).all()) else "does not hold"
    raise InputError(f"claim must be 'covariate' or 'variance', got {claim!r}.")


def claim_sentences(claims: pd.DataFrame, score: str = "risk") -> list[str]:
    """One sentence per claim of App. C.4, generated from :func:`claim_check`.

    Each states the claim's status with the words of the claims table (:func:`claim_status`,
    which :func:`chapter_claims` uses too), then the numbers of one score.
    """
    out = []
    text = {
        "covariate": (
            '"From 2.0 onward the case-influence scores exceed the margin under covariate '
            'shift"'
        ),
        "variance": '"Variance shifts are better handled by the margin"',
    }
    for claim in ("covariate", "variance"):
        r = claims[(claims["claim"] == claim) & (claims["score"] == score)]
        if r.empty:
            continue
        r = r.iloc[0]
        direction = "above" if claim == "covariate" else "below"
        out.append(
            f"{text[claim]}: {claim_status(claims, claim)} (the status in the claims table "
            f"below). For the {score} score, at {r['favourable']} of {r['levels']} {claim} "
            f"levels >= 2 its AUC is {direction} the margin's on average "
            f"({r['significant']} significant, paired t, p < 0.05), {r['seed_wins']} of "
            f"{r['seed_pairs']} seed comparisons go that way, and the mean AUC difference "
            f"({score} - margin) is {r['mean_diff']:+.3f}."
        )
    return out


#: The probe-audited variant of :data:`SENSITIVITY_VARIANTS`.
_SCORE_LABELS = {"risk": "risk $O_\\alpha$", "entropy": "entropy", "gini": "Gini",
                 "margin": "margin", "leverage": "leverage", "knn": "$k$-NN"}

PROBE_VARIANT = "probe's decision audited (probe margin)"


def _levels_txt(levels: Iterable[float]) -> str:
    return ", ".join(f"{v:g}" for v in levels)


def _signed(x: float, decimals: int = 3) -> str:
    """A signed number as Markdown math (a true minus sign)."""
    return f"${float(x):+.{decimals}f}$"


def _auc_table(summary: pd.DataFrame, levels: Sequence[float]) -> dict[str, Any]:
    show = summary[summary["level"].isin(levels)]
    scores = [s for s in SCORES if s in set(show["score"])]
    rows, seen_zero = [], False
    n_all = int(show["n_seeds"].max())
    short = []
    for (shift, level), g in show.groupby(["shift", "level"], sort=False):
        if level == 0:
            if seen_zero:  # every shift is the identity at level 0: one row
                continue
            seen_zero, label = True, "none, 0"
        else:
            label = f"{shift}, {level:g}"
        g = g.set_index("score")
        rows.append([label, *[f"{g.loc[s, 'auc_mean']:.3f}" for s in scores],
                     f"{100 * g['error_rate'].iloc[0]:.1f}%"])
        fewer = g.loc[scores, "n_seeds"].min()
        if fewer < n_all:
            short.append(f"{int(fewer)} at {label}")
    exception = (f"; {', '.join(short)}, where a seed made no wrong decision"
                 if short else "")
    return {
        "caption": (f"AUC (mean over the {n_all} seeds with a defined AUC{exception}) of every "
                    f"score at levels {_levels_txt(sorted(set(levels)))}, and the share of "
                    "wrong network decisions:"),
        "columns": ["shift, level", *[_SCORE_LABELS.get(s, s) for s in scores], "wrong"],
        "rows": rows,
    }


def chapter_claims(
    summary: pd.DataFrame,
    paired: pd.DataFrame,
    sensitivity: pd.DataFrame | None = None,
    pjm_summary: pd.DataFrame | None = None,
    classifier_summary: pd.DataFrame | None = None,
    config: DriftConfig | None = None,
    *,
    alpha: float = 0.05,
    from_level: float = 2.0,
    table_levels: Sequence[float] = (0.0, 2.0, 4.0),
) -> ChapterClaims:
    """Chapter 09's rows of the reproducibility page: App. C.4 beside the book's drift grid.

    Built from results the chapter has already computed (nothing is re-run): the claims of
    App. C.4 are read by :func:`claim_check` on the paired table, the AUC table from
    :func:`cbdt.book.experiments.drift.summarize_grid`, the sensitivity row from :func:`cbdt.book.experiments.drift.drift_sensitivity`, and the
    book-only rows from :func:`pjm_drift_rows` and
    :func:`classifier_rows`.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`cbdt.book.experiments.drift.summarize_grid` of the chapter's :func:`cbdt.book.experiments.drift.drift_grid`.
    paired : pandas.DataFrame
        :func:`cbdt.book.experiments.drift.paired_vs_margin` of the same grid.
    sensitivity : pandas.DataFrame, optional
        :func:`cbdt.book.experiments.drift.drift_sensitivity` (adds the book-only sensitivity row).
    pjm_summary : pandas.DataFrame, optional
        :func:`cbdt.book.experiments.pjm_drift.summarize_pjm_drift` (adds the real-drift rows).
    classifier_summary : pandas.DataFrame, optional
        :func:`cbdt.book.experiments.classifier.summarize_classifier` (adds the classifier row).
    config : DriftConfig, optional
        The grid's configuration (default :class:`cbdt.book.experiments.drift.DriftConfig`), for the set-up paragraph.
    alpha : float, default=0.05
        Significance level of the paired t-tests.
    from_level : float, default=2.0
        The paper's "from drift strength 2.0 onward".
    table_levels : sequence of float, default=(0, 2, 4)
        Levels of the AUC table.

    Returns
    -------
    ChapterClaims

    Notes
    -----
    Status rules:

    * covariate claim ("from 2.0 onward the entropy and disagreement scores consistently
      exceed the margin"): ``agrees`` when :func:`claim_check` finds it holding for every
      case-influence score (favourable and significant at every level >= ``from_level``),
      else ``does not hold``;
    * variance claim (the margin is better): ``agrees`` when it holds for every
      case-influence score, ``agrees in shape`` when every score's mean difference is
      negative but not significant at every level, else ``does not hold``;
    * mean-shift claim ("weaker"): ``agrees in shape`` when the mean absolute risk - margin
      difference over levels >= ``from_level`` is smaller under the mean shift than under
      the two others, else ``does not hold``;
    * Fig. C3 (significant paired gains of the entropy score under larger covariate shift):
      ``agrees`` when some covariate level >= ``from_level`` has a positive entropy - margin
      difference significant after a Bonferroni correction over those levels (paired t,
      p < ``alpha`` / their number: any one level would do, so each is tested at the
      family's level), else ``does not hold``.
    """
    cfg = DriftConfig() if config is None else config
    need = {"shift", "level", "score", "mean_diff", "t_pvalue", "wins", "n_seeds"}
    if not need <= set(paired.columns):
        raise InputError(f"paired must be paired_vs_margin's table (columns {sorted(need)}).")
    check = claim_check(paired, alpha=alpha, from_level=from_level)
    if check.empty:
        raise InputError("paired holds no covariate or variance level >= from_level.")
    rows: list[Claim] = []
    L = f"{from_level:g}"
    L1 = f"{from_level:.1f}"
    n_seeds = int(paired["n_seeds"].max())

    def cc(claim: str) -> pd.DataFrame:
        return check[check["claim"] == claim].set_index("score")

    def at_levels(shift: str, score: str) -> pd.DataFrame:
        return paired[(paired["shift"] == shift) & (paired["level"] >= from_level)
                      & (paired["score"] == score)]

    # --- covariate: the case-influence scores exceed the margin from level 2 on -----------
    cov = cc("covariate")
    names = {"risk": "risk", "entropy": "entropy", "gini": "Gini"}
    parts = [f"{names[s]} {_signed(r['mean_diff'])} (above 0 at {r['favourable']} of {r['levels']} "
             f"levels, {r['significant']} significant)" for s, r in cov.iterrows()]
    wins = ", ".join(f"{r['seed_wins']}" for _, r in cov.iterrows())
    holds = claim_status(check, "covariate") == "agrees"
    n_fav = int(cov["favourable"].sum())
    flips: list[str] = []
    if sensitivity is not None:
        cols = [f"{sh} dAUC" for sh in SHIFTS]
        if not set(cols) <= set(sensitivity.columns):
            raise InputError("sensitivity must be drift_sensitivity's table.")
        flips = [v for v in sensitivity.index if (sensitivity.loc[v, cols] > 0).any()]
    setting = "in the book's grid (network decision audited" if cfg.decision == "network" else (
        "in the book's grid (probe decision audited")
    setting += ("; the sensitivity row below names the reading that flips it)" if len(flips) == 1
                else "; the sensitivity row below names the readings that flip it)" if flips
                else ")")
    if holds:
        cov_reason = "favourable and significant (paired $t$) at every level for every score"
    elif n_fav == 0:
        cov_reason = (f"the margin's AUC is higher at every covariate level $\\ge {L}$ for "
                      f"every score, {setting}")
    else:
        cov_reason = f"not favourable and significant at every level for every score, {setting}"
    rows.append(Claim(
        f"C.4: from drift strength {L1} on, the case-influence entropy and disagreement "
        "(Gini) scores consistently exceed the network margin under covariate shift, in "
        "paired seeds",
        "consistently, in paired seeds",
        f"score $-$ margin AUC over covariate levels $\\ge {L}$: " + "; ".join(parts)
        + f"; {wins} of {int(cov['seed_pairs'].iloc[0])} seed pairs favour the score "
        f"({', '.join(names[s] for s in cov.index)})",
        "agrees" if holds else "does not hold",
        cov_reason,
    ))

    # --- variance: better handled by the margin -------------------------------------------
    var = cc("variance")
    r = var.loc["risk"] if "risk" in var.index else var.iloc[0]
    var_status = claim_status(check, "variance")
    rows.append(Claim(
        "C.4: variance shifts are better handled by the margin",
        "yes",
        f"margin higher at {r['favourable']} of {r['levels']} variance levels $\\ge {L}$, "
        f"{r['significant']} significant (paired $t$), {r['seed_wins']} of {r['seed_pairs']} "
        f"seed pairs (risk $-$ margin {_signed(r['mean_diff'])}; entropy "
        f"{_signed(var.loc['entropy', 'mean_diff'])}, Gini "
        f"{_signed(var.loc['gini', 'mean_diff'])})"
        if {"entropy", "gini"} <= set(var.index) else
        f"margin higher at {r['favourable']} of {r['levels']} variance levels $\\ge {L}$",
        var_status,
        {"agrees": "",
         "agrees in shape": "the margin is higher on average but not significantly at every "
                            "level"}.get(var_status, "a case-influence score beats the margin "
                                                     "on average under variance shift"),
    ))

    # --- mean shift: weaker differences ---------------------------------------------------
    gap = {sh: float(at_levels(sh, "risk")["mean_diff"].mean()) for sh in SHIFTS}
    mean_all = paired[(paired["shift"] == "mean") & (paired["score"] == "risk")]
    mean_hi = at_levels("mean", "risk")
    sig_levels = mean_hi.loc[(mean_hi["t_pvalue"] < alpha), "level"].tolist()
    weaker = all(abs(gap["mean"]) < abs(gap[sh]) for sh in SHIFTS if sh != "mean")
    lo_d, hi_d = mean_all["mean_diff"].min(), mean_all["mean_diff"].max()
    rows.append(Claim(
        "C.4: mean-shift differences are weaker",
        "weaker",
        f"risk $-$ margin {_signed(hi_d, 2)} to {_signed(lo_d, 2)} over all mean levels; mean "
        f"over levels $\\ge {L}$ {_signed(gap['mean'])} against {_signed(gap['covariate'])} "
        f"(covariate) and {_signed(gap['variance'])} (variance); significant (paired $t$) at "
        f"{len(sig_levels)} of {len(mean_hi)} levels $\\ge {L}$"
        + (f" ({_levels_txt(sig_levels)})" if sig_levels else ""),
        "agrees in shape" if weaker else "does not hold",
        ("the mean shift has the smallest gap"
         + (", but every gap favours the margin" if all(g < 0 for g in gap.values()) else "")
         + "; the paper gives no values")
        if weaker else "the mean-shift gap is not the smallest of the three",
    ))

    # --- Fig. C3: entropy vs margin, significant gains under larger covariate shift -------
    ent = at_levels("covariate", "entropy")
    a_fam = alpha / max(len(ent), 1)  # Bonferroni: one test per level, any level may count
    gains = ent[(ent["mean_diff"] > 0) & (ent["t_pvalue"] < a_fam)]
    min_wilcoxon = 2.0 / 2**n_seeds
    rows.append(Claim(
        "Fig. C3: the paired test of the entropy score against the margin shows significant "
        "gains under larger covariate shift",
        "yes",
        f"entropy $-$ margin above 0 at {int((ent['mean_diff'] > 0).sum())} of {len(ent)} "
        f"covariate levels $\\ge {L}$, significant (paired $t$, $p<{alpha:g}/{len(ent)}$) at "
        f"{len(gains)}",
        "agrees" if len(gains) else "does not hold",
        f"a gain counts at $p<{alpha:g}/{len(ent)}$ (Bonferroni over the {len(ent)} levels, "
        "since any one level would do); "
        + (f"with {n_seeds} seeds the exact two-sided Wilcoxon test cannot reach $p<{alpha:g}$ "
           f"(minimum {min_wilcoxon:.4g}); significance is read from the paired $t$-test"
           if min_wilcoxon >= alpha else "significance is read from the paired $t$-test"),
    ))

    # --- sensitivity (book only) ----------------------------------------------------------
    if sensitivity is not None:
        cols = [f"{sh} dAUC" for sh in SHIFTS]
        flip = flips
        rest = len(sensitivity) - len(flip)
        if flip:
            desc = "; ".join(
                f"{v}: " + ", ".join(f"{sh} {_signed(sensitivity.loc[v, c])}"
                                     for sh, c in zip(SHIFTS, cols, strict=True))
                for v in flip)
            book = (f"risk beats the margin (mean AUC difference over levels $\\ge {L}$ > 0) only "
                    f"under {len(flip)} of {len(sensitivity)} variants: {desc}; in the other "
                    f"{rest} the margin wins under every shift")
        else:
            book = (f"in none of the {len(sensitivity)} variants does the risk score beat the "
                    "margin under any shift")
        others = sensitivity.drop(index=flip)
        closest = others[cols].max(axis=1)
        reason = ""
        if len(others):
            v = closest.idxmax()
            reason = (f"smallest gap with the network's decision audited {_signed(closest.max())} "
                      f"({v}, {others.loc[v, cols].astype(float).idxmax().split()[0]} shift)")
        err = "error rate at max level"
        if PROBE_VARIANT in sensitivity.index and err in sensitivity.columns:
            reason = (f"the OLS probe errs on {sensitivity.loc[PROBE_VARIANT, err]:.0%} of "
                      f"its decisions at the largest level (the network on "
                      f"{sensitivity[err].iloc[0]:.0%}): its margin is unreliable under shift"
                      + (f"; {reason}" if reason else ""))
        rows.append(Claim(
            f"Sensitivity (book only): which of the {len(sensitivity)} readings of the open "
            "choices make the risk score beat the margin",
            "-",
            book,
            "book only",
            reason,
        ))

    if pjm_summary is not None:
        rows += pjm_drift_rows(pjm_summary)
    if classifier_summary is not None:
        rows += classifier_rows(classifier_summary)

    who = "network's" if cfg.decision == "network" else "OLS probe's"
    wrong = ("differs from the generator's CBDT-optimal action at the shifted input"
             if cfg.wrong == "truth" else "differs from the CBDT decision over the training memory")
    eps = "$\\varepsilon \\to 0$" if cfg.eps == 0 else f"$\\varepsilon = {cfg.eps:g}$"
    intro = [
        "The paper does not define its shifts, test sets or \"wrong\"; the chapter states the "
        f"book's definitions (the {who} decision audited, wrong = {wrong}, "
        f"{cfg.n_queries:,} test problems per configuration, {n_seeds} seeds, top-{cfg.k} "
        f"cases, {eps}) and a sensitivity table over every open choice. The paper's claims are "
        f"read as tests at every level $\\ge {L}$: the mean paired AUC difference on the "
        f"claimed side and significant (paired $t$, $p < {alpha:g}$)."
    ]
    return ChapterClaims(
        chapter="09",
        title="Risk score under distribution shift",
        doc="notebooks/09_drift_grid",
        claims=rows,
        intro=intro,
        tables=[_auc_table(summary, list(table_levels))],
        tolerance=TRAINED_TOLERANCE,
    )


def classifier_rows(summary: pd.DataFrame, dataset: str = "digits classifier") -> list[Claim]:
    """The book-only row of chapter 09 on a classifier, from :func:`cbdt.book.experiments.classifier.summarize_classifier`.

    Parameters
    ----------
    summary : DataFrame
        :func:`cbdt.book.experiments.classifier.summarize_classifier` of the chapter's :func:`cbdt.book.experiments.classifier.classifier_audit`.
    dataset : str, default="digits classifier"
        How the row names the data set.

    Returns
    -------
    list of Claim
        One row, status ``"book only"``: the paper has no classifier experiment.
    """
    need = {"auc_mean", "auc_ci", "n_defined", "n_seeds", "max_gini", "max_abs_entropy"}
    if not isinstance(summary, pd.DataFrame) or not need <= set(summary.columns):
        raise InputError(f"summary must be summarize_classifier's table (columns {sorted(need)}).")
    for name in ("risk (contribution)", "risk (coefficient)", "margin"):
        if name not in summary.index:
            raise InputError(f"summary has no row {name!r}.")

    def auc(name: str) -> str:
        r = summary.loc[name]
        n_def, n = int(r["n_defined"]), int(r["n_seeds"])
        if n_def == 0:
            return f"constant (AUC undefined on {n} of {n} seeds)"
        val = mean_ci_math(r["auc_mean"], r["auc_ci"]) if np.isfinite(r["auc_ci"]) else (
            f"{r['auc_mean']:.3f}")
        return val if n_def == n else f"{val} ({n_def} of {n} seeds defined)"

    contrib = summary.loc["risk (contribution)"]
    n_seeds = int(summary["n_seeds"].max())
    blind = int(contrib["n_defined"]) == 0
    ent = float(contrib["max_abs_entropy"])
    ent_txt = "0" if ent == 0 else f"below $10^{{{int(np.ceil(np.log10(ent)))}}}$"
    reason = (
        "with one-hot returns $\\psi_i(a, x) = \\alpha_i(x)\\mathbf 1\\{y_i = a\\}$: the top-10 "
        "cases by $\\lvert\\psi_i\\rvert$ all carry the audited label, so Gini disagreement is "
        f"{contrib['max_gini']:.3g} and the entropy {ent_txt} for every test image; ranking by "
        "$\\lvert\\alpha_i\\rvert$ restores a signal"
    ) if blind else "the contribution-ranked risk score varies on this data set"
    return [Claim(
        f"{dataset[:1].upper()}{dataset[1:]} (book only; one-hot returns, {n_seeds} seeds): "
        "AUC of the risk score for the network's wrong decisions",
        "-",
        f"top-10 by $\\lvert\\psi\\rvert$ (eq. 16): {auc('risk (contribution)')}; by "
        f"$\\lvert\\alpha\\rvert$: {auc('risk (coefficient)')}; margin: {auc('margin')}",
        "book only",
        reason,
    )]


#: How the claim rows name the scores.
_LABELS = {"risk": "risk", "risk_alpha": "risk, top-10 by $\\lvert\\alpha\\rvert$",
           "margin": "margin", "leverage": "leverage"}


def pjm_drift_rows(summary: pd.DataFrame) -> list[Claim]:
    """The book-only rows of chapter 09 on the real PJM drift, from :func:`cbdt.book.experiments.pjm_drift.summarize_pjm_drift`.

    Averages over the test years of the per-year means (as the chapter prints them): the
    AUC of every score for the network's wrong decisions, and the share of wrong decisions a
    review of the riskiest ``budget`` of each year catches (``caught_ties``).

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`cbdt.book.experiments.pjm_drift.summarize_pjm_drift` of the chapter's :func:`cbdt.book.experiments.pjm_drift.pjm_drift` run (its ``attrs``
        carry the review budget).

    Returns
    -------
    list of Claim
        Status ``"book only"``: the paper has no real-drift experiment.
    """
    need = {"split", "auc_mean", "caught_ties_mean", "risk_nonzero_mean", "n_seeds"}
    if not isinstance(summary, pd.DataFrame) or not need <= set(summary.columns):
        raise InputError(f"summary must be summarize_pjm_drift's table (columns {sorted(need)}).")
    flat = summary.reset_index()
    test = flat[flat["split"] == "test"]
    train = flat[flat["split"] == "train"]
    if test.empty:
        raise InputError("summary has no test year.")
    avg = test.groupby("score")[["auc_mean", "caught_ties_mean", "risk_nonzero_mean"]].mean()
    scores = [s for s in pjm_drift.SCORES if s in avg.index]
    tr = sorted(train["year"].unique())
    te = sorted(test["year"].unique())
    n_seeds = int(flat["n_seeds"].max())
    budget = float(summary.attrs.get("budget", 0.1))
    setting = (f"trained on {tr[0]}-{tr[-1]}" if tr else "trained once") + (
        f", audited yearly {te[0]}-{te[-1]}, {n_seeds} seeds")
    aucs = ", ".join(f"{avg.loc[s, 'auc_mean']:.3f} ({_LABELS.get(s, s)})" for s in scores)
    caught = ", ".join(f"{avg.loc[s, 'caught_ties_mean']:.0%} ({_LABELS.get(s, s)})"
                       for s in scores)
    rows = []
    risk_auc = float(avg.loc["risk", "auc_mean"]) if "risk" in avg.index else float("nan")
    agree = 1.0 - float(avg.loc["risk", "risk_nonzero_mean"]) if "risk" in avg.index else float(
        "nan")
    if abs(risk_auc - 0.5) < 0.05:
        reason = (f"the risk score is near chance: in {agree:.1%} of test decisions its top-10 "
                  "cases by $\\lvert\\psi_i\\rvert$ agree on the best action (the heavy "
                  "tail of $\\lvert r_i(a)\\rvert$ dominates the ranking), so it ties")
    else:
        reason = (f"the risk score's top-10 cases by $\\lvert\\psi_i\\rvert$ agree on the best action in "
                  f"{agree:.1%} of test decisions")
    rows.append(Claim(
        f"Real drift on PJM East load (book only; frozen policy {setting}): mean test-year "
        "AUC for the network's wrong decisions",
        "-",
        aucs,
        "book only",
        reason,
    ))
    rows.append(Claim(
        f"PJM real drift: share of the wrong decisions caught by reviewing the riskiest "
        f"{budget:.0%} of each test year",
        "-",
        caught,
        "book only",
        f"a random review catches about {budget:.0%} in expectation",
    ))
    return rows
