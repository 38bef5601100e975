"""The forms a published table comes in, whatever its population, and the registry that tells
them apart.

A :class:`Form` recognises a path and opens it as a :class:`Raw` table: a long frame (``geoid,
cell, value``), a wide one (one row per geography: the Census API's JSON, a data.census.gov or
summary-file style CSV) or a summary-file folder. The reader of every population's tables
(:func:`tabrecon.tables.reader.read_unit_tables`) opens its input through :func:`opened` and
checks what it yields with the population's schema, so a form registered here
(:func:`register_form`) is read for every population. The forms, tried in order:

* ``folder``: a state's SF1 or P.L. 94-171 distribution (:mod:`tabrecon.tables.sf1`);
* ``zip``: a ZIP file as downloaded, holding a distribution (only the segment files the reader's
  cells need are extracted) or one table file (data.census.gov's ``...-Data.csv`` beside its
  metadata), read as that form; errors name the file inside the ZIP;
* ``json``: the Census API's response (an array of arrays, header first);
* ``table``: any other file, CSV, gzip CSV or Parquet, long when it has the columns geoid, cell
  and value, wide otherwise.

>>> [f.name for f in forms()]
['folder', 'zip', 'json', 'table']
>>> frame_of_rows([["GEO_ID", "P001001"], ["1000000US280010001001000", "7"]]).shape
(1, 2)
"""

from __future__ import annotations

import contextlib
import enum
import json
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import read_text_frame
from ..vocab import Geo


class Shape(enum.StrEnum):
    """What an opened table holds: rows ``geoid, cell, value`` (``long``), one row per geography
    and one column per variable (``wide``), or a summary-file distribution (``folder``)."""

    LONG = "long"
    WIDE = "wide"
    FOLDER = "folder"


@dataclass(frozen=True)
class Raw:
    """A published table as opened, before any schema's checks: ``frame`` (text columns; a
    ``__line`` column, where present, holds each row's line in the file) for a long or wide
    table, ``folder`` for a distribution. ``where`` is what errors name (the file, or the file
    inside a ZIP)."""

    shape: Shape
    where: str
    frame: pl.DataFrame | None = None
    folder: Path | None = None


@dataclass(frozen=True)
class Form:
    """One form of published table: its name, what it is (for messages and the docs), whether a
    path is in it (``matches``), and how to open such a path for a reader that wants ``cells``
    (``open``: a context manager, so a form may hold temporary files while the reader checks
    what it yields)."""

    name: str
    description: str
    matches: Callable[[Path], bool]
    open: Callable[[Path, Collection[str]], AbstractContextManager[Raw]]


_FORMS: list[Form] = []


def register_form(form: Form) -> Form:
    """Add ``form``, tried after the forms registered before it and before the ``table`` form,
    which takes any file and so stays last. A name already taken is refused."""
    if any(f.name == form.name for f in _FORMS):
        raise ValueError(f"a form named {form.name!r} is registered already")
    last = _FORMS[-1:] if _FORMS and _FORMS[-1].name == "table" else []
    _FORMS[len(_FORMS) - len(last) :] = [form, *last]
    return form


def forms() -> list[Form]:
    """The registered forms, in the order they are tried."""
    return list(_FORMS)


def opened(path: str | Path, cells: Collection[str]) -> AbstractContextManager[Raw]:
    """``path`` opened by the first registered form it matches, for a reader of ``cells``.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(p, "w").write("geoid,cell,value\\n280010001001000,P0010001,3\\n")
    >>> with opened(p, ["P0010001"]) as raw:
    ...     raw.shape, raw.frame.height
    (<Shape.LONG: 'long'>, 1)
    """
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", path=str(p))
    for form in _FORMS:
        if form.matches(p):
            return form.open(p, cells)
    raise InputError(
        "not a published table in any form tabrecon reads ("
        + "; ".join(f"{f.name}: {f.description}" for f in _FORMS)
        + ")",
        path=str(p),
    )


@contextlib.contextmanager
def _open_folder(p: Path, cells: Collection[str]) -> Iterator[Raw]:
    yield Raw(Shape.FOLDER, str(p), folder=p)


@contextlib.contextmanager
def _open_json(p: Path, cells: Collection[str]) -> Iterator[Raw]:
    yield Raw(Shape.WIDE, str(p), frame=read_api_json(p))


@contextlib.contextmanager
def _open_table(p: Path, cells: Collection[str]) -> Iterator[Raw]:
    if p.name.lower().endswith((".xlsx", ".xls", ".xlsm")):  # data.census.gov offers these too
        raise InputError(
            "is an Excel workbook; save its sheet as CSV (or download the table as CSV)",
            path=str(p),
        )
    df = read_text_frame(p)
    long = {"geoid", "cell", "value"} <= set(df.columns)
    yield Raw(Shape.LONG if long else Shape.WIDE, str(p), frame=df)


#: Names of files in a ZIP that are not tables (data.census.gov puts them beside the data).
_NOT_TABLES = ("metadata", "table-notes", "table_title", "readme")
_TABLE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".json")


@contextlib.contextmanager
def _open_zip(p: Path, cells: Collection[str]) -> Iterator[Raw]:
    """A ZIP as downloaded: a summary-file distribution (its geographic header and the segment
    files holding ``cells``, extracted) or one table file, each extracted to a temporary folder
    that is removed when the reader is done. Errors raised while the reader checks the table
    name the ZIP and the file inside it (``county.zip/DECENNIALSF12010.P12-Data.csv``), never
    the temporary copy."""
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"is not a readable ZIP file ({exc})", path=str(p)) from None
    with contextlib.ExitStack() as stack:
        stack.enter_context(zf)
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="tabrecon-zip-"))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        try:
            yield stack.enter_context(_open_members(zf, p, Path(tmp), cells))
        except InputError as exc:
            out = InputError(str(exc).replace(tmp, str(p)))
            out.path = None if exc.path is None else exc.path.replace(tmp, str(p))
            out.line, out.column = exc.line, exc.column
            raise out from None
        finally:  # a reader's warnings (a segment file missing) name the ZIP too
            stack.close()
            for w in caught:
                warnings.warn(str(w.message).replace(tmp, str(p)), w.category, stacklevel=3)


@contextlib.contextmanager
def _open_members(zf: zipfile.ZipFile, p: Path, tmp: Path, cells: Collection[str]) -> Iterator[Raw]:
    """The table inside the ZIP ``zf`` (at ``p``), its files extracted to ``tmp``."""
    from .sf1 import distribution_files

    names = [
        n
        for n in zf.namelist()
        if not n.endswith("/") and not Path(n).name.startswith(".") and "__MACOSX" not in n
    ]
    by_base = {Path(n).name: n for n in names}
    wanted = distribution_files(list(by_base), cells)
    if wanted is not None:  # a distribution: its header and the segments the cells need
        for base in wanted:
            _extract(zf, by_base[base], tmp / base, p)
        yield Raw(Shape.FOLDER, str(p), folder=tmp)
        return

    def is_table(name: str) -> bool:  # by its name: a form registered by a user counts too
        base = Path(name).name
        if any(w in base.lower() for w in _NOT_TABLES):
            return False
        others = (f for f in _FORMS if f.name not in ("folder", "zip", "table"))
        return base.lower().endswith(_TABLE_SUFFIXES) or any(f.matches(tmp / base) for f in others)

    tables = [n for n in names if is_table(n)]
    if len(tables) != 1:
        listed = ", ".join(tables[:4]) + (", ..." if len(tables) > 4 else "")
        raise InputError(
            f"holds {len(tables)} table files ({listed}); unzip it and read each"
            if tables
            else "holds no table file (CSV, CSV.gz, Parquet, JSON) and no summary-file "
            "distribution (xxgeo2010.sf1, xxgeo2010.pl, xxgeo2020.pl, xxgeo2020.dhc)",
            path=str(p),
        )
    inner = tmp / Path(tables[0]).name
    _extract(zf, tables[0], inner, p)
    form = next(f for f in _FORMS if f.name != "zip" and f.matches(inner))
    with form.open(inner, cells) as raw:
        yield replace(raw, where=str(p / inner.name))


def _extract(zf: zipfile.ZipFile, member: str, to: Path, zip_path: Path) -> None:
    """Copy ``member`` out of ``zf`` to ``to`` (by its base name: a member's folders are never
    trusted as a path)."""
    try:
        with zf.open(member) as src, open(to, "wb") as dst:
            shutil.copyfileobj(src, dst)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputError(f"cannot extract {member} ({exc})", path=str(zip_path)) from None


def read_api_json(p: Path) -> pl.DataFrame:
    """The Census API's response: ``[[header...], [row...], ...]``, every value text."""
    text = p.read_text(errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        first = text.strip().splitlines()[0][:120] if text.strip() else "(empty)"
        raise InputError(
            f"not a Census API JSON response ({exc.msg} at line {exc.lineno}); it begins: "
            f"{first!r}",
            path=str(p),
        ) from None
    if isinstance(data, dict) and "error" in data:
        raise InputError(f"the Census API answered with an error: {data['error']}", path=str(p))
    if not (isinstance(data, list) and data and all(isinstance(r, list) for r in data)):
        raise InputError(
            "not a Census API response (an array of arrays, header first)", path=str(p)
        )
    for i, row in enumerate(data[1:], start=2):
        if len(row) != len(data[0]):
            raise InputError(
                f"row has {len(row)} values, the header {len(data[0])}", path=str(p), line=i
            )
    return frame_of_rows(data)


def frame_of_rows(rows: list[list]) -> pl.DataFrame:
    """A text frame from an API table: an array of arrays, header first (None stays null)."""
    header = [str(h) for h in rows[0]]
    cols = {
        h: [None if r[j] is None else str(r[j]) for r in rows[1:]] for j, h in enumerate(header)
    }
    return pl.DataFrame(cols, schema={h: pl.String for h in header})


def geography_of(df: pl.DataFrame, where: str) -> pl.Series:
    """Each row's geoid (digits) from whichever geography columns the table has."""
    upper = {c.upper(): c for c in df.columns}

    def col(name: str) -> pl.Expr:
        return pl.col(upper[name]).cast(pl.String).str.strip_chars()

    if "GEO_ID" in upper:  # data.census.gov / API: 1000000US280010001001000
        return df.select(col("GEO_ID").str.replace(r"^.*US", "").alias("geoid"))["geoid"]
    for name in ("GEOID", "GEOID10", "GEOID20", "GEOCODE"):
        if name in upper:
            return df.select(col(name).alias("geoid"))["geoid"]
    if {"STATE", "COUNTY", "TRACT"} <= set(upper):
        parts = [
            col("STATE").str.zfill(Geo.STATE.length),
            col("COUNTY").str.zfill(Geo.COUNTY.length - Geo.STATE.length),
            col("TRACT").str.zfill(Geo.TRACT.length - Geo.COUNTY.length),
        ]
        tract = pl.concat_str(parts)
        if "BLOCK" not in upper:
            return df.select(tract.alias("geoid"))["geoid"]
        block = col("BLOCK")
        is_block = block.is_not_null() & (block != "")
        if "SUMLEV" in upper:
            is_block = is_block & (col("SUMLEV").str.zfill(3) != "140")
        geo = pl.when(is_block).then(pl.concat_str([tract, block.str.zfill(4)])).otherwise(tract)
        return df.select(geo.alias("geoid"))["geoid"]
    raise InputError(
        "no geography columns: a wide table needs GEO_ID, GEOID (or GEOID10) or STATE, COUNTY, "
        f"TRACT[, BLOCK]; it has {', '.join(df.columns[:8])}{' ...' if df.width > 8 else ''}",
        path=where,
    )


register_form(Form("folder", "a state's SF1 or P.L. 94-171 folder", Path.is_dir, _open_folder))
register_form(
    Form(
        "zip",
        "a ZIP holding such a folder's files or one table file",
        lambda p: p.name.lower().endswith(".zip"),
        _open_zip,
    )
)
register_form(
    Form(
        "json",
        "the Census API's JSON response",
        lambda p: p.name.lower().endswith(".json"),
        _open_json,
    )
)
register_form(
    Form(
        "table",
        "a CSV, gzip CSV or Parquet file, long (geoid, cell, value) or wide",
        Path.is_file,
        _open_table,
    )
)
