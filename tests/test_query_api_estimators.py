"""One query API for every case-influence estimator: the exact :class:`cbdt.CaseInfluence`
and the approximate :class:`cbdt.NystromCaseInfluence` answer the same calls with the same
guarantees (coefficients, scores, blocks, leverage, top cases by the fused scan, explain,
audit_signals, save/load)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import cbdt
from cbdt import InputError

ESTIMATORS = {
    "exact": lambda: cbdt.CaseInfluence(),
    "nystrom features": lambda: cbdt.NystromCaseInfluence(n_components=6, random_state=0),
    "nystrom cases": lambda: cbdt.NystromCaseInfluence(n_components=40, method="cases",
                                                       random_state=0),
}


@pytest.fixture(params=sorted(ESTIMATORS))
def fitted(request):
    rng = np.random.default_rng(21)
    n, H = 150, 8
    Phi = rng.normal(size=(n, H))
    R = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])
    ids = np.array([f"case{i}" for i in range(n)])
    est = ESTIMATORS[request.param]().fit(Phi, R, case_ids=ids)
    return est, R.to_numpy(), rng.normal(size=(9, H))


def test_scores_are_the_coefficients_times_the_returns(fitted):
    est, R, Q = fitted
    A = est.coefficients(Q)
    S = est.scores(Q)
    assert A.shape == (9, 150) and S.shape == (9, 3)
    assert np.abs(A @ R - S).max() <= 1e-10 * max(1.0, np.abs(S).max())


def test_iter_coefficients_blocks_are_the_coefficients(fitted):
    est, _, Q = fitted
    A = est.coefficients(Q)
    seen = []
    for sl, block in est.iter_coefficients(Q, block_size=4):
        assert block.shape == (sl.stop - sl.start, est.n_cases_)
        np.testing.assert_allclose(block, A[sl], rtol=0, atol=1e-12 * np.abs(A).max())
        seen.append((sl.start, sl.stop))
    assert seen == [(0, 4), (4, 8), (8, 9)]
    with pytest.raises(InputError, match="block_size must be a positive integer"):
        next(est.iter_coefficients(Q, block_size=0))


def test_leverage_is_the_squared_norm_of_the_coefficients(fitted):
    est, _, Q = fitted
    A = est.coefficients(Q)
    np.testing.assert_allclose(est.leverage(Q), (A**2).sum(axis=1), rtol=1e-10)
    assert isinstance(est.leverage(Q[0]), float)


@pytest.mark.parametrize("rank_by", ["contribution", "coefficient"])
def test_top_cases_are_a_stable_sort_of_the_contributions(fitted, rank_by):
    est, R, Q = fitted
    acts = np.array([0, 2, 1, 1, 0, 2, 2, 0, 1])
    top = est.top_cases(Q, acts, k=7, rank_by=rank_by)
    A = est.coefficients(Q)
    W = A * R[:, acts].T if rank_by == "contribution" else A
    want = np.argsort(-np.abs(W), axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(top.indices, want)
    rows = np.arange(9)[:, None]
    np.testing.assert_allclose(top.contributions, (A * R[:, acts].T)[rows, want],
                               rtol=1e-10, atol=1e-14)
    assert top.case_ids[0, 0] == f"case{want[0, 0]}"


def test_top_cases_never_form_the_dense_coefficients(fitted, monkeypatch):
    est, _, Q = fitted
    expected = est.top_cases(Q, 1, k=5)

    def boom(*a, **k):
        raise AssertionError("top_cases formed the (m, n) coefficients")

    monkeypatch.setattr(type(est), "_alpha", boom)
    got = est.top_cases(Q, 1, k=5)
    np.testing.assert_array_equal(got.indices, expected.indices)


def test_a_query_ranks_the_same_alone_and_in_a_batch(fitted):
    est, _, Q = fitted
    batch = est.top_cases(Q, 1, k=6)
    for i in range(Q.shape[0]):
        alone = est.top_cases(Q[i], 1, k=6)
        np.testing.assert_array_equal(alone.indices, batch.indices[i])
        np.testing.assert_array_equal(alone.contributions, batch.contributions[i])


def test_explain_and_audit_signals_agree(fitted):
    est, _, Q = fitted
    ex = est.explain(Q, k=10)
    sig = cbdt.audit_signals(est, Q, k=10)
    pd.testing.assert_frame_equal(ex.signals.reset_index(drop=True),
                                  sig.reset_index(drop=True), check_names=False)
    assert set(ex.cases.columns) >= {"query", "rank", "case_id", "alpha", "psi"}
    assert len(ex.cases) == 9 * 10


def test_save_and_load_give_the_same_answers(fitted, tmp_path):
    est, _, Q = fitted
    path = tmp_path / "memory.npz"
    est.save(path)
    back = type(est).load(path)
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.coefficients(Q), est.coefficients(Q))
    np.testing.assert_array_equal(back.scores(Q), est.scores(Q))
    assert back.top_cases(Q, 2, k=5) == est.top_cases(Q, 2, k=5)
    np.testing.assert_array_equal(back.case_ids_, est.case_ids_)
    np.testing.assert_array_equal(back.action_names_, est.action_names_)


def test_a_file_of_the_other_estimator_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    Phi, R = rng.normal(size=(60, 4)), rng.normal(size=(60, 2))
    exact = cbdt.CaseInfluence().fit(Phi, R)
    ny = cbdt.NystromCaseInfluence(n_components=3, random_state=0).fit(Phi, R)
    exact.save(tmp_path / "exact.npz")
    ny.save(tmp_path / "ny.npz")
    with pytest.raises(InputError, match="not a NystromCaseInfluence file"):
        cbdt.NystromCaseInfluence.load(tmp_path / "exact.npz")
    with pytest.raises(InputError, match="not a CaseInfluence file"):
        cbdt.CaseInfluence.load(tmp_path / "ny.npz")


def test_nystrom_dual_matrix_is_public_and_read_only():
    rng = np.random.default_rng(1)
    Phi, R = rng.normal(size=(80, 5)), rng.normal(size=(80, 2))
    ny = cbdt.NystromCaseInfluence(n_components=3, random_state=0).fit(Phi, R)
    q = rng.normal(size=5)
    np.testing.assert_allclose(ny.dual_ @ q, ny.coefficients(q), rtol=1e-12)
    assert not ny.dual_.flags.writeable
    with pytest.raises(cbdt.NotFittedError):
        _ = cbdt.NystromCaseInfluence().dual_
