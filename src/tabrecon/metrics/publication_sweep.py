"""What would have stopped it: a release's risk and accuracy under each publication rule.

For each rule (:mod:`tabrecon.tables.publication`: exact, rounded to a base, withheld below a
threshold) the records' block tables are published under it, attacked as published (each cell
the interval its value allows: reconstruction with its uniqueness proof, and Generate-then-
Verify), and measured against the records:

* risk: blocks whose published values admit exactly one population (``blocks_unique``), and
  records singled out by a verified claim with m = 1 (``singled_out``; every claim is checked
  true of the records, ``claims_false`` must be 0);
* accuracy lost: cells whose published value differs from the true count (``cells_changed``,
  withheld ones included), and the mean over blocks of the L1 distance between published and
  true values (``l1_per_block``; a withheld cell counts its true value: the user lost it).

>>> from tabrecon.schema.registry import population
>>> from tabrecon.records.synth import SynthConfig
>>> gq = population("group_quarters")
>>> units = gq.synthesize(SynthConfig(persons=40_000), 1)
>>> df = sweep_publication(units, gq, ["exact", "suppress:3"], k_solutions=5, k_values=(1, 2))
>>> df["rule"].to_list(), df["claims_false"].to_list()
(['exact', 'suppress:3'], [0, 0])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..attacks.claims.release import ClaimsOptions, matching_units, release_claims
from ..engine.solvers import SolverOptions
from ..runner import RunOptions
from ..schema.spec import Units
from ..tables.publication import MISSING, Publication
from ..tables.publishing import publish_counts
from ..tables.spec import cell_tables, tables_in, tabulate_units

if TYPE_CHECKING:
    from ..schema.registry import Population

#: the rules swept when none are named: each kind at the bases and thresholds agencies use
DEFAULT_RULES = (
    "exact",
    "round:2",
    "round:3",
    "round:5",
    "round:10",
    "round:3:random",
    "round:5:random",
    "suppress:3",
    "suppress:5",
    "suppress:10",
    "suppress:3:complementary",
    "suppress:5:complementary",
)


def sweep_publication(
    units: Units,
    pop: Population,
    rules: Sequence[str | Publication] = DEFAULT_RULES,
    *,
    k_values: tuple[int, ...] | None = None,
    k_solutions: int = 20,
    seed: int = 0,
    solver: SolverOptions | None = None,
    block_seconds: float | None = 60.0,
    workers: int = 1,
    each: Callable[[dict], None] | None = None,
) -> pl.DataFrame:
    """One row per rule (the module's text says what each column measures); ``each`` is called
    with each row as it is measured (the command line writes and prints it at once)."""
    schema = pop.schema
    long = tabulate_units(units, tables_in(tabulate_units(units), pop, "block"))
    of = cell_tables(pop)
    n_blocks = int(long["geoid"].n_unique())
    rows = []
    for r in rules:
        pub = r if isinstance(r, Publication) else Publication.parse(r)
        pub.check_tables(list(dict.fromkeys(of.values())), schema.name)
        # the rule publishes the counts; medians and means as declared (not rounded by it)
        released, true, shown = publish_counts(long, pop, pub, seed)
        lost = np.where(shown == MISSING, true, np.abs(shown - true))
        t0 = time.perf_counter()
        run = release_claims(
            released,
            pop,
            ClaimsOptions(
                k_values=k_values,
                k_solutions=k_solutions,
                seed=seed,
                solver=solver or SolverOptions(),
                block_seconds=block_seconds,
                publication=pub,
            ),
            run=RunOptions(workers=workers),
            truth=units,
        )
        c = run.claims
        hits = matching_units(c, units) if c.height else []
        false = sum(len(h) != m for h, m in zip(hits, c["m"].to_list(), strict=True))
        single = {int(i) for h, m in zip(hits, c["m"].to_list(), strict=True) if m == 1 for i in h}
        s = run.summary()
        row = {
            "rule": str(pub),
            "blocks": n_blocks,
            "blocks_unique": s["blocks_unique_reconstruction"],
            "blocks_unique_pct": 100.0 * s["blocks_unique_reconstruction"] / n_blocks,
            "blocks_undecided": s["blocks_reconstruction_undecided"],
            "blocks_time_limit": s["blocks_time_limit"],
            "records": len(units),
            "singled_out": len(single),
            "singled_out_pct": 100.0 * len(single) / max(len(units), 1),
            "verified_claims": c.height,
            "claims_false": false,
            "cells": int(true.size),
            "cells_changed": int((shown != true).sum()),
            "cells_withheld": int((shown == MISSING).sum()),
            "l1_per_block": float(lost.sum() / max(n_blocks, 1)),
            "failed_blocks": len(run.failed),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        rows.append(row)
        if each is not None:
            each(row)
    return pl.DataFrame(rows)


def plot_sweep(df: pl.DataFrame, path: Path, noun: str = "records") -> Path:
    """Risk against accuracy lost, one point per rule: records singled out (%) and blocks with
    one consistent population (%) against the mean L1 per block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    x = df["l1_per_block"].to_numpy()
    ax.scatter(x, df["singled_out_pct"].to_numpy(), label=f"{noun} singled out (%)")
    ax.scatter(x, df["blocks_unique_pct"].to_numpy(), marker="s", label="blocks unique (%)")
    unique = df["blocks_unique_pct"].to_list()
    cut = ((df["blocks_undecided"] + df["blocks_time_limit"]) > 0).to_list()
    for xi, yi, rule, c in zip(x, unique, df["rule"].to_list(), cut, strict=True):
        ax.annotate(
            rule + ("*" if c else ""),
            (xi, yi),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.set(
        xlabel="accuracy lost: mean L1 per block (published vs true counts)"
        + (
            "\n* blocks left undecided at the time limit: that rule's figures are lower bounds"
            if any(cut)
            else ""
        ),
        ylabel="per cent",
        title="What each publication rule leaves exposed",
        ylim=(0, 105),
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    from ..io import write_figure

    try:
        return write_figure(fig, path, bbox_inches="tight")
    finally:
        plt.close(fig)
