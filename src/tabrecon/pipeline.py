"""End-to-end runs that chain the pipeline steps (the demo now; the audit builds on it)."""

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
    """Synthesize a county, tabulate the 34 tables, check them, and return a summary dict."""
    con = console or Console()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    md = synthesize(SynthConfig(persons=persons), seed=seed)
    write_microdata(md, out / "truth.parquet")
    timings["synthesize"] = time.perf_counter() - t
    con.print(
        f"[bold]1. synthesize[/bold]: {len(md):,} persons, {len(md.geoids):,} blocks (seed {seed})"
    )
    t = time.perf_counter()
    ts = tabulate(md)
    write_tables(ts, out / "tables.parquet")
    rep = check_consistency(ts)
    timings["tabulate"] = time.perf_counter() - t
    nvals = sum(g.values.size for g in ts.grids.values())
    con.print(
        f"[bold]2. publish[/bold]: {nvals:,} table values; {rep.checked:,} identity checks, "
        f"{len(rep.violations)} violated"
    )
    return {
        "seed": seed,
        "persons": len(md),
        "blocks": len(md.geoids),
        "tracts": len(ts["tract"].geoids),
        "table_values": nvals,
        "calibration": {name: {"measured": m, "target": tg} for name, m, tg in calibration(md)},
        "timings_s": timings,
    }
