"""Factorisations of the case memory (the kernels behind :meth:`cbdt.CaseInfluence.fit`).

Both routes give the upper-triangular factor :math:`R` of :math:`X = [s\\Phi,\\ t\\mathbf 1]`
(:math:`R^\\top R = X^\\top X`; :math:`s`, :math:`t` exact powers of two, the constant column
only with an intercept) and :math:`C = Q^\\top R_{\\text{ret}}` for the returns, from a QR
factorisation :math:`X = QR`, without ever forming an inverse:

* **CholeskyQR2** (Fukaya et al. 2014; Yamamoto et al. 2015), the fast path. A preconditioner
  :math:`R_1` is the Cholesky factor of a Gram matrix of :math:`X`: of every
  :data:`SAMPLE_STRIDE`-th block of rows (scaled to all rows) when there are at least
  :data:`SAMPLE_MIN_BLOCKS` blocks, else (or when the sample's Gram matrix is singular) of
  all rows. A pass over all rows then forms each block of :math:`Y = XR_1^{-1}` by a
  triangular solve while it is in cache and sums :math:`Y^\\top Y` and :math:`Y^\\top
  R_{\\text{ret}}`; the Cholesky factor :math:`Y^\\top Y = R_2^\\top R_2` gives :math:`R =
  R_2R_1` and :math:`C = R_2^{-\\top}Y^\\top R_{\\text{ret}}`. This is accepted when the
  measured orthogonality loss :math:`\\omega = \\lVert Y^\\top Y - I\\rVert_2` is at most
  :data:`OMEGA_MAX`: the eigenvalues of :math:`Y^\\top Y` lie in :math:`[1-\\omega,
  1+\\omega]`, so :math:`\\mathrm{cond}(Y)^2 \\le 3`, the last Cholesky factorisation is
  accurate to rounding and :math:`R` is as backward stable as a Householder QR's, whatever
  preconditioner led there. Otherwise :math:`R_2R_1` preconditions one more pass
  (``"cholesky_qr3"``). A first Gram matrix of all rows alone would be the normal equations
  (errors of order :math:`\\epsilon\\,\\mathrm{cond}(\\Phi)^2`); the checked pass is what
  repairs them. The work is two or three products of the size of :math:`\\Phi^\\top\\Phi`
  (the sampled one an eighth of that), all level-3 BLAS (a wide memory's triangular solve
  mostly ``dgemm``: :func:`cbdt._blas.trsm_right_upper_recursive`), and at most about 1.13
  reads of ``Phi`` on the sampled path.
* **Householder TSQR**, the guarded fallback: ``dgeqrf`` folds of ``[X, R_ret]`` over row
  chunks (a tall-skinny QR), several times slower but stable for any condition number.

The fallback is taken when the first Cholesky fails (:math:`\\Phi` numerically rank
deficient, or :math:`\\epsilon\\,\\mathrm{cond}(\\Phi)^2 \\gtrsim 1`), when a Cholesky of
:math:`Y^\\top Y` fails, or when two passes leave :math:`\\omega` above :data:`OMEGA_MAX`.

Sums are deterministic: the ``i``-th block read by a pass is added into accumulator ``i mod
16`` (in block order), and the 16 accumulators are added in order, so the factor does not
depend on the number of threads. BLAS is pinned to one thread per Python thread.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg

from ._blas import (
    geqrf_r,
    symmetric_from_lower,
    syrk_add,
    transpose_into,
    trsm_right_upper,
    trsm_right_upper_recursive,
)
from ._pages import populate
from .exceptions import InputError

__all__ = ["MemoryFactor", "factor_memory", "OMEGA_MAX", "SAMPLE_STRIDE", "SAMPLE_MIN_BLOCKS"]

#: Largest orthogonality loss ``||Y^T Y - I||_2`` of CholeskyQR2's first pass that its second
#: pass is trusted to repair (``cond(Y)^2 <= (1 + w) / (1 - w) = 3``).
OMEGA_MAX = 0.5
#: Precondition from every SAMPLE_STRIDE-th block of rows when there are at least
#: SAMPLE_MIN_BLOCKS blocks (the pass-2 check decides whether that sufficed).
SAMPLE_STRIDE, SAMPLE_MIN_BLOCKS = 8, 64
#: Pass 2 solves its blocks, each copied into a Fortran-ordered buffer, by one ``dtrsm``
#: below this many columns ``H'`` and by the recursive solve
#: (:func:`cbdt._blas.trsm_right_upper_recursive`, mostly ``dgemm``) from it on. Measured on
#: the benchmark machine (OpenBLAS SkylakeX, one thread, the copy of one block from a
#: C-ordered array and its solve, medians of 15), one ``dtrsm`` / the recursive solve / a
#: left-side ``dtrsm`` on a C-ordered copy (no transposing copy): 0.57 / 0.54 / 0.84 ms at
#: H' = 65 (2048 rows; no clear gain, so narrow memories keep the single ``dtrsm``), 2.90 /
#: 1.96 / 3.52 ms at H' = 257 and 23.0 / 19.2 / 26.0 ms at H' = 1025 (1024 rows). The
#: transposing copy itself costs 0.04-0.2 ms more than a plain one.
RECURSIVE_TRSM_MIN = 129
_LANES = 16  # accumulators of the block sums: fixed, so the sum order is thread-independent
_TSQR_ROWS = 2048  # rows folded into the Householder factor at once (cache-sized QR)
_SCALE_LO, _SCALE_HI = 2.0**-800, 2.0**800  # Gram diagonal outside: rescale Phi (2^k)


@dataclass
class MemoryFactor:
    """Triangular factor of ``X = [s Phi, t 1]`` and what the estimator needs of the fit.

    Attributes
    ----------
    R : ndarray (H', H')
        Upper triangular, ``R^T R = X^T X`` (H' = H + 1 with an intercept).
    C : ndarray (H', |A|)
        ``Q^T R_ret`` (the readout is ``R^-1 C``).
    scale, const : float
        The powers of two ``s`` and ``t``.
    method : str
        ``"cholesky_qr2"`` or ``"householder_tsqr"``.
    omega : float
        ``||Y^T Y - I||_2`` of CholeskyQR2's first pass (nan when it was not reached).
    reason : str
        Why the fallback was taken ("" on the fast path).
    memory : ndarray (n, H') or None
        In-memory fits: the read-only float64 copy ``[s Phi, 1]`` (the constant column is
        1, not ``t``) that the queries read; None for a memmap or dask ``Phi``.
    passes : float
        Reads of ``Phi``, in whole passes (a sampled first pass counts its fraction).
    row_norms : ndarray or None
        ``max ||s phi_i||`` over each block of :func:`block_rows` rows, recorded by the
        second pass (None where it did not run over the rows here, e.g. on dask).
    chunk_norms : list of ndarray or None
        On dask: the same, one array per row chunk of ``Phi`` (blocks counted from the
        chunk's first row), from the second pass on the workers; None elsewhere or when the
        second pass did not complete.
    """

    R: np.ndarray
    C: np.ndarray
    scale: float
    const: float
    method: str
    omega: float
    reason: str
    memory: np.ndarray | None
    passes: float
    row_norms: np.ndarray | None = None
    chunk_norms: list[np.ndarray] | None = None


def block_rows(Hp: int) -> int:
    """Rows of one block (measured best for pass 2 on the benchmark machine, 512 kB of L2
    per core: 2048 rows at H = 64, 1024 at H = 256 and 1024)."""
    return 2048 if Hp <= 128 else 1024


def copy_rows(Hp: int) -> int:
    """Rows of ``[s Phi, 1]`` that pass 2 transposes at once with numpy, where OpenBLAS's
    ``domatcopy`` is missing (:func:`cbdt._blas.transpose_into`): 64 rows, fewer from
    H' = 1024 on (at most 512 kB), each transposed into the block's Fortran-ordered buffer
    while it is still in the first caches.
    Measured on the benchmark machine (one thread): the transposing copy of whole blocks
    took 1.2 s of a 5.8 s fit at H = 256 (n = 1e6) and 2.3-2.4 s of 13.4 s at H = 1024
    (n = 2.5e5); in pieces of 512 kB 0.37-0.39 s of 4.7-4.9 s and 0.37 s of 11.1 s. Over
    all blocks of n = 1e6 rows (H = 64) and 2.5e5 rows (H = 256), CPU time, best of 5, against
    one streaming read of the same rows (0.059 s, 0.064 s): read in place (``copy=False``)
    and transposed, 0.145 s / 0.154 s in pieces of 512 kB, 0.106 s / 0.113 s in pieces of
    64 rows, 0.121 s / 0.123 s in pieces of 32 rows; written into an already mapped copy and
    transposed from it, 0.178 s / 0.185 s (512 kB), 0.147 s / 0.167 s (64 rows)."""
    return min(64, piece_rows(Hp))


def piece_rows(Hp: int) -> int:
    """Rows of ``[s Phi, 1]`` (about 512 kB) that pass 2 writes into the fit's copy and
    transposes out of it by one ``domatcopy`` call while they are in cache.

    Reading ``Phi`` itself (a memmap, ``copy=False``), pass 2 transposes whole blocks: by
    ``domatcopy`` for float64, by one numpy copy for a float32 memmap. Measured on the
    benchmark machine (n = 4e6, H = 64, two threads, medians of 5 fits): the float32 memmap
    fits in 1.31 s with whole-block numpy copies, 1.64 s widened piece by piece into a
    scratch and transposed by ``domatcopy``, 1.90 s with numpy copies of 64 rows; a float64
    memmap in 1.63 s (``domatcopy``) and 1.76 s (whole-block numpy copies)."""
    return max(1, (1 << 19) // (8 * Hp))


# ---------------------------------------------------------------------- sources
class _Source:
    """Row blocks of ``[s Phi, 1]`` in float64 from an array or a memmap (or one dask chunk
    on a worker). An in-memory source writes them into ``memory`` on the first full pass
    and reads them back from it afterwards."""

    def __init__(self, Phi: Any, intercept: bool, memory: np.ndarray | None):
        self.Phi, self.intercept, self.memory = Phi, intercept, memory
        self.n, self.H = Phi.shape
        self.Hp = self.H + int(intercept)
        self.filled = False  # memory holds [s Phi, 1] for the current scale
        self.row_norms: np.ndarray | None = None  # per block, from pass 2 (_q_pass)

    def fill(self, a: int, e: int, out: np.ndarray, scale: float) -> np.ndarray:
        """Rows ``a..e`` of ``[s Phi, 1]`` written into ``out`` (e - a, H')."""
        H = self.H
        blk = self.Phi[a:e]
        if scale == 1.0:
            np.copyto(out[:, :H], blk, casting="unsafe")  # float32/int memmaps convert here
        else:
            np.multiply(blk, scale, out=out[:, :H], casting="unsafe")
        if self.intercept:
            out[:, H] = 1.0
        return out

    def pass1(self, a: int, e: int, buf: np.ndarray, scale: float, full: bool) -> np.ndarray:
        if self.memory is not None and full:  # a full pass fills the memory on the way
            return self.fill(a, e, self.memory[a:e], scale)
        return self.fill(a, e, buf[: e - a], scale)

    def pass2(self, a: int, e: int, buf: np.ndarray, scale: float) -> np.ndarray:
        """Rows ``a..e`` of ``[s Phi, 1]`` transposed into ``buf`` (Fortran-ordered), read
        from the fit's copy (written on the way if it is not yet filled) or from ``Phi``.
        Each transposition is one call of OpenBLAS's ``domatcopy`` with the GIL released
        (:func:`cbdt._blas.transpose_into`; whole blocks from ``Phi``, pieces of
        :func:`piece_rows` from the copy, each written and transposed while in cache), else
        numpy in pieces of :func:`copy_rows`."""
        out = buf[: e - a]  # a full block, or the short last one in a buffer of its size
        H = self.H
        if self.memory is None:  # Phi itself (a memmap, or kept by reference)
            if not transpose_into(self.Phi[a:e], out[:, :H], scale):
                # a float32/int memmap (converted here), or no domatcopy: one numpy copy of
                # the whole block, one release of the GIL (numpy's pieces would hand it back
                # and forth between the threads; measured, see piece_rows)
                return self.fill(a, e, out, scale)
            if self.intercept:
                out[:, H] = 1.0
            return out
        step, small = piece_rows(self.Hp), copy_rows(self.Hp)
        for c in range(a, e, step):
            d = min(e, c + step)
            if not self.filled:
                self.fill(c, d, self.memory[c:d], scale)
            if transpose_into(self.memory[c:d], out[c - a : d - a]):
                continue
            for p in range(c, d, small):  # numpy: smaller pieces
                q = min(d, p + small)
                np.copyto(out[p - a : q - a], self.memory[p:q])
        return out


def _run_lanes(
    n: int, rows: int, threads: int, work: Callable[[int, int, int, np.ndarray], None],
    width: int, order: str = "C", stride: int = 1,
) -> None:
    """Call ``work(lane, a, e, buf)`` for every ``stride``-th block ``[a, e)`` of ``rows``
    rows, the ``i``-th of them in lane ``i mod 16``; rounds of 16 blocks, each round's
    blocks on ``threads`` Python threads (one buffer per thread), lanes fed in block
    order."""
    nb = -(-n // (rows * stride))
    rows_step = rows * stride
    local = threading.local()

    def job(j: int) -> None:
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = np.empty((rows, width), order=order)
        a = j * rows_step
        work(j % _LANES, a, min(n, a + rows), buf)

    if threads <= 1 or nb <= 1:
        for j in range(nb):
            job(j)
        return
    with ThreadPoolExecutor(threads) as pool:
        for r0 in range(0, nb, _LANES):
            list(pool.map(job, range(r0, min(nb, r0 + _LANES))))


def _gram_pass(src: _Source, scale: float, threads: int, stride: int = 1) -> np.ndarray:
    """Pass 1: ``X^T X`` of ``X = [s Phi, 1]`` (H', H'), over every ``stride``-th block."""
    Hp = src.Hp
    acc = np.zeros((_LANES, Hp, Hp))
    full = stride == 1

    def work(lane: int, a: int, e: int, buf: np.ndarray) -> None:
        _syrk(src.pass1(a, e, buf, scale, full), acc[lane])

    _run_lanes(src.n, block_rows(Hp), threads, work, Hp, stride=stride)
    src.filled = src.memory is not None and full
    with np.errstate(over="ignore", invalid="ignore"):  # out of range: rescaled after
        return symmetric_from_lower(_lane_sum(acc))


def _syrk(X: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """``acc += X^T X`` on the lower triangle of ``acc`` (BLAS ``dsyrk``, :func:`cbdt._blas.
    syrk_add`); one named kernel, so ``benchmarks/bench_fit.py`` can time it."""
    return syrk_add(X, acc)


def _lane_sum(acc: np.ndarray) -> np.ndarray:
    out = acc[0].copy()
    for x in acc[1:]:
        out += x
    return out


def _q_pass(
    src: _Source, Rret: np.ndarray, R1: np.ndarray, scale: float, const: float, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    """Pass 2: ``Y = X diag(1, t) R_1^-1`` block by block (a triangular solve in cache);
    returns ``(Y^T Y, Y^T R_ret)``.

    Each block is written into a Fortran-ordered buffer ``[X_b, R_b]`` by the copy that
    reads it anyway (from the fit's copy of ``Phi``, or from ``Phi`` itself; it transposes
    on the way) and solved in place: by one right-side ``dtrsm``
    (:func:`cbdt._blas.trsm_right_upper`) for narrow memories, by the recursive solve
    (:func:`cbdt._blas.trsm_right_upper_recursive`) from :data:`RECURSIVE_TRSM_MIN`
    columns on. A C-ordered buffer would need no transposing copy, but its left-side
    ``dtrsm`` is slower than the copy it saves (measured, see
    :data:`RECURSIVE_TRSM_MIN`). One symmetric product of the buffer, added into its lane's
    accumulator by one ``dsyrk`` call (:func:`cbdt._blas.syrk_add`), gives both sums. On
    the way, the largest norm of its rows of ``s Phi`` is recorded in ``src.row_norms`` (one
    entry per block): the bounds the queries' exact ranking uses (:mod:`cbdt._ranking`),
    never recomputed per query. They are read off the Fortran-ordered block just written,
    before its solve, on every path: reading them off the fit's C-ordered copy instead
    (partly out of cache by then) took 0.040 s of CPU against 0.023 s (one thread, n = 1e6,
    H = 64), and whole default fits on two threads took 0.46-0.55 s against 0.42-0.43 s
    (medians of 7, three runs, the benchmark machine).
    """
    Hp, H = src.Hp, src.H
    A = Rret.shape[1]
    acc = np.zeros((_LANES, Hp + A, Hp + A))
    R1f = np.asfortranarray(R1)
    rows = block_rows(Hp)
    norms = np.zeros(-(-src.n // rows))
    solve = trsm_right_upper_recursive if Hp >= RECURSIVE_TRSM_MIN else trsm_right_upper

    def work(lane: int, a: int, e: int, buf: np.ndarray) -> None:
        # a full block, or the short last one (in a Fortran buffer of its own size, so that
        # its columns stay contiguous)
        B = buf[: e - a] if e - a == rows else np.empty((e - a, Hp + A), order="F")
        Wb = src.pass2(a, e, B[:, :Hp], scale)
        ss = _row_sq_norms(Wb[:, :H])
        top = float(ss.max()) if ss.size else 0.0
        norms[a // rows] = (math.sqrt(top) if 2.0**-960 < top < 2.0**960
                            else _max_row_norm(Wb[:, :H]))
        if src.intercept and const != 1.0:
            Wb[:, H] = const
        solve(R1f, Wb)  # Y R_1 = X in place on the Fortran block; GIL released
        B[:, Hp:] = Rret[a:e]
        _syrk(B, acc[lane])  # [Y, R_b]^T [Y, R_b] added into the lane: one product

    with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # checked after
        _run_lanes(src.n, rows, threads, work, Hp + A, order="F")
    src.filled = src.memory is not None
    src.row_norms = norms
    with np.errstate(over="ignore", invalid="ignore"):  # checked after
        S = symmetric_from_lower(_lane_sum(acc))
    return np.ascontiguousarray(S[:Hp, :Hp]), np.ascontiguousarray(S[:Hp, Hp:])


def _row_sq_norms(X: np.ndarray) -> np.ndarray:
    """Squared norms of the rows of ``X``, one ``einsum`` pass (in cache, as fast on pass 2's
    Fortran-ordered block as on a C-ordered one)."""
    return np.einsum("ch,ch->c", X, X)


def _max_row_norm(X: np.ndarray) -> float:
    from ._ranking import max_row_norm

    return max_row_norm(X)


# ---------------------------------------------------------------------- checks
def nonfinite_message(block: np.ndarray, a: int, e: int, start: int = 0) -> str | None:
    """The error message for the first non-finite entry of ``block`` (rows ``a..e`` of the
    data, ``start`` added to name absolute rows), or None if it is finite."""
    bad = ~np.isfinite(block)
    if not bad.any():
        return None
    rows, cols = np.nonzero(bad)
    r0, c0 = start + a + int(rows[0]), int(cols[0])
    return (
        f"Phi contains {int(bad.sum())} non-finite value(s) (NaN or inf) in rows "
        f"{start + a}-{start + e - 1}; the first is {float(block[rows[0], cols[0]])!r} at "
        f"index ({r0}, {c0}) (row {r0}, column {c0}). Training representations must be "
        "finite: check the network's features for these cases (a NaN input, an overflow) or "
        "drop the rows from Phi and R."
    )


def _max_abs(Phi: Any, chunk: int, start: int = 0) -> float:
    """``max |Phi|`` in one pass; raises :class:`InputError` at the first non-finite row."""
    n = Phi.shape[0]
    top = 0.0
    for a in range(0, n, chunk):
        e = min(n, a + chunk)
        blk = np.asarray(Phi[a:e], dtype=np.float64)
        msg = nonfinite_message(blk, a, e, start)
        if msg is not None:
            raise InputError(msg)
        if blk.size:
            top = max(top, float(np.abs(blk).max()))
    return top


def _rescale_for(max_abs: float) -> float:
    return 1.0 if max_abs == 0 else float(2.0 ** -np.round(np.log2(max_abs)))


def _needs_rescale(G: np.ndarray, H: int) -> bool:
    """The squares of the feature columns (``G``'s first ``H`` diagonal entries) are not
    finite, or their largest column sum is outside ``2^+-800`` (then ``Phi`` is rescaled by
    a power of two; the constant column does not count)."""
    d = np.diagonal(G)[:H]
    top = float(d.max()) if d.size else 0.0
    return not (np.all(np.isfinite(d)) and _SCALE_LO < top < _SCALE_HI)


def constant_coordinate(norms: np.ndarray, one: float) -> float:
    """Power of two for the constant coordinate: its column norm ``one`` balanced against
    the geometric mean of the feature columns' norms ``norms`` (zeros ignored). It leaves
    the exact solve unchanged; the minimum-norm solve of a rank-deficient memory depends on
    the coordinates and undoes it (:func:`min_norm_svd`)."""
    ok = norms > 0
    if not ok.any() or one == 0:
        return 1.0
    return float(2.0 ** np.round(float(np.mean(np.log2(norms[ok]))) - np.log2(one)))


def min_norm_svd(
    Rf: np.ndarray, rank: int, unbalance: float, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The minimum-norm solve of a rank-deficient memory in the user's coordinates, from the
    SVD of the triangular factor ``Rf`` of the balanced ``X_s = [s Phi, t 1]`` (or of that
    matrix over ridge rows, which are zero in the constant column).

    Balancing the constant column (:func:`constant_coordinate`) leaves :math:`\\alpha`
    unchanged at full column rank, but a minimum-norm least-squares solution depends on the
    coordinates. The one wanted is that of ``X_u = [s Phi, s 1]`` (a power of two times the
    user's ``[Phi, 1]``): :math:`\\alpha = \\Phi G^{+}\\varphi(x)`, the minimum-norm
    least-squares solution of :math:`[\\Phi, 1]^\\top\\beta = [\\varphi(x); 1]`, which
    ``np.linalg.lstsq`` computes. With ``X_s = X_u D``, ``D = diag(1, .., 1, 1/w)``, ``w =
    unbalance = s / t``, and the rank-``k`` SVD ``Rf = U_k S_k W_k^T`` (rank and subspaces
    decided in the balanced coordinates, where they are accurate), ``X_u^T = D^-1 W_k S_k
    V_k^T`` is a full-rank factorisation, so

    .. math:: \\alpha = V_k S_k^{-1} x, \\qquad
              x = \\arg\\min_x \\lVert D^{-1}(W_k x - b_s)\\rVert

    (``b_s = [s phi; t]``, the query in the fit's coordinates): a least-squares problem
    whose last row alone is weighted by ``w``. As ``W_k`` has orthonormal columns its
    solution is a rank-one correction of the balanced one, in closed form and without
    cancellation: with ``a = W_k[H]``, the null vectors ``W_0`` (the other right singular
    vectors), ``u = W_0 W_0[H]^T`` (the constant coordinate's component in the null space) and
    ``gamma = (w^2 - 1) / (w^2 |a|^2 + u_H)``, ``x = W_r^T b_s`` with ``W_r = W_k + gamma
    u a^T`` (evaluated so that nothing cancels as ``w`` grows or shrinks). Then ``z = W_k
    S_k^-2 W_r^T b_s`` (:math:`\\alpha = X_s z`) and the readout is ``W_r S_k^-1 U_k^T C``
    (in the fit's coordinates; Prop. 1 holds between the two).

    Where the null space does not involve the constant coordinate (dead units, duplicated
    units: ``u = 0``) both coordinates give the same solution, and ``W_r = W_k`` is the
    balanced one, as accurate as the balanced factor. ``u_H^(1/2)`` at most ``tol /
    s_k`` (``tol`` the rank tolerance of the singular values, ``s_k`` the smallest one
    kept: the accuracy of the computed null space) counts as zero. Otherwise the
    correction is the user-coordinate answer of the balanced rank-``k`` problem; no
    normal equations, no inverse formed.

    Returns
    -------
    U_k, s_k, W_k, W_r : ndarray
        ``(H', k)``, ``(k,)``, ``(H', k)``, ``(H', k)`` (``W_r is W_k`` when uncorrected).
    """
    U, sv, Wt = linalg.svd(Rf, check_finite=False)
    k = rank
    Uk, sk = U[:, :k], sv[:k]
    Wk = np.array(Wt[:k].T)
    if unbalance == 1.0 or k >= Rf.shape[1] or k == 0:
        return Uk, sk, Wk, Wk
    a = Wk[-1]  # the constant coordinate in the kept right singular vectors
    a0 = Wt[k:, -1]  # ... and in the null vectors
    d2 = float(a0 @ a0)
    if math.sqrt(d2) <= tol / float(sk[-1]):  # below what the rank decision resolves
        return Uk, sk, Wk, Wk
    u = Wt[k:].T @ a0  # the constant coordinate's projection on the null space
    a2 = float(a @ a)
    w = float(unbalance)
    if w >= 1.0:
        # rows < H: W_k (I - gamma a a^T) = W_k Z Z^T - c u a^T, with Z an orthonormal basis
        # of a's complement in R^k and c = 1/|a|^2 - gamma = w^-2 / (|a|^2 den): the part
        # along a, which tends to 0 as w grows, is formed without cancellation
        den = a2 + d2 * w**-2
        Z = np.linalg.qr(a[:, None], mode="complete")[0][:, 1:]
        Wr = (Wk @ Z) @ Z.T - (w**-2 / (a2 * den)) * np.outer(u, a)
        last = 1.0 / den
    else:
        # rows < H: W_k + gamma u a^T, gamma = (w^2 - 1) / (w^2 |a|^2 + u_H)
        den = w * w * a2 + d2
        Wr = Wk + ((w * w - 1.0) / den) * np.outer(u, a)
        last = w * w / den
    # the last row, a (1 + gamma u_H) = a w^2 / (w^2 |a|^2 + u_H), without the cancellation
    # of 1 + gamma u_H (w << 1: the constant coordinate's weight tends to 0)
    Wr[-1] = a * last
    return Uk, sk, Wk, Wr


# ---------------------------------------------------------------------- the factorisation
def factor_memory(
    Phi: Any,
    Rret: np.ndarray,
    *,
    kind: str,
    intercept: bool,
    chunk_size: int,
    threads: int,
    ridge_scaled: Callable[[float], np.ndarray | None] | None = None,
    householder: bool = False,
    sample: bool | None = None,
) -> MemoryFactor:
    """Factor ``X = [s Phi, t 1]`` by CholeskyQR2 (or 3), or by the Householder TSQR when
    that cannot be trusted (see the module docstring).

    ``ridge_scaled(s)`` gives the ridge rows for the scale ``s`` (they enter the choice of
    the constant coordinate ``t`` only). ``kind``: ``"array"`` (a float64 ndarray: the fit
    keeps a copy), ``"memmap"`` or ``"dask"``. ``householder=True`` skips CholeskyQR2 (its
    first pass still gives the scale, the constant coordinate and the copy). ``sample``:
    precondition from every :data:`SAMPLE_STRIDE`-th block (default: when there are at
    least :data:`SAMPLE_MIN_BLOCKS` blocks, not on dask).
    """
    from ._threads import single_threaded_blas

    n, H = Phi.shape
    Hp = H + int(intercept)
    if sample is None:
        sample = (not householder and kind != "dask"
                  and n >= SAMPLE_MIN_BLOCKS * block_rows(Hp))
    memory = np.empty((n, Hp)) if kind == "array" else None
    if memory is not None:
        # its pages mapped (and zeroed) by one call per thread, not faulted in between the
        # BLAS calls
        populate(memory, threads)
    src = None if kind == "dask" else _Source(Phi, intercept, memory)
    stride = SAMPLE_STRIDE if sample else 1
    # block kernels gain nothing from a BLAS pool (and its spinning threads cost): pinned
    pin = single_threaded_blas() if kind != "dask" else nullcontext()
    reads = 0.0
    scale = 1.0
    omega, reason = float("nan"), ""
    method = ""
    chunk_norms = None
    with pin:
        G1, frac = _gram(Phi, src, intercept, scale, threads, stride)
        reads += frac
        if _needs_rescale(G1, H):  # non-finite entries, or squares out of float64's range
            top = _max_abs_any(Phi, kind, chunk_size)  # raises at a non-finite row
            reads += 1
            scale = _rescale_for(top)
            if scale != 1.0:
                G1, frac = _gram(Phi, src, intercept, scale, threads, stride)
                reads += frac
        L = None if ridge_scaled is None else ridge_scaled(scale)
        const = 1.0
        if intercept:  # column norms (a sample's scaled to all n rows)
            d = np.sqrt(np.clip(np.diagonal(G1)[:H], 0.0, None))
            if L is not None:
                d = np.sqrt(d**2 + np.sum(L[:, :H] ** 2, axis=0))
            const = constant_coordinate(d, math.sqrt(n))
        R_pre, info = linalg.lapack.dpotrf(_balanced(G1, H, const), lower=0, clean=1)
        if info != 0 and stride > 1 and not householder:  # the sample is rank-deficient
            G1, frac = _gram(Phi, src, intercept, scale, threads, 1)
            reads += frac
            R_pre, info = linalg.lapack.dpotrf(_balanced(G1, H, const), lower=0, clean=1)
        if householder:
            info, reason = -1, "factorization='householder_tsqr' was asked for"
        elif info != 0:
            reason = (
                f"the Cholesky factorisation of Phi^T Phi failed at column {info} (Phi is "
                "rank-deficient or cond(Phi) exceeds about 1e8)"
            )
        for q in range(2 if info == 0 else 0):  # CholeskyQR2, then at most one more pass
            G2, CY, chunk_norms = _second(Phi, src, intercept, Rret, R_pre, scale, const,
                                          threads)
            reads += 1
            if not np.all(np.isfinite(G2)):  # a row outside the sample: locate or rescale
                _max_abs_any(Phi, kind, chunk_size)  # raises at a non-finite row
                if stride == 1:  # pragma: no cover - the full first pass saw every row
                    raise RuntimeError("non-finite Gram matrix of a finite, rescaled Phi")
                return factor_memory(Phi, Rret, kind=kind, intercept=intercept,
                                     chunk_size=chunk_size, threads=threads,
                                     ridge_scaled=ridge_scaled, sample=False)
            w = _loss(G2)
            if q == 0:
                omega = w
            R2, info2 = linalg.lapack.dpotrf(G2, lower=0, clean=1)
            if info2 != 0:
                reason = f"the Cholesky factorisation of Y^T Y failed (||Y^T Y - I||_2 = {w:.2g})"
                break
            if w <= OMEGA_MAX:
                R = np.triu(R2 @ R_pre)  # upper triangular times upper triangular
                C = linalg.solve_triangular(R2, CY, trans="T", check_finite=False)
                method = f"cholesky_qr{q + 2}"
                break
            R_pre = np.triu(R2 @ R_pre)  # a better preconditioner for one more pass
        else:
            if info == 0:
                reason = (
                    f"two passes left ||Y^T Y - I||_2 = {w:.2g} > {OMEGA_MAX} (cond(Phi) "
                    "too large for CholeskyQR)"
                )
    if method:
        if memory is not None:
            memory.setflags(write=False)
        return MemoryFactor(R, C, scale, const, method, omega, "", memory, reads,
                            None if src is None else src.row_norms, chunk_norms)
    # the guarded fallback: Householder TSQR of [s Phi, t 1, R_ret], read from the fit's
    # copy where it is filled (already scaled), else from Phi
    use_memory = src is not None and src.filled
    T = _householder(memory if use_memory else Phi, Rret, 1.0 if use_memory else scale,
                     const, intercept, chunk_size, threads, kind, from_memory=use_memory)
    reads += 1
    if memory is not None:
        if not use_memory:  # the copy the queries read
            _gram(Phi, src, intercept, scale, threads, 1)
        memory.setflags(write=False)
    return MemoryFactor(np.ascontiguousarray(T[:Hp, :Hp]), np.ascontiguousarray(T[:Hp, Hp:]),
                        scale, const, "householder_tsqr", omega, reason, memory, reads,
                        None if src is None else src.row_norms, chunk_norms)


def _loss(G2: np.ndarray) -> float:
    """``||G2 - I||_2`` from the eigenvalues of the symmetric ``G2`` (O(H^3), small)."""
    ev = np.linalg.eigvalsh(G2)
    return float(max(abs(ev[0] - 1.0), abs(ev[-1] - 1.0)))


def _balanced(G: np.ndarray, H: int, const: float) -> np.ndarray:
    """``G`` with the constant coordinate's row and column times ``const`` (exact)."""
    G = G.copy()
    if const != 1.0 and G.shape[0] > H:
        G[:, H] *= const
        G[H, :] *= const
    return G


def _max_abs_any(Phi: Any, kind: str, chunk: int) -> float:
    if kind != "dask":
        return _max_abs(Phi, chunk)
    import dask

    from ._ranking import row_blocks

    parts = [dask.delayed(_max_abs)(blk, max(1, o1 - o0), o0) for blk, o0, o1 in
             row_blocks(Phi)]
    return max(dask.compute(*parts), default=0.0)


def _gram(Phi: Any, src: _Source | None, intercept: bool, scale: float, threads: int,
          stride: int) -> tuple[np.ndarray, float]:
    """Pass 1 and the fraction of the rows it read."""
    if src is not None:
        G = _gram_pass(src, scale, threads, stride)
        if stride == 1:
            return G, 1.0
        rows = block_rows(src.Hp)
        starts = np.arange(0, src.n, rows * stride)
        frac = int(np.minimum(rows, src.n - starts).sum()) / src.n
        return G / frac, frac  # the sample's Gram matrix, scaled to all n rows
    import dask

    from ._ranking import row_blocks

    parts = [dask.delayed(_chunk_gram)(blk, intercept, scale) for blk, _, _ in row_blocks(Phi)]
    return _lane_sum(np.stack(dask.compute(*parts))), 1.0


def _chunk_gram(block: Any, intercept: bool, scale: float) -> np.ndarray:
    """Pass 1 on one dask chunk, on a worker."""
    return _gram_pass(_Source(np.asarray(block), intercept, None), scale, 1)


def _second(Phi: Any, src: _Source | None, intercept: bool, Rret: np.ndarray,
            R1: np.ndarray, scale: float, const: float, threads: int
            ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray] | None]:
    """Pass 2: ``(Y^T Y, Y^T R_ret, per-chunk row-norm maxima on dask, else None)``."""
    if src is not None:
        return (*_q_pass(src, Rret, R1, scale, const, threads), None)
    import dask

    from ._ranking import row_blocks

    R1d = dask.delayed(R1)
    parts = [
        dask.delayed(_chunk_q)(blk, np.ascontiguousarray(Rret[o0:o1]), R1d, intercept, scale,
                               const)
        for blk, o0, o1 in row_blocks(Phi)
    ]
    done = dask.compute(*parts)
    return (_lane_sum(np.stack([g for g, _, _ in done])),
            _lane_sum(np.stack([c for _, c, _ in done])), [z for _, _, z in done])


def _chunk_q(block: Any, Rb: np.ndarray, R1: np.ndarray, intercept: bool, scale: float,
             const: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pass 2 on one dask chunk, on a worker; with the largest row norm of ``s Phi`` per
    block of :func:`block_rows` rows of the chunk (the queries' bounds, kept by the fit)."""
    src = _Source(np.asarray(block), intercept, None)
    G, C = _q_pass(src, Rb, R1, scale, const, 1)
    return G, C, src.row_norms


# ---------------------------------------------------------------------- Householder TSQR
def qr_r(X: np.ndarray) -> np.ndarray:
    """Upper-triangular factor R of a QR of ``X`` (p x q, p >= q), shape (q, q)."""
    A = np.asfortranarray(X, dtype=np.float64)  # overwritten (as is X if it is one)
    if not A.flags.writeable:
        A = A.copy(order="F")
    return geqrf_r(A)


def _chunk_r(
    block: Any, Rb: np.ndarray, scale: float, const: float, intercept: bool,
    T: np.ndarray | None, start: int,
) -> np.ndarray:
    """Fold the rows ``[scale * block, const, Rb]`` into the triangular factor ``T``
    (``_TSQR_ROWS`` rows at a time: a QR small enough to stay in cache). The first fold
    stacks the rows on p zero rows, so the factor is square even with fewer rows than
    columns. ``block`` is a float64 copy already scaled when read from the fit's memory."""
    b, H = block.shape
    Hp = H + int(intercept)
    p = Hp + Rb.shape[1]
    if T is None:
        T = np.zeros((p, p))
    step = max(_TSQR_ROWS, 2 * p)  # at large H, more rows per fold
    buf = np.empty((p + min(step, b), p), order="F")
    for s in range(0, b, step):
        e = min(b, s + step)
        X = buf if e - s == step or b < step else np.empty((p + e - s, p), order="F")
        X[:p] = T
        Xb = X[p:]
        np.copyto(Xb[:, :H], block[s:e, :H], casting="unsafe")
        msg = nonfinite_message(Xb[:, :H], s, e, start)
        if msg is not None:
            raise InputError(msg)
        if scale != 1.0:
            Xb[:, :H] *= scale
        if intercept:
            Xb[:, H] = const
        Xb[:, Hp:] = Rb[s:e]
        T = qr_r(X)
    return T


def _householder(
    Phi: Any, Rret: np.ndarray, scale: float, const: float, intercept: bool, chunk: int,
    threads: int, kind: str, *, from_memory: bool = False,
) -> np.ndarray:
    """Householder TSQR of ``[s Phi, t 1, R_ret]``: each thread folds its share of every
    chunk into a factor of its own, and the factors are stacked and reduced by one QR (a
    reduction tree of depth two); a dask ``Phi`` is folded per chunk on the workers."""
    if kind == "dask":
        import dask

        from ._ranking import row_blocks

        parts = [dask.delayed(_chunk_r)(blk, Rret[o0:o1], scale, const, intercept, None, o0)
                 for blk, o0, o1 in row_blocks(Phi)]
        return qr_r(np.vstack(dask.compute(*parts)))
    n = Phi.shape[0]
    H = Phi.shape[1] - int(from_memory and intercept)
    view = Phi[:, :H] if from_memory else Phi
    p = H + int(intercept) + Rret.shape[1]
    small = p <= 256  # small folds: one per Python thread (BLAS already pinned)
    t = max(1, min(threads, n // (4 * _TSQR_ROWS))) if small else 1
    Ts: list[np.ndarray | None] = [None] * t

    def fold(j: int, a: int, b: int) -> None:
        if b > a:
            Ts[j] = _chunk_r(view[a:b], Rret[a:b], scale, const, intercept, Ts[j], a)

    from ._threads import single_threaded_blas

    # large folds (wide H) are level-3 work that BLAS's own threads share better
    with single_threaded_blas() if small else nullcontext():
        if t == 1:
            for start in range(0, n, chunk):
                fold(0, start, min(n, start + chunk))
        else:
            with ThreadPoolExecutor(t) as pool:
                for start in range(0, n, chunk):
                    stop = min(n, start + chunk)
                    cut = np.linspace(start, stop, t + 1).round().astype(int)
                    list(pool.map(fold, range(t), cut[:-1], cut[1:]))
        done = [T for T in Ts if T is not None]
        return done[0] if len(done) == 1 else qr_r(np.vstack(done))
