"""Case ids: the caller's labels of the training cases reach every result that names cases."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import cbdt
from cbdt import InputError
from cbdt import torch as ct
from cbdt.plotting import plot_top_cases


@pytest.fixture
def memory():
    rng = np.random.default_rng(3)
    n, H, A = 60, 4, 3
    Phi = rng.normal(size=(n, H))
    R = rng.normal(size=(n, A))
    ids = pd.Index([f"loan-{1000 + 7 * i}" for i in range(n)], name="loan")
    return Phi, R, ids, rng.normal(size=(5, H))


def test_dataframe_index_becomes_case_ids(memory):
    Phi, R, ids, Q = memory
    frame = pd.DataFrame(Phi, index=ids)
    ci = cbdt.CaseInfluence().fit(frame, R)
    assert list(ci.case_ids_) == list(ids)
    top = ci.top_cases(Q, 1, k=4)
    idx, vals = top  # still unpacks as a pair
    np.testing.assert_array_equal(top.case_ids, np.asarray(ids)[idx])
    psi = ci.contributions(Q, 1)
    np.testing.assert_allclose(vals, np.take_along_axis(psi, idx, axis=1), rtol=0, atol=1e-12)
    ex = ci.explain(Q, k=4)
    np.testing.assert_array_equal(ex.cases["case_id"].to_numpy().reshape(5, 4)[:, 0],
                                  np.asarray(ids)[ci.top_cases(Q, ex.signals["action"], k=4)[0][:, 0]])
    frame_top = top.to_frame()
    assert list(frame_top.columns) == ["query", "rank", "action", "position", "case_id", "psi"]
    assert frame_top["case_id"].iloc[0] == ids[idx[0, 0]]


def test_default_range_index_and_arrays_mean_positions(memory):
    Phi, R, _, Q = memory
    for fitted in (cbdt.CaseInfluence().fit(pd.DataFrame(Phi), R),
                   cbdt.CaseInfluence().fit(Phi, R)):
        assert fitted.case_ids_ is None
        top = fitted.top_cases(Q[0], 0, k=3)
        np.testing.assert_array_equal(top.case_ids, top.indices)


def test_explicit_ids_win_and_bad_ids_are_refused(memory):
    Phi, R, ids, Q = memory
    ci = cbdt.CaseInfluence().fit(pd.DataFrame(Phi, index=ids), R, case_ids=np.arange(60) * 10)
    assert ci.top_cases(Q[0], 0, k=2).case_ids.tolist() == (
        ci.top_cases(Q[0], 0, k=2).indices * 10).tolist()
    with pytest.raises(InputError, match="one label per row of Phi"):
        cbdt.CaseInfluence().fit(Phi, R, case_ids=ids[:-1])
    # explain's own case_ids override the fitted ones for that call only
    ex = ci.explain(Q, k=2, case_ids=ids)
    assert ex.cases["case_id"].str.startswith("loan-").all()


def test_case_ids_survive_save_and_load(memory, tmp_path):
    Phi, R, ids, Q = memory
    ci = cbdt.CaseInfluence().fit(Phi, R, case_ids=ids)
    ci.save(tmp_path / "m.npz")
    back = cbdt.CaseInfluence.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.top_cases(Q, 2, k=3).case_ids,
                                  ci.top_cases(Q, 2, k=3).case_ids)
    mixed_ids = np.array([i if i % 2 else f"a{i}" for i in range(60)], dtype=object)  # unique
    mixed = cbdt.CaseInfluence().fit(Phi, R, case_ids=mixed_ids)
    with pytest.raises(InputError, match="without pickle"):
        mixed.save(tmp_path / "x.npz")


def test_nystrom_and_torch_carry_case_ids(memory):
    Phi, R, ids, Q = memory
    ny = cbdt.NystromCaseInfluence(3, random_state=0).fit(pd.DataFrame(Phi, index=ids), R)
    top = ny.top_cases(Q, 0, k=3)
    np.testing.assert_array_equal(top.case_ids, np.asarray(ids)[top.indices])
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
    model = nn.Sequential(body, nn.Linear(6, 3))
    ci = ct.from_torch(model, body, pd.DataFrame(Phi, index=ids).to_numpy(), R,
                       head=model[1], case_ids=ids)
    phi = ct.features(model, body, Q)
    t = ci.top_cases(phi, 1, k=2)
    np.testing.assert_array_equal(t.case_ids, np.asarray(ids)[t.indices])


def test_top_cases_plot_adds_up_to_the_score(memory):
    Phi, R, ids, Q = memory
    ci = cbdt.CaseInfluence().fit(Phi, R, case_ids=ids)
    ex = ci.explain(Q, k=5)
    fig = plot_top_cases(ex, query=2)
    ax = fig.axes[0]
    widths = [p.get_width() for p in ax.patches]
    assert len(widths) == 6  # k cases + the rest, whatever n
    score = ex.signals.loc[2, "score"]
    assert np.sum(widths) == pytest.approx(score, abs=1e-10)
    assert np.isclose(score, ci.scores(Q[2])[ex.signals.loc[2, "action"]], atol=1e-10)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    top_id = ex.cases.query("query == 2 and rank == 1")["case_id"].item()
    assert labels[0].startswith(top_id) and labels[-1] == "all other cases"
    assert ex.plot(1).axes[0].get_title().startswith("Query 1")
    with pytest.raises(ValueError, match="not in this explanation"):
        plot_top_cases(ex, query=9)
    matplotlib.pyplot.close("all")
