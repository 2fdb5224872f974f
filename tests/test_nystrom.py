"""Nyström case influence (App. C.7) and the Table C2 experiment."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbdt.book.experiments.nystrom import (
    PAPER_TABLE_C2,
    nystrom_config,
    nystrom_table,
    summarize_nystrom,
    topk_overlap,
)
from cbdt.book.experiments.synthetic import SyntheticConfig
from cbdt.exceptions import InputError, NotFittedError
from cbdt.influence import CaseInfluence, TopCases
from cbdt.nystrom import DEFAULT_RIDGE_MULTIPLE, NystromCaseInfluence


def problem(seed: int, n: int = 60, H: int = 10, A: int = 3):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(n, H)) @ np.diag(rng.uniform(0.3, 3.0, size=H))
    R = rng.normal(size=(n, A))
    Q = rng.normal(size=(7, H))
    return Phi, R, Q


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


# ---------------------------------------------------------------------- exact limits
@pytest.mark.parametrize("ridge", [None, 0.5])
def test_features_full_rank_equals_exact_ridge(ridge):
    Phi, R, Q = problem(0)
    ny = NystromCaseInfluence(10, method="features", ridge=ridge).fit(Phi, R)
    ex = CaseInfluence(ridge=ny.ridge_).fit(Phi, R)
    assert ny.nystrom_rank_ == 10
    assert rel_err(ny.coefficients(Q), ex.coefficients(Q)) <= 1e-8
    assert rel_err(ny.readout_, ex.readout_) <= 1e-8
    assert rel_err(ny.scores(Q), ex.scores(Q)) <= 1e-8


def test_cases_all_landmarks_equals_exact_ridge():
    Phi, R, Q = problem(1)
    ny = NystromCaseInfluence(Phi.shape[0], method="cases").fit(Phi, R)
    ex = CaseInfluence(ridge=ny.ridge_).fit(Phi, R)
    assert rel_err(ny.coefficients(Q), ex.coefficients(Q)) <= 1e-8
    assert rel_err(ny.scores(Q), ex.scores(Q)) <= 1e-8


def test_low_rank_differs_from_exact():
    """Below full rank the approximation is a real approximation, not the exact answer."""
    Phi, R, Q = problem(2)
    for method in ("features", "cases"):
        ny = NystromCaseInfluence(5, method=method).fit(Phi, R)
        ex = CaseInfluence(ridge=ny.ridge_).fit(Phi, R)
        assert rel_err(ny.coefficients(Q), ex.coefficients(Q)) > 1e-3


def test_default_ridge_is_scale_aware():
    Phi, R, _ = problem(3)
    ny = NystromCaseInfluence(4).fit(Phi, R)
    assert ny.ridge_ == pytest.approx(DEFAULT_RIDGE_MULTIPLE * np.trace(Phi.T @ Phi) / 10)
    assert NystromCaseInfluence(4, ridge=0.25).fit(Phi, R).ridge_ == 0.25


# ---------------------------------------------------------------------- dense reference
def dense_reference(Phi, R, Q, method, m, seed, lam):
    """alpha~ and V~ from the formulas with dense matrices and numpy's pinv / solve."""
    n, H = Phi.shape
    G, K = Phi.T @ Phi, Phi @ Phi.T
    S = np.sort(np.random.default_rng(seed).choice(H if method == "features" else n, m,
                                                   replace=False))
    if method == "features":
        Gt = G[:, S] @ np.linalg.pinv(G[np.ix_(S, S)]) @ G[S]
        A = np.linalg.solve(Gt + lam * np.eye(H), np.c_[Q.T, Phi.T @ R])
        return (Phi @ A[:, : Q.shape[0]]).T, A[:, Q.shape[0]:]
    Kt = K[:, S] @ np.linalg.pinv(K[np.ix_(S, S)]) @ K[S]
    A = np.linalg.solve(Kt + lam * np.eye(n), np.c_[Phi @ Q.T, R])
    return A[:, : Q.shape[0]].T, Phi.T @ A[:, Q.shape[0]:]


cases = st.tuples(
    st.integers(0, 10_000),  # seed
    st.integers(2, 8),  # H
    st.integers(0, 30),  # extra cases (n = H + 2 + extra, so G is invertible)
    st.sampled_from(["features", "cases"]),
    st.floats(0.05, 1.0),  # rank fraction
    st.sampled_from([None, 0.1, 3.0]),
)


@settings(max_examples=40)
@given(cases)
def test_matches_dense_formula_and_decomposition_is_exact(c):
    seed, H, extra, method, frac, ridge = c
    Phi, R, Q = problem(seed, n=H + 2 + extra, H=H)
    n = Phi.shape[0]
    m = max(1, int(round(frac * min(H, n))))  # m <= H keeps K_LL invertible too
    ny = NystromCaseInfluence(m, method=method, ridge=ridge, random_state=seed).fit(Phi, R)
    alpha, V = ny.coefficients(Q), ny.readout_
    ref_alpha, ref_V = dense_reference(Phi, R, Q, method, m, seed, ny.ridge_)
    assert rel_err(alpha, ref_alpha) <= 1e-7
    assert rel_err(V, ref_V) <= 1e-7
    # eq. 9 holds exactly for the approximate readout
    S = ny.scores(Q)
    assert rel_err(alpha @ R, S) <= 1e-10
    # with the default ridge, rescaling Phi and the queries together changes nothing
    if ridge is None:
        ny2 = NystromCaseInfluence(m, method=method, random_state=seed).fit(8.0 * Phi, R)
        assert rel_err(ny2.coefficients(8.0 * Q), alpha) <= 1e-9


@pytest.mark.parametrize("method", ["features", "cases"])
def test_decomposition_exact_on_wide_memory(method):
    """n < H: G is singular, only the ridge coefficient exists; eq. 9 still holds exactly."""
    Phi, R, Q = problem(4, n=30, H=50)
    ny = NystromCaseInfluence(20, method=method).fit(Phi, R)
    assert rel_err(ny.coefficients(Q) @ R, ny.scores(Q)) <= 1e-10


# ---------------------------------------------------------------------- sampling
@pytest.mark.parametrize("method", ["features", "cases"])
def test_seed_determinism_and_variation(method):
    Phi, R, Q = problem(5, n=80, H=12)
    a = NystromCaseInfluence(6, method=method, random_state=3).fit(Phi, R)
    b = NystromCaseInfluence(6, method=method, random_state=3).fit(Phi, R)
    c = NystromCaseInfluence(6, method=method, random_state=4).fit(Phi, R)
    np.testing.assert_array_equal(a.sample_, b.sample_)
    np.testing.assert_array_equal(a.coefficients(Q), b.coefficients(Q))
    assert not np.array_equal(a.sample_, c.sample_)
    assert rel_err(a.coefficients(Q), c.coefficients(Q)) > 1e-6
    size = 12 if method == "features" else 80
    assert a.sample_.shape == (6,) and len(set(a.sample_)) == 6
    assert a.sample_.min() >= 0 and a.sample_.max() < size
    assert np.all(np.diff(a.sample_) > 0)


def test_singular_sampled_block_uses_pseudo_inverse():
    """Duplicated sampled columns make W singular; the eigen cutoff keeps the rest."""
    rng = np.random.default_rng(6)
    base = rng.normal(size=(40, 3))
    Phi = np.c_[base, base, base]  # H = 9, rank 3
    R = rng.normal(size=(40, 2))
    ny = NystromCaseInfluence(9, method="features", ridge=0.3).fit(Phi, R)
    assert ny.nystrom_rank_ == 3
    ex = CaseInfluence(ridge=0.3).fit(Phi, R)  # rank = H: every column, so exact
    Q = rng.normal(size=(4, 9))
    assert rel_err(ny.coefficients(Q), ex.coefficients(Q)) <= 1e-8


# ---------------------------------------------------------------------- API
def test_shapes_single_query_and_contributions():
    Phi, R, Q = problem(7)
    ny = NystromCaseInfluence(5, method="cases", random_state=1).fit(Phi, R)
    assert (ny.n_cases_, ny.n_features_in_, ny.n_actions_) == (60, 10, 3)
    assert not hasattr(ny, "n_features_")
    assert ny.readout_.shape == (10, 3)
    a1 = ny.coefficients(Q[0])
    assert a1.shape == (60,) and ny.scores(Q[0]).shape == (3,)
    np.testing.assert_allclose(a1, ny.coefficients(Q)[0], rtol=1e-12, atol=1e-14)
    psi = ny.contributions(Q, 2)
    np.testing.assert_allclose(psi, ny.coefficients(Q) * R[:, 2], rtol=1e-12, atol=1e-14)
    acts = np.array([0, 1, 2, 0, 1, 2, 0])
    psi_each = ny.contributions(Q, acts)
    np.testing.assert_allclose(psi_each[4], ny.coefficients(Q[4]) * R[:, 1], rtol=1e-12)
    # small batches give the same answers
    nb = NystromCaseInfluence(5, method="cases", random_state=1, batch_size=2).fit(Phi, R)
    np.testing.assert_allclose(nb.coefficients(Q), ny.coefficients(Q), rtol=1e-12, atol=1e-14)
    # a 1-D R is one action
    one = NystromCaseInfluence(5).fit(Phi, R[:, 0])
    assert one.n_actions_ == 1 and one.scores(Q[0]).shape == (1,)


def test_top_cases_ranks_by_abs_contribution_ties_to_lower_index():
    Phi, R, Q = problem(8, n=40)
    R = R.copy()
    R[::2, 1] = 0.0  # 20 exact zero contributions: ties at the tail
    ny = NystromCaseInfluence(5, random_state=2).fit(Phi, R)
    psi = ny.contributions(Q, 1)
    for k in (1, 7, 40):
        top = ny.top_cases(Q, 1, k=k)
        assert isinstance(top, TopCases)
        want = np.argsort(-np.abs(psi), axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(top.indices, want)
        # the fused scan evaluates each psi_i once in float64 (as CaseInfluence's does):
        # equal to the GEMM's contributions to rounding
        np.testing.assert_allclose(top.contributions, np.take_along_axis(psi, want, 1),
                                   rtol=1e-12, atol=1e-13 * np.abs(psi).max())
    # the zero ties appear in ascending case order at the end
    tail = ny.top_cases(Q[0], 1, k=40).indices[-20:]
    np.testing.assert_array_equal(tail, np.arange(0, 40, 2))
    pos = ny.top_cases(Q, 1, k=5, order="positive")
    np.testing.assert_array_equal(pos.indices, np.argsort(-psi, axis=1, kind="stable")[:, :5])
    neg = ny.top_cases(Q[3], 1, k=5, order="negative")
    np.testing.assert_array_equal(neg.indices, np.argsort(psi[3], kind="stable")[:5])


def test_get_set_params():
    ny = NystromCaseInfluence(3, method="cases", ridge=0.2, random_state=9)
    p = ny.get_params()
    assert p == {
        "n_components": 3,
        "method": "cases",
        "ridge": 0.2,
        "random_state": 9,
        "batch_size": 1024,
        "topk_block_entries": 16_000_000,
    }
    assert NystromCaseInfluence(**p).get_params() == p
    assert ny.set_params(n_components=4).n_components == 4
    with pytest.raises(InputError, match="unknown parameter"):
        ny.set_params(solver="x")
    assert repr(ny) == (
        "NystromCaseInfluence(n_components=4, method='cases', ridge=0.2, random_state=9)"
    )


def test_sklearn_names_clone_and_deprecated_rank_seed():
    """n_components / random_state as scikit-learn's Nystroem; the old names rank / seed are gone."""
    from sklearn.base import clone

    Phi, R, Q = problem(12)
    new = NystromCaseInfluence(n_components=5, method="cases", random_state=3).fit(Phi, R)
    c = clone(new)
    assert c.get_params() == new.get_params() and not hasattr(c, "readout_")
    np.testing.assert_array_equal(c.fit(Phi, R).coefficients(Q), new.coefficients(Q))
    for old in ({"rank": 5}, {"seed": 3}):
        with pytest.raises(TypeError):
            NystromCaseInfluence(5, **old)
    with pytest.raises(ValueError, match="rank"):
        new.set_params(rank=4)
    # a Generator is a valid random_state (drawn from as it stands)
    g = NystromCaseInfluence(5, random_state=np.random.default_rng(3)).fit(Phi, R)
    want = NystromCaseInfluence(5, random_state=3).fit(Phi, R).sample_
    np.testing.assert_array_equal(g.sample_, want)


@pytest.mark.parametrize("kind", ["pandas", "torch"])
def test_returns_are_copied_whatever_their_type(kind):
    """C1: a DataFrame or tensor R was kept by reference; editing it after fit broke eq. 9."""
    Phi, R, Q = problem(13)
    if kind == "pandas":
        pd = pytest.importorskip("pandas")
        Rin = pd.DataFrame(R.copy())
    else:
        torch = pytest.importorskip("torch")
        Rin = torch.tensor(R.copy())
    ny = NystromCaseInfluence(5).fit(Phi, Rin)
    psi = ny.contributions(Q, 1)
    if kind == "pandas":
        Rin.iloc[0, 0] = 1e6
        Rin.iloc[3, 1] = -1e6
    else:
        Rin[0, 0] = 1e6
        Rin[3, 1] = -1e6
    np.testing.assert_array_equal(ny.returns_, R)
    assert not ny.returns_.flags.writeable
    assert rel_err(ny.coefficients(Q) @ ny.returns_, ny.scores(Q)) <= 1e-10
    np.testing.assert_array_equal(ny.contributions(Q, 1), psi)


def test_query_api_of_every_estimator():
    """Nystrom answers the shared queries: action=None is the decision, k keyword-only,
    explain, and cbdt.audit_signals (which rejected a NystromCaseInfluence before)."""
    import cbdt

    Phi, R, Q = problem(14, n=80)
    ny = NystromCaseInfluence(5, random_state=1).fit(Phi, R)
    dec = np.argmax(ny.scores(Q), axis=1)
    assert len(set(dec)) > 1
    np.testing.assert_array_equal(ny.contributions(Q), ny.contributions(Q, dec))
    top = ny.top_cases(Q, k=4)
    want = np.argsort(-np.abs(ny.contributions(Q)), axis=1, kind="stable")[:, :4]
    np.testing.assert_array_equal(top.indices, want)
    np.testing.assert_array_equal(top.action, dec)
    with pytest.raises(TypeError):
        ny.top_cases(Q, 1, 4)  # k is keyword-only
    # explain and audit_signals: the signals of the same top cases
    ex = ny.explain(Q, k=4)
    sig = cbdt.audit_signals(ny, Q, k=4)
    np.testing.assert_array_equal(ex.signals["action"].to_numpy(), dec)
    # bit for bit: both are cbdt._signals.case_account on the same queries (one code path)
    np.testing.assert_allclose(ex.signals[["entropy", "gini", "risk"]].to_numpy(),
                               sig[["entropy", "gini", "risk"]].to_numpy(), rtol=0, atol=0)
    np.testing.assert_array_equal(ex.cases["case_id"].to_numpy().reshape(7, 4), want)
    np.testing.assert_allclose(ex.cases["psi"].to_numpy().reshape(7, 4),
                               np.take_along_axis(ny.contributions(Q), want, 1), atol=1e-12)
    # with every column sampled the approximation is exact: the exact estimator's signals
    full = NystromCaseInfluence(10).fit(Phi, R)
    exact = CaseInfluence(ridge=full.ridge_).fit(Phi, R)
    a, b = cbdt.audit_signals(full, Q, k=4), cbdt.audit_signals(exact, Q, k=4)
    np.testing.assert_array_equal(a["action"].to_numpy(), b["action"].to_numpy())
    np.testing.assert_allclose(a.to_numpy(dtype=float), b.to_numpy(dtype=float), atol=1e-8)


def test_action_names_from_a_returns_frame():
    pd = pytest.importorskip("pandas")
    Phi, R, Q = problem(15)
    names = ["hold", "treat_A", "cost $5"]
    ny = NystromCaseInfluence(5).fit(Phi, pd.DataFrame(R, columns=names))
    np.testing.assert_array_equal(ny.action_names_, names)
    np.testing.assert_array_equal(ny.contributions(Q, "treat_A"), ny.contributions(Q, 1))
    top = ny.top_cases(Q[0], "cost $5", k=3)
    assert top.action == 2 and top.action_name == "cost $5"
    same = NystromCaseInfluence(5).fit(Phi, R, action_names=names)
    np.testing.assert_array_equal(same.action_names_, names)
    np.testing.assert_array_equal(NystromCaseInfluence(5).fit(Phi, R).action_names_, [0, 1, 2])


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_components": 0}, "n_components must be a positive integer"),
        ({"n_components": 2.5}, "n_components must be a positive integer"),
        ({}, r"n_components must be a positive integer \(m >= 1.*got None"),
        ({"n_components": 11}, r"n_components m = 11 exceeds the number of features H = 10"),
        (
            {"n_components": 61, "method": "cases"},
            r"n_components m = 61 exceeds the number of cases n = 60.*1 <= n_components <= 60",
        ),
        ({"n_components": 3, "ridge": 0.0}, "ridge must be finite and > 0.*Woodbury"),
        ({"n_components": 3, "ridge": -1.0}, "ridge must be finite and > 0"),
        ({"n_components": 3, "ridge": float("nan")}, "ridge must be finite and > 0"),
        ({"n_components": 3, "method": "columns"}, "method must be 'features'"),
        ({"n_components": 3, "random_state": -1}, "random_state must be a non-negative integer"),
        ({"n_components": 3, "batch_size": 0}, "batch_size must be a positive integer"),
    ],
)
def test_bad_parameters(kwargs, match):
    Phi, R, _ = problem(9)
    with pytest.raises(InputError, match=match):
        NystromCaseInfluence(**kwargs).fit(Phi, R)


def test_bad_data():
    Phi, R, Q = problem(10)
    bad = Phi.copy()
    bad[3, 2] = np.nan
    with pytest.raises(InputError, match="Phi contains 1 non-finite"):
        NystromCaseInfluence(3).fit(bad, R)
    badR = R.copy()
    badR[0, 0] = np.inf
    with pytest.raises(InputError, match="R contains 1 non-finite"):
        NystromCaseInfluence(3).fit(Phi, badR)
    with pytest.raises(InputError, match="Phi has 60 rows.*R has 59"):
        NystromCaseInfluence(3).fit(Phi, R[:-1])
    with pytest.raises(InputError, match="identically zero"):
        NystromCaseInfluence(3).fit(np.zeros_like(Phi), R)
    with pytest.raises(NotFittedError):
        NystromCaseInfluence(3).coefficients(Q)
    ny = NystromCaseInfluence(3).fit(Phi, R)
    with pytest.raises(InputError, match="width 9 but the model was fitted"):
        ny.coefficients(Q[:, :9])
    with pytest.raises(InputError, match="out of range"):
        ny.contributions(Q, 3)
    with pytest.raises(InputError, match="exceeds the number of training cases"):
        ny.top_cases(Q, 0, k=61)
    with pytest.raises(InputError, match="order must be"):
        ny.top_cases(Q, 0, order="largest")


def test_fit_does_not_alias_caller_arrays():
    Phi, R, Q = problem(11)
    ny = NystromCaseInfluence(4).fit(Phi, R)
    before = ny.coefficients(Q)
    Phi[:] = 0.0
    R[:] = 0.0
    np.testing.assert_array_equal(ny.coefficients(Q), before)
    assert np.abs(ny.returns_).max() > 0


# ---------------------------------------------------------------------- experiment
TINY = SyntheticConfig(n_train=60, n_test=12, hidden=(8, 8), epochs=20, n_checkpoints=2)


def test_topk_overlap():
    A = np.array([[3.0, -2.0, 1.0, 0.5], [1.0, 1.0, 1.0, 1.0]])
    B = np.array([[0.1, 5.0, -4.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(topk_overlap(A, B, 2), [0.5, 1.0])
    np.testing.assert_allclose(topk_overlap(A, A, 3), [1.0, 1.0])
    with pytest.raises(InputError):
        topk_overlap(A, B, 5)


def test_nystrom_table_tiny():
    df = nystrom_table(widths=(8, 16), seeds=(0, 1), n_queries=6, k=10, config=TINY,
                       repeats=1)
    assert len(df) == 4
    assert list(df["H"]) == [8, 8, 16, 16] and list(df["seed"]) == [0, 1, 0, 1]
    assert (df["rank"] == df["H"] // 2).all()
    assert df["top10"].between(0, 1).all()
    assert df["pearson"].between(-1, 1).all()
    assert (df[["exact_ms", "nystrom_ms", "exact_fit_ms", "nystrom_fit_ms"]] > 0).all().all()
    # rank H/2 is a real approximation on this problem
    assert (df["top10"] < 1).any()
    s = summarize_nystrom(df)
    assert list(s.index) == [("features", 8), ("features", 16)]
    assert (s["n"] == 2).all() and (s["top10_ci"] >= 0).all()
    np.testing.assert_allclose(s["top10_mean"].to_numpy(),
                               df.groupby("H")["top10"].mean().to_numpy())
    assert np.isnan(s["paper_top30"]).all()  # the paper has no H = 8, 16

    cases = nystrom_table(widths=(8,), seeds=(0,), n_queries=6, k=10, config=TINY,
                          method="cases", repeats=1)
    assert cases["method"].iloc[0] == "cases" and cases["rank"].iloc[0] == 4


def test_nystrom_table_full_rank_is_exact():
    df = nystrom_table(widths=(8, 16), seeds=(0, 1), n_queries=6, k=10, config=TINY,
                       rank_fraction=1.0, repeats=1)
    assert (df["rank"] == df["H"]).all()
    assert (df["top10"] == 1.0).all()
    assert (df["pearson"] > 1 - 1e-9).all()


def test_nystrom_table_errors_and_paper_constant():
    with pytest.raises(InputError, match="rank_fraction"):
        nystrom_table(widths=(8,), seeds=(0,), config=TINY, rank_fraction=0.0)
    with pytest.raises(InputError, match="method"):
        nystrom_table(widths=(8,), seeds=(0,), config=TINY, method="rows")
    with pytest.raises(InputError, match="blas_threads"):
        nystrom_table(widths=(8,), seeds=(0,), config=TINY, blas_threads=0)
    assert nystrom_config(32).hidden == (64, 32)
    assert nystrom_config(32, widen_all=True).hidden == (32, 32)
    assert nystrom_config(16, TINY).hidden == (8, 16)
    assert sorted(PAPER_TABLE_C2) == [32, 128, 512]
    assert [PAPER_TABLE_C2[H]["rank"] for H in (32, 128, 512)] == [16, 64, 256]
    assert PAPER_TABLE_C2[512]["top30"] == 0.793
