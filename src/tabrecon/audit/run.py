"""The one-command disclosure audit: publish -> reconstruct -> certify -> link -> defend -> compare.

Input is confidential microdata (a person file), published tables (a long table file or an SF1
summary-file folder), or both (the tables are then the release and the microdata the truth, and
their geographies must match). The work is done chunk by chunk: whole counties are batched up to
``run.chunk_persons`` persons and each chunk is read by itself (streamed from the file), so memory
follows the chunk, never the whole state or nation. Inside a chunk the units of work are tracts,
run in this process, a process pool or on a Dask cluster (:func:`tabrecon.runner.execution`).

Every stage of every chunk writes its result under ``OUT/work/chunk-NNN/`` as it completes and then
a ``<stage>.done.json`` marker (written last, by rename); with ``resume`` a rerun skips finished
stages, and inside an unfinished reconstruction or certification it skips finished tracts. Only
aggregates leave a chunk -- counts by group, block-size bin and race source, per-block solution
variability, precision histograms -- and they are summed exactly across chunks, so the audit of a
one-chunk input gives the numbers of the individual commands.
"""

from __future__ import annotations

import json
import platform
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console

from ..attacks.certify import proven_unique
from ..attacks.reidentify import RATE_COLUMNS
from ..defenses.defense import Defense
from ..errors import InputError, TabreconError
from ..io import file_digest, remove_tree, write_csv, write_json, write_parquet, write_text
from ..provenance import check_or_record, digest_path, fingerprint
from ..runner import notice, tree_cpu, units_peak_mib
from ..schema import write_microdata
from .config import AuditConfig, RunConfig
from .evaluate import DefenseOutcome, EvaluationPlan, evaluate_defense, outcome_frame

PRECISION_GRID = np.linspace(0.0, 1.0, 101)
PREC_SOURCES = ("attack", "mdg", "prg", "truth", "francis")


class MismatchError(TabreconError):
    """Microdata and tables that do not describe the same geography."""


# ------------------------------------------------------------------------------------------------
# Inputs and chunks
# ------------------------------------------------------------------------------------------------
@dataclass
class Chunk:
    index: int
    counties: list[str]
    persons: int  # 0 when unknown (tables-only input)

    @property
    def name(self) -> str:
        return f"chunk-{self.index:03d}"


def plan_chunks(microdata: Path | None, chunk_persons: int) -> list[Chunk]:
    """Whole counties, in geoid order, batched up to ``chunk_persons`` persons (a larger county is
    a chunk of its own). Tables-only input is one chunk."""
    from ..schema import county_persons

    if microdata is None:
        return [Chunk(0, [], 0)]
    cp = county_persons(microdata)
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
    if not chunks:  # no record at all: the person reader says why (no rows, missing columns)
        from ..schema import read_microdata

        read_microdata(microdata)
        raise InputError("no person records", path=str(microdata))
    return chunks


def read_release(path: Path):
    """Published tables in any form :func:`tabrecon.tables.published.read_tables` detects (a long or
    wide file, a Census API response, an SF1 summary-file folder)."""
    from ..tables.published import read_tables

    return read_tables(path)


def check_same_geography(md, ts, md_path: Path, ts_path: Path) -> None:
    """Refuse microdata and tables of different geographies, naming the mismatch."""
    g = ts.grids.get("block")
    if g is None:
        raise MismatchError(
            f"{ts_path}: the tables have no block level; the audit needs block tables"
        )
    pop = ts.block_population()
    tb = set(g.geoids[pop > 0].tolist()) if pop is not None else set(g.geoids.tolist())
    mb = set(np.asarray(md.geoids)[np.unique(md.block)].tolist())
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
        order = np.searchsorted(np.asarray(md.geoids), g.geoids[pop > 0])
        counts = np.bincount(md.block, minlength=len(md.geoids))[order]
        bad = np.flatnonzero(counts != pop[pop > 0])
        if bad.size:
            b = g.geoids[pop > 0][bad[0]]
            raise MismatchError(
                f"microdata and tables disagree on block populations: block {b} has "
                f"{counts[bad[0]]} persons in "
                f"{md_path} but a published total of {pop[pop > 0][bad[0]]} in {ts_path} "
                f"({bad.size} block(s) differ)"
            )


# ------------------------------------------------------------------------------------------------
# Stages of one chunk
# ------------------------------------------------------------------------------------------------
def _hist(values: np.ndarray) -> np.ndarray:
    """How many values are >= each point of the precision grid (summable across chunks)."""
    v = np.sort(np.asarray(values, dtype=float))
    return v.size - np.searchsorted(v, PRECISION_GRID - 1e-12, side="left")


@dataclass
class StageLog:
    """Timings and peak memory of every stage (summed over chunks)."""

    seconds: dict[str, float] = field(default_factory=dict)
    resumed: list[str] = field(default_factory=list)
    #: CPU seconds of this process and of its units in worker processes
    #: (:func:`tabrecon.runner.tree_cpu`)
    core: dict[str, float] = field(default_factory=dict)

    def add(self, stage: str, sec: float, core: float | None = None) -> None:
        key = stage.split(":")[0] if not stage.startswith("defense") else stage
        self.seconds[key] = round(self.seconds.get(key, 0.0) + sec, 2)
        if core is not None:
            self.core[key] = round(self.core.get(key, 0.0) + core, 2)


class ChunkRunner:
    """Runs the stages of one chunk, each written as done and skipped on resume."""

    def __init__(
        self,
        cfg: AuditConfig,
        chunk: Chunk,
        work: Path,
        resume: bool,
        log: StageLog,
        progress: Callable[[str, int], Callable[[dict], None]],
        on_stage: Callable[[str], None] = lambda stage: None,
    ) -> None:
        self.cfg, self.chunk, self.dir, self.resume = cfg, chunk, work / chunk.name, resume
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log, self.progress, self.on_stage = log, progress, on_stage
        self.seed = cfg.run.seed + 1_000_003 * chunk.index

    def done(self, stage: str) -> dict | None:
        f = self.dir / f"{stage.replace(':', '_')}.done.json"
        if self.resume and f.exists():
            try:
                return json.loads(f.read_text())
            except json.JSONDecodeError:
                return None
        return None

    def resumed(
        self, stage: str, path: Path, load: Callable[[Path], Any]
    ) -> tuple[Any, dict] | None:
        """(the stage's output, its info) when an earlier run finished it and ``resume`` is on."""
        info = self.done(stage)
        if info is None or not path.exists() or not self.intact(stage, info):
            return None
        self.skip(stage)
        return load(path), info

    def intact(self, stage: str, info: dict) -> bool:
        """Whether every file the stage wrote still has the checksum its marker recorded (a
        damaged one makes the stage run again, and says so)."""
        bad = [
            name
            for name, digest in info.get("outputs", {}).items()
            if not (self.dir / name).exists() or file_digest(self.dir / name) != digest
        ]
        if bad:
            notice(f"{self.dir}: {stage} redone, its output damaged on disk ({', '.join(bad)})")
        return not bad

    def skip(self, stage: str) -> None:
        """A stage finished by an earlier run: kept, counted as resumed."""
        self.log.resumed.append(f"{self.chunk.name}/{stage}")
        self.on_stage(stage)

    def start(self) -> float:
        """A stage begins: its wall clock (returned) and CPU clock (kept for :meth:`mark`)."""
        self._cpu0 = tree_cpu()
        return time.perf_counter()

    def mark(self, stage: str, t0: float, info: dict, *outputs: Path) -> dict:
        """The stage is done: its marker, with its timings and the checksum of each of its
        ``outputs`` (checked by :meth:`intact` before a resumed run reuses them), written last."""
        sec = time.perf_counter() - t0
        core = tree_cpu() - self._cpu0
        info = {**info, "seconds": round(sec, 2), "core_seconds": round(core, 2)}
        info["outputs"] = {
            str(p.relative_to(self.dir)): file_digest(p) for p in outputs if p.exists()
        }
        write_json(self.dir / f"{stage.replace(':', '_')}.done.json", info)
        self.log.add(stage, sec, core)
        self.on_stage(stage)
        return info

    def opts(self):
        from ..engine.solvers import SolverOptions

        r = self.cfg.reconstruct  # solver seed 0, as the individual commands use by default
        return SolverOptions(backend=r.solver, threads=1, time_limit=r.time_limit)

    # -- stages -----------------------------------------------------------------------------------
    def tabulate(self, md, given=None):
        from ..tables.consistency import check_consistency
        from ..tables.persons import read_long_tables, tabulate, write_tables

        path = self.dir / "tables.parquet"
        if (hit := self.resumed("tabulate", path, read_long_tables)) is not None:
            return hit
        t0 = self.start()
        ts = given if given is not None else tabulate(md)
        rep = check_consistency(ts)
        write_tables(ts, path)
        info = {
            "table_values": int(sum(g.values.size for g in ts.grids.values())),
            "identity_checks": rep.checked,
            "identity_violations": len(rep.violations),
            "tracts": len(ts.tracts()),
            "tables_present": ts.tables_present(),
            "blocks": int(ts.grids["block"].geoids.size) if "block" in ts.grids else 0,
            "inhabited_blocks": int((pop > 0).sum())
            if (pop := ts.block_population()) is not None
            else 0,
        }
        return ts, self.mark("tabulate", t0, info, path)

    def reconstruct(self, ts, level: str, md, certify: bool = False):
        """Persons from the chunk's tables at ``level`` (:func:`tabrecon.populations.persons
        .reconstruct_persons`); with ``certify`` each block's verdict (and, as configured, its
        distance) in the same program, kept beside the records for the certify stage."""
        from ..metrics.agreement import agree
        from ..populations.persons import reconstruct_persons
        from ..schema import read_microdata

        stage = f"reconstruct:{level}"
        path = self.dir / f"recon_{level.replace('+', '_')}.parquet"
        made = self.done(stage) or {}
        # records made without the verdicts this run needs are made again, with them
        if (not certify or "verdicts.parquet" in made.get("outputs", {})) and (
            hit := self.resumed(stage, path, read_microdata)
        ) is not None:
            return hit
        t0 = self.start()
        tick = self.progress(f"{self.chunk.name} reconstruct {level}", len(ts.tracts()))
        c = self.cfg.certify
        run = reconstruct_persons(
            ts,
            level,
            self.opts(),
            workers=self.cfg.run.workers,
            out=path,
            resume=self.resume,
            progress=tick,
            certify=certify,
            distance=certify and c.distance,
            distance_time_limit=c.distance_time_limit or None,
        )
        info = {
            "records": len(run.records),
            "failed_tracts": [r["unit"] for r in run.failed],
            "failures": [
                f"tract {r['unit']}: {r['status']} -- {r.get('message', '')}".rstrip(" -")
                for r in run.failed
            ],
            "notes": run.notes,
        }
        for note in run.notes:  # a table left out, a level answered with another: said now
            notice(f"{self.chunk.name} reconstruct {level}: {note}")
        outputs = [path]
        if certify:  # the verdicts of the blocks solved (a failed tract's are its failure)
            failed = [r["unit"] for r in run.failed]
            kept = run.blocks.filter(~pl.col("block_geoid").str.slice(0, 11).is_in(failed))
            outputs.append(write_parquet(kept, self.dir / "verdicts.parquet"))
        if md is not None:
            a = agree(run.records, truth=md)
            info["agree_resolution"] = a.resolution
            outputs.append(
                write_parquet(
                    a.by_bin.select("bin", "blocks", "persons", "exact", "binned"),
                    self.dir / f"agree_{level.replace('+', '_')}.parquet",
                )
            )
        if not path.exists():  # no tract solved: keep an empty file so the stage is complete
            write_parquet(run.records.to_frame(), path)
        return run.records, self.mark(stage, t0, info, *outputs)

    def certify(self, level: str):
        """Every block's verdict and solution variability: measured in the reconstruction's
        program at ``level`` (its stage wrote them), here gathered as the certification frame
        (``solvar.parquet``)."""
        stage = "certify"
        path = self.dir / "solvar.parquet"
        if (hit := self.resumed(stage, path, pl.read_parquet)) is not None:
            return hit
        t0 = self.start()
        rec = self.done(f"reconstruct:{level}") or {}
        blocks = pl.read_parquet(self.dir / "verdicts.parquet")
        write_parquet(blocks, path)
        info = {
            "blocks": blocks.height,
            "failed_tracts": rec.get("failed_tracts", []),
            "failures": rec.get("failures", []),
            "measured_in": f"reconstruct:{level}",
        }
        return blocks, self.mark(stage, t0, info, path)

    def claims(self, ts, recon, blocks: pl.DataFrame, level: str):
        """Verified claims about the persons of every block (:func:`tabrecon.attacks.claims
        .claims`), from the tables alone: each tract's figures in the marker, each
        reconstructed record's first singleton claim in ``claims_persons.parquet``."""
        from ..attacks.claims import claims

        stage = "claims"
        path = self.dir / "claims_persons.parquet"
        if (hit := self.resumed(stage, path, pl.read_parquet)) is not None:
            return hit
        t0 = self.start()
        # only the blocks certification answered for: a tract it failed on has no claims (it
        # is reported as failed already), and the others go on
        certified = np.isin(recon.block_geoid.astype(str), blocks["block_geoid"].to_numpy())
        if not certified.all():
            recon = recon.take(certified)
        tick = self.progress(f"{self.chunk.name} claims", len(ts.tracts()))
        run = claims(
            ts,
            recon,
            blocks,
            level,
            self.opts(),
            k_solutions=self.cfg.claims.k_solutions,
            seed=self.seed,
            workers=self.cfg.run.workers,
            out=self.dir,
            resume=self.resume,
            progress=tick,
        )
        write_parquet(run.persons, path)
        info = {
            "results": [r for r in run.results if r["status"] == "ok"],
            "failures": [
                f"tract {f['unit']}: {f['status']} -- {f.get('message', '')}".rstrip(" -")
                for f in run.failed
            ],
        }
        return run.persons, self.mark(stage, t0, info, path)

    def reidentify(self, recon, md, ts, blocks):
        from dataclasses import asdict

        from ..attacks.certify import uniqueness_flags
        from ..attacks.reidentify import reidentify

        stage = "reidentify"
        path = self.dir / "reid_rates.parquet"
        if (hit := self.resumed(stage, path, pl.read_parquet)) is not None:
            return hit
        t0 = self.start()
        r = self.cfg.reidentify
        res = reidentify(
            recon, md, r.attacker, ts, blocks, seed=self.seed, francis_threshold=r.francis_threshold
        )
        rates = res.rates(by_bin=True).select(
            "group", "bin", "source", "attacker_records", "putative", "confirmed"
        )

        hist = {s: _hist(res.person_precision(s)) for s in PREC_SOURCES[:-1]}
        hist["francis"] = _hist(res.francis["precision"].to_numpy())
        totals = {s: int(h[0]) for s, h in hist.items()}
        hist_path = write_parquet(
            pl.DataFrame({"p": PRECISION_GRID, **{s: hist[s] for s in PREC_SOURCES}}),
            self.dir / "precision_hist.parquet",
        )
        flags = uniqueness_flags(recon, blocks)
        info = {
            "attacker": asdict(res.attacker_report),
            "precision_persons": totals,
            "mdg_rules": res.meta.get("mdg_rules"),
            "rvr_share": res.meta.get("rvr_share"),
            "recon_records": flags.height,
            "recon_bsab_unique": int((flags["bsab_unique"] == 1).sum()),
            "recon_certified_unique": int((flags["certified"] & (flags["bsab_unique"] == 1)).sum()),
        }
        write_parquet(rates, path)
        return rates, self.mark(stage, t0, info, path, hist_path)

    def defense(self, md, spec: str) -> DefenseOutcome:
        """Protect this chunk with ``spec`` and attack the release (:func:`evaluate_defense`);
        the protected release and the attack's parts are kept under ``def_<spec>/``."""
        stage = f"defense:{spec}"
        folder = self.dir / f"def_{spec.replace('=', '').replace('.', 'p')}"
        path = folder / "outcome.json"
        info = self.done(stage)
        if info is not None and path.exists() and self.intact(stage, info):
            self.skip(stage)
            return DefenseOutcome.from_json(path.read_text())
        t0 = self.start()
        name = self.chunk.name

        def progress(label: str, total: int) -> Callable[[dict], None]:
            return self.progress(f"{name} {label}", total)

        outcome = evaluate_defense(
            md,
            Defense.parse(spec),
            EvaluationPlan.from_config(self.cfg),
            seed=self.seed,
            work=folder,
            resume=self.resume,
            progress=progress,
        )
        write_text(path, outcome.to_json())
        self.mark(stage, t0, {"defense": spec}, path)
        return outcome


# ------------------------------------------------------------------------------------------------
# Aggregation across chunks
# ------------------------------------------------------------------------------------------------
def pct_rates(rates: pl.DataFrame) -> pl.DataFrame:
    """Sum count rates over chunks and add putative %, confirmed % and precision %."""
    s = rates.group_by("group", "bin", "source", maintain_order=True).agg(
        pl.col("attacker_records").sum(), pl.col("putative").sum(), pl.col("confirmed").sum()
    )
    n, put, conf = pl.col("attacker_records"), pl.col("putative"), pl.col("confirmed")
    return s.with_columns(
        pl.when(n > 0).then(100.0 * put / n).otherwise(None).alias("putative_pct"),
        pl.when(n > 0).then(100.0 * conf / n).otherwise(None).alias("confirmed_pct"),
        pl.when(put > 0).then(100.0 * conf / put).otherwise(None).alias("precision_pct"),
    )


def _agree_table(frames: list[pl.DataFrame]) -> pl.DataFrame:
    s = pl.concat(frames).group_by("bin", maintain_order=True).sum()
    tot = s.select(pl.lit("all").alias("bin"), pl.exclude("bin").sum())
    s = pl.concat([tot, s])
    return s.with_columns(
        pl.when(pl.col("persons") > 0)
        .then(100.0 * pl.col("exact") / pl.col("persons"))
        .alias("exact_pct"),
        pl.when(pl.col("persons") > 0)
        .then(100.0 * pl.col("binned") / pl.col("persons"))
        .alias("binned_pct"),
    )


# ------------------------------------------------------------------------------------------------
# The audit
# ------------------------------------------------------------------------------------------------
@dataclass
class AuditResult:
    """Where the audit wrote (``out``, ``report``) and its summary (``summary.json``)."""

    out: Path
    summary: dict
    report: Path

    def headline(self) -> list[list[str]]:
        """The audit's headline figures as (figure, value) rows."""
        s = self.summary
        pct = lambda v: "n/a" if v is None or v != v else f"{v:.1f}%"  # noqa: E731
        rows = []
        for lv in ("block", "block+tract"):
            if a := s.get(f"agreement_{lv}"):
                rows.append(
                    [
                        f"agreement, {lv} tables (binned / exact age)",
                        f"{a['binned_pct']:.1f}% / {a['exact_pct']:.1f}%",
                    ]
                )
        if c := s.get("certify"):
            missing = c.get("uncertified_blocks", 0)
            rows.append(
                [
                    f"blocks with one solution ({c['level']})",
                    f"{c['unique_blocks']:,} of {c['inhabited_blocks']:,} "
                    f"({pct(c['unique_blocks_pct'])})"
                    + (f"; {missing:,} in failed tracts, not certified" if missing else ""),
                ]
            )
        if (v := s.get("claims")) and v.get("persons"):
            rows.append(
                [
                    f"persons singled out by verified claims ({v['level']})",
                    f"{v['persons_singled_out']:,} of {v['persons']:,} "
                    f"({pct(v['persons_singled_out_pct'])}), in "
                    f"{v['blocks_with_singleton']:,} blocks",
                ]
            )
        if r := s.get("reidentification", {}):
            nonmodal = [
                pct(r[src]["nonmodal"]["precision_pct"]) for src in ("attack", "mdg", "prg")
            ]
            rows.append(["precision, nonmodal: attack / MDG / PRG", " / ".join(nonmodal)])
            rows.append(
                [
                    "precision, certified nonmodal uniques",
                    pct(r["attack"]["certified_uniques"]["precision_pct"]),
                ]
            )
        name = s.get("population", "households")  # a generic audit's, or a person audit's part
        if h := s.get(name):
            five = h.get("singleton_blocks_by_k", {})
            place = h.get("geography", "block")  # a declared release's own (school)
            how = "" if h.get("publication", "exact") == "exact" else f" ({h['publication']})"
            for k in ["5"] if "5" in five else sorted(five, key=int)[:1]:  # the study's k
                rows.append(
                    [
                        f"{name}: {place}s with a verified {k}-column singleton{how}",
                        f"{five[k]:,} of {h['blocks']:,} ({pct(100.0 * five[k] / h['blocks'])})"
                        if h["blocks"]
                        else "n/a",
                    ]
                )
            rows.append(
                [
                    f"{name}: {place}s whose full reconstruction is unique{how}",
                    f"{h['blocks_unique_reconstruction']:,} of {h['blocks']:,}",
                ]
            )
        for d in s.get("defenses", []):
            rows.append(
                [
                    f"{d['defense']}: nonmodal attack / PRG, block accuracy (1 - TVD)",
                    f"{pct(d['attack_nonmodal_precision'])} / {pct(d['prg_nonmodal_precision'])}, "
                    f"{d.get('tvd_block', float('nan')):.3f}",
                ]
            )
        return rows


def _versions() -> dict[str, str]:
    import importlib.metadata as im

    vs = {"python": platform.python_version(), "platform": platform.platform()}
    for p in (
        "tabrecon",
        "numpy",
        "polars",
        "ortools",
        "highspy",
        "opendp",
        "clarabel",
        "scipy",
        "dask",
        "distributed",
    ):
        try:
            vs[p] = im.version(p)
        except im.PackageNotFoundError:
            pass
    return vs


def _peak_mb() -> dict[str, float]:
    """Peak resident sets in MiB: this process's, and the largest of the processes that ran its
    units (pool workers report theirs with each result: a forkserver's workers are not this
    process's children, and ``RUSAGE_CHILDREN`` saw 0.0 for them)."""
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    kids = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0, units_peak_mib())
    return {"main_process_mib": round(me, 1), "largest_worker_process_mib": round(kids, 1)}


def audit(
    microdata: str | Path | None,
    out: str | Path,
    cfg: AuditConfig | None = None,
    tables: str | Path | None = None,
    resume: bool = False,
    console: Console | None = None,
    show_progress: bool = True,
    command: str = "",
    households: str | Path | None = None,
) -> AuditResult:
    """Run the whole audit and write ``OUT/report.html``, ``OUT/results/*.csv`` and
    ``OUT/summary.json``. See the module docstring for chunks, units of work and resuming.

    ``households`` (a housing-unit file describing the same households as ``microdata``) adds
    the households part (:mod:`tabrecon.audit.units`) and the report's section on it."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from ..report.html import write_audit_report
    from ..runner import execution

    cfg = cfg or AuditConfig()
    con = console or Console(stderr=True)
    out = Path(out)
    md_path = Path(microdata) if microdata is not None else None
    ts_path = Path(tables) if tables is not None else None
    if md_path is None and ts_path is None:
        raise TabreconError(
            "give microdata (a person file) or --tables (published tables), or both"
        )
    hh_path = Path(households) if households is not None else None
    for p in (md_path, ts_path, hh_path):
        if p is not None and not p.exists():
            raise TabreconError(f"{p}: file not found")
    if hh_path is not None:  # a bad companion file is refused before minutes of person stages
        check_households_file(hh_path, md_path)
    shapes = None
    if cfg.report.shapes:  # a wrong or unreadable shapes file is refused before any work too
        from ..shapes import read_shapes

        shapes = read_shapes(cfg.report.shapes)
    if cfg.run.scheduler:  # fail at once, not once per chunk, when the cluster is unreachable
        from ..runner import dask_client

        dask_client(cfg.run.scheduler)
    work = out / "work"
    if work.exists() and not resume:
        remove_tree(work)
    fp = _fingerprint(cfg, md_path, ts_path, hh_path)
    advice = "run without --resume (resume=False in Python) to start over, or choose another --out"
    check_or_record(work / "run.json", fp, str(work), advice, outputs=(work,))
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.toml", cfg.to_toml())
    t_start = time.perf_counter()
    log = StageLog()
    given = read_release(ts_path) if ts_path is not None else None
    if shapes is not None:
        from ..schema import county_persons
        from ..shapes import check_overlap

        if given is not None and "block" in given.grids:
            check_overlap(shapes, given.grids["block"].geoids, f"the tables {ts_path}")
        elif md_path is not None:
            check_overlap(shapes, county_persons(md_path)["county"].to_numpy(), str(md_path))
    if md_path is not None and given is not None:
        chunks = [Chunk(0, [], 0)]  # the given release is audited as one piece
    else:
        chunks = plan_chunks(md_path, cfg.run.chunk_persons)
    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[last]}"),
        console=con,
        disable=not show_progress,
        transient=False,
    )

    def progress(label: str, total: int) -> Callable[[dict], None]:
        task = prog.add_task(label, total=total, last="")

        def tick(st: dict) -> None:
            prog.update(task, advance=1, last=f"{st.get('unit', '')} {st.get('status', '')}")

        return tick

    per_chunk = 1 + len(cfg.reconstruct.levels) + int(cfg.certify.enabled)
    per_chunk += (1 + len(cfg.defenses.specs)) if md_path is not None else 0
    overall = prog.add_task("audit", total=per_chunk * len(chunks), last="")

    def on_stage(stage: str) -> None:
        prog.update(overall, advance=1, last=f"done: {stage}")

    agree_frames: dict[str, list[pl.DataFrame]] = {lv: [] for lv in cfg.reconstruct.levels}
    blocks_frames: list[pl.DataFrame] = []
    rates_frames: list[pl.DataFrame] = []
    hist = np.zeros((len(PRECISION_GRID), len(PREC_SOURCES)), dtype=np.int64)
    outcomes: dict[str, DefenseOutcome] = {}  # per defense, merged over chunks
    facts = dict.fromkeys(FACTS, 0)
    failures: list[str] = []
    tables_seen: set[str] = set()
    resolutions: dict[str, set[str]] = {}  # what agreement's binned pass compares on, per level
    attacker_reports: list[dict] = []
    claim_results: list[dict] = []  # per tract, every chunk's
    claim_shown: list[pl.DataFrame] = []
    singled_frames: list[pl.DataFrame] = []
    rich_level = (
        "block+tract" if "block+tract" in cfg.reconstruct.levels else cfg.reconstruct.levels[0]
    )
    chunk_errors: list[BaseException] = []
    with execution(cfg.run.scheduler, cfg.run.retries), prog:
        for ch in chunks:
            cr = ChunkRunner(cfg, ch, work, resume, log, progress, on_stage)
            nc = len(ch.counties)
            where = (
                f"{nc} count{'y' if nc == 1 else 'ies'}, {ch.persons:,} persons" if nc else "all"
            )
            prog.update(overall, description=f"audit {ch.name} ({where})")
            try:
                part = _run_chunk(cr, cfg, md_path, ts_path, given, rich_level, log)
            except MismatchError:
                raise
            except Exception as exc:  # this chunk is lost and reported; the others go on
                chunk_errors.append(exc)
                failures.append(f"{ch.name} ({where}): {type(exc).__name__}: {exc}")
                con.print(f"[red]{ch.name} failed:[/red] {exc}")
                continue
            for k, v in part.facts.items():
                facts[k] += v
            failures += part.failures
            tables_seen.update(part.tables_present)
            for lv, text in part.resolution.items():
                resolutions.setdefault(lv, set()).add(text)
            for lv, f in part.agree.items():
                agree_frames[lv].append(f)
            if part.blocks is not None and part.blocks.height:  # none when every tract failed
                blocks_frames.append(part.blocks)
            if part.rates is not None and part.hist is not None:
                rates_frames.append(part.rates)
                hist += part.hist
                attacker_reports.append(part.attacker)
            for o in part.defenses:
                outcomes[o.defense] = outcomes[o.defense].merge(o) if o.defense in outcomes else o
            claim_results += part.claims
            if part.claim_examples is not None and part.claim_examples.height:
                claim_shown.append(part.claim_examples)
            if part.singled is not None:
                singled_frames.append(part.singled)
        household: dict | None = None
        hframes: dict[str, pl.DataFrame] = {}
        if hh_path is not None:
            household, hframes = _households(hh_path, md_path, work, cfg, resume, progress, log)
            failures += household.get("failures", [])
            if "error" in household:
                con.print(f"[red]households failed:[/red] {household['error']}")
    if len(chunk_errors) == len(chunks):  # nothing to report on: the first error is the answer
        err0 = chunk_errors[0]
        raise (
            err0
            if isinstance(err0, TabreconError)
            else TabreconError(f"every chunk failed; first: {failures[0]}")
        )
    # ---- aggregate
    # --------------------------------------------------------------------------------
    t_agg = time.perf_counter()
    from ..attacks.certify import cumulative_solvar, solvar_table, zero_share_by_size

    res = out / "results"
    res.mkdir(exist_ok=True)
    frames: dict[str, pl.DataFrame] = {}
    for lv, fs in agree_frames.items():
        if fs:
            frames[f"agreement_{lv.replace('+', '_')}"] = _agree_table(fs)
    allb = pl.concat(blocks_frames) if blocks_frames else None
    if allb is not None:
        frames["solvar_cdf"] = solvar_table(allb)
        frames["solvar_zero_by_block_size"] = zero_share_by_size(allb)
        cum = cumulative_solvar(allb)
        write_parquet(allb, res / "solvar_blocks.parquet")
        frames["blocks"] = _block_figures(allb, singled_frames)
    if rates_frames:
        frames["reid_rates"] = pct_rates(pl.concat(rates_frames))
        frames["precision_cdf"] = pl.DataFrame(
            {
                "p_pct": 100 * PRECISION_GRID,
                **{
                    f"{s}_share_pct": 100.0 * hist[:, i] / hist[0, i]
                    if hist[0, i]
                    else np.full(len(PRECISION_GRID), np.nan)
                    for i, s in enumerate(PREC_SOURCES)
                },
            }
        )
    if outcomes:
        frames["defenses"] = outcome_frame(list(outcomes.values()))
        if allb is not None:
            t_front = time.perf_counter()
            front = frontier_at_budgets(
                frames["defenses"], allb["block_geoid"].to_numpy(), tables_seen
            )
            if front is not None:
                frames["frontier"] = front
                log.add("frontier", time.perf_counter() - t_front)
    claims_summary = None
    if cfg.certify.enabled and cfg.claims.enabled:
        from ..attacks.claims import ClaimsRun

        crun = ClaimsRun(claim_results, pl.DataFrame(), rich_level, cfg.claims.k_solutions)
        frames["claims_by_k"] = crun.by_k()
        if claim_shown:
            frames["claim_examples"] = pl.concat(claim_shown).head(EXAMPLE_CLAIMS)
        claims_summary = crun.summary()
        n = int(facts.get("persons", 0))
        claims_summary["persons"] = n
        claims_summary["persons_singled_out_pct"] = (
            100.0 * claims_summary["persons_singled_out"] / n if n else None
        )
    frames.update(hframes)
    for name, df in frames.items():
        write_csv(df, res / f"{name}.csv")
    log.add("aggregate", time.perf_counter() - t_agg)
    summary = _summary(
        cfg,
        frames,
        facts,
        allb,
        cum if allb is not None else None,
        chunks,
        failures,
        attacker_reports,
        md_path,
        ts_path,
    )
    from ..tables.persons import ALL_TABLES

    summary["tables_present"] = [t.name for t in ALL_TABLES if t.name in tables_seen]
    has_tract = any(t.level == "tract" for t in ALL_TABLES if t.name in tables_seen)
    if summary.get("certify", {}).get("level") == "block+tract" and not has_tract:
        # the release has no tract tables: what was certified is what the block tables determine
        summary["certify"]["level"] = "block"
    if claims_summary is not None:
        if summary.get("certify", {}).get("level") == "block":  # no tract tables (above)
            claims_summary["level"] = "block"
        summary["claims"] = claims_summary
    if household is not None and "error" not in household:
        summary["households"] = household
    summary["agreement_resolution"] = {
        lv: "; ".join(sorted(t for t in v if t)) for lv, v in resolutions.items()
    }
    summary["timings_s"] = {**log.seconds, "total": round(time.perf_counter() - t_start, 2)}
    # CPU per stage: this process's and what its units spent in worker processes, local or Dask
    # (the workers' own start-up and idle time is not in it)
    summary["core_s"] = dict(log.core)
    summary["resumed_stages"] = log.resumed
    summary["peak_memory"] = _peak_mb()
    summary["versions"] = _versions()
    summary["command"] = command
    maps = None
    if shapes is not None and "blocks" in frames:
        from ..report.maps import draw_maps

        t_map = time.perf_counter()
        summary["map"] = map_summary(shapes, frames["blocks"])
        try:
            maps = draw_maps(shapes, frames["blocks"], singled_out="claims" in summary)
        except Exception as exc:  # the audit's figures stand; the missing map is a failure
            summary.setdefault("failures", []).append(f"map: {type(exc).__name__}: {exc}")
        summary["timings_s"]["map"] = round(time.perf_counter() - t_map, 2)
    write_json(out / "summary.json", summary)
    report = write_audit_report(out, summary, frames, cfg, maps)
    return AuditResult(out, summary, report)


def _block_figures(blocks: pl.DataFrame, singled: list[pl.DataFrame]) -> pl.DataFrame:
    """Per certified block: residents, verdict, solution variability and persons singled out by
    verified claims (null where none were computed), with the maps' classes:
    ``results/blocks.csv``, what the report's maps draw."""
    from ..report.maps import block_classes

    s = (
        pl.concat(singled)
        if singled
        else pl.DataFrame(schema={"block_geoid": pl.String, "singled_out": pl.Int64})
    )
    return block_classes(
        blocks.select("block_geoid", "persons", "status", "solvar").join(
            s, on="block_geoid", how="left"
        )
    )


def map_summary(shapes, blocks: pl.DataFrame) -> dict:
    """What the maps drew: the shapes file, its blocks, the audit's blocks with a shape and the
    inhabited ones without (listed in the report: they are on no map)."""
    drawn = blocks["block_geoid"].is_in(shapes.geoid.tolist())
    return {
        "shapes": shapes.source,
        "shape_blocks": len(shapes),
        "blocks_drawn": int(drawn.sum()),
        "blocks_without_shape": int((~drawn & (blocks["persons"] > 0)).sum()),
        "residents_without_shape": int(blocks.filter(~drawn)["persons"].sum()),
    }


#: the frontier's budgets around each measured one, as powers of two (x1/8 .. x8)
FRONTIER_STEPS = (-3, -2, -1, 1, 2, 3)


def frontier_at_budgets(
    defenses: pl.DataFrame, blocks: np.ndarray, tables: set[str] | None = None
) -> pl.DataFrame | None:
    """The privacy-accuracy frontier at the budgets of the defenses that have one (TopDown):
    the exact expected error of the block tables answered by least squares from TopDown's queries
    at every level of the audited geography (dhc2023-like shares), joined to each defense's
    measured risk; None when no defense has a budget."""
    # the TopDown runs of one budget (dhc2020-production's rho adds the PL 94-171 run's, which
    # this frontier's strategy does not model)
    dhc = defenses.filter(pl.col("defense") != "dhc2020-production")
    measured = {float(r) for r in dhc["rho"].to_list() if r == r}
    if not measured:
        return None
    # a curve, not a point: each measured budget and six more around it (x1/8 .. x8), where
    # the expected error is exact and the measured risk is the defense's own at its budget
    budgets = sorted(measured | {r * 2.0**k for r in measured for k in FRONTIER_STEPS})
    from ..defenses.matrix import Budget, Strategy, Workload
    from ..defenses.topdown import dhc2023_like
    from ..metrics.frontier import frontier, join_tradeoff
    from ..metrics.matrix_error import hierarchy_factors
    from ..tables.persons import BLOCK_TABLES

    names = [t for t in BLOCK_TABLES if tables is None or t in tables] or list(BLOCK_TABLES)
    w = Workload.from_tables(names, level="block")
    h = hierarchy_factors(blocks, dhc2023_like(1.0).level_shares, "block")
    f = frontier(w, [Strategy.parse("topdown", w)], [Budget.zcdp(r) for r in budgets], hierarchy=h)
    return join_tradeoff(f, dhc)


def _fingerprint(
    cfg: AuditConfig, md_path: Path | None, ts_path: Path | None, hh_path: Path | None = None
) -> dict[str, str]:
    """What the audit's work/ depends on: the inputs' content and every setting that changes a
    result (not where units run: workers, scheduler, retries; not the report's presentation).
    Without a housing-unit file its settings do not count (earlier work stays resumable)."""
    conf = cfg.to_dict()
    conf.pop("report", None)
    if hh_path is None:
        conf.pop("households", None)
    conf["run"] = {
        k: v for k, v in conf["run"].items() if k not in ("workers", "scheduler", "retries")
    }
    extra = {"households": digest_path(hh_path)} if hh_path is not None else {}
    return fingerprint(
        microdata=digest_path(md_path) if md_path is not None else "none",
        tables=digest_path(ts_path) if ts_path is not None else "none",
        config=conf,
        **extra,
    )


def check_households_file(hh_path: Path, md_path: Path | None) -> None:
    """Read the housing-unit file of an audit and, with the person file, check that both describe
    the same households; raise naming the file, line and column of the first problem."""
    from ..records.households import check_households
    from ..schema import read_microdata
    from ..schema.catalog import HOUSING_UNITS
    from ..schema.spec import read_units

    units = read_units(hh_path, HOUSING_UNITS)
    if md_path is not None:
        check_households(read_microdata(md_path), units)


def _households(
    hh_path: Path,
    md_path: Path | None,
    work: Path,
    cfg: AuditConfig,
    resume: bool,
    progress: Callable[[str, int], Callable[[dict], None]],
    log: StageLog,
) -> tuple[dict, dict[str, pl.DataFrame]]:
    """The households stage of a person audit: its summary and frames, or ``{"error": ...}``
    (a bad housing-unit file, or one that disagrees with the person file, is reported and the
    audit exits non-zero; the person findings stand)."""
    from ..schema import read_microdata
    from ..schema.registry import population
    from .units import units_stage

    t0 = time.perf_counter()
    try:
        from ..records.households import check_households

        persons = read_microdata(md_path) if md_path is not None else None
        pop = population("households")  # the housing units of the person file's households
        same = None if persons is None else (lambda u: check_households(persons, u))
        tied = None
        if persons is not None and cfg.households.with_person_tables:
            from ..schema import person_units
            from ..tables.spec import tabulate_units

            tied = tabulate_units(person_units(persons, binned=True))
        summary, frames, _ = units_stage(pop, hh_path, work, cfg, resume, progress, same, tied=tied)
    except TabreconError as exc:
        return {"error": str(exc), "failures": [f"households: {exc}"]}, {}
    log.add("households", time.perf_counter() - t0)
    return summary, frames


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


def _run_chunk(
    cr: ChunkRunner, cfg: AuditConfig, md_path, ts_path, given, rich_level: str, log: StageLog
) -> ChunkResult:
    """Every stage of one chunk; returns its summable aggregates (nothing is merged until it is
    done)."""
    from ..schema import read_microdata

    ch = cr.chunk
    out = ChunkResult()
    facts = out.facts
    t0, c0 = time.perf_counter(), tree_cpu()
    md = None
    if md_path is not None:
        md = (
            read_microdata(md_path, counties=ch.counties)
            if ch.counties
            else read_microdata(md_path)
        )
        log.add("read", time.perf_counter() - t0, tree_cpu() - c0)
        if given is not None:
            check_same_geography(md, given, md_path, ts_path)
        facts["persons"] += len(md)
    ts, tinfo = cr.tabulate(md, given)
    for k in ("table_values", "identity_checks", "identity_violations", "tracts", "blocks"):
        facts[k] += tinfo[k]
    facts["inhabited_blocks"] += tinfo.get("inhabited_blocks", 0)
    out.tables_present = tinfo.get("tables_present", [])
    if md is None:
        facts["persons"] += int(pop.sum()) if (pop := ts.block_population()) is not None else 0
    recons = {}
    for lv in cfg.reconstruct.levels:
        recons[lv], rinfo = cr.reconstruct(ts, lv, md, cfg.certify.enabled and lv == rich_level)
        out.failures += [f"{ch.name} reconstruct {lv}: {f}" for f in rinfo.get("failures", [])]
        if md is not None:
            out.agree[lv] = pl.read_parquet(cr.dir / f"agree_{lv.replace('+', '_')}.parquet")
            out.resolution[lv] = rinfo.get("agree_resolution", "")
    blocks = None
    if cfg.certify.enabled:
        blocks, cinfo = cr.certify(rich_level)  # its failures are the reconstruction's
        out.blocks = blocks
    if blocks is not None and blocks.height and cfg.claims.enabled:  # no tract certified: none
        persons, clinfo = cr.claims(ts, recons[rich_level], blocks, rich_level)
        out.claims = clinfo.get("results", [])
        out.failures += [f"{ch.name} claims: {f}" for f in clinfo.get("failures", [])]
        out.claim_examples = claim_examples(persons)
        out.singled = persons.group_by("block_geoid").agg(
            pl.col("min_k").is_not_null().sum().cast(pl.Int64).alias("singled_out")
        )
    if md is None:
        from ..attacks.certify import uniqueness_flags

        if blocks is not None:
            fl = uniqueness_flags(recons[rich_level], blocks)
            facts["recon_records"] += fl.height
            facts["recon_bsab_unique"] += int((fl["bsab_unique"] == 1).sum())
            facts["recon_certified_unique"] += int(
                (fl["certified"] & (fl["bsab_unique"] == 1)).sum()
            )
        return out
    out.rates, rinfo = cr.reidentify(recons[rich_level], md, ts, blocks)
    out.hist = pl.read_parquet(cr.dir / "precision_hist.parquet").select(PREC_SOURCES).to_numpy()
    for k in ("recon_records", "recon_bsab_unique", "recon_certified_unique"):
        facts[k] += rinfo.get(k, 0)
    out.attacker = rinfo.get("attacker", {})
    for spec in cfg.defenses.specs:
        out.defenses.append(cr.defense(md, spec))
    return out


def _summary(
    cfg, frames, facts, allb, cum, chunks, failures, attacker_reports, md_path, ts_path
) -> dict:
    s: dict[str, Any] = {
        "input": {
            "microdata": str(md_path) if md_path else None,
            "tables": str(ts_path) if ts_path else None,
        },
        "chunks": [
            {"name": c.name, "counties": len(c.counties), "persons": c.persons} for c in chunks
        ],
        "config": cfg.to_dict(),
        **facts,
        "failures": failures,
    }
    for lv in cfg.reconstruct.levels:
        f = frames.get(f"agreement_{lv.replace('+', '_')}")
        if f is not None:
            r = f.row(0, named=True)
            s[f"agreement_{lv}"] = {
                "exact_pct": r["exact_pct"],
                "binned_pct": r["binned_pct"],
                "persons": r["persons"],
            }
    if allb is None and cfg.certify.enabled and facts.get("inhabited_blocks"):
        allb = pl.DataFrame(  # every tract failed: no block is certified, and the headline says so
            {"block_geoid": [], "persons": [], "proven": [], "solvar": [], "status": []},
            schema={
                "block_geoid": pl.String,
                "persons": pl.Int64,
                "proven": pl.Boolean,
                "solvar": pl.Float64,
                "status": pl.String,
            },
        )
    if allb is not None:
        inh = allb.filter(pl.col("persons") > 0)
        uniq = inh.filter(proven_unique(inh))
        # blocks of a tract that failed are not in ``allb``: they count as not proven unique
        inhabited = max(inh.height, int(facts.get("inhabited_blocks", 0)))
        s["certify"] = {
            "level": "block+tract"
            if "block+tract" in cfg.reconstruct.levels
            else cfg.reconstruct.levels[0],
            "inhabited_blocks": inhabited,
            "uncertified_blocks": inhabited - inh.height,
            "unique_blocks": uniq.height,
            "unique_blocks_pct": 100.0 * uniq.height / inhabited if inhabited else None,
            "unique_persons": int(uniq["persons"].sum()),
            "unique_persons_pct": 100.0 * uniq["persons"].sum() / inh["persons"].sum()
            if inh.height
            else None,
            "unproven_blocks": int((~inh["proven"]).sum()),
            "cumulative_solvar_pct": list(cum) if cum else None,
        }
    if "reid_rates" in frames:
        rt = frames["reid_rates"].filter(pl.col("bin") == "all")
        s["reidentification"] = {}
        for src in ("attack", "mdg", "prg", "truth", "rvr"):
            s["reidentification"][src] = {}
            for g in (
                "all",
                "modal",
                "nonmodal",
                "uniques",
                "certified_nonmodal",
                "certified_uniques",
            ):
                r = rt.filter((pl.col("group") == g) & (pl.col("source") == src))
                if r.height:
                    s["reidentification"][src][g] = {k: r[k][0] for k in RATE_COLUMNS}
        s["attacker"] = (
            attacker_reports[0]
            if len(attacker_reports) == 1
            else {
                "records": sum(a.get("records", 0) for a in attacker_reports),
                "chunks": len(attacker_reports),
            }
        )
    if "defenses" in frames:
        s["defenses"] = frames["defenses"].to_dicts()
    return s


def run_demo(
    out: str | Path,
    persons: int = 20_000,
    seed: int = 2010,
    cfg: AuditConfig | None = None,
    console: Console | None = None,
    show_progress: bool = True,
) -> AuditResult:
    """Synthesize a county (``out/synthetic_county.parquet``) and audit it: the whole pipeline and
    its HTML report (``out/report.html``); with the ``maps`` extra, made-up block shapes
    (``out/synthetic_blocks.geojson``) give the report its maps."""
    from ..records.synth import SynthConfig, synthesize

    con = console or Console()
    cfg = cfg or AuditConfig(run=RunConfig(seed=seed))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    md = synthesize(SynthConfig(persons=persons), seed=seed)
    src = out / "synthetic_county.parquet"
    write_microdata(md, src)
    con.print(
        f"synthesized {len(md):,} persons in {len(md.geoids):,} blocks "
        f"({time.perf_counter() - t0:.1f} s, seed {seed}) -> {src}"
    )
    from ..shapes import maps_available, synthetic_shapes

    if not cfg.report.shapes and maps_available():  # with the maps extra the demo shows maps
        shp = synthetic_shapes(np.asarray(md.geoids), out / "synthetic_blocks.geojson", seed)
        cfg = replace(cfg, report=replace(cfg.report, shapes=str(shp)))
        con.print(f"made-up block shapes for the report's maps (no real place) -> {shp}")
    return audit(
        src,
        out,
        cfg,
        console=con,
        show_progress=show_progress,
        command=f"tabrecon demo --out {out} --persons {persons} --seed {seed}",
    )


def audit_units(
    name: str,
    units_path: str | Path,
    out: str | Path,
    cfg: AuditConfig | None = None,
    resume: bool = False,
    console: Any = None,
    show_progress: bool = True,
    command: str = "",
    published: bool = False,
) -> AuditResult:
    """``tabrecon audit --schema NAME`` for a population on the generic engine (housing units,
    group quarters, ...): its Generate-then-Verify part alone, on a file of its records or
    (``published``) on its published tables alone; writes ``OUT/report.html``,
    ``OUT/results/<name>_*.csv`` and ``OUT/summary.json`` and returns an
    :class:`~tabrecon.audit.run.AuditResult`."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..report.html import write_units_report
    from ..runner import execution
    from ..schema.registry import population
    from .units import units_stage

    pop = population(name)
    cfg = cfg or AuditConfig()
    out = Path(out)
    units_path = Path(units_path)
    if not units_path.exists():
        raise TabreconError(f"{units_path}: file not found")
    work = out / "work"
    if work.exists() and not resume:
        remove_tree(work)
    conf = cfg.to_dict()
    fp = fingerprint(
        **{pop.name: digest_path(units_path)},
        published=published,
        config={
            "households": conf["households"],
            "seed": cfg.run.seed,
            "solver": conf["reconstruct"],
        },
    )
    advice = "run without --resume (resume=False in Python) to start over, or choose another --out"
    check_or_record(work / "run.json", fp, str(work), advice, outputs=(work,))
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.toml", cfg.to_toml())
    con = console or Console(stderr=True)
    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
        console=con,
        disable=not show_progress,
    )

    def progress(label: str, total: int) -> Callable[[dict], None]:
        task = prog.add_task(label, total=total, last="")
        return lambda st: prog.update(
            task, advance=1, last=f"{st.get('unit', '')} {st.get('status', '')}"
        )

    t0 = time.perf_counter()
    with execution(cfg.run.scheduler, cfg.run.retries), prog:
        summary, frames, _ = units_stage(
            pop, units_path, work, cfg, resume, progress, published=published
        )
    res = out / "results"
    res.mkdir(exist_ok=True)
    for stem, df in frames.items():
        write_csv(df, res / f"{stem}.csv")
    total = {
        "population": pop.name,
        pop.name: summary,
        "failures": summary["failures"],
        "timings_s": {pop.name: round(time.perf_counter() - t0, 2)},
        "peak_memory": _peak_mb(),
        "versions": _versions(),
        "command": command,
        "seed": cfg.run.seed,
    }
    write_json(out / "summary.json", total)
    report = write_units_report(out, total, frames, cfg)
    return AuditResult(out, total, report)
