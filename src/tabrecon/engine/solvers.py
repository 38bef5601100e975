"""One small interface over the open integer solvers (OR-Tools CP-SAT, HiGHS).

An :class:`IntProgram` is built from arrays: a sparse constraint matrix with row bounds and integer
variables with bounds; an optional linear objective. :func:`solve` hands it to a backend and returns
a :class:`Solution` whose status distinguishes a proof (``optimal``/``infeasible``) from a time-out.
A program solved many times over, and what holds in all its solutions, is
:mod:`tabrecon.engine.proofs`.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import TabreconError
from ..interrupts import stoppable
from ..vocab import Solver, SolveStatus

BACKENDS = Solver.choices()

#: What ``auto`` picks for each task, from ``python -m benchmarks.bench_reconstruct`` and
#: ``bench_certify`` (2 cores, 2026-11-23): HiGHS reconstructs the real sample's block+tract tables
#: in 3.4 core-s against CP-SAT's 9.9 (its spread of single ages is an LP-like transportation
#: problem, CP-SAT's presolve is the cost there) and block tables in 6.2 against 7.7; the
#: certification searches (many small extensions of one base model, cloned in C++ by CP-SAT) are
#: as fast or faster with CP-SAT (synthetic county, block+tract: 7.5 against 8.7 s).
AUTO_BACKEND = {"reconstruct": "highs", "certify": "cpsat", "claims": "cpsat"}


@dataclass
class IntProgram:
    """min/max c.x  s.t.  lo <= A x <= hi,  lb <= x <= ub,  x integer."""

    A: sp.csr_matrix
    lo: np.ndarray
    hi: np.ndarray
    ub: np.ndarray
    lb: np.ndarray | None = None
    c: np.ndarray | None = None
    maximize: bool = False

    @property
    def n_vars(self) -> int:
        return int(self.A.shape[1])

    @property
    def n_rows(self) -> int:
        return int(self.A.shape[0])

    def satisfied_by(self, x: np.ndarray) -> bool:
        """Whether the integer point ``x`` (its first :attr:`n_vars` entries) is a solution.

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([2]),
        ...                hi=np.array([2]), ub=np.array([2, 2]))
        >>> p.satisfied_by(np.array([1, 1])), p.satisfied_by(np.array([2, 1]))
        (True, False)
        """
        x = np.asarray(x)[: self.n_vars]
        lb = 0 if self.lb is None else self.lb
        ax = self.A @ x
        return not (
            (x < lb).any() or (x > self.ub).any() or (ax < self.lo).any() or (ax > self.hi).any()
        )

    def extended(
        self,
        n_new: int,
        new_ub: np.ndarray,
        rows: sp.csr_matrix,
        lo: np.ndarray,
        hi: np.ndarray,
        c: np.ndarray | None = None,
        maximize: bool = False,
    ) -> IntProgram:
        """The program with ``n_new`` more variables (bounds 0..``new_ub``) and more rows
        (``lo <= rows @ [x, new] <= hi``), under objective ``c`` (what
        :meth:`tabrecon.engine.proofs.Extensible.solve` poses).

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([2]),
        ...                hi=np.array([2]), ub=np.array([2, 2]))
        >>> e = p.extended(1, np.array([5]), sp.csr_matrix(np.array([[1, 0, -1]])),
        ...                np.array([0]), np.array([0]))
        >>> e.A.toarray().tolist(), e.ub.tolist()
        ([[1, 1, 0], [1, 0, -1]], [2, 2, 5])
        """
        A = sp.vstack(
            [sp.hstack([self.A, sp.csr_matrix((self.n_rows, n_new), dtype=np.int64)]), rows]
        ).tocsr()
        return IntProgram(
            A=A,
            lo=np.concatenate([self.lo, lo]),
            hi=np.concatenate([self.hi, hi]),
            ub=np.concatenate([self.ub, new_ub]),
            lb=None
            if self.lb is None
            else np.concatenate([self.lb, np.zeros(n_new, dtype=self.lb.dtype)]),
            c=c,
            maximize=maximize,
        )

    def rows(self, keep: np.ndarray) -> IntProgram:
        """The program with only the rows ``keep`` (a mask or indices)."""
        return replace(self, A=self.A[keep], lo=self.lo[keep], hi=self.hi[keep])


@dataclass
class SolverOptions:
    """Which solver, with how many threads, for how long, from which seed.

    ``backend="auto"`` (the default) lets each task take the solver measured fastest for it
    (:data:`AUTO_BACKEND`); ``cpsat`` or ``highs`` force one everywhere.

    >>> SolverOptions().for_task("reconstruct").backend
    'highs'
    >>> SolverOptions(backend="cpsat").for_task("reconstruct").backend
    'cpsat'
    """

    backend: str = "auto"
    threads: int = 1
    time_limit: float | None = 60.0
    seed: int = 0
    #: CP-SAT presolve: ``full`` (its defaults) or ``light`` (one presolve pass, no probing) for
    #: the many small searches of certification, where presolve was 80% of each 0.1 s solve
    presolve: str = "full"
    #: CP-SAT's ``linearization_level`` (None: its default, 1): 2 puts every constraint in its
    #: LP relaxation, which certification's proofs (:mod:`tabrecon.engine.variability`) use
    linearization: int | None = None
    #: CP-SAT's ``add_lp_constraints_lazily`` (its default, True): False puts the constraints
    #: in its LP relaxation from the start, which certification's searches run faster with
    #: (:data:`tabrecon.engine.variability.LP_LAZY`)
    lp_lazy: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise TabreconError(
                f"unknown solver {self.backend!r}; choose from {', '.join(BACKENDS)}"
            )
        if self.presolve not in ("full", "light"):
            raise TabreconError(f"unknown presolve {self.presolve!r}; choose 'full' or 'light'")
        if self.linearization not in (None, 0, 1, 2):
            raise TabreconError(
                f"unknown linearization level {self.linearization!r}; choose 0, 1 or 2"
            )

    def for_task(self, task: str) -> SolverOptions:
        """These options with ``auto`` resolved for ``task`` (reconstruct, certify, claims)."""
        if self.backend != "auto":
            return self
        return replace(self, backend=AUTO_BACKEND.get(task, "cpsat"))


@dataclass
class Solution:
    status: SolveStatus
    x: np.ndarray | None
    objective: float | None = None
    bound: float | None = None
    seconds: float = 0.0
    backend: str = ""
    info: dict = field(default_factory=dict)
    #: a CP-SAT response holding the domains its presolve derived (``bounds`` asked of
    #: :func:`solve_cpsat_model`), read only when :attr:`bounds` is
    response: Any = field(default=None, repr=False)

    @property
    def has_solution(self) -> bool:
        return self.x is not None and self.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every feasible solution's variable bounds (lb, ub) as the solve's presolve derived
        them, where it was asked to keep every feasible solution; else None."""
        if self.response is None or self.x is None:
            return None
        return _tightened(self.response, self.x.size)


def add_vars(proto: Any, lb: np.ndarray, ub: np.ndarray) -> None:
    """Append variables of domains ``lb..ub``, parsed from protobuf text in C++: half the time
    of adding them one by one through the bindings (5 against 10 ms for a tract model's 5,392
    variables)."""
    if not len(lb):
        return
    proto.merge_text_format(
        "".join(
            [
                f"variables{{domain:[{a},{b}]}}"
                for a, b in zip(lb.tolist(), ub.tolist(), strict=True)
            ]
        )
    )


def add_rows(proto: Any, A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray) -> None:
    """Append the rows ``lo <= A x <= hi`` (one by one: as text, the parse alone costs more)."""
    indptr, indices, data = A.indptr.tolist(), A.indices.tolist(), A.data.astype(np.int64).tolist()
    add = proto.constraints.add
    for s, e, lo_, hi_ in zip(
        indptr[:-1],
        indptr[1:],
        lo.astype(np.int64).tolist(),
        hi.astype(np.int64).tolist(),
        strict=True,
    ):
        lin = add().linear
        lin.vars.extend(indices[s:e])
        lin.coeffs.extend(data[s:e])
        lin.domain.extend((lo_, hi_))


def set_objective(proto: Any, c: np.ndarray, maximize: bool) -> None:
    nz = np.flatnonzero(c)
    obj = proto.objective
    obj.vars.extend(nz.tolist())
    coeffs = c[nz].astype(np.int64)
    if maximize:
        obj.coeffs.extend((-coeffs).tolist())
        obj.scaling_factor = -1.0
    else:
        obj.coeffs.extend(coeffs.tolist())


def _activity(A: sp.csr_matrix, lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's least and greatest value of ``A x`` over the box ``lb <= x <= ub``."""
    a, j = A.data.astype(np.int64), A.indices
    low = sp.csr_matrix((np.where(a > 0, a * lb[j], a * ub[j]), j, A.indptr), shape=A.shape)
    high = sp.csr_matrix((np.where(a > 0, a * ub[j], a * lb[j]), j, A.indptr), shape=A.shape)
    return np.asarray(low.sum(axis=1)).ravel(), np.asarray(high.sum(axis=1)).ravel()


def reduce_rows(
    prog: IntProgram,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The rows a solver needs, their bounds and tighter variable bounds, with the same integer
    solutions: ``(keep, lo, hi, lb, ub)``, or None where the bounds already contradict (the
    program is left whole, for the solver to report it infeasible) or a row's value could
    overflow 64 bits.

    Four reductions every presolve makes, done on the arrays before a model is filled (a
    CP-SAT model is filled row by row from Python, about 10 us a row, and cloned for every
    search of a certification): a row of one variable becomes that variable's bounds; a row
    whose least value over the bounds is its upper bound (or whose greatest is its lower bound:
    a published zero over counts) holds every variable at the bound that gives it; a row that
    every point of the bounds satisfies is dropped; rows of the same variables and coefficients
    (one count published in several tables) become one, held to the tightest of their bounds
    (:func:`_same_rows`). A tract's count model on the real sample keeps 879 of its 406,560
    rows; on 30 tracts of a synthetic state, 39% of the rows every model kept were such
    repeats.

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[2, 0, 0], [0, 1, 1], [1, 1, 1]])),
    ...                lo=np.array([4, 0, 2]), hi=np.array([5, 0, 9]), ub=np.array([9, 9, 9]))
    >>> keep, lo, hi, lb, ub = reduce_rows(p)
    >>> keep.tolist(), lb.tolist(), ub.tolist()
    ([False, False, False], [2, 0, 0], [2, 0, 0])
    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 1, 0]])),
    ...                lo=np.array([1, 1, 0]), hi=np.array([4, 2, 3]), ub=np.array([3, 3, 3]))
    >>> keep, lo, hi, lb, ub = reduce_rows(p)   # rows 0 and 2 are one: 1 <= x0 + x1 <= 3
    >>> keep.tolist(), lo[keep].tolist(), hi[keep].tolist()
    ([True, True, False], [1, 1], [3, 2])
    """
    A = prog.A.tocsr()
    lo, hi = prog.lo.astype(np.int64), prog.hi.astype(np.int64)
    lb = np.zeros(prog.n_vars, np.int64) if prog.lb is None else prog.lb.astype(np.int64)
    ub = prog.ub.astype(np.int64)
    a, j = A.data.astype(np.int64), A.indices
    n_of = np.diff(A.indptr)
    if a.size and (
        int(np.abs(a).max()) * max(int(np.abs(lb).max()), int(np.abs(ub).max())) * int(n_of.max())
        >= 1 << 62
    ):
        return None  # a row's activity could overflow int64: the program is left whole
    row = np.repeat(np.arange(A.shape[0]), n_of)  # each entry's row
    one = np.repeat(n_of == 1, n_of)  # the entries of one-variable rows
    if one.any():
        aj, jj, l_, h_ = a[one], j[one], lo[row[one]], hi[row[one]]
        lb, ub = lb.copy(), ub.copy()
        # lo <= a x <= hi: x in [ceil(lo/a), floor(hi/a)] for a > 0, [ceil(hi/a), floor(lo/a)]
        np.maximum.at(lb, jj, np.where(aj > 0, -(-l_ // aj), -(-h_ // aj)))
        np.minimum.at(ub, jj, np.where(aj > 0, h_ // aj, l_ // aj))
    if (lb > ub).any():
        return None
    least, most = _activity(A, lb, ub)
    if (least > hi).any() or (most < lo).any():
        return None
    at_least = (least == hi)[row] & ~one  # every variable at the end that gives the least
    at_most = (most == lo)[row] & ~one
    new_lb, new_ub = lb.copy(), ub.copy()
    up = (at_least & (a < 0)) | (at_most & (a > 0))
    down = (at_least & (a > 0)) | (at_most & (a < 0))
    np.maximum.at(new_lb, j[up], ub[j[up]])
    np.minimum.at(new_ub, j[down], lb[j[down]])
    if (new_lb > new_ub).any():
        return None
    least, most = _activity(A, new_lb, new_ub)
    keep = ~((least >= lo) & (most <= hi))
    rows = np.flatnonzero(keep)
    rep = rows[_same_rows(A[rows])]  # each kept row's first repeat (itself when none)
    lo, hi = lo.copy(), hi.copy()
    np.maximum.at(lo, rep, lo[rows])
    np.minimum.at(hi, rep, hi[rows])
    if (lo[rep] > hi[rep]).any():
        return None
    keep[rows[rep != rows]] = False
    return keep, lo, hi, new_lb, new_ub


def _same_rows(A: sp.csr_matrix) -> np.ndarray:
    """For each row of ``A``, the first row with exactly its variables and coefficients (its
    own index where it is the first). Rows are grouped by two 64-bit hashes of their entries
    and their length, and each pair is then compared entry by entry, so a hash collision can
    only leave two rows apart, never join different ones.

    >>> A = sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 1], [1, 2, 0], [0, 1, 1], [1, 0, 0]]))
    >>> _same_rows(A).tolist()
    [0, 1, 0, 1, 4]
    """
    n = A.shape[0]
    first = np.arange(n)
    if n < 2:
        return first
    A = A if A.has_sorted_indices else A.sorted_indices()
    nnz = np.diff(A.indptr)
    j, a = A.indices, A.data.astype(np.int64)
    weights = np.random.default_rng(0x5EED).integers(1, 1 << 62, size=(2, A.shape[1]))
    row = np.repeat(np.arange(n), nnz)
    h = np.zeros((2, n), dtype=np.int64)
    with np.errstate(over="ignore"):
        for i in (0, 1):  # int64 sums wrap: a hash modulo 2^64
            np.add.at(h[i], row, a * weights[i][j] + j)
    order = np.lexsort((np.arange(n), h[1], h[0], nnz))
    new = np.ones(n, dtype=bool)
    new[1:] = (np.diff(nnz[order]) != 0) | (np.diff(h[0][order]) != 0)
    new[1:] |= np.diff(h[1][order]) != 0
    head = order[np.maximum.accumulate(np.where(new, np.arange(n), 0))]
    cand = np.flatnonzero(head != order)  # positions whose group began with another row
    if cand.size:
        r, p = order[cand], head[cand]
        k = nnz[r]
        pair = np.repeat(np.arange(cand.size), k)
        step = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k)
        er, ep = np.repeat(A.indptr[r], k) + step, np.repeat(A.indptr[p], k) + step
        differs = np.bincount(pair, weights=(j[er] != j[ep]) | (a[er] != a[ep]), minlength=r.size)
        same = differs == 0
        first[r[same]] = p[same]
    return first


class CpsatModel:
    """A CP-SAT model as its proto alone, which is all a solve reads (:class:`CpsatSolver`): the
    models here are filled from arrays, never through ``CpModel``'s expression API, whose
    constructor adds about a hundred deprecated method aliases to each instance (1.5 ms a model:
    1.0 of a 100,000-person state's 18.7 s on 10 tracts, where certification builds and clones
    hundreds).

    >>> m = CpsatModel()
    >>> add_vars(m.proto, np.array([0]), np.array([3]))
    >>> len(m.clone().proto.variables), m.has_objective()
    (1, False)
    """

    __slots__ = ("proto",)

    def __init__(self, proto: Any = None) -> None:
        from ortools.sat.python import cp_model_helper

        self.proto = cp_model_helper.CpModelProto()
        if proto is not None:
            self.proto.copy_from(proto)

    def clone(self) -> CpsatModel:
        """A copy (in C++) to extend without touching this one."""
        return CpsatModel(self.proto)

    def has_objective(self) -> bool:
        return bool(self.proto.has_objective())


class CpsatSolver:
    """CP-SAT's solver on a :class:`CpsatModel`: what ``cp_model.CpSolver`` does for these models
    (parameters, a solve another thread can stop, the response), on OR-Tools' own solve wrapper
    (``cp_model_helper.SolveWrapper``, which ``CpSolver`` calls) without importing ``cp_model``,
    whose module imports pandas: 0.8 s of every worker process's start-up, for nothing a count
    model uses.

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([2]), hi=np.array([2]),
    ...                ub=np.array([2, 2]), c=np.array([1, 0]), maximize=True)
    >>> s = CpsatSolver()
    >>> s.parameters.num_workers = 1
    >>> s.solve(build_cpsat(p)).name, list(s.response.solution), s.response.objective_value
    ('OPTIMAL', [2, 0], 2.0)
    """

    __slots__ = ("parameters", "response", "_wrapper", "_lock")

    def __init__(self) -> None:
        from ortools.sat.python import cp_model_helper

        self.parameters = cp_model_helper.SatParameters()
        self.response: Any = None
        self._wrapper: Any = None
        self._lock = threading.Lock()

    def solve(self, m: CpsatModel) -> Any:
        """Solve ``m``; its status (``.name``: OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN,
        MODEL_INVALID); :attr:`response` holds the solution and bounds."""
        from ortools.sat.python import cp_model_helper

        wrapper = cp_model_helper.SolveWrapper()
        wrapper.set_parameters(self.parameters)
        with self._lock:
            self._wrapper = wrapper
        try:
            self.response = wrapper.solve(m.proto)
        finally:
            with self._lock:
                self._wrapper = None
        return self.response.status

    def stop_search(self) -> None:
        """Stop a running solve (from another thread: an interrupt's watcher)."""
        with self._lock:
            if self._wrapper is not None:
                self._wrapper.stop_search()


def build_cpsat(prog: IntProgram) -> CpsatModel:
    """A CP-SAT model filled straight from the program's arrays (no Python expression objects),
    with the rows and bounds :func:`reduce_rows` leaves."""
    m = CpsatModel()
    reduced = reduce_rows(prog)
    if reduced is None:
        lb = np.zeros(prog.n_vars, np.int64) if prog.lb is None else prog.lb.astype(np.int64)
        add_vars(m.proto, lb, prog.ub.astype(np.int64))
        add_rows(m.proto, prog.A.tocsr(), prog.lo, prog.hi)
    else:
        keep, lo, hi, lb, ub = reduced
        add_vars(m.proto, lb, ub)
        add_rows(m.proto, prog.A.tocsr()[keep], lo[keep], hi[keep])
    if prog.c is not None:
        set_objective(m.proto, prog.c, prog.maximize)
    return m


def tighten(
    prog: IntProgram, time_limit: float = 10.0, model: CpsatModel | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Variable bounds that every feasible solution of ``prog`` satisfies: (lb, ub), or None when
    presolve finds the program infeasible or fails.

    CP-SAT's presolve alone (``stop_after_presolve``), told to keep every feasible solution
    (no dual reductions, which are only valid for one objective) and to report the domains it
    derived. Many count-model variables are fixed by the tables outright; programs rebuilt many
    times (certification's searches) then carry only the rest. ``model``: ``prog`` already
    built (:func:`build_cpsat`), solved as it is instead of built again (a tract program's build
    was as long as its presolve).

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1], [1, -1]])), lo=np.array([2, 0]),
    ...                hi=np.array([2, 0]), ub=np.array([5, 5]))
    >>> lb, ub = tighten(p)
    >>> lb.tolist(), ub.tolist()
    ([1, 1], [1, 1])
    """
    if prog.c is not None:
        raise TabreconError("tighten() bounds a feasibility program; drop the objective first")
    solver = CpsatSolver()
    par = solver.parameters
    par.num_workers = 1
    par.stop_after_presolve = True
    par.keep_all_feasible_solutions_in_presolve = True
    par.fill_tightened_domains_in_response = True
    par.max_time_in_seconds = float(time_limit)
    par.catch_sigint_signal = False
    with stoppable(solver):
        st = solver.solve(model or build_cpsat(prog)).name
    if st in ("INFEASIBLE", "MODEL_INVALID"):
        return None
    return _tightened(solver.response, prog.n_vars)


#: a variable's domain of one interval in a CP-SAT response's text format
_INTERVAL = re.compile(r"tightened_variables \{\s*domain: (-?\d+)\s*domain: (-?\d+)\s*\}")


def _tightened(response: Any, n_vars: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The hull of each variable's domain as CP-SAT's presolve left it (``response`` of a solve
    with ``fill_tightened_domains_in_response``): (lb, ub), None when it reports none.

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[2, -1, 0], [1, 1, 1]])), lo=np.array([0, 0]),
    ...                hi=np.array([0, 9]), ub=np.array([3, 4, 3]))
    >>> s = CpsatSolver()
    >>> s.parameters.stop_after_presolve = True
    >>> s.parameters.keep_all_feasible_solutions_in_presolve = True
    >>> s.parameters.fill_tightened_domains_in_response = True
    >>> s.solve(build_cpsat(p)).name   # x1 = 2 x0 lies in {0, 2, 4}: a domain with holes
    'UNKNOWN'
    >>> [b.tolist() for b in _tightened(s.response, 3)]
    [[0, 0, 0], [2, 4, 3]]
    """
    # a domain is [lo, hi] or, with holes, [lo1, hi1, lo2, hi2, ...]: its hull is kept. Read
    # from the response's text by one regular expression where every variable's domain is one
    # interval (n matches of a block of exactly two bounds), 3x faster than a Python loop over
    # the repeated field (11 -> 4 ms for 5,000 variables); else by that loop
    pairs = _INTERVAL.findall(str(response))
    if len(pairs) == n_vars:
        got = np.array(pairs, dtype=np.int64).reshape(n_vars, 2)
        return got[:, 0].copy(), got[:, 1].copy()
    doms = response.tightened_variables
    if len(doms) != n_vars:
        return None
    out = np.empty(2 * n_vars, dtype=np.int64)
    i = 0
    for d in doms:
        dom = d.domain
        out[i] = dom[0]
        out[i + 1] = dom[len(dom) - 1]
        i += 2
    return out[0::2].copy(), out[1::2].copy()


def solve_cpsat_model(
    m: CpsatModel,
    n_vars: int,
    opts: SolverOptions,
    t0: float,
    maximize: bool = False,
    work_limit: float | None = None,
    bounds: bool = False,
) -> Solution:
    """Solve a CP-SAT model under ``opts``. ``bounds`` (a model without objective): presolve
    keeps every feasible solution and the variables' domains it derived are returned as
    :attr:`Solution.bounds` (what :func:`tighten` would find, from this solve's presolve)."""
    solver = CpsatSolver()
    solver.parameters.num_workers = max(1, opts.threads)
    solver.parameters.random_seed = opts.seed
    if opts.time_limit:
        solver.parameters.max_time_in_seconds = float(opts.time_limit)
    if work_limit is not None:
        solver.parameters.max_deterministic_time = float(work_limit)
    solver.parameters.catch_sigint_signal = False  # tabrecon.interrupts stops the search instead
    if opts.presolve == "light":
        solver.parameters.max_presolve_iterations = 1
        solver.parameters.cp_model_probing_level = 0
    if opts.linearization is not None:
        solver.parameters.linearization_level = opts.linearization
    if not opts.lp_lazy:
        solver.parameters.add_lp_constraints_lazily = False
    has_obj = m.has_objective()
    bounds = bounds and not has_obj  # an objective's dual reductions cut feasible solutions
    if bounds:
        solver.parameters.keep_all_feasible_solutions_in_presolve = True
        solver.parameters.fill_tightened_domains_in_response = True
    with stoppable(solver):
        name = solver.solve(m).name
    res = solver.response
    x = None
    if name in ("OPTIMAL", "FEASIBLE"):
        x = np.asarray(res.solution, dtype=np.int64)[:n_vars]
    status = {
        "OPTIMAL": SolveStatus.OPTIMAL,
        "FEASIBLE": SolveStatus.FEASIBLE if has_obj else SolveStatus.OPTIMAL,
        "INFEASIBLE": SolveStatus.INFEASIBLE,
        "UNKNOWN": SolveStatus.TIMEOUT,
        "MODEL_INVALID": SolveStatus.ERROR,
    }.get(name, SolveStatus.ERROR)
    if name == "FEASIBLE" and has_obj:
        status = (
            SolveStatus.TIMEOUT
            if res.wall_time >= (opts.time_limit or 1e18) * 0.99
            else SolveStatus.FEASIBLE
        )
    obj = bound = None
    if has_obj and x is not None:
        obj, bound = res.objective_value, res.best_objective_bound
    return Solution(
        status,
        x,
        obj,
        bound,
        time.perf_counter() - t0,
        "cpsat",
        {"raw": name},
        response=res if bounds and x is not None else None,
    )


def pass_to_highs(h: Any, prog: IntProgram, cost: np.ndarray, integer: bool) -> None:
    """Load ``prog`` into the HiGHS instance ``h`` (minimising ``cost``), its variables integer
    or, for the relaxation, not: the arrays passed whole to HiGHS' array overload of
    ``passModel``. Filling a ``HighsLp`` attribute by attribute copies them element by element
    (a 1,500-column, 2,500-row program, both cores loaded: 8.1 ms to fill and 1.9 to pass,
    against 0.6 ms this way), and certification loads about 700 relaxations per 1,000,000
    persons."""
    import highspy

    n = prog.n_vars
    A = prog.A.tocsr()
    status = h.passModel(
        n,
        prog.n_rows,
        int(A.nnz),
        int(highspy.MatrixFormat.kRowwise),
        int(highspy.ObjSense.kMinimize),
        0.0,
        np.ascontiguousarray(cost, dtype=np.float64),
        np.zeros(n) if prog.lb is None else prog.lb.astype(np.float64),
        prog.ub.astype(np.float64),
        prog.lo.astype(np.float64),
        prog.hi.astype(np.float64),
        A.indptr.astype(np.int32),
        A.indices.astype(np.int32),
        A.data.astype(np.float64),
        np.full(
            n,
            int(highspy.HighsVarType.kInteger if integer else highspy.HighsVarType.kContinuous),
            dtype=np.int32,
        ),
    )
    if status == highspy.HighsStatus.kError:  # a malformed model: a bug here, never the data's
        raise RuntimeError(f"HiGHS refused a program of {n} variables and {prog.n_rows} rows")


def _solve_highs(prog: IntProgram, opts: SolverOptions) -> Solution:
    import highspy

    t0 = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", max(1, opts.threads))
    h.setOptionValue("random_seed", opts.seed)
    if opts.time_limit:
        h.setOptionValue("time_limit", float(opts.time_limit))
    c = np.zeros(prog.n_vars) if prog.c is None else prog.c.astype(float)
    pass_to_highs(h, prog, -c if prog.maximize else c, integer=True)
    with stoppable(h, "cancelSolve"):
        h.run()
    ms = h.modelStatusToString(h.getModelStatus())
    x = None
    status = {
        "Optimal": SolveStatus.OPTIMAL,
        "Infeasible": SolveStatus.INFEASIBLE,
        "Time limit reached": SolveStatus.TIMEOUT,
    }.get(ms, SolveStatus.ERROR)
    if h.getInfo().primal_solution_status == 2:  # feasible point available
        x = np.rint(np.asarray(h.getSolution().col_value)).astype(np.int64)
        if status == SolveStatus.TIMEOUT and prog.c is None:
            status = SolveStatus.OPTIMAL
    obj = bound = None
    if prog.c is not None and x is not None:
        info = h.getInfo()
        sgn = -1.0 if prog.maximize else 1.0
        obj, bound = sgn * info.objective_function_value, sgn * info.mip_dual_bound
    return Solution(status, x, obj, bound, time.perf_counter() - t0, "highs", {"raw": ms})


def solve(prog: IntProgram, opts: SolverOptions | None = None) -> Solution:
    """Solve an integer program with the chosen backend. Never raises for solver outcomes."""
    opts = opts or SolverOptions()
    if prog.n_vars == 0:
        ok = bool(np.all(prog.lo <= 0) and np.all(prog.hi >= 0))
        return Solution(
            SolveStatus.OPTIMAL if ok else SolveStatus.INFEASIBLE,
            np.zeros(0, dtype=np.int64) if ok else None,
            backend=opts.backend,
        )
    if opts.backend == "highs":
        return _solve_highs(prog, opts)
    t0 = time.perf_counter()
    m = build_cpsat(prog)
    return solve_cpsat_model(m, prog.n_vars, opts, t0, prog.maximize)
