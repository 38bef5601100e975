"""End-to-end runs that chain the pipeline steps: the demo (a synthetic county audited end to end)
and the risk-against-accuracy sweep over defenses."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from .provenance import check_or_record, digest_microdata, fingerprint
from .schema import write_microdata
from .synth import SynthConfig, synthesize
from .tables import tabulate


def run_demo(
    out: str | Path,
    persons: int = 20_000,
    seed: int = 2010,
    cfg=None,
    console: Console | None = None,
    show_progress: bool = True,
):
    """Synthesize a county (``out/synthetic_county.parquet``) and audit it: the whole pipeline and
    its HTML report (``out/report.html``). Returns the :class:`~tabrecon.audit.AuditResult`."""
    from .audit import audit
    from .config import load_config

    con = console or Console()
    cfg = cfg or load_config(None, run={"seed": seed})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    md = synthesize(SynthConfig(persons=persons), seed=seed)
    src = out / "synthetic_county.parquet"
    write_microdata(md, src)
    con.print(
        f"synthesized {len(md):,} persons in {len(md.geoids):,} blocks "
        f"({time.perf_counter() - t0:.1f} s, "
        f"seed {seed}) -> {src}"
    )
    return audit(
        src,
        out,
        cfg,
        console=con,
        show_progress=show_progress,
        command=f"tabrecon demo --out {out} --persons {persons} --seed {seed}",
    )


def _defend(md, spec: str, seed: int, workers: int = 1):
    """Apply a defense named by ``spec``: none, swap-lo, swap-hi, swap=<rate> (swap-lo's design at
    another household rate), dhc2023-like, rho=<x> or eps=<x> (dhc shares; eps converted to rho by
    CKS at delta 1e-10). Returns (protected records, info, TopDown's noisy measurements or None)."""
    from dataclasses import replace

    from .config import check_defense
    from .defenses.mechanisms import epsilon_to_rho
    from .defenses.swapping import PRESETS, swap
    from .defenses.topdown import dhc2023_like, topdown
    from .errors import TabreconError

    problem = check_defense(spec)
    if problem is not None:
        raise TabreconError(f"defense {spec!r}: {problem}")

    if spec == "none":
        return md, {"kind": "none"}, None
    if spec in PRESETS or spec.startswith("swap="):
        if spec in PRESETS:
            conf = PRESETS[spec]
        else:
            try:
                conf = replace(PRESETS["swap-lo"], rate=float(spec[5:]), name=spec)
            except ValueError:
                raise TabreconError(
                    f"defense {spec!r}: the rate must be a number, e.g. swap=0.2"
                ) from None
        r = swap(md, conf, seed)
        return r.records, {"kind": "swap", **r.summary()}, None
    if spec == "dhc2023-like" or spec.startswith(("rho=", "eps=")):
        try:
            rho = 4.9622 if spec == "dhc2023-like" else float(spec[4:])
        except ValueError:
            raise TabreconError(
                f"defense {spec!r}: the budget must be a number, e.g. {spec[:4]}2.5"
            ) from None
        if spec.startswith("eps="):
            rho = epsilon_to_rho(rho)
        r = topdown(md, dhc2023_like(rho), workers=workers)
        return (
            r.records,
            {
                "kind": "topdown",
                "rho": rho,
                **{k: v for k, v in r.privacy.items() if k != "levels"},
                "seconds_by_level": r.seconds_by_level,
                "fallbacks": r.fallbacks,
            },
            r.measurements,
        )
    raise TabreconError(
        f"unknown defense {spec!r}; use none, swap-lo, swap-hi, swap=<rate>, dhc2023-like, "
        "rho=<budget> "
        "or eps=<budget>"
    )


def run_tradeoff(
    truth,
    defenses: list[str],
    out: str | Path,
    seed: int = 0,
    resume: bool = True,
    console: Console | None = None,
) -> pl.DataFrame:  # noqa: F821
    """For each defense: protect, publish, rerun the whole attack, measure risk and accuracy.

    One row per defense is appended to ``tradeoff.csv`` as it finishes (a rerun skips finished
    defenses); ``tradeoff.png`` plots nonmodal precision (attack, PRG, MDG) and block TVD accuracy
    against the budget, with the undefended and swapped releases as reference lines.
    """
    import json

    import polars as pl

    from .attacks.certify import certify
    from .attacks.reconstruct import reconstruct
    from .attacks.reidentify import reidentify
    from .defenses.topdown import tvd_by_level
    from .metrics.accuracy import block_accuracy

    con = console or Console()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "tradeoff.csv"
    record = out / "tradeoff.run.json"
    if not resume:
        csv_path.unlink(missing_ok=True)
        record.unlink(missing_ok=True)
    fp = fingerprint(truth=digest_microdata(truth), seed=seed)
    check_or_record(record, fp, str(csv_path), outputs=(csv_path,))
    done = set()
    if resume and csv_path.exists():
        done = set(pl.read_csv(csv_path)["defense"].to_list())
    for spec in defenses:
        if spec in done:
            con.print(f"{spec}: done earlier, kept")
            continue
        t0 = time.perf_counter()
        protected, info, _ = _defend(truth, spec, seed)
        ts = tabulate(protected)
        rec = reconstruct(ts, "block+tract").records
        cert = certify(ts, rec, "block+tract").blocks
        res = reidentify(rec, truth, "perfect", ts, cert, seed=seed)
        s = res.summary()
        tvd = tvd_by_level(truth, protected)
        acc = block_accuracy(truth, protected).row(0, named=True)
        row = {
            "defense": spec,
            "rho": info.get("rho", float("nan")),
            "epsilon": info.get("epsilon_cks_delta_1e-10", float("nan")),
            **{f"tvd_{k}": v for k, v in tvd.items()},
            "mae_block_total": acc["mae_block_total"],
            "mean_l1_race_eth": acc["mean_l1_race_eth"],
            "majority_kept_pct": acc["majority_kept_pct"],
            "certified_blocks": int(((cert["status"] == "unique") & (cert["persons"] > 0)).sum()),
            "blocks": cert.height,
        }
        for g in ("all", "modal", "nonmodal", "certified_uniques"):
            for src in ("attack", "mdg", "prg"):
                v = s[src][g]["precision_pct"]
                row[f"{src}_{g}_precision"] = float("nan") if v is None else v
            row[f"attack_{g}_putative"] = s["attack"][g]["putative"]
            # PRG without its draw noise: from the release's tables, and from the unprotected ones
            row[f"prg_expected_{g}_precision"] = res.expected_prg_precision(g)
            row[f"prg_original_{g}_precision"] = res.expected_prg_precision(g, original=True)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["info"] = json.dumps(info, default=str)
        df = pl.DataFrame([row])
        if csv_path.exists() and csv_path.stat().st_size:
            with open(csv_path, "a") as fh:
                fh.write(df.write_csv(include_header=False))
        else:
            df.write_csv(csv_path)
        con.print(
            f"{spec}: nonmodal precision attack {row['attack_nonmodal_precision']:.1f}% vs PRG "
            f"{row['prg_nonmodal_precision']:.1f}% / MDG {row['mdg_nonmodal_precision']:.1f}%; "
            "block TVD "
            f"{tvd['block']:.3f} ({row['seconds']} s)"
        )
    df = pl.read_csv(csv_path)
    _tradeoff_plot(df, out / "tradeoff.png")
    return df


def _tradeoff_plot(df, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import polars as pl

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
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
