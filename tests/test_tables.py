"""Table specs against the SF1 oracle, tabulation, table files, and consistency identities."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabrecon.errors import InputError
from tabrecon.schema import RACES, from_arrays
from tabrecon.schema.registry import population
from tabrecon.tables.consistency import check_consistency
from tabrecon.tables.persons import all_cells, tabulate
from tabrecon.tables.published import read_tables, write_tables
from tabrecon.tables.tableset import MISSING, Grid, TableSet


def _oracle(oracle_path, extra: bool = False):
    """The reference cells of the 34 tables; with ``extra`` also P3, P4, P5 (the file beside it)."""
    rows = []
    for p in [oracle_path] + (
        [oracle_path.with_name("sf1_person_cells_p3_p5.csv")] if extra else []
    ):
        with open(p) as fh:
            rows += list(csv.DictReader(fh))
    return rows


def test_specs_equal_oracle(oracle_path):
    rows = {r["cell"]: r for r in _oracle(oracle_path, extra=True)}
    cells = {c.id: c for c in all_cells()}
    assert set(rows) == set(cells) and len(cells) == 4188 + 28
    for cid, c in cells.items():
        r = rows[cid]
        mine = {
            "table": c.table,
            "level": c.level,
            "sex": c.sex,
            "age_min": str(c.age_min),
            "age_max": str(c.age_max),
            "race": c.race,
            "hispanic": c.hispanic,
            "measure": c.measure,
            "description": c.description(),
        }
        assert mine == {k: r[k] for k in mine}, cid


def test_cell_counts():
    cells = all_cells()
    assert sum(c.level == "block" for c in cells) == 844 + 28  # the 34 tables' and P3-P5's
    assert sum(c.level == "tract" for c in cells) == 3344


def _oracle_value_matrix(md, rows, level):
    """Tabulate straight from the oracle's text definitions, one cell at a time (independent of
    specs)."""
    n = 15 if level == "block" else 11
    geo = np.array([g[:n] for g in md.block_geoid])
    ug, gi = np.unique(geo, return_inverse=True)
    flags = md.flags()
    count = flags.sum(axis=1)
    out = {}
    for r in rows:
        if r["level"] != level:
            continue
        m = (md.age >= int(r["age_min"])) & (md.age <= int(r["age_max"]))
        if r["sex"] != "any":
            m &= md.sex == (0 if r["sex"] == "male" else 1)
        if r["hispanic"] != "any":
            m &= md.hisp == int(r["hispanic"])
        race = r["race"]
        if race.startswith("includes:"):
            m &= flags[:, RACES.index(race.split(":")[1])] == 1
        elif race.startswith("exactly:"):
            want = np.zeros(6, dtype=np.int8)
            for x in race.split(":")[1].split("+"):
                want[RACES.index(x)] = 1
            m &= (flags == want).all(axis=1)
        elif race.startswith("count>="):
            m &= count >= int(race[7:])
        elif race.startswith("count:"):
            m &= count == int(race[6:])
        w = count if r["measure"] == "race_tally" else np.ones(len(md), dtype=np.int64)
        out[r["cell"]] = np.bincount(gi, weights=w * m, minlength=len(ug)).astype(np.int64)
    return ug, out


@pytest.mark.realdata
def test_real_sample_tabulation_equals_oracle(real_md, real_tables, oracle_path):
    rows = _oracle(oracle_path)
    for level, ngeo, ncell in (("block", 8530, 844), ("tract", 28, 3344)):
        g = real_tables[level]
        assert g.values.shape == (ngeo, ncell)
        ug, want = _oracle_value_matrix(real_md, rows, level)
        assert (ug == g.geoids).all()
        for j, c in enumerate(g.cells):
            assert (g.values[:, j] == want[c]).all(), c


@pytest.mark.realdata
def test_real_sample_consistent_and_corruption_caught(real_tables):
    rep = check_consistency(real_tables)
    assert rep.ok and rep.checked > 1_000_000
    g = real_tables["block"]
    v = g.values.copy()
    j = int(np.flatnonzero(g.cells == "P012A010")[0])
    i = int(np.argmax(v[:, j]))
    v[i, j] += 1
    bad = TableSet(
        {"block": Grid("block", g.geoids, g.cells, v), "tract": real_tables["tract"]},
        population=population("persons"),
    )
    rep = check_consistency(bad)
    assert not rep.ok
    text = "\n".join(str(x) for x in rep.violations)
    assert "P012A010" in text and str(g.geoids[i]) in text


def test_roundtrip_files(tmp_path, small_md):
    ts = tabulate(small_md)
    for ext in ("parquet", "csv", "csv.gz"):
        p = tmp_path / f"t.{ext}"
        write_tables(ts, p)
        back = read_tables(p)
        for lvl in ts.levels():
            assert (back[lvl].values == ts[lvl].values).all()
            assert (back[lvl].cells == ts[lvl].cells).all()


@pytest.mark.parametrize(
    "row,fragment",
    [
        ("010730051031000,P9999999,3", "is not a cell of SF1 2010"),
        ("010730051031000,P0010001,-2", "negative count"),
        ("010730051031000,P0010001,2.5", "fractional count"),
        ("010730051031000,P0010001,abc", "is not a count"),
        ("0107300510310,P0010001,2", "is not the geoid of a block"),
        ("01073005103,PCT0120001,2\n01073005103100,P0010001,2", "is not the geoid of a block"),
        ("010730051031000,PCT0120001,2", "is finer than its cell's table"),
        (
            "010730051031000,P0010001,2\n010730051031000,P0010001,3",
            "'P0010001' appears twice for geoid '010730051031000'",
        ),
    ],
)
def test_bad_table_files(tmp_path, row, fragment):
    p = tmp_path / "bad.csv"
    p.write_text("geoid,cell,value\n" + row + "\n")
    with pytest.raises(InputError) as ei:
        read_tables(p)
    assert fragment in str(ei.value) and "bad.csv" in str(ei.value) and "line" in str(ei.value)


def test_missing_cells_are_skipped_not_failed(small_md):
    from tabrecon.tables.persons import drop_cells

    ts = drop_cells(tabulate(small_md), ["P0120003", "PCT0120050"])
    rep = check_consistency(ts)
    assert rep.ok and rep.skipped > 0
    assert (ts["block"].col("P0120003") == MISSING).all()


def test_coarser_levels_come_from_the_same_specs(small_md):
    blk = tabulate(small_md, "block")
    for level in ("blockgroup", "tract", "county", "state"):
        coarse = tabulate(small_md, "block", level=level)[level]
        n = {"blockgroup": 12, "tract": 11, "county": 5, "state": 2}[level]
        prefix = np.array([g[:n] for g in blk["block"].geoids])
        for i, gid in enumerate(coarse.geoids):
            assert (blk["block"].values[prefix == gid].sum(axis=0) == coarse.values[i]).all()


persons = st.lists(
    st.tuples(
        st.sampled_from(["990010001001001", "990010001001002", "990010002002001"]),
        st.integers(0, 1),
        st.integers(0, 110),
        st.integers(1, 63),
        st.integers(0, 1),
    ),
    min_size=1,
    max_size=40,
)


def _md(rows):
    g, s, a, r, h = (np.array(x) for x in zip(*rows, strict=True))
    return from_arrays(g, s, a, r, h)


def _dense(ts, level):
    g = ts[level]
    return {gid: g.values[i] for i, gid in enumerate(g.geoids)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(persons, persons)
def test_tabulation_is_additive(a, b):
    ta, tb, tab = tabulate(_md(a)), tabulate(_md(b)), tabulate(_md(a + b))
    for level in ("block", "tract"):
        da, db, dab = _dense(ta, level), _dense(tb, level), _dense(tab, level)
        for gid, v in dab.items():
            want = da.get(gid, 0) + db.get(gid, 0)
            assert (v == want).all()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(persons)
def test_random_populations_satisfy_every_identity(a):
    assert check_consistency(tabulate(_md(a))).ok


def test_person_stubs_read_from_the_layout_and_an_unknown_stub_is_refused_by_name():
    """The person tables are declared from the Bureau's layout: each stub's words are a
    predicate (the oracle test above pins all 4,216 cells); words the person schema cannot say
    are refused naming them, never read as "any"."""
    from tabrecon.tables.persons import TABLES_BY_NAME, stub_predicate

    assert stub_predicate("Under 1 year") == {"age_min": 0, "age_max": 0}
    assert stub_predicate("110 years and over") == {"age_min": 110, "age_max": 110}
    assert stub_predicate("Population of six races:") == {"race": "count:6"}
    with pytest.raises(InputError, match="'Householder 15 to 24 years'"):
        stub_predicate("Householder 15 to 24 years")
    p10 = TABLES_BY_NAME["P10"]
    assert (
        p10.universe == "Population 18 years and over"
        and p10.title == "RACE FOR THE POPULATION 18 YEARS AND OVER"
    )
    assert {c.age_min for c in p10.cells()} == {18}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tract_identities_sum_blocks_alike_in_any_row_order(small_md, seed):
    """A tract's block cells are summed run by run where the block grid is sorted, and one by
    one where it is not: the same checks, skips and violations, with cells withheld and a value
    corrupted."""
    ts = tabulate(small_md)
    rng = np.random.default_rng(seed)
    g = ts["block"]
    v = g.values.copy()
    v[rng.random(v.shape) < 0.01] = MISSING
    i, j = rng.integers(v.shape[0]), int(np.flatnonzero(g.cells == "P0120003")[0])
    v[i, j] = max(v[i, j], 0) + 1
    rows = rng.permutation(v.shape[0])
    grids = {
        "sorted": Grid("block", g.geoids, g.cells, v),
        "shuffled": Grid("block", g.geoids[rows], g.cells, v[rows]),
    }
    reps = {
        k: check_consistency(
            TableSet({"block": b, "tract": ts["tract"]}, population=population("persons"))
        )
        for k, b in grids.items()
    }
    a, b = reps["sorted"], reps["shuffled"]
    assert not a.ok and (a.checked, a.skipped) == (b.checked, b.skipped)
    assert sorted(map(str, a.violations)) == sorted(map(str, b.violations))
