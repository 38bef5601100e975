"""Reading a published table of any schema into a :class:`~tabrecon.tables.tableset.TableSet`:
a long file (geoid, cell, value: CSV, CSV.gz or Parquet), a wide one (the Census API's JSON, a
data.census.gov or summary-file style CSV), a state's SF1 folder or a ZIP of any of these (the
forms of :mod:`tabrecon.tables.forms`, opened through its registry), checked cell by cell, every
problem named by file, line and column (:func:`read_unit_tables`): persons'
(:func:`tabrecon.tables.published.read_tables`), housing units', group quarters' and any
declared population's alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError
from ..geo import LEVEL_OF_LENGTH, TABLE_LEVELS
from ..schema.spec import Schema
from ..vocab import Geo
from .forms import Raw, Shape, opened
from .measures import WITHHELD, parse_values
from .spec import UnitCell, as_published, statistic_decimals, tables_of
from .tableset import TableSet, TwiceError

#: the geoid lengths of the census levels a table is published for (block .. state)
_CENSUS_LENGTHS = [n for n, lv in LEVEL_OF_LENGTH.items() if lv in TABLE_LEVELS]


def read_unit_tables(path: str | Path, schema: Schema, withheld: bool = False) -> TableSet:
    """The tables of ``schema``'s cells (:class:`~tabrecon.tables.tableset.TableSet`; its
    ``to_frame()`` is the long table: geoid, cell, value) from a CSV, CSV.gz or Parquet file
    in the long form, or the block rows of a wide table (the Census API's JSON, a
    data.census.gov or summary-file style CSV: variables ``H0130002`` or ``H013002``), a state's
    SF1 folder or a ZIP of one of these (every form registered in :mod:`tabrecon.tables.forms`),
    checked: the three columns present, 15-digit block geoids, non-negative whole values, no
    (geoid, cell) twice, every cell id one of SF1 2010's (cells of other tables, as in a file
    holding a whole release, are left out). Each problem names the file, line and column, with
    the number of rows that share it. With ``withheld`` (a release that suppresses cells:
    :mod:`tabrecon.tables.publication`) an empty value or a suppression mark (``S``, ``X``,
    ``(X)``, ``D``, ``..``: :data:`~tabrecon.tables.publication.MISSING_MARKS`) is read as null:
    the cell was withheld.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(p, "w").write("geoid,cell,value\\n010010201001000,H0030001,-4\\n")
    >>> from tabrecon.schema.catalog import HOUSING_UNITS
    >>> read_unit_tables(p, HOUSING_UNITS)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.InputError: ...t.csv, line 2, column 'value': '-4' is a negative count
    """
    from ..schema.registry import of_schema

    pop = of_schema(schema)
    mine = {c for c, _ in pop.published_cells()}
    with opened(path, mine) as raw:
        long = _checked(raw, schema, mine, withheld)
        try:  # a (geoid, cell) given twice is found where the grids are filled, then named
            ts = TableSet.from_long(long.drop("__line", "__column"), pop.name, source=raw.where)
        except TwiceError as e:
            raise InputError(
                f"{long['cell'][e.row]!r} appears twice for geoid {long['geoid'][e.row]!r}",
                path=raw.where,
                line=int(long["__line"][e.row]),
                column=long["__column"][e.row] or "cell",
            ) from None
        return ts


def read_sf1(folder: str | Path, schema: str = "persons") -> TableSet:
    """The tables of the population registered as ``schema`` (persons: the 34 tables and P3-P5)
    from a state's SF1 or P.L. 94-171 folder (told apart by the geographic header's name,
    ``xxgeo2010.sf1``, ``xxgeo2010.pl`` or ``xxgeo2020.pl``): what
    :func:`tabrecon.tables.reader.read_unit_tables` reads from a folder, a path that is not one
    refused. Segment files that are missing leave their tables out, named in a warning."""
    from ..schema.registry import population

    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            "not a folder (a summary-file distribution is a folder of .sf1 or .pl files)",
            path=str(folder),
        )
    return read_unit_tables(folder, population(schema).schema)


def _checked(raw: Raw, schema: Schema, mine: set[str], withheld: bool) -> pl.DataFrame:
    """The long table of ``schema``'s cells in the opened table ``raw``, checked (see
    :func:`read_unit_tables`)."""
    p = raw.where
    lines: np.ndarray | None = None
    if raw.folder is not None:  # an SF1 folder: each cell from the segment and field of the layout
        from .sf1 import read_sf1_cells

        long = as_published(read_sf1_cells(raw.folder, sorted(mine)), schema)  # decimals as text
        df = long.with_columns(pl.col("value").cast(pl.String))
    else:
        assert raw.frame is not None
        df = raw.frame
        if "__line" in df.columns:
            df, lines = df.drop("__line"), df["__line"].cast(pl.Int64).to_numpy()
    if raw.shape is Shape.WIDE:
        df, lines = _long_of_wide(df, p, mine, schema)
    df = df.select(
        pl.col("geoid").str.strip_chars(),
        pl.col("cell").str.strip_chars().str.to_uppercase(),
        pl.col("value").str.strip_chars(),
        *([pl.col("__column")] if "__column" in df.columns else []),
    ).with_row_index("__row")
    # each row's line in the file (header = line 1): a wide file's from its row of geographies
    file_line = lines if lines is not None else np.arange(df.height, dtype=np.int64) + 2

    def refuse(bad: pl.Series, column: str, message: str | Callable[[int], str]) -> None:
        """Refuse the first row where ``bad`` holds (``message``: formatted with its value, or
        made from its row number), naming its line and column and how many more share it."""
        rows = np.flatnonzero(bad.fill_null(True).to_numpy())
        if rows.size:
            r = int(rows[0])
            # a wide file's value sits under the file's own variable (H013002), not 'value'
            named = df["__column"][r] if column == "value" and "__column" in df.columns else column
            raise InputError(
                message(r) if callable(message) else message.format(df[column][r]),
                path=p,
                line=int(file_line[r]),
                column=named,
                more=rows.size - 1,
            )

    from .layout import layout

    sf1 = set(layout()["cell"].to_list())
    refuse(
        df["cell"].is_null() | (df["cell"] == ""),
        "cell",
        "no cell id (a short row? a long table's rows are geoid, cell, value)",
    )
    refuse(
        ~df["cell"].is_in(list(mine | sf1)),
        "cell",
        "{!r} is not a cell of SF1 2010 (tabrecon tables list --schema " + schema.name + ")",
    )
    if not df["cell"].is_in(list(mine)).any():  # another kind of file: say whose cells it holds
        from ..schema import registry

        whose = registry.population_of_cells(
            df["cell"].unique().head(50).to_list(), but=schema.name
        )
        hint = (
            f"; they are cells of the {whose} tables: read it with --schema {whose}"
            if whose
            else ""
        )
        raise InputError(
            f"holds no cells of the {schema.name} tables ({min(mine)} ...){hint}", path=p
        )
    # census geographies: a cell is given for its table's level or a coarser one (SF1 and the
    # API publish P1, P12, H1 for tracts, counties and the state too); a declared geography's
    # cells for its own ids (tract cells for 11-digit tracts)
    tract_cells = _tract_cells(schema)
    block_cells = [c.id for c in _cells_at(schema, "block")]
    digits = pl.col("geoid").str.len_chars()
    n = schema.geoid_digits
    if schema.geography == Geo.BLOCK:
        refuse(
            df.select(
                ~pl.col("geoid").str.contains(r"^\d+$") | ~digits.is_in(_CENSUS_LENGTHS)
            ).to_series(),
            "geoid",
            "{!r} is not the geoid of a block (15 digits), block group (12), tract (11), county "
            "(5) or state (2)",
        )
        refuse(
            df.select(pl.col("cell").is_in(tract_cells) & (digits > 11)).to_series(),
            "geoid",
            "{!r} is finer than its cell's table, a tract table (11-digit tract geoids or coarser)",
        )
    else:
        wrong = (
            ~pl.col("geoid").str.contains(r"^\d+$")
            | (pl.col("cell").is_in(block_cells) & (digits != n))
            | (pl.col("cell").is_in(tract_cells) & (digits != 11))
            | ~digits.is_in([11, n])
        )
        refuse(
            df.select(wrong).to_series(),
            "geoid",
            "{!r} is not a " + f"{n}-digit {schema.geography} id",
        )
    df = df.with_columns(pl.col("value").fill_null(""))  # an empty field is named as such
    value = df["value"].cast(pl.Int64, strict=False)
    dec = statistic_decimals(schema)
    is_stat = df["cell"].is_in(list(dec))
    if is_stat.any():  # medians and means: decimals, in published units (30.5 -> 305)
        of_cell = df["cell"].replace_strict(dec, default=0, return_dtype=pl.Int64)
        for d in sorted(set(dec.values())):
            here = is_stat & (of_cell == d)
            value = pl.select(
                pl.when(here).then(parse_values(df["value"], d)).otherwise(value)
            ).to_series()
        may_lack = {
            c.id
            for t in tables_of(schema)
            for c in t.cells()
            if c.statistic and c.statistic.empty is None
        }
        refuse(
            is_stat & value.is_null() & ~(df["cell"].is_in(list(may_lack)) & (df["value"] == "")),
            "value",
            "{!r} is not a median or a mean with its cell's decimals (tabrecon tables list)",
        )
        value = pl.select(
            pl.when(is_stat & value.is_null()).then(WITHHELD).otherwise(value)
        ).to_series()
    if withheld:
        from .publication import MISSING_MARKS

        marked = df["value"].fill_null("").str.to_uppercase().is_in(list(MISSING_MARKS))
        refuse(
            ~is_stat & ((value.is_null() & ~marked) | (value < 0).fill_null(False)),
            "value",
            "{!r} is not a count (a whole number >= 0) nor a mark of a withheld cell (empty, "
            + ", ".join(m for m in MISSING_MARKS if m)
            + ")",
        )
    else:
        refuse(
            ~is_stat & (value.is_null() | (value < 0)),
            "value",
            lambda r: _not_a_count(df["value"][r], raw.shape is Shape.WIDE),
        )
    df = df.with_columns(value.alias("value")).filter(pl.col("cell").is_in(list(mine)))
    if is_stat.any():  # a withheld median or mean is null, as a withheld count is
        df = df.with_columns(pl.col("value").replace(WITHHELD, None))
    if not df.height:
        first = min(mine)
        raise InputError(f"holds no cells of the {schema.name} tables ({first} ...)", path=p)
    # each row's file line and (a wide file's) variable, for what is found later (a cell twice)
    rows = df["__row"].to_numpy()
    column = df["__column"] if "__column" in df.columns else pl.repeat(None, df.height, eager=True)
    return df.drop("__row", "__column", strict=False).with_columns(
        pl.Series("__line", file_line[rows], dtype=pl.Int64),
        column.cast(pl.String).alias("__column"),
    )


def _not_a_count(text: str, wide: bool) -> str:
    """Why ``text`` is not a count, in a few words (a ``wide`` file's empty value: a variable
    given for some geographies of a level and not this one).

    >>> _not_a_count("-2", False), _not_a_count("2.5", False)
    ("'-2' is a negative count", "'2.5' is a fractional count; counts are whole numbers")
    """
    t = text.strip()
    if re.fullmatch(r"-\d+", t):
        return f"{text!r} is a negative count"
    if re.fullmatch(r"\+?\d+", t):
        return f"{text!r} is a count out of range (above 9,223,372,036,854,775,807)"
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)", t):
        return f"{text!r} is a fractional count; counts are whole numbers"
    if not t and wide:
        return (
            "'' is empty, though the variable is given for other geographies of this level (a "
            "withheld cell needs --publication suppress:T)"
        )
    return (
        f"{text!r} is not a count (a whole number >= 0; a withheld cell needs --publication "
        "suppress:T)"
    )


def _tract_cells(schema: Schema) -> list[str]:
    return [c.id for t in tables_of(schema) if t.level == Geo.TRACT for c in t.cells()]


def _refuse_unknown_variables(
    columns: list[str], cells: dict[str, str], where: str, schema: Schema
) -> None:
    """Refuse a column named like an SF1 variable (``P099001``, ``H0990001``) that is none of SF1
    2010's in either spelling: a typo or another product's variable would otherwise be passed
    over without a word. Variables of SF1's other tables (a whole release) are left out."""
    known = _known_variables()
    for c in columns:
        name = c.strip().upper()
        if c in cells or not re.fullmatch(r"(PCT|HCT|P|H)\d{3}[A-Z]?\d{3,4}", name):
            continue
        if name not in known:
            raise InputError(
                f"unknown variable {c!r}: no variable of SF1 2010 is named so (tabrecon tables "
                f"list --schema {schema.name})",
                path=where,
            )


@cache
def _known_variables() -> frozenset[str]:
    """Every SF1 2010 field's name in the summary-file and the 2010 API spelling."""
    from .layout import layout

    lay = layout()
    return frozenset(lay["cell"].to_list()) | frozenset(lay["api_name"].to_list())


def _cells_at(schema: Schema, level: str) -> list[UnitCell]:
    return [c for t in tables_of(schema) if t.level == level for c in t.cells()]


def _spellings(mine: set[str]) -> dict[str, str]:
    """Every spelling of the cells ``mine`` a wide file may use, to the cell id: the summary
    file's (``P0120003``, ``P012A003``, ``H016A0003``) and the 2010 API's (``P012003``), the
    latter from the Bureau's layout where it has the cell, else by its rule (a three-digit
    line)."""
    from .layout import layout

    lay = layout().filter(pl.col("cell").is_in(list(mine)))
    out = {c: c for c in mine}
    out |= dict(zip(lay["api_name"].to_list(), lay["cell"].to_list(), strict=True))
    for c in mine:
        m = re.match(r"^(PCT|HCT|P|H)(\d{3}[A-Z]?)(\d{4})$", c)
        if m and int(m.group(3)) < 1000:
            out.setdefault(f"{m.group(1)}{m.group(2)}{m.group(3)[1:]}", c)
    return out


def _long_of_wide(
    df: pl.DataFrame, where: str, mine: set[str], schema: Schema
) -> tuple[pl.DataFrame, np.ndarray]:
    """The block rows of a wide table (one row per geography: the Census API's JSON, a
    data.census.gov or summary-file style CSV) as a long table, and each value's file line.
    Variables are read in the summary-file style (``H0130002``) or the 2010 API style
    (``H013002``); those that are cells of ``mine`` (``schema``'s) are kept."""
    from ..schema.registry import of_schema
    from .forms import geography_of

    spelled = _spellings(mine)
    cells = {c: spelled[c.strip().upper()] for c in df.columns if c.strip().upper() in spelled}
    spell = of_schema(schema).spell  # a population's other names (persons: 2020's)
    if spell is not None:
        cells |= {c: v for c, v in spell(df.columns).items() if v in mine and c not in cells}
    seen: dict[str, str] = {}
    for column, cell in cells.items():  # two spellings of one cell (H001001 and H0010001)
        if cell in seen:
            raise InputError(
                f"cell {cell} appears twice, as {seen[cell]!r} and {column!r}", path=where
            )
        seen[cell] = column
    _refuse_unknown_variables(df.columns, cells, where, schema)
    dhc = [c for c in df.columns if re.fullmatch(r"(PCT|HCT|P|H)\d+[A-Z]?_\d{3}N", c.strip())]
    if not cells and dhc:  # 2020 names: never guessed from 2010 labels
        raise InputError(
            f"holds 2020 census variables ({', '.join(dhc[:3])}, ...): tabrecon declares the "
            f"{schema.name} tables of SF1 2010 only (2010 names such as {min(mine)}); the 2020 "
            "DHC tables over this schema are not declared, because their table shells are not "
            "available to check them against, and 2020 ids are never guessed from 2010 labels",
            path=where,
        )
    if not cells:
        example = min(mine)
        raise InputError(
            f"neither a long table (columns geoid, cell, value) nor a wide one with {schema.name} "
            f"variables such as {example} (found: {', '.join(df.columns[:8])})",
            path=where,
        )
    geo = geography_of(df, where)
    first = 2
    if geo.len() and not re.search(r"\d", geo[0] or ""):  # data.census.gov: a row of labels
        df, geo, first = df.slice(1), geo.slice(1), 3
    wide = (
        df.select(list(cells))
        .rename(cells)
        .with_columns(geo.alias("geoid"), pl.int_range(first, first + df.height).alias("__line"))
    )
    twice = wide.filter(
        pl.col("geoid").is_not_null() & pl.col("geoid").str.strip_chars().is_duplicated()
    )
    if twice.height:  # one geography on two rows: which to believe is not ours to guess
        g, lines = twice["geoid"][0], twice.filter(pl.col("geoid") == twice["geoid"][0])["__line"]
        raise InputError(
            f"geoid {g.strip()!r} appears on two rows (lines {lines[0]} and {lines[1]})",
            path=where,
            line=int(lines[1]),
        )
    n = schema.geoid_digits
    own = {n} | ({11} if any(c in mine for c in _tract_cells(schema)) else set())
    if not wide["geoid"].str.len_chars().is_in(list(own)).any():  # (persons: tract-only files)
        raise InputError(f"holds no {schema.geography} rows ({n}-digit geographies)", path=where)
    if schema.geography == Geo.BLOCK:  # tracts, counties, the state beside the blocks
        wide = wide.filter(pl.col("geoid").str.len_chars().is_in(_CENSUS_LENGTHS))
    else:
        wide = wide.filter(pl.col("geoid").str.len_chars() == n)
    long = wide.unpivot(index=["geoid", "__line"], on=list(cells.values()), variable_name="cell")
    # a variable empty for every geography of a level is not published for that level (a
    # block-only variable on a tract's row); one empty for some of them is refused as a value
    empty = pl.col("value").is_null() | (pl.col("value").cast(pl.String).str.strip_chars() == "")
    level = pl.col("geoid").str.len_chars()
    if long.select(empty.any()).item():
        long = long.filter(~empty.all().over(level, "cell"))
    header = {v: k for k, v in cells.items()}  # the file's own variable names, for errors
    long = long.with_columns(pl.col("cell").replace_strict(header).alias("__column"))
    return long.drop("__line"), long["__line"].to_numpy()
