"""Accuracy of a protected release against the truth: block totals, race x ethnicity counts by block
size, and whether the block majority (Francis' inference) survives."""

from __future__ import annotations

import numpy as np
import polars as pl

from ..attacks.reidentify import _counts_from_records, _first_max
from ..schema import BLOCK_SIZE_LABELS, Microdata, size_bin


def block_accuracy(truth: Microdata, protected: Microdata, threshold: int = 5) -> pl.DataFrame:
    """Per block-size bin (true population) and overall: mean absolute error of block totals, mean
    L1 error of the 126 race x ethnicity counts, and the share of blocks whose majority race x
    ethnicity (with at least ``threshold`` persons, Francis; ``majority_blocks`` of them) is the
    same in the protected release."""
    geo = np.union1d(truth.geoids, protected.geoids)
    t = _counts_from_records(truth, geo)
    p = _counts_from_records(protected, geo)
    tt, pt = t.sum(axis=1), p.sum(axis=1)
    targ, tmax, _ = _first_max(t)
    parg, _, _ = _first_max(p)
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
