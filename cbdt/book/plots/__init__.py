"""Matplotlib figures of the book, one module per chapter (mirroring :mod:`cbdt.book.experiments`).

Every function takes the already computed data (from :mod:`cbdt.book.experiments` or the core
API), draws on a new or given ``Axes`` and returns the ``Figure``; none of them computes a
statistic that is not also available from a tested function. All public functions are
re-exported here, so ``cbdt.book.plots.plot_x`` works whatever module holds it; so are
the library's own plots of core results (:mod:`cbdt.plotting`), which the chapters draw too.
"""

from __future__ import annotations

from cbdt._optional import require

require("matplotlib", "cbdt.book.plots")

from cbdt.plotting import escape_mathtext, plot_contributions, plot_top_cases  # noqa: F401

from .ch01_theory import (  # noqa: F401
    case_contributions,
    plot_bandwidth_grid,
    plot_cbdt_decision,
    plot_cbdt_query,
    plot_cbdt_supports,
    problem_extent,
    support_breakdown,
    support_grid,
    top_carrying_cases,
)
from .ch02_proposition1 import (  # noqa: F401
    plot_coefficient_map,
    plot_min_norm,
    plot_ridge_convergence,
)
from .ch03_invariance import (  # noqa: F401
    plot_invariance_vs_condition,
    plot_whitened_coefficients,
)
from .ch04_audit_signals import (  # noqa: F401
    plot_risk_map,
    plot_risk_vs_margin,
)
from .ch05_06_synthetic import (  # noqa: F401
    plot_attribution_comparison,
    plot_decision_regions,
    plot_query_attributions,
    plot_support_reconstruction,
    plot_synthetic_recovery,
    plot_weight_profiles,
    query_attribution_summary,
    readable_attribution_summary,
)
from .ch07_pjm import (  # noqa: F401
    plot_alpha_distance,
    plot_case_audit,
    plot_pjm_agreement,
    plot_pjm_problem,
    plot_pjm_support_alignment,
    plot_signed_geometry,
)
from .ch08_uci import (  # noqa: F401
    plot_uci_bandwidth,
    plot_uci_behaviour,
    plot_uci_figure4,
    plot_uci_loss_curves,
    plot_uci_reconstruction,
    plot_uci_submemory,
    plot_uci_vs_paper,
)
from .ch09_drift import (  # noqa: F401
    plot_classifier_audit,
    plot_drift_grid,
    plot_drift_paired,
    plot_drift_sensitivity,
    plot_pjm_drift,
)
from .ch10_nystrom import (  # noqa: F401
    plot_nystrom_agreement,
    plot_scaling,
)
from .ch11_own_network import (  # noqa: F401
    plot_case_gallery,
    plot_review_triage,
)

__all__ = [
    "case_contributions",
    "escape_mathtext",
    "plot_alpha_distance",
    "plot_attribution_comparison",
    "plot_bandwidth_grid",
    "plot_case_audit",
    "plot_case_gallery",
    "plot_cbdt_decision",
    "plot_cbdt_query",
    "plot_cbdt_supports",
    "plot_classifier_audit",
    "plot_coefficient_map",
    "plot_contributions",
    "plot_decision_regions",
    "plot_drift_grid",
    "plot_drift_paired",
    "plot_drift_sensitivity",
    "plot_invariance_vs_condition",
    "plot_min_norm",
    "plot_nystrom_agreement",
    "plot_pjm_agreement",
    "plot_pjm_drift",
    "plot_pjm_problem",
    "plot_pjm_support_alignment",
    "plot_query_attributions",
    "plot_review_triage",
    "plot_ridge_convergence",
    "plot_risk_map",
    "plot_risk_vs_margin",
    "plot_scaling",
    "plot_signed_geometry",
    "plot_support_reconstruction",
    "plot_synthetic_recovery",
    "plot_top_cases",
    "plot_uci_bandwidth",
    "plot_uci_behaviour",
    "plot_uci_figure4",
    "plot_uci_loss_curves",
    "plot_uci_reconstruction",
    "plot_uci_submemory",
    "plot_uci_vs_paper",
    "plot_weight_profiles",
    "plot_whitened_coefficients",
    "problem_extent",
    "query_attribution_summary",
    "readable_attribution_summary",
    "support_breakdown",
    "support_grid",
    "top_carrying_cases",
]
