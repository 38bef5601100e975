"""Writes the worked examples' records (seeded, so the files in this folder are reproducible):
python examples/declarations/make_records.py"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).parent


def schools(seed: int = 7) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for school, size in (("100201", 9), ("100202", 14), ("100203", 6), ("100204", 21)):
        for _ in range(size):
            rows.append(
                {
                    "school_id": school,
                    "sex": int(rng.choice([1, 2])),
                    "age": int(rng.integers(11, 17)),
                    "free_meals": int(rng.random() < 0.2),
                }
            )
    return pl.DataFrame(rows)


def meshblocks(seed: int = 11) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    eth_p = [0.62, 0.16, 0.08, 0.12, 0.02]
    rows = []
    for i in range(40):
        mb = f"{1200000 + 17 * i:07d}"
        for _ in range(int(rng.integers(3, 60))):
            rows.append(
                {
                    "meshblock_id": mb,
                    "sex": int(rng.choice([1, 2])),
                    "age_group": int(rng.choice(5, p=[0.19, 0.2, 0.19, 0.25, 0.17])),
                    "ethnicity": int(rng.choice(5, p=eth_p)) + 1,
                }
            )
    return pl.DataFrame(rows)


def areas(seed: int = 5) -> pl.DataFrame:
    """Persons of eight small areas: sex, age, race and marital status (nobody under 15 has
    married: the declaration's edit rule)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, size in enumerate((7, 11, 16, 24, 35, 52, 9, 30)):
        for _ in range(size):
            age = int(min(rng.gamma(2.2, 17.0), 99))
            if age < 15:
                marital = 1
            else:
                marital = int(rng.choice(3, p=[0.35, 0.5, 0.15])) + 1
            rows.append(
                {
                    "area_id": f"{5101 + i}",
                    "sex": int(rng.choice([1, 2])),
                    "age": age,
                    "race": int(rng.choice(4, p=[0.6, 0.2, 0.12, 0.08])) + 1,
                    "marital": marital,
                }
            )
    return pl.DataFrame(rows)


if __name__ == "__main__":
    schools().write_csv(HERE / "school_pupils.csv")
    meshblocks().write_csv(HERE / "meshblock_persons.csv")
    areas().write_csv(HERE / "area_persons.csv")
