"""The table container every reader returns, whatever the population (tabrecon.tables.tableset)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.errors import TabreconError
from tabrecon.schema.registry import population
from tabrecon.tables.tableset import MISSING, WITHHELD_CELL, TableSet

HOUSING_CELLS = [c.id for t in population("households").tables()[:3] for c in t.cells()]


@st.composite
def _long(draw: st.DrawFn) -> pl.DataFrame:
    """A long table of housing-unit block cells: some blocks, some cells each, values or null
    (withheld)."""
    blocks = draw(st.lists(st.from_regex(r"\d{15}", fullmatch=True), min_size=1, max_size=6))
    rows = []
    for g in sorted(set(blocks)):
        for c in draw(st.sets(st.sampled_from(HOUSING_CELLS), min_size=1, max_size=8)):
            rows.append((g, c, draw(st.none() | st.integers(0, 10**6))))
    geoid, cell, value = zip(*rows, strict=True)
    return pl.DataFrame(
        {"geoid": list(geoid), "cell": list(cell), "value": list(value)},
        schema={"geoid": pl.String, "cell": pl.String, "value": pl.Int64},
    )


@given(_long())
@settings(max_examples=60, deadline=None)
def test_a_long_table_round_trips_through_the_grids(long: pl.DataFrame) -> None:
    ts = TableSet.from_long(long, population("households"), source="x.csv")
    g = ts["block"]
    assert (g.geoids[:-1] < g.geoids[1:]).all()  # sorted, each block once
    assert int((g.values != MISSING).sum()) == long.height
    assert int((g.values == WITHHELD_CELL).sum()) == long["value"].null_count()
    back = ts.to_frame().sort("geoid", "cell")
    assert back.equals(long.sort("geoid", "cell"))
    assert ts.source == "x.csv" and ts.population.key == "households"


def test_a_tract_is_cut_out_with_its_population_and_withheld_cells() -> None:
    long = pl.DataFrame(
        {
            "geoid": ["280010001001000", "280010001001001", "280010002001000"],
            "cell": ["H0010001", "H0010001", "H0010001"],
            "value": [4, None, 7],
        }
    )
    ts = TableSet.from_long(long, population("households"))
    size = ts.block_population()
    assert size is not None and size.tolist() == [4, 0, 7]  # a withheld total: none known
    assert ts.inhabited_blocks().tolist() == ["280010001001000", "280010002001000"]
    parts = ts.by_tract()
    assert list(parts) == ts.tracts() == ["28001000100", "28001000200"]
    one = parts["28001000100"]
    assert one.population.key == "households"
    assert one.to_frame()["value"].to_list() == [4, None]
    assert ts.subset("28001000200").to_frame()["value"].to_list() == [7]


def test_a_cell_of_another_population_is_refused_by_name() -> None:
    long = pl.DataFrame({"geoid": ["1" * 15], "cell": ["P0010001"], "value": [3]})
    with pytest.raises(TabreconError, match="'P0010001' is not one of the households tables"):
        TableSet.from_long(long, population("households"))


def test_person_tables_count_a_block_by_any_whole_population_cell() -> None:
    from tabrecon.tables.tableset import Grid

    # a P.L. 94-171 release has no P1: P8's total line counts the block
    g = Grid("block", np.array(["1" * 15, "2" * 15]), np.array(["P0080001"]), np.array([[3], [0]]))
    ts = TableSet({"block": g}, population=population("persons"))
    size = ts.block_population()
    assert size is not None and size.tolist() == [3, 0]
    assert ts.tables_present() == ["P8"]


@st.composite
def _release(draw: st.DrawFn) -> pl.DataFrame:
    """A long table of the first three housing-unit tables' block cells: each block with every
    cell, or (drawn) only some; values small counts or null (withheld)."""
    blocks = draw(st.lists(st.from_regex(r"\d{15}", fullmatch=True), min_size=1, max_size=5))
    rows = []
    for g in sorted(set(blocks)):
        whole = draw(st.booleans())
        some = draw(st.sets(st.sampled_from(HOUSING_CELLS), min_size=1, max_size=8))
        for c in HOUSING_CELLS if whole else sorted(some):
            rows.append((g, c, draw(st.none() | st.integers(0, 6))))
    geoid, cell, value = zip(*rows, strict=True)
    return pl.DataFrame(
        {"geoid": list(geoid), "cell": list(cell), "value": list(value)},
        schema={"geoid": pl.String, "cell": pl.String, "value": pl.Int64},
    )


@given(
    _release(),
    st.sampled_from(["exact", "suppressed", "rounded"]),
    st.sampled_from([None, 1, 2]),
)
@settings(max_examples=150, deadline=None)
def test_the_engine_reads_the_grids_as_it_reads_the_long_table(
    long: pl.DataFrame, rule: str, tables: int | None
) -> None:
    """``block_tables`` on a table set's grids (the engine's path: no long table made) gives
    the long table's blocks and values, and refuses what it refuses: a cell no block has, a
    block lacking a cell, a value the publication rule cannot publish."""
    from tabrecon.engine.model import block_tables
    from tabrecon.errors import InputError
    from tabrecon.tables.publication import EXACT, Publication, Rule

    pub = {
        "exact": EXACT,
        "suppressed": Publication(Rule.SUPPRESSED, threshold=3),
        "rounded": Publication(Rule.ROUNDED, base=2),
    }[rule]
    names = tuple(t.name for t in population("households").tables()[:3])
    names = names if tables is None else names[:tables]
    ts = TableSet.from_long(long, population("households"))

    def read(src: pl.DataFrame | TableSet) -> tuple | InputError:
        try:
            return block_tables(src, population("households"), names, pub)
        except InputError as e:
            return e

    want, got = read(ts.to_frame()), read(ts)
    if isinstance(want, InputError):
        assert isinstance(got, InputError)
        if "publication" in str(want):  # the first of several such values may be another
            assert "publication" in str(got)
        else:
            assert str(got) == str(want)
        return
    assert not isinstance(got, InputError), got
    assert got[2] == want[2]  # the blocks, sorted
    assert np.array_equal(got[3], want[3])  # their values, withheld as MISSING
