"""Tests of cbdt.book.experiments.own_network (chapter 11): a user's own torch classifier, audited.

Small networks on a subset of scikit-learn's digits (shipped with scikit-learn, no download).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

import cbdt
from cbdt import torch as ct
from cbdt.book import plots
from cbdt.book.experiments import own_network as own
from cbdt.exceptions import InputError

matplotlib.use("Agg")

TINY = own.OwnNetworkConfig(hidden=(16, 8), epochs=8, batch_size=32, lr=1e-2, seed=3)


@pytest.fixture(scope="module")
def split() -> own.DigitsSplit:
    pytest.importorskip("sklearn.datasets")
    full = own.load_digits_split(n_train=1000, seed=0)
    # a smaller memory keeps the tests fast; every class is still present
    return own.DigitsSplit(full.X_train[:300], full.X_test[:200], full.y_train[:300],
                           full.y_test[:200], full.train_idx[:300], full.test_idx[:200])


@pytest.fixture(scope="module")
def trained(split) -> own.TrainedMLP:
    return own.train_mlp(split.X_train, split.y_train, TINY, n_classes=10)


@pytest.fixture(scope="module")
def probe(split, trained) -> ct.TorchCaseInfluence:
    layer, head = own.head_input(trained.model)
    R = cbdt.returns_from_labels(split.y_train, 10)
    return ct.from_torch(trained.model, layer, split.X_train, R, head=head)


# ---------------------------------------------------------------------- data and training
def test_load_digits_split_is_stratified_scaled_and_disjoint():
    pytest.importorskip("sklearn.datasets")
    s = own.load_digits_split(n_train=1000, seed=0)
    assert s.X_train.shape == (1000, 64) and s.X_test.shape == (797, 64)
    assert s.X_train.dtype == np.float32
    assert s.X_train.min() >= 0 and s.X_train.max() <= 1
    assert not set(s.train_idx) & set(s.test_idx)
    assert len(set(s.train_idx) | set(s.test_idx)) == 1797
    counts = np.bincount(s.y_train, minlength=10)
    assert counts.min() >= 97 and counts.max() <= 102  # about 1000/1797 of each class
    again = own.load_digits_split(n_train=1000, seed=0)
    np.testing.assert_array_equal(s.train_idx, again.train_idx)


def test_training_is_deterministic_for_a_fixed_seed(split, trained):
    again = own.train_mlp(split.X_train, split.y_train, TINY, n_classes=10)
    for p, q in zip(trained.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(p, q)
    np.testing.assert_array_equal(trained.losses, again.losses)
    other = own.train_mlp(split.X_train, split.y_train,
                          own.OwnNetworkConfig(**{**TINY.__dict__, "seed": 4}), n_classes=10)
    assert not torch.equal(next(other.model.parameters()), next(trained.model.parameters()))


def test_training_learns(split, trained):
    assert trained.losses.shape == (TINY.epochs,)
    assert trained.losses[-1] < trained.losses[0]
    assert trained.train_accuracy > 0.8
    acc = np.mean(own.network_scores(trained.model, split.X_train).argmax(1) == split.y_train)
    assert acc == pytest.approx(trained.train_accuracy)


def test_mse_loss_trains_too(split):
    run = own.train_mlp(split.X_train, split.y_train,
                        own.OwnNetworkConfig(**{**TINY.__dict__, "loss": "mse"}), n_classes=10)
    assert run.losses[-1] < run.losses[0]


def test_make_mlp_and_head_input():
    m = own.make_mlp(64, 10, (16, 8), "relu")
    assert [type(x).__name__ for x in m] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    layer, head = own.head_input(m)
    assert layer == "3" and head is m[4] and head.out_features == 10
    with pytest.raises(InputError):
        own.head_input(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh()))
    with pytest.raises(InputError):
        own.make_mlp(4, 2, (3,), "gelu")


def test_config_is_validated(split):
    with pytest.raises(InputError, match="loss"):
        own.train_mlp(split.X_train, split.y_train, own.OwnNetworkConfig(loss="hinge"))
    with pytest.raises(InputError, match="epochs"):
        own.train_mlp(split.X_train, split.y_train, own.OwnNetworkConfig(epochs=0))
    with pytest.raises(InputError, match="rows"):
        own.train_mlp(split.X_train, split.y_train[:-1], TINY)


# ---------------------------------------------------------------------- fidelity, readout
def test_prop1_is_exact_for_the_probe_and_for_the_rewritten_network(split, trained, probe):
    before = own.prop1_residual(trained.model, probe, split.X_test)
    assert before["probe"] < 1e-10  # Proposition 1 for the OLS probe, float64
    assert before["network"] > 1e-3  # a cross-entropy head is not the OLS readout
    w_before = trained.model[-1].weight.detach().clone()
    audited = own.with_readout(trained.model, probe)
    after = own.prop1_residual(audited, probe, split.X_test)
    assert after["network"] <= after["bound"]  # the rounding bound of the two sums
    assert torch.equal(trained.model[-1].weight, w_before)  # the original is untouched
    # the rewritten network decides as the probe does (up to float32 near-ties)
    S = probe.scores(probe.phi(split.X_test))
    Q = own.network_scores(audited, split.X_test)
    assert np.mean(S.argmax(1) == Q.argmax(1)) > 0.99


def test_with_readout_needs_the_head_input(split, trained):
    R = cbdt.returns_from_labels(split.y_train, 10)
    with pytest.warns(cbdt.LayerWarning, match="pre-activation"):  # same width, not the input
        other = ct.from_torch(trained.model, "2", split.X_train, R)
    with pytest.raises(InputError, match="another layer"):
        own.with_readout(trained.model, other)


def test_layer_fidelity_marks_the_head_input_and_matches_probe_fidelity(split, trained, probe):
    R = cbdt.returns_from_labels(split.y_train, 10)
    lf = own.layer_fidelity(trained.model, split.X_train, R, split.X_test, layers=["1", "3"])
    assert list(lf.index) == ["1", "3"]
    assert lf["reads_head"].tolist() == [False, True]
    assert lf.loc["3", "width"] == 8 and lf.loc["3", "rank"] == 9
    with pytest.warns(cbdt.ScoreUnitsWarning, match="logits"):  # a cross-entropy head
        fid = ct.probe_fidelity(trained.model, "3", split.X_train, R, split.X_test, probe=probe)
    assert lf.loc["3", "agreement"] == pytest.approx(fid.agreement)
    assert lf.loc["3", "rho_min"] == pytest.approx(fid.rho.min())
    assert lf.loc["3", "max_abs_diff"] == pytest.approx(fid.max_abs_diff)
    assert ((lf["agreement"] >= 0) & (lf["agreement"] <= 1)).all()


def test_layer_fidelity_falls_back_to_min_norm_on_dead_units(split):
    model = own.make_mlp(64, 10, (8,), "relu")
    with torch.no_grad():
        model[0].bias[:3] = -1e3  # three dead units: Phi has three zero columns
    R = cbdt.returns_from_labels(split.y_train, 10)
    lf = own.layer_fidelity(model, split.X_train, R, split.X_test)
    assert lf.loc["1", "solver"] == "lstsq" and lf.loc["1", "rank"] == 8 - 3 + 1
    assert not lf.loc["0", "reads_head"]


# ---------------------------------------------------------------------- decisions shown
def test_pick_queries_follows_its_rules():
    wrong = np.array([False, True, False, True, True])
    margin = np.array([0.9, 0.1, 1.2, 0.8, 0.8])
    risk = np.array([0.0, 2.0, 0.5, 2.0, 1.0])
    picks = own.pick_queries(wrong, margin, risk)
    assert picks.loc["confident, correct", "position"] == 2
    assert picks.loc["flagged error", "position"] == 1  # tie on risk: lowest position
    assert picks.loc["confident error", "position"] == 3
    none_wrong = own.pick_queries(np.zeros(3, bool), np.ones(3), np.ones(3))
    assert list(none_wrong.index) == ["confident, correct"]


def test_case_gallery_signs_labels_and_contributions(split, probe):
    phi = probe.phi(split.X_test[:1])[0]
    S = probe.scores(phi)
    a, b = np.argsort(S)[-1], np.argsort(S)[-2]
    g = own.case_gallery(probe, phi, int(a), int(b), n=4, case_ids=split.train_idx,
                         labels=split.y_train)
    alpha = probe.coefficients(phi)
    R = probe.returns_
    up, down, rival = (g[g.group == k] for k in ("raises Q(x, a)", "lowers Q(x, a)",
                                                 "raises Q(x, b)"))
    assert len(up) == 4 and (up.psi > 0).all() and up.psi.is_monotonic_decreasing
    assert (down.psi < 0).all() and down.psi.is_monotonic_increasing
    assert (rival.psi > 0).all() and (rival.label == b).all()
    assert (up.label == a).all() and (down.label == a).all()  # one-hot returns
    for _, r in g.iterrows():
        assert r.psi == pytest.approx(alpha[r.position] * R[r.position, r.action], abs=1e-12)
        assert r.alpha == pytest.approx(alpha[r.position], abs=1e-12)
        assert r.case_id == split.train_idx[r.position]
    # psi of the strongest supporter is the largest positive contribution of all cases
    psi_all = alpha * R[:, a]
    assert up.psi.iloc[0] == pytest.approx(psi_all.max())


# ---------------------------------------------------------------------- triage
def test_expected_caught_hand_made():
    c = own.expected_caught([5.0, 4.0, 3.0, 2.0, 1.0], [False, True, False, True, False])
    np.testing.assert_allclose(c, [0, 0, 1, 1, 2, 2])
    # a tie group of three holding one error, reviewed in random order
    c = own.expected_caught([1.0, 1.0, 1.0, 0.0], [True, False, False, True])
    np.testing.assert_allclose(c, [0, 1 / 3, 2 / 3, 1, 2])


def test_triage_table_hand_made():
    # 20 decisions, 4 errors; the score ranks two errors first, the margin one
    wrong = np.zeros(20, bool)
    wrong[[0, 1, 10, 19]] = True
    good = np.linspace(1, 0, 20)  # decision 0 highest, then 1, ...
    tab = own.triage_table({"good": good, "constant": np.zeros(20)}, wrong, budget=0.1)
    assert tab["reviewed"].tolist() == [2, 2, 2]
    assert tab.loc["good", "caught"] == 2 and tab.loc["good", "caught_share"] == 0.5
    assert tab.loc["good", "precision"] == 1.0
    assert tab.loc["constant", "caught"] == pytest.approx(4 * 2 / 20)  # = random, exactly
    assert tab.loc["random review (expected)", "caught"] == pytest.approx(0.4)
    assert tab["errors"].eq(4).all()


@pytest.mark.parametrize("seed", range(5))
def test_triage_agrees_with_the_review_curve(seed):
    # triage_table (cbdt.metrics.errors_caught, closed form at the cut) against the review
    # curve (expected_caught, tie group by tie group) at the same number of reviews
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 6, size=57).astype(float)  # many ties
    w = rng.random(57) < 0.3
    curve = own.expected_caught(s, w)
    for budget in (0.05, 0.1, 0.37, 1.0):
        tab = own.triage_table({"s": s}, w, budget=budget)
        r = int(tab.loc["s", "reviewed"])
        assert r == int(np.ceil(round(budget * 57, 9)))
        assert tab.loc["s", "caught"] == pytest.approx(curve[r], abs=1e-12)


def test_review_curve_endpoints_and_monotone():
    rng = np.random.default_rng(0)
    s, w = rng.normal(size=40), rng.random(40) < 0.25
    curve = own.review_curve({"s": s}, w)
    assert set(curve.score) == {"s", "random review"}
    for _, g in curve.groupby("score"):
        assert g.caught.iloc[0] == 0 and g.caught.iloc[-1] == pytest.approx(w.sum())
        assert (np.diff(g.caught) >= -1e-12).all()
        assert g.budget.iloc[-1] == 1.0
    rnd = curve[curve.score == "random review"]
    np.testing.assert_allclose(rnd.caught_share, rnd.budget)


def test_triage_rejects_bad_input():
    with pytest.raises(InputError):
        own.triage_table({"s": [1.0, 2.0]}, [True, False], budget=0.0)
    with pytest.raises(InputError):
        own.expected_caught([1.0, np.nan], [True, False])
    with pytest.raises(InputError):
        own.expected_caught([1.0, 2.0], [True])


def test_variant_table(split):
    small = own.OwnNetworkConfig(**{**TINY.__dict__, "epochs": 3})
    vt = own.variant_table(split, {"tanh": small,
                                   "relu": own.OwnNetworkConfig(**{**small.__dict__,
                                                                   "activation": "relu"})})
    assert list(vt.index) == ["tanh", "relu"]
    assert {"train_accuracy", "test_accuracy", "agreement", "rho_min", "max_abs_diff",
            "rank", "solver"} <= set(vt.columns)
    assert vt.loc["tanh", "rank"] == 9 and vt.loc["tanh", "solver"] == "cholesky"


# ---------------------------------------------------------------------- figures
def _min_fontsize(fig) -> float:
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
    return min(sizes)


def test_plot_case_gallery(split, probe):
    phi = probe.phi(split.X_test[:1])[0]
    S = probe.scores(phi)
    g = own.case_gallery(probe, phi, int(S.argmax()), int(np.argsort(S)[-2]),
                         case_ids=split.train_idx, labels=split.y_train)
    fig = plots.plot_case_gallery(split.X_test[0], g, split.X_train, title="query")
    assert fig.get_size_inches()[0] <= 7.0
    assert _min_fontsize(fig) >= 8
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert any(f"#{g.case_id.iloc[0]}" in t and "α=" in t and "ψ=" in t for t in titles)
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError):
        plots.plot_case_gallery(split.X_test[0], pd.DataFrame(), split.X_train)


def test_plot_review_triage():
    rng = np.random.default_rng(1)
    margin, risk = rng.random(50), rng.random(50)
    wrong = rng.random(50) < 0.2
    curve = own.review_curve({"risk": risk, "margin": -margin}, wrong)
    fig = plots.plot_review_triage(curve, margin, risk, wrong, budget=0.1)
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= 7.0
    assert _min_fontsize(fig) >= 8
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "random review (expected)" in labels and "margin" in labels
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_written_readout_is_exact_to_the_rounding_bound_of_its_dtype(split, dtype):
    import dataclasses

    cfg = dataclasses.replace(TINY, dtype=dtype)
    tr = own.train_mlp(split.X_train, split.y_train, cfg, n_classes=10)
    assert next(tr.model.parameters()).dtype == getattr(torch, dtype)
    layer, head = own.head_input(tr.model)
    R = cbdt.returns_from_labels(split.y_train, 10)
    probe = ct.from_torch(tr.model, layer, split.X_train, R, head=head)
    res = own.prop1_residual(own.with_readout(tr.model, probe), probe, split.X_test)
    assert res["dtype"] == dtype
    assert res["network"] <= res["bound"]
    # the bound is a rounding bound of that dtype, not a loose constant
    assert res["bound"] < (1e-10 if dtype == "float64" else 1e-3)
    if dtype == "float32":
        assert res["network"] > 1e-9  # float32 rounding of the head is visible


def test_config_rejects_an_unknown_dtype(split):
    import dataclasses

    with pytest.raises(InputError, match="dtype"):
        own.train_mlp(split.X_train, split.y_train, dataclasses.replace(TINY, dtype="half"))
