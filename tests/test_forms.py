"""The registry of published-table forms (:mod:`tabrecon.tables.forms`): every form reaches both
readers, a ZIP as downloaded reads as what it holds, and errors name the file inside the ZIP."""

from __future__ import annotations

import contextlib
import zipfile
from pathlib import Path

import polars as pl
import pytest
from cli_run import run_cli
from test_household_tables import _write_sf1_folder
from test_published import _api_name, _same, _wide

from tabrecon.errors import InputError
from tabrecon.schema.registry import population
from tabrecon.tables import forms
from tabrecon.tables.persons import tabulate
from tabrecon.tables.published import read_tables, write_tables
from tabrecon.tables.reader import read_unit_tables
from tabrecon.tables.sf1 import distribution_files
from tabrecon.tables.tableset import TableSet


@pytest.fixture(scope="module")
def both(small_md):
    from tabrecon.records.households import synthesize_households
    from tabrecon.records.synth import SynthConfig
    from tabrecon.tables.spec import tabulate_units

    md, units = synthesize_households(SynthConfig(persons=600), seed=5)
    return tabulate(md, "published"), tabulate_units(units)


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _dcg(ts: TableSet) -> bytes:
    """Block tables as a data.census.gov download's data file: GEO_ID, NAME, a row of labels."""
    d = _wide(ts, "block", _api_name)
    d = d.with_columns(
        ("1000000US" + pl.col("geoid")).alias("GEO_ID"), pl.lit("Block 1").alias("NAME")
    ).drop("geoid")
    labels = pl.DataFrame({c: [f"Label of {c}"] for c in d.columns})
    return pl.concat([labels, d]).write_csv().encode()


def test_the_built_in_forms_in_the_order_they_are_tried():
    assert [f.name for f in forms.forms()] == ["folder", "zip", "json", "table"]
    with pytest.raises(ValueError, match="registered already"):
        forms.register_form(forms.forms()[0])


def test_a_data_census_gov_zip_reads_as_its_data_file(both, tmp_path):
    persons, _ = both
    z = _zip(
        tmp_path / "productDownload_2026.zip",
        {
            "DECENNIALSF12010.P12-Data.csv": _dcg(persons),
            "DECENNIALSF12010.P12-Column-Metadata.csv": b"Column Name,Label\nGEO_ID,Geography\n",
            "DECENNIALSF12010.P12-Table-Notes.txt": b"notes\n",
        },
    )
    _same(TableSet({"block": persons["block"]}, population=population("persons")), read_tables(z))


def test_a_long_file_in_a_zip_reads_for_persons_and_housing(both, tmp_path):
    persons, housing = both
    write_tables(persons, tmp_path / "p.csv.gz")
    z = _zip(
        tmp_path / "release.zip",
        {
            "release/persons.csv.gz": (tmp_path / "p.csv.gz").read_bytes(),
            "release/README.txt": b"tables\n",
        },
    )
    _same(persons, read_tables(z))
    zh = _zip(tmp_path / "housing.zip", {"h.csv": housing.write_csv().encode()})
    got = read_unit_tables(zh, population("households")).to_frame().sort("geoid", "cell")
    want = housing.sort("geoid", "cell").with_columns(pl.col("value").cast(pl.Int64))
    assert got.select("geoid", "cell", "value").equals(want.select("geoid", "cell", "value"))


def test_a_zipped_sf1_distribution_reads_both_halves_from_its_own_segments(both, tmp_path):
    """The state's ZIP as the Bureau ships it: each reader gets what the folder gives it, and
    only the header and the segments holding its cells are extracted."""
    persons, housing = both
    folder = tmp_path / "zz"
    _write_sf1_folder(pl.concat([persons.to_frame(), housing]), folder)
    files = {f"zz2010.sf1/{p.name}": p.read_bytes() for p in sorted(folder.iterdir())}
    z = _zip(tmp_path / "zz2010.sf1.zip", files)
    _same(read_tables(folder), read_tables(z))
    zipped, unzipped = (
        read_unit_tables(z, population("households")),
        read_unit_tables(folder, population("households")),
    )
    assert zipped.to_frame().equals(unzipped.to_frame())
    names = [Path(n).name for n in files]
    person_files = distribution_files(names, [c for c in persons.to_frame()["cell"].unique()])
    housing_files = distribution_files(names, housing["cell"].unique().to_list())
    assert person_files is not None and housing_files is not None
    assert person_files[0] == housing_files[0] == "zzgeo2010.sf1"
    assert not set(person_files[1:]) & set(housing_files[1:])  # persons' segments, housing's
    assert set(person_files) | set(housing_files) == set(names)


def test_errors_inside_a_zip_name_the_zip_and_its_file_never_the_temporary_copy(tmp_path):
    bad = b"geoid,cell,value\n280010001001000,P0010001,-3\n"
    z = _zip(tmp_path / "county.zip", {"deep/folder/tables.csv": bad})
    with pytest.raises(InputError) as e:
        read_tables(z)
    text = str(e.value)
    assert f"{z}/tables.csv, line 2" in text and "negative count" in text
    assert "tabrecon-zip-" not in text and e.value.path == f"{z}/tables.csv"
    housing = b"geoid,cell,value\n280010001001000,H0030001,x\n"
    with pytest.raises(InputError, match=r"county2\.zip/h\.csv, line 2, column 'value'"):
        read_unit_tables(
            _zip(tmp_path / "county2.zip", {"h.csv": housing}), population("households")
        )


def test_a_zipped_distribution_missing_a_segment_names_the_zip(both, tmp_path):
    persons, housing = both
    folder = tmp_path / "zz"
    _write_sf1_folder(pl.concat([persons.to_frame(), housing]), folder, (44,))
    z = _zip(tmp_path / "zz.zip", {p.name: p.read_bytes() for p in folder.iterdir()})
    with pytest.warns(UserWarning, match=r"zz000442010\.sf1 missing: tables .*H18") as got:
        ts = read_unit_tables(z, population("households"))
    assert all(str(z) in str(w.message) and "tabrecon-zip-" not in str(w.message) for w in got)
    assert "H18" not in ts.tables_present() and "H1" in ts.tables_present()


@pytest.mark.parametrize(
    "files, message",
    [
        ({"a.csv": b"geoid\n", "b.csv": b"geoid\n"}, r"holds 2 table files \(a.csv, b.csv\)"),
        ({"notes.txt": b"x"}, "holds no table file"),
        ({"x-Column-Metadata.csv": b"a\n"}, "holds no table file"),
    ],
    ids=["two", "none", "metadata only"],
)
def test_a_zip_that_is_not_one_table_is_refused(tmp_path, files, message):
    z = _zip(tmp_path / "t.zip", files)
    for read in (read_tables, lambda p: read_unit_tables(p, population("households"))):
        with pytest.raises(InputError, match=message):
            read(z)


def test_a_file_named_zip_that_is_not_one_is_refused(tmp_path):
    p = tmp_path / "t.zip"
    p.write_text("geoid,cell,value\n")
    with pytest.raises(InputError, match=r"t\.zip: is not a readable ZIP file"):
        read_tables(p)


def test_an_excel_workbook_is_refused_with_what_to_do(tmp_path):
    p = _zip(tmp_path / "P12.xlsx", {"xl/workbook.xml": b"<workbook/>"})  # a workbook is a ZIP
    for read in (read_tables, lambda p: read_unit_tables(p, population("households"))):
        with pytest.raises(InputError, match=r"P12\.xlsx: is an Excel workbook; save its sheet"):
            read(p)


@pytest.fixture()
def tsv_form():
    """A form registered by a user: tab-separated text, long or wide."""

    @contextlib.contextmanager
    def open_tsv(p, cells):
        df = pl.read_csv(p, separator="\t", infer_schema=False)
        long = {"geoid", "cell", "value"} <= set(df.columns)
        yield forms.Raw(forms.Shape.LONG if long else forms.Shape.WIDE, str(p), frame=df)

    saved = forms.forms()
    forms.register_form(
        forms.Form("tsv", "tab-separated text", lambda p: p.suffix == ".tsv", open_tsv)
    )
    yield
    forms._FORMS[:] = saved


def test_a_registered_form_is_read_by_both_readers(both, tmp_path, tsv_form):
    persons, housing = both
    assert [f.name for f in forms.forms()] == ["folder", "zip", "json", "tsv", "table"]
    p = tmp_path / "p.tsv"
    persons.to_frame().write_csv(p, separator="\t")
    _same(persons, read_tables(p))
    h = tmp_path / "h.tsv"
    housing.write_csv(h, separator="\t")
    got = (
        read_unit_tables(h, population("households"))
        .to_frame()
        .sort("geoid", "cell")["value"]
        .to_list()
    )
    assert got == housing.sort("geoid", "cell")["value"].cast(pl.Int64).to_list()
    z = _zip(tmp_path / "p.zip", {"p.tsv": p.read_bytes()})  # and inside a ZIP
    _same(persons, read_tables(z))


def test_the_command_line_reads_a_zip_and_names_a_bad_one(both, tmp_path):
    """As a user runs it: a subprocess, exit 0 on a good ZIP, 2 and the file inside the ZIP
    named on a bad one, never a traceback."""
    import subprocess

    persons, housing = both
    write_tables(persons, tmp_path / "p.csv")
    z = _zip(tmp_path / "p.zip", {"p.csv": (tmp_path / "p.csv").read_bytes()})
    zh = _zip(tmp_path / "h.zip", {"h.csv": housing.write_csv().encode()})
    bad = _zip(tmp_path / "bad.zip", {"t.csv": b"geoid,cell,value\n280010001001000,P0010001,x\n"})

    def run(*args: str) -> subprocess.CompletedProcess:
        return run_cli(["check-tables", *args])

    for args in ([str(z)], [str(zh), "--schema", "households"]):
        ok = run(*args)
        assert ok.returncode == 0, ok.stdout + ok.stderr
    res = run(str(bad))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{bad}/t.csv, line 2" in res.stderr and "Traceback" not in res.stderr


def test_a_zipped_distribution_without_a_person_segment_warns_naming_the_zip(both, tmp_path):
    """Read without a list of tables, a missing segment leaves its tables out with a warning;
    from a ZIP the warning names the ZIP, and the rest is read as from the folder."""
    persons, _ = both
    folder = tmp_path / "zz"
    _write_sf1_folder(persons.to_frame(), folder, (17,))  # PCT12, the tract table
    z = _zip(tmp_path / "zz.zip", {p.name: p.read_bytes() for p in folder.iterdir()})
    with pytest.warns(UserWarning, match=r"zz000172010\.sf1 missing: tables PCT12 not") as got:
        ts = read_tables(z)
    assert all(str(z) in str(w.message) and "tabrecon-zip-" not in str(w.message) for w in got)
    with pytest.warns(UserWarning):
        _same(read_tables(folder), ts)


def test_a_zipped_2020_pl94171_distribution_reads_as_its_folder_without_warnings(
    small_md, tmp_path
):
    import warnings

    from test_sf1 import write_2020_pl

    ts = tabulate(small_md, "P8,P9,P10,P11")
    write_2020_pl(ts, tmp_path / "pl")
    z = _zip(tmp_path / "pl.zip", {p.name: p.read_bytes() for p in (tmp_path / "pl").iterdir()})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(read_tables(tmp_path / "pl"), read_tables(z))


def test_an_sf1_folder_counts_the_records_it_does_not_read(both, tmp_path):
    """Issue 86: a state's SF1 folder holds records of every summary level (the state, its
    counties, places); those the tables are not read at are counted by kind, never passed over
    without a word, and the block and tract tables read as before."""
    from test_sf1 import _geo_record

    persons, _ = both
    folder = tmp_path / "sf1"
    _write_sf1_folder(persons.to_frame(), folder)
    geo = folder / "zzgeo2010.sf1"
    extra = [_geo_record("040", 90_001, "99", "   ", "      ", "    ")]
    extra += [
        _geo_record("050", 90_002 + k, "99", f"{k + 1:03d}", "      ", "    ") for k in range(2)
    ]
    geo.write_bytes(geo.read_bytes() + ("\n".join(extra) + "\n").encode("latin-1"))
    got = read_tables(folder)
    _same(persons, got)
    rows = {kind: n for kind, (n, _) in got.skipped.items()}
    assert rows == {"summary level 040": 1, "summary level 050": 2}
    per = {v // n for n, v in got.skipped.values()}  # the cells read, for every record
    assert len(per) == 1 and per.pop() >= len(persons.cells_present())
