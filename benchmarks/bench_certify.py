"""Certification speed and magnitudes: solvar of the real sample (core-seconds per person, against
the Bureau's 9.4), solvar distribution on a synthetic county whose blocks are not all unique, and
verified-claims throughput, measured in one run.

Run (from the repository root): python -m benchmarks.bench_certify [--synthetic 20000]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import polars as pl  # noqa: E402

from benchmarks.bench_reconstruct import cpu  # noqa: E402
from benchmarks.common import REAL, machine, peak_rss_mib, record  # noqa: E402
from tabrecon import (
    certify,  # noqa: E402
    claims,  # noqa: E402
    reconstruct,  # noqa: E402
)
from tabrecon.attacks.certify import cumulative_solvar, solvar_table  # noqa: E402
from tabrecon.engine.solvers import SolverOptions  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.schema import read_microdata  # noqa: E402
from tabrecon.tables.persons import tabulate  # noqa: E402

BUREAU_SOLVAR = 9.4  # vCPU-seconds per person (methods.md section 10)


def timed(f, *a, **k):
    w, c = time.perf_counter(), cpu()
    out = f(*a, **k)
    return out, time.perf_counter() - w, cpu() - c


def certify_line(label: str, ts, level: str, n: int) -> tuple:
    rec = reconstruct(ts, level, SolverOptions(time_limit=600)).records
    cert, wall, core = timed(certify, ts, rec, level, SolverOptions(time_limit=120))
    b = cert.blocks
    uniq = int((b["status"] == "unique").sum())
    lo, hi = cumulative_solvar(b)
    print(
        f"{label:44s} {n:>8,} persons {b.height:>6,} blocks: wall {wall:6.1f} s core {core:6.1f} s "
        "= "
        f"{core / n:.6f} core-s/person ({BUREAU_SOLVAR / (core / n):,.0f}x less than the Bureau's "
        "9.4); "
        f"proven unique {uniq:,} ({100 * uniq / b.height:.1f}%), cumulative solvar {lo:.2f}%"
        + (f"-{hi:.2f}%" if hi > lo + 1e-9 else "")
        + f", failed tracts {len(cert.failed)}",
        flush=True,
    )
    return rec, cert


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=20_000)
    ap.add_argument("--k-solutions", type=int, default=100)
    args = ap.parse_args()
    print(
        f"# certification benchmark -- {machine()} (1 core, default solvers: HiGHS reconstructs, "
        "CP-SAT certifies)"
    )
    warm = synthesize(SynthConfig(persons=50), seed=0)
    wt = tabulate(warm)
    certify(wt, reconstruct(wt).records)
    pl.Config.set_tbl_rows(20)
    if REAL.exists():
        md = read_microdata(REAL)
        ts = tabulate(md)
        print("\n## real sample")
        certify_line("real block+tract (target <= 0.002)", ts, "block+tract", len(md))
        rec, cert = certify_line("real block only", ts, "block", len(md))
        print(solvar_table(cert.blocks))
        run, wall, core = timed(
            claims, ts, rec, cert.blocks, "block", SolverOptions(time_limit=120), args.k_solutions
        )
        s = run.summary()
        print(
            f"claims, block-only tables, K = {args.k_solutions}: wall {wall:.1f} s, core "
            f"{core:.1f} s "
            f"= {len(md) / core:,.0f} persons/core-s; {s['persons_singled_out']:,} persons singled "
            "out; "
            f"varying blocks {s['varying_blocks']}: {s['candidates_varying']:,} candidates, "
            f"{s['verified_varying']:,} verified in {s['proofs']} proofs"
        )
        print(
            run.by_k().select(
                "k",
                "persons_covered",
                "blocks_with_singleton",
                "verified_singletons",
                "median_baseline_tract",
            )
        )
    else:
        print("real sample not present: skipped")
    md = synthesize(SynthConfig(persons=args.synthetic), seed=5)
    ts = tabulate(md)
    print(f"\n## synthetic county ({len(md):,} persons; larger blocks, so not all unique)")
    for level in ("block+tract", "block"):
        label = f"synthetic {level}" + (" (target <= 0.002)" if level == "block" else "")
        _, cert = certify_line(label, ts, level, len(md))
        print(solvar_table(cert.blocks))
    print(f"\npeak memory: {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    record("certify", main)
