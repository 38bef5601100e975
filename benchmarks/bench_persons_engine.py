"""Persons on the count model written over any schema against the person model it replaced, side
by side (issue 36).

Run (from the repository root):
python -m benchmarks.bench_persons_engine [--synthetic 0] [--rounds 2] [--real]

The person commands now reconstruct and certify with
:func:`tabrecon.populations.persons.reconstruct_persons` (one program per tract: the records,
each block's verdict at agebin38 and its solution variability). The person model it replaced
(:func:`tabrecon.attacks.reconstruct.reconstruct` then :func:`tabrecon.attacks.certify.certify`)
is still in the code for the person claims; here both answer the same question, alternating in
one process (``--rounds`` pairs), at block and block+tract, with distances. Printed per level:
each one's seconds, their ratio (issue 36 asks <= 1.05), whether every block's verdict,
population and proven flag are equal, whether the records tabulate back to every cell the level
uses, and each one's agreement with the truth (exact age, agebin): where a block varies the two
may pick different, equally consistent records. Then ``tabrecon solvar``'s question, certifying
a reconstruction given (the person model's), both ways: seconds, ratio, and whether every
block's verdict and solvar are equal.
"""

from __future__ import annotations

import statistics
import time

import polars as pl

from benchmarks.common import record, synthetic_and_real
from tabrecon.attacks.certify import certify
from tabrecon.attacks.reconstruct import reconstruct
from tabrecon.metrics.agreement import agree
from tabrecon.populations.persons import certify_persons, reconstruct_persons
from tabrecon.tables import tabulate


def _same_cells(ts, records, level: str) -> bool:
    """The records tabulate back to every cell of the tables the level reads."""
    want, got = ts.to_frame(), tabulate(records).to_frame()
    if level == "block":
        want, got = (f.filter(pl.col("geoid").str.len_chars() == 15) for f in (want, got))
    j = want.join(got, on=["geoid", "cell"], how="left")
    return bool((j["value"] == j["value_right"].fill_null(0)).all())


def _side_by_side(md, rounds: int, label: str) -> dict:
    ts = tabulate(md)
    print(f"{label}: {len(md):,} persons, {len(md.geoids):,} blocks, {len(ts.tracts())} tracts")
    out = {}
    for level in ("block", "block+tract"):
        times: dict[str, list[float]] = {"schema": [], "person": [], "cs": [], "cp": []}
        for _ in range(rounds):
            t0 = time.perf_counter()
            new = reconstruct_persons(ts, level, certify=True, distance=True)
            times["schema"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            old = reconstruct(ts, level)
            cert = certify(ts, old.records, level, distance=True)
            times["person"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            given = certify_persons(ts, old.records, level, distance=True)
            times["cs"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mine = certify(ts, old.records, level, distance=True)
            times["cp"].append(time.perf_counter() - t0)
        cols = ["block_geoid", "persons", "status", "proven"]
        a = new.blocks.select(cols).sort("block_geoid")
        b = cert.blocks.select(cols).sort("block_geoid")
        same = a.equals(b)
        g, p = statistics.mean(times["schema"]), statistics.mean(times["person"])
        ag_new, ag_old = agree(new.records, truth=md), agree(old.records, truth=md)
        counts = dict(a.group_by("status").len().iter_rows())
        print(
            f"  {level}: over the schema {', '.join(f'{t:.1f}' for t in times['schema'])} s, "
            f"person model {', '.join(f'{t:.1f}' for t in times['person'])} s; ratio "
            f"{g / p:.2f} (<= 1.05 asked); verdicts {counts}; every block's verdict, persons "
            f"and proven flag equal: {same}; tabulates back: {_same_cells(ts, new.records, level)}"
            f"; agreement exact/binned {ag_new.exact_pct:.2f}/{ag_new.binned_pct:.2f}% against "
            f"{ag_old.exact_pct:.2f}/{ag_old.binned_pct:.2f}%"
        )
        sv = ["block_geoid", "persons", "status", "proven", "solvar"]
        same_sv = (
            given.blocks.select(sv)
            .sort("block_geoid")
            .equals(mine.blocks.select(sv).sort("block_geoid"))
        )
        cs, cp = statistics.mean(times["cs"]), statistics.mean(times["cp"])
        print(
            f"  {level}, certifying the person model's records (tabrecon solvar): over the schema "
            f"{', '.join(f'{t:.1f}' for t in times['cs'])} s, person model "
            f"{', '.join(f'{t:.1f}' for t in times['cp'])} s; ratio {cs / cp:.2f}; every "
            f"block's verdict and solvar equal: {same_sv}"
        )
        out[level] = {
            "solvar_schema_s": times["cs"],
            "solvar_person_s": times["cp"],
            "solvar_ratio": round(cs / cp, 3),
            "solvar_same": same_sv,
            "schema_s": times["schema"],
            "person_s": times["person"],
            "ratio": round(g / p, 3),
            "same_verdicts": same,
            "verdicts": counts,
            "exact_pct": [round(ag_new.exact_pct, 2), round(ag_old.exact_pct, 2)],
            "binned_pct": [round(ag_new.binned_pct, 2), round(ag_old.binned_pct, 2)],
        }
    return out


def main() -> dict:
    return synthetic_and_real(__doc__ or "", _side_by_side, 0)


if __name__ == "__main__":
    record("persons_engine", main)
