"""Calibration by simulation (tabrecon.metrics.calibration, ``tabrecon calibrate``): the claims
of each side scored against the confidential records, by an independent count."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.attacks.claims.block import generate_then_verify
from tabrecon.metrics.calibration import calibrate, sample_blocks
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.schema import BLOCK_SIZE_LABELS, person_units, size_bin
from tabrecon.schema.registry import population
from tabrecon.tables.spec import tabulate_units


@pytest.fixture(scope="module")
def truth():
    return synthesize(SynthConfig(persons=3_000), seed=4)


def test_blocks_are_sampled_in_every_size_bin_the_county_has(truth):
    units = person_units(truth)
    picked = sample_blocks(units, 2, seed=1)
    geo, n = np.unique(units.block_geoid.astype(str), return_counts=True)
    size = dict(zip(geo.tolist(), size_bin(n).tolist(), strict=True))
    have = {b for b in size.values() if b >= 0}
    got = [size[g] for g in picked]
    assert set(got) == have and all(got.count(b) <= 2 for b in have)
    assert picked == sample_blocks(units, 2, seed=1)  # seeded


def test_a_claim_is_true_exactly_when_the_records_give_its_count(truth):
    """The SF1 side's truth counts equal Generate-then-Verify's own count against the truth
    (another path: its ``true_matches``), and exact tables make every verified claim true."""
    persons = population("persons")
    cal = calibrate(
        truth, persons=persons, defense="none", per_size=1, k_values=(1, 2), k_solutions=4, seed=2
    )
    sf1 = cal.claims.filter(pl.col("side") == "2010 SF1")
    units = person_units(truth)
    long = tabulate_units(units).filter(pl.col("geoid").is_in(list(cal.blocks)))
    own = generate_then_verify(
        long, persons, k_values=(1, 2), k_solutions=4, seed=2, truth=units
    ).claims
    key = ["geoid", "k", "columns", "key"]
    both = sf1.join(own.select(*key, pl.col("true_matches").alias("own")), on=key, how="inner")
    assert both.height == sf1.height > 0
    assert (both["true_matches"] == both["own"]).all()
    assert cal.claims["true"].all()  # exact tables on both sides: every verified claim is true
    every = cal.scores.filter(pl.col("block_size") == "all")
    assert every["verified"].sum() == cal.claims.height
    assert set(cal.scores["block_size"]) <= {*BLOCK_SIZE_LABELS, "all"}


@pytest.mark.slow
def test_the_production_topdown_makes_claims_that_are_not_all_true(truth):
    cal = calibrate(
        truth,
        persons=population("persons"),
        per_size=2,
        k_values=(2,),
        k_solutions=5,
        seed=3,
        block_seconds=30.0,
    )
    by = {
        r["side"]: r for r in cal.scores.filter(pl.col("block_size") == "all").iter_rows(named=True)
    }
    assert by["2010 SF1"]["true"] == by["2010 SF1"]["verified"] > 0
    assert 0 < by["2020 DHC"]["verified"] and by["2020 DHC"]["true"] < by["2020 DHC"]["verified"]
    assert "2020 DHC" in cal.table() and "true %" in cal.table()


def test_the_command_writes_its_tables_and_refuses_bad_options(tmp_path):
    r = run_cli(
        [
            "calibrate",
            "--persons",
            "1500",
            "--defense",
            "none",
            "--per-size",
            "1",
            "--k",
            "1",
            "-K",
            "3",
            "--out",
            str(tmp_path / "c"),
        ]
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("calibration.csv", "claims.parquet", "calibration.md", "report.html"):
        assert (tmp_path / "c" / f).exists(), f
    doc = (tmp_path / "c" / "report.html").read_text()
    # with no defense both sides' tables are exact: every verified claim true, on either side
    assert doc.count("<b>100.0%</b> of") == 2 and 'id="tbl-calibration"' in doc, doc[:2000]
    scores = pl.read_csv(tmp_path / "c" / "calibration.csv")
    assert set(scores["side"]) == {"2010 SF1", "2020 DHC"}
    for args, said in (
        (["--k", "0"], "--k: use numbers of columns"),
        (["--k", "x"], "--k: 'x' is not a comma list"),
        (["--defense", "bogus"], "--defense 'bogus': unknown defense"),
        (["--per-size", "0"], "per"),
        ([str(tmp_path / "missing.csv")], "missing.csv: file not found"),
    ):
        bad = run_cli(["calibrate", *args, "--out", str(tmp_path / "x")])
        assert bad.returncode != 0 and said in bad.stdout + bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stdout + bad.stderr
