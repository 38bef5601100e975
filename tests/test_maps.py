"""Block shapes and the report's maps: every form read alike, bad files named, and every block
drawn in the colour of the figures in results/blocks.csv (synthetic county with synthetic
shapes; the real sample's tables on Guernsey County's TIGER/Line blocks)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.errors import InputError, TabreconError

pytest.importorskip("shapely", reason="the maps extra (pip install -e '.[maps]')")
pytest.importorskip("pyogrio", reason="the maps extra (pip install -e '.[maps]')")

import shapely  # noqa: E402

from tabrecon.report.maps import COLOURS, NO_RESIDENTS, Layer, block_classes  # noqa: E402
from tabrecon.shapes import read_shapes, synthetic_shapes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIGER = ROOT.parent / "shared" / "data" / "tiger" / "tl_2010_39059_tabblock10.zip"
GEOIDS = np.array(["990010001001000", "990010001001001", "990010001002000", "990010002001000"])


def _tabrecon(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``tabrecon ARGS``, run in this process (:func:`cli_run.run_cli`)."""
    return run_cli([str(a) for a in args], cwd)


def _geojson(path: Path, rows: list[tuple[object, dict]], key: str = "GEOID10") -> Path:
    feats = [{"type": "Feature", "properties": {key: g}, "geometry": geom} for g, geom in rows]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def _square(x: float) -> dict:
    return json.loads(shapely.to_geojson(shapely.box(x, 0, x + 1, 1)))


# -- reading -------------------------------------------------------------------------------------
def test_every_form_gives_the_same_blocks(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pyogrio.raw

    src = synthetic_shapes(GEOIDS, tmp_path / "s.geojson")
    want = read_shapes(src)
    assert sorted(want.geoid.tolist()) == sorted(GEOIDS.tolist())
    wkb = shapely.to_wkb(want.geometry)
    gpkg = tmp_path / "s.gpkg"
    pyogrio.raw.write(
        gpkg,
        wkb,
        [want.geoid.astype(object)],
        ["GEOID20"],
        driver="GPKG",
        geometry_type="Polygon",
        crs="EPSG:4269",
    )
    shp = tmp_path / "shp" / "tl_2010_99001_tabblock10.shp"
    shp.parent.mkdir()
    pyogrio.raw.write(
        shp, wkb, [want.geoid.astype(object)], ["GEOID10"], geometry_type="Polygon", crs="EPSG:4269"
    )
    import zipfile

    zipped = tmp_path / "tl_2010_99001_tabblock10.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for f in shp.parent.iterdir():
            z.write(f, f.name)
    gpq = tmp_path / "s.parquet"
    meta = {
        "version": "1.0.0",
        "primary_column": "geometry",
        "columns": {"geometry": {"encoding": "WKB", "geometry_types": ["Polygon"]}},
    }
    table = pa.table({"GEOID": want.geoid.tolist(), "geometry": list(wkb)})
    pq.write_table(table.replace_schema_metadata({"geo": json.dumps(meta)}), gpq)
    for p, key in ((gpkg, "GEOID20"), (zipped, "GEOID10"), (gpq, "GEOID")):
        got = read_shapes(p)
        assert got.key == key
        order = np.argsort(got.geoid)
        assert got.geoid[order].tolist() == sorted(want.geoid.tolist()), p
        same = shapely.equals(  # a shapefile turns rings clockwise: the same shape
            got.geometry[order], want.geometry[np.argsort(want.geoid)]
        )
        assert same.all(), p


@pytest.mark.skipif(not TIGER.exists(), reason="../shared/data/tiger not present")
def test_the_bureaus_tiger_zip_is_read():
    s = read_shapes(TIGER)
    assert (len(s), s.key, s.counties()) == (3769, "GEOID10", ["39059"])


@pytest.mark.parametrize(
    "rows, key, pattern",
    [
        ([("99001000100100", _square(0))], "GEOID10", r"row 1: '99001000100100' is not a 15-digit"),
        ([("990010001001000", _square(0))], "NAME", r"no block geoid column: looked for GEOID10"),
        (
            [("990010001001000", _square(0)), ("990010001001000", _square(1))],
            "GEOID10",
            r"block 990010001001000 appears 2 times",
        ),
        (
            [("990010001001000", {"type": "Point", "coordinates": [0, 0]})],
            "GEOID10",
            r"row 1 \(block 990010001001000\): a Point geometry",
        ),
    ],
)
def test_a_bad_shapes_file_is_named(tmp_path, rows, key, pattern):
    p = _geojson(tmp_path / "bad.geojson", rows, key)
    with pytest.raises(InputError, match=pattern) as e:
        read_shapes(p)
    assert str(p) in str(e.value)


def test_a_file_that_is_not_shapes_is_named(tmp_path):
    p = tmp_path / "county.csv"
    p.write_text("geoid,cell,value\n990010001001000,P0010001,3\n")
    with pytest.raises(InputError, match=r"county\.csv.*cannot read block shapes|no block geoid"):
        read_shapes(p)
    with pytest.raises(InputError, match="file not found"):
        read_shapes(tmp_path / "missing.zip")


def test_without_the_extra_the_message_says_what_to_install(monkeypatch):
    import tabrecon.shapes as shapes_mod

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pyogrio" else real(n, *a)
    )
    with pytest.raises(TabreconError, match=r"pip install -e \"\.\[maps\]\""):
        shapes_mod.require_maps()


# -- classes -------------------------------------------------------------------------------------
def test_block_classes_at_their_edges():
    df = block_classes(
        pl.DataFrame(
            {
                "block_geoid": [f"99001000100100{i}" for i in range(8)],
                "persons": [4, 4, 4, 4, 4, 0, 4, 4],
                "status": [
                    "unique",
                    "varies",
                    "unique",
                    "unique",
                    "unique",
                    "unique",
                    "undecided",
                    "unique",
                ],
                "singled_out": [0, 1, 2, 3, 4, 0, None, None],
            }
        )
    )
    assert df["uniqueness"].to_list() == [
        "one consistent population",
        "more than one",
        *["one consistent population"] * 3,
        NO_RESIDENTS,
        "not decided",
        "one consistent population",
    ]
    assert df["singled_out_class"].to_list() == [
        "none",
        "25-50%",
        "50-75%",
        "75% or more",
        "75% or more",
        NO_RESIDENTS,
        "not decided",
        "not decided",  # certified, but its claims were not computed
    ]


# -- the audit draws them ------------------------------------------------------------------------
def _drawn(doc: str, layer: Layer) -> dict[int, str]:
    """Row of results/blocks.csv -> fill of every block drawn in one map of the report (a
    ``<use>`` of the block's shape ``#b<row>``, held once in the page's ``<defs>``)."""
    fig = doc.split(f'id="map-{layer.value.replace("_", "-")}"')[1].split("</figure>")[0]
    return {
        int(i): fill for i, fill in re.findall(r'<use href="#b(\d+)" fill="(#[0-9a-f]{6})"', fig)
    }


def _check_colours(out: Path) -> pl.DataFrame:
    doc = (out / "report.html").read_text()
    blocks = pl.read_csv(
        out / "results" / "blocks.csv", schema_overrides={"block_geoid": pl.String}
    )
    summary = json.loads((out / "summary.json").read_text())
    for layer in Layer:
        drawn = _drawn(doc, layer)
        assert drawn, layer
        want = blocks[layer.value].to_list()
        bad = [(i, c) for i, c in drawn.items() if COLOURS[layer][want[i]] != c]
        assert not bad, (layer, bad[:5])
    assert int(blocks["singled_out"].sum()) == summary["claims"]["persons_singled_out"]
    assert int((blocks["status"] == "unique").sum()) == summary["certify"]["unique_blocks"]
    assert summary["map"]["blocks_drawn"] == len(_drawn(doc, Layer.UNIQUENESS))
    assert not re.search(r"\b\d{15}\b", doc), "a block geoid is in the report"
    # the first paragraph's numbers are the summary's, each linked to its table
    brief = doc.split('id="in-brief"')[1].split("</p>")[0]
    c, v = summary["certify"], summary["claims"]
    assert f'href="#tbl-solvar">{c["unique_persons"]:,} of {summary["persons"]:,}' in brief
    assert f'href="#tbl-claims">{v["persons_singled_out"]:,} residents' in brief
    assert 'href="#map"' in brief and 'id="tbl-solvar"' in doc and 'id="tbl-claims"' in doc
    return blocks


@pytest.fixture(scope="module")
def synthetic_county(tmp_path_factory):
    d = tmp_path_factory.mktemp("mapcounty")
    r = _tabrecon("synth", "--persons", "2500", "--seed", "3", "-o", d / "county.parquet")
    assert r.returncode == 0, r.stderr
    geoids = pl.read_parquet(d / "county.parquet")["block_geoid"].unique().to_numpy()
    synthetic_shapes(geoids, d / "blocks.geojson", seed=3)
    return d


@pytest.fixture(scope="module")
def mapped_audit(synthetic_county, tmp_path_factory):
    d, out = synthetic_county, tmp_path_factory.mktemp("mapped") / "a"
    r = _tabrecon(
        "audit",
        str(d / "county.parquet"),
        "--shapes",
        str(d / "blocks.geojson"),
        "--defenses",
        "",
        "-o",
        str(out),
        "--quiet",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_the_audit_maps_every_block_in_the_colour_of_its_figures(mapped_audit):
    blocks = _check_colours(mapped_audit)
    doc = (mapped_audit / "report.html").read_text()
    assert 'id="map"' in doc and "<title>" in doc and 'class="maplegend"' in doc
    assert len(_drawn(doc, Layer.UNIQUENESS)) == blocks.height  # every block has a shape
    assert "used only to score the attack" in doc  # records given: said what they were used for
    part = doc.split('id="map"')[1].split('<h2 id="')[0]
    # draws offline: no tiles, no script; the one kind of link is to the page's own shapes
    assert not re.search(r"https?:|src=|href=\"[^#]|<script", part)


def test_shapes_of_another_county_are_refused_before_any_work(synthetic_county, tmp_path):
    other = synthetic_shapes(np.array(["390590001001000"]), tmp_path / "other.geojson")
    r = _tabrecon(
        "audit",
        str(synthetic_county / "county.parquet"),
        "--shapes",
        str(other),
        "-o",
        str(tmp_path / "a"),
        "--quiet",
    )
    assert r.returncode == 2, r.stderr
    assert "none of its 1 blocks (county 39059)" in r.stderr and "county 99001" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "a" / "results").exists()
    r = _tabrecon(
        "audit",
        str(synthetic_county / "county.parquet"),
        "--shapes",
        str(tmp_path / "nope.zip"),
        "-o",
        str(tmp_path / "b"),
        "--quiet",
    )
    assert r.returncode == 2 and "nope.zip: file not found" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def guernsey(real_path, tmp_path_factory):
    """The acceptance run, on the real sample's tracts laid on Guernsey County's ten tracts
    (examples/maps/real_tables_on_tiger.py): tables in, an audit with the county's 3,769
    TIGER/Line shapes out; its folder and the records."""
    if not TIGER.exists():
        pytest.skip("../shared/data/tiger not present")
    d = tmp_path_factory.mktemp("guernsey")
    spec = importlib.util.spec_from_file_location(
        "real_tables_on_tiger", ROOT / "examples" / "maps" / "real_tables_on_tiger.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    recs = pl.read_csv(real_path, schema_overrides={"block_geoid": pl.String})
    moved = mod.borrow(recs, read_shapes(TIGER).geoid, tracts=10)  # the town's tract too
    moved.write_csv(d / "persons.csv")
    r = _tabrecon("tabulate", d / "persons.csv", "--tables", "published", "-o", d / "county.csv")
    assert r.returncode == 0, r.stderr
    r = _tabrecon(
        "audit", "--tables", d / "county.csv", "--shapes", TIGER, "-o", d / "a", "--quiet"
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return d / "a", moved


@pytest.mark.realdata
def test_real_tables_on_tiger_blocks_are_mapped_block_by_block(guernsey):
    out, moved = guernsey
    blocks = _check_colours(out)
    assert blocks.height == moved["block_geoid"].n_unique()
    assert (blocks["uniqueness"] == "one consistent population").all()  # the Bureau's solvar 0
    doc = (out / "report.html").read_text()
    assert "3,769 blocks" in doc
    assert "No confidential record was used" in doc


#: the most a county's report with its maps may weigh (issue 91: Guernsey's was 1.7 MB)
MAX_REPORT_BYTES = 1_000_000


@pytest.mark.realdata
def test_a_county_report_is_small_its_geometry_once_and_its_town_zoomed(guernsey):
    """Guernsey's 3,769 blocks: each shape written once (both maps and the insets draw it by
    reference), the report at most 1 MB, and the town (tract 9775, whose blocks are a few pixels
    on the county's map) drawn again zoomed under each map."""
    out, _ = guernsey
    doc = (out / "report.html").read_text()
    assert len(doc.encode()) <= MAX_REPORT_BYTES, len(doc.encode())
    assert doc.count(' d="') - doc.count('class="tract"') == 3_769  # one shape per block
    assert doc.count('<use href="#b') + doc.count('<use href="#n') == 2 * 3_769
    insets = re.findall(r'<figure class="inset" data-tract="(\d+)"><svg[^>]*viewBox="([^"]+)"', doc)
    assert ("39059977500" in {t for t, _ in insets}) and len(insets) % 2 == 0
    for _, box in insets:
        assert float(box.split()[2]) < 0.2 * 2000  # zoomed: a small part of the county's width


@pytest.mark.realdata
def test_the_zoomed_town_renders_in_headless_chromium(guernsey, tmp_path, chromium):
    """Looked at: the first inset alone, screenshotted, shows the town's blocks in the map's
    colours (drawn from the shared geometry, not blank)."""
    out, _ = guernsey
    doc = (out / "report.html").read_text()
    defs = doc[doc.index('<svg class="mapdefs"') : doc.index('<div class="maps">')]
    layer = doc[doc.index('<g class="blocks" id="layer-uniqueness">') :]
    layer = layer[: layer.index("</g>") + 4]
    inset = doc[doc.index('<figure class="inset"') :]
    inset = inset[: inset.index("</figure>") + 9].replace("width:240px", "")
    page = tmp_path / "inset.html"
    style = "<style>figure.inset{width:800px}</style>"
    hidden = f'<svg width="0" height="0">{layer}</svg>'  # referenced, as the map is in the page
    page.write_text(doc.split("<body>")[0] + style + f"<body>{defs}{hidden}{inset}</body></html>")
    shot = tmp_path / "inset.png"
    subprocess.run(
        chromium + [f"--screenshot={shot}", "--window-size=900,900", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    coloured = [
        tuple(int(c[i : i + 2], 16) for i in (1, 3, 5))
        for c in COLOURS[Layer.UNIQUENESS].values()
        if c != COLOURS[Layer.UNIQUENESS][NO_RESIDENTS]
    ]
    near = np.zeros(len(img), dtype=bool)
    for rgb in coloured:
        near |= np.abs(img - rgb).sum(axis=1) < 12
    assert near.mean() > 0.05, "the zoomed tract is not drawn"


def test_dense_tracts_are_zoomed_by_reference_and_shapes_written_once():
    """A county of one large tract and one town of 16 small blocks: the town is drawn again
    zoomed under each map by <use> of the map's own layer, every shape is in the page once."""
    import shapely as sh

    from tabrecon.report.maps import draw_maps
    from tabrecon.shapes import BlockShapes

    town = [sh.box(40 + i % 4, 40 + i // 4, 41 + i % 4, 41 + i // 4) for i in range(16)]
    rural = [
        sh.box(x, y, x + 10, y + 10).difference(sh.box(39.5, 39.5, 44.5, 44.5))
        for x in range(0, 100, 10)
        for y in range(0, 100, 10)
    ]
    geoids = [f"990010001001{i:03d}" for i in range(len(rural))]
    geoids += [f"990010002001{i:03d}" for i in range(len(town))]
    shapes = BlockShapes(
        np.array(geoids), np.array(rural + town, dtype=object), "t.geojson", "GEOID10"
    )
    blocks = block_classes(
        pl.DataFrame(
            {
                "block_geoid": geoids,
                "persons": [3] * len(geoids),
                "status": ["unique"] * len(geoids),
                "singled_out": [1] * len(geoids),
            }
        )
    )
    page = draw_maps(shapes, blocks)
    assert page.count("<path id=") == len(geoids)  # each shape once
    insets = re.findall(
        r'data-tract="(\d+)"><svg[^>]*viewBox="([^"]+)"[^>]*><use href="#([^"]+)"', page
    )
    assert [(t, ref) for t, _, ref in insets] == [
        ("99001000200", "layer-uniqueness"),
        ("99001000200", "layer-singled-out-class"),
    ]
    w = float(insets[0][1].split()[2])
    assert w < 0.1 * 2000  # the town's box, not the county's


# -- download --shapes ---------------------------------------------------------------------------
class _Files:
    """A local server of files by path, failing a path ``fail[path]`` times with HTTP 503."""

    def __init__(self, files: dict[str, bytes]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.files = files
        self.fail: dict[str, int] = {}
        self.requests: list[str] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                me.requests.append(self.path)
                if me.fail.get(self.path, 0) > 0:
                    me.fail[self.path] -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                body = me.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"not found")

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_port}"


def _zip_of(tmp_path: Path, geoids: np.ndarray) -> bytes:
    import zipfile

    import pyogrio.raw

    s = read_shapes(synthetic_shapes(geoids, tmp_path / "z.geojson"))
    d = tmp_path / "zshp"
    d.mkdir(exist_ok=True)
    pyogrio.raw.write(
        d / "b.shp",
        shapely.to_wkb(s.geometry),
        [s.geoid.astype(object)],
        ["GEOID10"],
        geometry_type="Polygon",
        crs="EPSG:4269",
    )
    z = tmp_path / "z.zip"
    with zipfile.ZipFile(z, "w") as f:
        for p in d.iterdir():
            f.write(p, p.name)
    return z.read_bytes()


def test_download_shapes_fetches_checks_and_keeps_the_file(tmp_path):
    name = "/geo/tl_2010_39059_tabblock10.zip"
    srv = _Files(
        {
            name: _zip_of(tmp_path, np.array(["390599771001000", "390599771001001"])),
            "/geo/other.zip": _zip_of(tmp_path, np.array(["390010001001000"])),
            "/geo/page.zip": b"<html>moved</html>",
        }
    )
    srv.fail[name] = 1  # a busy server is asked again
    run = tmp_path / "run"
    run.mkdir()

    def dl(*extra: str) -> subprocess.CompletedProcess:
        return _tabrecon(
            "download", "--state", "39", "--county", "059", "--shapes", *extra, cwd=run
        )

    r = dl("--shapes-url", srv.base + name)
    assert r.returncode == 0, r.stderr
    got = read_shapes(run / "tl_2010_39059_tabblock10.zip")
    assert got.counties() == ["39059"] and len(got) == 2
    assert srv.requests.count(name) == 2
    r = dl("--shapes-url", srv.base + name)  # already there and good: kept
    assert r.returncode == 0 and srv.requests.count(name) == 2
    for path, says in (
        ("/geo/other.zip", "not 39059"),
        ("/geo/page.zip", "cannot read block shapes"),
        ("/geo/missing.zip", "HTTP 404"),
    ):
        r = dl("--shapes-url", srv.base + path, "-o", "x.zip")
        assert r.returncode != 0 and says in r.stderr, (path, r.stderr)
        assert "Traceback" not in r.stderr
        assert not (run / "x.zip").exists() and not list(run.glob("x.part*"))
    r = dl("--tables", "P1")
    assert r.returncode == 2 and "--shapes fetches the block shapes alone" in r.stderr


def test_the_report_with_its_maps_renders_in_headless_chromium(mapped_audit, tmp_path, chromium):
    """Looked at as a reader would: every section and both maps are in the rendered page, the
    maps are drawn (coloured pixels), and no table header is a raw column name."""
    page = (mapped_audit / "report.html").resolve().as_uri()
    base = chromium
    dom = subprocess.run(
        base + ["--dump-dom", page], capture_output=True, text=True, timeout=120
    ).stdout
    doc = (mapped_audit / "report.html").read_text()
    sections = re.findall(r'<h2 id="([^"]+)"', doc)
    assert {"headline", "certification", "claims", "map", "glossary"} <= set(sections)
    for sid in [*sections, "in-brief", "map-uniqueness", "map-singled-out-class"]:
        assert f'id="{sid}"' in dom, sid
    for h in re.findall(r"<th[^>]*>([^<]*)</th>", dom):
        assert not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", h.strip()), h
    # the map section alone, screenshotted: the blocks are drawn in the legend's colours
    part = doc.split('<h2 id="map">')[1].split("<h2 ")[0]
    alone = tmp_path / "map.html"
    alone.write_text(doc.split("<body>")[0] + '<body><h2 id="map">' + part + "</body></html>")
    shot = tmp_path / "map.png"
    subprocess.run(
        base + [f"--screenshot={shot}", "--window-size=1400,1000", alone.as_uri()],
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    red = COLOURS[Layer.UNIQUENESS]["one consistent population"]
    rgb = tuple(int(red[i : i + 2], 16) for i in (1, 3, 5))
    assert (np.abs(img.astype(int) - rgb).sum(axis=1) < 12).mean() > 0.05, "no block drawn"


# -- every population with block geography is mapped ---------------------------------------------
_FAST = "[households]\nk_values = [1, 2]\nk_solutions = 5\nblocks = 5\n"

_BLOCK_TOML = """name = "dwellers"
unit = "dweller"
description = "Residents of census blocks by sex and age group"

[[attributes]]
name = "sex"
categories = [[1, "male"], [2, "female"]]

[[attributes]]
name = "age_group"
categories = [[0, "0-17"], [1, "18-64"], [2, "65+"]]

[[tables]]
name = "D1"
title = "Dwellers by sex by age group"
lines = [
  {label = "Total"},
  {label = "Male", where = {sex = ["male"]}},
  {label = "Male, 0-17", where = {sex = ["male"], age_group = ["0-17"]}},
  {label = "Male, 18-64", where = {sex = ["male"], age_group = ["18-64"]}},
  {label = "Male, 65+", where = {sex = ["male"], age_group = ["65+"]}},
  {label = "Female", where = {sex = ["female"]}},
  {label = "Female, 0-17", where = {sex = ["female"], age_group = ["0-17"]}},
  {label = "Female, 18-64", where = {sex = ["female"], age_group = ["18-64"]}},
  {label = "Female, 65+", where = {sex = ["female"], age_group = ["65+"]}},
]
"""


def _uniqueness_map_matches(out: Path, noun: str) -> pl.DataFrame:
    """The report has the uniqueness map alone (no claims over every block), every block of
    results/blocks.csv in its class's colour, hovers and legend in the population's words."""
    doc = (out / "report.html").read_text()
    blocks = pl.read_csv(
        out / "results" / "blocks.csv", schema_overrides={"block_geoid": pl.String}
    )
    drawn = _drawn(doc, Layer.UNIQUENESS)
    assert len(drawn) == blocks.height
    want = blocks[Layer.UNIQUENESS.value].to_list()
    assert all(COLOURS[Layer.UNIQUENESS][want[i]] == c for i, c in drawn.items())
    assert 'id="map-singled-out-class"' not in doc
    fig = doc.split('id="map-uniqueness"')[1].split("</figure>")[0]
    assert f" {noun}; " in fig and "claims not computed" not in fig
    assert noun == "residents" or "residents" not in fig
    summary = json.loads((out / "summary.json").read_text())
    assert summary["map"]["blocks_drawn"] == blocks.height and summary["map"]["noun"] == noun
    return blocks


@pytest.mark.parametrize(
    ("schema", "noun", "persons"),
    [("households", "housing units", 600), ("group_quarters", "residents", 20_000)],
)
def test_every_census_population_is_mapped_from_records_or_tables(tmp_path, schema, noun, persons):
    """audit --shapes of housing units (records) and group quarters (their published tables):
    one map, certified uniqueness, in the population's words."""
    r = _tabrecon(
        "synth", "--schema", schema, "--persons", persons, "--seed", "5", "-o", tmp_path / "r.csv"
    )
    assert r.returncode == 0, r.stderr
    geoids = pl.read_csv(tmp_path / "r.csv", schema_overrides={"block_geoid": pl.String})
    synthetic_shapes(geoids["block_geoid"].unique().to_numpy(), tmp_path / "b.geojson", seed=5)
    (tmp_path / "fast.toml").write_text(_FAST)
    given = ["r.csv"]
    if schema == "group_quarters":
        r = _tabrecon("tabulate", "r.csv", "--schema", schema, "-o", "t.csv", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        given = ["--tables", "t.csv"]
    r = _tabrecon(
        "audit",
        *given,
        "--schema",
        schema,
        "--shapes",
        "b.geojson",
        "-c",
        "fast.toml",
        "-o",
        "a",
        "--quiet",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    _uniqueness_map_matches(tmp_path / "a", noun)


def test_a_declared_population_of_blocks_is_mapped_and_one_of_schools_is_refused(tmp_path):
    toml = tmp_path / "dwellers.toml"
    toml.write_text(_BLOCK_TOML)
    rng = np.random.default_rng(7)
    geoids = np.array([f"9900100010010{i:02d}" for i in range(12)])
    recs = pl.DataFrame(
        {
            "block_geoid": rng.choice(geoids, 60),
            "sex": rng.choice(["male", "female"], 60),
            "age_group": rng.choice(["0-17", "18-64", "65+"], 60),
        }
    )
    recs.write_csv(tmp_path / "d.csv")
    synthetic_shapes(geoids, tmp_path / "b.geojson", seed=7)
    (tmp_path / "fast.toml").write_text(_FAST)
    args = ["--shapes", "b.geojson", "-c", "fast.toml", "--quiet"]
    r = _tabrecon("audit", "d.csv", "--schema", toml, *args, "-o", "a", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    blocks = _uniqueness_map_matches(tmp_path / "a", "dwellers")
    assert blocks["persons"].sum() == 60
    school = ROOT / "examples" / "declarations"
    r = _tabrecon(
        "audit",
        school / "school_pupils.csv",
        "--schema",
        school / "school.toml",
        *args,
        "-o",
        "s",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "placed by school" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "s").exists()


def test_audits_side_by_side_keep_their_figures_and_maps_apart(mapped_audit, tmp_path):
    """tabrecon compare (issue 89 item 5): each audit's county-level figures as its summary
    gives them, and each audit's maps, their shapes' ids kept apart on one page (two audits'
    maps each define #b0, #b1, ...); a folder that holds no audit is named."""
    import json
    import re

    summary = json.loads((mapped_audit / "summary.json").read_text())
    assert (mapped_audit / "maps.html").is_file()  # the audit keeps its maps for this
    r = _tabrecon("compare", mapped_audit, mapped_audit, "-o", tmp_path / "c.html")
    assert r.returncode == 0, r.stderr
    doc = (tmp_path / "c.html").read_text()
    c = summary["certify"]
    pct = 100.0 * c["unique_blocks"] / c["inhabited_blocks"]
    assert doc.count(f"{c['unique_blocks']:,} of {c['inhabited_blocks']:,} ({pct:.1f}%)") == 2
    assert "SF1 2010: persons (1)" in doc and "SF1 2010: persons (2)" in doc
    ids = re.findall(r'\bid="([^"]+)"', doc)
    assert len(ids) == len(set(ids)), "an id defined twice"
    refs = set(re.findall(r'href="#([^"]+)"', doc))
    assert refs and refs <= set(ids), sorted(refs - set(ids))[:3]
    assert any(i.startswith("a0-") for i in ids) and any(i.startswith("a1-") for i in ids)
    bad = _tabrecon("compare", mapped_audit, tmp_path, "-o", tmp_path / "d.html")
    assert bad.returncode == 2 and f"{tmp_path}: no summary.json" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "d.html").exists()
