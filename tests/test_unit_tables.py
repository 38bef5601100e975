"""Tables over the housing-unit schema: every cell equals a direct count of the units it
describes, SF1's identities between the tables hold, the command tabulates unit files."""

from __future__ import annotations

import subprocess

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.errors import InputError, TabreconError
from tabrecon.populations.households import housing_tables
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.schema.registry import population
from tabrecon.schema.spec import write_units
from tabrecon.tables.spec import table_by_name, tabulate_units


@pytest.fixture(scope="module", params=[0, 5])
def counted(request):
    _, units = synthesize_households(SynthConfig(persons=4_000), seed=request.param)
    long = tabulate_units(units)
    wide = long.pivot(on="cell", index="geoid", values="value").sort("geoid")
    return units, wide


def test_every_cell_is_a_direct_count_of_its_units(counted):
    """Oracle: each cell's predicate applied to the unit frame with polars, block by block."""
    units, wide = counted
    frame = units.to_frame()
    for t in housing_tables():
        for c in t.cells():
            expr = pl.col("block_geoid").is_not_null()
            for attr, codes in c.predicate.items():
                expr = expr & pl.col(attr).is_in(list(codes))
            want = (
                frame.group_by("block_geoid")
                .agg(expr.sum().alias("n"))
                .sort("block_geoid")["n"]
                .to_numpy()
            )
            assert (wide[c.id].to_numpy() == want).all(), c.id


def test_sf1_identities_hold(counted):
    _, w = counted

    def v(cell: str) -> np.ndarray:
        return w[cell].to_numpy()

    occupied = v("H0030002")
    assert (v("H0010001") == v("H0030001")).all()
    assert (v("H0030001") == occupied + v("H0030003")).all()
    assert (v("H0050001") == v("H0030003")).all()
    for total in ("H0040001", "H0060001", "H0070001", "H0130001", "H0140001", "H0150001",
                  "H0160001", "H0170001", "P0180001"):  # fmt: skip
        assert (v(total) == occupied).all(), total
    assert (v("H0040002") + v("H0040003") == v("H0140002")).all()  # owners
    assert (v("H0040004") == v("H0140010")).all()  # renters
    assert (sum(v(f"H005000{k}") for k in range(2, 9)) == v("H0050001")).all()
    assert (sum(v(f"H01300{k:02d}") for k in range(2, 9)) == occupied).all()
    for first in (2, 10):  # H7: origin then 7 races; H14/H16: tenure then 7 lines
        for t in ("H007", "H014", "H016"):
            assert (
                sum(v(f"{t}{first + k:04d}") for k in range(1, 8)) == v(f"{t}{first:04d}")
            ).all()
    assert (sum(v(f"H017{k:04d}") for k in range(3, 12)) == v("H0170002")).all()
    assert (v("P0180002") == v("P0180003") + v("P0180004")).all()
    assert (v("P0180004") == v("P0180005") + v("P0180006")).all()
    assert (v("P0180007") == v("P0180008") + v("P0180009")).all()
    assert (v("P0180008") == v("H0130002")).all()  # living alone = 1-person households
    assert (v("H0150003") + v("H0150006") == v("H0070002")).all()  # not Hispanic householders


def test_table_lookup_names_the_choices():
    assert [c.id for c in table_by_name("p18", population("households")).cells()][-1] == "P0180009"
    assert sum(len(t.cells()) for t in housing_tables()) == 850
    with pytest.raises(TabreconError, match="unknown housing-unit table 'H99'; choose from H1"):
        table_by_name("H99", population("households"))


def test_tabulate_command_takes_the_household_schema(tmp_path):
    _, units = synthesize_households(SynthConfig(persons=1_000), seed=2)
    write_units(units, tmp_path / "u.csv")
    args = ["tabulate", "u.csv", "--schema", "households", "--tables", "H3,P18", "--out", "t.csv"]
    ok = run_cli(args, tmp_path)
    assert ok.returncode == 0, ok.stderr
    t = pl.read_csv(tmp_path / "t.csv")
    assert set(t["cell"].str.slice(0, 4).unique()) == {"H003", "P018"}
    want = tabulate_units(units, ["H3", "P18"])
    assert t["value"].sum() == want["value"].sum()
    bad = run_cli(["tabulate", "u.csv", "--schema", "flats", "--out", "t.csv"], tmp_path)
    assert bad.returncode == 2 and "flats" in bad.stderr and "Traceback" not in bad.stderr


def test_tables_list_and_describe_cover_the_housing_unit_tables(tmp_path):

    def run(*a: str) -> subprocess.CompletedProcess:
        return run_cli(list(a), tmp_path)

    listing = run("tables", "list", "--schema", "households")
    assert listing.returncode == 0 and "H13" in listing.stdout and "P18" in listing.stdout
    cell = run("tables", "describe", "H0130002")
    assert cell.returncode == 0 and "1-person household" in cell.stdout
    person = run("tables", "describe", "P0120003")
    assert person.returncode == 0 and "male" in person.stdout
    bad = run("tables", "describe", "X123")
    assert bad.returncode == 2 and "--schema NAME" in bad.stderr and "households" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_housing_unit_tables_are_read_from_the_census_api_json_too(tmp_path):
    """The block rows of a wide table (2010 API names such as H013002) give the same long table
    as tabulation; a bad value is named by file, line and the file's variable."""
    import json

    import polars as pl

    from tabrecon.records.households import synthesize_households
    from tabrecon.records.synth import SynthConfig
    from tabrecon.tables.reader import read_unit_tables

    _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    long = tabulate_units(units)
    wide = long.pivot(on="cell", index="geoid", values="value")
    cells = [c for c in wide.columns if c != "geoid"]
    from tabrecon.tables.layout import layout

    api = dict(layout().select("cell", "api_name").iter_rows())  # H016A0003 -> H016A003
    rows = [["state", "county", "tract", "block", *[api[c] for c in cells]]]
    for r in wide.iter_rows(named=True):
        g = r["geoid"]
        rows.append([g[:2], g[2:5], g[5:11], g[11:], *[str(r[c]) for c in cells]])
    rows.append(["99", "001", "000100", None, *["0"] * len(cells)])  # a tract row: read, not used
    (tmp_path / "api.json").write_text(json.dumps(rows))
    read = read_unit_tables(tmp_path / "api.json", population("households"))
    assert read.levels() == ["block", "tract"]
    back = read.own_levels().to_frame().sort("geoid", "cell")
    assert back.equals(long.sort("geoid", "cell").with_columns(pl.col("value").cast(pl.Int64)))
    rows[3][6] = "-1"
    (tmp_path / "bad.json").write_text(json.dumps(rows))
    # the file's own variable is named, not tabrecon's long-form 'value'
    with pytest.raises(InputError, match=rf"bad.json, line 4, column '{rows[0][6]}': '-1'"):
        read_unit_tables(tmp_path / "bad.json", population("households"))


def test_tracts_and_counties_beside_the_blocks_are_read_and_left_to_the_blocks(tmp_path):
    """A release may give its block tables for tracts, counties and the state too (SF1 and the
    API do): long and wide files are read with those rows (each its level's grid), the engine
    takes each table at its own level, so the reconstruction is the blocks' alone; a variable
    empty for every tract is not published for tracts, one empty for some blocks is refused,
    and a geoid of no census level, or a tract table's cell on a block, is named."""
    from tabrecon.engine.release import reconstruct_release
    from tabrecon.tables.reader import read_unit_tables

    _, units = synthesize_households(SynthConfig(persons=300), seed=2)  # blocks of 1-24 units
    long = tabulate_units(units).with_columns(pl.col("value").cast(pl.Int64))
    coarse = [
        long.with_columns(pl.col("geoid").str.slice(0, n))
        .group_by("geoid", "cell")
        .agg(pl.col("value").sum())
        for n in (11, 5, 2)
    ]
    every = pl.concat([long, *coarse], how="vertical_relaxed")
    every.write_csv(tmp_path / "long.csv")
    wide = every.pivot(on="cell", index="geoid", values="value").rename({"geoid": "GEOID"})
    wide = wide.with_columns(  # H3 is published for blocks only
        pl.when(pl.col("GEOID").str.len_chars() < 15)
        .then(None)
        .otherwise(pl.col("H0030001"))
        .alias("H0030001")
    )
    wide.write_csv(tmp_path / "wide.csv")
    alone = reconstruct_release(long, population("households"))
    for f in ("long.csv", "wide.csv"):
        ts = read_unit_tables(tmp_path / f, population("households"))
        assert ts.levels() == ["block", "tract", "county", "state"], f
        assert ts.own_levels().to_frame().sort("geoid", "cell").equals(long.sort("geoid", "cell"))
        run = reconstruct_release(ts, population("households"))
        assert run.blocks.select("geoid", "status").equals(alone.blocks.select("geoid", "status"))
    assert (
        "H0030001"
        not in read_unit_tables(tmp_path / "wide.csv", population("households"))["tract"].cells
    )
    some = wide.with_columns(
        pl.when(pl.col("GEOID") == wide["GEOID"].sort()[-1])
        .then(None)
        .otherwise(pl.col("H0010001"))
        .alias("H0010001")
    )
    some.write_csv(tmp_path / "some.csv")
    with pytest.raises(
        InputError, match=r"some.csv, line \d+, column 'H0010001': '' is empty, though the variable"
    ):
        read_unit_tables(tmp_path / "some.csv", population("households"))
    bad = pl.DataFrame({"geoid": ["1234567890123"], "cell": ["H0010001"], "value": ["1"]})
    bad.write_csv(tmp_path / "bad.csv")
    with pytest.raises(InputError, match=r"'1234567890123' is not the geoid of a block \(15"):
        read_unit_tables(tmp_path / "bad.csv", population("households"))
    finer = pl.DataFrame({"geoid": ["1" * 15], "cell": ["PCT0120001"], "value": ["1"]})
    finer.write_csv(tmp_path / "finer.csv")
    with pytest.raises(
        InputError, match=r"'111111111111111' is finer than its cell's table, a tract"
    ):
        read_unit_tables(tmp_path / "finer.csv", population("persons"))


def test_a_wide_file_spelling_one_cell_twice_is_refused_naming_both_columns(tmp_path):
    """H001001 (the 2010 API's spelling) and H0010001 (the summary file's) are one cell: a file
    with both is refused by name, not a crash inside the reader."""
    from tabrecon.tables.reader import read_unit_tables

    (tmp_path / "dup.csv").write_text("GEOID,H001001,H0010001\n990010001001000,3,3\n")
    with pytest.raises(
        InputError, match=r"dup\.csv: cell H0010001 appears twice, as 'H001001' and 'H0010001'"
    ):
        read_unit_tables(tmp_path / "dup.csv", population("households"))


def test_a_wide_variable_of_no_sf1_table_is_refused_and_a_tract_file_reads(tmp_path):
    """A column named like an SF1 variable that SF1 2010 does not have (a typo, another product's)
    is refused by name instead of passed over; another table's variable (a whole release) is left
    out; a file of tracts alone reads for a population with tract tables (persons: PCT12)."""
    from tabrecon.tables.reader import read_unit_tables

    (tmp_path / "typo.csv").write_text("GEOID,H001001,H099001\n990010001001000,3,4\n")
    with pytest.raises(InputError, match=r"typo\.csv: unknown variable 'H099001': no variable"):
        read_unit_tables(tmp_path / "typo.csv", population("households"))
    (tmp_path / "whole.csv").write_text("GEOID,H001001,P001001\n990010001001000,3,4\n")
    got = read_unit_tables(tmp_path / "whole.csv", population("households")).to_frame()
    assert got["cell"].to_list() == ["H0010001"] and got["value"].to_list() == [3]
    (tmp_path / "tract.csv").write_text("GEOID,PCT012001\n99001000100,7\n")
    tract = read_unit_tables(tmp_path / "tract.csv", population("persons"))
    assert tract.levels() == ["tract"] and tract["tract"].col("PCT0120001").tolist() == [7]
    (tmp_path / "tract_h.csv").write_text("GEOID,H001001\n99001000100,7\n")
    with pytest.raises(InputError, match=r"tract_h\.csv: holds no block rows"):
        read_unit_tables(tmp_path / "tract_h.csv", population("households"))
