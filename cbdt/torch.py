"""From a trained torch model to the exact case account of its decisions (Sec. 2.2, Prop. 1).

Proposition 1 is exact for the OLS readout fitted on a frozen representation (the *probe*),
not for a head that gradient descent trained, often with another loss. These helpers take any
``torch.nn.Module``:

- :func:`head_input` finds the layer whose output the network's linear head reads (the
  representation :math:`\\varphi` to audit), and :func:`features` reads :math:`\\varphi(x)` at
  any layer (a forward hook, no gradients, float64 out; every submodule's train/eval mode is
  restored afterwards);
- :class:`TorchCaseInfluence` (Captum style: ``TorchCaseInfluence(model, layer).fit(X, R)``)
  fits the case-influence decomposition (eq. 6-10) on that layer and remembers the model, so
  ``ci.explain(ci.phi(X))`` works on raw inputs; :func:`from_torch` is its one-line shortcut.
  The layer is checked, for any model (one returning a dict or tuple too): the head itself,
  the whole model or a layer whose width differs from the head's input are refused
  (:class:`~cbdt.exceptions.InputError`), a pre-activation layer is announced
  (:class:`~cbdt.exceptions.LayerWarning`), and where ``forward()`` computes the head's input
  from the layer's output (``F.relu``) it is read with a forward pre-hook; a rank-deficient
  layer (dead or constant units) falls back to the minimum-norm solver with a
  :class:`~cbdt.exceptions.SolverFallbackWarning` that names the units;
- :func:`probe_fidelity` says how closely the probe follows the network (agreement of the
  decisions, per-action correlation :math:`\\rho_{recon}`, largest score difference, absolute
  and relative to the spread of the network's scores) for any ``nn.Module`` or the book's
  :class:`~cbdt.models.CaseNetwork`, and warns (:class:`~cbdt.exceptions.ScoreUnitsWarning`)
  when the network's scores are not on the returns' scale (e.g. logits against one-hot
  returns); :func:`layer_fidelity` compares candidate layers;
- :meth:`TorchCaseInfluence.write_readout` writes the OLS readout into the network's own
  ``nn.Linear`` head, after which Proposition 1 holds for the network itself (to the head's
  float precision);
- :meth:`TorchCaseInfluence.save` and :func:`load` store the audit without the model and
  attach it again.

torch is imported only when these functions run, but it must be installed: without it,
``from cbdt import torch`` raises :class:`~cbdt.MissingExtraError` naming the extra
(``pip install 'cbdt[torch]'``).
"""

from __future__ import annotations

import io
import json
import os
import sys
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ._optional import require_installed
from ._savefile import open_npz
from ._validation import (
    as_float_matrix,
    check_case_ids,
    check_feature_names,
    check_same_index,
    dtype_eps,
)
from .exceptions import (
    InputError,
    LayerWarning,
    NotFittedError,
    RankDeficientError,
    ScoreUnitsWarning,
    SolverFallbackWarning,
)
from .influence import CaseInfluence

__all__ = [
    "features",
    "head_input",
    "from_torch",
    "probe_fidelity",
    "layer_fidelity",
    "load",
    "TorchCaseInfluence",
    "ProbeFidelity",
]

require_installed("torch", "cbdt.torch")  # fail on import, not at the first call

_TRACE_ROWS = 64  # inputs of the one forward pass that checks the layer against the head
_UNITS_RATIO = 3.0  # network scores spread > 3x the returns': not on the returns' scale


def _torch() -> Any:
    from ._optional import require

    return require("torch", "cbdt.torch")


# ---------------------------------------------------------------------- modules
def _check_model(model: Any) -> None:
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"model must be a torch.nn.Module, got {type(model).__name__}.")


def _module(model: Any, layer: Any) -> Any:
    torch = _torch()
    _check_model(model)
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


def _name_of(model: Any, mod: Any) -> str | None:
    """The qualified name of ``mod`` in ``model`` ("" for the model itself), or None."""
    for name, m in model.named_modules():
        if m is mod:
            return name
    return None


def _describe(model: Any, mod: Any) -> str:
    name = _name_of(model, mod)
    label = "the whole model" if name == "" else repr(name)
    return f"{label} ({type(mod).__name__})"


def _dtype_device(model: Any) -> tuple[Any, Any]:
    """The dtype and device of ``model``'s parameters (float32 on the CPU when it has none)."""
    torch = _torch()
    p = next(iter(model.parameters()), None)
    if p is None:
        return torch.float32, torch.device("cpu")
    return p.dtype, p.device


def _takes_integers(model: Any) -> bool:
    """Whether ``model`` reads integer inputs (token or category ids: an embedding)."""
    torch = _torch()
    return any(isinstance(m, torch.nn.Embedding | torch.nn.EmbeddingBag) for m in model.modules())


def _nonfinite_message(name: str, mask: np.ndarray) -> str:
    n_bad = int(mask.sum())
    flat = mask.reshape(mask.shape[0], -1)
    rows = np.flatnonzero(flat.any(axis=1))
    cols = np.flatnonzero(flat.any(axis=0))

    def show(idx: np.ndarray) -> str:
        head = ", ".join(str(int(i)) for i in idx[:10])
        return f"[{head}{', ...' if idx.size > 10 else ''}]"

    return (
        f"{name} contains {n_bad} non-finite value(s) (NaN or inf) in {rows.size} row(s) "
        f"{show(rows)} and {cols.size} column(s) {show(cols)}; the network cannot give a "
        f"representation for them. Drop or impute those rows of {name} before the audit."
    )


def _as_tensor(model: Any, X: Any, name: str = "X") -> Any:
    """``X`` as a tensor on the model's device: floating inputs in the parameters' dtype,
    integer inputs kept integer for a model with an embedding; non-finite values refused."""
    torch = _torch()
    dtype, device = _dtype_device(model)
    if isinstance(X, torch.Tensor):
        if X.ndim == 0 or X.shape[0] == 0:
            raise InputError(f"{name} must have at least one row, got shape {tuple(X.shape)}.")
        if X.is_floating_point() or X.is_complex():
            bad = ~torch.isfinite(X.detach())
            if bool(bad.any()):
                raise InputError(_nonfinite_message(name, bad.cpu().numpy()))
        if not X.is_floating_point() and X.dtype != torch.bool and _takes_integers(model):
            return X.to(device=device)
        return X.to(device=device, dtype=dtype)
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None and hasattr(dtypes, "items"):  # a DataFrame: name the bad columns
        bad = [(str(c), str(dt)) for c, dt in dtypes.items()
               if getattr(dt, "kind", "O") not in "biuf"]
        if bad:
            cols = ", ".join(f"{c!r} ({dt})" for c, dt in bad[:10])
            raise InputError(
                f"{name} must be numeric, but its column(s) {cols} are not. Encode them as "
                "numbers (e.g. pandas.get_dummies for categories) or drop them before the "
                "audit."
            )
    arr = np.asarray(X)
    if arr.dtype.kind not in "biuf":
        raise InputError(
            f"{name} must be numeric, got dtype {arr.dtype}. Encode non-numeric features as "
            "numbers (e.g. one-hot columns) before the audit."
        )
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise InputError(f"{name} must have at least one row, got shape {arr.shape}.")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            raise InputError(_nonfinite_message(name, bad))
    if not arr.flags.writeable:  # torch cannot share read-only memory (e.g. DataFrame values)
        arr = arr.copy()
    if arr.dtype.kind in "iu" and _takes_integers(model):
        return torch.as_tensor(arr, device=device)
    return torch.as_tensor(arr, dtype=dtype, device=device)


def _first_linear(model: Any) -> tuple[str, Any] | None:
    """The first layer of a Sequential model when it is an ``nn.Linear`` (nested ones
    followed), else None."""
    torch = _torch()
    mod, prefix = model, ""
    while isinstance(mod, torch.nn.Sequential) and len(mod) > 0:
        prefix = f"{prefix}.0" if prefix else "0"
        mod = mod[0]
    if isinstance(mod, torch.nn.Linear) and mod is not model:
        return prefix, mod
    return None


def _width_message(name: str, width: int, lname: str, lin: Any) -> str:
    return (
        f"{name} has {width} columns (features per input) but the model expects "
        f"{lin.in_features}: its first layer {lname!r} is {lin!r}. Pass {name} with the "
        f"{lin.in_features} columns the model was trained on (the same columns, in the same "
        "order, as the training inputs)."
    )


def _check_width(model: Any, Xt: Any, name: str) -> None:
    first = _first_linear(model)
    if first is not None and Xt.ndim == 2 and Xt.shape[1] != first[1].in_features:
        raise InputError(_width_message(name, int(Xt.shape[1]), *first))


def _call(model: Any, xb: Any, name: str) -> Any:
    """``model(xb)``, with torch's shape error on the first layer turned into one on ``name``."""
    torch = _torch()
    ran: list[Any] = []

    def pre(m: Any, _inp: Any) -> None:
        ran.append(m)

    handles = []
    try:
        for m in model.modules():
            if next(m.children(), None) is None:
                handles.append(m.register_forward_pre_hook(pre))
    except RuntimeError:  # e.g. a ScriptModule: no hooks, torch's own error stays
        for h in handles:
            h.remove()
        handles = []
    try:
        return model(xb)
    except RuntimeError as exc:
        lin = ran[-1] if ran else None
        if (
            len(ran) == 1
            and isinstance(lin, torch.nn.Linear)
            and xb.ndim >= 2
            and xb.shape[-1] != lin.in_features
        ):
            raise InputError(
                _width_message(name, int(xb.shape[-1]), _name_of(model, lin) or "?", lin)
            ) from exc
        raise
    finally:
        for h in handles:
            h.remove()


class _Modes:
    """Put every submodule in evaluation mode; restore each one's own flag on exit."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.modes = [(m, m.training) for m in model.modules()]

    def __enter__(self) -> _Modes:
        self.model.eval()
        return self

    def __exit__(self, *exc: Any) -> None:
        for m, flag in self.modes:
            m.training = flag


def _features(
    model: Any, mod: Any, Xt: Any, batch_size: int, name: str, dtypes: list[Any] | None = None,
    *, pre: bool = False,
) -> np.ndarray:
    """``mod``'s output on ``Xt`` (its input, read by a forward pre-hook, when ``pre``),
    flattened per input, as float64; the layer's own dtype is appended to ``dtypes`` when
    given (the fit judges rank in that precision)."""
    torch = _torch()
    seen: list[Any] = []

    def hook(_m: Any, inp: Any, out: Any = None) -> None:
        if pre:
            out = inp[0] if inp else None
        if not isinstance(out, torch.Tensor):
            raise InputError(
                f"layer {type(mod).__name__} returned {type(out).__name__}, not a tensor; pick "
                "a layer whose output is the representation."
            )
        if dtypes is not None and not dtypes:
            dtypes.append(out.dtype)
        seen.append(out.detach().reshape(out.shape[0], -1).to("cpu", torch.float64))

    _check_width(model, Xt, name)
    handle = mod.register_forward_pre_hook(hook) if pre else mod.register_forward_hook(hook)
    parts = []
    try:
        with _Modes(model), torch.no_grad():
            for s in range(0, Xt.shape[0], batch_size):
                seen.clear()
                _call(model, Xt[s : s + batch_size], name)
                if not seen:
                    raise InputError(
                        "layer did not run in model's forward pass; pick a layer the forward "
                        "pass uses."
                    )
                parts.append(seen[-1])
    finally:
        handle.remove()
    return torch.cat(parts).numpy()


def _check_batch_size(batch_size: Any) -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}.")
    return batch_size


def features(model: Any, layer: Any, X: Any, *, batch_size: int = 1024) -> np.ndarray:
    """The representation :math:`\\varphi(x)` of ``X`` at ``layer`` (eq. 4), float64.

    A forward hook records ``layer``'s output while ``model`` runs on ``X`` in evaluation mode
    without gradients; afterwards every submodule gets back its own train/eval flag (a frozen
    ``BatchNorm`` inside a model in training mode stays frozen). Outputs with more than two
    dimensions are flattened per input.

    Parameters
    ----------
    model : torch.nn.Module
    layer : torch.nn.Module or str
        A submodule of ``model`` or its name (``model.get_submodule``), e.g. the activation
        just before the head (:func:`head_input`).
    X : array-like or torch.Tensor of shape (n, ...)
        Inputs, as ``model`` takes them: floating values are cast to the parameters' dtype;
        integer ones (token or category ids) stay integer when the model has an
        ``nn.Embedding``. NaN or inf are refused before the forward pass, naming their rows
        and columns.
    batch_size : int, default=1024

    Returns
    -------
    Phi : ndarray of shape (n, H)
    """
    _check_batch_size(batch_size)
    mod = _module(model, layer)
    return _features(model, mod, _as_tensor(model, X, "X"), batch_size, "X")


# ---------------------------------------------------------------------- the head and its input
@dataclass
class _Trace:
    outputs: dict[str, Any]  # module name -> flattened output of its last call (tensors only)
    order: list[str]  # names in the order their forward returned
    head_in: Any  # flattened input of the head (None when it did not run)
    model_out: Any  # flattened scores of the model (None when not a tensor and not selected)
    model_outs: list[tuple[str, Any]]  # the tensors of a dict or tuple output, as (where, t)
    before_head: list[str]  # names of the modules that returned before the head's last call


def _output_tensors(out: Any, where: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """The tensors in a model's dict, tuple or list output (nested ones followed), with
    where they sit (``['logits']``, ``[0]``)."""
    torch = _torch()
    if isinstance(out, torch.Tensor):
        return [(where, out)]
    if depth > 3:
        return []
    items = out.items() if isinstance(out, dict) else \
        enumerate(out) if isinstance(out, tuple | list) else ()
    found: list[tuple[str, Any]] = []
    for key, value in items:
        found += _output_tensors(value, f"{where}[{key!r}]", depth + 1)
    return found


def _trace(model: Any, Xt: Any, head: Any, name: str, output: Any = None) -> _Trace:
    """One forward pass on (at most 64 of) ``Xt`` recording every module's output, the
    input of ``head`` and the model's scores (``output`` selects them from a dict or tuple)."""
    torch = _torch()
    outputs: dict[str, Any] = {}
    order: list[str] = []
    head_in: list[Any] = []
    before: list[str] = []

    def flat(t: Any) -> Any:
        return t.detach().reshape(t.shape[0], -1).clone() if t.ndim >= 1 else t.detach()

    def make(nm: str) -> Callable[..., None]:
        def hook(_m: Any, _inp: Any, out: Any) -> None:
            if isinstance(out, torch.Tensor):
                outputs[nm] = flat(out)
                order.append(nm)

        return hook

    def pre(_m: Any, inp: Any) -> None:
        if inp and isinstance(inp[0], torch.Tensor):
            head_in.append(flat(inp[0]))
            before[:] = order

    handles = []
    try:
        for nm, m in model.named_modules():
            if nm:
                handles.append(m.register_forward_hook(make(nm)))
        if head is not None:
            handles.append(head.register_forward_pre_hook(pre))
    except RuntimeError:  # e.g. a ScriptModule takes no hooks: nothing to check against
        for h in handles:
            h.remove()
        handles = []
    try:
        with _Modes(model), torch.no_grad():
            out = _call(model, Xt[:_TRACE_ROWS], name)
    finally:
        for h in handles:
            h.remove()
    outs = [] if isinstance(out, torch.Tensor) else \
        [(w, flat(t)) for w, t in _output_tensors(out) if t.ndim >= 1]
    if not isinstance(out, torch.Tensor) and output is not None:
        try:  # the scores chosen by output= (probe_fidelity); a bad selector is reported there
            out = _select(out, output)
        except InputError:
            pass
    model_out = flat(out) if isinstance(out, torch.Tensor) else None
    return _Trace(outputs, order, head_in[-1] if head_in else None, model_out, outs, before)


def _same(a: Any, b: Any) -> bool:
    torch = _torch()
    return a is not None and b is not None and a.shape == b.shape and bool(torch.equal(a, b))


def _output_heads(model: Any, tr: _Trace) -> list[tuple[str, str]]:
    """For a model whose output is a dict or tuple of tensors: ``(name, where)`` of each
    ``nn.Linear`` whose output is one of them (the last to run, per tensor), once each."""
    torch = _torch()
    heads: list[tuple[str, str]] = []
    for where, t in tr.model_outs:
        for nm in reversed(tr.order):
            if isinstance(model.get_submodule(nm), torch.nn.Linear) \
                    and _same(tr.outputs[nm], t):
                if nm not in [h for h, _ in heads]:
                    heads.append((nm, where))
                break
    return heads


def _several_heads(model: Any, heads: list[tuple[str, str]]) -> str:
    """The refusal for a dict or tuple output that holds several ``nn.Linear`` outputs."""
    which = ", ".join(f"{w} from {nm!r}" for nm, w in heads)
    return (
        f"the model's {type(model).__name__} output holds the outputs of "
        f"{len(heads)} nn.Linear modules ({which}), so the head that gives the scores is "
        f"ambiguous and the layer cannot be checked against it. Pass head= (e.g. "
        f"head={heads[0][0]!r})."
    )


def _auto_head(model: Any, tr: _Trace | None) -> Any:
    """The network's linear head: the last module of a Sequential, or the last ``nn.Linear``
    to run whose output is the model's output (for a dict or tuple output: the only
    ``nn.Linear`` whose output is one of its tensors); None when there is no such layer."""
    torch = _torch()
    if isinstance(model, torch.nn.Sequential) and len(model) > 1:
        if isinstance(model[-1], torch.nn.Linear):
            return model[-1]
        # a head followed by parameter-free modules only (softmax, dropout, ...)
        for j in range(len(model) - 1, 0, -1):
            if isinstance(model[j], torch.nn.Linear):
                return model[j]
            if next(model[j].parameters(), None) is not None:
                break
    if tr is None:
        return None
    if tr.model_out is None:
        heads = _output_heads(model, tr)
        return model.get_submodule(heads[0][0]) if len(heads) == 1 else None
    for nm in reversed(tr.order):
        mod = model.get_submodule(nm)
        if isinstance(mod, torch.nn.Linear) and _same(tr.outputs[nm], tr.model_out):
            return mod
    return None


def _resolve_head(model: Any, head: Any) -> Any:
    """``head`` given as a module or a name, as a module (None stays None)."""
    torch = _torch()
    if head is None:
        return None
    if isinstance(head, str):
        head = _module(model, head)
    if not isinstance(head, torch.nn.Linear):
        raise InputError(f"head must be a torch.nn.Linear or None, got {type(head).__name__}.")
    return head


def _feeding(model: Any, head: Any, tr: _Trace) -> str | None:
    """The name of the last module to run whose output is exactly the head's input."""
    if tr.head_in is None:
        return None
    inside = {nm for nm, m in model.named_modules() if any(c is head for c in m.modules())}
    for nm in reversed(tr.order):
        if nm not in inside and _same(tr.outputs[nm], tr.head_in):
            return nm
    return None


def _find_head(model: Any, Xt: Any, hd: Any, name: str,
               output: Any = None) -> tuple[Any, _Trace, list[tuple[str, str]]]:
    """The head (``hd`` when given, else :func:`_auto_head` on a traced forward pass), a
    trace that holds its input, and the candidates when a dict or tuple output holds several
    ``nn.Linear`` outputs (then the head is None: ambiguous)."""
    tr = _trace(model, Xt, hd if hd is not None else _auto_head(model, None), name, output)
    several: list[tuple[str, str]] = []
    if hd is None:
        hd = _auto_head(model, tr)
        if hd is None and tr.model_out is None:
            heads = _output_heads(model, tr)
            several = heads if len(heads) > 1 else []
        if hd is not None and tr.head_in is None:
            tr = _trace(model, Xt, hd, name, output)
    return hd, tr, several


def _feed_or_near(model: Any, head: Any, tr: _Trace) -> tuple[str | None, bool]:
    """The module to audit for ``head`` and whether its :math:`\\varphi` is read as the head's
    input (a forward pre-hook on the head): the module whose output is the head's input
    (False); else, when the head's input is computed inside ``forward()`` (e.g.
    ``F.relu(self.fc(x))``), the last module to return before the head, if its output has
    the shape of the head's input (True); else ``(None, False)``."""
    feed = _feeding(model, head, tr)
    if feed is not None or tr.head_in is None:
        return feed, False
    inside = {nm for nm, m in model.named_modules() if any(c is head for c in m.modules())}
    near = [nm for nm in tr.before_head if nm not in inside]
    if near and tr.outputs[near[-1]].shape == tr.head_in.shape:
        return near[-1], True
    return None, False


def head_input(model: Any, X: Any = None, *, head: Any = None) -> tuple[str, Any]:
    """The name of the module whose output the network's linear head reads, and the head.

    That module's output is the representation :math:`\\varphi` of Proposition 1 to audit
    (eq. 3-4): only on it does :meth:`TorchCaseInfluence.write_readout` turn the network's
    own head into the OLS readout.

    Parameters
    ----------
    model : torch.nn.Module
        For an ``nn.Sequential`` ending in an ``nn.Linear`` head the answer needs no input
        (the module just before the head). Any other model needs ``X``.
    X : array-like or torch.Tensor of shape (n, ...), optional
        A few inputs: one forward pass on (at most 64 of) them shows which module's output
        the head reads (the last module whose output equals the head's input).
    head : torch.nn.Linear or str, optional
        The head (or its name); default the last module of a Sequential, or the last
        ``nn.Linear`` to run whose output is the model's output.

    Returns
    -------
    layer : str
        Name of the module that feeds the head (pass it as ``layer``). When the head's input
        is computed inside ``forward()`` (e.g. ``self.head(F.relu(self.fc(x)))``), the last
        module to run before the head whose output has the shape of the head's input
        (``"fc"``): :class:`TorchCaseInfluence` then reads :math:`\\varphi` as the head's
        input itself, with a forward pre-hook on the head (``reads_head_input_``).
    head : torch.nn.Linear
        For a model that returns a dict or tuple: the only ``nn.Linear`` whose output is one
        of its tensors.

    Raises
    ------
    InputError
        When no linear head is found (or a dict or tuple output holds the outputs of several
        ``nn.Linear``: pass ``head=``), or no module of the head input's shape runs before
        the head.
    """
    torch = _torch()
    _check_model(model)
    hd = _resolve_head(model, head)
    if X is None:
        if isinstance(model, torch.nn.Sequential) and len(model) >= 2 \
                and isinstance(model[-1], torch.nn.Linear) and hd in (None, model[-1]):
            return str(len(model) - 2), model[-1]
        if not (isinstance(model, torch.nn.Sequential) and len(model) >= 2
                and isinstance(model[-1], torch.nn.Linear)) and hd is None:
            raise InputError(
                "head_input(model) without X needs an nn.Sequential of at least two modules "
                "ending in an nn.Linear head; for any other model pass a few inputs, "
                "head_input(model, X), so that one forward pass shows which module feeds the "
                "head."
            )
        raise InputError("head_input(model, head=...) needs X: pass a few inputs as well.")
    return _head_input(model, X, hd)[:2]


def _head_input(model: Any, X: Any, hd: Any) -> tuple[str, Any, bool]:
    """:func:`head_input` with ``X``, and whether the head's input is computed inside
    ``forward()`` from the named module's output (:func:`_feed_or_near`)."""
    hd, tr, several = _find_head(model, _as_tensor(model, X, "X"), hd, "X")
    if hd is None:
        raise InputError(
            _several_heads(model, several) if several else
            "no linear head found: model is not an nn.Sequential ending in an nn.Linear and "
            "no nn.Linear produces its output (or one of the tensors of its dict or tuple "
            "output). Pass head= (the nn.Linear that gives the scores)."
        )
    name, pre = _feed_or_near(model, hd, tr)
    if name is None:
        raise InputError(
            f"no submodule of model outputs the input of the head {_describe(model, hd)}, and "
            "none of its shape runs just before the head: it is computed inside forward(). "
            "Wrap that step in a module (nn.ReLU(), nn.Flatten(), ...) so that its output can "
            "be read."
        )
    return name, hd, pre


def _check_layer(
    model: Any, mod: Any, head: Any, Xt: Any, name: str, output: Any = None
) -> tuple[Any, bool]:
    """Refuse the head, the whole model, a layer of another width (and, for a dict or tuple
    output holding several ``nn.Linear`` outputs, a model without ``head=``); warn on a layer
    that is not the head's input (pre-activation).

    Returns the head the layer was checked against (given, or found by :func:`_auto_head`;
    None when there is none) and whether :math:`\\varphi` is to be read as the head's input
    by a forward pre-hook: ``mod`` is the last module to run before the head and the head's
    input is computed from its output inside ``forward()`` (e.g. ``F.relu``).
    """
    torch = _torch()
    hd = head if head is not None and any(m is head for m in model.modules()) else None
    hd, tr, several = _find_head(model, Xt, hd, name, output)
    feed, via_pre = (None, False) if hd is None else _feed_or_near(model, hd, tr)
    fix = (
        f"Pass the layer that feeds the head: layer={feed!r} (cbdt.torch.head_input(model) "
        "finds it)."
        + (" Its output reaches the head through operations inside forward(), so phi is "
           "read as the head's input." if via_pre else "")
        if feed is not None
        else "Pass the layer whose output the head reads (cbdt.torch.head_input(model, X) "
        "finds it)."
    )
    lname = _name_of(model, mod)
    if mod is model:
        raise InputError(
            f"layer is the whole model ({type(model).__name__}): its output is the network's "
            f"scores, not a representation phi. {fix}"
        )
    if several:
        raise InputError(_several_heads(model, several))
    out = tr.outputs.get(lname or "")
    if hd is not None and any(m is hd for m in mod.modules()):
        what = "is the head" if mod is hd else f"contains the head {_describe(model, hd)}"
        raise InputError(
            f"layer {lname!r} ({type(mod).__name__}) {what}: its output is the network's "
            "scores (logits), so a probe on it only re-fits the scores and probe_fidelity "
            f"would report a perfect match that says nothing. {fix}"
        )
    hd_out = None if hd is None else tr.outputs.get(_name_of(model, hd) or "")
    if out is not None and (_same(out, tr.model_out) or _same(out, hd_out)):
        whose = "the model's output" if _same(out, tr.model_out) else \
            f"the output of the head {_describe(model, hd)}"
        raise InputError(
            f"layer {lname!r} ({type(mod).__name__}) outputs the network's scores (its output "
            f"is {whose}), not a representation phi. {fix}"
        )
    if hd is None or out is None:
        return hd, False
    width = int(out.shape[1]) if out.ndim == 2 else 1
    if width != hd.in_features:
        raise InputError(
            f"layer {lname!r} ({type(mod).__name__}) gives {width} features per input, but the "
            f"head {_describe(model, hd)} reads {hd.in_features}: a probe on it is not the "
            f"readout of the representation the head uses. {fix} To compare other layers use "
            "cbdt.torch.layer_fidelity."
        )
    if via_pre and lname == feed:
        return hd, True  # phi = the head's input, read by a forward pre-hook on the head
    if tr.head_in is not None and not _same(out, tr.head_in):
        kind = "an nn.Linear (pre-activation)" if isinstance(mod, torch.nn.Linear) else \
            "not the head's input"
        warnings.warn(
            f"layer {lname!r} ({type(mod).__name__}) is {kind}: its output goes through "
            f"further operations (e.g. the activation) before the head {_describe(model, hd)} "
            "reads it, so the probe is not fitted on the representation the network uses and "
            "write_readout would change the network's decisions. "
            + (f"Pass layer={feed!r} instead (cbdt.torch.head_input(model))."
               if feed is not None and not via_pre else fix),
            LayerWarning,
            stacklevel=4,
        )
    return hd, False


# ---------------------------------------------------------------------- rank diagnosis
def _units(idx: np.ndarray) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:20])
    return f"[{shown}{', ...' if idx.size > 20 else ''}]"


def _unit_diagnosis(Phi: np.ndarray, intercept: bool) -> str:
    """Which columns of ``Phi`` are dead (all zero) or constant on the training inputs."""
    dead = np.flatnonzero(~Phi.any(axis=0))
    const = np.flatnonzero((np.ptp(Phi, axis=0) == 0) & Phi.any(axis=0))
    parts = []
    if dead.size:
        parts.append(f"{dead.size} dead unit(s) (zero on every training input) {_units(dead)}")
    if const.size:
        parts.append(
            f"{const.size} constant unit(s) {_units(const)}"
            + (" (collinear with the intercept)" if intercept else "")
        )
    if not parts:
        return "no unit is dead or constant: some units are linear combinations of others"
    return "; ".join(parts)


def _rank_text(exc: RankDeficientError, where: str, Phi: np.ndarray, intercept: bool) -> str:
    cols = f"{exc.dim} columns" + (" (the intercept included)" if intercept else "")
    if exc.rank < exc.dim:
        head = f"the representation at {where} is rank-deficient: numerical rank {exc.rank} of {cols}"
    else:
        head = (
            f"the representation at {where} is too ill-conditioned for the exact solve: "
            f"condition number {exc.condition_number:.3e} of G (rank {exc.rank} of {cols})"
        )
    return f"{head}; {_unit_diagnosis(Phi, intercept)}."


# ---------------------------------------------------------------------- the estimator
def _fingerprint(model: Any, layer: str | None, head: str | None) -> list[list[Any]]:
    """The audited part of ``model``: ``[name, shape, sha256]`` of every parameter and
    persistent buffer (``state_dict`` order) of the modules up to ``layer`` and of ``head``.

    "Up to ``layer``" is registration order (``named_modules``): the modules before it, its
    ancestors, itself and its submodules, which compute :math:`\\varphi` in every usual
    network (a ``Sequential``, or a ``forward`` that calls its modules in the order
    ``__init__`` made them). The hash is that of the values as float64 (C order), so it does
    not depend on the dtype a float32/float64 copy of the network keeps, nor on the device.

    Parameters
    ----------
    model : torch.nn.Module
    layer : str or None
        The audited layer's name in ``model``; None: the whole model.
    head : str or None
        The head's name; None: no head.

    Returns
    -------
    list of [str, list of int, str]
    """
    import hashlib

    torch = _torch()
    keep: set[str] = set()
    seen = False
    for name, _mod in model.named_modules():
        inside = layer is not None and (name == layer or name.startswith(layer + "."))
        if seen and not inside:
            break
        seen = seen or inside
        keep.add(name)
    out: list[list[Any]] = []
    for key, value in model.state_dict(keep_vars=True).items():
        owner = key.rpartition(".")[0]
        in_head = head is not None and (owner == head or owner.startswith(head + "."))
        if not (owner in keep or in_head):
            continue
        t = value.detach().cpu()
        t = t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)
        digest = hashlib.sha256(np.ascontiguousarray(t.numpy()).tobytes()).hexdigest()
        out.append([key, list(t.shape), digest])
    return out


def _fingerprint_difference(saved: list[list[Any]], now: list[list[Any]]) -> str | None:
    """How ``now`` first differs from ``saved`` (by position: shapes, then values), or None.

    Parameters named differently but equal in shape and values (a wrapped or renamed
    module) are the same network.
    """
    for i in range(max(len(saved), len(now))):
        if i >= len(now):
            name, shape, _ = saved[i]
            return (f"the audited network's parameter {name!r} (shape {tuple(shape)}) has no "
                    "counterpart in this model")
        if i >= len(saved):
            name, shape, _ = now[i]
            return (f"this model has a parameter {name!r} (shape {tuple(shape)}) the audited "
                    "network did not have")
        (s_name, s_shape, s_hash), (name, shape, digest) = saved[i], now[i]
        also = "" if s_name == name else f" (in the audited network {s_name!r})"
        if list(s_shape) != list(shape):
            return (f"parameter {name!r}{also} has shape {tuple(shape)} in this model but "
                    f"{tuple(s_shape)} in the audited network")
        if s_hash != digest:
            return (f"parameter {name!r}{also} holds other values than in the audited network "
                    f"(sha256 of its float64 values {digest[:12]}... instead of {s_hash[:12]}...)")
    return None


def _read_fingerprint(entry: np.ndarray, path: Any) -> dict[str, Any]:
    """The fingerprint stored by :meth:`TorchCaseInfluence.save`, checked."""
    try:
        fp = json.loads(str(entry))
        params = fp["params"]
        ok = all(
            isinstance(p, list) and len(p) == 3 and isinstance(p[0], str)
            and isinstance(p[1], list) and isinstance(p[2], str)
            for p in params
        )
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        raise InputError(
            f"{path!s} is damaged or was not written by TorchCaseInfluence.save: its "
            "'torch_fingerprint' entry cannot be read. Refit and save it again."
        )
    return fp


def _holds_readout(ci: Any, head: Any) -> bool:
    """Whether ``head`` holds the readout of ``ci`` as :meth:`TorchCaseInfluence.write_readout`
    writes it (then only the head differs from the audited network, by the audit's design)."""
    torch = _torch()
    if not isinstance(head, torch.nn.Linear):
        return False
    W = head.weight.detach().cpu()
    if tuple(W.shape) != tuple(ci.readout_.T.shape):
        return False
    if not torch.equal(W, torch.as_tensor(ci.readout_.T, dtype=W.dtype)):
        return False
    if head.bias is None:
        return not ci.intercept
    b = ci.intercept_ if ci.intercept else np.zeros(ci.n_actions_)
    bias = head.bias.detach().cpu()
    return bool(torch.equal(bias, torch.as_tensor(b, dtype=bias.dtype)))


class TorchCaseInfluence(CaseInfluence):
    """A :class:`~cbdt.influence.CaseInfluence` on a torch model's layer (Captum style).

    ``TorchCaseInfluence(model, layer).fit(X, R)`` reads :math:`\\Phi = \\varphi(X)` at
    ``layer`` (:func:`features`) and fits the exact decomposition
    :math:`Q(x, a) = \\sum_i \\alpha_i(x) r_i(a)` (Prop. 1, eq. 6-10) on it. Besides
    everything ``CaseInfluence`` answers, :meth:`phi` maps raw inputs to :math:`\\varphi(x)`
    and :meth:`write_readout` makes the network's own head the OLS readout.

    ``get_params`` includes ``model``, ``layer`` and ``head`` (modules of ``model`` as their
    names), so ``sklearn.base.clone`` gives an unfitted copy on a deep copy of the model.

    Parameters
    ----------
    model : torch.nn.Module
        The trained network (frozen: only read).
    layer : torch.nn.Module or str
        The layer whose output is :math:`\\varphi`: the input of the network's linear head
        (:func:`head_input`). Checked at ``fit`` against the head (the last module of an
        ``nn.Sequential``, the last ``nn.Linear`` giving the model's output or, for a model
        that returns a dict or tuple, the only ``nn.Linear`` whose output is one of its
        tensors, or ``head``): the head itself, the whole model, a layer containing the head
        or a layer whose width differs from the head's input raise
        :class:`~cbdt.exceptions.InputError`, and so does a dict or tuple output holding the
        outputs of several ``nn.Linear`` without ``head=``; a layer of the right width that
        is not the head's input (a pre-activation ``nn.Linear``) warns
        :class:`~cbdt.exceptions.LayerWarning`. When ``forward()`` computes the head's input
        from the layer's output itself (``self.head(F.relu(self.fc(x)))`` with
        ``layer="fc"``, the last module to run before the head), :math:`\\varphi` is read as
        the head's input, by a forward pre-hook on the head (``reads_head_input_``).
    head : torch.nn.Linear or str, optional
        The network's head on :math:`\\varphi`. When ``intercept`` is None the intercept
        follows its bias; :meth:`write_readout` writes into it by default.
    intercept : bool, optional
        Absorb a constant coordinate (Sec. 2.2); default None: the head's
        ``bias is not None``, or True without a head (a probe with an intercept, like an
        ``nn.Linear`` head). Resolved (and stored back) at ``fit``.
    solver : {"auto", "cholesky", "lstsq"}, default="auto"
        ``"auto"`` is the exact Cholesky solve and, when the layer is rank-deficient (dead
        ReLU units, constant units), falls back to the minimum-norm ``"lstsq"`` with a
        :class:`~cbdt.exceptions.SolverFallbackWarning` naming the units; ``"cholesky"``
        raises :class:`~cbdt.exceptions.RankDeficientError` instead; ``"lstsq"`` is silent.
        ``solver_`` records the solver that ran.
    batch_size : int, default=1024
        Inputs per forward pass, and queries answered at once.
    **params
        The other :class:`~cbdt.influence.CaseInfluence` parameters (``ridge``,
        ``ridge_metric``, ``max_condition``, ``chunk_size``, ...).

    Attributes
    ----------
    model_ : torch.nn.Module
    layer_ : torch.nn.Module
        The layer whose output is :math:`\\varphi`.
    layer_name_ : str
        Its name in ``model`` (what :meth:`save` stores).
    head_ : torch.nn.Linear or None
        The head the layer was checked against (``head``, or the one found).
    reads_head_input_ : bool
        Whether :math:`\\varphi` is the head's input read by a forward pre-hook on
        ``head_`` (the head's input is computed from ``layer``'s output inside
        ``forward()``, e.g. ``F.relu``) rather than ``layer``'s output.
    input_names_in_ : ndarray of str objects, shape (d,)
        The string column names of an ``X`` DataFrame given to ``fit`` (absent otherwise):
        :meth:`phi` refuses a DataFrame with other or reordered columns (select them with
        ``X[est.input_names_in_]``) and reads an array by position. ``feature_names_in_``
        would name the units of :math:`\\varphi`, which have no names.

    The fit also records a fingerprint of the audited network (names, shapes and sha256 of
    the parameters and buffers of the layers up to ``layer`` and of the head), which
    :meth:`save` stores and :func:`load` checks.

    Examples
    --------
    >>> import numpy as np, torch, cbdt
    >>> from cbdt import torch as ct
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
    ...                             torch.nn.Linear(8, 2))
    >>> X = np.random.default_rng(0).normal(size=(100, 4)).astype(np.float32)
    >>> R = np.c_[X[:, 0], -X[:, 0]]
    >>> ci = ct.TorchCaseInfluence(model, "1").fit(X, R)
    >>> phi = ci.phi(X[:3])
    >>> bool(np.allclose(ci.coefficients(phi) @ R, ci.scores(phi)))
    True
    """

    _TORCH_PARAMS: tuple[str, ...] = ("model", "layer", "head")

    def __init__(
        self,
        model: Any = None,
        layer: Any = None,
        *,
        head: Any = None,
        intercept: bool | None = None,
        **params: Any,
    ) -> None:
        super().__init__(intercept=intercept, **params)  # type: ignore[arg-type]
        self.model = model
        self.layer = layer
        self.head = head

    # shown first, by name; not again among the parameters that differ from their defaults
    _REPR_ALWAYS = (*CaseInfluence._REPR_ALWAYS, *_TORCH_PARAMS)

    def __repr__(self) -> str:
        base = super().__repr__().partition("(")[2]
        layer = self._param_name(self.layer)
        model = "None" if self.model is None else type(self.model).__name__
        head = "" if self.head is None else f"head={self._param_name(self.head)!r}, "
        return f"TorchCaseInfluence(model=<{model}>, layer={layer!r}, {head}{base}"

    def _param_name(self, value: Any) -> Any:
        """A submodule of ``model`` as its name (what survives a deep copy of the model)."""
        torch = _torch() if self.model is not None else None
        if torch is not None and isinstance(value, torch.nn.Module) and value is not self.model:
            name = _name_of(self.model, value)
            if name:
                return name
        return value

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn's ``get_params``; ``clone`` works).

        ``layer`` and ``head`` given as modules of ``model`` come back as their names, so
        that a clone (which deep-copies the model) reads the same layer of its own copy.

        Parameters
        ----------
        deep : bool, default=True
            Accepted for compatibility; there are no nested estimators.

        Returns
        -------
        dict
        """
        params = super().get_params(deep)
        params.update(
            model=self.model, layer=self._param_name(self.layer),
            head=self._param_name(self.head),
        )
        return params

    def set_params(self, **params: Any) -> TorchCaseInfluence:
        """Set constructor parameters (scikit-learn convention); refit to apply them.

        Returns
        -------
        self
        """
        for key in self._TORCH_PARAMS:
            if key in params:
                setattr(self, key, params.pop(key))
        super().set_params(**params)
        return self

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, R: Any, *, case_ids: Any = None, **fit_params: Any) -> TorchCaseInfluence:
        """Read :math:`\\Phi = \\varphi(X)` at ``layer`` and fit the decomposition (Prop. 1).

        Parameters
        ----------
        X : array-like, pandas.DataFrame or torch.Tensor of shape (n, ...)
            Training inputs :math:`x_i`, as ``model`` takes them. A DataFrame's string
            column names become :attr:`input_names_in_`.
        R : array-like of shape (n, |A|) or (n,)
            Action-conditional returns :math:`r_i(a)` (eq. 5; for a classifier
            :func:`cbdt.returns_from_labels`). Paired with ``X`` by position: as pandas
            objects both must have equal indexes (else
            :class:`~cbdt.exceptions.InputError`; align with ``R.loc[X.index]``).
        case_ids : array-like of shape (n,) or pandas.Index, optional
            Labels of the training cases; default the index of ``X`` when it is a pandas
            DataFrame with a non-default index.
        **fit_params
            Passed to :meth:`CaseInfluence.fit <cbdt.influence.CaseInfluence.fit>` (e.g.
            ``action_names``).

        Returns
        -------
        self : TorchCaseInfluence

        Raises
        ------
        InputError
            For a ``layer`` that is the head, the whole model, or of another width than the
            head's input (the message names the layer that feeds the head), and for inputs
            of the wrong width or with NaN/inf (naming rows and columns).
        RankDeficientError
            With ``solver="cholesky"`` on a rank-deficient layer (naming dead and constant
            units).
        """
        return self._fit(X, R, case_ids=case_ids, check_layer=True, fit_params=fit_params)

    def _fit(
        self, X: Any, R: Any, *, case_ids: Any, check_layer: bool, fit_params: dict[str, Any],
        name: str = "X", output: Any = None,
    ) -> TorchCaseInfluence:
        torch = _torch()
        if self.model is None:
            raise InputError(
                "TorchCaseInfluence needs the model: TorchCaseInfluence(model, layer).fit(X, R). "
                "For a representation Phi you computed yourself use "
                "cbdt.CaseInfluence().fit(Phi, R)."
            )
        model = self.model
        _check_model(model)
        if self.layer is None:
            raise InputError(
                "TorchCaseInfluence needs the layer whose output is phi: "
                "TorchCaseInfluence(model, layer); cbdt.torch.head_input(model) names the "
                "layer that feeds the head."
            )
        mod = _module(model, self.layer)
        head = _resolve_head(model, self.head)
        if self.intercept is not None and not isinstance(self.intercept, bool | np.bool_):
            raise InputError(f"intercept must be True, False or None, got {self.intercept!r}.")
        batch = _check_batch_size(self.batch_size)
        # pandas X and R: rows are paired by position, so their indexes must be equal
        check_same_index(X, R, x_name=name, r_name="R_train" if name == "X_train" else "R")
        Xt = _as_tensor(model, X, name)
        checked, pre = _check_layer(model, mod, head, Xt, name, output) if check_layer \
            else (None, False)
        dtypes: list[Any] = []
        # pre: phi is the head's input (F.relu(...) inside forward), read by a pre-hook
        Phi = _features(model, checked if pre else mod, Xt, batch, name, dtypes, pre=pre)
        # rank is judged in the layer's precision (float32's eps for a float32 network)
        phi_eps = dtype_eps(torch.empty(0, dtype=dtypes[0])) if dtypes else None
        ids = check_case_ids(case_ids, Phi.shape[0], X)
        if self.intercept is None:
            self.intercept = True if head is None else head.bias is not None
        where = f"layer {_name_of(model, mod)!r} ({type(mod).__name__})"
        if pre:  # phi was read at the head's input, after forward()'s own operations
            where = f"the input of the head {_describe(model, checked)} (after {where})"
        solver = self.solver
        try:
            self._phi_eps = phi_eps
            CaseInfluence.fit(self, Phi, R, case_ids=ids, **fit_params)
        except RankDeficientError as exc:
            if solver not in ("auto", "cholesky"):
                raise
            text = _rank_text(exc, where, Phi, bool(self.intercept))
            if solver == "cholesky":
                raise RankDeficientError(
                    f"{text} solver='cholesky' needs full column rank (Proposition 1). Pass "
                    "from_torch(model, layer, X, R, solver='lstsq') (or "
                    "TorchCaseInfluence(model, layer, solver='lstsq')) for the minimum-norm "
                    "coefficients, solver='auto' to fall back to them with a warning, "
                    "ridge=lam > 0 (eq. 11), or choose another layer.",
                    rank=exc.rank, dim=exc.dim, condition_number=exc.condition_number,
                ) from exc
            warnings.warn(
                f"{text} The exact solve of Proposition 1 needs full column rank, so the "
                "minimum-norm solver 'lstsq' was used (solver_ = 'lstsq': alpha = Phi G^+ "
                "phi(x)). To silence this warning pass solver='lstsq', or choose another layer.",
                SolverFallbackWarning,
                stacklevel=3,
            )
            self.solver = "lstsq"
            try:
                self._phi_eps = phi_eps
                CaseInfluence.fit(self, Phi, R, case_ids=ids, **fit_params)
            finally:
                self.solver = solver
        self.model_, self.layer_, self.head_ = model, mod, head if head is not None else checked
        self.layer_name_ = _name_of(model, mod)
        self.reads_head_input_ = pre
        if self.head_ is None:
            auto = _auto_head(model, None)
            self.head_ = auto if isinstance(auto, torch.nn.Linear) else None
        check_feature_names(self, X, reset=True, name=name, attr="input_names_in_")
        # the audited network, as it is now: what save stores and load checks
        head_name = None if self.head_ is None else _name_of(model, self.head_)
        self._fingerprint = {
            "layer": self.layer_name_, "head": head_name,
            "params": _fingerprint(model, self.layer_name_, head_name),
        }
        return self

    # ------------------------------------------------------------------ queries
    def _check_model_attached(self) -> None:
        self._check_fitted()
        if getattr(self, "model_", None) is None:
            raise NotFittedError(
                "This TorchCaseInfluence has no model: a torch model is not saved with the "
                "audit. Use cbdt.torch.load(path, model, layer) to attach the model, or "
                "pass phi = cbdt.torch.features(model, layer, X) to the query methods."
            )

    def _width(self) -> int:
        return int(self.n_features_in_)

    def phi(self, X: Any, *, batch_size: int | None = None) -> np.ndarray:
        """:math:`\\varphi(x)` of raw inputs ``X`` (:func:`features` at the fitted layer).

        Parameters
        ----------
        X : array-like or torch.Tensor of shape (m, ...)
        batch_size : int, optional
            Inputs per forward pass; default the estimator's ``batch_size``.

        Returns
        -------
        ndarray of shape (m, H)
        """
        return self._phi(X, batch_size=batch_size, name="X")

    def _phi(self, X: Any, *, batch_size: int | None, name: str) -> np.ndarray:
        self._check_model_attached()
        batch = _check_batch_size(self.batch_size if batch_size is None else batch_size)
        check_feature_names(self, X, reset=False, name=name, attr="input_names_in_", fix_var=name)
        pre = bool(getattr(self, "reads_head_input_", False)) and self.head_ is not None
        Phi = _features(self.model_, self.head_ if pre else self.layer_,
                        _as_tensor(self.model_, X, name), batch, name, pre=pre)
        if Phi.shape[1] != self._width():
            raise InputError(
                f"layer {self.layer_name_!r} gives {Phi.shape[1]} features per input but the "
                f"audit was fitted on H = {self._width()}: attach the model and layer it was "
                "fitted on (cbdt.torch.load(path, model, layer))."
            )
        return Phi

    def write_readout(self, head: Any = None) -> Any:
        """Write the readout :math:`V` (eq. 8) into ``head``, an ``nn.Linear`` on :math:`\\varphi`.

        Afterwards the network's own scores are the probe's, :math:`Q_{nn}(x, a) =
        \\varphi(x)^\\top v_a + b_a = \\sum_i \\alpha_i(x) r_i(a)` (Prop. 1), to the head's
        float precision, provided ``head`` reads exactly the fitted layer's output.

        Parameters
        ----------
        head : torch.nn.Linear, optional
            ``in_features = H``, ``out_features = |A|``; with ``intercept=True`` it must have a
            bias (set to the intercepts); without, a bias is set to zero. Default: the head
            the layer was checked against at ``fit`` (``head_``).

        Returns
        -------
        head
        """
        torch = _torch()
        self._check_fitted()
        if head is None:
            head = getattr(self, "head_", None)
            if head is None:
                raise InputError("no head known: pass the nn.Linear to write into, "
                                 "write_readout(head).")
        if not isinstance(head, torch.nn.Linear):
            raise InputError(f"head must be a torch.nn.Linear, got {type(head).__name__}.")
        H, A = self._width(), self.n_actions_
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

    # ------------------------------------------------------------------ persistence
    def save(self, path: Any, *, include_phi: bool = True) -> None:
        """Write the fitted audit to an ``.npz`` file (no pickle), with the layer's name.

        The model itself is not stored (it is the user's); :func:`load` attaches it again:
        ``cbdt.torch.load(path, model)``. The file keeps the fingerprint of the audited
        network taken at ``fit`` (``torch_fingerprint``: name, shape and sha256 of the
        float64 values of each parameter and buffer of the layers up to ``layer`` and of the
        head), which :func:`load` checks, and :attr:`input_names_in_`. Both entries are
        optional: files written before them are still read.

        Parameters
        ----------
        path : str or path-like
            Target file; numpy appends ``.npz`` when missing.
        include_phi : bool, default=True
            As in :meth:`CaseInfluence.save <cbdt.influence.CaseInfluence.save>`.
        """
        if not isinstance(path, str | os.PathLike | io.BytesIO):  # a file: zip in memory first
            buf = io.BytesIO()
            self.save(buf, include_phi=include_phi)
            path.write(buf.getvalue())
            return
        super().save(path, include_phi=include_phi)
        extra = {"torch_layer": getattr(self, "layer_name_", None)}
        head = getattr(self, "head_", None)
        model = getattr(self, "model_", None)
        extra["torch_head"] = (
            getattr(self, "_head_name", None) if head is None or model is None
            else _name_of(model, head)
        )
        fingerprint = getattr(self, "_fingerprint", None)  # taken at fit (or read by load)
        extra["torch_fingerprint"] = None if fingerprint is None else json.dumps(fingerprint)
        names = getattr(self, "input_names_in_", None)
        extra["torch_input_names"] = None if names is None else names.astype(str)
        # phi read as the head's input (F.relu inside forward): load reads it the same way
        extra["torch_reads_head_input"] = True if getattr(self, "reads_head_input_", False) \
            else None
        target = os.fspath(path) if not isinstance(path, io.BytesIO) else path
        if isinstance(target, str) and not target.endswith(".npz"):
            target += ".npz"
        if isinstance(target, io.BytesIO):
            target.seek(0)
        with zipfile.ZipFile(target, "a") as z:
            for key, value in extra.items():
                if value is not None:
                    buf = io.BytesIO()
                    np.save(buf, np.array(value))
                    z.writestr(f"{key}.npy", buf.getvalue())

    @classmethod
    def load(cls, path: Any) -> TorchCaseInfluence:
        """Read an audit written by :meth:`save`, without its model.

        The result answers every query on :math:`\\varphi` (``coefficients``, ``scores``,
        ``explain`` ...); :meth:`phi` raises until a model is attached: use
        :func:`cbdt.torch.load` ``(path, model, layer)``.

        Returns
        -------
        TorchCaseInfluence
        """
        ci = super().load(path)
        if hasattr(path, "seek"):
            path.seek(0)
        with open_npz(path, "TorchCaseInfluence") as f:
            ci.layer_name_ = str(f["torch_layer"]) if "torch_layer" in f else None
            ci._head_name = str(f["torch_head"]) if "torch_head" in f else None
            # written since the network's fingerprint and the inputs' names are kept; an
            # older file has neither (and is still read)
            ci._fingerprint = (
                _read_fingerprint(f["torch_fingerprint"], path)
                if "torch_fingerprint" in f else None
            )
            if "torch_input_names" in f:
                ci.input_names_in_ = f["torch_input_names"].astype(object)
                ci.input_names_in_.setflags(write=False)
            ci.reads_head_input_ = bool(f["torch_reads_head_input"]) \
                if "torch_reads_head_input" in f else False
        ci.layer = ci.layer_name_
        ci.model_ = ci.layer_ = ci.head_ = None
        return ci  # type: ignore[return-value]


def _check_fingerprint(ci: Any, model: Any, layer: str | None, path: Any) -> None:
    """Raise unless ``model`` is the network ``ci`` was fitted on (its stored fingerprint).

    A head that differs only by holding this audit's readout (``write_readout``) is the
    audited network. A file without a fingerprint (older cbdt) warns that it cannot check.
    """
    fp = getattr(ci, "_fingerprint", None)
    if fp is None:
        warnings.warn(
            f"{path!s} stores no fingerprint of the audited network (it was written by an "
            "older cbdt), so cbdt.torch.load cannot check that `model` is that network; "
            "make sure it has the audited weights, or refit and save the audit again.",
            UserWarning,
            stacklevel=3,
        )
        return
    head = fp.get("head")
    saved = fp["params"]
    now = _fingerprint(model, layer, head)
    diff = _fingerprint_difference(saved, now)
    if diff is None:
        return
    if head and len(now) == len(saved):
        differing = [n[0] for n, s in zip(now, saved, strict=True) if n[1:] != list(s[1:])]
        try:
            head_mod = model.get_submodule(head)
        except AttributeError:
            head_mod = None
        if head_mod is not None and all(
            d.rpartition(".")[0] == head or d.startswith(head + ".") for d in differing
        ) and _holds_readout(ci, head_mod):
            return  # the head holds this audit's own readout (write_readout)
    where = f"the layers up to {fp.get('layer')!r}" + (f" and the head {head!r}" if head else "")
    raise InputError(
        f"the model passed to cbdt.torch.load is not the network the audit in {path!s} was "
        f"fitted on: {diff}. The audit's coefficients, scores and cases describe the audited "
        f"network ({where}, fingerprinted at fit). Load it with the network that was audited "
        "(the same weights, e.g. its saved state_dict), or refit the audit on this network: "
        "cbdt.torch.from_torch(model, layer, X_train, R_train)."
    )


def load(path: Any, model: Any, layer: Any = None) -> TorchCaseInfluence:
    """A saved torch audit (:meth:`TorchCaseInfluence.save`) with its model attached again.

    The file holds a fingerprint of the audited network (names, shapes and sha256 of the
    float64 values of the parameters and buffers of the layers up to ``layer`` and of the
    head, taken at ``fit``); ``model`` must match it.

    Parameters
    ----------
    path : str or path-like
    model : torch.nn.Module
        The network the audit was fitted on (the same weights; a head into which
        :meth:`TorchCaseInfluence.write_readout` wrote this audit's readout is accepted).
    layer : torch.nn.Module or str, optional
        The layer whose output is :math:`\\varphi`; default the name stored in the file.

    Returns
    -------
    TorchCaseInfluence
        Fitted, with ``phi``, every query method and ``write_readout`` working.

    Raises
    ------
    InputError
        When ``model`` differs from the audited network, naming the first differing
        parameter (another shape or other values) and how to proceed.

    Warns
    -----
    UserWarning
        For a file written before the fingerprint was stored (it cannot be checked).
    """
    _check_model(model)
    ci = TorchCaseInfluence.load(path)
    if layer is None:
        layer = ci.layer_name_
        if layer is None:
            raise InputError(
                f"{path!s} stores no layer name (it was not written by TorchCaseInfluence.save); "
                "pass it: cbdt.torch.load(path, model, layer)."
            )
    mod = _module(model, layer)
    head_name = getattr(ci, "_head_name", None)
    head = None
    if head_name:
        try:
            head = model.get_submodule(head_name)
        except AttributeError:
            head = None
    _check_fingerprint(ci, model, _name_of(model, mod), path)
    ci.model = ci.model_ = model
    ci.layer_, ci.layer_name_ = mod, _name_of(model, mod)
    ci.layer = ci.layer_name_
    ci.head_ = head if head is not None else _auto_head(model, None)
    ci.head = head_name or None
    if ci.reads_head_input_ and ci.head_ is None:
        raise InputError(
            f"{path!s} reads phi as the input of the head {head_name!r}, but model has no "
            "such submodule: pass the network the audit was fitted on."
        )
    return ci


def from_torch(
    model: Any,
    layer: Any,
    X_train: Any,
    R_train: Any,
    *,
    head: Any = None,
    ridge: float = 0.0,
    intercept: bool | None = None,
    solver: Literal["auto", "cholesky", "lstsq"] = "auto",
    batch_size: int = 1024,
    case_ids: Any = None,
    **params: Any,
) -> TorchCaseInfluence:
    """Fit the case-influence decomposition on a torch model's representation (Prop. 1).

    The one-line shortcut of ``TorchCaseInfluence(model, layer, head=head, ...).fit(X_train,
    R_train, case_ids=case_ids)``.

    Parameters
    ----------
    model : torch.nn.Module
    layer : torch.nn.Module or str
        The layer whose output is :math:`\\varphi`: the input of the head
        (:func:`head_input`). The head, the whole model, or a layer of another width are
        refused; a pre-activation layer warns (:class:`TorchCaseInfluence`).
    X_train : array-like or torch.Tensor of shape (n, ...)
    R_train : array-like of shape (n, |A|)
        Action-conditional returns (for a classifier, :func:`cbdt.returns_from_labels`).
    head : torch.nn.Linear or str, optional
        The network's head on :math:`\\varphi`; when given and ``intercept`` is None, the
        intercept follows the head's bias.
    ridge : float, default=0.0
        Eq. 11; 0 is the OLS probe of Proposition 1.
    intercept : bool, optional
        Absorb a constant coordinate; default: the head's ``bias is not None``, or True without
        a head (a probe with an intercept, like an ``nn.Linear`` head).
    solver : {"auto", "cholesky", "lstsq"}, default="auto"
        ``"auto"`` falls back to the minimum-norm ``"lstsq"`` on a rank-deficient layer with a
        :class:`~cbdt.exceptions.SolverFallbackWarning` naming the dead and constant units;
        ``"cholesky"`` raises :class:`~cbdt.exceptions.RankDeficientError` instead.
    batch_size : int, default=1024
        Inputs per forward pass.
    case_ids : array-like of shape (n,) or pandas.Index, optional
        Labels of the training cases; default the index of ``X_train`` when it is a pandas
        DataFrame with a non-default index. Carried into every result that names cases.
    **params
        Other :class:`~cbdt.influence.CaseInfluence` parameters (``chunk_size``, ...) and
        keywords of ``fit`` (``action_names``, where supported).

    Returns
    -------
    TorchCaseInfluence
    """
    fit_params = {k: params.pop(k) for k in ("action_names",) if k in params}
    est = TorchCaseInfluence(
        model, layer, head=head, ridge=ridge, intercept=intercept, solver=solver,
        batch_size=batch_size, **params,
    )
    return est._fit(X_train, R_train, case_ids=case_ids, check_layer=True, fit_params=fit_params,
                    name="X_train")


# ---------------------------------------------------------------------- fidelity
@dataclass(frozen=True, eq=False)
class ProbeFidelity:
    """Result of :func:`probe_fidelity`: how closely the OLS probe follows the network.

    Attributes
    ----------
    probe : CaseInfluence
        The OLS (or ridge) readout fitted on :math:`\\Phi` of the training set (a
        :class:`TorchCaseInfluence` for an ``nn.Module``).
    rho_recon : ndarray of shape (|A|,)
        Pearson correlation, per action, between probe and network scores on the test
        inputs (the paper's probe-fidelity measure :math:`\\rho_{recon}`; NaN where one of
        them is constant). Also available as ``rho``.
    probe_scores : ndarray of shape (m, |A|)
        :math:`\\hat Q(x, a) = \\tilde\\varphi(x)^\\top \\hat v_a` on the test inputs (eq. 9).
    network_scores : ndarray of shape (m, |A|)
        :math:`Q_{nn}(x, a)` on the test inputs.
    agreement : float
        Share of test inputs where the probe and the network choose the same action.
    max_abs_diff : float
        Largest :math:`|\\hat Q(x, a) - Q_{nn}(x, a)|` over test inputs and actions (in the
        network's units).
    rel_max_abs_diff : float
        ``max_abs_diff`` divided by the spread of the network's scores (the root mean square
        of their deviations from each action's mean): scale-free.
    score_ratio : float
        Spread of the network's scores over the spread of the training returns (the same
        root mean square, per action centred). About 1 or below for a network trained on the
        returns with the squared error; far above for logits against one-hot returns.
    units_note : str or None
        Why the network's scores are not on the returns' scale (``score_ratio > 3``), the
        text of the :class:`~cbdt.exceptions.ScoreUnitsWarning`; None when they are.
    """

    probe: Any
    rho_recon: np.ndarray
    probe_scores: np.ndarray
    network_scores: np.ndarray
    agreement: float
    max_abs_diff: float
    rel_max_abs_diff: float
    score_ratio: float
    units_note: str | None

    def __repr__(self) -> str:
        rho = np.array2string(np.asarray(self.rho_recon), precision=4, separator=", ")
        m, n_a = np.shape(self.network_scores)
        units = "" if self.units_note is None else ", units_note=<see .units_note>"
        return (
            f"ProbeFidelity(rho_recon={rho}, agreement={self.agreement:.4g}, "
            f"max_abs_diff={self.max_abs_diff:.4g}, rel_max_abs_diff="
            f"{self.rel_max_abs_diff:.4g}, score_ratio={self.score_ratio:.4g}, "
            f"probe=<{type(self.probe).__name__}>, scores=<{m} x {n_a}>{units})"
        )

    @property
    def rho(self) -> np.ndarray:
        """Per-action correlation :math:`\\rho_{recon}` (same as :attr:`rho_recon`)."""
        return self.rho_recon

    @property
    def same_units(self) -> bool:
        """Whether the network's scores are on the returns' scale (``units_note is None``)."""
        return self.units_note is None


def _pearson_or_nan(x: np.ndarray, y: np.ndarray) -> float:
    xc, yc = x - x.mean(), y - y.mean()
    den = np.sqrt((xc**2).sum() * (yc**2).sum())
    return float((xc * yc).sum() / den) if den > 0 else float("nan")


def _spread(S: np.ndarray) -> float:
    return float(np.sqrt(np.mean((S - S.mean(axis=0)) ** 2)))


def _fidelity(probe: Any, ps: np.ndarray, ns: np.ndarray, *, warn: bool) -> ProbeFidelity:
    if ns.shape != ps.shape:
        hint = (
            f" If the model has {ns.shape[1]} classes and some are absent from the training "
            f"labels, build the returns with cbdt.returns_from_labels(y, n_classes="
            f"{ns.shape[1]}) (one action per class, absent ones included)."
            if ns.shape[1] > ps.shape[1] else ""
        )
        raise InputError(
            f"the model outputs {ns.shape[1]} scores per input but the returns have "
            f"{ps.shape[1]} actions; the model's output must be one score per action.{hint}"
        )
    rho = np.array([_pearson_or_nan(ps[:, a], ns[:, a]) for a in range(ps.shape[1])])
    mad = float(np.abs(ps - ns).max())
    net_spread = _spread(ns)
    R = np.asarray(probe.returns_)
    r_spread = _spread(R)
    ratio = net_spread / r_spread if r_spread > 0 else float("inf")
    note = None
    if ratio > _UNITS_RATIO:
        one_hot = R.shape[1] > 1 and bool(np.all((R == 0) | (R == 1))) \
            and bool(np.all(R.sum(axis=1) == 1))
        note = (
            "the network's scores are not on the returns' scale: their spread is "
            f"{ratio:.3g} times that of R_train"
            + (" (the returns are one-hot labels and the network's outputs look like the "
               "logits of a cross-entropy classifier)" if one_hot else "")
            + f". max_abs_diff = {mad:.3g} compares different units; read agreement, rho "
            f"(per-action correlation) and rel_max_abs_diff = "
            f"{mad / net_spread if net_spread > 0 else float('nan'):.3g} instead, or write the "
            "readout into the head (TorchCaseInfluence.write_readout) to put the network on "
            "the returns' scale."
        )
        if warn:
            warnings.warn(f"probe_fidelity: {note}", ScoreUnitsWarning, stacklevel=3)
    return ProbeFidelity(
        probe=probe,
        rho_recon=rho,
        probe_scores=ps,
        network_scores=ns,
        agreement=float(np.mean(ps.argmax(1) == ns.argmax(1))),
        max_abs_diff=mad,
        rel_max_abs_diff=mad / net_spread if net_spread > 0 else float("nan"),
        score_ratio=float(ratio),
        units_note=note,
    )


def _select(out: Any, output: Any) -> Any:
    torch = _torch()
    if output is not None:
        try:
            out = output(out) if callable(output) else out[output]
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise InputError(
                f"output={output!r} could not select the scores from the model's "
                f"{type(out).__name__} output: {exc}"
            ) from exc
    if not isinstance(out, torch.Tensor):
        if isinstance(out, dict):
            how = f"a key, e.g. output={next(iter(out), 'logits')!r}"
        elif isinstance(out, tuple | list):
            how = "an index, e.g. output=0"
        else:
            how = "a callable, e.g. output=lambda out: out.logits"
        raise InputError(
            f"the model returned a {type(out).__name__}"
            + (f" of {len(out)} items" if isinstance(out, tuple | list | dict) else "")
            + f", not a tensor of scores; pass output= to pick the scores: {how} (an index, a "
            "dict key or a callable out -> tensor)."
        )
    return out


def _outputs(model: Any, Xt: Any, batch_size: int, output: Any, name: str) -> np.ndarray:
    torch = _torch()
    out = []
    with _Modes(model), torch.no_grad():
        for s in range(0, Xt.shape[0], batch_size):
            out.append(_select(_call(model, Xt[s : s + batch_size], name), output)
                       .detach().to("cpu", torch.float64))
    Y = torch.cat(out).numpy()
    return Y.reshape(Y.shape[0], -1)


def _is_case_network(model: Any) -> bool:
    # no import of cbdt.models (it imports this module): a CaseNetwork exists only once
    # cbdt.models has been imported
    models = sys.modules.get("cbdt.models")
    return models is not None and isinstance(model, models.CaseNetwork)


def network_fidelity(
    network: Any, X_train: Any, R_train: Any, X_test: Any, *, ridge: float, solver: str,
    intercept: bool | None, fallback: bool, warn: bool,
) -> ProbeFidelity:
    """Probe fidelity of a :class:`~cbdt.models.CaseNetwork` (its last hidden layer)."""
    network._check_fitted()
    for name, X in (("X_train", X_train), ("X_test", X_test)):
        A = as_float_matrix(name, X, allow_1d=True)
        width = A.shape[-1]
        if width != network.n_features_in_:
            raise InputError(
                f"{name} has {width} columns (features per input) but the network expects "
                f"{network.n_features_in_} (it was fitted on {network.n_features_in_}). Pass "
                f"{name} with the same columns as the training inputs."
            )
    check_same_index(X_train, R_train, x_name="X_train", r_name="R_train")
    Phi = network.represent(X_train)
    R = as_float_matrix("R_train", R_train, allow_1d=True)
    if R.ndim == 1:
        R = R[:, None]
    icpt = True if intercept is None else intercept
    try:
        probe = CaseInfluence(ridge=ridge, intercept=icpt, solver=solver).fit(Phi, R)
    except RankDeficientError as exc:
        if not fallback or solver != "auto":
            raise
        warnings.warn(
            f"{_rank_text(exc, 'the network last hidden layer', Phi, icpt)} The exact solve "
            "of Proposition 1 needs full column rank, so the minimum-norm solver 'lstsq' was "
            "used (solver_ = 'lstsq'). To silence this warning pass solver='lstsq'.",
            SolverFallbackWarning,
            stacklevel=3,
        )
        probe = CaseInfluence(ridge=ridge, intercept=icpt, solver="lstsq").fit(Phi, R)
    ps = probe.scores(network.represent(X_test))
    ns = network.predict(X_test)
    if ps.shape[1] != ns.shape[1]:
        raise InputError(
            f"R_train has {ps.shape[1]} actions but the network has {ns.shape[1]} outputs."
        )
    return _fidelity(probe, ps, ns, warn=warn)


def probe_fidelity(
    model: Any,
    layer: Any = None,
    X_train: Any = None,
    R_train: Any = None,
    X_test: Any = None,
    *,
    head: Any = None,
    probe: CaseInfluence | None = None,
    ridge: float = 0.0,
    intercept: bool | None = None,
    solver: Literal["auto", "cholesky", "lstsq"] = "auto",
    batch_size: int = 1024,
    output: Any = None,
) -> ProbeFidelity:
    """How closely the OLS probe on a layer follows the network's own scores (Sec. 2.2, 5).

    Freezes the representation, fits the OLS probe with intercept on
    :math:`\\Phi = \\varphi(X_{train})` and the training returns (eq. 6-8; ridge eq. 11) and
    compares its scores :math:`\\hat Q(x, a)` (eq. 9) with the network's :math:`Q_{nn}(x, a)`
    on ``X_test``: agreement of the decisions, per-action Pearson correlation
    :math:`\\rho_{recon}`, largest score difference (absolute and relative to the spread of
    the network's scores). When the network's scores are not on the returns' scale (e.g. a
    cross-entropy classifier's logits against one-hot returns) it warns
    :class:`~cbdt.exceptions.ScoreUnitsWarning` and says so in ``units_note``.

    Parameters
    ----------
    model : torch.nn.Module or cbdt.models.CaseNetwork
        Any torch network, or the book's :class:`~cbdt.models.CaseNetwork` (its last hidden
        layer is :math:`\\varphi`; then ``layer=None``).
    layer : torch.nn.Module or str, optional
        For an ``nn.Module``: the layer whose output is :math:`\\varphi`, checked as in
        :class:`TorchCaseInfluence` (the head, the whole model or a layer of another width are
        refused). Must be None for a CaseNetwork.
    X_train : array-like or torch.Tensor of shape (n, ...)
    R_train : array-like of shape (n, |A|)
    X_test : array-like or torch.Tensor of shape (m, ...)
        Inputs of the comparison; a wrong width or NaN/inf is reported on ``X_test``.
    head : torch.nn.Linear or str, optional
        As in :func:`from_torch`.
    probe : CaseInfluence, optional
        An already fitted probe (a :class:`TorchCaseInfluence` for an ``nn.Module``, e.g.
        after :meth:`~TorchCaseInfluence.write_readout`); then ``layer``, ``X_train`` and
        ``R_train`` are not used.
    ridge : float, default=0.0
        Probe ridge (eq. 11); 0 is the OLS probe of Proposition 1.
    intercept : bool, optional
        Default True for a CaseNetwork, the head's bias for an ``nn.Module``.
    solver : {"auto", "cholesky", "lstsq"}, default="auto"
        ``"auto"`` falls back to the minimum-norm ``"lstsq"`` on a rank-deficient
        representation with a :class:`~cbdt.exceptions.SolverFallbackWarning`.
    batch_size : int, default=1024
        Inputs per forward pass (``nn.Module``).
    output : int, str or callable, optional
        For a model that returns a tuple or dict: the index or key of the scores, or a
        callable ``out -> tensor``.

    Returns
    -------
    ProbeFidelity
        ``rho_recon`` (= ``rho``), ``agreement``, ``max_abs_diff``, ``rel_max_abs_diff``,
        ``score_ratio``, ``units_note``, ``probe`` and both score matrices.
    """
    if solver not in ("auto", "cholesky", "lstsq"):
        raise InputError(f"solver must be 'auto', 'cholesky' or 'lstsq', got {solver!r}.")
    if X_test is None:
        raise InputError("probe_fidelity needs X_test: the inputs on which probe and network "
                         "are compared.")
    if _is_case_network(model):
        if layer is not None:
            raise InputError(
                "a CaseNetwork's representation is its last hidden layer: pass layer=None, "
                "probe_fidelity(network, None, X_train, R_train, X_test)."
            )
        if probe is not None:
            ps = probe.scores(model.represent(X_test))
            return _fidelity(probe, ps, model.predict(X_test), warn=True)
        return network_fidelity(model, X_train, R_train, X_test, ridge=ridge, solver=solver,
                                 intercept=intercept, fallback=True, warn=True)
    _check_model(model)
    batch = _check_batch_size(batch_size)
    if probe is None:
        if X_train is None or R_train is None:
            raise InputError("probe_fidelity needs X_train and R_train (or a fitted probe=).")
        probe = TorchCaseInfluence(model, layer, head=head, ridge=ridge, intercept=intercept,
                                   solver=solver, batch_size=batch)._fit(
            X_train, R_train, case_ids=None, check_layer=True, fit_params={}, name="X_train",
            output=output)
    return _torch_fidelity(model, probe, X_test, batch, output, warn=True)


def _torch_fidelity(model: Any, probe: Any, X_test: Any, batch: int, output: Any, *,
                    warn: bool) -> ProbeFidelity:
    if not isinstance(probe, TorchCaseInfluence):
        raise InputError(f"probe must be a fitted TorchCaseInfluence, got {type(probe).__name__}.")
    Xt = _as_tensor(model, X_test, "X_test")
    S_probe = probe.scores(probe._phi(Xt, batch_size=batch, name="X_test"))
    S_net = _outputs(model, Xt, batch, output, "X_test")
    return _fidelity(probe, S_probe, S_net, warn=warn)


def layer_fidelity(
    model: Any,
    X_train: Any,
    R_train: Any,
    X_test: Any,
    layers: Sequence[Any] | None = None,
    *,
    head: Any = None,
    batch_size: int = 1024,
    output: Any = None,
) -> Any:
    """How closely the OLS probe on each candidate layer follows the network's outputs.

    For every layer, the OLS probe with an intercept is fitted on that layer's output over
    the training inputs (:class:`TorchCaseInfluence`; the minimum-norm ``"lstsq"`` solver
    when the output is rank-deficient, silently: the table says so) and compared with the
    network's outputs on the test inputs (:func:`probe_fidelity`). Unlike
    :func:`from_torch` it accepts any layer (of any width, pre-activation too): it is the
    tool to compare them.

    Parameters
    ----------
    model : torch.nn.Module
    X_train : array-like of shape (n, d)
    R_train : array-like of shape (n, |A|)
        Returns, e.g. :func:`cbdt.returns_from_labels`.
    X_test : array-like of shape (m, d)
    layers : sequence of str or torch.nn.Module, optional
        Layers to compare; default every module of an ``nn.Sequential`` but the head (any
        other model needs ``layers``).
    head : torch.nn.Linear or str, optional
        The head (see :func:`head_input`).
    batch_size : int, default=1024
    output : int, str or callable, optional
        As in :func:`probe_fidelity`.

    Returns
    -------
    DataFrame
        Indexed by ``layer``, with ``module`` (class name), ``width`` (H), ``rank`` (numerical
        rank of the probe's design, intercept included), ``cond`` (condition number of its
        Gram matrix), ``solver``, ``agreement`` (share of test inputs where the probe's
        argmax equals the network's), ``rho_min`` and ``rho_mean`` (Pearson correlation per
        action of probe and network scores), ``max_abs_diff`` (largest
        :math:`|\\hat Q - Q_{nn}|`), ``rel_max_abs_diff`` (the same over the spread of the
        network's scores), ``same_units`` (the network's scores are on the returns' scale)
        and ``reads_head`` (the head reads this layer's output as it is: only there can
        :meth:`TorchCaseInfluence.write_readout` make Prop. 1 hold for the network; False
        for every layer when ``forward()`` computes the head's input itself, e.g.
        ``F.relu``: :class:`TorchCaseInfluence` then reads it with a pre-hook).
    """
    import pandas as pd

    torch = _torch()
    _check_model(model)
    batch = _check_batch_size(batch_size)
    hd = _resolve_head(model, head)
    seq = isinstance(model, torch.nn.Sequential) and len(model) >= 2 \
        and isinstance(model[-1], torch.nn.Linear) and hd in (None, model[-1])
    # name: the layer the head reads; pre: the head's input is computed from its output
    # inside forward() (F.relu), so the probe on its own output does not read the head's input
    name, pre = (head_input(model, head=hd)[0], False) if seq else \
        _head_input(model, X_train, hd)[::2]
    if layers is None:
        if not seq:
            raise InputError("layer_fidelity needs layers= for a model that is not an "
                             "nn.Sequential ending in its head.")
        layers = [str(j) for j in range(len(model) - 1)]
    check_same_index(X_train, R_train, x_name="X_train", r_name="R_train")
    R = as_float_matrix("R_train", R_train)
    rows = []
    for layer in layers:
        mod = _module(model, layer)
        lname = _name_of(model, mod)
        probe = TorchCaseInfluence(model, layer, intercept=True, batch_size=batch)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SolverFallbackWarning)
            probe._fit(X_train, R, case_ids=None, check_layer=False, fit_params={},
                       name="X_train")
        fid = _torch_fidelity(model, probe, X_test, batch, output, warn=False)
        rows.append({
            "layer": str(lname),
            "module": type(mod).__name__,
            "width": probe._width(),
            "rank": int(probe.rank_),
            "cond": float(probe.condition_number_),
            "solver": probe.solver_,
            "agreement": fid.agreement,
            "rho_min": float(np.nanmin(fid.rho)),
            "rho_mean": float(np.nanmean(fid.rho)),
            "max_abs_diff": fid.max_abs_diff,
            "rel_max_abs_diff": fid.rel_max_abs_diff,
            "same_units": fid.same_units,
            "reads_head": str(lname) == name and not pre,
        })
    return pd.DataFrame(rows).set_index("layer")
