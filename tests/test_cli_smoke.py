"""Every command on the smallest valid input, as a new user first runs it: each exits 0 and
none reports an internal error. ``tabrecon solvar`` raised on every input with its ``--out``
for a while and only its argument errors were tested; this pass runs what a user runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_run import EXE, run_cli

#: (command line, files it must write), in order: later steps read earlier steps' files
STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("synth --persons 200 --seed 3 --out p.csv", ("p.csv",)),
    ("tabulate p.csv --out t.parquet", ("t.parquet",)),
    ("check-tables t.parquet", ()),
    ("tables list", ()),
    ("tables describe P0120003", ()),
    ("reconstruct t.parquet --level block --out r.parquet", ("r.parquet", "r_blocks.csv")),
    ("agree p.csv r.parquet", ()),
    ("solvar t.parquet --recon r.parquet --level block --out sv.parquet", ("sv.parquet",)),
    ("reidentify --recon r.parquet --truth p.csv --out reid", ("reid",)),
    ("claims t.parquet --recon r.parquet --solvar r_blocks.csv --out c", ("c/summary.json",)),
    ("claims t.parquet --out cb", ("cb/summary.json",)),
    ("swap p.csv --out s.parquet", ("s.parquet",)),
    ("topdown p.csv --rho 4 --out td.parquet", ("td.parquet",)),
    # (withheld, not rounded: a rounded release's blocks can take minutes each to decide)
    ("tabulate p.csv --publication suppress:3 --out t3.parquet", ("t3.parquet",)),
    (
        "reconstruct t3.parquet --publication suppress:3 --level block --out r3.parquet",
        ("r3.parquet",),
    ),
    ("synth --schema households --persons 200 --seed 3 --out u.parquet", ("u.parquet",)),
    ("tabulate u.parquet --schema households --out hu.parquet", ("hu.parquet",)),
    (
        "reconstruct hu.parquet --schema households --out hr.parquet",
        ("hr.parquet", "hr_blocks.csv"),
    ),
    (
        "solvar hu.parquet --schema households --recon hr.parquet --level block --no-distance "
        "--out hsv.csv",
        ("hsv.csv",),
    ),
]


@pytest.mark.slow
def test_every_command_runs_on_the_smallest_valid_input(tmp_path: Path) -> None:
    for i, line_writes in enumerate(STEPS):
        line, writes = line_writes
        if i == 0:  # as a user starts it: a new process
            r = subprocess.run(
                EXE + line.split(), cwd=tmp_path, capture_output=True, text=True, timeout=600
            )
        else:  # the same, in this process (start-up costs 1.2-2.5 s a command)
            r = run_cli(line.split(), tmp_path)
        assert r.returncode == 0, (line, r.stderr[-2000:])
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, (line, r.stderr)
        for f in writes:
            assert (tmp_path / f).exists(), (line, f)


def test_the_command_list_reads_as_prose() -> None:
    """``tabrecon --help`` lists each command's first paragraph as one text the terminal wraps
    (not the docstring's own line breaks, which cut a sentence mid-line), with the docstrings'
    reST literals (````--schema````) shown plain, and each command's help likewise."""
    listing = run_cli(["--help"], width=250).stdout
    assert "``" not in listing
    synth = next(line for line in listing.splitlines() if " synth " in line)
    assert "with another --schema, that population's records" in synth  # one line, wide enough
    assert "``" not in run_cli(["synth", "--help"], width=80).stdout


def test_version_help_and_the_package_namespace() -> None:
    """Issue 91's manners: ``tabrecon --version`` prints the version; flags show no value
    placeholder (``--fresh <bool>`` read as if the flag took a value); ``dir(tabrecon)`` holds
    the public API only, none of the helpers the package loads it with."""
    import tabrecon

    got = run_cli(["--version"])
    assert got.returncode == 0 and got.stdout.strip() == f"tabrecon {tabrecon.__version__}"
    for argv in (["--help"], ["reconstruct", "--help"], ["tables", "--help"], ["dn", "--help"]):
        shown = run_cli(argv)
        assert shown.returncode == 0 and "<bool>" not in shown.stdout, argv
    assert "--no-verdicts" in run_cli(["reconstruct", "--help"]).stdout
    assert dir(tabrecon) == sorted(tabrecon.__all__)
    assert not {"sys", "importlib", "types", "Any", "TYPE_CHECKING", "annotations"} & set(
        dir(tabrecon)
    )
