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

>>> from tabrecon.records.households import synthesize_households
>>> from tabrecon.records.synth import SynthConfig
>>> from tabrecon.tables.spec import tabulate_units
>>> _, units = synthesize_households(SynthConfig(persons=300), seed=4)
>>> rec = reconstruct_units(tabulate_units(units), units.schema)
>>> tabulate_units(rec.units).equals(tabulate_units(units))
True
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..schema.spec import Schema, Units
from ..tables.measures import WITHHELD, format_values
from ..tables.publication import EXACT, MISSING, Publication
from ..tables.spec import (
    StatisticCell,
    compiled,
    compiled_columns,
    compiled_statistics,
    table_by_name,
    tables_in,
    tables_of,
)
from ..vocab import Level, Verdict
from . import variability
from .solvers import Extensible, IntProgram, SolverOptions, prove_forms
from .variability import capped


@dataclass
class UnitReconstruction:
    """Reconstructed units and, per block, whether they are the only consistent ones."""

    units: Units
    blocks: pl.DataFrame  # geoid, units, types, status, seconds, solvar, solvar_lo, solvar_hi
    # status: unique | varies | undecided (limit hit) | infeasible (the tables contradict
    # themselves) | failed (no solution within the limit) | refused (the reference breaks the
    # tables) | unknown (not checked); solvar in percent of the block's units, NaN where not
    # measured (unique blocks are 0)


LEVELS = Level.choices()


def reconstruct_units(
    long: pl.DataFrame,
    schema: Schema,
    tables: tuple[str, ...] | None = None,
    opts: SolverOptions | None = None,
    check_unique: bool = True,
    level: str = "block",
    unique_on: Mapping[str, np.ndarray] | None = None,
    tract_model: str = "auto",
    reference: Units | None = None,
    distance: bool = False,
    distance_time_limit: float | None = None,
    publication: Publication = EXACT,
) -> UnitReconstruction:
    """Reconstruct every block of a long table (geoid, cell, value) of ``schema``'s tables
    (``tables``: by default every declared table the long table holds a cell of, but medians and
    means at "block+tract"; one it holds in part is refused, naming the cells it lacks).

    ``level`` "block" solves each block from its block tables alone; "block+tract" solves the
    blocks of each tract jointly, the tract tables (persons: PCT12, PCT12A-O, by single year of
    age) constraining their sum. Uniqueness is asked of each block's histogram over the schema's
    types, or over coarser ones: ``unique_on`` maps an attribute's codes to coarser codes before
    the question (``{"age": AGEBIN_OF_AGE}``: certification's resolution for persons); a block's
    status is then "unique" when every solution gives it the same coarse histogram. At
    "block+tract" a block's ``seconds`` is its tract's time shared evenly among its blocks.

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
    if level not in LEVELS:
        raise TabreconError(f"level must be one of {', '.join(LEVELS)} (got {level!r})")
    if tract_model not in ("auto", "types", "classes"):
        raise TabreconError(f"tract_model must be auto, types or classes (got {tract_model!r})")
    if distance and not check_unique:
        raise TabreconError("distance needs check_unique: distances are measured where blocks vary")
    opts = (opts or SolverOptions()).for_task("certify")
    escalate = opts.backend == "auto"  # a distance CP-SAT cannot close soon goes to HiGHS
    names = tables or tables_in(long, schema)
    if tables is None and level != "block":  # medians and means: block level only so far
        names = tuple(n for n in names if table_by_name(n, schema).statistic is None)
    of_level = {
        lv: tuple(n for n in names if table_by_name(n, schema).level == lv)
        for lv in ("block", "tract")
    }
    if not publication.exact and level != "block":
        raise TabreconError(
            f"publication {publication}: inexact cells are modelled at level 'block' only so far"
        )
    cells, W, geoids, V, Vhi = block_bounds(long, schema, of_level["block"], publication)
    measured = block_statistics(long, schema, of_level["block"], geoids)
    if measured and level != "block":
        which = ", ".join(dict.fromkeys(sc.cell.table for sc in measured.cells))
        raise TabreconError(
            f"medians and means ({which}) are modelled at level 'block' only so far"
        )
    feas = schema.feasible_types()
    Wc, deg = compiled_columns(schema, tuple(of_level["block"]))  # once per process
    cls = first = np.zeros(0, dtype=np.int64)
    aggregate = False
    var_cls: np.ndarray | None = None  # each type's class, when block variables count classes
    # the resolution uniqueness is asked at: unique_on's, no finer than the records say
    key = asked_key(
        schema, unique_on, tuple(of_level["block"]), of_level["tract"] if level != "block" else ()
    )
    if level == "block":
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
            bcls, bfirst, Wb, Wbc, degb = block_classes(schema, tuple(of_level["block"]))
            if (
                bfirst.size < bcls.size
                and (not check_unique or bool((key == key[bfirst[bcls]]).all()))
                and classes_are_runs(schema, tuple(of_level["block"]), bcls)
            ):
                W, Wc, deg, var_cls = Wb, Wbc, degb, bcls
        if tract_model == "classes" and var_cls is None:
            raise TabreconError(
                "tract_model 'classes' at level 'block' needs uniqueness asked no finer than "
                "the block tables publish (persons: unique_on {'age': AGEBIN_OF_AGE}), no "
                "median or mean, and classes that are runs of an ordered attribute"
            )
    else:
        if not of_level["tract"]:
            raise TabreconError(
                f"no tract tables among those used ({', '.join(names)}): level 'block+tract' "
                f"needs some (the {schema.name} schema declares "
                f"{', '.join(t.name for t in tables_of(schema) if t.level == 'tract') or 'none'})"
            )
        _tc, Wt, tgeo, Vt = block_tables(long, schema, of_level["tract"])
        tract_of = prefix(np.asarray(geoids, dtype=str), "tract")
        known = dict(zip(tgeo, range(len(tgeo)), strict=True))
        lacking = sorted(set(tract_of.tolist()) - set(known))
        if lacking:
            raise InputError(
                f"tract {lacking[0]} has blocks but no tract table values "
                f"({len(lacking) - 1} more such tracts): level 'block+tract' needs "
                f"{', '.join(of_level['tract'])} for every tract"
            )
        groups = [
            (np.flatnonzero(tract_of == t).tolist(), Vt[known[t]])
            for t in np.unique(tract_of).tolist()
        ]
        cls, first, Wcls, Wclsc, deg_cls = block_classes(schema, tuple(of_level["block"]))
        # at the block tables' resolution when the question asked is no finer
        valid = not check_unique or _classes_answer(key, cls, first)
        if tract_model == "classes" and not valid:
            raise TabreconError(
                "tract_model 'classes' answers uniqueness only as coarse as the block tables "
                "publish: pass unique_on (persons: {'age': AGEBIN_OF_AGE}) or tract_model 'types'"
            )
        aggregate = valid and tract_model != "types"
        var_cls = cls if aggregate else None
    Wtc = Wt.tocsc() if Wt is not None else None
    # what the cells cannot tell apart of an ordered attribute (age): records written as runs
    runs = runs_of(schema, of_level["block"], of_level["tract"] if Wt is not None else ())
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
    bfirst_of = bfirst if var_cls is not None and level == "block" else None
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
            queue.extendleft(reversed(_grouped(Wc, V, bs, adms_b, bfirst_of, took)))
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
                    queue.extendleft(reversed(_packed(bs, singles, took)))
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
            prog, adms, *_rows = tract_program(W, Wc, V[bs], Wt, Wtc, vt)
        base = Extensible(prog, opts)  # built once: the solve and the uniqueness proof clone it
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
                    (geoids[b], 0, int(a.size), Verdict.REFUSED, took, *nan)
                    for b, a in zip(bs, adms, strict=True)
                ]
                continue
        else:
            sol = base.solve_base()
            if (not sol.has_solution or sol.x is None) and vt is None and len(bs) > 1:
                queue.extendleft(([b], None, None) for b in reversed(bs))
                continue
            if not sol.has_solution or sol.x is None:
                why = (
                    Verdict.INFEASIBLE if sol.status == "infeasible" else Verdict.FAILED
                )  # contradiction
                took = (time.perf_counter() - t0) * share
                stats += [
                    (geoids[b], 0, int(a.size), why, took, *nan)
                    for b, a in zip(bs, adms, strict=True)
                ]
                continue
            x = sol.x
        status: list[str] = [Verdict.UNKNOWN] * len(bs)
        spread = [nan] * len(bs)
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
        took = (time.perf_counter() - t0) * share
        nx = int(sum(a.size for a in adms))
        if ytypes is not None:
            dealt = _deal(x[:nx], adms, cls, ytypes, x[nx:])
        else:
            dealt, off = [], 0
            for a in adms:
                xb = x[off : off + a.size]
                off += a.size
                dealt.append(np.repeat(a[xb > 0], xb[xb > 0]))
        for b, a, got, st, sv in zip(bs, adms, dealt, status, spread, strict=True):
            rows.append(got)
            geo_out.append(np.full(got.size, geoids[b]))
            stats.append((geoids[b], int(got.size), int(a.size), st, took, *sv))
    pos = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    units = Units(
        schema,
        np.concatenate(geo_out).astype(str) if geo_out else np.zeros(0, dtype=str),
        schema.decode(feas[pos]),
        None,
        "reconstruction",
        runs.ranges(schema, pos) if runs is not None else None,
    )
    blocks = pl.DataFrame(
        stats,
        schema={
            "geoid": pl.String,
            "units": pl.Int64,
            "types": pl.Int64,
            "status": pl.String,
            "seconds": pl.Float64,
            "solvar": pl.Float64,
            "solvar_lo": pl.Float64,
            "solvar_hi": pl.Float64,
        },
        orient="row",
    ).sort("geoid")
    return UnitReconstruction(units, blocks)


@dataclass(frozen=True)
class Runs:
    """What the count cells used tell apart of a schema's ordered attributes: per ordered
    attribute, the first and last category (index) of each feasible type's run -- the
    categories its type can take, every other attribute held, without moving to another class
    (:func:`type_classes` over every row used), when they are consecutive (persons: age 100-104
    where PCT12 stops at single years; 0-17 with the P.L. 94-171 tables, whose classes hold both
    sexes too); a type whose categories are not consecutive is a run of one. Where a type has
    runs in several ordered attributes, every combination of them is in its class."""

    first: dict[str, np.ndarray]
    last: dict[str, np.ndarray]

    def ranges(
        self, schema: Schema, pos: np.ndarray
    ) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        """The first and last code of the run of each record at feasible-type position
        ``pos``; None when no record's run is wider than one category."""
        if all((self.last[n][pos] == self.first[n][pos]).all() for n in self.last):
            return None
        codes = {n: schema.attribute(n).codes for n in self.last}
        return {n: (codes[n][self.first[n][pos]], codes[n][self.last[n][pos]]) for n in codes}


def ordered_runs(schema: Schema, feas: np.ndarray, *Ws: sp.csr_matrix) -> Runs | None:
    """The runs of categories of ``schema``'s ordered attributes that the rows ``Ws`` (columns:
    feasible types) cannot tell apart (:class:`Runs`); None when there are none. Only count
    cells are read: a median or mean may tell a run's categories apart in part.

    >>> from tabrecon.schema.spec import Attribute, Schema
    >>> age = Attribute("age", ((0, "0"), (1, "1"), (2, "2+")), ordered=True)
    >>> r = ordered_runs(Schema("t", "thing", (age,)), np.arange(3),
    ...                  sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 1]])))
    >>> r.first["age"].tolist(), r.last["age"].tolist()
    ([0, 1, 1], [0, 2, 2])

    Cells that count both sexes of an age range (none by sex): each type's run is its own sex
    over the range.

    >>> sex = Attribute("sex", ((0, "m"), (1, "f")))
    >>> r = ordered_runs(Schema("t", "thing", (sex, age)), np.arange(6),
    ...                  sp.csr_matrix(np.array([[1, 1, 0, 1, 1, 0], [0, 0, 1, 0, 0, 1]])))
    >>> r.first["age"].tolist(), r.last["age"].tolist()
    ([0, 0, 2, 0, 0, 2], [1, 1, 2, 1, 1, 2])
    """
    ordered = [a for a in schema.attributes if a.ordered]
    if not ordered:
        return None
    cls, _first = type_classes(sp.vstack(Ws).tocsr() if len(Ws) > 1 else Ws[0])
    codes = schema.decode(feas)
    idx = {a.name: a.index(codes[a.name]).astype(np.int64) for a in schema.attributes}
    first: dict[str, np.ndarray] = {}
    last: dict[str, np.ndarray] = {}
    for a in ordered:
        # the types that differ from each other in this attribute alone, within one class
        held = np.stack([cls] + [idx[b.name] for b in schema.attributes if b is not a], axis=1)
        g = np.unique(held, axis=0, return_inverse=True)[1].reshape(-1)
        lo = np.full(int(g.max()) + 1, np.iinfo(np.int64).max)
        hi = np.full(int(g.max()) + 1, -1)
        np.minimum.at(lo, g, idx[a.name])
        np.maximum.at(hi, g, idx[a.name])
        run = (hi - lo + 1) == np.bincount(g)  # consecutive categories
        first[a.name] = np.where(run[g], lo[g], idx[a.name])
        last[a.name] = np.where(run[g], hi[g], idx[a.name])
    wide = np.stack([last[n] > first[n] for n in first], axis=1)
    if not wide.any():
        return None
    names = [a.name for a in schema.attributes]
    for t in np.flatnonzero(wide.sum(axis=1) > 1):  # runs in several attributes: a box?
        mates = np.flatnonzero(cls == cls[t])
        have = {tuple(int(idx[n][u]) for n in names) for u in mates}
        own = {n: int(idx[n][t]) for n in names}
        for combo in itertools.product(*(range(first[n][t], last[n][t] + 1) for n in first)):
            if tuple({**own, **dict(zip(first, combo, strict=True))}[n] for n in names) not in have:
                for n in first:  # not every combination is in the class: a run of one
                    first[n][t] = last[n][t] = idx[n][t]
                break
    return Runs(first, last)


@cache
def runs_of(schema: Schema, block: tuple[str, ...], tract: tuple[str, ...] = ()) -> Runs | None:
    """:func:`ordered_runs` of the named block (and tract) tables' count cells, once per
    process (each worker's tracts share it)."""
    Ws = [compiled(schema, names)[1] for names in (block, tract) if names]
    return ordered_runs(schema, schema.feasible_types(), *Ws) if Ws else None


_KEYS: dict[tuple, np.ndarray] = {}


def _question(
    schema: Schema, feas: np.ndarray, unique_on: Mapping[str, np.ndarray] | None
) -> tuple:
    """What a key memo is found by: the schema and the coarser codes asked, by content."""
    asked = (
        None
        if unique_on is None
        else tuple((k, np.asarray(v).tobytes()) for k, v in sorted(unique_on.items()))
    )
    return (schema, feas.size, asked)


def _coarse_key(
    feas: np.ndarray, schema: Schema, unique_on: Mapping[str, np.ndarray] | None
) -> np.ndarray:
    """Each feasible type's key at the resolution uniqueness is asked at (``unique_on``'s
    coarser codes; the type itself without it), once per process and question (1.45 of a
    real-sample run's 18.9 s when found per tract)."""
    if unique_on is None:
        return np.arange(feas.size)
    memo = _question(schema, feas, unique_on)
    if (hit := _KEYS.get(memo)) is None:
        hit = _KEYS[memo] = _coarse_key_of(feas, schema, unique_on)
    return hit


def _coarse_key_of(
    feas: np.ndarray, schema: Schema, unique_on: Mapping[str, np.ndarray]
) -> np.ndarray:
    cols = schema.decode(feas)
    parts = []
    for a in schema.attributes:
        c = np.asarray(cols[a.name])
        if a.name in unique_on:
            c = np.asarray(unique_on[a.name])[c]
        parts.append(c.astype(np.int64))
    return np.unique(np.stack(parts, axis=1), axis=0, return_inverse=True)[1].reshape(-1)


def asked_key(
    schema: Schema,
    unique_on: Mapping[str, np.ndarray] | None,
    block: tuple[str, ...],
    tract: tuple[str, ...] = (),
) -> np.ndarray:
    """Each feasible type's key at the resolution uniqueness is asked at: ``unique_on``'s coarser
    codes (:func:`_coarse_key`), joined with the runs of ordered categories the named tables
    cannot tell apart (:func:`runs_of`), since a record is written as its run. Two types share
    a key when a chain of same-coarse-key and same-run pairs links them: for persons at
    agebin38 with the block tables P12A-G alone (5-year groups, no single years under 20),
    ages 10-14 are one key, as the records say 10-14; with SF1's full tables the runs lie
    inside agebin38's bins and the key is agebin38's. Once per process and question."""
    feas = schema.feasible_types()
    key = _coarse_key(feas, schema, unique_on)
    runs = runs_of(schema, block, tract) if block or tract else None
    if runs is None:
        return key
    memo = (*_question(schema, feas, unique_on), block, tract)  # by content, not id
    if (hit := _KEYS.get(memo)) is None:
        codes = schema.decode(feas)
        held = [
            runs.first[a.name] if a.name in runs.first else a.index(codes[a.name])
            for a in schema.attributes
        ]
        run_id = np.unique(np.stack(held, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
        n, nk = feas.size, int(key.max()) + 1
        # a node per type, per key and per run, each type linked to its key and its run: the
        # graph's components are the keys asked (numbered in order of their first type)
        size = n + nk + int(run_id.max()) + 1
        graph = sp.csr_matrix(
            (
                np.ones(2 * n),
                (np.tile(np.arange(n), 2), np.concatenate([n + key, n + nk + run_id])),
            ),
            shape=(size, size),
        )
        comp = connected_components(graph, directed=False)[1][:n]
        hit = _KEYS[memo] = np.unique(comp, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return hit


def block_forms(
    n_vars: int, x: np.ndarray, adms: list[np.ndarray], key: np.ndarray
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Every block's count of each coarse type it admits, as forms over the program's
    variables (a class program's tract ones follow the blocks'), with their values at ``x`` and
    each form's block (``key``: each feasible type's coarse key, :func:`_coarse_key`)."""
    blk = np.repeat(np.arange(len(adms)), [a.size for a in adms])
    if not blk.size:
        return sp.csr_matrix((0, n_vars), dtype=np.int64), np.zeros(0, np.int64), blk
    pairs = np.stack([blk, key[np.concatenate(adms)]], axis=1)
    form = np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1)
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
    equal to its value (:func:`prove_forms`) and the distances are searched after it. ``nb``:
    the program's blocks (an empty one has no form)."""
    nan = (np.nan, np.nan, np.nan)
    if not F.shape[0]:
        return [Verdict.UNIQUE] * nb, [(0.0, 0.0, 0.0)] * nb
    names = np.array([Verdict.UNKNOWN, Verdict.UNIQUE, Verdict.VARIES, Verdict.UNDECIDED])
    var_block = _var_block(F, form_block, base.prog.n_vars)
    cp = variability.Counts.of(base.prog, F, m, form_block, var_block, nb)
    opts = base.opts
    if _totals_fixed(base.prog, F, form_block, nb, var_block, cp.row_block).all():
        v = variability.block_variability(
            cp,
            opts,
            coupled,
            distance=distance,
            distance_time_limit=distance_time_limit,
            escalate=escalate,
            zero_seconds=opts.time_limit,
            # a tract's program: presolve when its first proof finds a block that differs
            # (synthetic persons 87 -> 36 s); a block's own: never (housing units at block
            # level, 4,000 persons: 54-64 s without, 98-101 s with)
            presolve="auto" if coupled else False,
            base=base,
        )
    else:
        proof = prove_forms(base, F, m, [x], opts.time_limit)
        state = np.full(nb, variability.UNIQUE, dtype=np.int8)
        for b in range(nb):
            if not proof.verified[form_block == b].all():
                state[b] = variability.VARIES if proof.complete else variability.UNDECIDED
        lower = np.zeros(nb, dtype=np.int64)
        upper = np.where(state == variability.UNIQUE, 0, cp.N).astype(np.int64)
        if distance and (state == variability.VARIES).any():
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


def block_tables(
    long: pl.DataFrame,
    schema: Schema,
    names: tuple[str, ...],
    publication: Publication = EXACT,
) -> tuple[list, sp.csr_matrix, list[str], np.ndarray]:
    """The named tables' cells, weight matrix, the blocks (sorted geoids) and their values
    (blocks x cells) from a long table; refuses tables that lack a cell, and values the
    ``publication`` rule cannot have published (a withheld cell, value null, is ``MISSING``
    where the rule withholds cells)."""
    cells, W = compiled(schema, tuple(names))
    ids = [c.id for c in cells]
    missing = sorted(set(ids) - set(long["cell"].unique().to_list()))
    if missing:
        raise InputError(
            f"the tables lack cells {missing[:5]} (and {max(len(missing) - 5, 0)} more)"
        )
    # rows and columns by joins, values placed by index: pivoting the long table was most of
    # the time on the real sample (12 of 25 s at block+tract, 2,000 cells x 8,530 blocks)
    sub = long.filter(pl.col("cell").is_in(ids))
    geos = sub.select(pl.col("geoid").unique().sort())["geoid"]
    sub = sub.join(
        pl.DataFrame({"cell": ids, "_c": np.arange(len(ids), dtype=np.int64)}), on="cell"
    ).join(pl.DataFrame({"geoid": geos, "_g": np.arange(geos.len(), dtype=np.int64)}), on="geoid")
    flat = sub["_g"].to_numpy() * len(ids) + sub["_c"].to_numpy()
    seen = np.bincount(flat, minlength=geos.len() * len(ids))
    if (seen > 1).any():
        b, c = divmod(int(np.argmax(seen > 1)), len(ids))
        raise InputError(
            f"block {geos[b]} has cell {ids[c]} {int(seen.max())} times "
            f"({int((seen > 1).sum())} such cells): each cell once per block"
        )
    if (seen == 0).any():
        b, c = divmod(int(np.argmax(seen == 0)), len(ids))
        raise InputError(
            f"block {geos[b]} lacks cell {ids[c]} ({int((seen == 0).sum()) - 1} more "
            "cells of blocks are missing): every block needs every cell of the tables used"
        )
    publication.check(sub, table_of={c.id: c.table for c in cells})
    V = np.zeros(geos.len() * len(ids), dtype=np.int64)
    V[flat] = sub["value"].cast(pl.Int64).fill_null(MISSING).to_numpy()
    return cells, W, geos.to_list(), V.reshape(geos.len(), len(ids))


def block_bounds(
    long: pl.DataFrame, schema: Schema, names: tuple[str, ...], publication: Publication
) -> tuple[list, sp.csr_matrix, list[str], np.ndarray, np.ndarray | None]:
    """:func:`block_tables` with each value turned into the interval of true counts the
    ``publication`` rule allows: (cells, W, blocks, lowest, highest), highest None when every
    cell is exact (the values are then the counts)."""
    cells, W, geoids, V = block_tables(long, schema, names, publication)
    if publication.exact:
        return cells, W, geoids, V, None
    lo, hi = publication.interval(V, [c.table for c in cells])
    return cells, W, geoids, lo, hi


@dataclass(frozen=True)
class BlockStatistics:
    """The medians and means a release publishes for its blocks: the compiled cells
    (:class:`~tabrecon.tables.spec.StatisticCell`) and their values (blocks x cells, published
    units), for the count model's extra rows (:func:`block_program`'s ``extra``)."""

    cells: tuple[StatisticCell, ...]
    values: np.ndarray
    n_cols: int

    def __bool__(self) -> bool:
        return bool(self.cells)

    def rows(
        self, b: int, cols: np.ndarray | None = None
    ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray] | None:
        """Block ``b``'s rows over the feasible types, or over the positions ``cols`` among them
        (sorted: a block's admissible types), None without statistics."""
        if not self.cells:
            return None
        parts = []
        for sc, v in zip(self.cells, self.values[b], strict=True):
            if cols is None:
                parts.append(sc.rows(int(v), self.n_cols))
                continue
            # only the block's admissible types: the universe (~28,000 person types) is
            # the cost otherwise (measured: 9 ms a cell, most of the median ages' time)
            pos = np.searchsorted(cols, sc.universe)
            hit = (pos < cols.size) & (cols[np.minimum(pos, cols.size - 1)] == sc.universe)
            parts.append(sc.statistic.rows(int(v), pos[hit], sc.numbers[hit], int(cols.size)))
        return (
            sp.vstack([p[0] for p in parts], format="csr"),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )

    def at(self, b: int) -> Callable[[np.ndarray], tuple | None] | None:
        """Block ``b``'s rows as :func:`block_program` takes them: given its admissible types."""
        return (lambda cols: self.rows(b, cols)) if self.cells else None


def block_statistics(
    long: pl.DataFrame, schema: Schema, names: tuple[str, ...], geoids: list[str]
) -> BlockStatistics:
    """The named tables' median and mean cells for the blocks ``geoids`` (every block needs
    every such cell once; a value no nonempty universe can publish, a median of 120 years, is
    refused naming the block and the cell)."""
    cells = compiled_statistics(schema, tuple(names))
    n_cols = int(schema.feasible_types().size)
    if not cells:
        return BlockStatistics((), np.zeros((len(geoids), 0), dtype=np.int64), n_cols)
    ids = [sc.cell.id for sc in cells]
    sub = (
        long.filter(pl.col("cell").is_in(ids))
        .join(
            pl.DataFrame({"geoid": geoids, "_g": np.arange(len(geoids), dtype=np.int64)}),
            on="geoid",
        )
        .join(pl.DataFrame({"cell": ids, "_c": np.arange(len(ids), dtype=np.int64)}), on="cell")
    )
    flat = sub["_g"].to_numpy() * len(ids) + sub["_c"].to_numpy()
    seen = np.bincount(flat, minlength=len(geoids) * len(ids))
    if (seen != 1).any():
        b, c = divmod(int(np.argmax(seen != 1)), len(ids))
        raise InputError(
            f"{schema.geography} {geoids[b]} has cell {ids[c]} {int(seen[b * len(ids) + c])} "
            f"times ({int((seen != 1).sum()) - 1} more such cells): each median or mean once per "
            f"{schema.geography}"
        )
    flat_v = np.zeros(len(geoids) * len(ids), dtype=np.int64)
    flat_v[flat] = sub["value"].fill_null(WITHHELD).to_numpy()
    V = flat_v.reshape(len(geoids), len(ids))
    for j, sc in enumerate(cells):
        stat = sc.statistic
        lo, hi = stat.range(stat.numbers(schema.attribute(stat.of).codes))
        empty = WITHHELD if stat.empty is None else stat.empty
        bad = (V[:, j] != empty) & ((V[:, j] < lo) | (V[:, j] > hi))
        if bad.any():
            b = int(np.argmax(bad))
            shown = format_values([int(V[b, j])], stat.decimals)[0]
            more = int(bad.sum()) - 1
            raise InputError(
                f"{schema.geography} {geoids[b]}, cell {ids[j]} ({sc.cell.table}): {shown} is "
                f"outside what the {stat} can be ({format_values([lo], stat.decimals)[0]} to "
                f"{format_values([hi], stat.decimals)[0]})"
                + (f"; {more} more such {schema.geography}s" if more else "")
            )
    return BlockStatistics(cells, V, n_cols)


def _spans(indptr: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """The positions of the entries of rows (CSR) or columns (CSC) ``sel``, in order: one
    gather instead of a sparse slice per block (scipy's was half of building the real
    sample's 8,530 block programs)."""
    starts, ends = indptr[sel], indptr[sel + 1]
    lens = ends - starts
    if not lens.sum():
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return offsets + np.arange(int(lens.sum()))


def admissible_types(
    W: sp.csr_matrix,
    V: np.ndarray,
    degree: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Each block's admissible types (positions among ``W``'s columns) for the blocks' values
    ``V`` (blocks x cells): a type is ruled out unless every cell it lies in is nonzero, counted
    over the nonzero cells (few in a small block) for all blocks in one sparse product;
    ``exclude`` rules out more for every block.

    >>> W = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1]]))
    >>> [a.tolist() for a in admissible_types(W, np.array([[2, 0], [1, 1]]))]
    [[0], [0, 1, 2]]
    """
    deg = cell_degree(W) if degree is None else degree
    V = np.asarray(V)
    deciding = _deciding_cells(W)
    if deciding is None:
        return _admissible(W, V, deg, exclude)
    keep, Wk, degk, inner = deciding
    nz = V != 0
    # a zero cell over a nonzero one within it (counts that contradict): such a block is
    # tested against every cell, as the cells that decide would admit more types there
    over = np.asarray(inner @ nz.T.astype(np.int64)).T > 0  # blocks x cells
    whole = np.flatnonzero((over & ~nz).any(axis=1))
    out = _admissible(Wk, V[:, keep], degk, exclude)
    if whole.size:
        for b, adm in zip(whole.tolist(), _admissible(W, V[whole], deg, exclude), strict=True):
            out[b] = adm
    return out


def _admissible(
    W: sp.csr_matrix, V: np.ndarray, deg: np.ndarray, exclude: np.ndarray | None
) -> list[np.ndarray]:
    NZ = sp.csr_matrix((np.asarray(V) != 0).astype(np.int64))
    hits = (NZ @ W).tocsr()  # blocks x types: the nonzero cells each type lies in
    free = np.flatnonzero(deg == 0)  # in no cell: never ruled out
    out = []
    for b in range(hits.shape[0]):
        s_, e_ = hits.indptr[b], hits.indptr[b + 1]
        cols, n = hits.indices[s_:e_], hits.data[s_:e_]
        adm = cols[n == deg[cols]]
        if free.size:
            adm = np.union1d(adm, free)
        else:
            adm = np.sort(adm)
        if exclude is not None:
            adm = adm[~exclude[adm]]
        out.append(adm)
    return out


def _deciding_cells(
    W: sp.csr_matrix,
) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, sp.csr_matrix] | None:
    """The cells of ``W`` that decide which types a block admits (positions, their rows of
    ``W``, its :func:`cell_degree` and which cells lie within which: cells x cells), or None
    when every cell does; kept on the matrix, so found once per process for the compiled
    tables every tract shares.

    A cell containing a smaller cell is nonzero whenever the smaller one is (counts of one
    population), so a type need only be tested against the least cells it lies in: a cell is
    left out when smaller (or equal, earlier) cells within it cover each of its types. For
    persons' block tables at their classes, 698 of 840 cells with a fifth of the entries (the
    totals and P12's sex-by-age cells lie over P12A-I's): the product over blocks is several
    times cheaper. Where the counts contradict (a cell 0 over a nonzero smaller one) a type
    the whole test rules out would be admitted: :func:`admissible_types` tests such a block
    against every cell.

    >>> W = sp.csr_matrix(np.array([[1, 1, 1], [1, 0, 0], [0, 1, 1], [0, 1, 1]]))
    >>> _deciding_cells(W)[0].tolist()
    [1, 2]
    """
    if "_tabrecon_deciding" in W.__dict__:
        return W.__dict__["_tabrecon_deciding"]
    Wr = W.tocsr()
    B = sp.csr_matrix((np.ones(Wr.nnz, dtype=np.int64), Wr.indices, Wr.indptr), shape=Wr.shape)
    width = np.diff(B.indptr)
    common = (B @ B.T).tocoo()  # cells x cells: types in common
    c, d = common.row, common.col
    smaller = (width[d] < width[c]) | ((width[d] == width[c]) & (d < c))
    inside = (common.data == width[d]) & smaller & (width[d] > 0)  # d lies within c
    n = Wr.shape[0]
    S = sp.csr_matrix((np.ones(int(inside.sum()), np.int64), (c[inside], d[inside])), shape=(n, n))
    covered = ((S @ B) > 0).multiply(B)  # c's types that a smaller cell within c holds
    out = np.asarray(covered.sum(axis=1)).ravel() < width
    keep = np.flatnonzero(out)
    found = None if out.all() else (keep, Wr[keep], cell_degree(Wr[keep]), S)
    W.__dict__["_tabrecon_deciding"] = found
    return found


def cell_degree(W: sp.csr_matrix) -> np.ndarray:
    """How many of the tables' cells each type lies in (the column counts of ``W``)."""
    return np.bincount(W.indices, minlength=W.shape[1])


def block_program(
    W: sp.csr_matrix,
    v: np.ndarray,
    Wc: sp.csc_matrix | None = None,
    exclude: np.ndarray | None = None,
    degree: np.ndarray | None = None,
    admissible: np.ndarray | None = None,
    hi: np.ndarray | None = None,
    extra: tuple[sp.csr_matrix, np.ndarray, np.ndarray]
    | Callable[[np.ndarray], tuple | None]
    | None = None,
) -> tuple[IntProgram, np.ndarray]:
    """One block's count program (A x = v over the admissible types) and the admissible types'
    positions among the feasible types: a type is ruled out by any zero cell it lies in, and
    bounded by the smallest cell it lies in; cells left with no type and a zero value are
    dropped (the program's rows are the block's remaining cells, in order). ``Wc`` is ``W`` in
    CSC form, and ``degree`` its :func:`cell_degree`, computed once by callers that build many
    blocks; ``exclude`` rules out more types (those a tract's zero cells rule out);
    ``admissible`` gives the admissible types already found (:func:`admissible_types`, for many
    blocks at once), and then ``exclude`` and ``degree`` are not read.

    With ``hi`` the cells are published inexactly (rounded or withheld:
    :meth:`tabrecon.tables.publication.Publication.interval`): each true count lies from ``v`` to
    ``hi``, the rows read ``v <= A x <= hi``, a type is ruled out by a cell whose ``hi`` is 0
    and bounded by the smallest ``hi`` of its cells.

    ``extra`` rows (``R`` over all of ``W``'s columns, lowest, highest; infinite bounds as
    floats; or a function of the admissible types giving them over those alone:
    :meth:`BlockStatistics.at`) say more of the block than its counts: its medians and means.
    They are appended after the cells' rows, over the admissible types, and rule nothing out by
    themselves.

    >>> W = sp.csr_matrix(np.array([[1, 1], [1, 0]]))
    >>> prog, adm = block_program(W, np.array([2, 0]), hi=np.array([4, 2]))
    >>> adm.tolist(), prog.lo.tolist(), prog.hi.tolist(), prog.ub.tolist()
    ([0, 1], [2, 0], [4, 2], [2, 4])
    """
    lo = v
    v = v if hi is None else np.asarray(hi, dtype=np.int64)  # zeros and bounds from the top
    if admissible is not None:
        adm = admissible
    else:
        # a type is ruled out unless every cell it lies in is nonzero: counted over the nonzero
        # cells, few in a small block (summing the zero cells' rows was most of the time)
        nz = np.flatnonzero(v != 0)
        in_nonzero = np.bincount(W.indices[_spans(W.indptr, nz)], minlength=W.shape[1])
        ruled_out = in_nonzero < (cell_degree(W) if degree is None else degree)
        if exclude is not None:
            ruled_out |= exclude
        adm = np.flatnonzero(~ruled_out)
    Wc = W.tocsc() if Wc is None else Wc
    # the admissible columns gathered without scipy's slicing; a zero cell whose types are all
    # ruled out says 0 = 0: most of a small block's cells do, and the solvers need not read
    # them (a nonzero cell without types stays: it is infeasible)
    A, rows, ub = _block_diagonal(Wc, v[None, :], [adm])
    if rows.size != v.size:
        v, lo = v[rows], lo[rows]
    if callable(extra):
        extra = extra(adm)
        if extra is not None:
            extra = (sp.csr_matrix(extra[0]), extra[1], extra[2])
    elif extra is not None:
        extra = (sp.csr_matrix(extra[0])[:, adm], extra[1], extra[2])
    if extra is not None:
        R = extra[0].astype(np.int64)
        # an infinite bound becomes the largest value the row can take within the bounds
        reach = np.asarray(abs(R) @ ub, dtype=np.int64).reshape(-1)
        r_lo = np.where(np.isneginf(extra[1]), -reach, extra[1]).astype(np.int64)
        r_hi = np.where(np.isposinf(extra[2]), reach, extra[2]).astype(np.int64)
        A = sp.vstack([A, R], format="csr")
        lo = np.concatenate([np.asarray(lo, dtype=np.int64), r_lo])
        v = np.concatenate([np.asarray(v, dtype=np.int64), r_hi])
    return IntProgram(A=A, lo=lo, hi=v, ub=ub), adm


#: At block level, blocks of a tract share one program while their variables add up to at most
#: this many: a CP-SAT model per tiny block (persons at agebin38: median 16 variables) cost more
#: to build than to solve (real sample: 102.0 s with a model per block, 23.7 s with one per
#: tract), while joining large ones (housing units: median 931, up to 17,562) gained nothing and
#: doubled the zero test's rounds over their varying blocks (600-person county: 13 -> 24 s).
GROUP_VARS = 2_000


def _packed(
    bs: list[int], singles: list[tuple[IntProgram, np.ndarray]], seconds: float
) -> list[tuple[list[int], None, tuple[IntProgram, list[np.ndarray], float]]]:
    """Blocks ``bs`` with their own programs ``singles``, in groups of consecutive blocks of at
    most :data:`GROUP_VARS` variables (a larger block alone), each group's programs side by side
    (:func:`side_by_side`); ``seconds``: each block's share of the time taken to build them."""
    groups = _consecutive_groups([p.n_vars for p, _ in singles])
    return [
        (
            [bs[i] for i in g],
            None,
            (
                side_by_side([singles[i][0] for i in g]),
                [singles[i][1] for i in g],
                seconds * len(g),
            ),
        )
        for g in groups
    ]


def _consecutive_groups(sizes: list[int]) -> list[list[int]]:
    """Positions in consecutive groups of at most :data:`GROUP_VARS` variables in all (one
    larger than that alone)."""
    groups: list[list[int]] = [[]]
    n = 0
    for i, k in enumerate(sizes):
        if groups[-1] and n + k > GROUP_VARS:
            groups.append([])
            n = 0
        groups[-1].append(i)
        n += k
    return groups


def _grouped(
    Wc: sp.csc_matrix,
    V: np.ndarray,
    bs: list[int],
    adms: list[np.ndarray],
    first: np.ndarray | None,
    seconds: float,
) -> list[tuple[list[int], None, tuple[IntProgram, list[np.ndarray], float]]]:
    """:func:`_packed` built from the blocks' admissible columns ``adms`` of ``Wc`` without a
    program per block: consecutive blocks of at most :data:`GROUP_VARS` variables (a larger
    block alone), each group's programs side by side in one :func:`_block_diagonal` (the same
    rows, in the same order, as :func:`block_program`'s joined by :func:`side_by_side`);
    ``first``: each class's first type, when the columns are classes."""
    V = np.asarray(V, dtype=np.int64)
    out = []
    for g in _consecutive_groups([a.size for a in adms]):
        blocks = [bs[i] for i in g]
        Vg = V[blocks]
        B, rows, ub = _block_diagonal(Wc, Vg, [adms[i] for i in g])
        vb = Vg.ravel()[rows]
        kept = [adms[i] if first is None else first[adms[i]] for i in g]
        prog = IntProgram(A=B, lo=vb, hi=vb, ub=ub)
        out.append((blocks, None, (prog, kept, seconds * len(g))))
    return out


def side_by_side(progs: list[IntProgram]) -> IntProgram:
    """Programs that share no variable or row as one (block diagonal): a solution is each one's
    solution, and one model serves them all."""
    return IntProgram(
        A=sp.block_diag([p.A for p in progs], format="csr").astype(np.int64),
        lo=np.concatenate([p.lo for p in progs]),
        hi=np.concatenate([p.hi for p in progs]),
        ub=np.concatenate([p.ub for p in progs]),
    )


class Built(NamedTuple):
    """A tract's joint program (:func:`tract_program`, :func:`tract_class_program`) and what
    its variables and rows are: each block's admissible types (or classes, as their first
    types' positions), the tract's own variables' types (none for :func:`tract_program`), the
    block rows as positions in ``V.ravel()`` (block * cells + cell) and the tract cells kept,
    in row order; the rows after those tie classes to the tract's types."""

    prog: IntProgram
    adms: list[np.ndarray]
    ytypes: np.ndarray
    block_rows: np.ndarray
    tract_rows: np.ndarray


def tract_program(
    W: sp.csr_matrix,
    Wc: sp.csc_matrix,
    V: np.ndarray,
    Wt: sp.csr_matrix,
    Wtc: sp.csc_matrix,
    vt: np.ndarray,
) -> Built:
    """The joint count program of a tract's blocks (``V``: blocks x block cells) under its tract
    cells ``vt``: each block's program (:func:`block_program`, types a zero tract cell rules out
    excluded too) side by side, and one row per tract cell summing the blocks' types in it
    (zero cells left without types dropped). The variables are the blocks' in order."""
    out_t = np.asarray(Wt[np.flatnonzero(vt == 0)].sum(axis=0)).ravel() > 0
    adms = admissible_types(W, V, cell_degree(W), out_t)
    B, rows, _ub = _block_diagonal(Wc, V, adms)
    At = sp.hstack([Wtc[:, a] for a in adms], format="csr") if adms else Wt[:, :0]
    keep = np.flatnonzero((np.diff(At.indptr) > 0) | (vt != 0))
    A = sp.vstack([B, At[keep]], format="csr")
    v = np.concatenate([np.asarray(V, dtype=np.int64).ravel()[rows], vt[keep]])
    big = np.iinfo(np.int64).max
    ub = np.full(A.shape[1], big, dtype=np.int64)
    np.minimum.at(ub, A.indices, np.repeat(v, np.diff(A.indptr)))
    prog = IntProgram(A=A.astype(np.int64), lo=v, hi=v, ub=np.where(ub == big, 0, ub))
    return Built(prog, adms, np.zeros(0, dtype=np.int64), rows, keep)


def type_classes(W: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """The feasible types that no block cell tells apart, as classes: each type's class and
    each class's first type. Two types are in one class when every cell counts both or
    neither (equal columns of ``W``); for persons with the block tables, a class is one sex,
    race and origin over one agebin38 age range (the tables publish no finer age by block)."""
    Wt = W.T.tocsr()
    key: dict[bytes, int] = {}
    cls = np.empty(Wt.shape[0], dtype=np.int64)
    for t in range(Wt.shape[0]):
        lo, hi = Wt.indptr[t], Wt.indptr[t + 1]
        k = Wt.indices[lo:hi].tobytes() + Wt.data[lo:hi].tobytes()
        cls[t] = key.setdefault(k, len(key))
    first = np.full(len(key), -1, dtype=np.int64)
    first[cls[::-1]] = np.arange(cls.size)[::-1]
    return cls, first


@cache
def block_classes(
    schema: Schema, names: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix, sp.csc_matrix, np.ndarray]:
    """The named block tables' :func:`type_classes` (each feasible type's class, each class's
    first type) and their weight matrix over the classes (a column per class, by rows and by
    columns, and its :func:`cell_degree`): what block programs over classes slice, once per
    process."""
    W = compiled(schema, names)[1]
    cls, first = type_classes(W)
    Wb = W[:, first].tocsr()
    return cls, first, Wb, Wb.tocsc(), cell_degree(Wb)


def classes_are_runs(schema: Schema, names: tuple[str, ...], cls: np.ndarray) -> bool:
    """Whether every class of types (``cls``) is a run of ordered attributes
    (:func:`runs_of`): its records can then be written as the run, not as one of its types
    as if it were known."""
    runs = runs_of(schema, names)
    width = np.ones(cls.size, dtype=np.int64)
    if runs is not None:
        for n in runs.first:
            width *= runs.last[n] - runs.first[n] + 1
    return bool((np.bincount(cls)[cls] == width).all())


def tract_class_program(
    W: sp.csr_matrix,
    V: np.ndarray,
    Wt: sp.csr_matrix,
    Wtc: sp.csc_matrix,
    vt: np.ndarray,
    cls: np.ndarray,
    first: np.ndarray,
    by_class: tuple[sp.csr_matrix, sp.csc_matrix, np.ndarray] | None = None,
) -> Built:
    """The joint program of a tract's blocks at the block tables' own resolution: each block's
    variables count the type classes (:func:`type_classes`) its cells admit, the tract's count
    every type its zero cells leave, and for every class the blocks' counts sum to the tract's
    counts of its types. A solution of this program is one of :func:`tract_program`'s with the
    tract's types dealt out to the blocks (any dealing: no block cell tells them apart), with far
    fewer variables. The variables are the blocks' in order, then the tract's (:class:`Built`).
    ``by_class``: ``W`` over the classes by rows and by columns and its :func:`cell_degree`,
    when the caller has them (:func:`block_classes`)."""
    if by_class is None:
        Wcls = W[:, first].tocsr()
        by_class = (Wcls, Wcls.tocsc(), cell_degree(Wcls))
    Wcls, Wclsc, deg = by_class
    out_t = np.asarray(Wt[np.flatnonzero(vt == 0)].sum(axis=0)).ravel() > 0
    n_cls = first.size
    open_in_class = np.bincount(cls[~out_t], minlength=n_cls)
    adms = admissible_types(Wcls, V, deg, open_in_class == 0)
    B, rows, ubx = _block_diagonal(Wclsc, V, adms)
    vb = np.asarray(V, dtype=np.int64).ravel()[rows]
    used = np.zeros(n_cls, dtype=bool)
    for a in adms:
        used[a] = True
    ytypes = np.flatnonzero(~out_t & used[cls])
    At = Wtc[:, ytypes].tocsr()
    keep = np.flatnonzero((np.diff(At.indptr) > 0) | (vt != 0))
    At, vk = At[keep], vt[keep]
    nx = int(sum(a.size for a in adms))
    ny = ytypes.size
    row_of = np.full(n_cls, -1, dtype=np.int64)
    row_of[used] = np.arange(int(used.sum()))
    xcls = np.concatenate(adms) if adms else np.zeros(0, dtype=np.int64)
    C = sp.hstack(
        [
            sp.csr_matrix(
                (np.ones(nx, dtype=np.int64), (row_of[xcls], np.arange(nx))),
                shape=(int(used.sum()), nx),
            ),
            sp.csr_matrix(
                (-np.ones(ny, dtype=np.int64), (row_of[cls[ytypes]], np.arange(ny))),
                shape=(int(used.sum()), ny),
            ),
        ]
    )
    A = sp.vstack(
        [
            sp.hstack([B, sp.csr_matrix((B.shape[0], ny), dtype=np.int64)]),
            sp.hstack([sp.csr_matrix((At.shape[0], nx), dtype=np.int64), At]),
            C,
        ],
        format="csr",
    ).astype(np.int64)
    v = np.concatenate([vb, vk, np.zeros(C.shape[0], dtype=np.int64)])
    big = np.iinfo(np.int64).max
    uby = np.full(ny, big, dtype=np.int64)
    np.minimum.at(uby, At.indices, np.repeat(vk, np.diff(At.indptr)))
    cap = np.bincount(xcls, weights=ubx, minlength=n_cls).astype(np.int64)  # blocks' room
    uby = np.minimum(uby, cap[cls[ytypes]])
    prog = IntProgram(A=A, lo=v, hi=v, ub=np.concatenate([ubx, uby]))
    return Built(prog, [first[a] for a in adms], ytypes, rows, keep)


@dataclass(frozen=True)
class TractProgram:
    """One tract's count program with what each variable counts and each row says: the
    program claims about its records are proven in and a contradiction is diagnosed in
    (:func:`program_of_tract`, :func:`diagnose`)."""

    prog: IntProgram
    geoids: np.ndarray  # the blocks the program holds, in order
    var_block: np.ndarray  # each variable's block (position in geoids); -1 for the tract's own
    var_type: np.ndarray  # each variable's type (a class of types: its first)
    row_geoid: np.ndarray  # each row's published cell: its block or tract ("" for a tie)
    row_cell: np.ndarray  # the cell's id ("" for a row tying classes to the tract's types)


def _classes_answer(key: np.ndarray, cls: np.ndarray, first: np.ndarray) -> bool:
    """Whether variables per class of types (``cls``, ``first``) answer a question asked at the
    resolution ``key`` (each feasible type's coarse key): every class is one type, or one key."""
    return bool(
        (np.bincount(cls, minlength=first.size) == 1).all() or (key == key[first[cls]]).all()
    )


def program_of_tract(
    long: pl.DataFrame,
    schema: Schema,
    level: str = Level.BLOCK,
    unique_on: Mapping[str, np.ndarray] | None = None,
    blocks: list[str] | None = None,
) -> TractProgram:
    """The count program of one tract's blocks (``long``: their cells and, at "block+tract",
    the tract's) over its count tables: at "block" the named ``blocks`` (by default every one)
    side by side, each from its block tables; at "block+tract" every block under the tract's
    cells. Variables count classes of types no block cell tells apart wherever every class
    has one key at ``unique_on``'s resolution (:func:`tract_class_program`), else types. Every
    variable comes with its block and type, so that a question asked of the blocks'
    histograms at that resolution (a claim, a uniqueness proof) is a linear form of them, and
    every row with the cell it publishes.

    >>> from tabrecon.records.households import synthesize_households
    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.tables.spec import tabulate_units
    >>> _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    >>> long = tabulate_units(units)
    >>> tract = long["geoid"].str.slice(0, 11).min()
    >>> tp = program_of_tract(long.filter(pl.col("geoid").str.starts_with(tract)), units.schema)
    >>> tp.prog.n_vars == tp.var_block.size, tp.prog.n_rows == tp.row_cell.size
    (True, True)
    >>> sorted(set(tp.row_cell.tolist()))[:2]
    ['H0010001', 'H0030001']
    """
    names = tuple(n for n in tables_in(long, schema) if table_by_name(n, schema).statistic is None)
    block_names = tuple(n for n in names if table_by_name(n, schema).level == "block")
    tract_names = tuple(n for n in names if table_by_name(n, schema).level == "tract")
    cells, W, geo, V, _hi = block_bounds(long, schema, block_names, EXACT)
    geoids = np.asarray(geo, dtype=str)
    if np.unique(prefix(geoids, "tract")).size > 1:
        raise TabreconError("program_of_tract takes the cells of one tract")
    feas = schema.feasible_types()
    key = asked_key(schema, unique_on, block_names, tract_names if level != Level.BLOCK else ())
    cls, first, Wcls, Wclsc, deg_cls = block_classes(schema, block_names)
    by_class = _classes_answer(key, cls, first)
    Wc, deg = compiled_columns(schema, block_names)
    tract_cells: list = []
    tract_geo = ""
    if level == Level.BLOCK:
        sel = np.arange(geoids.size) if blocks is None else np.searchsorted(geoids, blocks)
        sel = np.minimum(sel, max(geoids.size - 1, 0))
        if blocks is not None and not np.array_equal(geoids[sel], np.asarray(blocks, dtype=str)):
            raise TabreconError("program_of_tract: a block asked for has no cells")
        Vs = np.asarray(V, dtype=np.int64)[sel]
        cols = (Wcls, Wclsc, deg_cls) if by_class else (W, Wc, deg)
        adms = admissible_types(cols[0], Vs, cols[2])
        B, rows, ub = _block_diagonal(cols[1], Vs, adms)
        if by_class:
            adms = [first[a] for a in adms]
        vb = Vs.ravel()[rows]
        built = Built(
            IntProgram(A=B, lo=vb, hi=vb, ub=ub), adms, np.zeros(0, np.int64), rows, rows[:0]
        )
    else:
        if not tract_names:
            raise TabreconError("level 'block+tract' needs tract tables; none are in the cells")
        sel = np.arange(geoids.size)
        tract_cells, Wt, tgeo, Vt = block_tables(long, schema, tract_names)
        tract_geo = str(tgeo[0])
        if by_class:
            built = tract_class_program(
                W, V, Wt, Wt.tocsc(), Vt[0], cls, first, (Wcls, Wclsc, deg_cls)
            )
        else:
            built = tract_program(W, Wc, V, Wt, Wt.tocsc(), Vt[0])
    adms, ytypes = built.adms, built.ytypes
    pos = np.concatenate([*adms, ytypes]).astype(np.int64)
    var_block = np.concatenate(
        [np.repeat(np.arange(len(adms)), [a.size for a in adms]), np.full(ytypes.size, -1)]
    ).astype(np.int64)
    n_cells = len(cells)
    ids = np.array([c.id for c in cells] + [c.id for c in tract_cells] + [""], dtype=object)
    ties = built.prog.n_rows - built.block_rows.size - built.tract_rows.size
    row_cell = np.concatenate(
        [
            ids[built.block_rows % max(n_cells, 1)],
            ids[n_cells + built.tract_rows],
            np.full(ties, ""),
        ]
    ).astype(str)
    row_geoid = np.concatenate(
        [
            geoids[sel][built.block_rows // max(n_cells, 1)],
            np.full(built.tract_rows.size, tract_geo),
            np.full(ties, ""),
        ]
    ).astype(str)
    return TractProgram(built.prog, geoids[sel], var_block, feas[pos], row_geoid, row_cell)


def diagnose(tp: TractProgram, opts: SolverOptions | None = None, limit: int = 10) -> list[dict]:
    """The published cells to blame when no population satisfies a tract's tables: the values
    whose smallest total change (published zeros held) makes the program feasible, one dict
    each (geoid, cell, published, adjust, reason), cells that published zeros leave no type to
    count first. It solves min sum(s+ + s-) subject to A x + s+ - s- = b over the published
    rows (always feasible: x = 0); the rows tying classes to a tract's types stay exact.

    >>> from tabrecon.records.households import synthesize_households
    >>> from tabrecon.records.synth import SynthConfig
    >>> from tabrecon.tables.spec import tabulate_units
    >>> _, units = synthesize_households(SynthConfig(persons=300), seed=4)
    >>> long = tabulate_units(units)
    >>> g = long["geoid"].min()
    >>> long = long.filter(pl.col("geoid") == g).with_columns(
    ...     value=pl.when(pl.col("cell") == "H0010001").then(pl.col("value") + 1)
    ...     .otherwise(pl.col("value")))
    >>> [(c["cell"], c["adjust"]) for c in diagnose(program_of_tract(long, units.schema))][:1]
    [('H0010001', -1)]
    """
    from .solvers import solve

    prog = tp.prog
    published = np.flatnonzero(tp.row_cell != "")
    counts = np.diff(prog.A.indptr)
    out = [
        {
            "geoid": str(tp.row_geoid[r]),
            "cell": str(tp.row_cell[r]),
            "published": int(prog.lo[r]),
            "adjust": -int(prog.lo[r]),
            "reason": "published zeros rule out every record this cell counts",
        }
        for r in published[(counts[published] == 0) & (prog.lo[published] != 0)][:limit]
    ]
    m, n, k = prog.n_rows, prog.n_vars, published.size
    S = sp.csr_matrix((np.ones(k, dtype=np.int64), (published, np.arange(k))), shape=(m, k))
    big = int(np.abs(prog.lo).max()) if m else 0
    elastic = IntProgram(
        A=sp.hstack([prog.A, S, -S], format="csr").astype(np.int64),
        lo=prog.lo,
        hi=prog.hi,
        ub=np.concatenate([prog.ub, np.full(2 * k, big)]).astype(np.int64),
        c=np.concatenate([np.zeros(n, dtype=np.int64), np.ones(2 * k, dtype=np.int64)]),
    )
    sol = solve(elastic, opts)
    if sol.x is None:
        return out
    adj = sol.x[n : n + k] - sol.x[n + k :]
    named = {(d["geoid"], d["cell"]) for d in out}
    for i in np.flatnonzero(adj):
        if len(out) >= limit:
            break
        r = published[i]
        if (str(tp.row_geoid[r]), str(tp.row_cell[r])) in named:
            continue
        out.append(
            {
                "geoid": str(tp.row_geoid[r]),
                "cell": str(tp.row_cell[r]),
                "published": int(prog.lo[r]),
                "adjust": -int(adj[i]),
                "reason": "changing this value by 'adjust' is part of the smallest total change "
                "that restores feasibility",
            }
        )
    return out


def _block_diagonal(
    Wc: sp.csc_matrix, V: np.ndarray, adms: list[np.ndarray]
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Every block's :func:`block_program` (given its admissible columns ``adms`` of ``Wc``,
    values ``V``: blocks x cells) side by side, in one pass over all blocks instead of a
    program per block and ``sp.block_diag``: the block-diagonal matrix (rows in block then cell
    order, a zero cell no admitted column lies in dropped), its rows' values and each column's
    upper bound (its smallest cell; 0 for a column in no cell). Rows are returned as positions in
    ``V.ravel()`` (block * cells + cell); :func:`block_program` is its one-block case.

    >>> Wc = sp.csc_matrix(np.array([[1, 1], [1, 0]]))
    >>> adms = [np.array([0, 1]), np.array([1])]
    >>> B, rows, ub = _block_diagonal(Wc, np.array([[2, 1], [1, 0]]), adms)
    >>> B.toarray().tolist(), rows.tolist(), ub.tolist()
    ([[1, 1, 0], [1, 0, 0], [0, 0, 1]], [0, 1, 2], [1, 2, 1])
    """
    V = np.asarray(V, dtype=np.int64)
    n_cells = V.shape[1] if V.ndim == 2 else 0
    sizes = np.array([a.size for a in adms], dtype=np.int64)
    nx = int(sizes.sum())
    cols = np.concatenate(adms) if adms else np.zeros(0, dtype=np.int64)
    col_block = np.repeat(np.arange(len(adms)), sizes)
    pos = _spans(Wc.indptr, cols)
    counts = Wc.indptr[cols + 1] - Wc.indptr[cols]
    j = np.repeat(np.arange(nx), counts)  # each entry's column
    key = col_block[j] * n_cells + Wc.indices[pos]  # each entry's (block, cell)
    flat = V.ravel()
    rows = np.union1d(key, np.flatnonzero(flat != 0))  # sorted: block, then cell
    B = sp.csr_matrix(
        (Wc.data[pos].astype(np.int64), (np.searchsorted(rows, key), j)), shape=(rows.size, nx)
    )
    big = np.iinfo(np.int64).max
    ub = np.full(nx, big, dtype=np.int64)
    np.minimum.at(ub, j, flat[key])
    return B, rows, np.where(ub == big, 0, ub)


def _deal(
    x: np.ndarray, adms: list[np.ndarray], cls: np.ndarray, ytypes: np.ndarray, y: np.ndarray
) -> list[np.ndarray]:
    """Each block's types from a class solution: the tract's units of each class's types dealt
    to the blocks in order of the blocks' counts of that class."""
    pool: dict[int, list[int]] = {}
    for t, n in zip(ytypes[y > 0].tolist(), y[y > 0].tolist(), strict=True):
        pool.setdefault(int(cls[t]), []).extend([t] * n)
    taken: dict[int, int] = {}
    out, off = [], 0
    for a in adms:
        xb = x[off : off + a.size]
        off += a.size
        types = []
        for rep, n in zip(a[xb > 0].tolist(), xb[xb > 0].tolist(), strict=True):
            c = int(cls[rep])
            k = taken.get(c, 0)
            types.extend(pool.get(c, [])[k : k + n])
            taken[c] = k + n
        out.append(np.asarray(types, dtype=np.int64))
    short = {c: n for c, n in taken.items() if n != len(pool.get(c, []))}
    if short or set(pool) - set(taken):  # the class sums hold in every solution: a solver bug
        raise TabreconError(
            f"a tract's solution does not deal out: the blocks' counts of {len(short)} classes "
            "differ from the tract's (a solver returned a point outside its program)"
        )
    return out


# --------------------------------------------------------------------------------------------------
# A whole release: tract by tract, in parallel, written as each tract finishes, resumable
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ReconstructOptions:
    """What a release's reconstruction asks (one value, so that a run's fingerprint and its
    workers see the same options).

    >>> ReconstructOptions(level="block+tract").level
    'block+tract'
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
    #: the resolution uniqueness is asked at (:func:`reconstruct_units`; persons: agebin38,
    #: :attr:`tabrecon.schema.registry.Population.unique_on`); None: the types
    unique_on: Mapping[str, np.ndarray] | None = None
    #: prove each block's reconstruction unique or not (False: reconstruct only, verdicts
    #: "unknown")
    check_unique: bool = True

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise TabreconError(f"level must be one of {', '.join(LEVELS)} (got {self.level!r})")
        if not self.publication.exact and self.level != Level.BLOCK:
            raise TabreconError(
                f"publication {self.publication}: inexact cells are modelled at level 'block' "
                "only so far"
            )


@dataclass
class ReleaseReconstruction:
    """Every tract of a release reconstructed: the records, per block their verdict, and per
    tract its runner status (``ok``, or ``error`` with a message: that tract's blocks are
    missing from ``units`` and ``blocks``)."""

    schema: Schema
    units: Units
    blocks: pl.DataFrame
    results: list[dict]

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.results if r["status"] != "ok"]

    def summary_lines(self) -> list[str]:
        """The run in words: blocks by verdict, records, failed tracts (each named)."""
        b = self.blocks
        counts = dict(b.group_by("status").len().iter_rows()) if b.height else {}
        verdicts = ", ".join(f"{n:,} {s}" for s, n in sorted(counts.items()))
        place = self.schema.geography  # block, or a declared release's own (school)
        where = f" of {len(self.results):,} tracts" if place == "block" else ""
        group = "tract" if place == "block" else place
        lines = [
            f"{len(self.units):,} records in {b.height:,} {place}s{where}; "
            f"{place}s: {verdicts or 'none'}"
        ]
        lines += [f"{group} {r['unit']}: {r.get('message', r['status'])}" for r in self.failed]
        return lines


class LongPart(Protocol):
    """Published tables that make themselves a long table (geoid, cell, value) on demand, e.g.
    :class:`tabrecon.tables.persons.TableSet`."""

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
    def of_long(cls, long: pl.DataFrame, schema: Schema) -> TractTables:
        """A long table's tracts: its cells of the schema's tables it holds
        (:func:`~tabrecon.tables.spec.tables_in`), split by tract.

        >>> from tabrecon.schema.catalog import HOUSING_UNITS
        >>> long = pl.DataFrame({"geoid": ["1" * 15, "2" * 15, "1" * 15],
        ...                      "cell": ["H0040001", "H0040001", "X"], "value": [1, 2, 3]})
        >>> tt = TractTables.of_long(long, HOUSING_UNITS)
        >>> tt.names, sorted(tt.parts), tt.parts["1" * 11]["value"].to_list()
        (('H4',), ['11111111111', '22222222222'], [1])
        """
        from ..provenance import digest_long

        names = tables_in(long, schema)
        used = long["cell"].is_in([c.id for n in names for c in table_by_name(n, schema).cells()])
        if not used.all():  # (a copy of a large release only where cells are left out)
            long = long.filter(used)
        digest = digest_long(long)
        by_tract = long.with_columns(pl.col("geoid").str.slice(0, 11).alias("_tract"))
        parts = by_tract.partition_by("_tract", as_dict=True, include_key=False)
        return cls(names, digest, {t: parts[(t,)] for (t,) in sorted(parts)})

    def long(self, tract: str) -> pl.DataFrame:
        """One tract's tables as a long table (geoid, cell, value)."""
        return _as_long(self.parts[tract])


def _as_long(part: pl.DataFrame | LongPart) -> pl.DataFrame:
    return part if isinstance(part, pl.DataFrame) else part.to_frame()


def _tract_worker(args: tuple) -> tuple[dict, pl.DataFrame | None]:
    tract, part, schema, tables, options, reference = args
    rec = reconstruct_units(
        _as_long(part),
        schema,
        tables,
        options.solver,
        reference=reference,
        check_unique=options.check_unique,
        level=options.level,
        unique_on=options.unique_on,
        distance=options.distance,
        distance_time_limit=options.distance_time_limit,
        publication=options.publication,
    )
    frame = rec.units.to_frame()
    return {"unit": tract, "status": "ok", "blocks": rec.blocks.to_dicts()}, frame


def reconstruct_release(
    tables: pl.DataFrame | TractTables,
    schema: Schema,
    options: ReconstructOptions | None = None,
    *,
    workers: int = 1,
    out: str | Path | None = None,
    resume: bool = True,
    progress: Callable[[dict], None] | None = None,
    asked: Mapping[str, str] | None = None,
    reference: Units | None = None,
) -> ReleaseReconstruction:
    """Reconstruct every tract of a release's tables (a long table, or :class:`TractTables`)
    over ``schema`` with the runner
    (:func:`tabrecon.runner.run_units`): tracts in parallel (``workers``, or the Dask cluster of
    :func:`tabrecon.runner.execution`), each written to ``<out>.parts/`` as it finishes, a rerun
    resuming (a rerun with other tables or options is refused; ``asked``: what the caller was
    asked beyond ``options``, e.g. a level it answered with another, refused too when it
    changes), a tract that fails recorded and the others going on. Tracts are independent at
    both levels (a block's tables, or its tract's,
    constrain only that tract), so the result equals :func:`reconstruct_units` on the whole.
    With ``reference`` a reconstruction made elsewhere is certified instead of solving for one
    (:func:`reconstruct_units`' ``reference``; its units are the result's).

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
    from ..runner import run_units

    options = options or ReconstructOptions()
    split = tables if isinstance(tables, TractTables) else TractTables.of_long(tables, schema)
    names = split.names
    if options.level == Level.BLOCK_TRACT and not any(
        table_by_name(n, schema).level == "tract" for n in names
    ):
        raise TabreconError(
            f"level 'block+tract' needs tract tables; these tables hold none of the "
            f"{schema.name} schema's ({', '.join(names)} are block tables): use level 'block'"
        )
    parts = Path(str(out) + ".parts") if out is not None else None
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
    statuses, frames = run_units(
        tracts,
        lambda t: (t, split.parts[t], schema, names, options, refs.get(t)),
        _tract_worker,
        tag=f"{schema.name}-reconstruct",
        parts=parts,
        resume=resume,
        workers=workers,
        progress=progress,
        fingerprint=fp,
    )
    got = [frames[t] for t in tracts if t in frames]
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
    rows = [b for st in statuses if st["status"] == "ok" for b in st["blocks"]]
    blocks = (
        pl.DataFrame(rows, infer_schema_length=None).sort("geoid")
        if rows
        else pl.DataFrame(schema={"geoid": pl.String, "status": pl.String})
    )
    return ReleaseReconstruction(schema, units, blocks, statuses)
