"""What the command line shares: its consoles, tables and progress bars, the option types every
command takes alike, and the checks that refuse a bad option value before any work (one line that
names the option, exit 2)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ..errors import TabreconError
from ..io import Writes
from ..populations import choices_help

if TYPE_CHECKING:
    from ..schema.registry import Population
    from ..tables.publication import Publication

console = Console(stderr=False)
err = Console(stderr=True, soft_wrap=True)  # an error is one line, never wrapped

FRESH_HELP = (
    "Start over: discard what an earlier run left in the output. Without it a rerun resumes, "
    "and refuses (exit 2) when the earlier run had other inputs or options"
)
# Options several commands take, declared once
Fresh = Annotated[bool, typer.Option("--fresh", help=FRESH_HELP)]
Solver = Annotated[
    str,
    typer.Option(help="auto (HiGHS to reconstruct, CP-SAT to certify and verify), cpsat or highs"),
]
Threads = Annotated[int, typer.Option(help="Solver threads per tract")]
Seed = Annotated[int, typer.Option(help="Random seed")]
Workers = Annotated[int, typer.Option(help="Tracts run in parallel (processes)")]
SchemaName = Annotated[
    str,
    typer.Option(
        "--schema",
        help=f"What the records are: {choices_help()} (each a population declared in "
        "tabrecon.populations; tabrecon tables list --schema NAME shows its tables), or a "
        "release declared in a file, NAME.toml (docs/declarations.md)",
    ),
]
ReleaseName = Annotated[
    str,
    typer.Option(
        "--release",
        help="The census product the tables are (or are to be) published in: sf1-2010 (the "
        "2010 Summary File 1) or dhc-2020 (the 2020 Demographic and Housing Characteristics "
        "File; tabrecon tables list --release dhc-2020 --schema NAME shows its tables)",
    ),
]
Level = Annotated[str, typer.Option(help="Tables the attacker uses: 'block' or 'block+tract'")]
PublicationRule = Annotated[
    str,
    typer.Option(
        "--publication",
        help="Not persons: how the cells were published: declared (the default: as the "
        "population or its declaration file says; exact for census tables); exact; round:B (to "
        "the nearest multiple of B), round:[i]B[/i]:random (to one of the two), with "
        ":zeros-exact when a nonzero count is never rounded to 0; suppress:T (counts 1 to T-1 "
        "withheld: empty or marked S, X, D, ..), suppress:T:zeros (zeros too); other rules for "
        "some tables after commas (round:3,H1=exact). Block level",
    ),
]
TablesArg = Annotated[
    Path,
    typer.Argument(
        help="Published tables: a long (geoid, cell, value) or wide file (CSV, CSV.gz, "
        "Parquet), the Census API's JSON, an SF1 or P.L. 94-171 folder, or a ZIP of one"
    ),
]
ReconOpt = Annotated[Path, typer.Option("--recon", "-r", help="Reconstruction (person file)")]
DnOut = Annotated[Path, typer.Option("--out", "-o", help="Output folder"), Writes(folder=True)]
PersonOut = Annotated[
    Path,
    typer.Option("--out", "-o", help="Person file to write (.parquet, .csv, .csv.gz)"),
    Writes(),
]
#: a folder of results: the command writes its files there and may clear what it wrote before
FolderOut = Annotated[Path, typer.Option("--out", "-o", help="Output folder"), Writes(folder=True)]
TimeLimit = Annotated[float, typer.Option(help="Solver time limit per model, seconds")]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress bars")]


def say_skipped(ts: Any, path: Path) -> None:
    """Say which rows of the table file ``path`` were read as none of its tables' geographies
    (:attr:`tabrecon.tables.tableset.TableSet.skipped`): every row is read, refused or counted
    here, never dropped in silence."""
    for kind, (rows, values) in sorted(ts.skipped.items()):
        err.print(
            f"{path}: skipped {rows:,} row{'s' if rows != 1 else ''} of {kind} ({values:,} "
            "values): not a geography these tables are read at"
        )


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A rich table; floats with three decimals, text columns left-aligned."""
    t = Table(title=title, show_lines=False)
    for c in columns:
        left = c in ("figure", "cell", "table", "description", "bin", "group", "source")
        t.add_column(c, justify="left" if left else "right")
    for r in rows:
        t.add_row(*[_cell(v) for v in r])
    return t


def _cell(v: Any) -> str:
    """A table cell: floats with three decimals, a missing number (NaN, None) as "n/a"."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def pct1(v: float | None) -> str:
    """A percentage with one decimal, "n/a" where there is nothing to divide (an empty bin)."""
    return "n/a" if v is None or v != v else f"{v:.1f}"


def frame_table(title: str, df: Any, columns: dict[str, str]) -> Table:
    """A rich table of a polars frame's ``columns`` (frame column -> header)."""
    return table(
        title, list(columns.values()), [[r[c] for c in columns] for r in df.iter_rows(named=True)]
    )


def progress(total: int, label: str) -> tuple[Progress, Callable[[dict], None]]:
    """A progress bar over ``total`` units and the callback that advances it by one unit."""
    prog = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    )
    task = prog.add_task(label, total=total, last="")

    def tick(st: dict) -> None:
        prog.update(task, advance=1, last=f"{st.get('unit', '')} {st.get('status', '')}")

    return prog, tick


def at_least(low: int, **options: int) -> None:
    """Refuse (before any work) a count option below ``low``; keys are option names."""
    for name, v in options.items():
        if v < low:
            raise TabreconError(f"--{name.replace('_', '-')} must be >= {low} (got {v})")


def positive_finite(**options: float) -> None:
    """Refuse (before any work) a time, budget or rate that is not a finite number > 0."""
    for name, v in options.items():
        if not (math.isfinite(v) and v > 0):
            raise TabreconError(f"--{name.replace('_', '-')} must be a finite number > 0 (got {v})")


def one_of(value: str, allowed: Sequence[str], option: str) -> str:
    """``value`` when it is one of ``allowed``; else an error naming the option."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise TabreconError(f"{option} must be one of {choices} (got {value!r})")
    return value


def ints(text: str, what: str) -> list[int]:
    """A comma list of whole numbers."""
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TabreconError(
            f"{what} must be a comma list of whole numbers (got {text!r})"
        ) from None


def floats(text: str, what: str) -> list[float]:
    """A comma list of numbers."""
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TabreconError(f"{what} must be a comma list of numbers (got {text!r})") from None


def solver_options(
    solver: str, threads: int, time_limit: float, seed: int, workers: int = 1
) -> Any:
    """Checked :class:`~tabrecon.engine.solvers.SolverOptions` from the solver options."""
    from ..engine.solvers import BACKENDS, SolverOptions

    one_of(solver, BACKENDS, "--solver")
    at_least(1, threads=threads, workers=workers)
    positive_finite(time_limit=time_limit)
    return SolverOptions(backend=solver, threads=threads, time_limit=time_limit, seed=seed)


def read_blocks(path: Path) -> Any:
    """A per-block ``tabrecon solvar`` output (Parquet or CSV), its columns checked."""
    import polars as pl

    from ..io import check_readable, read_error, require_columns

    if not path.exists():
        raise TabreconError(f"{path}: file not found (run `tabrecon solvar` first)")
    check_readable(path)
    try:  # read once, typed; the columns are checked on what was read
        df = pl.read_parquet(path) if str(path).endswith(".parquet") else pl.read_csv(path)
    except Exception as exc:  # polars raises several exception types for malformed files
        raise read_error(path, exc) from None
    need = ("block_geoid", "solvar", "status")
    require_columns(path, df.columns, need, "certification results (tabrecon solvar)")
    return df


def read_verdicts(path: Path) -> Any:
    """Each block's certification status, from ``tabrecon solvar``'s per-block output or
    ``tabrecon reconstruct --schema NAME``'s ``OUT_blocks.csv`` (whose block column is
    ``geoid``): columns ``block_geoid`` and ``status``."""
    import polars as pl

    from ..io import check_readable, read_error, require_columns

    if not path.exists():
        raise TabreconError(f"{path}: file not found (run `tabrecon reconstruct` first)")
    check_readable(path)
    try:
        df = pl.read_parquet(path) if str(path).endswith(".parquet") else pl.read_csv(path)
    except Exception as exc:  # polars raises several exception types for malformed files
        raise read_error(path, exc) from None
    if "block_geoid" not in df.columns and {"geoid", "status"} <= set(df.columns):
        df = df.rename({"geoid": "block_geoid"})
    require_columns(path, df.columns, ("block_geoid", "status"), "each block's verdict")
    return df.with_columns(pl.col("block_geoid").cast(pl.String))


def publication_rule(pop: Population, text: str, attacking: bool = True) -> Publication:
    """A ``--publication`` rule for population ``pop``: parsed, its tables checked; when
    ``attacking``, a warning where rounding lets no published 0 rule a type out in a schema
    of many types (blocks grow huge)."""
    from ..tables.publication import Publication, Rule

    pub = Publication.parse(pop.publication if text.strip() == "declared" else text)
    pub.check_tables([t.name for t in pop.tables()], pop.name)
    if (
        attacking
        and pub.rule == Rule.ROUNDED
        and not pub.exact
        and not pub.zeros_exact
        and pop.schema.n_types > 10_000
    ):
        err.print(
            f"[yellow]warning:[/yellow] under {pub} a published 0 no longer rules a type out, so "
            f"each block's program has up to {pop.schema.n_types:,} variables (households: "
            "measured 45 s per block, most undecided at a 30 s limit); with :zeros-exact or "
            "suppress:T zeros still rule types out"
        )
    return pub


def released(schema: str, release: str) -> Population:
    """The population ``--schema`` names as published in ``--release`` (a release not among
    the choices, or one whose tables it does not declare, is refused by name)."""
    from ..tables.declaration import population
    from ..vocab import Release

    one_of(release, Release.choices(), "--release")
    return population(schema).in_release(release)  # SF1 2010: the population itself
