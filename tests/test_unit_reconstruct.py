"""Reconstruction over the housing-unit schema: the tables of the reconstruction are the tables
reconstructed, and a block is called unique only when no other population fits."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.registry import population
from tabrecon.schema.spec import Units
from tabrecon.tables.spec import tables_in, tabulate_units
from tabrecon.vocab import Level


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tabulate_of_reconstruct_is_the_tables(seed):
    _, units = synthesize_households(SynthConfig(persons=600), seed=seed)
    long = tabulate_units(units)
    rec = reconstruct_units(long, population("households"))
    assert tabulate_units(rec.units).equals(long)
    assert (rec.blocks["status"] != "failed").all()
    per_block = units.to_frame().group_by("block_geoid").len().sort("block_geoid")["len"]
    assert rec.blocks.sort("geoid")["units"].to_list() == per_block.to_list()


def test_a_contradictory_block_is_named_alone_and_its_tract_answered():
    """At block level small blocks of a tract share one program (persons at agebin38: a few
    dozen variables each); when one block's cells contradict each other, that block alone is
    named infeasible and every other block of its group is still reconstructed and answered
    (the group is retried block by block)."""
    from tabrecon.engine.model import GROUP_VARS
    from tabrecon.records.synth import synthesize
    from tabrecon.schema import PERSONS_BINNED, person_units

    md = synthesize(SynthConfig(persons=800), seed=3)
    long = tabulate_units(person_units(md, binned=True))
    blocks = sorted(set(long["geoid"].to_list()))
    bad = blocks[0]
    mates = [b for b in blocks[1:] if b[:11] == bad[:11]]
    assert len(mates) >= 5 and GROUP_VARS >= 500  # the bad block shares its program
    # one more person in the block's total (P1) than its sex-by-age cells hold
    broken = long.with_columns(
        pl.when((pl.col("geoid") == bad) & (pl.col("cell") == "P0010001"))
        .then(pl.col("value") + 1)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    rec = reconstruct_units(broken, population("persons_binned"))
    status = dict(zip(rec.blocks["geoid"], rec.blocks["status"], strict=True))
    assert status[bad] == "infeasible"
    assert all(status[b] in ("unique", "varies") for b in mates)
    good = rec.units.block_geoid != bad
    kept = Units(
        PERSONS_BINNED,
        rec.units.block_geoid[good],
        {k: v[good] for k, v in rec.units.codes.items()},
    )
    assert tabulate_units(kept).equals(long.filter(pl.col("geoid") != bad))


def test_published_empty_blocks_are_answered_beside_inhabited_ones():
    """Published tables list empty blocks too (every cell 0). Sharing a program with inhabited
    blocks of their tract, last in it or alone, they are reconstructed empty and unique."""
    from tabrecon.records.synth import synthesize
    from tabrecon.schema import person_units

    md = synthesize(SynthConfig(persons=300), seed=2)
    long = tabulate_units(person_units(md, binned=True))
    last = max(g for g in long["geoid"].to_list() if len(g) == 15)
    empty = [last[:-4] + "9998", last[:-4] + "9999"]  # after every block of the last tract
    cells = long.filter(pl.col("geoid") == last).select("cell")
    zeros = pl.concat(
        [
            cells.with_columns(geoid=pl.lit(g), value=pl.lit(0, dtype=long["value"].dtype))
            for g in empty
        ]
    ).select(long.columns)
    rec = reconstruct_units(
        pl.concat([long, zeros]), population("persons_binned"), ReconstructOptions(distance=True)
    )
    got = rec.blocks.filter(pl.col("geoid").is_in(empty))
    assert got["status"].to_list() == ["unique", "unique"]
    assert got["units"].to_list() == [0, 0] and got["solvar"].to_list() == [0.0, 0.0]
    assert tabulate_units(rec.units).equals(long)


def _units(rows: list[tuple[str, dict]]) -> Units:
    names = HOUSING_UNITS.names
    codes = {n: np.array([r[n] for _, r in rows], dtype=np.int64) for n in names}
    return Units(HOUSING_UNITS, np.array([g for g, _ in rows]), codes)


VACANT = {n: 0 for n in HOUSING_UNITS.names}
OCCUPIED = dict(
    tenure=1,
    vacancy_status=0,
    household_size=2,
    household_type=1,
    detailed_household_type=2,
    under_18=0,
    over_65=0,
    hispanic_householder=1,
    householder_age=4,
    householder_race=1,
)


def test_a_block_is_unique_only_when_no_other_population_fits():
    """A block of vacant units is determined by H5 (every other column is 'not applicable');
    a married couple's block is not (the tables leave its children and ages over 65 open)."""
    a, b = "990010001001000", "990010001001001"
    units = _units(
        [
            (a, {**VACANT, "vacancy_status": 1}),
            (a, {**VACANT, "vacancy_status": 5}),
            (a, {**VACANT, "vacancy_status": 5}),
            (b, OCCUPIED),
        ]
    )
    rec = reconstruct_units(tabulate_units(units), population("households"))
    status = dict(zip(rec.blocks["geoid"], rec.blocks["status"], strict=True))
    assert status == {a: "unique", b: "varies"}
    got = rec.units.to_frame().filter(pl.col("block_geoid") == a)["vacancy_status"]
    assert sorted(got.to_list()) == [1, 5, 5]


def test_tract_tables_join_a_tracts_blocks_in_one_model():
    """Persons at block+tract over the schema: the tract tables (PCT12, PCT12A-O) constrain the
    sum of a tract's blocks; the reconstruction tabulates back to every block and tract cell,
    and every block unique from its block tables stays unique with the tract's."""
    import polars as pl

    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import AGEBIN_OF_AGE, person_units

    units = person_units(synthesize(SynthConfig(persons=1_200), seed=3))
    # the counts (median ages, P13, are modelled at block level only: left out of both levels)
    long = tabulate_units(units).filter(~pl.col("cell").str.starts_with("P013"))
    on = {"age": AGEBIN_OF_AGE}
    bt = reconstruct_units(
        long, population("persons"), ReconstructOptions(level="block+tract", unique_on=on)
    )
    counted = tables_in(long, population("persons"))
    assert (
        tabulate_units(bt.units, counted).sort("geoid", "cell").equals(long.sort("geoid", "cell"))
    )
    b = reconstruct_units(
        long, population("persons"), ReconstructOptions(level="block", unique_on=on)
    )
    alone = set(b.blocks.filter(pl.col("status") == "unique")["geoid"].to_list())
    joint = set(bt.blocks.filter(pl.col("status") == "unique")["geoid"].to_list())
    assert alone and alone <= joint and bt.blocks.height == b.blocks.height
    # each block's time says how much of it went to certifying (its tract's, shared evenly)
    for r in (b, bt):
        sec, cert = r.blocks["seconds"].to_numpy(), r.blocks["certify_seconds"].to_numpy()
        assert (cert >= 0).all() and (cert <= sec).all() and cert.sum() > 0
    plain = reconstruct_units(
        long, population("persons"), ReconstructOptions(level="block", check_unique=False)
    )
    assert (plain.blocks["certify_seconds"] == 0).all()  # nothing certified
    # a tract cell the blocks cannot meet: every block of that tract is named infeasible
    tract = long.filter(pl.col("geoid").str.len_chars() == 11)["geoid"][0]
    bad = long.with_columns(
        pl.when((pl.col("geoid") == tract) & (pl.col("cell") == "PCT0120001"))
        .then(pl.col("value") + 1)
        .otherwise("value")
    )
    res = reconstruct_units(
        bad, population("persons"), ReconstructOptions(level="block+tract", unique_on=on)
    )
    mine = res.blocks.filter(pl.col("geoid").str.starts_with(tract))
    assert mine.height and set(mine["status"].to_list()) == {"infeasible"}
    assert set(res.blocks.filter(~pl.col("geoid").str.starts_with(tract))["status"]) <= {
        "unique",
        "varies",
    }


def test_block_and_tract_level_misuse_is_named():
    import polars as pl

    from tabrecon.errors import InputError, TabreconError
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import person_units

    _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    with pytest.raises(TabreconError, match="no tract tables among those used"):
        reconstruct_units(
            tabulate_units(units), population("households"), ReconstructOptions(level="block+tract")
        )
    with pytest.raises(TabreconError, match="level must be one of block, block"):
        reconstruct_units(
            tabulate_units(units), population("households"), ReconstructOptions(level="tract")
        )
    with pytest.raises(TabreconError, match="tract_model must be auto, types or classes"):
        reconstruct_units(
            tabulate_units(units),
            population("households"),
            ReconstructOptions(tract_model="agebins"),
        )
    long = tabulate_units(person_units(synthesize(SynthConfig(persons=300), seed=1)))
    blocks_only = long.filter(pl.col("geoid").str.len_chars() == 15)
    with pytest.raises(TabreconError, match="no tract tables among those used.*declares PCT12"):
        reconstruct_units(
            blocks_only, population("persons"), ReconstructOptions(level="block+tract")
        )
    # a table held in part is refused by name, never used in part
    partial = long.filter(pl.col("cell") != "PCT0120050")
    with pytest.raises(InputError, match="tables lack cells \\['PCT0120050'\\]"):
        reconstruct_units(partial, population("persons"), ReconstructOptions(level="block+tract"))


def test_class_program_gives_the_type_programs_verdicts():
    """block+tract at the block tables' own resolution (a block variable per class of types no
    block cell tells apart, the tract's per type) gives every block the verdict the program
    over types gives, and its reconstruction tabulates back; a question finer than the classes
    is refused, not answered coarsely."""
    from tabrecon.engine.model import type_classes
    from tabrecon.errors import TabreconError
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import AGEBIN_OF_AGE, PERSONS, person_units
    from tabrecon.tables.spec import compiled, tables_of

    units = person_units(synthesize(SynthConfig(persons=1_200), seed=5))
    long = tabulate_units(units).filter(~pl.col("cell").str.starts_with("P013"))  # counts
    on = {"age": AGEBIN_OF_AGE}
    kw = {"level": "block+tract", "unique_on": on}
    by_class = reconstruct_units(
        long, population("persons"), ReconstructOptions(tract_model="classes", **kw)
    )
    by_type = reconstruct_units(
        long, population("persons"), ReconstructOptions(tract_model="types", **kw)
    )
    verdicts = by_class.blocks.select("geoid", "status")
    assert verdicts.equals(by_type.blocks.select("geoid", "status"))
    assert {"unique", "varies"} <= set(verdicts["status"].to_list())
    back = tabulate_units(by_class.units, tables_in(long, population("persons"))).sort(
        "geoid", "cell"
    )
    assert back.equals(long.sort("geoid", "cell"))
    with pytest.raises(TabreconError, match="tract_model 'classes' answers uniqueness only"):
        reconstruct_units(
            long,
            population("persons"),
            ReconstructOptions(level="block+tract", tract_model="classes"),
        )
    # the classes of the person block tables: one sex, race and origin over one agebin38 range
    block = tuple(t.name for t in tables_of(population("persons")) if t.level == "block")
    cls, first = type_classes(compiled(population("persons"), block)[1])
    cols = PERSONS.decode(PERSONS.feasible_types())
    key = pl.DataFrame(
        {
            "sex": cols["sex"],
            "bin": AGEBIN_OF_AGE[np.asarray(cols["age"])],
            "race": cols["race"],
            "hispanic": cols["hispanic"],
        }
    )
    assert first.size == key.unique().height
    assert key.with_columns(c=cls).group_by("c").n_unique().drop("c").max().row(0) == (1,) * 4


def test_a_solution_that_does_not_deal_out_is_refused():
    """Dealing a tract's types to its blocks: the blocks' class counts must use up the tract's
    counts exactly; a point that does not (a solver's bug) is refused, never dealt in part."""
    from tabrecon.engine.model import deal_classes
    from tabrecon.errors import TabreconError

    cls = np.array([0, 0, 1])  # types 0 and 1 form class 0, type 2 class 1
    adms = [np.array([0, 2]), np.array([0])]  # blocks' admissible classes, by first type
    ytypes = np.array([0, 1, 2])
    x = np.array([1, 1, 1])  # block 0: one of class 0, one of class 1; block 1: one of class 0
    got = deal_classes(x, adms, cls, ytypes, np.array([1, 1, 1]))
    assert [g.tolist() for g in got] == [[0, 2], [1]]
    with pytest.raises(TabreconError, match="does not deal out"):
        deal_classes(x, adms, cls, ytypes, np.array([2, 1, 1]))  # the tract holds one unit more


def _largest_shortfall(prog, c: np.ndarray) -> int | None:
    """The oracle: every solution of a small block's program enumerated (CP-SAT), the largest
    number of the reconstruction's units any of them lacks; None if there are too many."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    xs = [m.new_int_var(0, int(u), f"x{i}") for i, u in enumerate(prog.ub)]
    A = prog.A.tocsr()
    for r in range(A.shape[0]):
        lo, hi = A.indptr[r], A.indptr[r + 1]
        row = zip(A.indices[lo:hi], A.data[lo:hi], strict=True)
        m.add(sum(int(a) * xs[i] for i, a in row) == prog.lo[r])
    best, seen = [0], [0]

    class Each(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            y = np.array([self.value(v) for v in xs])
            best[0] = max(best[0], int(np.maximum(c - y, 0).sum()))
            seen[0] += 1
            if seen[0] > 20_000:
                self.stop_search()

    s = cp_model.CpSolver()
    s.parameters.enumerate_all_solutions = True
    s.parameters.num_workers = 1
    done = s.solve(m, Each()) == cp_model.OPTIMAL
    return best[0] if done else None


def test_distances_equal_the_largest_shortfall_over_every_solution():
    """Solution variability over the housing-unit schema: a varying block's solvar is the largest
    share of its reconstructed units that some consistent population lacks, checked against the
    enumeration of every solution of the blocks small enough to enumerate."""
    from tabrecon.engine.model import block_program, block_tables

    _, units = synthesize_households(SynthConfig(persons=500), seed=3)
    sizes = units.to_frame().group_by("block_geoid").len()
    small = sizes.filter(pl.col("len") <= 25)["block_geoid"].to_list()  # large: seconds each
    long = tabulate_units(units).filter(pl.col("geoid").is_in(small))
    rec = reconstruct_units(long, population("households"), ReconstructOptions(distance=True))
    b = rec.blocks
    assert (b.filter(pl.col("status") == "unique")["solvar"] == 0).all()
    varies = b.filter(pl.col("status") == "varies")
    assert varies.height and (varies["solvar"] > 0).all()
    assert (varies["solvar_lo"] == varies["solvar"]).all()
    _, W, geoids, V = block_tables(
        long, population("households"), tables_in(long, population("households"))
    )
    feas = HOUSING_UNITS.feasible_types()
    rgeo = rec.units.block_geoid.astype(str)
    checked = 0
    for row in varies.iter_rows(named=True):
        prog, adm = block_program(W, V[geoids.index(row["geoid"])])
        if prog.n_vars > 40:
            continue
        pos = np.searchsorted(feas, rec.units.types[rgeo == row["geoid"]])
        want = _largest_shortfall(prog, np.bincount(np.searchsorted(adm, pos), minlength=adm.size))
        if want is not None:
            assert round(row["solvar"] * row["units"] / 100) == want, row
            checked += 1
    assert checked >= 3


def test_a_person_reconstruction_certified_over_the_schema_gets_certifications_distances():
    """Certification written over any schema: the person pipeline's own reconstruction given as
    ``reference`` to the count model over the person schema (block+tract, uniqueness and
    distance at agebin38) gets, block for block, the verdict and the solution variability person
    certification proves for it."""
    from tabrecon import certify, reconstruct
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import AGEBIN_OF_AGE, person_units
    from tabrecon.tables.persons import tabulate

    md = synthesize(SynthConfig(persons=1_200), seed=6)  # 7 of its 25 blocks vary
    ts = tabulate(md)
    recmd = reconstruct(ts, "block+tract").records
    cert = certify(ts, recmd, "block+tract").blocks
    rec = reconstruct_units(
        # the tables the reference was made from: ts has no medians, which block+tract now reads
        tabulate_units(person_units(md)).filter(~pl.col("cell").str.starts_with("P013")),
        population("persons"),
        ReconstructOptions(level="block+tract", unique_on={"age": AGEBIN_OF_AGE}, distance=True),
        reference=person_units(recmd),
    )
    both = rec.blocks.join(
        cert.select(
            pl.col("block_geoid").alias("geoid"), "persons", pl.col("status").alias("p")
        ).with_columns(psv=cert["solvar"]),
        on="geoid",
    )
    assert both.height == cert.height == rec.blocks.height
    assert (both["status"] == both["p"]).all()
    assert (both["units"] == both["persons"]).all()  # the reference's units, not a new solve
    assert both.filter(pl.col("status") == "varies").height >= 3
    assert ((both["solvar"] - both["psv"]).abs() < 1e-9).all()


def test_a_reference_that_breaks_the_tables_is_refused_by_block():
    """A reconstruction given to certify that breaks a published cell of a block (a unit
    dropped) is refused there; the other blocks are still answered."""
    _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    long = tabulate_units(units)
    first = units.block_geoid[0]
    keep = np.ones(len(units), dtype=bool)
    keep[0] = False
    short = Units(
        HOUSING_UNITS, units.block_geoid[keep], {k: v[keep] for k, v in units.codes.items()}
    )
    rec = reconstruct_units(long, population("households"), reference=short)
    status = dict(zip(rec.blocks["geoid"], rec.blocks["status"], strict=True))
    assert status[first] == "refused"
    assert {s for g, s in status.items() if g != first} <= {"unique", "varies"}
    assert len(status) == long.filter(pl.col("geoid").str.len_chars() == 15)["geoid"].n_unique()


def test_uniqueness_without_a_published_total_proves_every_count():
    """The zero test's shortcut (a different histogram lacks some unit) needs the block's total
    fixed. Here it is not: x0 = 1 is published, x1 (reconstructed 0) is free up to 2. The
    shortcut would call the block unique; the full proof finds x1 = 1 and says it varies. With
    a total row added, the shortcut applies and the verdict is unique."""
    import scipy.sparse as sp

    from tabrecon.engine.proofs import Extensible
    from tabrecon.engine.reconstruct import _totals_fixed, certify_forms
    from tabrecon.engine.solvers import IntProgram, SolverOptions

    F = sp.identity(2, format="csr", dtype=np.int64)
    x, m, blk = np.array([1, 0]), np.array([1, 0]), np.array([0, 0])
    open_total = IntProgram(
        A=sp.csr_matrix(np.array([[1, 0]])), lo=np.array([1]), hi=np.array([1]), ub=np.array([1, 2])
    )
    assert not _totals_fixed(open_total, F, blk, 1).any()
    assert certify_forms(Extensible(open_total, SolverOptions()), F, m, blk, x, 1)[0] == ["varies"]
    with_total = IntProgram(
        A=sp.csr_matrix(np.array([[1, 0], [1, 1]])),
        lo=np.array([1, 1]),
        hi=np.array([1, 1]),
        ub=np.array([1, 2]),
    )
    assert _totals_fixed(with_total, F, blk, 1).all()
    assert certify_forms(Extensible(with_total, SolverOptions()), F, m, blk, x, 1)[0] == ["unique"]


def test_a_block_missing_or_repeating_a_cell_is_named():
    """The long table must give every block each cell of the tables used exactly once: a
    missing value and a repeated one are named by block and cell, never filled or summed."""
    from tabrecon.errors import InputError

    _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    long = tabulate_units(units)
    row = long.filter(pl.col("cell") == "H0030002").row(0, named=True)
    gone = long.filter(~((pl.col("geoid") == row["geoid"]) & (pl.col("cell") == "H0030002")))
    with pytest.raises(InputError, match=f"block {row['geoid']} lacks cell H0030002 \\(0 more"):
        reconstruct_units(gone, population("households"))
    twice = pl.concat([long, pl.DataFrame([row], schema=long.schema)])
    with pytest.raises(InputError, match=f"block {row['geoid']} has cell H0030002 2 times"):
        reconstruct_units(twice, population("households"))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_block_diagonal_equals_the_blocks_programs_stacked(seed):
    """A tract's block part built in one pass is what building each block's program and
    stacking them gives: the same matrix, values and upper bounds."""
    import scipy.sparse as sp

    from tabrecon.engine.model import admissible_types, block_diagonal, block_program, cell_degree

    rng = np.random.default_rng(seed)
    cells, types, nb = rng.integers(1, 6), rng.integers(1, 8), rng.integers(1, 5)
    W = sp.csr_matrix((rng.random((cells, types)) < 0.4).astype(np.int64))
    V = rng.integers(0, 3, size=(nb, cells)) * (rng.random((nb, cells)) < 0.7)
    Wc = W.tocsc()
    adms = admissible_types(W, V, cell_degree(W))
    progs = [block_program(W, v, Wc, admissible=a)[0] for v, a in zip(V, adms, strict=True)]
    B, rows, ub = block_diagonal(Wc, V, adms)
    v = V.ravel()[rows]
    B0 = sp.block_diag([p.A for p in progs], format="csr")
    assert B.shape == B0.shape and (B != B0).nnz == 0
    assert v.tolist() == np.concatenate([p.lo for p in progs]).tolist()
    assert ub.tolist() == np.concatenate([p.ub for p in progs]).tolist()


@pytest.mark.parametrize("differs", [False, True])
def test_presolve_answers_as_without_it_from_the_callers_model(differs, monkeypatch):
    """Certification with presolve answers exactly as without it, and presolves a clone of the
    caller's model when given one (never building the program again)."""
    import scipy.sparse as sp

    import tabrecon.engine.proofs as P
    import tabrecon.engine.solvers as S
    import tabrecon.engine.variability as V
    from tabrecon.engine.proofs import Extensible
    from tabrecon.engine.solvers import IntProgram, SolverOptions

    built: list[int] = []
    real = S.build_cpsat
    for module in (S, P):  # the program built anywhere: a solve's own or an Extensible's
        monkeypatch.setattr(module, "build_cpsat", lambda p: built.append(p.n_vars) or real(p))
    # two blocks of two variables each; block 0 is x0 + x1 = 2 with x0 = 1 pinned unless differs
    rows = [[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 0]] + ([] if differs else [[1, 0, 0, 0]])
    b = np.array([2, 1, 1] + ([] if differs else [1]))
    prog = IntProgram(A=sp.csr_matrix(np.array(rows)), lo=b, hi=b.copy(), ub=np.array([2, 2, 1, 1]))
    G = sp.identity(4, format="csr", dtype=np.int64)
    blk = np.array([0, 0, 1, 1])
    got = {}
    for mode in (True, False):
        cp = V.Counts.of(prog, G, np.array([1, 1, 1, 0]), blk, blk, 2)
        base = Extensible(prog, SolverOptions())
        base.solve_base()  # as the reconstruction does first: its model is built then
        built.clear()
        v = V.block_variability(cp, SolverOptions(), coupled=True, presolve=mode, base=base)
        got[mode] = (v.state.tolist(), v.lower.tolist(), v.upper.tolist())
        assert 4 not in built  # the whole program is never built again
    want_state = [V.VARIES, V.UNIQUE] if differs else [V.UNIQUE, V.UNIQUE]
    assert got[True][0] == got[False][0] == want_state
    assert got[True] == got[False]


@pytest.mark.parametrize("level", ["block", "block+tract"])
def test_ages_the_tables_do_not_resolve_are_written_as_the_person_paths_ranges(level, small_md):
    """Each record carries the run of ages the count cells used cannot tell apart
    (``ranges["age"]``: at block level P12's bins above 21, at block+tract PCT12's 100-104)
    beside an age that meets every cell used, medians too (within their rounding). The runs
    are the person reconstruction's age classes, record by record at agebin38 where the
    blocks are unique (the person path reads no median: compared without P13), and every
    count cell tabulates back."""
    from tabrecon import reconstruct
    from tabrecon.populations.persons import person_tables
    from tabrecon.schema import AGEBIN_OF_AGE, person_records, person_units
    from tabrecon.tables.persons import tabulate

    long = tabulate_units(person_units(small_md))
    on = {"age": AGEBIN_OF_AGE}
    count = [t for t in person_tables() if t.statistic is None]
    count = [t for t in count if level != "block" or t.level == "block"]
    ids = [c.id for t in count for c in t.cells()]
    if level == "block":  # the medians modelled too: the ages stay within their runs
        full = reconstruct_units(
            long, population("persons"), ReconstructOptions(unique_on=on, check_unique=False)
        ).units
        assert full.ranges is not None
        lo, hi = full.ranges["age"]
        assert ((lo <= full.codes["age"]) & (full.codes["age"] <= hi)).all()
        again, given = (f.filter(pl.col("cell").is_in(ids)) for f in (tabulate_units(full), long))
        assert again.sort("geoid", "cell").equals(given.sort("geoid", "cell"))
    rec = reconstruct_units(
        long,
        population("persons"),
        ReconstructOptions(level=level, unique_on=on),
        tables=tuple(t.name for t in count),
    )
    person = reconstruct(tabulate(small_md), level).records
    assert rec.units.ranges is not None
    mine = person_records(rec.units)  # age: the run's first year, age_max its last
    assert (mine.age_max > mine.age).any() and not mine.age_exact.all()
    assert person.age_max is not None

    def pairs(md):
        return set(zip(md.age.tolist(), md.age_max.tolist(), strict=True))

    assert pairs(mine) == pairs(person)

    def by_block(md):
        f = pl.DataFrame(
            {
                "g": md.block_geoid.astype(str),
                **{k: getattr(md, k).astype(np.int64) for k in ("sex", "race", "hisp")},
                "a": AGEBIN_OF_AGE[md.age].astype(np.int64),
            }
        )
        return f.group_by("g").agg(pl.struct("sex", "a", "race", "hisp").sort().alias("x"))

    both = by_block(mine).join(by_block(person), on="g")
    both = both.join(rec.blocks.rename({"geoid": "g"}), on="g")
    unique = both.filter(pl.col("status") == "unique")
    assert unique.height > 0.5 * both.height
    assert (unique["x"] == unique["x_right"]).all()
    again, given = (f.filter(pl.col("cell").is_in(ids)) for f in (tabulate_units(rec.units), long))
    assert again.sort("geoid", "cell").equals(given.sort("geoid", "cell"))


def test_runs_survive_the_release_runner_and_a_file(tmp_path):
    """reconstruct_release joins tracts' records with runs of ages (``age_min``, ``age_max``)
    and without; writing them and reading them back keeps every run, and a run that is no run
    (its last before its first, an age outside it) is refused naming file, line and column."""
    from tabrecon.engine.release import reconstruct_release
    from tabrecon.errors import InputError
    from tabrecon.records.synth import synthesize
    from tabrecon.schema import PERSONS, person_units
    from tabrecon.schema.spec import read_units, write_units

    md = synthesize(SynthConfig(persons=1500), seed=5)
    long = tabulate_units(person_units(md))
    one = reconstruct_units(
        long, population("persons"), ReconstructOptions(check_unique=False)
    ).units
    run = reconstruct_release(long, population("persons")).units
    assert run.ranges is not None and one.ranges is not None

    def table(u):
        lo, hi = u.ranges["age"]
        return pl.DataFrame({"g": u.block_geoid, "lo": lo, "hi": hi}).sort(pl.all())

    assert table(run).equals(table(one))
    path = tmp_path / "recon.csv"
    write_units(run, path)
    back = read_units(path, PERSONS)
    assert back.extra is None  # the run is read as the run, not carried as extra columns
    assert table(back).equals(table(run))
    text = path.read_text().splitlines()
    head = text[0].split(",")
    for col, value, named in (("age_max", -1, "age_max"), ("age", +1, "age")):
        row = text[1].split(",")
        end = row[head.index("age_min" if value < 0 else "age_max")]
        row[head.index(col)] = str(int(end) + value)
        path.write_text("\n".join([text[0], ",".join(row), *text[2:]]) + "\n")
        with pytest.raises(InputError, match=rf"recon\.csv.*line 2.*{named}"):
            read_units(path, PERSONS)


def test_spreading_proofs_and_vertices_give_the_same_verdicts_in_fewer_proofs(monkeypatch):
    """The zero test asks each proof for the population in which the most keys fall
    (:data:`~tabrecon.engine.uniqueness.SPREAD_WORK`), and of a tract's program first sets
    aside the blocks that differ in integer vertices of its relaxation
    (:data:`~tabrecon.engine.variability.ZERO_VERTICES`): the verdicts and solvar of every
    block equal those of one-key-at-a-time proofs, each in fewer proofs, and twice the same."""
    import tabrecon.engine.uniqueness as U
    import tabrecon.engine.variability as V
    from tabrecon.records.synth import synthesize
    from tabrecon.schema import AGEBIN_OF_AGE, person_units

    md = synthesize(SynthConfig(persons=6000), seed=11)
    # the count tables (the median ages, read at block+tract too now, leave fewer blocks to the
    # zero test's spreading than this test measures)
    long = tabulate_units(person_units(md)).filter(~pl.col("cell").str.starts_with("P013"))
    proofs: list[int] = []
    zero_test = V.zero_test
    monkeypatch.setattr(
        V, "zero_test", lambda *a, **k: proofs.append(zero_test(*a, **k)) or proofs[-1]
    )

    def run(spread: bool, vertices: bool) -> tuple[pl.DataFrame, int]:
        monkeypatch.setattr(U, "SPREAD_WORK", 0.3 if spread else None)
        monkeypatch.setattr(V, "ZERO_VERTICES", vertices)
        proofs.clear()
        rec = reconstruct_units(
            long,
            population("persons"),
            ReconstructOptions(
                level=Level.BLOCK_TRACT, unique_on={"age": AGEBIN_OF_AGE}, distance=True
            ),
        )
        return rec.blocks.select("geoid", "status", "solvar"), sum(proofs)

    spread, n_spread = run(True, False)
    plain, n_plain = run(False, False)
    both, n_both = run(True, True)
    assert (spread["status"] == "varies").sum() > 10
    assert spread.equals(plain) and both.equals(plain)
    assert n_both < n_spread < n_plain
    again, n_again = run(True, True)  # the work limit is CP-SAT's deterministic time
    assert again.equals(both) and n_again == n_both


def test_certification_with_every_constraint_in_the_lp_gives_the_same_answers(monkeypatch):
    """Certification's solves ask CP-SAT for every constraint in its LP relaxation
    (:data:`~tabrecon.engine.variability.LINEARIZATION`), from the start
    (:data:`~tabrecon.engine.variability.LP_LAZY`), on models it builds and on the
    reconstruction's own model it is handed: the parameters reach CP-SAT, and the verdicts and
    solvar of every block equal those under CP-SAT's defaults."""
    import tabrecon.engine.solvers as S
    import tabrecon.engine.variability as V
    from tabrecon.records.synth import synthesize
    from tabrecon.schema import AGEBIN_OF_AGE, person_units

    md = synthesize(SynthConfig(persons=3000), seed=11)
    long = tabulate_units(person_units(md))
    levels: list[tuple[int, bool]] = []
    solve = S.CpsatSolver.solve

    def spy(self, m):
        levels.append(
            (self.parameters.linearization_level, self.parameters.add_lp_constraints_lazily)
        )
        return solve(self, m)

    monkeypatch.setattr(S.CpsatSolver, "solve", spy)

    def run(level: int | None, lazy: bool) -> pl.DataFrame:
        monkeypatch.setattr(V, "LINEARIZATION", level)
        monkeypatch.setattr(V, "LP_LAZY", lazy)
        levels.clear()
        rec = reconstruct_units(
            long,
            population("persons"),
            ReconstructOptions(
                level=Level.BLOCK_TRACT, unique_on={"age": AGEBIN_OF_AGE}, distance=True
            ),
        )
        return rec.blocks.select("geoid", "status", "solvar")

    full = run(2, False)
    # the zero test's proofs and the distances (fewer since own-rows populations extended to
    # the tract close most blocks without a search)
    assert levels.count((2, False)) >= 3
    plain = run(None, True)
    assert levels and set(levels) == {(1, True)}  # CP-SAT's defaults
    assert (full["status"] == "varies").sum() > 10
    assert full.equals(plain)


def test_solver_options_refuse_an_unknown_linearization_level():
    from tabrecon.engine.solvers import SolverOptions
    from tabrecon.errors import TabreconError

    with pytest.raises(TabreconError, match="linearization level 3"):
        SolverOptions(linearization=3)


def test_block_programs_over_classes_give_the_type_programs_answers():
    """At block level each block's variables count the classes of types no block cell tells
    apart (persons: one sex, race and origin over an agebin38 range) whenever uniqueness is
    asked no finer: every block's verdict is the type programs', the records tabulate back and
    carry their class's age run, and a reconstruction made over types is certified over
    classes with its own verdicts and solution variability (a block's solvar is measured from
    the reconstruction at hand: the two programs' reconstructions may differ where it varies)."""
    from tabrecon.errors import TabreconError
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.schema import AGEBIN_OF_AGE, person_records, person_units

    units = person_units(synthesize(SynthConfig(persons=1_500), seed=11))
    long = tabulate_units(units).filter(pl.col("geoid").str.len_chars() == 15)
    long = long.filter(~pl.col("cell").str.starts_with("P013"))  # counts only
    kw = {"unique_on": {"age": AGEBIN_OF_AGE}, "distance": True}
    by_class = reconstruct_units(long, population("persons"), ReconstructOptions(**kw))
    by_type = reconstruct_units(
        long, population("persons"), ReconstructOptions(tract_model="types", **kw)
    )
    cols = ["geoid", "units", "status"]
    assert by_class.blocks.select(cols).equals(by_type.blocks.select(cols))
    assert {"unique", "varies"} <= set(by_class.blocks["status"].to_list())
    assert (by_class.blocks["types"] < by_type.blocks["types"]).any()  # fewer variables
    back = tabulate_units(by_class.units, tables_in(long, population("persons"))).sort(
        "geoid", "cell"
    )
    assert back.equals(long.sort("geoid", "cell"))
    md = person_records(by_class.units)
    assert (md.age_max > md.age).any()
    assert (AGEBIN_OF_AGE[md.age] == AGEBIN_OF_AGE[md.age_max]).all()
    # uniqueness is never asked finer than the records say (ages as their runs): without
    # unique_on the classes still answer; with medians they are not used, and asking is refused
    plain = reconstruct_units(
        long, population("persons"), ReconstructOptions(tract_model="classes")
    )
    assert plain.blocks.select(cols).equals(by_class.blocks.select(cols))
    with_medians = tabulate_units(units).filter(pl.col("geoid").str.len_chars() == 15)
    with pytest.raises(TabreconError, match="'classes' at level 'block' needs uniqueness"):
        reconstruct_units(
            with_medians, population("persons"), ReconstructOptions(tract_model="classes")
        )
    # the type program's reconstruction certified over classes: its own verdicts
    ref = reconstruct_units(
        long, population("persons"), ReconstructOptions(**kw), reference=by_type.units
    )
    cols += ["solvar", "solvar_lo", "solvar_hi"]
    assert ref.blocks.select(cols).equals(by_type.blocks.select(cols))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(
                st.lists(st.sampled_from([0, 0, 1]), min_size=n, max_size=n), min_size=1, max_size=7
            ),
            st.lists(st.lists(st.integers(0, 2), min_size=7, max_size=7), min_size=1, max_size=4),
        )
    )
)
def test_admissible_types_equal_the_test_against_every_cell(spec):
    """Tested against the cells that decide (smaller cells within larger ones), every block's
    admissible types are those of the test against every cell: with counts that agree, and
    with counts that contradict (a zero cell over a nonzero one within it), written by hand as
    the definition says: a type is admitted when every cell it lies in is nonzero."""
    import scipy.sparse as sp

    from tabrecon.engine.model import admissible_types

    rows, values = spec
    W = np.array(rows, dtype=np.int64)
    V = np.array([v[: W.shape[0]] for v in values], dtype=np.int64)
    got = admissible_types(sp.csr_matrix(W), V)
    for b in range(V.shape[0]):
        want = [t for t in range(W.shape[1]) if all(V[b, c] > 0 for c in np.flatnonzero(W[:, t]))]
        assert got[b].tolist() == want


def test_the_python_api_attacks_any_population_as_it_attacks_persons(tmp_path):
    """``tabrecon.reconstruct``, ``certify`` and ``claims`` take any registered population
    (group quarters here: housing units' certified claims take minutes, see the audit): its
    records come back as :class:`Units`, their verdicts equal certification of the same
    records, the file written is the population's, and a person file is refused by name."""
    import tabrecon as tr
    from tabrecon.errors import TabreconError
    from tabrecon.records.synth import synthesize
    from tabrecon.runner import RunOptions
    from tabrecon.schema.registry import population
    from tabrecon.schema.spec import read_units
    from tabrecon.tables.spec import tabulate

    gq = population("group_quarters")
    units = gq.synthesize(SynthConfig(persons=20_000), 1)
    ts = tabulate(units)
    out = tmp_path / "gq.parquet"
    run = tr.reconstruct(ts, population="group_quarters", certify=True, run=RunOptions(out=out))
    assert isinstance(run.records, Units) and not run.failed
    assert tabulate_units(run.records).equals(tabulate_units(units))
    assert (run.blocks["status"] == "unique").all() and run.blocks.height >= 5
    assert len(read_units(out, gq.schema)) == len(units)
    again = tr.certify(ts, run.records, population=gq, distance=False)
    cols = ["block_geoid", "status"]
    assert again.blocks.select(cols).sort(cols).equals(run.blocks.select(cols).sort(cols))
    claims = tr.claims(ts, run.records, run.blocks, population="group_quarters", k_solutions=3)
    assert not claims.failed and claims.summary()["persons"] == len(units)
    assert claims.summary()["persons_singled_out"] >= 1
    with pytest.raises(TabreconError, match="records of persons given where group_quarters"):
        tr.certify(ts, synthesize(SynthConfig(persons=50), seed=1), population=gq)


def test_a_table_s_own_total_serves_when_no_total_table_is_published():
    """Issue 90 item 6: group-quarters tables with P43 but not P42 were refused ('no total
    (P0420001)'), though P43's first line is that same total; they now reconstruct, every
    published value kept."""
    from tabrecon.engine.release import reconstruct_release
    from tabrecon.records.synth import SynthConfig
    from tabrecon.schema.registry import population
    from tabrecon.tables.spec import tabulate_units

    gq = population("group_quarters")
    units = gq.synthesize(SynthConfig(persons=20_000), 3)
    p43 = tabulate_units(units, ["P43"])
    assert not p43["cell"].str.starts_with("P042").any()
    run = reconstruct_release(p43, gq)
    assert not run.failed
    back = tabulate_units(run.units, ["P43"]).sort("geoid", "cell")
    assert back.equals(p43.sort("geoid", "cell"))
