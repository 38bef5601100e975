"""The 2020 DHC read in every form a county's tables come in (long, wide, Census API JSON,
data.census.gov CSV, the summary file's segments), and files of the other release or decade
named as such (issue 89 items 2 and the bad input)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from cli_run import run_cli

from tabrecon.errors import InputError
from tabrecon.schema.registry import population
from tabrecon.tables.layout import DHC_2020, segment_fields
from tabrecon.vocab import Release


def _write_dhc_folder(ts, folder: Path, st: str = "zz") -> Path:
    """A state's 2020 DHC distribution of ``ts`` (its blocks and tracts) as the technical
    documentation lays it out (chapter 2): a pipe-delimited geographic header ``zzgeo2020.dhc``
    (SUMLEV field 3, GEOCOMP 5, LOGRECNO 8, GEOCODE 10) and the segments ``zz000NN2020.dhc``
    holding each cell at its segment and place (segment_fields) after the five link fields,
    medians as published (``30.5``)."""
    from tabrecon.tables.spec import as_published

    folder.mkdir(parents=True, exist_ok=True)
    shown = as_published(ts.to_frame(), ts.population).with_columns(pl.col("value").cast(pl.String))
    text = {(g, c): v for g, c, v in shown.rows()}
    recs = ["|".join(["DHCST", st.upper(), "040", "", "00", "000", "01", "0000001", "", "99"])]
    logrec: dict[str, int] = {}
    for level, sumlev in (("tract", "140"), ("block", "750")):
        for geo in ts[level].geoids.tolist() if level in ts.grids else []:
            logrec[geo] = len(recs) + 1
            f = ["DHCST", st.upper(), sumlev, "", "00", "000", "01", f"{logrec[geo]:07d}", "", geo]
            recs.append("|".join(f + [geo[:2], geo[2:5]]))
    (folder / f"{st}geo2020.dhc").write_text("\n".join(recs) + "\n")
    place = segment_fields(DHC_2020)  # (the technical documentation's files 01, 02: a doctest)
    cells = sorted({c for _, c in text})
    at = {c: place[c] for c in cells if c in place}
    for seg in sorted({sg for sg, _ in at.values()}):
        width = 5 + max(ps for sg, ps in at.values() if sg == seg)
        lines = []
        for geo, n in logrec.items():
            row = ["DHCST", st.upper(), "000", f"{seg:02d}", f"{n:07d}"] + ["0"] * (width - 5)
            for c, (sg, ps) in at.items():
                if sg == seg and (geo, c) in text:
                    row[5 + ps - 1] = text[geo, c]
            lines.append("|".join(row))
        (folder / f"{st}{seg:05d}2020.dhc").write_text("\n".join(lines) + "\n")
    return folder


def _dhc_api_name(cell: str) -> str:
    return DHC_2020.frame().filter(pl.col("cell") == cell)["api_name"][0]


@pytest.mark.parametrize("name", ["households", "group_quarters", "persons"])
def test_a_dhc_county_reads_back_cell_for_cell_in_every_form(name, tmp_path):
    """The same county's DHC tables as a long file, a wide CSV of summary-file names
    (``H004A0001``), the Census API's JSON (``H4A_001N``, state/county/tract/block) and a
    data.census.gov CSV (GEO_ID, NAME, a row of labels) and the summary-file segments
    (``zzgeo2020.dhc``): each read with --release dhc-2020 into the same table set; an API file
    or a folder read without it is sent to --release dhc-2020."""
    import json

    from tabrecon.records.synth import SynthConfig
    from tabrecon.tables.published import write_tables
    from tabrecon.tables.reader import read_unit_tables
    from tabrecon.tables.spec import as_published, tabulate

    pop = population(name).in_release(Release.DHC_2020)
    size = {"households": 500, "group_quarters": 20_000, "persons": 1_000}[name]
    want = tabulate(pop.synthesize(SynthConfig(persons=size), 3))
    g = want["block"]
    names = {c: _dhc_api_name(c) for c in g.cells.tolist()}
    shown = as_published(want.to_frame(), pop).with_columns(pl.col("value").cast(pl.String))
    blocks = shown.filter(pl.col("geoid").str.len_chars() == 15)  # medians as "30.5"
    wide = blocks.pivot(on="cell", index="geoid", values="value").sort("geoid")
    cols = {c: wide[c].to_list() for c in g.cells.tolist()}
    geo = wide["geoid"]
    forms: dict[str, Path] = {}
    write_tables(want, tmp_path / "long.csv")
    forms["long"] = tmp_path / "long.csv"
    pl.DataFrame({"GEOID20": geo, **cols}).write_csv(tmp_path / "wide.csv")
    forms["wide"] = tmp_path / "wide.csv"
    api = pl.DataFrame({names[c]: v for c, v in cols.items()}).with_columns(
        geo.str.slice(0, 2).alias("state"),
        geo.str.slice(2, 3).alias("county"),
        geo.str.slice(5, 6).alias("tract"),
        geo.str.slice(11, 4).alias("block"),
    )
    rows = [api.columns, *[[str(x) for x in r] for r in api.rows()]]
    (tmp_path / "api.json").write_text(json.dumps(rows))
    forms["api"] = tmp_path / "api.json"
    dcg = pl.DataFrame(
        {"GEO_ID": "1000000US" + geo, "NAME": ["Block"] * len(geo)}
        | {names[c]: [str(x) for x in v] for c, v in cols.items()}
    )
    labels = pl.DataFrame({c: [f"Label of {c}"] for c in dcg.columns})
    pl.concat([labels, dcg]).write_csv(tmp_path / "dcg.csv")
    forms["data.census.gov"] = tmp_path / "dcg.csv"
    forms["summary-file segments"] = _write_dhc_folder(want, tmp_path / "zz")
    for form, path in forms.items():
        got = read_unit_tables(path, pop)
        assert got.population is pop, form
        whole = form in ("long", "summary-file segments")  # the others: block rows only
        a_long = want.to_frame().sort("geoid", "cell")
        if not whole:
            a_long = a_long.filter(pl.col("geoid").str.len_chars() == 15)
        assert got.to_frame().sort("geoid", "cell").equals(a_long), form
    if name != "persons":  # (persons read 2020 API names as SF1's numbers: download --year 2020)
        with pytest.raises(InputError, match="read the 2020 DHC's tables with --release dhc-2020"):
            read_unit_tables(tmp_path / "api.json", population(name))
    with pytest.raises(
        InputError, match="of the 2020 DHC, not of SF1 2010: read it with --release dhc"
    ):
        read_unit_tables(tmp_path / "zz", population(name))  # the folder too


def test_a_summary_file_folder_of_the_other_release_is_named_as_such(tmp_path):
    """An SF1 2010 folder read as the 2020 DHC (the cell ids are spelled alike: H0040001 is in
    both) is refused with the option that reads it, and a 2020 P.L. 94-171 folder holds no DHC
    tables."""
    from test_household_tables import _write_sf1_folder
    from test_sf1 import write_2020_pl

    from tabrecon.records.synth import SynthConfig, synthesize
    from tabrecon.tables.persons import tabulate as tabulate_persons
    from tabrecon.tables.reader import read_unit_tables
    from tabrecon.tables.spec import tabulate_units

    hu = population("households")
    _write_sf1_folder(tabulate_units(hu.synthesize(SynthConfig(persons=300), 2)), tmp_path / "sf1")
    with pytest.raises(
        InputError,
        match="distribution of SF1 2010, not of the 2020 DHC: read it with --release sf1-2010",
    ):
        read_unit_tables(tmp_path / "sf1", hu.in_release(Release.DHC_2020))
    write_2020_pl(
        tabulate_persons(synthesize(SynthConfig(persons=300), seed=2), "P8,P9,P10,P11"),
        tmp_path / "pl",
    )
    with pytest.raises(
        InputError, match="2020 P.L. 94-171 distribution: it holds none of the 2020 DHC's"
    ):
        read_unit_tables(tmp_path / "pl", population("persons").in_release(Release.DHC_2020))


def test_2010_block_shapes_with_the_2020_tables_are_refused_before_any_work(tmp_path):
    """Bad input of the other decade: the 2020 DHC is published for the 2020 blocks, renumbered
    since 2010; shapes keyed GEOID10 given with it are refused, naming the file and the
    shapes to fetch, before any stage runs."""
    pytest.importorskip("shapely", reason="the maps extra (pip install -e '.[maps]')")
    from tabrecon.records.synth import SynthConfig
    from tabrecon.shapes import synthetic_shapes
    from tabrecon.tables.published import write_tables
    from tabrecon.tables.spec import tabulate

    pop = population("households").in_release(Release.DHC_2020)
    ts = tabulate(pop.synthesize(SynthConfig(persons=300), 2))
    write_tables(ts, tmp_path / "dhc.csv")
    synthetic_shapes(ts["block"].geoids, tmp_path / "blocks2010.geojson")  # keyed GEOID10
    args = ["audit", "--tables", "dhc.csv", "--schema", "households", "--release", "dhc-2020"]
    r = run_cli([*args, "--shapes", "blocks2010.geojson", "-o", "a", "--quiet"], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "blocks2010.geojson" in r.stderr and "2010 blocks (GEOID10)" in r.stderr
    assert "--year 2020" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "a" / "results").exists()
