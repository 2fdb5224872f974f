"""cbdt.torch: the guarded bridge (layer checks, solver fallback, Captum-style
estimator that survives clone/save/load, one probe_fidelity, input errors, submodule modes,
integer inputs, tuple outputs). Every test here fails on the bridge before the issue."""

from __future__ import annotations

import inspect
import io
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from _tolerance import assert_rounding_equal
from sklearn.base import clone
from torch import nn

import cbdt
from cbdt import (
    InputError,
    LayerWarning,
    RankDeficientError,
    ScoreUnitsWarning,
    SolverFallbackWarning,
)
from cbdt import torch as ct
from cbdt.exceptions import NotFittedError


def _data(n: int = 240, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int) + (X[:, 2] > 1).astype(int)
    return X, y, cbdt.returns_from_labels(y, 3)


def _mlp(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(),
                         nn.Linear(8, 3)).double()


@pytest.fixture(scope="module")
def ce():
    """A small float64 MLP trained by cross-entropy (its head gives logits)."""
    X, y, R = _data()
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    for _ in range(120):
        opt.zero_grad()
        nn.functional.cross_entropy(model(Xt), yt).backward()
        opt.step()
    return model, X, R


# ---------------------------------------------------------------------- item 1: the layer
@pytest.mark.parametrize("layer", ["4", "head-module", "model"])
def test_the_head_or_the_whole_model_is_refused_naming_the_head_input(ce, layer):
    model, X, R = ce
    lay = {"4": "4", "head-module": model[4], "model": model}[layer]
    what = "whole model" if layer == "model" else "is the head"
    with pytest.raises(InputError, match=what) as err:
        ct.from_torch(model, lay, X, R)
    assert "layer='3'" in str(err.value) and "head_input" in str(err.value)
    with pytest.raises(InputError, match=what):
        ct.probe_fidelity(model, lay, X, R, X[:20])
    with pytest.raises(InputError, match=what):
        ct.TorchCaseInfluence(model, lay).fit(X, R)


def test_a_layer_of_another_width_is_refused(ce):
    model, X, R = ce
    with pytest.raises(InputError, match=r"layer '1' \(Tanh\) gives 16 features per input, "
                                         r"but the head '4' \(Linear\) reads 8") as err:
        ct.from_torch(model, "1", X, R)
    assert "layer='3'" in str(err.value)


def test_a_pre_activation_layer_warns_and_names_the_right_one(ce):
    model, X, R = ce
    with pytest.warns(LayerWarning, match=r"layer '2' \(Linear\) is an nn.Linear "
                                          r"\(pre-activation\)") as rec:
        ct.from_torch(model, "2", X, R)
    assert "Pass layer='3' instead" in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct.from_torch(model, "3", X, R, head=model[4])  # the head's input: silent


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def test_head_input_is_public_and_traces_any_module(ce):
    model, X, R = ce
    assert ct.head_input(model) == ("3", model[4])
    torch.manual_seed(1)
    net = _Net().double()
    assert ct.head_input(net, X) == ("body", net.head)
    with pytest.raises(InputError, match="pass a few inputs"):
        ct.head_input(net)
    soft = nn.Sequential(*model, nn.Softmax(dim=1))  # a head followed by a softmax
    with pytest.raises(InputError, match=r"'4' \(Linear\) is the head.*layer='3'"):
        ct.from_torch(soft, "4", X, R)
    with pytest.raises(InputError, match=r"'5' \(Softmax\) outputs the network's scores"):
        ct.from_torch(soft, "5", X, R)
    with pytest.raises(InputError, match=r"is the head.*layer='body'"):
        ct.from_torch(net, "head", X, R[:, :2])
    with pytest.warns(LayerWarning, match="layer='body'"):
        ct.from_torch(net, "body.0", X, R[:, :2], solver="lstsq")


# ---------------------------------------------------------------------- item 3: rank
def _dead_relu(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 3)).double()
    with torch.no_grad():
        model[0].bias[[0, 4, 9]] = -1e3  # three dead units: zero on every input
        model[0].weight[6] = 0.0
        model[0].bias[6] = 0.5  # one constant unit
    return model


def test_auto_solver_falls_back_and_names_the_dead_and_constant_units():
    X, _, R = _data()
    model = _dead_relu()
    with pytest.warns(SolverFallbackWarning) as rec:
        ci = ct.from_torch(model, "1", X, R)
    msg = str(rec[0].message)
    for part in ("numerical rank 9 of 13 columns", "3 dead unit(s)", "[0, 4, 9]",
                 "1 constant unit(s) [6]", "solver='lstsq'", "choose another layer"):
        assert part in msg, part
    assert ci.solver_ == "lstsq" and ci.solver == "auto"
    phi = ci.phi(X[:30])
    np.testing.assert_allclose(ci.coefficients(phi) @ R, ci.scores(phi), atol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = ct.from_torch(model, "1", X, R, solver="lstsq")
    np.testing.assert_array_equal(same.coefficients(phi), ci.coefficients(phi))
    with pytest.warns(SolverFallbackWarning, match="dead unit"):
        est = ct.TorchCaseInfluence(model, "1").fit(X, R)
    assert est.solver_ == "lstsq"


def test_cholesky_raises_with_the_units_and_the_from_torch_fix():
    X, _, R = _data()
    with pytest.raises(RankDeficientError) as err:
        ct.from_torch(_dead_relu(), "1", X, R, solver="cholesky")
    msg = str(err.value)
    assert "[0, 4, 9]" in msg and "constant unit(s) [6]" in msg
    assert "from_torch(model, layer, X, R, solver='lstsq')" in msg
    assert "CaseInfluence(solver=" not in msg and err.value.rank == 9


# ---------------------------------------------------------------------- item 4: estimator
def test_captum_style_estimator_equals_from_torch_and_survives_clone(ce):
    model, X, R = ce
    est = ct.TorchCaseInfluence(model, model[3], head=model[4])
    params = est.get_params()
    assert params["model"] is model and params["layer"] == "3" and params["head"] == "4"
    est.fit(X, R)
    ref = ct.from_torch(model, "3", X, R, head=model[4])
    phi = est.phi(X[:25])
    np.testing.assert_array_equal(est.coefficients(phi), ref.coefficients(phi))
    twin = clone(est)
    assert not hasattr(twin, "readout_") and twin.model is not model
    twin.fit(X, R)
    np.testing.assert_array_equal(twin.coefficients(twin.phi(X[:25])), est.coefficients(phi))


def test_fit_passes_extra_keywords_to_case_influence(ce):
    model, X, R = ce
    if "action_names" not in inspect.signature(cbdt.CaseInfluence.fit).parameters:
        pytest.skip("CaseInfluence.fit has no action_names yet")
    ci = ct.TorchCaseInfluence(model, "3").fit(X, R, action_names=["a", "b", "c"])
    assert list(ci.action_names_) == ["a", "b", "c"]


def test_save_and_load_restore_a_working_audit(ce, tmp_path):
    model, X, R = ce
    ci = ct.from_torch(model, "3", X, R, head=model[4])
    path = tmp_path / "audit.npz"
    ci.save(path)
    back = ct.load(path, model)
    phi = ci.phi(X[:15])
    np.testing.assert_array_equal(back.phi(X[:15]), phi)
    np.testing.assert_array_equal(back.scores(phi), ci.scores(phi))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbdt.DegenerateAuditWarning)
        a, b = back.explain(phi, k=4), ci.explain(phi, k=4)
    pd.testing.assert_frame_equal(a.cases, b.cases)
    assert back.layer_name_ == "3" and back.head_ is model[4]
    bare = ct.TorchCaseInfluence.load(path)
    np.testing.assert_array_equal(bare.scores(phi), ci.scores(phi))
    with pytest.raises(NotFittedError, match=r"cbdt\.torch\.load\(path, model, layer\)"):
        bare.phi(X[:3])
    buf = io.BytesIO()  # a file object works too
    ci.save(buf)
    buf.seek(0)
    assert ct.load(buf, model).layer_name_ == "3"
    net = _mlp(1)
    # another network (and layer): refused at load since the file keeps the audited
    # network's fingerprint (issue 30, item 2; tests/test_torch_fingerprint.py)
    with pytest.raises(InputError, match="is not the network the audit"):
        ct.load(path, net, "1")


# ---------------------------------------------------------------------- item 6: fidelity
def test_probe_fidelity_says_when_the_scores_are_logits(ce):
    model, X, R = ce
    with pytest.warns(ScoreUnitsWarning, match="logits of a cross-entropy classifier"):
        fid = ct.probe_fidelity(model, "3", X, R, X[:100], head=model[4])
    assert not fid.same_units and "logits" in fid.units_note and fid.score_ratio > 3
    S = fid.network_scores
    spread = np.sqrt(np.mean((S - S.mean(0)) ** 2))  # the spread, written out again
    want = fid.max_abs_diff / spread  # equal to rounding: a mean of S.size squares
    assert_rounding_equal(fid.rel_max_abs_diff, want, ulps=S.size + len(S), scale=want)
    assert fid.rho is fid.rho_recon and fid.rho.shape == (3,)
    import copy

    net = copy.deepcopy(model)
    fid.probe.write_readout(net[4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # after write_readout: the returns' scale, no warning
        after = ct.probe_fidelity(net, "3", X, R, X[:100], probe=fid.probe)
    assert after.same_units and after.units_note is None and after.max_abs_diff < 1e-10
    assert after.rel_max_abs_diff < 1e-10


def test_one_probe_fidelity_for_a_case_network():
    from cbdt.metrics import pearson
    from cbdt.models import CaseNetwork

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(150, 2))
    R = np.c_[X.sum(1), -X[:, 0]]
    net = CaseNetwork(hidden=(8,), epochs=40, seed=0).fit(X, R)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = ct.probe_fidelity(net, None, X, R, X[:60])
        b = net.probe_fidelity(X, R, X[:60])
    np.testing.assert_array_equal(a.rho_recon, b.rho_recon)  # one function for both
    ps, ns = b.probe_scores, b.network_scores
    # metrics.pearson, another implementation: equal to rounding (|rho| <= 1, sums of m terms)
    assert_rounding_equal(b.rho_recon, [pearson(ps[:, j], ns[:, j]) for j in range(2)],
                          ulps=4 * len(ps), scale=1.0)
    assert a.same_units and 0 <= a.agreement <= 1
    with pytest.raises(InputError, match="layer=None"):
        ct.probe_fidelity(net, "body", X, R, X)
    with pytest.raises(InputError, match="X_test has 3 columns.*expects 2"):
        ct.probe_fidelity(net, None, X, R, np.zeros((4, 3)))


# ---------------------------------------------------------------------- item 7: inputs
def test_wrong_width_names_the_argument_and_both_widths(ce):
    model, X, R = ce
    with pytest.raises(InputError, match=r"X_test has 5 columns \(features per input\) but the "
                                         r"model expects 4") as err:
        ct.probe_fidelity(model, "3", X, R, np.zeros((3, 5)))
    assert "mat1" not in str(err.value)
    with pytest.raises(InputError, match="X_train has 3 columns"):
        ct.from_torch(model, "3", X[:, :3], R)
    torch.manual_seed(0)
    net = _Net().double()  # not a Sequential: the first layer's shape error is translated
    with pytest.raises(InputError, match=r"X has 7 columns .* expects 4: its first layer "
                                         r"'body.0'"):
        ct.TorchCaseInfluence(net, "body").fit(np.zeros((5, 7)), np.zeros((5, 2)))


def test_non_finite_inputs_are_reported_on_x(ce):
    model, X, R = ce
    Xb = X.copy()
    Xb[3, 1] = np.nan
    Xb[7, 2] = np.inf
    with pytest.raises(InputError, match=r"X_train contains 2 non-finite value\(s\) \(NaN or "
                                         r"inf\) in 2 row\(s\) \[3, 7\] and 2 column\(s\) "
                                         r"\[1, 2\]") as err:
        ct.from_torch(model, "3", Xb, R)
    assert "Phi" not in str(err.value)
    with pytest.raises(InputError, match="X_test contains 1 non-finite"):
        ct.probe_fidelity(model, "3", X, R, torch.as_tensor(Xb[:5]))
    frame = pd.DataFrame(X, columns=list("abcd")).assign(city="x")
    with pytest.raises(InputError, match=r"column\(s\) 'city' "):
        ct.features(model, "3", frame)


# ---------------------------------------------------------------------- C4, C5, C6
def test_features_restores_every_submodules_mode():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 2))
    model.double().train()
    model[1].eval()  # a frozen BatchNorm inside a model in training mode
    X, _, _ = _data(50)
    ct.features(model, "2", X)
    ct.probe_fidelity(model, "2", X, np.c_[X[:, 0], X[:, 1]], X[:10])
    assert model.training and model[0].training and model[3].training
    assert not model[1].training


def test_integer_inputs_reach_an_embedding_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 3), nn.Flatten(), nn.Tanh(), nn.Linear(6, 2)).double()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 10, size=(80, 2))
    R = rng.normal(size=(80, 2))
    Phi = ct.features(model, "2", torch.as_tensor(ids))
    with torch.no_grad():
        ref = torch.tanh(model[0](torch.as_tensor(ids)).reshape(80, -1)).numpy()
    np.testing.assert_array_equal(Phi, ref)
    np.testing.assert_array_equal(ct.features(model, "2", ids), Phi)  # an int numpy array
    ci = ct.from_torch(model, "2", ids, R, head=model[3])
    np.testing.assert_allclose(ci.coefficients(ci.phi(ids[:5])) @ R, ci.scores(Phi[:5]),
                               atol=1e-10)


class _TwoOutputs(nn.Module):
    def __init__(self, as_dict: bool = False) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 5), nn.Tanh())
        self.head = nn.Linear(5, 2)
        self.as_dict = as_dict

    def forward(self, x: torch.Tensor):
        h = self.body(x)
        return {"logits": self.head(h), "h": h} if self.as_dict else (self.head(h), h)


def test_a_tuple_or_dict_output_asks_for_an_output_selector():
    X, _, _ = _data(60)
    R = np.c_[X[:, 0], -X[:, 1]]
    torch.manual_seed(0)
    model = _TwoOutputs().double()
    with pytest.raises(InputError, match=r"returned a tuple of 2 items, not a tensor of scores; "
                                         r"pass output= .*output=0"):
        ct.probe_fidelity(model, "body", X, R, X[:10])
    fid = ct.probe_fidelity(model, "body", X, R, X[:10], output=0)
    with torch.no_grad():
        ref = model(torch.as_tensor(X[:10]))[0].numpy()
    np.testing.assert_array_equal(fid.network_scores, ref)
    torch.manual_seed(0)
    named = _TwoOutputs(as_dict=True).double()
    with pytest.raises(InputError, match="output='logits'"):
        ct.probe_fidelity(named, "body", X, R, X[:10])
    by_key = ct.probe_fidelity(named, "body", X, R, X[:10], output="logits")
    by_fn = ct.probe_fidelity(named, "body", X, R, X[:10], output=lambda o: o["logits"])
    np.testing.assert_array_equal(by_key.network_scores, by_fn.network_scores)
