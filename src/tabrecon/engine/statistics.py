"""The medians and means a release publishes for its blocks, as rows of each block's count
program: :func:`block_statistics` reads them (each block's value of each statistic cell, a
value no nonempty universe can publish refused naming the block and the cell), and
:meth:`BlockStatistics.rows` turns a block's values into rows over its admissible types
(:meth:`tabrecon.tables.measures.Statistic.rows`), what :func:`~tabrecon.engine.model.block_program`
appends after the block's cells.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError
from ..tables.measures import WITHHELD, format_values
from ..tables.publication import EXACT, MISSING, Publication
from ..tables.spec import StatisticCell, cell_tables, compiled_statistics, statistic_counts
from ..tables.tableset import TableSet

if TYPE_CHECKING:
    from ..schema.registry import Population


@dataclass(frozen=True)
class BlockStatistics:
    """The medians and means a release publishes for its blocks: the compiled cells
    (:class:`~tabrecon.tables.spec.StatisticCell`) and their values (blocks x cells, published
    units), for the count model's extra rows (:func:`block_program`'s ``extra``)."""

    cells: tuple[StatisticCell, ...]
    values: np.ndarray
    n_cols: int
    #: a withheld value says nothing (a release that withholds counts withholds a statistic
    #: with its universe's count, which may be any the rule withholds); else it says the
    #: universe is empty (a declared ``empty = None``)
    withheld_unknown: bool = False
    #: the fewest and the most records each statistic's universe can have in each block
    #: (blocks x cells, each), from the published count of the same universe; -1 where none is
    #: published
    fewest: np.ndarray | None = None
    most: np.ndarray | None = None

    def __bool__(self) -> bool:
        return bool(self.cells)

    def rows(
        self, b: int, cols: np.ndarray | None = None, ub: np.ndarray | None = None
    ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
        """Block ``b``'s rows over the feasible types, or over the positions ``cols`` among them
        (sorted: a block's admissible types, ``ub`` their bounds), None without statistics."""
        if not self.cells:
            return None
        parts = []
        for j, (sc, v) in enumerate(zip(self.cells, self.values[b], strict=True)):
            if self.withheld_unknown and v == WITHHELD:
                continue
            if cols is None:
                parts.append(sc.rows(int(v), self.n_cols))
                continue
            # only the block's admissible types: the universe (~28,000 person types) is
            # the cost otherwise (measured: 9 ms a cell, most of the median ages' time)
            pos = np.searchsorted(cols, sc.universe)
            hit = (pos < cols.size) & (cols[np.minimum(pos, cols.size - 1)] == sc.universe)
            bound = None if ub is None else int(ub[pos[hit]].sum())
            count = None
            if self.most is not None and self.fewest is not None and self.most[b, j] >= 0:
                # the published count of the universe, a row of the program: a tighter bound
                # than the types' bounds summed, and where exact, the midpoint median's tight rows
                bound = int(self.most[b, j]) if bound is None else min(bound, int(self.most[b, j]))
                if self.fewest[b, j] == self.most[b, j]:
                    count = int(self.most[b, j])
            parts.append(
                sc.statistic.rows(
                    int(v), pos[hit], sc.numbers[hit], int(cols.size), bound=bound, count=count
                )
            )
        if not parts:  # every statistic of the block withheld
            n = self.n_cols if cols is None else int(cols.size)
            return sp.csr_matrix((0, n), dtype=np.int64), np.zeros(0), np.zeros(0)
        return (
            sp.vstack([p[0] for p in parts], format="csr"),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )

    def at(self, b: int) -> Callable[[np.ndarray, np.ndarray], tuple | None] | None:
        """Block ``b``'s rows as :func:`block_program` takes them: given its admissible types
        and their bounds."""
        return (lambda cols, ub: self.rows(b, cols, ub)) if self.cells else None


def block_statistics(
    long: pl.DataFrame | TableSet,
    pop: Population,
    names: tuple[str, ...],
    geoids: list[str],
    publication: Publication = EXACT,
) -> BlockStatistics:
    """The named tables' median and mean cells for the blocks ``geoids`` (every block needs
    every such cell once; a value no nonempty universe can publish, a median of 120 years, is
    refused naming the block and the cell), read under the counts' ``publication``: where it
    withholds counts it withholds a statistic with its universe's count, so a withheld one says
    nothing (:attr:`BlockStatistics.withheld_unknown`); the published count of a statistic's
    universe bounds its records (:attr:`BlockStatistics.most`)."""
    withheld_unknown = publication.withholds
    schema = pop.schema
    cells = compiled_statistics(pop, tuple(names))
    n_cols = int(schema.feasible_types().size)
    if not cells:
        return BlockStatistics((), np.zeros((len(geoids), 0), dtype=np.int64), n_cols)
    if isinstance(long, TableSet):
        long = long.to_frame()
    ids = [sc.cell.id for sc in cells]
    sub = (
        long.filter(pl.col("cell").is_in(ids))
        .join(
            pl.DataFrame({"geoid": geoids, "_g": np.arange(len(geoids), dtype=np.int64)}),
            on="geoid",
        )
        .join(pl.DataFrame({"cell": ids, "_c": np.arange(len(ids), dtype=np.int64)}), on="cell")
    )
    flat = sub["_g"].to_numpy() * len(ids) + sub["_c"].to_numpy()
    seen = np.bincount(flat, minlength=len(geoids) * len(ids))
    if (seen != 1).any():
        b, c = divmod(int(np.argmax(seen != 1)), len(ids))
        raise InputError(
            f"{schema.geography} {geoids[b]} has cell {ids[c]} {int(seen[b * len(ids) + c])} "
            f"times ({int((seen != 1).sum()) - 1} more such cells): each median or mean once per "
            f"{schema.geography}"
        )
    flat_v = np.zeros(len(geoids) * len(ids), dtype=np.int64)
    flat_v[flat] = sub["value"].fill_null(WITHHELD).to_numpy()
    V = flat_v.reshape(len(geoids), len(ids))
    for j, sc in enumerate(cells):
        stat = sc.statistic
        lo, hi = stat.range(stat.numbers(schema.attribute(stat.of).codes))
        empty = WITHHELD if stat.empty is None else stat.empty
        bad = (V[:, j] != empty) & ((V[:, j] < lo) | (V[:, j] > hi))
        if withheld_unknown:
            bad &= V[:, j] != WITHHELD
        if bad.any():
            b = int(np.argmax(bad))
            shown = format_values([int(V[b, j])], stat.decimals)[0]
            more = int(bad.sum()) - 1
            raise InputError(
                f"{schema.geography} {geoids[b]}, cell {ids[j]} ({sc.cell.table}): {shown} is "
                f"outside what the {stat} can be ({format_values([lo], stat.decimals)[0]} to "
                f"{format_values([hi], stat.decimals)[0]})"
                + (f"; {more} more such {schema.geography}s" if more else "")
            )
    fewest, most = _universe_counts(
        long, pop, tuple(names), cells=cells, geoids=geoids, publication=publication
    )
    return BlockStatistics(cells, V, n_cols, withheld_unknown, fewest=fewest, most=most)


def _universe_counts(
    long: pl.DataFrame,
    pop: Population,
    names: tuple[str, ...],
    *,
    cells: tuple[StatisticCell, ...],
    geoids: list[str],
    publication: Publication,
) -> tuple[np.ndarray, np.ndarray]:
    """The fewest and the most records each statistic cell's universe can have in each block
    (blocks x cells, each): the true counts its published count cells allow (the narrowest,
    where there are several), -1 where none is published. Only the named tables' cells count:
    they are the program's rows, so no solution of the program leaves the interval."""
    shape = (len(geoids), len(cells))
    counts_of = statistic_counts(pop)
    table = cell_tables(pop)
    pairs = [
        (c, j)
        for j, sc in enumerate(cells)
        for c in counts_of.get(sc.cell.id, ())
        if table[c] in names
    ]
    if not pairs:
        return np.full(shape, -1, dtype=np.int64), np.full(shape, -1, dtype=np.int64)
    sub = long.join(
        pl.DataFrame({"cell": [c for c, _ in pairs], "_c": [j for _, j in pairs]}), on="cell"
    ).join(
        pl.DataFrame({"geoid": geoids, "_g": np.arange(len(geoids), dtype=np.int64)}), on="geoid"
    )
    lo, hi = publication.interval(
        sub["value"].fill_null(MISSING).to_numpy(), [table[c] for c in sub["cell"].to_list()]
    )
    at = (sub["_g"].to_numpy(), sub["_c"].to_numpy())
    big = np.iinfo(np.int64).max
    fewest, most = np.full(shape, -1, dtype=np.int64), np.full(shape, big, dtype=np.int64)
    np.maximum.at(fewest, at, lo)
    np.minimum.at(most, at, hi)
    return fewest, np.where(most == big, -1, most)
