"""Faults a long run meets: a full disk in mid-write, a part damaged on disk, a worker or the whole
program killed with SIGKILL. After each, a rerun finishes with results identical to an
uninterrupted run, never reads a damaged part, and says what it redid."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from cli_run import EXE

from tabrecon import reconstruct
from tabrecon.errors import TabreconError
from tabrecon.records.synth import SynthConfig, synthesize
from tabrecon.runner import RunOptions, notices
from tabrecon.schema import read_microdata
from tabrecon.tables.persons import tabulate
from tabrecon.tables.published import write_tables


@pytest.fixture(scope="module")
def county():
    """Tables of a county of several tracts, and its reconstruction made without any fault."""
    ts = tabulate(synthesize(SynthConfig(persons=9000), seed=5))
    assert len(ts.tracts()) >= 3
    return ts, _sorted(reconstruct(ts).records.to_frame())


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns)


def _parts(out: Path) -> list[Path]:
    return sorted(Path(str(out) + ".parts").glob("*.parquet"))


def test_a_full_disk_in_mid_run_loses_nothing_and_the_rerun_equals_a_clean_run(
    county, tmp_path, monkeypatch
):
    ts, want = county
    out = tmp_path / "r.parquet"
    real = pl.DataFrame.write_parquet
    calls = [0]

    def full(self, *a, **k):
        calls[0] += 1
        if calls[0] == 2:  # the second part: the disk fills while it is written
            Path(a[0] if a else k["file"]).write_bytes(b"PAR1 half a file")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    with pytest.raises(TabreconError, match=r"\.parquet: cannot be written \(No space left"):
        reconstruct(ts, run=RunOptions(out=out))
    monkeypatch.setattr(pl.DataFrame, "write_parquet", real)
    parts = Path(str(out) + ".parts")
    assert [p.name for p in parts.iterdir() if p.name.startswith(".")] == []  # no half file
    assert len(_parts(out)) == 1  # the first tract is kept
    said: list[str] = []
    with notices(said.append):
        got = reconstruct(ts, run=RunOptions(out=out))
    assert said and "1 of" in said[0] and "kept from an earlier run" in said[0]
    assert _sorted(got.records.to_frame()).equals(want)
    assert _sorted(read_microdata(out).to_frame()).equals(want)


@pytest.mark.parametrize("damage", ["corrupted", "truncated"])
def test_a_part_damaged_on_disk_is_redone_never_read(county, tmp_path, damage):
    ts, want = county
    out = tmp_path / "r.parquet"
    reconstruct(ts, run=RunOptions(out=out))
    victim = _parts(out)[1]
    data = bytearray(victim.read_bytes())
    if damage == "corrupted":
        data[len(data) // 2] ^= 0xFF  # still a Parquet file by its size and magic bytes
    else:
        data = data[: len(data) // 2]
    victim.write_bytes(bytes(data))
    said: list[str] = []
    with notices(said.append):
        got = reconstruct(ts, run=RunOptions(out=out))
    assert any("damaged on disk (checksum differs) and redone" in s for s in said), said
    assert victim.stem.split(".")[0] in " ".join(said)
    assert _sorted(got.records.to_frame()).equals(want)


def test_an_audit_stage_damaged_on_disk_is_redone(tmp_path):
    from tabrecon.audit.config import load_config
    from tabrecon.audit.run import audit
    from tabrecon.schema import write_microdata

    md = synthesize(SynthConfig(persons=1500), seed=2)
    write_microdata(md, tmp_path / "md.parquet")
    cfg = load_config(None, defenses={"specs": []})
    first = audit(tmp_path / "md.parquet", tmp_path / "au", cfg)
    solvar = tmp_path / "au" / "work" / "chunk-000" / "solvar.parquet"
    data = bytearray(solvar.read_bytes())
    data[len(data) // 2] ^= 0xFF
    solvar.write_bytes(bytes(data))
    said: list[str] = []
    with notices(said.append):
        again = audit(tmp_path / "md.parquet", tmp_path / "au", cfg, resume=True)
    assert any("certify redone, its output damaged on disk (solvar.parquet)" in s for s in said)
    assert "chunk-000/certify" not in again.summary["resumed_stages"]
    assert again.summary["certify"] == first.summary["certify"]
    assert again.summary["reidentification"] == first.summary["reidentification"]


# -- SIGKILL: a worker, the whole program ---------------------------------------------------------
def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A county whose tracts take a while on two workers, and its clean reconstruction."""
    d = tmp_path_factory.mktemp("faults")
    # 7 tracts of ~0.1 s each (30,000 persons in tracts of 2,500-6,000 cost 23 s a test)
    county = SynthConfig(persons=12_000, tract_min=1_200, tract_max=1_800)
    write_tables(tabulate(synthesize(county, seed=9)), d / "tables.parquet")
    clean = _reconstruct(d, "clean.parquet")
    assert clean.returncode == 0, clean.stderr
    return d


def _reconstruct(d: Path, out: str) -> subprocess.CompletedProcess:
    """``tabrecon reconstruct`` of the county on two workers, run to its end (resuming)."""
    args = ["reconstruct", "tables.parquet", "--out", out, "--workers", "2"]
    return subprocess.run(EXE + args, cwd=d, capture_output=True, text=True, timeout=900)


def _start(d: Path, out: str) -> tuple[subprocess.Popen, Path]:
    args = ["reconstruct", "tables.parquet", "--out", out, "--workers", "2", "--fresh"]
    p = subprocess.Popen(EXE + args, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p, d / f"{out}.parts" / "status.jsonl"


def _wait_for(p: subprocess.Popen, status: Path, lines: int) -> None:
    t0 = time.monotonic()
    while not status.exists() or len(status.read_text().splitlines()) < lines:
        assert p.poll() is None, "the run ended before the fault"
        assert time.monotonic() - t0 < 600
        time.sleep(0.05)


def _same_records(d: Path, out: str) -> None:
    want = _sorted(read_microdata(d / "clean.parquet").to_frame())
    assert _sorted(read_microdata(d / out).to_frame()).equals(want)


@pytest.mark.slow
def test_a_worker_killed_with_sigkill_is_survived(big):
    p, status = _start(big, "w.parquet")
    _wait_for(p, status, 1)
    # the pool's workers are forked by the fork server, a child of the program
    servers = [k for k in _children(p.pid) if "forkserver" in _cmdline(k)]
    workers = [w for k in servers for w in _children(k)]
    assert workers, "no worker process to kill"
    os.kill(workers[-1], signal.SIGKILL)
    _, err = p.communicate(timeout=900)
    assert p.returncode == 0, err.decode()
    _same_records(big, "w.parquet")
    lines = [json.loads(x) for x in status.read_text().splitlines()]
    assert all(x["status"] == "ok" for x in lines)


@pytest.mark.slow
def test_the_program_killed_with_sigkill_resumes_to_the_same_result(big):
    p, status = _start(big, "m.parquet")
    _wait_for(p, status, 2)
    family = [k for c in _children(p.pid) for k in [c, *_children(c)]]  # fork server, workers
    assert family
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    t0 = time.monotonic()  # nobody can terminate them now: they must see their program gone
    while (
        left := [k for k in family if Path(f"/proc/{k}").exists()]
    ) and time.monotonic() - t0 < 30:  # they look each second; 30: a loaded machine
        time.sleep(0.2)
    assert not left, f"processes left behind by the killed program: {left}"
    kept = {json.loads(x)["unit"] for x in status.read_text().splitlines() if x.strip()}
    again = _reconstruct(big, "m.parquet")
    assert again.returncode == 0, again.stderr
    assert f"{len(kept)} of" in again.stderr and "kept from an earlier run" in again.stderr
    _same_records(big, "m.parquet")
