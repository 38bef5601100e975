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
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError
from ..schema.catalog import HOUSING_UNITS
from ..schema.spec import Schema, Units
from ..unit_tables import compiled, tables_of
from .solvers import Extensible, IntProgram, SolverOptions


@dataclass
class UnitReconstruction:
    """Reconstructed units and, per block, whether they are the only consistent ones."""

    units: Units
    blocks: pl.DataFrame  # geoid, units, types, status, seconds
    # status: unique | varies | undecided (limit hit) | infeasible (the tables contradict
    # themselves) | failed (no solution within the limit) | unknown (not checked)


def reconstruct_units(
    long: pl.DataFrame,
    schema: Schema = HOUSING_UNITS,
    tables: tuple[str, ...] | None = None,
    opts: SolverOptions | None = None,
    check_unique: bool = True,
) -> UnitReconstruction:
    """Reconstruct every block of a long table (geoid, cell, value) of ``schema``'s tables."""
    opts = (opts or SolverOptions()).for_task("certify")
    names = tables or tuple(t.name for t in tables_of(schema))
    cells, W, geoids, V = block_tables(long, schema, names)
    feas = schema.feasible_types()
    Wc = W.tocsc()
    rows, geo_out, stats = [], [], []
    for b, geoid in enumerate(geoids):
        t0 = time.perf_counter()
        prog, adm = block_program(W, V[b], Wc)
        base = Extensible(prog, opts)  # built once: the solve and the uniqueness proof clone it
        sol = base.solve_base()
        if not sol.has_solution or sol.x is None:
            why = "infeasible" if sol.status == "infeasible" else "failed"  # tables contradict
            stats.append((geoid, 0, int(adm.size), why, time.perf_counter() - t0))
            continue
        x = sol.x
        status = "unknown"
        if check_unique:
            once = _unique(base, x)
            status = "undecided" if once is None else ("unique" if once else "varies")
        pos = np.flatnonzero(x)
        rows.append(np.repeat(feas[adm[pos]], x[pos]))
        geo_out.append(np.full(int(x.sum()), geoid))
        stats.append((geoid, int(x.sum()), int(adm.size), status, time.perf_counter() - t0))
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
    )
    return UnitReconstruction(units, blocks)


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
    W: sp.csr_matrix, v: np.ndarray, Wc: sp.csc_matrix | None = None
) -> tuple[IntProgram, np.ndarray]:
    """One block's count program (A x = v over the admissible types) and the admissible types'
    positions among the feasible types: a type is ruled out by any zero cell it lies in, and
    bounded by the smallest cell it lies in; cells left with no type and a zero value are
    dropped (the program's rows are the block's remaining cells, in order). ``Wc`` is ``W`` in
    CSC form, converted once by callers that build many blocks."""
    zero = np.flatnonzero(v == 0)
    ruled_out = np.asarray(W[zero].sum(axis=0)).ravel() > 0
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
