"""Person claims proven in the count program over the schema against the person model's tract
model they were proven in before, side by side in one run (issue 36).

Run (from the repository root):
python -m benchmarks.bench_claims_engine [--synthetic 20000] [--rounds 2] [--real]
    [--person-model REF]

The same inputs for both: the population's tables, this code's reconstruction and verdicts at
each level (``tabrecon.reconstruct(..., certify=True)``), then :func:`tabrecon.attacks.claims
.claims` (K = 100, seed 11) run by this code and by the code of git ``--person-model`` (default
:data:`PERSON_MODEL`, the last commit whose claims used the person model) from a temporary
worktree, alternating, each in a fresh process timing the call alone. Printed per level: each
one's seconds and their ratio, whether every record's smallest k, claim and baselines are equal,
and the tracts whose verified claims differ (a proof that runs out of time verifies none of a
tract's varying claims: the faster model verifies more).

``--person-model`` takes any ref: ``cc21b19`` is the last commit whose person claims had their
own candidate and trivial-claim code ("person model" in the output is that side). Against it
the verified claims differ by design (claims that repeat a block cell through other columns
are trivial now) while every record's claim stays equal.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from benchmarks.common import record, synthetic_and_real, worktree_of
from tabrecon.schema import write_microdata
from tabrecon.tables.persons import tabulate

#: The last commit whose person claims were proven in the person model's tract model
PERSON_MODEL = "8bf6ac6"

#: One side's claims, in a fresh process: ``python -c RUN truth rec blocks level out``
RUN = """
import json, sys, time
import polars as pl
from tabrecon.attacks.claims import claims
from tabrecon.schema import read_microdata
from tabrecon.tables.persons import tabulate
truth, rec, blocks, level, out = sys.argv[1:6]
ts, rec, blocks = tabulate(read_microdata(truth)), read_microdata(rec), pl.read_parquet(blocks)
t0 = time.perf_counter()
run = claims(ts, rec, blocks, level, seed=11)
took = time.perf_counter() - t0
run.persons.write_parquet(out + ".persons.parquet")
keep = ("unit", "status", "claims_k", "any_persons", "verified_varying", "candidates", "proofs")
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


def _side_by_side(md, rounds: int, label: str, ref: str = PERSON_MODEL) -> dict:
    from tabrecon import reconstruct

    ts = tabulate(md)
    print(f"{label}: {len(md):,} persons, {len(md.geoids):,} blocks, {len(ts.tracts())} tracts")
    here = Path(__file__).resolve().parents[1] / "src"
    out = {}
    with tempfile.TemporaryDirectory() as d, worktree_of(ref, "--person-model") as old_code:
        truth = Path(d) / "truth.parquet"
        write_microdata(md, str(truth))
        for level in ("block", "block+tract"):
            run = reconstruct(ts, level, certify=True)
            rec, blocks = Path(d) / f"rec-{level}.parquet", Path(d) / f"blocks-{level}.parquet"
            write_microdata(run.records, str(rec))
            run.blocks.write_parquet(blocks)
            args = [str(truth), str(rec), str(blocks), level]
            t: dict[str, list[float]] = {"schema": [], "person": []}
            res: dict[str, dict] = {}
            for i in range(rounds):
                res["person"] = _run(old_code, [*args, f"{d}/person{i}"])
                res["schema"] = _run(here, [*args, f"{d}/schema{i}"])
                for side in t:
                    t[side].append(res[side]["seconds"])
            last = rounds - 1
            a = pl.read_parquet(f"{d}/schema{last}.persons.parquet")
            b = pl.read_parquet(f"{d}/person{last}.persons.parquet")
            differ = [
                (x["unit"], x["verified_varying"], y["verified_varying"])
                for x, y in zip(res["schema"]["results"], res["person"]["results"], strict=True)
                if x["claims_k"] != y["claims_k"]
            ]
            g, p = statistics.mean(t["schema"]), statistics.mean(t["person"])
            print(
                f"  {level}: over the schema {', '.join(f'{x:.1f}' for x in t['schema'])} s, "
                f"person model {', '.join(f'{x:.1f}' for x in t['person'])} s; ratio {g / p:.2f}; "
                f"persons singled out {res['schema']['singled_out']:,} against "
                f"{res['person']['singled_out']:,}; every record's claim equal: {a.equals(b)}; "
                f"tracts whose verified claims differ (tract, varying verified here, there): "
                f"{differ or 'none'}; failed tracts {res['schema']['failed']}, "
                f"{res['person']['failed']}"
            )
            out[level] = {
                "schema_s": t["schema"],
                "person_s": t["person"],
                "ratio": round(g / p, 3),
                "singled_out": [res["schema"]["singled_out"], res["person"]["singled_out"]],
                "same_records": a.equals(b),
                "differ": differ,
            }
    return out


def main() -> dict:
    return synthetic_and_real(__doc__ or "", _side_by_side, 20_000, PERSON_MODEL)


if __name__ == "__main__":
    record("claims_engine", main)
