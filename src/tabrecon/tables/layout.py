"""The Bureau's summary files as it laid them out -- SF1 2010 and the 2020 DHC -- and tables
declared from them.

Each product is a :class:`Layout` (:data:`SF1_2010`, :data:`DHC_2020`).
``data/sf1_2010_layout.csv.gz`` is the reference file ``sf1_2010_layout.csv`` (every data field of
SF1 2010: table, cell id, API name, the stub path as a label, universe, decimals) and
``data/dhc_2020_layout.csv.gz`` the reference ``dhc_2020_layout.csv`` (every cell of the DHC:
table, cell id, API name, label, title, universe, the lowest geography it is published at, the
SF1 table it continues), each compressed and otherwise byte for byte the same (a test compares
them when the references are beside the project). :meth:`Layout.frame` gives both in SF1's
columns: a DHC label (`` !!Total:!!Female:``) is written as SF1 writes its labels
(``Total: !! Female:``), and a DHC table of medians (its title says so; the technical
documentation gives median age to one decimal) gets SF1's ``decimal`` 1.

A table over a schema is declared from either by :func:`tabrecon.tables.spec.from_layout`: the
official ids, line order, labels, title and universe come from the file; what the declaration
adds is a *vocabulary*, the predicate over the schema's attributes of each stub the table uses
("Male:", "65 years and over:"). A cell's predicate is the intersection of its stub path's
predicates, so each stub is written once, however many cells nest under it.

>>> rows(["P42"]).height, rows(["P43"]).height
(10, 63)
>>> universe_of("P43")
'Population in group quarters'
>>> rows(["P18"], DHC_2020)["label"].to_list()[1], DHC_2020.continues("P18")
('Total: !! Male:', 'P43')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import polars as pl

from ..errors import TabreconError
from ..vocab import Release

#: the file inside the package (its columns: the reference file's)
LAYOUT_FILE = "data/sf1_2010_layout.csv.gz"
#: what separates a label's stubs, parent first
STUB_SEPARATOR = " !! "


@dataclass(frozen=True)
class Layout:
    """One summary-file product as the Bureau laid it out: its release, its file inside the
    package and the name messages give it."""

    release: Release
    file: str
    title: str

    def frame(self) -> pl.DataFrame:
        """Every cell of the product, one row each, in file order, all columns as text, in SF1's
        columns (``table``, ``cell``, ``api_name``, ``label``, ``universe``, ``decimal``,
        ``table_title``, ``level``: the stub's depth) and, for the DHC, its own
        (``lowest_geography``, ``sf1_2010_table``, ...)."""
        return _frame(self)

    def continues(self, table: str) -> str | None:
        """The SF1 2010 table the Bureau's crosswalk says ``table`` continues (None: new, or
        SF1 itself)."""
        if self.release is Release.SF1_2010:
            return None
        got = rows([table], self)["sf1_2010_table"][0]
        return None if got in (None, "", "N/A") else str(got)


SF1_2010 = Layout(Release.SF1_2010, LAYOUT_FILE, "SF1 2010")
DHC_2020 = Layout(Release.DHC_2020, "data/dhc_2020_layout.csv.gz", "the 2020 DHC")
#: every product's layout, by its release
LAYOUTS = {lay.release: lay for lay in (SF1_2010, DHC_2020)}


@cache
def _frame(lay: Layout) -> pl.DataFrame:
    raw = resources.files("tabrecon").joinpath(lay.file).read_bytes()
    df = pl.read_csv(raw, infer_schema_length=0)
    if lay.release is Release.SF1_2010:
        return df
    stubs = (
        pl.col("label")
        .str.strip_prefix(" !!")
        .str.split("!!")
        .list.eval(pl.element().str.strip_chars())
    )
    return df.with_columns(
        stubs.list.join(STUB_SEPARATOR).alias("label"),
        pl.col("title").alias("table_title"),
        pl.when(pl.col("title").str.starts_with("MEDIAN"))
        .then(pl.lit("1"))
        .otherwise(pl.lit("0"))
        .alias("decimal"),
        (stubs.list.len() - 1).cast(pl.String).alias("level"),  # SF1's: the stub's depth
    )


def layout(lay: Layout = SF1_2010) -> pl.DataFrame:
    """Every data field of SF1 2010 (or of ``lay``'s product), one row each, in file order (all
    columns as text)."""
    return lay.frame()


@cache
def segment_fields(lay: Layout = SF1_2010) -> dict[str, tuple[int, int]]:
    """Each cell's data segment and its 1-based place among the segment's data fields (after
    the five link fields). SF1 2010's layout gives the place itself; the DHC's gives a cell's
    line within its table, and its file keeps each segment's tables in the order the segment
    sheet reads them (files 01 and 02 hold H1-H12C, 234 cells, and H12D-H13F, 249, as the
    technical documentation's Figure 2-1 says), so the place is the cell's rank in its segment.

    >>> segment_fields(DHC_2020)["H0010001"], segment_fields(DHC_2020)["H012D0001"]
    ((1, 1), (2, 1))
    >>> segment_fields()["P0010001"]
    (1, 1)
    """
    df = lay.frame().select("cell", pl.col("segment").cast(pl.Int64), "position")
    if lay.release is Release.SF1_2010:
        place = df["position"].cast(pl.Int64)
    else:
        place = df.select(pl.int_range(1, pl.len() + 1).over("segment").alias("p"))["p"]
    return dict(zip(df["cell"], zip(df["segment"], place, strict=True), strict=True))


def rows(tables: Sequence[str], lay: Layout = SF1_2010) -> pl.DataFrame:
    """The fields of ``tables`` (``P42``, ``H0018``: as the file spells them) in SF1 2010 (or
    ``lay``'s product), in file order; an unknown table is refused by name."""
    df = lay.frame()
    known = set(df["table"].unique().to_list())
    unknown = [t for t in tables if t not in known]
    if unknown:
        raise TabreconError(f"{lay.title} has no table {', '.join(unknown)}")
    return df.filter(pl.col("table").is_in(list(tables)))


def universe_of(table: str, lay: Layout = SF1_2010) -> str:
    """The universe the Bureau states for ``table`` (``Population in group quarters``)."""
    return str(rows([table], lay)["universe"][0])


def stub_key(label: str) -> str:
    """A stub as a vocabulary key: spaces collapsed, the trailing colon dropped.

    >>> stub_key("Other noninstitutional facilities (701-702, 704, 706,   801-802):")
    'Other noninstitutional facilities (701-702, 704, 706, 801-802)'
    """
    return re.sub(r"\s+", " ", label).strip().rstrip(":").strip()


def name_parts(table: str) -> tuple[str, int]:
    """An SF1 or DHC table name's prefix and number (``P12A`` -> ``("P", 12)``); another name
    is refused.

    >>> name_parts("PCT12O"), name_parts("H16A"), name_parts("P12AH")
    (('PCT', 12), ('H', 16), ('P', 12))
    """
    m = re.match(r"^(PCT|HCT|PCO|P|H)(\d+)", table)
    if m is None:  # every SF1 table is named so
        raise TabreconError(f"{table}: not an SF1 table name")
    return m.group(1), int(m.group(2))


def title_of(fields: pl.DataFrame) -> str:
    """A table's title from its rows (:func:`rows`), without the Bureau's cell count
    (``SEX BY AGE [49]`` -> ``SEX BY AGE``)."""
    return re.sub(r"\s*\[\d+\]\s*$", "", str(fields["table_title"][0]))


def level_of(table: str, lay: Layout = SF1_2010) -> str:
    """Where SF1 2010 publishes a table: P and H tables to the block, PCT and HCT to the tract
    (the DHC: its layout's lowest geography; PCO tables to the county)."""
    if lay.release is Release.SF1_2010:
        return "tract" if table.startswith(("PCT", "HCT")) else "block"
    return str(rows([table], lay)["lowest_geography"][0])


def stubs_at(table: str, depth: int) -> list[str]:
    """The distinct stubs (:func:`stub_key`) at ``depth`` of ``table``'s stub tree, in file order:
    the categories a table's lines enumerate (P42's seven group-quarters types at depth 2).

    >>> stubs_at("P43", 2)
    ['Under 18 years', '18 to 64 years', '65 years and over']
    """
    df = rows([table])
    out: list[str] = []
    for label in df["label"]:
        parts = label.split(STUB_SEPARATOR)
        if len(parts) > depth and stub_key(parts[depth]) not in out:
            out.append(stub_key(parts[depth]))
    return out


def children(table: str, depth: int) -> dict[str, list[str]]:
    """Each stub at ``depth`` of ``table`` with the stubs nested directly under it (in file
    order): how a group line (``Institutionalized population``) is the union of its lines.

    >>> list(children("P42", 1))  # doctest: +ELLIPSIS
    ['Institutionalized population (101-106, ...)', 'Noninstitutionalized population (...)']
    """
    out: dict[str, list[str]] = {}
    for label in rows([table])["label"]:
        parts = [stub_key(x) for x in label.split(STUB_SEPARATOR)]
        if len(parts) > depth:
            kids = out.setdefault(parts[depth], [])
            if len(parts) > depth + 1 and parts[depth + 1] not in kids:
                kids.append(parts[depth + 1])
    return out
