"""From a trained torch model to the exact case account of its decisions (Sec. 2.2, Prop. 1).

Proposition 1 is exact for the OLS readout fitted on a frozen representation (the *probe*),
not for a head that gradient descent trained, often with another loss. These helpers take any
``torch.nn.Module``:

- :func:`features` reads the representation :math:`\\varphi(x)` at any layer (a forward hook,
  no gradients, float64 out);
- :func:`from_torch` fits the case-influence decomposition on it
  (:class:`TorchCaseInfluence`, a :class:`~cbdt.influence.CaseInfluence` that remembers the
  model and layer, so ``ci.explain(ci.phi(X))`` works on raw inputs);
- :func:`probe_fidelity` says how closely the probe follows the network (agreement of the
  decisions, per-action correlation, largest score difference);
- :meth:`TorchCaseInfluence.write_readout` writes the OLS readout into the network's own
  ``nn.Linear`` head, after which Proposition 1 holds for the network itself (to the head's
  float precision).

torch is imported only when these functions run.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._validation import check_case_ids
from .exceptions import InputError
from .influence import CaseInfluence

__all__ = [
    "features",
    "from_torch",
    "probe_fidelity",
    "TorchCaseInfluence",
    "TorchProbeFidelity",
]


def _torch() -> Any:
    import torch

    return torch


def _module(model: Any, layer: Any) -> Any:
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if isinstance(layer, torch.nn.Module):
        if not any(m is layer for m in model.modules()):
            raise InputError("layer is a module, but not one of model's submodules.")
        return layer
    if isinstance(layer, str):
        try:
            return model.get_submodule(layer)
        except AttributeError:
            names = [n for n, _ in model.named_modules() if n]
            raise InputError(
                f"model has no submodule {layer!r}; its submodules are {names[:30]}"
                + (" ..." if len(names) > 30 else "")
                + "."
            ) from None
    raise InputError(
        f"layer must be a submodule of model or its name (str), got {type(layer).__name__}."
    )


def _dtype_device(model: Any) -> tuple[Any, Any]:
    """The dtype and device of ``model``'s parameters (float32 on the CPU when it has none)."""
    torch = _torch()
    p = next(iter(model.parameters()), None)
    if p is None:
        return torch.float32, torch.device("cpu")
    return p.dtype, p.device


def _as_tensor(model: Any, X: Any) -> Any:
    torch = _torch()
    dtype, device = _dtype_device(model)
    if isinstance(X, torch.Tensor):
        return X.to(device=device, dtype=dtype)
    arr = np.asarray(X)
    if arr.dtype.kind not in "biuf":
        raise InputError(f"X must be numeric, got dtype {arr.dtype}.")
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise InputError(f"X must have at least one row, got shape {arr.shape}.")
    if not arr.flags.writeable:  # torch cannot share read-only memory (e.g. DataFrame values)
        arr = arr.copy()
    return torch.as_tensor(arr, dtype=dtype, device=device)


def features(model: Any, layer: Any, X: Any, *, batch_size: int = 1024) -> np.ndarray:
    """The representation :math:`\\varphi(x)` of ``X`` at ``layer`` (eq. 4), float64.

    A forward hook records ``layer``'s output while ``model`` runs on ``X`` in evaluation mode
    without gradients (the model's mode is restored afterwards). Outputs with more than two
    dimensions are flattened per input.

    Parameters
    ----------
    model : torch.nn.Module
    layer : torch.nn.Module or str
        A submodule of ``model`` or its name (``model.get_submodule``), e.g. the activation
        just before the head.
    X : array-like or torch.Tensor of shape (n, ...)
        Inputs, as ``model`` takes them.
    batch_size : int, default=1024

    Returns
    -------
    Phi : ndarray of shape (n, H)
    """
    torch = _torch()
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}.")
    mod = _module(model, layer)
    Xt = _as_tensor(model, X)
    seen: list[Any] = []

    def hook(_m: Any, _inp: Any, out: Any) -> None:
        if not isinstance(out, torch.Tensor):
            raise InputError(
                f"layer {type(mod).__name__} returned {type(out).__name__}, not a tensor; pick "
                "a layer whose output is the representation."
            )
        seen.append(out.detach().reshape(out.shape[0], -1).to("cpu", torch.float64))

    was_training = model.training
    handle = mod.register_forward_hook(hook)
    parts = []
    try:
        model.eval()
        with torch.no_grad():
            for s in range(0, Xt.shape[0], batch_size):
                seen.clear()
                model(Xt[s : s + batch_size])
                if not seen:
                    raise InputError(
                        "layer did not run in model's forward pass; pick a layer the forward "
                        "pass uses."
                    )
                parts.append(seen[-1])
    finally:
        handle.remove()
        model.train(was_training)
    return torch.cat(parts).numpy()


def _outputs(model: Any, X: Any, batch_size: int) -> np.ndarray:
    torch = _torch()
    Xt = _as_tensor(model, X)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            out = [model(Xt[s : s + batch_size]) for s in range(0, Xt.shape[0], batch_size)]
    finally:
        model.train(was_training)
    Y = torch.cat(out).to("cpu", torch.float64).numpy()
    return Y.reshape(Y.shape[0], -1)


class TorchCaseInfluence(CaseInfluence):
    """A :class:`~cbdt.influence.CaseInfluence` fitted on a torch model's representation.

    Made by :func:`from_torch`. Besides everything ``CaseInfluence`` answers it knows its
    model and layer: :meth:`phi` maps raw inputs to :math:`\\varphi(x)` and
    :meth:`write_readout` makes the network's own head the OLS readout.

    Attributes
    ----------
    model_ : torch.nn.Module
    layer_ : torch.nn.Module
        The layer whose output is :math:`\\varphi`.
    """

    def phi(self, X: Any, *, batch_size: int = 1024) -> np.ndarray:
        """:math:`\\varphi(x)` of raw inputs ``X`` (:func:`features` at the fitted layer).

        Returns
        -------
        ndarray of shape (m, H)
        """
        self._check_fitted()
        return features(self.model_, self.layer_, X, batch_size=batch_size)

    def write_readout(self, head: Any) -> Any:
        """Write the readout :math:`V` (eq. 8) into ``head``, an ``nn.Linear`` on :math:`\\varphi`.

        Afterwards the network's own scores are the probe's, :math:`Q_{nn}(x, a) =
        \\varphi(x)^\\top v_a + b_a = \\sum_i \\alpha_i(x) r_{i,a}` (Prop. 1), to the head's
        float precision, provided ``head`` reads exactly the fitted layer's output.

        Parameters
        ----------
        head : torch.nn.Linear
            ``in_features = H``, ``out_features = |A|``; with ``intercept=True`` it must have a
            bias (set to the intercepts); without, a bias is set to zero.

        Returns
        -------
        head
        """
        torch = _torch()
        self._check_fitted()
        if not isinstance(head, torch.nn.Linear):
            raise InputError(f"head must be a torch.nn.Linear, got {type(head).__name__}.")
        H, A = self.n_features_, self.n_actions_
        if head.in_features != H or head.out_features != A:
            raise InputError(
                f"head maps {head.in_features} -> {head.out_features} features, but the readout "
                f"maps phi of width H = {H} to |A| = {A} actions."
            )
        if self.intercept and head.bias is None:
            raise InputError(
                "the readout has an intercept but head has no bias; refit with intercept=False "
                "or give the head a bias."
            )
        with torch.no_grad():
            head.weight.copy_(torch.as_tensor(self.readout_.T, dtype=head.weight.dtype))
            if head.bias is not None:
                b = self.intercept_ if self.intercept else np.zeros(A)
                head.bias.copy_(torch.as_tensor(b, dtype=head.bias.dtype))
        return head


def from_torch(
    model: Any,
    layer: Any,
    X_train: Any,
    R_train: Any,
    *,
    head: Any = None,
    ridge: float = 0.0,
    intercept: bool | None = None,
    batch_size: int = 1024,
    case_ids: Any = None,
    **params: Any,
) -> TorchCaseInfluence:
    """Fit the case-influence decomposition on a torch model's representation (Prop. 1).

    Parameters
    ----------
    model : torch.nn.Module
    layer : torch.nn.Module or str
        The layer whose output is :math:`\\varphi` (for a head ``nn.Linear``, its input).
    X_train : array-like or torch.Tensor of shape (n, ...)
    R_train : array-like of shape (n, |A|)
        Action-conditional returns (for a classifier, :func:`cbdt.returns_from_labels`).
    head : torch.nn.Linear, optional
        The network's head on :math:`\\varphi`; when given and ``intercept`` is None, the
        intercept follows the head's bias.
    ridge : float, default=0.0
        Eq. 11; 0 is the OLS probe of Proposition 1.
    intercept : bool, optional
        Absorb a constant coordinate; default: the head's ``bias is not None``, or True without
        a head (a probe with an intercept, like an ``nn.Linear`` head).
    batch_size : int, default=1024
        Inputs per forward pass.
    case_ids : array-like of shape (n,) or pandas.Index, optional
        Labels of the training cases; default the index of ``X_train`` when it is a pandas
        DataFrame with a non-default index. Carried into every result that names cases.
    **params
        Other :class:`~cbdt.influence.CaseInfluence` parameters (``solver``, ``chunk_size``,
        ...).

    Returns
    -------
    TorchCaseInfluence
    """
    torch = _torch()
    if head is not None and not isinstance(head, torch.nn.Linear):
        raise InputError(f"head must be a torch.nn.Linear or None, got {type(head).__name__}.")
    if intercept is None:
        intercept = True if head is None else head.bias is not None
    Phi = features(model, layer, X_train, batch_size=batch_size)
    ids = check_case_ids(case_ids, Phi.shape[0], X_train)
    ci = TorchCaseInfluence(ridge=ridge, intercept=intercept, **params).fit(
        Phi, R_train, case_ids=ids
    )
    ci.model_, ci.layer_ = model, _module(model, layer)
    return ci


class TorchProbeFidelity(NamedTuple):
    """Result of :func:`probe_fidelity`.

    Attributes
    ----------
    probe : TorchCaseInfluence
    agreement : float
        Share of test inputs where the probe and the network choose the same action.
    rho : ndarray of shape (|A|,)
        Pearson correlation per action between probe and network scores
        (:math:`\\rho_{recon}`).
    max_abs_diff : float
        Largest :math:`|\\hat Q(x, a) - Q_{nn}(x, a)|` over test inputs and actions.
    probe_scores, network_scores : ndarray of shape (m, |A|)
    """

    probe: TorchCaseInfluence
    agreement: float
    rho: np.ndarray
    max_abs_diff: float
    probe_scores: np.ndarray
    network_scores: np.ndarray


def probe_fidelity(
    model: Any,
    layer: Any,
    X_train: Any,
    R_train: Any,
    X_test: Any,
    *,
    head: Any = None,
    probe: TorchCaseInfluence | None = None,
    ridge: float = 0.0,
    intercept: bool | None = None,
    batch_size: int = 1024,
) -> TorchProbeFidelity:
    """How closely the OLS probe on ``layer`` follows any torch model's own scores.

    Parameters
    ----------
    model, layer, X_train, R_train, head, ridge, intercept, batch_size
        As in :func:`from_torch` (ignored but ``model`` when ``probe`` is given).
    X_test : array-like or torch.Tensor of shape (m, ...)
    probe : TorchCaseInfluence, optional
        An already fitted probe (e.g. after :meth:`~TorchCaseInfluence.write_readout`).

    Returns
    -------
    TorchProbeFidelity
        ``agreement``, per-action ``rho``, ``max_abs_diff`` and both score matrices.
    """
    if probe is None:
        probe = from_torch(model, layer, X_train, R_train, head=head, ridge=ridge,
                           intercept=intercept, batch_size=batch_size)
    S_probe = probe.scores(probe.phi(X_test, batch_size=batch_size))
    S_net = _outputs(model, X_test, batch_size)
    if S_net.shape != S_probe.shape:
        raise InputError(
            f"the model outputs {S_net.shape[1]} scores per input but the returns have "
            f"{S_probe.shape[1]} actions; the model's output must be one score per action."
        )
    rho = np.array([
        np.corrcoef(S_probe[:, a], S_net[:, a])[0, 1]
        if S_probe[:, a].std() > 0 and S_net[:, a].std() > 0 else np.nan
        for a in range(S_net.shape[1])
    ])
    return TorchProbeFidelity(
        probe=probe,
        agreement=float(np.mean(S_probe.argmax(1) == S_net.argmax(1))),
        rho=rho,
        max_abs_diff=float(np.abs(S_probe - S_net).max()),
        probe_scores=S_probe,
        network_scores=S_net,
    )
