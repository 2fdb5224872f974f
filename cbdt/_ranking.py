"""Exact, deterministic top-k selection (ties broken by the lower case index)."""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import numpy as np

__all__ = ["top_k_indices", "merge_top_k"]


def top_k_indices(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of each row, in descending order of value.

    Ties are broken by the lower column index, also at the k-th place: the result equals
    ``np.argsort(-values, axis=1, kind="stable")[:, :k]``.

    Notes
    -----
    Each row is cut into blocks of about ``sqrt(n / k)`` entries. The k blocks with the largest
    maxima contain the k largest entries (an entry outside them is at most the k-th largest
    block maximum, which is at most the k-th largest entry), so only ``k`` blocks are sorted.
    Rows where a tie with the k-th value could hide in another block are sorted in full. The
    cost is one pass over the ``(m, n)`` array (block maxima) plus small sorts.

    Parameters
    ----------
    values : ndarray of shape (m, n)
        Finite scores.
    k : int
        ``1 <= k <= n``.

    Returns
    -------
    ndarray of shape (m, k)
        Column indices.
    """
    m, n = values.shape
    if m == 1:  # one row: a partition and a sort of the tied candidates, no 2-D machinery
        return _top_k_row(values[0], k)[None, :]
    b = int(np.sqrt(n / k))
    if b < 8 or 2 * k * b > n:  # short rows: partition, then sort only the candidates
        return _top_k_partition(values, k)
    starts = np.arange(0, n, b)
    bmax = np.maximum.reduceat(values, starts, axis=1)  # (m, n_blocks)
    blocks = np.sort(np.argpartition(bmax, bmax.shape[1] - k, axis=1)[:, -k:], axis=1)
    cols = (blocks[:, :, None] * b + np.arange(b)).reshape(m, k * b)  # ascending per row
    valid = cols < n
    cand = np.where(valid, np.take_along_axis(values, np.minimum(cols, n - 1), axis=1), -np.inf)
    order = np.argsort(-cand, axis=1, kind="stable")[:, :k]  # ties: lower column first
    out = np.take_along_axis(cols, order, axis=1)
    # a block outside the chosen ones may reach the k-th value only through an exact tie
    kth = np.take_along_axis(cand, order[:, -1:], axis=1)
    tied = np.flatnonzero((bmax >= kth).sum(axis=1) > k)
    if tied.size:
        out[tied] = np.argsort(-values[tied], axis=1, kind="stable")[:, :k]
    return out


def _top_k_row(v: np.ndarray, k: int) -> np.ndarray:
    """Top-k of one row: the k-th largest by partition, then a stable sort of the entries at
    or above it (ties with the k-th value included, lower index first)."""
    n = v.shape[0]
    if 4 * k >= n:
        return np.argsort(-v, kind="stable")[:k]
    kth = np.partition(v, n - k)[n - k]
    cand = np.flatnonzero(v >= kth)  # ascending
    return cand[np.argsort(-v[cand], kind="stable")[:k]]


def _top_k_partition(values: np.ndarray, k: int) -> np.ndarray:
    """Top-k of short rows: the k-th largest value by partition, then a stable sort of the
    entries at or above it (every tie with the k-th value included)."""
    m, n = values.shape
    if 4 * k >= n:
        return np.argsort(-values, axis=1, kind="stable")[:, :k]
    kth = np.partition(values, n - k, axis=1)[:, n - k]  # k-th largest of each row
    rows, cols = np.nonzero(values >= kth[:, None])  # row-major: columns ascend per row
    order = np.lexsort((cols, -values[rows, cols], rows))  # by row, value desc, column asc
    counts = np.bincount(rows, minlength=m)  # >= k per row
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    take = order[first[:, None] + np.arange(k)]
    return cols[take]


def merge_top_k(
    best_v: np.ndarray,
    best_i: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    best_p: np.ndarray | None = None,
    payload: np.ndarray | None = None,
) -> None:
    """Merge candidate entries into running top-k lists, in place.

    ``best_v``/``best_i`` (shape (m, k)) hold each row's k largest values so far, in
    descending order with ties by the lower index; the candidates ``(rows, cols, vals)`` come
    from later columns, so a candidate that ties with a kept value ranks after it. Only rows
    with candidates are touched; the result equals a stable top-k over all columns seen.
    ``best_p``/``payload`` carry one more value per entry (e.g. the signed contribution
    behind an absolute key) through the same reordering.
    """
    if rows.size == 0:
        return
    k = best_v.shape[1]
    touched, inv = np.unique(rows, return_inverse=True)
    t = touched.size
    # candidates by (row, column): a stable sort by value then breaks ties by column, and
    # the kept entries (all from earlier columns) come first in each row
    span = int(cols.max()) + 1
    o = np.argsort(inv.astype(np.int64) * span + cols, kind="stable")
    inv_o, cols_o = inv[o], cols[o]
    counts = np.bincount(inv_o, minlength=t)
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(inv_o.size) - start[inv_o] + k
    width = k + int(counts.max())
    V = np.full((t, width), -np.inf)
    V[:, :k] = best_v[touched]
    V[inv_o, pos] = vals[o]
    idx = np.full((t, width), np.iinfo(np.intp).max, dtype=np.intp)
    idx[:, :k] = best_i[touched]
    idx[inv_o, pos] = cols_o
    take = np.argsort(-V, axis=1, kind="stable")[:, :k]
    best_v[touched] = np.take_along_axis(V, take, axis=1)
    best_i[touched] = np.take_along_axis(idx, take, axis=1)
    if best_p is not None:
        P = np.zeros((t, width))
        P[:, :k] = best_p[touched]
        P[inv_o, pos] = payload[o]
        best_p[touched] = np.take_along_axis(P, take, axis=1)


# --- the fused GEMM + top-k scan of the exact estimator ---------------------------------
_GROUP = 8  # columns per group maximum in the top-k scan
_COMPACT = 8  # candidates per query and k a block of the top-k scan keeps before compacting
_QBLOCK = 256  # queries per block of the top-k scan
_SCREEN_F32 = True  # screen blocks in float32 before the exact float64 comparison
_EPS32 = float(np.finfo(np.float32).eps)
_EPS64 = float(np.finfo(np.float64).eps)
_X_UNSCALED = 2.0**40  # case rows go to float32 unscaled when their largest norm is within 2^+-40
_MAX_SHIFT = 900  # largest |power of two| between the float32 screen's units and float64's
_BIAS_MAX = 2.0**64  # largest scaled constant term |b| 2^shift the float32 screen takes
_KEY_MAX = 2.0**100  # above every scaled float32 key (thresholds are clipped to it)


def row_blocks(Phi: Any) -> list[tuple[Any, int, int]]:
    """(delayed block, first row, end row) of every row chunk of a dask ``Phi``."""
    ends = np.cumsum(Phi.chunks[0]).tolist()
    starts = [0] + ends[:-1]
    return list(zip(Phi.to_delayed().ravel(), starts, ends, strict=True))


def _psi(
    Yrows: np.ndarray,
    Xrows: np.ndarray,
    bias: np.ndarray | None = None,
    r: np.ndarray | None = None,
) -> np.ndarray:
    """The one float64 evaluation of ``alpha`` (or ``psi = alpha r``) for (query, case) pairs.

    ``alpha_j = y_j . x_j (+ b_j)`` row by row (``np.einsum`` over the feature axis: the same
    floating-point operations, in the same order, for a pair wherever it sits), then times
    ``r_j``. Every value the ranking returns, and every key it compares at the end, comes
    from here, so a query's ranking, its ties (to the lower case index) and its values do
    not depend on the batch, the block, the thread or the path that screened it.
    """
    if Xrows.dtype != np.float64:  # a float32 memmap's rows: widened exactly
        Xrows = Xrows.astype(np.float64)
    a = np.einsum("ch,ch->c", Yrows, Xrows)
    if bias is not None:
        a += bias
    if r is not None:
        a *= r
    return a


def _keyed(a: np.ndarray, key: str) -> np.ndarray:
    return np.abs(a) if key == "abs" else (a if key == "positive" else -a)


def _unit_exponent(v: float) -> int:
    """``e`` with ``v 2^e`` in [0.5, 1) (0 for ``v = 0``)."""
    return -math.frexp(v)[1] if v > 0 else 0


def max_row_norm(X: np.ndarray) -> float:
    """``max_i ||x_i||`` without overflow or underflow of the squares (an exact power-of-two
    rescaling when they would leave float64's normal range)."""
    if X.size == 0:
        return 0.0
    with np.errstate(over="ignore", under="ignore"):  # out of range: rescaled below
        v = float(np.sqrt(np.einsum("ch,ch->c", X, X).max()))
    if 2.0**-480 < v < 2.0**480:
        return v
    a = float(np.abs(X).max())
    if not 0.0 < a < np.inf:
        return a
    e = _unit_exponent(a)
    Xs = np.ldexp(X, e)
    return float(np.ldexp(np.sqrt(np.einsum("ch,ch->c", Xs, Xs).max()), -e))


def _row_norms(Y: np.ndarray) -> np.ndarray:
    """``||y_j||`` of every row (rows scaled by their largest entry where the squares would
    overflow or underflow)."""
    if Y.size == 0:
        return np.zeros(Y.shape[0])
    with np.errstate(over="ignore", under="ignore"):  # out of range: rescaled below
        v = np.sqrt(np.einsum("mh,mh->m", Y, Y))
    lo, hi = (float(v[0]), float(v[0])) if v.size == 1 else (float(v.min()), float(v.max()))
    if 2.0**-480 < lo and hi < 2.0**480:  # the squares in float64's normal range
        return v
    top = np.abs(Y).max(axis=1)
    safe = np.where(top > 0, top, 1.0)
    Z = Y / safe[:, None]
    return top * np.sqrt(np.einsum("mh,mh->m", Z, Z))


def _bound64(h: int, ynorm: Any, xmax: float, babs: Any, rq: Any, ymax: float, rmax: float) -> Any:
    """Bound on |GEMM value - :func:`_psi` value| in float64, per query.

    Both evaluations of ``(y . x + b) r`` err by at most ``(h + 2) u (|y| |x| + |b|) |r|``
    (``u`` = eps/2, Cauchy-Schwarz for the sum of ``|y_i x_i|``; also when the case rows are
    scaled by the returns first), so they differ by at most twice that; gradual underflow
    adds at most ``2^-1075`` per operation, times ``|y|`` or ``|r|`` where an underflowed
    product is multiplied again. ``rq``: max |r| of each query's action over the cases
    (1 without returns), ``babs``: |b| (0 without a constant term).
    """
    coef = (h + 8) * _EPS64 * 1.1
    tiny = math.ldexp(h + 8.0, -1070) * (1.0 + ymax + rmax)
    return coef * ((ynorm * xmax + babs) * rq) + tiny


def bound32(h: int, ynorm: Any, xmax: float, unscale: Any, rq: Any) -> Any:
    """Bound on |float32 screen - exact| of ``y . x`` (then times ``r``), per query, for
    the direct path's float32 screen (:class:`Widener`): float32 rows ``x`` (exact),
    the query ``y`` scaled by ``2^e`` (``unscale = 2^-e``) and rounded to float32, the sum of
    the ``h`` products in float32 in any order, the result scaled back exactly.

    Rounding ``y 2^e`` to float32 errs by ``u |y_i| 2^e`` per entry, plus at most 2^-150
    where it leaves float32's normal range; the sum errs by at most ``h u`` of the sum of
    the magnitudes (``u = 2^-24``), which is at most ``|y| |x| 2^e`` (Cauchy-Schwarz); every
    product or partial sum below float32's normal range loses at most 2^-150 more. Scaled
    back: ``(h + 2) u |y| |x| + 2^-e h 2^-149 (1 + |x|)``, taken here with ``h + 8`` and
    float32's eps (twice ``u``) and 10 % more, times ``|r|`` (``rq``: max |r| of the
    query's action, 1 for keys of alpha). The float64 steps after the product (the constant
    term, the weight) are covered by :func:`_bound64`, which the caller adds.
    """
    coef = (h + 8) * _EPS32 * 1.1
    tiny = (h + 8) * 2.0**-149 * 1.1 * (1.0 + xmax)
    return (coef * ynorm * xmax + tiny * unscale) * rq


def bound_keys32(h: int, ynorm: Any, xmax: float, babs: Any, rq: Any, scale: Any) -> Any:
    """Bound on ``|K - 2^e key|`` for the float32 keys of :meth:`Widener.keys32`, in their
    units (each query's keys scaled by ``scale = 2^e``), per query.

    ``K = fl(fl(P + b') r')`` (then ``|.|`` or ``-``, exact) with ``P`` the float32 product
    of the scaled query and the float32 row (error ``d1``: :func:`bound32` in scaled units),
    ``b' = fl32(2^e b)`` and ``r' = fl32(r)``; ``T = 2^e (y . x + b)``, ``|T| <= mag =
    2^e (|y| |x| + |b|)``. With ``u = 2^-24``: ``|fl(P + b') - T| <= d1 (1 + u) + 2 u mag``
    (+ ``2^-149`` where it is subnormal), and ``|fl(S r') - T r| <= |S - T| |r'| + |T| |r' -
    r| + u |S r'|`` (+ ``2^-150`` each for subnormal ``r'`` and result), so ``|r| (1.05 d1
    + 6 u mag + 2^-146) + 2^-148 (1 + d1 + mag)`` bounds it (``rq >= |r|``: max |r| of the
    query's action, 1 for keys of alpha) while ``|T| |r| < 2^120`` (the caller's ranges).
    The difference between the exact key and :func:`_psi`'s is :func:`_bound64`'s, which
    the caller adds times ``2^e``.
    """
    d1 = bound32(h, ynorm * scale, xmax, 1.0, 1.0)  # the product's error, scaled units
    mag = scale * (ynorm * xmax + babs)
    return rq * (1.05 * d1 + 6.0 * 2.0**-24 * mag + 2.0**-146) + 2.0**-148 * (1.0 + d1 + mag)


def _block_cols(blk: np.ndarray, b: int, piece: int, n: int) -> np.ndarray:
    """Columns (``blk.shape + (b,)``; past ``n`` where the last block is short) of the
    blocks ``blk`` of :func:`_near_top_k`'s maxima. ``piece`` 0: block ``g`` holds the
    columns ``g b .. g b + b - 1``. Else the columns come in pieces of ``piece`` (a multiple
    of ``b``), each with ``nb = piece / b`` blocks interleaved: block ``t`` of a whole piece
    holds its columns ``t, t + nb, .., t + (b - 1) nb`` (its maximum is then one
    elementwise maximum of ``b`` contiguous slabs, :meth:`Widener.keys32`); a short last
    piece has contiguous blocks."""
    span = np.arange(b)
    if not piece:
        return blk[..., None] * b + span
    nb = piece // b
    p, t = np.divmod(blk, nb)
    whole = (p + 1) * piece <= n
    start = p * piece + np.where(whole, t, t * b)
    return start[..., None] + np.where(whole, nb, 1)[..., None] * span


def _near_top_k(K: np.ndarray, k: int, M: np.ndarray,
                maxima: tuple[int, np.ndarray, int] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the entries of ``K`` (m, n) at or above ``kth - 2 M`` (``kth``: the
    row's k-th largest entry, ``M``: (m,)), rows ascending; at least k per row.

    As in :func:`top_k_indices`, each row is cut into blocks of about ``sqrt(n / k)``
    entries: the k blocks with the largest maxima hold the k largest entries, so ``kth``
    comes from them, and only blocks whose maximum reaches the threshold are read again.
    ``maxima``: ``(b, bmax, piece)``, the blocks' maxima already taken (by
    :class:`Widener`, while the keys were in cache), blocks of ``b`` entries laid out as
    :func:`_block_cols` says (contiguous for ``piece`` 0).
    """
    m, n = K.shape
    b = int(np.sqrt(n / k)) if maxima is None else maxima[0]
    if b < 8 or 2 * k * b > n:  # short rows: a partition
        kth = np.partition(K, n - k, axis=1)[:, n - k]
        thr = kth - 2.0 * M - _EPS64 * np.abs(kth)  # the last term covers the rounding
        return np.nonzero(K >= thr[:, None])
    if maxima is None:
        bmax, piece = np.maximum.reduceat(K, np.arange(0, n, b), axis=1), 0  # (m, nb)
    else:
        bmax, piece = maxima[1], maxima[2]
    nb = bmax.shape[1]
    top = np.argpartition(bmax, nb - k, axis=1)[:, -k:]
    cols = _block_cols(top, b, piece, n).reshape(m, k * b)
    cand = np.where(cols < n, np.take_along_axis(K, np.minimum(cols, n - 1), axis=1), -np.inf)
    kth = np.partition(cand, k * b - k, axis=1)[:, k * b - k]
    thr = kth - 2.0 * M - _EPS64 * np.abs(kth)
    r_, blk = np.nonzero(bmax >= thr[:, None])  # the blocks that can hold a candidate
    cols = _block_cols(blk, b, piece, n).ravel()
    rows = np.repeat(r_, b)
    ok = cols < n
    rows, cols = rows[ok], cols[ok]
    keep = K[rows, cols] >= thr[rows]
    return rows[keep], cols[keep]


def _refine_top_k(
    K: np.ndarray, M: np.ndarray, k: int, exact: Any,
    maxima: tuple[int, np.ndarray, int] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact top-k of every row from approximate keys ``K`` (m, n), ``|K - key| <= M`` (m,).

    ``kth``, the k-th largest entry of ``K``: k entries have a key >= ``kth - M``, so every
    entry of the top k (ties to the lower index) has ``K >= kth - 2 M``. Those candidates
    (at least k per row, about k on continuous data) get their keys from ``exact(rows,
    cols) -> (keys, values)`` (:func:`_psi`) and are sorted by key, then case index.
    Returns ``(indices, keys, values)``, each (m, k).
    """
    m, n = K.shape
    if m == 1:  # one row: 1-D partition and selection (no 2-D machinery)
        v = K[0]
        kth = float(np.partition(v, n - k)[n - k])
        cols = np.flatnonzero(v >= kth - 2.0 * float(M[0]) - _EPS64 * abs(kth))
        keys, vals = exact(np.zeros(cols.size, dtype=np.intp), cols)
        take = np.lexsort((cols, -keys))[:k]
        return cols[take][None, :], keys[take][None, :], vals[take][None, :]
    rows, cols = _near_top_k(K, k, M, maxima)
    keys, vals = exact(rows, cols)
    o = np.lexsort((cols, -keys, rows))  # by row, key descending, case index ascending
    counts = np.bincount(rows, minlength=m)  # >= k per row
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    take = o[first[:, None] + np.arange(k)]
    return cols[take], keys[take], vals[take]


def _weigh(
    B: np.ndarray, Rt: np.ndarray | None, acts: np.ndarray, key: str, bias: np.ndarray | None
) -> np.ndarray:
    """``B`` (m, w) of coefficients turned into keys in place: the constant terms ``bias``
    (m,), or already spread over the cases (m, w), added, weighted by the returns
    ``Rt[acts]`` (|A|, w), rounded to ``B``'s dtype (float32 for :meth:`Widener.keys32`),
    and keyed (|.|, +, -). Only the keys are read again (values come from :func:`_psi`).
    Returns ``B``.

    A Fortran-ordered ``B`` (the transposed (w, m) pieces of :meth:`Widener.keys32`) is
    weighted by one action's returns repeated along its memory, one contiguous product:
    a product broadcast over rows of m entries took 22 us per piece of 4,096 x 16, the
    repetition and the product 17 us (and a spread constant term 6 us against 20 us)."""
    if bias is not None:
        B += bias[:, None] if bias.ndim == 1 else bias
    if Rt is not None:  # one action for all the queries: a view of its returns, no copy
        one = B.shape[0] == 1 or bool(np.all(acts[: B.shape[0]] == acts[0]))
        r = Rt[acts[0]] if one else Rt[acts]
        r = r if r.dtype == B.dtype else r.astype(B.dtype)
        if one and B.shape[0] > 1 and B.flags.f_contiguous:
            flat = B.T.reshape(-1)  # a view: row i of B.T is case i's m keys
            np.multiply(flat, np.repeat(r, B.shape[0]), out=flat)
        else:
            B *= r
    if key == "abs":
        return np.abs(B, out=B)
    return B if key == "positive" else np.negative(B, out=B)


def rank_block(
    B: np.ndarray,
    Yt: np.ndarray,
    X: np.ndarray,
    Rt: np.ndarray | None,
    acts: np.ndarray,
    k: int,
    key: str,
    xmax: float,
    rq: np.ndarray | None,
    rmax: float,
    bias: np.ndarray | None = None,
    keyed: bool = False,
    screen32: np.ndarray | None = None,
    maxima: tuple[int, np.ndarray, int] | None = None,
    scale32: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k of a block ``B = Yt @ X.T`` (m, n) formed by one GEMM (or GEMV), exact.

    ``B`` gets the constant terms ``bias`` (m,) added, is weighted by the returns
    ``Rt[acts]`` in place and keyed (:func:`_weigh`; ``keyed=True``: already done, piece by
    piece); ``X`` may be a float32 block (its rows are widened exactly where read), and
    ``B`` its float32 screen (``screen32``: each query's scale ``2^-e_q``, whose error
    :func:`bound32` adds to the bound); the candidates within its rounding bound
    (:func:`_bound64`; ``xmax``: a bound on the norm of every row of ``X``, ``rq``: max |r|
    of each action, ``rmax``: over all) of each query's k-th key get the keys and values of
    :func:`_psi`, as in the fused scan, so a query ranks the same alone, in a small block or
    in a large batch. ``maxima``: the maxima of blocks of ``B`` already taken
    (:func:`_near_top_k`); ``scale32``: ``B`` holds float32 keys, each query's scaled by
    ``2^e_q`` (:meth:`Widener.keys32`), bounded by :func:`bound_keys32`. Returns
    ``(indices, keys, values)``.
    """
    K = B if keyed else _weigh(B, Rt, acts, key, bias)
    m, h = Yt.shape
    if Rt is None:  # keys of alpha, not weighted by the returns: |r| does not scale them
        rq, rmax = None, 1.0
    if m == 1:  # one query: the bound in Python floats (|y| >= max |y_i| in the tiny term)
        with np.errstate(over="ignore", under="ignore"):  # out of range: _row_norms
            ss = float(Yt[0] @ Yt[0])
        yn = math.sqrt(ss) if 2.0**-960 < ss < 2.0**960 else float(_row_norms(Yt)[0])
        rq1 = 1.0 if rq is None else float(rq[acts[0]])
        b1 = 0.0 if bias is None else abs(float(bias[0]))
        M = np.array([_bound64(h, yn, xmax, b1, rq1, yn, rmax)])
        if screen32 is not None:
            M += bound32(h, yn, xmax, float(screen32[0]), rq1)
        if scale32 is not None:
            s1 = float(scale32[0])
            M = M * s1 + bound_keys32(h, yn, xmax, b1, rq1, s1)
    else:
        ymax = float(np.abs(Yt).max()) if Yt.size else 0.0
        babs = 0.0 if bias is None else np.abs(bias)
        yns = _row_norms(Yt)
        rqs = 1.0 if rq is None else rq[acts]
        M = _bound64(h, yns, xmax, babs, rqs, ymax, rmax)
        if screen32 is not None:
            M = M + bound32(h, yns, xmax, screen32, rqs)
        if scale32 is not None:
            M = M * scale32 + bound_keys32(h, yns, xmax, babs, rqs, scale32)

    def exact(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = None if Rt is None else Rt[acts[rows], cols]
        a = _psi(Yt[rows], X[cols], None if bias is None else bias[rows], r)
        return _keyed(a, key), a

    idx, keys, vals = _refine_top_k(K, M, k, exact, maxima)
    return idx, keys, vals


def _block_width(w: int, k: int, rows: int) -> int:
    """Entries per block of :func:`_near_top_k` (about ``sqrt(w / k)``, a power of two that
    divides ``rows``), 0 where the rows are too short for blocks."""
    b = int(np.sqrt(w / k))
    if b < 8 or 2 * k * b > w:
        return 0
    b = 1 << (b.bit_length() - 1)
    while rows % b:
        b >>= 1
    return b if b >= 8 else 0


#: entries (queries x cases) of one block of the direct path (:func:`rank_direct`): 8 MB
_DIRECT_ENTRIES = 1 << 20
_DIRECT_MIN_ROWS = 1 << 16  # cases per block of the direct path at least


class RowNormBounds:
    """Upper bounds on the row norms of a case-side matrix, one per block of ``rows`` rows.

    Computed once, when the fit reads the rows (:func:`block_max_row_norms`, or the fit's
    second pass), so a query never recomputes them: :meth:`over` gives a bound on the norm
    of every row of any range of cases, the largest of the blocks it touches.
    """

    def __init__(self, rows: int, maxima: np.ndarray) -> None:
        self.rows = int(rows)
        self.maxima = np.asarray(maxima, dtype=np.float64)

    def over(self, a: int, e: int) -> float:
        """A bound on ``||x_i||`` for every row ``a <= i < e``."""
        if e <= a:
            return 0.0
        return float(self.maxima[a // self.rows : -(-e // self.rows)].max())


def block_max_row_norms(X: Any, rows: int, slab: int = 1 << 16) -> np.ndarray:
    """``max ||x_i||`` over each block of ``rows`` rows of ``X`` (n, h), in slabs of about
    ``slab`` rows (a whole number of blocks); a block whose squares leave float64's normal
    range is measured by :func:`max_row_norm` (exact power-of-two rescaling)."""
    n = X.shape[0]
    nb = -(-n // rows)
    out = np.zeros(nb)
    step = max(1, slab // rows) * rows
    for a in range(0, n, step):
        blk = np.asarray(X[a : a + step], dtype=np.float64)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            ss = np.einsum("ch,ch->c", blk, blk)
        starts = np.arange(0, blk.shape[0], rows)
        top = np.maximum.reduceat(ss, starts) if ss.size else np.zeros(0)
        j0 = a // rows
        out[j0 : j0 + starts.size] = np.sqrt(top)
        bad = np.flatnonzero(~((top > 2.0**-960) & (top < 2.0**960)))
        for j in bad:  # tiny, huge or non-finite squares: measured without them
            out[j0 + j] = max_row_norm(blk[starts[j] : starts[j] + rows])
    return out


def product_into(out: np.ndarray, Yt: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``out`` (m, w) = ``Yt @ X.T`` for queries ``Yt`` (m, h) and case rows ``X`` (w, h):
    a matrix-vector product (GEMV) for one query, faster than a one-row GEMM, else one
    GEMM. Returns ``out``."""
    if Yt.shape[0] == 1:
        np.matmul(X, Yt[0], out=out[0])
    else:
        np.matmul(Yt, X.T, out=out)
    return out


def widen_rows(h: int) -> int:
    """Rows of a float32 memmap block that the direct path widens to float64 (or keys in
    float32) at once: about 2 MB, so the product reads them from cache; a multiple of 64,
    so the ranking's blocks of up to 64 keys (:func:`_block_width`) do not straddle two
    pieces."""
    return max(64, (1 << 21) // (8 * max(h, 1)) // 64 * 64)


#: The float32 screen of the direct path takes a block of a float32 memmap when its rows'
#: norms are at most 2^60 and at least 2^-60 (no float32 overflow, products of typical
#: size far from float32's underflow) and every query's largest entry is within 2^+-100.
_SCREEN32_X = 2.0**60
_SCREEN32_Y = 100
#: The float32 keys (:meth:`Widener.keys32`) take returns up to this size (with rows within
#: 2^60 and scaled constant terms within :data:`_BIAS_MAX`, every key stays below 2^120).
_R32_MAX = 2.0**40
_KEYS_F32 = True  # keep the direct path's keys of a float32 memmap in float32 where they fit


class Widener:
    """Products ``Yt @ X.T`` (or their keys) for blocks ``X`` of a float32 (or integer)
    memmap, formed in pieces of :func:`widen_rows` rows while they are in cache, on as many
    Python threads as numpy's BLAS has cores (BLAS pinned to one thread meanwhile,
    :mod:`cbdt._threads`).

    Products (:meth:`products`, the coefficients): each piece widened into a float64
    buffer and multiplied in float64. Keys of the ranking's screen, where :meth:`screens`
    allows: the float32 rows are multiplied as they are, by the queries scaled by powers of
    two ``2^e_q`` (their largest entry in [1/2, 1)) and rounded to float32 (``sgemm``, the
    rows as its left operand: (rows, m) products, twice as fast as ``Y X^T`` for a few
    queries). :meth:`keys32` keeps the keys in float32, in those scaled units (the constant
    term and the returns rounded to float32, their error bounded by :func:`bound_keys32`),
    and takes the maxima of the ranking's blocks while the keys are in cache; where the
    constant term or the returns leave float32's safe range, :meth:`keys` scales the
    products back exactly into float64 and keys them there (:func:`_weigh`, the screen's
    error bounded by :func:`bound32`). Elsewhere each piece is widened and multiplied in
    float64 as for the products. Every value the ranking returns still comes from
    :func:`_psi` in float64.

    Widening a whole block first writes it to memory and reads it back for the product: a
    serial pass. Measured on the benchmark machine (n = 4e6, H = 64, top-10 cases, two
    threads): 16 queries took 0.43-0.47 s with whole blocks widened first, 0.34-0.41 s
    widened in pieces and 0.33 s screened in float32 with float64 keys; one query 0.22 s,
    0.16-0.18 s and 0.09 s. Float32 keys against float64 keys after the float32 product,
    medians of 7 interleaved: 0.25 s against 0.38 s for 16 queries, 0.090 s against 0.098 s
    for one (keys 0.20 s of the 0.25 s, the serial ranking of the blocks 0.04 s). The
    blocks' maxima taken per piece over interleaved blocks (:func:`_block_cols`: one
    elementwise maximum of contiguous slabs, 5 us per piece of 4,096 x 16 against 57 us for
    ``reduceat`` over contiguous blocks), and the constant term and the returns applied
    along the keys' memory (:func:`_weigh`): 16 queries 0.207 s, then 0.200 s, against
    0.23 s (medians of 9, three interleaved runs, with a constant term). Forming the next
    block on a look-ahead thread while this one is ranked was again slower (0.203 s
    against 0.189 s). For a
    float64 memmap (no widening) pieces were slower (0.35-0.44 s against 0.32-0.34 s; with
    the rows as ``dgemm``'s left operand and the blocks' maxima taken per piece, 0.38 s
    against 0.35 s), so the direct path reads float64 blocks whole. A context manager: the
    thread pool and the pin, started by the first block it reads (none where every block is
    float64), end with it."""

    def __init__(self, Yt: np.ndarray, key: str | None = None,
                 bias: np.ndarray | None = None) -> None:
        self.Yt, self.key, self.bias = np.ascontiguousarray(Yt), key, bias
        self.threads = 0  # not started: the pool and the pin come with the first block
        self.stack: ExitStack | None = None
        self.f32: bool | None = None  # whether the float32 screen can hold the queries
        self.k32: bool | None = None  # whether the keys can stay in float32
        self.kbuf: np.ndarray | None = None
        self.btile: np.ndarray | None = None

    def __enter__(self) -> Widener:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.stack is not None:
            self.stack.close()

    def _start(self) -> None:
        """Buffers, the thread pool and BLAS pinned to one thread, for the first block."""
        from ._threads import blas_threads, single_threaded_blas

        self.rows = widen_rows(self.Yt.shape[1])
        self.local = threading.local()
        self.stack = ExitStack()
        self.threads = blas_threads()
        if self.threads > 1:
            self.stack.enter_context(single_threaded_blas())
            self.pool = self.stack.enter_context(ThreadPoolExecutor(self.threads))

    def _queries32(self) -> bool:
        """The float32 screen's queries, prepared at the first block: each row scaled by
        ``2^e_q`` into [1/2, 1) and rounded; False where they leave ``2^+-100``."""
        if self.f32 is None:
            Yt = self.Yt
            top = np.abs(Yt).max(axis=1) if Yt.size else np.zeros(Yt.shape[0])
            exps = np.array([_unit_exponent(float(t)) for t in top], dtype=np.int64)
            self.f32 = (self.key is not None and _SCREEN_F32
                        and bool(np.all(np.isfinite(top)))
                        and bool(np.all(np.abs(exps) <= _SCREEN32_Y)))
            if self.f32:
                self.Y32 = np.ldexp(Yt, exps[:, None]).astype(np.float32)
                self.unscale = np.ldexp(1.0, -exps)  # 2^-e_q, exact
                self.scale = np.ldexp(1.0, exps)
        return self.f32

    def _keys32_ok(self, acts: np.ndarray, rq: np.ndarray | None) -> bool:
        """Whether the keys can stay in float32 (prepared once): the scaled constant terms
        within :data:`_BIAS_MAX` and the returns of the queries' actions at most
        :data:`_R32_MAX` (so ``|T| |r| < 2^120``, :func:`bound_keys32`)."""
        if self.k32 is None:
            self.b32 = None
            ok = _KEYS_F32 and self._queries32()
            if ok and self.bias is not None:
                sb = np.abs(self.bias) * self.scale
                ok = bool(np.all(sb <= _BIAS_MAX))
                if ok:
                    self.b32 = (self.bias * self.scale).astype(np.float32)
            if ok and rq is not None:
                ok = bool(np.all(rq[acts] <= _R32_MAX))
            self.k32 = ok
        return self.k32

    def _part(self, B: np.ndarray, X: np.ndarray, Rc: np.ndarray | None,
              acts: np.ndarray | None, mode: str, j0: int, j1: int,
              maxima: tuple[int, np.ndarray] | None = None) -> None:
        m = self.Yt.shape[0]
        if mode == "f32":
            buf = getattr(self.local, "b32", None)
            if buf is None or buf.shape[0] != m:
                buf = self.local.b32 = np.empty((m, self.rows), dtype=np.float32)
        elif mode == "wide":
            buf = getattr(self.local, "buf", None)
            if buf is None or buf.shape[1] != X.shape[1]:
                buf = self.local.buf = np.empty((self.rows, X.shape[1]))
        for j in range(j0, j1, self.rows):
            e = min(j1, j + self.rows)
            if mode == "k32":  # B: (w, m) float32, keys in each query's scaled units
                V = B[j:e]
                if m == 1:
                    np.matmul(X[j:e], self.Y32[0], out=V[:, 0])
                else:
                    np.matmul(X[j:e], self.Y32.T, out=V)
                _weigh(V.T, None if Rc is None else Rc[:, j:e], acts, self.key,
                       None if self.b32 is None else self.btile[: e - j].T)
                if maxima is not None:  # the blocks' maxima while the keys are in cache
                    b, bt = maxima
                    if e - j == self.rows:  # a whole piece: blocks interleaved, one
                        # maximum of b contiguous slabs (_block_cols)
                        np.maximum.reduce(V.reshape(b, -1), axis=0,
                                          out=bt[j // b : e // b].reshape(-1))
                    else:  # the short last piece: contiguous blocks
                        np.maximum.reduceat(V, np.arange(0, e - j, b), axis=0,
                                            out=bt[j // b : -(-e // b)])
                continue
            Bj = B[:, j:e]
            if mode == "f32":  # float32 rows as they are, by the scaled float32 queries
                Bs = buf[:, : e - j]
                product_into(Bs, self.Y32, X[j:e])
                np.multiply(Bs, self.unscale[:, None], out=Bj)  # exact: powers of two
            else:
                Xw = buf[: e - j]
                np.copyto(Xw, X[j:e])
                product_into(Bj, self.Yt, Xw)
            if acts is not None:
                _weigh(Bj, None if Rc is None else Rc[:, j:e], acts, self.key, self.bias)

    def screens(self, X: np.ndarray, xmax: float) -> bool:
        """Whether :meth:`keys` screens the block ``X`` in float32: float32 rows whose
        norms are within ``2^+-60`` (``xmax``: a bound on them; a block of zero rows too)
        and queries within ``2^+-100``."""
        return (X.dtype == np.float32
                and (xmax == 0.0 or 1.0 / _SCREEN32_X <= xmax <= _SCREEN32_X)
                and self._queries32())

    def products(self, B: np.ndarray, X: np.ndarray) -> None:
        """``B`` (m, w) = ``Yt @ X.T`` for the block ``X`` (w, h), in place, in float64."""
        self._run(B, X, None, None, "wide")

    def keys(self, B: np.ndarray, X: np.ndarray, Rc: np.ndarray | None,
             acts: np.ndarray, xmax: float) -> np.ndarray | None:
        """``B`` (m, w) = the keys of the block ``X`` (w, h), in place, in float64. Returns
        the scale ``2^-e_q`` (m,) of each query's float32 screen (for :func:`bound32`), or
        None where the block was multiplied in float64."""
        f32 = self.screens(X, xmax)
        self._run(B, X, Rc, acts, "f32" if f32 else "wide")
        return self.unscale if f32 else None

    def keys32(self, X: np.ndarray, Rc: np.ndarray | None, acts: np.ndarray, xmax: float,
               rq: np.ndarray | None, k: int
               ) -> tuple[np.ndarray, np.ndarray, tuple[int, np.ndarray, int] | None] | None:
        """The keys of the block ``X`` (w, h) in float32, each query's scaled by ``2^e_q``:
        ``(K (m, w), the scales 2^e_q (m,), the maxima of the ranking's blocks (b, (m, nb),
        piece) as :func:`_block_cols` lays them out, or None)``, in a buffer reused by the
        next block; None where they cannot stay in float32 (then :meth:`keys`). ``rq``: max
        |r| of each action (None for keys of alpha)."""
        if not (self.screens(X, xmax) and self._keys32_ok(acts, rq)):
            return None
        if not self.threads:
            self._start()
        if self.b32 is not None and self.btile is None:  # spread over a piece's cases (rows,
            self.btile = np.tile(self.b32, (self.rows, 1))  # m), as the keys lie
        m, w = self.Yt.shape[0], X.shape[0]
        if self.kbuf is None or self.kbuf.size < m * w:
            self.kbuf = np.empty(m * w, dtype=np.float32)
        Kt = self.kbuf[: m * w].reshape(w, m)
        b = _block_width(w, min(k, w), self.rows) if m > 1 else 0
        maxima = (b, np.empty((-(-w // b), m), dtype=np.float32)) if b else None
        self._run(Kt, X, Rc, acts, "k32", maxima)
        return Kt.T, self.scale, None if maxima is None else (b, maxima[1].T, self.rows)

    def _run(self, B: np.ndarray, X: np.ndarray, Rc: np.ndarray | None,
             acts: np.ndarray | None, mode: str,
             maxima: tuple[int, np.ndarray] | None = None) -> None:
        if not self.threads:
            self._start()
        w = X.shape[0]
        pieces = -(-w // self.rows)
        if self.threads == 1 or pieces < 2:
            self._part(B, X, Rc, acts, mode, 0, w, maxima)
            return
        per = -(-pieces // self.threads) * self.rows  # whole pieces per thread
        cuts = [(j, min(w, j + per)) for j in range(0, w, per)]
        list(self.pool.map(lambda c: self._part(B, X, Rc, acts, mode, *c, maxima), cuts))


def rank_direct(
    chunks: Any,
    Y: np.ndarray,
    bias: np.ndarray | None,
    Rt: np.ndarray | None,
    acts: np.ndarray,
    k: int,
    key: str,
    norms: RowNormBounds,
    rq: np.ndarray | None,
    rmax: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k of a few queries by direct float64 products: one GEMV (one query) or small
    GEMM per block of cases, ranked exactly by :func:`rank_block`, the blocks' lists merged.

    For one query or a few, the product with the case memory is memory-bound: one read of
    every case row, like the floor of a bare GEMV (or GEMM) and ``argpartition``. Each
    block of ``chunks`` (``(start, X)`` pairs, X (w, h) float64) holds at most
    :data:`_DIRECT_ENTRIES` values (at least :data:`_DIRECT_MIN_ROWS` cases); its candidates
    within the rounding bound of :func:`_bound64` (``norms``: the fit's row-norm bounds of
    the case rows) get the keys and values of :func:`_psi`, so the result (keys in
    descending order, ties to the lower case index, and the values) is that of the fused
    scan (:func:`scan_top_k`) and of any batch. A block's exact top-k contains every case of
    the global top-k in it, so the merge by (key, index) is exact. Returns ``(keys,
    indices, signed values)``, each (m, k).
    """
    m = Y.shape[1]
    Yt = np.ascontiguousarray(Y.T)
    acts = np.asarray(acts)
    step = max(_DIRECT_MIN_ROWS, _DIRECT_ENTRIES // max(m, 1))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    flat = np.empty(0)  # one float64 product buffer for every block: no fresh pages
    with Widener(Yt, key, bias) as widen:  # used (and started) by a float32 memmap only
        for s0, X in chunks:
            for a in range(0, X.shape[0], step):
                Xc = X[a : a + step]
                w = Xc.shape[0]
                g = s0 + a
                Rc = None if Rt is None else Rt[:, g : g + w]
                keyed = Xc.dtype != np.float64
                xmax = norms.over(g, g + w)
                screen32 = maxima = scale32 = None
                got = widen.keys32(Xc, Rc, acts, xmax, None if Rt is None else rq,
                                   k) if keyed else None
                if got is not None:  # a float32 memmap: float32 keys, piece by piece
                    B, scale32, maxima = got
                else:
                    if flat.size < m * w:
                        flat = np.empty(m * min(step, X.shape[0]))
                    B = flat[: m * w].reshape(m, w)
                    if keyed:  # the keys in float64 (a float32 screen where it holds)
                        screen32 = widen.keys(B, Xc, Rc, acts, xmax)
                    else:
                        product_into(B, Yt, Xc)
                idx, keys, vals = rank_block(B, Yt, Xc, Rc, acts, min(k, w), key, xmax, rq,
                                             rmax, bias, keyed, screen32, maxima, scale32)
                parts.append((keys, idx + g, vals))
    if len(parts) == 1:
        return parts[0]
    keys, idx, vals = (np.concatenate(z, axis=1) for z in zip(*parts, strict=True))
    order = np.lexsort((idx, -keys), axis=-1)[:, :k]  # by key, ties to the lower index
    return tuple(np.take_along_axis(z, order, axis=1) for z in (keys, idx, vals))  # type: ignore[return-value]


def scan_top_k(
    chunks: Any,
    Y: np.ndarray,
    bias: np.ndarray | None,
    Rt: np.ndarray | None,
    acts: np.ndarray,
    k: int,
    key: str,
    entries: int,
    n: int,
    threads: int = 1,
    rmax: float | None = None,
    norms: RowNormBounds | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fused GEMM + top-k of every query over the ``n`` cases of ``chunks``.

    Every chunk is read once. With ``threads > 1`` the work is shared by as many Python
    threads (numpy releases the GIL in GEMM): by query groups when there are at least 64
    queries per thread, else by splitting each chunk's cases, the per-thread lists then merged
    by (key, index). Whenever the scan runs many small GEMMs, BLAS is pinned to one thread
    (:mod:`cbdt._threads`): a BLAS pool woken for each cache-sized block only fights the
    other threads for the cores. Returns ``(keys, indices, signed values)``, each (m, k):
    the keys and values of :func:`_psi`, the indices those of a stable sort of its keys.
    ``norms``: the fit's bounds on the case rows' norms (else each sub-chunk's largest row
    norm is measured on the way).
    """
    acts = np.asarray(acts)
    if acts.size > 1 and bool(np.any(acts[1:] < acts[:-1])):
        # queries sorted by action (stable), so each block runs one GEMM per action rather
        # than one per run of equal actions; every query's top-k is independent of the
        # others, so the results, put back in the callers' order, are the same
        perm = np.argsort(acts, kind="stable")
        out = scan_top_k(chunks, Y[:, perm], None if bias is None else bias[perm], Rt,
                          acts[perm], k, key, entries, n, threads, rmax, norms)
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        return tuple(z[inv] for z in out)  # type: ignore[return-value]
    from contextlib import nullcontext

    m = Y.shape[1]
    if rmax is None:  # max |r| over the cases, for the float32 screen's scaling and bound
        rmax = 1.0 if Rt is None or Rt.size == 0 else float(np.abs(Rt).max())
    by_queries = m >= 64 * threads
    if threads == 1 or by_queries:
        cuts = np.linspace(0, m, threads + 1).round().astype(int)
        scans = [
            _TopKScan(Y[:, a:b], None if bias is None else bias[a:b], Rt, acts[a:b], k, key,
                      entries, n, rmax, norms)
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)
        ]
    else:
        scans = [_TopKScan(Y, bias, Rt, acts, k, key, entries, n, rmax, norms)
                 for _ in range(threads)]
    pin = threads > 1 or m * n > entries  # several blocks: pin BLAS to one thread
    if pin:
        from ._threads import single_threaded_blas

        pinned: Any = single_threaded_blas()
    else:
        pinned = nullcontext()
    with pinned:
        if threads == 1:
            for s0, X in chunks:
                scans[0].feed(s0, X)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                for s0, X in chunks:
                    if by_queries:
                        jobs = [(sc, s0, X) for sc in scans]
                    else:  # each thread ranks a contiguous share of this chunk's cases
                        c = np.linspace(0, X.shape[0], threads + 1).round().astype(int)
                        jobs = [(sc, s0 + a, X[a:b]) for sc, a, b in zip(
                            scans, c[:-1], c[1:], strict=True) if b > a]
                    list(pool.map(lambda job: job[0].feed(job[1], job[2]), jobs))
                parts = list(pool.map(lambda sc: sc.result(), scans))  # final sorts, threaded
    if threads == 1:
        parts = [scans[0].result()]
    if threads == 1 or by_queries:
        return tuple(np.concatenate(z) for z in zip(*parts, strict=True))  # type: ignore[return-value]
    keys, idx, vals = (np.concatenate(z, axis=1) for z in zip(*parts, strict=True))
    order = np.lexsort((idx, -keys), axis=-1)[:, :k]  # by key, ties to the lower index
    return tuple(np.take_along_axis(z, order, axis=1) for z in (keys, idx, vals))  # type: ignore[return-value]


class _TopKScan:
    """Running top-k of a group of queries, fed chunk by chunk (see :func:`scan_top_k`).

    ``alpha = X @ Y + bias`` for each case chunk ``X`` (rows = cases). With ``Rt`` the
    weights are psi: for many queries each cache-sized sub-chunk of ``X`` is scaled once per
    action by that action's returns, so the GEMM yields psi directly (for a few queries the
    block is scaled instead). Each (query block, case sub-chunk) block of about ``entries``
    values stays in cache: it is keyed (|.|, +, -), reduced to the maxima of groups of
    ``_GROUP`` columns, and only groups whose maximum exceeds the query's running threshold
    are examined.

    A block's GEMM is an approximation: float32 (:meth:`_feed`, the queries, case rows and
    returns scaled by exact powers of two into float32's range) or float64 where float32
    cannot hold them. Every candidate carries bounds ``lo <= key <= hi`` on its exact key,
    the key of :func:`_psi` (the block's key -/+ its error bound). The threshold ``tau`` of
    a query is the k-th largest ``lo`` seen so far, a lower bound on its final k-th key,
    updated after every block (:meth:`_add`), so the screen of the next sub-chunk is fresh.
    The exact keys are computed only in :meth:`_resolve`, at the end of each chunk (or when
    a block holds too many candidates), for the candidates whose ``hi`` still reaches
    ``tau``; they are merged into exact top-k lists (keys in descending order, ties to the
    lower case index).
    """

    def __init__(
        self,
        Y: np.ndarray,
        bias: np.ndarray | None,
        Rt: np.ndarray | None,
        acts: np.ndarray,
        k: int,
        key: str,
        entries: int,
        n: int,
        rmax: float = 1.0,
        norms: RowNormBounds | None = None,
    ) -> None:
        h, m = Y.shape
        g = _GROUP
        self.k, self.key, self.bias, self.Rt = k, key, bias, Rt
        self.norms = norms  # the fit's row-norm bounds (None: measured per sub-chunk)
        # exact top-k of the resolved candidates
        self.best_k = np.full((m, k), -np.inf)
        self.best_i = np.full((m, k), -1, dtype=np.intp)
        self.best_s = np.zeros((m, k))
        # the k largest lower bounds (resolved and pending) and their minimum, tau
        self.lo_k = np.full((m, k), -np.inf)
        self.tau = np.full(m, -np.inf)
        self.Yt = np.ascontiguousarray(Y.T)  # (m, h)
        qb = max(1, min(m, _QBLOCK))
        c = min(max(k, entries // qb), max(n, 1))
        self.c = -(-c // g) * g  # sub-chunk width: a multiple of the group size
        self.blocks = []
        for q0 in range(0, m, qb):
            q1 = min(m, q0 + qb)
            a = acts[q0:q1]
            cut = np.flatnonzero(np.diff(a)) + 1
            lo = np.concatenate(([0], cut))
            hi = np.concatenate((cut, [q1 - q0]))
            segs = [(int(a[i]), int(i), int(j)) for i, j in zip(lo, hi, strict=True)]
            self.blocks.append([q0, q1, segs, True, [], 0])  # ..., filling, pending, count
        # scale X (c h per action) rather than the block (qb c) when there are many queries
        self.fold = Rt is not None and qb >= h // 2
        present = np.unique(acts) if self.fold else np.empty(0, dtype=np.intp)
        self.bufB = np.empty(qb * self.c)
        self.bufX = {int(a): np.empty((self.c, h)) for a in present}
        self.acts = np.asarray(acts)
        self.ymax = float(np.abs(self.Yt).max()) if self.Yt.size else 0.0
        self.ynorm = _row_norms(self.Yt)
        self.rmax = 1.0 if Rt is None else float(rmax)  # max |r| over all cases, from the fit
        # float32 screening (see _feed): half the GEMM time, exact results. The queries are
        # scaled by 2^ey and the returns by 2^er (exact), so their largest entries are in
        # [0.5, 1): float32 holds them whatever their scale, and the error bound holds
        self.ey = _unit_exponent(self.ymax)
        self.er = 0 if Rt is None else _unit_exponent(self.rmax)
        self.screen = (
            _SCREEN_F32
            and 0.0 < self.ymax < np.inf
            and abs(self.ey) <= _MAX_SHIFT
            and (Rt is None or (self.rmax < np.inf and abs(self.er) <= _MAX_SHIFT))
        )
        if self.screen:
            f4 = np.float32
            up = 2.0**self.ey  # |ey| <= _MAX_SHIFT: a normal float, products exact
            self.Y32t = (self.Yt * up).astype(f4)
            self.ynorm32 = self.ynorm * up  # the scaled queries' norms
            self.bufB32 = np.empty(qb * self.c, dtype=f4)
            self.bufX32 = np.empty((self.c, h), dtype=f4)
            self.bufX32a = {int(a): np.empty((self.c, h), dtype=f4) for a in present}

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top-k lists (every chunk fed has been resolved): keys in descending order,
        ties to the lower case index."""
        return self.best_k, self.best_i, self.best_s

    def _resolve(self, blk: list, s0: int, X: np.ndarray) -> None:
        """Compute the exact keys (:func:`_psi`) of the block's pending candidates (all from
        the chunk ``X`` starting at case ``s0``) whose upper bound reaches their row's
        ``tau``, and merge them into the exact top-k lists."""
        if not blk[4]:
            return
        q0, q1 = blk[0], blk[1]
        k = self.k
        rows, cols, lo, hi = (np.concatenate(z) for z in zip(*blk[4], strict=True))
        blk[4], blk[5] = [], 0
        ok = hi >= self.tau[q0 + rows]  # k cases have a key >= tau: below it, out
        rows, cols = rows[ok], cols[ok]
        keys, vals = self._exact(q0, rows, cols - s0, X, s0)
        old = self.best_i[q0:q1] >= 0
        orow = np.nonzero(old)[0]
        rows = np.concatenate((orow, rows))
        cols = np.concatenate((self.best_i[q0:q1][old], cols))
        keys = np.concatenate((self.best_k[q0:q1][old], keys))
        vals = np.concatenate((self.best_s[q0:q1][old], vals))
        o = np.lexsort((cols, -keys, rows))  # by row, key descending, case index ascending
        rows, cols, keys, vals = rows[o], cols[o], keys[o], vals[o]
        cnt = np.bincount(rows, minlength=q1 - q0)
        rank = np.arange(rows.size) - (np.cumsum(cnt) - cnt)[rows]
        sel = rank < k
        r, j = rows[sel] + q0, rank[sel]
        self.best_k[q0:q1], self.best_i[q0:q1], self.best_s[q0:q1] = -np.inf, -1, 0.0
        self.best_k[r, j], self.best_i[r, j], self.best_s[r, j] = keys[sel], cols[sel], vals[sel]
        # nothing pending: the k largest lower bounds are the exact top-k keys
        self.lo_k[q0:q1] = self.best_k[q0:q1]
        self.tau[q0:q1] = self.best_k[q0:q1, k - 1]

    def _add(
        self,
        blk: list,
        rows: np.ndarray,
        cols: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> None:
        """Record candidates of a block and raise its rows' thresholds at once.

        ``rows`` (ascending, local to the block), ``cols`` (case indices, all after those
        seen before) and bounds ``lo <= key <= hi`` of their exact keys. ``tau``, the k-th
        largest lower bound so far, is raised for the next sub-chunk: k cases have a key of
        at least ``tau``, so a later entry whose key cannot exceed it cannot enter the top
        k (ties go to the lower case index).
        """
        if rows.size == 0:
            return
        q0, q1 = blk[0], blk[1]
        nq, k = q1 - q0, self.k
        blk[4].append((rows, cols, lo, hi))
        blk[5] += rows.size
        cnt = np.bincount(rows, minlength=nq)
        width = k + int(cnt.max())
        V = np.full((nq, width), -np.inf)
        V[:, :k] = self.lo_k[q0:q1]
        V[rows, k + np.arange(rows.size) - (np.cumsum(cnt) - cnt)[rows]] = lo
        V.sort(axis=1)
        self.lo_k[q0:q1] = V[:, : -k - 1 : -1]
        self.tau[q0:q1] = V[:, -k]

    def feed(self, s0: int, X: np.ndarray) -> None:
        """Rank the cases ``s0 .. s0 + len(X)`` (rows of ``X``) for every query."""
        c = self.c
        for s in range(0, X.shape[0], c):  # sub-chunks of c cases: no (len(X), h) temporaries
            self._feed(s0 + s, X[s : s + c])
            for blk in self.blocks:  # bound the memory of adversarial orders
                if blk[5] > _COMPACT * (blk[1] - blk[0]) * self.k:
                    self._resolve(blk, s0, X)
        for blk in self.blocks:
            self._resolve(blk, s0, X)

    def _exact(
        self, q0: int, rows: np.ndarray, cols: np.ndarray, Xs: np.ndarray, gpos: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact (key, signed value) of the entries (q0 + rows, cols) of the block
        (:func:`_psi`)."""
        q = q0 + rows
        a = _psi(
            self.Yt[q],
            Xs[cols],
            None if self.bias is None else self.bias[q],
            None if self.Rt is None else self.Rt[self.acts[q], gpos + cols],
        )
        return _keyed(a, self.key), a

    def _shift32(self, xmax: float) -> tuple[int, int, np.ndarray | None] | None:
        """Powers of two for a float32 screen of a sub-chunk whose largest row norm is
        ``xmax``: ``(ex, shift, scaled bias)``, or None where float32 cannot hold it."""
        if not self.screen or not 0.0 < xmax < np.inf:
            return None
        ex = 0 if 1.0 / _X_UNSCALED <= xmax <= _X_UNSCALED else _unit_exponent(xmax)
        shift = self.ey + ex  # alpha in the screen's units: alpha 2^shift
        if abs(ex) > 1000 or abs(shift + self.er) > _MAX_SHIFT:
            return None
        if self.bias is None:
            return ex, shift, None
        with np.errstate(over="ignore"):  # too large: checked below
            b = self.bias * 2.0**shift if abs(shift) <= 1000 else np.ldexp(self.bias, shift)
        if not float(np.abs(b).max()) <= _BIAS_MAX:
            return None
        return ex, shift, b

    def _feed(self, gpos: int, Xs: np.ndarray) -> None:
        """Screen the cases ``gpos .. gpos + len(Xs)`` for every query, in float32 where it
        can hold the scaled values, else in float64.

        Float32: the queries are scaled by ``2^ey``, the returns by ``2^er`` (largest entry
        in [0.5, 1)) and the case rows by ``2^ex`` (only when their largest norm is outside
        ``2^+-40``), all exact, so the block holds ``psi 2^E``, ``E = ey + ex + er``. It
        differs from :func:`_psi` by at most ``M_i = (h + 8) u (|y_i| max_j |x_j| + |b_i|)
        max_j |r_j| + 2^-120 ((h + 8)(1 + max_j |x_j|)(1 + |y_i|) + |b_i|)`` per query in
        these units (``u``: float32's machine epsilon; conversion, products and sums of
        ``h`` terms; the second term bounds underflow, even flushed to zero, as every
        scaled factor is at most ``2^40``). Float64: the same with :func:`_bound64`. Every
        entry whose exact key can exceed the query's threshold ``tau_i`` has a block key
        above ``tau_i - M_i``; those candidates are kept with the bounds ``key -/+ M_i``
        (back in float64's units) and their exact keys computed by :meth:`_resolve` only if
        their upper bound still reaches the threshold at the end of the chunk: the result is
        the top-k of :func:`_psi`, found at float32 speed.
        """
        g, k, Rt, bias = _GROUP, self.k, self.Rt, self.bias
        h = self.Yt.shape[1]
        w = Xs.shape[0]
        xmax = max_row_norm(Xs) if self.norms is None else self.norms.over(gpos, gpos + w)
        Rs = None if Rt is None else Rt[:, gpos : gpos + w]
        rq = None if Rs is None else np.abs(Rs).max(axis=1)  # max |r| of each action here
        plan = self._shift32(xmax)
        if plan is not None:
            ex, shift, bs = plan
            E = shift + self.er
            X = self.bufX32[:w]
            if ex == 0:
                np.copyto(X, Xs, casting="same_kind")
            else:
                np.multiply(Xs, 2.0**ex, out=X, casting="same_kind")
            xm = math.ldexp(xmax, ex)
            Y, ynorm, dt, bufB, bufXa = self.Y32t, self.ynorm32, np.float32, self.bufB32, \
                self.bufX32a
            R = None if Rs is None else (Rs * 2.0**self.er).astype(np.float32)
            if rq is not None:
                rq = rq * 2.0**self.er
            b = None if bs is None else bs.astype(np.float32)
            babs = 0.0 if bs is None else np.abs(bs)
            coef = (h + 8) * _EPS32 * 1.1
            tiny = 2.0**-120 * ((h + 8) * (1.0 + xm) * (1.0 + ynorm) + babs)
            up, down = 2.0**E, 2.0**-E
        else:
            X, xm, Y, ynorm, dt, bufB, bufXa = Xs, xmax, self.Yt, self.ynorm, np.float64, \
                self.bufB, self.bufX
            R, b = Rs, bias
            babs = 0.0 if bias is None else np.abs(bias)
            coef = (h + 8) * _EPS64 * 1.1  # as in _bound64
            up = down = 1.0
        for a, buf in bufXa.items():  # psi_i = (r_ia x_i) . y
            np.multiply(X, R[a, :, None], out=buf[:w])
        for blk in self.blocks:
            q0, q1, segs, filling = blk[:4]
            nq = q1 - q0
            B = bufB[: nq * w].reshape(nq, w)
            for a, lo, hi in segs if self.fold else ((None, 0, nq),):
                Xa = bufXa[a][:w] if self.fold else X
                np.matmul(Y[q0 + lo : q0 + hi], Xa.T, out=B[lo:hi])
            if b is not None and not self.fold:
                B += b[q0:q1, None]  # alpha = X y + bias
            if R is not None:
                for a, lo, hi in segs:
                    if not self.fold:  # psi = alpha r
                        B[lo:hi] *= R[a]
                    elif b is not None:  # psi = (r x) y + bias r
                        B[lo:hi] += b[q0 + lo : q0 + hi, None] * R[a]
            if self.key == "abs":
                K = np.abs(B, out=B)  # in place: only the keys are read again
            elif self.key == "negative":
                K = np.negative(B, out=B)
            else:
                K = B
            bq = babs if np.isscalar(babs) else babs[q0:q1]
            rqq = 1.0 if rq is None else rq[self.acts[q0:q1]]
            if dt is np.float32:
                M = coef * ((ynorm[q0:q1] * xm + bq) * rqq) + tiny[q0:q1]
            else:
                M = _bound64(h, ynorm[q0:q1], xm, bq, rqq, self.ymax, self.rmax)
            if filling and w >= g * k:  # first sub-chunk: a bound from the group maxima
                # k groups have a maximum >= th: the k-th largest block key is >= th, so the
                # k-th largest exact key is >= th - M, and every entry that reaches it has a
                # block key >= th - 2 M (coef |th| covers the rounding of thr)
                ng = w // g
                gm = K[:, : ng * g].reshape(nq, g, ng).max(axis=1)
                th = np.partition(gm, ng - k, axis=1)[:, ng - k].astype(np.float64)
                thr = (th - 2 * M - coef * np.abs(th)).astype(dt)
                rows, cols = _above(K, thr, g, gm)
                blk[3] = False
            elif filling:  # first sub-chunk: every entry that can reach its k-th largest
                if w >= k:
                    th = np.partition(K, w - k, axis=1)[:, w - k].astype(np.float64)
                    thr = (th - 2 * M - coef * np.abs(th)).astype(dt)
                    flat = np.flatnonzero(K >= thr[:, None])
                else:
                    flat = np.arange(K.size)
                rows, cols = np.divmod(flat, w)
                blk[3] = w < k
            else:
                with np.errstate(over="ignore"):  # a threshold beyond every key: clipped
                    tb = np.minimum(self.tau[q0:q1] * up, _KEY_MAX)
                thr = (tb - M - coef * np.abs(tb)).astype(dt)
                rows, cols = _above(K, thr, g)
                if rows.size == 0:
                    continue
            kb = np.ravel(K)[rows * w + cols].astype(np.float64)
            Mr = M[rows]
            self._add(blk, rows, cols + gpos, (kb - Mr) * down, (kb + Mr) * down)


def _scan_block(
    block: Any, Y: np.ndarray, bias: Any, R_loc: Any, acts: np.ndarray, k: int, key: str,
    entries: int, rmax: float | None = None, norms: RowNormBounds | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`scan_top_k` of one dask chunk, on a worker (indices local to the chunk;
    ``norms``: the fit's row-norm bounds of the chunk, rows counted from its start)."""
    X = np.asarray(block, dtype=np.float64)
    return scan_top_k([(0, X)], Y, bias, R_loc, acts, k, key, entries, X.shape[0], 1, rmax,
                      norms)


def _above(
    K: np.ndarray, thr: np.ndarray, g: int, gm: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the entries of ``K`` above their row's threshold ``thr``.

    Columns are grouped ``j, j + ng, ..., j + (g - 1) ng`` (``ng = width // g``); one
    maximum per group screens the block, and only groups above the threshold are read
    again. The columns left over after the last full group are compared directly. ``gm``:
    the group maxima, when already computed.
    """
    nq, w = K.shape
    ng = w // g
    rows_l, cols_l = [], []
    if ng:
        if gm is None:
            gm = K[:, : ng * g].reshape(nq, g, ng).max(axis=1)
        hit = np.flatnonzero(gm > thr[:, None])
        if hit.size:
            r_, j = np.divmod(hit, ng)
            flat = (r_ * w + j)[:, None] + np.arange(0, g * ng, ng)  # the hit groups' entries
            flat = flat[np.ravel(K)[flat] > thr[r_, None]]  # row-major: rows ascend
            r_, j = np.divmod(flat, w)
            rows_l.append(r_)
            cols_l.append(j)
    if ng * g < w:
        r_, j = np.nonzero(K[:, ng * g :] > thr[:, None])
        rows_l.append(r_)
        cols_l.append(j + ng * g)
    if not rows_l:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    if len(rows_l) == 1:
        return rows_l[0], cols_l[0]
    rows, cols = np.concatenate(rows_l), np.concatenate(cols_l)
    o = np.argsort(rows, kind="stable")  # rows ascending
    return rows[o], cols[o]


def rank_dask(
    Phi: Any,
    Y: np.ndarray,
    bias: np.ndarray | None,
    Rt: np.ndarray | None,
    acts: np.ndarray,
    k: int,
    key: str,
    entries: int,
    rmax: float | None = None,
    norms: list[RowNormBounds] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`scan_top_k` on every row chunk of a dask ``Phi`` (on its workers), then the
    per-chunk top-k lists merged in case order on the client. ``rmax`` (max |r|) and
    ``norms`` (one :class:`RowNormBounds` per chunk) are the fit's, measured once; without
    them each chunk measures its own. Each chunk's task gets the returns of the queries'
    actions only (the graph holds every slice: all |A| rows of them would be |A| times the
    data when the queries audit one action)."""
    import dask

    blocks = row_blocks(Phi)
    if norms is not None and len(norms) != len(blocks):
        norms = None
    if Rt is not None:  # only the returns of the queries' actions travel to the workers
        used, acts = np.unique(acts, return_inverse=True)
        Rt = Rt[used]
    Yd, bd, ad = dask.delayed(Y), dask.delayed(bias), dask.delayed(acts)
    parts = [  # each task gets its own slice of the returns, nothing more
        dask.delayed(_scan_block)(
            blk, Yd, bd, None if Rt is None else np.ascontiguousarray(Rt[:, o0:o1]), ad, k,
            key, entries, rmax, None if norms is None else norms[j],
        )
        for j, (blk, o0, o1) in enumerate(blocks)
    ]
    done = dask.compute(*parts)
    m = Y.shape[1]
    best_k = np.full((m, k), -np.inf)
    best_i = np.full((m, k), -1, dtype=np.intp)
    best_s = np.zeros((m, k))
    for (bk, bi, bs), (_, o0, _) in zip(done, blocks, strict=True):
        ok = bi >= 0
        rows = np.nonzero(ok)[0]
        merge_top_k(best_k, best_i, rows, bi[ok] + o0, bk[ok], best_s, bs[ok])
    return best_k, best_i, best_s
