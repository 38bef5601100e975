"""``tabrecon download`` against a local server that answers as the Census API does: the county's
tables arrive whole, failed requests are retried, an interrupted download resumes without
refetching finished tracts, and API errors are named."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from tabrecon.errors import TabreconError
from tabrecon.schema.registry import population
from tabrecon.tables.download import api_name, download
from tabrecon.tables.persons import tabulate
from tabrecon.tables.published import name_2020, read_tables

TABLES = "P1,P3,P5,P12,PCT12"


class FakeAPI:
    """Serves a TableSet's values in the API's format; counts requests; can be told to fail."""

    def __init__(self, ts, name=api_name) -> None:
        self.requests: list[dict[str, str]] = []
        self.fail: dict[str, tuple[int, int]] = {}  # tract -> (code, times)
        self.url = ""
        self.ts = ts
        cols = {}
        for level, g in ts.grids.items():
            cols[level] = {name(c): j for j, c in enumerate(g.cells)}
        self.cols = cols

    def answer(self, q: dict[str, str]) -> tuple[int, str]:
        self.requests.append(q)
        inn = dict(part.split(":") for part in q["in"].split(" "))
        kind, code = q["for"].split(":")
        tract = inn.get("tract", code if kind == "tract" else None)
        if tract in self.fail and self.fail[tract][1] > 0:
            status, times = self.fail[tract]
            self.fail[tract] = (status, times - 1)
            return status, json.dumps({"error": "overloaded"})
        if q["get"] == "NAME" and q["for"] == "tract:*":
            tracts = sorted({g[5:11] for g in self.ts.grids["tract"].geoids})
            rows = [["NAME", "state", "county", "tract"]]
            rows += [[f"Tract {t}", inn["state"], inn["county"], t] for t in tracts]
            return 200, json.dumps(rows)
        variables = q["get"].split(",")
        level = "block" if kind == "block" else "tract"
        g = self.ts.grids[level]
        unknown = [v for v in variables if v not in self.cols[level]]
        if unknown:
            return 400, f"error: unknown variable '{unknown[0]}'"
        keys = ["state", "county", "tract"] + (["block"] if level == "block" else [])
        rows = [variables + keys]
        for i, geo in enumerate(g.geoids):
            if geo[5:11] != tract:
                continue
            vals = [str(int(g.values[i, self.cols[level][v]])) for v in variables]
            rows.append(
                vals + [geo[:2], geo[2:5], geo[5:11]] + ([geo[11:]] if level == "block" else [])
            )
        return 200, json.dumps(rows)


def _serve(fake: FakeAPI):

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            status, body = fake.answer(q)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_port}/data/dec"
    return server


@pytest.fixture(scope="module")
def county_md():
    """A small county with the FIPS codes of a real one (Guernsey County, Ohio): download
    refuses codes that no county has before any request."""
    from tabrecon.records.synth import SynthConfig, synthesize

    return synthesize(SynthConfig(persons=3000, state="39", county="059"), seed=7)


@pytest.fixture
def api(county_md):
    fake = FakeAPI(tabulate(county_md, TABLES))
    server = _serve(fake)
    yield fake
    server.shutdown()


def test_the_2020_dhc_is_fetched_under_its_2020_names(county_md, tmp_path):
    fake = FakeAPI(tabulate(county_md, "P1,P12,PCT12"), name_2020)
    server = _serve(fake)
    try:
        out = download(
            "39", "059", tmp_path / "dhc.parquet", "P1,P12,PCT12", base_url=fake.url, year=2020
        )
    finally:
        server.shutdown()
    got = read_tables(out)
    for level, g in fake.ts.grids.items():
        np.testing.assert_array_equal(got.grids[level].values, g.values)
    assert any("P12_049N" in q["get"] for q in fake.requests)


def test_a_county_downloads_whole_and_reads_back_identical(api, tmp_path):
    out = download("39", "059", tmp_path / "county.parquet", TABLES, base_url=api.url, pause=0)
    got, want = read_tables(out), api.ts
    for level, g in want.grids.items():
        h = got.grids[level]
        assert list(h.geoids) == list(g.geoids)
        for c in g.cells:
            np.testing.assert_array_equal(h.col(c), g.col(c), err_msg=f"{level} {c}")
    assert all("key" not in q for q in api.requests)


def test_failed_requests_are_retried_and_a_rerun_skips_finished_tracts(api, tmp_path):
    tracts = sorted({g[5:11] for g in api.ts.grids["tract"].geoids})
    api.fail[tracts[1]] = (503, 2)  # two failures, then answers
    download("39", "059", tmp_path / "a.parquet", TABLES, base_url=api.url, pause=0)
    api.fail[tracts[1]] = (503, 99)  # fails for good: the first tract is kept
    with pytest.raises(
        TabreconError, match=rf"tract 39059{tracts[1]}.*no answer from .* after 3 attempts"
    ):
        download("39", "059", tmp_path / "b.parquet", TABLES, base_url=api.url, retries=2, pause=0)
    assert (tmp_path / "b.parquet.parts" / f"{tracts[0]}.parquet").exists()
    api.fail.clear()
    api.requests.clear()
    download("39", "059", tmp_path / "b.parquet", TABLES, base_url=api.url, pause=0)
    fetched = {dict(p.split(":") for p in q["in"].split(" ")).get("tract") for q in api.requests}
    assert tracts[0] not in fetched  # finished before the failure: not fetched again
    with pytest.raises(TabreconError, match="state.*other|before"):
        download("39", "059", tmp_path / "b.parquet", "P1", base_url=api.url, pause=0)


def test_api_refusals_are_named(api, tmp_path):
    tracts = sorted({g[5:11] for g in api.ts.grids["tract"].geoids})
    api.fail[tracts[0]] = (400, 1)
    with pytest.raises(TabreconError, match=rf"tract 39059{tracts[0]}.*refused it \(HTTP 400"):
        download("39", "059", tmp_path / "c.parquet", TABLES, base_url=api.url, pause=0)
    with pytest.raises(TabreconError, match="--state must be 2 digits"):
        download("9", "001", tmp_path / "d.parquet", base_url=api.url)


def test_codes_no_county_has_are_refused_before_any_request(api, tmp_path):
    with pytest.raises(TabreconError, match=r"--state 99: not the FIPS code of a state"):
        download("99", "001", tmp_path / "e.parquet", TABLES, base_url=api.url)
    with pytest.raises(TabreconError, match=r"--county 999: no county of OH \(state 39\)"):
        download("39", "999", tmp_path / "e.parquet", TABLES, base_url=api.url)
    # a county of 2010 that the 2020 Census no longer has (Bedford city, VA)
    with pytest.raises(TabreconError, match="in the 2020 Census"):
        download("51", "515", tmp_path / "e.parquet", "P1", base_url=api.url, year=2020)
    with pytest.raises(TabreconError, match="--api 'ftp://x'"):
        download("39", "059", tmp_path / "e.parquet", TABLES, base_url="ftp://x")
    assert api.requests == []


def test_an_unreachable_server_is_a_network_failure_not_bad_input(tmp_path):
    import socket

    from tabrecon.errors import NetworkError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/data"
    with pytest.raises(NetworkError, match=rf"no answer from 127.0.0.1:{port} after 2 attempts"):
        download("39", "059", tmp_path / "f.parquet", TABLES, base_url=url, retries=1, pause=0)


def test_an_answer_about_another_place_is_refused(county_md, tmp_path):
    fake = FakeAPI(tabulate(county_md, TABLES))
    plain = fake.answer

    def elsewhere(q):  # the server files every row under another state
        status, body = plain(q)
        rows = json.loads(body) if status == 200 else None
        if rows and "block" in rows[0]:
            i = rows[0].index("state")
            for r in rows[1:]:
                r[i] = "40"
            body = json.dumps(rows)
        return status, body

    fake.answer = elsewhere
    server = _serve(fake)
    try:
        with pytest.raises(TabreconError, match="of another place .*state 40"):
            download("39", "059", tmp_path / "g.parquet", TABLES, base_url=fake.url, pause=0)
    finally:
        server.shutdown()


def test_a_countys_household_tables_download_under_the_layouts_api_names(tmp_path):
    """``download --schema households``: the 64 household tables, each cell requested under the
    API name of the Bureau's layout (H016A0003 as H016A003), read back equal to the tables of the
    units behind them; --year 2020 alone is sent to --release dhc-2020 (2020 ids are the DHC's
    own, never guessed from 2010's)."""
    import polars as pl

    from tabrecon.records.households import synthesize_households
    from tabrecon.records.synth import SynthConfig
    from tabrecon.tables.layout import layout
    from tabrecon.tables.reader import read_unit_tables
    from tabrecon.tables.spec import tabulate_units
    from tabrecon.tables.tableset import Grid, TableSet

    _, units = synthesize_households(SynthConfig(persons=1500, state="39", county="059"), seed=2)
    long = tabulate_units(units)
    wide = long.pivot(on="cell", index="geoid", values="value").sort("geoid")
    cells = [c for c in wide.columns if c != "geoid"]
    geoids = wide["geoid"].to_numpy().astype(str)
    tracts = np.unique(np.array([g[:11] for g in geoids]))
    ts = TableSet(
        {
            "block": Grid("block", geoids, np.array(cells), wide.select(cells).to_numpy()),
            "tract": Grid("tract", tracts, np.array([], dtype=str), np.zeros((tracts.size, 0))),
        },
        population=population("persons"),
    )
    spelled = dict(layout().select("cell", "api_name").iter_rows())
    fake = FakeAPI(ts, lambda c: spelled[c])
    server = _serve(fake)
    try:
        out = download(
            "39", "059", tmp_path / "hu.parquet", "all", base_url=fake.url, pause=0,
            schema="households",
        )  # fmt: skip
        with pytest.raises(TabreconError, match="fetch them with --release dhc-2020"):
            download("39", "059", tmp_path / "x.parquet", base_url=fake.url, year=2020,
                     schema="households")  # fmt: skip
    finally:
        server.shutdown()
    got = read_unit_tables(out, population("households")).to_frame().sort("geoid", "cell")
    assert got.equals(long.sort("geoid", "cell").with_columns(pl.col("value").cast(pl.Int64)))
    assert any("H016A003" in q["get"] for q in fake.requests)


def test_a_countys_dhc_household_tables_download_under_the_dhc_names(tmp_path):
    """``download --release dhc-2020 --schema households``: the DHC's own tables (H4A-V, P16A-V,
    P20, ...), each cell requested under the DHC layout's API name (H4A_001N), written with the
    DHC's cell ids and read back equal to the DHC tables of the units behind them."""
    import polars as pl

    from tabrecon.records.synth import SynthConfig
    from tabrecon.schema.registry import population
    from tabrecon.tables.layout import DHC_2020
    from tabrecon.tables.reader import read_unit_tables
    from tabrecon.tables.spec import tabulate
    from tabrecon.tables.tableset import Grid, TableSet

    pop = population("households").in_release("dhc-2020")
    units = pop.synthesize(SynthConfig(persons=600, state="39", county="059"), 2)
    want = tabulate(units)
    g = want["block"]
    tracts = np.unique(np.array([x[:11] for x in g.geoids]))
    ts = TableSet(
        {
            "block": g,
            "tract": Grid("tract", tracts, np.array([], dtype=str), np.zeros((tracts.size, 0))),
        },
        population=population("persons"),
    )
    spelled = dict(DHC_2020.frame().select("cell", "api_name").iter_rows())
    fake = FakeAPI(ts, lambda c: spelled[c])
    server = _serve(fake)
    try:
        out = download(
            "39", "059", tmp_path / "dhc.parquet", "all", base_url=fake.url, pause=0,
            schema="households", release="dhc-2020",
        )  # fmt: skip
    finally:
        server.shutdown()
    got = read_unit_tables(out, pop).to_frame().sort("geoid", "cell")
    assert got.equals(want.to_frame().sort("geoid", "cell").with_columns(pl.col("value")))
    asked = ",".join(q["get"] for q in fake.requests)
    assert "H4A_001N" in asked and "P16V_001N" in asked and "H004A0001" not in asked
