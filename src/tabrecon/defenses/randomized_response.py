"""Randomized response (Abowd & Schmutte, online appendix B) and its privacy-accuracy arithmetic.

Each person answers the sensitive question with probability ``rho`` (a probability here, not zCDP's
rho) and otherwise reports an innocuous coin that is 1 with probability ``mu``:
``d = T Y(1) + (1 - T) Y(0)``, ``P(T = 1) = rho``, ``P(Y(0) = 1) = mu``.

* E beta-hat = pi rho + mu (1 - rho); pi-hat = (beta-hat - mu (1 - rho)) / rho is unbiased;
* Var pi-hat = [rho (pi - mu) + mu] [1 - rho (pi - mu) - mu] / (rho^2 N);
* epsilon(rho, mu) = ln max(1 + rho / ((1 - rho) mu), 1 + rho / ((1 - rho)(1 - mu))), smallest at
  mu = 1/2 where epsilon = ln((1 + rho) / (1 - rho)) and rho = (e^eps - 1) / (e^eps + 1);
* accuracy loss I(rho) = Var pi-hat(1) - Var pi-hat(rho) (<= 0, increasing in epsilon).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import TabreconError


def _check(rho: float, mu: float = 0.5) -> None:
    if not 0 < rho <= 1:
        raise TabreconError(f"rho (probability of a truthful answer) must be in (0, 1] (got {rho})")
    if not 0 < mu < 1:
        raise TabreconError(
            f"mu (probability the innocuous answer is 1) must be in (0, 1) (got {mu})"
        )


def epsilon(rho: float, mu: float = 0.5) -> float:
    """The DP epsilon of randomized response (infinite at rho = 1)."""
    _check(rho, mu)
    if rho == 1:
        return math.inf
    return math.log(max(1 + rho / ((1 - rho) * mu), 1 + rho / ((1 - rho) * (1 - mu))))


def rho_for_epsilon(eps: float) -> float:
    """Truthful-answer probability giving ``eps`` at mu = 1/2: (e^eps - 1) / (e^eps + 1)."""
    if not eps > 0:
        raise TabreconError(f"epsilon must be > 0 (got {eps})")
    return math.tanh(eps / 2)


def mean_beta(pi: float, rho: float, mu: float = 0.5) -> float:
    return pi * rho + mu * (1 - rho)


def estimate(beta_hat: np.ndarray | float, rho: float, mu: float = 0.5) -> np.ndarray | float:
    """Unbiased estimate of the true share from the observed share of 1 answers."""
    _check(rho, mu)
    return (np.asarray(beta_hat) - mu * (1 - rho)) / rho


def variance(pi: float, rho: float, n: int, mu: float = 0.5) -> float:
    """Var pi-hat for n respondents."""
    _check(rho, mu)
    if n <= 0:
        raise TabreconError(f"n must be positive (got {n})")
    b = rho * (pi - mu) + mu
    return b * (1 - b) / (rho**2 * n)


def accuracy_loss(pi: float, rho: float, n: int, mu: float = 0.5) -> float:
    """I(rho) = Var pi-hat(1) - Var pi-hat(rho)."""
    return variance(pi, 1.0, n, mu) - variance(pi, rho, n, mu)


def simulate(
    pi: float, rho: float, n: int, reps: int, rng: np.random.Generator, mu: float = 0.5
) -> np.ndarray:
    """``reps`` independent surveys of n respondents drawn from a population with share ``pi``.

    Each respondent's trait is Bernoulli(pi), as in the model behind the closed-form variance
    (a fixed set of respondents would have a smaller variance). Returns pi-hat of each survey.
    """
    _check(rho, mu)
    if n <= 0 or reps <= 0:
        raise TabreconError(f"n and reps must be positive (got n={n}, reps={reps})")
    if not 0 <= pi <= 1:
        raise TabreconError(f"pi must be in [0, 1] (got {pi})")
    out = np.empty(reps)
    for r in range(reps):
        truth = rng.random(n) < pi
        t = rng.random(n) < rho
        y0 = rng.random(n) < mu
        out[r] = estimate(np.where(t, truth, y0).mean(), rho, mu)
    return out
