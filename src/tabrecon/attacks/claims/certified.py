"""Verified claims (Liu, Xiao, Thaker, Smith, Wu 2025, "Generate-then-Verify") about the records
of a certified reconstruction, tract by tract, for any schema.

A claim R(a, m) says: exactly m records of the block match the partial assignment a over a subset
of the schema's claim columns (:attr:`~tabrecon.schema.spec.Schema.claim_columns`: for persons
sex, agebin38, hispanic and the six race flags); k = the number of columns a sets. It is
*verified* when every population consistent with the published tables makes it true; a
*singleton* claim (m = 1) singles one record out.

The claims are Generate-then-Verify over the tract's count program
(:func:`tabrecon.attacks.claims.tract.tract_verdicts`): the blocks certification proved
unique have every claim read off the reconstruction verified by that one proof (every column
subset, vectorised over key counts); the others' candidates hold in the reconstruction and K-1
solutions of random objectives and are proven together in one program (a time-out leaves the
rest unverified, never claimed). :func:`tabrecon.attacks.claims.release.release_claims`
asks the same of each block's own tables where no reconstruction is certified.

What this module adds is what is said of them, written once over the schema: each record's
smallest verified singleton, tallies by k (a run holds counts and histograms, not the claims: a
county's persons have millions) and the baselines. Claims that count exactly the records one
published block cell counts are dropped as trivial (e.g. "male, age 30-34", a P12 cell). Each
verified singleton gets its baseline probability P(count = 1) under Binomial(N_block, p), p the
share of matching records in the tract (and in the state) of the reconstruction -- the prior of
Liu et al.: with the tract and state histograms known to the attacker only through the tables,
the reconstruction's shares are what the attacker has. How a population's claims read (persons:
the age as the tables determine it) is its plug-in
(:attr:`~tabrecon.schema.registry.Population.claim_words`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ...engine.release import LongPart, TractTables, as_read
from ...engine.solvers import SolverOptions
from ...errors import TabreconError
from ...io import write_csv, write_json, write_parquet, write_text
from ...provenance import digest_arrays
from ...runner import Result, RunOptions, UnitsRun, run_units
from ...schema.spec import Schema, Units
from ...tables.tableset import TableSet
from ...vocab import Geo, Level, UnitStatus, Verdict
from .block import one_of_n, value_keys, values_text
from .tract import claim_codes, code_values, tract_verdicts

if TYPE_CHECKING:
    from ...schema.registry import Population

BASELINE_BINS = 100  # histogram resolution of baseline probabilities (medians to 0.01)

#: How a claim reads: (its columns, its key on them, m or None) -> words
ClaimWords = Callable[[tuple[int, ...], int, "int | None"], str]


def plain_words(schema: Schema, noun: str) -> ClaimWords:
    """Claims in the claim columns' labels, e.g. ``exactly 1 housing unit: tenure=renter``; a
    population may declare its own (:attr:`~tabrecon.schema.registry.Population.claim_words`).

    >>> from tabrecon.schema.spec import Attribute
    >>> toy = Schema("toy", "thing", (Attribute("a", ((0, "x"), (1, "y"))),
    ...                               Attribute("b", ((0, "u"), (1, "v"), (2, "w")))))
    >>> plain_words(toy, "things")((0, 1), 5, 2)
    'exactly 2 things: a=y; b=w'
    """
    labels = [c.labels for c in schema.claim_columns]
    one = noun[:-1] if noun.endswith("s") else noun

    def words(cols: tuple[int, ...], key: int, m: int | None = None) -> str:
        text = values_text(schema, cols, key, labels)
        return text if m is None else f"exactly {m} {one if m == 1 else noun}: {text}"

    return words


class Prior:
    """Shares of every partial assignment of ``schema``'s claim columns in a population (its
    records' types), from the histogram of their claim codes.

    >>> from tabrecon.schema.spec import Attribute
    >>> toy = Schema("toy", "thing", (Attribute("a", ((0, "x"), (1, "y"))),
    ...                               Attribute("b", ((0, "u"), (1, "v"), (2, "w")))))
    >>> Prior(toy, np.array([0, 1, 4, 4])).share((0,), np.array([0, 1])).tolist()
    [0.5, 0.5]
    """

    def __init__(self, schema: Schema, types: np.ndarray) -> None:
        codes, counts = np.unique(claim_codes(schema, np.asarray(types)), return_counts=True)
        self.schema = schema
        # the claim values once (a prior is sent to every tract's task, its cache is not)
        self.values = code_values(schema, codes)
        self.counts = counts.astype(np.float64)
        self.total = float(counts.sum())
        self._cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def share(self, cols: tuple[int, ...], keys: np.ndarray) -> np.ndarray:
        if cols not in self._cache:
            u, inv = np.unique(value_keys(self.values, self.schema, cols), return_inverse=True)
            self._cache[cols] = (u, np.bincount(inv, weights=self.counts, minlength=u.size))
        u, w = self._cache[cols]
        if not u.size or not self.total:
            return np.zeros(keys.size)
        pos = np.minimum(np.searchsorted(u, keys), u.size - 1)
        return np.where(u[pos] == keys, w[pos], 0.0) / self.total


# --------------------------------------------------------------------------------------------------
# One tract
# --------------------------------------------------------------------------------------------------
@dataclass
class TractClaims:
    """Claims of one tract: counts by k (index k - 1), baseline histograms, per-record coverage.
    (``persons_k``/``any_persons`` count records of any schema: the names the files have kept.)"""

    unit: str
    status: str
    blocks: int
    certified_blocks: int
    varying_blocks: int
    candidates: int = 0  # candidate claims of varying blocks (after the K-solution intersection)
    verified_varying: int = 0
    proofs: int = 0
    solutions: int = 0
    # per k: verified claims (any m), verified singletons, records covered, blocks with one
    claims_k: list[int] = field(default_factory=list)
    singletons_k: list[int] = field(default_factory=list)
    persons_k: list[int] = field(default_factory=list)
    blocks_k: list[int] = field(default_factory=list)
    # histograms of singleton baselines per k, tract prior then state prior (BASELINE_BINS bins)
    base_tract: list[list[int]] = field(default_factory=list)
    base_state: list[list[int]] = field(default_factory=list)
    any_persons: int = 0  # records singled out by some verified claim
    any_blocks: int = 0
    message: str = ""
    #: False when the proofs stopped before every candidate was decided (the tract's time limit,
    #: a proof at the solver's limit, or the rounds ran out): the claims proven by then are
    #: counted, the candidates left are not verified (``message`` says why and how many)
    complete: bool = True


def _hist(p: np.ndarray, k: np.ndarray, n_cols: int) -> np.ndarray:
    """Histograms (k x :data:`BASELINE_BINS`) of the probabilities ``p`` of claims of ``k``
    columns."""
    b = np.minimum((p * BASELINE_BINS).astype(np.int64), BASELINE_BINS - 1)
    flat = np.bincount((k - 1) * BASELINE_BINS + b, minlength=n_cols * BASELINE_BINS)
    return flat.reshape(n_cols, BASELINE_BINS)


def _per_k(k: np.ndarray, n_cols: int) -> np.ndarray:
    """Claims of each number of columns 1..n_cols."""
    return np.bincount(k, minlength=n_cols + 1)[1:]


@dataclass(frozen=True)
class TractTask:
    """One tract's verified claims, a unit of :func:`certified_claims`: the tract's tables
    (``part``: a long table or what makes one), its reconstruction's records (``block``:
    positions in ``geoids``, the tract's blocks in order; ``types``) and which blocks
    certification proved unique, the state's prior, and the population's plug-ins: ``names``
    (the block tables a claim must not merely repeat), ``unique_on`` (the resolution
    uniqueness was proven at) and ``words`` (how a claim reads, given the tract's part and
    level)."""

    pop: Population
    tract: str
    level: str
    part: pl.DataFrame | LongPart | None
    geoids: np.ndarray
    block: np.ndarray
    types: np.ndarray
    certified: np.ndarray
    prior: Prior
    opts: SolverOptions
    k_solutions: int
    seed: int
    names: tuple[str, ...]
    unique_on: Mapping[str, Any] | None = None
    words: Callable[[Any, str], ClaimWords] | None = None
    #: what the records are called, plural (claims in words where ``words`` is None)
    noun: str = ""
    #: seconds for the tract's blocks that can differ (None: no limit); reaching it keeps the
    #: claims proven by then (:attr:`TractClaims.complete` False)
    seconds: float | None = None

    def __call__(self) -> Result:
        res, persons, _ = tract_claims(self)
        return asdict(res), persons


def tract_claims(
    task: TractTask, collect: bool = False
) -> tuple[TractClaims, pl.DataFrame, pl.DataFrame | None]:
    """Verified claims of one tract's blocks (module docstring). Returns the tally, one row per
    record of the reconstruction (its smallest k of a verified singleton claim singling it out,
    that claim in words and its baselines) and, with ``collect``, every verified claim (for
    checking)."""
    schema, tract, level, geoids = task.pop.schema, task.tract, task.level, task.geoids
    if level not in Level.choices():
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    opts = task.opts.for_task("claims")
    n_cols = len(schema.claim_columns)
    k_all = tuple(range(1, n_cols + 1))
    cols_names = [c.name for c in schema.claim_columns]
    cert = task.certified
    sizes = np.bincount(task.block, minlength=len(geoids)).astype(np.int64)
    varying = ~cert & (sizes > 0)
    zeros = [0] * n_cols
    res = TractClaims(tract, UnitStatus.OK, len(geoids), int(cert.sum()), int(varying.sum()))
    res.claims_k, res.singletons_k, res.persons_k, res.blocks_k = (list(zeros) for _ in range(4))
    t0 = time.perf_counter()
    tract_prior = Prior(schema, task.types)
    part = task.part
    long = None
    run_level = level
    if varying.any():  # the program, for the blocks that can differ
        if part is None:
            raise TabreconError(f"tract {tract}: blocks can differ and no tables were given")
        long = as_read(part)
        if level == Level.BLOCK_TRACT and not _has_tract_cells(long):
            run_level = Level.BLOCK  # no tract cell published: the block tables alone
    describe = (
        task.words(part, level)
        if task.words is not None and part is not None
        else plain_words(schema, task.noun or schema.name)
    )
    tv = tract_verdicts(
        long,
        task.pop,
        run_level,
        task.names,
        k_all,
        geoids,
        task.block,
        task.types,
        cert,
        k_solutions=task.k_solutions,
        seed=task.seed,
        opts=opts,
        unique_on=task.unique_on,
        tract=tract,
        seconds=task.seconds,
    )
    res.solutions, res.proofs = tv.solutions, tv.proofs
    res.candidates, res.verified_varying = tv.candidates_varying, tv.verified_varying
    if not tv.complete:
        res.complete = False
        why = (
            f"reached the tract's time limit ({task.seconds:g} s)"
            if task.seconds is not None and time.perf_counter() - t0 >= task.seconds
            else "its proofs stopped at the solver's time limit or their rounds ran out"
        )
        res.message = (
            f"{why}: {tv.verified_varying:,} of {tv.candidates_varying:,} candidate claims about "
            "its blocks that can differ were verified before and are kept; the rest are not "
            "claimed"
        )
    key_block, rinv = tv.key_block, tv.ref_key
    # tally verified claims by k; coverage and baselines for singletons
    cov_k = np.zeros((n_cols, key_block.size), dtype=bool)
    min_k = np.full(key_block.size, n_cols + 1, dtype=np.int64)
    ex_subset = np.zeros(key_block.size, dtype=np.int64)
    ex_key = np.zeros(key_block.size, dtype=np.int64)
    ex_bt = np.full(key_block.size, np.nan)
    ex_bs = np.full(key_block.size, np.nan)
    collected = []
    claims_k = np.zeros(n_cols, dtype=np.int64)
    singletons_k = np.zeros(n_cols, dtype=np.int64)
    base_t = np.zeros((n_cols, BASELINE_BINS), dtype=np.int64)
    base_s = np.zeros((n_cols, BASELINE_BINS), dtype=np.int64)
    for cl, ok, first_key in tv.parts:
        claims_k += _per_k(cl.k[ok], n_cols)
        # singletons by column subset (candidates come by k, then subset: the smallest k first)
        single = np.flatnonzero(ok & (cl.m == 1))
        single = single[np.argsort(cl.subset[single], kind="stable")]
        key_of = first_key[single]
        if (key_of < 0).any():  # a verified claim holds in the reconstruction too
            raise TabreconError(
                f"tract {tract}: a verified singleton claim matches no reconstructed record"
            )
        k_of, key = cl.k[single], cl.key[single]
        singletons_k += _per_k(k_of, n_cols)
        N = sizes[cl.group[single]]
        bt, bs = np.empty(single.size), np.empty(single.size)
        sub = cl.subset[single]
        runs = np.flatnonzero(np.diff(sub, prepend=-1, append=-1))
        for lo, hi in zip(runs[:-1].tolist(), runs[1:].tolist(), strict=True):
            cols = cl.columns[sub[lo]]
            bt[lo:hi] = one_of_n(N[lo:hi], tract_prior.share(cols, key[lo:hi]))
            bs[lo:hi] = one_of_n(N[lo:hi], task.prior.share(cols, key[lo:hi]))
        base_t += _hist(bt, k_of, n_cols)
        base_s += _hist(bs, k_of, n_cols)
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
                            ",".join(cols_names[i] for i in cl.columns[j]) for j in cl.subset[v]
                        ],
                        "key": cl.key[v],
                        "m": cl.m[v],
                    }
                )
            )
    res.claims_k, res.singletons_k = claims_k.tolist(), singletons_k.tolist()
    res.base_tract, res.base_state = base_t.tolist(), base_s.tolist()
    for k in range(1, n_cols + 1):
        res.persons_k[k - 1] = int(cov_k[k - 1].sum())  # each key singled out has one record
        res.blocks_k[k - 1] = int(np.unique(key_block[cov_k[k - 1]]).size)
    res.any_persons = int((min_k <= n_cols).sum())
    res.any_blocks = int(np.unique(key_block[min_k <= n_cols]).size)
    rec_k = min_k[rinv]
    columns = tv.parts[0][0].columns if tv.parts else ()
    persons = pl.DataFrame(
        {
            "block_geoid": geoids[task.block].astype(str),
            "certified": cert[task.block],
            "min_k": pl.Series(np.where(rec_k <= n_cols, rec_k, 0)).replace(0, None).cast(pl.Int64),
            "claim": pl.Series(
                [
                    describe(columns[si], key, 1) if kk <= n_cols else None
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
@dataclass
class CertifiedClaimsRun(UnitsRun):
    """Verified claims of every tract: per-tract tallies (:class:`TractClaims` as dicts) and one
    row per reconstructed record (``persons``: its smallest verified singleton, if any)."""

    results: list[dict]
    persons: pl.DataFrame
    level: str
    k_solutions: int
    #: what the records are called (``persons``)
    noun: str = "persons"

    def by_k(self) -> pl.DataFrame:
        """Liu et al. Table 2/3 layout: per k, records covered by verified singletons, claims,
        baselines."""
        ok = [r for r in self.results if r["status"] == UnitStatus.OK]
        nb = sum(r["blocks"] for r in ok)
        n_cols = max((len(r["claims_k"]) for r in ok), default=0)
        rows = []
        for k in range(1, n_cols + 1):
            ht = np.sum([r["base_tract"][k - 1] for r in ok], axis=0)
            hs = np.sum([r["base_state"][k - 1] for r in ok], axis=0)
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
        return pl.DataFrame(rows, schema=BY_K_COLUMNS)

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
            "incomplete_tracts": sum(not r.get("complete", True) for r in ok),
        }

    def summary_lines(self, seconds: float = 0.0) -> list[str]:
        """The run in words (Markdown bullets)."""
        s = self.summary()
        n = max(s["persons"], 1)
        return [
            f"- blocks: {s['blocks']:,} ({s['certified_blocks']:,} certified unique, "
            f"{s['varying_blocks']:,} that can differ)",
            f"- {self.noun} singled out by a verified singleton claim: "
            f"{s['persons_singled_out']:,} of {s['persons']:,} "
            f"({100 * s['persons_singled_out'] / n:.1f}%), in "
            f"{s['blocks_with_singleton']:,} blocks",
            f"- blocks that can differ: {s['candidates_varying']:,} candidate claims, "
            f"{s['verified_varying']:,} verified by {s['proofs']} infeasibility proofs",
            *(
                [
                    f"- {s['incomplete_tracts']} tract(s) stopped before every candidate was "
                    "proven (the tract's or a proof's time limit): the claims verified by then "
                    "are counted, the rest of their candidates are not"
                ]
                if s["incomplete_tracts"]
                else []
            ),
            f"- {s['failed_tracts']} tract(s) failed; time {seconds:.1f} s",
        ]

    @property
    def incomplete(self) -> list[dict]:
        """The tracts whose proofs stopped before every candidate was decided, most often at
        their time limit (each kept the claims verified by then; its ``message`` says why)."""
        return [
            r for r in self.results if r["status"] == UnitStatus.OK and not r.get("complete", True)
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
            f"{self.noun.capitalize()} covered by k = number of columns of the claim (Liu et al. "
            "Table 2 layout); baselines are P(count = 1) under Binomial(block size, share of "
            "matching records in the tract / state), medians to 0.01.",
            "",
            f"| k | {self.noun} covered | per block | blocks | verified singletons | "
            "verified claims | median baseline (tract) | median baseline (state) |",
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


#: The columns of :meth:`CertifiedClaimsRun.by_k`
BY_K_COLUMNS = {
    "k": pl.Int64,
    "persons_covered": pl.Int64,
    "persons_per_block": pl.Float64,
    "blocks_with_singleton": pl.Int64,
    "verified_singletons": pl.Int64,
    "verified_claims": pl.Int64,
    "median_baseline_tract": pl.Float64,
    "median_baseline_state": pl.Float64,
    "baseline_tract_below_5pct": pl.Float64,
    "baseline_state_above_50pct": pl.Float64,
}


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


@dataclass(frozen=True, kw_only=True)
class CertifiedClaimsOptions:
    """What :func:`certified_claims` asks (one value; how the run is carried out -- workers,
    output, resume, progress -- is apart).

    >>> CertifiedClaimsOptions(k_solutions=0)
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: k_solutions must be >= 1 (got 0)
    """

    level: str = Level.BLOCK
    #: solutions per tract whose blocks can differ (the reconstruction and K - 1 random ones)
    k_solutions: int = 100
    seed: int = 0
    solver: SolverOptions = field(default_factory=SolverOptions)
    #: seconds per tract for its blocks that can differ (None: no limit): a tract that reaches
    #: it keeps the claims verified by then and is reported (:attr:`CertifiedClaimsRun.incomplete`)
    tract_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.level not in Level.choices():
            raise TabreconError(f"unknown level {self.level!r}; choose 'block' or 'block+tract'")
        if self.k_solutions < 1:
            raise TabreconError(f"k_solutions must be >= 1 (got {self.k_solutions})")
        if self.tract_seconds is not None and not 0 < self.tract_seconds < math.inf:
            raise TabreconError(
                f"tract_seconds must be a positive number of seconds (got {self.tract_seconds})"
            )


def tract_tasks(
    tables: TractTables,
    pop: Population,
    recon: Units,
    status: Mapping[str, str],
    options: CertifiedClaimsOptions,
) -> dict[str, TractTask]:
    """Each tract's :class:`TractTask` (the tracts of ``tables``, in order; a tract whose
    tables are not published is not asked): the work :func:`certified_claims` hands out, for a
    caller that runs tracts itself (a test collecting every claim)."""
    schema = pop.schema
    names = tuple(t.name for t in pop.tables() if t.level == Geo.BLOCK)
    geo = recon.block_geoid.astype(str)
    types = recon.types
    tract_of = np.array([g[:11] for g in geo]) if geo.size else np.zeros(0, dtype=str)
    state_of = np.array([g[:2] for g in geo]) if geo.size else np.zeros(0, dtype=str)
    priors = {s: Prior(schema, types[state_of == s]) for s in np.unique(state_of).tolist()}
    tasks = {}
    for t in tables.parts:
        rows = np.flatnonzero(tract_of == t)
        geoids, block = np.unique(geo[rows], return_inverse=True)
        tasks[t] = TractTask(
            pop,
            t,
            options.level,
            tables.parts[t],
            geoids,
            block.astype(np.int64),
            types[rows],
            np.array([status.get(g) == Verdict.UNIQUE for g in geoids.tolist()], dtype=bool),
            priors.get(t[:2], Prior(schema, types[:0])),
            options.solver,
            options.k_solutions,
            options.seed,
            names,
            pop.unique_on,
            pop.claim_words,
            pop.noun,
            options.tract_seconds,
        )
    return tasks


def certified_claims(
    tables: TractTables | pl.DataFrame,
    pop: Population,
    recon: Units,
    cert_blocks: pl.DataFrame,
    options: CertifiedClaimsOptions | None = None,
    *,
    run: RunOptions | None = None,
) -> CertifiedClaimsRun:
    """Verified claims about the records of every block of a release of ``pop`` from its
    reconstruction ``recon`` and that reconstruction's certification ``cert_blocks`` (columns
    ``block_geoid`` and ``status``: ``unique`` for the blocks proven to have one histogram),
    tract by tract (module docstring). ``tables``: a long table (geoid, cell, value) or a
    release split by tract (:class:`~tabrecon.engine.release.TractTables`). With ``run.out``
    (:class:`~tabrecon.runner.RunOptions`) each tract's per-record table is written to
    ``<out>/claims.parts/`` as it finishes and a rerun resumes (a rerun with other inputs or
    options is refused).

    >>> from tabrecon.engine.reconstruct import ReconstructOptions
    >>> from tabrecon.engine.release import reconstruct_release
    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.schema.registry import population
    >>> from tabrecon.tables.spec import tabulate_units
    >>> gq = population("group_quarters")
    >>> truth = gq.synthesize(SynthConfig(persons=3_000), 1)
    >>> long = tabulate_units(truth)
    >>> rec = reconstruct_release(long, gq, ReconstructOptions())
    >>> blocks = rec.blocks.select(pl.col("geoid").alias("block_geoid"), "status")
    >>> run = certified_claims(long, gq, rec.units, blocks)
    >>> run.failed, run.summary()["persons"] == len(truth)
    ([], True)
    """
    schema = pop.schema
    from ...geo import overlap

    options = options or CertifiedClaimsOptions()
    if "status" not in cert_blocks.columns or "block_geoid" not in cert_blocks.columns:
        raise TabreconError(
            "certification results need columns block_geoid and status (tabrecon solvar)"
        )
    if isinstance(tables, pl.DataFrame):
        tables = TractTables.of_long(tables, pop)
    status = dict(
        zip(cert_blocks["block_geoid"].to_list(), cert_blocks["status"].to_list(), strict=True)
    )
    geo = recon.block_geoid.astype(str)
    blocks = np.unique(geo)
    missing = [g for g in blocks.tolist() if g not in status]
    if missing:
        raise TabreconError(
            f"block {missing[0]} of the reconstruction has no certification result "
            f"({len(missing)} such blocks); run tabrecon solvar on the same reconstruction"
        )
    overlap(
        {g[:11] for g in tables.parts},
        {g[:11] for g in blocks.tolist()},
        "the tables",
        recon.source or "the reconstruction",
        "tracts",
    )
    tasks = tract_tasks(tables, pop, recon, status, options)
    tracts = list(tasks)
    run = run or RunOptions()
    parts = run.parts("claims.parts")
    fp = None
    if parts is not None:
        fp = {
            "tables": tables.digest,
            "reconstruction": digest_arrays(geo, recon.types),
            "certification": digest_arrays(np.array(sorted(status.items()), dtype=str)),
            "schema": schema.name,
            "level": options.level,
            "k_solutions": options.k_solutions,
            "seed": options.seed,
            "solver": asdict(options.solver),
            # a limit changes which claims a tract that reaches it keeps (none: as before)
            **({} if options.tract_seconds is None else {"tract_seconds": options.tract_seconds}),
        }
    ran = run_units(
        tracts,
        tasks.__getitem__,
        tag=f"claims-{options.level}-K{options.k_solutions}",
        parts=parts,
        run=run,
        fingerprint=fp,
    )
    dfs = ran.tables(tracts)
    persons = pl.concat(dfs) if dfs else pl.DataFrame()

    return CertifiedClaimsRun(ran.results, persons, options.level, options.k_solutions, pop.noun)


def _has_tract_cells(long: pl.DataFrame | TableSet) -> bool:
    """Whether any cell is published for a geounit above the block (a geoid shorter than a
    block's)."""
    if isinstance(long, pl.DataFrame):
        return bool((long["geoid"].str.len_chars() < 15).any())
    return any(
        bool(g.present()[np.char.str_len(g.geoids.astype(str)) < 15].any())
        for g in long.grids.values()
    )
