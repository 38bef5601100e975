"""Exact reconstruction: re-tabulation, agreement, partial and infeasible tables, resume."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabrecon import reconstruct
from tabrecon.engine.solvers import SolverOptions
from tabrecon.metrics.agreement import agree
from tabrecon.schema import from_arrays
from tabrecon.schema.registry import population
from tabrecon.tables.consistency import check_consistency
from tabrecon.tables.persons import drop_cells, tabulate
from tabrecon.tables.tableset import MISSING, Grid, TableSet


def _same_tables(a: TableSet, b: TableSet, levels=("block", "tract")) -> bool:
    for lvl in levels:
        ga, gb = a[lvl], b[lvl]
        present = ga.values != MISSING
        cols = {c: j for j, c in enumerate(gb.cells)}
        bv = gb.values[:, [cols[c] for c in ga.cells]]
        if not (ga.geoids == gb.geoids).all() or not (ga.values[present] == bv[present]).all():
            return False
    return True


@pytest.fixture(scope="module")
def real_runs(real_tables):
    return {lvl: reconstruct(real_tables, lvl) for lvl in ("block+tract", "block")}


@pytest.mark.realdata
def test_real_block_tract_is_exact_and_unique(real_md, real_tables, real_runs):
    run = real_runs["block+tract"]
    assert not run.failed and len(run.records) == 63969
    assert _same_tables(real_tables, tabulate(run.records))
    a = agree(run.records, truth=real_md)
    per = a.per_block
    assert (per["binned"] == per["persons"]).all()  # 100% in every block: the Bureau's zero solvar
    assert 30 < a.exact_pct < 60


@pytest.mark.realdata
def test_real_block_only(real_md, real_tables, real_runs):
    run = real_runs["block"]
    assert not run.failed
    assert _same_tables(real_tables, tabulate(run.records), levels=("block",))
    rec = run.records
    assert (rec.age_exact == (rec.age <= 21)).all()  # block tables cannot see single ages above 21
    a = agree(rec, truth=real_md)
    assert 99.0 < a.binned_pct < 100.0  # not unique everywhere without the tract tables


def _pop(rows):
    g, s, a, r, h = (np.array(x) for x in zip(*rows, strict=True))
    return from_arrays(g, s, a, r, h)


people = st.lists(
    st.tuples(
        st.sampled_from(
            ["990010001001001", "990010001001002", "990010001002001", "990010002001001"]
        ),
        st.integers(0, 1),
        st.integers(0, 110),
        st.sampled_from([1, 1, 1, 2, 3, 4, 6, 7, 12, 40, 63]),
        st.integers(0, 1),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(people, st.sampled_from(["block", "block+tract"]))
def test_reconstruction_retabulates_exactly(rows, level):
    ts = tabulate(_pop(rows))
    run = reconstruct(ts, level)
    assert not run.failed
    levels = ("block", "tract") if level == "block+tract" else ("block",)
    assert _same_tables(ts, tabulate(run.records), levels)


def test_highs_backend_agrees(small_md):
    ts = tabulate(small_md)
    run = reconstruct(ts, "block+tract", SolverOptions(backend="highs"))
    assert not run.failed and _same_tables(ts, tabulate(run.records))


def test_agreement_hand_example():
    left = _pop(
        [
            ("990010001001001", 0, 30, 1, 0),
            ("990010001001001", 0, 31, 1, 0),
            ("990010001001001", 1, 50, 2, 1),
            ("990010001001002", 1, 5, 1, 0),
        ]
    )
    right = _pop(
        [
            ("990010001001001", 0, 30, 1, 0),  # exact
            ("990010001001001", 0, 33, 1, 0),  # same bin 30-34: binned
            ("990010001001001", 1, 50, 1, 1),  # race differs: no match
            ("990010001001002", 1, 6, 1, 0),  # bin 6 != 5: no match
        ]
    )
    a = agree(right, truth=left)
    assert (a.population, a.exact, a.binned) == (4, 1, 2)
    assert a.exact_pct == 25.0 and a.binned_pct == 50.0
    row = a.by_bin.filter(a.by_bin["bin"] == "1-9").row(0, named=True)
    assert row["blocks"] == 2 and row["persons"] == 4


P3_P5_TABLES = "P1,P3,P4,P5," + ",".join(f"P12{L}" for L in "ABCDEFG")


def _satisfies_every_published_cell(ts, rec, tables):
    back = tabulate(rec, tables)
    for level, g in ts.grids.items():
        b = back.grids[level]
        assert list(b.geoids) == list(g.geoids) and list(b.cells) == list(g.cells)
        bad = np.argwhere((g.values != b.values) & (g.values >= 0))
        assert not bad.size, f"{level} {g.geoids[bad[0][0]]} {g.cells[bad[0][1]]}"


def test_p3_p4_p5_are_tabulated_checked_and_used_as_constraints(small_md):
    ts = tabulate(small_md, P3_P5_TABLES)
    assert {"P3", "P4", "P5"} <= set(ts.tables_present())
    g = ts["block"]
    # P3.1 = P4.1 = P5.1 = P1; P4.2 = P5.2; P5's lines add up to P4's
    for c in ("P0030001", "P0040001", "P0050001"):
        assert (g.col(c) == g.col("P0010001")).all()
    assert (g.col("P0040003") == g.col("P0050010")).all()
    assert (sum(g.col(f"P00500{i:02d}") for i in range(3, 10)) == g.col("P0050002")).all()
    rep = check_consistency(ts)
    assert rep.ok and rep.checked > 0
    run = reconstruct(ts, "block")
    assert not run.failed and {"P3", "P4", "P5"} <= set(run.tables_used)
    _satisfies_every_published_cell(ts, run.records, P3_P5_TABLES)


@pytest.mark.realdata
def test_real_sample_reconstructed_from_p1_p3_p4_p5_p12a_g_alone(real_md):
    tracts = tabulate(real_md, "P1").tracts()[:3]
    rows = real_md.rows_by_prefix(tracts)
    md = real_md.take(np.concatenate([rows[t] for t in tracts]))
    ts = tabulate(md, P3_P5_TABLES)
    run = reconstruct(ts, "block")
    assert not run.failed and len(run.records) == len(md)
    _satisfies_every_published_cell(ts, run.records, P3_P5_TABLES)


# -- persons over the schema (tabrecon.reconstruct: what the commands and the audit call) ---------
def test_persons_over_the_schema_tabulate_back_with_every_block_decided(small_md):

    ts = tabulate(small_md)
    run = reconstruct(ts, "block+tract", certify=True)
    assert not run.failed and len(run.records) == len(small_md)
    assert _same_tables(ts, tabulate(run.records))
    b = run.blocks
    assert b.columns == [
        "block_geoid", "persons", "solvar", "solvar_lo", "solvar_hi", "proven", "status", "level"
    ]  # fmt: skip
    assert b.height == len(ts["block"].geoids) and set(b["status"]) <= {"unique", "varies"}
    assert (b["level"] == "block+tract").all() and b["persons"].sum() == len(small_md)
    assert any("; blocks: " in line for line in run.summary_lines())
    plain = reconstruct(ts, "block")  # uniqueness not asked
    assert (plain.blocks["status"] == "unknown").all() and not plain.failed


def test_persons_over_the_schema_leave_out_a_table_published_in_part_and_say_so(small_md):

    ts = tabulate(small_md)
    part = drop_cells(ts, ["P0140003", "PCT0120050"])  # one cell of P14 and of PCT12 missing
    run = reconstruct(part, "block+tract")
    assert not run.failed and len(run.records) == len(small_md)
    assert "P14" not in run.tables_used and "PCT12" not in run.tables_used
    assert "P12" in run.tables_used and "PCT12A" in run.tables_used
    assert any("published in part, left out: P14, PCT12" in n for n in run.notes)
    assert any("left out" in line for line in run.summary_lines())


@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_person_tracts_are_the_long_tables_parts(small_md, level):
    """The engine reads a person release tract by tract from its grids
    (:func:`~tabrecon.engine.release.plan_release`); each tract's long table is the whole
    release's long table (cells of the tables used, the level's) restricted to that tract, row
    for row, whatever the grid's row order; a table published in part is left out of both and
    a block with nothing published is no row of either. The digest does not depend on the row
    order."""
    import polars as pl

    from tabrecon.engine.release import plan_release
    from tabrecon.tables.spec import table_by_name

    ts = drop_cells(tabulate(small_md), ["P0140003"])  # P14 published in part
    g = ts["block"]
    values = g.values.copy()
    values[:3] = MISSING  # three blocks publish nothing
    perm = np.random.default_rng(0).permutation(len(g.geoids))
    shuffled = TableSet(
        {"block": Grid("block", g.geoids[perm], g.cells, values[perm]), "tract": ts["tract"]},
        population=population("persons"),
    )
    ts = TableSet(
        {"block": Grid("block", g.geoids, g.cells, values), "tract": ts["tract"]},
        population=population("persons"),
    )
    plan = plan_release(ts, population("persons"), level)
    split, used, notes = plan.split, plan.used, plan.notes
    assert "P14" not in used and any("P14" in n for n in notes)
    cells = [c.id for n in used for c in table_by_name(n, population("persons")).cells()]
    long = ts.to_frame().filter(pl.col("cell").is_in(cells))
    assert not long["geoid"].is_in(g.geoids[:3].tolist()).any()
    want = long.with_columns(pl.col("geoid").str.slice(0, 11).alias("t")).partition_by(
        "t", as_dict=True, include_key=False
    )
    assert list(split.parts) == sorted(t for (t,) in want)
    for (t,), part in want.items():
        assert split.long(t).equals(part)
    again = plan_release(shuffled, population("persons"), level).split
    assert again.digest == split.digest and list(again.parts) == list(split.parts)
    for t in split.parts:
        assert again.long(t).sort("geoid", "cell").equals(split.long(t).sort("geoid", "cell"))
    assert (
        plan_release(tabulate(small_md), population("persons"), level).split.digest != split.digest
    )


@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_block_tables_published_for_tracts_and_counties_too_are_left_to_the_blocks(small_md, level):
    """SF1 and the Census API publish P1, P12 and the other block tables for tracts and counties
    too. Those rows sum the blocks' and the engine leaves them out: the release reconstructs as
    without them (before, every tract failed with 'block 99001000100 lacks cell ...'), and a
    table published whole for tracts but in part for blocks is left out as in part."""
    from tabrecon.engine.release import plan_release
    from tabrecon.tables.persons import BLOCK_TABLES

    ts = tabulate(small_md)
    coarse = {
        lv: tabulate(small_md, BLOCK_TABLES, level=lv)[lv] for lv in ("tract", "county", "state")
    }
    t = ts["tract"]
    both = Grid(
        "tract",
        t.geoids,
        np.concatenate([t.cells, coarse["tract"].cells]),
        np.concatenate([t.values, coarse["tract"].values], axis=1),
    )
    wide = TableSet(
        {**ts.grids, "tract": both, **{lv: coarse[lv] for lv in ("county", "state")}},
        population=population("persons"),
    )
    plain, more = (reconstruct(x, level, certify=True) for x in (ts, wide))
    assert not plain.failed and not more.failed
    cols = ["block_geoid", "persons", "status", "level", "solvar"]
    assert more.blocks.select(cols).equals(plain.blocks.select(cols))
    assert more.tables_used == plain.tables_used
    assert (
        plan_release(wide, population("persons"), level).split.digest
        == plan_release(ts, population("persons"), level).split.digest
    )
    part = TableSet(
        {**wide.grids, "block": drop_cells(ts, ["P0140003"])["block"]},
        population=population("persons"),
    )
    plan = plan_release(part, population("persons"), level)
    used, notes = plan.used, plan.notes
    assert "P14" not in used and any("published in part, left out: P14" in n for n in notes)


def test_persons_over_the_schema_without_tract_tables_solve_block_by_block(small_md):
    from tabrecon.tables.persons import BLOCK_TABLES

    ts = tabulate(small_md, tables=BLOCK_TABLES)
    run = reconstruct(ts, "block+tract", certify=True)
    assert not run.failed and (run.blocks["level"] == "block").all()
    assert any("no tract tables" in n for n in run.notes)


def test_persons_over_the_schema_name_a_contradicting_tract_and_its_cells():

    md = _pop(
        [
            ("990010001001001", 0, 30, 1, 0),
            ("990010001001001", 1, 31, 1, 0),
            ("990010001001002", 0, 40, 2, 0),
        ]
    )
    ts = tabulate(md)
    g = ts["block"]
    v = g.values.copy()
    v[0, g.cells == "P0080003"] = 0  # "no White alone" contradicts P12A's two White persons
    bad = TableSet({"block": Grid("block", g.geoids, g.cells, v)}, population=population("persons"))
    run = reconstruct(bad, "block", certify=True)
    assert [r["unit"] for r in run.failed] == ["99001000100"]
    assert run.failed[0]["status"] == "infeasible" and "990010001001001" in run.failed[0]["message"]
    lines = "\n".join(run.failure_lines())
    assert "P012A" in lines or "P0080001" in lines or "P0080003" in lines
    # the consistent block is still written
    assert run.records.block_geoid.tolist() == ["990010001001002"]


def test_persons_over_the_schema_diagnose_a_tract_whose_cells_disagree_at_block_tract(small_md):
    """One more male under 5 in a block than its sex total allows: the tract is infeasible,
    the smallest change names cells of that block or tract, the other tracts are written."""

    ts = tabulate(small_md)
    g = ts["block"]
    v = g.values.copy()
    j = int(np.flatnonzero(g.cells == "P0120003")[0])
    i = int(np.argmax(v[:, j]))
    v[i, j] += 1
    bad = TableSet(
        {"block": Grid("block", g.geoids, g.cells, v), "tract": ts["tract"]},
        population=population("persons"),
    )
    run = reconstruct(bad, "block+tract")
    tract = str(g.geoids[i])[:11]
    assert [r["unit"] for r in run.failed] == [tract]
    found = run.conflicts[tract]
    assert found and all({"geoid", "cell", "published", "adjust"} <= set(c) for c in found)
    assert all(c["geoid"].startswith(tract) for c in found)
    assert sum(abs(c["adjust"]) for c in found) >= 1
    assert set(run.records.block_geoid.astype(str).tolist()) == {
        str(b) for b in small_md.block_geoid.tolist() if not str(b).startswith(tract)
    }
