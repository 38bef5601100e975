"""The households part of an audit: ``audit --schema households`` and ``audit --households``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.audit.units import median_blocks
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.schema import write_microdata
from tabrecon.schema.spec import write_units
from tabrecon.tables.spec import tabulate_units

FAST = """
[households]
k_values = [2, 3]
k_solutions = 3
block_time_limit = 1.5
blocks = 3
[reconstruct]
levels = ["block+tract"]
[certify]
enabled = false
"""


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(args, cwd)


@pytest.fixture(scope="module")
def county(tmp_path_factory):
    d = tmp_path_factory.mktemp("hh")
    md, units = synthesize_households(SynthConfig(persons=400), seed=7)  # blocks of 1-39 units
    write_microdata(md, d / "p.parquet")
    write_units(units, d / "u.parquet")
    _, other = synthesize_households(SynthConfig(persons=400), seed=9)
    write_units(other, d / "other.parquet")
    (d / "fast.toml").write_text(FAST)
    return d, units


def test_median_blocks_are_the_blocks_nearest_the_median_size(county):
    _, units = county
    long = tabulate_units(units)
    sizes = dict(long.filter(pl.col("cell") == "H0010001").select("geoid", "value").iter_rows())
    pick = median_blocks(long, 4)
    med = float(pl.Series(list(sizes.values())).median())
    worst = max(abs(sizes[g] - med) for g in pick)
    assert len(pick) == 4 and all(abs(v - med) >= worst for g, v in sizes.items() if g not in pick)
    assert median_blocks(long, 0) == sorted(sizes)


@pytest.mark.slow
def test_audit_of_a_housing_unit_file_reports_households_and_resumes(county):
    d, _ = county
    args = ["audit", "u.parquet", "--schema", "households", "--config", "fast.toml"]
    args += ["--out", "ha", "--quiet"]
    first = _cli(args, d)
    assert first.returncode == 0, first.stderr
    html = (d / "ha" / "report.html").read_text()
    assert 'id="households"' in html and "the 3 blocks nearest the median" in html
    by_k = pl.read_csv(d / "ha" / "results" / "households_by_k.csv")
    assert by_k["k"].to_list() == [2, 3] and (by_k["blocks"] == 3).all()
    summary = json.loads((d / "ha" / "summary.json").read_text())["households"]
    assert summary["blocks"] == 3
    assert summary["blocks_unique_reconstruction"] <= summary["blocks"]
    again = _cli([*args, "--resume"], d)
    assert again.returncode == 0, again.stderr
    assert pl.read_csv(d / "ha" / "results" / "households_by_k.csv").equals(by_k)
    mixed = _cli(["audit", "u.parquet", "--schema", "households", "--tables", "x.csv"], d)
    assert mixed.returncode == 2 and "audits one file: its housing units as MICRODATA" in (
        mixed.stderr
    )
    person_only = _cli(["audit", "u.parquet", "--schema", "households", "--defenses", "swap-lo"], d)
    assert person_only.returncode == 2
    assert "--defenses: the defenses take person records" in person_only.stderr
    with_units = _cli(
        ["audit", "u.parquet", "--schema", "households", "--households", "u.parquet"], d
    )
    assert with_units.returncode == 2 and "audit it with --schema households" in with_units.stderr


@pytest.mark.slow
def test_audit_of_housing_units_certifies_every_block_on_the_person_audit_s_stages(county):
    """``audit --schema households`` runs the stages every population shares (tabulate,
    reconstruct, certify) on every block: the reconstruction tabulates to the published
    tables, each sampled block's Generate-then-Verify verdict is certification's, and a resumed
    run keeps every stage."""
    from tabrecon.schema.catalog import HOUSING_UNITS
    from tabrecon.schema.spec import read_units

    d, units = county
    (d / "cert.toml").write_text(
        FAST.replace("enabled = false", "enabled = true\ndistance = false")
    )
    args = ["audit", "u.parquet", "--schema", "households", "--config", "cert.toml"]
    args += ["--out", "hc", "--quiet"]
    run = _cli(args, d)
    assert run.returncode == 0, run.stderr
    out = d / "hc"
    summary = json.loads((out / "summary.json").read_text())
    blocks = {g for g in units.block_geoid.astype(str).tolist()}
    c = summary["certify"]
    assert c["level"] == "block" and c["inhabited_blocks"] == len(blocks)
    assert c["unique_persons"] <= len(units) and summary["population"] == "households"
    work = out / "work" / "chunk-000"
    recon = read_units(work / "recon_block.parquet", HOUSING_UNITS)
    assert len(recon) == len(units)
    published = tabulate_units(units)  # what the audit published (exactly: FAST)
    again = tabulate_units(recon)
    assert again.sort("geoid", "cell").equals(published.sort("geoid", "cell"))
    cert = pl.read_parquet(out / "results" / "solvar_blocks.parquet")
    gtv = pl.read_csv(out / "results" / "households_blocks.csv", schema_overrides={"geoid": str})
    both = gtv.join(cert, left_on="geoid", right_on="block_geoid")
    assert both.height == 3 and (both["reconstruction"] == both["status_right"]).all()
    html = (out / "report.html").read_text()
    assert "housing units" in html and 'id="certification"' in html and "residents" not in html
    assert "persons" not in html.split("<pre>")[0]  # (the configuration may name them)
    assert "distances not measured" in html
    resumed = _cli([*args, "--resume"], d)
    assert resumed.returncode == 0, resumed.stderr
    later = json.loads((out / "summary.json").read_text())
    assert later["certify"] == c
    assert {"chunk-000/tabulate", "chunk-000/reconstruct:block", "chunk-000/certify"} <= set(
        later["resumed_stages"]
    )


@pytest.mark.slow
def test_audit_of_published_household_tables_alone(county):
    """``audit --tables T --schema households``: the release alone, no records. The same blocks
    and claims as the audit of the units that make the tables; nothing is matched to a truth."""
    d, units = county
    tabulate_units(units).write_parquet(d / "hu_tables.parquet")
    # no block time limit in reach: a block stopped by the clock keeps what it verified so far,
    # which would make the two runs differ on a loaded machine
    (d / "exact.toml").write_text(FAST.replace("block_time_limit = 1.5", "block_time_limit = 600"))
    args = ["audit", "--tables", "hu_tables.parquet", "--schema", "households"]
    run = _cli([*args, "--config", "exact.toml", "--out", "ht", "--quiet"], d)
    assert run.returncode == 0, run.stderr
    summary = json.loads((d / "ht" / "summary.json").read_text())["households"]
    assert summary["input"] == "published tables" and summary["records"] == len(units)
    html = (d / "ht" / "report.html").read_text()
    assert "Published tables hu_tables.parquet (no records" in html
    by_k = pl.read_csv(d / "ht" / "results" / "households_by_k.csv")
    assert "units_singled_out" not in by_k.columns  # no truth to single anybody out against
    from_units = _cli(
        ["audit", "u.parquet", "--schema", "households", "--config", "exact.toml", "--out", "hu",
         "--quiet"], d
    )  # fmt: skip
    assert from_units.returncode == 0, from_units.stderr
    with_truth = pl.read_csv(d / "hu" / "results" / "households_by_k.csv")
    same = ["k", "blocks", "blocks_with_singleton", "verified_singletons", "verified_claims"]
    assert by_k.select(same).equals(with_truth.select(same))


@pytest.mark.slow
def test_person_audit_with_households_of_other_people_says_so_and_fails(county):
    """A housing-unit file that does not describe the person file's households is named before
    any stage runs (a companion file is checked first, not after minutes of person stages)."""
    d, _ = county
    args = ["audit", "p.parquet", "--households", "other.parquet", "--config", "fast.toml"]
    run = _cli([*args, "--defenses", "", "--out", "pa", "--quiet"], d)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "p.parquet, line" in run.stderr  # the first person whose unit disagrees
    assert not (d / "pa" / "work").exists() and not (d / "pa" / "report.html").exists()


@pytest.mark.slow
def test_person_audit_verifies_household_claims_given_the_person_tables_too(county):
    """With both files the households section attacks the two releases together (the default,
    ``[households] with_person_tables``): its claims include every claim of the household
    tables alone, all true of the units, and the report says which tables were used."""
    d, _ = county
    # no block time limit in reach: a block stopped by the clock keeps what it verified so far
    exact = FAST.replace("block_time_limit = 1.5", "block_time_limit = 600")
    (d / "both.toml").write_text(exact)
    (d / "alone.toml").write_text(
        exact.replace("blocks = 3\n", "blocks = 3\nwith_person_tables = false\n")
    )
    out = {}
    for name, conf in (("both", "both.toml"), ("alone", "alone.toml")):
        args = ["audit", "p.parquet", "--households", "u.parquet", "--config", conf]
        run = _cli([*args, "--defenses", "", "--out", name, "--quiet"], d)
        assert run.returncode == 0, run.stderr
        out[name] = json.loads((d / name / "summary.json").read_text())["households"]
    assert out["both"]["given"] == "the persons tables of the same blocks too"
    assert "given" not in out["alone"]
    assert out["both"]["blocks_time_limit"] == out["alone"]["blocks_time_limit"] == 0
    assert out["both"]["verified_claims"] >= out["alone"]["verified_claims"]
    html = (d / "both" / "report.html").read_text()
    assert "the persons tables of the same blocks too (every householder a person" in html


@pytest.mark.slow
def test_a_housing_unit_audit_is_chunked_by_county_as_the_person_audit_is(county):
    """``--chunk-persons`` batches a housing-unit file's counties into chunks read by
    themselves, as a person file's are; every block's verdict is the one-chunk audit's."""
    import numpy as np

    from tabrecon.schema.spec import Units

    d, units = county
    geo = units.block_geoid.astype(str)
    blocks, size = np.unique(geo, return_counts=True)
    small = blocks[np.argsort(size, kind="stable")[:4]]  # the block of 116 units took 10 s a county
    units = units.take(np.flatnonzero(np.isin(geo, small)))
    geo = units.block_geoid.astype(str)
    other = np.array(["99003" + g[5:] for g in geo])  # the same households in a second county
    both = Units(
        units.schema,
        np.concatenate([geo, other]),
        {k: np.concatenate([v, v]) for k, v in units.codes.items()},
    )
    write_units(both, d / "two.parquet")
    (d / "chunks.toml").write_text(
        FAST.replace("enabled = false", "enabled = true\ndistance = false")
    )
    base = ["audit", "two.parquet", "--schema", "households", "--config", "chunks.toml", "--quiet"]
    split = _cli([*base, "--out", "h2", "--chunk-persons", str(len(units))], d)
    assert split.returncode == 0, split.stderr
    whole = _cli([*base, "--out", "h1"], d)
    assert whole.returncode == 0, whole.stderr
    s2, s1 = (json.loads((d / o / "summary.json").read_text()) for o in ("h2", "h1"))
    assert [c["counties"] for c in s2["chunks"]] == [1, 1] and len(s1["chunks"]) == 1
    assert s2["certify"] == s1["certify"] and s2["persons"] == 2 * len(units)
    cols = ["block_geoid", "persons", "status"]
    b2, b1 = (
        pl.read_parquet(d / o / "results" / "solvar_blocks.parquet").select(cols).sort(cols)
        for o in ("h2", "h1")
    )
    assert b2.equals(b1) and b2.height == 2 * len(set(geo.tolist()))
