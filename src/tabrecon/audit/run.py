"""The one-command disclosure audit: publish -> reconstruct -> certify -> link -> defend -> compare.

Input is confidential microdata (a person file, or another registered population's records),
published tables (a long table file or an SF1 summary-file folder), or, for persons, both (the
tables are then the release and the microdata the truth, and their geographies must match). The
work is done chunk by chunk: whole counties of a person file are batched up to
``run.chunk_persons`` persons and each chunk is read by itself (streamed from the file), so memory
follows the chunks in hand (two at most), never the whole state or nation (another population's
file is one chunk). Chunks are pipelined (:func:`tabrecon.audit.chunks.run_chunks`): while one
chunk's units run, this process reads and tabulates the next and reidentifies the one before.
Inside a chunk the units of work are tracts, run in this process, a process pool or on a Dask
cluster (:func:`tabrecon.runner.execution`).

Every stage of every chunk writes its result under ``OUT/work/chunk-NNN/`` as it completes and then
a ``<stage>.done.json`` marker (written last, by rename; the tables alone are not written but made
again, which is cheaper than reading them back); with ``resume`` a rerun skips finished stages,
and inside an unfinished reconstruction or certification it skips finished tracts. Only
aggregates leave a chunk -- counts by group, block-size bin and race source, per-block solution
variability, precision histograms -- and they are summed exactly across chunks, so the audit of a
one-chunk input gives the numbers of the individual commands.
"""

from __future__ import annotations

import platform
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console

from ..errors import InputError, TabreconError
from ..interrupts import keeps
from ..io import remove_tree, write_csv, write_json, write_parquet, write_text
from ..metrics.calibration import release_truth_rates, truth_rate_summary
from ..provenance import check_or_record, digest_path, fingerprint
from ..runner import dask_client, execution, units_peak_mib
from ..schema import county_persons, person_units, read_microdata, write_microdata
from ..schema.registry import Population
from ..tables.publication import Publication
from ..tables.tableset import TableSet
from ..vocab import Geo, Level, Release, Stage
from .aggregate import agree_table, audit_summary, defenses_by_name, pct_rates
from .chunks import EXAMPLE_CLAIMS, FACTS, plan_chunks, read_release, run_chunks
from .config import AuditConfig, ConfigError, DefensesConfig, RunConfig
from .evaluate import DefenseOutcome, outcome_frame
from .stages import (
    PREC_SOURCES,
    PRECISION_GRID,
    Chunk,
    ChunkRunner,
    StageLog,
    defense_units,
    kept_stages,
    runs,
    stages_said,
)


def _adding_up(stages: dict[str, float], total: float) -> dict[str, float]:
    """Stage seconds that add up: each stage, then what no stage timed (starting, planning,
    writing the report; 0 where chunks ran pipelined and their stages overlapped), then the
    run's total, measured last.

    >>> _adding_up({"read": 1.0, "total": 2.0, "map": 0.5}, 2.5)
    {'read': 1.0, 'map': 0.5, 'other': 1.0, 'total': 2.5}
    """
    rows = {k: v for k, v in stages.items() if k != "total"}
    rows["other"] = round(max(total - sum(rows.values()), 0.0), 2)
    rows["total"] = round(total, 2)
    return rows


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
        for lv in Level:
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
        name = s.get("gtv")  # the population attacked by Generate-then-Verify, if any
        if name and (h := s.get(name)):
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
        for d in defenses_by_name(s.get("defenses", [])):
            draws = f" (median of {d['draws']} draws)" if d["draws"] > 1 else ""
            rows.append(
                [
                    f"{d['defense']}{draws}: nonmodal attack / PRG, block accuracy (1 - TVD)",
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
    population: str | None = None,
) -> AuditResult:
    """Run the whole audit and write ``OUT/report.html``, ``OUT/results/*.csv`` and
    ``OUT/summary.json``. See the module docstring for chunks, units of work and resuming.

    ``population``: what ``microdata``'s records are, a registered population's name or a
    declaration file (:func:`tabrecon.tables.declaration.population`; persons when None).
    Every population's records (or its published tables) go through the same stages --
    tabulate, reconstruct, certify, verified claims -- and person records also through
    agreement, reidentification and the defenses; another population's audit adds
    Generate-then-Verify on its median blocks (:mod:`tabrecon.audit.units`), on its records
    or, without them, on its published tables. ``households`` (a housing-unit file describing
    the same households as a person file) adds that part to a person audit."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from ..report.html import write_audit_report
    from ..tables.declaration import population as population_of

    # where the user's choice enters: a name or a declaration file, resolved once, passed down
    pop = population_of(population if population is not None else "persons")
    linked = runs(pop, Stage.REIDENTIFY)
    cfg = _effective(cfg or AuditConfig(), pop)
    con = console or Console(stderr=True)
    out = Path(out)
    md_path = Path(microdata) if microdata is not None else None
    ts_path = Path(tables) if tables is not None else None
    if md_path is None and ts_path is None:
        raise TabreconError(
            f"give microdata (a file of {pop.noun}) or --tables (published tables)"
            + (", or both" if linked else "")
        )
    if not linked and md_path is not None and ts_path is not None:
        raise TabreconError(
            f"--schema {pop.name} audits one file: its {pop.noun} as MICRODATA, or their "
            "published tables as --tables (not both)"
        )
    if households is not None and not runs(pop, Stage.HOUSEHOLDS):
        raise TabreconError(
            f"--households: a housing-unit file describes person records' households, not "
            f"{pop.noun}'s (--schema {pop.name}); audit it with --schema households"
        )
    hh_path = Path(households) if households is not None else None
    for p in (md_path, ts_path, hh_path):
        if p is not None and not p.exists():
            raise TabreconError(f"{p}: file not found")
    if hh_path is not None:  # a bad companion file is refused before minutes of person stages
        check_households_file(hh_path, md_path)
    shapes = _shapes(cfg, pop)  # a wrong or unreadable file refused before any work too
    # so is a calibration of another release's claims
    truth_rate = release_truth_rates(cfg.report.calibration, pop.schema.release)
    if cfg.run.scheduler:  # fail at once, not once per chunk, when the cluster is unreachable
        dask_client(cfg.run.scheduler)
    t_start = time.perf_counter()
    log = StageLog()
    # the inputs are read and checked before OUT is touched: a refused input leaves an earlier
    # run's work as it was (no --resume: it would be removed only to start this run) and records
    # no fingerprint that would refuse the next run's --resume
    given = read_release(ts_path, pop) if ts_path is not None else None
    if shapes is not None:
        _check_shapes_cover(shapes, given, ts_path=ts_path, md_path=md_path, pop=pop)
    if md_path is not None and given is not None:
        chunks = [Chunk(0, [], 0)]  # the given release is audited as one piece
    else:
        chunks = plan_chunks(md_path, cfg.run.chunk_persons, pop=pop)
    work = out / "work"
    if work.exists() and not resume:
        remove_tree(work)
    fp = _fingerprint(cfg, md_path, ts_path, hh_path, pop)
    advice = "run without --resume (resume=False in Python) to start over, or choose another --out"
    check_or_record(work / "run.json", fp, str(work), advice, outputs=(work,))
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.toml", cfg.to_toml())
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
    per_chunk += int(cfg.certify.enabled and cfg.claims.enabled)
    per_chunk += int(md_path is not None and linked)  # reidentification
    per_chunk += defense_units(cfg) if md_path is not None and runs(pop, Stage.DEFENSES) else 0
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
    notes: list[str] = []  # what a run did other than asked (a table left out), kept for the report
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
    stages_total = per_chunk * len(chunks)
    keeps(lambda: kept_stages(work, stages_total))  # an interrupt between stages says them
    with execution(cfg.run.scheduler, cfg.run.retries), prog, stages_said(work, stages_total):

        def runner(ch: Chunk) -> ChunkRunner:
            return ChunkRunner(cfg, ch, work, resume, log, progress, on_stage, pop=pop)

        def where(ch: Chunk) -> str:
            nc = len(ch.counties)
            if not nc:
                return "all"
            return f"{nc} count{'y' if nc == 1 else 'ies'}, {ch.persons:,} {pop.noun}"

        def turn(ch: Chunk) -> None:
            prog.update(overall, description=f"audit {ch.name} ({where(ch)})")

        for ch, part in run_chunks(
            chunks, runner, cfg, md_path, ts_path, given, rich_level, log, on_turn=turn
        ):
            if isinstance(part, Exception):  # this chunk is lost and reported; the others go on
                chunk_errors.append(part)
                failures.append(f"{ch.name} ({where(ch)}): {type(part).__name__}: {part}")
                con.print(f"[red]{ch.name} failed:[/red] {part}")
                continue
            for k, v in part.facts.items():
                facts[k] += v
            failures += part.failures
            notes += part.notes
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
        gtv = None  # the population attacked by Generate-then-Verify on median blocks
        if hh_path is not None:  # the housing units of the person file's households
            gtv = "households"
            household, hframes = _gtv(
                population_of(gtv), hh_path, False, work, cfg, resume, progress, log, md_path
            )
        elif not linked:
            gtv = pop.name
            source = md_path if md_path is not None else ts_path
            assert source is not None  # one of the two, checked above
            household, hframes = _gtv(
                pop, source, md_path is None, work, cfg, resume, progress, log
            )
        if household is not None:
            failures += household.get("failures", [])
            if "error" in household:
                con.print(f"[red]{gtv} failed:[/red] {household['error']}")
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
            frames[f"agreement_{lv.replace('+', '_')}"] = agree_table(fs)
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
    if cfg.certify.enabled and cfg.claims.enabled and Publication.parse(pop.publication).exact:
        from ..attacks.claims.certified import CertifiedClaimsRun

        crun = CertifiedClaimsRun(claim_results, pl.DataFrame(), rich_level, cfg.claims.k_solutions)
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
    if truth_rate is not None:
        frames["claims_truth_rate"] = truth_rate
    for name, df in frames.items():
        write_csv(df, res / f"{name}.csv")
    # the frontier is its own row: aggregate's is the rest of its time (the rows add up)
    log.add("aggregate", time.perf_counter() - t_agg - log.seconds.get("frontier", 0.0))
    summary = audit_summary(
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
    summary["notes"] = notes
    declared = pop.tables()
    summary["tables_present"] = [t.name for t in declared if t.name in tables_seen]
    has_tract = any(t.level == Geo.TRACT for t in declared if t.name in tables_seen)
    if summary.get("certify", {}).get("level") == Level.BLOCK_TRACT and not has_tract:
        # the release has no tract tables: what was certified is what the block tables determine
        summary["certify"]["level"] = "block"
    if claims_summary is not None:
        if summary.get("certify", {}).get("level") == Level.BLOCK:  # no tract tables (above)
            claims_summary["level"] = "block"
        summary["claims"] = claims_summary
    summary["population"], summary["noun"] = pop.name, pop.noun
    summary["release"] = str(pop.schema.release)
    summary["calibration"] = truth_rate_summary(truth_rate, cfg.report.calibration)
    summary["geography"] = pop.schema.geography
    summary["record_columns"] = [a.name for a in pop.schema.attributes]
    if household is not None and "error" not in household:
        summary["gtv"] = gtv
        summary[str(gtv)] = household
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
        summary["map"] = {**map_summary(shapes, frames["blocks"]), "noun": pop.block_noun}
        try:
            maps = draw_maps(
                shapes, frames["blocks"], singled_out="claims" in summary, noun=pop.block_noun
            )
        except Exception as exc:  # the audit's figures stand; the missing map is a failure
            summary.setdefault("failures", []).append(f"map: {type(exc).__name__}: {exc}")
        summary["timings_s"]["map"] = round(time.perf_counter() - t_map, 2)
    summary["timings_s"] = _adding_up(summary["timings_s"], time.perf_counter() - t_start)
    write_json(out / "summary.json", summary, strict=True)  # for any JSON parser
    report = write_audit_report(out, summary, frames, cfg, maps)
    return AuditResult(out, summary, report)


def _check_shapes_cover(
    shapes: Any,
    given: TableSet | None,
    *,
    ts_path: Path | None,
    md_path: Path | None,
    pop: Population,
) -> None:
    """Refuse shapes of another county than the tables' blocks or the records' county."""
    from ..shapes import check_overlap

    if given is not None and "block" in given.grids:
        check_overlap(shapes, given.grids["block"].geoids, f"the tables {ts_path}")
    elif md_path is not None:
        check_overlap(
            shapes, county_persons(md_path, pop.schema)["county"].to_numpy(), str(md_path)
        )


def _shapes(cfg: AuditConfig, pop: Population):
    """The county's block shapes the report maps (``[report] shapes``), None without; refused
    for a population placed by another geography than census blocks (a school has none)."""
    if not cfg.report.shapes:
        return None
    if pop.schema.geography != Geo.BLOCK:
        raise TabreconError(
            f"--shapes draws census blocks; {pop.name}'s records are placed by "
            f"{pop.schema.geography} (its geography), which has no block shapes"
        )
    from ..shapes import read_shapes

    shapes = read_shapes(cfg.report.shapes)
    if shapes.key == "GEOID10" and pop.schema.release is Release.DHC_2020:  # blocks renumbered
        raise InputError(
            "the shapes are 2010 blocks (GEOID10), the tables the 2020 DHC's, published for the "
            "2020 blocks: draw them on the 2020 shapes (tabrecon download --shapes --year 2020, "
            "tl_2020_SSCCC_tabblock20)",
            path=str(cfg.report.shapes),
        )
    return shapes


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
    cfg: AuditConfig,
    md_path: Path | None,
    ts_path: Path | None,
    hh_path: Path | None = None,
    pop: Population | None = None,
) -> dict[str, str]:
    """What the audit's work/ depends on: the inputs' content, the population audited and every
    setting that changes a result (not where units run: workers, scheduler, retries; not the
    report's presentation). Without Generate-then-Verify (a person audit without a housing-unit
    file) its settings do not count (earlier work stays resumable)."""
    conf = cfg.to_dict()
    conf.pop("report", None)
    linked = pop is None or runs(pop, Stage.REIDENTIFY)
    if hh_path is None and linked:
        conf.pop("households", None)
    conf["run"] = {
        k: v for k, v in conf["run"].items() if k not in ("workers", "scheduler", "retries")
    }
    extra = {"households": digest_path(hh_path)} if hh_path is not None else {}
    if pop is not None and pop.schema.release != Release.SF1_2010:  # never mixed with SF1's
        extra["release"] = str(pop.schema.release)
    if not linked:  # (absent for persons: their earlier work stays resumable)
        assert pop is not None
        extra["population"] = pop.name
        if pop.source:  # a declaration file: what it declares
            extra["declaration"] = digest_path(Path(pop.source))
    return fingerprint(
        microdata=digest_path(md_path) if md_path is not None else "none",
        tables=digest_path(ts_path) if ts_path is not None else "none",
        config=conf,
        **extra,
    )


def _effective(cfg: AuditConfig, pop: Population) -> AuditConfig:
    """The configuration as it applies to ``pop``: another population than persons is
    reconstructed once, at the richer level asked that its tables have (a release without tract
    tables at block); its verified claims are Generate-then-Verify's (``[households]``: on
    the sampled median blocks, or every block) rather than every tract's claims from its
    certification (a housing unit's ten columns give so many candidate claims that one tract
    of 70 blocks ran for over ten minutes). A population the defenses do not take (any but
    persons, and persons in another release than SF1 2010) is not defended: asked for
    explicitly, they are refused."""
    if not runs(pop, Stage.DEFENSES):
        if cfg.defenses.specs and cfg.defenses.specs != DefensesConfig().specs:
            raise ConfigError(
                f"defenses.specs: the defenses take person records of SF1 2010's tables, not "
                f"{pop.noun} of {pop.schema.release.label} (--schema {pop.name}); leave "
                "[defenses] out"
            )
        cfg = replace(cfg, defenses=replace(cfg.defenses, specs=()))
    if runs(pop, Stage.CLAIMS):  # persons, in any release: every level, claims by tract
        return cfg
    rich = Level.BLOCK_TRACT if Level.BLOCK_TRACT in cfg.reconstruct.levels else Level.BLOCK
    level = str(rich if pop.default_level == Level.BLOCK_TRACT else Level.BLOCK)
    return replace(
        cfg,
        reconstruct=replace(cfg.reconstruct, levels=(level,)),
        claims=replace(cfg.claims, enabled=False),
        defenses=replace(cfg.defenses, specs=()),
    )


def _gtv(
    pop: Population,
    path: Path,
    published: bool,
    work: Path,
    cfg: AuditConfig,
    resume: bool,
    progress: Callable[[str, int], Callable[[dict], None]],
    log: StageLog,
    persons: Path | None = None,
) -> tuple[dict, dict[str, pl.DataFrame]]:
    """Generate-then-Verify on ``pop``'s median blocks (:func:`tabrecon.audit.units
    .units_stage`), from its records or (``published``) its published tables: its summary and
    frames, or ``{"error": ...}`` (the figures of the other stages stand; the audit exits
    non-zero). ``persons``: the person file of a person audit whose housing units ``path``
    holds: the two are checked to describe the same households and, as configured, every claim
    is verified given the person tables of the same blocks."""
    from .units import units_stage

    t0 = time.perf_counter()
    try:
        same, tied = None, None
        if persons is not None:
            from ..records.households import check_households
            from ..tables.spec import tabulate_units

            md = read_microdata(persons)
            same = lambda u: check_households(md, u)  # noqa: E731
            if cfg.households.with_person_tables:
                tied = tabulate_units(person_units(md, binned=True))
        summary, frames, _ = units_stage(
            pop, path, work, cfg, resume, progress, same, published=published, tied=tied
        )
    except TabreconError as exc:
        return {"error": str(exc), "failures": [f"{pop.name}: {exc}"]}, {}
    log.add(pop.name, time.perf_counter() - t0)
    return summary, frames


def check_households_file(hh_path: Path, md_path: Path | None) -> None:
    """Read the housing-unit file of an audit and, with the person file, check that both describe
    the same households; raise naming the file, line and column of the first problem."""
    from ..records.households import check_households
    from ..schema.catalog import HOUSING_UNITS
    from ..schema.spec import read_units

    units = read_units(hh_path, HOUSING_UNITS)
    if md_path is not None:
        check_households(read_microdata(md_path), units)


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
