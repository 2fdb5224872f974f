"""The paper beside the book for the theory chapters: 02 (Proposition 1) and 03 (invariance).

Hand-made inputs, not a re-run of the chapters: the rows carry the values of the inputs, and a
status flips when the data contradict the statement.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cbdt.book import claims
from cbdt.book.claims import ChapterClaims
from cbdt.book.claims import ch02_proposition1 as prop1


# ------------------------------------------------------------------ chapter 02
def _prop1(**kw) -> ChapterClaims:
    args = dict(exact_error=3e-15, alpha_norm=0.2, feasible_norms=[0.2001, 0.5, 1.0],
                sparse_norm=60.0, ridge_slopes=[1.0, 0.999, 1.002], ridge_constant_ok=True,
                n=300, H=24, n_queries=400)
    args.update(kw)
    return prop1.chapter_claims(**args)


def test_prop1_rows_hold_the_values_of_the_inputs():
    ch = _prop1()
    assert (ch.chapter, ch.title, ch.doc) == ("02", "Proposition 1: exactness, minimum norm, ridge limit", "notebooks/02_proposition1")
    identity, min_norm, ridge = ch.claims
    assert identity.paper == "exact"
    assert identity.book == "relative error below $10^{-10}$ on 400 queries"
    assert min_norm.book == (r"all 4 other feasible $\beta$ are longer than "
                             r"$\lVert\alpha(x)\rVert = 0.200$; the exact one on 24 cases only "
                             "is 300 times longer")
    assert ridge.paper == "converges"
    assert "1.00, 1.00, 1.00 (3 queries)" in ridge.book
    assert [c.status for c in ch.claims] == ["agrees"] * 3
    assert "$H = 24$" in ch.intro[0] and "$n = 300$" in ch.intro[0]


def test_prop1_statuses_flip_when_the_data_contradict_the_paper():
    bad = _prop1(exact_error=2.5e-8).claims[0]
    assert bad.status == "does not hold"
    assert bad.book == r"relative error $2.5\times10^{-8}$"

    shorter = _prop1(feasible_norms=[0.19, 0.5]).claims[1]
    assert shorter.status == "does not hold"
    assert shorter.book.startswith("1 of 3 other feasible")

    assert _prop1(ridge_slopes=[1.0, -0.2, 1.0]).claims[2].status == "does not hold"


def test_prop1_slow_convergence_agrees_but_says_the_rate_is_not_first_order():
    ridge = _prop1(ridge_slopes=[0.5, 0.5]).claims[2]
    assert ridge.status == "agrees"
    assert "0.50, 0.50" in ridge.book and "do not show the first-order rate" in ridge.reason
    assert "do not show" in _prop1(ridge_constant_ok=False).claims[2].reason


# ------------------------------------------------------------------ chapter 03
def _table(**cols) -> pd.DataFrame:
    conds = [1.0, 10**0.5, 10.0, 1e4]
    base = {"cond": conds, "ols": [1e-15, 2e-15, 4e-15, 3e-12],
            "ridge_isotropic": [1e-15, 0.1002, 0.187, 0.4387],
            "ridge_cotransformed": [1e-15, 2e-15, 4e-15, 2e-11],
            "ridge_orthogonal": [1e-15] * 4}
    base.update(cols)
    return pd.DataFrame(base)


def _c1(before=(0.39, 0.40, 0.41, 0.38, 0.42), after=None, flips=0, flips_clear=0):
    after = before if after is None else after
    return pd.DataFrame({"seed": range(len(before)), "rate_before": before, "rate_after": after,
                         "sign_flips": [flips] + [0] * (len(before) - 1),
                         "sign_flips_clear": [flips_clear] + [0] * (len(before) - 1),
                         "n_coefficients": 40_000})


def _inv(table=None, c1=None, **kw) -> ChapterClaims:
    args = dict(basis_change=5e-15, basis_cond=28.22, lam_rel=1e-2)
    args.update(kw)
    return claims.ch03_invariance.chapter_claims(table=_table() if table is None else table,
                              c1=_c1() if c1 is None else c1, **args)


def test_invariance_rows_hold_the_values_of_the_inputs():
    ch = _inv()
    assert (ch.chapter, ch.title, ch.doc) == ("03", "Invariance and whitening", "notebooks/03_invariance_whitening")
    ols, iso, cot, zca = ch.claims
    assert ols.book == (r"change below $10^{-10}$ for a random Gaussian $B$ "
                        r"($\kappa(B)\approx28$); below $10^{-7}$ for $\kappa(B)$ from $1$ to "
                        r"$10^{4}$")
    assert iso.book == (r"relative change 0.10 at $\kappa(B)\approx3.2$, 0.44 at "
                        r"$\kappa(B)=10^{4}$")
    assert iso.reason.startswith(r"$\lambda = 10^{-2}\,\mathrm{tr}(G)/H$")
    assert cot.book == r"change below $10^{-7}$ at every $\kappa(B)$ tried, from $1$ to $10^{4}$"
    # mean 0.40, half-width t_{0.975,4} * sd / sqrt(5) = 2.776 * 0.01581 / 2.236 = 0.0196
    assert zca.book == r"$0.4000\pm0.0196$ before and after; 0 sign flips in 5 seeds"
    assert zca.paper == '"up to numerical precision"'
    assert "40,000 coefficients per seed" in zca.reason
    assert [c.status for c in ch.claims] == ["agrees"] * 4


def test_invariance_values_follow_the_table():
    iso = _inv(table=_table(ridge_isotropic=[1e-15, 0.25, 0.3, 0.61])).claims[1]
    assert iso.book == (r"relative change 0.25 at $\kappa(B)\approx3.2$, 0.61 at "
                        r"$\kappa(B)=10^{4}$")
    assert "10^{-3}" in _inv(lam_rel=1e-3).claims[1].reason


@pytest.mark.parametrize(
    ("change", "row"),
    [
        (dict(basis_change=1e-8), 0),
        (dict(table=_table(ols=[1e-15, 1e-15, 1e-15, 1e-5])), 0),
        (dict(table=_table(ridge_isotropic=[1e-15, 1e-12, 0.2, 0.4])), 1),
        (dict(table=_table(ridge_orthogonal=[1e-15, 0.05, 0.05, 0.05])), 1),
        (dict(table=_table(ridge_cotransformed=[1e-15, 1e-15, 1e-15, 1e-5])), 2),
        (dict(c1=_c1(after=(0.39, 0.40, 0.41, 0.38, 0.43), flips=400, flips_clear=400)), 3),
    ],
)
def test_invariance_status_flips_when_the_data_contradict_the_paper(change, row):
    assert _inv().claims[row].status == "agrees"
    flipped = _inv(**change).claims[row]
    assert flipped.status == "does not hold"
    assert flipped.reason


def test_c1_flip_at_rounding_level_is_numerical_precision():
    zca = _inv(c1=_c1(after=(0.39, 0.40, 0.41, 0.38, 0.4205), flips=1)).claims[3]
    assert zca.status == "agrees"
    assert zca.book.startswith(r"$0.4000\pm0.0196$ before, $0.4001\pm")
    assert zca.book.endswith("after; 1 sign flip in 5 seeds")


def test_unsorted_table_gives_the_same_rows():
    t = _table()
    assert _inv(table=t.iloc[::-1].reset_index(drop=True)).claims == _inv(table=t).claims
    assert np.isclose(t["cond"].iloc[1], 10**0.5)
