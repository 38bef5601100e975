"""Published tables in memory, for any population: per geographic level a dense
(geounits x cells) matrix, :class:`Grid`, ``MISSING`` where a cell is not published and
``WITHHELD_CELL`` where it is published as withheld; a :class:`TableSet` holds one grid per level
and the population whose tables they are (the value, :mod:`tabrecon.schema.registry`). Every
reader returns one (:func:`tabrecon.tables.reader.read_unit_tables`,
:func:`tabrecon.tables.published.read_tables`); :meth:`TableSet.to_frame` makes the long table
(geoid, cell, value) files hold, and :meth:`TableSet.by_tract` each tract's part without copying.

>>> from tabrecon.schema.registry import population
>>> g = Grid("block", np.array(["1" * 15]), np.array(["H0010001"]), np.array([[4]]))
>>> TableSet({"block": g}, population=population("households")).tables_present()
['H1']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..geo import LENGTH, LEVEL_OF_LENGTH
from ..vocab import Geo

if TYPE_CHECKING:
    from ..schema.registry import Population

#: a cell not published
MISSING = -1
#: a cell published as withheld (a null value in a long table)
WITHHELD_CELL = -2


class TwiceError(TabreconError):
    """A (geoid, cell) given twice in a long table: ``row`` is the second one's position."""

    def __init__(self, message: str, row: int) -> None:
        super().__init__(message)
        self.row = row


@dataclass
class Grid:
    """Values of some cells for the geounits of one level: ``MISSING`` (-1) where not published,
    ``WITHHELD_CELL`` (-2) where published as withheld (a release that suppresses cells)."""

    level: str
    geoids: np.ndarray  # sorted str
    cells: np.ndarray  # str cell ids
    values: np.ndarray  # int64 (n_geo, n_cells)

    def col(self, cell_id: str) -> np.ndarray:
        j = np.flatnonzero(self.cells == cell_id)
        if not j.size:
            raise KeyError(cell_id)
        return self.values[:, j[0]]

    def present(self) -> np.ndarray:
        return self.values != MISSING

    def take_geo(self, mask: np.ndarray) -> Grid:
        return Grid(self.level, self.geoids[mask], self.cells, self.values[mask])


def _positions(cells: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each of ``ids``' column among ``cells``, -1 where absent: by binary search where the
    cells are sorted (as every reader leaves them), else by a dictionary."""
    if not cells.size or not ids.size:
        return np.full(ids.size, -1, dtype=np.int64)
    if (cells[1:] > cells[:-1]).all():
        pos = np.minimum(np.searchsorted(cells, ids), cells.size - 1)
        return np.where(cells[pos] == ids, pos, -1).astype(np.int64)
    at = {c: j for j, c in enumerate(cells.tolist())}
    return np.array([at.get(c, -1) for c in ids.tolist()], dtype=np.int64)


@dataclass
class TableSet:
    """Published tables of one population, one :class:`Grid` per geographic level. The
    population is the value itself (its tables, in its release), handed down from where the
    user chose it: nothing reading a table set looks a population up by name."""

    grids: dict[str, Grid]
    population: Population = field(kw_only=True)
    source: str = ""
    #: rows of the file read that hold no geography of these tables, by kind, as (rows,
    #: values): a wide file's nation row, ``{"summary level 010": (1, 49)}``
    skipped: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __getitem__(self, level: str) -> Grid:
        return self.grids[level]

    def levels(self) -> list[str]:
        return list(self.grids)

    def inhabited_blocks(self) -> np.ndarray:
        """The geoids of the blocks whose published population is above zero (every block when
        no whole-population cell is published; none without block tables)."""
        g = self.grids.get("block")
        if g is None:
            return np.zeros(0, dtype=str)
        pop = self.block_population()
        return g.geoids if pop is None else g.geoids[pop > 0]

    def block_population(self) -> np.ndarray | None:
        """Each block's number of records from whichever cell that counts them all is published
        (the population's :attr:`~tabrecon.schema.registry.Population.total_cells`, in the order
        trusted: persons P1, or the total line of P3, P4, P5, P8, P9 or P12, since the P.L.
        94-171 tables have no P1), in the order of the block grid's geoids; None without block
        tables or any such cell. Blocks with none of them published count as 0."""
        g = self.grids.get("block")
        if g is None:
            return None
        have = set(g.cells.tolist())
        totals = [c for c in self.population.total_cells if c in have]
        if not totals:
            return None
        v = np.stack([g.col(c) for c in totals], axis=1)
        return np.where(v >= 0, v, -1).max(axis=1).clip(min=0)

    def cells_present(self) -> set[str]:
        """The cell ids of which some geounit has a value (published, or published as withheld):
        those :meth:`to_frame` has a row of."""
        have: set[str] = set()
        for g in self.grids.values():
            have.update(g.cells[g.present().any(axis=0)].tolist())
        return have

    def tables_present(self) -> list[str]:
        """The population's tables of which a value is published, in declaration order."""
        have = self.cells_present()
        return [t.name for t in self.population.tables() if any(c.id in have for c in t.cells())]

    def values_of(self, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The cells ``ids`` as (geoids, values): the sorted geounits that have a value of any
        of them, and their values (geounits x ``ids``; ``MISSING`` where a geounit has none,
        ``WITHHELD_CELL`` where withheld): what :meth:`to_frame` holds of these cells, without
        making it (a tract's block tables: 0.3 ms against 5-7 ms by the long table's joins).

        >>> g = Grid("block", np.array(["1" * 15, "2" * 15]), np.array(["A", "B"]),
        ...          np.array([[4, -1], [-1, -1]]))
        >>> from tabrecon.schema.registry import population
        >>> geo, v = TableSet({"block": g}, population=population("persons")).values_of(["B", "A"])
        >>> geo.tolist() == ["1" * 15], v.tolist()
        (True, [[-1, 4]])
        """
        geos, vals = [], []
        want = np.asarray(ids, dtype=str)
        for g in self.grids.values():
            js = _positions(g.cells, want)
            found = np.flatnonzero(js >= 0)
            if not found.size:
                continue
            v = np.full((g.geoids.size, len(ids)), MISSING, dtype=np.int64)
            v[:, found] = g.values[:, js[found]]
            has = (v != MISSING).any(axis=1)
            geos.append(g.geoids[has].astype(str))
            vals.append(v[has])
        if not geos:
            return np.zeros(0, dtype=str), np.zeros((0, len(ids)), dtype=np.int64)
        geo, val = np.concatenate(geos), np.concatenate(vals)
        order = np.argsort(geo, kind="stable")
        return geo[order], val[order]

    def to_frame(self) -> pl.DataFrame:
        """Long table (geoid, cell, value) of every published value, zeros included; a withheld
        cell's value is null."""
        frames = []
        for g in self.grids.values():
            ng, nc = g.values.shape
            val = g.values.ravel()
            keep = np.flatnonzero(val != MISSING)
            gi, ci = np.divmod(keep, nc)
            value = pl.Series("value", val[keep])
            if (val[keep] == WITHHELD_CELL).any():
                value = value.replace(WITHHELD_CELL, None)
            frames.append(
                pl.DataFrame(
                    {
                        "geoid": pl.Series(g.geoids.astype(str)).gather(gi),
                        "cell": pl.Series(g.cells.astype(str)).gather(ci),
                        "value": value,
                    }
                )
            )
        if not frames:
            return pl.DataFrame(schema={"geoid": pl.String, "cell": pl.String, "value": pl.Int64})
        return pl.concat(frames)

    @classmethod
    def from_long(cls, long: pl.DataFrame, population: Population, source: str = "") -> TableSet:
        """The tables of a checked long table (geoid, cell, value; a null value a withheld cell)
        of ``population``'s cells, each row in the grid of its level: over census geography the
        level its geoid's length names (a block table's cells may be given for tracts and
        counties too: :meth:`own_levels` keeps what the engine reads), over a declared one its
        cell's table's (``block`` for the declared geography's ids, or ``tract``).

        >>> long = pl.DataFrame({"geoid": ["1" * 15, "2" * 15, "1" * 15],
        ...                      "cell": ["H0040002", "H0040001", "H0040001"],
        ...                      "value": [1, None, 3]})
        >>> from tabrecon.schema.registry import population
        >>> ts = TableSet.from_long(long, population("households"))
        >>> ts["block"].cells.tolist(), ts["block"].values.tolist()
        (['H0040001', 'H0040002'], [[3, 1], [-2, -1]])
        >>> ts.to_frame().sort("geoid", "cell").equals(long.sort("geoid", "cell"))
        True
        """
        ids = cell_ids(population)
        known = long["cell"].is_in(ids)
        if not known.all():
            cell = long.filter(~known)["cell"][0]
            raise TabreconError(f"cell {cell!r} is not one of the {population.key} tables' cells")
        geo = long["geoid"]
        geoids = geo.unique().sort()
        return cls.from_codes(
            population,
            geoids.to_numpy().astype(str),
            geo.cast(pl.Enum(geoids)).to_physical().to_numpy(),
            long["cell"].cast(pl.Enum(ids)).to_physical().to_numpy(),
            long["value"].fill_null(WITHHELD_CELL).to_numpy(),
            source=source,
        )

    @classmethod
    def from_codes(
        cls,
        population: Population,
        geoids: np.ndarray,
        geo: np.ndarray,
        cell: np.ndarray,
        value: np.ndarray,
        source: str = "",
    ) -> TableSet:
        """:meth:`from_long` of rows given as codes: row ``i`` holds ``value[i]``
        (``WITHHELD_CELL`` for a withheld cell) of the cell ``cell_ids(population)[cell[i]]`` for
        the geography ``geoids[geo[i]]`` (``geoids`` sorted and unique, str). What a reader builds
        without a long table of text (a wide file's 18 million values are never unpivoted); a
        (geography, cell) given twice raises :class:`TwiceError` naming its row.

        >>> from tabrecon.schema.registry import population
        >>> ts = TableSet.from_codes(population("households"), np.array(["1" * 15]),
        ...                          np.array([0, 0]), np.array([1, 0]), np.array([5, 7]))
        >>> ts["block"].cells.tolist(), ts["block"].values.tolist()
        (['H0010001', 'H0030001'], [[7, 5]])
        """
        pop = population
        ids, levels, of_code = _cells_of(pop)
        if pop.schema.geography == Geo.BLOCK:  # census: the geoid's length names the level
            lengths = sorted(LEVEL_OF_LENGTH, reverse=True)  # blocks first
            levels = [LEVEL_OF_LENGTH[n] for n in lengths]
            at = np.full(max(lengths) + 1, -1, dtype=np.int64)
            at[lengths] = np.arange(len(levels))
            glen = np.char.str_len(geoids.astype(str)) if geoids.size else np.zeros(0, int)
            of_geo = at[np.minimum(glen, at.size - 1)]
            if (of_geo < 0).any():
                bad = geoids[int(np.argmax(of_geo < 0))]
                raise TabreconError(f"geoid {bad!r} is no census geography's")
            lvl = of_geo[geo]
        else:
            lvl = of_code[cell]
        grids: dict[str, Grid] = {}
        for i in np.flatnonzero(np.bincount(lvl)).tolist():  # (one level: nothing gathered)
            rows = None if (lvl == i).all() else np.flatnonzero(lvl == i)
            codes = cell if rows is None else cell[rows]
            gsel = geo if rows is None else geo[rows]
            has = np.bincount(gsel, minlength=geoids.size) > 0
            gi = (np.cumsum(has) - 1)[gsel]
            held = np.bincount(codes, minlength=len(ids)) > 0
            used = np.flatnonzero(held)
            values = np.full((int(has.sum()), used.size), MISSING, dtype=np.int64)
            col = (np.cumsum(held) - 1)[codes]
            values[gi, col] = value if rows is None else value[rows]
            if int((values != MISSING).sum()) != codes.size:  # a (geoid, cell) given twice
                flat = gi.astype(np.int64) * used.size + col
                _, first = np.unique(flat, return_index=True)
                again = int(np.setdiff1d(np.arange(flat.size), first)[0])
                row = again if rows is None else int(rows[again])
                raise TwiceError(
                    f"cell {ids[cell[row]]!r} is given twice for geoid {geoids[geo[row]]!r}",
                    row,
                )
            level = levels[i]
            cells = np.array(ids, dtype=str)[used]
            grids[level] = Grid(level, geoids[has].astype(str), cells, values)
        return cls(grids, source=source, population=population)

    def own_levels(self, tables: Iterable[str] | None = None) -> TableSet:
        """Each table's declared cells at its own level only (of ``tables``, or of every table
        of the population): what the engine reads (the population's unmodelled cells left out).
        A block table's values given for tracts and counties too sum its blocks' and are left
        out; a grid is copied only where some of its cells are.

        >>> from tabrecon.schema.registry import population
        >>> long = pl.DataFrame({"geoid": ["1" * 15, "1" * 11], "cell": ["H0010001"] * 2,
        ...                      "value": [3, 3]})
        >>> TableSet.from_long(long, population("households")).own_levels().levels()
        ['block']
        """
        pop = self.population
        names = None if tables is None else set(tables)
        at: dict[str, list[str]] = {}
        for t in pop.tables():
            if names is None or t.name in names:
                at.setdefault(t.level, []).extend(c.id for c in t.cells())
        kept = {}
        for lvl, g in self.grids.items():
            keep = np.isin(g.cells.astype(str), at.get(lvl, []))
            if keep.all():
                kept[lvl] = g
            elif keep.any():
                kept[lvl] = Grid(lvl, g.geoids, g.cells[keep], g.values[:, keep])
        return TableSet(kept, source=self.source, population=self.population)

    def subset(self, tract: str) -> TableSet:
        """The tables of one tract (its blocks and the tract itself)."""
        out = {}
        for lvl, g in self.grids.items():
            n = Geo.TRACT.length
            if LENGTH[lvl] < n:
                continue
            mask = np.char.startswith(g.geoids.astype(str), tract)
            out[lvl] = g.take_geo(mask)
        return TableSet(out, source=self.source, population=self.population)

    def by_tract(self, cells: Iterable[str] | None = None) -> dict[str, TableSet]:
        """Each tract's tables (:meth:`subset`: its blocks and the tract itself) at once, for the
        tracts with a value published, in order. Each grid is sorted by geoid, so a tract's
        rows are one run and its grids views of the release's (copied only where ``cells``, the
        columns to keep, leaves some out).

        >>> from tabrecon.records.synth import SynthConfig, synthesize
        >>> from tabrecon.tables.persons import tabulate
        >>> ts = tabulate(synthesize(SynthConfig(persons=2_000), seed=1))
        >>> parts = ts.by_tract(["P0010001"])
        >>> list(parts) == ts.tracts(), set(parts[ts.tracts()[0]].grids)
        (True, {'block'})
        >>> parts[ts.tracts()[0]].to_frame().equals(
        ...     ts.subset(ts.tracts()[0]).to_frame().filter(pl.col("cell") == "P0010001"))
        True
        """
        keep_cells = None if cells is None else np.asarray(sorted(set(cells)), dtype=str)
        out: dict[str, dict[str, Grid]] = {}
        for lvl, g in self.grids.items():
            if LENGTH[lvl] < Geo.TRACT.length:
                continue
            keep = (
                np.ones(len(g.cells), dtype=bool)
                if keep_cells is None
                else np.isin(g.cells.astype(str), keep_cells)
            )
            if not keep.any():
                continue
            geoids, values = g.geoids.astype(str), g.values
            if geoids.size > 1 and not (geoids[:-1] <= geoids[1:]).all():
                order = np.argsort(geoids, kind="stable")
                geoids, values = geoids[order], values[order]
            if not keep.all():
                values = values[:, keep]
            held = (values != MISSING).any(axis=1)
            tracts, starts = np.unique(geoids.astype(f"U{Geo.TRACT.length}"), return_index=True)
            ends = np.append(starts[1:], geoids.size)
            for t, a, b in zip(tracts.tolist(), starts.tolist(), ends.tolist(), strict=True):
                if held[a:b].any():
                    out.setdefault(t, {})[lvl] = Grid(lvl, geoids[a:b], g.cells[keep], values[a:b])
        return {
            t: TableSet(out[t], source=self.source, population=self.population) for t in sorted(out)
        }

    def tracts(self) -> list[str]:
        ids: set[str] = set()
        for lvl, g in self.grids.items():
            if LENGTH[lvl] >= Geo.TRACT.length:
                ids.update(s[:11] for s in g.geoids)
        return sorted(ids)


_CELLS: dict[str, tuple[Population, tuple[list[str], list[str], np.ndarray]]] = {}


def cell_ids(pop: Population) -> list[str]:
    """Every cell ``pop``'s tables publish, in declaration order: what the codes of
    :meth:`TableSet.from_codes` index."""
    return _cells_of(pop)[0]


def _cells_of(pop: Population) -> tuple[list[str], list[str], np.ndarray]:
    """``pop``'s cell ids in declaration order, its tables' levels, and each cell's level (an
    index into them), made once per registered population (a declaration read again is
    another)."""
    held = _CELLS.get(pop.key)
    if held is None or held[0] is not pop:
        level_of = dict(pop.published_cells())
        levels = list(dict.fromkeys(level_of.values()))
        of_code = np.array([levels.index(v) for v in level_of.values()], dtype=np.int64)
        held = _CELLS[pop.key] = (pop, (list(level_of), levels, of_code))
    return held[1]
