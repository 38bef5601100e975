"""Group-quarters persons: SF1 2010's P42 and P43, declared in this one file.

A group-quarters person lives in a facility (a prison, a nursing home, a dormitory, barracks...)
rather than a housing unit. SF1 2010 publishes for every block P42 (the group-quarters
population by type: 10 cells) and P43 (by sex by age by type: 63 cells). Everything here is
taken from the Bureau's layout (:mod:`tabrecon.tables.layout`, read by
:func:`tabrecon.tables.spec.from_layout`): the seven types are P42's lines at depth 2, the age
groups P43's at depth 2, the sexes P43's at depth 1, and a group line (institutionalized,
noninstitutionalized) is the union of its lines. The schema is therefore
exactly what the two tables resolve: sex x 3 age groups x 7 types, 42 types of record.

The synthetic file (:func:`synthesize_group_quarters`) places facilities in the blocks of a
synthetic county: about one facility per 2,500 residents, each of one type, its size and its
residents' sex and age drawn from illustrative per-type shapes (nursing homes old and mostly
women, adult prisons men of working age, dormitories young adults). The shapes are chosen to
look like group quarters, not calibrated to any census; they make realistic block tables to
attack, nothing more.

>>> from tabrecon.schema.registry import population
>>> gq = population("group_quarters")
>>> gq.schema.n_types, [len(t.cells()) for t in gq.tables()]
(42, [10, 63])
"""

from __future__ import annotations

import numpy as np

from ..records.synth import SynthConfig, synthesize
from ..schema.registry import Population, ReleaseTables, register
from ..schema.spec import Attribute, Schema, Units
from ..tables.layout import DHC_2020, children, stubs_at
from ..tables.spec import from_layout
from ..vocab import Release

_TYPES = stubs_at("P42", 2)
_AGES = stubs_at("P43", 2)
_SEXES = stubs_at("P43", 1)

GROUP_QUARTERS = Schema(
    name="group_quarters",
    unit="group-quarters person",
    attributes=(
        Attribute("sex", tuple((i, s.lower()) for i, s in enumerate(_SEXES)), "Sex (P43)"),
        Attribute("age_group", tuple(enumerate(_AGES)), "Age in P43's three groups"),
        Attribute(
            "gq_type",
            tuple(enumerate(_TYPES, start=1)),
            "Group-quarters type (P42's seven; the Bureau's type codes in brackets)",
        ),
    ),
    description="One row per person in group quarters: block, sex, age group, facility type",
)


def _vocabulary() -> dict[str, dict[str, tuple[int, ...]]]:
    """The predicate of every stub P42 and P43 use, from the layout's own tree."""
    code = {t: i for i, t in enumerate(_TYPES, start=1)}
    vocab: dict[str, dict[str, tuple[int, ...]]] = {"Total": {}}
    vocab |= {s: {"sex": (i,)} for i, s in enumerate(_SEXES)}
    vocab |= {a: {"age_group": (i,)} for i, a in enumerate(_AGES)}
    vocab |= {t: {"gq_type": (c,)} for t, c in code.items()}
    for group, kids in children("P42", 1).items():  # institutionalized = its four types
        vocab[group] = {"gq_type": tuple(code[k] for k in kids)}
    return vocab


def _tables() -> tuple:
    v = _vocabulary()
    return (from_layout("P42", GROUP_QUARTERS, v), from_layout("P43", GROUP_QUARTERS, v))


def _dhc_tables() -> tuple:
    """The 2020 DHC's block table of group quarters: P18, which continues SF1's P43 (the DHC
    has no block table of the types alone, as P42 was)."""
    return (from_layout("P18", GROUP_QUARTERS, _vocabulary(), layout=DHC_2020),)


#: per type, in P42's order: mean residents per facility, P(male), P(under 18, 18-64, 65+),
#: and the type's share of facilities (illustrative, see the module docstring)
_SHAPES: tuple[tuple[float, float, tuple[float, float, float], float], ...] = (
    (120.0, 0.90, (0.002, 0.968, 0.03), 0.10),  # correctional facilities for adults
    (18.0, 0.80, (0.80, 0.20, 0.0), 0.06),  # juvenile facilities
    (70.0, 0.33, (0.0, 0.12, 0.88), 0.30),  # nursing facilities
    (25.0, 0.60, (0.30, 0.50, 0.20), 0.04),  # other institutional facilities
    (150.0, 0.45, (0.03, 0.97, 0.0), 0.10),  # college/university student housing
    (200.0, 0.85, (0.01, 0.99, 0.0), 0.02),  # military quarters
    (8.0, 0.55, (0.10, 0.75, 0.15), 0.38),  # other noninstitutional (group homes, shelters)
)


def synthesize_group_quarters(config: SynthConfig | None = None, seed: int = 0) -> Units:
    """A synthetic county's group-quarters persons: the blocks of
    :func:`tabrecon.records.synth.synthesize`'s county (``config``), about one facility per 2,500 of
    its residents (at least one), each in its own block.

    >>> u = synthesize_group_quarters(SynthConfig(persons=5_000), seed=1)
    >>> len(u) > 0, set(u.codes["gq_type"].tolist()) <= set(range(1, 8))
    (True, True)
    """
    config = config or SynthConfig()
    rng = np.random.default_rng(seed)
    persons = config.persons
    blocks = np.unique(synthesize(config, seed=seed).block_geoid)
    n_fac = min(max(1, round(persons / 2_500)), blocks.size)
    where = rng.choice(blocks, size=n_fac, replace=False)
    share = np.array([s[3] for s in _SHAPES])
    kind = rng.choice(len(_SHAPES), size=n_fac, p=share / share.sum())
    geo, sex, age, typ = [], [], [], []
    for b, k in zip(where, kind, strict=True):
        mean, male, ages, _ = _SHAPES[k]
        n = 1 + int(rng.geometric(1.0 / mean))  # many small, a few large
        geo.append(np.full(n, b))
        sex.append((rng.random(n) >= male).astype(np.int64))
        age.append(rng.choice(3, size=n, p=np.array(ages) / sum(ages)))
        typ.append(np.full(n, k + 1, dtype=np.int64))
    return Units(
        GROUP_QUARTERS,
        np.concatenate(geo).astype(str),
        {
            "sex": np.concatenate(sex),
            "age_group": np.concatenate(age).astype(np.int64),
            "gq_type": np.concatenate(typ),
        },
        source=f"synthetic group quarters (seed {seed})",
    )


register(
    Population(
        name="group_quarters",
        schema=GROUP_QUARTERS,
        noun="group-quarters persons",
        residents="residents",
        tables=_tables,
        releases=(
            ReleaseTables(release=Release.DHC_2020, tables=_dhc_tables, size_cell="P0180001"),
        ),
        synthesize=synthesize_group_quarters,
        size_cell="P0420001",
        k_values=(1, 2, 3),
        report_note="P43 crosses every column of the schema (sex by age group by type), so it "
        "publishes each block's group-quarters population whole: reconstruction is unique by "
        "construction and every claim of three columns is a published cell (none is reported); "
        "the claims of one and two columns are what a reader learns beyond a single cell.",
        description="SF1 P42, P43: persons in group quarters by sex, age group and type",
    )
)
