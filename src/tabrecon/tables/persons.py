"""The SF1 person tables declared as data (their files: :mod:`tabrecon.tables.published`; their
consistency identities: :mod:`tabrecon.tables.consistency`; as tables over the person schema,
tabulated, read and attacked as every population's: :mod:`tabrecon.populations.persons`).

A table is a :class:`TableSpec` declared from the Bureau's own layout of SF1 2010
(:mod:`tabrecon.tables.layout`): ids, line order, title and universe are the file's; what this
module adds is how a stub's words read as a predicate on sex, age, race and ethnicity
(:func:`stub_predicate`: "Male:", "22 to 24 years", "White; Asian", "Population of two races").
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
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError
from ..schema import (
    AGE_MAX,
    N_TYPES,
    RACE_BITS,
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
from .layout import STUB_SEPARATOR, level_of, name_parts, rows, stub_key, title_of
from .tableset import MISSING, TableSet

if TYPE_CHECKING:
    pass


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
# The tables, declared from the Bureau's layout: each stub's predicate read from its words
# --------------------------------------------------------------------------------------------------
Row = dict  # a partial predicate: any of sex, age_min, age_max, race, hispanic, measure
#: a race's label in SF1's stubs -> its name (``White`` -> ``white``)
_RACE_OF_LABEL = {label: r for r, label in RACE_LABELS.items()}
_NUMBERS = ("one", "two", "three", "four", "five", "six")
_AGE_WORDS = (  # a stub's ages: (pattern, first year, last year) from its numbers
    (r"Under (\d+) years?", lambda a: (0, a[0] - 1)),
    (r"(\d+) years and over", lambda a: (a[0], AGE_MAX)),
    (r"(\d+) (?:to|and) (\d+) years", lambda a: (a[0], a[1])),
    (r"(\d+) years?", lambda a: (a[0], a[0])),
)


def _races(words: str) -> str:
    """A race stub's predicate: ``includes:x`` (alone or in combination), ``exactly:x+y``,
    ``count:k`` or ``count>=2``; empty for a stub that is not a race."""
    if words == "Two or More Races":
        return "count>=2"
    if m := re.fullmatch(r"Population of (\w+) races?", words):
        return f"count:{_NUMBERS.index(m.group(1)) + 1}"
    if m := re.fullmatch(r"(.+) alone or in combination with one or more other races", words):
        return f"includes:{_RACE_OF_LABEL[m.group(1)]}"
    names = words.removesuffix(" alone").split("; ")
    if all(n in _RACE_OF_LABEL for n in names):
        return "exactly:" + "+".join(_RACE_OF_LABEL[n] for n in names)
    return ""


def stub_predicate(stub: str) -> Row:
    """What one stub of an SF1 person table says of a person, as :class:`Cell` fields; a stub
    the person schema cannot say is refused (a table is declared whole or not at all).

    >>> stub_predicate("Female:"), stub_predicate("22 to 24 years")
    ({'sex': 'female'}, {'age_min': 22, 'age_max': 24})
    >>> stub_predicate("White; Asian"), stub_predicate("Total races tallied:")
    ({'race': 'exactly:white+asian'}, {'measure': 'race_tally'})
    """
    return dict(_stub_predicate(stub))  # a copy: the cached one is shared


@functools.cache
def _stub_predicate(stub: str) -> Row:
    words = stub_key(stub)
    if words.lower() in ("total", "total population"):
        return {}
    if words == "Total races tallied":
        return {"measure": "race_tally"}
    if words in ("Male", "Female"):
        return {"sex": words.lower()}
    if words in ("Hispanic or Latino", "Not Hispanic or Latino"):
        return {"hispanic": "1" if words == "Hispanic or Latino" else "0"}
    for pattern, years in _AGE_WORDS:
        if m := re.fullmatch(pattern, words):
            lo, hi = years([int(g) for g in m.groups()])
            return {"age_min": lo, "age_max": hi}
    if race := _races(words):
        return {"race": race}
    raise InputError(f"no person predicate for the SF1 stub {words!r}")


def _universe(words: str) -> Row:
    """A table's universe in the layout's words (``People who are Asian alone, not Hispanic or
    Latino``, ``Population 18 years and over``) as :class:`Cell` fields; the tallies' universe
    (``Total races tallied``) says how P6 and P7 count, not whom, and restricts no one."""
    out: Row = {}
    for part in words.removeprefix("People who are ").removeprefix("Population ").split(", "):
        out |= stub_predicate(part[:1].upper() + part[1:])  # "not Hispanic...": a stub's words
    out.pop("measure", None)
    return out


@dataclass(frozen=True)
class TableSpec:
    """A published person table as SF1 2010 lays it out (name, title and universe the
    layout's): its cells in line order, each the intersection of its stub path's predicates
    within the table's universe, the deepest stub of a kind the most specific (``Population of
    two races: !! White; Asian``)."""

    name: str
    prefix: str  # "P" or "PCT"
    number: int
    level: str
    title: str
    universe: str
    _cells: tuple[Cell, ...] = field(repr=False)

    def cells(self) -> list[Cell]:
        return list(self._cells)


def _declare(table: str, df: pl.DataFrame) -> TableSpec:
    """``table`` (``P12A``, ``PCT12``) from its rows of the layout (:func:`rows`)."""
    universe, level = _universe(df["universe"][0]), level_of(table)
    cells = []
    for cid, label in zip(df["cell"], df["label"], strict=True):
        pred: Row = {}
        for stub in label.split(STUB_SEPARATOR):
            pred |= _stub_predicate(stub)
        if "race" in pred:
            pred.pop("measure", None)  # a race's line of a tally table counts persons
        for k, v in universe.items():
            if k == "age_min" or k == "age_max":
                pred[k] = (max if k == "age_min" else min)(pred.get(k, v), v)
            elif pred.setdefault(k, v) != v:
                raise InputError(f"{cid}: its line and {table}'s universe both restrict {k}")
        cells.append(Cell(id=cid, table=table, level=level, **pred))
    prefix, number = name_parts(table)
    return TableSpec(table, prefix, number, level, title_of(df), df["universe"][0], tuple(cells))


def _declare_all(tables: tuple[str, ...]) -> tuple[TableSpec, ...]:
    by_table = rows(tables).partition_by("table", as_dict=True)
    return tuple(_declare(t, by_table[(t,)]) for t in tables)


#: The 34 SF1 person tables used by Abowd et al.: 19 block tables and 16 tract tables.
SF1_TABLES: tuple[TableSpec, ...] = _declare_all(
    (
        *("P1", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P14"),
        *(f"P12{i}" for i in "ABCDEFGHI"),
        "PCT12",
        *(f"PCT12{i}" for i in "ABCDEFGHIJKLMNO"),
    )
)
#: Published SF1 block tables beyond those 34 (implied by P8 and P9 when those are present; a
#: release may have them without P8/P9): race (P3), Hispanic or Latino (P4), and both (P5).
EXTRA_TABLES: tuple[TableSpec, ...] = _declare_all(("P3", "P4", "P5"))
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
    return TableSet(out, source=ts.source, population=ts.population)
