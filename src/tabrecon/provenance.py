"""What produced a resumable output: fingerprints of inputs and options, checked before resuming.

Every resumable output (a ``<out>.parts/`` folder of finished units, the audit's ``work/``, a
sweep's CSV, the trade-off table) records the fingerprint of the run that made it: a digest of each
input's content, the options that change results, and the tabrecon version. A rerun compares its own
fingerprint with the recorded one before it reuses anything; when they differ it stops with
:class:`StaleResumeError`, which says what differs -- never a silent mix of two runs. Starting
afresh (``--fresh`` on the command line, ``resume=False`` in Python) removes the old output first.

Example:
    >>> import numpy as np
    >>> a = digest_arrays(np.arange(3))
    >>> a == digest_arrays(np.arange(3)), a == digest_arrays(np.arange(4))
    (True, False)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TabreconError

_MB = 1 << 20
_MISSING = -1  # a cell not published (tabrecon.tables.publication.MISSING)


class StaleResumeError(TabreconError):
    """A resumable output was made by another run (other inputs, options or version)."""


def digest_arrays(*arrays: Any) -> str:
    """A short content digest of numpy arrays (shape, dtype and bytes of each)."""
    h = hashlib.blake2b(digest_size=12)
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind in "USO":  # text: its characters, whatever the array's width or kind
            h.update(f"text{a.shape};".encode())
            h.update("\x1f".join(map(str, a.ravel().tolist())).encode())
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


#: Rows of text a digest joins at a time (:func:`digest_long`)
DIGEST_ROWS = 1_000_000


def digest_long(long: Any) -> str:
    """The digest of a long table (geoid, cell, value), whatever its row order: what a run over
    published tables records so that a resume never mixes two releases. The same digest as
    :func:`digest_arrays` of the sorted columns, taken :data:`DIGEST_ROWS` rows at a time in
    sorted order, so that neither a sorted copy nor every string as a Python object is held at
    once (a 1,000,000-person release's 18.8 M person cells held 2 GB more while digested).

    >>> import polars as pl
    >>> t = pl.DataFrame({"geoid": ["2", "1", "1"], "cell": ["a", "b", "a"], "value": [3, 2, 1]})
    >>> digest_long(t) == digest_arrays(["1", "1", "2"], ["a", "b", "a"], [1, 2, 3])
    True
    """
    import polars as pl

    n = long.height
    order = long.select(pl.arg_sort_by("geoid", "cell")).to_series()
    h = hashlib.blake2b(digest_size=12)
    for name in ("geoid", "cell"):  # as digest_arrays hashes text
        col = long[name]
        h.update(f"text{(n,)};".encode())
        for start in range(0, n, DIGEST_ROWS):
            if start:
                h.update(b"\x1f")
            part = col.gather(order.slice(start, DIGEST_ROWS)).to_list()
            h.update("\x1f".join(map(str, part)).encode())
    a = np.ascontiguousarray(long["value"].gather(order).to_numpy())
    h.update(f"{a.dtype.str}{a.shape};".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def digest_grids(grids: Any) -> str:
    """The digest of tables held as grids, ``(level, geoids, cells, values)`` each (values a
    geoid x cell array, ``MISSING`` where not published), whatever the order of the grids, their
    rows and their columns: what a run over a release held as grids records, so that a resume
    never mixes two releases. A geoid with nothing published is no row of the release and is
    left out. The values are hashed :data:`DIGEST_ROWS` cells at a time, so no sorted copy of a
    large grid is held.

    >>> g = (np.array(["2", "1"]), np.array(["b", "a"]), np.array([[4, 3], [2, 1]]))
    >>> v = np.array([[1, 2], [3, 4], [-1, -1]])
    >>> same = (np.array(["1", "2", "3"]), np.array(["a", "b"]), v)
    >>> digest_grids([("block", *g)]) == digest_grids([("block", *same)])
    True
    >>> digest_grids([("block", *g)]) == digest_grids([("tract", *g)])
    False
    """
    h = hashlib.blake2b(digest_size=12)
    for level, geoids, cells, values in sorted(grids, key=lambda g: str(g[0])):
        values = np.asarray(values)
        held = np.flatnonzero((values != _MISSING).any(axis=1)) if values.size else np.zeros(0, int)
        rows = held[np.argsort(np.asarray(geoids)[held], kind="stable")]
        cols = np.argsort(np.asarray(cells), kind="stable")
        h.update(digest_arrays(np.array([str(level)]), np.asarray(geoids)[rows]).encode())
        h.update(digest_arrays(np.asarray(cells)[cols]).encode())
        step = max(1, DIGEST_ROWS // max(1, cols.size))
        for start in range(0, rows.size, step):
            part = values[rows[start : start + step]][:, cols].astype(np.int64)
            h.update(part.tobytes())
    return h.hexdigest()


def digest_microdata(md: Any) -> str:
    """Digest of :class:`tabrecon.schema.Microdata`: blocks and every attribute of every record."""
    exact = md.age_exact if md.age_exact is not None else np.ones(len(md), bool)
    cols = (md.block, md.sex, md.age, md.race, md.hisp, exact)
    return digest_arrays(md.geoids, *(np.asarray(c).astype(np.int64) for c in cols))


def digest_path(path: str | Path) -> str:
    """Digest of a file (its size and its first and last megabyte) or of a folder (the same for
    every file in it, with names): fast on large files, and any edit that changes the size or
    touches either end is seen."""
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    h = hashlib.blake2b(digest_size=12)
    for f in files:
        size = f.stat().st_size
        h.update(f"{f.relative_to(p) if p.is_dir() else f.name}:{size};".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(_MB))
            if size > 2 * _MB:
                fh.seek(size - _MB)
                h.update(fh.read(_MB))
    return h.hexdigest()


def fingerprint(**items: Any) -> dict[str, str]:
    """A fingerprint: every item as text, plus the tabrecon version."""
    from . import __version__

    return {"tabrecon": __version__, **{k: _text(v) for k, v in items.items()}}


def _text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 1e15 else repr(v)
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


FRESH = "rerun with --fresh (resume=False in Python) to start over, or choose another output"


def differences(old: dict, new: dict) -> list[str]:
    """What differs between two fingerprints, item by item: an item holding a JSON object (a
    run's whole configuration) is compared key by key, so a message names the options that
    changed (``config run.seed 2010 before, 7 now``), not two copies of the configuration.

    >>> differences({"config": '{"run": {"seed": 2010, "workers": 1}}', "tables": "a1"},
    ...             {"config": '{"run": {"seed": 7, "workers": 1}}', "tables": "a1"})
    ['config run.seed 2010 before, 7 now']
    >>> differences({"level": "block+tract"}, {"level": "block", "x": "1"})
    ["level 'block+tract' before, 'block' now", "x 'unrecorded' before, '1' now"]
    """
    out = []
    for k in sorted(set(old) | set(new), key=str):
        a, b = old.get(k, "unrecorded"), new.get(k, "unset")
        if a == b:
            continue
        da, db = _as_object(a), _as_object(b)
        if da is None or db is None:
            out.append(f"{k} {a!r} before, {b!r} now")
            continue
        inner = [
            f"{k} {path} {_shown(x)} before, {_shown(y)} now" for path, x, y in _changed(da, db)
        ]
        out += inner or [f"{k} differs"]
    return out


def _changed(a: dict, b: dict, path: str = "") -> list[tuple[str, Any, Any]]:
    """The dotted paths at which two JSON objects differ, with both values (:data:`_NO_KEY`
    where one lacks the key)."""
    out = []
    for k in sorted(set(a) | set(b), key=str):
        x, y = a.get(k, _NO_KEY), b.get(k, _NO_KEY)
        if x == y:
            continue
        here = f"{path}{k}"
        if isinstance(x, dict) and isinstance(y, dict):
            out += _changed(x, y, here + ".")
        else:
            out.append((here, x, y))
    return out


def _as_object(v: Any) -> dict | None:
    """``v`` as a dict: itself, or the JSON object a string holds; None otherwise."""
    if isinstance(v, dict):
        return v
    if isinstance(v, str) and v.startswith("{"):
        try:
            got = json.loads(v)
        except json.JSONDecodeError:
            return None
        return got if isinstance(got, dict) else None
    return None


_NO_KEY = object()


def _shown(v: Any) -> str:
    """A value inside a configuration as its JSON text (``2010``, ``"auto"``, ``[1, 2]``), or
    ``unset``."""
    return "unset" if v is _NO_KEY else json.dumps(v, sort_keys=True, default=str)


def check_or_record(
    record: Path, fp: dict[str, str], what: str, advice: str = FRESH, outputs: tuple[Path, ...] = ()
) -> None:
    """Refuse to resume into an output made by another run; record ``fp`` for a new one.

    ``record`` is the JSON file holding the fingerprint; ``what`` names the output in messages.
    ``outputs`` existing without a record (an older tabrecon, or a copy) cannot be trusted to
    match this run either and are refused the same way.
    """
    if not record.exists() and any(p.exists() for p in outputs):
        raise StaleResumeError(f"{what} exists but does not record which run made it: {advice}")
    if record.exists():
        try:
            old = json.loads(record.read_text())
        except (json.JSONDecodeError, OSError):
            old = {}
        if old != fp:
            diffs = differences(old, fp)
            raise StaleResumeError(
                f"{what} holds results of another run ({'; '.join(diffs) or 'unreadable record'}):"
                f" {advice}"
            )
        return
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_name("." + record.name + ".tmp")
    tmp.write_text(json.dumps(fp, indent=1, sort_keys=True))
    os.replace(tmp, record)
