"""The audit report's defense part: each release's agreement with the input, the privacy-accuracy
frontier at the defenses' budgets, the defenses' tables (:data:`DEFENSE_TABLES`, with a first row
for the release as published) and why the unbiased estimate's error is not TopDown's measured
one. The page around it is :mod:`tabrecon.report.html`'s.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import polars as pl

from ..audit.aggregate import defenses_by_name
from .page import (
    figure_html,
    fmt_pct,
    fmt_value,
    legend_html,
    png_base64,
    table_html,
)


def release_agreement(d: pl.DataFrame, th: int) -> list[str]:
    """Each release's agreement with the input by true block size (Abowd et al. Table 3
    layout): the protected records matched one-to-one to the input's, exact age and age bin."""
    by_size = [c for c in d.columns if c.startswith("agreement_binned_pct_")]
    if not by_size or "agreement_binned_pct" not in d.columns:
        return []
    t = d.select(
        "defense",
        pl.col("agreement_exact_pct").alias("exact age, all (%)"),
        pl.col("agreement_binned_pct").alias("age bin, all (%)"),
        *[
            pl.col(c).alias(f"age bin, {c.removeprefix('agreement_binned_pct_')} (%)")
            for c in by_size
        ],
    )
    return [
        "<p>What each release keeps of the input: its records matched one-to-one to the "
        "input's on block, sex, race, ethnicity and age (exact) or age bin, by true block size "
        "(Abowd et al. Table 3 layout; n/a where the input has no block of that size).</p>",
        table_html(t, th, "Agreement of each release with the input", "tbl-release-agreement"),
    ]


def frontier_section(front: pl.DataFrame, th: int, out: Path | None) -> list[str]:
    """The privacy-accuracy frontier at the defenses' budgets, beside their measured risk."""
    from .frontier import frontier_figure

    cols = [
        c
        for c in (
            "budget",
            "epsilon",
            "rmse_per_cell",
            "rmse_block_cell",
            "accuracy_I",
            "dI_depsilon",
            "attack_nonmodal_precision",
            "prg_nonmodal_precision",
        )
        if c in front.columns
    ]
    cells, units = int(front["cells"][0]), int(front["geounits"][0])
    return [
        '<h3 id="frontier">The privacy-accuracy frontier around these budgets</h3>'
        "<p>Accuracy I is minus the expected squared error of the block tables' "
        f"{cells} cells over the {units:,} blocks when TopDown's queries are measured at every "
        "level with the dhc2023-like shares and the block tables are estimated by least squares "
        "(the matrix mechanism, computed exactly; TopDown's own non-negative, rounded estimate "
        "differs). dI/d&epsilon; is the marginal rate of transformation: the accuracy one more "
        "unit of &epsilon; (&delta; = 10<sup>-10</sup>) buys. The measured attack and PRG are "
        "those of the defense at the same budget (table above).</p>",
        table_html(front.select(cols), th, "Frontier and measured risk", "tbl-frontier"),
        legend_html(cols),
        *_estimator_note(front),
        figure_html(
            png_base64(frontier_figure(front)),
            "Accuracy, its marginal rate and the measured attack against epsilon",
            "fig-frontier",
            out,
        ),
    ]


#: the defense part's tables, each narrow enough to read at 1,400 px: (columns, caption, id,
#: whether a first row shows the release without a defense)
DEFENSE_TABLES = (
    (
        (
            "defense",
            "rho",
            "epsilon",
            "attack_nonmodal_precision",
            "prg_nonmodal_precision",
            "mdg_nonmodal_precision",
            "certified_blocks",
            "attack_certified_uniques_precision",
        ),
        "Risk per defense (first row: the release as published)",
        "tbl-defenses",
        True,
    ),
    (
        (
            "defense",
            "tvd_block",
            "tvd_tract",
            "tvd_county",
            "mae_block_total",
            "rmse_block_cell",
            "mean_l1_race_eth",
            "majority_kept_pct",
        ),
        "Accuracy per defense (first row: the release as published)",
        "tbl-defense-accuracy",
        True,
    ),
    (
        (
            "defense",
            "prg_expected_nonmodal_precision",
            "prg_original_nonmodal_precision",
            "nmf_agreement_binned_pct",
            "nmf_all_precision",
            "nmf_nonmodal_precision",
        ),
        "PRG three ways, and the attack on TopDown's noisy measurements",
        "tbl-defense-more",
        False,
    ),
)


#: the name of the first row of the defense tables
NO_DEFENSE = "none (as published)"


def no_defense_row(summary: dict, like: pl.DataFrame) -> pl.DataFrame:
    """The release without a defense in ``like``'s columns: its risk from the audit's own
    reidentification and certification (summary.json), its accuracy exact by definition."""
    r = summary.get("reidentification", {})

    def prec(src: str, group: str) -> float | None:
        v = r.get(src, {}).get(group, {}).get("precision_pct")
        return None if v is None else float(v)

    exact = {"mae_block_total": 0.0, "rmse_block_cell": 0.0, "mean_l1_race_eth": 0.0}
    values = {
        "defense": NO_DEFENSE,
        "attack_nonmodal_precision": prec("attack", "nonmodal"),
        "prg_nonmodal_precision": prec("prg", "nonmodal"),
        "mdg_nonmodal_precision": prec("mdg", "nonmodal"),
        "attack_certified_uniques_precision": prec("attack", "certified_uniques"),
        "certified_blocks": summary.get("certify", {}).get("unique_blocks"),
        "majority_kept_pct": 100.0,
        **{c: 1.0 for c in like.columns if c.startswith("tvd_")},
        **exact,
    }
    return pl.DataFrame(
        [{c: values.get(c) for c in like.columns}], schema=like.schema, strict=False
    )


def _estimator_note(front: pl.DataFrame) -> list[str]:
    """One sentence per measured budget on why the unbiased estimate's expected error is not
    TopDown's measured one, and which to read."""
    if "rmse_block_cell" not in front.columns:
        return []
    m = front.filter(pl.col("rmse_block_cell").is_not_null()).unique(
        "budget", keep="first", maintain_order=True
    )
    return [
        f"<p>At {html.escape(str(r['budget']))} the unbiased least-squares estimate's expected "
        f"error is {fmt_value(r['rmse_per_cell'], 'rmse_per_cell')} persons per block cell, and "
        f"TopDown's measured error {fmt_value(r['rmse_block_cell'], 'rmse_block_cell')}: TopDown's "
        "tables are held non-negative, whole and consistent with the exact totals, which pulls "
        "the many small and zero cells back toward their true values. The expected error is the "
        "noise this budget puts into the measurements; the measured one is what users of the "
        "published tables see, so size a budget for those users by the measured one.</p>"
        for r in m.iter_rows(named=True)
    ]


def noise_words(s: dict) -> str:
    """Where this run's TopDown noise came from, in words (``[defenses] noise``)."""
    if s.get("config", {}).get("defenses", {}).get("noise") == "seeded":
        return (
            "TopDown's noise was drawn from the run's seed (<code>--noise seeded</code>): the "
            "same seed gives the same rows, as an experiment needs; a release is never made so."
        )
    return (
        "TopDown's noise comes from OpenDP's cryptographic sampler, as a release's must, so "
        "its rows differ from run to run (<code>--noise seeded</code> repeats them)."
    )


def spread_over_draws(t: pl.DataFrame) -> pl.DataFrame:
    """A defense table with a row per draw (``spec``, ``spec#2``, ...: ``[defenses] draws``)
    as a row per defense (:func:`~tabrecon.audit.aggregate.defenses_by_name`), each figure its
    median over the draws and their range in brackets (text); unchanged where every defense was
    drawn once.

    >>> t = pl.DataFrame({"defense": ["rho=1", "rho=1#2", "rho=1#3"], "tvd_block": [0.2, 0.4, 0.3]})
    >>> spread_over_draws(t).rows()
    [('rho=1 (3 draws)', '0.300 (0.200-0.400)')]
    """
    if not t.height or not t["defense"].str.contains("#").any():
        return t
    rows = []
    for d in defenses_by_name(t.to_dicts()):
        row = {"defense": d["defense"] + (f" ({d['draws']} draws)" if d["draws"] > 1 else "")}
        for c in t.columns[1:]:
            v = d[c]
            if isinstance(v, float) and v.is_integer() and t.schema[c].is_integer():
                v = int(v)  # a count's median written as the count it is
            lo_hi = d.get(f"{c}_range")
            spread = f" ({fmt_value(lo_hi[0], c)}-{fmt_value(lo_hi[1], c)})" if lo_hi else ""
            row[c] = fmt_value(v, c) + spread
        rows.append(row)
    return pl.DataFrame(rows, schema=dict.fromkeys(t.columns, pl.String), orient="row")


def draw_flips(d: pl.DataFrame) -> list[str]:
    """Where the draws of one defense disagree on whether the attack beats PRG on nonmodal
    persons: the conclusion depends on the draw, and the report says so."""
    need = {"defense", "attack_nonmodal_precision", "prg_nonmodal_precision"}
    if not d.height or not need <= set(d.columns) or not d["defense"].str.contains("#").any():
        return []
    base = d["defense"].str.replace(r"#\d+$", "")
    out = []
    for name in base.unique(maintain_order=True).to_list():
        g = d.filter(base == name)
        beats = (g["attack_nonmodal_precision"] > g["prg_nonmodal_precision"]).fill_null(False)
        k = int(beats.sum())
        if 0 < k < g.height:
            out.append(
                f'<p class="fail">{html.escape(name)}: the attack beat PRG on nonmodal persons '
                f"in {k} of {g.height} draws, not in the others. Which one wins depends on the "
                "draw of the noise, not on the defense.</p>"
            )
    return out


def draws_said(d: dict) -> str:
    """How a defense drawn several times is reported: medians, ranges in brackets."""
    return f" ({d['draws']} draws: medians, ranges in brackets)" if d.get("draws", 1) > 1 else ""


def pct_spread(d: dict, key: str) -> str:
    """A per cent of a defense row, with its range over the draws where they differ."""
    lo_hi = d.get(f"{key}_range")
    said = f"{fmt_pct(d[key])}%"
    return said + (f" ({fmt_pct(lo_hi[0])}-{fmt_pct(lo_hi[1])})" if lo_hi else "")


def surprises(s: dict) -> list[str]:
    """One sentence for each figure that would surprise a reader (of a defense drawn several
    times, its medians)."""
    out = []
    base = (s.get("certify") or {}).get("unique_blocks")
    for d in defenses_by_name(s.get("defenses", [])):
        cb = d.get("certified_blocks")
        if base is not None and cb is not None and cb > base:
            out.append(
                f"<b>{html.escape(d['defense'])}</b> publishes tables that pin down more inhabited "
                "blocks "
                f"({cb:,}) than the undefended release ({base:,}). Certification is a fact about "
                "the "
                "published tables, not the truth: noise that empties cells or shrinks blocks "
                "leaves fewer "
                "populations consistent with them, but the one it pins down is the noisy "
                "population, so "
                "the attack's precision still falls."
            )
        att, prg = d.get("attack_nonmodal_precision"), d.get("prg_nonmodal_precision")
        if (
            att is not None
            and prg is not None
            and not math.isnan(att)
            and not math.isnan(prg)
            and att < prg
        ):
            out.append(
                f"With <b>{html.escape(d['defense'])}</b> the attack does worse than the "
                "proportional "
                "guess on the same release: what it rebuilds is the protected population, and the "
                "guess "
                "uses only shares, which noise disturbs less than individual records."
            )
    return out
