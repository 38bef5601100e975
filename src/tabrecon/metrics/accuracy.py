"""Accuracy of a protected release against the truth: block totals, race x ethnicity counts by block
size, and whether the block majority (Francis' inference) survives."""

from __future__ import annotations

import numpy as np
import polars as pl

from ..geo import LEVELS, prefix
from ..schema import BLOCK_SIZE_LABELS, N_TYPES, Microdata, combo_counts, first_max, size_bin


def block_accuracy(truth: Microdata, protected: Microdata, threshold: int = 5) -> pl.DataFrame:
    """Per block-size bin (true population) and overall: mean absolute error of block totals, mean
    L1 error of the 126 race x ethnicity counts, and the share of blocks whose majority race x
    ethnicity (with at least ``threshold`` persons, Francis; ``majority_blocks`` of them) is the
    same in the protected release."""
    geo = np.union1d(truth.geoids, protected.geoids)
    t = combo_counts(truth, geo)
    p = combo_counts(protected, geo)
    tt, pt = t.sum(axis=1), p.sum(axis=1)
    targ, tmax, _ = first_max(t)
    parg, _, _ = first_max(p)
    sb = size_bin(tt)
    rows = []
    for i, lab in [(-2, "all")] + list(enumerate(BLOCK_SIZE_LABELS)):
        m = (tt > 0) if i == -2 else (sb == i)
        n = int(m.sum())
        big = m & (tmax >= threshold)
        rows.append(
            {
                "bin": lab,
                "blocks": n,
                "majority_blocks": int(big.sum()),
                "mae_block_total": float(np.abs(pt[m] - tt[m]).mean()) if n else None,
                "mean_l1_race_eth": float(np.abs(p[m] - t[m]).sum(axis=1).mean()) if n else None,
                "majority_kept_pct": float(100 * (parg[big] == targ[big]).mean())
                if big.any()
                else None,
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            "mae_block_total": pl.Float64,
            "mean_l1_race_eth": pl.Float64,
            "majority_kept_pct": pl.Float64,
        },
    )


def block_cell_sq_error(truth: Microdata, protected: Microdata) -> tuple[float, int]:
    """Sum of squared errors of every block-level cell of the 34 tables (the 844 cells published
    per block) over the blocks of either file, and the number of (block, cell) values compared:
    the measured counterpart of the matrix mechanism's expected error
    (:mod:`tabrecon.metrics.matrix_error`)."""
    import scipy.sparse as sp

    from ..tables.persons import BLOCK_TABLES, TABLES_BY_NAME, cell_index, weight_matrix

    geo = np.union1d(truth.geoids, protected.geoids)
    idx = cell_index()
    cols = [idx[c.id] for t in BLOCK_TABLES for c in TABLES_BY_NAME[t].cells()]
    W = weight_matrix()[:, cols].astype(np.float64)

    def hist(md: Microdata) -> sp.csr_matrix:
        g = np.searchsorted(geo, md.geoids)[md.block]
        return sp.csr_matrix((np.ones(len(md)), (g, md.types)), shape=(geo.size, N_TYPES))

    diff = (hist(protected) - hist(truth)) @ W
    return float(diff.multiply(diff).sum()), int(geo.size * len(cols))


def l1_by_level(truth: Microdata, protected: Microdata) -> dict[str, float]:
    """L1 distance of the person histograms (geounit x type) at every level below the nation."""
    out = {}
    for lv in LEVELS[1:]:
        p1 = prefix(truth.geoids, lv)[truth.block]
        p2 = prefix(protected.geoids, lv)[protected.block]
        geo = np.union1d(p1, p2)
        k1 = np.searchsorted(geo, p1).astype(np.int64) * N_TYPES + truth.types
        k2 = np.searchsorted(geo, p2).astype(np.int64) * N_TYPES + protected.types
        u, inv = np.unique(np.concatenate([k1, k2]), return_inverse=True)
        a = np.bincount(inv[: k1.size], minlength=u.size)
        b = np.bincount(inv[k1.size :], minlength=u.size)
        out[lv] = float(np.abs(a - b).sum())
    return out


def tvd_by_level(truth: Microdata, protected: Microdata) -> dict[str, float]:
    """TVD accuracy 1 - L1 / (2 pop) of the person histogram at every level (JASON section 6.1)."""
    return {lv: 1.0 - l1 / (2.0 * len(truth)) for lv, l1 in l1_by_level(truth, protected).items()}
