"""Files in and out: formats follow names, writes are atomic, failures name the file."""

from __future__ import annotations

from pathlib import Path

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
    with pytest.raises(InputError, match="bad.parquet: not a Parquet file"):
        read_text_frame(tmp_path / "bad.parquet")
    (tmp_path / "cut.parquet").write_bytes(b"PAR1 and then nothing")
    with pytest.raises(InputError, match="cut.parquet: is damaged or truncated"):
        read_text_frame(tmp_path / "cut.parquet")


def test_inputs_are_protected_from_every_write(tmp_path):
    """Inside ``protecting`` no writer replaces an input, whatever the path says (a symlink, a
    hard link), nor clears a folder that holds one; other files are written as usual."""
    import os

    from tabrecon.errors import TabreconError
    from tabrecon.io import protecting, remove_tree, write_csv, write_text

    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    (tmp_path / "link.csv").symlink_to("in.csv")
    os.link(src, tmp_path / "hard.csv")
    df = pl.DataFrame({"a": [2]})
    with protecting([src]):
        for name in ("in.csv", "link.csv", "hard.csv"):
            with pytest.raises(TabreconError, match="not written, it is the input"):
                write_csv(df, tmp_path / name)
        with pytest.raises(TabreconError, match="not cleared, it holds the input"):
            remove_tree(tmp_path)
        write_text(tmp_path / "other.txt", "fine")
    assert src.read_text() == "a\n1\n" and (tmp_path / "other.txt").read_text() == "fine"


def test_an_append_is_whole_or_absent(tmp_path, monkeypatch):
    """A row appended to a CSV file is written with the file anew and renamed: a full disk
    leaves the file as it was."""
    import errno

    from tabrecon.errors import TabreconError
    from tabrecon.io import append_row

    p = tmp_path / "rows.csv"
    append_row(p, {"k": 1, "v": "a"})
    append_row(p, {"k": 2, "v": "b"})
    before = p.read_bytes()

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(TabreconError, match="rows.csv: cannot be written \\(No space left"):
        append_row(p, {"k": 3, "v": "c"})
    monkeypatch.undo()
    assert p.read_bytes() == before
    assert pl.read_csv(p)["k"].to_list() == [1, 2]
