"""The audit: config validation, the report, numbers equal to the individual steps, chunks that add
up, tables-only and mixed input, resume after a kill, retries, Dask, and the report in a real
browser."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.audit.chunks import MismatchError, plan_chunks
from tabrecon.audit.config import ConfigError, config_from_dict, load_config
from tabrecon.audit.run import audit
from tabrecon.errors import TabreconError
from tabrecon.runner import RunOptions
from tabrecon.schema import write_microdata
from tabrecon.schema.registry import population

FAST = {"defenses": {"specs": []}, "reconstruct": {"levels": ["block+tract"]}}
#: for tests of what does not depend on distances or claims (a third of an audit's time)
LEAN = {"certify": {"distance": False}, "claims": {"enabled": False}}


def cfg(**sections):
    data = {k: dict(v) for k, v in FAST.items()}
    for k, v in sections.items():
        data.setdefault(k, {}).update(v)
    return config_from_dict(data)


# -- configuration ---------------------------------------------------------------------------------
def test_unknown_key_names_key_and_allowed(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text("[run]\nsead = 3\n")
    with pytest.raises(
        ConfigError, match=r"a\.toml: unknown key run\.sead; allowed keys in \[run\]: .*seed"
    ):
        load_config(p)
    p.write_text("[runn]\nseed = 3\n")
    with pytest.raises(
        ConfigError, match=r"unknown section \[runn\]; allowed sections: run, reconstruct"
    ):
        load_config(p)


@pytest.mark.parametrize(
    "toml, pattern",
    [
        (
            '[reconstruct]\nlevels = ["tract"]\n',
            r"reconstruct\.levels = \['tract'\].*allowed values: block, block\+tract",
        ),
        (
            '[reidentify]\nattacker = "oracle"\n',
            r"reidentify\.attacker = 'oracle'.*allowed values: perfect, commercial",
        ),
        ('[defenses]\nspecs = ["rho=-1"]\n', r"defenses\.specs = 'rho=-1'.*positive number"),
        ('[defenses]\nspecs = ["noise"]\n', r"defenses\.specs = 'noise'.*swap-lo"),
        ('[defenses]\nspecs = ["swap=2"]\n', r"defenses\.specs = 'swap=2'.*rate in \(0, 1\]"),
        ('[defenses]\nspecs = ["eps=x"]\n', r"defenses\.specs = 'eps=x'.*positive number"),
        ("[run]\nworkers = 0\n", r"run\.workers = 0.*>= 1"),
        ('[run]\nworkers = "two"\n', r"run\.workers = 'two'.*whole number"),
        ('[run]\nscheduler = "localhost"\n', r"run\.scheduler = 'localhost'.*tcp://"),
        ("[run\n", r"not valid TOML"),
    ],
)
def test_impossible_values_are_named(tmp_path, toml, pattern):
    p = tmp_path / "c.toml"
    p.write_text(toml)
    with pytest.raises(ConfigError, match=pattern):
        load_config(p)


def test_config_roundtrip(tmp_path):
    c = load_config(None, run={"seed": 5}, defenses={"specs": ["swap-hi", "rho=2"]})
    p = tmp_path / "c.toml"
    p.write_text(c.to_toml())
    assert load_config(p) == c


def test_cli_bad_config_is_one_line(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[report]\ncolour = 1\n")
    r = run_cli(["audit", "x.csv", "--config", str(p)])
    assert r.returncode == 2
    assert "unknown key report.colour" in r.stderr and "Traceback" not in r.stderr


# -- the audit on synthetic data -------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_file(tmp_path_factory, small_md):
    p = tmp_path_factory.mktemp("in") / "county.parquet"
    write_microdata(small_md, p)
    return p


@pytest.fixture(scope="module")
def small_audit(tmp_path_factory, small_file):
    out = tmp_path_factory.mktemp("audit")
    c = cfg(
        run={"seed": 11},
        reconstruct={"levels": ["block", "block+tract"]},
        defenses={"specs": ["swap-lo"]},
    )
    return audit(small_file, out, c, show_progress=False)


def test_numbers_equal_the_individual_steps(small_audit, small_md):
    from tabrecon import reconstruct
    from tabrecon.attacks.certify import cumulative_solvar
    from tabrecon.attacks.reidentify import reidentify
    from tabrecon.metrics.agreement import agree
    from tabrecon.tables.persons import tabulate

    ts = tabulate(small_md)
    run = reconstruct(ts, "block+tract", certify=True, distance=True)
    rec, blocks = run.records, run.blocks
    res = reidentify(rec, small_md, "perfect", tables=ts, cert_blocks=blocks, seed=11)
    s = small_audit.summary
    a = agree(rec, truth=small_md)
    assert s["agreement_block+tract"]["binned_pct"] == pytest.approx(a.binned_pct)
    assert s["agreement_block+tract"]["exact_pct"] == pytest.approx(a.exact_pct)
    assert s["certify"]["unique_blocks"] == int((blocks["status"] == "unique").sum())
    lo, hi = cumulative_solvar(blocks)
    assert s["certify"]["cumulative_solvar_pct"] == [pytest.approx(lo), pytest.approx(hi)]
    direct = res.summary()
    for src in ("attack", "mdg", "prg", "truth"):
        for g in ("all", "nonmodal", "certified_uniques"):
            for k in ("attacker_records", "putative", "confirmed"):
                assert s["reidentification"][src][g][k] == direct[src][g][k], (src, g, k)
    assert s["persons"] == len(small_md)


def test_report_and_files(small_audit):
    out = small_audit.out
    html = (out / "report.html").read_text()
    # a synthetic county without shapes: the no-map hint says why, not how to download them
    assert 'id="no-map"' in html and "synthetic" in html and "download --state" not in html
    # the first paragraph quotes one of this release's own verified claims, no made-up one
    brief = html.split('id="in-brief"')[1].split("</p>")[0]
    claims = pl.read_csv(out / "results" / "claim_examples.csv")["claim"].to_list()
    assert "Black woman aged 25 to 29" not in brief
    assert any(f"“{c}”" in brief for c in claims), brief
    for key in (
        'id="headline"',
        'id="tbl-reid-all"',
        'id="tbl-solvar"',
        'id="tbl-defenses"',
        'id="tbl-release-agreement"',
        'id="fig-precision"',
        "data:image/png;base64,",
        "swap-lo",
        "Configuration",
        "ortools",
    ):
        assert key in html, key
    for f in (
        "agreement_block.csv",
        "agreement_block_tract.csv",
        "solvar_cdf.csv",
        "reid_rates.csv",
        "precision_cdf.csv",
        "defenses.csv",
    ):
        assert (out / "results" / f).exists(), f

    def no_nan(word: str) -> None:
        raise AssertionError(f"summary.json holds {word}: not JSON")

    # strict JSON (swap-lo has no rho: null, never NaN), as any parser reads it
    s = json.loads((out / "summary.json").read_text(), parse_constant=no_nan)
    # the stage rows add up: every stage once, what none timed as "other", the total last
    t = s["timings_s"]
    assert list(t)[-2:] == ["other", "total"] and t["other"] >= 0
    assert sum(v for k, v in t.items() if k != "total") >= t["total"] - 0.05
    assert s["timings_s"]["total"] > 0 and set(s["timings_s"]) >= {
        "tabulate",
        "reconstruct",
        "certify",
        "reidentify",
    }
    assert s["peak_memory"]["main_process_mib"] > 0
    d = pl.read_csv(out / "results" / "defenses.csv")
    assert d["defense"].to_list() == ["swap-lo"] and 0 < d["tvd_block"][0] <= 1
    # PRG without its draw noise, from the release's tables and from the unprotected ones
    for c in ("prg_expected_nonmodal_precision", "prg_original_nonmodal_precision"):
        assert 0 < d[c][0] < 100, c
    assert "from the unprotected tables" in html
    assert "34 SF1 person tables: P1, P6, P7, P8" in html  # the tables actually published, named


def _html_tables(doc: str) -> dict[str, list[list[str]]]:
    """Each table of the report by id: header row then body rows, cell texts without markers."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: dict[str, list[list[str]]] = {}
            self.cur: list[list[str]] | None = None
            self.cell: list[str] | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.cur = self.tables.setdefault(
                    dict(attrs).get("id") or f"t{len(self.tables)}", []
                )
            elif tag == "tr" and self.cur is not None:
                self.cur.append([])
            elif tag in ("td", "th") and self.cur is not None:
                self.cell = []

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None and self.cur is not None:
                self.cur[-1].append("".join(self.cell).replace("\xa0†", "").strip())
                self.cell = None
            elif tag == "table":
                self.cur = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    p = P()
    p.feed(doc)
    return p.tables


def test_report_numbers_equal_results_and_read_as_words(small_audit):
    """Every figure the report shows is its CSV's value written the one way the report writes
    numbers; no header is a raw column name; the glossary is there."""
    import re

    from tabrecon.report.defenses import NO_DEFENSE
    from tabrecon.report.page import COLUMNS, fmt_value, header

    out = small_audit.out
    doc = (out / "report.html").read_text()
    tables = _html_tables(doc)
    for tid, rows in tables.items():
        for h in rows[0]:
            assert not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", h), (tid, h)
    # the defense tables, cell by cell against results/defenses.csv; their first row, the
    # release as published, against summary.json's reidentification and certification
    d = pl.read_csv(out / "results" / "defenses.csv")
    s = json.loads((out / "summary.json").read_text())
    raw = {header(c): c for c in COLUMNS}
    for tid in ("tbl-defenses", "tbl-defense-accuracy", "tbl-defense-more"):
        head, *body = tables[tid]
        assert len(head) <= 8, (tid, head)  # readable at 1,400 px
        if body[0][0] == NO_DEFENSE:
            first, *body = body
            if tid == "tbl-defenses":
                r = s["reidentification"]
                for src in ("attack", "prg", "mdg"):
                    c = f"{src}_nonmodal_precision"
                    assert first[head.index(header(c))] == fmt_value(
                        r[src]["nonmodal"]["precision_pct"], c
                    ), c
                c = "certified_blocks"
                assert first[head.index(header(c))] == fmt_value(s["certify"]["unique_blocks"], c)
            else:
                assert first[head.index(header("tvd_block"))] == "1.000"
        for row, csv_row in zip(body, d.iter_rows(named=True), strict=True):
            for h, text in zip(head, row, strict=True):
                assert text == fmt_value(csv_row[raw[h]], raw[h]), (h, text, csv_row[raw[h]])
    # each release's agreement with the input by block size (Table 3 layout), against the CSV
    head, *body = tables["tbl-release-agreement"]
    for row, csv_row in zip(body, d.iter_rows(named=True), strict=True):
        assert row[0] == csv_row["defense"]
        for h, c in (("age bin, all (%)", ""), ("age bin, 1-9 (%)", "_1-9")):
            assert row[head.index(h)] == fmt_value(csv_row[f"agreement_binned_pct{c}"], h), h
    # Table 5 against results/reid_rates.csv, and the headline against Table 5
    rates = pl.read_csv(out / "results" / "reid_rates.csv").filter(
        (pl.col("group") == "nonmodal") & (pl.col("bin") == "all")
    )
    head, *body = tables["tbl-reid-nonmodal"]
    shown = {r[0]: r[head.index("precision %")] for r in body}
    from tabrecon.report.reid import LABELS

    for r in rates.filter(pl.col("source") != "rvr").iter_rows(named=True):
        assert shown[LABELS[r["source"]]] == fmt_value(r["precision_pct"], "precision_pct"), r[
            "source"
        ]
    assert LABELS["rvr"] not in shown  # the null model is not a precision: shown apart
    assert 'id="tbl-rvr"' in doc
    headline = doc[doc.index('id="headline"') : doc.index('id="publish"')]
    for src in ("attack", "mdg", "prg"):
        assert f"{shown[LABELS[src]]}%" in headline, src
    assert 'id="glossary"' in doc and "Solution variability" in doc and "zCDP" in doc
    assert "methods.md" not in doc
    # sections numbered by what is present; no figure of a stage that did not run
    numbers = [int(n) for n in re.findall(r'<h2 id="[^"]+">(\d+)\. ', doc)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 5, numbers
    assert "n/a%" not in doc and " MB" not in doc


def test_claims_figures_agree_across_report_csv_and_summary(small_audit):
    """Persons singled out by verified claims: the headline's number is summary.json's, the
    report's table by k is results/claims_by_k.csv, the examples name no block."""
    out = small_audit.out
    s = json.loads((out / "summary.json").read_text())
    c = s["claims"]
    assert 0 < c["persons_singled_out"] <= c["persons"] == s["persons"]
    assert "claims" in s["timings_s"]
    doc = (out / "report.html").read_text()
    # every tract's proofs ran to the end: nothing to say about candidates left unproven
    assert c["incomplete_tracts"] == 0 and "stopped before every candidate" not in doc
    headline = doc[doc.index('id="headline"') : doc.index('id="publish"')]
    assert f"{c['persons_singled_out']:,} of {c['persons']:,} persons" in headline
    by_k = pl.read_csv(out / "results" / "claims_by_k.csv")
    head, *body = _html_tables(doc)["tbl-claims"]
    col = head.index("persons singled out")
    assert [int(r[col].replace(",", "")) for r in body] == by_k["persons_covered"].to_list()
    assert 'id="tbl-claim-examples"' in doc and "Verified claim, singled out" in doc
    examples = pl.read_csv(out / "results" / "claim_examples.csv")
    assert 0 < examples.height <= 5 and "block" not in examples.columns


def test_report_never_lists_records(small_audit, small_md):
    html = (small_audit.out / "report.html").read_text()
    # no block geoid of the confidential input appears in the report
    assert not any(g in html for g in small_md.geoids)


def test_small_counts_are_marked(tmp_path, small_file):
    c = cfg(report={"small_cell_threshold": 1_000_000}, **LEAN)
    out = audit(small_file, tmp_path, c, show_progress=False).out
    html = (out / "report.html").read_text()
    assert 'class="small"' in html and "&dagger;" in html


def two_county_file(tmp_path: Path) -> tuple[Path, list]:
    from tabrecon.records.synth import SynthConfig, synthesize

    mds = [
        synthesize(SynthConfig(persons=1500, county=c), seed=i)
        for i, c in enumerate(("001", "003"))
    ]
    frames = []
    for i, m in enumerate(mds):
        write_microdata(m, tmp_path / f"c{i}.csv")
        frames.append(pl.read_csv(tmp_path / f"c{i}.csv", infer_schema=False))
    p = tmp_path / "two.csv"
    pl.concat(frames).write_csv(p)
    return p, mds


def test_chunks_stream_counties_and_add_up(tmp_path):
    from tabrecon import reconstruct
    from tabrecon.metrics.agreement import agree
    from tabrecon.tables.persons import tabulate

    p, mds = two_county_file(tmp_path)
    chunks = plan_chunks(p, 2000, pop=population("persons"))
    assert [c.counties for c in chunks] == [["99001"], ["99003"]]
    res = audit(p, tmp_path / "out", cfg(run={"chunk_persons": 2000}), show_progress=False)
    exact = sum(agree(reconstruct(tabulate(m), "block+tract").records, truth=m).exact for m in mds)
    s = res.summary
    assert len(s["chunks"]) == 2 and s["persons"] == sum(len(m) for m in mds)
    assert s["agreement_block+tract"]["persons"] == s["persons"]
    agr = pl.read_csv(tmp_path / "out" / "results" / "agreement_block_tract.csv")
    assert agr.filter(pl.col("bin") == "all")["exact"][0] == exact


def test_tables_only_from_sf1_folder(tmp_path, small_md):
    from test_sf1 import with_medians, write_official_layout

    from tabrecon.tables.persons import tabulate

    write_official_layout(with_medians(tabulate(small_md, "published"), small_md), tmp_path / "sf1")
    res = audit(None, tmp_path / "out", cfg(**LEAN), tables=tmp_path / "sf1", show_progress=False)
    s = res.summary
    assert s["persons"] == len(small_md) and s["certify"]["unique_blocks"] > 0
    assert "reidentification" not in s and s["recon_records"] == len(small_md)
    assert 'id="tbl-solvar"' in (tmp_path / "out" / "report.html").read_text()
    # the median ages are read and kept at block+tract too (they were left out with a note)
    assert not any("medians left out" in n for n in s["notes"])
    assert "medians left out" not in (tmp_path / "out" / "report.html").read_text()


def test_mixed_geographies_are_refused(tmp_path, small_file):
    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.tables.persons import tabulate
    from tabrecon.tables.published import write_tables

    other = synthesize(SynthConfig(persons=500, county="005"), seed=3)
    write_tables(tabulate(other), tmp_path / "t.parquet")
    with pytest.raises(
        MismatchError,
        match=r"different geographies: \d+ inhabited block\(s\) of .*county\.parquet are not in "
        r"the tables \(e\.g\. 99001",
    ):
        audit(
            small_file, tmp_path / "out", cfg(), tables=tmp_path / "t.parquet", show_progress=False
        )


# -- resume, retries, Dask -----------------------------------------------------------------------
def test_killed_run_resumes_without_losing_finished_units(tmp_path):
    from tabrecon.records.synth import SynthConfig, synthesize

    src = tmp_path / "county.parquet"
    # 4 tracts of 1,200-1,800 persons: two finish before the kill, two are left (16,000 persons
    # in tracts of 2,500-6,000 took 15 s of the suite)
    county = SynthConfig(persons=6_000, tract_min=1_200, tract_max=1_800)
    write_microdata(synthesize(county, seed=5), src)
    out = tmp_path / "out"
    # what is resumed is the runner's (every stage's): the stages after reconstruction are left
    # out to keep the test short (the resumed run was a whole audit of 16,000 persons)
    config = tmp_path / "audit.toml"
    config.write_text("[certify]\ndistance = false\n[claims]\nenabled = false\n")
    cmd = [
        sys.executable,
        "-m",
        "tabrecon.cli",
        "audit",
        str(src),
        "--out",
        str(out),
        "--config",
        str(config),
        "--defenses",
        "",
        "--quiet",
    ]
    status = out / "work" / "chunk-000" / "recon_block.parquet.parts" / "status.jsonl"
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    t0 = time.time()
    while time.time() - t0 < 240 and not (
        status.exists() and len(status.read_text().splitlines()) >= 2
    ):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = [json.loads(x)["unit"] for x in status.read_text().splitlines() if x.strip()]
    assert len(finished) >= 2
    part = "{}.persons-reconstruct.parquet"
    mtimes = {u: (status.parent / part.format(u)).stat().st_mtime_ns for u in finished}
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [json.loads(x) for x in status.read_text().splitlines() if x.strip()]
    units = [x["unit"] for x in lines]
    assert len(units) == len(set(units)), "a finished tract was solved again"
    for u, m in mtimes.items():
        assert (status.parent / part.format(u)).stat().st_mtime_ns == m
    s = json.loads((out / "summary.json").read_text())
    assert s["persons"] > 5_000 and s["recon_records"] == s["persons"]


def _flaky_worker(args):
    """Dies (the whole process) the first time it sees a unit; succeeds the second time."""
    unit, folder = args
    mark = Path(folder) / f"{unit}.seen"
    if not mark.exists():
        mark.write_text("x")
        os._exit(3)
    return {"unit": unit, "status": "ok"}, pl.DataFrame({"u": [unit]})


def test_killed_worker_unit_is_redone(tmp_path):
    from tabrecon.runner import run_units

    ran = run_units(
        ["a", "b", "c"],
        lambda u: functools.partial(_flaky_worker, (u, str(tmp_path))),
        tag="t",
        parts=tmp_path / "parts",
        run=RunOptions(workers=2),
        retries=1,
    )
    assert [s["status"] for s in ran.results] == ["ok", "ok", "ok"] and not ran.failed
    assert sorted(ran.frames) == ["a", "b", "c"]
    assert [f["u"][0] for f in ran.tables(["c", "a", "b"])] == ["c", "a", "b"]


_HALF_SENT = """
import functools, os, signal, struct, sys
from pathlib import Path

import polars as pl


def worker(args):
    unit, folder = args
    mark = Path(folder) / f"{unit}.seen"
    if unit == "b" and not mark.exists():
        mark.write_text("x")
        # die while sending a result, holding the result pipe's lock: the header of a message
        # whose body never comes (what SIGKILL or the OOM killer does at the wrong moment)
        frame = sys._getframe()
        while "result_queue" not in frame.f_locals:
            frame = frame.f_back
        queue = frame.f_locals["result_queue"]
        if queue._wlock is not None:
            queue._wlock.acquire()
        os.write(queue._writer.fileno(), struct.pack("!i", 100000) + b"x" * 10)
        os.kill(os.getpid(), signal.SIGKILL)
    return {"unit": unit, "status": "ok"}, pl.DataFrame({"u": [unit]})


if __name__ == "__main__":
    from tabrecon.runner import RunOptions, run_units

    folder = sys.argv[1]
    ran = run_units(
        list("abcdef"),
        lambda u: functools.partial(worker, (u, folder)),
        tag="t",
        run=RunOptions(workers=2),
    )
    print(",".join(s["status"] for s in ran.results), ",".join(sorted(ran.frames)))
"""


def test_a_worker_killed_while_sending_its_result_does_not_hang_the_run(tmp_path):
    """A worker killed half-way through sending a result (holding the result pipe's lock) leaves
    the process pool waiting for ever: its manager thread reads the rest of the message, the other
    workers wait for the lock. The pool's watch ends it as broken and the runner reruns its units
    (it hung the SIGKILL fault test once, both cores busy)."""
    script = tmp_path / "half_sent.py"
    script.write_text(_HALF_SENT)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok,ok,ok,ok,ok,ok", "a,b,c,d,e,f"]
    assert (tmp_path / "b.seen").exists()  # the worker did die the way it should
    assert "leaked" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def _busy_worker(unit):
    """Spins 0.3 s of CPU."""
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        pass
    return {"unit": unit, "status": "ok"}, None


def _busy(unit):
    """A unit's task: :func:`_busy_worker` of it."""
    return functools.partial(_busy_worker, unit)


def test_core_time_counts_what_units_spend_in_worker_processes():
    """The audit's per-stage core time adds the CPU its units spent in pool workers to its own
    (a forkserver's workers are not this process's children, so rusage would miss them)."""
    from tabrecon.runner import run_units, units_cpu, units_peak_mib

    before = units_cpu()
    ran = run_units(["a", "b", "c", "d"], _busy, tag="t", run=RunOptions(workers=2))
    assert [s["status"] for s in ran.results] == ["ok"] * 4
    assert 1.1 <= units_cpu() - before <= 3.0
    # and their peak memory: a worker is a Python process with tabrecon and polars loaded (the
    # audit's report said "largest worker process 0.0 MB" when it read rusage's children)
    assert 20 < units_peak_mib() < 4096
    before = units_cpu()
    run_units(["a"], _busy, tag="t", run=RunOptions(workers=1))  # in this process: not added
    assert units_cpu() == before


def test_dask_local_cluster_gives_the_same_numbers(tmp_path, small_file, small_audit):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as lc:
        # without distances and claims, which the figures compared do not read
        c = cfg(run={"seed": 11, "scheduler": lc.scheduler_address}, **LEAN)
        res = audit(small_file, tmp_path, c, show_progress=False)
    a, b = res.summary, small_audit.summary
    assert a["agreement_block+tract"] == b["agreement_block+tract"]
    assert a["certify"]["unique_blocks"] == b["certify"]["unique_blocks"]
    assert (
        a["reidentification"]["attack"]["nonmodal"] == b["reidentification"]["attack"]["nonmodal"]
    )
    # the workers' CPU is counted on Dask too: without it the reconstruction's (and in it the
    # certification's) core time would be the waiting main process's
    assert a["core_s"]["reconstruct"] > 0 and b["core_s"]["reconstruct"] > 0


# -- the report in a browser -----------------------------------------------------------------------
def test_report_renders_in_headless_chromium(small_audit, tmp_path, chromium):
    page = (small_audit.out / "report.html").resolve().as_uri()
    shot = tmp_path / "report.png"
    base = chromium
    subprocess.run(
        base + [f"--screenshot={shot}", "--window-size=1200,2400", page],
        capture_output=True,
        timeout=120,
    )
    dom = subprocess.run(
        base + ["--dump-dom", page], capture_output=True, text=True, timeout=120
    ).stdout
    for key in (
        'id="headline"',
        'id="tbl-reid-all"',
        'id="tbl-solvar"',
        'id="fig-precision"',
        'id="tbl-defenses"',
    ):
        assert key in dom, key
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("L"))
    assert img.shape[0] >= 2000 and img.shape[1] >= 1100
    assert (img < 128).mean() > 0.01, "the screenshot is blank"
    # the plots decoded: the page reports natural sizes for every image
    js = "Array.from(document.images).map(i => i.naturalWidth).join(',')"
    probe = tmp_path / "probe.html"
    probe.write_text(
        (small_audit.out / "report.html")
        .read_text()
        .replace(
            "</body>",
            "<pre id=probe></pre><script>document.getElementById('probe').textContent = "
            f"{js};</script></body>",
        )
    )
    dom2 = subprocess.run(
        base + ["--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    widths = dom2.split('<pre id="probe">')[1].split("</pre>")[0].split(",")
    assert len(widths) >= 3 and all(int(w) > 100 for w in widths), widths


# -- the real sample -------------------------------------------------------------------------------
@pytest.mark.realdata
def test_real_sample_audit_equals_the_individual_steps(
    real_path, real_md, real_tables, real_certs, tmp_path
):
    """Acceptance: the audit of the real sample reports the numbers of the individual steps
    (without distances and claims, which the steps compared here do not read; the claims' own
    real-sample check is in test_claims)."""
    from tabrecon.attacks.reidentify import reidentify
    from tabrecon.metrics.agreement import agree

    res = audit(
        real_path, tmp_path, cfg(run={"seed": 2010, "workers": 2}, **LEAN), show_progress=False
    )
    s = res.summary
    rec, cert = real_certs["block+tract"]
    assert s["agreement_block+tract"]["exact_pct"] == pytest.approx(
        agree(rec, truth=real_md).exact_pct
    )
    assert s["certify"]["unique_blocks"] == int((cert.blocks["status"] == "unique").sum()) == 8530
    direct = reidentify(
        rec, real_md, "perfect", tables=real_tables, cert_blocks=cert.blocks, seed=2010
    ).summary()
    for src in ("attack", "mdg", "prg"):
        for g in ("all", "nonmodal", "certified_uniques"):
            assert s["reidentification"][src][g]["confirmed"] == direct[src][g]["confirmed"], (
                src,
                g,
            )
    assert s["reidentification"]["attack"]["nonmodal"]["precision_pct"] > 80


def test_a_bad_county_is_reported_and_the_others_go_on(tmp_path):
    p, mds = two_county_file(tmp_path)
    lines = p.read_text().splitlines()
    header = lines[0].split(",")
    j = next(
        i for i, x in enumerate(lines) if x.startswith("99003")
    )  # first row of the second county
    row = lines[j].split(",")
    row[header.index("age")] = "abc"
    lines[j] = ",".join(row)
    p.write_text("\n".join(lines) + "\n")
    res = audit(p, tmp_path / "out", cfg(run={"chunk_persons": 2000}), show_progress=False)
    s = res.summary
    assert s["persons"] == len(mds[0])  # the good county is audited
    assert (
        len(s["failures"]) == 1
        and f"line {j + 1}" in s["failures"][0]
        and "chunk-001" in s["failures"][0]
    )
    assert "age" in s["failures"][0] and "abc" in s["failures"][0]
    assert "chunk-001" in (tmp_path / "out" / "report.html").read_text()


@pytest.fixture(scope="module")
def two_counties(tmp_path_factory):
    """A two-county file (two chunks at 2,000 persons) and its audit run chunk after chunk, the
    way it ran before chunks were pipelined: each chunk's last stage right after the others."""
    from tabrecon.audit import chunks

    d = tmp_path_factory.mktemp("two")
    p, mds = two_county_file(d)
    real = chunks.run_chunk

    def in_turn(*a, **k):
        part, last = real(*a, **k)
        if last is not None:
            last()
        return part, None

    mp = pytest.MonkeyPatch()
    mp.setattr(chunks, "run_chunk", in_turn)
    try:
        ref = audit(
            p,
            d / "ref",
            cfg(run={"chunk_persons": 2000, "workers": 2}, **LEAN),
            show_progress=False,
        )
    finally:
        mp.undo()
    return p, mds, ref.summary


def _same_numbers(a: dict, b: dict) -> None:
    keys = ("persons", "tracts", "table_values", "identity_checks", "recon_records")
    keys += ("recon_certified_unique", "agreement_block+tract", "certify", "reidentification")
    for k in (*keys, "attacker", "chunks"):
        assert a[k] == b[k], k
    assert a["failures"] == b["failures"] == []


def test_chunks_are_pipelined_and_give_the_numbers_of_one_after_another(
    tmp_path, two_counties, monkeypatch
):
    """While chunk 0's tracts are solved this process reads and tabulates chunk 1, and while
    chunk 1's are solved it reidentifies chunk 0: the same numbers as chunk after chunk."""
    from tabrecon.audit import chunks

    p, _, ref = two_counties
    events: list[tuple[str, str]] = []

    def traced(name, f):
        def g(*a, **k):
            ch = a[0].chunk.name  # the ChunkRunner (open_chunk's first argument too)
            events.append((f"{name} in", ch))
            try:
                return f(*a, **k)
            finally:
                events.append((f"{name} out", ch))

        return g

    monkeypatch.setattr(chunks, "open_chunk", traced("open", chunks.open_chunk))
    for name in ("reconstruct", "reidentify"):
        monkeypatch.setattr(
            chunks.ChunkRunner, name, traced(name, getattr(chunks.ChunkRunner, name))
        )
    res = audit(
        p,
        tmp_path / "o",
        cfg(run={"chunk_persons": 2000, "workers": 2}, **LEAN),
        show_progress=False,
    )
    _same_numbers(res.summary, ref)
    at = {e: i for i, e in enumerate(events)}
    c0, c1 = "chunk-000", "chunk-001"
    assert (
        at["reconstruct in", c0]
        < at["open in", c1]
        < at["open out", c1]
        < at["reconstruct out", c0]
    )
    assert (
        at["reconstruct in", c1]
        < at["reidentify in", c0]
        < at["reidentify out", c0]
        < at["reconstruct out", c1]
    )


def test_a_chunk_lost_in_its_last_stage_is_reported_and_the_others_go_on(
    tmp_path, two_counties, monkeypatch
):
    """Chunk 0's reidentification, run while chunk 1 is solved, fails: chunk 0 is reported lost
    (none of its numbers merged), chunk 1 is audited in full."""
    from tabrecon.audit import chunks

    p, mds, ref = two_counties
    real = chunks.ChunkRunner.reidentify

    def fails_first(self, *a, **k):
        if self.chunk.index == 0:
            raise TabreconError("the attacker's file vanished")
        return real(self, *a, **k)

    monkeypatch.setattr(chunks.ChunkRunner, "reidentify", fails_first)
    s = audit(
        p,
        tmp_path / "o",
        cfg(run={"chunk_persons": 2000, "workers": 2}, **LEAN),
        show_progress=False,
    ).summary
    assert s["persons"] == len(mds[1])
    assert len(s["failures"]) == 1 and "chunk-000" in s["failures"][0]
    assert "vanished" in s["failures"][0]


def test_an_interrupt_in_the_stage_left_to_the_next_chunk_resumes_to_the_same_numbers(
    tmp_path, two_counties, monkeypatch
):
    """Ctrl-C lands in chunk 0's reidentification while chunk 1's tracts are solved: the run
    stops as interrupted, and resuming it gives the numbers of an uninterrupted run."""
    from tabrecon.audit import chunks
    from tabrecon.interrupts import Interrupted

    p, _, ref = two_counties
    real = chunks.ChunkRunner.reidentify

    def interrupted(self, *a, **k):
        if self.chunk.index == 0:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    c = cfg(run={"chunk_persons": 2000, "workers": 2}, **LEAN)
    monkeypatch.setattr(chunks.ChunkRunner, "reidentify", interrupted)
    with pytest.raises(Interrupted):
        audit(p, tmp_path / "o", c, show_progress=False)
    assert not (tmp_path / "o" / "work" / "chunk-000" / "reidentify.done.json").exists()
    monkeypatch.setattr(chunks.ChunkRunner, "reidentify", real)
    again = audit(p, tmp_path / "o", c, show_progress=False, resume=True)
    _same_numbers(again.summary, ref)


def test_a_release_without_tract_tables_is_certified_as_block_tables(tmp_path, small_md):
    from tabrecon.tables.persons import tabulate
    from tabrecon.tables.published import write_tables

    write_tables(tabulate(small_md, "block"), tmp_path / "blocks.parquet")
    fast = cfg(**LEAN)  # many blocks vary: no distance maximisation; claims are not asked about
    res = audit(
        None, tmp_path / "out", fast, tables=tmp_path / "blocks.parquet", show_progress=False
    )
    assert res.summary["certify"]["level"] == "block"  # not "block+tract": there are none
    assert any("(block)" in figure for figure, _ in res.headline())
    # what the run did other than asked is kept for the reader, not only printed
    said = [n for n in res.summary["notes"] if "no tract tables" in n]
    assert said and said[0] in (tmp_path / "out" / "report.html").read_text()
    kept = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert kept["notes"] == res.summary["notes"]


def test_dask_workers_import_the_engine_when_the_client_connects():
    """Connecting starts every worker importing what the units need, so a run's first units
    do not wait for it (issue 40: the client's and the workers' fixed costs cap the scaling)."""
    distributed = pytest.importorskip("distributed")
    from tabrecon.runner import WARM_MODULES, dask_client

    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as lc:
        with distributed.Client(lc.scheduler_address) as probe:
            cold = probe.run(lambda: [m for m in WARM_MODULES if m in sys.modules])
        assert all(v == [] for v in cold.values())  # nothing imported them before
        client = dask_client(lc.scheduler_address)
        try:
            deadline = time.monotonic() + 120
            while True:
                warm = client.run(lambda: all(m in sys.modules for m in WARM_MODULES))
                if len(warm) == 2 and all(warm.values()) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert len(warm) == 2 and all(warm.values())
        finally:
            client.close()


def _slow_worker(args):
    """Writes when it starts, then sleeps 0.5 s."""
    unit, folder = args
    (Path(folder) / f"{unit}.started").write_text("x")
    time.sleep(0.5)
    return {"unit": unit, "status": "ok"}, pl.DataFrame({"u": [unit]})


@pytest.mark.parametrize("workers", [1, 2])
def test_meanwhile_runs_once_while_the_units_run(tmp_path, workers):
    """The caller's own work runs once per run_units call: with workers, after the units are
    handed out (some unit has started by the time it ends, waited for up to 60 s so a loaded
    machine cannot fail it); in this process, before them; after a resume with nothing left,
    on its own. An exception from it stops the run and reaches the caller."""
    from tabrecon.runner import run_units

    calls: list[list[str]] = []

    def meanwhile() -> None:
        deadline = time.monotonic() + 60
        while workers > 1 and not list(tmp_path.glob("*.started")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        calls.append(sorted(p.stem for p in tmp_path.glob("*.started")))

    job = lambda u: functools.partial(_slow_worker, (u, str(tmp_path)))  # noqa: E731
    parts = tmp_path / "parts"
    ran = run_units(
        ["a", "b", "c"],
        job,
        tag="t",
        parts=parts,
        run=RunOptions(workers=workers),
        meanwhile=meanwhile,
    )
    assert [s["status"] for s in ran.results] == ["ok"] * 3
    assert len(calls) == 1
    assert calls[0] != [] if workers > 1 else calls[0] == []  # handed out / not yet run
    run_units(
        ["a", "b", "c"],
        job,
        tag="t",
        parts=parts,
        run=RunOptions(workers=workers),
        meanwhile=meanwhile,
    )
    assert len(calls) == 2  # everything resumed: still called, once

    def failing() -> None:
        raise TabreconError("the tables' file could not be written")

    with pytest.raises(TabreconError, match="could not be written"):
        run_units(
            ["d", "e"],
            job,
            tag="t",
            parts=tmp_path / "p2",
            run=RunOptions(workers=workers),
            meanwhile=failing,
        )


def test_reidentification_truth_side_is_made_once_while_reconstructing(
    tmp_path, small_file, monkeypatch
):
    """The audit makes reidentification's truth side while the workers reconstruct and the
    stage uses it (not made again), and a rerun that resumes the stage makes none."""
    from tabrecon.attacks import reidentify as reid

    calls = []
    real = reid.truth_side
    monkeypatch.setattr(reid, "truth_side", lambda *a, **k: calls.append(1) or real(*a, **k))
    c = cfg(run={"seed": 11, "workers": 2}, **LEAN)
    res = audit(small_file, tmp_path / "a", c, show_progress=False)
    assert calls == [1]
    times = res.summary["timings_s"]
    assert times["tabulate"] > 0 and times["reidentify"] > 0
    again = audit(small_file, tmp_path / "a", c, show_progress=False, resume=True)
    assert calls == [1] and again.summary["reidentification"] == res.summary["reidentification"]


def test_the_no_map_hint_fits_the_place():
    """Real blocks without shapes are told how to get them; synthetic ones (state 99) why none."""
    from tabrecon.report.html import _made_up

    assert _made_up(pl.DataFrame({"block_geoid": ["990010001001000"]}))
    assert not _made_up(pl.DataFrame({"block_geoid": ["390590001001000", "990010001001000"]}))


def _numbers(summary: dict) -> dict:
    """A summary without what differs between two runs of the same inputs: timings, paths,
    versions."""
    skip = {"timings_s", "core_s", "peak_memory", "versions", "command", "input", "config", "map"}

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in skip and "seconds" not in k}
        return [strip(x) for x in o] if isinstance(o, list) else o

    return strip(summary)


def test_two_seeded_demos_give_the_same_report(tmp_path):
    """Issue 91 item 4: `demo --seed 3 --noise seeded` twice gives the same numbers and the same
    figures (TopDown's noise drawn from the seed); a noise source that does not exist is
    refused before any work."""
    import base64
    import re

    for d in ("a", "b"):
        r = run_cli(
            [
                *("demo", "--persons", "800", "--seed", "3", "--noise", "seeded"),
                *("--draws", "2", "--out", d, "--quiet"),
            ],
            tmp_path,
        )
        assert r.returncode == 0, r.stderr[-2000:]
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("a", "b"))
    assert _numbers(a) == _numbers(b)
    assert a["config"]["defenses"]["noise"] == "seeded"
    figs = [
        [
            base64.b64decode(x)
            for x in re.findall(r'base64,([^"]+)"', (tmp_path / d / "report.html").read_text())
        ]
        for d in ("a", "b")
    ]
    assert figs[0] and figs[0] == figs[1]
    bad = run_cli(["demo", "--persons", "800", "--noise", "loud", "--out", "c"], tmp_path)
    assert bad.returncode == 2 and "defenses.noise = 'loud'" in bad.stderr, bad.stderr
    assert not (tmp_path / "c").exists()


def test_defenses_drawn_several_times_are_reported_as_median_and_range(tmp_path):
    """Issue 91 item 4: `--draws 3` protects the records three times with each randomized
    defense (seeds seed, seed + 1, seed + 2): three rows in results/defenses.csv, one row per
    defense in the report with its median and range; a draw count out of range is refused."""
    from tabrecon.records.synth import SynthConfig, synthesize

    write_microdata(synthesize(SynthConfig(persons=900), seed=5), tmp_path / "p.csv")
    args = ["audit", "p.csv", "--defenses", "swap-hi", "--draws", "3", "--out", "a", "--quiet"]
    r = run_cli(args, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = pl.read_csv(tmp_path / "a" / "results" / "defenses.csv")
    assert rows["defense"].to_list() == ["swap-hi", "swap-hi#2", "swap-hi#3"]
    assert rows["tvd_block"].n_unique() > 1  # three different swaps
    doc = (tmp_path / "a" / "report.html").read_text()
    assert (
        "swap-hi (3 draws)" in doc and "swap-hi#2" not in doc.split('id="tbl-defenses"')[1][:3000]
    )
    lo, hi = rows["tvd_block"].min(), rows["tvd_block"].max()
    assert f"({lo:.3g}-{hi:.3g})" in doc, (lo, hi)
    # the headline speaks of the defense once, in medians over its draws
    head = doc.split('id="headline"')[1].split("</ul>")[0]
    assert head.count("With <b>swap-hi</b> (3 draws: medians, ranges in brackets)") == 1, head
    assert "swap-hi#" not in head
    bad = run_cli([*args[:-3], "--draws", "0", "--out", "b"], tmp_path)
    assert bad.returncode == 2 and "defenses.draws = 0" in bad.stderr, bad.stderr
