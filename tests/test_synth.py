"""The synthetic county: size-dependent block cohesion (SynthConfig.cohesion_slope, reid_2010)."""

import numpy as np
import pytest

from tabrecon.errors import TabreconError
from tabrecon.synth import SynthConfig, synthesize


def _modal_share_by_size(md) -> tuple[float, float]:
    """Share of persons in their block's most common race x ethnicity: blocks under 100, 100+."""
    g = (md.race.astype(np.int64) - 1) * 2 + md.hisp
    nb = len(md.geoids)
    counts = np.zeros((nb, 126), dtype=np.int64)
    np.add.at(counts, (md.block, g), 1)
    pop = counts.sum(axis=1)
    small = pop < 100
    return (
        counts.max(axis=1)[small].sum() / pop[small].sum(),
        counts.max(axis=1)[~small].sum() / pop[~small].sum(),
    )


def test_reid_2010_makes_small_blocks_homogeneous_and_large_ones_mixed():
    flat = synthesize(SynthConfig(persons=60_000), seed=2)
    sloped = synthesize(SynthConfig.reid_2010(persons=60_000), seed=2)
    f_small, f_large = _modal_share_by_size(flat)
    s_small, s_large = _modal_share_by_size(sloped)
    # the default county is alike at every size (within a few points)
    assert abs(f_small - f_large) < 0.06
    # reid_2010: clearly more homogeneous under 100 persons than the default, less above
    assert s_small > f_small + 0.05 and s_large < f_large
    assert s_small - s_large > 0.10
    # the same persons, blocks and ages: only race and ethnicity are drawn differently
    assert np.array_equal(flat.block, sloped.block) and np.array_equal(flat.age, sloped.age)


def test_zero_slope_is_the_default_county():
    a = synthesize(SynthConfig(persons=5_000), seed=9)
    b = synthesize(SynthConfig(persons=5_000, cohesion_slope=0.0, block_cohesion=0.63), seed=9)
    assert np.array_equal(a.race, b.race) and np.array_equal(a.hisp, b.hisp)


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"household_cohesion": 1.2}, "household_cohesion must be a probability"),
        ({"cohesion_slope": -0.1}, "must not be negative"),
        ({"block_cohesion": 1.3}, "block_cohesion must be a probability when cohesion_slope"),
    ],
)
def test_bad_cohesion_is_refused(kw, msg):
    with pytest.raises(TabreconError, match=msg):
        SynthConfig(**kw)
