"""The SF1 person tables declared as data (their files: :mod:`tabrecon.tables.published`; their
consistency identities: :mod:`tabrecon.tables.consistency`; as tables over the person schema,
tabulated, read and attacked as every population's: :mod:`tabrecon.populations.persons`).

A table is a :class:`TableSpec`: a universe (a partial predicate on sex, age, race and ethnicity), a
layout naming how its lines are generated (also data: :data:`LAYOUTS`), and its geographic level.
Each line becomes a :class:`Cell` -- one predicate over the person schema with a measure
(``persons``, or ``race_tally`` which counts a person once per reported race). Every cell is turned
into a weight vector over the 27,972 person types (:mod:`tabrecon.schema`), so that

    tables(geounit) = histogram(geounit) @ W

and tabulation (:func:`tabulate`, through :func:`tabrecon.tables.spec.tabulate`) is one sparse
matrix product per level, whatever the number of tables. In memory tables are a
:class:`~tabrecon.tables.tableset.TableSet`: per level a dense (geounits x cells) matrix, ``-1``
marking a cell not published.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..schema import (
    AGE_MAX,
    N_TYPES,
    P12_BINS,
    RACE_BITS,
    RACE_COMBOS,
    RACE_COUNT,
    RACE_LABELS,
    RACES,
    TYPE_AGE,
    TYPE_HISP,
    TYPE_RACE,
    TYPE_SEX,
    Microdata,
)
from ..vocab import Geo
from .tableset import MISSING, TableSet


# --------------------------------------------------------------------------------------------------
# Cells and their predicates
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One published statistic: a predicate over the person schema and a measure.

    ``race`` is ``any``, ``includes:x`` (alone or in combination), ``exactly:x+y`` (exactly those
    races), ``count:k`` or ``count>=2``; ``hispanic`` is ``any``, ``0`` or ``1``.
    """

    id: str
    table: str
    level: str
    sex: str = "any"
    age_min: int = 0
    age_max: int = AGE_MAX
    race: str = "any"
    hispanic: str = "any"
    measure: str = "persons"

    def race_mask(self) -> np.ndarray:
        """Boolean mask over the 63 race codes (index code - 1)."""
        return race_predicate_mask(self.race)

    def type_weights(self) -> np.ndarray:
        """Weight of every person type in this cell (0 where the predicate is false)."""
        m = self.race_mask()[TYPE_RACE - 1]
        m &= (TYPE_AGE >= self.age_min) & (TYPE_AGE <= self.age_max)
        if self.sex != "any":
            m &= TYPE_SEX == (0 if self.sex == "male" else 1)
        if self.hispanic != "any":
            m &= TYPE_HISP == int(self.hispanic)
        w = m.astype(np.int8)
        if self.measure == "race_tally":
            w = w * RACE_COUNT[TYPE_RACE - 1]
        return w

    def description(self) -> str:
        parts = [{"any": "both sexes", "male": "male", "female": "female"}[self.sex]]
        if (self.age_min, self.age_max) != (0, AGE_MAX):
            if self.age_max == AGE_MAX:
                parts.append(f"age {self.age_min}+")
            elif self.age_min == self.age_max:
                parts.append(f"age {self.age_min}")
            else:
                parts.append(f"age {self.age_min}-{self.age_max}")
        parts.append(describe_race(self.race))
        if self.hispanic != "any":
            parts.append("Hispanic" if self.hispanic == "1" else "not Hispanic")
        text = ", ".join(parts)
        return f"TALLY of races over: {text}" if self.measure == "race_tally" else text


def race_predicate_mask(pred: str) -> np.ndarray:
    """Mask over race codes 1..63 (index code-1) for a race predicate string."""
    if pred == "any":
        return np.ones(63, dtype=bool)
    kind, _, arg = pred.partition(":")
    if pred.startswith("count>="):
        return RACE_COUNT >= int(pred[len("count>=") :])
    if kind == "count":
        return RACE_COUNT == int(arg)
    names = arg.split("+")
    bits = sum(1 << RACES.index(n) for n in names)
    if kind == "includes":
        return (RACE_BITS & bits) != 0
    if kind == "exactly":
        return RACE_BITS == bits
    raise ValueError(f"unknown race predicate {pred!r}")


def describe_race(pred: str) -> str:
    if pred == "any":
        return "any race"
    if pred == "count>=2":
        return "two or more races"
    kind, _, arg = pred.partition(":")
    if kind == "count":
        return f"exactly {arg} races"
    names = [RACE_LABELS[n] for n in arg.split("+")]
    if kind == "includes":
        return f"{names[0]} alone or in combination"
    return f"{names[0]} alone" if len(names) == 1 else "; ".join(names)


# --------------------------------------------------------------------------------------------------
# Layouts: how a table's lines are generated (rows as partial predicates, in SF1 line order)
# --------------------------------------------------------------------------------------------------
Row = dict  # partial predicate: any of sex, age_min, age_max, race, hispanic, measure


def _race_detail_rows() -> list[Row]:
    """P8 lines 001-071: total; one race; six alone; two or more; per k races a subtotal +
    leaves."""
    rows: list[Row] = [{}, {"race": "count:1"}]
    rows += [{"race": f"exactly:{r}"} for r in RACES]
    rows.append({"race": "count>=2"})
    for k in range(2, 7):
        rows.append({"race": f"count:{k}"})
        rows += [
            {"race": "exactly:" + "+".join(RACES[i] for i in c)} for c in RACE_COMBOS if len(c) == k
        ]
    return rows


def _hisp_race_detail_rows() -> list[Row]:
    """P9 lines 001-073: total; Hispanic; not Hispanic, followed by P8 lines 002-071 for NH."""
    return [{}, {"hispanic": "1"}, {"hispanic": "0"}] + [
        {**r, "hispanic": "0"} for r in _race_detail_rows()[1:]
    ]


def _tally_rows() -> list[Row]:
    """P6: tally of races; each race alone or in combination."""
    return [{"measure": "race_tally"}] + [{"race": f"includes:{r}"} for r in RACES]


def _hisp_tally_rows() -> list[Row]:
    """P7: tally; NH tally and races; Hispanic tally and races."""
    rows: list[Row] = [{"measure": "race_tally"}]
    for h in ("0", "1"):
        rows.append({"measure": "race_tally", "hispanic": h})
        rows += [{"race": f"includes:{r}", "hispanic": h} for r in RACES]
    return rows


def _race7_rows() -> list[Row]:
    """P3 lines 1-8: total; each race alone; two or more races."""
    return [{}] + [{"race": f"exactly:{r}"} for r in RACES] + [{"race": "count>=2"}]


def _hisp_race7_rows() -> list[Row]:
    """P5 lines 1-17: total; not Hispanic, then its P3 lines 2-8; Hispanic, then its lines 2-8."""
    rows: list[Row] = [{}]
    for h in ("0", "1"):
        rows.append({"hispanic": h})
        rows += [{**r, "hispanic": h} for r in _race7_rows()[1:]]
    return rows


def _sex_by(ages: Sequence[tuple[int, int]]) -> list[Row]:
    rows: list[Row] = [{}]
    for s in ("male", "female"):
        rows.append({"sex": s})
        rows += [{"sex": s, "age_min": lo, "age_max": hi} for lo, hi in ages]
    return rows


PCT12_AGES: tuple[tuple[int, int], ...] = tuple((a, a) for a in range(100)) + (
    (100, 104),
    (105, 109),
    (110, 110),
)

LAYOUTS: dict[str, list[Row]] = {
    "total": [{}],
    "race7": _race7_rows(),
    "hisp2": [{}, {"hispanic": "0"}, {"hispanic": "1"}],
    "hisp_race7": _hisp_race7_rows(),
    "race_tally": _tally_rows(),
    "hisp_race_tally": _hisp_tally_rows(),
    "race_detail": _race_detail_rows(),
    "hisp_race_detail": _hisp_race_detail_rows(),
    "sex_by_p12_age": _sex_by(P12_BINS),
    "sex_by_age_under20": _sex_by([(a, a) for a in range(20)]),
    "sex_by_single_age": _sex_by(PCT12_AGES),
}


@dataclass(frozen=True)
class TableSpec:
    """A published table: name, SF1 number and iteration, level, universe and layout."""

    name: str
    prefix: str  # "P" or "PCT"
    number: int
    level: str
    layout: str
    universe: Row = field(default_factory=dict, hash=False, compare=False)
    iteration: str = ""
    title: str = ""

    def cell_id(self, line: int) -> str:
        if self.iteration:
            return f"{self.prefix}{self.number:03d}{self.iteration}{line:03d}"
        return f"{self.prefix}{self.number:03d}{line:04d}"

    def cells(self) -> list[Cell]:
        out = []
        for i, row in enumerate(LAYOUTS[self.layout], start=1):
            pred = {**row}
            for k, v in self.universe.items():
                if k == "age_min":
                    pred["age_min"] = max(pred.get("age_min", 0), v)
                elif k == "age_max":
                    pred["age_max"] = min(pred.get("age_max", AGE_MAX), v)
                elif k in pred and pred[k] != v:
                    raise ValueError(f"{self.name} line {i}: row and universe both restrict {k}")
                else:
                    pred[k] = v
            out.append(Cell(id=self.cell_id(i), table=self.name, level=self.level, **pred))
        return out


#: The race/ethnicity universes of the iteration tables (P12A-I, PCT12A-O).
ITERATIONS: dict[str, Row] = {
    **{L: {"race": f"exactly:{r}"} for L, r in zip("ABCDEF", RACES, strict=True)},
    "G": {"race": "count>=2"},
    "H": {"hispanic": "1"},
    "I": {"race": "exactly:white", "hispanic": "0"},
    **{
        L: {"race": f"exactly:{r}", "hispanic": "0"}
        for L, r in zip("JKLMN", RACES[1:], strict=True)
    },
    "O": {"race": "count>=2", "hispanic": "0"},
}

ADULT = {"age_min": 18}

#: The 34 SF1 person tables used by Abowd et al.: 19 block tables and 16 tract tables.
SF1_TABLES: tuple[TableSpec, ...] = (
    TableSpec("P1", "P", 1, "block", "total", title="Total population"),
    TableSpec("P6", "P", 6, "block", "race_tally", title="Race (total races tallied)"),
    TableSpec(
        "P7",
        "P",
        7,
        "block",
        "hisp_race_tally",
        title="Hispanic or Latino origin by race (total races tallied)",
    ),
    TableSpec("P8", "P", 8, "block", "race_detail", title="Race"),
    TableSpec(
        "P9",
        "P",
        9,
        "block",
        "hisp_race_detail",
        title="Hispanic or Latino, and not Hispanic or Latino by race",
    ),
    TableSpec(
        "P10",
        "P",
        10,
        "block",
        "race_detail",
        ADULT,
        title="Race for the population 18 years and over",
    ),
    TableSpec(
        "P11",
        "P",
        11,
        "block",
        "hisp_race_detail",
        ADULT,
        title="Hispanic or Latino by race, 18 years and over",
    ),
    TableSpec("P12", "P", 12, "block", "sex_by_p12_age", title="Sex by age"),
    TableSpec(
        "P14",
        "P",
        14,
        "block",
        "sex_by_age_under20",
        {"age_max": 19},
        title="Sex by age for the population under 20 years",
    ),
    *(
        TableSpec(
            f"P12{L}", "P", 12, "block", "sex_by_p12_age", ITERATIONS[L], L, f"Sex by age ({L})"
        )
        for L in "ABCDEFGHI"
    ),
    TableSpec("PCT12", "PCT", 12, "tract", "sex_by_single_age", title="Sex by single year of age"),
    *(
        TableSpec(
            f"PCT12{L}",
            "PCT",
            12,
            "tract",
            "sex_by_single_age",
            ITERATIONS[L],
            L,
            f"Sex by single year of age ({L})",
        )
        for L in "ABCDEFGHIJKLMNO"
    ),
)

#: Published SF1 block tables beyond those 34 (implied by P8 and P9 when those are present; a
#: release may have them without P8/P9): race (P3), Hispanic or Latino (P4), and both (P5).
EXTRA_TABLES: tuple[TableSpec, ...] = (
    TableSpec("P3", "P", 3, "block", "race7", title="Race"),
    TableSpec("P4", "P", 4, "block", "hisp2", title="Hispanic or Latino origin"),
    TableSpec("P5", "P", 5, "block", "hisp_race7", title="Hispanic or Latino origin by race"),
)
#: Cells that count a block's whole population, in the order they are trusted.
WHOLE_POPULATION_CELLS = (
    "P0010001",
    "P0030001",
    "P0040001",
    "P0050001",
    "P0080001",
    "P0090001",
    "P0120001",
)
#: Every person table tabrecon reads: the 34, then P3-P5 (so the 34's cell indices never move).
ALL_TABLES: tuple[TableSpec, ...] = SF1_TABLES + EXTRA_TABLES
TABLES_BY_NAME: dict[str, TableSpec] = {t.name: t for t in ALL_TABLES}
BLOCK_TABLES = tuple(t.name for t in SF1_TABLES if t.level == Geo.BLOCK)
TRACT_TABLES = tuple(t.name for t in SF1_TABLES if t.level == Geo.TRACT)


@functools.lru_cache(maxsize=1)
def all_cells() -> tuple[Cell, ...]:
    """Every cell of every table tabrecon reads, in table then line order: the 34 tables (844
    block + 3,344 tract cells), then P3, P4 and P5 (28 block cells)."""
    return tuple(c for t in ALL_TABLES for c in t.cells())


@functools.lru_cache(maxsize=1)
def cell_index() -> dict[str, int]:
    return {c.id: i for i, c in enumerate(all_cells())}


def get_cell(cell_id: str) -> Cell:
    try:
        return all_cells()[cell_index()[cell_id]]
    except KeyError:
        raise InputError(f"unknown cell id {cell_id!r}") from None


@functools.lru_cache(maxsize=1)
def weight_matrix() -> sp.csc_matrix:
    """Sparse (N_TYPES x all cells) matrix of cell weights (int32)."""
    rows, cols, data = [], [], []
    for j, c in enumerate(all_cells()):
        w = c.type_weights()
        nz = np.flatnonzero(w)
        rows.append(nz)
        cols.append(np.full(nz.size, j, dtype=np.int32))
        data.append(w[nz].astype(np.int32))
    return sp.csc_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
        shape=(N_TYPES, len(all_cells())),
    )


def resolve_tables(tables: Iterable[str] | str | None) -> list[str]:
    """Table names from a list, a comma list, ``block``, ``tract``, ``all`` (default: the 34
    tables of Abowd et al.) or ``published`` (those and P3, P4, P5)."""
    if tables is None or tables == "all":
        return [t.name for t in SF1_TABLES]
    if tables == "published":
        return [t.name for t in ALL_TABLES]
    if isinstance(tables, str):
        if tables == Geo.BLOCK:
            return list(BLOCK_TABLES)
        if tables == Geo.TRACT:
            return list(TRACT_TABLES)
        tables = [t.strip() for t in tables.split(",") if t.strip()]
    out = []
    for t in tables:
        name = t.upper()
        if name not in TABLES_BY_NAME:
            raise InputError(f"unknown table {t!r}; known tables: {', '.join(TABLES_BY_NAME)}")
        out.append(name)
    if not out:
        raise InputError(
            "no table selected: give 'all', 'published', 'block', 'tract' or a comma list such as "
            "P1,P12,PCT12"
        )
    return out


# --------------------------------------------------------------------------------------------------
# Tabulation
# --------------------------------------------------------------------------------------------------
def cell_positions(ids: np.ndarray) -> np.ndarray:
    """Global index of each cell id (vectorised); raises KeyError on an unknown id."""
    order, sorted_ids = _sorted_ids()
    ids = np.asarray(ids, dtype=str)
    pos = np.searchsorted(sorted_ids, ids)
    pos = np.minimum(pos, len(sorted_ids) - 1)
    if ids.size and (sorted_ids[pos] != ids).any():
        raise KeyError(str(ids[sorted_ids[pos] != ids][0]))
    return order[pos]


@functools.lru_cache(maxsize=1)
def _sorted_ids() -> tuple[np.ndarray, np.ndarray]:
    ids = np.array([c.id for c in all_cells()])
    order = np.argsort(ids)
    return order, ids[order]


@functools.lru_cache(maxsize=1)
def cell_attrs() -> dict[str, np.ndarray]:
    """Attributes of every cell as arrays indexed like :func:`all_cells` (for vectorised
    selection)."""
    cs = all_cells()
    return {
        "table": np.array([c.table for c in cs]),
        "level": np.array([c.level for c in cs]),
        "sex": np.array([c.sex for c in cs]),
        "age_min": np.array([c.age_min for c in cs]),
        "age_max": np.array([c.age_max for c in cs]),
        "race": np.array([c.race for c in cs]),
        "hispanic": np.array([c.hispanic for c in cs]),
        "measure": np.array([c.measure for c in cs]),
    }


def tabulate(
    md: Microdata,
    tables: Iterable[str] | str | None = None,
    level: str | None = None,
) -> TableSet:
    """Tabulate person records into published tables, zero cells included: the tabulation every
    population's records go through (:func:`tabrecon.tables.spec.tabulate`), the tables chosen
    by their person names (``all``, ``published``, ``block``, ``tract`` or a list:
    :func:`resolve_tables`). Each table is computed at its own level (block or tract) unless
    ``level`` is given, in which case every requested table is computed at that level (e.g.
    ``"county"``, ``"state"``, ``"blockgroup"``).
    """
    from ..schema import person_units
    from .spec import tabulate as tabulate_records

    return tabulate_records(person_units(md), resolve_tables(tables), level)


def drop_cells(ts: TableSet, cells: Iterable[str]) -> TableSet:
    """A copy with the given cells marked not published (for suppression experiments)."""
    drop = set(cells)
    out = {}
    for lvl, g in ts.grids.items():
        v = g.values.copy()
        m = np.isin(g.cells, list(drop))
        v[:, m] = MISSING
        out[lvl] = replace(g, values=v)
    return TableSet(out, ts.source)
