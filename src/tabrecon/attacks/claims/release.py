"""Generate-then-Verify over a whole release (:mod:`tabrecon.attacks.claims.block` does one block):
every block through the runner (in parallel, written as each finishes, resumable, a failed block
recorded while the others go on), the results as a :class:`ReleaseClaimsRun` (claims, per-block
figures, the by-k table and its plot) and the claims of a release read back from its files.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ...engine.solvers import SolverOptions
from ...errors import InputError, TabreconError
from ...io import write_figure
from ...runner import Result, RunOptions, UnitsRun, run_units
from ...schema.spec import Schema, Units
from ...tables.publication import EXACT, Publication
from ...tables.spec import table_by_name
from ...vocab import ClaimStatus, UnitStatus, Verdict
from .block import (
    BLOCK_COLUMNS,
    CLAIM_COLUMNS,
    UnitClaims,
    claim_keys,
    column_indices,
    generate_then_verify,
    matching_claims,
    one_of_n,
)

if TYPE_CHECKING:
    from ...schema.registry import Population


# --------------------------------------------------------------------------------------------------
# A whole release: block by block, in parallel, written as each block finishes, resumable
# --------------------------------------------------------------------------------------------------
def _unit_seed(seed: int, unit: str) -> int:
    """Each block's own seed, so a resumed or parallel run draws what a serial one does."""
    return (seed * 1_000_003 + zlib.crc32(unit.encode())) % 2**31


@dataclass(frozen=True)
class _BlockTask:
    """One block's Generate-then-Verify (``K`` solutions, claims of ``k_values`` columns) and
    its reconstruction's verdict, within ``block_seconds``, a unit of :func:`release_claims`;
    ``tied``: the block's tables of the population its records tie to."""

    geoid: str
    long: pl.DataFrame
    pop: Population
    tables: Any
    k_values: tuple[int, ...]
    k_solutions: int
    seed: int
    opts: SolverOptions
    block_seconds: float | None
    tied: pl.DataFrame | None
    pub: Publication

    def __call__(self) -> Result:
        geoid, long, pop, tables, pub = self.geoid, self.long, self.pop, self.tables, self.pub
        schema = pop.schema
        opts, block_seconds, tied = self.opts, self.block_seconds, self.tied
        from ...engine.reconstruct import ReconstructOptions, reconstruct_units
        from ...engine.variability import capped

        t0 = time.perf_counter()
        # the block's time limit bounds the whole block: Generate-then-Verify (claims verified
        # before it runs out are kept), then the uniqueness proof -- only where the generated
        # solutions were all the same (most blocks' differ: a witness that they vary, which no
        # proof can overturn). The block's reconstruction is the first generated solution (it
        # satisfies every published cell); it is solved for apart only where none was generated
        rec: Any = None  # the block's reconstruction, where one is solved for apart
        verdicts = None
        if tied is not None:  # the full reconstruction's verdict given both releases
            from ..joint import reconstruct_together

            ropts = opts if block_seconds is None else capped(opts, block_seconds / 2)
            rec = reconstruct_together(long, tied, pop, ropts)
            verdicts = rec.blocks.select(
                "geoid",
                pl.when(pl.col("status") == "consistent")
                .then(pl.col("units_verdict"))
                .otherwise(pl.col("status"))
                .alias("reconstruction"),
            )
        res = generate_then_verify(
            long,
            pop,
            tables,
            self.k_values,
            self.k_solutions,
            _unit_seed(self.seed, geoid),
            opts=opts,
            block_seconds=(
                None
                if block_seconds is None
                else max(block_seconds - (time.perf_counter() - t0), 1e-3)
            ),
            tied=tied,
            publication=pub,
        )
        x0 = res.first.get(geoid)
        if verdicts is None:
            left = None if block_seconds is None else block_seconds - (time.perf_counter() - t0)
            popts = opts if left is None else capped(opts, max(left, 1.0))
            if x0 is not None and geoid in res.varies:
                status: str = Verdict.VARIES
            else:  # the proof; with no solution generated, the reconstruction's own solve
                ref = None
                if x0 is not None:
                    ref = Units(schema, np.full(x0.size, geoid), schema.decode(x0), None, "claims")
                o = ReconstructOptions(solver=popts, publication=pub)
                rec = reconstruct_units(long, pop, o, tables=tables, reference=ref)
                status = rec.blocks["status"][0]
            verdicts = pl.DataFrame({"geoid": [geoid], "reconstruction": [str(status)]})
        if tied is None and x0 is not None:
            types = x0
        else:  # a tied release's joint reconstruction, or the block's own solve
            types = rec.units.types if rec is not None else np.zeros(0, dtype=np.int64)
        blocks = res.blocks.join(verdicts, on="geoid", how="left")
        types, counts = np.unique(types, return_counts=True)
        st = {
            "unit": geoid,
            "status": UnitStatus.OK,
            "blocks": blocks.to_dicts(),
            "recon_types": types.tolist(),
            "recon_counts": counts.tolist(),
        }
        return st, res.claims


@dataclass
class ReleaseClaimsRun(UnitsRun):
    """Verified claims about the records of ``schema`` (housing units, group-quarters persons,
    ...) for every block of a release.

    ``blocks`` has one row per block: units, admissible types, solutions generated, candidate and
    verified claims, seconds, ``status`` (ok | time-limit: claims verified before the block's
    time ran out, or before any solution was found | infeasible: the block's tables contradict
    each other) and
    ``reconstruction`` (unique | varies | undecided | infeasible | failed: whether the block's
    full reconstruction is the only one). ``claims`` has one row per verified claim."""

    results: list[dict]
    claims: pl.DataFrame
    blocks: pl.DataFrame
    tables: tuple[str, ...]
    k_values: tuple[int, ...]
    k_solutions: int
    pop: Population
    truth: Units | None = None

    @classmethod
    def of(
        cls,
        res: UnitClaims,
        pop: Population,
        k_values: tuple[int, ...],
        k_solutions: int,
        truth: Units | None = None,
        tables: tuple[str, ...] = (),
    ) -> ReleaseClaimsRun:
        """The run of one :func:`generate_then_verify` call (its blocks run in this process),
        for its figures and files:
        ``ReleaseClaimsRun.of(res, pop, k_values, k_solutions, truth).by_k()``."""
        done = [{"unit": g, "status": UnitStatus.OK} for g in res.blocks["geoid"].to_list()]
        return cls(done, res.claims, res.blocks, tables, k_values, k_solutions, pop, truth)

    @property
    def schema(self) -> Schema:
        """The population's schema (its records' attributes)."""
        return self.pop.schema

    @property
    def noun(self) -> str:
        """What the records are called (``housing units``)."""
        return self.pop.noun

    @property
    def problem_blocks(self) -> pl.DataFrame:
        """Blocks whose claims are incomplete or whose tables admit no units."""
        return self.blocks.filter(pl.col("status") != ClaimStatus.OK)

    def _reconstruction_units(self) -> Units:
        types = np.concatenate(
            [
                np.asarray(r["recon_types"], dtype=np.int64)
                for r in self.results
                if "recon_types" in r
            ]
            or [np.zeros(0, dtype=np.int64)]
        )
        counts = np.concatenate(
            [
                np.asarray(r["recon_counts"], dtype=np.int64)
                for r in self.results
                if "recon_types" in r
            ]
            or [np.zeros(0, dtype=np.int64)]
        )
        geos = np.concatenate(
            [np.full(len(r["recon_types"]), r["unit"]) for r in self.results if "recon_types" in r]
            or [np.zeros(0, dtype=str)]
        )
        t = np.repeat(types, counts)
        geo = np.repeat(geos, counts).astype(str)
        return Units(self.schema, geo, self.schema.decode(t), None, "reconstruction")

    def by_k(self) -> pl.DataFrame:
        """The study's layout by number of columns k: blocks with a verified singleton (count and
        share), verified singleton claims and all verified claims, and the median binomial
        baseline P(count = 1) of the verified singletons (share of matching units in the tract:
        of the truth when given, else of the reconstruction, the attacker's own estimate). With
        the truth: units singled out and units covered by any verified claim (each unit once)."""
        nb = self.blocks.height
        c = self.claims
        rows = []
        truth = self.truth
        base_from = truth if truth is not None else self._reconstruction_units()
        if truth is not None and c.height:
            found = found_claims(c, self.schema)
            hits = matching_claims(found, self.schema, truth)
        else:
            found, hits = [], []
        tract_of = base_from.block_geoid.astype("U11")
        key_cache: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
        sizes = dict(
            zip(self.blocks["geoid"].to_list(), self.blocks["units"].to_list(), strict=True)
        )
        for k in self.k_values:
            ck = c.filter(pl.col("k") == k)
            single = ck.filter(pl.col("m") == 1)
            base = []
            for row in single.iter_rows(named=True):
                cols = column_indices(self.schema, row["columns"])
                tract = row["geoid"][:11]
                if (tract, cols) not in key_cache:
                    idx = np.flatnonzero(tract_of == tract)
                    key_cache[(tract, cols)] = claim_keys(base_from.types[idx], self.schema, cols)
                keys = key_cache[(tract, cols)]
                p = float((keys == row["key"]).mean()) if keys.size else 0.0
                base.append(one_of_n(sizes.get(row["geoid"], 0), p))
            with_single = single["geoid"].n_unique()
            r = {
                "k": k,
                "blocks": nb,
                "blocks_with_singleton": with_single,
                "blocks_with_singleton_pct": 100.0 * with_single / nb if nb else float("nan"),
                "verified_singletons": single.height,
                "verified_claims": ck.height,
                "baseline_median": float(np.median(base)) if base else float("nan"),
            }
            if truth is not None:
                one: set[int] = set()
                every: set[int] = set()
                for f, h in zip(found, hits, strict=True):
                    if f[1] == k:
                        every.update(h.tolist())
                        if f[4] == 1:
                            one.update(h.tolist())
                r["units_singled_out"] = len(one)
                r["units_covered"] = len(every)
            rows.append(r)
        return pl.DataFrame(rows)

    def summary(self) -> dict:
        b = self.blocks
        rec = b["reconstruction"].value_counts() if b.height else None
        counts = (
            dict(zip(rec["reconstruction"], rec["count"], strict=True)) if rec is not None else {}
        )
        occupied = int(b["units"].sum()) if b.height else 0
        return {
            "schema": self.schema.name,
            "tables": list(self.tables),
            "k_values": list(self.k_values),
            "k_solutions": self.k_solutions,
            "failed_blocks": len(self.failed),
            "blocks": b.height,
            "units": occupied,
            "blocks_unique_reconstruction": int(counts.get("unique", 0)),
            "blocks_reconstruction_varies": int(counts.get("varies", 0)),
            "blocks_reconstruction_undecided": int(counts.get("undecided", 0)),
            "blocks_time_limit": int((b["status"] == ClaimStatus.TIME_LIMIT).sum())
            if b.height
            else 0,
            "blocks_infeasible": int((b["status"] == ClaimStatus.INFEASIBLE).sum())
            if b.height
            else 0,
            "verified_claims": self.claims.height,
            "verified_singletons": int((self.claims["m"] == 1).sum()) if self.claims.height else 0,
            "block_seconds_median": float(np.median(b["seconds"].to_numpy())) if b.height else 0.0,
            "block_seconds_max": float(b["seconds"].to_numpy().max()) if b.height else 0.0,
        }

    def summary_lines(self, seconds: float = 0.0) -> list[str]:
        """The run in words (Markdown bullets)."""
        s = self.summary()
        b = self.schema.geography  # block, or a declared release's own (school)
        lines = [
            f"- tables: {', '.join(self.tables)}; K = {self.k_solutions} generated solutions "
            f"per {b}",
            f"- {b}s: {s['blocks']:,}, {self.noun} reconstructed: {s['units']:,}; full "
            "reconstruction "
            f"proven unique in {s['blocks_unique_reconstruction']:,} {b}(s), varies in "
            f"{s['blocks_reconstruction_varies']:,}, undecided in "
            f"{s['blocks_reconstruction_undecided']:,}",
            f"- verified claims: {s['verified_claims']:,}, of which singletons "
            f"{s['verified_singletons']:,}; seconds per {b}: median "
            f"{s['block_seconds_median']:.2f}, max {s['block_seconds_max']:.2f}",
        ]
        if s["blocks_time_limit"] or s["blocks_infeasible"]:
            lines.append(
                f"- {s['blocks_time_limit']} {b}(s) reached their time limit (claims verified "
                f"so far kept); {s['blocks_infeasible']} {b}(s) have contradictory tables"
            )
        lines.append(f"- {s['failed_blocks']} {b}(s) failed; time {seconds:.1f} s")
        return lines

    def write(self, out: str | Path, seed: int = 0, seconds: float = 0.0) -> list[Path]:
        """Write ``out/<schema>_by_k.csv`` (the study's Figure 2 / Tables 2-3 layout;
        ``households_by_k.csv`` for housing units), ``<schema>_claims.csv``,
        ``<schema>_blocks.csv``, ``summary.json``, ``summary.md`` and ``<schema>_by_k.png``."""
        from ...io import write_frame, write_json, write_text

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        by_k = self.by_k()
        name = self.schema.name
        study = self.pop.study_by_k
        paths = [
            write_frame(by_k, out / f"{name}_by_k.csv"),
            write_frame(self.claims, out / f"{name}_claims.csv"),
            write_frame(self.blocks, out / f"{name}_blocks.csv"),
            write_json(
                out / "summary.json", {**self.summary(), "seconds": round(seconds, 2), "seed": seed}
            ),
            write_text(
                out / "summary.md",
                "\n".join(
                    [
                        f"# Verified claims about {self.noun} (Generate-then-Verify)",
                        "",
                        *self.summary_lines(seconds),
                        "",
                        *by_k_markdown(by_k, self.noun, study),
                    ]
                )
                + "\n",
            ),
        ]
        png = plot_by_k(by_k, out / f"{name}_by_k.png", study)
        if png is not None:
            paths.append(png)
        return paths


def by_k_markdown(
    by_k: pl.DataFrame,
    noun: str = "housing units",
    study: Mapping[int, tuple[int, int]] | None = None,
) -> list[str]:
    """The by-k figures as a Markdown table, with a study's (``study``: k -> records singled out,
    covered) where it has them."""
    truth = "units_singled_out" in by_k.columns
    head = "| k | blocks with a verified singleton | verified singletons | verified claims |"
    head += f" {noun} singled out | {noun} covered |" if truth else ""
    head += " median baseline |"
    head += " the study (singled out / covered, of 486) |" if study else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in by_k.iter_rows(named=True):
        ref = (study or {}).get(r["k"])
        row = (
            f"| {r['k']} | {r['blocks_with_singleton']:,} of {r['blocks']:,} "
            f"({r['blocks_with_singleton_pct']:.0f}%) | {r['verified_singletons']:,} | "
            f"{r['verified_claims']:,} |"
        )
        if truth:
            row += f" {r['units_singled_out']:,} | {r['units_covered']:,} |"
        row += f" {r['baseline_median']:.3f} |"
        row += f" {f'{ref[0]} / {ref[1]}' if ref else ''} |" if study else ""
        lines.append(row)
    return lines


#: Liu et al. (2025) Tables 2 and 3: households singled out by verified singletons and covered by
#: any verified claim, of 486 in 50 median blocks (their DHC tables; methods.md section 7); the
#: housing-unit population shows them beside its own (``Population.study_by_k``)
STUDY_TABLES_2_3 = {
    5: (166, 431),
    6: (148, 379),
    7: (109, 274),
    8: (61, 179),
    9: (19, 30),
    10: (2, 2),
}


def plot_by_k(
    by_k: pl.DataFrame, path: Path, study: Mapping[int, tuple[int, int]] | None = None
) -> Path | None:
    """Blocks with a verified singleton by k (the study's Figure 2 layout) as a PNG; with the
    study's figures, its k = 5 mark."""
    if not by_k.height:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(by_k["k"], by_k["blocks_with_singleton_pct"], marker="o", label="this release")
    if study:
        ax.axhline(90, ls=":", c="grey", label="the study at k = 5: > 90%")
    ax.set_xlabel("columns in the claim (k)")
    ax.set_ylabel("blocks with a verified singleton, %")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def matching_units(claims: pl.DataFrame, truth: Units) -> list[np.ndarray]:
    """For each verified claim (a row of a run's ``claims``), the indices of the true records
    (of ``truth``'s schema) of its block that match it: as many as the claim's m when the claim
    is true."""
    return (
        matching_claims(found_claims(claims, truth.schema), truth.schema, truth)
        if claims.height
        else []
    )


def found_claims(c: pl.DataFrame, schema: Schema) -> list[tuple]:
    return [
        (
            r["geoid"],
            r["k"],
            column_indices(schema, r["columns"]),
            r["key"],
            r["m"],
        )
        for r in c.iter_rows(named=True)
    ]


@dataclass(frozen=True, kw_only=True)
class ClaimsOptions:
    """What a release's Generate-then-Verify asks (one value, as
    :class:`~tabrecon.engine.reconstruct.ReconstructOptions` is for reconstruction; how the run is
    carried out -- workers, output, resume, progress -- is apart).

    >>> ClaimsOptions(k_solutions=8, k_values=(4, 5)).block_seconds
    300.0
    >>> ClaimsOptions(k_solutions=0)
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: k_solutions (solutions generated per block) must be >= 1 (got 0)
    """

    #: numbers of columns a claim sets (None: the population's, :mod:`tabrecon.schema.registry`)
    k_values: tuple[int, ...] | None = None
    #: solutions generated per block (the study's K)
    k_solutions: int = 20
    seed: int = 0
    solver: SolverOptions = field(default_factory=SolverOptions)
    #: seconds per block (None: no limit): claims verified before it runs out are kept
    block_seconds: float | None = 300.0
    #: how the cells were published (rounded, withheld: :mod:`tabrecon.tables.publication`)
    publication: Publication = EXACT

    def __post_init__(self) -> None:
        if self.k_solutions < 1:
            raise TabreconError(
                f"k_solutions (solutions generated per block) must be >= 1 (got {self.k_solutions})"
            )


def release_claims(
    long: pl.DataFrame,
    pop: Population,
    options: ClaimsOptions | None = None,
    *,
    run: RunOptions | None = None,
    truth: Units | None = None,
    tied: pl.DataFrame | None = None,
) -> ReleaseClaimsRun:
    """Generate-then-Verify on every block of a release's tables of ``pop``, block by
    block (the module docstring says how; blocks are independent, their tables alone constrain
    them), asking ``options`` (:class:`ClaimsOptions`). Only the schema's tables the long table
    holds in full are used. With ``run.out`` (:class:`~tabrecon.runner.RunOptions`) each block's
    claims go to ``<out>/claims.parts/`` as it finishes and a rerun resumes (a rerun with other
    tables or options is refused). With ``tied`` (households: the person tables of the same
    blocks) every claim is verified given both releases (:func:`generate_then_verify`). With a
    ``publication`` rule (rounded, withheld cells: :mod:`tabrecon.tables.publication`) every claim
    is verified under the intervals the published values allow."""
    schema = pop.schema
    from ...provenance import digest_long
    from ...tables.spec import complete_tables

    options = options or ClaimsOptions()
    k_values, k_solutions, seed = options.k_values, options.k_solutions, options.seed
    block_seconds, publication = options.block_seconds, options.publication

    tables = complete_tables(long, pop)
    if not tables:
        raise TabreconError(
            f"no {schema.name} table is complete in these tables; see tabrecon tables list "
            f"--schema {schema.name}"
        )
    k_values = pop.k_values if k_values is None else k_values
    n_attr = len(schema.claim_columns)
    bad = [k for k in k_values if not 1 <= k <= n_attr]
    if bad or not k_values:
        raise TabreconError(
            f"k (columns per claim) must lie in 1..{n_attr}, the {schema.name} schema's columns "
            f"(got {bad or 'none'})"
        )
    opts = options.solver
    long = long.filter(
        pl.col("cell").is_in([c.id for n in tables for c in table_by_name(n, pop).cells()])
    )
    by_block = long.partition_by("geoid", as_dict=True)
    geoids = sorted(g for (g,) in by_block)
    tied_by: dict = {}
    if tied is not None and not publication.exact:
        raise TabreconError(
            f"publication {publication}: claims given a tied release assume exact tables so far"
        )
    if tied is not None:
        tied_by = tied.filter(pl.col("geoid").str.len_chars() == 15).partition_by(
            "geoid", as_dict=True
        )
        only = sorted(set(geoids) ^ {g for (g,) in tied_by})
        if only:
            raise InputError(
                f"block {only[0]} is in one release and not the other ({len(only) - 1} more "
                "such blocks): both releases must cover the same blocks"
            )
    run = run or RunOptions()
    parts = run.parts("claims.parts")
    fp = None
    if parts is not None:
        fp = {
            "tables": digest_long(long),
            "table_names": ",".join(tables),
            "k_values": ",".join(map(str, k_values)),
            "K": k_solutions,
            "seed": seed,
            "block_seconds": block_seconds,
            "solver": str(opts),
            "schema": schema.name,
        }
        if tied is not None:  # (absent otherwise: earlier runs' parts stay resumable)
            fp["tied"] = digest_long(tied)
        if not publication.exact:  # (the same)
            fp["publication"] = str(publication)
    ran = run_units(
        geoids,
        lambda g: _BlockTask(
            g,
            by_block[(g,)],
            pop,
            tables,
            k_values,
            k_solutions,
            seed,
            opts,
            block_seconds,
            tied_by[(g,)] if tied is not None else None,
            publication,
        ),
        tag=f"{schema.name}-claims",
        parts=parts,
        run=run,
        fingerprint=fp,
    )
    dfs = ran.tables(geoids)
    claims = pl.concat(dfs) if dfs else pl.DataFrame(schema=CLAIM_COLUMNS)
    block_rows = ran.rows("blocks")
    blocks = (
        pl.DataFrame(block_rows, infer_schema_length=None).sort("geoid")
        if block_rows
        else pl.DataFrame(schema={**BLOCK_COLUMNS, "reconstruction": pl.String})
    )
    return ReleaseClaimsRun(ran.results, claims, blocks, tables, k_values, k_solutions, pop, truth)
