"""Published tables in the forms users download, detected from the file itself.

* the long file tabrecon writes (``geoid, cell, value``);
* a wide table, one row per geography, as CSV or Parquet: geography as ``GEOID``/``GEOID10``,
  ``GEO_ID`` (``1000000US280010001001000``) or ``STATE``/``COUNTY``/``TRACT``/``BLOCK`` columns
  (with ``SUMLEV`` where tracts and blocks are mixed), variables named in the summary-file style
  (``P0010001``, ``P012A003``, ``PCT0120105``) or the Census API style (``P001001``);
* the Census API's JSON response (an array of arrays, header first);
* a data.census.gov CSV download (a second header row of labels);
* an SF1 summary-file folder (:func:`tabrecon.tables.sf1.read_sf1`).

Everything is turned into the long form and validated once by
:func:`tabrecon.tables.published.tables_from_long`, so every form gets the same checks and errors
name the file, the line, the geography and the variable as the file spells it. Housing variables
(``H...``) are skipped; any other variable tabrecon does not know is an error.

>>> import polars as pl
>>> wide = pl.DataFrame({"GEO_ID": ["1000000US280010001001000"], "P001001": ["3"], "NAME": ["x"]})
>>> tables_from_wide(wide)["block"].col("P0010001").tolist()
[3]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError
from ..geo import LENGTH, LEVEL_OF_LENGTH
from ..io import kind_of, read_text_frame, write_frame
from .forms import frame_of_rows, geography_of
from .persons import LEVEL_OF_LEN, all_cells, cell_index
from .tableset import MISSING, Grid, TableSet

_VARIABLE = re.compile(r"^(P|PCT)(\d{3})([A-Z]?)(\d{3,4})$")
#: 2020 names (the DHC and P.L. 94-171 on the API and data.census.gov): P1_001N, P12A_003N
_VARIABLE_2020 = re.compile(r"^(P|PCT)(\d{1,3})([A-Z]?)_(\d{3})N$")
#: The 2020 P.L. 94-171 tables are SF1's P8-P11 (its P5, group quarters, is not a person table
#: tabrecon models)
PL_2020_TABLES = {1: 8, 2: 9, 3: 10, 4: 11}
#: Summary levels of the geographies tabrecon reads (SF1 / API ``SUMLEV``).
SUMLEVELS = {"101": "block", "100": "block", "140": "tract", "050": "county", "040": "state"}


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
    """Published tables from ``path`` in any registered form (:mod:`tabrecon.tables.forms`: the
    ones listed in the module docstring, and a ZIP holding one of them)."""
    from .forms import Shape, opened

    with opened(path, [c.id for c in all_cells()]) as raw:
        if raw.folder is not None:
            from .sf1 import read_sf1

            ts = read_sf1(raw.folder)
            ts.source = raw.where
            return ts
        assert raw.frame is not None
        if raw.shape is Shape.LONG:
            return tables_from_long(raw.frame, raw.where)
        return tables_from_wide(raw.frame, raw.where)


def _refuse_partial_tables(
    wide: pl.DataFrame, cells: list[str], variables: list[str], where: str
) -> None:
    """Refuse a variable published for some geographies of a level and not for others (a block
    missing from one table would silently become "not published")."""
    empty = wide.select(
        pl.col("geoid").str.len_chars().alias("_len"),
        pl.col("__line"),
        pl.col("geoid"),
        *[(pl.col(c).is_null() | (pl.col(c).str.strip_chars() == "")).alias(c) for c in cells],
    )
    for (length,), part in empty.group_by("_len", maintain_order=True):
        n_empty = part.select(pl.col(cells).sum()).row(0)
        for c, v, k in zip(cells, variables, n_empty, strict=True):
            if 0 < k < part.height:
                r = part.filter(pl.col(c)).row(0, named=True)
                raise InputError(
                    f"variable {v!r} is published for {part.height - k:,} of the "
                    f"{part.height:,} geographies with {length}-digit geoids but not for geoid "
                    f"{r['geoid']!r} ({k - 1:,} more lack it)",
                    path=where,
                    line=int(r["__line"]),
                )


def tables_from_wide(df: pl.DataFrame, where: str = "tables") -> TableSet:
    """A :class:`TableSet` from a wide table (one row per geography, one column per variable)."""
    df = df.select(pl.all().cast(pl.String))
    known = cell_index()
    variables: list[str] = []
    cells: list[str] = []
    # the 2020 P.L. 94-171's P1 has 71 lines (race); the DHC's P1 one (total population)
    pl2020 = is_pl_2020(df.columns)
    for c in df.columns:
        if c.startswith("__"):
            continue
        cell = cell_of_variable(c, pl2020)
        if cell is None:  # geography, names, housing variables, annotation columns
            continue
        if cell not in known:
            raise InputError(
                f"unknown variable {c!r} (read as cell {cell}): not a person table tabrecon "
                "knows (see `tabrecon tables list`)",
                path=where,
            )
        variables.append(c)
        cells.append(cell)
    if not variables:
        kind = kind_of(df.columns)
        raise InputError(
            (f"is {kind}, not published tables; " if kind else "no table variables: ")
            + "expected columns such as P0010001 (summary-file style) or P001001 (Census API "
            "style), or a long file with columns geoid, cell, value",
            path=where,
        )
    dup = sorted({c for c in cells if cells.count(c) > 1})
    if dup:
        names = [v for v, c in zip(variables, cells, strict=True) if c == dup[0]]
        raise InputError(f"cell {dup[0]} appears twice, as {' and '.join(names)}", path=where)
    line0 = 2
    geo = geography_of(df, where)
    if geo.len() and not re.search(r"\d", geo[0] or ""):  # data.census.gov: a row of labels
        df, geo, line0 = df.slice(1), geo.slice(1), 3
    lines = df["__line"].cast(pl.Int64) if "__line" in df.columns else None
    wide = df.select(variables).rename(dict(zip(variables, cells, strict=True)))
    wide = wide.with_columns(
        geo.alias("geoid"),
        (lines if lines is not None else pl.int_range(line0, line0 + df.height)).alias("__line"),
    )
    _refuse_partial_tables(wide, cells, variables, where)
    return _grids(wide, cells, dict(zip(cells, variables, strict=True)), where)


def _grids(wide: pl.DataFrame, cells: list[str], spelt: dict[str, str], where: str) -> TableSet:
    """Grids straight from the wide columns (no long copy: a million-person county's block tables
    are 18M values), with the checks :func:`tabrecon.tables.published.tables_from_long` makes, each
    error naming the line, the geography and the variable as the file spells it."""
    geo = wide["geoid"].str.strip_chars()
    wide = wide.with_columns(geo.alias("geoid"), geo.str.len_chars().alias("_len"))

    def fail(rows: pl.DataFrame, msg: str, cell: str | None = None) -> None:
        r = rows.row(0, named=True)
        what = f"geoid {r['geoid']!r}"
        if cell is not None:
            what += f", variable {spelt[cell]!r} = cell {cell!r}, value {r[cell]!r}"
        raise InputError(f"{msg} ({what})", path=where, line=int(r["__line"]), more=rows.height - 1)

    bad = wide.filter(~pl.col("geoid").str.contains(r"^\d+$"))
    if bad.height:
        fail(bad, "geoid must be digits")
    bad = wide.filter(~pl.col("_len").is_in(list(LEVEL_OF_LENGTH)))
    if bad.height:
        fail(bad, "geoid length must be 2 (state), 5 (county), 11 (tract), 12 (block group) or 15")
    every = all_cells()
    idx = cell_index()
    grids: dict[str, Grid] = {}
    for (length,), part in wide.group_by("_len", maintain_order=True):
        level = LEVEL_OF_LENGTH[int(length)]
        dup = part.filter(pl.col("geoid").is_duplicated())
        if dup.height:
            fail(dup.slice(1), "a geography appears twice")
        text = part.select(pl.col(cells).str.strip_chars())
        given = text.select(pl.col(cells).is_not_null() & (pl.col(cells) != ""))
        ints = text.select(pl.col(cells).cast(pl.Int64, strict=False))
        not_int = given.select([given[c] & ints[c].is_null() for c in cells]).sum().row(0)
        negative = ints.select((pl.col(cells) < 0).fill_null(False)).sum().row(0)
        for c, n_bad, n_neg in zip(cells, not_int, negative, strict=True):
            if n_bad:
                rows = part.filter(given[c] & ints[c].is_null())
                v = str(rows[c][0]).strip()
                msg = (
                    "count out of range (above 9,223,372,036,854,775,807)"
                    if re.fullmatch(r"[+-]?\d+", v)
                    else "fractional count; table values must be whole numbers"
                    if re.fullmatch(r"[+-]?\d*\.\d+", v)
                    else "value is not an integer"
                )
                fail(rows, msg, c)
            if n_neg:
                fail(part.filter(ints[c] < 0), "negative count", c)
        present = [c for c, k in zip(cells, given.sum().row(0), strict=True) if k]
        for c in present:  # a cell may be given at its own level or a coarser one
            if LENGTH[every[idx[c]].level] < length:
                fail(part.filter(given[c]), "geoid is finer than the cell's level", c)
        if not present:
            continue
        present.sort(key=idx.__getitem__)
        order = np.argsort(part["geoid"].to_numpy())
        values = ints.select(present).fill_null(MISSING).to_numpy().astype(np.int64)[order]
        grids[level] = Grid(
            level, part["geoid"].to_numpy().astype(str)[order], np.array(present), values
        )
    if not grids:
        raise InputError("no table values", path=where)
    return TableSet(grids, source=where)


__all__ = [
    "SUMLEVELS",
    "cell_of_variable",
    "frame_of_rows",
    "name_2020",
    "read_tables",
    "tables_from_wide",
]


# --------------------------------------------------------------------------------------------------
# Reading and writing table files
# --------------------------------------------------------------------------------------------------
def write_tables(ts: TableSet, path: str | Path) -> None:
    """Write the long table: ``.parquet`` as Parquet, ``.csv`` as CSV, ``.csv.gz`` as gzip CSV."""
    write_frame(ts.to_frame(), path)


def read_long_tables(path: str | Path) -> TableSet:
    """Read and validate a long table file (geoid, cell, value).

    Every error names the file, the line (header = line 1) and the cell: unknown cell ids, geoids
    that are not digits or whose length does not fit the cell's level, values that are not
    non-negative integers, and duplicate (geoid, cell) rows.
    """
    p = str(path)
    return tables_from_long(read_text_frame(p), p)


def tables_from_long(df: pl.DataFrame, p: str = "tables") -> TableSet:
    """A :class:`TableSet` from a long frame of text columns geoid, cell, value (see
    :func:`read_tables`)."""
    missing = [c for c in ("geoid", "cell", "value") if c not in df.columns]
    if missing:
        raise InputError(
            f"missing column(s) {missing}; a table file has columns geoid, cell, value", path=p
        )
    if df.height == 0:
        raise InputError("no table values", path=p)
    cells = all_cells()
    index = cell_index()
    want = np.array([LENGTH[c.level] for c in cells], dtype=np.int64)
    carried = [c for c in ("__line", "variable") if c in df.columns]
    df = df.select(
        pl.col("geoid").str.strip_chars(),
        pl.col("cell").str.strip_chars(),
        pl.col("value").str.strip_chars(),
        *carried,
    ).with_columns(
        pl.col("cell").replace_strict(index, default=None, return_dtype=pl.Int32).alias("_ci"),
        pl.col("value").cast(pl.Int64, strict=False).alias("_v"),
        pl.col("geoid").str.len_chars().alias("_len"),
    )

    def line_of(rows: pl.DataFrame) -> pl.DataFrame:
        """The file line of each row (header = line 1), computed only for a failure."""
        if "__line" in rows.columns:
            return rows.with_columns(pl.col("__line").cast(pl.Int64).alias("_line"))
        return rows

    def fail(cond: pl.Expr, msg: str) -> None:
        bad = line_of(df.with_row_index("_line", offset=2)).filter(cond)
        if bad.height:
            r = bad.row(0, named=True)
            var = (
                f"variable {r['variable']!r} = "
                if r.get("variable") not in (None, r["cell"])
                else ""
            )
            raise InputError(
                f"{msg} (geoid {r['geoid']!r}, {var}cell {r['cell']!r}, value {r['value']!r})",
                path=p,
                line=int(r["_line"]),
                more=bad.height - 1,
            )

    digits = pl.col("geoid").str.contains(r"^\d+$")
    lengths = pl.col("_len").is_in(list(LEVEL_OF_LEN))
    # one pass tells whether anything is wrong; the slow, precise pass runs only then
    any_bad = df.select(
        (
            pl.col("_ci").is_null()
            | pl.col("_v").is_null()
            | (pl.col("_v") < 0)
            | ~digits
            | ~lengths
        ).any()
    ).item()
    if any_bad:
        from ..schema.registry import population_of_cells

        unknown = pl.col("_ci").is_null()
        strangers = df.filter(unknown)["cell"].unique().head(50).to_list()
        whose = population_of_cells(strangers, but="persons") if strangers else None
        fail(
            unknown,
            "unknown cell id"
            + (
                f"; it is a cell of the {whose} tables, read with --schema {whose}" if whose else ""
            ),
        )
        whole = pl.col("value").str.contains(r"^[+-]?\d+$")
        fail(pl.col("_v").is_null() & whole, "count out of range (above 9,223,372,036,854,775,807)")
        fail(
            pl.col("_v").is_null() & pl.col("value").cast(pl.Float64, strict=False).is_not_null(),
            "fractional count; table values must be whole numbers",
        )
        fail(pl.col("_v").is_null(), "value is not an integer")
        fail(pl.col("_v") < 0, "negative count")
        fail(~digits, "geoid must be digits")
        fail(
            ~lengths,
            "geoid length must be 2 (state), 5 (county), 11 (tract), 12 (block group) or 15 "
            "(block)",
        )
    grids = {}
    for L, lvl in sorted(LEVEL_OF_LEN.items(), reverse=True):
        part = df.filter(pl.col("_len") == L)
        if not part.height:
            continue
        ci = part["_ci"].to_numpy().astype(np.int64)
        finer = want[ci] < L  # a cell may be given at its own level or a coarser one
        if finer.any():
            fail(
                (pl.col("_len") == L) & (pl.col("_ci").is_in(np.unique(ci[finer]).tolist())),
                "geoid is finer than the cell's level",
            )
        # geoids ranked by polars (hashing, not a numpy sort of 18M strings); cells looked up
        geo = part["geoid"]
        gids = geo.unique().sort().to_numpy().astype(str)
        gi = (geo.rank("dense").to_numpy() - 1).astype(np.int64)
        used = np.zeros(len(cells), dtype=bool)
        used[ci] = True
        cis = np.flatnonzero(used)
        cj = (np.cumsum(used) - 1)[ci]
        vals = np.full((len(gids), len(cis)), MISSING, dtype=np.int64)
        vals[gi, cj] = part["_v"].to_numpy()
        if int((vals != MISSING).sum()) != part.height:  # a (geoid, cell) given twice
            dup = line_of(df.with_row_index("_line", offset=2)).filter(
                pl.struct("geoid", "cell").is_duplicated()
            )
            r = dup.row(1 if dup.height > 1 else 0, named=True)
            raise InputError(
                f"duplicate row for geoid {r['geoid']!r} cell {r['cell']!r}",
                path=p,
                line=int(r["_line"]),
            )
        grids[lvl] = Grid(lvl, gids, np.array([cells[i].id for i in cis]), vals)
    return TableSet(grids, source=p)
