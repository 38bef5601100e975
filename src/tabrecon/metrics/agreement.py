"""Agreement between two person files (Abowd et al. Algorithms 1-2), in the layout of their Table 3.

Records are matched one-to-one within each block, first on (sex, exact age, race, hispanic), then
the residuals on (sex, agebin38, race, hispanic) -- coarser where a file's ages are known only to
wider ranges (no P14 or PCT12: 10-14 and the other P12 bins under 22), see
:func:`common_resolution`. A greedy one-to-one pass on an equality key
matches exactly ``sum over keys of min(n_left, n_right)`` records whatever the order, so the counts
are computed that way, exactly and without ties to break. Records whose age is known only to its
bin (``age_exact = 0``, block-only reconstructions) take part only in the binned pass.

Rates are per cent of the LEFT file's population (the reference: truth, CEF or HDF).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ..geo import overlap
from ..io import beside, write_csv
from ..schema import (
    AGEBIN_OF_AGE,
    BLOCK_SIZE_LABELS,
    Microdata,
    age_label,
    range_classes,
    size_bin,
)


@dataclass
class Agreement:
    """Matched counts overall and by block-size bin (bins by the left file's block populations)."""

    population: int
    exact: int
    binned: int
    by_bin: pl.DataFrame  # bin, blocks, persons, exact, binned, exact_pct, binned_pct
    per_block: pl.DataFrame  # block_geoid, persons, exact, binned
    resolution: str = ""  # what the binned pass compares on (see common_resolution)

    @property
    def exact_pct(self) -> float:
        return 100.0 * self.exact / self.population if self.population else float("nan")

    @property
    def binned_pct(self) -> float:
        return 100.0 * self.binned / self.population if self.population else float("nan")

    def table3(self, pair: str = "right-left") -> pl.DataFrame:
        """One row in the layout of Abowd et al. Table 3: exact/binned overall and by block size."""
        row: dict[str, object] = {
            "pair": pair,
            "all": f"{self.exact_pct:.1f}/{self.binned_pct:.1f}",
        }
        for r in self.by_bin.iter_rows(named=True):
            row[r["bin"]] = f"{r['exact_pct']:.1f}/{r['binned_pct']:.1f}"
        return pl.DataFrame([row])

    def write(self, out: str | Path, pair: str = "right-left") -> list[Path]:
        """Write the Table 3 row (``out``, CSV) and the rows by block size
        (``<stem>_by_bin.csv``)."""
        out = Path(out)
        by_bin = beside(out, "_by_bin.csv")
        write_csv(self.table3(pair), out)
        write_csv(self.by_bin, by_bin)
        return [out, by_bin]


_AGE_SPAN = 128  # key = ((geo * 256 + base) * 128 + age); base = (sex * 64 + race) * 2 + hisp


def _exact_keys(md: Microdata, geo: np.ndarray) -> np.ndarray:
    base = (md.sex.astype(np.int64) * 64 + md.race) * 2 + md.hisp
    return (geo.astype(np.int64) * 256 + base) * _AGE_SPAN + md.age


def _to_binned(k: np.ndarray, starts: np.ndarray | None = None) -> np.ndarray:
    """Exact-age key -> binned key: age replaced by its agebin38 index, or with ``starts`` (age
    classes coarser than some bins) by the index of its class's first year -- the resolution both
    files have. SF1 age classes are unions of agebin38 bins or lie inside one, so this is the
    coarser of the two partitions."""
    a = k % _AGE_SPAN
    if starts is not None:
        a = starts[a]
    return (k // _AGE_SPAN) * _AGE_SPAN + AGEBIN_OF_AGE[a]


def common_resolution(left: Microdata, right: Microdata) -> tuple[np.ndarray | None, str]:
    """Age classes both files can be compared on, and how to say it: agebin38, or coarser where a
    file's ages are known only to ranges (``age_max``, e.g. P12's 10-14 without P14)."""
    plain = "sex, age bin (38 bins: single years under 22, then the P12 bins), race, ethnicity"
    starts = range_classes(left, right)
    if starts is None:
        return None, plain
    ends = starts + np.bincount(starts, minlength=starts.size)[starts] - 1
    wide = sorted(
        {
            (int(s), int(e))
            for s, e in zip(starts, ends, strict=True)
            if AGEBIN_OF_AGE[s] != AGEBIN_OF_AGE[e]
        }
    )
    if not wide:  # every range lies inside one bin: the bins are the common resolution
        return None, plain
    text = ", ".join(age_label(lo, hi) for lo, hi in wide)
    return (
        starts,
        f"sex, age bin coarsened to the ranges the tables determine ({text}), race, ethnicity",
    )


def _geo_of(k: np.ndarray) -> np.ndarray:
    return k // (_AGE_SPAN * 256)


def _warn_if_different(left: Microdata, right: Microdata, geoids: np.ndarray) -> None:
    nl = np.bincount(np.searchsorted(geoids, left.geoids)[left.block], minlength=geoids.size)
    nr = np.bincount(np.searchsorted(geoids, right.geoids)[right.block], minlength=geoids.size)
    lname, rname = left.source or "the reference", right.source or "the compared file"
    only_l, only_r = int(((nl > 0) & (nr == 0)).sum()), int(((nr > 0) & (nl == 0)).sum())
    differ = int(((nl > 0) & (nr > 0) & (nl != nr)).sum())
    if only_l or only_r or differ:
        warnings.warn(
            f"the files describe different populations: {only_l:,} inhabited block(s) only in "
            f"{lname}, {only_r:,} only in {rname}, {differ:,} block(s) with other totals "
            f"({len(left):,} vs {len(right):,} persons)",
            stacklevel=3,
        )


def agree(recon: Microdata, truth: Microdata, warn: bool = True) -> Agreement:
    """Match ``recon`` against ``truth`` (the reference, whose persons are counted) within blocks:
    exact age first, then age bin (the coarsest resolution both files know).

    Files of different geographies or block totals are compared all the same (the shortfall is
    disagreement), with a warning that gives the counts unless ``warn`` is False (a fit to noisy
    totals differs by design); files with no inhabited block in common are refused
    (:func:`tabrecon.geo.overlap`).

    >>> import tabrecon as tr
    >>> md = tr.synthesize(tr.SynthConfig(persons=200), seed=3)
    >>> tr.agree(md, truth=md).exact_pct
    100.0
    """
    left, right = truth, recon
    geoids = np.union1d(left.geoids, right.geoids)
    overlap(
        np.asarray(left.geoids)[np.unique(left.block)],
        np.asarray(right.geoids)[np.unique(right.block)],
        left.source or "the reference",
        right.source or "the compared file",
    )
    if warn:
        _warn_if_different(left, right, geoids)
    kl = _exact_keys(left, np.searchsorted(geoids, left.geoids)[left.block])
    kr = _exact_keys(right, np.searchsorted(geoids, right.geoids)[right.block])
    l_ok = np.ones(len(left), bool) if left.age_exact is None else left.age_exact.astype(bool)
    r_ok = np.ones(len(right), bool) if right.age_exact is None else right.age_exact.astype(bool)
    # pass 1: exact age, among records whose age is exact
    ukl, cl = np.unique(kl[l_ok], return_counts=True)
    ukr, cr = np.unique(kr[r_ok], return_counts=True)
    common, il, ir = np.intersect1d(ukl, ukr, assume_unique=True, return_indices=True)
    m1 = np.minimum(cl[il], cr[ir])
    # pass 2: residuals on the binned key
    starts, resolution = common_resolution(left, right)
    ubl, cbl = np.unique(_to_binned(kl, starts), return_counts=True)
    ubr, cbr = np.unique(_to_binned(kr, starts), return_counts=True)
    mk = _to_binned(common, starts)
    np.subtract.at(cbl, np.searchsorted(ubl, mk), m1)
    np.subtract.at(cbr, np.searchsorted(ubr, mk), m1)
    bcommon, jl, jr = np.intersect1d(ubl, ubr, assume_unique=True, return_indices=True)
    m2 = np.minimum(cbl[jl], cbr[jr])
    lg = _geo_of(kl)
    nG = len(geoids)
    exact_b = np.bincount(_geo_of(common), weights=m1, minlength=nG).astype(np.int64)
    m2_b = np.bincount(_geo_of(bcommon), weights=m2, minlength=nG).astype(np.int64)
    pop_b = np.bincount(lg, minlength=nG)
    binned_b = exact_b + m2_b
    sb = size_bin(pop_b)
    rows = []
    for i, lab in enumerate(BLOCK_SIZE_LABELS):
        m = sb == i
        p = int(pop_b[m].sum())
        e, b = int(exact_b[m].sum()), int(binned_b[m].sum())
        rows.append(
            {
                "bin": lab,
                "blocks": int(m.sum()),
                "persons": p,
                "exact": e,
                "binned": b,
                "exact_pct": 100.0 * e / p if p else float("nan"),
                "binned_pct": 100.0 * b / p if p else float("nan"),
            }
        )
    per_block = pl.DataFrame(
        {"block_geoid": geoids, "persons": pop_b, "exact": exact_b, "binned": binned_b}
    )
    return Agreement(
        int(pop_b.sum()),
        int(exact_b.sum()),
        int(binned_b.sum()),
        pl.DataFrame(rows),
        per_block,
        resolution,
    )
