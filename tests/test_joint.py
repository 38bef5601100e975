"""Housing units and persons of a block reconstructed together (tabrecon.attacks.joint): the
ties hold in every joint reconstruction, the truth satisfies them, adding them never loses a
unique block, and two releases of a block that admit no common population are named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.attacks.joint import (
    CONSISTENT,
    CONTRADICTION,
    reconstruct_release_together,
    reconstruct_together,
    tie_matrices,
    tie_violations,
)
from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.runner import RunOptions
from tabrecon.schema import AGEBIN_OF_AGE, PERSONS_BINNED, person_units
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.registry import population
from tabrecon.schema.spec import Units, write_units
from tabrecon.tables.spec import tabulate_units


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(args, cwd)


@pytest.fixture(scope="module")
def county():
    md, units = synthesize_households(SynthConfig(persons=900), seed=12)
    persons = person_units(md, binned=True)
    return units, persons, tabulate_units(units), tabulate_units(persons)


@pytest.fixture(scope="module")
def together(county):
    _, _, lu, lp = county
    return reconstruct_together(lu, lp, population("households"))


def _histograms(u: Units) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for g, t in zip(u.block_geoid.astype(str).tolist(), u.types.tolist(), strict=True):
        out.setdefault(g, []).append(int(t))
    return {g: sorted(v) for g, v in out.items()}


def test_the_truth_satisfies_every_tie(county):
    units, persons, _, _ = county
    assert tie_violations(units, persons, tie_matrices(population("households"))).height == 0


def test_a_joint_reconstruction_meets_both_releases_and_every_tie(county, together):
    units, persons, lu, lp = county
    assert set(together.blocks["status"]) == {CONSISTENT}
    assert together.violations().height == 0
    key = ["geoid", "cell"]
    assert tabulate_units(together.units).sort(key).equals(lu.sort(key))
    assert tabulate_units(together.others).sort(key).equals(lp.sort(key))


def test_unique_given_both_releases_means_the_truth(county, together):
    """The truth is one joint solution, so a half proven unique given both releases is it."""
    units, persons, _, _ = county
    b = together.blocks
    truth_u, truth_p = _histograms(units), _histograms(persons)
    got_u, got_p = _histograms(together.units), _histograms(together.others)
    for g in b.filter(pl.col("units_verdict") == "unique")["geoid"]:
        assert got_u.get(g, []) == truth_u.get(g, []), g
    for g in b.filter(pl.col("others_verdict") == "unique")["geoid"]:
        assert got_p.get(g, []) == truth_p.get(g, []), g


def test_the_ties_never_lose_a_unique_block_and_here_gain_some(county, together):
    """More constraints leave fewer populations: every block unique from one release alone is
    unique given both; on this county the person tables make more households unique."""
    _, _, lu, lp = county
    alone_u = reconstruct_units(lu, population("households")).blocks
    alone_p = reconstruct_units(lp, population("persons_binned")).blocks
    b = together.blocks

    def unique(frame: pl.DataFrame, col: str) -> set[str]:
        return set(frame.filter(pl.col(col) == "unique")["geoid"])

    assert unique(alone_u, "status") <= unique(b, "units_verdict")
    assert unique(alone_p, "status") <= unique(b, "others_verdict")
    assert len(unique(b, "units_verdict")) > len(unique(alone_u, "status"))


def test_reconstructions_made_apart_can_break_the_ties(county):
    """Why the joint model matters: households and persons reconstructed each from its own
    tables disagree somewhere on this county (a household with someone under 18 where the
    person reconstruction has nobody under 18, a householder who is no person of the block)."""
    _, _, lu, lp = county
    apart = tie_violations(
        reconstruct_units(
            lu, population("households"), ReconstructOptions(check_unique=False)
        ).units,
        reconstruct_units(
            lp, population("persons_binned"), ReconstructOptions(check_unique=False)
        ).units,
        tie_matrices(population("households")),
    )
    assert apart.height > 0


def _unit(**kw: int) -> dict[str, int]:
    """An occupied 1-person unit (a householder living alone), with ``kw`` overriding."""
    base = dict(
        tenure=3,
        vacancy_status=0,
        household_size=1,
        household_type=6,  # female householder living alone
        detailed_household_type=5,
        under_18=0,
        over_65=0,
        hispanic_householder=1,
        householder_age=2,  # 25-34
        householder_race=2,  # Black alone
    )
    return base | kw


def _tiny(tmp: Path | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two blocks: the first's person tables hold the householder (a Black woman of 30), the
    second's a White woman of 30 where the household tables say the householder is Black."""
    rows = [_unit(), _unit()]
    units = Units(
        HOUSING_UNITS,
        np.array(["990010001001000", "990010001001001"]),
        {k: np.array([r[k] for r in rows]) for k in rows[0]},
        None,
        "test",
    )
    persons = Units(
        PERSONS_BINNED,
        np.array(["990010001001000", "990010001001001"]),
        {
            "sex": np.array([1, 1]),
            "agebin": np.array([AGEBIN_OF_AGE[30]] * 2),
            "race": np.array([2, 1]),
            "hispanic": np.array([0, 0]),
        },
        None,
        "test",
    )
    lu, lp = tabulate_units(units), tabulate_units(persons)
    if tmp is not None:
        lu.write_csv(tmp / "hu.csv")
        lp.write_csv(tmp / "p.csv")
    return lu, lp


def test_releases_that_admit_no_common_population_are_named():
    lu, lp = _tiny()
    rec = reconstruct_together(lu, lp, population("households"))
    st = dict(rec.blocks.select("geoid", "status").iter_rows())
    assert st == {"990010001001000": CONSISTENT, "990010001001001": CONTRADICTION}
    msg = rec.blocks.filter(pl.col("status") == CONTRADICTION)["message"][0]
    assert "householders aged 25-34, Black or African American alone" in msg
    assert "need at least 1" in msg and "allow at most 0" in msg


def test_cli_writes_both_halves_and_exits_1_naming_the_block(tmp_path):
    _tiny(tmp_path)
    r = _cli(
        ["reconstruct", "hu.csv", "--schema", "households", "--with", "p.csv", "-o", "r.parquet"],
        tmp_path,
    )
    assert r.returncode == 1, r.stderr
    assert "block 990010001001001: contradiction" in r.stderr
    assert "Traceback" not in r.stderr
    blocks = pl.read_csv(tmp_path / "r_blocks.csv", schema_overrides={"geoid": pl.String})
    assert blocks.height == 2 and (tmp_path / "r_persons.parquet").exists()
    assert pl.read_parquet(tmp_path / "r.parquet").height == 1  # the consistent block's unit


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--schema", "persons"], "declare no ties"),
        (["--schema", "households", "--level", "block+tract"], "--level"),
        (["--schema", "households", "--distance"], "--distance"),
    ],
)
def test_cli_refuses_what_a_joint_run_cannot_do(tmp_path, extra, says):
    _tiny(tmp_path)
    r = _cli(["reconstruct", "hu.csv", "--with", "p.csv", *extra], tmp_path)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_block_in_one_release_only_is_refused_before_any_work(tmp_path):
    lu, lp = _tiny()
    lp.filter(pl.col("geoid") != "990010001001001").write_csv(tmp_path / "p.csv")
    lu.write_csv(tmp_path / "hu.csv")
    r = _cli(["reconstruct", "hu.csv", "--schema", "households", "--with", "p.csv"], tmp_path)
    assert r.returncode == 2, r.stderr
    assert "block 990010001001001 has households tables" in r.stderr


def test_the_release_runner_resumes_to_the_same_result(county, tmp_path):
    units, persons, lu, lp = county
    first = reconstruct_release_together(
        lu, lp, population("households"), run=RunOptions(out=tmp_path / "r.parquet")
    )
    again = reconstruct_release_together(
        lu, lp, population("households"), run=RunOptions(out=tmp_path / "r.parquet")
    )
    assert first.failed == [] and again.failed == []
    assert again.rec.blocks.drop("seconds").equals(first.rec.blocks.drop("seconds"))
    assert _histograms(again.rec.units) == _histograms(first.rec.units)
    with pytest.raises(Exception, match="other|differ|changed"):  # other inputs: refused
        reconstruct_release_together(
            lu,
            lp.with_columns(pl.col("value") * 2),
            population("households"),
            run=RunOptions(out=tmp_path / "r.parquet"),
        )
    write_units(units, tmp_path / "u.parquet")  # (the fixture's files stay usable)


def test_claims_given_both_releases_keep_every_claim_of_one_and_stay_true(county):
    """A claim every population of the household release makes true is made true by every
    population of both releases, and is a candidate in any of their solutions: so every claim
    verified from the household tables alone is verified given both, and more may be."""
    from tabrecon.attacks.claims.release import ClaimsOptions, matching_units, release_claims
    from tabrecon.audit.units import median_blocks

    units, _, lu, lp = county
    pick = median_blocks(lu, 4)
    lu4, lp4 = (t.filter(pl.col("geoid").is_in(pick)) for t in (lu, lp))
    asked = ClaimsOptions(k_values=(4, 5), k_solutions=8)
    alone = release_claims(lu4, population("households"), asked, truth=units)
    both = release_claims(lu4, population("households"), asked, truth=units, tied=lp4)
    assert set(alone.blocks["status"]) == set(both.blocks["status"]) == {"ok"}
    key = ["geoid", "k", "columns", "values", "m"]
    a = set(alone.claims.select(key).iter_rows())
    b = set(both.claims.select(key).iter_rows())
    assert a <= b and len(b) > len(a)
    c = both.claims
    assert all(m.size == n for m, n in zip(matching_units(c, units), c["m"].to_list(), strict=True))


def test_cli_claims_with_the_person_tables_names_a_contradicting_block(tmp_path):
    _tiny(tmp_path)
    r = _cli(
        ["claims", "hu.csv", "--schema", "households", "--with", "p.csv", "--k", "2", "-K", "3"],
        tmp_path,
    )
    assert r.returncode == 1, r.stderr
    assert "block 990010001001001: its two releases admit no common population" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_with_file_of_other_tables_is_named_as_such(tmp_path):
    _tiny(tmp_path)
    for cmd in ("reconstruct", "claims"):
        r = _cli([cmd, "hu.csv", "--schema", "households", "--with", "hu.csv"], tmp_path)
        assert r.returncode == 2, r.stderr
        assert "--with needs the persons tables of the same blocks" in r.stderr
        assert "persons_binned" not in r.stderr and "Traceback" not in r.stderr
