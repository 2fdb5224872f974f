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
        from .exceptions import MissingExtraError

        dist, extra = EXTRAS[top]
        raise MissingExtraError(
            f"{what} needs {dist}, which is not installed: pip install 'cbdt[{extra}]'"
        ) from None
