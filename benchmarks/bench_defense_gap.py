"""Does TopDown bring the attack down to statistical guessing? The real sample, several independent
TopDown draws, the unchanged attack on each, and PRG beside it -- drawn once (as in every report)
and in expectation (no draw noise), from the protected tables (what this release publishes) and
from the original tables (the Bureau's Table 6 baseline). No defense and swap-lo are the reference
rows.

Run (from the repository root): python -m benchmarks.bench_defense_gap [--runs 5] [--workers 2]
Prints one line per run as it ends, then the mean and spread of the gaps (attack - PRG, points).
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.common import REAL, machine, record  # noqa: E402
from tabrecon import reconstruct  # noqa: E402
from tabrecon.attacks.reidentify import reidentify  # noqa: E402
from tabrecon.defenses.defense import Defense  # noqa: E402
from tabrecon.runner import RunOptions
from tabrecon.schema import read_microdata  # noqa: E402
from tabrecon.tables.persons import tabulate  # noqa: E402


def one(md, orig_tables, spec: str, seed: int, workers: int) -> dict:
    t = time.perf_counter()
    protected = Defense.parse(spec).protect(md, seed, workers).records
    ts = tabulate(protected)
    rec = reconstruct(ts, "block+tract", run=RunOptions(workers=workers)).records
    pub = reidentify(
        rec, md, "perfect", tables=ts, cert_blocks=None, seed=seed
    )  # baselines from the protected tables
    org = reidentify(
        rec, md, "perfect", tables=orig_tables, cert_blocks=None, seed=seed
    )  # ... from the original ones
    s = pub.summary()
    return {
        "spec": spec,
        "seed": seed,
        "putative": s["attack"]["nonmodal"]["putative"],
        "attack": s["attack"]["nonmodal"]["precision_pct"],
        "prg_drawn": s["prg"]["nonmodal"]["precision_pct"],
        "prg_expected": pub.expected_prg_precision("nonmodal"),
        "prg_expected_original": org.expected_prg_precision("nonmodal"),
        "seconds": time.perf_counter() - t,
    }


def show(r: dict) -> None:
    print(
        f"{r['spec']} seed {r['seed']}: nonmodal precision attack {r['attack']:.1f}% on "
        f"{r['putative']:,} linked; "
        f"PRG drawn {r['prg_drawn']:.1f}%, expected {r['prg_expected']:.1f}% (protected tables), "
        f"{r['prg_expected_original']:.1f}% (original tables); {r['seconds']:.0f} s",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if not REAL.exists():
        print(f"skipped: the real sample is not at {REAL}")
        return
    print(f"# TopDown vs statistical guessing, real sample -- {machine()}")
    md = read_microdata(REAL)
    orig = tabulate(md)
    for spec in ("none", "swap-lo"):
        show(one(md, orig, spec, 0, args.workers))
    runs = []
    for s in range(args.runs):
        runs.append(one(md, orig, "dhc2023-like", s, args.workers))
        show(runs[-1])
    for key, what in (
        ("prg_drawn", "PRG drawn, protected tables"),
        ("prg_expected", "PRG expected, protected tables"),
        ("prg_expected_original", "PRG expected, original tables"),
    ):
        gaps = [r["attack"] - r[key] for r in runs]
        sd = statistics.stdev(gaps) if len(gaps) > 1 else float("nan")
        print(
            f"dhc2023-like, attack - {what}: mean {statistics.mean(gaps):+.1f} points (sd "
            f"{sd:.1f}; "
            f"runs {', '.join(f'{g:+.1f}' for g in gaps)})"
        )


if __name__ == "__main__":
    record("defense_gap", main)
