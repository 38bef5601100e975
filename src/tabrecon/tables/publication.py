"""How a release publishes its counts: exactly, rounded to a base, or withheld below a threshold.

Most agencies outside the U.S. never publish exact small counts: Statistics New Zealand randomly
rounds to base 3, Statistics Canada to base 5, many others suppress cells below a threshold. A
:class:`Publication` is that rule as a value. Its one job for the attacks is
:meth:`Publication.interval`: the true counts a published value allows, which the count model
(:func:`tabrecon.engine.model.block_program`) then uses as the row's bounds
``lo <= A x <= hi`` instead of ``A x = v``; reconstruction, the uniqueness proof and verified
claims need nothing else. :meth:`Publication.publish` applies the rule to true counts (to make
a release to attack, and for the sweep of settings).

Rules, as the command line spells them (``--publication``):

* ``exact``: every cell is its true count.
* ``round:B`` / ``round:B:random``: every cell a multiple of ``B``. Conventional rounding takes
  the nearest multiple (halves up): a published ``v`` allows ``v - floor(B/2)`` to
  ``v + ceil(B/2) - 1``. Random rounding takes one of the two neighbouring multiples (a
  multiple stays): ``v - B + 1`` to ``v + B - 1``. Append ``:zeros-exact`` when the agency
  never rounds a nonzero count to 0 (then a published 0 is a true 0 and a positive value is
  at least 1).
* ``suppress:T``: counts from 1 to ``T - 1`` are withheld (the published file leaves them empty
  or marks them), zeros and counts of ``T`` or more are exact. ``suppress:T:zeros`` withholds
  zeros too. A median or a mean is withheld with the count of its universe (one person's median
  age is their age), as agencies publish; ``:statistics-always`` declares a release that
  publishes its medians and means whatever it withholds of the counts. ``:complementary``
  withholds further cells after these, as agencies do (:mod:`tabrecon.tables.suppression`), so
  that no withheld cell follows exactly from the published ones; a withheld cell then allows
  any count. Without it, only primary suppression is known: a file where further cells were
  withheld to protect these (complementary suppression) breaks the rule, and its blocks are
  reported infeasible, never silently reconstructed.

>>> p = Publication.parse("round:3:random")
>>> lo, hi = p.interval(np.array([0, 3, 9]))
>>> lo.tolist(), hi.tolist()
([0, 1, 7], [2, 5, 11])
>>> Publication.parse("suppress:5").interval(np.array([MISSING, 0, 7]))[1].tolist()
[4, 0, 7]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, TabreconError

if TYPE_CHECKING:
    import polars as pl
from ..vocab import Words

#: a withheld (suppressed) cell's value in the engine's arrays of published values
MISSING = -1

#: what a published file writes for a withheld cell (besides an empty field): the marks the
#: Census Bureau, Statistics Canada ("x", "F"), the ONS ("c") and Eurostat (":") use
MISSING_MARKS = ("", "S", "X", "(X)", "D", "N", "C", "F", "..", ":", "-", "*", "NA", "SUPPRESSED")


class Rule(Words):
    """How a cell's published value relates to its true count."""

    EXACT = "exact"
    ROUNDED = "round"
    SUPPRESSED = "suppress"


class Rounding(Words):
    """Which multiple of the base a count is rounded to."""

    CONVENTIONAL = "conventional"  # the nearest (halves up)
    RANDOM = "random"  # one of the two neighbours (unbiased random rounding)


#: the largest count a withheld cell of a complementary-suppressed release allows (any: a
#: complement is chosen whatever its count; the block's total bounds it in the model)
COMPLEMENT_MAX = 1_000_000_000


@dataclass(frozen=True)
class Publication:
    """A release's publication rule for its counts (see the module's text for the spellings).

    >>> Publication.parse("round:5").interval(np.array([10]))
    (array([8]), array([12]))
    >>> str(Publication.parse("round:3:random:zeros-exact"))
    'round:3:random:zeros-exact'
    """

    rule: Rule = Rule.EXACT
    base: int = 1
    rounding: Rounding = Rounding.CONVENTIONAL
    zeros_exact: bool = False
    threshold: int = 0
    zeros_suppressed: bool = False
    #: medians and means published even where their universe's count is withheld
    #: (``:statistics-always``); otherwise withheld with it
    statistics_always: bool = False
    #: further cells withheld so that no withheld one is recovered exactly from its tables'
    #: identities (``:complementary``, :mod:`tabrecon.tables.suppression`)
    complementary: bool = False
    #: other rules for some tables (table name, rule): ``round:3,P42=exact``
    overrides: tuple[tuple[str, Publication], ...] = ()

    def __post_init__(self) -> None:
        if self.rule == Rule.ROUNDED and self.base < 1:
            raise TabreconError(f"a rounding base must be 1 or more (got {self.base})")
        if self.rule == Rule.SUPPRESSED and self.threshold < 1:
            raise TabreconError(f"a suppression threshold must be 1 or more (got {self.threshold})")

    @classmethod
    def parse(cls, text: str, what: str = "--publication") -> Publication:
        """The rule a ``--publication`` value names (``exact``, ``round:3:random``,
        ``suppress:5``...), with other rules for some tables after commas (``round:3,P42=exact``:
        every table rounded to 3 but P42, published exactly); a clear error naming what is wrong
        otherwise, and ``what`` gave it (the option; the Python API says ``publication``).

        >>> str(Publication.parse("suppress:3, h1=exact"))
        'suppress:3,H1=exact'
        """
        items = [i.strip() for i in text.split(",")]
        if len(items) > 1 or "=" in text:
            plain = [i for i in items if "=" not in i]
            named = [i.split("=", 1) for i in items if "=" in i]
            tables = [t.strip().upper() for t, _ in named]
            if len(plain) > 1 or not all(tables) or len(set(tables)) != len(tables):
                raise TabreconError(
                    f"{what} {text!r}: one rule for every table, then TABLE=RULE for "
                    "others, each table once (such as round:3,P42=exact)"
                )
            default = cls.parse(plain[0], what) if plain else cls()
            over = tuple(
                (t, cls.parse(r.strip(), what)) for t, (_, r) in zip(tables, named, strict=True)
            )
            return replace(default, overrides=over)
        parts = [p.strip().lower() for p in text.split(":")]
        head, args = parts[0], parts[1:]
        usage = (
            f"{what} {text!r}: expected exact, round:B[:random][:zeros-exact] or "
            "suppress:T[:zeros][:complementary][:statistics-always] (B, T whole numbers >= 1)"
        )
        if head == Rule.EXACT and not args:
            return cls()
        if head not in (Rule.ROUNDED, Rule.SUPPRESSED) or not args or not args[0].isdigit():
            raise TabreconError(usage)
        n, flags = int(args[0]), set(args[1:])
        if n < 1:
            raise TabreconError(usage)
        if head == Rule.ROUNDED:
            if (
                flags - {"random", "conventional", "zeros-exact"}
                or {
                    "random",
                    "conventional",
                }
                <= flags
            ):
                raise TabreconError(usage)
            rounding = Rounding.RANDOM if "random" in flags else Rounding.CONVENTIONAL
            return cls(Rule.ROUNDED, base=n, rounding=rounding, zeros_exact="zeros-exact" in flags)
        if flags - {"zeros", "complementary", "statistics-always"}:
            raise TabreconError(usage)
        return cls(
            Rule.SUPPRESSED,
            threshold=n,
            zeros_suppressed="zeros" in flags,
            complementary="complementary" in flags,
            statistics_always="statistics-always" in flags,
        )

    def __str__(self) -> str:
        return self._one() + "".join(f",{t}={r}" for t, r in self.overrides)

    def _one(self) -> str:
        if self.rule == Rule.ROUNDED:
            s = f"round:{self.base}"
            s += ":random" if self.rounding == Rounding.RANDOM else ""
            return s + (":zeros-exact" if self.zeros_exact else "")
        if self.rule == Rule.SUPPRESSED:
            return (
                f"suppress:{self.threshold}"
                + (":zeros" if self.zeros_suppressed else "")
                + (":complementary" if self.complementary else "")
                + (":statistics-always" if self.statistics_always else "")
            )
        return "exact"

    @property
    def exact(self) -> bool:
        """Every published value is the true count (rounding to base 1 is no rounding)."""
        one = self.rule == Rule.EXACT or (self.rule == Rule.ROUNDED and self.base == 1)
        return one and all(r.exact for _, r in self.overrides)

    @property
    def withholds(self) -> bool:
        """Some cells may be missing from the published file."""
        return self.rule == Rule.SUPPRESSED or any(r.withholds for _, r in self.overrides)

    @property
    def withholds_statistics(self) -> bool:
        """Medians and means are withheld with their universe's count (under a rule that
        withholds counts and does not declare ``:statistics-always``)."""
        return self.withholds and not self.statistics_always

    def tables(self) -> tuple[str, ...]:
        """The tables given a rule of their own."""
        return tuple(t for t, _ in self.overrides)

    def check_tables(self, known: Sequence[str], schema: str, what: str = "--publication") -> None:
        """Refuse a rule given to a table ``schema`` does not publish (``known``)."""
        unknown = [t for t in self.tables() if t not in set(known)]
        if unknown:
            raise TabreconError(
                f"{what} {self}: {', '.join(unknown)} is not a table of --schema {schema} "
                f"(tabrecon tables list --schema {schema})"
            )

    def _groups(self, n: int, tables: Sequence[str] | None) -> list[tuple[Publication, np.ndarray]]:
        """Each rule with the positions (of ``n`` columns, the cells of ``tables``) it governs."""
        if not self.overrides:
            return [(self, np.arange(n))]
        if tables is None or len(tables) != n:
            raise TabreconError(f"publication {self}: per-table rules need each cell's table")
        of = np.asarray(tables, dtype=object)
        base = replace(self, overrides=())
        out = [(base, np.flatnonzero(~np.isin(of, self.tables())))]
        out += [(r, np.flatnonzero(of == t)) for t, r in self.overrides]
        return out

    def _per_column(
        self, v: np.ndarray, tables: Sequence[str] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each column's (lo, hi, violation) under its own table's rule, columns on the last
        axis."""
        lo, hi = np.zeros(v.shape, dtype=np.int64), np.zeros(v.shape, dtype=np.int64)
        bad = np.zeros(v.shape, dtype=bool)
        for rule, cols in self._groups(v.shape[-1], tables):
            lo[..., cols], hi[..., cols] = rule.interval(v[..., cols])
            bad[..., cols] = rule.violations(v[..., cols])
        return lo, hi, bad

    def interval(
        self, published: np.ndarray, tables: Sequence[str] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The smallest and largest true count each published value allows (``MISSING``: a
        withheld cell), element by element.

        >>> lo, hi = Publication.parse("round:10").interval(np.array([0, 10]))
        >>> lo.tolist(), hi.tolist()
        ([0, 5], [4, 14])
        >>> lo, hi = Publication.parse("round:3:random:zeros-exact").interval(np.array([0, 3]))
        >>> lo.tolist(), hi.tolist()
        ([0, 1], [0, 5])
        """
        v = np.asarray(published, dtype=np.int64)
        if self.overrides:  # each cell by its table's rule (``tables``: the last axis's)
            return self._per_column(v, tables)[:2]
        if self.rule == Rule.SUPPRESSED:
            gone = v == MISSING
            if self.complementary:  # a complement may be any count
                return np.where(gone, 0, v), np.where(gone, COMPLEMENT_MAX, v)
            lo = np.where(gone, 0 if self.zeros_suppressed else 1, v)
            hi = np.where(gone, self.threshold - 1, v)
            return lo, hi
        if self.exact:
            return v.copy(), v.copy()
        b = self.base
        if self.rounding == Rounding.RANDOM:
            down, up = b - 1, b - 1
        else:
            down, up = b // 2, (b + 1) // 2 - 1
        lo, hi = np.maximum(v - down, 0), v + up
        if self.zeros_exact:  # 1 .. b-1 rounded up to b, never down to 0
            lo = np.where(v == b, 1, np.where(v > 0, np.maximum(lo, 1), 0))
            hi = np.where(v > 0, hi, 0)
        return lo, hi

    def publish(
        self,
        true: np.ndarray,
        rng: np.random.Generator | None = None,
        tables: Sequence[str] | None = None,
    ) -> np.ndarray:
        """The values this rule publishes for true counts ``true`` (``MISSING`` where withheld;
        random rounding draws from ``rng``, up with probability remainder / base).

        >>> Publication.parse("round:5").publish(np.array([0, 2, 3, 12]))
        array([ 0,  0,  5, 10])
        >>> Publication.parse("suppress:3").publish(np.array([0, 1, 2, 3]))
        array([ 0, -1, -1,  3])
        """
        x = np.asarray(true, dtype=np.int64)
        if self.overrides:
            out = x.copy()
            for rule, cols in self._groups(x.shape[-1], tables):
                out[..., cols] = rule.publish(x[..., cols], rng)
            return out
        if self.rule == Rule.SUPPRESSED:
            small = (x < self.threshold) & ((x > 0) | self.zeros_suppressed)
            return np.where(small, MISSING, x)
        if self.exact:
            return x.copy()
        b = self.base
        if self.rounding == Rounding.RANDOM:
            rng = rng if rng is not None else np.random.default_rng(0)
            r = x % b
            out = x - r + b * (rng.random(x.shape) < r / b)
        else:
            out = b * ((2 * x + b) // (2 * b))
        if self.zeros_exact:
            out = np.where((x > 0) & (out == 0), b, out)
        return out

    def violations(self, published: np.ndarray, tables: Sequence[str] | None = None) -> np.ndarray:
        """Where a published value cannot have come from this rule: a rounded value not a
        multiple of the base, a withheld cell where nothing is withheld, a value below the
        threshold that should have been withheld (a boolean mask)."""
        v = np.asarray(published, dtype=np.int64)
        if self.overrides:
            return self._per_column(v, tables)[2]
        if self.rule == Rule.SUPPRESSED:
            small = (v != MISSING) & (v < self.threshold) & ((v > 0) | self.zeros_suppressed)
            return small | (v < MISSING)
        bad = v < 0
        if self.rule == Rule.ROUNDED:
            bad |= v % self.base != 0
        return bad

    def why(self, value: int) -> str:
        """Why ``value`` breaks this rule, in a sentence's words."""
        if value == MISSING:
            return "is withheld, but the publication rule withholds nothing"
        if self.rule == Rule.SUPPRESSED:
            return f"is below the suppression threshold {self.threshold} yet published"
        return f"is not a multiple of the rounding base {self.base}"

    def check(
        self,
        long: pl.DataFrame,
        path: str = "",
        table_of: Mapping[str, str] | None = None,
        place: str = "block",
    ) -> None:
        """Refuse a long table (geoid, cell, value; null: withheld) holding a value this rule
        cannot publish, naming the block (or the ``place`` a geoid is: a school), the cell and
        how many more there are: before any work, since the whole file then contradicts the
        declared rule (``table_of``: each cell id's table, which per-table rules need)."""
        v = long["value"].fill_null(MISSING).to_numpy().astype(np.int64)
        self.check_values(v, long["cell"], long["geoid"], path, table_of, place)

    def check_values(
        self,
        v: np.ndarray,
        cells: Sequence[str] | pl.Series | np.ndarray,
        geoids: Sequence[str] | pl.Series | np.ndarray,
        path: str = "",
        table_of: Mapping[str, str] | None = None,
        place: str = "block",
    ) -> None:
        """:meth:`check` on values given as arrays: ``v[i]`` (``MISSING`` where withheld) is
        cell ``cells[i]`` of geounit ``geoids[i]``."""
        tables = None
        if self.overrides:
            if table_of is None:
                raise TabreconError(f"publication {self}: per-table rules need each cell's table")
            tables = [table_of.get(c, "") for c in list(cells)]
        bad = self.violations(v, tables)
        if bad.any():
            i = int(np.argmax(bad))
            shown = "the value" if v[i] == MISSING else str(int(v[i]))
            rule = self if tables is None else dict(self.overrides).get(tables[i], self)
            raise InputError(
                f"{place} {geoids[i]}, cell {cells[i]}: {shown} "
                f"{rule.why(int(v[i]))} (publication {self}; {int(bad.sum()) - 1} more such "
                "cells)",
                path=path or None,
            )


EXACT = Publication()
