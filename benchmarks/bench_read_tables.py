"""Reading a population's published tables up to the first tract solved: what
``tabrecon reconstruct --schema households TABLES`` does before the engine starts -- read the file
(long CSV and wide CSV), check it against the publication rule, split it by tract -- on a
synthetic county's housing-unit tables (``--schema persons``: its person tables, the 34 and
P3-P5, read by ``tabrecon.tables.published.read_tables`` and split as a person release is), best
of ``--rounds``, this code beside ``--baseline REF``'s (a temporary worktree) in one run, with
their ratio.

Run (from the repository root):
python -m benchmarks.bench_read_tables [--schema households|persons] [--persons 100000]
    [--rounds 3] [--baseline REF]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from benchmarks.common import machine, record, worktree_of

FORMS = ("long.csv", "wide.csv")


def measure(folder: Path, rounds: int, schema: str = "households") -> dict[str, float]:
    """Best seconds of each form read, checked and split by tract, with the code importable now
    (a long table from readers before e409766, a TableSet after)."""
    if schema == "persons":
        return _measure_persons(folder, rounds)
    from tabrecon.engine.release import TractTables
    from tabrecon.schema.registry import population
    from tabrecon.tables.publication import EXACT
    from tabrecon.tables.reader import read_unit_tables
    from tabrecon.tables.spec import cell_tables

    pop = population("households")
    out = {}
    for form in FORMS:
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            got = read_unit_tables(folder / form, pop)
            long = got if isinstance(got, pl.DataFrame) else got.to_frame()
            EXACT.check(long, form, table_of=cell_tables(pop))
            if isinstance(got, pl.DataFrame):
                split = TractTables.of_long(got, pop)
            else:
                split = TractTables.of_tables(got, pop)
            best = min(best, time.perf_counter() - t)
        out[form] = best
        out[f"{form} tracts"] = len(split.parts)
    return out


def _measure_persons(folder: Path, rounds: int) -> dict[str, float]:
    """:func:`measure` for person tables: read by the person entry point of either code (its
    own reader before aaf3a26, the one every population uses after) and split as a release."""
    from tabrecon.tables.published import read_tables

    # the plan every population's reconstruction makes (before it, the person one)
    release = importlib.import_module("tabrecon.engine.release")
    persons = importlib.import_module("tabrecon.populations.persons")

    def split_of(ts: object) -> Any:
        if hasattr(release, "plan_release"):
            return release.plan_release(ts, persons.PERSONS, "block+tract").split
        return persons.release_tracts(ts, "block+tract")[0]

    out = {}
    for form in FORMS:
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            split = split_of(read_tables(folder / form))
            best = min(best, time.perf_counter() - t)
        out[form] = best
        out[f"{form} tracts"] = len(split.parts)
    return out


def _write(folder: Path, persons: int, schema: str = "households") -> int:
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema.registry import population
    from tabrecon.tables.spec import as_published, tabulate_units

    if schema == "persons":  # block rows and tract rows in one wide file
        from tabrecon.tables.persons import tabulate

        long = tabulate(synthesize(SynthConfig(persons=persons), seed=7)).to_frame()
        long.write_csv(folder / "long.csv")
        wide = long.pivot(on="cell", index="geoid", values="value").rename({"geoid": "GEOID"})
        wide.write_csv(folder / "wide.csv")
        return long.height
    pop = population("households")
    assert pop.synthesize is not None
    long = tabulate_units(pop.synthesize(SynthConfig(persons=persons), 7))
    as_published(long, pop).write_csv(folder / "long.csv")
    wide = long.pivot(on="cell", index="geoid", values="value").rename({"geoid": "GEOID"})
    wide.write_csv(folder / "wide.csv")
    return long.height


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--persons", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="git ref of the code compared against")
    ap.add_argument("--schema", choices=("households", "persons"), default="households")
    a = ap.parse_args()
    print(f"# reading published tables -- {machine()}")
    folder = Path(tempfile.mkdtemp(prefix="tabrecon-read-"))
    cells = _write(folder, a.persons, a.schema)
    what = "person" if a.schema == "persons" else "housing-unit"
    print(f"{what} tables of a {a.persons:,}-person county: {cells:,} cells")
    runs = {"this code": measure(folder, a.rounds, a.schema)}
    if a.baseline:
        with worktree_of(a.baseline) as code:
            env = {**os.environ, "PYTHONPATH": str(code)}
            cmd = [sys.executable, "-c", _CHILD, str(folder), str(a.rounds), a.schema]
            got = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[f"baseline {a.baseline}"] = json.loads(got.stdout.strip().splitlines()[-1])
    for label, r in runs.items():
        shown = (f"{f} {r[f]:.2f} s ({r[f + ' tracts']} tracts)" for f in FORMS)
        print(f"{label}: " + ", ".join(shown))
    if a.baseline:
        now, base = runs["this code"], runs[f"baseline {a.baseline}"]
        ratios = (f"{f} {base[f] / now[f]:.2f}x" for f in FORMS)
        print("ratio (baseline / this code): " + ", ".join(ratios))
    return runs


#: what the baseline's interpreter runs: this file's ``measure`` with the baseline's tabrecon
_CHILD = (
    "import json, sys; from pathlib import Path; "
    f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); "
    "from benchmarks.bench_read_tables import measure; "
    "print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3])))"
)


if __name__ == "__main__":
    record("read_tables", main)
