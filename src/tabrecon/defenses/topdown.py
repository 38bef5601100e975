"""A faithful simplified TopDown (the 2020 Census disclosure avoidance; methods.md section 6).

Histogram: sex x age (0-110) x hispanic x 63 races (the 27,972 person types of
:mod:`tabrecon.schema`) on the plain hierarchy (nation >) state > county > tract > block group >
block.

* **Measurement**: at every level each geounit gets noisy answers to a set of queries, each a
  partition of the histogram (total, sex x agebin38, hispanic x sex, hispanic x race, detailed);
  query q of a level gets rho_q = rho x level share x query share, and its answers discrete Gaussian
  noise with sigma^2 = 1/rho_q (bounded DP: a changed record moves two cells, L2 sensitivity sqrt
  2). Answers are drawn only where post-processing reads them -- cells and query groups inside the
  parent's support (elsewhere the child is forced to zero, so those draws would not change the
  output's distribution). Noise comes from OpenDP's exact sampler.
* **Estimation**, parent by parent from the top: all children of a parent jointly, weighted
  non-negative least squares (weights 1/sigma^2) with the children summing to the parent's
  integer histogram cell by cell. Solved by ADMM (x = z split: a Woodbury x-step shared by all
  children, a per-cell simplex projection; linear in children x cells, 3-20x faster than the
  interior point on measured parents), or by Clarabel with one auxiliary variable per query answer
  (never the normal matrix) where child totals are fixed (the states) or ADMM does not converge.
* **Rounding**: floors plus one unit for some cells, chosen by an LP over the two-way table
  children x cells (integral: a transportation polytope) that keeps every parent cell exact and
  minimises sum (1 - 2 r) y; without fixed child totals the LP separates by cell and is solved
  exactly by giving each cell's missing units to its largest remainders. State totals are the only
  invariants.

The output is the privacy-protected microdata (each block cell with count k becomes k records) and
the noisy measurements.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import TabreconError
from ..geo import LENGTH, LEVEL_OF_LENGTH, LEVELS, prefix
from ..io import beside, write_json, write_parquet
from ..schema import (
    AGEBIN_OF_AGE,
    N_TYPES,
    TYPE_AGE,
    TYPE_HISP,
    TYPE_RACE,
    TYPE_SEX,
    Microdata,
    decode_types,
    write_microdata,
)
from .mechanisms import PrivacyCost, discrete_gaussian, rho_to_epsilon

#: Each query: group id of every type (a partition of the histogram).
QUERIES: dict[str, np.ndarray] = {
    "total": np.zeros(N_TYPES, dtype=np.int64),
    "sex_agebin": (TYPE_SEX.astype(np.int64) * 38 + AGEBIN_OF_AGE[TYPE_AGE]),
    "hispanic_sex": TYPE_HISP.astype(np.int64) * 2 + TYPE_SEX,
    "hispanic_race": TYPE_HISP.astype(np.int64) * 63 + TYPE_RACE - 1,
    "detailed": np.arange(N_TYPES, dtype=np.int64),
}
DEFAULT_QUERY_SHARES = {
    "total": 0.1,
    "sex_agebin": 0.2,
    "hispanic_sex": 0.1,
    "hispanic_race": 0.2,
    "detailed": 0.4,
}

#: The PL 94-171 persons histogram here: voting age x Hispanic x 63 races (252 cells; production
#: also has the 8 household / group-quarters types, which tabrecon's schema does not have).
PL_CELLS = 2 * 2 * 63
#: Each person type's PL 94-171 cell.
PL_CELL_OF_TYPE = ((TYPE_AGE >= 18).astype(np.int64) * 2 + TYPE_HISP) * 63 + TYPE_RACE - 1
_va, _hi, _ra = (
    np.arange(PL_CELLS) // 126,
    (np.arange(PL_CELLS) // 63) % 2,
    np.arange(PL_CELLS) % 63,
)
#: The production PL 94-171 queries (without hhgq and hhinstlevels), as partitions of its cells.
PL_QUERIES: dict[str, np.ndarray] = {
    "total": np.zeros(PL_CELLS, dtype=np.int64),
    "cenrace": _ra,
    "hispanic": _hi,
    "votingage": _va,
    "hispanic_cenrace": _hi * 63 + _ra,
    "votingage_cenrace": _va * 63 + _ra,
    "votingage_hispanic": _va * 2 + _hi,
    "votingage_hispanic_cenrace": np.arange(PL_CELLS),
    "detailed": np.arange(PL_CELLS),  # hhgq x the previous one in production; here the same cells
}
#: The 2020 PL 94-171 persons production run (DAS_2020_Redistricting_Production_Code, strategy
#: ProductionCandidate20210527US_mult8_add02_dsepJune3): rho = (542/339)^2 and the level shares.
PL94_RHO = (542 / 339) ** 2
PL94_LEVEL_SHARES = {
    lv: v / 4099 for lv, v in zip(LEVELS, (104, 1440, 447, 687, 1256, 165), strict=True)
}
#: Its per-level query proportions (numerators; hhinstlevels and hhgq, which tabrecon's schema
#: cannot answer, are left out and the rest renormalised within the level).
_PL94_QUERY_PROPS = {
    "nation": {
        "cenrace": 52 / 4097,
        "hispanic": 26 / 4097,
        "votingage": 26 / 4097,
        "hispanic_cenrace": 130 / 4097,
        "votingage_cenrace": 130 / 4097,
        "votingage_hispanic": 26 / 4097,
        "votingage_hispanic_cenrace": 26 / 241,
        "detailed": 189 / 241,
    },
    "state": {
        "total": 3773 / 4097,
        "cenrace": 6 / 4097,
        "hispanic": 6 / 4097,
        "votingage": 6 / 4097,
        "hispanic_cenrace": 12 / 4097,
        "votingage_cenrace": 12 / 4097,
        "votingage_hispanic": 6 / 4097,
        "votingage_hispanic_cenrace": 2 / 241,
        "detailed": 230 / 4097,
    },
    "county": {
        "total": 3126 / 4097,
        "cenrace": 10 / 4097,
        "hispanic": 10 / 4097,
        "votingage": 10 / 4097,
        "hispanic_cenrace": 28 / 4097,
        "votingage_cenrace": 28 / 4097,
        "votingage_hispanic": 10 / 4097,
        "votingage_hispanic_cenrace": 101 / 4097,
        "detailed": 754 / 4097,
    },
    "tract": {
        "total": 1567 / 4102,
        "cenrace": 4 / 2051,
        "hispanic": 5 / 4102,
        "votingage": 5 / 4102,
        "hispanic_cenrace": 1933 / 4102,
        "votingage_cenrace": 10 / 2051,
        "votingage_hispanic": 5 / 4102,
        "votingage_hispanic_cenrace": 67 / 4102,
        "detailed": 241 / 2051,
    },
    "blockgroup": {
        "total": 1705 / 4099,
        "cenrace": 3 / 4099,
        "hispanic": 3 / 4099,
        "votingage": 3 / 4099,
        "hispanic_cenrace": 1055 / 4099,
        "votingage_cenrace": 9 / 4099,
        "votingage_hispanic": 3 / 4099,
        "votingage_hispanic_cenrace": 24 / 4099,
        "detailed": 1288 / 4099,
    },
    "block": {
        "total": 5 / 4097,
        "cenrace": 9 / 4097,
        "hispanic": 5 / 4097,
        "votingage": 5 / 4097,
        "hispanic_cenrace": 21 / 4097,
        "votingage_cenrace": 21 / 4097,
        "votingage_hispanic": 5 / 4097,
        "votingage_hispanic_cenrace": 71 / 4097,
        "detailed": 3945 / 4097,
    },
}
PL94_QUERY_SHARES = {
    lv: {q: v / sum(props.values()) for q, v in props.items()}
    for lv, props in _PL94_QUERY_PROPS.items()
}
PRODUCTS = ("dhc", "pl94")


@dataclass(frozen=True)
class TopDownConfig:
    """Total zCDP budget, its split over levels and over each level's queries (``query_shares``
    for every level, or ``level_query_shares`` per level), and the histogram it measures:
    ``dhc`` (the 27,972 person types) or ``pl94`` (voting age x Hispanic x race, 252 cells)."""

    rho: float
    level_shares: dict[str, float]
    query_shares: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_QUERY_SHARES))
    name: str = "custom"
    product: str = "dhc"
    level_query_shares: dict[str, dict[str, float]] | None = None

    @property
    def queries(self) -> dict[str, np.ndarray]:
        """The product's queries: group id of every histogram cell."""
        return PL_QUERIES if self.product == "pl94" else QUERIES

    @property
    def cells(self) -> int:
        return PL_CELLS if self.product == "pl94" else N_TYPES

    def queries_at(self, level: str) -> dict[str, float]:
        """The queries measured at ``level`` and their shares of the level's budget."""
        if self.level_query_shares is not None and level in self.level_query_shares:
            return self.level_query_shares[level]
        return self.query_shares

    def __post_init__(self) -> None:
        if not self.rho > 0:
            raise TabreconError(f"the privacy budget rho must be > 0 (got {self.rho})")
        if self.product not in PRODUCTS:
            raise TabreconError(f"unknown product {self.product!r}; choose dhc or pl94")
        checks = [
            ("level", self.level_shares, LEVELS),
            ("query", self.query_shares, self.queries),
            *(
                (f"{lv} query", sh, self.queries)
                for lv, sh in (self.level_query_shares or {}).items()
            ),
        ]
        for what, shares, known in checks:
            bad = [k for k in shares if k not in known]
            if bad:
                raise TabreconError(f"unknown {what}(s) {bad}; choose from {', '.join(known)}")
            if any(v <= 0 for v in shares.values()):
                raise TabreconError(f"{what} shares must be > 0 (got {shares})")
            if abs(sum(shares.values()) - 1) > 1e-6:
                raise TabreconError(
                    f"{what} shares must sum to 1 (they sum to {sum(shares.values()):.6f})"
                )

    def rho_q(self, level: str, query: str) -> float:
        return self.rho * self.level_shares[level] * self.queries_at(level)[query]


def pl94_2020(rho: float = PL94_RHO) -> TopDownConfig:
    """The 2020 PL 94-171 persons production run: rho (542/339)^2 = 2.5562, its level shares
    (US 104, state 1440, county 447, tract 687, block group 1256, block 165 of 4099) and its
    per-level query proportions (hhgq and hhinstlevels left out, the rest renormalised)."""
    return TopDownConfig(
        rho,
        dict(PL94_LEVEL_SHARES),
        dict(PL94_QUERY_SHARES["block"]),
        name=f"pl94-2020 rho={rho:g}",
        product="pl94",
        level_query_shares={lv: dict(v) for lv, v in PL94_QUERY_SHARES.items()},
    )


def dhc2023_like(rho: float = 4.9622) -> TopDownConfig:
    """The 2023 DHC persons level proportions (US 0.0949, state 1.2987, county 0.4960, the
    intermediate levels 2.6316 merged onto tract, block group 0.4300, block 0.0110 of 4.9622),
    scaled to ``rho``."""
    amounts = {
        "nation": 0.0949,
        "state": 1.2987,
        "county": 0.4960,
        "tract": 0.6214 + 0.6214 + 1.3888,
        "blockgroup": 0.4300,
        "block": 0.0110,
    }
    tot = sum(amounts.values())
    return TopDownConfig(
        rho, {k: v / tot for k, v in amounts.items()}, name=f"dhc2023-like rho={rho:g}"
    )


def uniform_config(rho: float) -> TopDownConfig:
    """Equal shares over the six levels (for sweeps)."""
    return TopDownConfig(rho, {k: 1 / len(LEVELS) for k in LEVELS}, name=f"uniform rho={rho:g}")


@dataclass
class TopDownResult:
    records: Microdata
    measurements: pl.DataFrame  # level, geoid, query, group, noisy, variance
    privacy: dict
    seconds_by_level: dict[str, float]
    draws: int
    fallbacks: list[str]
    #: with the PL 94-171 stage: its noisy measurements and its block histograms (252 cells)
    pl94_measurements: pl.DataFrame | None = None
    pl94_blocks: dict[str, np.ndarray] | None = None

    @property
    def cost(self) -> PrivacyCost:
        """The whole release's zCDP cost (every level's queries composed)."""
        return PrivacyCost.zcdp(self.privacy["rho"])

    def write(self, out: str | Path, info: dict | None = None) -> list[Path]:
        """Write the protected records (``out``, the MDF), the noisy measurements
        (``<stem>_measurements.parquet``, what ``tabrecon reconstruct-noisy`` attacks) and the
        run's privacy, timings and fallbacks with ``info`` (``<stem>_topdown.json``)."""
        write_microdata(self.records, out)
        paths = [Path(out), beside(out, "_measurements.parquet"), beside(out, "_topdown.json")]
        write_parquet(self.measurements, paths[1])
        if self.pl94_measurements is not None:
            paths.append(beside(out, "_pl94_measurements.parquet"))
            write_parquet(self.pl94_measurements, paths[-1])
        about = {
            "privacy": self.privacy,
            "seconds_by_level": self.seconds_by_level,
            "noise_draws": self.draws,
            "fallbacks": self.fallbacks,
            **(info or {}),
        }
        write_json(paths[2], about)
        return paths


def _geo_hist(
    md: Microdata, n: int, product: str = "dhc"
) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
    """(geoids at prefix length n, index of each person's geounit, geounit x cell counts) for the
    product's histogram (person types, or PL 94-171 cells)."""
    pre = prefix(md.geoids, LEVEL_OF_LENGTH[n])
    geo, inv = np.unique(pre[md.block], return_inverse=True)
    cells, size = (
        (PL_CELL_OF_TYPE[md.types], PL_CELLS) if product == "pl94" else (md.types, N_TYPES)
    )
    H = sp.csr_matrix((np.ones(len(md)), (inv, cells)), shape=(len(geo), size))
    H.sum_duplicates()
    return geo, inv, H


class Measurement(NamedTuple):
    """One query's noisy answers for one geounit: the groups of types it answers (``groups``;
    ``inv`` maps each support cell to its group), the noisy counts and their noise variance."""

    query: str
    groups: np.ndarray
    inv: np.ndarray
    noisy: np.ndarray
    variance: float


def _measure(
    cfg: TopDownConfig, level: str, trues: list[np.ndarray], support: np.ndarray
) -> list[list[Measurement]]:
    """Noisy answers of each geounit's queries on the cells of ``support`` (the groups touching it).

    ``trues`` holds one true histogram (on ``support``) per geounit; each query's noise for all of
    them comes from one call to the exact sampler.
    """
    out: list[list[Measurement]] = [[] for _ in trues]
    for q in cfg.queries_at(level):
        groups, inv = np.unique(cfg.queries[q][support], return_inverse=True)
        mech = discrete_gaussian(cfg.rho_q(level, q))
        noise = mech.sample(groups.size * len(trues)).reshape(len(trues), groups.size)
        var = max(mech.variance, 1e-6)  # weights stay finite at huge rho
        for i, true in enumerate(trues):
            truth = np.bincount(inv, weights=true, minlength=groups.size)
            out[i].append(Measurement(q, groups, inv, truth + noise[i], var))
    return out


#: Clarabel's stopping tolerances for the fits: the rounding that follows needs ~1e-4, not 1e-8
FIT_TOL = 1e-6


def _fit(
    children_meas: list[list[Measurement]],
    parent: np.ndarray,
    totals: np.ndarray | None,
    penalty: float | None = None,
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Weighted NNLS of all children jointly: sum over children = parent (cell by cell); optional
    fixed child totals. Variables x (children x cells). An answer that covers one cell (the detailed
    query) enters the objective directly, w (x - y)^2; every other answer gets an auxiliary
    r = A x - y (never the normal matrix). With ``penalty`` the parent sums are not equalities but a
    term ``penalty * ||sum_c x_c - parent||^2`` (the fallback when the exact problem fails); the
    caller then rescales to the parent. ``pl`` = (PL cell of each support cell, children x PL
    cells) holds every child's PL 94-171 histogram equal to the published one."""
    import clarabel

    C, S = len(children_meas), parent.size
    nx = C * S
    # the constraint matrix is assembled once from index arrays (columns: x, then the residuals r)
    # in this row order: parent cells, one block per non-direct answer, child totals, PL cells
    cells = np.arange(S)
    rows_i: list[np.ndarray] = []
    cols_i: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    beqs: list[np.ndarray] = []
    weights: list[np.ndarray] = []

    def add(r: np.ndarray, c: np.ndarray, v: float | np.ndarray = 1.0) -> None:
        rows_i.append(r)
        cols_i.append(c)
        vals.append(np.broadcast_to(np.asarray(v, dtype=float), r.shape))

    every_child = (np.tile(cells, C), np.arange(nx))  # sum_c x[c, k]: row k, column c*S + k
    row = 0
    if penalty is None:  # parent cells: sum_c x[c, k] = parent[k]
        add(*every_child)
        beqs.append(parent.astype(float))
        row = S
    pdiag = np.zeros(nx)  # direct terms: sum w (x_i - y_i)^2 = x' diag(w) x - 2 (w y)' x + const
    lin = np.zeros(nx)
    # each other answer: A_q x_c - r = y (the parent, with ``penalty``, spans every child)
    answers: list[tuple[int, np.ndarray, int, np.ndarray, float]] = []  # child, inv, n, y, w
    if penalty is not None:  # the parent as one more (very precise) measurement of all children
        answers.append((-1, cells, S, parent.astype(float), float(penalty)))
    for c, meas in enumerate(children_meas):
        for _q, groups, inv, noisy, var in meas:
            if groups.size == S and np.array_equal(inv, cells):  # one answer per cell
                pdiag[c * S : (c + 1) * S] += 1.0 / var
                lin[c * S : (c + 1) * S] -= np.asarray(noisy, dtype=float) / var
                continue
            answers.append((c, inv, groups.size, np.asarray(noisy, dtype=float), 1.0 / var))
    nr = sum(a[2] for a in answers)
    off = 0
    for c, inv, ng, noisy, wgt in answers:
        if c < 0:
            add(row + every_child[0], every_child[1])
        else:
            add(row + inv, c * S + cells)
        add(row + np.arange(ng), nx + off + np.arange(ng), -1.0)
        beqs.append(noisy)
        weights.append(np.full(ng, wgt))
        row += ng
        off += ng
    if totals is not None:  # fixed child totals
        add(row + np.repeat(np.arange(C), S), np.arange(nx))
        beqs.append(totals.astype(float))
        row += C
    if pl is not None:  # every child's PL 94-171 histogram
        ks, Pk = _pl_indicator(pl[0])
        pk = Pk.tocoo()
        K = ks.size
        add(
            row + (np.arange(C)[:, None] * K + pk.row[None, :]).ravel(),
            (np.arange(C)[:, None] * S + pk.col[None, :]).ravel(),
            np.tile(pk.data, C),
        )
        beqs.append(pl[1][:, ks].astype(float).ravel())
        row += C * K
    neq = row
    add(neq + np.arange(nx), np.arange(nx), -1.0)  # G: -x <= 0
    A = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(cols_i))),
        shape=(neq + nx, nx + nr),
    )
    A.sum_duplicates()
    beq = np.concatenate(beqs) if beqs else np.zeros(0)
    w = np.concatenate(weights) if weights else np.zeros(0)
    P = sp.diags(np.concatenate([pdiag, w]), format="csc")
    q = np.concatenate([lin, np.zeros(nr)])
    b = np.concatenate([beq, np.zeros(nx)])
    cones = [clarabel.ZeroConeT(neq), clarabel.NonnegativeConeT(nx)]
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.tol_gap_abs = st.tol_gap_rel = st.tol_feas = FIT_TOL
    st.max_threads = 1
    sol = clarabel.DefaultSolver(P, q, A, b, cones, st).solve()
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        raise TabreconError(f"least-squares step failed: {sol.status}")
    x = np.maximum(np.asarray(sol.x[:nx]), 0.0).reshape(C, S)
    x[x < 1e-7] = 0.0
    return x


#: the least-squares solvers for a parent without fixed child totals (``topdown(fit=...)``)
FITS = ("admm", "clarabel")
#: ADMM stops when the largest change of any child cell and the largest gap between the split copies
#: fall below this many persons (the rounding that follows moves cells by whole persons)
ADMM_TOL = 1e-3
ADMM_MAX_ITER = 5000


def _project_columns(v: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Euclidean projection of every column of ``v`` (children x cells) onto {z >= 0, sum z =
    total}.

    Michelot's algorithm, vectorised over the columns: the threshold theta starts at the mean excess
    (a lower bound of the optimal one) and each pass recomputes it over the entries still above it;
    it increases monotonically and stops once the active set no longer changes (at most C passes, in
    practice a handful)."""
    C = v.shape[0]
    theta = (v.sum(axis=0) - total) / C
    active = np.ones(v.shape, dtype=bool)
    for _ in range(C + 1):
        act = v > theta
        if np.array_equal(act, active):
            break
        active = act
        cnt = act.sum(axis=0)
        theta = np.where(
            cnt > 0, (np.where(act, v, 0.0).sum(axis=0) - total) / np.maximum(cnt, 1), theta
        )
    return np.maximum(v - theta, 0.0)


def _fit_admm(
    children_meas: list[list[Measurement]],
    parent: np.ndarray,
    tol: float = ADMM_TOL,
    max_iter: int = ADMM_MAX_ITER,
) -> tuple[np.ndarray, int]:
    """The same weighted NNLS as :func:`_fit` (children sum to the parent cell by cell), solved by
    ADMM so that its cost grows linearly with children x cells: a parent with hundreds of children
    and a large support (a county's tracts) is one interior-point problem too big to factor quickly.

    Split x (the fit) = z (in the set X = {z >= 0, sum over children = parent}, a scaled simplex per
    cell). The x-step is one linear solve per child with the same matrix a I + 2 A' W A for every
    child (A stacks the group indicators of the queries with several cells per answer, a few
    hundred rows): by the Woodbury identity it costs one small inverse (of a few hundred rows) per
    parent and a few sparse and dense products per iteration for all children at once. The z-step
    projects every cell's column onto its simplex. Returns z, which meets the parent sums and
    non-negativity exactly at every iteration, and the number of iterations. Raises TabreconError
    when it does not reach ``tol`` (the caller falls back).
    """
    import scipy.linalg as sl

    C, S = len(children_meas), parent.size
    d = 0.0  # weight of the one-cell answers (the detailed query)
    b1 = np.zeros((C, S))
    A_rows, W_rows, Y_cols = [], [], []
    for qi, (_q, groups, inv, _noisy, var) in enumerate(children_meas[0]):
        if groups.size == S and np.array_equal(inv, np.arange(S)):
            d += 1.0 / var
            for c, meas in enumerate(children_meas):
                b1[c] += np.asarray(meas[qi].noisy, dtype=float) / var
            continue
        A_rows.append(sp.csr_matrix((np.ones(S), (inv, np.arange(S))), shape=(groups.size, S)))
        W_rows.append(np.full(groups.size, 1.0 / var))
        Y_cols.append(np.stack([np.asarray(meas[qi].noisy, dtype=float) for meas in children_meas]))
    if d <= 0:
        raise TabreconError(
            "the ADMM fit needs a query with one answer per cell (the detailed query)"
        )
    A = sp.vstack(A_rows, format="csr") if A_rows else sp.csr_matrix((0, S))
    W = np.concatenate(W_rows) if W_rows else np.zeros(0)
    Y = np.hstack(Y_cols) if Y_cols else np.zeros((C, 0))
    AT = A.T.tocsr()
    AAT = (A @ AT).toarray()
    base = (
        2.0 * b1 + 2.0 * (AT @ (Y * W).T).T
    )  # the constant part of every x-step's right-hand side
    rho = 2.0 * d

    def refactor(r: float):
        # K is small (one row per group answer) and well conditioned: an explicit inverse makes each
        # x-step two matrix products (a triangular solve with many right-hand sides is slower here)
        a = 2.0 * d + r
        K = (a / 2.0) * np.diag(1.0 / W) + AAT if W.size else np.zeros((0, 0))
        return a, (sl.cho_solve(sl.cho_factor(K), np.eye(K.shape[0])) if W.size else None)

    alpha, factor = refactor(rho)
    z = _project_columns(np.maximum(b1 / d, 0.0), parent.astype(float))
    u = np.zeros((C, S))
    p = parent.astype(float)
    for it in range(1, max_iter + 1):
        rhs = base + rho * (z - u)
        if W.size:
            corr = (factor @ (A @ rhs.T)).T  # C x R
            x = (rhs - (AT @ corr.T).T) / alpha
        else:
            x = rhs / alpha
        z_old = z
        z = _project_columns(x + u, p)
        u += x - z
        r_pri = np.abs(x - z).max()
        r_dual = rho * np.abs(z - z_old).max()
        if r_pri < tol and np.abs(z - z_old).max() < tol:
            return z, it
        if it % 20 == 0:  # residual balancing: keep the two residuals within a factor of 10
            if r_pri > 10 * r_dual:
                rho *= 2.0
                u /= 2.0
                alpha, factor = refactor(rho)
            elif r_dual > 10 * r_pri:
                rho /= 2.0
                u *= 2.0
                alpha, factor = refactor(rho)
    raise TabreconError(
        f"ADMM fit did not reach {tol:g} persons in {max_iter} iterations "
        f"(gap {r_pri:.2g}, step {np.abs(z - z_old).max():.2g})"
    )


def _pl_indicator(plc: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix]:
    """The PL cells present in a support and the (PL cells x support) 0/1 matrix."""
    ks, kinv = np.unique(plc, return_inverse=True)
    return ks, sp.csr_matrix(
        (np.ones(plc.size), (kinv, np.arange(plc.size))), shape=(ks.size, plc.size)
    )


def _round(
    x: np.ndarray,
    parent: np.ndarray,
    totals: np.ndarray | None,
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Integer children: floors plus 0/1 per cell, parent cells exact (and fixed totals, or every
    child's PL 94-171 histogram), min sum (1-2r) y. With the PL histograms the LP is a
    transportation problem per PL cell (children x its types): totally unimodular, so its vertex
    is integral."""
    from scipy.optimize import linprog

    F = np.floor(x + 1e-9).astype(np.int64)
    r = np.clip(x - F, 0.0, 1.0)
    need = parent.astype(np.int64) - F.sum(axis=0)
    if (need < 0).any():
        raise TabreconError("rounding: floors exceed a parent cell")
    cols = np.flatnonzero(need > 0)
    C = x.shape[0]
    if pl is not None:
        ks, Pk = _pl_indicator(pl[0])
        left = pl[1][:, ks].astype(np.int64) - (Pk @ F.T).T.astype(np.int64)  # C x K
        if (left < 0).any():
            raise TabreconError("rounding: floors exceed a child's PL 94-171 count")
        if not cols.size:
            if left.any():
                raise TabreconError("rounding: a child's PL 94-171 count cannot be met")
            return F
    elif not cols.size:
        return F
    if totals is None and pl is None:  # separable by cell: the largest remainders take the need
        if need.max() > C:
            raise TabreconError("rounding: a parent cell needs more units than it has children")
        order = np.argsort(-r, axis=0, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.broadcast_to(np.arange(C)[:, None], order.shape), axis=0)
        return F + (rank < need[None, :])
    ci = np.repeat(np.arange(C), cols.size)
    ki = np.tile(cols, C)
    n = ci.size
    kpos = np.searchsorted(cols, ki)
    A_eq = [sp.csr_matrix((np.ones(n), (kpos, np.arange(n))), shape=(cols.size, n))]
    b_eq = [need[cols]]
    if pl is not None:
        kinv = np.searchsorted(ks, pl[0])
        A_eq.append(
            sp.csr_matrix(
                (np.ones(n), (ci * ks.size + kinv[ki], np.arange(n))), shape=(C * ks.size, n)
            )
        )
        b_eq.append(left.ravel())
    elif totals is not None:
        A_eq.append(sp.csr_matrix((np.ones(n), (ci, np.arange(n))), shape=(C, n)))
        b_eq.append(totals - F.sum(axis=1))
    res = linprog(
        1 - 2 * r[ci, ki],
        A_eq=sp.vstack(A_eq),
        b_eq=np.concatenate(b_eq),
        bounds=(0, 1),
        method="highs-ds",
    )
    if res.x is None:
        raise TabreconError(f"rounding failed: {res.message}")
    y = np.rint(res.x).astype(np.int64)
    if np.abs(res.x - y).max() > 1e-6:
        raise TabreconError("rounding: the LP's solution is not integral")
    F[ci, ki] += y
    return F


#: weight of the parent-sum term in the fallback fit, relative to 1/variance of the measurements
FALLBACK_PENALTY = 1e4


def _fallback(
    metas, pcounts, totals, where: str, exc: Exception, log: list[str], pl=None
) -> np.ndarray:
    """The exact fit failed at one parent: relax the parent sums into a penalty, rescale each cell
    to the parent, round (parent cells exact). If even that fails, split the parent by the
    children's noisy totals. Under PL 94-171 constraints: split each PL cell's types among the
    children in proportion to their published PL counts (always feasible), then round. Every
    use is reported in ``log``."""
    if pl is not None:
        plc, M = pl
        ks, Pk = _pl_indicator(plc)
        kinv = np.searchsorted(ks, plc)
        cell_tot = np.asarray(Pk @ pcounts.astype(float)).ravel()  # parent count per PL cell
        share = np.where(cell_tot[kinv] > 0, pcounts / np.where(cell_tot > 0, cell_tot, 1)[kinv], 0)
        x = M[:, ks][:, kinv] * share[None, :]
        log.append(f"{where}: {exc}; children split each PL 94-171 cell in proportion")
        return _round(x, pcounts, None, pl)
    try:
        var = min(m.variance for meas in metas for m in meas)
        x = _fit(metas, pcounts, totals, penalty=FALLBACK_PENALTY / var)
        col = x.sum(axis=0)
        x = np.where(
            col > 0, x * (pcounts / np.where(col > 0, col, 1.0)), 1.0 / x.shape[0] * pcounts
        )
        xi = _round(x, pcounts, totals)
        log.append(
            f"{where}: {exc}; refitted with the parent sums as a penalty, then rescaled to the "
            "parent"
        )
        return xi
    except TabreconError as exc2:
        w = np.array([max(m[0].noisy.sum(), 0.0) for m in metas]) + 1e-9
        log.append(
            f"{where}: {exc}; the penalised refit failed too ({exc2}); children got shares of the "
            "parent"
        )
        return _round(np.outer(w / w.sum(), pcounts), pcounts, None)


def _fit_auto(
    metas: list[list[Measurement]],
    pcounts: np.ndarray,
    totals: np.ndarray | None,
    fit: str = "admm",
    log: list[str] | None = None,
    where: str = "",
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The fit for one parent: ADMM unless the children have fixed totals (the states), PL
    94-171 histograms to meet, or ``fit`` is ``clarabel``; the interior-point fit also when ADMM
    does not converge (noted in ``log``)."""
    if pl is not None:
        return _fit(metas, pcounts, None, pl=pl)
    if totals is None and fit == "admm":
        try:
            return _fit_admm(metas, pcounts)[0]
        except TabreconError as exc:
            if log is not None:
                log.append(f"{where}: {exc}; solved by the interior-point fit instead")
    return _fit(metas, pcounts, totals)


def _parents_job(args: tuple) -> list[tuple]:
    """Measure, fit and round the children of a batch of parents (runs in a worker process). One
    BLAS thread: the pool supplies the parallelism (measured on the real sample with 2 workers: 41
    s with the default BLAS threads, 28 s with one)."""
    from threadpoolctl import threadpool_limits

    cfg, lv, items, fit = args
    with threadpool_limits(limits=1, user_api="blas"):
        return [_one_parent(cfg, lv, fit, *item) for item in items]


def _one_parent(cfg, lv, fit, p, kids, support, pcounts, sub, totals, pl=None) -> tuple:
    """Measure the children of one parent, fit, round (the fallback if the fit fails)."""
    metas = _measure(cfg, lv, list(sub), support)
    nd = sum(m.groups.size for meas in metas for m in meas)
    fb: list[str] = []
    where = f"{lv} under {p or 'root'}"
    try:
        x = _fit_auto(metas, pcounts, totals, fit, fb, where, pl)
        xi = _round(x, pcounts, totals, pl)
    except TabreconError as exc:
        xi = _fallback(metas, pcounts, totals, where, exc, fb, pl)
    return (p, kids, support, xi, metas, nd, fb)


def _run_parents(cfg: TopDownConfig, lv: str, jobs: list[tuple], workers: int, fit: str = "admm"):
    """Every parent's job, in this process or spread over ``workers`` processes in batches of
    similar size (the parents are independent given the level above)."""
    if workers <= 1 or len(jobs) < 2 * workers:
        yield from _parents_job((cfg, lv, jobs, fit))
        return
    from ..interrupts import process_pool

    cost = np.array([j[4].size for j in jobs], dtype=float)
    nb = min(len(jobs), workers * 8)
    edges = np.searchsorted(np.cumsum(cost), np.linspace(0, cost.sum(), nb + 1)[1:-1])
    batches = [b for b in np.split(np.arange(len(jobs)), edges) if b.size]
    with process_pool(workers) as ex:
        for res in ex.map(_parents_job, [(cfg, lv, [jobs[i] for i in b], fit) for b in batches]):
            yield from res


def topdown(
    md: Microdata,
    config: TopDownConfig,
    seed: int | None = None,
    progress=None,
    workers: int = 1,
    fit: str = "admm",
    pl94: TopDownConfig | None = None,
) -> TopDownResult:
    """Protect ``md`` with TopDown (see module docstring). ``seed`` is unused for the noise, which
    comes from OpenDP's cryptographic sampler (a release must not be reproducible from a seed).
    ``workers`` processes share the parents of each level. ``fit`` picks the least-squares solver
    for parents without fixed child totals: ``admm`` (default; linear in children x cells) or
    ``clarabel`` (interior point; the states, and any parent where ADMM does not converge, always
    use it).

    With ``pl94`` (a ``product="pl94"`` config, e.g. :func:`pl94_2020`) the release is made as in
    2020: the PL 94-171 run first, then ``config``'s run with every geounit's voting age x
    Hispanic x race histogram held equal to the PL run's (the published-marginal invariant, at
    every level down to the block); both runs' noisy measurements are kept and their costs
    compose (zCDP budgets add)."""
    if fit not in FITS:
        raise TabreconError(f"unknown fit {fit!r}; choose from {', '.join(FITS)}")
    if not len(md):
        raise TabreconError("no person records to protect")
    if config.product != "dhc":
        raise TabreconError(
            "topdown() protects person records with a dhc config; pass the PL "
            "94-171 config as pl94="
        )
    pl_run = None
    if pl94 is not None:
        if pl94.product != "pl94":
            raise TabreconError(f"pl94= needs a PL 94-171 config (got product {pl94.product!r})")
        pl_run = _run(md, pl94, workers, fit, progress)
    run = _run(md, config, workers, fit, progress, pl_run["est"] if pl_run else None)
    # block histograms -> records
    est = run["est"]["block"]
    bgeo = sorted(est)
    blocks, types, counts = [], [], []
    for bi, g in enumerate(bgeo):
        sup, c = est[g]
        blocks.append(np.full(sup.size, bi))
        types.append(sup)
        counts.append(c)
    b = np.concatenate(blocks)
    t = np.concatenate(types)
    k = np.concatenate(counts).astype(np.int64)
    idx = np.repeat(np.arange(b.size), k)
    sex, age, race, hisp = decode_types(t[idx])
    out = Microdata(
        np.array(bgeo),
        b[idx].astype(np.int32),
        sex,
        age,
        race,
        hisp,
        source=f"TopDown ({run['cfg'].name})",
    )
    out = out.take(np.arange(len(out)))  # drop blocks left empty
    runs = [r for r in (pl_run, run) if r is not None]
    rho_total = sum(r["rho"] for r in runs)
    privacy = {
        "rho": rho_total,
        "epsilon_cks_delta_1e-10": rho_to_epsilon(rho_total, 1e-10),
        "levels": run["levels_rho"],
        "config": run["cfg"].name,
    }
    if pl_run is not None:
        privacy["runs"] = {
            r["cfg"].name: {
                "rho": r["rho"],
                "epsilon_cks_delta_1e-10": rho_to_epsilon(r["rho"], 1e-10),
                "levels": r["levels_rho"],
            }
            for r in runs
        }
        privacy["config"] = f"{pl_run['cfg'].name} + {run['cfg'].name}"
    timings = {
        **({f"pl94:{k}": v for k, v in pl_run["timings"].items()} if pl_run else {}),
        **run["timings"],
    }
    res = TopDownResult(
        out,
        run["meas"].frame(),
        privacy,
        timings,
        sum(r["draws"] for r in runs),
        [*(f"pl94: {f}" for f in (pl_run["fallbacks"] if pl_run else [])), *run["fallbacks"]],
    )
    if pl_run is not None:
        res.pl94_measurements = pl_run["meas"].frame()
        res.pl94_blocks = {g: _dense(v, PL_CELLS) for g, v in pl_run["est"]["block"].items()}
    return res


def _dense(v: tuple[np.ndarray, np.ndarray], n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    out[v[0]] = v[1]
    return out


def _run(
    md: Microdata,
    config: TopDownConfig,
    workers: int,
    fit: str,
    progress,
    pl_est: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] | None = None,
) -> dict:
    """One TopDown run from the root to the blocks. Returns every level's estimates (geoid ->
    (support, counts)), the measurements, timings, draws, fallbacks and the budget spent. With
    ``pl_est`` (a PL 94-171 run's estimates) each geounit's PL histogram is held to it."""
    states = np.unique(prefix(md.geoids, "state"))
    levels = [lv for lv in LEVELS if lv != "nation" or len(states) > 1]
    missing = [lv for lv in levels if lv not in config.level_shares]
    if missing:
        raise TabreconError(f"the budget has no share for level(s) {missing} present in the data")
    used = {lv: config.level_shares[lv] for lv in levels}
    scale = 1.0 / sum(used.values())  # levels absent from the data give their share to the rest
    cfg = replace(config, level_shares={k: v * scale for k, v in used.items()})
    product, ncell = cfg.product, cfg.cells
    meas_rows = _MeasBuffer()
    timings: dict[str, float] = {}
    draws = 0
    fallbacks: list[str] = []
    state_geo, _, state_H = _geo_hist(md, 2, product)
    state_tot = dict(
        zip(
            state_geo.tolist(),
            np.asarray(state_H.sum(axis=1)).ravel().astype(np.int64).tolist(),
            strict=True,
        )
    )

    def pl_of(level: str, geoids: np.ndarray) -> np.ndarray:
        assert pl_est is not None
        return np.stack([_dense(pl_est[level][str(g)], PL_CELLS) for g in geoids])

    # the root: its own measurements, NNLS with its total (sum of state totals, invariant) held
    root = levels[0]
    t0 = time.perf_counter()
    rgeo, _, rH = _geo_hist(md, LENGTH[root], product)
    est: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # geoid -> (support, counts)
    by_level: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    sup_all = np.arange(ncell)
    for i, g in enumerate(rgeo):
        true = np.asarray(rH[i].todense()).ravel()
        meas = _measure(cfg, root, [true], sup_all)[0]
        draws += sum(m.groups.size for m in meas)
        tot = sum(state_tot.values()) if root == "nation" else state_tot[g]
        pl = (PL_CELL_OF_TYPE, pl_of(root, np.array([g]))[0]) if pl_est is not None else None
        x = _fit_root(meas, int(tot), ncell, pl)
        est[g] = (sup_all[x > 0], x[x > 0])
        meas_rows.add(root, g, meas)
    by_level[root] = est
    timings[root] = time.perf_counter() - t0
    for li in range(1, len(levels)):
        lv, parent_lv = levels[li], levels[li - 1]
        t0 = time.perf_counter()
        cgeo, _, cH = _geo_hist(md, LENGTH[lv], product)
        plen = LENGTH[parent_lv]
        parent_of = np.array([g[:plen] for g in cgeo]) if plen else np.full(len(cgeo), "")
        new_est: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        jobs = []
        pu, start, count = np.unique(
            parent_of, return_index=True, return_counts=True
        )  # cgeo is sorted
        for p, a, n in zip(pu, start, count, strict=True):
            kids = np.arange(a, a + n)
            support, pcounts = est[p]
            if n == 1:  # a single child copies its parent (no budget spent)
                new_est[cgeo[a]] = (support, pcounts)
                continue
            sub = cH[a : a + n][:, support].toarray()
            pl = None
            if pl_est is not None:
                pl = (PL_CELL_OF_TYPE[support], pl_of(lv, cgeo[a : a + n]))
                _check_pl(pl, pcounts, f"{lv} under {p or 'root'}")
            totals = (
                np.array([state_tot[cgeo[c]] for c in kids])
                if lv == "state" and pl is None
                else None
            )
            jobs.append((str(p), kids, support, pcounts, sub, totals, pl))
        for _p, kids, support, xi, metas, nd, fb in _run_parents(cfg, lv, jobs, workers, fit):
            draws += nd
            fallbacks += fb
            for j, (c, meas) in enumerate(zip(kids, metas, strict=True)):
                meas_rows.add(lv, cgeo[c], meas)
                nz = xi[j] > 0
                new_est[cgeo[c]] = (support[nz], xi[j][nz])
        est = new_est
        by_level[lv] = est
        timings[lv] = time.perf_counter() - t0
        if progress:
            progress(lv if product == "dhc" else f"pl94:{lv}")
    rho = sum(cfg.rho_q(lv, q) for lv in levels for q in cfg.queries_at(lv))
    return {
        "est": by_level,
        "meas": meas_rows,
        "timings": timings,
        "draws": draws,
        "fallbacks": fallbacks,
        "rho": rho,
        "levels_rho": {lv: cfg.rho * cfg.level_shares[lv] for lv in levels},
        "cfg": cfg,
    }


def _check_pl(pl: tuple[np.ndarray, np.ndarray], pcounts: np.ndarray, where: str) -> None:
    """The children's PL histograms must add up to the parent's (a PL run is consistent, and
    the parent was held to its own PL histogram)."""
    plc, M = pl
    have = np.bincount(plc, weights=pcounts, minlength=PL_CELLS)
    if not np.array_equal(have.astype(np.int64), M.sum(axis=0)):
        bad = int(np.flatnonzero(have.astype(np.int64) != M.sum(axis=0))[0])
        raise TabreconError(
            f"{where}: the children's PL 94-171 counts do not add up to the parent's in PL cell "
            f"{bad} ({int(M[:, bad].sum())} vs {int(have[bad])})"
        )


def _fit_root(
    meas: list[Measurement],
    total: int,
    S: int = N_TYPES,
    pl: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The root histogram: NNLS on its own answers with its total (or, with ``pl``, its PL
    94-171 histogram) held, then rounded keeping them."""
    import clarabel

    blocks = [
        (sp.csr_matrix((np.ones(S), (inv, np.arange(S))), shape=(g.size, S)), noisy, var)
        for _, g, inv, noisy, var in meas
    ]
    nr = sum(A.shape[0] for A, _, _ in blocks)
    rows, off = [], 0
    for A, _, _ in blocks:
        R = sp.csr_matrix(
            (-np.ones(A.shape[0]), (np.arange(A.shape[0]), off + np.arange(A.shape[0]))),
            shape=(A.shape[0], nr),
        )
        rows.append(sp.hstack([A, R]))
        off += A.shape[0]
    if pl is not None:
        ks, Pk = _pl_indicator(pl[0])
        hold, target = Pk, pl[1][ks].astype(float)
    else:
        hold, target = sp.csr_matrix(np.ones((1, S))), np.array([float(total)])
    tot_row = sp.hstack([hold, sp.csr_matrix((hold.shape[0], nr))])
    Aeq = sp.vstack([tot_row, *rows], format="csc")
    beq = np.concatenate([target, *[noisy.astype(float) for _, noisy, _ in blocks]])
    w = np.concatenate([np.full(A.shape[0], 1.0 / var) for A, _, var in blocks])
    P = sp.block_diag([sp.csc_matrix((S, S)), sp.diags(w)], format="csc")
    G = sp.hstack([-sp.identity(S), sp.csr_matrix((S, nr))], format="csc")
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.max_threads = 1  # no solver threads: a process pool forks after this
    sol = clarabel.DefaultSolver(
        P,
        np.zeros(S + nr),
        sp.vstack([Aeq, G], format="csc"),
        np.concatenate([beq, np.zeros(S)]),
        [clarabel.ZeroConeT(Aeq.shape[0]), clarabel.NonnegativeConeT(S)],
        st,
    ).solve()
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        raise TabreconError(f"least-squares step failed at the root: {sol.status}")
    x = np.maximum(np.asarray(sol.x[:S]), 0.0)
    x[x < 1e-7] = 0.0
    # round keeping the total (or each PL cell's count): floors plus the largest remainders
    F = np.floor(x + 1e-9).astype(np.int64)
    group = np.searchsorted(ks, pl[0]) if pl is not None else np.zeros(S, dtype=np.int64)
    want = pl[1][ks].astype(np.int64) if pl is not None else np.array([total])
    left = want - np.bincount(group, weights=F, minlength=want.size).astype(np.int64)
    order = np.lexsort((-(x - F), group))  # by group, largest remainder first
    rank = np.empty(S, dtype=np.int64)
    starts = np.searchsorted(group[order], np.arange(want.size))
    rank[order] = np.arange(S) - starts[group[order]]
    F += (rank < left[group]).astype(np.int64)
    return F


class _MeasBuffer:
    """The noisy measurements of every geounit, kept as array references and turned into one frame
    at the end (one small DataFrame per geounit and query cost more than the block level's fits)."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, str, str, np.ndarray, np.ndarray, float]] = []

    def add(self, level: str, geoid: str, meas: list[Measurement]) -> None:
        for q, groups, _inv, noisy, var in meas:
            self.parts.append((level, str(geoid), q, groups, noisy, var))

    def frame(self) -> pl.DataFrame:
        if not self.parts:
            return pl.DataFrame()
        lens = np.array([p[3].size for p in self.parts])

        def strings(i: int) -> pl.Series:  # codes repeated, then the strings gathered in polars
            uniq, codes = np.unique(np.array([p[i] for p in self.parts]), return_inverse=True)
            return pl.Series(uniq.tolist(), dtype=pl.String).gather(np.repeat(codes, lens))

        return pl.DataFrame(
            {
                "level": strings(0),
                "geoid": strings(1),
                "query": strings(2),
                "group": np.concatenate([p[3] for p in self.parts]).astype(np.int64),
                "noisy": np.concatenate([np.asarray(p[4]) for p in self.parts]).astype(np.int64),
                "variance": np.repeat(np.array([p[5] for p in self.parts], dtype=float), lens),
            }
        )


__all__ = [
    "QUERIES",
    "Measurement",
    "TopDownConfig",
    "TopDownResult",
    "dhc2023_like",
    "topdown",
    "uniform_config",
]
