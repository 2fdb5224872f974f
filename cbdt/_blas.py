"""BLAS and LAPACK kernels that release the GIL.

scipy's f2py wrappers (``scipy.linalg.blas.dtrsm``, ``scipy.linalg.lapack.dgeqrf``) hold the
GIL while the Fortran routine runs, so the block kernels of the fit (:mod:`cbdt._tsqr`),
run on several Python threads, would take turns: measured on 2 cores, two threads each
solving 1024 x 256 blocks with the f2py ``dtrsm`` ran at 0.95x one thread, and ``X^T X``
(numpy's matmul, which releases the GIL) at 1.9x. The same routines are reached here
through the function pointers scipy exports for Cython (``scipy.linalg.cython_blas`` and
``cython_lapack``) and called with :mod:`ctypes`, which releases the GIL during a foreign
call. They are the very routines of scipy's BLAS/LAPACK, so the results are bit for bit
those of the f2py wrappers (tested). If a scipy build does not export them, the f2py
wrappers are used (correct, only serial).
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

import numpy as np
from scipy import linalg

_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_dbl_p = ctypes.POINTER(ctypes.c_double)
_c_chr = ctypes.c_char_p


def _pointer(module: Any, name: str) -> int | None:
    """The address in the capsule ``module.__pyx_capi__[name]``, or None."""
    try:
        cap = module.__pyx_capi__[name]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        return api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap)) or None
    except Exception:  # pragma: no cover - a scipy without Cython capsules
        return None


@cache
def _dtrsm() -> Any:
    from scipy.linalg import cython_blas

    ptr = _pointer(cython_blas, "dtrsm")
    if ptr is None:  # pragma: no cover
        return None
    # void dtrsm(char *side, char *uplo, char *transa, char *diag, int *m, int *n,
    #            double *alpha, double *a, int *lda, double *b, int *ldb)
    proto = ctypes.CFUNCTYPE(None, _c_chr, _c_chr, _c_chr, _c_chr, _c_int_p, _c_int_p,
                             _c_dbl_p, ctypes.c_void_p, _c_int_p, ctypes.c_void_p, _c_int_p)
    return proto(ptr)


@cache
def _dgeqrf() -> Any:
    from scipy.linalg import cython_lapack

    ptr = _pointer(cython_lapack, "dgeqrf")
    if ptr is None:  # pragma: no cover
        return None
    # void dgeqrf(int *m, int *n, double *a, int *lda, double *tau, double *work,
    #             int *lwork, int *info)
    proto = ctypes.CFUNCTYPE(None, _c_int_p, _c_int_p, ctypes.c_void_p, _c_int_p,
                             ctypes.c_void_p, ctypes.c_void_p, _c_int_p, _c_int_p)
    return proto(ptr)


def _fortran_f64(a: np.ndarray, what: str) -> None:
    if a.dtype != np.float64 or not a.flags.f_contiguous or not a.flags.writeable:
        raise ValueError(f"{what} must be a writeable Fortran-ordered float64 array")


def trsm_right_upper(R: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve ``Y R = B`` in place (``B`` becomes ``Y``), ``R`` upper triangular.

    ``R`` (k, k) and ``B`` (m, k) are Fortran-ordered float64; the GIL is released while
    ``dtrsm`` runs. Returns ``B``.
    """
    _fortran_f64(B, "B")
    if R.dtype != np.float64 or not R.flags.f_contiguous:
        raise ValueError("R must be a Fortran-ordered float64 array")
    m, k = B.shape
    if R.shape != (k, k):
        raise ValueError(f"R has shape {R.shape}, expected ({k}, {k})")
    fn = _dtrsm()
    if fn is None or m == 0 or k == 0:  # pragma: no cover - f2py wrapper (serial)
        if m and k:
            linalg.blas.dtrsm(1.0, R, B, side=1, lower=0, trans_a=0, overwrite_b=1)
        return B
    mi, ki = ctypes.c_int(m), ctypes.c_int(k)
    lda, ldb = ctypes.c_int(max(1, k)), ctypes.c_int(max(1, m))
    one = ctypes.c_double(1.0)
    fn(b"R", b"U", b"N", b"N", ctypes.byref(mi), ctypes.byref(ki), ctypes.byref(one),
       R.ctypes.data, ctypes.byref(lda), B.ctypes.data, ctypes.byref(ldb))
    return B


def trsm_rows_upper(R: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Solve ``Y R = X`` in place for the rows of a C-ordered block ``X`` (``X`` becomes
    ``Y``), ``R`` (k, k) upper triangular and Fortran-ordered.

    The C-ordered ``X`` (m, k), or the first ``k`` columns of a wider C-ordered buffer
    (row stride ``ld`` >= k), is read by BLAS as the Fortran-ordered ``X^T`` (k, m) with
    leading dimension ``ld``; ``Y R = X`` is ``R^T Y^T = X^T``, one left-side ``dtrsm``
    (side L, upper, transposed) on it. No transposing copy into a Fortran buffer is made;
    the GIL is released while ``dtrsm`` runs. Returns ``X``.
    """
    if X.dtype != np.float64 or X.ndim != 2 or not X.flags.writeable or X.strides[1] != 8:
        raise ValueError("X must be a writeable float64 array with contiguous rows")
    if R.dtype != np.float64 or not R.flags.f_contiguous:
        raise ValueError("R must be a Fortran-ordered float64 array")
    m, k = X.shape
    if R.shape != (k, k):
        raise ValueError(f"R has shape {R.shape}, expected ({k}, {k})")
    if m == 0 or k == 0:
        return X
    ld = X.strides[0] // 8 if m > 1 else k
    if X.strides[0] % 8 or ld < k:
        raise ValueError("X must be a writeable float64 array with contiguous rows")
    fn = _dtrsm()
    if fn is None:  # pragma: no cover - f2py wrapper (serial, through a copy)
        X[:] = linalg.blas.dtrsm(1.0, R, np.asfortranarray(X.T), side=0, lower=0,
                                 trans_a=1).T
        return X
    ki, mi = ctypes.c_int(k), ctypes.c_int(m)
    lda, ldb = ctypes.c_int(k), ctypes.c_int(ld)
    one = ctypes.c_double(1.0)
    fn(b"L", b"U", b"T", b"N", ctypes.byref(ki), ctypes.byref(mi), ctypes.byref(one),
       R.ctypes.data, ctypes.byref(lda), X.ctypes.data, ctypes.byref(ldb))
    return X


def geqrf_r(A: np.ndarray) -> np.ndarray:
    """The upper-triangular factor of a Householder QR of ``A`` (p, q), p >= q, computed
    in place in the Fortran-ordered float64 ``A`` by LAPACK's blocked ``dgeqrf`` with the
    GIL released; returns ``triu(A[:q])`` (q, q)."""
    _fortran_f64(A, "A")
    p, q = A.shape
    fn = _dgeqrf()
    # a workspace of 64 columns per column of the factor: the blocked (level-3) QR; a
    # minimal workspace would run the unblocked level-2 code, ~30x slower
    lwork = 64 * max(1, q)
    if fn is None:  # pragma: no cover - f2py wrapper (serial)
        qr, _, _, info = linalg.lapack.dgeqrf(A, lwork=lwork, overwrite_a=1)
    else:
        qr = A
        tau = np.empty(max(1, min(p, q)))
        work = np.empty(lwork)
        m_, n_, lda, lw, inf = (ctypes.c_int(v) for v in (p, q, max(1, p), lwork, 0))
        fn(ctypes.byref(m_), ctypes.byref(n_), A.ctypes.data, ctypes.byref(lda),
           tau.ctypes.data, work.ctypes.data, ctypes.byref(lw), ctypes.byref(inf))
        info = inf.value
    if info != 0:  # pragma: no cover - LAPACK argument error
        raise RuntimeError(f"LAPACK dgeqrf failed with info = {info}")
    return np.triu(qr[:q])
