"""Closed vocabularies: the words runs, files and options share, each one enum.

Each member *is* its string (:class:`enum.StrEnum`), so files keep the words they always held
and a member compares equal to the text a user typed; code names the member, never the text.

>>> Level("block+tract") is Level.BLOCK_TRACT, Verdict.UNIQUE == "unique"
(True, True)
>>> Solver.choices()
('auto', 'cpsat', 'highs')
>>> Geo.TRACT == "tract", Geo("block").length
(True, 15)
"""

from __future__ import annotations

import enum


class Words(enum.StrEnum):
    @classmethod
    def choices(cls) -> tuple[str, ...]:
        """The words, in declaration order (an option's choices)."""
        return tuple(m.value for m in cls)


class Geo(Words):
    """Census geography levels, coarsest (TopDown's root) to finest, each with the length of its
    geoids (a unit's parent at a coarser level is its geoid's prefix: :mod:`tabrecon.geo`)."""

    NATION = "nation"
    STATE = "state"
    COUNTY = "county"
    TRACT = "tract"
    BLOCKGROUP = "blockgroup"
    BLOCK = "block"

    @property
    def length(self) -> int:
        """How many digits this level's geoids have."""
        return _GEOID_LENGTH[self]


_GEOID_LENGTH = {
    Geo.NATION: 0,
    Geo.STATE: 2,
    Geo.COUNTY: 5,
    Geo.TRACT: 11,
    Geo.BLOCKGROUP: 12,
    Geo.BLOCK: 15,
}


class Level(Words):
    """What tables a reconstruction uses: each block's own, or with its tract's jointly."""

    BLOCK = "block"
    BLOCK_TRACT = "block+tract"


class Verdict(Words):
    """A block's reconstruction verdict."""

    UNIQUE = "unique"  # the only population the tables allow (a proof)
    VARIES = "varies"  # another one exists (a witness)
    UNDECIDED = "undecided"  # a limit was hit before either
    INFEASIBLE = "infeasible"  # the tables contradict each other (a proof)
    FAILED = "failed"  # no solution within the limit
    REFUSED = "refused"  # a reference population breaks the tables
    UNKNOWN = "unknown"  # not asked


class ClaimStatus(Words):
    """How a block's Generate-then-Verify ended."""

    OK = "ok"
    TIME_LIMIT = "time-limit"  # claims verified before the block's time ran out are kept
    INFEASIBLE = "infeasible"


class UnitStatus(Words):
    """How one unit of work (a tract, a block) handed to :func:`tabrecon.runner.run_units` ended:
    it returned its result, or it raised (recorded, the other units went on)."""

    OK = "ok"
    ERROR = "error"


class SolveStatus(Words):
    """How one solver call ended: a proof (optimal, infeasible), a solution without its proof of
    optimality, a time limit, or the solver's own error."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    TIMEOUT = "timeout"
    ERROR = "error"


class Solver(Words):
    """The solver backends (``auto``: the one measured fastest for each task)."""

    AUTO = "auto"
    CPSAT = "cpsat"
    HIGHS = "highs"
