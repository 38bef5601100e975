"""The risk-against-accuracy sweep over defenses (``tabrecon tradeoff``): each defense evaluated
by :func:`~tabrecon.audit.evaluate.evaluate_defense`, the path the audit takes, one row per defense
written as it finishes, and a plot of precision and accuracy against the budget."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import polars as pl
from rich.console import Console

from ..defenses.defense import Defense
from ..errors import TabreconError
from ..interrupts import Interrupted, check, keeps
from ..io import append_row, remove_file, write_figure
from ..provenance import check_or_record, digest_microdata, fingerprint
from ..schema import BLOCK_SIZE_LABELS, Microdata
from .evaluate import DefenseOutcome, EvaluationPlan, evaluate_defense


def agreement_line(row: dict) -> str:
    """A defense row's agreement with its input in Abowd et al.'s Table 3 layout: binned
    agreement overall (with exact) and by block size."""
    bins = "  ".join(
        f"{b} {row[f'agreement_binned_pct_{b}']:.1f}"
        for b in BLOCK_SIZE_LABELS
        if row.get(f"agreement_binned_pct_{b}") == row.get(f"agreement_binned_pct_{b}")
    )
    return (
        f"agreement with the input, exact/binned {row['agreement_exact_pct']:.1f}/"
        f"{row['agreement_binned_pct']:.1f}%; binned by block size: {bins}"
    )


def _same_version(csv_path: Path, row: dict, exact: bool = False) -> None:
    """Refuse to add rows to a tradeoff.csv another tabrecon version wrote: its columns must
    include every column this version always writes (``exact``: equal the row's)."""
    have = pl.read_csv(csv_path, n_rows=0).columns
    ok = have == list(row) if exact else set(row) <= set(have)
    if not ok:
        raise TabreconError(
            f"{csv_path}: its columns are not this version's (an earlier tabrecon wrote it); "
            "rerun with --fresh to start it over"
        )


def run_tradeoff(
    truth: Microdata,
    defenses: list[str],
    out: str | Path,
    seed: int = 0,
    resume: bool = True,
    console: Console | None = None,
    plan: EvaluationPlan | None = None,
) -> pl.DataFrame:
    """For each defense: protect, publish, rerun the whole attack, measure risk and accuracy.

    One row per defense (:meth:`~tabrecon.audit.evaluate.DefenseOutcome.to_row`, plus ``seconds``
    and ``info``) is appended to ``tradeoff.csv`` as it finishes (a rerun skips finished defenses);
    ``tradeoff.png`` plots nonmodal precision (attack, PRG, MDG) and block TVD accuracy against
    the budget, with the undefended and swapped releases as reference lines. ``plan`` defaults to
    the audit's (:class:`~tabrecon.audit.evaluate.EvaluationPlan`), so the rows equal the audit's.
    """
    plan = plan or EvaluationPlan()
    parsed = [Defense.parse(spec) for spec in defenses]  # every spec checked before any work
    con = console or Console()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "tradeoff.csv"
    record = out / "tradeoff.run.json"
    if not resume:
        remove_file(csv_path)
        remove_file(record)
    plan_opts = {k: v for k, v in asdict(plan).items() if k != "workers"}
    fp = fingerprint(truth=digest_microdata(truth), seed=seed, plan=plan_opts)
    check_or_record(record, fp, str(csv_path), outputs=(csv_path,))
    from ..attacks.attacker import ATTACKER_SOURCES

    con.print(
        f"attacker: {plan.attacker} ({ATTACKER_SOURCES.get(plan.attacker, 'an attacker file')})"
    )

    def on_disk() -> set[str]:
        if not csv_path.exists() or not csv_path.stat().st_size:
            return set()
        return set(pl.read_csv(csv_path, infer_schema=False)["defense"].to_list())

    names = {d.name for d in parsed}
    keeps(lambda: Interrupted(len(on_disk() & names), len(names), str(csv_path), "defenses"))
    done = set()
    if resume and csv_path.exists() and csv_path.stat().st_size:
        _same_version(csv_path, DefenseOutcome("", None, None).to_row())
        done = set(pl.read_csv(csv_path)["defense"].to_list())
    for d in parsed:
        if d.name in done:
            con.print(f"{d.name}: done earlier, kept")
            continue
        t0 = time.perf_counter()
        outcome = evaluate_defense(truth, d, plan, seed=seed)
        row = outcome.to_row()
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["info"] = json.dumps(outcome.info, default=str)
        if csv_path.exists() and csv_path.stat().st_size:
            _same_version(csv_path, row, exact=True)
        append_row(csv_path, row)
        check()  # an interrupt Python swallowed stops the sweep here (interrupts.check)
        con.print(
            f"{d.name}: nonmodal precision attack {row['attack_nonmodal_precision']:.1f}% vs PRG "
            f"{row['prg_nonmodal_precision']:.1f}% / MDG {row['mdg_nonmodal_precision']:.1f}%; "
            f"block accuracy (1 - TVD) {row['tvd_block']:.3f} ({row['seconds']} s)"
        )
        if outcome.rho is not None:  # every TopDown run: agreement with its input, Table 3 layout
            con.print(f"  {agreement_line(row)}")
    df = pl.read_csv(csv_path)
    tradeoff_plot(df, out / "tradeoff.png")
    return df


def tradeoff_plot(df: pl.DataFrame, path: Path) -> None:
    """Precision (attack and baselines) and TVD accuracy against the budget; swapping and the
    undefended release as reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dp = df.filter(pl.col("rho").is_not_nan()).sort("rho")
    ref = df.filter(pl.col("rho").is_nan())
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4), dpi=110)
    if dp.height:
        for col, lab, st in (
            ("attack_nonmodal_precision", "attack, nonmodal", "o-"),
            ("attack_certified_uniques_precision", "attack, certified nonmodal uniques", "s-"),
            ("prg_nonmodal_precision", "PRG, nonmodal", "^--"),
            ("prg_original_nonmodal_precision", "PRG from unprotected tables, expected", "x--"),
            ("mdg_nonmodal_precision", "MDG, nonmodal", "v:"),
        ):
            ax.plot(dp["rho"], dp[col], st, ms=4, label=lab)
        bx.plot(dp["rho"], dp["tvd_block"], "o-", label="block")
        bx.plot(dp["rho"], dp["tvd_tract"], "s-", label="tract")
        ax.set_xscale("log")
        bx.set_xscale("log")
    for r in ref.iter_rows(named=True):
        ax.axhline(r["attack_nonmodal_precision"], color="grey", lw=0.8, ls="-.")
        ax.annotate(
            f"{r['defense']}: attack {r['attack_nonmodal_precision']:.0f}%",
            (ax.get_xlim()[0], r["attack_nonmodal_precision"]),
            fontsize=7,
            va="bottom",
        )
    ax.set(
        xlabel="total rho (zCDP)",
        ylabel="precision %",
        title="Reidentification precision vs budget",
    )
    bx.set(xlabel="total rho (zCDP)", ylabel="TVD accuracy", title="Accuracy vs budget")
    for a in (ax, bx):
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    fig.tight_layout()
    write_figure(fig, path)
    plt.close(fig)
