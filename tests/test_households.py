"""Synthetic housing units made of the synthetic persons: every unit agrees with its members and
passes the housing-unit schema's rules; the mix is calibrated to the 2010 Census."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.errors import InputError
from tabrecon.records.households import (
    check_households,
    household_calibration,
    synthesize_households,
)
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.schema import read_microdata, write_microdata
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.spec import read_units, write_units


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_unit_agrees_with_its_members(tmp_path, seed):
    md, units = synthesize_households(SynthConfig(persons=3_000), seed=seed)
    # the files round-trip and the unit file passes every rule of the schema
    write_microdata(md, tmp_path / "p.parquet")
    write_units(units, tmp_path / "u.csv.gz", labels=True)
    back = read_units(tmp_path / "u.csv.gz", HOUSING_UNITS)
    assert (back.types == units.types).all()
    persons = read_microdata(tmp_path / "p.parquet")
    assert persons.extra is not None
    hh = persons.extra["household_id"].to_numpy()
    rel = persons.extra["relationship"].to_numpy()
    # the same blocks as the person-only county
    assert (md.geoids == synthesize(SynthConfig(persons=3_000), seed=seed).geoids).all()

    c = units.codes
    occ = c["vacancy_status"] == 0
    uid = units.extra["unit_id"].to_numpy()[occ]
    n_hh = int(hh.max()) + 1
    assert occ.sum() == n_hh and sorted(uid) == list(range(n_hh))
    order = np.argsort(uid)
    got = {k: v[occ][order] for k, v in c.items()}
    # exactly one householder, aged 15 or over, per household; its attributes on the unit
    head = np.flatnonzero(rel == "householder")
    assert (np.bincount(hh[head], minlength=n_hh) == 1).all()
    head = head[np.argsort(hh[head])]
    assert (persons.age[head] >= 15).all()
    band = np.searchsorted([25, 35, 45, 55, 60, 65, 75, 85], persons.age[head], side="right") + 1
    assert (got["householder_age"] == band).all()
    assert (got["hispanic_householder"] == persons.hisp[head] + 1).all()
    assert (
        got["householder_race"] == np.where(persons.race[head] <= 6, persons.race[head], 7)
    ).all()
    size = np.bincount(hh, minlength=n_hh)
    assert (got["household_size"] == np.minimum(size, 7)).all()
    young = np.bincount(hh, weights=persons.age < 18, minlength=n_hh) > 0
    old = np.bincount(hh, weights=persons.age >= 65, minlength=n_hh) > 0
    assert (got["under_18"] == young).all() and (got["over_65"] == old).all()
    # roles agree with the household types
    spouse = rel == "spouse"
    assert (got["household_type"][hh[spouse]] == 1).all()
    assert (persons.sex[spouse] != persons.sex[head[hh[spouse]]]).all()
    kid = rel == "child"
    assert (persons.age[kid] < 18).all()
    assert np.isin(got["detailed_household_type"][hh[kid]], (1, 3, 6, 10)).all()
    alone = np.isin(got["household_type"], (4, 6))
    assert (alone == (size == 1)).all()
    # vacant units have no household
    vac = ~occ
    for k in ("tenure", "household_size", "household_type", "householder_age"):
        assert (c[k][vac] == 0).all()


def test_the_mix_is_calibrated_to_2010():
    """Household type (P18), size (H13), tenure (H4) and occupancy (H3/H5) within 1.5 points on
    a 100,000-person county; married couples with own children and partner households within 3
    (the rest of the figures are reported, not fitted: see tabrecon.records.households)."""
    md, units = synthesize_households(SynthConfig(persons=100_000), seed=3)
    rows = household_calibration(md, units)
    for figure, measured, target in rows:
        if figure.startswith(("household type", "household size", "tenure", "occupancy")):
            assert abs(measured - target) <= 0.015, figure
        elif figure.startswith("households with"):
            assert abs(measured - target) <= 0.03, figure
    assert {r[0].split(":")[0] for r in rows} >= {
        "household type (P18)",
        "household size (H13)",
        "tenure (H4)",
        "occupancy (H3, H5)",
        "households with (C2010BR-14)",
    }


def test_synth_command_writes_both_files_or_nothing(tmp_path):
    exe = ["synth", "--persons", "1000"]
    ok = run_cli([*exe, "--out", "p.csv", "--households", "u.parquet"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "housing units" in ok.stdout and "household type (P18)" in ok.stdout
    u = read_units(tmp_path / "u.parquet", HOUSING_UNITS)
    p = pl.read_csv(tmp_path / "p.csv")
    assert {"household_id", "relationship"} <= set(p.columns)
    assert (u.codes["vacancy_status"] == 0).sum() == p["household_id"].n_unique()
    bad = run_cli([*exe, "--out", "q.csv", "--households", "u.txt"], tmp_path)
    assert bad.returncode == 2 and "u.txt" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "q.csv").exists()


def _pair(tmp_path, seed=2):
    md, units = synthesize_households(SynthConfig(persons=2_000), seed=seed)
    return md, units


def _broken(tmp_path, what):
    """The synthetic files with one kind of disagreement planted in two rows."""
    md, units = _pair(tmp_path)
    p = md.to_frame().with_columns(md.extra)
    u = units.to_frame()
    vac = u.with_row_index().filter(pl.col("vacancy_status") != 0)["index"].to_list()
    heads = p.with_row_index().filter(pl.col("relationship") == "householder")["index"].to_list()
    if what == "no householder":
        big = u.filter(pl.col("household_size") >= 2)["unit_id"].to_list()[:2]
        rows = (
            p.with_row_index()
            .filter(pl.col("household_id").is_in(big) & (pl.col("relationship") == "householder"))[
                "index"
            ]
            .to_list()
        )
        p = p.with_columns(
            pl.when(pl.int_range(pl.len()).is_in(rows))
            .then(pl.lit("other relative"))
            .otherwise(pl.col("relationship"))
            .alias("relationship")
        )
    elif what == "size":
        mid = u.with_row_index().filter(pl.col("household_size").is_between(3, 5))["index"]
        u = u.with_columns(
            pl.when(pl.int_range(pl.len()).is_in(mid.to_list()[:2]))
            .then(pl.col("household_size") + 1)
            .otherwise(pl.col("household_size"))
            .alias("household_size")
        )
    elif what == "person in a vacant unit":
        v = u["unit_id"][vac[0]]
        p = p.with_columns(
            pl.when(pl.int_range(pl.len()).is_in(heads[:2]))
            .then(pl.lit(v))
            .otherwise(pl.col("household_id"))
            .alias("household_id")
        )
    elif what == "unknown household":
        p = p.with_columns(
            pl.when(pl.int_range(pl.len()).is_in(heads[:2]))
            .then(pl.lit(10**9))
            .otherwise(pl.col("household_id"))
            .alias("household_id")
        )
    p.write_csv(tmp_path / "p.csv")
    u.write_csv(tmp_path / "u.csv")
    return tmp_path / "p.csv", tmp_path / "u.csv"


def test_consistent_files_pass_the_cross_check(tmp_path):
    md, units = _pair(tmp_path)
    write_microdata(md, tmp_path / "p.csv")
    write_units(units, tmp_path / "u.csv")
    n = check_households(
        read_microdata(tmp_path / "p.csv"), read_units(tmp_path / "u.csv", HOUSING_UNITS)
    )
    assert n == md.extra["household_id"].n_unique()


@pytest.mark.parametrize(
    ("what", "file", "column", "fragment"),
    [
        ("no householder", "u.csv", "unit_id", "exactly one householder"),
        ("size", "u.csv", "household_size", "differs from the number of its persons"),
        ("person in a vacant unit", "p.csv", "household_id", "says is vacant"),
        ("unknown household", "p.csv", "household_id", "is no unit_id"),
    ],
)
def test_inconsistent_households_are_named_with_their_count(tmp_path, what, file, column, fragment):
    p, u = _broken(tmp_path, what)
    with pytest.raises(InputError) as e:
        check_households(read_microdata(p), read_units(u, HOUSING_UNITS))
    msg = str(e.value)
    assert file in msg and f"column '{column}'" in msg and fragment in msg, msg
    assert "(and 1 more such row)" in msg, msg
    cli = run_cli(["check-households", str(p), str(u)])
    assert cli.returncode == 2 and fragment in cli.stderr and "Traceback" not in cli.stderr
