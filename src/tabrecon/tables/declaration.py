"""Any agency's release declared in one TOML file, audited with the same commands: no Python.

A declaration names what a record is (attributes and their categories), the tables published
over it (cells as predicates; counts, medians or means), how the counts are published (exact,
rounded, withheld: :mod:`tabrecon.tables.publication`) and for which geographic unit (census
blocks, or the agency's own: schools, hospitals, meshblocks, each with ids of a fixed number of
digits).
``--schema FILE.toml`` reads it (:func:`population`) and every generic command runs on it:
``tabulate``, ``reconstruct``, ``claims``, ``sweep-publication``, ``tables list``. The format,
key by key, with two worked examples, is in ``docs/declarations.md``::

    name = "school"                 # what reports call the release
    unit = "pupil"                  # what one record is
    geography = "school"            # records name theirs in a column school_id
    geoid_digits = 6
    publication = "suppress:3"      # counts of 1 or 2 withheld (the rule, and that it exists,
                                    # is a constraint too)

    [[attributes]]
    name = "sex"
    categories = [[1, "boy"], [2, "girl"]]

    [[attributes]]
    name = "age"
    range = [11, 16]                # categories 11..16, each labelled by its number, in order:
                                    # a pupil the tables place only in 11-12 is written as that
                                    # run (age_min, age_max), not as one year

    [[tables]]
    name = "T1"
    title = "Pupils by sex"
    lines = [{label = "All pupils"}, {label = "Boys", where = {sex = ["boy"]}},
             {label = "Girls", where = {sex = ["girl"]}}]

    [[tables]]
    name = "T2"
    title = "Median age"
    measure = "median"              # or "mean"; "count" (the default)
    of = "age"
    decimals = 1
    median = "interpolated"         # or "lower", "midpoint", "grouped" (with bins = [0, 5, ...])
    empty = "withheld"              # what an empty universe publishes (or a number)
    lines = [{label = "All pupils"}]

Every problem is one line naming the file, the key and the line it is on (an unknown
attribute, category, measure or key; a TOML syntax error at its own line and column).

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "bad.toml")
>>> _ = open(p, "w").write('name = "x"\\nunit = "pupil"\\n[[attributes]]\\nname = "sex"\\n'
...     'categories = [[1, "boy"]]\\n[[tables]]\\nname = "T1"\\ntitle = "t"\\n'
...     'lines = [{label = "All", where = {colour = ["red"]}}]\\n')
>>> load_declaration(p)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tabrecon.errors.InputError: ...bad.toml, line 9: key tables[1].lines[1].where.colour: unknown ...
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputError, TabreconError
from ..schema.registry import Population, register
from ..schema.registry import population as registered
from ..schema.spec import Attribute, EditRule, Schema
from ..vocab import Geo
from .measures import Measure, MedianRule, Statistic
from .publication import Publication
from .spec import UnitTable, check_statistic

TOP_KEYS = {
    "name",
    "unit",
    "description",
    "geography",
    "geoid_digits",
    "publication",
    "statistics",
    "attributes",
    "edits",
    "tables",
}
#: how a declaration's medians and means are published beside withheld counts: withheld with
#: their universe's count (agencies' practice) or always
STATISTICS = ("with-count", "always")
ATTRIBUTE_KEYS = {"name", "categories", "range", "ordered", "description"}
TABLE_KEYS = {
    "name",
    "title",
    "universe",
    "lines",
    "measure",
    "of",
    "decimals",
    "median",
    "bins",
    "empty",
    "publication",
    "ids",
}
LINE_KEYS = {"label", "where", "id"}
EDIT_KEYS = {"name", "if", "then", "message"}


def _with_statistics(rule: str, doc: dict[str, Any], fail: Callable[..., Exception]) -> str:
    """``rule`` with its withholding parts marked ``:statistics-always`` where the declaration
    says ``statistics = "always"`` (its medians and means published whatever counts are
    withheld); ``"with-count"``, the default, leaves it as it is."""
    said = doc.get("statistics", "with-count")
    if said not in STATISTICS:
        raise fail(["statistics"], f"{said!r}: choose {' or '.join(map(repr, STATISTICS))}")
    if said == "with-count":
        return rule
    parts = [p.strip() for p in rule.split(",")]
    return ",".join(
        p + ":statistics-always"
        if p.split("=")[-1].strip().lower().startswith("suppress") and "statistics" not in p
        else p
        for p in parts
    )


def _statistic(
    t: dict[str, Any],
    measure: Measure,
    of: str,
    *,
    key: list[str | int],
    fail: Callable[..., Exception],
) -> Statistic:
    """A median or mean table's :class:`Statistic`: its decimals, median rule, bins and the
    value of an empty universe, each refused at its key."""
    dec = t.get("decimals", 0)
    if not isinstance(dec, int) or not 0 <= dec <= 6:
        raise fail([*key, "decimals"], "decimals must be a whole number 0 to 6")
    med = str(t.get("median", MedianRule.INTERPOLATED))
    if med not in MedianRule.choices():
        raise fail(
            [*key, "median"],
            f"unknown median rule {med!r} (one of {', '.join(MedianRule.choices())})",
        )
    empty_raw = t.get("empty", "withheld")
    if empty_raw == "withheld":
        empty = None
    elif isinstance(empty_raw, (int, float)):
        empty = round(float(empty_raw) * 10**dec)
    else:
        raise fail([*key, "empty"], 'empty must be "withheld" or a number')
    bins = _bins(t, MedianRule(med), key, fail)
    try:
        return Statistic(measure, of, dec, MedianRule(med), empty, bins=bins)
    except TabreconError as e:
        raise fail([*key, "bins" if "bins" in str(e) else "median"], str(e)) from None


def _bins(
    t: dict[str, Any], rule: MedianRule, key: list[str | int], fail: Callable[..., Exception]
) -> tuple[int, ...] | None:
    """A grouped median's declared bin edges (None for every other rule, which has none)."""
    raw = t.get("bins")
    if rule is not MedianRule.GROUPED:
        if raw is not None:
            raise fail([*key, "bins"], 'bins are for a grouped median (median = "grouped")')
        return None
    if (
        not isinstance(raw, list)
        or len(raw) < 2
        or not all(isinstance(b, int) and not isinstance(b, bool) for b in raw)
    ):
        raise fail(
            [*key, "bins"],
            "a grouped median needs bins = [e0, e1, ...]: two or more whole-number edges, "
            "each bin from one edge up to the next",
        )
    return tuple(raw)


def _predicate(
    d: Any,
    key: list[str | int],
    by_name: dict[str, Attribute],
    fail: Callable[..., Exception],
) -> dict[str, tuple[int, ...]]:
    """A declaration's predicate, ``{attribute = [codes or labels]}`` (or, for an ordered
    attribute, ``{age = {min = 15}}``: its codes from ``min`` to ``max``, either left out), as
    codes per attribute; anything else refused, naming the key."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise fail(key, "a predicate is a table {attribute = [categories]}")
    out: dict[str, tuple[int, ...]] = {}
    for attr, cats in d.items():
        if attr not in by_name:
            raise fail(
                [*key, attr],
                f"unknown attribute {attr!r} (declared: {', '.join(by_name)})",
            )
        at = by_name[attr]
        if isinstance(cats, dict):  # {min = 15, max = 64} of an ordered attribute
            out[attr] = _between(at, cats, [*key, attr], fail)
            continue
        if not isinstance(cats, list) or not cats:
            raise fail([*key, attr], "categories are a non-empty list of codes or labels")
        codes = []
        for c in cats:
            if isinstance(c, int) and c in at.codes.tolist():
                codes.append(c)
            elif isinstance(c, str) and c in at.labels:
                codes.append(at.categories[at.labels.index(c)][0])
            else:
                shown = f'"{c}"' if isinstance(c, str) else str(c)
                raise fail(
                    [*key, attr],
                    f"{attr} has no category {c!r} (codes or labels of: "
                    f"{', '.join(at.labels[:8])}{' ...' if at.size > 8 else ''})",
                    token=shown,
                )
        out[attr] = tuple(sorted(set(codes)))
    return out


def _between(
    at: Attribute, bounds: dict, key: list[str | int], fail: Callable[..., Exception]
) -> tuple[int, ...]:
    """The codes of the ordered attribute ``at`` from ``bounds["min"]`` to ``bounds["max"]``
    (either may be left out); refused unless they are whole numbers that leave some code."""
    if not at.ordered:
        raise fail(key, f"{at.name} is not ordered: list its categories")
    if set(bounds) - {"min", "max"} or not all(isinstance(v, int) for v in bounds.values()):
        raise fail(key, "a range is {min = N, max = M} (whole numbers; either may be left out)")
    codes = at.codes.tolist()
    lo, hi = bounds.get("min", min(codes)), bounds.get("max", max(codes))
    got = tuple(c for c in codes if lo <= c <= hi)
    if not got:
        raise fail(key, f"no category of {at.name} lies in {lo}..{hi}")
    return got


def _holds(pred: dict[str, tuple[int, ...]]) -> pl.Expr:
    """A predicate as a polars expression over file codes (every attribute's codes must hold)."""
    if not pred:
        return pl.lit(True)
    return pl.all_horizontal([pl.col(a).is_in(list(c)) for a, c in pred.items()])


def _edits(
    raw: Any,
    predicate: Callable[[Any, list[str | int]], dict[str, tuple[int, ...]]],
    fail: Callable[..., Exception],
) -> tuple[EditRule, ...]:
    """The declaration's ``[[edits]]``: each ``{name, if, then[, message]}`` says that every
    record meeting ``if`` (every record, without it) meets ``then`` ("married requires age >= 15":
    ``if = {marital = ["married"]}, then = {age = {min = 15}}``). They are the schema's rules:
    records that break one are refused where read, and no reconstruction, proof or claim admits
    a type that breaks one, so a release need not publish empty tables to say so."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail(["edits"], "edits are [[edits]] entries")
    out = []
    for i, e in enumerate(raw, start=1):
        key: list[str | int] = ["edits", i]
        if not isinstance(e, dict):
            raise fail(key, "an edit is {name = ..., if = {...}, then = {...}}")
        extra = sorted(set(e) - EDIT_KEYS)
        if extra:
            raise fail(
                [*key, extra[0]],
                f"unknown key {extra[0]!r} (known: {', '.join(sorted(EDIT_KEYS))})",
            )
        name = e.get("name")
        if not isinstance(name, str) or not name.strip():
            raise fail([*key, "name"], "'name' must be a non-empty string")
        when, then = predicate(e.get("if"), [*key, "if"]), predicate(e.get("then"), [*key, "then"])
        if not then:
            raise fail([*key, "then"], "an edit needs what its records must meet: then = {...}")
        message = str(e.get("message") or f"breaks the edit {name.strip()!r}")
        out.append(EditRule(name.strip(), message, next(iter(then)), _holds(when) & ~_holds(then)))
    return tuple(out)


def population(name: str) -> Population:
    """What ``--schema`` names: a registered population (``households``) or a declaration
    file (``school.toml``), read and registered on first use."""
    if name.lower().endswith(".toml"):
        return load_declaration(name)
    return registered(name)


class _Where:
    """Finds the line of a key in the declaration's text: the line where the key's last name
    is assigned (or its value written) within the array-of-tables entry it belongs to."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def line(self, path: list[str | int], token: str | None = None) -> int | None:
        start, end = 0, len(self.lines)
        if len(path) >= 2 and isinstance(path[0], str) and isinstance(path[1], int):
            headers = [
                i
                for i, ln in enumerate(self.lines)
                if re.match(rf"^\s*\[\[\s*{re.escape(path[0])}\s*\]\]", ln)
            ]
            if len(headers) >= path[1]:
                start = headers[path[1] - 1]
                nxt = [
                    i for i, ln in enumerate(self.lines) if i > start and re.match(r"^\s*\[", ln)
                ]
                end = nxt[0] if nxt else len(self.lines)
        names = [p for p in path if isinstance(p, str)]
        needles = []
        if token is not None:
            needles.append(re.escape(token))
        if names:
            needles.append(rf"(^|[\s{{,]){re.escape(names[-1])}\s*=")
        for needle in needles:
            for i in range(start, end):
                if re.search(needle, self.lines[i].split("#", 1)[0]):
                    return i + 1
        return start + 1 if start or end < len(self.lines) else None


def _key(path: list[str | int]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def load_declaration(path: str | Path) -> Population:
    """Read, check and register the release declared in the TOML file ``path``; the
    :class:`~tabrecon.schema.registry.Population` it registers (its name the declaration's
    ``name``; read again, the same file registers the same population)."""
    p = Path(path)
    where = str(path)
    if not p.is_file():
        raise InputError("no such declaration file", path=where)
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise InputError(
            f"not valid TOML{f' (column {m.group(2)})' if m else ''}: {msg}",
            path=where,
            line=int(m.group(1)) if m else None,
        ) from None
    locate = _Where(text)

    def fail(key: list[str | int], message: str, token: str | None = None) -> InputError:
        return InputError(
            f"key {_key(key) or '(top)'}: {message}", path=where, line=locate.line(key, token)
        )

    def unknown(d: dict, allowed: set[str], key: list[str | int]) -> None:
        extra = sorted(set(d) - allowed)
        if extra:
            raise fail(
                [*key, extra[0]], f"unknown key {extra[0]!r} (known: {', '.join(sorted(allowed))})"
            )

    def text_of(d: dict, k: str, key: list[str | int], default: str | None = None) -> str:
        v = d.get(k, default)
        if not isinstance(v, str) or not v.strip():
            raise fail([*key, k], f"{k!r} must be a non-empty string")
        return v.strip()

    unknown(doc, TOP_KEYS, [])
    name = text_of(doc, "name", [])
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
        raise fail(["name"], f"name {name!r} must be a word (letters, digits, _)")
    unit = text_of(doc, "unit", [])
    geography = text_of(doc, "geography", [], "block")
    digits = doc.get("geoid_digits", 15 if geography == Geo.BLOCK else None)
    if not isinstance(digits, int) or not 1 <= digits <= 30:
        raise fail(["geoid_digits"], "geoid_digits must be a whole number 1 to 30")
    attrs = doc.get("attributes")
    if not isinstance(attrs, list) or not attrs:
        raise fail(["attributes"], "at least one [[attributes]] entry is needed")
    attributes = []
    for i, a in enumerate(attrs, start=1):
        key: list[str | int] = ["attributes", i]
        unknown(a, ATTRIBUTE_KEYS, key)
        aname = text_of(a, "name", key)
        if "categories" in a and "range" in a:
            raise fail([*key, "range"], "give categories or range, not both")
        if "range" in a:
            r = a["range"]
            if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)):
                raise fail([*key, "range"], "range must be [lowest, highest] whole numbers")
            if r[1] < r[0] or r[1] - r[0] > 1000:
                raise fail([*key, "range"], "range must go up, by at most 1,000 categories")
            cats = tuple((c, str(c)) for c in range(r[0], r[1] + 1))
        else:
            raw = a.get("categories")
            ok = (
                isinstance(raw, list)
                and raw
                and all(
                    isinstance(c, list)
                    and len(c) == 2
                    and isinstance(c[0], int)
                    and isinstance(c[1], str)
                    for c in raw
                )
            )
            if not ok:
                raise fail([*key, "categories"], 'categories must be [[code, "label"], ...] pairs')
            cats = tuple((int(c), str(lab)) for c, lab in raw)
        # a range is in order (ages, sizes); listed categories are when the file says so
        ordered = a.get("ordered", "range" in a)
        if not isinstance(ordered, bool):
            raise fail([*key, "ordered"], "ordered must be true or false")
        try:
            attributes.append(Attribute(aname, cats, str(a.get("description", "")), ordered))
        except TabreconError as exc:
            raise fail([*key, "name"], str(exc)) from None
    try:
        schema = Schema(
            name,
            unit,
            tuple(attributes),
            description=str(doc.get("description", "")),
            geography=geography,
            geoid_digits=digits,
        )
    except TabreconError as exc:
        raise fail(["geography"], str(exc)) from None
    by_name = {a.name: a for a in attributes}

    def predicate(d: Any, key: list[str | int]) -> dict[str, tuple[int, ...]]:
        return _predicate(d, key, by_name, fail)

    schema = replace(schema, rules=_edits(doc.get("edits"), predicate, fail))

    raw_tables = doc.get("tables")
    if not isinstance(raw_tables, list) or not raw_tables:
        raise fail(["tables"], "at least one [[tables]] entry is needed")
    tables: list[UnitTable] = []
    rules: list[str] = []
    for i, t in enumerate(raw_tables, start=1):
        key = ["tables", i]
        unknown(t, TABLE_KEYS, key)
        tname = text_of(t, "name", key).upper()
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", tname):
            raise fail([*key, "name"], f"table name {tname!r} must be a word")
        title = text_of(t, "title", key, tname)
        measure_text = str(t.get("measure", "count"))
        if measure_text not in Measure.choices():
            raise fail(
                [*key, "measure"],
                f"unknown measure {measure_text!r} (one of {', '.join(Measure.choices())})",
            )
        measure = Measure(measure_text)
        statistic = None
        if measure is not Measure.COUNT:
            of = text_of(t, "of", key)
            if of not in by_name:
                raise fail(
                    [*key, "of"], f"unknown attribute {of!r} (declared: {', '.join(by_name)})"
                )
            statistic = _statistic(t, measure, of, key=key, fail=fail)
        elif any(k in t for k in ("of", "decimals", "median", "bins", "empty")):
            bad = next(k for k in ("of", "decimals", "median", "bins", "empty") if k in t)
            raise fail([*key, bad], f"{bad!r} is for a median or a mean (measure = ...)")
        raw_lines = t.get("lines")
        if not isinstance(raw_lines, list) or not raw_lines:
            raise fail([*key, "lines"], "lines must be a non-empty list of {label = ...}")
        lines = []
        ids = []
        for j, ln in enumerate(raw_lines, start=1):
            lkey: list[str | int] = [*key, "lines", j]
            if not isinstance(ln, dict):
                raise fail(lkey, "each line is {label = ..., where = {...}}")
            unknown(ln, LINE_KEYS, lkey)
            label = text_of(ln, "label", lkey)
            lines.append((label, predicate(ln.get("where"), [*lkey, "where"])))
            ids.append(str(ln.get("id", f"{tname}_{j:02d}")).upper())
        if len(set(ids)) != len(ids):
            raise fail([*key, "lines"], f"table {tname} repeats a cell id")
        table = UnitTable(
            tname,
            i,
            title,
            predicate(t.get("universe"), [*key, "universe"]),
            tuple(lines),
            prefix="",
            schema=schema,
            ids=tuple(ids),
            statistic=statistic,
        )
        try:
            check_statistic(table, schema)
        except TabreconError as exc:
            raise fail([*key, "empty" if "empty" in str(exc) else "of"], str(exc)) from None
        if "publication" in t:
            if statistic is not None:
                raise fail([*key, "publication"], "a median or a mean is published as declared")
            rules.append(f"{tname}={t['publication']}")
        tables.append(table)
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise fail(["tables"], "a table name repeats")
    all_ids = [c.id for t in tables for c in t.cells()]
    if len(set(all_ids)) != len(all_ids):
        dup = next(c for c in all_ids if all_ids.count(c) > 1)
        raise fail(["tables"], f"cell id {dup} is used twice", token=dup)
    rule = _with_statistics(",".join([str(doc.get("publication", "exact")), *rules]), doc, fail)
    try:
        pub = Publication.parse(rule)
        pub.check_tables(names, name)
    except TabreconError as exc:
        raise fail(["publication"], str(exc)) from None
    try:
        taken = registered(name)
    except TabreconError:
        taken = None
    if taken is not None and taken.source != str(p.resolve()):
        raise fail(["name"], f"{name!r} names another population already; choose another name")
    fixed = tuple(tables)
    counts = [t for t in tables if t.statistic is None]
    size = next((t.cells()[0].id for t in counts if not t.cells()[0].predicate), "")
    pop = Population(
        name=name,
        schema=schema,
        noun=schema.unit if schema.unit.endswith("s") else f"{schema.unit}s",
        tables=lambda: fixed,
        size_cell=size,
        k_values=tuple(range(1, min(len(attributes), 4) + 1)),
        listed=False,
        description=str(doc.get("description", "")) or f"declared in {p.name}",
        publication=str(pub),
        source=str(p.resolve()),
    )
    return register(pop, replace=True)
