"""The attacker's data in the reidentification study (:mod:`tabrecon.attacks.reidentify`): records
of (pik, block, sex, age) simulated from the truth under an error model of commercial data
(:class:`CommercialErrors`; presets ``perfect``, ``commercial``, ``commercial-2010``) or read
from a file and checked (:func:`validate_attacker`: every problem named, the rows kept said).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..schema import (
    AGE_MAX,
    Microdata,
)


# --------------------------------------------------------------------------------------------------
# Attacker data
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommercialErrors:
    """Error model of commercial attacker data.

    The defaults (the ``commercial`` preset) were sized by hand to the Bureau's COMRCL file's
    putative rate (289M records for 309M persons, 57% putatively linked: Abowd et al. Table 4);
    its precision is far above the Bureau's (on the real sample 83.5% for the reconstruction
    against their 41.2%), so figures under ``commercial`` overstate the risk.
    :data:`COMMERCIAL_2010` is fitted to the Bureau's rates (see its docstring).
    """

    coverage: float = 0.85  # share of persons the vendor has
    age_off_by_one: float = 0.30  # share of covered records with age +-1
    wrong_block: float = 0.35  # share placed in another block of the same tract (stale addresses)
    duplicates: float = 0.03  # share duplicated (same pik, possibly another block)
    extras: float = 0.10  # records of nobody in the truth, as a share of covered persons
    age_far: float = 0.0  # share of covered records whose age is off by 2 to age_far_span years
    sex_error: float = 0.0  # share of covered records with the other sex
    age_far_span: int = 10
    #: stale addresses and records of nobody land in blocks drawn with weight population ^ this
    #: (1: in proportion to population, as addresses are housing units; 0: every block alike)
    address_weight: float = 1.0

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if k == "age_far_span":
                if not 2 <= v <= AGE_MAX:
                    raise TabreconError(f"age_far_span must be in 2..{AGE_MAX} (got {v})")
                continue
            if k == "address_weight":
                if not 0.0 <= v <= 2.0:
                    raise TabreconError(f"address_weight must be in [0, 2] (got {v})")
                continue
            if not 0.0 <= v <= 1.0:
                raise TabreconError(f"commercial error rate {k} must be in [0, 1] (got {v})")
        if self.age_off_by_one + self.age_far > 1:
            raise TabreconError("age_off_by_one + age_far must not exceed 1")


#: ``commercial-2010``: the error process fitted by ``python -m benchmarks.bench_attacker``
#: (2026-11-25; ``SynthConfig.reid_2010`` populations -- the 2010 national block-size mix, small
#: blocks homogeneous, on which the perfect attacker reproduces CEF_atkr -- released through
#: ``swap-2010`` and reconstructed at block+tract; 240 Nelder-Mead evaluations on 200,034
#: persons) to what the Bureau's COMRCL did relative to its perfect attacker (Abowd et al. Tables
#: 4-5). On 1,000,139 persons it gives putative 57.6% (Bureau 57.5), precision 41.4% for the
#: reconstruction (41.2) and 48.5% for the truth (49.4), 0.936 records per person (0.937), and
#: nonmodal precision within 3.2 points of COMRCL's in every block-size bin up to 500-999; the
#: README has the fit by block size and its residuals.
COMMERCIAL_2010 = CommercialErrors(
    coverage=0.8532,
    age_off_by_one=0.0710,
    wrong_block=0.5994,
    duplicates=0.03,
    extras=0.0676,
    age_far=0.0244,
    sex_error=0.0144,
    address_weight=0.3172,
)


#: Attacker presets: the Bureau's CEF_atkr (``perfect``), the hand-sized ``commercial`` and the
#: fitted ``commercial-2010``.
ATTACKER_PRESETS = ("perfect", "commercial", "commercial-2010")


#: Where each preset's error rates come from (shown wherever results are reported).
ATTACKER_SOURCES = {
    "perfect": "every person exactly, as the Bureau's CEF_atkr",
    "commercial": "error rates sized by hand to COMRCL's putative rate; overstates precision "
    "(83.5% on the real sample against the Bureau's 41.2%)",
    "commercial-2010": "error rates fitted to the Bureau's COMRCL rates relative to CEF_atkr, "
    "on synthetic counties where the perfect attacker reproduces CEF_atkr (Abowd et al. Tables "
    "4-5; python -m benchmarks.bench_attacker)",
}


def person_ids(truth: Microdata) -> np.ndarray:
    if truth.extra is not None and "pik" in truth.extra.columns:
        ids = truth.extra["pik"].cast(pl.String).to_numpy()
        if len(np.unique(ids)) != len(ids):
            raise InputError("pik column of the truth file has duplicate ids", path=truth.source)
        return ids.astype(str)
    return np.char.add("p", np.arange(len(truth)).astype(str))


def simulate_attacker(
    truth: Microdata, preset: str = "perfect", seed: int = 0, errors: CommercialErrors | None = None
) -> pl.DataFrame:
    """What an attacker knows of the truth: pik, block_geoid, sex (male/female), age. Seeded."""
    rng = np.random.default_rng(seed)
    ids = person_ids(truth)
    sex = np.array(["male", "female"])[truth.sex]
    if preset == "perfect":
        return pl.DataFrame(
            {
                "pik": ids,
                "block_geoid": truth.block_geoid.astype(str),
                "sex": sex,
                "age": truth.age.astype(np.int64),
            }
        )
    if preset not in ATTACKER_PRESETS:
        raise TabreconError(
            f"unknown attacker preset {preset!r}; choose {', '.join(ATTACKER_PRESETS)}"
        )
    e = errors or (COMMERCIAL_2010 if preset == "commercial-2010" else CommercialErrors())
    n = len(truth)
    keep = np.flatnonzero(rng.random(n) < e.coverage)
    blk = truth.block[keep].copy()
    age = truth.age[keep].astype(np.int64)
    sx = truth.sex[keep].astype(np.int64)
    u = rng.random(keep.size)
    off = u < e.age_off_by_one
    age[off] = np.clip(age[off] + rng.choice([-1, 1], size=off.sum()), 0, AGE_MAX)
    far = (u >= e.age_off_by_one) & (u < e.age_off_by_one + e.age_far)
    shift = rng.integers(2, e.age_far_span + 1, size=far.sum()) * rng.choice([-1, 1], far.sum())
    age[far] = np.clip(age[far] + shift, 0, AGE_MAX)
    flip = rng.random(keep.size) < e.sex_error
    sx[flip] = 1 - sx[flip]
    # wrong block (a stale address): a block of the same tract drawn with weight population ^
    # address_weight -- an address is a housing unit, so populous blocks hold more of them
    # (drawing blocks alike sends most stale records to near-empty blocks, where they link to
    # nobody)
    tract = prefix(truth.geoids, "tract")  # sorted geoids: a tract's blocks are contiguous
    move = np.flatnonzero(rng.random(keep.size) < e.wrong_block)
    pop = np.bincount(truth.block, minlength=len(truth.geoids)).astype(float)
    cum = np.cumsum(np.where(pop > 0, pop, 0.0) ** e.address_weight)
    start = np.searchsorted(tract, tract[blk[move]])
    end = np.searchsorted(tract, tract[blk[move]], side="right")
    lo = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
    target = lo + rng.random(move.size) * (cum[end - 1] - lo)
    blk[move] = np.minimum(np.searchsorted(cum, target, side="right"), end - 1)
    rows = {"pik": ids[keep], "block": blk, "sex": sx, "age": age}
    dup = np.flatnonzero(rng.random(keep.size) < e.duplicates)
    n_extra = int(round(e.extras * keep.size))
    # records of nobody sit at real addresses too: blocks in proportion to population
    xb = np.minimum(np.searchsorted(cum, rng.random(n_extra) * cum[-1], side="right"), len(cum) - 1)
    cols = {
        "pik": np.concatenate(
            [rows["pik"], rows["pik"][dup], np.char.add("x", np.arange(n_extra).astype(str))]
        ),
        "block": np.concatenate([rows["block"], rows["block"][dup], xb]),
        "sex": np.concatenate([rows["sex"], rows["sex"][dup], rng.integers(0, 2, size=n_extra)]),
        "age": np.concatenate(
            [
                rows["age"],
                np.clip(rows["age"][dup] + rng.integers(-1, 2, size=dup.size), 0, AGE_MAX),
                truth.age[rng.integers(0, n, size=n_extra)],
            ]
        ),
    }
    perm = rng.permutation(cols["pik"].size)
    return pl.DataFrame(
        {
            "pik": cols["pik"][perm].astype(str),
            "block_geoid": truth.geoids[cols["block"][perm]].astype(str),
            "sex": np.array(["male", "female"])[cols["sex"][perm]],
            "age": cols["age"][perm].astype(np.int64),
        }
    )


@dataclass
class AttackerReport:
    """What was wrong with an attacker file: counted and reported, never silently dropped."""

    records: int
    unknown_block: int = 0
    duplicate_ids: int = 0
    bad_age: int = 0
    bad_sex: int = 0
    examples: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for k, what in (
            ("unknown_block", "in blocks the release does not have (cannot be linked)"),
            (
                "duplicate_ids",
                "share a pik with another record (all kept; a person is confirmed once)",
            ),
            ("bad_age", "have an age outside 0-110 or not a whole number (excluded)"),
            ("bad_sex", "have a sex other than male/female (excluded)"),
        ):
            v = getattr(self, k)
            if v:
                out.append(f"{v:,} attacker record(s) {what}")
        return out + self.examples


def read_attacker(path: str | Path) -> pl.DataFrame:
    """Read an attacker file (CSV/Parquet with pik, block_geoid, sex, age); errors name file and
    line."""
    from ..io import read_text_frame, require_columns

    p = str(path)
    df = read_text_frame(p)
    require_columns(p, df.columns, ("pik", "block_geoid", "sex", "age"), "an attacker file")
    if df.height == 0:
        raise InputError("no attacker records", path=p)
    return df.select(
        pl.col("pik").str.strip_chars(),
        pl.col("block_geoid").str.strip_chars(),
        pl.col("sex").str.strip_chars().str.to_lowercase(),
        pl.col("age").str.strip_chars(),
    )


def validate_attacker(
    att: pl.DataFrame, known_blocks: np.ndarray, path: str = "attacker"
) -> tuple[pl.DataFrame, AttackerReport]:
    """Clean an attacker frame: bad ages/sexes excluded, unknown blocks and duplicate ids
    counted."""
    att = att.with_row_index("_line", offset=2)
    # (checked in polars: as numpy strings these took 0.8 s for 1,000,096 records)
    age = att["age"]
    age = (
        age.cast(pl.Float64)
        if age.dtype.is_integer()
        else age.cast(pl.String).cast(pl.Float64, strict=False)
    )
    bad_age = (
        (age.is_null() | (age < 0) | (age > AGE_MAX) | (age.round() != age))
        .fill_null(True)
        .to_numpy()
    )
    bad_sex = (~att["sex"].cast(pl.String).is_in(["male", "female"])).fill_null(True).to_numpy()
    rep = AttackerReport(att.height, bad_age=int(bad_age.sum()), bad_sex=int(bad_sex.sum()))
    for mask, what, col in (
        (bad_age, "age outside 0-110", "age"),
        (bad_sex, "sex not male/female", "sex"),
    ):
        if mask.any():
            r = int(np.flatnonzero(mask)[0])
            rep.examples.append(
                f"{path}, line {att['_line'][r]}, column {col!r}: {what} (got {att[col][r]!r})"
            )
    ok = ~(bad_age | bad_sex)
    if att.height and not ok.any():  # nothing left to link: a bad file, not an empty result
        raise InputError(
            f"every attacker record is invalid ({att.height:,}); first: {rep.examples[0]}",
            path=path,
        )
    att = att.filter(pl.Series(ok)).with_columns(pl.col("age").cast(pl.Float64).cast(pl.Int64))
    known = pl.Series(np.asarray(known_blocks, dtype=str), dtype=pl.String).implode()
    unknown = (~att["block_geoid"].cast(pl.String).is_in(known)).fill_null(True).to_numpy()
    rep.unknown_block = int(unknown.sum())
    if unknown.any():
        r = int(np.flatnonzero(unknown)[0])
        rep.examples.append(
            f"{path}, line {att['_line'][r]}: block {att['block_geoid'][r]!r} is not in the release"
        )
    rep.duplicate_ids = int(att["pik"].is_duplicated().sum())
    return att.drop("_line"), rep
