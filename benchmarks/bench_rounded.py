"""A rounded release reconstructed and certified, this code against a baseline commit, side by
side in one run.

Run (from the repository root):
python -m benchmarks.bench_rounded [--persons 400] [--rule round:3] [--baseline d0649be]
    [--timeout 900] [--seed 3]

A synthetic county of ``--persons`` persons is tabulated and published under ``--rule``
(``tabrecon tabulate --publication``), then ``tabrecon reconstruct --publication RULE`` runs on
it with this code and with ``--baseline`` (a temporary worktree), each in a fresh process,
alternating, each stopped after ``--timeout`` seconds (a side that does not finish is reported
as such, never given a time). Printed: each side's wall seconds, their ratio where both
finished, and whether every block's verdict is the same.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from benchmarks.common import record, worktree_of

EXE = [sys.executable, "-c", "from tabrecon.entry import main; main()"]


def _run(args: list[str], cwd: Path, src: Path | None, timeout: float) -> float | None:
    """Seconds the command took, None when it did not finish within ``timeout``."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            EXE + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return took


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persons", type=int, default=400)
    ap.add_argument("--rule", default="round:3")
    ap.add_argument("--baseline", default="d0649be")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="bench-rounded-"))
    _run(["synth", "--persons", str(a.persons), "--seed", str(a.seed), "--out", "p.csv"], d, None,
         600)  # fmt: skip
    _run(["tabulate", "p.csv", "--publication", a.rule, "--out", "t.csv"], d, None, 600)
    out: dict = {"persons": a.persons, "rule": a.rule, "baseline": a.baseline}
    with worktree_of(a.baseline) as base_src:
        for side, src in (("this", None), ("baseline", base_src)):
            where = d / side
            where.mkdir()
            (where / "t.csv").symlink_to(d / "t.csv")
            args = ["reconstruct", "t.csv", "--publication", a.rule, "--out", "r.parquet"]
            took = _run(args, where, src, a.timeout)
            out[f"{side}_seconds"] = took
            shown = f"{took:.1f} s" if took is not None else f"did not finish in {a.timeout:g} s"
            print(f"{side:>8}: {shown}")
    this, base = out["this_seconds"], out["baseline_seconds"]
    if this is not None and base is not None:
        out["ratio"] = this / base
        print(f"ratio this/baseline: {this / base:.2f}x")
        v = [pl.read_csv(d / s / "r_blocks.csv").sort("block_geoid") for s in ("this", "baseline")]
        same = v[0]["status"].equals(v[1]["status"])
        out["verdicts_equal"] = same
        print(f"every block's verdict equal: {same} ({v[0]['status'].value_counts().rows()})")
    elif this is not None and base is None:
        print(f"ratio this/baseline: < {this / a.timeout:.2f}x (the baseline did not finish)")
    return out


if __name__ == "__main__":
    record("rounded", main)
