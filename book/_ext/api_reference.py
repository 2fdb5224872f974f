"""Local Sphinx extension: the API reference page (``book/api.md``), strict (``-W -n``) and complete.

The page renders the library's numpydoc docstrings with ``sphinx.ext.autodoc`` and
``sphinx.ext.napoleon`` (both part of Sphinx: nothing to install, nothing fetched). This module
adds what the two need for this library:

* **Re-exported names resolve.** ``cbdt`` re-exports names defined in its submodules
  (``cbdt.audit_signals`` is ``cbdt.audit.audit_signals``), and docstrings name objects by the
  module that defines them (``cbdt.influence.CaseInfluence.fit``, documented as
  ``cbdt.CaseInfluence.fit``). Each object is documented once; a cross-reference that names it
  by another path is resolved to the documented entry of the *same object* (looked up by
  identity, for classes, functions, methods, properties and modules only).
* **Module constants keep their ``#:`` comments.** A constant re-exported by a package
  (``cbdt.datasets.ADULT_COLUMNS``, defined in ``cbdt.datasets.uci``) is documented with the
  ``#:`` comment of the module that defines it; a public constant with such a comment is never
  skipped, and a value whose repr is longer than :data:`MAX_VALUE_CHARS` is not printed.
* **Attribute types are text.** numpydoc's ``Attributes`` entries become ``.. attribute::``
  targets (so ``:attr:`feature_names_in_``` links), and their types ("ndarray of shape
  (n, H)") are shown as text instead of being parsed as Python annotations, which would make
  every word a broken cross-reference; an entry that names a documented property is not
  indexed twice.
* **Nothing public is left out.** When the build's environment is complete, every name in the
  ``__all__`` of :data:`MODULES` must be documented (directly or as the object it re-exports);
  a missing one is a warning, so the strict build fails.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from typing import Any

from sphinx.ext.autodoc import DataDocumenter, ModuleDocumenter
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The modules whose every public name (``__all__``) the reference documents.
MODULES = ("cbdt", "cbdt.torch", "cbdt.audit", "cbdt.decision", "cbdt.metrics",
           "cbdt.baselines", "cbdt.datasets")
#: Longest printed value of a documented constant (longer ones, e.g. the data registry, are
#: described by their comment alone).
MAX_VALUE_CHARS = 120


# ------------------------------------------------------------------ constants and their comments


def _defining_comment(modname: str, attrname: str, obj: Any) -> list[str] | None:
    """The ``#:`` comment of ``attrname`` in the ``cbdt`` module that holds the same object."""
    root = modname.split(".")[0]
    for name, mod in sorted(sys.modules.items()):
        if mod is None or not (name == root or name.startswith(root + ".")):
            continue
        if mod.__dict__.get(attrname, _MISSING) is not obj:
            continue
        try:
            analyzer = ModuleAnalyzer.for_module(name)
            analyzer.analyze()
        except Exception:  # noqa: BLE001 (no source: not a candidate)
            continue
        doc = analyzer.attr_docs.get(("", attrname))
        if doc:
            return list(doc)
    return None


_MISSING = object()


class ReexportedDataDocumenter(DataDocumenter):
    """``autodata`` that reads the ``#:`` comment where the constant is defined."""

    priority = DataDocumenter.priority + 1

    @classmethod
    def can_document_member(cls, member: Any, membername: str, isattr: bool, parent: Any
                            ) -> bool:  # noqa: D102
        if super().can_document_member(member, membername, isattr, parent):
            return True
        modname = getattr(parent, "modname", None)
        mod = sys.modules.get(modname or "")
        return (isinstance(parent, ModuleDocumenter) and mod is not None
                and membername in getattr(mod, "__all__", ())
                and not inspect.ismodule(member) and not callable(member)
                and _defining_comment(modname, membername, member) is not None)

    def get_module_comment(self, attrname: str) -> list[str] | None:  # noqa: D102
        return super().get_module_comment(attrname) or _defining_comment(
            self.modname, attrname, self.object)

    def should_suppress_value_header(self) -> bool:  # noqa: D102
        try:
            long = len(repr(self.object)) > MAX_VALUE_CHARS
        except Exception:  # noqa: BLE001
            long = True
        return long or super().should_suppress_value_header()


def _keep_public_constants(app: Any, what: str, name: str, obj: Any, skip: bool,
                           options: Any) -> bool | None:
    """Document a public module constant that has a ``#:`` comment where it is defined."""
    if what != "module" or not skip or inspect.ismodule(obj) or callable(obj):
        return None
    for modname in MODULES:
        mod = sys.modules.get(modname)
        if mod is not None and name in getattr(mod, "__all__", ()) and \
                getattr(mod, name, _MISSING) is obj and _defining_comment(modname, name, obj):
            return False
    return None


# ------------------------------------------------------------------ numpydoc Attributes


_ATTRIBUTE = re.compile(r"^(\s*)\.\. attribute:: (.+?)\s*$")
_TYPE = re.compile(r"^(\s+):type: (.*)$")


def _attribute_types_as_text(app: Any, what: str, name: str, obj: Any, options: Any,
                             lines: list[str]) -> None:
    """Napoleon's ``.. attribute::`` entries: the type as text, no index entry for a property.

    Runs after napoleon (priority 600), on the reStructuredText it produced.
    """
    out: list[str] = []
    current: str | None = None
    for line in lines:
        m = _ATTRIBUTE.match(line)
        if m:
            current = m[2]
            out.append(line)
            member = inspect.getattr_static(obj, current, None) if inspect.isclass(obj) else None
            if isinstance(member, property) and member.__doc__:
                out.append(m[1] + "   :no-index:")
            continue
        t = _TYPE.match(line)
        if t and current is not None:
            # the type as emphasised text (inline markup does not nest: "|A|" stays text)
            out.append(f"{t[1]}*Type:* {_escape(t[2])}")
            current = None
            continue
        out.append(line)
    lines[:] = out


_MATH = re.compile(r"^(\s*)\.\. math::")
_LITERAL = re.compile(r"(``.+?``|:[\w:]+:`[^`]*`|`[^`]*`_?)")
_BARS = re.compile(r"(?<!\\)\|(\w+)\|")


def _bars_as_text(app: Any, what: str, name: str, obj: Any, options: Any,
                  lines: list[str]) -> None:
    """``|A|`` (the number of actions) in running text is text, not a substitution reference.

    reStructuredText reads ``|A|`` as a substitution, which the docstrings never mean; it is
    escaped outside literals, roles (``:math:`|A|```) and ``.. math::`` blocks.
    """
    math_indent: int | None = None
    for i, line in enumerate(lines):
        m = _MATH.match(line)
        if m:
            math_indent = len(m[1])
            continue
        if math_indent is not None:
            if not line.strip() or len(line) - len(line.lstrip()) > math_indent:
                continue
            math_indent = None
        parts = _LITERAL.split(line)
        lines[i] = "".join(p if k % 2 else _BARS.sub(r"\\|\1\\|", p)
                           for k, p in enumerate(parts))


def _escape(text: str) -> str:
    """``text`` as one piece of emphasised reStructuredText."""
    return "*" + text.replace("\\", "\\\\").replace("*", "\\*") + "*"


# ------------------------------------------------------------------ references by identity


def _lookup(path: str) -> Any:
    """The object named by a dotted path (module, then attributes), or ``_MISSING``."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except Exception:  # noqa: BLE001 (not a module: try a shorter prefix)
            continue
        for attr in parts[i:]:
            try:
                obj = inspect.getattr_static(obj, attr)
            except AttributeError:
                return _MISSING
        return obj
    return _MISSING


def _identifiable(obj: Any) -> bool:
    """Objects whose identity names them (not numbers or strings that may be shared)."""
    return (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)
            or isinstance(obj, (property, classmethod, staticmethod)))


def _documented_by_identity(env: Any) -> dict[int, str]:
    """``id(object) -> documented name`` for the py domain's objects (cached per build)."""
    cache = getattr(env, "_api_reference_ids", None)
    if cache is None or cache[0] != len(env.get_domain("py").objects):
        objects = env.get_domain("py").objects
        ids: dict[int, str] = {}
        for fullname, entry in objects.items():
            if getattr(entry, "aliased", False):
                continue
            obj = _lookup(fullname)
            if obj is not _MISSING and _identifiable(obj):
                ids.setdefault(id(obj), fullname)
        cache = (len(objects), ids)
        env._api_reference_ids = cache
    return cache[1]


def _resolve_by_identity(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """``missing-reference``: a py reference to a documented object under another name."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    modname, clsname = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if clsname and modname:
        candidates.insert(0, f"{modname}.{clsname}.{target}")
        cls = _lookup(f"{modname}.{clsname}")
        if inspect.isclass(cls):
            candidates.append(f"{cls.__module__}.{target}")
    if modname:
        candidates.insert(len(candidates) - 1, f"{modname}.{target}")
    domain = env.get_domain("py")
    ids = _documented_by_identity(env)
    for path in candidates:
        if path in domain.objects:
            name = path
        else:
            obj = _lookup(path)
            if obj is _MISSING or not _identifiable(obj) or id(obj) not in ids:
                continue
            name = ids[id(obj)]
        return _xref(app, env, node, contnode, name)
    # a constant of a submodule, documented under its own name (cbdt.datasets.uci.MISSING)
    if modname and "." not in target:
        found = [n for n in domain.objects
                 if n.startswith(modname + ".") and n.endswith("." + target)]
        if len(found) == 1:
            return _xref(app, env, node, contnode, found[0])
    # an attribute documented on a base class (``case_ids_`` of CaseInfluence, for its subclass)
    cls = _lookup(f"{modname}.{clsname}") if clsname else _MISSING
    if inspect.isclass(cls) and "." not in target:
        for base in cls.__mro__[1:]:
            if id(base) in ids and f"{ids[id(base)]}.{target}" in domain.objects:
                return _xref(app, env, node, contnode, f"{ids[id(base)]}.{target}")
    # a constructor parameter (scikit-learn keeps each as an attribute): the class's entry
    owner, _, attr = target.rpartition(".")
    for path in ([f"{modname}.{owner}", owner] if owner else
                 [f"{modname}.{clsname}"] if clsname else []):
        cls = _lookup(path)
        if inspect.isclass(cls) and id(cls) in ids and attr in _init_parameters(cls):
            return _xref(app, env, node, contnode, ids[id(cls)])
    return None


def _init_parameters(cls: type) -> set[str]:
    """The keyword parameters of ``cls``'s constructor."""
    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


def _xref(app: Any, env: Any, node: Any, contnode: Any, name: str) -> Any:
    """A reference to the documented object ``name``."""
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", name,
                                             node, contnode)


# ------------------------------------------------------------------ completeness


def _check_complete(app: Any, env: Any) -> None:
    """Every public name of :data:`MODULES` is documented (a warning otherwise)."""
    if not any(d == "api" or d.endswith("/api") for d in env.found_docs):
        return
    objects = env.get_domain("py").objects
    ids = _documented_by_identity(env)
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if f"{modname}.{name}" in objects or (_identifiable(obj) and id(obj) in ids):
                continue
            logger.warning("API reference: %s.%s is public (__all__) but not documented",
                           modname, name, type="api", subtype="missing")


def setup(app: Any) -> dict[str, Any]:
    """Register the documenter and the event handlers.

    Parameters
    ----------
    app : sphinx.application.Sphinx
        The application.

    Returns
    -------
    dict
        Extension metadata.
    """
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.add_autodocumenter(ReexportedDataDocumenter, override=True)
    app.connect("autodoc-skip-member", _keep_public_constants)
    app.connect("autodoc-process-docstring", _attribute_types_as_text, priority=600)
    app.connect("autodoc-process-docstring", _bars_as_text, priority=601)
    app.connect("missing-reference", _resolve_by_identity)
    app.connect("env-check-consistency", _check_complete)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
