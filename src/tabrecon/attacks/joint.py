"""Two populations of one block reconstructed together: housing units and the persons in them.

A population may declare how its records tie to another's in the same block
(:class:`~tabrecon.schema.registry.Ties`; households: every householder is a distinct person of
the block with the householder's age band, race, origin and, where the household type says,
sex; households hold at most the block's persons; a household with someone under 18 or 65 and
over holds a distinct such person). Each block's count program of the one population's tables
(:func:`~tabrecon.engine.model.block_program`) and of the other's are put side by
side and joined by one row per tie: the ``a`` records it counts (weighted) minus the ``b``
records it counts at most 0. A solution is a reconstruction of both that agrees on every tie;
its certification (the same proofs as one population's) says whether each half is the only one
*given both releases*, which can be unique where one release alone is not.

Where the two releases admit no common population although each admits its own, the block is
a ``contradiction``; :func:`explain` names the ties that cannot hold (the fewest records the one
release needs against the most the other allows). The ties are necessary conditions, not a
household roster: person records carry no household, so who lives with whom is not rebuilt.

>>> from tabrecon.records.households import synthesize_households
>>> from tabrecon.schema import person_units
>>> from tabrecon.schema.registry import population
>>> from tabrecon.records.synth import SynthConfig
>>> from tabrecon.tables.spec import tabulate_units
>>> md, units = synthesize_households(SynthConfig(persons=100), seed=2)
>>> persons = person_units(md, binned=True)
>>> hu = population("households")
>>> rec = reconstruct_together(tabulate_units(units), tabulate_units(persons), hu)
>>> rec.blocks["status"].unique().to_list(), rec.violations().height
(['consistent'], 0)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..engine.model import block_program, block_tables, cell_degree
from ..engine.proofs import Extensible
from ..engine.reconstruct import block_forms, certify_forms
from ..engine.solvers import IntProgram, SolverOptions, solve
from ..errors import InputError
from ..runner import Result, RunOptions, UnitsRun, run_units
from ..schema.registry import Tie
from ..schema.spec import Schema, Units
from ..tables.spec import predicate_matrix, table_by_name, tables_in
from ..vocab import SolveStatus, UnitStatus, Verdict

if TYPE_CHECKING:
    from ..schema.registry import Population

    pass

#: a block's outcome: both halves reconstructed in agreement; the two releases admit no common
#: population though each admits its own; one release contradicts itself; no answer in time
CONSISTENT, CONTRADICTION, FAILED = "consistent", "contradiction", "failed"

BLOCK_SCHEMA = {
    "geoid": pl.String,
    "status": pl.String,
    "units": pl.Int64,
    "others": pl.Int64,
    "units_verdict": pl.String,
    "others_verdict": pl.String,
    "seconds": pl.Float64,
    "message": pl.String,
}


@dataclass(frozen=True)
class TieMatrices:
    """The ties as two matrices over each population's feasible types (ties x types): a tie
    holds when ``La @ a <= Lb @ b`` for the two histograms."""

    La: sp.csr_matrix
    Lb: sp.csr_matrix
    what: tuple[str, ...]


@cache
def tie_matrices(pop: Population) -> TieMatrices:
    """The ties ``pop`` declares, compiled once (refused when it declares none)."""
    other = pop.tied_population()
    assert pop.tied is not None
    ties: Sequence[Tie] = tuple(pop.tied.ties())
    rows_a, rows_b = [], []
    for t in ties:
        rows_a.append(predicate_matrix(pop.schema, [t.a], t.weight))
        rows_b.append(predicate_matrix(other.schema, [t.b]))
    La = sp.vstack(rows_a, format="csr") if ties else sp.csr_matrix((0, 0))
    Lb = sp.vstack(rows_b, format="csr") if ties else sp.csr_matrix((0, 0))
    return TieMatrices(La.astype(np.int64), Lb.astype(np.int64), tuple(t.what for t in ties))


def joint_program(
    pa: IntProgram, adm_a: np.ndarray, pb: IntProgram, adm_b: np.ndarray, ties: TieMatrices
) -> tuple[IntProgram, np.ndarray]:
    """One block's two programs side by side (A's variables first) and a row per tie that
    concerns the block (some admissible A type counts in it), ``A's count - B's count <= 0``;
    returns the program and each tie row's index among ``ties``."""
    Ta = ties.La[:, adm_a]
    Tb = ties.Lb[:, adm_b]
    live = np.flatnonzero(np.diff(Ta.tocsr().indptr) > 0)
    Ta, Tb = Ta[live], Tb[live]
    T = sp.hstack([Ta, -Tb], format="csr")
    # the lower bound is what the B side can at most count, so CP-SAT sees finite domains
    floor = -np.asarray(Tb @ pb.ub.astype(np.int64)).ravel().astype(np.int64)
    A = sp.vstack([sp.block_diag([pa.A, pb.A], format="csr"), T], format="csr").astype(np.int64)
    lb = None
    if pa.lb is not None or pb.lb is not None:
        lb = np.concatenate(
            [
                np.zeros(pa.n_vars, np.int64) if pa.lb is None else pa.lb,
                np.zeros(pb.n_vars, np.int64) if pb.lb is None else pb.lb,
            ]
        )
    prog = IntProgram(
        A=A,
        lo=np.concatenate([pa.lo, pb.lo, floor]),
        hi=np.concatenate([pa.hi, pb.hi, np.zeros(live.size, dtype=np.int64)]),
        ub=np.concatenate([pa.ub, pb.ub]),
        lb=lb,
    )
    return prog, live


#: how long :func:`explain` looks for the ties to blame in one block (seconds), each bound's
#: search at most :data:`EXPLAIN_EACH`, and how many ties it names at most
EXPLAIN_SECONDS, EXPLAIN_EACH, EXPLAIN_MAX = 30.0, 2.0, 5


def explain(
    pa: IntProgram,
    adm_a: np.ndarray,
    pb: IntProgram,
    adm_b: np.ndarray,
    ties: TieMatrices,
    opts: SolverOptions,
    labels: tuple[str, str] = ("A", "B"),
) -> list[str]:
    """Why two releases of one block admit no common population: ties whose fewest ``a``
    records the one release needs exceed the most ``b`` records the other allows, in words (at
    most :data:`EXPLAIN_MAX`; an empty list when no single tie is to blame within
    :data:`EXPLAIN_SECONDS`). Each figure is a proven bound (a search stopped early reports its
    proven bound, never a guess), so every tie named truly cannot hold."""
    import math
    from dataclasses import replace

    t0 = time.perf_counter()
    _, live = joint_program(pa, adm_a, pb, adm_b, ties)
    each = replace(opts, backend="cpsat", time_limit=EXPLAIN_EACH)
    ea, eb = Extensible(pa, each), Extensible(pb, each)
    # the most b records each tie may count: the small side, all ties first
    room: dict[int, int] = {}
    for r in live.tolist():
        if time.perf_counter() - t0 > EXPLAIN_SECONDS / 3:
            break
        cb = np.asarray(ties.Lb[r, adm_b].todense()).ravel()
        hi = eb.solve_base(cb, maximize=True)
        if hi.bound is not None:
            room[r] = math.floor(hi.bound + 1e-6)
    out: list[str] = []
    for r in sorted(room, key=room.__getitem__):  # the tightest first
        if len(out) >= EXPLAIN_MAX or time.perf_counter() - t0 > EXPLAIN_SECONDS:
            break
        ca = np.asarray(ties.La[r, adm_a].todense()).ravel()
        lo = ea.solve_base(ca)
        if lo.bound is None:
            continue
        need = math.ceil(lo.bound - 1e-6)
        if need > room[r]:
            out.append(
                f"{ties.what[r]}: the {labels[0]} tables need at least {need}, "
                f"the {labels[1]} tables allow at most {room[r]} such persons"
            )
    return out


@dataclass
class JointReconstruction:
    """Both populations' records of every block reconstructed together, and per block its
    status (:data:`CONSISTENT`, :data:`CONTRADICTION`, ``infeasible`` when one release
    contradicts itself, :data:`FAILED`) and each half's verdict given both releases."""

    pop: Population
    units: Units
    others: Units
    blocks: pl.DataFrame
    ties: TieMatrices = field(repr=False)

    def violations(self) -> pl.DataFrame:
        """Every tie a block's two reconstructions break (none, by construction: the check a
        test makes of any pair of reconstructions, see :func:`tie_violations`)."""
        return tie_violations(self.units, self.others, self.ties)


def tie_violations(units: Units, others: Units, ties: TieMatrices) -> pl.DataFrame:
    """The ties two populations' records break, block by block (geoid, tie, a, b: the ``a``
    count above the ``b`` count). Two reconstructions made apart may break some; two made
    together never do."""
    rows = []
    for recs, L in ((units, ties.La), (others, ties.Lb)):
        feas = recs.schema.feasible_types()
        pos = np.searchsorted(feas, recs.types)
        geo, where = np.unique(recs.block_geoid.astype(str), return_inverse=True)
        H = sp.csr_matrix(
            (np.ones(pos.size, dtype=np.int64), (where, pos)), shape=(geo.size, feas.size)
        )
        rows.append(dict(zip(geo.tolist(), np.asarray((H @ L.T).todense()), strict=True)))
    found = []
    n = ties.La.shape[0]
    for g in sorted(set(rows[0]) | set(rows[1])):
        a = rows[0].get(g, np.zeros(n, dtype=np.int64))
        b = rows[1].get(g, np.zeros(n, dtype=np.int64))
        for r in np.flatnonzero(a > b).tolist():
            found.append((g, ties.what[r], int(a[r]), int(b[r])))
    return pl.DataFrame(
        found,
        schema={"geoid": pl.String, "tie": pl.String, "a": pl.Int64, "b": pl.Int64},
        orient="row",
    )


def _records(schema: Schema, feas: np.ndarray, geo: list[str], parts: list[np.ndarray]) -> Units:
    types = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    sizes = [p.size for p in parts]
    geoid = np.repeat(np.asarray(geo, dtype=str), sizes) if parts else np.zeros(0, dtype=str)
    return Units(
        schema,
        np.asarray(geoid, dtype=str),
        schema.decode(feas[types]),
        None,
        "reconstruction",
    )


class TiedRelease:
    """The block programs of the release a population's records tie to (households: the person
    block tables), ready to join to a block's program of the population's own tables: written
    once for reconstruction (:func:`reconstruct_together`) and Generate-then-Verify
    (:func:`tabrecon.attacks.claims.block.generate_then_verify`)."""

    def __init__(self, pop: Population, long_b: pl.DataFrame) -> None:
        self.population, self.other = pop, pop.tied_population()
        sb = self.other
        _, self._W, geo_b, self._V = block_tables(long_b, sb, tables_in(long_b, sb, "block"))
        self.geoids: list[str] = geo_b
        self._row = {g: i for i, g in enumerate(geo_b)}
        self._Wc, self._deg = self._W.tocsc(), cell_degree(self._W)
        self.ties = tie_matrices(pop)

    def refuse_other_blocks(self, geoids: Sequence[str]) -> None:
        """Refuse blocks that are in one release and not the other, naming one."""
        mine = set(geoids)
        only = sorted(mine ^ set(self.geoids))
        if only:
            side = self.population.name if only[0] in mine else self.population.tied.known_as  # type: ignore[union-attr]
            raise InputError(
                f"block {only[0]} has {side} tables and not the other release's "
                f"({len(only) - 1} more such blocks): both releases must cover the same blocks"
            )

    def join(
        self, geoid: str, pa: IntProgram, adm_a: np.ndarray
    ) -> tuple[IntProgram, IntProgram, np.ndarray]:
        """Block ``geoid``'s joint program (``pa``'s variables first), the tied release's own
        program of the block and its admissible types."""
        if geoid not in self._row:
            self.refuse_other_blocks([geoid])
        pb, adm_b = block_program(self._W, self._V[self._row[geoid]], self._Wc, degree=self._deg)
        return joint_program(pa, adm_a, pb, adm_b, self.ties)[0], pb, adm_b


def reconstruct_together(
    long_a: pl.DataFrame,
    long_b: pl.DataFrame,
    pop: Population,
    opts: SolverOptions | None = None,
    check_unique: bool = True,
    progress: Callable[[str], None] | None = None,
) -> JointReconstruction:
    """Reconstruct every block of two releases of the same blocks together: ``long_a`` holds
    the tables of the population ``pop`` (households), ``long_b`` those of the population it
    ties to (its :attr:`~tabrecon.schema.registry.Population.tied`; persons: the person block
    tables at certification's resolution, agebin38). Block tables only; a block in one
    release and not the other is refused, naming it."""
    tied = TiedRelease(pop, long_b)
    pop_a, pop_b = tied.population, tied.other
    sa, sb = pop_a.schema, pop_b.schema
    ties = tied.ties
    opts = (opts or SolverOptions()).for_task("certify")
    _, Wa, geo_a, Va = block_tables(long_a, pop_a, tables_in(long_a, pop_a, "block"))
    tied.refuse_other_blocks(geo_a)
    Wac, deg_a = Wa.tocsc(), cell_degree(Wa)
    fa, fb = sa.feasible_types(), sb.feasible_types()
    key = np.arange(fa.size + fb.size)
    labels = (pop_a.name, pop_a.tied.known_as)  # type: ignore[union-attr]
    got_a: list[np.ndarray] = []
    got_b: list[np.ndarray] = []
    geo_out: list[str] = []
    stats: list[tuple] = []
    for i, g in enumerate(geo_a):
        t0 = time.perf_counter()
        pa, adm_a = block_program(Wa, Va[i], Wac, degree=deg_a)
        prog, pb, adm_b = tied.join(g, pa, adm_a)
        base = Extensible(prog, opts)
        sol = base.solve_base()
        if not sol.has_solution or sol.x is None:
            status, message = FAILED, "no answer within the solver's limit"
            if sol.status == SolveStatus.INFEASIBLE:
                alone = [solve(pa, opts), solve(pb, opts)]
                bad = [
                    lab
                    for lab, s in zip(labels, alone, strict=True)
                    if s.status == SolveStatus.INFEASIBLE
                ]
                if bad:
                    status = Verdict.INFEASIBLE
                    message = f"the {' and the '.join(bad)} tables contradict themselves"
                else:
                    status = CONTRADICTION
                    why = explain(pa, adm_a, pb, adm_b, ties, opts, labels)
                    message = "; ".join(why) or "the ties cannot all hold at once"
            stats.append((g, status, 0, 0, None, None, time.perf_counter() - t0, message))
            if progress:
                progress(g)
            continue
        x = sol.x
        verdicts: list[str | None] = [None, None]
        if check_unique:
            F, m, form_block = block_forms(prog.n_vars, x, [adm_a, adm_b + fa.size], key)
            verdicts = list(certify_forms(base, F, m, form_block, x, 2, coupled=True)[0])
        xa, xb = x[: adm_a.size], x[adm_a.size :]
        got_a.append(np.repeat(adm_a, xa))
        got_b.append(np.repeat(adm_b, xb))
        geo_out.append(g)
        stats.append(
            (
                g,
                CONSISTENT,
                int(xa.sum()),
                int(xb.sum()),
                *verdicts,
                time.perf_counter() - t0,
                None,
            )
        )
        if progress:
            progress(g)
    blocks = pl.DataFrame(stats, schema=BLOCK_SCHEMA, orient="row")
    return JointReconstruction(
        pop=pop,
        units=_records(sa, fa, geo_out, got_a),
        others=_records(sb, fb, geo_out, got_b),
        blocks=blocks,
        ties=ties,
    )


def write_together(rec: JointReconstruction, out: str | Path) -> list[Path]:
    """``out`` (the first population's records), ``<stem>_<other>.<ext>`` (the second's) and
    ``<stem>_blocks.csv`` (each block's status, counts and verdicts, the columns named after the
    two populations: ``housing_units``, ``persons_verdict``); returns the paths written."""
    from ..io import beside
    from ..schema.spec import write_units

    out = Path(out)
    name = rec.pop.tied.known_as  # type: ignore[union-attr]
    data = str(out)[len(str(beside(out, ""))) :] or ".parquet"  # .parquet, .csv, .csv.gz
    other = beside(out, f"_{name}{data}")
    blocks = beside(out, "_blocks.csv")
    write_units(rec.units, out)
    write_units(rec.others, other)
    a = rec.pop.noun.replace(" ", "_")  # housing_units
    rec.blocks.rename(
        {
            "units": a,
            "others": name,
            "units_verdict": f"{a}_verdict",
            "others_verdict": f"{name}_verdict",
        }
    ).write_csv(blocks)
    return [out, other, blocks]


# --------------------------------------------------------------------------------------------------
# A whole release: tract by tract with the runner (resume, workers, Dask, progress)
# --------------------------------------------------------------------------------------------------
@dataclass
class ReleaseTogether(UnitsRun):
    """Every tract of two releases reconstructed together: as :class:`JointReconstruction`,
    and per tract its runner status (``ok``, or ``error`` with a message: its blocks are
    missing)."""

    rec: JointReconstruction
    results: list[dict]

    @property
    def bad_blocks(self) -> pl.DataFrame:
        """Blocks whose two releases admit no common population, or one no population."""
        return self.rec.blocks.filter(pl.col("status") != CONSISTENT)

    def summary_lines(self) -> list[str]:
        """The run in words: blocks by status and by each half's verdict, failed tracts."""
        b = self.rec.blocks
        ok = b.filter(pl.col("status") == CONSISTENT)
        a_name, b_name = self.rec.units.schema.unit, self.rec.others.schema.unit

        def unique(col: str) -> int:
            return int((ok[col] == Verdict.UNIQUE).sum())

        lines = [
            f"{ok.height:,} of {_n(b.height, 'block')} reconstructed together "
            f"({_n(len(self.rec.units), a_name)}, {_n(len(self.rec.others), b_name)}) in "
            f"{_n(len(self.results), 'tract')}; every tie holds in each",
            f"given both releases: {a_name}s unique in {_n(unique('units_verdict'), 'block')}, "
            f"{b_name}s unique in {_n(unique('others_verdict'), 'block')}",
        ]
        for st, n in sorted(dict(b.group_by("status").len().iter_rows()).items()):
            if st != CONSISTENT:
                lines.append(f"{_n(n, 'block')}: {st}")
        lines += [f"tract {r['unit']}: {r.get('message', r['status'])}" for r in self.failed]
        return lines


def _n(n: int, noun: str) -> str:
    """``1 block``, ``2 blocks``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


@dataclass(frozen=True)
class _TractTask:
    """One tract's two releases reconstructed together, a unit of
    :func:`reconstruct_release_together`."""

    tract: str
    long_a: pl.DataFrame
    long_b: pl.DataFrame
    pop: Population
    opts: SolverOptions | None

    def __call__(self) -> Result:
        rec = reconstruct_together(self.long_a, self.long_b, self.pop, self.opts)
        frame = pl.concat(
            [
                rec.units.to_frame().with_columns(pl.lit("a").alias("_half")),
                rec.others.to_frame().with_columns(pl.lit("b").alias("_half")),
            ],
            how="diagonal",
        )
        return {"unit": self.tract, "status": UnitStatus.OK, "blocks": rec.blocks.to_dicts()}, frame


def _units_of(schema: Schema, frame: pl.DataFrame | None) -> Units:
    if frame is None or not frame.height:
        codes = {a.name: np.zeros(0, dtype=np.int64) for a in schema.attributes}
        return Units(schema, np.zeros(0, dtype=str), codes, None, "reconstruction")
    return Units(
        schema,
        frame[schema.geoid_column].to_numpy().astype(str),
        {a.name: frame[a.name].to_numpy().astype(np.int64) for a in schema.attributes},
        None,
        "reconstruction",
    )


def reconstruct_release_together(
    long_a: pl.DataFrame,
    long_b: pl.DataFrame,
    pop: Population,
    opts: SolverOptions | None = None,
    *,
    run: RunOptions | None = None,
) -> ReleaseTogether:
    """:func:`reconstruct_together` tract by tract with the runner
    (:func:`tabrecon.runner.run_units`, as ``run`` says: :class:`~tabrecon.runner.RunOptions`):
    tracts in parallel, each written to ``<out>.parts/`` as it finishes, a rerun resuming
    (refused when the tables or options differ), a failed tract recorded while the others go
    on. Blocks are independent, so the result equals one call on
    the whole."""
    from ..provenance import digest_long

    other = pop.tied_population()
    assert pop.tied is not None
    opts = opts or SolverOptions()
    parts_of = []
    for long, p in ((long_a, pop), (long_b, other)):
        names = tables_in(long, p, "block")
        ids = [c.id for n in names for c in table_by_name(n, p).cells()]
        parts_of.append(
            long.filter(pl.col("cell").is_in(ids))
            .with_columns(pl.col("geoid").str.slice(0, 11).alias("_tract"))
            .partition_by("_tract", as_dict=True, include_key=False)
        )
    tracts = sorted({t for (t,) in parts_of[0]} | {t for (t,) in parts_of[1]})
    geos = [
        {g for g in long["geoid"].unique().to_list() if len(g) == 15} for long in (long_a, long_b)
    ]
    only = sorted(geos[0] ^ geos[1])
    if only:
        side = pop.name if only[0] in geos[0] else pop.tied.known_as
        raise InputError(
            f"block {only[0]} has {side} tables and not the other release's "
            f"({len(only) - 1} more such blocks): both releases must cover the same blocks"
        )
    empty = [long_a.clear(), long_b.clear()]
    run = run or RunOptions()
    parts = run.parts()
    fp = None
    if parts is not None:
        fp = {
            "tables": digest_long(long_a),
            "others": digest_long(long_b),
            "schema": pop.name,
            "solver": str(opts),
        }
    ran = run_units(
        tracts,
        lambda t: _TractTask(
            t, parts_of[0].get((t,), empty[0]), parts_of[1].get((t,), empty[1]), pop, opts
        ),
        tag=f"{pop.name}-together",
        parts=parts,
        run=run,
        fingerprint=fp,
    )
    got = ran.tables(tracts)
    both = pl.concat(got, how="diagonal") if got else None
    half = (lambda h: both.filter(pl.col("_half") == h)) if both is not None else (lambda h: None)
    rows = ran.rows("blocks")
    blocks = pl.DataFrame(rows, schema=BLOCK_SCHEMA, orient="row").sort("geoid")
    rec = JointReconstruction(
        pop=pop,
        units=_units_of(pop.schema, half("a")),
        others=_units_of(other.schema, half("b")),
        blocks=blocks,
        ties=tie_matrices(pop),
    )
    return ReleaseTogether(rec, ran.results)
