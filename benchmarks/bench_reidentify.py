"""Reidentification speed (linkage, confirmation and every baseline) and the figures it reports.

Run (from the repository root): python -m benchmarks.bench_reidentify [--persons 1000000]

The timing run links a 1,000,000-person synthetic county with the truth itself as the race source:
linkage cost depends on the number of records and keys, not on which file supplies the races. The
real-sample figures use the block+tract reconstruction and its certification.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from benchmarks.bench_reconstruct import cpu  # noqa: E402
from benchmarks.common import REAL, machine, peak_rss_mib, record  # noqa: E402
from tabrecon import (
    certify,  # noqa: E402
    reconstruct,  # noqa: E402
)
from tabrecon.attacks.reidentify import reidentify  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.schema import read_microdata  # noqa: E402
from tabrecon.tables.persons import tabulate  # noqa: E402


def line(label: str, res) -> None:
    s = res.summary()
    out = [f"{label}:"]
    for g in ("all", "nonmodal", "certified_uniques"):
        parts = []
        for src in ("attack", "mdg", "prg", "truth"):
            r = s[src][g]
            p = "n/a" if r["precision_pct"] is None else f"{r['precision_pct']:.1f}"
            parts.append(f"{src} {p}")
        a = s["attack"][g]
        put = "n/a" if a["putative_pct"] is None else f"{a['putative_pct']:.1f}"
        out.append(
            f"  {g:18s} n={a['attacker_records']:>9,} putative {put}%  precision: "
            + ", ".join(parts)
        )
    print("\n".join(out), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=1_000_000)
    args = ap.parse_args()
    print(f"# reidentification benchmark -- {machine()} (1 core)")
    md = synthesize(SynthConfig(persons=args.persons), seed=3)
    ts = tabulate(md, ["P8", "P9"])
    for preset in ("perfect", "commercial"):
        w, c = time.perf_counter(), cpu()
        res = reidentify(md, md, preset, tables=ts, seed=1)
        wall, core = time.perf_counter() - w, cpu() - c
        print(
            f"synthetic {len(md):,} persons, {preset} attacker ({res.records.height:,} records): "
            "linkage + all "
            f"baselines wall {wall:.1f} s, core {core:.1f} s (target <= 60 s)"
        )
    if REAL.exists():
        real = read_microdata(REAL)
        rts = tabulate(real)
        rec = reconstruct(rts, "block+tract").records
        cert = certify(rts, rec, "block+tract").blocks
        for preset in ("perfect", "commercial"):
            line(
                f"real sample, block+tract reconstruction, {preset} attacker",
                reidentify(rec, real, preset, tables=rts, cert_blocks=cert, seed=1),
            )
    small = synthesize(SynthConfig(persons=20_000), seed=5)
    sts = tabulate(small)
    srec = reconstruct(sts, "block+tract").records
    scert = certify(sts, srec, "block+tract").blocks
    for preset in ("perfect", "commercial"):
        line(
            f"synthetic county 20,000, block+tract reconstruction, {preset} attacker",
            reidentify(srec, small, preset, tables=sts, cert_blocks=scert, seed=1),
        )
    print(f"peak memory: {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    record("reidentify", main)
