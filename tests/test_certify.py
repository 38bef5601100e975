"""Certification: solvar zero proofs, distances, uniqueness flags, refusal of a wrong
reconstruction."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tabrecon import certify, reconstruct
from tabrecon.attacks.certify import cumulative_solvar, solvar_table, uniqueness_flags
from tabrecon.metrics.agreement import agree
from tabrecon.schema import CODE_OF_BITS, from_arrays
from tabrecon.schema.registry import population
from tabrecon.tables.persons import tabulate


def counting(monkeypatch, name, *modules):
    """``name`` in each of ``modules`` replaced by a wrapper that counts its calls (the first
    module's function is called): the list the calls are appended to."""
    calls: list[int] = []
    real = getattr(modules[0], name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    for m in modules:
        monkeypatch.setattr(m, name, counted)
    return calls


W_B = int(CODE_OF_BITS[0b000011])  # White + Black
W_AIAN = int(CODE_OF_BITS[0b000101])  # White + AIAN


@pytest.mark.realdata
def test_real_block_tract_every_block_certified(real_certs, real_md):
    rec, cert = real_certs["block+tract"]
    assert not cert.failed
    b = cert.blocks
    assert b.height == 8530 and (b["status"] == "unique").all() and (b["solvar"] == 0).all()
    # flags equal the sample's on every record: join on the binned key (the multisets are equal)
    mine = uniqueness_flags(rec, b)
    key = ["block_geoid", "sex", "agebin", "race", "hispanic"]

    def keyed(md, flags):
        return pl.DataFrame(
            {
                "block_geoid": md.block_geoid,
                "sex": md.sex,
                "agebin": md.agebin,
                "race": md.race,
                "hispanic": md.hisp,
            }
        ).with_columns(flags)

    truth = keyed(
        real_md,
        [real_md.extra["bsab_unique"].alias("t1"), real_md.extra["bsaber_unique"].alias("t2")],
    ).unique(key)
    got = keyed(
        rec, [mine["bsab_unique"].alias("g1"), mine["bsaber_unique"].alias("g2"), mine["certified"]]
    ).unique(key)
    j = got.join(truth, on=key, how="inner")
    assert j.height == got.height == truth.height
    assert (j["g1"] == j["t1"]).all() and (j["g2"] == j["t2"]).all() and j["certified"].all()
    assert int(mine["bsab_unique"].sum()) == 41054 and int(mine["bsaber_unique"].sum()) == 41821


@pytest.mark.realdata
def test_real_block_only_distribution(real_certs):
    _, cert = real_certs["block"]
    b = cert.blocks
    assert not cert.failed and b["proven"].all()
    varying = b.filter(pl.col("status") == "varies")
    assert varying.height > 0 and (varying["solvar"] > 0).all()
    s4 = solvar_table(b)
    assert s4["cum_blocks_pct"][0] < 100.0 and s4["cum_blocks_pct"][-1] == 100.0
    lo, hi = cumulative_solvar(b)
    assert 0 < lo == hi < 5


people = st.lists(
    st.tuples(
        st.sampled_from(["990010001001001", "990010001001002", "990010001002001"]),
        st.integers(0, 1),
        st.sampled_from([3, 25, 27, 33, 40, 41, 70, 88]),
        st.sampled_from([1, 2, 7, 8, 9, 22]),
        st.integers(0, 1),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(people, st.sampled_from(["block", "block+tract"]))
def test_certified_blocks_are_reconstructed_exactly(rows, level):
    g, s, a, r, h = (np.array(x) for x in zip(*rows, strict=True))
    truth = from_arrays(g, s, a, r, h)
    ts = tabulate(truth)
    rec = reconstruct(ts, level).records
    blocks = certify(ts, rec, level).blocks
    per = agree(rec, truth=truth).per_block.join(
        blocks.select("block_geoid", "status"), on="block_geoid"
    )
    unique = per.filter(pl.col("status") == "unique")
    assert (unique["binned"] == unique["persons"]).all()


def test_a_distance_time_limit_bounds_each_block_instead_of_searching_long(small_md):
    """Block tables only: many blocks can differ; with a short per-block distance limit every
    varying block ends with bounds (never a false zero) and the run stays short."""
    import time

    ts = tabulate(small_md, "block")
    rec = reconstruct(ts, "block").records
    t0 = time.perf_counter()
    run = certify(ts, rec, "block", distance_time_limit=0.5)
    b = run.blocks
    varies = b.filter(b["status"] != "unique")
    assert varies.height > 0 and (varies["solvar_hi"] > 0).all()
    assert (b["solvar_lo"] <= b["solvar_hi"]).all()
    assert time.perf_counter() - t0 < 120


def _loose_distance(ts, tract: str, level: str, rec, block: str) -> int:
    """Oracle: block ``block``'s largest distance with the textbook big-M (the block's population
    N_b), which is obviously valid and slow on large blocks; certify uses tighter bounds."""
    import scipy.sparse as sp

    from tabrecon.attacks.certify import binned_type
    from tabrecon.engine.release import plan_release
    from tabrecon.engine.solvers import IntProgram, solve
    from tabrecon.engine.tract import program_of_tract
    from tabrecon.populations.persons import UNIQUE_ON

    split = plan_release(ts, population("persons"), level).split
    long = pl.concat([split.long(t) for t in split.parts])
    m = program_of_tract(long, population("persons"), level, UNIQUE_ON)
    b = int(np.flatnonzero(m.geoids == block)[0])
    mine = np.asarray(rec.block_geoid) == block
    vsel = np.flatnonzero(m.var_block == b)
    keys, vk = np.unique(binned_type(m.var_type[vsel]), return_inverse=True)
    rk, rc = np.unique(binned_type(rec.types[mine]), return_counts=True)
    c = np.zeros(len(keys), dtype=np.int64)
    c[np.searchsorted(keys, rk)] = rc
    kb = np.flatnonzero(c > 0)
    n, N = kb.size, int(c.sum())
    G = sp.csr_matrix((np.ones(len(vsel)), (vk, vsel)), shape=(len(keys), m.prog.n_vars))[kb]
    eye = sp.identity(n, format="csr")
    p = m.prog
    A = sp.vstack(
        [
            sp.hstack([p.A, sp.csr_matrix((p.n_rows, 2 * n))]),
            sp.hstack([sp.csr_matrix((n, m.prog.n_vars)), eye, -sp.diags(c[kb].astype(float))]),
            sp.hstack([G, eye, N * eye]),
        ]
    ).tocsr()
    prog = IntProgram(
        A=A,
        lo=np.concatenate([p.lo, np.full(n, -N), np.full(n, -N)]),
        hi=np.concatenate([p.hi, np.zeros(n), c[kb] + N]),
        ub=np.concatenate([p.ub, c[kb], np.ones(n)]),
        c=np.concatenate([np.zeros(m.prog.n_vars), np.ones(n), np.zeros(n)]),
        maximize=True,
    )
    sol = solve(prog)
    assert sol.status == "optimal"
    assert sol.objective is not None
    return int(round(sol.objective))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(people, st.sampled_from(["block", "block+tract"]))
def test_distances_equal_the_textbook_formulation(rows, level):
    """The distance maximisation's big-M is each key's largest possible count, not the block's
    population (what made large blocks time out); the proven distances must not change."""
    g, s, a, r, h = (np.array(x) for x in zip(*rows, strict=True))
    truth = from_arrays(g, s, a, r, h)
    ts = tabulate(truth)
    rec = reconstruct(ts, level).records
    blocks = certify(ts, rec, level).blocks
    assert blocks["proven"].all()
    for row in blocks.iter_rows(named=True):
        if row["persons"] == 0:
            continue
        d = _loose_distance(
            ts.subset(row["block_geoid"][:11]),
            row["block_geoid"][:11],
            level,
            rec,
            row["block_geoid"],
        )
        assert round(row["solvar"] * row["persons"] / 100) == d, row
        assert (row["status"] == "unique") == (d == 0)


@pytest.mark.parametrize(
    ("level", "escalate_after"), [("block", None), ("block+tract", None), ("block+tract", 1e-4)]
)
def test_synthetic_county_distances_equal_the_textbook_formulation(
    small_md, level, escalate_after, monkeypatch
):
    """The same on a synthetic county, where many blocks vary (the oracle is run on the blocks
    it solves quickly). With tract tables this pins the bounding route too: own-rows upper
    bounds, joint lower bounds, unique blocks held fixed, searches only where bounds differ;
    and, with CP-SAT cut off at once, every search handed to HiGHS with the bounds combined."""
    import tabrecon.engine.variability as variability

    if escalate_after is not None:
        monkeypatch.setattr(variability, "ESCALATE_AFTER", escalate_after)
    ts = tabulate(small_md)
    rec = reconstruct(ts, level).records
    blocks = certify(ts, rec, level).blocks
    assert blocks["proven"].all()
    varies = blocks.filter((pl.col("status") == "varies") & (pl.col("persons") <= 120))
    assert varies.height >= 5
    for row in varies.iter_rows(named=True):
        t = row["block_geoid"][:11]
        d = _loose_distance(ts.subset(t), t, level, rec, row["block_geoid"])
        assert round(row["solvar"] * row["persons"] / 100) == d, row


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.lists(st.integers(-2, 2), min_size=n, max_size=n), min_size=1, max_size=3),
            st.lists(st.tuples(st.integers(-4, 4), st.integers(0, 4)), min_size=3, max_size=3),
            st.lists(st.integers(0, 3), min_size=n, max_size=n),
        )
    )
)
def test_tightened_bounds_keep_every_feasible_solution(spec):
    """Presolve's bounds (what certification drops fixed variables by) must hold for *every*
    feasible point, not only for one optimal one: enumerated against all points of a small box.
    So must those a solve of the program keeps (``keep_bounds``: a tract's reconstruction hands
    them to its certification)."""
    import itertools

    import scipy.sparse as sp

    from tabrecon.engine.proofs import Extensible
    from tabrecon.engine.solvers import IntProgram, SolverOptions, tighten

    n, rows, bounds, ub = spec
    A = np.array(rows, dtype=np.int64)
    lo = np.array([b[0] for b in bounds[: len(rows)]], dtype=np.int64)
    hi = lo + np.array([b[1] for b in bounds[: len(rows)]], dtype=np.int64)
    prog = IntProgram(A=sp.csr_matrix(A), lo=lo, hi=hi, ub=np.array(ub, dtype=np.int64))
    feasible = [
        x
        for x in itertools.product(*(range(u + 1) for u in ub))
        if ((A @ np.array(x) >= lo) & (A @ np.array(x) <= hi)).all()
    ]
    got = tighten(prog)
    ext = Extensible(prog, SolverOptions(), keep_bounds=True)
    sol = ext.solve_base()
    if not feasible:
        assert not sol.has_solution and sol.bounds is None
        return  # None or any bounds: nothing to keep
    assert got is not None and sol.bounds is not None
    pts = np.array(feasible)
    for tlb, tub in (got, sol.bounds, ext.tighten()):
        assert (pts >= tlb).all() and (pts <= tub).all()


@settings(max_examples=250, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.lists(st.integers(0, 2), min_size=n, max_size=n), min_size=1, max_size=2),
            st.lists(st.integers(0, 3), min_size=n, max_size=n),
            st.lists(st.integers(0, 3), min_size=n, max_size=n),
            st.lists(st.lists(st.integers(0, 1), min_size=n, max_size=n), min_size=1, max_size=3),
            st.integers(0, 20),
            st.lists(st.integers(0, 3), min_size=3, max_size=3),
        )
    )
)
def test_the_largest_shortfall_equals_enumeration(spec):
    """:func:`max_shortfall` (keys that can never exceed their count enter the objective
    linearly, the others through a binary and a big-M) gives the largest ``sum_k (c_k - y_k)^+``
    over every feasible point of a small box, whatever each key's bound ``ymax_k``: at, above
    or never below its count. The rows are equalities (published counts, those of a point of
    the box), so a key can only fall short where another takes its units."""
    import itertools

    import scipy.sparse as sp

    from tabrecon.engine.proofs import Extensible
    from tabrecon.engine.solvers import IntProgram, SolverOptions
    from tabrecon.engine.variability import max_shortfall

    n, rows, ub, at, keys, pick, extra = spec
    A = np.array(rows, dtype=np.int64)
    b = A @ np.minimum(at, ub)  # the tables of a point of the box: never infeasible
    pts = np.array(list(itertools.product(*(range(u + 1) for u in ub))))
    pts = pts[((pts @ A.T) == b).all(axis=1)]
    prog = IntProgram(A=sp.csr_matrix(A), lo=b, hi=b, ub=np.array(ub))
    G = np.array(keys, dtype=np.int64)
    ys = pts @ G.T
    c = ys[pick % len(pts)]  # the counts of one feasible point: a reconstruction
    # each key's bound: its largest count, or more on some keys (a loose bound is still one)
    ymax = ys.max(axis=0) + np.array(extra[: len(keys)]) * (np.arange(c.size) % 2)
    want = int(np.maximum(c - ys, 0).sum(axis=1).max())
    lo_, hi_, proven, x = max_shortfall(
        Extensible(prog, SolverOptions()), sp.csr_matrix(G), c, ymax
    )
    assert proven and lo_ == hi_ == want
    assert x is not None and int(np.maximum(c - G @ x, 0).sum()) == want


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda nx: st.lists(
            st.tuples(
                st.lists(st.integers(-2, 3), min_size=nx, max_size=nx),
                st.integers(1, 5),
                st.integers(0, 4),
            ),
            min_size=0,
            max_size=6,
        )
    )
)
def test_the_shortfall_rows_written_as_arrays_are_the_stacked_blocks(keys):
    """The distance maximisation's rows, written straight into CSR arrays, are entry for entry
    (order within each row included: the CP-SAT model is filled in that order) what stacking
    ``[0, I, -diag(c)]`` over ``[G, I, diag(M)]`` gives, with the linear keys' objective."""
    import scipy.sparse as sp

    from tabrecon.engine.variability import _Shortfall

    nx = len(keys[0][0]) if keys else 3
    G = sp.csr_matrix(np.array([k for k, _, _ in keys], dtype=np.int64).reshape(len(keys), nx))
    c = np.array([v for _, v, _ in keys], dtype=np.int64)
    ymax = c + np.array([m for _, _, m in keys], dtype=np.int64)  # m = 0: a linear key
    ex = _Shortfall.of(G, c, ymax)
    under = ymax <= c
    over = np.flatnonzero(~under)
    Go, co, Mk = G[over], c[over], ymax[over] - c[over]
    n = co.size
    eye = sp.identity(n, format="csr", dtype=np.int64)
    want = sp.vstack(
        [
            sp.hstack([sp.csr_matrix((n, nx), dtype=np.int64), eye, -sp.diags(co, dtype=np.int64)]),
            sp.hstack([Go, eye, sp.diags(Mk, dtype=np.int64)]),
        ]
    ).tocsr()
    got = ex.rows
    assert got.shape == want.shape and ex.base == int(c[under].sum())
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices) and np.array_equal(got.data, want.data)
    gain = -np.asarray(G[np.flatnonzero(under)].sum(axis=0), dtype=np.int64).ravel()
    if ex.objective is not None:
        assert np.array_equal(ex.objective[:nx], gain)
    else:
        assert n == 0 and not gain.any()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.lists(st.integers(0, 2), min_size=3, max_size=3), min_size=1, max_size=2),
            st.lists(st.integers(0, 3), min_size=3, max_size=3),
            st.lists(st.integers(0, 3), min_size=3, max_size=3),
            st.lists(st.lists(st.integers(0, 1), min_size=3, max_size=3), min_size=1, max_size=3),
            st.integers(0, 20),
        ),
        min_size=1,
        max_size=3,
    )
)
# an integer optimum of the relaxation that falls short of the maximum (0 against 1): its
# bound (1) is not met, so CP-SAT must be asked
@example([([[0, 1, 1]], [1, 3, 1], [2, 2, 2], [[0, 0, 1], [0, 1, 0], [1, 1, 0]], 0)])
def test_own_rows_from_the_relaxation_first_equal_enumeration(blocks):
    """Several blocks' own-rows maxima at once (:func:`_own_rows_at_once`): taken from the
    linear relaxation where its optimum is an integer population meeting its bound, from
    CP-SAT for the other blocks, each equals the largest shortfall enumerated over the block's
    box, and the population returned reaches every block's maximum; the same maxima as CP-SAT
    for every block (``OWN_ROWS_LP`` off)."""
    import itertools

    import scipy.sparse as sp

    import tabrecon.engine.variability as V
    from tabrecon.engine.solvers import IntProgram, SolverOptions

    As, bs, ubs, Gs, cs, want, var_block, key_block = [], [], [], [], [], [], [], []
    for b, (rows, ub, at, keys, pick) in enumerate(blocks):
        A = np.array(rows, dtype=np.int64)
        rhs = A @ np.minimum(at, ub)  # the tables of a point of the box: never infeasible
        pts = np.array(list(itertools.product(*(range(u + 1) for u in ub))))
        pts = pts[((pts @ A.T) == rhs).all(axis=1)]
        G = np.array(keys, dtype=np.int64)
        ys = pts @ G.T
        c = ys[pick % len(pts)]  # the counts of one feasible point: a reconstruction
        want.append(int(np.maximum(c - ys, 0).sum(axis=1).max()))
        As.append(sp.csr_matrix(A))
        bs.append(rhs)
        ubs.append(np.array(ub))
        Gs.append(sp.csr_matrix(G))
        cs.append(c)
        var_block += [b] * 3
        key_block += [b] * len(keys)
    A, G = sp.block_diag(As, format="csr"), sp.block_diag(Gs, format="csr")
    rhs, c, ub = np.concatenate(bs), np.concatenate(cs), np.concatenate(ubs)
    prog = IntProgram(A=A, lo=rhs, hi=rhs, ub=ub)
    kb, vb = np.array(key_block), np.array(var_block)
    # each key's bound from the box alone: these rows do not fix a block's total
    cp = V.Counts(
        prog,
        G,
        c,
        np.maximum(G @ ub, c),
        kb,
        vb,
        V.rows_block(A, vb),
        np.bincount(kb, weights=c, minlength=len(blocks)).astype(np.int64),
    )
    every = np.arange(len(blocks))
    got = V._own_rows_at_once(cp, every, SolverOptions())
    assert got is not None
    per_block, cols, x = got
    assert per_block.tolist() == want
    keys = np.flatnonzero(cp.c > 0)  # the population reaches each block's maximum
    short = np.maximum(cp.c[keys] - cp.G[keys][:, cols] @ x, 0)
    assert np.bincount(cp.key_block[keys], weights=short, minlength=len(blocks)).tolist() == want
    assert prog.satisfied_by(_at(cols, x, prog.n_vars))
    V.OWN_ROWS_LP = False
    try:
        alone = V._own_rows_at_once(cp, every, SolverOptions())
    finally:
        V.OWN_ROWS_LP = True
    assert alone is not None and alone[0].tolist() == want


def _at(cols: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    """``x`` on the columns ``cols`` of an ``n``-vector of zeros."""
    out = np.zeros(n, dtype=np.int64)
    out[cols] = x
    return out


@settings(max_examples=120, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.lists(st.sampled_from([-2, -1, 0, 0, 0, 1, 1, 2]), min_size=n, max_size=n),
                min_size=1,
                max_size=5,
            ),
            st.lists(st.tuples(st.integers(-4, 6), st.integers(0, 3)), min_size=8, max_size=8),
            st.lists(st.integers(0, 3), min_size=n, max_size=n),
            st.lists(st.integers(0, 1), min_size=n, max_size=n),
            st.integers(0, 3),
        )
    )
)
def test_reduced_rows_keep_exactly_the_integer_solutions(spec):
    """The rows and bounds a CP-SAT model is filled with (:func:`reduce_rows`: one-variable
    rows as bounds, forcing rows as fixings, satisfied rows dropped, repeated rows as one with
    the tightest bounds) admit exactly the points the whole program admits, enumerated over a
    small box; a contradiction is left whole."""
    import itertools

    import scipy.sparse as sp

    from tabrecon.engine.solvers import IntProgram, reduce_rows

    n, rows, bounds, ub, lb, repeats = spec
    rows = rows + rows[:repeats]  # a row published again, with bounds of its own
    A = np.array(rows, dtype=np.int64)
    lo = np.array([b[0] for b in bounds[: len(rows)]], dtype=np.int64)
    hi = lo + np.array([b[1] for b in bounds[: len(rows)]], dtype=np.int64)
    lbv = np.minimum(np.array(lb, dtype=np.int64), ub)
    prog = IntProgram(A=sp.csr_matrix(A), lo=lo, hi=hi, ub=np.array(ub), lb=lbv)

    def points(A, lo, hi, lb, ub):
        box = itertools.product(*(range(a, b + 1) for a, b in zip(lb, ub, strict=True)))
        return {x for x in box if ((A @ np.array(x) >= lo) & (A @ np.array(x) <= hi)).all()}

    every = points(A, lo, hi, lbv, ub)
    got = reduce_rows(prog)
    if got is None:
        assert not every  # left whole only when no point fits
        return
    keep, rlo, rhi, rlb, rub = got
    assert points(A[keep], rlo[keep], rhi[keep], rlb, rub) == every


@pytest.mark.parametrize("bounds", ["none", "exclude_the_reconstruction"])
def test_certification_without_presolved_bounds_is_unchanged(small_md, bounds, monkeypatch):
    """When presolve gives nothing, or bounds the reconstruction violates (a guard that should
    never fire), certification runs on the whole program and reports the same blocks."""
    import tabrecon.engine.variability as variability_module

    ts = tabulate(small_md)
    rec = reconstruct(ts, "block+tract").records
    want = certify(ts, rec, "block+tract").blocks

    def fake(prog, time_limit=10.0):
        if bounds == "none":
            return None
        ub = prog.ub.astype(np.int64)
        return ub, ub  # every variable at its upper bound: no reconstruction satisfies that

    monkeypatch.setattr(variability_module, "tighten", fake)
    got = certify(ts, rec, "block+tract").blocks
    assert got.equals(want)


def test_a_tract_certified_in_its_reconstruction_reads_the_bounds_its_solve_kept(
    small_md, monkeypatch
):
    """Certifying inside the reconstruction, a tract's presolve is its solve's own (the solve
    kept every feasible solution and the bounds it derived): no presolve of its own, and the
    same verdicts and solvar as certifying those records apart, which presolves anew."""
    import tabrecon.engine.proofs as proofs_module
    import tabrecon.engine.solvers as solvers_module
    import tabrecon.engine.variability as variability_module

    ts = tabulate(small_md)
    calls = counting(monkeypatch, "tighten", solvers_module, proofs_module, variability_module)
    rec = reconstruct(ts, "block+tract", certify=True, distance=True)
    assert not calls
    cols = ["block_geoid", "status", "solvar", "solvar_lo", "solvar_hi", "proven"]
    got = rec.blocks.select(cols).sort("block_geoid")
    want = certify(ts, rec.records, "block+tract", distance=True).blocks.select(cols)
    assert calls  # apart, each tract is presolved
    assert (got["status"] == "varies").sum() >= 10
    assert got.equals(want.sort("block_geoid"))


@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_distances_of_all_varying_blocks_at_once_equal_one_by_one(small_md, level, monkeypatch):
    """Every varying block's distance on its own rows is found by one maximisation of their
    sum (the blocks share nothing, so a proven sum is each at its own maximum): the verdicts
    and solvar are those of a search per block."""
    import tabrecon.engine.variability as variability_module

    ts = tabulate(small_md)
    rec = reconstruct(ts, level).records
    calls: list[int] = []
    at_once = variability_module._own_rows_at_once

    def counted(cp, blocks, opts):
        got = at_once(cp, blocks, opts)
        calls.append(int(got is not None))
        return got

    monkeypatch.setattr(variability_module, "_own_rows_at_once", counted)
    # time enough that the joint search is proven on a loaded machine too (else the blocks
    # are searched one by one: the same answers, but this test would not see the path taken)
    monkeypatch.setattr(variability_module, "OWN_ROWS_LIMIT", 30.0)
    want_cols = ["block_geoid", "status", "solvar", "proven"]
    got = certify(ts, rec, level, distance=True).blocks.select(want_cols)
    assert sum(calls) >= 1  # the path was taken, and proven somewhere
    monkeypatch.setattr(variability_module, "_own_rows_at_once", lambda cp, blocks, opts: None)
    want = certify(ts, rec, level, distance=True).blocks.select(want_cols)
    assert (got["status"] == "varies").sum() >= 10
    assert got.equals(want)


def test_a_relaxation_vertex_closes_blocks_before_their_searches(small_md, monkeypatch):
    """With tract tables, a varying block still open first gets vertices of the relaxation:
    the one counting every open block's keys least, and its own-rows maximum extended to the
    tract (``_complete``). Integer, each is a population whose shortfall is a lower bound, and
    where that meets the block's own-rows bound the block needs no search. Fewer searches; the
    verdicts and solvar of a search per block."""
    import tabrecon.engine.proofs as proofs
    import tabrecon.engine.variability as variability_module

    ts = tabulate(small_md)
    rec = reconstruct(ts, "block+tract").records
    searches = counting(monkeypatch, "search_shortfall", variability_module)
    cols = ["block_geoid", "status", "solvar", "solvar_lo", "solvar_hi", "proven"]
    got = certify(ts, rec, "block+tract", distance=True).blocks.select(cols)
    with_vertices = len(searches)
    searches.clear()
    monkeypatch.setattr(proofs.Relaxation, "vertex", lambda self, c, maximize=False: None)
    want = certify(ts, rec, "block+tract", distance=True).blocks.select(cols)
    assert with_vertices < len(searches)
    assert got.equals(want) and got["proven"].all()


def test_own_rows_populations_extended_to_the_tract_close_blocks_without_a_search(
    small_md, monkeypatch
):
    """A block still open after the joint vertex gets its own-rows maximum (a population of
    the block alone at its upper bound) extended to the whole tract by a vertex of the
    relaxation with the block's variables fixed (``_complete``); integer, that is a population
    meeting the bound, so the block is proven without a search. The verdicts and
    solvar are those without it, in fewer searches."""
    import tabrecon.engine.variability as variability_module

    ts = tabulate(small_md)
    rec = reconstruct(ts, "block+tract").records
    closed: list[int] = []
    complete = variability_module._complete

    def closing(rel, own, kept, cp, Gk, is_open, lower, upper):
        before = int(is_open.sum())
        complete(rel, own, kept, cp, Gk, is_open, lower, upper)
        closed.append(before - int(is_open.sum()))

    searches = counting(monkeypatch, "search_shortfall", variability_module)
    monkeypatch.setattr(variability_module, "_complete", closing)
    monkeypatch.setattr(variability_module, "OWN_ROWS_LIMIT", 30.0)  # proven on a loaded machine
    cols = ["block_geoid", "status", "solvar", "solvar_lo", "solvar_hi", "proven"]
    got = certify(ts, rec, "block+tract", distance=True).blocks.select(cols)
    with_it = len(searches)
    searches.clear()
    monkeypatch.setattr(variability_module, "COMPLETE", False)
    want = certify(ts, rec, "block+tract", distance=True).blocks.select(cols)
    assert sum(closed) >= 1
    assert with_it < len(searches)
    assert got.equals(want) and got["proven"].all()


def test_certification_without_the_lp_presolve_gives_the_same_answers(small_md, monkeypatch):
    """Certification's relaxations skip HiGHS' presolve (:data:`LP_PRESOLVE`), which only ever
    ran for each one's first optimum: their vertices may differ, the verdicts and solvar of
    every block may not; and the relaxations built really run without it."""
    import tabrecon.engine.proofs as P
    import tabrecon.engine.variability as variability_module

    ts = tabulate(small_md)
    rec = reconstruct(ts, "block+tract").records
    built: list[str] = []
    init = P.Relaxation.__init__

    def recording(self, prog, presolve=True):
        init(self, prog, presolve)
        built.append(self._h.getOptionValue("presolve")[1])

    monkeypatch.setattr(P.Relaxation, "__init__", recording)
    cols = ["block_geoid", "status", "solvar", "solvar_lo", "solvar_hi", "proven"]
    got = certify(ts, rec, "block+tract", distance=True).blocks.select(cols)
    assert built and set(built) == {"off"}
    built.clear()
    monkeypatch.setattr(variability_module, "LP_PRESOLVE", True)
    want = certify(ts, rec, "block+tract", distance=True).blocks.select(cols)
    assert built and "off" not in built
    assert (want["status"] == "varies").sum() >= 3
    assert got.equals(want) and got["proven"].all()


# -- certification over the schema (tabrecon.certify: what tabrecon solvar calls) ------------------
@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_over_the_schema_a_block_with_two_solutions_is_never_certified(level, two_solution_block):

    md = two_solution_block
    run = certify(tabulate(md), md, level)
    b = run.blocks.sort("block_geoid")
    assert b["status"].to_list() == ["varies", "unique"] and not run.failed
    assert b["solvar"].to_list() == [100.0, 0.0]  # both records can differ
    assert b["proven"].all() and (b["level"] == level).all()


def test_over_the_schema_a_wrong_reconstruction_is_refused_naming_cells(two_solution_block):

    md = two_solution_block
    wrong = from_arrays(
        ["990010001001001", "990010001001001", "990010001001002"],
        [0, 0, 1],
        [30, 40, 57],
        [W_B, W_AIAN, 1],
        [0, 0, 0],
    )
    run = certify(tabulate(md), wrong, "block")
    assert [r["status"] for r in run.failed] == ["refused"]
    assert "990010001001002 P0120" in run.failed[0]["message"]
    assert run.blocks.height == 0  # the refused tract's blocks are its failure, not verdicts


def test_over_the_schema_records_of_one_tract_refuse_the_others_by_name(small_md):
    """Records covering one tract of tables for several: the tracts they leave empty are
    refused with the cells they break (was an IndexError naming nothing), the covered tract
    certified."""

    ts = tabulate(small_md)
    first = ts.tracts()[0]
    part = small_md.take(small_md.rows_by_prefix([first])[first])
    run = certify(ts, part, "block", distance=False)
    refused = {r["unit"] for r in run.failed if r["status"] == "refused"}
    assert refused == set(ts.tracts()[1:])
    assert all("cells it breaks" in r["message"] for r in run.failed)
    assert set(run.blocks["block_geoid"].str.slice(0, 11)) == {first}


def test_the_solvar_command_certifies_a_person_file_and_resumes(tmp_path):
    """``tabrecon solvar`` with its --out (and so its resumable parts) certifies a person file:
    it raised on every input once (the records given were digested as a table of cells), and
    its message called it a bug. A rerun resumes; a rerun with other records is refused."""

    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import write_microdata
    from tabrecon.tables.published import write_tables

    md = synthesize(SynthConfig(persons=400), seed=5)
    write_microdata(md, tmp_path / "p.csv")
    write_tables(tabulate(md), tmp_path / "t.parquet")

    def run(recon: str) -> subprocess.CompletedProcess:
        args = ["solvar", "t.parquet", "--recon", recon, "--out", "sv.parquet", "--level", "block"]
        return run_cli(args, tmp_path)

    first = run("p.csv")
    assert first.returncode == 0, first.stderr
    blocks = pl.read_parquet(tmp_path / "sv.parquet")
    assert blocks.height == len(md.inhabited_blocks()) and (tmp_path / "sv_flags.parquet").exists()
    assert (blocks["status"] == "unique").sum() >= 1
    again = run("p.csv")
    assert again.returncode == 0, again.stderr
    assert pl.read_parquet(tmp_path / "sv.parquet").equals(blocks)
    other = synthesize(SynthConfig(persons=400), seed=6)
    write_microdata(other, tmp_path / "other.csv")
    refused = run("other.csv")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr


def test_reconstructing_and_certifying_never_import_pandas():
    """Every worker process imports what a unit needs; OR-Tools' ``cp_model`` module imports
    pandas (0.8 s of a worker's start-up) and nothing here uses it: the engine solves through
    :class:`tabrecon.engine.solvers.CpsatSolver`. In a new interpreter, since this one may have
    pandas already."""
    code = (
        "import sys, tabrecon\n"
        "from tabrecon.records.synth import SynthConfig, synthesize\n"
        "from tabrecon.tables.persons import tabulate\n"
        "ts = tabulate(synthesize(SynthConfig(persons=150), seed=1))\n"
        "c = tabrecon.certify(ts, tabrecon.reconstruct(ts).records)\n"
        "assert 'ortools.sat.python.cp_model_helper' in sys.modules  # CP-SAT did run\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(-2, 3), min_size=n, max_size=n), min_size=1, max_size=4),
            st.lists(st.integers(0, 4), min_size=n, max_size=n),
            st.lists(st.integers(0, 2), min_size=n, max_size=n),
            st.booleans(),
        )
    )
)
def test_a_program_reaches_highs_whole(spec):
    """What HiGHS holds after a program is passed as arrays (the relaxation's and the HiGHS
    backend's load) is the program: matrix, row and column bounds, costs and integrality."""
    import highspy
    import scipy.sparse as sp

    from tabrecon.engine.solvers import IntProgram, pass_to_highs

    rows, ub, lb, integer = spec
    A = sp.csr_matrix(np.array(rows, dtype=np.int64))
    ub_ = np.array(ub, dtype=np.int64)
    lb_ = np.minimum(np.array(lb, dtype=np.int64), ub_)
    n = ub_.size
    lo = np.arange(A.shape[0], dtype=np.int64) - 1
    prog = IntProgram(A=A, lo=lo, hi=lo + 3, ub=ub_, lb=lb_)
    cost = np.arange(n, dtype=float) - 1.5
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    pass_to_highs(h, prog, cost, integer)
    lp = h.getLp()
    assert (lp.num_col_, lp.num_row_) == (n, A.shape[0])
    assert np.array_equal(lp.col_cost_, cost)
    assert np.array_equal(lp.col_lower_, lb_) and np.array_equal(lp.col_upper_, ub_)
    assert np.array_equal(lp.row_lower_, lo) and np.array_equal(lp.row_upper_, lo + 3)
    m = lp.a_matrix_
    held = (
        sp.csr_matrix((m.value_, m.index_, m.start_), shape=A.shape)
        if m.format_ == highspy.MatrixFormat.kRowwise
        else sp.csc_matrix((m.value_, m.index_, m.start_), shape=A.shape)
    )
    assert (held != A).nnz == 0
    kinds = (
        {highspy.HighsVarType(int(v)) for v in lp.integrality_} if len(lp.integrality_) else set()
    )
    want = highspy.HighsVarType.kInteger if integer else highspy.HighsVarType.kContinuous
    assert kinds <= {want} and (not integer or kinds == {want})
