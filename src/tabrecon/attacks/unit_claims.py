"""Generate-then-Verify (Liu, Xiao, Thaker, Smith and Wu 2025; methods.md section 7) over any
schema's block tables: claims about individual records that every consistent population makes
true, found even where full reconstruction is far from unique.

A claim R(S, a, m) says that exactly m records of the block take the values ``a`` on the columns
``S``. For each block:

1. *generate*: K solutions of the block's count program (:func:`block_program`) under random
   objectives, for diversity;
2. *candidates*: every (S, a, m) with m >= 1 that holds in all K solutions, for each column subset
   S of the sizes asked; claims that are a published statistic (a cell counts exactly the
   records matching ``a``, by definition) are dropped as trivial;
3. *verify*: a candidate is verified when both Count(a) <= m - 1 and Count(a) >= m + 1 are
   infeasible together with the tables (two proofs); a time-out leaves it unverified.

A verified claim with m = 1 singles out one record ("exactly one household in this block is a
renting, Hispanic, 3-person married couple").
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
import scipy.sparse as sp
from scipy.stats import binom

from ..schema.catalog import HOUSING_UNITS
from ..schema.spec import Schema, Units
from ..unit_tables import HOUSING_TABLES
from .solvers import Extensible, SolverOptions, solve
from .unit_reconstruct import block_program, block_tables


@dataclass
class UnitClaims:
    """Verified claims (block, k, columns, values, m) and per-block figures."""

    claims: pl.DataFrame
    blocks: pl.DataFrame


def _keys(codes: dict[str, np.ndarray], schema: Schema, cols: tuple[int, ...]) -> np.ndarray:
    """Mixed-radix index of each type's values on the columns ``cols``."""
    key = np.zeros(next(iter(codes.values())).size, dtype=np.int64)
    for i in cols:
        a = schema.attributes[i]
        key = key * a.size + a.index(codes[a.name])
    return key


def generate_then_verify(
    long: pl.DataFrame,
    schema: Schema = HOUSING_UNITS,
    tables: tuple[str, ...] | None = None,
    k_values: tuple[int, ...] = (5, 6, 7, 8, 9, 10),
    K: int = 20,
    seed: int = 0,
    blocks: list[str] | None = None,
    truth: Units | None = None,
    opts: SolverOptions | None = None,
) -> UnitClaims:
    """Generate-then-Verify on every block of ``long`` (or the geoids in ``blocks``). With
    ``truth`` the records each verified singleton singles out are counted (households covered)."""
    opts = replace((opts or SolverOptions()).for_task("claims"), presolve="light")
    names = tables or tuple(t.name for t in HOUSING_TABLES)
    cells, W, geoids, V = block_tables(long, schema, names)
    feas = schema.feasible_types()
    Wc = W.tocsc()  # one conversion for every block's columns
    rng = np.random.default_rng(seed)
    subsets = {k: list(itertools.combinations(range(len(schema.attributes)), k)) for k in k_values}
    found: list[tuple] = []
    stats: list[tuple] = []
    # a claim is trivial when a published cell counts exactly the records it describes: the same
    # feasible types (by definition, not after this block's zeros, which make more coincide)
    feas_codes = schema.decode(feas)
    cell_types: dict[tuple[int, int], list[np.ndarray]] = {}
    for c in range(W.shape[0]):
        idx = W.indices[W.indptr[c] : W.indptr[c + 1]]
        cell_types.setdefault((idx.size, int(idx.sum())), []).append(np.sort(idx))
    all_keys: dict[tuple[int, ...], np.ndarray] = {}

    def _published(cols: tuple[int, ...], key: int) -> bool:
        if cols not in all_keys:
            all_keys[cols] = _keys(feas_codes, schema, cols)
        idx = np.flatnonzero(all_keys[cols] == key)
        same = cell_types.get((idx.size, int(idx.sum())), [])
        return any(np.array_equal(idx, other) for other in same)

    want = set(blocks) if blocks is not None else None
    for b, geoid in enumerate(geoids):
        if want is not None and geoid not in want:
            continue
        t0 = time.perf_counter()
        prog, adm = block_program(W, V[b], Wc)
        # 1. generate
        sols = []
        for _ in range(K):
            obj = rng.integers(-4, 5, size=prog.n_vars)
            s = solve(replace(prog, c=obj), replace(opts, time_limit=min(opts.time_limit or 5, 5)))
            if s.has_solution and s.x is not None:
                sols.append(s.x)
        if not sols:
            stats.append((geoid, 0, 0, 0, 0, 0, time.perf_counter() - t0))
            continue
        X = np.stack(sols)  # K x admissible types
        codes = schema.decode(feas[adm])
        base = Extensible(prog, opts)
        n_cand = n_ver = 0
        for k, subs in subsets.items():
            for cols in subs:
                key = _keys(codes, schema, cols)
                uk, inv = np.unique(key, return_inverse=True)
                counts = np.zeros((X.shape[0], uk.size), dtype=np.int64)
                for j in range(X.shape[0]):
                    counts[j] = np.bincount(inv, weights=X[j], minlength=uk.size).astype(np.int64)
                m = counts[0]
                stable = np.flatnonzero((m >= 1) & (counts == m).all(axis=0))
                for g in stable:
                    members = np.flatnonzero(inv == g)
                    if _published(cols, int(uk[g])):
                        continue  # trivial: one published cell is this very count
                    n_cand += 1
                    if _verified(base, prog.n_vars, members, int(m[g])):
                        n_ver += 1
                        found.append((geoid, k, cols, int(uk[g]), int(m[g]), members))
        took = time.perf_counter() - t0
        stats.append((geoid, int(X[0].sum()), int(adm.size), len(sols), n_cand, n_ver, took))
    claims = _claims_frame(found, schema, truth)
    per_block = pl.DataFrame(
        stats,
        schema=["geoid", "units", "types", "solutions", "candidates", "verified", "seconds"],
        orient="row",
    )
    return UnitClaims(claims, per_block)


def _verified(base: Extensible, nv: int, members: np.ndarray, m: int) -> bool:
    """Count(a) = m in every solution: both Count <= m - 1 and Count >= m + 1 infeasible."""
    row = sp.csr_matrix(
        (np.ones(members.size, dtype=np.int64), (np.zeros(members.size, int), members)),
        shape=(1, nv),
    )
    for lo, hi in ((0, m - 1), (m + 1, 10**9)):
        sol = base.solve(0, np.zeros(0, dtype=np.int64), row, np.array([lo]), np.array([hi]))
        if sol.status != "infeasible":
            return False
    return True


def _values(schema: Schema, cols: tuple[int, ...], key: int) -> str:
    """``column=label; ...`` of a claim's mixed-radix key."""
    parts = []
    for i in reversed(cols):
        att = schema.attributes[i]
        parts.append(f"{att.name}={att.labels[key % att.size]}")
        key //= att.size
    return "; ".join(reversed(parts))


def _claims_frame(found: list[tuple], schema: Schema, truth: Units | None) -> pl.DataFrame:
    """One row per verified claim: block, k, columns, the values as labels, m, its key and (with
    the truth) how many true records match it (equal to m for every verified claim)."""
    rows = []
    for geoid, k, cols, key, m, _members in found:
        names = ",".join(schema.attributes[i].name for i in cols)
        rows.append((geoid, k, names, _values(schema, cols, key), m, key))
    df = pl.DataFrame(rows, schema=["geoid", "k", "columns", "values", "m", "key"], orient="row")
    if truth is None or not found:
        return df
    matches = [len(units) for units in _matching(found, schema, truth)]
    return df.with_columns(pl.Series("true_matches", matches))


def _matching(found: list[tuple], schema: Schema, truth: Units) -> list[np.ndarray]:
    """For each claim, the indices of the true units of its block that match it."""
    tkeys: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    true_types, true_geo = truth.types, truth.block_geoid
    out = []
    for geoid, _k, cols, key, _m, _members in found:
        if (geoid, cols) not in tkeys:
            idx = np.flatnonzero(true_geo == geoid)
            tkeys[(geoid, cols)] = (idx, _keys(schema.decode(true_types[idx]), schema, cols))
        idx, keys = tkeys[(geoid, cols)]
        out.append(idx[keys == key])
    return out


def claims_by_k(
    res: UnitClaims, truth: Units, schema: Schema = HOUSING_UNITS, tract_len: int = 11
) -> pl.DataFrame:
    """The study's figures by number of columns k (its Figure 2 and Tables 2-3): share of
    blocks with a verified singleton, units singled out by verified singleton claims, units
    covered by any verified claim, and the median binomial baseline of the verified singletons
    -- P(exactly one of the block's N units matches) when each unit matches with the share of
    the tract's units that do (the study's uninformed-but-not-uniform guess)."""
    blocks = res.blocks["geoid"].to_list()
    c = res.claims
    geo = truth.block_geoid
    tracts = np.array([g[:tract_len] for g in geo])
    types = truth.types  # encoded once, not per claim
    tract_keys: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
    found = []
    for row in c.iter_rows(named=True):
        cols = tuple(schema.names.index(n) for n in row["columns"].split(","))
        found.append((row["geoid"], row["k"], cols, row["key"], row["m"], None))
    hits = _matching(found, schema, truth)
    out = []
    for k in sorted(set(c["k"].to_list())) if c.height else []:
        single, every, base, with_single = set(), set(), [], set()
        for (geoid, kk, cols, key, m, _), h in zip(found, hits, strict=True):
            if kk != k:
                continue
            every.update(h.tolist())
            if m == 1:
                single.update(h.tolist())
                with_single.add(geoid)
                tract = geoid[:tract_len]
                if (tract, cols) not in tract_keys:
                    in_tract = np.flatnonzero(tracts == tract)
                    tract_keys[(tract, cols)] = _keys(schema.decode(types[in_tract]), schema, cols)
                keys = tract_keys[(tract, cols)]
                p = float((keys == key).mean())
                n = int((geo == geoid).sum())
                base.append(float(binom.pmf(1, n, p)))
        out.append(
            (
                k,
                len(with_single) / max(len(blocks), 1),
                len(single),
                len(every),
                float(np.median(base)) if base else float("nan"),
            )
        )
    return pl.DataFrame(
        out,
        schema=[
            "k",
            "blocks_with_singleton",
            "units_singled_out",
            "units_covered",
            "baseline_median",
        ],
        orient="row",
    )
