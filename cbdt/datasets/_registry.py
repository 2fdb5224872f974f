"""Registry of the book's data files and the verified :func:`fetch`.

Every file the book reads is listed in :data:`REGISTRY` with its byte size, its
sha256 and a raw download URL pinned at a fixed git commit (so the bytes a URL
serves cannot change). The values are those of ``shared/data/PROVENANCE.md``,
which also records where each file comes from and how its bytes were checked.

Where a file is looked for
--------------------------
:func:`fetch` resolves a registered file name to a local path, in this order:

1. ``$CBDT_DATA_DIR/<name>``: a folder holding the files directly, under their
   original names (spaces included). This is how tests and CI read the data
   (``CBDT_DATA_DIR=../shared/data``).
2. The download cache, ``$CBDT_CACHE_DIR`` or else ``pooch.os_cache("cbdt")``
   (for example ``~/.cache/cbdt`` on Linux).
3. A download with :mod:`pooch` into that cache, checked against the sha256,
   unless downloads are switched off with ``CBDT_OFFLINE=1``.

Every file found is checked against its registered sha256 before it is returned.
The check streams the file, and its result is remembered in-process for the
same (path, size, modification time), so repeated loads do not hash again.

Nothing fails silently: a missing file, a corrupt file and a failed download
each raise a subclass of :class:`DataError` (which also subclasses the natural
builtin exception) whose message says what was looked for, where, and how to
fix it.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pooch

T = TypeVar("T")

__all__ = [
    "REGISTRY",
    "DataError",
    "DataFile",
    "DataFileNotFoundError",
    "DataHashMismatchError",
    "DataFormatError",
    "DataDownloadError",
    "UnknownDataFileError",
    "fetch",
    "verify",
    "sha256sum",
    "data_dir",
    "cache_dir",
    "offline",
]

# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class DataError(Exception):
    """Base class of every error raised by :mod:`cbdt.datasets`."""


class UnknownDataFileError(DataError, KeyError):
    """A name that is not in :data:`REGISTRY` was requested."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """A registered file is not available locally and may not be downloaded."""


class DataHashMismatchError(DataError, ValueError):
    """A local file's sha256 differs from the registered one (corrupt or wrong file).

    Attributes
    ----------
    path : pathlib.Path
        The offending file.
    expected_sha256, actual_sha256 : str
        Registered and computed hashes.
    url : str
        Where a correct copy can be downloaded.
    """

    def __init__(
        self, message: str, *, path: Path, expected_sha256: str, actual_sha256: str, url: str
    ) -> None:
        super().__init__(message)
        self.path = path
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256
        self.url = url


class DataFormatError(DataError, ValueError):
    """A file parsed, but its content is not what the loader documents (row count, columns ...)."""


class DataDownloadError(DataError, OSError):
    """A download was attempted and failed (network error, or pooch's hash check failed)."""


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DataFile:
    """One registered data file.

    Parameters
    ----------
    name : str
        File name as stored (in ``$CBDT_DATA_DIR`` and in the cache); original
        spelling, spaces included.
    size : int
        Size in bytes.
    sha256 : str
        Lower-case hex sha256 of the file's bytes.
    url : str
        Raw download URL at a fixed commit (percent-encoded). For a file that
        comes inside a zip (``archive_sha256`` set) it is the zip's URL.
    archive_sha256, archive_size : str or None, int or None
        For a zip-delivered file: the zip's sha256 and size. The zip member
        named ``name`` is extracted, and then checked against ``sha256``.
    """

    name: str
    size: int
    sha256: str
    url: str
    archive_sha256: str | None = None
    archive_size: int | None = None

    @property
    def in_archive(self) -> bool:
        """Whether the file is delivered as a member of a zip at :attr:`url`."""
        return self.archive_sha256 is not None

    @property
    def archive_name(self) -> str | None:
        """File name of the zip in the cache (the last URL segment, decoded)."""
        if not self.in_archive:
            return None
        from urllib.parse import unquote

        return unquote(self.url.rsplit("/", 1)[-1])


_ADULT = (
    "https://raw.githubusercontent.com/katinka314/XAI-project/"
    "5d289c6ba690b729e1b3fcc8d7f1a059cb641db2/data/"
)
_PJM = (
    "https://raw.githubusercontent.com/panambY/Hourly_Energy_Consumption/"
    "3d9359d970ce534e3d3a81bf70a4d3abc7008b8c/data/"
)
_CREDIT_ZIP = (
    "https://raw.githubusercontent.com/AhmeddAshour/Ensemble-Learning-for-Loan-Prediction/"
    "5a1fb3d128244e7cdb0a99a5dc69c5c0d512e0c1/default%20of%20credit%20card%20clients.xls.zip"
)
_EST = (
    "https://raw.githubusercontent.com/ashutoshsingh429/SmartLoadForecasting/"
    "27c64473d981cada8bbf56f62822d08599be4524/input/est_hourly.paruqet"
)


def _pjm(name: str, size: int, sha256: str) -> DataFile:
    return DataFile(name, size, sha256, _PJM + name)


_FILES: tuple[DataFile, ...] = (
    DataFile(
        "adult.data",
        3_974_305,
        "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
        _ADULT + "adult.data",
    ),
    DataFile(
        "adult.test",
        2_003_153,
        "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
        _ADULT + "adult.test",
    ),
    DataFile(
        "adult.names",
        5_229,
        "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
        _ADULT + "adult.names",
    ),
    DataFile(
        "default of credit card clients.xls",
        5_539_328,
        "30c6be3abd8dcfd3e6096c828bad8c2f011238620f5369220bd60cfc82700933",
        _CREDIT_ZIP,
        archive_sha256="04c849fcb53020868f0f29b0b31df89c3559b4f30674c8e2edaa0585cbaa909c",
        archive_size=1_432_641,
    ),
    _pjm(
        "AEP_hourly.csv",
        3_395_509,
        "109d122f7b485555c609eecdec2cd5a03172e0a08acd358d863acc93eb452585",
    ),
    _pjm(
        "COMED_hourly.csv",
        1_842_915,
        "2e79007e3f1be8765c92ff2b26314c0df0507bdd783110388a1e8d678d13fa1e",
    ),
    _pjm(
        "DAYTON_hourly.csv",
        3_274_443,
        "84d3397231d5819b5cf086ef9e87cadf6dd7954085f2834be7e37257702ec768",
    ),
    _pjm(
        "DEOK_hourly.csv",
        1_558_965,
        "070f9e0ece2fa97d5585f85bbf36122f5b3ab7f7f166db95fd0ebc3958d37600",
    ),
    _pjm(
        "DOM_hourly.csv",
        3_206_580,
        "aa040e6ff42029dbc6698066d1a12765b00c56f993127af22f26aa9b769373a6",
    ),
    _pjm(
        "DUQ_hourly.csv",
        3_214_852,
        "d4e09cca9f50c0c46eeef9feb8e5def5778368081c9af2a45cc0e8a798218071",
    ),
    _pjm(
        "EKPC_hourly.csv",
        1_220_853,
        "2036a4ed539b10d42b9249a662d1e55eda555bba8673745ee1f5586db5cfe6ab",
    ),
    _pjm(
        "FE_hourly.csv",
        1_701_528,
        "f2a4b89417cab06aaba451093f90d237fec911ccc70cd29a34449baaefdb8b3d",
    ),
    _pjm(
        "NI_hourly.csv",
        1_621_599,
        "8de74f28ae6d03bd5d33050b00a2a1a001a8bff37e8e7100bf790003ea61030f",
    ),
    _pjm(
        "PJME_hourly.csv",
        4_070_265,
        "4eb2b16d42bf07ec41ab55cb842191594cb69452725a6d3c0991658a628fde84",
    ),
    _pjm(
        "PJMW_hourly.csv",
        3_866_578,
        "74b9c6c03e74933bfaf1f472eea18a2a09552289317858f6b1931fbc87c3996f",
    ),
    _pjm(
        "PJM_Load_hourly.csv",
        921_109,
        "7dc080b7dfa4812c92f609a99cf1900cfbd49656412e744bf977d83500cebda0",
    ),
    DataFile(
        "est_hourly.paruqet",
        3_680_566,
        "edcf1be70ba2fd56ee2d63c0dd6271d72640766b8aaa767641cfc2d1b81c0c6b",
        _EST,
    ),
)

#: Every registered file, keyed by its file name (see ``shared/data/PROVENANCE.md``).
REGISTRY: dict[str, DataFile] = {f.name: f for f in _FILES}


# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------


def data_dir() -> Path | None:
    """The folder named by ``$CBDT_DATA_DIR``, or None when the variable is unset or empty."""
    value = os.environ.get("CBDT_DATA_DIR", "").strip()
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """The download cache: ``$CBDT_CACHE_DIR`` if set, else ``pooch.os_cache("cbdt")``."""
    value = os.environ.get("CBDT_CACHE_DIR", "").strip()
    return Path(value).expanduser() if value else Path(pooch.os_cache("cbdt"))


def offline() -> bool:
    """True when downloads are switched off: ``CBDT_OFFLINE`` is ``1`` (or true/yes/on)."""
    return os.environ.get("CBDT_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


# ---------------------------------------------------------------------------
# Hashing
# ---------------------------------------------------------------------------

# (resolved path, size, mtime_ns) -> sha256 hex, for files hashed in this process.
_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def sha256sum(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, streamed; remembered per (path, size, mtime) in-process.

    Parameters
    ----------
    path : path-like
        The file to hash.

    Returns
    -------
    str
        Lower-case hex digest.
    """
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    digest = _HASH_CACHE.get(key)
    if digest is None:
        with p.open("rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        _HASH_CACHE[key] = digest
    return digest


def _lookup(name: str) -> DataFile:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise UnknownDataFileError(
            f"{name!r} is not a registered data file. Known files: {known}."
        ) from None


def verify(path: str | os.PathLike[str], name: str) -> Path:
    """Check that the file at ``path`` has the registered sha256 of ``name``.

    Parameters
    ----------
    path : path-like
        Local file.
    name : str
        Registered file name (a key of :data:`REGISTRY`).

    Returns
    -------
    pathlib.Path
        ``path``, when it matches.

    Raises
    ------
    DataHashMismatchError
        When the hashes differ. The message names the file, both hashes (and
        sizes), and the URL to download a correct copy from.
    """
    entry = _lookup(name)
    p = Path(path)
    actual = sha256sum(p)
    if actual != entry.sha256:
        size = p.stat().st_size
        if entry.in_archive:
            source = (
                f"the member {entry.name!r} of the zip at {entry.url} "
                f"(zip sha256 {entry.archive_sha256})"
            )
        else:
            source = entry.url
        raise DataHashMismatchError(
            f"Data file {str(p)!r} is corrupt or not the registered file {entry.name!r}: "
            f"expected sha256 {entry.sha256} ({entry.size:,} bytes), "
            f"actual sha256 {actual} ({size:,} bytes). "
            f"Replace it with a fresh copy of {source}, or remove it "
            "(and point CBDT_DATA_DIR elsewhere) so that it can be downloaded again.",
            path=p,
            expected_sha256=entry.sha256,
            actual_sha256=actual,
            url=entry.url,
        )
    return p


# ---------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------


def _cache_path(entry: DataFile, root: Path) -> Path:
    """Where :func:`fetch` keeps ``entry`` in the cache ``root``."""
    if entry.in_archive:
        # pooch.Unzip's default extraction folder: "<zip name>.unzip/" next to the zip.
        return root / f"{entry.archive_name}.unzip" / entry.name
    return root / entry.name


def _source_text(entry: DataFile) -> str:
    if entry.in_archive:
        return (
            f"URL: {entry.url} (a zip, sha256 {entry.archive_sha256}, "
            f"{entry.archive_size:,} bytes; the file is its member {entry.name!r})"
        )
    return f"URL: {entry.url}"


def fetch(name: str) -> Path:
    """Local path of a registered data file, checked against its sha256.

    Looks in ``$CBDT_DATA_DIR`` first, then in the download cache
    (``$CBDT_CACHE_DIR`` or ``pooch.os_cache("cbdt")``), and downloads the file
    with :mod:`pooch` into the cache when it is in neither place and downloads
    are allowed (``CBDT_OFFLINE`` is not ``1``). Files that arrive inside a zip
    (the Default Credit ``.xls``) are downloaded as the zip, checked against
    the zip's sha256, unpacked with ``pooch.Unzip(members=[name])`` and then
    checked against the member's own sha256.

    Parameters
    ----------
    name : str
        A key of :data:`REGISTRY`, i.e. the original file name, for example
        ``"adult.data"`` or ``"default of credit card clients.xls"``.

    Returns
    -------
    pathlib.Path
        Path of a local file whose sha256 equals the registered one.

    Raises
    ------
    UnknownDataFileError
        ``name`` is not registered (also a ``KeyError``).
    DataFileNotFoundError
        The file is not local and downloads are off (also a ``FileNotFoundError``).
        The message names the file, the places searched, the URL and the
        expected sha256, and says to set ``CBDT_DATA_DIR`` or allow downloads.
    DataHashMismatchError
        A file in ``$CBDT_DATA_DIR`` (or, offline, in the cache) has the wrong
        sha256 (also a ``ValueError``). A corrupt *cached* file is downloaded
        again when downloads are allowed, with a warning.
    DataDownloadError
        The download failed (also an ``OSError``).
    """
    entry = _lookup(name)
    searched: list[str] = []

    ddir = data_dir()
    if ddir is not None:
        candidate = ddir / entry.name
        if candidate.is_file():
            return verify(candidate, entry.name)
        if not ddir.is_dir():
            warnings.warn(
                f"CBDT_DATA_DIR={str(ddir)!r} is not a directory; looking for "
                f"{entry.name!r} in the download cache instead.",
                stacklevel=2,
            )
        searched.append(f"CBDT_DATA_DIR: {candidate}")
    else:
        searched.append("CBDT_DATA_DIR: (not set)")

    root = cache_dir()
    cached = _cache_path(entry, root)
    searched.append(f"cache: {cached}")
    if cached.is_file():
        try:
            return verify(cached, entry.name)
        except DataHashMismatchError:
            if offline():
                raise
            warnings.warn(
                f"Cached copy {str(cached)!r} of {entry.name!r} does not match its sha256; "
                f"downloading it again from {entry.url}.",
                stacklevel=2,
            )
            cached.unlink()

    if offline():
        where = "; ".join(searched)
        raise DataFileNotFoundError(
            f"Data file {entry.name!r} was not found locally and downloads are switched off "
            f"(CBDT_OFFLINE=1). Looked in {where}. {_source_text(entry)}. "
            f"Expected sha256: {entry.sha256} ({entry.size:,} bytes). "
            f"To fix: put {entry.name!r} in a folder and set CBDT_DATA_DIR to that folder, "
            "or allow downloads by unsetting CBDT_OFFLINE."
        )

    return _download(entry, root)


def _download(entry: DataFile, root: Path) -> Path:
    try:
        if entry.in_archive:
            result = pooch.retrieve(
                entry.url,
                known_hash=f"sha256:{entry.archive_sha256}",
                fname=entry.archive_name,
                path=root,
                processor=pooch.Unzip(members=[entry.name]),
                progressbar=False,
            )
            paths = [Path(p) for p in (result if isinstance(result, list) else [result])]
            matches = [p for p in paths if p.name == entry.name]
            if len(matches) != 1:
                raise DataFormatError(
                    f"The zip at {entry.url} did not yield exactly one member named "
                    f"{entry.name!r}; it gave {[str(p) for p in paths]}."
                )
            path = matches[0]
        else:
            path = Path(
                pooch.retrieve(
                    entry.url,
                    known_hash=f"sha256:{entry.sha256}",
                    fname=entry.name,
                    path=root,
                    progressbar=False,
                )
            )
    except DataError:
        raise
    except Exception as exc:  # network errors, pooch's own hash check, disk errors
        raise DataDownloadError(
            f"Could not download {entry.name!r} into {str(root)!r}. {_source_text(entry)}. "
            f"Expected sha256: {entry.sha256}. Cause: {type(exc).__name__}: {exc}. "
            "To work offline, put the file in a folder and set CBDT_DATA_DIR to it."
        ) from exc
    return verify(path, entry.name)


# ---------------------------------------------------------------------------
# In-process memo of parsed files (used by the loaders)
# ---------------------------------------------------------------------------

_FRAME_CACHE: dict[tuple[object, ...], Any] = {}


def _memo_read(path: Path, key: tuple[object, ...], reader: Callable[[], T]) -> T:
    """Parse ``path`` with ``reader()`` once per (key, path, size, mtime) in this process.

    Loaders return a *copy* of what this gives, so callers may mutate their frame.
    """
    st = path.stat()
    full_key = (*key, str(path.resolve()), st.st_size, st.st_mtime_ns)
    if full_key not in _FRAME_CACHE:
        _FRAME_CACHE[full_key] = reader()
    return _FRAME_CACHE[full_key]
