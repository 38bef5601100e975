"""Census geography: the levels, the length of each level's geoid, and prefixes (parents).

A geoid is a string of digits; a unit's parent at a coarser level is the geoid's prefix of that
level's length (state 2, county 5, tract 11, block group 12, block 15; the nation is the empty
prefix). Every module takes geography from here instead of slicing strings with numbers.

>>> prefix(np.array(["280010001001000", "280010002002001"]), "tract").tolist()
['28001000100', '28001000200']
>>> level_of("28001")
'county'
"""

from __future__ import annotations

import csv
import functools
from importlib import resources

import numpy as np

from .errors import TabreconError
from .vocab import Geo

#: Levels from the coarsest (TopDown's root) to the finest (:class:`tabrecon.vocab.Geo`).
LEVELS: tuple[str, ...] = Geo.choices()
#: Length of a geoid at each level.
LENGTH: dict[str, int] = {lv.value: lv.length for lv in Geo}
#: The levels a published table can be at (the nation is never one here).
TABLE_LEVELS: tuple[str, ...] = LEVELS[1:]
#: The level of each geoid length.
LEVEL_OF_LENGTH: dict[int, str] = {n: lv for lv, n in LENGTH.items()}


def prefix(geoids: np.ndarray | list[str], level: str) -> np.ndarray:
    """Each geoid's unit at ``level`` (its prefix of that level's length), as a string array."""
    n = LENGTH[level]
    a = np.asarray(geoids, dtype=str)
    if n == 0:
        return np.full(a.shape, "", dtype=str)
    return a.astype(f"<U{n}") if a.size else a


def level_of(geoid: str) -> str | None:
    """The level a geoid's length names (None for a length no level has)."""
    return LEVEL_OF_LENGTH.get(len(geoid))


def parent(level: str) -> str:
    """The next coarser level."""
    i = LEVELS.index(level)
    if i == 0:
        raise TabreconError("the nation has no parent level")
    return LEVELS[i - 1]


#: How the counties of the 2020 Census differ from 2010's (the Census Bureau's "Substantial
#: Changes to Counties and County Equivalent Entities", 2010 to 2020): Bedford city, VA merged into
#: Bedford County (2013); Shannon County, SD renamed Oglala Lakota County with a new code (2015);
#: Wade Hampton Census Area, AK renamed Kusilvak Census Area with a new code (2015);
#: Valdez-Cordova Census Area, AK split into Chugach and Copper River Census Areas (2019).
COUNTY_CHANGES_2020: dict[str, str | None] = {
    "51515": None,
    "46113": None,
    "46102": "Oglala Lakota County",
    "02270": None,
    "02158": "Kusilvak Census Area",
    "02261": None,
    "02063": "Chugach Census Area",
    "02066": "Copper River Census Area",
}


@functools.cache
def counties(year: int = 2010) -> dict[str, str]:
    """The counties (and equivalents) of the 50 states, the District of Columbia and Puerto Rico
    in the ``year`` Census, 5-digit code -> name: the Bureau's 2010 FIPS list shipped with the
    package (``data/counties_2010.csv``, from its ``national_county.txt``), and for 2020 that list
    with :data:`COUNTY_CHANGES_2020` applied.

    >>> len(counties(2010)), len(counties(2020))
    (3221, 3221)
    >>> counties(2010)["39059"], counties(2020)["02063"]
    ('Guernsey County', 'Chugach Census Area')
    """
    text = resources.files("tabrecon").joinpath("data/counties_2010.csv").read_text("utf-8")
    out = {r["state"] + r["county"]: r["name"] for r in csv.DictReader(text.splitlines())}
    if year >= 2020:
        for code, name in COUNTY_CHANGES_2020.items():
            if name is None:
                out.pop(code, None)
            else:
                out[code] = name
    return out


@functools.cache
def states(year: int = 2010) -> dict[str, str]:
    """The states (and the District of Columbia, Puerto Rico) of :func:`counties`, 2-digit code
    -> postal abbreviation."""
    text = resources.files("tabrecon").joinpath("data/counties_2010.csv").read_text("utf-8")
    return {r["state"]: r["usps"] for r in csv.DictReader(text.splitlines())}


def overlap(
    left: np.ndarray | list[str] | set[str],
    right: np.ndarray | list[str] | set[str],
    lname: str,
    rname: str,
    what: str = "inhabited blocks",
) -> tuple[int, int, int]:
    """(in both, only in ``left``, only in ``right``) for two sets of geoids, refusing two that
    have none in common (a comparison of disjoint files measures nothing): the error names both
    files and an example of each side's. An empty side is not refused (nothing came back is a
    finding, not a mismatch).

    >>> overlap(["990010001001000"], ["390590001001000"], "a.csv", "b.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: a.csv and b.csv have no inhabited blocks in common ...
    >>> overlap(["1", "2"], ["2", "3", "4"], "a", "b")
    (1, 1, 2)
    """
    a, b = {str(x) for x in left}, {str(x) for x in right}
    both = a & b
    if not both and a and b:
        raise TabreconError(
            f"{lname} and {rname} have no {what} in common ({len(a):,} in {lname}, e.g. "
            f"{min(a)}; {len(b):,} in {rname}, e.g. {min(b)}): they describe different places"
        )
    return len(both), len(a - b), len(b - a)


def check_county(state: str, county: str, year: int = 2010) -> str:
    """The county's name when ``state`` and ``county`` are the FIPS codes of a county of the
    ``year`` Census (checked without any request); else an error saying what is wrong.

    >>> check_county("39", "059")
    'Guernsey County'
    >>> check_county("39", "999")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: --county 999: no county of OH (state 39) has this FIPS code ...
    """
    if not (state.isdigit() and len(state) == 2 and county.isdigit() and len(county) == 3):
        raise TabreconError("--state must be 2 digits and --county 3 digits (FIPS codes)")
    known = states(year)
    if state not in known:
        raise TabreconError(
            f"--state {state}: not the FIPS code of a state, the District of Columbia or Puerto "
            f"Rico in the {year} Census (e.g. 39 for Ohio)"
        )
    name = counties(year).get(state + county)
    if name is None:
        codes = sorted(c[2:] for c in counties(year) if c.startswith(state))
        raise TabreconError(
            f"--county {county}: no county of {known[state]} (state {state}) has this FIPS code "
            f"in the {year} Census; {known[state]}'s codes run {codes[0]} to {codes[-1]}"
        )
    return name


__all__ = [
    "COUNTY_CHANGES_2020",
    "LENGTH",
    "LEVELS",
    "LEVEL_OF_LENGTH",
    "TABLE_LEVELS",
    "check_county",
    "overlap",
    "counties",
    "level_of",
    "parent",
    "prefix",
    "states",
]
