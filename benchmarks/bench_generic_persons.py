"""The code written over any schema against the person pipeline, on the real sample (issue 19,
item 2): does the generic count model's uniqueness proof agree with person certification?

Run (from the repository root):
python -m benchmarks.bench_generic_persons [--tracts 28] [--synthetic 100000]

Person certification at block level proves, per block, whether the binned histogram (sex,
agebin38, race, Hispanic origin) is the only one the block tables allow. The same question asked
of the code written over any schema: the person schema on that resolution
(``tabrecon.schema.PERSONS_BINNED``, with SF1's block person cells as predicates over agebins),
the real sample's first ``--tracts`` tracts (default: all 28) tabulated and reconstructed by
``reconstruct_units`` (one count program per block and a proof that no other solution exists),
and the two verdicts compared block by block, beside their times.

Then the same at block+tract, the Bureau's rHDF_b,t setting: person certification at
block+tract against the code written over any schema with the person schema by single year
of age and its tract tables (PCT12, PCT12A-O; each tract's blocks solved jointly), asked for
uniqueness at agebin38 (``unique_on={"age": AGEBIN_OF_AGE}``), with a block variable per class
of types the block tables do not tell apart (the default) and, side by side, per type. The
Bureau proved every block of these tracts unique.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from benchmarks.common import real_sample_tracts, record
from tabrecon.attacks.certify import certify
from tabrecon.attacks.reconstruct import reconstruct
from tabrecon.attacks.unit_reconstruct import reconstruct_units
from tabrecon.schema import AGEBIN_OF_AGE, PERSONS, PERSONS_BINNED, person_units
from tabrecon.tables import tabulate
from tabrecon.unit_tables import table_by_name, tables_in, tabulate_units


def _compare(generic: pl.DataFrame, cert: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Block by block, the generic verdict beside person certification's: the joined frame,
    the table of verdict pairs (printed), and the number of blocks both call unique or not."""
    both = generic.select("geoid", pl.col("status").alias("generic")).join(
        cert.select(pl.col("block_geoid").alias("geoid"), pl.col("status").alias("person")),
        on="geoid",
        how="full",
        coalesce=True,
    )
    table = both.group_by("person", "generic").len().sort("person", "generic")
    print(table)
    same = (both["person"] == "unique") == (both["generic"] == "unique")
    return both, table, int(same.fill_null(False).sum())


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracts", type=int, default=28, help="real-sample tracts (0: skip)")
    ap.add_argument("--synthetic", type=int, default=100_000, help="synthetic persons (0: skip)")
    ap.add_argument("--seed", type=int, default=7, help="the synthetic population's seed")
    args = ap.parse_args()
    if not args.tracts:
        return {"synthetic": _synthetic(args.synthetic, args.seed)} if args.synthetic else {}
    md = real_sample_tracts(args.tracts)
    if md is None:
        return {}
    tracts = sorted({g[:11] for g in md.geoids.tolist()})
    print(f"real sample, {len(tracts)} tracts: {len(md):,} persons, {len(md.geoids):,} blocks")
    t = time.perf_counter()
    ts = tabulate(md, "block")
    rec_block = reconstruct(ts, "block").records
    cert = certify(ts, rec_block, "block").blocks
    t_person = time.perf_counter() - t
    units = person_units(md, binned=True)
    t = time.perf_counter()
    rec = reconstruct_units(tabulate_units(units), PERSONS_BINNED)
    t_generic = time.perf_counter() - t
    both, table, agree = _compare(rec.blocks, cert)
    print(
        f"blocks: {both.height:,}; the same verdict on {agree:,} "
        f"({100 * agree / max(both.height, 1):.2f}%); person tabulate+reconstruct+certify "
        f"{t_person:.1f} s, generic tabulate+reconstruct+proof {t_generic:.1f} s"
    )
    out = {
        "blocks": both.height,
        "same_verdict": agree,
        "person_seconds": round(t_person, 1),
        "generic_seconds": round(t_generic, 1),
        "verdicts": table.rows(),
    }
    t = time.perf_counter()
    tsb = tabulate(md)
    rec_bt = reconstruct(tsb, "block+tract").records
    cert_bt = cert = certify(tsb, rec_bt, "block+tract").blocks
    t_person = time.perf_counter() - t
    t = time.perf_counter()
    long = tabulate_units(person_units(md))
    on = {"age": AGEBIN_OF_AGE}
    rec = reconstruct_units(long, PERSONS, level="block+tract", unique_on=on)  # classes
    t_generic = time.perf_counter() - t
    t = time.perf_counter()
    by_type = reconstruct_units(
        long, PERSONS, level="block+tract", unique_on=on, tract_model="types"
    )
    t_types = time.perf_counter() - t
    same_types = rec.blocks.select("geoid", "status").equals(
        by_type.blocks.select("geoid", "status")
    )
    # every count cell; medians (P13) are not modelled at block+tract, so a reconstruction's
    # median ages may differ from the published ones
    counts = pl.col("cell").is_in(
        [
            c.id
            for n in tables_in(long, PERSONS)
            if table_by_name(n, PERSONS).statistic is None
            for c in table_by_name(n, PERSONS).cells()
        ]
    )
    exact = (
        tabulate_units(rec.units)
        .filter(counts)
        .sort("geoid", "cell")
        .equals(long.filter(counts).sort("geoid", "cell"))
    )
    both, table, agree = _compare(rec.blocks, cert)
    print(
        f"block+tract: blocks {both.height:,}; the same verdict on {agree:,}; the generic "
        f"reconstruction tabulates back to every block and tract count cell: {exact}; person "
        f"tabulate+reconstruct+certify {t_person:.1f} s, generic (single-year person schema, "
        f"tracts solved jointly, a block variable per class of types) tabulate+reconstruct+proof "
        f"{t_generic:.1f} s; the same with a block variable per type: {t_types:.1f} s "
        f"({t_types / t_generic:.1f}x), the same verdicts: {same_types}"
    )
    out["block+tract"] = {
        "same_verdict": agree,
        "tabulates_back": exact,
        "person_seconds": round(t_person, 1),
        "generic_seconds": round(t_generic, 1),
        "generic_types_seconds": round(t_types, 1),
        "types_same_verdicts": same_types,
        "verdicts": table.rows(),
    }
    out["certify"] = {
        "block": _certify_side_by_side(md, ts, rec_block, cert, "block"),
        "block+tract": _certify_side_by_side(md, tsb, rec_bt, cert_bt, "block+tract"),
    }
    if args.synthetic:
        out["synthetic"] = _synthetic(args.synthetic, args.seed)
    return out


def _synthetic(persons: int, seed: int = 7) -> dict:
    """The audit's block+tract question (verdict and distance of every block) on ``persons``
    synthetic persons, both ways in one process, and the schema's certification of the person
    reconstruction checked against person certification's, block by block."""
    from tabrecon.attacks.solvers import SolverOptions
    from tabrecon.synth import SynthConfig, synthesize

    md = synthesize(SynthConfig(persons=persons), seed)
    opts = SolverOptions(threads=1)
    on = {"age": AGEBIN_OF_AGE}
    tabulate_units(person_units(md.take(np.arange(min(len(md), 100)))))  # compile the tables
    t = time.perf_counter()
    ts = tabulate(md)
    recmd = reconstruct(ts, "block+tract", opts).records
    cert = certify(ts, recmd, "block+tract", opts, distance=True).blocks
    t_person = time.perf_counter() - t
    t = time.perf_counter()
    long = tabulate_units(person_units(md))
    rec = reconstruct_units(
        long, PERSONS, level="block+tract", unique_on=on, distance=True, opts=opts
    )
    t_generic = time.perf_counter() - t
    _, table, agree = _compare(rec.blocks, cert)
    t = time.perf_counter()
    ref = reconstruct_units(
        long,
        PERSONS,
        level="block+tract",
        unique_on=on,
        distance=True,
        opts=opts,
        reference=person_units(recmd),
    )
    t_ref = time.perf_counter() - t
    _, same, diff = _against_person(ref.blocks, cert)
    varies = int((cert["status"] == "varies").sum())
    print(
        f"synthetic, {len(md):,} persons, {cert.height:,} blocks ({varies:,} varying), "
        f"block+tract with distances: person tabulate+reconstruct+certify {t_person:.1f} s, "
        f"over the schema tabulate+reconstruct+proof+distances {t_generic:.1f} s "
        f"({t_generic / t_person:.2f}x); the same verdict on {agree:,} blocks. The person "
        f"reconstruction certified over the schema: the same verdict on {same:,}, largest solvar "
        f"difference {diff:.2g} points ({t_ref:.1f} s)"
    )
    return {
        "persons": len(md),
        "blocks": cert.height,
        "varying": varies,
        "same_verdict": agree,
        "verdicts": table.rows(),
        "person_seconds": round(t_person, 1),
        "generic_seconds": round(t_generic, 1),
        "ratio": round(t_generic / t_person, 3),
        "reference_same_verdict": same,
        "reference_max_solvar_difference": diff,
        "reference_seconds": round(t_ref, 1),
    }


def _certify_side_by_side(md, ts, recmd, cert: pl.DataFrame, level: str) -> dict:
    """Certification of one reconstruction (the person pipeline's) twice: person certification
    and the count model over the person schema given it as ``reference``, with distances; the
    verdicts and solution variabilities compared block by block, the two certification steps
    timed alone (tabulation and reconstruction excluded)."""
    t = time.perf_counter()
    cert = certify(ts, recmd, level).blocks
    t_person = time.perf_counter() - t
    if level == "block":
        long = tabulate_units(person_units(md, binned=True))
        kw: dict = {"schema": PERSONS_BINNED, "reference": person_units(recmd, binned=True)}
    else:
        long = tabulate_units(person_units(md))
        kw = {
            "schema": PERSONS,
            "reference": person_units(recmd),
            "level": level,
            "unique_on": {"age": AGEBIN_OF_AGE},
        }
    t = time.perf_counter()
    rec = reconstruct_units(long, distance=True, **kw)
    t_generic = time.perf_counter() - t
    both, same, diff = _against_person(rec.blocks, cert)
    varies = int((both["status"] == "varies").sum())
    print(
        f"certification of the person reconstruction at {level}: {both.height:,} blocks, the "
        f"same verdict on {same:,}, {varies} varying; largest solvar difference "
        f"{diff:.2g} points; person certify {t_person:.1f} s, over the schema (zero test "
        f"+ distances) {t_generic:.1f} s ({t_generic / t_person:.2f}x)"
    )
    return {
        "blocks": both.height,
        "same_verdict": same,
        "varying": varies,
        "max_solvar_difference": diff,
        "person_certify_seconds": round(t_person, 1),
        "generic_certify_seconds": round(t_generic, 1),
    }


def _against_person(blocks: pl.DataFrame, cert: pl.DataFrame) -> tuple[pl.DataFrame, int, float]:
    """The schema's certification beside person certification's, block by block: the joined
    frame, the blocks with the same verdict and the largest solvar difference (points)."""
    both = blocks.join(
        cert.select(
            pl.col("block_geoid").alias("geoid"),
            pl.col("status").alias("person"),
            pl.col("solvar").alias("person_solvar"),
        ),
        on="geoid",
        how="full",
        coalesce=True,
    )
    same = int((both["status"] == both["person"]).fill_null(False).sum())
    return both, same, float((both["solvar"] - both["person_solvar"]).abs().max() or 0.0)


if __name__ == "__main__":
    record("generic_persons", main)
