"""Data sets of the book: verified files, loaders and the proxy returns of App. C.5.

* :func:`fetch` resolves a registered file (:data:`REGISTRY`, from
  ``shared/data/PROVENANCE.md``) to a local, sha256-checked path: first
  ``$CBDT_DATA_DIR``, then the pooch cache (``$CBDT_CACHE_DIR``), then a
  download unless ``CBDT_OFFLINE=1``.
* ``cbdt.datasets.pjm``: PJM hourly load (:func:`load_pjm`, Sec. 5.4).
* ``cbdt.datasets.uci``: UCI Adult and Default Credit loaders, features and
  proxy returns (:func:`load_adult`, :func:`load_default_credit`,
  :func:`adult_proxy_returns`, :func:`default_credit_proxy_returns`, Sec. 5.4, C.5).

Errors all derive from :class:`DataError`.
"""

from ._registry import (
    REGISTRY,
    DataDownloadError,
    DataError,
    DataFile,
    DataFileNotFoundError,
    DataFormatError,
    DataHashMismatchError,
    DataSource,
    UnknownDataFileError,
    cache_dir,
    data_dir,
    fetch,
    offline,
    sha256sum,
    verify,
)
from .pjm import REGIONS, load_pjm, load_pjm_wide
from .uci import (
    ADULT_ACTIONS,
    ADULT_CATEGORIES,
    ADULT_COLUMNS,
    ADULT_NUMERIC,
    DEFAULT_CREDIT_ACTIONS,
    DEFAULT_CREDIT_CATEGORIES,
    DEFAULT_CREDIT_COLUMNS,
    DEFAULT_CREDIT_NUMERIC,
    TabularPreprocessor,
    adult_features,
    adult_proxy_returns,
    default_credit_features,
    default_credit_proxy_returns,
    load_adult,
    load_default_credit,
)

__all__ = [
    "REGISTRY",
    "DataFile",
    "DataSource",
    "DataError",
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
    "REGIONS",
    "load_pjm",
    "load_pjm_wide",
    "ADULT_COLUMNS",
    "ADULT_NUMERIC",
    "ADULT_CATEGORIES",
    "ADULT_ACTIONS",
    "DEFAULT_CREDIT_COLUMNS",
    "DEFAULT_CREDIT_NUMERIC",
    "DEFAULT_CREDIT_CATEGORIES",
    "DEFAULT_CREDIT_ACTIONS",
    "TabularPreprocessor",
    "load_adult",
    "load_default_credit",
    "adult_proxy_returns",
    "default_credit_proxy_returns",
    "adult_features",
    "default_credit_features",
]
