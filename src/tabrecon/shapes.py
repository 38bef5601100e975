"""Block shapes: a county's Census TIGER/Line blocks (or any file of polygons keyed by block
geoid), read for the report's maps.

The Bureau distributes them as a zipped shapefile per county (2010: ``tl_2010_SSCCC_tabblock10``,
key ``GEOID10``; 2020: ``tl_2020_SSCCC_tabblock20``, key ``GEOID20``); a shapefile, its zip, a
GeoPackage, GeoJSON or GeoParquet are all read (GDAL through pyogrio; GeoParquet's WKB column
through pyarrow). The key is the first column named ``GEOID10``, ``GEOID20``, ``GEOID`` or
``block_geoid``; each value must be a 15-digit block geoid, once. Reading needs the ``maps``
extra (``pip install -e ".[maps]"``: pyogrio and shapely); without it :func:`read_shapes` says
so and what to install, and nothing else of tabrecon needs it.

>>> from pathlib import Path
>>> import json, tempfile
>>> square = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}
>>> feature = {"type": "Feature", "properties": {"GEOID10": "390599771001000"},
...            "geometry": square}
>>> p = Path(tempfile.mkdtemp()) / "blocks.geojson"
>>> _ = p.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
>>> s = read_shapes(p)
>>> s.geoid.tolist(), s.key
(['390599771001000'], 'GEOID10')
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError, TabreconError
from .geo import level_of, prefix

#: the column names a block geoid is read from, first found wins
GEOID_COLUMNS = ("GEOID10", "GEOID20", "GEOID", "block_geoid")

#: how to get what reading shapes needs
MAPS_EXTRA = 'pip install -e ".[maps]"'

#: where the Bureau publishes a county's block shapes, by census year
TIGER_URLS = {
    2010: "https://www2.census.gov/geo/tiger/TIGER2010/TABBLOCK/2010/tl_2010_{fips}_tabblock10.zip",
    2020: "https://www2.census.gov/geo/tiger/TIGER2020PL/LAYER/TABBLOCK/2020/"
    "tl_2020_{fips}_tabblock20.zip",
}


def maps_available() -> bool:
    """Whether the ``maps`` extra (pyogrio and shapely) is installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("pyogrio", "shapely"))


def require_maps(what: str = "--shapes") -> None:
    """Raise a :class:`TabreconError` saying what to install when the ``maps`` extra is not."""
    if not maps_available():
        raise TabreconError(
            f"{what} draws maps with pyogrio and shapely, which are not installed: {MAPS_EXTRA}"
        )


@dataclass(frozen=True)
class BlockShapes:
    """Block polygons keyed by 15-digit geoid, as read from ``source`` (column ``key``)."""

    geoid: np.ndarray  # str, one per block, distinct
    geometry: np.ndarray  # shapely (Multi)Polygons, same order
    source: str
    key: str

    def __len__(self) -> int:
        return len(self.geoid)

    def counties(self) -> list[str]:
        """The 5-digit state+county codes the blocks lie in."""
        return sorted(set(prefix(self.geoid, "county").tolist()))


def _read_geoparquet(p: Path) -> tuple[list[str], dict[str, np.ndarray], Any]:
    import json

    import pyarrow.parquet as pq

    table = pq.read_table(p)
    meta = json.loads((table.schema.metadata or {}).get(b"geo", b"{}"))
    col = meta.get("primary_column", "geometry")
    if col not in table.column_names:
        raise InputError(f"no geometry column {col!r} (a GeoParquet file keeps one)", path=str(p))
    fields = {
        c: np.asarray(table.column(c).to_pylist(), dtype=object)
        for c in table.column_names
        if c != col
    }
    return list(fields), fields, np.asarray(table.column(col).to_pylist(), dtype=object)


def read_shapes(path: str | Path) -> BlockShapes:
    """Read block polygons from ``path``; raise :class:`~tabrecon.errors.InputError` naming the
    file (and the row and column of the first bad value) when it is not a file of block shapes.
    """
    require_maps()
    import shapely

    p = Path(path)
    if not p.exists():
        raise InputError("file not found", path=str(p))
    try:
        if p.suffix.lower() in (".parquet", ".geoparquet"):
            names, fields, wkb = _read_geoparquet(p)
        else:
            import pyogrio
            import pyogrio.raw

            names = [str(c) for c in pyogrio.read_info(p)["fields"].tolist()]
            key0 = next((c for c in GEOID_COLUMNS if c in names), None)
            meta, _, wkb, values = pyogrio.raw.read(p, columns=[key0] if key0 else [])
            fields = dict(zip(meta["fields"].tolist(), values, strict=True))
        geometry = shapely.from_wkb(wkb)
    except (InputError, TabreconError):
        raise
    except Exception as exc:  # GDAL, Arrow, WKB: the file is not what --shapes reads
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"cannot read block shapes from it ({reason}); give a TIGER/Line block file "
            "(tl_2010_SSCCC_tabblock10.zip), a shapefile, GeoPackage, GeoJSON or GeoParquet",
            path=str(p),
        ) from None
    key = next((c for c in GEOID_COLUMNS if c in fields), None)
    if key is None:
        raise InputError(
            f"no block geoid column: looked for {', '.join(GEOID_COLUMNS)}; it has "
            f"{', '.join(map(str, names)) or 'none'}",
            path=str(p),
        )
    geoid = np.array([("" if v is None else str(v)).strip() for v in fields[key]], dtype=object)
    if not len(geoid):
        raise InputError("no blocks in it", path=str(p))
    ok = np.array([len(g) == 15 and g.isdigit() for g in geoid.tolist()])
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise InputError(
            f"row {i + 1}: {geoid[i]!r} is not a 15-digit block geoid",
            path=str(p),
            column=key,
            more=int((~ok).sum()) - 1,
        )
    kinds = shapely.get_type_id(geometry)
    polygonal = np.isin(kinds, (3, 6)) | shapely.is_missing(geometry)  # Polygon, MultiPolygon
    if not polygonal.all():
        i = int(np.flatnonzero(~polygonal)[0])
        raise InputError(
            f"row {i + 1} (block {geoid[i]}): a {geometry[i].geom_type} geometry "
            "where a block polygon belongs",
            path=str(p),
        )
    u, first, n = np.unique(geoid.astype(str), return_index=True, return_counts=True)
    if (n > 1).any():
        g = u[n > 1][0]
        raise InputError(f"block {g} appears {int(n[n > 1][0])} times", path=str(p), column=key)
    keep = ~shapely.is_missing(geometry) & ~shapely.is_empty(geometry)
    return BlockShapes(geoid[keep].astype(str), geometry[keep], str(p), key)


def check_overlap(shapes: BlockShapes, blocks: np.ndarray, what: str) -> None:
    """Refuse shapes none of whose blocks is a block of ``what`` (the release; ``blocks`` may
    be its blocks or, from a person file read by its geoid column alone, its 5-digit counties),
    naming both counties: a map of another county is a wrong answer, not a map."""
    ours = np.asarray(blocks, dtype=str)
    level = (
        level_of(str(ours[0])) if len(ours) else None
    ) or "block"  # or a person file's counties
    if not np.isin(ours, prefix(shapes.geoid, level)).any():
        theirs = ", ".join(shapes.counties()[:3])
        counties = ", ".join(sorted(set(prefix(ours, "county").tolist()))[:3])
        raise TabreconError(
            f"--shapes {shapes.source}: none of its {len(shapes):,} blocks (county {theirs}) is "
            f"a block of {what} (county {counties}); give the shapes of the release's county "
            "(tabrecon download --shapes fetches them)"
        )


def synthetic_shapes(geoids: np.ndarray, path: str | Path, seed: int = 0) -> Path:
    """Write made-up block polygons for ``geoids`` (15-digit block geoids) as GeoJSON, keyed
    ``GEOID10``: each tract a square of a grid, its blocks the Voronoi cells of random points
    in it. For a synthetic county's maps (demo, tests); no real place is drawn.

    >>> import tempfile
    >>> p = synthetic_shapes(np.array(["990010001001000", "990010001001001", "990010002001000"]),
    ...                      Path(tempfile.mkdtemp()) / "s.geojson")
    >>> sorted(read_shapes(p).geoid.tolist())[0]
    '990010001001000'
    """
    require_maps("synthetic shapes")
    import json

    import shapely

    g = np.unique(np.asarray(geoids, dtype=str))
    tracts, tract_of = np.unique(prefix(g, "tract"), return_inverse=True)
    side = int(np.ceil(np.sqrt(len(tracts))))
    rng = np.random.default_rng(seed)
    features = []
    for t in range(len(tracts)):
        ours = g[tract_of == t]
        x0, y0 = (t % side) * 0.05 - 82.0, 40.0 - (t // side) * 0.05  # degrees, near Ohio
        box = shapely.box(x0, y0 - 0.05, x0 + 0.05, y0)
        pts = np.column_stack(
            (rng.uniform(x0, x0 + 0.05, len(ours)), rng.uniform(y0 - 0.05, y0, len(ours)))
        )
        if len(ours) == 1:
            cells = [box]
        else:
            vor = shapely.get_parts(
                shapely.voronoi_polygons(shapely.multipoints(pts), extend_to=box)
            )
            # each point's own cell, in the geoids' order
            cells = [
                shapely.intersection(vor[np.flatnonzero(shapely.contains_xy(vor, x, y))[0]], box)
                for x, y in pts
            ]
        for geoid, cell in zip(ours.tolist(), cells, strict=True):
            features.append(
                {
                    "type": "Feature",
                    "properties": {"GEOID10": geoid},
                    "geometry": json.loads(shapely.to_geojson(cell)),
                }
            )
    out = Path(path)
    out.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return out


def tiger_url(state: str, county: str, year: int = 2010) -> str:
    """The address of a county's TIGER/Line block shapes for ``year``.

    >>> tiger_url("39", "059")
    'https://www2.census.gov/geo/tiger/TIGER2010/TABBLOCK/2010/tl_2010_39059_tabblock10.zip'
    """
    if year not in TIGER_URLS:
        raise TabreconError(f"--year must be one of {sorted(TIGER_URLS)} (got {year})")
    return TIGER_URLS[year].format(fips=f"{state}{county}")


__all__ = [
    "GEOID_COLUMNS",
    "MAPS_EXTRA",
    "TIGER_URLS",
    "BlockShapes",
    "check_overlap",
    "maps_available",
    "read_shapes",
    "require_maps",
    "synthetic_shapes",
    "tiger_url",
]
