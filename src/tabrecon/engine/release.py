"""A whole release reconstructed, tract by tract, through the runner.

:func:`reconstruct_release` takes a release's tables (a long table, a
:class:`~tabrecon.tables.tableset.TableSet`, or :class:`TractTables`: each tract's part made a
long table only in the worker that reconstructs it) and runs
:func:`~tabrecon.engine.reconstruct.reconstruct_units` on every tract with
:func:`tabrecon.runner.run_units`: in parallel, each tract written as it finishes, a rerun
resuming, a failed tract recorded while the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..runner import Result, RunOptions, UnitsRun, run_units
from ..schema.spec import Schema, Units
from ..tables.spec import table_by_name, tables_of
from ..tables.tableset import TableSet
from ..vocab import Geo, Level, UnitStatus
from .reconstruct import ReconstructOptions, reconstruct_units


# --------------------------------------------------------------------------------------------------
# A whole release: tract by tract, in parallel, written as each tract finishes, resumable
# --------------------------------------------------------------------------------------------------
@dataclass
class ReleaseReconstruction(UnitsRun):
    """Every tract of a release reconstructed: the records, per block their verdict, and per
    tract its runner status (``ok``, or ``error`` with a message: that tract's blocks are
    missing from ``units`` and ``blocks``)."""

    schema: Schema
    units: Units
    blocks: pl.DataFrame
    results: list[dict]

    def summary_lines(self) -> list[str]:
        """The run in words: blocks by verdict, records, failed tracts (each named)."""
        b = self.blocks
        counts = dict(b.group_by("status").len().iter_rows()) if b.height else {}
        verdicts = ", ".join(f"{n:,} {s}" for s, n in sorted(counts.items()))
        place = self.schema.geography  # block, or a declared release's own (school)
        where = f" of {len(self.results):,} tracts" if place == Geo.BLOCK else ""
        group = "tract" if place == Geo.BLOCK else place
        lines = [
            f"{len(self.units):,} records in {b.height:,} {place}s{where}; "
            f"{place}s: {verdicts or 'none'}"
        ]
        lines += [f"{group} {r['unit']}: {r.get('message', r['status'])}" for r in self.failed]
        return lines


class LongPart(Protocol):
    """Published tables that make themselves a long table (geoid, cell, value) on demand, e.g.
    :class:`tabrecon.tables.tableset.TableSet`."""

    def to_frame(self) -> pl.DataFrame: ...


@dataclass(frozen=True)
class TractTables:
    """A release's tables split by tract, each part made a long table (geoid, cell, value) only in
    the worker that reconstructs its tract: a 1,000,000-person state's person cells are 18.8 M
    rows of text as one long table, held, digested and split by the client while the workers
    waited; as grids they are a tenth of that and are never joined.

    ``names``: the schema's tables the release publishes; ``digest``: the release's content
    digest (what a resume checks); ``parts``: each tract's tables, a long frame or any
    :class:`LongPart`."""

    names: tuple[str, ...]
    digest: str
    parts: Mapping[str, pl.DataFrame | LongPart]

    @classmethod
    def of_tables(
        cls, tables: TableSet, schema: Schema, names: Sequence[str] | None = None
    ) -> TractTables:
        """A release held as grids (:class:`~tabrecon.tables.tableset.TableSet`), split by
        tract: its cells of ``names`` (the schema's tables it holds a cell of, when None: the
        tables it publishes, :meth:`~tabrecon.tables.tableset.TableSet.tables_present`), each
        table's at its own level, each tract's grids views of the release's, digested as grids.
        A block table's values published for coarser geographies too (SF1 and the Census API
        give P1 and P12 for tracts and counties) sum its blocks' and are left out: the engine
        reads a row of a tract as the tract's own tables.

        >>> from tabrecon.schema.catalog import HOUSING_UNITS
        >>> long = pl.DataFrame({"geoid": ["1" * 15, "2" * 15], "cell": ["H0040001"] * 2,
        ...                      "value": [1, 2]})
        >>> tt = TractTables.of_tables(TableSet.from_long(long, "households"), HOUSING_UNITS)
        >>> tt.names, sorted(tt.parts), tt.long("1" * 11)["value"].to_list()
        (('H4',), ['11111111111', '22222222222'], [1])
        """
        from ..provenance import digest_grids

        declared = [t.name for t in tables_of(schema)]
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
    def of_long(cls, long: pl.DataFrame, schema: Schema) -> TractTables:
        """A long table's tracts (:meth:`of_tables`): its cells of the schema's tables, the
        others (a whole release's other tables) left out.

        >>> from tabrecon.schema.catalog import HOUSING_UNITS
        >>> long = pl.DataFrame({"geoid": ["1" * 15, "2" * 15, "1" * 15],
        ...                      "cell": ["H0040001", "H0040001", "X"], "value": [1, 2, 3]})
        >>> tt = TractTables.of_long(long, HOUSING_UNITS)
        >>> tt.names, sorted(tt.parts), tt.long("1" * 11)["value"].to_list()
        (('H4',), ['11111111111', '22222222222'], [1])
        """
        from ..schema.registry import of_schema

        mine = [c.id for t in tables_of(schema) for c in t.cells()]
        used = long["cell"].is_in(mine)
        if not used.all():  # (a copy of a large release only where cells are left out)
            long = long.filter(used)
        return cls.of_tables(TableSet.from_long(long, of_schema(schema).name), schema)

    def long(self, tract: str) -> pl.DataFrame:
        """One tract's tables as a long table (geoid, cell, value)."""
        return _as_long(self.parts[tract])


def _as_long(part: pl.DataFrame | LongPart) -> pl.DataFrame:
    return part if isinstance(part, pl.DataFrame) else part.to_frame()


@dataclass(frozen=True)
class _TractTask:
    """One tract's reconstruction over ``schema`` (or, with ``reference``, its certification),
    a unit of :func:`reconstruct_release`."""

    tract: str
    part: pl.DataFrame | LongPart
    schema: Schema
    tables: tuple[str, ...] | None
    options: ReconstructOptions
    reference: Units | None

    def __call__(self) -> Result:
        rec = reconstruct_units(
            _as_long(self.part),
            self.schema,
            self.options,
            tables=self.tables,
            reference=self.reference,
        )
        st = {"unit": self.tract, "status": UnitStatus.OK, "blocks": rec.blocks.to_dicts()}
        return st, rec.units.to_frame()


def reconstruct_release(
    tables: pl.DataFrame | TableSet | TractTables,
    schema: Schema,
    options: ReconstructOptions | None = None,
    *,
    run: RunOptions | None = None,
    asked: Mapping[str, str] | None = None,
    reference: Units | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> ReleaseReconstruction:
    """Reconstruct every tract of a release's tables (a long table, a
    :class:`~tabrecon.tables.tableset.TableSet` or :class:`TractTables`)
    over ``schema`` with the runner
    (:func:`tabrecon.runner.run_units`, as ``run`` says: :class:`~tabrecon.runner.RunOptions`):
    tracts in parallel (``workers``, or the Dask cluster of
    :func:`tabrecon.runner.execution`), each written to ``<out>.parts/`` as it finishes, a rerun
    resuming (a rerun with other tables or options is refused; ``asked``: what the caller was
    asked beyond ``options``, e.g. a level it answered with another, refused too when it
    changes), a tract that fails recorded and the others going on. Tracts are independent at
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
    >>> run = reconstruct_release(tabulate_units(units), gq.schema)
    >>> tabulate_units(run.units).sort("geoid", "cell").equals(
    ...     tabulate_units(units).sort("geoid", "cell")), run.failed
    (True, [])
    """
    from ..provenance import digest_long

    options = options or ReconstructOptions()
    split = (
        tables
        if isinstance(tables, TractTables)
        else TractTables.of_tables(tables, schema)
        if isinstance(tables, TableSet)
        else TractTables.of_long(tables, schema)
    )
    names = split.names
    if options.level == Level.BLOCK_TRACT and not any(
        table_by_name(n, schema).level == Geo.TRACT for n in names
    ):
        raise TabreconError(
            f"level 'block+tract' needs tract tables; these tables hold none of the "
            f"{schema.name} schema's ({', '.join(names)} are block tables): use level 'block'"
        )
    run = run or RunOptions()
    parts = run.parts()
    fp = None
    if parts is not None:
        fp = {
            "tables": split.digest,
            "table_names": ",".join(names),
            "schema": schema.name,
            "level": str(options.level),
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
        fp.update(asked or {})
    tracts = list(split.parts)
    refs: dict[str, Units] = {}
    if reference is not None:
        if fp is not None:
            fp["reference"] = digest_long(reference.to_frame())
        geo = reference.block_geoid.astype(str)
        of_tract = prefix(geo, "tract") if geo.size else geo
        order = np.argsort(of_tract, kind="stable")
        starts = np.searchsorted(of_tract[order], tracts, side="left")
        ends = np.searchsorted(of_tract[order], tracts, side="right")
        refs = {t: reference.take(order[a:b]) for t, a, b in zip(tracts, starts, ends, strict=True)}
    ran = run_units(
        tracts,
        lambda t: _TractTask(t, split.parts[t], schema, names, options, refs.get(t)),
        tag=f"{schema.name}-reconstruct",
        parts=parts,
        run=run,
        fingerprint=fp,
        meanwhile=meanwhile,
    )
    got = ran.tables(tracts)
    gcol = schema.geoid_column
    # a tract whose records are all known to one category writes no <name>_min/_max: its run
    # is that category
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
    return ReleaseReconstruction(schema, units, blocks, ran.results)
