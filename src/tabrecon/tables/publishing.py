"""A release of true tables as a publication rule publishes it: each count rounded or withheld
by its table's rule (:mod:`tabrecon.tables.publication`), further cells withheld where the rule
asks for complementary suppression (:mod:`tabrecon.tables.suppression`), and each median or mean
withheld with the count of its universe unless the rule publishes them always; and the check
that a release read from a file keeps that rule for its medians and means."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..errors import InputError, TabreconError
from .consistency import identities_of
from .measures import WITHHELD
from .publication import MISSING, Publication
from .spec import cell_tables, statistic_counts, statistic_decimals
from .suppression import complementary

if TYPE_CHECKING:
    from ..schema.registry import Population


def publish_counts(
    long: pl.DataFrame, pop: Population, publication: Publication, seed: int = 0
) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """A release of true tables as ``publication`` publishes it: each count rounded or withheld
    (null) by its table's rule, random rounding seeded; a median or a mean is published as its
    table declares, but withheld (null) with its universe's count where the rule withholds that
    (:func:`statistic_counts`: one person's median age is their age). Returns the release and
    the counts' true and published values (:data:`~tabrecon.tables.publication.MISSING` where
    withheld), in the release's order of counts.

    >>> from tabrecon.schema.registry import population
    >>> from tabrecon.tables.publication import Publication
    >>> t = pl.DataFrame({"geoid": ["1" * 15] * 2, "cell": ["P0420001", "P0420002"],
    ...                   "value": [4, 2]})
    >>> out, true, shown = publish_counts(t, population("group_quarters"),
    ...                                   Publication.parse("round:3"))
    >>> out["value"].to_list(), shown.tolist()
    ([3, 3], [3, 3])
    """
    counted = ~long["cell"].is_in(list(statistic_decimals(pop))).to_numpy()
    of = cell_tables(pop)
    true = long["value"].fill_null(MISSING).to_numpy().astype(np.int64)
    tables = [of.get(c, "") for c in long["cell"].filter(pl.Series(counted)).to_list()]
    shown = publication.publish(true[counted], np.random.default_rng(seed), tables)
    if publication.complementary:  # further cells, so that none withheld is given away
        kept = long.filter(pl.Series(counted))
        shown = complementary(
            geoids=kept["geoid"].to_list(),
            cells=kept["cell"].to_list(),
            true=true[counted],
            shown=shown,
            identities=[(i.lhs, i.rhs) for i in identities_of(pop)],
        )
    values = true.copy()
    values[counted] = shown
    if publication.withholds_statistics and (~counted).any():
        values[~counted] = _with_their_counts(
            long, pop=pop, publication=publication, values=values, counted=counted
        )
    out = long.with_columns(pl.Series("value", values).replace(MISSING, None))
    return out, true[counted], shown


def refuse_statistics_of_withheld_counts(
    long: pl.DataFrame, pop: Population, publication: Publication, where: str = ""
) -> None:
    """Refuse a release (geoid, cell, value; null: withheld) that publishes a median or mean
    whose universe's count it withholds, naming the geounit and both cells: a rule that
    withholds counts withholds their statistics with them (:func:`publish_counts`), so such a
    value contradicts the declared rule (and may be one person's age)."""
    of = statistic_counts(pop)
    if not publication.withholds_statistics or not of:
        return
    stats = long.filter(pl.col("cell").is_in(list(of)) & pl.col("value").is_not_null())
    if not stats.height:
        return
    count_of = _counts_held(long, of)
    pairs = pl.DataFrame({"cell": list(count_of), "count": list(count_of.values())})
    counts = long.select("geoid", pl.col("cell").alias("count"), pl.col("value").alias("n"))
    got = stats.join(pairs, on="cell").join(counts, on=["geoid", "count"], how="inner")
    bad = got.filter(pl.col("n").is_null())
    if bad.height:
        r = bad.row(0, named=True)
        raise InputError(
            f"{pop.schema.geography} {r['geoid']}, cell {r['cell']}: a median or mean published "
            f"where the count of its universe ({r['count']}) is withheld; under publication "
            f"{publication} it is withheld with its count"
            + (f" ({bad.height - 1} more such cells)" if bad.height > 1 else ""),
            path=where,
        )


def _counts_held(long: pl.DataFrame, of: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Each statistic's universe count (:func:`statistic_counts`) as the release ``long`` holds
    it: the first of the same-universe count cells it has a row of (else the first declared)."""
    present = set(long["cell"].unique().to_list())
    return {c: next((k for k in ks if k in present), ks[0]) for c, ks in of.items()}


def _with_their_counts(
    long: pl.DataFrame,
    *,
    pop: Population,
    publication: Publication,
    values: np.ndarray,
    counted: np.ndarray,
) -> np.ndarray:
    """The statistics of ``long`` (the rows not ``counted``), each withheld where the count
    of its universe at its geounit is, as published in ``values``. Under a rule that withholds
    counts, a statistic whose universe count no declared cell gives is refused: whether to
    withhold it cannot be told."""
    of = statistic_counts(pop)
    stat_rows = np.flatnonzero(~counted)
    cells = long["cell"].to_numpy()[stat_rows]
    lacking = sorted({str(c) for c in cells} - set(of))
    if lacking:
        raise TabreconError(
            f"publication {publication}: no count of the universe of {', '.join(lacking[:3])} "
            "is declared, so whether to withhold it with its count cannot be told"
        )
    count_of = _counts_held(long, of)
    key = pl.DataFrame({"geoid": long["geoid"], "cell": long["cell"], "v": values})
    want = pl.DataFrame(
        {"geoid": long["geoid"].to_numpy()[stat_rows], "cell": [count_of[str(c)] for c in cells]}
    )
    got = want.join(key, on=["geoid", "cell"], how="left", maintain_order="left")["v"]
    if got.null_count():
        i = int(np.argmax(got.is_null().to_numpy()))
        raise TabreconError(
            f"publication {publication}: {cells[i]} is withheld with its universe's count, "
            f"{want['cell'][i]}, which the release does not hold (for {want['geoid'][i]}): "
            "publish its table too"
        )
    count_withheld = (got == MISSING).to_numpy()
    return np.where(count_withheld, WITHHELD, values[stat_rows])
