"""Housing units: the ten columns of Liu et al.'s Generate-then-Verify study
(:data:`tabrecon.schema.catalog.HOUSING_UNITS`) and the SF1 2010 housing-unit tables that they
determine (:data:`HOUSING_TABLES`, official cell ids such as ``H0130002``): housing units (H1),
occupancy (H3), tenure (H4), vacancy status (H5), race and Hispanic origin of the householder
(H6, H7), household size (H13), tenure by race, origin, size and age of the householder
(H14-H17) and household type (P18, a table of households). These are the 2010 SF1 numbers; the
2020 DHC tables the Generate-then-Verify study used (P16, H12, H13, ... with other numbers and
iterations) are not declared (their shells are not available here).

>>> from tabrecon.unit_tables import table_by_name, weight_matrix
>>> t = table_by_name("H4", HOUSING_UNITS)
>>> [c.id for c in t.cells()]
['H0040001', 'H0040002', 'H0040003', 'H0040004']
>>> weight_matrix(HOUSING_UNITS, [t]).shape[0]
4
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from ..attacks.unit_claims import STUDY_TABLES_2_3
from ..households import synthesize_households
from ..schema.catalog import AGE_RANGES, HOUSING_UNITS
from ..schema.registry import Population, register
from ..synth import SynthConfig
from ..unit_tables import Predicate, UnitTable

#: a table over the housing-unit schema
_table = partial(UnitTable, schema=HOUSING_UNITS)


def _codes(name: str) -> dict[str, int]:
    """Label -> code of a housing-unit attribute."""
    return {lab: c for c, lab in HOUSING_UNITS.attribute(name).categories}


OCCUPIED: Predicate = {"vacancy_status": (0,)}
VACANT: Predicate = {"vacancy_status": (1, 2, 3, 4, 5, 6, 7)}
OWNER: Predicate = {"tenure": (1, 2)}
RENTER: Predicate = {"tenure": (3,)}
RACES7 = tuple(lab for c, lab in HOUSING_UNITS.attribute("householder_race").categories if c)
SIZES = tuple((f"{k}-person household", (k,)) for k in range(1, 7)) + (
    ("7-or-more-person household", (7,)),
)


def _by(attr: str, labels: Sequence[tuple[str, tuple[int, ...]]]) -> list[tuple[str, Predicate]]:
    return [(lab, {attr: codes}) for lab, codes in labels]


def _split(
    first: Sequence[tuple[str, Predicate]], then: Sequence[tuple[str, Predicate]]
) -> tuple[tuple[str, Predicate], ...]:
    """Total, then each ``first`` line followed by its ``then`` lines (SF1's nested layout)."""
    out: list[tuple[str, Predicate]] = [("Total", {})]
    for lab, pred in first:
        out.append((lab, pred))
        out += [(f"{lab} {sub}", {**pred, **sp_}) for sub, sp_ in then]
    return tuple(out)


_RACE_LINES = [(lab, (i,)) for i, lab in enumerate(RACES7, start=1)]
_HISP = [("Not Hispanic or Latino householder", (1,)), ("Hispanic or Latino householder", (2,))]
_AGES = [(f"Householder {r} years", (i,)) for i, r in enumerate(AGE_RANGES, start=1)]
_TENURE2 = [("Owner occupied:", OWNER), ("Renter occupied:", RENTER)]

HOUSING_TABLES: tuple[UnitTable, ...] = (
    _table("H1", 1, "HOUSING UNITS", {}, (("Total", {}),)),
    _table(
        "H3",
        3,
        "OCCUPANCY STATUS",
        {},
        (("Total", {}), ("Occupied", OCCUPIED), ("Vacant", VACANT)),
    ),
    _table(
        "H4",
        4,
        "TENURE",
        OCCUPIED,
        (("Total", {}), *_by("tenure", [(lab, (c,)) for lab, c in _codes("tenure").items() if c])),
    ),
    _table(
        "H5",
        5,
        "VACANCY STATUS",
        VACANT,
        (
            ("Total", {}),
            *_by(
                "vacancy_status", [(lab, (c,)) for lab, c in _codes("vacancy_status").items() if c]
            ),
        ),
    ),
    _table(
        "H6",
        6,
        "RACE OF HOUSEHOLDER",
        OCCUPIED,
        (("Total", {}), *_by("householder_race", _RACE_LINES)),
    ),
    _table(
        "H7",
        7,
        "HISPANIC OR LATINO ORIGIN OF HOUSEHOLDER BY RACE OF HOUSEHOLDER",
        OCCUPIED,
        _split(_by("hispanic_householder", _HISP), _by("householder_race", _RACE_LINES)),
    ),
    _table("H13", 13, "HOUSEHOLD SIZE", OCCUPIED, (("Total", {}), *_by("household_size", SIZES))),
    _table(
        "H14",
        14,
        "TENURE BY RACE OF HOUSEHOLDER",
        OCCUPIED,
        _split(_TENURE2, _by("householder_race", _RACE_LINES)),
    ),
    _table(
        "H15",
        15,
        "TENURE BY HISPANIC OR LATINO ORIGIN OF HOUSEHOLDER",
        OCCUPIED,
        _split(_TENURE2, _by("hispanic_householder", _HISP)),
    ),
    _table(
        "H16",
        16,
        "TENURE BY HOUSEHOLD SIZE",
        OCCUPIED,
        _split(_TENURE2, _by("household_size", SIZES)),
    ),
    _table(
        "H17",
        17,
        "TENURE BY AGE OF HOUSEHOLDER",
        OCCUPIED,
        _split(_TENURE2, _by("householder_age", _AGES)),
    ),
    _table(
        "P18",
        18,
        "HOUSEHOLD TYPE",
        OCCUPIED,
        (
            ("Total", {}),
            ("Family households:", {"household_type": (1, 2, 3)}),
            ("Husband-wife family", {"household_type": (1,)}),
            ("Other family:", {"household_type": (2, 3)}),
            ("Male householder, no wife present", {"household_type": (2,)}),
            ("Female householder, no husband present", {"household_type": (3,)}),
            ("Nonfamily households:", {"household_type": (4, 5, 6, 7)}),
            ("Householder living alone", {"household_type": (4, 6)}),
            ("Householder not living alone", {"household_type": (5, 7)}),
        ),
        prefix="P",
    ),
)


def _synthesize(cfg: SynthConfig, seed: int) -> object:
    return synthesize_households(cfg, seed=seed)[1]


def _occupied(units: object) -> str:
    return f"{int((units.codes['vacancy_status'] == 0).sum()):,} occupied"  # type: ignore[attr-defined]


register(
    Population(
        name="households",
        schema=HOUSING_UNITS,
        noun="housing units",
        tables=lambda: HOUSING_TABLES,
        synthesize=_synthesize,
        size_cell="H0010001",
        k_values=(5, 6, 7, 8, 9, 10),
        study_by_k=STUDY_TABLES_2_3,
        aside=_occupied,
        report_note="The study attacked the 2020 DHC household tables (621 statistics per "
        "block); these are the 2010 SF1 tables tabrecon declares (120 per block), which never "
        "publish presence of children or people 65 and over, nor the detailed household type, "
        "so claims on those columns rest on the other tables alone.",
        description="SF1 housing-unit tables (H1, H3-H7, H13-H17, P18): tenure, vacancy, "
        "size, household type, householder's age, race and origin",
    )
)
