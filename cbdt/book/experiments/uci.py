"""UCI Adult Income and UCI Default Credit proxy audits (Sec. 5.4, Fig. 4, App. C.5-C.6).

Each seed of each data set is one *run*: a train/test split, the proxy returns of App. C.5
(:mod:`cbdt.datasets.uci`), a :class:`~cbdt.models.CaseNetwork` trained on them, the OLS
probe on its frozen representation, and the explicit CBDT decision maker of eq. 1-2 over the
same training memory. Runs are cached in the process (:func:`uci_audit`), so every table and
figure of the chapter reuses the same networks.

Definitions (the paper leaves these open; the choices are the book's)
--------------------------------------------------------------------
Splits
    Adult: the official split, ``adult.data`` (32,561 training records) and ``adult.test``
    (16,281 test records), the same for every seed; the seed draws the tie-break noise of the
    returns (one ``numpy.random.default_rng(seed)``, training noise first) and the network.
    Default Credit: a stratified 80/20 split drawn with the seed (:func:`stratified_split`):
    24,000 training and 6,000 test records, the default rate equal in both to one record.
CBDT decision maker
    Eq. 1-2 with the training set as memory, frequencies :math:`n(c, M) = 1`, utility
    :math:`u(r_i, a) = r_i(a)` and the Gaussian similarity
    :math:`s(x, x_i) = \\exp(-\\lVert x - x_i\\rVert^2 / 2h^2)` on the preprocessed features
    (z-scored numerics, one-hot categoricals; the network's input). Ties go to the lowest
    action index.
Bandwidth rule
    :math:`\\omega = \\nu\\,d_{med}`, where :math:`d_{med}` is the median Euclidean distance between
    training problems (over a fixed random subsample of 2,000 of them) and the multiple
    :math:`c \\in \\{1/16, 1/8, 1/4, 1/2, 1\\}` is chosen by the CBDT decision maker's own
    held-out performance: 2,000 training records (drawn with the seed) are taken out of the
    memory, the CBDT decision is made for each of them from the remaining training memory,
    and the :math:`c` with the largest mean realised return :math:`r_i(a^*(x_i))` wins (ties:
    the larger :math:`c`). Neither the network nor the test set nor the paper enters this
    choice. :math:`\\nu = 1` is the plain median heuristic.
Supports in finite precision
    Each query's supports are computed as
    :math:`\\tilde U(a\\mid M, x) = e^{d_{min}(x)^2 / 2h^2}\\, U(a \\mid M, x)` with
    :math:`d_{min}(x)` the distance to the nearest memory case, so that small bandwidths cannot
    underflow to zero. A positive factor per query changes no argmax (eq. 2) and no
    comparison between sub-memories of the same query. The *normalised* support
    :math:`\\bar U(a \\mid x) = U(a \\mid M, x) / \\sum_i s(x, x_i)` (a kernel-weighted mean
    return, free of the factor) is used for margins and plots.
Agreement
    Share of test records on which the network's action :math:`\\arg\\max_a Q_{nn}(x, a)` equals
    the CBDT action :math:`a^*(M, x)`.
Accuracy (Adult; reported for Default Credit as well)
    ``label_accuracy`` (the book's headline): the network *approves* (any action but the
    rejecting one: a1 or a2 for both data sets) exactly when the record is a
    good risk (Adult: ``>50K``; Default Credit: no default). It does not depend on the
    tie-break noise. Alternatives: ``optimal_accuracy``, the share of test records whose network
    action equals the case-optimal action :math:`\\arg\\max_a r_i(a)` of their own (noisy)
    returns; ``optimal_set_accuracy``, the same against the *noise-free* returns with every
    tied best action counted as correct.
:math:`\\rho_{recon}`
    Per action, the Pearson correlation between OLS-probe scores (``CaseInfluence`` with an
    intercept on the frozen representation, eq. 6-9) and network scores on the test inputs
    (:meth:`cbdt.models.CaseNetwork.probe_fidelity`).

Sub-memories (Default Credit; App. C.5-C.6)
-------------------------------------------
:data:`DEFAULT_CREDIT_SPLITS` partitions the training memory in two by ``AGE < 35``,
``SEX`` (1 = male vs 2 = female), ``EDUCATION`` (1-2 = graduate school or university vs all
other codes) and recent delinquency ``PAY_0 >= 2``. For each split:

Gram mismatch (:func:`cbdt.geometry.gram_mismatch`)
    On the network representation with the probe's constant coordinate,
    :math:`\\tilde\\varphi = (\\varphi, 1)`, let :math:`\\hat G_k = \\tilde\\Phi_k^\\top
    \\tilde\\Phi_k / n_k` be each sub-memory's normalised Gram matrix and
    :math:`\\bar G = (\\hat G_1 + \\hat G_2)/2`. With :math:`C_k = \\bar G^{-1/2} \\hat G_k
    \\bar G^{-1/2}`,

    .. math:: \\Delta = \\lVert C_1 - C_2\\rVert_F / (\\lVert C_1\\rVert_F + \\lVert C_2\\rVert_F)
              \\in [0, 1].

    :math:`\\Delta = 0` exactly when the two geometries coincide; :math:`\\Delta` is symmetric, does not
    change when cases are duplicated, and, unlike a distance between the raw Gram matrices, is
    invariant under every invertible reparameterisation :math:`\\tilde\\varphi \\mapsto
    B\\tilde\\varphi` (scaling and affine maps of :math:`\\varphi` included), like the
    coefficients themselves (eq. 12). Why this quantity: the union's OLS readout is
    :math:`V = G^{-1}(G_1V_1 + G_2V_2)`, so its scores are the scalar mixture
    :math:`(n_1Q_1 + n_2Q_2)/n` of the sub-memory probes exactly when
    :math:`\\hat G_1 = \\hat G_2`, i.e. when :math:`\\Delta = 0`. The raw relative Frobenius distance
    :math:`\\lVert\\hat G_1 - \\hat G_2\\rVert_F / (\\lVert\\hat G_1\\rVert_F +
    \\lVert\\hat G_2\\rVert_F)` is reported beside it (``whiten=False``).
A2 satisfaction (:func:`combination_axiom`)
    CBDT's combination axiom: if action a is strictly preferred to b under both sub-memories,
    it is strictly preferred under their union. For a test query and an ordered pair
    :math:`(a, b)` with :math:`U_1(a) > U_1(b)` and :math:`U_2(a) > U_2(b)` the pair is
    *jointly ranked*; A2 satisfaction is the share of jointly ranked (query, pair) instances
    with :math:`U(a) > U(b)` for the union. The alternative ``top`` form counts queries whose
    two sub-memories choose the same action and asks whether the union chooses it too. With
    the additive supports of eq. 1, :math:`U = U_1 + U_2` and A2 holds by construction; for
    OLS probes fitted separately on each sub-memory and on the union it can fail.

All tables are per seed; :func:`summarize` gives mean and 95% Student-t interval over seeds
(:func:`summarize`) beside the paper's values (:data:`PAPER`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd

from cbdt.datasets import (
    adult_features,
    adult_proxy_returns,
    default_credit_features,
    default_credit_proxy_returns,
    load_adult,
    load_default_credit,
)
from cbdt.decision import decision_margin, kernel_supports, median_distance, select_bandwidth
from cbdt.exceptions import InputError
from cbdt.geometry import gram_distance, normalized_gram
from cbdt.influence import CaseInfluence
from cbdt.metrics import mean_ci, mean_ci_finite
from cbdt.models import CaseNetwork, NetworkConfig

__all__ = [
    "SEEDS",
    "DATASETS",
    "BANDWIDTH_MULTIPLES",
    "PAPER",
    "PAPER_GRAM_MISMATCH",
    "ADULT_ACTION_LABELS",
    "DEFAULT_CREDIT_ACTION_LABELS",
    "DEFAULT_CREDIT_SPLITS",
    "UCIConfig",
    "UCITask",
    "UCIRun",
    "UCIAudit",
    "A2Result",
    "stratified_split",
    "adult_task",
    "default_credit_task",
    "median_distance",
    "kernel_supports",
    "select_multiple",
    "default_credit_submemories",
    "combination_axiom",
    "label_approval_accuracy",
    "run_tasks",
    "uci_audit",
    "clear_cache",
    "summarize",
    "paper_comparison",
    "confusion_table",
    "optimal_action_counts",
    "agreement_by_margin",
    "figure4_panel",
]

#: The five seeds of every table.
SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
#: Data sets of the chapter.
DATASETS: tuple[str, ...] = ("adult", "default_credit")
#: Candidate bandwidths as multiples of the median training distance (1 = median heuristic).
BANDWIDTH_MULTIPLES: tuple[float, ...] = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
#: Action labels. App. C.5 numbers Adult a1-a3 and Default Credit a0-a2; the book numbers both
#: a0-a2 (one convention, as the paper's notation table), so Adult's a_k is the paper's a_{k+1}.
ADULT_ACTION_LABELS: tuple[str, ...] = ("a0 reject", "a1 standard", "a2 high-limit")
DEFAULT_CREDIT_ACTION_LABELS: tuple[str, ...] = ("a0 reject/decrease", "a1 standard", "a2 increase")

#: Values the paper reports: ``(mean, 95% CI half-width or None)``; None where not reported.
PAPER: dict[str, dict[str, tuple[float, float | None] | None]] = {
    "adult": {
        "agreement": (0.9408, None),  # Sec. 5.4
        "label_accuracy": (0.7982, None),  # "neural-network accuracy", definition not given
        "rho_recon_0": None,  # Fig. 4b only, no numbers
        "rho_recon_1": None,
        "rho_recon_2": None,
    },
    "default_credit": {
        "agreement": (0.8746, 0.0047),  # App. C.6 (0.875 in Sec. 5.4)
        "label_accuracy": None,
        "rho_recon_0": (0.998, 0.001),
        "rho_recon_1": (0.956, 0.032),
        "rho_recon_2": (0.998, 0.001),
    },
}
#: App. C.6 on the sub-memory splits: delinquency has the highest Gram mismatch (about 0.91)
#: and A2 satisfaction "near 1.0"; no other split is quantified.
PAPER_GRAM_MISMATCH: float = 0.91


def _delinquent(df: pd.DataFrame) -> np.ndarray:
    return df["PAY_0"].to_numpy() >= 2


#: Sub-memory splits of App. C.5: name -> (description of group 1, description of group 2,
#: function of the frame giving the boolean mask of group 1).
DEFAULT_CREDIT_SPLITS: dict[str, tuple[str, str, Callable[[pd.DataFrame], np.ndarray]]] = {
    "AGE": ("AGE < 35", "AGE >= 35", lambda df: df["AGE"].to_numpy() < 35),
    "SEX": ("SEX = 1 (male)", "SEX = 2 (female)", lambda df: df["SEX"].to_numpy() == 1),
    "EDUCATION": (
        "EDUCATION in {1, 2} (graduate school, university)",
        "EDUCATION in {0, 3, 4, 5, 6} (high school, others, unknown)",
        lambda df: np.isin(df["EDUCATION"].to_numpy(), (1, 2)),
    ),
    "delinquency": ("PAY_0 >= 2 (recent delinquency)", "PAY_0 < 2", _delinquent),
}


# ---------------------------------------------------------------------------
# configuration, tasks and runs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class UCIConfig:
    """Network, CBDT and split settings of the chapter (defaults: the book's choices).

    The network is :class:`~cbdt.models.CaseNetwork` with its default architecture (two tanh
    layers of 64 units, ``H = 64``), trained with Adam (learning rate ``lr``) on minibatches of
    ``batch_size`` for ``epochs`` passes: 640 steps on Adult, 480 on Default Credit. These
    settings are set by the chapter's run-time budget (each network trains in seconds on one
    thread; the chapter prints the times of its own run); the training loss reached is
    reported with the results.
    """

    hidden: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    epochs: int = 20
    lr: float = 3e-3
    batch_size: int = 1024
    threads: int = 1
    test_size: float = 0.2
    bandwidth_multiples: tuple[float, ...] = BANDWIDTH_MULTIPLES
    n_median: int = 2000
    n_validation: int = 2000
    chunk_size: int = 512


@dataclass
class UCITask:
    """One seed's data: design matrices, returns and labels of both splits.

    Attributes
    ----------
    dataset : str
    seed : int
    X_train, X_test : ndarray of shape (n, d), (m, d)
        Preprocessed features (the network input and the CBDT problem space).
    R_train, R_test : ndarray of shape (n, |A|), (m, |A|)
        Proxy returns (App. C.5).
    R_test_exact : ndarray of shape (m, |A|)
        Test returns without the tie-break noise (equal to ``R_test`` for Default Credit).
    y_train, y_test : ndarray of int
        The data set's label (Adult ``>50K``; Default Credit: default).
    good_label : int
        Label value for which *approving* is right (Adult 1, Default Credit 0).
    reject_action : int
        Index of the rejecting action (0 in both).
    action_labels : tuple of str
    memory_key : object
        Runs with equal keys share training and test problems (Adult), so the CBDT pass is
        done once for all of them.
    submemories : dict of str to ndarray of bool, optional
        Group-1 masks of the training memory, one per split.
    """

    dataset: str
    seed: int
    X_train: np.ndarray
    X_test: np.ndarray
    R_train: np.ndarray
    R_test: np.ndarray
    R_test_exact: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    good_label: int
    reject_action: int
    action_labels: tuple[str, ...]
    memory_key: Any = None
    submemories: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class UCIRun:
    """Everything one seed produced (arrays on the test set).

    Attributes
    ----------
    task : UCITask
    network : CaseNetwork
    train_loss : float
        Mean training loss of the last epoch (MSE over cases and actions).
    test_mse : float
        Network MSE against the test returns.
    fit_seconds : float
        Wall-clock training time (not reproducible; kept out of the tables).
    network_scores, probe_scores : ndarray of shape (m, |A|)
    rho_recon : ndarray of shape (|A|,)
    network_action : ndarray of int of shape (m,)
    bandwidth_multiple, bandwidth, median_distance : float
    validation : pandas.DataFrame
        Held-out mean realised return of the CBDT decisions per bandwidth multiple.
    cbdt_normalized : ndarray of shape (m, |A|)
        :math:`\\bar U(a \\mid x)` at the chosen bandwidth.
    cbdt_action : ndarray of int of shape (m,)
    sensitivity : pandas.DataFrame
        Agreement and CBDT label accuracy at every bandwidth multiple.
    submemory : pandas.DataFrame or None
        One row per split (Default Credit).
    """

    task: UCITask
    network: CaseNetwork
    train_loss: float
    test_mse: float
    fit_seconds: float
    network_scores: np.ndarray
    probe_scores: np.ndarray
    rho_recon: np.ndarray
    network_action: np.ndarray
    median_distance: float = np.nan
    bandwidth_multiple: float = np.nan
    bandwidth: float = np.nan
    validation: pd.DataFrame | None = None
    cbdt_normalized: np.ndarray | None = None
    cbdt_action: np.ndarray | None = None
    sensitivity: pd.DataFrame | None = None
    submemory: pd.DataFrame | None = None


@dataclass
class UCIAudit:
    """All seeds of one data set.

    Attributes
    ----------
    dataset : str
    runs : list of UCIRun
    per_seed : pandas.DataFrame
        One row per seed: agreement, accuracies, :math:`\\rho_{recon}` per action
        (``rho_recon_0`` ...), bandwidth, training loss, test MSE.
    sensitivity : pandas.DataFrame
        Seed x bandwidth multiple: agreement and CBDT label accuracy.
    validation : pandas.DataFrame
        Seed x bandwidth multiple: held-out mean realised return used to choose the bandwidth.
    submemory : pandas.DataFrame or None
        Seed x split (Default Credit).
    seconds : float
        Wall-clock time of the whole audit.
    """

    dataset: str
    runs: list[UCIRun]
    per_seed: pd.DataFrame
    sensitivity: pd.DataFrame
    validation: pd.DataFrame
    submemory: pd.DataFrame | None
    seconds: float

    @property
    def action_labels(self) -> tuple[str, ...]:
        return self.runs[0].task.action_labels


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


def stratified_split(y: Any, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split: for each label value, ``round(test_size * count)`` test rows.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels (any values).
    test_size : float
        Share of each class sent to the test set, in (0, 1).
    seed : int
        ``numpy.random.default_rng(seed)`` permutes each class (in sorted label order).

    Returns
    -------
    train_idx, test_idx : ndarray of int
        Sorted row indices.
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.size < 2:
        raise InputError(f"y must be 1-D with at least 2 entries, got shape {y.shape}.")
    if not 0 < test_size < 1:
        raise InputError(f"test_size must lie in (0, 1), got {test_size}.")
    rng = np.random.default_rng(seed)
    test = []
    for label in np.unique(y):
        idx = np.flatnonzero(y == label)
        k = int(round(test_size * idx.size))
        test.append(rng.permutation(idx)[:k])
    test_idx = np.sort(np.concatenate(test))
    train_mask = np.ones(y.size, dtype=bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


def adult_task(seed: int, *, train: pd.DataFrame | None = None, test: pd.DataFrame | None = None,
               noise_sd: float = 0.05) -> UCITask:
    """Adult Income for one seed: official split, App. C.5 returns with seeded noise.

    Features: :func:`cbdt.datasets.adult_features` with nothing excluded (6 z-scored numerics
    and 102 one-hot columns, ``?`` as its own category), fitted on the training split.
    The noise is drawn by one ``numpy.random.default_rng(seed)``: first the ``(n, 3)`` training
    noise, then the ``(m, 3)`` test noise. ``train``/``test`` default to
    :func:`cbdt.datasets.load_adult`; pass small frames to test the plumbing.
    """
    train = load_adult("train") if train is None else train
    test = load_adult("test") if test is None else test
    Xtr, pre = adult_features(train)
    Xte, _ = adult_features(test, pre)
    rng = np.random.default_rng(seed)
    Rtr = adult_proxy_returns(train, seed=rng, noise_sd=noise_sd)
    Rte = adult_proxy_returns(test, seed=rng, noise_sd=noise_sd)
    Rte_exact = adult_proxy_returns(test, seed=0, noise_sd=0.0)
    return UCITask(
        dataset="adult",
        seed=int(seed),
        X_train=Xtr.to_numpy(dtype=np.float64, copy=True),
        X_test=Xte.to_numpy(dtype=np.float64, copy=True),
        R_train=Rtr,
        R_test=Rte,
        R_test_exact=Rte_exact,
        y_train=train["y"].to_numpy(dtype=np.int64),
        y_test=test["y"].to_numpy(dtype=np.int64),
        good_label=1,
        reject_action=0,
        action_labels=ADULT_ACTION_LABELS,
        memory_key=("adult", len(train), len(test)),
    )


def default_credit_task(seed: int, *, frame: pd.DataFrame | None = None,
                        test_size: float = 0.2) -> UCITask:
    """Default Credit for one seed: stratified split, App. C.5 returns, sub-memory masks.

    Features: :func:`cbdt.datasets.default_credit_features` (20 z-scored numerics, one-hot
    SEX, EDUCATION, MARRIAGE: 33 columns), fitted on the training rows of this seed.
    ``frame`` defaults to :func:`cbdt.datasets.load_default_credit`.
    """
    frame = load_default_credit() if frame is None else frame
    tr_idx, te_idx = stratified_split(frame["y"].to_numpy(), test_size, seed)
    train = frame.iloc[tr_idx].reset_index(drop=True)
    test = frame.iloc[te_idx].reset_index(drop=True)
    Xtr, pre = default_credit_features(train)
    Xte, _ = default_credit_features(test, pre)
    Rte = default_credit_proxy_returns(test)
    return UCITask(
        dataset="default_credit",
        seed=int(seed),
        X_train=Xtr.to_numpy(dtype=np.float64, copy=True),
        X_test=Xte.to_numpy(dtype=np.float64, copy=True),
        R_train=default_credit_proxy_returns(train),
        R_test=Rte,
        R_test_exact=Rte,
        y_train=train["y"].to_numpy(dtype=np.int64),
        y_test=test["y"].to_numpy(dtype=np.int64),
        good_label=0,
        reject_action=0,
        action_labels=DEFAULT_CREDIT_ACTION_LABELS,
        memory_key=("default_credit", int(seed)),
        submemories=default_credit_submemories(train),
    )


def default_credit_submemories(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Group-1 masks of the four sub-memory splits (:data:`DEFAULT_CREDIT_SPLITS`).

    Parameters
    ----------
    frame : pandas.DataFrame
        Needs ``AGE``, ``SEX``, ``EDUCATION`` and ``PAY_0``.

    Returns
    -------
    dict of str to ndarray of bool of shape (n,)
        ``True`` for group 1 (the first description), ``False`` for group 2.
    """
    missing = [c for c in ("AGE", "SEX", "EDUCATION", "PAY_0") if c not in frame.columns]
    if missing:
        raise InputError(f"the frame lacks the split columns {missing}.")
    return {name: np.asarray(fn(frame), dtype=bool) for name, (_, _, fn) in
            DEFAULT_CREDIT_SPLITS.items()}


# ---------------------------------------------------------------------------
# CBDT decision maker (eq. 1-2) in query chunks
# ---------------------------------------------------------------------------


def select_multiple(
    X: Any,
    R: Any,
    multiples: Sequence[float] = BANDWIDTH_MULTIPLES,
    *,
    median: float | None = None,
    n_validation: int = 2000,
    seed: int = 0,
    chunk_size: int = 512,
) -> tuple[float, pd.DataFrame]:
    """Choose the CBDT bandwidth multiple by held-out realised return (the book's rule).

    ``n_validation`` training rows, drawn with ``numpy.random.default_rng(seed)``, are taken
    out of the memory; :func:`cbdt.decision.select_bandwidth` (``criterion="mean_return"``)
    gives each the CBDT decision (eq. 2) from the remaining rows for every bandwidth
    ``multiple * median`` and keeps the multiple with the largest mean realised return
    :math:`r_i(a^*(x_i))`, ties going to the larger multiple.

    Returns
    -------
    multiple : float
    table : pandas.DataFrame
        Columns ``multiple``, ``bandwidth``, ``mean_return``, ``chosen``.
    """
    X = np.asarray(X, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    n = X.shape[0]
    if R.ndim != 2 or R.shape[0] != n:
        raise InputError(f"R must have shape (n, |A|) with n = {n}, got {R.shape}.")
    mult = np.asarray(multiples, dtype=np.float64)
    med = median_distance(X) if median is None else float(median)
    k = min(int(n_validation), n // 2)
    if k < 1:
        raise InputError("select_multiple needs at least 2 training rows.")
    val = np.random.default_rng(seed).choice(n, k, replace=False)
    mem = np.ones(n, dtype=bool)
    mem[val] = False
    sel = select_bandwidth(X[mem], R[mem], X[val], R[val], mult * med,
                           criterion="mean_return", chunk_size=chunk_size)
    table = sel.table.assign(multiple=mult)[["multiple", "bandwidth", "mean_return", "chosen"]]
    return float(mult[table["chosen"].to_numpy()][0]), table


def label_approval_accuracy(actions: Any, y: Any, *, good_label: int, reject_action: int = 0
                            ) -> float:
    """Share of records where "approve" (any action but ``reject_action``) iff ``y == good_label``."""
    a = np.asarray(actions)
    y = np.asarray(y)
    if a.shape != y.shape:
        raise InputError(f"actions {a.shape} and y {y.shape} must have the same shape.")
    return float(((a != reject_action) == (y == good_label)).mean())


def _optimal_set_accuracy(actions: np.ndarray, R_exact: np.ndarray, tol: float = 1e-9) -> float:
    best = R_exact >= R_exact.max(axis=1, keepdims=True) - tol
    return float(best[np.arange(actions.size), actions].mean())


# ---------------------------------------------------------------------------
# sub-memory definitions
# ---------------------------------------------------------------------------


class A2Result(NamedTuple):
    """Result of :func:`combination_axiom`.

    Attributes
    ----------
    pairs : float
        Share of jointly ranked (query, ordered pair) instances preserved by the union (NaN if
        there are none).
    n_pairs : int
        Number of jointly ranked instances.
    top : float
        Among queries where both sub-memories choose the same action (argmax, ties to the
        lowest index), the share where the union chooses it too (NaN if none).
    n_top : int
    """

    pairs: float
    n_pairs: int
    top: float
    n_top: int


def combination_axiom(U1: Any, U2: Any, U: Any) -> A2Result:
    """A2 (combination) satisfaction of supports under two sub-memories and their union.

    Parameters
    ----------
    U1, U2, U : array-like of shape (m, |A|)
        Supports (or scores) of every action for m queries under sub-memory 1, sub-memory 2
        and the union memory.

    Returns
    -------
    A2Result
    """
    U1, U2, U = (np.asarray(u, dtype=np.float64) for u in (U1, U2, U))
    if U1.ndim != 2 or U1.shape != U2.shape or U1.shape != U.shape:
        raise InputError(
            f"U1, U2 and U must have the same shape (m, |A|), got {U1.shape}, {U2.shape}, "
            f"{U.shape}."
        )
    # d[x, a, b] = U(a) - U(b)
    d1 = U1[:, :, None] - U1[:, None, :]
    d2 = U2[:, :, None] - U2[:, None, :]
    d = U[:, :, None] - U[:, None, :]
    joint = (d1 > 0) & (d2 > 0)
    n_pairs = int(joint.sum())
    pairs = float((d[joint] > 0).mean()) if n_pairs else float("nan")
    a1, a2, a = U1.argmax(axis=1), U2.argmax(axis=1), U.argmax(axis=1)
    same = a1 == a2
    n_top = int(same.sum())
    top = float((a[same] == a1[same]).mean()) if n_top else float("nan")
    return A2Result(pairs, n_pairs, top, n_top)


# ---------------------------------------------------------------------------
# the experiment
# ---------------------------------------------------------------------------


def _fit_network(task: UCITask, cfg: UCIConfig) -> UCIRun:
    t0 = time.perf_counter()
    net = NetworkConfig.of(cfg).build(task.seed).fit(task.X_train, task.R_train)
    fit_seconds = time.perf_counter() - t0
    fid = net.probe_fidelity(task.X_train, task.R_train, task.X_test)
    ns = fid.network_scores
    return UCIRun(
        task=task,
        network=net,
        train_loss=float(net.loss_curve_[-1]),
        test_mse=float(np.mean((ns - task.R_test) ** 2)),
        fit_seconds=fit_seconds,
        network_scores=ns,
        probe_scores=fid.probe_scores,
        rho_recon=np.asarray(fid.rho_recon),
        network_action=ns.argmax(axis=1),
    )


def _submemory_rows(run: UCIRun, U_scaled: np.ndarray, A: int) -> pd.DataFrame:
    """Gram mismatch and A2 for every split of one run (U_scaled: (m, A + 2A*splits + 1))."""
    task = run.task
    Phi_tr = run.network.represent(task.X_train)
    Phi_te = run.network.represent(task.X_test)
    U_union = U_scaled[:, :A]
    union_probe = run.probe_scores
    rows = []
    for j, (name, mask) in enumerate(task.submemories.items()):
        base = A + 2 * A * j
        U1 = U_scaled[:, base : base + A]
        U2 = U_scaled[:, base + A : base + 2 * A]
        cb = combination_axiom(U1, U2, U_union)
        n1, n2 = int(mask.sum()), int((~mask).sum())
        G1, G2 = normalized_gram(Phi_tr[mask]), normalized_gram(Phi_tr[~mask])
        Q1 = CaseInfluence(intercept=True).fit(Phi_tr[mask], task.R_train[mask]).scores(Phi_te)
        Q2 = CaseInfluence(intercept=True).fit(Phi_tr[~mask], task.R_train[~mask]).scores(Phi_te)
        ols = combination_axiom(Q1, Q2, union_probe)
        mix = (n1 * Q1 + n2 * Q2) / (n1 + n2)
        centred = union_probe - union_probe.mean(axis=0)
        rows.append({
            "seed": task.seed,
            "split": name,
            "group_1": DEFAULT_CREDIT_SPLITS[name][0] if name in DEFAULT_CREDIT_SPLITS else name,
            "n_1": n1,
            "n_2": n2,
            "label_rate_1": float(task.y_train[mask].mean()),
            "label_rate_2": float(task.y_train[~mask].mean()),
            "gram_mismatch": gram_distance(G1, G2, whiten=True),
            "gram_mismatch_raw": gram_distance(G1, G2, whiten=False),
            "a2_cbdt": cb.pairs,
            "a2_cbdt_top": cb.top,
            "a2_ols": ols.pairs,
            "a2_ols_top": ols.top,
            "n_joint_pairs_ols": ols.n_pairs,
            "mixing_error": float(np.linalg.norm(union_probe - mix) / np.linalg.norm(centred)),
        })
    return pd.DataFrame(rows)


def run_tasks(tasks: Sequence[UCITask], config: UCIConfig | None = None) -> list[UCIRun]:
    """Network, probe, bandwidth choice, CBDT decisions and sub-memory audit for each task.

    Tasks with the same ``memory_key`` share one chunked pass over the test x training
    similarities (their returns are stacked as columns).
    """
    cfg = UCIConfig() if config is None else config
    runs = [_fit_network(t, cfg) for t in tasks]
    mult = np.asarray(cfg.bandwidth_multiples, dtype=np.float64)
    groups: dict[Any, list[int]] = {}
    for i, t in enumerate(tasks):
        groups.setdefault(t.memory_key if t.memory_key is not None else ("task", i), []).append(i)
    for idx in groups.values():
        t0 = tasks[idx[0]]
        for i in idx[1:]:  # one similarity pass serves the group: the features must agree
            t = tasks[i]
            if not (
                np.array_equal(t.X_train, t0.X_train) and np.array_equal(t.X_test, t0.X_test)
            ):
                raise InputError(
                    f"tasks {idx[0]} and {i} share memory_key {t0.memory_key!r} but have "
                    "different features; give them different memory keys (or memory_key=None)."
                )
        med = median_distance(t0.X_train, cfg.n_median, seed=0)
        blocks, layout, offset = [], [], 0
        for i in idx:
            t, r = tasks[i], runs[i]
            r.median_distance = med
            r.bandwidth_multiple, r.validation = select_multiple(
                t.X_train, t.R_train, mult, median=med, n_validation=cfg.n_validation,
                seed=t.seed, chunk_size=cfg.chunk_size,
            )
            r.bandwidth = r.bandwidth_multiple * med
            cols = [t.R_train]
            for mask in t.submemories.values():
                cols += [t.R_train * mask[:, None], t.R_train * ~mask[:, None]]
            block = np.hstack(cols)
            layout.append((offset, block.shape[1]))
            offset += block.shape[1]
            blocks.append(block)
        ones = np.ones((t0.X_train.shape[0], 1))
        U, _ = kernel_supports(t0.X_test, t0.X_train, np.hstack([*blocks, ones]), mult * med,
                               chunk_size=cfg.chunk_size)
        mass = U[:, :, -1:]  # (B, m, 1), scaled similarity mass
        for (start, width), i in zip(layout, idx, strict=True):
            t, r = tasks[i], runs[i]
            A = t.R_train.shape[1]
            Ub = U[:, :, start : start + width]
            acts = Ub[:, :, :A].argmax(axis=2)  # (B, m)
            r.sensitivity = pd.DataFrame({
                "seed": t.seed,
                "multiple": mult,
                "bandwidth": mult * med,
                "agreement": (acts == r.network_action[None, :]).mean(axis=1),
                "cbdt_label_accuracy": [
                    label_approval_accuracy(a, t.y_test, good_label=t.good_label,
                                            reject_action=t.reject_action) for a in acts
                ],
                "chosen": mult == r.bandwidth_multiple,
            })
            j = int(np.flatnonzero(mult == r.bandwidth_multiple)[0])
            r.cbdt_action = acts[j]
            r.cbdt_normalized = Ub[j, :, :A] / mass[j]
            if t.submemories:
                r.submemory = _submemory_rows(r, Ub[j], A)
    return runs


def _per_seed_row(r: UCIRun) -> dict[str, Any]:
    t = r.task
    row: dict[str, Any] = {
        "seed": t.seed,
        "n_train": t.X_train.shape[0],
        "n_test": t.X_test.shape[0],
        "agreement": float((r.network_action == r.cbdt_action).mean()),
        "label_accuracy": label_approval_accuracy(r.network_action, t.y_test,
                                                  good_label=t.good_label,
                                                  reject_action=t.reject_action),
        "optimal_accuracy": float((r.network_action == t.R_test.argmax(axis=1)).mean()),
        "optimal_set_accuracy": _optimal_set_accuracy(r.network_action, t.R_test_exact),
        "cbdt_label_accuracy": label_approval_accuracy(r.cbdt_action, t.y_test,
                                                       good_label=t.good_label,
                                                       reject_action=t.reject_action),
    }
    for a, rho in enumerate(r.rho_recon):
        row[f"rho_recon_{a}"] = float(rho)
    row.update({
        "bandwidth_multiple": r.bandwidth_multiple,
        "bandwidth": r.bandwidth,
        "train_loss": r.train_loss,
        "test_mse": r.test_mse,
    })
    return row


def clear_cache() -> None:
    """Forget the audits :func:`uci_audit` keeps (networks are retrained on the next call)."""
    _uci_audit.cache_clear()


def uci_audit(
    dataset: Literal["adult", "default_credit"],
    seeds: Sequence[int] = SEEDS,
    config: UCIConfig | None = None,
    **overrides: Any,
) -> UCIAudit:
    """The whole audit of one data set over ``seeds``.

    Memoised in the process on ``(dataset, seeds, config)`` (:func:`functools.cache`):
    the chapter's tables and figures reuse the trained networks; :func:`clear_cache` forgets
    them.

    Parameters
    ----------
    dataset : {"adult", "default_credit"}
    seeds : sequence of int, default :data:`SEEDS`
    config : UCIConfig, optional
    **overrides
        Fields of :class:`UCIConfig` to replace, e.g. ``epochs=40``.
    """
    if dataset not in DATASETS:
        raise InputError(f"dataset must be one of {DATASETS}, got {dataset!r}.")
    cfg = UCIConfig() if config is None else config
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return _uci_audit(dataset, tuple(int(s) for s in seeds), cfg)


@functools.cache
def _uci_audit(dataset: str, seeds: tuple[int, ...], cfg: UCIConfig) -> UCIAudit:
    t0 = time.perf_counter()
    if dataset == "adult":
        train, test = load_adult("train"), load_adult("test")
        tasks = [adult_task(s, train=train, test=test) for s in seeds]
    else:
        frame = load_default_credit()
        tasks = [default_credit_task(s, frame=frame, test_size=cfg.test_size) for s in seeds]
    runs = run_tasks(tasks, cfg)
    per_seed = pd.DataFrame([_per_seed_row(r) for r in runs])
    sens = pd.concat([r.sensitivity for r in runs], ignore_index=True)
    val = pd.concat([r.validation.assign(seed=r.task.seed) for r in runs], ignore_index=True)
    subs = [r.submemory for r in runs if r.submemory is not None]
    sub = pd.concat(subs, ignore_index=True) if subs else None
    return UCIAudit(dataset, runs, per_seed, sens, val, sub, time.perf_counter() - t0)


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------


def summarize(df: pd.DataFrame, columns: Sequence[str], by: str | list[str] | None = None
              ) -> pd.DataFrame:
    """Mean and 95% CI half-width over seeds of ``columns`` (optionally per group ``by``).

    As :func:`cbdt.metrics.summarize_seeds` (columns ``<col>_mean``, ``<col>_ci``, ``n``), but
    NaN entries (e.g. an A2 share with no jointly ranked pair) are left out of their column;
    with fewer than two finite values the CI is NaN.
    """
    keys = [] if by is None else ([by] if isinstance(by, str) else list(by))
    groups = [((), df)] if not keys else df.groupby(keys, sort=False)
    rows = []
    for key, g in groups:
        vals = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, vals, strict=True))
        for c in columns:
            row[f"{c}_mean"], row[f"{c}_ci"], _ = mean_ci_finite(g[c].to_numpy())
        row["n"] = len(g)
        rows.append(row)
    return pd.DataFrame(rows)


def paper_comparison(audit: UCIAudit, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Book (mean, CI over seeds) beside the paper for the headline quantities.

    Returns
    -------
    pandas.DataFrame
        Columns ``quantity``, ``book_mean``, ``book_ci``, ``paper_mean``, ``paper_ci``
        (NaN where the paper gives no number).
    """
    paper = PAPER[audit.dataset]
    A = len(audit.action_labels)
    cols = list(columns) if columns is not None else (
        ["agreement", "label_accuracy", "optimal_accuracy", "optimal_set_accuracy",
         "cbdt_label_accuracy"] + [f"rho_recon_{a}" for a in range(A)]
    )
    rows = []
    for c in cols:
        mean, half = mean_ci(audit.per_seed[c].to_numpy())
        p = paper.get(c)
        name = c
        if c.startswith("rho_recon_"):
            name = f"rho_recon {audit.action_labels[int(c.rsplit('_', 1)[1])]}"
        rows.append({
            "quantity": name,
            "book_mean": mean,
            "book_ci": half,
            "paper_mean": np.nan if p is None else p[0],
            "paper_ci": np.nan if p is None or p[1] is None else p[1],
        })
    return pd.DataFrame(rows)


def confusion_table(run: UCIRun) -> pd.DataFrame:
    """Counts of (network action, CBDT action) on the test set; rows network, columns CBDT."""
    labels = list(run.task.action_labels)
    A = len(labels)
    M = np.zeros((A, A), dtype=np.int64)
    np.add.at(M, (run.network_action, run.cbdt_action), 1)
    return pd.DataFrame(M, index=pd.Index([f"NN {a}" for a in labels], name="network"),
                        columns=pd.Index([f"CBDT {a}" for a in labels], name="CBDT"))


def optimal_action_counts(R: Any, labels: Sequence[str], *, tol: float = 1e-9
                          ) -> pd.DataFrame:
    """How often each action is case-optimal, and how often it is tied for best.

    Columns: ``argmax`` (count of :math:`\\arg\\max_a r_i(a)`, ties to the lowest index),
    ``best_or_tied`` (count of records where the action is within ``tol`` of the best).
    """
    R = np.asarray(R, dtype=np.float64)
    best = R >= R.max(axis=1, keepdims=True) - tol
    return pd.DataFrame({
        "action": list(labels),
        "argmax": np.bincount(R.argmax(axis=1), minlength=R.shape[1]),
        "best_or_tied": best.sum(axis=0),
    })


def agreement_by_margin(audit: UCIAudit, n_bins: int = 5) -> pd.DataFrame:
    """Network-CBDT agreement within quantile bins of the CBDT decision margin, per seed.

    The margin is the normalised CBDT margin :math:`\\bar U(a^*\\mid x) - \\max_{b\\neq a^*}
    \\bar U(b\\mid x)` (in units of return); bin 1 holds the test records with the smallest
    margins. Columns: ``seed``, ``bin``, ``margin_low``, ``margin_high``, ``n``,
    ``agreement``, ``share_of_disagreements``.
    """
    if n_bins < 1:
        raise InputError(f"n_bins must be >= 1, got {n_bins}.")
    rows = []
    for r in audit.runs:
        m = decision_margin(r.cbdt_normalized, r.cbdt_action)
        agree = r.network_action == r.cbdt_action
        edges = np.quantile(m, np.linspace(0, 1, n_bins + 1))
        b = np.clip(np.searchsorted(edges, m, side="right") - 1, 0, n_bins - 1)
        n_dis = max(int((~agree).sum()), 1)
        for k in range(n_bins):
            sel = b == k
            rows.append({
                "seed": r.task.seed,
                "bin": k + 1,
                "margin_low": float(edges[k]),
                "margin_high": float(edges[k + 1]),
                "n": int(sel.sum()),
                "agreement": float(agree[sel].mean()) if sel.any() else np.nan,
                "share_of_disagreements": float((~agree[sel]).sum() / n_dis),
            })
    return pd.DataFrame(rows)


def figure4_panel(run: UCIRun) -> dict[str, Any]:
    """Arrays of one seed for the Fig. 4 analogue (:func:`cbdt.book.plots.plot_uci_figure4`).

    Keys: ``cbdt_margin`` (normalised CBDT margin of the CBDT action, >= 0), ``network_margin``
    (network score of the CBDT action minus the best other network score; > 0 means
    agreement), ``cbdt_action``, ``probe_scores``, ``network_scores``, ``rho_recon``,
    ``agreement``, ``action_labels``.
    """
    return {
        "cbdt_margin": decision_margin(run.cbdt_normalized, run.cbdt_action),
        "network_margin": decision_margin(run.network_scores, run.cbdt_action),
        "cbdt_action": run.cbdt_action,
        "probe_scores": run.probe_scores,
        "network_scores": run.network_scores,
        "rho_recon": run.rho_recon,
        "agreement": float((run.network_action == run.cbdt_action).mean()),
        "action_labels": run.task.action_labels,
    }


# ---------------------------------------------------------------------------
# the paper beside the book
# ---------------------------------------------------------------------------
