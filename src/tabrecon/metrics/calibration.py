"""Calibration by simulation: how often the claims a release's tables make are true of the
confidential records (issue 89 item 4).

A synthetic county's person records are the confidential truth. Each side of the calibration
publishes them one way and attacks the tables alone, as an attacker holding the release would:

* ``2020 DHC`` -- the records protected by a defense (by default ``dhc2020-production``, the
  production TopDown: zCDP, discrete Gaussian noise) and tabulated as the 2020 DHC's block person
  tables;
* ``2010 SF1`` -- the records themselves tabulated as SF1 2010's block person tables (exact).

Generate-then-Verify (:func:`tabrecon.attacks.claims.release.release_claims`) then proves claims
from each side's tables on a sample of blocks: a claim is *verified* when every population the
published tables admit has it. Each verified claim is scored against the confidential records of
its block: it is *true* when exactly ``m`` of them match it. Under exact tables every verified
claim is true (a test holds it); under noise a claim the protected tables prove can be false of
the people, and the share that is true is the number a user of the 2020 tables needs.

Blocks are sampled by their confidential size (``per_size`` blocks of each size bin of
:data:`~tabrecon.schema.BLOCK_SIZE_BINS` that the county has, seeded), since the noise matters
most where blocks are small; every figure is also given by claim size ``k``.

>>> from tabrecon.records.synth import SynthConfig, synthesize
>>> from tabrecon.schema.registry import population
>>> truth = synthesize(SynthConfig(persons=1_500), seed=2)
>>> cal = calibrate(truth, persons=population("persons"), defense="none", per_size=1,
...                 k_values=(1,), k_solutions=3, seed=1)
>>> sorted(set(cal.scores["side"])), bool((cal.scores["true"] == cal.scores["verified"]).all())
(['2010 SF1', '2020 DHC'], True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ..attacks.claims.release import ClaimsOptions, matching_units, release_claims
from ..defenses.defense import Defense
from ..errors import InputError, TabreconError
from ..io import write_csv, write_parquet, write_text
from ..records.synth import SynthConfig, synthesize
from ..schema import BLOCK_SIZE_LABELS, Microdata, person_units, read_microdata, size_bin
from ..schema.spec import Units
from ..tables.spec import tabulate_units
from ..vocab import Release

if TYPE_CHECKING:
    from ..schema.registry import Population

#: the sides of a calibration: its name, the release its tables are, whether the defense
#: protects its records first
SIDES: tuple[tuple[str, Release, bool], ...] = (
    ("2020 DHC", Release.DHC_2020, True),
    ("2010 SF1", Release.SF1_2010, False),
)


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """A calibration's result: every verified claim of each side with whether it is true of the
    confidential records (``claims``), and the shares by side, claim size and block size
    (``scores``); the defense's name and the blocks attacked."""

    defense: str
    blocks: tuple[str, ...]
    claims: pl.DataFrame
    scores: pl.DataFrame

    def write(self, out: Path, source: str) -> list[Path]:
        """Write ``out/calibration.csv`` (:attr:`scores`), ``out/claims.parquet`` (every
        verified claim and whether it is true) and ``out/calibration.md`` (the table, with
        ``source``: what was calibrated and how); returns the paths."""
        out.mkdir(parents=True, exist_ok=True)
        md = (
            f"# Calibration: {source}; {len(self.blocks)} blocks, the 2020 side protected by "
            f"{self.defense}\n\nA claim is verified when every population the side's tables "
            "admit has it, and true when exactly its number of the confidential records match "
            f"it.\n\n{self.table()}\n"
        )
        return [
            write_csv(self.scores, out / "calibration.csv"),
            write_parquet(self.claims, out / "claims.parquet"),
            write_text(out / "calibration.md", md),
        ]

    def table(self) -> str:
        """The scores as a Markdown table: per side, k and block size, claims verified, true,
        and the share true (of all verified claims, and of those singling out one person)."""
        head = (
            "| side | k | block size | verified | true | true % | singling out | true % |\n"
            "|---|---|---|---|---|---|---|---|"
        )
        rows = [
            f"| {r['side']} | {r['k']} | {r['block_size']} | {r['verified']:,} | {r['true']:,} "
            f"| {_pct(r['true'], r['verified'])} | {r['singletons']:,} "
            f"| {_pct(r['true_singletons'], r['singletons'])} |"
            for r in self.scores.iter_rows(named=True)
        ]
        return "\n".join([head, *rows])


def confidential(records: Path | None, persons: int, seed: int) -> Microdata:
    """The confidential person records: read from ``records``, or a synthetic county of
    ``persons`` (``seed``)."""
    if records is not None:
        return read_microdata(records)
    return synthesize(SynthConfig(persons=persons), seed=seed)


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}" if b else "-"


def sample_blocks(truth: Units, per_size: int, seed: int) -> list[str]:
    """Up to ``per_size`` inhabited blocks of each size bin (by their confidential number of
    records), drawn at random (``seed``), in geoid order.

    >>> from tabrecon.records.synth import SynthConfig, synthesize
    >>> from tabrecon.schema import person_units
    >>> units = person_units(synthesize(SynthConfig(persons=2_000), seed=1))
    >>> len(sample_blocks(units, 2, 0)) <= 2 * 7
    True
    """
    geo, n = np.unique(truth.block_geoid.astype(str), return_counts=True)
    bins = size_bin(n)
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for b in np.unique(bins[bins >= 0]).tolist():
        mine = geo[bins == b]
        out += rng.choice(mine, size=min(per_size, mine.size), replace=False).tolist()
    return sorted(out)


def calibrate(
    truth: Microdata,
    *,
    persons: Population,
    defense: str = "dhc2020-production",
    per_size: int = 10,
    k_values: tuple[int, ...] = (1, 2, 3, 4),
    k_solutions: int = 20,
    block_seconds: float | None = 120.0,
    seed: int = 0,
    workers: int = 1,
) -> Calibration:
    """Calibrate the claims of ``persons``' tables (the person population) on ``truth``
    (module docstring): the DHC side protected by ``defense``
    (``"none"``: its exact tables), the SF1 2010 side exact, each attacked on the same sampled
    blocks with Generate-then-Verify (``k_values`` columns per claim, ``k_solutions`` solutions
    per block, ``block_seconds`` per block) and scored against ``truth``."""
    d = Defense.parse(defense)
    confidential = person_units(truth)
    blocks = sample_blocks(confidential, per_size, seed)
    if not blocks:
        raise TabreconError("the records hold no inhabited block to calibrate on")
    protected = d.protect(truth, seed, workers).records
    options = ClaimsOptions(
        k_values=k_values, k_solutions=k_solutions, seed=seed, block_seconds=block_seconds
    )
    frames = []
    for side, release, noisy in SIDES:
        pop = persons.in_release(release)
        published = person_units(protected) if noisy else confidential
        long = tabulate_units(replace(published, schema=pop.schema))
        long = long.filter(pl.col("geoid").is_in(blocks))
        run = release_claims(long, pop, options)
        frames.append(_scored(run.claims, replace(confidential, schema=pop.schema), side))
    claims = pl.concat(frames, how="diagonal")
    return Calibration(
        defense=d.name, blocks=tuple(blocks), claims=claims, scores=_scores(claims, confidential)
    )


def _scored(claims: pl.DataFrame, truth: Units, side: str) -> pl.DataFrame:
    """``claims`` with the side's name and, per claim, how many confidential records match it
    and whether that is its ``m``."""
    hits = matching_units(claims, truth) if claims.height else []
    true_n = np.array([len(h) for h in hits], dtype=np.int64)
    return claims.with_columns(
        pl.lit(side).alias("side"),
        pl.Series("true_matches", true_n, dtype=pl.Int64),
        (pl.Series(true_n, dtype=pl.Int64) == pl.col("m")).alias("true"),
    )


def _scores(claims: pl.DataFrame, truth: Units) -> pl.DataFrame:
    """Verified and true claims (and those singling out one person) per side, k and block size
    bin (the block's confidential size), and over all sizes."""
    geo, n = np.unique(truth.block_geoid.astype(str), return_counts=True)
    labels = list(BLOCK_SIZE_LABELS)
    size = pl.DataFrame(
        {"geoid": geo, "block_size": [labels[b] for b in size_bin(n).tolist()]},
        schema={"geoid": pl.String, "block_size": pl.String},
    )
    c = claims.join(size, on="geoid", how="left")
    one = pl.col("m") == 1
    aggs: list[Any] = [
        pl.len().alias("verified"),
        pl.col("true").sum().alias("true"),
        one.sum().alias("singletons"),
        (one & pl.col("true")).sum().alias("true_singletons"),
    ]
    by_size = c.group_by("side", "k", "block_size").agg(aggs)
    every = c.group_by("side", "k").agg(aggs).with_columns(pl.lit("all").alias("block_size"))
    order = {lab: i for i, lab in enumerate([*labels, "all"])}
    out = pl.concat([by_size, every.select(by_size.columns)])
    return (
        out.with_columns(pl.col("block_size").replace_strict(order).alias("_o"))
        .sort("side", "k", "_o", descending=[True, False, False])
        .drop("_o")
        .with_columns(
            pl.col(n).cast(pl.Int64) for n in ("verified", "true", "singletons", "true_singletons")
        )
    )


#: the columns of a calibration.csv that :func:`truth_rates` reads
CALIBRATION_COLUMNS = ("side", "k", "block_size", "verified", "true")


def truth_rates(path: Path) -> pl.DataFrame:
    r"""How often the 2020 side's verified claims were true, by claim size ``k`` (every block
    size together), from a ``calibration.csv`` that ``tabrecon calibrate`` wrote: columns
    ``k``, ``verified``, ``true`` and ``true_pct``; refused naming the file when it is not one.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "calibration.csv").write_text(
    ...     "side,k,block_size,verified,true,singletons,true_singletons\n"
    ...     "2020 DHC,1,1-4,5,1,5,1\n2020 DHC,1,all,40,4,30,2\n2010 SF1,1,all,50,50,40,40\n")
    >>> truth_rates(d / "calibration.csv").rows()
    [(1, 40, 4, 10.0)]
    """
    where = str(path)
    if not Path(path).is_file():
        raise InputError(
            "no such calibration file (tabrecon calibrate writes calibration.csv)", path=where
        )
    try:
        df = pl.read_csv(path, schema_overrides={"side": pl.String, "block_size": pl.String})
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as exc:
        raise InputError(f"not a calibration CSV: {exc}", path=where) from None
    lacking = [c for c in CALIBRATION_COLUMNS if c not in df.columns]
    if lacking:
        raise InputError(
            f"not a calibration.csv of tabrecon calibrate: no column {lacking[0]!r}", path=where
        )
    side = SIDES[0][0]
    rows = df.filter((pl.col("side") == side) & (pl.col("block_size") == "all"))
    if not rows.height:
        raise InputError(f"no row of the {side} side over all block sizes", path=where)
    try:
        out = rows.select(
            pl.col("k").cast(pl.Int64),
            pl.col("verified").cast(pl.Int64),
            pl.col("true").cast(pl.Int64),
        )
    except pl.exceptions.PolarsError:
        raise InputError("k, verified and true must be whole numbers", path=where) from None
    if (out["true"] > out["verified"]).any() or (out["true"] < 0).any():
        raise InputError("more claims true than verified, or fewer than none", path=where)
    return out.sort("k").with_columns(
        pl.when(pl.col("verified") > 0)
        .then((100.0 * pl.col("true") / pl.col("verified")).round(1))
        .otherwise(None)
        .alias("true_pct")
    )


def release_truth_rates(path: str, release: Release) -> pl.DataFrame | None:
    """:func:`truth_rates` of the calibration file ``path`` for an audit of ``release``
    (``""``: none, None); refused for a release other than the 2020 DHC, whose tables are
    exact or not the ones calibrated."""
    if not path:
        return None
    if release is not Release.DHC_2020:
        raise TabreconError(
            "--calibration gives the measured truth rate of the 2020 DHC's claims: audit a DHC "
            f"release (--release dhc-2020), not {release.label}"
        )
    return truth_rates(Path(path))


def truth_rate_summary(rates: pl.DataFrame | None, source: str) -> dict[str, Any] | None:
    """The truth rates as an audit's summary holds them: by claim size and over all."""
    if rates is None:
        return None
    return {
        "source": source,
        "by_k": rates.to_dicts(),
        "verified": int(rates["verified"].sum()),
        "true": int(rates["true"].sum()),
    }
