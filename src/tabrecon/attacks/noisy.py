"""Reconstruction straight from published noisy measurements (the TopDown noisy measurement file).

Agencies now publish the noisy answers TopDown measured before post-processing. An attacker can fit
person records to them directly instead of attacking the post-processed tables: for every block,
integer counts x_t >= 0 of the person types the block's measurements cover, minimising the weighted
least absolute deviation

    sum over measured answers m of |sum_{t in group m} x_t - y_m| / sigma_m

(a mixed-integer program per block, solved with HiGHS through ``scipy.optimize.milp``). A block
whose parent had only that child was not measured itself (TopDown copies the parent); it is fitted
to the nearest ancestor's measurements. The fitted counts become records (k of a type -> k
records), ready for :func:`tabrecon.metrics.agreement.agree` and
:func:`tabrecon.attacks.reidentify.reidentify`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..defenses.topdown import QUERIES
from ..errors import InputError, TabreconError
from ..geo import LEVEL_OF_LENGTH, LEVELS, overlap, prefix
from ..io import check_readable, read_error, require_columns
from ..schema import Microdata, decode_types
from ..tables.tableset import TableSet
from ..vocab import Geo


@dataclass
class NoisyRecon:
    records: Microdata
    blocks: int
    fitted_at: dict[str, int]  # how many blocks were fitted to measurements of each level
    seconds: float
    failed: list[str]  # blocks whose program failed (left empty), with the reason


def fit_block(
    meas: pl.DataFrame, time_limit: float = 10.0, total: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Integer least-deviation fit of one geounit's measurements, optionally with its published
    total held exactly; returns (types, counts)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    det = meas.filter(pl.col("query") == "detailed")
    if det.is_empty():
        raise TabreconError("no detailed query among the measurements: the support is unknown")
    types = np.sort(det["group"].to_numpy())
    rows, cols, ys, w = [], [], [], []
    r = 0
    for (q,), part in meas.group_by("query", maintain_order=True):
        part = part.sort("group")
        gid = QUERIES[q][types]
        groups = part["group"].to_numpy()
        pos = np.searchsorted(groups, gid)
        ok = (pos < groups.size) & (groups[np.minimum(pos, groups.size - 1)] == gid)
        rows.append(r + pos[ok])
        cols.append(np.flatnonzero(ok))
        ys.append(part["noisy"].to_numpy().astype(float))
        w.append(1.0 / np.sqrt(part["variance"].to_numpy()))
        r += groups.size
    A = sp.csr_matrix(
        (np.ones(sum(c.size for c in cols)), (np.concatenate(rows), np.concatenate(cols))),
        shape=(r, types.size),
    )
    y, wt = np.concatenate(ys), np.concatenate(w)
    n = types.size
    # variables: x (n, integer), d+ (r), d- (r);  A x - d+ + d- = y
    c = np.concatenate([np.zeros(n), wt, wt])
    M = sp.hstack([A, -sp.identity(r), sp.identity(r)], format="csr")
    integrality = np.concatenate([np.ones(n), np.zeros(2 * r)])
    cons = [LinearConstraint(M, y, y)]
    if total is not None:
        cons.append(
            LinearConstraint(np.concatenate([np.ones(n), np.zeros(2 * r)])[None, :], total, total)
        )
    res = milp(
        c,
        constraints=cons,
        integrality=integrality,
        bounds=Bounds(0, np.inf),
        options={"time_limit": time_limit},
    )
    if res.x is None:
        raise TabreconError(f"least-deviation fit failed: {res.message}")
    x = np.rint(res.x[:n]).astype(np.int64)
    return types[x > 0], x[x > 0]


def reconstruct_from_measurements(
    measurements: pl.DataFrame,
    blocks: list[str] | np.ndarray,
    time_limit: float = 10.0,
    block_totals: dict[str, int] | None = None,
) -> NoisyRecon:
    """Fit every block in ``blocks`` (15-digit geoids: the published geography) to its noisy
    measurements (TopDown's frame: level, geoid, query, group, noisy, variance). With
    ``block_totals`` (the published, post-processed block populations, P1) each fit keeps its
    block's total exactly: the attacker holds both the measurements and the tables."""
    t0 = time.perf_counter()
    need = {"level", "geoid", "query", "group", "noisy", "variance"}
    if not need <= set(measurements.columns):
        raise TabreconError(
            f"the measurements need columns {sorted(need)}; missing "
            f"{sorted(need - set(measurements.columns))}"
        )
    unknown = set(measurements["query"].unique().to_list()) - set(QUERIES)
    if unknown:
        raise TabreconError(f"unknown query name(s) in the measurements: {sorted(unknown)}")
    blocks = np.asarray(sorted(blocks))
    by_geo = {g: part for (g,), part in measurements.group_by("geoid")}
    geo_out, types_out, counts_out, failed = [], [], [], []
    fitted_at: dict[str, int] = {}
    for bi, b in enumerate(blocks):
        src = None
        for n in (15, 12, 11, 5, 2, 0):  # the block, else the nearest measured ancestor
            if b[:n] in by_geo:
                src = b[:n]
                break
        if src is None:
            failed.append(f"{b}: no measurements for it or any ancestor")
            continue
        try:
            tot = None if block_totals is None else int(block_totals.get(b, 0))
            if tot == 0:
                fitted_at["empty (published total 0)"] = (
                    fitted_at.get("empty (published total 0)", 0) + 1
                )
                continue
            t, k = fit_block(by_geo[src], time_limit, tot)
        except TabreconError as exc:
            failed.append(f"{b}: {exc}")
            continue
        lv = LEVEL_OF_LENGTH[len(src)]
        fitted_at[lv] = fitted_at.get(lv, 0) + 1
        geo_out.append(np.full(t.size, bi))
        types_out.append(t)
        counts_out.append(k)
    if not geo_out:
        raise TabreconError("no block could be fitted: " + "; ".join(failed[:3]))
    g = np.concatenate(geo_out)
    t = np.concatenate(types_out)
    k = np.concatenate(counts_out)
    idx = np.repeat(np.arange(g.size), k)
    sex, age, race, hisp = decode_types(t[idx])
    md = Microdata(
        blocks, g[idx].astype(np.int32), sex, age, race, hisp, source="noisy-measurement fit"
    )
    md = md.take(np.arange(len(md)))
    return NoisyRecon(md, len(blocks), fitted_at, time.perf_counter() - t0, failed)


def read_measurements(path: str | Path) -> pl.DataFrame:
    """TopDown's noisy measurements as ``tabrecon topdown`` writes them
    (``<stem>_measurements.parquet``); errors name the file."""
    p = Path(path)
    check_readable(p, text=False)
    try:
        meas = pl.read_parquet(p)
    except Exception as exc:
        raise read_error(p, exc) from None
    need = ("level", "geoid", "query", "group", "noisy", "variance")
    require_columns(p, meas.columns, need, "TopDown's noisy measurements")
    for col in ("noisy", "variance"):
        v = meas[col].cast(pl.Float64, strict=False)
        bad = v.is_null() | ~v.is_finite()
        if col == "variance":
            bad = bad | (v <= 0)
        if bad.any():
            i = int(bad.arg_max() or 0)
            raise InputError(
                f"row {i + 1} ({meas['level'][i]} {meas['geoid'][i]}, query "
                f"{meas['query'][i]}): {col} {meas[col][i]!r} is not "
                + ("a finite number > 0" if col == "variance" else "a finite number")
                + f" (and {int(bad.sum()) - 1} more such rows)",
                path=str(p),
            )
    unknown = sorted(set(meas["level"].cast(pl.String).to_list()) - set(LEVELS))
    if unknown:
        raise InputError(
            f"unknown geographic level(s) {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(LEVELS)}",
            path=str(p),
        )
    return meas


def reconstruct_noisy_release(
    measurements: pl.DataFrame,
    tables: TableSet,
    use_totals: bool = True,
    time_limit: float = 10.0,
    name: str = "the tables",
    measurements_name: str = "the measurements",
) -> NoisyRecon:
    """Fit every published block to the noisy measurements; with ``use_totals`` each block keeps
    its published population (P1) exactly, as the released tables hold it. Measurements that
    share no geounit with the tables at their finest level are refused (they are of another
    release)."""
    g = tables.grids.get("block")
    if g is None:
        raise TabreconError(f"{name}: no block-level tables (the fit is per block)")
    measured = set(measurements["level"].cast(pl.String).to_list())
    finest = next((lv for lv in reversed(LEVELS) if lv in measured and lv != Geo.NATION), None)
    if finest is not None:
        have = measurements.filter(pl.col("level") == finest)["geoid"].cast(pl.String).to_numpy()
        units = np.unique(prefix(g.geoids, finest))
        overlap(have, units, measurements_name, name, f"{finest}s")
        lacking = np.setdiff1d(units, have)
        if lacking.size:  # in part another area's: each such block would fail its fit
            raise TabreconError(
                f"{measurements_name} hold no {finest}-level measurements for {lacking.size:,} "
                f"of the {units.size:,} {finest}s of {name} (first: {lacking[0]}): measurements "
                "and tables must be of one release"
            )
    totals = None
    if use_totals:
        if "P0010001" not in set(g.cells.tolist()):
            raise TabreconError(
                f"{name}: no P1 (P0010001) to hold block totals; add --no-use-totals"
            )
        totals = dict(zip(g.geoids.tolist(), g.col("P0010001").tolist(), strict=True))
    return reconstruct_from_measurements(measurements, g.geoids, time_limit, totals)
