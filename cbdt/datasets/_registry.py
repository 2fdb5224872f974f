"""Registry of the book's data files and the verified :func:`fetch`.

Every file the book reads is listed in :data:`REGISTRY` as a :class:`DataFile`:
its name, byte size and sha256 (the values of ``shared/data/PROVENANCE.md``,
which also records how each file's bytes were checked), and an ordered tuple
of :class:`DataSource` objects, the places that serve those bytes.

Where a file is downloaded from
-------------------------------
Each entry lists its sources in order of preference:

1. The **canonical** source first, where one exists: the UCI Machine Learning
   Repository for Adult (the current bundle ``static/public/2/adult.zip``, of
   which the file is a member, then the legacy direct URL) and for Default of
   Credit Card Clients (``static/public/350/default+of+credit+card+clients.zip``,
   member ``default of credit card clients.xls``, then the legacy ``.xls`` URL).
2. Then **pinned mirrors**: raw GitHub URLs at a fixed git commit, the one in
   ``PROVENANCE.md`` first, then further copies with the same bytes (a
   ``.gz`` copy of ``adult.data`` and ``adult.test`` is unpacked). The PJM
   files have no stable canonical download (Kaggle needs a login), so they
   have mirrors only.

**The sha256 decides, not the host.** A source is tried only until it fails:
an HTTP or network error, a zip without the member, or bytes (after unpacking
a zip or gzip) whose sha256 differs from the registered one. Such a source is
refused and the next one is tried; a download that succeeded after refusals
warns which sources failed and why. When every source fails,
:class:`DataDownloadError` lists each source with its reason, the expected
sha256, and how to place the file by hand.

Where a file is looked for
--------------------------
:func:`fetch` resolves a registered file name to a local path, in this order:

1. ``$CBDT_DATA_DIR/<name>``: a folder holding the files directly, under their
   original names (spaces included). This is how tests and CI read the data
   (``CBDT_DATA_DIR=../shared/data``), and the way to install a file by hand.
2. The download cache, ``$CBDT_CACHE_DIR`` or else ``pooch.os_cache("cbdt")``
   (for example ``~/.cache/cbdt`` on Linux), where every file is kept under its
   own name whichever source delivered it (archives are kept apart, in
   ``_downloads/``).
3. A download with :mod:`pooch` from the sources in order (see above), unless
   downloads are switched off with ``CBDT_OFFLINE=1``.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import unquote

from .._optional import require

pooch = require("pooch", "cbdt.datasets")

T = TypeVar("T")

__all__ = [
    "REGISTRY",
    "DataError",
    "DataFile",
    "DataSource",
    "DataFileNotFoundError",
    "DataHashMismatchError",
    "DataFormatError",
    "DataDownloadError",
    "UnknownDataFileError",
    "DOWNLOAD_TIMEOUT",
    "fetch",
    "verify",
    "sha256sum",
    "data_dir",
    "cache_dir",
    "offline",
]

#: Seconds a download may wait for the server to connect or to send more bytes.
DOWNLOAD_TIMEOUT = 60

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
    """A file's sha256 differs from the registered one (corrupt or wrong file).

    Attributes
    ----------
    path : pathlib.Path
        The offending file.
    expected_sha256, actual_sha256 : str
        Registered and computed hashes.
    url : str
        Where a correct copy can be downloaded: the file's primary source, or,
        for bytes refused during a download, the source that served them.
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
    """Every source of a file was tried and none gave the registered bytes.

    Parameters
    ----------
    message : str
        The full explanation (each source tried and why it failed, the
        expected sha256, and how to place the file by hand).
    name : str or None, optional
        The registered file name.
    sha256 : str or None, optional
        Its registered sha256.
    attempts : iterable of (DataSource, str), optional
        Each source tried, in order, with the reason it failed.

    Attributes
    ----------
    name : str or None
    sha256 : str or None
    attempts : tuple of (DataSource, str)
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        sha256: str | None = None,
        attempts: Iterable[tuple[DataSource, str]] = (),
    ) -> None:
        super().__init__(message)
        self.name = name
        self.sha256 = sha256
        self.attempts: tuple[tuple[DataSource, str], ...] = tuple(attempts)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

_KINDS = ("canonical", "mirror")


@dataclass(frozen=True)
class DataSource:
    """One place that serves the bytes of a registered file.

    Parameters
    ----------
    url : str
        Download URL (percent-encoded). For a mirror, a raw URL pinned at a
        fixed git commit, so that the bytes it serves cannot change.
    member : str or None, optional
        When ``url`` serves a zip: the member to extract (path inside the zip,
        ``/``-separated). The extracted member is what is checked.
    gzip : bool, optional
        When ``url`` serves a gzip-compressed copy of the file; it is
        decompressed, and the result is checked. Not together with ``member``.
    archive_sha256 : str or None, optional
        For a zip or gzip source whose archive bytes are pinned: the archive's
        own sha256, checked by pooch before unpacking (an extra check; the
        unpacked file's sha256 decides in any case).
    archive_size : int or None, optional
        The archive's size in bytes, when known (documentation only).
    kind : {"canonical", "mirror"}, optional
        Whether this is the data set's original publisher or a copy.
    """

    url: str
    member: str | None = None
    gzip: bool = False
    archive_sha256: str | None = None
    archive_size: int | None = None
    kind: str = "mirror"

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"DataSource.kind must be one of {_KINDS}, not {self.kind!r}")
        if self.member is not None and self.gzip:
            raise ValueError("A DataSource is a zip (member=...) or a gzip, not both.")
        if not self.is_archive and (self.archive_sha256 or self.archive_size):
            raise ValueError("archive_sha256 and archive_size need a zip member or gzip=True.")

    @property
    def is_archive(self) -> bool:
        """Whether the URL serves a zip (``member`` set) or a gzip to unpack."""
        return self.member is not None or self.gzip

    @property
    def archive_name(self) -> str | None:
        """The archive's file name (the last URL segment, decoded), or None for a plain file."""
        if not self.is_archive:
            return None
        return unquote(self.url.rsplit("/", 1)[-1])

    def describe(self) -> str:
        """One line naming the source: kind, URL and what is unpacked from it.

        Returns
        -------
        str
            For example ``"canonical https://.../adult.zip (zip member 'adult.data')"``.
        """
        text = f"{self.kind} {self.url}"
        if self.member is not None:
            text += f" (zip member {self.member!r}"
        elif self.gzip:
            text += " (gzip, decompressed"
        else:
            return text
        if self.archive_sha256:
            size = f", {self.archive_size:,} bytes" if self.archive_size else ""
            text += f"; archive sha256 {self.archive_sha256}{size}"
        return text + ")"


@dataclass(frozen=True)
class DataFile:
    """One registered data file and the ordered places to download it from.

    Parameters
    ----------
    name : str
        File name as stored (in ``$CBDT_DATA_DIR`` and in the cache); original
        spelling, spaces included.
    size : int
        Size in bytes.
    sha256 : str
        Lower-case hex sha256 of the file's bytes. This, not the host, decides
        whether a copy is accepted.
    sources : tuple of DataSource
        Where to download the file, tried in this order: the canonical source
        first where one exists, then pinned mirrors. A single
        :class:`DataSource`, a URL string, or a sequence mixing both is
        accepted and stored as a tuple of :class:`DataSource`.
    """

    name: str
    size: int
    sha256: str
    sources: tuple[DataSource, ...]

    def __post_init__(self) -> None:
        given: Any = self.sources
        if isinstance(given, str | DataSource):
            given = (given,)
        sources = tuple(DataSource(s) if isinstance(s, str) else s for s in given)
        if not sources or not all(isinstance(s, DataSource) for s in sources):
            raise ValueError(f"DataFile {self.name!r} needs at least one DataSource or URL.")
        object.__setattr__(self, "sources", sources)

    @property
    def urls(self) -> tuple[str, ...]:
        """The URLs of all sources, in the order they are tried."""
        return tuple(s.url for s in self.sources)

    # The properties below describe the primary (first) source. They keep the
    # names of the single-URL registry working.

    @property
    def url(self) -> str:
        """URL of the primary (first) source."""
        return self.sources[0].url

    @property
    def in_archive(self) -> bool:
        """Whether the primary source delivers the file inside a zip or gzip."""
        return self.sources[0].is_archive

    @property
    def archive_name(self) -> str | None:
        """File name of the primary source's archive, or None when it serves the file itself."""
        return self.sources[0].archive_name

    @property
    def archive_sha256(self) -> str | None:
        """Pinned sha256 of the primary source's archive, if any."""
        return self.sources[0].archive_sha256

    @property
    def archive_size(self) -> int | None:
        """Size of the primary source's archive, if known."""
        return self.sources[0].archive_size


# Canonical: the UCI Machine Learning Repository (current bundles, then the legacy layout).
_UCI_ADULT_ZIP = "https://archive.ics.uci.edu/static/public/2/adult.zip"
_UCI_ADULT = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
_UCI_CREDIT_ZIP = "https://archive.ics.uci.edu/static/public/350/default+of+credit+card+clients.zip"
_UCI_CREDIT_XLS = (
    "https://archive.ics.uci.edu/ml/machine-learning-databases/00350/"
    "default%20of%20credit%20card%20clients.xls"
)

# Mirrors pinned at a commit (shared/data/PROVENANCE.md; the first of each is its registry URL).
_GH = "https://raw.githubusercontent.com/"
_ADULT = _GH + "katinka314/XAI-project/5d289c6ba690b729e1b3fcc8d7f1a059cb641db2/data/"
_ADULT_BDM = _GH + "Allen-Qiu/bdm-book/a866241255c59fe94b9c5b28d648a06f530ce043/data/"
_ADULT_TMCOMBI = _GH + "tmcombi/tmcombi/9a82e64c1d2c320ac9c04df72e4b2a1391d39511/data/adult/"
_ADULT_MC2 = _GH + "UCLA-StarAI/mc2/9b5345ada98fc74f6af860df46b9783d5bcc0bb5/data/adult/"
_ADULT_DELVE = (  # the 1996 DELVE gzip copies of the UCI files
    _GH + "vukk/lfr/ed62ba97952b233be794314ce2ed748877edfeeb/data/adult-delve/Source/"
)
_PJM = _GH + "panambY/Hourly_Energy_Consumption/3d9359d970ce534e3d3a81bf70a4d3abc7008b8c/data/"
_PJM_SAGEMAKER = (
    _GH + "wsko/intro_to_sagemaker/5594382fa50f2164e169895742e15fd5d3a96818/"
    "data/hourly_energy_consumption/"
)
_PJME_TOPMOW = (
    _GH + "topmow/data_cleaning/2652b7bf911d4c5bc4f90b55da1e85c7c8870cd0/output/PJME_hourly.csv"
)
_CREDIT_ZIP = (
    _GH + "AhmeddAshour/Ensemble-Learning-for-Loan-Prediction/"
    "5a1fb3d128244e7cdb0a99a5dc69c5c0d512e0c1/default%20of%20credit%20card%20clients.xls.zip"
)
_EST = (
    _GH + "ashutoshsingh429/SmartLoadForecasting/"
    "27c64473d981cada8bbf56f62822d08599be4524/input/est_hourly.paruqet"
)


def _adult(name: str, size: int, sha256: str, *more: DataSource) -> DataFile:
    """An Adult file: UCI's zip member, UCI's legacy URL, the registry mirror, then ``more``."""
    return DataFile(
        name,
        size,
        sha256,
        (
            DataSource(_UCI_ADULT_ZIP, member=name, kind="canonical"),
            DataSource(_UCI_ADULT + name, kind="canonical"),
            DataSource(_ADULT + name),
            *more,
        ),
    )


def _pjm(name: str, size: int, sha256: str, *more: DataSource) -> DataFile:
    """A PJM CSV: no stable canonical download; two mirrors with the same git blobs."""
    return DataFile(
        name,
        size,
        sha256,
        (DataSource(_PJM + name), DataSource(_PJM_SAGEMAKER + name), *more),
    )


_FILES: tuple[DataFile, ...] = (
    _adult(
        "adult.data",
        3_974_305,
        "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
        DataSource(_ADULT_BDM + "adult.data"),
        DataSource(_ADULT_TMCOMBI + "adult.data"),
        DataSource(
            _ADULT_DELVE + "adult.data.gz",
            gzip=True,
            archive_sha256="fb986d3609cdf068a1c234ed2695603b74c66c4be723467d9d69542024847442",
            archive_size=439_363,
        ),
    ),
    _adult(
        "adult.test",
        2_003_153,
        "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
        DataSource(
            _ADULT_DELVE + "adult.test.gz",
            gzip=True,
            archive_sha256="74aa81a0e0880467a50de97be6ba8130df14a3ef8c0c3a14de2a9a997d068fbf",
            archive_size=220_798,
        ),
    ),
    _adult(
        "adult.names",
        5_229,
        "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
        DataSource(_GH + "vukk/lfr/ed62ba97952b233be794314ce2ed748877edfeeb/data/adult.names"),
        DataSource(_ADULT_MC2 + "adult.names"),
    ),
    DataFile(
        "default of credit card clients.xls",
        5_539_328,
        "30c6be3abd8dcfd3e6096c828bad8c2f011238620f5369220bd60cfc82700933",
        (
            DataSource(
                _UCI_CREDIT_ZIP, member="default of credit card clients.xls", kind="canonical"
            ),
            DataSource(_UCI_CREDIT_XLS, kind="canonical"),
            DataSource(
                _CREDIT_ZIP,
                member="default of credit card clients.xls",
                archive_sha256="04c849fcb53020868f0f29b0b31df89c3559b4f30674c8e2edaa0585cbaa909c",
                archive_size=1_432_641,
            ),
        ),
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
        DataSource(_PJME_TOPMOW),
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
        (DataSource(_EST),),  # the only copy found (PROVENANCE.md)
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


def _sources_text(entry: DataFile) -> str:
    """The numbered list of ``entry``'s sources, one per line."""
    return "\n".join(f"  {i}. {s.describe()}" for i, s in enumerate(entry.sources, 1))


def _manual_text(entry: DataFile) -> str:
    """How to place ``entry`` by hand."""
    return (
        f"To install it by hand: download it from any source above (extract the named member "
        f"of a zip, gunzip a gzip), check that its sha256 is {entry.sha256}, put it under the "
        f"name {entry.name!r} in a folder and set CBDT_DATA_DIR to that folder."
    )


def _check(path: Path, entry: DataFile) -> Path:
    """``path`` if its sha256 is ``entry.sha256``; else :class:`DataHashMismatchError`."""
    actual = sha256sum(path)
    if actual != entry.sha256:
        size = path.stat().st_size
        raise DataHashMismatchError(
            f"Data file {str(path)!r} is corrupt or not the registered file {entry.name!r}: "
            f"expected sha256 {entry.sha256} ({entry.size:,} bytes), "
            f"actual sha256 {actual} ({size:,} bytes). "
            f"Replace it with a fresh copy from one of its sources:\n{_sources_text(entry)}\n"
            "or remove it (and point CBDT_DATA_DIR elsewhere) so that it can be downloaded "
            "again.",
            path=path,
            expected_sha256=entry.sha256,
            actual_sha256=actual,
            url=entry.url,
        )
    return path


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
        sizes), and every source a correct copy can be downloaded from.
    """
    return _check(Path(path), _lookup(name))


# ---------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------

#: Folder of the cache that keeps downloaded archives (zip, gzip) apart from the files.
_DOWNLOADS = "_downloads"


def _cache_candidates(entry: DataFile, root: Path) -> list[Path]:
    """Where :func:`fetch` looks for ``entry`` in the cache ``root``, in order.

    The file's own name first (where every download now ends up), then, if
    present, where the single-URL registry left a zip member
    (``<zip name>.unzip/<member>``, pooch.Unzip's default folder), so that
    older caches keep working offline.
    """
    paths = [root / entry.name]
    for source in entry.sources:
        if source.member is not None:
            legacy = root / f"{source.archive_name}.unzip" / source.member
            if legacy.is_file() and legacy not in paths:
                paths.append(legacy)
    return paths


def fetch(name: str) -> Path:
    """Local path of a registered data file, checked against its sha256.

    Looks in ``$CBDT_DATA_DIR`` first, then in the download cache
    (``$CBDT_CACHE_DIR`` or ``pooch.os_cache("cbdt")``), and downloads the file
    with :mod:`pooch` into the cache when it is in neither place and downloads
    are allowed (``CBDT_OFFLINE`` is not ``1``). The download tries the file's
    :attr:`DataFile.sources` in order (canonical source first, then pinned
    mirrors): a zip source is unpacked with ``pooch.Unzip(members=[member])``, a
    gzip source with ``pooch.Decompress``, and whatever a source delivers is
    accepted only if its sha256 equals the registered one; otherwise the
    source is refused and the next one is tried. If a source succeeds after
    others failed, a :class:`UserWarning` names the failed ones and why.

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
        The message names the file, the places searched, every source and the
        expected sha256, and says to set ``CBDT_DATA_DIR`` or allow downloads.
    DataHashMismatchError
        A file in ``$CBDT_DATA_DIR`` (or, offline, in the cache) has the wrong
        sha256 (also a ``ValueError``). A corrupt *cached* file is downloaded
        again when downloads are allowed, with a warning.
    DataDownloadError
        Every source failed (also an ``OSError``). The message lists each
        source tried and why it failed, the expected sha256, and how to place
        the file by hand; :attr:`DataDownloadError.attempts` holds the same.
    """
    entry = _lookup(name)
    searched: list[str] = []

    ddir = data_dir()
    if ddir is not None:
        candidate = ddir / entry.name
        if candidate.is_file():
            return _check(candidate, entry)
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
    for cached in _cache_candidates(entry, root):
        searched.append(f"cache: {cached}")
        if not cached.is_file():
            continue
        try:
            return _check(cached, entry)
        except DataHashMismatchError:
            if offline():
                raise
            warnings.warn(
                f"Cached copy {str(cached)!r} of {entry.name!r} does not match its sha256; "
                "removed it, downloading the file again.",
                stacklevel=2,
            )
            cached.unlink()

    if offline():
        where = "; ".join(searched)
        raise DataFileNotFoundError(
            f"Data file {entry.name!r} was not found locally and downloads are switched off "
            f"(CBDT_OFFLINE=1). Looked in {where}. "
            f"Expected sha256: {entry.sha256} ({entry.size:,} bytes). "
            f"Its sources:\n{_sources_text(entry)}\n"
            f"To fix: put {entry.name!r} in a folder and set CBDT_DATA_DIR to that folder, "
            "or allow downloads by unsetting CBDT_OFFLINE."
        )

    return _download(entry, root)


def _retrieve(source: DataSource, **kwargs: Any) -> Any:
    """``pooch.retrieve`` of ``source.url``, with a timeout for HTTP(S) and no progress bar."""
    if source.url.startswith(("http://", "https://")):
        kwargs["downloader"] = pooch.HTTPDownloader(progressbar=False, timeout=DOWNLOAD_TIMEOUT)
    return pooch.retrieve(source.url, progressbar=False, **kwargs)


def _remember(path: Path, digest: str) -> None:
    """Record a digest already computed for ``path`` in the :func:`sha256sum` memo."""
    p = path.resolve()
    st = p.stat()
    _HASH_CACHE[(str(p), st.st_size, st.st_mtime_ns)] = digest


def _download_from(entry: DataFile, source: DataSource, root: Path) -> Path:
    """Download ``entry`` from one source into ``root / entry.name``; checked, or raise."""
    final = root / entry.name
    if not source.is_archive:
        # pooch checks the sha256 of the download before putting it in place.
        path = _retrieve(source, known_hash=f"sha256:{entry.sha256}", fname=entry.name, path=root)
        return _check(Path(path), entry)

    # A zip or gzip: kept under a name unique to its URL, so that the other
    # members of a zip (the three Adult files) come without a second download.
    fname = hashlib.sha256(source.url.encode()).hexdigest()[:16] + "-" + str(source.archive_name)
    downloads = root / _DOWNLOADS
    known_hash = f"sha256:{source.archive_sha256}" if source.archive_sha256 else None
    if source.member is not None:
        result = _retrieve(
            source,
            known_hash=known_hash,
            fname=fname,
            path=downloads,
            processor=pooch.Unzip(members=[source.member]),
        )
        want = PurePosixPath(source.member).parts
        found = [Path(p) for p in result if Path(p).parts[-len(want) :] == want]
        if len(found) != 1:
            raise DataFormatError(
                f"the zip has no member {source.member!r} (extracted: {[str(p) for p in result]})"
            )
        unpacked = found[0]
    else:
        unpacked = Path(
            _retrieve(
                source,
                known_hash=known_hash,
                fname=fname,
                path=downloads,
                processor=pooch.Decompress(method="gzip"),
            )
        )
    actual = sha256sum(unpacked)
    if actual != entry.sha256:
        size = unpacked.stat().st_size
        unpacked.unlink(missing_ok=True)
        (downloads / fname).unlink(missing_ok=True)  # not the bytes we want: fetch anew next time
        what = f"member {source.member!r} of the zip" if source.member else "the gunzipped file"
        raise DataHashMismatchError(
            f"{what} has sha256 {actual} ({size:,} bytes), expected {entry.sha256} "
            f"({entry.size:,} bytes)",
            path=unpacked,
            expected_sha256=entry.sha256,
            actual_sha256=actual,
            url=source.url,
        )
    os.replace(unpacked, final)
    _remember(final, actual)
    return final


def _reason(exc: Exception) -> str:
    """Why a source failed, in one line; sha256 mismatches are marked as refusals."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    mismatch = isinstance(exc, DataHashMismatchError) or (
        isinstance(exc, ValueError) and "does not match the known hash" in str(exc)
    )  # the latter is pooch's own hash check
    return f"refused, sha256 mismatch: {text}" if mismatch else text


def _download(entry: DataFile, root: Path) -> Path:
    """Try ``entry.sources`` in order; the first whose bytes check out wins."""
    failures: list[tuple[DataSource, str]] = []
    for source in entry.sources:
        try:
            path = _download_from(entry, source, root)
        except Exception as exc:  # network, HTTP status, hash, zip and disk errors
            failures.append((source, _reason(exc)))
            continue
        if failures:
            failed = "\n".join(f"  - {s.describe()}: {why}" for s, why in failures)
            warnings.warn(
                f"Downloaded {entry.name!r} from {source.describe()} after "
                f"{len(failures)} source(s) failed:\n{failed}",
                stacklevel=3,
            )
        return path

    tried = "\n".join(
        f"  {i}. {s.describe()}\n     -> {why}" for i, (s, why) in enumerate(failures, 1)
    )
    raise DataDownloadError(
        f"Could not download {entry.name!r} into {str(root)!r}: all {len(failures)} "
        f"source(s) failed. Expected sha256: {entry.sha256} ({entry.size:,} bytes); "
        "a source whose bytes have another sha256 is refused, whatever its host.\n"
        f"Sources tried, in order:\n{tried}\n{_manual_text(entry)}",
        name=entry.name,
        sha256=entry.sha256,
        attempts=failures,
    )


# ---------------------------------------------------------------------------
# In-process memo of parsed files (used by the loaders)
# ---------------------------------------------------------------------------

_FRAME_CACHE: dict[tuple[object, ...], Any] = {}


def memo_read(path: Path, key: tuple[object, ...], reader: Callable[[], T]) -> T:
    """Parse ``path`` with ``reader()`` once per (key, path, size, mtime) in this process.

    Loaders return a *copy* of what this gives, so callers may mutate their frame.
    """
    st = path.stat()
    full_key = (*key, str(path.resolve()), st.st_size, st.st_mtime_ns)
    if full_key not in _FRAME_CACHE:
        _FRAME_CACHE[full_key] = reader()
    return _FRAME_CACHE[full_key]
