"""Commands that defend a release and weigh the cost: ``swap``, ``topdown``,
``reconstruct-noisy`` (the attack on TopDown's noisy measurements), ``tradeoff``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ... import vocab
from ...errors import TabreconError
from ...io import Writes, check_suffix
from ..terminal import (
    FolderOut,
    Fresh,
    SchemaName,
    Seed,
    Solver,
    Threads,
    TimeLimit,
    Workers,
    at_least,
    console,
    err,
    frame_table,
    one_of,
    positive_finite,
    publication_rule,
    solver_options,
)

#: The defenses ``tradeoff`` takes (kept to the parser's grammar, ``defenses.defense.GRAMMAR``,
#: by a test: the CLI does not import the defenses to print its help).
DEFENSES_HELP = (
    "Comma list: none, swap-lo, swap-hi, swap-2010, swap=<rate>, dhc2023-like, "
    "dhc2020-production, rho=<budget>, eps=<budget>"
)

app = typer.Typer()
RECON_LEVELS = vocab.Level.choices()


@app.command()
def swap(
    microdata: Annotated[
        Path, typer.Argument(help="Person file to protect (a household_id column swaps households)")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Swapped person file"),
        Writes(beside=("_swap.json",)),
    ] = Path("swapped.parquet"),
    preset: Annotated[
        str,
        typer.Option(
            help="swap-lo (5%, within tract), swap-hi (50%, size noise, 30/40/30) or swap-2010 "
            "(4%, risk-targeted at small blocks, then up to 1.5% with partners of the same "
            "sex x agebin make-up)"
        ),
    ] = "swap-lo",
    rate: Annotated[
        float | None, typer.Option(help="Override the preset's target swap rate")
    ] = None,
    match_on: Annotated[
        str | None,
        typer.Option(
            help="What partners share: size (the preset's noisy size key), size+adults (also "
            "the number of persons 18+), composition (the whole sex x agebin make-up)"
        ),
    ] = None,
    seed: Seed = 0,
) -> None:
    """Swap households between blocks as the 2010 simulation did; report the invariants kept."""
    from dataclasses import replace

    from ...defenses.swapping import MATCH_ON, PRESETS
    from ...defenses.swapping import swap as _swap
    from ...schema import read_microdata

    one_of(preset, tuple(PRESETS), "--preset")
    if match_on is not None:
        one_of(match_on, MATCH_ON, "--match-on")
    if rate is not None and not (0 < rate <= 1):
        raise TabreconError(f"--rate must be a share in (0, 1] (got {rate})")
    check_suffix(out)
    cfg = PRESETS[preset]
    if rate is not None:
        cfg = replace(cfg, rate=rate, name=f"{cfg.name} rate {rate}")
    if match_on is not None and match_on != cfg.match_on:
        cfg = replace(cfg, match_on=match_on, name=f"{cfg.name}, partners on {match_on}")
    res = _swap(read_microdata(microdata), cfg, seed)
    paths = res.write(out)
    s = res.summary()
    console.print(
        f"{s['preset']}: swapped {s['swapped_units']:,} of {s['units']:,} {s['unit']} "
        f"({100 * s['swapped_share']:.1f}%"
        + (
            f"; {s['close_partner_units']:,} with close partners"
            if s["close_partner_units"]
            else ""
        )
        + f"), {s['moved_persons']:,} persons changed block -> {paths[0]}"
    )
    if res.shortfall():
        console.print(f"[yellow]note:[/yellow] {res.shortfall()}")
    console.print(
        "invariants kept: "
        + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in s["invariants_kept"].items())
    )


@app.command()
def topdown(
    microdata: Annotated[Path, typer.Argument(help="Person file to protect")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Protected person file (the MDF)"),
        Writes(beside=("_measurements.parquet", "_topdown.json", "_pl94_measurements.parquet")),
    ] = Path("protected.parquet"),
    preset: Annotated[
        str, typer.Option(help="dhc2023-like (level shares of the 2023 DHC) or uniform")
    ] = "dhc2023-like",
    rho: Annotated[float, typer.Option(help="Total zCDP budget")] = 4.9622,
    workers: Annotated[int, typer.Option(help="Processes sharing the parents of each level")] = 1,
    fit: Annotated[
        str, typer.Option(help="Least-squares solver: admm (default) or clarabel")
    ] = "admm",
    pl94: Annotated[
        bool,
        typer.Option(
            "--pl94/--no-pl94",
            help="First the 2020 PL 94-171 persons run (rho 2.5562, production shares), its "
            "voting age x Hispanic x race counts then held at every geounit (as produced in 2020)",
        ),
    ] = False,
) -> None:
    """Protect person records with TopDown (zCDP, exact discrete Gaussian noise, top-down NNLS +
    rounding)."""
    from ...defenses.topdown import dhc2023_like, pl94_2020, uniform_config
    from ...defenses.topdown import topdown as _topdown
    from ...defenses.topdown_fit import FITS
    from ...metrics.accuracy import tvd_by_level
    from ...metrics.agreement import agree
    from ...schema import read_microdata

    one_of(preset, ("dhc2023-like", "uniform"), "--preset")
    positive_finite(rho=rho)
    at_least(1, workers=workers)
    one_of(fit, FITS, "--fit")
    check_suffix(out)
    md = read_microdata(microdata)
    cfg = dhc2023_like(rho) if preset == "dhc2023-like" else uniform_config(rho)
    res = _topdown(
        md,
        cfg,
        progress=lambda lv: err.print(f"[dim]topdown: {lv} done[/dim]"),
        workers=workers,
        fit=fit,
        pl94=pl94_2020() if pl94 else None,
    )
    tvd = tvd_by_level(md, res.records)
    ag = agree(res.records, truth=md, warn=False)
    res.write(out, {"tvd_accuracy": tvd, "agreement_with_input": ag.table3("MDF-input").to_dicts()})
    c = res.cost
    name = res.privacy["config"]
    console.print(
        f"{name}: rho {c.rho:.4f} (epsilon {c.epsilon:.2f} at delta {c.delta:g}), "
        f"{res.draws:,} exact noise draws, {len(res.records):,} protected records -> {out}"
    )
    for run, cost in res.privacy.get("runs", {}).items():
        console.print(
            f"  {run}: rho {cost['rho']:.4f} (epsilon {cost['epsilon_cks_delta_1e-10']:.2f})"
        )
    console.print("accuracy (1 - TVD): " + ", ".join(f"{k} {v:.4f}" for k, v in tvd.items()))
    console.print(
        frame_table(
            "agreement of the protected records with the input, exact/binned % (Table 3 layout)",
            ag.table3("MDF-input"),
            {c: c for c in ag.table3("MDF-input").columns},
        )
    )
    for f in res.fallbacks:
        err.print(f"[yellow]fallback:[/yellow] {escape(str(f))}")


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
        Path, typer.Option("--out", "-o", help="Person file of the fitted records"), Writes()
    ] = Path("recon_noisy.parquet"),
    use_totals: Annotated[
        bool, typer.Option(help="Hold each block's published total (P1) exactly")
    ] = True,
    time_limit: Annotated[float, typer.Option(help="Seconds per block's integer program")] = 10.0,
) -> None:
    """Fit person records straight to published noisy measurements (integer least-deviation per
    block)."""
    from ...attacks.noisy import read_measurements, reconstruct_noisy_release
    from ...schema import write_microdata
    from ...tables.published import read_tables

    positive_finite(time_limit=time_limit)
    check_suffix(out)
    nr = reconstruct_noisy_release(
        read_measurements(measurements),
        read_tables(tables_file),
        use_totals,
        time_limit,
        str(tables_file),
        str(measurements),
    )
    write_microdata(nr.records, out)
    console.print(
        f"fitted {len(nr.records):,} records in {nr.blocks:,} blocks ({nr.seconds:.1f} s); fitted "
        f"at: {nr.fitted_at} -> {out}"
    )
    for f in nr.failed[:10]:
        err.print(f"[yellow]block failed:[/yellow] {escape(str(f))}")
    if nr.failed:
        more = " (the first 10 above)" if len(nr.failed) > 10 else ""
        err.print(f"[red]{len(nr.failed):,} of {nr.blocks:,} blocks failed{more}[/red]")
        raise typer.Exit(1)


@app.command()
def tradeoff(
    microdata: Annotated[Path, typer.Argument(help="Confidential person file")],
    defenses: Annotated[
        str,
        typer.Option(help=DEFENSES_HELP),
    ] = "none,swap-lo,swap-hi,rho=0.5,dhc2023-like,rho=50",
    out: FolderOut = Path("tradeoff"),
    seed: Seed = 0,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="TOML configuration: the attack plan the audit would use"
        ),
    ] = None,
    fresh: Fresh = False,
) -> None:
    """Risk against accuracy: for each defense, protect, publish, rerun every attack and measure."""
    from ...audit.config import load_config
    from ...audit.evaluate import EvaluationPlan
    from ...audit.tradeoff import run_tradeoff
    from ...defenses.defense import Defense
    from ...schema import read_microdata

    specs = [d.strip() for d in defenses.split(",") if d.strip()]
    if not specs:
        raise TabreconError("--defenses is empty")
    for spec in specs:
        if (problem := Defense.check(spec)) is not None:
            raise TabreconError(f"--defenses: {spec!r}: {problem}")
    twice = sorted({s for s in specs if specs.count(s) > 1})
    if twice:  # the same rows twice would read as two measurements (the audit refuses too)
        raise TabreconError(f"--defenses: {', '.join(twice)} given twice; list each defense once")
    plan = EvaluationPlan.from_config(load_config(config))
    df = run_tradeoff(read_microdata(microdata), specs, out, seed, not fresh, console, plan)
    cols = {
        "defense": "defense",
        "rho": "rho",
        "attack_nonmodal_precision": "attack nonmodal %",
        "prg_nonmodal_precision": "PRG nonmodal %",
        "mdg_nonmodal_precision": "MDG nonmodal %",
        "tvd_block": "block accuracy (1 - TVD)",
    }
    console.print(frame_table("risk and accuracy by defense", df, cols))
    console.print(f"written {out}/tradeoff.csv, {out}/tradeoff.png")


#: randomized response's frontier: the range of Abowd & Schmutte's figures
RR_EPSILONS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0)
STRATEGY_HELP = (
    "Strategy (repeat the option for several): identity, workload, marginals[:k], "
    "topdown[:query=share,...]; append @<share> or @dhc2023-like for the level's share of the "
    "budget"
)


@app.command()
def frontier(
    tables: Annotated[
        str, typer.Option(help="Tables of the workload: a comma list, all, published")
    ] = "all",
    level: Annotated[
        str,
        typer.Option(
            help="Geounit of the workload: block or tract (the tables published there) or "
            "one (every selected table on one geounit)"
        ),
    ] = "block",
    strategy: Annotated[list[str] | None, typer.Option(help=STRATEGY_HELP)] = None,
    rhos: Annotated[str, typer.Option(help="Comma list of zCDP budgets rho")] = "",
    epsilons: Annotated[
        str,
        typer.Option(
            help="Comma list of epsilons (zCDP budgets read at delta 1e-10, or pure DP with "
            "--noise laplace)"
        ),
    ] = "",
    noise: Annotated[
        str, typer.Option(help="gaussian (zCDP, discrete Gaussian) or laplace (pure DP)")
    ] = "gaussian",
    neighbours: Annotated[
        str, typer.Option(help="bounded (change one person) or unbounded (add/remove one)")
    ] = "bounded",
    geounits: Annotated[int, typer.Option(help="Geounits the workload is published for")] = 1,
    hierarchy: Annotated[
        Path | None,
        typer.Option(
            help="Person or table file whose geography every level measures (TopDown's "
            "hierarchy, dhc2023-like level shares); sets the geounits"
        ),
    ] = None,
    tradeoff_csv: Annotated[
        Path | None,
        typer.Option("--tradeoff", help="tradeoff.csv whose measured risk to join by budget"),
    ] = None,
    draws: Annotated[
        int, typer.Option(help="Also simulate each point with this many OpenDP draws (0: no)")
    ] = 0,
    workers: Annotated[int, typer.Option(help="Processes for the simulation")] = 1,
    optimise: Annotated[
        bool,
        typer.Option(
            "--optimise",
            help="Also each strategy with the budget shares that minimise this workload's "
            "expected error (strategy search; the shares are printed)",
        ),
    ] = False,
    rr: Annotated[
        bool, typer.Option("--rr/--no-rr", help="Randomized response's frontier as well")
    ] = True,
    out: FolderOut = Path("frontier"),
) -> None:
    """The privacy-accuracy frontier: what accuracy each budget buys for a workload through each
    strategy (matrix mechanism, exact expected error), its slope dI/d epsilon, and the measured
    attack at the same budgets."""
    import json
    import time

    import polars as pl

    from ...defenses.matrix import NEIGHBOURS, NOISES, Strategy, Workload
    from ...defenses.topdown import dhc2023_like
    from ...io import write_frame, write_json
    from ...metrics.frontier import frontier as compute
    from ...metrics.frontier import join_tradeoff, optimise_shares, per_table, rr_frontier
    from ...metrics.matrix_error import ExpectedError, hierarchy_factors
    from ...report.frontier import frontier_plot, rr_plot

    one_of(noise, NOISES, "--noise")
    one_of(neighbours, NEIGHBOURS, "--neighbours")
    one_of(level, ("block", "tract", "one"), "--level")
    at_least(1, geounits=geounits, workers=workers)
    at_least(0, draws=draws)
    if draws == 1:
        raise TabreconError("--draws must be 0 or at least 2 (a standard error needs two)")
    budgets = _budgets(rhos, epsilons, noise)
    measured = None
    if tradeoff_csv is not None:  # read and checked before any computing
        from ...metrics.frontier import read_tradeoff

        if not tradeoff_csv.exists():
            raise TabreconError(
                f"{tradeoff_csv}: file not found (write it with `tabrecon tradeoff`)"
            )
        measured = read_tradeoff(tradeoff_csv)
    workload = Workload.from_tables(tables, None if level == "one" else level)
    specs = strategy or ["identity", "workload", "marginals", "topdown"]
    strategies = [Strategy.parse(s, workload) for s in specs]
    if optimise:
        for s in list(strategies):
            if len(s.groups) < 2:
                continue
            best, path = optimise_shares(workload, s, neighbours)
            strategies.append(best)
            shares = ",".join(f"{g.name}={g.share:.4f}" for g in best.groups)
            console.print(
                f"{s.name}: optimised shares {shares} -- expected error {path[-1] / path[0]:.3f}x "
                f"the given shares' ({len(path) - 1} steps)"
            )
    hier = None
    if hierarchy is not None:
        if level == "one":
            raise TabreconError("--hierarchy needs --level block or tract")
        hier = hierarchy_factors(
            _block_geoids(hierarchy), dhc2023_like(1.0).level_shares, workload.level or "block"
        )
    started = time.time()
    errors: list[ExpectedError] = []
    frames, failed, problems = [], [], []
    for s in strategies:
        err.print(f"[dim]{s.name}: {len(budgets)} budget(s)...[/dim]")
        try:
            frames.append(
                compute(
                    workload,
                    [s],
                    budgets,
                    neighbours,
                    geounits,
                    hier,
                    draws,
                    workers,
                    on_point=lambda e: errors.append(e) if isinstance(e, ExpectedError) else None,
                )
            )
        except TabreconError as exc:  # one strategy's bad input never loses the others
            failed.append(s.name)
            problems.append(exc)
            if len(strategies) > 1:
                err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
    if not frames:  # nothing to write: bad input, exit 2 (each problem printed above)
        if len(strategies) > 1:
            raise typer.Exit(2)
        raise problems[0]
    front = pl.concat(frames, how="diagonal_relaxed")
    if measured is not None:
        front = join_tradeoff(front, measured)
        hits = front.filter(pl.col("defense").is_not_null())["rho"].n_unique()
        err.print(
            f"[dim]{tradeoff_csv}: measured risk joined at {hits} of "
            f"{front['rho'].n_unique()} budget(s)[/dim]"
            if hits
            else f"[yellow]{tradeoff_csv}: no defense of it has one of these budgets; the "
            "frontier is written without measured risk[/yellow]"
        )
    out.mkdir(parents=True, exist_ok=True)
    write_frame(front, out / "frontier.csv")
    if errors:
        write_frame(per_table(errors), out / "frontier_tables.csv")
    title = f"workload {workload.name}, {len(workload)} cells, {front['geounits'][0]} geounit(s)"
    frontier_plot(front, out / "frontier.png", title)
    written = ["frontier.csv", "frontier_tables.csv", "frontier.png"]
    if rr:
        rrf = rr_frontier(RR_EPSILONS)
        write_frame(rrf, out / "rr_frontier.csv")
        rr_plot(rrf, out / "rr_frontier.png")
        written += ["rr_frontier.csv", "rr_frontier.png"]
    info = {
        "workload": workload.name,
        "cells": len(workload),
        "strategies": specs,
        "failed": failed,
        "budgets": [b.label for b in budgets],
        "noise": noise,
        "neighbours": neighbours,
        "hierarchy": str(hierarchy) if hierarchy else None,
        "draws": draws,
        "seconds": round(time.time() - started, 2),
        "how": "exact expected squared error of least squares (module "
        "tabrecon.metrics.matrix_error); slopes from the solved system and the exact noise "
        "variance",
    }
    write_json(out / "frontier.json", json.dumps(info, indent=2))
    cols = {
        "strategy": "strategy",
        "budget": "budget",
        "epsilon": "epsilon",
        "rmse_per_cell": "RMSE/cell",
        "accuracy_I": "I",
        "dI_depsilon": "dI/d eps",
        "method": "method",
    }
    if draws:
        cols["sim_rel_diff"] = "sim vs exact"
    if "attack_nonmodal_precision" in front.columns:
        cols["attack_nonmodal_precision"] = "attack nonmodal %"
    console.print(frame_table(f"frontier: {title}", front, cols))
    for s in strategies:
        if s.name not in failed:
            console.print(
                f"{s.name}: Delta_A l1 {s.delta(1).value:g}, l2 {s.delta(2).value:.4g} "
                f"(unbounded; bounded at most 2x / sqrt 2x), {s.rows:,} queries"
            )
    console.print(f"written {', '.join(f'{out}/{w}' for w in written)}")
    if failed:
        raise typer.Exit(1)


def _budgets(rhos: str, epsilons: str, noise: str):
    from ...defenses.matrix import Budget
    from ..terminal import floats

    r, e = floats(rhos, "--rhos"), floats(epsilons, "--epsilons")
    if not r and not e:
        r = [0.5, 1.0, 2.0, 4.9622, 10.0, 20.0, 50.0] if noise == "gaussian" else []
        e = [] if noise == "gaussian" else [0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
    if r and noise == "laplace":
        raise TabreconError("--rhos are zCDP budgets; with --noise laplace give --epsilons")
    for name, vals in (("rhos", r), ("epsilons", e)):
        for v in vals:
            positive_finite(**{name: v})
    if noise == "laplace":
        return [Budget.pure(v) for v in e]
    return [Budget.zcdp(v) for v in r] + [Budget.zcdp_from_epsilon(v) for v in e]


def _block_geoids(path: Path):
    """Block geoids of a person file, or of a table file's block tables."""
    from ...errors import InputError
    from ...schema import read_microdata
    from ...tables.published import read_tables

    try:
        return read_microdata(path).geoids
    except InputError as first:
        try:
            ts = read_tables(path)
        except InputError:
            raise first from None
    if "block" not in ts.grids:
        raise TabreconError(f"{path}: no block-level tables to take the geography from")
    return ts["block"].geoids


@app.command("sweep-publication")
def sweep_publication(
    records: Annotated[Path, typer.Argument(help="Records of --schema (CSV, CSV.gz or Parquet)")],
    schema: SchemaName = "group_quarters",
    rules: Annotated[
        str,
        typer.Option(
            help="Comma list of publication rules (exact, round:B, round:[i]B[/i]:random, "
            "suppress:T ...; default: exact, rounding to 2, 3, 5, 10, random rounding to 3 "
            "and 5, suppression below 3, 5 and 10); separate them with ; when a rule names "
            "tables (round:3,P42=exact;suppress:3)"
        ),
    ] = "",
    out: FolderOut = Path("publication_sweep"),
    k: Annotated[
        str, typer.Option("--k", help="Columns per claim, a comma list (default: the population's)")
    ] = "",
    k_solutions: Annotated[
        int, typer.Option("--k-solutions", "-K", help="Solutions generated per block")
    ] = 20,
    block_time_limit: Annotated[
        float,
        typer.Option(
            help="Seconds per block, reconstruction and uniqueness proof included; claims "
            "verified before it are kept, a block it cuts short makes its rule's figures lower "
            "bounds"
        ),
    ] = 60.0,
    seed: Annotated[int, typer.Option(help="Seed of random rounding and of the solutions")] = 0,
    solver: Solver = "auto",
    threads: Threads = 1,
    time_limit: TimeLimit = 60.0,
    workers: Workers = 1,
    blocks: Annotated[
        int,
        typer.Option(
            help="Sweep the N blocks nearest the median number of records (the audit's sample, "
            "Liu et al.'s 50 median blocks); 0: every block"
        ),
    ] = 0,
) -> None:
    """What would have stopped it: the records' block tables published under each rule
    (rounded, withheld below a threshold), attacked as published, and measured: blocks with one
    consistent population, records singled out by verified claims, cells changed and L1 per
    block. Writes sweep.csv (a row as each rule finishes) and sweep.png."""
    from ...io import write_csv
    from ...metrics.publication_sweep import DEFAULT_RULES, plot_sweep
    from ...metrics.publication_sweep import sweep_publication as _sweep
    from ...tables.declaration import population

    pop = population(schema)
    if pop.generic:  # modelled finer than its block tables tell: swept at their resolution
        pop = population(pop.generic)
        err.print(f"[dim]{schema}: block tables swept as {pop.name} ({pop.description})[/dim]")
    sep = ";" if ";" in rules else ","  # a rule with per-table parts holds commas itself
    chosen = [r.strip() for r in rules.split(sep) if r.strip()] or list(DEFAULT_RULES)
    pubs = [publication_rule(pop, r) for r in chosen]  # every rule checked before any work
    twice = sorted({str(p) for p in pubs if [str(q) for q in pubs].count(str(p)) > 1})
    if twice:
        raise TabreconError(f"--rules: {', '.join(twice)} given twice; list each rule once")
    try:
        ks = tuple(sorted({int(x) for x in k.split(",") if x.strip()})) or None
    except ValueError:
        raise TabreconError(f"--k: {k!r} is not a comma list of numbers such as 1,2") from None
    at_least(1, k_solutions=k_solutions)
    positive_finite(block_time_limit=block_time_limit)
    at_least(0, blocks=blocks)
    units = pop.records(records)
    if blocks:
        from ...audit.units import median_blocks
        from ...tables.spec import cell_tables, tabulate_units

        if not pop.size_cell:
            raise TabreconError(f"--blocks: {pop.name} publishes no total of its records")
        size = tabulate_units(units, [cell_tables(pop)[pop.size_cell]])
        units = units.in_blocks(median_blocks(size, blocks, pop.size_cell))
    out.mkdir(parents=True, exist_ok=True)
    opts = solver_options(solver, threads, time_limit, seed, workers)
    done: list[dict] = []
    place = pop.schema.geography

    def each(row: dict) -> None:
        import polars as pl

        done.append(row)
        write_csv(pl.DataFrame(done), out / "sweep.csv")
        console.print(
            f"{row['rule']}: {row['blocks_unique']:,} of {row['blocks']:,} {place}s unique, "
            f"{row['singled_out']:,} {pop.noun} singled out ({row['singled_out_pct']:.1f}%), "
            f"{row['cells_changed']:,} counts changed, L1 per {place} {row['l1_per_block']:.1f} "
            f"({row['seconds']:.1f} s)"
            + (
                f"; [yellow]{row['blocks_undecided']:,} {place}(s) undecided and "
                f"{row['blocks_time_limit']:,} at the {place} time limit: the figures are lower "
                "bounds[/yellow]"
                if row["blocks_undecided"] or row["blocks_time_limit"]
                else ""
            )
        )

    df = _sweep(
        units,
        pop,
        pubs,
        k_values=ks,
        k_solutions=k_solutions,
        seed=seed,
        solver=opts,
        block_seconds=block_time_limit,
        workers=workers,
        each=each,
    )
    png = plot_sweep(df, out / "sweep.png", pop.noun)
    console.print(f"written {out / 'sweep.csv'}, {png}")
    if (df["claims_false"] > 0).any() or (df["failed_blocks"] > 0).any():
        err.print("[red]some blocks failed or a claim was false: see sweep.csv[/red]")
        raise typer.Exit(1)


@app.command()
def calibrate(
    records: Annotated[
        Path | None,
        typer.Argument(help="Person records (CSV, CSV.gz or Parquet); none: a synthetic county"),
    ] = None,
    persons: Annotated[
        int, typer.Option(help="Size of the synthetic county when no records are given")
    ] = 100_000,
    defense: Annotated[
        str, typer.Option(help="What protects the 2020 side (none: its exact tables)")
    ] = "dhc2020-production",
    per_size: Annotated[
        int, typer.Option(help="Blocks attacked per block-size bin (by their true size)")
    ] = 10,
    k: Annotated[str, typer.Option("--k", help="Columns per claim, a comma list")] = "1,2,3,4",
    k_solutions: Annotated[
        int, typer.Option("--k-solutions", "-K", help="Solutions generated per block")
    ] = 20,
    block_time_limit: Annotated[
        float, typer.Option(help="Seconds per block; claims verified before it are kept")
    ] = 60.0,
    seed: Seed = 0,
    workers: Workers = 1,
    out: FolderOut = Path("calibration"),
) -> None:
    """How often the claims a protected release's tables prove are true of the people: the
    records protected by --defense (the production TopDown by default) and published as the
    2020 DHC's block person tables, beside the same records' exact SF1 2010 tables; claims
    proven by Generate-then-Verify on the same sampled blocks of each, each scored against the
    records. Writes report.html, calibration.csv (by side, claim size and block size),
    claims.parquet (every verified claim and whether it is true) and calibration.md."""
    from ...metrics import calibration as cal
    from ...report.calibration import write_calibration_report
    from ...schema.registry import population

    problem = cal.Defense.check(defense)
    if problem:
        raise TabreconError(f"--defense {defense!r}: {problem}")
    try:
        ks = tuple(sorted({int(x) for x in k.split(",") if x.strip()}))
    except ValueError:
        raise TabreconError(f"--k: {k!r} is not a comma list of numbers such as 1,2") from None
    at_least(1, persons=persons, per_size=per_size, k_solutions=k_solutions)
    positive_finite(block_time_limit=block_time_limit)
    pop = population("persons")
    if not ks or not all(1 <= x <= len(pop.schema.claim_columns) for x in ks):
        raise TabreconError(f"--k: use numbers of columns in 1..{len(pop.schema.claim_columns)}")
    truth = cal.confidential(records, persons, seed)
    err.print(f"[dim]{len(truth):,} persons; the 2020 side protected by {defense}[/dim]")
    got = cal.calibrate(
        truth,
        persons=pop,
        defense=defense,
        per_size=per_size,
        k_values=ks,
        k_solutions=k_solutions,
        block_seconds=block_time_limit,
        seed=seed,
        workers=workers,
    )
    source = str(records) if records is not None else f"a synthetic county of {persons:,} persons"
    said = f"{source}, seed {seed}, K = {k_solutions}"
    got.write(out, source=said)
    write_calibration_report(got, out, said)
    console.print(got.table())
    console.print(f"written {out}/report.html, calibration.csv, claims.parquet, calibration.md")
