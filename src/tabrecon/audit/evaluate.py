"""One evaluation path for a defense: protect -> publish -> attack -> measure, as summable counts.

:func:`evaluate_defense` is what ``tabrecon tradeoff`` runs for each defense and what the audit
runs for each defense in each chunk; its :class:`DefenseOutcome` holds only counts and sums, so
the outcomes of chunks :meth:`~DefenseOutcome.merge` exactly, and only
:meth:`~DefenseOutcome.to_row` names the result columns. Both commands therefore report the same
numbers for the same input, seed, defenses and :class:`EvaluationPlan`.

>>> import tabrecon as tr
>>> truth = tr.synthesize(tr.SynthConfig(persons=300), seed=1)
>>> row = evaluate_defense(truth, tr.Defense.parse("swap-lo"), seed=1).to_row()
>>> row["defense"], 0 <= row["attack_all_precision"] <= 100
('swap-lo', True)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ..attacks.certify import certified_inhabited
from ..attacks.noisy import reconstruct_from_measurements
from ..attacks.reidentify import GROUPS, reidentify
from ..attacks.release import reconstruct
from ..defenses.defense import Defense, Protected
from ..engine.solvers import SolverOptions
from ..geo import LEVELS
from ..io import remove_file, write_parquet, write_text
from ..metrics.accuracy import block_accuracy, block_cell_sq_error, l1_by_level
from ..metrics.agreement import agree
from ..runner import RunOptions
from ..schema import BLOCK_SIZE_LABELS, read_microdata, write_microdata
from ..tables.persons import tabulate

#: The groups and sources a defense row reports precision for.
ROW_GROUPS = ("all", "modal", "nonmodal", "certified_uniques")
ROW_SOURCES = ("attack", "mdg", "prg")


@dataclass(frozen=True)
class EvaluationPlan:
    """How a protected release is attacked: the reconstruction level and solver, the attacker,
    certification, and whether TopDown's noisy measurements are attacked themselves."""

    level: str = "block+tract"
    solver: SolverOptions = field(default_factory=lambda: SolverOptions(time_limit=300.0))
    attacker: str = "perfect"
    francis_threshold: int = 5
    certify: bool = True
    distance: bool = True
    distance_time_limit: float | None = None  # None: the solver's limit
    noisy_measurement_attack: bool = True
    workers: int = 1

    @classmethod
    def from_config(cls, cfg: Any) -> EvaluationPlan:
        """The plan an :class:`~tabrecon.audit.config.AuditConfig` describes."""
        r = cfg.reconstruct
        return cls(
            solver=SolverOptions(backend=r.solver, threads=1, time_limit=r.time_limit),
            attacker=cfg.reidentify.attacker,
            francis_threshold=cfg.reidentify.francis_threshold,
            certify=cfg.certify.enabled,
            distance=cfg.certify.distance,
            distance_time_limit=cfg.certify.distance_time_limit or None,
            noisy_measurement_attack=cfg.defenses.noisy_measurement_attack,
            workers=cfg.run.workers,
        )


@dataclass
class DefenseOutcome:
    """Risk and accuracy of one defense on one piece of the truth, as counts that add up."""

    defense: str
    rho: float | None
    epsilon: float | None
    persons: int = 0
    blocks: int = 0
    majority_blocks: int = 0
    abs_block_total: float = 0.0
    l1_race_eth: float = 0.0
    majority_kept: float = 0.0
    l1: dict[str, float] = field(default_factory=dict)
    certified_blocks: int = 0
    #: (group, source) -> [attacker records, putative, confirmed]
    rates: dict[str, list[int]] = field(default_factory=dict)
    prg_expected: dict[str, float] = field(default_factory=dict)
    prg_original: dict[str, float] = field(default_factory=dict)
    #: the attack on the noisy measurements: exact, binned, failed blocks, putative/confirmed
    nmf: dict[str, int] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    #: squared errors of the block tables' cells, summed, and the (block, cell) values compared
    block_cells_sq_error: float = 0.0
    block_cells: int = 0
    #: agreement of the release with the input (Abowd et al. Table 3): block-size bin (and
    #: "all") -> [persons, exact, binned]
    agreement: dict[str, list[int]] = field(default_factory=dict)

    def merge(self, other: DefenseOutcome) -> DefenseOutcome:
        """The outcome of both pieces (the same defense on disjoint counties)."""

        def add(a: dict, b: dict) -> dict:
            return {k: _plus(a.get(k), b.get(k)) for k in a.keys() | b.keys()}

        return DefenseOutcome(
            self.defense,
            self.rho,
            self.epsilon,
            self.persons + other.persons,
            self.blocks + other.blocks,
            self.majority_blocks + other.majority_blocks,
            self.abs_block_total + other.abs_block_total,
            self.l1_race_eth + other.l1_race_eth,
            self.majority_kept + other.majority_kept,
            add(self.l1, other.l1),
            self.certified_blocks + other.certified_blocks,
            add(self.rates, other.rates),
            add(self.prg_expected, other.prg_expected),
            add(self.prg_original, other.prg_original),
            add(self.nmf, other.nmf) if self.nmf is not None and other.nmf is not None else None,
            self.info,
            self.block_cells_sq_error + other.block_cells_sq_error,
            self.block_cells + other.block_cells,
            add(self.agreement, other.agreement),
        )

    def to_row(self) -> dict[str, Any]:
        """The defense's result row (the only place its columns are named)."""
        nan = float("nan")
        n, b, mb = self.persons, self.blocks, self.majority_blocks
        row: dict[str, Any] = {
            "defense": self.defense,
            "rho": nan if self.rho is None else self.rho,
            "epsilon": nan if self.epsilon is None else self.epsilon,
        }
        for lv in LEVELS[1:]:
            if lv in self.l1:
                row[f"tvd_{lv}"] = 1.0 - self.l1[lv] / (2.0 * n) if n else nan
        row["mae_block_total"] = self.abs_block_total / b if b else nan
        row["rmse_block_cell"] = (
            (self.block_cells_sq_error / self.block_cells) ** 0.5 if self.block_cells else nan
        )
        row["mean_l1_race_eth"] = self.l1_race_eth / b if b else nan
        row["majority_kept_pct"] = 100.0 * self.majority_kept / mb if mb else nan
        for key in ("all", *BLOCK_SIZE_LABELS):
            p, e, bn = self.agreement.get(key, [0, 0, 0])
            suffix = "" if key == "all" else f"_{key}"
            if key == "all":
                row["agreement_exact_pct"] = 100.0 * e / p if p else nan
            row[f"agreement_binned_pct{suffix}"] = 100.0 * bn / p if p else nan
        row["certified_blocks"] = self.certified_blocks
        row["blocks"] = b
        # the attack on the noisy measurements themselves (TopDown only; n/a for the others)
        nmf = self.nmf or {}
        row["nmf_agreement_binned_pct"] = 100.0 * nmf["binned"] / n if nmf and n else nan
        for g in ("all", "nonmodal"):
            put = nmf.get(f"{g}_putative", 0)
            row[f"nmf_{g}_precision"] = 100.0 * nmf[f"{g}_confirmed"] / put if put else nan
        for g in ROW_GROUPS:
            for src in ROW_SOURCES:
                _, put, conf = self.rates.get(f"{g}/{src}", [0, 0, 0])
                row[f"{src}_{g}_precision"] = 100.0 * conf / put if put else nan
            n_put = self.rates.get(f"{g}/attack", [0, 0, 0])[1]
            row[f"attack_{g}_putative"] = n_put
            # PRG without its draw noise: from the release's tables and from the unprotected ones
            for key, vals in (
                ("prg_expected", self.prg_expected),
                ("prg_original", self.prg_original),
            ):
                row[f"{key}_{g}_precision"] = (
                    100.0 * vals[g] / n_put if n_put and g in vals else nan
                )
        return row

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> DefenseOutcome:
        return cls(**json.loads(text))


def _plus(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list):
        return [x + y for x, y in zip(a, b, strict=True)]
    return a + b


def evaluate_defense(
    truth: Any,
    defense: Defense | str,
    plan: EvaluationPlan | None = None,
    seed: int = 0,
    work: str | Path | None = None,
    resume: bool = True,
    progress: Callable[[str, int], Callable[[dict], None]] | None = None,
) -> DefenseOutcome:
    """Protect ``truth`` with ``defense``, tabulate the release, reconstruct it, certify the
    reconstruction, link it to the attacker's data (and every baseline), attack TopDown's noisy
    measurements (``plan.noisy_measurement_attack``) and measure the release's accuracy.

    Parameters
    ----------
    truth : Microdata
        The confidential records (the defense's input and the linkage's ground truth).
    defense : Defense or str
        A :class:`~tabrecon.defenses.defense.Defense` or its spec (``"swap-lo"``, ``"rho=2"``).
    plan : EvaluationPlan
        How the release is attacked (default: :class:`EvaluationPlan`'s defaults, the audit's).
    seed : int
        Seeds swapping and the attacker's random choices (TopDown's noise is never seeded).
    work : path, optional
        A folder for the protected release and the attack's parts: with ``resume`` a rerun takes
        the same release (TopDown's noise cannot be drawn again) and skips finished tracts.

    Returns
    -------
    DefenseOutcome
        Summable counts; ``.to_row()`` gives the result row.
    """
    plan = plan or EvaluationPlan()
    d = Defense.parse(defense) if isinstance(defense, str) else defense
    prot = _protect(truth, d, plan, seed, Path(work) if work is not None else None, resume)
    ts = tabulate(prot.records)

    def tick(label: str, total: int) -> Callable[[dict], None] | None:
        return progress(label, total) if progress is not None else None

    w = Path(work) if work is not None else None
    ntr = len(ts.tracts())
    run = reconstruct(
        ts,
        plan.level,
        plan.solver,
        run=RunOptions(
            workers=plan.workers,
            out=w / "recon.parquet" if w else None,
            resume=resume,
            progress=tick(
                f"{d.name}: reconstruct and certify" if plan.certify else f"{d.name}: reconstruct",
                ntr,
            ),
        ),
        certify=plan.certify,
        distance=plan.certify and plan.distance,
        distance_time_limit=plan.distance_time_limit,
    )
    rec = run.records
    blocks = None
    if plan.certify:  # measured in the reconstruction's program; a failed tract's blocks left out
        blocks = run.release.verdicts(solved=True)
    res = reidentify(
        rec,
        truth,
        plan.attacker,
        tables=ts,
        cert_blocks=blocks,
        seed=seed,
        francis_threshold=plan.francis_threshold,
    )
    rates = res.rates().filter(pl.col("bin") == "all")
    acc = block_accuracy(truth, prot.records).row(0, named=True)
    sq, ncells = block_cell_sq_error(truth, prot.records)
    ag = agree(prot.records, truth=truth, warn=False)
    agreement = {"all": [ag.population, ag.exact, ag.binned]} | {
        r["bin"]: [r["persons"], r["exact"], r["binned"]] for r in ag.by_bin.iter_rows(named=True)
    }
    cost = d.cost
    out = DefenseOutcome(
        d.name,
        cost.rho if cost is not None else None,
        cost.epsilon if cost is not None else None,
        persons=len(truth),
        blocks=acc["blocks"],
        majority_blocks=acc["majority_blocks"],
        abs_block_total=(acc["mae_block_total"] or 0.0) * acc["blocks"],
        l1_race_eth=(acc["mean_l1_race_eth"] or 0.0) * acc["blocks"],
        majority_kept=(acc["majority_kept_pct"] or 0.0) * acc["majority_blocks"] / 100.0,
        l1=l1_by_level(truth, prot.records),
        certified_blocks=certified_inhabited(blocks),
        rates={
            f"{r['group']}/{r['source']}": [r["attacker_records"], r["putative"], r["confirmed"]]
            for r in rates.iter_rows(named=True)
        },
        prg_expected={g: res.expected_prg(g)[0] for g in GROUPS},
        prg_original={g: res.expected_prg(g, original=True)[0] for g in GROUPS},
        info=prot.info,
        block_cells_sq_error=sq,
        block_cells=ncells,
        agreement=agreement,
    )
    if prot.measurements is not None and plan.noisy_measurement_attack:
        out.nmf = _noisy_attack(truth, ts, prot.measurements, plan, seed)
    return out


def _protect(
    truth: Any, d: Defense, plan: EvaluationPlan, seed: int, work: Path | None, resume: bool
) -> Protected:
    """The protected release, kept under ``work`` so that a resumed run attacks the same one."""
    if work is None:
        return d.protect(truth, seed, plan.workers)
    work.mkdir(parents=True, exist_ok=True)
    rec, info, meas = (
        work / "protected.parquet",
        work / "protected.json",
        work / "measurements.parquet",
    )
    if resume and rec.exists() and info.exists():
        m = pl.read_parquet(meas) if meas.exists() else None
        return Protected(read_microdata(rec), json.loads(info.read_text()), m, d.cost)
    for f in (rec, info, meas):
        remove_file(f)
    prot = d.protect(truth, seed, plan.workers)
    write_microdata(prot.records, rec)
    if prot.measurements is not None:
        write_parquet(prot.measurements, meas)
    write_text(info, json.dumps(prot.info, default=str))  # written last: the release is complete
    return prot


def _noisy_attack(
    truth: Any, ts: Any, meas: pl.DataFrame, plan: EvaluationPlan, seed: int
) -> dict[str, int]:
    """Fit records straight to TopDown's noisy measurements (with the published block totals) and
    link them: counts that add up across chunks."""
    g = ts.grids["block"]
    totals = dict(zip(g.geoids.tolist(), g.col("P0010001").tolist(), strict=True))
    nr = reconstruct_from_measurements(meas, g.geoids, block_totals=totals)
    a = agree(nr.records, truth=truth, warn=False)  # fitted to noisy totals: other totals by design
    res = reidentify(
        nr.records,
        truth,
        plan.attacker,
        tables=ts,
        seed=seed,
        francis_threshold=plan.francis_threshold,
    )
    rt = res.rates().filter((pl.col("source") == "attack") & (pl.col("bin") == "all"))
    out = {"exact": a.exact, "binned": a.binned, "failed_blocks": len(nr.failed)}
    for grp in ("all", "nonmodal"):
        row = rt.filter(pl.col("group") == grp).row(0, named=True)
        out[f"{grp}_putative"], out[f"{grp}_confirmed"] = row["putative"], row["confirmed"]
    return out


def outcome_frame(outcomes: list[DefenseOutcome]) -> pl.DataFrame:
    """Result rows of several defenses as one frame."""
    return pl.DataFrame([o.to_row() for o in outcomes])


__all__ = ["DefenseOutcome", "EvaluationPlan", "evaluate_defense", "outcome_frame"]
