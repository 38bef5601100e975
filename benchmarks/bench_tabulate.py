"""Tabulation throughput: persons per second into all 34 SF1 tables on one core, and peak
memory; with ``--baseline REF`` the same tabulation by REF's code (a temporary worktree, its own
process, the same synthetic persons) beside this code's in one run, best of ``--rounds``, with
their ratio and whether every value is equal.

Run (from the repository root):
python -m benchmarks.bench_tabulate [--persons 1000000] [--rounds 3] [--baseline REF]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from benchmarks.common import REAL, machine, peak_rss_mib, record, worktree_of  # noqa: E402


def measure(persons: int, rounds: int) -> dict:
    """Best seconds of tabulating ``persons`` synthetic persons (seed 1) into the 34 tables with
    the code importable now (the first call, which builds the weights once per process, apart),
    and a digest of every grid, to compare codes."""
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.tables.persons import tabulate

    md = synthesize(SynthConfig(persons=persons), seed=1)
    t = time.perf_counter()
    ts = tabulate(md)
    first = time.perf_counter() - t
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        ts = tabulate(md)
        best = min(best, time.perf_counter() - t)
    digest = hashlib.sha256()
    for lvl in sorted(ts.grids):
        g = ts.grids[lvl]
        for part in (g.geoids.astype(str), g.cells.astype(str)):
            digest.update("\n".join(part.tolist()).encode())
        digest.update(g.values.astype("<i8").tobytes())
    return {
        "persons": len(md),
        "blocks": int(len(md.geoids)),
        "tracts": int(len(ts["tract"].geoids)),
        "values": int(sum(g.values.size for g in ts.grids.values())),
        "first": first,
        "best": best,
        "digest": digest.hexdigest(),
    }


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--persons", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="git ref of the code compared against")
    a = ap.parse_args()
    print(f"# tabulation benchmark -- {machine()}")
    runs = {"this code": measure(a.persons, a.rounds)}
    if a.baseline:
        with worktree_of(a.baseline) as code:
            env = {**os.environ, "PYTHONPATH": str(code)}
            cmd = [sys.executable, "-c", _CHILD, str(a.persons), str(a.rounds)]
            got = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[f"baseline {a.baseline}"] = json.loads(got.stdout.strip().splitlines()[-1])
    for label, r in runs.items():
        print(
            f"{label}: tabulate {r['persons']:,} persons ({r['blocks']:,} blocks, {r['tracts']} "
            f"tracts) into 34 tables: {r['best']:.2f} s = {r['persons'] / r['best']:,.0f} "
            f"persons/s (best of {a.rounds}; first call {r['first']:.2f} s), {r['values']:,} "
            "values (target <= 10 s)"
        )
    if a.baseline:
        now, base = runs["this code"], runs[f"baseline {a.baseline}"]
        print(
            f"ratio (baseline / this code): {base['best'] / now['best']:.2f}x (first call "
            f"{base['first'] / now['first']:.2f}x); every value equal: "
            f"{base['digest'] == now['digest']}"
        )
    if REAL.exists():
        from tabrecon.schema import read_microdata
        from tabrecon.tables.persons import tabulate

        real = read_microdata(REAL)
        t = time.perf_counter()
        tabulate(real)
        el = time.perf_counter() - t
        print(
            f"tabulate real sample ({len(real):,} persons): {el:.3f} s = {len(real) / el:,.0f} "
            "persons/s"
        )
    print(f"peak memory: {peak_rss_mib():,.0f} MiB")
    return runs


#: what the baseline's interpreter runs: this file's ``measure`` with the baseline's tabrecon
_CHILD = (
    "import json, sys; "
    f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
    "from benchmarks.bench_tabulate import measure; "
    "print(json.dumps(measure(int(sys.argv[1]), int(sys.argv[2]))))"
)


if __name__ == "__main__":
    record("tabulate", main)
