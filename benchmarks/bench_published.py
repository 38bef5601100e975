"""Reading published tables as users download them: a 1,000,000-person county's block tables as a
wide CSV (one row per block, one column per SF1 variable, Census API names), read and
reconstructed at block level, beside the same tables read from tabrecon's long Parquet file and
from the CSV zipped as data.census.gov ships a download (beside a metadata file), in one run.

Run (from the repository root):
python -m benchmarks.bench_published [--persons 1000000] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from benchmarks.common import machine, peak_rss_mib, record, worker_peak_rss_mib  # noqa: E402
from tabrecon import reconstruct  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.runner import RunOptions
from tabrecon.tables.download import api_name  # noqa: E402
from tabrecon.tables.persons import tabulate
from tabrecon.tables.published import (
    read_tables,  # noqa: E402
    write_tables,
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    print(f"# published-tables benchmark -- {machine()}")
    md = synthesize(SynthConfig(persons=args.persons), seed=3)
    ts = tabulate(md, "block")
    g = ts["block"]
    print(f"{len(md):,} persons, {len(g.geoids):,} blocks x {len(g.cells)} block cells")
    with tempfile.TemporaryDirectory() as d:
        wide = Path(d) / "county_blocks.csv"
        import polars as pl

        cols = {api_name(c): g.values[:, j] for j, c in enumerate(g.cells)}
        t = time.perf_counter()
        pl.DataFrame({"GEOID": g.geoids, **cols}).write_csv(wide)
        print(
            f"wide CSV written: {wide.stat().st_size / 2**20:,.0f} MiB "
            f"({time.perf_counter() - t:.1f} s)"
        )
        long = Path(d) / "county_blocks.parquet"
        write_tables(ts, long)
        before = peak_rss_mib()
        t = time.perf_counter()
        back = read_tables(wide)
        t_wide = time.perf_counter() - t
        print(
            f"peak memory: {before:,.0f} MiB before reading the wide CSV (synthesis, tabulation), "
            f"{peak_rss_mib():,.0f} MiB after"
        )
        t = time.perf_counter()
        read_tables(long)
        t_long = time.perf_counter() - t
        assert (back["block"].values == g.values).all()
        print(
            f"read wide CSV: {t_wide:.1f} s; long Parquet: {t_long:.1f} s (ratio "
            f"{t_wide / t_long:.1f}x)"
        )
        print(f"peak memory after also reading the long file: {peak_rss_mib():,.0f} MiB")
        import zipfile

        zipped = Path(d) / "productDownload.zip"
        t = time.perf_counter()
        with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.write(wide, "DECENNIALSF12010.P12-Data.csv")
            zf.writestr("DECENNIALSF12010.P12-Column-Metadata.csv", "Column Name,Label\n")
        print(
            f"the wide CSV zipped: {zipped.stat().st_size / 2**20:,.0f} MiB "
            f"({time.perf_counter() - t:.1f} s)"
        )
        t = time.perf_counter()
        from_zip = read_tables(zipped)
        t_zip = time.perf_counter() - t
        assert (from_zip["block"].values == g.values).all()
        print(
            f"read the ZIP: {t_zip:.1f} s against {t_wide:.1f} s for the CSV itself "
            f"(ratio {t_zip / t_wide:.2f}x); peak memory {peak_rss_mib():,.0f} MiB"
        )
        t = time.perf_counter()
        run = reconstruct(back, "block", run=RunOptions(workers=args.workers))
        t_rec = time.perf_counter() - t
        print(
            f"reconstruct at block level, {args.workers} workers: {t_rec:.1f} s, "
            f"{len(run.records):,} records, {len(run.failed)} failed tracts"
        )
        total = t_wide + t_rec
        print(f"read + reconstruct: {total:.1f} s (target <= 120 s)")
    print(
        f"peak memory: {peak_rss_mib():,.0f} MiB main, {worker_peak_rss_mib():,.0f} MiB largest "
        "worker"
    )


if __name__ == "__main__":
    record("published", main)
