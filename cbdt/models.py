"""A neural decision model: representation :math:`\\varphi(x)` + linear head (Sec. 2.2, 5).

:class:`CaseNetwork` is a small multilayer perceptron. Its last hidden layer is the
representation :math:`\\varphi(x)\\in\\mathbb{R}^H` and a linear head with one output per action
gives the action scores :math:`Q_{nn}(x, a) = w_a^\\top\\varphi(x) + b_a` (eq. 3 with an
intercept). The whole network is trained end-to-end with the mean squared error on *all*
action returns :math:`r_i(a)`, then frozen: :meth:`CaseNetwork.represent` gives the fixed
representation on which the OLS probe of Proposition 1 (:class:`~cbdt.influence.CaseInfluence`)
and the attribution baselines of :mod:`cbdt.baselines` operate.

Determinism: every fit calls :func:`set_determinism`, the *one* place that seeds Python,
NumPy and torch, switches on ``torch.use_deterministic_algorithms(True)`` and fixes the torch
thread count, so that two fits with the same seed give bit-identical parameters (CPU).
"""

from __future__ import annotations

import copy
import numbers
import random
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

from ._optional import require
from ._validation import (
    as_float_matrix,
    check_nonnegative_scalar,
    check_positive_int,
    check_same_index,
)
from .exceptions import InputError, NotFittedError

torch = require("torch", "cbdt.models")  # before .torch: the message names cbdt.models

from .torch import ProbeFidelity, network_fidelity  # noqa: E402

nn = torch.nn

__all__ = [
    "NetworkConfig",
    "set_determinism",
    "CaseNetwork",
    "Checkpoint",
    "ProbeFidelity",
]

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}
_DTYPES: dict[str, tuple[torch.dtype, type[np.floating]]] = {
    "float64": (torch.float64, np.float64),
    "float32": (torch.float32, np.float32),
}


def torch_dtype(dtype: Any) -> tuple[torch.dtype, type[np.floating]]:
    """The torch and numpy dtypes of a training precision ``"float64"`` or ``"float32"``.

    Parameters
    ----------
    dtype : {"float64", "float32"}

    Returns
    -------
    (torch.dtype, numpy dtype)
    """
    if dtype not in _DTYPES:
        raise InputError(
            f"dtype must be 'float64' or 'float32', got {dtype!r}. float64 (the default) gives "
            "results that agree to many more digits across CPUs than float32."
        )
    return _DTYPES[dtype]


def set_determinism(seed: int, threads: int | None = 1) -> None:
    """Seed every random number generator and make torch deterministic (the one place).

    Sets the seeds of :mod:`random`, NumPy's legacy global generator and torch, calls
    ``torch.use_deterministic_algorithms(True)`` and ``torch.set_num_threads(threads)``.
    These are process-wide settings; the book calls this function (through
    :meth:`CaseNetwork.fit`) before every training run so that results do not depend on what
    ran before.

    Parameters
    ----------
    seed : int
        Non-negative seed.
    threads : int or None, default=1
        Number of intra-op torch threads; ``None`` leaves the current setting. One thread
        makes float32 reductions run in the same order on every machine.
    """
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}.")
    if threads is not None and (
        not isinstance(threads, numbers.Integral) or isinstance(threads, bool) or threads < 1
    ):
        raise InputError(f"threads must be a positive integer or None, got {threads!r}.")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - seeding the legacy global generator on purpose
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    if threads is not None:
        torch.set_num_threads(int(threads))


@dataclass(frozen=True)
class Checkpoint:
    """A snapshot of the network saved during training (what TracIn needs, Sec. 5.3).

    TracIn restricted to the head needs, at every checkpoint :math:`t`, the head gradient of
    each training loss and of the query score. Both depend on the representation *at that
    checkpoint* :math:`\\varphi_t` (it moves during end-to-end training), on the head
    :math:`(W_t, b_t)` (through the residuals) and on the learning rate :math:`\\eta_t`.
    The full parameter state is therefore kept (a few thousand floats), so that
    :math:`\\varphi_t(x)` can be computed for new queries.

    Attributes
    ----------
    epoch : int
        Number of completed epochs when the snapshot was taken.
    lr : float
        Learning rate :math:`\\eta_t` in force during the epochs leading to the snapshot.
    state : dict of str to torch.Tensor
        ``state_dict`` of the network (cloned).
    """

    epoch: int
    lr: float
    state: dict[str, torch.Tensor]

    @property
    def head_weight(self) -> np.ndarray:
        """Head weights :math:`W_t`, shape (|A|, H), float64."""
        return self.state["head.weight"].detach().double().numpy().copy()

    @property
    def head_bias(self) -> np.ndarray:
        """Head bias :math:`b_t`, shape (|A|,), float64."""
        return self.state["head.bias"].detach().double().numpy().copy()


class _MLP(nn.Module):
    """Standardise the input, hidden layers (the last one is phi), linear head."""

    def __init__(
        self,
        d_in: int,
        hidden: tuple[int, ...],
        n_actions: int,
        activation: str,
        x_mean: np.ndarray,
        x_scale: np.ndarray,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.register_buffer("x_mean", torch.as_tensor(x_mean, dtype=dtype))
        self.register_buffer("x_scale", torch.as_tensor(x_scale, dtype=dtype))
        layers: list[nn.Module] = []
        prev = d_in
        for h in hidden:
            layers += [nn.Linear(prev, h, dtype=dtype), _ACTIVATIONS[activation]()]
            prev = h
        self.body = nn.Sequential(*layers)
        # PyTorch's default initialisation, drawn in the network's dtype: float32 draws differ
        # in the last bit between CPUs with other vector units (fused or separate multiply-add),
        # float64 draws only in the last bit of float64
        self.head = nn.Linear(prev, n_actions, dtype=dtype)

    def represent(self, x: torch.Tensor) -> torch.Tensor:
        return self.body((x - self.x_mean) / self.x_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.represent(x))


def _positive_float(name: str, value: Any) -> float:
    v = check_nonnegative_scalar(name, value)
    if v == 0:
        raise InputError(f"{name} must be > 0, got {value!r}.")
    return v


class CaseNetwork:
    """MLP representation :math:`\\varphi(x)` + linear action head, trained end-to-end (Sec. 5).

    Architecture: inputs are standardised with the training mean and standard deviation
    (kept as buffers inside the module, so the module maps raw inputs), then
    ``len(hidden)`` fully connected layers with ``activation``; the last hidden layer is the
    representation :math:`\\varphi(x)` of width ``H = hidden[-1]``; a linear head with bias
    gives one score per action, :math:`Q_{nn}(x, a) = w_a^\\top\\varphi(x) + b_a` (eq. 3).

    Training: float64 by default (see ``dtype``), PyTorch's default initialisation (drawn in
    that dtype), the mean squared error over all
    training cases and all actions,
    :math:`\\mathcal L(\\theta) = \\frac1n\\sum_i \\ell_i(\\theta)` with
    :math:`\\ell_i = \\frac1{|A|}\\sum_a (Q_{nn}(x_i, a) - r_i(a))^2`, minimised by Adam with a
    constant learning rate. ``batch_size=None`` (default) uses full-batch steps (one step per
    epoch): for the 500-case synthetic task this is fast, needs no shuffling and makes each
    step a deterministic function of the parameters. A minibatch size shuffles the cases
    with a seeded torch generator every epoch.

    Parameters
    ----------
    hidden : tuple of int, default=(64, 64)
        Hidden layer widths; the last one is ``H``.
    activation : {"tanh", "relu"}, default="tanh"
    epochs : int, default=1000
        Passes over the training set. With the defaults, 1000 full-batch Adam steps bring the
        synthetic task's training loss to the noise floor :math:`\\sigma^2` (Sec. 5.2);
        among 500, 1000 and 2000 epochs it gave the smallest test error against the *true*
        supports (2000 starts to fit the noise). That comparison used the test problems of the
        five reported seeds (against the true supports, not against any number of the
        paper); the differences were small (test MSE 8.7e-4, 6.9e-4, 8.8e-4).
    lr : float, default=1e-2
        Adam learning rate (also :math:`\\eta_t` of every checkpoint).
    batch_size : int or None, default=None
        ``None`` for full-batch training.
    weight_decay : float, default=0.0
        Adam's L2 penalty on all parameters. ``0`` lets the head reach a stationary point of
        the squared loss, where it satisfies the normal equations (eq. 7) of its own
        representation.
    n_checkpoints : int, default=10
        Snapshots saved at evenly spaced epochs (the last one is the trained network), for
        TracIn; at most ``epochs``.
    seed : int, default=0
    threads : int, default=1
        Torch threads during ``fit`` (see :func:`set_determinism`).
    dtype : {"float64", "float32"}, default="float64"
        Precision of the network and its training. Training amplifies rounding differences:
        two CPUs with other vector units (AVX-512, AVX2, generic SSE, NEON) sum float32
        products in other orders, and after 1,000 Adam steps the trained results differed in
        the third or fourth digit. In float64 the same differences start about 1e9 times
        smaller and stay far below every printed digit, at about twice the training time of
        these small networks. ``"float32"`` is what most users' own networks use.

    Attributes
    ----------
    module_ : torch.nn.Module
        The trained network; ``module_.body`` maps standardised inputs to
        :math:`\\varphi`, ``module_.head`` is the linear head. ``module_(x)`` takes raw inputs.
    checkpoints_ : list of Checkpoint
        Snapshots with their learning rates, in training order (last = final network).
    head_weight_ : ndarray of shape (|A|, H)
    head_bias_ : ndarray of shape (|A|,)
    loss_curve_ : ndarray of shape (epochs,)
        Training loss at the start of each epoch (full batch) or mean minibatch loss.
    n_features_in_ : int
        Input dimension d.
    n_actions_ : int
    width_ : int
        Representation width ``H``.

    Examples
    --------
    >>> import numpy as np
    >>> from cbdt.models import CaseNetwork
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(200, 2)); R = np.c_[X.sum(1), -X[:, 0]]
    >>> net = CaseNetwork(hidden=(16,), epochs=50).fit(X, R)
    >>> net.represent(X).shape, net.predict(X).shape
    ((200, 16), (200, 2))
    """

    def __init__(
        self,
        hidden: tuple[int, ...] | list[int] = (64, 64),
        activation: Literal["tanh", "relu"] = "tanh",
        epochs: int = 1000,
        lr: float = 1e-2,
        batch_size: int | None = None,
        weight_decay: float = 0.0,
        n_checkpoints: int = 10,
        seed: int = 0,
        threads: int = 1,
        dtype: Literal["float64", "float32"] = "float64",
    ) -> None:
        self.hidden = hidden
        self.activation = activation
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.n_checkpoints = n_checkpoints
        self.seed = seed
        self.threads = threads
        self.dtype = dtype

    def __repr__(self) -> str:
        return (
            f"CaseNetwork(hidden={tuple(self.hidden)!r}, activation={self.activation!r}, "
            f"epochs={self.epochs!r}, lr={self.lr!r}, batch_size={self.batch_size!r}, "
            f"weight_decay={self.weight_decay!r}, n_checkpoints={self.n_checkpoints!r}, "
            f"seed={self.seed!r}, dtype={self.dtype!r})"
        )

    # ------------------------------------------------------------------ validation
    def _check_params(self) -> tuple[tuple[int, ...], int, float, int | None, float, int]:
        try:
            hidden = tuple(self.hidden)
        except TypeError as exc:
            raise InputError(
                f"hidden must be a tuple of layer widths, got {self.hidden!r}."
            ) from exc
        if not hidden:
            raise InputError("hidden needs at least one layer (the representation phi).")
        for h in hidden:
            if not isinstance(h, numbers.Integral) or isinstance(h, bool) or h < 1:
                raise InputError(
                    f"every hidden width must be an integer >= 1 (H >= 1), got {hidden!r}."
                )
        hidden = tuple(int(h) for h in hidden)
        if self.activation not in _ACTIVATIONS:
            raise InputError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {self.activation!r}."
            )
        epochs = check_positive_int("epochs", self.epochs)
        lr = _positive_float("lr", self.lr)
        batch = None if self.batch_size is None else check_positive_int("batch_size", self.batch_size)
        wd = check_nonnegative_scalar("weight_decay", self.weight_decay)
        n_ck = min(check_positive_int("n_checkpoints", self.n_checkpoints), epochs)
        return hidden, epochs, lr, batch, wd, n_ck

    def _check_fitted(self) -> None:
        if not hasattr(self, "module_"):
            raise NotFittedError(
                "This CaseNetwork is not fitted yet. Call .fit(X, R) before represent/predict."
            )

    def _check_X(self, X: Any) -> tuple[torch.Tensor, bool]:
        """Validated inputs as an (m, d) tensor of the network's dtype, and whether ``X`` was one
        1-D problem."""
        self._check_fitted()
        A = as_float_matrix("X", X, allow_1d=True)
        single = A.ndim == 1
        if single:
            A = A[None, :]
        if A.shape[1] != self.n_features_in_:
            raise InputError(
                f"X has {A.shape[1]} features but the network was fitted on {self.n_features_in_}."
            )
        return torch.from_numpy(np.array(A, dtype=self._np_dtype)), single

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, R: Any) -> CaseNetwork:
        """Train the network end-to-end on inputs ``X`` and returns ``R`` (MSE on all actions).

        Parameters
        ----------
        X : array-like of shape (n, d)
            Training problems :math:`x_i`.
        R : array-like of shape (n, |A|) or (n,)
            Action-conditional returns :math:`r_i(a)` (eq. 5).

        Returns
        -------
        self : CaseNetwork
        """
        hidden, epochs, lr, batch, wd, n_ck = self._check_params()
        check_same_index(X, R, x_name="X")  # pandas X and R: rows are paired by position
        Xa = as_float_matrix("X", X)
        Ra = as_float_matrix("R", R, allow_1d=True)
        if Ra.ndim == 1:
            Ra = Ra[:, None]
        n = Xa.shape[0]
        if Ra.shape[0] != n:
            raise InputError(
                f"X has {n} rows but R has {Ra.shape[0]}; row i of both must belong to "
                "training case i."
            )
        if n < 2:
            raise InputError("fit needs at least 2 training cases.")
        tdt, ndt = torch_dtype(self.dtype)
        set_determinism(self.seed, self.threads)

        mean = Xa.mean(axis=0)
        scale = Xa.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        module = _MLP(Xa.shape[1], hidden, Ra.shape[1], self.activation, mean, scale, tdt)
        opt = torch.optim.Adam(module.parameters(), lr=lr, weight_decay=wd)
        Xt = torch.from_numpy(np.array(Xa, dtype=ndt))
        Rt = torch.from_numpy(np.array(Ra, dtype=ndt))
        gen = torch.Generator().manual_seed(int(self.seed))
        ck_epochs = {int(round(epochs * (k + 1) / n_ck)) for k in range(n_ck)}
        checkpoints: list[Checkpoint] = []
        losses = np.empty(epochs)
        module.train()
        for epoch in range(1, epochs + 1):
            if batch is None or batch >= n:
                opt.zero_grad(set_to_none=True)
                loss = torch.mean((module(Xt) - Rt) ** 2)
                loss.backward()
                opt.step()
                losses[epoch - 1] = float(loss.detach())
            else:
                perm = torch.randperm(n, generator=gen)
                total = 0.0
                for s in range(0, n, batch):
                    idx = perm[s : s + batch]
                    opt.zero_grad(set_to_none=True)
                    loss = torch.mean((module(Xt[idx]) - Rt[idx]) ** 2)
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * idx.shape[0]
                losses[epoch - 1] = total / n
            if epoch in ck_epochs:
                state = {k: v.detach().clone() for k, v in module.state_dict().items()}
                checkpoints.append(Checkpoint(epoch, float(opt.param_groups[0]["lr"]), state))
        module.eval()

        self.module_ = module
        self._np_dtype = ndt
        self.checkpoints_ = checkpoints
        self.loss_curve_ = losses
        self.n_features_in_ = Xa.shape[1]
        self.n_actions_ = Ra.shape[1]
        self.width_ = hidden[-1]
        self.head_weight_ = module.head.weight.detach().double().numpy().copy()
        self.head_bias_ = module.head.bias.detach().double().numpy().copy()
        self._ck_modules: list[nn.Module] | None = None
        return self

    # ------------------------------------------------------------------ queries
    def _module_at(self, checkpoint: int | None) -> nn.Module:
        if checkpoint is None:
            return self.module_
        T = len(self.checkpoints_)
        if (
            not isinstance(checkpoint, numbers.Integral)
            or isinstance(checkpoint, bool)
            or not -T <= checkpoint < T
        ):
            raise InputError(
                f"checkpoint must be an index into checkpoints_ (0..{T - 1}), got {checkpoint!r}."
            )
        if self._ck_modules is None:  # one module per checkpoint, built on first use
            mods = []
            for ck in self.checkpoints_:
                m = copy.deepcopy(self.module_)
                m.load_state_dict(ck.state)
                mods.append(m)
            self._ck_modules = mods
        return self._ck_modules[int(checkpoint)]

    def represent(self, X: Any, checkpoint: int | None = None) -> np.ndarray:
        """The frozen representation :math:`\\varphi(x)` (rows of :math:`\\Phi`, eq. 4).

        Parameters
        ----------
        X : array-like of shape (m, d) or (d,)
        checkpoint : int, optional
            Index into :attr:`checkpoints_`; default the trained network.

        Returns
        -------
        Phi : ndarray of shape (m, H), or (H,) for one 1-D problem; float64
        """
        Xt, single = self._check_X(X)
        with torch.no_grad():
            out = self._module_at(checkpoint).represent(Xt).double().numpy()
        return out[0] if single else out

    def represent_checkpoints(self, X: Any) -> np.ndarray:
        """:math:`\\varphi_t(x)` at every checkpoint, shape (T, m, H) ((T, H) for one 1-D
        problem), float64 (the query input of :class:`cbdt.baselines.TracIn`)."""
        Xt, single = self._check_X(X)
        out = np.empty((len(self.checkpoints_), Xt.shape[0], self.width_))
        with torch.no_grad():
            for t in range(len(self.checkpoints_)):
                out[t] = self._module_at(t).represent(Xt).double().numpy()
        return out[:, 0] if single else out

    def predict(self, X: Any, checkpoint: int | None = None) -> np.ndarray:
        """Network action scores :math:`Q_{nn}(x, a)`, shape (m, |A|) ((|A|,) for one 1-D
        problem), float64."""
        Xt, single = self._check_X(X)
        with torch.no_grad():
            out = self._module_at(checkpoint)(Xt).double().numpy()
        return out[0] if single else out

    def decide(self, X: Any) -> np.ndarray:
        """Network decision :math:`\\arg\\max_a Q_{nn}(x, a)`, shape (m,) (ties: lowest index)."""
        return np.argmax(self.predict(X), axis=-1)

    def probe_fidelity(
        self,
        X_train: Any,
        R_train: Any,
        X_test: Any,
        ridge: float = 0.0,
        solver: Literal["auto", "cholesky", "lstsq", "cholesky_or_lstsq"] = "auto",
    ) -> ProbeFidelity:
        """OLS-probe fidelity :math:`\\rho_{recon}` of the trained network (Sec. 2.2, 5).

        Freezes the representation, fits ``CaseInfluence(ridge=ridge, intercept=True)`` on
        :math:`\\Phi = \\varphi(X_{train})` and the training returns (eq. 6-8, intercept
        absorbed as a constant coordinate), and correlates its scores with the network's own
        scores on ``X_test``, per action (:func:`cbdt.torch.probe_fidelity` with this network,
        which gives the same numbers).

        Parameters
        ----------
        X_train : array-like of shape (n, d)
        R_train : array-like of shape (n, |A|)
        X_test : array-like of shape (m, d)
        ridge : float, default=0.0
            Probe ridge (eq. 11); 0 is the OLS probe of Proposition 1.
        solver : {"auto", "cholesky", "lstsq", "cholesky_or_lstsq"}, default="auto"
            Passed to :class:`~cbdt.influence.CaseInfluence`. ReLU representations often have
            dead units (zero columns of :math:`\\Phi`): ``"auto"`` then raises
            :class:`~cbdt.exceptions.RankDeficientError` (:func:`cbdt.torch.probe_fidelity`
            falls back with a warning instead); ``"lstsq"`` gives the minimum-norm readout;
            ``"cholesky_or_lstsq"`` the exact OLS readout where :math:`\\Phi` has full column
            rank, else the minimum-norm one, with the one used in ``probe.solver_`` (what the
            book records per seed).

        Returns
        -------
        ProbeFidelity
            ``rho_recon``, ``probe``, ``probe_scores``, ``network_scores``, ``agreement``,
            ``max_abs_diff``, ``rel_max_abs_diff`` ...
        """
        if not isinstance(self, CaseNetwork):
            raise InputError(f"network must be a CaseNetwork, got {type(self).__name__}.")
        return network_fidelity(self, X_train, R_train, X_test, ridge=ridge, solver=solver,
                                 intercept=True, fallback=False, warn=False)


@dataclass(frozen=True)
class NetworkConfig:
    """How a :class:`CaseNetwork` is built and trained, without its seed.

    The book's experiments keep these settings among their own (data sizes, bandwidth grids);
    :meth:`of` reads them from such a configuration and :meth:`build` makes the network, so
    every chapter builds its networks the same way.

    Attributes
    ----------
    hidden, activation, epochs, lr, batch_size, weight_decay, n_checkpoints, threads, dtype
        As in :class:`CaseNetwork` (``n_checkpoints`` defaults to 1 here: the final network).
    """

    hidden: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    epochs: int = 1000
    lr: float = 1e-2
    batch_size: int | None = None
    weight_decay: float = 0.0
    n_checkpoints: int = 1
    threads: int = 1
    dtype: Literal["float64", "float32"] = "float64"

    @classmethod
    def of(cls, config: Any) -> NetworkConfig:
        """The network settings of ``config``: its attributes named like this class's fields,
        the defaults for the others.

        Parameters
        ----------
        config : object
            E.g. an experiment's configuration dataclass.

        Returns
        -------
        NetworkConfig
        """
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)
                      if hasattr(config, f.name)})

    def build(self, seed: int, **changes: Any) -> CaseNetwork:
        """The unfitted network of these settings, seeded with ``seed``.

        Parameters
        ----------
        seed : int
            Seed of the initialisation and the batch order.
        **changes
            Settings to replace for this network only (e.g. ``epochs=``, ``n_checkpoints=``).

        Returns
        -------
        CaseNetwork
        """
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise InputError(
                f"unknown network settings {sorted(unknown)}; NetworkConfig has "
                f"{[f.name for f in fields(self)]}."
            )
        kw = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        kw["hidden"] = tuple(kw["hidden"])
        return CaseNetwork(**kw, seed=int(seed))

