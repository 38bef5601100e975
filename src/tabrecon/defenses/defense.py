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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..schema import Microdata
from .mechanisms import Noise, PrivacyCost, epsilon_to_rho
from .swapping import PRESETS, SwapConfig, swap
from .topdown import PL94_RHO, dhc2023_like, pl94_2020, topdown

#: The DHC 2023 persons budget (methods.md section 6).
DHC2023_RHO = 4.9622


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family of defense specs: what a spec of it looks like, how to build its defense, and
    an example for the grammar and the contract battery (``tests/test_defense_battery.py``).

    A family is named (``names``: whole specs such as ``swap-lo``) or takes a value (``prefix``
    ``rho=``, with the value's rule ``valid`` and its description ``needs``). ``seeded`` says
    whether ``protect``'s ``rng`` makes the release reproducible (swapping: yes; TopDown: only
    with seeded noise, :meth:`Defense.with_noise`; its noise comes from a cryptographic sampler
    otherwise)."""

    #: what the family is, and the word for its value in the grammar (``rho=<budget>``)
    word: str
    make: Callable[[str], Defense] = field(compare=False)
    names: tuple[str, ...] = ()
    prefix: str = ""
    valid: Callable[[float], bool] = field(default=lambda v: True, compare=False)
    needs: str = ""
    example: str = ""
    seeded: bool = True

    def owns(self, spec: str) -> bool:
        return spec in self.names or bool(self.prefix) and spec.startswith(self.prefix)

    def problem(self, spec: str) -> str | None:
        """What is wrong with a spec this family owns, or ``None``."""
        if spec in self.names:
            return None
        try:
            value = float(spec[len(self.prefix) :])
        except ValueError:
            return f"the value must be a number, {self.needs}, e.g. {self.example}"
        return (
            None
            if self.valid(value)
            else f"{self.prefix}<value> needs {self.needs}, e.g. {self.example}"
        )

    @property
    def grammar(self) -> str:
        return ", ".join(self.names) if self.names else f"{self.prefix}<{self.word}>"


#: every family of defense specs, in the grammar's order (:func:`register_family` adds one)
FAMILIES: list[Family] = []


def register_family(f: Family) -> Family:
    """Add a family of defense specs (refused when one of its specs is another family's)."""
    for other in FAMILIES:
        if set(f.names) & set(other.names) or (f.prefix and f.prefix == other.prefix):
            raise TabreconError(f"defense family {f.grammar!r} overlaps {other.grammar!r}")
    FAMILIES.append(f)
    return f


def grammar() -> str:
    """Every spec the parser takes, in words (``none, swap-lo, ..., rho=<budget> or ...``)."""
    parts = [f.grammar for f in FAMILIES]
    return ", ".join(parts[:-1]) + f" or {parts[-1]}" if len(parts) > 1 else "".join(parts)


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

    def with_noise(self, noise: Noise) -> Defense:
        """This defense with its noise from ``noise``'s source (a defense without
        differential-privacy noise is itself)."""
        return self

    @staticmethod
    def parse(spec: str) -> Defense:
        """The defense a spec names (see the module docstring); a clear
        :class:`~tabrecon.errors.TabreconError` for anything else."""
        problem = Defense.check(spec)
        if problem is not None:
            raise TabreconError(f"defense {spec!r}: {problem}")
        return next(f for f in FAMILIES if f.owns(spec)).make(spec)

    @staticmethod
    def check(spec: str) -> str | None:
        """What is wrong with a spec, in words, or ``None`` when it is valid."""
        for f in FAMILIES:
            if f.owns(spec):
                return f.problem(spec)
        return f"unknown defense; use {grammar()}"


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
    OpenDP's cryptographic sampler, which ``rng`` does not seed (a release must not be
    reproducible from a seed), unless ``noise`` is :attr:`Noise.SEEDED` (:meth:`with_noise`: an
    experiment that repeats)."""

    rho: float = DHC2023_RHO
    pl94_rho: float | None = None
    noise: Noise = Noise.SECURE

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost.zcdp(self.rho + (self.pl94_rho or 0.0))

    def with_noise(self, noise: Noise) -> Defense:
        return replace(self, noise=noise)

    def protect(
        self, microdata: Microdata, rng: int | np.random.Generator = 0, workers: int = 1
    ) -> Protected:
        pl94 = pl94_2020(self.pl94_rho) if self.pl94_rho is not None else None
        seed = int(rng.integers(2**62)) if isinstance(rng, np.random.Generator) else int(rng)
        r = topdown(
            microdata,
            dhc2023_like(self.rho),
            seed,
            workers=workers,
            pl94=pl94,
            noise=self.noise,
        )
        info = {
            "kind": "topdown",
            "noise": str(self.noise),
            "rho": self.rho + (self.pl94_rho or 0.0),
            **{k: v for k, v in r.privacy.items() if k != "levels"},
            "seconds_by_level": r.seconds_by_level,
            "fallbacks": r.fallbacks,
        }
        return Protected(r.records, info, r.measurements, r.cost)


def _positive(v: float) -> bool:
    return math.isfinite(v) and v > 0


for _family in (
    Family(word="none", names=("none",), make=Defense, example="none"),
    Family(
        word="swap presets",
        names=tuple(PRESETS),
        make=lambda spec: Swapping(spec, PRESETS[spec]),
        example="swap-lo",
    ),
    Family(
        word="rate",
        prefix="swap=",
        make=lambda spec: Swapping(
            spec, replace(PRESETS["swap-lo"], rate=float(spec[5:]), name=spec)
        ),
        valid=lambda v: 0 < v <= 1,
        needs="a rate in (0, 1]",
        example="swap=0.2",
    ),
    Family(
        word="topdown presets",
        names=("dhc2023-like", "dhc2020-production"),
        make=lambda spec: (
            TopDown(spec, DHC2023_RHO)
            if spec == "dhc2023-like"
            else TopDown(spec, DHC2023_RHO, pl94_rho=PL94_RHO)
        ),
        example="dhc2023-like",
        seeded=False,
    ),
    Family(
        word="budget",
        prefix="rho=",
        make=lambda spec: TopDown(spec, float(spec[4:])),
        valid=_positive,
        needs="a finite positive number",
        example="rho=2.5",
        seeded=False,
    ),
    Family(
        word="budget",
        prefix="eps=",
        make=lambda spec: TopDown(spec, epsilon_to_rho(float(spec[4:]))),
        valid=_positive,
        needs="a finite positive number",
        example="eps=17.14",
        seeded=False,
    ),
):
    register_family(_family)

#: the grammar in words (kept for its readers; :func:`grammar` is computed from the families)
GRAMMAR = grammar()

__all__ = [
    "DHC2023_RHO",
    "FAMILIES",
    "GRAMMAR",
    "Defense",
    "Family",
    "Protected",
    "Swapping",
    "TopDown",
    "grammar",
    "register_family",
]
