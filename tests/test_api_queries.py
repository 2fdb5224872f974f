"""The query API every case-influence estimator shares.

Each test names the trap it closes: ``explain`` silent on label-like returns, an action
name such as ``"treat_A"`` refused, action names parsed as mathtext in plot titles, a string
column reported as "X must be numeric, got dtype object" with the advice
``np.asarray(..., dtype=float)``, a ``TopCases`` whose ``==`` ignores ``case_ids``,
``audit_signals`` limited to ``CaseInfluence`` (or calling its private methods), no
``n_features_in_``.
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbdt
from cbdt import DegenerateAuditWarning, InputError
from cbdt.influence import CaseQueryMixin
from cbdt.plotting import plot_top_cases

NAMES = ["treat_A", "cost $5", "x^2"]


@pytest.fixture
def fitted():
    rng = np.random.default_rng(19)
    n, H = 90, 5
    Phi = rng.normal(size=(n, H))
    R = pd.DataFrame(rng.normal(size=(n, 3)), columns=NAMES)
    return cbdt.CaseInfluence().fit(Phi, R), Phi, R, rng.normal(size=(7, H))


# ----------------------------------------------------------------- item 2: degenerate audit
def test_explain_warns_exactly_like_audit_signals_on_one_hot_returns():
    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(120, 6))
    R = cbdt.returns_from_labels(rng.integers(0, 3, 120), 3)
    ci = cbdt.CaseInfluence().fit(Phi, R)
    Q = rng.normal(size=(4, 6))
    with pytest.warns(DegenerateAuditWarning) as w_ex:
        ex = ci.explain(Q, k=5)
    with pytest.warns(DegenerateAuditWarning) as w_au:
        sig = cbdt.audit_signals(ci, Q, k=5)
    (a,), (b,) = w_ex.list, w_au.list
    assert str(a.message).startswith("explain: the returns R are one-hot labels")
    assert str(a.message).removeprefix("explain") == str(b.message).removeprefix("audit_signals")
    assert "rank_by='coefficient'" in str(a.message)
    assert a.filename == b.filename == __file__  # points at the caller's line
    # the degenerate values it warns about, and one code path: the same signals
    assert np.all(ex.signals["gini"] == 0) and np.all(ex.signals["entropy"] < 1e-9)
    pd.testing.assert_frame_equal(ex.signals.reset_index(drop=True), sig, check_exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ex_c = ci.explain(Q, k=5, rank_by="coefficient")
        sig_c = cbdt.audit_signals(ci, Q, k=5, rank_by="coefficient")
    pd.testing.assert_frame_equal(ex_c.signals.reset_index(drop=True), sig_c, check_exact=True)


class _PublicOnly:
    """A view of an estimator with its public query interface only (no private members)."""

    def __init__(self, est):
        for name in ("scores", "top_cases", "returns_", "n_cases_", "n_actions_",
                     "action_names_"):
            setattr(self, name, getattr(est, name))


def test_audit_signals_needs_only_public_methods(fitted):
    ci, _, _, Q = fitted
    want = cbdt.audit_signals(ci, Q, k=6)
    pd.testing.assert_frame_equal(cbdt.audit_signals(_PublicOnly(ci), Q, k=6), want,
                                  check_exact=True)
    with pytest.raises(InputError, match="case-influence estimator"):
        cbdt.audit_signals(object(), Q)
    with pytest.raises(cbdt.NotFittedError):
        cbdt.audit_signals(cbdt.CaseInfluence(), Q)


class _DenseCases(CaseQueryMixin):
    """The smallest estimator the mixin serves: dense alpha = Phi G^-1 phi (eq. 10)."""

    batch_size = 3  # several blocks in the default ranking path

    def fit(self, Phi, R):
        G = Phi.T @ Phi
        self._D = np.linalg.solve(G, Phi.T).T  # (n, H), test-only explicit solve
        self.returns_ = np.asarray(R, dtype=float)
        self.n_cases_, self.n_features_in_ = Phi.shape
        self.n_actions_ = self.returns_.shape[1]
        self.action_names_ = np.asarray(R.columns)
        return self

    def _check_fitted(self):
        if not hasattr(self, "_D"):
            raise cbdt.NotFittedError("not fitted")

    def _alpha(self, Q, out=None):
        return np.matmul(Q, self._D.T, out=out)

    def scores(self, phi):
        Q, single = self._check_query(phi)
        S = self._alpha(Q) @ self.returns_
        return S[0] if single else S


def test_mixin_gives_any_estimator_the_same_queries(fitted):
    ci, Phi, R, Q = fitted
    dense = _DenseCases().fit(Phi, R)
    for kw in ({}, {"order": "positive"}, {"rank_by": "coefficient"}, {"action": "x^2"}):
        a, b = ci.top_cases(Q, k=8, **kw), dense.top_cases(Q, k=8, **kw)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_allclose(a.contributions, b.contributions, rtol=0, atol=1e-10)
        assert np.array_equal(a.action, b.action) and np.array_equal(a.action_name,
                                                                     b.action_name)
    ea, eb = ci.explain(Q, k=4), dense.explain(Q, k=4)
    np.testing.assert_array_equal(ea.cases["case_id"], eb.cases["case_id"])
    np.testing.assert_allclose(ea.cases["alpha"], eb.cases["alpha"], rtol=0, atol=1e-10)
    pd.testing.assert_frame_equal(ea.signals, eb.signals, check_exact=False, rtol=0,
                                  atol=1e-9)
    pd.testing.assert_frame_equal(cbdt.audit_signals(dense, Q, k=4),
                                  cbdt.audit_signals(ci, Q, k=4), rtol=0, atol=1e-9)
    np.testing.assert_allclose(dense.contributions(Q), ci.contributions(Q), rtol=0,
                               atol=1e-10)


def test_fused_scan_stays_the_path_no_dense_coefficients(monkeypatch):
    """top_cases / explain / audit_signals never form the (m, n) coefficients."""
    rng = np.random.default_rng(1)
    Phi, R = rng.normal(size=(6000, 8)), rng.normal(size=(6000, 3))
    ci = cbdt.CaseInfluence().fit(Phi, R)
    Q = rng.normal(size=(200, 8))  # 1.2e6 entries: more than one block of the scan
    ref = ci.top_cases(Q, 1, k=5)

    def refuse(*_a, **_k):
        raise AssertionError("the (m, n) coefficients were materialised")

    monkeypatch.setattr(ci, "_alpha", refuse)
    monkeypatch.setattr(ci, "coefficients", refuse)
    assert ci.top_cases(Q, 1, k=5) == ref
    ci.explain(Q, k=5)
    cbdt.audit_signals(ci, Q, k=5)


# ----------------------------------------------------------------- item 5: action names
def test_returns_frame_columns_name_the_actions_everywhere(fitted):
    ci, _, _, Q = fitted
    assert ci.action_names_.tolist() == NAMES
    for pos, name in enumerate(NAMES):
        assert ci.top_cases(Q, name, k=4) == ci.top_cases(Q, pos, k=4)
        np.testing.assert_array_equal(ci.contributions(Q, name), ci.contributions(Q, pos))
        pd.testing.assert_frame_equal(cbdt.audit_signals(ci, Q, name),
                                      cbdt.audit_signals(ci, Q, pos))
        assert (ci.explain(Q, name, k=3).signals["action"] == name).all()
    per_query = np.array(NAMES * 3)[: len(Q)]
    pos = np.array([0, 1, 2] * 3)[: len(Q)]
    assert ci.top_cases(Q, per_query, k=3) == ci.top_cases(Q, pos, k=3)
    assert ci.top_cases(Q, pd.Series(per_query), k=3) == ci.top_cases(Q, list(pos), k=3)
    # result frames carry the names; the decision (action=None) too
    dec = np.argmax(ci.scores(Q), axis=1)
    ex = ci.explain(Q, k=3)
    assert ex.signals["action"].tolist() == [NAMES[a] for a in dec]
    assert set(ex.cases["case_action"]) <= set(NAMES)
    assert ci.top_cases(Q, k=3).action_name.tolist() == [NAMES[a] for a in dec]
    assert ci.top_cases(Q, k=3).to_frame()["action"].iloc[0] == NAMES[dec[0]]


def test_unknown_action_name_lists_the_valid_names(fitted):
    ci, _, _, Q = fitted
    with pytest.raises(InputError) as e:
        ci.top_cases(Q, "treat_B")
    msg = str(e.value)
    assert "'treat_B'" in msg and "'treat_A', 'cost $5', 'x^2'" in msg
    with pytest.raises(InputError, match=r"query 1.*'treat_A', 'cost \$5', 'x\^2'"):
        ci.contributions(Q[:2], ["x^2", "nope"])
    with pytest.raises(InputError, match="out of range.*action names are"):
        ci.explain(Q, action=3)
    unnamed = cbdt.CaseInfluence().fit(np.eye(4), np.eye(4)[:, :2])
    assert unnamed.action_names_.tolist() == [0, 1]
    with pytest.raises(InputError, match="unnamed"):
        unnamed.top_cases(np.eye(4), "a", k=2)


def test_action_names_keyword_and_checks(fitted):
    _, Phi, R, Q = fitted
    ci = cbdt.CaseInfluence().fit(Phi, R.to_numpy(), action_names=["a", "b", "c"])
    assert ci.action_names_.tolist() == ["a", "b", "c"]
    assert ci.top_cases(Q, "c", k=2) == ci.top_cases(Q, 2, k=2)
    with pytest.raises(InputError, match="one name per column of R"):
        cbdt.CaseInfluence().fit(Phi, R, action_names=["a", "b"])
    with pytest.raises(InputError, match=r"\['a'\] appear more than once"):
        cbdt.CaseInfluence().fit(Phi, R, action_names=["a", "a", "b"])


def test_action_names_survive_save_and_load(fitted, tmp_path):
    ci, _, _, Q = fitted
    ci.save(tmp_path / "ci.npz")
    back = cbdt.CaseInfluence.load(tmp_path / "ci.npz")
    assert back.action_names_.tolist() == NAMES
    assert back.top_cases(Q, "cost $5", k=3) == ci.top_cases(Q, "cost $5", k=3)
    pd.testing.assert_frame_equal(back.explain(Q, k=3).signals, ci.explain(Q, k=3).signals)


@settings(max_examples=25, deadline=None)
@given(st.permutations(["up", "down", "hold", "sell"]), st.integers(0, 3))
def test_a_name_means_its_position(names, pos):
    rng = np.random.default_rng(pos)
    Phi, R = rng.normal(size=(30, 3)), rng.normal(size=(30, 4))
    ci = cbdt.CaseInfluence().fit(Phi, pd.DataFrame(R, columns=names))
    Q = rng.normal(size=(3, 3))
    assert ci.top_cases(Q, names[pos], k=4) == ci.top_cases(Q, pos, k=4)


def _shown(text_artist):
    """What matplotlib draws for a Text: (string, whether parsed as mathtext)."""
    return text_artist._preprocess_math(text_artist.get_text())


def test_plot_text_escapes_mathtext_in_action_names(fitted):
    ci, _, _, Q = fitted
    for action in NAMES:
        ex = ci.explain(Q, action=action, k=4)
        fig = ex.plot(0)
        ax = fig.axes[0]
        shown, is_math = _shown(ax.title)
        assert not is_math and f"top 4 cases of Q(x, {action}) = " in shown
        for lab in ax.get_yticklabels():
            drawn, math = _shown(lab)
            assert not math and any(f"({nm}," in drawn for nm in NAMES) or "other" in drawn
        plt.close(fig)
    # the same through action_names= on an unnamed fit (chapter 11's use)
    rng = np.random.default_rng(2)
    unnamed = cbdt.CaseInfluence().fit(rng.normal(size=(40, 5)), rng.normal(size=(40, 3)))
    ex = unnamed.explain(np.eye(5), k=3)
    assert ex.action_names is None
    fig = plot_top_cases(ex, 0, action_names=NAMES)
    shown, is_math = _shown(fig.axes[0].title)
    assert not is_math and any(f"Q(x, {nm})" in shown for nm in NAMES)
    plt.close(fig)


# ----------------------------------------------------------------- item 7: non-numeric data
def test_string_column_is_named_and_the_advice_works():
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"age": rng.normal(size=40), "city": rng.choice(["Oslo", "Lima"], 40),
                      "income": rng.normal(size=40)})
    R = rng.normal(size=(40, 2))
    with pytest.raises(InputError) as e:
        cbdt.CaseInfluence().fit(X, R)
    msg = str(e.value)
    assert "'city'" in msg and "pandas.get_dummies" in msg and ".drop(columns=['city'])" in msg
    assert "np.asarray" not in msg and "'age'" not in msg
    # the advice, as written, gives a fit that works
    Phi = pd.get_dummies(X, columns=["city"], dtype=float)
    assert cbdt.CaseInfluence().fit(Phi, R).n_features_in_ == 4
    assert cbdt.CaseInfluence().fit(X.drop(columns=["city"]), R).n_features_in_ == 2


def test_text_in_returns_or_object_arrays_is_located():
    Phi = np.random.default_rng(4).normal(size=(5, 2))
    R = pd.DataFrame({"a": [1.0, 2, 3, 4, 5], "b": [1, 2, "n/a", 4, 5]})
    with pytest.raises(InputError, match=r"R must be numeric.*'b'.*'n/a' in row 2") as e:
        cbdt.CaseInfluence().fit(Phi, R)
    assert "np.asarray" not in str(e.value)
    arr = np.array([[1.0, "x"], [2.0, "y"]], dtype=object)
    with pytest.raises(InputError, match=r"'x' at row 0, column 1") as e:
        cbdt.CaseInfluence().fit(arr, np.ones(2))
    assert "np.asarray" not in str(e.value)
    # numbers stored as objects still get the conversion that works for them
    with pytest.raises(InputError, match=r"np.asarray\(\.\.\., dtype=float\)"):
        cbdt.CaseInfluence().fit(np.array([[1, 2], [3, 5], [4, 1]], dtype=object), np.ones(3))


def test_nullable_numeric_columns_are_numbers():
    rng = np.random.default_rng(5)
    X = pd.DataFrame({"a": pd.array(rng.integers(0, 9, 30), dtype="Int64"),
                      "b": rng.normal(size=30)})
    R = rng.normal(size=(30, 2))
    ci = cbdt.CaseInfluence().fit(X, R)
    ref = cbdt.CaseInfluence().fit(X.astype(float).to_numpy(), R)
    np.testing.assert_array_equal(ci.readout_, ref.readout_)


# ----------------------------------------------------------------- API consistency
def test_top_cases_is_a_real_result_type(fitted):
    ci, _, _, Q = fitted
    top = ci.top_cases(Q, "cost $5", k=4)
    idx, psi = top  # still a pair
    assert idx is top.indices and psi is top.contributions and top[0] is idx
    np.testing.assert_allclose(psi, np.take_along_axis(ci.contributions(Q, 1), idx, axis=1),
                               rtol=0, atol=1e-12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        top.indices = idx
    assert pickle.loads(pickle.dumps(top)) == top
    relabelled = dataclasses.replace(top, case_ids=top.case_ids + 1000)
    assert relabelled != top  # == compares every field (the NamedTuple ignored case_ids)
    assert dataclasses.replace(top, action_name=np.array(["x"] * len(Q))) != top
    frame = top.to_frame()
    assert list(frame.columns) == ["query", "rank", "action", "position", "case_id", "psi"]
    assert (frame["action"] == "cost $5").all() and len(frame) == 4 * len(Q)
    single = ci.top_cases(Q[0], k=3, rank_by="coefficient")
    assert single.indices.shape == (3,) and isinstance(single.action, int)
    alpha = ci.coefficients(Q[0])
    np.testing.assert_array_equal(single.indices, np.argsort(-np.abs(alpha), kind="stable")[:3])
    np.testing.assert_allclose(single.coefficients, alpha[single.indices], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        single.contributions, alpha[single.indices] * ci.returns_[single.indices, single.action],
        rtol=0, atol=1e-12)


def test_action_none_means_each_querys_decision(fitted):
    ci, _, _, Q = fitted
    dec = np.argmax(ci.scores(Q), axis=1)
    np.testing.assert_array_equal(ci.contributions(Q), ci.contributions(Q, dec))
    assert ci.top_cases(Q, k=5) == ci.top_cases(Q, dec, k=5)
    assert ci.top_cases(Q, k=5, order="abs") == ci.top_cases(Q, dec, k=5, order="magnitude")


def test_k_is_keyword_only_and_the_second_positional_is_the_action(fitted):
    ci, _, _, Q = fitted
    with pytest.raises(TypeError):
        ci.top_cases(Q, 1, 4)  # k is keyword-only (no deprecation shim: nothing was released)
    pd.testing.assert_frame_equal(ci.explain(Q, 1, k=3).cases, ci.explain(Q, action=1, k=3).cases)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = ci.explain(Q, "x^2", k=2)  # a name is the action, positionally
    assert (named.signals["action"] == "x^2").all()


def test_n_features_in_without_an_alias(fitted):
    ci, Phi, _, _ = fitted
    assert ci.n_features_in_ == Phi.shape[1]
    assert not hasattr(ci, "n_features_")
    assert not hasattr(cbdt.CaseInfluence(), "n_features_in_")
