"""Reading and writing files: every format tabrecon takes (CSV, gzip CSV, Parquet) read as text
columns for validation, output names checked against what they will hold, and atomic writes (a
file appears whole or not at all, so an interrupted run never leaves half a result)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .errors import InputError, TabreconError

#: What a data file may be named: its format follows from its suffix.
DATA_SUFFIXES = (".parquet", ".csv", ".csv.gz")


def check_suffix(path: str | Path, allowed: tuple[str, ...] = DATA_SUFFIXES) -> Path:
    """``path`` when its name ends in an allowed suffix; otherwise an error naming it (an output
    is never written in a format its name does not say).

    >>> check_suffix("out.xlsx", (".csv",))
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: out.xlsx: unknown output format '.xlsx'; name it .csv
    """
    if not str(path).lower().endswith(allowed):
        raise TabreconError(
            f"{path}: unknown output format {Path(path).suffix or '(no suffix)'!r}; "
            f"name it {', '.join(allowed)}"
        )
    return Path(path)


def scan_text(path: str | Path) -> pl.LazyFrame:
    """A lazy frame of the file's columns as text (Parquet columns cast to text)."""
    p = str(path)
    if p.endswith(".parquet"):
        return pl.scan_parquet(p).with_columns(pl.all().cast(pl.String))
    return pl.scan_csv(p, infer_schema=False)


def read_text_frame(
    path: str | Path, counties: Collection[str] | None = None, geo_column: str = "block_geoid"
) -> pl.DataFrame:
    """A data file as text columns; with ``counties`` (5-digit state+county codes) only the rows
    whose ``geo_column`` lies in them (streamed, so memory follows the selection, not the file),
    with a ``__line`` column keeping each row's line in the file. Errors name the file."""
    p = str(path)
    if not Path(p).exists():
        raise InputError("file not found", path=p)
    try:
        if counties is not None:
            lf = scan_text(p).with_row_index("__line", offset=2)
            lf = lf.filter(
                pl.col(geo_column).str.strip_chars().str.slice(0, 5).is_in(list(counties))
            )
            return lf.collect(engine="streaming")
        if p.endswith(".parquet"):
            df = pl.read_parquet(p)
            return df.with_columns([pl.col(c).cast(pl.String) for c in df.columns])
        return pl.read_csv(p, infer_schema=False)
    except InputError:
        raise
    except Exception as exc:  # polars raises several exception types for malformed files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"cannot be read as {'Parquet' if p.endswith('.parquet') else 'CSV'}: {first}", path=p
        ) from None


def read_rows(
    path: str | Path, counties: Collection[str] | None = None
) -> tuple[pl.DataFrame, np.ndarray | None]:
    """:func:`read_text_frame` without its ``__line`` column, and that column's file lines
    (None when every row was read: row i is then line i + 2), for errors naming the line."""
    df = read_text_frame(path, counties)
    if "__line" not in df.columns:
        return df, None
    return df.drop("__line"), df["__line"].to_numpy()


def _atomic(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Write through a hidden temporary beside ``path`` and rename it into place; a failure names
    ``path`` (never the temporary) and leaves nothing behind."""
    p = Path(path)
    tmp = p.with_name("." + p.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        reason = (exc.strerror or str(exc)).replace(str(tmp), str(p))
        raise TabreconError(f"{p}: cannot be written ({reason})") from None
    return p


def write_frame(df: pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` in the format its name says (Parquet, CSV or gzip CSV), atomically."""
    p = check_suffix(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    name = p.name.lower()

    def write(tmp: Path) -> None:
        if name.endswith(".parquet"):
            df.write_parquet(tmp)
        elif name.endswith(".gz"):
            with gzip.open(tmp, "wb", compresslevel=6) as fh:
                df.write_csv(fh)  # type: ignore[call-overload]
        else:
            df.write_csv(tmp)

    return _atomic(p, write)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return _atomic(path, lambda tmp: tmp.write_text(text))


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON, atomically (values JSON cannot hold are written as text)."""
    return write_text(path, json.dumps(obj, indent=1, default=str))


def write_parquet(df: pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as Parquet, atomically."""
    return _atomic(path, df.write_parquet)


__all__ = [
    "DATA_SUFFIXES",
    "check_suffix",
    "read_text_frame",
    "scan_text",
    "write_frame",
    "write_json",
    "write_parquet",
    "write_text",
]
