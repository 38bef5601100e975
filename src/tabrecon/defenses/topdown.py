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
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

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
from ..vocab import Geo
from .mechanisms import Noise, PrivacyCost, discrete_gaussian, rho_to_epsilon
from .topdown_fit import FITS, Measurement, fit_auto, fit_penalised, pl_indicator, round_children

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
    #: the run's seed where its noise is seeded (:attr:`~tabrecon.defenses.mechanisms.Noise.SEEDED`,
    #: an experiment that repeats); None: OpenDP's secure sampler, as a release needs
    noise_seed: int | None = None

    def noise_rng(self, level: str, parent: str) -> np.random.Generator | None:
        """The generator of the noise measured under ``parent`` at ``level`` (None: secure):
        one stream per product, level and parent, so the draws do not depend on which worker
        process measures which parent."""
        if self.noise_seed is None:
            return None
        key = zlib.crc32(f"{self.product}/{level}/{parent}".encode())
        return np.random.default_rng([self.noise_seed, key])

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


def _measure(
    cfg: TopDownConfig,
    level: str,
    trues: list[np.ndarray],
    support: np.ndarray,
    rng: np.random.Generator | None = None,
) -> list[list[Measurement]]:
    """Noisy answers of each geounit's queries on the cells of ``support`` (the groups touching it).

    ``trues`` holds one true histogram (on ``support``) per geounit; each query's noise for all of
    them comes from one call to the exact sampler.
    """
    out: list[list[Measurement]] = [[] for _ in trues]
    for q in cfg.queries_at(level):
        groups, inv = np.unique(cfg.queries[q][support], return_inverse=True)
        mech = discrete_gaussian(cfg.rho_q(level, q))
        noise = mech.sample(groups.size * len(trues), rng).reshape(len(trues), groups.size)
        var = max(mech.variance, 1e-6)  # weights stay finite at huge rho
        for i, true in enumerate(trues):
            truth = np.bincount(inv, weights=true, minlength=groups.size)
            out[i].append(Measurement(q, groups, inv, truth + noise[i], var))
    return out


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
    metas = _measure(cfg, lv, list(sub), support, rng=cfg.noise_rng(lv, p or ""))
    nd = sum(m.groups.size for meas in metas for m in meas)
    fb: list[str] = []
    where = f"{lv} under {p or 'root'}"
    try:
        x = fit_auto(metas, pcounts, totals, fit, fb, where, pl)
        xi = round_children(x, pcounts, totals, pl)
    except TabreconError as exc:
        xi = fit_penalised(metas, pcounts, totals, where, exc, fb, pl)
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
    noise: Noise = Noise.SECURE,
) -> TopDownResult:
    """Protect ``md`` with TopDown (see module docstring). The noise comes from OpenDP's
    cryptographic sampler (a release must not be reproducible from a seed), unless ``noise`` is
    :attr:`~tabrecon.defenses.mechanisms.Noise.SEEDED`: then from ``seed`` (0 when None), the
    same release for the same seed, for experiments only.
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
    if noise is Noise.SEEDED:
        config = replace(config, noise_seed=int(seed or 0))
        pl94 = replace(pl94, noise_seed=int(seed or 0)) if pl94 is not None else None
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
    levels = [lv for lv in LEVELS if lv != Geo.NATION or len(states) > 1]
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
        meas = _measure(cfg, root, [true], sup_all, rng=cfg.noise_rng(root, str(g)))[0]
        draws += sum(m.groups.size for m in meas)
        tot = sum(state_tot.values()) if root == Geo.NATION else state_tot[g]
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
                if lv == Geo.STATE and pl is None
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
        ks, Pk = pl_indicator(pl[0])
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
