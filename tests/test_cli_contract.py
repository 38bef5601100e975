"""The command line's contract: what a user gets for each bad invocation.

Every bad invocation gets one clear message that names the offending thing (file, line, column,
cell, block, option), never a traceback, and the exit code of the contract: 0 success; 1 the run
finished but a unit failed or a check found violations; 2 bad input or usage; 130 interrupted.
"""

from __future__ import annotations

import gzip
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import EXE, run_cli

from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.schema import write_microdata
from tabrecon.schema.registry import population
from tabrecon.schema.spec import write_units
from tabrecon.tables.persons import tabulate
from tabrecon.tables.published import write_tables
from tabrecon.tables.spec import tabulate_units
from tabrecon.tables.tableset import Grid, TableSet


def _env(tmp: Path) -> dict[str, str]:
    """An environment in which ``import click`` fails, as on a fresh machine with typer >= 0.16."""
    hide = tmp / "no_click"
    (hide / "click").mkdir(parents=True, exist_ok=True)
    (hide / "click" / "__init__.py").write_text(
        "raise ImportError('click is hidden by the test')\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(hide), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "200"  # usage boxes on one line each, so messages are matched whole
    return env


def _files(d: Path) -> None:
    """Every kind of bad input file the cases below point at."""
    md, units = synthesize_households(SynthConfig(persons=600), seed=3)
    write_microdata(md, d / "md.csv")
    other = synthesize(SynthConfig(persons=600, county="002"), seed=4)
    write_microdata(other, d / "other.csv")
    write_tables(tabulate(other, "P1,P8"), d / "other_tables.parquet")
    ts = tabulate(md)
    write_tables(ts, d / "tables.parquet")
    write_tables(tabulate(md, "P1,P8,P9,P12"), d / "few.parquet")
    long = ts.to_frame()
    long.write_csv(d / "tables.csv")
    g = ts["block"]
    v = g.values.copy()
    j = int(np.flatnonzero(g.cells == "P0120003")[0])
    i = int(np.argmax(v[:, j]))
    v[i, j] += 1  # one more boy under 5 than the block's males allow
    write_tables(
        TableSet(
            {"block": Grid("block", g.geoids, g.cells, v), "tract": ts["tract"]},
            population=population("persons"),
        ),
        d / "infeasible.parquet",
    )
    (d / "infeasible_tract.txt").write_text(str(g.geoids[i])[:11])
    inhabited = long.filter((pl.col("cell") == "P0010001") & (pl.col("value") > 0))["geoid"][0]
    (d / "nop1_block.txt").write_text(inhabited)
    totals = ["P0010001", "P0080001", "P0090001", "P0120001"]  # every whole-population cell
    long.filter(~((pl.col("geoid") == inhabited) & pl.col("cell").is_in(totals))).write_csv(
        d / "nop1.csv"
    )
    long.filter(~((pl.col("geoid") == inhabited) & (pl.col("cell") == "P0010001"))).write_csv(
        d / "nop1_only.csv"
    )  # P12's total is still there: found before any work, not as a failed tract
    head = "geoid,cell,value\n"
    blk = str(g.geoids[0])
    (d / "unknown_cell.csv").write_text(f"{head}{blk},P9999999,3\n")
    (d / "negative.csv").write_text(f"{head}{blk},P0010001,-3\n")
    (d / "fractional.csv").write_text(f"{head}{blk},P0010001,2.5\n")
    (d / "huge.csv").write_text(f"{head}{blk},P0010001,99999999999999999999999\n")
    (d / "nan_count.csv").write_text(f"{head}{blk},P0010001,abc\n")
    (d / "short_row.csv").write_text(f"{head}{blk},P0010001,3\n{blk}\n")
    (d / "empty.csv").write_text("")
    (d / "no_records.csv").write_text((d / "md.csv").read_text().splitlines()[0] + "\n")
    (d / "header_only.csv").write_text(
        "block_geoid,sex,age,agebin,white,black,aian,asian,nhopi,sor,hisp\n"
    )
    (d / "text.parquet").write_text("this is not parquet\n")
    raw = gzip.compress((d / "md.csv").read_bytes())
    (d / "trunc.csv.gz").write_bytes(raw[: len(raw) // 2])
    (d / "utf16.csv").write_bytes((d / "md.csv").read_text().encode("utf-16"))
    rows = (d / "md.csv").read_text().splitlines()
    cols = rows[1].split(",")
    age_col = rows[0].split(",").index("age")
    cols[age_col] = "abc"
    (d / "age_abc.csv").write_text("\n".join([rows[0], rows[1], ",".join(cols)] + rows[2:]) + "\n")
    cols = rows[1].split(",")
    cols[age_col] = "117"
    cols[rows[0].split(",").index("agebin")] = "85+"
    (d / "age117.csv").write_text("\n".join([rows[0], ",".join(cols)] + rows[2:]) + "\n")
    (d / "adir").mkdir()
    (d / "afile.txt").write_text("x")
    (d / "unknown_key.toml").write_text("[run]\nseeds = 3\n")
    (d / "unknown_section.toml").write_text("[defend]\ndefenses = []\n")
    (d / "bad_value.toml").write_text("[run]\nworkers = -2\n")
    (d / "malformed.toml").write_text("[run\nseed = \n")
    (d / "attacker_bad.csv").write_text("pik,block_geoid,sex\n1,2,3\n")
    # a reconstruction output made from other tables, to be resumed into
    (d / "stale").mkdir()
    # inputs that an output could destroy: links to md.csv, a file named like an output's
    # companion, a config inside an output folder
    (d / "link.csv").symlink_to("md.csv")
    os.link(d / "md.csv", d / "hard.csv")
    write_microdata(md, d / "sv_flags.parquet")
    (d / "au_cfg").mkdir()
    (d / "au_cfg" / "config.toml").write_text("[run]\nseed = 3\n")
    write_units(units, d / "units.csv")
    p = pl.read_csv(d / "md.csv", infer_schema_length=0)
    p.with_columns(  # a relationship no table knows: the person file is to blame, not the units
        pl.when(pl.int_range(pl.len()) == 4)
        .then(pl.lit("boss"))
        .otherwise("relationship")
        .alias("relationship")
    ).write_csv(d / "md_boss.csv")
    tabulate_units(units, ("H1", "H3", "P18")).write_parquet(d / "hu_tables.parquet")
    raw = (d / "tables.parquet").read_bytes()
    (d / "trunc.parquet").write_bytes(raw[: len(raw) // 2])
    # files in other encodings and shapes
    (d / "utf16.toml").write_bytes("[run]\nseed = 3\n".encode("utf-16"))
    (d / "latin1.csv").write_bytes((d / "md.csv").read_bytes().replace(b"block_geoid", b"bl\xe9"))
    (d / "ragged.csv").write_text("\n".join(rows[:4] + [rows[4] + ",1,2"] + rows[5:]) + "\n")
    (d / "utf16_tables.csv").write_bytes((d / "tables.csv").read_text().encode("utf-16"))
    pl.DataFrame({"block_geoid": ["x"], "y": [1]}).write_csv(d / "not_solvar.csv")
    meas = pl.DataFrame(
        {
            "level": ["state", "block"],
            "geoid": ["99", str(g.geoids[0])],
            "query": ["total", "total"],
            "group": [0, 0],
            "noisy": [600, 3],
            "variance": [4.0, -1.0],
        }
    )
    meas.write_parquet(d / "negative_variance.parquet")
    other_block = "990020001001000"  # a block of other.csv's county
    meas.with_columns(
        pl.Series("geoid", ["99", other_block]), pl.Series("variance", [4.0, 1.0])
    ).write_parquet(d / "other_measurements.parquet")
    meas.with_columns(pl.Series("variance", [4.0, 1.0])).write_parquet(
        d / "one_block_measurements.parquet"
    )  # one block of md.csv's measured, the others not: in part another release's
    pl.DataFrame(  # certification results of md.csv's blocks
        {"block_geoid": [str(x) for x in g.geoids], "solvar": 0.0, "status": "unique"}
    ).write_csv(d / "sv.csv")
    first = md.geoids[md.block[0]]  # md.csv without its first block: a partial overlap
    pl.DataFrame(  # attacker data about md.csv's first block that links to nobody
        {"pik": ["z"], "block_geoid": [first], "sex": ["female"], "age": ["109"]}
    ).write_csv(d / "attacker_nolink.csv")
    (d / "attacker_invalid.csv").write_text(f"pik,block_geoid,sex,age\n1,{first},female,abc\n")
    write_microdata(md.take(np.flatnonzero(md.block_geoid != first)), d / "partial.csv")
    _wide_files(d, tabulate(md, "P1,P12")["block"])


def _wide_files(d: Path, g: Grid) -> None:
    """Wide tables (one row a block) as data.census.gov and third parties give them, each with
    one flaw a reader once passed over in silence (issue 86)."""
    wide = pl.DataFrame(g.values, schema=[str(c) for c in g.cells], orient="row")
    geo = pl.Series("GEO_ID", [f"1000000US{x}" for x in g.geoids.tolist()])
    dcg = pl.concat([geo.to_frame(), wide], how="horizontal")
    cut = dcg.with_columns(
        pl.when(pl.int_range(pl.len()) == 6)
        .then(pl.lit("1000000US0107"))
        .otherwise("GEO_ID")
        .alias("GEO_ID")
    )
    cut.write_csv(d / "wide_cut_geoid.csv")  # line 8 of the file
    nation = dcg.head(1).with_columns(pl.lit("0100000US").alias("GEO_ID"))
    pl.concat([nation, dcg]).write_csv(d / "wide_nation_row.csv")
    new = {str(c): f"P{int(str(c)[1:4])}_{int(str(c)[-3:]):03d}N" for c in g.cells}
    named = dcg.rename(new)
    named.with_columns(pl.lit(0).alias("P12_999N")).write_csv(d / "wide_2020_unknown.csv")
    named.with_columns(dcg["P0120002"]).write_csv(d / "wide_mixed_decades.csv")
    parts = pl.DataFrame(
        {
            "STATE": [x[:2] for x in g.geoids.tolist()],
            "COUNTY": [x[2:5] for x in g.geoids.tolist()],
            "TRACT": [x[5:11] for x in g.geoids.tolist()],
        }
    )
    pl.concat([parts, wide], how="horizontal").write_csv(d / "wide_no_block.csv")


# (name, arguments, exit code, text the message must contain); {D} is the fixture folder
CASES: list[tuple[str, str, int, str]] = [
    # usage
    ("no-arguments", "", 2, "Usage"),
    ("unknown-command", "protect", 2, "No such command 'protect'"),
    ("misspelt-option", "tabulate {D}/md.csv --no-such-option", 2, "--no-such-option"),
    ("workers-not-a-number", "reconstruct {D}/tables.parquet --workers abc", 2, "--workers"),
    ("missing-argument", "tabulate", 2, "Missing argument 'microdata'"),
    ("missing-required-option", "solvar {D}/tables.parquet", 2, "--recon"),
    ("reidentify-missing-truth", "reidentify --recon {D}/md.csv", 2, "--truth"),
    ("describe-no-name", "tables describe", 2, "Missing argument 'name'"),
    ("describe-unknown-cell", "tables describe P9999999", 2, "P9999999"),
    ("dn-unknown-subcommand", "dn nosuch", 2, "nosuch"),
    ("dn-one-bit", "dn queries-needed --ns 1 --out {D}/scratch_dn", 2, "at least 2"),
    # option values, refused before any work
    ("workers-zero", "reconstruct {D}/tables.parquet --workers 0", 2, "--workers"),
    ("threads-zero", "reconstruct {D}/tables.parquet --threads 0", 2, "--threads"),
    ("time-limit-zero", "reconstruct {D}/tables.parquet --time-limit 0", 2, "--time-limit"),
    ("time-limit-nan", "reconstruct {D}/tables.parquet --time-limit nan", 2, "--time-limit"),
    (
        "time-limit-inf",
        "solvar {D}/tables.parquet --recon {D}/md.csv --time-limit inf",
        2,
        "--time-limit",
    ),
    ("check-tables-limit-negative", "check-tables {D}/tables.parquet --limit -1", 2, "--limit"),
    (
        "distance-time-limit-negative",
        "solvar {D}/tables.parquet --recon {D}/md.csv --distance-time-limit -1",
        2,
        "--distance-time-limit",
    ),
    (
        "noisy-time-limit-zero",
        "reconstruct-noisy {D}/text.parquet --tables {D}/tables.parquet --time-limit 0",
        2,
        "--time-limit",
    ),
    ("level-unknown", "reconstruct {D}/tables.parquet --level tract", 2, "--level"),
    ("solver-unknown", "reconstruct {D}/tables.parquet --solver gurobi", 2, "--solver"),
    ("strategy-unknown", "reconstruct {D}/tables.parquet --strategy fast", 2, "--strategy"),
    (
        "claims-k-zero",
        "claims {D}/tables.parquet --recon {D}/md.csv --solvar {D}/md.csv -K 0",
        2,
        "--k-solutions",
    ),
    (
        "solvar-workers-negative",
        "solvar {D}/tables.parquet --recon {D}/md.csv --workers -1",
        2,
        "--workers",
    ),
    ("synth-persons-zero", "synth --persons 0 --out {D}/x.csv", 2, "--persons"),
    ("synth-bad-state", "synth --state 1 --out {D}/x.csv", 2, "--state"),
    ("synth-bad-profile", "synth --profile flat --out {D}/x.csv", 2, "--profile"),
    ("demo-persons-negative", "demo --persons -5 --out {D}/demo", 2, "--persons"),
    ("topdown-rho-negative", "topdown {D}/md.csv --rho -1 --out {D}/p.parquet", 2, "--rho"),
    ("topdown-rho-inf", "topdown {D}/md.csv --rho inf --out {D}/p.parquet", 2, "--rho"),
    ("topdown-fit-unknown", "topdown {D}/md.csv --fit lsqr --out {D}/p.parquet", 2, "--fit"),
    (
        "topdown-preset-unknown",
        "topdown {D}/md.csv --preset dhc2030 --out {D}/p.parquet",
        2,
        "--preset",
    ),
    ("topdown-workers-zero", "topdown {D}/md.csv --workers 0 --out {D}/p.parquet", 2, "--workers"),
    ("swap-rate-above-one", "swap {D}/md.csv --rate 2 --out {D}/s.parquet", 2, "--rate"),
    ("swap-rate-zero", "swap {D}/md.csv --rate 0 --out {D}/s.parquet", 2, "--rate"),
    ("swap-preset-unknown", "swap {D}/md.csv --preset swap-mid --out {D}/s.parquet", 2, "--preset"),
    (
        "reidentify-francis-zero",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --francis-threshold 0",
        2,
        "--francis-threshold",
    ),
    (
        "reidentify-attacker-missing",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --attacker nofile.csv",
        2,
        "nofile.csv",
    ),
    (
        "reidentify-attacker-columns",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --attacker {D}/attacker_bad.csv --out "
        "{D}/reid",
        2,
        "attacker_bad.csv",
    ),
    (  # every record excluded leaves nothing to link: the file is bad (was exit 1 after work)
        "reidentify-attacker-all-invalid",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --attacker {D}/attacker_invalid.csv",
        2,
        "every attacker record is invalid (1); first: ",
    ),
    ("dn-trials-zero", "dn recover --trials 0 --out {D}/dn", 2, "trials"),
    ("dn-ns-zero", "dn queries-needed --ns 0 --out {D}/dn", 2, "ns"),
    ("dn-ns-text", "dn queries-needed --ns abc --out {D}/dn", 2, "--ns"),
    ("dn-decoder-unknown", "dn queries-needed --decoder magic --out {D}/dn", 2, "--decoder"),
    (
        "dn-finder-unknown",
        "dn queries-needed --decoder exact --exact-finder magic --ns 20 --out {D}/dn",
        2,
        "magic",
    ),
    ("dn-epsilons-text", "dn grid --epsilons abc --out {D}/dn", 2, "--epsilons"),
    ("dn-epsilon-negative", "dn grid --epsilons -1 --out {D}/dn", 2, "epsilons"),
    ("dn-rr-pi", "dn rr --pi 2 --out {D}/dn", 2, "--pi"),
    (
        "dn-exact-time-limit",
        "dn queries-needed --decoder exact --exact-time-limit 0 --ns 20 --out {D}/dn",
        2,
        "time",
    ),
    # defense specs
    ("defense-eps-inf", "audit {D}/md.csv --defenses eps=inf --out {D}/au", 2, "eps=inf"),
    ("defense-rho-negative", "audit {D}/md.csv --defenses rho=-1 --out {D}/au", 2, "rho=-1"),
    ("defense-eps-text", "audit {D}/md.csv --defenses eps=abc --out {D}/au", 2, "eps=abc"),
    ("defense-swap-rate", "tradeoff {D}/md.csv --defenses swap=1.5 --out {D}/to", 2, "swap=1.5"),
    ("defense-unknown", "tradeoff {D}/md.csv --defenses shuffle --out {D}/to", 2, "shuffle"),
    ("defenses-empty", "tradeoff {D}/md.csv --defenses , --out {D}/to", 2, "--defenses"),
    # configs
    (
        "config-unknown-key",
        "audit {D}/md.csv --config {D}/unknown_key.toml --out {D}/au",
        2,
        "seeds",
    ),
    # the section's name in brackets, printed as written (not taken for terminal markup)
    (
        "config-unknown-section",
        "audit {D}/md.csv --config {D}/unknown_section.toml --out {D}/au",
        2,
        "unknown section [defend]",
    ),
    ("config-bad-value", "audit {D}/md.csv --config {D}/bad_value.toml --out {D}/au", 2, "workers"),
    (
        "config-malformed",
        "audit {D}/md.csv --config {D}/malformed.toml --out {D}/au",
        2,
        "malformed.toml",
    ),
    ("config-missing", "audit {D}/md.csv --config {D}/nope.toml --out {D}/au", 2, "nope.toml"),
    ("audit-no-input", "audit --out {D}/au", 2, "microdata"),
    ("audit-tables-missing", "audit --tables {D}/nope.parquet --out {D}/au", 2, "nope.parquet"),
    # input files
    ("file-missing", "tabulate {D}/nope.csv --out {D}/t.parquet", 2, "nope.csv"),
    ("file-empty", "tabulate {D}/empty.csv --out {D}/t.parquet", 2, "empty.csv"),
    ("file-header-only", "tabulate {D}/header_only.csv --out {D}/t.parquet", 2, "header_only.csv"),
    # an output that cannot be written where it points is refused before any work (frontier
    # computed first, then failed with the system's "File exists")
    (
        "frontier-out-is-a-file",
        "frontier --rhos 1 --no-rr --out {D}/md.csv",
        2,
        "is a file, and this command writes a folder there",
    ),
    ("dn-out-is-a-file", "dn rr --out {D}/md.csv", 2, "is a file, and this command writes"),
    ("tabulate-out-is-a-folder", "tabulate {D}/md.csv --out {D}/au_cfg", 2, "is a folder: give"),
    # the same defense twice would read as two measurements; the audit refused it already
    ("tradeoff-defense-twice", "tradeoff {D}/md.csv --defenses none,none", 2, "given twice"),
    # a file of one population's tables handed to another's command says whose cells it holds
    (
        "households-read-person-tables",
        "reconstruct {D}/tables.parquet --schema households",
        2,
        "they are cells of the persons tables: read it with --schema persons",
    ),
    (
        "persons-read-household-tables",
        "check-tables {D}/hu_tables.parquet",
        2,
        "they are cells of the households tables: read it with --schema households",
    ),
    ("parquet-truncated", "check-tables {D}/trunc.parquet", 2, "is damaged or truncated"),
    # a row with no cell (a short row) was an internal error in the hint naming other tables
    (
        "tables-short-row",
        "check-tables {D}/short_row.csv",
        2,
        "short_row.csv, line 3, column 'cell': no cell id (a short row?",
    ),
    # an option the chosen population does not use is refused, never silently ignored
    (
        "claims-recon-without-solvar",
        "claims {D}/tables.parquet --schema households --recon {D}/md.csv",
        2,
        "claims from a certified reconstruction need both --recon (the reconstruction) and",
    ),
    (
        "claims-level-of-households",
        "claims {D}/tables.parquet --schema group_quarters --level block+tract",
        2,
        "--level block+tract: an option of claims from a certified reconstruction",
    ),
    (
        "claims-k-of-persons",
        "claims {D}/tables.parquet --recon {D}/md.csv --solvar {D}/sv.csv --k 3",
        2,
        "--k: an option of claims from each block's tables alone",
    ),
    (
        "claims-block-time-limit-of-persons",  # was ignored: persons' claims go tract by tract
        "claims {D}/tables.parquet --recon {D}/md.csv --solvar {D}/sv.csv --block-time-limit 5",
        2,
        "--block-time-limit: an option of claims from each block's tables alone",
    ),
    (
        "claims-tract-time-limit-per-block",
        "claims {D}/tables.parquet --schema group_quarters --tract-time-limit 5",
        2,
        "--tract-time-limit: an option of claims from a certified reconstruction",
    ),
    (
        "claims-tract-time-limit-zero",
        "claims {D}/tables.parquet --recon {D}/md.csv --solvar {D}/sv.csv --tract-time-limit 0",
        2,
        "--tract-time-limit must be a finite number > 0",
    ),
    (
        "reconstruct-strategy-gone",  # the person model's age strategies went with it
        "reconstruct {D}/tables.parquet --strategy full",
        2,
        "No such option: --strategy",
    ),
    # an audit of a file with no record has no chunk to run: the reader says why (was exit 70)
    ("audit-header-only", "audit {D}/header_only.csv --quiet", 2, "missing required column"),
    ("audit-no-records", "audit {D}/no_records.csv --quiet", 2, "no person records"),
    ("file-is-directory", "tabulate {D}/adir --out {D}/t.parquet", 2, "adir"),
    ("gzip-truncated", "tabulate {D}/trunc.csv.gz --out {D}/t.parquet", 2, "trunc.csv.gz"),
    ("text-as-parquet", "reconstruct {D}/text.parquet --out {D}/r.parquet", 2, "text.parquet"),
    ("utf16-csv", "tabulate {D}/utf16.csv --out {D}/t.parquet", 2, "utf16.csv"),
    ("age-not-a-number", "tabulate {D}/age_abc.csv --out {D}/t.parquet", 2, "line 3"),
    ("tables-file-missing", "check-tables {D}/nope.parquet", 2, "nope.parquet"),
    ("tables-unknown-cell", "check-tables {D}/unknown_cell.csv", 2, "P9999999"),
    ("households-boss", "check-households {D}/md_boss.csv {D}/units.csv", 2, "md_boss.csv, line 6"),
    # issue 86: every row and column of a wide file read, refused or counted, never dropped
    ("wide-cut-geoid", "check-tables {D}/wide_cut_geoid.csv", 2, "line 8"),
    ("wide-cut-geoid-recon", "reconstruct {D}/wide_cut_geoid.csv --level block", 2, "0107"),
    (
        "wide-nation-row",
        "check-tables {D}/wide_nation_row.csv",
        0,
        "skipped 1 row of summary level 010",
    ),
    (
        "wide-2020-unknown",
        "check-tables {D}/wide_2020_unknown.csv",
        2,
        "unknown variable 'P12_999N'",
    ),
    (
        "wide-mixed-decades",
        "check-tables {D}/wide_mixed_decades.csv",
        2,
        "mixes 2010 variable names",
    ),
    ("wide-no-block", "check-tables {D}/wide_no_block.csv", 2, "no BLOCK column"),
    ("tables-negative", "check-tables {D}/negative.csv", 2, "negative.csv"),
    ("tables-fractional", "check-tables {D}/fractional.csv", 2, "fractional"),
    ("tables-too-large", "check-tables {D}/huge.csv", 2, "count out of range"),
    ("tables-not-a-number", "check-tables {D}/nan_count.csv", 2, "nan_count.csv"),
    (
        "tables-block-lacking-p1-only",
        "reconstruct {D}/nop1_only.csv --out {D}/nop1_only.parquet",
        2,
        "block <nop1_block> lacks cell P0010001",
    ),
    (
        "tables-block-without-p1",
        "reconstruct {D}/nop1.csv --out {D}/nop1.parquet",
        2,
        "<nop1_block>",
    ),
    (
        "recon-missing",
        "solvar {D}/tables.parquet --recon {D}/nope.parquet --out {D}/s.parquet",
        2,
        "nope.parquet",
    ),
    (
        "noisy-measurements-missing",
        "reconstruct-noisy {D}/nope.parquet --tables {D}/tables.parquet",
        2,
        "nope.parquet",
    ),
    (
        "noisy-measurements-text",
        "reconstruct-noisy {D}/text.parquet --tables {D}/tables.parquet",
        2,
        "text.parquet",
    ),
    ("sf1-folder-empty", "audit --tables {D}/adir --out {D}/au", 2, "adir"),
    # output paths
    ("out-is-directory", "tabulate {D}/md.csv --out {D}/adir", 2, "adir"),
    ("out-under-a-file", "tabulate {D}/md.csv --out {D}/afile.txt/t.parquet", 2, "afile.txt"),
    (
        "out-unwritable",
        "tabulate {D}/md.csv --out /proc/tabrecon-test.parquet",
        2,
        "/proc/tabrecon-test.parquet",
    ),
    ("out-suffix-unknown", "tabulate {D}/md.csv --out {D}/t.xlsx", 2, ".xlsx"),
    ("synth-out-suffix-unknown", "synth --persons 100 --out {D}/x.xlsx", 2, ".xlsx"),
    ("recon-out-suffix-unknown", "reconstruct {D}/tables.parquet --out {D}/r.json", 2, ".json"),
    ("agree-out-suffix-unknown", "agree {D}/md.csv {D}/md.csv --out {D}/a.xlsx", 2, ".xlsx"),
    (
        "solvar-out-suffix-unknown",
        "solvar {D}/tables.parquet --recon {D}/md.csv --out {D}/s.csv.gz",
        2,
        ".gz",
    ),
    # an output never replaces an input, nor another output (exit 2 before any work, naming both)
    ("out-is-input", "tabulate {D}/md.csv --out {D}/md.csv", 2, "--out {D}/md.csv is MICRODATA"),
    ("out-is-input-dotted", "tabulate {D}/md.csv --out {D}/./md.csv", 2, "MICRODATA {D}/md.csv"),
    ("out-is-input-symlink", "tabulate {D}/md.csv --out {D}/link.csv", 2, "the same file as"),
    ("out-is-input-hardlink", "tabulate {D}/md.csv --out {D}/hard.csv", 2, "the same file as"),
    ("input-is-symlink-to-out", "tabulate {D}/link.csv --out {D}/md.csv", 2, "MICRODATA"),
    (
        "two-outputs-one-file",
        "synth --persons 100 --out {D}/x2.csv --households {D}/x2.csv",
        2,
        "--out {D}/x2.csv and --households {D}/x2.csv would overwrite each other",
    ),
    (
        "recon-out-is-tables",
        "reconstruct {D}/tables.parquet --out {D}/tables.parquet",
        2,
        "TABLES_FILE {D}/tables.parquet",
    ),
    (
        "solvar-out-is-recon",
        "solvar {D}/tables.parquet --recon {D}/md.csv --out {D}/md.csv",
        2,
        "--recon",
    ),
    (
        "solvar-companion-is-input",  # sv.parquet writes sv_flags.parquet beside it
        "solvar {D}/tables.parquet --recon {D}/sv_flags.parquet --out {D}/sv.parquet",
        2,
        "--out {D}/sv_flags.parquet is --recon",
    ),
    ("agree-out-is-input", "agree {D}/md.csv {D}/other.csv --out {D}/other.csv", 2, "RIGHT"),
    ("swap-out-is-input", "swap {D}/md.csv --out {D}/md.csv", 2, "MICRODATA"),
    ("topdown-out-is-input", "topdown {D}/md.csv --out {D}/md.csv", 2, "MICRODATA"),
    (
        "noisy-out-is-tables",
        "reconstruct-noisy {D}/text.parquet --tables {D}/tables.parquet --out {D}/tables.parquet",
        2,
        "--tables",
    ),
    (
        "households-out-is-input",
        "tabulate {D}/units.csv --schema households --out {D}/units.csv",
        2,
        "MICRODATA",
    ),
    ("audit-out-holds-input", "audit {D}/md.csv --out {D}", 2, "lies inside --out"),
    (
        "audit-out-holds-config",  # the audit writes config.toml into its folder
        "audit {D}/md.csv --config {D}/au_cfg/config.toml --out {D}/au_cfg",
        2,
        "--config {D}/au_cfg/config.toml lies inside --out",
    ),
    (
        "audit-households-is-out",
        "audit {D}/md.csv --households {D}/md.csv --out {D}/md.csv",
        2,
        "--out",
    ),
    (
        "reidentify-out-holds-input",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --out {D}",
        2,
        "inside --out",
    ),
    (
        "claims-out-holds-input",
        "claims {D}/tables.parquet --recon {D}/md.csv --solvar {D}/md.csv --out {D}",
        2,
        "inside --out",
    ),
    (
        "tradeoff-out-holds-input",
        "tradeoff {D}/md.csv --defenses none --out {D}",
        2,
        "inside --out",
    ),
    (
        "demo-out-holds-config",
        "demo --config {D}/au_cfg/config.toml --out {D}/au_cfg",
        2,
        "inside --out",
    ),
    (
        "reidentify-attacker-is-out",
        "reidentify --recon {D}/other.csv --truth {D}/other.csv --attacker {D}/md.csv "
        "--out {D}/md.csv",
        2,
        "--attacker",
    ),
    # a file of another kind, encoding or shape: named as such (never a library's words)
    (
        "solvar-file-is-tables",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --solvar {D}/tables.parquet --out {D}/rs",
        2,
        "tables.parquet: is a long table file (geoid, cell, value), not certification results",
    ),
    (
        "claims-solvar-is-tables",
        "claims {D}/tables.parquet --recon {D}/md.csv --solvar {D}/tables.parquet --out {D}/cs",
        2,
        "not each block's verdict",
    ),
    (
        "solvar-file-columns",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --solvar {D}/not_solvar.csv --out {D}/r",
        2,
        "missing required column(s) solvar, status of certification results",
    ),
    ("recon-is-tables", "agree {D}/md.csv {D}/tables.parquet", 2, "not a person file"),
    ("tables-is-persons", "check-tables {D}/md.csv", 2, "md.csv"),
    (
        "units-is-persons",
        "tabulate {D}/md.csv --schema households --out {D}/hu.parquet",
        2,
        "md.csv: is a person file, not a housing-unit file",
    ),
    (
        "measurements-are-tables",
        "reconstruct-noisy {D}/tables.parquet --tables {D}/tables.parquet",
        2,
        "not TopDown's noisy measurements",
    ),
    (
        "measurements-negative-variance",
        "reconstruct-noisy {D}/negative_variance.parquet --tables {D}/tables.parquet",
        2,
        "variance -1.0 is not a finite number > 0",
    ),
    (
        "config-utf16",
        "audit {D}/md.csv --config {D}/utf16.toml --out {D}/au16",
        2,
        "is UTF-16 text",
    ),
    ("config-is-folder", "audit {D}/md.csv --config {D}/adir --out {D}/auf", 2, "is a folder"),
    (
        "csv-latin1",
        "tabulate {D}/latin1.csv --out {D}/t1.parquet",
        2,
        "is not UTF-8 text (byte 0xe9)",
    ),
    # the audit plans its chunks from the geoid column alone: refused there as the readers refuse
    (
        "audit-persons-latin1",
        "audit {D}/latin1.csv --out {D}/aul",
        2,
        "latin1.csv, line 1: is not UTF-8 text (byte 0xe9)",
    ),
    (
        "audit-persons-are-tables",
        "audit {D}/tables.parquet --out {D}/aut",
        2,
        "tables.parquet: is a long table file (geoid, cell, value), not a person file",
    ),
    ("csv-ragged", "tabulate {D}/ragged.csv --out {D}/t2.parquet", 2, "line 5: this row has"),
    ("tables-utf16", "check-tables {D}/utf16_tables.csv", 2, "is UTF-16 text"),
    ("person-file-is-folder", "agree {D}/adir {D}/md.csv", 2, "adir: is a folder, not a file"),
    (
        "attacker-is-folder",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --attacker {D}/adir --out {D}/ra",
        2,
        "is a folder",
    ),
    # downloads: codes and addresses checked before any request; the network has its own code
    (
        "download-bad-url",
        "download --state 39 --county 059 --api not-a-url --out {D}/d.parquet",
        2,
        "--api",
    ),
    (
        "download-bad-ipv6",
        "download --state 39 --county 059 --api http://[::1 --out {D}/d.parquet",
        2,
        "not a valid address",
    ),
    (
        "download-unknown-state",
        "download --state 99 --county 001 --out {D}/d.parquet",
        2,
        "--state 99",
    ),
    (
        "download-unknown-county",
        "download --state 39 --county 999 --out {D}/d.parquet",
        2,
        "--county 999",
    ),
    (
        "download-unreachable",
        "download --state 39 --county 059 --api http://127.0.0.1:9/data --out {D}/d.parquet "
        "--retries 1",
        75,
        "network failure: tracts of 39059: no answer from 127.0.0.1:9 after 2 attempts",
    ),
    (
        "download-retries-negative",
        "download --state 39 --county 059 --retries -1 --out {D}/d.parquet",
        2,
        "--retries must be >= 0 (got -1)",
    ),
    # nothing selected, nothing in common: refused, naming the files (a partial overlap goes on)
    (
        "tables-empty-selection",
        "tabulate {D}/md.csv --tables , --out {D}/e.parquet",
        2,
        "no table selected",
    ),
    (
        "households-empty-selection",
        "tabulate {D}/units.csv --schema households --tables , --out {D}/e2.parquet",
        2,
        "selects no table",
    ),
    ("agree-disjoint", "agree {D}/md.csv {D}/other.csv", 2, "no inhabited blocks in common"),
    (
        "solvar-disjoint",
        "solvar {D}/tables.parquet --recon {D}/other.csv --out {D}/sd.parquet",
        2,
        "{D}/tables.parquet and {D}/other.csv have no inhabited blocks in common",
    ),
    (
        "claims-disjoint",
        "claims {D}/tables.parquet --recon {D}/other.csv --solvar {D}/sv.csv --out {D}/cd",
        2,
        "no inhabited blocks in common",
    ),
    (
        "reidentify-disjoint",
        "reidentify --recon {D}/md.csv --truth {D}/other.csv --out {D}/rd",
        2,
        "no inhabited blocks in common",
    ),
    (
        "reidentify-tables-disjoint",
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --tables {D}/other_tables.parquet "
        "--out {D}/rt",
        2,
        "other_tables.parquet and {D}/md.csv have no inhabited blocks",
    ),
    (
        "noisy-in-part",
        "reconstruct-noisy {D}/one_block_measurements.parquet --tables {D}/tables.parquet --out "
        "{D}/np.parquet",
        2,
        "hold no block-level measurements for",
    ),
    (
        "noisy-disjoint",
        "reconstruct-noisy {D}/other_measurements.parquet --tables {D}/tables.parquet --out "
        "{D}/nd.parquet",
        2,
        "have no blocks in common",
    ),
    (
        "reidentify-nothing-linked",  # the report is written, but no precision was measured
        "reidentify --recon {D}/md.csv --truth {D}/md.csv --attacker {D}/attacker_nolink.csv "
        "--out {D}/rn",
        1,
        "no precision was measured",
    ),
    # companion files read and checked before the first stage
    (
        "audit-households-wrong-kind",
        "audit {D}/md.csv --households {D}/md.csv --out {D}/auh",
        2,
        "md.csv: is a person file, not a housing-unit file",
    ),
    (
        "audit-households-other-people",
        "audit {D}/other.csv --households {D}/units.csv --out {D}/auo",
        2,
        "a person's block is not the block of their housing unit",
    ),
    (
        "frontier-tradeoff-wrong-kind",
        "frontier --tradeoff {D}/md.csv --rhos 1 --no-rr --out {D}/frk",
        2,
        "md.csv: is a person file, not a tradeoff table",
    ),
    # an infeasible tract: named with its block and cells, and counted in the headline
    (
        "audit-infeasible-tract-cells",
        "audit --tables {D}/infeasible.parquet --out {D}/aui --quiet",
        1,
        "P0120003 published",
    ),
    (
        "audit-infeasible-tract-headline",
        "audit --tables {D}/infeasible.parquet --out {D}/aui2 --quiet",
        1,
        "in failed tracts, not certified",
    ),
    # runs that finish with failures, and checks that find violations: exit 1
    (
        "reconstruct-infeasible",
        "reconstruct {D}/infeasible.parquet --out {D}/inf.parquet",
        1,
        "<infeasible_tract>",
    ),
    (
        "reconstruct-infeasible-cell",
        "reconstruct {D}/infeasible.parquet --out {D}/inf2.parquet",
        1,
        "P0120003",
    ),
    ("check-tables-violations", "check-tables {D}/infeasible.parquet", 1, "violated"),
    # the privacy-accuracy frontier
    ("frontier-zero-rho", "frontier --rhos 0,1", 2, "--rhos must be a finite number > 0"),
    ("frontier-nan-eps", "frontier --epsilons nan", 2, "--epsilons must be a finite number"),
    ("frontier-rho-with-laplace", "frontier --noise laplace --rhos 1", 2, "with --noise laplace"),
    ("frontier-bad-strategy", "frontier --strategy bogus", 2, "unknown strategy 'bogus'"),
    ("frontier-bad-share", "frontier --strategy topdown@2", 2, "level share must be in (0, 1]"),
    ("frontier-bad-level", "frontier --level county", 2, "--level must be one of"),
    ("frontier-no-hierarchy-file", "frontier --hierarchy {D}/nope.csv", 2, "nope.csv"),
    ("frontier-bad-tradeoff", "frontier --tradeoff {D}/nope.csv", 2, "nope.csv: file not found"),
    (
        "frontier-unsupported-strategy",  # refused by name, the other strategy still written
        "frontier --rhos 1 --no-rr --strategy topdown:sex_agebin=0.5,hispanic_race=0.5 "
        "--strategy identity --out {D}/fr",
        1,
        "cannot answer 574 of the workload's 844 cells",
    ),
    # warnings that succeed
    (
        "agree-partial-overlap",
        "agree {D}/md.csv {D}/partial.csv",
        0,
        "1 inhabited block(s) only in",
    ),
    ("age-top-coded", "tabulate {D}/age117.csv --out {D}/t117.parquet", 0, "line 2"),
]


#: cases run as a user runs them, a new process with ``click`` hidden (as on a fresh machine with
#: typer >= 0.16): usage errors, printed by typer before any command runs, and one run of each
#: kind of ending. The others run in this process (``cli_run.run_cli``): a new process costs
#: 1.2-2.5 s of start-up, which was most of this test's time.
SUBPROCESS = frozenset(
    {
        "no-arguments",
        "unknown-command",
        "misspelt-option",
        "missing-argument",
        "workers-zero",
        "file-missing",
        "download-unreachable",
        "reconstruct-infeasible",
        "age-top-coded",
    }
)
assert SUBPROCESS <= {c[0] for c in CASES}


def _digests(d: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(d)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("contract")
    _files(d)
    inputs = _digests(d)
    env = _env(d)
    subst = {
        "{D}": str(d),
        "<nop1_block>": (d / "nop1_block.txt").read_text(),
        "<infeasible_tract>": (d / "infeasible_tract.txt").read_text(),
    }

    def run(case):
        name, args, _, _ = case
        argv = [a.replace("{D}", str(d)) for a in args.split()]
        cwd = d / "cwd" / name  # default outputs of one case never meet another's
        cwd.mkdir(parents=True)
        if name in SUBPROCESS:
            p = subprocess.run(
                EXE + argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300
            )
            return name, p
        return name, run_cli(argv, cwd=cwd)

    with ThreadPoolExecutor(max_workers=2) as ex:  # the subprocesses, beside the others
        started = ex.map(run, [c for c in CASES if c[0] in SUBPROCESS])
        out = dict(run(c) for c in CASES if c[0] not in SUBPROCESS)
        out.update(started)
    after = _digests(d)
    changed = sorted(k for k, v in inputs.items() if after.get(k) != v)
    return out, subst, changed


@pytest.mark.parametrize("name,args,code,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_invocation(results, name, args, code, fragment):
    out, subst, _ = results
    p = out[name]
    text = p.stdout + p.stderr
    for k, v in subst.items():
        fragment = fragment.replace(k, v)
    assert "Traceback" not in text, text
    assert "internal error" not in text, text
    assert p.returncode == code, f"exit {p.returncode}, wanted {code}:\n{text}"
    assert fragment in text, f"{fragment!r} not in:\n{text}"


def test_no_input_is_destroyed(results):
    """Every file the cases read is byte for byte what it was before all of them ran."""
    assert results[2] == []


def test_enough_cases():
    commands = {c[1].split()[0] for c in CASES if c[1]}
    assert len(CASES) >= 60
    assert {
        "synth",
        "tabulate",
        "tables",
        "check-tables",
        "reconstruct",
        "agree",
        "solvar",
        "claims",
        "reidentify",
        "audit",
        "demo",
        "swap",
        "topdown",
        "reconstruct-noisy",
        "tradeoff",
        "frontier",
        "dn",
    } <= commands


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(args, cwd)


def test_reusing_an_output_with_other_tables_or_options_is_refused(tmp_path):
    _files(tmp_path)
    first = _cli(["reconstruct", "few.parquet", "--out", "r.parquet"], tmp_path)
    assert first.returncode == 0, first.stderr
    other = _cli(["reconstruct", "tables.parquet", "--out", "r.parquet"], tmp_path)
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "holds results of another run" in other.stderr and "tables" in other.stderr
    assert "--fresh" in other.stderr
    level = _cli(["reconstruct", "few.parquet", "--out", "r.parquet", "--level", "block"], tmp_path)
    assert level.returncode == 2 and "level 'block+tract' before, 'block' now" in level.stderr
    same = _cli(["reconstruct", "few.parquet", "--out", "r.parquet"], tmp_path)
    assert same.returncode == 0, same.stderr  # the same run resumes
    fresh = _cli(["reconstruct", "tables.parquet", "--out", "r.parquet", "--fresh"], tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    audit = ["audit", "md.csv", "--out", "au", "--defenses", "", "--quiet"]
    assert _cli(audit, tmp_path).returncode == 0
    again = _cli(["audit", "other.csv", "--out", "au", "--defenses", "", "--resume"], tmp_path)
    assert (
        again.returncode == 2 and "microdata" in again.stderr and "without --resume" in again.stderr
    )
    seed = _cli(audit + ["--resume", "--seed", "7"], tmp_path)  # the one option that changed
    assert seed.returncode == 2 and "config run.seed 2010 before, 7 now" in seed.stderr
    assert "chunk_persons" not in seed.stderr, seed.stderr  # not the whole configuration twice


def test_a_refused_audit_leaves_its_output_as_it_was(tmp_path):
    """The audit reads and checks its inputs before it touches OUT: a refused file neither
    removes an earlier run's work (the run asked to start over never started) nor records a
    fingerprint, which would refuse the next run's --resume as "another run"."""
    _files(tmp_path)
    earlier = tmp_path / "au" / "work" / "chunk-000" / "reconstruct.done.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("{}")
    for out in ("au", "new"):
        p = _cli(["audit", "latin1.csv", "--out", out, "--quiet"], tmp_path)
        assert p.returncode == 2 and "is not UTF-8 text" in p.stderr, p.stderr
    assert earlier.exists()
    assert not (tmp_path / "au" / "work" / "run.json").exists()
    assert not (tmp_path / "au" / "config.toml").exists()
    assert not (tmp_path / "new").exists()


def test_sweeps_and_tradeoff_refuse_to_mix_runs(tmp_path):
    _files(tmp_path)
    sweep = ["dn", "recover", "--n", "20", "--ms", "5,10", "--trials", "1", "--out", "dn"]
    assert _cli(sweep, tmp_path).returncode == 0
    more = _cli(sweep[:-2] + ["--trials", "2", "--out", "dn"], tmp_path)
    assert more.returncode == 0, more.stderr  # more trials extend the same sweep
    other = _cli(sweep + ["--seed", "1"], tmp_path)
    assert other.returncode == 2 and "seed '0' before, '1' now" in other.stderr, other.stderr
    assert _cli(sweep + ["--seed", "1", "--fresh"], tmp_path).returncode == 0
    trade = ["tradeoff", "md.csv", "--defenses", "none", "--out", "to"]
    assert _cli(trade, tmp_path).returncode == 0
    again = _cli(["tradeoff", "other.csv", "--defenses", "none", "--out", "to"], tmp_path)
    assert again.returncode == 2 and "truth" in again.stderr and "--fresh" in again.stderr
