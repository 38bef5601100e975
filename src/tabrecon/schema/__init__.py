"""The person schema: attributes, their encodings, derived fields, and reading/writing person files.

A person is (block, sex, age, six OMB race flags, hispanic). Everything downstream works on a
compact integer encoding of that record:

* ``race`` is the SF1 race code 1..63 (order of P8's leaves: by number of races, then OMB order);
* a *type* is ``((sex * 111 + age) * 63 + race - 1) * 2 + hispanic`` -- one of :data:`N_TYPES`
  = 27,972 cells of the histogram sex x age x race x hispanic that every table cell is a predicate
  on.

Person files are CSV (plain or gzip) or Parquet in exactly the layout of the Census Bureau's
released reconstruction ``census2010_rhdf_28tracts.csv.gz``; extra columns (e.g. ``bsab_unique``,
``household_id``) are carried through untouched.

The same schema as data is :data:`PERSONS`, a value of :class:`tabrecon.schema.spec.Schema` whose
type encoding is exactly :func:`encode_types`'s; the housing unit is another value
(:data:`tabrecon.schema.catalog.HOUSING_UNITS`); :mod:`tabrecon.schema.registry` names every
population users choose with ``--schema``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError, TabreconError
from ..geo import prefix
from ..io import check_readable, read_error, read_rows, require_columns, scan_text, write_frame
from .spec import Attribute, AttributePosition, ClaimColumn, Schema, Units, refuse_rows

RACES: tuple[str, ...] = ("white", "black", "aian", "asian", "nhpi", "sor")
RACE_LABELS: dict[str, str] = {
    "white": "White",
    "black": "Black or African American",
    "aian": "American Indian and Alaska Native",
    "asian": "Asian",
    "nhpi": "Native Hawaiian and Other Pacific Islander",
    "sor": "Some Other Race",
}
SEXES: tuple[str, ...] = ("male", "female")
AGE_MAX = 110
N_AGES = AGE_MAX + 1
N_RACES = 63
N_TYPES = 2 * N_AGES * N_RACES * 2

#: The 63 race combinations in SF1 order, each a tuple of race indices (0 = white ... 5 = sor).
RACE_COMBOS: tuple[tuple[int, ...], ...] = tuple(
    c for k in range(1, 7) for c in itertools.combinations(range(6), k)
)
#: bitmask (bit i = RACES[i]) of each race code, indexed by code - 1.
RACE_BITS = np.array([sum(1 << i for i in c) for c in RACE_COMBOS], dtype=np.int16)
#: number of races of each code, indexed by code - 1.
RACE_COUNT = np.array([len(c) for c in RACE_COMBOS], dtype=np.int8)
#: race code (1..63) for each bitmask 0..63; 0 for the empty mask (invalid).
CODE_OF_BITS = np.zeros(64, dtype=np.int8)
CODE_OF_BITS[RACE_BITS] = np.arange(1, N_RACES + 1, dtype=np.int8)

#: The 38 block-level age bins: single years 0..21, then the P12 bins from 22-24 upward.
_AGEBIN_EDGES: tuple[tuple[int, int], ...] = tuple((a, a) for a in range(22)) + (
    (22, 24),
    (25, 29),
    (30, 34),
    (35, 39),
    (40, 44),
    (45, 49),
    (50, 54),
    (55, 59),
    (60, 61),
    (62, 64),
    (65, 66),
    (67, 69),
    (70, 74),
    (75, 79),
    (80, 84),
    (85, AGE_MAX),
)
AGEBIN38: tuple[tuple[int, int], ...] = _AGEBIN_EDGES


def age_classes(ranges: Iterable[tuple[int, int]]) -> np.ndarray:
    """Start age of the class of every age 0..110: the coarsest partition the age ranges can tell
    apart (the ranges of published cells, or of records known only to a range)."""
    cuts = {0}
    for lo, hi in ranges:
        cuts.add(int(lo))
        if hi < AGE_MAX:
            cuts.add(int(hi) + 1)
    starts = np.array(sorted(cuts))
    return starts[np.searchsorted(starts, np.arange(N_AGES), side="right") - 1]


def range_classes(*files: Microdata) -> np.ndarray | None:
    """Start of each age's class (0..110) for comparing files some of whose ages are known only
    to ranges (``age_max``): an age inside such a range gets the range's first year, every other
    age its own; None when every age is a single year. Combined
    with agebin38 (``AGEBIN_OF_AGE[starts[age]]``) it is the coarser of the two partitions, since
    SF1 age classes are unions of agebin38 bins or lie inside one."""
    seen = np.zeros(N_AGES * N_AGES, dtype=bool)  # (age, age_max) pairs present, by a count
    for md in files:  # (np.unique over rows costs 0.5 s on 250,000 records)
        if md.age_max is not None:
            pair = md.age_first.astype(np.int64) * N_AGES + md.age_max.astype(np.int64)
            seen |= np.bincount(pair, minlength=N_AGES * N_AGES).astype(bool)
    lo_, hi_ = np.divmod(np.flatnonzero(seen), N_AGES)
    ranges = [(int(lo), int(hi)) for lo, hi in zip(lo_, hi_, strict=True) if hi > lo]
    if not ranges:
        return None
    starts = np.arange(N_AGES)  # every other age keeps its own class
    cur_lo, cur_hi = ranges[0]
    for lo, hi in [*ranges[1:], (N_AGES, N_AGES)]:  # merge overlapping ranges, then assign
        if lo <= cur_hi:
            cur_hi = max(cur_hi, hi)
            continue
        starts[cur_lo : cur_hi + 1] = cur_lo
        cur_lo, cur_hi = lo, hi
    return starts


def age_labels(age: np.ndarray, age_max: np.ndarray | None = None) -> np.ndarray:
    """Each age's agebin38 label, or the label of its range (``age`` to ``age_max``) where the
    range crosses a bin (``10-14``, ``18+``)."""
    labels = np.array(AGEBIN38_LABELS)[AGEBIN_OF_AGE[age]]
    if age_max is None:
        return labels
    lo, hi = np.asarray(age, np.int64), np.asarray(age_max, np.int64)
    out = labels.astype(object)
    for i in np.flatnonzero(AGEBIN_OF_AGE[hi] != AGEBIN_OF_AGE[lo]):  # ranges across bins
        out[i] = age_label(int(lo[i]), int(hi[i]))
    return out.astype(str)


def age_label(lo: int, hi: int) -> str:
    """``10``, ``10-14``, ``85+`` (``hi`` = 110), ``any age`` (0 to 110)."""
    if lo == hi:
        return str(lo)
    if hi == AGE_MAX:
        return "any age" if lo == 0 else f"{lo}+"
    return f"{lo}-{hi}"


AGEBIN38_LABELS: tuple[str, ...] = tuple(
    str(lo) if lo == hi else (f"{lo}+" if hi == AGE_MAX else f"{lo}-{hi}") for lo, hi in AGEBIN38
)
#: agebin38 index (0..37) of each single age 0..110.
AGEBIN_OF_AGE = np.zeros(N_AGES, dtype=np.int8)
for _i, (_lo, _hi) in enumerate(AGEBIN38):
    AGEBIN_OF_AGE[_lo : _hi + 1] = _i
AGEBIN_START = np.array([lo for lo, _ in AGEBIN38], dtype=np.int16)

#: The 23 P12 age bins.
P12_BINS: tuple[tuple[int, int], ...] = (
    (0, 4),
    (5, 9),
    (10, 14),
    (15, 17),
    (18, 19),
    (20, 20),
    (21, 21),
) + _AGEBIN_EDGES[22:]

BLOCK_SIZE_BINS: tuple[tuple[int, int], ...] = (
    (1, 9),
    (10, 49),
    (50, 99),
    (100, 249),
    (250, 499),
    (500, 999),
    (1000, 10**9),
)
BLOCK_SIZE_LABELS = ("1-9", "10-49", "50-99", "100-249", "250-499", "500-999", "1000+")

BASE_COLUMNS = ("block_geoid", "sex", "age", "agebin", *RACES, "hispanic")
REQUIRED_COLUMNS = ("block_geoid", "sex", "age", *RACES, "hispanic")


def encode_types(
    sex: np.ndarray, age: np.ndarray, race: np.ndarray, hisp: np.ndarray
) -> np.ndarray:
    """Type index of each person (see module docstring). ``race`` is the 1..63 code."""
    return (
        (sex.astype(np.int64) * N_AGES + age.astype(np.int64)) * N_RACES + race.astype(np.int64) - 1
    ) * 2 + hisp.astype(np.int64)


def decode_types(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`encode_types`: (sex, age, race code, hispanic)."""
    t = np.asarray(t, dtype=np.int64)
    hisp = t % 2
    rest = t // 2
    race = rest % N_RACES + 1
    rest //= N_RACES
    age = rest % N_AGES
    sex = rest // N_AGES
    return sex.astype(np.int8), age.astype(np.int16), race.astype(np.int8), hisp.astype(np.int8)


@dataclass(frozen=True)
class _AgeBin:
    """A person type's agebin38 from its age position (single years, or already the bin)."""

    binned: bool

    def __call__(self, pos: np.ndarray) -> np.ndarray:
        return pos[:, 1] if self.binned else AGEBIN_OF_AGE[pos[:, 1]].astype(np.int64)


@dataclass(frozen=True)
class _RaceFlag:
    """Whether a person type's race combination includes race ``r`` (0 = white .. 5 = sor)."""

    r: int

    def __call__(self, pos: np.ndarray) -> np.ndarray:
        return ((RACE_BITS[pos[:, 2]] >> self.r) & 1).astype(np.int64)


def person_claim_columns(binned: bool) -> tuple[ClaimColumn, ...]:
    """The columns person claims are stated over (Liu et al.'s nine): sex, agebin38, Hispanic
    origin and one flag per race, so that "exactly 1 person: female, age 25-29, black" is a
    claim over three columns whatever the person's other races. Each label is the value's
    words in a claim."""
    return (
        ClaimColumn("sex", ("male", "female"), value=AttributePosition(0)),
        ClaimColumn("agebin", tuple(f"age {lab}" for lab in AGEBIN38_LABELS), _AgeBin(binned)),
        ClaimColumn("hispanic", ("not Hispanic", "Hispanic"), value=AttributePosition(3)),
        *(ClaimColumn(r, (f"not {r}", r), _RaceFlag(i)) for i, r in enumerate(RACES)),
    )


#: The person schema as data: the same four attributes in :func:`encode_types`'s order, so that
#: ``PERSONS.encode`` gives the same type indices (pinned by a test).
PERSONS = Schema(
    name="persons",
    unit="person",
    attributes=(
        Attribute("sex", ((0, "male"), (1, "female")), "Sex"),
        Attribute(
            "age",
            tuple((a, str(a)) for a in range(N_AGES)),
            f"Age in years, {AGE_MAX} = and over",
            ordered=True,
        ),
        Attribute(
            "race",
            tuple(
                (code, "; ".join(RACE_LABELS[RACES[r]] for r in combo))
                for code, combo in enumerate(RACE_COMBOS, start=1)
            ),
            "SF1 race code 1..63 (P8's leaves: by number of races, then OMB order)",
        ),
        Attribute(
            "hispanic", ((0, "not Hispanic or Latino"), (1, "Hispanic or Latino")), "Ethnicity"
        ),
    ),
    description="One row per person: block, sex, age, race, Hispanic origin (SF1's 34 tables)",
    claim_on=person_claim_columns(binned=False),
)
#: Persons on certification's resolution: agebin38 (:data:`AGEBIN38`) for the single year, the
#: binned histogram whose uniqueness ``tabrecon solvar`` proves.
PERSONS_BINNED = Schema(
    name="persons_binned",
    unit="person",
    attributes=(
        PERSONS.attributes[0],
        Attribute("agebin", tuple(enumerate(AGEBIN38_LABELS)), "Age bin (agebin38)", ordered=True),
        *PERSONS.attributes[2:],
    ),
    description="One row per person: block, sex, agebin38, race, Hispanic origin",
    claim_on=person_claim_columns(binned=True),
)

#: Attributes of every type, for building cell predicates as vectorised masks.
TYPE_SEX, TYPE_AGE, TYPE_RACE, TYPE_HISP = decode_types(np.arange(N_TYPES))


def person_units(md: Microdata, binned: bool = False) -> Units:
    """Person records as records of :data:`PERSONS` (or, ``binned``, of :data:`PERSONS_BINNED`),
    for what is written over any schema (:mod:`tabrecon.tables.spec`,
    :mod:`tabrecon.attacks.claims.block`)."""
    age = {"agebin": AGEBIN_OF_AGE[md.age]} if binned else {"age": md.age}
    return Units(
        PERSONS_BINNED if binned else PERSONS,
        md.block_geoid.astype(str),
        {
            "sex": md.sex.astype(np.int64),
            **{k: v.astype(np.int64) for k, v in age.items()},
            "race": md.race.astype(np.int64),
            "hispanic": md.hisp.astype(np.int64),
        },
        source=md.source,
        known_blocks=(np.asarray(md.geoids).astype(str), md.block),
    )


def person_records(units: Units) -> Microdata:
    """Records of :data:`PERSONS` or :data:`PERSONS_BINNED` (a reconstruction over the schema)
    as person :class:`Microdata`: an age known only to a run of years (``units.ranges``), or to
    an agebin38 bin, is written as its first year with ``age_max`` its last and ``age_exact``
    false, as the person reconstruction writes it; where the year of the run that meets every
    published cell is not its first (a median age pins it), ``age`` is that year and
    ``age_min`` the run's first. The inverse of :func:`person_units` where every age is one
    year.

    >>> md = from_arrays(["990010001001001"] * 2, [0, 1], [30, 100], [1, 2], [0, 1])
    >>> back = person_records(person_units(md))
    >>> back.age.tolist(), back.age_max.tolist(), back.age_exact.tolist()
    ([30, 100], [30, 100], [True, True])
    >>> binned = person_records(person_units(md, binned=True))
    >>> binned.age.tolist(), binned.age_max.tolist(), binned.age_exact.tolist()
    ([30, 85], [34, 110], [False, False])
    """
    c = units.codes
    if units.schema.name == PERSONS_BINNED.name:
        years = np.arange(N_AGES)
        first = np.full(len(AGEBIN38_LABELS), N_AGES)
        np.minimum.at(first, AGEBIN_OF_AGE, years)
        last = np.zeros(len(AGEBIN38_LABELS), dtype=np.int64)
        np.maximum.at(last, AGEBIN_OF_AGE, years)
        lo, hi = (units.ranges or {}).get("agebin", (c["agebin"], c["agebin"]))
        age, age_max = first[lo], last[hi]
    elif units.schema.name == PERSONS.name:
        lo, age_max = (units.ranges or {}).get("age", (c["age"], c["age"]))
        age = c["age"]  # the year that meets every cell, medians too
        age_min = np.asarray(lo, dtype=np.int16) if (age != lo).any() else None
    else:
        raise TabreconError(f"{units.schema.name} records are not person records")
    md = from_arrays(
        units.block_geoid, c["sex"], age, c["race"], c["hispanic"], units.extra, units.source
    )
    md.age_max = np.asarray(age_max, dtype=np.int16)
    md.age_min = age_min if units.schema.name == PERSONS.name else None
    md.age_exact = md.age_first == md.age_max
    return md


def size_bin(pop: np.ndarray) -> np.ndarray:
    """Index 0..6 of the block-size bin (1-9, ..., 1000+) of each population; -1 for 0."""
    pop = np.asarray(pop)
    edges = np.array([lo for lo, _ in BLOCK_SIZE_BINS])
    out = np.searchsorted(edges, pop, side="right") - 1
    return np.where(pop <= 0, -1, out)


@dataclass
class Microdata:
    """Person records in encoded form.

    ``geoids`` holds the distinct block ids (sorted); ``block`` indexes into it. ``extra`` keeps the
    columns of the input beyond the schema (in input row order) so that they are written back out.
    ``age_exact`` is False where only the age bin is known (block-only reconstructions).
    """

    geoids: np.ndarray
    block: np.ndarray
    sex: np.ndarray
    age: np.ndarray
    race: np.ndarray
    hisp: np.ndarray
    extra: pl.DataFrame | None = None
    age_exact: np.ndarray | None = None
    source: str = ""
    meta: dict = field(default_factory=dict)
    #: last year of each record's age range where the tables determine only a range (``age`` is
    #: its first year); None when every age is a single year
    age_max: np.ndarray | None = None
    #: first year of each record's age range where ``age`` is another year of it (the one that
    #: meets every published cell: a median age pins it); None: ``age`` is the first
    age_min: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.block.shape[0])

    @property
    def types(self) -> np.ndarray:
        return encode_types(self.sex, self.age, self.race, self.hisp)

    @property
    def agebin(self) -> np.ndarray:
        return AGEBIN_OF_AGE[self.age]

    @property
    def block_geoid(self) -> np.ndarray:
        return self.geoids[self.block]

    def blocks_in(self, geoids: np.ndarray) -> np.ndarray:
        """``np.searchsorted(geoids, self.block_geoid)`` (``geoids`` sorted), from the distinct
        blocks alone: a million records' ids were made and searched as strings (0.4 s).

        >>> b1, b2 = "1" * 15, "2" * 15
        >>> md = from_arrays([b2, b1, b2], [0, 1, 0], [3, 4, 5], [1, 1, 1], [0, 0, 0])
        >>> md.blocks_in(np.array([b1, b2])).tolist()
        [1, 0, 1]
        """
        return np.searchsorted(geoids, self.geoids)[self.block]

    @property
    def age_first(self) -> np.ndarray:
        """The first year of each record's age range (``age`` where it is one year)."""
        return self.age if self.age_min is None else self.age_min

    @property
    def age_labels(self) -> np.ndarray:
        """What each record's age is known to be: its agebin38 label, or the range the tables
        determine (``10-14``, ``18+``) when ``age_max`` says the age is only known to a range."""
        return age_labels(self.age_first, self.age_max)

    def flags(self) -> np.ndarray:
        """(n, 6) array of 0/1 race flags in OMB order."""
        bits = RACE_BITS[self.race - 1]
        return ((bits[:, None] >> np.arange(6)) & 1).astype(np.int8)

    def geo_at(self, level: str) -> tuple[np.ndarray, np.ndarray]:
        """(distinct geoids at ``level``, index of each person into them)."""
        prefixes = prefix(self.geoids, level)
        uniq, inv = np.unique(prefixes, return_inverse=True)
        return uniq, inv[self.block]

    def inhabited_blocks(self) -> np.ndarray:
        """The geoids of the blocks that hold at least one record."""
        return np.asarray(self.geoids)[np.unique(self.block)]

    def rows_by_prefix(self, units: list[str] | np.ndarray, n: int = 11) -> dict[str, np.ndarray]:
        """Row indices of each unit (a geoid prefix of length ``n``, e.g. a tract), by one sort."""
        pre = np.array([g[:n] for g in self.geoids])[self.block]
        order = np.argsort(pre, kind="stable")
        starts = np.searchsorted(pre[order], units)
        ends = np.searchsorted(pre[order], units, side="right")
        return {u: order[a:b] for u, a, b in zip(units, starts, ends, strict=True)}

    def take(self, idx: np.ndarray) -> Microdata:
        """Rows ``idx`` (index array or boolean mask), keeping only the blocks still present."""
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        used, newblock = np.unique(self.block[idx], return_inverse=True)
        return Microdata(
            geoids=self.geoids[used],
            block=newblock.astype(np.int32),
            sex=self.sex[idx],
            age=self.age[idx],
            race=self.race[idx],
            hisp=self.hisp[idx],
            extra=None if self.extra is None else self.extra[idx.tolist()],
            age_exact=None if self.age_exact is None else self.age_exact[idx],
            source=self.source,
            meta=dict(self.meta),
            age_max=None if self.age_max is None else self.age_max[idx],
            age_min=None if self.age_min is None else self.age_min[idx],
        )

    def to_units(self, binned: bool = False) -> Units:
        """The records as records of :data:`PERSONS` (``binned``: of :data:`PERSONS_BINNED`),
        what the engine reads (:func:`person_units`)."""
        return person_units(self, binned)

    def to_codes(self) -> pl.DataFrame:
        """The records as integer codes (block_geoid, sex 0/1, age, race 1..63, hisp, and
        age_exact/age_max when known): what worker processes ship and parts files hold. Text labels
        appear only in :meth:`to_frame`, when a person file is written; :meth:`from_codes` is the
        one decoder.

        >>> md = from_arrays(["280010001001000"], [1], [34], [2], [0])
        >>> Microdata.from_codes(md.to_codes()).to_codes().equals(md.to_codes())
        True
        """
        cols: dict[str, object] = {
            "block_geoid": self.block_geoid,
            "sex": self.sex.astype(np.int8),
            "age": self.age.astype(np.int16),
            "race": self.race.astype(np.int8),
            "hisp": self.hisp.astype(np.int8),
        }
        if self.age_exact is not None:
            cols["age_exact"] = self.age_exact.astype(np.int8)
        for name in ("age_max", "age_min"):
            if (v := getattr(self, name)) is not None:
                cols[name] = v.astype(np.int16)
        df = pl.DataFrame(cols)
        if self.extra is not None and self.extra.width:
            df = pl.concat(
                [df, self.extra.drop([c for c in self.extra.columns if c in df.columns])],
                how="horizontal",
            )
        return df

    @classmethod
    def from_codes(cls, df: pl.DataFrame, source: str = "") -> Microdata:
        """Records from :meth:`to_codes`' frame (other columns are kept as extras)."""
        known = ("block_geoid", "sex", "age", "race", "hisp", "age_exact", "age_max", "age_min")
        missing = [c for c in known[:5] if c not in df.columns]
        if missing:
            raise TabreconError(f"not a frame of record codes: no column {', '.join(missing)}")
        extra_cols = [c for c in df.columns if c not in known]
        md = from_arrays(
            df["block_geoid"].to_numpy(),
            df["sex"].to_numpy(),
            df["age"].to_numpy(),
            df["race"].to_numpy(),
            df["hisp"].to_numpy(),
            extra=df.select(extra_cols) if extra_cols else None,
            source=source,
        )
        if "age_exact" in df.columns:
            md.age_exact = df["age_exact"].to_numpy().astype(bool)
        if "age_max" in df.columns:
            md.age_max = df["age_max"].to_numpy().astype(np.int16)
        if "age_min" in df.columns:
            md.age_min = df["age_min"].to_numpy().astype(np.int16)
        return md

    def to_frame(self) -> pl.DataFrame:
        """The records in the layout of the shared census file, extras appended."""
        flags = self.flags()
        cols: dict[str, object] = {
            "block_geoid": self.block_geoid,
            "sex": np.array(SEXES)[self.sex],
            "age": self.age.astype(np.int16),
            "agebin": self.age_labels,
        }
        for i, r in enumerate(RACES):
            cols[r] = flags[:, i]
        cols["hispanic"] = self.hisp.astype(np.int8)
        df = pl.DataFrame(cols)
        if self.age_exact is not None:
            df = df.with_columns(pl.Series("age_exact", self.age_exact.astype(np.int8)))
        for name in ("age_max", "age_min"):
            if (v := getattr(self, name)) is not None:
                df = df.with_columns(pl.Series(name, v.astype(np.int16)))
        if self.extra is not None and self.extra.width:
            df = pl.concat(
                [df, self.extra.drop([c for c in self.extra.columns if c in df.columns])],
                how="horizontal",
            )
        return df


def from_arrays(
    block_geoid: np.ndarray | list[str] | pl.Series,
    sex: np.ndarray,
    age: np.ndarray,
    race: np.ndarray,
    hisp: np.ndarray,
    extra: pl.DataFrame | None = None,
    source: str = "",
) -> Microdata:
    """Build :class:`Microdata` from plain arrays (sex 0/1, race code 1..63, hisp 0/1); the
    block ids may be a polars string column (a file's, as read: its distinct ids are found
    there, 0.09 s for 1,000,096 records against 0.41 s to make and sort them as numpy strings)."""
    if isinstance(block_geoid, pl.Series):
        # ranked as numpy sorts them: code points, which UTF-8's byte order keeps
        geoids = block_geoid.unique().sort().to_numpy().astype(str)
        block = (block_geoid.rank("dense").cast(pl.Int64) - 1).to_numpy()
    else:
        geoids, block = np.unique(np.asarray(block_geoid, dtype=str), return_inverse=True)
    return Microdata(
        geoids=geoids,
        block=block.astype(np.int32),
        sex=np.asarray(sex, dtype=np.int8),
        age=np.asarray(age, dtype=np.int16),
        race=np.asarray(race, dtype=np.int8),
        hisp=np.asarray(hisp, dtype=np.int8),
        extra=extra,
        source=source,
    )


def county_persons(path: str | Path, schema: Schema) -> pl.DataFrame:
    """Records per county (``county`` = state+county code, ``persons``) of a file of
    ``schema``'s records (a block schema), read from its geoid column alone (a block geoid's 15
    digits), streaming: how the audit plans its chunks without loading the file. A file that is
    not readable text or Parquet, or has no such column, is refused as the readers refuse it
    (named as :attr:`Schema.file_kind`), before anything runs."""
    p = str(path)
    column = schema.geoid_column
    check_readable(p)
    try:
        scan = scan_text(p)
        require_columns(p, scan.collect_schema().names(), [column], schema.file_kind)
        lf = scan.select(pl.col(column).str.strip_chars().str.slice(0, 5).alias("county"))
        df = lf.group_by("county").agg(pl.len().alias("persons")).collect(engine="streaming")
    except InputError:
        raise
    except Exception as exc:
        raise read_error(p, exc) from None
    return df.sort("county")


def _int_column(
    df: pl.DataFrame, col: str, path: str, lines: np.ndarray | None = None
) -> np.ndarray:
    s = df[col].str.strip_chars()
    as_int = s.cast(pl.Int64, strict=False)
    bad = as_int.is_null().to_numpy()
    refuse_rows(path, bad, col, "not an integer", s, lines)
    return as_int.to_numpy()


def _typed(s: pl.Series) -> pl.Series:
    """An extra column read as text, given back as integers or floats when every value is one."""
    for dt in (pl.Int64, pl.Float64):
        c = s.cast(dt, strict=False)
        if c.null_count() == s.null_count():
            return c
    return s


def read_microdata(path: str | Path, counties: Collection[str] | None = None) -> Microdata:
    """Read and validate a person file (CSV, CSV.gz or Parquet) in the shared census layout.

    Raises :class:`InputError` naming the file, line and column of the first bad value (and how many
    more rows share the problem). Ages above 110 are top-coded to 110 with a warning. With
    ``counties`` (5-digit state+county codes) only those counties' rows are read, streaming.
    """
    p = str(path)
    df, lines = read_rows(p, counties)
    require_columns(p, df.columns, REQUIRED_COLUMNS, "a person file")
    if df.height == 0:
        where = f" in counties {', '.join(sorted(counties))}" if counties is not None else ""
        raise InputError(f"no person records{where}", path=p)
    geo = df["block_geoid"].str.strip_chars()
    bad = (~geo.str.contains(r"^\d{15}$")).fill_null(True).to_numpy()
    refuse_rows(
        path=p,
        bad=bad,
        column="block_geoid",
        message="block_geoid must be 15 digits (state 2, county 3, tract 6, block 4)",
        values=geo,
        lines=lines,
    )
    sex_s = df["sex"].str.strip_chars().str.to_lowercase()
    sex = np.full(df.height, -1, dtype=np.int8)
    sv = sex_s.to_numpy()
    sex[sv == "male"] = 0
    sex[sv == "female"] = 1
    refuse_rows(p, sex < 0, "sex", "sex must be 'male' or 'female'", df["sex"], lines)
    age = _int_column(df, "age", p, lines)
    refuse_rows(p, age < 0, "age", "age must be >= 0", df["age"], lines)
    if (age > AGE_MAX).any():
        over = np.flatnonzero(age > AGE_MAX)
        first = int(lines[over[0]]) if lines is not None else int(over[0]) + 2
        warnings.warn(
            f"{p}, line {first}: {over.size} row(s) with an age above {AGE_MAX} top-coded "
            f"to {AGE_MAX}",
            stacklevel=2,
        )
        age = np.minimum(age, AGE_MAX)
    bits = np.zeros(df.height, dtype=np.int16)
    for i, r in enumerate(RACES):
        v = _int_column(df, r, p, lines)
        refuse_rows(p, (v != 0) & (v != 1), r, "race flag must be 0 or 1", df[r], lines)
        bits |= v.astype(np.int16) << i
    refuse_rows(
        p,
        bits == 0,
        "white",
        "no race flag set (at least one of white, black, aian, asian, nhpi, sor must be 1)",
        lines=lines,
    )
    hisp = _int_column(df, "hispanic", p, lines)
    refuse_rows(
        p, (hisp != 0) & (hisp != 1), "hispanic", "hispanic must be 0 or 1", df["hispanic"], lines
    )
    age_max = age_min = None
    if "age_max" in df.columns:  # an age known only to a range: age is its first year
        age_max = _int_column(df, "age_max", p, lines)
        refuse_rows(
            p,
            (age_max < np.minimum(age, AGE_MAX)) | (age_max > AGE_MAX),
            "age_max",
            f"age_max must be between age and {AGE_MAX}",
            df["age_max"],
            lines,
        )
    if "age_min" in df.columns:  # ... or another year of it, age_min its first
        age_min = _int_column(df, "age_min", p, lines)
        refuse_rows(
            p,
            (age_min < 0) | (age_min > np.minimum(age, AGE_MAX)),
            "age_min",
            "age_min must be between 0 and age",
            df["age_min"],
            lines,
        )
    if "agebin" in df.columns:
        ab = df["agebin"].str.strip_chars().to_numpy()
        first_year = np.minimum(age, AGE_MAX) if age_min is None else age_min
        expect = age_labels(first_year, age_max)
        refuse_rows(p, ab != expect, "agebin", "agebin does not match age", df["agebin"], lines)
    age_exact = None
    if "age_exact" in df.columns:
        age_exact = _int_column(df, "age_exact", p, lines).astype(bool)
    extra_cols = [
        c
        for c in df.columns
        if c not in BASE_COLUMNS and c not in ("age_exact", "age_max", "age_min")
    ]
    extra = df.select([_typed(df[c]) for c in extra_cols]) if extra_cols else None
    md = from_arrays(geo, sex, age, CODE_OF_BITS[bits], hisp, extra=extra, source=p)
    md.age_exact = age_exact
    md.age_max = None if age_max is None else age_max.astype(np.int16)
    md.age_min = None if age_min is None else age_min.astype(np.int16)
    return md


def write_microdata(md: Microdata, path: str | Path) -> None:
    """Write a person file: ``.parquet`` as Parquet, ``.csv`` as CSV, ``.csv.gz`` as gzip CSV."""
    write_frame(md.to_frame(), path)


# --------------------------------------------------------------------------------------------------
# Race x ethnicity combinations, ordered like the Bureau's flag strings (W B AIAN Asian NHPI SOR
# hisp): the one encoding every attack and measure uses
# --------------------------------------------------------------------------------------------------
N_COMBOS = 126


def _msb_bits(race: np.ndarray) -> np.ndarray:
    """Race flags as an integer with White the most significant of six bits (flag-string order)."""
    bits = RACE_BITS[np.asarray(race, dtype=np.int64) - 1].astype(np.int64)
    out = np.zeros_like(bits)
    for i in range(6):
        out |= ((bits >> i) & 1) << (5 - i)
    return out


def combo_id(race: np.ndarray, hisp: np.ndarray) -> np.ndarray:
    """Column index 0..127 of (race, hispanic) in the order of the strings 0000000 ... 1111111.

    Only 126 are used (a race flag is always set); ascending id = the Bureau's column order, so "the
    first maximum" of a count row is its smallest id.
    """
    return _msb_bits(race) * 2 + np.asarray(hisp, dtype=np.int64)


#: the national default mode: White alone, not Hispanic
WHITE_NH = int(combo_id(np.array([1]), np.array([0]))[0])


def first_max(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (first argmax, max, tied?)."""
    mx = counts.max(axis=1)
    arg = counts.argmax(axis=1)
    tied = (counts == mx[:, None]).sum(axis=1) > 1
    return arg, mx, tied


def combo_counts(md: Microdata, geoids: np.ndarray) -> np.ndarray:
    """Persons per block (rows: ``geoids``, sorted) and race x ethnicity combination (128
    columns, :func:`combo_id`)."""
    b = md.blocks_in(geoids)
    out = np.zeros((len(geoids), 128), dtype=np.int64)
    np.add.at(out, (b, combo_id(md.race, md.hisp)), 1)
    return out
