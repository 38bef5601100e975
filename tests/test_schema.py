"""Person schema: encodings, derived fields, reading/writing, and bad input."""

from __future__ import annotations

import gzip

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.errors import InputError
from tabrecon.schema import (
    AGEBIN38_LABELS,
    CODE_OF_BITS,
    N_TYPES,
    RACE_BITS,
    decode_types,
    encode_types,
    from_arrays,
    read_microdata,
    write_microdata,
)

HEADER = "block_geoid,sex,age,agebin,white,black,aian,asian,nhpi,sor,hispanic\n"
GOOD = "010730051031000,male,4,4,0,1,0,0,0,0,0\n"


def test_race_codes_follow_sf1_order():
    assert len(RACE_BITS) == 63
    assert RACE_BITS[0] == 1 and RACE_BITS[5] == 32  # White alone ... SOR alone
    assert RACE_BITS[6] == 0b11  # code 7 = White + Black (P8 line 011)
    assert RACE_BITS[-1] == 63  # all six
    assert CODE_OF_BITS[RACE_BITS].tolist() == list(range(1, 64))


def test_agebins():
    assert len(AGEBIN38_LABELS) == 38
    assert (
        AGEBIN38_LABELS[21] == "21"
        and AGEBIN38_LABELS[22] == "22-24"
        and AGEBIN38_LABELS[-1] == "85+"
    )


def test_type_encoding_roundtrip():
    t = np.arange(N_TYPES)
    assert (encode_types(*decode_types(t)) == t).all()


def test_real_sample_reads(real_md):
    assert len(real_md) == 63969
    assert len(real_md.geoids) == 8530
    assert real_md.extra is not None and set(real_md.extra.columns) == {
        "bsab_unique",
        "bsaber_unique",
    }


@pytest.mark.parametrize("ext", [".csv", ".csv.gz", ".parquet"])
def test_roundtrip_keeps_extras(tmp_path, small_md, ext):
    p = tmp_path / f"x{ext}"
    write_microdata(small_md, p)
    back = read_microdata(p)
    assert (back.types == small_md.types).all()
    assert (back.block_geoid == small_md.block_geoid).all()
    assert back.extra["household_id"].to_list() == small_md.extra["household_id"].to_list()


def _write(tmp_path, body: str, header: str = HEADER):
    p = tmp_path / "bad.csv"
    p.write_text(header + body)
    return p


@pytest.mark.parametrize(
    "body,fragment,line",
    [
        ("01073005103100,male,4,4,0,1,0,0,0,0,0\n", "15 digits", 2),
        ("010730051031000,male,-1,0,0,1,0,0,0,0,0\n", "age must be >= 0", 2),
        (GOOD + "010730051031000,male,abc,4,0,1,0,0,0,0,0\n", "not an integer", 3),
        ("010730051031000,male,4,4,0,0,0,0,0,0,0\n", "no race flag set", 2),
        ("010730051031000,man,4,4,0,1,0,0,0,0,0\n", "sex must be", 2),
        ("010730051031000,male,4,4,0,2,0,0,0,0,0\n", "race flag must be 0 or 1", 2),
        ("010730051031000,male,4,5,0,1,0,0,0,0,0\n", "agebin does not match", 2),
    ],
)
def test_bad_rows_name_file_line_column(tmp_path, body, fragment, line):
    p = _write(tmp_path, body)
    with pytest.raises(InputError) as ei:
        read_microdata(p)
    msg = str(ei.value)
    assert fragment in msg and f"line {line}" in msg and "bad.csv" in msg


def test_missing_column_is_named(tmp_path):
    p = _write(
        tmp_path,
        "010730051031000,male,4,0,1,0,0,0,0,0\n",
        header="block_geoid,sexx,age,white,black,aian,asian,nhpi,sor,hispanic\n",
    )
    with pytest.raises(InputError, match=r"column\(s\) sex of a person file.*sexx"):
        read_microdata(p)


def test_malformed_csv(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes(b'block_geoid,sex\n"0107,male\n')
    with pytest.raises(InputError, match="m.csv"):
        read_microdata(p)


def test_counts_all_bad_rows(tmp_path):
    p = _write(tmp_path, "010730051031000,male,-1,0,0,1,0,0,0,0,0\n" * 3)
    with pytest.raises(InputError, match="and 2 more"):
        read_microdata(p)


def test_age_topcoded_with_warning(tmp_path):
    p = _write(tmp_path, "010730051031000,male,115,85+,1,0,0,0,0,0,0\n")
    with pytest.warns(UserWarning, match="top-coded"):
        md = read_microdata(p)
    assert md.age[0] == 110


def test_gzip_csv(tmp_path):
    p = tmp_path / "g.csv.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(HEADER + GOOD)
    md = read_microdata(p)
    assert len(md) == 1 and md.race[0] == 2


def test_to_frame_layout(small_md):
    df = small_md.to_frame()
    assert df.columns[:11] == HEADER.strip().split(",")
    assert isinstance(df, pl.DataFrame)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=4
        ),
        min_size=1,
        max_size=40,
    )
)
def test_records_from_a_polars_column_have_the_blocks_numpy_gives(ids):
    """A file's block ids handed over as its polars column give the same distinct ids, in the
    same order, and the same record-to-block index as the numpy path, non-ASCII ids included."""
    n = len(ids)
    args = (np.zeros(n, dtype=np.int8), np.zeros(n), np.ones(n), np.zeros(n))
    a = from_arrays(np.array(ids, dtype=str), *args)
    b = from_arrays(pl.Series(ids, dtype=pl.String), *args)
    assert a.geoids.tolist() == b.geoids.tolist()
    assert a.block.tolist() == b.block.tolist()
