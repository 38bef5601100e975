"""End-to-end runs that chain the pipeline steps: the demo (publish -> reconstruct -> certify -> link)."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from .schema import write_microdata
from .synth import SynthConfig, calibration, synthesize
from .tables import check_consistency, tabulate, write_tables


def run_demo(
    out: str | Path, persons: int = 20_000, seed: int = 2010, console: Console | None = None
) -> dict:
    """Synthesize a county, publish its 34 tables, reconstruct, certify and reidentify; return a summary.

    Writes ``truth.parquet``, ``tables.parquet``, ``recon.parquet``, ``solvar.parquet`` and the
    reidentification report (``reid/report.md``) into ``out``.
    """
    from .attacks.certify import certify, uniqueness_flags
    from .attacks.reconstruct import reconstruct
    from .attacks.reidentify import reidentify
    from .metrics.agreement import agree
    from .report.reid import write_reid_report

    con = console or Console()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    def step(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 2)

    t = time.perf_counter()
    md = synthesize(SynthConfig(persons=persons), seed=seed)
    write_microdata(md, out / "truth.parquet")
    step("synthesize", t)
    con.print(f"[bold]1. synthesize[/bold]: {len(md):,} persons, {len(md.geoids):,} blocks (seed {seed})")
    t = time.perf_counter()
    ts = tabulate(md)
    write_tables(ts, out / "tables.parquet")
    rep = check_consistency(ts)
    step("tabulate", t)
    nvals = sum(g.values.size for g in ts.grids.values())
    con.print(f"[bold]2. publish[/bold]: {nvals:,} table values; {rep.checked:,} identity checks, "
              f"{len(rep.violations)} violated")  # fmt: skip
    t = time.perf_counter()
    run = reconstruct(ts, "block+tract", out=out / "recon.parquet")
    step("reconstruct", t)
    a = agree(md, run.records)
    con.print(f"[bold]3. reconstruct[/bold] (block+tract tables): {len(run.records):,} records, "
              f"{len(run.failed)} failed tracts; agreement with the truth {a.binned_pct:.1f}% on "
              f"(block, sex, agebin, race, ethnicity), {a.exact_pct:.1f}% with exact age")  # fmt: skip
    t = time.perf_counter()
    cert = certify(ts, run.records, "block+tract", out=out / "solvar.parquet")
    step("certify", t)
    b = cert.blocks
    uniq = b.filter(b["status"] == "unique")
    flags = uniqueness_flags(run.records, b)
    known = int((flags["certified"] & (flags["bsab_unique"] == 1)).sum())
    con.print(f"[bold]4. certify[/bold]: {uniq.height:,} of {b.height:,} blocks proven to have one solution "
              f"({int(uniq['persons'].sum()):,} persons); {known:,} records are population uniques the attacker "
              "knows are exact")  # fmt: skip
    t = time.perf_counter()
    res = reidentify(run.records, md, "perfect", ts, b, seed=seed)
    summ = write_reid_report(res, out / "reid", f"tabrecon demo --persons {persons} --seed {seed}")
    step("reidentify", t)

    def p(src: str, g: str) -> str:
        v = summ[src][g]["precision_pct"]
        return "n/a" if v is None else f"{v:.1f}%"

    con.print(f"[bold]5. reidentify[/bold] (attacker knows block, sex, age of everyone): precision for persons "
              f"unlike their neighbours {p('attack', 'nonmodal')} vs {p('mdg', 'nonmodal')} (modal guess), "
              f"{p('prg', 'nonmodal')} (proportional guess); certified nonmodal uniques "
              f"{p('attack', 'certified_uniques')}")  # fmt: skip
    con.print(f"report: {out / 'reid' / 'report.md'}")
    return {
        "seed": seed,
        "persons": len(md),
        "blocks": len(md.geoids),
        "tracts": len(ts["tract"].geoids),
        "table_values": nvals,
        "calibration": {name: {"measured": m, "target": tg} for name, m, tg in calibration(md)},
        "agreement_binned_pct": a.binned_pct,
        "agreement_exact_pct": a.exact_pct,
        "certified_blocks": uniq.height,
        "reidentification": {s: summ[s] for s in ("attack", "mdg", "prg", "truth")},
        "timings_s": timings,
    }
