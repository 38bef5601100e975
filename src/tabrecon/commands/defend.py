"""Commands that defend a release and weigh the cost: ``swap``, ``topdown``,
``reconstruct-noisy`` (the attack on TopDown's noisy measurements), ``tradeoff``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import TabreconError
from ..io import check_suffix
from ..terminal import (
    Fresh,
    Seed,
    at_least,
    console,
    err,
    frame_table,
    one_of,
    positive_finite,
)

app = typer.Typer()
RECON_LEVELS = ("block", "block+tract")


@app.command()
def swap(
    microdata: Annotated[
        Path, typer.Argument(help="Person file to protect (a household_id column swaps households)")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Swapped person file")] = Path(
        "swapped.parquet"
    ),
    preset: Annotated[
        str, typer.Option(help="swap-lo (5%, within tract) or swap-hi (50%, size noise, 30/40/30)")
    ] = "swap-lo",
    rate: Annotated[
        float | None, typer.Option(help="Override the preset's target swap rate")
    ] = None,
    seed: Seed = 0,
) -> None:
    """Swap households between blocks as the 2010 simulation did; report the invariants kept."""
    from dataclasses import replace

    from ..defenses.swapping import PRESETS
    from ..defenses.swapping import swap as _swap
    from ..schema import read_microdata

    one_of(preset, tuple(PRESETS), "--preset")
    if rate is not None and not (0 < rate <= 1):
        raise TabreconError(f"--rate must be a share in (0, 1] (got {rate})")
    check_suffix(out)
    cfg = (
        PRESETS[preset]
        if rate is None
        else replace(PRESETS[preset], rate=rate, name=f"{preset} rate {rate}")
    )
    res = _swap(read_microdata(microdata), cfg, seed)
    paths = res.write(out)
    s = res.summary()
    console.print(
        f"{s['preset']}: swapped {s['swapped_units']:,} of {s['units']:,} {s['unit']} "
        f"({100 * s['swapped_share']:.1f}%), {s['moved_persons']:,} persons changed block -> "
        f"{paths[0]}"
    )
    console.print(
        "invariants kept: "
        + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in s["invariants_kept"].items())
    )


@app.command()
def topdown(
    microdata: Annotated[Path, typer.Argument(help="Person file to protect")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Protected person file (the MDF)")
    ] = Path("protected.parquet"),
    preset: Annotated[
        str, typer.Option(help="dhc2023-like (level shares of the 2023 DHC) or uniform")
    ] = "dhc2023-like",
    rho: Annotated[float, typer.Option(help="Total zCDP budget")] = 4.9622,
    workers: Annotated[int, typer.Option(help="Processes sharing the parents of each level")] = 1,
    fit: Annotated[
        str, typer.Option(help="Least-squares solver: admm (default) or clarabel")
    ] = "admm",
) -> None:
    """Protect person records with TopDown (zCDP, exact discrete Gaussian noise, top-down NNLS +
    rounding)."""
    from ..defenses.topdown import FITS, dhc2023_like, uniform_config
    from ..defenses.topdown import topdown as _topdown
    from ..metrics.accuracy import tvd_by_level
    from ..schema import read_microdata

    one_of(preset, ("dhc2023-like", "uniform"), "--preset")
    positive_finite(rho=rho)
    at_least(1, workers=workers)
    one_of(fit, FITS, "--fit")
    check_suffix(out)
    md = read_microdata(microdata)
    cfg = dhc2023_like(rho) if preset == "dhc2023-like" else uniform_config(rho)
    res = _topdown(
        md,
        cfg,
        progress=lambda lv: err.print(f"[dim]topdown: {lv} done[/dim]"),
        workers=workers,
        fit=fit,
    )
    tvd = tvd_by_level(md, res.records)
    res.write(out, {"tvd_accuracy": tvd})
    c = res.cost
    console.print(
        f"{cfg.name}: rho {c.rho:.4f} (epsilon {c.epsilon:.2f} at delta {c.delta:g}), "
        f"{res.draws:,} exact noise draws, {len(res.records):,} protected records -> {out}"
    )
    console.print("TVD accuracy: " + ", ".join(f"{k} {v:.4f}" for k, v in tvd.items()))
    for f in res.fallbacks:
        err.print(f"[yellow]fallback:[/yellow] {f}")


@app.command("reconstruct-noisy")
def reconstruct_noisy(
    measurements: Annotated[
        Path, typer.Argument(help="TopDown's noisy measurements (<stem>_measurements.parquet)")
    ],
    tables_file: Annotated[
        Path,
        typer.Option("--tables", help="The published (post-processed) tables: geography and P1"),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Person file of the fitted records")
    ] = Path("recon_noisy.parquet"),
    use_totals: Annotated[
        bool, typer.Option(help="Hold each block's published total (P1) exactly")
    ] = True,
    time_limit: Annotated[float, typer.Option(help="Seconds per block's integer program")] = 10.0,
) -> None:
    """Fit person records straight to published noisy measurements (integer least-deviation per
    block)."""
    from ..attacks.noisy import read_measurements, reconstruct_noisy_release
    from ..published import read_tables
    from ..schema import write_microdata

    positive_finite(time_limit=time_limit)
    check_suffix(out)
    nr = reconstruct_noisy_release(
        read_measurements(measurements),
        read_tables(tables_file),
        use_totals,
        time_limit,
        str(tables_file),
    )
    write_microdata(nr.records, out)
    console.print(
        f"fitted {len(nr.records):,} records in {nr.blocks:,} blocks ({nr.seconds:.1f} s); fitted "
        f"at: {nr.fitted_at} -> {out}"
    )
    for f in nr.failed[:10]:
        err.print(f"[yellow]block failed:[/yellow] {f}")
    if nr.failed:
        raise typer.Exit(1)


@app.command()
def tradeoff(
    microdata: Annotated[Path, typer.Argument(help="Confidential person file")],
    defenses: Annotated[
        str,
        typer.Option(
            help="Comma list: none, swap-lo, swap-hi, swap=<rate>, dhc2023-like, rho=<budget>, "
            "eps=<budget>"
        ),
    ] = "none,swap-lo,swap-hi,rho=0.5,dhc2023-like,rho=50",
    out: Annotated[Path, typer.Option("--out", "-o")] = Path("tradeoff"),
    seed: Seed = 0,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="TOML configuration: the attack plan the audit would use"
        ),
    ] = None,
    fresh: Fresh = False,
) -> None:
    """Risk against accuracy: for each defense, protect, publish, rerun every attack and measure."""
    from ..config import load_config
    from ..defenses.defense import Defense
    from ..evaluate import EvaluationPlan
    from ..pipeline import run_tradeoff
    from ..schema import read_microdata

    specs = [d.strip() for d in defenses.split(",") if d.strip()]
    if not specs:
        raise TabreconError("--defenses is empty")
    for spec in specs:
        if (problem := Defense.check(spec)) is not None:
            raise TabreconError(f"--defenses: {spec!r}: {problem}")
    plan = EvaluationPlan.from_config(load_config(config))
    df = run_tradeoff(read_microdata(microdata), specs, out, seed, not fresh, console, plan)
    cols = {
        "defense": "defense",
        "rho": "rho",
        "attack_nonmodal_precision": "attack nonmodal %",
        "prg_nonmodal_precision": "PRG nonmodal %",
        "mdg_nonmodal_precision": "MDG nonmodal %",
        "tvd_block": "block TVD",
    }
    console.print(frame_table("risk and accuracy by defense", df, cols))
    console.print(f"written {out}/tradeoff.csv, {out}/tradeoff.png")
