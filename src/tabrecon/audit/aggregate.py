"""The audit's figures across chunks: each chunk's summable aggregates (reidentification
counts, agreement by block-size bin, certification per block) added up exactly, and the
summary every report and ``summary.json`` read (:func:`audit_summary`)."""

from __future__ import annotations

import statistics
from typing import Any

import polars as pl

from ..attacks.certify import proven_unique
from ..attacks.reidentify import RATE_COLUMNS


def pct_rates(rates: pl.DataFrame) -> pl.DataFrame:
    """Sum count rates over chunks and add putative %, confirmed % and precision %."""
    s = rates.group_by("group", "bin", "source", maintain_order=True).agg(
        pl.col("attacker_records").sum(), pl.col("putative").sum(), pl.col("confirmed").sum()
    )
    n, put, conf = pl.col("attacker_records"), pl.col("putative"), pl.col("confirmed")
    return s.with_columns(
        pl.when(n > 0).then(100.0 * put / n).otherwise(None).alias("putative_pct"),
        pl.when(n > 0).then(100.0 * conf / n).otherwise(None).alias("confirmed_pct"),
        pl.when(put > 0).then(100.0 * conf / put).otherwise(None).alias("precision_pct"),
    )


def agree_table(frames: list[pl.DataFrame]) -> pl.DataFrame:
    s = pl.concat(frames).group_by("bin", maintain_order=True).sum()
    tot = s.select(pl.lit("all").alias("bin"), pl.exclude("bin").sum())
    s = pl.concat([tot, s])
    return s.with_columns(
        pl.when(pl.col("persons") > 0)
        .then(100.0 * pl.col("exact") / pl.col("persons"))
        .alias("exact_pct"),
        pl.when(pl.col("persons") > 0)
        .then(100.0 * pl.col("binned") / pl.col("persons"))
        .alias("binned_pct"),
    )


def audit_summary(
    cfg, frames, facts, allb, cum, chunks, failures, attacker_reports, md_path, ts_path
) -> dict:
    s: dict[str, Any] = {
        "input": {
            "microdata": str(md_path) if md_path else None,
            "tables": str(ts_path) if ts_path else None,
        },
        "chunks": [
            {"name": c.name, "counties": len(c.counties), "persons": c.persons} for c in chunks
        ],
        "config": cfg.to_dict(),
        **facts,
        "failures": failures,
    }
    for lv in cfg.reconstruct.levels:
        f = frames.get(f"agreement_{lv.replace('+', '_')}")
        if f is not None:
            r = f.row(0, named=True)
            s[f"agreement_{lv}"] = {
                "exact_pct": r["exact_pct"],
                "binned_pct": r["binned_pct"],
                "persons": r["persons"],
            }
    if allb is None and cfg.certify.enabled and facts.get("inhabited_blocks"):
        allb = pl.DataFrame(  # every tract failed: no block is certified, and the headline says so
            {"block_geoid": [], "persons": [], "proven": [], "solvar": [], "status": []},
            schema={
                "block_geoid": pl.String,
                "persons": pl.Int64,
                "proven": pl.Boolean,
                "solvar": pl.Float64,
                "status": pl.String,
            },
        )
    if allb is not None:
        inh = allb.filter(pl.col("persons") > 0)
        uniq = inh.filter(proven_unique(inh))
        # blocks of a tract that failed are not in ``allb``: they count as not proven unique
        inhabited = max(inh.height, int(facts.get("inhabited_blocks", 0)))
        s["certify"] = {
            "level": "block+tract"
            if "block+tract" in cfg.reconstruct.levels
            else cfg.reconstruct.levels[0],
            "inhabited_blocks": inhabited,
            "uncertified_blocks": inhabited - inh.height,
            "unique_blocks": uniq.height,
            "unique_blocks_pct": 100.0 * uniq.height / inhabited if inhabited else None,
            "unique_persons": int(uniq["persons"].sum()),
            "unique_persons_pct": 100.0 * uniq["persons"].sum() / inh["persons"].sum()
            if inh.height
            else None,
            "unproven_blocks": int((~inh["proven"]).sum()),
            "cumulative_solvar_pct": list(cum) if cum else None,
        }
    if "reid_rates" in frames:
        rt = frames["reid_rates"].filter(pl.col("bin") == "all")
        s["reidentification"] = {}
        for src in ("attack", "mdg", "prg", "truth", "rvr"):
            s["reidentification"][src] = {}
            for g in (
                "all",
                "modal",
                "nonmodal",
                "uniques",
                "certified_nonmodal",
                "certified_uniques",
            ):
                r = rt.filter((pl.col("group") == g) & (pl.col("source") == src))
                if r.height:
                    s["reidentification"][src][g] = {k: r[k][0] for k in RATE_COLUMNS}
        s["attacker"] = (
            attacker_reports[0]
            if len(attacker_reports) == 1
            else {
                "records": sum(a.get("records", 0) for a in attacker_reports),
                "chunks": len(attacker_reports),
            }
        )
    if "defenses" in frames:
        s["defenses"] = frames["defenses"].to_dicts()
    return s


def defenses_by_name(defenses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary's defense rows (a row per draw: ``spec``, ``spec#2``, ...) as a row per
    defense: each number the median over its draws, with ``draws`` and, per number that
    varies, ``<key>_range`` (lowest, highest); a defense drawn once is its own row.

    >>> rows = [{"defense": "rho=1", "x": 0.2}, {"defense": "rho=1#2", "x": 0.4},
    ...         {"defense": "rho=1#3", "x": 0.3}, {"defense": "swap-lo", "x": 0.5}]
    >>> [(r["defense"], r["draws"], r["x"], r.get("x_range")) for r in defenses_by_name(rows)]
    [('rho=1', 3, 0.3, (0.2, 0.4)), ('swap-lo', 1, 0.5, None)]
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in defenses:
        groups.setdefault(str(d["defense"]).split("#")[0], []).append(d)
    out = []
    for name, rows in groups.items():
        merged: dict[str, Any] = {**rows[0], "defense": name, "draws": len(rows)}
        for key in rows[0]:
            vals = [r.get(key) for r in rows]
            nums = [
                v
                for v in vals
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
            ]
            if len(rows) < 2 or len(nums) < len(vals):
                continue
            merged[key] = statistics.median(nums)
            if min(nums) != max(nums):
                merged[f"{key}_range"] = (min(nums), max(nums))
        out.append(merged)
    return out
