"""Tests of cbdt.datasets: registry, verified fetch, loaders, proxy returns (App. C.5), features.

Tests that read the real files need ``CBDT_DATA_DIR`` (CI sets it to ``../shared/data``) and
are skipped with a reason otherwise. Nothing here touches the network: an autouse fixture
replaces ``pooch.retrieve`` by a function that fails the test if called; the tests of the
download path install their own fake, or (the ``http`` fixture) put the real one back and
download from a local HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import re
import shutil
import socket
import threading
import warnings
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pooch
import pytest

from cbdt import datasets as D
from cbdt.datasets import _registry
from cbdt.datasets._registry import DataSource

_REAL_RETRIEVE = pooch.retrieve  # saved before the autouse fixture below replaces it

# ---------------------------------------------------------------------------
# helpers and fixtures
# ---------------------------------------------------------------------------

_ENV_DATA = os.environ.get("CBDT_DATA_DIR", "").strip()
REAL_DATA = Path(_ENV_DATA) if _ENV_DATA else None


def needs(*names: str) -> pytest.MarkDecorator:
    """Skip unless every named file sits in $CBDT_DATA_DIR."""
    if REAL_DATA is None:
        return pytest.mark.skip(reason="CBDT_DATA_DIR is not set; real-data tests skipped")
    absent = [n for n in names if not (REAL_DATA / n).is_file()]
    return pytest.mark.skipif(
        bool(absent), reason=f"CBDT_DATA_DIR={REAL_DATA} lacks {absent}; real-data test skipped"
    )


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if any test would download."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a test tried to download: pooch.retrieve{args}")

    monkeypatch.setattr(pooch, "retrieve", refuse)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[D.DataFile, bytes]:
    """A registered toy file (not on disk yet), an empty data dir and an empty cache dir."""
    content = b"col\n1\n2\n"
    entry = D.DataFile(
        "toy file.csv",
        len(content),
        hashlib.sha256(content).hexdigest(),
        (
            DataSource(
                "https://example.invalid/0123456789abcdef0123456789abcdef01234567/toy%20file.csv"
            ),
        ),
    )
    monkeypatch.setitem(D.REGISTRY, entry.name, entry)
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("CBDT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CBDT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CBDT_OFFLINE", raising=False)
    return entry, content


@pytest.fixture(scope="module")
def credit() -> pd.DataFrame:
    if REAL_DATA is None or not (REAL_DATA / "default of credit card clients.xls").is_file():
        pytest.skip("CBDT_DATA_DIR unset or lacks 'default of credit card clients.xls'")
    return D.load_default_credit()


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------


def test_registry_entries_are_pinned() -> None:
    assert len(D.REGISTRY) == 17
    assert sum(f.size for f in D.REGISTRY.values()) == 45_097_777  # PROVENANCE: total size
    for name, entry in D.REGISTRY.items():
        assert entry.name == name
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256)
        assert isinstance(entry.sources, tuple) and entry.sources
        assert entry.url == entry.sources[0].url and entry.urls[0] == entry.url
        assert len(set(entry.urls)) == len(entry.urls)
        kinds = [s.kind for s in entry.sources]
        assert kinds == sorted(kinds), "canonical sources come before mirrors"
        assert "mirror" in kinds, "every file keeps at least one pinned mirror"
        for source in entry.sources:
            assert source.url.startswith("https://") and " " not in source.url
            if source.kind == "canonical":
                assert source.url.startswith("https://archive.ics.uci.edu/")
            else:
                assert source.url.startswith("https://raw.githubusercontent.com/")
                assert re.search(r"/[0-9a-f]{40}/", source.url), "mirror URL must pin a commit"
            if source.archive_sha256 is not None:
                assert re.fullmatch(r"[0-9a-f]{64}", source.archive_sha256)
    # UCI files: the canonical UCI zip first, with the registered file as its member
    for name in ("adult.data", "adult.test", "adult.names"):
        first = D.REGISTRY[name].sources[0]
        assert (first.url, first.member, first.kind) == (
            "https://archive.ics.uci.edu/static/public/2/adult.zip",
            name,
            "canonical",
        )
    credit = D.REGISTRY["default of credit card clients.xls"]
    assert credit.sources[0] == DataSource(
        "https://archive.ics.uci.edu/static/public/350/default+of+credit+card+clients.zip",
        member="default of credit card clients.xls",
        kind="canonical",
    )
    assert credit.in_archive and credit.archive_sha256 is None  # UCI's zip bytes are not pinned
    mirror = credit.sources[-1]
    assert mirror.member == credit.name and mirror.archive_size == 1_432_641
    assert mirror.archive_name == "default of credit card clients.xls.zip"
    # PJM: no canonical download, mirrors only
    for name in ("PJME_hourly.csv", "est_hourly.paruqet"):
        assert {s.kind for s in D.REGISTRY[name].sources} == {"mirror"}


def test_data_file_normalises_sources() -> None:
    entry = D.DataFile("x.csv", 1, "0" * 64, "https://example.invalid/x.csv")
    assert entry.sources == (DataSource("https://example.invalid/x.csv"),)
    assert entry.url == "https://example.invalid/x.csv" and not entry.in_archive
    two = D.DataFile("x.csv", 1, "0" * 64, ["https://a.invalid/x.zip", DataSource("https://b/x")])
    assert two.urls == ("https://a.invalid/x.zip", "https://b/x")
    assert hash(two) == hash(D.DataFile("x.csv", 1, "0" * 64, tuple(two.sources)))
    with pytest.raises(ValueError, match="at least one"):
        D.DataFile("x.csv", 1, "0" * 64, ())
    with pytest.raises(ValueError, match="kind"):
        DataSource("https://a/x", kind="official")
    with pytest.raises(ValueError, match="not both"):
        DataSource("https://a/x.zip", member="x", gzip=True)
    with pytest.raises(ValueError, match="archive_sha256"):
        DataSource("https://a/x", archive_sha256="0" * 64)


@needs("PROVENANCE.md")
def test_registry_matches_provenance() -> None:
    text = (REAL_DATA / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `data/([^`]+)` \| ([\d,]+) \| `([0-9a-f]{64})` \| .*?(https://\S+) \|$",
        text,
        flags=re.MULTILINE,
    )
    assert len(rows) == 17
    for name, size, sha, url in rows:
        entry = D.REGISTRY[name]
        assert (entry.size, entry.sha256) == (int(size.replace(",", "")), sha)
        mirrors = [s.url for s in entry.sources if s.kind == "mirror"]
        assert mirrors[0] == url  # PROVENANCE's pinned URL is the first mirror
    for entry in D.REGISTRY.values():
        for source in entry.sources:
            if source.archive_sha256 is not None:
                assert source.archive_sha256 in text  # pinned archive hashes come from there
            if source.kind == "mirror":  # every mirror's repository and commit are recorded
                repo, commit = re.match(
                    r"https://raw\.githubusercontent\.com/([^/]+/[^/]+)/([0-9a-f]{40})/", source.url
                ).groups()
                assert repo in text and commit in text, source.url


@needs(*D.REGISTRY)
def test_every_real_file_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CBDT_DATA_DIR", str(REAL_DATA))
    for name in D.REGISTRY:
        assert D.fetch(name) == REAL_DATA / name


def test_unknown_name() -> None:
    with pytest.raises(D.UnknownDataFileError, match="adult.data") as info:
        D.fetch("adult.csv")
    assert isinstance(info.value, KeyError) and isinstance(info.value, D.DataError)


# ---------------------------------------------------------------------------
# fetch: data dir, hash check, offline error, (fake) download
# ---------------------------------------------------------------------------


def test_fetch_from_data_dir_caches_the_hash(toy, tmp_path, monkeypatch) -> None:
    entry, content = toy
    path = tmp_path / "data" / entry.name
    path.write_bytes(content)
    calls = []
    real = hashlib.file_digest
    monkeypatch.setattr(_registry.hashlib, "file_digest", lambda *a: calls.append(1) or real(*a))
    assert D.fetch(entry.name) == path
    assert D.fetch(entry.name) == path
    assert len(calls) == 1  # second call served from the (path, size, mtime) memo
    os.utime(path, ns=(1, 1))  # new mtime -> hashed again
    D.fetch(entry.name)
    assert len(calls) == 2


def test_corrupt_toy_file(toy, tmp_path) -> None:
    entry, content = toy
    path = tmp_path / "data" / entry.name
    path.write_bytes(content.replace(b"2", b"3"))
    with pytest.raises(D.DataHashMismatchError) as info:
        D.fetch(entry.name)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, D.DataError)
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    for part in (str(path), entry.sha256, actual, entry.url):
        assert part in str(err)
    assert (err.path, err.expected_sha256, err.actual_sha256, err.url) == (
        path,
        entry.sha256,
        actual,
        entry.url,
    )


@needs("adult.names")
def test_corrupt_real_copy(tmp_path, monkeypatch) -> None:
    data = (REAL_DATA / "adult.names").read_bytes()
    (tmp_path / "adult.names").write_bytes(data[:-1] + b"!")
    monkeypatch.setenv("CBDT_DATA_DIR", str(tmp_path))
    entry = D.REGISTRY["adult.names"]
    with pytest.raises(D.DataHashMismatchError, match=entry.sha256) as info:
        D.fetch("adult.names")
    assert entry.url in str(info.value)
    assert str(tmp_path / "adult.names") in str(info.value)


@pytest.mark.parametrize("name", ["adult.data", "default of credit card clients.xls"])
def test_offline_missing_file(name, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CBDT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CBDT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CBDT_OFFLINE", "1")
    entry = D.REGISTRY[name]
    with pytest.raises(D.DataFileNotFoundError) as info:
        D.fetch(name)
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, D.DataError)
    for part in (name, entry.sha256, "CBDT_DATA_DIR", "CBDT_OFFLINE", str(tmp_path)):
        assert part in msg
    for source in entry.sources:  # every source, with its zip member and pinned zip hash
        assert source.describe() in msg
        assert source.url in msg
        if source.archive_sha256:
            assert source.archive_sha256 in msg


def test_offline_corrupt_cache(toy, tmp_path, monkeypatch) -> None:
    entry, content = toy
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / entry.name).write_bytes(b"junk")
    monkeypatch.setenv("CBDT_OFFLINE", "1")
    with pytest.raises(D.DataHashMismatchError, match=entry.sha256):
        D.fetch(entry.name)


def test_fake_download_to_cache(toy, tmp_path, monkeypatch) -> None:
    entry, content = toy
    seen = {}

    def fake_retrieve(url, known_hash, fname, path, progressbar=False, downloader=None):
        seen.update(url=url, known_hash=known_hash, fname=fname, path=path)
        assert isinstance(downloader, pooch.HTTPDownloader) is url.startswith("http")
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / fname).write_bytes(content)
        return str(Path(path) / fname)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    got = D.fetch(entry.name)
    assert got == tmp_path / "cache" / entry.name
    assert seen == dict(
        url=entry.url,
        known_hash=f"sha256:{entry.sha256}",
        fname=entry.name,
        path=tmp_path / "cache",
    )
    monkeypatch.setattr(pooch, "retrieve", lambda *a, **k: pytest.fail("cache hit expected"))
    assert D.fetch(entry.name) == got  # now served from the cache, no second download


def test_download_failure_is_reported(toy, monkeypatch) -> None:
    entry, _ = toy

    def broken(*args, **kwargs):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(pooch, "retrieve", broken)
    with pytest.raises(D.DataDownloadError, match="no route to host") as info:
        D.fetch(entry.name)
    assert isinstance(info.value, OSError)
    assert entry.url in str(info.value) and entry.sha256 in str(info.value)
    assert info.value.attempts == ((entry.sources[0], "ConnectionError: no route to host"),)
    assert (info.value.name, info.value.sha256) == (entry.name, entry.sha256)


def _fake_zip_retrieve(member_name: str, member_bytes: bytes):
    """A pooch.retrieve stand-in that 'downloads' a zip built here and runs the real processor."""

    def fake(url, known_hash, fname, path, progressbar=False, processor=None, downloader=None):
        Path(path).mkdir(parents=True, exist_ok=True)
        archive = Path(path) / fname
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(member_name, member_bytes)
            zf.writestr(f"__MACOSX/._{member_name}", b"resource fork")
        assert isinstance(processor, pooch.Unzip) and processor.members == [member_name]
        return processor(str(archive), "download", None)

    return fake


def test_zip_member_download_and_check(toy, tmp_path, monkeypatch) -> None:
    entry, content = toy
    zipped = D.DataFile(
        entry.name,
        entry.size,
        entry.sha256,
        (
            DataSource(
                "https://example.invalid/" + "0" * 40 + "/toy%20file.csv.zip",
                member=entry.name,
                archive_sha256="f" * 64,
                archive_size=1,
            ),
        ),
    )
    monkeypatch.setitem(D.REGISTRY, entry.name, zipped)
    monkeypatch.setattr(pooch, "retrieve", _fake_zip_retrieve(entry.name, content))
    got = D.fetch(entry.name)
    assert got == tmp_path / "cache" / entry.name  # moved out of the extraction folder
    assert got.read_bytes() == content
    # a member whose bytes differ from the registered sha256 is refused
    got.unlink()
    monkeypatch.setattr(pooch, "retrieve", _fake_zip_retrieve(entry.name, b"other bytes"))
    with pytest.raises(D.DataDownloadError, match="refused, sha256 mismatch") as info:
        D.fetch(entry.name)
    assert hashlib.sha256(b"other bytes").hexdigest() in str(info.value)
    assert not got.exists()


def test_legacy_cached_zip_member_is_still_found(toy, tmp_path, monkeypatch) -> None:
    """The single-URL registry left zip members in ``<zip name>.unzip/``; offline still finds it."""
    entry, content = toy
    url = "https://example.invalid/" + "0" * 40 + "/toy%20file.csv.zip"
    monkeypatch.setitem(
        D.REGISTRY,
        entry.name,
        D.DataFile(entry.name, entry.size, entry.sha256, DataSource(url, member=entry.name)),
    )
    legacy = tmp_path / "cache" / "toy file.csv.zip.unzip" / entry.name
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(content)
    monkeypatch.setenv("CBDT_OFFLINE", "1")
    assert D.fetch(entry.name) == legacy


# ---------------------------------------------------------------------------
# download from several sources, against a local HTTP server (no network)
# ---------------------------------------------------------------------------


class _Server:
    """Routes of the local test server, and the request paths it has seen (in order)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes]] = {}
        self.requests: list[str] = []
        self.port = 0

    def serve(self, path: str, body: bytes, status: int = 200) -> str:
        """Serve ``body`` with ``status`` at ``path``; return its URL."""
        self.routes[path] = (status, body)
        return self.url(path)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def http(toy, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Server]:
    """A threaded HTTP server on 127.0.0.1 (free port); the real pooch.retrieve is back.

    Unknown paths answer 404. ``toy`` has set an empty CBDT_DATA_DIR, a temp CBDT_CACHE_DIR,
    and unset CBDT_OFFLINE.
    """
    state = _Server()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            status, body = state.routes.get(self.path, (404, b"not found"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(pooch, "retrieve", _REAL_RETRIEVE)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _refused_url() -> str:
    """A URL on a local port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/toy.csv"


def _register(monkeypatch, entry: D.DataFile, *sources: DataSource, name: str | None = None):
    """Register ``entry``'s bytes (or another name with them) with the given sources."""
    new = D.DataFile(name or entry.name, entry.size, entry.sha256, sources)
    monkeypatch.setitem(D.REGISTRY, new.name, new)
    return new


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return buf.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def warnings_as_errors() -> Iterator[None]:
    """Fail on a UserWarning, e.g. the one saying that a source failed before another worked."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        yield


def test_http_failing_primary_falls_through_to_mirror(toy, http, tmp_path, monkeypatch) -> None:
    entry, content = toy
    primary = DataSource(http.url("/gone/toy.csv"), kind="canonical")  # 404
    refused = DataSource(_refused_url())  # connection refused
    good = DataSource(http.serve("/mirror/toy.csv", content))
    _register(monkeypatch, entry, primary, refused, good)
    with pytest.warns(UserWarning, match="after 2 source") as record:
        got = D.fetch(entry.name)
    assert got == tmp_path / "cache" / entry.name
    assert got.read_bytes() == content and _sha(got.read_bytes()) == entry.sha256
    assert http.requests == ["/gone/toy.csv", "/mirror/toy.csv"]
    warning = str(record[0].message)
    assert good.describe() in warning  # names the source that was used ...
    assert primary.url in warning and "404" in warning  # ... and each failed one, with why
    assert refused.url in warning and "ConnectionError" in warning
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [entry.name]
    # served from the cache afterwards: no new request
    assert D.fetch(entry.name) == got and len(http.requests) == 2


def test_http_wrong_bytes_refused_next_source_used(toy, http, tmp_path, monkeypatch) -> None:
    entry, content = toy
    wrong = b"col\n1\n3\n"
    bad = DataSource(http.serve("/bad/toy.csv", wrong), kind="canonical")
    good = DataSource(http.serve("/good/toy.csv", content))
    _register(monkeypatch, entry, bad, good)
    with pytest.warns(UserWarning, match="refused, sha256 mismatch") as record:
        got = D.fetch(entry.name)
    assert got.read_bytes() == content
    assert http.requests == ["/bad/toy.csv", "/good/toy.csv"]
    warning = str(record[0].message)
    assert bad.url in warning and _sha(wrong) in warning and entry.sha256 in warning
    # the refused bytes were never put in place, nor left behind
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [entry.name]

    # with the wrong source alone, the mismatch is the error
    got.unlink()
    _register(monkeypatch, entry, bad)
    with pytest.raises(D.DataDownloadError, match="refused, sha256 mismatch") as info:
        D.fetch(entry.name)
    assert _sha(wrong) in str(info.value) and entry.sha256 in str(info.value)
    assert not got.exists()


def test_http_zip_member_extracted_and_verified(toy, http, tmp_path, monkeypatch) -> None:
    entry, content = toy
    other = b"a,b\n1,2\n"
    bundle = _zip(
        {
            entry.name: content,
            f"__MACOSX/._{entry.name}": b"resource fork",
            "nested/other.csv": other,
        }
    )
    url = http.serve("/static/bundle.zip", bundle)
    _register(monkeypatch, entry, DataSource(url, member=entry.name, kind="canonical"))
    with warnings_as_errors():
        got = D.fetch(entry.name)
    assert got == tmp_path / "cache" / entry.name
    assert got.read_bytes() == content and _sha(got.read_bytes()) == entry.sha256
    assert http.requests == ["/static/bundle.zip"]
    # another member of the same zip (in a folder): the zip kept in the cache is reused
    monkeypatch.setitem(
        D.REGISTRY,
        "other.csv",
        D.DataFile(
            "other.csv", len(other), _sha(other), DataSource(url, member="nested/other.csv")
        ),
    )
    with warnings_as_errors():
        got_other = D.fetch("other.csv")
    assert got_other == tmp_path / "cache" / "other.csv" and got_other.read_bytes() == other
    assert http.requests == ["/static/bundle.zip"]
    # a pinned zip hash that does not match refuses the zip before unpacking
    got.unlink()
    pinned_wrong = DataSource(
        http.url("/static/bundle.zip"), member=entry.name, archive_sha256="0" * 64
    )
    gz = gzip.compress(content)
    gz_source = DataSource(
        http.serve("/toy.csv.gz", gz), gzip=True, archive_sha256=_sha(gz), archive_size=len(gz)
    )
    _register(monkeypatch, entry, pinned_wrong, gz_source)
    with pytest.warns(UserWarning, match="refused, sha256 mismatch"):
        got = D.fetch(entry.name)
    assert got.read_bytes() == content  # from the gzip mirror, decompressed and checked
    assert http.requests[-2:] == ["/static/bundle.zip", "/toy.csv.gz"]


def test_http_all_sources_fail_lists_each(toy, http, tmp_path, monkeypatch) -> None:
    entry, content = toy
    wrong = b"col\n9\n9\n"
    sources = (
        DataSource(http.url("/gone.zip"), member=entry.name, kind="canonical"),  # 404
        DataSource(_refused_url(), kind="canonical"),  # connection refused
        DataSource(http.serve("/wrong.csv", wrong)),  # wrong bytes
        DataSource(http.serve("/nomember.zip", _zip({"x.csv": content})), member=entry.name),
        DataSource(http.serve("/badmember.zip", _zip({entry.name: wrong})), member=entry.name),
    )
    _register(monkeypatch, entry, *sources)
    with pytest.raises(D.DataDownloadError) as info:
        D.fetch(entry.name)
    err, msg = info.value, str(info.value)
    assert isinstance(err, OSError) and isinstance(err, D.DataError)
    assert [source for source, _ in err.attempts] == list(sources)
    reasons = [why for _, why in err.attempts]
    assert "404" in reasons[0] and "HTTPError" in reasons[0]
    assert "ConnectionError" in reasons[1]
    assert reasons[2].startswith("refused, sha256 mismatch") and _sha(wrong) in reasons[2]
    assert "no member 'toy file.csv'" in reasons[3]
    assert reasons[4].startswith("refused, sha256 mismatch") and _sha(wrong) in reasons[4]
    for i, (source, why) in enumerate(err.attempts, 1):
        assert f"{i}. {source.describe()}" in msg and why in msg
    assert "all 5 source(s) failed" in msg and entry.sha256 in msg and "CBDT_DATA_DIR" in msg
    assert http.requests == ["/gone.zip", "/wrong.csv", "/nomember.zip", "/badmember.zip"]
    assert not (tmp_path / "cache" / entry.name).exists()


def test_http_offline_never_downloads(toy, http, monkeypatch) -> None:
    entry, content = toy
    _register(monkeypatch, entry, DataSource(http.serve("/toy.csv", content)))
    monkeypatch.setenv("CBDT_OFFLINE", "1")
    with pytest.raises(D.DataFileNotFoundError, match="CBDT_OFFLINE"):
        D.fetch(entry.name)
    assert http.requests == []


# ---------------------------------------------------------------------------
# PJM
# ---------------------------------------------------------------------------


@needs("PJME_hourly.csv")
def test_load_pjme() -> None:
    df = D.load_pjm("PJME")
    assert list(df.columns) == ["load_mw"]
    assert df.attrs["n_raw_rows"] == 145_366
    assert df.attrs["n_duplicate_rows_merged"] == 4 and len(df) == 145_362
    assert df.attrs["duplicate_timestamps"] == [
        "2014-11-02 02:00:00",
        "2015-11-01 02:00:00",
        "2016-11-06 02:00:00",
        "2017-11-05 02:00:00",
    ]
    assert df.attrs["n_missing_hours"] == 30
    assert df.index.is_monotonic_increasing and df.index.is_unique
    assert not df["load_mw"].isna().any()
    assert (df.index.to_series().diff().dropna() >= pd.Timedelta("1h")).all()
    assert df.index[0] == pd.Timestamp("2002-01-01 01:00") and df.index[-1] == pd.Timestamp(
        "2018-08-03 00:00"
    )
    assert (df["load_mw"].min(), df["load_mw"].max()) == (14_544.0, 62_009.0)
    # the two fall-back values 23,755 and 22,935 MW (see the raw file) are averaged
    assert df.loc[pd.Timestamp("2014-11-02 02:00"), "load_mw"] == (23_755.0 + 22_935.0) / 2
    # the raw file starts mid-series (unsorted); the sorted frame still has its first row
    assert df.loc[pd.Timestamp("2002-12-31 01:00"), "load_mw"] == 26_498.0


@needs("PJME_hourly.csv")
def test_load_pjme_fill_gaps() -> None:
    df = D.load_pjm("pjme", fill_gaps=True)
    assert len(df) == 145_392 and df.index.freq == "h"
    assert int(df["imputed"].sum()) == 30 and not df["load_mw"].isna().any()
    gap = pd.Timestamp("2010-12-10 00:00")
    assert df.loc[gap, "imputed"]
    before, after = (
        df["load_mw"].loc[gap - pd.Timedelta("1h")],
        df["load_mw"].loc[gap + pd.Timedelta("1h")],
    )
    assert df.loc[gap, "load_mw"] == pytest.approx((before + after) / 2)


@needs("est_hourly.paruqet", "PJME_hourly.csv")
def test_wide_parquet_agrees_with_csv() -> None:
    wide = D.load_pjm_wide()
    assert wide.attrs["n_raw_rows"] == 178_262
    assert list(wide.columns) == list(D.REGIONS)
    assert wide.index.is_monotonic_increasing and wide.index.is_unique
    pd.testing.assert_series_equal(
        wide["PJME"].dropna(), D.load_pjm("PJME")["load_mw"], check_names=False, check_freq=False
    )


def test_unknown_region() -> None:
    with pytest.raises(ValueError, match="PJME"):
        D.load_pjm("ERCOT")


# ---------------------------------------------------------------------------
# UCI loaders (real files)
# ---------------------------------------------------------------------------


@needs("adult.data", "adult.test")
def test_load_adult() -> None:
    train, test = D.load_adult("train"), D.load_adult("test")
    assert list(train.columns) == [*D.ADULT_COLUMNS, "y"] == list(test.columns)
    assert (len(train), len(test)) == (32_561, 16_281)
    assert int(train["y"].sum()) == 7_841 and int(test["y"].sum()) == 3_846
    assert set(test["income"]) == {"<=50K", ">50K"} == set(train["income"])
    assert (train["y"] == (train["income"] == ">50K")).all()
    # header line skipped: the first test record is "25, Private, 226802, 11th, ..."
    assert test.loc[0, ["age", "workclass", "fnlwgt"]].tolist() == [25, "Private", 226802]
    # '?' -> NaN, only in workclass, occupation, native_country
    assert int(train.isna().any(axis=1).sum()) == 2_399
    assert int(test.isna().any(axis=1).sum()) == 1_221
    assert set(train.columns[train.isna().any()]) == {"workclass", "occupation", "native_country"}
    assert train["education_num"].dtype == np.int64
    both = D.load_adult("all")
    assert len(both) == 48_842 and both["split"].value_counts().to_dict() == {
        "train": 32_561,
        "test": 16_281,
    }
    with pytest.raises(ValueError, match="split"):
        D.load_adult("valid")


def test_load_default_credit(credit: pd.DataFrame) -> None:
    assert list(credit.columns) == list(D.DEFAULT_CREDIT_COLUMNS)
    assert len(credit) == 30_000 and int(credit["y"].sum()) == 6_636
    assert credit["ID"].tolist() == list(range(1, 30_001))
    assert (credit.dtypes == np.int64).all()
    assert len(D.DEFAULT_CREDIT_COLUMNS) - 2 == 23  # 23 features besides ID and label


@needs("adult.data", "adult.test")
def test_adult_features_real() -> None:
    X, pre = D.adult_features(D.load_adult("train"))
    Xt, _ = D.adult_features(D.load_adult("test"), pre)
    assert X.shape == (32_561, 108) and Xt.shape == (16_281, 108)
    assert list(X.columns) == list(Xt.columns) == pre.feature_names_
    assert np.allclose(X[list(D.ADULT_NUMERIC)].mean(), 0, atol=1e-10)
    assert np.allclose(X[list(D.ADULT_NUMERIC)].std(ddof=0), 1)
    onehot = X.drop(columns=list(D.ADULT_NUMERIC))
    assert (onehot.sum(axis=1) == len(D.ADULT_CATEGORIES)).all()
    assert X["workclass=missing"].sum() == 1_836
    # Holand-Netherlands occurs once in train, never in test: the column still exists
    assert X["native_country=Holand-Netherlands"].sum() == 1
    assert Xt["native_country=Holand-Netherlands"].sum() == 0


def test_default_credit_features_real(credit: pd.DataFrame) -> None:
    X, pre = D.default_credit_features(credit)
    assert X.shape == (30_000, 33)
    assert np.allclose(X[list(D.DEFAULT_CREDIT_NUMERIC)].mean(), 0, atol=1e-10)
    assert "PAY_0" in D.DEFAULT_CREDIT_NUMERIC and "EDUCATION=6" in X.columns


def test_default_credit_proxy_returns_real(credit: pd.DataFrame) -> None:
    r = D.default_credit_proxy_returns(credit)
    assert r.shape == (30_000, 3)
    assert np.bincount(r.argmax(axis=1), minlength=3).tolist() == [6_636, 0, 23_364]


# ---------------------------------------------------------------------------
# proxy returns, App. C.5 (hand-computed)
# ---------------------------------------------------------------------------

ADULT_TOY = pd.DataFrame(
    {
        "y": [0, 1, 1, 0, 1],
        "education_num": [9, 13, 10, 16, 12],
        "capital_gain": [0, 0, 5000, 100, 0],
    }
)
# by hand: r1 = 1 - 0.5y, r2 = 0.5 + 0.4y, r3 = -0.3 + 1.2y + 0.3h + 0.2g
ADULT_TOY_EXPECTED = np.array(
    [
        [1.0, 0.5, -0.3],  # y=0, h=0 (9 < 13), g=0
        [0.5, 0.9, 1.2],  # y=1, h=1 (13 >= 13), g=0: -0.3 + 1.2 + 0.3
        [0.5, 0.9, 1.1],  # y=1, h=0, g=1: -0.3 + 1.2 + 0.2
        [1.0, 0.5, 0.2],  # y=0, h=1, g=1: -0.3 + 0.3 + 0.2
        [0.5, 0.9, 0.9],  # y=1, h=0 (12 < 13), g=0: a2 and a3 tie
    ]
)


def test_adult_proxy_returns_exact() -> None:
    r = D.adult_proxy_returns(ADULT_TOY, seed=0, noise_sd=0.0)
    assert r.shape == (5, 3) and r.dtype == np.float64
    np.testing.assert_allclose(r, ADULT_TOY_EXPECTED, rtol=0, atol=1e-12)


def test_adult_proxy_noise_is_seeded() -> None:
    r = D.adult_proxy_returns(ADULT_TOY, seed=7)
    noise = np.random.default_rng(7).normal(0.0, 0.05, size=(5, 3))
    np.testing.assert_allclose(r, ADULT_TOY_EXPECTED + noise, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(r, D.adult_proxy_returns(ADULT_TOY, seed=7))
    assert not np.array_equal(r, D.adult_proxy_returns(ADULT_TOY, seed=8))


def test_adult_proxy_noise_scale() -> None:
    big = pd.DataFrame({"y": np.zeros(20_000, int), "education_num": 9, "capital_gain": 0})
    eps = D.adult_proxy_returns(big, seed=1) - D.adult_proxy_returns(big, seed=1, noise_sd=0)
    assert eps.std() == pytest.approx(0.05, rel=0.02)
    assert abs(eps.mean()) < 0.002


def test_adult_proxy_returns_validation() -> None:
    with pytest.raises(ValueError, match="0 and 1"):
        D.adult_proxy_returns(ADULT_TOY.assign(y=[0, 2, 1, 0, 1]), seed=0)
    with pytest.raises(KeyError, match="capital_gain"):
        D.adult_proxy_returns(ADULT_TOY.drop(columns="capital_gain"), seed=0)
    with pytest.raises(ValueError, match="noise_sd"):
        D.adult_proxy_returns(ADULT_TOY, seed=0, noise_sd=-1)
    with pytest.raises(TypeError):
        D.adult_proxy_returns(ADULT_TOY, 0)  # seed is keyword-only


def test_default_credit_proxy_returns_by_hand() -> None:
    r = D.default_credit_proxy_returns(pd.DataFrame({"y": [0, 1, 0]}))
    # y=0: (0.5*1, 1-0, 2*1-0) = (0.5, 1, 2); y=1: (0, 1-2, 0-3) = (0, -1, -3)
    expected = np.array([[0.5, 1.0, 2.0], [0.0, -1.0, -3.0], [0.5, 1.0, 2.0]])
    np.testing.assert_array_equal(r, expected)


# ---------------------------------------------------------------------------
# features (hand-built frames)
# ---------------------------------------------------------------------------


def _adult_rows(n: int, **overrides: object) -> pd.DataFrame:
    base = {
        "age": 30, "workclass": "Private", "fnlwgt": 100_000, "education": "Bachelors",
        "education_num": 13, "marital_status": "Never-married", "occupation": "Sales",
        "relationship": "Not-in-family", "race": "White", "sex": "Female",
        "capital_gain": 0, "capital_loss": 0, "hours_per_week": 40,
        "native_country": "United-States", "income": "<=50K", "y": 0,
    }  # fmt: skip
    df = pd.DataFrame([base] * n)
    for col, values in overrides.items():
        df[col] = values
    return df


def test_features_use_train_statistics() -> None:
    train = _adult_rows(2, age=[20, 40], workclass=["Private", np.nan])
    test = _adult_rows(1, age=[50], sex=["Male"])
    X, pre = D.adult_features(train)
    Xt, pre2 = D.adult_features(test, pre)
    assert pre2 is pre and list(X.columns) == list(Xt.columns)
    # train age: mean 30, population sd 10 -> (-1, 1); test age 50 -> (50 - 30) / 10 = 2
    assert X["age"].tolist() == [-1.0, 1.0] and Xt["age"].tolist() == [2.0]
    assert X["fnlwgt"].tolist() == [0.0, 0.0]  # constant column: scale 1, not a division by 0
    assert X["workclass=missing"].tolist() == [0.0, 1.0]
    assert X["workclass=Private"].tolist() == [1.0, 0.0]
    assert Xt["sex=Male"].tolist() == [1.0] and Xt["sex=Female"].tolist() == [0.0]
    assert X.columns[:6].tolist() == list(D.ADULT_NUMERIC)
    assert X.columns[6:15].tolist() == [f"workclass={c}" for c in D.ADULT_CATEGORIES["workclass"]]


def test_features_reject_unknown_and_unexpected_missing() -> None:
    _, pre = D.adult_features(_adult_rows(2, age=[20, 40]))
    with pytest.raises(D.DataFormatError, match="Martian"):
        D.adult_features(_adult_rows(1, race=["Martian"]), pre)
    with pytest.raises(D.DataFormatError, match="missing"):
        D.adult_features(_adult_rows(1, sex=[np.nan]), pre)
    with pytest.raises(RuntimeError, match="fit"):
        D.TabularPreprocessor(numeric=["age"], categories={}).transform(_adult_rows(1))


def test_features_exclude() -> None:
    X, pre = D.adult_features(_adult_rows(3, age=[1, 2, 3]), exclude=("education", "fnlwgt"))
    assert "fnlwgt" not in X.columns and not any(c.startswith("education=") for c in X.columns)
    assert X.shape[1] == 108 - 1 - 16
    with pytest.raises(ValueError, match="unknown"):
        D.adult_features(_adult_rows(1), exclude=("colour",))


def test_default_credit_features_by_hand() -> None:
    df = pd.DataFrame({c: [0, 0] for c in D.DEFAULT_CREDIT_COLUMNS})
    df["LIMIT_BAL"] = [10_000, 30_000]
    df["SEX"], df["EDUCATION"], df["MARRIAGE"] = [1, 2], [0, 6], [3, 1]
    X, _ = D.default_credit_features(df)
    assert X.shape == (2, 33) and "ID" not in X.columns and "y" not in X.columns
    assert X["LIMIT_BAL"].tolist() == [-1.0, 1.0]
    assert X[
        ["SEX=1", "SEX=2", "EDUCATION=0", "EDUCATION=6", "MARRIAGE=3"]
    ].to_numpy().tolist() == [[1, 0, 1, 0, 1], [0, 1, 0, 1, 0]]


@needs("adult.data")
def test_loaders_return_copies(tmp_path, monkeypatch) -> None:
    a = D.load_adult()
    a.loc[0, "age"] = -1
    assert D.load_adult().loc[0, "age"] == 39
    # a verified copy elsewhere (same bytes, new path) loads the same table
    monkeypatch.setenv("CBDT_DATA_DIR", str(REAL_DATA))
    original = D.load_adult()
    shutil.copy(REAL_DATA / "adult.data", tmp_path / "adult.data")
    monkeypatch.setenv("CBDT_DATA_DIR", str(tmp_path))
    pd.testing.assert_frame_equal(D.load_adult(), original)
