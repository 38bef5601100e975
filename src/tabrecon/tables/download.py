"""``tabrecon download``: a county's published SF1 tables from the Census API: the person
tables (2010 SF1 or the 2020 DHC), or another population's SF1 2010 tables (households).

The county's tracts are listed first; then, tract by tract, its blocks' variables (at most
:data:`MAX_VARIABLES` per request, the API's limit) and the tract's own tract-level variables are
fetched, checked and written to ``<out>.parts/<tract>.parquet`` as the tract completes. A rerun
skips finished tracts (the parts record the state, county, tables and address they came from, and a
rerun with other ones is refused). Failed requests are retried with growing pauses; an HTTP error,
an API error message or a response of the wrong shape stops the run with one line naming the tract
and the request's variables (never the key), keeping what finished. At the end the parts are
gathered into one long table file (``geoid, cell, value``) that every command reads.

Variables are named as the API names them (``P001001``, ``P012A003``, ``PCT012105``);
:func:`tabrecon.tables.published.cell_of_variable` maps them to SF1 cell ids.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import NetworkError, TabreconError
from ..geo import check_county
from ..interrupts import Interrupted, check, keeps
from ..io import check_suffix, write_frame
from ..provenance import check_or_record, fingerprint
from ..schema.registry import population
from ..vocab import Geo, Release
from .forms import frame_of_rows
from .layout import DHC_2020, layout
from .spec import select_tables

#: The 2010 SF1 endpoint of the Census Data API.
API_2010_SF1 = "https://api.census.gov/data/2010/dec/sf1"
#: The 2020 Demographic and Housing Characteristics endpoint (SF1's tables, 2020 names).
API_2020_DHC = "https://api.census.gov/data/2020/dec/dhc"
ENDPOINTS = {2010: API_2010_SF1, 2020: API_2020_DHC}
#: Variables per request (the API answers at most 50, geography included).
MAX_VARIABLES = 45


def api_name(cell: str) -> str:
    """The Census API's name of an SF1 cell (three-digit line numbers throughout).

    >>> api_name("P0010001"), api_name("P012A003"), api_name("PCT0120105")
    ('P001001', 'P012A003', 'PCT012105')
    """
    if cell[-4].isdigit() and not cell[-5].isalpha():
        return cell[:-4] + cell[-3:]
    return cell


def check_url(url: str, option: str = "--api") -> str:
    """``url`` when it is an http(s) address with a host; else an error naming ``option``.

    >>> check_url("ftp://example.org/data")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: --api 'ftp://example.org/data': give an http:// or https:// ...
    """
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise TabreconError(f"{option} {url!r}: not a valid address ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TabreconError(
            f"{option} {url!r}: give an http:// or https:// address such as {API_2010_SF1}"
        )
    del port
    return url


def fetch(
    url: str,
    what: str,
    retries: int,
    pause: float,
    refused: str,
    after: str,
    timeout: float = 60,
    count: Callable[[], None] | None = None,
) -> bytes:
    """GET ``url``'s body, retrying a refused connection, a reset, a timeout, HTTP 429 and 5xx
    with growing pauses; any other HTTP error is the request's own fault and stops at once
    (``refused``: who refused it, with the answer's first words). Every failure names ``what``,
    never the address's query (it may hold a key); ``after`` ends the message when the server
    stays unreachable (a :class:`~tabrecon.errors.NetworkError`). ``count`` is called per
    attempt."""
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(pause * 2 ** (attempt - 1))
        if count is not None:
            count()
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return bytes(r.read())
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code} {exc.reason}"
            if exc.code < 500 and exc.code != 429:  # the request itself is wrong: no retry
                detail = exc.read().decode("utf-8", errors="replace").strip()[:200]
                raise TabreconError(f"{what}: {refused} ({last}): {detail}") from None
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, DNS, timeout
            last = str(getattr(exc, "reason", exc))
    raise NetworkError(
        f"{what}: no answer from {urllib.parse.urlsplit(url).netloc} after {retries + 1} "
        f"attempts ({last}); {after}"
    )


class _Client:
    """GETs with retries; every failure names the request, never the key."""

    def __init__(self, base: str, key: str | None, retries: int, pause: float) -> None:
        self.base, self.key, self.retries, self.pause = base.rstrip("?"), key, retries, pause
        self.requests = 0

    def _count(self) -> None:
        self.requests += 1

    def get(self, params: dict[str, str], what: str) -> list[list[str]]:
        query = dict(params, **({"key": self.key} if self.key else {}))
        body = fetch(
            f"{self.base}?{urllib.parse.urlencode(query)}",
            what,
            self.retries,
            self.pause,
            "the Census API refused it",
            "rerun to resume, finished tracts are kept",
            count=self._count,
        )
        return _parse(body.decode("utf-8", errors="replace"), what)


def _parse(body: str, what: str) -> list[list[str]]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        raise TabreconError(
            f"{what}: the Census API answered with something other than JSON: {body[:120]!r}"
        ) from None
    if isinstance(data, dict) and "error" in data:
        raise TabreconError(f"{what}: the Census API answered with an error: {data['error']}")
    if not (isinstance(data, list) and data and all(isinstance(r, list) for r in data)):
        raise TabreconError(f"{what}: not an API table (an array of arrays, header first)")
    return [[("" if v is None else str(v)) for v in row] for row in data]


def download(
    state: str,
    county: str,
    out: str | Path,
    tables: str | list[str] = "published",
    key: str | None = None,
    base_url: str | None = None,
    year: int = 2010,
    retries: int = 4,
    pause: float = 1.0,
    resume: bool = True,
    progress: Callable[[dict], None] | None = None,
    schema: str = "persons",
    release: str | None = None,
) -> Path:
    """Fetch a county's block and tract tables and write them as one long table file.

    Parameters
    ----------
    state, county : str
        FIPS codes (``"39"``, ``"059"``).
    out : path
        The long table file to write (``.parquet``, ``.csv`` or ``.csv.gz``).
    tables : str or list of str
        As :func:`tabrecon.tables.persons.resolve_tables` reads them (default: the 34 tables
        and P3-P5).
    key : str, optional
        A Census API key (the API answers a few requests a day without one).
    year : int
        2010 (SF1) or 2020 (the DHC: the differentially private release, SF1's table numbers).
    base_url : str, optional
        The endpoint (default: the year's; a local server in the tests).
    schema : str
        The population whose tables to fetch (``persons``; ``households``: SF1 2010's household
        tables, under the API names of the Bureau's layout).
    release : str, optional
        ``dhc-2020``: the 2020 DHC's own tables over the population, under the API names of the
        DHC's layout (``H4A_001N``), written with the DHC's cell ids (``--year`` 2020 implied).

    Returns
    -------
    Path
        ``out``.
    """
    pop, name, year = _named(schema, year, release)
    check_county(state, county, year)
    base_url = check_url(base_url or ENDPOINTS[year])
    out = check_suffix(out)
    by_level: dict[str, list[str]] = {"block": [], "tract": []}
    chosen = select_tables(tables if isinstance(tables, str) else ",".join(tables), pop)
    names = [u.name for u in chosen]
    cell_of: dict[str, str] = {}
    for cell, level in pop.published_cells(names):
        by_level[level].append(name(cell))
        cell_of[name(cell)] = cell
    parts = Path(str(out) + ".parts")
    if not resume and parts.exists():
        for old in parts.iterdir():
            old.unlink()
    parts.mkdir(parents=True, exist_ok=True)
    fp = fingerprint(
        state=state, county=county, tables=names, api=base_url, year=year, schema=pop.key
    )
    check_or_record(parts / "run.json", fp, str(parts))
    client = _Client(base_url, key, retries, pause)
    where = {"in": f"state:{state} county:{county}"}
    listing = client.get({"get": "NAME", "for": "tract:*", **where}, f"tracts of {state}{county}")
    tracts = sorted(r[listing[0].index("tract")] for r in listing[1:])
    if not tracts:
        raise TabreconError(f"the Census API lists no tracts in {state}{county}")
    keeps(
        lambda: Interrupted(
            sum((parts / f"{t}.parquet").exists() for t in tracts),
            len(tracts),
            str(parts),
            "tracts",
        )
    )
    for tract in tracts:
        check()  # an interrupt Python swallowed stops the download here (interrupts.check)
        part = parts / f"{tract}.parquet"
        if part.exists():
            if progress:
                progress({"unit": tract, "status": "kept"})
            continue
        frames = []
        for level, variables in by_level.items():
            if not variables:
                continue
            geo = (
                {"for": "block:*", "in": f"state:{state} county:{county} tract:{tract}"}
                if level == Geo.BLOCK
                else {"for": f"tract:{tract}", **where}
            )
            wide = None
            for i in range(0, len(variables), MAX_VARIABLES):
                chunk = variables[i : i + MAX_VARIABLES]
                what = f"tract {state}{county}{tract}, {level} variables {chunk[0]}..{chunk[-1]}"
                f = frame_of_rows(client.get({"get": ",".join(chunk), **geo}, what))
                keys = [k for k in ("state", "county", "tract", "block") if k in f.columns]
                missing = [v for v in chunk if v not in f.columns]
                if missing or len(keys) < (4 if level == Geo.BLOCK else 3):
                    raise TabreconError(
                        f"{what}: the answer lacks {', '.join(missing or ['geography'])}"
                    )
                other = f.filter(
                    (pl.col("state") != state)
                    | (pl.col("county") != county)
                    | (pl.col("tract") != tract)
                )
                if other.height:  # never file another place's counts under this tract
                    r = other.row(0, named=True)
                    raise TabreconError(
                        f"{what}: the answer holds {other.height} row(s) of another place (e.g. "
                        f"state {r['state']} county {r['county']} tract {r['tract']})"
                    )
                wide = f if wide is None else wide.join(f, on=keys, how="full", coalesce=True)
            assert wide is not None
            frames.append(_long_of(wide, cell_of, level))
        write_frame(pl.concat(frames), part)
        if progress:
            progress({"unit": tract, "status": "ok"})
    long = pl.concat([pl.read_parquet(parts / f"{t}.parquet") for t in tracts])
    # every value was checked to be a count as its tract arrived
    write_frame(long.sort("geoid", "cell"), out)
    return out


def _named(schema: str, year: int, release: str | None) -> tuple[Any, Callable[[str], str], int]:
    """The population whose tables to fetch, the API's name of each of its cells, and the year:
    SF1 2010's names from its layout; 2020's persons under their DHC names with SF1's numbers
    (``name_2020``); ``release`` dhc-2020: the DHC's own tables and names."""
    if year not in ENDPOINTS:
        raise TabreconError(f"--year must be 2010 or 2020 (got {year})")
    pop = population(schema)
    if release is not None and Release(release) is Release.DHC_2020:
        pop = pop.in_release(Release.DHC_2020)
        lay = DHC_2020.frame()
        return pop, dict(lay.select("cell", "api_name").iter_rows()).__getitem__, 2020
    if year == 2010:
        return pop, dict(layout().select("cell", "api_name").iter_rows()).__getitem__, year
    if pop.name_2020 is not None:
        return pop, pop.name_2020, year
    raise TabreconError(
        f"--year {year}: the 2020 tables of {pop.name} are the DHC's own (table numbers "
        "changed): fetch them with --release dhc-2020"
    )


def _long_of(wide: pl.DataFrame, cell_of: dict[str, str], level: str) -> pl.DataFrame:
    """The API's wide answer (one row per geography) as a long table of cell ids, every value a
    count (refused naming the variable and the geography otherwise)."""
    keys = ["state", "county", "tract"] + (["block"] if level == Geo.BLOCK else [])
    geo = pl.concat_str([pl.col(k) for k in keys]).alias("geoid")
    long = wide.select(geo, *[pl.col(v) for v in cell_of if v in wide.columns]).unpivot(
        index="geoid", variable_name="variable", value_name="text"
    )
    value = long["text"].cast(pl.Int64, strict=False)
    bad = (value.is_null() | (value < 0)).to_numpy()
    if bad.any():
        r = long.row(int(bad.nonzero()[0][0]), named=True)
        raise TabreconError(
            f"the API's {r['variable']} for {r['geoid']} is {r['text']!r}, not a count"
        )
    return long.select(
        "geoid", pl.col("variable").replace_strict(cell_of).alias("cell"), value.alias("value")
    )


def download_shapes(
    state: str,
    county: str,
    out: str | Path | None = None,
    year: int = 2010,
    url: str | None = None,
    retries: int = 4,
    pause: float = 1.0,
) -> Path:
    """Fetch a county's TIGER/Line block shapes (the zipped shapefile the Bureau publishes,
    :func:`tabrecon.shapes.tiger_url`) to ``out`` (default: the Bureau's file name in the
    current folder), for ``audit --shapes``. The file is written whole or not at all (through a
    temporary renamed at the end); a file already there is kept when it holds the county's
    blocks. With the ``maps`` extra the answer is read and must hold blocks of the county;
    without it, it must at least be a zip. ``url`` replaces the Bureau's address (a local
    server in the tests)."""
    from ..shapes import maps_available, read_shapes, tiger_url

    check_county(state, county, year)
    address = check_url(url or tiger_url(state, county, year), "--shapes-url")
    name = Path(urllib.parse.urlsplit(address).path).name or f"{state}{county}_blocks.zip"
    target = Path(out) if out is not None else Path(name)
    if target.suffix.lower() != ".zip":
        raise TabreconError(f"--out {target}: the shapes are a zip file; name it ....zip")

    def check(p: Path) -> None:
        if not maps_available():
            if p.read_bytes()[:2] != b"PK":
                raise TabreconError(f"{address}: the answer is not a zip file")
            return
        shapes = read_shapes(p)
        if f"{state}{county}" not in shapes.counties():
            raise TabreconError(
                f"{address}: its blocks are of county {', '.join(shapes.counties()[:3])}, not "
                f"{state}{county}"
            )

    if target.exists():
        try:
            check(target)
            return target
        except TabreconError:
            pass  # a damaged or foreign file is fetched again
    what = f"block shapes of {state}{county} ({year})"
    body = fetch(address, what, retries, pause, f"{address} answered", "rerun to try again", 120)
    part = target.with_name(target.stem + ".part.zip")  # GDAL reads a zip by its suffix
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(body)
    try:
        check(part)
    except TabreconError as exc:
        part.unlink()
        raise TabreconError(f"{what}: {exc}") from None
    part.replace(target)
    return target


__all__ = [
    "API_2010_SF1",
    "API_2020_DHC",
    "MAX_VARIABLES",
    "api_name",
    "download",
    "download_shapes",
]
