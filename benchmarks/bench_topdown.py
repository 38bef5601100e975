"""TopDown end to end: time per level, noise draws and peak memory, on the real sample and a
synthetic county.

Run (from the repository root):
python -m benchmarks.bench_topdown [--synthetic 100000] [--workers 1 2] [--fit admm clarabel]
    [--no-real]

Each (data, fit, workers) run is printed as it ends, so fits and worker counts are
measured side by side.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import REAL, machine, peak_rss_mib, record, worker_peak_rss_mib  # noqa: E402
from tabrecon.defenses.topdown import dhc2023_like, topdown  # noqa: E402
from tabrecon.metrics.accuracy import tvd_by_level  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.schema import read_microdata  # noqa: E402


def run(label: str, md, workers: int = 1, fit: str = "admm") -> float:
    t = time.perf_counter()
    r = topdown(md, dhc2023_like(), workers=workers, fit=fit)
    el = time.perf_counter() - t
    levels = ", ".join(f"{k} {v:.1f} s" for k, v in r.seconds_by_level.items())
    tvd = ", ".join(f"{k} {v:.3f}" for k, v in tvd_by_level(md, r.records).items())
    print(
        f"{label} ({fit}, {workers} worker{'s' if workers > 1 else ''}): {len(md):,} persons, "
        f"{el:.1f} s ({len(md) / el:,.0f} persons/s), {r.draws:,} exact draws; "
        f"per level: {levels}; TVD: {tvd}; fallbacks {len(r.fallbacks)}",
        flush=True,
    )
    return el


def compare(label: str, md, args) -> None:
    secs = {(f, w): run(label, md, w, f) for f in args.fit for w in args.workers}
    base = secs[(args.fit[-1], args.workers[0])]
    print(
        f"{label}: time relative to {args.fit[-1]} with {args.workers[0]} worker(s): "
        + ", ".join(f"{f}/{w}w {base / s:.2f}x" for (f, w), s in secs.items())
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=100_000)
    ap.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="runs with each worker count"
    )
    ap.add_argument(
        "--fit", nargs="+", default=["admm", "clarabel"], help="least-squares solvers to compare"
    )
    ap.add_argument("--no-real", action="store_true")
    args = ap.parse_args()
    print(f"# TopDown benchmark (dhc2023-like, rho 4.9622) -- {machine()}")
    if REAL.exists() and not args.no_real:
        real = read_microdata(REAL)
        compare("real sample", real, args)
    if args.synthetic:
        syn = synthesize(SynthConfig(persons=args.synthetic), seed=9)
        compare("synthetic county", syn, args)
    print(
        f"peak memory: {peak_rss_mib():,.0f} MiB main process, {worker_peak_rss_mib():,.0f} MiB "
        "largest worker"
    )


if __name__ == "__main__":
    record("topdown", main)
