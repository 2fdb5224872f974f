"""Chapter 08, the UCI audits: the paper beside the book.

:func:`chapter_claims` phrases :mod:`cbdt.book.experiments.uci`'s results as the chapter's
claims.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from cbdt.datasets.uci import default_credit_proxy_returns
from cbdt.exceptions import InputError
from cbdt.metrics import mean_ci

from ..experiments.uci import (
    DEFAULT_CREDIT_ACTION_LABELS,
    PAPER,
    PAPER_GRAM_MISMATCH,
    UCIAudit,
)
from . import TRAINED_TOLERANCE, ChapterClaims, Claim, fmt, interval_status
from . import mean_ci_math as fmt_ci

__all__ = [
    "A2_NEAR_ONE",
    "PAPER_SUBMEMORY",
    "chapter_claims",
    "label_error_scale",
    "majority_rate",
    "training_sentence",
]

#: The book's reading of the paper's "A2 satisfaction near 1.0" (the paper gives no number).
A2_NEAR_ONE: float = 0.99


PAPER_SUBMEMORY: dict[str, str] = {
    "gram_mismatch": f"delinquency highest, about {PAPER_GRAM_MISMATCH}",
    "a2": "near 1.0 (delinquency)",
}


def _multiple_md(c: float) -> str:
    """A bandwidth multiple as the chapter writes it (``1/8``, ``1``)."""
    f = Fraction(float(c)).limit_denominator(1024)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def _grid_position(paper: float, curve: pd.Series) -> str:
    """Where ``paper`` lies on the agreement-by-multiple curve (mean over seeds)."""
    curve = curve.sort_index()
    v = curve.to_numpy(dtype=float)
    c = curve.index.to_numpy(dtype=float)
    if paper > v.max():
        return "above every point of the grid"
    if paper < v.min():
        return "below every point of the grid"
    between = [
        f"$\\nu = {_multiple_md(c[i])}$ ({v[i]:.3f}) and $\\nu = {_multiple_md(c[i + 1])}$ "
        f"({v[i + 1]:.3f})"
        for i in range(v.size - 1)
        if min(v[i], v[i + 1]) <= paper <= max(v[i], v[i + 1])
    ]
    return "between " + ", and again between ".join(between)


def label_error_scale() -> float:
    """What a squared error over the three Default Credit returns is in the label itself.

    Every Default Credit return is an affine function of the default label y
    (:func:`cbdt.datasets.uci.default_credit_proxy_returns`), with slopes ``d_a``; an error
    ``e`` in predicting y is an error ``d_a e`` in the return of action ``a``, so a mean
    squared error ``L`` over the three returns is ``L / mean(d_a^2)`` in y.

    Returns
    -------
    float
        ``mean(d_a^2)`` (9.75 for the slopes -0.5, -2 and -5).
    """
    r = default_credit_proxy_returns(pd.DataFrame({"y": [0, 1]}))
    return float(np.mean((r[1] - r[0]) ** 2))


def majority_rate(audit: UCIAudit) -> float:
    """The accuracy of always predicting the test records' most frequent label.

    Parameters
    ----------
    audit : UCIAudit
        :func:`cbdt.book.experiments.uci.uci_audit`'s result (each run's ``task.y_test``).

    Returns
    -------
    float
        The share of the most frequent label, mean over the seeds' test sets.
    """
    if not audit.runs:
        raise InputError("the audit holds no run.")
    return float(np.mean([np.bincount(r.task.y_test).max() / r.task.y_test.size
                          for r in audit.runs]))


#: :func:`training_sentence`'s columns: (data set, training-loss column, constant column).
_LOSS_COLUMNS = (("Adult", "Adult train loss", "Adult constant"),
                 ("Default Credit", "Default train loss", "Default constant"))


def training_sentence(loss: pd.DataFrame, label_scale: float | None = None) -> str:
    """Chapter 08's sentence on the networks' final training loss against the best constant.

    Parameters
    ----------
    loss : pandas.DataFrame
        One row per seed with the columns ``Adult train loss``, ``Adult constant``, ``Default
        train loss`` and ``Default constant`` (the chapter's loss table); means over the
        seeds are compared.
    label_scale : float, optional
        :func:`label_error_scale` (the default): the Default Credit losses are also given as
        an error in the label.

    Returns
    -------
    str
        Markdown, numbers to 3 significant digits.
    """
    cols = [c for _, *pair in _LOSS_COLUMNS for c in pair]
    missing = [c for c in cols if c not in loss.columns]
    if missing:
        raise InputError(f"loss lacks the columns {missing}; got {list(loss.columns)}.")
    scale = label_error_scale() if label_scale is None else float(label_scale)
    parts, below = [], []
    for name, train, const in _LOSS_COLUMNS:
        t, c = float(loss[train].mean()), float(loss[const].mean())
        below.append(t < c)
        part = f"the {name} network at {fmt(t)} against {fmt(c)} ({t / c:.0%} of it)"
        if name == "Default Credit":
            part += (f", a squared error of {fmt(t / scale)} against {fmt(c / scale)} in the "
                     f"default label itself (the loss divided by {scale:g})")
        parts.append(part)
    lead = ("Both networks end below the constant predictor" if all(below) else
            "Not every network ends below the constant predictor")
    return f"{lead} (training loss, mean over the seeds): {'; '.join(parts)}."


def chapter_claims(
    adult: UCIAudit,
    credit: UCIAudit,
    credit_optimal: pd.DataFrame,
) -> ChapterClaims:
    """The paper's UCI claims beside the chapter's results (the reproducibility page's rows).

    Every value, status and reason is computed from the audits passed in (their ``per_seed``,
    ``sensitivity`` and ``submemory`` tables); nothing is re-run. Statuses:
    :func:`cbdt.book.claims.interval_status` for the agreements and the Default Credit
    :math:`\\rho_{recon}` (agrees only when every action's paper value lies in the book's
    interval); "not comparable" for the Adult accuracy, which the paper does not define;
    for the Gram mismatch, whose measure the paper does not define either, "agrees in shape"
    when the delinquency split has the highest mismatch under both of the book's definitions
    (whitened and raw), "not comparable" under one, "does not hold" under neither. For A2,
    which the paper neither quantifies nor defines, "agrees" (the paper's value inside the
    book's interval) cannot apply: "agrees in shape" when the CBDT supports satisfy A2
    exactly and the whole 95% interval of the delinquency split's OLS probes lies at or above
    :data:`A2_NEAR_ONE` (the book's reading of "near 1"), "differs" when the interval
    straddles it, "does not hold" when it lies below or the CBDT supports fail A2.

    Parameters
    ----------
    adult, credit : UCIAudit
        :func:`cbdt.book.experiments.uci.uci_audit` of ``"adult"`` and ``"default_credit"`` (only ``per_seed``,
        ``sensitivity`` and, for ``credit``, ``submemory`` are read).
    credit_optimal : pandas.DataFrame
        :func:`cbdt.book.experiments.uci.optimal_action_counts` of the Default Credit proxy returns (all records).

    Returns
    -------
    cbdt.book.claims.ChapterClaims
        Chapter ``"08"``, section "UCI audits".
    """
    rows: list[Claim] = []

    def curve(audit: UCIAudit) -> pd.Series:
        return audit.sensitivity.groupby("multiple")["agreement"].mean()

    def bandwidth_reason(paper: float, audit: UCIAudit) -> str:
        cv = curve(audit)
        spread = 100 * (cv.max() - cv.min())
        return (
            f"the paper's similarity is not given; the book's agreement moves by "
            f"{spread:.0f} points across its bandwidth grid ({cv.min():.3f}-{cv.max():.3f}, "
            f"mean over seeds), and the paper's value lies {_grid_position(paper, cv)}"
        )

    # -- Adult (Sec. 5.4)
    pa = PAPER["adult"]
    p_agree = pa["agreement"][0]  # type: ignore[index]
    m, h = mean_ci(adult.per_seed["agreement"].to_numpy(dtype=float))
    rows.append(Claim("Adult: network-CBDT agreement", f"{p_agree:.4f}", fmt_ci(m, h, 3),
                      interval_status(p_agree, m, h), bandwidth_reason(p_agree, adult)))

    p_acc = pa["label_accuracy"][0]  # type: ignore[index]
    m, h = mean_ci(adult.per_seed["label_accuracy"].to_numpy(dtype=float))
    readings = {
        "income label": m,
        "case-optimal action": float(adult.per_seed["optimal_accuracy"].mean()),
        "optimal set": float(adult.per_seed["optimal_set_accuracy"].mean()),
    }
    if p_acc < min(readings.values()):
        where = "below all three of the book's readings"
    elif p_acc > max(readings.values()):
        where = "above all three of the book's readings"
    else:
        where = "within the range of the book's three readings"
    rows.append(Claim(
        "Adult: network accuracy",
        f"{p_acc:.4f}",
        f"{fmt_ci(m, h, 3)} (income-label accuracy)",
        "not comparable",
        f"the paper does not define it; its value lies {where} ("
        + ", ".join(f"{k} {v:.3f}" for k, v in readings.items()) + ")",
    ))

    # -- Default Credit (Sec. 5.4, App. C.6)
    pc = PAPER["default_credit"]
    pm, ph = pc["agreement"]  # type: ignore[misc]
    m, h = mean_ci(credit.per_seed["agreement"].to_numpy(dtype=float))
    overlap = abs(m - pm) <= h + ph
    rows.append(Claim(
        "Default Credit: network-CBDT agreement",
        fmt_ci(pm, ph, 4),
        fmt_ci(m, h, 3),
        interval_status(pm, m, h),
        bandwidth_reason(pm, credit)
        + ("; the two intervals overlap" if overlap else "; the two intervals do not overlap"),
    ))

    labels = list(credit.action_labels) if credit.runs else list(DEFAULT_CREDIT_ACTION_LABELS)
    short = [f"$a_{lab.split()[0][1:]}$" for lab in labels]
    paper_rec = [pc[f"rho_recon_{a}"] for a in range(len(labels))]
    book_rec = [mean_ci(credit.per_seed[f"rho_recon_{a}"].to_numpy(dtype=float))
                for a in range(len(labels))]
    outside = [f"{s} (by {fmt(abs(p[0] - mm) - hh, 1)})"  # type: ignore[index]
               for s, p, (mm, hh) in zip(short, paper_rec, book_rec, strict=True)
               if interval_status(p[0], mm, hh) == "differs"]  # type: ignore[index]
    weakest_book = short[int(np.argmin([mm for mm, _ in book_rec]))]
    weakest_paper = short[int(np.argmin([p[0] for p in paper_rec]))]  # type: ignore[index]
    opt = credit_optimal.set_index("action")["argmax"]
    a1 = labels[1]
    rows.append(Claim(
        r"Default Credit: $\rho_{recon}$ per action ($a_0$ / $a_1$ / $a_2$)",
        " / ".join(fmt_ci(p[0], p[1], 3) for p in paper_rec),  # type: ignore[index]
        " / ".join(fmt_ci(mm, hh, 3) for mm, hh in book_rec),
        "differs" if outside else "agrees",
        (f"the paper's value lies outside the book's interval for {', '.join(outside)}; "
         if outside else "")
        + f"under the C.5 returns the standard approval $a_1$ is case-optimal for "
        f"{int(opt[a1]):,} of {int(opt.sum()):,} records; the weakest action is "
        f"{weakest_book} here, {weakest_paper} in the paper",
    ))

    sub = credit.submemory
    if sub is None or sub.empty:
        raise InputError("the Default Credit audit has no sub-memory table.")
    gm = sub.groupby("split", sort=False)[["gram_mismatch", "gram_mismatch_raw"]].mean()
    top_w = gm["gram_mismatch"].idxmax()
    top_r = gm["gram_mismatch_raw"].idxmax()
    n_top = int(top_w == "delinquency") + int(top_r == "delinquency")
    status = {2: "agrees in shape", 1: "not comparable", 0: "does not hold"}[n_top]
    order = gm["gram_mismatch"].sort_values(ascending=False)
    delinq = gm.loc["delinquency"]
    above = PAPER_GRAM_MISMATCH > gm.to_numpy().max()
    rows.append(Claim(
        "Default Credit: the delinquency split has the highest Gram mismatch",
        PAPER_SUBMEMORY["gram_mismatch"],
        f"{'highest' if top_w == 'delinquency' else f'not highest ({top_w} is)'}: "
        f"{delinq['gram_mismatch']:.3f} (book's whitened definition), "
        f"{delinq['gram_mismatch_raw']:.3f} (raw)",
        status,
        "the paper does not define the measure; ranking (whitened): "
        + ", ".join(f"{k} {v:.3f}" for k, v in order.items())
        + f"; raw: {top_r} highest"
        + (f"; the paper's {PAPER_GRAM_MISMATCH} is above every split under both definitions"
           if above else ""),
    ))

    a2_cbdt_min = float(sub["a2_cbdt"].min())
    d = sub[sub["split"] == "delinquency"]["a2_ols"].to_numpy(dtype=float)
    m, h = mean_ci(d)
    per_split = sub.groupby("split", sort=False)["a2_ols"].mean()
    exact = a2_cbdt_min == 1.0
    if exact and m - h >= A2_NEAR_ONE:
        a2_status, a2_where = "agrees in shape", "the whole interval lies at or above it"
    elif exact and m + h >= A2_NEAR_ONE:
        a2_status, a2_where = "differs", "the interval reaches below it"
    else:
        a2_status = "does not hold"
        a2_where = ("the interval lies entirely below it" if exact else
                    "and CBDT supports, which satisfy A2 by construction, fail it")
    cbdt_txt = "1 exactly" if exact else f"at least {a2_cbdt_min:.4f}"
    rows.append(Claim(
        "Default Credit: A2 satisfaction near 1 (delinquency split)",
        PAPER_SUBMEMORY["a2"],
        f"{cbdt_txt} for CBDT supports; {fmt_ci(m, h, 4)} for OLS probes "
        f"({per_split.min():.4f}-{per_split.max():.4f} over the four splits)",
        a2_status,
        "the paper gives neither a number nor a definition, so the claim can hold only in "
        "shape: A2 is the book's definition (share of jointly ranked query-action pairs the "
        f"union preserves), and near 1 is read as at least {A2_NEAR_ONE} for the OLS probes' "
        f"95% interval; {a2_where}",
    ))

    chosen = pd.concat([adult.per_seed["bandwidth_multiple"],
                        credit.per_seed["bandwidth_multiple"]]).value_counts()
    chosen_txt = ", ".join(f"$\\nu = {_multiple_md(c)}$ in {n} of {int(chosen.sum())} runs"
                           for c, n in chosen.items())
    intro = [
        "Both tables have labels only; the returns are the proxy returns of App. C.5, "
        "implemented as printed. The network, the Gaussian similarity of the CBDT decision "
        "maker and its bandwidth are the book's: $\\omega = \\nu\\,d_{med}$, with $\\nu$ chosen by the "
        f"CBDT decision maker's own held-out return ({chosen_txt}). Book values: mean and 95% "
        f"interval over {len(adult.per_seed)} seeds."
    ]
    n_a1 = int(opt[a1])
    notes = [
        "Under the C.5 returns Default Credit is a two-action problem: standard approval $a_1$ "
        f"is case-optimal for {n_a1:,} of {int(opt.sum()):,} records, and for a "
        "similarity-weighted default rate $\\bar p$ the three mean returns $0.5 - 0.5\\bar p$, "
        "$1 - 2\\bar p$ and $2 - 5\\bar p$ all meet at $\\bar p = 1/3$, so CBDT chooses $a_0$ "
        "above and $a_2$ below it. Agreement there measures whether the network's and the "
        "kernel's default-rate estimates fall on the same side of 1/3, and no property of the "
        "returns makes $a_1$ the hardest action to reconstruct."
    ] if n_a1 == 0 else []
    return ChapterClaims("08", "UCI audits", "notebooks/08_uci_audits", rows, intro=intro,
                         notes=notes, tolerance=TRAINED_TOLERANCE)
