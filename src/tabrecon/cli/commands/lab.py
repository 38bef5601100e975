"""``tabrecon dn ...``: the linear reconstruction lab's commands (the JASON experiments), each
parse -> one call of :mod:`tabrecon.lab.dn` or :mod:`tabrecon.lab.rr` -> print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...errors import TabreconError
from ..terminal import DnOut, Fresh, console, err, floats, ints, positive_finite, table

dn_app = typer.Typer(
    help="Linear reconstruction lab: Dinur-Nissim attacks under noise (the JASON experiments).",
    no_args_is_help=True,
)
Trials = Annotated[int, typer.Option()]
Seed = Annotated[int, typer.Option()]


def _say(label: str):
    return lambda msg: err.print(f"[dim]{label}: {msg}[/dim]")


@dn_app.command("recover")
def dn_recover(
    out: DnOut = Path("dn"),
    n: Annotated[int, typer.Option(help="Database size (bits)")] = 1000,
    ms: Annotated[
        str, typer.Option(help="Comma list of query counts (default 0.1n ... 0.8n)")
    ] = "",
    trials: Trials = 10,
    decoder: Annotated[str, typer.Option(help="lsq, lp or exact")] = "lsq",
    seed: Seed = 0,
    fresh: Fresh = False,
) -> None:
    """(a) Fraction of bits recovered vs number of queries, no noise (JASON Fig. 4-1)."""
    from ...lab.dn import recovery_vs_queries

    m_list = ints(ms, "--ms") or None
    df = recovery_vs_queries(out, n, m_list, trials, decoder, seed, not fresh, _say("recover"))
    rows = [[r["m"], r["p10"], r["p50"], r["p90"], r["mean"]] for r in df.iter_rows(named=True)]
    console.print(
        table(f"bits recovered, n = {n} ({decoder})", ["m", "p10", "median", "p90", "mean"], rows)
    )
    console.print(f"written {out}/recovery_vs_queries.csv, recovery_vs_queries.png")


@dn_app.command("queries-needed")
def dn_queries_needed(
    out: DnOut = Path("dn"),
    decoder: Annotated[str, typer.Option(help="lsq, lp, exact, or a comma list")] = "lsq",
    ns: Annotated[
        str, typer.Option(help="Comma list of n (default 100..1000; exact: 20..120)")
    ] = "",
    trials: Trials = 3,
    exact_time_limit: Annotated[
        float, typer.Option(help="Seconds per exact solve (time-out = not recovered)")
    ] = 10.0,
    exact_finder: Annotated[
        str,
        typer.Option(
            help="How exact decoding looks for the database: auto (CP-SAT, then lattice "
            "reduction), cpsat or lattice"
        ),
    ] = "auto",
    seed: Seed = 0,
    fresh: Fresh = False,
) -> None:
    """(b, f) Queries needed for full recovery vs n, their ratio to n, and the information bound."""
    from ...attacks.linear import DECODERS
    from ...lab.dn import queries_needed_vs_n

    decs = tuple(d.strip() for d in decoder.split(",") if d.strip())
    if not decs or any(d not in DECODERS for d in decs):
        raise TabreconError(f"--decoder must be among {', '.join(DECODERS)} (got {decoder!r})")
    positive_finite(exact_time_limit=exact_time_limit)
    n_list = ints(ns, "--ns") or (list(range(20, 121, 20)) if decs == ("exact",) else None)
    slopes = queries_needed_vs_n(
        out,
        n_list,
        trials,
        decs,
        seed,
        exact_time_limit,
        not fresh,
        _say("queries-needed"),
        exact_finder,
    )
    console.print(f"written {out}/queries_needed.csv, queries_needed.png")
    for d, sl in slopes.items():
        console.print(f"{d}: queries needed grow as {sl:.3f} n")
    if len(slopes) == 1:
        console.print(f"ratio: {next(iter(slopes.values())):.3f}")


@dn_app.command("noise")
def dn_noise(
    out: DnOut = Path("dn"),
    ns: Annotated[str, typer.Option(help="Comma list of n")] = "10,40,100",
    trials: Trials = 20,
    seed: Seed = 0,
    fresh: Fresh = False,
) -> None:
    """(c) Recovery vs queries under Gaussian noise of JASON's scale sqrt(n) ln(n) / 2
    (Fig. 4-4)."""
    from ...lab.dn import recovery_under_gaussian

    n_list = tuple(ints(ns, "--ns"))
    df = recovery_under_gaussian(out, n_list, None, trials, "lsq", seed, not fresh, _say("noise"))
    rows = [[r["n"], r["m"], f"{r['sigma']:.1f}", r["mean"]] for r in df.iter_rows(named=True)]
    console.print(
        table("mean fraction recovered under Gaussian noise", ["n", "m", "sigma", "mean"], rows)
    )
    console.print(f"written {out}/recovery_gaussian.csv, recovery_gaussian.png")


@dn_app.command("grid")
def dn_grid(
    out: DnOut = Path("dn"),
    n: Annotated[int, typer.Option(help="Database size (the report: 4000)")] = 200,
    epsilons: Annotated[str, typer.Option()] = "0.01,0.03,0.1,0.3,1",
    multiples: Annotated[str, typer.Option(help="Queries as multiples of n")] = "1,5,10,20",
    trials: Trials = 3,
    full: Annotated[bool, typer.Option(help="The report's size: n = 4000, 10 trials")] = False,
    seed: Seed = 0,
    fresh: Fresh = False,
) -> None:
    """(d) Fraction recovered over epsilon x query multiple, exact Laplace noise (Fig. 5-7)."""
    from ...lab.dn import epsilon_grid

    if full:
        n, trials = 4000, 10
    eps, mult = floats(epsilons, "--epsilons"), ints(multiples, "--multiples")
    df = epsilon_grid(out, n, eps, mult, trials, "lsq", seed, not fresh, _say("grid"))
    rows = [[r["epsilon"], r["multiple"], r["mean"]] for r in df.iter_rows(named=True)]
    console.print(table(f"mean fraction recovered, n = {n}", ["epsilon", "m / n", "mean"], rows))
    console.print(f"written {out}/epsilon_grid.csv, epsilon_grid.png")


@dn_app.command("laplace-sum")
def dn_laplace_sum(out: DnOut = Path("dn"), trials: Trials = 200, seed: Seed = 0) -> None:
    """(e) Accuracy of a Laplace-noised sum vs N and epsilon, measured beside the closed form
    (Fig. 5-6)."""
    from ...lab.dn import laplace_sum_accuracy

    df = laplace_sum_accuracy(out, trials=trials, seed=seed)
    cols = ["N", "epsilon", "measured", "closed_form"]
    rows = [[r[c] for c in cols] for r in df.iter_rows(named=True)]
    console.print(
        table("accuracy 1 - |S~ - S| / S", ["N", "epsilon", "measured", "closed form"], rows)
    )
    console.print(f"written {out}/laplace_sum_accuracy.csv, laplace_sum_accuracy.png")


@dn_app.command("rr")
def dn_rr(
    out: DnOut = Path("dn"),
    pi: Annotated[float, typer.Option(help="True share with the trait")] = 0.3,
    n: Annotated[int, typer.Option(help="Respondents per survey")] = 1000,
    reps: Annotated[int, typer.Option(help="Simulated surveys per epsilon")] = 2000,
    seed: Seed = 0,
) -> None:
    """Randomized response: simulated mean and variance of the estimator beside the closed forms."""
    from ...lab.rr import rr_experiment

    if not 0 <= pi <= 1:
        raise TabreconError(f"--pi must be in [0, 1] (got {pi})")
    df = rr_experiment(out, pi, n, reps, seed=seed)
    rows = [
        [r["epsilon"], r["rho"], r["mean_sim"], f"{r['var_sim']:.3g}", f"{r['var_closed']:.3g}"]
        for r in df.iter_rows(named=True)
    ]
    cols = ["epsilon", "rho", "mean (sim)", "var (sim)", "var (closed)"]
    console.print(table("randomized response (mu = 1/2)", cols, rows))
    console.print(f"written {out}/randomized_response.csv, randomized_response.png")
