"""Certification's figures: what the published tables prove about a person reconstruction, block
by block, and how it is summed up.

*Solution variability* (Abowd et al.; methods.md section 3) of block b, for a reconstruction x* and
the binned key k = (sex, agebin38, race, hispanic): the largest share of the block's records that
differ in any population satisfying all the tables (tract tables included, so blocks are coupled)::

    solvar_b = 100 * max_x sum_k |x_k - x*_k| / (2 N_b) = 100 * max_x sum_k (x*_k - x_k)^+ / N_b

Zero means the block's binned histogram is the only one possible: the reconstruction is exact there
and its uniques are population uniques the attacker *knows*.

The proofs and distances are the count model's over any schema
(:func:`tabrecon.engine.release.reconstruct_release`, the zero test and distances of
:mod:`tabrecon.engine.variability`), asked at each population's resolution (persons at agebin38)
by :func:`certify_release`, what ``tabrecon solvar`` runs for every population. This module also
holds what is said of the answer: the run (:class:`CertRun`, Table S4, the share proven unique by
block size, each record's uniqueness flags where its population declares them) and the published
cells a refused reconstruction breaks (:func:`cells_it_breaks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..io import beside, write_csv, write_frame, write_parquet, write_text
from ..runner import RunOptions, UnitsRun
from ..schema import (
    AGEBIN_OF_AGE,
    AGEBIN_START,
    BLOCK_SIZE_LABELS,
    Microdata,
    decode_types,
    encode_types,
    size_bin,
)
from ..schema.registry import Population
from ..schema.spec import Units
from ..tables.spec import table_by_name, tabulate
from ..tables.tableset import MISSING, TableSet
from ..vocab import Geo, Level

if TYPE_CHECKING:
    from ..engine.solvers import SolverOptions

#: The status of a block proven to have exactly one consistent population (solvar 0).
UNIQUE = "unique"


def binned_type(t: np.ndarray) -> np.ndarray:
    """The type with its age replaced by the start of its agebin38 (the certification key)."""
    sex, age, race, hisp = decode_types(t)
    return encode_types(sex, AGEBIN_START[AGEBIN_OF_AGE[age]], race, hisp)


def cells_it_breaks(ts: TableSet, tract: str, level: str, recon: Units) -> list[str]:
    """The published cells the reconstruction (records of any schema) does not reproduce (the
    first five, named)."""
    mine_ts = ts.subset(tract)
    levels = (Geo.BLOCK, Geo.TRACT) if level == Level.BLOCK_TRACT else (Geo.BLOCK,)
    present = [
        t for t in mine_ts.tables_present() if table_by_name(t, ts.population).level in levels
    ]
    got = tabulate(recon, present)
    bad: list[str] = []
    for lvl in (Geo.BLOCK, Geo.TRACT) if level == Level.BLOCK_TRACT else (Geo.BLOCK,):
        pub = mine_ts.grids.get(lvl)
        if pub is None or not len(pub.geoids):
            continue
        g = got.grids.get(lvl)
        mine = np.zeros_like(pub.values)
        if g is not None and len(g.geoids):  # (records of none of the tract's blocks: all 0)
            ri = np.searchsorted(g.geoids, pub.geoids)
            ok = (ri < len(g.geoids)) & (g.geoids[np.minimum(ri, len(g.geoids) - 1)] == pub.geoids)
            col = {c: j for j, c in enumerate(g.cells)}
            cj = np.array([col[c] for c in pub.cells])
            mine[ok] = g.values[ri[ok]][:, cj]
        wrong = np.argwhere((pub.values != MISSING) & (pub.values != mine))
        for i, j in wrong[: 5 - len(bad)]:
            bad.append(
                f"{pub.geoids[i]} {pub.cells[j]}: published {pub.values[i, j]}, reconstruction "
                f"{mine[i, j]}"
            )
    return bad


@dataclass
class CertRun(UnitsRun):
    """Solution variability of every block (``blocks``) and each tract's run (``results``); per
    record, the uniqueness flags its population declares (``flags``: persons' on (sex, agebin)
    and on every column, with ``certified``; None where it declares none)."""

    blocks: pl.DataFrame
    results: list[dict]
    level: str = "block+tract"
    seconds: float = 0.0
    flags: pl.DataFrame | None = None
    #: what the records are called (``persons``, ``housing units``)
    noun: str = "persons"
    #: what the blocks are (``block``, a declared release's ``school``)
    place: str = "block"

    def summary_lines(self) -> list[str]:
        """The run in words (Markdown bullets): proven-unique blocks, cumulative solvar,
        population uniques among the reconstructed records (where flagged)."""
        lo, hi = cumulative_solvar(self.blocks)
        empty = int((self.blocks["persons"] == 0).sum())
        b = self.blocks.filter(pl.col("persons") > 0)  # empty blocks are trivially unique
        n_unique = int(proven_unique(b).sum())
        share = 100 * n_unique / b.height if b.height else 0.0
        place = self.place
        lines = [
            f"- inhabited {place}s: {b.height:,} (and {empty:,} empty); proven unique (solvar 0): "
            f"{n_unique:,} ({share:.1f}% of the inhabited), holding "
            f"{int(b.filter(proven_unique(b))['persons'].sum()):,} of "
            f"{int(b['persons'].sum()):,} {self.noun}",
            f"- {place}s that can differ: {int((b['status'] == 'varies').sum()):,}; undecided "
            f"(time-out): {int((b['status'] == 'undecided').sum()):,}",
            f"- cumulative solvar: {lo:.2f}%"
            + (f" to {hi:.2f}% (unproven blocks)" if hi > lo + 1e-9 else ""),
        ]
        f = self.flags
        if f is not None:
            cert_uniques = int((f["certified"] & (f["bsaber_unique"] == 1)).sum())
            lines.append(
                f"- records unique in their block on (sex, agebin): {int(f['bsab_unique'].sum()):,}"
                f"; on (sex, agebin, race, ethnicity): {int(f['bsaber_unique'].sum()):,}; of "
                f"those in certified blocks (known population uniques): {cert_uniques:,}"
            )
        lines.append(f"- {len(self.failed)} tract(s) failed; time {self.seconds:.1f} s")
        return lines

    def write(self, out: str | Path) -> list[Path]:
        """Write the per-block results (``out``, Parquet or CSV) and beside them
        ``<stem>_table_s4.csv`` (cumulative solvar, Table S4), ``<stem>_zero_by_size.csv``,
        ``<stem>_flags.parquet`` (uniqueness flags per record, where declared) and
        ``<stem>_summary.md``."""
        out = Path(out)
        if not out.exists():
            write_frame(self.blocks, out)
        paths = [out, beside(out, "_table_s4.csv"), beside(out, "_zero_by_size.csv")]
        write_csv(solvar_table(self.blocks), paths[1])
        write_csv(zero_share_by_size(self.blocks), paths[2])
        if self.flags is not None:
            paths.append(beside(out, "_flags.parquet"))
            write_parquet(self.flags, paths[-1])
        lines = [f"# Solution variability ({self.level} tables)", "", *self.summary_lines()]
        lines += [
            "",
            "Measured by `tabrecon solvar` (zero test: one infeasibility proof per tract; "
            "distance: maximum of sum (x* - x)^+ per block over all tables).",
        ]
        paths.append(beside(out, "_summary.md"))
        write_text(paths[-1], "\n".join(lines) + "\n")
        return paths


def certify_release(
    tables: TableSet,
    pop: Population,
    recon: Units,
    level: str = "block+tract",
    solver: SolverOptions | None = None,
    *,
    run: RunOptions | None = None,
    distance: bool = True,
    distance_time_limit: float | None = None,
) -> CertRun:
    """Certify a reconstruction of ``pop``'s records made elsewhere (a file, another tool's, the
    truth) with the count model over any schema: each block proven unique or not at the
    population's resolution (persons: agebin38) and, with ``distance``, its solution
    variability measured from these records
    (:func:`tabrecon.engine.release.reconstruct_release` with ``reference``; tracts in
    parallel, written to ``<out>.parts/``, resumable, as ``run`` says). A tract where the
    records break a published cell, hold a record the published zeros rule out or leave an
    inhabited block empty is refused, naming the cells it breaks, and the others go on.

    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.schema.registry import population
    >>> from tabrecon.tables.spec import tabulate
    >>> gq = population("group_quarters")
    >>> truth = gq.synthesize(SynthConfig(persons=3_000), 1)
    >>> run = certify_release(tabulate(truth), gq, truth, "block")
    >>> run.failed, set(run.blocks["status"]) <= {"unique", "varies"}
    ([], True)
    """
    import time

    from ..engine.reconstruct import ReconstructOptions
    from ..engine.release import reconstruct_release
    from ..engine.solvers import SolverOptions
    from ..errors import TabreconError
    from ..geo import overlap, prefix
    from ..runner import notice

    if level not in Level.choices():
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    t0 = time.perf_counter()
    geo = recon.block_geoid.astype(str)
    overlap(
        tables.inhabited_blocks(),
        np.unique(geo),
        tables.source or "the tables",
        recon.source or "the reconstruction",
    )
    options = ReconstructOptions(
        level=Level(level),
        solver=solver or SolverOptions(),
        distance=distance,
        distance_time_limit=distance_time_limit,
        unique_on=pop.unique_on,
    )
    rel = reconstruct_release(tables, pop, options, run=run, reference=recon)
    failed = rel.failed
    tract_of = prefix(geo, "tract") if geo.size else geo
    for r in failed:  # a refused tract: the published cells its records break, named
        if r["status"] == "refused":
            mine = recon.take(np.flatnonzero(tract_of == r["unit"]))
            bad = cells_it_breaks(tables, r["unit"], rel.level, mine)
            if bad:
                r["message"] += "; cells it breaks: " + "; ".join(bad)
    gone = [r["unit"] for r in failed]
    blocks = rel.verdicts(solved=True)
    results = [r for r in rel.results if r["unit"] not in gone] + failed
    for note in rel.notes:
        notice(f"certify: {note}")
    flags = pop.flags(recon, blocks) if pop.flags is not None else None
    return CertRun(
        blocks,
        results,
        str(level),
        time.perf_counter() - t0,
        flags,
        pop.noun,
        pop.schema.geography,
    )


SOLVAR_THRESHOLDS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0)


def solvar_table(blocks: pl.DataFrame) -> pl.DataFrame:
    """Cumulative blocks and persons by solution variability (layout of Abowd et al. Table S4).

    A block counts at threshold t when its proven solvar (or, unproven, its upper bound) is <= t;
    blocks with unproven bounds are counted separately so no figure rests on a time-out.
    """
    val = blocks["solvar"].fill_nan(None).fill_null(pl.lit(None)).to_numpy()
    hi = blocks["solvar_hi"].to_numpy()
    proven = blocks["proven"].to_numpy()
    pop = blocks["persons"].to_numpy()
    inhabited = pop > 0
    sv = np.where(proven, np.nan_to_num(val.astype(float), nan=0.0), hi)
    nb, np_ = inhabited.sum(), pop.sum()
    rows = []
    for t in SOLVAR_THRESHOLDS:
        m = inhabited & (sv <= t + 1e-9)
        rows.append(
            {
                "solvar_at_most_pct": t,
                "blocks": int(m.sum()),
                "persons": int(pop[m].sum()),
                "cum_blocks_pct": 100.0 * m.sum() / nb if nb else float("nan"),
                "cum_persons_pct": 100.0 * pop[m].sum() / np_ if np_ else float("nan"),
                "unproven_blocks": int((m & ~proven).sum()),
            }
        )
    return pl.DataFrame(rows)


def proven_unique(blocks: pl.DataFrame) -> pl.Series:
    """Per block of a certification frame: proven to have exactly one consistent population
    (solution variability zero)."""
    return blocks["status"] == UNIQUE


def certified_geoids(blocks: pl.DataFrame | None) -> np.ndarray:
    """The geoids of the blocks proven unique (none when there is no certification)."""
    if blocks is None or not blocks.height:
        return np.zeros(0, dtype=str)
    return blocks.filter(proven_unique(blocks))["block_geoid"].to_numpy().astype(str)


def certified_inhabited(blocks: pl.DataFrame | None) -> int:
    """Inhabited blocks proven to have one solution (empty blocks are trivially unique and are not
    counted, as in the undefended release's headline)."""
    if blocks is None or not blocks.height:
        return 0
    return int((proven_unique(blocks) & (blocks["persons"] > 0)).sum())


def cumulative_solvar(blocks: pl.DataFrame) -> tuple[float, float]:
    """Cumulative solvar 100 * sum IV / (2 sum N) over inhabited blocks, as (lower, upper) per
    cent."""
    pop = blocks["persons"].to_numpy().astype(float)
    lo = (blocks["solvar_lo"].to_numpy() * pop / 100.0).sum()
    hi = (blocks["solvar_hi"].to_numpy() * pop / 100.0).sum()
    tot = pop.sum()
    return (100.0 * lo / tot, 100.0 * hi / tot) if tot else (float("nan"), float("nan"))


def zero_share_by_size(blocks: pl.DataFrame) -> pl.DataFrame:
    """Share of blocks and persons with proven zero solvar by block-size bin (methods.md section
    3)."""
    pop = blocks["persons"].to_numpy()
    zero = proven_unique(blocks).to_numpy()
    sb = size_bin(pop)
    rows = []
    for i, lab in enumerate(BLOCK_SIZE_LABELS):
        m = sb == i
        rows.append(
            {
                "bin": lab,
                "blocks": int(m.sum()),
                "persons": int(pop[m].sum()),
                "zero_blocks_pct": 100.0 * (m & zero).sum() / m.sum() if m.any() else float("nan"),
                "zero_persons_pct": 100.0 * pop[m & zero].sum() / pop[m].sum()
                if m.any()
                else float("nan"),
            }
        )
    return pl.DataFrame(rows)


def uniqueness_flags(recon: Microdata, blocks: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per record: unique in its block on {sex, agebin} and on {sex, agebin, race, hispanic};
    certified.

    ``certified`` is True where the block has proven zero solvar: a certified unique is a population
    unique that the attacker knows about from public tables alone.
    """
    ab = recon.agebin.astype(np.int64)
    k1 = (recon.block.astype(np.int64) * 2 + recon.sex) * 38 + ab
    k2 = (k1 * 64 + recon.race) * 2 + recon.hisp
    out = {}
    for name, k in (("bsab_unique", k1), ("bsaber_unique", k2)):
        _, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
        out[name] = (cnt[inv] == 1).astype(np.int8)
    df = pl.DataFrame({"block_geoid": recon.block_geoid, **out})
    if blocks is not None and blocks.height:
        cert = blocks.select("block_geoid", (pl.col("status") == UNIQUE).alias("certified"))
        df = df.join(cert, on="block_geoid", how="left", maintain_order="left").with_columns(
            pl.col("certified").fill_null(False)
        )
    else:  # nothing certified (certification off, or no block certified)
        df = df.with_columns(pl.lit(False).alias("certified"))
    return df
