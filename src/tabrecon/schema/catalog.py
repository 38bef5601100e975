"""Declared schemas beyond persons: the housing unit.

:data:`HOUSING_UNITS` is one row per housing unit: its block and the ten columns of Liu, Xiao,
Thaker, Smith and Wu's Generate-then-Verify study (methods.md section 7), with the categories and
file codes of the Census Bureau's 2020 disclosure-avoidance household schema (the one its 2010
demonstration microdata, the PPMF the study used, are written in) and the SF1/DHC table stubs:

* tenure: SF1 H4 / DHC H4 (owned with a mortgage or a loan, owned free and clear, renter occupied)
  and "not applicable" for a vacant unit: 4 categories;
* vacancy status: occupied, then the 7 statuses of H5: 8 categories;
* household size: 1 to 6 persons and 7 or more (H9/H12's stubs), "not applicable" when vacant;
* household type (HHT): married-couple family; other family with a male or a female householder
  and no spouse present; nonfamily, male or female householder, living alone or not: 7;
* detailed household type (HHT2): married couple / cohabiting couple with or without children of
  the householder under 18; female / male householder with no spouse or partner present living
  alone, with children under 18, with relatives but no children under 18, or with only
  nonrelatives: 12;
* presence of people under 18, of people 65 and over: no / yes;
* Hispanic or Latino householder: not applicable / no / yes;
* age of householder: the published tables' 9 ranges (H13 / SF1 H17: 15-24, 25-34, 35-44, 45-54,
  55-59, 60-64, 65-74, 75-84, 85+). The study says "7 buckets" and lists ranges implying 8; the
  published tables, which are what an attacker sees, have 9, so 9 it is;
* race of householder: the 6 races alone and two or more races (H6): 7.

Every household attribute is "not applicable" (code 0) for a vacant unit and must be set for an
occupied one; the rules below also tie the household types to the size, to each other and to the
presence of children and older people. A record breaking one is refused with its file, line and
column (:func:`tabrecon.schema.spec.read_units`). Of the 25,559,040 cross-classified types,
87,787 pass every rule (:meth:`~tabrecon.schema.spec.Schema.feasible_types`, 2.4 s): the support
a household count model is built over, three times the person schema's 27,972.
"""

from __future__ import annotations

import polars as pl

from .spec import Attribute, EditRule, Schema

NA = (0, "not applicable")

TENURE = Attribute(
    "tenure",
    (
        NA,
        (1, "owned with a mortgage or a loan"),
        (2, "owned free and clear"),
        (3, "renter occupied"),
    ),
    "Tenure of an occupied unit (SF1 H4, DHC H4); not applicable when vacant",
)
VACANCY = Attribute(
    "vacancy_status",
    (
        (0, "occupied"),
        (1, "for rent"),
        (2, "rented, not occupied"),
        (3, "for sale only"),
        (4, "sold, not occupied"),
        (5, "for seasonal, recreational, or occasional use"),
        (6, "for migrant workers"),
        (7, "other vacant"),
    ),
    "Occupied, or the vacancy status of a vacant unit (SF1/DHC H5)",
)
SIZE = Attribute(
    "household_size",
    (NA, *((k, f"{k}-person household") for k in range(1, 7)), (7, "7-or-more-person household")),
    "Persons in the household (H9, H12); not applicable when vacant",
)
HOUSEHOLD_TYPE = Attribute(
    "household_type",
    (
        NA,
        (1, "married couple family"),
        (2, "other family: male householder, no spouse present"),
        (3, "other family: female householder, no spouse present"),
        (4, "nonfamily: male householder, living alone"),
        (5, "nonfamily: male householder, not living alone"),
        (6, "nonfamily: female householder, living alone"),
        (7, "nonfamily: female householder, not living alone"),
    ),
    "Household type (HHT): family or not, sex of the householder, living alone",
)
DETAILED_TYPE = Attribute(
    "detailed_household_type",
    (
        NA,
        (1, "married couple, with children of the householder under 18"),
        (2, "married couple, no children of the householder under 18"),
        (3, "cohabiting couple, with children of the householder under 18"),
        (4, "cohabiting couple, no children of the householder under 18"),
        (5, "female householder, no spouse or partner, living alone"),
        (6, "female householder, no spouse or partner, with children under 18"),
        (7, "female householder, no spouse or partner, with relatives, no children under 18"),
        (8, "female householder, no spouse or partner, only nonrelatives present"),
        (9, "male householder, no spouse or partner, living alone"),
        (10, "male householder, no spouse or partner, with children under 18"),
        (11, "male householder, no spouse or partner, with relatives, no children under 18"),
        (12, "male householder, no spouse or partner, only nonrelatives present"),
    ),
    "Detailed household type (HHT2): couple type, children of the householder under 18",
)
UNDER_18 = Attribute(
    "under_18", ((0, "no"), (1, "yes")), "One or more people under 18 in the household"
)
OVER_65 = Attribute(
    "over_65", ((0, "no"), (1, "yes")), "One or more people 65 and over in the household"
)
HISPANIC = Attribute(
    "hispanic_householder",
    (NA, (1, "not Hispanic or Latino"), (2, "Hispanic or Latino")),
    "Hispanic or Latino origin of the householder (H7, H11)",
)
AGE_RANGES = ("15-24", "25-34", "35-44", "45-54", "55-59", "60-64", "65-74", "75-84", "85+")
HOUSEHOLDER_AGE = Attribute(
    "householder_age",
    (NA, *((k + 1, f"{r} years") for k, r in enumerate(AGE_RANGES))),
    "Age of the householder in the published tables' ranges (H13; SF1 H17)",
)
HOUSEHOLDER_RACE = Attribute(
    "householder_race",
    (
        NA,
        (1, "White alone"),
        (2, "Black or African American alone"),
        (3, "American Indian and Alaska Native alone"),
        (4, "Asian alone"),
        (5, "Native Hawaiian and Other Pacific Islander alone"),
        (6, "Some Other Race alone"),
        (7, "Two or More Races"),
    ),
    "Race of the householder (H6)",
)

#: Which household types each detailed type can go with (couples with children are families;
#: a cohabiting couple without children is a family only when other relatives live there).
TYPES_OF_DETAILED: dict[int, tuple[int, ...]] = {
    1: (1,),
    2: (1,),
    3: (2, 3),
    4: (2, 3, 5, 7),
    5: (6,),
    6: (3,),
    7: (3,),
    8: (7,),
    9: (4,),
    10: (2,),
    11: (2,),
    12: (5,),
}
WITH_CHILDREN = (1, 3, 6, 10)
LIVING_ALONE = (4, 6)
AGED_65_PLUS = (7, 8, 9)  # householder_age codes of 65-74, 75-84, 85+

#: What a vacant unit lacks and an occupied one needs, in words for the error message.
_HOUSEHOLD_COLUMNS = {
    TENURE: "tenure",
    SIZE: "household size",
    HOUSEHOLD_TYPE: "household type",
    DETAILED_TYPE: "detailed household type",
    HISPANIC: "householder's Hispanic origin",
    HOUSEHOLDER_AGE: "householder age",
    HOUSEHOLDER_RACE: "householder race",
}


def _rules() -> tuple[EditRule, ...]:
    c = pl.col
    vacant = c("vacancy_status") != 0
    occupied = ~vacant
    out: list[EditRule] = []
    for a, what in _HOUSEHOLD_COLUMNS.items():
        out.append(
            EditRule(
                f"vacant_{a.name}",
                f"a vacant unit has no {what}",
                a.name,
                vacant & (c(a.name) != 0),
            )
        )
        out.append(
            EditRule(
                f"occupied_{a.name}",
                f"an occupied unit needs its {what}",
                a.name,
                occupied & (c(a.name) == 0),
            )
        )
    for a in (UNDER_18, OVER_65):
        out.append(
            EditRule(
                f"vacant_{a.name}",
                "a vacant unit has nobody in it",
                a.name,
                vacant & (c(a.name) != 0),
            )
        )
    hht, hht2, size = c("household_type"), c("detailed_household_type"), c("household_size")
    allowed = pl.lit(False)
    for d, types in TYPES_OF_DETAILED.items():
        allowed = allowed | ((hht2 == d) & hht.is_in(list(types)))
    out += [
        EditRule(
            "one_person_no_children",
            "a 1-person household cannot have children of the householder",
            "detailed_household_type",
            occupied & (size == 1) & hht2.is_in(list(WITH_CHILDREN)),
        ),
        EditRule(
            "detailed_type_agrees",
            "the detailed household type does not agree with the household type",
            "detailed_household_type",
            occupied & ~allowed,
        ),
        EditRule(
            "alone_iff_one_person",
            "a householder lives alone exactly when the household has 1 person",
            "household_type",
            occupied & (hht.is_in(list(LIVING_ALONE)) != (size == 1)),
        ),
        EditRule(
            "children_are_under_18",
            "a household with children of the householder under 18 has people under 18",
            "under_18",
            occupied & hht2.is_in(list(WITH_CHILDREN)) & (c("under_18") == 0),
        ),
        EditRule(
            "householder_65_plus",
            "a householder aged 65 or over is a person aged 65 or over",
            "over_65",
            occupied & c("householder_age").is_in(list(AGED_65_PLUS)) & (c("over_65") == 0),
        ),
        EditRule(
            "alone_under_18",
            "in a 1-person household someone under 18 is the householder, aged 15-24",
            "under_18",
            occupied & (size == 1) & (c("under_18") == 1) & (c("householder_age") != 1),
        ),
        EditRule(
            "alone_65_plus",
            "in a 1-person household someone 65 or over is the householder, aged 65 or over",
            "over_65",
            occupied
            & (size == 1)
            & (c("over_65") == 1)
            & ~c("householder_age").is_in(list(AGED_65_PLUS)),
        ),
    ]
    return tuple(out)


HOUSING_UNITS = Schema(
    name="households",
    unit="housing unit",
    attributes=(
        TENURE,
        VACANCY,
        SIZE,
        HOUSEHOLD_TYPE,
        DETAILED_TYPE,
        UNDER_18,
        OVER_65,
        HISPANIC,
        HOUSEHOLDER_AGE,
        HOUSEHOLDER_RACE,
    ),
    rules=_rules(),
    description="One row per housing unit, occupied or vacant (Liu et al. 2025's ten columns)",
)
