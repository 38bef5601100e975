"""TopDown: converges to the input at a huge budget, keeps state totals, accounts its budget, refuses bad configs."""

from __future__ import annotations

import numpy as np
import pytest

from tabrecon.defenses.topdown import (
    TopDownConfig,
    dhc2023_like,
    topdown,
    tvd_by_level,
    uniform_config,
)
from tabrecon.errors import TabreconError
from tabrecon.synth import SynthConfig, synthesize


@pytest.fixture(scope="module")
def county():
    return synthesize(SynthConfig(persons=1200), seed=4)


def test_huge_budget_reproduces_the_input(county):
    r = topdown(county, uniform_config(1e6))
    tvd = tvd_by_level(county, r.records)
    assert min(tvd.values()) >= 0.999, tvd
    assert len(r.records) == len(county) and not r.fallbacks


def test_failed_fit_falls_back_to_a_penalised_refit(county, monkeypatch):
    """Solver failure at a parent: the parent sums become a penalty, the run goes on and says so."""
    import tabrecon.defenses.topdown as td

    exact = td._fit

    def failing(metas, parent, totals, penalty=None):
        if penalty is None:
            raise TabreconError("least-squares step failed: forced")
        return exact(metas, parent, totals, penalty)

    monkeypatch.setattr(td, "_fit", failing)
    r = topdown(county, uniform_config(1e6))
    assert r.fallbacks and all("penalty" in f and "forced" in f for f in r.fallbacks)
    assert len(r.records) == len(county)  # parents stay exact: the total is kept
    assert min(tvd_by_level(county, r.records).values()) >= 0.99


def test_dhc_like_keeps_state_totals_and_accounts_its_budget(county):
    r = topdown(county, dhc2023_like())
    assert len(r.records) == len(county)  # one state: its total is the invariant
    assert r.privacy["rho"] == pytest.approx(4.9622, rel=1e-9)
    assert r.privacy["epsilon_cks_delta_1e-10"] == pytest.approx(25.42, abs=0.02)
    tvd = tvd_by_level(county, r.records)
    assert tvd["block"] < tvd["state"] <= 1.0  # noise shows most where the budget is smallest
    # measurements are recorded with their variances: sigma^2 = 1 / rho_q
    m = r.measurements
    assert {"level", "geoid", "query", "group", "noisy", "variance"} <= set(m.columns)
    assert r.draws == m.height
    blk = m.filter(m["level"] == "block")
    if blk.height:
        rq = (
            4.9622 * (0.0110 / (4.9622 - 0.0949)) * 0.4
        )  # block share (nation absent) x detailed share
        v = blk.filter(blk["query"] == "detailed")["variance"][0]
        assert v == pytest.approx(1 / rq, rel=0.01)


@pytest.mark.parametrize(
    "kw",
    [
        {"rho": 0, "level_shares": {"state": 1.0}},
        {"rho": 1, "level_shares": {"state": 0.5, "block": 0.4}},
        {"rho": 1, "level_shares": {"planet": 1.0}},
        {"rho": 1, "level_shares": {"state": 1.0}, "query_shares": {"total": 0.5, "bogus": 0.5}},
    ],
)
def test_bad_budgets_are_refused(kw):
    with pytest.raises(TabreconError):
        TopDownConfig(**kw)


def test_missing_level_share_is_refused(county):
    with pytest.raises(TabreconError, match="no share for level"):
        topdown(county, TopDownConfig(1.0, {"state": 0.5, "block": 0.5}))
    assert np.isfinite(dhc2023_like().rho)


def test_tradeoff_one_row_per_defense_and_resume(county, tmp_path):
    import polars as pl
    from rich.console import Console

    from tabrecon.pipeline import run_tradeoff

    quiet = Console(file=open("/dev/null", "w"))
    df = run_tradeoff(county, ["none", "swap-lo", "rho=1e6"], tmp_path, seed=1, console=quiet)
    assert df["defense"].to_list() == ["none", "swap-lo", "rho=1e6"]
    none, huge = df.row(0, named=True), df.row(2, named=True)
    # at a huge budget TopDown returns the input, so the attack does exactly as well as on it
    assert huge["tvd_block"] >= 0.999
    assert huge["attack_nonmodal_precision"] == pytest.approx(
        none["attack_nonmodal_precision"], abs=1e-9
    )
    assert (tmp_path / "tradeoff.png").stat().st_size > 0
    again = run_tradeoff(county, ["none", "swap-lo", "rho=1e6"], tmp_path, seed=1, console=quiet)
    assert again.height == 3 and pl.read_csv(tmp_path / "tradeoff.csv").height == 3
    with pytest.raises(TabreconError, match="unknown defense"):
        run_tradeoff(county, ["shuffle"], tmp_path / "x", console=quiet)


def test_block_accuracy_metrics(county):
    from tabrecon.defenses.swapping import swap
    from tabrecon.metrics.accuracy import block_accuracy

    same = block_accuracy(county, county)
    row = same.row(0, named=True)
    assert row["mae_block_total"] == 0 and row["mean_l1_race_eth"] == 0 and row["majority_kept_pct"] == 100
    hi = block_accuracy(county, swap(county, "swap-hi", seed=1).records).row(0, named=True)
    assert hi["mae_block_total"] > 0 and hi["mean_l1_race_eth"] > 0
    assert same["bin"].to_list()[0] == "all" and same.height == 8


def test_noisy_measurement_fit(county):
    """At a huge budget the fit to the noisy measurements rebuilds the input exactly; at the DHC
    budget it keeps the published block totals; malformed measurements are refused."""
    import polars as pl

    from tabrecon.attacks.noisy import reconstruct_from_measurements
    from tabrecon.metrics.agreement import agree
    from tabrecon.tables import tabulate

    exact = topdown(county, uniform_config(1e6))
    nr = reconstruct_from_measurements(exact.measurements, county.geoids)
    assert agree(county, nr.records).exact == len(county) and not nr.failed
    r = topdown(county, dhc2023_like())
    g = tabulate(r.records).grids["block"]
    totals = dict(zip(g.geoids.tolist(), g.col("P0010001").tolist(), strict=True))
    nr = reconstruct_from_measurements(r.measurements, g.geoids, block_totals=totals)
    got = np.bincount(nr.records.block, minlength=len(nr.records.geoids))
    assert dict(zip(nr.records.geoids.tolist(), got.tolist(), strict=True)) == {k: v for k, v in totals.items()}
    with pytest.raises(TabreconError, match="missing"):
        reconstruct_from_measurements(r.measurements.drop("variance"), g.geoids)
    with pytest.raises(TabreconError, match="unknown query"):
        reconstruct_from_measurements(r.measurements.with_columns(pl.lit("ages").alias("query")), g.geoids)


def test_parents_in_parallel_keep_the_invariants(county):
    """Two worker processes share each level's parents: same invariants, same exactness at a huge budget."""
    r = topdown(county, uniform_config(1e6), workers=2)
    assert len(r.records) == len(county) and not r.fallbacks
    assert min(tvd_by_level(county, r.records).values()) >= 0.999
