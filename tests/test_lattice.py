"""Lattice finder for exact linear decoding: maximum-entropy marginals and bounded-distance
decoding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tabrecon.attacks import lattice
from tabrecon.attacks.linear import decode_exact, make_instance
from tabrecon.errors import TabreconError


def test_maxent_marginals_answer_the_queries_and_are_calibrated():
    inst = make_instance(200, 80, np.random.default_rng([3, 1]))
    p = lattice.maxent_marginals(inst.Q, inst.a)
    assert p is not None and np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(inst.Q @ p, inst.a, atol=1e-5)  # the answers, in expectation
    # a guess of the bits, better than chance below n/2 queries (80% right at n = 200, m = 80)
    assert ((p > 0.5) == inst.x).mean() > 0.7


def test_maxent_marginals_none_when_no_database_gives_the_answers():
    Q = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    assert lattice.maxent_marginals(Q, np.array([3.0, 1.0])) is None  # 3 ones among 2 bits


def test_embedding_puts_the_database_on_a_short_vector():
    inst = make_instance(40, 16, np.random.default_rng(5))
    Qi, ai = inst.Q.astype(np.int64), inst.a.astype(np.int64)
    p = lattice.maxent_marginals(Qi, ai)
    B, sw, off = lattice._embedding(Qi, ai, p, 0.05)
    v = np.append(inst.x, 1) @ B  # the combination (x, 1) of the basis rows
    assert not v[41:].any() and v[40] == lattice._SCALE  # Q x = a: the constraint block vanishes
    assert lattice._candidate(v[None, :], sw, off, Qi, ai) is not None


needs_fpylll = pytest.mark.skipif(not lattice.available(), reason=str(lattice.import_error()))


@needs_fpylll
def test_lattice_finds_the_database_below_half_n_queries():
    found = 0
    for t in range(3):
        inst = make_instance(120, 54, np.random.default_rng([11, t]))  # m = 0.45 n
        x = lattice.lattice_find(inst.Q, inst.a, time_limit=20)
        if x is not None:
            assert np.array_equal(inst.Q @ x, inst.a)  # whatever it returns answers the queries
            found += bool((x == inst.x).all())
    assert found >= 2


@pytest.mark.slow
@needs_fpylll
def test_exact_decoder_proves_what_the_lattice_found():
    inst = make_instance(90, 40, np.random.default_rng([11, 0]))
    # the limits are a wide margin, not a criterion: about 1 s on an idle 2-core machine (n = 120,
    # m = 54 took 23 s), and a loaded one must not turn a proof into a time-out
    r = decode_exact(inst.Q, inst.a, time_limit=600, finder="lattice", proof_time_limit=600)
    assert r.found_by == "lattice" and r.unique and (r.x == inst.x).all()


def test_exact_decoder_refuses_unknown_finder_and_lattice_with_noise():
    inst = make_instance(20, 10, np.random.default_rng(0))
    with pytest.raises(TabreconError, match="finder"):
        decode_exact(inst.Q, inst.a, finder="magic")
    with pytest.raises(TabreconError, match="noiseless"):
        decode_exact(inst.Q, inst.a, bound=1, finder="lattice")


def test_guesses_fix_the_surest_bits_then_flip_the_least_sure_first():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.0, 1.0, 120)
    plan = list(itertools.islice(lattice.guesses(p, m=20), 3 + 15 + 5))
    order = np.argsort(-np.abs(p - 0.5), kind="stable")
    # dimensions 80, 85, 90 left of n - m = 100: fix the 20, 15, 10 surest bits at their likelier
    # values
    for (F, v), k in zip(plan[:3], (20, 15, 10), strict=True):
        assert np.array_equal(F, order[:k]) and np.array_equal(v, (p[F] > 0.5).astype(int))
    F = order[:15]
    flipped = [np.flatnonzero(v != (p[F] > 0.5)) for _, v in plan[3:]]
    assert flipped[0].tolist() == [14]  # first, the least sure of the 15 alone
    odds = np.abs(np.log(p[F]) - np.log1p(-p[F]))
    costs = [odds[f].sum() for f in flipped]
    assert costs == sorted(costs)  # likeliest alternatives first
    assert list(lattice.guesses(p[:60], m=20)) == []  # full lattice small: nothing to guess


@needs_fpylll
def test_hybrid_step_alone_finds_the_database_at_0_4_n():
    # n = 200, m = 80: the full lattice (BKZ <= 30) misses this instance; fixing the 40 surest bits
    # leaves a lattice BKZ-20 solves. clips=() skips the full step, so the find is the guess's.
    inst = make_instance(200, 200, np.random.default_rng([0, 200, 3]))
    x = lattice.lattice_find(inst.Q[:80], inst.a[:80], time_limit=30, clips=())
    assert x is not None and np.array_equal(x, inst.x)
