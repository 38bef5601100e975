"""Housing units: the ten columns of Liu et al.'s Generate-then-Verify study
(:data:`tabrecon.schema.catalog.HOUSING_UNITS`) and every block-level SF1 2010 household and
housing-unit table those columns determine, declared from the Bureau's layout
(:func:`housing_tables`, :mod:`tabrecon.tables.layout`): official ids such as ``H0180006``, line
order, labels and universes are the file's; what this module adds is the predicate of each stub the
tables use (:func:`vocabulary`), written once, and of each universe (a race or origin iteration
such as H16A or P18I restricts its universe to the householder it names).

Declared (:data:`DECLARED`: 64 tables, 850 cells per block against the study's 621): H1, H3-H7,
H13-H18, H16A-I, H17A-I, P15, P18, P18A-I, P19, P22, P25, P28, P28A-I, P35, P35A-I. Left out,
each with its reason (:data:`LEFT_OUT`, shown by ``tabrecon tables list --schema households``):
tables that count persons rather than units, averages, processing flags, and tables that need a
column the schema does not have (presence of people 60 and over or 75 and over, of nonrelatives,
ages of children, related children, people under 18 other than householders, spouses and
partners).

The 2020 DHC's block-level household and housing-unit tables (:data:`DHC_DECLARED`, the tables
the study attacked among them) are declared from the DHC's own layout
(:data:`tabrecon.tables.layout.DHC_2020`) with the same vocabulary and the 2020 stubs added
(:func:`dhc_vocabulary`: "Married couple family", the cohabiting couples of P20); their race and
origin iterations A-V name the householder in their universes (:func:`householder`). Left out
with their reasons: :data:`DHC_LEFT_OUT`.

>>> from tabrecon.schema.registry import population
>>> from tabrecon.tables.spec import table_by_name, weight_matrix
>>> hu = population("households")
>>> t = table_by_name("H4", hu)
>>> [c.id for c in t.cells()]
['H0040001', 'H0040002', 'H0040003', 'H0040004']
>>> weight_matrix(HOUSING_UNITS, [t]).shape[0]
4
>>> [c.id for c in table_by_name("H18", hu).cells()][5]  # the study's example
'H0180006'
"""

from __future__ import annotations

from functools import cache

from ..attacks.claims.release import STUDY_TABLES_2_3
from ..records.households import synthesize_households
from ..records.synth import SynthConfig
from ..schema import AGEBIN38
from ..schema.catalog import AGE_RANGES, AGED_65_PLUS, HOUSING_UNITS, LIVING_ALONE, WITH_CHILDREN
from ..schema.registry import Population, ReleaseTables, Tie, Ties, register
from ..tables.layout import DHC_2020, Layout, universe_of
from ..tables.spec import Predicate, UnitTable, from_layout
from ..vocab import Release


def _codes(name: str) -> dict[str, int]:
    """Label -> code of a housing-unit attribute (its "not applicable" left out)."""
    return {lab: c for c, lab in HOUSING_UNITS.attribute(name).categories if c}


OCCUPIED: Predicate = {"vacancy_status": (0,)}
VACANT: Predicate = {"vacancy_status": (1, 2, 3, 4, 5, 6, 7)}
OWNER: Predicate = {"tenure": (1, 2)}
RENTER: Predicate = {"tenure": (3,)}
FAMILY: Predicate = {"household_type": (1, 2, 3)}
NONFAMILY: Predicate = {"household_type": (4, 5, 6, 7)}

#: the block-level SF1 2010 tables the housing-unit schema determines (iterations A-I included)
DECLARED: tuple[str, ...] = (
    *("H1", "H3", "H4", "H5", "H6", "H7", "H13", "H14", "H15", "H16", "H17", "H18"),
    *("P15", "P18", "P19", "P22", "P25", "P28", "P35"),
    *(f"{t}{i}" for t in ("H16", "H17", "P18", "P28", "P35") for i in "ABCDEFGHI"),
)

_PERSONS = "counts persons, not housing units (ties the person and household reconstructions)"
_AVERAGE = "an average (2 decimals), not a count"
#: SF1 2010 household and housing tables published by block that are not declared, and why
LEFT_OUT: dict[str, str] = {
    "H2": "urban and rural: a property of the block's geography, not of the unit",
    "H8, H9": "races tallied: every race of a multiracial householder (the schema has 'Two or "
    "More Races')",
    "H10, H11, H11A-I": _PERSONS,
    "H12, H12A-I": _AVERAGE,
    "H19": "people under 18 other than householders, spouses and partners (the schema's "
    "under_18 counts every person under 18)",
    "H20, H21, H22": "substitution and allocation: processing flags, not characteristics",
    "P16, P16A-I": _PERSONS,
    "P17, P17A-I": _AVERAGE,
    "P20": "ages of the people under 18 (under 6, 6 to 17)",
    "P21, P39, P39A-I": "related children (the schema has own children and people under 18)",
    "P23, P24": "people 60 and over (the schema has 65 and over)",
    "P26": "people 75 and over (the schema has 65 and over)",
    "P27": "nonrelatives",
    "P29-P34, P29A-I, P31A-I, P34A-I": "persons by relationship: person tables",
    "P36, P36A-I": _PERSONS,
    "P37, P37A-I": _AVERAGE,
    "P38, P38A-I": "ages of own children (under 6, 6 to 17)",
}


@cache
def vocabulary() -> dict[str, Predicate]:
    """The predicate of every stub the declared tables use, keyed as the layout spells the stub
    (:func:`tabrecon.tables.layout.stub_key`). Category stubs are built from the schema's own labels
    (tenure, vacancy status, race of the householder, household size); the household-type lines
    follow the HHT codes of :data:`tabrecon.schema.catalog.HOUSEHOLD_TYPE`."""
    races = _codes("householder_race")
    ages = {r: i for i, r in enumerate(AGE_RANGES, start=1)}
    v: dict[str, Predicate] = {"Total": {}, "Occupied": OCCUPIED, "Vacant": VACANT}
    v |= {"Owner occupied": OWNER, "Owner-occupied": OWNER}
    v |= {"Renter occupied": RENTER, "Renter-occupied": RENTER}
    v |= {lab[:1].upper() + lab[1:]: {"tenure": (c,)} for lab, c in _codes("tenure").items()}
    v |= {
        lab[:1].upper() + lab[1:]: {"vacancy_status": (c,)}
        for lab, c in _codes("vacancy_status").items()
    }
    v |= {f"Householder who is {lab}": {"householder_race": (c,)} for lab, c in races.items()}
    v |= {
        "Householder who is Hispanic or Latino": {"hispanic_householder": (2,)},
        "Householder who is White alone, not Hispanic or Latino": {
            "householder_race": (races["White alone"],),
            "hispanic_householder": (1,),
        },
        "Not Hispanic or Latino householder": {"hispanic_householder": (1,)},
        "Hispanic or Latino householder": {"hispanic_householder": (2,)},
    }
    v |= {lab: {"household_size": (c,)} for lab, c in _codes("household_size").items()}
    v["2-or-more-person household"] = {"household_size": tuple(range(2, 8))}
    for r, i in ages.items():
        lo, _, hi = r.partition("-")
        words = f"{lo} to {hi} years" if hi else f"{lo.rstrip('+')} years and over"
        v[f"Householder {words}"] = {"householder_age": (i,)}
    v |= {
        "Householder 15 to 34 years": {"householder_age": (ages["15-24"], ages["25-34"])},
        "Householder 35 to 64 years": {
            "householder_age": tuple(ages[r] for r in ("35-44", "45-54", "55-59", "60-64"))
        },
        "Householder 65 years and over": {"householder_age": AGED_65_PLUS},
    }
    alone = tuple(LIVING_ALONE)
    not_alone = tuple(sorted(set(NONFAMILY["household_type"]) - set(alone)))
    v |= {
        "Family households": FAMILY,
        "Husband-wife family": {"household_type": (1,)},
        "Other family": {"household_type": (2, 3)},
        "Male householder, no wife present": {"household_type": (2,)},
        "Female householder, no husband present": {"household_type": (3,)},
        "Nonfamily households": NONFAMILY,
        # used only below "Nonfamily households" or "1-person household" (always nonfamily)
        "Male householder": {"household_type": (4, 5)},
        "Female householder": {"household_type": (6, 7)},
        "Living alone": {"household_type": alone},
        "Not living alone": {"household_type": not_alone},
        "Householder living alone": {"household_type": alone},
        "Householder not living alone": {"household_type": not_alone},
    }
    own = tuple(WITH_CHILDREN)
    others = tuple(c for c in range(1, 13) if c not in own)
    v |= {
        "With own children under 18 years": {"detailed_household_type": own},
        "No own children under 18 years": {"detailed_household_type": others},
        "Households with one or more people 65 years and over": {"over_65": (1,)},
        "Households with no people 65 years and over": {"over_65": (0,)},
    }
    return v


#: a table's universe in the Bureau's words (before "with a householder who is ...")
_UNIVERSES: dict[str, Predicate] = {
    "Housing units": {},
    "Occupied housing units": OCCUPIED,
    "Vacant housing units": VACANT,
    "Households": OCCUPIED,
    "Families": {**OCCUPIED, **FAMILY},
}


def _universe(table: str, layout: Layout | None = None) -> Predicate:
    """The predicate of ``table``'s universe, read from the layout (SF1 2010's, or
    ``layout``'s): its base ("Occupied housing units", "Families") and, for an iteration, the
    householder it names."""
    text = universe_of(table) if layout is None else universe_of(table, layout)
    base, _, who = text.partition(" with a householder who is ")
    pred = dict(_UNIVERSES[base])
    if who:
        pred |= householder(who)
    return pred


def householder(who: str) -> Predicate:
    """The householder an iteration's universe names: a race alone or Two or More Races, of
    either origin, Hispanic or Latino, or one of those races of one origin (the DHC's J-V:
    ``Asian Alone, not Hispanic or Latino``; its capitals vary, as the Bureau's do).

    >>> householder("Asian Alone, not Hispanic or Latino")
    {'householder_race': (4,), 'hispanic_householder': (1,)}
    """
    v = {k.casefold(): p for k, p in vocabulary().items()}
    whole = v.get(f"householder who is {who}".casefold())
    if whole is not None:
        return dict(whole)
    race, _, origin = who.rpartition(", ")
    got = v.get(f"householder who is {race}".casefold())
    hisp = {"not hispanic or latino": (1,), "hispanic or latino": (2,)}.get(origin.casefold())
    if got is None or hisp is None or "hispanic_householder" in got:
        raise KeyError(f"no householder predicate for {who!r}")
    return {**got, "hispanic_householder": hisp}


@cache
def housing_tables() -> tuple[UnitTable, ...]:
    """Every declared table, in :data:`DECLARED`'s order (housing tables, household tables,
    then the race and origin iterations)."""
    v = vocabulary()
    return tuple(from_layout(t, HOUSING_UNITS, v, universe=_universe(t)) for t in DECLARED)


def _iterations(table: str, letters: str) -> tuple[str, ...]:
    return tuple(f"{table}{i}" for i in letters)


#: the block-level 2020 DHC tables the housing-unit schema determines (iterations included):
#: what SF1 2010 called H13-H18, P18, P19 and P25 are H9-H14, P16, P20 and P19 here
DHC_DECLARED: tuple[str, ...] = (
    *("H1", "H3", "H4", "H5", "H6", "H7", "H9", "H10", "H11", "H12", "H13", "H14"),
    *("P16", "P19", "P20", "P21"),
    *_iterations("H4", "ABCDEFGHIJKLMNOPQRSTUV"),
    *_iterations("H12", "ABCDEFGHI"),
    *_iterations("H13", "ABCDEFGHI"),
    *_iterations("P16", "ABCDEFGHIJKLMNOPQRSTUV"),
)
#: block-level 2020 DHC tables over households and housing units that are not declared, and why
DHC_LEFT_OUT: dict[str, str] = {
    "H2": LEFT_OUT["H2"],
    "H8": _PERSONS,
    "H15": LEFT_OUT["H19"],
    "P15, P17": _PERSONS,
}


@cache
def dhc_vocabulary() -> dict[str, Predicate]:
    """:func:`vocabulary` and the stubs the 2020 DHC words otherwise or adds: married couples
    (SF1's husband-wife), spouses in place of wives and husbands, the cohabiting couples and
    householders without spouse or partner of P20 (the detailed household type, HHT2), people
    under 18 in the household (P21)."""
    alone_male, alone_female = (9,), (5,)
    return {
        **vocabulary(),
        "Married couple family": {"household_type": (1,)},
        "Married couple": {"household_type": (1,)},
        "Male householder, no spouse present": {"household_type": (2,)},
        "Female householder, no spouse present": {"household_type": (3,)},
        "Married couple household": {"detailed_household_type": (1, 2)},
        "Cohabiting couple household": {"detailed_household_type": (3, 4)},
        "Male householder, no spouse or partner present": {
            "detailed_household_type": (*alone_male, 10, 11, 12)
        },
        "Female householder, no spouse or partner present": {
            "detailed_household_type": (*alone_female, 6, 7, 8)
        },
        "Living alone": {"detailed_household_type": alone_male + alone_female},
        "65 years and over": {"householder_age": AGED_65_PLUS},
        "With own children under 18": {"detailed_household_type": (1, 3, 6, 10)},
        "No own children under 18": {"detailed_household_type": (2, 4)},
        "With relatives, no own children under 18": {"detailed_household_type": (7, 11)},
        "No relatives present": {"detailed_household_type": (8, 12)},
        "Households with one or more people under 18": {"under_18": (1,)},
        "Households with no people under 18": {"under_18": (0,)},
    }


@cache
def dhc_housing_tables() -> tuple[UnitTable, ...]:
    """Every declared 2020 DHC table, in :data:`DHC_DECLARED`'s order.

    >>> t = next(t for t in dhc_housing_tables() if t.name == "H4V")
    >>> len(t.cells()), t.cells()[3].id, t.universe["householder_race"], t.universe[
    ...     "hispanic_householder"]
    (4, 'H004V0004', (7,), (2,))
    """
    v = dhc_vocabulary()
    return tuple(
        from_layout(t, HOUSING_UNITS, v, universe=_universe(t, DHC_2020), layout=DHC_2020)
        for t in DHC_DECLARED
    )


#: householder sex by household type (a married couple's householder may be either)
_MALE_HOUSEHOLDER, _FEMALE_HOUSEHOLDER = (2, 4, 5), (3, 6, 7)


def _agebins(lo: int, hi: int) -> tuple[int, ...]:
    """The agebin38 codes that make up ages ``lo``..``hi`` exactly (refused if they do not)."""
    bins = tuple(i for i, (a, b) in enumerate(AGEBIN38) if a >= lo and b <= hi)
    covered = sum(AGEBIN38[i][1] - AGEBIN38[i][0] + 1 for i in bins)
    if covered != hi - lo + 1:
        raise AssertionError(f"ages {lo}-{hi} are no union of agebin38's bins")
    return bins


def person_ties() -> tuple[Tie, ...]:
    """How a block's housing units tie to its persons (person records at agebin38, the person
    block tables' resolution), each a necessary condition of any population living there:

    * every householder is a distinct person of the block with the householder's age band,
      race (the seven of H6; "Two or More Races" is any multiracial person) and origin: for
      each band x race x origin, households are at most such persons, households with a male
      householder (household types 2, 4, 5) at most such men, with a female one (3, 6, 7) at
      most such women -- together exactly the condition that householders can be matched to
      distinct persons (Hall's theorem; a married couple's householder may be either sex);
    * the households' members are at most the block's persons (a 7-or-more-person household
      counts 7);
    * each household with someone under 18 (65 and over) holds a distinct such person.

    >>> len(person_ties())
    381
    """
    races = _codes("householder_race")
    person_race: dict[int, tuple[int, ...]] = {c: (c,) for c in range(1, 7)}
    person_race[races["Two or More Races"]] = tuple(range(7, 64))
    out = []
    for a_code, band in enumerate(AGE_RANGES, start=1):
        lo, _, hi = band.partition("-")
        ages = _agebins(int(lo.rstrip("+")), int(hi) if hi else 110)
        for r_label, r in races.items():
            for h, h_label in ((1, "not Hispanic or Latino"), (2, "Hispanic or Latino")):
                who = f"aged {band}, {r_label}, {h_label}"
                a = {"householder_age": (a_code,), "householder_race": (r,)}
                a |= {"hispanic_householder": (h,)}
                b = {"agebin": ages, "race": person_race[r], "hispanic": (h - 1,)}
                out.append(Tie(f"householders {who}", a, b))
                for sex, types, noun in (
                    (0, _MALE_HOUSEHOLDER, "male"),
                    (1, _FEMALE_HOUSEHOLDER, "female"),
                ):
                    out.append(
                        Tie(
                            f"{noun} householders {who} (by household type)",
                            a | {"household_type": types},
                            b | {"sex": (sex,)},
                        )
                    )
    out.append(Tie("persons in households (7 for 7-or-more)", OCCUPIED, {}, "household_size"))
    out.append(
        Tie(
            "persons under 18 in households with people under 18 (at least 1 each)",
            {"under_18": (1,)},
            {"agebin": _agebins(0, 17)},
        )
    )
    out.append(
        Tie(
            "persons 65 and over in households with people 65 and over (at least 1 each)",
            {"over_65": (1,)},
            {"agebin": _agebins(65, 110)},
        )
    )
    return tuple(out)


_TIES_NOTE = (
    "Person records carry no household, and the household tables stop at 7-or-more persons, so "
    "the ties are necessary conditions, not a roster: every householder is a distinct person of "
    "the block with the householder's age band, race, origin and (where the household type says) "
    "sex; the households' members (7 for 7-or-more) are at most the block's persons; each "
    "household with someone under 18 or 65 and over holds a distinct such person. The tables "
    "that count persons in households (H10, H11, P16, P36) are not declared: with household "
    "size open above 7 and group-quarters persons outside both schemas, they would tie the two "
    "only through a count neither reconstruction determines."
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
        tables=housing_tables,
        synthesize=_synthesize,
        size_cell="H0010001",
        k_values=(5, 6, 7, 8, 9, 10),
        study_by_k=STUDY_TABLES_2_3,
        aside=_occupied,
        left_out=LEFT_OUT,
        releases=(
            ReleaseTables(
                release=Release.DHC_2020,
                tables=dhc_housing_tables,
                left_out=DHC_LEFT_OUT,
                report_note="These are the 2020 DHC's block-level household and housing-unit "
                "tables the ten columns determine (the study's among them), declared from the "
                "DHC's own layout (tabrecon tables list --schema households --release dhc-2020 "
                "lists those left out and why). The published DHC is the output of TopDown: "
                "its tables describe the protected data, so a claim verified on them is a "
                "claim those tables make, not necessarily a fact about the households.",
            ),
        ),
        study_cells=621,
        tied=Ties(other="persons_binned", known_as="persons", ties=person_ties, note=_TIES_NOTE),
        report_note="The study attacked the 2020 DHC household tables (621 statistics per "
        "block); these are the block-level SF1 2010 household and housing-unit tables the ten "
        "columns determine, declared from the Bureau's layout (see tabrecon tables list "
        "--schema households for the tables left out and why). SF1 2010 publishes the detailed "
        "household type only through own children (P19), and presence of people under 18 only "
        "in tables that need columns the schema lacks, so claims on those columns rest on the "
        "other tables.",
        description="SF1 2010 household and housing-unit tables (H1, H3-H7, H13-H18 and "
        "iterations, P15, P18, P19, P22, P25, P28, P35 and iterations): tenure, vacancy, size, "
        "household type, own children, people 65+, householder's age, race and origin",
    )
)
