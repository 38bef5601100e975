"""Tabulation throughput: persons per second into all 34 SF1 tables on one core, and peak memory.

Run (from the repository root): python -m benchmarks.bench_tabulate [--persons 1000000]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from benchmarks.common import REAL, machine, peak_rss_mib, record  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.schema import read_microdata  # noqa: E402
from tabrecon.tables.persons import tabulate, weight_matrix  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=1_000_000)
    args = ap.parse_args()
    print(f"# tabulation benchmark -- {machine()}")
    t = time.perf_counter()
    weight_matrix()
    print(f"cell weight matrix built once per process: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    md = synthesize(SynthConfig(persons=args.persons), seed=1)
    print(f"synthesize {len(md):,} persons: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    ts = tabulate(md)
    el = time.perf_counter() - t
    nvals = sum(g.values.size for g in ts.grids.values())
    print(
        f"tabulate {len(md):,} persons ({len(md.geoids):,} blocks, {len(ts['tract'].geoids)} "
        "tracts) into 34 tables: "
        f"{el:.2f} s = {len(md) / el:,.0f} persons/s, {nvals:,} values (target <= 10 s)"
    )
    if REAL.exists():
        real = read_microdata(REAL)
        t = time.perf_counter()
        tabulate(real)
        el = time.perf_counter() - t
        print(
            f"tabulate real sample ({len(real):,} persons): {el:.3f} s = {len(real) / el:,.0f} "
            "persons/s"
        )
    print(f"peak memory: {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    record("tabulate", main)
