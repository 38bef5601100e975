"""The households part of an audit: from a housing-unit file (and, beside a person file, the
check that both describe the same households) to the housing-unit tables, Generate-then-Verify
on the study's sample of median-size blocks, and the figures the report shows.

Liu et al. (2025) attacked 50 blocks, each of its state's median size; ``[households] blocks``
(default 50) picks the blocks nearest the median number of housing units the same way (0: every
block). Each block's claims are written as it finishes under ``work/households/`` and a resumed
audit keeps them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from .attacks.solvers import SolverOptions
from .attacks.unit_claims import HouseholdClaimsRun, household_claims
from .config import AuditConfig
from .schema.catalog import HOUSING_UNITS
from .schema.spec import Units, read_units
from .unit_tables import tabulate_units


def median_blocks(long: pl.DataFrame, n: int) -> list[str]:
    """The ``n`` blocks whose number of housing units (cell H0010001) is nearest the median
    (ties by geoid); every block when ``n`` is 0 or at least the number of blocks.

    >>> t = pl.DataFrame({"geoid": ["a", "b", "c"], "cell": ["H0010001"] * 3, "value": [1, 5, 9]})
    >>> median_blocks(t, 1)
    ['b']
    """
    size = long.filter(pl.col("cell") == "H0010001").select("geoid", "value")
    if n <= 0 or n >= size.height:
        return sorted(size["geoid"].to_list())
    med = float(size["value"].median())  # type: ignore[arg-type]
    pick = (
        size.with_columns((pl.col("value") - med).abs().alias("d"))
        .sort("d", "geoid")
        .head(n)["geoid"]
    )
    return sorted(pick.to_list())


def households_stage(
    units_path: Path,
    work: Path,
    cfg: AuditConfig,
    resume: bool,
    progress: Callable[[str, int], Callable[[dict], None]] | None = None,
    persons: Any = None,
) -> tuple[dict, dict[str, pl.DataFrame], Units]:
    """Run the households part; return its summary, its frames (``households_by_k``,
    ``households_blocks``) and the units read. With ``persons`` (the audit's person file read)
    the two files must describe the same households (:func:`check_households` names the first
    disagreement)."""
    h = cfg.households
    t0 = time.perf_counter()
    units = read_units(units_path, HOUSING_UNITS)
    if persons is not None:
        from .households import check_households

        check_households(persons, units)
    long = tabulate_units(units)
    pick = median_blocks(long, h.blocks)
    sub = long.filter(pl.col("geoid").is_in(pick))
    opts = SolverOptions(
        backend=cfg.reconstruct.solver, time_limit=min(cfg.reconstruct.time_limit, 60.0)
    )
    tick = progress("households: claims", len(pick)) if progress is not None else None
    run = household_claims(
        sub,
        h.k_values,
        h.k_solutions,
        cfg.run.seed,
        opts,
        h.block_time_limit,
        cfg.run.workers,
        work / "households",
        resume,
        tick,
        units,
    )
    by_k = run.by_k()  # matches every claim against the truth: once
    summary = household_summary(run, by_k, units, long, pick, h.blocks, time.perf_counter() - t0)
    return summary, {"households_by_k": by_k, "households_blocks": run.blocks}, units


def household_summary(
    run: HouseholdClaimsRun,
    by_k: pl.DataFrame,
    units: Units,
    long: pl.DataFrame,
    pick: list[str],
    wanted: int,
    seconds: float,
) -> dict:
    """The figures the report cites, with how they were measured."""
    s = run.summary()
    sizes = long.filter(pl.col("cell") == "H0010001")["value"]
    occupied = int((units.codes["vacancy_status"] == 0).sum())
    return {
        **s,
        "file": str(units.source),
        "housing_units": len(units),
        "occupied": occupied,
        "blocks_in_file": int(sizes.len()),
        "median_units_per_block": float(sizes.median()),  # type: ignore[arg-type]
        "sample": (
            "every block"
            if len(pick) == int(sizes.len())
            else f"the {len(pick)} blocks nearest the median of "
            f"{float(sizes.median()):g} housing units"  # type: ignore[arg-type]
        ),
        "blocks_wanted": wanted,
        "failures": [f"block {r['unit']}: {r.get('message', r['status'])}" for r in run.failed]
        + [
            f"block {r['geoid']}: its tables contradict each other"
            for r in run.blocks.filter(pl.col("status") == "infeasible").iter_rows(named=True)
        ],
        "singleton_blocks_by_k": {
            str(r["k"]): int(r["blocks_with_singleton"]) for r in by_k.iter_rows(named=True)
        },
        "seconds": round(seconds, 2),
    }
