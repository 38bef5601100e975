"""Verified claims (generate-then-verify): every verified claim holds in the truth; varying blocks
are checked by proof."""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pytest

from tabrecon import claims as person_claims
from tabrecon import reconstruct
from tabrecon.attacks.certify import binned_type
from tabrecon.attacks.claims import certified as C
from tabrecon.attacks.claims.block import claim_keys
from tabrecon.engine.release import plan_release
from tabrecon.engine.solvers import SolverOptions
from tabrecon.interrupts import process_pool
from tabrecon.populations.persons import (
    COLUMNS,
    describe_claim,
    person_tables,
)
from tabrecon.runner import RunOptions
from tabrecon.schema import PERSONS, Microdata, person_units
from tabrecon.schema.registry import population
from tabrecon.tables.persons import tabulate


def truth_counts(truth: Microdata, claims: pl.DataFrame) -> np.ndarray:
    """The number of truth records of each claim's block that match it (vectorised by column
    subset), counted from the truth's own binned types."""
    binned = binned_type(truth.types)
    out = np.zeros(claims.height, dtype=np.int64)
    index = pl.DataFrame(
        {"block_geoid": truth.geoids.astype(str), "bi": np.arange(len(truth.geoids))}
    )
    cblock = (
        claims.select("block_geoid")
        .join(index, on="block_geoid", how="left", maintain_order="left")["bi"]
        .fill_null(-1)
        .to_numpy()
    )
    span = np.int64(1 << 20)  # above any key on the person claim columns (2 * 38 * 2**7)
    # each claim's row numbers by its columns, in one pass (not one scan of them per subset)
    groups = claims.select("columns").with_row_index("i").group_by("columns").agg("i")
    for names, rows in groups.iter_rows():
        cols = tuple(COLUMNS.index(n) for n in names.split(","))
        tkey = truth.block.astype(np.int64) * span + claim_keys(binned, PERSONS, cols)
        u, cnt = np.unique(tkey, return_counts=True)
        sel = np.asarray(rows, dtype=np.int64)
        ckey = cblock[sel] * span + claims["key"].to_numpy()[sel]
        pos = np.minimum(np.searchsorted(u, ckey), u.size - 1)
        out[sel] = np.where((u[pos] == ckey) & (cblock[sel] >= 0), cnt[pos], 0)
    return out


def run_claims(
    truth: Microdata,
    level: str,
    k: int = 10,
    done=None,
    workers: int = 1,
    tracts: int | None = None,
):
    """Every tract's claims (the first ``tracts`` in geoid order if given) with the claims
    collected (tracts spread over ``workers`` processes)."""
    if done is None:
        ts = tabulate(truth, "all" if level == "block+tract" else "block")
        run = reconstruct(ts, level, certify=True)
        rec, cert = run.records, run.blocks
    else:
        ts, rec, cert = done
    status = dict(zip(cert["block_geoid"].to_list(), cert["status"].to_list(), strict=True))
    split = plan_release(ts, population("persons"), level).split
    options = C.CertifiedClaimsOptions(level=level, k_solutions=k)
    tasks = C.tract_tasks(split, population("persons"), person_units(rec), status, options)
    chosen = [tasks[t] for t in sorted(tasks)[:tracts]]
    one = functools.partial(C.tract_claims, collect=True)
    if workers > 1:
        with process_pool(workers) as ex:
            out = list(ex.map(one, chosen))
    else:
        out = [one(t) for t in chosen]
    return ts, rec, cert, out


def test_varying_block_claims_are_verified_by_proof_and_true(two_solution_block):
    md = two_solution_block
    _, _, cert, out = run_claims(md, "block", k=20)
    assert cert.filter(pl.col("status") == "varies").height == 1
    res, persons, claims = out[0]
    assert res.candidates > 0 and res.verified_varying > 0 and res.proofs >= 1
    # every verified claim is true in the truth (and in the other solution)
    assert (truth_counts(md, claims) == claims["m"].to_numpy()).all()
    v = claims.filter(pl.col("block_geoid") == "990010001001001")
    texts = {
        describe_claim(tuple(COLUMNS.index(n) for n in c.split(",")), key, m)
        for c, key, m in v.select("columns", "key", "m").iter_rows()
    }
    # "exactly 1 person: male, age 30-34, white" is false in the other solution (white+aian aged
    # 30-34)
    # but "exactly 2 persons: male, white, not hispanic" holds in both
    assert "exactly 2 persons: male, not Hispanic, white" in texts
    assert not any("age 30-34" in t and "black" in t and "not black" not in t for t in texts)
    # both persons are singled out (e.g. "exactly 1 person: age 30-34"), but never with their race
    # beyond what both solutions share
    single = persons.filter(pl.col("block_geoid") == "990010001001001")
    assert single["min_k"].is_not_null().all()
    assert not any(" black" in t or " aian" in t for t in single["claim"].to_list())


def test_unverifiable_candidate_is_refuted_by_the_proof(two_solution_block):
    # generate from one solution only (K = 1): candidates include claims false in the other
    # solution, and the proof must refute them rather than verify them
    md = two_solution_block
    _, _, _, out = run_claims(md, "block", k=1)
    res, _, claims = out[0]
    assert res.candidates > res.verified_varying
    assert (truth_counts(md, claims) == claims["m"].to_numpy()).all()


@pytest.mark.realdata
def test_real_block_only_every_verified_claim_is_true(real_md, real_tables, real_certs):
    """On the sample's first six tracts (1.42 million verified claims, 6 s on two workers; the
    property is tract by tract, and all 28 tracts took 70 s of the suite)."""
    rec, cert = real_certs["block"]
    _, rec, _, out = run_claims(
        real_md, "block", k=10, done=(real_tables, rec, cert.blocks), workers=2, tracts=6
    )
    n_claims = n_single = 0
    persons_k = np.zeros(9, dtype=np.int64)
    tt = np.array([g[:11] for g in real_md.geoids])[real_md.block]
    for res, _persons, claims in out:
        assert res.status == "ok"
        got = truth_counts(real_md.take(tt == res.unit), claims)
        assert (got == claims["m"].to_numpy()).all()
        n_claims += claims.height
        n_single += int((claims["m"] == 1).sum())
        persons_k += np.array(res.persons_k)
    assert n_claims > 1_000_000 and n_single > 100_000
    # uniques on the full binned key are singled out by a 9-column claim in certified blocks
    assert persons_k[8] > 0 and persons_k.max() <= len(rec)


def test_claims_run_is_written_per_tract_and_resumes(tmp_path):
    from tabrecon.errors import TabreconError
    from tabrecon.records.synth import SynthConfig, synthesize

    md = synthesize(SynthConfig(persons=600), seed=3)
    ts = tabulate(md, "block")
    done = reconstruct(ts, "block", certify=True)  # the zero test is all claims need
    rec, cert = done.records, done.blocks
    assert (cert["status"] == "varies").any() and (cert["status"] == "unique").any()
    run = person_claims(ts, rec, cert, "block", k_solutions=5, run=RunOptions(out=tmp_path))
    assert not run.failed and run.persons.height == len(rec)
    by_k = run.by_k()
    s = run.summary()
    assert s["persons_singled_out"] == run.persons["min_k"].is_not_null().sum()
    assert (by_k["persons_covered"] <= s["persons_singled_out"]).all()
    status = (tmp_path / "claims.parts" / "status.jsonl").read_text().splitlines()
    assert len(status) == len(ts.tracts())
    again = person_claims(
        ts, rec, cert, "block", k_solutions=5, run=RunOptions(out=tmp_path)
    )  # resumes: nothing recomputed
    assert len((tmp_path / "claims.parts" / "status.jsonl").read_text().splitlines()) == len(status)
    assert again.summary() == s
    with pytest.raises(TabreconError, match="no certification result"):
        one_short = cert.filter(pl.col("block_geoid") != cert["block_geoid"][0])
        person_claims(ts, rec, one_short, "block")


def test_a_tract_whose_diverse_solves_all_time_out_still_verifies_the_same_claims(
    two_solution_block, monkeypatch
):
    """The random-objective solves only cut the candidates down: when none finds a population
    in its time (a loaded machine, a hard tract) the tract goes on from the reconstruction
    alone and verifies the same claims (a verified claim holds in every population, so it is a
    candidate whatever the solutions). It was refused as "is the reconstruction from these
    tables?"."""
    md = two_solution_block
    done = run_claims(md, "block", k=20)
    want = done[3][0][2].sort("block_geoid", "columns", "key", "m")
    from tabrecon.attacks.claims import tract as unit_claims_tract

    monkeypatch.setattr(unit_claims_tract, "generate", lambda *a, **k: ([], True, False))
    res, _, claims = run_claims(md, "block", k=20, done=done[:3])[3][0]
    assert res.status == "ok" and res.solutions == 1, res.message
    assert claims.sort("block_geoid", "columns", "key", "m").equals(want)


def test_generated_solutions_say_when_the_program_is_infeasible():
    """The random solutions both claim paths start from (:func:`unit_claims.generate`): none
    and a proof of infeasibility where no population fits; else K distinct draws, each a
    solution."""
    import scipy.sparse as sp

    from tabrecon.attacks.claims.block import generate
    from tabrecon.engine.proofs import Extensible
    from tabrecon.engine.solvers import IntProgram

    opts = SolverOptions()
    bad = IntProgram(
        A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([3]), hi=np.array([3]), ub=np.array([1, 1])
    )
    rng = np.random.default_rng(0)
    assert generate(Extensible(bad, opts), 4, rng, opts, None, 0.0) == ([], False, True)
    good = IntProgram(
        A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([1]), hi=np.array([1]), ub=np.array([1, 1])
    )
    sols, short, infeasible = generate(Extensible(good, opts), 4, rng, opts, None, 0.0)
    assert not infeasible and not short and len(sols) == 4
    assert all(int(s.sum()) == 1 for s in sols)


def test_a_solution_found_before_the_search_stops_is_kept():
    """Where the relaxation's vertex is not integer, CP-SAT is asked for *a* solution under the
    random objective, not its optimum: a search stopped at its work limit with a solution in
    hand gives that solution (a tract program of two household blocks: no proven optimum in
    20 s, a first solution at 0.5 deterministic seconds; claims took 27-32 s, then 14 s)."""
    import scipy.sparse as sp

    from tabrecon.attacks.claims import block as unit_claims
    from tabrecon.engine.proofs import Extensible
    from tabrecon.engine.solvers import IntProgram, Solution, SolveStatus

    opts = SolverOptions()
    prog = IntProgram(
        A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([1]), hi=np.array([1]), ub=np.array([1, 1])
    )
    base = Extensible(prog, opts)
    asked = []

    class Fractional:
        def vertex(self, c):
            return None  # as if every vertex were fractional

    def stopped(c=None, maximize=False, opts=None, work_limit=None):
        asked.append(work_limit)
        return Solution(SolveStatus.TIMEOUT, np.array([0, 1]), -1.0, -2.0, 0.5, "cpsat")

    base._relaxation = Fractional()
    base.solve_base = stopped
    rng = np.random.default_rng(0)
    sols, short, infeasible = unit_claims.generate(base, 3, rng, opts, None, 0.0)
    assert [s.tolist() for s in sols] == [[0, 1]] and not short and not infeasible
    assert asked == [unit_claims.GENERATE_WORK]  # the search is capped, and asked for once


def _sorted(claims: pl.DataFrame | None) -> pl.DataFrame:
    cols = ["block_geoid", "columns", "key", "m"]
    if claims is None:
        return pl.DataFrame(
            schema={"block_geoid": pl.String, "columns": pl.String, "key": pl.Int64, "m": pl.Int64}
        )
    return claims.select(cols).sort(cols)


def test_a_tract_that_reaches_its_time_limit_keeps_only_claims_it_verified():
    """A tract stopped by its time limit (``tract_seconds``) keeps what it proved and says so:
    its certified blocks' claims (one proof covers them, no search) and the claims about its
    varying blocks verified before the limit, each of them one the unlimited run verifies (so
    true); the rest of its candidates are not claimed. The run counts such tracts apart from
    failures. Before, a tract had no limit: a household tract ran 15 min with nothing kept."""
    import dataclasses

    from tabrecon.records.synth import SynthConfig, synthesize

    md = synthesize(SynthConfig(persons=1000), seed=7)  # 9 of 17 blocks vary (3,000: 28 s)
    ts, rec, cert, full = run_claims(md, "block")
    status = dict(zip(cert["block_geoid"].to_list(), cert["status"].to_list(), strict=True))
    split = plan_release(ts, population("persons"), "block").split
    options = C.CertifiedClaimsOptions(level="block", k_solutions=10)
    tasks = list(
        C.tract_tasks(split, population("persons"), person_units(rec), status, options).values()
    )
    assert any(t.certified.any() and (~t.certified).any() for t in tasks)
    for (res_full, _, claims_full), task in zip(full, tasks, strict=True):
        want = _sorted(claims_full)
        certified = set(task.geoids[task.certified].tolist())
        # no time at all: the certified blocks' claims alone, the tract marked
        res, records, claims = C.tract_claims(dataclasses.replace(task, seconds=1e-9), True)
        got = _sorted(claims)
        assert res.status == "ok" and records.height == task.block.size
        assert res.complete == (res_full.varying_blocks == 0), res.message
        assert res.verified_varying == 0
        assert got.equals(want.filter(pl.col("block_geoid").is_in(list(certified))))
        if not res.complete:
            assert "time limit" in res.message
        # some time: whatever it verified, the unlimited run verified too
        res, _, claims = C.tract_claims(dataclasses.replace(task, seconds=0.5), True)
        got = _sorted(claims)
        assert got.join(want, on=got.columns, how="anti").is_empty()
        if res.complete:  # finished within it: the same claims as without a limit
            assert got.equals(want)
    run = person_claims(ts, rec, cert, "block", k_solutions=10, tract_seconds=1e-9)
    s = run.summary()
    assert not run.failed and s["incomplete_tracts"] == len(run.incomplete) > 0
    assert any("stopped before every candidate" in line for line in run.summary_lines())
    with pytest.raises(Exception, match="tract_seconds must be a positive number"):
        C.CertifiedClaimsOptions(tract_seconds=0)


def test_a_tract_whose_proofs_stop_without_a_time_limit_says_why(two_solution_block, monkeypatch):
    """Proofs can stop short with no tract time limit too (a proof at the solver's limit, the
    rounds run out): the tract keeps what was proven and its message names that cause, not a
    time limit it was never given."""
    import dataclasses

    from tabrecon.attacks.claims import tract as unit_claims_tract

    ts, rec, cert, _ = run_claims(two_solution_block, "block", k=5)
    real = unit_claims_tract.tract_verdicts
    monkeypatch.setattr(
        C, "tract_verdicts", lambda *a, **k: dataclasses.replace(real(*a, **k), complete=False)
    )
    res, _, _ = run_claims(two_solution_block, "block", k=5, done=(ts, rec, cert))[3][0]
    assert res.status == "ok" and not res.complete
    assert "solver's time limit or their rounds ran out" in res.message


@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_claims_in_the_engines_tract_programs_are_true_of_the_truth(level):
    """The claims are proven in the count program written over the schema
    (:func:`~tabrecon.engine.tract.program_of_tract`: at block+tract, block
    variables over classes of ages and the tract's over single years): on a synthetic county
    every verified claim, of certified and of varying blocks, counts its block's true records
    exactly, and varying blocks have verified claims. (1,000 persons in 17 blocks, 7 to 9 of
    them varying: about 84,000 claims verified about them, 4 s; 3,000 persons took 20 s.)"""
    from tabrecon.records.synth import SynthConfig, synthesize

    md = synthesize(SynthConfig(persons=1000), seed=7)
    _ts, _rec, cert, out = run_claims(md, level)
    found = pl.concat([c for _, _, c in out if c is not None])
    assert (cert["status"] == "varies").sum() >= 5
    assert sum(r.verified_varying for r, _, _ in out) > 10_000
    assert (truth_counts(md, found) == found["m"].to_numpy()).all()


def test_person_claim_columns_are_the_nine_of_liu_et_al():
    """The person schema declares its claim columns (sex, agebin38, Hispanic origin, six race
    flags); every type's values equal the direct formulas."""
    from tabrecon.schema import AGEBIN_OF_AGE, N_TYPES, PERSONS, RACE_BITS, decode_types

    t = np.arange(N_TYPES)
    sex, age, race, hisp = decode_types(t)
    flags = (RACE_BITS[race - 1][:, None] >> np.arange(6)) & 1
    want = np.column_stack([sex, AGEBIN_OF_AGE[age], hisp, flags])
    assert COLUMNS == (
        "sex",
        "agebin",
        "hispanic",
        "white",
        "black",
        "aian",
        "asian",
        "nhpi",
        "sor",
    )
    assert (PERSONS.claim_values(t) == want).all()


def test_a_claim_that_repeats_a_block_cell_by_other_columns_is_trivial():
    """ "Not black, not AIAN, not Asian, not NHPI, not some other race" counts exactly the
    persons of "White alone" (P3, P8, P12A's total): trivial, though no column says white. The
    person path recognised only the race columns all set or one race included, and claimed
    such claims as findings (207 distinct predicates on the sample's tracts)."""
    from tabrecon.attacks.claims import block as U
    from tabrecon.tables.spec import compiled

    names = tuple(t.name for t in person_tables() if t.level == "block")
    cols = tuple(COLUMNS.index(n) for n in ("black", "aian", "asian", "nhpi", "sor"))
    cells = compiled(population("persons"), names)[0]
    trivial = U._trivial_cells(population("persons"), names, cols)
    assert {cells[c].id for c in trivial[0]} == {"P0030002", "P0080003", "P012A001"}
    assert describe_claim(cols, 0, 2) == (
        "exactly 2 persons: not black, not aian, not asian, not nhpi, not sor"
    )
