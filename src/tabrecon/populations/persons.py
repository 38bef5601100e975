"""Persons: SF1 2010's person tables over (sex, single year of age, race, Hispanic origin).

The schema and its encoding live in :mod:`tabrecon.schema`; the tables are the 34 of Abowd et
al. and P3-P5 (:func:`tabrecon.unit_tables.person_tables`). Persons run on the staged person
engine (:attr:`~tabrecon.schema.registry.Engine.PERSON`). ``persons_binned`` is the same schema
on certification's resolution (agebin38), registered for the code written over any schema and
not offered to users.
"""

from __future__ import annotations

from ..schema import PERSONS, PERSONS_BINNED, person_units
from ..schema.registry import Engine, Population, register
from ..synth import SynthConfig, synthesize
from ..unit_tables import binned_person_tables, person_tables


def _synthesize(cfg: SynthConfig, seed: int) -> object:
    return person_units(synthesize(cfg, seed=seed))


def _synthesize_binned(cfg: SynthConfig, seed: int) -> object:
    return person_units(synthesize(cfg, seed=seed), binned=True)


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
        description="persons by agebin38: the block tables on certification's resolution",
    )
)
