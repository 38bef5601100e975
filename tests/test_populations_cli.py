"""A third population from the command line, as a new user meets it: group-quarters persons go
through synth, tabulate, tables, check-tables, reconstruct, solvar, claims and audit with nothing
but ``--schema group_quarters``; wrong choices get one line and exit 2."""

from __future__ import annotations

import json

import polars as pl
from cli_run import run_cli


def _run(tmp_path, *args):
    return run_cli([str(a) for a in args], tmp_path)


def test_group_quarters_run_through_every_command(tmp_path):
    gq = ["--schema", "group_quarters"]
    steps = [
        ("synth", "--persons", "30000", "--seed", "2", "--out", "gq.csv", *gq),
        ("tabulate", "gq.csv", "--out", "t.csv", *gq),
        ("tables", "list", *gq),
        ("check-tables", "t.csv", *gq),
        ("reconstruct", "t.csv", "--out", "r.csv", "--workers", "2", *gq),
        # the truth certified as a reconstruction made elsewhere would be
        ("solvar", "t.csv", "--recon", "gq.csv", "--out", "sv.csv", "--level", "block", *gq),
        ("claims", "t.csv", "--truth", "gq.csv", "--out", "c", *gq),
        # the same claims read off the certified reconstruction, tract by tract, as persons'
        ("claims", "t.csv", "--recon", "r.csv", "--solvar", "r_blocks.csv", "--out", "cc", *gq),
        ("audit", "gq.csv", "--out", "a", "--quiet", *gq),
    ]
    for step in steps:
        r = _run(tmp_path, *step)
        assert r.returncode == 0, (step, r.stderr)
        assert "Traceback" not in r.stderr
    listing = _run(tmp_path, "tables", "list", *gq).stdout
    assert "P42" in listing and "P43" in listing and "73 cells per block" in listing
    truth = pl.read_csv(tmp_path / "gq.csv")
    rec = pl.read_csv(tmp_path / "r.csv")
    key = ["block_geoid", "sex", "age_group", "gq_type"]
    assert rec.select(key).sort(key).equals(truth.select(key).sort(key))  # P43 is the whole
    blocks = pl.read_csv(tmp_path / "r_blocks.csv")
    assert set(blocks["status"]) == {"unique"}
    sv = pl.read_csv(tmp_path / "sv.csv", schema_overrides={"block_geoid": pl.String})
    assert set(sv["status"]) == {"unique"} and (sv["solvar"] == 0).all()
    assert sv.height == blocks.height and (tmp_path / "sv_table_s4.csv").exists()
    assert not (tmp_path / "sv_flags.parquet").exists()  # persons' flags only
    claims = pl.read_csv(tmp_path / "c" / "group_quarters_claims.csv")
    assert claims.height and set(claims["k"]) <= {1, 2}  # every 3-column claim is a P43 cell
    certified = json.loads((tmp_path / "cc" / "summary.json").read_text())
    assert certified["persons"] == truth.height
    assert certified["certified_blocks"] == certified["blocks"] == blocks.height
    by_k = pl.read_csv(tmp_path / "cc" / "claims_by_k.csv")
    # claims of up to 2 columns: what both runs verify alike (every block is unique)
    assert by_k.filter(pl.col("k") <= 2)["verified_claims"].sum() == claims.height
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["population"] == "group_quarters"
    assert summary["group_quarters"]["records"] == truth.height
    assert summary["certify"]["unique_blocks"] == blocks.height  # every block certified
    assert "Group-quarters persons" in (tmp_path / "a" / "report.html").read_text()


def test_wrong_population_choices_are_refused_with_one_line(tmp_path):
    assert _run(tmp_path, "synth", "--schema", "group_quarters", "--out", "gq.csv").returncode == 0
    assert _run(tmp_path, "tabulate", "gq.csv", "--out", "t.csv", "--schema", "group_quarters")
    cases = [
        (("tabulate", "gq.csv", "--schema", "hogwarts"), "unknown schema 'hogwarts'"),
        (
            ("claims", "t.csv", "--schema", "group_quarters", "--k", "4"),
            "must lie in 1..3 for group_quarters",
        ),
        (
            ("reconstruct", "t.csv", "--schema", "group_quarters", "--level", "block+tract"),
            "needs tract tables",
        ),
        (("reconstruct", "t.csv", "--distance"), "read it with --schema group_quarters"),
        (("claims", "t.csv", "--schema", "households"), "holds no cells of the households"),
        (
            ("tabulate", "gq.csv", "--schema", "households", "--out", "x.csv"),
            "gq.csv",  # a group-quarters file is not a housing-unit file: named
        ),
    ]
    for args, says in cases:
        r = _run(tmp_path, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_tabulate_is_one_command_for_every_population(tmp_path):
    """``tabrecon tabulate`` is one path for every population: persons are published as an
    agency would (withheld cells empty; the person attacks still refuse such tables), any
    population's tables are tabulated at a coarser level, and a bad level gets one line."""
    assert (
        _run(tmp_path, "synth", "--persons", "2000", "--seed", "1", "--out", "p.csv").returncode
        == 0
    )
    for out, more in (("e.csv", ()), ("s.csv", ("--publication", "suppress:3"))):
        r = _run(tmp_path, "tabulate", "p.csv", "--out", out, *more)
        assert r.returncode == 0, r.stderr
    assert "published suppress:3" in r.stdout and "withheld" in r.stdout
    key = ["geoid", "cell"]
    both = pl.read_csv(tmp_path / "e.csv").join(
        pl.read_csv(tmp_path / "s.csv"), on=key, suffix="_s", how="full", coalesce=True
    )
    withheld = both.filter(pl.col("value_s").is_null())
    assert withheld.height and withheld["value"].is_between(1, 2).all()
    shown = both.filter(pl.col("value_s").is_not_null())
    assert (shown["value"] == shown["value_s"]).all()
    # attacked as published: at block level (inexact cells are modelled there only so far),
    # every shown block cell met and every withheld one between 1 and 2
    r = _run(tmp_path, "reconstruct", "s.csv", "--publication", "suppress:3", "--out", "r.csv")
    assert r.returncode == 0 and "(block)" in r.stdout, r.stderr
    assert _run(tmp_path, "tabulate", "r.csv", "--out", "rt.csv").returncode == 0
    again = pl.read_csv(tmp_path / "rt.csv", schema_overrides={"geoid": pl.String})
    blocks = both.filter(pl.col("geoid").cast(pl.String).str.len_chars() == 15)
    met = blocks.with_columns(pl.col("geoid").cast(pl.String)).join(
        again, on=key, suffix="_r", how="left"
    )
    mine = met.filter(~pl.col("cell").str.starts_with("PCT"))  # the block tables
    assert mine.height and mine["value_r"].null_count() == 0
    shown, held = (
        mine.filter(pl.col("value_s").is_not_null()),
        mine.filter(pl.col("value_s").is_null()),
    )
    assert (shown["value_r"] == shown["value_s"]).all()
    assert held.height and held["value_r"].is_between(1, 2).all()
    r = _run(
        tmp_path, "reconstruct", "s.csv", "--publication", "suppress:3", "--level", "block+tract"
    )
    assert r.returncode == 2 and "modelled at level 'block' only so far" in r.stderr
    r = _run(tmp_path, "tabulate", "p.csv", "--tables", "P1", "--level", "county", "--out", "c.csv")
    assert r.returncode == 0 and "1 county x 1 cells" in r.stdout
    c = pl.read_csv(tmp_path / "c.csv", schema_overrides={"geoid": pl.String})
    assert c["value"].to_list() == [pl.read_csv(tmp_path / "p.csv").height]
    hh = ["--schema", "households"]
    assert _run(tmp_path, "synth", "--persons", "2000", "--out", "h.csv", *hh).returncode == 0
    r = _run(
        tmp_path, "tabulate", "h.csv", "--tables", "H3", "--level", "tract", "--out", "t.csv", *hh
    )
    assert r.returncode == 0, r.stderr
    t = pl.read_csv(tmp_path / "t.csv", schema_overrides={"geoid": pl.String})
    assert t["geoid"].str.len_chars().unique().to_list() == [11]
    r = _run(tmp_path, "tabulate", "h.csv", "--level", "parish", "--out", "x.csv", *hh)
    assert (
        r.returncode == 2 and "unknown level 'parish'" in r.stderr and "Traceback" not in r.stderr
    )
    # and one listing: the person tables as declared, medians included
    listing = _run(tmp_path, "tables", "list").stdout
    assert "Total population" in listing and "P13I" in listing
    assert "898 cells per block in 47 tables" in listing


def test_persons_reconstruct_and_claims_take_the_path_of_every_population(tmp_path):
    """``reconstruct`` and ``claims`` are one path for every population: persons get their
    person file and verdicts, the certified claims read the reconstruction's own
    ``OUT_blocks.csv`` (before, the person claims read its block ids as numbers and found no
    block certified: exit 2), and without a reconstruction each block's claims come from its
    tables (before: refused for persons). A block whose cells contradict each other is named
    with the cells to blame, its tract failed (exit 1), the other blocks written."""
    made = _run(tmp_path, "synth", "--persons", "600", "--seed", "4", "--out", "p.csv")
    assert made.returncode == 0
    assert _run(tmp_path, "tabulate", "p.csv", "--out", "t.csv").returncode == 0
    r = _run(tmp_path, "reconstruct", "t.csv", "--out", "r.parquet", "--level", "block")
    assert r.returncode == 0, r.stderr
    assert "tables used: P1," in r.stdout and "; blocks: " in r.stdout
    verdicts = pl.read_csv(tmp_path / "r_blocks.csv")
    assert verdicts.columns[:2] == ["block_geoid", "persons"]
    assert verdicts["persons"].sum() == pl.read_csv(tmp_path / "p.csv").height
    r = _run(
        tmp_path,
        "claims", "t.csv", "--recon", "r.parquet", "--solvar", "r_blocks.csv", "--out", "c",
        "--k-solutions", "3",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["persons"] == verdicts["persons"].sum()
    # without --recon and --solvar: each block's claims from its tables, at the resolution
    # they tell (agebin38: the persons' twin over the block tables), every one true
    r = _run(tmp_path, "claims", "t.csv", "--truth", "p.csv", "--out", "cb", "-K", "5")
    assert r.returncode == 0 and "as persons_binned" in r.stderr, r.stderr
    from tabrecon.attacks.claims.release import matching_units
    from tabrecon.schema.registry import population

    claims = pl.read_csv(
        tmp_path / "cb" / "persons_binned_claims.csv", schema_overrides={"geoid": pl.String}
    )
    truth = population("persons_binned").records(tmp_path / "p.csv")
    assert claims.height and claims["k"].max() >= 3
    assert [len(h) for h in matching_units(claims, truth)] == claims["m"].to_list()
    t = pl.read_csv(tmp_path / "t.csv", schema_overrides={"geoid": pl.String})
    block = t.filter(pl.col("geoid").str.len_chars() == 15)["geoid"].min()
    bad = (pl.col("geoid") == block) & (pl.col("cell") == "P0120003")
    t.with_columns(value=pl.when(bad).then(pl.col("value") + 1).otherwise("value")).write_csv(
        tmp_path / "bad.csv"
    )
    r = _run(tmp_path, "reconstruct", "bad.csv", "--out", "b.parquet", "--level", "block")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"block {block}: infeasible" in r.stderr and "P0120003" in r.stderr, r.stderr
    written = pl.read_parquet(tmp_path / "b.parquet")
    assert written.height and block not in written["block_geoid"].to_list()


def test_person_median_ages_are_selected_described_and_tabulated_by_name(tmp_path):
    """P13 and P13A-I are declared person tables: ``tables list`` showed them but ``--tables``
    and ``tables describe`` refused them as unknown. Now they are tabulated (to one decimal, as
    SF1 publishes them) and described as medians."""
    made = _run(tmp_path, "synth", "--persons", "800", "--seed", "2", "--out", "p.csv")
    assert made.returncode == 0
    r = _run(tmp_path, "tabulate", "p.csv", "--tables", "P1,p13,P13A", "--out", "m.csv")
    assert r.returncode == 0, r.stderr
    m = pl.read_csv(tmp_path / "m.csv", schema_overrides={"geoid": pl.String})
    med = m.filter(pl.col("cell").str.starts_with("P013"))
    assert set(med["cell"].str.slice(0, 5)) == {"P0130", "P013A"}
    assert (med["value"] != med["value"].round(0)).any()  # decimals, as published
    r = _run(tmp_path, "tables", "describe", "P13")
    assert r.returncode == 0 and "median age of" in r.stdout and "P0130002" in r.stdout, r.stderr
