"""A tract's blocks in one program under the tract's tables.

Either a block variable per type (:func:`tract_program`) or, with the same solutions and far
fewer variables, a block variable per class of types no block cell tells apart and a tract
variable per type (:func:`tract_class_program`), the classes found from the tables' weight
matrix (:func:`block_classes`). :func:`program_of_tract` builds one tract's program with each
variable's block and type and each row's geoid and cell (what the claims prove in), and
:func:`diagnose` names the cells of a tract whose tables contradict each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import TabreconError
from ..geo import prefix
from ..tables.publication import EXACT
from ..tables.spec import compiled, compiled_columns, table_by_name, tables_in
from ..tables.tableset import TableSet
from ..vocab import Geo, Level
from .model import (
    Built,
    admissible_types,
    asked_key,
    block_bounds,
    block_diagonal,
    block_tables,
    cell_degree,
    classes_answer,
    runs_of,
    type_classes,
)
from .solvers import IntProgram, SolverOptions

if TYPE_CHECKING:
    from ..schema.registry import Population


def tract_program(
    W: sp.csr_matrix,
    Wc: sp.csc_matrix,
    V: np.ndarray,
    Wt: sp.csr_matrix,
    Wtc: sp.csc_matrix,
    vt: np.ndarray,
    extra: Sequence[Callable[[np.ndarray, np.ndarray], tuple | None] | None] | None = None,
) -> Built:
    """The joint count program of a tract's blocks (``V``: blocks x block cells) under its tract
    cells ``vt``: each block's program (:func:`block_program`, types a zero tract cell rules out
    excluded too) side by side, and one row per tract cell summing the blocks' types in it
    (zero cells left without types dropped). The variables are the blocks' in order. ``extra``:
    each block's rows given its admissible types (its medians and means:
    :meth:`~tabrecon.engine.model.BlockStatistics.at`), after the tract's."""
    out_t = np.asarray(Wt[np.flatnonzero(vt == 0)].sum(axis=0)).ravel() > 0
    adms = admissible_types(W, V, cell_degree(W), out_t)
    B, rows, _ub = block_diagonal(Wc, V, adms)
    At = sp.hstack([Wtc[:, a] for a in adms], format="csr") if adms else Wt[:, :0]
    keep = np.flatnonzero((np.diff(At.indptr) > 0) | (vt != 0))
    A = sp.vstack([B, At[keep]], format="csr")
    v = np.concatenate([np.asarray(V, dtype=np.int64).ravel()[rows], vt[keep]])
    big = np.iinfo(np.int64).max
    ub = np.full(A.shape[1], big, dtype=np.int64)
    np.minimum.at(ub, A.indices, np.repeat(v, np.diff(A.indptr)))
    ub = np.where(ub == big, 0, ub)
    A, lo, hi = _with_block_rows(A.astype(np.int64), v, ub, adms, extra)
    prog = IntProgram(A=A, lo=lo, hi=hi, ub=ub)
    return Built(prog, adms, np.zeros(0, dtype=np.int64), rows, keep)


def _with_block_rows(
    A: sp.csr_matrix,
    v: np.ndarray,
    ub: np.ndarray,
    adms: list[np.ndarray],
    extra: Sequence[Callable[[np.ndarray, np.ndarray], tuple | None] | None] | None,
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """``A`` (rows equal to ``v``) with each block's ``extra`` rows over its own variables
    appended: lowest and highest, an infinite bound made the most the row can reach."""
    lo, hi = np.asarray(v, dtype=np.int64), np.asarray(v, dtype=np.int64)
    if extra is None:
        return A, lo, hi
    offs = np.concatenate([[0], np.cumsum([a.size for a in adms])])
    parts, r_lo, r_hi = [A], [lo], [hi]
    for b, (rows_of, a) in enumerate(zip(extra, adms, strict=True)):
        got = rows_of(a, ub[offs[b] : offs[b + 1]]) if rows_of is not None else None
        if got is None or not got[0].shape[0]:
            continue
        R = sp.csr_matrix(got[0]).astype(np.int64)
        R = sp.csr_matrix((R.data, R.indices + offs[b], R.indptr), shape=(R.shape[0], A.shape[1]))
        reach = np.asarray(abs(R) @ ub, dtype=np.int64).reshape(-1)
        parts.append(R)
        r_lo.append(np.where(np.isneginf(got[1]), -reach, got[1]).astype(np.int64))
        r_hi.append(np.where(np.isposinf(got[2]), reach, got[2]).astype(np.int64))
    return sp.vstack(parts, format="csr"), np.concatenate(r_lo), np.concatenate(r_hi)


@cache
def block_classes(
    pop: Population, names: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix, sp.csc_matrix, np.ndarray]:
    """The named block tables' :func:`type_classes` (each feasible type's class, each class's
    first type) and their weight matrix over the classes (a column per class, by rows and by
    columns, and its :func:`cell_degree`): what block programs over classes slice, once per
    process."""
    W = compiled(pop, names)[1]
    cls, first = type_classes(W)
    Wb = W[:, first].tocsr()
    return cls, first, Wb, Wb.tocsc(), cell_degree(Wb)


def classes_are_runs(pop: Population, names: tuple[str, ...], cls: np.ndarray) -> bool:
    """Whether every class of types (``cls``) is a run of ordered attributes
    (:func:`runs_of`): its records can then be written as the run, not as one of its types
    as if it were known."""
    runs = runs_of(pop, names)
    width = np.ones(cls.size, dtype=np.int64)
    if runs is not None:
        for n in runs.first:
            width *= runs.last[n] - runs.first[n] + 1
    return bool((np.bincount(cls)[cls] == width).all())


def tract_class_program(
    W: sp.csr_matrix,
    V: np.ndarray,
    Wt: sp.csr_matrix,
    Wtc: sp.csc_matrix,
    vt: np.ndarray,
    cls: np.ndarray,
    first: np.ndarray,
    by_class: tuple[sp.csr_matrix, sp.csc_matrix, np.ndarray] | None = None,
) -> Built:
    """The joint program of a tract's blocks at the block tables' own resolution: each block's
    variables count the type classes (:func:`type_classes`) its cells admit, the tract's count
    every type its zero cells leave, and for every class the blocks' counts sum to the tract's
    counts of its types. A solution of this program is one of :func:`tract_program`'s with the
    tract's types dealt out to the blocks (any dealing: no block cell tells them apart), with far
    fewer variables. The variables are the blocks' in order, then the tract's (:class:`Built`).
    ``by_class``: ``W`` over the classes by rows and by columns and its :func:`cell_degree`,
    when the caller has them (:func:`block_classes`)."""
    if by_class is None:
        Wcls = W[:, first].tocsr()
        by_class = (Wcls, Wcls.tocsc(), cell_degree(Wcls))
    Wcls, Wclsc, deg = by_class
    out_t = np.asarray(Wt[np.flatnonzero(vt == 0)].sum(axis=0)).ravel() > 0
    n_cls = first.size
    open_in_class = np.bincount(cls[~out_t], minlength=n_cls)
    adms = admissible_types(Wcls, V, deg, open_in_class == 0)
    B, rows, ubx = block_diagonal(Wclsc, V, adms)
    vb = np.asarray(V, dtype=np.int64).ravel()[rows]
    used = np.zeros(n_cls, dtype=bool)
    for a in adms:
        used[a] = True
    ytypes = np.flatnonzero(~out_t & used[cls])
    At = Wtc[:, ytypes].tocsr()
    keep = np.flatnonzero((np.diff(At.indptr) > 0) | (vt != 0))
    At, vk = At[keep], vt[keep]
    nx = int(sum(a.size for a in adms))
    ny = ytypes.size
    row_of = np.full(n_cls, -1, dtype=np.int64)
    row_of[used] = np.arange(int(used.sum()))
    xcls = np.concatenate(adms) if adms else np.zeros(0, dtype=np.int64)
    C = sp.hstack(
        [
            sp.csr_matrix(
                (np.ones(nx, dtype=np.int64), (row_of[xcls], np.arange(nx))),
                shape=(int(used.sum()), nx),
            ),
            sp.csr_matrix(
                (-np.ones(ny, dtype=np.int64), (row_of[cls[ytypes]], np.arange(ny))),
                shape=(int(used.sum()), ny),
            ),
        ]
    )
    A = sp.vstack(
        [
            sp.hstack([B, sp.csr_matrix((B.shape[0], ny), dtype=np.int64)]),
            sp.hstack([sp.csr_matrix((At.shape[0], nx), dtype=np.int64), At]),
            C,
        ],
        format="csr",
    ).astype(np.int64)
    v = np.concatenate([vb, vk, np.zeros(C.shape[0], dtype=np.int64)])
    big = np.iinfo(np.int64).max
    uby = np.full(ny, big, dtype=np.int64)
    np.minimum.at(uby, At.indices, np.repeat(vk, np.diff(At.indptr)))
    cap = np.bincount(xcls, weights=ubx, minlength=n_cls).astype(np.int64)  # blocks' room
    uby = np.minimum(uby, cap[cls[ytypes]])
    prog = IntProgram(A=A, lo=v, hi=v, ub=np.concatenate([ubx, uby]))
    return Built(prog, [first[a] for a in adms], ytypes, rows, keep)


@dataclass(frozen=True)
class TractProgram:
    """One tract's count program with what each variable counts and each row says: the
    program claims about its records are proven in and a contradiction is diagnosed in
    (:func:`program_of_tract`, :func:`diagnose`)."""

    prog: IntProgram
    geoids: np.ndarray  # the blocks the program holds, in order
    var_block: np.ndarray  # each variable's block (position in geoids); -1 for the tract's own
    var_type: np.ndarray  # each variable's type (a class of types: its first)
    row_geoid: np.ndarray  # each row's published cell: its block or tract ("" for a tie)
    row_cell: np.ndarray  # the cell's id ("" for a row tying classes to the tract's types)


def program_of_tract(
    long: pl.DataFrame | TableSet,
    pop: Population,
    level: str = Level.BLOCK,
    unique_on: Mapping[str, np.ndarray] | None = None,
    blocks: list[str] | None = None,
) -> TractProgram:
    """The count program of one tract's blocks (``long``: their cells and, at "block+tract",
    the tract's) over its count tables: at "block" the named ``blocks`` (by default every one)
    side by side, each from its block tables; at "block+tract" every block under the tract's
    cells. Variables count classes of types no block cell tells apart wherever every class
    has one key at ``unique_on``'s resolution (:func:`tract_class_program`), else types. Every
    variable comes with its block and type, so that a question asked of the blocks'
    histograms at that resolution (a claim, a uniqueness proof) is a linear form of them, and
    every row with the cell it publishes.

    >>> from tabrecon.records.households import synthesize_households
    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.tables.spec import tabulate_units
    >>> _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    >>> long = tabulate_units(units)
    >>> tract = long["geoid"].str.slice(0, 11).min()
    >>> from tabrecon.schema.registry import population
    >>> hu = population("households")
    >>> tp = program_of_tract(long.filter(pl.col("geoid").str.starts_with(tract)), hu)
    >>> tp.prog.n_vars == tp.var_block.size, tp.prog.n_rows == tp.row_cell.size
    (True, True)
    >>> sorted(set(tp.row_cell.tolist()))[:2]
    ['H0010001', 'H0030001']
    """
    schema = pop.schema
    names = tuple(n for n in tables_in(long, pop) if table_by_name(n, pop).statistic is None)
    block_names = tuple(n for n in names if table_by_name(n, pop).level == Geo.BLOCK)
    tract_names = tuple(n for n in names if table_by_name(n, pop).level == Geo.TRACT)
    cells, W, geo, V, _hi = block_bounds(long, pop, block_names, EXACT)
    geoids = np.asarray(geo, dtype=str)
    if np.unique(prefix(geoids, "tract")).size > 1:
        raise TabreconError("program_of_tract takes the cells of one tract")
    feas = schema.feasible_types()
    key = asked_key(pop, unique_on, block_names, tract_names if level != Level.BLOCK else ())
    cls, first, Wcls, Wclsc, deg_cls = block_classes(pop, block_names)
    by_class = classes_answer(key, cls, first)
    Wc, deg = compiled_columns(pop, block_names)
    tract_cells: list = []
    tract_geo = ""
    if level == Level.BLOCK:
        sel = np.arange(geoids.size) if blocks is None else np.searchsorted(geoids, blocks)
        sel = np.minimum(sel, max(geoids.size - 1, 0))
        if blocks is not None and not np.array_equal(geoids[sel], np.asarray(blocks, dtype=str)):
            raise TabreconError("program_of_tract: a block asked for has no cells")
        Vs = np.asarray(V, dtype=np.int64)[sel]
        cols = (Wcls, Wclsc, deg_cls) if by_class else (W, Wc, deg)
        adms = admissible_types(cols[0], Vs, cols[2])
        B, rows, ub = block_diagonal(cols[1], Vs, adms)
        if by_class:
            adms = [first[a] for a in adms]
        vb = Vs.ravel()[rows]
        built = Built(
            IntProgram(A=B, lo=vb, hi=vb, ub=ub), adms, np.zeros(0, np.int64), rows, rows[:0]
        )
    else:
        if not tract_names:
            raise TabreconError("level 'block+tract' needs tract tables; none are in the cells")
        sel = np.arange(geoids.size)
        tract_cells, Wt, tgeo, Vt = block_tables(long, pop, tract_names)
        tract_geo = str(tgeo[0])
        if by_class:
            built = tract_class_program(
                W, V, Wt, Wt.tocsc(), Vt[0], cls, first, (Wcls, Wclsc, deg_cls)
            )
        else:
            built = tract_program(W, Wc, V, Wt, Wt.tocsc(), Vt[0])
    adms, ytypes = built.adms, built.ytypes
    pos = np.concatenate([*adms, ytypes]).astype(np.int64)
    var_block = np.concatenate(
        [np.repeat(np.arange(len(adms)), [a.size for a in adms]), np.full(ytypes.size, -1)]
    ).astype(np.int64)
    n_cells = len(cells)
    ids = np.array([c.id for c in cells] + [c.id for c in tract_cells] + [""], dtype=object)
    ties = built.prog.n_rows - built.block_rows.size - built.tract_rows.size
    row_cell = np.concatenate(
        [
            ids[built.block_rows % max(n_cells, 1)],
            ids[n_cells + built.tract_rows],
            np.full(ties, ""),
        ]
    ).astype(str)
    row_geoid = np.concatenate(
        [
            geoids[sel][built.block_rows // max(n_cells, 1)],
            np.full(built.tract_rows.size, tract_geo),
            np.full(ties, ""),
        ]
    ).astype(str)
    return TractProgram(built.prog, geoids[sel], var_block, feas[pos], row_geoid, row_cell)


def diagnose(tp: TractProgram, opts: SolverOptions | None = None, limit: int = 10) -> list[dict]:
    """The published cells to blame when no population satisfies a tract's tables: the values
    whose smallest total change (published zeros held) makes the program feasible, one dict
    each (geoid, cell, published, adjust, reason), cells that published zeros leave no type to
    count first. It solves min sum(s+ + s-) subject to A x + s+ - s- = b over the published
    rows (always feasible: x = 0); the rows tying classes to a tract's types stay exact.

    >>> from tabrecon.records.households import synthesize_households
    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.tables.spec import tabulate_units
    >>> _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    >>> long = tabulate_units(units)
    >>> g = long["geoid"].min()
    >>> long = long.filter(pl.col("geoid") == g).with_columns(
    ...     value=pl.when(pl.col("cell") == "H0010001").then(pl.col("value") + 1)
    ...     .otherwise(pl.col("value")))
    >>> from tabrecon.schema.registry import population
    >>> hu = population("households")
    >>> [(c["cell"], c["adjust"]) for c in diagnose(program_of_tract(long, hu))][:1]
    [('H0010001', -1)]
    """
    from .solvers import solve

    prog = tp.prog
    published = np.flatnonzero(tp.row_cell != "")
    counts = np.diff(prog.A.indptr)
    out = [
        {
            "geoid": str(tp.row_geoid[r]),
            "cell": str(tp.row_cell[r]),
            "published": int(prog.lo[r]),
            "adjust": -int(prog.lo[r]),
            "reason": "published zeros rule out every record this cell counts",
        }
        for r in published[(counts[published] == 0) & (prog.lo[published] != 0)][:limit]
    ]
    m, n, k = prog.n_rows, prog.n_vars, published.size
    S = sp.csr_matrix((np.ones(k, dtype=np.int64), (published, np.arange(k))), shape=(m, k))
    big = int(np.abs(prog.lo).max()) if m else 0
    elastic = IntProgram(
        A=sp.hstack([prog.A, S, -S], format="csr").astype(np.int64),
        lo=prog.lo,
        hi=prog.hi,
        ub=np.concatenate([prog.ub, np.full(2 * k, big)]).astype(np.int64),
        c=np.concatenate([np.zeros(n, dtype=np.int64), np.ones(2 * k, dtype=np.int64)]),
    )
    sol = solve(elastic, opts)
    if sol.x is None:
        return out
    adj = sol.x[n : n + k] - sol.x[n + k :]
    named = {(d["geoid"], d["cell"]) for d in out}
    for i in np.flatnonzero(adj):
        if len(out) >= limit:
            break
        r = published[i]
        if (str(tp.row_geoid[r]), str(tp.row_cell[r])) in named:
            continue
        out.append(
            {
                "geoid": str(tp.row_geoid[r]),
                "cell": str(tp.row_cell[r]),
                "published": int(prog.lo[r]),
                "adjust": -int(adj[i]),
                "reason": "changing this value by 'adjust' is part of the smallest total change "
                "that restores feasibility",
            }
        )
    return out
