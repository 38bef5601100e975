"""The count model of one block, and what a verdict is asked at: the engine's building blocks.

A block's program (:func:`block_program`) has one integer variable per feasible type no published
zero rules out (:func:`admissible_types`, tested against the cells that decide), bounded by the
smallest published cell it lies in (:func:`block_bounds`), with one row per published cell
(medians and means as rows of their own: :mod:`tabrecon.engine.statistics`). Blocks are put side
by side in one program (:func:`block_diagonal`, :func:`grouped_programs`, :func:`packed_programs`).
Uniqueness is asked at :func:`asked_key`: the schema's resolution joined with the runs of each
ordered attribute the tables resolve only as a range (:func:`ordered_runs`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..cache import cached_arrays
from ..errors import InputError, TabreconError
from ..schema.spec import Schema
from ..tables.publication import EXACT, MISSING, Publication
from ..tables.spec import compiled
from ..tables.tableset import WITHHELD_CELL, TableSet
from .solvers import IntProgram

if TYPE_CHECKING:
    from ..schema.registry import Population


@dataclass(frozen=True)
class Runs:
    """What the count cells used tell apart of a schema's ordered attributes: per ordered
    attribute, the first and last category (index) of each feasible type's run -- the
    categories its type can take, every other attribute held, without moving to another class
    (:func:`type_classes` over every row used), when they are consecutive (persons: age 100-104
    where PCT12 stops at single years; 0-17 with the P.L. 94-171 tables, whose classes hold both
    sexes too); a type whose categories are not consecutive is a run of one. Where a type has
    runs in several ordered attributes, every combination of them is in its class."""

    first: dict[str, np.ndarray]
    last: dict[str, np.ndarray]

    def ranges(
        self, schema: Schema, pos: np.ndarray
    ) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        """The first and last code of the run of each record at feasible-type position
        ``pos``; None when no record's run is wider than one category."""
        if all((self.last[n][pos] == self.first[n][pos]).all() for n in self.last):
            return None
        codes = {n: schema.attribute(n).codes for n in self.last}
        return {n: (codes[n][self.first[n][pos]], codes[n][self.last[n][pos]]) for n in codes}


def ordered_runs(schema: Schema, feas: np.ndarray, *Ws: sp.csr_matrix) -> Runs | None:
    """The runs of categories of ``schema``'s ordered attributes that the rows ``Ws`` (columns:
    feasible types) cannot tell apart (:class:`Runs`); None when there are none. Only count
    cells are read: a median or mean may tell a run's categories apart in part.

    >>> from tabrecon.schema.spec import Attribute, Schema
    >>> age = Attribute("age", ((0, "0"), (1, "1"), (2, "2+")), ordered=True)
    >>> r = ordered_runs(Schema("t", "thing", (age,)), np.arange(3),
    ...                  sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 1]])))
    >>> r.first["age"].tolist(), r.last["age"].tolist()
    ([0, 1, 1], [0, 2, 2])

    Cells that count both sexes of an age range (none by sex): each type's run is its own sex
    over the range.

    >>> sex = Attribute("sex", ((0, "m"), (1, "f")))
    >>> r = ordered_runs(Schema("t", "thing", (sex, age)), np.arange(6),
    ...                  sp.csr_matrix(np.array([[1, 1, 0, 1, 1, 0], [0, 0, 1, 0, 0, 1]])))
    >>> r.first["age"].tolist(), r.last["age"].tolist()
    ([0, 0, 2, 0, 0, 2], [1, 1, 2, 1, 1, 2])
    """
    ordered = [a for a in schema.attributes if a.ordered]
    if not ordered:
        return None
    cls, _first = type_classes(sp.vstack(Ws).tocsr() if len(Ws) > 1 else Ws[0])
    codes = schema.decode(feas)
    idx = {a.name: a.index(codes[a.name]).astype(np.int64) for a in schema.attributes}
    first: dict[str, np.ndarray] = {}
    last: dict[str, np.ndarray] = {}
    for a in ordered:
        # the types that differ from each other in this attribute alone, within one class
        held = np.stack([cls] + [idx[b.name] for b in schema.attributes if b is not a], axis=1)
        g = np.unique(held, axis=0, return_inverse=True)[1].reshape(-1)
        lo = np.full(int(g.max()) + 1, np.iinfo(np.int64).max)
        hi = np.full(int(g.max()) + 1, -1)
        np.minimum.at(lo, g, idx[a.name])
        np.maximum.at(hi, g, idx[a.name])
        run = (hi - lo + 1) == np.bincount(g)  # consecutive categories
        first[a.name] = np.where(run[g], lo[g], idx[a.name])
        last[a.name] = np.where(run[g], hi[g], idx[a.name])
    wide = np.stack([last[n] > first[n] for n in first], axis=1)
    if not wide.any():
        return None
    names = [a.name for a in schema.attributes]
    for t in np.flatnonzero(wide.sum(axis=1) > 1):  # runs in several attributes: a box?
        mates = np.flatnonzero(cls == cls[t])
        have = {tuple(int(idx[n][u]) for n in names) for u in mates}
        own = {n: int(idx[n][t]) for n in names}
        for combo in itertools.product(*(range(first[n][t], last[n][t] + 1) for n in first)):
            if tuple({**own, **dict(zip(first, combo, strict=True))}[n] for n in names) not in have:
                for n in first:  # not every combination is in the class: a run of one
                    first[n][t] = last[n][t] = idx[n][t]
                break
    return Runs(first, last)


@cache
def runs_of(pop: Population, block: tuple[str, ...], tract: tuple[str, ...] = ()) -> Runs | None:
    """:func:`ordered_runs` of the named block (and tract) tables' count cells, once per
    process (each worker's tracts share it)."""
    schema = pop.schema
    Ws = [compiled(pop, names)[1] for names in (block, tract) if names]
    return ordered_runs(schema, schema.feasible_types(), *Ws) if Ws else None


_KEYS: dict[tuple, np.ndarray] = {}


def _question(
    schema: Schema, feas: np.ndarray, unique_on: Mapping[str, np.ndarray] | None
) -> tuple:
    """What a key memo is found by: the schema and the coarser codes asked, by content."""
    asked = (
        None
        if unique_on is None
        else tuple((k, np.asarray(v).tobytes()) for k, v in sorted(unique_on.items()))
    )
    return (schema, feas.size, asked)


def _coarse_key(
    feas: np.ndarray, schema: Schema, unique_on: Mapping[str, np.ndarray] | None
) -> np.ndarray:
    """Each feasible type's key at the resolution uniqueness is asked at (``unique_on``'s
    coarser codes; the type itself without it), once per process and question (1.45 of a
    real-sample run's 18.9 s when found per tract)."""
    if unique_on is None:
        return np.arange(feas.size)
    memo = _question(schema, feas, unique_on)
    if (hit := _KEYS.get(memo)) is None:
        hit = _KEYS[memo] = _coarse_key_of(feas, schema, unique_on)
    return hit


def _coarse_key_of(
    feas: np.ndarray, schema: Schema, unique_on: Mapping[str, np.ndarray]
) -> np.ndarray:
    cols = schema.decode(feas)
    parts = []
    for a in schema.attributes:
        c = np.asarray(cols[a.name])
        if a.name in unique_on:
            c = np.asarray(unique_on[a.name])[c]
        parts.append(c.astype(np.int64))
    return np.unique(np.stack(parts, axis=1), axis=0, return_inverse=True)[1].reshape(-1)


def asked_key(
    pop: Population,
    unique_on: Mapping[str, np.ndarray] | None,
    block: tuple[str, ...],
    tract: tuple[str, ...] = (),
) -> np.ndarray:
    """Each feasible type's key at the resolution uniqueness is asked at: ``unique_on``'s coarser
    codes (:func:`_coarse_key`), joined with the runs of ordered categories the named tables
    cannot tell apart (:func:`runs_of`), since a record is written as its run. Two types share
    a key when a chain of same-coarse-key and same-run pairs links them: for persons at
    agebin38 with the block tables P12A-G alone (5-year groups, no single years under 20),
    ages 10-14 are one key, as the records say 10-14; with SF1's full tables the runs lie
    inside agebin38's bins and the key is agebin38's. Once per process and question."""
    schema = pop.schema
    feas = schema.feasible_types()
    key = _coarse_key(feas, schema, unique_on)
    runs = runs_of(pop, block, tract) if block or tract else None
    if runs is None:
        return key
    memo = (*_question(schema, feas, unique_on), block, tract)  # by content, not id
    if (hit := _KEYS.get(memo)) is None:
        codes = schema.decode(feas)
        held = [
            runs.first[a.name] if a.name in runs.first else a.index(codes[a.name])
            for a in schema.attributes
        ]
        run_id = np.unique(np.stack(held, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
        n, nk = feas.size, int(key.max()) + 1
        # a node per type, per key and per run, each type linked to its key and its run: the
        # graph's components are the keys asked (numbered in order of their first type)
        size = n + nk + int(run_id.max()) + 1
        graph = sp.csr_matrix(
            (
                np.ones(2 * n),
                (np.tile(np.arange(n), 2), np.concatenate([n + key, n + nk + run_id])),
            ),
            shape=(size, size),
        )
        comp = connected_components(graph, directed=False)[1][:n]
        hit = _KEYS[memo] = np.unique(comp, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return hit


def block_tables(
    long: pl.DataFrame | TableSet,
    pop: Population,
    names: tuple[str, ...],
    publication: Publication = EXACT,
) -> tuple[list, sp.csr_matrix, list[str], np.ndarray]:
    """The named tables' cells, weight matrix, the blocks (sorted geoids) and their values
    (blocks x cells) from a long table, or from the grids of a :class:`TableSet` (the same
    answers and refusals, without making the long table: :meth:`TableSet.values_of`); refuses
    tables that lack a cell, and values the ``publication`` rule cannot have published (a
    withheld cell, value null, is ``MISSING`` where the rule withholds cells)."""
    schema = pop.schema
    cells, W = compiled(pop, tuple(names))
    ids = [c.id for c in cells]
    if isinstance(long, TableSet):
        return cells, W, *_grid_values(long, schema, ids, cells, publication)
    _refuse_unpublished(set(ids) - set(long["cell"].unique().to_list()))
    # rows and columns by joins, values placed by index: pivoting the long table was most of
    # the time on the real sample (12 of 25 s at block+tract, 2,000 cells x 8,530 blocks)
    sub = long.filter(pl.col("cell").is_in(ids))
    geos = sub.select(pl.col("geoid").unique().sort())["geoid"]
    sub = sub.join(
        pl.DataFrame({"cell": ids, "_c": np.arange(len(ids), dtype=np.int64)}), on="cell"
    ).join(pl.DataFrame({"geoid": geos, "_g": np.arange(geos.len(), dtype=np.int64)}), on="geoid")
    flat = sub["_g"].to_numpy() * len(ids) + sub["_c"].to_numpy()
    seen = np.bincount(flat, minlength=geos.len() * len(ids))
    if (seen > 1).any():
        b, c = divmod(int(np.argmax(seen > 1)), len(ids))
        raise InputError(
            f"{schema.geography} {geos[b]} has cell {ids[c]} {int(seen.max())} times "
            f"({int((seen > 1).sum())} such cells): each cell once per {schema.geography}"
        )
    _refuse_lacking(seen.reshape(geos.len(), len(ids)) > 0, geos, ids, schema)
    publication.check(sub, table_of={c.id: c.table for c in cells}, place=schema.geography)
    V = np.zeros(geos.len() * len(ids), dtype=np.int64)
    V[flat] = sub["value"].cast(pl.Int64).fill_null(MISSING).to_numpy()
    return cells, W, geos.to_list(), V.reshape(geos.len(), len(ids))


def _refuse_unpublished(cells: set[str]) -> None:
    """Refuse tables some of whose ``cells`` no geounit has, naming the first five."""
    if cells:
        missing = sorted(cells)
        raise InputError(
            f"the tables lack cells {missing[:5]} (and {max(len(missing) - 5, 0)} more)"
        )


def _refuse_lacking(
    has: np.ndarray, geos: pl.Series | np.ndarray, ids: list[str], schema: Schema
) -> None:
    """Refuse a geounit that has some of the cells ``ids`` but not all (``has``: geounits x
    cells), naming the first and counting the rest."""
    if has.all():
        return
    b, c = divmod(int(np.argmax(~has.ravel())), len(ids))
    raise InputError(
        f"{schema.geography} {geos[b]} lacks cell {ids[c]} ({int((~has).sum()) - 1} "
        f"more cells of {schema.geography}s are missing): every {schema.geography} needs "
        "every cell of the tables used"
    )


def _grid_values(
    ts: TableSet, schema: Schema, ids: list[str], cells: list, publication: Publication
) -> tuple[list[str], np.ndarray]:
    """:func:`block_tables`' blocks and values read from a table set's grids."""
    geos, v = ts.values_of(ids)
    present = v != MISSING
    _refuse_unpublished({c for c, j in zip(ids, present.any(axis=0), strict=True) if not j})
    _refuse_lacking(present, geos, ids, schema)
    v = np.where(v == WITHHELD_CELL, MISSING, v)  # a withheld value, as a null of the long table
    publication.check_values(
        v.ravel(),
        np.tile(np.asarray(ids), geos.size),
        np.repeat(geos, len(ids)),
        table_of={c.id: c.table for c in cells},
        place=schema.geography,
    )
    return geos.tolist(), v


def block_bounds(
    long: pl.DataFrame | TableSet, pop: Population, names: tuple[str, ...], publication: Publication
) -> tuple[list, sp.csr_matrix, list[str], np.ndarray, np.ndarray | None]:
    """:func:`block_tables` with each value turned into the interval of true counts the
    ``publication`` rule allows: (cells, W, blocks, lowest, highest), highest None when every
    cell is exact (the values are then the counts)."""
    cells, W, geoids, V = block_tables(long, pop, names, publication)
    if publication.exact:
        return cells, W, geoids, V, None
    lo, hi = publication.interval(V, [c.table for c in cells])
    return cells, W, geoids, lo, hi


def _spans(indptr: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """The positions of the entries of rows (CSR) or columns (CSC) ``sel``, in order: one
    gather instead of a sparse slice per block (scipy's was half of building the real
    sample's 8,530 block programs)."""
    starts, ends = indptr[sel], indptr[sel + 1]
    lens = ends - starts
    if not lens.sum():
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return offsets + np.arange(int(lens.sum()))


def admissible_types(
    W: sp.csr_matrix,
    V: np.ndarray,
    degree: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Each block's admissible types (positions among ``W``'s columns) for the blocks' values
    ``V`` (blocks x cells): a type is ruled out unless every cell it lies in is nonzero, counted
    over the nonzero cells (few in a small block) for all blocks in one sparse product;
    ``exclude`` rules out more for every block.

    >>> W = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1]]))
    >>> [a.tolist() for a in admissible_types(W, np.array([[2, 0], [1, 1]]))]
    [[0], [0, 1, 2]]
    """
    deg = cell_degree(W) if degree is None else degree
    V = np.asarray(V)
    deciding = _deciding_cells(W)
    if deciding is None:
        return _admissible(W, V, deg, exclude)
    keep, Wk, degk, inner = deciding
    nz = V != 0
    # a zero cell over a nonzero one within it (counts that contradict): such a block is
    # tested against every cell, as the cells that decide would admit more types there
    over = np.asarray(inner @ nz.T.astype(np.int64)).T > 0  # blocks x cells
    whole = np.flatnonzero((over & ~nz).any(axis=1))
    out = _admissible(Wk, V[:, keep], degk, exclude)
    if whole.size:
        for b, adm in zip(whole.tolist(), _admissible(W, V[whole], deg, exclude), strict=True):
            out[b] = adm
    return out


def _admissible(
    W: sp.csr_matrix, V: np.ndarray, deg: np.ndarray, exclude: np.ndarray | None
) -> list[np.ndarray]:
    NZ = sp.csr_matrix((np.asarray(V) != 0).astype(np.int64))
    hits = (NZ @ W).tocsr()  # blocks x types: the nonzero cells each type lies in
    free = np.flatnonzero(deg == 0)  # in no cell: never ruled out
    out = []
    for b in range(hits.shape[0]):
        s_, e_ = hits.indptr[b], hits.indptr[b + 1]
        cols, n = hits.indices[s_:e_], hits.data[s_:e_]
        adm = cols[n == deg[cols]]
        if free.size:
            adm = np.union1d(adm, free)
        else:
            adm = np.sort(adm)
        if exclude is not None:
            adm = adm[~exclude[adm]]
        out.append(adm)
    return out


def _deciding_cells(
    W: sp.csr_matrix,
) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, sp.csr_matrix] | None:
    """The cells of ``W`` that decide which types a block admits (positions, their rows of
    ``W``, its :func:`cell_degree` and which cells lie within which: cells x cells), or None
    when every cell does; kept on the matrix, so found once per process for the compiled
    tables every tract shares.

    A cell containing a smaller cell is nonzero whenever the smaller one is (counts of one
    population), so a type need only be tested against the least cells it lies in: a cell is
    left out when smaller (or equal, earlier) cells within it cover each of its types. For
    persons' block tables at their classes, 698 of 840 cells with a fifth of the entries (the
    totals and P12's sex-by-age cells lie over P12A-I's): the product over blocks is several
    times cheaper. Where the counts contradict (a cell 0 over a nonzero smaller one) a type
    the whole test rules out would be admitted: :func:`admissible_types` tests such a block
    against every cell.

    >>> W = sp.csr_matrix(np.array([[1, 1, 1], [1, 0, 0], [0, 1, 1], [0, 1, 1]]))
    >>> _deciding_cells(W)[0].tolist()
    [1, 2]
    """
    if "_tabrecon_deciding" in W.__dict__:
        return W.__dict__["_tabrecon_deciding"]
    Wr = W.tocsr()
    n = Wr.shape[0]

    def compute() -> dict[str, np.ndarray]:
        B = sp.csr_matrix((np.ones(Wr.nnz, dtype=np.int64), Wr.indices, Wr.indptr), shape=Wr.shape)
        width = np.diff(B.indptr)
        common = (B @ B.T).tocoo()  # cells x cells: types in common
        c, d = common.row, common.col
        smaller = (width[d] < width[c]) | ((width[d] == width[c]) & (d < c))
        inside = (common.data == width[d]) & smaller & (width[d] > 0)  # d lies within c
        S = sp.csr_matrix(
            (np.ones(int(inside.sum()), np.int64), (c[inside], d[inside])), shape=(n, n)
        )
        covered = ((S @ B) > 0).multiply(B)  # c's types that a smaller cell within c holds
        out = np.asarray(covered.sum(axis=1)).ravel() < width
        return {"deciding": out, "within_indptr": S.indptr, "within_indices": S.indices}

    # 4 s for the housing unit's 850 block cells: kept on disk (tabrecon.cache)
    shape = np.array(Wr.shape, dtype=np.int64).tobytes()
    parts = [shape, Wr.indptr.tobytes(), Wr.indices.tobytes(), Wr.data.tobytes(), str(Wr.dtype)]
    names = ["deciding", "within_indptr", "within_indices"]
    got = cached_arrays("deciding-cells", parts, compute, names)
    ok = got["deciding"].shape == (n,) and got["within_indptr"].shape == (n + 1,)
    got = got if ok else compute()
    out, indptr, indices = got["deciding"], got["within_indptr"], got["within_indices"]
    S = sp.csr_matrix((np.ones(indices.size, np.int64), indices, indptr), shape=(n, n))
    keep = np.flatnonzero(out)
    found = None if out.all() else (keep, Wr[keep], cell_degree(Wr[keep]), S)
    W.__dict__["_tabrecon_deciding"] = found
    return found


def cell_degree(W: sp.csr_matrix) -> np.ndarray:
    """How many of the tables' cells each type lies in (the column counts of ``W``)."""
    return np.bincount(W.indices, minlength=W.shape[1])


def block_program(
    W: sp.csr_matrix,
    v: np.ndarray,
    Wc: sp.csc_matrix | None = None,
    exclude: np.ndarray | None = None,
    degree: np.ndarray | None = None,
    admissible: np.ndarray | None = None,
    hi: np.ndarray | None = None,
    extra: tuple[sp.csr_matrix, np.ndarray, np.ndarray]
    | Callable[[np.ndarray, np.ndarray], tuple | None]
    | None = None,
) -> tuple[IntProgram, np.ndarray]:
    """One block's count program (A x = v over the admissible types) and the admissible types'
    positions among the feasible types: a type is ruled out by any zero cell it lies in, and
    bounded by the smallest cell it lies in; cells left with no type and a zero value are
    dropped (the program's rows are the block's remaining cells, in order). ``Wc`` is ``W`` in
    CSC form, and ``degree`` its :func:`cell_degree`, computed once by callers that build many
    blocks; ``exclude`` rules out more types (those a tract's zero cells rule out);
    ``admissible`` gives the admissible types already found (:func:`admissible_types`, for many
    blocks at once), and then ``exclude`` and ``degree`` are not read.

    With ``hi`` the cells are published inexactly (rounded or withheld:
    :meth:`tabrecon.tables.publication.Publication.interval`): each true count lies from ``v`` to
    ``hi``, the rows read ``v <= A x <= hi``, a type is ruled out by a cell whose ``hi`` is 0
    and bounded by the smallest ``hi`` of its cells.

    ``extra`` rows (``R`` over all of ``W``'s columns, lowest, highest; infinite bounds as
    floats; or a function of the admissible types and their bounds giving them over those alone:
    :meth:`tabrecon.engine.statistics.BlockStatistics.at`) say more of the block than its
    counts: its medians and means. They are appended after the cells' rows, over the admissible
    types, and rule nothing out by themselves.

    >>> W = sp.csr_matrix(np.array([[1, 1], [1, 0]]))
    >>> prog, adm = block_program(W, np.array([2, 0]), hi=np.array([4, 2]))
    >>> adm.tolist(), prog.lo.tolist(), prog.hi.tolist(), prog.ub.tolist()
    ([0, 1], [2, 0], [4, 2], [2, 4])
    """
    lo = v
    v = v if hi is None else np.asarray(hi, dtype=np.int64)  # zeros and bounds from the top
    if admissible is not None:
        adm = admissible
    else:
        # a type is ruled out unless every cell it lies in is nonzero: counted over the nonzero
        # cells, few in a small block (summing the zero cells' rows was most of the time)
        nz = np.flatnonzero(v != 0)
        in_nonzero = np.bincount(W.indices[_spans(W.indptr, nz)], minlength=W.shape[1])
        ruled_out = in_nonzero < (cell_degree(W) if degree is None else degree)
        if exclude is not None:
            ruled_out |= exclude
        adm = np.flatnonzero(~ruled_out)
    Wc = W.tocsc() if Wc is None else Wc
    # the admissible columns gathered without scipy's slicing; a zero cell whose types are all
    # ruled out says 0 = 0: most of a small block's cells do, and the solvers need not read
    # them (a nonzero cell without types stays: it is infeasible)
    A, rows, ub = block_diagonal(Wc, v[None, :], [adm])
    if rows.size != v.size:
        v, lo = v[rows], lo[rows]
    if callable(extra):
        extra = extra(adm, ub)
        if extra is not None:
            extra = (sp.csr_matrix(extra[0]), extra[1], extra[2])
    elif extra is not None:
        extra = (sp.csr_matrix(extra[0])[:, adm], extra[1], extra[2])
    if extra is not None:
        R = extra[0].astype(np.int64)
        # an infinite bound becomes the largest value the row can take within the bounds
        reach = np.asarray(abs(R) @ ub, dtype=np.int64).reshape(-1)
        r_lo = np.where(np.isneginf(extra[1]), -reach, extra[1]).astype(np.int64)
        r_hi = np.where(np.isposinf(extra[2]), reach, extra[2]).astype(np.int64)
        A = sp.vstack([A, R], format="csr")
        lo = np.concatenate([np.asarray(lo, dtype=np.int64), r_lo])
        v = np.concatenate([np.asarray(v, dtype=np.int64), r_hi])
    return IntProgram(A=A, lo=lo, hi=v, ub=ub), adm


#: At block level, blocks of a tract share one program while their variables add up to at most
#: this many: a CP-SAT model per tiny block (persons at agebin38: median 16 variables) cost more
#: to build than to solve (real sample: 102.0 s with a model per block, 23.7 s with one per
#: tract), while joining large ones (housing units: median 931, up to 17,562) gained nothing and
#: doubled the zero test's rounds over their varying blocks (600-person county: 13 -> 24 s).
GROUP_VARS = 2_000


def packed_programs(
    bs: list[int], singles: list[tuple[IntProgram, np.ndarray]], seconds: float
) -> list[tuple[list[int], None, tuple[IntProgram, list[np.ndarray], float]]]:
    """Blocks ``bs`` with their own programs ``singles``, in groups of consecutive blocks of at
    most :data:`GROUP_VARS` variables (a larger block alone), each group's programs side by side
    (:func:`side_by_side`); ``seconds``: each block's share of the time taken to build them."""
    groups = _consecutive_groups([p.n_vars for p, _ in singles])
    return [
        (
            [bs[i] for i in g],
            None,
            (
                side_by_side([singles[i][0] for i in g]),
                [singles[i][1] for i in g],
                seconds * len(g),
            ),
        )
        for g in groups
    ]


def _consecutive_groups(sizes: list[int]) -> list[list[int]]:
    """Positions in consecutive groups of at most :data:`GROUP_VARS` variables in all (one
    larger than that alone)."""
    groups: list[list[int]] = [[]]
    n = 0
    for i, k in enumerate(sizes):
        if groups[-1] and n + k > GROUP_VARS:
            groups.append([])
            n = 0
        groups[-1].append(i)
        n += k
    return groups


def grouped_programs(
    Wc: sp.csc_matrix,
    V: np.ndarray,
    bs: list[int],
    adms: list[np.ndarray],
    first: np.ndarray | None,
    seconds: float,
) -> list[tuple[list[int], None, tuple[IntProgram, list[np.ndarray], float]]]:
    """:func:`packed_programs` built from the blocks' admissible columns ``adms`` of ``Wc``
    without a program per block: consecutive blocks of at most :data:`GROUP_VARS` variables (a
    larger block alone), each group's programs side by side in one :func:`block_diagonal` (the
    same rows, in the same order, as :func:`block_program`'s joined by :func:`side_by_side`);
    ``first``: each class's first type, when the columns are classes."""
    V = np.asarray(V, dtype=np.int64)
    out = []
    for g in _consecutive_groups([a.size for a in adms]):
        blocks = [bs[i] for i in g]
        Vg = V[blocks]
        B, rows, ub = block_diagonal(Wc, Vg, [adms[i] for i in g])
        vb = Vg.ravel()[rows]
        kept = [adms[i] if first is None else first[adms[i]] for i in g]
        prog = IntProgram(A=B, lo=vb, hi=vb, ub=ub)
        out.append((blocks, None, (prog, kept, seconds * len(g))))
    return out


def side_by_side(progs: list[IntProgram]) -> IntProgram:
    """Programs that share no variable or row as one (block diagonal): a solution is each one's
    solution, and one model serves them all."""
    return IntProgram(
        A=sp.block_diag([p.A for p in progs], format="csr").astype(np.int64),
        lo=np.concatenate([p.lo for p in progs]),
        hi=np.concatenate([p.hi for p in progs]),
        ub=np.concatenate([p.ub for p in progs]),
    )


class Built(NamedTuple):
    """A tract's joint program (:func:`tract_program`, :func:`tract_class_program`) and what
    its variables and rows are: each block's admissible types (or classes, as their first
    types' positions), the tract's own variables' types (none for :func:`tract_program`), the
    block rows as positions in ``V.ravel()`` (block * cells + cell) and the tract cells kept,
    in row order; the rows after those tie classes to the tract's types."""

    prog: IntProgram
    adms: list[np.ndarray]
    ytypes: np.ndarray
    block_rows: np.ndarray
    tract_rows: np.ndarray


def type_classes(W: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """The feasible types that no block cell tells apart, as classes: each type's class and
    each class's first type. Two types are in one class when every cell counts both or
    neither (equal columns of ``W``); for persons with the block tables, a class is one sex,
    race and origin over one agebin38 age range (the tables publish no finer age by block)."""
    Wt = W.T.tocsr()
    key: dict[bytes, int] = {}
    cls = np.empty(Wt.shape[0], dtype=np.int64)
    for t in range(Wt.shape[0]):
        lo, hi = Wt.indptr[t], Wt.indptr[t + 1]
        k = Wt.indices[lo:hi].tobytes() + Wt.data[lo:hi].tobytes()
        cls[t] = key.setdefault(k, len(key))
    first = np.full(len(key), -1, dtype=np.int64)
    first[cls[::-1]] = np.arange(cls.size)[::-1]
    return cls, first


def classes_answer(key: np.ndarray, cls: np.ndarray, first: np.ndarray) -> bool:
    """Whether variables per class of types (``cls``, ``first``) answer a question asked at the
    resolution ``key`` (each feasible type's coarse key): every class is one type, or one key."""
    return bool(
        (np.bincount(cls, minlength=first.size) == 1).all() or (key == key[first[cls]]).all()
    )


def block_diagonal(
    Wc: sp.csc_matrix, V: np.ndarray, adms: list[np.ndarray]
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Every block's :func:`block_program` (given its admissible columns ``adms`` of ``Wc``,
    values ``V``: blocks x cells) side by side, in one pass over all blocks instead of a
    program per block and ``sp.block_diag``: the block-diagonal matrix (rows in block then cell
    order, a zero cell no admitted column lies in dropped), its rows' values and each column's
    upper bound (its smallest cell; 0 for a column in no cell). Rows are returned as positions in
    ``V.ravel()`` (block * cells + cell); :func:`block_program` is its one-block case.

    >>> Wc = sp.csc_matrix(np.array([[1, 1], [1, 0]]))
    >>> adms = [np.array([0, 1]), np.array([1])]
    >>> B, rows, ub = block_diagonal(Wc, np.array([[2, 1], [1, 0]]), adms)
    >>> B.toarray().tolist(), rows.tolist(), ub.tolist()
    ([[1, 1, 0], [1, 0, 0], [0, 0, 1]], [0, 1, 2], [1, 2, 1])
    """
    V = np.asarray(V, dtype=np.int64)
    n_cells = V.shape[1] if V.ndim == 2 else 0
    sizes = np.array([a.size for a in adms], dtype=np.int64)
    nx = int(sizes.sum())
    cols = np.concatenate(adms) if adms else np.zeros(0, dtype=np.int64)
    col_block = np.repeat(np.arange(len(adms)), sizes)
    pos = _spans(Wc.indptr, cols)
    counts = Wc.indptr[cols + 1] - Wc.indptr[cols]
    j = np.repeat(np.arange(nx), counts)  # each entry's column
    key = col_block[j] * n_cells + Wc.indices[pos]  # each entry's (block, cell)
    flat = V.ravel()
    rows = np.union1d(key, np.flatnonzero(flat != 0))  # sorted: block, then cell
    B = sp.csr_matrix(
        (Wc.data[pos].astype(np.int64), (np.searchsorted(rows, key), j)), shape=(rows.size, nx)
    )
    big = np.iinfo(np.int64).max
    ub = np.full(nx, big, dtype=np.int64)
    np.minimum.at(ub, j, flat[key])
    return B, rows, np.where(ub == big, 0, ub)


def deal_classes(
    x: np.ndarray, adms: list[np.ndarray], cls: np.ndarray, ytypes: np.ndarray, y: np.ndarray
) -> list[np.ndarray]:
    """Each block's types from a class solution: the tract's units of each class's types dealt
    to the blocks in order of the blocks' counts of that class."""
    pool: dict[int, list[int]] = {}
    for t, n in zip(ytypes[y > 0].tolist(), y[y > 0].tolist(), strict=True):
        pool.setdefault(int(cls[t]), []).extend([t] * n)
    taken: dict[int, int] = {}
    out, off = [], 0
    for a in adms:
        xb = x[off : off + a.size]
        off += a.size
        types = []
        for rep, n in zip(a[xb > 0].tolist(), xb[xb > 0].tolist(), strict=True):
            c = int(cls[rep])
            k = taken.get(c, 0)
            types.extend(pool.get(c, [])[k : k + n])
            taken[c] = k + n
        out.append(np.asarray(types, dtype=np.int64))
    short = {c: n for c, n in taken.items() if n != len(pool.get(c, []))}
    if short or set(pool) - set(taken):  # the class sums hold in every solution: a solver bug
        raise TabreconError(
            f"a tract's solution does not deal out: the blocks' counts of {len(short)} classes "
            "differ from the tract's (a solver returned a point outside its program)"
        )
    return out
