"""Where the person audit's time goes: the profile's top entries of its two costly stages,
reconstruction at block+tract and certification (zero test and distance), on the first tracts of
a person file (issue 40, item 1: profile first, and print the profile beside the figures), and
what certification costs where the audit runs it: inside the reconstruction, its CPU seconds
beside the reconstruction's alone (issue 40: certification <= reconstruction).

Run (from the repository root):
python -m benchmarks.profile_stages PERSONS.parquet [--tracts 30] [--top 12] [--json OUT]

Both stages run in this one process (one worker, so the profiler sees every call) under the
standard library's :mod:`cProfile`: for each, wall and CPU seconds and the functions with the
most time of their own (solver calls show as the extension's ``solve``). ``bench_state`` runs it
on its state with this code and, with ``--baseline REF``, with that ref's code (``PYTHONPATH``
pointing at its ``src``), so the profiles before and after are printed in one run.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl


def _top(prof: cProfile.Profile, n: int) -> list[dict]:
    """The ``n`` functions with the most own time: where, calls, own and cumulative seconds."""
    st = pstats.Stats(prof)
    rows = []
    for (file, line, name), (_cc, calls, own, cum, _callers) in st.stats.items():  # type: ignore[attr-defined]
        where = name if file == "~" else f"{Path(file).name}:{line}({name})"
        rows.append({"function": where, "calls": calls, "own_s": own, "cum_s": cum})
    rows.sort(key=lambda r: -r["own_s"])
    return [{**r, "own_s": round(r["own_s"], 3), "cum_s": round(r["cum_s"], 3)} for r in rows[:n]]


def _profiled(f: Callable[[], Any], n: int) -> tuple[Any, dict]:
    prof = cProfile.Profile()
    w, c = time.perf_counter(), time.process_time()
    prof.enable()
    try:
        out = f()
    finally:
        prof.disable()
    return out, {
        "wall_s": round(time.perf_counter() - w, 2),
        "cpu_s": round(time.process_time() - c, 2),
        "top": _top(prof, n),
    }


def profile(src: Path, tracts: int = 30, top: int = 12) -> dict:
    """Reconstruct (block+tract) and certify (with distances) the first ``tracts`` tracts of
    the person file ``src``, each under the profiler; the figures and top entries of each."""
    from tabrecon import certify, reconstruct
    from tabrecon.engine.solvers import SolverOptions
    from tabrecon.schema import read_microdata
    from tabrecon.tables.persons import tabulate

    geo = pl.col("block_geoid").cast(pl.String)
    lf = pl.scan_parquet(src)
    first = (
        lf.select(geo.str.slice(0, 11).alias("t")).unique().sort("t").head(tracts).collect()["t"]
    )
    with tempfile.TemporaryDirectory() as d:
        part = Path(d) / "tracts.parquet"
        lf.filter(geo.str.slice(0, 11).is_in(first.implode())).sink_parquet(part)
        md = read_microdata(part)
    ts = tabulate(md)
    rec, r_fig = _profiled(lambda: reconstruct(ts, "block+tract", SolverOptions()), top)
    cert, c_fig = _profiled(
        lambda: certify(ts, rec.records, "block+tract", SolverOptions(), distance=True), top
    )
    return {
        "persons": len(md),
        "tracts": int(first.len()),
        "blocks": int(cert.blocks.height),
        "reconstruct": r_fig,
        "certify": c_fig,
        "own_cost": _own_cost(ts),
    }


def _own_cost(ts: Any) -> dict | None:
    """What certification adds where the audit runs it, inside the reconstruction (the tract's
    model built once), neither under the profiler; None where this code's ``reconstruct`` does
    not certify (a baseline from before it did).

    Two measures. The difference of two runs: CPU seconds of the reconstruction alone and with
    certification and distances. And the split of the second run: the CPU seconds of the two
    functions certification adds to each tract (``block_forms`` and ``certify_forms``; the
    reconstruction's own work does not depend on certifying) against the rest, measured tract
    by tract in the same run, so that the machine's drift (on these VMs +-20% between runs a
    minute apart) moves both sides alike."""
    from tabrecon import reconstruct
    from tabrecon.engine.solvers import SolverOptions

    c = time.process_time()
    reconstruct(ts, "block+tract", SolverOptions())
    alone = time.process_time() - c
    inside = [0.0]
    timed = _timing(("block_forms", "certify_forms"), inside)
    c = time.process_time()
    try:
        reconstruct(ts, "block+tract", SolverOptions(), certify=True, distance=True)
    except TypeError:
        return None
    finally:
        timed()
    both = time.process_time() - c
    split = inside[0] if inside[0] > 0 else None
    return {
        "reconstruct_cpu_s": round(alone, 2),
        "with_certification_cpu_s": round(both, 2),
        "certification_cpu_s": round(both - alone, 2),
        "ratio": round((both - alone) / alone, 2) if alone > 0 else None,
        "in_run_certification_cpu_s": None if split is None else round(split, 2),
        "in_run_ratio": None if split is None else round(split / (both - split), 2),
    }


def _timing(names: tuple[str, ...], total: list[float]) -> Callable[[], None]:
    """Add the CPU seconds of each call of ``names`` (functions of the count model,
    :mod:`tabrecon.engine.reconstruct`, where this code has them) to ``total[0]``; returns
    what puts the functions back."""
    import importlib

    try:
        mod = importlib.import_module("tabrecon.engine.reconstruct")
    except ImportError:
        return lambda: None
    saved = {n: getattr(mod, n) for n in names if hasattr(mod, n)}
    if len(saved) < len(names):  # older code: no split
        return lambda: None

    def timed(f: Callable) -> Callable:
        def g(*a: Any, **k: Any) -> Any:
            c = time.process_time()
            try:
                return f(*a, **k)
            finally:
                total[0] += time.process_time() - c

        return g

    for n, f in saved.items():
        setattr(mod, n, timed(f))

    def restore() -> None:
        for n, f in saved.items():
            setattr(mod, n, f)

    return restore


def show(label: str, p: dict) -> None:
    """Print one profile: per stage, its seconds and its top entries."""
    print(
        f"\n## profile, {label}: {p['tracts']} tracts, {p['persons']:,} persons, "
        f"{p['blocks']:,} blocks (one process, cProfile)"
    )
    own = p.get("own_cost")
    if own:
        print(
            f"certification inside the reconstruction (as the audit runs it, no profiler): "
            f"reconstruct {own['reconstruct_cpu_s']:.1f} CPU s alone, "
            f"{own['with_certification_cpu_s']:.1f} with certification and distances: "
            f"certification {own['certification_cpu_s']:.1f} CPU s = {own['ratio']:.2f}x the "
            "reconstruction (issue 40 asks <= 1)"
        )
        if own.get("in_run_ratio") is not None:
            print(
                "  split within the run with certification, tract by tract: certification "
                f"{own['in_run_certification_cpu_s']:.1f} CPU s = {own['in_run_ratio']:.2f}x "
                "the rest"
            )
    for stage in ("reconstruct", "certify"):
        s = p[stage]
        print(f"{stage}: wall {s['wall_s']:.1f} s, CPU {s['cpu_s']:.1f} s; most own time:")
        for r in s["top"]:
            print(
                f"  {r['own_s']:>8.2f} s own {r['cum_s']:>8.2f} s cum {r['calls']:>9,}x  "
                f"{r['function']}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("persons", type=Path)
    ap.add_argument("--tracts", type=int, default=30)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", type=Path, default=None, help="also write the profile here")
    a = ap.parse_args()
    p = profile(a.persons, a.tracts, a.top)
    show(str(a.persons), p)
    if a.json is not None:
        a.json.write_text(json.dumps(p, indent=1))


if __name__ == "__main__":
    main()
