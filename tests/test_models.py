"""Tests of cbdt.models: deterministic training, representation, checkpoints, probe fidelity."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _tolerance import assert_rounding_equal

from cbdt import CaseInfluence
from cbdt.exceptions import InputError, NotFittedError, RankDeficientError
from cbdt.models import CaseNetwork, Checkpoint, ProbeFidelity, set_determinism


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(120, 2))
    R = np.c_[np.sin(2 * X[:, 0]), X[:, 1] ** 2, X.sum(1)] + 0.05 * rng.normal(size=(120, 3))
    Xt = rng.uniform(-1, 1, size=(40, 2))
    return X, R, Xt


@pytest.fixture(scope="module")
def net(toy):
    X, R, _ = toy
    return CaseNetwork(hidden=(16, 8), epochs=150, n_checkpoints=5, seed=3).fit(X, R)


def test_set_determinism_sets_flags():
    set_determinism(5, threads=1)
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.get_num_threads() == 1
    a = torch.rand(3)
    set_determinism(5, threads=1)
    assert torch.equal(a, torch.rand(3))


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_set_determinism_rejects_bad_seed(bad):
    with pytest.raises(InputError):
        set_determinism(bad)


def test_set_determinism_rejects_bad_threads():
    with pytest.raises(InputError):
        set_determinism(0, threads=0)


@pytest.mark.parametrize("batch_size", [None, 32])
def test_same_seed_is_bit_identical(toy, batch_size):
    X, R, Xt = toy
    kw = dict(hidden=(16, 8), epochs=40, n_checkpoints=4, seed=11, batch_size=batch_size)
    a = CaseNetwork(**kw).fit(X, R)
    b = CaseNetwork(**kw).fit(X, R)
    assert np.array_equal(a.represent(Xt), b.represent(Xt))
    assert np.array_equal(a.predict(Xt), b.predict(Xt))
    assert np.array_equal(a.loss_curve_, b.loss_curve_)
    for ca, cb in zip(a.checkpoints_, b.checkpoints_, strict=True):
        assert ca.epoch == cb.epoch and ca.lr == cb.lr
        for k in ca.state:
            assert torch.equal(ca.state[k], cb.state[k])


def test_different_seeds_differ(toy):
    X, R, Xt = toy
    a = CaseNetwork(hidden=(8,), epochs=5, seed=0).fit(X, R)
    b = CaseNetwork(hidden=(8,), epochs=5, seed=1).fit(X, R)
    assert not np.array_equal(a.represent(Xt), b.represent(Xt))


def test_shapes_and_dtypes(net, toy):
    X, R, Xt = toy
    Phi = net.represent(Xt)
    assert Phi.shape == (40, 8) and Phi.dtype == np.float64
    assert net.predict(Xt).shape == (40, 3)
    assert net.represent(Xt[0]).shape == (8,)
    assert net.predict(Xt[0]).shape == (3,)
    assert net.represent_checkpoints(Xt[0]).shape == (5, 8)
    np.testing.assert_array_equal(net.represent(Xt[0]), net.represent(Xt[:1])[0])
    assert net.width_ == 8 and net.n_actions_ == 3 and net.n_features_in_ == 2
    assert net.head_weight_.shape == (3, 8) and net.head_bias_.shape == (3,)
    assert net.loss_curve_.shape == (150,)
    assert net.loss_curve_[-1] < net.loss_curve_[0]
    assert np.array_equal(net.decide(Xt), np.argmax(net.predict(Xt), 1))


def test_head_is_linear_in_phi(net, toy):
    """Q_nn(x, a) = w_a^T phi(x) + b_a (eq. 3 with an intercept)."""
    _, _, Xt = toy
    Q = net.represent(Xt) @ net.head_weight_.T + net.head_bias_
    np.testing.assert_allclose(Q, net.predict(Xt), atol=1e-5)


def test_checkpoints(net, toy):
    X, _, _ = toy
    cks = net.checkpoints_
    assert len(cks) == 5 and all(isinstance(c, Checkpoint) for c in cks)
    assert [c.epoch for c in cks] == [30, 60, 90, 120, 150]
    assert all(c.lr == pytest.approx(net.lr) for c in cks)
    # the last checkpoint is the trained network
    np.testing.assert_array_equal(net.represent(X, checkpoint=-1), net.represent(X))
    np.testing.assert_array_equal(cks[-1].head_weight, net.head_weight_)
    # earlier checkpoints have a different representation (the body moves during training)
    assert not np.allclose(net.represent(X, checkpoint=0), net.represent(X))
    stack = net.represent_checkpoints(X[:7])
    assert stack.shape == (5, 7, 8)
    np.testing.assert_array_equal(stack[2], net.represent(X[:7], checkpoint=2))
    np.testing.assert_allclose(
        net.predict(X, checkpoint=1),
        net.represent(X, checkpoint=1) @ cks[1].head_weight.T + cks[1].head_bias,
        atol=1e-5,
    )


def test_probe_fidelity(net, toy):
    X, R, Xt = toy
    pf = net.probe_fidelity(X, R, Xt)
    assert isinstance(pf, ProbeFidelity)
    assert isinstance(pf.probe, CaseInfluence)
    assert pf.rho_recon.shape == (3,)
    assert np.all(pf.rho_recon > 0.95)
    Phi_t = net.represent(Xt)
    np.testing.assert_allclose(pf.probe_scores, pf.probe.scores(Phi_t))
    np.testing.assert_array_equal(pf.network_scores, net.predict(Xt))
    # Proposition 1 on the frozen representation: sum_i alpha_i r_i(a) == probe score
    alpha = pf.probe.coefficients(Phi_t)
    np.testing.assert_allclose(alpha @ R, pf.probe_scores, atol=1e-7)
    import cbdt.models

    assert not hasattr(cbdt.models, "probe_fidelity")  # one function: network.probe_fidelity


def test_probe_fidelity_keeps_its_numbers_and_gains_scale_free_ones(net, toy):
    """The one result type: rho_recon exactly as the book computed it (metrics.pearson per
    action), plus agreement and the scale-free measures, with no warning for a CaseNetwork."""
    import warnings

    from cbdt import torch as ct
    from cbdt.metrics import pearson

    X, R, Xt = toy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pf = net.probe_fidelity(X, R, Xt)
        same = ct.probe_fidelity(net, None, X, R, Xt)
    ps, ns = pf.probe_scores, pf.network_scores
    # metrics.pearson is another implementation of the correlation: equal to rounding (three
    # sums of m terms and the means that centre them, |rho| <= 1: 4 m eps)
    m = len(ps)
    assert_rounding_equal(pf.rho_recon, [pearson(ps[:, a], ns[:, a]) for a in range(3)],
                          ulps=4 * m, scale=1.0)
    np.testing.assert_array_equal(same.rho_recon, pf.rho_recon)  # the same function
    assert pf.agreement == np.mean(ps.argmax(1) == ns.argmax(1))  # a count over m: exact
    assert pf.max_abs_diff == np.abs(ps - ns).max()  # one rounded subtraction per entry
    spread = np.sqrt(np.mean((ns - ns.mean(0)) ** 2))  # the spread, written out again
    assert_rounding_equal(pf.rel_max_abs_diff, pf.max_abs_diff / spread, ulps=ns.size + m,
                          scale=pf.max_abs_diff / spread)
    assert pf.same_units and pf.units_note is None and pf.score_ratio < 3


def test_relu_dead_units_need_lstsq():
    """A ReLU layer wider than its input has dead or collinear units on few points."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(60, 1))
    R = np.c_[X[:, 0], -X[:, 0]]
    net = CaseNetwork(hidden=(64,), activation="relu", epochs=3, seed=0).fit(X, R)
    with pytest.raises(RankDeficientError):
        net.probe_fidelity(X, R, X)
    pf = net.probe_fidelity(X, R, X, solver="lstsq")
    assert pf.probe.solver_ == "lstsq"
    # the minimum-norm probe is still exact (Prop. 1 with G^+) and reproduces the query, to
    # the accuracy its numerical rank allows: rank_ is Phi's (numpy's matrix_rank), and the
    # kept singular values span cond_k = s_1 / s_rank (about 6e9 here), so rounding errors
    # of size eps * cond_k are inherent (numpy's pinv shows the same)
    Phi = np.c_[net.represent(X), np.ones(len(X))]
    assert pf.probe.rank_ == np.linalg.matrix_rank(Phi) < Phi.shape[1]
    sv = np.linalg.svd(Phi, compute_uv=False)
    tol = 10 * np.finfo(float).eps * sv[0] / sv[pf.probe.rank_ - 1]
    alpha = pf.probe.coefficients(net.represent(X))
    np.testing.assert_allclose(alpha @ R, pf.probe_scores, rtol=0, atol=tol)
    np.testing.assert_allclose(alpha.T, np.linalg.pinv(Phi.T) @ Phi.T, rtol=0, atol=tol)
    # alpha is the minimum-norm solution: it lies in the row space of Phi^T (column space)
    proj = Phi @ np.linalg.lstsq(Phi, alpha.T, rcond=None)[0]
    np.testing.assert_allclose(proj, alpha.T, atol=tol)
    np.testing.assert_allclose(Phi.T @ alpha.T, Phi.T, atol=tol)


def test_checkpoints_capped_at_epochs(toy):
    X, R, _ = toy
    net = CaseNetwork(hidden=(4,), epochs=3, n_checkpoints=10).fit(X, R)
    assert [c.epoch for c in net.checkpoints_] == [1, 2, 3]


def test_one_dimensional_returns(toy):
    X, R, Xt = toy
    net = CaseNetwork(hidden=(4,), epochs=3).fit(X, R[:, 0])
    assert net.predict(Xt).shape == (40, 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hidden": ()},
        {"hidden": (0,)},
        {"hidden": (8, -1)},
        {"hidden": 3},
        {"activation": "sigmoid"},
        {"epochs": 0},
        {"lr": 0.0},
        {"batch_size": 0},
        {"weight_decay": -1.0},
        {"n_checkpoints": 0},
        {"dtype": "float16"},
        {"dtype": np.float64},
    ],
)
def test_bad_parameters(toy, kwargs):
    X, R, _ = toy
    with pytest.raises(InputError):
        CaseNetwork(**kwargs).fit(X, R)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_network_computes_in_its_dtype(toy, dtype):
    X, R, Xt = toy
    net = CaseNetwork(hidden=(8,), epochs=20, n_checkpoints=2, seed=1, dtype=dtype).fit(X, R)
    want = getattr(torch, dtype)
    assert all(p.dtype == want for p in net.module_.parameters())
    assert all(v.dtype == want for ck in net.checkpoints_ for v in ck.state.values())
    assert net.predict(Xt).dtype == np.float64  # returned as float64 whatever the dtype
    assert "dtype=" in repr(net)


def test_float64_initialisation_is_pytorch_default_drawn_in_float64(toy):
    X, R, _ = toy
    net = CaseNetwork(hidden=(16, 8), epochs=1, n_checkpoints=1, lr=1e-12, seed=7).fit(X, R)
    set_determinism(7)
    first = torch.nn.Linear(2, 16, dtype=torch.float64)  # the first layer PyTorch would draw
    w = net.module_.body[0].weight.detach()
    assert torch.allclose(w, first.weight.detach(), rtol=0, atol=1e-9)  # one Adam step of 1e-12
    # a float64 draw is not a widened float32 draw: its values use all 53 bits
    assert (w != w.float().double()).any()


def test_float64_training_is_far_less_sensitive_to_rounding_than_float32(toy):
    """A perturbation of one unit in the last place of the inputs, as another CPU's rounding
    would make, moves float32 training by far more than float64 training."""
    X, R, Xt = toy
    spread = {}
    for dtype, ulp in (("float64", np.finfo(np.float64).eps), ("float32", np.finfo(np.float32).eps)):
        kw = {"hidden": (16, 8), "epochs": 300, "seed": 2, "dtype": dtype}
        a = CaseNetwork(**kw).fit(X, R).predict(Xt)
        b = CaseNetwork(**kw).fit(X * (1 + ulp), R).predict(Xt)
        spread[dtype] = np.abs(a - b).max() / np.abs(a).max()
    assert spread["float64"] < 1e-9
    assert spread["float32"] > 1e3 * spread["float64"]


def test_bad_inputs(toy):
    X, R, _ = toy
    with pytest.raises(InputError, match="rows"):
        CaseNetwork(epochs=1).fit(X, R[:-1])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(InputError, match="non-finite"):
        CaseNetwork(epochs=1).fit(Xn, R)
    Rn = R.copy()
    Rn[0, 0] = np.inf
    with pytest.raises(InputError, match="non-finite"):
        CaseNetwork(epochs=1).fit(X, Rn)
    with pytest.raises(InputError):
        CaseNetwork(epochs=1).fit(X[:1], R[:1])


def test_not_fitted_and_wrong_width(net, toy):
    X, R, _ = toy
    fresh = CaseNetwork()
    for call in (fresh.represent, fresh.predict, fresh.represent_checkpoints):
        with pytest.raises(NotFittedError, match="fit"):
            call(X)
    with pytest.raises(InputError, match="features"):
        net.predict(np.zeros((2, 3)))
    with pytest.raises(InputError, match="checkpoint"):
        net.represent(X, checkpoint=99)
