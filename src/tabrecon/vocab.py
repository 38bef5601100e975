"""Closed vocabularies: the words runs, files and options share, each one enum.

Each member *is* its string (:class:`enum.StrEnum`), so files keep the words they always held
and a member compares equal to the text a user typed; code names the member, never the text.

>>> Level("block+tract") is Level.BLOCK_TRACT, Verdict.UNIQUE == "unique"
(True, True)
>>> Solver.choices()
('auto', 'cpsat', 'highs')
"""

from __future__ import annotations

import enum


class Words(enum.StrEnum):
    @classmethod
    def choices(cls) -> tuple[str, ...]:
        """The words, in declaration order (an option's choices)."""
        return tuple(m.value for m in cls)


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


class Solver(Words):
    """The solver backends (``auto``: the one measured fastest for each task)."""

    AUTO = "auto"
    CPSAT = "cpsat"
    HIGHS = "highs"
