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
