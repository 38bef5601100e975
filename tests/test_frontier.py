"""The matrix mechanism and the privacy-accuracy frontier: exact expected error against dense
pseudo-inverses and against OpenDP-noise simulation, slopes against finite differences,
randomized response's closed forms, TopDown's hierarchy factors, and the joins and refusals."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from cli_run import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.defenses.matrix import (
    Budget,
    QueryGroup,
    Strategy,
    Workload,
    partition_matrix,
)
from tabrecon.defenses.topdown import dhc2023_like
from tabrecon.errors import InputError
from tabrecon.geo import LEVELS, prefix
from tabrecon.metrics.frontier import frontier, join_tradeoff, rr_frontier
from tabrecon.metrics.matrix_error import (
    UnsupportedWorkload,
    expected_error,
    hierarchy_factors,
    pcg,
    simulate_error,
)


def _dense_error(Q: np.ndarray, groups: list[np.ndarray], v: np.ndarray) -> np.ndarray:
    """Per-query error from a dense pseudo-inverse: row norms^2 of Q A_w^+."""
    Aw = np.vstack([g / math.sqrt(x) for g, x in zip(groups, v, strict=True)])
    return ((Q @ np.linalg.pinv(Aw)) ** 2).sum(axis=1)


def _toy(seed: int, n: int = 24, identity: bool = True):
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, k, n) for k in (1, 3, 5)]
    groups = [partition_matrix(p) for p in parts]
    if identity:
        groups.append(sp.identity(n, format="csr"))
    shares = rng.dirichlet(np.ones(len(groups)))
    strat = Strategy(
        "toy",
        tuple(
            QueryGroup(f"g{i}", g, float(s))
            for i, (g, s) in enumerate(zip(groups, shares, strict=True))
        ),
    )
    # workload: sums over random subsets of the partitions' groups (always answerable)
    rows = [g.toarray()[rng.integers(0, g.shape[0])] for g in groups for _ in range(3)]
    Q = np.array(rows)
    w = Workload(
        "toy",
        sp.csr_matrix(Q),
        np.array([f"c{i}" for i in range(len(Q))]),
        np.array(["T"] * len(Q)),
    )
    return w, strat


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rho=st.floats(0.05, 20), identity=st.booleans())
def test_exact_error_equals_dense_pseudo_inverse(seed, rho, identity):
    w, s = _toy(seed, identity=identity)
    e = expected_error(w, s, Budget.zcdp(rho))
    assert e.method == ("woodbury" if identity else "gram")
    dense = _dense_error(
        w.matrix.toarray(), [g.matrix.toarray() for g in s.groups], e.group_variances
    )
    np.testing.assert_allclose(e.per_query, dense, rtol=1e-7, atol=1e-9)


def test_the_two_exact_routes_agree():
    """Woodbury (identity + low rank) and the strategy's Gram matrix on the same strategy: the
    per-query errors and the slopes' group terms."""
    w, s = _toy(7, identity=True)
    b = Budget.zcdp(2.0)
    a = expected_error(w, s, b, method="woodbury")
    g = expected_error(w, s, b, method="gram")
    np.testing.assert_allclose(a.per_query, g.per_query, rtol=1e-8)
    np.testing.assert_allclose(a.group_terms, g.group_terms, rtol=1e-7)


def test_unanswerable_workload_rows_are_named():
    w = Workload.from_tables("all", level="block")
    s = Strategy.parse("topdown:sex_agebin=0.5,hispanic_race=0.5", w)
    with pytest.raises(UnsupportedWorkload) as exc:
        expected_error(w, s, Budget.zcdp(1.0))
    msg = str(exc.value)
    assert "574 of the workload's 844 cells" in msg and "P10 (70)" in msg and "P0100002" in msg


def test_simulation_with_opendp_noise_matches_exact_on_a_toy():
    w, s = _toy(3)
    b = Budget.zcdp(0.7)
    exact = expected_error(w, s, b)
    sim = simulate_error(w, s, b, draws=4000, chunk=1000, x=np.arange(24.0))
    assert abs(sim.total - exact.total) < 4 * sim.se
    assert abs(sim.total / exact.total - 1) < 0.05
    assert sim.max_bias < 1e-6


def test_sf1_block_workload_exact_route_equals_conjugate_gradients():
    """The Woodbury answer for TopDown's queries on the 844 block cells, against an independent
    solve of M Z = Q' by conjugate gradients (no sampling)."""
    w = Workload.from_tables("all", level="block")
    s = Strategy.parse("topdown", w)
    b = Budget.zcdp(1.0)
    e = expected_error(w, s, b)
    Aw = sp.vstack(
        [g.matrix / math.sqrt(v) for g, v in zip(s.groups, e.group_variances, strict=True)]
    ).tocsr()
    AwT = Aw.T.tocsr()
    Q = w.matrix[:200].toarray().T
    diag = np.asarray(Aw.multiply(Aw).sum(axis=0)).ravel()
    Z, _, res = pcg(lambda P: AwT @ (Aw @ P), Q, diag)
    assert res.max() < 1e-8
    np.testing.assert_allclose((Q * Z).sum(axis=0), e.per_query[:200], rtol=1e-6)


def test_sensitivities():
    w = Workload.from_tables("P1", level="block")
    ident = Strategy.parse("identity").groups[0]
    assert ident.sensitivity(1, "bounded").value == 2 and ident.sensitivity(1, "bounded").exact
    total = Strategy.parse("topdown").groups[0]
    assert total.name == "total"
    s = total.sensitivity(2, "bounded")
    assert s.value == pytest.approx(math.sqrt(2)) and not s.exact  # charged, never attained
    assert Strategy.parse("workload", w).delta(1).value == 1.0
    with pytest.raises(InputError, match="needs a workload"):
        Strategy.parse("workload")


def test_budget_and_cost_compose_to_the_level_share():
    w = Workload.from_tables("all", level="block")
    s = Strategy.parse("topdown@dhc2023-like", w)
    assert s.level_share == pytest.approx(0.0110 / 4.9622, rel=1e-3)
    assert s.cost(Budget.zcdp(4.9622)).rho == pytest.approx(0.0110, rel=1e-3)
    with pytest.raises(InputError, match="finite number > 0"):
        Budget.zcdp(float("nan"))
    with pytest.raises(InputError, match=r"\(0, 1\]"):
        Strategy.parse("identity@0")


def test_frontier_slopes_match_finite_differences():
    w = Workload.from_tables("P1,P8,P12", level="block")
    s = Strategy.parse("marginals", w)
    f = frontier(w, [s], [Budget.zcdp(0.3), Budget.zcdp_from_epsilon(3.0)], geounits=10)
    for row in f.iter_rows(named=True):
        r = row["rho"]
        lo = expected_error(w, s, Budget.zcdp(r * 0.999)).total * 10
        hi = expected_error(w, s, Budget.zcdp(r * 1.001)).total * 10
        assert row["dI_drho"] == pytest.approx((lo - hi) / (0.002 * r), rel=1e-4)  # I = -error
        assert row["accuracy_I"] == pytest.approx(-expected_error(w, s, Budget.zcdp(r)).total * 10)
    assert f["epsilon"][1] == pytest.approx(3.0, rel=1e-6)


def test_laplace_frontier_uses_pure_epsilon():
    w = Workload.from_tables("P1", level="block")
    f = frontier(w, [Strategy.parse("identity")], [Budget.pure(1.0), Budget.pure(2.0)])
    # discrete Laplace, bounded l1 sensitivity 2, scale 2/eps: variance 2q/(1-q)^2, q = e^(-eps/2)
    for eps, err in zip(f["epsilon"], f["expected_sq_error"], strict=True):
        q = math.exp(-eps / 2)
        assert err == pytest.approx(27972 * 2 * q / (1 - q) ** 2)
    assert f["delta"].to_list() == [0.0, 0.0]


def test_randomized_response_closed_forms_within_three_percent():
    eps = [0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0]
    rr = rr_frontier(eps, reps=200_000, seed=1)
    assert rr["var_rel_diff"].abs().max() < 0.03
    assert rr["slope_rel_diff"].abs().max() < 1e-4
    assert (rr["dI_deps_closed"] > 0).all()
    assert (rr["I_closed"] < 0).all()  # accuracy below the no-privacy survey's
    assert (rr["I_closed"].diff().drop_nulls() > 0).all()  # ... and rising with epsilon


def _toy_geography(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(60):
        st_ = f"{rng.integers(1, 3):02d}"
        co = f"{rng.integers(1, 3):03d}"
        tr = f"{rng.integers(1, 4):06d}"
        out.append(f"{st_}{co}{tr}{rng.integers(1, 3)}{i:03d}")
    return np.array(out)


@pytest.mark.parametrize("level", ["block", "tract"])
def test_hierarchy_factors_equal_the_dense_tree_inverse(level):
    blocks = np.unique(_toy_geography(5))
    shares = dhc2023_like(1.0).level_shares
    rows = []
    for lv in LEVELS:
        u, inv = np.unique(prefix(blocks, lv), return_inverse=True)
        m = np.zeros((u.size, blocks.size))
        m[inv, np.arange(blocks.size)] = math.sqrt(shares[lv])
        rows.append(m)
    T = np.vstack(rows)
    P = np.linalg.inv(T.T @ T)
    units, inv = np.unique(prefix(blocks, level), return_inverse=True)
    C = np.zeros((blocks.size, units.size))
    C[np.arange(blocks.size), inv] = 1
    h = hierarchy_factors(blocks, shares, level)
    np.testing.assert_allclose(h.factors, np.diag(C.T @ P @ C), rtol=1e-8)
    assert (h.factors < 1 / shares["block"] * np.bincount(inv)).all()  # levels above help


def test_join_tradeoff_by_budget():
    w = Workload.from_tables("P1", level="block")
    f = frontier(w, [Strategy.parse("identity")], [Budget.zcdp(1.0), Budget.zcdp(2.0)])
    trade = pl.DataFrame(
        {
            "defense": ["none", "rho=1"],
            "rho": [float("nan"), 1.0],
            "attack_nonmodal_precision": [84.0, 6.2],
            "prg_nonmodal_precision": [17.0, 4.4],
        }
    )
    j = join_tradeoff(f, trade)
    assert j["attack_nonmodal_precision"].to_list() == [6.2, None]
    assert j["defense"].to_list() == ["rho=1", None]


def test_frontier_command_writes_everything(tmp_path):
    trade = tmp_path / "tradeoff.csv"
    pl.DataFrame(
        {
            "defense": ["rho=1"],
            "rho": [1.0],
            "attack_nonmodal_precision": [6.2],
            "prg_nonmodal_precision": [4.4],
        }
    ).write_csv(trade)
    p = run_cli(
        [
            "frontier",
            "--tables",
            "P1,P12",
            "--rhos",
            "1,2",
            "--strategy",
            "topdown",
            "--strategy",
            "workload",
            "--tradeoff",
            str(trade),
            "--draws",
            "6",
            "--out",
            str(tmp_path / "f"),
        ]
    )
    assert p.returncode == 0, p.stderr
    out = tmp_path / "f"
    for name in (
        "frontier.csv",
        "frontier_tables.csv",
        "frontier.png",
        "rr_frontier.csv",
        "rr_frontier.png",
        "frontier.json",
    ):
        assert (out / name).exists(), name
    f = pl.read_csv(out / "frontier.csv")
    assert f.height == 4 and set(f["method"]) == {"woodbury", "gram"}
    assert f.filter(pl.col("rho") == 1.0)["attack_nonmodal_precision"].to_list() == [6.2, 6.2]
    assert f["sim_rel_diff"].abs().max() < 0.5  # 6 draws: a smoke check, not the benchmark
    tables = pl.read_csv(out / "frontier_tables.csv")
    assert set(tables["table"]) == {"P1", "P12"}


def test_too_large_for_the_exact_method_says_so_and_simulates(monkeypatch):
    import tabrecon.metrics.matrix_error as me
    from tabrecon.metrics.matrix_error import TooLarge

    w = Workload.from_tables("P1,P12", level="block")
    s = Strategy.parse("topdown", w)
    monkeypatch.setattr(me, "MAX_DENSE", 10)
    with pytest.raises(TooLarge, match="estimate the error by simulation"):
        expected_error(w, s, Budget.zcdp(1.0))
    f = frontier(w, [s], [Budget.zcdp(1.0)], draws=4)
    row = f.row(0, named=True)
    assert row["method"] == "simulated" and row["simulated_se"] > 0
    assert row["expected_sq_error"] == row["simulated_sq_error"]


def test_optimised_shares_lower_the_error_and_equalise_marginal_values():
    from tabrecon.metrics.frontier import MIN_SHARE, optimise_shares

    w = Workload.from_tables("P1,P8,P12", level="block")
    s = Strategy.parse("topdown", w)
    best, path = optimise_shares(w, s, tol=1e-7, iterations=200)
    assert path[-1] < 0.5 * path[0]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(path, path[1:], strict=False))
    assert sum(g.share for g in best.groups) == pytest.approx(1.0)
    e = expected_error(w, best, Budget.zcdp(1.0), continuous=True)
    shares = np.array([g.share for g in best.groups])
    marginal = e.group_terms * e.group_variances / shares
    free = shares > MIN_SHARE * 1.0001
    # the optimality condition of the convex problem: equal marginal value where the share is
    # free, no more than that where it sits on the floor (these tables need no detailed cells)
    assert marginal[free].max() / marginal[free].min() < 1.001
    assert (marginal[~free] <= marginal[free].min() * 1.001).all()
    with pytest.raises(InputError, match="one group"):
        optimise_shares(w, Strategy.parse("identity"))
