"""Solution variability over any count program: how far the most distant consistent population
lies from a reconstruction (Abowd et al.; methods.md section 3), written once for persons and for
any schema.

A block's histogram over some keys (persons: sex x agebin38 x race x origin; any schema: its
types, or coarser ones) is ``y = G x`` for a solution ``x`` of the tables' count program, and the
reconstruction's is ``c``. Since the block's total is published, the L1 distance of two histograms
is twice the units one of them lacks, so the distance is measured as the largest *shortfall*::

    solvar_b = 100 * max_x sum_k (c_k - y_k)^+ / N_b

:func:`max_shortfall` poses that maximisation on a program built once
(:class:`~tabrecon.engine.proofs.Extensible`); :func:`search_shortfall` gives CP-SAT a first try
and hands what it cannot close to HiGHS; :func:`hold_forms` and :func:`drop_fixed` fix the blocks
already proven unique and remove what they fix, so the searches for the others carry only the
rest.

:func:`block_variability` is certification itself, over any count program whose blocks' totals
are fixed: one presolve (:func:`presolved`), the zero test
(:func:`tabrecon.engine.uniqueness.zero_test`: which blocks have one histogram, in a few proofs)
and the distances of the others (:func:`distances`). Person certification
(:mod:`tabrecon.attacks.certify`) and the count model over any schema
(:mod:`tabrecon.engine.reconstruct`) both call it; what each adds is only its program and
the keys its blocks are measured on (:class:`Counts`).

>>> import scipy.sparse as sp
>>> from tabrecon.engine.solvers import IntProgram, SolverOptions
>>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1]])), lo=np.array([3]), hi=np.array([3]),
...                ub=np.array([3, 3, 3]))
>>> G = sp.identity(3, format="csr", dtype=np.int64)   # the keys are the variables
>>> search_shortfall(p, G, np.array([2, 1, 0]), np.array([3, 3, 3]), SolverOptions(), False)
(3, 3, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..vocab import SolveStatus
from .proofs import Extensible, Relaxation
from .solvers import IntProgram, SolverOptions, tighten
from .uniqueness import UNIQUE, UNKNOWN, VARIES, differing, zero_test

#: Seconds CP-SAT gets on a block's distance before HiGHS takes it over (solver ``auto`` only).
ESCALATE_AFTER = 1.0
#: Seconds for a block's own-rows bound when the blocks are coupled (it is only a bound).
OWN_ROWS_LIMIT = 0.2
#: CP-SAT's linearization level in certification: 2 (every constraint in its LP relaxation)
#: against its default 1 made the zero test's proofs 40% faster (synthetic 100,000-person state,
#: 10 tracts at block+tract: 1.96 -> 1.17 s; the distances 3.02 -> 2.79 s), the same verdicts.
#: None: CP-SAT's default (a benchmark's baseline).
LINEARIZATION: int | None = 2
#: Whether CP-SAT adds certification's rows to its LP relaxation lazily, as they are violated
#: (its default), or all at once. At once, the 82 distance searches of 100 tracts of a
#: 1,000,096-person state took 4.67-4.76 CPU s against 5.52-5.69 (the searches replayed alone, the
#: same bounds), the zero test and the own-rows maxima the same, certification 14.2-14.4 ->
#: 13.3-13.7 CPU s in the audit's run. True: CP-SAT's default (a benchmark's baseline).
LP_LAZY = False


def capped(opts: SolverOptions, seconds: float) -> SolverOptions:
    """``opts`` with its time limit lowered to ``seconds`` (never raised)."""
    return replace(opts, time_limit=min(opts.time_limit or math.inf, seconds))


def max_shortfall(
    ext: Extensible, G: sp.csr_matrix, c: np.ndarray, ymax: np.ndarray
) -> tuple[int, int, bool, np.ndarray | None]:
    """Largest ``sum_k (c_k - y_k)^+`` over keys with ``c_k > 0`` (``G`` maps the program's
    variables to those keys' counts ``y``; ``ymax`` bounds each key's count in any solution):
    (lower, upper, proven, the population found or None).

    d_k <= c_k w_k ;  d_k + y_k + M_k w_k <= c_k + M_k ;  maximise sum d, with M_k = ymax_k - c_k
    (w_k = 0 then leaves y_k <= ymax_k, which always holds; the block's population as M made the
    relaxation so weak that 1,000-person blocks timed out). A key that can never exceed its count
    (``M_k = 0``) falls short by exactly ``c_k - y_k``: it enters the objective as that linear
    form, with no ``d_k``, ``w_k`` or rows (80% of the keys of the varying blocks on 30 tracts
    of a 1,000,096-person state; their own-rows maximum then took 1.51 CPU s against 1.79, the
    median of three runs each, the same bounds).

    >>> from tabrecon.engine.solvers import IntProgram, SolverOptions
    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1]])), lo=np.array([2]), hi=np.array([2]),
    ...                ub=np.array([2, 2, 2]))
    >>> G = sp.identity(3, format="csr", dtype=np.int64)
    >>> c, ymax = np.array([1, 1, 0]), np.array([2, 1, 2])   # key 1 never exceeds its count
    >>> max_shortfall(Extensible(p, SolverOptions()), G, c, ymax)[:3]
    (2, 2, True)
    """
    nx = G.shape[1]
    ex = _Shortfall.of(G, c, ymax)
    sol = ext.solve(ex.n_new, ex.new_ub, ex.rows, ex.lo, ex.hi, c=ex.objective, maximize=True)
    x = sol.x[:nx] if sol.x is not None else None  # a feasible population, even on a time-out
    lo = int(np.maximum(c - G @ x, 0).sum()) if x is not None else 0
    if sol.bound is not None:
        hi = ex.base + int(np.floor(sol.bound + 1e-6))
    else:
        hi = lo if ex.objective is None and x is not None else int(c.sum())
    return lo, hi, sol.status == SolveStatus.OPTIMAL, x


@dataclass(frozen=True)
class _Shortfall:
    """:func:`max_shortfall`'s extension of a program: ``n_new`` variables (``d`` then ``w``,
    bounds 0..``new_ub``), ``rows`` (``lo <= rows @ [x, d, w] <= hi``) and the ``objective``
    (None where every population falls short by ``base``), whose value plus ``base`` is the
    shortfall. ``over``: the keys that may exceed their count (the others are linear)."""

    base: int
    over: np.ndarray
    n_new: int
    new_ub: np.ndarray
    rows: sp.csr_matrix
    lo: np.ndarray
    hi: np.ndarray
    objective: np.ndarray | None

    @classmethod
    def of(cls, G: sp.csr_matrix, c: np.ndarray, ymax: np.ndarray) -> _Shortfall:
        """The extension for keys with forms ``G``, counts ``c`` and bounds ``ymax``. Its rows
        are written straight into CSR arrays, in the order stacking the blocks would give
        (``d_k - c_k w_k``, then ``G_k x + d_k + M_k w_k``, per key): 0.55 ms against 3.4 for
        stacking identity and diagonal matrices with scipy, on the 82 searches of 100 tracts of
        a 1,000,096-person state (the same rows), where certification builds hundreds."""
        G = sp.csr_matrix(G)
        under = ymax <= c
        base = int(c[under].sum())
        gain = -np.asarray(G.T @ under.astype(np.int64), dtype=np.int64).ravel()
        over = np.flatnonzero(~under)
        Go, c, Mk = G[over], c[over], ymax[over] - c[over]
        n = c.size
        cobj = np.concatenate([gain, np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)])
        constant = n == 0 and not gain.any()  # every population falls short by ``base``
        return cls(
            base=base,
            over=over,
            n_new=2 * n,
            new_ub=np.concatenate([c, np.ones(n, dtype=np.int64)]),
            rows=_shortfall_rows(Go, c, Mk),
            lo=np.concatenate(
                [np.full(n, -int(c.max(initial=0)), dtype=np.int64), np.zeros(n, dtype=np.int64)]
            ),
            hi=np.concatenate([np.zeros(n, dtype=np.int64), c + Mk]),
            objective=None if constant else cobj,
        )


def _shortfall_rows(G: sp.csr_matrix, c: np.ndarray, M: np.ndarray) -> sp.csr_matrix:
    """The rows over ``[x, d, w]`` (``G``: the keys' forms over ``x``): ``d_k - c_k w_k`` for
    every key, then ``G_k x + d_k + M_k w_k``, each row's entries in column order.

    >>> G = sp.csr_matrix(np.array([[1, 0, 2], [0, 1, 0]]))
    >>> _shortfall_rows(G, np.array([3, 1]), np.array([2, 5])).toarray()
    array([[ 0,  0,  0,  1,  0, -3,  0],
           [ 0,  0,  0,  0,  1,  0, -1],
           [ 1,  0,  2,  1,  0,  2,  0],
           [ 0,  1,  0,  0,  1,  0,  5]])
    """
    n, nx = G.shape
    i = np.arange(n, dtype=np.int64)
    nnz = np.diff(G.indptr)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate([np.full(n, 2), nnz + 2]))])
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    data = np.empty(int(indptr[-1]), dtype=np.int64)
    first, second = indptr[:n], indptr[n:-1]  # where each row of the two halves starts
    indices[first], indices[first + 1] = nx + i, nx + n + i
    data[first], data[first + 1] = 1, -np.asarray(c, dtype=np.int64)
    at = np.repeat(second - G.indptr[:-1], nnz) + np.arange(G.indptr[-1])
    indices[at], data[at] = G.indices, G.data
    end = second + nnz
    indices[end], indices[end + 1] = nx + i, nx + n + i
    data[end], data[end + 1] = 1, M
    return sp.csr_matrix((data, indices, indptr), shape=(2 * n, nx + 2 * n))


def search_shortfall(
    prog: IntProgram,
    G: sp.csr_matrix,
    c: np.ndarray,
    ymax: np.ndarray,
    opts: SolverOptions,
    escalate: bool,
    cpsat: Extensible | None = None,
) -> tuple[int, int, bool]:
    """A block's largest shortfall on ``prog``: (lower, upper, proven). CP-SAT (``opts``, or the
    given extensible model) first; with ``escalate``, a maximum it has not proven within
    :data:`ESCALATE_AFTER` seconds goes to HiGHS, whose LP bounds close what CP-SAT's search
    cannot (seen: a 1,716-person block's 112 proven in 2 s by HiGHS, 220 s by CP-SAT), and the
    two runs' bounds are combined."""
    ext = cpsat or Extensible(prog, capped(opts, ESCALATE_AFTER) if escalate else opts)
    lo, hi, exact, _ = max_shortfall(ext, G, c, ymax)
    if exact or not escalate:
        return lo, hi, exact
    lo2, hi2, exact2, _ = max_shortfall(
        Extensible(prog, replace(opts, backend="highs")), G, c, ymax
    )
    lo, hi = max(lo, lo2), min(hi, hi2)
    return lo, hi, exact2 or lo >= hi


#: Before its proofs, the zero test of a tract's program sets aside the blocks that differ in
#: vertices of its linear relaxation, each counting the open blocks' keys least (integer, a
#: vertex is a population): a vertex costs a few milliseconds, a proof tens (30 tracts of a
#: 1,000,096-person state: the zero test 1.7 -> 0.5 CPU s). Not on a block's own program
#: (housing units at block level, 8,000 persons: 98-100 s without, 103 with: the relaxation's
#: build is not repaid). False: proofs alone (a benchmark's baseline).
ZERO_VERTICES = True
#: Whether certification's relaxations (the zero test's and the distances') run HiGHS' presolve
#: before their first optimum, the only one solved from scratch. On 30 tracts of a 1,000,096-
#: person state those 60 first optima took 0.56 CPU s without it against 1.04 with it (median
#: of three), and their vertices differ: 24 searches instead of 26, the zero test 1.18 ->
#: 0.75-0.95 CPU s, the distances 4.65 -> 3.3-4.2 (four runs), every verdict, solvar and
#: bound equal.
#: True: as before (a benchmark's baseline).
LP_PRESOLVE = False


def hold_forms(prog: IntProgram, G: sp.csr_matrix, c: np.ndarray, held: np.ndarray) -> IntProgram:
    """``prog`` with every form ``G_k x`` for which ``held`` is true fixed at ``c_k``: a form of
    one variable by its bounds, a form of several (single ages in a bin) by an equality row.
    Exact when those forms take their values in every solution (the keys of blocks proven
    unique)."""
    Gf = G[np.flatnonzero(held)].tocsr()
    cf = c[held]
    nvar = np.diff(Gf.indptr)
    lb = np.zeros(prog.n_vars, dtype=np.int64) if prog.lb is None else prog.lb.astype(np.int64)
    ub = prog.ub.astype(np.int64).copy()
    single = np.flatnonzero(nvar == 1)
    v = Gf.indices[Gf.indptr[single]]
    lb[v] = ub[v] = cf[single]
    zero = np.flatnonzero((nvar > 1) & (cf == 0))
    ub[Gf[zero].indices] = 0
    multi = np.flatnonzero((nvar > 1) & (cf > 0))
    return IntProgram(
        A=sp.vstack([prog.A, Gf[multi]]).tocsr(),
        lo=np.concatenate([prog.lo, cf[multi]]),
        hi=np.concatenate([prog.hi, cf[multi]]),
        ub=ub,
        lb=lb,
    )


def drop_fixed(prog: IntProgram) -> tuple[IntProgram, np.ndarray, np.ndarray]:
    """``prog`` without its fixed variables (lb == ub; their values moved into the row bounds)
    and without the rows left empty, with the kept variables' and rows' indices. Cloning and
    presolving the smaller program is what each per-block search pays for."""
    lb = np.zeros(prog.n_vars, dtype=np.int64) if prog.lb is None else prog.lb.astype(np.int64)
    ub = prog.ub.astype(np.int64)
    fixed = lb == ub
    keep = np.flatnonzero(~fixed)
    A = prog.A.tocsc()
    shift = np.asarray(A[:, np.flatnonzero(fixed)] @ lb[fixed]).ravel()
    Ak = A[:, keep].tocsr()
    rows = np.flatnonzero(np.diff(Ak.indptr) > 0)
    return (
        IntProgram(
            A=Ak[rows],
            lo=prog.lo[rows] - shift[rows],
            hi=prog.hi[rows] - shift[rows],
            ub=ub[keep],
            lb=lb[keep],
        ),
        keep,
        rows,
    )


@dataclass(frozen=True)
class Counts:
    """A count program and the histograms its blocks are measured on: key ``k``'s count is
    ``y0_k + G_k x`` for a solution ``x`` of ``prog``, the reconstruction's is ``y0_k + c_k``
    (``y0``: the part presolve fixed; zero until :func:`presolved`), and ``ymax_k - y0_k`` bounds
    it in any solution. ``key_block``, ``var_block`` and ``row_block`` give each key's, variable's
    and row's block (-1: a variable or row of no one block, such as a tract's)."""

    prog: IntProgram
    G: sp.csr_matrix
    c: np.ndarray
    ymax: np.ndarray
    key_block: np.ndarray
    var_block: np.ndarray
    row_block: np.ndarray
    N: np.ndarray  # each block's units in the reconstruction

    @classmethod
    def of(
        cls,
        prog: IntProgram,
        G: sp.csr_matrix,
        c: np.ndarray,
        key_block: np.ndarray,
        var_block: np.ndarray,
        nb: int,
        row_block: np.ndarray | None = None,
    ) -> Counts:
        """The counts of a reconstruction ``c`` (per key of ``G``) on ``prog``; each key's bound
        is the largest count its variables' bounds allow, at most its block's total (the big-M of
        every search: the block's population instead made the LP relaxation so weak that
        1,000-person blocks timed out at 120 s; with these bounds they are proven in 0.1 s).
        ``row_block`` defaults to the block of the variables a row holds (-1 when they are of
        several blocks or of none)."""
        c = np.asarray(c, dtype=np.int64)
        N = np.bincount(key_block, weights=c, minlength=nb).astype(np.int64)
        ymax = np.minimum(np.asarray(G @ prog.ub.astype(np.int64)).ravel(), N[key_block])
        if row_block is None:
            row_block = rows_block(prog.A, var_block)
        return cls(prog, G.tocsr(), c, np.maximum(ymax, c), key_block, var_block, row_block, N)


def rows_block(A: sp.spmatrix, var_block: np.ndarray) -> np.ndarray:
    """Each row's block: the block of every variable it holds, -1 when they are of several
    blocks or of none (a tract's rows)."""
    A = sp.csr_matrix(A)
    n = A.shape[0]
    row_of = np.repeat(np.arange(n), np.diff(A.indptr))
    vb = var_block[A.indices].astype(np.int64)
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, -2, dtype=np.int64)
    np.minimum.at(lo, row_of, vb)
    np.maximum.at(hi, row_of, vb)
    return np.where((lo == hi) & (lo >= 0), lo, -1)


def presolved(cp: Counts, base: Extensible | None = None) -> Counts:
    """``cp`` without the variables every consistent population shares (:func:`tighten`,
    CP-SAT's presolve alone), counts measured from the fixed part ``y0``: key ``k``'s deficit
    ``(c_k - y_k)^+`` becomes ``(c_k - y0_k - G_k x)^+``. On 30 tracts (126,790 persons) of the
    synthetic 10-million-person state presolve fixes 83% of the binned tract programs' variables
    (2.3 s); every proof and search used to presolve them again (certification 38.9 -> 17.5
    core-s there, the same bounds for every block).

    ``cp`` is returned unchanged when presolve fails or its bounds would exclude the
    reconstruction (which satisfies the tables): a guard, never expected to fire. ``base``: a
    model of ``cp.prog`` already built, presolved from a clone of it, or not at all where its
    own solve kept the bounds (:class:`~tabrecon.engine.proofs.Extensible`'s ``keep_bounds``: a
    tract's reconstruction,
    whose certification then costs no presolve: 30 tracts of a 1,000,096-person state, 1.6 of
    8.4 CPU s)."""
    prog, G, c = cp.prog, cp.G, cp.c
    bounds = base.tighten() if base is not None and base.prog is prog else tighten(prog)
    if bounds is None:
        return cp
    lb, ub = bounds
    lb = np.maximum(lb, 0 if prog.lb is None else prog.lb)
    ub = np.minimum(ub, prog.ub)
    if (lb > ub).any():
        return cp
    reduced, kept, rows = drop_fixed(replace(prog, lb=lb, ub=ub))
    fixed = np.ones(prog.n_vars, dtype=bool)
    fixed[kept] = False
    y0 = np.asarray(G[:, np.flatnonzero(fixed)] @ lb[fixed]).ravel().astype(np.int64)
    Gk = G[:, kept].tocsr()
    free = np.diff(Gk.indptr) > 0
    # the reconstruction's counts must lie in the bounds: at least y0, exactly y0 when fixed
    if (c < y0).any() or (c[~free] != y0[~free]).any():
        return cp
    ytop = np.minimum(cp.ymax, np.asarray(G @ ub).ravel().astype(np.int64))
    return replace(
        cp,
        prog=reduced,
        G=Gk,
        c=c - y0,
        ymax=np.maximum(ytop, c) - y0,
        var_block=cp.var_block[kept],
        row_block=cp.row_block[rows],
    )


def distances(
    cp: Counts,
    state: np.ndarray,
    lower: np.ndarray,
    opts: SolverOptions,
    coupled: bool,
    escalate: bool,
) -> np.ndarray:
    """The largest shortfall of every block ``state`` marks ``VARIES``: raises ``lower`` in place
    and returns each block's upper bound (0 for unique blocks, the block's total before any
    search). A block is proven where the two meet.

    1. Each varying block on its own rows and variables: exact when the blocks are independent
       (``coupled`` false: a block's search is the whole question), an upper bound when rows such
       as a tract's couple them. As a bound it gets :data:`OWN_ROWS_LIMIT` seconds: a large block
       alone can be far harder than with its tract (seen: 1,758 persons, 60 s alone for bounds
       104..145; 0.25 s with the tract to the proven 59), and any bound it reaches is valid.
    2. Coupled only: the program with every unique block held at its counts (exact: it has no
       other histogram) and what that fixes removed; the vertex of its relaxation that counts
       the open blocks' keys least gives each a lower bound (its shortfall in that population,
       where the vertex is integer), which closes the blocks whose own-rows bound it meets;
       then each open block's own-rows population extended to the whole program
       (:func:`_complete`, :data:`COMPLETE`), which closes it where it extends; then 3. one
       search per block whose bounds still do not meet. (An ascent over the relaxation's
       vertices before each search closed 61 of the 284 blocks left on the 1,000,096-person
       state, but cost 3.3-3.6 CPU s against 0.3-2.1 s for those 61 searches: removed.)"""
    p, G, c, ymax, key_block = cp.prog, cp.G, cp.c, cp.ymax, cp.key_block
    nb = state.size
    upper = np.where(state == UNIQUE, 0, cp.N).astype(np.int64)
    varying = np.flatnonzero(state == VARIES)
    if not varying.size:
        return upper

    def keys_of(bs: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.isin(key_block, bs) & (c > 0))

    own_opts = capped(opts, OWN_ROWS_LIMIT) if coupled else opts
    todo = varying
    own = None
    if varying.size > 1:  # every varying block on its own rows at once (see _own_rows_at_once)
        # as long as the blocks' own searches could take in all (coupled: OWN_ROWS_LIMIT each)
        own = _own_rows_at_once(cp, varying, capped(opts, OWN_ROWS_LIMIT * varying.size))
        if own is not None:
            got = own[0]
            upper[varying] = np.minimum(upper[varying], got)
            if not coupled:  # each block's own search is the whole question: exact
                lower[varying] = np.maximum(lower[varying], got)
            todo = varying[:0]
    for b in todo:
        kb = keys_of(np.array([b]))
        vs = np.flatnonzero(cp.var_block == b)
        rs = np.flatnonzero(cp.row_block == b)
        sub = IntProgram(
            A=p.A[rs][:, vs].tocsr(),
            lo=p.lo[rs],
            hi=p.hi[rs],
            ub=p.ub[vs],
            lb=None if p.lb is None else p.lb[vs],
        )
        if not coupled:  # the exact search
            lo_b, hi_b, exact = search_shortfall(sub, G[kb][:, vs], c[kb], ymax[kb], opts, escalate)
            lower[b] = max(lower[b], lo_b)
            upper[b] = lower[b] if exact else min(upper[b], hi_b)
        else:
            _, hi_b, _, _ = max_shortfall(Extensible(sub, own_opts), G[kb][:, vs], c[kb], ymax[kb])
            upper[b] = min(upper[b], hi_b)
    if coupled:
        reduced, kept, _ = drop_fixed(hold_forms(p, G, c, (state == UNIQUE)[key_block]))
        shared = Extensible(
            reduced, capped(opts, ESCALATE_AFTER) if escalate else opts, lp_presolve=LP_PRESOLVE
        )
        Gk = G[:, kept].tocsr()
        is_open = np.zeros(nb, dtype=bool)
        is_open[varying] = lower[varying] < upper[varying]
        # the relaxation's vertex that counts every open block's keys least: integer, it is a
        # population, and each block's shortfall in it a lower bound
        ka = keys_of(np.flatnonzero(is_open))
        x = shared.relaxation.vertex(np.asarray(Gk[ka].sum(axis=0)).ravel()) if ka.size else None
        if x is not None:
            _raise(cp, Gk, x, is_open, lower, upper)
        if COMPLETE and own is not None and is_open.any():
            _complete(shared.relaxation, own, kept, cp, Gk, is_open, lower, upper)
        for b in np.flatnonzero(is_open):
            kb = keys_of(np.array([b]))
            lo_b, hi_b, exact = search_shortfall(
                reduced, Gk[kb], c[kb], ymax[kb], opts, escalate, cpsat=shared
            )
            lower[b] = max(lower[b], lo_b)
            upper[b] = lower[b] if exact else min(upper[b], hi_b)
    return upper


def _raise(
    cp: Counts,
    Gk: sp.csr_matrix,
    x: np.ndarray,
    is_open: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> None:
    """The population ``x`` (of the program whose keys' forms are ``Gk``): each open block's
    shortfall in it is a lower bound of its largest; a block whose bound it meets is proven
    (``lower``, ``upper`` and ``is_open`` updated in place)."""
    nb = is_open.size
    got = np.bincount(cp.key_block, weights=np.maximum(cp.c - Gk @ x, 0), minlength=nb)
    lower[is_open] = np.maximum(lower[is_open], got[is_open].astype(np.int64))
    closed = is_open & (lower >= upper)
    upper[closed] = lower[closed]
    is_open &= ~closed


#: In :func:`distances` (coupled), before each open block's search: its own-rows maximum (a
#: population of the block alone, at the block's upper bound) extended to the whole program
#: by a vertex of the relaxation with the block's variables fixed; integer, it is a population
#: that meets the bound, and the block is proven. On 30 tracts of a 1,000,096-person state:
#: 132 of 153 blocks closed so, 48 -> 24 CP-SAT searches, certification 5.5 -> 3.9 CPU s.
#: False: the searches alone (a benchmark's baseline).
COMPLETE = True


def _complete(
    rel: Relaxation,
    own: tuple[np.ndarray, np.ndarray, np.ndarray],
    kept: np.ndarray,
    cp: Counts,
    Gk: sp.csr_matrix,
    is_open: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> None:
    """Close open blocks at their own-rows bound: for each block ``is_open`` marks, the
    population :func:`_own_rows_at_once` found for it on its own rows (``own``: the
    per-block bounds, ``cp.prog``'s columns and their values) fixed in the relaxation ``rel``
    of the reduced program (whose columns are ``cp.prog``'s ``kept``; ``Gk``: the keys' forms
    over them), and a vertex sought. An integer vertex is a population of the whole program:
    every open block's shortfall in it is a lower bound, and a block whose bound it meets is
    proven (``lower``, ``upper`` and ``is_open`` updated in place)."""
    _, cols, x = own
    pos = np.minimum(np.searchsorted(kept, cols), max(kept.size - 1, 0))
    inside = kept[pos] == cols if kept.size else np.zeros(cols.size, dtype=bool)
    vb = cp.var_block[cols]
    zero = np.zeros(kept.size)
    for b in np.flatnonzero(is_open):
        if not is_open[b]:  # closed by an earlier block's population
            continue
        sel = inside & (vb == b)
        y = rel.vertex_fixing(pos[sel], x[sel], zero)
        if y is not None:
            _raise(cp, Gk, y, is_open, lower, upper)


#: :func:`_own_rows_at_once` takes each block's bound from the linear relaxation first, where
#: its optimum is an integer population that meets it (2,488 of 2,726 varying blocks on 100
#: tracts of a 1,000,096-person state), and asks CP-SAT only for the others. False: CP-SAT for
#: every block (a benchmark's baseline).
OWN_ROWS_LP = True


def _own_rows_at_once(
    cp: Counts, blocks: np.ndarray, opts: SolverOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each of ``blocks``' largest shortfall on its own rows and variables (what
    :func:`distances` asks of every varying block first), from one maximisation of their sum:
    the blocks' programs share nothing, so an optimal sum is every block at its own maximum.
    Returns the per-block maxima, the columns of ``cp.prog`` they cover and a population on
    them that reaches every maximum; None when CP-SAT's sum is not proven optimal within
    ``opts``' time (the blocks are then searched one by one, as before). One model instead of
    one per block: a 100,000-person state's 268 varying blocks in 10 tracts built 305 models.

    With :data:`OWN_ROWS_LP`, the sum's linear relaxation comes first: it too is optimal block
    by block, so each block's part of its optimum bounds the block's maximum, and a block whose
    part is an integer population (checked row by row) falling short by that bound's floor is
    settled by it. CP-SAT then maximises the sum over the other blocks only.

    >>> from tabrecon.engine.solvers import IntProgram, SolverOptions
    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]])),
    ...                lo=np.array([2, 1]), hi=np.array([2, 1]), ub=np.array([2, 2, 1, 1]))
    >>> G = sp.identity(4, format="csr", dtype=np.int64)  # block 0: x0, x1; block 1: x2, x3
    >>> cp = Counts.of(p, G, np.array([1, 1, 1, 0]), np.array([0, 0, 1, 1]),
    ...                np.array([0, 0, 1, 1]), 2)
    >>> _own_rows_at_once(cp, np.array([0, 1]), SolverOptions())[0].tolist()
    [1, 1]
    """
    own = _Own.of(cp, blocks)
    n = cp.N.size
    settled = np.zeros(n, dtype=bool)
    x = np.zeros(own.cols.size, dtype=np.int64)
    if OWN_ROWS_LP and blocks.size:
        settled, x = _own_rows_relaxed(cp, own)
    rest = blocks[~settled[blocks]]
    if rest.size:
        r = _Own.of(cp, rest)
        _lo, _hi, proven, xr = max_shortfall(
            Extensible(r.prog, opts), r.G, cp.c[r.keys], cp.ymax[r.keys]
        )
        if not proven or xr is None:
            return None
        x[np.searchsorted(own.cols, r.cols)] = xr
    short = np.maximum(cp.c[own.keys] - own.G @ x, 0)
    per_block = np.bincount(cp.key_block[own.keys], weights=short, minlength=n)
    return per_block[blocks].astype(np.int64), own.cols, x


@dataclass(frozen=True)
class _Own:
    """Some blocks' own rows and variables of a program as one program (``prog``): the columns
    of the program it keeps (``cols``), the block of each of its rows (``row_block``), the
    blocks' keys with a positive count (``keys``) and their forms over ``cols`` (``G``)."""

    prog: IntProgram
    cols: np.ndarray
    row_block: np.ndarray
    keys: np.ndarray
    G: sp.csr_matrix

    @classmethod
    def of(cls, cp: Counts, blocks: np.ndarray) -> _Own:
        p, G = cp.prog, cp.G.tocsr()
        vb, rb = cp.var_block, cp.row_block
        mine = np.zeros(cp.N.size, dtype=bool)
        mine[blocks] = True
        rows = np.flatnonzero((rb >= 0) & mine[np.maximum(rb, 0)])
        cols = np.flatnonzero((vb >= 0) & mine[np.maximum(vb, 0)])
        keys = np.flatnonzero(mine[cp.key_block] & (cp.c > 0))

        def own(M: sp.csr_matrix, of_row: np.ndarray) -> sp.csr_matrix:
            """``M``'s entries in a column of the row's own block, over ``cols``."""
            M = M.tocoo()
            keep = vb[M.col] == of_row[M.row]
            at = np.searchsorted(cols, M.col[keep])
            return sp.csr_matrix(
                (M.data[keep], (M.row[keep], at)), shape=(M.shape[0], cols.size), dtype=np.int64
            )

        sub = IntProgram(
            A=own(p.A[rows], rb[rows]),
            lo=p.lo[rows],
            hi=p.hi[rows],
            ub=p.ub[cols],
            lb=None if p.lb is None else p.lb[cols],
        )
        return cls(sub, cols, rb[rows], keys, own(G[keys], cp.key_block[keys]))


def _own_rows_relaxed(cp: Counts, own: _Own) -> tuple[np.ndarray, np.ndarray]:
    """Which blocks (a mask over ``cp``'s) the linear relaxation of :func:`max_shortfall`'s
    program on ``own`` settles, and its optimum rounded (the settled blocks' populations).

    A block's part of the optimum (its linear keys' shortfall and its other keys' ``d``) bounds
    its maximum, the floor taken with :attr:`Relaxation.TOL`; its part of the rounded optimum,
    when integer within that tolerance and within its rows and bounds (checked exactly), is a
    population of its own, whose shortfall, where it meets the bound, is the maximum."""
    n = cp.N.size
    settled = np.zeros(n, dtype=bool)
    nx = own.cols.size
    ck = cp.c[own.keys]
    ex = _Shortfall.of(own.G, ck, cp.ymax[own.keys])
    if ex.objective is None:  # every population falls short alike: CP-SAT says by how much
        return settled, np.zeros(nx, dtype=np.int64)
    relaxed = own.prog.extended(ex.n_new, ex.new_ub, ex.rows, ex.lo, ex.hi)
    z = Relaxation(relaxed, presolve=LP_PRESOLVE).optimum(ex.objective, maximize=True)
    if z is None:
        return settled, np.zeros(nx, dtype=np.int64)
    x, tol = z[:nx], Relaxation.TOL
    xi = np.rint(x).astype(np.int64)
    kb = cp.key_block[own.keys]
    under = np.ones(ck.size, dtype=bool)
    under[ex.over] = False
    linear = np.where(under, ck - own.G @ x, 0.0)
    d = np.zeros(ck.size)
    d[ex.over] = z[nx : nx + ex.over.size]
    bound = np.floor(np.bincount(kb, weights=linear + d, minlength=n) + tol)
    # the rounded optimum, block by block: integer, in its bounds, every own row met
    vb = cp.var_block[own.cols]
    lb = np.zeros(nx, dtype=np.int64) if own.prog.lb is None else own.prog.lb
    bad_col = (np.abs(x - xi) > tol) | (xi < lb) | (xi > own.prog.ub)
    ax = own.prog.A @ xi
    bad_row = (ax < own.prog.lo) | (ax > own.prog.hi)
    ok = np.ones(n, dtype=bool)
    ok[vb[bad_col]] = False
    ok[own.row_block[bad_row]] = False
    got = np.bincount(kb, weights=np.maximum(ck - own.G @ xi, 0), minlength=n)
    settled = ok & (got >= bound) & (np.bincount(kb, minlength=n) > 0)
    return settled, xi


@dataclass
class BlockVariability:
    """Certification's answer for each block of one program: ``state`` (``UNIQUE``, ``VARIES``
    or ``UNDECIDED``), the shortfall's bounds in units (``lower`` .. ``upper``; solvar is
    ``100 * shortfall / N``), whether it is proven, and what it took."""

    state: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    N: np.ndarray
    proofs: int
    seconds_zero_test: float
    seconds_distance: float

    @property
    def proven(self) -> np.ndarray:
        """Blocks whose shortfall is known exactly (unique ones: 0)."""
        return (self.state == UNIQUE) | ((self.state == VARIES) & (self.lower >= self.upper))

    def percent(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(solvar, lower, upper) in percent of each block's units; solvar is NaN where
        unproven (an empty block is 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            lo = np.where(self.N > 0, 100.0 * self.lower / self.N, 0.0)
            hi = np.where(self.N > 0, 100.0 * self.upper / self.N, 0.0)
        return np.where(self.proven, lo, np.nan), lo, hi


def block_variability(
    cp: Counts,
    opts: SolverOptions,
    coupled: bool,
    *,
    distance: bool = True,
    distance_time_limit: float | None = None,
    escalate: bool = False,
    zero_seconds: float | None = None,
    presolve: bool = True,
    base: Extensible | None = None,
    second: np.ndarray | None = None,
) -> BlockVariability:
    """Certification over any count program whose blocks' totals are fixed (module docstring):
    presolve once, decide every block by the zero test, then, with ``distance``, measure the
    shortfall of those that vary (each search stopped at ``distance_time_limit`` seconds when
    given, keeping its bounds). ``coupled``: rows tie the blocks together (tract tables);
    ``escalate``: a distance CP-SAT has not proven within :data:`ESCALATE_AFTER` seconds goes to
    HiGHS; ``zero_seconds`` bounds the zero test's time (blocks it leaves are ``UNDECIDED``).

    ``presolve`` pays where the tables fix most of a program and more than one solve follows:
    a tract's program, presolved before its first proof (30 tracts of a 1,000,096-person state:
    83% of the variables fixed; the first proof on the program as given cost 80 ms a tract, on
    the presolved one 16; certification 9.6 -> 8.4 CPU s; the real sample's 28 tracts: presolve
    fixes every block's histogram, 0.18 s where the first proof took 0.29). A block's own
    program, with one proof or two, is better left as it is (housing units at block level,
    4,000 persons: 54-64 s without, 98-101 s with). ``base``, the caller's model of ``cp.prog``
    already built (with its own options), is presolved from a clone, or without ``presolve``
    runs the zero test's proofs, instead of a new model. ``second``, another solution of
    ``cp.prog`` known beforehand (:func:`tabrecon.engine.twins.moved`), sets aside the blocks it
    differs in before any of this; presolve and the zero test run only if a block is left.

    >>> from tabrecon.engine.solvers import IntProgram, SolverOptions
    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 0]])),
    ...                lo=np.array([2, 1, 1]), hi=np.array([2, 1, 1]), ub=np.array([2, 2, 1, 1]))
    >>> G = sp.identity(4, format="csr", dtype=np.int64)  # block 0: x0, x1; block 1: x2, x3
    >>> cp = Counts.of(p, G, np.array([1, 1, 1, 0]), np.array([0, 0, 1, 1]),
    ...                np.array([0, 0, 1, 1]), 2)
    >>> v = block_variability(cp, SolverOptions(), coupled=False)
    >>> v.state.tolist(), v.lower.tolist(), v.proven.tolist()
    ([2, 1], [1, 0], [True, True])
    >>> v.percent()[0].tolist()   # block 0 can lose one of its two units: solvar 50%
    [50.0, 0.0]
    """
    # each search is small: presolve was most of it. Every constraint in CP-SAT's LP
    # (:data:`LINEARIZATION`), from the start (:data:`LP_LAZY`), makes its proofs cheaper
    opts = replace(opts, presolve="light", linearization=LINEARIZATION, lp_lazy=LP_LAZY)
    if base is not None and base.on_cpsat:
        base = base.using(replace(base.opts, linearization=LINEARIZATION, lp_lazy=LP_LAZY))
    nb = cp.N.size
    state = np.zeros(nb, dtype=np.int8)
    lower = np.zeros(nb, dtype=np.int64)
    state[cp.N == 0] = UNIQUE
    if second is not None:  # a population known to differ: no proof owed for its blocks
        differing(cp.G, cp.c, cp.key_block, second, state, lower)
    t0 = time.perf_counter()
    spent = 0.0  # presolve's time: neither the zero test's figure nor its budget
    proofs = 0
    if presolve and ((state == UNKNOWN).any() or (distance and (state == VARIES).any())):
        reduced = presolved(cp, base)
        if reduced is not cp:
            cp, base = reduced, None
        spent = time.perf_counter() - t0
    # a block none of whose keys can fall below its count cannot differ at all
    state[(np.bincount(cp.key_block[cp.c > 0], minlength=nb) == 0) & (state == UNKNOWN)] = UNIQUE
    if (state == UNKNOWN).any():
        proofs = zero_test(
            base or Extensible(cp.prog, opts, lp_presolve=LP_PRESOLVE),
            cp.G,
            cp.c,
            cp.ymax,
            cp.key_block,
            state,
            lower,
            seconds=zero_seconds,
            vertices=ZERO_VERTICES and coupled,
        )
    t1 = time.perf_counter()
    upper = np.where(state == UNIQUE, 0, cp.N).astype(np.int64)
    if distance and (state == VARIES).any():
        dopts = opts if distance_time_limit is None else capped(opts, distance_time_limit)
        upper = distances(cp, state, lower, dopts, coupled, escalate)
    return BlockVariability(
        state, lower, upper, cp.N, proofs, t1 - t0 - spent, time.perf_counter() - t1
    )
