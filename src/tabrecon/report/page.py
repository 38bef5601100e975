"""The report page's toolkit: how a value, a column and a table are written (counts below the
threshold marked, percentages and decimals as declared), the glossary, the styles, figures
inlined as PNG, numbered sections and the page itself. What the report says is
:mod:`tabrecon.report.html`'s.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ..io import write_text
from .maps import CSS as MAP_CSS

COUNT_COLUMNS = {
    "blocks",
    "persons",
    "exact",
    "binned",
    "attacker records",
    "putative",
    "confirmed",
    "unproven_blocks",
    "certified_blocks",
    "attacker_records",
    "inhabited blocks",
    "random record matched",
    "matched, race scored right",
}


# Every column the report shows, as a reader sees it: (header with its unit, what it means). Tables
# keep the CSV's names inside; only the display changes, so a figure is found in results/*.csv
# under the name in the legend's brackets.
COLUMNS: dict[str, tuple[str, str]] = {
    "bin": ("block size (persons)", "true block population"),
    "blocks": ("blocks", "number of blocks"),
    "persons": ("persons", "number of persons"),
    "exact": (
        "matched, exact age",
        "persons matched one-to-one on block, sex, single year of age, race and ethnicity",
    ),
    "binned": ("matched, age bin", "persons matched on block, sex, age bin, race and ethnicity"),
    "exact_pct": ("matched, exact age (%)", "share of the block size class's persons"),
    "binned_pct": ("matched, age bin (%)", "share of the block size class's persons"),
    "solvar_at_most_pct": ("solution variability at most (%)", "threshold of the cumulative count"),
    "cum_blocks_pct": (
        "blocks, cumulative (%)",
        "share of inhabited blocks with solution variability at most the threshold",
    ),
    "cum_persons_pct": ("persons, cumulative (%)", "share of persons living in those blocks"),
    "unproven_blocks": ("blocks not proven (time-outs)", "blocks counted by their bounds"),
    "zero_blocks_pct": ("blocks with one solution (%)", "solution variability 0, proven"),
    "zero_persons_pct": ("persons in them (%)", "share of the class's persons"),
    "defense": ("defense", "how the microdata were protected before publication"),
    "rho": ("budget ρ (zCDP)", "total privacy-loss budget of TopDown; n/a for swapping"),
    "epsilon": (
        "ε at δ = 10⁻¹⁰",
        "the same budget as (ε, δ)-DP (Canonne-Kamath-Steinke conversion)",
    ),
    "tvd_state": (
        "accuracy, state (1 − TVD)",
        "1 minus the total variation distance of the state's histogram; 1 = unchanged",
    ),
    "tvd_county": ("accuracy, county (1 − TVD)", "the same per county, weighted by persons"),
    "tvd_tract": ("accuracy, tract (1 − TVD)", "the same per tract, weighted by persons"),
    "tvd_blockgroup": (
        "accuracy, block group (1 − TVD)",
        "the same per block group, weighted by persons",
    ),
    "tvd_block": ("accuracy, block (1 − TVD)", "the same per block, weighted by persons"),
    "budget": ("budget", "the zCDP budget of the frontier's point (a defense's rho)"),
    "rmse_block_cell": (
        "measured RMSE per block cell (persons)",
        "root mean squared error of the release's block-table cells against the truth's",
    ),
    "rmse_per_cell": (
        "expected RMSE per cell (persons)",
        "root mean squared error of a published block cell under least squares from TopDown's "
        "measurements at every level (exact, the matrix mechanism)",
    ),
    "accuracy_I": (
        "accuracy I (persons²)",
        "minus the expected squared error summed over every cell of every block (Abowd-Schmutte)",
    ),
    "dI_depsilon": (
        "dI/dε (persons² per unit of ε)",
        "the marginal rate of transformation: accuracy bought by one more unit of ε",
    ),
    "mae_block_total": (
        "block total error (persons)",
        "mean absolute difference of the published and true block populations",
    ),
    "mean_l1_race_eth": (
        "race × ethnicity error (persons per block)",
        "mean over blocks of the summed absolute errors of the race × ethnicity counts",
    ),
    "majority_kept_pct": (
        "majority group kept (%)",
        "share of blocks whose published majority race × ethnicity group is the true one",
    ),
    "certified_blocks": (
        "inhabited blocks with one solution",
        "blocks of the release proven to have exactly one consistent population",
    ),
    "attack_nonmodal_precision": (
        "attack precision, nonmodal (%)",
        "confirmed / putative for persons not of their block's modal group",
    ),
    "prg_nonmodal_precision": (
        "PRG, drawn (%)",
        "proportional guess drawn once from the release's tables, on the attack's linked nonmodal "
        "persons",
    ),
    "prg_expected_nonmodal_precision": (
        "PRG, expected (%)",
        "the proportional guess's exact expectation from the release's tables",
    ),
    "prg_original_nonmodal_precision": (
        "PRG from unprotected tables, expected (%)",
        "the same from the undefended tables (the Bureau's rMDF baseline)",
    ),
    "mdg_nonmodal_precision": ("MDG (%)", "block modal guess, nonmodal persons"),
    "attack_certified_uniques_precision": (
        "attack precision, certified nonmodal uniques (%)",
        "nonmodal population uniques in blocks the release pins down",
    ),
    "nmf_agreement_binned_pct": (
        "noisy-measurement fit: persons rebuilt (%)",
        "persons matched (age bin) by records fitted to TopDown's noisy measurements",
    ),
    "nmf_all_precision": (
        "noisy-measurement fit: precision, all (%)",
        "the linkage precision of those records, all persons",
    ),
    "nmf_nonmodal_precision": (
        "noisy-measurement fit: precision, nonmodal (%)",
        "the same, nonmodal persons",
    ),
    "stage": ("stage", "a step of the audit"),
    "seconds": ("seconds", "wall-clock time"),
}


# columns that need more or fewer decimals than the default (one for per cents and sizes)
DECIMALS = {
    "rho": 4,
    "epsilon": 2,
    "mae_block_total": 2,
    "mean_l1_race_eth": 2,
    "seconds": 2,
    **{f"tvd_{lv}": 3 for lv in ("state", "county", "tract", "blockgroup", "block")},
}


#: the terms of :data:`GLOSSARY` a report on records other than persons uses (no linkage, no
#: defenses)
EVERY_POPULATION_TERMS = (
    "Solution variability (solvar)",
    "Certified block",
    "Block, tract; block and block+tract tables",
)

GLOSSARY = [
    (
        "Solution variability (solvar)",
        "How much the records of a block can differ between populations that all satisfy "
        "the published tables: the largest share of the block's records that must change from one "
        "consistent population to another. 0 means the tables determine the block's records "
        "exactly; the solver proves it.",
    ),
    (
        "Certified block",
        "A block whose solution variability is proven to be 0: its rebuilt records are exactly the "
        "ones any consistent population has. A fact about the release, provable without the "
        "confidential data.",
    ),
    (
        "Verified claim, singled out",
        "A statement about one block such as “exactly one person here is a woman aged 30-34 "
        "who is Black” that every population consistent with the published tables makes "
        "true (proven by the solver; Liu et al. 2025's Generate-then-Verify). With “exactly "
        "one” it singles a person out. A fact about the release, found and proven without "
        "the confidential data.",
    ),
    (
        "Baseline (binomial)",
        "The chance that a claim with m = 1 holds by luck: P(exactly one of the block's persons "
        "matches) when each matches with the tract's (or state's) share of such persons.",
    ),
    (
        "Nonmodal person",
        "A person whose race × ethnicity is not the most common one in their block: the people "
        "statistical guessing gets wrong, and the ones a reconstruction puts at most risk.",
    ),
    (
        "Putative, confirmed, precision",
        "An attacker record is putatively reidentified when it links to a reconstructed record on "
        "block, sex and age; confirmed when the race and ethnicity learned are the true person's. "
        "Precision = confirmed / putative.",
    ),
    (
        "MDG",
        "Modal guess: assign every linked person their block's most common race × ethnicity. A "
        "baseline that needs no reconstruction.",
    ),
    (
        "PRG",
        "Proportional guess: draw each linked person's race × ethnicity from the block's published "
        "shares. Shown drawn once (as the attack is), in expectation, and from the unprotected "
        "tables.",
    ),
    (
        "Francis majority inference",
        "Francis' measure: the share of a block in its published majority group, counted when that "
        "group has at least the threshold number of persons.",
    ),
    (
        "Ruggles-Van Riper null model",
        "Random records of the national sex and age mix in every block, race scored right at the "
        "average majority share: a match rate of random records, not the precision of an inference "
        "(shown apart).",
    ),
    (
        "TVD accuracy",
        "1 minus the total variation distance between the protected and the true histograms of "
        "persons by type at a geographic level, weighted by persons; 1 means unchanged.",
    ),
    (
        "zCDP budget ρ",
        "Zero-concentrated differential privacy: the privacy loss TopDown's Gaussian noise spends, "
        "split over geographic levels and queries. Smaller ρ, more noise.",
    ),
    (
        "ε and δ",
        "The same guarantee as (ε, δ)-differential privacy: with probability at least 1 − δ, any "
        "one person changes the chance of any output by at most a factor e^ε. Converted from ρ at "
        "δ = 10⁻¹⁰.",
    ),
    (
        "Noisy measurements",
        "The noisy counts TopDown computes before it makes them consistent and integral. The 2020 "
        "Census published them; the report also attacks them directly.",
    ),
    (
        "Swapping",
        "The 2010 method: a share of households trade places with households of the same size in "
        "another block; block totals of households are kept.",
    ),
    (
        "Block, tract; block and block+tract tables",
        "A census block is the smallest area the Census publishes (a city block, or a stretch of "
        "countryside); a tract groups a few hundred of them. Block tables are the counts published "
        "for each block alone; block+tract tables add the tract's own, more detailed tables, and "
        "a tract's blocks are then solved together.",
    ),
    (
        "Accuracy I and the frontier",
        "Accuracy I is minus the expected squared error, summed over every published block cell, "
        "of the tables estimated without bias (least squares) from TopDown's noisy measurements; "
        "the frontier is I against the privacy-loss budget, and dI/dε the accuracy one more unit "
        "of ε buys. TopDown's own tables are not unbiased (held non-negative, whole and "
        "consistent), so their measured error is smaller.",
    ),
]


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em
auto;padding:0 1em;color:#222;line-height:1.45} h1{font-size:1.7em;margin-bottom:.2em}
h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em} th,td{border:1px solid
#ccc;padding:.25em .6em;text-align:right} th{background:#f3f3f3} td.t{text-align:left}
td.small{background:#fff3cd} .headline li{margin:.4em 0} .legend{padding-left:1.2em} dd{margin:0 0
.5em 1.5em} .muted{color:#666;font-size:.85em} figure{margin:1em 0} figure
img{max-width:100%;border:1px solid #eee} div.scroll{overflow-x:auto;max-width:100%}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.85em} .fail{color:#a00}
p.lead{font-size:1.08em;background:#f6f8fa;border-left:4px solid #b2182b;padding:.8em 1em}
"""


def input_text(inp: dict, markup: bool = True) -> str:
    """What an audit read: its microdata and its published tables (HTML, or plain text)."""
    said = [
        (w, inp.get(k)) for k, w in (("microdata", "microdata"), ("tables", "published tables"))
    ]
    return " and ".join(
        f"{w} <code>{html.escape(v)}</code>" if markup else f"{w} {v}" for w, v in said if v
    )


def is_known(v: Any) -> bool:
    """A figure was measured: neither missing nor NaN (a stage that did not run for this row,
    such as the noisy-measurement fit of a swapping defense, leaves NaN in its column)."""
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def is_percent(column: str) -> bool:
    """A column of per cents (its name says so: ``..._pct``, ``...precision``, ``..._kept_pct``)."""
    return column.endswith(("_pct", "precision", "%"))


def fmt_pct(v: Any) -> str:
    """A per cent as the report writes every per cent in its text: one decimal (0.282 -> 0.3),
    whatever its size, so figures side by side read alike."""
    return f"{float(v):.1f}" if is_known(v) else "n/a"


def fmt_value(v: Any, column: str = "") -> str:
    """The one way the report writes a value (headlines and tables alike): per cents and sizes with
    one decimal, below 1 with three significant digits, some columns with their own decimals."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and column in DECIMALS:
        return f"{v:,.{DECIMALS[column]}f}"
    if isinstance(v, float) and is_percent(column):
        return f"{v:.1f}"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 1 or v == 0 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def header(column: str, noun: str = "persons") -> str:
    """The header a reader sees for a column (of a table whose records are ``noun``: a housing
    unit audit's certification counts housing units where a person audit's counts persons)."""
    shown = COLUMNS[column][0] if column in COLUMNS else column
    return shown if noun == "persons" else shown.replace("persons", noun)


def legend_html(columns: Sequence[str]) -> str:
    """What each column of a table means (and its name in results/*.csv)."""
    items = [
        f"<li><b>{html.escape(COLUMNS[c][0])}</b> [<code>{html.escape(c)}</code>]: "
        f"{html.escape(COLUMNS[c][1])}</li>"
        for c in columns
        if c in COLUMNS
    ]
    return f'<ul class="legend muted">{"".join(items)}</ul>' if items else ""


def table_html(
    df: pl.DataFrame, threshold: int, caption: str = "", table_id: str = "", noun: str = "persons"
) -> str:
    """An HTML table; counts in (0, threshold) and the per cents of their row are marked;
    ``noun``: what its records are, where not persons (its headers say so)."""
    cols = df.columns
    head = "".join(f"<th>{html.escape(header(c, noun))}</th>" for c in cols)
    rows = []
    for r in df.iter_rows(named=True):
        small_row = any(
            c in COUNT_COLUMNS and isinstance(r[c], int) and 0 < r[c] < threshold for c in cols
        )
        cells = []
        for c in cols:
            v = r[c]
            cls = []
            if isinstance(v, str):
                cls.append("t")
            is_small = (c in COUNT_COLUMNS and isinstance(v, int) and 0 < v < threshold) or (
                small_row and ("%" in c or c.endswith("_pct")) and isinstance(v, float)
            )
            if is_small:
                cls.append("small")
            mark = "&nbsp;&dagger;" if is_small else ""
            cells.append(f'<td class="{" ".join(cls)}">{fmt_value(v, c)}{mark}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    tid = f' id="{table_id}"' if table_id else ""
    return (
        f'<div class="scroll"><table{tid}>{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def png_base64(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def figure_html(b64: str, caption: str, fig_id: str, out: Path | None = None) -> str:
    if out is not None:
        (out / f"{fig_id}.png").write_bytes(base64.b64decode(b64))
    return (
        f'<figure id="{fig_id}"><img alt="{html.escape(caption)}" '
        f'src="data:image/png;base64,{b64}">'
        f'<figcaption class="muted">{html.escape(caption)}</figcaption></figure>'
    )


#: sections not numbered: what comes before the first and after the last
_UNNUMBERED = ("headline", "glossary")


_SECTION = re.compile(r'<h2 id="([^"]*)">')


def number_sections(body: str) -> str:
    """Number the page's sections (``<h2>``) 1, 2, 3... in the order they appear, so a report
    whose stages were skipped reads 1, 2, 3 rather than 1, 3, 6.

    >>> number_sections('<h2 id="headline">H</h2><h2 id="a">A</h2><h2 id="b">B</h2>')
    '<h2 id="headline">H</h2><h2 id="a">1. A</h2><h2 id="b">2. B</h2>'
    """
    n = 0

    def one(m: re.Match[str]) -> str:
        nonlocal n
        if m.group(1) in _UNNUMBERED:
            return m.group(0)
        n += 1
        return f"{m.group(0)}{n}. "

    return _SECTION.sub(one, body)


def write_page(out: Path, title: str, parts: list[str], name: str = "report.html") -> Path:
    """``out/name`` made of ``parts`` (sections numbered as they come), written through a
    temporary and renamed."""
    doc = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(title)}</title><style>{CSS}{MAP_CSS}</style></head><body>"
        + number_sections("\n".join(parts))
        + "</body></html>"
    )
    return write_text(out / name, doc)
