"""Verified claims (Liu, Xiao, Thaker, Smith, Wu 2025, "Generate-then-Verify") about persons in a
tract's blocks, proven in the tract's count program at either level.

A claim R(a, m) says: exactly m records of the block match the partial assignment a over a subset of
the person schema's claim columns (sex, agebin38, hispanic and the six race flags, declared by
:func:`tabrecon.schema.person_claim_columns`); k = the number of columns a sets. It is *verified*
when every population consistent with the published tables makes it true; a *singleton* claim
(m = 1) singles one person out.

The claims themselves are Generate-then-Verify over the tract's program for any schema
(:func:`tabrecon.attacks.unit_claims_tract.tract_verdicts`): the blocks certification proved
unique (solvar 0, :func:`tabrecon.certify`) have every claim read off the reconstruction
verified by that one proof (all 511 column subsets, vectorised over key counts); the others'
candidates hold in the reconstruction and K-1 solutions of random objectives and are proven
together in one program (a time-out leaves the rest unverified, never claimed). What is the
persons' own here is what is said of them: each record's smallest verified singleton, the age a
claim can state (the classes the tables tell apart) and the baselines.

Claims that count exactly the persons one published block cell counts are dropped as trivial
(e.g. "male, age 30-34", a P12 cell; "not black, not aian, not asian, not nhpi, not sor", which is
"White alone"). Each verified claim gets its baseline probability P(count = m) under
Binomial(N_block, p), p the share of matching records in the tract (and in the state) of the
reconstruction -- the prior of Liu et al. With the tract/state histograms known to the attacker
only through the tables, the reconstruction's shares are what the attacker has.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ..engine.solvers import SolverOptions
from ..errors import TabreconError
from ..geo import overlap
from ..io import write_csv, write_json, write_parquet, write_text
from ..provenance import run_fingerprint
from ..runner import Result, RunOptions, UnitsRun, run_units
from ..schema import AGEBIN38, N_AGES, PERSONS, Microdata, age_classes, age_label
from ..tables.persons import MISSING, TableSet, cell_attrs, cell_positions
from ..vocab import Geo, Level, UnitStatus
from .certify import UNIQUE, binned_type
from .unit_claims import one_of_n, value_keys
from .unit_claims_tract import tract_verdicts

#: The columns person claims are stated over (:func:`tabrecon.schema.person_claim_columns`)
COLUMNS: tuple[str, ...] = tuple(c.name for c in PERSONS.claim_columns)
K_MAX = len(COLUMNS)
K_ALL = tuple(range(1, K_MAX + 1))
BASELINE_BINS = 100  # histogram resolution of baseline probabilities (medians to 0.01)


@functools.cache
def block_tables() -> tuple[str, ...]:
    """The person block tables (:func:`~tabrecon.populations.persons.person_tables`): a claim
    that counts exactly the persons one of their cells counts is trivial."""
    from ..populations.persons import person_tables

    return tuple(t.name for t in person_tables() if t.level == Geo.BLOCK)


def _cell_ranges(cells: np.ndarray) -> list[tuple[int, int]]:
    if not len(cells):
        return []
    a, pos = cell_attrs(), cell_positions(cells)
    return list(zip(a["age_min"][pos].tolist(), a["age_max"][pos].tolist(), strict=True))


def determined_age_classes(ts: TableSet, tract: str, level: str) -> np.ndarray:
    """Start of the age class of every age 0..110 that the cells published for ``tract`` tell
    apart (block cells; with ``block+tract`` also the tract's cells): what a record's age can
    say."""
    ranges: list[tuple[int, int]] = []
    for lv in (Geo.BLOCK, Geo.TRACT):
        g = ts.grids.get(lv)
        if g is None or (lv == Geo.TRACT and level != Level.BLOCK_TRACT):
            continue
        rows = (
            g.geoids == tract
            if lv == Geo.TRACT
            else np.char.startswith(g.geoids.astype(str), tract)
        )
        ranges += _cell_ranges(g.cells[(g.values[rows] != MISSING).any(axis=0)])
    return age_classes(ranges)


def class_end(starts: np.ndarray) -> np.ndarray:
    """Last age of the class of every age 0..110 (``starts`` from :func:`age_classes`)."""
    width = np.bincount(starts, minlength=N_AGES)
    return (starts + width[starts] - 1).astype(np.int16)


def decode_claim(cols: tuple[int, ...], key: int) -> dict[str, int]:
    """Column -> value of a claim (only the columns it sets)."""
    out = {}
    for i in reversed(cols):
        size = PERSONS.claim_columns[i].size
        out[COLUMNS[i]] = key % size
        key //= size
    return {COLUMNS[i]: out[COLUMNS[i]] for i in cols}


def claim_age_range(v: int, ends: np.ndarray | None = None) -> tuple[int, int]:
    """The ages a claim's agebin value ``v`` covers. Records of an age class carry its first year,
    so where the tables determine only a class wider than the agebin38 bin (``ends``, from
    :func:`class_end`: e.g. 10-14 without P14) the claim covers the
    whole class."""
    lo, hi = AGEBIN38[v]
    return (lo, hi) if ends is None else (lo, max(hi, int(ends[lo])))


def describe_claim(
    cols: tuple[int, ...], key: int, m: int | None = None, ends: np.ndarray | None = None
) -> str:
    """Plain words for a claim, e.g. ``exactly 1 person: female, age 25-29, black, Hispanic``:
    each column's label (:func:`tabrecon.schema.person_claim_columns`). ``ends`` (last age of
    each age's class) makes the age read as what the tables determine."""
    parts = []
    for name, v in decode_claim(cols, key).items():
        if name == "agebin" and ends is not None:
            lo, hi = claim_age_range(v, ends)
            parts.append(age_label(lo, hi) if lo == 0 and hi == 110 else f"age {age_label(lo, hi)}")
        else:
            parts.append(PERSONS.claim_columns[COLUMNS.index(name)].labels[v])
    text = ", ".join(parts)
    if m is None:
        return text
    return f"exactly {m} person{'s' if m != 1 else ''}: {text}"


class Prior:
    """Shares of every partial assignment in a population, from its histogram of binned types."""

    def __init__(self, types: np.ndarray, counts: np.ndarray) -> None:
        # the claim values once (a prior is sent to every tract's task, its cache is not)
        self.values = PERSONS.claim_values(types)
        self.counts = counts.astype(np.float64)
        self.total = float(counts.sum())
        self._cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def share(self, cols: tuple[int, ...], keys: np.ndarray) -> np.ndarray:
        if cols not in self._cache:
            u, inv = np.unique(value_keys(self.values, PERSONS, cols), return_inverse=True)
            self._cache[cols] = (u, np.bincount(inv, weights=self.counts, minlength=u.size))
        u, w = self._cache[cols]
        if not u.size or not self.total:
            return np.zeros(keys.size)
        pos = np.minimum(np.searchsorted(u, keys), u.size - 1)
        return np.where(u[pos] == keys, w[pos], 0.0) / self.total


def _histogram(md: Microdata) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(binned_type(md.types), return_counts=True)


# --------------------------------------------------------------------------------------------------
# One tract
# --------------------------------------------------------------------------------------------------
@dataclass
class TractClaims:
    """Claims of one tract: counts by k, baseline histograms, and per-record coverage."""

    unit: str
    status: str
    blocks: int
    certified_blocks: int
    varying_blocks: int
    candidates: int = 0  # candidate claims of varying blocks (after the K-solution intersection)
    verified_varying: int = 0
    proofs: int = 0
    solutions: int = 0
    # per k (index k-1): verified claims (any m), verified singletons, persons covered, blocks with
    # one
    claims_k: list[int] = field(default_factory=lambda: [0] * K_MAX)
    singletons_k: list[int] = field(default_factory=lambda: [0] * K_MAX)
    persons_k: list[int] = field(default_factory=lambda: [0] * K_MAX)
    blocks_k: list[int] = field(default_factory=lambda: [0] * K_MAX)
    # histograms of singleton baselines per k, tract prior then state prior (BASELINE_BINS bins)
    base_tract: list[list[int]] = field(
        default_factory=lambda: [[0] * BASELINE_BINS for _ in range(K_MAX)]
    )
    base_state: list[list[int]] = field(
        default_factory=lambda: [[0] * BASELINE_BINS for _ in range(K_MAX)]
    )
    any_persons: int = 0  # records singled out by some verified claim
    any_blocks: int = 0
    message: str = ""


def _hist(p: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Histograms (k x :data:`BASELINE_BINS`) of the probabilities ``p`` of claims of ``k``
    columns."""
    b = np.minimum((p * BASELINE_BINS).astype(np.int64), BASELINE_BINS - 1)
    flat = np.bincount((k - 1) * BASELINE_BINS + b, minlength=K_MAX * BASELINE_BINS)
    return flat.reshape(K_MAX, BASELINE_BINS)


def _per_k(k: np.ndarray) -> np.ndarray:
    """Claims of each number of columns 1..K_MAX."""
    return np.bincount(k, minlength=K_MAX + 1)[1:]


def tract_claims(
    ts: TableSet,
    tract: str,
    level: str,
    recon: Microdata,
    status: dict[str, str],
    opts: SolverOptions,
    state_prior: Prior,
    *,
    k_solutions: int = 100,
    seed: int = 0,
    collect: bool = False,
) -> tuple[TractClaims, pl.DataFrame, pl.DataFrame | None]:
    """Verified claims of one tract's blocks.

    ``status`` maps block geoid -> certification status (``unique`` for solvar 0). Returns the
    summary, one row per record of ``recon`` (smallest k of a verified singleton claim singling it
    out, that claim and its baselines), and with ``collect`` every verified claim (for checking).
    """
    opts = opts.for_task("claims")
    if level not in Level.choices():
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    geoids = recon.geoids
    ends = class_end(determined_age_classes(ts, tract, level))  # what a claim's age can say
    cert = np.array([status.get(str(g)) == UNIQUE for g in geoids], dtype=bool)
    pop = np.bincount(recon.block, minlength=len(geoids)).astype(np.int64)
    res = TractClaims(
        tract, UnitStatus.OK, len(geoids), int(cert.sum()), int((~cert & (pop > 0)).sum())
    )
    ttypes, tcounts = _histogram(recon)
    tract_prior = Prior(ttypes, tcounts)
    from ..populations.persons import UNIQUE_ON, release_long

    long, run_level = None, level
    if (~cert & (pop > 0)).any():  # the program, for the blocks that can differ
        long, _used, run_level, _notes = release_long(ts, level)
    tv = tract_verdicts(
        long,
        PERSONS,
        run_level,
        block_tables(),
        K_ALL,
        geoids,
        recon.block,
        recon.types,
        cert,
        K=k_solutions,
        seed=seed,
        opts=opts,
        unique_on=UNIQUE_ON,
        tract=tract,
    )
    res.solutions, res.proofs = tv.solutions, tv.proofs
    res.candidates, res.verified_varying = tv.candidates_varying, tv.verified_varying
    parts = list(tv.parts)
    key_block, rinv = tv.key_block, tv.ref_key
    # tally verified claims by k; coverage and baselines for singletons
    cov_k = np.zeros((K_MAX, key_block.size), dtype=bool)
    min_k = np.full(key_block.size, K_MAX + 1, dtype=np.int64)
    ex_subset = np.zeros(key_block.size, dtype=np.int64)
    ex_key = np.zeros(key_block.size, dtype=np.int64)
    ex_bt = np.full(key_block.size, np.nan)
    ex_bs = np.full(key_block.size, np.nan)
    collected = []
    base_t = np.zeros((K_MAX, BASELINE_BINS), dtype=np.int64)
    base_s = np.zeros((K_MAX, BASELINE_BINS), dtype=np.int64)
    for cl, ok, first_key in parts:
        res.claims_k = (np.array(res.claims_k) + _per_k(cl.k[ok])).tolist()
        # singletons by column subset (candidates come by k, then subset: the smallest k first)
        single = np.flatnonzero(ok & (cl.m == 1))
        single = single[np.argsort(cl.subset[single], kind="stable")]
        key_of = first_key[single]
        if (key_of < 0).any():  # a verified claim holds in the reconstruction too
            raise TabreconError(
                f"tract {tract}: a verified singleton claim matches no reconstructed record"
            )
        k_of, key = cl.k[single], cl.key[single]
        res.singletons_k = (np.array(res.singletons_k) + _per_k(k_of)).tolist()
        N = pop[cl.group[single]]
        bt, bs = np.empty(single.size), np.empty(single.size)
        sub = cl.subset[single]
        runs = np.flatnonzero(np.diff(sub, prepend=-1, append=-1))
        for lo, hi in zip(runs[:-1].tolist(), runs[1:].tolist(), strict=True):
            cols = cl.columns[sub[lo]]
            bt[lo:hi] = one_of_n(N[lo:hi], tract_prior.share(cols, key[lo:hi]))
            bs[lo:hi] = one_of_n(N[lo:hi], state_prior.share(cols, key[lo:hi]))
        base_t += _hist(bt, k_of)
        base_s += _hist(bs, k_of)
        cov_k[k_of - 1, key_of] = True
        # each record's claim: its first singleton (the smallest k, then the first subset)
        u, at = np.unique(key_of, return_index=True)
        better = at[k_of[at] < min_k[u]]
        kb = key_of[better]
        min_k[kb] = k_of[better]
        ex_subset[kb] = sub[better]
        ex_key[kb] = key[better]
        ex_bt[kb] = bt[better]
        ex_bs[kb] = bs[better]
        if collect:
            v = np.flatnonzero(ok)
            collected.append(
                pl.DataFrame(
                    {
                        "block_geoid": geoids[cl.group[v]].astype(str),
                        "k": cl.k[v],
                        "columns": [
                            ",".join(COLUMNS[i] for i in cl.columns[j]) for j in cl.subset[v]
                        ],
                        "key": cl.key[v],
                        "m": cl.m[v],
                    }
                )
            )
    res.base_tract, res.base_state = base_t.tolist(), base_s.tolist()
    for k in range(1, K_MAX + 1):
        res.persons_k[k - 1] = int(cov_k[k - 1].sum())  # each key singled out has one record
        res.blocks_k[k - 1] = int(np.unique(key_block[cov_k[k - 1]]).size)
    res.any_persons = int((min_k <= K_MAX).sum())
    res.any_blocks = int(np.unique(key_block[min_k <= K_MAX]).size)
    rec_k = min_k[rinv]
    columns = parts[0][0].columns if parts else ()
    persons = pl.DataFrame(
        {
            "block_geoid": recon.block_geoid.astype(str),
            "certified": cert[recon.block],
            "min_k": pl.Series(np.where(rec_k <= K_MAX, rec_k, 0)).replace(0, None).cast(pl.Int64),
            "claim": pl.Series(
                [
                    describe_claim(columns[si], key, 1, ends) if kk <= K_MAX else None
                    for si, key, kk in zip(
                        ex_subset[rinv].tolist(), ex_key[rinv].tolist(), rec_k, strict=True
                    )
                ],
                dtype=pl.String,
            ),
            "baseline_tract": ex_bt[rinv],
            "baseline_state": ex_bs[rinv],
        }
    )
    claims_df = pl.concat(collected) if collect and collected else None
    return res, persons, claims_df


# --------------------------------------------------------------------------------------------------
# All tracts: parallel, written as they finish, resumable
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _TractTask:
    """One tract's verified claims, a unit of :func:`claims`: the tract's tables, its
    reconstruction and certification, and its state's prior."""

    tables: TableSet
    tract: str
    level: str
    recon: Microdata
    status: dict[str, str]
    opts: SolverOptions
    prior: Prior
    k_solutions: int
    seed: int

    def __call__(self) -> Result:
        res, persons, _ = tract_claims(
            self.tables,
            self.tract,
            self.level,
            self.recon,
            self.status,
            self.opts,
            self.prior,
            k_solutions=self.k_solutions,
            seed=self.seed,
        )
        return asdict(res), persons


@dataclass
class ClaimsRun(UnitsRun):
    """Verified claims of every tract: per-tract summaries and per-record coverage."""

    results: list[dict]
    persons: pl.DataFrame
    level: str
    k_solutions: int

    def by_k(self) -> pl.DataFrame:
        """Liu et al. Table 2/3 layout: per k, persons covered by verified singletons, claims,
        baselines."""
        ok = [r for r in self.results if r["status"] == UnitStatus.OK]
        nb = sum(r["blocks"] for r in ok)
        rows = []
        for k in range(1, K_MAX + 1):
            ht = (
                np.sum([r["base_tract"][k - 1] for r in ok], axis=0)
                if ok
                else np.zeros(BASELINE_BINS)
            )
            hs = (
                np.sum([r["base_state"][k - 1] for r in ok], axis=0)
                if ok
                else np.zeros(BASELINE_BINS)
            )
            persons = sum(r["persons_k"][k - 1] for r in ok)
            rows.append(
                {
                    "k": k,
                    "persons_covered": persons,
                    "persons_per_block": persons / nb if nb else float("nan"),
                    "blocks_with_singleton": sum(r["blocks_k"][k - 1] for r in ok),
                    "verified_singletons": sum(r["singletons_k"][k - 1] for r in ok),
                    "verified_claims": sum(r["claims_k"][k - 1] for r in ok),
                    "median_baseline_tract": _hist_median(ht),
                    "median_baseline_state": _hist_median(hs),
                    "baseline_tract_below_5pct": _hist_share(ht, 0.05),
                    "baseline_state_above_50pct": 1.0 - _hist_share(hs, 0.5),
                }
            )
        return pl.DataFrame(rows)

    def summary(self) -> dict:
        ok = [r for r in self.results if r["status"] == UnitStatus.OK]
        return {
            "level": self.level,
            "k_solutions": self.k_solutions,
            "tracts": len(self.results),
            "failed_tracts": len(self.failed),
            "blocks": sum(r["blocks"] for r in ok),
            "certified_blocks": sum(r["certified_blocks"] for r in ok),
            "varying_blocks": sum(r["varying_blocks"] for r in ok),
            "persons": self.persons.height,
            "persons_singled_out": sum(r["any_persons"] for r in ok),
            "blocks_with_singleton": sum(r["any_blocks"] for r in ok),
            "candidates_varying": sum(r["candidates"] for r in ok),
            "verified_varying": sum(r["verified_varying"] for r in ok),
            "proofs": sum(r["proofs"] for r in ok),
        }

    def summary_lines(self, seconds: float = 0.0) -> list[str]:
        """The run in words (Markdown bullets)."""
        s = self.summary()
        n = max(s["persons"], 1)
        return [
            f"- blocks: {s['blocks']:,} ({s['certified_blocks']:,} certified unique, "
            f"{s['varying_blocks']:,} that can differ)",
            f"- persons singled out by a verified singleton claim: {s['persons_singled_out']:,} of "
            f"{s['persons']:,} ({100 * s['persons_singled_out'] / n:.1f}%), in "
            f"{s['blocks_with_singleton']:,} blocks",
            f"- blocks that can differ: {s['candidates_varying']:,} candidate claims, "
            f"{s['verified_varying']:,} verified by {s['proofs']} infeasibility proofs",
            f"- {s['failed_tracts']} tract(s) failed; time {seconds:.1f} s",
        ]

    def write(self, out: str | Path, seed: int = 0, seconds: float = 0.0) -> list[Path]:
        """Write ``out/claims_by_k.csv`` (Liu et al. Table 2 layout), ``claims_persons.parquet``
        (per record), ``summary.json`` and ``summary.md``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        by_k = self.by_k()
        paths = [out / "claims_by_k.csv", out / "summary.json", out / "summary.md"]
        write_csv(by_k, paths[0])
        if self.persons.height:
            paths.append(write_parquet(self.persons, out / "claims_persons.parquet"))
        write_json(paths[1], {**self.summary(), "seconds": round(seconds, 2), "seed": seed})
        lines = [
            f"# Verified claims ({self.level} tables, K = {self.k_solutions})",
            "",
            *self.summary_lines(seconds),
            "",
            "Persons covered by k = number of columns of the claim (Liu et al. Table 2 layout); "
            "baselines are P(count = 1) under Binomial(block size, share of matching records in "
            "the tract / state), medians to 0.01.",
            "",
            "| k | persons covered | per block | blocks | verified singletons | verified claims | "
            "median baseline (tract) | median baseline (state) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in by_k.iter_rows(named=True):
            lines.append(
                f"| {r['k']} | {r['persons_covered']:,} | {r['persons_per_block']:.2f} | "
                f"{r['blocks_with_singleton']:,} | {r['verified_singletons']:,} | "
                f"{r['verified_claims']:,} | {r['median_baseline_tract']:.2f} | "
                f"{r['median_baseline_state']:.2f} |"
            )
        write_text(paths[2], "\n".join(lines) + "\n")
        return paths


def _hist_median(h: np.ndarray) -> float:
    """Median from a histogram over [0, 1] (upper edge of the bin holding it)."""
    tot = h.sum()
    if not tot:
        return float("nan")
    return float((np.searchsorted(np.cumsum(h), tot / 2.0) + 1) / BASELINE_BINS)


def _hist_share(h: np.ndarray, t: float) -> float:
    """Share of values below ``t`` (``t`` a multiple of the bin width)."""
    tot = h.sum()
    return float(h[: int(round(t * BASELINE_BINS))].sum() / tot) if tot else float("nan")


def claims(
    tables: TableSet,
    recon: Microdata,
    cert_blocks: pl.DataFrame,
    level: str = "block",
    *,
    solver: SolverOptions | None = None,
    k_solutions: int = 100,
    seed: int = 0,
    run: RunOptions | None = None,
) -> ClaimsRun:
    """Verified claims for every block, tract by tract (see module docstring).

    ``cert_blocks`` is the per-block output of :func:`tabrecon.certify` (or of
    ``tabrecon.reconstruct(..., certify=True)``) for the same tables and reconstruction (its
    ``status`` says which blocks are proven unique). With ``run.out`` (a folder,
    :class:`~tabrecon.runner.RunOptions`), each tract's per-record table is written to
    ``<out>/claims.parts/`` as it finishes and a rerun resumes.
    """

    if level not in Level.choices():
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    if k_solutions < 1:
        raise TabreconError(f"k_solutions must be >= 1 (got {k_solutions})")
    if "status" not in cert_blocks.columns or "block_geoid" not in cert_blocks.columns:
        raise TabreconError(
            "certification results need columns block_geoid and status (tabrecon solvar)"
        )
    overlap(
        tables.inhabited_blocks(),
        recon.inhabited_blocks(),
        tables.source or "the tables",
        recon.source or "the reconstruction",
    )
    opts = solver or SolverOptions()
    status = dict(
        zip(cert_blocks["block_geoid"].to_list(), cert_blocks["status"].to_list(), strict=True)
    )
    missing = [g for g in recon.geoids if g not in status]
    if missing:
        raise TabreconError(
            f"block {missing[0]} of the reconstruction has no certification result "
            f"({len(missing)} such blocks); run tabrecon solvar on the same reconstruction"
        )
    tracts = tables.tracts()
    by_tract = recon.rows_by_prefix(tracts)
    states = sorted({t[:2] for t in tracts})
    priors = {
        s_: Prior(*_histogram(recon.take(rows)))
        for s_, rows in recon.rows_by_prefix(states, 2).items()
    }
    run = run or RunOptions()
    parts = run.parts("claims.parts")
    ran = run_units(
        tracts,
        lambda t: _TractTask(
            tables.subset(t),
            t,
            level,
            recon.take(by_tract[t]),
            {g: status[g] for g in np.unique(recon.geoids[recon.block[by_tract[t]]])},
            opts,
            priors[t[:2]],
            k_solutions,
            seed,
        ),
        tag=f"claims-{level}-K{k_solutions}",
        parts=parts,
        run=run,
        fingerprint=run_fingerprint(
            parts,
            tables,
            recon=recon,
            certification=status,
            level=level,
            k_solutions=k_solutions,
            seed=seed,
            solver=opts,
        ),
    )
    dfs = ran.tables(tracts)
    persons = pl.concat(dfs) if dfs else pl.DataFrame()
    return ClaimsRun(ran.results, persons, level, k_solutions)
