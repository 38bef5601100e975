"""The JASON report's linear-reconstruction experiments (JSR-19-2F sections 4-5), each a sweep that
writes its rows to CSV as they are computed (a rerun skips the rows already there) and a PNG.

(a) :func:`recovery_vs_queries` -- bits recovered vs m at n = 1000 (Fig. 4-1);
(b) :func:`queries_needed_vs_n` -- queries for full recovery vs n and their ratio to n (Figs. 4-2,
    4-3), for the least-squares and the exact integer decoder, with the information-theoretic bound;
(c) :func:`recovery_under_gaussian` -- recovery vs m under Gaussian noise, n = 10, 40, 100 (Fig.
4-4); (d) :func:`epsilon_grid` -- recovery over epsilon x query multiple under Laplace noise (Fig.
5-7); (e) :func:`laplace_sum_accuracy` -- accuracy 1 - |S~ - S| / S of a noisy sum vs N and epsilon
(Fig. 5-6). Seeds: trial t of a sweep uses ``default_rng([seed, n, t])``, so a row is the same
whatever else runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .. import provenance
from ..attacks.linear import (
    FINDERS,
    check_size,
    fraction_recovered,
    info_bound_noiseless,
    info_bound_noisy,
    jason_sigma,
    make_instance,
    prove_unique,
    queries_needed,
)
from ..errors import TabreconError
from ..interrupts import Interrupted, check, keeps
from ..io import append_row, remove_file, write_csv, write_figure
from ..provenance import check_or_record
from ..runner import notice

Progress = Callable[[str], None] | None


class Sweep:
    """Rows of a sweep in a CSV file, appended as they come; keys already present are skipped.

    ``fingerprint`` holds the settings every row depends on beyond its keys (seed, decoder, time
    limits); it is recorded beside the CSV (``<name>.run.json``) and a resumed sweep with other
    settings is refused rather than mixed (:mod:`tabrecon.provenance`)."""

    def __init__(
        self,
        path: Path,
        keys: tuple[str, ...],
        resume: bool = True,
        fingerprint: dict | None = None,
        total: int | None = None,
    ) -> None:
        self.path, self.keys = path, keys
        path.parent.mkdir(parents=True, exist_ok=True)
        self.done: set[tuple] = set()
        record = path.with_suffix(".run.json")
        if not resume:
            remove_file(record)
        fp = provenance.fingerprint(**(fingerprint or {}))
        check_or_record(record, fp, str(path), outputs=(path,) if resume else ())
        if resume and path.exists() and path.stat().st_size:
            self.done = self._on_disk()
            notice(f"{path}: {len(self.done)} result(s) kept from an earlier run")
        elif path.exists():
            remove_file(path)
        keeps(lambda: Interrupted(len(self._on_disk()), total, str(path), "results"))

    def _on_disk(self) -> set[tuple]:
        """The keys of the rows in the CSV file (what a rerun skips)."""
        if not self.path.exists() or not self.path.stat().st_size:
            return set()
        df = pl.read_csv(self.path)
        return {tuple(str(v) for v in r) for r in df.select(list(self.keys)).iter_rows()}

    def has(self, **key) -> bool:
        return tuple(str(key[k]) for k in self.keys) in self.done

    def add(self, row: dict) -> None:
        append_row(self.path, row)
        self.done.add(tuple(str(row[k]) for k in self.keys))
        check()  # an interrupt Python swallowed stops the sweep here (interrupts.check)

    def frame(self) -> pl.DataFrame:
        return (
            pl.read_csv(self.path)
            if self.path.exists() and self.path.stat().st_size
            else pl.DataFrame()
        )


def _rng(seed: int, *parts: int) -> np.random.Generator:
    return np.random.default_rng([seed, *[int(p) for p in parts]])


def _plot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, axes, path: Path) -> None:
    """Grid and legend on every axes, tight layout, write the PNG, free the figure."""
    plt = _plot()
    for a in axes:
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path)
    plt.close(fig)


def _positive(**vals) -> None:
    for k, v in vals.items():
        if isinstance(v, Iterable) and not isinstance(v, str):
            bad = [x for x in v if not x > 0]
            if bad or not list(v):
                raise TabreconError(
                    f"{k} must be a non-empty list of positive values (got {list(v)})"
                )
        elif not v > 0:
            raise TabreconError(f"{k} must be positive (got {v})")


# (a)
# -------------------------------------------------------------------------------------------------
def recovery_vs_queries(
    out: Path,
    n: int = 1000,
    ms: list[int] | None = None,
    trials: int = 10,
    decoder: str = "lsq",
    seed: int = 0,
    resume: bool = True,
    progress: Progress = None,
) -> pl.DataFrame:
    """Fraction of bits recovered vs m (noiseless): per m the 10/50/90% deciles and mean (Fig.
    4-1)."""
    ms = ms or [int(f * n) for f in (0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8)]
    _positive(n=n, trials=trials, ms=ms)
    check_size(n, max(ms))
    sw = Sweep(
        out / "recovery_vs_queries.csv",
        ("n", "m", "trial"),
        resume,
        {"decoder": decoder, "seed": seed},
        total=len(set(ms)) * trials,
    )
    for t in range(trials):
        inst = None
        for m in ms:
            if sw.has(n=n, m=m, trial=t):
                continue
            inst = inst or make_instance(n, max(ms), _rng(seed, n, t))
            sw.add(
                {
                    "n": n,
                    "m": m,
                    "trial": t,
                    "decoder": decoder,
                    "recovered": fraction_recovered(inst.first(m), decoder),
                }
            )
            if progress:
                progress(f"n={n} m={m} trial {t}")
    df = sw.frame()
    summ = (
        df.group_by("m")
        .agg(
            pl.col("recovered").quantile(0.1, "linear").alias("p10"),
            pl.col("recovered").quantile(0.5, "linear").alias("p50"),
            pl.col("recovered").quantile(0.9, "linear").alias("p90"),
            pl.col("recovered").mean().alias("mean"),
            pl.len().alias("trials"),
        )
        .sort("m")
    )
    write_csv(summ, out / "recovery_vs_queries_summary.csv")
    plt = _plot()
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=110)
    ax.fill_between(summ["m"], summ["p10"], summ["p90"], alpha=0.25, label="10-90% of trials")
    ax.plot(summ["m"], summ["p50"], "-o", ms=3, label="median")
    ax.plot(summ["m"], summ["mean"], "--", label="mean")
    ax.axvline(
        float(info_bound_noiseless(n)), color="grey", ls=":", label="2n/log2 n (information bound)"
    )
    ax.set(
        xlabel="queries m",
        ylabel="fraction of bits recovered",
        title=f"Bounded least squares, n = {n}, no noise",
    )
    save_figure(fig, [ax], out / "recovery_vs_queries.png")
    return summ


# (b) + (f)
# -------------------------------------------------------------------------------------------
def queries_needed_vs_n(
    out: Path,
    ns: list[int] | None = None,
    trials: int = 3,
    decoders: tuple[str, ...] = ("lsq",),
    seed: int = 0,
    exact_time_limit: float = 10.0,
    resume: bool = True,
    progress: Progress = None,
    exact_finder: str = "auto",
) -> dict[str, float]:
    """Queries for full recovery vs n for each decoder; returns the fitted slope per decoder.

    ``exact_finder`` picks how the exact decoder looks for the database (``auto``, ``cpsat`` or
    ``lattice``, see :func:`~tabrecon.attacks.linear.decode_exact`); other than ``auto`` it is part
    of the decoder's label (``exact/cpsat``), so finders compared in one directory get their own
    curves.
    """
    ns = ns or list(range(100, 1001, 100))
    _positive(ns=ns, trials=trials)
    if min(ns) < 2:  # one bit: its one random query may be empty, and 2n/log2(n) is undefined
        raise TabreconError(f"--ns: each n must be at least 2 (got {min(ns)})")
    if exact_finder not in FINDERS:
        raise TabreconError(
            f"unknown exact finder {exact_finder!r}; choose from {', '.join(FINDERS)}"
        )
    sw = Sweep(
        out / "queries_needed.csv",
        ("decoder", "n", "trial"),
        resume,
        {"seed": seed, "exact_time_limit": exact_time_limit},
        total=len(decoders) * len(set(ns)) * trials,
    )
    labels = {
        d: f"exact/{exact_finder}" if d == "exact" and exact_finder != "auto" else d
        for d in decoders
    }
    for dec in decoders:
        for n in ns:
            check_size(n, n)
            for t in range(trials):
                if sw.has(decoder=labels[dec], n=n, trial=t):
                    continue
                inst = make_instance(n, n, _rng(seed, n, t))
                kw: dict[str, Any] = (
                    {"time_limit": exact_time_limit, "finder": exact_finder, "prove": False}
                    if dec == "exact"
                    else {}
                )
                t0 = time.perf_counter()
                m = queries_needed(inst, dec, **kw)
                secs = time.perf_counter() - t0
                proven, t1 = "", time.perf_counter()
                if dec == "exact" and m is not None:  # can the attacker also prove it, at that m?
                    proven = prove_unique(
                        inst.Q[:m], inst.a[:m], inst.x, time_limit=exact_time_limit
                    )
                sw.add(
                    {
                        "decoder": labels[dec],
                        "n": n,
                        "trial": t,
                        "m_needed": -1 if m is None else m,
                        "ratio": float("nan") if m is None else m / n,
                        "seconds": round(secs, 2),
                        "proof": proven,
                        "proof_seconds": round(time.perf_counter() - t1, 2),
                    }
                )
                if progress:
                    said = f"{m} queries" if m is not None else f"not recovered with all {n}"
                    progress(f"{labels[dec]} n={n} trial {t}: {said}")
    df = sw.frame().filter(pl.col("m_needed") > 0)
    slopes: dict[str, float] = {}
    plt = _plot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4), dpi=110)
    for dec in dict.fromkeys(df["decoder"].to_list()) if df.height else ():
        d = df.filter(pl.col("decoder") == dec)
        g = d.group_by("n").agg(pl.col("m_needed").mean(), pl.col("ratio").mean()).sort("n")
        label = dec
        if g.height >= 2:  # a slope needs two sizes
            nn, mm = d["n"].to_numpy().astype(float), d["m_needed"].to_numpy().astype(float)
            slope, _ = np.polyfit(nn, mm, 1)
            slopes[dec] = float(slope)
            label = f"{dec}: slope {slope:.3f}"
        ax.plot(g["n"], g["m_needed"], "o-", ms=3, label=label)
        bx.plot(g["n"], g["ratio"], "o-", ms=3, label=dec)
    if "proof" in df.columns:  # exact finds the attacker could also prove unique
        pr = df.filter(pl.col("proof") == "unique")
        if pr.height:
            bx.plot(pr["n"], pr["ratio"], "k^", ms=5, mfc="none", label="exact, proven unique")
    all_n = [*ns, *(df["n"].to_list() if df.height else [])]
    grid = np.linspace(max(min(all_n), 4), max(all_n), 100)
    ax.plot(grid, info_bound_noiseless(grid), "k:", label="2n/log2 n (information bound)")
    bx.plot(grid, info_bound_noiseless(grid) / grid, "k:", label="2/log2 n")
    ax.set(
        xlabel="database size n",
        ylabel="queries for full recovery",
        title="Queries needed (no noise)",
    )
    bx.set(xlabel="database size n", ylabel="queries / n", title="Ratio to n")
    save_figure(fig, [ax, bx], out / "queries_needed.png")
    slope = pl.DataFrame({"decoder": list(slopes), "slope": list(slopes.values())})
    write_csv(slope, out / "queries_needed_slope.csv")
    # the plot shows every decoder in the directory; the slopes returned are the ones asked for
    return {labels[d]: slopes[labels[d]] for d in decoders if labels[d] in slopes}


# (c)
# -------------------------------------------------------------------------------------------------
def recovery_under_gaussian(
    out: Path,
    ns: tuple[int, ...] = (10, 40, 100),
    multiples: list[float] | None = None,
    trials: int = 20,
    decoder: str = "lsq",
    seed: int = 0,
    resume: bool = True,
    progress: Progress = None,
) -> pl.DataFrame:
    """Mean fraction recovered vs m under Gaussian noise of JASON's scale sqrt(n) ln(n)/2 (Fig.
    4-4)."""
    multiples = multiples or [1, 2, 5, 10, 20, 50, 100, 200]
    _positive(ns=ns, multiples=multiples, trials=trials)
    sw = Sweep(
        out / "recovery_gaussian.csv",
        ("n", "m", "trial"),
        resume,
        {"decoder": decoder, "seed": seed},
        total=sum(len({max(1, int(f * n)) for f in multiples}) for n in set(ns)) * trials,
    )
    for n in ns:
        sigma = jason_sigma(n)
        ms = sorted({max(1, int(f * n)) for f in multiples})
        check_size(n, max(ms))
        for t in range(trials):
            inst = None
            for m in ms:
                if sw.has(n=n, m=m, trial=t):
                    continue
                inst = inst or make_instance(n, max(ms), _rng(seed, n, t), "gaussian", sigma=sigma)
                sw.add(
                    {
                        "n": n,
                        "m": m,
                        "trial": t,
                        "sigma": sigma,
                        "recovered": fraction_recovered(inst.first(m), decoder),
                    }
                )
            if progress:
                progress(f"n={n} trial {t}")
    df = (
        sw.frame()
        .group_by("n", "m", "sigma")
        .agg(pl.col("recovered").mean().alias("mean"), pl.len().alias("trials"))
        .sort("n", "m")
    )
    write_csv(df, out / "recovery_gaussian_summary.csv")
    plt = _plot()
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=110)
    for n in ns:
        d = df.filter(pl.col("n") == n)
        line = ax.plot(
            d["m"], d["mean"], "o-", ms=3, label=f"n = {n} (sigma = {jason_sigma(n):.1f})"
        )[0]
        ax.axvline(info_bound_noisy(jason_sigma(n)), color=line.get_color(), ls=":", lw=0.8)
    ax.set_xscale("log")
    ax.set(
        xlabel="queries m",
        ylabel="mean fraction recovered",
        title="Gaussian noise (dotted: 16 sigma^2 / ln 2 information bound)",
    )
    save_figure(fig, [ax], out / "recovery_gaussian.png")
    return df


# (d)
# -------------------------------------------------------------------------------------------------
def epsilon_grid(
    out: Path,
    n: int = 200,
    epsilons: list[float] | None = None,
    multiples: list[int] | None = None,
    trials: int = 3,
    decoder: str = "lsq",
    seed: int = 0,
    resume: bool = True,
    progress: Progress = None,
) -> pl.DataFrame:
    """Fraction recovered over epsilon x (m / n) with exact discrete Laplace(1/epsilon) noise (Fig.
    5-7).

    The report used n = 4000 (``--full``); the default n = 200 finishes in minutes.
    """
    epsilons = epsilons or [0.01, 0.03, 0.1, 0.3, 1.0]
    multiples = multiples or [1, 5, 10, 20]
    _positive(n=n, epsilons=epsilons, multiples=multiples, trials=trials)
    check_size(n, max(multiples) * n)
    sw = Sweep(
        out / "epsilon_grid.csv",
        ("n", "epsilon", "multiple", "trial"),
        resume,
        {"decoder": decoder, "seed": seed},
        total=len(set(epsilons)) * len(set(multiples)) * trials,
    )
    for eps in epsilons:
        for t in range(trials):
            inst = None
            for k in multiples:
                if sw.has(n=n, epsilon=eps, multiple=k, trial=t):
                    continue
                inst = inst or make_instance(
                    n,
                    max(multiples) * n,
                    _rng(seed, n, t, int(eps * 1e6)),
                    "discrete_laplace",
                    epsilon=eps,
                )
                sw.add(
                    {
                        "n": n,
                        "epsilon": eps,
                        "multiple": k,
                        "trial": t,
                        "recovered": fraction_recovered(inst.first(k * n), decoder),
                    }
                )
            if progress:
                progress(f"eps={eps} trial {t}")
    df = (
        sw.frame()
        .group_by("epsilon", "multiple")
        .agg(pl.col("recovered").mean().alias("mean"))
        .sort("epsilon", "multiple")
    )
    write_csv(df, out / "epsilon_grid_summary.csv")
    piv = df.pivot(on="multiple", index="epsilon", values="mean").sort("epsilon")
    plt = _plot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    im = ax.imshow(
        piv.drop("epsilon").to_numpy(),
        origin="lower",
        vmin=0.5,
        vmax=1.0,
        aspect="auto",
        cmap="viridis",
    )
    ax.set_xticks(range(len(piv.columns) - 1), piv.columns[1:])
    ax.set_yticks(range(piv.height), [f"{e:g}" for e in piv["epsilon"]])
    ax.set(
        xlabel="queries / n",
        ylabel="epsilon per query",
        title=f"Fraction recovered, Laplace noise, n = {n}",
    )
    for i in range(piv.height):
        for j, c in enumerate(piv.columns[1:]):
            ax.text(j, i, f"{piv[c][i]:.2f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(im)
    fig.tight_layout()
    write_figure(fig, out / "epsilon_grid.png")
    plt.close(fig)
    return df


# (e)
# -------------------------------------------------------------------------------------------------
def laplace_sum_accuracy(
    out: Path,
    Ns: list[int] | None = None,
    epsilons: list[float] | None = None,
    trials: int = 200,
    seed: int = 0,
) -> pl.DataFrame:
    """Accuracy A = 1 - |S~ - S| / S of a sum of N bits released with discrete Laplace(1/eps) noise.

    Measured (mean over trials, exact OpenDP noise) beside the closed form 1 - E|noise| / S.
    """
    from ..defenses.mechanisms import discrete_laplace

    Ns = Ns or [10, 100, 1000, 10_000, 100_000]
    epsilons = epsilons or [0.01, 0.1, 1.0]
    _positive(Ns=Ns, epsilons=epsilons, trials=trials)
    rows = []
    for eps in epsilons:
        mech = discrete_laplace(eps, 1.0)
        q = np.exp(-1.0 / mech.scale)
        mean_abs = 2 * q / ((1 - q) * (1 + q))  # E|K| of the two-sided geometric
        for N in Ns:
            rng = _rng(seed, N, int(eps * 1e6))
            S = rng.binomial(N, 0.5, size=trials).astype(float)
            S = np.maximum(S, 1.0)
            noisy = S + mech.sample(trials)
            acc = 1 - np.abs(noisy - S) / S
            rows.append(
                {
                    "N": N,
                    "epsilon": eps,
                    "measured": float(acc.mean()),
                    "closed_form": float(1 - mean_abs / (N / 2)),
                    "trials": trials,
                }
            )
    df = pl.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(df, out / "laplace_sum_accuracy.csv")
    plt = _plot()
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=110)
    for eps in epsilons:
        d = df.filter(pl.col("epsilon") == eps)
        line = ax.plot(d["N"], d["measured"], "o", label=f"epsilon = {eps:g} (measured)")[0]
        ax.plot(d["N"], d["closed_form"], "-", color=line.get_color(), lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(-1, 1.02)
    ax.set(
        xlabel="N (records summed)",
        ylabel="accuracy 1 - |S~ - S| / S",
        title="Laplace-noised sum (lines: closed form)",
    )
    save_figure(fig, [ax], out / "laplace_sum_accuracy.png")
    return df
