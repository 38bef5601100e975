"""Linear reconstruction lab speed: one bounded least-squares decode at n = m = 1000 (target <= 0.5
s), its cost near the n/2 threshold, LP and exact decoding (and exact finding at n = 200, m = 0.4
n), measured in one run.

Run (from the repository root): python -m benchmarks.bench_dn
The default Fig. 4-2 sweep is timed by its own command: `time tabrecon dn queries-needed`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np  # noqa: E402

from benchmarks.common import machine, peak_rss_mib, record  # noqa: E402
from tabrecon.attacks.linear import decode_exact, decode_lp, decode_lsq, make_instance  # noqa: E402


def timed(f, *a, reps: int = 5, **k) -> tuple[float, Any]:
    out, ts = None, []
    for _ in range(reps):
        t = time.perf_counter()
        out = f(*a, **k)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), out


def main() -> None:
    print(f"# linear reconstruction benchmark -- {machine()}")
    rng = np.random.default_rng(0)
    inst = make_instance(1000, 1000, rng)
    t, x = timed(decode_lsq, inst.Q, inst.a)
    print(
        f"bounded least squares, n = m = 1000, no noise: median {t:.3f} s (target <= 0.5 s), "
        f"recovered {(x == inst.x).mean():.3f}"
    )
    noisy = make_instance(1000, 1000, rng, "gaussian", sigma=2.0)
    t, x = timed(decode_lsq, noisy.Q, noisy.a)
    print(
        f"bounded least squares, n = m = 1000, Gaussian sigma 2 (ADMM): median {t:.3f} s, "
        f"recovered {(x == noisy.x).mean():.3f}"
    )
    for m in (400, 500, 600):
        t, x = timed(decode_lsq, inst.Q[:m], inst.a[:m], reps=1)
        print(
            f"bounded least squares, n = 1000, m = {m}: {t:.2f} s, recovered "
            f"{(x == inst.x).mean():.3f}"
        )
    small = make_instance(300, 300, rng)
    t, x = timed(decode_lp, small.Q, small.a, reps=1)
    print(f"LP decoding, n = m = 300: {t:.2f} s, recovered {(x == small.x).mean():.3f}")
    for n, m in ((40, 16), (60, 24), (80, 32)):
        e = make_instance(n, m, rng)
        t, r = timed(decode_exact, e.Q, e.a, reps=1, time_limit=60)
        print(f"exact decoding, n = {n}, m = {m} (0.4 n): {t:.2f} s, status {r.status}")
    # the lattice finder's regime: 0.4 n at n = 200, finding only (proofs time out there)
    for t in range(3):
        e = make_instance(200, 200, np.random.default_rng([0, 200, t])).first(80)
        t_, r = timed(decode_exact, e.Q, e.a, reps=1, time_limit=60, prove=False)
        got = r.x is not None and bool((r.x == e.x).all())
        print(
            f"exact finding, n = 200, m = 80 (0.4 n), instance {t}: {t_:.1f} s, "
            f"{'found by ' + r.found_by if got else 'not found in 60 s'}"
        )
    print(f"peak memory: {peak_rss_mib():,.0f} MiB")


if __name__ == "__main__":
    record("dn", main)
