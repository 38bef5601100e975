"""Persons: SF1 2010's person tables over (sex, single year of age, race, Hispanic origin).

The schema and its encoding live in :mod:`tabrecon.schema`; the tables are the 34 of Abowd et
al. and P3-P5 (:func:`person_tables`). Persons are reconstructed, certified and claimed by the
engine written over any schema (:mod:`tabrecon.attacks.release`: ``tabrecon.reconstruct``, ...);
what is theirs alone (the person file, 2020 names, the race tallies, the vendored identities,
their records handed to Python as :class:`~tabrecon.schema.Microdata`) is a plug-in registered
below; what their records offer beyond tables (linkage, the defenses, claims by tract, a
housing-unit file, a calibrated synthetic county) are their
:class:`~tabrecon.schema.registry.Capability` values.
``persons_binned`` is the same schema on certification's resolution (agebin38), registered for
the code written over any schema (each block's claims from its tables, ``sweep-publication``)
and not offered to users.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..records.synth import SynthConfig, synthesize
from ..schema import (
    AGE_MAX,
    AGEBIN38,
    AGEBIN_OF_AGE,
    N_AGES,
    PERSONS,
    PERSONS_BINNED,
    age_classes,
    age_label,
    person_records,
    person_units,
)
from ..schema.registry import Capability, Population, ReleaseTables, register
from ..schema.spec import Units
from ..tables.consistency import check_consistency
from ..tables.layout import (
    DHC_2020,
    STUB_SEPARATOR,
    level_of,
    name_parts,
    rows,
    stub_key,
    title_of,
    universe_of,
)
from ..tables.measures import Measure, MedianRule, Statistic
from ..tables.persons import (
    ALL_TABLES,
    WHOLE_POPULATION_CELLS,
    Cell,
    all_cells,
    cell_attrs,
    cell_positions,
    get_cell,
    resolve_tables,
)
from ..tables.published import cells_2020, name_2020
from ..tables.spec import Predicate, UnitTable, from_layout
from ..tables.tableset import MISSING, TableSet
from ..vocab import Geo, Level, Release

if TYPE_CHECKING:
    from ..engine.release import ReleaseReconstruction


def _person_predicate(c: Cell) -> Predicate:
    """An SF1 person cell's predicate over the person schema's file codes (only the attributes it
    restricts)."""
    pred: dict[str, tuple[int, ...]] = {}
    if c.sex != "any":
        pred["sex"] = (0,) if c.sex == "male" else (1,)
    if (c.age_min, c.age_max) != (0, AGE_MAX):
        pred["age"] = tuple(range(c.age_min, c.age_max + 1))
    if c.race != "any":
        pred["race"] = tuple(int(i) + 1 for i in np.flatnonzero(c.race_mask()))
    if c.hispanic != "any":
        pred["hispanic"] = (int(c.hispanic),)
    return pred


@cache
def person_tables() -> tuple[UnitTable, ...]:
    """SF1's person tables (:data:`tabrecon.tables.persons.ALL_TABLES`: the 34 -- block tables and
    the tract tables PCT12, PCT12A-O -- and P3-P5) as tables over the person schema
    (:data:`tabrecon.schema.PERSONS`),
    so that tabulation, the count model and Generate-then-Verify over a schema run on persons
    too, from the same cell definitions. The race tallies (P6 and P7's first cells: a person
    counted once per race) are not a count of records and are left out; every other cell keeps
    its official id.

    >>> p12a = next(t for t in person_tables() if t.name == "P12A")
    >>> p12a.cells()[1].id
    'P012A002'
    """
    out = []
    for t in ALL_TABLES:
        cells = [c for c in all_cells() if c.table == t.name and c.measure == "persons"]
        out.append(
            UnitTable(
                t.name,
                t.number,
                t.title,
                {},
                tuple((c.description(), _person_predicate(c)) for c in cells),
                prefix=t.prefix,
                level=t.level,
                schema=PERSONS,
                ids=tuple(c.id for c in cells),
                universe_label=t.universe,
            )
        )
    return tuple(out) + median_age_tables({t.name: t for t in out})


#: The race tallies (P6's and P7's totals): a person counted once per race, so not a count of
#: records; published, read and kept beside the person cells, never modelled.
RACE_TALLIES = {c.id: c.table for c in all_cells() if c.measure == "race_tally"}


def race_tally_weights() -> np.ndarray:
    """Each race tally's weight on every person type (:data:`RACE_TALLIES`' order, the types in
    :data:`~tabrecon.schema.PERSONS`' encoding): the number of races a person of the type
    reports, within the tally's universe. What tabulation counts them with.

    >>> int(race_tally_weights().sum(axis=1)[0] > 27_972)  # P0060001: some count 2+ races
    1
    """
    return np.stack([get_cell(c).type_weights() for c in RACE_TALLIES]).astype(np.int64)


#: SF1's median age, in years to one decimal: "computed on the basis of a single-year-of-age
#: distribution using a linear interpolation method" (SF1 2010 technical documentation, "Median
#: Age"): each age a spread over [a, a+1). The documentation names the method, not the interval
#: nor how a tie at .x5 was rounded: both are our reading (a tie is allowed either way). An
#: empty universe publishes 0.0, which no person can (one person aged 0 has median 0.5). Not
#: checked against published values: none are in this repository.
MEDIAN_AGE = Statistic(Measure.MEDIAN, "age", 1, MedianRule.INTERPOLATED, empty=0)


def median_age_tables(by_name: dict[str, UnitTable]) -> tuple[UnitTable, ...]:
    """P13 (median age by sex) and its iterations P13A-P13I, declared from the Bureau's layout
    (:func:`tabrecon.tables.spec.from_layout`), each iteration over the universe of P12's
    (P13B: persons who are Black alone, the predicate of P012B001)."""
    stubs = {"Median age": {}, "Both sexes": {}, "Male": {"sex": (0,)}, "Female": {"sex": (1,)}}
    out = [from_layout("P13", PERSONS, stubs, statistic=MEDIAN_AGE)]
    for it in "ABCDEFGHI":
        universe = by_name[f"P12{it}"].cells()[0].predicate
        out.append(from_layout(f"P13{it}", PERSONS, stubs, universe, statistic=MEDIAN_AGE))
    return tuple(out)


def _iterations(table: str, letters: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"{table}{i}" for i in letters)


_P12_LETTERS = [*"ABCDEFGHIJKLMNOPQRSTUVWXYZ", *(f"A{c}" for c in "ABCDEFGH")]
#: the 2020 DHC person tables declared: every block table over (sex, age, race, origin) and the
#: tract-level PCT12 family; P2 (urban and rural) and the household tables are not
DHC_PERSON_TABLES: tuple[str, ...] = (
    *("P1", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13", "P14"),
    *_iterations("P12", _P12_LETTERS),
    *_iterations("P13", "ABCDEFGHI"),
    "PCT12",
    *_iterations("PCT12", "ABCDEFGHIJKLMNO"),
)
#: block-level 2020 DHC tables over persons that are not declared, and why
DHC_LEFT_OUT = {
    "P2": "urban and rural: a property of the block's geography, not of the person",
    "P15, P17": "persons in households (by age; by relationship): the person schema has no "
    "household membership or relationship",
    "P16, P16A-V, P19-P21": "household tables: declared over housing units (--schema households)",
    "P18": "group quarters by type: declared over group quarters (--schema group_quarters)",
}
_RACES = (
    "White",
    "Black or African American",
    "American Indian and Alaska Native",
    "Asian",
    "Native Hawaiian and Other Pacific Islander",
    "Some Other Race",
)


def race_predicate(who: str) -> Predicate:
    """The persons an iteration's universe names (``People who are ...``), over the person
    schema's race codes and origin: a race alone, Two or More Races, a race alone or in
    combination with one or more other races (every code whose races include it), each of
    either origin or of one (``, not Hispanic or Latino``), or Hispanic or Latino.

    >>> race_predicate("Asian alone or in combination with one or more other races, "
    ...                "Hispanic or Latino")["hispanic"], len(race_predicate("Asian alone or "
    ...                "in combination with one or more other races")["race"])
    ((1,), 32)
    """
    text = who.removeprefix("People who are ").strip()
    pred: dict[str, tuple[int, ...]] = {}
    for tail, code in ((", not Hispanic or Latino", 0), (", Hispanic or Latino", 1)):
        if text.casefold().endswith(tail.casefold()):
            text, pred["hispanic"] = text[: -len(tail)], (code,)
    if text.casefold() == "hispanic or latino":
        return {"hispanic": (1,)}
    labels = dict(PERSONS.attribute("race").categories)
    races = {c: set(lab.split("; ")) for c, lab in labels.items()}
    key = text.casefold()
    for race in _RACES:
        if key == f"{race} alone".casefold():
            pred["race"] = tuple(c for c, r in races.items() if r == {race})
        elif key == f"{race} alone or in combination with one or more other races".casefold():
            pred["race"] = tuple(c for c, r in races.items() if race in r)
    if key == "two or more races":
        pred["race"] = tuple(c for c, r in races.items() if len(r) > 1)
    if "race" not in pred:
        raise TabreconError(f"no race predicate for the universe {who!r}")
    return pred


#: stubs the DHC words otherwise than SF1 2010 for the same line, as the layouts key them
#: (:func:`~tabrecon.tables.layout.stub_key`, casefolded)
REWORDED_2020 = {"population of two or more races": "two or more races"}
#: cells whose label in the DHC layout (``dhc_2020_layout.csv``) is wrong, with the label it
#: gives and the evidence; the line is declared with SF1's label, never by editing the file
DHC_LAYOUT_ERRATA: dict[str, tuple[str, str]] = {
    "P012G047": (
        "Total: !! Female: !! 70 to 74 years",
        "repeats P012G046's label; at line 47 P12, every other P12 iteration and SF1 2010's "
        "P12G have 'Female: 75 to 79 years', and 75 to 79 is otherwise missing from the table",
    ),
}


def _stubs(label: str) -> tuple[str, ...]:
    keys = (stub_key(x).rstrip("-").strip().casefold() for x in label.split(STUB_SEPARATOR))
    return tuple(REWORDED_2020.get(k, k) for k in keys)


def _same_lines(name: str, model: str) -> pl.DataFrame:
    """The DHC's rows of ``name`` with its labels, refused unless they are SF1's of ``model``
    line by line (stubs compared as the layout keys them, case, a trailing ``--`` and
    :data:`REWORDED_2020` aside; a cell of :data:`DHC_LAYOUT_ERRATA` with the wrong label it
    records takes SF1's)."""
    dhc, sf1 = rows([name], DHC_2020), rows([model])
    if dhc.height != sf1.height:
        raise TabreconError(f"the DHC's {name} has {dhc.height} lines, SF1's {model} {sf1.height}")
    labels = dhc["label"].to_list()
    for i, (cell, a, b) in enumerate(zip(dhc["cell"], labels, sf1["label"], strict=True)):
        if _stubs(a) == _stubs(b):
            continue
        if DHC_LAYOUT_ERRATA.get(cell, ("",))[0] == a:
            labels[i] = b
            continue
        raise TabreconError(
            f"{cell}: the DHC's {name} line {i + 1} ({a!r}) is not SF1's {model} ({b!r}): "
            "declare it otherwise"
        )
    return dhc.with_columns(pl.Series("label", labels))


def _dhc_table(name: str, sf1: dict[str, UnitTable]) -> UnitTable:
    """A DHC person table as SF1's it continues (same lines: its predicates, the DHC's ids at
    the same positions), or a new iteration of P12 or PCT12 (their lines within its universe)."""
    base = DHC_2020.continues(name)
    prefix, number = name_parts(name)
    model = base if base is not None and base in sf1 else f"{prefix}{number}"
    dhc = _same_lines(name, model)
    src = sf1[model]
    at = {c: i for i, c in enumerate(rows([model])["cell"].to_list())}
    mine = [c.id for c in src.cells()]  # SF1's ids of its count cells, in line order
    ids = tuple(dhc["cell"][at[c]] for c in mine)
    universe = dict(src.universe) if model == base else race_predicate(str(dhc["universe"][0]))
    return UnitTable(
        name=name,
        number=number,
        title=title_of(dhc),
        universe=universe,
        lines=tuple(
            (str(dhc["label"][at[c]]), p) for c, (_, p) in zip(mine, src.lines, strict=True)
        ),
        prefix=prefix,
        level=level_of(name, DHC_2020),
        schema=PERSONS,
        ids=ids,
        universe_label=str(dhc["universe"][0]),
    )


@cache
def dhc_person_tables() -> tuple[UnitTable, ...]:
    """The 2020 DHC's person tables (:data:`DHC_PERSON_TABLES`) from the DHC's own layout. A
    table that continues an SF1 table is compared with it line by line and takes its cells'
    predicates; P12J-P12AH (and PCT12's iterations beyond SF1's) are P12's (PCT12's) lines
    within the universe their title names (:func:`race_predicate`: "alone or in combination"
    among them); the median ages P13, P13A-I are declared from the DHC's layout with SF1's
    statistic (the technical documentation's "linear interpolation" over single years; the
    DHC's top age is 115 and over, this schema's 110 and over).

    >>> t = next(t for t in dhc_person_tables() if t.name == "P12AH")
    >>> len(t.cells()), t.cells()[0].id, t.level
    (49, 'P012AH01', 'block')
    """
    sf1 = {t.name: t for t in person_tables()}
    stubs = {"Median age--": {}, "Both sexes": {}, "Male": {"sex": (0,)}, "Female": {"sex": (1,)}}
    out = []
    for name in DHC_PERSON_TABLES:
        if name.startswith("P13"):
            universe = race_predicate(universe_of(name, DHC_2020)) if name != "P13" else {}
            out.append(
                from_layout(name, PERSONS, stubs, universe, statistic=MEDIAN_AGE, layout=DHC_2020)
            )
        else:
            out.append(_dhc_table(name, sf1))
    return tuple(out)


@cache
def binned_person_tables() -> tuple[UnitTable, ...]:
    """:func:`person_tables`' block tables over :data:`tabrecon.schema.PERSONS_BINNED`: every
    block cell's age range falls on agebin38 boundaries, so each becomes a set of agebins
    exactly (the tract tables' single years do not, and are left out)."""
    out = []
    for t in person_tables():
        if t.level != Geo.BLOCK or t.statistic is not None:  # PCT12's single years, P13's
            continue  # median of them: no set of agebins
        lines = []
        for label, pred in t.lines:
            p = dict(pred)
            if "age" in p:
                p["agebin"] = tuple(sorted({int(AGEBIN_OF_AGE[a]) for a in p.pop("age")}))
            lines.append((label, p))
        out.append(replace(t, lines=tuple(lines), schema=PERSONS_BINNED))
    return tuple(out)


#: the resolution a block's uniqueness is asked at: age by agebin38, the Bureau's question
UNIQUE_ON = {"age": AGEBIN_OF_AGE}


# --------------------------------------------------------------------------------------------------
# How a person claim reads: its age as the tables determine it
# --------------------------------------------------------------------------------------------------
#: The columns person claims are stated over (:func:`tabrecon.schema.person_claim_columns`)
COLUMNS: tuple[str, ...] = tuple(c.name for c in PERSONS.claim_columns)


def determined_age_classes(part: TableSet | pl.DataFrame, level: str) -> np.ndarray:
    """Start of the age class of every age 0..110 that a tract's published cells tell apart
    (``part``: its tables, as a person ``TableSet`` or a long table; block cells, and at
    ``block+tract`` the tract's too): what a record's age can say."""
    levels: dict[str, bool] = {Geo.BLOCK: True, Geo.TRACT: level == Level.BLOCK_TRACT}
    if isinstance(part, pl.DataFrame):
        n = part["geoid"].str.len_chars()
        at = (n == Geo.BLOCK.length) | ((n == Geo.TRACT.length) & levels[Geo.TRACT])
        cells = np.asarray(
            part.filter(at & pl.col("value").is_not_null())["cell"].unique().to_list(), dtype=str
        )
    else:
        cells = np.concatenate(
            [
                g.cells[(g.values != MISSING).any(axis=0)].astype(str)
                for lv, g in part.grids.items()
                if levels.get(lv, False)
            ]
            or [np.zeros(0, dtype=str)]
        )
    cells = cells[np.isin(cells, [c.id for c in all_cells()])]
    a, pos = cell_attrs(), cell_positions(cells)
    ranges = list(zip(a["age_min"][pos].tolist(), a["age_max"][pos].tolist(), strict=True))
    return age_classes(ranges)


def class_end(starts: np.ndarray) -> np.ndarray:
    """Last age of the class of every age 0..110 (``starts`` from :func:`age_classes`)."""
    width = np.bincount(starts, minlength=N_AGES)
    return (starts + width[starts] - 1).astype(np.int16)


def decode_claim(cols: tuple[int, ...], key: int) -> dict[str, int]:
    """Column -> value of a claim (only the columns it sets)."""
    out = {}
    for i in reversed(cols):
        size = PERSONS.claim_columns[i].size
        out[COLUMNS[i]] = key % size
        key //= size
    return {COLUMNS[i]: out[COLUMNS[i]] for i in cols}


def claim_age_range(v: int, ends: np.ndarray | None = None) -> tuple[int, int]:
    """The ages a claim's agebin value ``v`` covers. Records of an age class carry its first year,
    so where the tables determine only a class wider than the agebin38 bin (``ends``, from
    :func:`class_end`: e.g. 10-14 without P14) the claim covers the whole class."""
    lo, hi = AGEBIN38[v]
    return (lo, hi) if ends is None else (lo, max(hi, int(ends[lo])))


def describe_claim(
    cols: tuple[int, ...], key: int, m: int | None = None, ends: np.ndarray | None = None
) -> str:
    """Plain words for a claim, e.g. ``exactly 1 person: female, age 25-29, black, Hispanic``:
    each column's label (:func:`tabrecon.schema.person_claim_columns`). ``ends`` (last age of
    each age's class) makes the age read as what the tables determine.

    >>> describe_claim((0, 1), 1 * 38 + 24, 1)   # sex, agebin38: female, bin 24
    'exactly 1 person: female, age 30-34'
    """
    parts = []
    for name, v in decode_claim(cols, key).items():
        if name == "agebin" and ends is not None:
            lo, hi = claim_age_range(v, ends)
            parts.append(age_label(lo, hi) if lo == 0 and hi == 110 else f"age {age_label(lo, hi)}")
        else:
            parts.append(PERSONS.claim_columns[COLUMNS.index(name)].labels[v])
    text = ", ".join(parts)
    if m is None:
        return text
    return f"exactly {m} person{'s' if m != 1 else ''}: {text}"


def claim_words(part: TableSet | pl.DataFrame, level: str) -> Callable[..., str]:
    """How a tract's person claims read (:attr:`Population.claim_words`): their age as the
    tract's tables determine it (:func:`describe_claim`)."""
    ends = class_end(determined_age_classes(part, level))

    def words(cols: tuple[int, ...], key: int, m: int | None = None) -> str:
        return describe_claim(cols, key, m, ends)

    return words


def _synthesize(cfg: SynthConfig, seed: int) -> object:
    return person_units(synthesize(cfg, seed=seed))


def _synthesize_binned(cfg: SynthConfig, seed: int) -> object:
    return person_units(synthesize(cfg, seed=seed), binned=True)


def _read_persons(path: object) -> object:
    """A person file (its race as six flags, :func:`tabrecon.schema.read_microdata`) as records of
    the person schema."""
    from ..schema import read_microdata

    return person_units(read_microdata(str(path)))


def _select(spec: str) -> list[str]:
    """A ``--tables`` value over the person tables: :func:`~tabrecon.tables.persons
    .resolve_tables`' selections (``all``: the 34 tables, ``published``, ``block``, ``tract``, a
    comma list), and by name the median ages (P13, P13A-I), which those leave out.

    >>> _select("P1,p13a")
    ['P1', 'P13A']
    """
    medians = {t.name for t in person_tables() if t.statistic is not None}
    names = [t.strip().upper() for t in spec.split(",") if t.strip()]
    if not any(n in medians for n in names):
        return resolve_tables(spec)
    return [n if n in medians else resolve_tables(n)[0] for n in names]


def _read_binned(path: object) -> object:
    """A person file (single years of age) as records of the binned schema."""
    from ..schema import read_microdata

    return person_units(read_microdata(str(path)), binned=True)


# --------------------------------------------------------------------------------------------------
# Persons on the engine written over any schema: their plug-ins
# --------------------------------------------------------------------------------------------------
def _flags(units: Units, blocks: pl.DataFrame) -> pl.DataFrame:
    """Each reconstructed person's uniqueness flags (:func:`tabrecon.attacks.certify
    .uniqueness_flags`)."""
    from ..attacks.certify import uniqueness_flags

    return uniqueness_flags(person_records(units), blocks)


def _write_reconstruction(run: ReleaseReconstruction, out: Path) -> list[Path]:
    """A person reconstruction as a person file (an age the tables resolve only to a range:
    its first year, ``age_max`` its last, ``age_exact`` false) and each block's verdict in
    certification's columns beside it (``OUT_blocks.csv``)."""
    from ..io import beside, write_csv
    from ..schema import write_microdata

    write_microdata(person_records(run.units), out)
    return [out, write_csv(run.verdicts(), beside(out, "_blocks.csv"))]


#: what persons and their binned twin declare alike
_persons = partial(
    Population,
    noun="persons",
    residents="residents",
    size_cell="P0010001",
    size_cells=WHOLE_POPULATION_CELLS,
    k_values=(1, 2, 3, 4),
    spell=cells_2020,
    unmodelled=RACE_TALLIES,
)
register(
    _persons(
        name="persons",
        schema=PERSONS,
        tables=person_tables,
        synthesize=_synthesize,
        capabilities=frozenset(Capability),  # all of them
        releases=(
            ReleaseTables(
                release=Release.DHC_2020, tables=dhc_person_tables, left_out=DHC_LEFT_OUT
            ),
        ),
        generic="persons_binned",
        unique_on=UNIQUE_ON,
        claim_words=claim_words,
        name_2020=name_2020,
        read=_read_persons,
        select=_select,
        unmodelled_weights=race_tally_weights,
        writer=_write_reconstruction,
        check=check_consistency,
        flags=_flags,
        view=person_records,
        description="SF1 person tables (the 34 and P3-P5): block, sex, age, race, ethnicity",
    )
)
register(
    _persons(
        name="persons_binned",
        schema=PERSONS_BINNED,
        tables=binned_person_tables,
        synthesize=_synthesize_binned,
        listed=False,
        read=_read_binned,
        description="persons by agebin38: the block tables on certification's resolution",
    )
)
