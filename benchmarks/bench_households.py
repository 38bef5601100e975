"""Households: synthesis, tabulation, reconstruction with uniqueness, and Generate-then-Verify on
50 blocks of median size (issues 19, 37), on SF1 2010's household tables declared from the
Bureau's layout.

Run (from the repository root):
python -m benchmarks.bench_households [--persons 200000] [--blocks 50] [--K 20] [--workers 2]
    [--sets full,sf1-12]

Each table set is attacked on the same blocks, side by side in one run: ``full`` is every table
the housing-unit schema determines (64 tables, 850 cells per block: ``tabrecon tables list
--schema households``); ``full+persons`` the same with the person block tables of the same blocks
(agebin38), every solution and proof given both releases (:mod:`tabrecon.attacks.joint`);
``sf1-12`` the 12 tables (120 cells) declared before issue 37.
Generate-then-Verify runs through ``release_claims`` (the runner ``tabrecon claims --schema
households`` uses), block by block on ``--workers`` processes.

Not the study's setting: Liu et al. used the 2020 DHC household tables (621 statistics per block);
these are their 2010 counterparts, so the study's figures are printed beside ours for orientation.
Writes ``benchmarks/results/households_by_k.csv`` and ``.png`` (its Figure 2 / Tables 2-3) for
the first set.
"""

from __future__ import annotations

import argparse
import time
from typing import cast

import numpy as np
import polars as pl

from benchmarks.common import RESULTS, machine, record
from tabrecon.attacks.claims.release import (
    STUDY_TABLES_2_3,
    ClaimsOptions,
    matching_units,
    release_claims,
)
from tabrecon.attacks.joint import reconstruct_together
from tabrecon.engine.reconstruct import reconstruct_units
from tabrecon.populations.households import housing_tables
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.runner import RunOptions
from tabrecon.schema import person_units
from tabrecon.schema.registry import population
from tabrecon.tables.spec import tabulate_units

#: the tables households were attacked on before issue 37 (120 cells per block)
SF1_12 = ("H1", "H3", "H4", "H5", "H6", "H7", "H13", "H14", "H15", "H16", "H17", "P18")


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=200_000)
    ap.add_argument("--blocks", type=int, default=50)
    ap.add_argument("--k-solutions", "--K", dest="k_solutions", type=int, default=20)
    ap.add_argument("--k", default="2,3,4,5,6,7,8,9,10", help="columns per claim")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sets", default="full,full+persons,sf1-12", help="table sets, side by side")
    a = ap.parse_args()
    print(f"# households benchmark -- {machine()}")
    t = time.perf_counter()
    md, units = synthesize_households(SynthConfig(persons=a.persons), seed=5)
    print(f"synthesize {len(md):,} persons, {len(units):,} units: {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    long = tabulate_units(units)
    n_tables = len(housing_tables())
    per_block = long.filter(pl.col("geoid") == long["geoid"][0]).height
    print(
        f"tabulate {n_tables} tables ({per_block} cells per block): {time.perf_counter() - t:.1f} s"
    )
    size = units.to_frame().group_by("block_geoid").len()
    median = int(cast(float, size["len"].median()))
    pick = (
        size.with_columns((pl.col("len") - median).abs().alias("d"))
        .sort("d", "block_geoid")
        .head(a.blocks)["block_geoid"]
        .to_list()
    )
    out: dict = {"blocks": len(pick), "median_units": median, "workers": a.workers}
    persons = tabulate_units(person_units(md, binned=True)).filter(pl.col("geoid").is_in(pick))
    for i, name in enumerate(a.sets.split(",")):
        sub = long.filter(pl.col("geoid").is_in(pick))
        tied = persons if name == "full+persons" else None
        if name == "sf1-12":
            keep = [c.id for t in housing_tables() if t.name in SF1_12 for c in t.cells()]
            sub = sub.filter(pl.col("cell").is_in(keep))
        cells = sub.filter(pl.col("geoid") == pick[0]).height
        if tied is not None:
            cells += tied.filter(pl.col("geoid") == pick[0]).height
        print(f"\n## table set {name}: {cells} cells per block")
        out[name] = _attack(sub, units, pick, median, a, cells, write=i == 0, tied=tied)
    return out


def _attack(
    sub: pl.DataFrame,
    units,
    pick,
    median: int,
    a,
    cells: int,
    write: bool,
    tied: pl.DataFrame | None = None,
) -> dict:
    t = time.perf_counter()
    if tied is None:
        rec = reconstruct_units(sub, population("households"))
        unique = int((rec.blocks["status"] == "unique").sum())
        n_units = int(rec.blocks["units"].sum())
    else:  # given both releases
        joint = reconstruct_together(sub, tied, population("households"))
        unique = int((joint.blocks["units_verdict"] == "unique").sum())
        n_units = int(joint.blocks["units"].sum())
    recon_s = time.perf_counter() - t
    print(
        f"{len(pick)} blocks of about the median {median} units: reconstruction "
        f"{recon_s:.1f} s, {unique} unique (paper: 1 of 50)"
    )
    t = time.perf_counter()
    ks = tuple(int(x) for x in a.k.split(","))
    run = release_claims(
        sub,
        population("households"),
        ClaimsOptions(k_values=ks, k_solutions=a.k_solutions, seed=0, block_seconds=None),
        run=RunOptions(workers=a.workers),
        truth=units,
        tied=tied,
    )
    wall = time.perf_counter() - t
    sec = run.blocks["seconds"].to_numpy()
    print(
        f"Generate-then-Verify, K = {a.k_solutions}, k = {a.k}, {a.workers} worker(s): "
        f"{wall:.1f} s "
        f"(target <= 300 on 2 cores); per block median {np.median(sec):.2f} s, 90th percentile "
        f"{np.percentile(sec, 90):.2f} s, max {sec.max():.2f} s"
    )
    deciles = np.percentile(sec, range(10, 101, 10))
    print("per-block seconds, deciles: " + ", ".join(f"{q:.2f}" for q in deciles))
    c = run.claims
    hits = matching_units(c, units)
    true_ok = all(h.size == m for h, m in zip(hits, c["m"].to_list(), strict=True))
    print(f"verified claims {c.height:,}, all true of the units: {true_ok}")
    fig = run.by_k()
    rows = {}
    for r in fig.iter_rows(named=True):
        k = r["k"]
        rows[k] = r
        paper = STUDY_TABLES_2_3.get(k)
        print(
            f"  k = {k}: blocks with a verified singleton {r['blocks_with_singleton_pct']:.0f}%, "
            f"units singled out {r['units_singled_out']}/{n_units}, covered by any verified "
            f"claim {r['units_covered']}, median binomial baseline {r['baseline_median']:.3f}"
            + (
                f" (study, DHC tables: {paper[0]}/486 singled out, {paper[1]} covered"
                + ("; > 90% of blocks" if k == 5 else "")
                + ")"
                if paper
                else ""
            )
        )
    if write:
        RESULTS.mkdir(exist_ok=True)
        fig.write_csv(RESULTS / "households_by_k.csv")
        _plot(fig, RESULTS / "households_by_k.png")
        print(f"Figure 2 / Tables 2-3 layout: {RESULTS / 'households_by_k.csv'} and .png")
    return {
        "cells_per_block": cells,
        "unique": unique,
        "reconstruct_seconds": round(recon_s, 1),
        "gtv_seconds": round(wall, 1),
        "block_seconds_median": float(np.median(sec)),
        "block_seconds_max": float(sec.max()),
        "verified": c.height,
        "all_true": true_ok,
        "by_k": rows,
    }


def _plot(fig: pl.DataFrame, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].bar(fig["k"], fig["blocks_with_singleton_pct"])
    ax[0].set(xlabel="columns k", ylabel="% of blocks", title="blocks with a verified singleton")
    ax[1].plot(fig["k"], fig["units_singled_out"], "o-", label="singled out")
    ax[1].plot(fig["k"], fig["units_covered"], "s--", label="covered by any claim")
    ax[1].set(xlabel="columns k", ylabel="units", title="units")
    ax[1].legend()
    f.tight_layout()
    f.savefig(path, dpi=120)
    plt.close(f)


if __name__ == "__main__":
    record("households", main)
