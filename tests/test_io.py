"""Files in and out: formats follow names, writes are atomic, failures name the file."""

from __future__ import annotations

import polars as pl
import pytest

from tabrecon.errors import InputError, TabreconError
from tabrecon.io import check_suffix, read_text_frame, write_frame, write_json


@pytest.mark.parametrize("name", ["t.parquet", "t.csv", "t.csv.gz"])
def test_a_frame_round_trips_in_the_format_its_name_says(tmp_path, name):
    df = pl.DataFrame({"block_geoid": ["280010001001000", "280030001001000"], "n": [1, 2]})
    p = write_frame(df, tmp_path / name)
    back = read_text_frame(p)
    assert back["block_geoid"].to_list() == df["block_geoid"].to_list()
    assert back["n"].to_list() == ["1", "2"]  # read as text, for validation with line numbers
    assert [f.name for f in tmp_path.iterdir()] == [name]  # no temporary left behind
    one = read_text_frame(p, counties=["28003"])
    assert one["block_geoid"].to_list() == ["280030001001000"] and one["__line"].to_list() == [3]


def test_unknown_suffixes_and_unwritable_places_are_refused_by_name(tmp_path):
    with pytest.raises(TabreconError, match=r"out\.xlsx: unknown output format"):
        check_suffix(tmp_path / "out.xlsx")
    with pytest.raises(TabreconError, match=r"/proc/nope\.json: cannot be written"):
        write_json("/proc/nope.json", {"a": 1})
    (tmp_path / "f").write_text("x")
    with pytest.raises(TabreconError) as e:
        write_json(tmp_path / "f" / "under_a_file.json", {})
    assert "under_a_file.json" in str(e.value) and ".tmp" not in str(e.value)


def test_a_missing_or_malformed_file_is_named(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_text_frame(tmp_path / "none.csv")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="cannot be read as Parquet"):
        read_text_frame(tmp_path / "bad.parquet")
