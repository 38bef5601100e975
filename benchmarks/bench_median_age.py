"""What a median gives away (issue 38): SF1's median age (P13, one decimal) added to the 34
tables' block tables, on the real sample, blocks proven unique with and without it.

Run (from the repository root):
python -m benchmarks.bench_median_age [--tracts 28]

The real sample's persons (the Bureau's reconstruction, every block of zero solution
variability) are tabulated over the person schema by single year of age: the 34 tables' block
tables (P1, P6-P12, P14, P12A-I), then P13 computed from the records under SF1's convention
(:data:`tabrecon.populations.persons.MEDIAN_AGE`: linear interpolation over single years),
then P13 and its race iterations P13A-P13I. Each table set is reconstructed at block level by
the count model over any schema (:func:`tabrecon.engine.reconstruct.reconstruct_units`)
and every block's uniqueness proven twice: at agebin38 (the resolution of the Bureau's
block-level certification) and by single year of age (what the block tables alone never pin
above age 21, and a median can). Figures side by side, one run.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.common import real_sample_tracts, record
from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
from tabrecon.schema import AGEBIN_OF_AGE, person_units
from tabrecon.schema.registry import population
from tabrecon.tables.spec import tables_of, tabulate_units

ITERATIONS = tuple(f"P13{i}" for i in "ABCDEFGHI")


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracts", type=int, default=28)
    args = ap.parse_args()
    md = real_sample_tracts(args.tracts)
    if md is None:
        return {}
    tracts = sorted({g[:11] for g in md.geoids.tolist()})
    units = person_units(md)
    block34 = tuple(
        t.name
        for t in tables_of(population("persons"))
        if t.level == "block" and t.statistic is None and t.name not in ("P3", "P4", "P5")
    )
    long = tabulate_units(units, (*block34, "P13", *ITERATIONS))
    print(
        f"real sample, {len(tracts)} tracts: {len(md):,} persons, {len(md.geoids):,} blocks; "
        f"block tables {', '.join(block34)}"
    )
    sets = {
        "34 tables' block tables": block34,
        "+ P13": (*block34, "P13"),
        "+ P13, P13A-P13I": (*block34, "P13", *ITERATIONS),
    }
    out: dict = {}
    print(f"{'tables':<26} {'unique at agebin38':>19} {'unique by single year':>22} {'seconds':>8}")
    for label, names in sets.items():
        row: dict[str, Any] = {}
        t = time.perf_counter()
        for key, on in (("agebin38", {"age": AGEBIN_OF_AGE}), ("single_year", None)):
            rec = reconstruct_units(
                long, population("persons"), ReconstructOptions(unique_on=on), tables=names
            )
            counts = dict(rec.blocks["status"].value_counts().rows())
            row[key] = int(counts.get("unique", 0))
            row[f"{key}_other"] = {k: int(v) for k, v in counts.items() if k != "unique"}
            if key == "single_year":  # the reconstruction tabulates back to the release
                back = tabulate_units(rec.units, names)
                both = back.join(long, on=["geoid", "cell"], how="left")
                # a median at an exact tie (.x5) may be rounded either way: counted, not hidden
                row["cells_differing"] = int((both["value"] != both["value_right"]).sum())
        row["seconds"] = round(time.perf_counter() - t, 1)
        n = rec.blocks.height
        print(
            f"{label:<26} {row['agebin38']:>10,} ({100 * row['agebin38'] / n:4.1f}%) "
            f"{row['single_year']:>13,} ({100 * row['single_year'] / n:4.1f}%) "
            f"{row['seconds']:>8.1f}"
        )
        out[label] = row
    out["blocks"] = n
    return out


if __name__ == "__main__":
    record("median_age", main)
