"""The contract every registered family of defense specs must keep, run over all of them
(``tabrecon.defenses.defense.FAMILIES``; a family registered later is checked with no test
written for it): its example parses to a defense of that name, the grammar offers it, the
protected records are persons of the county's own blocks whose tables satisfy every SF1
identity (a record-level release cannot contradict itself), the cost it claims is the cost its
release carries, and a seeded family gives the same release for the same seed."""

from __future__ import annotations

import numpy as np
import pytest

from tabrecon.defenses.defense import FAMILIES, Defense, grammar
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.tables.consistency import check_consistency
from tabrecon.tables.persons import tabulate


@pytest.fixture(scope="module")
def county():
    return synthesize(SynthConfig(persons=1_500), seed=3)


@pytest.mark.parametrize("family", FAMILIES, ids=[f.example for f in FAMILIES])
def test_every_defense_family_keeps_the_contract(county, family):
    spec = family.example
    assert Defense.check(spec) is None and family.owns(spec)
    assert (spec if family.names else f"{family.prefix}<") in grammar()
    d = Defense.parse(spec)
    assert d.name == spec
    out = d.protect(county, rng=5)
    r = out.records
    assert len(r) > 0
    assert set(np.unique(r.block_geoid).tolist()) <= set(county.geoids.tolist()), spec
    rep = check_consistency(tabulate(r))
    assert rep.ok, (spec, [str(v) for v in rep.violations[:3]])
    if d.cost is None:
        assert out.cost is None, spec
    else:
        assert out.cost is not None and out.cost.rho == pytest.approx(d.cost.rho), spec
    if family.seeded:
        again = d.protect(county, rng=5).records
        assert again.to_codes().equals(r.to_codes()), f"{spec}: the same seed, another release"


def test_a_family_that_overlaps_another_is_refused():
    from tabrecon.defenses.defense import Family, register_family
    from tabrecon.errors import TabreconError

    with pytest.raises(TabreconError, match="overlaps"):
        register_family(Family(word="again", names=("swap-lo",), make=Defense))
    with pytest.raises(TabreconError, match="overlaps"):
        register_family(Family(word="budget", prefix="rho=", make=Defense))
