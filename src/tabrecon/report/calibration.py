"""The report of a calibration (``tabrecon calibrate``): how often the claims the protected
2020 tables prove are true of the people, beside the same county's exact 2010 tables, by claim
size and block size, with examples of claims true and false (issue 89 item 4).

Every figure is the calibration's own (:class:`tabrecon.metrics.calibration.Calibration`), the
same as ``calibration.csv`` beside the report.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ..metrics.calibration import SIDES, Calibration
from .page import fmt_pct, table_html, write_page

#: examples of claims shown per side and truth
EXAMPLES = 5


def _headline(cal: Calibration) -> str:
    """Per side, the share of its verified claims true of the confidential records."""
    every = cal.scores.filter(pl.col("block_size") == "all")
    said = []
    for side, _release, protected in SIDES:
        rows = every.filter(pl.col("side") == side)
        verified, true = int(rows["verified"].sum()), int(rows["true"].sum())
        how = f"protected by {cal.defense}" if protected else "exact"
        share = f"{fmt_pct(100.0 * true / verified)}%" if verified else "n/a"
        said.append(
            f"<li><b>{html.escape(side)}</b> ({html.escape(how)}): <b>{share}</b> of "
            f"{verified:,} verified claims true of the confidential records</li>"
        )
    return "<ul>" + "".join(said) + "</ul>"


def _examples(cal: Calibration) -> pl.DataFrame:
    """A few verified claims of each side, false ones first: block, size k, what they say, the
    count they claim and the true count."""
    c = cal.claims
    if not c.height:
        return pl.DataFrame()
    cols = ["side", "geoid", "k", "values", "m", "true_matches", "true"]
    return (
        c.sort("side", "true", "geoid", descending=[True, False, False])
        .group_by("side", "true", maintain_order=True)
        .head(EXAMPLES)
        .select(cols)
    )


def write_calibration_report(cal: Calibration, out: Path, source: str) -> Path:
    """Write ``out/report.html``: the method, the share of true claims per side, the table by
    side, claim size and block size, and examples; returns its path."""
    table = cal.scores.with_columns(
        (100.0 * pl.col("true") / pl.col("verified")).round(1).alias("true_pct")
    )
    parts = [
        "<h1>How often the 2020 tables' claims are true</h1>",
        f'<p class="lead">{html.escape(source)}: {len(cal.blocks):,} blocks sampled by size. '
        "Each side publishes the same confidential records: the 2020 DHC's block person tables "
        f"of the records protected by {html.escape(cal.defense)}, and SF1 2010's exact tables. "
        "Generate-then-Verify proves claims from each side's tables alone (a claim is verified "
        "when every population those tables admit has it); each claim is then scored against "
        "the confidential records: true when exactly its count of them match it.</p>",
        '<h2 id="headline">Verified claims true of the people</h2>' + _headline(cal),
        '<h2 id="by-size">By claim size and block size</h2>'
        + table_html(table, 0, "Verified and true claims", "tbl-calibration"),
    ]
    examples = _examples(cal)
    if examples.height:
        parts.append(
            '<h2 id="examples">Examples</h2><p>Verified claims of each side, false ones first '
            "(the count the claim states against the records' true count).</p>"
            + table_html(examples, 0, "Example claims", "tbl-examples")
        )
    parts.append(
        "<p>Every figure is in <code>calibration.csv</code> beside this report, every verified "
        "claim with its truth in <code>claims.parquet</code>.</p>"
    )
    return write_page(out, "tabrecon calibration", parts)
