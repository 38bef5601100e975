"""The stages of one audit chunk (:class:`ChunkRunner`): its records and tables read, tabulated,
reconstructed, certified, linked and defended, each stage written as it finishes and skipped
when a rerun finds it done, with its time and memory logged (:class:`StageLog`).
:mod:`tabrecon.audit.chunks` plans the chunks and runs them in a pipeline.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..defenses.defense import Defense
from ..defenses.mechanisms import Noise
from ..interrupts import Interrupted
from ..io import file_digest, write_json, write_parquet, write_text
from ..runner import RunOptions, notice, tree_cpu
from ..schema.registry import Population
from ..schema.spec import Units
from ..tables.publication import Publication
from ..vocab import Capability, Level, Stage, UnitStatus
from .config import AuditConfig
from .evaluate import DefenseOutcome, EvaluationPlan, evaluate_defense

#: what each of the audit's stages needs of its population beyond tables; a population runs
#: every stage whose needs it has (:func:`runs`)
NEEDS: dict[Stage, frozenset[Capability]] = {
    Stage.AGREEMENT: frozenset({Capability.LINKABLE}),
    Stage.REIDENTIFY: frozenset({Capability.LINKABLE}),
    Stage.DEFENSES: frozenset({Capability.DEFENDED, Capability.LINKABLE}),
    Stage.CLAIMS: frozenset({Capability.CLAIMS_BY_TRACT}),
    Stage.HOUSEHOLDS: frozenset({Capability.HOUSEHOLDS}),
}


def runs(pop: Population, stage: Stage) -> bool:
    """Whether the audit of ``pop`` runs ``stage`` (it has what the stage needs).

    >>> from tabrecon.schema.registry import population
    >>> [s.value for s in Stage if runs(population("households"), s)]
    []
    >>> runs(population("persons"), Stage.REIDENTIFY)
    True
    """
    return pop.can(*NEEDS[stage])


#: the precision thresholds at which a chunk counts its records (histograms summed over chunks)
PRECISION_GRID = np.linspace(0.0, 1.0, 101)
#: whose precision is counted: the attack, its baselines and the truth
PREC_SOURCES = ("attack", "mdg", "prg", "truth", "francis")


def draw_name(spec: str, draw: int) -> str:
    """How draw ``draw`` of a defense is named: the spec itself for the first (a run of one
    draw is named as before), ``spec#draw`` after it.

    >>> draw_name("dhc2023-like", 1), draw_name("dhc2023-like", 3)
    ('dhc2023-like', 'dhc2023-like#3')
    """
    return spec if draw == 1 else f"{spec}#{draw}"


def draws_of(spec: str, draws: int) -> int:
    """How many draws a defense takes: ``draws``, or one for ``none`` (nothing random)."""
    return 1 if spec == "none" else draws


def defense_units(cfg: AuditConfig) -> int:
    """The defense evaluations of one chunk: each spec times its draws."""
    return sum(draws_of(s, cfg.defenses.draws) for s in cfg.defenses.specs)


@dataclass
class Chunk:
    """Whole counties audited together: the unit the audit plans, runs and resumes."""

    index: int
    counties: list[str]
    persons: int  # 0 when unknown (tables-only input)

    @property
    def name(self) -> str:
        return f"chunk-{self.index:03d}"


def _hist(values: np.ndarray) -> np.ndarray:
    """How many values are >= each point of the precision grid (summable across chunks)."""
    v = np.sort(np.asarray(values, dtype=float))
    return v.size - np.searchsorted(v, PRECISION_GRID - 1e-12, side="left")


def kept_stages(work: Path, total: int, under_way: Interrupted | None = None) -> Interrupted:
    """What an interrupted audit keeps, read back from ``work``: each finished stage (its
    ``<stage>.done.json``, named as a resumed run names it: ``chunk-0/recon_block``) of
    ``total``, and of the stage under way (``under_way``, the runner's report) the units it
    kept, which a resumed run goes on from."""
    done = sorted(
        f"{p.parent.name}/{p.name.removesuffix('.done.json')}"
        for p in work.glob("chunk-*/*.done.json")
    )
    detail = f" ({', '.join(done[:8])}{' ...' if len(done) > 8 else ''})" if done else ""
    if under_way is not None:
        of = f" of {under_way.total}" if under_way.total is not None else ""
        detail += (
            f"; of the stage under way, {under_way.kept}{of} units finished and are kept"
            if under_way.kept
            else "; of the stage under way, no unit had finished"
        )
    return Interrupted(len(done), total, str(work), "stages", detail=detail)


@contextmanager
def stages_said(work: Path, total: int) -> Iterator[None]:
    """An interrupt of a stage's units (the runner's report: "0 of 28 units finished") told
    as the audit's: the stages kept, then the units of the stage under way."""
    try:
        yield
    except Interrupted as exc:
        if exc.what == "stages":
            raise
        raise kept_stages(work, total, exc) from None


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
        *,
        pop: Population,
    ) -> None:
        self.cfg, self.chunk, self.dir, self.resume = cfg, chunk, work / chunk.name, resume
        #: the population audited
        self.pop = pop
        #: whether its records are linked to an attacker's data: the stages of agreement,
        #: reidentification and the defenses are theirs
        self.linked = runs(self.pop, Stage.REIDENTIFY)
        #: how its counts are published (a declared release rounds or withholds them)
        self.publication = Publication.parse(self.pop.publication)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log, self.progress, self.on_stage = log, progress, on_stage
        self.seed = cfg.run.seed + 1_000_003 * chunk.index
        self._cpu0, self._lent = 0.0, 0.0
        #: reidentification's truth side made ahead, with its wall and CPU seconds
        self._ahead: tuple[Any, float, float] | None = None

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
        self._lent = 0.0  # CPU seconds of another stage's work done inside this one
        return time.perf_counter()

    def mark(
        self,
        stage: str,
        t0: float,
        info: dict,
        *outputs: Path,
        spent: tuple[float, float] | None = None,
    ) -> dict:
        """The stage is done: its marker, with its timings and the checksum of each of its
        ``outputs`` (checked by :meth:`intact` before a resumed run reuses them), written last.
        ``spent``: the stage's (wall, CPU) seconds when it did not run in one stretch (its
        tables finished while the workers reconstruct)."""
        if spent is not None:
            sec, core = spent
        else:
            sec = time.perf_counter() - t0
            core = tree_cpu() - self._cpu0 - self._lent
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
    def tabulate(self, truth: Units | None, given=None):
        """The chunk's tables (``given``, or the tables its population publishes of ``truth``:
        persons the 34 tables of Abowd et al.), and what finishes the stage (its identity
        checks and its marker; None when resumed), which the caller runs while the workers
        reconstruct."""
        from ..tables.publishing import publish_counts
        from ..tables.spec import tabulate
        from ..tables.tableset import TableSet

        # the tables are made again on resume, never written and read back: tabulating a chunk's
        # records is cheaper than reading its long table (1,000,096 persons: 0.5 against 4.6 CPU
        # s, and 2.8 to write it), and the run's fingerprint holds its records and options
        finished = self.done("tabulate")
        t0, c0 = time.perf_counter(), tree_cpu()
        if given is not None:
            ts = given
        else:
            assert truth is not None  # records or tables: the audit has one of them
            pop = self.pop
            ts = tabulate(truth, pop.select("all") if pop.select is not None else None)
            if not self.publication.exact:  # published as its release publishes its counts
                long = publish_counts(ts.to_frame(), pop, self.publication, self.seed)[0]
                ts = TableSet.from_long(long, pop, source=ts.source)
        if finished is not None:
            self.skip("tabulate")
            return ts, None
        made = (time.perf_counter() - t0, tree_cpu() - c0)
        return ts, functools.partial(self._finish_tables, ts, made)

    def _finish_tables(self, ts, made: tuple[float, float]) -> dict:
        from ..tables.consistency import check_release

        t0, c0 = time.perf_counter(), tree_cpu()
        rep = check_release(ts, self.pop)
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
        wall, cpu = time.perf_counter() - t0, tree_cpu() - c0
        self._lent += cpu  # spent inside the stage running now, not by it
        return self.mark("tabulate", t0, info, spent=(made[0] + wall, made[1] + cpu))

    def reconstruct(
        self, ts, level: str, truth: Any = None, certify: bool = False, meanwhile=None
    ) -> tuple[Units, dict]:
        """The population's records from the chunk's tables at ``level``
        (:func:`tabrecon.engine.release.reconstruct_release`, uniqueness asked at the
        population's resolution: persons by agebin38); with ``certify`` each block's verdict
        (and, as configured, its distance) in the same program, kept beside the records for the
        certify stage. ``truth``: the chunk's person records, which the reconstruction is
        matched against (persons only: :func:`tabrecon.metrics.agreement.agree`).
        ``meanwhile``: work of this process run while the tracts are solved (not when the
        stage is resumed: the caller then runs it)."""
        from ..engine.reconstruct import ReconstructOptions
        from ..engine.release import reconstruct_release
        from ..schema.spec import read_units, write_units

        stage = f"reconstruct:{level}"
        path = self.dir / f"recon_{level.replace('+', '_')}.parquet"
        made = self.done(stage) or {}
        schema = self.pop.schema
        # records made without the verdicts this run needs are made again, with them
        if (not certify or "verdicts.parquet" in made.get("outputs", {})) and (
            hit := self.resumed(stage, path, lambda p: read_units(p, schema))
        ) is not None:
            return hit
        t0 = self.start()
        tick = self.progress(f"{self.chunk.name} reconstruct {level}", len(ts.tracts()))
        c = self.cfg.certify
        run = reconstruct_release(
            ts,
            self.pop,
            ReconstructOptions(
                level=Level(level),
                solver=self.opts(),
                distance=certify and c.distance,
                distance_time_limit=c.distance_time_limit or None,
                unique_on=self.pop.unique_on,
                check_unique=certify,
                publication=self.publication,
            ),
            run=RunOptions(
                workers=self.cfg.run.workers, out=path, resume=self.resume, progress=tick
            ),
            meanwhile=meanwhile,
        )
        records = run.units
        records.source = f"reconstruction ({level})"
        failed = run.failed
        info = {
            "records": len(records),
            "failed_tracts": [r["unit"] for r in failed],
            "failures": [
                f"tract {r['unit']}: {r['status']} -- {r.get('message', '')}".rstrip(" -")
                for r in failed
            ],
            "notes": list(run.notes),
        }
        for note in run.notes:  # a table left out, a level answered with another: said now
            notice(f"{self.chunk.name} reconstruct {level}: {note}")
        write_units(records, path)
        outputs = [path]
        if certify:  # the verdicts of the blocks solved (a failed tract's are its failure)
            outputs.append(write_parquet(run.verdicts(solved=True), self.dir / "verdicts.parquet"))
        if truth is not None and self.linked:
            from ..metrics.agreement import agree
            from ..schema import person_records

            a = agree(person_records(records), truth=truth)
            info["agree_resolution"] = a.resolution
            outputs.append(
                write_parquet(
                    a.by_bin.select("bin", "blocks", "persons", "exact", "binned"),
                    self.dir / f"agree_{level.replace('+', '_')}.parquet",
                )
            )
        return records, self.mark(stage, t0, info, *outputs)

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

    def claims(self, ts, recon: Units, blocks: pl.DataFrame, level: str):
        """Verified claims about the records of every block
        (:func:`tabrecon.attacks.claims.certified.certified_claims`), from the tables alone: each
        tract's figures in the marker, each reconstructed record's first singleton claim in
        ``claims_persons.parquet``."""
        from ..attacks.claims.certified import CertifiedClaimsOptions, certified_claims
        from ..engine.release import plan_release

        stage = "claims"
        path = self.dir / "claims_persons.parquet"
        if (hit := self.resumed(stage, path, pl.read_parquet)) is not None:
            return hit
        t0 = self.start()
        # only the blocks certification answered for: a tract it failed on has no claims (it
        # is reported as failed already), and the others go on
        certified = np.isin(recon.block_geoid.astype(str), blocks["block_geoid"].to_numpy())
        if not certified.all():
            recon = recon.take(np.flatnonzero(certified))
        tick = self.progress(f"{self.chunk.name} claims", len(ts.tracts()))
        run = certified_claims(
            plan_release(ts, self.pop, level).split,
            self.pop,
            recon,
            blocks,
            CertifiedClaimsOptions(
                level=level,
                k_solutions=self.cfg.claims.k_solutions,
                seed=self.seed,
                solver=self.opts(),
            ),
            run=RunOptions(
                workers=self.cfg.run.workers, out=self.dir, resume=self.resume, progress=tick
            ),
        )
        write_parquet(run.persons, path)
        info = {
            "results": [r for r in run.results if r["status"] == UnitStatus.OK],
            "failures": [
                f"tract {f['unit']}: {f['status']} -- {f.get('message', '')}".rstrip(" -")
                for f in run.failed
            ],
        }
        return run.persons, self.mark(stage, t0, info, path)

    def prepare_reidentify(self, md, ts) -> None:
        """Reidentification's truth side (:func:`tabrecon.attacks.reidentify.truth_side`: the
        attacker's data, the baselines, the truth's own linkage), made ahead while the workers
        reconstruct; kept with its time for :meth:`reidentify`. Not when the stage is already
        done; a failure here is left for the stage to meet and report in its place."""
        from ..attacks.reidentify import truth_side

        if self.done("reidentify") is not None:
            return
        t0, c0 = time.perf_counter(), tree_cpu()
        r = self.cfg.reidentify
        try:
            made = truth_side(
                md, r.attacker, ts, seed=self.seed, francis_threshold=r.francis_threshold
            )
        except Exception:  # (made again by the stage, which raises it there)
            return
        cpu = tree_cpu() - c0
        self._lent += cpu  # spent inside the stage running now, not by it
        self._ahead = (made, time.perf_counter() - t0, cpu)

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
        ahead, self._ahead = self._ahead, None
        res = reidentify(
            recon,
            md,
            r.attacker,
            tables=ts,
            cert_blocks=blocks,
            seed=self.seed,
            francis_threshold=r.francis_threshold,
            prepared=ahead[0] if ahead else None,
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
        spent = None
        if ahead:  # its truth side was made while the workers reconstructed: counted here
            spent = (time.perf_counter() - t0 + ahead[1], tree_cpu() - self._cpu0 + ahead[2])
        return rates, self.mark(stage, t0, info, path, hist_path, spent=spent)

    def defense(self, md, spec: str, draw: int = 1) -> DefenseOutcome:
        """Protect this chunk with ``spec`` and attack the release (:func:`evaluate_defense`);
        the protected release and the attack's parts are kept under ``def_<spec>/``. Draw
        ``draw`` of several (``[defenses] draws``) is seeded ``seed + draw - 1`` and named
        ``spec#draw`` from the second on (:func:`draw_name`)."""
        name_of = draw_name(spec, draw)
        stage = f"defense:{name_of}"
        folder = self.dir / f"def_{name_of.replace('=', '').replace('.', 'p').replace('#', '_')}"
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
            Defense.parse(spec).with_noise(Noise(self.cfg.defenses.noise)),
            EvaluationPlan.from_config(self.cfg),
            seed=self.seed + draw - 1,
            work=folder,
            resume=self.resume,
            progress=progress,
        )
        outcome.defense = name_of
        write_text(path, outcome.to_json())
        self.mark(stage, t0, {"defense": spec}, path)
        return outcome
