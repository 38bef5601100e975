"""Tables over any schema: cells as predicates over a :class:`~tabrecon.schema.spec.Schema`'s
attributes, compiled to one sparse matrix over its feasible types, tabulated by block, read from
every published form.

A :class:`UnitTable` is data: a name, a universe and cells, each cell a mapping from attribute to
the file codes it admits (an empty mapping admits every record of the universe). Which tables a
population publishes is its declaration (a module of :mod:`tabrecon.populations`: the SF1 2010
housing-unit tables, the person tables, P42 and P43 of group quarters), found through
:mod:`tabrecon.schema.registry`; :func:`from_layout` declares one from the Bureau's own layout.
This module knows no particular schema.

>>> from tabrecon.schema.registry import population
>>> hu = population("households")
>>> t = table_by_name("H4", hu)
>>> [c.id for c in t.cells()]
['H0040001', 'H0040002', 'H0040003', 'H0040004']
>>> weight_matrix(hu.schema, [t]).shape[0]
4
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError, TabreconError
from ..geo import TABLE_LEVELS
from ..schema import registry
from ..schema.spec import Schema, Units
from ..vocab import Geo
from .layout import SF1_2010, STUB_SEPARATOR, level_of, name_parts, rows, stub_key, title_of
from .measures import WITHHELD, Statistic
from .tableset import WITHHELD_CELL, Grid, TableSet

if TYPE_CHECKING:
    from ..schema.registry import Population
    from .layout import Layout
Predicate = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class UnitCell:
    """One published count: the records of the table's universe matching ``predicate``."""

    id: str
    table: str
    label: str
    predicate: Predicate = field(hash=False, compare=False)
    schema: Schema = field(hash=False, compare=False)
    #: a median or a mean of the predicate's records (:mod:`tabrecon.tables.measures`); None: a
    #: count
    statistic: Statistic | None = field(default=None, hash=False, compare=False)

    def description(self, schema: Schema | None = None) -> str:
        """The records the cell counts, in words: each restricted column and the labels it
        admits ("all housing units" when nothing is restricted); three or more neighbouring
        categories of an ordered column as a run ("age in {85 to 110}").

        >>> from tabrecon.schema.registry import population
        >>> from tabrecon.tables.spec import cell_by_id
        >>> cell_by_id("P0120049", [population("persons")]).description()
        'sex in {female}; age in {85 to 110}'
        """
        schema = schema or self.schema
        parts = []
        for a in schema.attributes:
            if a.name in self.predicate and len(self.predicate[a.name]) < a.size:
                pos = np.sort(a.index(np.asarray(self.predicate[a.name])))
                runs = np.split(pos, np.flatnonzero(np.diff(pos) != 1) + 1) if a.ordered else []
                labels = [
                    f"{a.labels[r[0]]} to {a.labels[r[-1]]}"
                    if r.size >= 3
                    else ", ".join(str(a.labels[i]) for i in r)
                    for r in runs
                ] or [str(a.labels[i]) for i in pos]
                parts.append(f"{a.name} in {{{', '.join(labels)}}}")
        return "; ".join(parts) or f"all {_plural(schema.unit)}"


@dataclass(frozen=True)
class UnitTable:
    """A published table over a schema: lines of (label, predicate) within a universe."""

    name: str
    number: int
    title: str
    universe: Predicate = field(hash=False, compare=False)
    lines: tuple[tuple[str, Predicate], ...] = field(hash=False, compare=False)
    prefix: str = "H"
    level: str = "block"
    schema: Schema = field(kw_only=True, hash=False, compare=False)
    #: the cells' official ids where they do not follow ``prefix + number + line`` (iterations
    #: such as ``P012A003``)
    ids: tuple[str, ...] | None = field(default=None, hash=False, compare=False)
    #: the universe in the Bureau's words, where the table was declared from its layout
    universe_label: str = field(default="", compare=False)
    #: what every cell publishes when not a count: a median or a mean
    #: (:mod:`tabrecon.tables.measures`)
    statistic: Statistic | None = field(default=None, kw_only=True, compare=False)

    def cells(self) -> list[UnitCell]:
        """The table's cells, in line order (made once per table: readers, the engine and the
        claims ask for them many times)."""
        return list(self._cells)

    @cached_property
    def _cells(self) -> tuple[UnitCell, ...]:
        out = []
        for i, (label, pred) in enumerate(self.lines, start=1):
            both = dict(self.universe)
            for k, v in pred.items():
                both[k] = tuple(sorted(set(both.get(k, v)) & set(v)))
            cid = self.ids[i - 1] if self.ids else f"{self.prefix}{self.number:03d}{i:04d}"
            out.append(UnitCell(cid, self.name, label, both, self.schema, self.statistic))
        return tuple(out)


def _plural(unit: str) -> str:
    """``housing unit`` -> ``housing units``; ``person`` -> ``persons``."""
    return unit if unit.endswith("s") else f"{unit}s"


#: the schemas whose tables :func:`declare_tables` declared (and may declare again)
_DECLARED: set[str] = set()


def declare_tables(schema: Schema, tables: Sequence[UnitTable]) -> Population:
    """Make ``tables`` the tables published over ``schema``: tabulation, reconstruction and
    Generate-then-Verify then run on it as on persons and housing units -- a third schema and
    its tables are a declaration, not a module. For a schema users choose with ``--schema``,
    register a :class:`~tabrecon.schema.registry.Population` in a module of
    :mod:`tabrecon.populations` instead (this registers one that is not listed, and returns
    it: the value the functions of this module take).

    >>> from tabrecon.schema.spec import Attribute
    >>> toy = Schema("toy", "thing", (Attribute("colour", ((0, "red"), (1, "blue"))),))
    >>> things = declare_tables(toy, [UnitTable("T1", 1, "Things by colour", {},
    ...     (("Red", {"colour": (0,)}), ("Blue", {"colour": (1,)})), prefix="T", schema=toy)])
    >>> print(*(c.id for c in table_by_name("T1", things).cells()))
    T0010001 T0010002
    """
    if schema.name in registry.names(listed=False) and schema.name not in _DECLARED:
        raise TabreconError(f"the tables of the built-in schema {schema.name!r} are fixed")
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise TabreconError(f"a table name repeats among {', '.join(names)}")
    known = {a.name: a for a in schema.attributes}
    for t in tables:
        check_statistic(t, schema)
        for c in t.cells():
            for attr, codes in c.predicate.items():
                if attr not in known:
                    raise TabreconError(
                        f"cell {c.id}: {attr!r} is not an attribute of {schema.name}"
                    )
                unknown = set(codes) - set(known[attr].codes.tolist())
                if unknown:
                    raise TabreconError(f"cell {c.id}: {attr} has no category {sorted(unknown)}")
    fixed = tuple(tables)
    _DECLARED.add(schema.name)
    return registry.register(
        registry.Population(
            name=schema.name, schema=schema, noun=schema.unit, tables=lambda: fixed, listed=False
        ),
        replace=True,
    )


def check_statistic(table: UnitTable, schema: Schema) -> None:
    """Refuse a median or mean table whose attribute the schema lacks, whose ``values`` miss a
    code, or whose empty-universe value a nonempty universe could publish."""
    stat = table.statistic
    if stat is None:
        return
    if stat.of not in schema.names:
        raise TabreconError(f"{table.name}: {stat.of!r} is not an attribute of {schema.name}")
    codes = schema.attribute(stat.of).codes
    if stat.values is not None:
        lacking = sorted(set(codes.tolist()) - {c for c, _ in stat.values})
        if lacking:
            raise TabreconError(f"{table.name}: no number for {stat.of} codes {lacking}")
    stat.check_empty(stat.numbers(codes))


def from_layout(
    table: str,
    schema: Schema,
    stubs: Mapping[str, Predicate],
    universe: Predicate | None = None,
    statistic: Statistic | None = None,
    *,
    layout: Layout | None = None,
) -> UnitTable:
    """The SF1 2010 table ``table`` over ``schema`` (or ``layout``'s product's, the 2020 DHC's:
    :data:`tabrecon.tables.layout.DHC_2020`): one line per field of the file, each cell's
    predicate the intersection of its stub path's (``stubs`` maps :func:`stub_key` of a stub to
    its predicate; ``universe`` restricts every cell, e.g. occupied units). A stub missing from
    the vocabulary, or a predicate naming an attribute or code the schema lacks, is refused
    naming the cell: a table is declared whole or not at all. A table of medians or means (the
    layout gives its cells decimals) needs its ``statistic``, to as many decimals; a count
    table refuses one.

    >>> from tabrecon.schema.spec import Attribute, Schema
    >>> s = Schema("toy", "person", (Attribute("sex", ((0, "male"), (1, "female"))),))
    >>> from_layout("P12", s, {"Total": {}, "Male": {"sex": (0,)}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: P0120003: no predicate for the stub 'Under 5 years' ...
    """

    lay = layout if layout is not None else SF1_2010
    df = rows([table], lay)
    places = {int(d) for d in df["decimal"].to_list() if d not in (None, "")}
    decimals = max(places, default=0)
    if statistic is None and decimals:
        raise TabreconError(
            f"{table}: its cells have {decimals} decimals (a median or a mean): declare its "
            "statistic"
        )
    if statistic is not None and statistic.decimals != decimals:
        raise TabreconError(
            f"{table}: the layout gives {decimals} decimals, the statistic {statistic.decimals}"
        )
    vocab = {stub_key(k): v for k, v in stubs.items()}
    known = {a.name: set(a.codes.tolist()) for a in schema.attributes}
    lines: list[tuple[str, Predicate]] = []
    for cell, label in zip(df["cell"], df["label"], strict=True):
        pred: dict[str, tuple[int, ...]] = {}
        for stub in label.split(STUB_SEPARATOR):
            key = stub_key(stub)
            if key not in vocab:
                raise TabreconError(
                    f"{cell}: no predicate for the stub {key!r} (of {lay.title}'s {table}, over "
                    f"the {schema.name} schema)"
                )
            for attr, codes in vocab[key].items():
                if attr not in known:
                    raise TabreconError(f"{cell}: {attr!r} is not an attribute of {schema.name}")
                if set(codes) - known[attr]:
                    raise TabreconError(
                        f"{cell}: {attr} has no category {sorted(set(codes) - known[attr])}"
                    )
                both = set(pred.get(attr, codes)) & set(codes)
                pred[attr] = tuple(sorted(both))
        lines.append((label, pred))
    prefix, number = name_parts(table)
    out = UnitTable(
        table,
        number,
        title_of(df),
        dict(universe or {}),
        tuple(lines),
        prefix=prefix,
        level=level_of(table, lay),
        schema=schema,
        ids=tuple(df["cell"].to_list()),
        universe_label=str(df["universe"][0]),
        statistic=statistic,
    )
    check_statistic(out, schema)
    return out


def select_tables(spec: str, pop: Population) -> tuple[UnitTable, ...]:
    """The tables a ``--tables`` value names of ``pop``: ``all`` (or ``published``: every
    table is published) or a comma list; an empty list or an unknown table is refused.

    >>> from tabrecon.schema.registry import population
    >>> [t.name for t in select_tables("h1, P18", population("households"))]
    ['H1', 'P18']
    """
    if pop.select is not None:  # selections of its own (persons: the 34 tables, block, tract)
        return tuple(table_by_name(n, pop) for n in pop.select(spec))
    if spec.strip() in ("all", "published"):
        return tables_of(pop)
    names = [t.strip() for t in spec.split(",") if t.strip()]
    if not names:
        some = ",".join(t.name for t in tables_of(pop)[:3])
        raise TabreconError(f"--tables {spec!r} selects no table ('all' or {some})")
    return tuple(table_by_name(n.upper(), pop) for n in names)


def cell_tables(pop: Population) -> dict[str, str]:
    """Each of ``pop``'s cell ids with its table's name (what per-table publication rules
    look up).

    >>> from tabrecon.schema.registry import population
    >>> cell_tables(population("group_quarters"))["P0430003"]
    'P43'
    """
    return {c.id: t.name for t in tables_of(pop) for c in t.cells()}


def tables_of(pop: Population) -> tuple[UnitTable, ...]:
    """The tables ``pop`` publishes (in its release)."""
    return tuple(pop.tables())


def cell_by_id(cell: str, pops: Sequence[Population]) -> UnitCell:
    """A declared cell by its id (``H0130002``, ``P0430004``): of the first of ``pops`` whose
    tables have it."""
    from ..populations import choices_help

    for pop in pops:
        for t in pop.tables():
            for c in t.cells():
                if c.id == cell.upper():
                    return c
    raise TabreconError(
        f"unknown table or cell id {cell!r}; see tabrecon tables list --schema NAME "
        f"({choices_help()})"
    )


def table_by_name(name: str, pop: Population) -> UnitTable:
    """A table ``pop`` publishes, by its name."""
    declared = tables_of(pop)
    for t in declared:
        if t.name == name.upper():
            return t
    names = ", ".join(t.name for t in declared)
    raise TabreconError(
        f"unknown {pop.schema.unit.replace(' ', '-')} table {name!r}; choose from {names}"
    )


def weight_matrix(schema: Schema, tables: Sequence[UnitTable]) -> sp.csr_matrix:
    """Cells x feasible types of the count cells of ``tables`` (the values given, in order, of
    any release: not looked up by name): 1 where the type lies in the cell (one sparse matrix
    for all)."""
    return predicate_matrix(
        schema, [c.predicate for t in tables for c in t.cells() if c.statistic is None]
    )


def histogram(unit: np.ndarray, kind: np.ndarray, n_units: int, n_kinds: int) -> sp.csr_matrix:
    """How many records of each kind (column) each unit (row) holds, from each record's unit and
    kind: built in canonical form from one sort of the records' keys (no duplicate to sum, no
    index to sort after).

    >>> histogram(np.array([1, 0, 1]), np.array([2, 0, 2]), 2, 3).toarray().tolist()
    [[1, 0, 0], [0, 0, 2]]
    """
    key = unit.astype(np.int64) * n_kinds + kind
    key.sort()
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
    counts = np.diff(np.r_[first, key.size]).astype(np.int64)
    uk = key[first]
    indptr = np.searchsorted(uk // n_kinds, np.arange(n_units + 1))
    return sp.csr_matrix((counts, uk % n_kinds, indptr), shape=(n_units, n_kinds))


@cache
def _published_matrix(
    pop: Population, names: tuple[str, ...]
) -> tuple[list[str], np.ndarray, sp.csc_matrix]:
    """The cells the named tables publish, in published order (a table's lines; a cell of the
    population's :attr:`~tabrecon.schema.registry.Population.unmodelled` among them by id, where
    its weights are declared), the positions among them of the counts, and the counts' weights
    (feasible types x counts, in that order): what :func:`tabulate` multiplies by, made once."""
    counted, W = compiled(pop, names)
    tally = list(pop.unmodelled) if pop.unmodelled_weights is not None else []
    extra = [c for c in tally if pop.unmodelled[c] in names]
    cells: list[str] = []
    for n in names:
        ids = [c.id for c in table_by_name(n, pop).cells()]
        more = [c for c in extra if pop.unmodelled[c] == n]
        cells += sorted(ids + more) if more else ids
    if extra:  # counts of something other than records (persons: races tallied)
        assert pop.unmodelled_weights is not None
        Wx = sp.csr_matrix(pop.unmodelled_weights())[[tally.index(c) for c in extra]]
        W = sp.vstack([W, Wx[:, pop.schema.feasible_types()]]).tocsr()
    row = {c: i for i, c in enumerate([c.id for c in counted] + extra)}
    counts = [j for j, c in enumerate(cells) if c in row]
    return cells, np.array(counts, dtype=np.int64), W[[row[cells[j]] for j in counts]].T.tocsc()


@cache
def compiled(pop: Population, names: tuple[str, ...]) -> tuple[list[UnitCell], sp.csr_matrix]:
    """The named tables' count cells and their weight matrix (cells x feasible types), built
    once (cells of medians and means: :func:`compiled_statistics`)."""
    cells = [c for n in names for c in table_by_name(n, pop).cells() if c.statistic is None]
    return cells, predicate_matrix(pop.schema, [c.predicate for c in cells])


@cache
def compiled_columns(pop: Population, names: tuple[str, ...]) -> tuple[sp.csc_matrix, np.ndarray]:
    """:func:`compiled`'s weight matrix by columns, and how many cells each feasible type lies
    in (its column counts): what every block's program slices, built once per process instead
    of once per block (a housing-unit block's conversion cost more than its proofs)."""
    W = compiled(pop, names)[1]
    return W.tocsc(), np.bincount(W.indices, minlength=W.shape[1])


@dataclass(frozen=True)
class StatisticCell:
    """A median or mean cell compiled over the feasible types: the positions of its universe's
    types and each one's number (the attribute's value the statistic is of)."""

    cell: UnitCell
    universe: np.ndarray
    numbers: np.ndarray

    @property
    def statistic(self) -> Statistic:
        assert self.cell.statistic is not None
        return self.cell.statistic

    def publish(self, H: sp.csr_matrix) -> np.ndarray:
        """The published value (published units) for each row of ``H`` (geounits x feasible
        types: a histogram)."""
        values, inv = np.unique(self.numbers, return_inverse=True)
        P = sp.csr_matrix(
            (np.ones(inv.size, dtype=np.int64), (np.arange(inv.size), inv.reshape(-1))),
            shape=(inv.size, values.size),
        )
        dist = (sp.csr_matrix(H)[:, self.universe] @ P).toarray()
        return self.statistic.publish(dist, values)

    def rows(self, value: int, n_cols: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """The rows over the feasible types that publishing ``value`` means
        (:meth:`tabrecon.tables.measures.Statistic.rows`)."""
        return self.statistic.rows(value, self.universe, self.numbers, n_cols)


@cache
def compiled_statistics(pop: Population, names: tuple[str, ...]) -> tuple[StatisticCell, ...]:
    """The named tables' median and mean cells, compiled (:class:`StatisticCell`), built once."""
    cells = [c for n in names for c in table_by_name(n, pop).cells() if c.statistic]
    if not cells:
        return ()
    feas = pop.schema.feasible_types()
    cols = pop.schema.decode(feas)
    out = []
    for c in cells:
        assert c.statistic is not None
        m = np.ones(feas.size, dtype=bool)
        for attr, codes in c.predicate.items():
            m &= np.isin(cols[attr], codes)
        pos = np.flatnonzero(m)
        out.append(StatisticCell(c, pos, c.statistic.numbers(cols[c.statistic.of][pos])))
    return tuple(out)


def statistic_decimals(pop: Population) -> dict[str, int]:
    """Each median or mean cell id of ``pop``'s tables with its decimals."""
    return {
        c.id: c.statistic.decimals
        for t in tables_of(pop)
        for c in t.cells()
        if c.statistic is not None
    }


@cache
def statistic_counts(pop: Population) -> dict[str, tuple[str, ...]]:
    """Each median or mean cell of ``pop``'s tables with the count cells of the same
    universe (the same feasible types), where any is declared: its universe's count, which a
    rule that withholds counts withholds the statistic with (P13's median age of males with
    P12's males).

    >>> from tabrecon.schema.registry import population
    >>> statistic_counts(population("persons"))["P0130002"]
    ('P0120002', 'PCT0120002')
    """
    stats = compiled_statistics(pop, tuple(t.name for t in tables_of(pop)))
    if not stats:
        return {}
    names = tuple(t.name for t in tables_of(pop) if t.statistic is None)
    cells, W = compiled(pop, names)
    W = sp.csr_matrix(W)
    size = np.diff(W.indptr)
    out: dict[str, tuple[str, ...]] = {}
    for sc in stats:
        u = np.zeros(W.shape[1], dtype=np.int64)
        u[sc.universe] = 1
        n = sc.universe.size
        same = np.flatnonzero((np.asarray(W @ u).ravel() == n) & (size == n))
        if same.size:
            out[sc.cell.id] = tuple(cells[int(j)].id for j in same)
    return out


def as_published(long: pl.DataFrame, pop: Population) -> pl.DataFrame:
    """A long table as a file holds it: medians and means as their decimals (``30.5``, from
    tabrecon's published units, ``305``; withheld: empty), counts as they are; unchanged without
    such cells. One expression over the column (a state's SF1 folder holds millions of rows)."""
    dec = statistic_decimals(pop)
    if not dec or not long["cell"].is_in(list(dec)).any():
        return long
    v = pl.col("value")
    text = v.cast(pl.String)
    for d in sorted(set(dec.values())):
        ids = [c for c, k in dec.items() if k == d]
        D = 10**d
        shown = (
            (v // D).cast(pl.String) + "." + (v % D).cast(pl.String).str.zfill(d)
            if d
            else v.cast(pl.String)
        )
        text = (
            pl.when(pl.col("cell").is_in(ids))
            .then(pl.when(v == WITHHELD).then(None).otherwise(shown))
            .otherwise(text)
        )
    return long.with_columns(text.alias("value"))


def predicate_matrix(
    schema: Schema, predicates: Sequence[Predicate], weight: str | None = None
) -> sp.csr_matrix:
    """Predicates x feasible types: 1 where the type satisfies the predicate (or, with
    ``weight``, the type's code of that attribute: a household's size).

    >>> from tabrecon.schema.catalog import HOUSING_UNITS
    >>> M = predicate_matrix(HOUSING_UNITS, [{}, {"vacancy_status": (0,)}])
    >>> M.shape[0], int(M[0].sum()) == HOUSING_UNITS.feasible_types().size
    (2, True)
    """
    feas = schema.feasible_types()
    cols = schema.decode(feas)
    w = None if weight is None else np.asarray(cols[weight], dtype=np.int64)
    # each type's category position per attribute, once: a predicate's test is then a gather
    # from a short table of the categories it allows (np.isin per predicate and attribute was
    # 2.5 s of a process's first person tract tables, ~2,000 cells over 28,000 types)
    attrs = {a.name: a for a in schema.attributes}
    pos = {n: a.index(cols[n]) for n, a in attrs.items() if n in cols}
    idx, vals = [], []
    tests: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}  # cells share their restrictions

    def test(attr: str, codes: tuple[int, ...]) -> np.ndarray:
        if (hit := tests.get((attr, codes))) is None:
            if attr in pos:
                allowed = np.zeros(attrs[attr].size + 1, dtype=bool)  # (the last: no category)
                at = attrs[attr].index(np.asarray(codes, dtype=np.int64))
                allowed[at[at >= 0]] = True
                hit = allowed[pos[attr]]
            else:
                hit = np.isin(cols[attr], codes)
            tests[(attr, codes)] = hit
        return hit

    for pred in predicates:
        m = np.ones(feas.size, dtype=bool)
        for attr, codes in pred.items():
            m &= test(attr, tuple(int(c) for c in codes))
        if w is not None:
            m &= w != 0
        hit = np.flatnonzero(m)
        idx.append(hit)
        if w is not None:
            vals.append(w[hit])
    if not idx:
        return sp.csr_matrix((0, feas.size), dtype=np.int64)
    # each row's columns come sorted: the CSR arrays directly (no COO sort; households: 6.4 M)
    indptr = np.concatenate([[0], np.cumsum([h.size for h in idx])])
    k = np.concatenate(idx)
    v = np.ones(k.size, dtype=np.int64) if w is None else np.concatenate(vals)
    return sp.csr_matrix((v, k, indptr), shape=(len(predicates), feas.size))


def tabulate_units(units: Units, tables: Sequence[str] | None = None) -> pl.DataFrame:
    """Long table (geoid, cell, value) of ``units`` for every block (and every tract, for a
    schema's tract tables), one row per published cell (zeros included): :func:`tabulate`'s
    tables as a file holds them."""
    return tabulate(units, tables).to_frame()


def tabulate(
    units: Units, tables: Sequence[str] | None = None, level: str | None = None
) -> TableSet:
    """The published tables of ``units`` (:class:`~tabrecon.tables.tableset.TableSet`): the
    tables named (every declared one by default), each at its own level (block or tract) or,
    with ``level``, every one at that level (``county``, ``state``, ``blockgroup``); every cell
    its tables publish, zeros included, the population's unmodelled ones too (persons: the race
    tallies). One sparse product per level: geounit x type histogram times the tables' weight
    matrix; medians and means from the same histogram.

    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.schema.catalog import HOUSING_UNITS
    >>> from tabrecon.schema.registry import of_schema
    >>> units = of_schema(HOUSING_UNITS).synthesize(SynthConfig(persons=300), 1)
    >>> ts = tabulate(units, ["H3"], level="county")
    >>> ts.levels(), ts["county"].cells.tolist(), int(ts["county"].values[0, 0]) == len(units)
    (['county'], ['H0030001', 'H0030002', 'H0030003'], True)
    """
    pop = registry.of_schema(units.schema)
    declared = tables_of(pop)
    names = tuple(t.upper() for t in tables) if tables else tuple(t.name for t in declared)
    for n in names:
        table_by_name(n, pop)
    if level is not None and level not in TABLE_LEVELS:
        raise InputError(f"unknown level {level!r}; choose from {', '.join(TABLE_LEVELS)}")
    if level not in (None, Geo.BLOCK) and units.schema.geography != Geo.BLOCK:
        raise InputError(
            f"the {units.schema.name} tables are tabulated by {units.schema.geography} only"
        )
    feas = units.schema.feasible_types()
    t = units.types
    if feas.size == units.schema.n_types:  # every type admitted (persons): its index is its own
        pos = t
    else:
        pos = np.searchsorted(feas, t)
        if (pos >= feas.size).any() or (feas[np.minimum(pos, feas.size - 1)] != t).any():
            raise TabreconError("a unit has a type no rule admits; read it with read_units()")
    by_level: dict[str, list[str]] = {}
    for n in names:
        by_level.setdefault(level or table_by_name(n, pop).level, []).append(n)
    grids = {}
    for lvl, at in by_level.items():
        cells, counts, W = _published_matrix(pop, tuple(at))
        geo, where = units.geo_at(lvl)
        H = histogram(where, pos, geo.size, feas.size)
        stats = compiled_statistics(pop, tuple(at))
        if not stats:  # every cell a count: the product is the grid
            values = (H @ W).toarray()
        else:  # medians and means in their tables' places
            values = np.empty((geo.size, len(cells)), dtype=np.int64)
            values[:, counts] = (H @ W).toarray()
            col = {c: j for j, c in enumerate(cells)}
            for sc in stats:
                v = sc.publish(H)
                values[:, col[sc.cell.id]] = np.where(v == WITHHELD, WITHHELD_CELL, v)
        grids[lvl] = Grid(lvl, geo.astype(str), np.array(cells, dtype=str), values)
    return TableSet(grids, source=units.source, population=pop)


def tables_in(
    long: pl.DataFrame | TableSet, pop: Population, level: str | None = None
) -> tuple[str, ...]:
    """The tables ``pop`` publishes (of ``level``, or any) that a long table holds a cell
    of: the tables a release publishes, for the attacks' default (one it holds in part is then
    refused by name, never used in part). A :class:`~tabrecon.tables.tableset.TableSet` answers
    as its long table would (:meth:`~tabrecon.tables.tableset.TableSet.cells_present`).

    >>> from tabrecon.schema.registry import population
    >>> tables_in(pl.DataFrame({"geoid": ["1" * 15], "cell": ["H0040001"], "value": [1]}),
    ...           population("households"))
    ('H4',)
    """
    from .tableset import TableSet

    have = (
        long.cells_present() if isinstance(long, TableSet) else set(long["cell"].unique().to_list())
    )
    out = tuple(
        t.name
        for t in tables_of(pop)
        if (level is None or t.level == level) and any(c.id in have for c in t.cells())
    )
    if not out:
        raise InputError(
            f"the tables hold no cell of the {pop.schema.name} schema's tables "
            f"({', '.join(t.name for t in tables_of(pop))})"
        )
    return out


def complete_tables(long: pl.DataFrame, pop: Population) -> tuple[str, ...]:
    """The tables ``pop`` publishes every cell of which the long table holds."""
    have = set(long["cell"].unique().to_list())
    return tuple(t.name for t in tables_of(pop) if {c.id for c in t.cells()} <= have)
