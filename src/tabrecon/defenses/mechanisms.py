"""Differential-privacy mechanisms as values that carry their privacy cost, their noise law and
an exact sampler (OpenDP), plus zCDP accounting and the accuracy helpers used across tabrecon.

* :func:`discrete_gaussian` -- zCDP: rho = Delta_2^2 / (2 sigma^2). For counts of a histogram under
  bounded DP (a changed record moves two cells by one) Delta_2 = sqrt(2), so sigma^2 = 1/rho.
* :func:`discrete_laplace` (two-sided geometric) -- pure DP: epsilon = Delta_1 / scale; bounded DP
  on a histogram has Delta_1 = 2.

Samples come from OpenDP's exact samplers (no floating-point noise in a release), or, for an
experiment that must repeat, from a seeded generator (:class:`Noise`). Compositions add
up (:func:`compose`); zCDP converts to (epsilon, delta) by Canonne-Kamath-Steinke Cor. 13 (the
Bureau's conversion) or the looser Bun-Steinke bound.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import TabreconError
from ..vocab import Words

BOUNDED_L2 = math.sqrt(2.0)  # bounded DP, one histogram: a changed record moves two cells
BOUNDED_L1 = 2.0


class Noise(Words):
    """Where a mechanism's noise comes from."""

    #: OpenDP's exact samplers, cryptographically secure: what a release must use; never the
    #: same twice
    SECURE = "secure"
    #: numpy's PCG64 from the run's seed, drawn from the noise law's probability mass function
    #: (exact to double precision): the same draws for the same seed, so an experiment repeats;
    #: never for a release (whoever knows the seed knows the noise)
    SEEDED = "seeded"


@functools.lru_cache(maxsize=1)
def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@dataclass(frozen=True)
class PrivacyCost:
    """What a release spends, one type for every mechanism and for TopDown (OpenDP's habit: a
    measurement carries its privacy map's value).

    ``rho`` is the zCDP cost; ``epsilon`` the (epsilon, ``delta``)-DP reading of it (Canonne-
    Kamath-Steinke, the Bureau's conversion), or a pure-DP cost when ``delta`` is 0.

    >>> c = PrivacyCost.zcdp(2.0)
    >>> round(c.epsilon, 2), c.delta
    (14.87, 1e-10)
    >>> (c + PrivacyCost.zcdp(1.0)).rho
    3.0
    """

    rho: float
    epsilon: float
    delta: float

    @classmethod
    def zcdp(cls, rho: float, delta: float = 1e-10) -> PrivacyCost:
        """A rho-zCDP cost, read as (epsilon, ``delta``)-DP by CKS."""
        return cls(float(rho), rho_to_epsilon(rho, delta), delta)

    @classmethod
    def pure(cls, epsilon: float) -> PrivacyCost:
        """A pure epsilon-DP cost (which is also epsilon^2 / 2 zCDP)."""
        return cls(epsilon**2 / 2.0, float(epsilon), 0.0)

    def __add__(self, other: PrivacyCost) -> PrivacyCost:
        """Sequential composition: zCDP costs add; pure costs add when both are pure."""
        if self.delta == 0 and other.delta == 0:
            return PrivacyCost.pure(self.epsilon + other.epsilon)
        return PrivacyCost.zcdp(self.rho + other.rho, max(self.delta, other.delta) or 1e-10)

    def to_dict(self) -> dict[str, float]:
        return {"rho": self.rho, "epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True)
class Mechanism:
    """An additive integer-noise mechanism: its law, scale, sensitivity and privacy cost."""

    kind: str  # "discrete_gaussian" | "discrete_laplace"
    scale: float  # sigma (Gaussian) or b (Laplace: P(k) proportional to exp(-|k|/b))
    sensitivity: float  # L2 (Gaussian) or L1 (Laplace)

    @property
    def rho(self) -> float | None:
        """zCDP cost (Gaussian): Delta^2 / (2 sigma^2)."""
        return (
            self.sensitivity**2 / (2 * self.scale**2) if self.kind == "discrete_gaussian" else None
        )

    @property
    def epsilon(self) -> float | None:
        """Pure-DP cost (Laplace): Delta / b."""
        return self.sensitivity / self.scale if self.kind == "discrete_laplace" else None

    def privacy(self) -> dict[str, float]:
        return {"rho": self.rho} if self.rho is not None else {"epsilon": float(self.epsilon or 0)}

    @property
    def cost(self) -> PrivacyCost:
        """The privacy cost as a :class:`PrivacyCost`."""
        if self.rho is not None:
            return PrivacyCost.zcdp(self.rho)
        return PrivacyCost.pure(float(self.epsilon or 0.0))

    @property
    def variance(self) -> float:
        """Exact variance of one noise draw."""
        if self.kind == "discrete_laplace":
            q = math.exp(-1.0 / self.scale)
            return 2 * q / (1 - q) ** 2
        return discrete_gaussian_variance(self.scale)

    def quantile(self, p: float) -> int:
        """Smallest t with P(|noise| <= t) >= p (exact, from the pmf)."""
        k, pmf = self._pmf()
        cdf = np.cumsum(np.where(k == 0, pmf, 2 * pmf)[k >= 0])
        return int(np.searchsorted(cdf, p))

    def _pmf(self) -> tuple[np.ndarray, np.ndarray]:
        t = int(math.ceil(40 * max(self.scale, 1.0)))
        k = np.arange(-t, t + 1)
        if self.kind == "discrete_laplace":
            w = np.exp(-np.abs(k) / self.scale)
        else:
            w = np.exp(-(k.astype(float) ** 2) / (2 * self.scale**2))
        return k, w / w.sum()

    def sample(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """n noise draws: exact, from OpenDP (about 40,000-90,000 per second), or with ``rng``
        from its probability mass function by inverse transform (:attr:`Noise.SEEDED`: the same
        draws for the same generator state).

        >>> m = discrete_gaussian(0.5)
        >>> a = m.sample(5, np.random.default_rng(3))
        >>> bool((a == m.sample(5, np.random.default_rng(3))).all()), a.dtype
        (True, dtype('int64'))
        """
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if rng is not None:
            k, pmf = self._pmf()
            cdf = np.cumsum(pmf)
            at = np.searchsorted(cdf, rng.random(int(n)) * cdf[-1], side="right")
            return k[np.minimum(at, k.size - 1)].astype(np.int64)
        dp = _opendp()
        dom = dp.vector_domain(dp.atom_domain(T=int))
        if self.kind == "discrete_gaussian":
            m = dp.m.make_gaussian(dom, dp.l2_distance(T=int), scale=float(self.scale))
        else:
            m = dp.m.make_laplace(dom, dp.l1_distance(T=int), scale=float(self.scale))
        return np.asarray(
            m(np.zeros(int(n), dtype=np.int32)), dtype=np.int64
        )  # numpy in: no per-item cast

    def opendp_privacy(self) -> float:
        """The cost by OpenDP's own privacy map, scaled to this sensitivity (a cross-check)."""
        dp = _opendp()
        dom = dp.vector_domain(dp.atom_domain(T=int))
        if self.kind == "discrete_gaussian":
            m = dp.m.make_gaussian(dom, dp.l2_distance(T=int), scale=float(self.scale))
            return float(m.map(1)) * self.sensitivity**2  # rho scales with Delta^2
        m = dp.m.make_laplace(dom, dp.l1_distance(T=int), scale=float(self.scale))
        return float(m.map(1)) * self.sensitivity


def discrete_gaussian(rho: float, l2_sensitivity: float = BOUNDED_L2) -> Mechanism:
    """Discrete Gaussian with zCDP cost ``rho``: sigma = Delta_2 / sqrt(2 rho)."""
    if not rho > 0:
        raise TabreconError(f"rho must be > 0 (got {rho})")
    return Mechanism("discrete_gaussian", l2_sensitivity / math.sqrt(2 * rho), l2_sensitivity)


def discrete_laplace(epsilon: float, l1_sensitivity: float = 1.0) -> Mechanism:
    """Discrete Laplace (two-sided geometric) with pure-DP cost ``epsilon``: scale = Delta_1 /
    epsilon."""
    if not epsilon > 0:
        raise TabreconError(f"epsilon must be > 0 (got {epsilon})")
    return Mechanism("discrete_laplace", l1_sensitivity / epsilon, l1_sensitivity)


def discrete_gaussian_variance(sigma: float) -> float:
    """Exact variance of the discrete Gaussian N_Z(0, sigma^2) (slightly below sigma^2 for small
    sigma)."""
    t = int(math.ceil(40 * max(sigma, 1.0)))
    k = np.arange(-t, t + 1, dtype=float)
    w = np.exp(-(k**2) / (2 * sigma**2))
    return float((w * k**2).sum() / w.sum())


def compose(mechs: list[Mechanism]) -> dict[str, float]:
    """Sequential composition: zCDP costs add, pure-DP costs add (reported separately)."""
    rho = sum(m.rho for m in mechs if m.rho is not None)
    eps = sum(m.epsilon for m in mechs if m.epsilon is not None)
    return {"rho": rho, "epsilon": eps}


_CKS_ALPHAS = np.exp(np.linspace(np.log(1.0001), np.log(1e4), 4000))
_CKS_CONST = _CKS_ALPHAS * np.log1p(-1 / _CKS_ALPHAS) - np.log(_CKS_ALPHAS - 1)


def _cks_delta(rho: float, eps: float) -> float:
    """CKS Cor. 13: delta(eps) = min over alpha > 1 of exp((a-1)(a rho - eps)) (1-1/a)^a / (a-1)
    (minimised over a fixed log-spaced grid of 4,000 alphas)."""
    a = _CKS_ALPHAS
    best = float(np.min((a - 1) * (a * rho - eps) + _CKS_CONST))
    return math.exp(best) if best < 700 else math.inf


def rho_to_epsilon(rho: float, delta: float = 1e-10, method: str = "cks") -> float:
    """(epsilon, delta)-DP implied by rho-zCDP: ``cks`` (tight; the Bureau's) or ``bun-steinke``."""
    if not rho > 0 or not 0 < delta < 1:
        raise TabreconError(f"need rho > 0 and 0 < delta < 1 (got rho={rho}, delta={delta})")
    if method == "bun-steinke":
        return rho + 2 * math.sqrt(rho * math.log(1 / delta))
    if method != "cks":
        raise TabreconError(f"unknown conversion {method!r}; choose 'cks' or 'bun-steinke'")
    # delta(eps) falls as eps grows: the smallest eps within delta (Bun-Steinke bounds it above)
    _, hi = _bisect(
        lambda e: _cks_delta(rho, e) > delta,
        0.0,
        rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1.0,
    )
    return hi


def _bisect(
    below: Callable[[float], bool], lo: float, hi: float, steps: int = 100
) -> tuple[float, float]:
    """Bracket [lo, hi] around the point where ``below`` turns from True to False."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def epsilon_to_rho(epsilon: float, delta: float = 1e-10) -> float:
    """The zCDP budget rho whose Canonne-Kamath-Steinke conversion gives (``epsilon``,
    ``delta``)-DP: the inverse of :func:`rho_to_epsilon` (bisection; epsilon grows with rho), for
    sweeps given in epsilon."""
    if not epsilon > 0 or not 0 < delta < 1:
        raise TabreconError(
            f"need epsilon > 0 and 0 < delta < 1 (got epsilon={epsilon}, delta={delta})"
        )
    # delta(rho, epsilon) grows with rho: the largest rho still within delta (rho <= epsilon always)
    lo, _ = _bisect(lambda r: _cks_delta(r, epsilon) <= delta, 0.0, float(epsilon))
    return lo


def tvd_accuracy(noisy: np.ndarray, true: np.ndarray) -> float:
    """1 - L1(noisy, true) / (2 * population): the TVD accuracy of JASON section 6.1."""
    pop = float(np.asarray(true).sum())
    if pop <= 0:
        raise TabreconError("the true histogram is empty: TVD accuracy is undefined")
    return 1.0 - float(np.abs(np.asarray(noisy) - np.asarray(true)).sum()) / (2 * pop)
