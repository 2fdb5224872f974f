"""A saved torch audit knows its network (issue 30, item 2).

``TorchCaseInfluence.save`` stores a fingerprint of the audited network: the names, shapes
and sha256 of the float64 values of the parameters and buffers of the layers up to ``layer``
and of the head. ``cbdt.torch.load(path, model)`` with another network raises, naming the
first differing parameter and how to proceed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import cbdt  # noqa: E402
from cbdt import InputError  # noqa: E402
from cbdt import torch as ct  # noqa: E402


def _net(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))


@pytest.fixture(scope="module")
def audit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1).astype(int)
    model = _net()
    ci = ct.from_torch(model, "3", X, cbdt.returns_from_labels(y, 3), head=model[4])
    return model, X, ci


def _saved(ci, tmp_path):
    path = tmp_path / "audit.npz"
    ci.save(path)
    return path


def test_the_same_network_loads(audit, tmp_path):
    model, X, ci = audit
    path = _saved(ci, tmp_path)
    back = ct.load(path, copy.deepcopy(model))  # same weights in another object: fine
    np.testing.assert_array_equal(back.scores(back.phi(X[:5])), ci.scores(ci.phi(X[:5])))
    with np.load(path, allow_pickle=False) as f:
        fp = json.loads(str(f["torch_fingerprint"]))
    assert fp["layer"] == "3" and fp["head"] == "4"
    fp = fp["params"]
    names = [e[0] for e in fp]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    w = model[0].weight.detach().double().numpy()
    assert fp[0][1] == [16, 4] and fp[0][2] == hashlib.sha256(w.tobytes()).hexdigest()


def test_other_weights_of_the_same_architecture_raise(audit, tmp_path):
    """The reproducer: first layer + 0.5 loaded silently, scores off by 0.87."""
    model, X, ci = audit
    path = _saved(ci, tmp_path)
    other = copy.deepcopy(model)
    with torch.no_grad():
        other[0].weight += 0.5
    with pytest.raises(InputError) as err:
        ct.load(path, other)
    msg = str(err.value)
    assert "'0.weight'" in msg
    assert "the network that was audited" in msg and "refit" in msg


def test_the_first_differing_parameter_is_named(audit, tmp_path):
    model, _, ci = audit
    path = _saved(ci, tmp_path)
    other = copy.deepcopy(model)
    with torch.no_grad():
        other[2].bias[3] += 1e-6  # a tiny change is still another network
        other[4].weight += 1.0
    with pytest.raises(InputError, match=r"'2\.bias'"):
        ct.load(path, other)
    head_only = copy.deepcopy(model)
    with torch.no_grad():
        head_only[4].bias += 1.0
    with pytest.raises(InputError, match=r"'4\.bias'"):
        ct.load(path, head_only)


def test_another_architecture_names_the_shape(audit, tmp_path):
    _, _, ci = audit
    path = _saved(ci, tmp_path)
    torch.manual_seed(1)
    wide = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 8), nn.Tanh(),
                         nn.Linear(8, 3))
    with pytest.raises(InputError, match=r"'0\.weight'.*shape"):
        ct.load(path, wide)


def test_a_head_holding_the_written_readout_is_the_audited_network(audit, tmp_path):
    """The README's order: save, then write_readout; the later load sees the new head."""
    model, X, ci = audit
    path = _saved(ci, tmp_path)
    net = copy.deepcopy(model)
    ci2 = ct.load(path, net)
    ci2.write_readout(net[4])
    back = ct.load(path, net)
    np.testing.assert_array_equal(back.scores(back.phi(X[:3])), ci.scores(ci.phi(X[:3])))


def test_the_fingerprint_is_taken_when_fitting(audit, tmp_path):
    """A network changed after the fit is not the audited one."""
    _, X, _ = audit
    y = (X[:, 0] > 0).astype(int)
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(),
                          nn.Linear(8, 2))
    ci = ct.from_torch(model, "3", X, cbdt.returns_from_labels(y, 2), head=model[4])
    audited = copy.deepcopy(model)
    with torch.no_grad():
        model[0].bias += 0.25
    path = _saved(ci, tmp_path)
    with pytest.raises(InputError, match=r"'0\.bias'"):
        ct.load(path, model)
    ct.load(path, audited)


def test_layers_after_the_audited_layer_do_not_matter():
    """Only the layers up to ``layer`` and the head make the audit."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    ci = ct.from_torch(model, "1", X, rng.normal(size=(120, 3)), head=model[2])
    fp = ci._fingerprint["params"]
    assert [e[0] for e in fp] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert ct._fingerprint(model, "0", None) == fp[:2]


def test_buffers_are_part_of_the_fingerprint(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(150, 4)).astype(np.float32)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 2)).eval()
    ci = ct.from_torch(model, "2", X, rng.normal(size=(150, 2)), head=model[3])
    path = tmp_path / "bn.npz"
    ci.save(path)
    other = copy.deepcopy(model)
    other[1].running_mean += 1.0
    with pytest.raises(InputError, match=r"'1\.running_mean'"):
        ct.load(path, other)


def test_a_file_without_a_fingerprint_still_loads(audit, tmp_path):
    """Files written before the fingerprint (no 'torch_fingerprint' entry) load, with a
    warning that the network cannot be checked."""
    model, X, ci = audit
    path = _saved(ci, tmp_path)
    with np.load(path, allow_pickle=False) as f:
        old = {k: f[k] for k in f.files if k != "torch_fingerprint"}
    np.savez(tmp_path / "old.npz", **old)
    with pytest.warns(UserWarning, match="no fingerprint"):
        back = ct.load(tmp_path / "old.npz", model)
    np.testing.assert_array_equal(back.scores(back.phi(X[:3])), ci.scores(ci.phi(X[:3])))


def test_a_bare_load_and_save_keeps_the_fingerprint(audit, tmp_path):
    model, _, ci = audit
    path = _saved(ci, tmp_path)
    bare = ct.TorchCaseInfluence.load(path)
    bare.save(tmp_path / "again.npz")
    other = copy.deepcopy(model)
    with torch.no_grad():
        other[0].weight += 0.5
    with pytest.raises(InputError, match=r"'0\.weight'"):
        ct.load(tmp_path / "again.npz", other)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct.load(tmp_path / "again.npz", model)
