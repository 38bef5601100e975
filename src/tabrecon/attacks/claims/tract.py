"""Generate-then-Verify over one tract's blocks together, for any schema: the claims about each
block's records that every population consistent with the block tables *and* the tract's tables
makes true (:mod:`tabrecon.attacks.claims.block` asks each block's own tables alone).

The tract's count program (:func:`tabrecon.engine.tract.program_of_tract`) holds every block's
variables and the tract's cells; a block's records are counted on *keys*: a key is a (block,
claim code) pair, the claim code being the mixed-radix number of a record's values on every claim
column (:attr:`~tabrecon.schema.spec.Schema.claim_columns`), so that a claim's count is a linear
form of the program's variables (variables of one type class share their claim values: the
program is built at the claim columns' resolution, ``unique_on``).

Given a *reference* population (a reconstruction: it satisfies every cell), its counts are the
first solution, and blocks known to have one histogram at that resolution (``unique``: solvar 0,
:func:`tabrecon.engine.variability.block_variability`) need no search at all: every claim read
off the reference there holds in every population, by that one proof, and their counts are fixed
in the program (nothing is lost: they are the same in every solution). The other blocks' claims
are generated from K diverse solutions and proven in one program
(:func:`~tabrecon.attacks.claims.block.verify`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ...engine.proofs import Extensible
from ...engine.solvers import IntProgram, SolverOptions
from ...engine.tract import program_of_tract
from ...errors import TabreconError
from ...schema.spec import Schema
from ...tables.tableset import TableSet
from ...vocab import Level
from .block import RELAX_AFTER, Candidates, candidates, generate, value_keys, verify

if TYPE_CHECKING:
    from ...schema.registry import Population


def claim_codes(schema: Schema, types: np.ndarray) -> np.ndarray:
    """Each type's claim code: the mixed-radix number of its values on every claim column, the
    first column most significant (:func:`~tabrecon.attacks.claims.block.value_keys`).

    >>> from tabrecon.schema.spec import Attribute
    >>> toy = Schema("toy", "thing", (Attribute("a", ((0, "x"), (1, "y"))),
    ...                               Attribute("b", ((0, "u"), (1, "v"), (2, "w")))))
    >>> claim_codes(toy, np.arange(6)).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    every = tuple(range(len(schema.claim_columns)))
    return value_keys(schema.claim_values(np.asarray(types)), schema, every)


def _n_codes(schema: Schema) -> int:
    return int(np.prod([c.size for c in schema.claim_columns], dtype=np.int64))


def code_values(schema: Schema, codes: np.ndarray) -> np.ndarray:
    """(codes x claim columns): the values a claim code (:func:`claim_codes`) stands for.

    >>> from tabrecon.schema.spec import Attribute
    >>> toy = Schema("toy", "thing", (Attribute("a", ((0, "x"), (1, "y"))),
    ...                               Attribute("b", ((0, "u"), (1, "v"), (2, "w")))))
    >>> code_values(toy, np.array([4])).tolist()
    [[1, 1]]
    """
    rest = np.asarray(codes, dtype=np.int64).copy()
    out = np.empty((rest.size, len(schema.claim_columns)), dtype=np.int64)
    for i in reversed(range(len(schema.claim_columns))):
        size = schema.claim_columns[i].size
        out[:, i] = rest % size
        rest //= size
    return out


@dataclass(frozen=True)
class TractVerdicts:
    """One tract's verified claims, in parts of :class:`~tabrecon.attacks.claims.block.Candidates`
    over its keys: ``parts`` holds (candidates, verified flags, each candidate's key that the
    reference holds -- the record a singleton singles out -- or -1).

    ``geoids`` are the tract's blocks (the reference's order); key ``i`` is block
    ``key_block[i]`` and claim code ``key_code[i]``, the reference holding ``y0[i]`` records of it;
    ``ref_key`` is each reference record's key (the parts' candidates count these keys only;
    keys the program's other solutions use are internal to the proofs)."""

    geoids: np.ndarray
    key_block: np.ndarray
    key_code: np.ndarray
    y0: np.ndarray
    ref_key: np.ndarray
    parts: tuple[tuple[Candidates, np.ndarray, np.ndarray], ...]
    solutions: int = 1
    proofs: int = 0
    candidates_varying: int = 0
    verified_varying: int = 0
    complete: bool = True


def tract_verdicts(
    long: pl.DataFrame | TableSet | None,
    pop: Population,
    level: str,
    names: tuple[str, ...],
    k_values: tuple[int, ...],
    geoids: np.ndarray,
    ref_block: np.ndarray,
    ref_types: np.ndarray,
    unique: np.ndarray,
    *,
    k_solutions: int,
    seed: int,
    opts: SolverOptions,
    unique_on: Mapping[str, np.ndarray] | None = None,
    tract: str = "",
    max_rounds: int | None = 200,
    seconds: float | None = None,
) -> TractVerdicts:
    """Generate-then-Verify on one tract's blocks ``geoids`` (module docstring): ``long`` their
    cells (and at ``level`` "block+tract" the tract's), ``names`` the block tables a claim must
    not merely repeat, the reference's records ``ref_types`` in blocks ``ref_block`` (positions
    in ``geoids``), ``unique`` the blocks proven to have one histogram at the claim columns'
    resolution. ``K`` solutions in all (the reference and ``K - 1`` of random objectives).
    ``long`` may be None when every inhabited block is ``unique`` (no program is built).

    ``seconds`` caps the tract's time from this call on: the random solutions stop when it is
    spent and so do the proofs, the claims proven by then are kept (``complete`` False: the
    candidates not proven are not verified). The program is built before it is checked."""
    schema, t0 = pop.schema, time.perf_counter()
    nb = len(geoids)
    n_codes = _n_codes(schema)
    rkey = ref_block.astype(np.int64) * n_codes + claim_codes(schema, ref_types)
    keys, ref_key, y0 = np.unique(rkey, return_inverse=True, return_counts=True)
    key_block = keys // n_codes
    values = code_values(schema, keys % n_codes)
    sizes = np.bincount(ref_block, minlength=nb).astype(np.int64)
    parts: list[tuple[Candidates, np.ndarray, np.ndarray]] = []
    # blocks with one histogram: every claim of the reference is verified by that proof; each
    # claim's first key (a singleton's one key: every key here has a record) is the record
    ck = np.flatnonzero(unique[key_block])
    if ck.size:
        cl = candidates(
            pop, names, k_values, y0[ck][None, :], values[ck], key_block[ck], members=False
        )
        parts.append((cl, np.ones(cl.key.size, dtype=bool), ck[cl.first]))
    vblocks = np.flatnonzero(~unique & (sizes > 0))
    if not vblocks.size:
        return TractVerdicts(geoids, key_block, keys % n_codes, y0, ref_key, tuple(parts))
    if long is None:
        raise TabreconError(f"tract {tract}: blocks can differ and no tables were given")
    tp = program_of_tract(
        long,
        pop,
        level,
        unique_on,
        blocks=[str(g) for g in geoids[vblocks]] if level == Level.BLOCK else None,
    )
    # the program's blocks -> the reference's; the tract's own variables (its types, at
    # block+tract over classes) and blocks the reference does not list (no one lives there)
    # count no key
    at = np.minimum(np.searchsorted(geoids, tp.geoids), nb - 1)
    listed = geoids[at] == tp.geoids
    if not np.isin(geoids[vblocks], tp.geoids[listed]).all():
        raise TabreconError(f"tract {tract}: the reconstruction has blocks the tables do not")
    bprog = tp.prog
    n_vars = bprog.n_vars
    xv = np.flatnonzero(tp.var_block >= 0)
    xv = xv[listed[tp.var_block[xv]]]
    vkey = at[tp.var_block[xv]].astype(np.int64) * n_codes + claim_codes(schema, tp.var_type[xv])
    vk = np.searchsorted(keys, vkey)
    in_keys = (vk < keys.size) & (keys[np.minimum(vk, keys.size - 1)] == vkey)
    # keys of the program the reference does not hold get their own columns after its own
    extra_keys, ek = np.unique(vkey[~in_keys], return_inverse=True)
    col = np.where(in_keys, vk, 0)
    col[~in_keys] = keys.size + ek
    nkeys_all = keys.size + extra_keys.size
    G = sp.csr_matrix((np.ones(xv.size), (col, xv)), shape=(nkeys_all, n_vars))
    all_keys = np.concatenate([keys, extra_keys])
    # blocks with one histogram are the same in every solution: fixing their key counts loses
    # nothing (a program of the varying blocks alone has nothing to fix)
    fixed = (
        np.flatnonzero(unique[all_keys // n_codes])
        if level != Level.BLOCK
        else np.zeros(0, np.int64)
    )
    y_all = np.concatenate([y0, np.zeros(extra_keys.size, dtype=np.int64)])
    prog = IntProgram(
        A=sp.vstack([bprog.A, G[fixed]]).tocsr(),
        lo=np.concatenate([bprog.lo, y_all[fixed]]),
        hi=np.concatenate([bprog.hi, y_all[fixed]]),
        ub=bprog.ub,
    )
    # one program for the random solutions and the proofs, built and presolved once; not cut
    # to its independent rows as a block's is (the QR took 138 s on an 18,091-row tract)
    base = Extensible(prog, opts)
    sols, _short, infeasible = generate(
        base, k_solutions - 1, np.random.default_rng(seed), opts, seconds, t0
    )
    # the reference must solve it or no proof means anything (all solves timed out: no matter)
    if infeasible:
        raise TabreconError(
            f"tract {tract}: no population satisfies the tables together with the blocks proven "
            "unique; is the reconstruction from these tables?"
        )
    vkeys = np.flatnonzero(np.isin(all_keys // n_codes, vblocks))
    Gv = G[vkeys]
    Y = np.vstack([y_all[vkeys]] + [Gv @ s[:n_vars] for s in sols]).astype(np.float64)
    ver = verify(
        base,
        pop,
        names,
        k_values,
        Y,
        code_values(schema, all_keys[vkeys] % n_codes),
        G=Gv,
        group=all_keys[vkeys] // n_codes,
        max_rounds=max_rounds,
        relax_after=RELAX_AFTER,  # as for a block's own tables: a slow search hands over
        seconds=None if seconds is None else max(seconds - (time.perf_counter() - t0), 0.0),
    )
    cl = ver.candidates
    if cl.key.size:
        # the record a singleton singles out: its one key that the reference holds
        M = cl.members
        assert M is not None  # asked for
        rk = (
            sp.csr_matrix(
                (M.data * 1.0, vkeys[M.indices], M.indptr), shape=(M.shape[0], nkeys_all)
            )[:, : keys.size]
            .multiply(y0[None, :])
            .tocsr()
        )
        parts.append((cl, ver.verified, row_argmax(rk)))
    return TractVerdicts(
        geoids,
        key_block,
        keys % n_codes,
        y0,
        ref_key,
        tuple(parts),
        solutions=1 + len(sols),
        proofs=ver.proofs,
        candidates_varying=int(cl.key.size),
        verified_varying=int(ver.verified.sum()) if cl.key.size else 0,
        complete=ver.complete,
    )


def row_argmax(M: sp.csr_matrix) -> np.ndarray:
    """Each row's column of its largest positive entry (the first such column on a tie), -1
    where a row has none: scipy's ``argmax(axis=1)`` for the rows it is read for, vectorised
    (scipy loops over the rows in Python: 11 s of a 20,000-person county's 41 s of claims
    under the profiler).

    >>> M = sp.csr_matrix(np.array([[0, 2, 2], [0, 0, 0], [3, 0, 1], [0, 0, 5]]))
    >>> row_argmax(M).tolist()
    [1, -1, 0, 2]
    """
    M = M.tocsr()
    M.sort_indices()
    n = M.shape[0]
    counts = np.diff(M.indptr)
    rows = np.repeat(np.arange(n), counts)
    order = np.lexsort((M.indices, -M.data, rows))  # by row, the largest first, then by column
    out = np.full(n, -1, dtype=np.int64)
    has = np.flatnonzero(counts > 0)
    best = order[M.indptr[has]]
    out[has] = np.where(M.data[best] > 0, M.indices[best], -1)
    return out
