"""Running units of work (tracts): in parallel, each written as it finishes, resumable, never fatal.

A unit of work is a :class:`Task`: a picklable value (a frozen dataclass naming its inputs) whose
call runs the unit wherever the runner sends it. A unit's result is a status dict (with at least
``unit`` and ``status``: :class:`~tabrecon.vocab.UnitStatus`) and an optional table; a run
returns them as a :class:`Ran`. With
a parts folder, the table goes to ``<parts>/<unit>.<tag>.parquet`` (written to a temporary name and
renamed, so nothing half-written is ever read back) and the status, with the part's checksum, is
appended to ``<parts>/status.jsonl``. A rerun skips units whose status is ``ok`` and whose file
exists with the recorded checksum; a part damaged on disk is redone, never read, and the rerun says
so (:func:`notices`). A unit that raises is retried (``retries`` times), then recorded as
``error``, and the run goes on.

Where units run: in this process (``workers=1``), in a local process pool (``workers>1``), or on a
Dask cluster when a scheduler address is set with :func:`execution` (every run inside the ``with``
block, whatever step started it, sends its units there; a killed Dask worker's unit is rerun by
the scheduler).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import queue
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from . import provenance
from .errors import TabreconError
from .interrupts import (
    Interrupted,
    check,
    interrupted_within,
    keeps,
    process_pool,
    shielded,
    terminate_all_pools,
)
from .io import file_digest, remove_tree, write_parquet
from .provenance import check_or_record
from .vocab import UnitStatus

#: what a unit returns: its status (``unit``, ``status``, anything else to keep) and its table
Result = tuple[dict, pl.DataFrame | None]


class Task(Protocol):
    """One unit of work, typed: a picklable value (a frozen dataclass of the unit's inputs, or a
    ``functools.partial``) whose call runs the unit in this process, a pool worker or a Dask
    worker. Every attack and reconstruction over tracts or blocks is one such class and one
    :func:`run_units` call."""

    def __call__(self) -> Result: ...


class UnitsRun:
    """What every run over units shares (mixed into their result dataclasses): ``results``, each
    unit's status dict, and the units that raised."""

    results: list[dict]

    @property
    def failed(self) -> list[dict]:
        """The units whose run raised (recorded with their message; the others went on)."""
        return [r for r in self.results if r["status"] != UnitStatus.OK]


@dataclass(frozen=True)
class Ran(UnitsRun):
    """What :func:`run_units` returns: each unit's status dict in unit order (``results``) and
    the tables the units returned (``frames``, by unit).

    >>> r = Ran([{"unit": "a", "status": "ok", "blocks": [1, 2]}, {"unit": "b", "status": "error"}],
    ...         {"a": pl.DataFrame({"x": [1]})})
    >>> r.rows("blocks"), [f["unit"] for f in r.failed], r.tables(["a", "b"])[0].height
    ([1, 2], ['b'], 1)
    """

    results: list[dict]
    frames: dict[str, pl.DataFrame]

    def tables(self, units: Sequence[str]) -> list[pl.DataFrame]:
        """The tables of ``units`` that returned one, in that order."""
        return [self.frames[u] for u in units if u in self.frames]

    def rows(self, key: str) -> list:
        """The items each finished unit listed under ``key`` in its status, one list."""
        return [b for st in self.results if st["status"] == UnitStatus.OK for b in st[key]]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How a run's units of work are carried out, one value every runner takes
    (:func:`run_units` and the functions over tracts and blocks built on it): ``workers``
    processes (the Dask cluster of :func:`execution` instead, when one is set), each unit's
    result written under ``out`` as it finishes, a rerun resuming from them (``resume=False``
    starts over), and ``progress`` told of each unit as it finishes.

    >>> RunOptions(out="run").parts(), RunOptions(out="run").parts("claims.parts")
    (PosixPath('run.parts'), PosixPath('run/claims.parts'))
    >>> RunOptions(workers=0)
    Traceback (most recent call last):
    ...
    tabrecon.errors.TabreconError: workers must be >= 1 (got 0)
    """

    workers: int = 1
    out: str | Path | None = None
    resume: bool = True
    progress: Callable[[dict], None] | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise TabreconError(f"workers must be >= 1 (got {self.workers})")

    def parts(self, inside: str | None = None) -> Path | None:
        """Where the units' results go: ``<out>.parts`` beside a file ``out``, or the folder
        ``inside`` of a folder ``out``; None without ``out`` (nothing written, nothing
        resumed)."""
        if self.out is None:
            return None
        return Path(self.out) / inside if inside else Path(str(self.out) + ".parts")


_SCHEDULER: ContextVar[str] = ContextVar("tabrecon_scheduler", default="")
_RETRIES: ContextVar[int] = ContextVar("tabrecon_retries", default=0)
_CLIENTS: dict[str, Any] = {}
_NOTICE: ContextVar[Callable[[str], None] | None] = ContextVar("tabrecon_notice", default=None)


@contextmanager
def notices(say: Callable[[str], None]) -> Iterator[None]:
    """Within the block, every resumed run tells ``say`` what it kept from an earlier run and
    which damaged parts it redoes (the command line prints it)."""
    token = _NOTICE.set(say)
    try:
        yield
    finally:
        _NOTICE.reset(token)


@contextmanager
def execution(scheduler: str = "", retries: int = 0) -> Iterator[None]:
    """Within the block, units go to the Dask scheduler at ``scheduler`` (if given) and a failed
    unit is retried ``retries`` times before it is recorded as an error."""
    t1, t2 = _SCHEDULER.set(scheduler), _RETRIES.set(retries)
    try:
        yield
    finally:
        _SCHEDULER.reset(t1)
        _RETRIES.reset(t2)


def dask_client(address: str) -> Any:
    """A (cached) ``distributed.Client`` connected to ``address``; a clear error when it cannot
    be."""
    from .errors import TabreconError

    c = _CLIENTS.get(address)
    if c is not None and c.status == "running":
        return c
    try:
        from distributed import Client
    except ImportError as exc:
        if interrupted_within(exc):  # a Ctrl-C during the import, not a missing package
            raise KeyboardInterrupt from exc
        raise TabreconError(
            "a scheduler was given but dask.distributed is not installed: pip install -e '.[dask]'"
        ) from None
    try:
        c = Client(address, timeout="20s", set_as_default=False)
    except OSError as exc:
        raise TabreconError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    _CLIENTS[address] = c
    _warm(c)
    return c


#: what every unit of work imports (the count model, the solvers): a worker process takes about
#: 1.7 s to import them
WARM_MODULES = ("tabrecon.engine.release", "ortools.sat.python.cp_model_helper", "highspy")


def _warm_up(modules: tuple[str, ...]) -> None:
    for name in modules:
        importlib.import_module(name)


def _warm(client: Any) -> None:
    """Start every worker of the cluster importing what the units need as soon as the client
    connects (:data:`WARM_MODULES`, a task per worker, not waited for), so that the import runs
    while the client reads and tabulates instead of before each worker's first unit. A worker
    that cannot import them fails the units themselves with the message."""
    from distributed import fire_and_forget

    try:  # every worker: distributed 2025.4 and later list 5 unless asked for all
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # (older releases list all and take no n_workers)
        info = client.scheduler_info()
    for w in info["workers"]:
        fire_and_forget(client.submit(_warm_up, WARM_MODULES, workers=[w], pure=False))


def notice(text: str) -> None:
    """Tell the current :func:`notices` receiver (if any) what a resumed run reused or redid."""
    say = _NOTICE.get()
    if say is not None:
        say(text)


def _kept(parts: Path, tag: str, damaged: list[str] | None = None) -> dict[str, dict]:
    """The units a rerun would skip: status ``ok`` in ``status.jsonl`` and their file there with
    the checksum recorded beside the status (a unit whose file differs is added to
    ``damaged``)."""
    status_file = parts / "status.jsonl"
    done: dict[str, dict] = {}
    if not status_file.exists():
        return done
    for line in status_file.read_text(errors="replace").splitlines():
        try:
            st = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line from a killed run
        if not isinstance(st, dict) or st.get("tag") != tag or st.get("status") != UnitStatus.OK:
            continue
        part = parts / f"{st.get('unit')}.{tag}.parquet"
        if not part.exists():
            continue
        if "digest" in st and file_digest(part) != st["digest"]:
            if damaged is not None:
                damaged.append(str(st["unit"]))
            continue
        done[st["unit"]] = st
    return done


def _load_done(
    parts: Path, tag: str, units: Sequence[str]
) -> tuple[dict[str, dict], dict[str, pl.DataFrame]]:
    damaged: list[str] = []
    done = _kept(parts, tag, damaged)
    frames = {u: pl.read_parquet(parts / f"{u}.{tag}.parquet") for u in done}
    say = _NOTICE.get()
    kept = len(set(units) & set(done))
    if say is not None and (kept or damaged):
        text = f"{parts}: {kept} of {len(units)} units kept from an earlier run"
        if damaged:
            text += f"; {len(damaged)} damaged on disk (checksum differs) and redone: " + ", ".join(
                sorted(set(damaged))[:5]
            )
        say(text)
    return done, frames


_UNIT_CPU = [0.0]


def units_cpu() -> float:
    """CPU seconds that units have spent in other processes (pool or Dask workers) so far in
    this process: with this process's own CPU time, the core time of a run."""
    return _UNIT_CPU[0]


def tree_cpu() -> float:
    """CPU seconds (user + system) of this process plus what its units spent in worker processes
    (local pool or Dask): the core time of a run. Forkserver workers are not this process's
    children, so rusage alone never sees them."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime + units_cpu()


_UNIT_RSS = [0.0]


def units_peak_mib() -> float:
    """The largest peak resident set (MiB) of any process other than this one that has run a
    unit so far in this process (pool or Dask workers; 0 if none did). Forkserver workers are
    not this process's children, so ``RUSAGE_CHILDREN`` never sees them: each unit reports its
    process's peak with its result."""
    return _UNIT_RSS[0]


def _timed(parent: int, task: Task) -> tuple[Any, float, float]:
    """``task()``, the CPU seconds it took and its process's peak resident set (MiB) when
    run in a process other than ``parent`` (in ``parent`` itself they are already in its own
    figures)."""
    c0 = time.process_time()
    out = task()
    if os.getpid() == parent:
        return out, 0.0, 0.0
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    return out, time.process_time() - c0, peak


def _untimed(res: tuple[Any, float, float]) -> Any:
    out, cpu, peak = res
    _UNIT_CPU[0] += cpu
    _UNIT_RSS[0] = max(_UNIT_RSS[0], peak)
    return out


def _isolated(timed: Callable[[Task], Any], task: Task) -> Any:
    with process_pool(1) as ex:
        return ex.submit(timed, task).result()


def _execute(
    pending: list[str],
    task: Callable[[str], Task],
    scheduler: str,
    workers: int,
    isolate: bool,
    meanwhile: Callable[[], None] | None = None,
) -> Generator[tuple[str, Any, BaseException | None], None, None]:
    """Run the pending units where configured; yield (unit, result or None, exception or None).
    ``meanwhile`` runs here once the units are handed out (before them when they run here).

    When the consumer stops early (an interrupt), queued units are cancelled and running ones
    stopped: Dask futures cancelled, worker processes terminated."""
    # elsewhere than in this process each unit reports its CPU time with its result
    timed: Callable[[Task], tuple[Any, float, float]] = functools.partial(_timed, os.getpid())
    if scheduler:
        from distributed import as_completed as dask_completed

        client = dask_client(scheduler)
        dfuts = {client.submit(timed, task(u), pure=False): u for u in pending}
        try:
            if meanwhile is not None:
                meanwhile()
            for f in dask_completed(list(dfuts), loop=client.loop):
                check()
                try:
                    res = _untimed(f.result())
                except Exception as exc:  # a unit that raised, or whose workers kept dying
                    yield dfuts[f], None, exc
                else:
                    yield dfuts[f], res, None
        except BaseException:
            client.cancel(list(dfuts), force=True)
            raise
    elif isolate:
        threads = ThreadPoolExecutor(max_workers=workers)
        try:
            futs = {threads.submit(_isolated, timed, task(u)): u for u in pending}
            if meanwhile is not None:
                meanwhile()
            yield from _completed(futs)
        except BaseException:
            threads.shutdown(wait=False, cancel_futures=True)
            with shielded():
                terminate_all_pools()  # the running units' own pools; their threads then end
            raise
        threads.shutdown(wait=True)
    elif workers > 1 and len(pending) > 1:
        with process_pool(workers) as ex:
            futs = {ex.submit(timed, task(u)): u for u in pending}
            if meanwhile is not None:
                meanwhile()
            yield from _completed(futs)
    else:
        if meanwhile is not None:
            meanwhile()
        for u in pending:
            check()
            try:
                res = task(u)()
            except Exception as exc:
                if interrupted_within(exc):  # a Ctrl-C inside a lazy import of the unit's
                    raise KeyboardInterrupt from exc
                yield u, None, exc
            else:
                yield u, res, None


def _completed(
    futs: dict[Future, str], every: float = 0.2
) -> Iterator[tuple[str, Any, BaseException | None]]:
    # each future puts itself in a queue when it is done, read with a timeout: between reads the
    # runner checks for an interrupt Python swallowed (interrupts.check), which would otherwise
    # go unseen until the whole run had ended (seen once in 20 loaded runs: exit 0 after a
    # Ctrl-C). A read costs the same whatever the number of units (wait() on the pending set
    # took 6.4 ms for the 10M state's 2,288 tracts, every slice: 3% of a core), and no
    # generator of concurrent.futures is left to the garbage collector (as_completed's, closed
    # late, printed "Exception ignored in: <generator object as_completed>" on a second Ctrl-C)
    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    for f in futs:
        f.add_done_callback(finished.put)
    for _ in range(len(futs)):
        while True:
            try:
                f = finished.get(timeout=every)
                break
            except queue.Empty:
                check()
        check()
        try:
            res = _untimed(f.result())
        except Exception as exc:  # a unit that raised, or a worker process that died
            # without its traceback: through this frame it holds the futures (one of them
            # holding it), a cycle that kept a broken pool's queues until exit, where the
            # resource tracker warned of "leaked semaphore objects"
            yield futs[f], None, exc.with_traceback(None)
        else:
            yield futs[f], res, None


def run_units(
    units: Sequence[str],
    task: Callable[[str], Task],
    *,
    tag: str,
    parts: Path | None = None,
    run: RunOptions | None = None,
    retries: int = 0,
    fingerprint: dict[str, Any] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> Ran:
    """Run ``task(unit)()`` for every unit; returns their statuses in unit order and their
    tables by unit (:class:`Ran`).
    ``task`` builds each unit's :class:`Task` when the unit is handed out (never for a unit an
    earlier run finished).

    ``meanwhile`` is called once, in this process, while the units run in worker processes or
    on the Dask cluster (after they are handed out; before them when they run in this process,
    and on its own when every unit was done before): the caller's own serial work, done while
    it would otherwise wait. An exception from it stops the units as an interrupt does.

    ``fingerprint`` names what the units' results depend on (input digests, options; see
    :mod:`tabrecon.provenance`): ``parts`` records it, and resuming from a ``parts`` folder made
    by a run with another fingerprint raises :class:`~tabrecon.provenance.StaleResumeError`.
    ``run`` (:class:`RunOptions`) says how many workers, whether to resume and whom to tell
    of each finished unit; ``parts`` is where this run writes (the caller's choice, most often
    :meth:`RunOptions.parts`), emptied first when ``run.resume`` is False. An interrupt
    (Ctrl-C, SIGTERM) stops the units that run, keeps the finished ones and raises
    :class:`~tabrecon.interrupts.Interrupted`.
    """
    run = run or RunOptions()
    resume, workers, progress = run.resume, run.workers, run.progress
    retries = max(retries, _RETRIES.get())
    scheduler = _SCHEDULER.get()
    done: dict[str, dict] = {}
    frames: dict[str, pl.DataFrame] = {}
    if parts is not None:
        if not resume and parts.exists():
            remove_tree(parts)
        record = parts / "run.json"
        fp = provenance.fingerprint(tag=tag, **(fingerprint or {}))
        check_or_record(record, fp, str(parts), outputs=(parts / "status.jsonl",))
        status_file = parts / "status.jsonl"
        if resume:
            done, frames = _load_done(parts, tag, units)
        if status_file.exists() and status_file.stat().st_size:
            with open(status_file, "rb+") as fh:  # a killed run may have left a torn last line
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
    results: dict[str, dict] = dict(done)
    todo = [u for u in units if u not in done]

    def finish(st: dict, df: pl.DataFrame | None) -> None:
        st = {**st, "tag": tag}
        results[st["unit"]] = st
        if df is not None:
            frames[st["unit"]] = df
        if parts is not None:
            if df is not None:
                part = write_parquet(df, parts / f"{st['unit']}.{tag}.parquet")
                st["digest"] = file_digest(part)
            with open(parts / "status.jsonl", "a") as fh:
                fh.write(json.dumps(st) + "\n")
        if progress is not None:
            progress(st)

    def failed(unit: str, exc: BaseException) -> dict:
        return {
            "unit": unit,
            "status": UnitStatus.ERROR.value,
            "message": f"{type(exc).__name__}: {exc}",
        }

    pending = list(todo)
    charged = dict.fromkeys(pending, 0)  # failures each unit is known to have caused
    isolate = False  # after a process pool broke: run each unit in a process of its own
    try:
        while pending:
            again: list[str] = []
            broke = False
            runs = _execute(pending, task, scheduler, workers, isolate, meanwhile)
            meanwhile = None  # (once: a retry's units run without it)
            try:
                for u, out, exc in runs:
                    if exc is None:
                        finish(*out)
                        continue
                    # a broken shared pool fails every unit in it; only an isolated run says whose
                    # fault it was
                    innocent = isinstance(exc, BrokenProcessPool) and not isolate and not scheduler
                    broke = broke or innocent
                    if not innocent:
                        charged[u] += 1
                    if innocent or charged[u] <= retries:
                        again.append(u)
                    else:
                        finish(failed(u, exc), None)
            finally:
                runs.close()  # on an interrupt: cancel what is queued, stop what runs
            isolate = isolate or broke
            pending = again
        if meanwhile is not None:  # nothing was left to run
            meanwhile()
    except KeyboardInterrupt:
        # what is kept is what a rerun will skip, read back from the folder: the interrupt can
        # land inside finish(), between a unit's result arriving and its status line being
        # written (seen: "3 of 26 kept" with 2 status lines), so the results in memory may be
        # one ahead of the disk
        # an impatient second Ctrl-C must not cut this short: the run is stopping either way, and
        # what it keeps is declared (keeps) so that a second interrupt landing anywhere on the way
        # out still says it, never "nothing was being kept" (seen under load, the second Ctrl-C
        # 0.1 s after the first)
        with shielded():
            if parts is not None:
                kept = len(set(units) & set(_kept(parts, tag)))
            else:
                kept = sum(1 for u in units if results.get(u, {}).get("status") == UnitStatus.OK)
            stopped = Interrupted(kept, len(units), str(parts) if parts is not None else "")
            keeps(lambda: stopped)
        raise stopped from None
    return Ran([results[u] for u in units if u in results], frames)
