"""Reconstruction speed: core-seconds per person (model building included) and the speed ratio
against the Census Bureau's per-slot binary formulation on the same tracts, in one run.

Run (from the repository root):
python -m benchmarks.bench_reconstruct [--synthetic 100000] [--peer-tracts 4]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from benchmarks.common import REAL, machine, peak_rss_mib, record, worker_peak_rss_mib  # noqa: E402
from benchmarks.peer_slot_model import build_slot_model  # noqa: E402
from tabrecon import reconstruct  # noqa: E402
from tabrecon.engine.solvers import SolverOptions, solve  # noqa: E402
from tabrecon.metrics.agreement import agree  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.runner import (
    RunOptions,
    tree_cpu,  # noqa: E402
)
from tabrecon.schema import read_microdata  # noqa: E402
from tabrecon.tables.persons import tabulate  # noqa: E402

BUREAU_RECON = 2.4  # vCPU-seconds per person (methods.md section 10)


def cpu() -> float:
    """CPU seconds of this process plus what units spent in worker processes
    (:func:`tabrecon.runner.tree_cpu`; an earlier version read RUSAGE_CHILDREN, which does not
    see forkserver workers, and printed 0.1 core-s for 4 s of two busy workers)."""
    return tree_cpu()


def timed_run(ts, level, backend="cpsat", workers=1):
    w0, c0 = time.perf_counter(), cpu()
    run = reconstruct(
        ts, level, SolverOptions(backend=backend, time_limit=600), run=RunOptions(workers=workers)
    )
    return run, time.perf_counter() - w0, cpu() - c0


def report(label, run, wall, core, truth=None):
    n = len(run.records)
    line = (
        f"{label:58s} {n:>8,} persons  wall {wall:7.1f} s  core {core:7.1f} s  "
        f"{core / n:.6f} core-s/person  ({BUREAU_RECON / (core / n):,.0f}x less than the Bureau's "
        "2.4)"
    )
    if run.failed:
        line += f"  FAILED tracts: {len(run.failed)}"
    if truth is not None:
        a = agree(run.records, truth=truth)
        line += f"  agreement exact/binned {a.exact_pct:.1f}/{a.binned_pct:.2f}%"
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=100_000)
    ap.add_argument("--peer-tracts", type=int, default=4)
    args = ap.parse_args()
    print(f"# reconstruction benchmark -- {machine()}")
    # warm the process: CP-SAT's first solve in a process costs ~2 s of start-up, counted once here
    w0 = time.perf_counter()
    solve_small = synthesize(SynthConfig(persons=50), seed=0)
    reconstruct(tabulate(solve_small), "block+tract")
    print(
        "process warm-up (imports, weight matrix, CP-SAT start-up): "
        f"{time.perf_counter() - w0:.1f} s, not counted below"
    )
    if REAL.exists():
        md = read_microdata(REAL)
        ts = tabulate(md)
        print(
            f"\n## real sample: {len(md):,} persons, {len(md.geoids):,} blocks, {len(ts.tracts())} "
            "tracts (1 core)"
        )
        for level, backend in [
            ("block+tract", "auto"),
            ("block+tract", "cpsat"),
            ("block+tract", "highs"),
            ("block", "cpsat"),
            ("block", "highs"),
        ]:
            run, wall, core = timed_run(ts, level, backend)
            target = "default; target <= 0.0001" if backend == "auto" else "target <= 0.001"
            report(f"real {level} {backend} ({target})", run, wall, core, md)
        # the peer formulation on the smallest tracts, both models solved by CP-SAT in this run
        pops = dict(zip(ts["tract"].geoids, ts["tract"].col("PCT0120001"), strict=True))
        small = sorted(pops, key=lambda t: pops[t])[: args.peer_tracts]
        print(
            f"\n## per-slot binary (Bureau) vs count model, same {len(small)} tracts "
            f"({sum(int(pops[t]) for t in small):,} persons), CP-SAT, 1 core"
        )
        t_peer = t_count = 0.0
        for t in small:
            sub = ts.subset(t)
            c0 = cpu()
            prog, _, _ = build_slot_model(sub, t)
            sol = solve(prog, SolverOptions(time_limit=1200))
            dp = cpu() - c0
            c0 = cpu()
            cp = SolverOptions(backend="cpsat")
            res = reconstruct(sub, "block+tract", cp)
            dc = cpu() - c0
            t_peer, t_count = t_peer + dp, t_count + dc
            print(
                f"tract {t} ({int(pops[t]):>5} persons): per-slot {prog.n_vars:>9,} binaries "
                f"{prog.A.nnz:>11,} nonzeros "
                f"{dp:7.2f} s ({sol.status}) | count model {dc:6.3f} s "
                f"({'ok' if not res.failed else 'failed'}); ratio {dp / dc:,.0f}x",
                flush=True,
            )
        print(
            f"per-slot total {t_peer:.2f} core-s, count model {t_count:.3f} core-s: "
            f"{t_peer / t_count:,.0f}x faster (target >= 20x)"
        )
    else:
        print("real sample not present: skipped")
    md = synthesize(SynthConfig(persons=args.synthetic), seed=11)
    ts = tabulate(md)
    pop = np.bincount(md.block)
    print(
        f"\n## synthetic county: {len(md):,} persons, {len(md.geoids):,} blocks (largest "
        f"{pop.max():,}), "
        f"{len(ts.tracts())} tracts (2 worker processes)"
    )
    for level in ("block", "block+tract"):
        run, wall, core = timed_run(ts, level, "auto", workers=2)
        report(f"synthetic {level} auto (default)", run, wall, core, md)
    print(
        f"\npeak memory: main process {peak_rss_mib():,.0f} MiB, largest worker "
        f"{worker_peak_rss_mib():,.0f} MiB"
    )


if __name__ == "__main__":
    record("reconstruct", main)
