"""Arrays that cost seconds to derive and are the same in every process, kept on disk: a
schema's feasible types, the cells of compiled tables that decide which types a block admits.
Every command and every worker process derived them again (about 7 s for the housing unit's
87,787 feasible types of 25.6 million and its 850 block cells, before any block was solved).

An entry is found by a digest of everything it is computed from (the inputs' bytes, the versions
of tabrecon and of the libraries that compute it, and :data:`FORMAT`), so a changed input never
reads an old entry; an entry that cannot be read is computed again, and a folder that cannot be
written only costs the time. The folder is ``$TABRECON_CACHE_DIR``, else
``$XDG_CACHE_HOME/tabrecon`` (``~/.cache/tabrecon``); ``TABRECON_CACHE_DIR=off`` turns it off.

>>> import numpy as np
>>> calls = []
>>> def square() -> dict[str, np.ndarray]:
...     calls.append(1)
...     return {"x": np.arange(4) ** 2}
>>> a = cached_arrays("doctest-square", [np.arange(4).tobytes()], square, ["x"])
>>> b = cached_arrays("doctest-square", [np.arange(4).tobytes()], square, ["x"])
>>> a["x"].tolist() == b["x"].tolist() == [0, 1, 4, 9], len(calls) <= 2
(True, True)
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import numpy as np

#: bumped whenever what a cached entry holds, or how it is computed, changes
FORMAT = "1"


def cache_dir() -> Path | None:
    """The cache folder, or None when turned off (``TABRECON_CACHE_DIR=off``)."""
    given = os.environ.get("TABRECON_CACHE_DIR")
    if given is not None:
        return None if given.strip().lower() in ("", "off", "0", "none") else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tabrecon"


def _digest(kind: str, parts: Iterable[bytes | str]) -> str:
    import polars
    import scipy

    from . import __version__

    h = hashlib.sha256()
    for p in (FORMAT, __version__, np.__version__, scipy.__version__, polars.__version__, kind):
        h.update(p.encode() + b"\0")
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()[:40]


def cached_arrays(
    kind: str,
    parts: Iterable[bytes | str],
    compute: Callable[[], dict[str, np.ndarray]],
    names: Iterable[str],
) -> dict[str, np.ndarray]:
    """The arrays ``compute()`` returns (named ``names``) for the inputs whose bytes are
    ``parts``: read from the cache when an entry of that digest holds those arrays, else
    computed and written (atomically: a process reading at the same moment sees the whole entry
    or none)."""
    folder = cache_dir()
    if folder is None:
        return compute()
    path = folder / f"{kind}-{_digest(kind, parts)}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            if sorted(z.files) == sorted(names):
                return {k: z[k] for k in z.files}
    except Exception:  # absent, truncated, another format: any entry not read is computed again
        pass
    out = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{kind}-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **cast(dict[str, Any], out))
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass  # an unwritable cache only costs the time
    return out
