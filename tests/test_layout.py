"""The Bureau's SF1 2010 layout inside the package, and tables declared from it."""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path

import pytest

from tabrecon.errors import TabreconError
from tabrecon.schema.registry import population
from tabrecon.schema.spec import Attribute, Schema
from tabrecon.tables.layout import layout, rows, stubs_at
from tabrecon.tables.spec import from_layout

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "sf1_2010_layout.csv"


def test_the_vendored_layout_is_the_reference_byte_for_byte():
    if not REFERENCE.exists():
        pytest.skip(f"the reference file is not at {REFERENCE}")
    packed = resources.files("tabrecon").joinpath("data/sf1_2010_layout.csv.gz").read_bytes()
    assert gzip.decompress(packed) == REFERENCE.read_bytes()
    assert layout().height == 8_912 and layout()["table"].n_unique() == 331


def test_group_quarters_tables_are_the_layouts_cells_in_order():
    gq = population("group_quarters")
    for t in gq.tables():
        ref = rows([t.name])
        assert [c.id for c in t.cells()] == ref["cell"].to_list()
        assert [c.label for c in t.cells()] == ref["label"].to_list()
        assert t.universe_label == "Population in group quarters"
    p43 = gq.tables()[1].cells()
    # P0430005: male, under 18, correctional facilities for adults; P0430004 the four
    # institutional types; P0430001 everyone
    assert p43[4].predicate == {"sex": (0,), "age_group": (0,), "gq_type": (1,)}
    assert p43[3].predicate["gq_type"] == (1, 2, 3, 4)
    assert p43[0].predicate == {}
    assert stubs_at("P43", 1) == ["Male", "Female"]


def test_a_stub_without_a_predicate_is_refused_naming_the_cell():
    s = Schema("toy", "person", (Attribute("sex", ((0, "male"), (1, "female"))),))
    with pytest.raises(TabreconError, match="P0430003: no predicate for the stub 'Under 18 years'"):
        from_layout("P43", s, {"Total": {}, "Male": {"sex": (0,)}, "Female": {"sex": (1,)}})
    with pytest.raises(TabreconError, match="has no category"):
        from_layout("P42", s, {"Total": {"sex": (7,)}})
    with pytest.raises(TabreconError, match="SF1 2010 has no table P999"):
        from_layout("P999", s, {})
