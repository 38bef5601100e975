"""Commands that run the whole pipeline: ``audit`` and ``demo``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ... import vocab
from ...io import Writes, check_suffix
from ..terminal import (
    FolderOut,
    Quiet,
    ReleaseName,
    Seed,
    at_least,
    console,
    err,
    publication_rule,
    released,
    table,
)

app = typer.Typer()
RECON_LEVELS = vocab.Level.choices()


def _print_audit(res, out: Path) -> None:
    s = res.summary
    console.print(table("audit headline", ["figure", "value"], res.headline()))
    t = s["timings_s"]
    console.print(
        table(
            "time per stage (seconds, summed over chunks)",
            ["stage", "seconds"],
            [[k, f"{v:,.1f}"] for k, v in t.items()],
        )
    )
    if s.get("resumed_stages"):
        kept = s["resumed_stages"]
        err.print(
            f"[dim]resumed: {len(kept)} stage(s) kept from an earlier run in {out / 'work'}: "
            f"{', '.join(kept[:8])}{' ...' if len(kept) > 8 else ''}[/dim]"
        )
    if s.get("failures"):
        err.print(
            f"[yellow]{len(s['failures'])} unit(s) failed:[/yellow] " + "; ".join(s["failures"][:5])
        )
    console.print(f"report: {res.report}  (numbers: {out / 'results'}, {out / 'summary.json'})")


#: the audit's block shapes option
Shapes = Annotated[
    Path | None,
    typer.Option(
        help="The county's block shapes (TIGER/Line tl_2010_SSCCC_tabblock10.zip or 2020's "
        "tabblock20, a shapefile, GeoPackage, GeoJSON or GeoParquet): the report maps its "
        "blocks by certified uniqueness, and by the share singled out where verified claims "
        "cover every block (persons); any population placed by census blocks (\\[report] "
        "shapes; needs the maps extra; tabrecon download --shapes fetches the file)"
    ),
]
#: where TopDown's noise comes from (audit and demo)
NoiseSource = Annotated[
    str | None,
    typer.Option(
        "--noise",
        help="Where TopDown's noise comes from: 'secure' (OpenDP's cryptographic sampler, as a "
        "release needs; every run draws anew) or 'seeded' (from --seed: the run repeats "
        r"exactly; for experiments, never a release) (\[defenses] noise)",
    ),
]
#: how many times each randomized defense is drawn (audit and demo)
Draws = Annotated[
    int | None,
    typer.Option(
        "--draws",
        help="Protect the records this many times with each randomized defense (seeds --seed, "
        "--seed + 1, ...): the report gives each of its figures as the median and range over "
        r"the draws, and says where a conclusion changes between them (\[defenses] draws)",
    ),
]
#: the audit's calibration option
CalibrationFile = Annotated[
    Path | None,
    typer.Option(
        help="A calibration.csv that tabrecon calibrate wrote: the report of a 2020 DHC "
        "audit gives how often such claims were true of the confidential records "
        r"(\[report] calibration)"
    ),
]


@app.command()
def audit(
    microdata: Annotated[
        Path | None, typer.Argument(help="Confidential person file (CSV, CSV.gz, Parquet)")
    ] = None,
    tables_path: Annotated[
        Path | None,
        typer.Option(
            "--tables",
            help="Published tables: a long or wide file, the Census API's JSON, an SF1 "
            "summary-file folder, or a ZIP of one",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output folder (report.html, results/, work/)"),
        Writes(folder=True),
    ] = Path("tabrecon-audit"),
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML configuration (see README)")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Keep finished stages and tracts of an earlier run in OUT"),
    ] = False,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Local processes for tracts (default from config: 1)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default from config: 2010)")] = None,
    defenses: Annotated[
        str | None, typer.Option(help="Comma-separated defenses, e.g. 'swap-lo,rho=2' ('' = none)")
    ] = None,
    chunk_persons: Annotated[
        int | None,
        typer.Option(help="Counties are batched up to this many persons (records of --schema)"),
    ] = None,
    quiet: Quiet = False,
    households: Annotated[
        Path | None,
        typer.Option(
            help="Housing-unit file of the same households: adds Generate-then-Verify on the "
            "housing-unit tables and a households section (see \\[households] in the config)"
        ),
    ] = None,
    schema: Annotated[
        str,
        typer.Option(
            help="What MICRODATA's records are: 'persons' (a person file: the full audit) or "
            "another population (e.g. 'households', 'group_quarters', a declaration NAME.toml: "
            "every block reconstructed and certified, Generate-then-Verify on its median "
            "blocks)"
        ),
    ] = "persons",
    release: ReleaseName = "sf1-2010",
    shapes: Shapes = None,
    calibration: CalibrationFile = None,
    noise: NoiseSource = None,
    draws: Draws = None,
    publication_rules: Annotated[
        str | None,
        typer.Option(
            help="Adds a report section on what would have stopped it: the sampled blocks "
            "published under each rule (';'-separated, e.g. 'exact;round:3;suppress:3') and "
            r"attacked as published (\[households] publication_rules); records, not --tables"
        ),
    ] = None,
) -> None:
    """Audit a release end to end: publish, reconstruct, certify, link, defend; write a report."""
    from ...audit.config import load_config
    from ...audit.run import audit as _audit
    from ...audit.stages import runs
    from ...errors import TabreconError
    from ...tables.declaration import population
    from ...vocab import Stage

    pop = released(schema, release)
    specs = None if defenses is None else [d.strip() for d in defenses.split(",") if d.strip()]
    if specs and set(specs) != {"none"} and not runs(pop, Stage.DEFENSES):  # never ignored
        raise TabreconError(
            f"--defenses: the defenses take person records of SF1 2010's tables, not "
            f"{pop.noun} of {pop.schema.release.label} (--schema {pop.name})"
        )
    run_opts = dict(scheduler=scheduler, workers=workers, seed=seed, chunk_persons=chunk_persons)
    cfg = load_config(
        config,
        run=run_opts,
        defenses={"specs": specs, "noise": noise, "draws": draws},
        households={"publication_rules": _rules(publication_rules)},
        report={
            "shapes": str(shapes) if shapes is not None else None,
            "calibration": str(calibration) if calibration is not None else None,
        },
    )
    if cfg.report.shapes:
        from ...shapes import require_maps

        require_maps()
    if cfg.households.publication_rules:  # every rule checked before any work
        swept = pop
        if runs(pop, Stage.HOUSEHOLDS):
            if households is None:
                raise TabreconError(
                    "--publication-rules sweeps housing-unit tables: give --households FILE (or "
                    "audit --schema households)"
                )
            swept = population("households")
        elif microdata is None:
            raise TabreconError(
                "publication rules are swept over records: give MICRODATA, not --tables (a "
                "release is published already)"
            )
        for r in cfg.households.publication_rules:
            publication_rule(swept, r)
    cmd = "tabrecon audit " + " ".join(sys.argv[2:])
    res = _audit(microdata, out, cfg, tables_path, resume, err, not quiet, cmd, households, pop.key)
    _print_audit(res, out)
    if res.summary.get("failures"):
        raise typer.Exit(1)


@app.command()
def compare(
    audits: Annotated[
        list[Path],
        typer.Argument(
            help="Folders that tabrecon audit --out wrote, such as the same county's 2010 SF1 "
            "and 2020 DHC audits (persons, housing units)",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The HTML file to write"), Writes()
    ] = Path("compare.html"),
) -> None:
    """One county's releases side by side: each audit's county-level figures (blocks whose
    tables admit one population, records singled out, the claims' truth rate where calibrated)
    and its maps, read from the folders the audits wrote."""
    from ...report.compare import compare_report

    check_suffix(out, (".html",))
    path = compare_report(audits, out)
    console.print(f"{len(audits)} audit(s) side by side: {path}")


def _rules(text: str | None) -> list[str] | None:
    """``--publication-rules``: ';'-separated rules (a rule may hold commas), None untold."""
    if text is None:
        return None
    return [r.strip() for r in text.split(";") if r.strip()]


@app.command()
def demo(
    out: FolderOut = Path("tabrecon-demo"),
    persons: Annotated[int, typer.Option(help="Size of the synthetic county")] = 20_000,
    seed: Seed = 2010,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML configuration for the audit")
    ] = None,
    quiet: Quiet = False,
    noise: NoiseSource = None,
    draws: Draws = 5,
) -> None:
    """Synthesize a county and audit it: the whole pipeline and its HTML report in a few minutes."""
    from ...audit.config import load_config
    from ...audit.run import run_demo

    at_least(1, persons=persons)
    cfg = load_config(config, run={"seed": seed}, defenses={"noise": noise, "draws": draws})
    res = run_demo(out, persons, seed, cfg, err, not quiet)
    _print_audit(res, out)
