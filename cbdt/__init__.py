"""cbdt: an exact case-based account of neural decisions.

For a fixed representation :math:`\\varphi` and an OLS readout, every action score is an exact
weighted sum of training-case returns, :math:`Q(x, a) = \\sum_i \\alpha_i(x) r_i(a)` with
:math:`\\alpha(x) = \\Phi G^{-1}\\varphi(x)` (Proposition 1 of the paper "From Neural Network
Decisions to Training Cases: An Exact Account via Case-Based Decision Theory").
"""

from . import audit, decision, geometry, metrics
from .audit import (
    audit_signals,
    case_optimal_actions,
    gini_disagreement,
    influence_entropy,
    label_like_returns,
    risk_score,
)
from .decision import (
    Case,
    GaussianSimilarity,
    InverseDistanceSimilarity,
    LaplacianSimilarity,
    Memory,
    case_contributions,
    decide,
    support,
)
from .exceptions import (
    CBDTError,
    DegenerateAuditWarning,
    InputError,
    LayerWarning,
    MissingExtraError,
    NotFittedError,
    RankDeficientError,
    ReturnsWarning,
    ScoreUnitsWarning,
    SolverFallbackWarning,
)
from .geometry import cotransformed_metric, reparameterize, zca_whitening
from .influence import CaseInfluence, Explanation, TopCases
from .nystrom import NystromCaseInfluence
from .returns import returns_from_labels

__version__ = "0.1.0"

__all__ = [
    "CaseInfluence",
    "NystromCaseInfluence",
    "TopCases",
    "Explanation",
    "returns_from_labels",
    "reparameterize",
    "zca_whitening",
    "cotransformed_metric",
    "Case",
    "Memory",
    "GaussianSimilarity",
    "LaplacianSimilarity",
    "InverseDistanceSimilarity",
    "case_contributions",
    "support",
    "decide",
    "case_optimal_actions",
    "influence_entropy",
    "gini_disagreement",
    "risk_score",
    "audit_signals",
    "label_like_returns",
    "CBDTError",
    "DegenerateAuditWarning",
    "ReturnsWarning",
    "SolverFallbackWarning",
    "LayerWarning",
    "ScoreUnitsWarning",
    "InputError",
    "MissingExtraError",
    "NotFittedError",
    "RankDeficientError",
    "audit",
    "decision",
    "geometry",
    "metrics",
]
