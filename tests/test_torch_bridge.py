"""cbdt.torch: from any torch model to the exact case account (Prop. 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _tolerance import EPS32, assert_rounding_equal
from torch import nn

import cbdt
from cbdt import InputError
from cbdt import torch as ct


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int) + (X[:, 2] > 1).astype(int)
    R = cbdt.returns_from_labels(y)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    for _ in range(150):  # cross-entropy: the head is not the OLS readout
        opt.zero_grad()
        nn.functional.cross_entropy(model(Xt), yt).backward()
        opt.step()
    return model, X, R


def _float32_rounding_scale(model, X):
    """What rounding can move in ``tanh(W2 tanh(W1 x + b1) + b2)`` (``model[:4]``), per
    entry: two float32 evaluations differ by at most 24 eps32 times it (the 17-term sums of
    the second layer with its bias, the 5-term ones of the first carried through |W2|, and a
    rounding of each tanh)."""
    W1, b1, W2, b2 = (t.detach().double().numpy() for t in (model[0].weight, model[0].bias,
                                                             model[2].weight, model[2].bias))
    h1 = np.tanh(X @ W1.T + b1)
    phi = np.tanh(h1 @ W2.T + b2)
    first = np.abs(X) @ np.abs(W1).T + np.abs(b1)
    return (first + np.abs(h1)) @ np.abs(W2).T + np.abs(b2) + np.abs(phi)


def test_features_read_the_layer_output_in_float64(trained):
    model, X, _ = trained
    phi = ct.features(model, model[3], X, batch_size=37)
    with torch.no_grad():
        ref = model[:4](torch.as_tensor(X)).double().numpy()
    assert phi.dtype == np.float64 and phi.shape == (300, 8)
    # batches of 37 against one batch of 300 (and the model called directly): other float32
    # GEMMs, equal to float32 rounding
    scale = _float32_rounding_scale(model, X)
    assert_rounding_equal(phi, ref, ulps=24, scale=scale, eps=EPS32)
    assert_rounding_equal(phi, ct.features(model, "3", X), ulps=24, scale=scale, eps=EPS32)
    assert model.training  # the mode is restored


def test_from_torch_infers_the_intercept_and_is_exact(trained):
    model, X, R = trained
    ci = ct.from_torch(model, "3", X, R, head=model[4])
    assert ci.intercept and ci.n_features_in_ == 8
    phi = ci.phi(X[:20])
    assert np.allclose(ci.coefficients(phi) @ R, ci.scores(phi), atol=1e-10)  # Prop. 1
    no_bias = nn.Linear(8, 3, bias=False)
    assert not ct.from_torch(model, "3", X, R, head=no_bias).intercept
    ex = ci.explain(phi, k=5, rank_by="coefficient")
    assert len(ex.cases) == 100 and list(ex.signals.index) == list(range(20))


def test_write_readout_makes_prop1_hold_for_the_network(trained):
    model, X, R = trained
    import copy

    net = copy.deepcopy(model)
    with pytest.warns(cbdt.ScoreUnitsWarning, match="logits"):  # cross-entropy logits
        before = ct.probe_fidelity(net, "3", X, R, X[:100], head=net[4])
    assert before.max_abs_diff > 0.1  # a cross-entropy head is not the OLS readout
    before.probe.write_readout(net[4])
    after = ct.probe_fidelity(net, "3", X, R, X[:100], probe=before.probe)
    assert after.agreement == 1.0 and after.max_abs_diff < 1e-4  # float32 head
    alpha = before.probe.coefficients(before.probe.phi(X[:100]))
    np.testing.assert_allclose(alpha @ R, after.network_scores, atol=1e-4)
    assert np.all(after.rho > 0.999999)


def test_clear_errors(trained):
    model, X, R = trained
    with pytest.raises(InputError, match="no submodule 'nope'"):
        ct.features(model, "nope", X)
    with pytest.raises(InputError, match="not one of model's submodules"):
        ct.features(model, nn.Tanh(), X)
    with pytest.raises(InputError, match="must be a torch.nn.Module"):
        ct.features(lambda x: x, "0", X)
    ci = ct.from_torch(model, "3", X, R)
    with pytest.raises(InputError, match="head maps 8 -> 2"):
        ci.write_readout(nn.Linear(8, 2))
    with pytest.raises(InputError, match="has no bias"):
        ci.write_readout(nn.Linear(8, 3, bias=False))
    with pytest.raises(InputError, match="one score per action"):
        ct.probe_fidelity(model, "3", X, R[:, :2], X[:10])
