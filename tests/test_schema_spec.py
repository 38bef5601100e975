"""Schemas as data: the person schema's declaration encodes as the person pipeline does; the
housing-unit schema reads codes or labels and refuses inconsistent units naming file, line and
column."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.errors import InputError
from tabrecon.schema import N_TYPES, PERSONS, decode_types, encode_types
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.registry import names, population
from tabrecon.schema.spec import read_units, write_units

GEO = "010010201001000"


def test_person_declaration_encodes_every_type_as_the_pipeline_does():
    t = np.arange(N_TYPES)
    d = PERSONS.decode(t)
    assert PERSONS.n_types == N_TYPES
    assert (encode_types(d["sex"], d["age"], d["race"], d["hispanic"]) == t).all()
    sex, age, race, hisp = decode_types(t)
    assert (PERSONS.encode({"sex": sex, "age": age, "race": race, "hispanic": hisp}) == t).all()
    assert PERSONS.attribute("race").labels[2] == "American Indian and Alaska Native"
    assert set(names()) == {"persons", "households", "group_quarters"}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, HOUSING_UNITS.n_types - 1), min_size=1, max_size=50))
def test_housing_unit_types_round_trip(types):
    t = np.array(types)
    assert (HOUSING_UNITS.encode(HOUSING_UNITS.decode(t)) == t).all()


#: Consistent units: a married couple with a child, a woman of 70 living alone, a vacant unit
#: for rent, a cohabiting couple with no relatives (a nonfamily household), a 17-year-old
#: householder living alone.
GOOD = [
    dict(ten=1, vac=0, size=3, hht=1, hht2=1, u18=1, o65=0, hisp=1, age=3, race=1),
    dict(ten=3, vac=0, size=1, hht=6, hht2=5, u18=0, o65=1, hisp=2, age=7, race=2),
    dict(ten=0, vac=1, size=0, hht=0, hht2=0, u18=0, o65=0, hisp=0, age=0, race=0),
    dict(ten=3, vac=0, size=2, hht=5, hht2=4, u18=0, o65=0, hisp=1, age=2, race=7),
    dict(ten=3, vac=0, size=1, hht=4, hht2=9, u18=1, o65=0, hisp=1, age=1, race=4),
]
SHORT = dict(
    ten="tenure",
    vac="vacancy_status",
    size="household_size",
    hht="household_type",
    hht2="detailed_household_type",
    u18="under_18",
    o65="over_65",
    hisp="hispanic_householder",
    age="householder_age",
    race="householder_race",
)


def _frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(
        {"block_geoid": [GEO] * len(rows), **{SHORT[k]: [str(r[k]) for r in rows] for k in SHORT}}
    )


def test_consistent_units_read_and_round_trip_as_codes_and_labels(tmp_path):
    src = tmp_path / "units.csv"
    _frame(GOOD).with_columns(pl.lit("x").alias("note")).write_csv(src)
    units = read_units(src, HOUSING_UNITS)
    assert len(units) == len(GOOD)
    assert units.codes["detailed_household_type"].tolist() == [r["hht2"] for r in GOOD]
    assert units.extra is not None and units.extra.columns == ["note"]
    for labels, name in ((False, "codes.parquet"), (True, "labels.csv.gz")):
        write_units(units, tmp_path / name, labels=labels)
        again = read_units(tmp_path / name, HOUSING_UNITS)
        assert (again.types == units.types).all()
    assert "renter occupied" in pl.read_csv(tmp_path / "labels.csv.gz")["tenure"].to_list()


def _bad(**change) -> list[dict]:
    return [*GOOD, {**GOOD[0], **change}]


@pytest.mark.parametrize(
    ("rows", "column", "fragment"),
    [
        (_bad(ten=9), "tenure", "not a category of tenure"),
        (_bad(ten="rented-ish"), "tenure", "not a category of tenure"),
        (
            _bad(vac=2, ten=0, hht=0, hht2=0, u18=0, hisp=0, age=0, race=0),
            "household_size",
            "a vacant unit has no household size",
        ),
        (
            _bad(size=1, hht=3, hht2=6),
            "detailed_household_type",
            "a 1-person household cannot have children of the householder",
        ),
        (_bad(hht2=5), "detailed_household_type", "does not agree with the household type"),
        (_bad(size=0), "household_size", "an occupied unit needs its household size"),
        (_bad(hht=2, hht2=11, size=1), "household_type", "lives alone exactly when"),
        (_bad(u18=0), "under_18", "has people under 18"),
        (_bad(age=8), "over_65", "aged 65 or over is a person aged 65 or over"),
    ],
)
def test_inconsistent_units_are_refused_naming_file_line_and_column(
    tmp_path, rows, column, fragment
):
    src = tmp_path / "units.csv"
    _frame(rows).write_csv(src)
    with pytest.raises(InputError) as e:
        read_units(src, HOUSING_UNITS)
    msg = str(e.value)
    assert str(src) in msg and f"line {len(rows) + 1}" in msg and f"column '{column}'" in msg
    assert fragment in msg and e.value.column == column


def test_the_count_of_rows_sharing_a_problem_is_given(tmp_path):
    src = tmp_path / "units.csv"
    rows = [*GOOD, {**GOOD[0], "hht2": 5}, {**GOOD[0], "hht2": 9}]
    _frame(rows).write_csv(src)
    with pytest.raises(InputError, match=r"line 7.*\(and 1 more such row\)"):
        read_units(src, HOUSING_UNITS)


def test_missing_columns_and_bad_blocks_are_named(tmp_path):
    src = tmp_path / "units.csv"
    _frame(GOOD).drop("householder_race").write_csv(src)
    with pytest.raises(InputError, match=r"column\(s\) householder_race of a housing"):
        read_units(src, HOUSING_UNITS)
    _frame(GOOD).with_columns(pl.lit("0100102010010").alias("block_geoid")).write_csv(src)
    with pytest.raises(InputError, match=r"line 2, column 'block_geoid': block_geoid must be 15"):
        read_units(src, HOUSING_UNITS)
    with pytest.raises(InputError, match="file not found"):
        read_units(tmp_path / "nope.csv", HOUSING_UNITS)


def test_every_rule_can_fire_and_consistent_units_break_none():
    """No rule is dead (each refuses some of 200,000 random units) and the consistent units
    above satisfy all of them."""
    rng = np.random.default_rng(0)
    t = rng.integers(0, HOUSING_UNITS.n_types, 200_000)
    random_units = pl.DataFrame(HOUSING_UNITS.decode(t))
    good = _frame(GOOD).drop("block_geoid").cast(pl.Int64)
    for rule in HOUSING_UNITS.rules:
        assert random_units.select(rule.broken.any()).item(), rule.name
        assert not good.select(rule.broken.any()).item(), rule.name


def test_feasible_types_are_exactly_those_no_rule_refuses():
    """The support count models will be built over: every consistent unit's type is in it, and
    every type in it passes every rule when decoded."""
    assert (PERSONS.feasible_types() == np.arange(N_TYPES)).all()
    feas = HOUSING_UNITS.feasible_types(batch=3_000_000)
    assert feas.size == 87_787 and (np.diff(feas) > 0).all()
    units = pl.DataFrame(HOUSING_UNITS.decode(feas))
    for rule in HOUSING_UNITS.rules:
        assert not units.select(rule.broken.any()).item(), rule.name
    good = _frame(GOOD).drop("block_geoid").cast(pl.Int64)
    t = HOUSING_UNITS.encode({c: good[c].to_numpy() for c in good.columns})
    assert np.isin(t, feas).all()


def test_person_tabulation_counts_each_cell_as_its_sf1_definition_says():
    """Tabulation, written once for every population (tabrecon.tables.spec.tabulate), gives each
    SF1 person cell of every block and tract -- P3-P5 and the race tallies included -- what the
    cell's own definition counts record by record (tabrecon.tables.persons.Cell: sex, age range,
    race, origin; a tally counts a person once per race), and the median ages where asked."""
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import person_units
    from tabrecon.tables.persons import get_cell, tabulate
    from tabrecon.tables.spec import tabulate as tabulate_records

    md = synthesize(SynthConfig(persons=1500), seed=5)
    ts = tabulate(md, "published")  # block and tract tables, P3-P5 too
    assert ts.levels() == ["block", "tract"] and ts["block"].geoids.size == md.geoids.size
    types = md.types
    for level, g in ts.grids.items():
        geoids, where = md.geo_at(level)
        assert (g.geoids == geoids).all()
        for j, cid in enumerate(g.cells.tolist()):
            w = get_cell(cid).type_weights()[types]
            want = np.bincount(where, weights=w, minlength=geoids.size).astype(np.int64)
            assert (g.values[:, j] == want).all(), cid
    cells = set(ts["block"].cells.tolist())
    assert {"P0060001", "P0070001", "P0070002", "P0070009"} <= cells
    # over the schema's declaration the median ages are tabulated from the same histogram
    full = tabulate_records(person_units(md))
    medians = [c for c in full["block"].cells.tolist() if c.startswith("P013")]
    assert len(medians) == 30 and cells <= set(full["block"].cells.tolist())
    only = tabulate_records(person_units(md), ["P13", "P13A"])  # tables of medians alone
    got = only["block"]
    assert set(got.cells.tolist()) < set(medians)
    for c in got.cells.tolist():
        assert (got.col(c) == full["block"].col(c)).all(), c


def test_reconstruction_and_claims_over_any_schema_run_on_persons():
    """Reconstruction and Generate-then-Verify written over a schema, given the person schema
    and its tables: the reconstruction tabulates back to the tables, every verified claim is
    true of the persons."""
    from tabrecon.attacks.claims.block import generate_then_verify
    from tabrecon.engine.reconstruct import reconstruct_units
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import person_units
    from tabrecon.tables.spec import tabulate_units

    units = person_units(synthesize(SynthConfig(persons=1500), seed=3))
    geo, n = np.unique(units.block_geoid, return_counts=True)
    blocks = [g for g, c in zip(geo.tolist(), n.tolist(), strict=True) if 3 <= c <= 25][:3]
    long = tabulate_units(units).filter(pl.col("geoid").is_in(blocks))
    rec = reconstruct_units(long, population("persons"))
    back = tabulate_units(rec.units).filter(pl.col("geoid").is_in(blocks))
    assert back.sort("geoid", "cell").equals(long.sort("geoid", "cell"))
    res = generate_then_verify(
        long, pop=population("persons"), blocks=blocks, truth=units, k_solutions=5, k_values=(2, 3)
    )
    assert res.claims.height > 0 and (res.claims["true_matches"] == res.claims["m"]).all()


def test_a_third_schema_is_a_declaration():
    """A schema with a rule and its tables, declared here and nowhere in the package, runs
    through tabulation, reconstruction and Generate-then-Verify; the reconstruction tabulates
    back to the tables and every verified claim is true; a table naming an attribute or a
    category the schema lacks is refused."""
    from tabrecon.attacks.claims.block import generate_then_verify
    from tabrecon.engine.reconstruct import reconstruct_units
    from tabrecon.errors import TabreconError
    from tabrecon.schema.spec import Attribute, EditRule, Schema, Units
    from tabrecon.tables.spec import UnitTable, declare_tables, tabulate_units

    kind = Attribute("kind", ((1, "car"), (2, "bike"), (3, "van")))
    seats = Attribute("seats", tuple((n, str(n)) for n in range(1, 9)))
    colour = Attribute("colour", ((0, "red"), (1, "blue"), (2, "grey")))
    bikes = EditRule(
        "bike seats",
        "a bike has one or two seats",
        "seats",
        (pl.col("kind") == 2) & (pl.col("seats") > 2),
    )
    fleet = Schema("fleet", "vehicle", (kind, seats, colour), (bikes,))
    lines = tuple(
        (a.labels[i], {a.name: (c,)})
        for a in (kind, colour)
        for i, c in enumerate(a.codes.tolist())
    )
    by_seats = tuple((f"{n} seats", {"seats": (n,)}) for n in range(1, 9))
    big_red = (("Red vans", {"kind": (3,), "colour": (0,)}),)
    vehicles = declare_tables(
        fleet,
        [
            UnitTable("V1", 1, "Vehicles by kind, by colour", {}, lines, prefix="V", schema=fleet),
            UnitTable("V2", 2, "Vehicles by seats", {}, by_seats, prefix="V", schema=fleet),
            UnitTable("V3", 3, "Red vans", {}, big_red, prefix="V", schema=fleet),
        ],
    )
    rng = np.random.default_rng(4)
    n = 60
    k = rng.choice([1, 2, 3], size=n)
    s = np.where(k == 2, rng.integers(1, 3, size=n), rng.integers(1, 9, size=n))
    units = Units(
        fleet,
        np.repeat([f"9900100010{b:02d}000" for b in range(20)], n // 20),  # 20 blocks of 3
        {"kind": k, "seats": s, "colour": rng.integers(0, 3, size=n)},
    )
    long = tabulate_units(units)
    assert long["cell"].n_unique() == 6 + 8 + 1
    rec = reconstruct_units(long, vehicles)
    assert tabulate_units(rec.units).sort("geoid", "cell").equals(long.sort("geoid", "cell"))
    assert (rec.units.codes["seats"][rec.units.codes["kind"] == 2] <= 2).all()  # the rule held
    res = generate_then_verify(long, pop=vehicles, truth=units, k_solutions=4, k_values=(2, 3))
    assert res.claims.height and (res.claims["true_matches"] == res.claims["m"]).all()
    wrong = UnitTable("W", 1, "", {}, (("x", {"wheels": (4,)}),), prefix="W", schema=fleet)
    with pytest.raises(TabreconError, match="'wheels' is not an attribute of fleet"):
        declare_tables(fleet, [wrong])
    with pytest.raises(TabreconError, match="colour has no category"):
        declare_tables(
            fleet, [UnitTable("W", 1, "", {}, (("x", {"colour": (7,)}),), prefix="W", schema=fleet)]
        )


@pytest.mark.realdata
def test_generic_uniqueness_proof_agrees_with_person_certification_on_real_blocks(real_md):
    """Certification's question asked of the code written over any schema: on three tracts of
    the real sample (219 blocks), the binned person schema's count model proves a block's
    reconstruction unique exactly where person certification does."""
    from tabrecon import certify, reconstruct
    from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
    from tabrecon.schema import AGEBIN_OF_AGE, person_units
    from tabrecon.tables.persons import tabulate
    from tabrecon.tables.spec import tabulate_units

    tracts = sorted({g[:11] for g in real_md.geoids.tolist()})[:3]
    md = real_md.take(np.isin(np.array([g[:11] for g in real_md.block_geoid.tolist()]), tracts))
    ts = tabulate(md, "block")
    cert = certify(ts, reconstruct(ts, "block").records, "block").blocks
    person = dict(zip(cert["block_geoid"].to_list(), cert["status"].to_list(), strict=True))
    rec = reconstruct_units(
        tabulate_units(person_units(md, binned=True)), population("persons_binned")
    )
    generic = dict(zip(rec.blocks["geoid"].to_list(), rec.blocks["status"].to_list(), strict=True))
    assert set(generic) == set(person) and len(person) == 219
    assert {g for g, s in generic.items() if s == "unique"} == {
        g for g, s in person.items() if s == "unique"
    }
    assert "varies" in generic.values()  # both verdicts occur
    # with the tract tables (PCT12, PCT12A-O by single year) over the person schema, the blocks
    # of each tract solved jointly: every block unique at agebin38, as the Bureau proved and as
    # person certification at block+tract finds
    tsb = tabulate(md)
    cert_bt = certify(tsb, reconstruct(tsb, "block+tract").records, "block+tract").blocks
    # (the median ages P13, P13A-I are modelled at block level only: left out by default here)
    long = tabulate_units(person_units(md))
    bt = reconstruct_units(
        long,
        population("persons"),
        ReconstructOptions(level="block+tract", unique_on={"age": AGEBIN_OF_AGE}),
    )
    assert set(cert_bt["status"].to_list()) == set(bt.blocks["status"].to_list()) == {"unique"}
    assert bt.blocks.height == 219
    counts = ~pl.col("cell").str.starts_with("P013")
    assert (
        tabulate_units(bt.units)
        .filter(counts)
        .sort("geoid", "cell")
        .equals(long.filter(counts).sort("geoid", "cell"))
    )
