"""The Generate-then-Verify part of an audit, for any registered population (housing units,
group-quarters persons, ...): from a file of its records (and, for housing units beside a person
file, the check that both describe the same households) to its tables, Generate-then-Verify on the
study's sample of median-size blocks, and the figures the report shows.

Liu et al. (2025) attacked 50 blocks, each of its state's median size; ``[households] blocks``
(default 50) picks the blocks nearest the median number of records the same way (0: every
block). The ``[households]`` settings hold for every population audited this way; ``k_values``
left at its default becomes the population's own (1..3 for group quarters: it has three
columns). Each block's claims are written as it finishes under ``work/<population>/`` and a
resumed audit keeps them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from ..attacks.claims.release import ClaimsOptions, ReleaseClaimsRun, release_claims
from ..engine.solvers import SolverOptions
from ..runner import RunOptions
from ..schema.registry import Population
from ..schema.spec import Units
from ..tables.publication import Publication
from ..tables.publishing import publish_counts
from ..tables.reader import read_unit_tables
from ..tables.spec import tabulate_units
from ..vocab import ClaimStatus
from .config import AuditConfig, HouseholdsConfig


def median_blocks(long: pl.DataFrame, n: int, size_cell: str = "H0010001") -> list[str]:
    """The ``n`` blocks whose number of records (``size_cell``: housing units, H0010001, unless
    told) is nearest the median (ties by geoid); every block when ``n`` is 0 or at least the
    number of blocks.

    >>> t = pl.DataFrame({"geoid": ["a", "b", "c"], "cell": ["H0010001"] * 3, "value": [1, 5, 9]})
    >>> median_blocks(t, 1)
    ['b']
    """
    size = long.filter(pl.col("cell") == size_cell).select("geoid", "value")
    if n <= 0 or n >= size.height:
        return sorted(size["geoid"].to_list())
    med = float(size["value"].median())  # type: ignore[arg-type]
    pick = (
        size.with_columns((pl.col("value") - med).abs().alias("d"))
        .sort("d", "geoid")
        .head(n)["geoid"]
    )
    return sorted(pick.to_list())


def k_values_for(pop: Population, cfg: AuditConfig) -> tuple[int, ...]:
    """The configured k values, or the population's own where the configuration keeps the
    default (the housing units' 5..10 mean nothing to a schema of three columns)."""
    ks = cfg.households.k_values
    return pop.k_values if ks == HouseholdsConfig().k_values else ks


def units_stage(
    pop: Population,
    units_path: Path,
    work: Path,
    cfg: AuditConfig,
    resume: bool,
    progress: Callable[[str, int], Callable[[dict], None]] | None = None,
    check: Callable[[Units], Any] | None = None,
    published: bool = False,
    tied: pl.DataFrame | None = None,
) -> tuple[dict, dict[str, pl.DataFrame], Units | None]:
    """Run the part of ``pop``; return its summary, its frames (``<name>_by_k``,
    ``<name>_blocks``) and the records read. ``check`` is called on the records before any
    work (a person audit passes the check that its person file describes the same households)
    and raises to refuse them. ``published``: ``units_path`` holds the published tables (any
    form :func:`~tabrecon.tables.reader.read_unit_tables` reads), not records: the claims are
    verified without a truth to match them against (no record returned). ``tied``: the block
    tables of the population ``pop``'s records tie to (a person audit's person tables), with
    which every claim is verified (:mod:`tabrecon.attacks.joint`)."""
    h = cfg.households
    t0 = time.perf_counter()
    units: Units | None = None
    # a declared release is attacked as it publishes its counts (rounded, withheld: its rule)
    pub = Publication.parse(pop.publication)
    if published:
        tables = read_unit_tables(units_path, pop, withheld=pub.withholds)
        long = tables.own_levels().to_frame()
    else:
        units = pop.records(units_path)
        if check is not None:
            check(units)
        long = tabulate_units(units)
        if not pub.exact:
            long = publish_counts(long, pop, pub, cfg.run.seed)[0]
    pick = median_blocks(long, h.blocks, pop.size_cell)
    sub = long.filter(pl.col("geoid").is_in(pick))
    opts = SolverOptions(
        backend=cfg.reconstruct.solver, time_limit=min(cfg.reconstruct.time_limit, 60.0)
    )
    tick = progress(f"{pop.name}: claims", len(pick)) if progress is not None else None
    run = release_claims(
        sub,
        pop,
        ClaimsOptions(
            k_values=k_values_for(pop, cfg),
            k_solutions=h.k_solutions,
            seed=cfg.run.seed,
            solver=opts,
            block_seconds=h.block_time_limit,
            publication=pub,
        ),
        run=RunOptions(workers=cfg.run.workers, out=work / pop.name, resume=resume, progress=tick),
        truth=units,
        tied=tied.filter(pl.col("geoid").is_in(pick)) if tied is not None else None,
    )
    by_k = run.by_k()  # matches every claim against the truth: once
    summary = units_summary(
        pop, run, by_k, units, long, pick, h.blocks, time.perf_counter() - t0, str(units_path)
    )
    if tied is not None and pop.tied is not None:
        summary["given"] = f"the {pop.tied.known_as} tables of the same blocks too"
    summary["publication"] = str(pub)
    summary["geography"] = pop.schema.geography
    frames = {f"{pop.name}_by_k": by_k, f"{pop.name}_blocks": run.blocks}
    if h.publication_rules and units is not None:
        sweep, summary["sweep"] = _sweep(pop, units, pick, cfg, work, resume, progress)
        frames[f"{pop.name}_sweep"] = sweep
        for r in sweep.iter_rows(named=True):  # a false claim or a failed block fails the run
            if r["claims_false"] or r["failed_blocks"]:
                summary["failures"].append(
                    f"publication {r['rule']}: {r['claims_false']} false claim(s), "
                    f"{r['failed_blocks']} failed block(s)"
                )
    return summary, frames, units


def _sweep(
    pop: Population,
    units: Units,
    pick: list[str],
    cfg: AuditConfig,
    work: Path,
    resume: bool,
    progress: Callable[[str, int], Callable[[dict], None]] | None,
) -> tuple[pl.DataFrame, dict]:
    """The sampled blocks published under each of ``[households] publication_rules`` and
    attacked as published (:func:`tabrecon.metrics.publication_sweep.sweep_publication`); a
    finished sweep is kept under ``work/<population>_sweep.csv`` for a resumed audit with the
    same rules."""
    from ..io import write_csv
    from ..metrics.publication_sweep import sweep_publication

    h = cfg.households
    rules = list(h.publication_rules)
    done = work / f"{pop.name}_sweep.csv"
    if resume and done.exists():
        kept = pl.read_csv(done)
        if kept["rule"].to_list() == [str(r) for r in _parsed(rules)]:
            return kept, {"rules": rules, "blocks": len(pick), "seconds": 0.0, "resumed": True}
    sample = units.in_blocks(pick)
    tick = progress(f"{pop.name}: publication rules", len(rules)) if progress else None
    t0 = time.perf_counter()
    df = sweep_publication(
        sample,
        pop,
        rules,
        k_values=k_values_for(pop, cfg),
        k_solutions=h.k_solutions,
        seed=cfg.run.seed,
        solver=SolverOptions(
            backend=cfg.reconstruct.solver, time_limit=min(cfg.reconstruct.time_limit, 60.0)
        ),
        block_seconds=h.block_time_limit,
        workers=cfg.run.workers,
        each=(lambda row: tick({"unit": row["rule"], "status": "ok"})) if tick else None,
    )
    work.mkdir(parents=True, exist_ok=True)
    write_csv(df, done)
    return df, {"rules": rules, "blocks": len(pick), "seconds": round(time.perf_counter() - t0, 1)}


def _parsed(rules: list[str]) -> list[object]:
    from ..tables.publication import Publication

    return [Publication.parse(r) for r in rules]


def units_summary(
    pop: Population,
    run: ReleaseClaimsRun,
    by_k: pl.DataFrame,
    units: Units | None,
    long: pl.DataFrame,
    pick: list[str],
    wanted: int,
    seconds: float,
    source: str = "",
) -> dict:
    """The figures the report cites, with how they were measured (``units`` None: the input was
    the published tables, whose size cells give the number of records)."""
    s = run.summary()
    sizes = long.filter(pl.col("cell") == pop.size_cell)["value"]
    return {
        **s,
        "population": pop.key,  # the release too (households@dhc-2020)
        "noun": pop.noun,
        "file": str(units.source) if units is not None else source,
        "input": "records" if units is not None else "published tables",
        "records": len(units) if units is not None else int(sizes.sum()),
        "aside": pop.aside(units) if pop.aside is not None and units is not None else "",
        "blocks_in_file": int(sizes.len()),
        "median_units_per_block": float(sizes.median()),  # type: ignore[arg-type]
        "sample": (
            f"every {pop.schema.geography}"
            if len(pick) == int(sizes.len())
            else f"the {len(pick)} {pop.schema.geography}s nearest the median of "
            f"{float(sizes.median()):g} {pop.noun}"  # type: ignore[arg-type]
        ),
        "blocks_wanted": wanted,
        "failures": [f"block {r['unit']}: {r.get('message', r['status'])}" for r in run.failed]
        + [
            f"block {r['geoid']}: its tables contradict each other"
            for r in run.blocks.filter(pl.col("status") == ClaimStatus.INFEASIBLE).iter_rows(
                named=True
            )
        ],
        "singleton_blocks_by_k": {
            str(r["k"]): int(r["blocks_with_singleton"]) for r in by_k.iter_rows(named=True)
        },
        "seconds": round(seconds, 2),
    }
