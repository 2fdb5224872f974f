"""The fit and its persistence under adversarial inputs: what the fit keeps of the caller's
data, how a global scale of Phi interacts with the intercept and the ridge, what ``rank_``
means, and what ``load`` accepts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cbdt import CaseInfluence, InputError, RankDeficientError

torch = pytest.importorskip("torch")


def _data(seed: int = 0, n: int = 120, H: int = 5, A: int = 3):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(n, H)) + 0.5
    R = rng.normal(size=(n, A))
    Q = rng.normal(size=(9, H)) + 0.5
    return Phi, R, Q


# --------------------------------------------------------------- the returns are copied
@pytest.mark.parametrize("kind", ["dataframe", "tensor", "fortran", "column"])
def test_the_fit_keeps_a_copy_of_the_returns_whatever_their_type(kind):
    Phi, R, Q = _data()
    if kind == "dataframe":
        R_in = pd.DataFrame(R.copy(), columns=["a", "b", "c"])
    elif kind == "tensor":
        R_in = torch.tensor(R.copy())
    elif kind == "fortran":
        R_in = np.asfortranarray(R.copy())
    else:
        R = R[:, :1].copy()
        R_in = R[:, 0].copy()
    ci = CaseInfluence().fit(Phi, R_in)
    before = ci.scores(Q).copy()
    # the caller edits the returns after the fit
    if kind == "dataframe":
        R_in.iloc[0, 0] = 1e6
    else:
        R_in[0] = 1e6
    assert np.array_equal(ci.returns_, R)
    assert np.array_equal(ci.scores(Q), before)
    gap = np.abs(ci.scores(Q) - ci.coefficients(Q) @ ci.returns_).max()
    assert gap <= 1e-10 * np.abs(before).max()


# --------------------------------------------------------------- scale and intercept
@pytest.mark.parametrize("c", [1e-150, 1e-60, 1e-6, 1e-3, 1.0, 1e3, 1e5, 1e6, 1e60, 1e150])
def test_with_an_intercept_a_global_scale_of_phi_changes_nothing(c):
    """alpha does not depend on a global scale of Phi (nor on the scale of the constant
    coordinate); with intercept=True today's fit raised at 1e6 and 1e-6 (cond of [c Phi, 1]
    grew with c) while lstsq agreed to 1e-12."""
    Phi, R, Q = _data()
    ref = CaseInfluence(intercept=True).fit(Phi, R)
    ci = CaseInfluence(intercept=True).fit(Phi * c, R)
    a_ref, a = ref.coefficients(Q), ci.coefficients(Q * c)
    assert np.abs(a - a_ref).max() <= 1e-10 * np.abs(a_ref).max()
    assert np.abs(ci.scores(Q * c) - ref.scores(Q)).max() <= 1e-10 * np.abs(ref.scores(Q)).max()
    assert np.allclose(ci.intercept_, ref.intercept_, rtol=1e-10, atol=1e-12)
    assert np.allclose(ci.readout_ * c, ref.readout_, rtol=1e-9, atol=1e-12)
    assert ci.rank_ == ref.rank_ == Phi.shape[1] + 1
    # the reported condition number hardly depends on the scale either (the constant
    # coordinate is balanced to the nearest power of two: within a factor 2 of its norm)
    assert 1 / 16 <= ci.condition_number_ / ref.condition_number_ <= 16


@pytest.mark.parametrize("c", [1e-150, 1e-6, 1.0, 1e6, 1e150])
def test_ridge_with_an_intercept_at_any_scale(c):
    """Phi ~ 1e-150 with ridge=0.5 and an intercept raised: the ridge rows were multiplied
    by the power-of-two rescaling while the constant column was not."""
    Phi, R, Q = _data()
    lam = 0.5 * c**2  # the same problem in the coordinates c * phi
    ref = CaseInfluence(ridge=0.5, intercept=True).fit(Phi, R)
    ci = CaseInfluence(ridge=lam, intercept=True).fit(Phi * c, R)
    a_ref = ref.coefficients(Q)
    assert np.abs(ci.coefficients(Q * c) - a_ref).max() <= 1e-10 * np.abs(a_ref).max()
    # and the tiny-Phi problem of the report: G << lam, well posed (G + lam I ~ lam I)
    tiny = CaseInfluence(ridge=0.5, intercept=True).fit(Phi * 1e-150, R)
    assert tiny.condition_number_ < 1e4
    S, A = tiny.scores(Q * 1e-150), tiny.coefficients(Q * 1e-150)
    assert np.allclose(tiny.intercept_, R.mean(axis=0), rtol=1e-10)
    assert np.abs(S - A @ R).max() <= 1e-10 * np.abs(S).max()


@given(st.floats(-40, 40), st.integers(0, 50))
@settings(max_examples=40, deadline=None)
def test_intercept_fit_is_scale_free_property(log2c, seed):
    Phi, R, Q = _data(seed, n=60, H=4, A=2)
    c = 2.0**log2c * 1.37
    ref = CaseInfluence(intercept=True).fit(Phi, R)
    ci = CaseInfluence(intercept=True).fit(Phi * c, R)
    a_ref = ref.coefficients(Q)
    assert np.abs(ci.coefficients(Q * c) - a_ref).max() <= 1e-9 * np.abs(a_ref).max()


@pytest.mark.parametrize("where", ["memory", "memmap"])
def test_scores_equal_alpha_times_returns_under_a_strong_ridge(where, tmp_path):
    """The QR readout lost digits as lam / |G| grew (2e-10 relative at 1e12), and the
    scores drifted from alpha @ R by as much."""
    Phi, R, Q = _data(3)
    if where == "memmap":
        mm = np.memmap(tmp_path / "p", dtype=np.float64, mode="w+", shape=Phi.shape)
        mm[:] = Phi
        mm.flush()
        X = np.memmap(tmp_path / "p", dtype=np.float64, mode="r", shape=Phi.shape)
    else:
        X = Phi
    G = np.linalg.norm(Phi, 2) ** 2
    for ratio in (1e4, 1e8, 1e12):
        ci = CaseInfluence(ridge=ratio * G, intercept=ratio > 1e6).fit(X, R)
        S, A = ci.scores(Q), ci.coefficients(Q)
        assert np.abs(S - A @ R).max() <= 1e-13 * np.abs(S).max(), ratio


# --------------------------------------------------------------- rank_
def test_rank_is_the_rank_of_phi_also_with_a_ridge():
    rng = np.random.default_rng(1)
    B = rng.normal(size=(200, 3))
    Phi = np.hstack([B, B @ rng.normal(size=(3, 3))])  # rank 3 of 6 columns
    R = rng.normal(size=(200, 2))
    assert CaseInfluence(solver="lstsq").fit(Phi, R).rank_ == 3
    assert CaseInfluence(ridge=0.1).fit(Phi, R).rank_ == 3
    assert CaseInfluence(ridge=0.1, intercept=True).fit(Phi, R).rank_ == 4
    assert CaseInfluence(ridge=0.1, intercept=True, solver="lstsq").fit(Phi, R).rank_ == 4


# --------------------------------------------------------------- non-finite rows
def test_a_non_finite_phi_is_reported_at_its_absolute_row(tmp_path):
    Phi, R, _ = _data(n=300)
    Phi[257, 2] = np.nan
    path = tmp_path / "phi.f64"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    for X in (Phi, np.memmap(path, dtype=np.float64, mode="r", shape=Phi.shape)):
        with pytest.raises(InputError, match=r"row 257\b") as err:
            CaseInfluence(chunk_size=100).fit(X, R)
        assert "column 2" in str(err.value)


# --------------------------------------------------------------- save / load
def _saved(tmp_path, **kw):
    Phi, R, Q = _data()
    ci = CaseInfluence(**kw).fit(Phi, R)
    path = tmp_path / "audit.npz"
    ci.save(path)
    return path, ci, Q



@pytest.mark.parametrize(
    "key, bad, words",
    [
        ("dual", lambda a: a[:50], "dual"),
        ("returns", lambda a: np.hstack([a, a]), "returns"),
        ("V", lambda a: a[:-1], "V"),
        ("gram_factor", lambda a: a[:2, :2], "gram_factor"),
        ("factor", lambda a: a[:2], "factor"),
        ("fitted", lambda a: a[:3], "fitted"),
    ],
)
def test_load_checks_the_shapes_of_what_it_reads(tmp_path, key, bad, words, rewrite_npz):
    path, _, _ = _saved(tmp_path)
    with np.load(path) as f:
        arr = f[key]
    rewrite_npz(path, **{key: bad(arr)})
    with pytest.raises(InputError, match=words) as err:
        CaseInfluence.load(path)
    assert "refit" in str(err.value) or "save it again" in str(err.value)


def test_load_names_a_missing_entry_and_an_unknown_parameter(tmp_path, rewrite_npz):
    path, _, _ = _saved(tmp_path)
    rewrite_npz(path, params=None)
    with pytest.raises(InputError, match="params"):
        CaseInfluence.load(path)
    path, ci, _ = _saved(tmp_path)
    params = json.loads(str(np.load(path)["params"]))
    params["shiny_new_option"] = 3
    rewrite_npz(path, params=np.array(json.dumps(params)))
    with pytest.raises(InputError, match="shiny_new_option") as err:
        CaseInfluence.load(path)
    assert "newer" in str(err.value)


def test_load_round_trip_with_intercept_at_an_extreme_scale(tmp_path):
    Phi, R, Q = _data()
    ci = CaseInfluence(intercept=True).fit(Phi * 1e6, R)
    ci.save(tmp_path / "a.npz")
    back = CaseInfluence.load(tmp_path / "a.npz")
    assert np.array_equal(back.coefficients(Q * 1e6), ci.coefficients(Q * 1e6))
    assert np.array_equal(back.scores(Q * 1e6), ci.scores(Q * 1e6))
    assert np.array_equal(back.intercept_, ci.intercept_)
    assert np.array_equal(back.gram_, ci.gram_)


def test_saving_a_float32_memmap_fit_keeps_float32(tmp_path):
    Phi, R, Q = _data(n=400)
    path = tmp_path / "phi.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=Phi.shape)
    mm[:] = Phi
    mm.flush()
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=Phi.shape)
    ci = CaseInfluence(chunk_size=128).fit(mm, R)
    ci.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as f:
        assert f["Phi"].dtype == np.float32  # no float64 copy of the case memory
    back = CaseInfluence.load(tmp_path / "m.npz")
    assert np.array_equal(back.coefficients(Q), ci.coefficients(Q))


def test_a_rank_deficient_intercept_fit_still_raises():
    Phi, R, _ = _data()
    Phi[:, 0] = 3.0  # a constant unit duplicates the intercept
    with pytest.raises(RankDeficientError, match="rank 5 of 6"):
        CaseInfluence(intercept=True).fit(Phi * 1e6, R)


def test_scores_of_a_query_do_not_depend_on_its_batch():
    """GEMV for one query and GEMM for a batch gave different last bits, so a decision on an
    exact score tie (and explain's score and margin) could change with the batch."""
    rng = np.random.default_rng(7)
    Phi, R = rng.normal(size=(500, 66)), rng.normal(size=(500, 4))
    Q = rng.normal(size=(100, 66))
    for intercept in (False, True):
        ci = CaseInfluence(intercept=intercept).fit(Phi, R)
        batch = ci.scores(Q)
        alone = np.vstack([ci.scores(Q[i : i + 1]) for i in range(len(Q))])
        assert np.array_equal(batch, alone)
        assert np.array_equal(np.vstack([ci.scores(q) for q in Q]), batch)
