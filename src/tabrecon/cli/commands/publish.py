"""Commands that publish: ``synth``, ``tabulate``, ``tables list|describe``, ``check-tables``,
``check-households``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ... import vocab
from ...errors import TabreconError
from ...io import Writes, check_suffix
from ...vocab import Geo, Release
from ..terminal import (
    Fresh,
    PersonOut,
    ReleaseName,
    SchemaName,
    Seed,
    at_least,
    console,
    err,
    one_of,
    publication_rule,
    released,
    say_skipped,
    table,
)

if TYPE_CHECKING:
    from ...schema.registry import Population

app = typer.Typer()
RECON_LEVELS = vocab.Level.choices()
tables_app = typer.Typer(
    help="Browse the table specifications (SF1 cells as predicates).", no_args_is_help=True
)


@app.command()
def synth(
    out: PersonOut = Path("synthetic_county.csv.gz"),
    persons: Annotated[int, typer.Option(help="Approximate number of persons")] = 20_000,
    seed: Seed = 0,
    state: Annotated[str, typer.Option(help="2-digit state code of the geoids")] = "99",
    county: Annotated[str, typer.Option(help="3-digit county code of the geoids")] = "001",
    households: Annotated[
        Path | None,
        typer.Option(
            help="Also write the county's housing units here (.csv[.gz] or .parquet): persons then "
            "get household roles (householder, spouse, partner, child, relative, nonrelative)"
        ),
        Writes(),
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            help="default (every block as cohesive in race x ethnicity) or reid-2010 (small blocks "
            "homogeneous, large ones mixed: the county on which the perfect attacker reproduces "
            "the Bureau's CEF_atkr; SynthConfig.reid_2010)"
        ),
    ] = "default",
    schema: SchemaName = "persons",
) -> None:
    """Write a realistic synthetic county and print its calibration against 2010 figures; with
    another ``--schema``, that population's records in the same county (group quarters, ...)."""
    from ...records.synth import SynthConfig, calibration, synthesize
    from ...schema import write_microdata

    at_least(1, persons=persons)
    if not (state.isdigit() and len(state) == 2 and county.isdigit() and len(county) == 3):
        raise TabreconError("--state must be 2 digits and --county 3 digits")
    one_of(profile, ("default", "reid-2010"), "--profile")
    check_suffix(out)
    make = SynthConfig.reid_2010 if profile == "reid-2010" else SynthConfig
    cfg = make(persons=persons, state=state, county=county)
    from ...tables.declaration import population
    from ...vocab import Capability

    pop = population(schema)
    if not pop.can(Capability.CALIBRATED):
        from ...schema.spec import write_units

        if households is not None:
            raise TabreconError("--households goes with the person file (--schema persons)")
        if pop.synthesize is None:
            raise TabreconError(f"the {pop.name} population has no synthetic data")
        units = pop.synthesize(cfg, seed)
        write_units(units, out)
        console.print(
            f"wrote {len(units):,} {pop.noun} in {len(set(units.block_geoid.tolist())):,} "
            f"blocks to {out} (seed {seed})"
        )
        return
    if households is None:
        md = synthesize(cfg, seed=seed)
    else:
        from ...records.households import household_calibration, synthesize_households
        from ...schema.spec import write_units

        check_suffix(households)
        md, units = synthesize_households(cfg, seed=seed)
    write_microdata(md, out)
    console.print(f"wrote {len(md):,} persons in {len(md.geoids):,} blocks to {out} (seed {seed})")
    rows = [list(r) for r in calibration(md)]
    console.print(
        table("calibration (measured vs 2010 target)", ["figure", "measured", "target"], rows)
    )
    if households is not None:
        write_units(units, households)
        occupied = int((units.codes["vacancy_status"] == 0).sum())
        console.print(f"wrote {len(units):,} housing units ({occupied:,} occupied) to {households}")
        rows = [list(r) for r in household_calibration(md, units)]
        console.print(
            table(
                "housing units (share measured vs 2010 SF1 / C2010BR-14)",
                ["figure", "measured", "target"],
                rows,
            )
        )


@app.command()
def tabulate(
    microdata: Annotated[
        Path, typer.Argument(help="Records file (CSV, CSV.gz or Parquet): persons, or --schema's")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Long table to write (.parquet or .csv[.gz])"),
        Writes(),
    ] = Path("tables.parquet"),
    tables: Annotated[
        str,
        typer.Option(
            help="'all' (the 34 tables), 'published' (and P3-P5), 'block', 'tract' or a comma list "
            "such as P1,P12,PCT12; with another --schema 'all' or a list such as H3,H13,P18"
        ),
    ] = "all",
    level: Annotated[
        str | None, typer.Option(help="Tabulate every table at this level (state ... block)")
    ] = None,
    schema: SchemaName = "persons",
    release: ReleaseName = "sf1-2010",
    publication: Annotated[
        str,
        typer.Option(
            "--publication",
            help="Publish the cells as an agency would: declared (the default: "
            "as the population or its declaration file says; exact for census tables), exact, "
            "round:B, round:[i]B[/i]:random (add :zeros-exact to either), suppress:T or "
            "suppress:T:zeros (withheld cells left empty); see reconstruct --publication (the "
            "person attacks model exact counts)",
        ),
    ] = "declared",
    seed: Annotated[int, typer.Option(help="Seed of random rounding")] = 0,
) -> None:
    """Tabulate records into their SF1 tables (or ``--release``'s, the 2020 DHC's): persons into
    the person tables, housing units into the housing-unit tables, ... (long format: geoid,
    cell, value); with ``--publication``, rounded or withheld as an agency would publish them."""
    from ...io import write_frame
    from ...tables.publishing import publish_counts
    from ...tables.spec import as_published, select_tables, tabulate

    pop = released(schema, release)
    check_suffix(out)
    pub = publication_rule(pop, publication, attacking=False)
    names = [t.name for t in select_tables(tables, pop)]  # refused before any reading
    t0 = time.perf_counter()
    units = pop.records(microdata)
    ts = tabulate(units, names, level)
    long = ts.to_frame()
    how = ""
    if not pub.exact:
        from ...tables.publication import MISSING

        long, true, shown = publish_counts(long, pop, pub, seed)
        how = (
            f" published {pub} ({int((shown != true).sum()):,} changed, of which "
            f"{int((shown == MISSING).sum()):,} withheld)"
        )
    write_frame(as_published(long, pop), out)  # medians and means as decimals
    parts = ", ".join(
        f"{g.values.shape[0]:,} {_plural(_place(lv, pop), g.values.shape[0])} x "
        f"{g.values.shape[1]:,} cells"
        for lv, g in ts.grids.items()
    )
    console.print(
        f"{len(units):,} {pop.noun} -> {long.height:,} values ({parts}){how} -> {out} "
        f"({time.perf_counter() - t0:.2f} s)"
    )


def _place(level: str, pop: Population) -> str:
    """A level as the release names it: a declared release's own geography (``school``) for
    its block level."""
    return pop.schema.geography if level == Geo.BLOCK else level


def _plural(level: str, n: int) -> str:
    """``county`` as counted: ``1 county``, ``3 counties``, ``2 blocks``."""
    return level if n == 1 else ("counties" if level == Geo.COUNTY else f"{level}s")


@tables_app.command("list")
def tables_list(
    schema: SchemaName = "persons",
    release: ReleaseName = "sf1-2010",
) -> None:
    """List a population's tables in a release (SF1 2010 persons: the 34 of Abowd et al., P3-P5
    and the median ages P13, P13A-I), with their level, universe and number of cells, the
    number of cells published per block, and the tables left out with their reasons."""
    from pathlib import Path

    one_of(release, Release.choices(), "--release")
    pop = released(schema, Release.SF1_2010)
    cols = ["table", "level", "cells", "title", "universe (line 1)"]
    declared = pop.release_tables(release)
    place = pop.schema.geography
    rows = [
        [
            t.name,
            place if t.level == Geo.BLOCK else t.level,
            len(t.cells()),
            t.title if t.statistic is None else f"{t.title} ({t.statistic})",
            t.universe_label or t.cells()[0].description(),
        ]
        for t in declared
    ]
    what = (
        f"Tables of {pop.name}, declared in {Path(pop.source).name}"
        if pop.source
        else f"{Release(release).label} tables over the {pop.name} schema"
    )
    console.print(table(what, cols, rows))
    per_block = sum(len(t.cells()) for t in declared if t.level == Geo.BLOCK)
    study = (
        f"; the study compared with attacked {pop.study_cells:,}"
        if pop.study_cells and release == Release.SF1_2010
        else ""
    )
    console.print(f"{per_block:,} cells per {place} in {len(declared)} tables{study}")
    if pop.publication != "exact":
        console.print(f"counts published {pop.publication} (--publication declared)")
    if left := pop.left_out_of(release):
        console.print(
            table(
                "Published over the same records but not declared",
                ["tables", "why"],
                [[k, v] for k, v in left.items()],
            )
        )


@tables_app.command("describe")
def tables_describe(
    name: Annotated[
        str, typer.Argument(help="A table (P12A, H13) or a cell id (P0120003, H0130002)")
    ],
) -> None:
    """Show the definition of a table's cells or of one cell (person or housing-unit)."""
    from ...errors import InputError
    from ...schema.registry import names
    from ...tables.declaration import population
    from ...tables.persons import TABLES_BY_NAME, get_cell
    from ...tables.spec import cell_by_id

    key = name.upper()
    if key not in TABLES_BY_NAME:
        try:
            person = get_cell(key)
        except InputError:
            pops = [population(n) for n in names()]  # persons' median ages (P13) too
            found = [(p, t) for p in pops for t in p.tables() if t.name == key]
            if found:
                pop, t = found[0]
                ucells = t.cells()
            else:
                ucells = [cell_by_id(key, pops)]
                pop = next(p for p in pops if p.schema.name == ucells[0].schema.name)
            rows = [
                [
                    c.id,
                    c.table,
                    c.label,
                    c.description()
                    if c.statistic is None
                    else f"{c.statistic.measure} {c.statistic.of} of: {c.description()}",
                ]
                for c in ucells
            ]
            console.print(table(key, ["cell", "table", "line", f"{pop.noun} counted"], rows))
            return
        cells = [person]
    else:
        cells = TABLES_BY_NAME[key].cells()
    cols = ["cell", "level", "sex", "age", "race", "hispanic", "measure", "description"]
    rows = [
        [
            c.id,
            c.level,
            c.sex,
            f"{c.age_min}-{c.age_max}",
            c.race,
            c.hispanic,
            c.measure,
            c.description(),
        ]
        for c in cells
    ]
    console.print(table(key, cols, rows))


@app.command("check-tables")
def check_tables(
    tables_file: Annotated[Path, typer.Argument(help="Long table file (geoid, cell, value)")],
    limit: Annotated[int, typer.Option(help="Print at most this many violations")] = 20,
    schema: SchemaName = "persons",
) -> None:
    """Validate a table file and check every identity between its cells (persons: block and
    tract identities, race tallies; other populations: identities derived from their tables'
    declarations); exit 1 on any violation."""
    from ...tables.consistency import check_release
    from ...tables.declaration import population
    from ...tables.reader import read_unit_tables

    pop = population(schema)
    at_least(0, limit=limit)
    ts = read_unit_tables(tables_file, pop)
    say_skipped(ts, tables_file)
    rep = check_release(ts, pop)
    console.print(
        f"{tables_file}: {rep.checked:,} identity checks, {rep.skipped:,} skipped (cells not "
        "published)"
    )
    if rep.ok:
        console.print("[green]consistent[/green]: every identity holds")
        return
    for v in rep.violations[:limit]:
        console.print(f"[red]violated[/red] {v}")
    if len(rep.violations) > limit:
        console.print(f"... and {len(rep.violations) - limit} more")
    raise typer.Exit(1)


@app.command("check-households")
def check_households(
    persons: Annotated[Path, typer.Argument(help="Person file with household_id (relationship)")],
    units: Annotated[Path, typer.Argument(help="Housing-unit file with unit_id")],
) -> None:
    """Check that a person file and a housing-unit file describe the same households (exit 2
    naming the file, line and column of the first disagreement and how many rows share it)."""
    from ...records.households import check_households as _check
    from ...schema import read_microdata
    from ...schema.catalog import HOUSING_UNITS
    from ...schema.spec import read_units

    md = read_microdata(persons)
    hu = read_units(units, HOUSING_UNITS)
    n = _check(md, hu)
    console.print(
        f"[green]consistent[/green]: {len(md):,} persons in {n:,} occupied units "
        f"({len(hu) - n:,} vacant) of {len(set(hu.block_geoid.tolist())):,} blocks"
    )


@app.command()
def download(
    state: Annotated[str, typer.Option(help="2-digit state FIPS code, e.g. 39")],
    county: Annotated[str, typer.Option(help="3-digit county FIPS code, e.g. 059")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Long table file to write (.parquet or .csv[.gz]; default tables.parquet); "
            "with --shapes, the zip to write (default: the Bureau's file name)",
        ),
        Writes(parts=True),
    ] = None,
    tables: Annotated[
        str, typer.Option(help="'published' (the 34 tables and P3-P5), 'all' or a comma list")
    ] = "published",
    key: Annotated[str | None, typer.Option(help="Census API key (or env CENSUS_API_KEY)")] = None,
    year: Annotated[int, typer.Option(help="2010 (SF1) or 2020 (DHC, the DP release)")] = 2010,
    api: Annotated[str | None, typer.Option(help="API endpoint (default: the year's)")] = None,
    fresh: Fresh = False,
    schema: SchemaName = "persons",
    release: Annotated[
        str | None,
        typer.Option(
            "--release",
            help="dhc-2020: the 2020 DHC's own tables over --schema (households: H4A-V, P16A-V, "
            "...; group quarters: P18), under the DHC's names (implies --year 2020)",
        ),
    ] = None,
    shapes: Annotated[
        bool,
        typer.Option(
            "--shapes",
            help="Fetch the county's TIGER/Line block shapes instead of its tables "
            "(tl_2010_SSCCC_tabblock10.zip; 2020: tabblock20), for audit --shapes",
        ),
    ] = False,
    shapes_url: Annotated[
        str | None,
        typer.Option(help="With --shapes: the file's address (default: the Bureau's)"),
    ] = None,
    retries: Annotated[
        int,
        typer.Option(
            help="Times a request that found no answer (refused, reset, timed out, HTTP 429 or "
            "5xx) is sent again, waiting 1, 2, 4, ... s between; then the run stops with exit "
            "75 and keeps the finished tracts"
        ),
    ] = 4,
) -> None:
    """Fetch a county's published block and tract tables (2010 SF1 or 2020 DHC) from the Census
    API, tract by tract (resumable), into one long table file; with another ``--schema``, that
    population's SF1 2010 tables (households: the 64 household tables); with ``--shapes``, the
    county's block shapes for the report's maps."""
    import os

    from ...tables.download import download as _download

    t0 = time.perf_counter()
    at_least(0, retries=retries)
    if release is not None:
        one_of(release, Release.choices(), "--release")
    if shapes:
        from ...tables.download import download_shapes

        given = [o for o, v in (("--api", api), ("--key", key)) if v is not None]
        if given or tables != "published" or schema != "persons":
            raise TabreconError(
                "--shapes fetches the block shapes alone: leave out --api, --key, --tables "
                "and --schema"
            )
        path = download_shapes(state, county, out, year, shapes_url, retries=retries)
        console.print(f"written {path} ({time.perf_counter() - t0:.1f} s)")
        return
    if shapes_url is not None:
        raise TabreconError("--shapes-url is the address of --shapes; give --shapes too")
    out = out if out is not None else Path("tables.parquet")
    api_key = key or os.environ.get("CENSUS_API_KEY")

    def tick(st: dict) -> None:
        err.print(f"[dim]tract {st['unit']}: {st['status']}[/dim]")

    path = _download(
        state,
        county,
        out,
        tables,
        api_key,
        api,
        year,
        retries=retries,
        resume=not fresh,
        progress=tick,
        schema=schema,
        release=release,
    )
    console.print(f"written {path} ({time.perf_counter() - t0:.1f} s)")
