"""The matrix mechanism's exact expected error against simulation with OpenDP's noise, and
randomized response's closed forms against simulation and a numerical derivative (issue 21).

Run (from the repository root):
python -m benchmarks.bench_frontier [--draws 1000] [--workers 2] [--rho 1]
    [--strategies identity,workload,marginals,topdown] [--one-draws 200]

For the SF1 block workload (the 844 cells of the 34 tables published per block) and each
strategy: Delta_A (l1, l2), the exact expected squared error and its time, the simulated error
(``--draws`` exact discrete Gaussian draws per strategy query from OpenDP, least squares by
conjugate gradients) with its standard error, and their ratio. Then the same for the whole
34-table workload on one geounit (4,188 cells, ``--one-draws``), and randomized response over
epsilon 0.1 ... 5.
"""

from __future__ import annotations

import argparse
import time
from typing import cast

from benchmarks.common import record
from tabrecon.defenses.matrix import Budget, Strategy, Workload
from tabrecon.metrics.frontier import rr_frontier
from tabrecon.metrics.matrix_error import expected_error, simulate_error


def check(w: Workload, spec: str, budget: Budget, draws: int, workers: int) -> float:
    s = Strategy.parse(spec, w)
    t = time.perf_counter()
    e = expected_error(w, s, budget)
    t_exact = time.perf_counter() - t
    t = time.perf_counter()
    sim = simulate_error(w, s, budget, draws, workers=workers, chunk=50)
    t_sim = time.perf_counter() - t
    rel = sim.total / e.total - 1
    print(
        f"{w.name} | {spec}: Delta_A l1 {s.delta(1).value:g} l2 {s.delta(2).value:.4g} "
        f"(unbounded), {s.rows:,} queries | exact {e.total:,.1f} ({e.method}, {t_exact:.2f} s) | "
        f"simulated {sim.total:,.1f} +- {sim.se:,.1f} ({draws} draws, {t_sim:.0f} s, "
        f"CG <= {sim.iterations} iterations, max bias {sim.max_bias:.1e}) | "
        f"simulated/exact - 1 = {100 * rel:+.2f}% ({rel * e.total / sim.se:+.2f} SE)",
        flush=True,
    )
    return rel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--one-draws", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rho", type=float, default=1.0)
    ap.add_argument("--strategies", default="identity,workload,marginals,topdown")
    args = ap.parse_args()
    budget = Budget.zcdp(args.rho)
    specs = [s for s in args.strategies.split(",") if s]
    print(f"budget {budget.label} (bounded neighbours), OpenDP discrete Gaussian noise")
    block = Workload.from_tables("all", level="block")
    rels = {spec: check(block, spec, budget, args.draws, args.workers) for spec in specs}
    print(
        "block workload, |simulated/exact - 1| by strategy: "
        + ", ".join(f"{k} {100 * abs(v):.2f}%" for k, v in rels.items())
    )
    if args.one_draws:
        one = Workload.from_tables("all", level=None)
        for spec in specs:
            check(one, spec, budget, args.one_draws, args.workers)
    t = time.perf_counter()
    rr = rr_frontier([0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0], reps=200_000)
    print(
        f"randomized response (pi 0.3, n 1000, 200,000 surveys per epsilon, 0.1 <= eps <= 5, "
        f"{time.perf_counter() - t:.1f} s): max |var sim/closed - 1| "
        f"{100 * cast(float, rr['var_rel_diff'].abs().max()):.2f}%, max |slope numeric/closed - 1| "
        f"{cast(float, rr['slope_rel_diff'].abs().max()):.1e}"
    )


if __name__ == "__main__":
    record("frontier", main)
