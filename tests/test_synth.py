"""The synthetic county: size-dependent block cohesion (SynthConfig.cohesion_slope, reid_2010)."""

import numpy as np
import pytest

from tabrecon.errors import TabreconError
from tabrecon.records.synth import SynthConfig, synthesize


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
        ({"tract_min": 3000, "tract_max": 2000}, "tract_min <= tract_max"),
        ({"tract_min": 0}, "1 <= tract_min"),
    ],
)
def test_bad_cohesion_is_refused(kw, msg):
    with pytest.raises(TabreconError, match=msg):
        SynthConfig(**kw)


def test_household_sizes_follow_2010_and_differ_between_blocks():
    """Households are one stream of 2010 sizes (SF1 H13) cut at block boundaries: the county's
    size mix is 2010's within 1.5 points, and blocks do not all start with the same sizes (the
    generator restarted its stream at every block until 2026-11-26: 37% of households of one
    person, 30% of two)."""
    md = synthesize(SynthConfig(persons=200_000), seed=1)
    hid = md.extra["household_id"].to_numpy()
    size = np.bincount(hid)
    share = np.bincount(np.minimum(size, 7), minlength=8)[1:] / size.size
    h13 = np.array([0.267, 0.328, 0.161, 0.135, 0.064, 0.026, 0.019])  # 2010, 116.7 M households
    assert np.abs(share - h13).max() < 0.015, share.round(3)
    # the size of each block's first household: spread like the stream, not one value
    first = np.unique(md.block, return_index=True)[1]
    firsts = size[hid[first]]
    assert np.bincount(np.minimum(firsts, 7), minlength=8)[1:].max() / firsts.size < 0.5
    # a household never spans two blocks
    lo = np.full(size.size, np.iinfo(np.int64).max)
    hi = np.full(size.size, -1)
    np.minimum.at(lo, hid, md.block)
    np.maximum.at(hi, hid, md.block)
    assert (lo == hi).all()


def test_small_tracts_are_made_as_configured():
    """Tract bounds below the usual 2,500-6,000 persons are kept (they raised ValueError), and
    the default county is what it was."""
    md = synthesize(SynthConfig(persons=12_000, tract_min=1_200, tract_max=1_800), seed=11)
    tracts = np.array([g[:11] for g in md.geoids])
    _, size = np.unique(tracts[md.block], return_counts=True)
    _, blocks = np.unique(tracts, return_counts=True)
    assert len(size) >= 7 and ((size <= 1_800) | (blocks == 1)).all()  # or a block that large
    default = synthesize(SynthConfig(persons=20_000), seed=11)
    tract = np.array([g[:11] for g in default.geoids])[default.block]
    assert len(np.unique(tract)) == 5  # as before the bounds were honoured
