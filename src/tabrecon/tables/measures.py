"""Cells that publish a median or a mean, computed and modelled exactly.

A count cell publishes how many records of its universe match; a :class:`Statistic` cell
publishes a median or a mean of one numeric attribute over its universe, to ``decimals``
places (SF1 2010: P13 median age to one decimal, P17/H12/P37 average sizes to two). Inside
tabrecon such a value is an integer in the cell's published units, ``round(value * 10**d)``
(a median age of 30.5 is 305), so long tables keep one integer column; files hold the decimal
(:func:`parse_values`, :func:`format_values`).

Published values are modelled as linear rows over a block's type counts ``x``, exactly (no
big-M, no extra variable), for the count model every attack shares
(:func:`tabrecon.engine.model.block_program`'s ``extra`` rows):

* **mean** ``M / D`` (``D = 10**d``) of values ``v`` over ``N`` records: the true mean rounds
  to it, ``(2M - 1) N <= 2D sum(v) <= (2M + 1) N``, and ``N >= 1``;
* **lower median** (:attr:`MedianRule.LOWER`, an order statistic: the ``ceil(N/2)``-th
  smallest value): ``2 C(<= m) >= N`` and ``2 C(< m) <= N - 1``, ``C`` counting records;
* **grouped median** (:attr:`MedianRule.GROUPED`, the textbook median of a frequency
  distribution: linear interpolation within the bins ``[e_i, e_i+1)`` of declared ``bins``):
  each bin's records spread evenly over it, the median the point ``t`` where that
  distribution's cumulative count ``F`` first reaches ``N/2``:
  ``t = e* + w* (N/2 - C(< e*)) / f*`` (``e*``, ``w*``, ``f*``: the lower edge, width and count
  of the first bin that reaches it). ``t`` lies in the rounding interval ``[L, U]`` of the
  published value exactly when ``F(L) <= N/2``, ``C(< e(L)) < N/2`` (``e(L)`` the lower edge of
  ``L``'s bin) and ``F(U) >= N/2``; ``F`` at a fixed point is linear in ``x``, so these are three
  rows (``L`` and ``U`` are never whole, so never an edge);
* **interpolated median** (:attr:`MedianRule.INTERPOLATED`, the Census Bureau's for single
  years of age): the grouped median over bins of width one, each value ``a`` spread over
  ``[a, a+1)``;
* **midpoint median** (:attr:`MedianRule.MIDPOINT`: numpy's, pandas', R's and most agencies'):
  the mean of the lower median ``l`` (the ``ceil(N/2)``-th smallest value) and the upper median
  ``u`` (the ``floor(N/2)+1``-th). The published value bounds ``s = l + u`` to whole numbers
  ``s_lo..s_hi``. With ``g(a) = 2 C(<= a) - N`` (linear in ``x``), ``l <= a`` exactly when
  ``g(a) >= 0`` and ``u <= a`` exactly when ``g(a) >= 1``; then ``l + u >= s_lo`` says, for each
  ``c <= d = s_lo - 1 - c``, *not* (``g(c) >= 0`` and ``g(d) >= 1``), and ``l + u <= s_hi`` says,
  for each ``c <= d = s_hi - 1 - c``, ``g(c) >= 0`` or ``g(d) >= 1``. Each such disjunction of
  two integer conditions is one row exactly, given a bound ``K`` on ``N`` (``g(c) >= -N``,
  ``g(d) - g(c) <= 2N``): ``g(d) + (2K - 1) g(c) <= 0`` and ``K g(d) + g(c) >= 0``. No auxiliary
  variable is needed; the rows take the bound (the most records the universe can have in the
  block: :meth:`Statistic.rows`'s ``bound``) as a coefficient.

A value at an exact half of its last decimal is allowed to have been rounded either way: the
Bureau does not document how its medians were rounded at a tie, and a tie allowed on both
sides keeps a proof of uniqueness a proof.

An empty universe publishes ``empty`` (SF1: 0; ``None``: the cell is withheld, its value null),
which must be a value no nonempty universe can publish: then the value says whether the
universe is empty.

>>> stat = Statistic(Measure.MEDIAN, "age", 1)
>>> stat.publish(np.array([[0, 1, 0, 0]]), np.array([29, 30, 31, 32])).tolist()  # one person, 30
[305]
>>> stat.publish(np.array([[2, 1, 1, 0]]), np.array([29, 30, 31, 32])).tolist()  # 29 + 2/2
[300]
>>> Statistic(Measure.MEAN, "size", 2).publish(np.array([[1, 0, 2]]), np.array([1, 2, 3])).tolist()
[233]
>>> mid = Statistic(Measure.MEDIAN, "age", 1, MedianRule.MIDPOINT)
>>> mid.publish(np.array([[1, 0, 0, 1], [1, 1, 0, 1]]), np.array([29, 30, 31, 32])).tolist()
[305, 300]
>>> grouped = Statistic(Measure.MEDIAN, "age", 1, MedianRule.GROUPED, bins=(0, 18, 65, 116))
>>> grouped.publish(np.array([[1, 2, 0, 0]]), np.array([10, 30, 40, 70])).tolist()  # 18 + 47/4
[298]
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp

from ..errors import TabreconError
from ..vocab import Words

#: what a withheld statistic (an empty universe under ``empty=None``) is inside tabrecon
WITHHELD = -1


class Measure(Words):
    """What a cell publishes about the records of its universe."""

    COUNT = "count"
    MEAN = "mean"
    MEDIAN = "median"


class MedianRule(Words):
    """How a median is computed from whole-number values."""

    LOWER = "lower"  # the ceil(N/2)-th smallest value: an order statistic
    INTERPOLATED = "interpolated"  # each value a spread over [a, a+1), linear interpolation
    MIDPOINT = "midpoint"  # the mean of the two middle values of an even count
    GROUPED = "grouped"  # linear interpolation within declared bins [e_i, e_i+1)


@dataclass(frozen=True)
class Statistic:
    """A cell's measure when it is not a count: ``measure`` of the attribute ``of`` (its file
    codes are the numbers, unless ``values`` maps each code to its number), published to
    ``decimals`` places; ``median`` the median's convention; ``empty`` the value (in published
    units) an empty universe gets, ``None`` when it is withheld; ``bins`` the edges
    ``e_0 < e_1 < ... < e_k`` of a grouped median's bins ``[e_i, e_i+1)``, which hold every
    number of the attribute."""

    measure: Measure
    of: str
    decimals: int = 0
    median: MedianRule = MedianRule.INTERPOLATED
    empty: int | None = 0
    values: tuple[tuple[int, int], ...] | None = None
    bins: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.measure is Measure.COUNT:
            raise TabreconError("a count cell has no Statistic: leave it None")
        if not 0 <= self.decimals <= 6:
            raise TabreconError(f"decimals must be 0 to 6 (got {self.decimals})")
        grouped = self.measure is Measure.MEDIAN and self.median is MedianRule.GROUPED
        if grouped != (self.bins is not None):
            raise TabreconError(
                "a grouped median needs its bins (their edges), and only a grouped median has them"
            )
        if self.bins is not None and (
            len(self.bins) < 2 or any(b <= a for a, b in itertools.pairwise(self.bins))
        ):
            raise TabreconError(
                f"a grouped median's bins are two or more ascending edges (got {list(self.bins)})"
            )

    @property
    def interpolates(self) -> bool:
        """Whether the statistic is a median interpolated within bins (grouped, or the
        interpolated median's bins of width one)."""
        return self.measure is Measure.MEDIAN and self.median in (
            MedianRule.INTERPOLATED,
            MedianRule.GROUPED,
        )

    def edges(self, numbers: np.ndarray) -> np.ndarray:
        """The interpolating median's bin edges: declared (grouped) or one a whole number
        (interpolated: ``[a, a+1)`` from the lowest to the highest of ``numbers``)."""
        if self.bins is not None:
            return np.asarray(self.bins, dtype=np.int64)
        return np.arange(int(np.min(numbers)), int(np.max(numbers)) + 2, dtype=np.int64)

    @property
    def scale(self) -> int:
        """Published units per unit of the attribute: ``10 ** decimals``."""
        return 10**self.decimals

    def __str__(self) -> str:
        what = f"{self.median} median" if self.measure is Measure.MEDIAN else "mean"
        return f"{what} of {self.of} to {self.decimals} decimal{'' if self.decimals == 1 else 's'}"

    def numbers(self, codes: np.ndarray) -> np.ndarray:
        """Each file code's number (the code itself unless ``values`` says otherwise)."""
        codes = np.asarray(codes, dtype=np.int64)
        if self.values is None:
            return codes
        table = dict(self.values)
        return np.array([table[int(c)] for c in codes], dtype=np.int64)

    def range(self, numbers: np.ndarray) -> tuple[int, int]:
        """The published values (lowest, highest) a nonempty universe can have, in published
        units, given the attribute's possible ``numbers``."""
        lo, hi = int(np.min(numbers)), int(np.max(numbers))
        if self.interpolates:
            # t = e + w (N/2 - C<)/f lies in (e, e + w] for the bin's lower edge e and width w
            e = self.edges(numbers)
            return int(e[0]) * self.scale, int(e[-1]) * self.scale
        return lo * self.scale, hi * self.scale

    def check_empty(self, numbers: np.ndarray) -> None:
        """Refuse an ``empty`` value a nonempty universe could also publish (it would not say
        whether the universe is empty)."""
        if self.bins is not None:
            e = self.edges(numbers)
            outside = np.asarray(numbers)[(numbers < e[0]) | (numbers >= e[-1])]
            if outside.size:
                raise TabreconError(
                    f"{self}: {self.of} {int(outside[0])} lies in none of the bins "
                    f"[{int(e[0])}, {int(e[-1])})"
                )
        if self.empty is None:
            return
        lo, hi = self.range(numbers)
        reachable = lo <= self.empty <= hi
        if self.interpolates:
            # the smallest median of a nonempty universe is the first bin's middle (everyone in
            # it), a tie rounded either way
            e = self.edges(numbers)
            width = int(e[1] - e[0])
            reachable = 2 * self.empty >= 2 * lo + self.scale * width - 1 and self.empty <= hi
        if reachable:
            raise TabreconError(
                f"{self}: the value of an empty universe ({self.empty}) is one a nonempty "
                "universe can publish; declare an unreachable one or None (withheld)"
            )

    def publish(self, dist: np.ndarray, numbers: np.ndarray) -> np.ndarray:
        """The published value (published units) of each row of ``dist`` (rows x the values
        ``numbers``, ascending: how many records have each), rounded half up; an empty row gets
        ``empty`` (:data:`WITHHELD` when None)."""
        dist = np.asarray(dist, dtype=np.int64)
        numbers = np.asarray(numbers, dtype=np.int64)
        if (np.diff(numbers) <= 0).any():
            raise TabreconError("the attribute's numbers must be distinct and ascending")
        N = dist.sum(axis=1)
        D = self.scale
        out = np.full(N.size, WITHHELD if self.empty is None else self.empty, dtype=np.int64)
        some = N > 0
        if not some.any():
            return out
        d, n = dist[some], N[some]
        if self.measure is Measure.MEAN:
            S = d @ numbers
            out[some] = (2 * D * S + n) // (2 * n)  # floor(D S / N + 1/2)
            return out
        cum = np.cumsum(d, axis=1)
        k = np.argmax(2 * cum >= n[:, None], axis=1)  # the first value with C(<= a) >= N/2
        if self.median is MedianRule.LOWER:
            out[some] = numbers[k] * D
        elif self.median is MedianRule.MIDPOINT:
            upper = numbers[np.argmax(2 * cum >= n[:, None] + 1, axis=1)]
            out[some] = (D * (numbers[k] + upper) + 1) // 2  # floor(D (l + u) / 2 + 1/2)
        else:
            out[some] = self._interpolated(d, numbers, n)
        return out

    def _interpolated(self, d: np.ndarray, numbers: np.ndarray, n: np.ndarray) -> np.ndarray:
        """The interpolating median of the nonempty rows ``d`` (``n`` records each), published."""
        e = self.edges(numbers)
        binned = np.zeros((d.shape[0], e.size - 1), dtype=np.int64)
        np.add.at(binned.T, np.searchsorted(e, numbers, side="right") - 1, d.T)
        cum = np.cumsum(binned, axis=1)
        k = np.argmax(2 * cum >= n[:, None], axis=1)  # the first bin reaching N/2
        rows = np.arange(k.size)
        f = binned[rows, k]
        below = cum[rows, k] - f
        low, width, D = e[k], e[k + 1] - e[k], self.scale
        # D t = D e + D w (N - 2 C<) / (2 f), rounded half up: floor of
        # (2 D e f + D w (N - 2 C<) + f) over 2 f, in integers
        return (2 * D * low * f + D * width * (n - 2 * below) + f) // (2 * f)

    def rows(
        self,
        value: int,
        universe: np.ndarray,
        numbers: np.ndarray,
        n_cols: int,
        bound: int | None = None,
        count: int | None = None,
    ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """The rows ``lo <= R x <= hi`` that publishing ``value`` means, over ``n_cols`` type
        counts ``x``: ``universe`` holds the columns of the cell's universe, ``numbers`` each
        one's number. Infinite bounds are ``-inf``/``inf`` (floats); an empty universe (the
        ``empty`` value, or :data:`WITHHELD` under ``empty=None``) is one row ``N = 0``. A
        midpoint median's rows need ``bound``, the most records the universe can have; where
        the program fixes the universe's ``count`` (its count cell published exactly), they are
        tighter (:func:`_midpoint_rows_of_count`)."""
        universe = np.asarray(universe, dtype=np.int64)
        numbers = np.asarray(numbers, dtype=np.int64)
        ones = np.ones(universe.size, dtype=np.int64)
        empty = WITHHELD if self.empty is None else self.empty
        if value == empty:
            coeffs, lo, hi = [ones], [0.0], [0.0]
        else:
            D, M = self.scale, int(value)
            if self.measure is Measure.MEAN:
                coeffs = [2 * D * numbers - (2 * M - 1), 2 * D * numbers - (2 * M + 1)]
                lo, hi = [0.0, -np.inf], [np.inf, 0.0]
            elif self.median is MedianRule.LOWER:
                coeffs, lo, hi = _lower_rows(M, D, numbers)
            elif self.median is MedianRule.MIDPOINT:
                if bound is None:
                    raise TabreconError(f"{self}: its rows need the most records it counts")
                known = None if count is None else _midpoint_rows_of_count(M, D, numbers, count)
                coeffs, lo, hi = known or _midpoint_rows(M, D, numbers, max(int(bound), 1))
            else:
                coeffs, lo, hi = _interpolated_rows(M, D, numbers, self.bins)
            coeffs, lo, hi = [ones, *coeffs], [1.0, *lo], [np.inf, *hi]  # N >= 1
        data = np.concatenate([np.asarray(c, dtype=np.int64) for c in coeffs])
        keep = data != 0
        # CSR directly, each row's entries in the universe's order (through COO, scipy's
        # checks and conversion were most of a median's time in a block program)
        indptr = np.zeros(len(coeffs) + 1, dtype=np.int64)
        np.cumsum(keep.reshape(len(coeffs), universe.size).sum(axis=1), out=indptr[1:])
        indices = np.tile(universe, len(coeffs))[keep]
        R = sp.csr_matrix((data[keep], indices, indptr), shape=(len(coeffs), n_cols))
        return R, np.array(lo, dtype=float), np.array(hi, dtype=float)


Rows = tuple[list[np.ndarray], list[float], list[float]]


def _lower_rows(M: int, D: int, numbers: np.ndarray) -> Rows:
    """A lower median's rows (besides ``N >= 1``): ``2 C(<= m) >= N`` and ``2 C(< m) < N``."""
    if M % D:  # an order statistic of whole numbers is whole: infeasible, N = 0 and N >= 1
        return [np.zeros_like(numbers) + 1], [0.0], [0.0]
    m = M // D
    return [2 * (numbers <= m) - 1, 2 * (numbers < m) - 1], [0.0, -np.inf], [np.inf, -1.0]


def _interpolated_rows(M: int, D: int, numbers: np.ndarray, bins: tuple[int, ...] | None) -> Rows:
    """An interpolating median's rows: ``F(L) <= N/2``, ``C(< e(L)) < N/2`` and
    ``F(U) >= N/2`` for the rounding interval's ends ``L, U = (2M -+ 1) / 2D``, with
    ``2 D w F(p) = 2 D w C(< e) + (2 D p - 2 D e) f`` in the bin ``[e, e + w)`` holding ``p``:
    a declared bin (grouped), or ``[floor p, floor p + 1)`` (interpolated, and outside every
    declared bin, where no value lies: ``F`` is then 0 below and ``N`` above)."""

    def bin_of(p2d: int) -> tuple[int, int]:  # the lower edge and width of p's bin, 2 D p = p2d
        a = p2d // (2 * D)
        if bins is None or a < bins[0] or a >= bins[-1]:
            return a, 1
        i = bisect.bisect_right(bins, a) - 1
        return bins[i], bins[i + 1] - bins[i]

    def twice_F_minus_N(p2d: int) -> np.ndarray:  # 2 D w F(p) - D w N
        e, w = bin_of(p2d)
        inside = (numbers == e) if w == 1 else (numbers >= e) & (numbers < e + w)
        return 2 * D * w * (numbers < e) + (p2d - 2 * D * e) * inside - D * w

    low, high = 2 * M - 1, 2 * M + 1
    below = 2 * (numbers < bin_of(low)[0]) - 1  # 2 C(< e(L)) - N <= -1
    coeffs = [twice_F_minus_N(low), below, twice_F_minus_N(high)]
    return coeffs, [-np.inf, -np.inf, 0.0], [0.0, -1.0, np.inf]


def _midpoint_rows_of_count(M: int, D: int, numbers: np.ndarray, n: int) -> Rows | None:
    """A midpoint median's rows where the universe holds exactly ``n`` records (the program's
    count row says so) and the value allows one sum ``s = l + u``; None otherwise. An odd
    ``n`` has one middle value, ``s/2``: a lower median's two rows. An even ``n = 2h``: ``l``
    at most and ``u`` at least ``s/2`` (two rows), and for each ``c < s/2`` with
    ``d = s - 1 - c``, ``P = C(<= c)`` and ``R = C(<= d)``, the convex hulls of the two
    either-or conditions of :func:`_midpoint_rows`: ``R + h P <= h (h + 1)`` and
    ``h R + P >= h (h + 1)`` (the rows there, with ``N`` fixed, are weaker)."""
    s_lo, s_hi = -((1 - 2 * M) // D), (2 * M + 1) // D
    if s_lo != s_hi or n < 1:
        return None
    s = s_lo

    def at_most(a: int) -> np.ndarray:  # C(<= a), N fixed at n: rows are constants
        return (numbers <= a).astype(np.int64)

    if n % 2:
        if s % 2:  # one middle value: s is twice it
            return [np.zeros_like(numbers)], [1.0], [1.0]
        m = s // 2
        return [at_most(m), at_most(m - 1)], [(n + 1) / 2, -np.inf], [np.inf, (n - 1) / 2]
    h = n // 2
    coeffs = [at_most(s // 2), at_most(-(-s // 2) - 1)]  # l <= s/2 <= u
    lo: list[float] = [h, -np.inf]
    hi: list[float] = [np.inf, h]
    for c in numbers[2 * numbers <= s - 1].tolist():  # the smallest c of each run
        coeffs.append(at_most(s - 1 - c) + h * at_most(c))
        lo.append(-np.inf)
        hi.append(h * (h + 1))
    top = (s - 1) // 2
    for c in sorted({int(v) - 1 for v in numbers if int(v) - 1 <= top} | {top}):  # the largest
        coeffs.append(h * at_most(s - 1 - c) + at_most(c))
        lo.append(h * (h + 1))
        hi.append(np.inf)
    return coeffs, lo, hi


def _midpoint_rows(M: int, D: int, numbers: np.ndarray, bound: int) -> Rows:
    """A midpoint median's rows: ``s_lo <= l + u <= s_hi`` as one row for each candidate
    ``c`` of either side (see the module's docstring), ``bound`` at least ``N``."""
    s_lo, s_hi = -((1 - 2 * M) // D), (2 * M + 1) // D  # ceil((2M - 1)/D), floor((2M + 1)/D)
    if s_lo > s_hi:  # no sum of two whole numbers halves to the value: infeasible
        return [np.zeros_like(numbers)], [1.0], [1.0]

    def g(a: int) -> np.ndarray:  # 2 C(<= a) - N
        return 2 * (numbers <= a) - 1

    coeffs: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []
    # l + u >= s_lo: not (l <= c and u <= d) for c <= d = s_lo - 1 - c; within a run of whole
    # numbers between two of the attribute's, the smallest c is the strongest
    for c in numbers[2 * numbers <= s_lo - 1].tolist():
        coeffs.append(g(s_lo - 1 - c) + (2 * bound - 1) * g(c))
        lo.append(-np.inf)
        hi.append(0.0)
    # l + u <= s_hi: l <= c or u <= d for c <= d = s_hi - 1 - c; the largest c of a run
    top = (s_hi - 1) // 2
    candidates = {int(n) - 1 for n in numbers if int(n) - 1 <= top} | {top}
    for c in sorted(candidates):
        coeffs.append(bound * g(s_hi - 1 - c) + g(c))
        lo.append(0.0)
        hi.append(np.inf)
    return coeffs, lo, hi


def parse_values(values: pl.Series, decimals: int) -> pl.Series:
    """Published decimals (text: ``30.5``) as integers in published units (``305``), null
    where the text is no such number (a bad value, named by the caller) or has more decimals.

    >>> parse_values(pl.Series(["30.5", "7", "2.25", "x", "-1"]), 1).to_list()
    [305, 70, None, None, None]
    """
    text = values.cast(pl.String).str.strip_chars()
    ok = (
        text.str.contains(rf"^\d+(\.\d{{0,{decimals}}})?$")
        if decimals
        else text.str.contains(r"^\d+$")
    )
    whole = text.str.extract(r"^(\d+)", 1).cast(pl.Int64, strict=False)
    frac = text.str.extract(r"\.(\d*)$", 1).fill_null("").str.pad_end(decimals, "0")
    frac_v = frac.str.slice(0, decimals).cast(pl.Int64, strict=False).fill_null(0)
    scaled = whole * (10**decimals) + frac_v
    return pl.select(pl.when(ok).then(scaled).otherwise(None)).to_series().alias(values.name)


def format_values(values: Sequence[int] | np.ndarray, decimals: int) -> list[str | None]:
    """Integers in published units as the decimals a file holds (:data:`WITHHELD`: empty).

    >>> format_values([305, 0, -1], 1)
    ['30.5', '0.0', None]
    """
    out: list[str | None] = []
    D = 10**decimals
    for v in np.asarray(values, dtype=np.int64).tolist():
        if v == WITHHELD:
            out.append(None)
        elif decimals:
            out.append(f"{v // D}.{v % D:0{decimals}d}")
        else:
            out.append(str(v))
    return out
