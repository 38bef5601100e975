"""Digests of published tables: what a resumed run checks before it reuses a part. The same
release must give the same digest whatever order it comes in; any other release another one."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabrecon.provenance import (
    StaleResumeError,
    check_or_record,
    digest_grids,
    digest_long,
    fingerprint,
)

MISSING = -1


@st.composite
def grids(draw):
    """One or two levels of a small release: geoids x cells, some values not published."""
    out = []
    for level in draw(st.sampled_from([["block"], ["block", "tract"]])):
        n_geo = draw(st.integers(1, 6))
        n_cell = draw(st.integers(1, 5))
        geoids = np.array([f"{level[0]}{i:03d}" for i in range(n_geo)])
        cells = np.array([f"C{j:02d}" for j in range(n_cell)])
        values = np.array(
            draw(
                st.lists(
                    st.lists(st.integers(MISSING, 9), min_size=n_cell, max_size=n_cell),
                    min_size=n_geo,
                    max_size=n_geo,
                )
            ),
            dtype=np.int64,
        )
        values[0, 0] = max(values[0, 0], 0)  # something is published
        out.append((level, geoids, cells, values))
    return out


@settings(max_examples=60, deadline=None)
@given(grids(), st.randoms(use_true_random=False))
def test_grid_digest_ignores_order_and_rows_with_nothing_published(gs, rnd):
    base = digest_grids(gs)
    shuffled = []
    for level, geoids, cells, values in gs:
        r = np.array(rnd.sample(range(len(geoids)), len(geoids)))
        c = np.array(rnd.sample(range(len(cells)), len(cells)))
        extra = np.full((1, len(cells)), MISSING)  # a geoid with nothing published
        shuffled.append(
            (
                level,
                np.append(geoids[r], "zzz"),
                cells[c],
                np.vstack([values[r][:, c], extra]),
            )
        )
    rnd.shuffle(shuffled)
    assert digest_grids(shuffled) == base


@settings(max_examples=60, deadline=None)
@given(grids(), st.data())
def test_grid_digest_changes_with_any_published_value_geoid_or_cell(gs, data):
    base = digest_grids(gs)
    k = data.draw(st.integers(0, len(gs) - 1))
    level, geoids, cells, values = gs[k]
    i = data.draw(st.integers(0, len(geoids) - 1))
    j = data.draw(st.integers(0, len(cells) - 1))
    changed = values.copy()
    changed[i, j] = changed[i, j] + 1 if changed[i, j] != MISSING else 5
    other = [*gs[:k], (level, geoids, cells, changed), *gs[k + 1 :]]
    assert digest_grids(other) != base
    if (values[i] != MISSING).any():
        renamed = geoids.copy()
        renamed[i] = "renamed"
        assert digest_grids([*gs[:k], (level, renamed, cells, values), *gs[k + 1 :]]) != base
    if (values[:, j] != MISSING).any():
        recelled = cells.copy()
        recelled[j] = "C99"
        assert digest_grids([*gs[:k], (level, geoids, recelled, values), *gs[k + 1 :]]) != base


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from("xyz"), st.integers(0, 9)),
        min_size=1,
        max_size=12,
        unique_by=lambda r: r[:2],
    ),
    st.randoms(use_true_random=False),
)
def test_long_digest_ignores_row_order_and_sees_every_value(rows, rnd):
    frame = pl.DataFrame(rows, schema=["geoid", "cell", "value"], orient="row")
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    again = pl.DataFrame(shuffled, schema=["geoid", "cell", "value"], orient="row")
    assert digest_long(again) == digest_long(frame)
    bumped = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.col("value") + 1).otherwise(pl.col("value"))
    )
    assert digest_long(bumped) != digest_long(frame)


def test_a_refused_resume_names_each_changed_option_of_a_configuration(tmp_path):
    cfg = {"run": {"seed": 2010, "workers": 1}, "certify": {"distance": True}, "levels": [1, 2]}
    record = tmp_path / "run.json"
    check_or_record(record, fingerprint(config=cfg, tables="t1"), "out")
    check_or_record(record, fingerprint(config=cfg, tables="t1"), "out")  # the same run resumes
    other = json.loads(json.dumps(cfg))
    other["run"]["seed"] = 7
    other["levels"] = [2]
    del other["certify"]["distance"]
    other["certify"]["new"] = "x"
    with pytest.raises(StaleResumeError) as e:
        check_or_record(record, fingerprint(config=other, tables="t2"), "out")
    msg = str(e.value)
    for said in (
        "config certify.distance true before, unset now",
        'config certify.new unset before, "x" now',
        "config levels [1, 2] before, [2] now",
        "config run.seed 2010 before, 7 now",
        "tables 't1' before, 't2' now",
    ):
        assert said in msg, msg
    assert "workers" not in msg  # what did not change is not shown
