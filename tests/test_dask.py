"""CaseInfluence on a dask array chunked by rows, on a real LocalCluster (processes, loopback):
factored by a tall-skinny QR over the chunks, queries mapped over the chunks and top-k lists
merged across them; every result equals the numpy path to 1e-10."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="the [scale] extra (dask) is not installed")
distributed = pytest.importorskip("dask.distributed")

from cbdt import CaseInfluence, InputError  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("intercept,ridge", [(False, 0.0), (True, 0.0), (False, 0.3)])
def test_dask_fit_and_queries_equal_numpy(client, intercept, ridge):
    rng = np.random.default_rng(8)
    Phi = rng.normal(size=(6000, 7)) * rng.uniform(0.5, 2.0, size=7)
    R = rng.normal(size=(6000, 3))
    Q = rng.normal(size=(50, 7))
    X = da.from_array(Phi, chunks=(1100, 7))  # uneven row chunks, one column chunk
    ci = CaseInfluence(intercept=intercept, ridge=ridge).fit(X, R)
    ref = CaseInfluence(intercept=intercept, ridge=ridge).fit(Phi, R)
    assert ci._kind == "dask" and ci._dual is None  # kept as a dask array, not gathered
    np.testing.assert_allclose(ci.readout_, ref.readout_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ci.gram_, ref.gram_, rtol=1e-10)
    np.testing.assert_allclose(ci.coefficients(Q), ref.coefficients(Q), rtol=1e-10, atol=1e-13)
    acts = rng.integers(0, 3, size=50)
    for order in ("abs", "positive", "negative"):
        a, b = ci.top_cases(Q, acts, k=11, order=order), ref.top_cases(Q, acts, k=11, order=order)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_allclose(a.contributions, b.contributions, rtol=1e-10, atol=1e-13)
    ea, eb = ci.explain(Q, k=6), ref.explain(Q, k=6)
    np.testing.assert_allclose(ea.signals.to_numpy(float), eb.signals.to_numpy(float),
                               rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(ea.cases["case_id"], eb.cases["case_id"])
    assert np.allclose(ci.coefficients(Q) @ R, ci.scores(Q), atol=1e-10)  # Prop. 1


def test_dask_non_finite_chunk_is_named(client):
    Phi = np.random.default_rng(0).normal(size=(300, 3))
    Phi[250, 1] = np.nan
    with pytest.raises(InputError, match=r"Phi contains 1 non-finite value\(s\) \(NaN or inf\) in rows 200-299; the first is nan at index \(250, 1\)"):
        CaseInfluence().fit(da.from_array(Phi, chunks=(100, 3)), np.ones(300))


def test_dask_queries_ship_only_their_actions_returns(monkeypatch):
    """Each chunk's task gets the returns of the actions its queries audit, not all |A| rows
    (the graph holds every slice); the indices equal the numpy path's (synchronous
    scheduler, so the tasks run here and can be watched)."""
    import dask

    from cbdt import _ranking

    shipped = []
    scan = _ranking._scan_block

    def spy(block, Y, bias, R_loc, acts, *a, **kw):
        shipped.append(None if R_loc is None else R_loc.shape[0])
        return scan(block, Y, bias, R_loc, acts, *a, **kw)

    monkeypatch.setattr(_ranking, "_scan_block", spy)
    rng = np.random.default_rng(4)
    Phi = rng.normal(size=(3000, 5))
    R = rng.normal(size=(3000, 4))
    Q = rng.normal(size=(40, 5))
    ref = CaseInfluence().fit(Phi, R)
    with dask.config.set(scheduler="synchronous"):
        ci = CaseInfluence().fit(da.from_array(Phi, chunks=(700, 5)), R)
        for acts, rows in ((np.full(40, 1), 1), (rng.choice([0, 3], size=40), 2)):
            shipped.clear()
            got = ci.top_cases(Q, acts, k=9)
            assert shipped == [rows] * 5
            np.testing.assert_array_equal(got.indices, ref.top_cases(Q, acts, k=9).indices)
