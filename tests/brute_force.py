"""What the brute-force tests share: checking a verified claim against every enumerated
population (histograms over a schema's feasible types), and how many random releases each
draws."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import HealthCheck, settings

from tabrecon.schema.spec import Schema, Units


def histogram(units: Units) -> np.ndarray:
    """Records per feasible type of their schema (one block's population, as enumerated)."""
    feas = units.schema.feasible_types()
    return np.bincount(np.searchsorted(feas, units.types), minlength=feas.size).astype(np.int64)


def claims_hold_in_every(schema: Schema, claims: pl.DataFrame, sols: np.ndarray) -> None:
    """Each claim ("exactly m records have these values") holds in every population of
    ``sols`` (rows: counts per feasible type)."""
    codes = schema.decode(schema.feasible_types())
    for claim in claims.iter_rows(named=True):
        want = dict(p.split("=", 1) for p in claim["values"].split("; "))
        match = np.ones(sols.shape[1], dtype=bool)
        for col, label in want.items():
            att = schema.attribute(col)
            match &= codes[col] == att.codes[att.labels.index(label)]
        assert (sols[:, match].sum(axis=1) == claim["m"]).all(), claim


def releases(n: int):
    """Hypothesis settings of a brute-force test: ``n`` examples, the same ones every run (a
    failure repeats), no deadline (a solve may take a second on a loaded machine)."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        derandomize=True,
    )
