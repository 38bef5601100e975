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
* **interpolated median** (:attr:`MedianRule.INTERPOLATED`, the Census Bureau's for single
  years of age): each value ``a`` spread evenly over ``[a, a+1)``, the median the point ``t``
  where that distribution's cumulative count ``F`` first reaches ``N/2``:
  ``t = a* + (N/2 - C(< a*)) / f(a*)``. ``t`` lies in the rounding interval ``[L, U]`` of the
  published value exactly when ``F(L) <= N/2``, ``C(< floor L) < N/2`` and ``F(U) >= N/2``;
  ``F`` at a fixed point is linear in ``x``, so these are three rows.

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
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Statistic:
    """A cell's measure when it is not a count: ``measure`` of the attribute ``of`` (its file
    codes are the numbers, unless ``values`` maps each code to its number), published to
    ``decimals`` places; ``median`` the median's convention; ``empty`` the value (in published
    units) an empty universe gets, ``None`` when it is withheld."""

    measure: Measure
    of: str
    decimals: int = 0
    median: MedianRule = MedianRule.INTERPOLATED
    empty: int | None = 0
    values: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        if self.measure is Measure.COUNT:
            raise TabreconError("a count cell has no Statistic: leave it None")
        if not 0 <= self.decimals <= 6:
            raise TabreconError(f"decimals must be 0 to 6 (got {self.decimals})")

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
        if self.measure is Measure.MEDIAN and self.median is MedianRule.INTERPOLATED:
            # t = a + (N/2 - C<)/f lies in (a, a + 1]: above the lowest value by at least 1/2N
            return lo * self.scale, (hi + 1) * self.scale
        return lo * self.scale, hi * self.scale

    def check_empty(self, numbers: np.ndarray) -> None:
        """Refuse an ``empty`` value a nonempty universe could also publish (it would not say
        whether the universe is empty)."""
        if self.empty is None:
            return
        lo, hi = self.range(numbers)
        reachable = lo <= self.empty <= hi
        if self.measure is Measure.MEDIAN and self.median is MedianRule.INTERPOLATED:
            # the smallest median of a nonempty universe is lowest + 1/2 (everyone at the lowest)
            reachable = 2 * self.empty >= 2 * lo + self.scale - 1 and self.empty <= hi
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
        if self.median is MedianRule.LOWER:
            k = np.argmax(2 * cum >= n[:, None], axis=1)
            out[some] = numbers[k] * D
            return out
        k = np.argmax(2 * cum >= n[:, None], axis=1)  # a*: the first value with C(<=a) >= N/2
        rows = np.arange(k.size)
        f = d[rows, k]
        below = cum[rows, k] - f
        a = numbers[k]
        # D t = D a + D (N - 2 C<) / (2 f), rounded half up: floor of (2 D a f + D (N - 2C<) + f)
        # over 2 f, in integers
        out[some] = (2 * D * a * f + D * (n - 2 * below) + f) // (2 * f)
        return out

    def rows(
        self, value: int, universe: np.ndarray, numbers: np.ndarray, n_cols: int
    ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """The rows ``lo <= R x <= hi`` that publishing ``value`` means, over ``n_cols`` type
        counts ``x``: ``universe`` holds the columns of the cell's universe, ``numbers`` each
        one's number. Infinite bounds are ``-inf``/``inf`` (floats); an empty universe (the
        ``empty`` value, or :data:`WITHHELD` under ``empty=None``) is one row ``N = 0``."""
        universe = np.asarray(universe, dtype=np.int64)
        numbers = np.asarray(numbers, dtype=np.int64)
        inf = np.inf
        coeffs: list[np.ndarray] = []
        lo: list[float] = []
        hi: list[float] = []
        ones = np.ones(universe.size, dtype=np.int64)

        def row(c: np.ndarray, low: float, high: float) -> None:
            coeffs.append(np.asarray(c, dtype=np.int64))
            lo.append(low)
            hi.append(high)

        empty = WITHHELD if self.empty is None else self.empty
        if value == empty:
            row(ones, 0, 0)
        else:
            D, M = self.scale, int(value)
            row(ones, 1, inf)  # N >= 1
            if self.measure is Measure.MEAN:
                row(2 * D * numbers - (2 * M - 1), 0, inf)
                row(2 * D * numbers - (2 * M + 1), -inf, 0)
            elif self.median is MedianRule.LOWER:
                if M % D:  # an order statistic of whole numbers is whole
                    row(ones, 0, 0)
                    row(ones, 1, inf)  # infeasible: N = 0 and N >= 1
                else:
                    m = M // D
                    row(2 * (numbers <= m) - 1, 0, inf)  # 2 C(<= m) - N >= 0
                    row(2 * (numbers < m) - 1, -inf, -1)  # 2 C(< m) - N <= -1
            else:
                # L = (2M - 1) / 2D: F(L) = C(< aL) + phi f(aL), 2 D phi = 2M - 1 - 2 D aL
                a_lo = (2 * M - 1) // (2 * D)
                k_lo = 2 * M - 1 - 2 * D * a_lo
                row(2 * D * (numbers < a_lo) + k_lo * (numbers == a_lo) - D, -inf, 0)
                row(2 * (numbers < a_lo) - 1, -inf, -1)  # C(< aL) < N/2
                a_hi = (2 * M + 1) // (2 * D)
                k_hi = 2 * M + 1 - 2 * D * a_hi
                row(2 * D * (numbers < a_hi) + k_hi * (numbers == a_hi) - D, 0, inf)
        data = np.concatenate(coeffs)
        r = np.repeat(np.arange(len(coeffs)), universe.size)
        c = np.tile(universe, len(coeffs))
        keep = data != 0
        R = sp.csr_matrix((data[keep], (r[keep], c[keep])), shape=(len(coeffs), n_cols))
        return R, np.array(lo, dtype=float), np.array(hi, dtype=float)


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
