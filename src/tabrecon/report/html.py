"""The audit report: one self-contained HTML file (styles and plots inline) built from the audit's
aggregate tables. It holds headline findings in plain words, the paper-style tables, plots, and the
exact configuration, versions, seeds and timings. It shows aggregates only, never a record of the
confidential input; counts below the configured threshold are marked."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ..audit.aggregate import defenses_by_name
from ..audit.config import AuditConfig
from ..io import write_text
from ..shapes import MAPS_EXTRA
from ..vocab import Geo, Level, Release
from .claims import claims_section
from .defenses import (
    DEFENSE_TABLES,
    draw_flips,
    draws_said,
    frontier_section,
    no_defense_row,
    noise_words,
    pct_spread,
    release_agreement,
    spread_over_draws,
    surprises,
)
from .page import (
    EVERY_POPULATION_TERMS,
    GLOSSARY,
    figure_html,
    fmt_pct,
    fmt_value,
    input_text,
    is_known,
    legend_html,
    png_base64,
    table_html,
    write_page,
)
from .reid import LABELS, RVR_NOTE, paper_tables_from_rates


def _plots(frames: dict[str, pl.DataFrame], summary: dict) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, str] = {}
    if "precision_cdf" in frames:
        f = frames["precision_cdf"]
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
        for s, st in (
            ("attack", "-"),
            ("mdg", "--"),
            ("prg", ":"),
            ("truth", "-."),
            ("francis", "-"),
        ):
            col = f"{s}_share_pct"
            if col in f.columns and f[col].is_not_nan().any():
                lab = LABELS.get(s, "Francis majority inference")
                ax.plot(f["p_pct"], f[col], st, label=lab, color="grey" if s == "francis" else None)
        ax.set(
            xlabel="precision p (%)",
            ylabel="persons with precision >= p (%)",
            title="Per-person precision (block confirmed / putative)",
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        figs["fig-precision"] = png_base64(fig)
    if "solvar_cdf" in frames:
        f = frames["solvar_cdf"]
        fig, ax = plt.subplots(figsize=(7, 3.8), dpi=100)
        x = f["solvar_at_most_pct"].to_numpy()
        # a cumulative count at uneven thresholds: steps on a scale that keeps their spacing
        # (linear up to 1%, logarithmic above)
        ax.step(x, f["cum_blocks_pct"], "o-", where="post", label="blocks")
        ax.step(x, f["cum_persons_pct"], "s-", where="post", label="persons")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.set(
            xlabel="solution variability at most (%)",
            ylabel="cumulative share (%)",
            title="How much of the release is pinned down (solution variability CDF)",
            ylim=(0, 101),
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        figs["fig-solvar"] = png_base64(fig)
    if "defenses" in frames and frames["defenses"].height:
        f = frames["defenses"]
        fig, ax = plt.subplots(figsize=(7.5, 4.6), dpi=100)
        acc = "tvd_block" if "tvd_block" in f.columns else None
        points = [
            (
                r["defense"],
                r[acc] if acc else float("nan"),
                r["attack_nonmodal_precision"],
                r["prg_nonmodal_precision"],
            )
            for r in f.iter_rows(named=True)
        ]
        base = summary.get("reidentification", {})
        if base.get("attack", {}).get("nonmodal", {}).get("precision_pct") is not None:
            points.insert(
                0,
                (
                    "no defense",
                    1.0,
                    base["attack"]["nonmodal"]["precision_pct"],
                    base["prg"]["nonmodal"]["precision_pct"],
                ),
            )
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (name, tvd, att, prg) in enumerate(points):
            # each defense one colour: its attack (circle) and its PRG baseline (triangle), joined
            col = colors[i % len(colors)]
            ax.plot([tvd, tvd], [prg, att], color=col, lw=1, alpha=0.5)
            ax.scatter([tvd], [att], s=45, color=col, label=f"{name}: attack")
            ax.scatter(
                [tvd],
                [prg],
                s=35,
                marker="^",
                color=col,
                edgecolor="black",
                linewidth=0.5,
                label=f"{name}: PRG (same release)",
            )
        ax.set(
            xlabel="block-level accuracy, 1 − TVD (1 = unchanged)",
            ylabel="nonmodal precision (%)",
            title="Risk vs accuracy across defenses",
            ylim=(0, 105),
        )
        ax.grid(alpha=0.3)
        # legend outside the axes: no label can cover or be cut by a point
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        figs["fig-tradeoff"] = png_base64(fig)
    return figs


def _release(summary: dict) -> str:
    """How the report names the release audited (``SF1``, ``2020 DHC``)."""
    release = Release(summary.get("release", Release.SF1_2010))
    return "SF1" if release is Release.SF1_2010 else release.label


def _words(summary: dict) -> tuple[str, str, str]:
    """What an audit's records are called (``persons``, ``housing units``), its geography's
    units (``block``, a declared release's ``school``) and the columns its claims read, in
    HTML."""
    noun = summary.get("noun", "persons")
    place = summary.get("geography", "block")
    if noun == "persons":
        cols = "sex, age bin, Hispanic origin, the six races"
    else:
        cols = ", ".join(summary.get("record_columns", []))
    return html.escape(noun), html.escape(place), html.escape(cols)


def _claims_part(summary: dict, frames: dict[str, pl.DataFrame], th: int) -> list[str]:
    """The person audit's section on verified claims (Liu et al. 2025's Generate-then-Verify
    over the person tables): persons singled out, by k columns with the binomial baselines, and a
    handful of example claims with how each was proven."""
    v = summary.get("claims")
    if not v or "claims_by_k" not in frames:
        return []
    noun, place, cols = _words(summary)
    parts = [
        f'<h2 id="claims">Verified claims: {noun} singled out by the tables alone</h2>'
        f"<p>A claim says “exactly m {noun} of this {place} have these values on these k "
        f"columns” ({cols}). It is verified when every "
        f"population consistent with the published {html.escape(v['level'])} tables makes it "
        "true: in a block with one consistent population every claim read off it is verified by "
        "that proof; elsewhere a candidate common to "
        f"{v['k_solutions']} diverse solutions is verified by proving every other count "
        f"impossible. A claim with m = 1 singles one of the {noun} out. Claims are facts about "
        "the release: no confidential record was used to find or prove them.</p>",
        f"<p>{noun.capitalize()} singled out: <b>{v['persons_singled_out']:,} of "
        f"{v['persons']:,} ({fmt_pct(v['persons_singled_out_pct'])}%)</b>, in "
        f"{v['blocks_with_singleton']:,} of {v['blocks']:,} {place}s; in {place}s that can "
        f"differ, {v['verified_varying']:,} of "
        f"{v['candidates_varying']:,} candidate claims verified by {v['proofs']:,} proofs"
        + (
            f"; {v['incomplete_tracts']:,} tract(s) stopped before every candidate was proven "
            "(the tract's or a proof's time limit): the claims verified there by then are "
            "counted, no "
            "other"
            if v.get("incomplete_tracts")
            else ""
        )
        + ".</p>",
        table_html(
            frames["claims_by_k"].select(
                "k",
                pl.col("persons_covered").alias(f"{noun} singled out"),
                pl.col("persons_per_block").round(2).alias("per block"),
                pl.col("blocks_with_singleton").alias("blocks with one"),
                pl.col("verified_singletons").alias("verified singletons"),
                pl.col("verified_claims").alias("verified claims"),
                pl.col("median_baseline_tract").alias("median baseline (tract)"),
                pl.col("median_baseline_state").alias("median baseline (state)"),
            ),
            th,
            f"{noun.capitalize()} covered by a verified singleton with k columns, and the "
            f"baselines: P(count = 1) when each of the {noun} matches with the tract's (state's) "
            "share "
            "(Liu et al. Table 2 layout)",
            "tbl-claims",
        ),
    ]
    if "claim_examples" in frames:
        parts.append(
            table_html(
                frames["claim_examples"],
                th,
                "Examples of verified singleton claims (a handful; each true of every "
                "population the tables allow)",
                "tbl-claim-examples",
            )
        )
    return parts


#: The highest state code of a real place (FIPS: the states 01-56, the territories to 78);
#: tabrecon's synthetic counties are in state 99
LAST_REAL_STATE = 78


def _made_up(blocks: pl.DataFrame) -> bool:
    """Whether every block of the audit is of a state code no real place has (synthetic)."""
    col = "block_geoid" if "block_geoid" in blocks.columns else blocks.columns[0]
    state = blocks[col].cast(pl.String).str.slice(0, 2).cast(pl.Int64, strict=False)
    return bool(blocks.height) and bool((state.fill_null(0) > LAST_REAL_STATE).all())


def _map_part(
    summary: dict, frames: dict[str, pl.DataFrame], maps: str | None, out: Path
) -> list[str]:
    """The county's blocks on maps (certified uniqueness, share singled out), or, without
    shapes, how to get them; the maps also kept as ``out/maps.html`` for a report of several
    audits (:mod:`tabrecon.report.compare`)."""
    if "blocks" not in frames:
        return []
    if maps is not None:
        write_text(out / "maps.html", maps)
    m = summary.get("map")
    if m is None and _made_up(frames["blocks"]):
        return [
            '<p class="muted" id="no-map">No map: these blocks are synthetic (their state code '
            "is no real state's), so the Bureau has no shapes for them; with "
            f"<code>{html.escape(MAPS_EXTRA)}</code> installed, <code>tabrecon demo</code> "
            "draws made-up shapes for its synthetic county.</p>"
        ]
    if m is None:
        return [
            '<p class="muted" id="no-map">No map: give the county\'s block shapes to draw these '
            "blocks, <code>tabrecon audit ... --shapes tl_2010_SSCCC_tabblock10.zip</code> "
            "(<code>tabrecon download --state SS --county CCC --shapes</code> fetches them from "
            f"the Census Bureau; the maps need <code>{html.escape(MAPS_EXTRA)}</code>).</p>"
        ]
    noun = html.escape(m.get("noun", "residents"))
    missing = (
        f" {m['blocks_without_shape']:,} block(s) of the release with {noun} "
        f"({m['residents_without_shape']:,} {noun}) have no shape in that file and are on "
        "no map."
        if m["blocks_without_shape"]
        else ""
    )
    singled = (
        f", and the share of its {noun} singled out by verified claims (figures above)"
        if "claims" in summary
        else " (figures above)"
    )
    body = (
        maps
        if maps is not None
        else '<p class="fail">The maps could not be drawn (see the failed units below).</p>'
    )
    return [
        '<h2 id="map">Where: the county\'s blocks</h2>'
        f"<p>Each block of <code>{html.escape(Path(m['shapes']).name)}</code> "
        f"({m['shape_blocks']:,} blocks) coloured by what the published tables give away: "
        f"whether they admit exactly one population{singled}. Tracts are outlined, and the "
        "densest drawn again zoomed below each map; hold the pointer over a block of the first "
        f"map for its figures. Every block's figures are in results/blocks.csv.{missing}</p>",
        body,
    ]


def claim_example(examples: pl.DataFrame | None) -> str | None:
    """One verified claim this release makes, in words for the report's first paragraphs: the
    most specific of its examples (``results/claim_examples.csv``), with its block's size; None
    without examples (the text then gives none, never a made-up one).

    >>> ex = pl.DataFrame({"persons in block": [16, 76], "claim": ["exactly 1 person: age 1",
    ...                    "exactly 1 person: female, age 14"], "k": [1, 2]})
    >>> claim_example(ex)
    '“exactly 1 person: female, age 14” (in a block of 76 residents)'
    """
    if examples is None or not examples.height or "claim" not in examples.columns:
        return None
    row = examples.sort("k", descending=True, maintain_order=True).row(0, named=True)
    size = row.get("persons in block")
    where = f" (in a block of {size:,} residents)" if isinstance(size, int) else ""
    return f"“{html.escape(str(row['claim']))}”{where}"


def in_brief(s: dict, examples: pl.DataFrame | None = None) -> str:
    """The report's first paragraph, for readers who are not specialists: how many residents
    the tables rebuild with certainty and how many verified claims single out, what a claim is
    (one of this release's own, from ``examples``), and what the report does not say; each
    number links to the table it comes from."""
    c, v = s.get("certify") or {}, s.get("claims") or {}
    if not c.get("inhabited_blocks"):
        return ""
    n = int(s.get("persons") or 0)
    if s.get("noun", "persons") != "persons":  # another population: its own words
        noun, place, cols = _words(s)
        said = [
            f'<a href="#tbl-solvar">{c["unique_persons"]:,} of {n:,} {noun} '
            f"({fmt_pct(c['unique_persons_pct'])}%)</a> are in {place}s whose published tables "
            f"admit exactly one population: anyone holding the tables can rebuild each of their "
            f"records ({place}, {cols}) and prove that no other records fit."
        ]
        if v.get("persons"):
            said.append(
                f'<a href="#tbl-claims">{v["persons_singled_out"]:,} {noun} '
                f"({fmt_pct(v['persons_singled_out_pct'])}%)</a> are singled out by verified "
                f"claims: “exactly one of the {noun} of this {place} has these values on these "
                "columns”, true of every population consistent with the tables."
            )
        said += _protected(s)
        return f'<p class="lead" id="in-brief"><b>In brief.</b> {" ".join(said)}</p>'
    said = [
        f'<a href="#tbl-solvar">{c["unique_persons"]:,} of {n:,} residents '
        f"({fmt_pct(c['unique_persons_pct'])}%)</a> live in blocks whose published tables admit "
        "exactly one population: anyone holding the tables can rebuild each of these residents' "
        "record (block, sex, age, race, Hispanic origin) and prove that no other records fit."
    ]
    if v.get("persons"):
        said.append(
            f'<a href="#tbl-claims">{v["persons_singled_out"]:,} residents '
            f"({fmt_pct(v['persons_singled_out_pct'])}%)</a> are singled out by verified claims: "
            + (
                f"statements such as {example}, one of this release's, "
                if (example := claim_example(examples))
                else "statements about one block "
            )
            + "that every population consistent with the tables makes true. A claim is "
            "proven, not guessed; it is a fact anyone can read off the release."
        )
    if s.get("map"):
        said.append('<a href="#map">The maps</a> show where these blocks are.')
    used = (
        "The confidential records were used only to score the attack (how many rebuilt records "
        "match, how often a linkage is right); certification and claims used the tables alone."
        if s.get("input", {}).get("microdata")
        else "No confidential record was used: every figure follows from the published tables."
    )
    said.append(
        f"{used} This report does not say who these people are: naming them needs data an "
        "attacker holds (names with block, sex and age), and how often such a linkage would be "
        "right is measured only where that data is given."
    )
    said += _protected(s)
    return f'<p class="lead" id="in-brief"><b>In brief.</b> {" ".join(said)}</p>'


def _protected(s: dict) -> list[str]:
    """What a report of the 2020 DHC adds to its first paragraph: its tables are TopDown's
    output, so what they make certain is certain of the protected data; how often such claims
    are true of the people, where a calibration measured it (``s["calibration"]``)."""
    if Release(s.get("release", Release.SF1_2010)) is not Release.DHC_2020:
        return []
    said = (
        "These are the 2020 DHC's tables, the output of the Census Bureau's differential "
        "privacy (TopDown): they describe the protected data, not the responses, so the claims "
        "below are claims the protected tables make, certain of that data and true of the "
        "people only as far as the two agree."
    )
    cal = s.get("calibration")
    if not cal or not cal.get("verified"):
        return [
            said + " How often such claims are true of the people is not measured in this "
            "report (<code>tabrecon calibrate</code> measures it; <code>--calibration</code> "
            "brings it here)."
        ]
    by_k = "; ".join(
        f"{r['k']} column{'s' if r['k'] != 1 else ''}: {fmt_pct(r['true_pct'])}%"
        for r in cal["by_k"]
        if r.get("true_pct") is not None
    )
    return [
        f"{said} Measured by simulation (a synthetic county through the production TopDown, "
        f"<code>tabrecon calibrate</code>: {html.escape(str(cal['source']))}), "
        f"<b>{fmt_pct(100.0 * cal['true'] / cal['verified'])}% of the {cal['verified']:,} "
        f"claims such tables verified were true of the confidential records</b> ({by_k})."
    ]


def _headlines(s: dict, examples: pl.DataFrame | None = None) -> list[str]:
    out = []
    c = s.get("certify")
    noun, place, _ = _words(s)
    kind = "person records" if noun == "persons" else f"records of {noun}"
    if c and c.get("inhabited_blocks"):
        out.append(
            f"<b>{c['unique_blocks']:,} of {c['inhabited_blocks']:,} inhabited {place}s "
            f"({fmt_pct(c['unique_blocks_pct'])}%)</b> "
            f"have exactly one set of {kind} consistent with the published {c['level']} "
            "tables: "
            f"{c['unique_persons']:,} {noun} ({fmt_pct(c['unique_persons_pct'])}%) are rebuilt "
            "exactly, and provably so."
            + (
                f" {c['unproven_blocks']:,} {place}(s) hit the solver time limit and are counted "
                "by their bounds."
                if c["unproven_blocks"]
                else ""
            )
        )
    v = s.get("claims")
    if v and v.get("persons") and noun != "persons":
        out.append(
            f"<b>{v['persons_singled_out']:,} of {v['persons']:,} {noun} "
            f"({fmt_pct(v['persons_singled_out_pct'])}%)</b> are singled out by a verified claim "
            f"that every population consistent with the published {html.escape(v['level'])} "
            f'tables makes true (<a href="#claims">section</a>).'
        )
    elif v and v.get("persons"):
        out.append(
            f"<b>{v['persons_singled_out']:,} of {v['persons']:,} persons "
            f"({fmt_pct(v['persons_singled_out_pct'])}%)</b> are singled out by a verified claim: "
            + (
                f"a statement such as {example} "
                if (example := claim_example(examples))
                else "a statement about one block "
            )
            + "that every population consistent with the published "
            f"{html.escape(v['level'])} tables makes true, so the tables alone assert it "
            f'(<a href="#claims">section</a>).'
        )
    for lv in Level:
        a = s.get(f"agreement_{lv}")
        if a:
            out.append(
                f"Reconstruction from the {lv} tables matches <b>{fmt_pct(a['binned_pct'])}%</b> "
                "of "
                "persons on block, sex, "
                f"age bin, race and ethnicity ({fmt_pct(a['exact_pct'])}% with exact age)."
            )
    r = s.get("reidentification")
    if r and r.get("attack", {}).get("nonmodal"):
        p = lambda src, g: fmt_pct(r[src][g]["precision_pct"])  # noqa: E731
        out.append(
            "An attacker who knows block, sex and age "
            f"({html.escape(str(s['config']['reidentify']['attacker']))} attacker) and links them "
            "to the reconstruction learns race and ethnicity correctly for "
            f"<b>{p('attack', 'all')}%</b> of linked persons. "
            "For persons unlike their neighbours (nonmodal) it is "
            f"<b>{p('attack', 'nonmodal')}%</b>, against "
            f"{p('mdg', 'nonmodal')}% for the block's modal guess and {p('prg', 'nonmodal')}% for "
            "a proportional guess."
        )
        cu = r["attack"].get("certified_uniques")
        if cu and cu["putative"]:
            out.append(
                "Nonmodal population uniques in certified blocks -- records the attacker knows "
                "are exact -- are "
                f"right {p('attack', 'certified_uniques')}% of the time ({cu['putative']:,} "
                "persons linked)."
            )
    for d in defenses_by_name(s.get("defenses", [])):
        out.append(
            f"With <b>{html.escape(d['defense'])}</b>{draws_said(d)}: nonmodal precision "
            f"{pct_spread(d, 'attack_nonmodal_precision')} "
            f"(proportional guess on the same release {pct_spread(d, 'prg_nonmodal_precision')}"
            + (
                f", {fmt_pct(d['prg_expected_nonmodal_precision'])}% in expectation, "
                f"{fmt_pct(d['prg_original_nonmodal_precision'])}% "
                f"from the unprotected tables"
                if is_known(d.get("prg_original_nonmodal_precision"))
                else ""
            )
            + f"), block-level accuracy (1 − TVD) "
            f"{fmt_value(d.get('tvd_block'), 'tvd_block')}, block totals off by "
            f"{fmt_value(d['mae_block_total'], 'mae_block_total')} persons on average."
            + (
                " Fitting records straight to its published noisy measurements gives "
                f"{fmt_pct(d['nmf_nonmodal_precision'])}% "
                f"nonmodal precision ({fmt_pct(d['nmf_agreement_binned_pct'])}% of persons "
                "rebuilt, "
                "binned)."
                if is_known(d.get("nmf_nonmodal_precision"))
                else ""
            )
        )
    if s.get("failures"):
        out.append(
            f'<span class="fail">{len(s["failures"])} unit(s) failed and are left out of the '
            "figures (listed under Run).</span>"
        )
    return out


def write_audit_report(
    out: Path,
    summary: dict,
    frames: dict[str, pl.DataFrame],
    cfg: AuditConfig,
    maps: str | None = None,
) -> Path:
    """Write ``out/report.html`` (and the plots as PNG beside it); return its path. ``maps``:
    the block maps drawn by :func:`tabrecon.report.maps.draw_maps`, when shapes were given."""
    th = cfg.report.small_cell_threshold
    figs = _plots(frames, summary)
    noun, place, _ = _words(summary)
    title = cfg.report.title + ("" if noun == "persons" else f": {summary['noun']}")
    tracts = f"{summary['tracts']:,} tracts, " if place == Geo.BLOCK else ""
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">Input: {input_text(summary["input"])}. {summary["persons"]:,} '
        f"{noun}, {summary['blocks']:,} {place}s, {tracts}{len(summary['chunks'])} "
        "chunk(s). "
        f"Counts below {th} are marked &dagger; (and the per cents of their row).</p>",
        in_brief(summary, frames.get("claim_examples")),
        '<h2 id="headline">Headline findings</h2><ul class="headline">'
        + "".join(f"<li>{h}</li>" for h in _headlines(summary, frames.get("claim_examples")))
        + "</ul>",
    ]
    tp = summary.get("tables_present") or []
    kind = f"{_release(summary)} person tables" if noun == "persons" else f"tables of {noun}"
    which = f"{len(tp)} {kind}: {', '.join(tp)}" if tp else kind
    parts.append(
        '<h2 id="publish">What was published</h2>'
        f"<p>{summary['table_values']:,} table values ({html.escape(which)}); "
        f"{summary['identity_checks']:,} "
        f"internal-consistency identities checked, {summary['identity_violations']} violated.</p>"
    )
    agr = [k for k in frames if k.startswith("agreement_")]
    if agr:
        parts.append(
            '<h2 id="reconstruction">Reconstruction</h2><p>Share of true persons matched '
            "one-to-one by the "
            "reconstruction, by true block size (Abowd et al. Table 3 layout).</p>"
        )
        for k in agr:
            lv = k.removeprefix("agreement_").replace("_", "+")
            parts.append(table_html(frames[k], th, f"Agreement, {lv} tables", f"tbl-{k}"))
            res = summary.get("agreement_resolution", {}).get(lv)
            if res:
                parts.append(f'<p class="muted">Matched on age bin: {html.escape(res)}.</p>')
    if "solvar_cdf" in frames:
        c = summary["certify"]
        lo, hi = c["cumulative_solvar_pct"]
        measured = summary.get("config", {}).get("certify", {}).get("distance", True)
        cum = (
            f"{fmt_pct(lo)}% (every block proven)"
            if fmt_value(lo) == fmt_value(hi)
            else f"between {fmt_pct(lo)}% and {fmt_pct(hi)}% (blocks that hit the time limit "
            "count by their bounds)"
            if measured
            else f"between {fmt_pct(lo)}% and {fmt_pct(hi)}% (distances not measured: "
            "[certify] distance = false; a block that varies counts from 0 to 100%)"
        )
        parts.append(
            '<h2 id="certification">Certification (solution variability)</h2>'
            f"<p>Cumulative solution variability: {cum}. A block with solution variability 0 has "
            "exactly one "
            "consistent answer, proven by the solver.</p>"
        )
        parts.append(
            table_html(
                frames["solvar_cdf"],
                th,
                f"Cumulative {place}s and {summary.get('noun', 'persons')} by solution "
                "variability (Table S4 layout)",
                "tbl-solvar",
                summary.get("noun", "persons"),
            )
        )
        parts.append(
            table_html(
                frames["solvar_zero_by_block_size"],
                th,
                f"Share with zero solution variability by {place} size",
                "tbl-solvar-size",
                summary.get("noun", "persons"),
            )
        )
        if "fig-solvar" in figs:
            parts.append(
                figure_html(figs["fig-solvar"], "Solution variability CDF", "fig-solvar", out)
            )
    parts += _claims_part(summary, frames, th)
    parts += _map_part(summary, frames, maps, out)
    if "reid_rates" in frames:
        tabs = paper_tables_from_rates(frames["reid_rates"])
        att = summary.get("attacker", {})
        from ..attacks.attacker import ATTACKER_SOURCES

        who = str(summary["config"]["reidentify"]["attacker"])
        source = ATTACKER_SOURCES.get(who, "an attacker file")
        parts.append(
            '<h2 id="reidentification">Reidentification</h2>'
            f"<p>Attacker data: {html.escape(who)} ({html.escape(source)}), "
            f"{fmt_value(att.get('records'))} records. Precision = confirmed / putative; "
            "baselines use "
            "the attack's "
            "putative set.</p>"
        )
        parts.append(
            table_html(tabs["table4_all"], th, "Table 4 layout: all persons", "tbl-reid-all")
        )
        parts.append(
            table_html(
                tabs["table5_nonmodal"], th, "Table 5 layout: nonmodal persons", "tbl-reid-nonmodal"
            )
        )
        parts.append(
            table_html(
                tabs["table5_nonmodal_by_block_size"],
                th,
                "Nonmodal precision % by block size",
                "tbl-reid-size",
            )
        )
        parts.append(
            table_html(
                tabs["table6_certified"], th, "Table 6 layout: certified blocks", "tbl-reid-cert"
            )
        )
        if tabs["rvr_null_model"].height:
            parts.append(
                '<h3 id="rvr">Ruggles-Van Riper null model (not a precision)</h3>'
                f"<p>{html.escape(RVR_NOTE)}</p>"
            )
            parts.append(
                table_html(
                    tabs["rvr_null_model"],
                    th,
                    "Random records matched to the attacker data",
                    "tbl-rvr",
                )
            )
        if "fig-precision" in figs:
            parts.append(
                figure_html(
                    figs["fig-precision"],
                    "Share of persons with precision >= p (Francis Figure 1 layout)",
                    "fig-precision",
                    out,
                )
            )
    if "defenses" in frames:
        d = frames["defenses"]
        parts.append(
            '<h2 id="defenses">Defenses: risk against accuracy</h2><p>Each defense protects the '
            "microdata, the tables are published again, and the whole attack is rerun. "
            + noise_words(summary)
            + " Swapping is seeded. For TopDown the "
            "noisy-measurement fit columns attack the published noisy measurements directly: an "
            "integer "
            "least-deviation fit per block with the published block total held, then the same "
            "linkage. PRG appears "
            "three ways on the attack's linked persons: drawn once from the release's tables (as "
            "everywhere in "
            "this report), its exact expectation (no draw noise: each person's chance is their own "
            "group's "
            "share of the block), and that expectation from the unprotected tables (the Bureau's "
            "Table 6 "
            "baseline for the rMDF experiment).</p>"
        )
        shown: list[str] = []
        for cols, caption, tid, first in DEFENSE_TABLES:
            keep = [c for c in cols if c in d.columns and d[c].is_not_null().any()]
            if len(keep) < 2:
                continue
            t = d.select(keep)
            if first:  # the release as published, for comparison
                t = pl.concat([no_defense_row(summary, t), t], how="vertical_relaxed")
            parts.append(table_html(spread_over_draws(t), th, caption, tid))
            shown += [c for c in keep if c not in shown]
        parts.append(legend_html(shown))
        parts += draw_flips(d) + release_agreement(d, th)
        parts += [f"<p>{x}</p>" for x in surprises(summary)]
        if "fig-tradeoff" in figs:
            parts.append(
                figure_html(
                    figs["fig-tradeoff"],
                    "Nonmodal precision against block-level accuracy",
                    "fig-tradeoff",
                    out,
                )
            )
        if "frontier" in frames:
            parts += frontier_section(frames["frontier"], th, out)
    if (gtv := summary.get("gtv")) and gtv in summary:
        parts += claims_section(summary[gtv], frames, th, out)
    t = summary.get("timings_s", {})
    parts.append('<h2 id="run">Run: configuration, versions, timings</h2>')
    parts.append(
        table_html(
            pl.DataFrame({"stage": list(t), "seconds": [float(v) for v in t.values()]}),
            0,
            "Time per stage (summed over chunks)",
            "tbl-timings",
        )
    )
    pm = summary.get("peak_memory", {})
    if cfg.run.scheduler:
        cluster = html.escape(cfg.run.scheduler)
        where = f"units of work ran on the Dask cluster at {cluster} (not measured here)"
    elif cfg.run.workers > 1:
        where = f"largest worker process {fmt_value(pm.get('largest_worker_process_mib'))} MiB"
    else:
        where = "all work ran in the main process"
    parts.append(
        f"<p>Peak memory: main process {fmt_value(pm.get('main_process_mib'))} MiB; {where}. "
        f"Seed {cfg.run.seed}. Resumed stages: {len(summary.get('resumed_stages', []))}.</p>"
    )
    if summary.get("notes"):  # what the run did other than asked: a table left out, a level
        parts.append(
            "<p>Notes (what the run did other than asked):</p><ul>"
            + "".join(f"<li>{html.escape(n)}</li>" for n in summary["notes"])
            + "</ul>"
        )
    if summary.get("failures"):
        parts.append(
            '<p class="fail">Failed units:</p><ul>'
            + "".join(f"<li>{html.escape(f)}</li>" for f in summary["failures"])
            + "</ul>"
        )
    parts += _provenance(summary, cfg)
    terms = [
        (t, d) for t, d in GLOSSARY if noun == "persons" or t in EVERY_POPULATION_TERMS
    ]  # another population's report: the terms it uses (no linkage, no defenses)
    parts.append(
        '<h2 id="glossary">Glossary</h2><dl class="glossary">'
        + "".join(f"<dt><b>{html.escape(t)}</b></dt><dd>{html.escape(d)}</dd>" for t, d in terms)
        + "</dl>"
    )
    parts.append(
        '<p class="muted">Every number above is in results/*.csv and summary.json beside this file '
        "(a table's column names there are in the legend's brackets). Methods: Abowd et al. "
        "(2023), "
        "reconstruction, certification and reidentification of the 2010 Census; baselines after "
        "Francis "
        "(2022) and Ruggles and Van Riper (2022); TopDown after Abowd et al. (2022).</p>"
    )
    return write_page(out, cfg.report.title, parts)


def _provenance(summary: dict, cfg: AuditConfig) -> list[str]:
    """The command, configuration and versions a report's numbers came from."""
    versions = "\n".join(f"{k} {v}" for k, v in summary.get("versions", {}).items())
    return [
        f"<p>Command: <code>{html.escape(summary.get('command') or '')}</code></p>",
        "<h3>Configuration</h3><pre>" + html.escape(cfg.to_toml()) + "</pre>",
        "<h3>Versions</h3><pre>" + html.escape(versions) + "</pre>",
    ]
