"""Tests of cbdt.book.experiments.invariance (Sec. 3.2-3.3, App. B.2-B.3, C.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbdt
from cbdt.book.experiments import invariance as inv


@pytest.fixture(scope="module")
def problem() -> inv.TanhProblem:
    return inv.make_tanh_problem(0, n=300, n_queries=60)


@pytest.fixture(scope="module")
def table(problem: inv.TanhProblem) -> pd.DataFrame:
    lam = 1e-2 * inv.ridge_scale(problem.Phi)
    return inv.invariance_vs_condition(
        problem.Phi, problem.R, problem.Phi_query, [1.0, 3.0, 10.0, 100.0, 1e3], lam, seed=0
    )


# ------------------------------------------------------------------ representation
def test_problem_is_deterministic_and_consistent(problem: inv.TanhProblem) -> None:
    again = inv.make_tanh_problem(0, n=300, n_queries=60)
    np.testing.assert_array_equal(problem.Phi, again.Phi)
    np.testing.assert_array_equal(problem.R, again.R)
    assert problem.Phi.shape == (300, 8)
    assert problem.R.shape == (300, 3)
    assert problem.Phi_query.shape == (60, 8)
    np.testing.assert_array_equal(problem.represent(problem.X), problem.Phi)
    other = inv.make_tanh_problem(1, n=300, n_queries=60)
    assert not np.allclose(problem.Phi, other.Phi)
    # correlated units: the Gram matrix is far from isotropic, but full rank
    cond = np.linalg.cond(problem.Phi.T @ problem.Phi)
    assert 10 < cond < 1e6


def test_problem_rejects_one_dimensional_inputs() -> None:
    with pytest.raises(ValueError, match="d must be"):
        inv.make_tanh_problem(0, d=1)


# ------------------------------------------------------------------ building blocks
@pytest.mark.parametrize("cond", [1.0, 7.0, 1e3])
def test_random_condition_matrix(cond: float) -> None:
    B, Q = inv.random_condition_matrix(6, cond, seed=3)
    assert np.linalg.cond(B) == pytest.approx(cond, rel=1e-8)
    assert abs(np.linalg.det(B)) == pytest.approx(1.0, rel=1e-8)
    np.testing.assert_allclose(Q @ Q.T, np.eye(6), atol=1e-12)
    B2, _ = inv.random_condition_matrix(6, cond, seed=3)
    np.testing.assert_array_equal(B, B2)
    if cond == 1.0:
        np.testing.assert_allclose(B, Q, atol=1e-12)


def test_random_condition_matrix_rejects_cond_below_one() -> None:
    with pytest.raises(ValueError):
        inv.random_condition_matrix(3, 0.5, seed=0)


def test_ridge_scale_and_relative_change() -> None:
    Phi = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    assert inv.ridge_scale(Phi) == pytest.approx(np.trace(Phi.T @ Phi) / 2)
    assert inv.max_relative_change([1.0, -2.0], [1.0, -4.0]) == pytest.approx(0.5)
    assert inv.max_relative_change([[3.0]], [[3.0]]) == 0.0


def test_negative_rate_counts_strictly_negative() -> None:
    assert inv.negative_rate([[-1.0, 0.0], [2.0, -3.0]]) == 0.5
    assert inv.negative_rate([0.0, 1.0]) == 0.0


def test_format_changes_hides_rounding_digits() -> None:
    text = inv.format_changes({"ols": 3.2e-14, "ridge_isotropic": 0.123456}, tol=1e-10)
    assert "< 1e-10: True" in text
    assert "0.1235" in text
    assert "3.2" not in text


# ------------------------------------------------------------------ invariance experiment
def test_ols_and_cotransformed_are_invariant(table: pd.DataFrame) -> None:
    assert (table["ols"] < 1e-8).all()
    assert (table["ridge_cotransformed"] < 1e-8).all()


def test_orthogonal_b_keeps_isotropic_ridge(table: pd.DataFrame) -> None:
    assert (table["ridge_orthogonal"] < 1e-10).all()
    # cond(B) = 1 means B is orthogonal: the isotropic penalty is then invariant too
    assert table.loc[table["cond"] == 1.0, "ridge_isotropic"].item() < 1e-10


def test_isotropic_ridge_breaks_invariance_increasingly(table: pd.DataFrame) -> None:
    iso = table.loc[table["cond"] > 1, "ridge_isotropic"].to_numpy()
    assert np.all(np.diff(iso) > 0), iso
    assert table.loc[table["cond"] == 1e3, "ridge_isotropic"].item() > 1e-6
    # far above rounding: a real change of the coefficients, not noise
    assert table.loc[table["cond"] == 1e3, "ridge_isotropic"].item() > 1e-2


def test_table_columns(table: pd.DataFrame) -> None:
    assert list(table.columns) == [
        "cond",
        "ols",
        "ridge_isotropic",
        "ridge_cotransformed",
        "ridge_orthogonal",
    ]
    assert len(table) == 5


def test_coefficient_changes_match_b2_algebra(problem: inv.TanhProblem) -> None:
    """The isotropic change equals the gap between B(G + lam I)B^T and BGB^T + lam I."""
    B, _ = inv.random_condition_matrix(problem.Phi.shape[1], 30.0, seed=1)
    lam = 0.5
    Phi_B = problem.Phi @ B.T
    q_B = problem.Phi_query @ B.T
    G = problem.Phi.T @ problem.Phi
    ref = problem.Phi_query @ np.linalg.solve(G + lam * np.eye(len(G)), problem.Phi.T)
    iso = q_B @ np.linalg.solve(B @ G @ B.T + lam * np.eye(len(G)), Phi_B.T)
    got = inv.coefficient_changes(problem.Phi, problem.R, problem.Phi_query, B, lam)
    assert got["ridge_isotropic"] == pytest.approx(inv.max_relative_change(iso, ref), rel=1e-6)
    assert "ridge_orthogonal" not in got


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    log_cond=st.floats(0.0, 2.5),
    lam=st.floats(1e-3, 10.0),
)
def test_invariance_property(seed: int, log_cond: float, lam: float) -> None:
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(40, 5))  # well-conditioned G; rounding grows like cond(B)^2 cond(G)
    R = rng.normal(size=(40, 2))
    q = rng.normal(size=(7, 5))
    B, Q = inv.random_condition_matrix(5, 10.0**log_cond, seed)
    ch = inv.coefficient_changes(Phi, R, q, B, lam, Q)
    assert ch["ols"] < 1e-8
    assert ch["ridge_cotransformed"] < 1e-8
    assert ch["ridge_orthogonal"] < 1e-8


def test_invariance_report_text(problem: inv.TanhProblem) -> None:
    text = inv.invariance_report(problem.Phi, problem.R, problem.Phi_query, 100.0, 1e-2)
    lines = text.splitlines()
    assert lines[0].startswith("cond(B) = 100, lambda = 0.01 x tr(G)/H")
    assert len(lines) == 5
    assert sum("< 1e-06: True" in ln for ln in lines) == 3
    assert "isotropic ridge " in lines[2] and "True" not in lines[2]


# ------------------------------------------------------------------ whitening
def test_whitening_check(problem: inv.TanhProblem) -> None:
    out = inv.whitening_check(problem.Phi, problem.R, problem.Phi_query)
    assert out["cond_G"] > 10
    assert out["cond_G_white"] == pytest.approx(1.0, abs=1e-10)
    assert out["gram_error"] < 1e-10  # eq. 13
    assert out["inner_product_error"] < 1e-10  # eq. 14
    assert out["coefficient_change"] < 1e-10  # eq. 12
    assert out["score_change"] < 1e-10


def test_zca_sign_comparison_fields(problem: inv.TanhProblem) -> None:
    out = inv.zca_sign_comparison(problem.Phi, problem.R, problem.Phi_query)
    assert out["n_coefficients"] == 60 * 300
    assert 0.05 < out["rate_before"] < 0.95  # signed coefficients are common
    assert out["rate_before"] == out["n_negative_before"] / out["n_coefficients"]
    assert out["sign_flips_clear"] == 0
    assert out["sign_flips_clear"] <= out["sign_flips"]
    assert out["max_rel_change"] < 1e-10


def test_zca_sign_comparison_flags_near_zero_coefficients() -> None:
    """A coefficient that is exactly zero is reported as near zero, not as a clear flip."""
    Phi = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])
    R = np.ones((4, 1))
    G = Phi.T @ Phi
    q = (G @ np.array([0.0, 1.0]))[None, :]  # alpha_i = phi_i^T e_2: alpha_0 = 0 exactly
    out = inv.zca_sign_comparison(Phi, R, q)
    assert out["n_near_zero"] >= 1
    assert out["sign_flips_clear"] == 0


def test_negative_rate_zca_unchanged_across_seeds() -> None:
    df = inv.negative_rate_zca(seeds=[0, 1, 2], n=200, n_queries=40)
    assert list(df["seed"]) == [0, 1, 2]
    assert (df["rate_diff"].abs() <= 1e-12).all()
    assert (df["rate_before"] - df["rate_after"]).abs().max() <= 1e-12
    assert (df["sign_flips_clear"] == 0).all()
    assert (df["max_rel_change"] < 1e-10).all()
    assert (df["n_coefficients"] == 200 * 40).all()
    mean, half = cbdt.metrics.mean_ci(df["rate_diff"])
    assert abs(mean) <= 1e-12 and half <= 1e-12
