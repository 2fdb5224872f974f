"""The synthetic CBDT generator of Sec. 5.2: a known case-based decision maker.

A CBDT decision maker (eq. 1-2) with an explicit memory ``M`` of remembered cases and a
Gaussian similarity ``s`` defines, for every problem ``x``, the true supports
:math:`U(a \\mid M, x)` and the CBDT-optimal action :math:`a^*(x)`. Training problems
:math:`x_i` are drawn uniformly from the problem space and carry the noisy action returns

.. math:: r_i(a) = U(a \\mid M, x_i) + \\varepsilon_{i,a}, \\qquad
          \\varepsilon_{i,a} \\sim \\mathcal N(0, \\sigma^2) \\text{ i.i.d.},

which is what a network sees. Test problems keep their true supports and optimal actions, so
that recovery (Fig. 1) and attribution quality (Table 1) can be measured against ground
truth.

The paper fixes only the sizes (20 memory cases, 2-D problems, 3 actions, Gaussian
similarity, 500 training and 200 test problems). The remaining choices, made before looking
at any result and never tuned towards the paper's numbers:

* **Problem space** :math:`[-1, 1]^2`; training, test and memory problems are uniform on it.
* **Memory layout.** The 20 memory problems are uniform on the square. They are classical
  CBDT cases :math:`(p_c, a_c, r_c)` (Gilboa & Schmeidler): each supports only the action
  it took, :math:`u(r_c, a) = r_c\\,\\mathbf 1\\{a = a_c\\}`
  (:meth:`cbdt.decision.Memory.from_cases`). Actions are balanced (7, 7, 6 cases, in random
  order) and the results :math:`r_c \\sim \\mathrm{Uniform}(0.5, 1.5)` are positive, so every
  case *supports* its action with a strength that varies from case to case.
* **Bandwidth** :math:`h = \\sqrt{\\text{area}/N} = \\sqrt{4/20} \\approx 0.447`, the typical
  spacing between memory cases: each problem is similar to a handful of cases, so decision
  regions are neither the Voronoi cells of single cases (:math:`h \\to 0`) nor one global
  majority (:math:`h \\to \\infty`).
* **Noise** :math:`\\sigma = 0.1\\,\\mathrm{sd}(U)`, a tenth of the standard deviation of the
  true supports over the training problems (pooled over actions; signal-to-noise ratio 10,
  i.e. the returns explain about 99% of their variance by the supports). Returns are then
  informative but not exact, so the training returns' case-optimal actions
  :math:`\\arg\\max_a r_i(a)` disagree with the true ones near decision boundaries, as
  observed outcomes would.

Every draw comes from ``numpy.random.default_rng(seed)``: a seed fixes the memory, the
problems and the noise.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..decision import GaussianSimilarity, Memory, decide, support
from ..exceptions import InputError

__all__ = ["SyntheticCBDT", "make_synthetic_cbdt", "default_bandwidth"]


def default_bandwidth(n_memory: int = 20, low: float = -1.0, high: float = 1.0) -> float:
    """Typical spacing :math:`\\sqrt{\\text{area}/N}` of ``n_memory`` cases on the square."""
    return float(np.sqrt((high - low) ** 2 / n_memory))


@dataclass(frozen=True)
class SyntheticCBDT:
    """One draw of the synthetic CBDT task (Sec. 5.2).

    Attributes
    ----------
    X_train : ndarray of shape (n_train, 2)
        Training problems :math:`x_i`.
    R_train : ndarray of shape (n_train, |A|)
        Observed returns :math:`r_i(a) = U(a \\mid M, x_i) + \\varepsilon_{i,a}`.
    U_train : ndarray of shape (n_train, |A|)
        True CBDT supports :math:`U(a \\mid M, x_i)` (eq. 1) of the training problems.
    a_train : ndarray of int of shape (n_train,)
        CBDT-optimal actions :math:`a^*(x_i)` (eq. 2) of the training problems.
    X_test, U_test, a_test
        The same for the test problems (test returns are never needed).
    memory : cbdt.decision.Memory
        The generating memory (20 classical cases).
    similarity : cbdt.decision.GaussianSimilarity
        The generating similarity :math:`s(p, q) = \\exp(-\\lVert p-q\\rVert^2 / 2h^2)`.
    noise_sd : float
        :math:`\\sigma` of the return noise.
    seed : int
    low, high : float
        The problem space is :math:`[\\text{low}, \\text{high}]^2`.
    """

    X_train: np.ndarray
    R_train: np.ndarray
    U_train: np.ndarray
    a_train: np.ndarray
    X_test: np.ndarray
    U_test: np.ndarray
    a_test: np.ndarray
    memory: Memory
    similarity: GaussianSimilarity
    noise_sd: float
    seed: int
    low: float
    high: float

    @property
    def n_actions(self) -> int:
        return self.memory.n_actions

    @property
    def case_actions(self) -> np.ndarray:
        """Case-optimal actions :math:`a_i^* = \\arg\\max_a r_i(a)` of the observed returns."""
        return np.argmax(self.R_train, axis=1)

    def true_similarity(self, P: np.ndarray, Q: np.ndarray | None = None) -> np.ndarray:
        """Generator similarity :math:`s(p, q)`, shape (m, N); ``Q`` defaults to ``X_train``."""
        Q = self.X_train if Q is None else np.asarray(Q, dtype=float)
        return self.similarity(np.atleast_2d(np.asarray(P, dtype=float)), Q)

    def support(self, P: np.ndarray) -> np.ndarray:
        """True supports :math:`U(a \\mid M, p)` of arbitrary problems, shape (m, |A|)."""
        return support(np.atleast_2d(np.asarray(P, dtype=float)), self.memory, self.similarity)

    def decide(self, P: np.ndarray) -> np.ndarray:
        """CBDT-optimal actions :math:`a^*(M, p)` of arbitrary problems, shape (m,)."""
        return decide(np.atleast_2d(np.asarray(P, dtype=float)), self.memory, self.similarity)


def _count(name: str, value: object, minimum: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def make_synthetic_cbdt(
    seed: int = 0,
    *,
    n_train: int = 500,
    n_test: int = 200,
    n_memory: int = 20,
    n_actions: int = 3,
    bandwidth: float | None = None,
    noise: float = 0.1,
    low: float = -1.0,
    high: float = 1.0,
) -> SyntheticCBDT:
    """Draw the synthetic CBDT task of Sec. 5.2 (see the module docstring for the choices).

    Parameters
    ----------
    seed : int, default=0
        Seed of ``numpy.random.default_rng``; fixes memory, problems and noise.
    n_train, n_test : int, default=500, 200
    n_memory : int, default=20
        Cases in the generating memory (at least ``n_actions``).
    n_actions : int, default=3
    bandwidth : float, optional
        Gaussian bandwidth ``h``; default :func:`default_bandwidth` (:math:`\\approx 0.447`).
    noise : float, default=0.1
        Noise standard deviation relative to the standard deviation of the true training
        supports: :math:`\\sigma = \\text{noise}\\cdot\\mathrm{sd}(U)`. ``0`` gives noiseless
        returns.
    low, high : float, default=-1, 1
        The problem space :math:`[\\text{low}, \\text{high}]^2`.

    Returns
    -------
    SyntheticCBDT
    """
    seed = _count("seed", seed, 0)
    n_train = _count("n_train", n_train, 2)
    n_test = _count("n_test", n_test, 1)
    n_actions = _count("n_actions", n_actions, 1)
    n_memory = _count("n_memory", n_memory, n_actions)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise InputError(f"need finite low < high, got low={low!r}, high={high!r}.")
    if not isinstance(noise, numbers.Real) or not np.isfinite(noise) or noise < 0:
        raise InputError(f"noise must be a finite number >= 0, got {noise!r}.")
    h = default_bandwidth(n_memory, low, high) if bandwidth is None else bandwidth
    similarity = GaussianSimilarity(h)

    rng = np.random.default_rng(seed)
    P = rng.uniform(low, high, size=(n_memory, 2))
    acts = rng.permutation(np.arange(n_memory) % n_actions)
    results = rng.uniform(0.5, 1.5, size=n_memory)
    U_mem = np.zeros((n_memory, n_actions))
    U_mem[np.arange(n_memory), acts] = results
    memory = Memory(P, U_mem)

    X_train = rng.uniform(low, high, size=(n_train, 2))
    X_test = rng.uniform(low, high, size=(n_test, 2))
    U_train = support(X_train, memory, similarity)
    U_test = support(X_test, memory, similarity)
    noise_sd = float(noise * U_train.std())
    R_train = U_train + noise_sd * rng.standard_normal(U_train.shape)
    return SyntheticCBDT(
        X_train=X_train,
        R_train=R_train,
        U_train=U_train,
        a_train=decide(X_train, memory, similarity),
        X_test=X_test,
        U_test=U_test,
        a_test=decide(X_test, memory, similarity),
        memory=memory,
        similarity=similarity,
        noise_sd=noise_sd,
        seed=seed,
        low=float(low),
        high=float(high),
    )
