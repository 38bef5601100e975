"""Releases declared in a TOML file (tabrecon.tables.declaration), run with the same commands.

The two worked examples of docs/declarations.md run from their declaration files here: a
school release (counts with a suppressed cell, a median age) and a census-style meshblock
release randomly rounded to base 3. A declaration with an unknown attribute, category, measure
or key is refused in one line naming the file, the key and the line.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.attacks.claims.block import generate_then_verify
from tabrecon.attacks.claims.release import matching_units
from tabrecon.errors import InputError
from tabrecon.schema.spec import read_units
from tabrecon.tables.declaration import load_declaration, population
from tabrecon.tables.publication import Publication
from tabrecon.tables.reader import read_unit_tables
from tabrecon.tables.spec import compiled, tabulate_units

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "declarations"
SCHOOL = EXAMPLES / "school.toml"
MESHBLOCKS = EXAMPLES / "meshblocks.toml"


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(list(args), cwd)


def _within(pop, published: pl.DataFrame, rebuilt) -> bool:
    """Every count of ``rebuilt``'s tables lies in the interval its published value allows."""
    names = tuple(t.name for t in pop.tables())
    pub = Publication.parse(pop.publication)
    cells, _ = compiled(pop, names)
    ids = [c.id for c in cells]
    mine = tabulate_units(rebuilt, names).filter(pl.col("cell").is_in(ids))
    both = mine.join(published, on=["geoid", "cell"], suffix="_pub")
    table = {c.id: c.table for c in cells}
    lo, hi = pub.interval(
        both["value_pub"].fill_null(-1).to_numpy(), [table[c] for c in both["cell"].to_list()]
    )
    v = both["value"].to_numpy()
    return both.height == mine.height and bool(((v >= lo) & (v <= hi)).all())


def test_the_python_api_reconstructs_a_declared_release_as_published(tmp_path):
    """``tabrecon.reconstruct`` reads the declared rule (suppress:3: 1s and 2s withheld) as the
    command does: the records fit every published interval and median; told the counts are
    exact, each school is refused naming a withheld cell."""
    import tabrecon as tr
    from tabrecon.tables.publishing import publish_counts
    from tabrecon.tables.spec import as_published, tabulate

    pop = population(str(SCHOOL))
    truth = pop.records(EXAMPLES / "school_pupils.csv")
    long, _, _ = publish_counts(tabulate(truth).to_frame(), pop, Publication.parse(pop.publication))
    as_published(long, pop).write_csv(tmp_path / "t.csv")  # medians as decimals
    ts = read_unit_tables(tmp_path / "t.csv", pop, withheld=True)
    run = tr.reconstruct(ts, population=str(SCHOOL))
    assert not run.failed and len(run.records) == len(truth)
    assert _within(pop, ts.to_frame(), run.records)
    exact = tr.reconstruct(ts, population=pop, publication="exact")  # each school refused
    assert len(exact.failed) == 4 and len(exact.records) == 0
    why = exact.failed[0]["message"]
    assert "school 100201, cell T2_03: the value is withheld, but the publication rule" in why


def test_the_school_example_runs_from_its_declaration(tmp_path):
    """Tabulate publishes the counts as declared (1s and 2s withheld) and the median ages as
    decimals; reconstruct and claims read them under the declared rule; the reconstruction fits
    every published interval and median; every verified claim is true of the pupils."""
    records = EXAMPLES / "school_pupils.csv"
    run = _cli(tmp_path, "tabulate", str(records), "--schema", str(SCHOOL), "-o", "t.csv")
    assert run.returncode == 0 and "suppress:3" in run.stdout, run.stderr
    text = (tmp_path / "t.csv").read_text()
    assert "T4_01,14.3" in text  # a median age, one decimal
    published = pl.read_csv(tmp_path / "t.csv", schema_overrides={"geoid": pl.String})
    assert published["value"].null_count() > 0  # a withheld count
    run = _cli(tmp_path, "reconstruct", "t.csv", "--schema", str(SCHOOL), "-o", "rec.csv")
    assert run.returncode == 0, run.stderr
    assert "records in 4 schools" in run.stdout
    pop = population(str(SCHOOL))
    rebuilt = read_units(tmp_path / "rec.csv", pop.schema)
    long = read_unit_tables(tmp_path / "t.csv", pop, withheld=True).to_frame()
    assert _within(pop, long, rebuilt)
    # a range is in order: T2 places each pupil only in a two-year group, and the file says
    # so (age_min, age_max) instead of calling one solved year known
    assert rebuilt.ranges is not None
    first, last = rebuilt.ranges["age"]
    assert set(zip(first.tolist(), last.tolist(), strict=True)) <= {(11, 12), (13, 14), (15, 16)}
    assert ((first <= rebuilt.codes["age"]) & (rebuilt.codes["age"] <= last)).all()
    medians = tabulate_units(rebuilt, ("T4",)).join(long, on=["geoid", "cell"])
    assert (medians["value"] - medians["value_right"]).abs().max() <= 1  # a tie either way
    run = _cli(
        tmp_path,
        "claims",
        "t.csv",
        "--schema",
        str(SCHOOL),
        "--truth",
        str(records),
        "-o",
        "cl",
    )
    assert run.returncode == 0, run.stderr
    claims = pl.read_csv(
        tmp_path / "cl" / "school_claims.csv", schema_overrides={"geoid": pl.String}
    )
    truth = read_units(records, pop.schema)
    assert claims.height > 0
    assert [len(h) for h in matching_units(claims, truth)] == claims["m"].to_list()


def test_the_meshblock_example_runs_from_its_declaration(tmp_path):
    """Base-3 random rounding as declared: every published count a multiple of 3; the
    reconstruction fits every published interval; read as exact counts the same file
    contradicts itself in most meshblocks (exit 1, each named); claims verified on a few
    meshblocks are true."""
    records = EXAMPLES / "meshblock_persons.csv"
    run = _cli(tmp_path, "tabulate", str(records), "--schema", str(MESHBLOCKS), "-o", "t.csv")
    assert run.returncode == 0 and "round:3:random" in run.stdout, run.stderr
    pop = population(str(MESHBLOCKS))
    long = read_unit_tables(tmp_path / "t.csv", pop).to_frame()
    assert (long["value"] % 3 == 0).all()
    run = _cli(tmp_path, "reconstruct", "t.csv", "--schema", str(MESHBLOCKS), "-o", "rec.csv")
    assert run.returncode == 0, run.stderr
    assert _within(pop, long, read_units(tmp_path / "rec.csv", pop.schema))
    run = _cli(
        tmp_path,
        "reconstruct",
        "t.csv",
        "--schema",
        str(MESHBLOCKS),
        "--publication",
        "exact",
        "-o",
        "x.csv",
    )
    assert run.returncode == 1 and "meshblock 1200000: infeasible" in run.stderr, run.stderr
    truth = read_units(records, pop.schema)
    small = sorted(set(truth.block_geoid.tolist()))[:4]
    res = generate_then_verify(
        long,
        pop,
        k_values=(1, 2),
        k_solutions=10,
        blocks=small,
        truth=truth,
        publication=Publication.parse(pop.publication),
        block_seconds=60,
    )
    if res.claims.height:
        assert [len(h) for h in matching_units(res.claims, truth)] == res.claims["m"].to_list()


def test_workers_read_the_declaration_too(tmp_path):
    """A worker process starts clean: it reads the declaration the command was given, and two
    workers write what one does."""
    records = EXAMPLES / "school_pupils.csv"
    assert (
        _cli(tmp_path, "tabulate", str(records), "--schema", str(SCHOOL), "-o", "t.csv").returncode
        == 0
    )
    outs = []
    for w in ("1", "2"):
        run = _cli(
            tmp_path,
            "reconstruct",
            "t.csv",
            "--schema",
            str(SCHOOL),
            "--workers",
            w,
            "-o",
            f"r{w}.csv",
        )
        assert run.returncode == 0, run.stderr
        outs.append(pl.read_csv(tmp_path / f"r{w}.csv").sort(pl.all()))
    assert outs[0].equals(outs[1])


def test_a_sweep_over_a_declared_release_with_medians_makes_no_false_claim(tmp_path):
    """The rule rounds or withholds counts only: a median is published as declared (rounding
    it as a count made false claims before)."""
    records = EXAMPLES / "school_pupils.csv"
    run = _cli(
        tmp_path,
        "sweep-publication",
        str(records),
        "--schema",
        str(SCHOOL),
        "--rules",
        "exact,round:2,suppress:3",
        "-o",
        "sw",
    )
    assert run.returncode == 0, run.stderr
    sweep = pl.read_csv(tmp_path / "sw" / "sweep.csv")
    assert sweep.height == 3 and (sweep["claims_false"] == 0).all()
    assert "schools unique" in run.stdout
    args = ["sweep-publication", str(records), "--schema", str(SCHOOL), "--rules", "exact"]
    run = _cli(tmp_path, *args, "--blocks", "2", "-o", "sw2")  # the 2 schools nearest the median
    assert run.returncode == 0, run.stderr
    assert pl.read_csv(tmp_path / "sw2" / "sweep.csv")["blocks"].to_list() == [2]


SRC = SCHOOL.read_text()


@pytest.mark.parametrize(
    ("old", "new", "key", "words"),
    [
        (
            'where = {sex = ["girl"]}}',
            'where = {colour = ["red"]}}',
            "tables[1].lines[3].where.colour",
            "unknown attribute 'colour'",
        ),
        (
            'where = {sex = ["girl"]}}',
            'where = {sex = ["gril"]}}',
            "tables[1].lines[3].where.sex",
            "no category 'gril'",
        ),
        ('measure = "median"', 'measure = "mode"', "tables[4].measure", "unknown measure 'mode'"),
        (
            'title = "Pupils by sex"',
            'titel = "Pupils by sex"',
            "tables[1].titel",
            "unknown key 'titel'",
        ),
        ('of = "age"', 'of = "height"', "tables[4].of", "unknown attribute 'height'"),
        ("range = [11, 16]", "range = [16, 11]", "attributes[2].range", "range must go up"),
        (
            'description = "Age in completed years on the census day"',
            'ordered = "yes"',
            "attributes[2].ordered",
            "ordered must be true or false",
        ),
    ],
)
def test_a_declaration_error_names_file_key_and_line(tmp_path, old, new, key, words):
    text = SRC.replace(old, new, 1)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), start=1) if new in ln)
    with pytest.raises(InputError) as got:
        load_declaration(path)
    msg = str(got.value)
    assert msg.startswith(f"{path}, line {line}: key {key}: ") and words in msg, msg
    run = _cli(tmp_path, "tables", "list", "--schema", str(path))
    assert run.returncode == 2 and f"line {line}" in run.stderr and "Traceback" not in run.stderr


def test_a_toml_syntax_error_is_named_at_its_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(SRC.replace('name = "T2"', 'name = "T2', 1))
    with pytest.raises(InputError, match=r"bad.toml, line 36: not valid TOML"):
        load_declaration(path)


def test_a_declaration_cannot_take_a_census_population_name(tmp_path):
    path = tmp_path / "households.toml"
    path.write_text(SRC.replace('name = "school"', 'name = "households"', 1))
    with pytest.raises(InputError, match="names another population"):
        load_declaration(path)


def test_a_declared_geography_names_its_records_column(tmp_path):
    pop = population(str(SCHOOL))
    assert pop.schema.geoid_column == "school_id" and pop.schema.geoid_digits == 6
    bad = tmp_path / "p.csv"
    bad.write_text("school_id,sex,age,free_meals\n1002,boy,12,no\n")
    with pytest.raises(
        InputError, match=r"p.csv, line 2, column 'school_id': school_id must be 6 digits"
    ):
        read_units(bad, pop.schema)
    ok = tmp_path / "q.csv"
    ok.write_text("school_id,sex,age,free_meals\n100201,girl,12,yes\n")
    units = read_units(ok, pop.schema)
    assert np.array_equal(units.codes["sex"], [2])


def test_an_audit_of_a_declared_release_attacks_it_as_published_and_sweeps_rules(tmp_path):
    """audit --schema FILE.toml attacks the counts as the declaration publishes them
    (suppress:3) and, with --publication-rules, adds the section on what would have stopped
    it: a row per rule, the plot, no false claim. A bad rule, or rules with --tables, are
    refused before any work."""
    records = EXAMPLES / "school_pupils.csv"
    (tmp_path / "fast.toml").write_text("[households]\nk_values = [1, 2]\nk_solutions = 10\n")
    args = ["audit", str(records), "--schema", str(SCHOOL), "--config", "fast.toml", "--quiet"]
    run = _cli(tmp_path, *args, "--publication-rules", "exact;round:3;suppress:3", "-o", "a")
    assert run.returncode == 0, run.stderr
    import json

    summary = json.loads((tmp_path / "a" / "summary.json").read_text())["school"]
    assert summary["publication"] == "suppress:3" and summary["geography"] == "school"
    html = (tmp_path / "a" / "report.html").read_text()
    assert "What would have stopped it: publication rules" in html
    assert "its counts published suppress:3" in html
    sweep = pl.read_csv(tmp_path / "a" / "results" / "school_sweep.csv")
    assert sweep["rule"].to_list() == ["exact", "round:3", "suppress:3"]
    assert (sweep["claims_false"] == 0).all() and (
        tmp_path / "a" / "school_publication.png"
    ).exists()
    bad = _cli(tmp_path, *args, "--publication-rules", "exact;round:zero", "-o", "b")
    assert bad.returncode == 2 and "round:zero" in bad.stderr and not (tmp_path / "b").exists()
    tables = _cli(
        tmp_path,
        "audit",
        "--tables",
        "t.csv",
        "--schema",
        str(SCHOOL),
        "--publication-rules",
        "exact",
        "-o",
        "c",
    )
    assert tables.returncode == 2 and "swept over records" in tables.stderr


def test_listed_categories_are_in_order_only_when_declared_so(tmp_path):
    """``range`` declares an ordered attribute; ``categories`` one in no order unless
    ``ordered = true``; ``ordered = false`` takes a range's order away."""
    assert population(str(SCHOOL)).schema.attribute("age").ordered
    assert not population(str(SCHOOL)).schema.attribute("sex").ordered
    for old, new, want in (
        ("range = [11, 16]", "range = [11, 16]\nordered = false", False),
        (
            'categories = [[1, "boy"], [2, "girl"]]',
            'categories = [[1, "boy"], [2, "girl"]]\nordered = true',
            True,
        ),
    ):
        attr = "age" if old.startswith("range") else "sex"
        text = SRC.replace(old, new, 1).replace('name = "school"', f'name = "school_{attr}"', 1)
        path = tmp_path / f"o{want}.toml"
        path.write_text(text)
        schema = load_declaration(path).schema
        assert schema.attribute(attr).ordered is want


_EDITED = """name = "{name}"
unit = "person"
geography = "school"
geoid_digits = 4
[[attributes]]
name = "age"
range = [0, 20]
[[attributes]]
name = "marital"
categories = [[0, "never married"], [1, "married"]]
[[edits]]
name = "married adults"
if = {{marital = ["married"]}}
then = {{age = {{min = 15}}}}
message = "a married person is 15 or older"
[[tables]]
name = "T1"
title = "Persons by marital status"
lines = [{{label = "All"}}, {{label = "Married", where = {{marital = ["married"]}}}}]
[[tables]]
name = "T2"
title = "Persons by age"
lines = [
    {{label = "Under 15", where = {{age = {{max = 14}}}}}},
    {{label = "15+", where = {{age = {{min = 15}}}}}},
]
"""


def test_edit_rules_in_a_declaration_bind_records_and_reconstruction(tmp_path):
    """Issue 90 item 3: ``[[edits]]`` ("married requires age >= 15") are the schema's rules: no
    feasible type breaks one, a records file that does is refused naming the row and the
    edit, and a release that publishes no table saying so is still reconstructed within them
    (one married person and one person under 15 in a school of two: the married one is 15 or
    older, the other the child, in every population the tables allow)."""
    (tmp_path / "edited.toml").write_text(_EDITED.format(name="edited"))
    pop = load_declaration(tmp_path / "edited.toml")
    s = pop.schema
    codes = s.decode(s.feasible_types())
    assert not ((codes["marital"] == 1) & (codes["age"] < 15)).any()
    assert ((codes["marital"] == 0) & (codes["age"] < 15)).any()
    (tmp_path / "people.csv").write_text("school_id,age,marital\n0001,10,1\n")
    with pytest.raises(InputError, match=r"people\.csv.*a married person is 15 or older"):
        read_units(tmp_path / "people.csv", s)
    long = pl.DataFrame(
        {
            "geoid": ["0001"] * 4,
            "cell": ["T1_01", "T1_02", "T2_01", "T2_02"],
            "value": [2, 1, 1, 1],
        }
    )
    from tabrecon.engine.reconstruct import reconstruct_units

    rec = reconstruct_units(long, pop)
    got = rec.units.codes
    married = got["marital"] == 1
    assert married.sum() == 1 and (got["age"][married] >= 15).all()
    assert rec.blocks["status"].item() in ("unique", "varies")
    for bad, said in (
        ("then = {age = {min = 15}}", "then = {}"),
        ('name = "married adults"', 'nme = "married adults"'),
        ("then = {age = {min = 15}}", "then = {marital = {min = 1}}"),
        ("then = {age = {min = 15}}", "then = {age = {min = 30}}"),
    ):
        (tmp_path / "bad.toml").write_text(_EDITED.format(name="bad").replace(bad, said))
        with pytest.raises(InputError, match=r"bad\.toml, line \d+: key edits\[1\]"):
            load_declaration(tmp_path / "bad.toml")


def _in_worker(pop) -> tuple[str, str, int, str]:
    """What a worker process makes of a population it was sent."""
    return pop.name, pop.key, len(pop.tables()), pop.schema.release.value


def test_a_population_reaches_a_worker_as_its_value():
    """Issue 88: a worker receives the population itself -- pickled as its key and declaration
    file, made again there once -- for a census population in another release and for a
    declaration the worker never read (a fresh process, no re-registration asked for)."""
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    from tabrecon.schema.registry import population as registered

    school = population(str(SCHOOL))
    dhc = registered("households").in_release("dhc-2020")
    assert len(pickle.dumps(school)) < 500 and pickle.loads(pickle.dumps(dhc)) is dhc
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
        got = list(ex.map(_in_worker, [school, dhc]))
    assert got[0] == (school.name, school.key, len(school.tables()), "sf1-2010")
    assert got[1] == ("households", "households@dhc-2020", len(dhc.tables()), "dhc-2020")


@pytest.mark.parametrize(
    ("new", "key", "words"),
    [
        ("bins = [11, 14]", "tables[4].bins", "bins are for a grouped median"),
        ('median = "grouped"', "tables[4].bins", "needs bins"),
        ('median = "middle"', "tables[4].median", "unknown median rule 'middle'"),
    ],
)
def test_a_median_rule_and_its_bins_are_checked_where_declared(tmp_path, new, key, words):
    text = SRC.replace('median = "interpolated"', new, 1)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as got:
        load_declaration(path)
    msg = str(got.value)
    assert f"key {key}: " in msg and words in msg, msg
    # bins leaving out an age the attribute has are named with the age
    text = SRC.replace('median = "interpolated"', 'median = "grouped"\nbins = [11, 14, 16]', 1)
    path.write_text(text)
    with pytest.raises(InputError, match="age 16 lies in none of the bins"):
        load_declaration(path)


def _grouped(ages: np.ndarray, edges: tuple[int, ...]) -> float:
    """The median by linear interpolation within the bins ``[e_i, e_i+1)``."""
    below, n = 0, ages.size
    for lo, hi in itertools.pairwise(edges):
        f = int(((ages >= lo) & (ages < hi)).sum())
        if f and 2 * (below + f) >= n:
            return lo + (hi - lo) * (n - 2 * below) / (2 * f)
        below += f
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("name", "declared", "expected"),
    [
        # numpy's median: the mean of the two middle ages of an even count
        ("school_mid", 'median = "midpoint"', lambda ages: float(np.median(ages))),
        (
            "school_grouped",
            'median = "grouped"\nbins = [11, 14, 17]',
            lambda ages: _grouped(ages, (11, 14, 17)),
        ),
    ],
)
def test_midpoint_and_grouped_medians_publish_and_reconstruct_as_declared(
    tmp_path, name, declared, expected
):
    """The school release with its median ages declared another way: tabulate publishes the
    textbook value, and the reconstruction of every school meets every published median."""
    path = tmp_path / f"{name}.toml"
    text = SRC.replace('median = "interpolated"', declared, 1)
    path.write_text(text.replace('name = "school"', f'name = "{name}"', 1))
    pop = population(str(path))
    csv = EXAMPLES / "school_pupils.csv"
    records = pl.read_csv(csv, schema_overrides={"school_id": pl.String})
    run = _cli(tmp_path, "tabulate", str(csv), "--schema", str(path), "-o", "t.csv")
    assert run.returncode == 0, run.stderr
    long = read_unit_tables(tmp_path / "t.csv", pop, withheld=True).to_frame()
    medians = long.filter(pl.col("cell") == "T4_01").sort("geoid")
    assert medians.height == 4
    for school, value in zip(medians["geoid"], medians["value"], strict=True):
        ages = records.filter(pl.col("school_id") == school)["age"].to_numpy()
        assert value == int(np.floor(expected(ages) * 10 + 0.5)), (school, ages, value)
    run = _cli(tmp_path, "reconstruct", "t.csv", "--schema", str(path), "-o", "rec.csv")
    assert run.returncode == 0, run.stderr
    rebuilt = read_units(tmp_path / "rec.csv", pop.schema)
    again = tabulate_units(rebuilt, ("T4",)).join(long, on=["geoid", "cell"])
    published = again.filter(pl.col("value_right").is_not_null())
    assert published.height >= 4
    assert (published["value"] - published["value_right"]).abs().max() <= 1  # a tie either way


AREAS = EXAMPLES / "areas.toml"


def test_the_area_example_withholds_statistics_with_counts_and_keeps_its_edit(tmp_path):
    """Worked example 3 (two of its areas, to keep the test short): midpoint medians equal
    numpy's, no median or mean is published for a count the rule withholds, and the
    reconstruction meets every published median and mean and the edit rule (nobody under 15
    has married, which no table says: marital status is published for persons 15 and over)."""
    records = pl.read_csv(EXAMPLES / "area_persons.csv", schema_overrides={"area_id": pl.String})
    two = records.filter(pl.col("area_id").is_in(["5101", "5107"]))
    two.write_csv(tmp_path / "two.csv")
    run = _cli(tmp_path, "tabulate", "two.csv", "--schema", str(AREAS), "-o", "t.csv")
    assert run.returncode == 0 and "2 areas x 29 cells" in run.stdout, run.stdout + run.stderr
    pop = population(str(AREAS))
    long = read_unit_tables(tmp_path / "t.csv", pop, withheld=True).to_frame()
    value = {(g, c): v for g, c, v in long.select("geoid", "cell", "value").iter_rows()}
    for area in ("5101", "5107"):
        ages = two.filter(pl.col("area_id") == area)["age"].to_numpy()
        assert value[(area, "A5_01")] == int(np.floor(np.median(ages) * 10 + 0.5))
        for race in range(1, 5):  # a race's median age is withheld exactly with its count
            count, median = value[(area, f"A2_{race + 1:02d}")], value[(area, f"A7_{race:02d}")]
            assert (median is None) == (count is None or count == 0), (area, race)
    run = _cli(tmp_path, "reconstruct", "t.csv", "--schema", str(AREAS), "-o", "rec.csv")
    assert run.returncode == 0 and "in 2 areas (area)" in run.stdout, run.stdout + run.stderr
    rebuilt = read_units(tmp_path / "rec.csv", pop.schema)
    ages, marital = rebuilt.codes["age"], rebuilt.codes["marital"]
    assert not ((ages < 15) & (marital != 1)).any()  # the edit rule holds
    stats = ("A5", "A6", "A7", "A8")
    again = tabulate_units(rebuilt, stats).join(long, on=["geoid", "cell"])
    published = again.filter(pl.col("value_right").is_not_null())
    assert published.height >= 10
    assert (published["value"] - published["value_right"]).abs().max() <= 1  # a tie either way
