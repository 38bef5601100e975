"""Defenses as values: one interface for swapping, TopDown and every budget spec, one parser.

A :class:`Defense` has a ``name`` (its spec), a privacy ``cost`` (a
:class:`~tabrecon.defenses.mechanisms.PrivacyCost`, or ``None`` when it makes no DP claim) and
``protect(microdata, rng) -> Protected``. :meth:`Defense.parse` reads the spec grammar that the
config file, the CLI and Python share:

==================  ============================================================================
``none``            the release as tabulated
``swap-lo``         household swapping, the Bureau's low preset (5% of households)
``swap-hi``         the high preset (50%, size noise, partners from tract/county/state)
``swap=<rate>``     swap-lo's design at another household rate in (0, 1]
``dhc2023-like``    TopDown with the 2023 DHC persons budget (rho 4.9622) and its level shares
``dhc2020-production``  as produced in 2020: the PL 94-171 persons run (rho 2.5562, its level
                    and query shares) first, then dhc2023-like with every geounit's voting age
                    x Hispanic x race counts held to the PL run's; composed rho 7.5184
``rho=<x>``         the same shares at total zCDP budget ``x``
``eps=<x>``         the same, ``x`` the epsilon at delta 1e-10 (converted to rho by CKS)
==================  ============================================================================

>>> d = Defense.parse("rho=2")
>>> d.name, round(d.cost.epsilon, 2)
('rho=2', 14.87)
>>> Defense.parse("swap=0.2").cost is None
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..schema import Microdata
from .mechanisms import PrivacyCost, epsilon_to_rho
from .swapping import PRESETS, SwapConfig, swap
from .topdown import PL94_RHO, dhc2023_like, pl94_2020, topdown

#: The DHC 2023 persons budget (methods.md section 6).
DHC2023_RHO = 4.9622

GRAMMAR = (
    f"none, {', '.join(PRESETS)}, swap=<rate>, dhc2023-like, dhc2020-production, "
    "rho=<budget> or eps=<budget>"
)


@dataclass
class Protected:
    """What a defense released: the protected records, what it did, its noisy measurements
    (TopDown: level, geoid, query, group, noisy, variance; else ``None``) and its cost."""

    records: Microdata
    info: dict[str, Any]
    measurements: pl.DataFrame | None = None
    cost: PrivacyCost | None = None


@dataclass(frozen=True)
class Defense:
    """A disclosure-avoidance method as a value. Build one with :meth:`parse`."""

    name: str

    @property
    def cost(self) -> PrivacyCost | None:
        """The privacy cost the defense proves, or ``None`` (no differential-privacy claim)."""
        return None

    def protect(
        self, microdata: Microdata, rng: int | np.random.Generator = 0, workers: int = 1
    ) -> Protected:
        """The protected release of ``microdata`` (``rng`` seeds any randomness that may be
        seeded; ``workers`` processes where the method can use them)."""
        return Protected(microdata, {"kind": "none"})

    @staticmethod
    def parse(spec: str) -> Defense:
        """The defense a spec names (see the module docstring); a clear
        :class:`~tabrecon.errors.TabreconError` for anything else."""
        problem = Defense.check(spec)
        if problem is not None:
            raise TabreconError(f"defense {spec!r}: {problem}")
        if spec == "none":
            return Defense("none")
        if spec in PRESETS:
            return Swapping(spec, PRESETS[spec])
        if spec.startswith("swap="):
            return Swapping(spec, replace(PRESETS["swap-lo"], rate=float(spec[5:]), name=spec))
        if spec == "dhc2023-like":
            return TopDown(spec, DHC2023_RHO)
        if spec == "dhc2020-production":
            return TopDown(spec, DHC2023_RHO, pl94_rho=PL94_RHO)
        value = float(spec[4:])
        return TopDown(spec, epsilon_to_rho(value) if spec.startswith("eps=") else value)

    @staticmethod
    def check(spec: str) -> str | None:
        """What is wrong with a spec, in words, or ``None`` when it is valid."""
        if spec in ("none", "dhc2023-like", "dhc2020-production") or spec in PRESETS:
            return None
        for pre, ok, example in (
            ("rho=", lambda v: math.isfinite(v) and v > 0, "rho=2.5"),
            ("eps=", lambda v: math.isfinite(v) and v > 0, "eps=17.14"),
            ("swap=", lambda v: 0 < v <= 1, "swap=0.2"),
        ):
            if spec.startswith(pre):
                what = "a rate in (0, 1]" if pre == "swap=" else "a finite positive number"
                try:
                    if ok(float(spec[len(pre) :])):
                        return None
                except ValueError:
                    return f"the value must be a number, {what}, e.g. {example}"
                return f"{pre}<value> needs {what}, e.g. {example}"
        return f"unknown defense; use {GRAMMAR}"


@dataclass(frozen=True)
class Swapping(Defense):
    """Household swapping (methods.md section 5): no privacy cost is claimed."""

    config: SwapConfig = field(default_factory=lambda: PRESETS["swap-lo"])

    def protect(
        self, microdata: Microdata, rng: int | np.random.Generator = 0, workers: int = 1
    ) -> Protected:
        r = swap(microdata, self.config, rng)  # type: ignore[arg-type]
        return Protected(r.records, {"kind": "swap", **r.summary()})


@dataclass(frozen=True)
class TopDown(Defense):
    """TopDown at total zCDP budget ``rho`` with the 2023 DHC level shares, after a PL 94-171 run
    at ``pl94_rho`` when that is given (the 2020 production; costs compose). Its noise comes from
    OpenDP's cryptographic sampler: ``rng`` does not seed it (a release must not be
    reproducible from a seed)."""

    rho: float = DHC2023_RHO
    pl94_rho: float | None = None

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.zcdp(self.rho + (self.pl94_rho or 0.0))

    def protect(
        self, microdata: Microdata, rng: int | np.random.Generator = 0, workers: int = 1
    ) -> Protected:
        pl94 = pl94_2020(self.pl94_rho) if self.pl94_rho is not None else None
        r = topdown(microdata, dhc2023_like(self.rho), workers=workers, pl94=pl94)
        info = {
            "kind": "topdown",
            "rho": self.rho + (self.pl94_rho or 0.0),
            **{k: v for k, v in r.privacy.items() if k != "levels"},
            "seconds_by_level": r.seconds_by_level,
            "fallbacks": r.fallbacks,
        }
        return Protected(r.records, info, r.measurements, r.cost)


__all__ = ["DHC2023_RHO", "GRAMMAR", "Defense", "Protected", "Swapping", "TopDown"]
