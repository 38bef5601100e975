"""Calibrate the commercial attacker to the Bureau's COMRCL rates (issue 23) and report the fit,
its residuals and each error rate's effect on the attack's advantage over PRG.

Run (from the repository root):
python -m benchmarks.bench_attacker [--persons 1000000] [--fit-persons 200000] [--evals 120]

1. A synthetic population with the 2010 national block-size mix (``--persons``), released as the
   Bureau's HDF was -- through ``swap-2010``, the risk-targeted swap sized to the HDF-CEF
   agreement by block size -- tabulated and reconstructed at block+tract (rHDF_b,t).
2. The error process (coverage, stale block, ages off by one and by 2-10 years, the other sex,
   records of nobody) is fitted on the first ``--fit-persons`` persons' tracts by Nelder-Mead to
   what the Bureau's COMRCL did *relative to its perfect attacker* (CEF_atkr), which cancels what
   belongs to the release and the reconstruction rather than to the attacker data: nonmodal
   precision COMRCL / CEF_atkr by block size, all-person precision COMRCL / CEF_atkr for rHDF_b,t
   and for the CEF, the putative rate (57.5%) and records per person (289.1 / 308.7).
3. At the fitted rates, on the whole population: putative rate, precision (rHDF_b,t and the
   truth) and nonmodal precision by block size beside the Bureau's absolute figures (Abowd et al.
   Tables 4, 5), the perfect attacker's beside CEF_atkr's, and the residuals; then each rate
   moved by half its value (or 0.05) and the change of the attack's nonmodal advantage over PRG.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, replace

import numpy as np
import polars as pl

from benchmarks.common import record
from tabrecon.attacks.reconstruct import reconstruct
from tabrecon.attacks.reidentify import CommercialErrors, reidentify
from tabrecon.defenses.defense import Defense
from tabrecon.schema import BLOCK_SIZE_LABELS
from tabrecon.synth import SynthConfig, synthesize
from tabrecon.tables import tabulate

#: Abowd et al. (2023): rHDF_b,t nonmodal precision by block size, COMRCL and CEF_atkr
BUREAU_COMRCL = (83.7, 65.3, 50.3, 38.3, 28.3, 23.4, 21.0)
BUREAU_ATKR = (86.0, 71.5, 56.0, 41.9, 30.7, 24.9, 22.1)
BUREAU = {
    "putative_pct": 100 * 166_100 / 289_100,  # rHDF_b,t, COMRCL (Table 4)
    "rec_all": 41.2,
    "truth_all": 49.4,
    "rec_all_atkr": 77.9,
    "truth_all_atkr": 86.1,
    "rec_nonmodal": 41.0,
    "records_per_person": 289.1 / 308.7,
}
FITTED = ("coverage", "wrong_block", "extras", "age_off_by_one", "age_far", "sex_error")


def measure(md, rec, ts, attacker, errors=None, seed=1) -> dict:
    res = reidentify(rec, md, attacker, ts, seed=seed, errors=errors)
    rt = res.rates(by_bin=True)

    def g(src, grp, b="all", k="precision_pct"):
        v = rt.filter((pl.col("source") == src) & (pl.col("group") == grp) & (pl.col("bin") == b))[
            k
        ][0]
        return float("nan") if v is None else float(v)

    return {
        "records": int(res.records.height),
        "putative_pct": g("attack", "all", k="putative_pct"),
        "rec_all": g("attack", "all"),
        "truth_all": g("truth", "all"),
        "rec_nonmodal": g("attack", "nonmodal"),
        "prg_nonmodal": g("prg", "nonmodal"),
        "bins": [g("attack", "nonmodal", b) for b in BLOCK_SIZE_LABELS],
    }


def loss(m: dict, perfect: dict, persons: int) -> float:
    """Squared distance (in points) to the Bureau's attacker-specific figures."""
    r_bins = [
        100 * (a / p - c / k)
        for a, p, c, k in zip(m["bins"], perfect["bins"], BUREAU_COMRCL, BUREAU_ATKR, strict=True)
        if a == a and p == p
    ][:6]  # up to 500-999
    terms = [
        *r_bins,
        m["putative_pct"] - BUREAU["putative_pct"],
        100 * (m["rec_all"] / perfect["rec_all"] - BUREAU["rec_all"] / BUREAU["rec_all_atkr"]),
        100
        * (m["truth_all"] / perfect["truth_all"] - BUREAU["truth_all"] / BUREAU["truth_all_atkr"]),
        100 * (m["records"] / persons - BUREAU["records_per_person"]),
    ]
    return float(sum(t * t for t in terms))


def _errors(x: np.ndarray) -> CommercialErrors:
    p = 1 / (1 + np.exp(-x))  # every rate in (0, 1)
    vals = dict(zip(FITTED, p.tolist(), strict=True))
    if vals["age_off_by_one"] + vals["age_far"] > 1:
        vals["age_far"] = 1 - vals["age_off_by_one"]
    return CommercialErrors(**vals)


def release(persons: int, seed: int):
    t = time.perf_counter()
    md = synthesize(SynthConfig(persons=persons), seed=seed)
    prot = Defense.parse("swap-2010").protect(md, seed)
    run = reconstruct(tabulate(prot.records), "block+tract", workers=2)
    if run.failed:
        raise SystemExit(f"reconstruction failed in {len(run.failed)} tract(s)")
    print(
        f"population {len(md):,} persons, {len(md.geoids):,} blocks; swap-2010 release "
        f"reconstructed at block+tract in {time.perf_counter() - t:.0f} s",
        flush=True,
    )
    return md, run.records, tabulate(md, ["P8", "P9"])


def fmt_bins(v) -> str:
    return " / ".join("n/a" if x != x else f"{x:.1f}" for x in v)


def main() -> None:
    from scipy.optimize import minimize

    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=1_000_000)
    ap.add_argument("--fit-persons", type=int, default=200_000)
    ap.add_argument("--evals", type=int, default=120)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    # the fit on a smaller population of the same design
    fmd, frec, fts = release(args.fit_persons, args.seed + 1)
    fperf = measure(fmd, frec, fts, "perfect")
    start = CommercialErrors(
        coverage=0.8,
        wrong_block=0.3,
        extras=0.15,
        age_off_by_one=0.05,
        age_far=0.02,
        sex_error=0.01,
    )
    x0 = np.array([np.log(v / (1 - v)) for v in (getattr(start, k) for k in FITTED)])
    t = time.perf_counter()
    calls = []

    def f(x):
        m = measure(fmd, frec, fts, "commercial", _errors(x))
        v = loss(m, fperf, len(fmd))
        calls.append(v)
        return v

    opt = minimize(f, x0, method="Nelder-Mead", options={"maxfev": args.evals, "xatol": 0.05})
    fitted = _errors(opt.x)
    print(
        f"fit: {len(calls)} evaluations on {len(fmd):,} persons in {time.perf_counter() - t:.0f} s,"
        f" loss {calls[0]:.1f} -> {opt.fun:.1f}; fitted rates: "
        + ", ".join(f"{k} {getattr(fitted, k):.4f}" for k in FITTED),
        flush=True,
    )
    # the whole population at the fitted rates
    md, rec, ts = release(args.persons, args.seed)
    perf = measure(md, rec, ts, "perfect")
    m = measure(md, rec, ts, "commercial", fitted)
    old = measure(md, rec, ts, "commercial", CommercialErrors())
    print(
        f"putative rate: commercial-2010 {m['putative_pct']:.1f}% "
        f"(Bureau {BUREAU['putative_pct']:.1f}%, difference "
        f"{m['putative_pct'] - BUREAU['putative_pct']:+.1f}); records per person "
        f"{m['records'] / len(md):.3f} (Bureau {BUREAU['records_per_person']:.3f})"
    )
    print(
        f"precision, all persons: reconstruction {m['rec_all']:.1f}% (Bureau 41.2), truth "
        f"{m['truth_all']:.1f}% (Bureau 49.4); nonmodal {m['rec_nonmodal']:.1f}% (Bureau 41.0); "
        f"the old 'commercial' preset: {old['rec_all']:.1f} / {old['truth_all']:.1f} / "
        f"{old['rec_nonmodal']:.1f}"
    )
    print("nonmodal precision by block size (" + " / ".join(BLOCK_SIZE_LABELS) + "):")
    print(f"  commercial-2010: {fmt_bins(m['bins'])}")
    print(f"  Bureau COMRCL:   {fmt_bins(BUREAU_COMRCL)}")
    resid = [a - b for a, b in zip(m["bins"], BUREAU_COMRCL, strict=True)]
    print(f"  residuals:       {' / '.join(f'{r:+.1f}' for r in resid)}")
    ok = all(abs(r) <= 5 for r in resid[:6] if r == r)
    print(f"  within 5 points in every bin up to 500-999: {'yes' if ok else 'no'}")
    print(f"  perfect attacker: {fmt_bins(perf['bins'])}")
    print(f"  Bureau CEF_atkr:  {fmt_bins(BUREAU_ATKR)}")
    ratio = [a / p for a, p in zip(m["bins"], perf["bins"], strict=True)]
    bratio = [a / b for a, b in zip(BUREAU_COMRCL, BUREAU_ATKR, strict=True)]
    print(f"  ratio commercial-2010 / perfect: {' / '.join(f'{r:.3f}' for r in ratio)}")
    print(f"  ratio COMRCL / CEF_atkr (Bureau): {' / '.join(f'{r:.3f}' for r in bratio)}")
    adv = m["rec_nonmodal"] - m["prg_nonmodal"]
    print(f"attack's nonmodal advantage over PRG: {adv:+.1f} points; sensitivity to each rate:")
    for k in FITTED:
        v = getattr(fitted, k)
        for new in (v * 0.5, min(v * 1.5, 1.0) if v > 0.0 else 0.05):
            try:
                e = replace(fitted, **{k: new})
            except Exception:
                continue
            mm = measure(md, rec, ts, "commercial", e)
            d = (mm["rec_nonmodal"] - mm["prg_nonmodal"]) - adv
            print(
                f"  {k} {v:.4f} -> {new:.4f}: advantage {d:+.2f} points, putative "
                f"{mm['putative_pct'] - m['putative_pct']:+.1f}, precision (all) "
                f"{mm['rec_all'] - m['rec_all']:+.1f}"
            )
    print("fitted CommercialErrors: " + repr(asdict(fitted)))


if __name__ == "__main__":
    record("attacker", main)
