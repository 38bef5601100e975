"""Reading a state's official 2010 Summary File 1 (SF1) or P.L. 94-171 redistricting
distribution into tabrecon's tables.

The distribution of a state (postal code ``xx``) is a geographic header file ``xxgeo2010.sf1`` and
data segment files ``xx000NN2010.sf1`` (SF1 technical documentation, chapters 2 and 6):

* the geographic header is fixed width, one record per geographic unit (and component); the fields
  read here are SUMLEV (columns 9-11), GEOCOMP (12-13), LOGRECNO (19-25), STATE (28-29),
  COUNTY (30-32), TRACT (55-60) and BLOCK (62-65); blocks are summary level 101, tracts 140, both
  with geographic component 00;
* a data segment file is comma-separated: FILEID, STUSAB, CHARITER, CIFSN, LOGRECNO, then the
  segment's cells in table order; rows join the header on LOGRECNO.

:data:`SEGMENTS` lists, per segment, the tables it holds in order (only those up to the last one
tabrecon reads); cells of the other tables (P3-P5, P13, P50, P51) are skipped by count. Block tables
are read from block records and the tract tables (PCT12, PCT12A-O) from tract records. Every error
names the file, the line and the field or cell.

The 2010 P.L. 94-171 distribution (``xxgeo2010.pl``, ``xx000012010.pl``, ``xx000022010.pl``) has the
same geographic header layout and segment format (2010 Census Redistricting Data Summary File
Technical Documentation, chapter 6; the Bureau's import script ``pl_part1_2010.sas``); its blocks
are summary level 750, and its tables P1-P4 are SF1's P8-P11 under other names (segment 1: P1, P2;
segment 2: P3, P4 and the housing table H1, skipped). :data:`PRODUCTS` holds both layouts.

The 2020 P.L. 94-171 distribution (``xxgeo2020.pl``, ``xx000012020.pl`` ... ``xx000032020.pl``) is
pipe-delimited, the geographic header too (:data:`GEO_FIELDS_2020`); its P1-P4 are again SF1's
P8-P11 (segment 3 holds P5, group quarters, skipped). Auditing it reconstructs and certifies what
the 2020 (differentially private) release itself determines.

A folder may lack some segment files: the tables they hold are left out and a warning names them
(a folder without any of them, or a block missing from one segment file, is an error).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError
from ..vocab import Geo, Release
from .layout import DHC_2020, LAYOUTS, SF1_2010, Layout, layout, level_of, segment_fields
from .measures import parse_values

#: tables of each data segment, in order, up to the last table tabrecon reads from it
SEGMENTS: dict[int, tuple[str, ...]] = {
    1: ("P1",),
    3: ("P3", "P4", "P5", "P6", "P7", "P8", "P9"),
    4: ("P10", "P11", "P12", "P13", "P14"),
    7: ("P50", "P51", "P12A", "P12B", "P12C", "P12D", "P12E"),
    8: ("P12F", "P12G", "P12H", "P12I"),
    17: ("PCT12",),
    **{20 + i: (f"PCT12{L}",) for i, L in enumerate("ABCDEFGHIJKLMNO")},
}
#: cell counts of SF1 tables in those segments that tabrecon does not model
OTHER_TABLE_CELLS = {"P13": 3, "P50": 3, "P51": 3}
HEADER_FIELDS = 5  # FILEID, STUSAB, CHARITER, CIFSN, LOGRECNO

#: (first, last) 1-based columns of the geographic header fields read here
GEO_COLUMNS = {
    "FILEID": (1, 6),
    "STUSAB": (7, 8),
    "SUMLEV": (9, 11),
    "GEOCOMP": (12, 13),
    "LOGRECNO": (19, 25),
    "STATE": (28, 29),
    "COUNTY": (30, 32),
    "TRACT": (55, 60),
    "BLOCK": (62, 65),
}
SUMLEV_BLOCK, SUMLEV_TRACT = "101", "140"


@dataclass(frozen=True)
class Product:
    """A summary-file distribution's layout: file suffix, block summary level, and per data
    segment the tables it holds in order (tabrecon's name for each table this product names
    otherwise in ``rename``; tables tabrecon does not model are skipped by ``other_cells``)."""

    name: str
    suffix: str
    block_sumlev: str
    segments: dict[int, tuple[str, ...]]
    rename: dict[str, str] = field(default_factory=dict)
    other_cells: dict[str, int] = field(default_factory=dict)
    year: int = 2010
    separator: str = ","  # the 2020 files are pipe-delimited, the geographic header too
    #: the product's own layout, every cell at its segment and field (SF1 2010, the 2020 DHC);
    #: None: the person tables it holds at :func:`field_positions` (P.L. 94-171, read as SF1's
    #: P8-P11)
    layout: Layout | None = None

    @property
    def release(self) -> Release:
        """The release whose tables it holds (a P.L. 94-171 file: SF1 2010's P8-P11)."""
        return self.layout.release if self.layout is not None else Release.SF1_2010

    def table(self, name: str) -> str | None:
        """tabrecon's name of one of this product's tables (None: not a person table modelled)."""
        from .persons import TABLES_BY_NAME

        t = self.rename.get(name, name if not self.rename else None)
        return t if t in TABLES_BY_NAME else None

    def segment_file(self, state: str, segment: int) -> str:
        """A data segment file's name (``zz000042010.sf1``) for the state's postal code."""
        return f"{state.lower()}{segment:05d}{self.year}.{self.suffix}"


SF1 = Product("SF1", "sf1", SUMLEV_BLOCK, SEGMENTS, other_cells=OTHER_TABLE_CELLS, layout=SF1_2010)
PL94 = Product(
    "P.L. 94-171",
    "pl",
    "750",
    {1: ("P1", "P2"), 2: ("P3", "P4", "H1")},
    rename={"P1": "P8", "P2": "P9", "P3": "P10", "P4": "P11"},
    other_cells={"H1": 3},
)
PL94_2020 = Product(
    "2020 P.L. 94-171",
    "pl",
    "750",
    {1: ("P1", "P2"), 2: ("P3", "P4", "H1"), 3: ("P5",)},
    rename={"P1": "P8", "P2": "P9", "P3": "P10", "P4": "P11"},
    other_cells={"H1": 3, "P5": 10},
    year=2020,
    separator="|",
)
#: the 2020 DHC's distribution (``xxgeo2020.dhc``, ``xx000012020.dhc`` ... 44 segments):
#: pipe-delimited like the 2020 P.L. 94-171's, every cell at the segment and field of its layout
#: (the DHC technical documentation, chapter 2)
DHC = Product("2020 DHC", "dhc", "750", {}, year=2020, separator="|", layout=DHC_2020)
#: (suffix, year) -> layout
PRODUCTS = {
    ("sf1", 2010): SF1,
    ("pl", 2010): PL94,
    ("pl", 2020): PL94_2020,
    ("dhc", 2020): DHC,
}


def product_of(name: str) -> Product | None:
    """The distribution whose geographic header a file named ``name`` is (``xxgeo2010.sf1``,
    ``xxgeo2010.pl``, ``xxgeo2020.pl``), or None."""
    for (ext, year), product in PRODUCTS.items():
        if name.lower().endswith(f"geo{year}.{ext}"):
            return product
    return None


#: 1-based fields of the 2020 pipe-delimited geographic header read here (2020 Census P.L. 94-171
#: Summary File Technical Documentation, chapter 6: FILEID|STUSAB|SUMLEV|GEOVAR|GEOCOMP|CHARITER|
#: CIFSN|LOGRECNO|GEOID|GEOCODE|...; GEOCODE is the geoid's digits, 15 for a block, 11 for a tract)
GEO_FIELDS_2020 = {"SUMLEV": 3, "GEOCOMP": 5, "LOGRECNO": 8, "GEOCODE": 10}


def field_positions(product: Product = SF1) -> dict[str, tuple[int, int]]:
    """Cell id -> (segment, 1-based field number in the segment's rows) for every cell tabrecon
    reads from ``product``'s files."""
    from .persons import TABLES_BY_NAME

    out: dict[str, tuple[int, int]] = {}
    for seg, tabs in product.segments.items():
        pos = HEADER_FIELDS + 1
        for t in tabs:
            mine = product.table(t)
            if mine is not None:
                cells = TABLES_BY_NAME[mine].cells()
                for k, c in enumerate(cells):
                    out[c.id] = (seg, pos + k)
                pos += len(cells)
            else:
                pos += product.other_cells[t]
    return out


def _header_frame(rows: list[tuple], path: Path, block_sumlev: str) -> pl.DataFrame:
    """The block and tract records read from a geographic header, checked: some, and no
    LOGRECNO twice."""
    if not rows:
        raise InputError(
            f"no block (summary level {block_sumlev}) or tract (140) records", path=str(path)
        )
    df = pl.DataFrame(rows, schema=["logrecno", "geoid", "level", "stusab"], orient="row")
    dup = df.filter(pl.col("logrecno").is_duplicated())
    if dup.height:
        raise InputError(
            f"LOGRECNO {dup['logrecno'][0]} appears on more than one block/tract record",
            path=str(path),
        )
    return df


def _tally(skipped: dict[str, int], sumlev: str, geocomp: str) -> None:
    """Count a geographic header record of another summary level or geographic component."""
    kind = f"summary level {sumlev.strip()}" + (
        f" (geographic component {geocomp.strip()})" if geocomp.strip() != "00" else ""
    )
    skipped[kind] = skipped.get(kind, 0) + 1


def read_geo_header(
    path: Path, block_sumlev: str = SUMLEV_BLOCK
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Block and tract records of the geographic header (logrecno, geoid, level), and how many
    records of each other summary level or geographic component it holds (not read: never
    passed over without a count)."""
    lines = path.read_bytes().decode("latin-1").splitlines()
    rows = []
    skipped: dict[str, int] = {}
    for i, ln in enumerate(lines, start=1):
        if not ln.strip():
            continue
        if len(ln) < GEO_COLUMNS["BLOCK"][1]:
            raise InputError(
                f"geographic header record is {len(ln)} characters, shorter than the "
                f"{GEO_COLUMNS['BLOCK'][1]} the layout needs",
                path=str(path),
                line=i,
            )
        f = {k: ln[a - 1 : b] for k, (a, b) in GEO_COLUMNS.items()}
        if f["GEOCOMP"] != "00" or f["SUMLEV"] not in (block_sumlev, SUMLEV_TRACT):
            _tally(skipped, f["SUMLEV"], f["GEOCOMP"])
            continue
        if not f["LOGRECNO"].strip().isdigit():
            raise InputError(
                f"LOGRECNO {f['LOGRECNO']!r} is not a number",
                path=str(path),
                line=i,
                column="LOGRECNO",
            )
        block = f["SUMLEV"] == block_sumlev
        geo = f["STATE"] + f["COUNTY"] + f["TRACT"] + (f["BLOCK"] if block else "")
        if not re.fullmatch(r"\d+", geo) or len(geo) != (15 if block else 11):
            raise InputError(
                f"geographic codes {geo!r} are not {'15' if block else '11'} digits "
                "(STATE, COUNTY, TRACT" + (", BLOCK)" if block else ")"),
                path=str(path),
                line=i,
            )
        rows.append((int(f["LOGRECNO"]), geo, "block" if block else "tract", f["STUSAB"].lower()))
    return _header_frame(rows, path, block_sumlev), skipped


def read_geo_header_2020(
    path: Path, block_sumlev: str = "750"
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Block and tract records of a 2020 pipe-delimited geographic header, and the other
    records counted (:func:`read_geo_header`)."""
    lines = path.read_bytes().decode("latin-1").splitlines()
    rows = []
    skipped: dict[str, int] = {}
    need = max(GEO_FIELDS_2020.values())
    for i, ln in enumerate(lines, start=1):
        if not ln.strip():
            continue
        f = ln.split("|")
        if len(f) < need:
            raise InputError(
                f"geographic header record has {len(f)} fields, fewer than the {need} the layout "
                "needs",
                path=str(path),
                line=i,
            )
        sumlev, comp, lrn, code = (f[GEO_FIELDS_2020[k] - 1].strip() for k in GEO_FIELDS_2020)
        if comp != "00" or sumlev not in (block_sumlev, SUMLEV_TRACT):
            _tally(skipped, sumlev, comp)
            continue
        if not lrn.isdigit():
            raise InputError(f"LOGRECNO {lrn!r} is not a number", path=str(path), line=i)
        block = sumlev == block_sumlev
        if not re.fullmatch(r"\d+", code) or len(code) != (15 if block else 11):
            raise InputError(
                f"GEOCODE {code!r} is not {'15' if block else '11'} digits", path=str(path), line=i
            )
        rows.append((int(lrn), code, "block" if block else "tract", f[1].strip().lower()))
    return _header_frame(rows, path, block_sumlev), skipped


def _find(folder: Path, name: str) -> Path | None:
    for p in folder.iterdir():
        if p.name.lower() == name.lower():
            return p
    return None


def _opened(folder: Path) -> tuple[Product, str, pl.DataFrame, dict[str, int]]:
    """A distribution folder's product (told by its one geographic header's name), its state's
    postal code, its block and tract records and its other records counted by kind, or an error
    naming what is wrong."""
    if not folder.is_dir():
        raise InputError(
            "not a folder (a summary-file distribution is a folder of .sf1 or .pl files)",
            path=str(folder),
        )
    geos = [(p, product) for p in folder.iterdir() if (product := product_of(p.name))]
    if len(geos) != 1:
        raise InputError(
            "expected one geographic header file (xxgeo2010.sf1, xxgeo2010.pl, xxgeo2020.pl or "
            "xxgeo2020.dhc), "
            f"found {len(geos)}",
            path=str(folder),
        )
    geo_path, product = geos[0]
    reader = read_geo_header_2020 if product.year == 2020 else read_geo_header
    geo, skipped = reader(geo_path, product.block_sumlev)
    return product, geo_path.name[:2].lower(), geo, skipped


def _read_level(
    folder: Path,
    geo: pl.DataFrame,
    level: str,
    cells: list[str],
    pos: dict[str, tuple[int, int]],
    seg_file: dict[int, str],
    holds: Callable[[int], str],
    separator: str = ",",
    *,
    decimals: Mapping[str, int] | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``level`` records' geoids and their values of ``cells`` (columns in that order), read
    from the segment files that hold them (``pos``: cell -> segment, field); None when the header
    has no record of the level. A missing segment file is named with what it holds (``holds``),
    and a record with rows in some segments and not others is refused."""
    g = geo.filter(pl.col("level") == level).sort("geoid")
    if g.is_empty():
        return None
    lrn = g["logrecno"].to_numpy()
    order = np.argsort(lrn)
    sorted_lrn = lrn[order]
    values = np.full((g.height, len(cells)), -1, dtype=np.int64)
    col_of = {c: j for j, c in enumerate(cells)}
    by_seg: dict[int, list[str]] = {}
    rows_in: dict[str, np.ndarray] = {}  # per segment file: which header records it has rows for
    for c in cells:
        by_seg.setdefault(pos[c][0], []).append(c)
    for seg, seg_cells in sorted(by_seg.items()):
        name = seg_file[seg]
        path = _find(folder, name)
        if path is None:
            raise InputError(
                f"data segment file {name} is missing (it holds cells "
                f"{seg_cells[0]}..{seg_cells[-1]}, {holds(seg)})",
                path=str(folder),
            )
        rows_in[path.name] = _read_segment(
            path, seg_cells, pos, sorted_lrn, order, values, col_of, separator, decimals
        )
    anywhere = np.logical_or.reduce(list(rows_in.values()))
    missing = np.flatnonzero(~anywhere)
    if missing.size:
        raise InputError(
            f"{missing.size} {level} record(s) of the geographic header have no data rows "
            f"(e.g. LOGRECNO {lrn[missing[0]]}, geoid {g['geoid'][int(missing[0])]})",
            path=str(folder),
        )
    for name, got in rows_in.items():  # a record in some segments and not in others
        gap = np.flatnonzero(anywhere & ~got)
        if gap.size:
            i = int(gap[0])
            raise InputError(
                f"{gap.size} {level} record(s) with data rows in other segments have none "
                f"here (e.g. LOGRECNO {lrn[i]}, geoid {g['geoid'][i]}); its cells would "
                "silently read as not published",
                path=str(folder / name),
            )
    return g["geoid"].to_numpy().astype(str), values


def distribution_files(names: Sequence[str], cells: Collection[str]) -> list[str] | None:
    """The files among ``names`` (base names, as in a ZIP) a reader of ``cells`` needs when they
    are a summary-file distribution: its one geographic header and the data segment files that
    hold any of the cells (the person tables' fields for any product, SF1 2010's layout for
    the rest); None when ``names`` hold no geographic header, or more than one.

    >>> distribution_files(["zzgeo2010.sf1", "zz000012010.sf1", "zz000442010.sf1"], ["P0010001"])
    ['zzgeo2010.sf1', 'zz000012010.sf1']
    >>> distribution_files(["notes.txt"], ["P0010001"]) is None
    True
    """
    geos = [(n, product) for n in names if (product := product_of(n))]
    if len(geos) != 1:
        return None
    geo, product = geos[0]
    want = set(cells)
    pos = field_positions(product)
    segs = {pos[c][0] for c in want if c in pos}
    if product.layout is not None:
        lay = layout(product.layout).filter(pl.col("cell").is_in(list(want)))
        segs |= {int(s) for s in lay["segment"].to_list()}
    files = {product.segment_file(geo[:2], s) for s in segs}
    return [geo] + [n for n in names if n.lower() in files]


def read_sf1_cells(folder: str | Path, cells: Sequence[str]) -> pl.DataFrame:
    """:func:`read_sf1_records`' long table alone."""
    return read_sf1_records(folder, cells)[0]


def read_sf1_records(
    folder: str | Path, cells: Sequence[str], release: Release = Release.SF1_2010
) -> tuple[pl.DataFrame, dict[str, tuple[int, int]]]:
    """Any SF1 2010 cells (``H0180006``, ``P0420001``: every field of the Bureau's layout,
    :mod:`tabrecon.tables.layout`) from a state's SF1 folder, or those of them a P.L. 94-171
    folder holds (2010 or 2020: SF1's P8-P11, its P1-P4), as a long table (geoid, cell, value):
    each cell is read from the segment and field the layout (the product's, :class:`Product`)
    gives, block tables from block records and tract tables from tract records. What the person
    reader does for its tables, for any population's: a folder with persons and housing holds
    both, and each reader takes its own. A missing segment file is named with the tables it
    holds. Beside the long table: the geographic header's records of other summary levels or
    components, not read, counted by kind as (records, values they hold of ``cells``). The
    cells are ``release``'s: a distribution of another release (a 2020 DHC folder read as SF1
    2010, or the reverse) is refused, naming the option that reads it."""
    folder = Path(folder)
    product, st, geo, skipped = _opened(folder)
    _same_release(product, release, folder)
    lay = layout(product.layout or SF1_2010).filter(pl.col("cell").is_in(list(cells)))
    table_of = dict(zip(lay["cell"], lay["table"], strict=True))
    if product.layout is not None:
        fields = segment_fields(product.layout)
        pos = {c: (fields[c][0], HEADER_FIELDS + fields[c][1]) for c in lay["cell"]}
    else:  # the person tables it holds, at the fields of the product's own layout
        fields = field_positions(product)
        pos = {c: fields[c] for c in cells if c in fields}
        if not pos:
            held = ", ".join(t for t in product.rename.values())
            raise InputError(
                f"the {product.name} files hold none of these tables' cells (they hold {held} "
                "of SF1's person tables)",
                path=str(folder),
            )
    seg_file = {sg: product.segment_file(st, sg) for sg, _ in pos.values()}

    def holds(seg: int) -> str:
        names = dict.fromkeys(table_of[c] for c, (sg, _) in pos.items() if sg == seg)
        return f"tables {', '.join(names)}"

    absent = sorted(sg for sg, name in seg_file.items() if _find(folder, name) is None)
    if absent and len(absent) < len(seg_file):  # read what is there; name what is not
        files = ", ".join(seg_file[sg] for sg in absent)
        left_out = ", ".join(holds(sg).removeprefix("tables ") for sg in absent)
        warnings.warn(
            f"{folder}: data segment file(s) {files} missing: tables {left_out} not read",
            stacklevel=2,
        )
        pos = {c: p for c, p in pos.items() if p[0] not in absent}

    frames = []
    dec = _decimals(tuple(pos), product.layout or SF1_2010)
    for level in (Geo.BLOCK, Geo.TRACT):
        mine = sorted(
            (c for c in pos if level_of(table_of[c], product.layout or SF1_2010) == level),
            key=pos.__getitem__,
        )
        got = (
            _read_level(
                folder, geo, level, mine, pos, seg_file, holds, product.separator, decimals=dec
            )
            if mine
            else None
        )
        if got is None:
            continue
        geoids, values = got
        frames.append(
            pl.DataFrame(
                {
                    "geoid": np.repeat(geoids, len(mine)),
                    "cell": np.tile(np.array(mine), geoids.size),
                    "value": values.reshape(-1),
                }
            )
        )
    if not frames:
        raise InputError("no block or tract records for these tables", path=str(folder))
    return pl.concat(frames), {k: (n, n * len(pos)) for k, n in skipped.items()}


def _same_release(product: Product, release: Release, folder: Path) -> None:
    """Refuse a distribution of another release than the one whose cells are asked for."""
    if product.release is release:
        return
    if product.layout is None:  # P.L. 94-171: SF1's person tables P8-P11 alone
        raise InputError(
            f"a {product.name} distribution: it holds none of {LAYOUTS[release].title}'s tables",
            path=str(folder),
        )
    raise InputError(
        f"a summary-file distribution of {LAYOUTS[product.release].title}, not of "
        f"{LAYOUTS[release].title}: read it with --release {product.release.value}",
        path=str(folder),
    )


def _decimals(cells: tuple[str, ...], lay_of: Layout = SF1_2010) -> dict[str, int]:
    """The cells among ``cells`` that publish decimals (medians, means), with how many."""
    lay = layout(lay_of).filter(pl.col("cell").is_in(list(cells)) & (pl.col("decimal") != "0"))
    return {
        c: int(d) for c, d in zip(lay["cell"], lay["decimal"], strict=True) if d and d.isdigit()
    }


#: cells of a segment parsed together (a state's segment file holds a million rows)
_BATCH = 32


def _read_segment(
    path: Path,
    cells: list[str],
    pos: dict,
    sorted_lrn: np.ndarray,
    order: np.ndarray,
    values: np.ndarray,
    col_of: dict[str, int],
    separator: str = ",",
    decimals: Mapping[str, int] | None = None,
) -> np.ndarray:
    """Fill ``values`` (rows in header order; ``order`` sorts them by LOGRECNO into ``sorted_lrn``)
    with ``cells`` of one segment file; rows of other geographic units are ignored. Returns which
    header records (in header order) the file has a row for."""
    need = max(pos[c][1] for c in cells)
    try:
        df = pl.read_csv(
            path,
            separator=separator,
            has_header=False,
            infer_schema=False,
            truncate_ragged_lines=True,
            encoding="latin-1",
        )
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"cannot be read as a {'pipe' if separator == '|' else 'comma'}-separated segment "
            f"file: {first}",
            path=str(path),
        ) from None
    if df.width < need:
        raise InputError(
            f"rows have {df.width} fields; the layout puts {cells[-1]} in field {need}",
            path=str(path),
        )
    logrec = df[:, 4].str.strip_chars().cast(pl.Int64, strict=False)
    bad = logrec.is_null().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"LOGRECNO {df[i, 4]!r} is not a number", path=str(path), line=i + 1, column="LOGRECNO"
        )
    lr = logrec.to_numpy()
    k = np.minimum(np.searchsorted(sorted_lrn, lr), sorted_lrn.size - 1)
    found = sorted_lrn[k] == lr
    rows = order[k[found]]
    # the cells' fields a batch at a time (one polars select each, not a few operations per
    # cell: 5 s of fixed cost per folder), a state's file never copied whole; rows of other
    # units left out
    keep = pl.Series(found)
    for at in range(0, len(cells), _BATCH):
        batch = cells[at : at + _BATCH]
        text = df.select(
            pl.col(df.columns[pos[c][1] - 1]).str.strip_chars().alias(c) for c in batch
        ).filter(keep)
        # a median or a mean (P13: 30.5) in published units (305), as tabrecon holds them
        parsed = text.select(
            parse_values(text[c], decimals[c])
            if decimals and c in decimals
            else pl.col(c).cast(pl.Int64, strict=False)
            for c in batch
        )
        number = parsed.select(pl.all().fill_null(-1)).to_numpy()
        null = parsed.select(pl.all().is_null()).to_numpy()
        given = text.select(pl.col(c).is_not_null() & (pl.col(c) != "") for c in batch)
        badv = (null & given.to_numpy()) | (~null & (number < 0))
        if badv.any():
            ci = int(np.flatnonzero(badv.any(axis=0))[0])  # the first cell, then its first row
            c, f, d = batch[ci], pos[batch[ci]][1], (decimals or {}).get(batch[ci], 0)
            j = int(np.flatnonzero(found)[np.flatnonzero(badv[:, ci])[0]])
            what = f"a number with {d} decimals" if d else "a non-negative whole number"
            raise InputError(
                f"cell {c} (field {f}) is {df[j, f - 1]!r}, not {what}",
                path=str(path),
                line=j + 1,
                column=c,
            )
        values[rows[:, None], np.array([col_of[c] for c in batch])] = number
    got = np.zeros(values.shape[0], dtype=bool)
    got[rows] = True
    return got
