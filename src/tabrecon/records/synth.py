"""Synthetic populations: a realistic county (tracts > block groups > blocks > households >
persons).

Calibrated to published 2010 Census figures (targets in :data:`TARGETS`): block sizes follow the
national distribution of persons by block size, race and ethnicity are clustered by block and
household so that about 78% of people share their block's most common race x ethnicity, and the
national race, ethnicity, age and sex composition is matched. Everything is drawn from one
``numpy.random.Generator`` seeded by the caller, vectorised (1M persons in a few seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..schema import (
    AGE_MAX,
    BLOCK_SIZE_BINS,
    CODE_OF_BITS,
    RACE_COUNT,
    RACES,
    Microdata,
)

#: 2010 Census figures the generator is calibrated to (and reports itself against).
TARGETS: dict[str, Any] = {
    "block_size_person_share": dict(
        zip(
            ("1-9", "10-49", "50-99", "100-249", "250-499", "500-999", "1000+"),
            (0.026, 0.219, 0.224, 0.259, 0.139, 0.088, 0.045),
            strict=True,
        )
    ),
    "race_alone_share": {
        "white": 0.724,
        "black": 0.126,
        "aian": 0.009,
        "asian": 0.048,
        "nhpi": 0.002,
        "sor": 0.062,
        "two_or_more": 0.029,
    },
    "hispanic_share": 0.163,
    "median_age": 37.2,
    "under18_share": 0.24,
    "over65_share": 0.13,
    "modal_share": 0.78,
    "mean_household_size": 2.58,
}

# 2010 population by 5-year age group (per cent), 0-4 ... 95-99, 100+.
_AGE5 = np.array(
    [
        6.5,
        6.6,
        6.7,
        7.1,
        7.0,
        6.8,
        6.5,
        6.5,
        6.8,
        7.4,
        7.2,
        6.4,
        5.4,
        4.0,
        3.0,
        2.4,
        1.9,
        1.2,
        0.5,
        0.1,
        0.02,
    ]
)
# 2010 household size distribution 1..7 (7 = 7+, drawn as 7-9).
_HH_SIZE = np.array([0.267, 0.336, 0.158, 0.137, 0.063, 0.024, 0.015])
#: the stream's 1-person share is scaled by this so that cutting households at block
#: boundaries (which makes extra small households) leaves about 2010's share (measured:
#: ``tabrecon synth --persons 200000``'s calibration)
ONE_PERSON_SCALE = 0.9


def age_pmf() -> np.ndarray:
    """Probability of each single age 0..110 in the 2010 population (from 5-year groups)."""
    pmf = np.zeros(AGE_MAX + 1)
    for i, share in enumerate(_AGE5):
        lo = 5 * i
        hi = min(lo + 5, 106) if i == 20 else lo + 5
        pmf[lo:hi] += share / (hi - lo)
    # a sprinkle above 105 so the top code exists
    pmf[106:] = 0.0002
    return pmf / pmf.sum()


def _race_groups() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(race code, hispanic, probability) of the race x ethnicity groups drawn nationally."""
    bit = {r: 1 << i for i, r in enumerate(RACES)}
    multi = [  # two-or-more combinations and their shares of the 2.9%
        (bit["white"] | bit["black"], 0.26),
        (bit["white"] | bit["sor"], 0.19),
        (bit["white"] | bit["asian"], 0.18),
        (bit["white"] | bit["aian"], 0.16),
        (bit["black"] | bit["sor"], 0.04),
        (bit["black"] | bit["aian"], 0.03),
        (bit["white"] | bit["black"] | bit["aian"], 0.03),
        (bit["white"] | bit["nhpi"], 0.02),
        (bit["asian"] | bit["nhpi"], 0.02),
        (bit["white"] | bit["asian"] | bit["nhpi"], 0.01),
        (bit["black"] | bit["asian"], 0.02),
        (bit["aian"] | bit["sor"], 0.01),
        (bit["white"] | bit["black"] | bit["sor"], 0.01),
        (bit["white"] | bit["black"] | bit["aian"] | bit["asian"], 0.01),
    ]
    total = {
        "white": 0.724,
        "black": 0.126,
        "aian": 0.009,
        "asian": 0.048,
        "nhpi": 0.002,
        "sor": 0.062,
    }
    # share of each race among Hispanics (2010: 53% White, 37% SOR, 6% two+, rest small)
    hisp_given = {
        "white": 0.530,
        "black": 0.025,
        "aian": 0.014,
        "asian": 0.004,
        "nhpi": 0.001,
        "sor": 0.366,
    }
    H = 0.163
    codes, hisp, prob = [], [], []
    for r, p in total.items():
        ph = H * hisp_given[r]
        codes += [CODE_OF_BITS[bit[r]]] * 2
        hisp += [1, 0]
        prob += [ph, p - ph]
    multi_h = H * 0.06
    s = sum(w for _, w in multi)
    for b, w in multi:
        codes += [CODE_OF_BITS[b]] * 2
        hisp += [1, 0]
        prob += [multi_h * w / s, (0.029 - multi_h) * w / s]
    prob_a = np.array(prob)
    return np.array(codes, dtype=np.int8), np.array(hisp, dtype=np.int8), prob_a / prob_a.sum()


@dataclass
class SynthConfig:
    """Knobs of the synthetic county; defaults reproduce the 2010 calibration targets."""

    persons: int = 20_000
    state: str = "99"
    county: str = "001"
    tract_min: int = 1_200
    tract_max: int = 8_000
    #: probability that a household takes its block's dominant race x ethnicity (in a block of
    #: s persons: ``block_cohesion - cohesion_slope * log10(s)``, clipped to [0, 1])
    block_cohesion: float = 0.63
    #: probability that a household member shares the household's race x ethnicity
    household_cohesion: float = 0.95
    #: how much less cohesive a block is per tenfold of its population (0: every block alike)
    cohesion_slope: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.tract_min <= self.tract_max:
            raise TabreconError(
                f"tract sizes must satisfy 1 <= tract_min <= tract_max "
                f"(got {self.tract_min} and {self.tract_max})"
            )
        if not 0 <= self.household_cohesion <= 1:
            raise TabreconError(
                f"household_cohesion must be a probability (got {self.household_cohesion})"
            )
        if self.cohesion_slope < 0 or self.block_cohesion < 0:
            raise TabreconError(
                "block_cohesion and cohesion_slope must not be negative "
                f"(got {self.block_cohesion}, {self.cohesion_slope})"
            )
        if self.cohesion_slope == 0 and self.block_cohesion > 1:
            raise TabreconError(
                f"block_cohesion must be a probability when cohesion_slope is 0 "
                f"(got {self.block_cohesion})"
            )

    @classmethod
    def reid_2010(cls, persons: int = 20_000, **kw: Any) -> SynthConfig:
        """A county whose small blocks are homogeneous and large blocks mixed, as the nation's
        were in 2010: a household takes its block's group with probability
        1.5 - 0.4 log10(size), clipped to [0, 1] -- 1 in blocks of up to 17 persons, 0.7 at
        100, 0.3 at 1,000.

        The Bureau's figures imply it: about 10% of persons in blocks under 100 were nonmodal
        (13.2 of about 129 million) against about 35% in larger blocks (Abowd et al., Table 5
        and text), where the default county has about 22% at every size. The two parameters
        minimise, on a grid, the squared residuals of tabrecon's perfect attacker after
        ``swap-2010`` against the Bureau's CEF_atkr (nonmodal precision in each block-size bin,
        precision for all and for nonmodal persons, reconstruction and truth), averaged over
        three seeds: 82.8, against 283.3 for the default county. The good fits lie on a ridge
        (block_cohesion about 0.7 + 2 x slope), and along it the minimum is shallow: 85.5 at
        1.4 - 0.35 and 86.8 at 1.55 - 0.425, within the spread between seeds
        (``python -m benchmarks.bench_perfect_attacker``). Figures measured on the default
        county are unchanged; this one is for comparisons with the Bureau's linkage
        (``benchmarks.bench_attacker`` fits ``commercial-2010`` on it).

        >>> cfg = SynthConfig.reid_2010(persons=1000)
        >>> (cfg.block_cohesion, cfg.cohesion_slope)
        (1.5, 0.4)
        """
        return cls(persons=persons, **{"block_cohesion": 1.5, "cohesion_slope": 0.4, **kw})


def _block_sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    share = np.array(list(TARGETS["block_size_person_share"].values()))
    lo = np.array([b[0] for b in BLOCK_SIZE_BINS], dtype=float)
    hi = np.array([b[1] for b in BLOCK_SIZE_BINS], dtype=float)
    hi[-1] = 2500.0
    mean = (hi - lo) / np.log(hi / lo)  # mean of a log-uniform draw on [lo, hi]
    pblock = share / mean
    pblock /= pblock.sum()
    est = int(n / (pblock @ mean) * 1.3) + 20
    k = rng.choice(len(share), size=est, p=pblock)
    size = np.floor(np.exp(rng.uniform(np.log(lo[k]), np.log(hi[k] + 1)))).astype(np.int64)
    size = np.clip(size, lo[k].astype(np.int64), hi[k].astype(np.int64))
    csum = np.cumsum(size)
    last = int(np.searchsorted(csum, n)) + 1
    return size[:last]


def draw_races(
    rng: np.random.Generator,
    cfg: SynthConfig,
    block: np.ndarray,
    household: np.ndarray,
    n_blocks: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(race code, hispanic) of each person: a dominant race x ethnicity group per block, a group
    per household (the block's with probability ``block_cohesion``, less ``cohesion_slope`` per
    tenfold of the block's population), a person's group (the household's with probability
    ``household_cohesion``)."""
    codes, hisps, prob = _race_groups()
    ng = len(prob)
    N = block.size
    n_hh = int(household.max()) + 1
    block_dom = rng.choice(ng, size=n_blocks, p=prob)
    hh_block = np.zeros(n_hh, dtype=np.int64)
    hh_block[household] = block
    size = np.maximum(np.bincount(block, minlength=n_blocks), 1)
    cohesion = np.clip(cfg.block_cohesion - cfg.cohesion_slope * np.log10(size), 0.0, 1.0)
    hh_grp = np.where(
        rng.random(n_hh) < cohesion[hh_block],
        block_dom[hh_block],
        rng.choice(ng, size=n_hh, p=prob),
    )
    grp = np.where(
        rng.random(N) < cfg.household_cohesion, hh_grp[household], rng.choice(ng, size=N, p=prob)
    )
    return codes[grp], hisps[grp]


def synthesize(config: SynthConfig | None = None, seed: int = 0) -> Microdata:
    """Synthesize a county. Deterministic for a (config, seed)."""
    cfg = config or SynthConfig()
    if cfg.persons <= 0:
        raise TabreconError("persons must be positive")
    rng = np.random.default_rng(seed)
    sizes = _block_sizes(rng, cfg.persons)
    rng.shuffle(sizes)
    nb = len(sizes)
    # tracts: consecutive runs of blocks with a population target drawn in [tract_min, tract_max]
    tract_of = np.zeros(nb, dtype=np.int64)
    t, acc = 0, 0
    # targets of 2,500 to 6,000 persons (as most 2010 tracts), within the configured bounds
    lo = max(cfg.tract_min, min(2500, cfg.tract_max))
    hi = max(lo, min(cfg.tract_max, 6000))
    target = rng.integers(lo, hi + 1)
    for i, s in enumerate(sizes):
        if acc > 0 and acc + s > cfg.tract_max:
            t, acc = t + 1, 0
            target = rng.integers(lo, hi + 1)
        tract_of[i] = t
        acc += s
        if acc >= target:
            t, acc = t + 1, 0
            target = rng.integers(lo, hi + 1)
    # block numbers within tract: block group digit 1-9, then a 3-digit serial
    geoids = np.empty(nb, dtype=object)
    seen: dict[int, int] = {}
    for i in range(nb):
        j = seen.get(tract_of[i], 0)
        seen[tract_of[i]] = j + 1
        bg, serial = 1 + (j // 40) % 9, j % 40 + 40 * (j // 360)  # 4 digits for up to 9,000 blocks
        geoids[i] = f"{cfg.state}{cfg.county}{100 * (tract_of[i] + 1):06d}{bg}{serial:03d}"
    order = np.argsort(geoids.astype(str))
    sizes, geoids = sizes[order], geoids[order].astype(str)
    N = int(sizes.sum())
    block = np.repeat(np.arange(nb, dtype=np.int32), sizes)
    # households: one stream of 2010 household sizes cut at block boundaries (a block's last
    # household is cut short, which makes extra small households: the 1-person share of the
    # stream is lowered by ONE_PERSON_SCALE so that the county's stays near 2010's). Until
    # 2026-11-26 the stream restarted at every block, so every block took the same leading
    # sizes (200,000 persons: 37% of households of 1 person and 30% of 2, against 2010's 27%
    # and 33%, mean size 2.25 against 2.58); figures measured before then used that county.
    p = _HH_SIZE.copy()
    p[0] *= ONE_PERSON_SCALE
    hh_draw = rng.choice(7, size=N, p=p / p.sum()) + 1
    hh_draw = np.where(hh_draw == 7, rng.integers(7, 10, size=N), hh_draw)
    hh_index = np.searchsorted(np.cumsum(hh_draw), np.arange(N), side="right")
    _, household = np.unique(block.astype(np.int64) * (N + 1) + hh_index, return_inverse=True)
    race, hisp = draw_races(rng, cfg, block, household, nb)
    age = rng.choice(AGE_MAX + 1, size=N, p=age_pmf()).astype(np.int16)
    pfem = np.select([age < 20, age < 65, age < 80], [0.488, 0.503, 0.55], 0.65)
    sex = (rng.random(N) < pfem).astype(np.int8)
    extra = pl.DataFrame({"household_id": household.astype(np.int64)})
    md = Microdata(
        geoids=geoids,
        block=block,
        sex=sex,
        age=age,
        race=race.astype(np.int8),
        hisp=hisp.astype(np.int8),
        extra=extra,
        source=f"synthetic county {cfg.state}{cfg.county} (seed {seed})",
    )
    md.meta["seed"] = seed
    return md


def calibration(md: Microdata) -> list[tuple[str, float, float]]:
    """(figure, measured, 2010 target) for the generator's calibration targets."""
    out: list[tuple[str, float, float]] = []
    pop = np.bincount(md.block, minlength=len(md.geoids))
    from ..schema import size_bin

    sb = size_bin(pop)
    share = np.bincount(sb[sb >= 0], weights=pop[sb >= 0], minlength=7) / pop.sum()
    for (label, tgt), s in zip(TARGETS["block_size_person_share"].items(), share, strict=True):
        out.append((f"persons in blocks of {label}", float(s), tgt))
    cnt = RACE_COUNT[md.race - 1]
    flags = md.flags()
    for i, r in enumerate(RACES):
        out.append(
            (
                f"{r} alone",
                float(((cnt == 1) & (flags[:, i] == 1)).mean()),
                TARGETS["race_alone_share"][r],
            )
        )
    out.append(
        ("two or more races", float((cnt >= 2).mean()), TARGETS["race_alone_share"]["two_or_more"])
    )
    out.append(("Hispanic", float(md.hisp.mean()), TARGETS["hispanic_share"]))
    out.append(("median age", float(np.median(md.age)), TARGETS["median_age"]))
    out.append(("under 18", float((md.age < 18).mean()), TARGETS["under18_share"]))
    out.append(("65 and over", float((md.age >= 65).mean()), TARGETS["over65_share"]))
    # share of persons whose race x ethnicity is their block's most common
    g = (md.race.astype(np.int64) - 1) * 2 + md.hisp
    key = md.block.astype(np.int64) * 126 + g
    uk, c = np.unique(key, return_counts=True)
    blk = uk // 126
    modal = np.zeros(len(md.geoids), dtype=np.int64)
    np.maximum.at(modal, blk, c)
    out.append(
        (
            "share in block's modal race x ethnicity",
            float(modal.sum() / len(md)),
            TARGETS["modal_share"],
        )
    )
    if md.extra is not None and "household_id" in md.extra.columns:
        nh = md.extra["household_id"].n_unique()
        out.append(("mean household size", len(md) / nh, TARGETS["mean_household_size"]))
    return out
