"""The audit report: one self-contained HTML file (styles and plots inline) built from the audit's
aggregate tables. It holds headline findings in plain words, the paper-style tables, plots, and the
exact configuration, versions, seeds and timings. It shows aggregates only, never a record of the
confidential input; counts below the configured threshold are marked."""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path
from typing import Any

import polars as pl

from ..config import AuditConfig
from .reid import LABELS, paper_tables_from_rates

COUNT_COLUMNS = {
    "blocks", "persons", "exact", "binned", "attacker records", "putative", "confirmed", "unproven_blocks",
    "certified_blocks", "attacker_records", "inhabited blocks",
}  # fmt: skip

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em} h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em} th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3} td.t{text-align:left} td.small{background:#fff3cd}
.headline li{margin:.4em 0} .muted{color:#666;font-size:.85em} figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
div.scroll{overflow-x:auto;max-width:100%} pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.85em} .fail{color:#a00}
"""


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 1 or v == 0 else f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def table_html(df: pl.DataFrame, threshold: int, caption: str = "", table_id: str = "") -> str:
    """An HTML table; counts in (0, threshold) and the per cents of their row are marked."""
    cols = df.columns
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
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
            cells.append(f"<td class=\"{' '.join(cls)}\">{_fmt(v)}{mark}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    tid = f' id="{table_id}"' if table_id else ""
    return (f'<div class="scroll"><table{tid}>{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")  # fmt: skip


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _figure(b64: str, caption: str, fig_id: str, out: Path | None = None) -> str:
    if out is not None:
        (out / f"{fig_id}.png").write_bytes(base64.b64decode(b64))
    return (f'<figure id="{fig_id}"><img alt="{html.escape(caption)}" src="data:image/png;base64,{b64}">'
            f"<figcaption class=\"muted\">{html.escape(caption)}</figcaption></figure>")  # fmt: skip


def _plots(frames: dict[str, pl.DataFrame], summary: dict) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, str] = {}
    if "precision_cdf" in frames:
        f = frames["precision_cdf"]
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
        for s, st in (("attack", "-"), ("mdg", "--"), ("prg", ":"), ("truth", "-."), ("francis", "-")):
            col = f"{s}_share_pct"
            if col in f.columns and f[col].is_not_nan().any():
                lab = LABELS.get(s, "Francis majority inference")
                ax.plot(f["p_pct"], f[col], st, label=lab, color="grey" if s == "francis" else None)
        ax.set(xlabel="precision p (%)", ylabel="persons with precision >= p (%)",
               title="Per-person precision (block confirmed / putative)")  # fmt: skip
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        figs["fig-precision"] = _png(fig)
    if "solvar_cdf" in frames:
        f = frames["solvar_cdf"]
        fig, ax = plt.subplots(figsize=(7, 3.8), dpi=100)
        x = [str(v) for v in f["solvar_at_most_pct"].to_list()]
        ax.plot(x, f["cum_blocks_pct"], "o-", label="blocks")
        ax.plot(x, f["cum_persons_pct"], "s-", label="persons")
        ax.set(xlabel="solution variability at most (%)", ylabel="cumulative share (%)",
               title="How much of the release is pinned down (solution variability CDF)", ylim=(0, 101))  # fmt: skip
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        figs["fig-solvar"] = _png(fig)
    if "defenses" in frames and frames["defenses"].height:
        f = frames["defenses"]
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
        acc = "tvd_block" if "tvd_block" in f.columns else None
        for r in f.iter_rows(named=True):
            x = r[acc] if acc else float("nan")
            ax.scatter([x], [r["attack_nonmodal_precision"]], s=40)
            ax.annotate(f" {r['defense']}", (x, r["attack_nonmodal_precision"]), fontsize=8)
            ax.scatter([x], [r["prg_nonmodal_precision"]], marker="^", color="grey", s=25)
        base = summary.get("reidentification", {})
        if base.get("attack", {}).get("nonmodal", {}).get("precision_pct") is not None:
            ax.scatter([1.0], [base["attack"]["nonmodal"]["precision_pct"]], s=40, color="black")
            ax.annotate(" no defense", (1.0, base["attack"]["nonmodal"]["precision_pct"]), fontsize=8)
            ax.scatter([1.0], [base["prg"]["nonmodal"]["precision_pct"]], marker="^", color="grey", s=25)
        ax.scatter([], [], marker="^", color="grey", label="PRG baseline (same release)")
        ax.set(xlabel="block-level TVD accuracy (1 = unchanged)", ylabel="nonmodal precision (%)",
               title="Risk vs accuracy across defenses")  # fmt: skip
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        figs["fig-tradeoff"] = _png(fig)
    return figs


def _headlines(s: dict) -> list[str]:
    out = []
    c = s.get("certify")
    if c and c.get("inhabited_blocks"):
        out.append(
            f"<b>{c['unique_blocks']:,} of {c['inhabited_blocks']:,} inhabited blocks ({_fmt(c['unique_blocks_pct'])}%)</b> "
            f"have exactly one set of person records consistent with the published {c['level']} tables: "
            f"{c['unique_persons']:,} persons ({_fmt(c['unique_persons_pct'])}%) are rebuilt exactly, and provably so."
            + (f" {c['unproven_blocks']:,} block(s) hit the solver time limit and are counted by their bounds." if c["unproven_blocks"] else "")
        )  # fmt: skip
    for lv in ("block", "block+tract"):
        a = s.get(f"agreement_{lv}")
        if a:
            out.append(f"Reconstruction from the {lv} tables matches <b>{_fmt(a['binned_pct'])}%</b> of persons on block, sex, "
                       f"age bin, race and ethnicity ({_fmt(a['exact_pct'])}% with exact age).")  # fmt: skip
    r = s.get("reidentification")
    if r and r.get("attack", {}).get("nonmodal"):
        p = lambda src, g: _fmt(r[src][g]["precision_pct"])  # noqa: E731
        out.append(
            f"An attacker who knows block, sex and age ({html.escape(str(s['config']['reidentify']['attacker']))} attacker) and links them "
            f"to the reconstruction learns race and ethnicity correctly for <b>{p('attack', 'all')}%</b> of linked persons. "
            f"For persons unlike their neighbours (nonmodal) it is <b>{p('attack', 'nonmodal')}%</b>, against "
            f"{p('mdg', 'nonmodal')}% for the block's modal guess and {p('prg', 'nonmodal')}% for a proportional guess."
        )  # fmt: skip
        cu = r["attack"].get("certified_uniques")
        if cu and cu["putative"]:
            out.append(f"Nonmodal population uniques in certified blocks -- records the attacker knows are exact -- are "
                       f"right {p('attack', 'certified_uniques')}% of the time ({cu['putative']:,} persons linked).")  # fmt: skip
    for d in s.get("defenses", []):
        out.append(
            f"With <b>{html.escape(d['defense'])}</b>: nonmodal precision {_fmt(d['attack_nonmodal_precision'])}% "
            f"(proportional guess on the same release {_fmt(d['prg_nonmodal_precision'])}%"
            + (f", {_fmt(d['prg_expected_nonmodal_precision'])}% in expectation, {_fmt(d['prg_original_nonmodal_precision'])}% "
               f"from the unprotected tables" if d.get("prg_original_nonmodal_precision") is not None else "")
            + f"), block-level TVD accuracy "
            f"{_fmt(d.get('tvd_block'))}, block totals off by {_fmt(d['mae_block_total'])} persons on average."
            + (f" Fitting records straight to its published noisy measurements gives {_fmt(d['nmf_nonmodal_precision'])}% "
               f"nonmodal precision ({_fmt(d['nmf_agreement_binned_pct'])}% of persons rebuilt, binned)."
               if d.get("nmf_nonmodal_precision") is not None else "")
        )  # fmt: skip
    if s.get("failures"):
        out.append(f'<span class="fail">{len(s["failures"])} unit(s) failed and are left out of the figures (listed under Run).</span>')
    return out


def _input_text(inp: dict) -> str:
    parts = []
    if inp.get("microdata"):
        parts.append(f"microdata <code>{html.escape(inp['microdata'])}</code>")
    if inp.get("tables"):
        parts.append(f"published tables <code>{html.escape(inp['tables'])}</code>")
    return " and ".join(parts)


def write_audit_report(out: Path, summary: dict, frames: dict[str, pl.DataFrame], cfg: AuditConfig) -> Path:
    """Write ``out/report.html`` (and the plots as PNG beside it); return its path."""
    th = cfg.report.small_cell_threshold
    figs = _plots(frames, summary)
    parts = [f"<h1>{html.escape(cfg.report.title)}</h1>",
             f'<p class="muted">Input: {_input_text(summary["input"])}. {summary["persons"]:,} persons, '
             f'{summary["blocks"]:,} blocks, {summary["tracts"]:,} tracts, {len(summary["chunks"])} chunk(s). '
             f"Counts below {th} are marked &dagger; (and the per cents of their row).</p>",
             '<h2 id="headline">Headline findings</h2><ul class="headline">'
             + "".join(f"<li>{h}</li>" for h in _headlines(summary)) + "</ul>"]  # fmt: skip
    parts.append(
        '<h2 id="publish">1. What was published</h2>'
        f"<p>{summary['table_values']:,} table values (34 SF1 person tables); {summary['identity_checks']:,} "
        f"internal-consistency identities checked, {summary['identity_violations']} violated.</p>"
    )
    agr = [k for k in frames if k.startswith("agreement_")]
    if agr:
        parts.append('<h2 id="reconstruction">2. Reconstruction</h2><p>Share of true persons matched one-to-one by the '
                     "reconstruction, by true block size (Abowd et al. Table 3 layout).</p>")  # fmt: skip
        for k in agr:
            lv = k.removeprefix("agreement_").replace("_", "+")
            parts.append(table_html(frames[k], th, f"Agreement, {lv} tables", f"tbl-{k}"))
    if "solvar_cdf" in frames:
        c = summary["certify"]
        parts.append('<h2 id="certification">3. Certification (solution variability)</h2>'
                     f"<p>Cumulative solution variability {_fmt(c['cumulative_solvar_pct'][0])}% to "
                     f"{_fmt(c['cumulative_solvar_pct'][1])}% (bounds). A block with solution variability 0 has exactly one "
                     "consistent answer, proven by the solver.</p>")  # fmt: skip
        parts.append(table_html(frames["solvar_cdf"], th, "Cumulative blocks and persons by solution variability (Table S4 layout)", "tbl-solvar"))
        parts.append(table_html(frames["solvar_zero_by_block_size"], th, "Share with zero solution variability by block size", "tbl-solvar-size"))
        if "fig-solvar" in figs:
            parts.append(_figure(figs["fig-solvar"], "Solution variability CDF", "fig-solvar", out))
    if "reid_rates" in frames:
        tabs = paper_tables_from_rates(frames["reid_rates"])
        att = summary.get("attacker", {})
        parts.append('<h2 id="reidentification">4. Reidentification</h2>'
                     f"<p>Attacker data: {html.escape(str(summary['config']['reidentify']['attacker']))}, "
                     f"{_fmt(att.get('records'))} records. Precision = confirmed / putative; baselines use the attack's "
                     "putative set.</p>")  # fmt: skip
        parts.append(table_html(tabs["table4_all"], th, "Table 4 layout: all persons", "tbl-reid-all"))
        parts.append(table_html(tabs["table5_nonmodal"], th, "Table 5 layout: nonmodal persons", "tbl-reid-nonmodal"))
        parts.append(table_html(tabs["table5_nonmodal_by_block_size"], th, "Nonmodal precision % by block size", "tbl-reid-size"))
        parts.append(table_html(tabs["table6_certified"], th, "Table 6 layout: certified blocks", "tbl-reid-cert"))
        if "fig-precision" in figs:
            parts.append(_figure(figs["fig-precision"], "Share of persons with precision >= p (Francis Figure 1 layout)", "fig-precision", out))
    if "defenses" in frames:
        d = frames["defenses"]
        keep = [c for c in ("defense", "rho", "epsilon", "tvd_block", "tvd_tract", "tvd_county", "mae_block_total",
                            "mean_l1_race_eth", "majority_kept_pct", "certified_blocks", "attack_nonmodal_precision",
                            "prg_nonmodal_precision", "prg_expected_nonmodal_precision", "prg_original_nonmodal_precision",
                            "mdg_nonmodal_precision", "attack_certified_uniques_precision",
                            "nmf_agreement_binned_pct", "nmf_all_precision", "nmf_nonmodal_precision")
                if c in d.columns]  # fmt: skip
        parts.append('<h2 id="defenses">5. Defenses: risk against accuracy</h2><p>Each defense protects the microdata, '
                     "the tables are published again, and the whole attack is rerun. TopDown noise comes from OpenDP's "
                     "cryptographic sampler, so its rows differ from run to run; swapping is seeded. For TopDown the "
                     "<code>nmf_</code> columns attack the published noisy measurements directly: an integer "
                     "least-deviation fit per block with the published block total held, then the same linkage. PRG appears "
                     "three ways on the attack's linked persons: drawn once from the release's tables (as everywhere in "
                     "this report), its exact expectation (no draw noise: each person's chance is their own group's "
                     "share of the block), and that expectation from the unprotected tables (the Bureau's Table 6 "
                     "baseline for the rMDF experiment).</p>")  # fmt: skip
        parts.append(table_html(d.select(keep), th, "Risk and accuracy per defense", "tbl-defenses"))
        if "fig-tradeoff" in figs:
            parts.append(_figure(figs["fig-tradeoff"], "Nonmodal precision against block-level accuracy", "fig-tradeoff", out))
    t = summary.get("timings_s", {})
    parts.append('<h2 id="run">6. Run: configuration, versions, timings</h2>')
    parts.append(table_html(pl.DataFrame({"stage": list(t), "seconds": [float(v) for v in t.values()]}), 0, "Time per stage (summed over chunks)", "tbl-timings"))
    pm = summary.get("peak_memory", {})
    parts.append(f"<p>Peak memory: main process {_fmt(pm.get('main_process_mb'))} MB, largest worker process "
                 f"{_fmt(pm.get('largest_child_process_mb'))} MB. Seed {cfg.run.seed}. Resumed stages: "
                 f"{len(summary.get('resumed_stages', []))}.</p>")  # fmt: skip
    if summary.get("failures"):
        parts.append('<p class="fail">Failed units:</p><ul>' + "".join(f"<li>{html.escape(f)}</li>" for f in summary["failures"]) + "</ul>")
    parts.append(f"<p>Command: <code>{html.escape(summary.get('command') or '')}</code></p>")
    parts.append("<h3>Configuration</h3><pre>" + html.escape(cfg.to_toml()) + "</pre>")
    parts.append("<h3>Versions</h3><pre>" + html.escape("\n".join(f"{k} {v}" for k, v in summary.get("versions", {}).items())) + "</pre>")
    parts.append('<p class="muted">Every number above is in results/*.csv and summary.json beside this file. '
                 "Methods: Abowd et al. (2023) reconstruction, certification and reidentification; baselines MDG/PRG "
                 "per methods.md section 4.</p>")  # fmt: skip
    doc = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
           f"{html.escape(cfg.report.title)}</title><style>{CSS}</style></head><body>" + "\n".join(parts) + "</body></html>")  # fmt: skip
    path = out / "report.html"
    tmp = out / ".report.html.tmp"
    tmp.write_text(doc)
    tmp.replace(path)
    return path
