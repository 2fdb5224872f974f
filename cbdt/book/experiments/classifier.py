"""Case-influence audit of a plain classifier: why eq. 16-19 need care with one-hot returns.

A classifier trained as a regressor on one-hot targets is the special case
:math:`r_i(a) = \\mathbf 1\\{y_i = a\\}` of the paper's setting: :class:`~cbdt.models.CaseNetwork`
is trained by the mean squared error on the one-hot returns, its scores are the Q-scores
:math:`Q_{nn}(x, a)`, and the OLS probe with intercept on its frozen representation
:math:`\\varphi` gives :math:`Q(x, a) = \\sum_i \\alpha_i(x) r_i(a)` (Proposition 1).

With such returns the contribution :math:`\\psi_i(a, x) = \\alpha_i(x) r_i(a)` (eq. 15) is 0
for every case not labelled ``a``. The top-k cases by :math:`|\\psi_i(a_x, x)|` (eq. 16, 18)
therefore all carry the audited label (whenever at least ``k`` training cases do), so Gini
disagreement (eq. 19) is exactly 0 and influence entropy (eq. 17) sits at the floor left by
the smoothing :math:`\\varepsilon` of eq. 16 (of order :math:`10^{-10}` with the default
:math:`\\varepsilon = 10^{-12}`), for every query: the paper's risk score (eq. 20) cannot
separate right from wrong decisions. Ranking by :math:`|\\alpha_i(x)|` instead
(``rank_by="coefficient"`` of :func:`cbdt.audit.audit_signals`) keeps the signals informative.
This module measures both on a data set given as arrays, beside two baselines.

Definitions (the book's choices)
--------------------------------
Split
    Per seed, :func:`split_indices`: ``n_train`` training rows and the rest as test rows, drawn
    by ``numpy.random.default_rng(seed)``, stratified by label (each class gets its share of
    ``n_train`` by largest remainders) unless ``stratify=False``.
Audited decision
    The *network's* decision :math:`a_x = \\arg\\max_a Q_{nn}(x, a)` (ties: lowest index),
    passed to :func:`cbdt.audit.audit_signals` as ``action``; a decision is *wrong* when it
    differs from the test label.
Scores (higher = riskier)
    ``risk``, ``entropy``, ``gini`` (eq. 20, 17, 19 with ``k`` and ``gamma`` of the config),
    once with ``rank_by="contribution"`` (the paper's eq. 16/18) and once with
    ``rank_by="coefficient"``; ``margin``: minus the network's top-1 minus top-2 score;
    ``leverage``: :math:`\\lVert\\alpha(x)\\rVert^2` of the probe
    (:meth:`cbdt.influence.CaseInfluence.leverage`).
AUC
    ROC AUC of the score for the event "the decision is wrong" (:func:`cbdt.metrics.roc_auc`,
    ties count one half). It is *undefined* (NaN, with a ``note``) when the score is constant
    on the test set: ``roc_auc`` then returns exactly 0.5 (every pair is a tie), which is kept
    in ``auc_raw`` but is no evidence of anything. "Constant" means a range
    ``max - min <= constant_atol`` (config, default ``1e-9``), so that the
    :math:`\\varepsilon`-floor of the contribution-ranked entropy (a tiny, monotone function of
    the top-k mass, not an action disagreement) counts as constant. AUC is also NaN when no
    decision, or every decision, is wrong.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from cbdt._validation import as_float_matrix, check_nonnegative_scalar
from cbdt.audit import audit_signals
from cbdt.decision import decision_margin
from cbdt.exceptions import DegenerateAuditWarning, InputError
from cbdt.metrics import mean_ci_finite, roc_auc
from cbdt.models import CaseNetwork, NetworkConfig, ProbeFidelity
from cbdt.returns import label_positions, returns_from_labels

__all__ = [
    "SEEDS",
    "SCORES",
    "ClassifierConfig",
    "ClassifierRun",
    "one_hot",
    "split_indices",
    "classifier_run",
    "classifier_audit",
    "summarize_classifier",
    "select_epochs",
    "best_epochs",
]

#: The five seeds of every table.
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: The scores, in table order: ``(score, signal, rank_by)``; ``rank_by="none"`` marks the
#: baselines that rank no cases.
SCORES: tuple[tuple[str, str, str], ...] = (
    ("risk (contribution)", "risk", "contribution"),
    ("entropy (contribution)", "entropy", "contribution"),
    ("gini (contribution)", "gini", "contribution"),
    ("risk (coefficient)", "risk", "coefficient"),
    ("entropy (coefficient)", "entropy", "coefficient"),
    ("gini (coefficient)", "gini", "coefficient"),
    ("margin", "margin", "none"),
    ("leverage", "leverage", "none"),
)


@dataclass(frozen=True)
class ClassifierConfig:
    """Network, split and audit settings of :func:`classifier_audit`.

    Attributes
    ----------
    hidden : tuple of int, default=(64, 64)
        Hidden widths of the :class:`~cbdt.models.CaseNetwork`; the last is ``H``.
    activation : {"tanh", "relu"}, default="tanh"
    epochs : int, default=450
        Full-batch Adam steps. Chosen by :func:`select_epochs` and :func:`best_epochs` on the
        *training part only*, never on the test rows or on any AUC: for each of the five
        seeds, 20% of the ``n_train = 1000`` training rows of scikit-learn's digits data were
        held out (stratified), a network was trained on the other 800 with checkpoints every
        50 epochs up to 1,000, and each seed's checkpoint with the smallest held-out mean
        squared error (the training loss) was taken among the *reproducible* ones: those
        before the first checkpoint at which a twin network, trained on inputs moved by one
        unit in the last place, differs by more than 1e-6 (relative) on some seed. That
        horizon is 550 epochs (seed 2: 3e-6); the choices are 150, 450, 450, 450 and 500, and
        their median is 450. The held-out curves are flat beyond about 200 epochs (from 200
        to 1,000 epochs the held-out MSE moves by at most 12% on every seed), so the choice
        matters little for accuracy; it matters for reproducibility. The rule without the
        horizon (``best_epochs(..., max_spread=None)``) chose 800 epochs, where full-batch
        Adam's loss rises and falls and the trained network depends on the last bit of every
        sum: seed 4's networks on native and generic kernels (``scripts/kernel_env.py``)
        differed by 2.7e-2 and flipped one of 3,985 test decisions. At 450 epochs the spread
        between those kernels is at most 1e-7 (seed 4: 9.3e-8; the others about 1.5e-9), and
        ``tests/test_portability.py`` checks all five seeds' scores and decisions. The network that is then audited is trained on all ``n_train`` rows for
        that many epochs. With another data set, rerun :func:`select_epochs`.
    lr : float, default=1e-2
        Adam learning rate (the :class:`~cbdt.models.CaseNetwork` default, not tuned).
    n_train : int, default=1000
        Training rows per seed; every other row is a test row.
    k : int, default=10
        Size of the top-k set (eq. 16, 18).
    gamma : float, default=1.0
        Weight of the Gini term in the risk score (eq. 20).
    standardize : bool, default=True
        Z-score the features with the *training* mean and standard deviation of each seed
        (a column with standard deviation 0 is only centred) before the network sees them.
        :class:`~cbdt.models.CaseNetwork` standardises its input with the training statistics
        as well, so ``False`` changes the results only through floating-point rounding; the
        option makes the preprocessing explicit and the representation independent of the
        feature units either way.
    stratify : bool, default=True
        Stratify the train/test split by label (:func:`split_indices`).
    constant_atol : float, default=1e-9
        A score whose range on the test set is at most this is treated as constant (AUC
        undefined; see the module docstring).
    """

    hidden: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    epochs: int = 450
    lr: float = 1e-2
    n_train: int = 1000
    k: int = 10
    gamma: float = 1.0
    standardize: bool = True
    stratify: bool = True
    constant_atol: float = 1e-9


@dataclass(frozen=True)
class ClassifierRun:
    """One seed of :func:`classifier_audit`: split, network, probe and per-query signals.

    Attributes
    ----------
    seed : int
    config : ClassifierConfig
    train_idx, test_idx : ndarray of int
        Sorted row indices of the split.
    X_train, X_test : ndarray
        Features as the network sees them (standardised when ``config.standardize``).
    y_train, y_test : ndarray of int
    R_train : ndarray of shape (n_train, C)
        One-hot training returns :math:`r_i(a) = \\mathbf 1\\{y_i = a\\}`.
    network : CaseNetwork
    fidelity : ProbeFidelity
        OLS probe with intercept on :math:`\\varphi` and :math:`\\rho_{recon}` on the test rows.
    probe_solver : str
        ``"cholesky"``, or ``"lstsq"`` when the representation is rank-deficient.
    Phi_test : ndarray of shape (m, H)
    decision : ndarray of int of shape (m,)
        The network's decision :math:`\\arg\\max_a Q_{nn}(x, a)`.
    wrong : ndarray of bool of shape (m,)
        ``decision != y_test``.
    scores : DataFrame
        One column per entry of :data:`SCORES` (higher = riskier), one row per test query.
    warned : dict of str to bool
        Whether :class:`~cbdt.exceptions.DegenerateAuditWarning` fired, per ``rank_by``.
    """

    seed: int
    config: ClassifierConfig
    train_idx: np.ndarray
    test_idx: np.ndarray
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    R_train: np.ndarray
    network: CaseNetwork
    fidelity: ProbeFidelity
    probe_solver: str
    Phi_test: np.ndarray
    decision: np.ndarray
    wrong: np.ndarray
    scores: pd.DataFrame
    warned: dict[str, bool]


# ---------------------------------------------------------------------- inputs
def one_hot(y: Any, n_classes: int | None = None) -> np.ndarray:
    """One-hot returns of integer class labels: :func:`cbdt.returns_from_labels`."""
    return returns_from_labels(y, n_classes)


def split_indices(
    y: Any, n_train: int, seed: int, stratify: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/test split with exactly ``n_train`` training rows.

    Parameters
    ----------
    y : array-like of int of shape (n,)
        Class labels.
    n_train : int
        ``1 <= n_train < n``.
    seed : int
        Seeds ``numpy.random.default_rng(seed)``.
    stratify : bool, default=True
        Give each class :math:`\\lfloor n_{train} n_c / n\\rfloor` training rows and hand the
        remaining ones to the classes with the largest remainders (ties: lower label); the
        rows of each class are drawn at random. ``False``: a plain random permutation.

    Returns
    -------
    train_idx, test_idx : ndarray of int
        Sorted row indices.
    """
    lab = label_positions(y)
    n = lab.size
    if not isinstance(n_train, numbers.Integral) or isinstance(n_train, bool) \
            or not 1 <= n_train < n:
        raise InputError(f"n_train must be an integer in 1..{n - 1} (n = {n}), got {n_train!r}.")
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}.")
    rng = np.random.default_rng(int(seed))
    if not stratify:
        train = rng.permutation(n)[: int(n_train)]
    else:
        classes, counts = np.unique(lab, return_counts=True)
        share = n_train * counts / n
        take = np.floor(share).astype(np.int64)
        extra = int(n_train - take.sum())
        order = np.argsort(-(share - take), kind="stable")
        take[order[:extra]] += 1
        train = np.concatenate(
            [rng.permutation(np.flatnonzero(lab == c))[:t] for c, t in zip(classes, take,
                                                                              strict=True)]
        )
    mask = np.zeros(n, dtype=bool)
    mask[train] = True
    return np.flatnonzero(mask), np.flatnonzero(~mask)


def _config(config: ClassifierConfig | None) -> ClassifierConfig:
    cfg = ClassifierConfig() if config is None else config
    if not isinstance(cfg, ClassifierConfig):
        raise InputError(f"config must be a ClassifierConfig, got {type(cfg).__name__}.")
    check_nonnegative_scalar("constant_atol", cfg.constant_atol)
    return cfg


def _data(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    Xa = as_float_matrix("X", X)
    lab = label_positions(y)
    if Xa.shape[0] != lab.size:
        raise InputError(f"X has {Xa.shape[0]} rows but y has {lab.size} labels.")
    return Xa, lab


def _seeds(seeds: Iterable[int]) -> list[int]:
    out = [int(s) for s in seeds]
    if not out:
        raise InputError("seeds must name at least one seed.")
    return out


def _standardize(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X_train - mean) / sd, (X_test - mean) / sd


# ---------------------------------------------------------------------- one run
def _audit(probe: Any, phi: np.ndarray, action: np.ndarray, cfg: ClassifierConfig,
           rank_by: Literal["contribution", "coefficient"]) -> tuple[pd.DataFrame, bool]:
    """audit_signals with the degenerate-returns warning caught and reported as a flag."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sig = audit_signals(probe, phi, action=action, k=cfg.k, gamma=cfg.gamma, rank_by=rank_by)
    warned = False
    for w in caught:
        if issubclass(w.category, DegenerateAuditWarning):
            warned = True
        else:  # pass any other warning on
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return sig, warned


def classifier_run(
    X: Any, y: Any, seed: int, config: ClassifierConfig | None = None
) -> ClassifierRun:
    """Split, train, probe and audit one seed (see :func:`classifier_audit`).

    Parameters
    ----------
    X : array-like of shape (n, d)
        Features.
    y : array-like of int of shape (n,)
        Class labels ``0..C-1``.
    seed : int
        Seeds the split and the network.
    config : ClassifierConfig, optional

    Returns
    -------
    ClassifierRun
    """
    cfg = _config(config)
    Xa, lab = _data(X, y)
    n_classes = int(lab.max()) + 1
    tr, te = split_indices(lab, cfg.n_train, seed, stratify=cfg.stratify)
    X_tr, X_te = Xa[tr], Xa[te]
    if cfg.standardize:
        X_tr, X_te = _standardize(X_tr, X_te)
    y_tr, y_te = lab[tr], lab[te]
    R = one_hot(y_tr, n_classes)
    net = NetworkConfig.of(cfg).build(seed).fit(X_tr, R)
    fid = net.probe_fidelity(X_tr, R, X_te, solver="cholesky_or_lstsq")
    solver = fid.probe.solver_
    phi = net.represent(X_te)
    Qnn = fid.network_scores
    decision = np.argmax(Qnn, axis=1)
    margin = decision_margin(Qnn)
    cols: dict[str, np.ndarray] = {}
    warned: dict[str, bool] = {}
    for rank_by in ("contribution", "coefficient"):
        sig, warned[rank_by] = _audit(fid.probe, phi, decision, cfg, rank_by)
        for name, signal, rb in SCORES:
            if rb == rank_by:
                cols[name] = sig[signal].to_numpy()
    cols["margin"] = -margin
    cols["leverage"] = fid.probe.leverage(phi)
    return ClassifierRun(
        seed=int(seed),
        config=cfg,
        train_idx=tr,
        test_idx=te,
        X_train=X_tr,
        X_test=X_te,
        y_train=y_tr,
        y_test=y_te,
        R_train=R,
        network=net,
        fidelity=fid,
        probe_solver=solver,
        Phi_test=phi,
        decision=decision,
        wrong=decision != y_te,
        scores=pd.DataFrame({name: cols[name] for name, _, _ in SCORES}),
        warned=warned,
    )


def _auc(score: np.ndarray, wrong: np.ndarray, atol: float) -> tuple[float, float, str]:
    """(auc, auc_raw, note): AUC NaN where it is undefined, raw roc_auc value kept."""
    raw = roc_auc(score, wrong, single_class="nan")
    if np.isnan(raw):
        what = "no" if not wrong.any() else "every"
        return np.nan, np.nan, f"AUC undefined: {what} test decision is wrong"
    if np.ptp(score) <= atol:
        return np.nan, raw, (
            f"AUC undefined: the score is constant on the test set (range <= constant_atol = "
            f"{atol:g}); roc_auc gives exactly 0.5 on a constant score (all ties)"
            + ("" if raw == 0.5 else "; auc_raw differs from 0.5 only through differences "
               "below the tolerance")
        )
    return raw, raw, ""


def classifier_audit(
    X: Any, y: Any, seeds: Iterable[int] = SEEDS, config: ClassifierConfig | None = None
) -> pd.DataFrame:
    """Audit signals of a one-hot-trained classifier against its own errors, per seed.

    Per seed (:func:`classifier_run`): a seeded split into ``config.n_train`` training and
    the remaining test rows; a :class:`~cbdt.models.CaseNetwork` trained by MSE on the one-hot
    returns; the OLS probe with intercept on its frozen representation
    (:meth:`cbdt.models.CaseNetwork.probe_fidelity`, minimum-norm ``"lstsq"`` solver when the
    representation is rank-deficient); the network's decisions on the test rows audited with
    :func:`cbdt.audit.audit_signals` (``action`` = the network's decision), once with
    ``rank_by="contribution"`` and once with ``rank_by="coefficient"``. Each score of
    :data:`SCORES` is then evaluated by its ROC AUC for "the decision is wrong" (see the
    module docstring).

    Parameters
    ----------
    X : array-like of shape (n, d)
        Features.
    y : array-like of int of shape (n,)
        Class labels ``0..C-1``.
    seeds : iterable of int, default=SEEDS
    config : ClassifierConfig, optional
        Default ``ClassifierConfig()``.

    Returns
    -------
    DataFrame
        One row per (seed, score), with columns ``seed``, ``score``, ``signal``,
        ``rank_by`` (``"contribution"``, ``"coefficient"`` or ``"none"``), ``auc`` (NaN when
        undefined), ``auc_raw`` (what :func:`cbdt.metrics.roc_auc` returns, 0.5 for a
        constant score), ``n_wrong``, ``n_test``, ``error_rate``, ``max_abs_entropy`` and
        ``max_gini`` (over the test queries, for the ranked scores; NaN for the baselines),
        ``warned`` (:class:`~cbdt.exceptions.DegenerateAuditWarning` fired for that
        ``rank_by``), ``note`` (why the AUC is undefined, else empty), ``probe_solver``,
        ``rho_recon_min`` (smallest per-class probe fidelity) and ``probe_agreement`` (share
        of test rows where the probe's argmax equals the network's decision).
    """
    cfg = _config(config)
    Xa, lab = _data(X, y)
    rows = []
    for seed in _seeds(seeds):
        run = classifier_run(Xa, lab, seed, cfg)
        fid = run.fidelity
        agree = float(np.mean(np.argmax(fid.probe_scores, axis=1) == run.decision))
        n_wrong = int(run.wrong.sum())
        m = run.wrong.size
        ranked = {
            rb: (
                float(np.abs(run.scores[f"entropy ({rb})"]).max()),
                float(run.scores[f"gini ({rb})"].max()),
            )
            for rb in ("contribution", "coefficient")
        }
        for name, signal, rank_by in SCORES:
            auc, raw, note = _auc(run.scores[name].to_numpy(), run.wrong, cfg.constant_atol)
            ent, gini = ranked.get(rank_by, (np.nan, np.nan))
            rows.append(
                {
                    "seed": seed,
                    "score": name,
                    "signal": signal,
                    "rank_by": rank_by,
                    "auc": auc,
                    "auc_raw": raw,
                    "n_wrong": n_wrong,
                    "n_test": m,
                    "error_rate": n_wrong / m,
                    "max_abs_entropy": ent,
                    "max_gini": gini,
                    "warned": bool(run.warned.get(rank_by, False)),
                    "note": note,
                    "probe_solver": run.probe_solver,
                    "rho_recon_min": float(np.min(fid.rho_recon)),
                    "probe_agreement": agree,
                }
            )
    return pd.DataFrame(rows)


def summarize_classifier(df: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Mean and Student-t CI over seeds of the AUC (and error rate) of every score.

    Parameters
    ----------
    df : DataFrame
        Output of :func:`classifier_audit`.
    confidence : float, default=0.95

    Returns
    -------
    DataFrame
        Indexed by ``score`` (in :data:`SCORES` order), with ``signal``, ``rank_by``,
        ``auc_mean``, ``auc_ci`` (half-width; NaN with fewer than two defined seeds),
        ``n_defined`` (seeds with a defined AUC), ``n_seeds``, ``auc_raw_mean``,
        ``error_rate_mean``, ``error_rate_ci``, ``max_abs_entropy`` and ``max_gini`` (over all
        seeds), ``warned`` (on every seed) and ``note`` (the distinct notes, joined).
    """
    need = {"seed", "score", "signal", "rank_by", "auc", "auc_raw", "error_rate",
            "max_abs_entropy", "max_gini", "warned", "note"}
    if not isinstance(df, pd.DataFrame) or not need <= set(df.columns):
        raise InputError(f"df must be the DataFrame of classifier_audit (columns {sorted(need)}).")
    rows = []
    for score, g in df.groupby("score", sort=False):
        a_mean, a_ci, n_ok = mean_ci_finite(g["auc"].to_numpy(dtype=float), confidence)
        e_mean, e_ci, _ = mean_ci_finite(g["error_rate"].to_numpy(dtype=float), confidence)
        notes = [n for n in dict.fromkeys(g["note"]) if n]
        rows.append(
            {
                "score": score,
                "signal": g["signal"].iloc[0],
                "rank_by": g["rank_by"].iloc[0],
                "auc_mean": a_mean,
                "auc_ci": a_ci,
                "n_defined": n_ok,
                "n_seeds": len(g),
                "auc_raw_mean": float(np.nanmean(g["auc_raw"])) if g["auc_raw"].notna().any()
                else np.nan,
                "error_rate_mean": e_mean,
                "error_rate_ci": e_ci,
                "max_abs_entropy": float(g["max_abs_entropy"].max()),
                "max_gini": float(g["max_gini"].max()),
                "warned": bool(g["warned"].all()),
                "note": "; ".join(notes),
            }
        )
    order = {name: i for i, (name, _, _) in enumerate(SCORES)}
    out = pd.DataFrame(rows)
    out = out.iloc[np.argsort([order.get(s, len(order)) for s in out["score"]], kind="stable")]
    return out.set_index("score")


# ---------------------------------------------------------------------- epochs
def select_epochs(
    X: Any,
    y: Any,
    seeds: Iterable[int] = SEEDS,
    config: ClassifierConfig | None = None,
    *,
    step: int = 50,
    max_epochs: int = 1000,
    validation_fraction: float = 0.2,
    spread: bool = True,
) -> pd.DataFrame:
    """Held-out curve of the training part, to choose ``epochs`` without the test rows.

    For each seed, the *training* rows of :func:`split_indices` (the same split as
    :func:`classifier_audit`) are split again, stratified, into a fit part and a held-out
    part of ``validation_fraction`` (drawn with ``default_rng(seed + 10_000)``); the test rows
    are never touched. One network (the config's architecture and learning rate) is trained
    on the fit part for ``max_epochs`` full-batch Adam steps with a checkpoint every ``step``
    epochs. With a constant learning rate and full-batch steps, the checkpoint after ``e``
    epochs *is* the network a run of ``e`` epochs ends with, so one training run gives the
    whole curve.

    Parameters
    ----------
    X, y : see :func:`classifier_audit`
    seeds : iterable of int, default=SEEDS
    config : ClassifierConfig, optional
        Its ``epochs`` is ignored.
    step : int, default=50
        Spacing of the candidate epochs ``step, 2 step, ..., max_epochs``.
    max_epochs : int, default=1000
        A multiple of ``step``.
    validation_fraction : float, default=0.2
    spread : bool, default=True
        Also train a twin network on the fit part with every input moved by one unit in the
        last place (``numpy.nextafter`` towards ``+inf``) and report, per checkpoint, how far
        the two networks' held-out scores lie apart (column ``ulp_spread``: the largest
        absolute difference over the largest absolute score). Full-batch Adam amplifies such
        a difference by about ten times every 50 epochs on the digits, and once its step
        size no longer shrinks with the loss (the loss starts to rise and fall) the trained
        network depends on the last bit of every sum: what CPUs with other vector units
        (AVX-512, AVX2, SSE, NEON) compute in other orders. The column measures that
        sensitivity without a second machine; :func:`best_epochs` keeps only the epochs
        where it is small on every seed.

    Returns
    -------
    DataFrame
        Columns ``seed``, ``epochs``, ``val_mse`` (mean squared error on the one-hot
        held-out returns, the training loss), ``val_error`` (held-out misclassification
        rate), ``train_mse`` and, with ``spread=True``, ``ulp_spread``.
    """
    cfg = _config(config)
    Xa, lab = _data(X, y)
    if not isinstance(step, numbers.Integral) or not isinstance(max_epochs, numbers.Integral) \
            or step < 1 or max_epochs < step or max_epochs % step:
        raise InputError(
            f"max_epochs must be a positive multiple of step, got step={step!r}, "
            f"max_epochs={max_epochs!r}."
        )
    if not 0 < validation_fraction < 1:
        raise InputError(f"validation_fraction must lie in (0, 1), got {validation_fraction}.")
    n_classes = int(lab.max()) + 1
    rows = []
    for seed in _seeds(seeds):
        tr, _ = split_indices(lab, cfg.n_train, seed, stratify=cfg.stratify)
        n_fit = tr.size - int(round(validation_fraction * tr.size))
        fit_rel, val_rel = split_indices(lab[tr], n_fit, seed + 10_000, stratify=cfg.stratify)
        X_fit, X_val = Xa[tr[fit_rel]], Xa[tr[val_rel]]
        if cfg.standardize:
            X_fit, X_val = _standardize(X_fit, X_val)
        R_fit = one_hot(lab[tr[fit_rel]], n_classes)
        R_val = one_hot(lab[tr[val_rel]], n_classes)
        def build(seed: int = seed) -> CaseNetwork:
            return NetworkConfig.of(cfg).build(
                seed, epochs=int(max_epochs), n_checkpoints=int(max_epochs // step)
            )

        net = build().fit(X_fit, R_fit)
        twin = build().fit(np.nextafter(X_fit, np.inf), R_fit) if spread else None
        for t, ck in enumerate(net.checkpoints_):
            P_val = net.predict(X_val, checkpoint=t)
            P_fit = net.predict(X_fit, checkpoint=t)
            row = {
                "seed": seed,
                "epochs": ck.epoch,
                "val_mse": float(np.mean((P_val - R_val) ** 2)),
                "val_error": float(np.mean(np.argmax(P_val, 1) != lab[tr[val_rel]])),
                "train_mse": float(np.mean((P_fit - R_fit) ** 2)),
            }
            if twin is not None:
                diff = np.abs(twin.predict(X_val, checkpoint=t) - P_val).max()
                row["ulp_spread"] = float(diff / max(np.abs(P_val).max(), 1e-300))
            rows.append(row)
    return pd.DataFrame(rows)


def best_epochs(
    selection: pd.DataFrame,
    by: Literal["val_mse", "val_error"] = "val_mse",
    max_spread: float | None = 1e-6,
) -> int:
    """Median over seeds of each seed's best reproducible checkpoint of :func:`select_epochs`.

    Each seed's best is the smallest ``by`` (ties: fewer epochs) among the *reproducible*
    candidates; with an even number of seeds the lower median is taken, so the result is
    always one of the candidates.

    Parameters
    ----------
    selection : DataFrame
        The result of :func:`select_epochs`.
    by : {"val_mse", "val_error"}, default="val_mse"
    max_spread : float or None, default=1e-6
        A candidate is reproducible when its ``ulp_spread`` and that of every smaller
        candidate stay at most ``max_spread`` on every seed (the horizon after which a
        last-bit difference has grown past it). ``1e-6`` keeps a trained score's rounding
        spread two orders below the book's printed four digits and below every decision
        margin seen on the digits (the smallest, 1.4e-4). ``None`` ignores the spread (the
        rule the book used first; it chose 800 epochs, where seed 4's networks on two
        kernels differed by 2.7e-2 and one of 3,985 test decisions flipped).
    """
    if not isinstance(selection, pd.DataFrame) or not {"seed", "epochs", by} <= set(
        selection.columns
    ):
        raise InputError(f"selection must be the DataFrame of select_epochs (with {by!r}).")
    sel = selection.sort_values(["seed", "epochs"])
    if max_spread is not None:
        if "ulp_spread" not in sel.columns:
            raise InputError(
                "selection has no ulp_spread column: run select_epochs(..., spread=True), "
                "or pass max_spread=None to ignore reproducibility."
            )
        check_nonnegative_scalar("max_spread", max_spread)
        too_far = sel.groupby("epochs")["ulp_spread"].max() > max_spread
        bad = too_far.index[too_far.to_numpy()]
        horizon = (min(bad) if len(bad) else np.inf)
        sel = sel[sel["epochs"] < horizon]
        if sel.empty:
            raise InputError(
                f"no candidate epoch count is reproducible to max_spread={max_spread:g} on "
                "every seed (the first candidate already exceeds it): use a smaller step or "
                "learning rate, or a larger max_spread."
            )
    best = [
        int(g.loc[g[by] == g[by].min(), "epochs"].iloc[0]) for _, g in sel.groupby("seed")
    ]
    best.sort()
    return best[(len(best) - 1) // 2]


# ---------------------------------------------------------------------- claims
