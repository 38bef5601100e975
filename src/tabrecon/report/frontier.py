"""Pictures of the privacy-accuracy frontier (computed by :mod:`tabrecon.metrics.frontier`):
accuracy and its marginal rate against epsilon, the attack's measured success on the same axis,
and randomized response's closed forms beside simulation."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..io import write_figure


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def frontier_plot(front: pl.DataFrame, path: Path, title: str = "") -> None:
    """:func:`frontier_figure` written to ``path``."""
    fig = frontier_figure(front, title)
    write_figure(fig, path)
    _plt().close(fig)


def frontier_figure(front: pl.DataFrame, title: str = ""):
    """Two panels (three with measured risk): root mean squared error per cell and the slope
    dI/d epsilon against epsilon, one line per strategy; the attack's nonmodal precision and the
    PRG baseline from ``tradeoff`` where the frontier carries them."""
    plt = _plt()
    risk = (
        "attack_nonmodal_precision" in front.columns
        and front["attack_nonmodal_precision"].drop_nulls().len()
    )
    n = 3 if risk else 2
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.2), dpi=110)
    ax, bx = axes[0], axes[1]
    for name in dict.fromkeys(front["strategy"].to_list()):
        d = front.filter(pl.col("strategy") == name).sort("epsilon")
        ax.plot(d["epsilon"], d["rmse_per_cell"], "o-", ms=3, label=name)
        bx.plot(d["epsilon"], d["dI_depsilon"], "o-", ms=3, label=name)
    if "rmse_block_cell" in front.columns:
        m = front.filter(pl.col("rmse_block_cell").is_not_null()).unique(
            "epsilon", keep="first", maintain_order=True
        )
        if m.height:
            ax.plot(
                m["epsilon"],
                m["rmse_block_cell"],
                "k*",
                ms=8,
                label="measured: the defense's release (tradeoff)",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="epsilon (delta 1e-10 for zCDP budgets)",
        ylabel="expected RMSE per published cell",
        title="accuracy: sqrt(-I / cells)",
    )
    bx.set(
        xscale="log",
        yscale="log",
        xlabel="epsilon",
        ylabel="dI / d epsilon",
        title="marginal rate of transformation",
    )
    axes_used = [ax, bx]
    if risk:
        cx = axes[2]
        d = front.filter(pl.col("attack_nonmodal_precision").is_not_null())
        d = d.unique("epsilon", keep="first", maintain_order=True).sort("epsilon")
        cx.plot(d["epsilon"], d["attack_nonmodal_precision"], "o-", label="attack, nonmodal")
        if "prg_nonmodal_precision" in d.columns:
            cx.plot(d["epsilon"], d["prg_nonmodal_precision"], "^--", label="PRG, nonmodal")
        if "mdg_nonmodal_precision" in d.columns:
            cx.plot(d["epsilon"], d["mdg_nonmodal_precision"], "v:", label="MDG, nonmodal")
        cx.set(
            xscale="log",
            xlabel="epsilon",
            ylabel="precision (%)",
            title="measured reidentification (tradeoff)",
        )
        axes_used.append(cx)
    from matplotlib.ticker import ScalarFormatter

    for a in axes_used:
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=7)
        a.xaxis.set_major_formatter(ScalarFormatter())
        a.xaxis.set_minor_formatter(ScalarFormatter())
        a.tick_params(axis="x", which="minor", labelsize=6)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def rr_plot(rr: pl.DataFrame, path: Path) -> None:
    """Randomized response: the variance of pi-hat and dI/d epsilon in closed form (curves)
    beside simulation and a numerical derivative (points)."""
    import numpy as np

    from ..defenses import randomized_response as rrm
    from ..metrics.frontier import rr_slope

    plt = _plt()
    pi, n = float(rr["pi"][0]), int(rr["n"][0])
    eps = rr["epsilon"].to_numpy()
    grid = np.geomspace(eps.min(), eps.max(), 200)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.4, 4.2), dpi=110)
    ax.plot(
        grid, [rrm.variance(pi, rrm.rho_for_epsilon(e), n) for e in grid], "-", label="closed form"
    )
    ax.plot(rr["epsilon"], rr["var_sim"], "o", ms=4, label=f"simulated ({rr['reps'][0]:,} surveys)")
    ax.axhline(rrm.variance(pi, 1.0, n), color="grey", ls=":", label="no privacy: Var(pi-hat; 1)")
    bx.plot(grid, [rr_slope(pi, e, n) for e in grid], "-", label="closed form I'(rho) rho'(eps)")
    bx.plot(rr["epsilon"], rr["dI_deps_numeric"], "o", ms=4, label="numerical derivative")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="epsilon",
        ylabel="Var(pi-hat)   (I = Var(1) - Var)",
        title=f"randomized response, pi = {pi}, n = {n}, mu = 1/2",
    )
    bx.set(xscale="log", yscale="log", xlabel="epsilon", ylabel="dI / d epsilon")
    for a in (ax, bx):
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path)
    plt.close(fig)
