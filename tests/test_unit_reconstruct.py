"""Reconstruction over the housing-unit schema: the tables of the reconstruction are the tables
reconstructed, and a block is called unique only when no other population fits."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tabrecon.attacks.unit_reconstruct import reconstruct_units
from tabrecon.households import synthesize_households
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.spec import Units
from tabrecon.synth import SynthConfig
from tabrecon.unit_tables import tabulate_units


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tabulate_of_reconstruct_is_the_tables(seed):
    _, units = synthesize_households(SynthConfig(persons=600), seed=seed)
    long = tabulate_units(units)
    rec = reconstruct_units(long)
    assert tabulate_units(rec.units).equals(long)
    assert (rec.blocks["status"] != "failed").all()
    per_block = units.to_frame().group_by("block_geoid").len().sort("block_geoid")["len"]
    assert rec.blocks.sort("geoid")["units"].to_list() == per_block.to_list()


def _units(rows: list[tuple[str, dict]]) -> Units:
    names = HOUSING_UNITS.names
    codes = {n: np.array([r[n] for _, r in rows], dtype=np.int64) for n in names}
    return Units(HOUSING_UNITS, np.array([g for g, _ in rows]), codes)


VACANT = {n: 0 for n in HOUSING_UNITS.names}
OCCUPIED = dict(
    tenure=1,
    vacancy_status=0,
    household_size=2,
    household_type=1,
    detailed_household_type=2,
    under_18=0,
    over_65=0,
    hispanic_householder=1,
    householder_age=4,
    householder_race=1,
)


def test_a_block_is_unique_only_when_no_other_population_fits():
    """A block of vacant units is determined by H5 (every other column is 'not applicable');
    a married couple's block is not (the tables leave its children and ages over 65 open)."""
    a, b = "990010001001000", "990010001001001"
    units = _units(
        [
            (a, {**VACANT, "vacancy_status": 1}),
            (a, {**VACANT, "vacancy_status": 5}),
            (a, {**VACANT, "vacancy_status": 5}),
            (b, OCCUPIED),
        ]
    )
    rec = reconstruct_units(tabulate_units(units))
    status = dict(zip(rec.blocks["geoid"], rec.blocks["status"], strict=True))
    assert status == {a: "unique", b: "varies"}
    got = rec.units.to_frame().filter(pl.col("block_geoid") == a)["vacancy_status"]
    assert sorted(got.to_list()) == [1, 5, 5]


def test_tract_tables_join_a_tracts_blocks_in_one_model():
    """Persons at block+tract over the schema: the tract tables (PCT12, PCT12A-O) constrain the
    sum of a tract's blocks; the reconstruction tabulates back to every block and tract cell,
    and every block unique from its block tables stays unique with the tract's."""
    import polars as pl

    from tabrecon.schema import AGEBIN_OF_AGE, PERSONS, person_units
    from tabrecon.synth import SynthConfig, synthesize

    units = person_units(synthesize(SynthConfig(persons=1_200), seed=3))
    long = tabulate_units(units)
    on = {"age": AGEBIN_OF_AGE}
    bt = reconstruct_units(long, PERSONS, level="block+tract", unique_on=on)
    assert tabulate_units(bt.units).sort("geoid", "cell").equals(long.sort("geoid", "cell"))
    b = reconstruct_units(long, PERSONS, level="block", unique_on=on)
    alone = set(b.blocks.filter(pl.col("status") == "unique")["geoid"].to_list())
    joint = set(bt.blocks.filter(pl.col("status") == "unique")["geoid"].to_list())
    assert alone and alone <= joint and bt.blocks.height == b.blocks.height
    # a tract cell the blocks cannot meet: every block of that tract is named infeasible
    tract = long.filter(pl.col("geoid").str.len_chars() == 11)["geoid"][0]
    bad = long.with_columns(
        pl.when((pl.col("geoid") == tract) & (pl.col("cell") == "PCT0120001"))
        .then(pl.col("value") + 1)
        .otherwise("value")
    )
    res = reconstruct_units(bad, PERSONS, level="block+tract", unique_on=on)
    mine = res.blocks.filter(pl.col("geoid").str.starts_with(tract))
    assert mine.height and set(mine["status"].to_list()) == {"infeasible"}
    assert set(res.blocks.filter(~pl.col("geoid").str.starts_with(tract))["status"]) <= {
        "unique",
        "varies",
    }


def test_block_and_tract_level_misuse_is_named():
    import polars as pl

    from tabrecon.errors import InputError, TabreconError
    from tabrecon.schema import PERSONS, person_units
    from tabrecon.synth import SynthConfig, synthesize

    _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    with pytest.raises(TabreconError, match="no tract tables among those used"):
        reconstruct_units(tabulate_units(units), level="block+tract")
    with pytest.raises(TabreconError, match="level must be one of block, block"):
        reconstruct_units(tabulate_units(units), level="tract")
    with pytest.raises(TabreconError, match="tract_model must be auto, types or classes"):
        reconstruct_units(tabulate_units(units), tract_model="agebins")
    long = tabulate_units(person_units(synthesize(SynthConfig(persons=300), seed=1)))
    blocks_only = long.filter(pl.col("geoid").str.len_chars() == 15)
    with pytest.raises(TabreconError, match="no tract tables among those used.*declares PCT12"):
        reconstruct_units(blocks_only, PERSONS, level="block+tract")
    # a table held in part is refused by name, never used in part
    partial = long.filter(pl.col("cell") != "PCT0120050")
    with pytest.raises(InputError, match="tables lack cells \\['PCT0120050'\\]"):
        reconstruct_units(partial, PERSONS, level="block+tract")


def test_class_program_gives_the_type_programs_verdicts():
    """block+tract at the block tables' own resolution (a block variable per class of types no
    block cell tells apart, the tract's per type) gives every block the verdict the program
    over types gives, and its reconstruction tabulates back; a question finer than the classes
    is refused, not answered coarsely."""
    from tabrecon.attacks.unit_reconstruct import type_classes
    from tabrecon.errors import TabreconError
    from tabrecon.schema import AGEBIN_OF_AGE, PERSONS, person_units
    from tabrecon.synth import SynthConfig, synthesize
    from tabrecon.unit_tables import compiled, tables_of

    units = person_units(synthesize(SynthConfig(persons=1_200), seed=5))
    long = tabulate_units(units)
    on = {"age": AGEBIN_OF_AGE}
    kw = {"level": "block+tract", "unique_on": on}
    by_class = reconstruct_units(long, PERSONS, tract_model="classes", **kw)
    by_type = reconstruct_units(long, PERSONS, tract_model="types", **kw)
    verdicts = by_class.blocks.select("geoid", "status")
    assert verdicts.equals(by_type.blocks.select("geoid", "status"))
    assert {"unique", "varies"} <= set(verdicts["status"].to_list())
    back = tabulate_units(by_class.units).sort("geoid", "cell")
    assert back.equals(long.sort("geoid", "cell"))
    with pytest.raises(TabreconError, match="tract_model 'classes' answers uniqueness only"):
        reconstruct_units(long, PERSONS, level="block+tract", tract_model="classes")
    # the classes of the person block tables: one sex, race and origin over one agebin38 range
    block = tuple(t.name for t in tables_of(PERSONS) if t.level == "block")
    cls, first = type_classes(compiled(PERSONS, block)[1])
    cols = PERSONS.decode(PERSONS.feasible_types())
    key = pl.DataFrame(
        {
            "sex": cols["sex"],
            "bin": AGEBIN_OF_AGE[np.asarray(cols["age"])],
            "race": cols["race"],
            "hispanic": cols["hispanic"],
        }
    )
    assert first.size == key.unique().height
    assert key.with_columns(c=cls).group_by("c").n_unique().drop("c").max().row(0) == (1,) * 4


def test_a_solution_that_does_not_deal_out_is_refused():
    """Dealing a tract's types to its blocks: the blocks' class counts must use up the tract's
    counts exactly; a point that does not (a solver's bug) is refused, never dealt in part."""
    from tabrecon.attacks.unit_reconstruct import _deal
    from tabrecon.errors import TabreconError

    cls = np.array([0, 0, 1])  # types 0 and 1 form class 0, type 2 class 1
    adms = [np.array([0, 2]), np.array([0])]  # blocks' admissible classes, by first type
    ytypes = np.array([0, 1, 2])
    x = np.array([1, 1, 1])  # block 0: one of class 0, one of class 1; block 1: one of class 0
    got = _deal(x, adms, cls, ytypes, np.array([1, 1, 1]))
    assert [g.tolist() for g in got] == [[0, 2], [1]]
    with pytest.raises(TabreconError, match="does not deal out"):
        _deal(x, adms, cls, ytypes, np.array([2, 1, 1]))  # the tract holds one unit more
