"""Exact, deterministic top-k selection (ties broken by the lower case index)."""

from __future__ import annotations

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

def _row_blocks(Phi: Any) -> list[tuple[Any, int, int]]:
    """(delayed block, first row, end row) of every row chunk of a dask ``Phi``."""
    ends = np.cumsum(Phi.chunks[0]).tolist()
    starts = [0] + ends[:-1]
    return list(zip(Phi.to_delayed().ravel(), starts, ends, strict=True))



def _scan_top_k(
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fused GEMM + top-k of every query over the ``n`` cases of ``chunks``.

    Every chunk is read once. With ``threads > 1`` the work is shared by as many Python
    threads (numpy releases the GIL in GEMM): by query groups when there are at least 64
    queries per thread, else by splitting each chunk's cases, the per-thread lists then merged
    by (key, index). Whenever the scan runs many small GEMMs, BLAS is pinned to one thread
    (:mod:`cbdt._threads`): a BLAS pool woken for each cache-sized block only fights the
    other threads for the cores. Returns ``(keys, indices, signed values)``, each (m, k).
    """
    acts = np.asarray(acts)
    if acts.size > 1 and bool(np.any(acts[1:] < acts[:-1])):
        # queries sorted by action (stable), so each block runs one GEMM per action rather
        # than one per run of equal actions; every query's top-k is independent of the
        # others, so the results, put back in the callers' order, are the same
        perm = np.argsort(acts, kind="stable")
        out = _scan_top_k(chunks, Y[:, perm], None if bias is None else bias[perm], Rt,
                          acts[perm], k, key, entries, n, threads, rmax)
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        return tuple(z[inv] for z in out)  # type: ignore[return-value]
    from contextlib import nullcontext

    m = Y.shape[1]
    if rmax is None:  # max |r| over the cases, for the float32 screen's error bound
        rmax = 1.0 if Rt is None or Rt.size == 0 else float(np.abs(Rt).max())
    by_queries = m >= 64 * threads
    if threads == 1 or by_queries:
        cuts = np.linspace(0, m, threads + 1).round().astype(int)
        scans = [
            _TopKScan(Y[:, a:b], None if bias is None else bias[a:b], Rt, acts[a:b], k, key,
                      entries, n, rmax)
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)
        ]
    else:
        scans = [_TopKScan(Y, bias, Rt, acts, k, key, entries, n, rmax) for _ in range(threads)]
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
    """Running top-k of a group of queries, fed chunk by chunk (see :func:`_scan_top_k`).

    ``alpha = X @ Y + bias`` for each case chunk ``X`` (rows = cases). With ``Rt`` the
    weights are psi: for many queries each cache-sized sub-chunk of ``X`` is scaled once per
    action by that action's returns, so the GEMM yields psi directly (for a few queries the
    block is scaled instead). Each (query block, case sub-chunk) block of about ``entries``
    values stays in cache: it is keyed (|.|, +, -), reduced to the maxima of groups of
    ``_GROUP`` columns, and only groups whose maximum exceeds the query's running threshold
    are examined.

    Every candidate carries bounds ``lo <= key <= hi`` on its float64 key (``lo = hi =
    key`` when it was computed in float64; the float32 key -/+ its error bound otherwise).
    The threshold ``tau`` of a query is the k-th largest ``lo`` seen so far, a lower bound on
    its final k-th key, updated after every block (:meth:`_add`), so the screen of the next
    sub-chunk is fresh. The float64 keys are computed only in :meth:`_resolve`, at the end of
    each chunk (or when a block holds too many candidates), for the candidates whose ``hi``
    still reaches ``tau``; the resolved candidates are merged into exact top-k lists (keys
    in descending order, ties to the lower case index).
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
    ) -> None:
        h, m = Y.shape
        g = _GROUP
        self.k, self.key, self.bias, self.Rt = k, key, bias, Rt
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
        self.bufK = np.empty(qb * self.c) if key != "positive" else self.bufB
        self.bufX = {int(a): np.empty((self.c, h)) for a in present}
        # float32 screening (see _feed32): half the GEMM time, exact results
        self.acts = np.asarray(acts)
        ymax = float(np.abs(self.Yt).max()) if self.Yt.size else 0.0
        self.ymax = ymax
        self.rmax = 1.0 if Rt is None else rmax  # max |r| over all cases, from the fit
        self.screen = _SCREEN_F32 and 0.0 < ymax < 1e15
        if self.screen:
            f4 = np.float32
            self.Y32t = self.Yt.astype(f4)
            self.ynorm = np.sqrt(np.einsum("mh,mh->m", self.Yt, self.Yt))
            self.bias32 = None if bias is None else bias.astype(f4)
            self.bufB32 = np.empty(qb * self.c, dtype=f4)
            self.bufX32 = np.empty((self.c, h), dtype=f4)
            self.bufX32a = {int(a): np.empty((self.c, h), dtype=f4) for a in present}

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top-k lists (every chunk fed has been resolved): keys in descending order,
        ties to the lower case index."""
        return self.best_k, self.best_i, self.best_s

    def _resolve(self, blk: list, s0: int, X: np.ndarray) -> None:
        """Compute the float64 keys of the block's pending candidates (all from the chunk
        ``X`` starting at case ``s0``) whose upper bound reaches their row's ``tau``, and
        merge them into the exact top-k lists."""
        if not blk[4]:
            return
        q0, q1 = blk[0], blk[1]
        k = self.k
        rows, cols, lo, hi, vals = (np.concatenate(z) for z in zip(*blk[4], strict=True))
        blk[4], blk[5] = [], 0
        ok = hi >= self.tau[q0 + rows]  # k cases have a key >= tau: below it, out
        rows, cols, vals = rows[ok], cols[ok], vals[ok]
        keys = lo[ok]
        todo = np.flatnonzero(np.isnan(vals))  # float32 candidates: recompute in float64
        if todo.size:
            keys[todo], vals[todo] = self._exact(q0, rows[todo], cols[todo] - s0, X, s0)
        old = self.best_i[q0:q1] >= 0
        orow, ocol = np.nonzero(old)
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
        vals: np.ndarray,
    ) -> None:
        """Record candidates of a block and raise its rows' thresholds at once.

        ``rows`` (ascending, local to the block), ``cols`` (case indices, all after those
        seen before), bounds ``lo <= key <= hi`` of their float64 keys, and their signed
        values (NaN where only the float32 key is known). ``tau``, the k-th largest lower
        bound so far, is raised for the next sub-chunk: k cases have a key of at least
        ``tau``, so a later entry whose key cannot exceed it cannot enter the top k (ties go
        to the lower case index).
        """
        if rows.size == 0:
            return
        q0, q1 = blk[0], blk[1]
        nq, k = q1 - q0, self.k
        blk[4].append((rows, cols, lo, hi, vals))
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
            Xs = X[s : s + c]
            done = False
            if self.screen:
                xn = np.sqrt(np.einsum("ch,ch->c", Xs, Xs))
                scale = self.ymax * float(xn.max()) * max(self.rmax, 1e-300)
                if 1e-20 < scale < 1e20 and self.rmax < 1e30:  # well inside float32's range
                    self._feed32(s0 + s, Xs, float(xn.max()))
                    done = True
            if not done:
                self._feed64(s0 + s, Xs)
            for blk in self.blocks:  # bound the memory of adversarial orders
                if blk[5] > _COMPACT * (blk[1] - blk[0]) * self.k:
                    self._resolve(blk, s0, X)
        for blk in self.blocks:
            self._resolve(blk, s0, X)

    def _exact(
        self, q0: int, rows: np.ndarray, cols: np.ndarray, Xs: np.ndarray, gpos: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Float64 (key, signed value) of the entries (q0 + rows, cols) of the block."""
        a = np.einsum("ch,ch->c", self.Yt[q0 + rows], Xs[cols])
        if self.bias is not None:
            a += self.bias[q0 + rows]
        if self.Rt is not None:
            a *= self.Rt[self.acts[q0 + rows], gpos + cols]
        key = np.abs(a) if self.key == "abs" else (a if self.key == "positive" else -a)
        return key, a

    def _feed32(self, gpos: int, Xs: np.ndarray, xmax: float) -> None:
        """:meth:`_feed64` with the blocks formed and screened in float32.

        The float32 block differs from the float64 one by at most
        ``M_i = (h + 8) u (|y_i| max_j |x_j| + |b_i|) max_j |r_j| + 1e-30`` per query (``u``
        float32's machine epsilon: conversion, products and sums of ``h`` terms), so every
        entry whose float64 key can exceed the query's threshold ``tau_i`` has a float32 key
        above ``tau_i - M_i``. Those candidates are kept with the bounds ``key32 -/+ M_i``
        and recomputed in float64 by :meth:`_resolve` only if their upper bound still
        reaches the threshold at the end of the chunk: the result is the float64 top-k,
        found at float32 speed.
        """
        g, k, Rt, bias = _GROUP, self.k, self.Rt, self.bias
        h = self.Yt.shape[1]
        coef = (h + 8) * float(np.finfo(np.float32).eps) * 1.1
        w = Xs.shape[0]
        X32 = self.bufX32[:w]
        np.copyto(X32, Xs, casting="same_kind")
        # max |r| of each action over the sub-chunk (one value per action)
        rmax = None if Rt is None else np.abs(Rt[:, gpos : gpos + w]).max(axis=1)
        R32 = None if Rt is None else Rt[:, gpos : gpos + w].astype(np.float32)  # (A, w)
        for a, buf in self.bufX32a.items():
            np.multiply(X32, R32[a, :, None], out=buf[:w])
        for blk in self.blocks:
            q0, q1, segs, filling = blk[:4]
            nq = q1 - q0
            B = self.bufB32[: nq * w].reshape(nq, w)
            for a, lo, hi in segs if self.fold else ((None, 0, nq),):
                Xa = self.bufX32a[a][:w] if self.fold else X32
                np.matmul(self.Y32t[q0 + lo : q0 + hi], Xa.T, out=B[lo:hi])
            if bias is not None and not self.fold:
                B += self.bias32[q0:q1, None]
            if Rt is not None:
                for a, lo, hi in segs:
                    r = R32[a]
                    if not self.fold:
                        B[lo:hi] *= r
                    elif bias is not None:
                        B[lo:hi] += self.bias32[q0 + lo : q0 + hi, None] * r
            if self.key == "abs":
                K = np.abs(B, out=B)  # in place: only the keys are read again
            elif self.key == "negative":
                K = np.negative(B, out=B)
            else:
                K = B
            M = self.ynorm[q0:q1] * xmax
            if bias is not None:
                M = M + np.abs(bias[q0:q1])
            if rmax is not None:
                M = M * rmax[self.acts[q0:q1]]
            M = coef * M + 1e-30
            if filling and w >= g * k:  # first sub-chunk: a bound from the group maxima
                # k groups have a maximum >= th: the k-th largest float32 key is >= th, so the
                # k-th largest float64 key is >= th - M, and every entry that reaches it has
                # a float32 key >= th - 2 M (coef |th| covers the rounding of thr)
                ng = w // g
                gm = K[:, : ng * g].reshape(nq, g, ng).max(axis=1)
                th = np.partition(gm, ng - k, axis=1)[:, ng - k].astype(np.float64)
                thr = (th - 2 * M - coef * np.abs(th)).astype(np.float32)
                rows, cols = _above(K, thr, g, gm)
                blk[3] = False
            elif filling:  # first sub-chunk: every entry that can reach its k-th largest
                if w >= k:
                    th = np.partition(K, w - k, axis=1)[:, w - k].astype(np.float64)
                    thr = (th - 2 * M - coef * np.abs(th)).astype(np.float32)
                    flat = np.flatnonzero(K >= thr[:, None])
                else:
                    flat = np.arange(K.size)
                rows, cols = np.divmod(flat, w)
                blk[3] = w < k
            else:
                tb = self.tau[q0:q1]
                thr = (tb - M - coef * np.abs(tb)).astype(np.float32)
                rows, cols = _above(K, thr, g)
                if rows.size == 0:
                    continue
            k32 = np.ravel(K)[rows * w + cols].astype(np.float64)
            Mr = M[rows]
            self._add(blk, rows, cols + gpos, k32 - Mr, k32 + Mr, np.full(rows.size, np.nan))

    def _feed64(self, s0: int, X: np.ndarray) -> None:
        """Rank the cases ``s0 .. s0 + len(X)`` in float64 throughout."""
        g, k, c, Rt, bias = _GROUP, self.k, self.c, self.Rt, self.bias
        for s in range(0, X.shape[0], c):
            Xs = X[s : s + c]
            w = Xs.shape[0]
            gpos = s0 + s
            for a, buf in self.bufX.items():  # psi_i = (r_ia x_i) . y
                np.multiply(Xs, Rt[a, gpos : gpos + w, None], out=buf[:w])
            for blk in self.blocks:
                q0, q1, segs, filling = blk[:4]
                nq = q1 - q0
                B = self.bufB[: nq * w].reshape(nq, w)
                for a, lo, hi in segs if self.fold else ((None, 0, nq),):
                    Xa = self.bufX[a][:w] if self.fold else Xs
                    np.matmul(self.Yt[q0 + lo : q0 + hi], Xa.T, out=B[lo:hi])
                if bias is not None and not self.fold:
                    B += bias[q0:q1, None]  # alpha = X y + bias
                if Rt is not None:
                    for a, lo, hi in segs:
                        r = Rt[a, gpos : gpos + w]
                        if not self.fold:  # psi = alpha r
                            B[lo:hi] *= r
                        elif bias is not None:  # psi = (r x) y + bias r
                            B[lo:hi] += bias[q0 + lo : q0 + hi, None] * r
                if self.key == "abs":
                    K = np.abs(B, out=self.bufK[: nq * w].reshape(nq, w))
                elif self.key == "negative":
                    K = np.negative(B, out=self.bufK[: nq * w].reshape(nq, w))
                else:
                    K = B
                if filling:  # first sub-chunk: every entry at or above its k-th largest
                    if w >= k:
                        th = np.partition(K, w - k, axis=1)[:, w - k]
                        flat = np.flatnonzero(K >= th[:, None])
                    else:
                        flat = np.arange(K.size)
                    rows, cols = np.divmod(flat, w)
                    blk[3] = w < k
                else:
                    rows, cols = _above(K, self.tau[q0:q1], g)
                    if rows.size == 0:
                        continue
                key = K[rows, cols]
                self._add(blk, rows, cols + gpos, key, key, B[rows, cols])


def _scan_block(
    block: Any, Y: np.ndarray, bias: Any, R_loc: Any, acts: np.ndarray, k: int, key: str,
    entries: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_scan_top_k` of one dask chunk, on a worker (indices local to the chunk)."""
    X = np.asarray(block, dtype=np.float64)
    return _scan_top_k([(0, X)], Y, bias, R_loc, acts, k, key, entries, X.shape[0])


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


def _rank_dask(
    Phi: Any,
    Y: np.ndarray,
    bias: np.ndarray | None,
    Rt: np.ndarray | None,
    acts: np.ndarray,
    k: int,
    key: str,
    entries: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_scan_top_k` on every row chunk of a dask ``Phi`` (on its workers), then the
    per-chunk top-k lists merged in case order on the client."""
    import dask

    blocks = _row_blocks(Phi)
    Yd, bd, ad = dask.delayed(Y), dask.delayed(bias), dask.delayed(acts)
    parts = [  # each task gets its own slice of the returns, nothing more
        dask.delayed(_scan_block)(
            blk, Yd, bd, None if Rt is None else np.ascontiguousarray(Rt[:, o0:o1]), ad, k,
            key, entries,
        )
        for blk, o0, o1 in blocks
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
