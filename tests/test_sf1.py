"""The SF1 summary-file reader: small files in the official layout, written here, read back
exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tabrecon.errors import InputError
from tabrecon.schema.registry import population
from tabrecon.tables.layout import layout
from tabrecon.tables.persons import tabulate
from tabrecon.tables.reader import read_sf1
from tabrecon.tables.sf1 import PL94, SF1, field_positions

# Absolute positions from the SF1 technical documentation's segment layouts (1-based field numbers,
# the five header fields FILEID, STUSAB, CHARITER, CIFSN, LOGRECNO first): written out here, not
# derived from the reader, so a wrong layout in the reader fails this test.
DOCUMENTED = {
    "P0010001": (1, 6),
    "P0060001": (3, 34),
    "P0070001": (3, 41),
    "P0080001": (3, 56),
    "P0090001": (3, 127),
    "P0100001": (4, 6),
    "P0110001": (4, 77),
    "P0120001": (4, 150),
    "P0140001": (4, 202),
    "P012A001": (7, 12),
    "P012E049": (7, 256),
    "P012F001": (8, 6),
    "P012I001": (8, 153),
    "PCT0120001": (17, 6),
    "PCT012A001": (20, 6),
    "PCT012O209": (34, 214),
}


def test_documented_positions():
    pos = field_positions()
    for cell, where in DOCUMENTED.items():
        assert pos[cell] == where, cell


def _geo_record(sumlev: str, logrecno: int, state: str, county: str, tract: str, block: str) -> str:
    """One fixed-width geographic header record (2010 SF1 layout; unread columns blank)."""
    rec = [" "] * 500

    def put(first: int, text: str) -> None:
        rec[first - 1 : first - 1 + len(text)] = list(text)

    put(1, "SF1ST ")
    put(7, "ZZ")
    put(9, sumlev)
    put(12, "00")
    put(19, f"{logrecno:07d}")
    put(28, state)
    put(30, county)
    put(55, tract)
    put(62, block)
    put(227, "Name with accent \xe9")  # latin-1, as the Bureau's files are
    return "".join(rec).rstrip()


def write_official_layout(ts, folder: Path, st: str = "zz", product=SF1) -> None:
    """Write ``ts`` as an SF1 (or P.L. 94-171) distribution: header + the segment files, positions
    from DOCUMENTED's rule (a table's cells follow each other; other tables' cells are 0)."""
    folder.mkdir(parents=True, exist_ok=True)
    recs, logrec = [], {}
    n = 0
    # a state and a county record first, like the real file (not blocks or tracts: skipped)
    recs.append(_geo_record("040", 1, "99", "   ", "      ", "    "))
    recs.append(_geo_record("050", 2, "99", "001", "      ", "    "))
    n = 2
    for level in ("tract", "block"):
        for g in ts.grids[level].geoids if level in ts.grids else ():
            n += 1
            logrec[(level, g)] = n
            recs.append(
                _geo_record(
                    "140" if level == "tract" else product.block_sumlev,
                    n,
                    g[:2],
                    g[2:5],
                    g[5:11],
                    g[11:15] if level == "block" else "    ",
                )
            )
    (folder / f"{st}geo2010.{product.suffix}").write_bytes(
        ("\n".join(recs) + "\n").encode("latin-1")
    )
    have = {str(c) for g in ts.grids.values() for c in g.cells}
    decimals: dict[str, int] = {}
    if product is SF1:  # every cell of ``ts`` at the field of the Bureau's layout
        lay = layout().filter(pl.col("cell").is_in(list(have)))
        pos = {
            c: (int(sg), 5 + int(ps))
            for c, sg, ps in lay.select("cell", "segment", "position").iter_rows()
        }
        decimals = {c: int(d or 0) for c, d in lay.select("cell", "decimal").iter_rows()}
    else:
        pos = {c: p for c, p in field_positions(product).items() if c in have}
    by_seg: dict[int, dict[int, str]] = {}
    for cell, (seg, f) in pos.items():
        by_seg.setdefault(seg, {})[f] = cell
    full = {  # an SF1 segment's rows hold every field of the Bureau's layout
        int(sg): 5 + int(w)
        for sg, w in layout()
        .group_by("segment")
        .agg(pl.col("position").cast(pl.Int64).max())
        .iter_rows()
    }

    def shown(v: int, d: int) -> str:  # a median in published units (305) as written (30.5)
        return f"{v // 10**d}.{v % 10**d:0{d}d}" if d else str(v)

    for seg, fields in by_seg.items():
        # P.L. segment 2 goes on with H1
        width = full[seg] if product is SF1 else max(fields) + (3 if product is PL94 else 0)
        level = "tract" if fields[min(fields)].startswith("PCT") else "block"
        grid = ts.grids[level]
        lines = []
        for i, g in enumerate(grid.geoids):
            row = ["SF1ST", st.upper(), "000", "01", f"{logrec[(level, g)]:07d}"] + ["0"] * (
                width - 5
            )
            for f, cell in fields.items():
                row[f - 1] = shown(int(grid.col(cell)[i]), decimals.get(cell, 0))
            lines.append(",".join(row))
        (folder / f"{st}{seg:05d}2010.{product.suffix}").write_text("\n".join(lines) + "\n")


def with_medians(ts, md):
    """``ts`` with P13's median ages (P13, P13A-I: what an SF1 folder publishes beside the 34
    tables), tabulated over the person schema."""
    from tabrecon.schema import person_units
    from tabrecon.tables.spec import tabulate_units
    from tabrecon.tables.tableset import TableSet

    p13 = [f"P13{i}" for i in ("", *"ABCDEFGHI")]
    medians = tabulate_units(person_units(md), p13).with_columns(pl.col("value").cast(pl.Int64))
    return TableSet.from_long(pl.concat([ts.to_frame(), medians]), population("persons"))


@pytest.fixture(scope="module")
def county_tables(small_md):
    # the 34 tables, P3-P5 and P13 (medians), as an SF1 folder holds them
    return with_medians(tabulate(small_md, "published"), small_md)


def test_roundtrip_equals_tabulate(county_tables, tmp_path):
    write_official_layout(county_tables, tmp_path / "zz")
    back = read_sf1(tmp_path / "zz")
    for level in ("block", "tract"):
        a, b = county_tables.grids[level], back.grids[level]
        assert list(a.geoids) == list(b.geoids)
        for c in a.cells:
            np.testing.assert_array_equal(a.col(c), b.col(c), err_msg=f"{level} {c}")


def test_missing_segment_is_named(county_tables, tmp_path):
    write_official_layout(county_tables, tmp_path / "zz")
    (tmp_path / "zz" / "zz000072010.sf1").unlink()
    # read as found: the tables of the missing segment are left out, and named
    with pytest.warns(UserWarning, match=r"zz000072010\.sf1 missing: tables P12A, P12B"):
        ts = read_sf1(tmp_path / "zz")
    assert "P12A" not in ts.tables_present() and "P1" in ts.tables_present()


def test_pl94171_folder_reads_as_p8_to_p11(small_md, tmp_path):
    """The 2010 P.L. 94-171 layout: blocks at summary level 750, P1-P4 = SF1's P8-P11, then H1."""
    pos = field_positions(PL94)
    assert pos["P0080001"] == (1, 6) and pos["P0090001"] == (1, 77)
    assert pos["P0100001"] == (2, 6) and pos["P0110073"] == (2, 149)
    ts = tabulate(small_md, "P8,P9,P10,P11")
    write_official_layout(ts, tmp_path / "pl", product=PL94)
    back = read_sf1(tmp_path / "pl")
    assert back.tables_present() == ["P8", "P9", "P10", "P11"]
    a, b = ts.grids["block"], back.grids["block"]
    assert list(a.geoids) == list(b.geoids)
    for c in a.cells:
        np.testing.assert_array_equal(a.col(c), b.col(c), err_msg=c)


def test_bad_value_names_file_line_and_cell(county_tables, tmp_path):
    write_official_layout(county_tables, tmp_path / "zz")
    seg = tmp_path / "zz" / "zz000042010.sf1"
    lines = seg.read_text().splitlines()
    row = lines[2].split(",")
    row[149] = "x7"  # field 150 = P0120001
    lines[2] = ",".join(row)
    seg.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"zz000042010\.sf1, line 3, column 'P0120001'.*'x7'"):
        read_sf1(tmp_path / "zz")


def test_record_missing_from_one_segment_is_named(county_tables, tmp_path):
    write_official_layout(county_tables, tmp_path / "zz")
    seg = tmp_path / "zz" / "zz000072010.sf1"
    lines = seg.read_text().splitlines()
    lrn = int(lines[3].split(",")[4])
    seg.write_text("\n".join(lines[:3] + lines[4:]) + "\n")
    with pytest.raises(InputError, match=rf"zz000072010\.sf1: 1 block record.*LOGRECNO {lrn}\b"):
        read_sf1(tmp_path / "zz")


def test_short_geo_record(tmp_path):
    d = tmp_path / "zz"
    d.mkdir()
    (d / "zzgeo2010.sf1").write_text("SF1ST ZZ101\n")
    with pytest.raises(InputError, match=r"zzgeo2010\.sf1, line 1: .*shorter"):
        read_sf1(d)


def write_2020_pl(ts, folder: Path, st: str = "zz") -> None:
    """``ts``'s P8-P11 as a 2020 P.L. 94-171 folder in the documented layout: a pipe-delimited
    geographic header (FILEID|STUSAB|SUMLEV|GEOVAR|GEOCOMP|CHARITER|CIFSN|LOGRECNO|GEOID|GEOCODE|
    ...) and pipe-delimited segments (FILEID|STUSAB|CHARITER|CIFSN|LOGRECNO|cells)."""
    from tabrecon.tables.sf1 import PL94_2020

    folder.mkdir(parents=True, exist_ok=True)
    recs, logrec, n = [], {}, 0
    recs.append(
        "|".join(
            ["PLST", st.upper(), "040", "", "00", "000", "01", "0000001", "0400000US99", "99"]
            + [""] * 30
        )
    )
    n = 1
    for level, sumlev in (("tract", "140"), ("block", "750")):
        for g in ts.grids[level].geoids if level in ts.grids else ():
            n += 1
            logrec[g] = n
            f = [
                "PLST",
                st.upper(),
                sumlev,
                "",
                "00",
                "000",
                "01",
                f"{n:07d}",
                f"{sumlev}0000US{g}",
                g,
            ]
            recs.append("|".join(f + [g[:2], "", g[2:5]] + [""] * 27))
    (folder / f"{st}geo2020.pl").write_bytes(("\n".join(recs) + "\n").encode("latin-1"))
    pos = field_positions(PL94_2020)
    g = ts.grids["block"]
    for seg in (1, 2, 3):
        fields = {f: c for c, (s_, f) in pos.items() if s_ == seg}
        width = {1: 149, 2: 152, 3: 15}[seg]
        lines = []
        for i, geo in enumerate(g.geoids):
            row = ["PLST", st.upper(), "000", f"{seg:02d}", f"{logrec[geo]:07d}"]
            row += ["0"] * (width - 5)
            for at, cell in fields.items():
                row[at - 1] = str(int(g.col(cell)[i]))
            lines.append("|".join(row))
        (folder / f"{st}{seg:05d}2020.pl").write_text("\n".join(lines) + "\n")


def test_2020_pl94171_folder_reads_and_audits_end_to_end(small_md, tmp_path):
    from tabrecon.audit.config import load_config
    from tabrecon.audit.run import audit
    from tabrecon.tables.sf1 import PL94_2020

    pos = field_positions(PL94_2020)
    assert pos["P0080001"] == (1, 6) and pos["P0090073"] == (1, 149)
    assert pos["P0100001"] == (2, 6) and pos["P0110073"] == (2, 149)
    ts = tabulate(small_md, "P8,P9,P10,P11")
    write_2020_pl(ts, tmp_path / "pl2020")
    back = read_sf1(tmp_path / "pl2020")
    a, b = ts.grids["block"], back.grids["block"]
    assert list(a.geoids) == list(b.geoids) and back.tables_present() == ["P8", "P9", "P10", "P11"]
    for c in a.cells:
        np.testing.assert_array_equal(a.col(c), b.col(c), err_msg=c)
    cfg = load_config(
        None,
        reconstruct={"levels": ["block"]},
        defenses={"specs": []},
        certify={"distance": False},  # what is pinned is the folder read end to end
        claims={"enabled": False},
    )
    res = audit(None, tmp_path / "out", cfg, tables=tmp_path / "pl2020", show_progress=False)
    s = res.summary
    assert s["recon_records"] == len(small_md) and s["certify"]["inhabited_blocks"] > 0
    assert s["tables_present"] == ["P8", "P9", "P10", "P11"]
    assert (tmp_path / "out" / "report.html").stat().st_size > 0


def test_pl94171_folders_read_alike_through_the_reader_written_once(small_md, tmp_path):
    """A 2010 or 2020 P.L. 94-171 folder reads through read_unit_tables (any population's
    reader) as through the person reader, P1-P4 as SF1's P8-P11; a population none of whose
    tables it holds (the housing units: its H1 is occupancy, not SF1's H1) is told so."""
    import polars as pl

    from tabrecon.tables.reader import read_unit_tables

    ts = tabulate(small_md, "P8,P9,P10,P11")
    write_official_layout(ts, tmp_path / "pl", product=PL94)
    write_2020_pl(ts, tmp_path / "pl2020")
    want = ts.to_frame().filter(pl.col("geoid").str.len_chars() == 15).sort("geoid", "cell")
    for folder in ("pl", "pl2020"):
        got = read_unit_tables(tmp_path / folder, population("persons"))
        assert got.tables_present()[:4] == ["P8", "P9", "P10", "P11"], folder
        assert got["block"].cells.size == want["cell"].n_unique(), folder
        assert (
            got.to_frame()
            .filter(pl.col("geoid").str.len_chars() == 15)
            .sort("geoid", "cell")
            .equals(want)
        ), folder
        with pytest.raises(InputError, match=r"P\.L\. 94-171 files hold none of these tables"):
            read_unit_tables(tmp_path / folder, population("households"))
