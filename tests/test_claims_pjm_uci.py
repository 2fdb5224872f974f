"""The paper-beside-the-book rows of chapters 07 (PJM) and 08 (UCI), on hand-made results."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from cbdt.book import claims
from cbdt.book.claims import ChapterClaims
from cbdt.book.experiments import pjm, uci
from cbdt.exceptions import InputError

SEEDS = (0, 1, 2, 3, 4)
SPREAD = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])  # mean 0; 95% half-width = 1.963 * eps


def around(center, eps):
    """Five per-seed values with mean ``center`` and 95% half-width about ``1.96 eps``."""
    return center + eps * SPREAD


def by_claim(ch: ChapterClaims, start: str):
    rows = [c for c in ch.claims if c.claim.startswith(start)]
    assert len(rows) == 1, [c.claim for c in ch.claims]
    return rows[0]


# ---------------------------------------------------------------------- chapter 07: PJM
def pjm_inputs(*, agree=0.87, margin_first=True, recon=(0.9996, 0.9998, 0.9999),
               support=(0.975, 0.975, 0.974), support_eps=0.001, ratio=6.8, pos_match=0.772,
               magnitude=2.32):
    agreement = pd.DataFrame({
        "seed": SEEDS,
        "bandwidth": 0.7275,
        "n_test": 3358,
        "agreement": around(agree, 0.005),
        "n_agree": np.round(around(agree, 0.005) * 3358),
        "test_mse_nn": 0.06,
        "test_mse_cbdt": 0.09,
        "return_nn_on_disagreements": 0.29,
        "return_cbdt_on_disagreements": 0.19,
    })
    share = np.array([0.47, 0.14, 0.20, 0.18, 0.01])
    rate = np.array([0.30, 0.09, 0.13, 0.12, 0.004])
    if not margin_first:
        share, rate = share[::-1], rate[::-1]
    margin = pd.DataFrame({"disagreement_mean": rate, "share of all disagreements_mean": share},
                          index=pd.Index([1, 2, 3, 4, 5], name="margin bin"))
    alignment = pd.DataFrame([
        {"seed": s, "action": a, "rho_support": support[k] + support_eps * SPREAD[s],
         "rho_recon": recon[k] + 1e-5 * SPREAD[s]}
        for s in SEEDS for k, a in enumerate(pjm.ACTIONS)
    ])
    geometry = pd.DataFrame({
        "seed": SEEDS,
        "pos_distance": 0.16,
        "neg_distance": 0.16 * ratio,
        "dist_ratio": around(ratio, 0.5),
        "dist_ratio_coordstd": around(ratio, 0.4),
        "pos_match": around(pos_match, 0.01),
        "neg_match": 0.36,
        "magnitude_ratio": around(magnitude, 0.04),
    })
    return agreement, margin, alignment, geometry


def test_pjm_rows_as_the_chapter_computes_them():
    ch = claims.ch07_pjm.chapter_claims(*pjm_inputs())
    assert (ch.chapter, ch.title, ch.doc) == ("07", "PJM bidding", "notebooks/07_pjm_audit")
    assert [c.status for c in ch.claims] == [
        "differs", "agrees in shape", "differs", "differs", "agrees", "differs", "differs"]
    a = by_claim(ch, "network-CBDT agreement")
    assert a.paper == "3221 of 3358 (0.959)"
    assert a.book == r"$0.870\pm0.010$ (2921 of 3358)"
    assert "1.5x the network's" in a.reason  # the two test MSEs' ratio, 0.09 / 0.06
    m = by_claim(ch, "disagreements")
    assert m.paper == "yes (137 disagreements)"
    assert m.book.startswith("lowest margin quintile holds 47% of them")
    r = by_claim(ch, r"$\rho_{recon}$")
    assert (r.paper, r.book) == ("0.9998 / 0.9972 / 0.9592", "0.9996 / 0.9998 / 0.9999")
    assert "for conservative (by 0.0002), moderate (by 0.003), aggressive (by 0.04)" in r.reason
    d = by_claim(ch, "distance ratio")
    assert d.paper == "7.5x (3.30 / 0.44)"
    assert d.book == r"$6.8\pm1.0$x (1.09 / 0.16)"
    p = by_claim(ch, "top-5 positive")
    assert (p.paper, p.book) == ("64.1%", r"$77.2\pm2.0\%$")
    assert "(36.0% here)" in p.reason
    assert by_claim(ch, "magnitude ratio").book == r"$2.32\pm0.08$x"
    assert "$\\omega = 0.7275$" in ch.intro[0]
    ChapterClaims.from_dict(ch.to_dict())  # serialisable


def test_pjm_statuses_follow_the_data():
    ch = claims.ch07_pjm.chapter_claims(*pjm_inputs(
        agree=3221 / 3358, margin_first=False, recon=(0.9998, 0.9972, 0.9592),
        support=(0.98, 0.98, 0.90), ratio=9.0, pos_match=0.641, magnitude=3.7))
    assert [c.status for c in ch.claims] == [
        "agrees", "does not hold", "agrees", "agrees in shape", "differs", "agrees", "agrees"]
    assert "outside" not in by_claim(ch, r"$\rho_{recon}$").reason
    assert "entirely below" in by_claim(ch, r"$\rho_{support}$").reason
    # a weaker aggressive mean that stays inside the others' intervals is not "weaker"
    ch = claims.ch07_pjm.chapter_claims(*pjm_inputs(support=(0.98, 0.98, 0.97), support_eps=0.01))
    assert by_claim(ch, r"$\rho_{support}$").status == "differs"


# ---------------------------------------------------------------------- chapter 08: UCI
def uci_audit_like(dataset, *, agree, acc=0.853, recon=(0.968, 0.989, 0.991),
                   curve=(0.85, 0.90, 0.86, 0.83, 0.83), submemory=None):
    per_seed = pd.DataFrame({
        "seed": SEEDS,
        "agreement": around(agree, 0.005),
        "label_accuracy": around(acc, 0.001),
        "optimal_accuracy": acc - 0.024,
        "optimal_set_accuracy": acc - 0.013,
        **{f"rho_recon_{a}": around(r, 0.002) for a, r in enumerate(recon)},
        "bandwidth_multiple": [0.125, 0.125, 0.25, 0.125, 0.125],
    })
    sens = pd.DataFrame([
        {"seed": s, "multiple": c, "agreement": v}
        for s in SEEDS for c, v in zip(uci.BANDWIDTH_MULTIPLES, curve, strict=True)
    ])
    return uci.UCIAudit(dataset, [], per_seed, sens, pd.DataFrame(), submemory, 1.0)


def submemory_table(top="delinquency", a2_ols=0.997, a2_cbdt=1.0, a2_eps=0.0):
    base = {"AGE": 0.28, "SEX": 0.33, "EDUCATION": 0.42, "delinquency": 0.51}
    base[top], base["delinquency"] = base["delinquency"], base[top]
    return pd.DataFrame([
        {"seed": s, "split": k, "gram_mismatch": v, "gram_mismatch_raw": v - 0.03,
         "a2_cbdt": a2_cbdt,
         "a2_ols": a2_ols + a2_eps * SPREAD[s] if k == "delinquency" else 0.999}
        for s in SEEDS for k, v in base.items()
    ])


COUNTS = pd.DataFrame({"action": list(uci.DEFAULT_CREDIT_ACTION_LABELS),
                       "argmax": [6636, 0, 23364], "best_or_tied": [6636, 0, 23364]})


def uci_inputs(*, adult_agree=0.89, credit_agree=0.914, recon=(0.968, 0.989, 0.991), **sub):
    adult = uci_audit_like("adult", agree=adult_agree)
    credit = uci_audit_like("default_credit", agree=credit_agree, acc=0.80, recon=recon,
                            curve=(0.837, 0.919, 0.902, 0.847, 0.805),
                            submemory=submemory_table(**sub))
    return adult, credit, COUNTS


def test_uci_rows_as_the_chapter_computes_them():
    ch = claims.ch08_uci.chapter_claims(*uci_inputs())
    assert (ch.chapter, ch.title, ch.doc) == ("08", "UCI audits", "notebooks/08_uci_audits")
    assert [c.status for c in ch.claims] == [
        "differs", "not comparable", "differs", "differs", "agrees in shape", "agrees in shape"]
    a = by_claim(ch, "Adult: network-CBDT agreement")
    assert (a.paper, a.book) == ("0.9408", r"$0.890\pm0.010$")
    assert "moves by 7 points" in a.reason and "above every point of the grid" in a.reason
    acc = by_claim(ch, "Adult: network accuracy")
    assert acc.book == r"$0.853\pm0.002$ (income-label accuracy)"
    assert "below all three" in acc.reason
    c = by_claim(ch, "Default Credit: network-CBDT agreement")
    assert c.paper == r"$0.8746\pm0.0047$"
    assert "between $\\nu = 1/16$ (0.837) and $\\nu = 1/8$ (0.919)" in c.reason
    assert "and again between $\\nu = 1/4$ (0.902) and $\\nu = 1/2$ (0.847)" in c.reason
    assert "do not overlap" in c.reason
    r = by_claim(ch, r"Default Credit: $\rho_{recon}$")
    assert r.paper == r"$0.998\pm0.001$ / $0.956\pm0.032$ / $0.998\pm0.001$"
    assert r.book == r"$0.968\pm0.004$ / $0.989\pm0.004$ / $0.991\pm0.004$"
    assert "case-optimal for 0 of 30,000" in r.reason
    assert "outside the book's interval for $a_0$ (by 0.03), $a_1$ (by 0.03)" in r.reason
    assert "weakest action is $a_0$ here, $a_1$ in the paper" in r.reason
    g = by_claim(ch, "Default Credit: the delinquency")
    assert g.paper == "delinquency highest, about 0.91"
    assert g.book.startswith("highest: 0.510")
    assert "ranking (whitened): delinquency 0.510, EDUCATION 0.420" in g.reason
    a2 = by_claim(ch, "Default Credit: A2")
    assert a2.paper == "near 1.0 (delinquency)"
    assert a2.book.startswith(r"1 exactly for CBDT supports; $0.9970\pm0.0000$")
    assert "neither a number nor a definition" in a2.reason
    assert "the whole interval lies at or above it" in a2.reason
    assert "$\\nu = 1/8$ in 8 of 10 runs" in ch.intro[0]
    assert ch.notes and "0 of 30,000" in ch.notes[0]


def test_uci_statuses_follow_the_data():
    ch = claims.ch08_uci.chapter_claims(*uci_inputs(adult_agree=0.9408, credit_agree=0.8746,
                                        recon=(0.998, 0.956, 0.998), top="SEX", a2_ols=0.95))
    assert [c.status for c in ch.claims] == [
        "agrees", "not comparable", "agrees", "agrees", "does not hold", "does not hold"]
    assert "not highest (SEX is)" in by_claim(ch, "Default Credit: the delinquency").book
    ch = claims.ch08_uci.chapter_claims(*uci_inputs(a2_cbdt=0.999))
    assert by_claim(ch, "Default Credit: A2").status == "does not hold"


def test_uci_a2_near_one_needs_the_whole_interval():
    """"Near 1" (the paper gives no number) holds in shape only when the whole 95% interval of
    the OLS probes is at or above claims.ch08_uci.A2_NEAR_ONE; a mean above it is not enough."""
    # mean 0.991 >= 0.99, but the interval (half-width about 0.004) reaches below 0.99
    a2 = by_claim(claims.ch08_uci.chapter_claims(*uci_inputs(a2_ols=0.991, a2_eps=0.002)),
                  "Default Credit: A2")
    assert a2.status == "differs"
    assert "the interval reaches below it" in a2.reason
    # the whole interval below 0.99
    a2 = by_claim(claims.ch08_uci.chapter_claims(*uci_inputs(a2_ols=0.980, a2_eps=0.002)),
                  "Default Credit: A2")
    assert a2.status == "does not hold"
    assert "entirely below" in a2.reason
    # the whole interval above 0.99
    a2 = by_claim(claims.ch08_uci.chapter_claims(*uci_inputs(a2_ols=0.996, a2_eps=0.001)),
                  "Default Credit: A2")
    assert a2.status == "agrees in shape"
    assert claims.ch08_uci.A2_NEAR_ONE == 0.99


def test_uci_needs_the_submemory_table():
    adult, credit, counts = uci_inputs()
    credit.submemory = None
    with pytest.raises(uci.InputError):
        claims.ch08_uci.chapter_claims(adult, credit, counts)


def test_label_error_scale_is_the_mean_squared_slope_of_the_returns():
    # slopes of r(a0) = 0.5 (1 - y), r(a1) = 1 - 2y, r(a2) = 2 (1 - y) - 3y in y
    assert claims.ch08_uci.label_error_scale() == pytest.approx((0.5**2 + 2**2 + 5**2) / 3)


def test_training_sentence_follows_the_loss_table():
    loss = pd.DataFrame({"Adult train loss": around(0.0615, 0.0005),
                         "Adult constant": [0.142] * 5,
                         "Default train loss": around(1.29, 0.005),
                         "Default constant": [1.68] * 5})
    s = claims.ch08_uci.training_sentence(loss)
    assert s.startswith("Both networks end below the constant predictor")
    assert "the Adult network at 0.0615 against 0.142 (43% of it)" in s
    assert "the Default Credit network at 1.29 against 1.68 (77% of it)" in s
    assert "a squared error of 0.132 against 0.172 in the default label" in s
    assert "divided by 9.75" in s
    worse = loss.assign(**{"Adult train loss": [0.15] * 5})
    assert claims.ch08_uci.training_sentence(worse).startswith("Not every network")
    with pytest.raises(InputError):
        claims.ch08_uci.training_sentence(loss.drop(columns=["Adult constant"]))


def test_majority_rate_is_the_share_of_the_most_frequent_test_label():
    def run(y):
        return types.SimpleNamespace(task=types.SimpleNamespace(y_test=np.asarray(y)))

    audit = uci.UCIAudit("adult", [run([0, 0, 0, 1]), run([1, 1, 0, 1, 1])], pd.DataFrame(),
                         pd.DataFrame(), pd.DataFrame(), None, 1.0)
    assert claims.ch08_uci.majority_rate(audit) == pytest.approx((0.75 + 0.8) / 2)
    with pytest.raises(InputError):
        claims.ch08_uci.majority_rate(uci_audit_like("adult", agree=0.9))
