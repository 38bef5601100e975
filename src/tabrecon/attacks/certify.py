"""Certification: what the published tables prove about a reconstruction, block by block.

*Solution variability* (Abowd et al.; methods.md section 3) of block b, for a reconstruction x* and
the binned key k = (sex, agebin38, race, hispanic): the largest share of the block's records that
differ in any population satisfying all the tables (tract tables included, so blocks are coupled)::

    solvar_b = 100 * max_x sum_k |x_k - x*_k| / (2 N_b) = 100 * max_x sum_k (x*_k - x_k)^+ / N_b

Zero means the block's binned histogram is the only one possible: the reconstruction is exact there
and its uniques are population uniques the attacker *knows*.

Design for speed: one proof certifies a whole tract. To the tract's count model add, for every block
and key with x*_k > 0, a binary z that forces x_k <= x*_k - 1, and require sum z >= 1. Infeasible
means every block is unique (a proof, not a time-out). A solution names blocks that differ; they are
set aside and the test repeats on the rest. Only the blocks that can differ get the (costlier)
maximisation of their distance, which reports a proven value or a (lower, upper) pair on time-out.
Before any of it, one presolve per tract (:func:`tabrecon.attacks.solvers.tighten`) removes the
variables every consistent population shares, so the many small solves carry only the rest.

All of that is :func:`tabrecon.attacks.variability.block_variability`, written over any count
program: what is the persons' own here is the tract's count model
(:func:`tabrecon.attacks.reconstruct.build_tract_model`) and the certification key. The count
model over any schema certifies with the same function
(:func:`tabrecon.attacks.unit_reconstruct.reconstruct_units` with ``distance``).

For block+tract tables the binned model (tract cells summed to age bins) is used: with complete
tract tables its solutions are exactly the binned projections of the full model's (single ages are
then a transportation problem, :func:`tabrecon.attacks.reconstruct.spread_ages`); otherwise the
full model.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import TabreconError
from ..geo import overlap
from ..io import beside, write_csv, write_frame, write_parquet, write_text
from ..provenance import run_fingerprint
from ..schema import (
    AGEBIN_OF_AGE,
    AGEBIN_START,
    BLOCK_SIZE_LABELS,
    N_TYPES,
    Microdata,
    decode_types,
    encode_types,
    size_bin,
)
from ..tables import MISSING, TABLES_BY_NAME, TableSet, tabulate
from . import variability
from .reconstruct import RECON_LEVELS, build_tract_model, diagnose
from .solvers import SolverOptions

#: The status of a block proven to have exactly one consistent population (solvar 0).
UNIQUE = "unique"


def binned_type(t: np.ndarray) -> np.ndarray:
    """The type with its age replaced by the start of its agebin38 (the certification key)."""
    sex, age, race, hisp = decode_types(t)
    return encode_types(sex, AGEBIN_START[AGEBIN_OF_AGE[age]], race, hisp)


@dataclass
class CertResult:
    """Outcome of one tract."""

    unit: str
    level: str
    status: str  # ok | refused | infeasible | error
    blocks: int
    unique_blocks: int
    varying_blocks: int
    undecided_blocks: int
    proofs: int  # solver calls of the zero test
    seconds_zero_test: float
    seconds_distance: float
    message: str = ""


def cells_it_breaks(ts: TableSet, tract: str, level: str, recon: Microdata) -> list[str]:
    """The published cells the reconstruction does not reproduce (the first five, named)."""
    mine_ts = ts.subset(tract)
    levels = ("block", "tract") if level == "block+tract" else ("block",)
    present = [t for t in mine_ts.tables_present() if TABLES_BY_NAME[t].level in levels]
    got = tabulate(recon, present)
    bad: list[str] = []
    for lvl in ("block", "tract") if level == "block+tract" else ("block",):
        pub = mine_ts.grids.get(lvl)
        if pub is None or not len(pub.geoids):
            continue
        g = got.grids.get(lvl)
        mine = np.zeros_like(pub.values)
        if g is not None and len(g.geoids):  # (records of none of the tract's blocks: all 0)
            ri = np.searchsorted(g.geoids, pub.geoids)
            ok = (ri < len(g.geoids)) & (g.geoids[np.minimum(ri, len(g.geoids) - 1)] == pub.geoids)
            col = {c: j for j, c in enumerate(g.cells)}
            cj = np.array([col[c] for c in pub.cells])
            mine[ok] = g.values[ri[ok]][:, cj]
        wrong = np.argwhere((pub.values != MISSING) & (pub.values != mine))
        for i, j in wrong[: 5 - len(bad)]:
            bad.append(
                f"{pub.geoids[i]} {pub.cells[j]}: published {pub.values[i, j]}, reconstruction "
                f"{mine[i, j]}"
            )
    return bad


def certify_tract(
    ts: TableSet,
    tract: str,
    level: str,
    recon: Microdata,
    opts: SolverOptions,
    distance: bool = True,
    distance_time_limit: float | None = None,
) -> tuple[CertResult, pl.DataFrame | None]:
    """Solution variability of every block of one tract (see module docstring). Each block's
    distance maximisation stops at ``distance_time_limit`` seconds when given (else at the
    solver's limit), keeping its (lower, upper) bounds."""
    if level not in RECON_LEVELS:
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    escalate = opts.backend == "auto"  # a distance search CP-SAT cannot close soon goes to HiGHS
    opts = opts.for_task("certify")
    model = build_tract_model(ts, tract, level, binned=level == "block+tract")
    if level == "block+tract" and not model.tract_complete:
        model = build_tract_model(ts, tract, level)
    nb = len(model.block_geoids)

    def result(status: str, **kw: Any) -> CertResult:
        base: dict[str, Any] = dict(
            unit=tract,
            level=level,
            status=status,
            blocks=nb,
            unique_blocks=0,
            varying_blocks=0,
            undecided_blocks=0,
            proofs=0,
            seconds_zero_test=0.0,
            seconds_distance=0.0,
        )
        base.update(kw)
        return CertResult(**base)

    if model.empty_rows:
        conf = diagnose(model, opts, limit=5)
        return result(
            "infeasible",
            message="tables infeasible: " + "; ".join(f"{c['geoid']} {c['cell']}" for c in conf),
        ), None
    inhabited = ts.subset(tract).inhabited_blocks()
    if len(recon) == 0 and inhabited.size:
        return result(
            "refused",
            message=f"the reconstruction has no records in this tract ({inhabited.size} inhabited "
            f"block(s) published, e.g. {inhabited[0]}): was its reconstruction a failed tract?",
        ), None
    bad = cells_it_breaks(ts, tract, level, recon)
    if bad:
        return result(
            "refused", message="reconstruction does not satisfy the tables: " + "; ".join(bad)
        ), None
    # keys of the model's variables and of the reconstruction's records
    vkey = model.var_block.astype(np.int64) * N_TYPES + binned_type(model.var_type)
    keys, vk = np.unique(vkey, return_inverse=True)
    rblock = np.searchsorted(model.block_geoids, recon.block_geoid)
    rkey = rblock.astype(np.int64) * N_TYPES + binned_type(recon.types)
    rk_u, rk_c = np.unique(rkey, return_counts=True)
    pos = np.searchsorted(keys, rk_u)
    if (pos >= len(keys)).any() or (keys[np.minimum(pos, len(keys) - 1)] != rk_u).any():
        return result(
            "refused", message="reconstruction has records of a kind the published zeros rule out"
        ), None
    c = np.zeros(len(keys), dtype=np.int64)
    c[pos] = rk_c
    G = sp.csr_matrix(
        (np.ones(len(vk), dtype=np.int64), (vk, np.arange(len(vk)))),
        shape=(len(keys), model.n_vars),
    )
    counts = variability.Counts.of(
        model.prog,
        G,
        c,
        (keys // N_TYPES).astype(np.int64),
        model.var_block,
        nb,
        model.row_block,
    )
    v = variability.block_variability(
        counts,
        opts,
        coupled=level != "block",
        distance=distance,
        distance_time_limit=distance_time_limit,
        escalate=escalate,
    )
    solvar, lo_pct, hi_pct = v.percent()
    state = v.state
    status_names = np.array(["unknown", UNIQUE, "varies", "undecided"])
    df = pl.DataFrame(
        {
            "block_geoid": model.block_geoids.astype(str),
            "persons": v.N,
            "solvar": solvar,
            "solvar_lo": lo_pct,
            "solvar_hi": hi_pct,
            "proven": v.proven,
            "status": status_names[state],
            "level": np.full(nb, level),
        }
    )
    res = result(
        "ok",
        unique_blocks=int((state == 1).sum()),
        varying_blocks=int((state == 2).sum()),
        undecided_blocks=int((state == 3).sum()),
        proofs=v.proofs,
        seconds_zero_test=v.seconds_zero_test,
        seconds_distance=v.seconds_distance,
    )
    return res, df


def _worker(args: tuple) -> tuple[dict, pl.DataFrame | None]:
    ts, tract, level, recon, opts, distance, distance_time_limit = args
    res, df = certify_tract(ts, tract, level, recon, opts, distance, distance_time_limit)
    return asdict(res), df


@dataclass
class CertRun:
    """Solution variability of every block (``blocks``) and each tract's run (``results``)."""

    blocks: pl.DataFrame
    results: list[dict]
    level: str = "block+tract"
    seconds: float = 0.0

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.results if r["status"] != "ok"]

    def summary_lines(self, recon: Microdata) -> list[str]:
        """The run in words (Markdown bullets): proven-unique blocks, cumulative solvar,
        population uniques among the reconstructed records."""
        flags = uniqueness_flags(recon, self.blocks)
        lo, hi = cumulative_solvar(self.blocks)
        empty = int((self.blocks["persons"] == 0).sum())
        b = self.blocks.filter(pl.col("persons") > 0)  # empty blocks are trivially unique
        n_unique = int(proven_unique(b).sum())
        cert_uniques = int((flags["certified"] & (flags["bsaber_unique"] == 1)).sum())
        share = 100 * n_unique / b.height if b.height else 0.0
        return [
            f"- inhabited blocks: {b.height:,} (and {empty:,} empty); proven unique (solvar 0): "
            f"{n_unique:,} ({share:.1f}% of the inhabited), holding "
            f"{int(b.filter(proven_unique(b))['persons'].sum()):,} of "
            f"{int(b['persons'].sum()):,} persons",
            f"- blocks that can differ: {int((b['status'] == 'varies').sum()):,}; undecided "
            f"(time-out): {int((b['status'] == 'undecided').sum()):,}",
            f"- cumulative solvar: {lo:.2f}%"
            + (f" to {hi:.2f}% (unproven blocks)" if hi > lo + 1e-9 else ""),
            f"- records unique in their block on (sex, agebin): {int(flags['bsab_unique'].sum()):,}"
            f"; on (sex, agebin, race, ethnicity): {int(flags['bsaber_unique'].sum()):,}; of "
            f"those in certified blocks (known population uniques): {cert_uniques:,}",
            f"- {len(self.failed)} tract(s) failed; time {self.seconds:.1f} s",
        ]

    def write(self, out: str | Path, recon: Microdata) -> list[Path]:
        """Write the per-block results (``out``, Parquet or CSV) and beside them
        ``<stem>_table_s4.csv`` (cumulative solvar, Table S4), ``<stem>_zero_by_size.csv``,
        ``<stem>_flags.parquet`` (uniqueness flags per record) and ``<stem>_summary.md``."""
        out = Path(out)
        if not out.exists():
            write_frame(self.blocks, out)
        paths = [out, beside(out, "_table_s4.csv"), beside(out, "_zero_by_size.csv")]
        write_csv(solvar_table(self.blocks), paths[1])
        write_csv(zero_share_by_size(self.blocks), paths[2])
        paths.append(beside(out, "_flags.parquet"))
        write_parquet(uniqueness_flags(recon, self.blocks), paths[-1])
        lines = [f"# Solution variability ({self.level} tables)", "", *self.summary_lines(recon)]
        lines += [
            "",
            "Measured by `tabrecon solvar` (zero test: one infeasibility proof per tract; "
            "distance: maximum of sum (x* - x)^+ per block over all tables).",
        ]
        paths.append(beside(out, "_summary.md"))
        write_text(paths[-1], "\n".join(lines) + "\n")
        return paths


def certify(
    tables: TableSet,
    recon: Microdata,
    level: str = "block+tract",
    solver: SolverOptions | None = None,
    workers: int = 1,
    out: str | Path | None = None,
    resume: bool = True,
    distance: bool = True,
    progress=None,
    distance_time_limit: float | None = None,
) -> CertRun:
    """Solution variability of every block, tract by tract (parallel, written as done,
    resumable)."""
    from ..runner import run_units

    t0 = time.perf_counter()
    overlap(
        tables.inhabited_blocks(),
        recon.inhabited_blocks(),
        tables.source or "the tables",
        recon.source or "the reconstruction",
    )
    opts = solver or SolverOptions()
    tracts = tables.tracts()
    by_tract = recon.rows_by_prefix(tracts)
    parts = Path(str(out) + ".parts") if out is not None else None
    statuses, frames = run_units(
        tracts,
        lambda t: (
            tables.subset(t),
            t,
            level,
            recon.take(by_tract[t]),
            opts,
            distance,
            distance_time_limit,
        ),
        _worker,
        tag=f"solvar-{level}",
        parts=parts,
        resume=resume,
        workers=workers,
        progress=progress,
        fingerprint=run_fingerprint(
            parts,
            tables,
            recon=recon,
            level=level,
            distance=distance,
            solver=opts,
            distance_time_limit=distance_time_limit,
        ),
    )
    dfs = [frames[t] for t in tracts if t in frames]
    blocks = pl.concat(dfs) if dfs else pl.DataFrame()
    if out is not None and blocks.height:
        write_frame(blocks, out)
    return CertRun(blocks, statuses, level, time.perf_counter() - t0)


SOLVAR_THRESHOLDS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0)


def solvar_table(blocks: pl.DataFrame) -> pl.DataFrame:
    """Cumulative blocks and persons by solution variability (layout of Abowd et al. Table S4).

    A block counts at threshold t when its proven solvar (or, unproven, its upper bound) is <= t;
    blocks with unproven bounds are counted separately so no figure rests on a time-out.
    """
    val = blocks["solvar"].fill_nan(None).fill_null(pl.lit(None)).to_numpy()
    hi = blocks["solvar_hi"].to_numpy()
    proven = blocks["proven"].to_numpy()
    pop = blocks["persons"].to_numpy()
    inhabited = pop > 0
    sv = np.where(proven, np.nan_to_num(val.astype(float), nan=0.0), hi)
    nb, np_ = inhabited.sum(), pop.sum()
    rows = []
    for t in SOLVAR_THRESHOLDS:
        m = inhabited & (sv <= t + 1e-9)
        rows.append(
            {
                "solvar_at_most_pct": t,
                "blocks": int(m.sum()),
                "persons": int(pop[m].sum()),
                "cum_blocks_pct": 100.0 * m.sum() / nb if nb else float("nan"),
                "cum_persons_pct": 100.0 * pop[m].sum() / np_ if np_ else float("nan"),
                "unproven_blocks": int((m & ~proven).sum()),
            }
        )
    return pl.DataFrame(rows)


def proven_unique(blocks: pl.DataFrame) -> pl.Series:
    """Per block of a certification frame: proven to have exactly one consistent population
    (solution variability zero)."""
    return blocks["status"] == UNIQUE


def certified_geoids(blocks: pl.DataFrame | None) -> np.ndarray:
    """The geoids of the blocks proven unique (none when there is no certification)."""
    if blocks is None or not blocks.height:
        return np.zeros(0, dtype=str)
    return blocks.filter(proven_unique(blocks))["block_geoid"].to_numpy().astype(str)


def certified_inhabited(blocks: pl.DataFrame | None) -> int:
    """Inhabited blocks proven to have one solution (empty blocks are trivially unique and are not
    counted, as in the undefended release's headline)."""
    if blocks is None or not blocks.height:
        return 0
    return int((proven_unique(blocks) & (blocks["persons"] > 0)).sum())


def cumulative_solvar(blocks: pl.DataFrame) -> tuple[float, float]:
    """Cumulative solvar 100 * sum IV / (2 sum N) over inhabited blocks, as (lower, upper) per
    cent."""
    pop = blocks["persons"].to_numpy().astype(float)
    lo = (blocks["solvar_lo"].to_numpy() * pop / 100.0).sum()
    hi = (blocks["solvar_hi"].to_numpy() * pop / 100.0).sum()
    tot = pop.sum()
    return (100.0 * lo / tot, 100.0 * hi / tot) if tot else (float("nan"), float("nan"))


def zero_share_by_size(blocks: pl.DataFrame) -> pl.DataFrame:
    """Share of blocks and persons with proven zero solvar by block-size bin (methods.md section
    3)."""
    pop = blocks["persons"].to_numpy()
    zero = proven_unique(blocks).to_numpy()
    sb = size_bin(pop)
    rows = []
    for i, lab in enumerate(BLOCK_SIZE_LABELS):
        m = sb == i
        rows.append(
            {
                "bin": lab,
                "blocks": int(m.sum()),
                "persons": int(pop[m].sum()),
                "zero_blocks_pct": 100.0 * (m & zero).sum() / m.sum() if m.any() else float("nan"),
                "zero_persons_pct": 100.0 * pop[m & zero].sum() / pop[m].sum()
                if m.any()
                else float("nan"),
            }
        )
    return pl.DataFrame(rows)


def uniqueness_flags(recon: Microdata, blocks: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per record: unique in its block on {sex, agebin} and on {sex, agebin, race, hispanic};
    certified.

    ``certified`` is True where the block has proven zero solvar: a certified unique is a population
    unique that the attacker knows about from public tables alone.
    """
    ab = recon.agebin.astype(np.int64)
    k1 = (recon.block.astype(np.int64) * 2 + recon.sex) * 38 + ab
    k2 = (k1 * 64 + recon.race) * 2 + recon.hisp
    out = {}
    for name, k in (("bsab_unique", k1), ("bsaber_unique", k2)):
        _, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
        out[name] = (cnt[inv] == 1).astype(np.int8)
    df = pl.DataFrame({"block_geoid": recon.block_geoid, **out})
    if blocks is not None and blocks.height:
        cert = blocks.select("block_geoid", (pl.col("status") == UNIQUE).alias("certified"))
        df = df.join(cert, on="block_geoid", how="left", maintain_order="left").with_columns(
            pl.col("certified").fill_null(False)
        )
    else:  # nothing certified (certification off, or no block certified)
        df = df.with_columns(pl.lit(False).alias("certified"))
    return df
