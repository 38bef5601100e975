"""Persons on the count model written over any schema against the person model it replaced, side
by side in one run (issue 36).

Run (from the repository root):
python -m benchmarks.bench_persons_engine [--synthetic 0] [--rounds 2] [--real]
    [--person-model REF]

The person model (``tabrecon.attacks.reconstruct`` and ``tabrecon.attacks.certify``) was
deleted once every person command ran on the engine written over any schema
(:func:`tabrecon.reconstruct`);
it runs here from a temporary worktree of git ``--person-model`` (default
:data:`PERSON_MODEL`, the last commit that had it). Each round runs both, alternating, each in a
fresh process with the same interpreter, timing its calls alone (imports and reading the data
left out): at block and block+tract, reconstruction + certification with distances, then
``tabrecon solvar``'s question, certifying records given (the person model's reconstruction).
Printed per level: each one's seconds and their ratio (issue 36 asks <= 1.05), whether every
block's verdict, population and proven flag are equal (and, given the same records, solvar),
whether this code's records tabulate back to every cell the level uses, and each one's
agreement with the truth (exact age, agebin): where a block varies the two may pick different,
equally consistent records.
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
from tabrecon.metrics.agreement import agree
from tabrecon.schema import read_microdata, write_microdata
from tabrecon.tables.persons import tabulate

#: The last commit with the person model (the parent of the commit that deleted it)
PERSON_MODEL = "d1a94a4"

#: One side's run, in a fresh process: ``python -c RUN truth.parquet level side out given``
#: (``given``: records to certify as ``tabrecon solvar`` does, or ``self``: the run's own)
RUN = """
import json, sys, time
from tabrecon.schema import read_microdata, write_microdata
try:
    from tabrecon.tables.persons import tabulate
except ImportError:  # the person model's commit: the tables were one module
    from tabrecon.tables import tabulate
truth, level, side, out, given = sys.argv[1:6]
ts = tabulate(read_microdata(truth))
t0 = time.perf_counter()
if side == "person":  # the person model, at a commit that has it
    from tabrecon.attacks.certify import certify
    from tabrecon.attacks.reconstruct import reconstruct
    rec = reconstruct(ts, level).records
    blocks = certify(ts, rec, level, distance=True).blocks
else:
    from tabrecon import certify, reconstruct
    run = reconstruct(ts, level, certify=True, distance=True)
    rec, blocks = run.records, run.blocks
took = time.perf_counter() - t0
solvar = None
if given:  # "self": these records, as tabrecon solvar is given them
    given = rec if given == "self" else read_microdata(given)
    t0 = time.perf_counter()
    certify(ts, given, level, distance=True).blocks.write_parquet(out + ".solvar.parquet")
    solvar = time.perf_counter() - t0
write_microdata(rec, out + ".records.parquet")
blocks.write_parquet(out + ".blocks.parquet")
print(json.dumps({"seconds": took, "solvar_seconds": solvar}))
"""


def _run(code: Path | None, truth: Path, level: str, side: str, out: Path, given: str) -> dict:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    p = subprocess.run(
        [sys.executable, "-c", RUN, str(truth), level, side, str(out), given],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if p.returncode != 0:
        raise SystemExit(f"{side} at {level} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _same_cells(ts, records, level: str) -> bool:
    """The records tabulate back to every cell of the tables the level reads."""
    want, got = ts.to_frame(), tabulate(records).to_frame()
    if level == "block":
        want, got = (f.filter(pl.col("geoid").str.len_chars() == 15) for f in (want, got))
    j = want.join(got, on=["geoid", "cell"], how="left")
    return bool((j["value"] == j["value_right"].fill_null(0)).all())


def _side_by_side(md, rounds: int, label: str, ref: str = PERSON_MODEL) -> dict:
    ts = tabulate(md)
    print(f"{label}: {len(md):,} persons, {len(md.geoids):,} blocks, {len(ts.tracts())} tracts")
    out = {}
    with tempfile.TemporaryDirectory() as d, worktree_of(ref, "--person-model") as old_code:
        truth = Path(d) / "truth.parquet"
        write_microdata(md, str(truth))
        here = Path(__file__).resolve().parents[1] / "src"
        for level in ("block", "block+tract"):
            t: dict[str, list[float]] = {"schema": [], "person": [], "cs": [], "cp": []}
            for i in range(rounds):
                po, so = Path(d) / f"person{i}", Path(d) / f"schema{i}"
                p = _run(old_code, truth, level, "person", po, "self")
                s = _run(here, truth, level, "schema", so, f"{po}.records.parquet")
                t["person"].append(p["seconds"])
                t["schema"].append(s["seconds"])
                t["cs"].append(s["solvar_seconds"])
                t["cp"].append(p["solvar_seconds"])
            cols = ["block_geoid", "persons", "status", "proven"]
            a = pl.read_parquet(f"{so}.blocks.parquet").select(cols).sort("block_geoid")
            b = pl.read_parquet(f"{po}.blocks.parquet").select(cols).sort("block_geoid")
            same = a.equals(b)
            sv = [*cols, "solvar"]
            mine = pl.read_parquet(f"{so}.solvar.parquet").select(sv).sort("block_geoid")
            theirs = pl.read_parquet(f"{po}.solvar.parquet")
            same_sv = mine.equals(theirs.select(sv).sort("block_geoid"))
            new = read_microdata(f"{so}.records.parquet")
            old = read_microdata(f"{po}.records.parquet")
            ag_new, ag_old = agree(new, truth=md), agree(old, truth=md)
            g, p_ = statistics.mean(t["schema"]), statistics.mean(t["person"])
            cs, cp = statistics.mean(t["cs"]), statistics.mean(t["cp"])
            counts = dict(a.group_by("status").len().iter_rows())
            print(
                f"  {level}: over the schema {', '.join(f'{x:.1f}' for x in t['schema'])} s, "
                f"person model {', '.join(f'{x:.1f}' for x in t['person'])} s; ratio "
                f"{g / p_:.2f} (<= 1.05 asked); verdicts {counts}; every block's verdict, "
                f"persons and proven flag equal: {same}; tabulates back: "
                f"{_same_cells(ts, new, level)}; agreement exact/binned {ag_new.exact_pct:.2f}/"
                f"{ag_new.binned_pct:.2f}% against {ag_old.exact_pct:.2f}/{ag_old.binned_pct:.2f}%"
            )
            print(
                f"  {level}, certifying the person model's records (tabrecon solvar): over the "
                f"schema {', '.join(f'{x:.1f}' for x in t['cs'])} s, person model "
                f"{', '.join(f'{x:.1f}' for x in t['cp'])} s; ratio {cs / cp:.2f}; every "
                f"block's verdict and solvar equal: {same_sv}"
            )
            out[level] = {
                "schema_s": t["schema"],
                "person_s": t["person"],
                "ratio": round(g / p_, 3),
                "solvar_schema_s": t["cs"],
                "solvar_person_s": t["cp"],
                "solvar_ratio": round(cs / cp, 3),
                "same_verdicts": same,
                "solvar_same": same_sv,
                "verdicts": counts,
                "exact_pct": [round(ag_new.exact_pct, 2), round(ag_old.exact_pct, 2)],
                "binned_pct": [round(ag_new.binned_pct, 2), round(ag_old.binned_pct, 2)],
            }
    return out


def main() -> dict:
    return synthetic_and_real(__doc__ or "", _side_by_side, 0, PERSON_MODEL)


if __name__ == "__main__":
    record("persons_engine", main)
