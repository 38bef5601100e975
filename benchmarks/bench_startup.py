"""What a small run costs beyond its work: ``tabrecon reconstruct`` of a small county on two
workers, this code against a baseline commit, side by side in one run.

Run (from the repository root):
python -m benchmarks.bench_startup [--baseline be8404f] [--rounds 5] [--persons 12000]

A synthetic county of ``--persons`` persons in tracts of 1,200-1,800 (each solved in about 0.1 s)
is tabulated once; then ``tabrecon reconstruct TABLES --workers 2 --fresh`` runs ``--rounds``
times with this code and with ``--baseline`` (a temporary worktree), alternating, each in a new
process. Printed per side: the median seconds to the first finished tract (the run's part folder
polled every 20 ms: start-up, reading the tables, starting the pool, the workers' imports and
set-up) and to the end, and their ratios. The start-up is what every run pays once (and every
worker process once), whatever the size of the release: a tiny county is mostly start-up.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_audit import code_env
from benchmarks.common import record, worktree_of

EXE = [sys.executable, "-c", "from tabrecon.entry import main; main()"]


def _run(d: Path, src: Path | None) -> tuple[float, float]:
    """Seconds to the first finished tract and to the end of one reconstruct."""
    shutil.rmtree(d / "r.parquet.parts", ignore_errors=True)
    status = d / "r.parquet.parts" / "status.jsonl"
    args = ["reconstruct", "t.parquet", "--out", "r.parquet", "--workers", "2", "--fresh"]
    log = (d / "stderr.txt").open("w")  # (a pipe nobody reads while polling could fill)
    t0 = time.perf_counter()
    p = subprocess.Popen(
        EXE + args, cwd=d, env=code_env(src), stdout=subprocess.DEVNULL, stderr=log
    )
    first = None
    while p.poll() is None:
        if first is None and status.exists() and status.read_text().strip():
            first = time.perf_counter() - t0
        time.sleep(0.02)
    end = time.perf_counter() - t0
    log.close()
    if p.returncode != 0:
        err = (d / "stderr.txt").read_text()
        raise SystemExit(f"reconstruct exited {p.returncode}:\n{err[-2000:]}")
    return (first if first is not None else end), end


def main() -> dict:
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.tables.persons import tabulate
    from tabrecon.tables.published import write_tables

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="be8404f")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--persons", type=int, default=12_000)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    county = SynthConfig(persons=a.persons, tract_min=1_200, tract_max=1_800)
    write_tables(tabulate(synthesize(county, seed=11)), d / "t.parquet")
    times: dict[str, list[tuple[float, float]]] = {"this": [], "baseline": []}
    with worktree_of(a.baseline) as base_src:
        _run(d, None)  # (once untimed each: the derived-array cache filled, files in the OS cache)
        _run(d, base_src)
        for _ in range(a.rounds):
            times["this"].append(_run(d, None))
            times["baseline"].append(_run(d, base_src))
    out: dict = {"persons": a.persons, "rounds": a.rounds, "baseline": a.baseline}
    for side, runs in times.items():
        out[f"{side}_first_tract_s"] = statistics.median(r[0] for r in runs)
        out[f"{side}_end_s"] = statistics.median(r[1] for r in runs)
        print(f"{side:>8}: first tract {out[f'{side}_first_tract_s']:.2f} s, "
              f"end {out[f'{side}_end_s']:.2f} s (median of {a.rounds})")  # fmt: skip
    for what in ("first_tract", "end"):
        out[f"ratio_{what}"] = out[f"this_{what}_s"] / out[f"baseline_{what}_s"]
        print(f"ratio this/baseline, {what.replace('_', ' ')}: {out[f'ratio_{what}']:.2f}x")
    shutil.rmtree(d, ignore_errors=True)
    return out


if __name__ == "__main__":
    record("startup", main)
