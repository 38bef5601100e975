"""The forms a published table comes in, whatever its population: the Census API's JSON (an
array of arrays, header first) and the geography columns of a wide file (``GEO_ID``, ``GEOID``,
or ``STATE``, ``COUNTY``, ``TRACT``, ``BLOCK``). The person reader
(:mod:`tabrecon.tables.published`) and the reader over any schema
(:func:`tabrecon.tables.reader.read_unit_tables`) share them.

>>> frame_of_rows([["GEO_ID", "P001001"], ["1000000US280010001001000", "7"]]).shape
(1, 2)
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..geo import LENGTH


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
            col("STATE").str.zfill(LENGTH["state"]),
            col("COUNTY").str.zfill(LENGTH["county"] - LENGTH["state"]),
            col("TRACT").str.zfill(LENGTH["tract"] - LENGTH["county"]),
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
