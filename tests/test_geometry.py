"""Reparameterisation, ZCA whitening and the co-transformed metric (eq. 12-14, B.2-B.3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cbdt
from cbdt import InputError, RankDeficientError


@given(st.integers(0, 10_000), st.integers(1, 9))
def test_zca_whitening_is_symmetric_and_whitens(seed, H):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(5 * H + 10, H)) @ rng.normal(size=(H, H))
    if np.linalg.cond(Phi) > 1e6:
        Phi += rng.normal(size=Phi.shape)
    B, W = cbdt.zca_whitening(Phi)
    n = Phi.shape[0]
    assert np.allclose(B, B.T)
    assert np.all(np.linalg.eigvalsh(B) > 0)  # ZCA: the symmetric positive square root
    assert np.allclose(W, Phi @ B.T, rtol=1e-7, atol=1e-7 * np.abs(W).max())
    assert np.allclose(W.T @ W / n, np.eye(H), atol=1e-8)


@given(st.integers(0, 10_000))
def test_gram_transforms_as_BGBt(seed):
    rng = np.random.default_rng(seed)
    Phi, B = rng.normal(size=(20, 4)), rng.normal(size=(4, 4)) + 3 * np.eye(4)
    PB = cbdt.reparameterize(Phi, B)
    assert np.allclose(PB.T @ PB, B @ Phi.T @ Phi @ B.T)
    assert np.allclose(cbdt.reparameterize(Phi[0], B), B @ Phi[0])


def test_cotransformed_metric_general_metric():
    rng = np.random.default_rng(1)
    H = 4
    Phi, R, Q = rng.normal(size=(40, H)), rng.normal(size=(40, 2)), rng.normal(size=(3, H))
    M = np.diag([1.0, 2.0, 0.5, 4.0])
    B = rng.normal(size=(H, H)) + 2 * np.eye(H)
    a0 = cbdt.CaseInfluence(ridge=3.0, ridge_metric=M).fit(Phi, R).coefficients(Q)
    MB = cbdt.cotransformed_metric(B, M)
    assert np.allclose(MB, B @ M @ B.T)
    aB = (
        cbdt.CaseInfluence(ridge=3.0, ridge_metric=MB)
        .fit(cbdt.reparameterize(Phi, B), R)
        .coefficients(cbdt.reparameterize(Q, B))
    )
    assert np.allclose(aB, a0, rtol=1e-9, atol=1e-12)


def test_errors():
    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(10, 3))
    with pytest.raises(InputError, match="invertible"):
        cbdt.reparameterize(Phi, np.ones((3, 3)))
    with pytest.raises(InputError, match="width H = 3"):
        cbdt.reparameterize(Phi, np.eye(4))
    with pytest.raises(InputError, match="square"):
        cbdt.cotransformed_metric(np.ones((2, 3)))
    with pytest.raises(RankDeficientError, match="rank 2 of 3"):
        cbdt.zca_whitening(np.hstack([Phi[:, :2], Phi[:, :1]]))
