"""``cbdt`` on the command line: reproduce the paper's tables and figures.

Usage::

    cbdt list                                   # what can be reproduced, and where the book shows it
    cbdt reproduce                              # everything (about 10 minutes on 2 cores)
    cbdt reproduce --only table1,table-c2 --seeds 5 --out results/

(``python -m cbdt ...`` is the same.) Each artifact runs the functions of
:mod:`cbdt.experiments` that its chapter calls, with explicit seeds, and writes its tables
as CSV and Markdown and its figures as PNG under ``OUT/<artifact>/``; a summary
(``OUT/summary.md``) lists every file with the time it took. The real-data artifacts read
their files through :func:`cbdt.datasets.fetch` (``CBDT_DATA_DIR``, the cache, a verified
download).
"""

from __future__ import annotations

import argparse
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
        ``run(seeds) -> (tables, figures)``: dicts of name to DataFrame / Figure.
    """

    name: str
    paper: str
    chapter: str
    minutes: float
    run: Callable[[tuple[int, ...]], tuple[dict[str, pd.DataFrame], dict[str, Any]]]


# ------------------------------------------------------------------------------ artifacts
def _table1(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import synthetic as syn

    cmp = syn.attribution_comparison(seeds)
    summary = syn.summarize_comparison(cmp)
    fig = plots.plot_attribution_comparison(summary)
    return {"table1_attribution": summary, "per_seed": cmp}, {"figC5_attribution": fig}


def _table_cost(seeds: tuple[int, ...]):
    from .experiments import synthetic as syn

    timing = syn.attribution_timing(seeds)
    return {"tableD_cost": syn.summarize_timing(timing), "per_seed": timing}, {}


def _fig_synthetic(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import synthetic as syn

    rec = syn.synthetic_recovery(seeds)
    regions = syn.decision_regions(seed=seeds[0])
    recon = syn.support_reconstruction(seed=seeds[0])
    fig = plots.plot_synthetic_recovery(regions, recon)
    return {"recovery_per_seed": rec, "support_reconstruction": recon}, {
        "figA_synthetic_recovery": fig
    }


def _pjm_runs(seeds: tuple[int, ...]):
    from .experiments import pjm

    return pjm.pjm_runs(seeds)


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
    return tables, figs


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
    return {"signed_geometry": summary}, figs


def _table2(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import pjm

    run0 = _pjm_runs(seeds[:1])[0]
    audit = pjm.audit_query(run0, pjm.default_audit_index(run0))
    return {"table2_case_audit": audit.cases}, {"table2_case_audit": plots.plot_case_audit(audit)}


def _fig_uci(seeds: tuple[int, ...]):
    from . import plots
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
    return tables, {"figA_uci": plots.plot_uci_figure4(panels)}


def _drift(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import drift

    grid = drift.drift_grid(seeds=seeds)
    summary = drift.summarize_grid(grid)
    paired = drift.paired_vs_margin(grid)
    figs = {"figC3_drift_grid": plots.plot_drift_grid(summary),
            "figC4_paired": plots.plot_drift_paired(paired)}
    return {"drift_auc": summary, "paired_vs_margin": paired,
            "claims_C4": drift.claim_check(paired)}, figs


def _table_c2(seeds: tuple[int, ...]):
    from . import plots
    from .experiments import nystrom as nys

    tab = pd.concat([nys.nystrom_table(method="features", seeds=seeds),
                     nys.nystrom_table(method="cases", seeds=seeds)])
    summary = nys.summarize_nystrom(tab)
    return {"tableC2_nystrom": summary, "per_seed": tab}, {
        "tableC2_agreement": plots.plot_nystrom_agreement(summary, k=30)
    }


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
                 "07_pjm_audit", 1.5, _fig_pjm),
        Artifact("fig-signed", "Fig. (signed case influence) and Fig. C2 (alpha-distance)",
                 "07_pjm_audit", 0.5, _fig_signed),
        Artifact("table2", "Table 2 (PJM case audit of one decision)",
                 "07_pjm_audit", 0.3, _table2),
        Artifact("fig-uci", "Fig. (UCI Adult and Default Credit audits)",
                 "08_uci_audits", 2.0, _fig_uci),
        Artifact("drift", "Fig. C3 (risk drift grid) and Fig. C4 (paired comparison)",
                 "09_drift_grid", 2.0, _drift),
        Artifact("table-c2", "Table C2 (Nystrom approximation)",
                 "10_nystrom_scaling", 0.5, _table_c2),
    )
}


# ------------------------------------------------------------------------------ writing
def _cell(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return "" if np.isnan(v) else f"{v:.4g}"
    return str(v)


def _markdown(df: pd.DataFrame) -> str:
    from .claims import _md_table

    flat = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df
    cols = [" ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in flat.columns]
    rows = [[_cell(v) for v in r] for r in flat.itertuples(index=False)]
    return "\n".join(_md_table(cols, rows)) + "\n"


def _write(art: Artifact, tables: dict[str, pd.DataFrame], figures: dict[str, Any],
           out: Path) -> list[Path]:
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
    return files


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
    """
    from tqdm.auto import tqdm

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
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    bar = tqdm(names, desc="cbdt reproduce", unit="artifact", disable=not progress)
    for name in bar:
        art = ARTIFACTS[name]
        bar.set_postfix_str(name)
        t0 = time.perf_counter()
        tables, figures = art.run(seed_tuple)
        files = _write(art, tables, figures, out)
        rows.append({"artifact": name, "paper": art.paper, "chapter": art.chapter,
                     "seconds": round(time.perf_counter() - t0, 1),
                     "files": ", ".join(str(f.relative_to(out)) for f in files)})
    summary = pd.DataFrame(rows)
    head = (f"# cbdt reproduce\n\nSeeds: {', '.join(map(str, seed_tuple))}. Each artifact's "
            "chapter of the book discusses its numbers beside the paper's.\n\n")
    (out / "summary.md").write_text(head + _markdown(summary), encoding="utf-8")
    return summary


def _list() -> str:
    lines = [f"{'artifact':<14} {'minutes':>7}  {'chapter':<26} paper"]
    for a in ARTIFACTS.values():
        lines.append(f"{a.name:<14} {a.minutes:>7.1f}  {a.chapter:<26} {a.paper}")
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
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    if args.command == "list":
        print(_list())
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    summary = reproduce(names, seeds=args.seeds, out=args.out, progress=not args.no_progress)
    n_files = sum(len(f.split(", ")) for f in summary["files"])
    print(f"\nWrote {n_files} files under {Path(args.out).resolve()}:")
    for r in summary.itertuples(index=False):
        print(f"  {r.artifact:<14} {r.seconds:>7.1f} s  {r.paper}  (book: {r.chapter})")
    print(f"Summary: {Path(args.out) / 'summary.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
