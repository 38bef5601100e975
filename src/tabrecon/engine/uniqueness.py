"""The zero test: which blocks of a count program have exactly one consistent histogram, decided
in as few proofs as possible (Abowd et al.'s solution variability zero; methods.md section 3).

:func:`zero_test` marks each block of a program ``UNIQUE``, ``VARIES`` (with the shortfall of a
population found as its lower bound) or ``UNDECIDED``; :func:`tabrecon.engine.variability.
block_variability` runs it first and searches distances only for the blocks that vary.

>>> import scipy.sparse as sp
>>> from tabrecon.engine.proofs import Extensible
>>> from tabrecon.engine.solvers import IntProgram, SolverOptions
>>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([1]), hi=np.array([1]),
...                ub=np.array([1, 1]))
>>> state, lower = np.zeros(1, dtype=np.int8), np.zeros(1, dtype=np.int64)
>>> zero_test(Extensible(p, SolverOptions()), sp.identity(2, format="csr", dtype=np.int64),
...           np.array([1, 0]), np.array([1, 1]), np.array([0, 0]), state, lower)
1
>>> state.tolist() == [VARIES]
True
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..vocab import SolveStatus
from .proofs import Extensible

#: A block's state in :func:`zero_test`.
UNKNOWN, UNIQUE, VARIES, UNDECIDED = 0, 1, 2, 3


#: CP-SAT's deterministic time (about seconds) a zero-test proof spends making as many keys
#: fall as it can before taking the best population found: each proof then sets aside many
#: differing blocks instead of one or two (synthetic 100,000 persons at block+tract: 45 proofs
#: instead of 153). Deterministic, so the same run gives the same proofs on any machine.
#: None: one proof asks only for some key to fall (as before 2026-11-27; a benchmark's baseline).
SPREAD_WORK: float | None = 0.3


def differing(
    G: sp.csr_matrix,
    c: np.ndarray,
    key_block: np.ndarray,
    x: np.ndarray,
    state: np.ndarray,
    lower: np.ndarray,
) -> bool:
    """Sets aside the blocks still ``UNKNOWN`` in ``state`` that lack some unit of theirs in
    population ``x`` (a solution of the program): ``VARIES``, their shortfall in it a lower
    bound in ``lower``. Whether any was.

    >>> state, lower = np.zeros(2, dtype=np.int8), np.zeros(2, dtype=np.int64)
    >>> differing(sp.identity(2, format="csr"), np.array([1, 1]), np.array([0, 1]),
    ...           np.array([0, 1]), state, lower), state.tolist(), lower.tolist()
    (True, [2, 0], [1, 0])
    """
    deficit = np.maximum(c - G @ x, 0)
    per_block = np.bincount(key_block, weights=deficit, minlength=state.size).astype(np.int64)
    newly = (state == UNKNOWN) & (per_block > 0)
    state[newly] = VARIES
    lower[newly] = per_block[newly]
    return bool(newly.any())


def zero_test(
    base: Extensible,
    G: sp.csr_matrix,
    c: np.ndarray,
    ymax: np.ndarray,
    key_block: np.ndarray,
    state: np.ndarray,
    lower: np.ndarray,
    *,
    seconds: float | None = None,
    vertices: bool = False,
) -> int:
    """Which blocks have exactly one consistent histogram, in as few proofs as possible: every
    block still ``UNKNOWN`` in ``state`` is decided in place (``UNIQUE``, ``VARIES`` with its
    shortfall in that population as ``lower``, or ``UNDECIDED`` when a proof stops at the
    solver's limit or ``seconds`` run out). Returns the number of proofs run.

    Each key ``k`` (``G_k x``, of block ``key_block[k]``) with ``c_k > 0`` gets a binary that
    forces ``G_k x <= c_k - 1`` (big-M from ``ymax``), and one of them must hold: infeasible
    proves every block unique (each block's total is published, so a different histogram lacks
    some unit of it); a solution names blocks that differ, which are set aside, and the test
    repeats on the rest. On CP-SAT, while more than one block is open, each proof asks for the
    population in which the most keys fall, within :data:`SPREAD_WORK` of deterministic time
    (then, if it found none, for any), so that one proof sets many blocks aside. With
    ``vertices``, vertices of the linear relaxation do the same before any proof, where they are
    integer (:data:`ZERO_VERTICES`).

    >>> from tabrecon.engine.solvers import IntProgram, SolverOptions
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
    n_vars = base.prog.n_vars
    t0 = time.perf_counter()
    proofs = 0

    def set_aside(x: np.ndarray) -> bool:
        return differing(G, c, key_block, x, state, lower)

    while vertices and (state == UNKNOWN).any():
        act = np.flatnonzero((c > 0) & (state[key_block] == UNKNOWN))
        x = base.relaxation.vertex(np.asarray(G[act].sum(axis=0)).ravel()) if act.size else None
        if x is None or not set_aside(x):  # a vertex of the base program: its variables only
            break
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
        ask = (
            na,
            np.ones(na, dtype=np.int64),
            sp.vstack([rows, srow]).tocsr(),
            np.concatenate([np.zeros(na, dtype=np.int64), [1]]),
            np.concatenate([c[act] - 1 + M, [na]]),
        )
        sol = None
        spread = SPREAD_WORK is not None and base.on_cpsat and (state == UNKNOWN).sum() > 1
        if spread:  # as many keys falling as it can
            gain = np.concatenate([np.zeros(n_vars, dtype=np.int64), np.ones(na, dtype=np.int64)])
            sol = base.solve(*ask, c=gain, maximize=True, time_limit=left, work_limit=SPREAD_WORK)
            if sol.x is None and sol.status != SolveStatus.INFEASIBLE:  # none found within its work
                left = None if seconds is None else seconds - (time.perf_counter() - t0)
                sol = None if left is not None and left <= 0 else base.solve(*ask, time_limit=left)
        else:
            sol = base.solve(*ask, time_limit=left)
        proofs += 1
        if sol is None:  # the time given ran out in the spread search
            state[state == UNKNOWN] = UNDECIDED
            break
        if sol.status == SolveStatus.INFEASIBLE:
            state[state == UNKNOWN] = UNIQUE
            break
        if sol.x is None:
            state[state == UNKNOWN] = UNDECIDED
            break
        if not set_aside(sol.x[:n_vars]):  # cannot happen: sum z >= 1 forces a deficit
            state[state == UNKNOWN] = UNDECIDED  # a solver slip
            break
    return proofs
