"""Person claims -- the audit's verified-claims stage, every tract's claims from its certified
reconstruction -- this code against the code of a git ref, side by side in one run.

Run (from the repository root):
python -m benchmarks.bench_claims --baseline REF [--k-solutions 40] [--synthetic 20000]
    [--seed 7] [--rounds 2] [--real] [--levels block+tract]

The same inputs for both sides: a synthetic county's (and with ``--real`` the real sample's)
tables, this code's reconstruction and verdicts at each level (``tabrecon.reconstruct(...,
certify=True)``), then ``tabrecon.claims`` (K = ``--k-solutions``: 40 is the audit's default;
seed 11, one worker) run by this code and by the code of ``--baseline`` from a temporary
worktree, alternating, each in a fresh process timing the call alone. Printed per level: each
side's seconds and their ratio, persons singled out, whether every record's smallest claim
is equal, and the tracts whose verified claims differ (a proof that runs out of time verifies
none of a tract's varying claims).

(It replaced ``bench_claims_engine``, which compared with the person model's tract model of
8bf6ac6 through an API that is gone; the figures it gave are kept in docs/figures.md.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from benchmarks.common import real_sample_tracts, record, worktree_of
from tabrecon.schema import write_microdata
from tabrecon.tables.persons import tabulate

#: One side's claims, in a fresh process: ``python -c RUN truth rec blocks level K out``
RUN = """
import json, sys, time
import polars as pl
import tabrecon
from tabrecon.schema import read_microdata
from tabrecon.tables.persons import tabulate
truth, rec, blocks, level, K, out = sys.argv[1:7]
ts, rec, blocks = tabulate(read_microdata(truth)), read_microdata(rec), pl.read_parquet(blocks)
t0 = time.perf_counter()
run = tabrecon.claims(ts, rec, blocks, level, k_solutions=int(K), seed=11)
took = time.perf_counter() - t0
run.persons.write_parquet(out + ".persons.parquet")
keep = ("unit", "status", "claims_k", "verified_varying", "candidates", "proofs")
s = run.summary()
print(json.dumps({"seconds": took, "results": [{k: r.get(k) for k in keep} for r in run.results],
                  "singled_out": s["persons_singled_out"], "failed": len(run.failed)}))
"""


def _run(code: Path, args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    p = subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, env=env, check=False
    )
    if p.returncode != 0:
        raise SystemExit(f"claims failed ({code}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def side_by_side(md, a: argparse.Namespace, label: str) -> dict:
    from tabrecon import reconstruct

    ts = tabulate(md)
    print(f"{label}: {len(md):,} persons, {len(md.geoids):,} blocks, {len(ts.tracts())} tracts")
    here = Path(__file__).resolve().parents[1] / "src"
    out = {}
    with tempfile.TemporaryDirectory() as d, worktree_of(a.baseline) as old_code:
        truth = Path(d) / "truth.parquet"
        write_microdata(md, str(truth))
        for level in a.levels.split(","):
            run = reconstruct(ts, level, certify=True)
            rec, blocks = Path(d) / f"rec-{level}.parquet", Path(d) / f"blocks-{level}.parquet"
            write_microdata(run.records, str(rec))
            run.blocks.write_parquet(blocks)
            args = [str(truth), str(rec), str(blocks), level, str(a.k_solutions)]
            t: dict[str, list[float]] = {"this": [], "base": []}
            res: dict[str, dict] = {}
            for i in range(a.rounds):
                res["base"] = _run(old_code, [*args, f"{d}/base{i}"])
                res["this"] = _run(here, [*args, f"{d}/this{i}"])
                for side in t:
                    t[side].append(res[side]["seconds"])
            last = a.rounds - 1
            same = pl.read_parquet(f"{d}/this{last}.persons.parquet").equals(
                pl.read_parquet(f"{d}/base{last}.persons.parquet")
            )
            differ = [
                (x["unit"], x["verified_varying"], y["verified_varying"])
                for x, y in zip(res["this"]["results"], res["base"]["results"], strict=True)
                if x["claims_k"] != y["claims_k"]
            ]
            g, p = statistics.mean(t["this"]), statistics.mean(t["base"])
            print(
                f"  {level}, K = {a.k_solutions}: this code "
                f"{', '.join(f'{x:.1f}' for x in t['this'])} s, {a.baseline} "
                f"{', '.join(f'{x:.1f}' for x in t['base'])} s; ratio {g / p:.2f}; persons "
                f"singled out {res['this']['singled_out']:,} against "
                f"{res['base']['singled_out']:,}; every record's claim equal: {same}; tracts "
                f"whose verified claims differ (tract, varying verified here, there): "
                f"{differ or 'none'}; failed tracts {res['this']['failed']}, "
                f"{res['base']['failed']}"
            )
            out[level] = {
                "this_s": t["this"],
                "baseline_s": t["base"],
                "ratio": round(g / p, 3),
                "singled_out": [res["this"]["singled_out"], res["base"]["singled_out"]],
                "same_records": same,
                "differ": differ,
            }
    return out


def main() -> dict:
    from tabrecon.records.synth import SynthConfig, synthesize

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--baseline", required=True, help="git ref of the code compared against")
    ap.add_argument("--k-solutions", type=int, default=40, help="K (40: the audit's default)")
    ap.add_argument("--synthetic", type=int, default=20_000, help="synthetic persons (0: none)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2, help="pairs of runs, alternating")
    ap.add_argument("--real", action="store_true", help="the real sample (28 tracts) too")
    ap.add_argument("--levels", default="block+tract", help="comma list: block, block+tract")
    a = ap.parse_args()
    out = {}
    if a.synthetic:
        md = synthesize(SynthConfig(persons=a.synthetic), seed=a.seed)
        out["synthetic"] = side_by_side(md, a, "synthetic")
    if a.real and (md := real_sample_tracts(28)) is not None:
        out["real"] = side_by_side(md, a, "real sample")
    return out


if __name__ == "__main__":
    record("claims", main)
