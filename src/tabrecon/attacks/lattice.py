"""Lattice finder for exact linear decoding: which n-bit database x in {0,1}^n answers Q x = a?

Below about m = 0.5 n random subset-sum answers, least squares and LP decoding stop recovering the
database and CP-SAT's search for it becomes heavy-tailed (at n = 200, m = 80 it finds it in a
second on some instances and not in minutes on others), although the answers still determine it
(the information bound is about 2n / log2 n). This module finds it by bounded-distance decoding:

1. :func:`maxent_marginals` -- the maximum-entropy point p of the polytope {x in [0,1]^n : Q x = a}.
   Its coordinates are calibrated guesses of the bits (at n = 200, m = 80: 80% right, and a bit
   given probability 0.9 is 1 about 90% of the time). p = sigmoid(Q^T lambda), lambda minimising
   the convex dual  sum_j softplus(q_j . lambda) - a . lambda  (Newton with trust region, m x m
   Hessian).
2. :func:`lattice_find` -- the solutions of Q x = a in Z^n form a shifted lattice; the database is
   the point of it closest to p in the metric weighted by 1 / sqrt(p (1 - p)) (a confident guess
   costs more to contradict). That distance is well below the lattice's Gaussian heuristic (0.2-0.6
   of it at n = 200, m = 80, against 0.75 for the unweighted distance to the cube's centre), so
   Kannan's embedding puts the database on a short vector that LLL or BKZ (fpylll) exposes. Several
   weight clips are tried, each with block sizes growing up to a time budget.
3. The hybrid step (:func:`guesses`): where the gap is too small for BKZ <= 30 in the full dimension
   n - m + 1, fixing the k surest bits of p shrinks the lattice to n - k - m + 1; at n = 200, m = 80
   with the 40 surest bits fixed correctly, BKZ-20 finds the database in 1-2 s on every instance
   tried. The surest bits are not always right (0-2 wrong among the top 40), so guesses come
   likeliest first: the argmax for a few k, then one or two of the least sure bits flipped.

What this finds answers every query (it is checked); whether it is the only database that does is
for ``tabrecon.attacks.linear.prove_unique`` to show. fpylll is optional (extra ``lattice``);
without it :func:`available` is False and the exact decoder uses CP-SAT alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np

CLIPS = (0.05, 0.02, 0.15)  # floors on p (1 - p) in the weights, tried in this order
BLOCK_SIZES = (10, 20, 30)
_SCALE = 1000  # weights and shifts are rounded to integers at this scale
GUESS_DIMS = (80, 85, 90)  # lattice dimensions left after fixing the surest bits (hybrid step)
MIN_FIX = 5  # fewer bits to fix than this: the full lattice is small enough, no guessing
FULL_SHARE = 0.2  # of the time limit for the full lattice before guessing
PER_GUESS = 1.5  # seconds per guess


def import_error() -> str | None:
    """Why fpylll (the lattice reduction library) cannot be imported, or None when it can: the
    real error, e.g. a missing ``cysignals`` under an installed fpylll, not just "not installed"."""
    try:
        import fpylll  # noqa: F401
    except ImportError as exc:
        from ..interrupts import interrupted_within

        if interrupted_within(exc):  # a Ctrl-C during the import, not a broken install
            raise KeyboardInterrupt from exc
        return (
            f"fpylll cannot be imported ({type(exc).__name__}: {exc}); pip install -e '.[lattice]'"
        )
    return None


def available() -> bool:
    """Whether fpylll (the lattice reduction library) can be imported."""
    return import_error() is None


def maxent_marginals(Q: np.ndarray, a: np.ndarray, tol: float = 1e-7) -> np.ndarray | None:
    """The maximum-entropy point of {x in [0,1]^n : Q x = a}; None when no point of the box answers
    a.

    Each coordinate is the chance the bit is 1 under the most spread-out distribution on the box
    that reproduces the answers in expectation (a product of Bernoullis, the mean-field
    approximation).
    """
    from scipy.optimize import minimize
    from scipy.special import expit

    Q = np.asarray(Q, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)

    def fun(lam: np.ndarray) -> tuple[float, np.ndarray]:
        z = Q.T @ lam
        return float(np.logaddexp(0.0, z).sum() - a @ lam), Q @ expit(z) - a

    def hess(lam: np.ndarray) -> np.ndarray:
        p = expit(Q.T @ lam)
        return (Q * (p * (1.0 - p))) @ Q.T

    r = minimize(
        fun,
        np.zeros(Q.shape[0]),
        jac=True,
        hess=hess,
        method="trust-exact",
        options={"gtol": tol, "maxiter": 500},
    )
    p = expit(Q.T @ r.x)
    # the dual is unbounded when a lies outside Q [0,1]^n: the iterate runs off and p misses a
    if not np.all(np.isfinite(p)) or np.abs(Q @ p - a).max() > 1e-4 * max(1.0, np.abs(a).max()):
        return None
    return p


def _embedding(Q: np.ndarray, a: np.ndarray, p: np.ndarray, clip: float) -> tuple[np.ndarray, ...]:
    """Kannan's embedding of the weighted closest-point problem as integer basis rows.

    Row j < n is (S w_j e_j, 0, N q_j) and row n is (-S w p, S, -N a): the combination with
    coefficients (x, 1) is (S w (x - p), S, N (Q x - a)), short exactly when Q x = a and x is near
    p. N is large enough that no short vector has a nonzero last block.
    """
    m, n = Q.shape
    w = 1.0 / np.sqrt(np.clip(p * (1.0 - p), clip, None))
    sw = np.rint(_SCALE * w).astype(np.int64)
    off = np.rint(_SCALE * w * p).astype(np.int64)
    big = int(10 ** np.ceil(np.log10(_SCALE * float(sw.max()) * (n + 1) * 10)))
    B = np.zeros((n + 1, n + 1 + m), dtype=np.int64)
    B[np.arange(n), np.arange(n)] = sw
    B[:n, n + 1 :] = big * Q.T
    B[n, :n] = -off
    B[n, n] = _SCALE
    B[n, n + 1 :] = -big * a
    return B, sw, off


def _candidate(
    rows: np.ndarray, sw: np.ndarray, off: np.ndarray, Q: np.ndarray, a: np.ndarray
) -> np.ndarray | None:
    """A database among the reduced basis rows (embedding coordinate +-S, last block zero), if
    any."""
    n = sw.size
    ok = (np.abs(rows[:, n]) == _SCALE) & ~np.any(rows[:, n + 1 :], axis=1)
    for r in rows[ok]:
        v = np.sign(r[n]) * r[:n]
        num = v + off
        if np.any(num % sw):
            continue
        x = num // sw
        if np.all((x == 0) | (x == 1)) and np.array_equal(Q @ x, a):
            return x
    return None


def _rows(A) -> np.ndarray:
    """An fpylll IntegerMatrix as an int64 array (entries stay far below 2^63: at most `big` times
    small integers)."""
    return np.array([list(r) for r in A], dtype=np.int64)


def _strategies(bmax: int) -> list:
    """BKZ 2.0 strategies without fpylll's strategy file: linear pruning above block size 20."""
    from fpylll.fplll.bkz_param import Strategy
    from fpylll.fplll.pruner import PruningParams

    out = []
    for b in range(bmax + 1):
        if b <= 20:
            out.append(Strategy(b))
        else:
            out.append(
                Strategy(
                    b,
                    preprocessing_block_sizes=[min(20, b - 10)],
                    pruning_parameters=[PruningParams.LinearPruningParams(b, b // 2)],
                )
            )
    return out


def _reduce(
    Qi: np.ndarray,
    ai: np.ndarray,
    p: np.ndarray,
    deadline: float,
    clips: tuple[float, ...],
    block_sizes: tuple[int, ...],
) -> np.ndarray | None:
    """Search one embedding per weight clip: all LLL-reduced, then all BKZ-reduced at each block
    size in turn (cheap steps on every clip before dear ones), checking the bases after every step;
    None at ``deadline`` (checked between steps, so one step may overrun it)."""
    from fpylll import BKZ, LLL, IntegerMatrix
    from fpylll.algorithms.bkz2 import BKZReduction

    strat = _strategies(max(block_sizes, default=2))
    flags = BKZ.AUTO_ABORT | BKZ.MAX_LOOPS | BKZ.GH_BND
    runs = []
    for clip in clips:
        if time.perf_counter() > deadline:
            return None
        B, sw, off = _embedding(Qi, ai, p, clip)
        A = IntegerMatrix.from_matrix(B.tolist())
        LLL.reduction(A)
        x = _candidate(_rows(A), sw, off, Qi, ai)
        if x is not None:
            return x
        runs.append((A, BKZReduction(A), sw, off))
    for b in block_sizes:
        for A, bkz, sw, off in runs:
            if time.perf_counter() > deadline:
                return None
            bkz(BKZ.Param(block_size=b, strategies=strat, max_loops=4, flags=flags))
            x = _candidate(_rows(A), sw, off, Qi, ai)
            if x is not None:
                return x
    return None


def guesses(
    p: np.ndarray, m: int, dims: tuple[int, ...] = GUESS_DIMS
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Guesses of the surest bits, most likely first: (indices, values) pairs.

    Fixing k bits leaves a lattice of dimension about n - k - m, and BKZ-20 finds the database in
    one of dimension 80-90 in a second or two where it fails in the full one (n = 200, m = 80:
    121). For each dimension in ``dims`` the k surest bits of p are fixed to their likelier values;
    then the middle k again with one bit flipped, then with two, cheapest flips (least sure bits)
    first. Nothing when the full lattice is already small (k < ``MIN_FIX``).
    """
    n = p.size
    order = np.argsort(-np.abs(p - 0.5), kind="stable")
    g = (p > 0.5).astype(np.int64)
    ks = [n - m - d for d in dims if n - m - d >= MIN_FIX]
    for k in ks:
        yield order[:k], g[order[:k]]
    if not ks:
        return
    k = ks[len(ks) // 2]
    F = order[:k]
    pc = np.clip(p[F], 1e-12, 1 - 1e-12)
    cost = np.abs(np.log(pc) - np.log1p(-pc))  # log-odds against flipping each fixed bit
    flips: list[tuple[tuple[int, ...], float]] = [((j,), cost[j]) for j in range(k)]
    flips += [((i, j), cost[i] + cost[j]) for i in range(k) for j in range(i + 1, k)]
    flips.sort(key=lambda f: f[1])
    for idx, _ in flips:
        v = g[F].copy()
        v[list(idx)] ^= 1
        yield F, v


def lattice_find(
    Q: np.ndarray,
    a: np.ndarray,
    p: np.ndarray | None = None,
    time_limit: float = 30.0,
    clips: tuple[float, ...] = CLIPS,
    block_sizes: tuple[int, ...] = BLOCK_SIZES,
    guess: bool = True,
) -> np.ndarray | None:
    """A database x in {0,1}^n with Q x = a found by lattice reduction, or None.

    First the full lattice (:func:`_reduce`: every clip, block sizes up to 30), for a fifth of
    ``time_limit`` when guessing applies and all of it otherwise; then (``guess``) the hybrid step:
    for each guess of the surest bits from :func:`guesses`, the smaller lattice left after fixing
    them gets ``PER_GUESS`` seconds (one clip, BKZ-10 and 20, maxent recomputed given the guess). A
    wrong guess costs its time and no more: whatever is found is checked against every answer.
    """
    t0 = time.perf_counter()
    Qi = np.rint(Q).astype(np.int64)
    ai = np.rint(a).astype(np.int64)
    m, n = Qi.shape
    if p is None:
        p = maxent_marginals(Qi, ai)
        if p is None:
            return None
    plan = guesses(p, m) if guess else iter(())
    first = next(plan, None)
    share = FULL_SHARE if first is not None else 1.0
    x = _reduce(Qi, ai, p, t0 + share * time_limit, clips, block_sizes)
    if x is not None or first is None:
        return x
    deadline = t0 + time_limit
    for F, v in itertools.chain([first], plan):
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        free = np.setdiff1d(np.arange(n), F)
        rest = ai - Qi[:, F] @ v
        pr = maxent_marginals(Qi[:, free], rest)
        if pr is None:  # no point of the box agrees with this guess
            continue
        y = _reduce(
            Qi[:, free], rest, pr, time.perf_counter() + min(left, PER_GUESS), CLIPS[:1], (10, 20)
        )
        if y is not None:
            x = np.empty(n, dtype=np.int64)
            x[F], x[free] = v, y
            return x
    return None
