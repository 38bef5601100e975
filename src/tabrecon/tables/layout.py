"""The 2010 Summary File 1 as the Bureau laid it out, and tables declared from it.

``data/sf1_2010_layout.csv.gz`` is the reference file ``sf1_2010_layout.csv`` (every data field of
SF1 2010: table, cell id, API name, the stub path as a label, universe, decimals), compressed and
otherwise byte for byte the same (a test compares them when the reference is beside the
project). A table over a schema is declared from it by
:func:`tabrecon.tables.spec.from_layout`: the official ids, line order, labels, title and universe
come from the file; what the declaration adds is a *vocabulary*, the predicate over the schema's
attributes of each stub the table uses ("Male:", "65 years and over:"). A cell's predicate is the
intersection of its stub path's predicates, so each stub is written once, however many cells nest
under it.

>>> rows(["P42"]).height, rows(["P43"]).height
(10, 63)
>>> universe_of("P43")
'Population in group quarters'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources

import polars as pl

from ..errors import TabreconError

#: the file inside the package (its columns: the reference file's)
LAYOUT_FILE = "data/sf1_2010_layout.csv.gz"
#: what separates a label's stubs, parent first
STUB_SEPARATOR = " !! "


@cache
def layout() -> pl.DataFrame:
    """Every data field of SF1 2010, one row each, in file order (all columns as text)."""
    raw = resources.files("tabrecon").joinpath(LAYOUT_FILE).read_bytes()
    return pl.read_csv(raw, infer_schema_length=0)


def rows(tables: Sequence[str]) -> pl.DataFrame:
    """The fields of ``tables`` (``P42``, ``H0018``: as the file spells them), in file order;
    an unknown table is refused by name."""
    df = layout()
    known = set(df["table"].unique().to_list())
    unknown = [t for t in tables if t not in known]
    if unknown:
        raise TabreconError(f"SF1 2010 has no table {', '.join(unknown)}")
    return df.filter(pl.col("table").is_in(list(tables)))


def universe_of(table: str) -> str:
    """The universe the Bureau states for ``table`` (``Population in group quarters``)."""
    return str(rows([table])["universe"][0])


def stub_key(label: str) -> str:
    """A stub as a vocabulary key: spaces collapsed, the trailing colon dropped.

    >>> stub_key("Other noninstitutional facilities (701-702, 704, 706,   801-802):")
    'Other noninstitutional facilities (701-702, 704, 706, 801-802)'
    """
    return re.sub(r"\s+", " ", label).strip().rstrip(":").strip()


def name_parts(table: str) -> tuple[str, int]:
    """An SF1 table name's prefix and number (``P12A`` -> ``("P", 12)``); another name is
    refused.

    >>> name_parts("PCT12O"), name_parts("H16A")
    (('PCT', 12), ('H', 16))
    """
    m = re.match(r"^(PCT|HCT|P|H)(\d+)", table)
    if m is None:  # every SF1 table is named so
        raise TabreconError(f"{table}: not an SF1 table name")
    return m.group(1), int(m.group(2))


def title_of(fields: pl.DataFrame) -> str:
    """A table's title from its rows (:func:`rows`), without the Bureau's cell count
    (``SEX BY AGE [49]`` -> ``SEX BY AGE``)."""
    return re.sub(r"\s*\[\d+\]\s*$", "", str(fields["table_title"][0]))


def level_of(table: str) -> str:
    """Where SF1 2010 publishes a table: P and H tables to the block, PCT and HCT to the tract."""
    return "tract" if table.startswith(("PCT", "HCT")) else "block"


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
