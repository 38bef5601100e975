"""The zero test's proofs, spread or one key at a time, side by side (issue 40, item 2).

Run (from the repository root):
python -m benchmarks.bench_zero_test [--synthetic 100000] [--rounds 2] [--real]

Certification decides every block by the zero test (:func:`tabrecon.engine.uniqueness
.zero_test`): each proof asks for a population in which some key of a still-open block falls
below its count; the blocks that differ in it are set aside and the test repeats until a proof
finds none. With :data:`~tabrecon.engine.uniqueness.SPREAD_WORK` each proof instead asks, for
that much of CP-SAT's deterministic time, for the population in which the most keys fall, so one
proof sets many blocks aside. Timed here both ways, alternating in one process (``--rounds``
pairs), on synthetic persons where a third of the blocks vary: certification over the person
schema at block+tract with every varying block's distance (``reconstruct_units``) and person
certification (``tabrecon.attacks.certify``) of the person reconstruction. With ``--real`` the
real sample too, where every block is unique and one proof per tract settles it. Every run's
verdicts and solvar are compared with the first's.
"""

from __future__ import annotations

import statistics
import time

import polars as pl

import tabrecon.engine.uniqueness as U
import tabrecon.engine.variability as V
from benchmarks.common import record, synthetic_and_real
from tabrecon import certify, reconstruct
from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
from tabrecon.schema import AGEBIN_OF_AGE, person_units
from tabrecon.schema.registry import population
from tabrecon.tables.persons import tabulate
from tabrecon.tables.spec import tabulate_units
from tabrecon.vocab import Level

SPREAD = U.SPREAD_WORK


def _side_by_side(md, rounds: int, label: str) -> dict:
    long = tabulate_units(person_units(md))
    ts = tabulate(md)
    person = reconstruct(ts, "block+tract").records
    proofs: list[int] = []
    zero_test = V.zero_test

    def counted(*a, **k):
        proofs.append(zero_test(*a, **k))
        return proofs[-1]

    V.zero_test = counted
    times: dict[str, dict[str, list[float]]] = {"spread": {}, "plain": {}}
    first: dict[str, pl.DataFrame] = {}
    same = True
    n_proofs: dict[str, int] = {}
    try:
        for _ in range(rounds):
            for mode in ("spread", "plain"):
                U.SPREAD_WORK = SPREAD if mode == "spread" else None
                proofs.clear()
                t0 = time.perf_counter()
                g = reconstruct_units(
                    long,
                    population("persons"),
                    ReconstructOptions(
                        level=Level.BLOCK_TRACT, unique_on={"age": AGEBIN_OF_AGE}, distance=True
                    ),
                ).blocks.select("geoid", "status", "solvar")
                t1 = time.perf_counter()
                n_proofs[mode] = sum(proofs)
                c = certify(ts, person, "block+tract").blocks.select(
                    "block_geoid", "status", "solvar"
                )
                t2 = time.perf_counter()
                times[mode].setdefault("generic", []).append(t1 - t0)
                times[mode].setdefault("person", []).append(t2 - t1)
                for k, f in (("generic", g), ("person", c)):
                    same &= first.setdefault(k, f).equals(f)
    finally:
        V.zero_test, U.SPREAD_WORK = zero_test, SPREAD
    varying = int((first["generic"]["status"] == "varies").sum())
    print(f"{label}: {len(md):,} persons, {first['generic'].height:,} blocks, {varying:,} vary")
    out: dict = {"persons": len(md), "blocks": first["generic"].height, "varying": varying}
    for k, what in (
        ("generic", "count model over the person schema, block+tract, with distances"),
        ("person", "person certification of the person reconstruction"),
    ):
        s, p = statistics.mean(times["spread"][k]), statistics.mean(times["plain"][k])
        print(
            f"  {what}: spread {', '.join(f'{t:.1f}' for t in times['spread'][k])} s, "
            f"one key at a time {', '.join(f'{t:.1f}' for t in times['plain'][k])} s; "
            f"mean ratio {s / p:.2f}"
        )
        out[k] = {"spread_s": s, "plain_s": p, "ratio": s / p}
    print(
        f"  zero-test proofs (count model): spread {n_proofs['spread']}, "
        f"one key at a time {n_proofs['plain']}"
    )
    print(f"  every run's verdicts and solvar equal: {same}")
    out |= {"proofs": n_proofs, "same": same}
    return out


def main() -> dict:
    return synthetic_and_real(__doc__, _side_by_side, 100_000)


if __name__ == "__main__":
    record("bench_zero_test", main)
