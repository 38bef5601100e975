"""The SF1 2010 household tables as declared from the Bureau's layout.

Two oracles, neither the declaration's own code: the reference file ``sf1_2010_layout.csv``
(every declared table's ids, order and count) and six housing units built by hand, whose expected
count in every cell of every table was written from the tables' labels (a cell not listed is 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.populations.households import DECLARED, LEFT_OUT, housing_tables
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.registry import population
from tabrecon.schema.spec import Units
from tabrecon.tables.spec import tabulate_units

LAYOUT = Path(__file__).resolve().parents[2] / "shared" / "reference" / "sf1_2010_layout.csv"
BLOCK = "990010001001000"

# tenure: 1 mortgage, 2 free and clear, 3 renter; vacancy 0 occupied, 5 seasonal;
# household_type (HHT): 1 married couple, 2 other family male, 3 other family female,
# 4/5 nonfamily male alone/not, 6/7 nonfamily female alone/not; householder_age 1 = 15-24 ...
# 6 = 60-64, 8 = 75-84; race 1 White, 2 Black, 4 Asian, 7 Two or more; hispanic 1 no, 2 yes
COLUMNS = ("tenure", "vacancy_status", "household_size", "household_type",
           "detailed_household_type", "under_18", "over_65", "hispanic_householder",
           "householder_age", "householder_race")  # fmt: skip
UNITS = {
    # U1: owned with a mortgage, married couple with own children, 4 persons, White, not
    # Hispanic, householder 35-44
    "U1": (1, 0, 4, 1, 1, 1, 0, 1, 3, 1),
    # U2: renter, woman living alone, 75-84, Black, Hispanic
    "U2": (3, 0, 1, 6, 5, 0, 1, 2, 8, 2),
    # U3: owned free and clear, mother with children, 3 persons, Two or More Races, 25-34
    "U3": (2, 0, 3, 3, 6, 1, 0, 1, 2, 7),
    # U4: renter, man sharing with nonrelatives, 2 persons, White Hispanic, 15-24
    "U4": (3, 0, 2, 5, 12, 0, 0, 2, 1, 1),
    # U5: vacant, for seasonal, recreational, or occasional use
    "U5": (0, 5, 0, 0, 0, 0, 0, 0, 0, 0),
    # U6: owned with a mortgage, male householder with relatives, no wife, no own children,
    # 7+ persons, someone 65+, Asian, not Hispanic, householder 60-64
    "U6": (1, 0, 7, 2, 11, 0, 1, 1, 6, 4),
}

#: every nonzero cell, written from the labels of sf1_2010_layout.csv
EXPECTED: dict[str, dict[str, int]] = {
    "H1": {"H0010001": 6},
    "H3": {"H0030001": 6, "H0030002": 5, "H0030003": 1},
    "H4": {"H0040001": 5, "H0040002": 2, "H0040003": 1, "H0040004": 2},
    "H5": {"H0050001": 1, "H0050006": 1},
    "H6": {"H0060001": 5, "H0060002": 2, "H0060003": 1, "H0060005": 1, "H0060008": 1},
    "H7": {
        "H0070001": 5,
        "H0070002": 3,
        "H0070003": 1,
        "H0070006": 1,
        "H0070009": 1,
        "H0070010": 2,
        "H0070011": 1,
        "H0070012": 1,
    },  # fmt: skip
    "P15": {
        "P0150001": 5,
        "P0150002": 3,
        "P0150003": 1,
        "P0150006": 1,
        "P0150009": 1,
        "P0150010": 2,
        "P0150011": 1,
        "P0150012": 1,
    },  # fmt: skip
    "H13": {
        "H0130001": 5,
        "H0130002": 1,
        "H0130003": 1,
        "H0130004": 1,
        "H0130005": 1,
        "H0130008": 1,
    },  # fmt: skip
    "H14": {
        "H0140001": 5,
        "H0140002": 3,
        "H0140003": 1,
        "H0140006": 1,
        "H0140009": 1,
        "H0140010": 2,
        "H0140011": 1,
        "H0140012": 1,
    },  # fmt: skip
    "H15": {"H0150001": 5, "H0150002": 3, "H0150003": 3, "H0150005": 2, "H0150007": 2},
    "H16": {
        "H0160001": 5,
        "H0160002": 3,
        "H0160005": 1,
        "H0160006": 1,
        "H0160009": 1,
        "H0160010": 2,
        "H0160011": 1,
        "H0160012": 1,
    },  # fmt: skip
    "H17": {
        "H0170001": 5,
        "H0170002": 3,
        "H0170004": 1,
        "H0170005": 1,
        "H0170008": 1,
        "H0170012": 2,
        "H0170013": 1,
        "H0170020": 1,
    },  # fmt: skip
    "H18": {
        "H0180001": 5,
        "H0180002": 3,
        "H0180003": 3,
        "H0180004": 1,
        "H0180006": 1,
        "H0180008": 2,
        "H0180009": 1,
        "H0180011": 1,
        "H0180013": 1,
        "H0180014": 1,
        "H0180036": 2,
        "H0180051": 2,
        "H0180052": 1,
        "H0180057": 1,
        "H0180058": 1,
        "H0180061": 1,
        "H0180062": 1,
        "H0180065": 1,
    },  # fmt: skip
    "P18": {
        "P0180001": 5,
        "P0180002": 3,
        "P0180003": 1,
        "P0180004": 2,
        "P0180005": 1,
        "P0180006": 1,
        "P0180007": 2,
        "P0180008": 1,
        "P0180009": 1,
    },  # fmt: skip
    "P19": {
        "P0190001": 5,
        "P0190002": 1,
        "P0190004": 1,
        "P0190005": 4,
        "P0190006": 3,
        "P0190007": 1,
        "P0190008": 1,
        "P0190010": 2,
        "P0190011": 1,
        "P0190013": 1,
        "P0190014": 1,
        "P0190015": 1,
        "P0190017": 1,
        "P0190018": 1,
    },  # fmt: skip
    "P22": {
        "P0220001": 5,
        "P0220002": 3,
        "P0220004": 1,
        "P0220005": 1,
        "P0220008": 1,
        "P0220012": 2,
        "P0220013": 1,
        "P0220020": 1,
    },  # fmt: skip
    "P25": {
        "P0250001": 5,
        "P0250002": 2,
        "P0250003": 1,
        "P0250004": 1,
        "P0250005": 1,
        "P0250007": 3,
        "P0250009": 3,
        "P0250010": 2,
        "P0250011": 1,
    },  # fmt: skip
    "P28": {
        "P0280001": 5,
        "P0280002": 3,
        "P0280004": 1,
        "P0280005": 1,
        "P0280008": 1,
        "P0280009": 2,
        "P0280010": 1,
        "P0280011": 1,
    },  # fmt: skip
    "P35": {"P0350001": 3},
    # iterations: the same lines, among the householders the universe names
    "P18A": {"P018A001": 2, "P018A002": 1, "P018A003": 1, "P018A007": 1, "P018A009": 1},
    "P18H": {"P018H001": 2, "P018H007": 2, "P018H008": 1, "P018H009": 1},
    "P18I": {"P018I001": 1, "P018I002": 1, "P018I003": 1},
    "H16A": {"H016A0001": 2, "H016A0002": 1, "H016A0006": 1, "H016A0010": 1, "H016A0012": 1},
    "H17H": {"H017H0001": 2, "H017H0012": 2, "H017H0013": 1, "H017H0020": 1},
    "H17I": {"H017I0001": 1, "H017I0002": 1, "H017I0005": 1},
    "P28D": {"P028D001": 1, "P028D002": 1, "P028D008": 1},
    "P35A": {"P035A001": 1},
    "P35B": {},
    "P35G": {"P035G001": 1},
}


@pytest.fixture(scope="module")
def hand_built() -> dict[str, int]:
    codes = {c: np.array([u[i] for u in UNITS.values()]) for i, c in enumerate(COLUMNS)}
    units = Units(HOUSING_UNITS, np.full(len(UNITS), BLOCK), codes, source="hand-built")
    long = tabulate_units(units, tuple(EXPECTED))
    got = long.filter(pl.col("geoid") == BLOCK)
    return dict(zip(got["cell"].to_list(), got["value"].to_list(), strict=True))


@pytest.mark.parametrize("table", list(EXPECTED))
def test_each_table_counts_the_hand_built_units(hand_built, table):
    """One test per table: every cell, zeros included, against the counts written by hand."""
    t = next(t for t in housing_tables() if t.name == table)
    got = {c.id: hand_built[c.id] for c in t.cells()}
    want = {c.id: EXPECTED[table].get(c.id, 0) for c in t.cells()}
    assert set(EXPECTED[table]) <= set(want), "an expected id is not a cell of the table"
    assert got == want


def test_every_declared_family_has_a_hand_built_check():
    base = {t.rstrip("ABCDEFGHI") if len(t) > 3 else t for t in DECLARED}
    assert base <= {t.rstrip("ABCDEFGHI") if len(t) > 3 else t for t in EXPECTED}


def test_ids_order_and_counts_are_the_reference_files():
    if not LAYOUT.exists():
        pytest.skip("../shared/reference/sf1_2010_layout.csv not present")
    ref = pl.read_csv(LAYOUT, infer_schema_length=0)
    tables = housing_tables()
    assert sorted(t.name for t in tables) == sorted(DECLARED)
    for t in tables:
        rows = ref.filter(pl.col("table") == t.name)
        assert [c.id for c in t.cells()] == rows["cell"].to_list(), t.name
        assert [c.label for c in t.cells()] == rows["label"].to_list(), t.name
        assert t.universe_label == rows["universe"][0]
        assert rows["decimal"].to_list() == ["0"] * rows.height  # counts only
        assert t.level == "block"
    assert sum(len(t.cells()) for t in tables) == 850


def test_left_out_tables_name_every_other_block_household_table():
    """Every SF1 2010 P15-P39 and H table (published by block) is declared or left out with a
    reason: nothing is silently missing."""
    if not LAYOUT.exists():
        pytest.skip("../shared/reference/sf1_2010_layout.csv not present")
    import re

    ref = pl.read_csv(LAYOUT, infer_schema_length=0)
    names = ref["table"].unique().to_list()
    household = {
        n
        for n in names
        if re.fullmatch(r"H\d+[A-I]?", n)
        or (re.fullmatch(r"P(\d+)[A-I]?", n) and 15 <= int(re.match(r"P(\d+)", n)[1]) <= 39)
    }
    left: set[str] = set()
    for key in LEFT_OUT:
        for part in key.split(", "):
            m = re.fullmatch(r"([PH])(\d+)-P?(\d+)", part)
            if m:  # a range of plain tables
                left |= {f"{m[1]}{k}" for k in range(int(m[2]), int(m[3]) + 1)}
            elif part.endswith("A-I"):
                left |= {part[:-3] + i for i in "ABCDEFGHI"}
            else:
                left.add(part)
    assert household - set(DECLARED) == left & household, sorted(household - set(DECLARED) - left)
    assert not set(DECLARED) & left


def test_tables_list_shows_the_count_beside_the_study_and_the_tables_left_out():
    r = run_cli(["tables", "list", "--schema", "households"])
    assert r.returncode == 0, r.stderr
    assert "850 cells per block in 64 tables; the study compared with attacked 621" in r.stdout
    assert "H0180006" not in r.stdout  # tables, not cells
    for left in ("H10, H11, H11A-I", "P23, P24", "H19"):
        assert left in r.stdout


def test_2020_household_variables_read_as_sf1_are_sent_to_the_dhc(tmp_path):
    """A wide file in the 2020 DHC's spelling (H1_001N, P16_002N) read as SF1 2010's tables is
    refused, naming --release dhc-2020 (2020 ids are never guessed from 2010 labels: the DHC's
    are declared from its own layout, tests/test_dhc.py)."""
    from tabrecon.errors import InputError
    from tabrecon.tables.reader import read_unit_tables

    f = tmp_path / "dhc.csv"
    f.write_text("GEO_ID,H1_001N,P16_002N,state,county,tract,block\nx,3,2,99,001,000100,1000\n")
    with pytest.raises(InputError, match=r"dhc.csv: holds 2020 census variables \(H1_001N"):
        read_unit_tables(f, population("households"))
    with pytest.raises(InputError, match="with --release dhc-2020"):
        read_unit_tables(f, population("households"))


def _write_sf1_folder(long: pl.DataFrame, folder: Path, skip_segments: tuple[int, ...] = ()):
    """``long`` (geoid, cell, value; blocks and tracts) written as an SF1 2010 distribution: a
    geographic header and every segment file the cells need, each cell at the segment and field
    of the Bureau's layout (``tabrecon.tables.layout``), every other field 0."""
    from test_sf1 import _geo_record

    from tabrecon.tables.layout import layout

    folder.mkdir(parents=True)
    lay = layout()
    width = {
        int(s): int(w)
        for s, w in lay.group_by("segment").agg(pl.col("position").cast(pl.Int64).max()).iter_rows()
    }
    where = {
        c: (int(s), int(ps)) for c, s, ps in lay.select("cell", "segment", "position").iter_rows()
    }
    geoids = sorted(set(long["geoid"].to_list()), key=lambda g: (len(g), g))
    logrec = {g: i for i, g in enumerate(geoids, start=1)}
    recs = [
        _geo_record("101" if len(g) == 15 else "140", logrec[g], g[:2], g[2:5], g[5:11],
                    g[11:15] if len(g) == 15 else "    ")
        for g in geoids
    ]  # fmt: skip
    (folder / "zzgeo2010.sf1").write_bytes(("\n".join(recs) + "\n").encode("latin-1"))
    rows: dict[int, dict[str, list[str]]] = {}
    for g, cell, value in long.iter_rows():
        seg, ps = where[cell]
        row = rows.setdefault(seg, {}).setdefault(
            g, ["SF1ST", "ZZ", "000", f"{seg:02d}", f"{logrec[g]:07d}"] + ["0"] * width[seg]
        )
        row[4 + ps] = str(value)
    for seg, by_geo in rows.items():
        if seg in skip_segments:
            continue
        body = "\n".join(",".join(by_geo[g]) for g in sorted(by_geo, key=logrec.__getitem__))
        (folder / f"zz{seg:05d}2010.sf1").write_text(body + "\n")


@pytest.fixture(scope="module")
def both_halves():
    from tabrecon.records.households import synthesize_households
    from tabrecon.records.synth import SynthConfig
    from tabrecon.tables.persons import tabulate

    md, units = synthesize_households(SynthConfig(persons=800), seed=3)
    persons = tabulate(md, "published")
    return persons, tabulate_units(units)


def test_an_sf1_folder_with_persons_and_housing_reads_both_halves(both_halves, tmp_path):
    """One folder written in the reference layout: the person reader takes its 34 tables and
    P3-P5, the household reader its 64 tables, each equal to what was written."""
    from tabrecon.tables.reader import read_sf1, read_unit_tables

    persons, households = both_halves
    _write_sf1_folder(pl.concat([persons.to_frame(), households]), tmp_path / "zz")
    back = read_sf1(tmp_path / "zz")
    for level in ("block", "tract"):
        a, b = persons.grids[level], back.grids[level]
        for cell in a.cells:
            assert (a.col(cell) == b.col(cell)).all(), cell
    got = (
        read_unit_tables(tmp_path / "zz", population("households")).to_frame().sort("geoid", "cell")
    )
    want = households.sort("geoid", "cell").with_columns(pl.col("value").cast(pl.Int64))
    assert got.select("geoid", "cell", "value").equals(want.select("geoid", "cell", "value"))


def test_a_missing_housing_segment_is_named(both_halves, tmp_path):
    from tabrecon.errors import InputError
    from tabrecon.tables.reader import read_unit_tables

    persons, households = both_halves
    _write_sf1_folder(pl.concat([persons.to_frame(), households]), tmp_path / "zz", (44,))
    with pytest.warns(UserWarning, match=r"zz000442010\.sf1 missing: tables .*H18.* not read"):
        ts = read_unit_tables(tmp_path / "zz", population("households"))
    assert "H18" not in ts.tables_present() and "H1" in ts.tables_present()
    for f in (tmp_path / "zz").glob("zz0*2010.sf1"):  # no segment file left
        f.unlink()
    with pytest.raises(InputError, match=r"data segment file zz000\d\d2010.sf1 is missing"):
        read_unit_tables(tmp_path / "zz", population("households"))
