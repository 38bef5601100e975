"""Schemas as data: what a unit of observation is, declared rather than coded.

A :class:`Schema` is a named tuple of categorical :class:`Attribute` s (each with its categories'
file codes and labels), the :class:`EditRule` s every consistent record obeys, and one mixed-radix
*type* encoding: the index of a record in the histogram over all category combinations, the first
attribute most significant. Persons and housing units are two values of it
(:mod:`tabrecon.schema.catalog`); a third schema is a third declaration.

Files are read generically (:func:`read_units`): CSV (plain or gzip) or Parquet with a
``block_geoid`` column and one column per attribute holding the category's code or its label;
every problem is reported with the file, line and column of its first row and the number of rows
that share it.

>>> colour = Attribute("colour", ((0, "red"), (1, "green"), (2, "blue")))
>>> size = Attribute("size", ((1, "small"), (2, "large")))
>>> s = Schema("toy", "thing", (colour, size))
>>> s.n_types
6
>>> t = s.encode({"colour": np.array([2, 0]), "size": np.array([1, 2])})
>>> t.tolist(), {k: v.tolist() for k, v in s.decode(t).items()}
([4, 1], {'colour': [2, 0], 'size': [1, 2]})
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import numpy as np
import polars as pl

from ..cache import cached_arrays
from ..errors import InputError, TabreconError
from ..io import read_rows, require_columns, write_frame
from ..vocab import Geo, Release


@dataclass(frozen=True)
class Attribute:
    """One categorical column: its name in files, its categories as (file code, label) pairs in
    encoding order, and what it means."""

    name: str
    categories: tuple[tuple[int, str], ...]
    description: str = ""
    #: the categories are in order (ages, sizes): a record the tables place only within a run of
    #: them is written as the run's first and last category (:attr:`Units.ranges`)
    ordered: bool = False

    def __post_init__(self) -> None:
        codes = [c for c, _ in self.categories]
        labels = [lab for _, lab in self.categories]
        if not codes:
            raise TabreconError(f"attribute {self.name!r} has no categories")
        if len(set(codes)) != len(codes) or len(set(labels)) != len(labels):
            raise TabreconError(f"attribute {self.name!r} repeats a category code or label")

    @property
    def size(self) -> int:
        return len(self.categories)

    @cached_property
    def codes(self) -> np.ndarray:
        """The file codes in encoding order (read-only, built once)."""
        out = np.array([c for c, _ in self.categories], dtype=np.int64)
        out.setflags(write=False)
        return out

    @cached_property
    def _sorted_codes(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.codes)
        return order, self.codes[order]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(lab for _, lab in self.categories)

    def index(self, codes: np.ndarray) -> np.ndarray:
        """Position (0..size-1) of each file code; -1 for a code not in the categories."""
        codes = np.asarray(codes, dtype=np.int64)
        order, known = self._sorted_codes
        if known[0] == 0 and known[-1] == known.size - 1 and (order == known).all():
            return np.where((codes >= 0) & (codes < known.size), codes, -1)  # codes 0..size-1
        pos = np.clip(np.searchsorted(known, codes), 0, known.size - 1)
        return np.where(known[pos] == codes, order[pos], -1)


@dataclass(frozen=True)
class ClaimColumn:
    """A column verified claims are stated over (the S of Generate-then-Verify's R(S, a, m)):
    its name, the label of each of its values (in order), and ``value``: each record type's
    value (0..len(labels)-1) from the type's attribute positions, a (types x attributes) array.
    A schema's claim columns are its attributes unless it declares others (persons: sex,
    agebin38, Hispanic origin and the six race flags, :data:`tabrecon.schema.PERSONS`); the
    claims, their trivial cells and their keys are computed from the declaration alone.

    >>> even = ClaimColumn("even", ("odd", "even"), value=lambda pos: 1 - pos[:, 0] % 2)
    >>> even.value(np.array([[0], [3]])).tolist(), even.size
    ([1, 0], 2)
    """

    name: str
    labels: tuple[str, ...]
    value: Callable[[np.ndarray], np.ndarray]

    @property
    def size(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class AttributePosition:
    """The claim column that is attribute ``i`` itself (a value, so schemas stay comparable)."""

    i: int

    def __call__(self, pos: np.ndarray) -> np.ndarray:
        return pos[:, self.i]


@dataclass(frozen=True)
class EditRule:
    """An edit rule, a consistency identity over file codes: rows where ``broken`` is true are
    refused with ``message``, naming ``column`` (the attribute a user would correct first)."""

    name: str
    message: str
    column: str
    broken: pl.Expr = field(compare=False)


@dataclass(frozen=True)
class Schema:
    """A unit of observation: attributes, consistency rules, the type encoding."""

    name: str
    unit: str
    attributes: tuple[Attribute, ...]
    rules: tuple[EditRule, ...] = ()
    description: str = ""
    #: the geographic unit tables are published for: a census block (15-digit geoids) unless a
    #: declared release says otherwise (a school with 6-digit ids:
    #: :mod:`tabrecon.tables.declaration`)
    geography: str = "block"
    geoid_digits: int = 15
    #: the columns claims are stated over (:class:`ClaimColumn`); empty: the attributes
    claim_on: tuple[ClaimColumn, ...] = ()
    #: the census product whose tables are published over these records (the same attributes
    #: in SF1 2010 and the 2020 DHC are two schemas: their tables differ, and so do the caches
    #: keyed by a schema): :meth:`tabrecon.schema.registry.Population.in_release`
    release: Release = Release.SF1_2010

    def __post_init__(self) -> None:
        if not self.geography.isidentifier() or not 1 <= self.geoid_digits <= 30:
            raise TabreconError(
                f"schema {self.name!r}: geography must be a word and its ids 1-30 digits"
            )
        names = [a.name for a in self.attributes]
        if len(set(names)) != len(names):
            raise TabreconError(f"schema {self.name!r} repeats an attribute")
        for r in self.rules:
            if r.column not in names:
                raise TabreconError(f"rule {r.name!r} names unknown column {r.column!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def geoid_column(self) -> str:
        """The column of a records file naming each record's geographic unit: ``block_geoid``
        (census blocks), ``school_id`` (a declared geography ``school``)."""
        return "block_geoid" if self.geography == Geo.BLOCK else f"{self.geography}_id"

    @property
    def file_kind(self) -> str:
        """What a file of these records is called where one is refused: "a person file", "a
        housing-unit file" (the words :data:`tabrecon.io.FILE_KINDS` uses)."""
        return f"a {self.unit.replace(' ', '-')} file"

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def n_types(self) -> int:
        """Cells of the full cross-classification (most are ruled out by the rules)."""
        return math.prod(self.sizes)

    @cached_property
    def claim_columns(self) -> tuple[ClaimColumn, ...]:
        """The columns verified claims are stated over: :attr:`claim_on`, or the attributes."""
        return self.claim_on or tuple(
            ClaimColumn(a.name, a.labels, AttributePosition(i))
            for i, a in enumerate(self.attributes)
        )

    def positions(self, types: np.ndarray) -> np.ndarray:
        """(types x attributes): each type's category position on every attribute (the digits
        of its mixed-radix index)."""
        rest = np.asarray(types, dtype=np.int64).copy()
        out = np.empty((rest.size, len(self.attributes)), dtype=np.int64)
        for i in reversed(range(len(self.attributes))):
            out[:, i] = rest % self.attributes[i].size
            rest //= self.attributes[i].size
        return out

    def claim_values(self, types: np.ndarray) -> np.ndarray:
        """(types x claim columns): each type's value on every column claims are stated over.

        >>> s = Schema("toy", "thing", (Attribute("a", ((0, "x"), (1, "y"))),))
        >>> s.claim_values(np.array([1, 0])).tolist()
        [[1], [0]]
        """
        pos = self.positions(types)
        if not self.claim_on:
            return pos
        return np.column_stack([c.value(pos) for c in self.claim_on]).astype(np.int64)

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise TabreconError(f"schema {self.name!r} has no attribute {name!r}")

    def encode(self, codes: Mapping[str, np.ndarray]) -> np.ndarray:
        """Type index of each record from its file codes (mixed radix, first attribute most
        significant). Raises for a code outside an attribute's categories."""
        t: np.ndarray | None = None
        for a in self.attributes:
            idx = a.index(np.asarray(codes[a.name]))
            if (idx < 0).any():
                bad = np.asarray(codes[a.name])[np.flatnonzero(idx < 0)[0]]
                raise TabreconError(f"{a.name}: code {bad} is not a category")
            t = idx if t is None else t * a.size + idx
        assert t is not None
        return t.astype(np.int64)

    def decode(self, types: np.ndarray) -> dict[str, np.ndarray]:
        """File codes of each attribute for each type index (inverse of :meth:`encode`)."""
        rest = np.asarray(types, dtype=np.int64)
        out: dict[str, np.ndarray] = {}
        for a in reversed(self.attributes):
            out[a.name] = a.codes[rest % a.size]
            rest = rest // a.size
        return {a.name: out[a.name] for a in self.attributes}

    def feasible_types(self, batch: int = 2_000_000) -> np.ndarray:
        """The type indices no rule refuses, ascending: the support of any consistent
        population's histogram, which count models are built over (the housing unit: 87,787 of
        its 25,559,040 cross-classified types; persons, without rules: all 27,972)."""
        return _feasible(self, batch)

    def check(self, frame: pl.DataFrame, path: str, lines: np.ndarray | None = None) -> None:
        """Raise :class:`InputError` for the first rule a row of ``frame`` (file codes, one column
        per attribute) breaks: file, line, column, the rule's message and how many more rows
        break it. Rules are checked in their declared order."""
        for r in self.rules:
            bad = frame.select(r.broken.fill_null(True).alias("b"))["b"].to_numpy()
            rows = np.flatnonzero(bad)
            if rows.size:
                i = int(rows[0])
                line = int(lines[i]) if lines is not None else i + 2
                shown = ", ".join(f"{c}={frame[c][i]}" for c in _columns_of(r, self))
                raise InputError(
                    f"{r.message} ({shown})",
                    path=path,
                    line=line,
                    column=r.column,
                    more=rows.size - 1,
                )


def refuse_rows(
    path: str,
    bad: np.ndarray,
    column: str,
    message: str,
    values: pl.Series | None = None,
    lines: np.ndarray | None = None,
) -> None:
    """Raise :class:`InputError` for the first true row of ``bad``: file, line (``lines`` maps
    frame rows to file lines when rows were filtered; else row i is line i + 2), column, the
    value found and how many more rows share the problem."""
    rows = np.flatnonzero(bad)
    if rows.size:
        r = int(rows[0])
        shown = f" (got {values[r]!r})" if values is not None else ""
        raise InputError(
            f"{message}{shown}",
            path=path,
            line=int(lines[r]) if lines is not None else r + 2,
            column=column,
            more=rows.size - 1,
        )


@cache
def _feasible(schema: Schema, batch: int) -> np.ndarray:
    """:meth:`Schema.feasible_types`, computed once per schema (read-only) and kept on disk
    (:mod:`tabrecon.cache`: 3.3 s for the housing unit's 25.6 million types)."""
    if not schema.rules:
        out = np.arange(schema.n_types, dtype=np.int64)
    else:
        broken = pl.any_horizontal([r.broken for r in schema.rules])

        def compute() -> dict[str, np.ndarray]:
            keep = []
            for start in range(0, schema.n_types, batch):
                t = np.arange(start, min(start + batch, schema.n_types), dtype=np.int64)
                codes = pl.DataFrame({k: v.astype(np.int16) for k, v in schema.decode(t).items()})
                ok = codes.select(broken.not_().alias("ok"))["ok"].to_numpy()
                keep.append(t[ok])
            return {"types": np.concatenate(keep)}

        parts: list[bytes | str] = [f"{a.name}\0{a.codes.tolist()!r}" for a in schema.attributes]
        parts += [r.broken.meta.serialize(format="json") for r in schema.rules]
        out = cached_arrays("feasible", parts, compute, ["types"])["types"]
        if out.dtype != np.int64 or (out.size and not 0 <= out[0] <= out[-1] < schema.n_types):
            out = compute()["types"]  # not what this computes: an entry of another kind
    out.setflags(write=False)
    return out


def _columns_of(rule: EditRule, schema: Schema) -> list[str]:
    """The attributes a rule reads, in schema order (shown with the refused row)."""
    used = set(rule.broken.meta.root_names())
    return [n for n in schema.names if n in used]


@dataclass
class Units:
    """Records of one schema: their blocks and file codes, and the type index of each."""

    schema: Schema
    block_geoid: np.ndarray
    codes: dict[str, np.ndarray]
    extra: pl.DataFrame | None = None
    source: str = ""
    #: for an ordered attribute (:attr:`Attribute.ordered`) the count cells place only within
    #: a run of categories, each record's first and last category of its run (``codes`` holds a
    #: category of it that meets every cell, medians too); None when every category is known
    ranges: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    #: the distinct geographic units, sorted, and each record's index into them (:meth:`blocks`:
    #: made on first use; given where known, as person records carry it)
    known_blocks: tuple[np.ndarray, np.ndarray] | None = field(
        default=None, repr=False, compare=False
    )

    def __len__(self) -> int:
        return int(self.block_geoid.size)

    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct geographic units, sorted; each record's index into them), made once."""
        if self.known_blocks is None:
            uniq, inv = np.unique(self.block_geoid.astype(str), return_inverse=True)
            self.known_blocks = (uniq, inv)
        return self.known_blocks

    def geo_at(self, level: str) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct units at census ``level``, sorted; each record's index into them), from
        the distinct blocks (:meth:`blocks`), not from every record's geoid."""
        from ..geo import prefix

        geoids, block = self.blocks()
        uniq, inv = np.unique(prefix(geoids, level), return_inverse=True)
        return uniq, inv[block]

    @property
    def types(self) -> np.ndarray:
        return self.schema.encode(self.codes)

    def in_blocks(self, geoids: Collection[str]) -> Units:
        """The records of the geographic units ``geoids`` (a sample of blocks), extra columns
        kept."""
        rows = np.isin(self.block_geoid.astype(str), np.asarray(list(geoids), dtype=str))
        return self.take(np.flatnonzero(rows))

    def take(self, rows: np.ndarray) -> Units:
        """The records at positions ``rows``, in that order (extra columns and runs kept)."""
        rows = np.asarray(rows, dtype=np.int64)
        extra = None if self.extra is None else self.extra[rows]
        codes = {k: v[rows] for k, v in self.codes.items()}
        ranges = None
        if self.ranges is not None:
            ranges = {k: (lo[rows], hi[rows]) for k, (lo, hi) in self.ranges.items()}
        return Units(self.schema, self.block_geoid[rows], codes, extra, self.source, ranges)

    def to_frame(self, labels: bool = False) -> pl.DataFrame:
        """One row per unit: its geographic unit (``block_geoid``: the schema's
        :attr:`~Schema.geoid_column`) then each attribute's code (or label), and for an
        attribute known only to a run of categories (:attr:`ranges`) its first and last,
        ``<name>_min`` and ``<name>_max``."""
        cols: dict[str, object] = {self.schema.geoid_column: self.block_geoid.astype(str)}
        for a in self.schema.attributes:
            v = self.codes[a.name]
            cols[a.name] = np.array(a.labels)[a.index(v)] if labels else v
        for name, ends in (self.ranges or {}).items():
            a = self.schema.attribute(name)
            for end, v in zip(("_min", "_max"), ends, strict=True):
                cols[f"{name}{end}"] = np.array(a.labels)[a.index(v)] if labels else v
        df = pl.DataFrame(cols)
        return df if self.extra is None else pl.concat([df, self.extra], how="horizontal")


def read_units(path: str | Path, schema: Schema, counties: Collection[str] | None = None) -> Units:
    """Read and check a file of ``schema`` records (CSV, CSV.gz or Parquet); with ``counties``
    (5-digit state+county codes of a block schema) only those counties' rows, streaming.

    Each attribute's column may hold the category codes or their labels (case-insensitive).
    Raises :class:`InputError` naming the file, line and column of the first bad value, or of the
    first row breaking a rule, with the count of rows that share the problem. Columns not in the
    schema are carried through untouched.
    """
    p = str(path)
    df, lines = read_rows(p, counties, schema.geoid_column)
    gcol = schema.geoid_column
    need = [gcol, *schema.names]
    require_columns(p, df.columns, need, schema.file_kind)
    if df.height == 0:
        raise InputError(f"no {schema.unit} records", path=p)

    geo = df[gcol].cast(pl.Utf8).str.strip_chars()
    refuse_rows(
        p,
        (~geo.str.contains(rf"^\d{{{schema.geoid_digits}}}$")).fill_null(True).to_numpy(),
        gcol,
        "block_geoid must be 15 digits (state 2, county 3, tract 6, block 4)"
        if gcol == "block_geoid"
        else f"{gcol} must be {schema.geoid_digits} digits",
        geo,
        lines,
    )
    codes = {a.name: _category_codes(p, df, a, a.name, lines) for a in schema.attributes}
    schema.check(pl.DataFrame(codes), p, lines)
    ranges: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for a in schema.attributes:  # a run of categories: <name>_min and <name>_max
        ends = (f"{a.name}_min", f"{a.name}_max")
        if not a.ordered or not any(e in df.columns for e in ends):
            continue
        require_columns(p, df.columns, list(ends), schema.file_kind)
        first, last = (_category_codes(p, df, a, e, lines) for e in ends)
        for col, bad, why in (
            (ends[1], a.index(last) < a.index(first), f"comes before {ends[0]}"),
            (a.name, a.index(codes[a.name]) < a.index(first), f"comes before {ends[0]}"),
            (a.name, a.index(codes[a.name]) > a.index(last), f"comes after {ends[1]}"),
        ):
            refuse_rows(p, bad, col, f"{col} {why} in {a.name}'s order", df[col], lines)
        ranges[a.name] = (first, last)
        need += ends
    extra_cols = [c for c in df.columns if c not in need]
    extra = df.select(extra_cols) if extra_cols else None
    return Units(schema, geo.to_numpy().astype(str), codes, extra, p, ranges or None)


def _category_codes(
    path: str, df: pl.DataFrame, a: Attribute, col: str, lines: np.ndarray | None
) -> np.ndarray:
    """Column ``col`` of ``df`` as ``a``'s file codes, each cell its code or its label
    (case-insensitive); the first cell that is neither is refused, naming file, line, column."""
    raw = df[col].cast(pl.Utf8).str.strip_chars()
    as_int = raw.cast(pl.Int64, strict=False)
    by_label = {lab.lower(): c for c, lab in a.categories}
    looked = raw.str.to_lowercase().replace_strict(by_label, default=None, return_dtype=pl.Int64)
    v = as_int.fill_null(looked)
    known = v.is_not_null().to_numpy()
    known[known] = a.index(v.drop_nulls().to_numpy()) >= 0
    refuse_rows(path, ~known, col, f"not a category of {a.name} (codes {_listing(a)})", raw, lines)
    return v.to_numpy().astype(np.int64)


def _listing(a: Attribute) -> str:
    shown = [f"{c} {lab}" for c, lab in a.categories]
    return ", ".join(shown if len(shown) <= 14 else [*shown[:6], "...", *shown[-3:]])


def write_units(units: Units, path: str | Path, labels: bool = False) -> None:
    """Write ``units``: ``.parquet`` as Parquet, ``.csv``/``.csv.gz`` as CSV, codes or labels."""
    write_frame(units.to_frame(labels=labels), path)
