"""The audit's chunks: whole counties planned into chunks (:func:`plan_chunks`), a chunk's
records and tables checked against each other, and the chunks run in a pipeline
(:func:`run_chunks`: a chunk read ahead and the last one reidentified while a chunk's units are
solved), each through the stages of :class:`tabrecon.audit.stages.ChunkRunner`;
:func:`tabrecon.audit.aggregate.audit_summary` adds their results up.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..errors import InputError, TabreconError
from ..runner import tree_cpu
from ..schema.registry import Population
from ..schema.spec import Units
from ..tables.publication import Publication
from ..vocab import Geo
from .config import AuditConfig
from .evaluate import DefenseOutcome
from .stages import PREC_SOURCES, Chunk, ChunkRunner, StageLog, draws_of


class MismatchError(TabreconError):
    """Microdata and tables that do not describe the same geography."""


# ------------------------------------------------------------------------------------------------
# Inputs and chunks
# ------------------------------------------------------------------------------------------------
def plan_chunks(microdata: Path | None, chunk_persons: int, *, pop: Population) -> list[Chunk]:
    """Whole counties, in geoid order, batched up to ``chunk_persons`` records of ``pop`` (a
    larger county is a chunk of its own). Tables-only input is one
    chunk, and so is a file of a population counted by a geography of its own (schools)."""
    from ..schema import county_persons

    if microdata is None or pop.schema.geography != Geo.BLOCK:
        return [Chunk(0, [], 0)]
    cp = county_persons(microdata, pop.schema)
    chunks: list[Chunk] = []
    cur: list[str] = []
    n = 0
    for c, p in cp.iter_rows():
        if cur and n + p > chunk_persons:
            chunks.append(Chunk(len(chunks), cur, n))
            cur, n = [], 0
        cur.append(c)
        n += p
    if cur:
        chunks.append(Chunk(len(chunks), cur, n))
    if not chunks:  # no record at all: its reader says why (no rows, missing columns)
        pop.records(microdata)
        raise InputError(f"no {pop.schema.unit} records", path=str(microdata))
    return chunks


def read_release(path: Path, pop: Population):
    """``pop``'s published tables in any form
    :func:`tabrecon.tables.reader.read_unit_tables` reads (a long or wide file, a Census API
    response, an SF1 summary-file folder, a ZIP of one of them), a withheld cell read as such
    where the population's release withholds some."""
    from ..tables.reader import read_unit_tables

    withheld = Publication.parse(pop.publication).withholds
    return read_unit_tables(path, pop, withheld=withheld)


def check_same_geography(truth: Units, ts, md_path: Path, ts_path: Path, *, noun: str) -> None:
    """Refuse records (called ``noun``) and tables of different geographies, naming the
    mismatch."""
    g = ts.grids.get("block")
    if g is None:
        raise MismatchError(
            f"{ts_path}: the tables have no block level; the audit needs block tables"
        )
    pop = ts.block_population()
    tb = set(g.geoids[pop > 0].tolist()) if pop is not None else set(g.geoids.tolist())
    geoids, block = truth.blocks()
    mb = set(np.asarray(geoids)[np.unique(block)].tolist())
    only_t, only_m = sorted(tb - mb), sorted(mb - tb)
    if only_t or only_m:
        parts = []
        if only_m:
            parts.append(
                f"{len(only_m)} inhabited block(s) of {md_path} are not in the tables (e.g. "
                f"{only_m[0]})"
            )
        if only_t:
            parts.append(
                f"{len(only_t)} inhabited block(s) of {ts_path} are not in the microdata (e.g. "
                f"{only_t[0]})"
            )
        raise MismatchError(
            "microdata and tables describe different geographies: " + "; ".join(parts)
        )
    if pop is not None:
        order = np.searchsorted(np.asarray(geoids), g.geoids[pop > 0])
        counts = np.bincount(block, minlength=len(geoids))[order]
        bad = np.flatnonzero(counts != pop[pop > 0])
        if bad.size:
            b = g.geoids[pop > 0][bad[0]]
            raise MismatchError(
                f"microdata and tables disagree on block populations: block {b} has "
                f"{counts[bad[0]]} {noun} in "
                f"{md_path} but a published total of {pop[pop > 0][bad[0]]} in {ts_path} "
                f"({bad.size} block(s) differ)"
            )


# ------------------------------------------------------------------------------------------------
# What leaves a chunk
# ------------------------------------------------------------------------------------------------
FACTS = (
    "persons",
    "blocks",
    "inhabited_blocks",
    "tracts",
    "table_values",
    "identity_checks",
    "identity_violations",
    "recon_records",
    "recon_bsab_unique",
    "recon_certified_unique",
)


@dataclass
class ChunkResult:
    """What leaves a chunk: summable aggregates only (counts, per-block certification, rates,
    precision histograms, defense outcomes), merged across chunks by :func:`audit`."""

    facts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACTS, 0))
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(
        default_factory=list
    )  # a table left out, a level answered with another
    tables_present: list[str] = field(default_factory=list)
    agree: dict[str, pl.DataFrame] = field(default_factory=dict)  # per level, by block-size bin
    resolution: dict[str, str] = field(default_factory=dict)  # what agreement compared on
    blocks: pl.DataFrame | None = None  # certification per block
    rates: pl.DataFrame | None = None  # reidentification counts by group, bin and source
    hist: np.ndarray | None = None  # persons with precision >= each grid point, per source
    attacker: dict = field(default_factory=dict)
    defenses: list[DefenseOutcome] = field(default_factory=list)
    claims: list[dict] = field(default_factory=list)  # per tract: verified-claims figures
    claim_examples: pl.DataFrame | None = None  # a few records' singleton claims
    singled: pl.DataFrame | None = None  # per block: persons singled out by a verified claim


#: how many example claims the report shows (a handful: facts about the release, not records)
EXAMPLE_CLAIMS = 5


def claim_examples(persons: pl.DataFrame, n: int = EXAMPLE_CLAIMS) -> pl.DataFrame:
    """A few verified singleton claims, one per block, fewest columns first: what the report shows
    a reader (each a fact every population consistent with the tables makes true), the size of
    its block (not its geoid) and how it was proven (the block's one consistent population, or
    infeasibility proofs)."""
    if not persons.height or "claim" not in persons.columns:
        return pl.DataFrame(schema={"persons in block": pl.Int64, "claim": pl.String})
    size = persons.group_by("block_geoid").len("persons in block")
    got = (
        persons.filter(pl.col("claim").is_not_null())
        .sort("min_k", "block_geoid", "claim")
        .unique("block_geoid", keep="first", maintain_order=True)
        .head(n)
        .join(size, on="block_geoid", how="left", maintain_order="left")
    )
    # no block is named: the report never lists what identifies a place of the input
    return got.select(
        pl.col("persons in block"),
        pl.col("claim"),
        pl.col("min_k").alias("k"),
        pl.when(pl.col("certified"))
        .then(pl.lit("the block's one consistent population"))
        .otherwise(pl.lit("every other count proven impossible"))
        .alias("proof"),
        pl.col("baseline_tract").round(3).alias("baseline (tract)"),
    )


@dataclass
class Opened:
    """A chunk's records and tables, read and tabulated (while the chunk before it is being
    reconstructed, when there is one: :func:`run_chunks`)."""

    #: the chunk's person records, for the stages of linked populations
    md: Any
    #: its records as units of its population (None for tables-only input)
    truth: Units | None
    #: its tables, and what finishes their stage (None when an earlier run finished it)
    ts: Any
    finish_tables: Callable[[], dict] | None


def open_chunk(cr: ChunkRunner, md_path, ts_path, given, log: StageLog) -> Opened:
    """Read one chunk's records (its counties of ``md_path``) and tabulate them, or take the
    ``given`` tables: the work of a chunk that runs in this process before its units are handed
    out."""
    from ..schema import person_units, read_microdata

    ch = cr.chunk
    md = None
    truth: Units | None = None
    if md_path is not None:
        t0, c0 = time.perf_counter(), tree_cpu()
        if cr.linked:
            md = read_microdata(md_path, counties=ch.counties or None)
            truth = person_units(md)
            if truth.schema != cr.pop.schema:  # the same records, published in another release
                truth = replace(truth, schema=cr.pop.schema)
        else:
            truth = cr.pop.records(md_path, ch.counties or None)
        log.add("read", time.perf_counter() - t0, tree_cpu() - c0)
        if given is not None:
            check_same_geography(truth, given, md_path, ts_path, noun=cr.pop.noun)
    ts, finish_tables = cr.tabulate(truth, given)
    return Opened(md, truth, ts, finish_tables)


def run_chunk(
    cr: ChunkRunner,
    cfg: AuditConfig,
    opened: Opened,
    rich_level: str,
    meanwhile_too: Callable[[], None] | None = None,
) -> tuple[ChunkResult, Callable[[], None] | None]:
    """Every stage of one chunk but its last, returning its summable aggregates (nothing is
    merged until it is done) and its last stage still to run (None when there is none):
    reidentification, which needs no worker, runs while the next chunk's units are solved
    (:func:`run_chunks`). Person records (:attr:`ChunkRunner.linked`) are also matched to the
    truth, linked to the attacker's data and defended.
    ``meanwhile_too``: more of this process's work, run while this chunk's units are solved
    (after the chunk's own)."""
    from ..schema import person_records

    ch = cr.chunk
    out = ChunkResult()
    facts = out.facts
    md, truth, ts = opened.md, opened.truth, opened.ts
    if truth is not None:
        facts["persons"] += len(truth)
    # the tables' identity checks are made while the workers reconstruct (the client's serial
    # work, issue 40); when no reconstruction runs them, they run after it
    finished: list[dict] = []

    def meanwhile() -> None:
        if not finished:
            finish = opened.finish_tables
            finished.append(finish() if finish is not None else {})
            if md is not None:  # and reidentification's part that needs no reconstruction
                cr.prepare_reidentify(md, ts)
            if meanwhile_too is not None:
                c0 = tree_cpu()
                meanwhile_too()
                cr._lent += tree_cpu() - c0  # another chunk's stages: counted by them

    recons = {}
    for lv in cfg.reconstruct.levels:
        recons[lv], rinfo = cr.reconstruct(
            ts, lv, md, cfg.certify.enabled and lv == rich_level, meanwhile
        )
        out.failures += [f"{ch.name} reconstruct {lv}: {f}" for f in rinfo.get("failures", [])]
        out.notes += [f"{ch.name} reconstruct {lv}: {n}" for n in rinfo.get("notes", [])]
        if md is not None:
            out.agree[lv] = pl.read_parquet(cr.dir / f"agree_{lv.replace('+', '_')}.parquet")
            out.resolution[lv] = rinfo.get("agree_resolution", "")
    meanwhile()
    tinfo = finished[0] or cr.done("tabulate") or {}
    for k in ("table_values", "identity_checks", "identity_violations", "tracts", "blocks"):
        facts[k] += tinfo[k]
    facts["inhabited_blocks"] += tinfo.get("inhabited_blocks", 0)
    out.tables_present = tinfo.get("tables_present", [])
    if truth is None:
        facts["persons"] += int(pop.sum()) if (pop := ts.block_population()) is not None else 0
    blocks = None
    if cfg.certify.enabled:
        blocks, cinfo = cr.certify(rich_level)  # its failures are the reconstruction's
        out.blocks = blocks
    if cfg.claims.enabled and not cr.publication.exact:
        out.notes.append(
            f"{ch.name} claims: not made from counts published {cr.publication} (verified "
            "claims read exact counts); Generate-then-Verify attacks them as published"
        )
    elif blocks is not None and blocks.height and cfg.claims.enabled:  # none certified: none
        persons, clinfo = cr.claims(ts, recons[rich_level], blocks, rich_level)
        out.claims = clinfo.get("results", [])
        out.failures += [f"{ch.name} claims: {f}" for f in clinfo.get("failures", [])]
        out.claim_examples = claim_examples(persons)
        out.singled = persons.group_by("block_geoid").agg(
            pl.col("min_k").is_not_null().sum().cast(pl.Int64).alias("singled_out")
        )
    if not cr.linked:
        return out, None
    recon = person_records(recons[rich_level])
    if md is None:
        from ..attacks.certify import uniqueness_flags

        if blocks is not None:
            fl = uniqueness_flags(recon, blocks)
            facts["recon_records"] += fl.height
            facts["recon_bsab_unique"] += int((fl["bsab_unique"] == 1).sum())
            facts["recon_certified_unique"] += int(
                (fl["certified"] & (fl["bsab_unique"] == 1)).sum()
            )
        return out, None
    # the defenses hand out units of their own: they run now, and reidentification after them
    for spec in cfg.defenses.specs:
        for draw in range(1, draws_of(spec, cfg.defenses.draws) + 1):
            out.defenses.append(cr.defense(md, spec, draw))

    def reidentify() -> None:
        out.rates, rinfo = cr.reidentify(recon, md, ts, blocks)
        out.hist = (
            pl.read_parquet(cr.dir / "precision_hist.parquet").select(PREC_SOURCES).to_numpy()
        )
        for k in ("recon_records", "recon_bsab_unique", "recon_certified_unique"):
            facts[k] += rinfo.get(k, 0)
        out.attacker = rinfo.get("attacker", {})

    return out, reidentify


def run_chunks(
    chunks: list[Chunk],
    runner: Callable[[Chunk], ChunkRunner],
    cfg: AuditConfig,
    md_path,
    ts_path,
    given,
    rich_level: str,
    log: StageLog,
    on_turn: Callable[[Chunk], None] = lambda ch: None,
) -> Iterator[tuple[Chunk, ChunkResult | Exception]]:
    """Every chunk's result in chunk order, or the error that lost it (the other chunks go on;
    a :class:`MismatchError` stops the audit), pipelined so that the workers do not wait for
    this process between chunks: while chunk k's units are solved, this process finishes chunk
    k-1 (its reidentification) and reads and tabulates chunk k+1 (the wait between two chunks
    of 250,000 persons: about 1 s before, 0.05 s after). ``runner`` makes a chunk's
    :class:`ChunkRunner`; ``on_turn`` is told of each chunk as its units are about to run."""
    done: deque[tuple[Chunk, ChunkResult | Exception]] = deque()
    waiting: list[tuple[Chunk, ChunkResult, Callable[[], None]]] = []  # (at most one)
    ahead: dict[int, tuple[ChunkRunner, Opened] | Exception] = {}

    def finish_waiting() -> None:
        while waiting:
            ch, part, last = waiting.pop()
            try:
                last()
            except Exception as exc:  # the chunk is lost and reported; the others go on
                done.append((ch, exc))
            else:
                done.append((ch, part))

    def open_ahead(i: int) -> None:
        if i < len(chunks) and i not in ahead:
            try:
                cr = runner(chunks[i])
                ahead[i] = (cr, open_chunk(cr, md_path, ts_path, given, log))
            except Exception as exc:  # chunk i's, met in its turn
                ahead[i] = exc

    for i, ch in enumerate(chunks):

        def meanwhile(i: int = i) -> None:
            finish_waiting()
            open_ahead(i + 1)

        on_turn(ch)
        try:
            open_ahead(i)
            got = ahead.pop(i)
            if isinstance(got, Exception):
                raise got
            cr, opened = got
            part, last = run_chunk(cr, cfg, opened, rich_level, meanwhile)
        except MismatchError:
            finish_waiting()
            yield from done
            raise
        except Exception as exc:
            finish_waiting()
            done.append((ch, exc))
        else:  # (its meanwhile, which run_chunk always runs, finished the chunk before)
            if last is None:
                done.append((ch, part))
            else:
                waiting.append((ch, part, last))
        while done:
            yield done.popleft()
    finish_waiting()
    yield from done
