"""Optional dependencies, each brought by an extra of the package.

``pip install cbdt`` installs the exact audit (numpy, scipy, pandas, threadpoolctl). The rest
comes with extras::

    pip install 'cbdt[plot]'    # matplotlib: cbdt.book.plots, Explanation.plot
    pip install 'cbdt[torch]'   # torch: cbdt.torch, cbdt.models
    pip install 'cbdt[data]'    # pooch, xlrd, pyarrow, tqdm: cbdt.datasets, progress bars
    pip install 'cbdt[scale]'   # dask: Phi as a dask array
    pip install 'cbdt[book]'    # all of the above and what the book's chapters need

:func:`require` imports a module of an extra, or raises :class:`~cbdt.MissingExtraError`
with the one line that says what to install.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

# module -> (distribution, extra)
EXTRAS: dict[str, tuple[str, str]] = {
    "matplotlib": ("matplotlib", "plot"),
    "torch": ("torch", "torch"),
    "pooch": ("pooch", "data"),
    "xlrd": ("xlrd", "data"),
    "pyarrow": ("pyarrow", "data"),
    "tqdm": ("tqdm", "data"),
    "dask": ("dask", "scale"),
    "sklearn": ("scikit-learn", "book"),
    "ipywidgets": ("ipywidgets", "book"),
}


def _missing(module: str, what: str) -> Exception:
    from .exceptions import MissingExtraError

    dist, extra = EXTRAS[module.split(".")[0]]
    return MissingExtraError(
        f"{what} needs {dist}, which is not installed: pip install 'cbdt[{extra}]'"
    )


def require_installed(module: str, what: str) -> None:
    """Raise :class:`~cbdt.MissingExtraError` naming the extra when ``module`` (a top-level
    name of :data:`EXTRAS`) is not installed, without importing it.

    For modules such as :mod:`cbdt.torch` that import their extra only when a function runs
    but should fail on import when it is absent (``from cbdt import torch`` in the lean
    install).

    Parameters
    ----------
    module : str
        The module of the extra, e.g. ``"torch"``.
    what : str
        What needs it, e.g. ``"cbdt.torch"``.

    Raises
    ------
    MissingExtraError
        When ``module`` cannot be found.
    """
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ValueError, ImportError):  # a module whose __spec__ is None: it is loaded
        found = module in sys.modules and sys.modules[module] is not None
    if not found:
        raise _missing(module, what) from None


def require(module: str, what: str) -> ModuleType:
    """Import ``module`` (a top-level name of :data:`EXTRAS`, or a submodule of one), or
    raise :class:`~cbdt.MissingExtraError` naming the extra that installs it.

    ``what`` names what needs it, e.g. ``"cbdt.book.plots"``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        top = module.split(".")[0]
        if err.name is None or err.name.split(".")[0] != top:
            raise  # the module is there; something it imports is not
        raise _missing(top, what) from None
