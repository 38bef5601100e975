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

from tabrecon.errors import TabreconError
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
