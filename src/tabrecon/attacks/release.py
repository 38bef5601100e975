"""A release attacked in one call, for every registered population: the Python API's
:func:`reconstruct`, :func:`certify` and :func:`claims` (``tabrecon.reconstruct``, ...).

Each takes a release's tables (:class:`~tabrecon.tables.tableset.TableSet`) and the population
they count (``persons`` unless told: what a census release counts; ``households``,
``group_quarters`` or a declaration file ``NAME.toml``), and runs the engine written over any
schema (:mod:`tabrecon.engine.release`) with the runner's resume, workers and Dask (``run``:
:class:`~tabrecon.runner.RunOptions`). Records come back as the population hands them to
Python (its :attr:`~tabrecon.schema.registry.Population.view`: persons as a person
:class:`~tabrecon.schema.Microdata`, others as :class:`~tabrecon.schema.spec.Units`) and are
taken in either form.

>>> from tabrecon.schema.registry import population
>>> from tabrecon.records.synth import SynthConfig
>>> from tabrecon.tables.spec import tabulate
>>> gq = population("group_quarters")
>>> truth = gq.synthesize(SynthConfig(persons=3_000), 1)
>>> run = reconstruct(tabulate(truth), population="group_quarters", certify=True)
>>> run.failed, len(run.records) == len(truth), set(run.blocks["status"])
([], True, {'unique'})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ..errors import TabreconError
from ..runner import RunOptions
from ..schema.registry import Population
from ..schema.spec import Units
from ..tables.publication import Publication
from ..vocab import Level

if TYPE_CHECKING:
    from ..engine.release import ReleaseReconstruction
    from ..engine.solvers import SolverOptions
    from ..tables.tableset import TableSet
    from .certify import CertRun
    from .claims.certified import CertifiedClaimsRun


def _population(population: str | Population) -> Population:
    from ..tables.declaration import population as named

    return population if isinstance(population, Population) else named(population)


def _level(pop: Population, level: str | None) -> str:
    level = level or pop.default_level
    if level not in Level.choices():
        raise TabreconError(f"unknown level {level!r}; choose 'block' or 'block+tract'")
    return level


def as_units(records: Any, pop: Population) -> Units:
    """Records of ``pop`` as :class:`~tabrecon.schema.spec.Units`: as given, or from the form
    its :attr:`~tabrecon.schema.registry.Population.view` hands out (a person
    :class:`~tabrecon.schema.Microdata`: its ``to_units()``)."""
    units = records if isinstance(records, Units) else getattr(records, "to_units", None)
    if callable(units):
        units = units()
    if not isinstance(units, Units) or units.schema.name != pop.schema.name:
        got = units.schema.name if isinstance(units, Units) else type(records).__name__
        raise TabreconError(f"records of {got} given where {pop.name} records are attacked")
    return units


@dataclass
class Reconstruction:
    """Records rebuilt from a release by :func:`reconstruct`: the records (as the population
    hands them to Python; persons: an age the tables resolve only to a range is its first
    year, ``age_max`` its last, ``age_exact`` false), per block its verdict in certification's
    columns (:meth:`~tabrecon.engine.release.ReleaseReconstruction.verdicts`: ``block_geoid``,
    ``persons`` (its number of records), ``solvar``, ``solvar_lo``, ``solvar_hi``, ``proven``,
    ``status``, ``level``; status "unknown" where uniqueness was not asked), and the run
    itself (``release``: its failures, notes, conflicts and summary)."""

    population: Population
    release: ReleaseReconstruction
    #: the files written (``run.out``: the records, then the verdicts beside them)
    written: list[Path] = field(default_factory=list)

    @property
    def units(self) -> Units:
        return self.release.units

    @cached_property
    def records(self) -> Any:
        view = self.population.view
        return view(self.units) if view is not None else self.units

    @cached_property
    def blocks(self) -> pl.DataFrame:
        return self.release.verdicts()

    @property
    def failed(self) -> list[dict]:
        return self.release.failed

    @property
    def notes(self) -> tuple[str, ...]:
        return self.release.notes

    @property
    def conflicts(self) -> dict[str, list[dict]]:
        return self.release.conflicts

    @property
    def tables_used(self) -> tuple[str, ...]:
        return self.release.used

    def summary_lines(self) -> list[str]:
        return self.release.summary_lines()

    def failure_lines(self) -> list[str]:
        return self.release.failure_lines()


def reconstruct(
    tables: TableSet,
    level: str | None = None,
    solver: SolverOptions | None = None,
    *,
    population: str | Population = "persons",
    run: RunOptions | None = None,
    certify: bool = False,
    distance: bool = False,
    distance_time_limit: float | None = None,
    publication: str | Publication | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Reconstruction:
    """Records of ``population`` from a release's tables, tract by tract
    (:func:`tabrecon.engine.release.reconstruct_release`: in parallel, written to
    ``<out>.parts/`` as each finishes, a rerun resuming, as ``run`` says): each block from its
    block tables, at "block+tract" (the default where the population has tract tables) a
    tract's blocks jointly. With ``certify`` each block is also proven unique or not at the
    population's resolution (persons: agebin38, the Bureau's question), and with ``distance``
    its solution variability measured, in the same program. A table published only in part is
    left out (said in :attr:`Reconstruction.notes`); at "block+tract" a release without tract
    tables is reconstructed from its block tables. Tracts whose tables contradict each other
    name the cells whose smallest change restores feasibility. With ``run.out`` the records
    are written there as the population writes them, each block's verdict beside them.
    ``publication``: how the counts were published (a rule such as ``round:3`` or
    ``suppress:3``, :mod:`tabrecon.tables.publication`; None: as the population declares,
    exact for census populations); rounded or withheld counts are modelled as such, at
    "block" (the default level then). ``meanwhile``: the caller's own work, run while the
    tracts are solved.

    >>> from tabrecon.records.synth import SynthConfig, synthesize
    >>> from tabrecon.tables.persons import tabulate
    >>> md = synthesize(SynthConfig(persons=1_000), seed=1)
    >>> run = reconstruct(tabulate(md), certify=True)
    >>> len(run.records) == len(md), run.failed
    (True, [])
    """
    from ..engine.reconstruct import ReconstructOptions
    from ..engine.release import reconstruct_release
    from ..engine.solvers import SolverOptions

    pop = _population(population)
    pub = (
        publication
        if isinstance(publication, Publication)
        else Publication.parse(publication or pop.publication, what="publication")
    )
    pub.check_tables([t.name for t in pop.tables()], pop.name, what="publication")
    level = level or (None if pub.exact else Level.BLOCK)
    rel = reconstruct_release(
        tables,
        pop,
        ReconstructOptions(
            level=Level(_level(pop, level)),
            publication=pub,
            solver=solver or SolverOptions(),
            distance=distance,
            distance_time_limit=distance_time_limit,
            unique_on=pop.unique_on,
            check_unique=certify or distance,
        ),
        run=run,
        meanwhile=meanwhile,
    )
    out = (run or RunOptions()).out
    written = pop.write_reconstruction(rel, Path(out)) if out is not None else []
    rel.units.source = f"reconstruction ({rel.level})"
    return Reconstruction(pop, rel, written)


def certify(
    tables: TableSet,
    records: Any,
    level: str | None = None,
    solver: SolverOptions | None = None,
    *,
    population: str | Population = "persons",
    run: RunOptions | None = None,
    distance: bool = True,
    distance_time_limit: float | None = None,
) -> CertRun:
    """Certify a reconstruction of ``population``'s records made elsewhere (a file, another
    tool's, the truth): each block proven unique or not at the population's resolution and,
    with ``distance``, its solution variability measured from these records
    (:func:`tabrecon.attacks.certify.certify_release`: tracts in parallel, written to
    ``<out>.parts/``, resumable). A tract where the records break a published cell, hold a
    record the published zeros rule out or leave an inhabited block empty is refused by name,
    and the others go on. Returns certification's run (its ``blocks``, per record its
    uniqueness ``flags`` where the population declares them, ``write``, ``summary_lines``).

    >>> from tabrecon.records.synth import SynthConfig, synthesize
    >>> from tabrecon.tables.persons import tabulate
    >>> md = synthesize(SynthConfig(persons=1_000), seed=1)
    >>> run = certify(tabulate(md), md)
    >>> run.failed, set(run.blocks["status"]) <= {"unique", "varies"}
    ([], True)
    """
    from .certify import certify_release

    pop = _population(population)
    return certify_release(
        tables,
        pop,
        as_units(records, pop),
        _level(pop, level),
        solver,
        run=run,
        distance=distance,
        distance_time_limit=distance_time_limit,
    )


def claims(
    tables: TableSet,
    records: Any,
    cert_blocks: pl.DataFrame,
    level: str = Level.BLOCK,
    *,
    population: str | Population = "persons",
    solver: SolverOptions | None = None,
    k_solutions: int = 100,
    seed: int = 0,
    run: RunOptions | None = None,
    tract_seconds: float | None = None,
) -> CertifiedClaimsRun:
    """Verified claims about the records of every block of a release, from its reconstruction
    and that reconstruction's certification (``cert_blocks``: :attr:`Reconstruction.blocks` of
    :func:`reconstruct` with ``certify=True``, or :func:`certify`'s), tract by tract:
    :func:`tabrecon.attacks.claims.certified.certified_claims` over the population's schema. With
    ``run.out`` each tract's per-record table is written to ``<out>/claims.parts/`` as it
    finishes and a rerun resumes. ``tract_seconds`` caps each tract's time (its claims
    verified by then are kept;
    :attr:`~tabrecon.attacks.claims.certified.CertifiedClaimsRun.incomplete`).

    >>> from tabrecon.records.synth import SynthConfig, synthesize
    >>> from tabrecon.tables.persons import tabulate
    >>> md = synthesize(SynthConfig(persons=800), seed=2)
    >>> ts = tabulate(md)
    >>> rec = reconstruct(ts, "block", certify=True)
    >>> run = claims(ts, rec.records, rec.blocks, "block", k_solutions=5)
    >>> run.failed, run.summary()["persons"] == len(md)
    ([], True)
    """
    from ..engine.release import plan_release
    from ..engine.solvers import SolverOptions
    from ..geo import overlap
    from .claims.certified import CertifiedClaimsOptions, certified_claims

    pop = _population(population)
    units = as_units(records, pop)
    options = CertifiedClaimsOptions(
        level=level,
        k_solutions=k_solutions,
        seed=seed,
        solver=solver or SolverOptions(),
        tract_seconds=tract_seconds,
    )
    overlap(
        tables.inhabited_blocks(),
        units.blocks()[0],
        tables.source or "the tables",
        units.source or "the reconstruction",
    )
    split = plan_release(tables, pop, level).split
    return certified_claims(split, pop, units, cert_blocks, options, run=run)
