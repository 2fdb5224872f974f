"""Labels checked as scikit-learn does (issue 30, item 1).

* ``feature_names_in_`` is set from a ``Phi`` DataFrame whose column names are all strings
  (absent otherwise, also after a refit on an array) and survives ``save``/``load``;
* a query DataFrame whose columns differ from them (missing, unexpected or reordered) raises
  :class:`~cbdt.exceptions.InputError` naming the columns and the fix
  ``q[est.feature_names_in_]``; a plain array is accepted silently; a DataFrame given to an
  estimator fitted without names warns;
* ``Phi`` (or ``X``) and ``R`` given as pandas objects must have equal indexes, else an
  ``InputError`` names the first mismatching labels and how to align them.

Every estimator that takes ``Phi``/``R`` (``CaseInfluence``, ``NystromCaseInfluence``, the
baselines, ``cbdt.torch``) goes through the same checks (``cbdt._validation``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbdt
from cbdt import InputError
from cbdt.baselines import ExactCoefficient, InfluenceFunction, InnerProduct, RepresenterPoint

H = 4
COLS = list("abcd")


def _frames(n: int = 60, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    index = pd.Index([f"case{i}" for i in range(n)], name="case")
    Pdf = pd.DataFrame(rng.normal(size=(n, H)), columns=COLS, index=index)
    R = np.c_[Pdf["a"] + 0.5 * Pdf["b"] + 1.0, -Pdf["c"] + 0.1 * rng.normal(size=n)]
    Rdf = pd.DataFrame(R, columns=["buy", "sell"], index=index)
    return Pdf, Rdf


ESTIMATORS = {
    "CaseInfluence": lambda: cbdt.CaseInfluence(intercept=True),
    "Nystrom": lambda: cbdt.NystromCaseInfluence(H, ridge=1e-3),
    "ExactCoefficient": ExactCoefficient,
    "InfluenceFunction": InfluenceFunction,
    "RepresenterPoint": RepresenterPoint,
    "InnerProduct": InnerProduct,
}


@pytest.fixture(params=sorted(ESTIMATORS))
def make(request):
    return ESTIMATORS[request.param]


# ---------------------------------------------------------------------- indexes of Phi and R
def test_shuffled_returns_raise_instead_of_pairing_by_position():
    Pdf, Rdf = _frames()
    shuffled = Rdf.sample(frac=1, random_state=0)
    with pytest.raises(InputError) as err:
        cbdt.CaseInfluence(intercept=True).fit(Pdf, shuffled)
    msg = str(err.value)
    first = next(i for i in range(len(Pdf)) if Pdf.index[i] != shuffled.index[i])
    assert repr(Pdf.index[first]) in msg and repr(shuffled.index[first]) in msg
    assert "R.loc[Phi.index]" in msg and "reset_index(drop=True)" in msg
    # the advice works and gives the aligned fit
    fixed = cbdt.CaseInfluence(intercept=True).fit(Pdf, shuffled.loc[Pdf.index])
    ref = cbdt.CaseInfluence(intercept=True).fit(Pdf.to_numpy(), Rdf.to_numpy())
    q = Pdf.to_numpy()[:5]
    np.testing.assert_allclose(fixed.scores(q), ref.scores(q), atol=1e-12)


def test_returns_sharing_no_label_with_phi_raise():
    Pdf, Rdf = _frames()
    other = Rdf.set_axis(pd.RangeIndex(1000, 1000 + len(Rdf)), axis=0)
    with pytest.raises(InputError, match=r"no label in common|reset_index\(drop=True\)"):
        cbdt.CaseInfluence().fit(Pdf, other)


def test_default_index_on_one_side_only_is_a_mismatch():
    Pdf, Rdf = _frames()
    with pytest.raises(InputError, match="'case0'"):
        cbdt.CaseInfluence().fit(Pdf, Rdf.reset_index(drop=True))
    # a plain array R (or Phi) is paired by position, as in scikit-learn
    cbdt.CaseInfluence().fit(Pdf, Rdf.to_numpy())
    cbdt.CaseInfluence().fit(Pdf.to_numpy(), Rdf)


def test_a_returns_series_is_checked_too():
    Pdf, Rdf = _frames()
    with pytest.raises(InputError, match="R.loc"):
        cbdt.CaseInfluence().fit(Pdf, Rdf["buy"][::-1])
    cbdt.CaseInfluence().fit(Pdf, Rdf["buy"])


def test_every_estimator_checks_the_indexes(make):
    Pdf, Rdf = _frames()
    with pytest.raises(InputError, match=r"R\.loc\[Phi\.index\]"):
        make().fit(Pdf, Rdf.sample(frac=1, random_state=1))
    make().fit(Pdf, Rdf)  # equal indexes: fine


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(12)))
def test_any_reordering_of_the_returns_is_refused_or_identical(perm):
    Pdf, Rdf = _frames(n=12, seed=3)
    R2 = Rdf.iloc[list(perm)]
    if list(perm) == list(range(12)):
        cbdt.CaseInfluence().fit(Pdf, R2)
        return
    with pytest.raises(InputError, match="R.loc"):
        cbdt.CaseInfluence().fit(Pdf, R2)
    fixed = cbdt.CaseInfluence().fit(Pdf, R2.loc[Pdf.index])
    ref = cbdt.CaseInfluence().fit(Pdf, Rdf)
    np.testing.assert_array_equal(fixed.returns_, ref.returns_)


# ---------------------------------------------------------------------- feature names
def test_feature_names_in_follows_scikit_learn():
    Pdf, Rdf = _frames()
    ci = cbdt.CaseInfluence().fit(Pdf, Rdf)
    assert list(ci.feature_names_in_) == COLS
    assert ci.feature_names_in_.dtype == object and len(ci.feature_names_in_) == ci.n_features_in_
    ci.fit(Pdf.to_numpy(), Rdf.to_numpy())  # a refit on an array: no names any more
    assert not hasattr(ci, "feature_names_in_")
    ints = Pdf.set_axis(range(H), axis=1)
    assert not hasattr(cbdt.CaseInfluence().fit(ints, Rdf), "feature_names_in_")


def test_reordered_query_columns_raise_with_the_fix():
    Pdf, Rdf = _frames()
    ci = cbdt.CaseInfluence(intercept=True).fit(Pdf, Rdf)
    q = Pdf.iloc[:5]
    with pytest.raises(InputError) as err:
        ci.scores(q[list("dcba")])
    msg = str(err.value)
    assert "order" in msg and "q[est.feature_names_in_]" in msg
    assert "['a', 'b', 'c', 'd']" in msg
    # the fix gives the scores of the right columns
    np.testing.assert_array_equal(ci.scores(q[list("dcba")][ci.feature_names_in_]), ci.scores(q))


def test_missing_and_unexpected_query_columns_are_named():
    Pdf, Rdf = _frames()
    ci = cbdt.CaseInfluence().fit(Pdf, Rdf)
    q = Pdf.iloc[:3].rename(columns={"c": "x"})
    with pytest.raises(InputError) as err:
        ci.coefficients(q)
    msg = str(err.value)
    assert "missing" in msg and "'c'" in msg and "unexpected" in msg and "'x'" in msg


def test_a_plain_array_query_is_accepted_silently(make):
    Pdf, Rdf = _frames()
    est = make().fit(Pdf, Rdf)
    assert list(est.feature_names_in_) == COLS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = est.scores(Pdf.to_numpy()[:4])
        b = est.scores(Pdf.iloc[:4])
        est.contributions(Pdf.to_numpy()[0])
    np.testing.assert_array_equal(a, b)


def test_every_estimator_refuses_reordered_columns(make):
    Pdf, Rdf = _frames()
    est = make().fit(Pdf, Rdf)
    q = Pdf.iloc[:4][list("badc")]
    for method in ("scores", "contributions", "top_cases"):
        with pytest.raises(InputError, match=r"feature_names_in_"):
            getattr(est, method)(q)


def test_names_at_query_but_not_at_fit_warn(make):
    Pdf, Rdf = _frames()
    est = make().fit(Pdf.to_numpy(), Rdf.to_numpy())
    with pytest.warns(UserWarning, match="fitted without feature names"):
        est.scores(Pdf.iloc[:3])


def test_a_query_row_as_a_series_is_checked_by_its_index():
    Pdf, Rdf = _frames()
    ci = cbdt.CaseInfluence().fit(Pdf, Rdf)
    np.testing.assert_array_equal(ci.scores(Pdf.iloc[0]), ci.scores(Pdf.to_numpy()[0]))
    with pytest.raises(InputError, match="reordered"):
        ci.scores(Pdf[list("dcba")].iloc[0])


def test_query_methods_of_case_influence_all_check_names():
    Pdf, Rdf = _frames()
    ci = cbdt.CaseInfluence().fit(Pdf, Rdf)
    q = Pdf.iloc[:3][list("dcba")]
    for call in (
        lambda: ci.coefficients(q),
        lambda: ci.leverage(q),
        lambda: ci.explain(q, k=3),
        lambda: list(ci.iter_coefficients(q)),
        lambda: cbdt.audit_signals(ci, q, k=3),
    ):
        with pytest.raises(InputError, match="order"):
            call()


@settings(max_examples=25, deadline=None)
@given(st.permutations(COLS))
def test_any_permutation_of_the_query_columns(perm):
    Pdf, Rdf = _frames(n=30, seed=1)
    ci = cbdt.CaseInfluence().fit(Pdf, Rdf)
    q = Pdf.iloc[:2][list(perm)]
    if list(perm) == COLS:
        np.testing.assert_array_equal(ci.scores(q), ci.scores(Pdf.to_numpy()[:2]))
    else:
        with pytest.raises(InputError, match="order"):
            ci.scores(q)


# ---------------------------------------------------------------------- persistence
def test_feature_names_survive_save_and_load(tmp_path):
    Pdf, Rdf = _frames()
    ci = cbdt.CaseInfluence().fit(Pdf, Rdf)
    ci.save(tmp_path / "ci.npz")
    back = cbdt.CaseInfluence.load(tmp_path / "ci.npz")
    assert list(back.feature_names_in_) == COLS
    with pytest.raises(InputError, match="order"):
        back.scores(Pdf.iloc[:2][list("dcba")])
    ny = cbdt.NystromCaseInfluence(H, ridge=1e-3).fit(Pdf, Rdf)
    ny.save(tmp_path / "ny.npz")
    assert list(cbdt.NystromCaseInfluence.load(tmp_path / "ny.npz").feature_names_in_) == COLS


def test_files_without_feature_names_still_load(tmp_path):
    """A file written before feature names were stored (no 'feature_names' entry)."""
    Pdf, Rdf = _frames()
    for est, cls in ((cbdt.CaseInfluence(), cbdt.CaseInfluence),
                     (cbdt.NystromCaseInfluence(H, ridge=1e-3), cbdt.NystromCaseInfluence)):
        est.fit(Pdf, Rdf)
        est.save(tmp_path / "new.npz")
        with np.load(tmp_path / "new.npz", allow_pickle=False) as f:
            old = {k: f[k] for k in f.files if k != "feature_names"}
        np.savez(tmp_path / "old.npz", **old)
        back = cls.load(tmp_path / "old.npz")
        assert not hasattr(back, "feature_names_in_")
        np.testing.assert_array_equal(back.scores(Pdf.to_numpy()[:3]), est.scores(Pdf.iloc[:3]))


# ---------------------------------------------------------------------- cbdt.torch
torch = pytest.importorskip("torch")


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(H, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def test_torch_checks_the_indexes_of_X_and_R():
    from cbdt import torch as ct

    Xdf, Rdf = _frames()
    net = _net()
    shuffled = Rdf.sample(frac=1, random_state=0)
    with pytest.raises(InputError, match=r"R\.loc\[X\.index\]"):
        ct.TorchCaseInfluence(net, "1").fit(Xdf, shuffled)
    with pytest.raises(InputError, match=r"R_train\.loc\[X_train\.index\]"):
        ct.from_torch(net, "1", Xdf, shuffled)
    ct.TorchCaseInfluence(net, "1").fit(Xdf, shuffled.loc[Xdf.index])


def test_networks_and_fidelity_helpers_check_the_indexes():
    from cbdt import torch as ct
    from cbdt.models import CaseNetwork

    Xdf, Rdf = _frames()
    shuffled = Rdf.sample(frac=1, random_state=2)
    with pytest.raises(InputError, match=r"R\.loc\[X\.index\]"):
        CaseNetwork(hidden=(4,), epochs=2).fit(Xdf, shuffled)
    net = CaseNetwork(hidden=(4,), epochs=2).fit(Xdf.to_numpy(), Rdf.to_numpy())
    from cbdt.baselines import fit_methods

    with pytest.raises(InputError, match=r"R_train\.loc\[X_train\.index\]"):
        fit_methods(net, Xdf, shuffled)
    with pytest.raises(InputError, match=r"R_train\.loc\[X_train\.index\]"):
        ct.layer_fidelity(_net(), Xdf, shuffled, Xdf.iloc[:5], layers=["1"])


def test_torch_checks_the_input_columns(tmp_path):
    from cbdt import torch as ct

    Xdf, Rdf = _frames()
    ci = ct.TorchCaseInfluence(_net(), "1").fit(Xdf, Rdf)
    assert list(ci.input_names_in_) == COLS
    with pytest.raises(InputError, match=r"X\[est\.input_names_in_\]"):
        ci.phi(Xdf.iloc[:3][list("dcba")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(ci.phi(Xdf.to_numpy()[:3]), ci.phi(Xdf.iloc[:3]))
    ci.save(tmp_path / "t.npz")
    back = ct.load(tmp_path / "t.npz", ci.model_)
    assert list(back.input_names_in_) == COLS
