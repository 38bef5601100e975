"""Twin variables (:mod:`tabrecon.engine.twins`): the merged program has a solution exactly when
the program has, its solution dealt back is one; a moved population is a solution whose
histogram differs; and on dense city blocks (P1, P5, P12A-G) the verdicts with twins are those
of the proofs without them, at block level and block+tract."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabrecon.engine import reconstruct as reconstruct_module
from tabrecon.engine import twins
from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
from tabrecon.engine.solvers import IntProgram, SolverOptions, solve
from tabrecon.schema.registry import population


@st.composite
def programs(draw) -> IntProgram:
    """A small count program with repeated columns: a few distinct columns, each repeated."""
    rows = draw(st.integers(1, 3))
    distinct = draw(st.integers(1, 3))
    cols = [
        draw(st.lists(st.integers(0, 1), min_size=rows, max_size=rows)) for _ in range(distinct)
    ]
    reps = [draw(st.integers(1, 3)) for _ in range(distinct)]
    A = np.array([c for c, r in zip(cols, reps, strict=True) for _ in range(r)]).T
    ub = np.array(draw(st.lists(st.integers(0, 2), min_size=A.shape[1], max_size=A.shape[1])))
    rhs = np.array(draw(st.lists(st.integers(0, 4), min_size=rows, max_size=rows)))
    return IntProgram(A=sp.csr_matrix(A), lo=rhs, hi=rhs, ub=ub)


def _feasible(p: IntProgram) -> bool:
    return any(
        p.satisfied_by(np.array(x)) for x in itertools.product(*(range(u + 1) for u in p.ub))
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_a_merged_solve_finds_a_solution_exactly_when_there_is_one(p):
    sol = twins.solve_merged(p, SolverOptions(backend="highs"))
    assert sol.has_solution == _feasible(p)
    if sol.has_solution:
        assert p.satisfied_by(sol.x)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_a_moved_population_is_a_solution_whose_histogram_differs(p, data):
    x = solve(p, SolverOptions(backend="cpsat")).x
    if x is None:
        return
    n = p.n_vars
    keys = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    G = sp.csr_matrix((np.ones(n), (keys, np.arange(n))), shape=(3, n))
    y = twins.moved(p, x, G, np.zeros(n, dtype=np.int64))
    if y is not None:
        assert p.satisfied_by(y)
        assert not np.array_equal(G @ y, G @ x)


def test_twin_groups_number_equal_columns_as_they_come():
    A = sp.csr_matrix(np.array([[2, 0, 2, 1, 0], [1, 1, 1, 1, 0]]))
    assert twins.twin_groups(A).tolist() == [0, 1, 0, 2, 3]


def test_a_program_with_few_twins_is_solved_as_it_is(monkeypatch):
    """Where merging would keep more than MERGE_BELOW of the variables, the program's own
    solve runs (a tract's CP-SAT solve keeps the bounds its certification reads)."""
    p = IntProgram(
        A=sp.csr_matrix(np.array([[1, 1, 1, 0, 1], [0, 0, 1, 1, 2]])),
        lo=np.array([2, 1]),
        hi=np.array([2, 1]),
        ub=np.array([1, 1, 2, 1, 1]),
    )
    assert twins.merge(p) is None
    own = []
    twins.solve_merged(p, SolverOptions(), fallback=lambda: own.append(1) or solve(p))
    assert own == [1]


def _dense(persons: int, seed: int):
    """A synthetic county's blocks merged into city blocks of 200-400 persons, tabulated into
    P1, P5, P12A-G and PCT12, PCT12A-G (a third party's table set, as issue 87 measured)."""
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.tables.persons import tabulate

    md = synthesize(SynthConfig(persons=persons, tract_min=persons, tract_max=persons), seed=seed)
    size = np.bincount(md.block, minlength=len(md.geoids))
    acc, k, names = 0, 0, []
    for i, g in enumerate(md.geoids.tolist()):
        if acc >= 200 + 100 * (k % 3):
            k, acc = k + 1, 0
        names.append(f"{g[:11]}{1000 + k:04d}")
        acc += int(size[i])
    geoids, new = np.unique(np.array(names), return_inverse=True)
    md = dataclasses.replace(md, geoids=geoids, block=new.reshape(-1)[md.block])
    tables = ["P1", "P5", *(f"P12{c}" for c in "ABCDEFG")]
    tables += ["PCT12", *(f"PCT12{c}" for c in "ABCDEFG")]
    return tabulate(md, tables).to_frame()


@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_dense_city_blocks_get_the_verdicts_the_proofs_give(level, monkeypatch):
    long = _dense(1500, 3)
    pop = population("persons")
    opts = ReconstructOptions(level=level, unique_on=pop.unique_on)
    with_twins = reconstruct_units(long, pop, opts)
    monkeypatch.setattr(reconstruct_module, "moved", lambda *a, **k: None)
    monkeypatch.setattr(twins, "merge", lambda prog: None)
    proofs_only = reconstruct_units(long, pop, opts)
    cols = ["geoid", "units", "status"]
    assert with_twins.blocks.select(cols).equals(proofs_only.blocks.select(cols))
    assert (with_twins.blocks["units"] >= 200).sum() >= 3  # city blocks (a tract's last is less)
    # and the records tabulate back to the tables used (block level: the block tables)
    from tabrecon.tables.spec import tabulate_units

    used = long if level == "block+tract" else long.filter(pl.col("geoid").str.len_chars() == 15)
    back = tabulate_units(with_twins.units)
    got = used.join(back, on=["geoid", "cell"], how="left", suffix="_back")
    assert (got["value"] == got["value_back"].fill_null(0)).all()
