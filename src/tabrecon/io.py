"""Reading and writing files: every format tabrecon takes (CSV, gzip CSV, Parquet) read as text
columns for validation, output names checked against what they will hold, and atomic writes (a
file appears whole or not at all, so an interrupted run or a full disk never leaves half a
result).

Every file tabrecon writes goes through :func:`_atomic` and every folder it clears through
:func:`remove_tree`, so one guard protects the inputs: inside :func:`protecting` (the command line
wraps every command in it), writing over an input, or clearing a folder that holds one, raises
:class:`~tabrecon.errors.TabreconError` instead. The command line also refuses such a run before
any work, from the outputs its options declare (:class:`Writes`)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
from collections.abc import Callable, Collection, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputError, TabreconError

if TYPE_CHECKING:  # polars and numpy load on first read or write: the command line starts faster
    import numpy as np
    import polars as pl

#: What a data file may be named: its format follows from its suffix.
DATA_SUFFIXES = (".parquet", ".csv", ".csv.gz")


def check_suffix(path: str | Path, allowed: tuple[str, ...] = DATA_SUFFIXES) -> Path:
    """``path`` when its name ends in an allowed suffix; otherwise an error naming it (an output
    is never written in a format its name does not say).

    >>> check_suffix("out.xlsx", (".csv",))
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: out.xlsx: unknown output format '.xlsx'; name it .csv
    """
    if not str(path).lower().endswith(allowed):
        raise TabreconError(
            f"{path}: unknown output format {Path(path).suffix or '(no suffix)'!r}; "
            f"name it {', '.join(allowed)}"
        )
    return Path(path)


def scan_text(path: str | Path) -> pl.LazyFrame:
    """A lazy frame of the file's columns as text (Parquet columns cast to text)."""
    import polars as pl

    p = str(path)
    if p.endswith(".parquet"):
        return pl.scan_parquet(p).with_columns(pl.all().cast(pl.String))
    return pl.scan_csv(p, infer_schema=False)


_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
_SNIFF = 1 << 16


def _head(path: Path) -> bytes:
    """The first 64 KiB of the file's text (decompressed when its name ends in .gz)."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            return fh.read(_SNIFF)
    except (OSError, EOFError) as exc:  # a gzip file cut short or not gzip at all
        raise InputError(f"cannot be read as gzip ({exc})", path=str(path)) from None


def check_readable(path: str | Path, text: bool | None = None) -> Path:
    r"""``path`` when it is a file tabrecon can read; else an :class:`InputError` in the user's
    terms: not found, a folder, not UTF-8 text (naming the encoding a byte-order mark declares,
    or the line of the first byte that is not UTF-8), not Parquet. ``text``: whether the file
    must be text (default: unless its name ends in ``.parquet``). A UTF-8 byte-order mark is
    fine.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> check_readable(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.InputError: ...: is a folder, not a file
    >>> p = os.path.join(d, "t.csv")
    >>> _ = open(p, "wb").write("a,b\n1,2\n".encode("utf-16"))
    >>> check_readable(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.InputError: ...t.csv: is UTF-16 text (...byte-order mark); save it as UTF-8
    """
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", path=str(p))
    if p.is_dir():
        raise InputError("is a folder, not a file", path=str(p))
    if text is None:
        text = not p.name.lower().endswith(".parquet")
    if not text:
        with open(p, "rb") as fh:
            magic = fh.read(4)
        if magic != b"PAR1":
            what = "empty" if not magic else "not a Parquet file (it does not start with PAR1)"
            raise InputError(what, path=str(p))
        return p
    head = _head(p)
    for bom, name in _BOMS:
        if head.startswith(bom):
            raise InputError(
                f"is {name} text (it starts with a {name} byte-order mark); save it as UTF-8",
                path=str(p),
            )
    import codecs

    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < _SNIFF)
    except UnicodeDecodeError as exc:
        line = head[: exc.start].count(b"\n") + 1
        byte = head[exc.start]
        hint = "; it looks like Latin-1 or Windows-1252" if byte >= 0x80 else ""
        raise InputError(
            f"is not UTF-8 text (byte 0x{byte:02x}){hint}; save it as UTF-8", path=str(p), line=line
        ) from None
    if b"\x00" in head:
        raise InputError("is not a text file (it holds NUL bytes)", path=str(p))
    return p


def _ragged(path: Path) -> tuple[int, int, int] | None:
    """(line, fields, header fields) of the first CSV row whose field count differs from the
    header's, or None."""
    import csv
    import io as _io

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as raw:
        reader = csv.reader(_io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace"))
        header = next(reader, None)
        if header is None:
            return None
        for row in reader:
            if row and len(row) != len(header):
                return reader.line_num, len(row), len(header)
    return None


def read_error(path: str | Path, exc: BaseException) -> InputError:
    """The reader's exception ``exc`` on ``path`` in the user's terms (the line of a ragged row,
    the encoding), never the library's own words where tabrecon knows better."""
    p = Path(path)
    parquet = p.name.lower().endswith(".parquet")
    text = str(exc).strip()
    if not parquet and ("more fields" in text or "fewer fields" in text):
        where = _ragged(p)
        if where is not None:
            line, n, m = where
            return InputError(f"this row has {n} fields, the header {m}", path=str(p), line=line)
    if "utf-8" in text.lower() or "utf8" in text.lower():
        return InputError("is not UTF-8 text; save it as UTF-8", path=str(p))
    if parquet and ("PAR1" in text or "out of specification" in text.lower()):
        return InputError(
            "is damaged or truncated: a Parquet file ends with the bytes PAR1 and this one does "
            "not (an interrupted copy or download?)",
            path=str(p),
        )
    first = text.splitlines()[0] if text else type(exc).__name__
    return InputError(f"cannot be read as {'Parquet' if parquet else 'CSV'}: {first}", path=str(p))


#: The files tabrecon reads and writes, told apart by their columns (so that an option handed
#: the wrong kind of file says which kind it got): a name and the columns that identify it.
FILE_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("a long table file (geoid, cell, value)", frozenset({"geoid", "cell", "value"})),
    (
        "TopDown's noisy measurements (tabrecon topdown)",
        frozenset({"level", "geoid", "query", "noisy", "variance"}),
    ),
    ("certification results (tabrecon solvar)", frozenset({"block_geoid", "solvar", "status"})),
    ("a tradeoff table (tabrecon tradeoff)", frozenset({"defense", "rho", "tvd_block"})),
    ("an attacker file (pik, block_geoid, sex, age)", frozenset({"pik", "block_geoid", "sex"})),
    ("a housing-unit file", frozenset({"block_geoid", "tenure", "vacancy_status"})),
    ("a person file", frozenset({"block_geoid", "sex", "age"})),
)


def kind_of(columns: Collection[str]) -> str | None:
    """Which of tabrecon's files has these ``columns`` (:data:`FILE_KINDS`; a wide table file
    has SF1 or Census API cell names), or None.

    >>> kind_of(["geoid", "cell", "value"])
    'a long table file (geoid, cell, value)'
    >>> kind_of(["GEO_ID", "P0010001", "P0120003"])
    'a wide table file (one column per cell)'
    """
    import re

    cols = set(columns)
    for name, need in FILE_KINDS:
        if need <= cols:
            return name
    if any(re.fullmatch(r"(PCT|P|H)\d{6,7}|(PCT|P|H)\d+[A-Z]?_\d{3}N?", c) for c in cols):
        return "a wide table file (one column per cell)"
    return None


def wrong_kind(path: str | Path, columns: Collection[str], expected: str) -> InputError:
    """An error for a file handed where ``expected`` (e.g. "a person file (block_geoid, sex,
    age, ...)") was wanted: which kind of file it is, or the columns it has."""
    kind = kind_of(columns)
    cols = list(columns)
    got = (
        f"is {kind}"
        if kind
        else f"has columns {', '.join(cols[:8])}{' ...' if len(cols) > 8 else ''}"
        if cols
        else "has no columns"
    )
    return InputError(f"{got}, not {expected}", path=str(path))


def require_columns(
    path: str | Path, columns: Collection[str], need: Collection[str], expected: str
) -> None:
    """Refuse a file without the columns ``need`` of the kind ``expected`` (a name of
    :data:`FILE_KINDS`, e.g. "a person file"): one of another kind is named as such; one of the
    right kind (or of none known) gets the missing columns named.

    >>> require_columns("t.parquet", ["geoid", "cell", "value"], ["block_geoid"], "a person file")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tabrecon.errors.InputError: t.parquet: is a long table file (...), not a person file (...)
    """
    missing = [c for c in need if c not in columns]
    if not missing:
        return
    kind = kind_of(columns)
    if (kind is not None and not kind.startswith(expected)) or len(missing) == len(need):
        raise wrong_kind(path, columns, f"{expected} (columns {', '.join(need)})")
    unknown = [c for c in columns if c not in need]
    hint = (
        f"; it has {', '.join(unknown[:8])}{' ...' if len(unknown) > 8 else ''}" if unknown else ""
    )
    raise InputError(
        f"missing required column(s) {', '.join(missing)} of {expected} ({', '.join(need)}){hint}",
        path=str(path),
    )


def read_text_frame(
    path: str | Path, counties: Collection[str] | None = None, geo_column: str = "block_geoid"
) -> pl.DataFrame:
    """A data file as text columns; with ``counties`` (5-digit state+county codes) only the rows
    whose ``geo_column`` lies in them (streamed, so memory follows the selection, not the file),
    with a ``__line`` column keeping each row's line in the file. Errors name the file
    (:func:`check_readable`, :func:`read_error`)."""
    import polars as pl

    p = str(path)
    check_readable(p)
    try:
        if counties is not None:
            lf = scan_text(p).with_row_index("__line", offset=2)
            lf = lf.filter(
                pl.col(geo_column).str.strip_chars().str.slice(0, 5).is_in(list(counties))
            )
            return lf.collect(engine="streaming")
        if p.endswith(".parquet"):
            df = pl.read_parquet(p)
            return df.with_columns([pl.col(c).cast(pl.String) for c in df.columns])
        return pl.read_csv(p, infer_schema=False)
    except InputError:
        raise
    except Exception as exc:  # polars raises several exception types for malformed files
        raise read_error(p, exc) from None


def read_rows(
    path: str | Path, counties: Collection[str] | None = None, geo_column: str = "block_geoid"
) -> tuple[pl.DataFrame, np.ndarray | None]:
    """:func:`read_text_frame` without its ``__line`` column, and that column's file lines
    (None when every row was read: row i is then line i + 2), for errors naming the line."""
    df = read_text_frame(path, counties, geo_column)
    if "__line" not in df.columns:
        return df, None
    return df.drop("__line"), df["__line"].to_numpy()


#: Data suffixes longest first, so that ``x.csv.gz`` has the stem ``x``.
_STEM_SUFFIXES = (".csv.gz", ".parquet", ".csv", ".json", ".md")


def beside(path: str | Path, suffix: str) -> Path:
    """The file written next to output ``path``: its stem (the name without its data suffix)
    followed by ``suffix``.

    >>> str(beside("out/solvar.parquet", "_table_s4.csv"))
    'out/solvar_table_s4.csv'
    >>> str(beside("swapped.csv.gz", "_swap.json"))
    'swapped_swap.json'
    """
    p = str(path)
    for suf in _STEM_SUFFIXES:
        if p.lower().endswith(suf):
            return Path(p[: -len(suf)] + suffix)
    return Path(p.rsplit(".", 1)[0] + suffix if "." in Path(p).name else p + suffix)


@dataclass(frozen=True)
class Writes:
    """Marks a command's path option as an output, in its ``Annotated`` type (the command line
    reads it; typer ignores it): a file (with the files it writes ``beside`` it and, with
    ``parts``, its resumable ``<out>.parts`` folder) or a ``folder``. Every other path option is an
    input, and an output that is an input, or holds one, is refused before any work."""

    folder: bool = False
    beside: tuple[str, ...] = ()
    parts: bool = False

    def targets(self, value: Path) -> list[tuple[Path, bool]]:
        """(path, is a folder) for everything an output option's ``value`` makes the command
        write or clear."""
        if self.folder:
            return [(value, True)]
        out = [(value, False)] + [(beside(value, s), False) for s in self.beside]
        if self.parts:
            out.append((Path(str(value) + ".parts"), True))
        return out


@dataclass(frozen=True)
class Reads:
    """Marks a text option that may name an input file (``reidentify --attacker``): protected
    like a path input when it names an existing file."""


def file_digest(path: str | Path) -> str:
    """A checksum of the file's bytes (BLAKE2b, 128 bits, hex): what a run records beside each
    part it writes, so that a rerun never reads a part damaged on disk."""
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same inode when both exist (hard and symbolic
    links included), else the same resolved path."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return _resolved(a) == _resolved(b)


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except OSError:  # a symlink loop: compare it as written
        return p.absolute()


def _inside(p: Path, folder: Path) -> bool:
    return _resolved(p).is_relative_to(_resolved(folder))


def clash(
    inputs: Iterable[tuple[str, Path]], outputs: Iterable[tuple[str, Path, bool]]
) -> str | None:
    """Why writing ``outputs`` (option, path, is a folder) could destroy one of ``inputs``
    (option, path) or another output, naming both; None when it cannot.

    >>> clash([("MICRODATA", Path("a.csv"))], [("--out", Path("./a.csv"), False)])
    '--out a.csv is MICRODATA a.csv: an output never replaces an input; choose another --out'
    """
    outs = list(outputs)
    for name, inp in inputs:
        for oname, out, folder in outs:
            if same_file(inp, out):
                what = "the same folder" if folder else "the same file"
                verb = "is" if inp.absolute() == out.absolute() else f"is {what} as"
                return (
                    f"{oname} {out} {verb} {name} {inp}: an output never replaces an input; "
                    f"choose another {oname}"
                )
            if folder and _inside(inp, out):
                return (
                    f"{name} {inp} lies inside {oname} {out}, a folder this command writes and "
                    f"clears: choose an {oname} that does not hold the inputs"
                )
    for i, (a, pa, fa) in enumerate(outs):
        for b, pb, fb in outs[i + 1 :]:
            if a != b and (
                same_file(pa, pb) or (fa and _inside(pb, pa)) or (fb and _inside(pa, pb))
            ):
                return f"{a} {pa} and {b} {pb} would overwrite each other: give them other paths"
    return None


def unwritable(outputs: Iterable[tuple[str, Path, bool]]) -> str | None:
    """Why an output (option, path, is a folder) cannot be written where it points: a folder
    output that names an existing file, or a file output that names an existing folder. Checked
    before any work, so that a command never computes for minutes and then fails to write.

    >>> unwritable([("--out", Path("."), False)])
    '--out . is a folder: give a file name inside it (such as ./out.parquet)'
    """
    for name, path, folder in outputs:
        if folder and path.exists() and not path.is_dir():
            return (
                f"{name} {path} is a file, and this command writes a folder there: choose "
                f"another {name}"
            )
        if not folder and path.is_dir():
            return (
                f"{name} {path} is a folder: give a file name inside it (such as "
                f"{path}/out.parquet)"
            )
    return None


_PROTECTED: ContextVar[tuple[Path, ...]] = ContextVar("tabrecon_protected", default=())


@contextlib.contextmanager
def protecting(paths: Iterable[Path]) -> Iterator[None]:
    """Within the block, writing over one of ``paths``, or clearing a folder that holds one,
    raises :class:`~tabrecon.errors.TabreconError`."""
    token = _PROTECTED.set(_PROTECTED.get() + tuple(Path(p) for p in paths))
    try:
        yield
    finally:
        _PROTECTED.reset(token)


def _guard_write(p: Path) -> None:
    # an input folder (an SF1 distribution) is read only through its segment files, whose names no
    # output can take (outputs are .parquet, .csv, .csv.gz, .json, .md, .png, .toml, .html)
    for inp in _PROTECTED.get():
        if same_file(p, inp):
            raise TabreconError(
                f"{p}: not written, it is the input {inp} (an output never replaces an input)"
            )


def remove_tree(folder: str | Path) -> None:
    """Delete ``folder`` and what it holds (an earlier run's results), unless it holds an input
    (:func:`protecting`)."""
    f = Path(folder)
    for inp in _PROTECTED.get():
        if _inside(inp, f):
            raise TabreconError(f"{f}: not cleared, it holds the input {inp}")
    shutil.rmtree(f)


def remove_file(path: str | Path) -> None:
    """Delete ``path`` if it exists (an earlier run's result), unless it is an input."""
    p = Path(path)
    _guard_write(p)
    p.unlink(missing_ok=True)


def _atomic(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Write through a hidden temporary beside ``path`` and rename it into place; a failure (a
    full disk included) names ``path`` (never the temporary) and leaves nothing behind, and the
    file that was there before, if any, stays as it was. Refuses to write over an input
    (:func:`protecting`)."""
    p = Path(path)
    _guard_write(p)
    tmp = p.with_name("." + p.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        reason = (exc.strerror or str(exc)).replace(str(tmp), str(p))
        raise TabreconError(f"{p}: cannot be written ({reason})") from None
    return p


def write_frame(df: pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` in the format its name says (Parquet, CSV or gzip CSV), atomically."""
    p = check_suffix(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    name = p.name.lower()

    def write(tmp: Path) -> None:
        if name.endswith(".parquet"):
            df.write_parquet(tmp)
        elif name.endswith(".gz"):
            with gzip.open(tmp, "wb", compresslevel=6) as fh:
                df.write_csv(fh)  # type: ignore[call-overload]
        else:
            df.write_csv(tmp)

    return _atomic(p, write)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return _atomic(path, lambda tmp: tmp.write_text(text))


def write_json(path: str | Path, obj: Any, *, strict: bool = False) -> Path:
    """Write ``obj`` as indented JSON, atomically (values JSON cannot hold are written as text).
    ``strict``: for readers other than tabrecon (``summary.json``), a number that is not one
    (NaN, infinity) is written ``null``, which every JSON parser reads (``NaN`` is no JSON);
    without it they stay NaN, as tabrecon's own records read back on resume expect.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "s.json")
    >>> _ = write_json(p, {"rho": float("nan"), "k": [1.5, float("inf")]}, strict=True)
    >>> json.loads(open(p).read(), parse_constant=lambda c: 1 / 0)
    {'rho': None, 'k': [1.5, None]}
    """
    if strict:
        return write_text(path, json.dumps(_strict(obj), indent=1, default=str, allow_nan=False))
    return write_text(path, json.dumps(obj, indent=1, default=str))


def _strict(obj: Any) -> Any:
    """``obj`` with every float that is no finite number (numpy's too) made None."""
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_strict(v) for v in obj]
    if isinstance(obj, float) or type(obj).__name__ in ("float64", "float32"):
        import math

        return float(obj) if math.isfinite(obj) else None
    return obj


def write_parquet(df: pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as Parquet, atomically."""
    return _atomic(path, df.write_parquet)


def append_row(path: str | Path, row: dict[str, Any]) -> Path:
    """Add ``row`` to the CSV file ``path`` (with a header when the file is new or empty), by
    writing the whole file anew and renaming it into place: a crash or a full disk leaves the
    file as it was, never with half a row."""
    import polars as pl

    p = Path(path)
    old = p.read_bytes() if p.exists() else b""
    line = pl.DataFrame([row]).write_csv(include_header=not old).encode()
    if old and not old.endswith(b"\n"):
        old += b"\n"
    return _atomic(p, lambda tmp: tmp.write_bytes(old + line))


def write_csv(df: pl.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV, atomically, whatever the name's suffix (``.csv`` by convention)."""
    return _atomic(path, df.write_csv)


def write_figure(fig: Any, path: str | Path, **savefig: Any) -> Path:
    """Save a matplotlib figure atomically, in the format its name's suffix says (``.png``)."""
    fmt = Path(path).suffix.lstrip(".") or "png"
    return _atomic(path, lambda tmp: fig.savefig(tmp, format=fmt, **savefig))


__all__ = [
    "DATA_SUFFIXES",
    "Reads",
    "append_row",
    "Writes",
    "unwritable",
    "FILE_KINDS",
    "beside",
    "check_readable",
    "check_suffix",
    "clash",
    "file_digest",
    "kind_of",
    "read_error",
    "require_columns",
    "wrong_kind",
    "protecting",
    "remove_file",
    "remove_tree",
    "same_file",
    "read_text_frame",
    "scan_text",
    "write_csv",
    "write_figure",
    "write_frame",
    "write_json",
    "write_parquet",
    "write_text",
]
