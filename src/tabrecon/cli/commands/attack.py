"""Commands that attack a release: ``reconstruct``, ``agree``, ``solvar``, ``reidentify``
(``claims``: :mod:`tabrecon.cli.commands.claims`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from ... import vocab
from ...errors import TabreconError
from ...io import Reads, Writes, check_suffix
from ...runner import RunOptions
from ...tables.publication import EXACT, Publication
from ..terminal import (
    FolderOut,
    Fresh,
    Level,
    PublicationRule,
    ReconOpt,
    ReleaseName,
    SchemaName,
    Solver,
    TablesArg,
    Threads,
    TimeLimit,
    Workers,
    at_least,
    console,
    err,
    frame_table,
    one_of,
    pct1,
    positive_finite,
    progress,
    publication_rule,
    read_blocks,
    released,
    say_skipped,
    solver_options,
    table,
)

if TYPE_CHECKING:
    import polars as pl

    from ...engine.solvers import SolverOptions
    from ...schema.registry import Population
    from ...tables.tableset import TableSet

app = typer.Typer()
RECON_LEVELS = vocab.Level.choices()


@app.command()
def reconstruct(
    tables_file: TablesArg,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Records to write (.parquet, .csv, .csv.gz); also "
            "OUT's stem + _blocks.csv, each block's verdict",
        ),
        Writes(parts=True, beside=("_blocks.csv",)),
    ] = Path("recon.parquet"),
    level: Annotated[
        str,
        typer.Option(
            help="Tables the attacker uses: 'block' or 'block+tract' (default: block+tract where "
            "the population has tract tables and the counts are exact, else block)"
        ),
    ] = "",
    solver: Solver = "auto",
    threads: Threads = 1,
    time_limit: TimeLimit = 300.0,
    seed: Annotated[int, typer.Option(help="Solver random seed")] = 0,
    workers: Workers = 1,
    fresh: Fresh = False,
    schema: SchemaName = "persons",
    release: ReleaseName = "sf1-2010",
    distance: Annotated[
        bool,
        typer.Option(
            "--distance",
            help="Each block that varies also gets its solution variability (solvar, percent "
            "of its records, at the resolution its uniqueness is asked: persons by agebin38)",
        ),
    ] = False,
    together: Annotated[
        Path | None,
        typer.Option(
            "--with",
            help="The tables of the population --schema's records tie to, in the same blocks "
            "(households: the person tables, long/wide file, SF1 folder or a ZIP): both "
            "reconstructed together, every householder a person of the block; also writes OUT's "
            "stem + _persons",
            metavar="TABLES",
        ),
    ] = None,
    publication: PublicationRule = "declared",
    verdicts: Annotated[
        bool,
        typer.Option(
            "--verdicts/--no-verdicts",
            help="Prove each block's verdict (unique or varies; the default). --no-verdicts "
            "writes the records alone, each block's verdict 'unknown'",
        ),
    ] = True,
) -> None:
    """Rebuild records from published tables, tract by tract (written as each finishes), with
    each block's verdict (unique or varies); with ``--with``, housing units and persons of each
    block together."""
    pop = released(schema, release)
    pub = publication_rule(pop, publication)
    if distance and not verdicts:
        raise TabreconError(
            "--distance measures how far blocks that vary can differ: it needs the verdicts "
            "(leave out --no-verdicts)"
        )
    if together is not None:
        refuse_untied(pop)
        for flag, given in (
            ("--level", level not in ("", vocab.Level.BLOCK)),
            ("--distance", distance),
            ("--no-verdicts", not verdicts),
            (f"--publication {pub}", not pub.exact),
        ):
            if given:
                raise TabreconError(
                    f"{flag}: not an option of a reconstruction --with (block tables)"
                )
        opts = solver_options(solver, threads, time_limit, seed, workers)
        _reconstruct_together(pop, tables_file, together, out, opts, workers, fresh)
        return
    opts = solver_options(solver, threads, time_limit, seed, workers)
    # inexact cells are modelled at block level only so far: the level a rule allows
    level = level or (pop.default_level if pub.exact else vocab.Level.BLOCK)
    _reconstruct_release(
        pop,
        tables_file,
        out,
        level=level,
        solver=opts,
        workers=workers,
        fresh=fresh,
        distance=distance,
        publication=pub,
        verdicts=verdicts,
    )


def release_tables(
    pop: Population, tables_file: Path, publication: Publication = EXACT
) -> TableSet:
    """A population's published tables from a long or wide file or an SF1 folder (withheld
    cells read as such where the publication rule withholds some), checked against the rule."""
    from ...tables.reader import read_unit_tables
    from ...tables.spec import cell_tables

    tables = read_unit_tables(tables_file, pop, withheld=publication.withholds)
    say_skipped(tables, tables_file)
    publication.check(
        tables.to_frame(),
        str(tables_file),
        table_of=cell_tables(pop),
        place=pop.schema.geography,
    )
    return tables


def _reconstruct_release(
    pop: Population,
    tables_file: Path,
    out: Path,
    *,
    level: str,
    solver: SolverOptions,
    workers: int,
    fresh: bool,
    distance: bool,
    publication: Publication = EXACT,
    verdicts: bool = True,
) -> None:
    """``tabrecon reconstruct``, one path for every population: every tract with the runner
    (resume, workers, Dask, progress), the records and each block's verdict written as the
    population writes them; exit 1 naming each block whose tables admit no records and each
    tract that failed, with the cells to blame where its tables contradict."""
    import polars as pl

    from ...attacks.release import reconstruct

    one_of(level, RECON_LEVELS, "--level")
    check_suffix(out)
    tables = release_tables(pop, tables_file, publication)
    prog, tick = progress(len(tables.tracts()), f"{pop.name} reconstruct")
    with prog:
        done = reconstruct(
            tables,
            level,
            solver,
            population=pop,
            run=RunOptions(workers=workers, out=out, resume=not fresh, progress=tick),
            certify=verdicts,
            distance=distance,
            publication=publication,
        )
    run, paths = done.release, done.written
    console.print("\n".join(run.summary_lines()))
    console.print(f"written {', '.join(map(str, paths))}")
    bad = run.blocks.filter(pl.col("status").is_in(["infeasible", "failed"]))
    place = pop.schema.geography
    why = {
        "infeasible": "its tables contradict each other (under --publication "
        f"{publication}: no {pop.noun} fit them)",
        "failed": "no solution within the time limit",
    }
    for r in bad.head(20).iter_rows(named=True):
        err.print(f"[red]{place} {r['geoid']}:[/red] {r['status']}: {why[r['status']]}")
    if bad.height > 20:
        err.print(f"[red]... and {bad.height - 20:,} more {place}s[/red] (see {paths[-1]})")
    for line in run.failure_lines():
        err.print(escape(line))
    if run.failed:
        raise typer.Exit(1)


def refuse_untied(pop: Population) -> None:
    """``--with`` for a population that declares no ties: refused, naming those that do."""
    from ...schema.registry import names
    from ...tables.declaration import population

    if pop.tied is None:
        tied = [n for n in names() if population(n).tied is not None]
        raise TabreconError(
            f"--with: the {pop.name} records declare no ties to another population's "
            f"(--with works with --schema {', '.join(tied)})"
        )


def tied_tables(pop: Population, path: Path) -> pl.DataFrame:
    """The ``--with`` file: the tables of the population ``pop``'s records tie to; a file of
    other tables is named as such (not by the internal schema that reads it)."""
    from ...errors import InputError
    from ...tables.declaration import population
    from ...tables.reader import read_unit_tables

    assert pop.tied is not None
    other = population(pop.tied.other)
    try:
        return read_unit_tables(path, other).own_levels().to_frame()
    except InputError as exc:
        if "holds no cells of the" not in str(exc):
            raise
        first = ", ".join(t.name for t in other.tables()[:4])
        raise InputError(
            f"--with needs the {pop.tied.known_as} tables of the same blocks ({first}, ...); "
            "this file holds none",
            path=str(path),
        ) from None


def _reconstruct_together(
    pop: Population,
    tables_file: Path,
    together: Path,
    out: Path,
    solver: SolverOptions,
    workers: int,
    fresh: bool,
) -> None:
    """``tabrecon reconstruct --schema NAME --with TABLES``: both populations of every block
    together, tract by tract with the runner; exit 1 naming each block whose two releases admit
    no common population (and the ties that cannot hold) after the other blocks are written."""
    from ...attacks.joint import reconstruct_release_together, write_together

    check_suffix(out)
    assert pop.tied is not None
    # one SF1 folder holding both halves may be given twice: each reader takes its cells
    long_a = release_tables(pop, tables_file).own_levels().to_frame()
    long_b = tied_tables(pop, together)
    n = long_a["geoid"].str.slice(0, 11).n_unique()
    prog, tick = progress(n, f"{pop.name} and {pop.tied.known_as} reconstruct")
    with prog:
        run = reconstruct_release_together(
            long_a,
            long_b,
            pop,
            solver,
            run=RunOptions(workers=workers, out=out, resume=not fresh, progress=tick),
        )
    paths = write_together(run.rec, out)
    console.print("\n".join(run.summary_lines()))
    console.print(f"written {', '.join(map(str, paths))}")
    bad = run.bad_blocks
    for r in bad.head(20).iter_rows(named=True):
        err.print(f"[red]block {r['geoid']}:[/red] {r['status']}: {escape(r['message'] or '')}")
    if bad.height > 20:
        err.print(f"... and {bad.height - 20} more blocks (see {paths[-1]})")
    for r in run.failed:
        err.print(f"[red]tract {r['unit']}: {r['status']}[/red] -- {escape(r.get('message', ''))}")
    if run.failed or bad.height:
        raise typer.Exit(1)


@app.command()
def agree(
    left: Annotated[Path, typer.Argument(help="Reference person file (truth, CEF or HDF)")],
    right: Annotated[
        Path, typer.Argument(help="Person file compared with it (e.g. a reconstruction)")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the Table 3-style rows as CSV"),
        Writes(beside=("_by_bin.csv",)),
    ] = None,
) -> None:
    """Agreement of two person files within blocks (exact age, then age bin), as in Abowd et al.
    Table 3."""
    from ...metrics.agreement import agree as _agree
    from ...schema import read_microdata

    if out is not None:
        check_suffix(out, (".csv",))
    a = _agree(read_microdata(right), truth=read_microdata(left))
    rows = [
        [r["bin"], r["blocks"], r["persons"], pct1(r["exact_pct"]), pct1(r["binned_pct"])]
        for r in a.by_bin.iter_rows(named=True)
    ]
    rows.append(
        [
            "all",
            int(a.by_bin["blocks"].sum()),
            a.population,
            pct1(a.exact_pct),
            pct1(a.binned_pct),
        ]
    )
    console.print(f"binned pass compares on: {a.resolution}")
    title = f"agreement of {right.name} with {left.name} (% of {left.name} persons)"
    console.print(table(title, ["bin", "blocks", "persons", "exact %", "binned %"], rows))
    if out is not None:
        console.print(f"written {', '.join(map(str, a.write(out, f'{right.name}-{left.name}')))}")


@app.command()
def solvar(
    tables_file: TablesArg,
    recon: ReconOpt,
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Per-block results (.parquet or .csv)"),
        Writes(
            beside=("_table_s4.csv", "_zero_by_size.csv", "_flags.parquet", "_summary.md"),
            parts=True,
        ),
    ] = Path("solvar.parquet"),
    level: Level = "block+tract",
    distance: Annotated[
        bool,
        typer.Option(
            help="Maximise the distance for blocks that can differ (else only the zero test)"
        ),
    ] = True,
    solver: Solver = "auto",
    threads: Threads = 1,
    time_limit: Annotated[
        float,
        typer.Option(help="Time limit per solver call, seconds (bounds are reported on time-out)"),
    ] = 120.0,
    distance_time_limit: Annotated[
        float,
        typer.Option(
            help="Seconds per block's distance maximisation, bounds kept on time-out (0: as "
            "--time-limit)"
        ),
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Solver random seed")] = 0,
    workers: Workers = 1,
    fresh: Fresh = False,
    schema: SchemaName = "persons",
) -> None:
    """Certify a reconstruction: solution variability per block, uniqueness flags (persons),
    Table S4."""
    from ...attacks.certify import certify_release, solvar_table
    from ...tables.declaration import population
    from ...tables.reader import read_unit_tables

    pop = population(schema)
    one_of(level, RECON_LEVELS, "--level")
    opts = solver_options(solver, threads, time_limit, seed, workers)
    if distance_time_limit:
        positive_finite(distance_time_limit=distance_time_limit)
    check_suffix(out, (".parquet", ".csv"))
    ts, rec = read_unit_tables(tables_file, pop), pop.records(recon)
    prog, tick = progress(len(ts.tracts()), "certify")
    with prog:
        run = certify_release(
            ts,
            pop,
            rec,
            level,
            opts,
            run=RunOptions(workers=workers, out=out, resume=not fresh, progress=tick),
            distance=distance,
            distance_time_limit=distance_time_limit or None,
        )
    for r in run.failed:
        err.print(f"[red]tract {r['unit']}: {r['status']}[/red] -- {escape(r.get('message', ''))}")
    if not run.blocks.height:
        raise TabreconError("no tract could be certified")
    paths = run.write(out)
    cols = {
        "solvar_at_most_pct": "<= %",
        "blocks": "blocks",
        "persons": "persons",
        "cum_blocks_pct": "cum blocks %",
        "cum_persons_pct": "cum persons %",
        "unproven_blocks": "unproven",
    }
    console.print(
        frame_table("cumulative solvar (Table S4 layout)", solvar_table(run.blocks), cols)
    )
    console.print("\n".join(run.summary_lines()))
    console.print(f"written {', '.join(map(str, paths))}")
    if run.failed:
        raise typer.Exit(1)


@app.command()
def reidentify(
    recon: Annotated[
        Path, typer.Option("--recon", "-r", help="Reconstruction (person file): the race source")
    ],
    truth: Annotated[
        Path,
        typer.Option("--truth", "-t", help="Confidential truth (person file) to confirm against"),
    ],
    attacker: Annotated[
        str,
        typer.Option(
            help="'perfect', 'commercial', 'commercial-2010' (fitted to the Bureau's COMRCL "
            "rates), or an attacker file (pik, block_geoid, sex, age)"
        ),
        Reads(),
    ] = "perfect",
    out: FolderOut = Path("reid"),
    tables_file: Annotated[
        Path | None,
        typer.Option(
            "--tables", help="Published tables for MDG/PRG (default: tabulated from --truth)"
        ),
    ] = None,
    solvar_file: Annotated[
        Path | None,
        typer.Option(
            "--solvar", help="Per-block `tabrecon solvar` output (marks certified blocks)"
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of the attacker simulation, tie-breaking and PRG draws")
    ] = 0,
    francis_threshold: Annotated[int, typer.Option(help="Francis' minimum majority count")] = 5,
) -> None:
    """Link a reconstruction to attacker data; precision beside MDG, PRG, truth and Ruggles-Van
    Riper."""
    from ...attacks.reidentify import reidentify as _reid
    from ...report.reid import write_reid_report
    from ...schema import read_microdata
    from ...tables.published import read_tables

    at_least(1, francis_threshold=francis_threshold)
    from ...attacks.attacker import ATTACKER_PRESETS

    if attacker not in ATTACKER_PRESETS and not Path(attacker).exists():
        raise TabreconError(
            f"--attacker: {attacker!r} is neither one of {', '.join(ATTACKER_PRESETS)} nor an "
            "existing file"
        )
    ts = read_tables(tables_file) if tables_file is not None else None
    cert = read_blocks(solvar_file) if solvar_file is not None else None
    res = _reid(
        read_microdata(recon),
        read_microdata(truth),
        attacker,
        tables=ts,
        cert_blocks=cert,
        seed=seed,
        francis_threshold=francis_threshold,
    )
    how = f"tabrecon reidentify --recon {recon} --truth {truth} --attacker {attacker} --seed {seed}"
    summ = write_reid_report(res, out, how + (f" --solvar {solvar_file}" if solvar_file else ""))
    for line in res.attacker_report.lines():
        err.print(f"[yellow]attacker data:[/yellow] {escape(str(line))}")
    keys = ("attacker_records", "putative", "confirmed")
    rows = [
        [
            g,
            s,
            *(summ[s][g][k] for k in keys),
            "n/a" if summ[s][g]["precision_pct"] is None else f"{summ[s][g]['precision_pct']:.1f}",
        ]
        for g in ("all", "nonmodal", "certified_uniques")
        for s in ("attack", "mdg", "prg", "truth")
    ]
    cols = ["group", "source", "attacker records", "putative", "confirmed", "precision %"]
    console.print(table("reidentification (precision = confirmed / putative)", cols, rows))
    console.print(f"report written to {out}/report.md")
    if not summ["attack"]["all"]["putative"]:  # every precision is n/a: nothing was measured
        err.print(
            "[yellow]no attacker record could be linked: the attacker data and the release share "
            "no block, sex and age, so no precision was measured (exit 1)[/yellow]"
        )
        raise typer.Exit(1)
