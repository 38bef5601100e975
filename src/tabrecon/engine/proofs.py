"""A program solved many times, and what every one of its solutions must satisfy.

:class:`Extensible` holds a base program whose CP-SAT model is built once and cloned (in C++) for
each solve with a few extra variables and rows, and whose linear relaxation (:class:`Relaxation`)
is loaded into HiGHS once and re-optimised objective after objective. :func:`prove_forms` decides
which linear forms keep their value in every solution (the verification of Generate-then-Verify);
:func:`independent_rows` drops rows implied by others. The solvers themselves, and the program
they take, are :mod:`tabrecon.engine.solvers`.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..errors import TabreconError
from ..vocab import SolveStatus
from .solvers import (
    CpsatModel,
    IntProgram,
    Solution,
    SolverOptions,
    add_rows,
    add_vars,
    build_cpsat,
    pass_to_highs,
    set_objective,
    solve,
    solve_cpsat_model,
    tighten,
)


def independent_rows(prog: IntProgram, tol: float = 1e-9) -> np.ndarray:
    """Which rows of ``prog`` to keep so that every equality row dropped is a linear
    combination of equality rows kept (rows with a range are all kept): where the program is
    consistent, the kept rows have the same solutions, integer or real. Published tables are
    full of such rows -- a total is the sum of its parts, table after table -- and they are
    the densest. Sparse rows are preferred: each row of a random projection of the equality
    rows is scaled by 1 / its nonzeros before a pivoted QR picks a basis (the projection keeps
    every linear dependency with probability one and makes the QR small).

    A row judged dependent by rounding error would only widen the region: use the kept rows
    where a wider region is safe (bounds), and check solutions against all rows.

    >>> A = sp.csr_matrix(np.array([[1, 1, 1], [1, 0, 0], [0, 1, 1], [0, 1, 0]]))
    >>> p = IntProgram(A=A, lo=np.array([3, 1, 2, 0]), hi=np.array([3, 1, 2, 2]),
    ...                ub=np.array([3, 3, 3]))
    >>> independent_rows(p).tolist()  # the total is the sum of the next two
    [False, True, True, True]
    """
    A = prog.A.tocsr()
    keep = np.ones(A.shape[0], dtype=bool)
    eq = np.flatnonzero(prog.lo == prog.hi)
    if eq.size < 2:
        return keep
    import scipy.linalg as la

    Ae = A[eq]
    nnz = np.maximum(np.diff(Ae.indptr), 1)
    G = np.random.default_rng(0).standard_normal((A.shape[1], min(A.shape[1], eq.size)))
    M = np.asarray(Ae @ G) / nnz[:, None]
    _q, R, piv = la.qr(M.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    rank = int((d > d[0] * tol).sum()) if d.size and d[0] > 0 else 0
    keep[eq] = False
    keep[eq[piv[:rank]]] = True
    return keep


class Extensible:
    """A base program solved many times with a few extra variables and rows each time.

    CP-SAT: the base model is built once and cloned (in C++) for every solve, so only the extra rows
    are filled from Python. HiGHS: the extended program is passed whole (array-based anyway).

    ``keep_bounds``: :meth:`solve_base` without an objective keeps every feasible solution
    through its presolve and remembers the bounds it derived, which :meth:`tighten` then
    returns instead of presolving again (a tract's reconstruction and its certification: the
    same domains on 30 tracts of a synthetic state, 1.2 CPU s of presolve saved). Its solution
    may differ from the default solve's (an equally consistent one), so the flag is the
    program's, not the caller's: every solve of such a program gives the same.

    ``lp_presolve``: false builds :attr:`relaxation` without HiGHS' presolve, which runs only
    for its first optimum, from scratch (certification: :data:`LP_PRESOLVE`).
    """

    def __init__(
        self,
        prog: IntProgram,
        opts: SolverOptions,
        lp: IntProgram | None = None,
        *,
        keep_bounds: bool = False,
        lp_presolve: bool = True,
    ) -> None:
        self.prog, self.opts = prog, opts
        self._lp_presolve = lp_presolve
        self._on_cpsat = opts.backend != "highs"
        # the CP-SAT model, built when first solved (a tract's zero test often needs only the
        # relaxation's vertices: 24 of 30 tracts built a model for nothing, 0.3 CPU s); shared
        # with the copies :meth:`using` makes. A HiGHS-backed program's serves joint proofs
        self._models: dict[str, CpsatModel] = {}
        self._relaxation: Relaxation | None = None
        self._lp = prog if lp is None else lp
        self._keep_bounds = keep_bounds and prog.c is None
        self._bounded: Solution | None = None  # the base's solve that kept its bounds

    def tighten(self) -> tuple[np.ndarray, np.ndarray] | None:
        """:func:`tighten` on the base program, its model cloned instead of built again.

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1], [1, -1]])), lo=np.array([2, 0]),
        ...                hi=np.array([2, 0]), ub=np.array([5, 5]))
        >>> lb, ub = Extensible(p, SolverOptions()).tighten()
        >>> lb.tolist(), ub.tolist()
        ([1, 1], [1, 1])
        """
        if self._bounded is not None:  # derived by the base's own solve (``keep_bounds``)
            got = self._bounded.bounds
            if got is not None:
                return got
        return tighten(self.prog, model=self._model.clone())

    @property
    def _model(self) -> CpsatModel:
        """The base program's CP-SAT model, built once, when first asked for."""
        if "base" not in self._models:
            self._models["base"] = build_cpsat(self.prog)
        return self._models["base"]

    @property
    def relaxation(self) -> Relaxation:
        """The base program's linear relaxation (:class:`Relaxation`), built when first used,
        from ``lp`` when given: the program with fewer rows and the same solutions
        (:func:`independent_rows`); without HiGHS' presolve where ``lp_presolve`` is false."""
        if self._relaxation is None:
            self._relaxation = Relaxation(self._lp, self._lp_presolve)
        return self._relaxation

    def solve(
        self,
        n_new: int,
        new_ub: np.ndarray,
        rows: sp.csr_matrix,
        lo: np.ndarray,
        hi: np.ndarray,
        c: np.ndarray | None = None,
        maximize: bool = False,
        time_limit: float | None = None,
        work_limit: float | None = None,
    ) -> Solution:
        """The base program with ``n_new`` more variables (bounds 0..``new_ub``) and more rows
        (``lo <= rows @ [x, new] <= hi``), under objective ``c`` when given; ``time_limit``
        lowers the options' limit for this solve. ``work_limit`` (CP-SAT only) also stops the
        search after that much of CP-SAT's deterministic time (about seconds, the same on any
        machine and load): a capped search under an objective returns the same best solution
        on every run."""
        p = self.prog
        opts = self.opts
        if time_limit is not None:
            opts = replace(opts, time_limit=min(opts.time_limit or time_limit, time_limit))
        if not self._on_cpsat:
            return solve(p.extended(n_new, new_ub, rows, lo, hi, c, maximize), opts)
        t0 = time.perf_counter()
        m = self._model.clone()
        add_vars(m.proto, np.zeros(n_new, dtype=np.int64), np.asarray(new_ub, dtype=np.int64))
        add_rows(m.proto, rows.tocsr(), lo, hi)
        if c is not None:
            set_objective(m.proto, c, maximize)
        return solve_cpsat_model(m, p.n_vars + n_new, opts, t0, maximize, work_limit)

    def using(self, opts: SolverOptions) -> Extensible:
        """This program with other options for its solves, the model built once shared (the
        backend is this one's: only CP-SAT's parameters and the limits change).

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([2]),
        ...                hi=np.array([2]), ub=np.array([2, 2]))
        >>> e = Extensible(p, SolverOptions(backend="cpsat"))
        >>> e.using(SolverOptions(backend="cpsat", linearization=2)).solve_base().x.sum()
        np.int64(2)
        """
        other = copy.copy(self)  # shares the built models; none is changed in place
        other.opts = replace(opts, backend=self.opts.backend)
        return other

    @property
    def on_cpsat(self) -> bool:
        """Whether :meth:`solve` runs on a CP-SAT model (``work_limit`` is honoured)."""
        return self._on_cpsat

    def solve_base(
        self,
        c: np.ndarray | None = None,
        maximize: bool = False,
        opts: SolverOptions | None = None,
        work_limit: float | None = None,
    ) -> Solution:
        """The base program itself, optionally under objective ``c`` and other options (a time
        limit; ``work_limit`` as for :meth:`solve`): CP-SAT clones the model built once instead
        of building it again, which is most of a small program's time when it is solved many
        times (Generate-then-Verify's K random objectives).

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([2]),
        ...                hi=np.array([2]), ub=np.array([2, 2]))
        >>> e = Extensible(p, SolverOptions())
        >>> e.solve_base(np.array([1, 0]), maximize=True).x.tolist()
        [2, 0]
        """
        o = opts or self.opts
        if not self._on_cpsat:
            return solve(replace(self.prog, c=c, maximize=maximize), o)
        t0 = time.perf_counter()
        m = self._model.clone()
        if c is not None:
            set_objective(m.proto, np.asarray(c), maximize)
        keep = self._keep_bounds and c is None
        sol = solve_cpsat_model(m, self.prog.n_vars, o, t0, maximize, work_limit, bounds=keep)
        if sol.response is not None:
            self._bounded = sol
        return sol

    def solve_some_differs(
        self, rows: sp.csr_matrix, values: np.ndarray, time_limit: float | None = None
    ) -> Solution:
        """A solution of the base program in which at least one of the forms ``rows @ x``
        differs from its ``values``; ``infeasible`` proves that every solution gives each form
        exactly its value. CP-SAT, whatever the backend: two enforced inequalities per form
        (``<= value - 1``, ``>= value + 1``) and one clause over their literals.

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1]])), lo=np.array([2]),
        ...                hi=np.array([2]), ub=np.array([2, 2]))
        >>> e = Extensible(p, SolverOptions(backend="cpsat"))
        >>> e.solve_some_differs(sp.csr_matrix(np.array([[1, 1]])), np.array([2])).status.value
        'infeasible'
        >>> e.solve_some_differs(sp.csr_matrix(np.array([[1, 0]])), np.array([1])).has_solution
        True
        """
        t0 = time.perf_counter()
        m = self._model.clone()  # a HiGHS-backed program's too: solve() stays on HiGHS
        proto = m.proto
        nv, ng = self.prog.n_vars, rows.shape[0]
        add_vars(proto, np.zeros(2 * ng, dtype=np.int64), np.ones(2 * ng, dtype=np.int64))
        rows = rows.tocsr()
        indptr, indices, data = rows.indptr, rows.indices, rows.data.astype(np.int64)
        big = 1 << 40
        for r, v in enumerate(np.asarray(values, dtype=np.int64).tolist()):
            idx = indices[indptr[r] : indptr[r + 1]].tolist()
            co = data[indptr[r] : indptr[r + 1]].tolist()
            for lit, dom in ((nv + 2 * r, (-big, v - 1)), (nv + 2 * r + 1, (v + 1, big))):
                c = proto.constraints.add()
                c.enforcement_literal.append(lit)
                c.linear.vars.extend(idx)
                c.linear.coeffs.extend(co)
                c.linear.domain.extend(dom)
        proto.constraints.add().bool_or.literals.extend(range(nv, nv + 2 * ng))
        opts = self.opts if time_limit is None else replace(self.opts, time_limit=time_limit)
        return solve_cpsat_model(m, nv, opts, t0)


@dataclass
class FormProof:
    """Which linear forms equal their value in every solution, and how that was found."""

    verified: np.ndarray  # bool per form
    proofs: int  # searches run
    complete: bool  # False: the time or the rounds ran out with forms left undecided
    #: bool per form: a solution found breaks it (None: not kept)
    refuted: np.ndarray | None = None


class Relaxation:
    """The linear relaxation of an integer program, loaded into HiGHS once and re-optimised
    under one objective after another from the last basis: cheap bounds and, often, integer
    solutions, ahead of an integer search.

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0]])), lo=np.array([2]),
    ...                hi=np.array([2]), ub=np.array([2, 2, 3]))
    >>> r = Relaxation(p)
    >>> r.vertex(np.array([1, 0, 1])).tolist()
    [0, 2, 0]
    >>> C = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1]]))
    >>> settled, found, looked = r.settled(C, np.array([2, 1, 0]))
    >>> settled.tolist(), all((C @ x != [2, 1, 0]).any() for x in found), looked
    ([True, False, False], True, 3)
    """

    #: far above the simplex's own tolerance (1e-7 a row), far below the unit of a count
    TOL = 1e-6

    def __init__(self, prog: IntProgram, presolve: bool = True) -> None:
        import highspy

        self.prog = prog
        self._h = h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        if not presolve:  # the first optimum from scratch: only it would run HiGHS' presolve
            h.setOptionValue("presolve", "off")
        n = prog.n_vars
        pass_to_highs(h, prog, np.zeros(n), integer=False)
        self._optimal = highspy.HighsModelStatus.kOptimal
        self._sense = {True: highspy.ObjSense.kMaximize, False: highspy.ObjSense.kMinimize}
        self._support = np.arange(n, dtype=np.int32)  # columns whose cost may be nonzero

    def _objective(self, cols: np.ndarray, vals: np.ndarray) -> None:
        if self._support.size:
            self._h.changeColsCost(self._support.size, self._support, np.zeros(self._support.size))
        self._h.changeColsCost(cols.size, cols, vals)
        self._support = cols

    def _optimum(self, maximize: bool, primal: bool = False) -> float | None:
        # primal simplex re-optimises a form's bound from the last optimal basis, which a new
        # objective leaves primal feasible (measured 2-5x faster than HiGHS' default there);
        # random objectives' vertices come out integer more often from the default
        self._h.setOptionValue("simplex_strategy", 4 if primal else 1)
        self._h.changeObjectiveSense(self._sense[maximize])
        self._h.run()
        if self._h.getModelStatus() != self._optimal:
            return None
        return float(self._h.getInfo().objective_function_value)

    def _integer_point(self) -> np.ndarray | None:
        """The last optimum when it is an integer solution of the program (checked row by
        row), else None."""
        x = np.asarray(self._h.getSolution().col_value)
        xi = np.rint(x).astype(np.int64)
        if np.abs(x - xi).max(initial=0.0) > self.TOL or not self.prog.satisfied_by(xi):
            return None
        return xi

    def optimum(self, c: np.ndarray, maximize: bool = False) -> np.ndarray | None:
        """An optimal point of the relaxation under objective ``c`` (not necessarily integer),
        or None when there is none.

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[2, 2]])), lo=np.array([1]),
        ...                hi=np.array([1]), ub=np.array([1, 1]))
        >>> Relaxation(p).optimum(np.array([1, 0]), maximize=True).tolist()
        [0.5, 0.0]
        """
        n = self.prog.n_vars
        self._objective(np.arange(n, dtype=np.int32), np.asarray(c, dtype=float))
        if self._optimum(maximize) is None:
            return None
        return np.asarray(self._h.getSolution().col_value)

    def vertex(self, c: np.ndarray, maximize: bool = False) -> np.ndarray | None:
        """An optimal vertex under objective ``c`` when it is an integer solution of the program,
        else None: an integer search is then needed."""
        n = self.prog.n_vars
        self._objective(np.arange(n, dtype=np.int32), np.asarray(c, dtype=float))
        return None if self._optimum(maximize) is None else self._integer_point()

    def vertex_fixing(
        self, cols: np.ndarray, values: np.ndarray, c: np.ndarray, maximize: bool = False
    ) -> np.ndarray | None:
        """:meth:`vertex` with the variables ``cols`` fixed at ``values`` for this one solve
        (their bounds restored after): an integer solution that extends that partial one,
        when the relaxation's optimum is integer, else None.

        >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 1]])), lo=np.array([3]),
        ...                hi=np.array([3]), ub=np.array([3, 3, 3]))
        >>> r = Relaxation(p)
        >>> r.vertex_fixing(np.array([0]), np.array([2]), np.array([0, 1, 0])).tolist()
        [2, 0, 1]
        >>> r.vertex(np.array([0, 1, 0])).tolist()[1]   # unfixed again
        0
        """
        cols = np.asarray(cols, dtype=np.int32)
        lb = np.zeros(cols.size) if self.prog.lb is None else self.prog.lb[cols].astype(float)
        ub = self.prog.ub[cols].astype(float)
        v = np.asarray(values, dtype=float)
        self._h.changeColsBounds(cols.size, cols, v, v)
        try:
            return self.vertex(c, maximize)
        finally:
            self._h.changeColsBounds(cols.size, cols, lb, ub)

    def settled(
        self, C: sp.csr_matrix, m: np.ndarray, seconds: float | None = None
    ) -> tuple[np.ndarray, list[np.ndarray], int]:
        """Which forms ``C x`` the relaxation alone proves equal to ``m`` in every integer
        solution -- its maximum below m + 1 and its minimum above m - 1 (the relaxation's
        optimum bounds every integer solution's) -- the integer solutions it met on the way
        that break some form (an optimum beyond m that is an integer point), and how many forms
        it looked at (the first ones: two linear programs each). A form neither settled nor
        broken stays open for an integer search; so do all forms left when ``seconds`` run
        out."""
        C = C.tocsr()
        m = np.asarray(m)
        out = np.zeros(C.shape[0], dtype=bool)
        broken = np.zeros(C.shape[0], dtype=bool)
        found: list[np.ndarray] = []
        t0 = time.perf_counter()
        looked = 0
        for i in range(C.shape[0]):
            if seconds is not None and time.perf_counter() - t0 > seconds:
                break
            looked = i + 1
            if broken[i]:
                continue
            sl = slice(C.indptr[i], C.indptr[i + 1])
            self._objective(C.indices[sl].astype(np.int32), C.data[sl].astype(float))
            for maximize in (True, False):
                v = self._optimum(maximize, primal=True)
                if v is None:
                    break
                if (v < m[i] + 1 - self.TOL) if maximize else (v > m[i] - 1 + self.TOL):
                    out[i] = not maximize  # both bounds hold once the minimum is checked
                    continue
                x = self._integer_point()
                if x is not None and C[i] @ x != m[i]:
                    found.append(x)
                    broken |= C @ x != m
                break
        return out & ~broken, found, looked


#: Turns of the search's length the relaxation may take to finish its forms at once
#: (:func:`prove_forms`)
RELAX_FINISH = 8

#: Vertices of the relaxation in a row that break no open form before :func:`prove_forms`
#: searches again (0: none drawn)
DIRECTED_MISSES = 3


def prove_forms(
    base: Extensible,
    C: sp.csr_matrix,
    m: np.ndarray,
    pool: list[np.ndarray] | None = None,
    seconds: float | None = None,
    max_rounds: int | None = None,
    relax_after: float | None = None,
    groups: np.ndarray | None = None,
) -> FormProof:
    """Which forms ``C x`` equal ``m`` in every solution of ``base``'s program -- the verification
    step of Generate-then-Verify, for persons and for any schema.

    Forms that a known solution (``pool``) breaks are refuted at once. For the rest, one search
    for a solution breaking *any* of them (:meth:`Extensible.solve_some_differs`): infeasible
    proves them all; a solution refutes at least one, joins ``pool``, and the search repeats on
    what is left. The same verdicts as two infeasibility proofs per form, in far fewer solves.
    After each solution a search finds, vertices of the linear relaxation under random weights
    of the open forms refute what they break (integer vertices only), until
    :data:`DIRECTED_MISSES` in a row break none: a search's solution tends to break a few
    forms, such a vertex many.
    Forms still undecided when ``seconds`` or ``max_rounds`` run out are not verified. With
    ``relax_after``, a search that has not answered in that many seconds hands over to the
    linear relaxation for as long: forms it settles (:meth:`Relaxation.settled`) are verified,
    and the search goes on over the rest, each turn twice as long as the one before, until the
    relaxation has looked at every form (``relax_after`` 0: the relaxation first, to the end),
    or until what it has left would take it under :data:`RELAX_FINISH` turns at its pace
    (then it finishes).
    Small programs are proven faster by the one search, hard ones by the relaxation (a
    housing-unit block of 25 units: 520 claims settled in 1.7 s that CP-SAT had not proven in
    60 s), and the turns keep either from costing much more than the other where it is the
    slow one (a tract's 4,232 person claims: 75 s of relaxation where four searches took
    4 s); the verdicts are the same either way. With
    ``groups`` (each form's group: a block's forms, where all that is asked is whether every
    one of them holds) a group is decided once one of its forms is refuted: its other forms are
    left unverified and searched no more (a rounded release's block program, whose every
    coarse type is a form: each search that finds a solution decides a block at least, so there
    are at most one search per block and a last one that proves the rest).

    >>> p = IntProgram(A=sp.csr_matrix(np.array([[1, 1, 0]])), lo=np.array([2]),
    ...                hi=np.array([2]), ub=np.array([2, 2, 3]))
    >>> C = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1]]))
    >>> proof = prove_forms(Extensible(p, SolverOptions(backend="cpsat")), C, np.array([2, 1, 0]))
    >>> proof.verified.tolist(), proof.complete
    ([True, False, False], True)
    """
    n_vars = base.prog.n_vars
    C = C.tocsr()
    m = np.asarray(m, dtype=np.int64)
    verified = np.zeros(C.shape[0], dtype=bool)
    alive = np.ones(C.shape[0], dtype=bool)
    refuted = np.zeros(C.shape[0], dtype=bool)

    def refute(broken: np.ndarray) -> None:  # forms a solution breaks (a bool per form)
        refuted[broken] = True
        alive[broken] = False
        if groups is not None and broken.any():
            alive[np.isin(groups, np.unique(groups[broken]))] = False

    for x in pool or []:
        refute(C @ x[:n_vars] != m)
    t0 = time.perf_counter()
    proofs = 0
    cap = relax_after  # the search's time before the relaxation's turn, doubled at each turn
    examined = np.zeros(C.shape[0], dtype=bool)  # forms the relaxation has had its turn on

    def relax(forms: np.ndarray, budget: float | None) -> int:  # its turn: how many it looked at
        settled, found, looked = base.relaxation.settled(C[forms], m[forms], budget)
        examined[forms[:looked]] = True
        verified[forms[settled]] = True
        alive[forms[settled]] = False
        for x in found:  # integer solutions that break forms: refuted as by the search
            refute(C @ x[:n_vars] != m)
            if pool is not None:
                pool.append(x)
        return looked

    rng = np.random.default_rng(0)  # the same draws on every run: the same searches

    def directed() -> None:
        # vertices of the relaxation under random weights of the open forms: each pushes many
        # of them off their values at once, where a search's solution breaks a few (a 20,000-
        # person tract: 2-11 of 7,300 forms a search, 1.1 s each); kept when integer
        misses = 0
        while misses < DIRECTED_MISSES and alive.any():
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                return
            idx = np.flatnonzero(alive)
            x = base.relaxation.vertex(C[idx].T @ rng.standard_normal(idx.size), maximize=True)
            if x is None:  # fractional: no population
                misses += 1
                continue
            broken = C @ x[:n_vars] != m
            if not (broken & alive).any():
                misses += 1
                continue
            refute(broken)
            if pool is not None:
                pool.append(x)

    while alive.any():
        left = None if seconds is None else seconds - (time.perf_counter() - t0)
        if (left is not None and left <= 0) or (max_rounds is not None and proofs >= max_rounds):
            return FormProof(verified, proofs, False, refuted)
        idx = np.flatnonzero(alive)
        Ci, mi = C[idx], m[idx]
        turn = idx[~examined[idx]]  # what the relaxation may still settle
        capped = cap is not None and turn.size > 0
        limit = left if cap is None or not capped else cap if left is None else min(left, cap)
        if not capped or cap:  # a search (relax_after 0: the relaxation goes first)
            sol = base.solve_some_differs(Ci, mi, limit)
            proofs += 1
            if sol.status == SolveStatus.INFEASIBLE:
                verified[idx] = True
                break
            if sol.has_solution and sol.x is not None:
                broken = Ci @ sol.x[:n_vars] != mi
                if not broken.any():
                    raise TabreconError("a solution found to break some claim breaks none")
                if pool is not None:
                    pool.append(sol.x)
                hit = np.zeros(C.shape[0], dtype=bool)
                hit[idx[broken]] = True
                refute(hit)
                directed()
                continue
            if not capped:
                return FormProof(verified, proofs, False, refuted)  # time-out: rest unverified
        # the search is slow here: the relaxation settles what it can in as long as the search
        # had, then the search twice as long, and so on (so neither, where it is the slow one,
        # costs more than a few times what the other takes); where what the relaxation has
        # left would take it under RELAX_FINISH turns at the pace it went, it finishes
        assert cap is not None
        began = time.perf_counter()
        looked = relax(turn, limit if cap else left)
        rest = turn[looked:][alive[turn[looked:]]]
        pace = (time.perf_counter() - began) / max(looked, 1)
        if cap and rest.size and pace * rest.size <= RELAX_FINISH * cap:
            relax(rest, None if seconds is None else seconds - (time.perf_counter() - t0))
        cap *= 2
    return FormProof(verified, proofs, True, refuted)
