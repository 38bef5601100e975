"""The disk cache of derived arrays (tabrecon.cache): an entry is what the computation gives, is
found again only for the same inputs, and a damaged or missing folder costs time, never a
wrong answer."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from tabrecon import cache
from tabrecon.engine import model
from tabrecon.schema import spec


def test_an_entry_is_read_back_only_for_the_same_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("TABRECON_CACHE_DIR", str(tmp_path))
    calls: list[int] = []

    def compute(v: int):
        def f() -> dict[str, np.ndarray]:
            calls.append(v)
            return {"x": np.full(3, v)}

        return f

    def get(parts: list[bytes], v: int, names: tuple[str, ...] = ("x",)) -> list[int]:
        return cache.cached_arrays("t", parts, compute(v), names)["x"].tolist()

    assert get([b"a"], 1) == [1, 1, 1]
    assert get([b"a"], 2) == [1, 1, 1]  # read back
    assert get([b"b"], 3) == [3, 3, 3]  # another input
    assert get([b"a", b""], 4) == [4, 4, 4]
    assert calls == [1, 3, 4]
    assert get([b"a"], 6, ("y",)) == [6, 6, 6]  # an entry without the arrays asked for
    assert calls == [1, 3, 4, 6]
    for f in tmp_path.glob("t-*.npz"):  # damaged entries are computed again
        f.write_bytes(f.read_bytes()[:20])
    assert get([b"a"], 5) == [5, 5, 5]
    assert not list(tmp_path.glob(".t-*"))  # no temporary file left behind


def test_off_or_unwritable_only_costs_the_time(tmp_path, monkeypatch):
    monkeypatch.setenv("TABRECON_CACHE_DIR", "off")
    assert cache.cache_dir() is None
    ones = lambda: {"x": np.ones(2)}  # noqa: E731
    assert cache.cached_arrays("t", [b"a"], ones, ["x"])["x"].tolist() == [1, 1]
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would be")
    monkeypatch.setenv("TABRECON_CACHE_DIR", str(blocked))
    assert cache.cached_arrays("t", [b"a"], ones, ["x"])["x"].tolist() == [1, 1]


def test_cached_feasible_types_and_deciding_cells_equal_the_computed_ones(tmp_path, monkeypatch):
    """The housing unit's feasible types and a compiled matrix's deciding cells, read from a
    cache another process wrote, equal what is computed without one."""
    from tabrecon.schema.catalog import HOUSING_UNITS

    rng = np.random.default_rng(3)
    dense = (rng.random((30, 200)) < 0.2).astype(np.int64)
    dense[5] = dense[6] | dense[7]  # a cell over two others: left out of the deciding ones
    W = sp.csr_matrix(dense)
    monkeypatch.setenv("TABRECON_CACHE_DIR", "off")
    spec._feasible.cache_clear()
    want_types = HOUSING_UNITS.feasible_types().copy()
    want = model._deciding_cells(sp.csr_matrix(W))
    monkeypatch.setenv("TABRECON_CACHE_DIR", str(tmp_path))
    for _ in range(2):  # written, then read
        spec._feasible.cache_clear()
        assert np.array_equal(HOUSING_UNITS.feasible_types(), want_types)
        got = model._deciding_cells(sp.csr_matrix(W))
        assert want is not None and got is not None
        assert np.array_equal(got[0], want[0]) and (got[1] != want[1]).nnz == 0
        assert np.array_equal(got[2], want[2]) and (got[3] != want[3]).nnz == 0
    assert len(list(tmp_path.glob("*.npz"))) == 2
