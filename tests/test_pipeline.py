"""The demo chains every step and writes what it says; the CLI turns bad input into one line, exit
2."""

from __future__ import annotations

import json
import subprocess
import sys

from rich.console import Console

from tabrecon.audit.config import load_config
from tabrecon.audit.run import run_demo


def test_demo_runs_every_step(tmp_path):
    cfg = load_config(None, run={"seed": 1}, defenses={"specs": ["swap-lo"]})
    res = run_demo(
        tmp_path,
        persons=3000,
        seed=1,
        cfg=cfg,
        console=Console(file=open("/dev/null", "w")),
        show_progress=False,
    )
    for f in (
        "synthetic_county.parquet",
        "report.html",
        "summary.json",
        "config.toml",
        "results/reid_rates.csv",
        "results/agreement_block.csv",
        "results/defenses.csv",
        "work/chunk-000/tabulate.done.json",  # (the tables are made again on resume, not kept)
    ):
        assert (tmp_path / f).stat().st_size > 0, f
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert summ["agreement_block+tract"]["binned_pct"] > 90 and summ["certify"]["unique_blocks"] > 0
    assert (
        summ["reidentification"]["attack"]["all"]["putative"]
        == summ["persons"]
        == res.summary["persons"]
    )
    from tabrecon.shapes import maps_available

    if maps_available():  # the maps extra: made-up shapes, every block drawn
        assert (tmp_path / "synthetic_blocks.geojson").stat().st_size > 0
        assert summ["map"]["blocks_drawn"] == summ["certify"]["inhabited_blocks"]
        assert 'id="map-uniqueness"' in (tmp_path / "report.html").read_text()
    else:
        assert "map" not in summ


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "p.csv"
    bad.write_text(
        "block_geoid,sex,age,white,black,aian,asian,nhpi,sor,hispanic\n990010001001001,male,abc,1,0,0,0,0,0,0\n"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tabrecon.cli",
            "tabulate",
            str(bad),
            "--out",
            str(tmp_path / "t.parquet"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "line 2" in r.stderr and "age" in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tabrecon.cli",
            "reidentify",
            "--recon",
            str(bad),
            "--truth",
            str(bad),
            "--attacker",
            "nosuchfile.csv",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "nosuchfile.csv" in r.stderr and "Traceback" not in r.stderr
