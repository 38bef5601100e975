"""Solution variability over any count program: how far the most distant consistent population
lies from a reconstruction (Abowd et al.; methods.md section 3), written once for persons and for
any schema.

A block's histogram over some keys (persons: sex x agebin38 x race x origin; any schema: its
types, or coarser ones) is ``y = G x`` for a solution ``x`` of the tables' count program, and the
reconstruction's is ``c``. Since the block's total is published, the L1 distance of two histograms
is twice the units one of them lacks, so the distance is measured as the largest *shortfall*::

    solvar_b = 100 * max_x sum_k (c_k - y_k)^+ / N_b

:func:`max_shortfall` poses that maximisation on a program built once (:class:`Extensible`);
:func:`search_shortfall` gives CP-SAT a first try and hands what it cannot close to HiGHS;
:func:`hold_forms` and :func:`drop_fixed` fix the blocks already proven unique and remove what
they fix, so the searches for the others carry only the rest. Person certification
(:mod:`tabrecon.attacks.certify`) and the count model over any schema
(:mod:`tabrecon.attacks.unit_reconstruct`) both measure distances with these functions.

>>> import scipy.sparse as sp
>>> from tabrecon.attacks.solvers import IntProgram, SolverOptions
>>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1]])), lo=np.array([3]), hi=np.array([3]),
...                ub=np.array([3, 3, 3]))
>>> G = sp.identity(3, format="csr", dtype=np.int64)   # the keys are the variables
>>> search_shortfall(p, G, np.array([2, 1, 0]), np.array([3, 3, 3]), SolverOptions(), False)
(3, 3, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from .solvers import Extensible, IntProgram, SolverOptions

#: Seconds CP-SAT gets on a block's distance before HiGHS takes it over (solver ``auto`` only).
ESCALATE_AFTER = 1.0


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
    relaxation so weak that 1,000-person blocks timed out)."""
    n, nx = c.size, G.shape[1]
    Mk = ymax - c
    eye = sp.identity(n, format="csr", dtype=np.int64)
    r1 = sp.hstack([sp.csr_matrix((n, nx), dtype=np.int64), eye, -sp.diags(c, dtype=np.int64)])
    r2 = sp.hstack([G, eye, sp.diags(Mk, dtype=np.int64)])
    cobj = np.concatenate(
        [np.zeros(nx, dtype=np.int64), np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)]
    )
    sol = ext.solve(
        2 * n,
        np.concatenate([c, np.ones(n, dtype=np.int64)]),
        sp.vstack([r1, r2]).tocsr(),
        np.concatenate([np.full(n, -int(c.max()), dtype=np.int64), np.zeros(n, dtype=np.int64)]),
        np.concatenate([np.zeros(n, dtype=np.int64), c + Mk]),
        c=cobj,
        maximize=True,
    )
    lo = int(round(sol.objective)) if sol.objective is not None else 0
    hi = int(np.floor(sol.bound + 1e-6)) if sol.bound is not None else int(c.sum())
    x = sol.x[:nx] if sol.x is not None else None  # a feasible population, even on a time-out
    return lo, hi, sol.status == "optimal", x


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


#: A block's state in :func:`zero_test`.
UNKNOWN, UNIQUE, VARIES, UNDECIDED = 0, 1, 2, 3


def zero_test(
    base: Extensible,
    G: sp.csr_matrix,
    c: np.ndarray,
    ymax: np.ndarray,
    key_block: np.ndarray,
    state: np.ndarray,
    lower: np.ndarray,
    seconds: float | None = None,
) -> int:
    """Which blocks have exactly one consistent histogram, in as few proofs as possible: every
    block still ``UNKNOWN`` in ``state`` is decided in place (``UNIQUE``, ``VARIES`` with its
    shortfall in that population as ``lower``, or ``UNDECIDED`` when a proof stops at the
    solver's limit or ``seconds`` run out). Returns the number of proofs run.

    Each key ``k`` (``G_k x``, of block ``key_block[k]``) with ``c_k > 0`` gets a binary that
    forces ``G_k x <= c_k - 1`` (big-M from ``ymax``), and one of them must hold: infeasible
    proves every block unique (each block's total is published, so a different histogram lacks
    some unit of it); a solution names blocks that differ, which are set aside, and the test
    repeats on the rest.

    >>> from tabrecon.attacks.solvers import IntProgram, SolverOptions
    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])),
    ...                lo=np.array([2, 1, 1]), hi=np.array([2, 1, 1]), ub=np.array([2, 2, 1, 1]))
    >>> G = sp.identity(4, format="csr", dtype=np.int64)  # block 0: x0, x1; block 1: x2, x3
    >>> state, lower = np.zeros(2, dtype=np.int8), np.zeros(2, dtype=np.int64)
    >>> zero_test(Extensible(p, SolverOptions()), G, np.array([1, 1, 1, 1]), np.array([2, 2, 1, 1]),
    ...           np.array([0, 0, 1, 1]), state, lower)
    2
    >>> state.tolist(), lower.tolist()
    ([2, 1], [1, 0])
    """
    nb = state.size
    n_vars = base.prog.n_vars
    t0 = time.perf_counter()
    proofs = 0
    while (state == UNKNOWN).any():
        left = None if seconds is None else seconds - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            state[state == UNKNOWN] = UNDECIDED
            break
        act = np.flatnonzero((c > 0) & (state[key_block] == UNKNOWN))
        if not act.size:  # no key can fall below its count: nothing can differ
            state[state == UNKNOWN] = UNIQUE
            break
        M = ymax[act] - c[act] + 1  # z = 0 leaves y_k <= ymax_k, which always holds
        na = act.size
        rows = sp.hstack(
            [G[act], sp.csr_matrix((M, (np.arange(na), np.arange(na))), shape=(na, na))]
        )
        srow = sp.hstack(
            [
                sp.csr_matrix((1, n_vars), dtype=np.int64),
                sp.csr_matrix(np.ones((1, na), dtype=np.int64)),
            ]
        )
        sol = base.solve(
            na,
            np.ones(na, dtype=np.int64),
            sp.vstack([rows, srow]).tocsr(),
            np.concatenate([np.zeros(na, dtype=np.int64), [1]]),
            np.concatenate([c[act] - 1 + M, [na]]),
            time_limit=left,
        )
        proofs += 1
        if sol.status == "infeasible":
            state[state == UNKNOWN] = UNIQUE
            break
        if not sol.has_solution or sol.x is None:
            state[state == UNKNOWN] = UNDECIDED
            break
        y = G @ sol.x[:n_vars]
        deficit = np.maximum(c - y, 0)
        per_block = np.bincount(key_block, weights=deficit, minlength=nb).astype(np.int64)
        newly = (state == UNKNOWN) & (per_block > 0)
        if not newly.any():  # cannot happen: sum z >= 1 forces a deficit; a solver slip
            state[state == UNKNOWN] = UNDECIDED
            break
        state[newly] = VARIES
        lower[newly] = per_block[newly]
    return proofs


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
