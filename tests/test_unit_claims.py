"""Generate-then-Verify over the housing-unit schema: every verified claim is true of the real
units, and claims one published cell reads off are dropped."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_run import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.attacks.claims.block import generate_then_verify
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.registry import Population, of_schema, population
from tabrecon.tables.spec import tabulate_units


def _county(seed: int):
    _, units = synthesize_households(SynthConfig(persons=800), seed=seed)
    geo = sorted(set(units.block_geoid.tolist()))
    size = {g: int((units.block_geoid == g).sum()) for g in geo}
    blocks = [g for g in geo if 3 <= size[g] <= 20][:3]
    return units, tabulate_units(units), blocks


@pytest.mark.parametrize("seed", [3, 4, 11])
def test_every_verified_claim_is_true_of_the_units(seed):
    units, long, blocks = _county(seed)
    res = generate_then_verify(
        long, population("households"), blocks=blocks, truth=units, k_solutions=5, k_values=(2, 3)
    )
    assert res.blocks.height == len(blocks)
    assert (res.blocks["verified"] <= res.blocks["candidates"]).all()
    if res.claims.height:
        assert (res.claims["true_matches"] == res.claims["m"]).all()
    assert res.claims.height == int(res.blocks["verified"].sum())


def test_claims_runs_verdict_is_the_uniqueness_proofs():
    """The claims run proves a block's uniqueness only where its generated solutions were all
    the same (two different ones witness that it varies): every block's verdict equals the
    proof's, unique blocks among them."""
    import polars as pl

    from tabrecon.attacks.claims.release import ClaimsOptions, release_claims
    from tabrecon.engine.reconstruct import reconstruct_units

    _, units = synthesize_households(SynthConfig(persons=400), seed=5)
    long = tabulate_units(units)
    size = long.filter(pl.col("cell") == "H0010001")
    big = size.filter(pl.col("value") > 40)["geoid"]  # one block of 643 units: 50 s of proofs
    long = long.filter(~pl.col("geoid").is_in(big.implode()))
    assert size.height - big.len() == 9
    run = release_claims(
        long,
        population("households"),
        ClaimsOptions(k_values=(2,), k_solutions=4, block_seconds=None),
    )
    proof = reconstruct_units(long, population("households"), tables=run.tables)
    both = run.blocks.join(proof.blocks.select("geoid", "status"), on="geoid", suffix="_proof")
    assert both.height == proof.blocks.height
    assert (both["reconstruction"] == both["status_proof"]).all(), both
    assert {"unique", "varies"} <= set(both["reconstruction"].to_list())  # both kinds occur
    assert both.filter(pl.col("reconstruction") == "undecided").is_empty()


def test_claims_a_single_cell_reads_off_are_dropped():
    """Tenure, vacancy status, size and householder race are each one published table (H3-H6,
    H13): no claim on one of those columns alone is a finding."""
    units, long, blocks = _county(3)
    res = generate_then_verify(
        long, population("households"), blocks=blocks, truth=units, k_solutions=3, k_values=(1,)
    )
    published = {"tenure", "vacancy_status", "household_size", "householder_race"}
    assert not set(res.claims["columns"].to_list()) & published if res.claims.height else True


def test_figures_by_k_count_the_units_claims_single_out():
    """Singled-out units are exactly the units matching a verified singleton claim (one each,
    all distinct per claim), never more than the units any verified claim covers; baselines
    are probabilities; readable values name every column of the claim."""
    from tabrecon.attacks.claims.release import ReleaseClaimsRun, matching_units

    units, long, blocks = _county(4)
    res = generate_then_verify(
        long,
        population("households"),
        blocks=blocks,
        truth=units,
        k_solutions=5,
        k_values=(2, 3, 4),
    )
    fig = ReleaseClaimsRun.of(res, population("households"), (2, 3, 4), 5, units).by_k()
    c = res.claims
    assert fig["k"].to_list() == [2, 3, 4] and (fig["blocks"] == len(blocks)).all()
    for row in fig.iter_rows(named=True):
        k = row["k"]
        singles = c.filter((c["k"] == k) & (c["m"] == 1))
        assert row["verified_singletons"] == singles.height
        assert row["blocks_with_singleton"] == singles["geoid"].n_unique()
        # each verified singleton matches exactly one true unit: the units singled out
        hits = matching_units(singles, units)
        assert all(h.size == 1 for h in hits)
        assert row["units_singled_out"] == len({int(h[0]) for h in hits})
        assert row["units_singled_out"] <= row["units_covered"]
        if singles.height:
            assert 0.0 <= row["baseline_median"] <= 1.0
    for row in c.iter_rows(named=True):
        assert [v.split("=")[0] for v in row["values"].split("; ")] == row["columns"].split(",")


def test_a_claim_no_single_table_publishes_is_found_and_proven():
    """Block of two households: an owner living alone (White) and a renting married couple with
    a child (Black). Published are the twelve tables SF1 2010 declares first (H1, H3-H7,
    H13-H17, P18): none crosses size with race (P28A does, so the full set is not used), yet H14
    and H16 together prove that exactly one household is a White 1-person household: a verified
    singleton."""
    import numpy as np

    from tabrecon.attacks.claims.release import ReleaseClaimsRun
    from tabrecon.schema.catalog import HOUSING_UNITS
    from tabrecon.schema.spec import Units

    g = "990010001001000"
    rows = [
        dict(tenure=1, vacancy_status=0, household_size=1, household_type=4,
             detailed_household_type=9, under_18=0, over_65=0, hispanic_householder=1,
             householder_age=4, householder_race=1),
        dict(tenure=3, vacancy_status=0, household_size=3, household_type=1,
             detailed_household_type=1, under_18=1, over_65=0, hispanic_householder=1,
             householder_age=3, householder_race=2),
    ]  # fmt: skip
    codes = {n: np.array([r[n] for r in rows]) for n in HOUSING_UNITS.names}
    units = Units(HOUSING_UNITS, np.array([g, g]), codes)
    twelve = ("H1", "H3", "H4", "H5", "H6", "H7", "H13", "H14", "H15", "H16", "H17", "P18")
    res = generate_then_verify(
        tabulate_units(units, twelve),
        population("households"),
        truth=units,
        k_solutions=5,
        k_values=(2,),
    )
    hit = res.claims.filter(res.claims["columns"] == "household_size,householder_race")
    assert "household_size=1-person household; householder_race=White alone" in hit["values"]
    assert (hit["m"] == 1).all() and (hit["true_matches"] == 1).all()
    # a claim that is a published statistic is not among them: occupied 1-person households
    # are H13's 1-person cell (every 1-person unit is occupied), although no table has both
    # columns; owners with a mortgage who are White are not (H14 counts all owners)
    values = res.claims["values"].to_list()
    assert "vacancy_status=occupied; household_size=1-person household" not in values
    assert "tenure=owned with a mortgage or a loan; householder_race=White alone" in values
    fig = (
        ReleaseClaimsRun.of(res, population("households"), (2,), 5, units).by_k().row(0, named=True)
    )
    assert fig["blocks_with_singleton_pct"] == 100.0 and fig["units_singled_out"] >= 1
    assert 0.0 <= fig["baseline_median"] <= 1.0


def test_a_block_out_of_time_keeps_its_verified_claims_and_says_so():
    """A block that reaches its time limit is reported as such, with the claims verified before
    the limit (all true), never dropped."""
    units, long, blocks = _county(11)
    res = generate_then_verify(
        long,
        population("households"),
        blocks=blocks,
        truth=units,
        k_solutions=3,
        k_values=(2, 3),
        block_seconds=1e-9,
    )
    assert res.blocks.height == len(blocks)
    assert set(res.blocks["status"].to_list()) == {"time-limit"}
    assert res.claims.height == int(res.blocks["verified"].sum())
    if res.claims.height:
        assert (res.claims["true_matches"] == res.claims["m"]).all()


def test_claims_proven_before_the_time_runs_out_are_kept(monkeypatch):
    """A block's candidates (every k) are proven together; when the proof stops short, the
    claims it had proven (those the relaxation settled) are kept, the rest dropped, and the
    block is marked at its time limit. The partial proof here is the full one with half its
    verdicts withheld, so every claim kept is one the full run verifies."""
    import numpy as np

    from tabrecon.attacks.claims import block as unit_claims
    from tabrecon.engine.proofs import FormProof

    units, long, blocks = _county(4)
    full = generate_then_verify(
        long, population("households"), blocks=blocks, truth=units, k_solutions=4, k_values=(2, 3)
    )
    real = unit_claims.prove_forms

    def stops_short(*args, **kwargs):
        proof = real(*args, **kwargs)
        kept = proof.verified & (np.arange(proof.verified.size) % 2 == 0)
        return FormProof(kept, proof.proofs, False)

    monkeypatch.setattr(unit_claims, "prove_forms", stops_short)
    cut = generate_then_verify(
        long, population("households"), blocks=blocks, truth=units, k_solutions=4, k_values=(2, 3)
    )
    with_claims = full.blocks.filter(full.blocks["candidates"] > 0)["geoid"].to_list()
    assert with_claims and set(
        cut.blocks.filter(cut.blocks["status"] == "time-limit")["geoid"]
    ) == set(with_claims)
    assert 0 < cut.claims.height < full.claims.height
    key = ["geoid", "k", "columns", "values", "m"]
    assert cut.claims.select(key).join(full.claims.select(key), on=key, how="anti").is_empty()
    assert (cut.claims["true_matches"] == cut.claims["m"]).all()
    assert cut.claims.height == int(cut.blocks["verified"].sum())


def test_contradictory_tables_mark_the_block_infeasible():
    """A block whose tables contradict each other (more occupied units than units) admits no
    solution: it is named, not skipped."""
    import polars as pl

    units, long, blocks = _county(3)
    b = blocks[0]
    bad = long.with_columns(
        pl.when((pl.col("geoid") == b) & (pl.col("cell") == "H0030002"))
        .then(pl.col("value") + 50)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    res = generate_then_verify(
        bad, population("households"), blocks=[b], k_solutions=2, k_values=(2,)
    )
    assert res.blocks.row(0, named=True)["status"] == "infeasible"
    assert res.claims.height == 0


def test_a_total_that_breaks_its_parts_makes_the_block_infeasible():
    """Generate-then-Verify solves with the rows no others imply (a total is the sum of its
    parts, so it is dropped); a total published inconsistent with its parts must still leave
    no solution, not be ignored."""
    import numpy as np
    import polars as pl

    from tabrecon.engine.model import block_program, block_tables
    from tabrecon.engine.proofs import independent_rows
    from tabrecon.tables.spec import tables_in

    units, long, blocks = _county(3)
    b = blocks[0]
    cells, W, geoids, V = block_tables(
        long, population("households"), tables_in(long, population("households"), "block")
    )
    v = V[list(geoids).index(b)]
    prog, adm = block_program(W, v, W.tocsc())
    # the program's rows: the block's cells but the zeros that no admissible type lies in
    rows = np.flatnonzero((W[:, adm].getnnz(axis=1) > 0) | (v != 0))
    assert rows.size == prog.n_rows
    total = [c.id for c in cells].index("H0010001")
    assert total in rows and not independent_rows(prog)[rows.tolist().index(total)]
    bad = long.with_columns(
        pl.when((pl.col("geoid") == b) & (pl.col("cell") == "H0010001"))
        .then(pl.col("value") + 1)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    res = generate_then_verify(
        bad, population("households"), blocks=[b], k_solutions=2, k_values=(2,)
    )
    assert res.blocks.row(0, named=True)["status"] == "infeasible"
    assert res.claims.height == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_the_rows_kept_imply_every_row_dropped(seed):
    """:func:`independent_rows` on random tables with totals and subtotals: the rows kept have
    the rank of all rows, every equality row dropped is a combination of the kept ones, and a
    row with a range is never dropped."""
    import numpy as np
    import scipy.sparse as sp

    from tabrecon.engine.proofs import independent_rows
    from tabrecon.engine.solvers import IntProgram

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    parts = (rng.random((int(rng.integers(1, 12)), n)) < 0.3).astype(float)
    sums = rng.integers(0, 2, size=(int(rng.integers(0, 6)), parts.shape[0])) @ parts
    A = np.vstack([parts, sums, np.ones((1, n))])[
        rng.permutation(parts.shape[0] + sums.shape[0] + 1)
    ]
    lo = np.zeros(A.shape[0], dtype=np.int64)
    hi = np.where(rng.random(A.shape[0]) < 0.2, 5, 0)
    keep = independent_rows(IntProgram(A=sp.csr_matrix(A), lo=lo, hi=hi, ub=np.full(n, 9)))
    assert keep[hi > 0].all()
    rank = np.linalg.matrix_rank
    assert rank(A[keep]) == rank(A)
    eq_kept = A[keep & (hi == 0)]
    for r in np.flatnonzero(~keep):
        assert rank(np.vstack([eq_kept, A[r]])) == rank(eq_kept)


# --------------------------------------------------------------------------------------------------
# tabrecon claims --schema households: the command's contract
# --------------------------------------------------------------------------------------------------


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(args, cwd)


@pytest.mark.slow
def test_household_claims_command_writes_the_study_layout_resumes_and_refuses_mixing(tmp_path):
    import polars as pl

    from tabrecon.schema.spec import write_units

    _, units = synthesize_households(SynthConfig(persons=250), seed=7)
    write_units(units, tmp_path / "u.parquet")
    long = tabulate_units(units)
    long.write_parquet(tmp_path / "t.parquet")
    args = ["claims", "t.parquet", "--schema", "households", "--k", "2,3", "-K", "3"]
    args += ["--block-time-limit", "1", "--truth", "u.parquet", "--out", "c", "--workers", "2"]
    first = _cli(args, tmp_path)
    assert first.returncode == 0, first.stderr
    by_k = pl.read_csv(tmp_path / "c" / "households_by_k.csv")
    assert by_k["k"].to_list() == [2, 3]
    assert (by_k["units_singled_out"] <= by_k["units_covered"]).all()
    assert (tmp_path / "c" / "households_by_k.png").exists()
    blocks = pl.read_csv(tmp_path / "c" / "households_blocks.csv")
    assert blocks.height == long["geoid"].n_unique()  # every block reported
    assert set(blocks["reconstruction"].to_list()) <= {"unique", "varies", "undecided", "failed"}
    # the block time limit bounds the reconstruction too: one it cut short is at the limit
    cut = blocks.filter(pl.col("reconstruction") == "failed")
    assert (cut["status"] == "time-limit").all(), cut
    late = blocks.filter(pl.col("status") == "time-limit")["geoid"].to_list()
    assert all(f"block {g}: reached --block-time-limit 1 s" in first.stderr for g in late)
    claims = pl.read_csv(
        tmp_path / "c" / "households_claims.csv", schema_overrides={"geoid": pl.String}
    )
    assert claims.height == int(blocks["verified"].sum())
    # every verified claim is true of the units behind the tables
    from tabrecon.attacks.claims.release import matching_units

    hits = matching_units(claims, units)
    assert [h.size for h in hits] == claims["m"].to_list()
    status = tmp_path / "c" / "claims.parts" / "status.jsonl"
    done = status.read_text().splitlines()
    again = _cli(args, tmp_path)
    assert again.returncode == 0, again.stderr
    assert status.read_text().splitlines() == done  # resumed: no block redone
    other = _cli([*args[:-4], "-K", "4", "--out", "c"], tmp_path)
    assert other.returncode == 2 and "another run" in other.stderr, other.stderr
    assert "Traceback" not in other.stderr


def test_household_claims_command_names_the_identity_a_block_breaks(tmp_path):
    """A block whose tables contradict each other is named with an identity they break (the
    identities derived from the table declarations), and the run exits 1."""
    import polars as pl

    _, units = synthesize_households(SynthConfig(persons=250), seed=7)
    long = tabulate_units(units)
    g = long["geoid"][0]
    long.filter(pl.col("geoid") == g).with_columns(
        pl.when(pl.col("cell") == "H0040004").then(pl.col("value") + 1).otherwise("value")
    ).write_csv(tmp_path / "t.csv")
    run = _cli(["claims", "t.csv", "--schema", "households", "--k", "2", "-K", "2"], tmp_path)
    assert run.returncode == 1, run.stderr
    assert f"block {g}: its tables contradict each other" in run.stderr
    assert "H0030002 = H0040002 + H0040003 + H0040004 fails" in run.stderr


def test_household_claims_command_names_bad_input(tmp_path):
    (tmp_path / "t.csv").write_text(
        "geoid,cell,value\n990010001001000,H0010001,3\n990010001001000,H0030001,x\n"
    )
    bad = _cli(["claims", "t.csv", "--schema", "households"], tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "t.csv, line 3, column 'value'" in bad.stderr, bad.stderr
    persons = _cli(["claims", "t.csv"], tmp_path)  # each block's claims, of person tables
    assert persons.returncode == 2 and "Traceback" not in persons.stderr
    assert "holds no cells of the persons tables" in persons.stderr, persons.stderr
    assert "--schema households" in persons.stderr
    k = _cli(["claims", "t.csv", "--schema", "households", "--k", "five"], tmp_path)
    assert k.returncode == 2 and "--k" in k.stderr


@pytest.mark.parametrize(
    ("relax_after", "rows"), [(None, "all"), (0.0, "all"), (0.0, "kept"), (0.0, "kept-lp")]
)
def test_candidates_proven_together_are_those_proven_one_by_one(relax_after, rows):
    """Verification (``prove_forms``, shared with the person claims) searches for a solution
    breaking *any* candidate and repeats on the rest; it must verify exactly the candidates two
    separate proofs (Count <= m - 1, Count >= m + 1 both infeasible) verify -- also when the
    linear relaxation settles what it can before the search (``relax_after=0``), and every form
    the relaxation settles alone is one of them; and the same when the program is given only
    the rows no others imply (``kept``: to CP-SAT and the relaxation; ``kept-lp``: to the
    relaxation alone), as Generate-then-Verify gives it."""
    import numpy as np
    import scipy.sparse as sp

    from tabrecon.attacks.claims.block import claim_keys
    from tabrecon.engine.model import block_program, block_tables
    from tabrecon.engine.proofs import Extensible, Relaxation, independent_rows, prove_forms
    from tabrecon.engine.solvers import SolverOptions, solve
    from tabrecon.populations.households import housing_tables
    from tabrecon.schema.catalog import HOUSING_UNITS as S

    units, long, blocks = _county(3)
    _cells, W, geoids, V = block_tables(long, of_schema(S), tuple(t.name for t in housing_tables()))
    b = list(geoids).index(blocks[0])
    prog, adm = block_program(W, V[b], W.tocsc())
    x0 = solve(prog, SolverOptions(backend="cpsat")).x
    types = S.feasible_types()[adm]
    cands = []
    for cols in ((0, 2), (2, 8), (3, 9)):
        key = claim_keys(types, S, cols)
        for g in np.unique(key):
            members = np.flatnonzero(key == g)
            if x0[members].sum() >= 1:
                cands.append((cols, int(g), int(x0[members].sum()), members))
    full = prog
    kept = full.rows(independent_rows(full))
    assert kept.n_rows < full.n_rows
    cpsat = SolverOptions(backend="cpsat")
    given = {
        "all": Extensible(full, cpsat),
        "kept": Extensible(kept, cpsat),
        "kept-lp": Extensible(full, cpsat, lp=kept),
    }[rows]
    base = Extensible(prog, cpsat)  # the one-by-one proofs: every row
    rows_, cols_ = zip(*[(np.full(c[3].size, i), c[3]) for i, c in enumerate(cands)], strict=True)
    C = sp.csr_matrix(
        (np.ones(sum(r.size for r in rows_)), (np.concatenate(rows_), np.concatenate(cols_))),
        shape=(len(cands), prog.n_vars),
    )
    ms = np.array([c[2] for c in cands])
    proof = prove_forms(given, C, ms, [x0], relax_after=relax_after)
    together = proof.verified
    alone = []
    for _cols, _key, m, members in cands:
        row = sp.csr_matrix(
            (np.ones(members.size), (np.zeros(members.size), members)), shape=(1, prog.n_vars)
        )
        alone.append(
            all(
                base.solve(0, np.zeros(0, np.int64), row, np.array([lo]), np.array([hi])).status
                == "infeasible"
                for lo, hi in ((0, m - 1), (m + 1, 10**9))
            )
        )
    assert together.tolist() == alone
    assert proof.complete and 0 < sum(alone) < len(alone)  # both outcomes occur
    # in groups (a block's forms: is every one of them held?), a group is decided by one
    # refuted form: the same answer per group, in no more searches
    grp = np.array([((0, 2), (2, 8), (3, 9)).index(c[0]) for c in cands])
    grouped = prove_forms(given, C, ms, [x0], relax_after=relax_after, groups=grp)
    assert grouped.complete and grouped.proofs <= proof.proofs
    assert grouped.refuted is not None
    for g in range(3):
        held = all(np.array(alone)[grp == g])
        assert grouped.verified[grp == g].all() == held
        assert grouped.refuted[grp == g].any() != held
    settled, _, looked = Relaxation(prog).settled(C, ms)
    assert looked == len(cands)  # no time limit: every form looked at
    assert settled.any() and not (settled & ~np.array(alone)).any()
    assert Relaxation(kept).settled(C, ms)[0].tolist() == settled.tolist()


@pytest.mark.parametrize("backend", ["cpsat", "highs"])
def test_joint_proofs_leave_the_programs_solver_as_it_was(backend):
    """Joint proofs run on CP-SAT whatever the backend; a HiGHS-backed program's own solves stay
    on HiGHS afterwards."""
    import numpy as np
    import scipy.sparse as sp

    from tabrecon.engine.proofs import Extensible, prove_forms
    from tabrecon.engine.solvers import IntProgram, SolverOptions

    p = IntProgram(
        A=sp.csr_matrix(np.array([[1, 1, 0]])),
        lo=np.array([2]),
        hi=np.array([2]),
        ub=np.array([2, 2, 3]),
    )
    e = Extensible(p, SolverOptions(backend=backend))
    C = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1]]))
    assert prove_forms(e, C, np.array([2, 1, 0])).verified.tolist() == [True, False, False]
    none = sp.csr_matrix((0, 3), dtype=np.int64)
    assert e.solve(0, np.zeros(0, np.int64), none, np.zeros(0), np.zeros(0)).backend == backend


@dataclass(frozen=True)
class _Even:
    """A claim column derived from attribute 0: whether its position is even."""

    def __call__(self, pos):
        return 1 - pos[:, 0] % 2


def _toy_schema():
    from tabrecon.schema.spec import Attribute, AttributePosition, ClaimColumn, Schema

    a = Attribute("a", ((0, "x"), (1, "y"), (2, "z")))
    b = Attribute("b", ((0, "no"), (1, "yes")))
    on = (
        ClaimColumn("a", a.labels, AttributePosition(0)),
        ClaimColumn("b", b.labels, AttributePosition(1)),
        ClaimColumn("even", ("odd", "even"), _Even()),
    )
    return Schema("toy_claims", "thing", (a, b), claim_on=on)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n_sol: st.tuples(
            st.just(n_sol),
            st.lists(
                st.tuples(
                    st.integers(0, 2),
                    st.integers(0, 5),
                    st.lists(st.integers(0, 2), min_size=n_sol, max_size=n_sol),
                ),
                min_size=1,
                max_size=12,
            ),
        )
    )
)
def test_candidates_are_every_claim_stable_across_the_solutions(case):
    """:func:`~tabrecon.attacks.claims.block.candidates` (keys of several groups at once, claim
    columns declared, one derived) against enumeration: every (group, columns, values) whose
    count is the same m >= 1 in every solution, with every key of its group it counts."""
    import itertools

    import numpy as np

    from tabrecon.attacks.claims.block import candidates

    n_sol, keys = case
    S = _toy_schema()
    group = np.array([g for g, _, _ in keys])
    types = np.array([t for _, t, _ in keys])
    X = np.array([x for _, _, x in keys]).T.reshape(n_sol, len(keys))
    values = S.claim_values(types)
    things = Population(name="toy_claims", schema=S, noun="things", tables=tuple)
    got = candidates(things, (), (1, 2, 3), X, values, group)
    assert got.members is not None
    lean = candidates(things, (), (1, 2, 3), X, values, group, members=False)
    assert lean.members is None and (lean.key == got.key).all() and (lean.first == got.first).all()
    used = X.any(axis=0)  # first: the first key some solution uses
    assert all(
        got.first[i] == next(j for j in got.members[i].indices.tolist() if used[j])
        for i in range(got.key.size)
    )
    found = {
        (
            int(got.group[i]),
            got.cols(i),
            int(got.key[i]),
            int(got.m[i]),
            tuple(got.members.indices[got.members.indptr[i] : got.members.indptr[i + 1]].tolist()),
        )
        for i in range(got.key.size)
    }
    sizes = [c.size for c in S.claim_columns]
    want = set()
    for g in np.unique(group).tolist():
        for k in (1, 2, 3):
            for cols in itertools.combinations(range(3), k):
                for v in itertools.product(*(range(sizes[c]) for c in cols)):
                    hit = (group == g) & (values[:, cols] == v).all(axis=1)
                    counts = X[:, hit].sum(axis=1)
                    if counts[0] >= 1 and (counts == counts[0]).all():
                        key = 0
                        for c, x in zip(cols, v, strict=True):
                            key = key * sizes[c] + x
                        want.add(
                            (g, cols, key, int(counts[0]), tuple(np.flatnonzero(hit).tolist()))
                        )
    assert found == want
    # by k, then subset, then group and key
    order = list(
        zip(got.k.tolist(), got.subset.tolist(), got.group.tolist(), got.key.tolist(), strict=True)
    )
    assert order == sorted(order)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=5, max_size=5), min_size=1, max_size=30))
def test_distinct_rows_groups_exactly_the_equal_rows(rows):
    """Candidates counting the same variables are proven once (:func:`_distinct_rows`): its
    groups are exactly the sets of equal rows (entries and values), each named by its first."""
    import numpy as np
    import scipy.sparse as sp

    from tabrecon.attacks.claims.block import _distinct_rows

    A = np.array(rows)
    first, of = _distinct_rows(sp.csr_matrix(A))
    want = {}
    for i, r in enumerate(map(tuple, A.tolist())):
        want.setdefault(r, i)
    assert first.tolist() == sorted(want.values())
    assert [int(first[j]) for j in of] == [want[tuple(r)] for r in A.tolist()]


def test_claims_over_a_tract_program_are_those_of_each_block_alone():
    """Generate-then-Verify over one tract's program (:mod:`tabrecon.attacks.claims.tract`,
    what person claims run on) is written over the schema: at level "block" a tract's blocks
    side by side, given a reference population (here the truth) and no block known unique,
    verify exactly the claims each block's own Generate-then-Verify verifies (both are proofs;
    the solutions only narrow the candidates), and every singleton names the reference's one
    matching unit."""
    import numpy as np
    import polars as pl

    from tabrecon.attacks.claims.release import found_claims
    from tabrecon.attacks.claims.tract import tract_verdicts
    from tabrecon.engine.solvers import SolverOptions
    from tabrecon.tables.spec import tables_in
    from tabrecon.vocab import Level

    units, long, blocks = _county(4)
    geoids = np.array(sorted(blocks))
    tract = long.filter(pl.col("geoid").is_in(blocks))
    mine = np.flatnonzero(np.isin(units.block_geoid, geoids))
    tv = tract_verdicts(
        tract,
        population("households"),
        Level.BLOCK,
        tables_in(long, population("households"), "block"),
        (2, 3),
        geoids,
        np.searchsorted(geoids, units.block_geoid[mine]),
        units.types[mine],
        np.zeros(geoids.size, dtype=bool),
        k_solutions=5,
        seed=0,
        opts=SolverOptions(),
    )
    got = set()
    for cl, ok, first in tv.parts:
        for i in np.flatnonzero(ok).tolist():
            g, k, key, m = str(geoids[cl.group[i]]), int(cl.k[i]), int(cl.key[i]), int(cl.m[i])
            got.add((g, k, cl.cols(i), key, m))
            if cl.m[i] == 1:
                assert first[i] >= 0 and tv.y0[first[i]] == 1
    res = generate_then_verify(
        long, population("households"), blocks=blocks, k_solutions=5, k_values=(2, 3)
    )
    want = set(found_claims(res.claims, HOUSING_UNITS))
    assert got == want and want


def test_the_search_and_the_relaxation_take_turns_of_doubling_length(monkeypatch):
    """A verification search that does not answer within ``relax_after`` hands over to the
    linear relaxation for as long, then searches twice as long, and so on, until the
    relaxation has looked at every form: neither, where it is the slow one, costs much more
    than the other (a tract's 4,232 person claims took 75 s of relaxation, handed every form
    at once, where four searches took 4 s). Where the relaxation's forms left would take it
    under RELAX_FINISH turns at the pace it went, it finishes them at once. Pinned on
    stand-ins and a clock that only the relaxation moves (each form it looks at costs
    ``pace`` seconds): no real time is read."""
    from types import SimpleNamespace

    import numpy as np
    import scipy.sparse as sp

    from tabrecon.engine import proofs
    from tabrecon.engine.proofs import RELAX_FINISH, prove_forms
    from tabrecon.engine.solvers import Solution
    from tabrecon.vocab import SolveStatus

    clock = [0.0]
    monkeypatch.setattr(proofs, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    searches: list[float | None] = []
    turns: list[tuple[int, float | None]] = []
    pace = [20.0]

    def solve_some_differs(Ci, mi, limit):  # proves the rest only when given all its time
        searches.append(limit)
        return Solution(SolveStatus.TIMEOUT if limit else SolveStatus.INFEASIBLE, None)

    def settled(C, m, seconds):  # looks at one form a turn (all, untimed) and settles none
        turns.append((C.shape[0], seconds))
        looked = C.shape[0] if seconds is None else 1
        clock[0] += pace[0] * looked
        return np.zeros(C.shape[0], dtype=bool), [], looked

    base = SimpleNamespace(
        prog=SimpleNamespace(n_vars=3),
        solve_some_differs=solve_some_differs,
        relaxation=SimpleNamespace(settled=settled),
    )
    C, m = sp.csr_matrix(np.eye(3)), np.ones(3, dtype=np.int64)
    # a slow relaxation: what it leaves (2 forms, then 1) at 20 s each, more than RELAX_FINISH
    # turns of the search (1 s, then 2)
    assert 2 * pace[0] > RELAX_FINISH * 1.0 and pace[0] > RELAX_FINISH * 2.0
    proof = prove_forms(base, C, m, relax_after=1.0)
    assert proof.complete and proof.verified.all() and proof.proofs == 4
    assert searches == [1.0, 2.0, 4.0, None]  # the last: the relaxation has looked at all
    assert turns == [(3, 1.0), (2, 2.0), (1, 4.0)]  # each turn: the forms not yet looked at
    # under a time limit the last search gets what is left of it, not all time
    searches.clear()
    prove_forms(base, C, m, seconds=1e9, relax_after=1.0)
    assert searches[:3] == [1.0, 2.0, 4.0] and 0 < searches[3] < 1e9
    # a quick one finishes in its first turn: one search, then one more over what it left
    pace[0], searches[:], turns[:] = 0.5, [], []
    assert 2 * pace[0] <= RELAX_FINISH * 1.0
    proof = prove_forms(base, C, m, relax_after=1.0)
    assert proof.complete and searches == [1.0, None] and turns == [(3, 1.0), (2, None)]


@pytest.mark.parametrize("misses", [0, 3])
def test_relaxation_vertices_refute_many_forms_between_searches(monkeypatch, misses):
    """After a search finds a solution breaking some forms, verification draws vertices of the
    linear relaxation under random weights of the forms still open: each breaks many at once
    where a search's solution breaks a few (a 20,000-person tract: 62 searches of ~1 s, 2-11 of
    its 7,300 forms each, became 8). Until DIRECTED_MISSES draws in a row break none (a
    fractional vertex is a miss); the verdicts are the searches' own. Pinned on stand-ins: a
    search breaks one refutable form; a vertex is 1 on the refutable forms its weights favour,
    and every second one is fractional."""
    from types import SimpleNamespace

    import numpy as np
    import scipy.sparse as sp

    from tabrecon.engine import proofs
    from tabrecon.engine.proofs import prove_forms
    from tabrecon.engine.solvers import Solution
    from tabrecon.vocab import SolveStatus

    monkeypatch.setattr(proofs, "DIRECTED_MISSES", misses)
    n = 20
    refutable = np.arange(n) < 10  # forms x_i = 0; only the first ten can be broken
    searches, vertices = [], []

    def solve_some_differs(Ci, mi, limit):  # breaks the first open refutable form, one only
        searches.append(Ci.shape[0])
        open_ = np.flatnonzero(refutable & alive_of(Ci))
        if not open_.size:
            return Solution(SolveStatus.INFEASIBLE, None)
        x = np.zeros(n, dtype=np.int64)
        x[open_[0]] = 1
        return Solution(SolveStatus.OPTIMAL, x)

    def alive_of(Ci):  # the forms a search is given (rows of the identity)
        on = np.zeros(n, dtype=bool)
        on[Ci.indices] = True
        return on

    def vertex(c, maximize=False):  # the box's vertex: 1 where the weight is positive
        vertices.append(c)
        if len(vertices) % 2 == 0:
            return None  # fractional
        return ((np.asarray(c) > 0) & refutable).astype(np.int64)

    base = SimpleNamespace(
        prog=SimpleNamespace(n_vars=n),
        solve_some_differs=solve_some_differs,
        relaxation=SimpleNamespace(vertex=vertex),
    )
    C, m = sp.csr_matrix(np.eye(n, dtype=np.int64)), np.zeros(n, dtype=np.int64)
    pool: list[np.ndarray] = []
    proof = prove_forms(base, C, m, pool)
    assert proof.complete and proof.verified.tolist() == (~refutable).tolist()
    assert proof.refuted is not None and proof.refuted.tolist() == refutable.tolist()
    if not misses:
        assert len(searches) == 11 and not vertices  # one search a form, one proof
    else:
        assert len(searches) < 11 and vertices
        assert len(pool) > len(searches) - 1  # the vertices kept beside the searches' solutions
