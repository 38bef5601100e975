"""Shared fixtures: the real 2010 sample (skipped when ../shared is absent) and small synthetic
data."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REAL = SHARED / "data" / "census2010_rhdf_28tracts.csv.gz"
ORACLE = SHARED / "reference" / "sf1_person_cells.csv"


@pytest.fixture(scope="session")
def real_path() -> Path:
    if not REAL.exists():
        pytest.skip("real sample ../shared/data/census2010_rhdf_28tracts.csv.gz not present")
    return REAL


@pytest.fixture(scope="session")
def real_md(real_path):
    from tabrecon.schema import read_microdata

    return read_microdata(real_path)


@pytest.fixture(scope="session")
def real_tables(real_md):
    from tabrecon.tables import tabulate

    return tabulate(real_md)


@pytest.fixture(scope="session")
def real_certs(real_tables):
    """Reconstruction and certification of the real sample at both levels (shared by several
    tests)."""
    from tabrecon.attacks.certify import certify
    from tabrecon.attacks.reconstruct import reconstruct

    out = {}
    for lvl in ("block+tract", "block"):
        run = reconstruct(real_tables, lvl)
        out[lvl] = (run.records, certify(real_tables, run.records, lvl))
    return out


@pytest.fixture(scope="session")
def oracle_path() -> Path:
    if not ORACLE.exists():
        pytest.skip("oracle ../shared/reference/sf1_person_cells.csv not present")
    return ORACLE


@pytest.fixture
def two_solution_block():
    """Two persons whose 2+ race combinations (White+Black, White+AIAN) can swap ages -- P12G and
    PCT12G pool all 2+ combinations -- in one block, and one person alone in another block."""
    from tabrecon.schema import CODE_OF_BITS, from_arrays

    return from_arrays(
        ["990010001001001", "990010001001001", "990010001001002"],
        [0, 0, 1],
        [30, 40, 50],
        [int(CODE_OF_BITS[0b000011]), int(CODE_OF_BITS[0b000101]), 1],
        [0, 0, 0],
    )


@pytest.fixture(scope="session")
def small_md():
    from tabrecon.synth import SynthConfig, synthesize

    return synthesize(SynthConfig(persons=3000), seed=7)
