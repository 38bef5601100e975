"""The 2020 DHC as a table set: its layout inside the package, every declared table cell for cell
against the Bureau's layout, each table that continues an SF1 table compared with it line by
line (labels and cell definitions), the new iterations (race by origin, alone or in combination)
partitioning their base table, and ``tables list --release dhc-2020``."""

from __future__ import annotations

import gzip
import re
from importlib import resources
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.errors import InputError, TabreconError
from tabrecon.schema.registry import population
from tabrecon.tables.layout import DHC_2020, STUB_SEPARATOR, rows, stub_key
from tabrecon.tables.spec import weight_matrix
from tabrecon.vocab import Release

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "dhc_2020_layout.csv"
POPULATIONS = ("persons", "households", "group_quarters")


def _layout() -> pl.DataFrame:
    """The reference file when it is beside the project, else the package's copy (the test
    below pins the two equal)."""
    if REFERENCE.exists():
        return pl.read_csv(REFERENCE, infer_schema_length=0)
    return DHC_2020.frame()


def _dhc(name: str):
    return {t.name: t for t in population(name).release_tables(Release.DHC_2020)}


def test_the_vendored_dhc_layout_is_the_reference_byte_for_byte():
    if not REFERENCE.exists():
        pytest.skip(f"the reference file is not at {REFERENCE}")
    packed = resources.files("tabrecon").joinpath("data/dhc_2020_layout.csv.gz").read_bytes()
    assert gzip.decompress(packed) == REFERENCE.read_bytes()
    frame = DHC_2020.frame()
    assert frame.height == 9_067 and frame["table"].n_unique() == 249


@pytest.mark.parametrize("name", POPULATIONS)
def test_every_declared_table_is_the_layouts_cells_in_order(name):
    """Each declared DHC table has the layout's cell count, ids in line order (persons' race
    tallies, P0060001 and P0070001-style totals, read beside them: population.unmodelled),
    title, universe and level."""
    ref = _layout()
    unmodelled = set(population(name).unmodelled)
    for t in _dhc(name).values():
        mine = ref.filter(pl.col("table") == t.name)
        ids = [c for c in mine["cell"].to_list() if c not in unmodelled]
        assert [c.id for c in t.cells()] == ids, t.name
        assert t.universe_label == mine["universe"][0], t.name
        assert t.level == mine["lowest_geography"][0], t.name


ACCEPTED = {
    "persons": [
        "P1",
        *(f"P{i}" for i in range(3, 15)),
        *(f"P12{s}" for s in [*"ABCDEFGHIJKLMNOPQRSTUVWXYZ", *(f"A{c}" for c in "ABCDEFGH")]),
        *(f"P13{s}" for s in "ABCDEFGHI"),
        "PCT12",
        *(f"PCT12{s}" for s in "ABCDEFGHIJKLMNO"),
    ],
    "households": [
        *("H1", "H3", "H4", "H6", "H7", "H9", "H10", "H12", "H13", "P16", "P19"),
        *(f"H4{s}" for s in "ABCDEFGHIJKLMNOPQRSTUV"),
        *(f"H12{s}" for s in "ABCDEFGHI"),
        *(f"H13{s}" for s in "ABCDEFGHI"),
        *(f"P16{s}" for s in "ABCDEFGHIJKLMNOPQRSTUV"),
        *("H11", "H14", "P20", "P21"),  # where the attributes allow: they do
    ],
    "group_quarters": ["P18"],
}


def _expand(spec: str) -> set[str]:
    """``P16, P16A-V, P19-P21`` as table names."""
    out: set[str] = set()
    for part in (p.strip() for p in spec.split(",")):
        m = re.fullmatch(r"([A-Z]+)(\d+)-\1?(\d+)", part)
        n = re.fullmatch(r"([A-Z]+\d+)([A-Z])-([A-Z])", part)
        if m:
            out |= {f"{m[1]}{i}" for i in range(int(m[2]), int(m[3]) + 1)}
        elif n:
            out |= {f"{n[1]}{chr(c)}" for c in range(ord(n[2]), ord(n[3]) + 1)}
        else:
            out.add(part)
    return out


def test_the_accepted_tables_are_declared_and_every_other_block_table_has_a_reason():
    declared: set[str] = set()
    reasons: set[str] = set()
    for name in POPULATIONS:
        mine = set(_dhc(name))
        assert set(ACCEPTED[name]) <= mine, (name, sorted(set(ACCEPTED[name]) - mine))
        declared |= mine
        own: set[str] = set()
        for spec, why in population(name).left_out_of(Release.DHC_2020).items():
            assert why, spec
            own |= _expand(spec)
        assert not mine & own, (name, sorted(mine & own))  # declared, or left out: not both
        reasons |= own
    ref = _layout()
    block = set(ref.filter(pl.col("lowest_geography") == "block")["table"].to_list())
    assert not block - declared - reasons, sorted(block - declared - reasons)


#: stubs the DHC words otherwise than SF1 2010 for the same line (as the layouts key them)
REWORDED = {
    "married couple family": "husband-wife family",
    "married couple": "husband-wife family",
    "male householder, no spouse present": "male householder, no wife present",
    "female householder, no spouse present": "female householder, no husband present",
    "population of two or more races": "two or more races",
}


def _stubs(label: str) -> tuple[str, ...]:
    keys = (stub_key(x).rstrip("-").strip().casefold() for x in label.split(STUB_SEPARATOR))
    return tuple(REWORDED.get(k, k) for k in keys)


@pytest.mark.parametrize("name", POPULATIONS)
def test_a_table_continuing_sf1_is_compared_with_it_line_by_line(name):
    """Never assumed equal: every DHC table the crosswalk says continues a declared SF1 table
    has the same number of lines, the same labels line by line (case and the 2020 rewordings
    above aside; the one erratum of the DHC layout named) and the same cell definitions (its
    count cells' weight matrix equals the SF1 table's)."""
    pop = population(name)
    sf1 = {t.name: t for t in pop.tables()}
    compared = 0
    for t in _dhc(name).values():
        base = DHC_2020.continues(t.name)
        if base not in sf1:
            continue
        a, b = rows([t.name], DHC_2020), rows([base])
        assert a.height == b.height, t.name
        for cell, x, y in zip(a["cell"], a["label"], b["label"], strict=True):
            if cell == "P012G047":  # the erratum: the layout repeats line 46's label
                assert x == "Total: !! Female: !! 70 to 74 years" and y.endswith("75 to 79 years")
                continue
            assert _stubs(x) == _stubs(y), (t.name, cell, x, y)
        if t.statistic is None:
            wa, wb = weight_matrix(pop.schema, [t]), weight_matrix(pop.schema, [sf1[base]])
            assert wa.shape == wb.shape and (wa != wb).nnz == 0, t.name
        else:
            assert t.statistic == sf1[base].statistic
        compared += 1
    assert compared >= {"persons": 40, "households": 35, "group_quarters": 1}[name]


def _total(schema, table) -> np.ndarray:
    """Which feasible types a table's first line (its total) counts."""
    return weight_matrix(schema, [table])[0].toarray().ravel()


def test_race_by_origin_iterations_partition_their_base_table():
    """The iterations A-G (race alone, two or more) and J-V (the same by origin) each partition
    the base table's total: every type counted once; W-AH (alone or in combination) count a
    multiracial type once per race it names."""
    for name, base, parts in (
        ("households", "H4", ("ABCDEFG", "IJKLMNOPQRSTUV")),
        ("households", "P16", ("ABCDEFG", "IJKLMNOPQRSTUV")),
        ("persons", "P12", ("ABCDEFG", "IJKLMNOPQRSTUV")),
    ):
        tables = _dhc(name)
        schema = population(name).schema
        whole = _total(schema, tables[base])
        for letters in parts:
            assert np.array_equal(
                sum(_total(schema, tables[f"{base}{c}"]) for c in letters), whole
            ), (base, letters)
    tables = _dhc("persons")
    schema = population("persons").schema
    combos = sum(_total(schema, tables[f"P12{c}"]) for c in ["W", "X", "Y", "Z", "AA", "AB"])
    races = schema.decode(schema.feasible_types())
    n_races = np.array([lab.count(";") + 1 for lab in _race_labels(schema)])[races["race"] - 1]
    not_hispanic = races["hispanic"] == 0
    assert np.array_equal(combos, np.where(not_hispanic, n_races, 0))


def _race_labels(schema) -> list[str]:
    return [lab for _, lab in schema.attribute("race").categories]


def test_the_dhc_layouts_erratum_is_declared_not_edited():
    """P012G047 is labelled "70 to 74 years" in the DHC layout (line 46's label again); the
    file is kept as the Bureau's workbook was transcribed and the declaration uses SF1's line."""
    assert (
        rows(["P12G"], DHC_2020)
        .filter(pl.col("cell") == "P012G047")["label"][0]
        .endswith("70 to 74 years")
    )
    p12g = _dhc("persons")["P12G"]
    assert p12g.cells()[46].id == "P012G047"
    assert p12g.cells()[46].predicate["age"] == tuple(range(75, 80))


def test_tables_list_shows_each_release_and_refuses_what_is_not_declared(tmp_path):
    for name, cells in (("persons", 2_123), ("households", 854), ("group_quarters", 63)):
        r = run_cli(["tables", "list", "--release", "dhc-2020", "--schema", name], tmp_path)
        assert r.returncode == 0, r.stderr
        want = sum(len(t.cells()) for t in _dhc(name).values() if t.level == "block")
        assert want == cells and f"{cells:,} cells per block" in r.stdout
        assert "2020 DHC tables" in r.stdout
    r = run_cli(["tables", "list", "--release", "dhc-2030"], tmp_path)
    assert r.returncode == 2 and "--release must be one of" in r.stderr
    school = Path(__file__).resolve().parents[1] / "examples" / "declarations" / "school.toml"
    r = run_cli(["tables", "list", "--release", "dhc-2020", "--schema", str(school)], tmp_path)
    assert r.returncode == 2 and "in no census release" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(TabreconError, match="only sf1-2010"):
        population("persons_binned").release_tables(Release.DHC_2020)


# -- a DHC release end to end ---------------------------------------------------------------------
def test_in_release_is_a_value_resolved_the_same_in_any_process():
    """population(...).in_release(...) marks the schema and the tables; its key gives it back
    (what a table set carries to a worker); a release without tables is refused by name."""
    dhc = population("households").in_release(Release.DHC_2020)
    assert dhc.schema.release is Release.DHC_2020 and dhc.key == "households@dhc-2020"
    assert population(dhc.key) == dhc and population(dhc.key).schema == dhc.schema
    assert dhc != population("households") and dhc.schema != population("households").schema
    assert all(t.schema == dhc.schema for t in dhc.tables())
    assert population("group_quarters").in_release("dhc-2020").size_cell == "P0180001"
    with pytest.raises(TabreconError, match="unknown release 'dhc-2030'"):
        population("households@dhc-2030")


def _round_trip(
    name: str, persons: int, seed: int = 5
) -> tuple[pl.DataFrame, pl.DataFrame, object]:
    from tabrecon.attacks.release import reconstruct
    from tabrecon.records.synth import SynthConfig
    from tabrecon.tables.spec import tabulate

    pop = population(name).in_release(Release.DHC_2020)
    truth = pop.synthesize(SynthConfig(persons=persons), seed)
    published = tabulate(truth)
    assert published.population is pop
    run = reconstruct(published, population=pop)
    assert not run.failed, run.failed
    back = tabulate(run.release.units)
    return published.to_frame(), back.to_frame(), pop


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "persons", "seed"), [("households", 500, 3), ("group_quarters", 20_000, 5)]
)
def test_tabulate_reconstruct_gives_back_the_dhc_tables(name, persons, seed):
    """tabulate(reconstruct(tables)) == tables on exact DHC tables of a synthetic county, every
    cell of every declared DHC table."""
    want, got, pop = _round_trip(name, persons, seed)  # households: 263 units, 16 blocks
    assert want.height == got.height > 0
    assert want.sort("geoid", "cell").equals(got.sort("geoid", "cell"))
    assert set(want["cell"]) == {c.id for t in pop.tables() for c in t.cells()}


@pytest.mark.slow
def test_tabulate_reconstruct_gives_back_the_dhc_person_tables():
    """Persons at block+tract (P12A-AH and PCT12 among them): every count equal; a median age
    differs at most by its last decimal, where the published value is a tie the reconstruction
    may meet from either side (tabrecon.tables.measures: a tie is allowed both ways)."""
    want, got, pop = _round_trip("persons", 1_500)
    both = want.join(got, on=["geoid", "cell"], suffix="_back", how="full", coalesce=True)
    assert both["value"].null_count() == 0 and both["value_back"].null_count() == 0
    medians = {c.id for t in pop.tables() if t.statistic is not None for c in t.cells()}
    off = both.filter(pl.col("value") != pl.col("value_back"))
    assert off.filter(~pl.col("cell").is_in(list(medians))).height == 0, off.head()
    assert (off["value"] - off["value_back"]).abs().max() in (None, 1)


def test_a_file_of_one_release_read_as_the_other_is_named_as_such(tmp_path):
    """An SF1 2010 file given as the DHC, and the reverse, refused before any work, naming the
    release the file's cells belong to and the option that reads it."""
    from tabrecon.records.synth import SynthConfig
    from tabrecon.schema.spec import write_units

    units = population("households").synthesize(SynthConfig(persons=300), 2)
    write_units(units, tmp_path / "hh.csv")
    for release in ("sf1-2010", "dhc-2020"):
        args = ["tabulate", "hh.csv", "--schema", "households", "--release", release]
        r = run_cli([*args, "-o", f"{release}.csv"], tmp_path)
        assert r.returncode == 0, r.stderr
    for given, said in (("sf1-2010", "dhc-2020"), ("dhc-2020", "sf1-2010")):
        args = ["reconstruct", f"{given}.csv", "--schema", "households", "--release", said]
        r = run_cli([*args, "-o", "x.parquet"], tmp_path)
        assert r.returncode == 2, r.stderr
        assert f"give --release {given}" in r.stderr and "Traceback" not in r.stderr
        assert not (tmp_path / "x.parquet").exists()


@pytest.mark.slow
def test_a_dhc_release_is_audited_as_such_and_never_resumed_as_sf1(tmp_path):
    """audit --release dhc-2020 of a county's DHC tables: the report names the 2020 DHC tables
    and says they describe the protected data; summary.json records the release; its work is
    never resumed under the other release (nor an SF1 run's under the DHC)."""
    import json

    from tabrecon.records.synth import SynthConfig
    from tabrecon.schema.spec import write_units

    units = population("households").synthesize(SynthConfig(persons=500), 3)  # 16 blocks
    write_units(units, tmp_path / "hh.csv")
    fast = "[households]\nk_values = [1, 2]\nk_solutions = 5\nblocks = 5\n"
    (tmp_path / "fast.toml").write_text(fast)
    args = ["tabulate", "hh.csv", "--schema", "households", "--release", "dhc-2020"]
    assert run_cli([*args, "-o", "dhc.csv"], tmp_path).returncode == 0
    audit = ["audit", "--tables", "dhc.csv", "--schema", "households", "-c", "fast.toml"]
    r = run_cli([*audit, "--release", "dhc-2020", "-o", "a", "--quiet"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["release"] == "dhc-2020"
    assert summary["households"]["tables"][:3] == ["H1", "H3", "H4"]
    doc = (tmp_path / "a" / "report.html").read_text()
    assert "with the 2020 DHC tables H1, H3, H4" in doc and "output of TopDown" in doc
    assert "they describe the protected data" in doc.split('id="in-brief"')[1].split("</p>")[0]
    assert "not measured in this report" in doc
    # a calibration (as tabrecon calibrate writes it) brings the claims' truth rate to the
    # first paragraph and to results/, and does not make the audit's work another run's
    (tmp_path / "cal.csv").write_text(
        "side,k,block_size,verified,true,singletons,true_singletons\n"
        "2020 DHC,1,all,200,19,150,12\n2020 DHC,2,all,300,32,250,20\n"
        "2010 SF1,1,all,90,90,80,80\n"
    )
    with_cal = [*audit, "--release", "dhc-2020", "-o", "a", "--quiet", "--resume"]
    again = run_cli([*with_cal, "--calibration", "cal.csv"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    first = (tmp_path / "a" / "report.html").read_text().split('id="in-brief"')[1].split("</p>")[0]
    assert "10.2% of the 500 claims such tables verified were true" in first, first
    assert "1 column: 9.5%; 2 columns: 10.7%" in first, first
    rate = pl.read_csv(tmp_path / "a" / "results" / "claims_truth_rate.csv")
    assert rate["true_pct"].to_list() == [9.5, 10.7]
    tabulated = ["tabulate", "hh.csv", "--schema", "households", "-o", "sf1.csv"]
    assert run_cli(tabulated, tmp_path).returncode == 0
    other = ["audit", "--tables", "sf1.csv", "--schema", "households", "-c", "fast.toml"]
    mixed = run_cli([*other, "-o", "a", "--quiet", "--resume"], tmp_path)
    assert mixed.returncode == 2 and "holds results of another run" in mixed.stderr
    # a calibration of the DHC's claims is refused for SF1's tables, and a file that is not
    # one is named, before any work
    sf1_cal = run_cli([*other, "-o", "s", "--quiet", "--calibration", "cal.csv"], tmp_path)
    assert sf1_cal.returncode == 2 and "audit a DHC release" in sf1_cal.stderr, sf1_cal.stderr
    bad = run_cli([*with_cal[:-1], "--calibration", "hh.csv"], tmp_path)
    assert bad.returncode == 2 and "hh.csv" in bad.stderr and "no column" in bad.stderr
    assert "Traceback" not in sf1_cal.stderr + bad.stderr and not (tmp_path / "s").exists()


@pytest.mark.slow
def test_the_person_audit_of_the_dhc_runs_every_person_stage_but_the_defenses(tmp_path):
    """Person records audited as published in the DHC: tabulated into every declared DHC table
    (not SF1's 34), reconstructed and certified at both levels, verified claims, agreement and
    reidentification; the defenses (which re-tabulate SF1 2010's tables) are refused when
    asked for and left out otherwise."""
    import json

    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import write_microdata

    write_microdata(synthesize(SynthConfig(persons=400), seed=1), tmp_path / "p.csv")
    r = run_cli(["tabulate", "p.csv", "--release", "dhc-2020", "-o", "dhc.csv"], tmp_path)
    assert r.returncode == 0 and "x 2,127 cells" in r.stdout.replace("\n", " "), r.stdout
    audit = ["audit", "p.csv", "--release", "dhc-2020", "--quiet"]
    r = run_cli([*audit, "--defenses", "swap-lo", "-o", "x"], tmp_path)
    assert r.returncode == 2 and "not persons of 2020 DHC" in r.stderr
    assert not (tmp_path / "x").exists()
    r = run_cli([*audit, "-o", "a"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["release"] == "dhc-2020" and "P12AH" in s["tables_present"]
    assert {"agreement_block", "agreement_block+tract"} <= set(s) and "claims" in s
    assert "defenses" not in s
    doc = (tmp_path / "a" / "report.html").read_text()
    assert "2020 DHC person tables" in doc
    brief = doc.split('id="in-brief"')[1].split("</p>")[0]
    assert "output of the Census Bureau's differential privacy" in brief


def test_a_dhc_file_with_a_line_its_table_lacks_or_a_tract_table_at_a_block_is_named(tmp_path):
    """A DHC table given with a line the layout does not have (P12A_050N: P12A has 49) is
    refused, not passed over; a tract-only table's cell given for a block, named with its line."""
    from tabrecon.tables.reader import read_unit_tables

    dhc = population("persons").in_release(Release.DHC_2020)
    api = tmp_path / "api.json"
    api.write_text(
        '[["P1_001N","P12A_001N","P12A_050N","state","county","tract","block"],'
        '["3","3","1","99","001","000100","1000"]]'
    )
    with pytest.raises(InputError, match="unknown variable 'P12A_050N': no variable of the 2020"):
        read_unit_tables(api, dhc)
    long = tmp_path / "long.csv"
    long.write_text("geoid,cell,value\n990010001001000,P0010001,3\n990010001001000,PCT0120001,3\n")
    with pytest.raises(InputError, match=r"long.csv, line 3, column 'geoid'.*a tract table"):
        read_unit_tables(long, dhc)
