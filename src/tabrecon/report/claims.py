"""The report's sections on a population attacked by Generate-then-Verify (housing units,
group-quarters persons, a declared release): its verified claims by k beside the study's
(:func:`claims_section`) and what each publication rule would have stopped
(:func:`sweep_section`)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import polars as pl

from ..vocab import Geo
from .page import figure_html, table_html


def claims_section(
    h: dict, frames: dict[str, pl.DataFrame], th: int, out: Path | None
) -> list[str]:
    """The report's section on one population attacked by Generate-then-Verify (housing units,
    group-quarters persons, ...): its tables, the figures in the study's layout, beside the
    study's own where the population has them (Liu et al. 2025, Tables 2-3 and Figure 2)."""
    from ..attacks.claims.release import plot_by_k
    from ..schema.registry import population

    pop = population(h["population"])
    noun = html.escape(pop.noun)
    place = html.escape(h.get("geography", "block"))  # a declared release's own (school)
    aside = f" ({html.escape(h['aside'])})" if h.get("aside") else ""
    parts = [
        f'<h2 id="{pop.name}">{html.escape(pop.noun.capitalize())}: claims every '
        "consistent answer makes true</h2>"
        + (
            f"<p>Published tables {html.escape(h['file'])} (no records: nothing to match the "
            f"claims against): {h['records']:,} {noun} in "
            if h.get("input") == "published tables"
            else f"<p>File {html.escape(h['file'])}: {h['records']:,} {noun}{aside} in "
        )
        + f"{h['blocks_in_file']:,} {html.escape(h.get('geography', 'block'))}s. Attacked: "
        f"{html.escape(h['sample'])}, with the "
        f"{pop.schema.release.label + ' ' if pop.schema.geography == Geo.BLOCK else ''}tables "
        f"{html.escape(', '.join(h['tables']))}"
        + (
            f", its counts published {html.escape(h['publication'])} (each published value "
            "read as the interval of true counts it allows)"
            if h.get("publication", "exact") != "exact"
            else ""
        )
        + (
            f" and {html.escape(h['given'])} (every householder a person of the block; every "
            "solution and proof below is of both releases together)"
            if h.get("given")
            else ""
        )
        + f". For each {place}, "
        f"{h['k_solutions']} solutions of the tables were generated; a claim (\u201cexactly m "
        f"{noun} of this {place} have these values on these k columns\u201d) common to all of "
        "them and not a published cell was verified by proving that every other count is "
        f"impossible. A verified claim with m = 1 singles out one of the {noun}.</p>",
        f"<p>Full reconstruction of the {place}'s {noun} is proven unique in "
        f"{h['blocks_unique_reconstruction']:,} of {h['blocks']:,} {place}s (varies in "
        f"{h['blocks_reconstruction_varies']:,}, undecided in "
        f"{h['blocks_reconstruction_undecided']:,}); verified claims "
        f"{h['verified_claims']:,}, singletons {h['verified_singletons']:,}. Seconds per {place}: "
        f"median {h['block_seconds_median']:.2f}, max {h['block_seconds_max']:.2f}.</p>",
    ]
    if h.get("blocks_time_limit"):
        parts.append(
            f'<p class="fail">{h["blocks_time_limit"]} block(s) reached the time limit of '
            "[households] block_time_limit: their claims verified before it are counted, the "
            "rest were not tried, so the figures below are lower bounds.</p>"
        )
    by_k = frames.get(f"{pop.name}_by_k")
    if by_k is not None and by_k.height:
        shown = by_k
        caption = "Verified claims by number of columns k"
        if pop.study_by_k:
            study = pl.DataFrame(
                {
                    "k": list(pop.study_by_k),
                    "study_singled_out_of_486": [v[0] for v in pop.study_by_k.values()],
                    "study_covered_of_486": [v[1] for v in pop.study_by_k.values()],
                }
            )
            shown = by_k.join(study, on="k", how="left")
            caption += (
                " (the study: its DHC tables, 50 median blocks, 486 households; > 90% of "
                "blocks with a verified 5-column singleton)"
            )
        parts.append(table_html(shown, th, caption, f"tbl-{pop.name}"))
        if out is not None:
            png = plot_by_k(by_k, out / f"{pop.name}_by_k.png", pop.study_by_k)
            if png is not None:
                b64 = base64.b64encode(png.read_bytes()).decode()
                parts.append(
                    figure_html(
                        b64, "Blocks with a verified singleton by k", f"fig-{pop.name}", None
                    )
                )
    parts.append(
        f'<p class="muted">{html.escape(pop.report_note)} Baseline: P(exactly one of the '
        "block's records matches) when each matches with the tract's share.</p>"
    )
    sweep = frames.get(f"{pop.name}_sweep")
    if sweep is not None and sweep.height and h.get("sweep"):
        parts += sweep_section(pop.name, pop.noun, h["sweep"], sweep, th, out)
    return parts


def sweep_section(
    name: str, noun: str, about: dict, sweep: pl.DataFrame, th: int, out: Path | None
) -> list[str]:
    """What would have stopped it: the same blocks published under each publication rule of
    ``[households] publication_rules`` and attacked as published
    (:mod:`tabrecon.metrics.publication_sweep`): per rule, blocks whose published values allow
    one population, records singled out by verified claims, and the accuracy lost."""
    from ..metrics.publication_sweep import plot_sweep

    noun_e = html.escape(noun)
    shown = sweep.select(
        "rule",
        pl.col("blocks_unique").alias("blocks with one population"),
        pl.col("singled_out").alias(f"{noun} singled out"),
        pl.col("singled_out_pct").round(1).alias("singled out %"),
        pl.col("verified_claims").alias("verified claims"),
        pl.col("cells_changed").alias("counts changed"),
        pl.col("cells_withheld").alias("counts withheld"),
        pl.col("l1_per_block").round(1).alias("L1 per block"),
        (pl.col("blocks_undecided") + pl.col("blocks_time_limit")).alias(
            "blocks at the time limit"
        ),
    )
    parts = [
        f'<h2 id="{name}-publication">What would have stopped it: publication rules</h2>',
        f"<p>The same {about['blocks']:,} blocks published under each rule of [households] "
        f"publication_rules (counts rounded to a base, conventionally or at random, or withheld "
        f"below a threshold; medians and means as declared) and attacked as published: each "
        f"published value read as the interval of true counts it allows. A block with one "
        f"population is proven to allow no other; a {noun_e} singled out is matched by a "
        f"verified claim with m = 1. Counts changed and the mean L1 distance per block between "
        f"published and true counts are what the rule costs users of the tables. A block left "
        "undecided at the time limit is neither proven unique nor searched to the end for "
        "claims: a rule with such blocks protects at most as well as its row says (its risk "
        "figures are lower bounds).</p>",
        table_html(shown, th, "Risk and accuracy under each publication rule", f"tbl-{name}-pub"),
    ]
    if out is not None:
        png = plot_sweep(sweep, out / f"{name}_publication.png", noun)
        b64 = base64.b64encode(png.read_bytes()).decode()
        parts.append(
            figure_html(b64, "Risk against accuracy lost, per rule", f"fig-{name}-pub", None)
        )
    return parts
