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
