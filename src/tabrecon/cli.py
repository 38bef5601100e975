"""Command-line interface: a thin layer over the Python API. Input errors print one line and exit
2."""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .errors import TabreconError
from .schema import check_suffix

app = typer.Typer(
    name="tabrecon",
    help="What published statistical tables give away about the people behind them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tables_app = typer.Typer(
    help="Browse the table specifications (SF1 cells as predicates).", no_args_is_help=True
)
app.add_typer(tables_app, name="tables")
console = Console(stderr=False)
FRESH_HELP = (
    "Start over: discard what an earlier run left in the output. Without it a rerun resumes, "
    "and refuses (exit 2) when the earlier run had other inputs or options"
)
err = Console(stderr=True, soft_wrap=True)  # an error is one line, never wrapped


def _table(title: str, columns: list[str], rows: list[list[object]]) -> Table:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(
            c,
            justify="right"
            if c not in ("figure", "cell", "table", "description", "bin")
            else "left",
        )
    for r in rows:
        t.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in r])
    return t


@app.command()
def synth(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Person file to write (.csv, .csv.gz, .parquet)")
    ] = Path("synthetic_county.csv.gz"),
    persons: Annotated[int, typer.Option(help="Approximate number of persons")] = 20_000,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same county)")] = 0,
    state: Annotated[str, typer.Option(help="2-digit state code of the geoids")] = "99",
    county: Annotated[str, typer.Option(help="3-digit county code of the geoids")] = "001",
) -> None:
    """Write a realistic synthetic county and print its calibration against 2010 figures."""
    from .schema import write_microdata
    from .synth import SynthConfig, calibration, synthesize

    if persons <= 0:
        raise TabreconError(f"--persons must be positive (got {persons})")
    if not (state.isdigit() and len(state) == 2 and county.isdigit() and len(county) == 3):
        raise TabreconError("--state must be 2 digits and --county 3 digits")
    check_suffix(out)
    t0 = time.perf_counter()
    md = synthesize(SynthConfig(persons=persons, state=state, county=county), seed=seed)
    write_microdata(md, out)
    n_tracts = len({g[:11] for g in md.geoids})
    console.print(
        f"wrote {len(md):,} persons in {len(md.geoids):,} blocks, {n_tracts} tracts to {out} "
        f"({time.perf_counter() - t0:.1f} s, seed {seed})"
    )
    console.print(
        _table(
            "calibration (measured vs 2010 target)",
            ["figure", "measured", "target"],
            [list(r) for r in calibration(md)],
        )
    )


@app.command()
def tabulate(
    microdata: Annotated[Path, typer.Argument(help="Person file (CSV, CSV.gz or Parquet)")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Long table to write (.parquet or .csv[.gz])")
    ] = Path("tables.parquet"),
    tables: Annotated[
        str, typer.Option(help="'all', 'block', 'tract' or a comma list such as P1,P12,PCT12")
    ] = "all",
    level: Annotated[
        str | None,
        typer.Option(
            help="Tabulate every table at this level (state, county, tract, blockgroup, block)"
        ),
    ] = None,
) -> None:
    """Tabulate person records into the SF1 person tables (long format: geoid, cell, value)."""
    from .schema import read_microdata
    from .tables import tabulate as _tab
    from .tables import write_tables

    t0 = time.perf_counter()
    check_suffix(out)
    md = read_microdata(microdata)
    t1 = time.perf_counter()
    ts = _tab(md, tables, level=level)
    t2 = time.perf_counter()
    write_tables(ts, out)
    n = sum(g.values.size for g in ts.grids.values())
    parts = ", ".join(
        f"{g.values.shape[0]:,} {lvl}s x {g.values.shape[1]} cells" for lvl, g in ts.grids.items()
    )
    console.print(f"{len(md):,} persons -> {n:,} values ({parts}) -> {out}")
    console.print(
        f"read {t1 - t0:.2f} s, tabulate {t2 - t1:.2f} s, write {time.perf_counter() - t2:.2f} s"
    )


@tables_app.command("list")
def tables_list() -> None:
    """List the 34 SF1 person tables with their level, universe and number of cells."""
    from .tables import SF1_TABLES

    rows = []
    for t in SF1_TABLES:
        cells = t.cells()
        rows.append([t.name, t.level, len(cells), t.title, cells[0].description()])
    console.print(
        _table("SF1 person tables", ["table", "level", "cells", "title", "universe (line 1)"], rows)
    )


@tables_app.command("describe")
def tables_describe(
    name: Annotated[str, typer.Argument(help="A table (P12A) or a cell id (P0120003)")],
) -> None:
    """Show the definition of a table's cells or of one cell."""
    from .tables import TABLES_BY_NAME, get_cell

    key = name.upper()
    if key in TABLES_BY_NAME:
        cells = TABLES_BY_NAME[key].cells()
    else:
        cells = [get_cell(key)]
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
    console.print(
        _table(
            key, ["cell", "level", "sex", "age", "race", "hispanic", "measure", "description"], rows
        )
    )


@app.command("check-tables")
def check_tables(
    tables_file: Annotated[Path, typer.Argument(help="Long table file (geoid, cell, value)")],
    limit: Annotated[int, typer.Option(help="Print at most this many violations")] = 20,
) -> None:
    """Validate a table file and check every identity between its cells; exit 1 on any violation."""
    from .tables import check_consistency, read_tables

    _at_least(0, limit=limit)
    ts = read_tables(tables_file)
    rep = check_consistency(ts)
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


def _at_least(low: int, **options: int) -> None:
    """Refuse (before any work) a count option below ``low``; keys are option names."""
    for name, v in options.items():
        if v < low:
            raise TabreconError(f"--{name.replace('_', '-')} must be >= {low} (got {v})")


def _positive_finite(**options: float) -> None:
    """Refuse (before any work) a time, budget or rate that is not a finite number > 0."""
    for name, v in options.items():
        if not (math.isfinite(v) and v > 0):
            raise TabreconError(f"--{name.replace('_', '-')} must be a finite number > 0 (got {v})")


def _solver_opts(solver: str, threads: int, time_limit: float, seed: int, workers: int = 1):
    from .attacks.solvers import BACKENDS, SolverOptions

    if solver not in BACKENDS:
        raise TabreconError(f"--solver must be one of {', '.join(BACKENDS)} (got {solver!r})")
    _at_least(1, threads=threads, workers=workers)
    _positive_finite(time_limit=time_limit)
    return SolverOptions(backend=solver, threads=threads, time_limit=time_limit, seed=seed)


def _progress(total: int, label: str):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    prog = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    )
    task = prog.add_task(label, total=total, last="")
    return prog, task


@app.command()
def reconstruct(
    tables_file: Annotated[
        Path, typer.Argument(help="Published tables (long format: geoid, cell, value)")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Person file to write (.parquet, .csv, .csv.gz)")
    ] = Path("recon.parquet"),
    level: Annotated[
        str, typer.Option(help="'block' (block tables only) or 'block+tract'")
    ] = "block+tract",
    solver: Annotated[str, typer.Option(help="cpsat or highs")] = "cpsat",
    threads: Annotated[int, typer.Option(help="Solver threads per tract")] = 1,
    time_limit: Annotated[float, typer.Option(help="Solver time limit per model, seconds")] = 300.0,
    seed: Annotated[int, typer.Option(help="Solver random seed")] = 0,
    workers: Annotated[int, typer.Option(help="Tracts solved in parallel (processes)")] = 1,
    strategy: Annotated[
        str, typer.Option(help="staged (binned model, then ages) or full (single-age model)")
    ] = "staged",
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """Rebuild person records from published tables, tract by tract (written as each finishes)."""
    from .attacks.reconstruct import LEVELS
    from .attacks.reconstruct import reconstruct as _recon
    from .tables import read_tables

    if level not in LEVELS:
        raise TabreconError(f"--level must be 'block' or 'block+tract' (got {level!r})")
    if strategy not in ("staged", "full"):
        raise TabreconError(f"--strategy must be 'staged' or 'full' (got {strategy!r})")
    opts = _solver_opts(solver, threads, time_limit, seed, workers)
    check_suffix(out)
    ts = read_tables(tables_file)
    tracts = ts.tracts()
    console.print(
        f"{tables_file}: {len(tracts)} tracts; tables present: {', '.join(ts.tables_present())}"
    )
    t0 = time.perf_counter()
    prog, task = _progress(len(tracts), "reconstruct")
    with prog:
        run = _recon(
            ts,
            level,
            opts,
            workers=workers,
            out=out,
            resume=not fresh,
            strategy=strategy,
            progress=lambda r: prog.update(task, advance=1, last=f"{r['unit']} {r['status']}"),
        )
    el = time.perf_counter() - t0
    ok = [r for r in run.results if r.status == "ok"]
    console.print(
        f"{len(run.records):,} persons from {len(ok)}/{len(run.results)} tracts ({level}, "
        f"{solver}) "
        f"in {el:.1f} s -> {out}; per-tract status in {out}.parts/status.jsonl"
    )
    console.print(f"tables used: {', '.join(run.tables_used)}")
    if run.records.age_exact is not None and len(run.records):
        inexact = int((~run.records.age_exact).sum())
        if inexact:
            console.print(
                f"{inexact:,} records have an age the tables determine only to a range "
                "(age = its first year, age_max = its last, age_exact = 0)"
            )
    if run.failed:
        for r in run.failed:
            err.print(f"[red]tract {r.tract}: {r.status}[/red] -- {r.message}")
            for c in r.conflicts:
                err.print(
                    f"    {c['geoid']} {c['cell']} published {c['published']}, adjust by "
                    f"{c['adjust']:+d}: {c['reason']}"
                )
        err.print(f"{len(run.failed)} tract(s) failed; the others were written")
        raise typer.Exit(1)


@app.command()
def agree(
    left: Annotated[Path, typer.Argument(help="Reference person file (truth, CEF or HDF)")],
    right: Annotated[
        Path, typer.Argument(help="Person file compared with it (e.g. a reconstruction)")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the Table 3-style rows as CSV")
    ] = None,
) -> None:
    """Agreement of two person files within blocks (exact age, then age bin), as in Abowd et al.
    Table 3."""
    from .metrics.agreement import agree as _agree
    from .schema import read_microdata

    if out is not None:
        check_suffix(out, (".csv",))
    a = _agree(read_microdata(left), read_microdata(right))
    rows = [
        [r["bin"], r["blocks"], r["persons"], f"{r['exact_pct']:.1f}", f"{r['binned_pct']:.1f}"]
        for r in a.by_bin.iter_rows(named=True)
    ]
    rows.append(
        [
            "all",
            int(a.by_bin["blocks"].sum()),
            a.population,
            f"{a.exact_pct:.1f}",
            f"{a.binned_pct:.1f}",
        ]
    )
    console.print(f"binned pass compares on: {a.resolution}")
    console.print(
        _table(
            f"agreement of {right.name} with {left.name} (% of {left.name} persons)",
            ["bin", "blocks", "persons", "exact %", "binned %"],
            rows,
        )
    )
    if out is not None:
        a.table3(f"{right.name}-{left.name}").write_csv(out)
        a.by_bin.write_csv(Path(str(out).replace(".csv", "") + "_by_bin.csv"))
        console.print(f"written {out}")


@app.command()
def solvar(
    tables_file: Annotated[Path, typer.Argument(help="Published tables (long format)")],
    recon: Annotated[
        Path, typer.Option("--recon", "-r", help="Reconstruction to certify (person file)")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Per-block results (.parquet or .csv)")
    ] = Path("solvar.parquet"),
    level: Annotated[
        str, typer.Option(help="Tables the attacker uses: 'block' or 'block+tract'")
    ] = "block+tract",
    distance: Annotated[
        bool,
        typer.Option(
            help="Maximise the distance for blocks that can differ (else only the zero test)"
        ),
    ] = True,
    solver: Annotated[str, typer.Option(help="cpsat or highs")] = "cpsat",
    threads: Annotated[int, typer.Option(help="Solver threads")] = 1,
    time_limit: Annotated[
        float,
        typer.Option(help="Time limit per solver call, seconds (bounds are reported on time-out)"),
    ] = 120.0,
    seed: Annotated[int, typer.Option(help="Solver random seed")] = 0,
    workers: Annotated[int, typer.Option(help="Tracts certified in parallel")] = 1,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """Certify a reconstruction: solution variability per block, uniqueness flags, Table S4."""
    from .attacks.certify import (
        certify,
        cumulative_solvar,
        solvar_table,
        uniqueness_flags,
        zero_share_by_size,
    )
    from .attacks.reconstruct import LEVELS
    from .schema import read_microdata
    from .tables import read_tables

    if level not in LEVELS:
        raise TabreconError(f"--level must be 'block' or 'block+tract' (got {level!r})")
    opts = _solver_opts(solver, threads, time_limit, seed, workers)
    check_suffix(out, (".parquet", ".csv"))
    ts = read_tables(tables_file)
    rec = read_microdata(recon)
    t0 = time.perf_counter()
    prog, task = _progress(len(ts.tracts()), "certify")
    with prog:
        run = certify(
            ts,
            rec,
            level,
            opts,
            workers=workers,
            out=out,
            resume=not fresh,
            distance=distance,
            progress=lambda r: prog.update(task, advance=1, last=f"{r['unit']} {r['status']}"),
        )
    el = time.perf_counter() - t0
    for r in run.failed:
        err.print(f"[red]tract {r['unit']}: {r['status']}[/red] -- {r.get('message', '')}")
    if not run.blocks.height:
        raise TabreconError("no tract could be certified")
    stem = str(out).rsplit(".", 1)[0]
    s4 = solvar_table(run.blocks)
    s4.write_csv(f"{stem}_table_s4.csv")
    zs = zero_share_by_size(run.blocks)
    zs.write_csv(f"{stem}_zero_by_size.csv")
    flags = uniqueness_flags(rec, run.blocks)
    flags.write_parquet(f"{stem}_flags.parquet")
    lo, hi = cumulative_solvar(run.blocks)
    b = run.blocks
    n_unique = int((b["status"] == "unique").sum())
    cert_uniques = int((flags["certified"] & (flags["bsaber_unique"] == 1)).sum())
    lines = [
        f"# Solution variability ({level} tables)",
        "",
        f"- blocks: {b.height:,}; proven unique (solvar 0): {n_unique:,} "
        f"({100 * n_unique / b.height:.1f}%), "
        f"holding {int(b.filter(b['status'] == 'unique')['persons'].sum()):,} of "
        f"{int(b['persons'].sum()):,} persons",
        f"- blocks that can differ: {int((b['status'] == 'varies').sum()):,}; undecided "
        f"(time-out): {int((b['status'] == 'undecided').sum()):,}",
        f"- cumulative solvar: {lo:.2f}%"
        + (f" to {hi:.2f}% (unproven blocks)" if hi > lo + 1e-9 else ""),
        f"- records unique in their block on (sex, agebin): {int(flags['bsab_unique'].sum()):,}; "
        "on (sex, agebin, race, ethnicity): "
        f"{int(flags['bsaber_unique'].sum()):,}; of those in certified blocks (known population "
        f"uniques): {cert_uniques:,}",
        f"- {len(run.failed)} tract(s) failed; time {el:.1f} s",
        "",
        "Measured by `tabrecon solvar` (zero test: one infeasibility proof per tract; distance: "
        "maximum of"
        " sum (x* - x)^+ per block over all tables).",
    ]
    Path(f"{stem}_summary.md").write_text("\n".join(lines) + "\n")
    console.print(
        _table(
            "cumulative solvar (Table S4 layout)",
            ["<= %", "blocks", "persons", "cum blocks %", "cum persons %", "unproven"],
            [
                [
                    r["solvar_at_most_pct"],
                    r["blocks"],
                    r["persons"],
                    f"{r['cum_blocks_pct']:.2f}",
                    f"{r['cum_persons_pct']:.2f}",
                    r["unproven_blocks"],
                ]
                for r in s4.iter_rows(named=True)
            ],
        )
    )
    console.print("\n".join(lines[2:7]))
    console.print(
        f"written {out}, {stem}_table_s4.csv, {stem}_zero_by_size.csv, {stem}_flags.parquet, "
        f"{stem}_summary.md"
    )
    if run.failed:
        raise typer.Exit(1)


@app.command()
def claims(
    tables_file: Annotated[Path, typer.Argument(help="Published tables (long format)")],
    recon: Annotated[Path, typer.Option("--recon", "-r", help="Reconstruction (person file)")],
    solvar_file: Annotated[
        Path,
        typer.Option(
            "--solvar", "-s", help="Per-block output of `tabrecon solvar` for this reconstruction"
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder")] = Path("claims"),
    level: Annotated[
        str, typer.Option(help="Tables the attacker uses: 'block' or 'block+tract'")
    ] = "block",
    k_solutions: Annotated[
        int,
        typer.Option(
            "--k-solutions", "-K", help="Diverse solutions whose common claims are candidates"
        ),
    ] = 100,
    solver: Annotated[str, typer.Option(help="cpsat or highs")] = "cpsat",
    threads: Annotated[int, typer.Option(help="Solver threads")] = 1,
    time_limit: Annotated[float, typer.Option(help="Time limit per solver call, seconds")] = 120.0,
    seed: Annotated[int, typer.Option(help="Seed of the random objectives and the solver")] = 0,
    workers: Annotated[int, typer.Option(help="Tracts in parallel")] = 1,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """Verified claims (generate-then-verify): persons singled out by claims every consistent
    population makes true."""
    import polars as pl

    from .attacks.claims import claims as _claims
    from .attacks.reconstruct import LEVELS
    from .schema import read_microdata
    from .tables import read_tables

    if level not in LEVELS:
        raise TabreconError(f"--level must be 'block' or 'block+tract' (got {level!r})")
    _at_least(1, k_solutions=k_solutions)
    opts = _solver_opts(solver, threads, time_limit, seed, workers)
    ts = read_tables(tables_file)
    rec = read_microdata(recon)
    if not solvar_file.exists():
        raise TabreconError(f"{solvar_file}: file not found (run `tabrecon solvar` first)")
    blocks = (
        pl.read_parquet(solvar_file)
        if str(solvar_file).endswith(".parquet")
        else pl.read_csv(solvar_file)
    )
    t0 = time.perf_counter()
    prog, task = _progress(len(ts.tracts()), "claims")
    with prog:
        run = _claims(
            ts,
            rec,
            blocks,
            level,
            opts,
            k_solutions,
            seed,
            workers=workers,
            out=out,
            resume=not fresh,
            progress=lambda r: prog.update(task, advance=1, last=f"{r['unit']} {r['status']}"),
        )
    el = time.perf_counter() - t0
    for r in run.failed:
        err.print(f"[red]tract {r['unit']}: {r['status']}[/red] -- {r.get('message', '')}")
    out.mkdir(parents=True, exist_ok=True)
    by_k = run.by_k()
    by_k.write_csv(out / "claims_by_k.csv")
    if run.persons.height:
        run.persons.write_parquet(out / "claims_persons.parquet")
    summ = {**run.summary(), "seconds": round(el, 2), "seed": seed}
    (out / "summary.json").write_text(json.dumps(summ, indent=2))
    n = max(summ["persons"], 1)
    lines = [
        f"# Verified claims ({level} tables, K = {k_solutions})",
        "",
        f"- blocks: {summ['blocks']:,} ({summ['certified_blocks']:,} certified unique, "
        f"{summ['varying_blocks']:,} that can differ)",
        f"- persons singled out by a verified singleton claim: {summ['persons_singled_out']:,} of "
        f"{summ['persons']:,} "
        f"({100 * summ['persons_singled_out'] / n:.1f}%), in {summ['blocks_with_singleton']:,} "
        "blocks",
        f"- blocks that can differ: {summ['candidates_varying']:,} candidate claims, "
        f"{summ['verified_varying']:,} verified "
        f"by {summ['proofs']} infeasibility proofs",
        f"- {summ['failed_tracts']} tract(s) failed; time {el:.1f} s",
        "",
        "Persons covered by k = number of columns of the claim (Liu et al. Table 2 layout); "
        "baselines are P(count = 1)"
        " under Binomial(block size, share of matching records in the tract / state), medians to "
        "0.01.",
        "",
        "| k | persons covered | per block | blocks | verified singletons | verified claims | "
        "median baseline (tract) | median baseline (state) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in by_k.iter_rows(named=True):
        lines.append(
            f"| {r['k']} | {r['persons_covered']:,} | {r['persons_per_block']:.2f} | "
            f"{r['blocks_with_singleton']:,} | "
            f"{r['verified_singletons']:,} | {r['verified_claims']:,} | "
            f"{r['median_baseline_tract']:.2f} | "
            f"{r['median_baseline_state']:.2f} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    console.print(
        _table(
            "verified singleton claims by number of columns k",
            [
                "k",
                "persons covered",
                "per block",
                "blocks",
                "verified singletons",
                "verified claims",
                "median base (tract)",
                "median base (state)",
            ],
            [
                [
                    r["k"],
                    r["persons_covered"],
                    f"{r['persons_per_block']:.2f}",
                    r["blocks_with_singleton"],
                    r["verified_singletons"],
                    r["verified_claims"],
                    f"{r['median_baseline_tract']:.2f}",
                    f"{r['median_baseline_state']:.2f}",
                ]
                for r in by_k.iter_rows(named=True)
            ],
        )
    )
    console.print("\n".join(lines[2:6]))
    console.print(
        f"written {out}/claims_by_k.csv, claims_persons.parquet, summary.md, summary.json"
    )
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
            help="'perfect', 'commercial', or an attacker file (pik, block_geoid, sex, age)"
        ),
    ] = "perfect",
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder")] = Path("reid"),
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
    import polars as pl

    from .attacks.reidentify import reidentify as _reid
    from .report.reid import write_reid_report
    from .schema import read_microdata
    from .tables import read_tables

    if francis_threshold < 1:
        raise TabreconError(f"--francis-threshold must be >= 1 (got {francis_threshold})")
    if attacker not in ("perfect", "commercial") and not Path(attacker).exists():
        raise TabreconError(
            f"--attacker: {attacker!r} is neither 'perfect', 'commercial' nor an existing file"
        )
    t0 = time.perf_counter()
    rec, tru = read_microdata(recon), read_microdata(truth)
    ts = read_tables(tables_file) if tables_file is not None else None
    cert = None
    if solvar_file is not None:
        if not solvar_file.exists():
            raise TabreconError(f"{solvar_file}: file not found")
        cert = (
            pl.read_parquet(solvar_file)
            if str(solvar_file).endswith(".parquet")
            else pl.read_csv(solvar_file)
        )
    res = _reid(rec, tru, attacker, ts, cert, seed=seed, francis_threshold=francis_threshold)
    how = (
        f"tabrecon reidentify --recon {recon} --truth {truth} --attacker {attacker} --seed {seed}"
        f"{' --solvar ' + str(solvar_file) if solvar_file else ''}"
    )
    summ = write_reid_report(res, out, how)
    for line in res.attacker_report.lines():
        err.print(f"[yellow]attacker data:[/yellow] {line}")
    rows = []
    for g in ("all", "nonmodal", "certified_uniques"):
        for s in ("attack", "mdg", "prg", "truth"):
            r = summ[s][g]
            rows.append(
                [
                    g,
                    s,
                    r["attacker_records"],
                    r["putative"],
                    r["confirmed"],
                    "n/a" if r["precision_pct"] is None else f"{r['precision_pct']:.1f}",
                ]
            )
    console.print(
        _table(
            "reidentification (precision = confirmed / putative)",
            ["group", "source", "attacker records", "putative", "confirmed", "precision %"],
            rows,
        )
    )
    if not summ["attack"]["all"]["putative"]:
        console.print(
            "[yellow]no attacker record could be linked: the attacker data and the release share "
            "no block, sex and age[/yellow]"
        )
    console.print(f"report written to {out}/report.md ({time.perf_counter() - t0:.1f} s)")


def _print_audit(res, out: Path) -> None:
    s = res.summary
    rows = []
    for lv in ("block", "block+tract"):
        a = s.get(f"agreement_{lv}")
        if a:
            rows.append(
                [
                    f"agreement, {lv} tables (binned / exact age)",
                    f"{a['binned_pct']:.1f}% / {a['exact_pct']:.1f}%",
                ]
            )
    c = s.get("certify")
    if c:
        rows.append(
            [
                f"blocks with one solution ({c['level']})",
                f"{c['unique_blocks']:,} of {c['inhabited_blocks']:,} "
                f"({c['unique_blocks_pct']:.1f}%)",
            ]
        )
    r = s.get("reidentification", {})
    fmt = lambda v: "n/a" if v is None else f"{v:.1f}%"  # noqa: E731
    if r:
        rows.append(
            [
                "precision, nonmodal: attack / MDG / PRG",
                " / ".join(
                    fmt(r[src]["nonmodal"]["precision_pct"]) for src in ("attack", "mdg", "prg")
                ),
            ]
        )
        rows.append(
            [
                "precision, certified nonmodal uniques",
                fmt(r["attack"]["certified_uniques"]["precision_pct"]),
            ]
        )
    for d in s.get("defenses", []):
        rows.append(
            [
                f"{d['defense']}: nonmodal attack / PRG, block TVD",
                f"{fmt(d['attack_nonmodal_precision'])} / {fmt(d['prg_nonmodal_precision'])}, "
                f"{d.get('tvd_block', float('nan')):.3f}",
            ]
        )
    console.print(_table("audit headline", ["figure", "value"], rows))
    console.print(f"time per stage (s): {s['timings_s']}")
    if s.get("failures"):
        err.print(
            f"[yellow]{len(s['failures'])} unit(s) failed:[/yellow] " + "; ".join(s["failures"][:5])
        )
    console.print(f"report: {res.report}  (numbers: {out / 'results'}, {out / 'summary.json'})")


@app.command()
def audit(
    microdata: Annotated[
        Path | None, typer.Argument(help="Confidential person file (CSV, CSV.gz, Parquet)")
    ] = None,
    tables_path: Annotated[
        Path | None,
        typer.Option(
            "--tables", help="Published tables: long table file or SF1 summary-file folder"
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output folder (report.html, results/, work/)")
    ] = Path("tabrecon-audit"),
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML configuration (see README)")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Keep finished stages and tracts of an earlier run in OUT"),
    ] = False,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Local processes for tracts (default from config: 1)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default from config: 2010)")] = None,
    defenses: Annotated[
        str | None, typer.Option(help="Comma-separated defenses, e.g. 'swap-lo,rho=2' ('' = none)")
    ] = None,
    chunk_persons: Annotated[
        int | None, typer.Option(help="Counties are batched up to this many persons")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars")] = False,
) -> None:
    """Audit a release end to end: publish, reconstruct, certify, link, defend, compare; write a
    report."""
    from .audit import audit as _audit
    from .config import load_config

    dspecs = None if defenses is None else [d.strip() for d in defenses.split(",") if d.strip()]
    cfg = load_config(
        config,
        run={
            "scheduler": scheduler,
            "workers": workers,
            "seed": seed,
            "chunk_persons": chunk_persons,
        },
        defenses={"specs": dspecs},
    )
    cmd = "tabrecon audit " + " ".join(sys.argv[2:])
    res = _audit(
        microdata,
        out,
        cfg,
        tables=tables_path,
        resume=resume,
        console=err,
        show_progress=not quiet,
        command=cmd,
    )
    _print_audit(res, out)
    if res.summary.get("failures"):
        raise typer.Exit(1)


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder")] = Path("tabrecon-demo"),
    persons: Annotated[int, typer.Option(help="Size of the synthetic county")] = 20_000,
    seed: Annotated[int, typer.Option(help="Random seed")] = 2010,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML configuration for the audit")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars")] = False,
) -> None:
    """Synthesize a county and audit it: the whole pipeline and its HTML report in a few minutes."""
    from .config import load_config
    from .pipeline import run_demo

    if persons <= 0:
        raise TabreconError(f"--persons must be positive (got {persons})")
    res = run_demo(
        out, persons, seed, load_config(config, run={"seed": seed}), err, show_progress=not quiet
    )
    _print_audit(res, out)


@app.command()
def swap(
    microdata: Annotated[
        Path, typer.Argument(help="Person file to protect (a household_id column swaps households)")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Swapped person file")] = Path(
        "swapped.parquet"
    ),
    preset: Annotated[
        str, typer.Option(help="swap-lo (5%, within tract) or swap-hi (50%, size noise, 30/40/30)")
    ] = "swap-lo",
    rate: Annotated[
        float | None, typer.Option(help="Override the preset's target swap rate")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
) -> None:
    """Swap households between blocks as the 2010 simulation did; report the invariants kept."""
    from dataclasses import replace as _replace

    from .defenses.swapping import PRESETS
    from .defenses.swapping import swap as _swap
    from .schema import read_microdata, write_microdata

    if preset not in PRESETS:
        raise TabreconError(f"--preset must be one of {', '.join(PRESETS)} (got {preset!r})")
    if rate is not None and not (0 < rate <= 1):
        raise TabreconError(f"--rate must be a share in (0, 1] (got {rate})")
    check_suffix(out)
    cfg = (
        PRESETS[preset]
        if rate is None
        else _replace(PRESETS[preset], rate=rate, name=f"{preset} rate {rate}")
    )
    res = _swap(read_microdata(microdata), cfg, seed)
    write_microdata(res.records, out)
    s = res.summary()
    console.print(
        f"{s['preset']}: swapped {s['swapped_units']:,} of {s['units']:,} {s['unit']} "
        f"({100 * s['swapped_share']:.1f}%), {s['moved_persons']:,} persons changed block -> {out}"
    )
    console.print(
        "invariants kept: "
        + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in s["invariants_kept"].items())
    )
    (Path(str(out).rsplit(".", 1)[0] + "_swap.json")).write_text(json.dumps(s, indent=2))


@app.command()
def topdown(
    microdata: Annotated[Path, typer.Argument(help="Person file to protect")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Protected person file (the MDF)")
    ] = Path("protected.parquet"),
    preset: Annotated[
        str, typer.Option(help="dhc2023-like (level shares of the 2023 DHC) or uniform")
    ] = "dhc2023-like",
    rho: Annotated[float, typer.Option(help="Total zCDP budget")] = 4.9622,
    workers: Annotated[int, typer.Option(help="Processes sharing the parents of each level")] = 1,
    fit: Annotated[
        str, typer.Option(help="Least-squares solver: admm (default) or clarabel")
    ] = "admm",
) -> None:
    """Protect person records with TopDown (zCDP, exact discrete Gaussian noise, top-down NNLS +
    rounding)."""
    from .defenses.topdown import dhc2023_like, tvd_by_level, uniform_config
    from .defenses.topdown import topdown as _topdown
    from .schema import read_microdata, write_microdata

    if preset not in ("dhc2023-like", "uniform"):
        raise TabreconError(f"--preset must be dhc2023-like or uniform (got {preset!r})")
    _positive_finite(rho=rho)
    _at_least(1, workers=workers)
    from .defenses.topdown import FITS

    if fit not in FITS:
        raise TabreconError(f"--fit must be one of {', '.join(FITS)} (got {fit!r})")
    check_suffix(out)
    md = read_microdata(microdata)
    cfg = dhc2023_like(rho) if preset == "dhc2023-like" else uniform_config(rho)
    t0 = time.perf_counter()
    res = _topdown(
        md,
        cfg,
        progress=lambda lv: err.print(f"[dim]topdown: {lv} done[/dim]"),
        workers=workers,
        fit=fit,
    )
    write_microdata(res.records, out)
    stem = str(out).rsplit(".", 1)[0]
    res.measurements.write_parquet(f"{stem}_measurements.parquet")
    tvd = tvd_by_level(md, res.records)
    info = {
        "privacy": res.privacy,
        "seconds_by_level": res.seconds_by_level,
        "noise_draws": res.draws,
        "tvd_accuracy": tvd,
        "fallbacks": res.fallbacks,
        "seconds": time.perf_counter() - t0,
    }
    Path(f"{stem}_topdown.json").write_text(json.dumps(info, indent=2))
    console.print(
        f"{cfg.name}: rho {res.privacy['rho']:.4f} (epsilon "
        f"{res.privacy['epsilon_cks_delta_1e-10']:.2f} at "
        f"delta 1e-10), {res.draws:,} exact noise draws, {len(res.records):,} protected records -> "
        f"{out}"
    )
    console.print("TVD accuracy: " + ", ".join(f"{k} {v:.4f}" for k, v in tvd.items()))
    for f in res.fallbacks:
        err.print(f"[yellow]fallback:[/yellow] {f}")


@app.command("reconstruct-noisy")
def reconstruct_noisy(
    measurements: Annotated[
        Path, typer.Argument(help="TopDown's noisy measurements (<stem>_measurements.parquet)")
    ],
    tables_file: Annotated[
        Path,
        typer.Option("--tables", help="The published (post-processed) tables: geography and P1"),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Person file of the fitted records")
    ] = Path("recon_noisy.parquet"),
    use_totals: Annotated[
        bool, typer.Option(help="Hold each block's published total (P1) exactly")
    ] = True,
    time_limit: Annotated[float, typer.Option(help="Seconds per block's integer program")] = 10.0,
) -> None:
    """Fit person records straight to published noisy measurements (integer least-deviation per
    block)."""
    import polars as pl

    from .attacks.noisy import reconstruct_from_measurements
    from .schema import write_microdata
    from .tables import read_tables

    _positive_finite(time_limit=time_limit)
    check_suffix(out)
    if not measurements.exists():
        raise TabreconError(f"{measurements}: file not found")
    try:
        meas = pl.read_parquet(measurements)
    except Exception as exc:
        raise TabreconError(
            f"{measurements}: cannot be read as Parquet: {str(exc).splitlines()[0]}"
        ) from None
    ts = read_tables(tables_file)
    if "block" not in ts.grids:
        raise TabreconError(f"{tables_file}: no block-level tables (the fit is per block)")
    g = ts.grids["block"]
    if use_totals and "P0010001" not in set(g.cells.tolist()):
        raise TabreconError(
            f"{tables_file}: no P1 (P0010001) to hold block totals; add --no-use-totals"
        )
    totals = (
        dict(zip(g.geoids.tolist(), g.col("P0010001").tolist(), strict=True))
        if use_totals
        else None
    )
    nr = reconstruct_from_measurements(meas, g.geoids, time_limit, totals)
    write_microdata(nr.records, out)
    console.print(
        f"fitted {len(nr.records):,} records in {nr.blocks:,} blocks ({nr.seconds:.1f} s); fitted "
        "at: "
        f"{nr.fitted_at} -> {out}"
    )
    for f in nr.failed[:10]:
        err.print(f"[yellow]block failed:[/yellow] {f}")
    if nr.failed:
        raise typer.Exit(1)


@app.command()
def tradeoff(
    microdata: Annotated[Path, typer.Argument(help="Confidential person file")],
    defenses: Annotated[
        str,
        typer.Option(
            help="Comma list: none, swap-lo, swap-hi, swap=<rate>, dhc2023-like, rho=<budget>, "
            "eps=<budget>"
        ),
    ] = "none,swap-lo,swap-hi,rho=0.5,dhc2023-like,rho=50",
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("tradeoff"),
    seed: Annotated[int, typer.Option()] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """Risk against accuracy: for each defense, protect, publish, rerun every attack and measure."""
    from .config import check_defense
    from .pipeline import run_tradeoff
    from .schema import read_microdata

    specs = [d.strip() for d in defenses.split(",") if d.strip()]
    if not specs:
        raise TabreconError("--defenses is empty")
    for spec in specs:
        if (problem := check_defense(spec)) is not None:
            raise TabreconError(f"--defenses: {spec!r}: {problem}")
    df = run_tradeoff(read_microdata(microdata), specs, out, seed, not fresh, console)
    console.print(
        _table(
            "risk and accuracy by defense",
            [
                "defense",
                "rho",
                "attack nonmodal %",
                "PRG nonmodal %",
                "MDG nonmodal %",
                "block TVD",
            ],
            [
                [
                    r["defense"],
                    r["rho"],
                    r["attack_nonmodal_precision"],
                    r["prg_nonmodal_precision"],
                    r["mdg_nonmodal_precision"],
                    r["tvd_block"],
                ]
                for r in df.iter_rows(named=True)
            ],
        )
    )
    console.print(f"written {out}/tradeoff.csv, {out}/tradeoff.png")


dn_app = typer.Typer(
    help="Linear reconstruction lab: Dinur-Nissim attacks under noise (the JASON experiments).",
    no_args_is_help=True,
)
app.add_typer(dn_app, name="dn")


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TabreconError(
            f"{what} must be a comma list of whole numbers (got {text!r})"
        ) from None


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TabreconError(f"{what} must be a comma list of numbers (got {text!r})") from None


def _dn_progress(label: str):
    return lambda msg: err.print(f"[dim]{label}: {msg}[/dim]")


@dn_app.command("recover")
def dn_recover(
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("dn"),
    n: Annotated[int, typer.Option(help="Database size (bits)")] = 1000,
    ms: Annotated[
        str, typer.Option(help="Comma list of query counts (default 0.1n ... 0.8n)")
    ] = "",
    trials: Annotated[int, typer.Option()] = 10,
    decoder: Annotated[str, typer.Option(help="lsq, lp or exact")] = "lsq",
    seed: Annotated[int, typer.Option()] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """(a) Fraction of bits recovered vs number of queries, no noise (JASON Fig. 4-1)."""
    from .lab.dn import recovery_vs_queries

    df = recovery_vs_queries(
        out, n, _ints(ms, "--ms") or None, trials, decoder, seed, not fresh, _dn_progress("recover")
    )
    console.print(
        _table(
            f"bits recovered, n = {n} ({decoder})",
            ["m", "p10", "median", "p90", "mean"],
            [[r["m"], r["p10"], r["p50"], r["p90"], r["mean"]] for r in df.iter_rows(named=True)],
        )
    )
    console.print(f"written {out}/recovery_vs_queries.csv, recovery_vs_queries.png")


@dn_app.command("queries-needed")
def dn_queries_needed(
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("dn"),
    decoder: Annotated[str, typer.Option(help="lsq, lp, exact, or a comma list")] = "lsq",
    ns: Annotated[
        str, typer.Option(help="Comma list of n (default 100..1000; exact: 20..120)")
    ] = "",
    trials: Annotated[int, typer.Option()] = 3,
    exact_time_limit: Annotated[
        float, typer.Option(help="Seconds per exact solve (time-out = not recovered)")
    ] = 10.0,
    exact_finder: Annotated[
        str,
        typer.Option(
            help="How exact decoding looks for the database: auto (CP-SAT, then lattice "
            "reduction), cpsat or lattice"
        ),
    ] = "auto",
    seed: Annotated[int, typer.Option()] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """(b, f) Queries needed for full recovery vs n, their ratio to n, and the information bound."""
    from .attacks.linear import DECODERS
    from .lab.dn import queries_needed_vs_n

    decs = tuple(d.strip() for d in decoder.split(",") if d.strip())
    bad = [d for d in decs if d not in DECODERS]
    if bad or not decs:
        raise TabreconError(f"--decoder must be among {', '.join(DECODERS)} (got {decoder!r})")
    _positive_finite(exact_time_limit=exact_time_limit)
    n_list = _ints(ns, "--ns") or (list(range(20, 121, 20)) if decs == ("exact",) else None)
    slopes = queries_needed_vs_n(
        out,
        n_list,
        trials,
        decs,
        seed,
        exact_time_limit,
        not fresh,
        _dn_progress("queries-needed"),
        exact_finder,
    )
    console.print(f"written {out}/queries_needed.csv, queries_needed.png")
    for d, sl in slopes.items():
        console.print(f"{d}: queries needed grow as {sl:.3f} n")
    if len(slopes) == 1:
        console.print(f"ratio: {next(iter(slopes.values())):.3f}")


@dn_app.command("noise")
def dn_noise(
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("dn"),
    ns: Annotated[str, typer.Option(help="Comma list of n")] = "10,40,100",
    trials: Annotated[int, typer.Option()] = 20,
    seed: Annotated[int, typer.Option()] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """(c) Recovery vs queries under Gaussian noise of JASON's scale sqrt(n) ln(n) / 2 (Fig.
    4-4)."""
    from .lab.dn import recovery_under_gaussian

    df = recovery_under_gaussian(
        out, tuple(_ints(ns, "--ns")), None, trials, "lsq", seed, not fresh, _dn_progress("noise")
    )
    console.print(
        _table(
            "mean fraction recovered under Gaussian noise",
            ["n", "m", "sigma", "mean"],
            [[r["n"], r["m"], f"{r['sigma']:.1f}", r["mean"]] for r in df.iter_rows(named=True)],
        )
    )
    console.print(f"written {out}/recovery_gaussian.csv, recovery_gaussian.png")


@dn_app.command("grid")
def dn_grid(
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("dn"),
    n: Annotated[int, typer.Option(help="Database size (the report: 4000)")] = 200,
    epsilons: Annotated[str, typer.Option()] = "0.01,0.03,0.1,0.3,1",
    multiples: Annotated[str, typer.Option(help="Queries as multiples of n")] = "1,5,10,20",
    trials: Annotated[int, typer.Option()] = 3,
    full: Annotated[bool, typer.Option(help="The report's size: n = 4000, 10 trials")] = False,
    seed: Annotated[int, typer.Option()] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)] = False,
) -> None:
    """(d) Fraction recovered over epsilon x query multiple, exact Laplace noise (Fig. 5-7)."""
    from .lab.dn import epsilon_grid

    if full:
        n, trials = 4000, 10
    df = epsilon_grid(
        out,
        n,
        _floats(epsilons, "--epsilons"),
        _ints(multiples, "--multiples"),
        trials,
        "lsq",
        seed,
        not fresh,
        _dn_progress("grid"),
    )
    console.print(
        _table(
            f"mean fraction recovered, n = {n}",
            ["epsilon", "m / n", "mean"],
            [[r["epsilon"], r["multiple"], r["mean"]] for r in df.iter_rows(named=True)],
        )
    )
    console.print(f"written {out}/epsilon_grid.csv, epsilon_grid.png")


@dn_app.command("laplace-sum")
def dn_laplace_sum(
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("dn"),
    trials: Annotated[int, typer.Option()] = 200,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """(e) Accuracy of a Laplace-noised sum vs N and epsilon, measured beside the closed form (Fig.
    5-6)."""
    from .lab.dn import laplace_sum_accuracy

    df = laplace_sum_accuracy(out, trials=trials, seed=seed)
    console.print(
        _table(
            "accuracy 1 - |S~ - S| / S",
            ["N", "epsilon", "measured", "closed form"],
            [
                [r["N"], r["epsilon"], r["measured"], r["closed_form"]]
                for r in df.iter_rows(named=True)
            ],
        )
    )
    console.print(f"written {out}/laplace_sum_accuracy.csv, laplace_sum_accuracy.png")


@dn_app.command("rr")
def dn_rr(
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("dn"),
    pi: Annotated[float, typer.Option(help="True share with the trait")] = 0.3,
    n: Annotated[int, typer.Option(help="Respondents per survey")] = 1000,
    reps: Annotated[int, typer.Option(help="Simulated surveys per epsilon")] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Randomized response: simulated mean and variance of the estimator beside the closed forms."""
    from .lab.rr import rr_experiment

    if not 0 <= pi <= 1:
        raise TabreconError(f"--pi must be in [0, 1] (got {pi})")
    df = rr_experiment(out, pi, n, reps, seed=seed)
    console.print(
        _table(
            "randomized response (mu = 1/2)",
            ["epsilon", "rho", "mean (sim)", "var (sim)", "var (closed)"],
            [
                [
                    r["epsilon"],
                    r["rho"],
                    r["mean_sim"],
                    f"{r['var_sim']:.3g}",
                    f"{r['var_closed']:.3g}",
                ]
                for r in df.iter_rows(named=True)
            ],
        )
    )
    console.print(f"written {out}/randomized_response.csv, randomized_response.png")


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


EXIT_OK, EXIT_FAILED_UNITS, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 70, 130


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (the contract in the README):

    0 success; 1 the run finished but some unit failed or a check found violations (the others
    are written); 2 bad input or usage (one line naming the file, line, column, cell, block or
    option); 130 interrupted (finished units kept); 70 an internal error (a bug; the traceback is
    saved and its path printed).
    """
    from .interrupts import Interrupted, install

    install()
    warnings.simplefilter("default")
    warnings.formatwarning = lambda msg, cat, *a, **k: f"warning: {msg}\n"
    try:
        # standalone mode: typer prints usage errors (exit 2) and turns typer.Exit(n) into exit n,
        # whatever click it bundles or depends on
        app(args=argv, prog_name="tabrecon")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return EXIT_OK
        if not isinstance(code, int):
            err.print(str(code), highlight=False)
            return EXIT_FAILED_UNITS
        if code == EXIT_INTERRUPTED:  # an interrupt outside any unit of work
            err.print("interrupted; nothing was being kept at that moment", highlight=False)
        return code
    except Interrupted as exc:
        err.print(f"{exc}; {_RESUME_HINT.get(_command(argv), _RESUME_HINT[''])}", highlight=False)
        return EXIT_INTERRUPTED
    except TabreconError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_BAD_INPUT
    except (
        OSError
    ) as exc:  # an output path that is a directory, under a file, read-only, a full disk
        where = exc.filename if exc.filename is not None else ""
        what = exc.strerror or str(exc)
        err.print(f"[red]error:[/red] {where}{': ' if where else ''}{what}", highlight=False)
        return EXIT_BAD_INPUT
    except Exception:  # a bug: say so in one line, keep the traceback for the report
        import tempfile
        import traceback

        fd, path = tempfile.mkstemp(prefix="tabrecon-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            fh.write(f"tabrecon {__version__}, argv {sys.argv!r}\n")
            traceback.print_exc(file=fh)
        kind, value = sys.exc_info()[:2]
        name = kind.__name__ if kind is not None else "error"
        err.print(
            f"[red]internal error[/red] ({name}: {value}); this is a bug in tabrecon, "
            f"please report it with the traceback saved in {path}",
            highlight=False,
        )
        return EXIT_INTERNAL
    return EXIT_OK


_RESUME_HINT = {
    "": "rerun the same command to resume, or add --fresh to start over",
    "audit": "rerun with --resume to go on from there",
    "demo": "the demo starts afresh when rerun",
}


def _command(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return next((a for a in args if not a.startswith("-")), "")


def main() -> None:
    """Entry point of the ``tabrecon`` command: exit with :func:`run`'s code."""
    import signal

    try:
        code = run()
    except KeyboardInterrupt:  # a second Ctrl-C while the first one was being reported
        code = EXIT_INTERRUPTED
    while True:  # the outcome is known: exit without interruption
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            break
        except KeyboardInterrupt:  # one more Ctrl-C landed before they were ignored
            continue
    sys.exit(code)


if __name__ == "__main__":
    main()
