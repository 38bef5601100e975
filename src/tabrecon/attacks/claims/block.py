"""Generate-then-Verify (Liu, Xiao, Thaker, Smith and Wu 2025; methods.md section 7) over any
schema's block tables: claims about individual records that every consistent population makes
true, found even where full reconstruction is far from unique.

A claim R(S, a, m) says that exactly m records of the block take the values ``a`` on the columns
``S``: the schema's claim columns (:attr:`~tabrecon.schema.spec.Schema.claim_columns`, its
attributes unless it declares others, as persons do). For each block:

1. *generate*: K solutions of the block's count program (:func:`block_program`) under random
   objectives, for diversity;
2. *candidates*: every (S, a, m) with m >= 1 that holds in all K solutions, for each column subset
   S of the sizes asked; claims that are a published statistic (a cell counts exactly the
   records matching ``a``, by definition) are dropped as trivial;
3. *verify*: a candidate is verified when no solution of the tables gives Count(a) != m. A
   block's candidates (every k) are proven together: one search (CP-SAT) for a solution in which
   *some* candidate's count differs; each solution found refutes at least one, joins the known
   solutions and the search repeats on the rest, until it is infeasible -- a proof for all that
   remain (the same claims as two proofs per candidate, Count(a) <= m - 1 and >= m + 1, in a
   fraction of the solves). A search slow to answer hands over to the linear relaxation, which
   settles claims one by one; a time-out leaves the claims not yet proven unverified.

A verified claim with m = 1 singles out one record ("exactly one household in this block is a
renting, Hispanic, 3-person married couple").
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from ...engine.model import block_bounds, block_program
from ...engine.proofs import Extensible, independent_rows, prove_forms
from ...engine.solvers import IntProgram, SolverOptions
from ...engine.statistics import block_statistics
from ...errors import TabreconError
from ...schema.spec import Schema, Units
from ...tables.publication import EXACT, Publication
from ...tables.spec import compiled, compiled_columns, table_by_name, tables_in
from ...vocab import ClaimStatus, Geo, SolveStatus

if TYPE_CHECKING:
    from ...schema.registry import Population

CLAIM_COLUMNS = {
    "geoid": pl.String,
    "k": pl.Int64,
    "columns": pl.String,
    "values": pl.String,
    "m": pl.Int64,
    "key": pl.Int64,
}


#: Seconds a verification search runs before the linear relaxation is tried
#: (:func:`~tabrecon.engine.proofs.prove_forms`): most blocks' searches answer well inside it
RELAX_AFTER = 1.0


#: Random objectives tried per solution asked for (K): the relaxation's vertex under one is an
#: integer solution for most, not all (measured: 16 of 20 on an 8-unit housing block, 5 of 20
#: on a 145-unit one)
GENERATE_DRAWS = 3


#: CP-SAT's deterministic time (about seconds) for a solution under a random objective where
#: the relaxation's vertex is not integer: a solution, not the optimum, is asked for. Measured on
#: two household blocks' program (6,740 variables): a first solution at 0.5 (1.6 s), while the
#: optimum was not proven in 20 s
GENERATE_WORK = 0.5


#: Nonzeros of a block's program from which CP-SAT, too, reads only the rows no others imply
#: (:func:`~tabrecon.engine.proofs.independent_rows`); the relaxation always does. Below it
#: the implied rows help CP-SAT's propagation more than they cost. Measured on the county's
#: blocks (Generate-then-Verify, K = 20), CP-SAT on all rows / on the kept rows: 3.5 / 7.6 s
#: at 57 units (178,000 nonzeros), 7.4 / 7.3 s at 100 (252,000), 13.9 / 7.4 s at 145
#: (448,000), 20.7 / 16.0 s at 226 (614,000)
REDUCE_CPSAT_NNZ = 300_000


#: Per-block figures of a Generate-then-Verify run
BLOCK_COLUMNS = {
    "geoid": pl.String,
    "units": pl.Int64,
    "types": pl.Int64,
    "solutions": pl.Int64,
    "candidates": pl.Int64,
    "verified": pl.Int64,
    "seconds": pl.Float64,
    "status": pl.String,
}


def one_of_n(n: Any, p: Any) -> Any:
    """The chance that exactly one of ``n`` records drawn independently has a key of share
    ``p``: ``n p (1 - p)^(n - 1)``, the binomial baseline of a singleton claim (what
    scipy.stats' ``binom.pmf(1, n, p)`` gives, without the 0.7 s its import cost every
    command). Arrays element by element; a number for numbers.

    >>> one_of_n(3, 0.5), one_of_n(1, 1.0), one_of_n(0, 0.3)
    (0.375, 1.0, 0.0)
    >>> one_of_n(np.array([2, 0]), np.array([0.5, 1.0])).tolist()
    [0.5, 0.0]
    """
    n, p = np.asarray(n, dtype=np.float64), np.asarray(p, dtype=np.float64)
    out = n * p * np.power(1.0 - p, np.maximum(n - 1.0, 0.0))
    return out if out.ndim else float(out)


@dataclass
class UnitClaims:
    """Verified claims (block, k, columns, values, m) and per-block figures; ``varies`` names
    the blocks whose generated solutions differ (a witness that their units are not unique);
    ``first`` holds each block's first generated solution, the types of its units (a
    reconstruction: it satisfies every published cell)."""

    claims: pl.DataFrame
    blocks: pl.DataFrame
    varies: frozenset[str] = frozenset()
    first: Mapping[str, np.ndarray] = field(default_factory=dict)


def claim_keys(types: np.ndarray, schema: Schema, cols: tuple[int, ...]) -> np.ndarray:
    """Each record type's key on the claim columns ``cols`` (:attr:`Schema.claim_columns`):
    the mixed-radix number of its values there, the first column most significant."""
    return value_keys(schema.claim_values(types), schema, cols)


def column_indices(schema: Schema, names: str) -> tuple[int, ...]:
    """The claim columns (:attr:`Schema.claim_columns`) a claims file's ``columns`` names,
    comma-separated, as indices."""
    known = [c.name for c in schema.claim_columns]
    return tuple(known.index(n) for n in names.split(","))


@cache
def _claim_values(schema: Schema) -> np.ndarray:
    """(feasible types x claim columns): each feasible type's value on every column claims are
    stated over (:meth:`Schema.claim_values`), computed once per process."""
    out = schema.claim_values(schema.feasible_types())
    out.setflags(write=False)
    return out


@cache
def _value_rows(
    schema: Schema,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """The distinct rows of the feasible types' claim values (persons: 9,576 for 27,972 types),
    each feasible type's row, and each row's number of types and sum of type positions: what
    :func:`_trivial_cells` keys, once per column subset, instead of every type. Where every
    type's row is its own (claim columns that are the attributes): the values, and None."""
    values = _claim_values(schema)
    every = tuple(range(values.shape[1]))
    if math.prod(c.size for c in schema.claim_columns) < 2**62:  # one key a row: a fast unique
        _, first, row_of = np.unique(
            value_keys(values, schema, every), return_index=True, return_inverse=True
        )
        rows = values[first]
    else:
        rows, row_of = np.unique(values, axis=0, return_inverse=True)
    if rows.shape[0] == values.shape[0]:
        return values, None, None, None
    row_of = row_of.ravel()
    n = np.bincount(row_of, minlength=rows.shape[0]).astype(np.float64)
    total = np.bincount(row_of, weights=np.arange(row_of.size), minlength=rows.shape[0])
    return rows, row_of, n, total


def value_keys(pos: np.ndarray, schema: Schema, cols: tuple[int, ...]) -> np.ndarray:
    """:func:`claim_keys` of types given by their claim values (rows of
    :meth:`Schema.claim_values`): for callers that key the same types on many column sets."""
    key = np.zeros(pos.shape[0], dtype=np.int64)
    for i in cols:
        key = key * schema.claim_columns[i].size + pos[:, i]
    return key


@cache
def _cell_signatures(pop: Population, names: tuple[str, ...]) -> np.ndarray:
    """Each count cell's number of feasible types times (feasible types)^2 plus the sum of their
    positions (-1 for an empty cell, which no claim repeats): :func:`_trivial_cells`' match."""
    W = compiled(pop, names)[1]
    sizes = np.diff(W.indptr).astype(np.int64)
    sums = np.bincount(
        np.repeat(np.arange(W.shape[0]), sizes), weights=W.indices, minlength=W.shape[0]
    ).astype(np.int64)
    return np.where(sizes > 0, sizes * np.int64(W.shape[1]) ** 2 + sums, -1)


@cache
def _trivial_cells(
    pop: Population, names: tuple[str, ...], cols: tuple[int, ...]
) -> dict[int, tuple[int, ...]]:
    """Claim keys on ``cols`` that repeat a count cell of the tables ``names``: key -> the cells
    counting exactly the feasible types with that key (by definition, not after a block's
    zeros). A claim with such a key is trivial wherever one of those cells is published
    exactly. Computed once per process and column set: keys and cells matched by their number
    of types and sum of type positions, the few equal signatures compared in full."""
    schema = pop.schema
    W = compiled(pop, names)[1]
    rows, row_of, row_n, row_sum = _value_rows(schema)
    keys = value_keys(rows, schema, cols)
    if row_of is None:  # every feasible type a row of its own
        uk, type_key, cnt = np.unique(keys, return_inverse=True, return_counts=True)
        total = np.bincount(type_key, weights=np.arange(keys.size))
    else:
        uk, inv = np.unique(keys, return_inverse=True)
        cnt, total = np.bincount(inv, weights=row_n), np.bincount(inv, weights=row_sum)
        type_key = inv[row_of]
    span = np.int64(type_key.size) ** 2  # above any sum of positions
    ksig = cnt.astype(np.int64) * span + total.astype(np.int64)
    csig = _cell_signatures(pop, names)
    order = np.argsort(ksig, kind="stable")
    at = np.minimum(np.searchsorted(ksig[order], csig), order.size - 1)
    out: dict[int, list[int]] = {}
    for c in np.flatnonzero(ksig[order[at]] == csig):
        lo, hi = np.searchsorted(ksig[order], [csig[c], csig[c] + 1])
        cell = np.sort(W.indices[W.indptr[c] : W.indptr[c + 1]])
        for g in order[lo:hi]:
            if np.array_equal(np.flatnonzero(type_key == g), cell):
                out.setdefault(int(uk[g]), []).append(int(c))
    return {k: tuple(v) for k, v in out.items()}


@dataclass
class _Subsets:
    """The claim-column subsets of one size k for a schema and tables, computed once per
    process: each subset's columns, the radix weights giving a type's key on it (``values @
    radix[:, s]``, :func:`value_keys` for every subset at once), the number of keys it can
    take, and its trivial keys (:func:`_trivial_cells`) as they are first asked for."""

    pop: Population
    names: tuple[str, ...]
    cols: tuple[tuple[int, ...], ...]
    radix: np.ndarray  # claim columns x subsets
    spans: np.ndarray  # subsets: number of keys each can take
    trivial: dict[int, dict[int, tuple[int, ...]]] = field(default_factory=dict)

    def trivial_keys(self, s: int) -> dict[int, tuple[int, ...]]:
        if s not in self.trivial:
            self.trivial[s] = _trivial_cells(self.pop, self.names, self.cols[s])
        return self.trivial[s]


@cache
def _subsets(pop: Population, names: tuple[str, ...], k: int) -> _Subsets:
    schema = pop.schema
    columns = schema.claim_columns
    cols = tuple(itertools.combinations(range(len(columns)), k))
    radix = np.zeros((len(columns), len(cols)), dtype=np.int64)
    spans = np.ones(len(cols), dtype=np.int64)
    for s, c in enumerate(cols):
        for i in reversed(c):
            radix[i, s] = spans[s]
            spans[s] *= columns[i].size
    return _Subsets(pop, names, cols, radix, spans)


#: elements (solutions x used keys x subsets) counted in one pass of :func:`candidates`
_COUNT_CHUNK = 4_000_000


@dataclass
class Candidates:
    """Generate-then-Verify's candidate claims, one entry each: its group (block), number of
    columns ``k``, column subset (an index into ``columns``, every subset of the sizes asked in
    order), key on those columns, count ``m`` (the same in every solution), the first key it
    counts that some solution uses (``first``: a singleton's one key where every key has a
    record) and, when asked for, ``members`` (candidates x keys): every key it counts."""

    group: np.ndarray
    k: np.ndarray
    subset: np.ndarray
    key: np.ndarray
    m: np.ndarray
    first: np.ndarray
    members: sp.csr_matrix | None
    columns: tuple[tuple[int, ...], ...]

    def cols(self, i: int) -> tuple[int, ...]:
        """The claim columns of candidate ``i``."""
        return self.columns[int(self.subset[i])]


def candidates(
    pop: Population,
    names: tuple[str, ...],
    k_values: tuple[int, ...],
    X: np.ndarray,
    values: np.ndarray,
    group: np.ndarray | None = None,
    exact: np.ndarray | None = None,
    members: bool = True,
) -> Candidates:
    """Every claim (columns, key, m) of each group with m >= 1 records in all the solutions
    ``X`` (solutions x keys: a key is a (group, type) whose claim values are the row of
    ``values``) that does not repeat a count cell of the tables ``names`` published exactly
    (``exact``: groups x cells, or None: every cell of every group) -- Generate-then-Verify's
    candidates, for each k of ``k_values``. Every subset's keys are counted at once, over the
    keys some solution uses (a key no solution uses counts 0): a handful of array operations
    instead of several per column subset. Candidates come by k, subset, group, then key; their
    members are every key of their group with their values (used or not), listed only with
    ``members``."""
    n_keys = X.shape[1]
    grp = np.zeros(n_keys, np.int64) if group is None else np.asarray(group, np.int64)
    n_groups = int(grp.max()) + 1 if n_keys else 1
    subs = [_subsets(pop, names, k) for k in k_values]
    first = np.cumsum([0] + [len(sub.cols) for sub in subs])
    columns = tuple(c for sub in subs for c in sub.cols)
    out: list[tuple] = []
    used = np.flatnonzero(X.any(axis=0))
    if used.size:
        Xu = X[:, used].astype(np.float64)
        for sub, k, f in zip(subs, k_values, first.tolist(), strict=False):
            out += _stable_of(sub, k, f, Xu, values, grp, used, n_groups, exact, members)
    if not out:
        z = np.zeros(0, np.int64)
        M0 = sp.csr_matrix((0, n_keys), dtype=np.int64) if members else None
        return Candidates(z, z, z, z, z, z, M0, columns)
    group_, k_, subset, key_, m_, first_, listed, sizes = (
        np.concatenate([p[i] for p in out]) for i in range(8)
    )
    M = None
    if members:
        indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        M = sp.csr_matrix((np.ones(listed.size, np.int64), listed, indptr), (k_.size, n_keys))
    return Candidates(group_, k_, subset, key_, m_, first_, M, columns)


def _stable_of(
    sub: _Subsets,
    k: int,
    first: int,
    Xu: np.ndarray,
    values: np.ndarray,
    grp: np.ndarray,
    used: np.ndarray,
    n_groups: int,
    exact: np.ndarray | None,
    members: bool,
) -> list[tuple]:
    """:func:`candidates` of one k (its subsets numbered from ``first``): per subset with any,
    (group, k, subset, key, m, first member, member keys laid end to end (with ``members``),
    each candidate's number of members)."""
    n_sol = Xu.shape[0]
    # a claim is stable when its count moves by 0 from the first solution in every other: only
    # the keys whose count moves somewhere can move it (a third of a person tract's, K = 100)
    moves = (Xu[1:] != Xu[0]).any(axis=0)
    D = Xu[1:, moves] - Xu[0, moves]
    per = max(1, _COUNT_CHUNK // max(used.size, D.size))
    vu, gu = values[used], grp[used]
    out: list[tuple] = []
    for lo in range(0, len(sub.cols), per):
        hi = min(lo + per, len(sub.cols))
        spans = sub.spans[lo:hi]
        width = spans * n_groups  # each subset's keys in every group
        offset = np.concatenate([[0], np.cumsum(width)[:-1]])
        # subset-major: each subset's (group, key) of the used keys, past earlier subsets'
        g = (vu @ sub.radix[:, lo:hi] + gu[:, None] * spans + offset).T.ravel()
        uk, at0, inv = np.unique(g, return_index=True, return_inverse=True)
        m0 = np.rint(np.bincount(inv, weights=np.tile(Xu[0], hi - lo), minlength=uk.size)).astype(
            np.int64
        )
        ok = m0 >= 1
        if D.size:  # the drift of each claim some moving key is in, solution by solution
            touched, inv_moves = np.unique(
                inv.reshape(hi - lo, used.size)[:, moves].ravel(), return_inverse=True
            )
            rows = np.arange(n_sol - 1)[:, None] * touched.size
            drift = np.bincount(
                (rows + inv_moves.ravel()[None, :]).ravel(),
                weights=np.tile(D, (1, hi - lo)).ravel(),
                minlength=(n_sol - 1) * touched.size,
            ).reshape(n_sol - 1, touched.size)
            ok[touched] &= (np.rint(drift) == 0).all(axis=0)
        stable = np.flatnonzero(ok)
        # codes are subset-major: each subset's stable claims are one run (found by search,
        # not by a scan per subset); the first occurrence of a code is its first used key
        which = np.searchsorted(offset, uk[stable], side="right") - 1
        bounds = np.searchsorted(which, np.arange(hi - lo + 1))
        rem = uk[stable] - offset[which]
        first_used = used[at0[stable] % used.size]
        for w in np.flatnonzero(np.diff(bounds)).tolist():
            at = slice(bounds[w], bounds[w + 1])
            s, span = lo + w, int(spans[w])
            cg, ck, cm, cf = rem[at] // span, rem[at] % span, m0[stable[at]], first_used[at]
            trivial = sub.trivial_keys(s)
            if trivial:
                drop = np.isin(ck, np.fromiter(trivial, np.int64, len(trivial)))
                if exact is not None:  # trivial only where one of its cells is exact there
                    for i in np.flatnonzero(drop):
                        drop[i] = any(exact[cg[i], c] for c in trivial[int(ck[i])])
                cg, ck, cm, cf = cg[~drop], ck[~drop], cm[~drop], cf[~drop]
            if not ck.size:
                continue
            listed = np.zeros(0, np.int64)
            n = np.zeros(ck.size, np.int64)
            if members:  # every key of the group with the claim's values, in key order
                full = grp * span + values @ sub.radix[:, s]
                order = np.argsort(full, kind="stable")
                code = cg * span + ck
                a = np.searchsorted(full[order], code, side="left")
                n = np.searchsorted(full[order], code, side="right") - a
                starts = np.repeat(a - np.concatenate([[0], np.cumsum(n)[:-1]]), n)
                listed = order[starts + np.arange(int(n.sum()))]
            head = (cg, np.full(ck.size, k), np.full(ck.size, first + s), ck, cm)
            out.append((*head, cf, listed, n))
    return out


@dataclass(frozen=True)
class Verdicts:
    """Candidate claims and which of them are proven (:func:`verify`): ``verified`` one flag
    per candidate; ``complete`` False when the time or the rounds ran out first (the candidates
    not proven by then are not verified)."""

    candidates: Candidates
    verified: np.ndarray
    proofs: int
    complete: bool


def verify(
    base: Extensible,
    pop: Population,
    names: tuple[str, ...],
    k_values: tuple[int, ...],
    X: np.ndarray,
    values: np.ndarray,
    *,
    G: sp.csr_matrix | None = None,
    group: np.ndarray | None = None,
    exact: np.ndarray | None = None,
    seconds: float | None = None,
    max_rounds: int | None = None,
    relax_after: float | None = None,
) -> Verdicts:
    """Steps 2 and 3 of Generate-then-Verify, for any schema and any program: the
    :func:`candidates` of the solutions ``X`` (solutions x keys), each proven to hold in every
    solution of ``base``'s program (:func:`~tabrecon.engine.proofs.prove_forms`). ``G`` (keys
    x the program's variables) gives each key's count in a solution; None: key i is variable i
    (a block's program over its admissible types). Candidates that count the same variables
    (e.g. "male" and "male, renting" in a block where every man rents) are one form, proven
    once.

    >>> from tabrecon.engine.solvers import IntProgram
    >>> from tabrecon.schema.registry import Population
    >>> from tabrecon.schema.spec import Attribute
    >>> toy = Schema("toy", "thing", (Attribute("a", ((0, "x"), (1, "y"))),
    ...                               Attribute("b", ((0, "u"), (1, "v")))))
    >>> things = Population(name="toy", schema=toy, noun="things", tables=tuple)
    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]])),
    ...                lo=np.array([1, 1]), hi=np.array([1, 1]), ub=np.ones(4, np.int64))
    >>> X = np.array([[1, 0, 1, 0], [0, 1, 0, 1]])  # types (x,u) (x,v) (y,u) (y,v)
    >>> ver = verify(Extensible(p, SolverOptions(backend="cpsat")), things, (), (1,), X,
    ...              toy.claim_values(np.arange(4)))
    >>> ver.candidates.key.tolist(), ver.candidates.cols(0), ver.candidates.cols(1)
    ([0, 1], (0,), (0,))
    >>> ver.verified.tolist(), ver.complete
    ([True, True], True)
    """
    cands = candidates(pop, names, k_values, X, values, group, exact)
    n = cands.key.size
    if not n:
        return Verdicts(cands, np.zeros(0, dtype=bool), 0, True)
    M = cands.members
    assert M is not None  # asked for
    n_vars = base.prog.n_vars
    if G is None:
        forms = sp.csr_matrix((M.data, M.indices, M.indptr), shape=(n, n_vars))
    else:
        forms = (M.astype(np.int64) @ G).tocsr()
        forms.sort_indices()
    # one proof per distinct form (a form's m is its count in X[0]: equal forms, equal m)
    first, form = _distinct_rows(forms)
    # proven in the order of their entries' bytes, as before forms were grouped without a
    # loop: CP-SAT's joint search is sensitive to it (three synthetic housing counties, K 8:
    # 160 s in this order, 190 s in candidate order, 170-200 s in random ones; the same claims)
    sig = np.array(
        [
            forms.indices[forms.indptr[i] : forms.indptr[i + 1]].tobytes()
            + forms.data[forms.indptr[i] : forms.indptr[i + 1]].tobytes()
            for i in first.tolist()
        ],
        dtype=object,
    )
    o = np.argsort(sig, kind="stable")
    rank = np.empty_like(o)
    rank[o] = np.arange(o.size)
    first, form = first[o], rank[form]
    proof = prove_forms(base, forms[first], cands.m[first], None, seconds, max_rounds, relax_after)
    return Verdicts(cands, proof.verified[form], proof.proofs, proof.complete)


def _distinct_rows(A: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each set of equal rows of ``A`` (sorted) and each row's index into
    them. Rows are grouped by two random 64-bit hashes of their entries and their length, then
    each compared in full with its group's first (a row a collision grouped wrongly stays on
    its own): exact, vectorised -- a Python loop building each row's bytes took 1.4 s of a
    20,000-person county's 15 s of claims.

    >>> A = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1], [0, 0, 0], [0, 1, 0]]))
    >>> first, of = _distinct_rows(A)
    >>> first.tolist(), of.tolist()
    ([0, 1, 3], [0, 1, 0, 2, 1])
    """
    A = A.tocsr()
    A.sort_indices()
    n = A.shape[0]
    nnz = np.diff(A.indptr)
    rng = np.random.default_rng(0)
    full = np.flatnonzero(nnz > 0)
    hashes = []
    for _ in range(2):
        r = rng.integers(1, 2**63 - 1, size=A.shape[1], dtype=np.int64).astype(np.uint64)
        h = np.zeros(n, np.uint64)
        with np.errstate(over="ignore"):
            v = r[A.indices] * A.data.astype(np.uint64)
            if full.size:
                h[full] = np.add.reduceat(v, A.indptr[full])
        hashes.append(h)
    order = np.lexsort((np.arange(n), nnz, hashes[1], hashes[0]))
    key = np.stack([hashes[0][order], hashes[1][order], nnz[order].astype(np.uint64)])
    new = np.ones(n, dtype=bool)
    new[1:] = (key[:, 1:] != key[:, :-1]).any(axis=0)
    rep = np.empty(n, dtype=np.int64)
    rep[order] = order[np.maximum.accumulate(np.where(new, np.arange(n), 0))]
    # in full: each row's entries against its group's first row's (the same length by its key)
    row = np.repeat(np.arange(n), nnz)
    there = A.indptr[rep[row]] + np.arange(A.indices.size) - A.indptr[row]
    differs = (A.indices != A.indices[there]) | (A.data != A.data[there])
    bad = np.bincount(row[differs], minlength=n) > 0
    rep[bad] = np.flatnonzero(bad)
    first, of = np.unique(rep, return_inverse=True)
    return first, of.ravel()


def generate_then_verify(
    long: pl.DataFrame,
    pop: Population,
    tables: tuple[str, ...] | None = None,
    k_values: tuple[int, ...] = (5, 6, 7, 8, 9, 10),
    k_solutions: int = 20,
    seed: int = 0,
    *,
    blocks: list[str] | None = None,
    truth: Units | None = None,
    opts: SolverOptions | None = None,
    block_seconds: float | None = None,
    tied: pl.DataFrame | None = None,
    publication: Publication = EXACT,
) -> UnitClaims:
    """Generate-then-Verify on every block of ``long`` (or the geoids in ``blocks``). With
    ``truth`` the records each verified singleton singles out are counted (households covered).
    With ``tied``, the block tables of the population the schema's records tie to (households:
    the person tables; :mod:`tabrecon.attacks.joint`), every solution and every proof is of the
    two releases together: a claim is verified when every population consistent with *both*
    releases makes it true.

    ``block_seconds`` caps each block's time: a block that reaches it keeps the claims verified
    so far and is marked ``time-limit`` (the rest are not verified). A block whose tables admit
    no units at all is marked ``infeasible``. Claims are about one block, so only block tables
    are used (by default every one the long table holds a cell of).

    ``publication`` says how the cells were published (:mod:`tabrecon.tables.publication`): each
    rounded or withheld cell is the interval of counts it allows, and a claim is verified when
    every population those intervals allow makes it true. A claim that repeats a cell is
    trivial only where that cell was published exactly (a rounded cell's exact count is a
    disclosure)."""
    schema = pop.schema
    opts = replace((opts or SolverOptions()).for_task("claims"), presolve="light")
    names = tables or tables_in(long, pop, "block")
    for n in names:
        if table_by_name(n, pop).level != Geo.BLOCK:
            raise TabreconError(f"Generate-then-Verify uses block tables; {n} is a tract table")
    cells, W, geoids, V, hi = block_bounds(long, pop, names, publication)
    # medians and means: extra rows (a withheld one says nothing where counts are withheld)
    measured = block_statistics(long, pop, names, geoids, publication=publication)
    Vhi = V if hi is None else hi
    names = tuple(names)
    values = _claim_values(schema)
    Wc, deg = compiled_columns(pop, names)  # once per process
    rng = np.random.default_rng(seed)
    found: list[tuple] = []
    stats: list[tuple] = []
    witnessed: list[str] = []
    first: dict[str, np.ndarray] = {}
    feasible = schema.feasible_types()

    want = set(blocks) if blocks is not None else None
    other = None
    if tied is not None:
        from ..joint import TiedRelease

        other = TiedRelease(pop, tied)
    for b, geoid in enumerate(geoids):
        if want is not None and geoid not in want:
            continue
        t0 = time.perf_counter()
        prog, adm = block_program(W, V[b], Wc, degree=deg, hi=Vhi[b], extra=measured.at(b))
        exact = V[b] == Vhi[b]
        if other is not None:
            prog = other.join(geoid, prog, adm)[0]
        base, sols, short, infeasible = generate_reduced(
            prog, k_solutions, rng, opts, block_seconds, t0
        )
        if not sols:
            # no solution without a proof that none exists: the time ran out first
            why = ClaimStatus.INFEASIBLE if infeasible else ClaimStatus.TIME_LIMIT
            stats.append((geoid, 0, int(adm.size), 0, 0, 0, time.perf_counter() - t0, why))
            continue
        X = np.stack(sols)[:, : adm.size]  # K x admissible types (a tied release's follow)
        if (X != X[0]).any():
            witnessed.append(geoid)
        x0 = X[0]
        first[geoid] = np.repeat(feasible[adm[x0 > 0]], x0[x0 > 0])
        # every k's candidates proven together: one search where the block's claims all hold
        # (most blocks) instead of one for each k -- 30-50% less proving on blocks of 20-226
        # units, the same verdicts. Fewer solutions than asked (the time ran out generating)
        # would mean more candidates, all to prove: none is tried
        status = ClaimStatus.TIME_LIMIT if short else ClaimStatus.OK
        n_ver = n_cand = 0
        if not short:
            remaining = None if block_seconds is None else block_seconds - time.perf_counter() + t0
            ver = verify(
                base,
                pop,
                names,
                k_values,
                X,
                values[adm],
                exact=exact[None],
                seconds=remaining,
                relax_after=RELAX_AFTER,
            )
            cands = ver.candidates
            n_cand = cands.key.size
            if not ver.complete:  # the claims proven before the time ran out stand
                status = ClaimStatus.TIME_LIMIT
            for i in np.flatnonzero(ver.verified).tolist():
                n_ver += 1
                found.append(
                    (geoid, int(cands.k[i]), cands.cols(i), int(cands.key[i]), int(cands.m[i]))
                )
        took = time.perf_counter() - t0
        stats.append(
            (geoid, int(X[0].sum()), int(adm.size), len(sols), n_cand, n_ver, took, status)
        )
    claims = _claims_frame(found, schema, truth)
    per_block = pl.DataFrame(
        stats,
        schema=BLOCK_COLUMNS,
        orient="row",
    )
    return UnitClaims(claims, per_block, frozenset(witnessed), first)


def generate_reduced(
    full: IntProgram,
    k_solutions: int,
    rng: np.random.Generator,
    opts: SolverOptions,
    block_seconds: float | None,
    t0: float,
) -> tuple[Extensible, list[np.ndarray], bool, bool]:
    """:func:`generate` on ``full`` without the rows other rows imply (a total is the sum of
    its parts: the same solutions where the cells are consistent, a twentieth of the nonzeros
    on a large block), for the simplex always and for CP-SAT from :data:`REDUCE_CPSAT_NNZ`
    nonzeros; also the program to prove on (built once, cloned for every solve and proof).
    Proofs over the kept rows hold over all of them; the solutions generated are checked
    against every row, and a program where one fails (cells that contradict each other) is
    solved whole.

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1], [1, 0, 0], [0, 1, 1]])),
    ...                lo=np.array([3, 1, 2]), hi=np.array([3, 1, 2]), ub=np.array([3, 3, 3]))
    >>> base, sols, short, infeasible = generate_reduced(
    ...     p, 2, np.random.default_rng(0), SolverOptions(), None, 0.0)
    >>> base.prog.n_rows, all(p.satisfied_by(x) for x in sols), short, infeasible
    (3, True, False, False)
    """
    kept = independent_rows(full)
    for prog in (full.rows(kept), full) if not kept.all() else (full,):
        if full.A.nnz >= REDUCE_CPSAT_NNZ or prog is full:
            base = Extensible(prog, opts)
        else:
            base = Extensible(full, opts, lp=prog)
        sols, short, infeasible = generate(base, k_solutions, rng, opts, block_seconds, t0)
        if all(full.satisfied_by(x) for x in sols):
            break
    return base, sols, short, infeasible


def generate(
    base: Extensible,
    k_solutions: int,
    rng: np.random.Generator,
    opts: SolverOptions,
    block_seconds: float | None,
    t0: float,
) -> tuple[list[np.ndarray], bool, bool]:
    """Up to ``K`` solutions of a block's program for Generate-then-Verify, and whether the
    block's time ran out first (``short``) or the program was proven infeasible. The
    relaxation's optimal vertex under a random objective is most often an integer solution
    (ms where CP-SAT takes seconds on a large block); up to :data:`GENERATE_DRAWS` objectives
    per solution asked are tried, and CP-SAT's integer search only while none has been found."""
    sols: list[np.ndarray] = []
    short = infeasible = False
    n = base.prog.n_vars
    for _ in range(GENERATE_DRAWS * k_solutions):
        if len(sols) >= k_solutions or infeasible:
            break
        obj = rng.integers(-4, 5, size=n)
        left = None if block_seconds is None else block_seconds - (time.perf_counter() - t0)
        if left is not None and left <= 0:  # the block's time is spent: no more solves
            short = True
            break
        x = base.relaxation.vertex(obj)
        if x is not None:
            sols.append(x)
            continue
        if sols:
            continue
        # any solution will do, not the objective's optimum: CP-SAT stops after
        # GENERATE_WORK of its deterministic time with the best it has found (the same
        # solution on every machine, unless the wall-clock limit comes first)
        limit = min(opts.time_limit or 5, 5, left if left is not None else 5)
        s = base.solve_base(obj, opts=replace(opts, time_limit=limit), work_limit=GENERATE_WORK)
        infeasible = s.status == SolveStatus.INFEASIBLE
        if s.x is not None:
            sols.append(s.x)
    return sols, short, infeasible


def values_text(schema: Schema, cols: tuple[int, ...], key: int, labels: list | None = None) -> str:
    """``column=label; ...`` of a claim's mixed-radix key (``labels``: each claim column's
    labels, looked up once by callers formatting many claims)."""
    labels = labels or [c.labels for c in schema.claim_columns]
    parts = []
    for i in reversed(cols):
        col = schema.claim_columns[i]
        parts.append(f"{col.name}={labels[i][key % col.size]}")
        key //= col.size
    return "; ".join(reversed(parts))


def _claims_frame(found: list[tuple], schema: Schema, truth: Units | None) -> pl.DataFrame:
    """One row per verified claim: block, k, columns, the values as labels, m, its key and (with
    the truth) how many true records match it (equal to m for every verified claim)."""
    labels = [c.labels for c in schema.claim_columns]
    names: dict[tuple[int, ...], str] = {}
    text: dict[tuple[tuple[int, ...], int], str] = {}  # the same claims recur block after block
    rows = []
    for geoid, k, cols, key, m in found:
        if cols not in names:
            names[cols] = ",".join(schema.claim_columns[i].name for i in cols)
        if (cols, key) not in text:
            text[cols, key] = values_text(schema, cols, key, labels)
        rows.append((geoid, k, names[cols], text[cols, key], m, key))
    df = pl.DataFrame(rows, schema=CLAIM_COLUMNS, orient="row")
    if truth is None or not found:
        return df
    matches = [len(units) for units in matching_claims(found, schema, truth)]
    return df.with_columns(pl.Series("true_matches", matches))


def matching_claims(found: list[tuple], schema: Schema, truth: Units) -> list[np.ndarray]:
    """For each claim, the indices of the true units of its block that match it."""
    tkeys: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    true_types, true_geo = truth.types, truth.block_geoid.astype(str)
    # each block's units found once (scanning every unit per block and column set took minutes
    # on 88,628 claims about 50 blocks of an 89,217-unit county)
    wanted = np.unique(np.array([f[0] for f in found], dtype=str))
    sel = np.flatnonzero(np.isin(true_geo, wanted))
    order = sel[np.argsort(true_geo[sel], kind="stable")]
    geo_sorted = true_geo[order]
    starts = np.searchsorted(geo_sorted, wanted, side="left")
    ends = np.searchsorted(geo_sorted, wanted, side="right")
    of_block = {g: order[a:b] for g, a, b in zip(wanted.tolist(), starts, ends, strict=True)}
    values: dict[str, np.ndarray] = {}
    out = []
    for geoid, _k, cols, key, _m in found:
        if (geoid, cols) not in tkeys:
            idx = of_block[geoid]
            if geoid not in values:
                values[geoid] = schema.claim_values(true_types[idx])
            tkeys[(geoid, cols)] = (idx, value_keys(values[geoid], schema, cols))
        idx, keys = tkeys[(geoid, cols)]
        out.append(idx[keys == key])
    return out
