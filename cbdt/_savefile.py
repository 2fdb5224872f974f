"""Opening the ``.npz`` files that ``save`` writes, with one clear error for anything else.

``np.load(path, allow_pickle=False)`` answers a file that is not an ``.npz`` archive with
numpy's own errors: for arbitrary bytes the advice to pass ``allow_pickle=`` "if you trust the
file" (risky advice for a file that is not what the caller thinks it is), for a truncated
archive :class:`zipfile.BadZipFile`, for an empty file :class:`EOFError`. :func:`open_npz`
turns all of them, and the errors of reading a damaged member later, into one
:class:`~cbdt.exceptions.InputError` that says the file is not a cbdt save file or is damaged.
A missing file stays :class:`FileNotFoundError`.
"""

from __future__ import annotations

import contextlib
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .exceptions import CBDTError, InputError

__all__ = ["open_npz"]

# what reading a damaged archive or member raises (numpy's ValueError included: a corrupt
# header, a member of another format); never pickle: allow_pickle stays False
_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, OSError)


def _not_ours(path: Any, what: str, why: str) -> InputError:
    return InputError(
        f"{path!s} is not a cbdt save file, or it is damaged ({why}); {what}.load reads only "
        f"the .npz files that {what}.save writes. Save the fit again, or check the path."
    )


@contextlib.contextmanager
def open_npz(path: Any, what: str) -> Iterator[Any]:
    """``np.load(path, allow_pickle=False)`` as a context manager, for a ``save`` file.

    Parameters
    ----------
    path : str, path-like or file-like
        The file.
    what : str
        The class whose ``load`` reads it, for the message (e.g. ``"CaseInfluence"``).

    Yields
    ------
    numpy.lib.npyio.NpzFile

    Raises
    ------
    InputError
        When ``path`` is not an ``.npz`` archive (other bytes, an ``.npy`` array, an empty
        or truncated file) or a member cannot be read; without numpy's pickle advice.
    FileNotFoundError
        When there is no file at ``path``.
    """
    try:
        f = np.load(path, allow_pickle=False)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except EOFError:
        raise _not_ours(path, what, "the file is empty") from None
    except zipfile.BadZipFile as err:
        raise _not_ours(path, what, f"a damaged or truncated .npz archive: {err}") from None
    except (ValueError, OSError):  # numpy's pickle advice for other bytes: not repeated
        raise _not_ours(path, what, "not an .npz archive") from None
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise _not_ours(path, what, "a single .npy array, not an .npz archive")
    try:
        with f:
            yield f
    except CBDTError:
        raise
    except _DAMAGE as err:
        why = (
            "a member holds Python objects, which a cbdt save file never does"
            if "pickle" in str(err) or "Object arrays" in str(err)
            else f"a member cannot be read: {type(err).__name__}: {err}"
        )
        raise _not_ours(path, what, why) from None
