"""Scale benchmark of `tabrecon audit`: a synthetic state audited end to end, locally and on Dask.

Run (from the repository root):
python -m benchmarks.bench_audit [--persons 2000000] [--counties 20] [--chunk-persons 500000]

A state of ``--counties`` synthetic counties (``--persons`` in all) is written to one Parquet file
and audited twice with the same configuration -- block+tract reconstruction, certification and
reidentification (no defenses: their cost is a rerun of the same attack per defense, measured in
bench_topdown; certification proves which blocks are unique, and with ``--distance`` also measures
each varying block's solution variability, which costs about twelve times as much on synthetic
data) -- once with a local process pool of 2 workers and once through a Dask LocalCluster
of 2 single-threaded worker processes started here. Each audit runs as its own `tabrecon audit`
process; a sampler reads the resident memory of that process, its children and the Dask workers
every 0.5 s. Printed: time per stage, total, peak memory, and the ratios of the two runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl  # noqa: E402

from benchmarks.common import TreeSampler, machine, record  # noqa: E402
from tabrecon.records.synth import SynthConfig, synthesize  # noqa: E402
from tabrecon.schema import write_microdata  # noqa: E402


def make_state(path: Path, persons: int, counties: int, seed: int = 0) -> int:
    parts = []
    for i in range(counties):
        md = synthesize(
            SynthConfig(persons=persons // counties, state="98", county=f"{2 * i + 1:03d}"),
            seed=seed + i,
        )
        p = path.parent / f".county{i}.parquet"
        write_microdata(md, p)
        parts.append(p)
    pl.scan_parquet(parts).sink_parquet(path)
    for p in parts:
        p.unlink()
    return pl.scan_parquet(path).select(pl.len()).collect().item()


def code_env(code: Path | None) -> dict[str, str] | None:
    """The environment of a process that runs the code in ``code`` (a checkout's ``src``
    folder) instead of the installed one; None: this environment."""
    if code is None:
        return None
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")]),
    }


def run_audit(
    src: Path,
    out: Path,
    extra_args: list[str],
    extra_pids: list[int],
    code: Path | None = None,
    config: Path | None = None,
) -> dict:
    """``tabrecon audit`` as its own process, its process tree's memory sampled; with ``code``
    (a checkout's ``src`` folder) the audit runs that code instead of the installed one;
    ``config``: the audit's configuration file (``bench.toml`` beside ``out`` unless given)."""
    cmd = [
        sys.executable,
        "-m",
        "tabrecon.cli",
        "audit",
        str(src),
        "--out",
        str(out),
        "--defenses",
        "",
        "--quiet",
        "--config",
        str(config or out.parent / "bench.toml"),
        *extra_args,
    ]
    t0 = time.perf_counter()
    env = code_env(code)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    s = TreeSampler(proc.pid, extra_pids)
    s.start()
    _, err = proc.communicate()
    s.stop = True
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"audit failed ({proc.returncode}): {err[-2000:]}")
    summ = json.loads((out / "summary.json").read_text())
    return {
        "wall_s": wall,
        "peak_total_mib": s.peak_total,
        "peak_main_mib": s.peak_main,
        "summary": summ,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=2_000_000)
    ap.add_argument("--counties", type=int, default=20)
    ap.add_argument("--chunk-persons", type=int, default=500_000)
    ap.add_argument("--dir", type=Path, default=Path("bench-audit"))
    ap.add_argument("--only", choices=["local", "dask", "both"], default="both")
    ap.add_argument(
        "--distance",
        action="store_true",
        help="also measure each varying block's solution variability (about 12x the certification "
        "time)",
    )
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    src = a.dir / "state.parquet"
    t0 = time.perf_counter()
    if not src.exists():
        n = make_state(src, a.persons, a.counties)
    else:
        n = pl.scan_parquet(src).select(pl.len()).collect().item()
    print(f"machine: {machine()}")
    print(
        f"synthetic state: {n:,} persons in {a.counties} counties ({time.perf_counter() - t0:.0f} "
        "s to make or read)"
    )
    (a.dir / "bench.toml").write_text(
        f"[run]\nworkers = 2\nchunk_persons = {a.chunk_persons}\n[reconstruct]\nlevels = "
        '["block+tract"]\n'
        f"[certify]\ndistance = {'true' if a.distance else 'false'}\n"
    )
    print(
        "certification: uniqueness "
        f"proofs{' and solution-variability distances' if a.distance else ' only (no --distance)'}"
    )
    runs = {}
    if a.only in ("local", "both"):
        runs["local pool (2 processes)"] = run_audit(src, a.dir / "local", [], [])
    if a.only in ("dask", "both"):
        from distributed import LocalCluster

        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as lc:
            pids = [w.process.pid for w in lc.workers.values()]
            runs["Dask LocalCluster (2 workers)"] = run_audit(
                src, a.dir / "dask", ["--scheduler", lc.scheduler_address], pids
            )
    stages = ["read", "tabulate", "reconstruct", "certify", "reidentify", "aggregate", "total"]
    names = list(runs)
    print(f"\n{'stage (s)':<22}" + "".join(f"{nm:>32}" for nm in names))
    for st in stages:
        print(
            f"{st:<22}"
            + "".join(
                f"{runs[nm]['summary']['timings_s'].get(st, float('nan')):>32.1f}" for nm in names
            )
        )
    print(f"{'wall incl. start-up':<22}" + "".join(f"{runs[nm]['wall_s']:>32.1f}" for nm in names))
    print(
        f"{'peak RSS tree (MiB)':<22}"
        + "".join(f"{runs[nm]['peak_total_mib']:>32.0f}" for nm in names)
    )
    print(
        f"{'peak RSS main (MiB)':<22}"
        + "".join(f"{runs[nm]['peak_main_mib']:>32.0f}" for nm in names)
    )
    for nm in names:
        s = runs[nm]["summary"]
        r = s["reidentification"]["attack"]
        print(
            f"{nm}: {len(s['chunks'])} chunks, {s['persons']:,} persons, {s['tracts']} tracts; "
            "agreement "
            f"{s['agreement_block+tract']['binned_pct']:.2f}%; unique blocks "
            f"{s['certify']['unique_blocks_pct']:.1f}%; "
            f"nonmodal precision {r['nonmodal']['precision_pct']:.1f}%; "
            f"{n / s['timings_s']['total']:.0f} persons/s; failures {len(s['failures'])}"
        )
    if len(names) == 2:
        a0, a1 = (runs[nm]["summary"]["timings_s"]["total"] for nm in names)
        print(f"ratio Dask / local total time: {a1 / a0:.2f}")
        same = all(
            runs[names[0]]["summary"]["reidentification"]["attack"][g]
            == runs[names[1]]["summary"]["reidentification"]["attack"][g]
            for g in ("all", "nonmodal")
        )
        print(f"same reidentification counts in both runs: {same}")


if __name__ == "__main__":
    record("audit", main)
