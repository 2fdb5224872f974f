"""Properties of the case-influence decomposition (Prop. 1, eq. 8-12)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import linalg

import cbdt
from cbdt import CaseInfluence, InputError, NotFittedError, RankDeficientError


def well_posed(seed: int, n: int, H: int, A: int = 3):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(n, H)) @ np.diag(rng.uniform(0.3, 3.0, size=H))
    R = rng.normal(size=(n, A))
    queries = rng.normal(size=(7, H))
    return Phi, R, queries


dims = st.tuples(
    st.integers(0, 10_000), st.integers(1, 12), st.integers(0, 40), st.integers(1, 4)
).map(lambda t: (t[0], t[1] + t[2] + 1, t[1], t[3]))  # seed, n > H, H, |A|


@given(dims)
def test_exactness_scores_equal_alpha_times_returns(d):
    seed, n, H, A = d
    Phi, R, Q = well_posed(seed, n, H, A)
    ci = CaseInfluence().fit(Phi, R)
    alpha = ci.coefficients(Q)
    S = ci.scores(Q)
    assert alpha.shape == (Q.shape[0], n) and S.shape == (Q.shape[0], A)
    rel = np.abs(alpha @ R - S).max() / max(np.abs(S).max(), 1e-300)
    assert rel <= 1e-10
    # readout is the OLS solution (eq. 8) and scores come from it (eq. 3)
    V = np.linalg.lstsq(Phi, R, rcond=None)[0]
    assert np.allclose(ci.readout_, V, rtol=1e-8, atol=1e-10)
    assert np.allclose(S, Q @ ci.readout_, rtol=1e-12, atol=1e-12)


@given(dims)
def test_alpha_is_feasible_and_minimum_norm(d):
    seed, n, H, _ = d
    Phi, R, Q = well_posed(seed, n, H)
    ci = CaseInfluence().fit(Phi, R)
    alpha = ci.coefficients(Q[0])
    # feasible: Phi^T alpha = phi(x)
    assert np.allclose(Phi.T @ alpha, Q[0], rtol=1e-9, atol=1e-9)
    # alpha lies in the column space of Phi, so it is orthogonal to null(Phi^T)
    null = linalg.null_space(Phi.T)
    if null.shape[1]:
        assert np.abs(null.T @ alpha).max() <= 1e-9 * max(1.0, np.linalg.norm(alpha))
        rng = np.random.default_rng(seed + 1)
        for _ in range(5):
            beta = alpha + null @ rng.normal(size=null.shape[1])
            assert np.allclose(Phi.T @ beta, Q[0], atol=1e-8)
            assert np.linalg.norm(beta) > np.linalg.norm(alpha)
    # equals the pseudo-inverse solution of the underdetermined system
    assert np.allclose(alpha, np.linalg.pinv(Phi.T) @ Q[0], rtol=1e-7, atol=1e-9)


def test_one_dimensional_query_gives_one_dimensional_output(rng):
    Phi, R = rng.normal(size=(50, 4)), rng.normal(size=(50, 2))
    ci = CaseInfluence().fit(Phi, R)
    q = rng.normal(size=4)
    assert ci.coefficients(q).shape == (50,)
    assert ci.scores(q).shape == (2,)
    assert ci.contributions(q, 1).shape == (50,)
    assert np.allclose(ci.coefficients(q), ci.coefficients(q[None])[0])


@given(st.integers(0, 10_000), st.integers(2, 8))
def test_invariance_under_random_invertible_B(seed, H):
    Phi, R, Q = well_posed(seed, 30 + 3 * H, H)
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(H, H)) + 0.5 * np.eye(H)
    if np.linalg.cond(B) > 1e6:
        B += 2 * np.eye(H)
    a0 = CaseInfluence().fit(Phi, R).coefficients(Q)
    PhiB = cbdt.reparameterize(Phi, B)
    aB = CaseInfluence().fit(PhiB, R).coefficients(cbdt.reparameterize(Q, B))
    # the normal equations lose about cond(G_B) = cond(Phi B^T)^2 units of rounding; the
    # tolerance is at most 1e-6 (B is re-drawn better conditioned above), never order 1
    tol = min(1e-6, 100 * np.finfo(float).eps * np.linalg.cond(PhiB) ** 2)
    assert np.abs(aB - a0).max() <= tol * np.abs(a0).max()


def test_isotropic_ridge_breaks_invariance_for_non_orthogonal_B(rng):
    H = 5
    Phi, R, Q = well_posed(3, 80, H)
    lam = np.trace(Phi.T @ Phi) / H * 0.1
    B = np.diag([1.0, 10.0, 0.1, 3.0, 0.5]) + np.triu(np.ones((H, H)), 1)
    a0 = CaseInfluence(ridge=lam).fit(Phi, R).coefficients(Q)
    PhiB, QB = cbdt.reparameterize(Phi, B), cbdt.reparameterize(Q, B)
    iso = CaseInfluence(ridge=lam).fit(PhiB, R).coefficients(QB)
    assert np.abs(iso - a0).max() > 1e-3 * np.abs(a0).max()
    co = CaseInfluence(ridge=lam, ridge_metric=cbdt.cotransformed_metric(B)).fit(PhiB, R)
    assert np.allclose(co.coefficients(QB), a0, rtol=1e-9, atol=1e-12)
    # eq. 11 directly
    assert np.allclose(a0, (Phi @ np.linalg.solve(Phi.T @ Phi + lam * np.eye(H), Q.T)).T)


@given(st.integers(0, 10_000))
def test_isotropic_ridge_keeps_invariance_for_orthogonal_B(seed):
    H = 6
    Phi, R, Q = well_posed(seed, 60, H)
    orth = linalg.qr(np.random.default_rng(seed).normal(size=(H, H)))[0]
    lam = 2.5
    a0 = CaseInfluence(ridge=lam).fit(Phi, R).coefficients(Q)
    aO = CaseInfluence(ridge=lam).fit(Phi @ orth.T, R).coefficients(Q @ orth.T)
    assert np.allclose(aO, a0, rtol=1e-9, atol=1e-12)


@given(st.integers(0, 10_000), st.integers(2, 10))
def test_whitened_gram_gives_scaled_inner_product(seed, H):
    Phi, R, Q = well_posed(seed, 40 + 2 * H, H)
    B, W = cbdt.zca_whitening(Phi)
    n = Phi.shape[0]
    assert np.allclose(W.T @ W, n * np.eye(H), atol=1e-8 * n)
    QW = cbdt.reparameterize(Q, B)
    aW = CaseInfluence().fit(W, R).coefficients(QW)
    assert np.allclose(aW, QW @ W.T / n, rtol=1e-9, atol=1e-12)  # eq. 14
    assert np.allclose(aW, CaseInfluence().fit(Phi, R).coefficients(Q), rtol=1e-7, atol=1e-10)


def test_ridge_converges_to_ols_linearly(rng):
    Phi, R, Q = well_posed(11, 120, 6)
    a0 = CaseInfluence().fit(Phi, R).coefficients(Q)
    lams = np.logspace(-8, -2, 7)
    errs = np.array(
        [np.abs(CaseInfluence(ridge=lam).fit(Phi, R).coefficients(Q) - a0).max() for lam in lams]
    )
    assert np.all(np.diff(errs) > 0)
    slope = np.polyfit(np.log(lams), np.log(errs), 1)[0]
    assert 0.95 < slope < 1.05  # ||alpha_lam - alpha|| = O(lam)
    assert errs[0] < 1e-8 * np.abs(a0).max()


def test_intercept_matches_augmented_features(rng):
    Phi, R, Q = well_posed(5, 90, 4)
    ci = CaseInfluence(intercept=True).fit(Phi, R)
    aug = CaseInfluence().fit(np.hstack([Phi, np.ones((90, 1))]), R)
    Qa = np.hstack([Q, np.ones((len(Q), 1))])
    assert np.allclose(ci.coefficients(Q), aug.coefficients(Qa), rtol=1e-10, atol=1e-13)
    assert np.allclose(ci.scores(Q), Q @ ci.readout_ + ci.intercept_)
    assert np.allclose(ci.coefficients(Q).sum(axis=1), 1.0)  # the constant is reproduced


def test_memmap_and_chunking_give_the_same_answer(tmp_path):
    Phi, R, Q = well_posed(9, 1000, 8)
    mm = np.lib.format.open_memmap(tmp_path / "phi.npy", mode="w+", dtype=np.float32, shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    mm = np.load(tmp_path / "phi.npy", mmap_mode="r")
    dense = np.array(mm, dtype=np.float64)  # a plain in-memory array: the non-memmap path
    assert not isinstance(dense, np.memmap)
    ref = CaseInfluence().fit(dense, R)
    ci = CaseInfluence()
    ci.chunk_size = 97
    ci.batch_size = 3
    ci.fit(mm, R)
    assert np.allclose(ci.coefficients(Q), ref.coefficients(Q), rtol=1e-10, atol=1e-13)
    assert np.allclose(ci.gram_, ref.gram_, rtol=1e-12)
    assert np.allclose(ci.coefficients(Q) @ R, ci.scores(Q), atol=1e-10)  # Prop. 1 on a memmap


def test_lstsq_gives_minimum_norm_on_rank_deficient_phi(rng):
    n = 60
    base = rng.normal(size=(n, 4))
    Phi = np.hstack([base, base[:, :2] @ rng.normal(size=(2, 2))])  # rank 4 of 6
    R = rng.normal(size=(n, 3))
    ci = CaseInfluence(solver="lstsq").fit(Phi, R)
    assert ci.rank_ == 4 and ci.solver_ == "lstsq"
    q = Phi[:5] * 0.3 + Phi[5:10]  # queries in the row space
    alpha = ci.coefficients(q)
    assert np.allclose(Phi.T @ alpha.T, q.T, atol=1e-9)
    assert np.allclose(alpha, (np.linalg.pinv(Phi.T) @ q.T).T, atol=1e-9)
    assert np.allclose(alpha @ R, ci.scores(q), atol=1e-9)
    assert np.allclose(ci.readout_, np.linalg.pinv(Phi) @ R, atol=1e-8)


# ---------------------------------------------------------------- contributions and ranking
def test_contributions_and_top_cases(rng):
    Phi, R, Q = well_posed(2, 40, 3)
    ci = CaseInfluence().fit(Phi, R)
    psi = ci.contributions(Q, 2)
    assert np.allclose(psi, ci.coefficients(Q) * R[:, 2])
    assert np.allclose(psi.sum(axis=1), ci.scores(Q)[:, 2])
    per_query = ci.contributions(Q, np.array([0, 1, 2, 0, 1, 2, 0]))
    assert np.allclose(per_query[1], ci.coefficients(Q[1]) * R[:, 1])
    for order, key in [("abs", np.abs(psi)), ("positive", psi), ("negative", -psi)]:
        idx, vals = ci.top_cases(Q, 2, k=7, order=order)
        expect = np.argsort(-key, axis=1, kind="stable")[:, :7]
        assert np.array_equal(idx, expect)
        assert np.allclose(vals, np.take_along_axis(psi, expect, axis=1))


def test_top_cases_break_ties_by_lower_index():
    Phi = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0]])
    R = np.ones((5, 1))
    ci = CaseInfluence().fit(Phi, R)
    idx, _ = ci.top_cases([1.0, 0.0], 0, k=2)
    assert list(idx) == [0, 1]  # cases 0 and 1 tie exactly
    idx3, _ = ci.top_cases([0.0, 1.0], 0, k=1)
    assert list(idx3) == [2]


# ---------------------------------------------------------------- bad input
@pytest.fixture
def fitted(rng):
    return CaseInfluence().fit(rng.normal(size=(30, 3)), rng.normal(size=(30, 2)))


@pytest.mark.parametrize("where", ["Phi", "R"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_training_data(where, bad, rng):
    Phi, R = rng.normal(size=(30, 3)), rng.normal(size=(30, 2))
    (Phi if where == "Phi" else R)[4, 1] = bad
    with pytest.raises(InputError, match=rf"{where}.*non-finite.*index \(4, 1\)"):
        CaseInfluence().fit(Phi, R)


def test_non_finite_query(fitted):
    with pytest.raises(InputError, match="phi contains 1 non-finite"):
        fitted.coefficients([0.0, np.nan, 1.0])


def test_row_mismatch(rng):
    with pytest.raises(InputError, match="Phi has 30 rows .* R has 29"):
        CaseInfluence().fit(rng.normal(size=(30, 3)), rng.normal(size=(29, 2)))


def test_query_width(fitted):
    with pytest.raises(InputError, match="width 4 .* H = 3"):
        fitted.scores(np.zeros((2, 4)))


def test_fewer_cases_than_features(rng):
    with pytest.raises(RankDeficientError, match=r"n = 3 rows but 5 columns") as info:
        CaseInfluence().fit(rng.normal(size=(3, 5)), rng.normal(size=(3, 2)))
    assert "ridge" in str(info.value) and "lstsq" in str(info.value)
    assert info.value.rank == 3


def test_rank_deficient_names_rank_condition_and_fixes(rng):
    Phi = rng.normal(size=(50, 4))
    Phi = np.hstack([Phi, Phi[:, :1] * 2.0])
    with pytest.raises(RankDeficientError) as info:
        CaseInfluence(solver="cholesky").fit(Phi, rng.normal(size=(50, 2)))
    msg = str(info.value)
    assert "rank 4 of 5" in msg and "Condition number" in msg
    assert "ridge=lam" in msg and "solver='lstsq'" in msg
    # the fixes it suggests both work
    CaseInfluence(ridge=1e-3).fit(Phi, rng.normal(size=(50, 2)))
    CaseInfluence(solver="lstsq").fit(Phi, rng.normal(size=(50, 2)))


def test_ill_conditioned_is_reported(rng):
    Phi = rng.normal(size=(50, 3))
    Phi[:, 2] = Phi[:, 1] + 1e-5 * rng.normal(size=50)  # full rank, cond(G) about 1e11-1e12
    ci = CaseInfluence()
    ci.max_condition = 1e9
    with pytest.raises(RankDeficientError, match="too ill-conditioned") as info:
        ci.fit(Phi, rng.normal(size=(50, 1)))
    assert info.value.rank == 3 and info.value.condition_number > 1e9
    # an exact duplicate column is diagnosed as rank deficiency instead
    Phi[:, 2] = Phi[:, 1]
    with pytest.raises(RankDeficientError, match="rank-deficient: numerical rank 2 of 3"):
        CaseInfluence().fit(Phi, rng.normal(size=(50, 1)))


def test_negative_ridge(rng):
    with pytest.raises(InputError, match="ridge must be finite and >= 0"):
        CaseInfluence(ridge=-1.0).fit(rng.normal(size=(10, 2)), rng.normal(size=(10, 1)))


def test_bad_solver_and_metric(rng):
    Phi, R = rng.normal(size=(10, 2)), rng.normal(size=(10, 1))
    with pytest.raises(InputError, match="solver must be"):
        CaseInfluence(solver="qr").fit(Phi, R)
    with pytest.raises(InputError, match="shape \\(H, H\\)"):
        CaseInfluence(ridge=1.0, ridge_metric=np.eye(3)).fit(Phi, R)
    with pytest.raises(InputError, match="positive semi-definite"):
        CaseInfluence(ridge=1.0, ridge_metric=-np.eye(2)).fit(Phi, R)


@pytest.mark.parametrize("action", [2, -1, np.array([0, 5])])
def test_action_out_of_range(fitted, action):
    with pytest.raises(InputError, match="out of range: the model has 2 action"):
        fitted.contributions(np.zeros((2, 3)), action)


def test_k_larger_than_n(fitted):
    with pytest.raises(InputError, match="k = 31 exceeds the number of training cases n = 30"):
        fitted.top_cases(np.zeros(3), 0, k=31)


@pytest.mark.parametrize(
    "method", ["coefficients", "scores", "contributions", "top_cases"]
)
def test_query_before_fit(method):
    ci = CaseInfluence()
    args = (np.zeros(3),) if method in ("coefficients", "scores") else (np.zeros(3), 0)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        getattr(ci, method)(*args)


def test_fit_does_not_follow_later_edits_of_the_callers_arrays(rng):
    Phi, R, Q = well_posed(11, 80, 5)
    ci = CaseInfluence(intercept=True).fit(Phi, R)
    alpha, scores = ci.coefficients(Q), ci.scores(Q)
    Phi[:] = 0.0  # the caller reuses its buffers
    R[:] = 0.0
    np.testing.assert_array_equal(ci.coefficients(Q), alpha)
    assert np.allclose(ci.coefficients(Q) @ ci.returns_, scores, atol=1e-12)
    assert not ci.returns_.flags.writeable and not ci.gram_.flags.writeable
    with pytest.raises(ValueError):
        ci.returns_[0, 0] = 1.0


@pytest.mark.parametrize("c", [1e200, 1e-200, 2.0**450, 3.0])
def test_coefficients_do_not_depend_on_the_scale_of_phi(c):
    Phi, R, Q = well_posed(12, 60, 4)
    for intercept in (False, True):
        ref = CaseInfluence(intercept=intercept).fit(Phi, R)
        ci = CaseInfluence(intercept=intercept).fit(Phi * c, R)
        assert np.allclose(ci.coefficients(Q * c), ref.coefficients(Q), rtol=1e-10, atol=1e-12)
        assert np.allclose(ci.scores(Q * c), ref.scores(Q), rtol=1e-10, atol=1e-12)
        assert np.allclose(ci.readout_ * c, ref.readout_, rtol=1e-10)
        assert np.allclose(ci.leverage(Q * c), ref.leverage(Q), rtol=1e-9)
        assert ci.rank_ == ref.rank_
    # the ridge problem on c Phi with lambda c^2 is the same problem
    c = 2.0**450
    ref = CaseInfluence(ridge=0.3).fit(Phi, R)
    ci = CaseInfluence(ridge=0.3 * c * c).fit(Phi * c, R)
    assert np.allclose(ci.coefficients(Q * c), ref.coefficients(Q), rtol=1e-10, atol=1e-12)


def test_iter_coefficients_covers_every_query_in_bounded_blocks(rng):
    Phi, R, Q = well_posed(13, 90, 5)
    Q = np.vstack([Q] * 7)
    ci = CaseInfluence(intercept=True).fit(Phi, R)
    full = ci.coefficients(Q)
    seen = np.zeros(len(Q), dtype=int)
    for sl, block in ci.iter_coefficients(Q, block_size=4):
        assert block.shape == (sl.stop - sl.start, 90) and block.shape[0] <= 4
        np.testing.assert_allclose(block, full[sl], rtol=1e-12, atol=1e-15)  # GEMM blocking
        seen[sl] += 1
    assert (seen == 1).all()
    ci.topk_block_entries = 200  # default blocks sized from n: 2 queries for n = 90
    assert max(b.shape[0] for _, b in ci.iter_coefficients(Q)) == 2
    with pytest.raises(InputError, match="block_size"):
        next(ci.iter_coefficients(Q, block_size=0))


def test_tunables_are_constructor_parameters_and_clone_works(rng):
    from sklearn.base import clone

    ci = CaseInfluence(ridge=0.5, intercept=True, batch_size=7, chunk_size=13,
                       max_condition=1e10, topk_block_entries=999)
    assert ci.get_params()["batch_size"] == 7 and ci.get_params()["chunk_size"] == 13
    twin = clone(ci)
    assert twin is not ci and twin.get_params() == ci.get_params()
    assert "batch_size=7" in repr(ci) and "batch_size" not in repr(CaseInfluence())
    assert ci.set_params(batch_size=3) is ci and ci.batch_size == 3
    with pytest.raises(InputError, match="unknown parameter"):
        ci.set_params(batchsize=3)
    Phi, R, Q = well_posed(14, 60, 4)
    a = CaseInfluence(chunk_size=7, batch_size=2).fit(Phi, R).coefficients(Q)
    np.testing.assert_allclose(a, CaseInfluence().fit(Phi, R).coefficients(Q), rtol=1e-12,
                               atol=1e-15)
    for bad in (dict(batch_size=0), dict(chunk_size=1.5), dict(max_condition=0.5)):
        with pytest.raises(InputError, match="must be"):
            CaseInfluence(**bad).fit(Phi, R)


@pytest.mark.parametrize("kw", [dict(), dict(intercept=True, ridge=0.2),
                                dict(solver="lstsq"), dict(intercept=True)])
def test_save_and_load_round_trip_without_pickle(tmp_path, kw):
    Phi, R, Q = well_posed(15, 70, 5)
    if kw.get("intercept") and "ridge" not in kw:
        Phi = Phi * 1e200  # exercises the rescaled path
        Q = Q * 1e200
    ci = CaseInfluence(batch_size=5, **kw).fit(Phi, R)
    ci.save(tmp_path / "ci.npz")
    back = CaseInfluence.load(tmp_path / "ci.npz")
    assert back.get_params()["batch_size"] == 5 and back.solver_ == ci.solver_
    np.testing.assert_array_equal(back.coefficients(Q), ci.coefficients(Q))
    np.testing.assert_array_equal(back.scores(Q), ci.scores(Q))
    np.testing.assert_array_equal(back.leverage(Q), ci.leverage(Q))
    np.testing.assert_array_equal(back.readout_, ci.readout_)
    pd_a = cbdt.audit_signals(back, Q)
    pd_b = cbdt.audit_signals(ci, Q)
    assert pd_a.equals(pd_b)
    # without Phi: scores still work, coefficients say what is missing
    ci.save(tmp_path / "light.npz", include_phi=False)
    light = CaseInfluence.load(tmp_path / "light.npz")
    np.testing.assert_array_equal(light.scores(Q), ci.scores(Q))
    with pytest.raises(InputError, match="include_phi=False"):
        light.coefficients(Q)
    np.savez(tmp_path / "other.npz", x=np.ones(2))
    with pytest.raises(InputError, match="not a CaseInfluence file"):
        CaseInfluence.load(tmp_path / "other.npz")


def test_integer_labels_as_one_column_of_returns_warn(rng):
    Phi = rng.normal(size=(40, 3))
    y = rng.integers(0, 4, size=40)
    with pytest.warns(cbdt.ReturnsWarning, match="returns_from_labels"):
        CaseInfluence().fit(Phi, y)
    R = cbdt.returns_from_labels(y, n_classes=4)
    assert R.shape == (40, 4) and np.array_equal(R.argmax(1), y)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", cbdt.ReturnsWarning)
        CaseInfluence().fit(Phi, R)
        CaseInfluence().fit(Phi, rng.normal(size=40))  # real-valued returns of one action
        CaseInfluence().fit(Phi, (y > 1).astype(float))  # a 0/1 return is a return
    with pytest.raises(InputError, match="non-integer"):
        cbdt.returns_from_labels([0.5, 1.0])


def test_explain_is_one_call_for_top_cases_and_signals(rng):
    import pandas as pd

    Phi, R, Q = well_posed(16, 80, 5)
    ci = CaseInfluence(intercept=True, batch_size=3).fit(Phi, R)
    ids = pd.Index([f"case-{i}" for i in range(80)], name="id")
    ex = ci.explain(Q, k=6, case_ids=ids)
    m = len(Q)
    assert list(ex.cases.columns) == ["query", "rank", "case_id", "alpha", "psi", "return",
                                      "case_action", "effect"]
    assert len(ex.cases) == 6 * m and len(ex.signals) == m
    sel = ci.scores(Q).argmax(1)
    top = ci.top_cases(Q, sel, k=6)
    got = ex.cases["case_id"].to_numpy().reshape(m, 6)
    np.testing.assert_array_equal(got, ids.to_numpy()[top.indices])
    np.testing.assert_allclose(ex.cases["psi"].to_numpy().reshape(m, 6), top.contributions,
                               rtol=1e-12, atol=1e-15)
    alpha = ci.coefficients(Q)
    np.testing.assert_allclose(ex.cases["alpha"].to_numpy().reshape(m, 6),
                               np.take_along_axis(alpha, top.indices, 1), rtol=1e-12, atol=1e-15)
    assert (ex.cases["effect"] == np.where(ex.cases["psi"] >= 0, "raises", "lowers")).all()
    sig = cbdt.audit_signals(ci, Q, k=6)
    for col in ("action", "score", "margin", "entropy", "gini", "risk"):
        np.testing.assert_allclose(ex.signals[col].to_numpy(), sig[col].to_numpy(),
                                   rtol=1e-12, atol=1e-14)
    # audited action and the coefficient ranking carry through
    ex1 = ci.explain(Q[0], k=3, action=1, rank_by="coefficient")
    assert (ex1.signals["action"] == 1).all() and len(ex1.cases) == 3
    order = np.argsort(-np.abs(alpha[0]), kind="stable")[:3]
    np.testing.assert_array_equal(ex1.cases["case_id"], order)
    with pytest.raises(InputError, match="case_ids must name every training case"):
        ci.explain(Q, case_ids=np.arange(5))


def test_progress_bar_only_when_asked(capsys):
    Phi, R, Q = well_posed(17, 60, 4)
    quiet = CaseInfluence(batch_size=2).fit(Phi, R)
    loud = CaseInfluence(batch_size=2, progress=True).fit(Phi, R)
    a = quiet.coefficients(Q)
    quiet.top_cases(Q, 0, k=3)
    cbdt.audit_signals(quiet, Q, batch_size=2)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(a, loud.coefficients(Q))
    assert "coefficients" in capsys.readouterr().err
    loud.top_cases(Q, 0, k=3)
    cbdt.audit_signals(loud, Q, batch_size=2)
    assert "top_cases" in capsys.readouterr().err
