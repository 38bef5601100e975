"""The registry of populations: every schema tabrecon attacks, by the name ``--schema`` takes.

A :class:`Population` is a declaration: a :class:`~tabrecon.schema.spec.Schema`, the tables
published over it, what its records are called, how to synthesize a file of them, and the
defaults its attacks use. Each lives in one module of the package :mod:`tabrecon.populations`
(persons, housing units, group quarters), which registers it when imported; the registry imports
every module of that package the first time it is asked, so a new population is one new file
there and nothing else. Commands take their ``--schema`` choices and their dispatch from here,
never from names written in their code.

>>> sorted(names())
['group_quarters', 'households', 'persons']
>>> population("households").noun
'housing units'
>>> population("hogwarts")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tabrecon.errors.TabreconError: unknown schema 'hogwarts'; choose from ...
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from ..errors import TabreconError
from ..vocab import Capability, Release
from .spec import Schema


@dataclass(frozen=True)
class Tie:
    """One necessary relation between two populations' records of a block: the records of
    population A matching ``a`` (each weighing the code of its attribute ``weight``, else 1)
    are at most the records of population B matching ``b``. A householder is a person:
    households whose householder is a Black woman aged 25-34 are at most the block's Black
    women aged 25-34.

    >>> Tie("households are at most persons", {"vacancy_status": (0,)}, {}).weight is None
    True
    """

    what: str
    a: Mapping[str, tuple[int, ...]]
    b: Mapping[str, tuple[int, ...]]
    weight: str | None = None


@dataclass(frozen=True, kw_only=True)
class Ties:
    """How a population's records tie to another's in the same block (the households to the
    persons living in them): the other population as its block-level model (``other``, e.g.
    ``persons_binned``), the name users know its tables by (``known_as``), the ties (called
    once, lazily) and what they leave out (``note``, for the docs and reports)."""

    other: str
    known_as: str
    ties: Callable[[], Sequence[Tie]] = field(compare=False)
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class ReleaseTables:
    """A population's tables in a release other than SF1 2010 (the 2020 DHC): declared from
    that product's layout (called once, lazily) and what the release publishes over the same
    records that is not declared, table -> why."""

    release: Release
    tables: Callable[[], Sequence[Any]] = field(compare=False)
    left_out: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: the cell that counts a block's records in this release, where not the population's own
    #: (group quarters: the DHC's P18 total; SF1's was P42's)
    size_cell: str = ""
    #: what a report says of these tables, where not the population's own note
    report_note: str = ""


@dataclass(frozen=True, kw_only=True)
class Population:
    """One registered schema and what the commands need to know of it."""

    #: the name ``--schema`` takes (``households``)
    name: str
    schema: Schema
    #: what its records are called, plural (``housing units``)
    noun: str
    #: what a block's records are called where a block is described (a map's ``12 residents``);
    #: empty: :attr:`noun` (read :attr:`block_noun`)
    residents: str = ""
    #: the tables published over it (called once, lazily: declarations may read files)
    tables: Callable[[], Sequence[Any]] = field(compare=False)
    #: a synthetic county's records (:class:`~tabrecon.schema.spec.Units`) from a
    #: :class:`~tabrecon.records.synth.SynthConfig` and a seed
    synthesize: Callable[[Any, int], Any] | None = field(default=None, compare=False)
    #: the cell that holds a block's number of records (a block's size, to pick median blocks)
    size_cell: str = ""
    #: the cells that count a block's records, in the order trusted, where a release may lack
    #: ``size_cell`` (persons: P1, else the total line of P3, P4, P5, P8, P9 or P12: the P.L.
    #: 94-171 tables have no P1); empty: ``size_cell`` alone
    size_cells: tuple[str, ...] = ()
    #: columns per verified claim when the user does not say (1..number of attributes)
    k_values: tuple[int, ...] = ()
    #: a published study's figures to show beside verified claims: k -> (records singled out,
    #: records covered)
    study_by_k: Mapping[int, tuple[int, int]] = field(default_factory=dict, compare=False)
    #: a few words a report adds after the number of records (``12,345 occupied``)
    aside: Callable[[Any], str] | None = field(default=None, compare=False)
    #: what a report says of the tables and the comparison (a paragraph, plain text)
    report_note: str = ""
    #: published tables over the same records that are not declared: tables -> why
    left_out: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: statistics per block in the published study the figures are compared with (0: none)
    study_cells: int = 0
    #: what its records offer beyond what every population has (:class:`Capability`)
    capabilities: frozenset[Capability] = frozenset()
    #: its tables in other releases than SF1 2010 (:attr:`tables`), one per release
    releases: tuple[ReleaseTables, ...] = field(default=(), compare=False)
    #: shown in ``--schema`` help and ``tables list``; False for internal resolutions
    listed: bool = True
    #: how its records tie to another population's in the same block (households: persons)
    tied: Ties | None = field(default=None, compare=False)
    description: str = ""
    #: how its counts are published when a command is not told (``--publication``): a
    #: :class:`~tabrecon.tables.publication.Publication` rule's text; census populations: exact
    publication: str = "exact"
    #: the declaration file it was read from (:mod:`tabrecon.tables.declaration`), for worker
    #: processes
    source: str = ""
    #: the twin of a population modelled finer than its block tables tell (its block tables at
    #: the resolution they determine: persons by agebin38), which each block's claims from its
    #: tables and ``sweep-publication`` attack
    generic: str = ""
    #: reads a file of its records as :class:`~tabrecon.schema.spec.Units` when they are not
    #: written in its own schema's columns (persons: a person file, its race as six flags); None:
    #: the schema's (:meth:`records`)
    read: Callable[[Any], Any] | None = field(default=None, compare=False)
    #: the names of its tables a ``--tables`` value selects, where it names selections of its own
    #: (persons: ``all`` is the 34 tables of Abowd et al., ``published`` adds P3-P5, ``block``,
    #: ``tract``); None: ``all`` or a comma list (:func:`tabrecon.tables.spec.select_tables`)
    select: Callable[[str], Sequence[str]] | None = field(default=None, compare=False)
    #: the cell id of each of a wide file's variables (its columns) named otherwise than in SF1
    #: 2010's and the 2010 API's spelling, which every population reads (persons: the 2020 P.L.
    #: 94-171 and DHC names, ``P1_071N``); None: no other names are read
    spell: Callable[[Sequence[str]], Mapping[str, str]] | None = field(default=None, compare=False)
    #: each cell's name in the 2020 products, for a population whose 2020 tables keep SF1's
    #: numbering (persons: the DHC's ``P12A_003N``); None: its 2020 names are not declared and
    #: never guessed from 2010 labels (``tabrecon download --year 2020`` refuses it)
    name_2020: Callable[[str], str] | None = field(default=None, compare=False)
    #: the resolution a block's uniqueness is asked at, attribute -> its codes' coarser codes
    #: (persons: age by agebin38, the Bureau's question); None: the schema's types
    unique_on: Mapping[str, Any] | None = field(default=None, compare=False)
    #: how its verified claims read, given a tract's published tables and the level
    #: (:func:`tabrecon.attacks.claims.certified.tract_claims`; persons: the age as those
    #: tables determine it); None: the claim columns' labels
    #: (:func:`tabrecon.attacks.claims.certified.plain_words`)
    claim_words: Callable[[Any, str], Callable[..., str]] | None = field(
        default=None, compare=False
    )
    #: cells its tables publish that count something other than its records: read, kept and
    #: written beside the declared cells, never modelled; cell id -> its table's name (persons:
    #: the race tallies P0060001, P0070001, P0070002, P0070009, a person counted once per race,
    #: each the sum of its table's race lines: :func:`tabrecon.tables.consistency.identities`)
    unmodelled: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: each unmodelled cell's weight on every type of the schema (rows in :attr:`unmodelled`'s
    #: order, columns the schema's type codes), for tabulation (:func:`tabrecon.tables.spec.
    #: tabulate`); None: they are read and written, never tabulated
    unmodelled_weights: Callable[[], Any] | None = field(default=None, compare=False)
    #: writes a reconstruction of its records (:class:`~tabrecon.engine.release
    #: .ReleaseReconstruction`) to a path, returning the files written, when not in its
    #: schema's columns (persons: the person file, each block's verdict in certification's
    #: columns); None: :meth:`write_reconstruction`'s
    writer: Callable[[Any, Any], list[Any]] | None = field(default=None, compare=False)
    #: checks every identity between its published cells in a release
    #: (:class:`~tabrecon.tables.tableset.TableSet`) its own way (persons: the SF1 identities
    #: vendored in ``data/identities``, race tallies included; ``tabrecon check-tables``); None:
    #: the identities derived from its tables' declarations
    #: (:func:`tabrecon.tables.consistency.check_unit_consistency`)
    check: Callable[[Any], Any] | None = field(default=None, compare=False)
    #: per reconstructed record, the uniqueness flags its certification writes, given the records
    #: (:class:`~tabrecon.schema.spec.Units`) and each block's verdict (persons: unique in the
    #: block on sex and agebin, and on every column, and whether the block is certified:
    #: :func:`tabrecon.attacks.certify.uniqueness_flags`); None: none
    flags: Callable[[Any, Any], Any] | None = field(default=None, compare=False)
    #: its records as the Python API hands them out (:mod:`tabrecon.attacks.release`), from
    #: :class:`~tabrecon.schema.spec.Units` (persons: a person
    #: :class:`~tabrecon.schema.Microdata`, which gives them back by its ``to_units()``);
    #: None: the :class:`~tabrecon.schema.spec.Units` themselves
    view: Callable[[Any], Any] | None = field(default=None, compare=False)

    def __reduce__(self) -> tuple[Callable[..., Population], tuple[str, str]]:
        """Pickled as the key that gives it back and the declaration it was read from: a worker
        process receives the value (its tables and closures are made again there, once), never
        a name to look up in a registry the worker may not have filled."""
        return _revived, (self.key, self.source)

    def release_tables(self, release: Release | str = Release.SF1_2010) -> Sequence[Any]:
        """Its tables in ``release`` (SF1 2010: :attr:`tables`); a release it has no tables
        declared in is refused, naming those it has."""
        release = Release(release)
        if release is Release.SF1_2010:
            return self.tables()
        for r in self.releases:
            if r.release is release:
                return r.tables()
        if self.source:
            raise TabreconError(
                f"{self.name} declares tables of its own ({self.source}), in no census release: "
                f"leave --release out"
            )
        have = ", ".join([Release.SF1_2010.value, *(r.release.value for r in self.releases)])
        raise TabreconError(f"no {release} tables are declared over {self.name} (only {have})")

    @property
    def key(self) -> str:
        """The name that gives back this value from :func:`population`, in this process or a
        worker's: its name, and for another release than SF1 2010 the release after an ``@``
        (``households@dhc-2020``). What published tables carry to say whose they are."""
        r = self.schema.release
        return self.name if r is Release.SF1_2010 else f"{self.name}@{r.value}"

    def in_release(self, release: Release | str) -> Population:
        """This population as published in ``release``: the same records and attributes, its
        schema marked with the release (:attr:`~tabrecon.schema.spec.Schema.release`), its
        tables and what is left out those of the release; records it reads or synthesizes are
        marked too. SF1 2010: itself; a release without tables declared is refused.

        >>> dhc = population("households").in_release("dhc-2020")
        >>> str(dhc.schema.release), [t.name for t in dhc.tables()[:3]], dhc.name
        ('dhc-2020', ['H1', 'H3', 'H4'], 'households')
        """
        release = Release(release)
        if release is self.schema.release:
            return self
        return _in_release(self, release)

    def _released(self, release: Release) -> Population:
        """:meth:`in_release`, made (once per population and release: :func:`_in_release`)."""
        tables = self.release_tables(release)  # refused here when not declared
        got = next(r for r in self.releases if r.release is release)
        schema = replace(self.schema, release=release)
        marked = tuple(replace(t, schema=schema) for t in tables)
        return replace(
            self,
            schema=schema,
            tables=lambda: marked,
            left_out=got.left_out,
            size_cell=got.size_cell or self.size_cell,
            size_cells=() if got.size_cell else self.size_cells,
            report_note=got.report_note or self.report_note,
            synthesize=None if self.synthesize is None else _marking(self.synthesize, schema),
            read=None if self.read is None else _marking(self.read, schema),
            releases=(),
            select=None,  # its selections (persons' "all": the 34) name SF1's tables
            # the defenses re-tabulate SF1 2010's person tables: not a defense of this release
            capabilities=self.capabilities - {Capability.DEFENDED},
            study_cells=0,
            study_by_k={},
        )

    def left_out_of(self, release: Release | str = Release.SF1_2010) -> Mapping[str, str]:
        """What ``release`` publishes over its records that is not declared, table -> why."""
        release = Release(release)
        if release is Release.SF1_2010:
            return self.left_out
        return next((r.left_out for r in self.releases if r.release is release), {})

    def tied_population(self) -> Population:
        """The population its records tie to (:attr:`tied`: households -> persons by agebin38);
        one that declares no ties is refused."""
        if self.tied is None:
            raise TabreconError(f"{self.name} declares no ties to another population's records")
        return population(self.tied.other)

    def can(self, *needs: Capability) -> bool:
        """Whether it has every capability in ``needs``."""
        return set(needs) <= self.capabilities

    @property
    def block_noun(self) -> str:
        """What a block's records are called where a block is described (persons:
        ``residents``; housing units: ``housing units``)."""
        return self.residents or self.noun

    @property
    def total_cells(self) -> tuple[str, ...]:
        """The cells that count a block's records, in the order trusted."""
        return self.size_cells or ((self.size_cell,) if self.size_cell else ())

    def records(self, path: Any, counties: Sequence[str] | None = None) -> Any:
        """Its records in the file at ``path`` as :class:`~tabrecon.schema.spec.Units`: read
        by its :attr:`read` where it has one, else in its schema's columns; with ``counties``
        (5-digit state+county codes) only those counties' records (streamed from the file where
        read in its schema's columns)."""
        import numpy as np

        from .spec import read_units

        if self.read is None:
            return read_units(path, self.schema, counties)
        units = self.read(path)
        if counties is None:
            return units
        county = units.block_geoid.astype(str).astype("U5")  # a geoid's first five digits
        return units.take(np.flatnonzero(np.isin(county, list(counties))))

    def write_reconstruction(self, run: Any, out: Any) -> list[Any]:
        """Write a reconstruction of its records to ``out`` (Parquet or CSV) and each block's
        verdict beside it (``OUT_blocks.csv``), by its :attr:`writer` where it has one;
        returns the paths written."""
        from ..io import beside, write_csv
        from .spec import write_units

        if self.writer is not None:
            return self.writer(run, out)
        write_units(run.units, out)
        return [out, write_csv(run.blocks, beside(out, "_blocks.csv"))]

    @property
    def default_level(self) -> str:
        """The level a reconstruction answers when not told: ``block+tract`` where its tables
        include tract tables, else ``block``."""
        from ..vocab import Geo, Level

        tract = any(t.level == Geo.TRACT for t in self.tables())
        return str(Level.BLOCK_TRACT if tract else Level.BLOCK)

    def published_cells(self, names: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """Every cell its tables publish (the declared cells and the :attr:`unmodelled` ones),
        in table order, each with its table's level; in a table with unmodelled cells, by id
        (their line order). ``names``: only these tables'."""
        out: list[tuple[str, str]] = []
        for t in self.tables():
            if names is not None and t.name not in names:
                continue
            ids = [c.id for c in t.cells()]
            extra = [c for c, name in self.unmodelled.items() if name == t.name]
            out.extend((c, t.level) for c in (sorted(ids + extra) if extra else ids))
        return out

    def __post_init__(self) -> None:
        n = len(self.schema.attributes)
        if any(not 1 <= k <= n for k in self.k_values):
            raise TabreconError(f"{self.name}: k values must lie in 1..{n} ({self.k_values})")


@cache
def _in_release(pop: Population, release: Release) -> Population:
    """One value per population and release: every lookup of a release-marked schema gives
    the same object (its tables made once)."""
    return pop._released(release)


def _marking(make: Callable[..., Any], schema: Schema) -> Callable[..., Any]:
    """``make`` (a reader or a synthesizer of records) with its records marked as ``schema``'s
    (the same attributes, another release)."""

    def marked(*args: Any) -> Any:
        return replace(make(*args), schema=schema)

    return marked


_REGISTRY: dict[str, Population] = {}
_LOADED: list[bool] = []


def register(p: Population, replace: bool = False) -> Population:
    """Add ``p`` (refused when its name or schema is taken, unless ``replace``)."""
    old = _REGISTRY.get(p.name)
    if old is not None and not replace and old.schema != p.schema:
        raise TabreconError(f"a population named {p.name!r} is registered already")
    _REGISTRY[p.name] = p
    return p


def _load() -> None:
    """Import every module of :mod:`tabrecon.populations` once (each registers its own)."""
    if _LOADED:
        return
    _LOADED.append(True)
    pkg = importlib.import_module("tabrecon.populations")
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"tabrecon.populations.{m.name}")


def names(listed: bool = True) -> list[str]:
    """The registered names, in registration order (``listed``: those users choose from)."""
    _load()
    return [n for n, p in _REGISTRY.items() if p.listed or not listed]


def population(name: str) -> Population:
    """The population registered as ``name``; an unknown name is refused with the choices (a
    declaration file, ``NAME.toml``, is read by :func:`tabrecon.tables.declaration.population`)."""
    _load()
    if "@" in name:  # a population in another release (its key: households@dhc-2020)
        base, _, release = name.partition("@")
        if release not in Release.choices():
            raise TabreconError(f"unknown release {release!r}; choose from {Release.choices()}")
        return population(base).in_release(release)
    if name not in _REGISTRY:
        raise TabreconError(
            f"unknown schema {name!r}; choose from {', '.join(names())} or a declaration file "
            "(NAME.toml: docs/declarations.md)"
        )
    return _REGISTRY[name]


def _revived(key: str, source: str) -> Population:
    """A pickled :class:`Population` in this process: read from its declaration file first
    where it came from one this process has not read."""
    base = key.partition("@")[0]
    _load()
    if source and base not in _REGISTRY:
        declaration = importlib.import_module("tabrecon.tables.declaration")
        declaration.load_declaration(source)
    return population(key)


def declarations() -> tuple[str, ...]:
    """The declaration files read in this process, for worker processes to read again."""
    return tuple(p.source for p in _REGISTRY.values() if p.source)


def of_schema(schema: Schema) -> Population:
    """The population whose schema is ``schema`` (by name)."""
    _load()
    for p in _REGISTRY.values():
        if p.schema.name == schema.name:
            return p.in_release(schema.release)
    raise TabreconError(
        f"no tables are declared over the schema {schema.name!r} (register a "
        "tabrecon.schema.registry.Population, or tabrecon.tables.spec.declare_tables)"
    )


def population_of_cells(cells: Sequence[str | None], but: str = "") -> str | None:
    """The registered population (other than ``but``) whose tables hold most of ``cells``: what a
    message names when a file of one population's tables is handed to another's command."""
    best, hits = None, 0
    wanted = {c.strip().upper() for c in cells if isinstance(c, str)}  # a short row: None
    for name in names():
        if name == but:
            continue
        ids = {c.id for t in population(name).tables() for c in t.cells()}
        n = len(wanted & ids)
        if n > hits:
            best, hits = name, n
    return best
