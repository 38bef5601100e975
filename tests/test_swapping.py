"""Household swapping: rates, invariants, determinism, bad configurations; the attack sees through
it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tabrecon.defenses.swapping import PRESETS, SwapConfig, swap
from tabrecon.errors import TabreconError
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.tables.persons import tabulate


def _pops(md, n):
    return np.unique(np.array([g[:n] for g in md.geoids])[md.block], return_counts=True)


def test_swap_lo_keeps_block_populations_and_hits_the_rate(small_md):
    r = swap(small_md, "swap-lo", seed=1)
    assert r.unit == "households" and abs(r.swapped_units / r.units - 0.05) < 0.002
    assert r.invariants["block populations"]
    b0, b1 = _pops(small_md, 15), _pops(r.records, 15)
    assert (b0[0] == b1[0]).all() and (b0[1] == b1[1]).all()
    # persons and their attributes are kept; only blocks change, and only for swapped households
    assert len(r.records) == len(small_md) and (r.records.types == small_md.types).all()
    assert 0 < r.moved_persons < len(small_md)
    # partners are neighbours within a size key sorted by tract (p_tract = 1): a pair crosses
    # tracts only where a key's households of one tract end and the next tract's begin, so at
    # most one household per key and tract boundary on each side moves to another tract
    moved = r.records.block_geoid != small_md.block_geoid
    hid = small_md.extra["household_id"].to_numpy()
    crossed = np.array([g[:11] for g in r.records.block_geoid]) != np.array(
        [g[:11] for g in small_md.block_geoid]
    )
    sizes = np.bincount(hid)
    n_keys = np.unique(sizes[sizes > 0]).size
    n_tracts = len({g[:11] for g in small_md.geoids})
    assert np.unique(hid[crossed & moved]).size <= 2 * n_keys * (n_tracts - 1)


def test_swap_hi_changes_block_populations_and_is_seeded(small_md):
    r = swap(small_md, "swap-hi", seed=2)
    assert abs(r.swapped_units / r.units - 0.5) < 0.002
    assert not r.invariants["block populations"] and r.invariants["state populations"]
    again = swap(small_md, "swap-hi", seed=2)
    assert (again.records.block_geoid == r.records.block_geoid).all()
    other = swap(small_md, "swap-hi", seed=3)
    assert (other.records.block_geoid != r.records.block_geoid).any()
    tabulate(
        r.records
    )  # the swapped file is a valid population: tables tabulate and stay consistent


def test_persons_are_swapped_without_household_ids(small_md):
    md = small_md.take(np.arange(len(small_md)))
    md.extra = None
    r = swap(md, "swap-lo", seed=0)
    assert r.unit.startswith("persons") and r.invariants["block populations"]


@pytest.mark.parametrize(
    "kw",
    [
        {"rate": 0},
        {"rate": 0.1, "p_tract": 0.8, "p_county": 0.5},
        {"rate": 0.1, "p_minus": 0.7, "p_plus": 0.5},
    ],
)
def test_bad_configurations_are_refused(kw):
    with pytest.raises(TabreconError):
        SwapConfig(**kw)


def test_unknown_preset(small_md):
    with pytest.raises(TabreconError, match="swap-lo"):
        swap(small_md, "swap-mid")
    assert set(PRESETS) == {"swap-lo", "swap-hi", "swap-2010"}


@pytest.mark.realdata
def test_real_sample_swap_lo_does_not_defend(real_md):
    from tabrecon import certify, reconstruct
    from tabrecon.attacks.reidentify import reidentify

    sw = swap(real_md, "swap-lo", seed=1)
    ts = tabulate(sw.records)
    rec = reconstruct(ts).records
    s = reidentify(
        rec, real_md, "perfect", tables=ts, cert_blocks=certify(ts, rec).blocks, seed=1
    ).summary()
    assert s["attack"]["nonmodal"]["precision_pct"] > s["prg"]["nonmodal"]["precision_pct"] + 40


def test_risk_targeted_swap_hits_small_blocks_and_keeps_its_rate():
    """swap-2010: households in small blocks are swapped far more often than those in large
    ones, the overall share stays near the rate, and the swapped file's agreement with the input
    is lowest in the smallest blocks (as the Bureau's HDF against the CEF)."""
    from tabrecon.metrics.agreement import agree

    md = synthesize(SynthConfig(persons=20_000), seed=11)
    r = swap(md, "swap-2010", seed=3)
    assert PRESETS["swap-2010"].target_power > 0
    assert 0.03 < r.swapped_units / r.units < 0.05
    by_bin = agree(r.records, truth=md, warn=False).by_bin
    small = by_bin.filter(pl.col("bin") == "1-9")["binned_pct"][0]
    large = by_bin.filter(pl.col("bin") == "250-499")["binned_pct"][0]
    assert small < 90 < large
    with pytest.raises(TabreconError, match="target_power"):
        SwapConfig(rate=0.1, target_power=-1)


def _partners(md, r):
    """(household a, household b) pairs that exchanged blocks in a swap run on ``md``."""
    hh = md.extra["household_id"].to_numpy()
    moved = r.records.block != md.block
    first = {}
    for h, b0, b1 in zip(hh[moved], md.block[moved], r.records.block[moved], strict=True):
        first.setdefault(h, (b0, b1))
    by_from = {}
    for h, (b0, b1) in first.items():
        by_from.setdefault((b0, b1), []).append(h)
    pairs = []
    for (b0, b1), hs in by_from.items():
        back = by_from.get((b1, b0), [])
        pairs += [(h, g) for h in hs for g in back]
    return pairs, hh


@pytest.mark.parametrize("match_on", ["size+adults", "composition"])
def test_partners_share_what_match_on_names(small_md, match_on):
    """Partners exchanging blocks share their number of adults, or their whole sex x agebin
    composition; the plain key (size only) does not guarantee either."""
    from dataclasses import replace

    from tabrecon.schema import AGEBIN_OF_AGE

    cfg = replace(PRESETS["swap-2010"], match_on=match_on, rate=0.2)
    r = swap(small_md, cfg, seed=4)
    pairs, hh = _partners(small_md, r)
    assert len(pairs) > 20
    md = small_md

    def profile(h):
        m = hh == h
        if match_on == "size+adults":
            return int(m.sum()), int((md.age[m] >= 18).sum())
        return tuple(
            sorted(zip(md.sex[m].tolist(), AGEBIN_OF_AGE[md.age[m]].tolist(), strict=True))
        )

    # a pair of blocks may exchange several households: some partner in the other block matches
    for h, _ in pairs:
        assert any(profile(h) == profile(g) for hh_, g in pairs if hh_ == h)
    assert r.invariants["block populations"]


def test_match_on_is_checked():
    with pytest.raises(TabreconError, match="match_on must be one of size, size"):
        SwapConfig(rate=0.1, match_on="race")


def test_a_rate_the_partners_cannot_meet_is_reported(small_md):
    """Risk-targeted swaps pair only the selected households: with a fine partner key many find
    no partner, and the run says it swapped fewer than asked instead of passing silently."""
    from dataclasses import replace

    assert swap(small_md, "swap-lo", seed=1).shortfall() is None
    r = swap(small_md, replace(PRESETS["swap-2010"], match_on="composition"), seed=1)
    assert r.swapped_units / r.units < 0.9 * 0.04
    assert "not the 4% asked for" in r.shortfall() and "composition" in r.shortfall()
    assert r.summary()["target_share"] == 0.04


def test_close_partner_pass_is_a_second_swap_between_equal_compositions(small_md):
    """close_rate: after the swap, a further share of households is swapped with partners of the
    same sex x agebin composition -- exactly a second composition-matched pass on the swapped
    file, at that rate and with the same selection -- and block populations are kept."""
    from dataclasses import replace

    base = SwapConfig(rate=0.04, target_power=0.7, name="t")
    both = swap(small_md, replace(base, close_rate=0.3), seed=5)
    first = swap(small_md, base, seed=5)
    second = swap(first.records, replace(base, rate=0.3, match_on="composition"), seed=6)
    assert np.array_equal(
        both.records.geoids[both.records.block], second.records.geoids[second.records.block]
    )
    assert both.close_units == second.swapped_units > 0
    assert both.swapped_units == first.swapped_units + second.swapped_units
    assert both.invariants["block populations"]
    s = both.summary()
    assert s["close_partner_units"] == both.close_units and s["close_partner_share_max"] == 0.3
    # the close pass cannot meet its rate (few households share a composition): only the first
    # pass's rate is held against what was asked
    assert second.shortfall() is not None
    assert both.shortfall() == first.shortfall()
    assert PRESETS["swap-2010"].close_rate > 0


def test_close_rate_is_checked():
    with pytest.raises(TabreconError, match="close_rate must be in"):
        SwapConfig(rate=0.1, close_rate=1.5)
