"""TopDown end to end: time per level, noise draws and peak memory, on the real sample and a synthetic county.

Run: python benchmarks/bench_topdown.py [--synthetic 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import REAL, machine, peak_rss_mib  # noqa: E402

from tabrecon.defenses.topdown import dhc2023_like, topdown, tvd_by_level  # noqa: E402
from tabrecon.schema import read_microdata  # noqa: E402
from tabrecon.synth import SynthConfig, synthesize  # noqa: E402


def run(label: str, md) -> None:
    t = time.perf_counter()
    r = topdown(md, dhc2023_like())
    el = time.perf_counter() - t
    levels = ", ".join(f"{k} {v:.1f} s" for k, v in r.seconds_by_level.items())
    tvd = ", ".join(f"{k} {v:.3f}" for k, v in tvd_by_level(md, r.records).items())
    print(f"{label}: {len(md):,} persons, {el:.1f} s ({len(md) / el:,.0f} persons/s), {r.draws:,} exact draws; "
          f"per level: {levels}; TVD: {tvd}; fallbacks {len(r.fallbacks)}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=100_000)
    args = ap.parse_args()
    print(f"# TopDown benchmark (dhc2023-like, rho 4.9622) -- {machine()}")
    if REAL.exists():
        run("real sample", read_microdata(REAL))
    if args.synthetic:
        run("synthetic county", synthesize(SynthConfig(persons=args.synthetic), seed=9))
    print(f"peak memory: {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    main()
