"""Household swapping as the Census Bureau simulated its 2010 method (methods.md section 5; the
replication archive's ``reid_swap``).

Per run:

1. **Key**: household size with noise -- with probability ``p_minus`` the key is size - 1, with
   ``p_plus`` size + 1 (partners must share a key; each keeps its true size). ``match_on`` can
   add the number of adults to the key, or replace it by the household's sex x agebin
   composition (:data:`MATCH_ON`).
2. **Pseudo-tract**: a household keeps its own tract with probability ``p_tract``; with ``p_county``
   it gets a tract permuted within its county; otherwise one permuted within its state.
3. **Pairing**: sort by (key descending, pseudo-county, pseudo-tract, random) and pair neighbours
   within each key.
4. **Rate**: pairs are drawn at random until ``rate`` x households are swapped.
5. **Swap**: partners exchange their block (persons follow their household).
6. **Close partners** (``close_rate`` > 0): the swapped file is swapped once more, at that rate
   and with the same selection, between partners of the same sex x agebin composition.

In the Bureau's simulation all households are eligible (no risk targeting, unlike the 2010
production swap). With ``target_power`` > 0 the swap is risk-targeted instead, as production was:
each household is selected with a propensity proportional to (its block's population) ^
-``target_power`` (households in small blocks are the ones at risk), scaled so that ``rate`` of
households are selected on average; the selected ones are then paired as above and swapped.
Without a ``household_id`` column every person is a household of one (and the run says so).
Without size noise partners have equal sizes and every block keeps its population; with it,
blocks gain or lose up to two persons per swap -- :class:`SwapResult` reports which invariants held.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import TabreconError
from ..io import beside, write_json
from ..schema import AGEBIN_OF_AGE, Microdata, write_microdata

#: What swap partners must share: the (noisy) size key only (the Bureau's simulation); also the
#: number of adults (persons aged 18 or over), as the 2010 production swap matched on "key
#: variables (e.g. numbers of adults and children)" (methods.md section 5); or the household's
#: whole sex x agebin38 composition (size noise does not apply), the closest partner possible
MATCH_ON = ("size", "size+adults", "composition")


@dataclass(frozen=True)
class SwapConfig:
    """A swapping run: target rate, size noise, where partners come from."""

    rate: float
    p_minus: float = 0.0
    p_plus: float = 0.0
    p_tract: float = 1.0
    p_county: float = 0.0
    name: str = "custom"
    target_power: float = 0.0
    match_on: str = "size"
    #: after the swap, a further share of households (selected the same way) swapped with
    #: partners of the same sex x agebin composition (:func:`swap`)
    close_rate: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise TabreconError(f"swap rate must be in (0, 1] (got {self.rate})")
        if self.match_on not in MATCH_ON:
            raise TabreconError(
                f"match_on must be one of {', '.join(MATCH_ON)} (got {self.match_on!r})"
            )
        if not 0 <= self.close_rate <= 1:
            raise TabreconError(f"close_rate must be in [0, 1] (got {self.close_rate})")
        if not 0 <= self.target_power <= 5:
            raise TabreconError(f"target_power must be in [0, 5] (got {self.target_power})")
        for k in ("p_minus", "p_plus", "p_tract", "p_county"):
            if not 0 <= getattr(self, k) <= 1:
                raise TabreconError(f"{k} must be a probability in [0, 1] (got {getattr(self, k)})")
        if self.p_minus + self.p_plus > 1:
            raise TabreconError("p_minus + p_plus must not exceed 1")
        if self.p_tract + self.p_county > 1 + 1e-12:
            raise TabreconError(
                f"p_tract + p_county must not exceed 1 (got {self.p_tract} + {self.p_county}); "
                "the rest is the share of partners drawn from the whole state"
            )


#: The two presets of the Bureau's simulation (methods.md section 5), and ``swap-2010``: a
#: risk-targeted swap standing in for the 2010 production's disclosure avoidance (its rate is
#: secret), sized so that on a synthetic population with the 2010 block-size mix the swapped
#: file's agreement with the input reproduces the Bureau's HDF-CEF agreement (binned 96.4%
#: overall, 74.0% in blocks of 1-9, 99.3% in blocks of 1000+; Abowd et al. Table 3). Measured
#: on 200,000 synthetic persons (seed 7): 96.3-96.4% overall, about 73% in 1-9, 99.7% in 1000+.
#: Its second pass (``close_rate`` 1.5%, partners of the same sex x agebin composition) makes the
#: attack after it as precise as the Bureau's perfect attacker CEF_atkr was in blocks of 1-9
#: (nonmodal 86.0%): a size-matched partner's persons rarely share the residents' (sex, agebin),
#: so they drop out of the linkage instead of linking to the wrong person: without the second
#: pass precision stays at 93%, with it 84.9% at 72.7% binned agreement in 1-9, on the
#: ``SynthConfig.reid_2010`` county (``python -m benchmarks.bench_perfect_attacker``).
PRESETS: dict[str, SwapConfig] = {
    "swap-lo": SwapConfig(rate=0.05, name="swap-lo"),
    "swap-hi": SwapConfig(
        rate=0.50, p_minus=0.25, p_plus=0.25, p_tract=0.30, p_county=0.40, name="swap-hi"
    ),
    "swap-2010": SwapConfig(rate=0.04, target_power=0.7, close_rate=0.015, name="swap-2010"),
}


@dataclass
class SwapResult:
    """The swapped records and what the run did and kept."""

    records: Microdata
    unit: str  # "households" or "persons (no household_id)"
    units: int
    swapped_units: int
    moved_persons: int
    invariants: dict[str, bool] = field(default_factory=dict)
    config: SwapConfig | None = None
    #: of ``swapped_units``, those swapped by the close-partner pass (``close_rate``): at most
    #: that rate, as only households with a partner of the same composition can take part
    close_units: int = 0

    def shortfall(self) -> str | None:
        """Why fewer units were swapped than the rate asked for, or None when the rate was met
        (within 10%): selected households that found no partner sharing the key stay put."""
        if self.config is None or not self.units:
            return None
        share = (self.swapped_units - self.close_units) / self.units
        if share >= 0.9 * self.config.rate:
            return None
        return (
            f"swapped {100 * share:.1f}% of {self.unit}, not the {100 * self.config.rate:g}% "
            f"asked for: selected units with no partner sharing their key "
            f"({self.config.match_on}) in the sort order stay put"
        )

    def summary(self) -> dict:
        return {
            "preset": self.config.name if self.config else None,
            "partners_share": self.config.match_on if self.config else None,
            "unit": self.unit,
            "units": self.units,
            "swapped_units": self.swapped_units,
            "swapped_share": self.swapped_units / self.units if self.units else 0.0,
            "target_share": self.config.rate if self.config else None,
            "close_partner_units": self.close_units,
            "close_partner_share_max": self.config.close_rate if self.config else None,
            "moved_persons": self.moved_persons,
            "invariants_kept": self.invariants,
        }

    def write(self, out: str | Path) -> list[Path]:
        """Write the swapped records (``out``: Parquet, CSV or gzip CSV) and what the run did
        (``<stem>_swap.json``)."""
        write_microdata(self.records, out)
        info = beside(out, "_swap.json")
        write_json(info, self.summary())
        return [Path(out), info]


def _permute_within(groups: np.ndarray, values: np.ndarray, rng: np.random.Generator) -> dict:
    """A random permutation of the distinct ``values`` within each group: value -> permuted
    value."""
    out: dict[int, int] = {}
    for g in np.unique(groups):
        vals = np.unique(values[groups == g])
        out.update(zip(vals.tolist(), rng.permutation(vals).tolist(), strict=True))
    return out


def _propensity(w: np.ndarray, rate: float) -> np.ndarray:
    """Selection probabilities proportional to ``w``, capped at 1, averaging ``rate``
    (bisection on the scale)."""
    lo, hi = 0.0, rate / max(float(w.mean()), 1e-300) * 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if np.minimum(mid * w, 1.0).mean() < rate:
            lo = mid
        else:
            hi = mid
    return np.minimum(hi * w, 1.0)


def swap(md: Microdata, config: SwapConfig | str = "swap-lo", seed: int = 0) -> SwapResult:
    """Swap households (or persons) between blocks; see the module docstring. Seeded.

    >>> import tabrecon as tr
    >>> md = tr.synthesize(tr.SynthConfig(persons=3000), seed=1)
    >>> r = swap(md, "swap-2010", seed=2)
    >>> r.invariants["block populations"], r.swapped_units > 0
    (True, True)
    """
    cfg = PRESETS[config] if isinstance(config, str) and config in PRESETS else config
    if isinstance(cfg, str):
        raise TabreconError(f"unknown swap preset {config!r}; choose from {', '.join(PRESETS)}")
    first = _swap_once(md, cfg, seed)
    if cfg.close_rate <= 0:
        return first
    close = replace(
        cfg, rate=cfg.close_rate, match_on="composition", p_minus=0.0, p_plus=0.0, close_rate=0.0
    )
    second = _swap_once(first.records, close, seed + 1)
    before = md.geoids[md.block]
    after = second.records.geoids[second.records.block]
    return SwapResult(
        replace(second.records, source=f"{md.source} swapped ({cfg.name}, seed {seed})"),
        first.unit,
        first.units,
        first.swapped_units + second.swapped_units,
        int((before != after).sum()),
        {k: v and second.invariants.get(k, True) for k, v in first.invariants.items()},
        cfg,
        close_units=second.swapped_units,
    )


def _swap_once(md: Microdata, cfg: SwapConfig, seed: int) -> SwapResult:
    """Steps 1-5 of the module docstring: one pass of pairing and swapping."""
    rng = np.random.default_rng(seed)
    if md.extra is not None and "household_id" in md.extra.columns:
        _, unit_of = np.unique(md.extra["household_id"].to_numpy(), return_inverse=True)
        unit = "households"
    else:
        unit_of = np.arange(len(md))
        unit = "persons (no household_id)"
    nu = int(unit_of.max()) + 1 if len(md) else 0
    size = np.bincount(unit_of, minlength=nu)
    ublock = np.zeros(nu, dtype=np.int64)
    ublock[unit_of] = md.block
    geo = md.geoids[ublock]
    tract = np.array([g[:11] for g in geo])
    county = np.array([g[:5] for g in geo])
    state = np.array([g[:2] for g in geo])
    # 1. key
    u = rng.random(nu)
    key = size + np.where(u < cfg.p_minus, -1, 0) + np.where(u >= 1 - cfg.p_plus, 1, 0)
    if cfg.match_on == "size+adults":
        adults = np.bincount(unit_of, weights=md.age >= 18, minlength=nu).astype(np.int64)
        key = key * (int(size.max()) + 2) + adults
    elif cfg.match_on == "composition":
        # each household's sorted (sex, agebin) multiset: one padded row per household
        sa = md.sex.astype(np.int64) * 64 + AGEBIN_OF_AGE[md.age]
        o = np.lexsort((sa, unit_of))
        slot = np.arange(len(md)) - np.repeat(np.cumsum(size) - size, size)
        rows = np.full((nu, int(size.max()) if nu else 0), -1, dtype=np.int64)
        rows[unit_of[o], slot] = sa[o]
        key = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1) + 1
    # 2. pseudo-tract
    r = rng.random(nu)
    by_county = _permute_within(county, tract, rng)
    by_state = _permute_within(state, tract, rng)
    pseudo = np.where(
        r < cfg.p_tract,
        tract,
        np.where(
            r < cfg.p_tract + cfg.p_county,
            [by_county[t] for t in tract],
            [by_state[t] for t in tract],
        ),
    )
    pseudo_county = np.array([t[:5] for t in pseudo])
    # 3. pairing: neighbours within a key after sorting
    _, pc = np.unique(pseudo_county, return_inverse=True)
    _, pt = np.unique(pseudo, return_inverse=True)
    order = np.lexsort((rng.random(nu), pt, pc, -key))
    k = key[order]
    start = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1] if nu else np.zeros(0, dtype=np.int64)
    rank = np.arange(nu) - np.repeat(start, np.diff(np.r_[start, nu]))
    first = np.flatnonzero(
        (rank % 2 == 0) & (np.r_[rank[1:], -1] == rank + 1) if nu else np.zeros(0, bool)
    )
    a, b = order[first], order[first + 1]
    if cfg.target_power > 0:
        # risk-targeted: select households by propensity, then pair the selected ones only
        bpop = np.bincount(md.block, minlength=len(md.geoids)).astype(float)
        w = np.maximum(bpop[ublock], 1.0) ** -cfg.target_power
        chosen = rng.random(nu) < _propensity(w, cfg.rate)
        sel = np.flatnonzero(chosen)
        order = sel[np.lexsort((rng.random(sel.size), pt[sel], pc[sel], -key[sel]))]
        k = key[order]
        m = order.size
        start = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1] if m else np.zeros(0, np.int64)
        rank = np.arange(m) - np.repeat(start, np.diff(np.r_[start, m]))
        first = np.flatnonzero((rank % 2 == 0) & (np.r_[rank[1:], -1] == rank + 1)) if m else first
        a, b = order[first], order[first + 1]
        want = a.size
    else:
        # 4. rate: random pairs until rate x units are swapped
        want = int(round(cfg.rate * nu / 2))
        if want > a.size:
            raise TabreconError(
                f"rate {cfg.rate} asks for {2 * want:,} swapped units but only {2 * a.size:,} "
                "can be paired"
            )
        pick = rng.permutation(a.size)[:want]
        a, b = a[pick], b[pick]
    # 5. swap blocks
    new_ublock = ublock.copy()
    new_ublock[a], new_ublock[b] = ublock[b], ublock[a]
    new_block = new_ublock[unit_of]
    moved = int((new_block != md.block).sum())
    out = replace(
        md,
        block=new_block.astype(np.int32),
        source=f"{md.source} swapped ({cfg.name}, seed {seed})",
    )
    inv = {}
    for lvl, n in (("block", 15), ("tract", 11), ("county", 5), ("state", 2)):
        before = np.unique(np.array([g[:n] for g in md.geoids])[md.block], return_counts=True)
        after = np.unique(np.array([g[:n] for g in md.geoids])[new_block], return_counts=True)
        inv[f"{lvl} populations"] = bool(
            before[0].size == after[0].size
            and (before[0] == after[0]).all()
            and (before[1] == after[1]).all()
        )
    # a swap may empty a block: keep only blocks still inhabited
    out = out.take(np.arange(len(out)))
    return SwapResult(out, unit, nu, 2 * want, moved, inv, cfg)
