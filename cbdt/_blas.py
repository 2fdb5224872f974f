"""BLAS and LAPACK kernels that release the GIL.

scipy's f2py wrappers (``scipy.linalg.blas.dtrsm``, ``scipy.linalg.lapack.dgeqrf``) hold the
GIL while the Fortran routine runs, so the block kernels of the fit (:mod:`cbdt._tsqr`),
run on several Python threads, would take turns: measured on 2 cores, two threads each
solving 1024 x 256 blocks with the f2py ``dtrsm`` ran at 0.95x one thread, and ``X^T X``
(numpy's matmul, which releases the GIL) at 1.9x. The same routines are reached here
through the function pointers scipy exports for Cython (``scipy.linalg.cython_blas`` and
``cython_lapack``) and called with :mod:`ctypes`, which releases the GIL during a foreign
call. They are the very routines of scipy's BLAS/LAPACK, so one ``dtrsm`` or ``dgeqrf`` gives
bit for bit what the f2py wrapper gives (tested). Built on them: a recursive triangular
solve that hands most of its work to ``dgemm`` (:func:`trsm_right_upper_recursive`) and a
``dsyrk`` that adds a block's Gram product into an accumulator (:func:`syrk_add`). If a scipy
build does not export the pointers, the f2py wrappers or numpy are used (correct, only
serial). The transposing copy of a block into the solve's buffer (:func:`transpose_into`)
calls OpenBLAS's ``domatcopy`` extension where scipy's BLAS has it, else the caller copies
with numpy.
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


def _routine(library: str, name: str, *argtypes: Any) -> Any:
    """The routine ``name`` of scipy's ``cython_blas`` or ``cython_lapack`` (``library``) as a
    ctypes function of the given argument types (returning nothing), or None."""
    from scipy.linalg import cython_blas, cython_lapack

    ptr = _pointer(cython_blas if library == "blas" else cython_lapack, name)
    if ptr is None:  # pragma: no cover
        return None
    return ctypes.CFUNCTYPE(None, *argtypes)(ptr)


_p, _i, _d = ctypes.c_void_p, _c_int_p, _c_dbl_p


@cache
def _dtrsm() -> Any:
    # dtrsm(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb)
    return _routine("blas", "dtrsm", _c_chr, _c_chr, _c_chr, _c_chr, _i, _i, _d, _p, _i, _p, _i)


@cache
def _dgemm() -> Any:
    # dgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    return _routine("blas", "dgemm", _c_chr, _c_chr, _i, _i, _i, _d, _p, _i, _p, _i, _d, _p,
                    _i)


@cache
def _dsyrk() -> Any:
    # dsyrk(uplo, trans, n, k, alpha, a, lda, beta, c, ldc)
    return _routine("blas", "dsyrk", _c_chr, _c_chr, _i, _i, _d, _p, _i, _d, _p, _i)


@cache
def _dgeqrf() -> Any:
    # dgeqrf(m, n, a, lda, tau, work, lwork, info)
    return _routine("lapack", "dgeqrf", _i, _i, _p, _i, _p, _p, _i, _i)


@cache
def _domatcopy() -> Any:
    """OpenBLAS's ``cblas_domatcopy`` (an extension to BLAS: ``B = alpha op(A)``) from the
    library behind scipy's ``cython_blas`` (scipy's wheels name it
    ``scipy_cblas_domatcopy``), as a ctypes function, or None where that library has none
    (MKL, reference BLAS, Accelerate) or it does not transpose a small test matrix right.
    ``dlsym`` on scipy's extension module searches the libraries it links to."""
    from scipy.linalg import cython_blas

    try:
        lib = ctypes.CDLL(cython_blas.__file__)
    except OSError:  # pragma: no cover - an extension that cannot be opened again
        return None
    for name in ("scipy_cblas_domatcopy", "cblas_domatcopy"):
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double,
                       ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        a = np.arange(6.0).reshape(2, 3)
        b = np.zeros((2, 3), order="F")
        fn(101, 112, 2, 3, 2.0, a.ctypes.data, 3, b.ctypes.data, 2)  # row-major, transposed
        if np.array_equal(b, 2.0 * a):
            return fn
    return None  # pragma: no cover - a BLAS without the extension


def transpose_into(A: np.ndarray, B: np.ndarray, alpha: float = 1.0) -> bool:
    """``B = alpha A`` from rows to columns: ``A`` (m, k) float64 with contiguous rows,
    ``B`` (m, k) float64 with contiguous columns (a Fortran-ordered block or the first
    columns of one), by one call of OpenBLAS's ``domatcopy`` with the GIL released.

    Returns False, writing nothing, where that routine is missing or the arrays do not
    qualify (the caller then copies with numpy). ``alpha`` a power of two makes ``B`` exact
    (``B`` is then bit for bit ``alpha * A``, tested). Why: the fit's second pass transposes
    every block of ``Phi`` into the buffer of its triangular solve; numpy needs pieces of
    about 64 rows for a cache-friendly transposing copy, and on two Python threads each
    piece's release and re-acquisition of the GIL made the copy no faster than on one
    (measured, n = 1e6, H = 64, CPU time: 0.14 s on one thread and on two); one call per
    block took 0.13 s on one thread and 0.07 s on two.
    """
    m, k = A.shape
    if B.shape != (m, k) or m == 0 or k == 0:
        return False
    if (A.dtype != np.float64 or B.dtype != np.float64 or A.strides[1] != 8
            or B.strides[0] != 8 or not B.flags.writeable or A.strides[0] % 8
            or B.strides[1] % 8):
        return False
    lda, ldb = A.strides[0] // 8, B.strides[1] // 8
    if lda < k or ldb < m or max(m, k, lda, ldb) >= 2**31:
        return False
    fn = _domatcopy()
    if fn is None:
        return False
    fn(101, 112, m, k, alpha, A.ctypes.data, lda, B.ctypes.data, ldb)
    return True


def _fortran_f64(a: np.ndarray, what: str) -> None:
    if a.dtype != np.float64 or not a.flags.f_contiguous or not a.flags.writeable:
        raise ValueError(f"{what} must be a writeable Fortran-ordered float64 array")


def _check_solve(R: np.ndarray, B: np.ndarray) -> tuple[int, int]:
    _fortran_f64(B, "B")
    if R.dtype != np.float64 or not R.flags.f_contiguous:
        raise ValueError("R must be a Fortran-ordered float64 array")
    m, k = B.shape
    if R.shape != (k, k):
        raise ValueError(f"R has shape {R.shape}, expected ({k}, {k})")
    return m, k


def trsm_right_upper(R: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve ``Y R = B`` in place (``B`` becomes ``Y``), ``R`` upper triangular.

    ``R`` (k, k) and ``B`` (m, k) are Fortran-ordered float64; the GIL is released while
    ``dtrsm`` runs. Returns ``B``.
    """
    m, k = _check_solve(R, B)
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


def syrk_add(X: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """Add ``X^T X`` to the lower triangle of the C-ordered ``acc`` (p, p) in place, by one
    ``dsyrk`` with ``beta = 1`` (the GIL released); the strict upper triangle of ``acc`` is
    not touched. Returns ``acc``.

    ``X`` (m, p) is float64 with contiguous columns (a Fortran-ordered block) or contiguous
    rows (a C-ordered one, possibly the first columns of a wider buffer). One call reads and
    writes the accumulator once, where a product into a scratch matrix and an addition would
    write the product, read it and read and write the accumulator; at H = 1024 that is 8 MB
    per block. In Fortran terms ``acc`` is the upper triangle of ``X^T X + acc``. Symmetric
    in exact arithmetic; read it with :func:`symmetric_from_lower`.
    """
    m, p = X.shape
    if acc.shape != (p, p) or acc.dtype != np.float64 or not acc.flags.c_contiguous:
        raise ValueError(f"acc must be a C-ordered float64 array of shape ({p}, {p})")
    if X.dtype != np.float64:
        raise ValueError("X must be float64")
    if m == 0 or p == 0:
        return acc
    if X.strides[0] == 8 and (p == 1 or X.strides[1] % 8 == 0 and X.strides[1] >= 8 * m):
        trans, lda = b"T", max(1, X.strides[1] // 8 if p > 1 else m)  # A = X, (m, p)
    elif X.strides[1] == 8 and (m == 1 or X.strides[0] % 8 == 0 and X.strides[0] >= 8 * p):
        trans, lda = b"N", max(1, X.strides[0] // 8 if m > 1 else p)  # A = X^T, (p, m)
    else:
        raise ValueError("X must have contiguous rows or contiguous columns")
    fn = _dsyrk()
    if fn is None:  # pragma: no cover - no Cython capsule: numpy's product (serial add)
        acc += np.tril(X.T @ X)
        return acc
    ni, ki, ldai, ldci = (ctypes.c_int(v) for v in (p, m, lda, p))
    one = ctypes.c_double(1.0)
    fn(b"U", trans, ctypes.byref(ni), ctypes.byref(ki), ctypes.byref(one), X.ctypes.data,
       ctypes.byref(ldai), ctypes.byref(one), acc.ctypes.data, ctypes.byref(ldci))
    return acc


def symmetric_from_lower(acc: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose lower triangle is that of ``acc`` (a new array)."""
    low = np.tril(acc)
    return low + np.tril(low, -1).T


#: Widest diagonal block :func:`trsm_right_upper_recursive` hands to ``dtrsm`` whole.
TRSM_LEAF = 64


def _halves(k0: int, k1: int) -> int:
    """Where :func:`trsm_right_upper_recursive` splits the columns ``k0..k1``: at a
    multiple of :data:`TRSM_LEAF` past the middle (blocks aligned to the leaves), or at
    the middle when the half is narrower than a leaf."""
    half = (k1 - k0) // 2
    if half < TRSM_LEAF:
        return k0 + half
    return k0 + -(-half // TRSM_LEAF) * TRSM_LEAF


@cache
def _solve_plan(k: int) -> tuple[tuple[int, int, int], ...]:
    """The calls of the recursive solve for ``k`` columns, in order: ``(k0, km, k1)`` is
    the update of columns ``km..k1`` by the solved ``k0..km`` (a ``dgemm``), ``(k0, -1,
    k1)`` a leaf's ``dtrsm``. Depends on ``k`` only, so the result does too."""
    plan: list[tuple[int, int, int]] = []

    def rec(k0: int, k1: int) -> None:
        if k1 - k0 <= TRSM_LEAF:
            plan.append((k0, -1, k1))
            return
        km = _halves(k0, k1)
        rec(k0, km)
        plan.append((k0, km, k1))
        rec(km, k1)

    rec(0, k)
    return tuple(plan)


def trsm_right_upper_recursive(R: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve ``Y R = B`` in place (``B`` becomes ``Y``) by recursive halving: with ``R =
    [[R11, R12], [0, R22]]`` and ``B = [B1, B2]``, ``Y1 R11 = B1``, then ``B2 - Y1 R12`` by
    one ``dgemm``, then ``Y2 R22 = B2 - Y1 R12``; blocks of at most :data:`TRSM_LEAF`
    columns are solved by ``dtrsm``.

    This is the partitioned substitution that level-3 BLAS uses inside ``dtrsm`` itself,
    with triangular solves on the diagonal blocks (no inverse is formed), so each row of
    ``Y`` is backward stable as with one ``dtrsm`` (tested: ``||Y R - B|| / (||Y|| ||R||)``
    of the order of the unit roundoff). It moves most of the work into ``dgemm``, which
    OpenBLAS runs faster than its ``dtrsm`` on a tall block (the measured solve times are
    at :data:`cbdt._tsqr.RECURSIVE_TRSM_MIN`). The split depends on ``k`` only, so equal
    inputs give equal results on any number of threads. ``R`` (k, k) and ``B`` (m, k) are
    Fortran-ordered float64; the GIL is released while each BLAS call runs. Returns ``B``.
    """
    m, k = _check_solve(R, B)
    if k <= TRSM_LEAF or m == 0:
        return trsm_right_upper(R, B)
    trsm, gemm = _dtrsm(), _dgemm()
    if trsm is None or gemm is None:  # pragma: no cover - f2py wrappers (serial)
        for k0, km, k1 in _solve_plan(k):
            if km < 0:
                trsm_right_upper(np.asfortranarray(R[k0:k1, k0:k1]), B[:, k0:k1])
            else:
                B[:, km:k1] -= B[:, k0:km] @ R[k0:km, km:k1]
        return B
    pr, pb = R.ctypes.data, B.ctypes.data
    ld_r, ld_b = ctypes.c_int(k), ctypes.c_int(m)
    mi = ctypes.c_int(m)
    one, minus = ctypes.c_double(1.0), ctypes.c_double(-1.0)
    for k0, km, k1 in _solve_plan(k):
        if km < 0:  # Y[:, k0:k1] R[k0:k1, k0:k1] = B[:, k0:k1]
            w = ctypes.c_int(k1 - k0)
            trsm(b"R", b"U", b"N", b"N", ctypes.byref(mi), ctypes.byref(w), ctypes.byref(one),
                 pr + 8 * (k0 + k0 * k), ctypes.byref(ld_r), pb + 8 * m * k0,
                 ctypes.byref(ld_b))
        else:  # B[:, km:k1] -= Y[:, k0:km] R[k0:km, km:k1]
            n2, k2 = ctypes.c_int(k1 - km), ctypes.c_int(km - k0)
            gemm(b"N", b"N", ctypes.byref(mi), ctypes.byref(n2), ctypes.byref(k2),
                 ctypes.byref(minus), pb + 8 * m * k0, ctypes.byref(ld_b),
                 pr + 8 * (k0 + km * k), ctypes.byref(ld_r), ctypes.byref(one),
                 pb + 8 * m * km, ctypes.byref(ld_b))
    return B


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
