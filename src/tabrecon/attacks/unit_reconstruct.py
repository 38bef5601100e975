"""Reconstruction over any schema's block tables, and whether it is the only one.

For each block, the count model is built straight from the tables' weight matrix
(:mod:`tabrecon.unit_tables`): one integer variable per feasible type that no published zero
rules out (a type is ruled out by any zero cell it lies in), bounded by the smallest published
cell it lies in, with one equality per published cell. A solution is a reconstruction of the
block's units; a second proof, as certification does for persons, asks for any solution with
fewer units of some reconstructed type: infeasible means the block's full reconstruction is
unique (a proof), a solution means it is not (Liu et al. 2025: 1 of their 50 median blocks was
unique).

>>> from tabrecon.households import synthesize_households
>>> from tabrecon.synth import SynthConfig
>>> from tabrecon.unit_tables import tabulate_units
>>> _, units = synthesize_households(SynthConfig(persons=300), seed=4)
>>> rec = reconstruct_units(tabulate_units(units))
>>> tabulate_units(rec.units).equals(tabulate_units(units))
True
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..schema.catalog import HOUSING_UNITS
from ..schema.spec import Schema, Units
from ..unit_tables import compiled, table_by_name, tables_of
from .solvers import Extensible, IntProgram, SolverOptions, prove_forms


@dataclass
class UnitReconstruction:
    """Reconstructed units and, per block, whether they are the only consistent ones."""

    units: Units
    blocks: pl.DataFrame  # geoid, units, types, status, seconds
    # status: unique | varies | undecided (limit hit) | infeasible (the tables contradict
    # themselves) | failed (no solution within the limit) | unknown (not checked)


LEVELS = ("block", "block+tract")


def reconstruct_units(
    long: pl.DataFrame,
    schema: Schema = HOUSING_UNITS,
    tables: tuple[str, ...] | None = None,
    opts: SolverOptions | None = None,
    check_unique: bool = True,
    level: str = "block",
    unique_on: Mapping[str, np.ndarray] | None = None,
) -> UnitReconstruction:
    """Reconstruct every block of a long table (geoid, cell, value) of ``schema``'s tables.

    ``level`` "block" solves each block from its block tables alone; "block+tract" solves the
    blocks of each tract jointly, the tract tables (persons: PCT12, PCT12A-O, by single year of
    age) constraining their sum. Uniqueness is asked of each block's histogram over the schema's
    types, or over coarser ones: ``unique_on`` maps an attribute's codes to coarser codes before
    the question (``{"age": AGEBIN_OF_AGE}``: certification's resolution for persons); a block's
    status is then "unique" when every solution gives it the same coarse histogram. At
    "block+tract" a block's ``seconds`` is its tract's time shared evenly among its blocks.
    """
    if level not in LEVELS:
        raise TabreconError(f"level must be one of {', '.join(LEVELS)} (got {level!r})")
    opts = (opts or SolverOptions()).for_task("certify")
    names = tables or tuple(t.name for t in tables_of(schema))
    of_level = {
        lv: tuple(n for n in names if table_by_name(n, schema).level == lv)
        for lv in ("block", "tract")
    }
    cells, W, geoids, V = block_tables(long, schema, of_level["block"])
    feas = schema.feasible_types()
    Wc = W.tocsc()
    if level == "block":
        groups = [([b], None) for b in range(len(geoids))]
        Wt = None
    else:
        if not of_level["tract"]:
            raise TabreconError(
                f"no tract tables among those used ({', '.join(names)}): level 'block+tract' "
                f"needs some (the {schema.name} schema declares "
                f"{', '.join(t.name for t in tables_of(schema) if t.level == 'tract') or 'none'})"
            )
        _tc, Wt, tgeo, Vt = block_tables(long, schema, of_level["tract"])
        tract_of = prefix(np.asarray(geoids, dtype=str), "tract")
        known = dict(zip(tgeo, range(len(tgeo)), strict=True))
        lacking = sorted(set(tract_of.tolist()) - set(known))
        if lacking:
            raise InputError(
                f"tract {lacking[0]} has blocks but no tract table values "
                f"({len(lacking) - 1} more such tracts): level 'block+tract' needs "
                f"{', '.join(of_level['tract'])} for every tract"
            )
        groups = [
            (np.flatnonzero(tract_of == t).tolist(), Vt[known[t]])
            for t in np.unique(tract_of).tolist()
        ]
    Wtc = Wt.tocsc() if Wt is not None else None
    rows, geo_out, stats = [], [], []
    for bs, vt in groups:
        t0 = time.perf_counter()
        if vt is None:
            prog, adm = block_program(W, V[bs[0]], Wc)
            adms = [adm]
        else:
            assert Wt is not None and Wtc is not None
            prog, adms = tract_program(W, Wc, V[bs], Wt, Wtc, vt)
        base = Extensible(prog, opts)  # built once: the solve and the uniqueness proof clone it
        sol = base.solve_base()
        share = 1.0 / len(bs)
        if not sol.has_solution or sol.x is None:
            why = "infeasible" if sol.status == "infeasible" else "failed"  # tables contradict
            took = (time.perf_counter() - t0) * share
            stats += [(geoids[b], 0, int(a.size), why, took) for b, a in zip(bs, adms, strict=True)]
            continue
        x = sol.x
        status = ["unknown"] * len(bs)
        if check_unique:
            if vt is None and unique_on is None:
                once = _unique(base, x)
                status = ["undecided" if once is None else ("unique" if once else "varies")]
            else:
                status = _unique_blocks(base, x, adms, feas, schema, unique_on)
        took = (time.perf_counter() - t0) * share
        off = 0
        for b, a, st in zip(bs, adms, status, strict=True):
            xb = x[off : off + a.size]
            off += a.size
            pos = np.flatnonzero(xb)
            rows.append(np.repeat(feas[a[pos]], xb[pos]))
            geo_out.append(np.full(int(xb.sum()), geoids[b]))
            stats.append((geoids[b], int(xb.sum()), int(a.size), st, took))
    types = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    units = Units(
        schema,
        np.concatenate(geo_out).astype(str) if geo_out else np.zeros(0, dtype=str),
        schema.decode(types),
        None,
        "reconstruction",
    )
    blocks = pl.DataFrame(
        stats, schema=["geoid", "units", "types", "status", "seconds"], orient="row"
    ).sort("geoid")
    return UnitReconstruction(units, blocks)


def _unique_blocks(
    base: Extensible,
    x: np.ndarray,
    adms: list[np.ndarray],
    feas: np.ndarray,
    schema: Schema,
    unique_on: Mapping[str, np.ndarray] | None,
) -> list[str]:
    """Each block's verdict in one proof over the joint program: the forms are every block's
    count of each (coarse) type it holds (:func:`tabrecon.attacks.solvers.prove_forms`); a block
    is unique when all its forms are proven, varies when one is refuted, undecided when the
    proof stopped at the limit first."""
    nb = len(adms)
    blk = np.repeat(np.arange(nb), [a.size for a in adms])
    cols = schema.decode(feas[np.concatenate(adms)]) if blk.size else {}
    parts = [blk]
    for a in schema.attributes:
        c = np.asarray(cols[a.name]) if blk.size else np.zeros(0, dtype=np.int64)
        if unique_on and a.name in unique_on:
            c = np.asarray(unique_on[a.name])[c]
        parts.append(c.astype(np.int64))
    if not blk.size:
        return ["unique"] * nb
    _, form = np.unique(np.stack(parts, axis=1), axis=0, return_inverse=True)
    form = form.reshape(-1)
    F = sp.csr_matrix(
        (np.ones(blk.size, dtype=np.int64), (form, np.arange(blk.size))),
        shape=(int(form.max()) + 1, blk.size),
    )
    m = F @ x
    sel = np.flatnonzero(m > 0)  # the totals are published: another histogram lowers one of these
    proof = prove_forms(base, F[sel], m[sel], [x], base.opts.time_limit)
    form_block = np.zeros(F.shape[0], dtype=np.int64)
    form_block[form] = blk
    out = []
    for b in range(nb):
        mine = form_block[sel] == b
        if proof.verified[mine].all():
            out.append("unique")
        elif proof.complete:
            out.append("varies")
        else:
            out.append("undecided")
    return out


def block_tables(
    long: pl.DataFrame, schema: Schema, names: tuple[str, ...]
) -> tuple[list, sp.csr_matrix, list[str], np.ndarray]:
    """The named tables' cells, weight matrix, the blocks (sorted geoids) and their values
    (blocks x cells) from a long table; refuses tables that lack a cell."""
    cells, W = compiled(schema, tuple(names))
    ids = [c.id for c in cells]
    missing = sorted(set(ids) - set(long["cell"].unique().to_list()))
    if missing:
        raise InputError(
            f"the tables lack cells {missing[:5]} (and {max(len(missing) - 5, 0)} more)"
        )
    wide = (
        long.filter(pl.col("cell").is_in(ids))
        .pivot(on="cell", index="geoid", values="value")
        .sort("geoid")
    )
    nulls = wide.select(pl.col(ids).is_null()).to_numpy()
    if nulls.any():
        b, c = np.argwhere(nulls)[0]
        raise InputError(
            f"block {wide['geoid'][int(b)]} lacks cell {ids[int(c)]} ({int(nulls.sum()) - 1} more "
            "cells of blocks are missing): every block needs every cell of the tables used"
        )
    V = wide.select(ids).to_numpy().astype(np.int64)
    return cells, W, wide["geoid"].to_list(), V


def block_program(
    W: sp.csr_matrix,
    v: np.ndarray,
    Wc: sp.csc_matrix | None = None,
    exclude: np.ndarray | None = None,
) -> tuple[IntProgram, np.ndarray]:
    """One block's count program (A x = v over the admissible types) and the admissible types'
    positions among the feasible types: a type is ruled out by any zero cell it lies in, and
    bounded by the smallest cell it lies in; cells left with no type and a zero value are
    dropped (the program's rows are the block's remaining cells, in order). ``Wc`` is ``W`` in
    CSC form, converted once by callers that build many blocks; ``exclude`` rules out more types
    (those a tract's zero cells rule out)."""
    zero = np.flatnonzero(v == 0)
    ruled_out = np.asarray(W[zero].sum(axis=0)).ravel() > 0
    if exclude is not None:
        ruled_out |= exclude
    adm = np.flatnonzero(~ruled_out)
    A = (W.tocsc() if Wc is None else Wc)[:, adm].tocsr()
    # a zero cell whose types are all ruled out says 0 = 0: most of a small block's cells do,
    # and the solvers need not read them (a nonzero cell without types stays: it is infeasible)
    keep = (np.diff(A.indptr) > 0) | (v != 0)
    if not keep.all():
        A, v = A[keep], v[keep]
    big = np.iinfo(np.int64).max
    ub = np.full(adm.size, big, dtype=np.int64)
    np.minimum.at(ub, A.indices, np.repeat(v, np.diff(A.indptr)))
    return IntProgram(A=A, lo=v, hi=v, ub=np.where(ub == big, 0, ub)), adm


def tract_program(
    W: sp.csr_matrix,
    Wc: sp.csc_matrix,
    V: np.ndarray,
    Wt: sp.csr_matrix,
    Wtc: sp.csc_matrix,
    vt: np.ndarray,
) -> tuple[IntProgram, list[np.ndarray]]:
    """The joint count program of a tract's blocks (``V``: blocks x block cells) under its tract
    cells ``vt``: each block's program (:func:`block_program`, types a zero tract cell rules out
    excluded too) side by side, and one row per tract cell summing the blocks' types in it
    (zero cells left without types dropped). Returns the program and each block's admissible
    types; the variables are the blocks' in order."""
    out_t = np.asarray(Wt[np.flatnonzero(vt == 0)].sum(axis=0)).ravel() > 0
    progs, adms = [], []
    for v in V:
        p, a = block_program(W, v, Wc, out_t)
        progs.append(p)
        adms.append(a)
    At = sp.hstack([Wtc[:, a] for a in adms], format="csr") if adms else Wt[:, :0]
    keep = (np.diff(At.indptr) > 0) | (vt != 0)
    A = sp.vstack([sp.block_diag([p.A for p in progs], format="csr"), At[keep]], format="csr")
    v = np.concatenate([p.lo for p in progs] + [vt[keep]])
    big = np.iinfo(np.int64).max
    ub = np.full(A.shape[1], big, dtype=np.int64)
    np.minimum.at(ub, A.indices, np.repeat(v, np.diff(A.indptr)))
    prog = IntProgram(A=A.astype(np.int64), lo=v, hi=v, ub=np.where(ub == big, 0, ub))
    return prog, adms


def _unique(base: Extensible, x: np.ndarray) -> bool | None:
    """No other solution: none with x_t <= x*_t - 1 for some reconstructed type t (the block's
    total is published, so any other solution has fewer units of some type). None when the
    solver reached its limit without deciding."""
    prog = base.prog
    pos = np.flatnonzero(x > 0)
    n, nv = pos.size, prog.n_vars
    M = prog.ub[pos] - x[pos] + 1  # z_t = 0 leaves x_t <= ub_t
    rows = sp.hstack(
        [
            sp.csr_matrix((np.ones(n), (np.arange(n), pos)), shape=(n, nv)),
            sp.diags(M.astype(float)),
        ]
    ).tocsr()
    one = sp.hstack([sp.csr_matrix((1, nv)), sp.csr_matrix(np.ones((1, n)))]).tocsr()
    sol = base.solve(
        n,
        np.ones(n, dtype=np.int64),
        sp.vstack([rows, one]).tocsr().astype(np.int64),
        np.concatenate([np.zeros(n, dtype=np.int64), [1]]),
        np.concatenate([x[pos] - 1 + M, [n]]),
    )
    if sol.status == "infeasible":
        return True
    if sol.has_solution:
        return False
    return None
