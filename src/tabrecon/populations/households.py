"""Housing units: the ten columns of Liu et al.'s Generate-then-Verify study
(:data:`tabrecon.schema.catalog.HOUSING_UNITS`) and SF1 2010's housing-unit tables that they
determine (:data:`tabrecon.unit_tables.HOUSING_TABLES`)."""

from __future__ import annotations

from ..attacks.unit_claims import STUDY_TABLES_2_3
from ..households import synthesize_households
from ..schema.catalog import HOUSING_UNITS
from ..schema.registry import Population, register
from ..synth import SynthConfig
from ..unit_tables import HOUSING_TABLES


def _synthesize(cfg: SynthConfig, seed: int) -> object:
    return synthesize_households(cfg, seed=seed)[1]


def _occupied(units: object) -> str:
    return f"{int((units.codes['vacancy_status'] == 0).sum()):,} occupied"  # type: ignore[attr-defined]


register(
    Population(
        name="households",
        schema=HOUSING_UNITS,
        noun="housing units",
        tables=lambda: HOUSING_TABLES,
        synthesize=_synthesize,
        size_cell="H0010001",
        k_values=(5, 6, 7, 8, 9, 10),
        study_by_k=STUDY_TABLES_2_3,
        aside=_occupied,
        report_note="The study attacked the 2020 DHC household tables (621 statistics per "
        "block); these are the 2010 SF1 tables tabrecon declares (120 per block), which never "
        "publish presence of children or people 65 and over, nor the detailed household type, "
        "so claims on those columns rest on the other tables alone.",
        description="SF1 housing-unit tables (H1, H3-H7, H13-H17, P18): tenure, vacancy, "
        "size, household type, householder's age, race and origin",
    )
)
