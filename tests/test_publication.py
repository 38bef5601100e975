"""Rounded and withheld cells (tabrecon.tables.publication) in the count model, against brute force.

A toy schema (sex x 3 ages x 2 colours: 12 types) small enough to list every population of up to
8 records: for random populations of up to 6 records, random table sets and random publication
rules, the engine's verdict (one consistent population, or several) equals the enumeration, its
reconstruction is one of the enumerated populations, and every claim it verifies holds in every
one of them.
"""

from __future__ import annotations

import itertools
import subprocess

import numpy as np
import polars as pl
import pytest
from brute_force import claims_hold_in_every, histogram, releases
from cli_run import run_cli
from hypothesis import given
from hypothesis import strategies as st

from tabrecon.attacks.claims.block import generate_then_verify
from tabrecon.engine.reconstruct import ReconstructOptions, reconstruct_units
from tabrecon.errors import InputError, TabreconError
from tabrecon.schema.registry import of_schema
from tabrecon.schema.spec import Attribute, Schema, Units
from tabrecon.tables.publication import MISSING, Publication
from tabrecon.tables.spec import UnitTable, cell_tables, compiled, declare_tables, tabulate_units

SEX = Attribute("sex", ((0, "male"), (1, "female")))
AGE = Attribute("age", ((0, "child"), (1, "adult"), (2, "old")))
COLOUR = Attribute("colour", ((0, "red"), (1, "blue")))
TOY = Schema("pubtoy", "person", (SEX, AGE, COLOUR))
BLOCK = "990010001001000"


def _table(name: str, number: int, attrs: tuple[Attribute, ...]) -> UnitTable:
    lines: list[tuple[str, dict]] = [("Total", {})]
    for combo in itertools.product(*(a.codes.tolist() for a in attrs)):
        label = " ".join(
            a.labels[a.codes.tolist().index(c)] for a, c in zip(attrs, combo, strict=True)
        )
        lines.append((label, {a.name: (c,) for a, c in zip(attrs, combo, strict=True)}))
    return UnitTable(name, number, name, {}, tuple(lines), prefix="T", schema=TOY)


#: the menu a table set is drawn from: every one- and two-way margin (each with its total)
MENU = [
    _table(f"T{i + 1}", i + 1, attrs)
    for i, attrs in enumerate([(SEX,), (AGE,), (COLOUR,), (SEX, AGE), (AGE, COLOUR), (SEX, COLOUR)])
]
declare_tables(TOY, MENU)
RULES = [
    "exact",
    "round:2",
    "round:3",
    "round:3:random",
    "round:2:random:zeros-exact",
    "round:3:zeros-exact",
    "suppress:2",
    "suppress:3",
    "suppress:3:zeros",
]
N_TYPES = 12
MAX_RECORDS = 6


def _multisets(most: int) -> np.ndarray:
    """Every histogram over the 12 types with at most ``most`` records (rows)."""
    rows = []
    for n in range(most + 1):
        for combo in itertools.combinations_with_replacement(range(N_TYPES), n):
            rows.append(np.bincount(np.array(combo, dtype=np.int64), minlength=N_TYPES))
    return np.array(rows, dtype=np.int64)


#: every population of at most 8 records: every table has a total, and a total of at most 6
#: rounded (randomly, to base 3) allows at most 8
MOST = 8
ALL = _multisets(MOST)


def _release(seed: int) -> tuple[Units, tuple[str, ...], Publication, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, MAX_RECORDS + 1))
    types = rng.integers(0, N_TYPES, size=n)
    codes = TOY.decode(TOY.feasible_types()[types])
    units = Units(TOY, np.full(n, BLOCK), codes)
    names = tuple(
        sorted(rng.choice([t.name for t in MENU], size=int(rng.integers(1, 4)), replace=False))
    )
    text = RULES[int(rng.integers(len(RULES)))]
    if len(names) > 1 and rng.random() < 0.5:  # tables published under different rules
        text += f",{names[0]}={RULES[int(rng.integers(len(RULES)))]}"
    pub = Publication.parse(text)
    long = tabulate_units(units, names)
    table_of = cell_tables(of_schema(TOY))
    shown = pub.publish(
        long["value"].to_numpy(), rng, [table_of[c] for c in long["cell"].to_list()]
    )
    long = long.with_columns(
        pl.Series("value", [None if v == MISSING else int(v) for v in shown], dtype=pl.Int64)
    )
    return units, names, pub, long


def _consistent(names: tuple[str, ...], pub: Publication, long: pl.DataFrame) -> np.ndarray:
    """Every histogram the published values allow (rows of ALL)."""
    cells, W = compiled(of_schema(TOY), names)
    value = dict(
        zip(long["cell"].to_list(), long["value"].fill_null(MISSING).to_list(), strict=True)
    )
    lo, hi = pub.interval(
        np.array([value[c.id] for c in cells], dtype=np.int64), [c.table for c in cells]
    )
    totals = [i for i, c in enumerate(cells) if not c.predicate]
    assert totals and hi[totals].min() <= MOST  # so ALL holds every population they allow
    T = ALL @ W.toarray().T  # histograms x cells
    return ALL[((T >= lo) & (T <= hi)).all(axis=1)]


@releases(120)
@given(seed=st.integers(0, 2**31 - 1))
def test_verdict_and_claims_equal_brute_force_under_rounding_and_suppression(seed):
    units, names, pub, long = _release(seed)
    sols = _consistent(names, pub, long)
    truth = histogram(units)
    assert any(np.array_equal(truth, s) for s in sols), "the truth must be consistent"
    rec = reconstruct_units(long, of_schema(TOY), ReconstructOptions(publication=pub), tables=names)
    status = rec.blocks["status"].item()
    assert status == ("unique" if len(sols) == 1 else "varies"), (seed, str(pub), len(sols))
    mine = histogram(rec.units)
    assert any(np.array_equal(mine, s) for s in sols), (seed, str(pub))
    res = generate_then_verify(
        long, of_schema(TOY), names, k_values=(1, 2, 3), k_solutions=4, seed=seed, publication=pub
    )
    claims_hold_in_every(TOY, res.claims, sols)


def test_what_each_rule_leaves_unique():
    """Over 40 small releases (three two-way tables, 1-5 records): how many stay with exactly one
    consistent population under each rule. Measured: exact 39, round:2 8, round:2:random 2,
    round:3 0; suppress:2 39 (a withheld cell under threshold 2 can only be a 1: suppression hides
    nothing), suppress:3 19, suppress:3:zeros 0. The order is what the test pins."""
    rules = ("exact", "round:2", "round:2:random", "round:3", "suppress:2", "suppress:3")
    unique = dict.fromkeys(rules, 0)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 6))
        units = Units(
            TOY,
            np.full(n, BLOCK),
            TOY.decode(TOY.feasible_types()[rng.integers(0, N_TYPES, size=n)]),
        )
        names = ("T4", "T5", "T6")
        true = tabulate_units(units, names)
        for rule in rules:
            pub = Publication.parse(rule)
            shown = pub.publish(true["value"].to_numpy(), np.random.default_rng(seed))
            long = true.with_columns(
                pl.Series("value", [None if v == MISSING else int(v) for v in shown])
            )
            unique[rule] += len(_consistent(names, pub, long)) == 1
    assert unique["suppress:2"] == unique["exact"] > unique["suppress:3"] > 0
    assert unique["exact"] > unique["round:2"] > unique["round:3"]
    assert unique["round:2"] >= unique["round:2:random"]


def test_a_value_the_rule_cannot_publish_is_named():
    units = Units(TOY, np.full(2, BLOCK), TOY.decode(TOY.feasible_types()[[0, 5]]))
    long = tabulate_units(units, ("T1",))  # 2, 1, 1: not multiples of 3
    with pytest.raises(InputError, match=r"block 990010001001000, cell T0010001: 2 is not a "):
        reconstruct_units(
            long,
            of_schema(TOY),
            ReconstructOptions(publication=Publication.parse("round:3")),
            tables=("T1",),
        )
    with pytest.raises(InputError, match="below the suppression threshold 3 yet published"):
        reconstruct_units(
            long,
            of_schema(TOY),
            ReconstructOptions(publication=Publication.parse("suppress:3")),
            tables=("T1",),
        )
    gone = long.with_columns(pl.lit(None, dtype=pl.Int64).alias("value"))
    with pytest.raises(InputError, match="withheld, but the publication rule withholds nothing"):
        reconstruct_units(gone, of_schema(TOY), tables=("T1",))
    with pytest.raises(TabreconError, match="level 'block' only"):
        reconstruct_units(
            long,
            of_schema(TOY),
            ReconstructOptions(level="block+tract", publication=Publication.parse("round:2")),
            tables=("T1",),
        )


def test_per_table_rules_spell_publish_and_bound_each_cell_by_its_table():
    pub = Publication.parse("round:3, t2=suppress:2")
    assert str(pub) == "round:3,T2=suppress:2" and pub.withholds and not pub.exact
    true = np.array([[4, 1, 0, 2]])
    tables = ["T1", "T1", "T2", "T2"]
    shown = pub.publish(true, None, tables)
    assert shown.tolist() == [[3, 0, 0, 2]]
    lo, hi = pub.interval(np.array([[3, 0, MISSING, 2]]), tables)
    assert lo.tolist() == [[2, 0, 1, 2]] and hi.tolist() == [[4, 1, 1, 2]]
    assert pub.violations(np.array([[4, 0, 1, 2]]), tables).tolist() == [[True, False, True, False]]
    with pytest.raises(TabreconError, match="need each cell's table"):
        pub.interval(np.array([3, 0]))
    with pytest.raises(TabreconError, match="each table once"):
        Publication.parse("round:3,exact")
    pub.check_tables(["T1", "T2"], "pubtoy")  # both known: nothing to say
    with pytest.raises(TabreconError, match="T9 is not a table of --schema pubtoy"):
        Publication.parse("exact,T9=round:2").check_tables(["T1"], "pubtoy")


@pytest.mark.parametrize(
    "text",
    [
        "round",
        "round:0",
        "round:x",
        "round:3:sometimes",
        "suppress:2:maybe",
        "blur:3",
        "round:3:random:conventional",
        "exact:2",
    ],
)
def test_a_rule_spelled_wrong_is_refused(text):
    with pytest.raises(TabreconError, match="--publication"):
        Publication.parse(text)


def test_the_python_api_refuses_a_rule_in_its_own_words(small_md):
    """``tabrecon.reconstruct(publication=...)`` names its argument, not the command's option."""
    from tabrecon import reconstruct
    from tabrecon.tables.persons import tabulate

    ts = tabulate(small_md, "P1")
    with pytest.raises(TabreconError, match=r"^publication 'round:0': expected exact"):
        reconstruct(ts, publication="round:0")
    with pytest.raises(TabreconError, match=r"^publication exact,H1=exact: H1 is not a table"):
        reconstruct(ts, publication="exact,H1=exact")


def _cli(cwd, *args: str) -> subprocess.CompletedProcess:
    return run_cli(list(args), cwd)


def test_the_command_line_publishes_attacks_and_refuses_under_a_rule(tmp_path):
    """tabulate --publication writes what an agency would publish (withheld cells empty);
    reconstruct and claims read it under the same rule, every claim true of the records; a
    file the rule cannot have published, a missing rule, a bad spelling and persons are
    refused before any work (exit 2), each named."""
    run = _cli(
        tmp_path, "synth", "--schema", "group_quarters", "--persons", "60000", "-o", "gq.parquet"
    )
    assert run.returncode == 0, run.stderr
    run = _cli(
        tmp_path,
        "tabulate",
        "gq.parquet",
        "--schema",
        "group_quarters",
        "--publication",
        "suppress:3",
        "-o",
        "s3.csv",
    )
    assert run.returncode == 0 and "withheld" in run.stdout, run.stderr
    published = pl.read_csv(tmp_path / "s3.csv", schema_overrides={"geoid": pl.String})
    assert published["value"].null_count() > 0
    run = _cli(
        tmp_path,
        "reconstruct",
        "s3.csv",
        "--schema",
        "group_quarters",
        "--publication",
        "suppress:3",
        "-o",
        "rec.parquet",
    )
    assert run.returncode == 0, run.stderr
    blocks = pl.read_csv(tmp_path / "rec_blocks.csv")
    assert set(blocks["status"]) <= {"unique", "varies"} and (blocks["status"] == "unique").any()
    run = _cli(
        tmp_path,
        "claims",
        "s3.csv",
        "--schema",
        "group_quarters",
        "--publication",
        "suppress:3",
        "--truth",
        "gq.parquet",
        "-o",
        "cl",
        "-K",
        "20",
    )
    assert run.returncode == 0, run.stderr
    from tabrecon.attacks.claims.release import matching_units
    from tabrecon.schema.registry import population
    from tabrecon.schema.spec import read_units

    claims = pl.read_csv(
        tmp_path / "cl" / "group_quarters_claims.csv", schema_overrides={"geoid": pl.String}
    )
    truth = read_units(tmp_path / "gq.parquet", population("group_quarters").schema)
    assert claims.height
    assert [len(h) for h in matching_units(claims, truth)] == claims["m"].to_list()
    _cli(tmp_path, "tabulate", "gq.parquet", "--schema", "group_quarters", "-o", "exact.csv")
    for args, words in (
        (("s3.csv",), "a withheld cell needs --publication suppress:T"),
        (("exact.csv", "--publication", "round:3"), "not a multiple of the rounding base 3"),
        (("s3.csv", "--publication", "round:three"), "--publication 'round:three': expected"),
        (("s3.csv", "--schema", "persons", "--publication", "round:3"), "holds no cells of"),
    ):
        schema = [] if "--schema" in args else ["--schema", "group_quarters"]
        run = _cli(tmp_path, "reconstruct", *args, *schema, "-o", "x.parquet")
        assert run.returncode == 2 and words in run.stderr, (args, run.stderr)
        assert "Traceback" not in run.stderr


def test_the_sweep_measures_each_rule_and_every_claim_is_true(tmp_path):
    """sweep-publication: one row per rule as it finishes, the plot, no false claim; exact
    publication changes no cell and pins down at least as many blocks as any rule; a rule
    spelled wrong or given twice is refused before any work."""
    run = _cli(
        tmp_path, "synth", "--schema", "group_quarters", "--persons", "40000", "-o", "gq.parquet"
    )
    assert run.returncode == 0, run.stderr
    run = _cli(
        tmp_path,
        "sweep-publication",
        "gq.parquet",
        "--rules",
        "exact,round:3,suppress:3",
        "-K",
        "10",
        "--k",
        "1,2",
        "-o",
        "sw",
    )
    assert run.returncode == 0, run.stderr
    df = pl.read_csv(tmp_path / "sw" / "sweep.csv")
    assert df["rule"].to_list() == ["exact", "round:3", "suppress:3"]
    assert (df["claims_false"] == 0).all() and (df["failed_blocks"] == 0).all()
    exact = df.row(0, named=True)
    assert exact["cells_changed"] == 0 and exact["l1_per_block"] == 0
    assert exact["blocks_unique"] == df["blocks_unique"].max()
    assert df.row(2, named=True)["cells_withheld"] > 0
    assert (tmp_path / "sw" / "sweep.png").stat().st_size > 10_000
    for rules, words in (("exact,round:x", "expected exact"), ("round:3,round:3", "given twice")):
        run = _cli(tmp_path, "sweep-publication", "gq.parquet", "--rules", rules, "-o", "sw2")
        assert run.returncode == 2 and words in run.stderr, run.stderr
        assert not (tmp_path / "sw2").exists()


def test_persons_are_swept_on_their_block_tables_and_every_claim_is_true(tmp_path):
    """sweep-publication --schema persons: the person file's block tables, at the resolution
    they determine (agebin38), swept on the engine written over any schema; every verified
    claim is checked against the records. A block time limit bounds the whole block
    (reconstruction and proof included): at a millisecond every block ends at its limit with
    nothing verified, and the run still counts every block."""
    run = _cli(tmp_path, "synth", "--persons", "3000", "--seed", "2", "-o", "p.parquet")
    assert run.returncode == 0, run.stderr
    base = ["sweep-publication", "p.parquet", "--schema", "persons", "--blocks", "6", "-K", "5"]
    run = _cli(tmp_path, *base, "--rules", "exact;suppress:3;round:3:zeros-exact", "-o", "sw")
    assert run.returncode == 0, run.stderr
    assert "block tables swept as persons_binned" in run.stderr
    df = pl.read_csv(tmp_path / "sw" / "sweep.csv")
    assert df["rule"].to_list() == ["exact", "suppress:3", "round:3:zeros-exact"]
    assert (df["claims_false"] == 0).all() and (df["failed_blocks"] == 0).all()
    assert (df["blocks"] == 6).all() and df["singled_out"][0] > 0
    assert df["blocks_unique"][0] == df["blocks_unique"].max()
    run = _cli(tmp_path, *base, "--rules", "exact", "--block-time-limit", "0.001", "-o", "sw2")
    assert run.returncode == 0, run.stderr
    row = pl.read_csv(tmp_path / "sw2" / "sweep.csv").row(0, named=True)
    assert row["blocks"] == 6 and row["claims_false"] == 0
    assert row["blocks_time_limit"] == 6 and row["singled_out"] == 0


def test_withheld_cells_read_alike_from_a_long_and_a_wide_file(tmp_path):
    """A summary-file style wide CSV marking withheld cells 'X' reads to the same long table
    (nulls where withheld) as the long file leaving them empty."""
    from tabrecon.records.synth import SynthConfig
    from tabrecon.schema.registry import population
    from tabrecon.tables.reader import read_unit_tables

    gq = population("group_quarters")
    units = gq.synthesize(SynthConfig(persons=40_000), 2)
    long = tabulate_units(units)
    pub = Publication.parse("suppress:3")
    shown = pub.publish(long["value"].to_numpy())
    long = long.with_columns(pl.Series("value", shown).replace(MISSING, None))
    assert long["value"].null_count() > 0
    long.write_csv(tmp_path / "long.csv")
    wide = (
        long.with_columns(pl.col("value").cast(pl.String).fill_null("X"))
        .pivot(on="cell", index="geoid", values="value")
        .rename({"geoid": "GEO_ID"})
        .with_columns(("1000000US" + pl.col("GEO_ID")).alias("GEO_ID"))
    )
    wide.write_csv(tmp_path / "wide.csv")
    a, b = (
        read_unit_tables(tmp_path / f, gq, withheld=True).to_frame().sort("geoid", "cell")
        for f in ("long.csv", "wide.csv")
    )
    assert a.equals(b) and a["value"].null_count() == long["value"].null_count()
    with pytest.raises(InputError, match="'X' is not a count"):
        read_unit_tables(tmp_path / "wide.csv", gq)


def test_complementary_suppression_leaves_no_withheld_cell_recoverable(tmp_path):
    """Issue 90 item 4: ``suppress:T:complementary`` withholds further cells until no withheld
    one follows from a block's published cells by its tables' identities (checked here apart,
    with one linear program per cell over the identities), the engine reads such a release
    (every block still admits the truth), and the sweep attacks it beside primary suppression
    with no false claim."""
    from scipy.optimize import linprog

    from tabrecon.metrics.publication_sweep import sweep_publication
    from tabrecon.records.synth import SynthConfig
    from tabrecon.schema.registry import population
    from tabrecon.tables.consistency import identities_of
    from tabrecon.tables.publishing import publish_counts

    gq = population("group_quarters")
    units = gq.synthesize(SynthConfig(persons=20_000), 3)
    long = tabulate_units(units)
    primary = publish_counts(long, gq, Publication.parse("suppress:3"))[2]
    pub = Publication.parse("suppress:3:complementary")
    out, true, shown = publish_counts(long, gq, pub)
    assert (shown == MISSING).sum() > (primary == MISSING).sum() > 0
    assert ((primary == MISSING) <= (shown == MISSING)).all()  # the primary cells stay withheld
    ids = [(i.lhs, i.rhs) for i in identities_of(gq)]
    for geoid, part in out.group_by("geoid"):
        v = dict(zip(part["cell"].to_list(), part["value"].to_list(), strict=True))
        hidden = sorted(c for c, x in v.items() if x is None)
        if not hidden:
            continue
        rows, rhs = [], []
        for lhs, parts in ids:
            eq = [lhs, *parts]
            if not all(c in v for c in eq) or not any(v[c] is None for c in eq):
                continue
            rows.append([(1.0 if c == lhs else 0.0) - parts.count(c) for c in hidden])
            rhs.append(sum(v[c] for c in parts if v[c] is not None) - (v[lhs] or 0))
        for j, c in enumerate(hidden):
            cost = np.eye(len(hidden))[j]
            lo = linprog(cost, A_eq=rows, b_eq=rhs, bounds=(0, None), method="highs")
            hi = linprog(-cost, A_eq=rows, b_eq=rhs, bounds=(0, None), method="highs")
            assert -hi.fun - lo.fun > 0.5, (geoid, c)  # not given away
    got = reconstruct_units(out, gq, ReconstructOptions(level="block", publication=pub))
    assert not got.blocks["status"].is_in(["infeasible", "failed"]).any()
    df = sweep_publication(units, gq, ["suppress:3", str(pub)], k_solutions=5, k_values=(1, 2))
    assert (df["claims_false"] == 0).all() and (df["failed_blocks"] == 0).all()
    assert df["cells_withheld"][1] > df["cells_withheld"][0]
    with pytest.raises(TabreconError, match="suppress:T\\[:zeros\\]\\[:complementary\\]"):
        Publication.parse("round:3:complementary")
