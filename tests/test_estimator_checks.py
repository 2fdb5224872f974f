"""One behaviour suite for every estimator type of cbdt (as ``sklearn.utils.estimator_checks``).

The estimators share one base (:class:`cbdt._base.CaseEstimator`): parameters declared once
and checked at ``fit``, one validation of ``(Phi, R, case_ids, action_names)`` with its
warnings, and the query API. Each check below runs on every entry of :data:`ESTIMATORS`:
the exact :class:`cbdt.CaseInfluence` (plain and with intercept and ridge),
:class:`cbdt.NystromCaseInfluence`, :class:`cbdt.torch.TorchCaseInfluence` (on a torch model
whose layer outputs the same ``Phi``) and the baselines of :mod:`cbdt.baselines`
(``ExactCoefficient``, ``InfluenceFunction``, ``RepresenterPoint``, ``InnerProduct``,
``TracIn``). A check that does not apply to a type says why in :data:`ESTIMATORS`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import cbdt
from cbdt import baselines as bl
from cbdt.exceptions import InputError, NotFittedError, ReturnsWarning

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cbdt.torch")

N, H, A = 40, 4, 3


def _model() -> Any:
    """A float64 network whose layer ``"0"`` is the identity on its input, so that
    ``phi(X) = X``: the torch audit sees exactly the ``Phi`` the other estimators see."""
    torch.manual_seed(0)
    body = torch.nn.Linear(H, H, bias=False).double()
    with torch.no_grad():
        body.weight.copy_(torch.eye(H, dtype=torch.float64))
    return torch.nn.Sequential(body, torch.nn.Linear(H, A).double())


def _tracin_checkpoints(Phi: Any, seed: int = 0, n_actions: int = A) -> list[bl.HeadCheckpoint]:
    rng = np.random.default_rng(seed)
    return [bl.HeadCheckpoint(Phi, rng.normal(size=(n_actions, H)), rng.normal(size=n_actions),
                              0.1) for _ in range(2)]


@dataclass
class Case:
    """How to build, fit and query one estimator type."""

    make: Callable[[], Any]
    #: fit(estimator, Phi, R, **kw): Phi may be a DataFrame
    fit: Callable[..., Any] = lambda est, Phi, R, **kw: est.fit(Phi, R, **kw)
    #: the query form of Phi rows
    query: Callable[[Any], Any] = lambda Q: Q
    #: sum_i contributions_i(a) == scores(a) (the case decomposition of Prop. 1)
    decomposes: bool = True
    #: a parameter value that fit must refuse, and the words of its message
    bad_param: tuple[str, Any, str] | None = None
    #: the feature-names attribute (torch: the model's inputs)
    names_attr: str = "feature_names_in_"
    skip: dict[str, str] = field(default_factory=dict)


def _tracin_fit(est: Any, Phi: Any, R: Any, **kw: Any) -> Any:
    return est.fit(_tracin_checkpoints(Phi, n_actions=np.shape(R)[1] if np.ndim(R) == 2 else 1),
                   R, **kw)


def _tracin_query(Q: Any) -> Any:
    # the query's features at both checkpoints: (2, m, H) for a batch, (2, H) for one query
    Q = np.asarray(Q, dtype=float)
    return np.stack([Q, Q])


ESTIMATORS: dict[str, Case] = {
    "CaseInfluence": Case(lambda: cbdt.CaseInfluence(),
                          bad_param=("solver", "qr", "solver must be")),
    "CaseInfluence(intercept, ridge)": Case(
        lambda: cbdt.CaseInfluence(intercept=True, ridge=0.1),
        bad_param=("ridge", -1.0, "ridge must be")),
    "NystromCaseInfluence": Case(
        lambda: cbdt.NystromCaseInfluence(n_components=3, random_state=0),
        bad_param=("n_components", 0, "n_components must be")),
    "TorchCaseInfluence": Case(
        lambda: ct.TorchCaseInfluence(_model(), "0"),
        bad_param=("chunk_size", 0, "chunk_size must be"),
        names_attr="input_names_in_"),
    "ExactCoefficient": Case(lambda: bl.ExactCoefficient(),
                             bad_param=("precompute", "yes", "precompute must be")),
    "InfluenceFunction": Case(
        lambda: bl.InfluenceFunction(), decomposes=False,  # its scores are the head's
        bad_param=("residuals", "raw", "residuals must be")),
    "RepresenterPoint": Case(lambda: bl.RepresenterPoint(),
                             bad_param=("residuals", "raw", "residuals must be")),
    "InnerProduct": Case(lambda: bl.InnerProduct()),
    "TracIn": Case(lambda: bl.TracIn(), fit=_tracin_fit, query=_tracin_query,
                   decomposes=False,  # its scores are the last checkpoint's head
                   skip={"names": "TracIn is fitted on checkpoints, not on a Phi DataFrame",
                         "phi_nan": "TracIn's features come inside its checkpoints"}),
}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    return rng.normal(size=(N, H)), rng.normal(size=(N, A)), rng.normal(size=(6, H))


@pytest.fixture(params=sorted(ESTIMATORS))
def case(request) -> Case:
    return ESTIMATORS[request.param]


def _skip(case: Case, check: str) -> None:
    if check in case.skip:
        pytest.skip(case.skip[check])


def test_params_round_trip_and_clone(case):
    est = case.make()
    params = est.get_params()
    assert set(params) == set(type(est)._param_names())
    twin = clone(est)
    assert type(twin) is type(est)
    assert set(twin.get_params()) == set(params)
    with pytest.raises(InputError, match="unknown parameter"):
        est.set_params(not_a_parameter=1)
    assert "object at 0x" not in repr(est) and len(repr(est)) < 200


def test_bad_parameter_is_refused_at_fit(case, data):
    if case.bad_param is None:
        pytest.skip("no constructor parameter to get wrong")
    Phi, R, _ = data
    name, value, words = case.bad_param
    est = case.make().set_params(**{name: value})
    with pytest.raises(InputError, match=words):
        case.fit(est, Phi, R)


def test_queries_before_fit_raise(case, data):
    _, _, Q = data
    with pytest.raises(NotFittedError):
        case.make().scores(case.query(Q))


def test_fit_returns_self_and_scores_have_their_shapes(case, data):
    Phi, R, Q = data
    est = case.make()
    assert case.fit(est, Phi, R) is est
    S = est.scores(case.query(Q))
    assert S.shape == (Q.shape[0], A)
    assert est.scores(case.query(Q[0])).shape == (A,)
    assert est.n_cases_ == N and est.n_features_in_ == H and est.n_actions_ == A


def test_repeated_calls_are_identical(case, data):
    Phi, R, Q = data
    est = case.fit(case.make(), Phi, R)
    a = est.contributions(case.query(Q), 1)
    b = est.contributions(case.query(Q), 1)
    np.testing.assert_array_equal(a, b)  # the same call repeated: bit for bit
    twin = case.fit(case.make(), Phi, R)
    np.testing.assert_array_equal(twin.contributions(case.query(Q), 1), a)


def test_contributions_sum_to_the_scores(case, data):
    if not case.decomposes:
        pytest.skip("its scores are not the sum of its contributions")
    Phi, R, Q = data
    est = case.fit(case.make(), Phi, R)
    S = est.scores(case.query(Q))
    for a in range(A):
        C = est.contributions(case.query(Q), a)
        assert C.shape == (Q.shape[0], N)
        np.testing.assert_allclose(C.sum(axis=1), S[:, a], rtol=0,
                                   atol=1e-10 * max(1.0, float(np.abs(S).max())))


def test_fit_leaves_its_inputs_alone_and_owns_its_returns(case, data):
    Phi, R, Q = data
    Phi_c, R_c = Phi.copy(), R.copy()
    est = case.fit(case.make(), Phi_c, R_c)
    np.testing.assert_array_equal(Phi_c, Phi)
    np.testing.assert_array_equal(R_c, R)
    before = est.scores(case.query(Q))
    R_c[:] = 0.0  # the caller edits their array after the fit
    np.testing.assert_array_equal(est.scores(case.query(Q)), before)


def test_non_finite_returns_are_refused(case, data):
    Phi, R, _ = data
    bad = R.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InputError, match="R"):
        case.fit(case.make(), Phi, bad)


def test_non_finite_representations_are_refused(case, data):
    _skip(case, "phi_nan")
    Phi, R, _ = data
    bad = Phi.copy()
    bad[2, 0] = np.inf
    with pytest.raises(InputError):
        case.fit(case.make(), bad, R)


def test_row_counts_must_match(case, data):
    Phi, R, _ = data
    with pytest.raises(InputError, match="rows|do not match n"):
        case.fit(case.make(), Phi, R[:-1])


def test_integer_labels_as_one_column_warn(case, data):
    Phi, _, _ = data
    labels = np.arange(N) % 4  # class labels passed where returns are expected
    with pytest.warns(ReturnsWarning, match="returns_from_labels"):
        case.fit(case.make(), Phi, labels.astype(float))


def test_names_of_features_actions_and_cases(case, data):
    _skip(case, "names")
    Phi, R, Q = data
    cols = ["f0", "f1", "f2", "f3"]
    index = pd.Index([f"case{i}" for i in range(N)])
    P = pd.DataFrame(Phi, columns=cols, index=index)
    Rdf = pd.DataFrame(R, columns=["buy", "hold", "sell"], index=index)
    est = case.fit(case.make(), P, Rdf)
    np.testing.assert_array_equal(getattr(est, case.names_attr), cols)
    np.testing.assert_array_equal(est.action_names_, ["buy", "hold", "sell"])
    top = est.top_cases(case.query(pd.DataFrame(Q, columns=cols)), "sell", k=3)
    assert str(top.case_ids[0, 0]).startswith("case")
    reordered = pd.DataFrame(Q[:, ::-1], columns=cols[::-1])
    with pytest.raises(InputError, match="f3"):  # the torch audit checks its model's inputs
        est.phi(reordered) if case.names_attr == "input_names_in_" else est.scores(reordered)
    with pytest.raises(InputError):
        est.top_cases(case.query(Q), "short", k=3)  # no such action
    with pytest.raises(InputError):
        est.top_cases(case.query(Q), "sell", k=N + 1)  # k > n


def test_pandas_rows_are_paired_by_equal_indexes(case, data):
    _skip(case, "names")
    Phi, R, _ = data
    P = pd.DataFrame(Phi)
    Rdf = pd.DataFrame(R).sample(frac=1.0, random_state=0)  # shuffled rows
    with pytest.raises(InputError, match="index"):
        case.fit(case.make(), P, Rdf)


def test_every_estimator_derives_from_the_one_base():
    from cbdt._base import CaseEstimator

    for name, case in ESTIMATORS.items():
        assert isinstance(case.make(), CaseEstimator), name


def test_one_validation_for_every_fit():
    """No estimator validates its fit data by hand: the warning above comes from one place."""
    import inspect

    import cbdt.baselines
    import cbdt.influence
    import cbdt.nystrom

    for mod in (cbdt.influence, cbdt.nystrom, cbdt.baselines):
        src = inspect.getsource(mod)
        assert "ReturnsWarning," not in src.replace("from .exceptions import", ""), mod
        assert "check_same_index(Phi, R)" not in src, mod


def test_fit_is_a_short_dispatcher():
    import inspect

    lines = inspect.getsource(cbdt.CaseInfluence.fit).splitlines()
    body = [ln for ln in lines if ln.strip() and not ln.strip().startswith(("#", '"', "'"))]
    doc = inspect.getdoc(cbdt.CaseInfluence.fit) or ""
    code = len(body) - len([ln for ln in doc.splitlines() if ln.strip()])
    assert code <= 20, f"CaseInfluence.fit has {code} lines of code"


def test_warnings_point_at_the_caller(data):
    Phi, _, _ = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cbdt.CaseInfluence().fit(Phi, (np.arange(N) % 4).astype(float))
    assert caught and caught[0].filename == __file__


@pytest.mark.parametrize("name", ["CaseInfluence", "NystromCaseInfluence", "ExactCoefficient",
                                  "InfluenceFunction", "RepresenterPoint", "InnerProduct"])
def test_feature_names_warning_points_at_the_caller(name, data):
    """Fitted without names, queried with a DataFrame: the warning names this file's line."""
    Phi, R, Q = data
    case = ESTIMATORS[name]
    est = case.fit(case.make(), Phi, R)
    frame = pd.DataFrame(Q, columns=["f0", "f1", "f2", "f3"])
    for call in (lambda: est.scores(frame), lambda: est.contributions(frame, 0),
                 lambda: est.top_cases(frame, 0, k=2)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert [w.filename for w in caught] == [__file__], [str(w.message) for w in caught]
