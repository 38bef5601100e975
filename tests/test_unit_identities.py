"""Consistency identities derived from any schema's table declarations: they hold on every
tabulation, they imply the identities written by hand for SF1's housing-unit tables and every
block identity of the person pipeline, a broken cell is named, and the CLI checks a housing-unit
table file with them."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import polars as pl
import pytest
import scipy.linalg
from cli_run import run_cli

from tabrecon.records.households import synthesize_households
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.schema import PERSONS, person_units, registry
from tabrecon.schema.catalog import HOUSING_UNITS
from tabrecon.schema.registry import of_schema, population
from tabrecon.schema.spec import write_units
from tabrecon.tables import consistency
from tabrecon.tables.consistency import Identity, check_unit_consistency, identities, identities_of
from tabrecon.tables.spec import compiled, tables_of, tabulate_units


def _vectors(schema, ids):
    """Identities as rows over the variables they relate: each cell, and each block cell summed
    over a tract (a block cell in a tract identity) as a variable of its own."""
    block = [c.id for t in tables_of(of_schema(schema)) if t.level == "block" for c in t.cells()]
    cells = [c.id for t in tables_of(of_schema(schema)) for c in t.cells()] + [
        f"Σ{c}" for c in block
    ]
    where = {c: i for i, c in enumerate(cells)}
    blocks = set(block)

    def var(i, c):
        return where[f"Σ{c}" if i.level == "tract" and c in blocks else c]

    out = np.zeros((len(ids), len(cells)))
    for k, i in enumerate(ids):
        out[k, var(i, i.lhs)] += 1
        for r in i.rhs:
            out[k, var(i, r)] -= 1
    return out, where


@functools.cache
def _span(schema):
    """An orthonormal basis of the derived identities' span (one SVD a schema: three least-squares
    solves of the person identities took 17 s of the suite)."""
    G, _ = _vectors(schema, identities_of(of_schema(schema)))
    return scipy.linalg.orth(G.T)


def _implied(schema, given):
    """True when every identity in ``given`` follows linearly from the derived ones (each is a
    combination of them: its projection on their span leaves no residual)."""
    Q = _span(schema)
    B, _ = _vectors(schema, given)
    return bool(np.abs(Q @ (Q.T @ B.T) - B.T).max() < 1e-6)


def _sum(lhs, *rhs):
    return Identity("block", lhs, tuple(rhs), "hand")


#: the SF1 housing-unit identities written by hand in test_unit_tables (an independent oracle)
HAND = [
    _sum("H0010001", "H0030001"),
    _sum("H0030001", "H0030002", "H0030003"),
    _sum("H0050001", "H0030003"),
    *(
        _sum(t, "H0030002")
        for t in (
            "H0040001",
            "H0060001",
            "H0070001",
            "H0130001",
            "H0140001",
            "H0150001",
            "H0160001",
            "H0170001",
            "P0180001",
        )  # fmt: skip
    ),
    _sum("H0140002", "H0040002", "H0040003"),
    _sum("H0040004", "H0140010"),
    _sum("H0050001", *(f"H005000{k}" for k in range(2, 9))),
    _sum("H0030002", *(f"H01300{k:02d}" for k in range(2, 9))),
    *(
        _sum(f"{t}{first:04d}", *(f"{t}{first + k:04d}" for k in range(1, 8)))
        for first in (2, 10)
        for t in ("H007", "H014", "H016")
    ),
    _sum("H0170002", *(f"H017{k:04d}" for k in range(3, 12))),
    _sum("P0180002", "P0180003", "P0180004"),
    _sum("P0180004", "P0180005", "P0180006"),
    _sum("P0180007", "P0180008", "P0180009"),
    _sum("P0180008", "H0130002"),
    _sum("H0070002", "H0150003", "H0150006"),
]


def test_derived_identities_imply_the_hand_written_housing_ones():
    assert _implied(HOUSING_UNITS, HAND)
    # and not vacuously: a false one is not implied
    assert not _implied(HOUSING_UNITS, [_sum("H0040002", "H0140002")])


def _tract(lhs, *rhs):
    return Identity("tract", lhs, tuple(rhs), "hand")


#: person identities written by hand from the SF1 table stubs (an independent oracle); at tract
#: level a block cell stands for its sum over the tract's blocks
PERSON_HAND = [
    _sum("P0010001", "P0080001"),
    _sum("P0010001", "P0090001"),
    _sum("P0010001", "P0030001"),
    _sum("P0090001", "P0090002", "P0090003"),
    _sum("P0040001", "P0040002", "P0040003"),
    _sum("P0100001", "P0110001"),
    _sum("P0010001", "P0120002", "P0120026"),
    _sum("P0120002", *(f"P0120{k:03d}" for k in range(3, 26))),
    _sum("P0010001", *(f"P012{r}001" for r in "ABCDEFG")),
    _tract("PCT0120001", "P0010001"),
    _tract("PCT0120002", "P0120002"),
    _tract("PCT0120001", "PCT0120002", "PCT0120106"),
    _tract("PCT0120001", *(f"PCT012{r}001" for r in "HIJKLMNO")),
    _tract("PCT0120001", *(f"PCT012{r}001" for r in "ABCDEFG")),
]


def test_derived_identities_imply_the_hand_written_person_ones():
    """The person tables' identities, derived from their declarations like any schema's, imply
    those written by hand from the table stubs: within a block, across P3-P5, and between a
    tract's PCT12 cells and its blocks' sums (PCT12H with PCT12I-O found as a family's covering
    set, not listed)."""
    assert _implied(PERSONS, PERSON_HAND)
    # and not vacuously: a tract's males against its blocks' females is not implied
    assert not _implied(PERSONS, [_tract("PCT0120002", "P0120026")])
    assert not _implied(PERSONS, [_sum("P0120002", "P0120026")])
    rules = {i.rule for i in identities_of(population("persons"))}
    assert {"partition:PCT12A-G", "partition:PCT12H-O", "partition:P12A-G"} <= rules
    # the person identities add the race tallies (a person counted once per race)
    tally = [i for i in identities(population("persons")) if i.rule == "tally"]
    assert len(tally) == 3 and tally[0].rhs == tuple(f"P006000{k}" for k in range(2, 8))


@pytest.mark.parametrize("seed", [0, 5])
def test_identities_hold_on_every_housing_tabulation(seed):
    _, units = synthesize_households(SynthConfig(persons=3_000), seed=seed)
    long = tabulate_units(units)
    rep = check_unit_consistency(long, population("households"))
    blocks = long["geoid"].n_unique()
    assert rep.ok and rep.skipped == 0
    assert rep.checked == len(identities_of(population("households"))) * blocks


def _expected(schema, long):
    """Identities x geounits, level by level (block identities on blocks, tract on tracts)."""
    n = long.group_by(pl.col("geoid").str.len_chars().alias("n")).agg(pl.col("geoid").n_unique())
    units = dict(zip(n["n"].to_list(), n["geoid"].to_list(), strict=True))
    length = {"block": 15, "tract": 11}
    return sum(units.get(length[i.level], 0) for i in identities_of(of_schema(schema)))


def test_identities_hold_on_person_tabulations():
    """Block and tract identities (PCT12's ages summing to the tract's P1, its A-O iterations
    to the tract's race counts), each on the geounits of its level."""
    md = synthesize(SynthConfig(persons=1_500), seed=4)
    long = tabulate_units(person_units(md))
    rep = check_unit_consistency(long, population("persons"))
    levels = {i.level for i in identities_of(population("persons"))}
    assert levels == {"block", "tract"}
    assert rep.ok and rep.skipped == 0 and rep.checked == _expected(PERSONS, long)
    # a tract's count off by one is named against its blocks' sum
    tract = long.filter(pl.col("geoid").str.len_chars() == 11)["geoid"][0]
    hit = (pl.col("geoid") == tract) & (pl.col("cell") == "PCT0120001")
    bad = check_unit_consistency(
        long.with_columns(pl.when(hit).then(pl.col("value") + 1).otherwise("value")),
        population("persons"),
    )
    texts = {str(v) for v in bad.violations}
    assert {v.geoid for v in bad.violations} == {tract}
    assert any(t.startswith(f"{tract}: Σblocks P0010001 = PCT0120001 fails") for t in texts)
    # a block lacking a cell: the tract identities summing it are skipped there, not failed
    block = long.filter(pl.col("geoid").str.starts_with(tract) & (pl.col("geoid") != tract))
    gone = (pl.col("geoid") == block["geoid"][0]) & (pl.col("cell") == "P0010001")
    part = check_unit_consistency(long.filter(~gone), population("persons"))
    assert part.ok and part.skipped > 0


@pytest.mark.realdata
def test_identities_hold_on_the_real_sample(real_md):
    long = tabulate_units(person_units(real_md))
    rep = check_unit_consistency(long, population("persons"))
    assert rep.ok and rep.skipped == 0 and rep.checked == _expected(PERSONS, long)
    assert long.filter(pl.col("geoid").str.len_chars() == 15)["geoid"].n_unique() == 8_530


def test_a_changed_cell_is_named_and_a_missing_one_skipped():
    _, units = synthesize_households(SynthConfig(persons=600), seed=1)
    long = tabulate_units(units)
    geoid = long["geoid"][0]
    hit = (pl.col("geoid") == geoid) & (pl.col("cell") == "H0130003")
    bad = long.with_columns(pl.when(hit).then(pl.col("value") + 2).otherwise("value"))
    rep = check_unit_consistency(bad, population("households"))
    assert not rep.ok and {v.geoid for v in rep.violations} == {geoid}
    texts = [str(v) for v in rep.violations]
    assert any("H0030002 = H0130002..H0130008 fails" in t and "right side" in t for t in texts)
    # a cell not held for a block: its identities are skipped there, not failed
    dropped = long.filter(~((pl.col("geoid") == geoid) & (pl.col("cell") == "H0130003")))
    rep = check_unit_consistency(dropped, population("households"))
    assert rep.ok and rep.skipped > 0


def test_check_tables_takes_the_household_schema(tmp_path):
    _, units = synthesize_households(SynthConfig(persons=600), seed=3)
    write_units(units, tmp_path / "u.csv")
    long = tabulate_units(units)
    long.write_csv(tmp_path / "t.csv")
    first = long["geoid"][0]
    long.with_columns(
        pl.when((pl.col("geoid") == first) & (pl.col("cell") == "H0040004"))
        .then(pl.col("value") + 1)
        .otherwise("value")
    ).write_csv(tmp_path / "bad.csv")

    def run(*a):
        return run_cli(["check-tables", *a], tmp_path)

    ok = run("t.csv", "--schema", "households")
    assert ok.returncode == 0 and "every identity holds" in ok.stdout, ok.stderr
    bad = run("bad.csv", "--schema", "households")
    assert bad.returncode == 1 and first in bad.stdout and "H0040004" in bad.stdout
    wrong = run("t.csv")  # housing cells read as person tables: the message says what to do
    assert wrong.returncode == 2 and "--schema households" in wrong.stderr
    assert "Traceback" not in wrong.stderr + bad.stderr


@pytest.mark.parametrize("name", registry.names())
def test_vendored_identities_are_the_derived_ones(name, monkeypatch):
    """Every schema the package declares has its identities vendored, and they are exactly what
    the derivation gives today (if this fails after a declaration changed: run
    ``python scripts/vendor_identities.py``)."""
    pop = registry.population(name)
    vendored = consistency._vendored(pop.schema.name)
    assert vendored, f"no vendored identities for {name}"
    derive = consistency._derive

    def refused(*args):
        raise AssertionError("derived, not read")

    with monkeypatch.context() as m:  # every identity is read from the file, none derived
        m.setattr(consistency, "_derive", refused)
        read = consistency.identities_of.__wrapped__(pop)
    monkeypatch.setattr(consistency, "_vendored", lambda _: {})
    assert consistency._derive is derive
    derived = consistency.identities_of.__wrapped__(pop)
    assert read == derived and len(read) > 0


def test_vendored_identities_are_keyed_by_the_declaration():
    """A set of tables, or a weight pattern, other than the one vendored is derived afresh: the
    key is a digest of the cells and where the matrix is not zero."""
    cells, W = compiled(
        population("households"), tuple(t.name for t in tables_of(population("households")))
    )
    key = consistency._key(cells, W)
    assert ("block", key) in consistency._vendored("households")
    moved = W.tolil()
    row = moved.rows[0]
    moved[0, row[0]] = 0  # one type dropped from the first cell
    assert consistency._key(cells, moved.tocsr()) != key
    renamed = [dataclasses.replace(cells[0], id="H9990001"), *cells[1:]]
    assert consistency._key(renamed, W) != key
    # a subset's identities are derived, and they are the subset's
    sub = identities_of(population("households"), ("H3", "H4"))
    assert sub[0].text() == "H0030001 = H0030002 + H0030003"
