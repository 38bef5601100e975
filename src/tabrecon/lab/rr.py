"""Randomized response: simulation against the closed forms, and the privacy-accuracy curve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ..defenses import randomized_response as rr
from ..io import write_csv
from .dn import save_figure


def rr_experiment(
    out: Path,
    pi: float = 0.3,
    n: int = 1000,
    reps: int = 2000,
    epsilons: list[float] | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """For each epsilon (mu = 1/2): simulated mean and variance of pi-hat beside the closed forms,
    and a plot of the standard error and accuracy loss against epsilon."""
    epsilons = epsilons or [0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0]
    rng = np.random.default_rng(seed)
    rows = []
    pi_exact = pi
    for eps in epsilons:
        rho = rr.rho_for_epsilon(eps)
        est = rr.simulate(pi_exact, rho, n, reps, rng)
        rows.append(
            {
                "epsilon": eps,
                "rho": rho,
                "pi": pi_exact,
                "n": n,
                "reps": reps,
                "mean_sim": float(est.mean()),
                "var_sim": float(est.var(ddof=1)),
                "var_closed": rr.variance(pi_exact, rho, n),
                "accuracy_loss": rr.accuracy_loss(pi_exact, rho, n),
            }
        )
    df = pl.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(df, out / "randomized_response.csv")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0.05, 6, 200)
    se = [np.sqrt(rr.variance(pi_exact, rr.rho_for_epsilon(e), n)) for e in grid]
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=110)
    ax.plot(grid, se, label="standard error of pi-hat (closed form)")
    ax.plot(df["epsilon"], np.sqrt(df["var_sim"]), "o", label=f"simulated ({reps} surveys)")
    ax.axhline(
        np.sqrt(rr.variance(pi_exact, 1.0, n)), color="grey", ls=":", label="no privacy (rho = 1)"
    )
    ax.set_yscale("log")
    ax.set(
        xlabel="epsilon",
        ylabel="standard error",
        title=f"Randomized response, pi = {pi_exact}, n = {n}, mu = 1/2",
    )
    save_figure(fig, [ax], out / "randomized_response.png")
    return df
