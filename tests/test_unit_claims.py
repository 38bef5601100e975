"""Generate-then-Verify over the housing-unit schema: every verified claim is true of the real
units, and claims one published cell reads off are dropped."""

from __future__ import annotations

import pytest

from tabrecon.attacks.unit_claims import generate_then_verify
from tabrecon.households import synthesize_households
from tabrecon.synth import SynthConfig
from tabrecon.unit_tables import tabulate_units


def _county(seed: int):
    _, units = synthesize_households(SynthConfig(persons=800), seed=seed)
    geo = sorted(set(units.block_geoid.tolist()))
    size = {g: int((units.block_geoid == g).sum()) for g in geo}
    blocks = [g for g in geo if 3 <= size[g] <= 20][:3]
    return units, tabulate_units(units), blocks


@pytest.mark.parametrize("seed", [3, 4, 11])
def test_every_verified_claim_is_true_of_the_units(seed):
    units, long, blocks = _county(seed)
    res = generate_then_verify(long, blocks=blocks, truth=units, K=5, k_values=(2, 3, 4))
    assert res.blocks.height == len(blocks)
    assert (res.blocks["verified"] <= res.blocks["candidates"]).all()
    if res.claims.height:
        assert (res.claims["true_matches"] == res.claims["m"]).all()
    assert res.claims.height == int(res.blocks["verified"].sum())


def test_claims_a_single_cell_reads_off_are_dropped():
    """Tenure, vacancy status, size and householder race are each one published table (H3-H6,
    H13): no claim on one of those columns alone is a finding."""
    units, long, blocks = _county(3)
    res = generate_then_verify(long, blocks=blocks, truth=units, K=3, k_values=(1,))
    published = {"tenure", "vacancy_status", "household_size", "householder_race"}
    assert not set(res.claims["columns"].to_list()) & published if res.claims.height else True


def test_figures_by_k_count_the_units_claims_single_out():
    """Singled-out units are exactly the units matching a verified singleton claim (one each,
    all distinct per claim), never more than the units any verified claim covers; baselines
    are probabilities; readable values name every column of the claim."""
    from tabrecon.attacks.unit_claims import claims_by_k

    units, long, blocks = _county(4)
    res = generate_then_verify(long, blocks=blocks, truth=units, K=5, k_values=(2, 3, 4))
    fig = claims_by_k(res, units)
    c = res.claims
    for row in fig.iter_rows(named=True):
        k = row["k"]
        singles = c.filter((c["k"] == k) & (c["m"] == 1))
        assert row["units_singled_out"] <= singles.height
        assert row["units_singled_out"] <= row["units_covered"]
        assert 0.0 <= row["blocks_with_singleton"] <= 1.0
        if singles.height:
            assert 0.0 <= row["baseline_median"] <= 1.0
    for row in c.iter_rows(named=True):
        assert [v.split("=")[0] for v in row["values"].split("; ")] == row["columns"].split(",")


def test_a_claim_no_single_table_publishes_is_found_and_proven():
    """Block of two households: an owner living alone (White) and a renting married couple with
    a child (Black). No table crosses size with race, yet H14 and H16 together prove that
    exactly one household is a White 1-person household: a verified singleton."""
    import numpy as np

    from tabrecon.attacks.unit_claims import claims_by_k
    from tabrecon.schema.catalog import HOUSING_UNITS
    from tabrecon.schema.spec import Units

    g = "990010001001000"
    rows = [
        dict(tenure=1, vacancy_status=0, household_size=1, household_type=4,
             detailed_household_type=9, under_18=0, over_65=0, hispanic_householder=1,
             householder_age=4, householder_race=1),
        dict(tenure=3, vacancy_status=0, household_size=3, household_type=1,
             detailed_household_type=1, under_18=1, over_65=0, hispanic_householder=1,
             householder_age=3, householder_race=2),
    ]  # fmt: skip
    codes = {n: np.array([r[n] for r in rows]) for n in HOUSING_UNITS.names}
    units = Units(HOUSING_UNITS, np.array([g, g]), codes)
    res = generate_then_verify(tabulate_units(units), truth=units, K=5, k_values=(2,))
    hit = res.claims.filter(res.claims["columns"] == "household_size,householder_race")
    assert "household_size=1-person household; householder_race=White alone" in hit["values"]
    assert (hit["m"] == 1).all() and (hit["true_matches"] == 1).all()
    # a claim that is a published statistic is not among them: occupied 1-person households
    # are H13's 1-person cell (every 1-person unit is occupied), although no table has both
    # columns; owners with a mortgage who are White are not (H14 counts all owners)
    values = res.claims["values"].to_list()
    assert "vacancy_status=occupied; household_size=1-person household" not in values
    assert "tenure=owned with a mortgage or a loan; householder_race=White alone" in values
    fig = claims_by_k(res, units).row(0, named=True)
    assert fig["blocks_with_singleton"] == 1.0 and fig["units_singled_out"] >= 1
    assert 0.0 <= fig["baseline_median"] <= 1.0
