"""The layer guard of cbdt.torch covers every model (issue 30, item 3 of the delivery).

Before, only an ``nn.Sequential`` (or a model returning one tensor) had its head found: for a
model returning a dict or a tuple, ``TorchCaseInfluence(model, "cls")`` fitted the head
itself without a word and ``probe_fidelity(..., output="logits")`` reported the "perfect
match that says nothing", and a layer of any width was accepted. A ``forward`` applying
``F.relu`` after the audited layer got a probe on the pre-activation. Every test here fails
on that code (the F.relu one through the LayerWarning turned error and the scores)."""

from __future__ import annotations

import copy
import io
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _tolerance import assert_rounding_equal
from torch import nn

import cbdt
from cbdt import InputError, LayerWarning
from cbdt import torch as ct


def _data(n: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1).astype(int)
    return X, cbdt.returns_from_labels(y, 3)


class _Outputs(nn.Module):
    """``body`` (4 -> 16 -> 6, tanh) and the head ``cls``; returns a dict or a tuple,
    optionally with a second ``nn.Linear`` output ``proj`` or an ``nn.Identity`` after the
    head."""

    def __init__(self, kind: str = "dict", proj: bool = False, after: bool = False) -> None:
        super().__init__()
        self.kind = kind
        self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 6), nn.Tanh())
        self.cls = nn.Linear(6, 3)
        self.proj = nn.Linear(6, 4) if proj else None
        self.after = nn.Identity() if after else None

    def forward(self, x: torch.Tensor):
        h = self.body(x)
        logits = self.cls(h)
        if self.after is not None:
            logits = self.after(logits)
        if self.kind == "tuple":
            return logits, h
        out = {"logits": logits, "feat": h}
        if self.proj is not None:
            out["proj"] = self.proj(h)
        return out


def _model(**kw) -> _Outputs:
    torch.manual_seed(0)
    return _Outputs(**kw).double()


def _logits(model: nn.Module, X: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        out = model(torch.as_tensor(X))
    out = out["logits"] if isinstance(out, dict) else out[0] if isinstance(out, tuple) else out
    return out.numpy()


# ---------------------------------------------------------------------- dict and tuple outputs
@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_the_head_of_a_dict_or_tuple_model_is_found_and_refused(kind):
    X, R = _data()
    model = _model(kind=kind)
    assert ct.head_input(model, X) == ("body", model.cls)
    for fit in (lambda: ct.TorchCaseInfluence(model, "cls").fit(X, R),
                lambda: ct.from_torch(model, model.cls, X, R)):
        with pytest.raises(InputError, match=r"layer 'cls' \(Linear\) is the head: its output "
                                             r"is the network's scores") as err:
            fit()
        assert "layer='body'" in str(err.value)
    with pytest.raises(InputError, match="whole model"):
        ct.TorchCaseInfluence(model, model).fit(X, R)


def test_probe_fidelity_on_the_head_of_a_dict_model_is_refused():
    """The issue's case: rho 0.97/0.98 on the logits themselves, 'better' than the layer."""
    X, R = _data()
    model = _model()
    for output in (None, "logits"):
        with pytest.raises(InputError, match="is the head.*perfect match that says nothing"):
            ct.probe_fidelity(model, "cls", X, R, X[:50], output=output)
    fid = ct.probe_fidelity(model, "body", X, R, X[:50], output="logits")
    assert fid.network_scores.shape == (50, 3)


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_a_layer_of_another_width_is_refused_for_a_dict_or_tuple_model(kind):
    X, R = _data()
    model = _model(kind=kind)
    with pytest.raises(InputError, match=r"layer 'body.0' \(Linear\) gives 16 features per "
                                         r"input, but the head 'cls' \(Linear\) reads 6") as err:
        ct.TorchCaseInfluence(model, "body.0").fit(X, R)
    assert "layer='body'" in str(err.value)
    with pytest.warns(LayerWarning, match=r"layer 'body.2' \(Linear\) is an nn.Linear "
                                          r"\(pre-activation\)") as rec:
        ct.TorchCaseInfluence(model, "body.2").fit(X, R)
    assert "Pass layer='body' instead" in str(rec[0].message)


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_the_found_head_takes_the_readout(kind):
    """head_ is the head found in the dict/tuple output: write_readout makes the network's
    logits the probe's scores (Prop. 1), to float64 rounding."""
    X, R = _data()
    model = copy.deepcopy(_model(kind=kind))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ci = ct.TorchCaseInfluence(model, "body").fit(X, R)
    assert ci.head_ is model.cls and ci.reads_head_input_ is False
    ci.write_readout()
    phi = ci.phi(X[:40])
    np.testing.assert_allclose(_logits(model, X[:40]), ci.scores(phi), rtol=0, atol=1e-10)


def test_a_layer_that_outputs_the_head_output_is_refused():
    X, R = _data()
    model = _model(after=True)  # logits = Identity(cls(h)): the Identity gives the scores
    with pytest.raises(InputError, match=r"layer 'after' \(Identity\) outputs the network's "
                                         r"scores \(its output is the output of the head 'cls'"):
        ct.TorchCaseInfluence(model, "after").fit(X, R)


def test_several_linear_outputs_need_head_and_head_given_is_checked():
    X, R = _data()
    model = _model(proj=True)  # {"logits": cls(h), "feat": h, "proj": proj(h)}
    with pytest.raises(InputError, match=r"holds the outputs of 2 nn.Linear modules "
                                         r"\(\['logits'\] from 'cls', \['proj'\] from 'proj'\).*"
                                         r"Pass head="):
        ct.TorchCaseInfluence(model, "body").fit(X, R)
    with pytest.raises(InputError, match="Pass head="):
        ct.head_input(model, X)
    for head in ("cls", model.cls):
        with pytest.raises(InputError, match=r"'cls' \(Linear\) is the head"):
            ct.TorchCaseInfluence(model, "cls", head=head).fit(X, R)
        with pytest.raises(InputError, match=r"'proj' \(Linear\) gives 4 features per input, "
                                             r"but the head 'cls' \(Linear\) reads 6"):
            ct.TorchCaseInfluence(model, "proj", head=head).fit(X, R)
        ci = ct.TorchCaseInfluence(model, "body", head=head).fit(X, R)
        assert ci.head_ is model.cls
    assert ct.head_input(model, X, head="cls") == ("body", model.cls)
    # probe_fidelity's output= names the scores: the head is found from them
    with pytest.raises(InputError, match=r"'cls' \(Linear\) is the head"):
        ct.probe_fidelity(model, "cls", X, R, X[:20], output="logits")
    fid = ct.probe_fidelity(model, "body", X, R, X[:20], output="logits")
    assert fid.probe.head_ is model.cls


# ---------------------------------------------------------------------- F.relu inside forward
class _Functional(nn.Module):
    """``cls(F.relu(fc(x)))``: the head's input is computed inside forward(); with
    ``deeper``, ``cls(F.relu(fc2(F.relu(fc(x)))))``; with ``concat`` the head reads
    ``[relu(fc(x)), x]``."""

    def __init__(self, deeper: bool = False, concat: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.fc2 = nn.Linear(6, 6) if deeper else None
        self.concat = concat
        self.cls = nn.Linear(10 if concat else 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc(x))
        if self.fc2 is not None:
            h = F.relu(self.fc2(h))
        if self.concat:
            h = torch.cat([h, x], dim=1)
        return self.cls(h)


def _functional(**kw) -> _Functional:
    torch.manual_seed(3)
    return _Functional(**kw).double()


def test_f_relu_after_the_layer_reads_the_head_input_exactly():
    """Fitted on the network's own logits, the probe on the head's input reproduces them to
    1e-10 on new inputs (the head is affine in its input); on fc's pre-activation (the old
    reading) it cannot."""
    X, _ = _data(300)
    Xq, _ = _data(60, seed=1)
    model = _functional()
    assert ct.head_input(model, X) == ("fc", model.cls)
    logits = _logits(model, X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no LayerWarning, no rank fallback: full rank H = 6
        ci = ct.TorchCaseInfluence(model, "fc").fit(X, logits)
    assert ci.reads_head_input_ is True and ci.head_ is model.cls
    assert ci.rank_ == 7 and ci.solver_ == "cholesky"
    with torch.no_grad():
        want = F.relu(model.fc(torch.as_tensor(Xq))).numpy()
    assert_rounding_equal(ci.phi(Xq), want)
    np.testing.assert_allclose(ci.scores(ci.phi(Xq)), _logits(model, Xq), rtol=0, atol=1e-10)
    # the fc output itself (what features() reads) is not phi
    assert np.abs(ct.features(model, "fc", Xq) - ci.phi(Xq)).max() > 0.1


def test_f_relu_rank_diagnosis_names_the_head_input_it_read():
    """A unit of fc that F.relu zeroes on every input makes the head's input rank-deficient;
    the fallback warning names what was audited (the head's input after 'fc'), not fc's output,
    which would send the reader to the wrong tensor."""
    X, R = _data(300)
    model = _functional()
    with torch.no_grad():
        model.fc.weight[2] = 0.0
        model.fc.bias[2] = -1.0  # relu(fc(x))[:, 2] == 0 for every x
    with pytest.warns(cbdt.SolverFallbackWarning) as rec:
        ci = ct.TorchCaseInfluence(model, "fc").fit(X, R)
    text = str(rec[0].message)
    assert "the input of the head 'cls' (Linear) (after layer 'fc' (Linear))" in text, text
    assert "1 dead unit(s)" in text and "[2]" in text, text
    assert ci.solver_ == "lstsq" and ci.rank_ == 6


def test_f_relu_write_readout_and_save_load_keep_reading_the_head_input():
    X, R = _data(300)
    model = copy.deepcopy(_functional())
    ci = ct.from_torch(model, "fc", X, R)
    ci.write_readout()  # the network's own head becomes the OLS readout (Prop. 1)
    phi = ci.phi(X[:50])
    np.testing.assert_allclose(_logits(model, X[:50]), ci.scores(phi), rtol=0, atol=1e-10)
    buf = io.BytesIO()
    ci.save(buf)
    buf.seek(0)
    back = ct.load(buf, model)
    assert back.reads_head_input_ is True and back.head_ is model.cls
    np.testing.assert_array_equal(back.phi(X[:50]), phi)  # the same computation
    table = ct.layer_fidelity(model, X, R, X[:50], ["fc"])
    assert not bool(table.loc["fc", "reads_head"])  # fc's own output is not what cls reads


def test_f_relu_on_an_earlier_layer_warns_and_names_the_last_one():
    X, R = _data(300)
    model = _functional(deeper=True)
    assert ct.head_input(model, X) == ("fc2", model.cls)
    with pytest.warns(LayerWarning, match=r"layer 'fc' \(Linear\) is an nn.Linear "
                                          r"\(pre-activation\)") as rec:
        ct.TorchCaseInfluence(model, "fc", solver="lstsq").fit(X, R)
    msg = str(rec[0].message)
    assert "layer='fc2'" in msg and "phi is read as the head's input" in msg
    ci = ct.TorchCaseInfluence(model, "fc2", solver="lstsq").fit(X, R)
    assert ci.reads_head_input_ is True


def test_a_head_input_no_module_gives_is_refused():
    """Where the pre-hook cannot stand for the layer (the head reads [relu(fc(x)), x]), the
    layer's width is refused and head_input says to wrap the step in a module."""
    X, R = _data()
    model = _functional(concat=True)
    with pytest.raises(InputError, match=r"layer 'fc' \(Linear\) gives 6 features per input, "
                                         r"but the head 'cls' \(Linear\) reads 10"):
        ct.TorchCaseInfluence(model, "fc").fit(X, R)
    with pytest.raises(InputError, match="computed inside forward.*Wrap that step"):
        ct.head_input(model, X)
