"""The reidentification report: Abowd et al. Tables 4-6 (CSV + markdown), a Francis-style precision
CDF plot (PNG) and ``summary.json`` -- every figure with its baselines beside it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..attacks.baselines import precision_cdf
from ..attacks.reidentify import GROUPS, SOURCES, ReidResult
from ..io import write_csv, write_figure, write_json, write_text
from ..schema import BLOCK_SIZE_LABELS

LABELS = {
    "attack": "reconstruction (attack)",
    "mdg": "MDG (block modal guess)",
    "prg": "PRG (proportional guess)",
    "truth": "truth released (upper bound)",
    "rvr": "Ruggles-Van Riper random blocks",
}


def _fmt(v: object) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _md(df: pl.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |"
    sep = "|" + "---|" * df.width
    rows = ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in df.iter_rows()]
    return "\n".join([head, sep, *rows])


def paper_tables(res: ReidResult) -> dict[str, pl.DataFrame]:
    """Table 4 (all persons), Table 5 (nonmodal, with precision by block size), Table 6
    (certified)."""
    return paper_tables_from_rates(res.rates(by_bin=True))


# Ruggles-Van Riper scores random records in random blocks: a match rate, not the precision of an
# inference about the linked persons, so it is kept out of the precision tables (see RVR_NOTE)
PRECISION_SOURCES = tuple(s for s in SOURCES if s != "rvr")
RVR_NOTE = (
    "The Ruggles-Van Riper null model rebuilds each block from random records of the national sex "
    "and age mix and scores race as right with the average share of persons in their block's "
    "majority group. It measures how often a random record of the right sex and age exists in a "
    "block, not how often an inference about a linked person is right: its race is right at the "
    "average majority share whoever the person is, so for nonmodal persons (by definition not in "
    "the majority) it overstates what such a guess would achieve, and it is shown apart from the "
    "precision tables."
)


def paper_tables_from_rates(rt: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The paper tables from a rates frame (``ReidResult.rates(by_bin=True)`` layout, or the sum of
    several: group, bin, source, attacker_records, putative, confirmed and the three per cents).

    Values are not rounded: every report formats them the same way, so a figure reads the same in
    a table, a headline and the CSV it comes from."""
    allbin = rt.filter(pl.col("bin") == "all")
    prec = allbin.filter(pl.col("source").is_in(PRECISION_SOURCES))

    def table(group: str) -> pl.DataFrame:
        t = prec.filter(pl.col("group") == group)
        return t.select(
            pl.col("source").replace_strict(LABELS).alias("race source"),
            pl.col("attacker_records").alias("attacker records"),
            "putative",
            "confirmed",
            pl.col("putative_pct").alias("putative %"),
            pl.col("confirmed_pct").alias("confirmed %"),
            pl.col("precision_pct").alias("precision %"),
        )

    by_bin = (
        rt.filter(
            (pl.col("group") == "nonmodal")
            & (pl.col("bin") != "all")
            & pl.col("source").is_in(PRECISION_SOURCES)
        )
        .select(
            pl.col("bin").alias("block size (persons)"),
            pl.col("source").replace_strict(LABELS).alias("source"),
            "precision_pct",
        )
        .pivot(on="source", index="block size (persons)", values="precision_pct")
    )
    rvr = allbin.filter((pl.col("source") == "rvr") & pl.col("group").is_in(["all", "nonmodal"]))
    rvr_table = rvr.select(
        pl.col("group").alias("persons"),
        pl.col("attacker_records").alias("attacker records"),
        pl.col("putative").alias("random record matched"),
        pl.col("confirmed").alias("matched, race scored right"),
        pl.col("putative_pct").alias("matched %"),
        pl.col("confirmed_pct").alias("matched, race scored right %"),
    )
    t6 = []
    for s in PRECISION_SOURCES:
        row = {"race source": LABELS[s]}
        for g, lab in (
            ("certified_nonmodal", "certified nonmodal precision %"),
            ("certified_uniques", "certified nonmodal uniques precision %"),
            ("uniques", "population uniques precision %"),
        ):
            r = allbin.filter((pl.col("group") == g) & (pl.col("source") == s)).row(0, named=True)
            row[lab] = r["precision_pct"]
            row[lab.replace("precision %", "putative")] = r["putative"]
        t6.append(row)
    return {
        "table4_all": table("all"),
        "table5_nonmodal": table("nonmodal"),
        "table5_nonmodal_by_block_size": by_bin,
        "table6_certified": pl.DataFrame(t6),
        "table4_modal": table("modal"),
        "rvr_null_model": rvr_table,
    }


def precision_plot(res: ReidResult, path: Path) -> None:
    """Share of persons with precision >= p (Francis Figure 1), attack and baselines on one axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for s, style in (("attack", "-"), ("mdg", "--"), ("prg", ":"), ("truth", "-.")):
        v = res.person_precision(s)
        if v.size:
            g, share = precision_cdf(v)
            ax.plot(100 * g, 100 * share, style, label=LABELS[s])
    g, share = precision_cdf(res.francis["precision"].to_numpy())
    ax.plot(
        100 * g,
        100 * share,
        color="grey",
        label=f"Francis majority inference (threshold {res.meta['francis_threshold']})",
    )
    ax.set_xlabel("precision p (%)")
    ax.set_ylabel("persons with precision >= p (%)")
    ax.set_title("Per-person precision: block-level confirmed / putative")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path)
    plt.close(fig)


def write_reid_report(res: ReidResult, out: str | Path, how: str = "") -> dict:
    """Write CSVs, ``report.md``, ``precision_cdf.png`` and ``summary.json``; return the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tabs = paper_tables(res)
    for name, df in tabs.items():
        write_csv(df, out / f"{name}.csv")
    write_csv(res.rates(by_bin=True), out / "rates_by_group_source_bin.csv")
    precision_plot(res, out / "precision_cdf.png")
    summ = res.summary()
    summ["how_measured"] = how or "tabrecon reidentify"
    write_json(out / "summary.json", summ, strict=True)  # for any JSON parser
    s = summ
    pct = lambda src, g: s[src][g]["precision_pct"]  # noqa: E731
    lines = [
        "# Reidentification report",
        "",
        f"Attacker data: **{res.meta['attacker']}** ({res.attacker_report.records:,} records); "
        f"seed {res.meta['seed']}; "
        f"ties broken by {res.meta['tie_breaking']}.",
        *[f"- {x}" for x in res.attacker_report.lines()],
        "",
        "## Headline",
        "",
        f"- All persons: the reconstruction's precision is {_fmt(pct('attack', 'all'))}% against "
        f"{_fmt(pct('mdg', 'all'))}% for the modal guess and {_fmt(pct('prg', 'all'))}% for the "
        "proportional guess.",
        "- Persons unlike their neighbours (nonmodal, "
        f"{s['attack']['nonmodal']['attacker_records']:,} attacker records): "
        f"{_fmt(pct('attack', 'nonmodal'))}% against {_fmt(pct('mdg', 'nonmodal'))}% (MDG) and "
        f"{_fmt(pct('prg', 'nonmodal'))}% (PRG); releasing the truth itself would give "
        f"{_fmt(pct('truth', 'nonmodal'))}%.",
        "- Nonmodal population uniques in certified blocks (the attacker knows these records are "
        "exact): "
        f"{_fmt(pct('attack', 'certified_uniques'))}% against "
        f"{_fmt(pct('mdg', 'certified_uniques'))}% (MDG) and "
        f"{_fmt(pct('prg', 'certified_uniques'))}% (PRG), on "
        f"{s['attack']['certified_uniques']['putative']:,} putative records.",
        "",
        "Precision = confirmed / putative; putative and confirmed rates are per cent of attacker "
        "records. "
        "Baselines use the attack's putative set (methods.md section 4).",
        "",
        "## Table 4 layout: all persons",
        "",
        _md(tabs["table4_all"]),
        "",
        "## Table 5 layout: nonmodal persons",
        "",
        _md(tabs["table5_nonmodal"]),
        "",
        "Nonmodal precision % by block size:",
        "",
        _md(tabs["table5_nonmodal_by_block_size"]),
        "",
        "## Table 6 layout: certified blocks (solvar 0)",
        "",
        _md(tabs["table6_certified"]),
        "",
        "## Ruggles-Van Riper null model (not a precision)",
        "",
        _md(tabs["rvr_null_model"]),
        "",
        RVR_NOTE,
        "",
        "![per-person precision](precision_cdf.png)",
        "",
        f"Block-size bins: {', '.join(BLOCK_SIZE_LABELS)} (true block population). Groups: "
        f"{', '.join(GROUPS)}.",
        f"How measured: {summ['how_measured']}.",
    ]
    write_text(out / "report.md", "\n".join(lines) + "\n")
    return summ
