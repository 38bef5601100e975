"""Shared fixtures: the real 2010 sample (skipped when ../shared is absent) and small synthetic
data."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REAL = SHARED / "data" / "census2010_rhdf_28tracts.csv.gz"
ORACLE = SHARED / "reference" / "sf1_person_cells.csv"


def pytest_configure(config):
    """One disk cache of derived arrays (:mod:`tabrecon.cache`) for the run, shared by its
    workers and the commands they start (set before xdist starts the workers, which inherit
    it), and never the developer's own: each run computes its entries once."""
    if "TABRECON_CACHE_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="tabrecon-test-cache-")
        os.environ["TABRECON_CACHE_DIR"] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


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
    from tabrecon.tables.persons import tabulate

    return tabulate(real_md)


def once_per_run(name: str, tmp_path_factory, worker_id: str, make):
    """``make()`` computed once for the whole run: under xdist the first worker to ask computes
    and pickles it into the run's shared temporary folder while the others wait on a lock, then
    read it (the pattern of pytest-xdist's docs, "session-scoped fixtures once"); alone, just
    ``make()``. The folder is this run's, so no value outlives the code that computed it."""
    if worker_id == "master":
        return make()
    import fcntl
    import pickle

    shared = tmp_path_factory.getbasetemp().parent  # the run's, common to its workers
    path = shared / f"{name}.pickle"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = make()
        part = path.with_suffix(".part")
        part.write_bytes(pickle.dumps(value))
        part.replace(path)
        return value


@pytest.fixture(scope="session")
def real_certs(real_path, tmp_path_factory, worker_id):
    """Reconstruction and certification of the real sample at both levels, in one program each
    (:func:`tabrecon.reconstruct`; shared by several tests, computed once per run): the records
    and the run (its ``blocks`` are certification's frame)."""

    def make():
        from tabrecon import reconstruct
        from tabrecon.schema import read_microdata
        from tabrecon.tables.persons import tabulate

        tables = tabulate(read_microdata(real_path))
        out = {}
        for lvl in ("block+tract", "block"):
            run = reconstruct(tables, lvl, certify=True, distance=True)
            out[lvl] = (run.records, run)
        return out

    return once_per_run("real_certs", tmp_path_factory, worker_id, make)


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
    from tabrecon.records.synth import SynthConfig, synthesize

    return synthesize(SynthConfig(persons=3000), seed=7)


#: Tests of more than about 15 s on 2 cores (measured with ``--durations`` on 2026-11-25), left
#: out of the quick tier ``python -m pytest -m "not slow"``; the full suite (CI) runs them. Marked
#: here in one place, beside the tests marked ``@pytest.mark.slow`` where they are written.
SLOW = (
    "test_defense_battery.py::test_every_defense_family_keeps_the_contract[dhc2023-like]",
    "test_defense_battery.py::test_every_defense_family_keeps_the_contract[rho=",
    "test_defense_battery.py::test_every_defense_family_keeps_the_contract[eps=",
    "[households]",  # the contract battery on housing units: Generate-then-Verify, about 60 s
    "test_cli_contract.py::",  # 176 invocations in one fixture (40 s; 9 of them subprocesses)
    "test_topdown.py::test_pl94_stage_on_the_real_sample",
    "test_claims.py::test_real_block_only_every_verified_claim_is_true",
    "test_reidentify.py::test_real_sample_nonmodal_precision_far_above_baselines",
    "test_audit.py::",
    "test_unit_claims.py::test_household_claims_command_writes_the_study_layout",
    "test_units_audit.py::",
    "test_reconstruct.py::test_real_block_tract_is_exact_and_unique",
    "test_certify.py::test_real_block_tract_every_block_certified",
    "test_frontier.py::test_frontier_command_writes_everything",
    "test_swapping.py::test_real_sample_swap_lo_does_not_defend",
    "test_unit_identities.py::test_derived_identities_imply_the_hand_written_person_ones",
    "test_unit_reconstruct.py::test_tabulate_of_reconstruct_is_the_tables",
    "test_ages.py::test_real_sample_claims_only_what_the_tables_determine",
    "test_faults.py::",
)


#: The longest test files, longest first (core-seconds in the suite on 2 cores, --durations=0,
#: 2026-11-29): collected first, they are handed to the workers first (xdist's loadfile with
#: --no-loadscope-reorder, pyproject) and the workers finish together. xdist's own order, by
#: number of tests, started the one-test interrupt load file (130-160 s) among the last.
LONGEST_FIRST = (
    "test_interrupt_load.py",  # 157 s
    "test_audit.py",  # 118
    "test_contract_battery.py",  # 84
    "test_cli_interrupts.py",  # 68
    "test_unit_reconstruct.py",  # 66
    "test_ages.py",  # 62
    "test_joint.py",  # 56
    "test_topdown.py",  # 53
    "test_faults.py",  # 49
    "test_frontier.py",  # 48
    "test_unit_claims.py",  # 43
    "test_quality.py",  # 43
    "test_cli_contract.py",  # 43
    "test_unit_identities.py",  # 42
    "test_certify.py",  # 37
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(s in item.nodeid for s in SLOW):
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as found


@pytest.fixture
def chromium(tmp_path) -> list[str]:
    """The command that runs Chromium headless with a profile of its own (skips when it is
    not installed; the README's test command installs it)."""
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium not installed (the README's test command installs it)")
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
