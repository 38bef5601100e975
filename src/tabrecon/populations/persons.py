"""Persons: SF1 2010's person tables over (sex, single year of age, race, Hispanic origin).

The schema and its encoding live in :mod:`tabrecon.schema`; the tables are the 34 of Abowd et
al. and P3-P5 (:func:`person_tables`). Persons run on the staged person
engine (:attr:`~tabrecon.schema.registry.Engine.PERSON`). ``persons_binned`` is the same schema
on certification's resolution (agebin38), registered for the code written over any schema and
not offered to users.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np

from ..measures import Measure, MedianRule, Statistic
from ..schema import AGE_MAX, AGEBIN_OF_AGE, PERSONS, PERSONS_BINNED, person_units
from ..schema.registry import Engine, Population, register
from ..synth import SynthConfig, synthesize
from ..tables import ALL_TABLES, Cell, all_cells
from ..unit_tables import Predicate, UnitTable, from_layout


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
    """SF1's person tables (:data:`tabrecon.tables.ALL_TABLES`: the 34 -- block tables and the
    tract tables PCT12, PCT12A-O -- and P3-P5) as tables over the person schema
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
            )
        )
    return tuple(out) + median_age_tables({t.name: t for t in out})


#: SF1's median age, in years to one decimal: "computed on the basis of a single-year-of-age
#: distribution using a linear interpolation method" (SF1 2010 technical documentation, "Median
#: Age"): each age a spread over [a, a+1). The documentation names the method, not the interval
#: nor how a tie at .x5 was rounded: both are our reading (a tie is allowed either way). An
#: empty universe publishes 0.0, which no person can (one person aged 0 has median 0.5). Not
#: checked against published values: none are in this repository.
MEDIAN_AGE = Statistic(Measure.MEDIAN, "age", 1, MedianRule.INTERPOLATED, empty=0)


def median_age_tables(by_name: dict[str, UnitTable]) -> tuple[UnitTable, ...]:
    """P13 (median age by sex) and its iterations P13A-P13I, declared from the Bureau's layout
    (:func:`tabrecon.unit_tables.from_layout`), each iteration over the universe of P12's
    (P13B: persons who are Black alone, the predicate of P012B001)."""
    stubs = {"Median age": {}, "Both sexes": {}, "Male": {"sex": (0,)}, "Female": {"sex": (1,)}}
    out = [from_layout("P13", PERSONS, stubs, statistic=MEDIAN_AGE)]
    for it in "ABCDEFGHI":
        universe = by_name[f"P12{it}"].cells()[0].predicate
        out.append(from_layout(f"P13{it}", PERSONS, stubs, universe, statistic=MEDIAN_AGE))
    return tuple(out)


@cache
def binned_person_tables() -> tuple[UnitTable, ...]:
    """:func:`person_tables`' block tables over :data:`tabrecon.schema.PERSONS_BINNED`: every
    block cell's age range falls on agebin38 boundaries, so each becomes a set of agebins
    exactly (the tract tables' single years do not, and are left out)."""
    out = []
    for t in person_tables():
        if t.level != "block" or t.statistic is not None:  # PCT12's single years, P13's
            continue  # median of them: no set of agebins
        lines = []
        for label, pred in t.lines:
            p = dict(pred)
            if "age" in p:
                p["agebin"] = tuple(sorted({int(AGEBIN_OF_AGE[a]) for a in p.pop("age")}))
            lines.append((label, p))
        out.append(replace(t, lines=tuple(lines), schema=PERSONS_BINNED))
    return tuple(out)


def _synthesize(cfg: SynthConfig, seed: int) -> object:
    return person_units(synthesize(cfg, seed=seed))


def _synthesize_binned(cfg: SynthConfig, seed: int) -> object:
    return person_units(synthesize(cfg, seed=seed), binned=True)


def _read_binned(path: object) -> object:
    """A person file (single years of age) as records of the binned schema."""
    from ..schema import read_microdata

    return person_units(read_microdata(str(path)), binned=True)


register(
    Population(
        name="persons",
        schema=PERSONS,
        noun="persons",
        tables=person_tables,
        synthesize=_synthesize,
        size_cell="P0010001",
        k_values=(1, 2, 3, 4),
        engine=Engine.PERSON,
        generic="persons_binned",
        description="SF1 person tables (the 34 and P3-P5): block, sex, age, race, ethnicity",
    )
)
register(
    Population(
        name="persons_binned",
        schema=PERSONS_BINNED,
        noun="persons",
        tables=binned_person_tables,
        synthesize=_synthesize_binned,
        size_cell="P0010001",
        k_values=(1, 2, 3, 4),
        listed=False,
        read=_read_binned,
        description="persons by agebin38: the block tables on certification's resolution",
    )
)
