"""Reconstruction over any schema's block tables, and whether it is the only one.

For each block, the count model is built straight from the tables' weight matrix
(:mod:`tabrecon.tables.spec`): one integer variable per feasible type that no published zero
rules out (a type is ruled out by any zero cell it lies in), bounded by the smallest published
cell it lies in, with one equality per published cell. A solution is a reconstruction of the
block's units; a second proof, as certification does for persons, asks for any solution with
fewer units of some reconstructed type: infeasible means the block's full reconstruction is
unique (a proof), a solution means it is not (Liu et al. 2025: 1 of their 50 median blocks was
unique).

With a schema's tract tables (persons: PCT12, PCT12A-O by single year of age) a tract's blocks
are solved in one program whose block sums meet the tract's cells: either a block variable per
type (:func:`tract_program`) or, with the same solutions and far fewer variables, a block
variable per class of types no block cell tells apart and a tract variable per type
(:func:`tract_class_program`), the classes found from the tables' weight matrix.

>>> from tabrecon.records.synth import SynthConfig
>>> from tabrecon.schema.registry import population
>>> from tabrecon.tables.spec import tabulate_units
>>> hu = population("households")
>>> units = hu.synthesize(SynthConfig(persons=100), 2)
>>> rec = reconstruct_units(tabulate_units(units), hu)
>>> tabulate_units(rec.units).equals(tabulate_units(units))
True
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..schema.spec import Units
from ..tables.publication import EXACT, Publication
from ..tables.publishing import refuse_statistics_of_withheld_counts
from ..tables.spec import (
    compiled_columns,
    table_by_name,
    tables_in,
    tables_of,
)
from ..tables.tableset import TableSet
from ..vocab import Geo, Level, SolveStatus, Verdict
from . import variability
from .model import (
    admissible_types,
    asked_key,
    block_bounds,
    block_program,
    block_tables,
    classes_answer,
    deal_classes,
    grouped_programs,
    packed_programs,
    runs_of,
)
from .proofs import Extensible, prove_forms
from .solvers import IntProgram, SolverOptions
from .statistics import block_statistics
from .tract import block_classes, classes_are_runs, tract_class_program, tract_program
from .twins import moved, solve_merged
from .uniqueness import UNDECIDED, UNIQUE, VARIES
from .variability import capped

if TYPE_CHECKING:
    from ..schema.registry import Population


@dataclass
class UnitReconstruction:
    """Reconstructed units and, per block, whether they are the only consistent ones."""

    units: Units
    #: geoid, units, types, status, seconds, certify_seconds, solvar, solvar_lo, solvar_hi
    blocks: pl.DataFrame


LEVELS = Level.choices()
#: the program's variables (:func:`reconstruct_units`)
TRACT_MODELS = ("auto", "types", "classes")


@dataclass(frozen=True, kw_only=True)
class ReconstructOptions:
    """What a reconstruction asks, one value from the command line to the workers (a run's
    fingerprint and its workers see the same options): :func:`reconstruct_units` on a tract's
    tables, :func:`tabrecon.engine.release.reconstruct_release` on a release's.

    >>> ReconstructOptions(level="block+tract").level
    'block+tract'
    >>> ReconstructOptions(distance=True, check_unique=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: distance needs check_unique: distances are measured ...
    """

    #: "block": each block from its block tables; "block+tract": a tract's blocks jointly
    level: Level = Level.BLOCK
    solver: SolverOptions = field(default_factory=SolverOptions)
    #: each block that varies also gets its solution variability (solvar, percent)
    distance: bool = False
    #: seconds per block's distance search (None: the solver's limit)
    distance_time_limit: float | None = None
    #: how the cells were published (rounded, withheld: :mod:`tabrecon.tables.publication`)
    publication: Publication = EXACT
    #: the resolution uniqueness is asked at (persons: agebin38,
    #: :attr:`tabrecon.schema.registry.Population.unique_on`); None: the types
    unique_on: Mapping[str, np.ndarray] | None = None
    #: prove each block's reconstruction unique or not (False: reconstruct only, verdicts
    #: "unknown")
    check_unique: bool = True
    #: the program's variables: "types", "classes" or "auto" (:func:`reconstruct_units`)
    tract_model: str = "auto"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise TabreconError(f"level must be one of {', '.join(LEVELS)} (got {self.level!r})")
        if self.tract_model not in TRACT_MODELS:
            raise TabreconError(
                f"tract_model must be auto, types or classes (got {self.tract_model!r})"
            )
        if self.distance and not self.check_unique:
            raise TabreconError(
                "distance needs check_unique: distances are measured where blocks vary"
            )
        if not self.publication.exact and self.level != Level.BLOCK:
            raise TabreconError(
                f"publication {self.publication}: inexact cells are modelled at level 'block' "
                "only so far"
            )


def reconstruct_units(
    long: pl.DataFrame | TableSet,
    pop: Population,
    options: ReconstructOptions | None = None,
    *,
    tables: tuple[str, ...] | None = None,
    reference: Units | None = None,
) -> UnitReconstruction:
    """Reconstruct every block of a long table (geoid, cell, value) of ``pop``'s tables
    (``tables``: by default every declared table the long table holds a cell of, medians and
    means at both levels; one it holds in part is refused, naming the cells it lacks), as
    ``options`` ask (:class:`ReconstructOptions`). A :class:`~tabrecon.tables.tableset.TableSet`
    is read from its grids, never made a long table (:func:`block_tables`): the same answers.

    ``level`` "block" solves each block from its block tables alone; "block+tract" solves the
    blocks of each tract jointly, the tract tables (persons: PCT12, PCT12A-O, by single year of
    age) constraining their sum. Uniqueness is asked of each block's histogram over the schema's
    types, or over coarser ones: ``unique_on`` maps an attribute's codes to coarser codes before
    the question (``{"age": AGEBIN_OF_AGE}``: certification's resolution for persons); a block's
    status is then "unique" when every solution gives it the same coarse histogram. At
    "block+tract" a block's ``seconds`` is its tract's time shared evenly among its blocks;
    ``certify_seconds`` is the part of it spent certifying (0 where nothing was certified), so
    that a run says what certification cost beside the reconstruction, tract by tract.

    ``tract_model`` picks the program's variables: "types" gives each block a variable per
    type (:func:`tract_program`); "classes" one per class of types no block cell tells apart,
    at "block+tract" the tract a variable per type (:func:`tract_class_program`: the same
    solutions, far fewer variables), valid when uniqueness is asked no finer than the
    classes; "auto" takes "classes" whenever it is valid, at "block" also only where no
    median or mean is published and every class is a run of an ordered attribute
    (:func:`classes_are_runs`: persons' agebin38 ranges; a record is written as its run).

    ``reference`` certifies a reconstruction made elsewhere (another tool's, or the truth)
    instead of solving for one: each block's units are checked against its program (a block
    whose units break a published cell, or hold a type its zeros rule out, is "refused") and
    the questions are asked of them. With ``distance`` each block that varies also gets its
    solution variability (:mod:`tabrecon.engine.variability`): the largest share of its units
    that differ, at the resolution uniqueness is asked at, in any population the tables allow
    (``solvar``, percent; ``solvar_lo``/``solvar_hi`` bound it when a search stops at
    ``distance_time_limit`` seconds or the solver's limit; unique blocks are 0).

    ``publication`` says how the cells were published (:mod:`tabrecon.tables.publication`: rounded,
    or withheld below a threshold, the long table's value then null): each cell's value
    becomes the interval of true counts it allows, and "unique" still means every population
    the published values allow has the same histogram (block level only so far).
    """
    o, schema = options or ReconstructOptions(), pop.schema
    level, tract_model, check_unique, unique_on = (
        o.level,
        o.tract_model,
        o.check_unique,
        o.unique_on,
    )
    distance, distance_time_limit, publication = o.distance, o.distance_time_limit, o.publication
    opts = o.solver.for_task("certify")
    recon_opts = o.solver.for_task("reconstruct")
    escalate = opts.backend == "auto"  # a distance CP-SAT cannot close soon goes to HiGHS
    names = tables or tables_in(long, pop)
    of_level = {
        lv: tuple(n for n in names if table_by_name(n, pop).level == lv)
        for lv in (Geo.BLOCK, Geo.TRACT)
    }
    cells, W, geoids, V, Vhi = block_bounds(long, pop, of_level[Geo.BLOCK], publication)
    measured = block_statistics(long, pop, of_level[Geo.BLOCK], geoids, publication=publication)
    if measured and publication.withholds_statistics:
        frame = long.to_frame() if isinstance(long, TableSet) else long
        refuse_statistics_of_withheld_counts(frame, pop, publication)
    feas = schema.feasible_types()
    Wc, deg = compiled_columns(pop, tuple(of_level[Geo.BLOCK]))  # once per process
    cls = first = np.zeros(0, dtype=np.int64)
    aggregate = False
    var_cls: np.ndarray | None = None  # each type's class, when block variables count classes
    # the resolution uniqueness is asked at: unique_on's, no finer than the records say
    key = asked_key(
        pop,
        unique_on,
        tuple(of_level[Geo.BLOCK]),
        of_level[Geo.TRACT] if level != Level.BLOCK else (),
    )
    if level == Level.BLOCK:
        # small blocks of a tract side by side in one program (they share no row), up to
        # GROUP_VARS variables: one model to build and one zero test for many blocks; a group
        # whose program fails is retried block by block (below)
        tract_of = prefix(np.asarray(geoids, dtype=str), "tract")
        groups = [
            (np.flatnonzero(tract_of == t).tolist(), None) for t in np.unique(tract_of).tolist()
        ]
        Wt = None
        # a variable per class of types no block cell tells apart (persons: one sex, race and
        # origin over an agebin38 range; 42.2 -> 18 s on the real sample, same verdicts), valid
        # when uniqueness is asked no finer, no median or mean reads single types and each
        # class is a run of ordered categories (its records are written as the run)
        if tract_model != "types" and not measured:
            bcls, bfirst, Wb, Wbc, degb = block_classes(pop, tuple(of_level[Geo.BLOCK]))
            if (
                bfirst.size < bcls.size
                and (not check_unique or bool((key == key[bfirst[bcls]]).all()))
                and classes_are_runs(pop, tuple(of_level[Geo.BLOCK]), bcls)
            ):
                W, Wc, deg, var_cls = Wb, Wbc, degb, bcls
        if tract_model == "classes" and var_cls is None:
            raise TabreconError(
                "tract_model 'classes' at level 'block' needs uniqueness asked no finer than "
                "the block tables publish (persons: unique_on {'age': AGEBIN_OF_AGE}), no "
                "median or mean, and classes that are runs of an ordered attribute"
            )
    else:
        if not of_level[Geo.TRACT]:
            raise TabreconError(
                f"no tract tables among those used ({', '.join(names)}): level 'block+tract' "
                f"needs some (the {schema.name} schema declares "
                f"{', '.join(t.name for t in tables_of(pop) if t.level == Geo.TRACT) or 'none'})"
            )
        _tc, Wt, tgeo, Vt = block_tables(long, pop, of_level[Geo.TRACT])
        tract_of = prefix(np.asarray(geoids, dtype=str), "tract")
        known = dict(zip(tgeo, range(len(tgeo)), strict=True))
        lacking = sorted(set(tract_of.tolist()) - set(known))
        if lacking:
            raise InputError(
                f"tract {lacking[0]} has blocks but no tract table values "
                f"({len(lacking) - 1} more such tracts): level 'block+tract' needs "
                f"{', '.join(of_level[Geo.TRACT])} for every tract"
            )
        groups = [
            (np.flatnonzero(tract_of == t).tolist(), Vt[known[t]])
            for t in np.unique(tract_of).tolist()
        ]
        cls, first, Wcls, Wclsc, deg_cls = block_classes(pop, tuple(of_level[Geo.BLOCK]))
        # at the block tables' resolution when the question asked is no finer
        valid = not check_unique or classes_answer(key, cls, first)
        if tract_model == "classes" and not valid:
            raise TabreconError(
                "tract_model 'classes' answers uniqueness only as coarse as the block tables "
                "publish: pass unique_on (persons: {'age': AGEBIN_OF_AGE}) or tract_model 'types'"
            )
        if tract_model == "classes" and measured:
            raise TabreconError(
                "tract_model 'classes' cannot hold medians or means (they read single types): "
                "use tract_model 'types' or 'auto'"
            )
        # medians and means read single types: the blocks' variables are types then
        aggregate = valid and tract_model != "types" and not measured
        var_cls = cls if aggregate else None
    Wtc = Wt.tocsc() if Wt is not None else None
    # what the cells cannot tell apart of an ordered attribute (age): records written as runs
    runs = runs_of(pop, of_level[Geo.BLOCK], of_level[Geo.TRACT] if Wt is not None else ())
    ref_pos = ref_geo = None
    if reference is not None:
        if reference.schema.name != schema.name:
            raise TabreconError(
                f"the reference holds {reference.schema.name} records, the tables are "
                f"{schema.name}'s"
            )
        rt = reference.types
        ref_pos = np.searchsorted(feas, rt)
        ok = (ref_pos < feas.size) & (feas[np.minimum(ref_pos, feas.size - 1)] == rt)
        if not ok.all():
            raise InputError(
                f"the reference's unit in block {reference.block_geoid[np.argmin(ok)]} is of no "
                f"feasible {schema.name} type ({int((~ok).sum())} such units)"
            )
        ref_geo = reference.block_geoid.astype(str)
        order = np.argsort(ref_geo, kind="stable")  # each block's units one slice
        ref_geo, ref_pos = ref_geo[order], ref_pos[order]
    rows, geo_out = [], []
    stats: list[tuple] = []  # one row per block (the frame below)
    bfirst_of = bfirst if var_cls is not None and level == Level.BLOCK else None
    queue: deque[tuple[list[int], np.ndarray | None, tuple | None]] = deque(
        (bs, vt, None) for bs, vt in groups
    )
    while queue:
        bs, vt, built = queue.popleft()
        t0 = time.perf_counter()
        ytypes = None
        if vt is None and built is None and Vhi is None and not measured and len(bs) > 1:
            # counts alone: every block's admissible types in one product and each group's
            # program in one pass (a program per block was 10.5 of 18.7 s, real sample)
            adms_b = admissible_types(W, V[bs], deg)
            took = (time.perf_counter() - t0) / len(bs)
            queue.extendleft(reversed(grouped_programs(Wc, V, bs, adms_b, bfirst_of, took)))
            continue
        if vt is None and built is None:
            singles = [
                block_program(
                    W,
                    V[b],
                    Wc,
                    degree=deg,
                    hi=None if Vhi is None else Vhi[b],
                    extra=measured.at(b),
                )
                for b in bs
            ]
            if var_cls is not None and vt is None:  # classes: each by its first type
                singles = [(p, bfirst[a]) for p, a in singles]
            if len(bs) > 1:  # pack them into groups of small programs, then take each in turn
                took = (time.perf_counter() - t0) / len(bs)
                if Vhi is None:
                    queue.extendleft(reversed(packed_programs(bs, singles, took)))
                else:  # each alone: with totals not fixed the proof is prove_forms, and one
                    # over a group's joined programs took 619 s where the blocks alone took 36
                    queue.extendleft(
                        reversed(
                            [
                                ([b], None, (p, [a], took))
                                for b, (p, a) in zip(bs, singles, strict=True)
                            ]
                        )
                    )
                continue
            built = (singles[0][0], [singles[0][1]], 0.0)
        if built is not None:
            prog, adms, t_built = built
            t0 -= t_built
        elif aggregate:
            assert Wt is not None and Wtc is not None and vt is not None
            prog, adms, ytypes, *_rows = tract_class_program(
                W, V[bs], Wt, Wtc, vt, cls, first, (Wcls, Wclsc, deg_cls)
            )
        else:
            assert Wt is not None and Wtc is not None and vt is not None
            extra = [measured.at(b) for b in bs] if measured else None
            prog, adms, *_rows = tract_program(W, Wc, V[bs], Wt, Wtc, vt, extra)
        # built once: the solve and the uniqueness proof clone it. A tract's program keeps the
        # bounds its solve's presolve derives, which certification's presolve reads instead of
        # presolving again (a block's own program is not presolved there: block_variability)
        base = Extensible(prog, opts, keep_bounds=vt is not None)
        share = 1.0 / len(bs)
        nan = (np.nan, np.nan, np.nan)
        if ref_pos is not None and ref_geo is not None:
            x = _reference_x(prog, [geoids[b] for b in bs], adms, ref_pos, ref_geo, var_cls, ytypes)
            if x is None and vt is None and len(bs) > 1:  # find the block(s) at fault
                queue.extendleft(([b], None, None) for b in reversed(bs))
                continue
            if x is None:
                took = (time.perf_counter() - t0) * share
                stats += [
                    (geoids[b], 0, int(a.size), Verdict.REFUSED, took, 0.0, *nan)
                    for b, a in zip(bs, adms, strict=True)
                ]
                continue
        else:  # twins merged (a fortieth of the time on dense blocks), on the task's backend
            sol = solve_merged(base.prog, recon_opts, fallback=base.solve_base)
            if (not sol.has_solution or sol.x is None) and vt is None and len(bs) > 1:
                queue.extendleft(([b], None, None) for b in reversed(bs))
                continue
            if not sol.has_solution or sol.x is None:
                why = (
                    Verdict.INFEASIBLE if sol.status == SolveStatus.INFEASIBLE else Verdict.FAILED
                )  # contradiction
                took = (time.perf_counter() - t0) * share
                stats += [
                    (geoids[b], 0, int(a.size), why, took, 0.0, *nan)
                    for b, a in zip(bs, adms, strict=True)
                ]
                continue
            x = sol.x
        status: list[str] = [Verdict.UNKNOWN] * len(bs)
        spread = [nan] * len(bs)
        t_cert = time.perf_counter()
        if check_unique:
            F, m, form_block = block_forms(base.prog.n_vars, x, adms, key)
            status, spread = certify_forms(
                base,
                F,
                m,
                form_block,
                x,
                len(bs),
                coupled=vt is not None,
                distance=distance,
                distance_time_limit=distance_time_limit,
                escalate=escalate,
            )
        cert_took = (time.perf_counter() - t_cert) * share if check_unique else 0.0
        took = (time.perf_counter() - t0) * share
        nx = int(sum(a.size for a in adms))
        if ytypes is not None:
            dealt = deal_classes(x[:nx], adms, cls, ytypes, x[nx:])
        else:
            dealt, off = [], 0
            for a in adms:
                xb = x[off : off + a.size]
                off += a.size
                dealt.append(np.repeat(a[xb > 0], xb[xb > 0]))
        for b, a, got, st, sv in zip(bs, adms, dealt, status, spread, strict=True):
            rows.append(got)
            geo_out.append(np.full(got.size, geoids[b]))
            stats.append((geoids[b], int(got.size), int(a.size), st, took, cert_took, *sv))
    pos = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    codes = schema.decode(feas[pos])
    ranges = runs.ranges(schema, pos) if runs is not None else None
    if ranges and not measured:
        # counts alone: every category of a run meets them, so the run's first is written (the
        # solver's pick says nothing); where a median or mean pins one, that one is kept
        codes.update({n: lo for n, (lo, _hi) in ranges.items()})
    units = Units(
        schema,
        np.concatenate(geo_out).astype(str) if geo_out else np.zeros(0, dtype=str),
        codes,
        None,
        "reconstruction",
        ranges,
    )
    blocks = pl.DataFrame(
        stats,
        schema={
            "geoid": pl.String,
            "units": pl.Int64,
            "types": pl.Int64,
            "status": pl.String,
            "seconds": pl.Float64,
            "certify_seconds": pl.Float64,
            "solvar": pl.Float64,
            "solvar_lo": pl.Float64,
            "solvar_hi": pl.Float64,
        },
        orient="row",
    ).sort("geoid")
    return UnitReconstruction(units, blocks)


def block_forms(
    n_vars: int, x: np.ndarray, adms: list[np.ndarray], key: np.ndarray
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Every block's count of each coarse type it admits, as forms over the program's
    variables (a class program's tract ones follow the blocks'), with their values at ``x`` and
    each form's block (``key``: each feasible type's coarse key, :func:`_coarse_key`)."""
    blk = np.repeat(np.arange(len(adms)), [a.size for a in adms])
    if not blk.size:
        return sp.csr_matrix((0, n_vars), dtype=np.int64), np.zeros(0, np.int64), blk
    k = key[np.concatenate(adms)].astype(np.int64)
    # one integer per (block, key) pair (keys are codes >= 0), ordered as the pairs are: a 1-D
    # unique instead of one over rows (the 232 tracts of a 1,000,096-person state: 0.09 CPU s
    # against 0.38)
    form = np.unique(blk * (int(k.max()) + 1) + k, return_inverse=True)[1].reshape(-1)
    F = sp.csr_matrix(
        (np.ones(blk.size, dtype=np.int64), (form, np.arange(blk.size))),
        shape=(int(form.max()) + 1, n_vars),
    )
    form_block = np.zeros(F.shape[0], dtype=np.int64)
    form_block[form] = blk
    return F, np.asarray(F @ x, dtype=np.int64), form_block


def certify_forms(
    base: Extensible,
    F: sp.csr_matrix,
    m: np.ndarray,
    form_block: np.ndarray,
    x: np.ndarray,
    nb: int,
    *,
    coupled: bool = False,
    distance: bool = False,
    distance_time_limit: float | None = None,
    escalate: bool = False,
) -> tuple[list[str], list[tuple[float, float, float]]]:
    """Each block's verdict over the joint program and, with ``distance``, its solution
    variability as (solvar, lower, upper) in percent of its units, the forms being every
    block's count of each coarse type it admits (:func:`block_forms`). A block is unique when
    every solution gives it ``m``, varies when one does not, undecided when a proof stopped at
    the limit first; solvar is 0 where unique, NaN where unmeasured or unproven.

    When the program fixes every block's total (a published total cell: P1, H1), this is person
    certification's algorithm, the same function
    (:func:`tabrecon.engine.variability.block_variability`): one presolve, the zero test (a
    different histogram lacks some unit of the block's) deciding all blocks in a few proofs, and
    the distances of those that vary. Otherwise every form, zero counts included, is proven
    equal to its value (:func:`~tabrecon.engine.proofs.prove_forms`) and the distances are
    searched after it. ``nb``:
    the program's blocks (an empty one has no form)."""
    nan = (np.nan, np.nan, np.nan)
    if not F.shape[0]:
        return [Verdict.UNIQUE] * nb, [(0.0, 0.0, 0.0)] * nb
    names = np.array([Verdict.UNKNOWN, Verdict.UNIQUE, Verdict.VARIES, Verdict.UNDECIDED])
    var_block = _var_block(F, form_block, base.prog.n_vars)
    cp = variability.Counts.of(base.prog, F, m, form_block, var_block, nb)
    opts = base.opts
    # a second solution, a unit moved between twins of different keys: those blocks vary.
    # Not where distances follow: a unit moved bounds a block's distance below by 1, where the
    # zero test's spread search finds populations many units away that prune the searches
    # (the 1,000,096-person state: certification 41.4 -> 48.6 s with the moves)
    second = None if distance else moved(base.prog, x, F, var_block, cp.row_block)
    if _totals_fixed(base.prog, F, form_block, nb, var_block, cp.row_block).all():
        v = variability.block_variability(
            cp,
            opts,
            coupled,
            distance=distance,
            distance_time_limit=distance_time_limit,
            escalate=escalate,
            zero_seconds=opts.time_limit,
            presolve=coupled,  # a tract's program, not a block's (block_variability)
            base=base,
            second=second,
        )
    else:
        # a differing solution is found first among the block's nonzero counts (a few dozen
        # forms a block, not every type it admits): its solutions decide the blocks they
        # break, and the proof over every form starts from them
        pool, nz, limit = [x], np.flatnonzero(m > 0), opts.time_limit
        if second is not None:
            pool.append(second)
        if 0 < nz.size < F.shape[0]:
            t0 = time.perf_counter()
            prove_forms(base, F[nz], m[nz], pool, limit, groups=form_block[nz])
            limit = None if limit is None else max(limit - (time.perf_counter() - t0), 1e-3)
        proof = prove_forms(base, F, m, pool, limit, groups=form_block)
        # a block varies where a solution breaks one of its forms, is unique where every one is
        # proven, and is undecided where the time ran out first
        nf = np.bincount(form_block, minlength=nb)
        held = np.bincount(form_block, weights=proof.verified, minlength=nb) == nf
        assert proof.refuted is not None
        broke = np.bincount(form_block, weights=proof.refuted, minlength=nb) > 0
        state = np.select([broke, held], [VARIES, UNIQUE], UNDECIDED).astype(np.int8)
        lower = np.zeros(nb, dtype=np.int64)
        upper = np.where(state == UNIQUE, 0, cp.N).astype(np.int64)
        if distance and (state == VARIES).any():
            dopts = opts if distance_time_limit is None else capped(opts, distance_time_limit)
            upper = variability.distances(cp, state, lower, dopts, coupled, escalate)
        v = variability.BlockVariability(state, lower, upper, cp.N, 0, 0.0, 0.0)
    status = names[v.state].tolist()
    solvar, lo, hi = v.percent()
    spread = [
        (0.0, 0.0, 0.0)
        if st == Verdict.UNIQUE
        else (sv, lo_b, hi_b)
        if distance and st == Verdict.VARIES
        else nan
        for st, sv, lo_b, hi_b in zip(status, solvar, lo, hi, strict=True)
    ]
    return status, spread


def _var_block(F: sp.csr_matrix, form_block: np.ndarray, n_vars: int) -> np.ndarray:
    """Each variable's block, read off the forms (-1 for a variable no form holds: a tract's)."""
    F = F.tocsr()
    var_block = np.full(n_vars, -1, dtype=np.int64)
    var_block[F.indices] = np.repeat(form_block, np.diff(F.indptr))
    return var_block


def _totals_fixed(
    prog: IntProgram,
    F: sp.csr_matrix,
    form_block: np.ndarray,
    nb: int,
    var_block: np.ndarray | None = None,
    row_block: np.ndarray | None = None,
) -> np.ndarray:
    """Whether the program fixes each block's total: some equality row counts every one of the
    block's variables once and nothing else (``var_block``, ``row_block``: the variables' and
    rows' blocks when the caller has them, :func:`tabrecon.engine.variability.rows_block`)."""
    if var_block is None:
        var_block = _var_block(F, form_block, prog.n_vars)
    A = prog.A.tocsr()
    b = variability.rows_block(A, var_block) if row_block is None else row_block
    nnz = np.diff(A.indptr)
    ones = np.ones(A.shape[0], dtype=bool)
    np.logical_and.at(ones, np.repeat(np.arange(A.shape[0]), nnz), A.data == 1)
    n_of = np.bincount(var_block[var_block >= 0], minlength=nb)
    whole = (b >= 0) & ones & (nnz > 0) & (prog.lo == prog.hi)
    whole &= nnz == n_of[np.maximum(b, 0)]
    out = np.zeros(nb, dtype=bool)
    out[b[whole]] = True
    return out


def _reference_x(
    prog: IntProgram,
    geoids: list[str],
    adms: list[np.ndarray],
    ref_pos: np.ndarray,
    ref_geo: np.ndarray,
    cls: np.ndarray | None,
    ytypes: np.ndarray | None,
) -> np.ndarray | None:
    """The program's variables at a given reconstruction (``ref_pos``: each unit's position
    among the feasible types, ``ref_geo`` its block), or None when its units do not fit the
    program (a type the zeros rule out, or a published cell it breaks). Where blocks count
    classes (``cls``: each type's class; ``adms`` then hold each class's first type), a tract's
    variables count the types (``ytypes``). ``ref_geo`` is sorted (each block's
    units one slice: comparing every unit's block with each block's was 2.2 of the real
    sample's 17.5 s certifying a given reconstruction at block+tract)."""
    parts = []
    starts = np.searchsorted(ref_geo, geoids, side="left")
    ends = np.searchsorted(ref_geo, geoids, side="right")
    for g0, g1, a in zip(starts.tolist(), ends.tolist(), adms, strict=True):
        pos = ref_pos[g0:g1]
        if cls is not None:  # classes: a is each admissible class's first type
            pos, a = cls[pos], cls[a]
        order = np.argsort(a)
        at = np.searchsorted(a, pos, sorter=order)
        at = np.minimum(at, max(a.size - 1, 0))
        if a.size == 0 and pos.size:
            return None
        idx = order[at] if a.size else at
        if pos.size and (a[idx] != pos).any():
            return None
        parts.append(np.bincount(idx, minlength=a.size).astype(np.int64))
    if ytypes is not None:
        pos = np.concatenate(
            [ref_pos[:0]] + [ref_pos[g0:g1] for g0, g1 in zip(starts, ends, strict=True)]
        )
        at = np.searchsorted(ytypes, pos)
        at = np.minimum(at, max(ytypes.size - 1, 0))
        if pos.size and (ytypes.size == 0 or (ytypes[at] != pos).any()):
            return None
        parts.append(np.bincount(at, minlength=ytypes.size).astype(np.int64))
    x = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if x.size != prog.n_vars:
        return None
    ax = prog.A @ x
    lb = 0 if prog.lb is None else prog.lb
    if (ax < prog.lo).any() or (ax > prog.hi).any() or (x > prog.ub).any() or (x < lb).any():
        return None
    return x
