"""The matrix mechanism's error: exact expected squared error of a workload answered through a
strategy, and the same error simulated with OpenDP's noise and the least-squares estimator.

With group g of the strategy measured with noise of variance v_g, the weighted strategy is
``A_w = [G_g / sqrt(v_g)]`` and ``M = A_w' A_w``. The generalised least-squares estimate is
``x_hat = M^+ A_w' y_w`` and the workload's error covariance is ``Q M^+ Q'``: the expected squared
error of cell i is ``q_i' M^+ q_i`` -- Abowd & Schmutte's ``sigma^2 (Delta_A)^2 ||Q A^+||_F^2``
(eq. E-27) with a noise scale per group; the accuracy is its negative, ``I = -sum_i``.

No pseudo-inverse of the histogram's size is formed. Two exact routes, chosen by the strategy:

* **woodbury** -- the strategy measures every type on its own in one group (the detailed
  histogram: identity, marginals, TopDown): ``M = D + U U'`` with ``D`` diagonal and ``U`` the
  other groups' r rows, so ``M^-1 = D^-1 - D^-1 U C^-1 U' D^-1`` with ``C = I + U' D^-1 U``
  (r x r, Cholesky) -- the same identity TopDown's ADMM step uses;
* **gram** -- short strategies (the workload itself): ``A_w^+ = A_w' (A_w A_w')^+`` from the
  eigendecomposition of the strategy's Gram matrix (rows x rows). A workload row outside the row
  space of A is refused by name (:class:`UnsupportedWorkload`).

Either needs a dense matrix of the strategy's extra rows squared; beyond :data:`MAX_DENSE` rows
:func:`expected_error` refuses and points to :func:`simulate_error`, whose mean over draws (with
its standard error) estimates the same quantity by preconditioned conjugate gradients on
``M`` -- an independent route, which is also how the exact values are checked.

The error of one geounit's workload is the same for every geounit (the matrices do not depend on
the data), so a release's total expected error is this times the number of geounits.

>>> from tabrecon.defenses.matrix import Budget, Strategy, Workload
>>> w = Workload.from_tables("P1", level="block")
>>> e = expected_error(w, Strategy.parse("identity"), Budget.zcdp(0.5))
>>> e.method, round(e.total)  # P1 sums 27,972 types, each with noise variance 1/0.5
('woodbury', 55944)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.linalg as la
import scipy.sparse as sp

from ..defenses.matrix import Budget, Strategy, Workload
from ..errors import InputError
from ..vocab import Geo

#: Largest dense side (strategy rows beyond the detailed histogram, or strategy rows for the Gram
#: route) computed exactly: 6,000^2 doubles are 288 MB.
MAX_DENSE = 6000
_BATCH = 64


class UnsupportedWorkload(InputError):
    """Workload rows the strategy cannot answer (not in the row space of A)."""


class TooLarge(InputError):
    """A strategy too large for the exact method (use :func:`simulate_error`)."""


@dataclass(frozen=True)
class ExpectedError:
    """Exact expected squared error of every workload cell for one strategy and budget.

    ``group_variances`` are the exact noise variances of the strategy's groups (discrete
    Gaussian or Laplace); ``group_terms[g]`` is d(total)/d(v_g), for the frontier's slope."""

    workload: Workload
    strategy: Strategy
    budget: Budget
    group_variances: np.ndarray
    per_query: np.ndarray
    group_terms: np.ndarray
    method: str

    @property
    def total(self) -> float:
        """Expected total squared error over the workload (minus the accuracy I)."""
        return float(self.per_query.sum())

    def by_table(self) -> pl.DataFrame:
        """Per table: cells, expected total squared error, root mean squared error per cell."""
        df = pl.DataFrame({"table": self.workload.tables, "error": self.per_query})
        order = list(dict.fromkeys(self.workload.tables.tolist()))
        return (
            df.group_by("table", maintain_order=True)
            .agg(pl.len().alias("cells"), pl.col("error").sum().alias("expected_sq_error"))
            .with_columns(
                (pl.col("expected_sq_error") / pl.col("cells")).sqrt().alias("rmse_per_cell")
            )
            .sort(pl.col("table").replace_strict(order, list(range(len(order)))))
        )


def group_variances(
    strategy: Strategy, budget: Budget, neighbours: str = "bounded", continuous: bool = False
) -> np.ndarray:
    """Noise variance of each group at ``budget``: exact for the discrete noise, or (with
    ``continuous``) the continuous law's ``sigma^2`` / ``2 b^2``, which scales exactly as
    1 / budget (Gaussian) or 1 / budget^2 (Laplace)."""
    mechs = strategy.mechanisms(budget, neighbours)
    if continuous:
        return np.array(
            [m.scale**2 if m.kind == "discrete_gaussian" else 2 * m.scale**2 for m in mechs]
        )
    return np.array([m.variance for m in mechs])


def _weighted(groups: list[sp.csr_matrix], v: np.ndarray) -> sp.csr_matrix:
    """The strategy's groups stacked, each row scaled by 1/sqrt of its noise variance."""
    return sp.vstack([g / math.sqrt(vg) for g, vg in zip(groups, v, strict=True)], format="csr")


def expected_error(
    workload: Workload,
    strategy: Strategy,
    budget: Budget,
    neighbours: str = "bounded",
    continuous: bool = False,
    method: str = "auto",
) -> ExpectedError:
    """Exact expected squared error of each workload cell (see the module docstring), with the
    discrete noise's exact variances (or the continuous law's, ``continuous``). ``method``:
    ``auto`` (Woodbury when a group is the identity, else the Gram route), ``woodbury`` or
    ``gram``."""
    if method not in ("auto", "woodbury", "gram"):
        raise InputError(f"method must be auto, woodbury or gram (got {method!r})")
    v = group_variances(strategy, budget, neighbours, continuous)
    if np.any(v <= 0):
        raise InputError(
            f"{budget.label}: the noise of some group is numerically zero at this budget; "
            "the error is 0 -- choose a smaller budget"
        )
    ident = [i for i, g in enumerate(strategy.groups) if g.is_identity]
    if method == "woodbury" and not ident:
        raise InputError(f"strategy {strategy.name!r} has no identity group for Woodbury")
    Q = workload.matrix.tocsr()
    if ident and method != "gram":
        per_query, terms = _woodbury(Q, strategy, v, ident[0])
        method = "woodbury"
        if (per_query < -1e-9 * max(float(np.abs(per_query).max()), 1.0)).any():
            raise InputError(
                f"strategy {strategy.name!r}: the exact error lost its digits (the detailed "
                "query's share is tiny beside the others'); give it a larger share or estimate by "
                "simulation (`--draws N`)"
            )
    else:
        per_query, terms = _gram(Q, workload, strategy, v)
        method = "gram"
    return ExpectedError(workload, strategy, budget, v, per_query, terms, method)


def _too_large(what: str, n: int) -> TooLarge:
    return TooLarge(
        f"{what} has {n:,} rows, more than the exact method's {MAX_DENSE:,} (a dense {n:,}^2 "
        "matrix); estimate the error by simulation instead (`--draws N`, mean with its "
        "standard error)"
    )


def _woodbury(
    Q: sp.csr_matrix, strategy: Strategy, v: np.ndarray, i_id: int
) -> tuple[np.ndarray, np.ndarray]:
    # D = P' P / v_id for the permutation P: diagonal with 1/v_id on every type
    n = Q.shape[1]
    dinv = np.full(n, v[i_id])
    others = [i for i in range(len(strategy.groups)) if i != i_id]
    U = (
        sp.vstack(
            [strategy.groups[i].matrix / math.sqrt(v[i]) for i in others], format="csr"
        ).T.tocsc()
        if others
        else sp.csc_matrix((n, 0))
    )
    r = U.shape[1]
    if r > MAX_DENSE:
        raise _too_large(f"strategy {strategy.name!r} beyond its detailed query", r)
    if r:
        C = np.eye(r) + (U.T @ sp.diags(dinv) @ U).toarray()
        cho = la.cho_factor(C, lower=True)
    Aw = _weighted([g.matrix for g in strategy.groups], v)
    bounds = np.cumsum([0] + [g.matrix.shape[0] for g in strategy.groups])
    per_query = np.empty(Q.shape[0])
    terms = np.zeros(len(strategy.groups))
    for s in range(0, Q.shape[0], _BATCH):
        Qb = Q[s : s + _BATCH].toarray().T  # n x b
        Z = dinv[:, None] * Qb
        if r:
            Z -= dinv[:, None] * (U @ la.cho_solve(cho, U.T @ Z))
        W = Aw @ Z  # strategy rows x b: u_i = A_w z_i
        per_query[s : s + _BATCH] = (W * W).sum(axis=0)
        for g in range(len(strategy.groups)):
            terms[g] += float((W[bounds[g] : bounds[g + 1]] ** 2).sum()) / v[g]
    return per_query, terms


def _gram(
    Q: sp.csr_matrix, workload: Workload, strategy: Strategy, v: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    Aw = _weighted([g.matrix for g in strategy.groups], v)
    m = Aw.shape[0]
    if m > MAX_DENSE:
        raise _too_large(f"strategy {strategy.name!r}", m)
    G = (Aw @ Aw.T).toarray()
    lam, V = la.eigh(G)
    # rank: the Gram's rounding noise is about lam_max x m x eps; real eigenvalues of the SF1
    # workloads sit many orders above it (34 tables on one geounit: the smallest kept is 3e-7 of
    # the largest, the next 1e-14.5)
    keep = lam > lam.max() * m * np.finfo(float).eps * 100
    lam, V = lam[keep], V[:, keep]
    T = (Q @ Aw.T).toarray() @ V  # m_Q x rank
    # the part of q_i in A's row space has squared norm ||T_i Lambda^-1/2||^2
    qn = np.asarray(Q.multiply(Q).sum(axis=1)).ravel()
    inside = ((T / np.sqrt(lam)) ** 2).sum(axis=1)
    outside = qn - inside
    bad = np.flatnonzero(outside > 1e-7 * np.maximum(qn, 1.0))
    if bad.size:
        tabs, counts = np.unique(workload.tables[bad], return_counts=True)
        order = np.argsort(-counts, kind="stable")
        per = ", ".join(f"{tabs[i]} ({counts[i]})" for i in order[:8])
        more = f" and {tabs.size - 8} more tables" if tabs.size > 8 else ""
        raise UnsupportedWorkload(
            f"strategy {strategy.name!r} cannot answer {bad.size} of the workload's "
            f"{len(workload)} cells -- by table {per}{more}; first {workload.cells[bad[0]]}: "
            "they are not sums of its queries; add the detailed query or a finer marginal"
        )
    Ucoef = (T / lam) @ V.T  # m_Q x m: u_i = (A_w^+)' q_i
    per_query = (Ucoef**2).sum(axis=1)
    bounds = np.cumsum([0] + [g.matrix.shape[0] for g in strategy.groups])
    terms = np.array(
        [
            float((Ucoef[:, bounds[g] : bounds[g + 1]] ** 2).sum()) / v[g]
            for g in range(len(strategy.groups))
        ]
    )
    return per_query, terms


# --------------------------------------------------------------------------------------------------
# Simulation: OpenDP noise through the least-squares estimator
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimulatedError:
    """Squared errors of the least-squares estimate over ``draws`` noise draws.

    ``totals[d]`` is draw d's total squared error over the workload; ``per_query`` the mean
    squared error of each cell; ``max_bias`` the largest |Q x_hat - Q x| of the estimator on the
    noise-free measurements (0 up to solver tolerance when the strategy supports the workload)."""

    per_query: np.ndarray
    totals: np.ndarray
    max_bias: float
    iterations: int

    @property
    def draws(self) -> int:
        return int(self.totals.size)

    @property
    def total(self) -> float:
        return float(self.totals.mean())

    @property
    def se(self) -> float:
        """Standard error of :attr:`total` over the draws."""
        return float(self.totals.std(ddof=1) / math.sqrt(self.draws)) if self.draws > 1 else 0.0


def pcg(
    matvec: Callable[[np.ndarray], np.ndarray],
    B: np.ndarray,
    diag: np.ndarray,
    tol: float = 1e-10,
    maxiter: int = 5000,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Jacobi-preconditioned conjugate gradients for ``M X = B`` column by column (M symmetric
    positive semi-definite, given by ``matvec``); columns stop at relative residual ``tol``.
    Returns (X, iterations, relative residual of each column). From X = 0 a consistent singular
    system converges to its minimum-norm solution."""
    pinv = np.where(diag > 0, 1.0 / np.where(diag > 0, diag, 1.0), 0.0)[:, None]
    X = np.zeros_like(B)
    R = B.copy()
    bn = np.linalg.norm(B, axis=0)
    bn[bn == 0] = 1.0
    Zr = R * pinv
    P = Zr.copy()
    rz = (R * Zr).sum(axis=0)
    res = np.linalg.norm(R, axis=0) / bn
    it = 0
    while it < maxiter and (res > tol).any():
        it += 1
        AP = matvec(P)
        pap = (P * AP).sum(axis=0)
        live = (res > tol) & (pap > 0)
        alpha = np.where(live, rz / np.where(pap > 0, pap, 1.0), 0.0)
        X += alpha * P
        R -= alpha * AP
        res = np.linalg.norm(R, axis=0) / bn
        Zr = R * pinv
        rz_new = (R * Zr).sum(axis=0)
        beta = np.where(live & (rz > 0), rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P = Zr + beta * P
        rz = rz_new
    return X, it, res


def _simulate_chunk(args: tuple) -> tuple[np.ndarray, np.ndarray, float, int]:
    groups, mechs, v, Q, x, n_draws = args
    Aw = _weighted(groups, v)
    AwT = Aw.T.tocsr()
    diag = np.asarray(Aw.multiply(Aw).sum(axis=0)).ravel()
    # the weighted measurements' noise, one column per draw; the last column is noise-free
    E = np.concatenate(
        [
            (mech.sample(g.shape[0] * n_draws).reshape(g.shape[0], n_draws) / math.sqrt(vg))
            for g, mech, vg in zip(groups, mechs, v, strict=True)
        ]
    )
    y_true = Aw @ x
    rhs = AwT @ np.column_stack([E + y_true[:, None], y_true])
    X, iters, res = pcg(lambda P: AwT @ (Aw @ P), rhs, diag)
    if (res > 1e-6).any():
        raise InputError(
            f"least squares did not converge (relative residual {res.max():.1e}); "
            "the strategy may be ill-conditioned"
        )
    truth = Q @ x
    err = Q @ X[:, :-1] - truth[:, None]
    bias = float(np.abs(Q @ X[:, -1] - truth).max())
    return (err**2).sum(axis=0), (err**2).sum(axis=1), bias, iters


def simulate_error(
    workload: Workload,
    strategy: Strategy,
    budget: Budget,
    draws: int = 1000,
    x: np.ndarray | None = None,
    neighbours: str = "bounded",
    workers: int = 1,
    chunk: int = 50,
    on_chunk: Callable[[int], None] | None = None,
) -> SimulatedError:
    """Measure the strategy ``draws`` times with OpenDP's exact noise, estimate the histogram by
    least squares (conjugate gradients on the normal equations), answer the workload and compare
    with the truth ``x`` (a histogram over the types; default: one person of each type).

    Noise is not seeded (OpenDP's samplers draw from the operating system, as the Bureau's did);
    repeated runs agree within their standard errors."""
    if draws < 2:
        raise InputError(f"draws must be at least 2 (got {draws})")
    from ..interrupts import process_pool

    mechs = strategy.mechanisms(budget, neighbours)
    v = np.array([m.variance for m in mechs])
    groups = [g.matrix.tocsr() for g in strategy.groups]
    Q = workload.matrix.tocsr()
    x = np.ones(Q.shape[1]) if x is None else np.asarray(x, dtype=float)
    sizes = [min(chunk, draws - s) for s in range(0, draws, chunk)]
    jobs = [(groups, mechs, v, Q, x, n) for n in sizes]
    results = []
    if workers <= 1:
        for j in jobs:
            results.append(_simulate_chunk(j))
            if on_chunk:
                on_chunk(j[-1])
    else:
        with process_pool(workers) as ex:
            for j, r in zip(jobs, ex.map(_simulate_chunk, jobs), strict=True):
                results.append(r)
                if on_chunk:
                    on_chunk(j[-1])
    totals = np.concatenate([r[0] for r in results])
    per_query = np.sum([r[1] for r in results], axis=0) / draws
    return SimulatedError(per_query, totals, max(r[2] for r in results), max(r[3] for r in results))


# --------------------------------------------------------------------------------------------------
# TopDown's hierarchy: every level measures the same queries (Kronecker structure)
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HierarchyFactors:
    """How much a geounit's expected error shrinks when every level of the geography is measured.

    TopDown gives query q of level l the budget rho x L_l x S_q, so its noise variance is
    ``a_l b_q`` with ``a_l = 1 / L_l``: the strategy is the Kronecker product of the geography's
    aggregation tree T (rows weighted by sqrt L_l) and the per-geounit query groups, and the
    pseudo-inverse factors too (``(T (x) S)^+ = T^+ (x) S^+``). The least-squares error of a
    geounit u's workload is therefore ``factor_u x`` (the per-geounit error at level share 1),
    with ``factor_u = c_u' (T'T)^-1 c_u`` and c_u the indicator of u's blocks; ``(T'T)^-1`` by the
    Woodbury identity (T'T = L_block I + U U', U one column per unit above the block)."""

    level: str
    geoids: np.ndarray
    factors: np.ndarray
    level_shares: dict[str, float]

    @property
    def total(self) -> float:
        return float(self.factors.sum())


def hierarchy_factors(
    block_geoids: np.ndarray, level_shares: dict[str, float], level: str = "block"
) -> HierarchyFactors:
    """:class:`HierarchyFactors` of every geounit of ``level`` (block or tract) of the geography
    spanned by ``block_geoids`` (15-digit block ids; the nation is the whole file)."""
    from ..geo import LEVELS, prefix

    blocks = np.unique(np.asarray(block_geoids, dtype=str))
    if not blocks.size:
        raise InputError("the geography has no blocks")
    bad = [b for b in blocks[:5] if len(b) != 15 or not b.isdigit()]
    if bad:
        raise InputError(f"not 15-digit block geoids: {', '.join(bad)}")
    if level not in (Geo.BLOCK, Geo.TRACT):
        raise InputError(f"hierarchy factors are for block or tract workloads (got {level!r})")
    missing = [lv for lv in LEVELS if lv not in level_shares]
    if missing or any(not v > 0 for v in level_shares.values()):
        raise InputError(f"level shares need every level > 0 (missing {missing})")
    nb = blocks.size
    cols = []
    for lv in LEVELS[:-1]:
        units, inv = np.unique(prefix(blocks, lv), return_inverse=True)
        cols.append(
            sp.csc_matrix(
                (np.full(nb, math.sqrt(level_shares[lv])), (np.arange(nb), inv)),
                shape=(nb, units.size),
            )
        )
    U = sp.hstack(cols, format="csc")
    dinv = 1.0 / level_shares["block"]
    C = np.eye(U.shape[1]) + dinv * (U.T @ U).toarray()
    cho = la.cho_factor(C, lower=True)
    geo, inv = np.unique(prefix(blocks, level), return_inverse=True)
    Cu = sp.csc_matrix((np.ones(nb), (np.arange(nb), inv)), shape=(nb, geo.size))
    # c' (D^-1 - D^-1 U C^-1 U' D^-1) c for every unit's indicator c at once
    UtC = (U.T @ Cu).toarray() * dinv
    direct = dinv * np.asarray(Cu.sum(axis=0)).ravel()
    factors = direct - (UtC * la.cho_solve(cho, UtC)).sum(axis=0)
    return HierarchyFactors(level, geo, factors, dict(level_shares))
