"""Published tables in every form users download read into identical table sets; bad forms are
refused naming the file, line, geography and variable."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabrecon.errors import InputError
from tabrecon.schema.registry import population
from tabrecon.tables.persons import tabulate
from tabrecon.tables.published import cell_of_variable, read_tables, write_tables
from tabrecon.tables.tableset import TableSet

# the person tables a county's block and tract downloads hold, P3-P5 included
TABLES = "P1,P3,P4,P5,P8,P9,P12,P12A,P12B,PCT12"


@pytest.fixture(scope="module")
def county(small_md) -> TableSet:
    return tabulate(small_md, TABLES)


def _api_name(cell: str) -> str:
    """The Census API's name of a cell (three-digit lines for every table)."""
    if cell[-4] == "0" and cell[-4:-3].isdigit() and not cell[-5].isalpha():
        return cell[:-4] + cell[-3:]
    return cell


def _wide(ts: TableSet, level: str, names=lambda c: c) -> pl.DataFrame:
    g = ts.grids[level]
    cols = {names(c): [str(v) for v in g.values[:, j]] for j, c in enumerate(g.cells)}
    return pl.DataFrame({"geoid": list(g.geoids), **cols})


def _same(a: TableSet, b: TableSet) -> None:
    assert set(a.grids) == set(b.grids)
    for level, g in a.grids.items():
        h = b.grids[level]
        assert list(g.geoids) == list(h.geoids), level
        for c in g.cells:
            np.testing.assert_array_equal(g.col(c), h.col(c), err_msg=f"{level} {c}")


def test_variable_names_of_both_styles_map_to_cells():
    assert cell_of_variable("P001001") == cell_of_variable("P0010001") == "P0010001"
    assert cell_of_variable("PCT012105") == cell_of_variable("PCT0120105") == "PCT0120105"
    assert cell_of_variable("p012a003") == "P012A003"
    assert cell_of_variable("GEO_ID") is None and cell_of_variable("H001001") is None
    assert _api_name("P0120003") == "P012003" and _api_name("P012A003") == "P012A003"


def test_every_form_reads_into_identical_tables(county, tmp_path):
    want = county
    forms = {}
    write_tables(county, tmp_path / "long.csv")
    forms["long"] = tmp_path / "long.csv"
    # wide, summary-file style, GEOID column, one file per level (CSV and Parquet)
    for level in ("block", "tract"):
        w = _wide(county, level).rename({"geoid": "GEOID10"})
        w.write_csv(tmp_path / f"wide_{level}.csv")
        w.write_parquet(tmp_path / f"wide_{level}.parquet")
    # wide, API style, STATE/COUNTY/TRACT/BLOCK + SUMLEV, tracts and blocks in one file
    parts = []
    for level, sumlev in (("tract", "140"), ("block", "101")):
        w = _wide(county, level, _api_name)
        g = w["geoid"]
        w = w.with_columns(
            pl.lit(sumlev).alias("SUMLEV"),
            g.str.slice(0, 2).alias("STATE"),
            g.str.slice(2, 3).alias("COUNTY"),
            g.str.slice(5, 6).alias("TRACT"),
            (g.str.slice(11, 4) if level == "block" else pl.lit("")).alias("BLOCK"),
        ).drop("geoid")
        parts.append(w)
    pl.concat(parts, how="diagonal").write_csv(tmp_path / "api_style.csv")
    forms["api style, mixed levels"] = tmp_path / "api_style.csv"
    # the Census API's JSON (lower-case geography, header first), block level
    wb = _wide(county, "block", _api_name)
    g = wb["geoid"]
    body = wb.drop("geoid").with_columns(
        g.str.slice(0, 2).alias("state"),
        g.str.slice(2, 3).alias("county"),
        g.str.slice(5, 6).alias("tract"),
        g.str.slice(11, 4).alias("block"),
    )
    (tmp_path / "api.json").write_text(json.dumps([body.columns, *[list(r) for r in body.rows()]]))
    # data.census.gov: GEO_ID, NAME, a second header row of labels
    d = _wide(county, "block", _api_name)
    d = d.with_columns(
        ("1000000US" + pl.col("geoid")).alias("GEO_ID"), pl.lit("Block 1").alias("NAME")
    ).drop("geoid")
    labels = pl.DataFrame(
        {c: ["Geography" if c == "GEO_ID" else f"Label of {c}"] for c in d.columns}
    )
    pl.concat([labels, d]).write_csv(tmp_path / "dcg.csv")
    read = {name: read_tables(p) for name, p in forms.items()}
    for ts in read.values():
        _same(want, ts)
    for suffix in ("csv", "parquet"):
        blk = read_tables(tmp_path / f"wide_block.{suffix}")
        trc = read_tables(tmp_path / f"wide_tract.{suffix}")
        _same(
            want,
            TableSet(
                {"block": blk["block"], "tract": trc["tract"]}, population=population("persons")
            ),
        )
    api, dcg = read_tables(tmp_path / "api.json"), read_tables(tmp_path / "dcg.csv")
    for ts in (api, dcg):
        _same(TableSet({"block": want["block"]}, population=population("persons")), ts)


@pytest.mark.parametrize(
    "text, message",
    [
        ("GEOID,P001001,P099001\n280010001001000,3,4\n", "unknown variable 'P099001'"),
        (
            "GEOID,P001001\n280010001001000,3(r1234)\n",
            r"line 2, column 'P001001': '3\(r1234\)' is not a count",
        ),
        ("GEOID,P001001\n280010001001000,-3\n", "negative count"),
        (
            "GEOID,P001001\n280010001001000,3\n280010001001000,4\n",
            r"geoid '280010001001000' appears on two rows \(lines 2 and 3\)",
        ),
        ("GEOID,P001001,P0010001\n280010001001000,3,3\n", "appears twice"),
        ("NAME,P001001\nx,3\n", "no geography columns"),
        (
            "GEOID,NAME\n280010001001000,x\n",
            "nor a wide one with persons variables such as P0010001",
        ),
        (  # records, not tables: what to do with them is said
            "block_geoid,sex,age\n280010001001000,male,3\n",
            "it looks like records.*tabulate them first",
        ),
        (
            "GEOID,P001001,P003001\n280010001001000,3,3\n280010001001001,4,\n",
            "line 3, column 'P003001': '' is empty, though the variable is given for other",
        ),
        (  # a tract's row after the blocks': its own line and variable are named
            "GEOID,P001001,PCT012001\n280010001001000,3,\n28001000100,3,x\n",
            "line 3, column 'PCT012001': 'x' is not a count",
        ),
        (
            "GEOID,P001001,PCT012001\n280010001001000,3,\n28001000100,3,3\n28001000200,,4\n",
            "line 4, column 'P001001': '' is empty, though the variable is given for other",
        ),
    ],
    ids=[
        *("unknown", "annotation", "negative", "duplicate", "twice", "nogeo", "novars", "records"),
        *("partial", "tract_row", "tract_partial"),
    ],
)
def test_bad_wide_tables_are_refused_naming_what_is_wrong(tmp_path, text, message):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(InputError, match=message) as e:
        read_tables(p)
    assert "bad.csv" in str(e.value)


def test_api_errors_and_non_json_are_refused(tmp_path):
    (tmp_path / "err.json").write_text(json.dumps({"error": "unknown variable 'P9'"}))
    with pytest.raises(InputError, match="answered with an error"):
        read_tables(tmp_path / "err.json")
    (tmp_path / "html.json").write_text("<html>rate limited</html>")
    with pytest.raises(InputError, match="not a Census API JSON response"):
        read_tables(tmp_path / "html.json")


def _name_2020(cell: str, pl: bool = False) -> str:
    """A cell's 2020 name (P12A_003N); with ``pl`` the 2020 P.L. 94-171's (P8 is its P1)."""
    table, iteration = int(cell[1:4]), cell[4] if cell[4].isalpha() else ""
    line = int(cell[-3:])
    if pl:
        table = {8: 1, 9: 2, 10: 3, 11: 4}[table]
    return f"P{table}{iteration}_{line:03d}N"


def test_2020_names_of_the_pl_and_the_dhc_read_as_their_cells(small_md, tmp_path):
    pl_tables = tabulate(small_md, "P8,P9,P10,P11")
    w = _wide(pl_tables, "block", lambda c: _name_2020(c, pl=True))
    w = w.with_columns(
        ("1000000US" + pl.col("geoid")).alias("GEO_ID"),
        pl.lit("0").alias("H1_001N"),  # housing and group quarters: skipped
        pl.lit("0").alias("P5_001N"),
    ).drop("geoid")
    w.write_csv(tmp_path / "pl2020.csv")
    _same(pl_tables, read_tables(tmp_path / "pl2020.csv"))
    dhc = tabulate(small_md, "P1,P12,P12A")
    d = _wide(dhc, "block", _name_2020).rename({"geoid": "GEOID"})
    d.write_csv(tmp_path / "dhc2020.csv")
    _same(dhc, read_tables(tmp_path / "dhc2020.csv"))
    # the reader written once reads them too, through the persons' plug-in (Population.spell)
    from tabrecon.tables.reader import read_unit_tables

    for want, f in ((pl_tables, "pl2020.csv"), (dhc, "dhc2020.csv")):
        got = read_unit_tables(tmp_path / f, population("persons")).to_frame().sort("geoid", "cell")
        assert got.equals(want.to_frame().sort("geoid", "cell")), f


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nation=st.integers(0, 2),
    places=st.integers(0, 3),
    form=st.sampled_from(["data.census.gov", "api json", "parquet"]),
)
def test_every_value_of_a_wide_file_is_read_or_counted_skipped(
    county, tmp_path_factory, nation, places, form
):
    """Issue 86: a wide file's values read plus those reported skipped (rows of summary levels
    no table is read at: the nation, places) are every value in the file, in every form."""
    d = _wide(county, "block", _api_name)
    extra = ["0100000US"] * nation + [f"1600000US01{7000 + k:05d}" for k in range(places)]
    first = d.drop("geoid").row(0)
    rows = [[g, *first] for g in extra]
    body = pl.concat(
        [
            pl.DataFrame(
                rows, schema={c: pl.String for c in ["GEO_ID", *d.columns[1:]]}, orient="row"
            ),
            d.with_columns(("1000000US" + pl.col("geoid")).alias("GEO_ID")).select(
                "GEO_ID", *d.columns[1:]
            ),
        ]
    )
    path = tmp_path_factory.mktemp("wide") / "t"
    if form == "data.census.gov":
        labels = pl.DataFrame({c: [f"Label of {c}"] for c in body.columns})
        path = path.with_suffix(".csv")
        pl.concat([labels, body]).write_csv(path)
    elif form == "api json":
        path = path.with_suffix(".json")
        path.write_text(json.dumps([body.columns, *[list(r) for r in body.rows()]]))
    else:
        path = path.with_suffix(".parquet")
        body.write_parquet(path)
    ts = read_tables(path)
    in_file = body.height * (body.width - 1)
    read = sum(int(g.present().sum()) for g in ts.grids.values())
    skipped = sum(v for _, v in ts.skipped.values())
    assert read + skipped == in_file
    assert sum(r for r, _ in ts.skipped.values()) == nation + places
