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

import numpy as np

from .errors import TabreconError

#: Levels from the coarsest (TopDown's root) to the finest.
LEVELS: tuple[str, ...] = ("nation", "state", "county", "tract", "blockgroup", "block")
#: Length of a geoid at each level.
LENGTH: dict[str, int] = {
    "nation": 0,
    "state": 2,
    "county": 5,
    "tract": 11,
    "blockgroup": 12,
    "block": 15,
}
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


__all__ = ["LENGTH", "LEVELS", "LEVEL_OF_LENGTH", "TABLE_LEVELS", "level_of", "parent", "prefix"]
