"""The statistical baselines a reidentification must beat (methods.md section 4), from the
published block tables alone: the block's modal race x ethnicity (MDG, :func:`mdg_guess`, and
the Bureau's six rules, :func:`modal_combo`), a draw proportional to the block's counts (PRG,
:func:`proportional_guess`) and Francis' majority-race inference (:func:`francis_majority`,
scored by :func:`precision_cdf`). :mod:`tabrecon.attacks.reidentify` puts each in the race
source's place on the attack's own putative set.

>>> geoids = np.array(["010010001001001", "010010001001002"])
>>> counts = np.zeros((2, 128), dtype=np.int64)
>>> counts[0, [3, 5]] = [2, 1]; counts[1, [3, 5]] = [1, 1]   # block 2: a tie of ones
>>> guess, rule = mdg_guess(geoids, counts)
>>> guess.tolist(), rule.tolist()   # block 2 takes its block group's mode (rule 2)
([3, 3], [1, 2])
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..errors import TabreconError
from ..schema import WHITE_NH, Microdata, combo_id, first_max
from ..tables.persons import all_cells, race_predicate_mask
from ..tables.tableset import TableSet


def block_counts_from_tables(ts: TableSet) -> tuple[np.ndarray, np.ndarray]:
    """Block race x ethnicity counts (blocks x 128) from published P8 and P9.

    Not Hispanic by race = the P9 not-Hispanic leaves; Hispanic by race = P8 leaf - P9 leaf.
    """
    g = ts.grids.get("block")
    if g is None:
        raise TabreconError(
            "no block tables: MDG and PRG need the published block tables P8 and P9"
        )
    cells = {c.id: c for c in all_cells()}
    col = {c: j for j, c in enumerate(g.cells)}
    counts = np.zeros((len(g.geoids), 128), dtype=np.int64)
    found = 0
    for cid, c in cells.items():
        if c.table not in ("P8", "P9") or not c.race.startswith("exactly:") or cid not in col:
            continue
        code = int(np.flatnonzero(race_predicate_mask(c.race))[0]) + 1
        v = g.values[:, col[cid]]
        if (v < 0).any():
            raise TabreconError(f"cell {cid} is not published for every block: MDG needs P8 and P9")
        if c.table == "P8":
            counts[:, combo_id(np.array([code]), np.array([1]))[0]] += v
        else:
            counts[:, combo_id(np.array([code]), np.array([0]))[0]] += v
            counts[:, combo_id(np.array([code]), np.array([1]))[0]] -= v
        found += 1
    if found != 126:
        raise TabreconError(
            f"the block tables hold {found} of the 126 P8/P9 race leaves: MDG and PRG need P8 and "
            "P9"
        )
    if (counts < 0).any():
        i, j = np.argwhere(counts < 0)[0]
        raise TabreconError(
            f"block {g.geoids[i]}: a P9 race leaf exceeds its P8 leaf (inconsistent tables)"
        )
    return g.geoids, counts


def _bg_counts(geoids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bg = np.array([g[:12] for g in geoids])
    _, inv = np.unique(bg, return_inverse=True)
    bgc = np.zeros((inv.max() + 1 if inv.size else 0, 128), dtype=np.int64)
    np.add.at(bgc, inv, counts)
    return inv, bgc


def mdg_guess(geoids: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Modal guess per block and the rule used (1 block, 2-3 block group, 4 national).

    1. the block mode if untied; 2. if the block's modal count is 1 and the block-group mode is
    untied with count > 1, the block-group mode; 3. if the block is tied and the block group is not,
    the block-group mode; 4. otherwise White alone not Hispanic (methods.md section 4).
    """
    inv, bgc = _bg_counts(geoids, counts)
    barg, bmax, btied = first_max(counts)
    garg, gmax, gtied = first_max(bgc)
    garg, gmax, gtied = garg[inv], gmax[inv], gtied[inv]
    rule = np.full(len(geoids), 4, dtype=np.int8)
    guess = np.full(len(geoids), WHITE_NH, dtype=np.int64)
    r1 = ~btied & (bmax > 0)
    r2 = ~r1 & (bmax == 1) & ~gtied & (gmax > 1)
    r3 = ~r1 & ~r2 & btied & ~gtied
    guess[r1], rule[r1] = barg[r1], 1
    guess[r2 | r3] = garg[r2 | r3]
    rule[r2], rule[r3] = 2, 3
    return guess, rule


def modal_combo(geoids: np.ndarray, counts: np.ndarray, national: np.ndarray) -> np.ndarray:
    """The modal race x ethnicity of each block by the Bureau's six rules (methods.md section 4).

    Block-group counts include the block. Tied choices fall back to the tied block combination with
    the largest national population.
    """
    inv, bgc = _bg_counts(geoids, counts)
    barg, bmax, btied = first_max(counts)
    garg, gmax, gtied = first_max(bgc)
    garg, gmax, gtied = garg[inv], gmax[inv], gtied[inv]
    mode = np.full(len(geoids), -1, dtype=np.int64)
    use_bg = ((bmax == 1) & (gmax > 1)) | (btied & ~gtied & (bmax > 1))
    mode[use_bg] = garg[use_bg]
    block_mode = ~use_bg & ~btied & (bmax > 1)
    mode[block_mode] = barg[block_mode]
    rest = np.flatnonzero(mode < 0)
    if rest.size:  # both maxima 1 or both tied: the tied block combination most common nationally
        tied = counts[rest] == bmax[rest, None]
        score = np.where(tied, national[None, :], -1)
        mode[rest] = score.argmax(axis=1)
    return mode


def proportional_guess(cum: np.ndarray, block: np.ndarray, draw: np.ndarray) -> np.ndarray:
    """Proportional guess: the combination whose cumulative count passes ``draw`` in its block
    (how many of the block's cumulative counts are <= ``draw``; ``draw`` < the block's total).
    One search in the blocks' rows laid end to end, each row lifted above the one before, not a
    records x combinations comparison (256 MB and 0.6 s for 250,000 records).

    >>> cum = np.array([[0, 2, 2, 5], [1, 1, 3, 3]])
    >>> proportional_guess(cum, np.array([0, 0, 0, 1, 1]), np.array([0, 2, 4, 0, 2])).tolist()
    [1, 3, 3, 0, 2]
    """
    lift = np.int64(cum[:, -1].max(initial=0)) + 1
    width = cum.shape[1]
    flat = (cum + np.arange(cum.shape[0], dtype=np.int64)[:, None] * lift).ravel()
    block = block.astype(np.int64)
    return np.searchsorted(flat, block * lift + draw, side="right") - block * width


def francis_majority(
    geoids: np.ndarray,
    published: np.ndarray,
    true_counts: np.ndarray,
    truth: Microdata,
    threshold: int = 5,
) -> pl.DataFrame:
    """Francis' majority-race inference scored per person: precision 0 when the true count of the
    published majority is below ``threshold``, else that count over the block total."""
    arg, _, _ = first_max(published)
    mc = true_counts[np.arange(len(geoids)), arg]
    n = true_counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where((mc >= threshold) & (n > 0), mc / np.maximum(n, 1), 0.0)
    b = truth.blocks_in(geoids)
    return pl.DataFrame({"block_geoid": truth.block_geoid.astype(str), "precision": prec[b]})


def precision_cdf(
    values: np.ndarray, grid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Share of persons whose precision is >= p, for p on ``grid`` (Francis Figure 1)."""
    grid = np.linspace(0, 1, 101) if grid is None else grid
    v = np.sort(np.asarray(values, dtype=float))
    share = 1.0 - np.searchsorted(v, grid, side="left") / max(v.size, 1)
    return grid, share
