"""Exact reconstruction: rebuild person records from published tables by integer programming.

Formulation (the *count model*): one integer variable per (block, sex, age class, race, hispanic)
that the tables leave possible, holding the number of persons of that kind; one equality per
published positive cell, ``sum(weight * x) = value``. This is equivalent to the Census Bureau's
per-slot binary model (every constraint sums over slots, so only counts matter) but has no slot
symmetry and is far smaller:

* every published zero removes every variable it covers before the model is built;
* ages are merged into the coarsest classes the published cells can tell apart (block tables alone
  cannot see single ages above 21; PCT12 cannot see inside 100-104), and a record whose age class is
  wider than one year is written with the class start and ``age_exact = 0``;
* each variable is bounded by the smallest cell that contains it;
* the model is built from sparse arrays, per tract (block tables only: per block, since blocks are
  then independent).

Units of work are tracts. Each finished tract is written at once (``<out>.parts/``) with a status
line; a rerun resumes. Tables that no population satisfies get a diagnostic: the smallest total
adjustment of published cells (published zeros held) that makes them feasible, naming the cells.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import TabreconError
from ..provenance import run_fingerprint
from ..schema import (
    AGE_MAX,
    N_AGES,
    N_TYPES,
    TYPE_AGE,
    Microdata,
    age_classes,
    decode_types,
)
from ..tables import (
    ALL_TABLES,
    MISSING,
    TableSet,
    all_cells,
    cell_attrs,
    cell_index,
    cell_positions,
    weight_matrix,
)
from ..vocab import Level
from .solvers import IntProgram, Solution, SolverOptions, solve

RECON_LEVELS = Level.choices()


@dataclass
class TractModel:
    """The count model of one tract, with the bookkeeping to map a solution back to records."""

    tract: str
    level: str
    block_geoids: np.ndarray
    var_block: np.ndarray
    var_type: np.ndarray  # representative type (age = start of its age class)
    var_exact: np.ndarray  # age class is a single year
    prog: IntProgram
    row_block: np.ndarray  # block index of each row, -1 for a tract row
    row_cell: np.ndarray  # cell id of each row
    empty_rows: list[tuple[str, str, int]]  # positive cells left with no possible persons
    tables_used: list[str]
    age_class_start: np.ndarray
    binned: bool = False
    tract_complete: bool = True  # binned: every tract cell made it into a bin-level row
    tract_cells: np.ndarray | None = None
    tract_values: np.ndarray | None = None
    block_cells: np.ndarray | None = None  # the block cells published in the tract

    @property
    def n_vars(self) -> int:
        return self.prog.n_vars


def _cell_ranges(cells: np.ndarray) -> list[tuple[int, int]]:
    if not len(cells):
        return []
    a, pos = cell_attrs(), cell_positions(cells)
    return list(zip(a["age_min"][pos].tolist(), a["age_max"][pos].tolist(), strict=True))


def _tract_rows(
    cells: np.ndarray, vals: np.ndarray, binned: bool
) -> tuple[np.ndarray, sp.csc_matrix, np.ndarray, list[tuple[int, int]], bool]:
    """Tract rows as (names, type x row weights, values, age ranges, complete).

    ``binned``: cells inside one wide age bin are summed per (table, sex, bin) into one row; a group
    that does not cover its whole bin is left out and ``complete`` is False.
    """
    W = weight_matrix()
    cs, idx = all_cells(), cell_index()
    col = np.array([idx[c] for c in cells], dtype=np.int64)
    if not binned or not len(cells):
        return cells, W[:, col], vals, _cell_ranges(cells), True
    from ..schema import AGEBIN38, AGEBIN_OF_AGE

    groups: dict[tuple, list[int]] = {}
    direct: list[int] = []
    complete = True
    for j, cid in enumerate(cells):
        c = cs[idx[cid]]
        blo, bhi = AGEBIN38[AGEBIN_OF_AGE[c.age_min]]
        if c.age_min == blo and (
            c.age_max == AGE_MAX
            or AGEBIN_OF_AGE[min(c.age_max + 1, AGE_MAX)] != AGEBIN_OF_AGE[c.age_max]
        ):
            direct.append(j)  # a union of whole bins
        else:
            groups.setdefault((c.table, c.sex, blo, bhi), []).append(j)
    names, cols, values, ranges = [], [], [], []
    for j in direct:
        names.append(cells[j])
        cols.append(np.array([j]))
        values.append(vals[j])
        ranges.append(_cell_ranges(cells[j : j + 1])[0])
    for (_, _, blo, bhi), members in groups.items():
        covered = sum(cs[idx[cells[j]]].age_max - cs[idx[cells[j]]].age_min + 1 for j in members)
        if covered != bhi - blo + 1:
            complete = False
            continue
        names.append("+".join(cells[j] for j in members))
        cols.append(np.array(members))
        values.append(int(vals[members].sum()))
        ranges.append((blo, bhi))
    G = sp.csc_matrix(
        (
            np.ones(sum(len(c) for c in cols)),
            (np.concatenate(cols), np.repeat(np.arange(len(cols)), [len(c) for c in cols])),
        ),
        shape=(len(cells), len(cols)),
    )
    Wt = (W[:, col] @ G).astype(np.int32).tocsc()
    return np.array(names), Wt, np.array(values, dtype=np.int64), ranges, complete


def build_tract_model(
    ts: TableSet, tract: str, level: str = "block+tract", binned: bool = False
) -> TractModel:
    """Build the count model of one tract from the cells present in ``ts``.

    ``binned`` builds the model on agebin38 instead of single ages: tract cells are summed to bins
    (see :func:`_tract_rows`). Its solutions are the binned projections of the full model's when
    the tract tables are complete (then single ages are a transportation problem, see
    :func:`spread_ages`).
    """
    if level not in RECON_LEVELS:
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    W = weight_matrix()
    bgrid = ts.grids.get("block")
    if bgrid is None:
        raise TabreconError(f"tract {tract}: no block-level tables to reconstruct from")
    bmask = np.char.startswith(bgrid.geoids.astype(str), tract)
    bvals = bgrid.values[bmask]
    geoids = bgrid.geoids[bmask]
    if not len(geoids):
        raise TabreconError(f"tract {tract}: no block in the block tables")
    bpresent_cols = (bvals != MISSING).any(axis=0)
    bcells = bgrid.cells[bpresent_cols]
    bvals = bvals[:, bpresent_cols]
    tcells = np.array([], dtype=str)
    tv0 = np.zeros(0, dtype=np.int64)
    tgrid = ts.grids.get("tract")
    if level == "block+tract" and tgrid is not None:
        tm = tgrid.geoids == tract
        if tm.any():
            tv = tgrid.values[tm][0]
            keep = tv != MISSING
            tcells, tv0 = tgrid.cells[keep], tv[keep]
    tnames, Wt_full, tvals, tranges, complete = _tract_rows(tcells, tv0, binned)
    starts = age_classes(_cell_ranges(bcells) + tranges)
    rep = np.flatnonzero(starts[TYPE_AGE] == TYPE_AGE)  # representative types
    bcol = cell_positions(bcells).astype(np.int64)
    if tvals.size:
        # tract zeros first: they rule out most (age, race) combinations for every block at once
        Wt_bool = (Wt_full[rep] != 0).astype(np.int32).tocsr()
        tz = np.asarray(Wt_bool @ (tvals == 0).astype(np.int32)).ravel() > 0
        rep = rep[~tz]
    Wb = W[rep][:, bcol].tocsr()  # rep x block cells
    Wt = Wt_full[rep].tocsr()
    # published zeros forbid every type they cover; a type covered by no cell is not evidenced.
    # Screen (block, type) pairs with the sex x age cells first (few cells, most types), then test
    # the survivors against every cell.
    Wb_bool = (Wb != 0).astype(np.int32).tocsr()
    attrs = cell_attrs()
    screen = np.flatnonzero((attrs["race"][bcol] == "any") & (attrs["hispanic"][bcol] == "any"))
    if screen.size:
        Ws = Wb_bool[:, screen]
        zs = sp.csr_matrix((bvals[:, screen] == 0).astype(np.int32))
        pass_screen = ~(np.asarray((zs @ Ws.T).todense()) > 0)  # nb x rep
    else:
        pass_screen = np.ones((len(geoids), len(rep)), dtype=bool)
    cb, cr = np.nonzero(pass_screen)  # sorted by block then rep
    M = Wb_bool[cr].tocoo()
    hit = bvals[cb[M.row], M.col]
    zero_hit = np.bincount(M.row, weights=(hit == 0), minlength=cb.size) > 0
    covered = np.bincount(M.row, weights=(hit != MISSING), minlength=cb.size) > 0
    if tvals.size:
        covered |= (np.asarray((Wt != 0).sum(axis=1)).ravel() > 0)[cr]
    keep = covered & ~zero_hit
    vb, vr = cb[keep], cr[keep]
    var_block = vb.astype(np.int32)
    var_type = rep[vr]
    n = var_block.size
    # rows: block cells
    Wv = Wb[vr].tocoo()
    i, c, w = Wv.row, Wv.col, Wv.data.astype(np.int64)
    val = bvals[var_block[i], c]
    ub = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(ub, i, val // w)
    nbc = max(len(bcells), 1)
    key = var_block[i].astype(np.int64) * nbc + c
    rkeys, rinv = np.unique(key, return_inverse=True)
    rhs_b = bvals.ravel()[rkeys]
    row_block = (rkeys // nbc).astype(np.int32)
    row_cell = bcells[rkeys % nbc] if len(bcells) else np.array([], dtype=str)
    positive = np.argwhere(bvals > 0)
    pkeys = positive[:, 0].astype(np.int64) * nbc + positive[:, 1]
    lost = pkeys[~np.isin(pkeys, rkeys)]
    empty = [(str(geoids[k // nbc]), str(bcells[k % nbc]), int(bvals.ravel()[k])) for k in lost]
    rows, cols, data, rhs = [rinv], [i], [w], [rhs_b]
    nrow = len(rkeys)
    if tvals.size:
        Wtv = Wt[vr].tocoo()
        ti, tc, tw = Wtv.row, Wtv.col, Wtv.data.astype(np.int64)
        np.minimum.at(ub, ti, tvals[tc] // tw)
        tk, tinv = np.unique(tc, return_inverse=True)
        rows.append(nrow + tinv)
        cols.append(ti)
        data.append(tw)
        rhs.append(tvals[tk])
        row_block = np.concatenate([row_block, np.full(len(tk), -1, dtype=np.int32)])
        row_cell = np.concatenate([row_cell, tnames[tk]])
        tpos = np.flatnonzero(tvals > 0)
        for k in tpos[~np.isin(tpos, tk)]:
            empty.append((tract, str(tnames[k]), int(tvals[k])))
        nrow += len(tk)
    A = sp.csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(nrow, n)
    )
    rhs_all = np.concatenate(rhs).astype(np.int64)
    ub = np.where(ub == np.iinfo(np.int64).max, 0, ub)
    used = set(attrs["table"][bcol].tolist()) | set(attrs["table"][cell_positions(tcells)].tolist())
    tables = [t.name for t in ALL_TABLES if t.name in used]
    return TractModel(
        tract=tract,
        level=level,
        block_geoids=geoids,
        var_block=var_block,
        var_type=var_type,
        var_exact=_exact(starts, TYPE_AGE[var_type]),
        prog=IntProgram(A=A, lo=rhs_all, hi=rhs_all.copy(), ub=ub),
        row_block=row_block,
        row_cell=row_cell,
        empty_rows=empty,
        tables_used=tables,
        age_class_start=starts,
        binned=binned,
        tract_complete=complete,
        tract_cells=tcells,
        tract_values=tv0,
        block_cells=bcells,
    )


def _exact(starts: np.ndarray, ages: np.ndarray) -> np.ndarray:
    """True where the age class starting at ``ages`` is a single year."""
    width = np.bincount(starts, minlength=N_AGES)
    return width[ages] == 1


def determined_age_classes(ts: TableSet, tract: str, level: str) -> np.ndarray:
    """Start of the age class of every age 0..110 that the cells published for ``tract`` tell
    apart (block cells; with ``block+tract`` also the tract's cells): what a record's age can
    say."""
    ranges: list[tuple[int, int]] = []
    for lv in ("block", "tract"):
        g = ts.grids.get(lv)
        if g is None or (lv == "tract" and level != "block+tract"):
            continue
        rows = (
            g.geoids == tract if lv == "tract" else np.char.startswith(g.geoids.astype(str), tract)
        )
        ranges += _cell_ranges(g.cells[(g.values[rows] != MISSING).any(axis=0)])
    return age_classes(ranges)


def class_end(starts: np.ndarray) -> np.ndarray:
    """Last age of the class of every age 0..110 (``starts`` from :func:`age_classes`)."""
    width = np.bincount(starts, minlength=N_AGES)
    return (starts + width[starts] - 1).astype(np.int16)


@dataclass
class TractResult:
    """Outcome of one tract: status, timings, size, and the records (or the diagnostic)."""

    tract: str
    level: str
    status: str  # ok | infeasible | timeout | error
    solver: str
    seconds_build: float
    seconds_solve: float
    n_vars: int
    n_rows: int
    persons: int
    blocks: int
    message: str = ""
    conflicts: list[dict] = field(default_factory=list)
    tables_used: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def where(self, most: int = 5) -> str:
        """The tract's failure in one line: its status and message, and for an infeasible tract
        the blocks and published cells of the smallest change that makes it feasible."""
        text = f"tract {self.tract}: {self.status} -- {self.message}".rstrip(" -")
        if self.conflicts:
            cells = [
                f"block {c['geoid']} {c['cell']} published {c['published']} ({c['adjust']:+d})"
                for c in self.conflicts[:most]
            ]
            more = len(self.conflicts) - most
            text += "; the smallest change that fits a population: " + ", ".join(cells)
            text += f" and {more} more" if more > 0 else ""
        return text


def solve_model(model: TractModel, opts: SolverOptions) -> Solution:
    """Solve a tract model as one program (block-only models are block-diagonal; presolve splits
    them)."""
    return solve(model.prog, opts)


def diagnose(model: TractModel, opts: SolverOptions, limit: int = 10) -> list[dict]:
    """Cells whose smallest total adjustment makes the tract feasible (published zeros held).

    Solves min sum(s+ + s-) s.t. A x + s+ - s- = b; always feasible (x = 0). Positive cells that no
    person can fill any more (every type they cover was ruled out by a zero) are reported first.
    """
    out = [
        {
            "geoid": g,
            "cell": c,
            "published": v,
            "adjust": -v,
            "reason": "published zeros rule out every person this cell counts",
        }
        for g, c, v in model.empty_rows[:limit]
    ]
    prog = model.prog
    m, n = prog.n_rows, prog.n_vars
    eye = sp.identity(m, format="csr", dtype=np.int64)
    A = sp.hstack([prog.A, eye, -eye], format="csr")
    big = int(prog.lo.max()) if m else 0
    ub = np.concatenate([prog.ub, np.full(2 * m, big)])
    c = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(2 * m, dtype=np.int64)])
    s = solve(IntProgram(A=A, lo=prog.lo, hi=prog.hi, ub=ub, c=c), opts)
    if s.x is None:
        return out
    adj = s.x[n : n + m] - s.x[n + m :]
    for r in np.flatnonzero(adj)[: max(0, limit - len(out))]:
        g = model.tract if model.row_block[r] < 0 else str(model.block_geoids[model.row_block[r]])
        out.append(
            {
                "geoid": g,
                "cell": str(model.row_cell[r]),
                "published": int(prog.lo[r]),
                "adjust": int(-adj[r]),
                "reason": "changing this value by 'adjust' is part of the smallest total change "
                "that restores feasibility",
            }
        )
    return out


def records_from_solution(model: TractModel, x: np.ndarray) -> Microdata:
    """Expand a count solution into one record per person."""
    k = np.repeat(np.arange(model.n_vars), x.astype(np.int64))
    sex, age, race, hisp = decode_types(model.var_type[k])
    md = Microdata(
        geoids=model.block_geoids,
        block=model.var_block[k].astype(np.int32),
        sex=sex,
        age=age,
        race=race,
        hisp=hisp,
        age_exact=model.var_exact[k],
        age_max=class_end(model.age_class_start)[age],
    )
    return md


def spread_ages(
    binned: TractModel, y: np.ndarray, opts: SolverOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Stage 2 of the staged solve: give single ages to a binned solution ``y``.

    Each (sex, wide age bin) is an independent small program: the binned counts of every
    (block, race, hispanic) are split over the bin's age classes so that every tract cell inside the
    bin holds. Returns (var_block, var_type, counts) of the full-resolution solution, or None when a
    slice has no solution (the caller then solves the full model).
    """
    from ..schema import AGEBIN38, AGEBIN_OF_AGE

    cs, idx = all_cells(), cell_index()
    W = weight_matrix()
    tcells, tvals = binned.tract_cells, binned.tract_values
    assert tcells is not None and tvals is not None, "a binned model has its tract cells"
    tcol = np.array([idx[c] for c in tcells], dtype=np.int64)
    starts = age_classes(_cell_ranges(tcells) + [(lo, hi) for lo, hi in AGEBIN38])
    Wt = W[:, tcol].tocsr()
    forbidden = np.asarray((Wt != 0).astype(np.int32) @ (tvals == 0).astype(np.int32)).ravel() > 0
    cell_sex = np.array([cs[idx[c]].sex for c in tcells])
    cell_lo = np.array([cs[idx[c]].age_min for c in tcells])
    cell_hi = np.array([cs[idx[c]].age_max for c in tcells])
    keep = y > 0
    vb, vt, vy = binned.var_block[keep], binned.var_type[keep], y[keep]
    sex, age, race, hisp = decode_types(vt)
    width = np.array([AGEBIN38[k][1] - AGEBIN38[k][0] + 1 for k in range(len(AGEBIN38))])
    wide = width[AGEBIN_OF_AGE[age]] > 1
    from ..schema import encode_types

    # all slices go into one block-diagonal program (one solver call per tract)
    A_parts, b_parts, ub_parts, zb_parts, zt_parts = [], [], [], [], []
    for k in np.unique(AGEBIN_OF_AGE[age[wide]]):
        lo, hi = AGEBIN38[k]
        classes = np.unique(starts[lo : hi + 1])
        inside = (cell_lo >= lo) & (cell_hi <= hi)
        if (inside & (cell_sex == "any")).any():
            return None  # a cell couples the sexes inside the bin: no slice decomposition
        for s in (0, 1):
            sel = np.flatnonzero(wide & (AGEBIN_OF_AGE[age] == k) & (sex == s))
            if not sel.size:
                continue
            n_i, n_a = sel.size, classes.size
            zi = np.repeat(np.arange(n_i), n_a)
            za = np.tile(classes, n_i)
            zt = encode_types(np.full(zi.size, s), za, race[sel][zi], hisp[sel][zi])
            ok = ~forbidden[zt]
            zi, zt = zi[ok], zt[ok]
            nz = zi.size
            rows, cols = [zi], [np.arange(nz)]
            data, rhs = [np.ones(nz, dtype=np.int64)], [vy[sel]]
            csel = np.flatnonzero(inside & (cell_sex == ("male" if s == 0 else "female")))
            if csel.size:
                Wz = Wt[zt][:, csel].tocoo()
                rows.append(n_i + Wz.col)
                cols.append(Wz.row)
                data.append(Wz.data.astype(np.int64))
                rhs.append(tvals[csel])
            A_parts.append(
                sp.csr_matrix(
                    (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
                    shape=(n_i + csel.size, nz),
                )
            )
            b_parts.append(np.concatenate(rhs).astype(np.int64))
            ub_parts.append(vy[sel][zi])
            zb_parts.append(vb[sel][zi])
            zt_parts.append(zt)
    out_b, out_t, out_x = [vb[~wide]], [vt[~wide]], [vy[~wide]]
    if A_parts:
        b = np.concatenate(b_parts)
        sol = solve(
            IntProgram(
                A=sp.block_diag(A_parts, format="csr"),
                lo=b,
                hi=b.copy(),
                ub=np.concatenate(ub_parts),
            ),
            opts,
        )
        if not sol.has_solution or sol.x is None:
            return None
        pos = sol.x > 0
        out_b.append(np.concatenate(zb_parts)[pos])
        out_t.append(np.concatenate(zt_parts)[pos])
        out_x.append(sol.x[pos])
    return np.concatenate(out_b), np.concatenate(out_t), np.concatenate(out_x)


def _staged(ts: TableSet, tract: str, opts: SolverOptions) -> tuple[str, Microdata | None, dict]:
    """Binned model, then single ages per slice. ('ok', records) or ('fallback'|'infeasible',
    None)."""
    mb = build_tract_model(ts, tract, "block+tract", binned=True)
    info = {"n_vars": mb.n_vars, "n_rows": mb.prog.n_rows}
    if mb.empty_rows or not mb.tract_complete:
        return "fallback", None, info
    sol = solve_model(mb, opts)
    if sol.status == "infeasible":
        return "infeasible", None, info  # the binned model is a relaxation: full is infeasible too
    if not sol.has_solution or sol.x is None:
        return "fallback", None, info
    spread = spread_ages(mb, sol.x, opts)
    if spread is None:
        return "fallback", None, info
    vb, vt, vx = spread
    k = np.repeat(np.arange(vb.size), vx)
    sex, age, race, hisp = decode_types(vt[k])
    # ages say what the published cells determine: the binned model works at agebin38, finer than
    # the tables when P14 (block) or PCT12 (tract) are missing, so a year inside a class is the
    # solver's arbitrary pick; it is written as the class (first year, last year, not exact)
    assert mb.block_cells is not None and mb.tract_cells is not None
    starts = age_classes(_cell_ranges(mb.block_cells) + _cell_ranges(mb.tract_cells))
    age = starts[age].astype(age.dtype)
    md = Microdata(
        mb.block_geoids,
        vb[k].astype(np.int32),
        sex,
        age,
        race,
        hisp,
        age_exact=_exact(starts, age),
        age_max=class_end(starts)[age],
    )
    return "ok", md, info


def reconstruct_tract(
    ts: TableSet, tract: str, level: str, opts: SolverOptions, strategy: str = "staged"
) -> tuple[TractResult, Microdata | None]:
    """Build, solve and expand one tract; infeasibility and time-outs become a status, never an
    exception.

    ``strategy="staged"`` (block+tract only) solves the binned model and then spreads single ages
    slice by slice, falling back to the full model when a stage cannot decide; ``"full"`` solves the
    single-age model directly.
    """
    t0 = time.perf_counter()
    opts = opts.for_task("reconstruct")
    if strategy not in ("staged", "full"):
        raise TabreconError(f"unknown strategy {strategy!r}; choose 'staged' or 'full'")
    if level == "block+tract" and strategy == "staged":
        try:
            state, md, info = _staged(ts, tract, opts)
        except TabreconError as exc:
            return TractResult(
                tract, level, "error", opts.backend, 0, 0, 0, 0, 0, 0, str(exc)
            ), None
        if state == "ok":
            assert md is not None
            el = time.perf_counter() - t0
            return TractResult(
                tract,
                level,
                "ok",
                opts.backend,
                0.0,
                el,
                info["n_vars"],
                info["n_rows"],
                len(md),
                len(md.geoids),
                "staged: binned model, then single ages per slice",
                tables_used=ts.tables_present(),
            ), md
    try:
        model = build_tract_model(ts, tract, level)
    except TabreconError as exc:
        return TractResult(tract, level, "error", opts.backend, 0, 0, 0, 0, 0, 0, str(exc)), None
    t1 = time.perf_counter()
    base: dict[str, Any] = dict(
        tract=tract,
        level=level,
        solver=opts.backend,
        seconds_build=t1 - t0,
        n_vars=model.n_vars,
        n_rows=model.prog.n_rows,
        blocks=len(model.block_geoids),
        tables_used=model.tables_used,
    )
    if model.empty_rows:
        conf = diagnose(model, opts)
        return TractResult(
            **base,
            status="infeasible",
            seconds_solve=time.perf_counter() - t1,
            persons=0,
            message=f"{len(model.empty_rows)} positive cell(s) contradicted by published zeros",
            conflicts=conf,
        ), None
    sol = solve_model(model, opts)
    t2 = time.perf_counter()
    if sol.status == "infeasible":
        conf = diagnose(model, opts)
        return TractResult(
            **base,
            status="infeasible",
            seconds_solve=t2 - t1,
            persons=0,
            message="no population satisfies these tables",
            conflicts=conf,
        ), None
    if not sol.has_solution:
        msg = (
            "solver time limit reached" if sol.status == "timeout" else f"solver status {sol.info}"
        )
        return TractResult(
            **base,
            status="timeout" if sol.status == "timeout" else "error",
            seconds_solve=t2 - t1,
            persons=0,
            message=msg,
        ), None
    assert sol.x is not None  # has_solution held above
    md = records_from_solution(model, sol.x)
    return TractResult(**base, status="ok", seconds_solve=t2 - t1, persons=len(md)), md


# --------------------------------------------------------------------------------------------------
# Running many tracts: parallel, written as they finish, resumable (tabrecon.runner)
# --------------------------------------------------------------------------------------------------
def _worker(args: tuple) -> tuple[dict, pl.DataFrame | None]:
    ts, tract, level, opts, strategy = args
    res, md = reconstruct_tract(ts, tract, level, opts, strategy)
    st = {"unit": tract, **asdict(res)}
    return st, None if md is None else md.to_codes().with_columns(
        pl.lit(level).alias("recon_level")
    )


@dataclass
class ReconRun:
    """Results of a reconstruction run: the records and one status per tract."""

    records: Microdata
    results: list[TractResult]
    out: Path | None = None
    level: str = "block+tract"
    seconds: float = 0.0

    @property
    def failed(self) -> list[TractResult]:
        return [r for r in self.results if r.status != "ok"]

    def summary_lines(self) -> list[str]:
        """The run in words: records, tracts solved, tables used, ages known only to a range."""
        ok = len(self.results) - len(self.failed)
        where = (
            f" -> {self.out}; per-tract status in {self.out}.parts/status.jsonl" if self.out else ""
        )
        lines = [
            f"{len(self.records):,} persons from {ok}/{len(self.results)} tracts ({self.level}) "
            f"in {self.seconds:.1f} s{where}",
            f"tables used: {', '.join(self.tables_used)}",
        ]
        md = self.records
        inexact = int((~md.age_exact).sum()) if md.age_exact is not None and len(md) else 0
        if inexact:
            lines.append(
                f"{inexact:,} records have an age the tables determine only to a range "
                "(age = its first year, age_max = its last, age_exact = 0)"
            )
        return lines

    def failure_lines(self) -> list[str]:
        """Each failed tract, with the published cells that conflict where they are known."""
        lines = []
        for r in self.failed:
            lines.append(f"tract {r.tract}: {r.status} -- {r.message}")
            lines += [
                f"    {c['geoid']} {c['cell']} published {c['published']}, adjust by "
                f"{c['adjust']:+d}: {c['reason']}"
                for c in r.conflicts
            ]
        if self.failed:
            lines.append(f"{len(self.failed)} tract(s) failed; the others were written")
        return lines

    @property
    def tables_used(self) -> list[str]:
        seen: list[str] = []
        for r in self.results:
            for t in r.tables_used:
                if t not in seen:
                    seen.append(t)
        return seen


def require_block_totals(tables: TableSet) -> None:
    """Reconstruction works block by block from each block's total population (P1, or the total
    line of P8, P9 or P12 -- the PL 94-171 tables have no P1): refuse tables without block tables,
    or with a block that has cells but no total, naming it."""
    g = tables.grids.get("block")
    if g is None:
        raise TabreconError(
            f"{tables.source or 'the tables'}: no block-level tables; reconstruction needs at "
            "least "
            "every block's total population (P1, or the total line of P8, P9 or P12)"
        )
    a, pos = cell_attrs(), cell_positions(g.cells)
    total = (
        (a["sex"][pos] == "any")
        & (a["age_min"][pos] == 0)
        & (a["age_max"][pos] == AGE_MAX)
        & (a["race"][pos] == "any")
        & (a["hispanic"][pos] == "any")
        & (a["measure"][pos] == "persons")
    )
    has_total = (g.values[:, total] != MISSING).any(axis=1)
    lacking = np.flatnonzero(~has_total & g.present().any(axis=1))
    if lacking.size:
        raise TabreconError(
            f"{tables.source or 'the tables'}: block {g.geoids[lacking[0]]} has published cells "
            "but "
            "no total population (P0010001, or P0080001, P0090001, P0120001); reconstruction "
            "needs "
            f"it for every block ({lacking.size} block(s) lack it)"
        )


def reconstruct(
    tables: TableSet,
    level: str = "block+tract",
    solver: SolverOptions | None = None,
    workers: int = 1,
    out: str | Path | None = None,
    resume: bool = True,
    tracts: list[str] | None = None,
    progress: Callable[[dict], None] | None = None,
    strategy: str = "staged",
) -> ReconRun:
    """Reconstruct person records from published tables, tract by tract.

    ``level`` = ``"block"`` uses the block tables only; ``"block+tract"`` adds the tract tables.
    With ``out``, each tract is written to ``<out>.parts/`` when it finishes (status in
    ``<out>.parts/status.jsonl``), a rerun skips finished tracts, and all records are gathered into
    ``out`` at the end. Failed tracts never stop the others; see :attr:`ReconRun.failed`.
    """
    from ..runner import run_units

    t_start = time.perf_counter()
    if level not in RECON_LEVELS:
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    if strategy not in ("staged", "full"):
        raise TabreconError(f"unknown strategy {strategy!r}; choose 'staged' or 'full'")
    opts = solver or SolverOptions()
    require_block_totals(tables)
    units = tables.tracts() if tracts is None else tracts
    parts = Path(str(out) + ".parts") if out is not None else None
    statuses, frames = run_units(
        units,
        lambda t: (tables.subset(t), t, level, opts, strategy),
        _worker,
        tag=f"recon-{level}",
        parts=parts,
        resume=resume,
        workers=workers,
        progress=progress,
        fingerprint=run_fingerprint(
            parts, tables, level=level, strategy=strategy, solver=opts, parts_format="codes-1"
        ),
    )
    fields = set(TractResult.__dataclass_fields__)
    results = []
    for st in statuses:
        if "tract" not in st:  # a unit that raised
            st = {
                **asdict(TractResult(st["unit"], level, "error", opts.backend, 0, 0, 0, 0, 0, 0)),
                **st,
            }
        results.append(TractResult(**{k: v for k, v in st.items() if k in fields}))
    dfs = [frames[t] for t in units if t in frames]
    if dfs:
        md = Microdata.from_codes(pl.concat(dfs), source=f"reconstruction ({level})")
    else:
        md = Microdata(
            np.array([], dtype=str),
            np.zeros(0, np.int32),
            np.zeros(0, np.int8),
            np.zeros(0, np.int16),
            np.zeros(0, np.int8),
            np.zeros(0, np.int8),
        )
    if out is not None:
        from ..schema import write_microdata

        write_microdata(md, out)
    out_path = Path(out) if out is not None else None
    return ReconRun(md, results, out_path, level, time.perf_counter() - t_start)


__all__ = [
    "RECON_LEVELS",
    "N_TYPES",
    "ReconRun",
    "TractModel",
    "TractResult",
    "build_tract_model",
    "reconstruct",
    "reconstruct_tract",
]
