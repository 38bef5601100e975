"""The person tables' names in the published forms, and person tables read and written.

Reading is :func:`tabrecon.tables.reader.read_unit_tables` over :data:`tabrecon.schema.PERSONS`
(every form of :mod:`tabrecon.tables.forms`: the long file tabrecon writes, a wide table as CSV or
Parquet, the Census API's JSON, a data.census.gov download, an SF1 or P.L. 94-171 folder, a ZIP
of one of them), so persons get the same checks and errors as every population. What is
particular to persons is their names: the summary file's (``P0120003``), the 2010 API's
(``P012003``) and the 2020 products' (``P12_003N``; the 2020 P.L. 94-171's P1-P4 are SF1's
P8-P11), read by :func:`cells_2020` (the persons'
:attr:`~tabrecon.schema.registry.Population.spell`).

>>> import polars as pl, tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
>>> pl.DataFrame({"GEO_ID": ["1000000US280010001001000"], "P001001": ["3"]}).write_csv(p)
>>> read_tables(p)["block"].col("P0010001").tolist()
[3]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..io import write_frame
from ..schema import registry
from .tableset import TableSet

if TYPE_CHECKING:
    pass

_VARIABLE = re.compile(r"^(P|PCT)(\d{3})([A-Z]?)(\d{3,4})$")
#: 2020 names (the DHC and P.L. 94-171 on the API and data.census.gov): P1_001N, P12A_003N
_VARIABLE_2020 = re.compile(r"^(P|PCT)(\d{1,3})([A-Z]?)_(\d{3})N$")
#: The 2020 P.L. 94-171 tables are SF1's P8-P11 (its P5, group quarters, is not a person table
#: tabrecon models)
PL_2020_TABLES = {1: 8, 2: 9, 3: 10, 4: 11}


def cell_of_variable(name: str, pl2020: bool = False) -> str | None:
    """The SF1 cell id of a variable named in the summary-file style, the 2010 Census API style
    or the 2020 style (None for a name of none of them). The 2020 P.L. 94-171 numbers its tables
    P1-P4 for SF1's P8-P11: ``pl2020`` reads them so.

    >>> cell_of_variable("P001001"), cell_of_variable("P0010001"), cell_of_variable("PCT012105")
    ('P0010001', 'P0010001', 'PCT0120105')
    >>> cell_of_variable("P012A003"), cell_of_variable("P12A_003N"), cell_of_variable("NAME")
    ('P012A003', 'P012A003', None)
    >>> cell_of_variable("P1_071N", pl2020=True), cell_of_variable("P5_001N", pl2020=True)
    ('P0080071', None)
    """
    text = name.strip().upper()
    m = _VARIABLE.match(text) or _VARIABLE_2020.match(text)
    if m is None:
        return None
    prefix, table, iteration, line = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
    if pl2020 and m.re is _VARIABLE_2020:
        if prefix != "P" or table not in PL_2020_TABLES:
            return None
        table = PL_2020_TABLES[table]
    if iteration:
        return f"{prefix}{table:03d}{iteration}{line:03d}"
    return f"{prefix}{table:03d}{line:04d}"


def is_pl_2020(columns: Sequence[str]) -> bool:
    """Whether a wide file's ``columns`` are the 2020 P.L. 94-171's: its P1 has 71 lines (race),
    the DHC's one (the total population)."""
    return any(re.fullmatch(r"P1_0(0[2-9]|[1-7]\d)N", c.strip().upper()) for c in columns)


def cells_2020(columns: Sequence[str]) -> dict[str, str]:
    """The SF1 cell of each 2020-named person variable among a wide file's ``columns`` (the DHC
    keeps SF1's numbering; the 2020 P.L. 94-171's P1-P4 are SF1's P8-P11): the persons'
    :attr:`~tabrecon.schema.registry.Population.spell`.

    >>> cells_2020(["GEO_ID", "P1_001N", "P1_071N"])
    {'P1_001N': 'P0080001', 'P1_071N': 'P0080071'}
    >>> cells_2020(["GEO_ID", "P1_001N", "P12A_003N", "P001001"])
    {'P1_001N': 'P0010001', 'P12A_003N': 'P012A003'}
    """
    pl2020 = is_pl_2020(columns)
    return {
        c: cell
        for c in columns
        if _VARIABLE_2020.match(c.strip().upper()) and (cell := cell_of_variable(c, pl2020))
    }


def name_2020(cell: str) -> str:
    """A cell's name in the 2020 products (the DHC's numbering, which keeps SF1's).

    >>> name_2020("P0010001"), name_2020("P012A003"), name_2020("PCT0120105")
    ('P1_001N', 'P12A_003N', 'PCT12_105N')
    """
    m = re.fullmatch(r"(P|PCT)(\d{3})([A-Z]?)(\d{3,4})", cell)
    if m is None:
        raise ValueError(f"not a cell id: {cell!r}")
    return f"{m.group(1)}{int(m.group(2))}{m.group(3)}_{int(m.group(4)):03d}N"


def read_tables(path: str | Path) -> TableSet:
    """Published person tables from ``path`` in any registered form
    (:func:`tabrecon.tables.reader.read_unit_tables` over the person schema)."""
    from .reader import read_unit_tables

    return read_unit_tables(path, registry.population("persons"))  # the Python API's person entry


def write_tables(ts: TableSet, path: str | Path) -> None:
    """Write the long table (geoid, cell, value) as a file holds it: ``.parquet`` as Parquet,
    ``.csv`` as CSV, ``.csv.gz`` as gzip CSV; medians and means as their decimals (``30.5``:
    :func:`tabrecon.tables.spec.as_published`), so that :func:`read_tables` reads back what was
    written."""
    from .spec import as_published

    write_frame(as_published(ts.to_frame(), ts.population), path)


__all__ = ["cell_of_variable", "cells_2020", "name_2020", "read_tables", "write_tables"]
