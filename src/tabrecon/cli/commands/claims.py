"""The ``claims`` command: verified claims about a release's records (Generate-then-Verify) --
from a reconstruction and its certification, tract by tract (persons always; any population given
--recon and --solvar), or from each block's tables alone (any other population)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from ... import vocab
from ...errors import TabreconError
from ...runner import RunOptions
from ...tables.publication import EXACT, Publication
from ..terminal import (
    FolderOut,
    Fresh,
    Level,
    PublicationRule,
    SchemaName,
    Solver,
    TablesArg,
    Threads,
    Workers,
    at_least,
    console,
    err,
    frame_table,
    one_of,
    positive_finite,
    progress,
    publication_rule,
    read_verdicts,
    solver_options,
)

if TYPE_CHECKING:
    from ...engine.solvers import SolverOptions
    from ...schema.registry import Population

from .attack import RECON_LEVELS, refuse_untied, release_tables, tied_tables

#: seconds per block of claims from each block's tables (``--block-time-limit``)
BLOCK_SECONDS = 300.0
#: seconds per tract of claims from a certified reconstruction (``--tract-time-limit``): the
#: tract program of a 1,325-unit household tract with 63 blocks that can differ ran 15 min
#: without an answer at K = 10; a person tract takes seconds
TRACT_SECONDS = 600.0

app = typer.Typer()


@app.command()
def claims(
    tables_file: TablesArg,
    recon: Annotated[
        Path | None,
        typer.Option(
            "--recon",
            "-r",
            help="Reconstruction (persons: a person file; another population: `tabrecon "
            "reconstruct --schema NAME`'s records): its claims, proven tract by tract",
        ),
    ] = None,
    solvar_file: Annotated[
        Path | None,
        typer.Option(
            "--solvar",
            "-s",
            help="Each block's certification of --recon: `tabrecon solvar`'s output, or "
            "`tabrecon reconstruct`'s OUT_blocks.csv",
        ),
    ] = None,
    out: FolderOut = Path("claims"),
    level: Level = "block",
    k_solutions: Annotated[
        int,
        typer.Option(
            "--k-solutions", "-K", help="Diverse solutions whose common claims are candidates"
        ),
    ] = 100,
    solver: Solver = "auto",
    threads: Threads = 1,
    time_limit: Annotated[float, typer.Option(help="Time limit per solver call, seconds")] = 120.0,
    seed: Annotated[int, typer.Option(help="Seed of the random objectives and the solver")] = 0,
    workers: Workers = 1,
    fresh: Fresh = False,
    schema: SchemaName = "persons",
    k: Annotated[
        str,
        typer.Option(
            "--k",
            help="Claims from each block's tables: columns per claim, a comma list (default: "
            "the population's, 5,6,7,8,9,10 for households)",
        ),
    ] = "",
    truth: Annotated[
        Path | None,
        typer.Option(
            "--truth",
            help="Claims from each block's tables: the file of records behind the tables "
            "(records covered)",
        ),
    ] = None,
    block_time_limit: Annotated[
        float | None,
        typer.Option(
            help="Claims from each block's tables: seconds per block, its reconstruction and "
            "uniqueness proof included; a block that reaches it keeps the claims verified so far "
            f"and is reported ({BLOCK_SECONDS:g} unless given)",
            show_default=False,
        ),
    ] = None,
    tract_time_limit: Annotated[
        float | None,
        typer.Option(
            help="Claims from a certified reconstruction: seconds per tract for its blocks that "
            "can differ; a tract that reaches it keeps the claims verified so far and is "
            f"reported ({TRACT_SECONDS:g} unless given)",
            show_default=False,
        ),
    ] = None,
    together: Annotated[
        Path | None,
        typer.Option(
            "--with",
            help="Claims from each block's tables: the tables of the population --schema's "
            "records tie to "
            "(households: the person tables of the same blocks); every claim is then verified "
            "given both releases",
            metavar="TABLES",
        ),
    ] = None,
    publication: PublicationRule = "declared",
) -> None:
    """Verified claims (generate-then-verify): persons, housing units, ... singled out by claims
    every consistent population makes true."""
    from ...tables.declaration import population

    pop = population(schema)
    pub = publication_rule(pop, publication)
    at_least(1, k_solutions=k_solutions)
    # an option the chosen way does not use is refused, never silently ignored: claims are read
    # off a certified reconstruction when --recon and --solvar are given, else each block's
    # from its tables
    certified = recon is not None or solvar_file is not None
    certified_only = {
        "--recon": recon is not None,
        "--solvar": solvar_file is not None,
        f"--level {level}": level != vocab.Level.BLOCK,  # other populations' claims are per block
        "--tract-time-limit": tract_time_limit is not None,
    }
    per_block_only = {
        "--k": bool(k.strip()),
        "--truth": truth is not None,
        "--with": together is not None,
        "--block-time-limit": block_time_limit is not None,
    }
    unused = [o for o, given in (per_block_only if certified else certified_only).items() if given]
    if unused:
        what = ", ".join(unused)
        raise TabreconError(
            f"{what}: an option of claims from each block's tables alone (without --recon and "
            f"--solvar), not of claims about {pop.noun} from a certified reconstruction"
            if certified
            else f"{what}: an option of claims from a certified reconstruction (--recon and "
            "--solvar)"
        )
    if not certified:
        if pop.generic:  # modelled finer than its block tables tell: claimed at their resolution
            release_tables(pop, tables_file, pub)  # a file of other tables named as the user's
            pop = population(pop.generic)
            pub = publication_rule(pop, publication)
            err.print(
                f"[dim]{schema}: each block's claims from its tables as {pop.name} "
                f"({pop.description})[/dim]"
            )
        _release_claims(
            pop,
            tables_file,
            out,
            k,
            k_solutions,
            truth,
            BLOCK_SECONDS if block_time_limit is None else block_time_limit,
            solver_options(solver, threads, time_limit, seed, workers),
            seed,
            workers,
            fresh,
            together,
            pub,
        )
        return
    if recon is None or solvar_file is None:
        raise TabreconError(
            "claims from a certified reconstruction need both --recon (the reconstruction) and "
            "--solvar (its certification, or the reconstruction's OUT_blocks.csv); without "
            "either, each block's claims come from its tables"
        )
    if not pub.exact:
        raise TabreconError(
            f"--publication {pub}: claims from a certified reconstruction assume exact tables so "
            "far; without --recon and --solvar each block's claims allow for rounded or withheld "
            "cells"
        )
    one_of(level, RECON_LEVELS, "--level")
    tract_seconds = TRACT_SECONDS if tract_time_limit is None else tract_time_limit
    positive_finite(tract_time_limit=tract_seconds)
    opts = solver_options(solver, threads, time_limit, seed, workers)
    from ...attacks.claims.certified import CertifiedClaimsOptions, certified_claims
    from ...engine.release import plan_release
    from ...geo import overlap

    t0 = time.perf_counter()
    published = release_tables(pop, tables_file)
    tables = plan_release(published, pop, level).split
    units = pop.records(recon)
    overlap(published.inhabited_blocks(), units.blocks()[0], str(tables_file), str(recon))
    blocks = read_verdicts(solvar_file)
    differ = int((blocks["status"] != vocab.Verdict.UNIQUE).sum())
    if differ:  # one program per tract holds them all: no time limit per block
        err.print(
            f"{differ:,} of {blocks.height:,} blocks can differ: their claims are proven in "
            "one program per tract, which can take long for many such blocks (each tract "
            f"stops at --tract-time-limit {tract_seconds:g} s with the claims verified by "
            "then; without --recon and --solvar each block's claims get --block-time-limit)"
        )
    prog, tick = progress(len(tables.parts), f"{pop.name} claims")
    with prog:
        run = certified_claims(
            tables,
            pop,
            units,
            blocks,
            CertifiedClaimsOptions(
                level=level,
                k_solutions=k_solutions,
                seed=seed,
                solver=opts,
                tract_seconds=tract_seconds,
            ),
            run=RunOptions(workers=workers, out=out, resume=not fresh, progress=tick),
        )
    for r in run.failed:
        err.print(f"[red]tract {r['unit']}: {r['status']}[/red] -- {escape(r.get('message', ''))}")
    incomplete = run.incomplete
    for r in incomplete[:20]:
        err.print(f"[yellow]tract {r['unit']}:[/yellow] {escape(r.get('message', ''))}")
    if len(incomplete) > 20:
        err.print(f"[yellow]... and {len(incomplete) - 20} more such tracts[/yellow]")
    el = time.perf_counter() - t0
    paths = run.write(out, seed, el)
    cols = {
        "k": "k",
        "persons_covered": f"{pop.noun} covered",
        "persons_per_block": "per block",
        "blocks_with_singleton": "blocks",
        "verified_singletons": "verified singletons",
        "verified_claims": "verified claims",
        "median_baseline_tract": "median base (tract)",
        "median_baseline_state": "median base (state)",
    }
    title = "verified singleton claims by number of columns k"
    console.print(frame_table(title, run.by_k(), cols))
    console.print("\n".join(run.summary_lines(el)))
    console.print(f"written {', '.join(map(str, paths))}")
    if run.failed:
        raise typer.Exit(1)


def _release_claims(
    pop: Population,
    tables_file: Path,
    out: Path,
    k: str,
    k_solutions: int,
    truth: Path | None,
    block_time_limit: float,
    opts: SolverOptions,
    seed: int,
    workers: int,
    fresh: bool,
    together: Path | None = None,
    publication: Publication = EXACT,
) -> None:
    """``tabrecon claims --schema NAME`` for a population on the generic engine: Generate-then-
    Verify on a release's tables, block by block (written as each finishes, resumable), figures
    in the study's layout; with ``--with``, given both releases."""
    import polars as pl

    from ...attacks.claims.release import ClaimsOptions, release_claims
    from ...tables.consistency import check_unit_consistency

    positive_finite(block_time_limit=block_time_limit)
    try:
        ks = tuple(sorted({int(x) for x in k.split(",") if x.strip()})) or pop.k_values
    except ValueError:
        raise TabreconError(f"--k: {k!r} is not a comma list of numbers such as 5,6,7") from None
    n_attr = len(pop.schema.attributes)
    if any(not 1 <= x <= n_attr for x in ks):
        raise TabreconError(f"--k: columns per claim must lie in 1..{n_attr} for {pop.name}")
    tied = None
    if together is not None:
        refuse_untied(pop)
        if not publication.exact:
            raise TabreconError(
                f"--publication {publication}: claims --with assume exact tables so far"
            )
        tied = tied_tables(pop, together)
    long = release_tables(pop, tables_file, publication).own_levels().to_frame()
    units = pop.records(truth) if truth is not None else None
    t0 = time.perf_counter()
    prog, tick = progress(long["geoid"].n_unique(), f"{pop.name} claims")
    with prog:
        run = release_claims(
            long,
            pop,
            ClaimsOptions(
                k_values=ks,
                k_solutions=k_solutions,
                seed=seed,
                solver=opts,
                block_seconds=block_time_limit,
                publication=publication,
            ),
            run=RunOptions(workers=workers, out=out, resume=not fresh, progress=tick),
            truth=units,
            tied=tied,
        )
    for r in run.failed:
        err.print(f"[red]block {r['unit']}: {r['status']}[/red] -- {escape(r.get('message', ''))}")
    bad = run.problem_blocks
    contradicted = bad.filter(pl.col("status") == vocab.ClaimStatus.INFEASIBLE)["geoid"].to_list()
    broken: dict[str, str] = {}
    if contradicted and publication.exact:  # name an identity the tables break, where one does
        rep = check_unit_consistency(long.filter(pl.col("geoid").is_in(contradicted)), pop)
        for v in rep.violations:
            broken.setdefault(v.geoid, str(v).split(": ", 1)[1])
    place = pop.schema.geography  # block, or a declared release's own (school)
    for r in bad.head(20).iter_rows(named=True):
        what = {
            "time-limit": f"reached --block-time-limit {block_time_limit:g} s; "
            f"{r['verified']} claim(s) verified before it are kept",
            "infeasible": f"its tables contradict each other (no {pop.noun} fit them"
            + ("" if publication.exact else f" under --publication {publication}")
            + ")"
            + (f": {broken[r['geoid']]}" if r["geoid"] in broken else "")
            if r["geoid"] in broken or tied is None
            else "its two releases admit no common population (tabrecon reconstruct --with "
            "names the ties that cannot hold)",
        }.get(r["status"], "no solution found within the solver's limit")
        err.print(f"[yellow]{place} {r['geoid']}:[/yellow] {escape(str(what))}")
    if bad.height > 20:
        err.print(f"[yellow]... and {bad.height - 20} more such {place}s[/yellow]")
    el = time.perf_counter() - t0
    paths = run.write(out, seed, el)
    cols = {
        "k": "k",
        "blocks_with_singleton": f"{place}s with a singleton",
        "blocks_with_singleton_pct": "%",
        "verified_singletons": "verified singletons",
        "verified_claims": "verified claims",
        "baseline_median": "median baseline",
    }
    if truth is not None:
        cols |= {"units_singled_out": "singled out", "units_covered": "covered"}
    console.print(frame_table(f"verified claims about {pop.noun} by k", run.by_k(), cols))
    console.print("\n".join(run.summary_lines(el)))
    console.print(f"written {', '.join(map(str, paths))}")
    if run.failed or (bad["status"] != vocab.ClaimStatus.TIME_LIMIT).any():
        raise typer.Exit(1)
