"""Linear reconstruction lab: decoders, the JASON experiments' machinery, randomized response,
mechanisms."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from tabrecon.attacks.linear import (
    decode_exact,
    decode_lp,
    decode_lsq,
    fraction_recovered,
    make_instance,
    prove_unique,
    queries_needed,
)
from tabrecon.defenses import randomized_response as rr
from tabrecon.defenses.mechanisms import (
    compose,
    discrete_gaussian,
    discrete_laplace,
    rho_to_epsilon,
    tvd_accuracy,
)
from tabrecon.errors import TabreconError
from tabrecon.lab.dn import queries_needed_vs_n, recovery_vs_queries


def test_noiseless_lsq_and_lp_recover_with_enough_queries():
    inst = make_instance(200, 200, np.random.default_rng(1))
    assert (decode_lsq(inst.Q, inst.a) == inst.x).all()
    assert (decode_lp(inst.Q, inst.a) == inst.x).all()
    few = inst.first(40)  # far below n/2: least squares cannot pin every bit
    assert fraction_recovered(few, "lsq") < 1.0


def test_exact_decoder_proves_uniqueness_or_says_ambiguous():
    inst = make_instance(30, 30, np.random.default_rng(2))
    r = decode_exact(inst.Q, inst.a, time_limit=20)
    assert r.unique and (r.x == inst.x).all()
    amb = decode_exact(inst.Q[:3], inst.a[:3], time_limit=20)  # 3 answers cannot determine 30 bits
    assert amb.status == "ambiguous" and not amb.unique


def test_exact_needs_fewer_queries_than_least_squares():
    for seed in range(3):
        inst = make_instance(40, 40, np.random.default_rng([7, seed]))
        m_exact = queries_needed(inst, "exact", time_limit=20)
        m_lsq = queries_needed(inst, "lsq")
        assert m_exact is not None and m_lsq is not None and m_exact < m_lsq
        assert m_exact <= 0.5 * 40


def test_queries_needed_slope_near_half(tmp_path):
    slopes = queries_needed_vs_n(tmp_path, [40, 80, 120, 160], trials=2)  # 0.43; 2.7 s
    assert 0.35 < slopes["lsq"] < 0.65  # the acceptance run (n = 100..1000) is in the README
    assert (tmp_path / "queries_needed.png").stat().st_size > 0


def test_sweeps_write_rows_as_they_go_and_resume(tmp_path):
    recovery_vs_queries(tmp_path, n=50, ms=[10, 25, 40], trials=2)
    rows = pl.read_csv(tmp_path / "recovery_vs_queries.csv")
    assert rows.height == 6
    recovery_vs_queries(tmp_path, n=50, ms=[10, 25, 40, 50], trials=2)  # only the new m is computed
    again = pl.read_csv(tmp_path / "recovery_vs_queries.csv")
    assert again.height == 8 and again.head(6).equals(rows)


def test_bad_sizes_are_refused_with_what_fits():
    with pytest.raises(TabreconError, match="positive"):
        make_instance(0, 10, np.random.default_rng(0))
    with pytest.raises(TabreconError, match="at most m ="):
        make_instance(1_000_000, 1_000_000, np.random.default_rng(0))
    with pytest.raises(TabreconError, match="epsilon"):
        make_instance(10, 10, np.random.default_rng(0), "laplace", epsilon=0)


@pytest.mark.parametrize("rho", [0.05, 0.5, 2.0])
def test_discrete_gaussian_variance_is_one_over_rho(rho):
    m = discrete_gaussian(rho)  # bounded DP on a histogram: L2 sensitivity sqrt(2), sigma^2 = 1/rho
    assert m.rho == pytest.approx(rho) and m.opendp_privacy() == pytest.approx(rho)
    n = 20_000
    v = np.var(m.sample(n), ddof=1)
    target = 1 / rho
    # sd of a sample variance ~ sigma^2 sqrt(2/(n-1)); exact discrete variance differs from 1/rho by
    # < 1e-3 here
    assert abs(v - target) < 5 * target * math.sqrt(2 / (n - 1)) + abs(m.variance - target)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
def test_discrete_laplace_variance_matches_its_law(eps):
    m = discrete_laplace(eps)
    assert m.epsilon == pytest.approx(eps) and m.opendp_privacy() == pytest.approx(eps)
    n = 20_000
    x = m.sample(n)
    v = np.var(x, ddof=1)
    kurt_sd = m.variance * math.sqrt(
        (6 + 2) / n
    )  # Laplace excess kurtosis 3: Var(s^2) ~ sigma^4 (2 + 3) / n
    assert abs(v - m.variance) < 5 * kurt_sd
    assert abs(m.variance - 2 / eps**2) / (2 / eps**2) < 0.1  # the discrete law is close to 2/eps^2


def test_privacy_accounting_known_values():
    assert rho_to_epsilon(2.5562, 1e-10) == pytest.approx(17.14, abs=0.01)
    from tabrecon.defenses.mechanisms import epsilon_to_rho

    assert epsilon_to_rho(17.14, 1e-10) == pytest.approx(2.5562, abs=0.002)  # the inverse
    for rho in (0.01, 1.0, 4.9622, 50.0):
        assert rho_to_epsilon(epsilon_to_rho(rho_to_epsilon(rho))) == pytest.approx(
            rho_to_epsilon(rho), rel=1e-6
        )
    assert rho_to_epsilon(0.0749, 1e-10) == pytest.approx(2.47, abs=0.01)
    assert rho_to_epsilon(4.9622, 1e-10, "bun-steinke") == pytest.approx(26.34, abs=0.01)
    assert compose([discrete_gaussian(0.5), discrete_gaussian(1.5)])["rho"] == pytest.approx(2.0)
    with pytest.raises(TabreconError):
        discrete_gaussian(0)
    assert tvd_accuracy(np.array([1, 3]), np.array([2, 2])) == pytest.approx(0.75)


def test_randomized_response_simulation_matches_closed_forms():
    rng = np.random.default_rng(0)
    reps, n, pi = 4000, 500, 0.3
    for eps in (0.5, 2.0):
        rho = rr.rho_for_epsilon(eps)
        assert rr.epsilon(rho) == pytest.approx(eps)
        est = rr.simulate(pi, rho, n, reps, rng)
        var = rr.variance(pi, rho, n)
        # the mean of reps estimates has sd sqrt(var/reps); a sample variance has relative sd
        # sqrt(2/(reps-1))
        assert abs(est.mean() - pi) < 4 * math.sqrt(var / reps)
        assert abs(est.var(ddof=1) / var - 1) < 4 * math.sqrt(2 / (reps - 1)) + 0.01
    assert rr.accuracy_loss(pi, 0.5, n) < rr.accuracy_loss(pi, 0.9, n) <= 0
    with pytest.raises(TabreconError):
        rr.epsilon(0.0)


def test_exact_without_proof_says_unproven_and_prove_unique_settles_it():
    inst = make_instance(40, 30, np.random.default_rng(4))
    r = decode_exact(inst.Q, inst.a, time_limit=20, prove=False)
    assert r.status == "unproven" and not r.unique and (r.x == inst.x).all()
    assert prove_unique(inst.Q, inst.a, r.x, time_limit=20) == "unique"
    # with 3 answers many databases give the same: CP-SAT finds another
    assert prove_unique(inst.Q[:3], inst.a[:3], inst.x, time_limit=20) == "ambiguous"


def test_exact_sweep_records_whether_the_attacker_could_prove_it(tmp_path):
    queries_needed_vs_n(
        tmp_path, [30, 40], trials=1, decoders=("lsq", "exact"), exact_time_limit=10
    )
    rows = pl.read_csv(tmp_path / "queries_needed.csv")
    ex = rows.filter(pl.col("decoder") == "exact")
    assert ex.height == 2 and set(ex["proof"].to_list()) <= {"unique", "timeout", "ambiguous"}
    assert (ex["m_needed"] > 0).all() and (rows["seconds"] >= 0).all()
