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
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..errors import InputError
from ..geo import LEVEL_OF_LENGTH, TABLE_LEVELS
from ..schema import registry
from ..vocab import Geo, Release
from .forms import Raw, Shape, opened
from .measures import WITHHELD, parse_values
from .publication import MISSING_MARKS
from .spec import UnitCell, as_published, statistic_decimals, tables_of
from .tableset import TableSet, TwiceError

if TYPE_CHECKING:
    from ..schema.registry import Population

#: the geoid lengths of the census levels a table is published for (block .. state)
_CENSUS_LENGTHS = [n for n, lv in LEVEL_OF_LENGTH.items() if lv in TABLE_LEVELS]


def read_unit_tables(path: str | Path, pop: Population, withheld: bool = False) -> TableSet:
    """The tables of ``pop``'s cells (:class:`~tabrecon.tables.tableset.TableSet`; its
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
    >>> from tabrecon.schema.registry import population
    >>> read_unit_tables(p, population("households"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.InputError: ...t.csv, line 2, column 'value': '-4' is a negative count
    """
    mine = {c for c, _ in pop.published_cells()}
    with opened(path, mine) as raw:
        rows = _rows(raw, pop, mine)
        kept, geoids, geo, cell, value = _checked(rows, pop, mine, withheld)
        try:  # a (geoid, cell) given twice is found where the grids are filled, then named
            ts = TableSet.from_codes(pop, geoids, geo, cell, value, source=raw.where)
            ts.skipped = dict(rows.skipped)
            return ts
        except TwiceError as e:
            r = int(kept[e.row])
            raise InputError(
                f"{rows.cell_of(r)!r} appears twice for geoid {rows.geoid_of(r)!r}",
                path=raw.where,
                line=rows.line_at(r),
                column=rows.column_of(r, "cell"),
            ) from None


def read_sf1(folder: str | Path, schema: str = "persons") -> TableSet:
    """The tables of the population registered as ``schema`` (persons: the 34 tables and P3-P5)
    from a state's SF1 or P.L. 94-171 folder (told apart by the geographic header's name,
    ``xxgeo2010.sf1``, ``xxgeo2010.pl`` or ``xxgeo2020.pl``): what
    :func:`tabrecon.tables.reader.read_unit_tables` reads from a folder, a path that is not one
    refused. Segment files that are missing leave their tables out, named in a warning."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            "not a folder (a summary-file distribution is a folder of .sf1 or .pl files)",
            path=str(folder),
        )
    return read_unit_tables(folder, registry.population(schema))


@dataclass
class _Rows:
    """A table as opened, one row per value, coded: row ``i`` is the value of the cell
    ``cells[ci[i]]`` (stripped, upper case) for the geography ``geoids[gi[i]]`` (stripped), read
    as a whole number (``ints``, ``bad`` where it is none). Text is looked at only where needed
    (:meth:`text_at`, of rows in ascending order: medians, marks, errors), so a wide file's
    values are never unpivoted into a long table of text. ``line_at(i)`` is row i's line in
    the file; a wide file's rows run variable by variable, its ``columns`` the file's own name
    of each cell's variable."""

    where: str
    geoids: np.ndarray
    gi: np.ndarray
    cells: np.ndarray
    ci: np.ndarray
    ints: np.ndarray
    bad: np.ndarray
    line_at: Callable[[int], int]
    text_at: Callable[[np.ndarray], pl.Series]
    columns: dict[str, str] | None = None
    wide: bool = False
    #: rows of the file read as no geography of its levels, by kind (a wide file's nation row:
    #: ``{"summary level 010": (1, 49)}``, rows and values); every other row is read or refused
    skipped: dict[str, tuple[int, int]] = field(default_factory=dict)

    def geoid_of(self, r: int) -> str:
        return str(self.geoids[self.gi[r]])

    def cell_of(self, r: int) -> str:
        return str(self.cells[self.ci[r]])

    def column_of(self, r: int, column: str) -> str:
        """The file's column holding row ``r``'s ``column`` (a wide file's value sits under
        its own variable, ``H013002``, not ``value``)."""
        if column == "value" and self.columns is not None:
            return self.columns[self.cell_of(r)]
        return column


def _coded(
    df: pl.DataFrame, clean: dict[str, Callable[[pl.Series], pl.Series]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each column of ``df`` named in ``clean``: its distinct values (null: empty) after
    their ``clean``, sorted, and each row's index into them. ``clean`` runs over the distinct
    values, not over every row; the columns are coded in parallel."""
    filled = df.select(pl.col(c).cast(pl.String).fill_null("") for c in clean)
    raw = filled.select(pl.all().unique().implode()).row(0)
    codes = filled.select(
        pl.col(c).cast(pl.Enum(u)).to_physical() for c, u in zip(clean, raw, strict=True)
    )
    out = []
    for (c, f), u in zip(clean.items(), raw, strict=True):
        uniq, back = np.unique(
            f(pl.Series(u, dtype=pl.String)).to_numpy().astype(str), return_inverse=True
        )
        out.append((uniq, back.astype(np.int32)[codes[c].to_numpy()]))
    return out


def _as_ints(text: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """``text`` as whole numbers, and where it is none (``0`` there)."""
    v = text.cast(pl.Int64, strict=False)
    return v.fill_null(0).to_numpy(), v.is_null().to_numpy()


def _rows(raw: Raw, pop: Population, mine: set[str]) -> _Rows:
    """The coded rows (:class:`_Rows`) of the opened table ``raw``: a long table's, a wide
    one's (:func:`_rows_of_wide`) or an SF1 folder's cells of ``mine``."""
    if raw.shape is Shape.WIDE:
        assert raw.frame is not None
        return _rows_of_wide(raw.frame, raw.where, mine, pop)
    lines: np.ndarray | None = None
    skipped: dict[str, tuple[int, int]] = {}
    if raw.folder is not None:  # an SF1 folder: each cell from the segment and field of the layout
        from .sf1 import read_sf1_records

        got, skipped = read_sf1_records(raw.folder, sorted(mine), pop.schema.release)
        long = as_published(got, pop)  # decimals as text
        df = long.with_columns(pl.col("value").cast(pl.String))
    else:
        assert raw.frame is not None
        df = raw.frame
        if "__line" in df.columns:
            df, lines = df.drop("__line"), df["__line"].cast(pl.Int64).to_numpy()
    (geoids, gi), (cells, ci) = _coded(
        df,
        {
            "geoid": lambda s: s.str.strip_chars(),
            "cell": lambda s: s.str.strip_chars().str.to_uppercase(),
        },
    )
    text = df["value"].cast(pl.String)
    ints, bad = _as_ints(text)
    return _Rows(
        raw.where,
        geoids,
        gi,
        cells,
        ci,
        ints,
        bad,
        (lambda r: int(lines[r])) if lines is not None else (lambda r: r + 2),
        lambda idx: text.gather(idx),
        skipped=skipped if raw.folder is not None else {},
    )


def _foreign_cells(
    cells: np.ndarray, mine: set[str], pop: Population
) -> list[tuple[np.ndarray, str]]:
    """The file's distinct ``cells`` that are not cells of ``pop``'s release, each kind with
    its message: first those of another release (a file of SF1 2010 given as the 2020 DHC, or
    the reverse: named as such, with the option that reads it), then any other."""
    schema = pop.schema
    from .layout import LAYOUTS

    lay = LAYOUTS[schema.release]
    strange = ~np.isin(cells, list(mine | set(lay.frame()["cell"].to_list())))
    out = []
    for other in (o for o in LAYOUTS.values() if o is not lay and strange.any()):
        theirs = np.isin(cells, other.frame()["cell"].to_list()) & strange
        said = f"{{!r}} is a cell of {other.title}, not of {lay.title}: these are {other.title}'s"
        out.append((theirs, f"{said} tables (give --release {other.release})"))
    listing = f"tabrecon tables list --schema {schema.name} --release {schema.release}"
    return [*out, (strange, "{!r} is not a cell of " + lay.title + f" ({listing})")]


def _checked(
    rows: _Rows, pop: Population, mine: set[str], withheld: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` checked (see :func:`read_unit_tables`): the rows kept (those of ``pop``'s
    cells), and what :meth:`TableSet.from_codes` builds the tables from (the geoids, and each
    kept row's geoid, cell id code and value). The first problem is refused, naming its file
    line and column and how many more rows share it."""
    schema = pop.schema
    p = rows.where

    def refuse(
        bad: np.ndarray, column: str, message: str | Callable[[int], str], text: bool = False
    ) -> None:
        """Refuse the first row where ``bad`` holds (``message``: formatted with its value in
        ``column``, or made from its row number), naming its line and column and how many more
        share it."""
        at = np.flatnonzero(bad)
        if at.size:
            r = int(at[0])
            if callable(message):
                said = message(r)
            else:
                value = {"geoid": rows.geoid_of, "cell": rows.cell_of}.get(column)
                said = message.format(value(r) if value else rows.text_at(np.array([r]))[0])
            raise InputError(
                said,
                path=p,
                line=rows.line_at(r),
                column=rows.column_of(r, column),
                more=at.size - 1,
            )

    cells, ci = rows.cells, rows.ci
    refuse(
        (cells == "")[ci],
        "cell",
        "no cell id (a short row? a long table's rows are geoid, cell, value)",
    )
    for strange, message in _foreign_cells(cells, mine, pop):
        refuse(strange[ci], "cell", message)
    is_mine = np.isin(cells, list(mine))
    if not is_mine.any():  # another kind of file: say whose cells it holds
        from ..schema import registry

        whose = registry.population_of_cells(cells[:50].tolist(), but=schema.name)
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
    geoids, gi = rows.geoids, rows.gi
    digits = np.char.str_len(geoids) if geoids.size else np.zeros(0, dtype=np.int64)
    numeric = np.char.isdigit(geoids) if geoids.size else np.zeros(0, dtype=bool)
    is_tract_cell = np.isin(cells, _tract_cells(pop))
    n = schema.geoid_digits
    if schema.geography == Geo.BLOCK:
        refuse(
            (~numeric | ~np.isin(digits, _CENSUS_LENGTHS))[gi],
            "geoid",
            "{!r} is not the geoid of a block (15 digits), block group (12), tract (11), county "
            "(5) or state (2)",
        )
        if is_tract_cell.any():
            refuse(
                is_tract_cell[ci] & (digits > 11)[gi],
                "geoid",
                "{!r} is finer than its cell's table, a tract table (11-digit tract geoids or "
                "coarser)",
            )
    else:
        is_block_cell = np.isin(cells, [c.id for c in _cells_at(pop, "block")])
        refuse(
            (~numeric | ~np.isin(digits, [11, n]))[gi]
            | (is_block_cell[ci] & (digits != n)[gi])
            | (is_tract_cell[ci] & (digits != 11)[gi]),
            "geoid",
            "{!r} is not a " + f"{n}-digit {schema.geography} id",
        )
    value, bad = rows.ints.copy(), rows.bad.copy()
    blank = np.zeros(value.size, dtype=bool)  # read as withheld
    if bad.any():  # spaces around a number, or text: looked at row by row
        at = np.flatnonzero(bad)
        again = rows.text_at(at).fill_null("").str.strip_chars()
        v = again.cast(pl.Int64, strict=False)
        ok = v.is_not_null().to_numpy()
        value[at[ok]], bad[at[ok]] = v.drop_nulls().to_numpy(), False
        if withheld:
            marked = again.str.to_uppercase().is_in(list(MISSING_MARKS)).to_numpy() & ~ok
            blank[at[marked]], bad[at[marked]] = True, False
    dec = statistic_decimals(pop)
    is_stat_cell = np.isin(cells, list(dec))
    is_stat = is_stat_cell[ci]
    if is_stat_cell.any():  # medians and means: decimals, in published units (30.5 -> 305)
        may_lack = {
            c.id
            for t in tables_of(pop)
            for c in t.cells()
            if c.statistic and c.statistic.empty is None
        }
        at = np.flatnonzero(is_stat)
        text = rows.text_at(at).fill_null("")
        of_row = [dec.get(c, 0) for c in cells[ci[at]].tolist()]
        parsed = np.full(at.size, WITHHELD, dtype=np.int64)
        unread = np.ones(at.size, dtype=bool)
        for d in sorted(set(of_row)):
            here = np.asarray(of_row) == d
            v = parse_values(text.filter(pl.Series(here)), d)
            parsed[here] = v.fill_null(WITHHELD).to_numpy()
            unread[here] = v.is_null().to_numpy()
        empty = (text.str.strip_chars() == "").to_numpy() & np.isin(cells[ci[at]], list(may_lack))
        wrong = np.zeros(value.size, dtype=bool)
        wrong[at] = unread & ~empty
        refuse(
            wrong,
            "value",
            "{!r} is not a median or a mean with its cell's decimals (tabrecon tables list)",
        )
        value[at], bad[at], blank[at] = parsed, False, parsed == WITHHELD
    if withheld:
        refuse(
            ~is_stat & (bad | (value < 0)),
            "value",
            "{!r} is not a count (a whole number >= 0) nor a mark of a withheld cell (empty, "
            + ", ".join(m for m in MISSING_MARKS if m)
            + ")",
        )
    else:
        refuse(
            ~is_stat & (bad | (value < 0)),
            "value",
            lambda r: _not_a_count(str(rows.text_at(np.array([r])).fill_null("")[0]), rows.wide),
        )
    kept = np.arange(ci.size) if is_mine.all() else np.flatnonzero(is_mine[ci])
    if not kept.size:
        raise InputError(f"holds no cells of the {schema.name} tables ({min(mine)} ...)", path=p)
    from .tableset import WITHHELD_CELL, cell_ids

    ids = cell_ids(pop)
    code_of = np.full(cells.size, -1, dtype=np.int64)
    where = {c: i for i, c in reversed(list(enumerate(ids)))}  # (ids.index: the first)
    code_of[is_mine] = [where[c] for c in cells[is_mine].tolist()]
    if blank.any():
        value[blank] = WITHHELD_CELL
    if kept.size == ci.size:  # every row kept: nothing gathered
        return kept, geoids, gi, code_of[ci], value
    return kept, geoids, gi[kept], code_of[ci[kept]], value[kept]


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


def _tract_cells(pop: Population) -> list[str]:

    return [c.id for t in tables_of(pop) if t.level == Geo.TRACT for c in t.cells()]


def _refuse_unknown_variables(
    columns: list[str], cells: dict[str, str], where: str, pop: Population
) -> None:
    """Refuse a column named like a variable of the schema's release (SF1: ``P099001``,
    ``H0990001``; the DHC: ``P12A_050N`` too) that is none of its variables: a typo, a table of
    another length than the layout's, or another product's variable would otherwise be passed
    over without a word. Variables of the release's other tables are left out."""
    schema = pop.schema
    known = _known_variables(schema.release)
    # a variable's names: SF1's two spellings; the DHC's summary-file names (two-letter
    # iterations have two-digit lines: P012AH01) and its API names (P12AH_001N)
    shapes = [r"(PCT|HCT|P|H)\d{3}[A-Z]?\d{3,4}"]
    if schema.release is not Release.SF1_2010:
        shapes += [
            r"(PCT|HCT|PCO|P|H)\d{3}[A-Z]{2}\d{2,3}",
            r"(PCT|HCT|PCO|P|H)\d+[A-Z]{0,2}_\d{3}N",
        ]
    for c in columns:
        name = c.strip().upper()
        if c in cells or not any(re.fullmatch(x, name) for x in shapes):
            continue
        if name not in known:
            raise InputError(
                f"unknown variable {c!r}: no variable of {_title(pop)} is named so (tabrecon "
                f"tables list --schema {schema.name} --release {schema.release})",
                path=where,
            )


#: The geoid's digits of each census summary level the readers read (a GEO_ID's first three
#: characters: ``1000000US`` + 15 digits is a block); rows of other summary levels (010, the
#: nation; 160, places; ...) are skipped and counted, never read as a level they are not.
_SUMLEV_DIGITS = {"040": 2, "050": 5, "140": 11, "150": 12, "100": 15, "101": 15}


def _skipped_rows(
    df: pl.DataFrame, geo: pl.Series, ours: np.ndarray, first: int, where: str, n_vars: int
) -> dict[str, tuple[int, int]]:
    """The rows of a wide file that are none of its levels' geographies, counted by summary
    level (rows, values) where skipping is right: a GEO_ID of a summary level the readers do
    not read (the nation, a place). Any other such row is refused, naming its line and value:
    a GEO_ID whose digits do not fit its own summary level (``1000000US0107``: a block's, cut
    short), or a GEOID or STATE/COUNTY/TRACT/BLOCK geography of no census length."""
    out = np.flatnonzero(~ours)
    if not out.size:
        return {}
    cols = {c.strip().upper(): c for c in df.columns}
    gcol = cols.get("GEO_ID")
    sumlev = (
        df[gcol].cast(pl.String).fill_null("").str.strip_chars().str.slice(0, 3).to_numpy()
        if gcol is not None
        else None
    )
    refused = out
    if gcol is not None and sumlev is not None:  # a GEO_ID without "US" is no summary-level id
        raw = df[gcol].cast(pl.String).fill_null("").to_numpy()[out].astype(str)
        refused = out[np.isin(sumlev[out], list(_SUMLEV_DIGITS)) | (np.char.find(raw, "US") < 0)]
    if refused.size:
        r = int(refused[0])
        column = gcol or next(
            (cols[c] for c in ("GEOID", "GEOID10", "GEOID20", "GEOCODE", "BLOCK") if c in cols),
            df.columns[0],
        )
        value = geo[r] if gcol is None else df[gcol].cast(pl.String)[r]
        what = (
            f"a summary level {sumlev[r]} id needs {_SUMLEV_DIGITS[sumlev[r]]} digits after 'US'"
            if sumlev is not None and sumlev[r] in _SUMLEV_DIGITS
            else "not the geoid of a block (15 digits), block group (12), tract (11), county (5) "
            "or state (2)"
        )
        more = f" ({refused.size - 1:,} more such rows)" if refused.size > 1 else ""
        raise InputError(f"{value!r}: {what}{more}", path=where, line=first + r, column=column)
    assert sumlev is not None  # every row off the levels without a GEO_ID was refused
    levels, counts = np.unique(sumlev[out], return_counts=True)
    return {
        f"summary level {lv}": (int(k), int(k) * n_vars)
        for lv, k in zip(levels.tolist(), counts.tolist(), strict=True)
    }


#: A variable's name in the 2020 products (the DHC, P.L. 94-171, on the API and
#: data.census.gov): table, iteration letters, line (``P12_003N``, ``P12AH_001N``, ``H4A_002N``)
_NAME_2020 = re.compile(r"^((?:PCT|HCT|P|H)\d{1,3}[A-Z]{0,2})_\d{3}N$")


def _refuse_other_decade(
    columns: list[str], old: set[str], cells: dict[str, str], where: str
) -> None:
    """Refuse a wide file that mixes 2010 names (``old``: columns read by their SF1 spelling,
    ``P0120001``, ``P012001``) and 2020 names (``P12_001N``): one file is one census's release.
    And a 2020 name of a table read (another of its variables is among ``cells``, the columns
    read) that is no cell of it (``P12_999N``): passed over, its value would go unread without
    a word."""
    new = [c for c in columns if _NAME_2020.match(c.strip().upper())]
    if new and old:
        raise InputError(
            f"mixes 2010 variable names ({', '.join(sorted(old)[:2])}, ...) and 2020 names "
            f"({', '.join(new[:2])}, ...): a file holds one census's tables; give each "
            "census's tables in a file of its own",
            path=where,
        )
    read = {m.group(1) for c in cells if (m := _NAME_2020.match(c.strip().upper()))}
    for c in new:
        m = _NAME_2020.match(c.strip().upper())
        if c not in cells and m is not None and m.group(1) in read:
            raise InputError(
                f"unknown variable {c!r}: table {m.group(1)} has no such line among those "
                "tabrecon reads (tabrecon tables list shows each table's cells)",
                path=where,
            )


@cache
def _known_variables(release: Release = Release.SF1_2010) -> frozenset[str]:
    """Every field's name of SF1 2010 (or ``release``'s product) in the summary-file and the
    API spelling (2010's ``P012003``; the DHC's ``P12_003N``)."""
    from .layout import LAYOUTS

    lay = LAYOUTS[release].frame()
    return frozenset(lay["cell"].to_list()) | frozenset(lay["api_name"].to_list())


def _title(pop: Population) -> str:

    schema = pop.schema
    from .layout import LAYOUTS

    return LAYOUTS[schema.release].title


def _cells_at(pop: Population, level: str) -> list[UnitCell]:

    return [c for t in tables_of(pop) if t.level == level for c in t.cells()]


def _spellings(mine: set[str], release: Release = Release.SF1_2010) -> dict[str, str]:
    """Every spelling of the cells ``mine`` a wide file may use, to the cell id: the summary
    file's (``P0120003``, ``P012A003``, ``H016A0003``) and the API's, from the Bureau's layout
    of ``release``: 2010's (``P012003``; by its rule, a three-digit line, where the layout lacks
    the cell) or the DHC's (``P12_003N``, ``H4A_001N``)."""
    from .layout import LAYOUTS

    lay = LAYOUTS[release].frame().filter(pl.col("cell").is_in(list(mine)))
    out = {c: c for c in mine}
    out |= dict(zip(lay["api_name"].to_list(), lay["cell"].to_list(), strict=True))
    if release is not Release.SF1_2010:
        return out
    for c in mine:
        m = re.match(r"^(PCT|HCT|P|H)(\d{3}[A-Z]?)(\d{4})$", c)
        if m and int(m.group(3)) < 1000:
            out.setdefault(f"{m.group(1)}{m.group(2)}{m.group(3)[1:]}", c)
    return out


def _rows_of_wide(df: pl.DataFrame, where: str, mine: set[str], pop: Population) -> _Rows:
    """The rows (:class:`_Rows`) of a wide table (one row per geography: the Census API's JSON,
    a data.census.gov or summary-file style CSV) for its geographies of ``pop``'s levels,
    read column by column. Variables are read in the summary-file style (``H0130002``) or the
    2010 API style (``H013002``); those that are cells of ``mine`` (``pop``'s) are kept."""
    schema = pop.schema
    from .forms import geography_of

    spelled = _spellings(mine, schema.release)
    cells = {c: spelled[c.strip().upper()] for c in df.columns if c.strip().upper() in spelled}
    if schema.release is Release.SF1_2010:  # the DHC's own names are its layout's
        old = set(cells)  # read by an SF1 spelling
        spell = pop.spell  # a population's other names (persons: 2020's)
        if spell is not None:
            cells |= {c: v for c, v in spell(df.columns).items() if v in mine and c not in cells}
        _refuse_other_decade(df.columns, old, cells, where)
    seen: dict[str, str] = {}
    for column, cell in cells.items():  # two spellings of one cell (H001001 and H0010001)
        if cell in seen:
            raise InputError(
                f"cell {cell} appears twice, as {seen[cell]!r} and {column!r}", path=where
            )
        seen[cell] = column
    _refuse_unknown_variables(df.columns, cells, where, pop)
    dhc = [c for c in df.columns if re.fullmatch(r"(PCT|HCT|P|H)\d+[A-Z]?_\d{3}N", c.strip())]
    if not cells and dhc:  # 2020 names: never guessed from 2010 labels
        raise InputError(
            f"holds 2020 census variables ({', '.join(dhc[:3])}, ...), not {_title(pop)}'s "
            f"(such as {min(mine)}): read the 2020 DHC's tables with --release dhc-2020",
            path=where,
        )
    if not cells:
        example = min(mine)
        records = "block_geoid" in (c.strip().lower() for c in df.columns)
        raise InputError(
            f"neither a long table (columns geoid, cell, value) nor a wide one with {schema.name} "
            f"variables such as {example} (found: {', '.join(df.columns[:8])})"
            + (
                "; it looks like records, one row a person or unit: tabulate them first "
                "(tabrecon tabulate FILE), or give them to tabrecon audit as its MICRODATA"
                if records
                else ""
            ),
            path=where,
        )
    geo = geography_of(df, where)
    first = 2
    gid = next((c for c in df.columns if c.strip().upper() == "GEO_ID"), None)
    head = (str(df[gid][0] or "") if gid is not None else geo[0] or "") if geo.len() else ""
    if geo.len() and not re.search(r"\d", head):  # data.census.gov: a row of labels
        df, geo, first = df.slice(1), geo.slice(1), 3
    geo = geo.fill_null("").str.strip_chars()
    twice = np.flatnonzero((geo.is_duplicated() & (geo != "")).to_numpy())
    if twice.size:  # one geography on two rows: which to believe is not ours to guess
        same = np.flatnonzero((geo == geo[int(twice[0])]).to_numpy())
        upper = {c.strip().upper() for c in df.columns}
        named = not upper.isdisjoint({"GEO_ID", "GEOID", "GEOID10", "GEOID20", "GEOCODE"})
        lacks_block = not named and "BLOCK" not in upper
        raise InputError(
            (
                f"no BLOCK column: the rows on lines {first + same[0]} and {first + same[1]} are "
                f"both of tract {geo[int(twice[0])]!r} (STATE, COUNTY, TRACT); a file of blocks "
                "needs a BLOCK column beside them (the Census API's 'block')"
            )
            if lacks_block
            else f"geoid {geo[int(twice[0])]!r} appears on two rows (lines {first + same[0]} and "
            f"{first + same[1]})",
            path=where,
            line=int(first + same[1]),
        )
    n = schema.geoid_digits
    own = {n} | ({11} if any(c in mine for c in _tract_cells(pop)) else set())
    length = geo.str.len_chars()
    if not length.is_in(list(own)).any():  # (persons: tract-only files)
        raise InputError(f"holds no {schema.geography} rows ({n}-digit geographies)", path=where)
    ours = length.is_in(_CENSUS_LENGTHS if schema.geography == Geo.BLOCK else [n]).to_numpy()
    skipped = _skipped_rows(df, geo, ours, first, where, len(cells))
    at = np.flatnonzero(ours)  # each kept geography's row in the frame read
    cols = list(cells)
    frame = df.select(cols).filter(pl.Series(ours)).cast(pl.String)
    geo, length_of = geo.filter(pl.Series(ours)), length.filter(pl.Series(ours)).to_numpy()
    geoids, back = np.unique(geo.to_numpy().astype(str), return_inverse=True)
    uniq, col_code = np.unique(np.array([cells[c] for c in cols], dtype=str), return_inverse=True)
    # one block of rows per level (blocks, then tracts, ...), variable by variable within it;
    # a variable empty for every geography of a level is not published for that level (a
    # block-only variable on a tract's row) and is left out of its block; one empty for some
    # of them is refused as a value
    blocks: list[tuple[int, np.ndarray, list[int], pl.DataFrame]] = []  # start, rows, vars, part
    parts: list[tuple[np.ndarray, ...]] = []
    start = 0
    for k in sorted(set(length_of.tolist()), reverse=True):
        rows = np.flatnonzero(length_of == k)
        part = frame[rows] if rows.size < frame.height else frame
        num = part.select(pl.all().cast(pl.Int64, strict=False))
        unread = num.select(pl.all().is_null().all()).row(0)
        null = part.select(pl.all().is_null().all()).row(0)
        given = [
            j
            for j, none in enumerate(unread)
            if not none
            or not (null[j] or part[cols[j]].fill_null("").str.strip_chars().eq("").all())
        ]
        if not given:
            continue
        if len(given) < len(cols):  # (the names once: a level of a wide file has thousands)
            names = num.columns
            num = num.select([names[j] for j in given])
        parts.append(
            (
                np.tile(back[rows].astype(np.int32), len(given)),
                np.repeat(col_code[given].astype(np.int32), rows.size),
                num.fill_null(0).to_numpy(order="fortran").ravel(order="F"),
                num.select(pl.all().is_null()).to_numpy().ravel(order="F"),
            )
        )
        blocks.append((start, rows, given, part))
        start += rows.size * len(given)
    if not parts:  # every value empty: no cell of ``mine`` is given (refused by the checks)
        parts.append(
            (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, bool))
        )
    gi, ci, ints, bad = (np.concatenate(x) for x in zip(*parts, strict=True))
    starts = np.array([b[0] for b in blocks])

    def where_at(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row ``r``'s block, the variable (its index in ``cols``) and its row in the block."""
        b = np.searchsorted(starts, r, side="right") - 1
        var, row = np.divmod(r - starts[b], np.array([blocks[i][1].size for i in b]))
        return b, np.array([blocks[i][2][v] for i, v in zip(b, var, strict=True)]), row

    def text_at(idx: np.ndarray) -> pl.Series:
        b, var, row = where_at(np.asarray(idx, dtype=np.int64))
        key = b * len(cols) + var  # ascending with idx: one gather per variable of a block
        out = [
            blocks[int(b[i])][3][cols[int(var[i])]].gather(row[key == key[i]])
            for i in np.flatnonzero(np.r_[True, key[1:] != key[:-1]]).tolist()
        ]
        return pl.concat(out) if out else pl.Series([], dtype=pl.String)

    def line_at(r: int) -> int:
        b, _, row = where_at(np.array([r]))
        return int(first + at[blocks[int(b[0])][1][int(row[0])]])

    return _Rows(
        where,
        geoids,
        gi,
        uniq,
        ci,
        ints,
        bad,
        line_at,
        text_at,
        columns={cells[c]: c for c in cols},
        wide=True,
        skipped=skipped,
    )
