"""Audit your own network: a plain torch classifier, end to end (chapter 11, Practice).

Everything chapter 11 shows is computed here, on a user's own ``torch.nn.Sequential`` MLP
trained the usual way (cross-entropy on class labels, minibatches) rather than on the book's
:class:`~cbdt.models.CaseNetwork`:

1. :func:`load_digits_split` and :func:`train_mlp`: scikit-learn's handwritten digits (shipped
   with scikit-learn, no download) and a small MLP trained deterministically on CPU
   (:func:`cbdt.models.set_determinism` is the one place that seeds and pins torch);
2. :func:`layer_fidelity` (:func:`cbdt.torch.layer_fidelity`): the OLS probe of Proposition 1
   on each candidate layer, against the network's own outputs
   (:func:`cbdt.torch.probe_fidelity`); :func:`head_input` (:func:`cbdt.torch.head_input`)
   names the layer the head reads;
3. :func:`with_readout` and :func:`prop1_residual`: write the probe's readout into a copy of the
   network's head and measure how exactly the network itself now satisfies
   :math:`Q(x, a) = \\sum_i \\alpha_i(x) r_i(a)`;
4. :func:`pick_queries` and :func:`case_gallery`: which test decisions to show, and their
   strongest supporting and opposing training cases;
5. :func:`expected_caught`, :func:`review_curve` and :func:`triage_table`: the risk score as
   triage for a human reviewer, against the network's margin and a random review.

Definitions (the book's choices)
--------------------------------
Review
    A reviewer checks the ``ceil(budget * m)`` test decisions with the highest score (risk,
    or minus the margin). Tied scores are ordered uniformly at random and the *expected*
    number of caught errors is computed exactly (no random numbers are drawn), as in
    :func:`cbdt.metrics.errors_caught` with ``ties="average"``. A random
    review of ``r`` of ``m`` decisions catches ``n_wrong * r / m`` errors in expectation.
Supporting and opposing cases
    For the audited action :math:`a_x`, the cases with the largest positive and the most
    negative contributions :math:`\\psi_i(a_x, x) = \\alpha_i(x) r_i(a_x)` (eq. 15), from
    :meth:`cbdt.CaseInfluence.top_cases`; with one-hot returns only cases labelled
    :math:`a_x` have :math:`\\psi_i \\ne 0`, so the gallery adds the cases that raise the
    runner-up's score :math:`Q(x, b)` most.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import nn

from cbdt import torch as ct
from cbdt._validation import as_float_matrix, check_positive_int
from cbdt.exceptions import InputError
from cbdt.metrics import errors_caught, review_size
from cbdt.models import set_determinism, torch_dtype
from cbdt.returns import label_positions, returns_from_labels

from .classifier import split_indices

__all__ = [
    "OwnNetworkConfig",
    "DigitsSplit",
    "TrainedMLP",
    "load_digits_split",
    "make_mlp",
    "train_mlp",
    "head_input",
    "layer_fidelity",
    "with_readout",
    "network_scores",
    "prop1_residual",
    "pick_queries",
    "case_gallery",
    "expected_caught",
    "review_curve",
    "triage_table",
    "variant_table",
]


@dataclass(frozen=True)
class OwnNetworkConfig:
    """The network and its training, as a user would write them.

    Attributes
    ----------
    hidden : tuple of int, default=(64, 32)
        Hidden widths; the last one is the width ``H`` of the representation the head reads.
    activation : {"tanh", "relu"}, default="tanh"
    loss : {"cross_entropy", "mse"}, default="cross_entropy"
        ``"cross_entropy"`` on the class labels (the usual classifier), or the mean squared
        error on the one-hot returns (the paper's training, chapter 09's classifier).
    epochs : int, default=60
    batch_size : int, default=50
        Minibatches drawn by a seeded ``torch.Generator`` every epoch.
    lr : float, default=3e-3
        Adam's learning rate. Epochs, batch size and rate are ordinary settings, not tuned on
        the test digits (or on any audit result).
    seed : int, default=0
        Seeds the initialisation and the minibatch order (through
        :func:`cbdt.models.set_determinism`, one torch thread).
    dtype : {"float64", "float32"}, default="float64"
        Precision of the network and its training. The book trains in float64 so that its
        printed results are the same on every CPU (float32 training took other paths on
        other vector units and moved the fourth digit); most users' networks are float32,
        which :mod:`cbdt.torch` audits the same way.
    """

    hidden: tuple[int, ...] = (64, 32)
    activation: Literal["tanh", "relu"] = "tanh"
    loss: Literal["cross_entropy", "mse"] = "cross_entropy"
    epochs: int = 60
    batch_size: int = 50
    lr: float = 3e-3
    seed: int = 0
    dtype: Literal["float64", "float32"] = "float64"


class DigitsSplit(NamedTuple):
    """A stratified split of scikit-learn's digits (:func:`load_digits_split`).

    Attributes
    ----------
    X_train, X_test : ndarray of float32, shape (n, 64), (m, 64)
        Pixel intensities scaled to [0, 1] (the raw 0..16 divided by 16); row ``j`` is the
        8 x 8 image ``X[j].reshape(8, 8)``.
    y_train, y_test : ndarray of int, shape (n,), (m,)
    train_idx, test_idx : ndarray of int, shape (n,), (m,)
        Rows of ``sklearn.datasets.load_digits()``: the case ids.
    """

    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    train_idx: np.ndarray
    test_idx: np.ndarray


class TrainedMLP(NamedTuple):
    """Result of :func:`train_mlp`.

    Attributes
    ----------
    model : torch.nn.Sequential
        ``Linear, act, Linear, act, ..., Linear``: the last module is the head.
    losses : ndarray of shape (epochs,)
        Mean training loss of each epoch (over its minibatches).
    train_accuracy : float
        Share of training rows the trained network classifies correctly.
    config : OwnNetworkConfig
    """

    model: nn.Sequential
    losses: np.ndarray
    train_accuracy: float
    config: OwnNetworkConfig


_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _check_config(cfg: OwnNetworkConfig | None) -> OwnNetworkConfig:
    cfg = OwnNetworkConfig() if cfg is None else cfg
    if not isinstance(cfg, OwnNetworkConfig):
        raise InputError(f"config must be an OwnNetworkConfig, got {type(cfg).__name__}.")
    if cfg.activation not in _ACTIVATIONS:
        raise InputError(f"activation must be 'tanh' or 'relu', got {cfg.activation!r}.")
    if cfg.loss not in ("cross_entropy", "mse"):
        raise InputError(f"loss must be 'cross_entropy' or 'mse', got {cfg.loss!r}.")
    if not cfg.hidden:
        raise InputError("hidden must name at least one hidden width.")
    for h in cfg.hidden:
        check_positive_int("every hidden width", h)
    check_positive_int("epochs", cfg.epochs)
    check_positive_int("batch_size", cfg.batch_size)
    if not (isinstance(cfg.lr, numbers.Real) and cfg.lr > 0):
        raise InputError(f"lr must be > 0, got {cfg.lr!r}.")
    torch_dtype(cfg.dtype)  # raises for anything but "float64" / "float32"
    return cfg


# ---------------------------------------------------------------------- data and training
def load_digits_split(n_train: int = 1000, seed: int = 0) -> DigitsSplit:
    """scikit-learn's 1,797 handwritten digits, split stratified by label.

    Parameters
    ----------
    n_train : int, default=1000
        Training rows (the case memory); the rest are test rows.
    seed : int, default=0
        Seeds the split (:func:`cbdt.book.experiments.classifier.split_indices`).

    Returns
    -------
    DigitsSplit
    """
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    tr, te = split_indices(y, n_train, seed)
    X = (X / 16.0).astype(np.float32)
    y = y.astype(np.int64)
    return DigitsSplit(X[tr], X[te], y[tr], y[te], tr, te)


def make_mlp(d_in: int, n_classes: int, hidden: Sequence[int] = (64, 32),
             activation: Literal["tanh", "relu"] = "tanh",
             dtype: torch.dtype = torch.float32) -> nn.Sequential:
    """``Linear -> act`` per hidden width, then a linear head with one output per class.

    Parameters
    ----------
    d_in : int
        Input width.
    n_classes : int
        Outputs of the head (one score per action).
    hidden : sequence of int, default=(64, 32)
    activation : {"tanh", "relu"}, default="tanh"
    dtype : torch.dtype, default=torch.float32
        The layers' dtype; PyTorch's default initialisation is drawn in it.

    Returns
    -------
    torch.nn.Sequential
        Modules ``"0"``, ``"1"``, ... as built; the head is the last one.
    """
    if activation not in _ACTIVATIONS:
        raise InputError(f"activation must be 'tanh' or 'relu', got {activation!r}.")
    layers: list[nn.Module] = []
    prev = check_positive_int("d_in", d_in)
    for h in hidden:
        layers += [nn.Linear(prev, check_positive_int("every hidden width", h), dtype=dtype),
                   _ACTIVATIONS[activation]()]
        prev = int(h)
    layers.append(nn.Linear(prev, check_positive_int("n_classes", n_classes), dtype=dtype))
    return nn.Sequential(*layers)


def train_mlp(X: Any, y: Any, config: OwnNetworkConfig | None = None,
              n_classes: int | None = None) -> TrainedMLP:
    """Train :func:`make_mlp` with Adam on minibatches, deterministically on CPU.

    :func:`cbdt.models.set_determinism` seeds Python, NumPy and torch, switches on
    deterministic algorithms and pins torch to one thread; the minibatch order comes from a
    ``torch.Generator`` seeded with ``config.seed``. Two calls with the same arguments give
    bit-identical parameters.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Inputs, cast to ``config.dtype`` (what the network computes in).
    y : array-like of int of shape (n,)
        Class labels ``0..C-1``.
    config : OwnNetworkConfig, optional
    n_classes : int, optional
        ``C``; default ``max(y) + 1``.

    Returns
    -------
    TrainedMLP
    """
    cfg = _check_config(config)
    tdt, ndt = torch_dtype(cfg.dtype)
    Xa = as_float_matrix("X", X).astype(ndt)
    lab = label_positions(y)
    if Xa.shape[0] != lab.size:
        raise InputError(f"X has {Xa.shape[0]} rows but y has {lab.size} labels.")
    C = int(lab.max()) + 1 if n_classes is None else check_positive_int("n_classes", n_classes)
    set_determinism(int(cfg.seed))
    model = make_mlp(Xa.shape[1], C, cfg.hidden, cfg.activation, dtype=tdt)
    opt = torch.optim.Adam(model.parameters(), lr=float(cfg.lr))
    gen = torch.Generator().manual_seed(int(cfg.seed))
    Xt, yt = torch.as_tensor(Xa), torch.as_tensor(lab)
    Rt = torch.as_tensor(returns_from_labels(lab, C), dtype=tdt)
    n = Xt.shape[0]
    losses = np.empty(cfg.epochs)
    model.train()
    for epoch in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for s in range(0, n, cfg.batch_size):
            b = perm[s : s + cfg.batch_size]
            opt.zero_grad()
            out = model(Xt[b])
            if cfg.loss == "cross_entropy":
                loss = nn.functional.cross_entropy(out, yt[b])
            else:
                loss = ((out - Rt[b]) ** 2).mean()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * b.numel()
        losses[epoch] = total / n
    model.eval()
    with torch.no_grad():
        acc = float((model(Xt).argmax(1) == yt).double().mean())
    return TrainedMLP(model, losses, acc, cfg)


# ``head_input`` and ``layer_fidelity`` are public in :mod:`cbdt.torch` (re-exported here for
# the chapter): the module that feeds the head, and the probe's fidelity on each layer.
head_input = ct.head_input
layer_fidelity = ct.layer_fidelity


def with_readout(model: nn.Sequential, probe: ct.TorchCaseInfluence) -> nn.Sequential:
    """A copy of ``model`` whose head is the probe's OLS readout (the original is untouched).

    Parameters
    ----------
    model : torch.nn.Sequential
        The network the probe was fitted on, its head reading the probe's layer.
    probe : TorchCaseInfluence
        Fitted on the output of the module just before the head.

    Returns
    -------
    torch.nn.Sequential
        A deep copy with :meth:`~cbdt.torch.TorchCaseInfluence.write_readout` applied to its
        head.
    """
    name, _ = head_input(model)
    if probe.layer_ is not model.get_submodule(name):
        raise InputError(f"the probe reads another layer; write_readout needs the probe on "
                         f"layer {name!r}, the head's input.")
    audited = copy.deepcopy(model)
    probe.write_readout(audited[-1])
    return audited


def network_scores(model: nn.Module, X: Any) -> np.ndarray:
    """The network's outputs on ``X`` in evaluation mode, without gradients, as float64.

    Parameters
    ----------
    model : torch.nn.Module
    X : array-like of shape (m, d)

    Returns
    -------
    ndarray of shape (m, |A|)
    """
    dtype, _ = ct._dtype_device(model)
    Xt = torch.as_tensor(np.asarray(X), dtype=dtype)
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            return model(Xt).double().numpy()
    finally:
        model.train(was)


def prop1_residual(model: nn.Module, probe: ct.TorchCaseInfluence, X: Any) -> dict[str, float]:
    """How exactly Proposition 1 holds for the network and for the probe.

    Parameters
    ----------
    model : torch.nn.Module
        A network whose outputs should equal :math:`\\sum_i \\alpha_i(x) r_i(a)`.
    probe : TorchCaseInfluence
    X : array-like of shape (m, d)

    Returns
    -------
    dict
        ``network``: :math:`\\max_{x, a} |Q_{nn}(x, a) - \\sum_i \\alpha_i(x) r_i(a)|`
        (network in its own precision, :math:`\\alpha R` in float64); ``probe``: the same for
        the probe's scores :math:`\\varphi(x)^\\top v_a + b_a` (float64); ``scale``:
        :math:`\\max |Q|`; ``eps``: the machine epsilon of the network's dtype times ``scale``
        (the size of one rounding of the largest score); ``dtype``: that dtype's name;
        ``bound``: the worst-case rounding error of the two sums once the head holds the
        probe's readout :math:`(V, b)` (:func:`cbdt.torch.TorchCaseInfluence.write_readout`),
        :math:`\\gamma_{H+1}\\max_{x,a}(|\\varphi(x)|^\\top|v_a| + |b_a|)` in the network's dtype
        plus :math:`\\gamma_n\\max_{x,a}|\\alpha(x)|^\\top|r(a)|` in float64, with
        :math:`\\gamma_k = k\\epsilon/(1 - k\\epsilon)` (Higham's bound for a sum of :math:`k`
        products). ``network`` must stay below it after ``write_readout``; for the head as
        trained it means nothing.
    """
    phi = probe.phi(X)
    alpha = probe.coefficients(phi)
    aR = alpha @ probe.returns_
    Q_net = network_scores(model, X)
    if Q_net.shape != aR.shape:
        raise InputError(f"the model gives {Q_net.shape[1]} scores per input, the probe "
                         f"{aR.shape[1]}.")
    scale = float(np.abs(aR).max())
    dt, _ = ct._dtype_device(model)

    def gamma(k: int, eps: float) -> float:
        return k * eps / (1 - k * eps)

    V = np.asarray(probe.readout_)
    b = np.asarray(getattr(probe, "intercept_", np.zeros(V.shape[1])))
    head = (np.abs(phi) @ np.abs(V) + np.abs(b)).max()
    sums = (np.abs(alpha) @ np.abs(probe.returns_)).max()
    bound = (gamma(V.shape[0] + 1, float(torch.finfo(dt).eps)) * head
             + gamma(alpha.shape[1], float(np.finfo(np.float64).eps)) * sums)
    return {
        "network": float(np.abs(Q_net - aR).max()),
        "bound": float(bound),
        "probe": float(np.abs(probe.scores(phi) - aR).max()),
        "scale": scale,
        "eps": float(torch.finfo(dt).eps) * scale,
        "dtype": str(dt).removeprefix("torch."),
    }


# ---------------------------------------------------------------------- decisions shown
def pick_queries(wrong: Any, margin: Any, risk: Any) -> pd.DataFrame:
    """The test decisions the chapter opens, by fixed rules (ties: lowest position).

    Rules: ``"confident, correct"``: the correct decision with the largest margin;
    ``"flagged error"``: the wrong decision with the highest risk score (the first error a
    risk-ordered review meets); ``"confident error"``: the wrong decision with the largest
    margin (the one a margin-ordered review meets last).

    Parameters
    ----------
    wrong : array-like of bool of shape (m,)
    margin, risk : array-like of shape (m,)

    Returns
    -------
    DataFrame
        Indexed by ``role``, with ``position`` (row of the test set) and ``rule``. Without a
        wrong (or a correct) decision the roles that need one are left out.
    """
    w = np.asarray(wrong, dtype=bool)
    mg = np.asarray(margin, dtype=np.float64)
    rk = np.asarray(risk, dtype=np.float64)
    if not (w.ndim == 1 and w.shape == mg.shape == rk.shape):
        raise InputError("wrong, margin and risk must be 1-D of one length.")
    rules = (
        ("confident, correct", ~w, mg, "the correct decision with the largest margin"),
        ("flagged error", w, rk, "the wrong decision with the highest risk score"),
        ("confident error", w, mg, "the wrong decision with the largest margin"),
    )
    rows = []
    for role, mask, key, rule in rules:
        if mask.any():
            pos = np.flatnonzero(mask)
            rows.append({"role": role, "position": int(pos[np.argmax(key[pos])]), "rule": rule})
    return pd.DataFrame(rows, columns=["role", "position", "rule"]).set_index("role")


def case_gallery(probe: Any, phi: Any, action: int, runner_up: int | None = None, *,
                 n: int = 5, case_ids: Any = None, labels: Any = None) -> pd.DataFrame:
    """One decision's strongest supporting and opposing training cases (eq. 15).

    Parameters
    ----------
    probe : CaseInfluence
        Fitted decomposition.
    phi : array-like of shape (H,)
        The query's representation.
    action : int
        The audited action :math:`a_x`.
    runner_up : int, optional
        A second action :math:`b` (e.g. the second-best); adds the cases that raise
        :math:`Q(x, b)` most.
    n : int, default=5
        Cases per group.
    case_ids, labels : array-like of shape (n_cases,), optional
        Names and class labels of the training cases; default positions and the argmax of
        the returns.

    Returns
    -------
    DataFrame
        One row per shown case: ``group`` (``"raises Q(x, a)"``, ``"lowers Q(x, a)"``,
        ``"raises Q(x, b)"``), ``action`` (whose score the group is about), ``rank``,
        ``position``, ``case_id``, ``label``, ``alpha`` (:math:`\\alpha_i(x)`), ``psi``
        (:math:`\\psi_i` for the group's action). A group holds fewer than ``n`` rows when
        fewer cases have a contribution of that sign (zero contributions are never shown).
    """
    q = np.asarray(phi, dtype=np.float64)
    if q.ndim != 1:
        raise InputError(f"phi must be one query's representation (1-D), got shape {q.shape}.")
    n = check_positive_int("n", n)
    n_cases = probe.n_cases_
    ids = np.arange(n_cases) if case_ids is None else np.asarray(case_ids)
    lab = probe.returns_.argmax(1) if labels is None else np.asarray(labels)
    if ids.shape != (n_cases,) or lab.shape != (n_cases,):
        raise InputError(f"case_ids and labels must have one entry per case ({n_cases}).")
    alpha = probe.coefficients(q)
    groups = [("raises Q(x, a)", int(action), "positive"), ("lowers Q(x, a)", int(action),
                                                              "negative")]
    if runner_up is not None:
        groups.append(("raises Q(x, b)", int(runner_up), "positive"))
    rows = []
    k = min(n, n_cases)
    for group, act, order in groups:
        top = probe.top_cases(q, act, k=k, order=order)
        rank = 0
        for pos, psi in zip(np.atleast_1d(top.indices), np.atleast_1d(top.contributions),
                            strict=True):
            if (psi > 0) if order == "positive" else (psi < 0):
                rank += 1
                rows.append({"group": group, "action": act, "rank": rank, "position": int(pos),
                             "case_id": ids[pos], "label": int(lab[pos]),
                             "alpha": float(alpha[pos]), "psi": float(psi)})
    cols = ["group", "action", "rank", "position", "case_id", "label", "alpha", "psi"]
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------------- triage
def _score_wrong(score: Any, wrong: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(score, dtype=np.float64)
    w = np.asarray(wrong, dtype=bool)
    if s.ndim != 1 or s.shape != w.shape or s.size == 0:
        raise InputError(f"score and wrong must be 1-D of one length, got {s.shape}, {w.shape}.")
    if not np.isfinite(s).all():
        raise InputError("score must be finite.")
    return s, w


def expected_caught(score: Any, wrong: Any) -> np.ndarray:
    """Expected errors caught by reviewing the ``r`` highest-scored decisions, every ``r``.

    Decisions are reviewed in descending ``score``; tied scores in uniformly random order,
    whose expectation is exact: a tie group of ``g`` decisions holding ``w`` errors that is
    cut after ``j`` places contributes ``w * j / g``.

    Parameters
    ----------
    score : array-like of shape (m,)
        Higher = review first (risk, or minus the margin).
    wrong : array-like of bool of shape (m,)

    Returns
    -------
    ndarray of shape (m + 1,)
        Entry ``r``: expected number of wrong decisions among the first ``r`` reviewed
        (0 at ``r = 0``, ``wrong.sum()`` at ``r = m``).
    """
    s, w = _score_wrong(score, wrong)
    m = s.size
    order = np.argsort(-s, kind="stable")
    s_sorted, w_sorted = s[order], w[order].astype(np.float64)
    out = np.empty(m + 1)
    out[0] = 0.0
    start = 0
    done = 0.0
    while start < m:
        stop = start + 1
        while stop < m and s_sorted[stop] == s_sorted[start]:
            stop += 1
        g, wg = stop - start, w_sorted[start:stop].sum()
        out[start + 1 : stop + 1] = done + wg * np.arange(1, g + 1) / g
        done += wg
        start = stop
    return out


def review_curve(scores: Mapping[str, Any], wrong: Any) -> pd.DataFrame:
    """Share of the errors caught against the share of decisions reviewed, per score.

    Parameters
    ----------
    scores : mapping of str to array-like of shape (m,)
        Name -> score (higher = review first).
    wrong : array-like of bool of shape (m,)

    Returns
    -------
    DataFrame
        Columns ``score``, ``reviewed`` (0..m), ``budget`` (``reviewed / m``), ``caught``
        (expected count, :func:`expected_caught`) and ``caught_share`` (over all errors;
        NaN without errors); plus ``"random review"`` with ``caught = n_wrong * r / m``.
    """
    w = np.asarray(wrong, dtype=bool)
    m, n_wrong = w.size, int(w.sum())
    r = np.arange(m + 1)
    parts = []
    curves = {name: expected_caught(s, w) for name, s in scores.items()}
    curves["random review"] = n_wrong * r / m
    for name, c in curves.items():
        parts.append(pd.DataFrame({
            "score": name, "reviewed": r, "budget": r / m, "caught": c,
            "caught_share": c / n_wrong if n_wrong else np.nan,
        }))
    return pd.concat(parts, ignore_index=True)


def triage_table(scores: Mapping[str, Any], wrong: Any, budget: float = 0.1) -> pd.DataFrame:
    """Errors caught when the top ``budget`` share of decisions is reviewed, per score.

    Parameters
    ----------
    scores : mapping of str to array-like of shape (m,)
        Name -> score (higher = review first).
    wrong : array-like of bool of shape (m,)
    budget : float, default=0.1
        Share of the ``m`` decisions reviewed: the first ``ceil(budget * m)``.

    Returns
    -------
    DataFrame
        Indexed by ``score`` (the given names, then ``"random review (expected)"``), with
        ``reviewed``, ``errors`` (all wrong decisions), ``caught`` (expected count with ties
        in random order), ``caught_share`` (``caught / errors``) and ``precision``
        (``caught / reviewed``).
    """
    w = np.asarray(wrong, dtype=bool)
    m, n_wrong = w.size, int(w.sum())
    r = review_size(budget, m)
    rows = [(name, errors_caught(s, w, budget, ties="average")) for name, s in scores.items()]
    rows.append(("random review (expected)", n_wrong * r / m))
    return pd.DataFrame({
        "score": [name for name, _ in rows],
        "reviewed": r,
        "errors": n_wrong,
        "caught": [c for _, c in rows],
        "caught_share": [c / n_wrong if n_wrong else np.nan for _, c in rows],
        "precision": [c / r for _, c in rows],
    }).set_index("score")


# ---------------------------------------------------------------------- variants
def variant_table(split: DigitsSplit, variants: Mapping[str, OwnNetworkConfig]) -> pd.DataFrame:
    """Training accuracy, test accuracy and probe fidelity at the head's input, per variant.

    Parameters
    ----------
    split : DigitsSplit
    variants : mapping of str to OwnNetworkConfig
        Name -> configuration (e.g. another loss or activation).

    Returns
    -------
    DataFrame
        Indexed by ``variant``, with ``loss``, ``activation``, ``train_accuracy``,
        ``test_accuracy``, ``rank`` and ``width`` of the representation, ``solver``
        (``"lstsq"`` when the representation is rank-deficient, e.g. dead ReLU units),
        ``agreement``, ``rho_min`` and ``max_abs_diff`` (:func:`layer_fidelity` at the
        head's input).
    """
    C = int(max(split.y_train.max(), split.y_test.max())) + 1
    R = returns_from_labels(split.y_train, C)
    rows = []
    for name, cfg in variants.items():
        cfg = _check_config(cfg)
        run = train_mlp(split.X_train, split.y_train, cfg, n_classes=C)
        layer, _ = head_input(run.model)
        fid = layer_fidelity(run.model, split.X_train, R, split.X_test, [layer]).iloc[0]
        test_acc = float(np.mean(network_scores(run.model, split.X_test).argmax(1)
                                 == split.y_test))
        rows.append({"variant": name, "loss": cfg.loss, "activation": cfg.activation,
                     "train_accuracy": run.train_accuracy, "test_accuracy": test_acc,
                     "width": int(fid["width"]), "rank": int(fid["rank"]),
                     "solver": fid["solver"], "agreement": float(fid["agreement"]),
                     "rho_min": float(fid["rho_min"]),
                     "max_abs_diff": float(fid["max_abs_diff"])})
    return pd.DataFrame(rows).set_index("variant")

