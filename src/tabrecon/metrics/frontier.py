"""The privacy-accuracy frontier (Abowd & Schmutte): what accuracy each unit of privacy loss
buys, how steeply (the marginal rate of transformation dI/d epsilon), and -- joined from
``tradeoff`` -- what the attack still achieves at the same budgets.

* :func:`frontier` -- for a workload and strategies over budgets: accuracy
  ``I = -E||Q x_hat - Q x||^2`` (exact, :func:`tabrecon.metrics.matrix_error.expected_error`),
  times the number of geounits; its slope in the budget from the exact derivative
  ``dI/db = -sum_g (d total / d v_g)(d v_g / d b)`` (the first factor from the solved system,
  the second from the exact discrete noise variance by central difference); for zCDP budgets
  also ``dI/d epsilon = dI/d rho x d rho/d epsilon`` at delta 1e-10 (CKS).
* :func:`rr_frontier` -- randomized response's closed forms (A&S eqs. B-4 ... B-12): variance,
  ``I(rho) = Var(1) - Var(rho)``, ``dI/d eps = I'(rho(eps)) rho'(eps)``, ``rho'(eps) = 1 / (1 +
  cosh eps)``, beside a simulation and a numerical derivative.
* :func:`join_tradeoff` -- ``tradeoff`` rows (measured precision, certified uniques, PRG) matched
  to frontier rows by budget.

>>> from tabrecon.defenses.matrix import Budget, Strategy, Workload
>>> w = Workload.from_tables("P1", level="block")
>>> f = frontier(w, [Strategy.parse("identity")], [Budget.zcdp(0.5), Budget.zcdp(1.0)])
>>> cols = f.select("budget", "expected_sq_error", "dI_drho")
>>> [(b, round(e), round(d)) for b, e, d in cols.rows()]
[('rho=0.5', 55944, 111888), ('rho=1', 27972, 27972)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from ..defenses import randomized_response as rr
from ..defenses.matrix import Budget, Strategy, Workload
from ..defenses.mechanisms import epsilon_to_rho, rho_to_epsilon
from ..errors import InputError
from .matrix_error import (
    ExpectedError,
    HierarchyFactors,
    SimulatedError,
    TooLarge,
    expected_error,
    group_variances,
    simulate_error,
)

DELTA = 1e-10
_H = 1e-4  # relative step of the central differences


def _variance_slopes(
    strategy: Strategy, budget: Budget, neighbours: str, continuous: bool
) -> np.ndarray:
    """d v_g / d b for each group (central difference of the noise variance)."""
    lo = Budget(budget.noise, budget.value * (1 - _H), budget.label)
    hi = Budget(budget.noise, budget.value * (1 + _H), budget.label)
    vlo = group_variances(strategy, lo, neighbours, continuous)
    vhi = group_variances(strategy, hi, neighbours, continuous)
    return (vhi - vlo) / (2 * _H * budget.value)


def _drho_deps(rho: float) -> float:
    eps = rho_to_epsilon(rho, DELTA)
    return (epsilon_to_rho(eps * (1 + _H), DELTA) - epsilon_to_rho(eps * (1 - _H), DELTA)) / (
        2 * _H * eps
    )


def frontier(
    workload: Workload,
    strategies: Sequence[Strategy],
    budgets: Sequence[Budget],
    neighbours: str = "bounded",
    geounits: int = 1,
    hierarchy: HierarchyFactors | None = None,
    draws: int = 0,
    workers: int = 1,
    on_point: Callable[[ExpectedError | SimulatedError], None] | None = None,
) -> pl.DataFrame:
    """One row per (strategy, budget): the budget as rho and epsilon, the exact expected squared
    error of the workload over all geounits, ``accuracy_I`` (its negative), the slopes
    ``dI_drho`` and ``dI_depsilon``, RMSE per cell, and the strategy's sensitivities.

    Each of ``geounits`` geounits is measured on its own at the strategy's level share; with
    ``hierarchy`` every level of a geography is measured (TopDown's level shares, continuous
    noise variances so that the Kronecker factorisation is exact) and the geounits are the
    hierarchy's. A strategy that cannot answer the workload raises
    :class:`~tabrecon.metrics.matrix_error.UnsupportedWorkload` naming the cells.

    With ``draws`` every point is also simulated (OpenDP noise, least squares; columns
    ``simulated_sq_error``, ``simulated_se``, ``sim_rel_diff``); a strategy too large for the
    exact method then gets the simulated mean as its estimate (``method`` ``simulated``) instead
    of an error."""
    if geounits < 1:
        raise InputError(f"geounits must be at least 1 (got {geounits})")
    if not budgets:
        raise InputError("no budgets given")
    if hierarchy is not None:
        if hierarchy.level != workload.level:
            raise InputError(
                f"the hierarchy's factors are for {hierarchy.level} workloads, "
                f"the workload is at {workload.level}"
            )
        geounits = int(hierarchy.geoids.size)
    continuous = hierarchy is not None
    scale = hierarchy.total if hierarchy is not None else float(geounits)
    rows = []
    for s in strategies:
        if hierarchy is not None and s.level_share != 1:
            raise InputError(
                f"strategy {s.name!r}: with a hierarchy the level shares come from it; "
                "drop the @share"
            )
        d1, d2 = s.delta(1, "unbounded"), s.delta(2, "unbounded")
        for b in budgets:
            sim = None
            if draws:
                sim = simulate_error(workload, s, b, draws, neighbours=neighbours, workers=workers)
                if on_point:
                    on_point(sim)
            e: ExpectedError | None = None
            try:
                e = expected_error(workload, s, b, neighbours, continuous)
            except TooLarge:
                if sim is None:
                    raise
            if e is not None:
                if on_point:
                    on_point(e)
                dv = _variance_slopes(s, b, neighbours, continuous)
                dI_db = -float((e.group_terms * dv).sum()) * scale
                total = e.total * scale
                method = e.method + ("+hierarchy" if hierarchy is not None else "")
            else:
                assert sim is not None
                dI_db, total, method = math.nan, sim.total * scale, "simulated"
            gauss = b.noise == "gaussian"
            rho = b.value if gauss else b.value**2 / 2
            eps = rho_to_epsilon(b.value, DELTA) if gauss else b.value
            rows.append(
                {
                    "strategy": s.name + (" (hierarchy)" if hierarchy is not None else ""),
                    "budget": b.label,
                    "noise": b.noise,
                    "rho": rho,
                    "epsilon": eps,
                    "delta": DELTA if gauss else 0.0,
                    "level_share": (
                        hierarchy.level_shares[workload.level or "block"]
                        if hierarchy is not None
                        else s.level_share
                    ),
                    "method": method,
                    "expected_sq_error": total,
                    "per_geounit_sq_error": total / geounits,
                    "rmse_per_cell": math.sqrt(total / (geounits * len(workload))),
                    "accuracy_I": -total,
                    "dI_drho": dI_db if gauss else math.nan,
                    "dI_depsilon": dI_db * _drho_deps(b.value) if gauss else dI_db,
                    "delta_A_l1": d1.value,
                    "delta_A_l2": d2.value,
                    "cells": len(workload),
                    "geounits": geounits,
                    **(
                        {
                            "draws": draws,
                            "simulated_sq_error": sim.total * scale,
                            "simulated_se": sim.se * scale,
                            "sim_rel_diff": sim.total / e.total - 1 if e else math.nan,
                            "sim_max_bias": sim.max_bias,
                        }
                        if sim is not None
                        else {}
                    ),
                }
            )
    return pl.DataFrame(rows)


def per_table(errors: Sequence[ExpectedError]) -> pl.DataFrame:
    """Expected error per table for each computed point."""
    return pl.concat(
        [
            e.by_table().select(
                pl.lit(e.strategy.name).alias("strategy"),
                pl.lit(e.budget.label).alias("budget"),
                pl.all(),
            )
            for e in errors
        ]
    )


# --------------------------------------------------------------------------------------------------
# Randomized response
# --------------------------------------------------------------------------------------------------
def rr_slope(pi: float, eps: float, n: int, mu: float = 0.5) -> float:
    """Closed-form dI/d epsilon of randomized response: I'(rho) rho'(eps) (A&S B-12)."""
    rho = rr.rho_for_epsilon(eps)
    b = rho * (pi - mu) + mu
    dvar = ((pi - mu) * (1 - 2 * b) / rho**2 - 2 * b * (1 - b) / rho**3) / n
    return -dvar / (1 + math.cosh(eps))


def rr_frontier(
    epsilons: Sequence[float],
    pi: float = 0.3,
    n: int = 1000,
    reps: int = 200_000,
    seed: int = 0,
) -> pl.DataFrame:
    """Randomized response (mu = 1/2) at each epsilon: closed-form variance and I beside a
    simulation of ``reps`` surveys, and the closed-form slope beside a numerical derivative.

    Each survey's count of 1 answers is Binomial(n, pi rho + (1 - rho)/2) -- the same law as
    drawing every respondent's trait, coin and answer (:func:`randomized_response.simulate`)."""
    if not epsilons:
        raise InputError("no epsilons given")
    rng = np.random.default_rng(seed)
    var1 = rr.variance(pi, 1.0, n)
    rows = []
    for eps in epsilons:
        rho = rr.rho_for_epsilon(eps)
        beta = rng.binomial(n, rr.mean_beta(pi, rho), size=reps) / n
        est = np.asarray(rr.estimate(beta, rho))
        var_sim = float(est.var(ddof=1))
        var_closed = rr.variance(pi, rho, n)
        h = eps * _H
        numeric = (
            rr.accuracy_loss(pi, rr.rho_for_epsilon(eps + h), n)
            - rr.accuracy_loss(pi, rr.rho_for_epsilon(eps - h), n)
        ) / (2 * h)
        slope = rr_slope(pi, eps, n)
        rows.append(
            {
                "epsilon": eps,
                "rho_truthful": rho,
                "var_closed": var_closed,
                "var_sim": var_sim,
                "var_rel_diff": var_sim / var_closed - 1,
                "I_closed": var1 - var_closed,
                "I_sim": var1 - var_sim,
                "dI_deps_closed": slope,
                "dI_deps_numeric": numeric,
                "slope_rel_diff": numeric / slope - 1,
                "pi": pi,
                "n": n,
                "reps": reps,
            }
        )
    return pl.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# Risk on the same axis
# --------------------------------------------------------------------------------------------------
RISK_COLUMNS = (
    "attack_nonmodal_precision",
    "attack_certified_uniques_precision",
    "prg_nonmodal_precision",
    "mdg_nonmodal_precision",
    "certified_blocks",
    "blocks",
    "tvd_block",
    "rmse_block_cell",
)


def read_tradeoff(path: str | Path) -> pl.DataFrame:
    """A ``tradeoff.csv`` written by ``tabrecon tradeoff``, its columns and budgets checked
    (errors name the file, and the line of a budget that is not a number)."""
    from ..io import check_readable, read_error, require_columns

    p = check_readable(path, text=True)
    try:
        df = pl.read_csv(p, infer_schema=False)
    except Exception as exc:  # polars raises several exception types for malformed files
        raise read_error(p, exc) from None
    require_columns(p, df.columns, ("defense", "rho"), "a tradeoff table")
    rho = df["rho"].cast(pl.Float64, strict=False)
    bad = rho.is_null() & df["rho"].is_not_null() & (df["rho"].str.strip_chars() != "")
    if bad.any():
        i = int(bad.arg_max() or 0)
        raise InputError(f"rho {df['rho'][i]!r} is not a number", path=str(p), line=i + 2)
    try:
        return pl.read_csv(p, infer_schema_length=None)
    except Exception as exc:
        raise read_error(p, exc) from None


def join_tradeoff(front: pl.DataFrame, tradeoff: pl.DataFrame) -> pl.DataFrame:
    """The tradeoff's measured risk beside the frontier rows of the same zCDP budget (rho equal
    within 1e-6 relative). Tradeoff rows without a budget (none, swapping) are left out; frontier
    rows without a measured budget get nulls."""
    if "rho" not in tradeoff.columns:
        raise InputError(
            "the tradeoff table has no 'rho' column (write it with `tabrecon tradeoff`)"
        )
    cols = [c for c in RISK_COLUMNS if c in tradeoff.columns]
    t = tradeoff.filter(pl.col("rho").is_not_nan()).select(
        pl.col("defense"), pl.col("rho").alias("_rho"), *cols
    )
    keys = front["rho"].to_numpy()
    match = []
    tr = t["_rho"].to_numpy()
    for r in keys:
        hit = np.flatnonzero(np.isclose(tr, r, rtol=1e-6, atol=0))
        match.append(int(hit[0]) if hit.size else None)
    extra = pl.DataFrame(
        {c: [None if m is None else t[c][m] for m in match] for c in ["defense", *cols]},
        schema={c: t.schema[c] for c in ["defense", *cols]},
    )
    return pl.concat([front, extra], how="horizontal")


# --------------------------------------------------------------------------------------------------
# Strategy search: the budget shares that minimise a workload's expected error
# --------------------------------------------------------------------------------------------------
#: The smallest share the search gives a group: below it the detailed query's noise would dwarf the
#: others' and the Woodbury route loses digits to cancellation (seen at shares of 1e-9).
MIN_SHARE = 1e-3


def _floor_shares(s: np.ndarray, floor: float) -> np.ndarray:
    """Shares summing to 1 with none below ``floor`` (the rest rescaled)."""
    low = s < floor
    if not low.any():
        return s
    rest = 1.0 - floor * low.sum()
    out = np.where(low, floor, s / s[~low].sum() * rest)
    return out


def optimise_shares(
    workload: Workload,
    strategy: Strategy,
    neighbours: str = "bounded",
    iterations: int = 60,
    tol: float = 1e-4,
) -> tuple[Strategy, list[float]]:
    """The same queries with the budget shares that minimise the workload's expected squared
    error, and the error after each iteration.

    The error ``f(s) = trace(Q (sum_g s_g c_g G_g' G_g)^-1 Q')`` is convex in the shares s (c_g the
    precision a unit share buys), so the optimum is where every group's marginal value
    ``-df/ds_g`` is equal. The multiplicative update ``s_g <- s_g (-df/ds_g)^(1/2)``, normalised,
    keeps the shares positive and has exactly those points as fixed points (the classical
    algorithm for A-optimal designs); each step is one exact error computation. With continuous
    noise the optimum does not depend on the budget. No share goes below :data:`MIN_SHARE`.

    >>> from tabrecon.defenses.matrix import Budget, Strategy, Workload
    >>> w = Workload.from_tables("P12", level="block")
    >>> best, path = optimise_shares(w, Strategy.parse("topdown"))
    >>> path[-1] < path[0]
    True
    """
    if len(strategy.groups) < 2:
        raise InputError(f"strategy {strategy.name!r} has one group: no shares to choose")
    b = Budget.zcdp(1.0)  # the optimum does not depend on it (continuous noise)
    s = np.array([g.share for g in strategy.groups])
    path: list[float] = []
    cur = strategy
    for _ in range(iterations):
        e = expected_error(workload, cur, b, neighbours, continuous=True)
        path.append(e.total)
        grad = e.group_terms * e.group_variances / s  # -df/ds_g
        new = s * np.sqrt(np.maximum(grad, 1e-300))
        new = _floor_shares(new / new.sum(), MIN_SHARE)
        done = np.abs(new - s).max() < tol
        s = new
        cur = replace(
            strategy,
            name=f"{strategy.name} (optimised shares)",
            groups=tuple(
                replace(g, share=float(v)) for g, v in zip(strategy.groups, s, strict=True)
            ),
        )
        if done:
            break
    path.append(expected_error(workload, cur, b, neighbours, continuous=True).total)
    return cur, path
