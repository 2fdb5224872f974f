"""UCI Adult Income and UCI Default Credit: loaders, features and proxy returns.

The UCI audits of the paper (Sec. 5.4, App. C.5-C.6) cast two label-only
tables as three-action decision problems whose per-action returns are built
from the label (and, for Adult, two covariates). This module

* loads the original files (checked against their sha256 by
  :func:`cbdt.datasets.fetch`): :func:`load_adult`, :func:`load_default_credit`;
* builds the proxy returns of App. C.5 *exactly as printed*:
  :func:`adult_proxy_returns`, :func:`default_credit_proxy_returns`;
* turns the covariates into a numeric design matrix with train-fitted
  statistics: :func:`adult_features`, :func:`default_credit_features`
  (:class:`TabularPreprocessor`).

The paper does not say how it preprocessed the covariates; the choices made
here are the plain defaults (one-hot categoricals with a fixed category order,
z-scored numerics with training statistics) and are documented on each
function.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from ._registry import DataFormatError, fetch, memo_read

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_CATEGORIES",
    "ADULT_NUMERIC",
    "ADULT_ACTIONS",
    "DEFAULT_CREDIT_COLUMNS",
    "DEFAULT_CREDIT_CATEGORIES",
    "DEFAULT_CREDIT_NUMERIC",
    "DEFAULT_CREDIT_ACTIONS",
    "MISSING",
    "TabularPreprocessor",
    "load_adult",
    "load_default_credit",
    "adult_proxy_returns",
    "default_credit_proxy_returns",
    "adult_features",
    "default_credit_features",
]

#: Label given to a missing categorical value (``?`` in the Adult files) when one-hot encoding.
MISSING = "missing"

# ---------------------------------------------------------------------------
# Adult
# ---------------------------------------------------------------------------

#: Column names of adult.data / adult.test, from adult.names (hyphens -> underscores).
ADULT_COLUMNS: tuple[str, ...] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)

#: Numeric Adult attributes (standardised by :func:`adult_features`).
ADULT_NUMERIC: tuple[str, ...] = (
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
)

#: Categories of each categorical Adult attribute, in the order adult.names lists them,
#: plus :data:`MISSING` for the three attributes that contain ``?`` in the data.
ADULT_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": (
        "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
        "State-gov", "Without-pay", "Never-worked", MISSING,
    ),
    "education": (
        "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm",
        "Assoc-voc", "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate",
        "5th-6th", "Preschool",
    ),
    "marital_status": (
        "Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
        "Married-spouse-absent", "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
        "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
        "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
        "Armed-Forces", MISSING,
    ),
    "relationship": (
        "Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried",
    ),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native_country": (
        "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba",
        "Iran", "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico",
        "Portugal", "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan",
        "Haiti", "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand",
        "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru", "Hong",
        "Holand-Netherlands", MISSING,
    ),
}  # fmt: skip

#: Names of the Adult proxy actions a1, a2, a3 of App. C.5 (columns of :func:`adult_proxy_returns`).
ADULT_ACTIONS: tuple[str, ...] = ("reject", "standard_approval", "high_limit_approval")

_ADULT_FILES = {"train": ("adult.data", 32_561), "test": ("adult.test", 16_281)}
_ADULT_LABELS = {"<=50K": 0, ">50K": 1}


def _read_adult(split: Literal["train", "test"]) -> pd.DataFrame:
    name, n_expected = _ADULT_FILES[split]
    path = fetch(name)

    def reader() -> pd.DataFrame:
        return pd.read_csv(
            path,
            header=None,
            names=list(ADULT_COLUMNS),
            skiprows=1 if split == "test" else 0,  # adult.test starts with "|1x3 Cross validator"
            skipinitialspace=True,
            keep_default_na=False,
            na_values=["?"],
            skip_blank_lines=True,
        )

    df = memo_read(path, ("adult",), reader).copy()
    if len(df) != n_expected:
        raise DataFormatError(
            f"{name}: expected {n_expected:,} records, read {len(df):,} from {path}."
        )
    income = df["income"].astype("str")
    if split == "test":
        income = income.str.removesuffix(".")
    unknown = sorted(set(income.unique()) - set(_ADULT_LABELS))
    if unknown:
        raise DataFormatError(f"{name}: unexpected income labels {unknown} in {path}.")
    df["income"] = income
    df["y"] = income.map(_ADULT_LABELS).astype("int64")
    return df


def load_adult(split: Literal["train", "test", "all"] = "train") -> pd.DataFrame:
    """UCI Adult Income (census income, Kohavi & Becker 1996).

    Parameters
    ----------
    split : {"train", "test", "all"}, default "train"
        ``"train"`` reads ``adult.data`` (32,561 records), ``"test"`` reads
        ``adult.test`` (16,281 records), ``"all"`` stacks the two (48,842) and
        adds a column ``split`` with values ``"train"``/``"test"``.

    Returns
    -------
    pandas.DataFrame
        RangeIndex; the 15 columns of :data:`ADULT_COLUMNS` (age, workclass,
        fnlwgt, education, education_num, marital_status, occupation,
        relationship, race, sex, capital_gain, capital_loss, hours_per_week,
        native_country, income) and ``y`` (int64, 1 for ``>50K``, else 0).
        Numeric columns are int64, the others strings.

    Notes
    -----
    * Column names come from ``adult.names``, with hyphens replaced by underscores.
    * ``adult.test`` begins with a junk line (``|1x3 Cross validator``), which is
      skipped, and its labels carry a trailing dot (``<=50K.``), which is
      removed, so ``income`` takes the values ``<=50K`` / ``>50K`` in both splits.
    * Missing values, written ``?``, become NaN. They occur only in workclass,
      occupation and native_country (2,399 train and 1,221 test records have at
      least one). Rows with missing values are kept; :func:`adult_features`
      encodes NaN as its own category :data:`MISSING`.
    * Label counts: train 7,841 ``>50K`` of 32,561; test 3,846 of 16,281.
    """
    if split in ("train", "test"):
        return _read_adult(split)
    if split == "all":
        parts = [_read_adult(s).assign(split=s) for s in ("train", "test")]
        return pd.concat(parts, ignore_index=True)
    raise ValueError(f"split must be 'train', 'test' or 'all', not {split!r}.")


def adult_proxy_returns(
    df: pd.DataFrame,
    *,
    seed: int | np.random.Generator,
    noise_sd: float = 0.05,
) -> np.ndarray:
    """Proxy returns of the three Adult actions, as defined in App. C.5 of the paper.

    With y the ``>50K`` label, ``h = 1{education_num >= 13}`` and
    ``g = 1{capital_gain > 0}``:

    * ``r(a1) = 1 - 0.5 y``  (conservative reject)
    * ``r(a2) = 0.5 + 0.4 y``  (standard approval)
    * ``r(a3) = -0.3 + 1.2 y + 0.3 h + 0.2 g``  (aggressive high-limit approval)

    plus independent N(0, noise_sd^2) noise on every entry, which the paper
    uses "only for tie breaking" (sd 0.05). Without it, a1 is optimal for every
    y = 0 record, and for y = 1 with h = g = 0 the actions a2 and a3 tie at 0.9.

    Parameters
    ----------
    df : pandas.DataFrame
        Needs columns ``y`` (0/1), ``education_num`` and ``capital_gain``, as
        returned by :func:`load_adult`.
    seed : int or numpy.random.Generator
        Seed for ``numpy.random.default_rng(seed)``, which draws the noise as
        one ``(n, 3)`` array of ``rng.normal(0, noise_sd, size=(n, 3))``.
        Keyword-only and required, so every run states its seed.
    noise_sd : float, default 0.05
        Standard deviation of the tie-break noise. ``0`` gives the exact values
        (and draws nothing).

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 3)``, float64; column k is the return of action a_{k+1}
        (names in :data:`ADULT_ACTIONS`).
    """
    if noise_sd < 0:
        raise ValueError(f"noise_sd must be >= 0, got {noise_sd}.")
    y = _binary_label(df, "y")
    edu = _numeric_column(df, "education_num")
    gain = _numeric_column(df, "capital_gain")
    h = (edu >= 13).astype(np.float64)
    g = (gain > 0).astype(np.float64)
    r = np.column_stack([1.0 - 0.5 * y, 0.5 + 0.4 * y, -0.3 + 1.2 * y + 0.3 * h + 0.2 * g])
    if noise_sd > 0:
        rng = np.random.default_rng(seed)
        r = r + rng.normal(0.0, noise_sd, size=r.shape)
    return r


# ---------------------------------------------------------------------------
# Default Credit
# ---------------------------------------------------------------------------

_CREDIT_FILE = "default of credit card clients.xls"
_CREDIT_LABEL = "default payment next month"
_CREDIT_ROWS = 30_000

#: Columns of :func:`load_default_credit`: ID, the 23 features X1-X23, and the label ``y``.
DEFAULT_CREDIT_COLUMNS: tuple[str, ...] = (
    "ID",
    "LIMIT_BAL",
    "SEX",
    "EDUCATION",
    "MARRIAGE",
    "AGE",
    "PAY_0",
    "PAY_2",
    "PAY_3",
    "PAY_4",
    "PAY_5",
    "PAY_6",
    "BILL_AMT1",
    "BILL_AMT2",
    "BILL_AMT3",
    "BILL_AMT4",
    "BILL_AMT5",
    "BILL_AMT6",
    "PAY_AMT1",
    "PAY_AMT2",
    "PAY_AMT3",
    "PAY_AMT4",
    "PAY_AMT5",
    "PAY_AMT6",
    "y",
)

#: Categorical Default Credit features and the codes they take in the file. EDUCATION
#: 0, 5, 6 and MARRIAGE 0 are not described by the dataset's documentation but occur.
DEFAULT_CREDIT_CATEGORIES: dict[str, tuple[int, ...]] = {
    "SEX": (1, 2),
    "EDUCATION": (0, 1, 2, 3, 4, 5, 6),
    "MARRIAGE": (0, 1, 2, 3),
}

#: Numeric Default Credit features (standardised by :func:`default_credit_features`).
#: The repayment statuses PAY_* are ordinal (-2 ... 8 months late) and kept numeric.
DEFAULT_CREDIT_NUMERIC: tuple[str, ...] = tuple(
    c for c in DEFAULT_CREDIT_COLUMNS[1:-1] if c not in DEFAULT_CREDIT_CATEGORIES
)

#: Names of the Default Credit proxy actions a0, a1, a2 of App. C.5.
DEFAULT_CREDIT_ACTIONS: tuple[str, ...] = (
    "reject_or_decrease",
    "standard_approval",
    "increase_exposure",
)


def _read_excel(path: Path, engine: str | None) -> pd.DataFrame:
    if engine is None:
        try:
            import xlrd  # noqa: F401
        except ImportError:
            engine = "calamine"
        else:
            engine = "xlrd"
    with warnings.catch_warnings():
        # pandas >= 3.1 deprecates the xlrd engine in favour of calamine; both give the same table.
        warnings.filterwarnings("ignore", message=".*xlrd engine is deprecated.*")
        try:
            return pd.read_excel(path, header=1, engine=engine)
        except ImportError as exc:
            raise ImportError(
                f"Reading {_CREDIT_FILE!r} (an Excel 97-2003 .xls) needs the 'xlrd' package "
                "(pip install xlrd) or 'python-calamine'."
            ) from exc


def load_default_credit(*, engine: str | None = None) -> pd.DataFrame:
    """UCI "default of credit card clients" (Yeh & Lien 2009), 30,000 records.

    Parameters
    ----------
    engine : str or None, default None
        pandas Excel engine. None uses ``"xlrd"`` when installed, else
        ``"calamine"`` (python-calamine).

    Returns
    -------
    pandas.DataFrame
        RangeIndex; the columns of :data:`DEFAULT_CREDIT_COLUMNS`, all int64:
        ``ID`` (1 ... 30000), the 23 features ``LIMIT_BAL`` ... ``PAY_AMT6``, and
        ``y``, the file's label ``default payment next month`` (1 = default;
        6,636 of 30,000), renamed.

    Notes
    -----
    * The sheet's first row holds short labels (X1 ... X23, Y); the second row
      holds the field names, hence ``read_excel(path, header=1)``.
    * The repayment-status columns are named ``PAY_0, PAY_2, ..., PAY_6``
      (there is no ``PAY_1``), as in the file; the paper's recent-delinquency
      split ``PAY_0 >= 2`` (App. C.5) refers to ``PAY_0``.
    * EDUCATION takes the undocumented codes 0, 5 and 6 and MARRIAGE the code 0;
      they are kept as published (see :data:`DEFAULT_CREDIT_CATEGORIES`).
    * Reading the .xls takes about a second; the parsed table is kept in
      memory for the process, and each call returns a fresh copy.
    """
    path = fetch(_CREDIT_FILE)
    raw = memo_read(path, ("default_credit", engine), lambda: _read_excel(path, engine)).copy()
    expected = [*DEFAULT_CREDIT_COLUMNS[:-1], _CREDIT_LABEL]
    if list(raw.columns) != expected:
        raise DataFormatError(
            f"{_CREDIT_FILE}: expected columns {expected}, found {list(raw.columns)} in {path}."
        )
    if len(raw) != _CREDIT_ROWS:
        raise DataFormatError(
            f"{_CREDIT_FILE}: expected {_CREDIT_ROWS:,} records, read {len(raw):,} from {path}."
        )
    if raw.isna().to_numpy().any():
        raise DataFormatError(f"{_CREDIT_FILE}: empty cells in {path}; the file has none.")
    df = raw.rename(columns={_CREDIT_LABEL: "y"}).astype("int64")
    if not df["ID"].is_unique or not set(df["y"].unique()) <= {0, 1}:
        raise DataFormatError(f"{_CREDIT_FILE}: IDs not unique or labels not 0/1 in {path}.")
    return df.reset_index(drop=True)


def default_credit_proxy_returns(df: pd.DataFrame) -> np.ndarray:
    """Proxy returns of the three Default Credit actions, as defined in App. C.5.

    With y = 1 for default (``default payment next month``):

    * ``r(a0) = 0.5 (1 - y)``  (reject or decrease exposure)
    * ``r(a1) = 1 - 2 y``  (standard approval)
    * ``r(a2) = 2 (1 - y) - 3 y``  (increase exposure)

    The paper adds no noise here. Note that a1 is never strictly optimal:
    y = 0 gives (0.5, 1, 2), so a2 is best, and y = 1 gives (0, -1, -3), so a0 is best.

    Parameters
    ----------
    df : pandas.DataFrame
        Needs a 0/1 column ``y``, as returned by :func:`load_default_credit`.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 3)``, float64; column k is the return of action a_k
        (names in :data:`DEFAULT_CREDIT_ACTIONS`).
    """
    y = _binary_label(df, "y")
    return np.column_stack([0.5 * (1.0 - y), 1.0 - 2.0 * y, 2.0 * (1.0 - y) - 3.0 * y])


# ---------------------------------------------------------------------------
# Shared validation
# ---------------------------------------------------------------------------


def _require(df: pd.DataFrame, column: str) -> pd.Series:
    if column not in df.columns:
        raise KeyError(f"column {column!r} is required; the frame has {list(df.columns)}.")
    return df[column]


def _numeric_column(df: pd.DataFrame, column: str) -> np.ndarray:
    values = pd.to_numeric(_require(df, column), errors="raise").to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        raise ValueError(f"column {column!r} has missing values.")
    return values


def _binary_label(df: pd.DataFrame, column: str) -> np.ndarray:
    y = _numeric_column(df, column)
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"column {column!r} must hold only 0 and 1.")
    return y


# ---------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------


@dataclass
class TabularPreprocessor:
    """One-hot categoricals with a fixed category order, z-scored numerics.

    A small scikit-learn-style transformer: :meth:`fit` learns the numeric
    columns' means and standard deviations from the training frame;
    :meth:`transform` applies them, so a test frame is scaled with *training*
    statistics and gets exactly the same columns in the same order.

    Parameters
    ----------
    numeric : sequence of str
        Columns standardised as ``(x - mean_) / scale_``, with the population
        standard deviation (ddof=0, as scikit-learn's ``StandardScaler``); a
        constant column gets ``scale_ = 1``.
    categories : mapping of str to sequence
        For each categorical column, its categories in output order. The
        categories are fixed in advance (not learned), so that train and test
        align even when a category is absent from one of them. A value outside
        the list raises :class:`~cbdt.datasets.DataFormatError`. NaN is encoded
        as the category :data:`MISSING` and is allowed only where the list
        contains it.

    Attributes
    ----------
    mean_, scale_ : numpy.ndarray
        Shape ``(len(numeric),)``, fitted on the training frame.
    feature_names_ : list of str
        Output columns: the numeric columns, then ``"<column>=<category>"``
        for each categorical column and category.
    """

    numeric: Sequence[str]
    categories: Mapping[str, Sequence[object]]
    mean_: np.ndarray | None = field(default=None, init=False, repr=False)
    scale_: np.ndarray | None = field(default=None, init=False, repr=False)

    @property
    def feature_names_(self) -> list[str]:
        names = list(self.numeric)
        for col, cats in self.categories.items():
            names += [f"{col}={c}" for c in cats]
        return names

    def _numeric_block(self, df: pd.DataFrame) -> np.ndarray:
        cols = list(self.numeric)
        if not cols:
            return np.empty((len(df), 0))
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise KeyError(f"numeric columns {missing} are missing from the frame.")
        x = df[cols].apply(pd.to_numeric, errors="raise").to_numpy(dtype=np.float64)
        bad = [c for c, n in zip(cols, np.isnan(x).sum(axis=0), strict=True) if n]
        if bad:
            raise DataFormatError(f"numeric columns {bad} have missing values; impute them first.")
        return x

    def fit(self, df: pd.DataFrame) -> TabularPreprocessor:
        """Learn ``mean_`` and ``scale_`` from ``df`` (the training frame); returns self."""
        x = self._numeric_block(df)
        self._one_hot(df)  # validate the categories on the training frame as well
        self.mean_ = x.mean(axis=0)
        scale = x.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        return self

    def _one_hot(self, df: pd.DataFrame) -> np.ndarray:
        blocks = []
        for col, cats in self.categories.items():
            if col not in df.columns:
                raise KeyError(f"categorical column {col!r} is missing from the frame.")
            values = df[col].astype(object).where(df[col].notna(), MISSING)
            lookup = {c: i for i, c in enumerate(cats)}
            codes = values.map(lookup)
            if codes.isna().any():
                unknown = sorted({str(v) for v in values[codes.isna()]})
                hint = (
                    " (NaN is encoded as 'missing', which this column does not allow)"
                    if MISSING in unknown
                    else ""
                )
                raise DataFormatError(
                    f"column {col!r} holds values outside its fixed categories: {unknown}{hint}."
                )
            block = np.zeros((len(df), len(cats)))
            block[np.arange(len(df)), codes.to_numpy(dtype=np.int64)] = 1.0
            blocks.append(block)
        return np.hstack(blocks) if blocks else np.empty((len(df), 0))

    def transform(self, df: pd.DataFrame) -> pd.DataFrame:
        """Encode ``df`` with the fitted statistics.

        Returns
        -------
        pandas.DataFrame
            Float64, index of ``df``, columns :attr:`feature_names_`.
        """
        if self.mean_ is None or self.scale_ is None:
            raise RuntimeError("TabularPreprocessor is not fitted; call fit(train_df) first.")
        x = (self._numeric_block(df) - self.mean_) / self.scale_
        z = self._one_hot(df)
        return pd.DataFrame(np.hstack([x, z]), index=df.index, columns=self.feature_names_)


def _features(
    df: pd.DataFrame,
    preprocessor: TabularPreprocessor | None,
    numeric: Sequence[str],
    categories: Mapping[str, Sequence[object]],
    exclude: Sequence[str],
) -> tuple[pd.DataFrame, TabularPreprocessor]:
    if preprocessor is None:
        unknown = set(exclude) - set(numeric) - set(categories)
        if unknown:
            raise ValueError(f"exclude names unknown feature columns: {sorted(unknown)}.")
        preprocessor = TabularPreprocessor(
            numeric=[c for c in numeric if c not in exclude],
            categories={c: tuple(v) for c, v in categories.items() if c not in exclude},
        ).fit(df)
    elif exclude:
        raise ValueError("pass exclude only when fitting (preprocessor=None).")
    return preprocessor.transform(df), preprocessor


def adult_features(
    df: pd.DataFrame,
    preprocessor: TabularPreprocessor | None = None,
    *,
    exclude: Sequence[str] = (),
) -> tuple[pd.DataFrame, TabularPreprocessor]:
    """Numeric design matrix for Adult (the network input of the Sec. 5.4 audit).

    Called without ``preprocessor`` it *fits* one on ``df`` (pass the training
    split); pass the returned preprocessor to encode the test split with the
    same columns and the training means and standard deviations.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`load_adult` (``income``, ``y`` and ``split`` are ignored).
    preprocessor : TabularPreprocessor or None
        A fitted preprocessor from an earlier call, or None to fit a new one.
    exclude : sequence of str, default ()
        Attributes to leave out when fitting. By default all 14 attributes are
        used, since the paper does not say otherwise; note that ``education``
        is a relabelling of ``education_num`` and ``fnlwgt`` is a census
        sampling weight, not a property of the person (``exclude=("education",
        "fnlwgt")`` is a common choice).

    Returns
    -------
    X : pandas.DataFrame
        Float64, index of ``df``: the 6 numeric attributes of
        :data:`ADULT_NUMERIC` z-scored with the fitted statistics, then one-hot
        columns ``"<attribute>=<category>"`` for the 8 categorical attributes,
        categories in the order adult.names lists them (:data:`ADULT_CATEGORIES`),
        with a ``missing`` level for workclass, occupation and native_country
        (where ``?`` occurs). 6 + 102 = 108 columns with nothing excluded.
        All levels are kept (no reference level dropped).
    preprocessor : TabularPreprocessor
        The fitted transform.
    """
    return _features(df, preprocessor, ADULT_NUMERIC, ADULT_CATEGORIES, exclude)


def default_credit_features(
    df: pd.DataFrame,
    preprocessor: TabularPreprocessor | None = None,
    *,
    exclude: Sequence[str] = (),
) -> tuple[pd.DataFrame, TabularPreprocessor]:
    """Numeric design matrix for Default Credit (the 23 features of App. C.6).

    As :func:`adult_features`: without ``preprocessor`` a new one is fitted on
    ``df`` (the training rows), otherwise the given one is applied.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`load_default_credit` (``ID`` and ``y`` are ignored).
    preprocessor : TabularPreprocessor or None
        A fitted preprocessor, or None to fit one on ``df``.
    exclude : sequence of str, default ()
        Features to leave out when fitting.

    Returns
    -------
    X : pandas.DataFrame
        Float64: the 20 numeric features of :data:`DEFAULT_CREDIT_NUMERIC`
        (LIMIT_BAL, AGE, PAY_0 ... PAY_6, BILL_AMT1-6, PAY_AMT1-6) z-scored, then
        one-hot SEX (2), EDUCATION (7) and MARRIAGE (4) over the codes that
        occur in the file (:data:`DEFAULT_CREDIT_CATEGORIES`): 33 columns.
        The repayment statuses PAY_* are ordinal (months of delay, with -2/-1/0
        for no consumption / paid in full / revolving credit) and are treated as
        numeric rather than one-hot encoded.
    preprocessor : TabularPreprocessor
        The fitted transform.
    """
    return _features(df, preprocessor, DEFAULT_CREDIT_NUMERIC, DEFAULT_CREDIT_CATEGORIES, exclude)
