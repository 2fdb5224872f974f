"""PJM hourly load (Kaggle "Hourly Energy Consumption", PJM Interconnection).

The PJM audit of the paper (Sec. 5.4, App. C.5) builds its states from real
PJM East (PJME) load. This module only *loads* the load series; the bidding
problem built on it (windows, synthetic prices, the three actions) lives in
:mod:`cbdt.book.experiments`.

Caveats of the data (see ``shared/data/PROVENANCE.md``, section 3)
------------------------------------------------------------------
* **Hourly, not half-hourly.** The paper speaks of "half-hourly" load
  observations (Sec. 5.4, C.5); the published files hold one value per hour.
  The book uses the hourly data as published.
* **Not sorted.** ``PJME_hourly.csv`` starts at 2002-12-31 01:00 and ends at
  2018-01-02 00:00; the loaders sort by time.
* **Naive local wall-clock time (US Eastern), hour-ending labels**: each day
  runs 01:00 ... 00:00 of the next day.
* **Daylight-saving artefacts.** The spring-forward hour (03:00) is missing
  every year. The fall-back hour is *duplicated* (two rows labelled 02:00 with
  different values) in 2014-2017 only; in 2002-2013 the fall-back 02:00 label is
  *missing* instead. PJME has one further gap (2010-12-10 00:00), 30 missing
  hours in all.
* Values are MW, written as floats (``26498.0``); ``FE_hourly.csv`` holds a
  0.0 value, which is kept as published.
"""

from __future__ import annotations

import pandas as pd

from ._registry import DataFormatError, fetch, memo_read

__all__ = ["REGIONS", "load_pjm", "load_pjm_wide"]

#: Region codes with a CSV file ``<REGION>_hourly.csv``, and their raw row counts.
REGIONS: dict[str, int] = {
    "AEP": 121_273,
    "COMED": 66_497,
    "DAYTON": 121_275,
    "DEOK": 57_739,
    "DOM": 116_189,
    "DUQ": 119_068,
    "EKPC": 45_334,
    "FE": 62_874,
    "NI": 58_450,
    "PJME": 145_366,
    "PJMW": 143_206,
    "PJM_Load": 32_896,
}

_WIDE_FILE = "est_hourly.paruqet"
_WIDE_ROWS = 178_262
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _canonical_region(region: str) -> str:
    by_lower = {r.lower(): r for r in REGIONS}
    try:
        return by_lower[str(region).lower()]
    except KeyError:
        raise ValueError(
            f"Unknown PJM region {region!r}; choose one of {', '.join(REGIONS)}."
        ) from None


def _read_region_csv(region: str) -> pd.DataFrame:
    name = f"{region}_hourly.csv"
    path = fetch(name)
    column = f"{region}_MW"

    def reader() -> pd.DataFrame:
        raw = pd.read_csv(path, dtype={column: "float64"})
        if list(raw.columns) != ["Datetime", column]:
            raise DataFormatError(
                f"{name}: expected columns ['Datetime', {column!r}], found {list(raw.columns)}."
            )
        raw["Datetime"] = pd.to_datetime(raw["Datetime"], format=_TIME_FORMAT).astype(
            "datetime64[ns]"
        )
        return raw

    raw = memo_read(path, ("pjm_csv",), reader).copy()
    if len(raw) != REGIONS[region]:
        raise DataFormatError(
            f"{name}: expected {REGIONS[region]:,} data rows, read {len(raw):,} from {path}."
        )
    n_nan = int(raw.isna().to_numpy().sum())
    if n_nan:
        raise DataFormatError(f"{name}: {n_nan} empty cells in {path}; the file should have none.")
    return raw


def load_pjm(region: str = "PJME", *, fill_gaps: bool = False) -> pd.DataFrame:
    """Hourly load of one PJM region as a sorted, de-duplicated time series.

    Reads ``<REGION>_hourly.csv`` (through :func:`cbdt.datasets.fetch`, so the
    file's sha256 is checked), sorts it by time and merges duplicated
    timestamps. The PJM audit of the paper (Sec. 5.4, App. C.5) uses
    ``region="PJME"``.

    Parameters
    ----------
    region : str, default "PJME"
        One of :data:`REGIONS` (case-insensitive): AEP, COMED, DAYTON, DEOK, DOM,
        DUQ, EKPC, FE, NI, PJME, PJMW, PJM_Load.
    fill_gaps : bool, default False
        If False, missing hours stay missing (the index is strictly increasing
        but not regular). If True, the series is reindexed onto the complete
        hourly grid from first to last timestamp (``freq="h"``) and the missing
        hours are filled by time-linear interpolation between their neighbours;
        a boolean column ``imputed`` marks the filled rows.

    Returns
    -------
    pandas.DataFrame
        Index ``Datetime`` (``datetime64[ns]``, naive US-Eastern wall-clock,
        hour-ending labels), strictly increasing, no duplicates. Column
        ``load_mw`` (float64, MW), without NaN; plus ``imputed`` (bool) when
        ``fill_gaps=True``. ``DataFrame.attrs`` records ``region``, ``source``
        (file name), ``n_raw_rows``, ``duplicate_timestamps``,
        ``n_duplicate_rows_merged``, ``missing_timestamps`` and
        ``n_missing_hours`` (hours absent from the hourly grid in the file).

    Notes
    -----
    * The data are **hourly**, although the paper calls them half-hourly.
    * **Duplicates**: the fall-back hour (02:00 on the first Sunday of
      November) appears twice in 2014-2017, with two different values (the
      two wall-clock hours 01:00-02:00 EDT and EST folded onto one label).
      Their **mean** is kept, so each label keeps one value on the same scale
      as its neighbours (the alternative, keeping one of the two, would pick
      an arbitrary wall-clock hour). For PJME this merges 4 rows.
    * **Gaps**: the spring-forward hour and, before 2014, the fall-back hour are
      missing, plus a few other hours (30 for PJME). See ``fill_gaps``.

    Examples
    --------
    >>> df = load_pjm("PJME")  # doctest: +SKIP
    >>> df.index.is_monotonic_increasing and df.index.is_unique  # doctest: +SKIP
    True
    """
    region = _canonical_region(region)
    raw = _read_region_csv(region)
    column = f"{region}_MW"

    counts = raw["Datetime"].value_counts()
    dup_times = sorted(counts.index[counts > 1])
    series = raw.groupby("Datetime", sort=True)[column].mean()
    series.index.name = "Datetime"
    n_unique = len(series)
    full = pd.date_range(series.index[0], series.index[-1], freq="h", name="Datetime")
    missing = full.difference(series.index)

    if fill_gaps:
        series = series.reindex(full)
        imputed = series.isna().to_numpy()
        series = series.interpolate(method="time")
        df = pd.DataFrame({"load_mw": series.to_numpy(), "imputed": imputed}, index=full)
    else:
        df = series.to_frame("load_mw")

    df.attrs.update(
        region=region,
        source=f"{region}_hourly.csv",
        n_raw_rows=len(raw),
        duplicate_timestamps=[str(t) for t in dup_times],
        n_duplicate_rows_merged=len(raw) - n_unique,
        missing_timestamps=[str(t) for t in missing],
        n_missing_hours=len(missing),
    )
    return df


def load_pjm_wide() -> pd.DataFrame:
    """All twelve PJM regions side by side, from ``est_hourly.paruqet``.

    Reads the Kaggle set's parquet file (the name keeps Kaggle's misspelling;
    reading it needs ``pyarrow``), drops the index's time zone, sorts by time
    and merges the duplicated fall-back hours by their mean, exactly as
    :func:`load_pjm` does for one region.

    Returns
    -------
    pandas.DataFrame
        Index ``Datetime`` (``datetime64[ns]``, naive, sorted, unique); float64
        columns AEP, COMED, DAYTON, DEOK, DOM, DUQ, EKPC, FE, NI, PJME, PJMW,
        PJM_Load in MW, NaN where a region has no data at that hour.
        ``attrs["n_raw_rows"]`` holds the file's row count (178,262).

    Notes
    -----
    The parquet's index is labelled UTC, but it holds the same *local*
    wall-clock times as the CSV files; the label is removed without converting
    (``tz_localize(None)``). Each region's non-null values equal that region's
    CSV, duplicates included.
    """
    path = fetch(_WIDE_FILE)

    def reader() -> pd.DataFrame:
        return pd.read_parquet(path)

    raw = memo_read(path, ("pjm_parquet",), reader).copy()
    if len(raw) != _WIDE_ROWS or list(raw.columns) != list(REGIONS):
        raise DataFormatError(
            f"{_WIDE_FILE}: expected {_WIDE_ROWS:,} rows and columns {list(REGIONS)}, "
            f"found {len(raw):,} rows and {list(raw.columns)} in {path}."
        )
    index = pd.DatetimeIndex(raw.index)
    if index.tz is not None:
        index = index.tz_localize(None)
    raw.index = index.astype("datetime64[ns]").rename("Datetime")
    df = raw.groupby(level=0, sort=True).mean().astype("float64")
    df.attrs.update(source=_WIDE_FILE, n_raw_rows=len(raw))
    return df
