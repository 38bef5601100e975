"""Housing units and persons of each block: reconstructed apart and together, side by side (issue
37 item 2).

Run (from the repository root):
python -m benchmarks.bench_joint [--persons 10000] [--seed 5]

On a synthetic county with its housing units (``synthesize_households``), every block's SF1 2010
household tables (64 tables, 850 cells) and person block tables (agebin38) are attacked three
ways in one run: households alone, persons alone (each from its own release, with uniqueness
proofs) and both together (:func:`tabrecon.attacks.joint.reconstruct_together`: the 381 ties
between householders and persons). Printed: seconds for each, blocks whose housing units (and
persons) are unique alone and given both releases, how many blocks' separate reconstructions
break some tie and which ties break most often, and the per-block time of the joint run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from benchmarks.common import machine, record
from tabrecon.attacks.joint import reconstruct_together, tie_matrices, tie_violations
from tabrecon.engine.reconstruct import reconstruct_units
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.schema import person_units
from tabrecon.schema.registry import population
from tabrecon.tables.spec import tabulate_units


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    print(machine())
    md, units = synthesize_households(SynthConfig(persons=a.persons), seed=a.seed)
    persons = person_units(md, binned=True)
    lu, lp = tabulate_units(units), tabulate_units(persons)
    nb = lu["geoid"].n_unique()
    print(
        f"county: {len(md):,} persons, {len(units):,} housing units, {nb:,} blocks (seed {a.seed})"
    )

    t = time.perf_counter()
    alone_u = reconstruct_units(lu, population("households"))
    t_u = time.perf_counter() - t
    t = time.perf_counter()
    alone_p = reconstruct_units(lp, population("persons_binned"))
    t_p = time.perf_counter() - t
    t = time.perf_counter()
    joint = reconstruct_together(lu, lp, population("households"))
    t_j = time.perf_counter() - t

    apart = tie_violations(alone_u.units, alone_p.units, tie_matrices(population("households")))
    b = joint.blocks

    def n_unique(frame: pl.DataFrame, col: str) -> int:
        return int((frame[col] == "unique").sum())

    fig = {
        "blocks": nb,
        "seconds_households_alone": round(t_u, 1),
        "seconds_persons_alone": round(t_p, 1),
        "seconds_together": round(t_j, 1),
        "ratio_together_to_apart": round(t_j / (t_u + t_p), 2),
        "households_unique_alone": n_unique(alone_u.blocks, "status"),
        "households_unique_together": n_unique(b, "units_verdict"),
        "persons_unique_alone": n_unique(alone_p.blocks, "status"),
        "persons_unique_together": n_unique(b, "others_verdict"),
        "blocks_consistent_together": int((b["status"] == "consistent").sum()),
        "blocks_whose_apart_reconstructions_break_a_tie": apart["geoid"].n_unique(),
        "ties_broken_apart": apart.height,
        "ties_broken_together": joint.violations().height,
    }
    print(
        f"seconds: households alone {t_u:.1f}, persons alone {t_p:.1f}, together {t_j:.1f} "
        f"(ratio to both apart {fig['ratio_together_to_apart']})"
    )
    print(
        f"blocks with unique housing units: {fig['households_unique_alone']} alone, "
        f"{fig['households_unique_together']} given both releases (of {nb})"
    )
    print(
        f"blocks with unique persons (agebin38): {fig['persons_unique_alone']} alone, "
        f"{fig['persons_unique_together']} given both releases"
    )
    print(
        f"reconstructed apart, {fig['blocks_whose_apart_reconstructions_break_a_tie']} blocks "
        f"break {apart.height} ties; together {fig['ties_broken_together']}"
    )
    if apart.height:
        kind = apart.with_columns(pl.col("tie").str.replace(r" aged .*", "").alias("kind"))[
            "kind"
        ].value_counts(sort=True)
        for kind_, n in kind.head(5).iter_rows():
            print(f"  {n:5d}  {kind_}")
    s = b["seconds"].to_numpy()
    print(
        f"per block (together): median {float(np.median(s)):.2f} s, "
        f"p90 {float(np.quantile(s, 0.9)):.2f}, max {float(s.max()):.2f}"
    )
    return fig


if __name__ == "__main__":
    record("joint", main)
