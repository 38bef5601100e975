"""Synthetic housing units whose households are made of the synthetic persons.

:func:`synthesize_households` takes the synthetic county of
:func:`tabrecon.records.synth.synthesize` (blocks, households and race x ethnicity exactly as
there) and gives its persons household roles (householder, spouse or unmarried partner, children,
other relatives, nonrelatives) with sexes and ages that fit them, then writes one
:data:`tabrecon.schema.catalog.HOUSING_UNITS` record per household plus vacant units. Every unit is
consistent with its members by construction: size, householder age / sex / race / Hispanic origin
taken from the householder, presence of people under 18 and 65 and over from the members, household
types from the roles, and every unit passes the schema's rules.

Calibrated to the 2010 Census, United States (:data:`HOUSEHOLD_TARGETS`, reported by
:func:`household_calibration`): household type (SF1 P18), household size (H13), tenure (H4),
occupancy and vacancy status (H3, H5); married couples with own children under 18 and unmarried
partner households (Census Brief C2010BR-14). What is *assumed*, not fitted: spouses' and
partners' ages (the householder's +- a normal of sd 5 years), opposite sexes for couples,
householder ages from the national age distribution over 18 (15-17 rare), under-18 members of
family households being the householder's children, and tenure independent of everything else.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from ..errors import InputError
from ..schema import AGE_MAX, Microdata
from ..schema.catalog import HOUSING_UNITS
from ..schema.spec import Units, refuse_rows
from .synth import SynthConfig, age_pmf, draw_races, synthesize

#: 2010 Census, United States: counts the synthesis is calibrated to (and reported against).
HOUSEHOLD_TARGETS: dict[str, dict[str, float]] = {
    # SF1 P18 household type (households)
    "household type (P18)": {
        "married couple family": 56_510_377,
        "other family, male householder": 5_777_570,
        "other family, female householder": 15_250_349,
        "nonfamily, living alone": 31_204_909,
        "nonfamily, not living alone": 7_973_087,
    },
    # SF1 H13 household size (occupied units)
    "household size (H13)": {
        "1": 31_204_909,
        "2": 38_243_704,
        "3": 18_758_680,
        "4": 15_751_829,
        "5": 7_513_763,
        "6": 2_979_893,
        "7+": 2_263_514,
    },
    # SF1 H4 tenure (occupied units)
    "tenure (H4)": {
        "owned with a mortgage or a loan": 52_979_430,
        "owned free and clear": 23_006_644,
        "renter occupied": 40_730_218,
    },
    # SF1 H3 occupancy status and H5 vacancy status (housing units)
    "occupancy (H3, H5)": {
        "occupied": 116_716_292,
        "for rent": 4_137_567,
        "rented, not occupied": 206_825,
        "for sale only": 1_896_796,
        "sold, not occupied": 421_032,
        "for seasonal, recreational, or occasional use": 4_649_298,
        "for migrant workers": 24_161,
        "other vacant": 3_652_759,
    },
    # Households and Families: 2010 (C2010BR-14): shares of all households; people 65 and over
    # (the count SF1 P25 publishes by block) as the brief rounds it, "29 million ... 25 percent"
    "households with (C2010BR-14)": {
        "married couple with own children under 18": 23_600_000,
        "unmarried partners": 7_700_000,
        "one or more people 65 and over (P25)": 29_000_000,
        "all households": 116_716_292,
    },
}

_P18 = HOUSEHOLD_TARGETS["household type (P18)"]


def _type_shares() -> np.ndarray:
    """P(married, other family male, other family female, nonfamily not alone | size), rows for
    2 persons and for 3 or more: P18's shares among households of 2+ overall, with nonfamily
    households not living alone put mostly at size 2 (18% of 2-person households, 2% of larger)
    and married couples at 56% of 2-person households (assumed; 2010's joint is not in P18), the
    other families splitting the rest as P18 does."""
    tot = np.array(
        [
            _P18["married couple family"],
            _P18["other family, male householder"],
            _P18["other family, female householder"],
            _P18["nonfamily, not living alone"],
        ]
    )
    share = tot / tot.sum()
    h13 = HOUSEHOLD_TARGETS["household size (H13)"]
    two = h13["2"] / sum(v for k, v in h13.items() if k != "1")
    nonfam = (0.18, (share[3] - two * 0.18) / (1 - two))
    married = (0.56, (share[0] - two * 0.56) / (1 - two))
    other = share[1] / (share[1] + share[2])
    rows = []
    for i in range(2):
        rest = 1 - married[i] - nonfam[i]
        rows.append([married[i], rest * other, rest * (1 - other), nonfam[i]])
    return np.array(rows)


_P_TYPE = _type_shares()
#: chance that an "other family" household of 3+ or a nonfamily household of 2+ holds the
#: householder's unmarried partner (tuned so that partner households are about 6.6% of all,
#: C2010BR-14's 7.7 M of 116.7 M)
P_PARTNER = 0.42
#: chance that a family household of 3+ has the householder's children under 18 as its other
#: members, by householder age below 35, 35-44, 45-54, 55+ (tuned towards C2010BR-14's married
#: couples with own children under 18, 20% of households)
P_CHILDREN = (0.95, 0.95, 0.7, 0.1)
#: the 1-person share of the size stream, scaled so that cutting households at block
#: boundaries (which makes extra small households) leaves about H13's 26.7%
ONE_PERSON_SCALE = 0.9


def _vacancy_shares() -> np.ndarray:
    occ = HOUSEHOLD_TARGETS["occupancy (H3, H5)"]
    v = np.array([n for k, n in occ.items() if k != "occupied"], dtype=float)
    return v / v.sum()


def _tenure_shares() -> np.ndarray:
    t = np.array(list(HOUSEHOLD_TARGETS["tenure (H4)"].values()), dtype=float)
    return t / t.sum()


def synthesize_households(
    config: SynthConfig | None = None, seed: int = 0
) -> tuple[Microdata, Units]:
    """A synthetic county's persons (with ``household_id`` and ``relationship`` columns) and its
    housing units (``unit_id``; vacant units have no persons). Deterministic for (config, seed).

    >>> md, units = synthesize_households(SynthConfig(persons=2_000), seed=1)
    >>> int((units.codes["vacancy_status"] == 0).sum()) == md.extra["household_id"].n_unique()
    True
    """
    cfg = config or SynthConfig()
    md = synthesize(cfg, seed)  # the county's blocks and geoids
    rng = np.random.default_rng([seed, 19])
    N, block = len(md), md.block
    # households: one stream of 2010 household sizes (H13) cut at block boundaries (synthesize()
    # gives every block the same leading sizes, which skews the mix; see its comment)
    h13 = np.array(list(HOUSEHOLD_TARGETS["household size (H13)"].values()), dtype=float)
    h13[0] *= ONE_PERSON_SCALE
    draws = rng.choice(7, size=N, p=h13 / h13.sum()) + 1
    draws = np.where(draws == 7, rng.integers(7, 10, size=N), draws)
    idx = np.searchsorted(np.cumsum(draws), np.arange(N), side="right")
    _, hh = np.unique(block.astype(np.int64) * (N + 1) + idx, return_inverse=True)
    race, hisp = draw_races(rng, cfg, block, hh, len(md.geoids))
    md = replace(md, race=race.astype(np.int8), hisp=hisp.astype(np.int8))
    n_hh = int(hh.max()) + 1
    size = np.bincount(hh, minlength=n_hh)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    if not (np.diff(hh) >= 0).all():  # blocks are sorted and cut in order: runs, always
        raise AssertionError("households are not runs of consecutive persons")
    pos = np.arange(N) - start[hh]  # 0 = householder

    # household type and couples
    u = rng.random(n_hh)
    kind = np.where(size == 2, *(np.searchsorted(np.cumsum(p), u) for p in _P_TYPE))
    kind = np.where(size == 1, -1, np.minimum(kind, 3))  # -1: living alone
    married = kind == 0
    partner = ((((kind == 1) | (kind == 2)) & (size >= 3)) | ((kind == 3) & (size >= 2))) & (
        rng.random(n_hh) < P_PARTNER
    )
    couple = married | partner

    # ages: householder, spouse/partner near the householder, then the other members
    pmf = age_pmf()
    adult = pmf.copy()
    adult[:15] = 0.0
    adult[15:18] *= 0.02
    adult /= adult.sum()
    hh_age = rng.choice(AGE_MAX + 1, size=n_hh, p=adult)
    grown = pmf.copy()
    grown[:18] = 0.0
    grown /= grown.sum()
    age = rng.choice(AGE_MAX + 1, size=N, p=grown)  # relatives and nonrelatives: 18+
    age[pos == 0] = hh_age
    is_partner = (pos == 1) & couple[hh]
    age[is_partner] = np.clip(
        hh_age[hh[is_partner]] + np.rint(rng.normal(0, 5, is_partner.sum())).astype(int),
        15,
        AGE_MAX,
    )
    family = (kind == 0) | (kind == 1) | (kind == 2)
    band = np.searchsorted([35, 45, 55], hh_age, side="right")
    kids = family & (size >= 3) & (rng.random(n_hh) < np.array(P_CHILDREN)[band]) & (hh_age >= 16)
    child = (pos > 0) & ~is_partner & kids[hh]
    top = np.minimum(17, hh_age[hh[child]] - 15)
    age[child] = (rng.random(child.sum()) * (top + 1)).astype(int)

    # sexes: couples opposite; other families by type; the rest as in the person model
    pfem = np.select([age < 20, age < 65, age < 80], [0.488, 0.503, 0.55], 0.65)
    sex = (rng.random(N) < pfem).astype(np.int8)
    hh_sex = sex[start].copy()
    hh_sex[married] = rng.random(married.sum()) < 0.5
    hh_sex[kind == 1] = 0
    hh_sex[kind == 2] = 1
    sex[start] = hh_sex
    sex[is_partner] = 1 - hh_sex[hh[is_partner]]

    relationship = np.full(N, "nonrelative", dtype=object)
    relationship[pos == 0] = "householder"
    relationship[is_partner & married[hh]] = "spouse"
    relationship[is_partner & ~married[hh]] = "unmarried partner"
    relationship[child] = "child"
    relationship[(pos > 0) & ~is_partner & ~child & family[hh]] = "other relative"
    persons = replace(
        md,
        sex=sex,
        age=age.astype(np.int16),
        extra=pl.DataFrame(
            {"household_id": hh.astype(np.int64), "relationship": relationship.astype(str)}
        ),
        source=md.source + ", with households",
    )

    # the occupied units, read off their members
    under18 = np.bincount(hh, weights=age < 18, minlength=n_hh) > 0
    over65 = np.bincount(hh, weights=age >= 65, minlength=n_hh) > 0
    with_kids = np.bincount(hh, weights=child, minlength=n_hh) > 0
    female = hh_sex == 1
    hht = np.select(
        [married, kind == 1, kind == 2, (kind == -1) & ~female, kind == -1, ~female],
        [1, 2, 3, 4, 6, 5],
        7,
    )
    hht2 = np.select(
        [
            married & with_kids,
            married,
            partner & with_kids,
            partner,
            (kind == -1) & female,
            (kind == -1),
        ],
        [1, 2, 3, 4, 5, 9],
        0,
    )
    rest = hht2 == 0  # no spouse or partner, not alone
    hht2[rest] = np.select(
        [with_kids[rest], family[rest], np.ones(rest.sum(), bool)], [6, 7, 8]
    ) + np.where(female[rest], 0, 4)
    race_group = _race_group(md.race[start])
    occ = {
        "tenure": rng.choice(3, size=n_hh, p=_tenure_shares()) + 1,
        "vacancy_status": np.zeros(n_hh, dtype=np.int64),
        "household_size": np.minimum(size, 7),
        "household_type": hht,
        "detailed_household_type": hht2,
        "under_18": under18.astype(np.int64),
        "over_65": over65.astype(np.int64),
        "hispanic_householder": md.hisp[start].astype(np.int64) + 1,
        "householder_age": _age_band(hh_age),
        "householder_race": race_group,
    }
    # vacant units: per block, in proportion to its occupied units (2010: H3 / H5)
    occ_block = md.block[start]
    vac_rate = 14_988_438 / 116_716_292
    n_vac = rng.poisson(vac_rate * np.bincount(occ_block, minlength=len(md.geoids)))
    vac_block = np.repeat(np.arange(len(md.geoids)), n_vac)
    nv = vac_block.size
    vac = {k: np.zeros(nv, dtype=np.int64) for k in occ}
    vac["vacancy_status"] = rng.choice(7, size=nv, p=_vacancy_shares()) + 1
    codes = {k: np.concatenate([np.asarray(occ[k], dtype=np.int64), vac[k]]) for k in occ}
    blocks = np.concatenate([occ_block, vac_block])
    order = np.argsort(blocks, kind="stable")
    units = Units(
        HOUSING_UNITS,
        md.geoids[blocks[order]].astype(str),
        {k: v[order] for k, v in codes.items()},
        pl.DataFrame({"unit_id": np.arange(n_hh + nv, dtype=np.int64)[order]}),
        persons.source,
    )
    return persons, units


def _age_band(age: np.ndarray) -> np.ndarray:
    """``householder_age`` code (1-9: 15-24 ... 85+) of each age of 15 or more."""
    return np.searchsorted([25, 35, 45, 55, 60, 65, 75, 85], age, side="right") + 1


def _race_group(race: np.ndarray) -> np.ndarray:
    """Householder race code of H6 (regardless of Hispanic origin): 1-6 for one race alone (SF1
    code order), 7 for two or more."""
    return np.where(race <= 6, race, 7).astype(np.int64)


def household_calibration(persons: Microdata, units: Units) -> list[tuple[str, float, float]]:
    """(figure, measured share, 2010 share) for every target of :data:`HOUSEHOLD_TARGETS`."""
    c = units.codes
    occ = c["vacancy_status"] == 0
    n_occ = int(occ.sum())
    out: list[tuple[str, float, float]] = []

    def add(group: str, measured: dict[str, float], denominator: str | None = None) -> None:
        tgt = HOUSEHOLD_TARGETS[group]
        total = tgt[denominator] if denominator else sum(tgt.values())
        for k, v in tgt.items():
            if k != denominator:
                out.append((f"{group}: {k}", measured[k], v / total))

    hht = c["household_type"][occ]
    add(
        "household type (P18)",
        {
            "married couple family": float((hht == 1).mean()),
            "other family, male householder": float((hht == 2).mean()),
            "other family, female householder": float((hht == 3).mean()),
            "nonfamily, living alone": float(np.isin(hht, (4, 6)).mean()),
            "nonfamily, not living alone": float(np.isin(hht, (5, 7)).mean()),
        },
    )
    size = c["household_size"][occ]
    add(
        "household size (H13)",
        {(f"{k}" if k < 7 else "7+"): float((size == k).mean()) for k in range(1, 8)},
    )
    ten = c["tenure"][occ]
    labels = list(HOUSEHOLD_TARGETS["tenure (H4)"])
    add("tenure (H4)", {lab: float((ten == i + 1).mean()) for i, lab in enumerate(labels)})
    vs = c["vacancy_status"]
    labels = list(HOUSEHOLD_TARGETS["occupancy (H3, H5)"])
    add("occupancy (H3, H5)", {lab: float((vs == i).mean()) for i, lab in enumerate(labels)})
    hht2 = c["detailed_household_type"][occ]
    add(
        "households with (C2010BR-14)",
        {
            "married couple with own children under 18": float((hht2 == 1).mean()),
            "unmarried partners": float(np.isin(hht2, (3, 4)).mean()),
            "one or more people 65 and over (P25)": float((c["over_65"][occ] == 1).mean()),
        },
        denominator="all households",
    )
    out.append(("mean household size", len(persons) / max(n_occ, 1), 300.8 / 116.7))
    return out


#: A person's relationship to the householder, as the synthetic households write it and
#: :func:`check_households` reads it (SF1's P29 lines, in its words).
RELATIONSHIPS = (
    "householder",
    "spouse",
    "unmarried partner",
    "child",
    "other relative",
    "nonrelative",
)


def check_households(persons: Microdata, units: Units) -> int:
    """Check that a person file and a housing-unit file describe the same households; return the
    number of occupied units checked.

    Persons carry ``household_id`` (and, when present, ``relationship``); units carry ``unit_id``.
    Raises :class:`tabrecon.errors.InputError` for the first kind of disagreement found, naming the
    file, line and column of its first row and how many more rows share it: a person whose
    household is no unit, or a vacant unit, or lies in another block; an occupied unit without
    persons, or without exactly one householder, or whose size, householder age, race or Hispanic
    origin, or presence of people under 18 or 65 and over differs from its members.
    """
    pe = persons.extra
    if pe is None or "household_id" not in pe.columns:
        raise InputError(
            "no household_id column: persons cannot be linked to units", path=persons.source
        )
    if units.extra is None or "unit_id" not in units.extra.columns:
        raise InputError("no unit_id column: units cannot be linked to persons", path=units.source)
    hid = pe["household_id"].to_numpy().astype(np.int64)
    uid = units.extra["unit_id"].to_numpy().astype(np.int64)
    P, U = persons.source, units.source
    order = np.argsort(uid)
    if (np.diff(uid[order]) == 0).any():
        refuse_rows(U, _dupes(uid), "unit_id", "unit_id repeated", pl.Series(uid))
    pos = np.clip(np.searchsorted(uid[order], hid), 0, uid.size - 1)
    row = order[pos]  # each person's unit row
    refuse_rows(
        P,
        uid[row] != hid,
        "household_id",
        "household_id is no unit_id of the unit file",
        pl.Series(hid),
    )
    c = units.codes
    refuse_rows(
        P,
        c["vacancy_status"][row] != 0,
        "household_id",
        "a person lives in a unit the unit file says is vacant",
        pl.Series(hid),
    )
    refuse_rows(
        P,
        persons.block_geoid != units.block_geoid[row],
        "block_geoid",
        "a person's block is not the block of their housing unit",
        pl.Series(persons.block_geoid),
    )
    is_occ = c["vacancy_status"] == 0
    members = np.bincount(row, minlength=len(units))
    refuse_rows(
        U,
        is_occ & (members == 0),
        "vacancy_status",
        "an occupied unit has no persons in the person file",
    )
    refuse_rows(
        U,
        is_occ & (c["household_size"] != np.minimum(members, 7)),
        "household_size",
        "household size differs from the number of its persons",
        pl.Series(c["household_size"]),
    )
    age = persons.age.astype(np.int64)
    flags = {
        "under_18": np.bincount(row, weights=age < 18, minlength=len(units)) > 0,
        "over_65": np.bincount(row, weights=age >= 65, minlength=len(units)) > 0,
    }
    for col, has in flags.items():
        refuse_rows(
            U,
            is_occ & (c[col] != has),
            col,
            f"{col} differs from the ages of the unit's persons",
            pl.Series(c[col]),
        )
    if "relationship" in pe.columns:
        rel = pe["relationship"].cast(pl.String)
        refuse_rows(
            P,
            ~rel.is_in(list(RELATIONSHIPS)).fill_null(False).to_numpy(),
            "relationship",
            f"not a relationship to the householder ({', '.join(RELATIONSHIPS)})",
            rel,
        )
        head = rel.to_numpy() == "householder"
        heads = np.bincount(row[head], minlength=len(units))
        refuse_rows(
            U,
            is_occ & (heads != 1),
            "unit_id",
            "an occupied unit needs exactly one householder among its persons",
            pl.Series(heads),
        )
        h = np.flatnonzero(head)
        at = row[h]
        for col, want in (
            ("householder_age", np.where(age[h] >= 15, _age_band(age[h]), -1)),
            ("householder_race", _race_group(persons.race[h])),
            ("hispanic_householder", persons.hisp[h].astype(np.int64) + 1),
        ):
            bad = np.zeros(len(units), dtype=bool)
            bad[at[c[col][at] != want]] = True
            refuse_rows(U, bad, col, f"{col} differs from the householder's", pl.Series(c[col]))
    return int(is_occ.sum())


def _dupes(v: np.ndarray) -> np.ndarray:
    _, inv, cnt = np.unique(v, return_inverse=True, return_counts=True)
    return cnt[inv] > 1
