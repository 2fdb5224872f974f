"""Coordinate invariance, ridge metrics and ZCA whitening (Sec. 3.2-3.3, App. B.2-B.3, C.1).

The functions here produce the tables and figures of the chapter *Invariance and whitening*:

* :func:`invariance_vs_condition` -- how much the case-influence coefficients
  :math:`\\alpha(x)` change when the representation is rewritten as :math:`\\varphi_B = B\\varphi`
  with a random invertible ``B`` of prescribed condition number, for OLS (eq. 10, 12, 22),
  isotropic ridge (eq. 11; breaks invariance, App. B.2), ridge with the co-transformed metric
  :math:`BB^\\top` (restores it) and isotropic ridge under an orthogonal ``B`` (keeps it).
* :func:`whitening_check` -- ZCA whitening gives :math:`G_B = nI_H` (eq. 13) and the scaled
  inner-product form of the coefficient (eq. 14) without changing a single coefficient.
* :func:`negative_rate_zca` -- Appendix C.1: the share of negative coefficients is the same
  before and after post-hoc ZCA whitening, seed by seed.

:func:`cbdt.book.claims.ch03_invariance.chapter_claims` puts these results beside the paper's
statements (the rows of the chapter's section of the reproducibility page).

The representation used throughout is :func:`make_tanh_problem`: a synthetic CBDT-style decision
problem (inputs in :math:`[-1, 1]^d`, one Gaussian "prototype" per action) seen through a *fixed
random two-layer tanh network* (an untrained network at a standard initialisation). It is not
trained; the algebra checked here (eq. 12-14, 22) holds for every full-rank representation, and a
random tanh map already has the correlated, non-isotropic Gram matrix of a real hidden layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cbdt.geometry import cotransformed_metric, reparameterize, zca_whitening
from cbdt.influence import CaseInfluence

__all__ = [
    "TanhProblem",
    "make_tanh_problem",
    "random_condition_matrix",
    "ridge_scale",
    "max_relative_change",
    "coefficient_changes",
    "format_changes",
    "invariance_report",
    "invariance_vs_condition",
    "whitening_check",
    "negative_rate",
    "zca_sign_comparison",
    "negative_rate_zca",
]


# ---------------------------------------------------------------------------------------------
# The synthetic representation
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TanhProblem:
    """A synthetic decision problem seen through a fixed two-layer tanh representation.

    Attributes
    ----------
    X : ndarray of shape (n, d)
        Training inputs :math:`x_i`.
    Phi : ndarray of shape (n, H)
        Training representations :math:`\\varphi(x_i)` (eq. 4).
    R : ndarray of shape (n, |A|)
        Action-conditional returns :math:`r_i(a)` (eq. 5).
    X_query : ndarray of shape (m, d)
        Query inputs.
    Phi_query : ndarray of shape (m, H)
        Query representations :math:`\\varphi(x)`.
    prototypes : ndarray of shape (|A|, d)
        Centre of the return bump of each action.
    """

    X: np.ndarray
    Phi: np.ndarray
    R: np.ndarray
    X_query: np.ndarray
    Phi_query: np.ndarray
    prototypes: np.ndarray
    bandwidth: float
    _weights: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = field(repr=False)

    def represent(self, X: Any) -> np.ndarray:
        """The representation :math:`\\varphi(x) = \\tanh(W_2^\\top\\tanh(W_1^\\top x + b_1) + b_2)`.

        Parameters
        ----------
        X : array-like of shape (m, d)

        Returns
        -------
        ndarray of shape (m, H)
        """
        return _tanh_map(self._weights, X)

    def expected_returns(self, X: Any) -> np.ndarray:
        """Noise-free returns :math:`\\exp(-\\|x - c_a\\|^2 / (2h^2))`, shape (m, |A|)."""
        return _bump_returns(X, self.prototypes, self.bandwidth)


def make_tanh_problem(
    seed: int,
    n: int = 400,
    n_queries: int = 100,
    H: int = 8,
    d: int = 2,
    width: int = 32,
    n_actions: int = 3,
    bandwidth: float = 0.6,
    noise: float = 0.05,
) -> TanhProblem:
    """Draw a synthetic problem and a random two-layer tanh representation (seeded).

    Inputs are uniform on :math:`[-1, 1]^d`; action ``a`` has a Gaussian return bump
    :math:`r(a) = \\exp(-\\|x - c_a\\|^2/(2h^2)) + \\sigma\\varepsilon` around a prototype
    :math:`c_a` (prototypes evenly spaced on the circle of radius 0.6 in the first two input
    coordinates). The representation is a fixed random network
    :math:`\\varphi(x) = \\tanh(W_2^\\top \\tanh(W_1^\\top x + b_1) + b_2)` with
    :math:`W_1 \\sim N(0, 4/d)`, :math:`W_2 \\sim N(0, 2.25/\\text{width})`, biases
    :math:`N(0, 0.25)`: the scales put the tanh units in their non-linear range, so the units are
    correlated and the Gram matrix is far from isotropic (condition number around :math:`10^3`
    for the defaults), as for a hidden layer of a trained network.

    Parameters
    ----------
    seed : int
        Seed of :func:`numpy.random.default_rng`; everything is a deterministic function of it.
    n, n_queries : int
        Training cases and query points.
    H : int
        Representation width.
    d : int
        Input dimension (``d >= 2``).
    width : int
        Hidden width of the first tanh layer.
    n_actions : int
        Number of actions :math:`|A|`.
    bandwidth, noise : float
        Bump width :math:`h` and return noise :math:`\\sigma`.

    Returns
    -------
    TanhProblem
    """
    if d < 2:
        raise ValueError(f"d must be >= 2, got {d}.")
    rng = np.random.default_rng(seed)
    angles = 2 * np.pi * (np.arange(n_actions) / n_actions + 0.125)
    protos = np.zeros((n_actions, d))
    protos[:, 0] = 0.6 * np.cos(angles)
    protos[:, 1] = 0.6 * np.sin(angles)
    W1 = rng.normal(0.0, 2.0 / np.sqrt(d), size=(d, width))
    b1 = rng.normal(0.0, 0.5, size=width)
    W2 = rng.normal(0.0, 1.5 / np.sqrt(width), size=(width, H))
    b2 = rng.normal(0.0, 0.5, size=H)
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    Xq = rng.uniform(-1.0, 1.0, size=(n_queries, d))
    eps = rng.normal(0.0, 1.0, size=(n, n_actions))
    weights = (W1, b1, W2, b2)
    R = _bump_returns(X, protos, bandwidth) + noise * eps
    return TanhProblem(
        X=X,
        Phi=_tanh_map(weights, X),
        R=R,
        X_query=Xq,
        Phi_query=_tanh_map(weights, Xq),
        prototypes=protos,
        bandwidth=float(bandwidth),
        _weights=weights,
    )


def _tanh_map(weights: tuple[np.ndarray, ...], X: Any) -> np.ndarray:
    W1, b1, W2, b2 = weights
    return np.tanh(np.tanh(np.asarray(X, dtype=float) @ W1 + b1) @ W2 + b2)


def _bump_returns(X: Any, prototypes: np.ndarray, bandwidth: float) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    d2 = ((X[:, None, :] - prototypes[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-d2 / (2.0 * bandwidth**2))


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------
def random_condition_matrix(H: int, cond: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random invertible ``B`` with condition number ``cond``, and its orthogonal factor.

    :math:`B = U\\,\\mathrm{diag}(s)\\,V^\\top` with ``U``, ``V`` Haar-random orthogonal
    (``scipy.stats.ortho_group`` with a seeded generator) and singular values ``s``
    log-spaced from :math:`\\sqrt{\\kappa}` down to :math:`1/\\sqrt{\\kappa}`, so that
    :math:`\\kappa(B) = s_1/s_H = \\kappa` and :math:`|\\det B| = 1` (``B`` distorts shapes but
    keeps volume). The orthogonal factor is :math:`UV^\\top` (the same ``B`` with all singular
    values set to 1); for ``cond = 1`` the two coincide.

    Parameters
    ----------
    H : int
        Size of ``B``.
    cond : float
        Prescribed condition number :math:`\\kappa \\ge 1`.
    seed : int

    Returns
    -------
    B : ndarray of shape (H, H)
    B_orth : ndarray of shape (H, H)
        :math:`UV^\\top`.
    """
    if cond < 1:
        raise ValueError(f"cond must be >= 1, got {cond}.")
    rng = np.random.default_rng(seed)
    if H == 1:
        U = V = np.ones((1, 1))
    else:
        U = stats.ortho_group.rvs(H, random_state=rng)
        V = stats.ortho_group.rvs(H, random_state=rng)
    s = np.logspace(0.5 * np.log10(cond), -0.5 * np.log10(cond), H)
    return (U * s) @ V.T, U @ V.T


def ridge_scale(Phi: Any) -> float:
    """The natural scale of a ridge strength, :math:`\\mathrm{tr}(G)/H` (the mean eigenvalue).

    A ridge :math:`\\lambda = c\\,\\mathrm{tr}(G)/H` shrinks the readout comparably for
    representations of different size and scale; ``c`` is the *relative* ridge strength.
    """
    P = np.asarray(Phi, dtype=float)
    return float(np.einsum("ij,ij->", P, P) / P.shape[1])


def max_relative_change(alpha: Any, alpha_ref: Any) -> float:
    """:math:`\\max_{x,i} |\\alpha_i(x) - \\alpha^{\\mathrm{ref}}_i(x)| / \\max_{x,i}|\\alpha^{\\mathrm{ref}}_i(x)|`.

    The largest change of any coefficient, relative to the largest reference coefficient.
    """
    a = np.asarray(alpha, dtype=float)
    r = np.asarray(alpha_ref, dtype=float)
    return float(np.abs(a - r).max() / np.abs(r).max())


def coefficient_changes(
    Phi: Any, R: Any, queries: Any, B: Any, lam: float, B_orth: Any = None
) -> dict[str, float]:
    """Relative coefficient change caused by the reparameterisation :math:`\\varphi \\mapsto B\\varphi`.

    Every estimator is fitted twice, on ``Phi`` and on :math:`\\Phi_B = \\Phi B^\\top`, and the
    coefficients of the same queries (:math:`\\varphi(x)` and :math:`B\\varphi(x)`) are compared
    with :func:`max_relative_change`:

    ``ols``
        :math:`\\lambda = 0` (eq. 10). Invariant (eq. 12, 22): the change is rounding error.
    ``ridge_isotropic``
        :math:`\\lambda I_H` in both coordinates (eq. 11). Not invariant for non-orthogonal
        ``B``: :math:`BGB^\\top + \\lambda I \\ne B(G + \\lambda I)B^\\top` (App. B.2).
    ``ridge_cotransformed``
        :math:`\\lambda I_H` in the original, :math:`\\lambda BB^\\top` in the new coordinates
        (:func:`cbdt.cotransformed_metric`). Invariant again.
    ``ridge_orthogonal``
        Isotropic ridge under the orthogonal ``B_orth`` (only when given). Invariant, because
        :math:`QQ^\\top = I`.

    Parameters
    ----------
    Phi : array-like of shape (n, H)
    R : array-like of shape (n, |A|)
    queries : array-like of shape (m, H)
    B : array-like of shape (H, H)
        Invertible change of basis.
    lam : float
        Ridge strength :math:`\\lambda > 0` (absolute, see :func:`ridge_scale`).
    B_orth : array-like of shape (H, H), optional
        An orthogonal change of basis.

    Returns
    -------
    dict of str to float
    """
    Phi = np.asarray(Phi, dtype=float)
    queries = np.asarray(queries, dtype=float)
    Phi_B = reparameterize(Phi, B)
    q_B = reparameterize(queries, B)

    def alpha(P: np.ndarray, q: np.ndarray, **kw: Any) -> np.ndarray:
        return CaseInfluence(**kw).fit(P, R).coefficients(q)

    a_ols = alpha(Phi, queries)
    a_ridge = alpha(Phi, queries, ridge=lam)
    out = {
        "ols": max_relative_change(alpha(Phi_B, q_B), a_ols),
        "ridge_isotropic": max_relative_change(alpha(Phi_B, q_B, ridge=lam), a_ridge),
        "ridge_cotransformed": max_relative_change(
            alpha(Phi_B, q_B, ridge=lam, ridge_metric=cotransformed_metric(B)), a_ridge
        ),
    }
    if B_orth is not None:
        out["ridge_orthogonal"] = max_relative_change(
            alpha(reparameterize(Phi, B_orth), reparameterize(queries, B_orth), ridge=lam),
            a_ridge,
        )
    return out


def format_changes(changes: dict[str, float], tol: float = 1e-10) -> str:
    """Machine-independent text for :func:`coefficient_changes`.

    Changes below ``tol`` are rounding error whose digits depend on the BLAS, so they are shown
    as ``< tol: True``; larger ones with 4 significant digits.
    """
    names = {
        "ols": "OLS (lambda = 0)",
        "ridge_isotropic": "isotropic ridge",
        "ridge_cotransformed": "co-transformed ridge",
        "ridge_orthogonal": "isotropic ridge, orthogonal B",
    }
    lines = []
    for key, val in changes.items():
        shown = f"< {tol:.0e}: True" if val < tol else f"{val:.4g}"
        lines.append(f"{names.get(key, key):<30s} max relative change {shown}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Experiments
# ---------------------------------------------------------------------------------------------
def invariance_vs_condition(
    Phi: Any, R: Any, queries: Any, conds: Any, lam: float, seed: int = 0
) -> pd.DataFrame:
    """Coefficient change under random ``B`` of growing condition number (Sec. 3.2, App. B.2).

    For each :math:`\\kappa` in ``conds`` a ``B`` is drawn by :func:`random_condition_matrix`
    (seed ``seed``, the same ``U``, ``V`` for every :math:`\\kappa`) and
    :func:`coefficient_changes` is evaluated.

    Parameters
    ----------
    Phi : array-like of shape (n, H)
    R : array-like of shape (n, |A|)
    queries : array-like of shape (m, H)
    conds : sequence of float
        Condition numbers :math:`\\kappa(B) \\ge 1`.
    lam : float
        Absolute ridge strength (e.g. ``1e-2 * ridge_scale(Phi)``).
    seed : int, default=0

    Returns
    -------
    pandas.DataFrame
        One row per condition number: ``cond``, ``ols``, ``ridge_isotropic``,
        ``ridge_cotransformed``, ``ridge_orthogonal`` (max relative coefficient changes).
    """
    H = np.asarray(Phi).shape[1]
    rows = []
    for c in np.asarray(conds, dtype=float):
        B, B_orth = random_condition_matrix(H, float(c), seed)
        rows.append({"cond": float(c), **coefficient_changes(Phi, R, queries, B, lam, B_orth)})
    return pd.DataFrame(rows)


def whitening_check(Phi: Any, R: Any, queries: Any) -> dict[str, float]:
    """ZCA whitening: :math:`G_B = nI_H` (eq. 13), the inner-product form (eq. 14), invariance.

    Parameters
    ----------
    Phi : array-like of shape (n, H)
    R : array-like of shape (n, |A|)
    queries : array-like of shape (m, H)

    Returns
    -------
    dict
        ``cond_G`` and ``cond_G_white`` (condition numbers of the Gram matrix before and after),
        ``gram_error`` (:math:`\\max|G_B/n - I|`), ``inner_product_error`` (max relative gap
        between the library coefficient in whitened coordinates and
        :math:`\\varphi_B(x)^\\top\\varphi_B(x_i)/n`), ``coefficient_change`` (max relative
        gap between whitened and original coefficients, eq. 12) and ``score_change``.
    """
    Phi = np.asarray(Phi, dtype=float)
    n = Phi.shape[0]
    B, Phi_w = zca_whitening(Phi)
    q_w = reparameterize(queries, B)
    ci = CaseInfluence().fit(Phi, R)
    ci_w = CaseInfluence().fit(Phi_w, R)
    a = ci.coefficients(queries)
    a_w = ci_w.coefficients(q_w)
    a_ip = q_w @ Phi_w.T / n
    G_w = Phi_w.T @ Phi_w
    return {
        "cond_G": float(np.linalg.cond(Phi.T @ Phi)),
        "cond_G_white": float(np.linalg.cond(G_w)),
        "gram_error": float(np.abs(G_w / n - np.eye(Phi.shape[1])).max()),
        "inner_product_error": max_relative_change(a_w, a_ip),
        "coefficient_change": max_relative_change(a_w, a),
        "score_change": max_relative_change(ci_w.scores(q_w), ci.scores(queries)),
    }


def negative_rate(alpha: Any) -> float:
    """Share of negative coefficients, :math:`\\#\\{(x, i): \\alpha_i(x) < 0\\} / (mn)`."""
    a = np.asarray(alpha, dtype=float)
    return float((a < 0).sum() / a.size)


def zca_sign_comparison(
    Phi: Any, R: Any, queries: Any, rel_threshold: float = 1e-9
) -> dict[str, float]:
    """Signs of the coefficients before and after post-hoc ZCA whitening (App. C.1).

    Whitening is an invertible reparameterisation, so the coefficients are equal in exact
    arithmetic (eq. 12) and differ only by rounding (about :math:`10^{-13}` relative). A
    coefficient whose magnitude is itself at rounding level could therefore flip sign and change
    the negative rate by one count. This function reports that possibility honestly: it counts
    all sign disagreements, and separately those among *clearly non-zero* coefficients,
    :math:`|\\alpha_i(x)| > \\text{rel\\_threshold}\\cdot\\max|\\alpha|`, where a flip would
    contradict the invariance.

    Returns
    -------
    dict
        ``rate_before``, ``rate_after``, ``rate_diff`` (after minus before), ``n_coefficients``,
        ``n_negative_before``, ``n_negative_after``, ``sign_flips`` (all),
        ``sign_flips_clear`` (among clearly non-zero), ``n_near_zero`` (coefficients at or below
        the threshold), ``max_rel_change`` (:func:`max_relative_change`).
    """
    Phi = np.asarray(Phi, dtype=float)
    B, Phi_w = zca_whitening(Phi)
    a = CaseInfluence().fit(Phi, R).coefficients(queries)
    a_w = CaseInfluence().fit(Phi_w, R).coefficients(reparameterize(queries, B))
    flips = (a < 0) != (a_w < 0)
    clear = np.abs(a) > rel_threshold * np.abs(a).max()
    before, after = negative_rate(a), negative_rate(a_w)
    return {
        "rate_before": before,
        "rate_after": after,
        "rate_diff": after - before,
        "n_coefficients": int(a.size),
        "n_negative_before": int((a < 0).sum()),
        "n_negative_after": int((a_w < 0).sum()),
        "sign_flips": int(flips.sum()),
        "sign_flips_clear": int((flips & clear).sum()),
        "n_near_zero": int((~clear).sum()),
        "max_rel_change": max_relative_change(a_w, a),
    }


def negative_rate_zca(
    seeds: Any = (0, 1, 2, 3, 4), rel_threshold: float = 1e-9, **problem_kwargs: Any
) -> pd.DataFrame:
    """Appendix C.1: negative-coefficient rate before and after post-hoc ZCA, per seed.

    For each seed a representation is drawn with :func:`make_tanh_problem` (``problem_kwargs``
    are passed on; defaults ``n = 400`` training cases, ``n_queries = 100``, ``H = 8``) and
    :func:`zca_sign_comparison` is applied to all ``n_queries x n`` coefficients.

    Parameters
    ----------
    seeds : sequence of int
    rel_threshold : float, default=1e-9
        See :func:`zca_sign_comparison`.
    **problem_kwargs
        Passed to :func:`make_tanh_problem`.

    Returns
    -------
    pandas.DataFrame
        One row per seed with the columns of :func:`zca_sign_comparison` and ``seed``.
    """
    rows = []
    for s in seeds:
        prob = make_tanh_problem(int(s), **problem_kwargs)
        row = zca_sign_comparison(prob.Phi, prob.R, prob.Phi_query, rel_threshold)
        rows.append({"seed": int(s), **row})
    return pd.DataFrame(rows)


def invariance_report(
    Phi: Any,
    R: Any,
    queries: Any,
    cond: float,
    lam_rel: float,
    seed: int = 0,
    tol: float = 1e-6,
) -> str:
    """Text shown by the chapter's explorer widget for one ``(cond, lam_rel)`` position.

    Draws ``B`` with :func:`random_condition_matrix` (``cond``, ``seed``), sets
    :math:`\\lambda = \\text{lam\\_rel}\\cdot\\mathrm{tr}(G)/H` (:func:`ridge_scale`) and formats
    :func:`coefficient_changes` with :func:`format_changes` (changes below ``tol`` are rounding
    error and shown as a bound: for :math:`\\kappa(B) \\le 10^4` they stay below
    :math:`10^{-7}`).

    Returns
    -------
    str
    """
    Phi = np.asarray(Phi, dtype=float)
    B, B_orth = random_condition_matrix(Phi.shape[1], float(cond), seed)
    lam = float(lam_rel) * ridge_scale(Phi)
    changes = coefficient_changes(Phi, R, queries, B, lam, B_orth)
    head = f"cond(B) = {cond:.4g}, lambda = {lam_rel:.4g} x tr(G)/H = {lam:.4g}"
    return head + "\n" + format_changes(changes, tol)


# ---------------------------------------------------------------------------------------------
# The paper beside the book
# ---------------------------------------------------------------------------------------------
