"""A whole release reconstructed, tract by tract, through the runner.

:func:`reconstruct_release` takes a release's tables (a long table, a
:class:`~tabrecon.tables.tableset.TableSet`, or :class:`TractTables`: each tract's part read
from its grids in the worker that reconstructs it) and runs
:func:`~tabrecon.engine.reconstruct.reconstruct_units` on every tract with
:func:`tabrecon.runner.run_units`: in parallel, each tract written as it finishes, a rerun
resuming, a failed tract recorded while the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..runner import Result, RunOptions, UnitsRun, run_units
from ..schema.spec import Schema, Units
from ..tables.spec import compiled, table_by_name, tables_of
from ..tables.tableset import MISSING, TableSet
from ..vocab import Geo, Level, UnitStatus, Verdict
from .reconstruct import ReconstructOptions, reconstruct_units

if TYPE_CHECKING:
    from ..schema.registry import Population

# --------------------------------------------------------------------------------------------------
# A whole release: tract by tract, in parallel, written as each tract finishes, resumable
# --------------------------------------------------------------------------------------------------
#: a block's verdicts that leave it without records, and what each says of its tract
_WHY = {
    Verdict.INFEASIBLE: ("infeasible", "no records satisfy these tables"),
    Verdict.FAILED: ("timeout", "solver time limit reached"),
    Verdict.REFUSED: (
        "refused",
        "the reconstruction does not satisfy the tables (a published cell it breaks, a record "
        "the published zeros rule out, or an inhabited block without its records)",
    ),
}


@dataclass
class ReleaseReconstruction(UnitsRun):
    """Every tract of a release reconstructed: the records, per block its verdict, and per
    tract its runner status (``ok``, or ``error`` with a message: that tract's blocks are
    missing from ``units`` and ``blocks``); the tables used, the level answered and what was
    left out (:class:`ReleasePlan`), and per tract whose tables contradict each other the
    cells whose smallest change restores feasibility (geoid, cell, published, adjust, reason:
    :func:`~tabrecon.engine.tract.diagnose`)."""

    pop: Population
    units: Units
    blocks: pl.DataFrame
    results: list[dict]
    used: tuple[str, ...] = ()
    level: Level = Level.BLOCK
    notes: tuple[str, ...] = ()
    conflicts: dict[str, list[dict]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def schema(self) -> Schema:
        """The population's schema (its records' attributes)."""
        return self.pop.schema

    @property
    def failed(self) -> list[dict]:
        """Every tract that gave no records for some block: the runner's failures (an error in
        the tract) and tracts with a block whose tables admit no records, that found none in
        time or whose given reconstruction breaks its tables; a contradicting tract's message
        names its cells to blame (``why``: the message without them)."""
        out = [r for r in self.results if r["status"] != UnitStatus.OK]
        b = self.blocks
        bad = b.filter(pl.col("status").is_in(list(_WHY))) if b.height else b
        n = len(self.results[0]["unit"]) if self.results else 0  # a block's tract: its prefix
        for tract in sorted({g[:n] for g in bad["geoid"].to_list()} if bad.height else ()):
            rows = bad.filter(pl.col("geoid").str.starts_with(tract))
            worst = next(v for v in _WHY if (rows["status"] == v).any())
            status, why = _WHY[worst]
            blame = "; ".join(
                f"{c['geoid']} {c['cell']} published {c['published']}, adjust by {c['adjust']:+d}"
                for c in self.conflicts.get(tract, [])[:5]
            )
            first = rows.filter(pl.col("status") == worst)["geoid"][0]
            place = self.schema.geography
            where = f"{why} ({rows.height} {place}(s), e.g. {first})"
            out.append(
                {
                    "unit": tract,
                    "status": status,
                    "why": where,
                    "message": where + (f"; cells to blame: {blame}" if blame else ""),
                }
            )
        return sorted(out, key=lambda r: r["unit"])

    def verdicts(self, solved: bool = False) -> pl.DataFrame:
        """Each block's verdict in certification's columns (:mod:`tabrecon.attacks.certify`):
        ``block_geoid``, ``persons`` (its number of records, whatever they are: the column's
        name in every certification file), ``solvar``, ``solvar_lo``, ``solvar_hi`` (0 and 100
        where its distance was not measured), ``proven``, ``status``, ``level``. ``solved``:
        only the blocks of tracts that did not fail (a failed tract's verdicts are its
        failure, :attr:`failed`)."""
        if solved:
            gone = [r["unit"] for r in self.failed]
            keep = ~pl.col("block_geoid").str.slice(0, 11).is_in(gone)
            return self.verdicts().filter(keep)
        b = self.blocks
        if "units" not in b.columns:  # no tract solved
            b = pl.DataFrame(
                schema={
                    "geoid": pl.String,
                    "units": pl.Int64,
                    "status": pl.String,
                    **{c: pl.Float64 for c in ("solvar", "solvar_lo", "solvar_hi")},
                }
            )
        unique = pl.col("status") == Verdict.UNIQUE
        lo = pl.when(unique).then(0.0).otherwise(pl.col("solvar_lo").fill_nan(0.0))
        hi = pl.when(unique).then(0.0).otherwise(pl.col("solvar_hi").fill_nan(100.0))
        return b.select(
            pl.col("geoid").alias("block_geoid"),
            pl.col("units").alias("persons"),
            pl.col("solvar"),
            lo.alias("solvar_lo"),
            hi.alias("solvar_hi"),
            (unique | ((pl.col("status") == Verdict.VARIES) & (lo >= hi))).alias("proven"),
            pl.col("status"),
            pl.lit(str(self.level)).alias("level"),
        )

    def summary_lines(self) -> list[str]:
        """The run in words: records, blocks by verdict, tracts solved, tables used, what was
        left out, records known only to a range."""
        b = self.blocks
        asked = b.filter(pl.col("status") != Verdict.UNKNOWN) if b.height else b
        counts = dict(asked.group_by("status").len().iter_rows()) if asked.height else {}
        verdicts = ", ".join(f"{n:,} {s}" for s, n in sorted(counts.items()))
        place = self.schema.geography  # block, or a declared release's own (school)
        failed = {r["unit"] for r in self.failed}
        where = (
            f" from {len(self.results) - len(failed):,}/{len(self.results):,} tracts"
            if place == Geo.BLOCK
            else ""
        )
        lines = [
            f"{len(self.units):,} records in {b.height:,} {place}s{where} "
            f"({str(self.level).replace(Geo.BLOCK, place)}) in "
            f"{self.seconds:.1f} s" + (f"; {place}s: {verdicts}" if verdicts else ""),
        ]
        if self.used:
            lines.append(f"tables used: {', '.join(self.used)}")
        lines += self.notes
        ranges = self.units.ranges or {}
        if ranges and len(self.units):
            lo, hi = (
                np.stack([v[0] for v in ranges.values()]),
                np.stack([v[1] for v in ranges.values()]),
            )
            n = int((lo != hi).any(axis=0).sum())
            if n:
                lines.append(
                    f"records whose {' or '.join(ranges)} the tables determine only to a range: "
                    f"{n:,}"
                )
        return lines

    def failure_lines(self) -> list[str]:
        """Each failed tract, with the published cells that conflict where they are known."""
        lines = []
        group = "tract" if self.schema.geography == Geo.BLOCK else self.schema.geography
        failed = self.failed  # (a property that reads every block's verdict: once)
        for r in failed:
            why = r.get("why", r.get("message", r["status"]))  # the cells follow, one per line
            lines.append(f"{group} {r['unit']}: {r['status']} -- {why}")
            lines += [
                f"    {c['geoid']} {c['cell']} published {c['published']}, adjust by "
                f"{c['adjust']:+d}: {c['reason']}"
                for c in self.conflicts.get(r["unit"], [])
            ]
        if failed:
            lines.append(f"{len(failed)} {group}(s) failed; the others were written")
        return lines


class LongPart(Protocol):
    """Published tables that make themselves a long table (geoid, cell, value) on demand, e.g.
    :class:`tabrecon.tables.tableset.TableSet`."""

    def to_frame(self) -> pl.DataFrame: ...


@dataclass(frozen=True)
class TractTables:
    """A release's tables split by tract, each part read only in the worker that reconstructs its
    tract: a 1,000,000-person state's person cells are 18.8 M rows of text as one long table,
    held, digested and split by the client while the workers waited; as grids they are a tenth
    of that, and a :class:`~tabrecon.tables.tableset.TableSet` part is read from its grids
    without ever becoming a long table (:func:`~tabrecon.engine.model.block_tables`).

    ``names``: the schema's tables the release publishes; ``digest``: the release's content
    digest (what a resume checks); ``parts``: each tract's tables, a long frame or any
    :class:`LongPart`."""

    names: tuple[str, ...]
    digest: str
    parts: Mapping[str, pl.DataFrame | LongPart]

    @classmethod
    def of_tables(
        cls, tables: TableSet, pop: Population, names: Sequence[str] | None = None
    ) -> TractTables:
        """A release held as grids (:class:`~tabrecon.tables.tableset.TableSet`), split by
        tract: its cells of ``names`` (the schema's tables it holds a cell of, when None: the
        tables it publishes, :meth:`~tabrecon.tables.tableset.TableSet.tables_present`), each
        table's at its own level, each tract's grids views of the release's, digested as grids.
        A block table's values published for coarser geographies too (SF1 and the Census API
        give P1 and P12 for tracts and counties) sum its blocks' and are left out: the engine
        reads a row of a tract as the tract's own tables.

        >>> from tabrecon.schema.registry import population
        >>> hu = population("households")
        >>> long = pl.DataFrame({"geoid": ["1" * 15, "2" * 15], "cell": ["H0040001"] * 2,
        ...                      "value": [1, 2]})
        >>> tt = TractTables.of_tables(TableSet.from_long(long, hu), hu)
        >>> tt.names, sorted(tt.parts), tt.long("1" * 11)["value"].to_list()
        (('H4',), ['11111111111', '22222222222'], [1])
        """
        schema = pop.schema
        from ..provenance import digest_grids

        declared = [t.name for t in tables_of(pop)]
        if names is None:
            names = [n for n in tables.tables_present() if n in declared]
        if not names:
            raise InputError(
                f"the tables hold no cell of the {schema.name} schema's tables "
                f"({', '.join(declared)})"
            )
        release = tables.own_levels(names)
        grids = release.grids.items()
        digest = digest_grids([(lvl, g.geoids, g.cells, g.values) for lvl, g in grids])
        return cls(tuple(names), digest, release.by_tract())

    @classmethod
    def of_long(cls, long: pl.DataFrame, pop: Population) -> TractTables:
        """A long table's tracts (:meth:`of_tables`): its cells of the schema's tables, the
        others (a whole release's other tables) left out.

        >>> from tabrecon.schema.registry import population
        >>> long = pl.DataFrame({"geoid": ["1" * 15, "2" * 15, "1" * 15],
        ...                      "cell": ["H0040001", "H0040001", "X"], "value": [1, 2, 3]})
        >>> tt = TractTables.of_long(long, population("households"))
        >>> tt.names, sorted(tt.parts), tt.long("1" * 11)["value"].to_list()
        (('H4',), ['11111111111', '22222222222'], [1])
        """
        return cls.of_tables(_schema_cells(long, pop), pop)

    def long(self, tract: str) -> pl.DataFrame:
        """One tract's tables as a long table (geoid, cell, value)."""
        return _as_long(self.parts[tract])


@dataclass(frozen=True)
class ReleasePlan:
    """What a release's tables let the engine answer at the level asked
    (:func:`plan_release`): the tables used (each published whole), the level answered, what
    was left out or changed, in words, and the tables used split by tract."""

    split: TractTables
    used: tuple[str, ...]
    level: Level
    notes: tuple[str, ...] = ()


def plan_release(tables: TableSet, pop: Population, level: Level | str) -> ReleasePlan:
    """The part of a release the engine reconstructs at ``level``, for any schema: every
    block with published cells must have its number of records (its population's
    :attr:`~tabrecon.schema.registry.Population.total_cells`, the first published); a table
    is used whole or not at all (one published in part is left out, said in the notes);
    "block+tract" of a release without tract tables is answered at "block" (said), and is
    refused for a schema that declares none. Medians and means are modelled at both levels.

    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.schema.registry import population
    >>> from tabrecon.tables.spec import tabulate_units
    >>> pop = population("persons")
    >>> long = tabulate_units(pop.synthesize(SynthConfig(persons=300), 1), ["P1", "P12"])
    >>> part = TableSet.from_long(long.filter(pl.col("cell") != "P0120003"), pop)
    >>> plan = plan_release(part, pop, "block+tract")
    >>> plan.used, str(plan.level)
    (('P1',), 'block')
    >>> for note in plan.notes:
    ...     print(note)
    published in part, left out: P12 (a table is used whole or not at all)
    no tract tables (PCT12, PCT12A, PCT12B, ...): each block from its block tables
    """
    schema = pop.schema
    if level not in Level.choices():
        raise TabreconError(
            f"unknown level {level!r}; choose {' or '.join(map(repr, Level.choices()))}"
        )
    level = Level(level)
    where = tables.source or "the tables"
    _require_totals(tables, (*pop.total_cells, *whole_cells(pop)), where)
    have = {
        lvl: set(g.cells[(g.values != MISSING).any(axis=0)].astype(str).tolist())
        for lvl, g in tables.grids.items()
    }
    declared = tables_of(pop)
    present = [t for t in declared if any(c.id in have.get(t.level, ()) for c in t.cells())]
    if not present:
        raise InputError(
            f"the tables hold no cell of the {schema.name} schema's tables "
            f"({', '.join(t.name for t in declared)})"
        )
    used = [t for t in present if {c.id for c in t.cells()} <= have.get(t.level, set())]
    if not used:
        raise InputError(
            f"every table is published in part ({', '.join(t.name for t in present)}): a table "
            "is used whole or not at all"
        )
    notes = []
    if len(used) < len(present):
        notes.append(
            "published in part, left out: "
            + ", ".join(t.name for t in present if t not in used)
            + " (a table is used whole or not at all)"
        )
    answered = level
    if level == Level.BLOCK_TRACT and not any(t.level == Geo.TRACT for t in used):
        tract_tables = [t.name for t in declared if t.level == Geo.TRACT]
        if not tract_tables:
            raise TabreconError(
                f"level 'block+tract' needs tract tables; the {schema.name} schema declares none "
                f"({', '.join(t.name for t in declared)} are block tables): use level 'block'"
            )
        answered = Level.BLOCK
        named = ", ".join(tract_tables[:3]) + (", ..." if len(tract_tables) > 3 else "")
        notes.append(f"no tract tables ({named}): each block from its block tables")
    if answered == Level.BLOCK:  # the tract tables are not read
        used = [t for t in used if t.level == Geo.BLOCK]
    _refuse_lacking_cells(tables, used, where)
    names = tuple(t.name for t in used)
    return ReleasePlan(TractTables.of_tables(tables, pop, names), names, answered, tuple(notes))


def _refuse_lacking_cells(tables: TableSet, used: Sequence, where: str) -> None:
    """Refuse, before any work, a geounit that has published cells but lacks one of a table
    used (a block without P1 where other blocks have it), naming it, the cell and how many
    more share the flaw: found in its tract, it used to fail the tract (exit 1) as if the
    solver had."""
    for level in {t.level for t in used}:
        g = tables.grids.get(level)
        if g is None:
            continue
        ids = [c.id for t in used if t.level == level for c in t.cells()]
        cols = np.flatnonzero(np.isin(g.cells.astype(str), ids))
        present = g.present()
        inhabited = np.asarray(present.any(axis=1))
        lacks: np.ndarray = ~present[:, cols] & inhabited[:, None]
        if lacks.any():
            b, c = divmod(int(np.argmax(lacks.ravel())), cols.size)
            raise InputError(
                f"{where}: {level} {g.geoids[b]} lacks cell {g.cells[cols[c]]} of table "
                f"{next(t.name for t in used if g.cells[cols[c]] in {x.id for x in t.cells()})}"
                f" ({int(lacks.any(axis=1).sum()) - 1} more {level}s lack some cell): every "
                f"{level} with published cells needs every cell of the tables used"
            )


@cache
def whole_cells(pop: Population) -> tuple[str, ...]:
    """The count cells of ``pop``'s tables whose universe is every record (a table's own
    total line, such as P43's first beside P42's): each block's number of records, wherever a
    release publishes one of them and not the population's declared total.

    >>> from tabrecon.schema.registry import population
    >>> "P0430001" in whole_cells(population("group_quarters"))
    True
    """
    names = tuple(t.name for t in tables_of(pop) if t.statistic is None)
    cells, W = compiled(pop, names)
    W = sp.csr_matrix(W)
    full = np.flatnonzero(np.diff(W.indptr) == W.shape[1])
    return tuple(cells[int(i)].id for i in full)


def _require_totals(tables: TableSet, totals: Sequence[str], where: str) -> None:
    """Reconstruction works block by block from each block's number of records: refuse tables
    without block tables, or with a block that has cells but none of ``totals`` (persons: P1,
    or the total line of P3, P4, P5, P8, P9 or P12 -- the P.L. 94-171 tables have no P1),
    naming it."""
    g = tables.grids.get(Geo.BLOCK)
    if g is None:
        raise TabreconError(
            f"{where}: no block-level tables; reconstruction needs at least every block's "
            f"number of records ({' or '.join(totals[:3]) or 'its tables'})"
        )
    if not totals:
        return
    total = np.isin(g.cells.astype(str), list(totals))
    has_total = (g.values[:, total] != MISSING).any(axis=1)
    lacking = np.flatnonzero(~has_total & g.present().any(axis=1))
    if lacking.size:
        raise TabreconError(
            f"{where}: block {g.geoids[lacking[0]]} has published cells but no total "
            f"({', '.join(totals)}); reconstruction needs it for every block ({lacking.size} "
            "block(s) lack it)"
        )


def _as_long(part: pl.DataFrame | LongPart) -> pl.DataFrame:
    return part if isinstance(part, pl.DataFrame) else part.to_frame()


def as_read(part: pl.DataFrame | LongPart) -> pl.DataFrame | TableSet:
    """A tract's tables as the engine reads them: a long table or a
    :class:`~tabrecon.tables.tableset.TableSet` as it is (a table set's grids are read without
    making a long table: :func:`~tabrecon.engine.model.block_tables`), any other
    :class:`LongPart` made a long table."""
    return part if isinstance(part, pl.DataFrame | TableSet) else part.to_frame()


@dataclass(frozen=True)
class _TractTask:
    """One tract's reconstruction of ``pop`` (or, with ``reference``, its certification),
    a unit of :func:`reconstruct_release`."""

    tract: str
    part: pl.DataFrame | LongPart
    pop: Population
    tables: tuple[str, ...] | None
    options: ReconstructOptions
    reference: Units | None

    def __call__(self) -> Result:
        rec = reconstruct_units(
            as_read(self.part),
            self.pop,
            self.options,
            tables=self.tables,
            reference=self.reference,
        )
        st = {"unit": self.tract, "status": UnitStatus.OK, "blocks": rec.blocks.to_dicts()}
        return st, rec.units.to_frame()


def reconstruct_release(
    tables: pl.DataFrame | TableSet | TractTables,
    pop: Population,
    options: ReconstructOptions | None = None,
    *,
    run: RunOptions | None = None,
    reference: Units | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> ReleaseReconstruction:
    """Reconstruct every tract of a release's tables (a long table or a
    :class:`~tabrecon.tables.tableset.TableSet`, planned by :func:`plan_release`: the tables
    used, the level answered and the notes are the result's; or :class:`TractTables` split by
    the caller, used as they are) of ``pop`` with the runner
    (:func:`tabrecon.runner.run_units`, as ``run`` says: :class:`~tabrecon.runner.RunOptions`):
    tracts in parallel (``workers``, or the Dask cluster of
    :func:`tabrecon.runner.execution`), each written to ``<out>.parts/`` as it finishes, a rerun
    resuming (a rerun with other tables or options, the level asked included, is refused), a
    tract that fails recorded and the others going on, a tract whose tables contradict each
    other diagnosed (:attr:`ReleaseReconstruction.conflicts`). Tracts are independent at
    both levels (a block's tables, or its tract's,
    constrain only that tract), so the result equals :func:`reconstruct_units` on the whole.
    With ``reference`` a reconstruction made elsewhere is certified instead of solving for one
    (:func:`reconstruct_units`' ``reference``; its units are the result's). ``meanwhile``: the
    caller's own work, run while the tracts are solved (:func:`tabrecon.runner.run_units`).

    >>> from tabrecon.schema.registry import population
    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.tables.spec import tabulate_units
    >>> gq = population("group_quarters")
    >>> units = gq.synthesize(SynthConfig(persons=20_000), 3)
    >>> run = reconstruct_release(tabulate_units(units), gq)
    >>> tabulate_units(run.units).sort("geoid", "cell").equals(
    ...     tabulate_units(units).sort("geoid", "cell")), run.failed
    (True, [])
    """
    import time

    from ..provenance import digest_arrays

    schema, t0 = pop.schema, time.perf_counter()
    options = options or ReconstructOptions()
    asked = options.level
    if isinstance(tables, TractTables):  # split by the caller: its tables, as asked
        plan = ReleasePlan(tables, tables.names, options.level)
        if options.level == Level.BLOCK_TRACT and not any(
            table_by_name(n, pop).level == Geo.TRACT for n in tables.names
        ):
            raise TabreconError(
                f"level 'block+tract' needs tract tables; these tables hold none of the "
                f"{schema.name} schema's ({', '.join(tables.names)} are block tables): use "
                "level 'block'"
            )
    else:
        if isinstance(tables, pl.DataFrame):
            tables = _schema_cells(tables, pop)
        plan = plan_release(tables, pop, options.level)
        options = replace(options, level=plan.level)
    split, names = plan.split, plan.used
    run = run or RunOptions()
    parts = run.parts()
    fp = _fingerprint(split, names, pop=pop, asked=asked, options=options) if parts else None
    tracts = list(split.parts)
    refs: dict[str, Units] = {}
    if reference is not None:
        if fp is not None:
            # the records given, by their geography and types (a records frame is not a long
            # table of cells: digesting it as one raised on every certification with an --out)
            fp["reference"] = digest_arrays(reference.block_geoid.astype(str), reference.types)
        geo = reference.block_geoid.astype(str)
        of_tract = prefix(geo, "tract") if geo.size else geo
        order = np.argsort(of_tract, kind="stable")
        starts = np.searchsorted(of_tract[order], tracts, side="left")
        ends = np.searchsorted(of_tract[order], tracts, side="right")
        refs = {t: reference.take(order[a:b]) for t, a, b in zip(tracts, starts, ends, strict=True)}
    ran = run_units(
        tracts,
        lambda t: _TractTask(t, split.parts[t], pop, names, options, refs.get(t)),
        tag=f"{schema.name}-reconstruct",
        parts=parts,
        run=run,
        fingerprint=fp,
        meanwhile=meanwhile,
    )
    got = ran.tables(tracts)
    gcol = schema.geoid_column
    # a tract whose records all share one category writes no <name>_min/_max: that is the run
    codes = pl.concat(got, how="diagonal") if got else pl.DataFrame(schema={gcol: pl.String})
    ranged = [a.name for a in schema.attributes if f"{a.name}_max" in codes.columns]
    codes = codes.with_columns(
        pl.col(f"{n}{end}").fill_null(pl.col(n)) for n in ranged for end in ("_min", "_max")
    )

    def column(name: str) -> np.ndarray:
        return codes[name].to_numpy().astype(np.int64) if got else np.zeros(0, dtype=np.int64)

    units = Units(
        schema,
        codes[gcol].to_numpy().astype(str),
        {a.name: column(a.name) for a in schema.attributes},
        source="reconstruction",
        ranges={n: (column(f"{n}_min"), column(f"{n}_max")) for n in ranged} or None,
    )
    rows = ran.rows("blocks")
    blocks = (
        pl.DataFrame(rows, infer_schema_length=None).sort("geoid")
        if rows
        else pl.DataFrame(schema={"geoid": pl.String, "status": pl.String})
    )
    rec = ReleaseReconstruction(
        pop=pop,
        units=units,
        blocks=blocks,
        results=ran.results,
        used=names,
        level=plan.level,
        notes=plan.notes,
    )
    rec.conflicts = _diagnosed(rec, split, options)
    rec.seconds = time.perf_counter() - t0
    return rec


def _fingerprint(
    split: TractTables,
    names: Sequence[str],
    *,
    pop: Population,
    asked: Level,
    options: ReconstructOptions,
) -> dict[str, Any]:
    """What a resumed :func:`reconstruct_release` must have been asked alike: the tables (as
    digested), the population, the level asked and every option that changes an answer."""
    fp: dict[str, Any] = {
        "tables": split.digest,
        "table_names": ",".join(names),
        "schema": pop.schema.name,
        "level": str(asked),
        "distance": options.distance,
        "distance_time_limit": options.distance_time_limit,
        "solver": str(options.solver),
    }
    if not options.publication.exact:  # (absent otherwise: earlier parts stay resumable)
        fp["publication"] = str(options.publication)
    if options.unique_on is not None:
        fp["unique_on"] = ";".join(
            f"{k}:{','.join(map(str, np.asarray(v).tolist()))}"
            for k, v in sorted(options.unique_on.items())
        )
    if not options.check_unique:
        fp["check_unique"] = False
    return fp


def _diagnosed(
    rec: ReleaseReconstruction, split: TractTables, options: ReconstructOptions
) -> dict[str, list[dict]]:
    """Per tract with a block whose tables admit no records, the cells to blame: the smallest
    total change that restores feasibility (:func:`~tabrecon.engine.tract.diagnose`)."""
    from .tract import diagnose, program_of_tract

    b = rec.blocks
    bad = b.filter(pl.col("status") == Verdict.INFEASIBLE)["geoid"].to_list() if b.height else []
    out: dict[str, list[dict]] = {}
    for tract in split.parts:
        mine = sorted(g for g in bad if g.startswith(tract))
        if not mine:
            continue
        try:  # a tract at a time
            prog = program_of_tract(
                split.long(tract),
                rec.pop,
                options.level,
                options.unique_on,
                blocks=mine if options.level == Level.BLOCK else None,
            )
            out[tract] = diagnose(prog, options.solver)
        except TabreconError:
            out[tract] = []
    return out


def _schema_cells(long: pl.DataFrame, pop: Population) -> TableSet:
    """A long table's cells of the schema's tables as grids, the others (a whole release's
    other tables) left out."""
    mine = [c.id for t in tables_of(pop) for c in t.cells()]
    used = long["cell"].is_in(mine)
    if not used.all():  # (a copy of a large release only where cells are left out)
        long = long.filter(used)
    return TableSet.from_long(long, pop)
