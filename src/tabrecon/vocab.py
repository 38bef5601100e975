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


class Capability(Words):
    """What a population's records offer beyond what every population has (its tables,
    reconstruction, certification, Generate-then-Verify's claims, maps): each stage of the
    audit and each command that needs more states which of these it needs
    (:data:`tabrecon.audit.stages.NEEDS`), each population which it has
    (:attr:`Population.capabilities`), and the audit runs every stage its population can.

    >>> from tabrecon.schema.registry import population
    >>> population("persons").can(Capability.LINKABLE), population("households").can(
    ...     Capability.LINKABLE)
    (True, False)
    """

    #: its records are people an attacker links to commercial data on the reconstructed
    #: columns: agreement with the truth and reidentification against the baselines
    LINKABLE = "linkable"
    #: the defenses take its records (swapping, the DP mechanisms, TopDown) and are measured by
    #: linking its records again
    DEFENDED = "defended"
    #: its verified claims come from every tract's certification (not Generate-then-Verify on
    #: the blocks nearest the median size): claims at every level, singled out per block
    CLAIMS_BY_TRACT = "claims-by-tract"
    #: a housing-unit file describes its records' households (``synth --households`` writes
    #: one beside them, ``audit --households`` attacks it with them)
    HOUSEHOLDS = "households"
    #: its synthetic county is calibrated against published 2010 figures (``synth`` prints
    #: the calibration)
    CALIBRATED = "calibrated"


class Stage(Words):
    """The audit's stages that need more of a population than its tables (the others --
    tabulation, reconstruction, certification, Generate-then-Verify, maps -- run for every
    population): what each needs is :data:`tabrecon.audit.stages.NEEDS`."""

    AGREEMENT = "agreement"  # the reconstruction matched to the records
    REIDENTIFY = "reidentify"  # linked to an attacker's data, against the baselines
    DEFENSES = "defenses"  # each defense applied and attacked again
    CLAIMS = "claims"  # verified claims from every tract's certification
    HOUSEHOLDS = "households"  # a companion housing-unit file attacked with the records


class Release(Words):
    """A census product whose tables a population's records are published in: the table set a
    command declares, reads and attacks (``--release``)."""

    SF1_2010 = "sf1-2010"  # the 2010 Summary File 1 (exact counts)
    DHC_2020 = "dhc-2020"  # the 2020 Demographic and Housing Characteristics File (TopDown)

    @property
    def label(self) -> str:
        """How a report names the release's tables (``the 2020 DHC tables H1, ...``)."""
        return {"sf1-2010": "SF1 2010", "dhc-2020": "2020 DHC"}[self.value]


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
