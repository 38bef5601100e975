"""The matrix mechanism's pieces as values: a *workload* (the published tables as a matrix over
the person histogram), a *strategy* (the queries actually measured, in groups that each get a
share of the budget), their sensitivities, and the noise a budget buys for each group.

Abowd & Schmutte (online appendix, eq. E-27) write the matrix mechanism as
``M(x, Q) = Q x + Q (Delta_A) A^+ e``: the strategy ``A`` is measured with noise scaled to its
sensitivity and the workload ``Q`` is answered from the least-squares estimate. Here a strategy
is a tuple of :class:`QueryGroup` s, each with its own share of the budget (TopDown's per-query
shares are exactly that); a group is calibrated to its own sensitivity and the privacy costs
compose (zCDP: rho_g = rho x share; pure DP: epsilon_g = epsilon x share).

Sensitivities (:class:`Sensitivity`):

* **unbounded** neighbours (add or remove one person): the largest column norm of the group's
  matrix (l1 for Laplace / pure DP, l2 for Gaussian / zCDP) -- exact;
* **bounded** neighbours (change one person; the Bureau's convention): the largest norm of a
  difference of two columns. For a non-negative matrix it is at most 2 (l1) or sqrt 2 (l2) times
  the unbounded value, and equal to that bound when two columns of largest norm have disjoint
  supports (checked); otherwise the bound is charged and flagged ``exact=False`` -- e.g. TopDown's
  ``total`` query, which a changed person cannot move but which the Bureau charges sqrt 2 all the
  same.

>>> w = Workload.from_tables("P1,P12", level="block")
>>> len(w), w.matrix.shape[1]
(50, 27972)
>>> s = Strategy.parse("topdown")
>>> [g.name for g in s.groups]
['total', 'sex_agebin', 'hispanic_sex', 'hispanic_race', 'detailed']
>>> s.groups[-1].sensitivity(2, "bounded")
Sensitivity(value=1.4142135623730951, exact=True)
>>> s.cost(Budget.zcdp(1.0)).rho
1.0
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..schema import AGEBIN_OF_AGE, N_TYPES, TYPE_AGE, TYPE_HISP, TYPE_RACE, TYPE_SEX
from ..tables.persons import TABLES_BY_NAME, all_cells, cell_index, resolve_tables, weight_matrix
from ..vocab import Geo
from .mechanisms import (
    Mechanism,
    PrivacyCost,
    discrete_gaussian,
    discrete_laplace,
    epsilon_to_rho,
)
from .topdown import DEFAULT_QUERY_SHARES, QUERIES, dhc2023_like

NEIGHBOURS = ("bounded", "unbounded")
NOISES = ("gaussian", "laplace")

#: Attributes of the person histogram a marginal can be taken over (agebin38, as TopDown's
#: sex x agebin query: single years would make the age x race marginal 6,993 rows).
MARGINAL_ATTRIBUTES: dict[str, np.ndarray] = {
    "sex": TYPE_SEX.astype(np.int64),
    "agebin": AGEBIN_OF_AGE[TYPE_AGE].astype(np.int64),
    "race": TYPE_RACE.astype(np.int64) - 1,
    "hispanic": TYPE_HISP.astype(np.int64),
}


def partition_matrix(group_of_type: np.ndarray) -> sp.csr_matrix:
    """The 0/1 matrix (groups x types) of a partition of the histogram given each type's group."""
    groups, inv = np.unique(group_of_type, return_inverse=True)
    n = group_of_type.size
    return sp.csr_matrix((np.ones(n), (inv, np.arange(n))), shape=(groups.size, n))


@dataclass(frozen=True)
class Workload:
    """The queries to be answered: one row per published cell over the histogram's types.

    ``tables`` names the table of each row (for errors per table)."""

    name: str
    matrix: sp.csr_matrix
    cells: np.ndarray
    tables: np.ndarray
    level: str | None = None

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @classmethod
    def from_tables(cls, tables: str | list[str] | None = "all", level: str | None = "block"):
        """The cells of ``tables`` published for one geounit of ``level`` (``block``: the tables
        published per block; ``tract``: those published per tract; None: every selected table on
        one geounit, as SF1 publishes the block tables for tracts too). Rows reuse the tables'
        weight matrix (race-tally cells weigh a person once per race)."""
        names = resolve_tables(tables)
        if level is not None and level not in (Geo.BLOCK, Geo.TRACT):
            raise InputError(f"unknown workload level {level!r}; choose block, tract or none")
        keep = [n for n in names if level is None or TABLES_BY_NAME[n].level == level]
        if not keep:
            raise InputError(
                f"none of the tables {', '.join(names)} is published per {level}; "
                "choose other tables or another level"
            )
        idx = cell_index()
        cols = [idx[c.id] for n in keep for c in TABLES_BY_NAME[n].cells()]
        cells = all_cells()
        W = weight_matrix()[:, cols].T.tocsr().astype(np.float64)
        label = ",".join(keep) if len(keep) <= 4 else f"{len(keep)} tables"
        return cls(
            f"{label} per {level or 'geounit'}",
            W,
            np.array([cells[j].id for j in cols]),
            np.array([cells[j].table for j in cols]),
            level,
        )


@dataclass(frozen=True)
class Sensitivity:
    """A group's sensitivity and whether it is attained (``exact``) or an upper bound."""

    value: float
    exact: bool


@dataclass(frozen=True)
class QueryGroup:
    """A set of queries measured together with one noise scale and a ``share`` of the budget."""

    name: str
    matrix: sp.csr_matrix
    share: float

    @property
    def is_identity(self) -> bool:
        """Whether the group answers every type on its own (a permutation of the identity)."""
        m = self.matrix
        if m.shape[0] != m.shape[1]:
            return False
        c = m.tocsc()
        return bool(
            (np.diff(c.indptr) == 1).all()
            and (np.diff(m.indptr) == 1).all()
            and np.allclose(m.data, 1.0)
        )

    def sensitivity(self, norm: int, neighbours: str = "bounded") -> Sensitivity:
        """l1 (``norm=1``) or l2 (``norm=2``) sensitivity under ``neighbours``."""
        if norm not in (1, 2) or neighbours not in NEIGHBOURS:
            raise InputError(f"norm must be 1 or 2 and neighbours one of {NEIGHBOURS}")
        c = self.matrix.tocsc()
        if (c.data < 0).any():
            raise InputError(f"strategy group {self.name!r} has negative weights")
        col = (
            np.asarray(abs(c).sum(axis=0)).ravel()
            if norm == 1
            else np.sqrt(np.asarray(c.multiply(c).sum(axis=0)).ravel())
        )
        top = float(col.max()) if col.size else 0.0
        if neighbours == "unbounded":
            return Sensitivity(top, True)
        bound = top * (2.0 if norm == 1 else math.sqrt(2.0))
        # attained when some two columns of largest norm share no row
        j = int(np.argmax(col))
        overlap = np.asarray((c.T @ c[:, j]).todense()).ravel()
        tops = np.flatnonzero(np.isclose(col, top))
        return Sensitivity(bound, bool((overlap[tops] == 0).any()))


@dataclass(frozen=True)
class Budget:
    """A privacy-loss budget: zCDP ``rho`` (discrete Gaussian noise) or pure-DP ``epsilon``
    (discrete Laplace). ``label`` says how it was given (``eps=1 (delta 1e-10)`` for a zCDP budget
    given as an epsilon)."""

    noise: str
    value: float
    label: str

    @classmethod
    def zcdp(cls, rho: float) -> Budget:
        _positive("rho", rho)
        return cls("gaussian", float(rho), f"rho={rho:g}")

    @classmethod
    def zcdp_from_epsilon(cls, epsilon: float, delta: float = 1e-10) -> Budget:
        """The zCDP budget whose CKS conversion is (``epsilon``, ``delta``)-DP."""
        _positive("epsilon", epsilon)
        return cls("gaussian", epsilon_to_rho(epsilon, delta), f"eps={epsilon:g}")

    @classmethod
    def pure(cls, epsilon: float) -> Budget:
        _positive("epsilon", epsilon)
        return cls("laplace", float(epsilon), f"eps={epsilon:g}")

    @property
    def cost(self) -> PrivacyCost:
        return (
            PrivacyCost.zcdp(self.value)
            if self.noise == "gaussian"
            else PrivacyCost.pure(self.value)
        )


def _positive(name: str, v: float) -> None:
    if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
        raise InputError(f"{name} must be a finite number > 0 (got {v})")


@dataclass(frozen=True)
class Strategy:
    """Groups of queries measured with independent noise, each with its share of the budget."""

    name: str
    groups: tuple[QueryGroup, ...]
    level_share: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.level_share <= 1:
            raise InputError(
                f"strategy {self.name!r}: the level's share of the budget must be in (0, 1] "
                f"(got {self.level_share})"
            )
        if not self.groups:
            raise InputError(f"strategy {self.name!r} has no queries")
        total = sum(g.share for g in self.groups)
        if any(g.share <= 0 for g in self.groups) or abs(total - 1) > 1e-6:
            raise InputError(
                f"strategy {self.name!r}: shares must be > 0 and sum to 1 (got "
                + ", ".join(f"{g.name}={g.share:g}" for g in self.groups)
                + ")"
            )

    @property
    def rows(self) -> int:
        return sum(int(g.matrix.shape[0]) for g in self.groups)

    def matrix(self) -> sp.csr_matrix:
        """The stacked strategy matrix A (unweighted)."""
        return sp.vstack([g.matrix for g in self.groups], format="csr")

    def delta(self, norm: int, neighbours: str = "unbounded") -> Sensitivity:
        """Delta_A of the stacked matrix (Abowd & Schmutte: the largest column l1 norm)."""
        return QueryGroup(self.name, self.matrix(), 1.0).sensitivity(norm, neighbours)

    def mechanisms(self, budget: Budget, neighbours: str = "bounded") -> list[Mechanism]:
        """Each group's noise: its share of the budget at its own sensitivity."""
        out = []
        for g in self.groups:
            b = budget.value * self.level_share * g.share
            if budget.noise == "gaussian":
                out.append(discrete_gaussian(b, g.sensitivity(2, neighbours).value))
            else:
                out.append(discrete_laplace(b, g.sensitivity(1, neighbours).value))
        return out

    def cost(self, budget: Budget, neighbours: str = "bounded") -> PrivacyCost:
        """The composed cost of all groups: the level's share of the budget."""
        costs = [m.cost for m in self.mechanisms(budget, neighbours)]
        return sum(costs[1:], costs[0])

    @classmethod
    def parse(cls, spec: str, workload: Workload | None = None) -> Strategy:
        """A strategy from its name:

        ``identity``            every type's count (the detailed histogram)
        ``workload``            the workload's own cells (needs ``workload``)
        ``marginals[:k]``       total, all marginals of up to k (default 2) of sex, agebin38,
                                race, hispanic, and the detailed histogram; equal shares
        ``topdown[:q=s,...]``   TopDown's per-geounit queries with their shares (default:
                                tabrecon's TopDown shares); any subset, shares summing to 1

        Any of them may end in ``@<share>`` (the fraction of the total budget this geounit
        level's measurements get) or ``@dhc2023-like`` (the 2023 DHC persons share of the
        workload's level: block 0.0110 / 4.9622), so that budgets read as the whole release's.
        """
        spec = spec.strip()
        base, at, where = spec.partition("@")
        if at:
            s = cls.parse(base, workload)
            return replace(s, name=spec, level_share=level_share(where, workload))
        head, _, arg = spec.partition(":")
        if head == "identity" and not arg:
            return cls(
                "identity", (QueryGroup("detailed", sp.identity(N_TYPES, format="csr"), 1.0),)
            )
        if head == "workload" and not arg:
            if workload is None:
                raise InputError("the 'workload' strategy needs a workload")
            return cls("workload", (QueryGroup("workload", workload.matrix, 1.0),))
        if head == "marginals":
            try:
                k = int(arg) if arg else 2
            except ValueError:
                raise InputError(f"marginals:<k> needs an integer k (got {arg!r})") from None
            if not 1 <= k <= 3:
                raise InputError(f"marginals:<k> takes k = 1, 2 or 3 (got {k})")
            return marginals(k)
        if head == "topdown":
            shares = dict(DEFAULT_QUERY_SHARES)
            if arg:
                shares = {}
                for part in arg.split(","):
                    q, eq, v = part.partition("=")
                    q = q.strip()
                    if not eq or q not in QUERIES:
                        raise InputError(
                            f"topdown query share {part!r}: write query=share with query one of "
                            f"{', '.join(QUERIES)}"
                        )
                    try:
                        shares[q] = float(v)
                    except ValueError:
                        raise InputError(f"topdown share {part!r} is not a number") from None
            groups = tuple(
                QueryGroup(q, partition_matrix(QUERIES[q]), s) for q, s in shares.items()
            )
            return cls(spec, groups)
        raise InputError(
            f"unknown strategy {spec!r}; choose identity, workload, marginals[:k] or "
            "topdown[:query=share,...]"
        )


def level_share(spec: str, workload: Workload | None) -> float:
    """``dhc2023-like`` (the 2023 DHC persons share of the workload's level) or a number."""
    spec = spec.strip()
    if spec == "dhc2023-like":
        if workload is None or workload.level is None:
            raise InputError(
                "@dhc2023-like needs a workload of one level (block or tract) to take its share"
            )
        return dhc2023_like(1.0).level_shares[workload.level]
    try:
        v = float(spec)
    except ValueError:
        raise InputError(
            f"level share {spec!r}: write @<fraction in (0, 1]> or @dhc2023-like"
        ) from None
    if not (math.isfinite(v) and 0 < v <= 1):
        raise InputError(f"level share must be in (0, 1] (got {spec})")
    return v


def marginals(k: int = 2) -> Strategy:
    """Total, every marginal of up to ``k`` of the attributes in :data:`MARGINAL_ATTRIBUTES`, and
    the detailed histogram, with equal shares."""
    names = list(MARGINAL_ATTRIBUTES)
    sizes = {a: int(v.max()) + 1 for a, v in MARGINAL_ATTRIBUTES.items()}
    parts: list[tuple[str, np.ndarray]] = [("total", np.zeros(N_TYPES, dtype=np.int64))]
    for r in range(1, k + 1):
        for combo in itertools.combinations(names, r):
            key = np.zeros(N_TYPES, dtype=np.int64)
            for a in combo:
                key = key * sizes[a] + MARGINAL_ATTRIBUTES[a]
            parts.append(("x".join(combo), key))
    parts.append(("detailed", np.arange(N_TYPES, dtype=np.int64)))
    share = 1.0 / len(parts)
    return Strategy(
        f"marginals:{k}", tuple(QueryGroup(n, partition_matrix(g), share) for n, g in parts)
    )
