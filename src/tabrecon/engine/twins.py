"""Twin variables: columns of a count program that no row tells apart.

Two variables are twins when they have the same coefficient in every row (persons at block
level: one sex, race and origin at two single ages of one published age bin, or two of the 57
combinations of two or more races that no table splits). A program's twins matter twice:

- **Its solve** (:func:`solve_merged`): the program with each group of twins as one variable,
  bounded by the sum of their bounds, has exactly the solutions' sums, and any of its solutions
  deals back into a solution of the program (each member up to its bound). On dense city blocks
  it has a twentieth of the variables and is solved in a fortieth of the time.
- **A proof that a block varies** (:func:`moved`): a solution with a unit on one twin and room on
  another of a different key gives a second solution, one unit moved, whose histogram differs.
  Certification then owes no solver call for that block.

>>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1], [0, 0, 1]])), lo=np.array([3, 1]),
...                hi=np.array([3, 1]), ub=np.array([2, 2, 1]))
>>> twin_groups(p.A).tolist()
[0, 0, 1]
>>> sol = solve_merged(p, SolverOptions(backend="highs"))
>>> sol.x.tolist(), p.satisfied_by(sol.x)
([2, 0, 1], True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..vocab import SolveStatus
from .solvers import IntProgram, Solution, SolverOptions, solve


def _keys(A: sp.spmatrix, masks: list[np.ndarray]) -> list[np.ndarray]:
    """Each column's signature on the rows each mask keeps, as one complex number: two random
    projections with integer weights below 2**31 (float sums of count coefficients stay exact).
    Equal columns always get equal keys; two unequal ones one chance in about 2**62. One
    sparse product for every mask."""
    A = sp.csr_matrix(A)
    rng = np.random.default_rng(0x7717)
    W = rng.integers(1, 1 << 31, size=(A.shape[0], 2)).astype(np.float64)
    P = np.asarray(A.T @ np.hstack([W * m[:, None] for m in masks]))
    return [P[:, 2 * i] + 1j * P[:, 2 * i + 1] for i in range(len(masks))]


def _groups(key: np.ndarray) -> np.ndarray:
    """Each column's group by its key, numbered in the order the groups' first columns come."""
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[group.reshape(-1)].astype(np.int64)


def twin_groups(A: sp.spmatrix) -> np.ndarray:
    """Each column's group: columns of one group are equal, entry for entry (empty columns form a
    group too), up to a chance of about 2**-62 a pair (:func:`_keys`); every use checks what it
    makes of them against the program, so a collision costs time, never a wrong answer.

    >>> twin_groups(sp.csr_matrix(np.array([[1, 0, 1, 2], [1, 1, 1, 1]]))).tolist()
    [0, 1, 0, 2]
    """
    if A.shape[1] == 0:
        return np.zeros(0, dtype=np.int64)
    return _groups(_keys(A, [np.ones(A.shape[0])])[0])


#: The share of a program's variables merging must leave at most for the merged program to be
#: solved instead: where twins are few, the program's own solve is kept, since a tract's solve on
#: CP-SAT also keeps the bounds its certification reads (:class:`~tabrecon.engine.proofs.
#: Extensible`). Full SF1 tables leave 19,868 of 19,880 variables (a synthetic 20,000-person
#: county at block+tract); P1, P5 and P12A-G on dense city blocks leave 3.7% at block level,
#: 22-25% at block+tract.
MERGE_BELOW = 0.75


def merge(prog: IntProgram) -> tuple[IntProgram, np.ndarray] | None:
    """``prog`` with each group of twins one variable (its bounds the sums of theirs) and each
    variable's group; None when merging leaves more than :data:`MERGE_BELOW` of the variables
    or when an objective or lower bounds would tell twins apart (the merged program is only
    for finding a solution).

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1]])), lo=np.array([3]),
    ...                hi=np.array([3]), ub=np.array([1, 1, 5]))
    >>> q, g = merge(p)
    >>> q.n_vars, q.ub.tolist(), g.tolist()
    (1, [7], [0, 0, 0])
    """
    if prog.c is not None or (prog.lb is not None and (prog.lb != 0).any()):
        return None
    group = twin_groups(prog.A)
    ng = int(group.max()) + 1 if group.size else 0
    if ng > MERGE_BELOW * prog.n_vars:
        return None
    first = np.full(ng, -1, dtype=np.int64)
    first[group[::-1]] = np.arange(prog.n_vars, dtype=np.int64)[::-1]
    ub = np.bincount(group, weights=prog.ub, minlength=ng).astype(np.int64)
    A = sp.csc_matrix(prog.A)[:, first].tocsr()
    return IntProgram(A=A, lo=prog.lo, hi=prog.hi, ub=ub), group


def deal(y: np.ndarray, group: np.ndarray, ub: np.ndarray) -> np.ndarray:
    """A merged solution ``y`` dealt back to the twins: each group's count to its members in
    order, each up to its bound ``ub`` (the merged bound is their sum, so it always fits).

    >>> deal(np.array([3, 1]), np.array([0, 0, 1]), np.array([2, 2, 1])).tolist()
    [2, 1, 1]
    """
    order = np.argsort(group, kind="stable")
    g, cap = group[order], ub[order].astype(np.int64)
    # the capacity of the members before each one in its group
    before = np.cumsum(cap) - cap
    starts = np.searchsorted(g, np.arange(y.size))
    before -= before[starts[g]]
    x_sorted = np.clip(y[g] - before, 0, cap)
    x = np.empty_like(x_sorted)
    x[order] = x_sorted
    return x


def solve_merged(
    prog: IntProgram, opts: SolverOptions, fallback: Callable[[], Solution] | None = None
) -> Solution:
    """A solution of ``prog`` found on its twins merged (:func:`merge`) and dealt back, checked
    against ``prog``; ``prog`` itself is solved where nothing merges, where the merged program has
    no solution (the proof of infeasibility is then the program's own) or where the dealt point
    fails the check (a backend's tolerance): by ``fallback`` when given (a model of ``prog``
    already built), else by :func:`~tabrecon.engine.solvers.solve` with ``opts``.

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([5]), hi=np.array([5]),
    ...                ub=np.array([2, 2]))
    >>> solve_merged(p, SolverOptions()).status.value
    'infeasible'
    """
    own = fallback or (lambda: solve(prog, opts))
    merged = merge(prog)
    if merged is None:
        return own()
    q, group = merged
    sol = solve(q, opts)
    if sol.x is not None and sol.has_solution:
        x = deal(sol.x[: q.n_vars], group, prog.ub)
        if prog.satisfied_by(x):
            return replace(sol, x=x, status=SolveStatus.OPTIMAL)
    return own()


def moved(
    prog: IntProgram,
    x: np.ndarray,
    G: sp.spmatrix,
    var_block: np.ndarray,
    row_block: np.ndarray | None = None,
) -> np.ndarray | None:
    """A second solution of ``prog`` whose histogram differs in as many blocks as cheap moves
    reach; None where none does. ``G``'s rows are the keys a block's histogram counts (each
    variable of a block in one of them), ``var_block`` each variable's block (-1: a tract's).

    1. In each block, a unit moved from a twin ``x`` holds to a twin of another key with room:
       equal columns, so every row keeps its value.
    2. With ``row_block`` (each row's block, -1 for a row of several: a tract's), in a block left
       over, a unit moved between two variables equal on the block's own rows (ages of one
       published bin), balanced by the opposite move in another block of the tract, so the
       shared rows keep their values too (:func:`_swaps`).

    The result is checked against ``prog`` (None if it failed: a proof is never taken on trust).

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]])),
    ...                lo=np.array([1, 1]), hi=np.array([1, 1]), ub=np.array([1, 1, 1, 0]))
    >>> moved(p, np.array([1, 0, 1, 0]), sp.identity(4, format="csr"), np.array([0, 0, 1, 1]))
    array([0, 1, 1, 0])
    """
    x = np.asarray(x, dtype=np.int64)[: prog.n_vars]
    G = sp.csc_matrix(G, dtype=np.int64)
    # a variable's key: the one form of its block that counts it (none for a tract's variable)
    one = (np.diff(G.indptr) == 1) & (var_block >= 0)
    key = np.full(prog.n_vars, -1, dtype=np.int64)
    key[one] = G.indices[G.indptr[:-1][one]]
    lb = np.zeros(prog.n_vars, dtype=np.int64) if prog.lb is None else prog.lb
    room = _Room(x=x.copy(), lb=lb, ub=prog.ub, key=key, usable=one)
    shared = (row_block < 0) if row_block is not None else np.zeros(prog.n_rows, dtype=bool)
    k_own, k_shared = _keys(prog.A, [(~shared).astype(np.float64), shared.astype(np.float64)])
    _twin_moves(room, _groups(k_own + k_shared), var_block)
    if shared.any():
        _swaps(room, _groups(k_own), _groups(k_shared), var_block)
    if not room.moved:
        return None
    return room.x if prog.satisfied_by(room.x) else None


@dataclass
class _Room:
    """A population being moved: its counts, bounds, keys, the variables a move may use, and
    the blocks moved so far."""

    x: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    key: np.ndarray
    usable: np.ndarray
    moved: set[int] = field(default_factory=set)


def _twin_moves(room: _Room, group: np.ndarray, var_block: np.ndarray) -> None:
    """Step 1 of :func:`moved`: in each block, one unit from a twin to a twin of another key."""
    x, key = room.x, room.key
    give, take = room.usable & (x > room.lb), room.usable & (x < room.ub)
    if not give.any() or not take.any():
        return
    pair = _in_block(group, var_block)  # twins of one block
    gi, gmin, gmax = _key_range(np.flatnonzero(give), pair, key)
    ti, tmin, tmax = _key_range(np.flatnonzero(take), pair, key)
    _both, at_g, at_t = np.intersect1d(gi, ti, return_indices=True)
    # a giver's key and a taker's differ unless both hold one key alone
    lo_g, hi_g, lo_t, hi_t = gmin[at_g], gmax[at_g], tmin[at_t], tmax[at_t]
    use_lo = key[lo_g] != key[hi_t]
    use_hi = ~use_lo & (key[hi_g] != key[lo_t])
    ok = use_lo | use_hi
    i = np.where(use_lo, lo_g, hi_g)[ok]
    j = np.where(use_lo, hi_t, lo_t)[ok]
    _, first = np.unique(var_block[i], return_index=True)  # one move a block
    np.subtract.at(x, i[first], 1)
    np.add.at(x, j[first], 1)
    room.moved.update(var_block[i[first]].tolist())


def _in_block(group: np.ndarray, var_block: np.ndarray) -> np.ndarray:
    """Each variable's group within its block (one id per group and block; -1: no block)."""
    return group * (int(var_block.max()) + 2) + var_block + 1


def _key_range(
    idx: np.ndarray, pair: np.ndarray, key: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the variables ``idx``, each twin pair-group's id (sorted), and the variable holding
    its smallest and its largest key."""
    order = idx[np.lexsort((key[idx], pair[idx]))]
    ids, first = np.unique(pair[order], return_index=True)
    last = np.r_[first[1:], order.size] - 1
    return ids, order[first], order[last]


def _swaps(room: _Room, own: np.ndarray, shared: np.ndarray, var_block: np.ndarray) -> None:
    """Step 2 of :func:`moved`: for each block not moved yet, a unit from ``i`` to ``j`` (equal
    on the block's own rows, ``own`` their group there; other keys) and, in another block, a
    unit from ``j2`` to ``i2`` whose shared rows (``shared``: their group there) are ``j``'s and
    ``i``'s: the shared rows lose and gain the same."""
    x, key = room.x, room.key
    v = np.flatnonzero(room.usable & ~np.isin(var_block, list(room.moved)))
    # a move needs two variables of one block equal on its own rows, unequal on the shared
    cell = _in_block(own, var_block)[v]
    order = np.lexsort((shared[v], cell))
    c, u = cell[order], shared[v][order]
    if not ((c[1:] == c[:-1]) & (u[1:] != u[:-1])).any():
        return
    v = np.flatnonzero(room.usable)
    cells = pl.DataFrame(
        {
            "v": v,
            "b": var_block[v],
            "own": own[v],
            "u": shared[v],
            "give": x[v] > room.lb[v],
            "take": x[v] < room.ub[v],
        }
    )
    givers = cells.filter("give").group_by("b", "own", "u").agg(pl.col("v").first().alias("i"))
    takers = cells.filter("take").group_by("b", "own", "u").agg(pl.col("v").first().alias("j"))
    # a move within a block: giver and taker equal on its own rows, unequal on the shared ones
    moves = givers.join(takers, on=["b", "own"], suffix="_to").filter(pl.col("u") != pl.col("u_to"))
    if not moves.height:
        return
    back = moves.select(
        pl.col("b").alias("b2"),
        pl.col("u").alias("u_to"),
        pl.col("u_to").alias("u"),
        pl.col("i").alias("i2"),
        pl.col("j").alias("j2"),
    )
    open_blocks = np.setdiff1d(np.unique(var_block[v]), list(room.moved))
    ask = moves.filter(pl.col("b").is_in(open_blocks.tolist()))
    ask = ask.filter(pl.Series(key[ask["i"].to_numpy()] != key[ask["j"].to_numpy()]))
    both = ask.join(back, on=["u", "u_to"]).filter(pl.col("b") != pl.col("b2"))
    for b, i, j, i2, j2 in both.select("b", "i", "j", "i2", "j2").iter_rows():
        if b in room.moved:
            continue
        if x[i] > room.lb[i] and x[j] < room.ub[j] and x[i2] > room.lb[i2] and x[j2] < room.ub[j2]:
            x[i] -= 1
            x[j] += 1
            x[i2] -= 1
            x[j2] += 1
            room.moved.add(b)
