"""CBDT support and choice (eq. 1-2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cbdt
from cbdt import Case, GaussianSimilarity, InputError, Memory
from cbdt.decision import InverseDistanceSimilarity, LaplacianSimilarity, decide, support


def test_support_hand_computed_example():
    # three cases on a line, two actions; similarity exp(-d^2 / 2)
    cases = [
        Case([0.0], action=0, result=2.0),
        Case([1.0], action=1, result=1.0, frequency=2),
        Case([3.0], action=0, result=-1.0),
    ]
    mem = Memory.from_cases(cases)
    U = cbdt.support([1.0], mem, GaussianSimilarity(1.0))
    s0, s1, s3 = np.exp(-0.5), 1.0, np.exp(-2.0)
    expect = [s0 * 2.0 + s3 * (-1.0), 2 * s1 * 1.0]
    assert np.allclose(U, expect, rtol=0, atol=1e-15)
    assert cbdt.decide([1.0], mem, GaussianSimilarity(1.0)) == 1
    assert cbdt.decide([-1.0], mem, GaussianSimilarity(1.0)) == 0


def test_vector_outcome_memory_and_vectorisation():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(20, 2))
    Usup = rng.normal(size=(20, 3))
    f = rng.integers(1, 4, size=20).astype(float)
    mem = Memory(P, Usup, f)
    queries = rng.normal(size=(15, 2))
    sim = GaussianSimilarity(0.7)
    U = cbdt.support(queries, mem, sim)
    for j in range(15):
        s = np.exp(-((P - queries[j]) ** 2).sum(1) / (2 * 0.7**2))
        assert np.allclose(U[j], (f * s) @ Usup)
    assert np.array_equal(cbdt.decide(queries, mem, sim), U.argmax(1))


@given(st.integers(0, 1000), st.floats(0.05, 5.0))
def test_similarities_are_nonnegative_and_one_at_zero_distance(seed, bw):
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(6, 3))
    for sim in (GaussianSimilarity(bw), LaplacianSimilarity(bw), InverseDistanceSimilarity(bw)):
        S = sim(P, P)
        assert (S >= 0).all() and (S <= 1 + 1e-12).all()
        assert np.allclose(np.diag(S), 1.0)


def test_frequency_equals_duplication():
    a = Memory.from_cases([Case([0.0, 1.0], 1, 3.0, frequency=3), Case([1.0, 0.0], 0, 1.0)])
    b = Memory.from_cases(
        [Case([0.0, 1.0], 1, 3.0)] * 3 + [Case([1.0, 0.0], 0, 1.0)], n_actions=2
    )
    q = np.array([[0.2, 0.4], [1.0, 1.0]])
    assert np.allclose(cbdt.support(q, a), cbdt.support(q, b))


def test_errors():
    mem = Memory(np.zeros((3, 2)), np.ones((3, 2)))
    with pytest.raises(InputError, match="non-negative"):
        cbdt.support([[0.0, 0.0]], mem, lambda P, Q: -np.ones((len(P), len(Q))))
    with pytest.raises(InputError, match="dimension 3"):
        cbdt.support([[0.0, 0.0, 1.0]], mem)
    with pytest.raises(InputError, match="frequencies n\\(c, M\\) must be >= 0"):
        Memory(np.zeros((2, 1)), np.ones((2, 1)), [1.0, -1.0])
    with pytest.raises(InputError, match="bandwidth must be > 0"):
        GaussianSimilarity(0.0)
    with pytest.raises(InputError, match="n_actions = 2"):
        Memory.from_cases([Case([0.0], 3, 1.0)], n_actions=2)


def test_decide_far_from_every_case_follows_the_nearest_cases():
    mem = Memory([[0.0], [1.0]], [[1.0, 0.0], [0.0, 1.0]])
    far = np.array([[5.0], [-5.0], [40.0]])
    for sim in (GaussianSimilarity(0.1), LaplacianSimilarity(0.001)):
        assert np.all(support(far, mem, sim) == 0.0)  # the true supports underflow
        assert decide(far, mem, sim).tolist() == [1, 0, 1]
        assert decide([5.0], mem, sim) == 1
    # near the cases nothing changes
    near = np.linspace(-0.5, 1.5, 41)[:, None]
    sim = GaussianSimilarity(0.5)
    assert np.array_equal(decide(near, mem, sim), np.argmax(support(near, mem, sim), axis=1))


def test_squared_distances_do_not_cancel_at_large_coordinates():
    from cbdt.decision import kernel_supports

    P = np.array([[1e8, 0.0], [1e8, 5.0]])
    Q = np.array([[1e8 + 1.0, 0.0]])
    s = GaussianSimilarity(1.0)(P, Q)
    np.testing.assert_allclose(s[:, 0], np.exp([-0.5, -13.0]), rtol=1e-12)
    sums, d2 = kernel_supports(P, Q, np.ones(1), [1.0])
    np.testing.assert_allclose(d2, [1.0, 26.0], rtol=1e-12)
    # the shift to the nearest case leaves exp(0) = 1 for each query's nearest case
    np.testing.assert_allclose(sums[0, :, 0], [1.0, 1.0])
    # decisions at large coordinates follow the true distances
    mem = Memory([[1e8], [1e8 + 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    assert decide([[1e8 + 0.9]], mem, GaussianSimilarity(0.3)).tolist() == [1]
