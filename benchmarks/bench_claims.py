"""Person claims' diverse solutions from the linear relaxation's vertices or from CP-SAT, side by
side.

Run (from the repository root):
python -m benchmarks.bench_claims [--synthetic 20000] [--rounds 2] [--real]

Verified claims about the persons of blocks that vary (:func:`tabrecon.attacks.claims.claims`)
start from K solutions of each tract's program under random objectives; a claim whose count is
the same in all of them is a candidate, then proved. With
:data:`~tabrecon.attacks.claims.VERTEX_FIRST` each objective is asked of the tract's linear
relaxation first (HiGHS, re-optimised from its last basis) and its optimal vertex taken when it
is an integer solution; otherwise CP-SAT searches for every objective. Timed here both ways,
alternating in one process (``--rounds`` pairs), on a synthetic county reconstructed and
certified at block+tract (``--real``: the real sample too, where every block is unique and no
solution is asked for). Every run's claims are compared with the first's: they must be equal,
since a verified claim holds in every population whatever the solutions drawn.
"""

from __future__ import annotations

import statistics
import time

import tabrecon.attacks.claims as C
from benchmarks.common import record, synthetic_and_real
from tabrecon import certify, reconstruct
from tabrecon.tables.persons import tabulate


def _side_by_side(md, rounds: int, label: str) -> dict:
    ts = tabulate(md)
    rec = reconstruct(ts, "block+tract").records
    blocks = certify(ts, rec, "block+tract").blocks
    varying = int((blocks["status"] != "unique").sum())
    print(f"{label}: {len(md):,} persons, {blocks.height:,} blocks, {varying:,} not unique")
    times: dict[bool, list[float]] = {True: [], False: []}
    counts: dict[bool, tuple[int, int]] = {}
    first = None
    same = True
    was = C.VERTEX_FIRST
    try:
        for _ in range(rounds):
            for vertex in (True, False):
                C.VERTEX_FIRST = vertex
                t0 = time.perf_counter()
                run = C.claims(ts, rec, blocks, "block+tract", seed=11)
                times[vertex].append(time.perf_counter() - t0)
                same &= not run.failed
                persons = run.persons.sort(run.persons.columns[:3])
                first = persons if first is None else first
                same &= persons.equals(first)
                ok = [r for r in run.results if r["status"] == "ok"]
                counts[vertex] = (
                    sum(r.get("candidates", 0) for r in ok),
                    sum(r.get("proofs", 0) for r in ok),
                )
    finally:
        C.VERTEX_FIRST = was
    v, c = statistics.mean(times[True]), statistics.mean(times[False])
    print(
        f"  claims, vertices first: {', '.join(f'{t:.1f}' for t in times[True])} s; CP-SAT for "
        f"every objective: {', '.join(f'{t:.1f}' for t in times[False])} s; mean ratio "
        f"{v / c:.2f}"
    )
    print(
        f"  candidates and proofs: vertices first {counts[True]}, CP-SAT {counts[False]}; every "
        f"run ended ok with the same claims: {same}"
    )
    return {
        "persons": len(md),
        "blocks": blocks.height,
        "not_unique": varying,
        "vertex_s": times[True],
        "cpsat_s": times[False],
        "ratio": v / c,
        "same": same,
    }


def main() -> dict:
    return synthetic_and_real(__doc__, _side_by_side, 20_000)


if __name__ == "__main__":
    record("bench_claims", main)
