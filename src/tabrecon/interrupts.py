"""Stopping promptly on Ctrl-C and SIGTERM, wherever tabrecon is waiting.

:func:`install` (called by the CLI) makes SIGINT and SIGTERM raise :class:`KeyboardInterrupt` in the
main thread. A solver call holds the main thread in C++ until its time limit (minutes), so Python
would only see the signal afterwards; a watcher thread, woken through :func:`signal.set_wakeup_fd`,
therefore stops every search registered with :func:`stoppable` at once, the solver returns and the
interrupt is raised right after it. Solvers never install their own SIGINT handler (CP-SAT's would
end the search quietly and hand back a truncated result as if it were a time-out).

Worker processes call :func:`worker_init`: they ignore SIGINT (a Ctrl-C in a terminal reaches the
whole process group; the parent decides) and die on SIGTERM, which is how the parent stops them.

:class:`Interrupted` is what an interrupted run raises once it has kept what finished; its message
says how much was kept and how to resume. The CLI prints it and exits 130.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from . import first_interrupt
from .first_interrupt import install_handler, interrupt_once


class Interrupted(BaseException):
    """A run stopped by Ctrl-C or SIGTERM after keeping its finished units (exit code 130).

    A BaseException, like KeyboardInterrupt, so that code which goes on after a failed unit
    (``except Exception``) does not go on after an interrupt."""

    def __init__(
        self,
        kept: int,
        total: int | None,
        where: str = "",
        what: str = "units",
        *,
        detail: str = "",
    ) -> None:
        self.kept, self.total, self.where, self.what = kept, total, where, what
        text = (
            f"interrupted: {kept} of {total} {what}"
            if total is not None
            else (f"interrupted: {kept} {what}")
        )
        text += " finished"
        text += f" and are kept in {where}" if where and kept else (" (none kept)" if where else "")
        super().__init__(text + detail)


def interrupted_within(exc: BaseException) -> bool:
    """Whether ``exc`` stands for an interrupt: a Ctrl-C that landed while a compiled extension
    was being imported comes back as that import's error (pybind11 modules such as OR-Tools and
    HiGHS raise ``ImportError: initialization failed`` from the KeyboardInterrupt), which is an
    interrupt, not a failed unit nor a bug.

    >>> try:
    ...     raise ImportError("initialization failed") from KeyboardInterrupt()
    ... except ImportError as e:
    ...     interrupted_within(e)
    True
    >>> interrupted_within(ValueError("bad cell"))
    False
    """
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, (KeyboardInterrupt, Interrupted)):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False


_KEEPER: ContextVar[Callable[[], Interrupted] | None] = ContextVar("tabrecon_keeper", default=None)


def keeps(report: Callable[[], Interrupted]) -> None:
    """Declare what the run in progress keeps if it is interrupted now: ``report`` reads it back
    from disk and says how much of how much (a sweep's rows, a download's tracts). The command
    line calls it when an interrupt arrives outside :func:`tabrecon.runner.run_units`."""
    _KEEPER.set(report)


def kept_now() -> Interrupted | None:
    """What the run in progress keeps (:func:`keeps`), read back from disk; None if nothing was
    declared."""
    report = _KEEPER.get()
    if report is None:
        return None
    try:
        return report()
    except Exception:  # the record is unreadable: say nothing rather than something wrong
        return None


_active: set[Any] = set()
_pools: set[ProcessPoolExecutor] = set()
_lock = threading.Lock()
_installed = False


@contextmanager
def stoppable(search: Any, stop: str = "stop_search") -> Iterator[None]:
    """While the block runs, an interrupt calls ``search.<stop>()`` from the watcher thread."""
    entry = (search, stop)
    with _lock:
        _active.add(entry)
    try:
        yield
    finally:
        with _lock:
            _active.discard(entry)
    check()  # a search the watcher stopped never hands back its truncated result as an answer


def check() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived that nothing has answered: Python swallows
    one raised in a weak-reference callback or a finaliser (:mod:`tabrecon.first_interrupt`), and
    the run must stop anyway. The runner calls it between units and while it waits for them;
    the loops that keep rows outside it (a dn or tradeoff sweep, a download) after each row."""
    if first_interrupt.unanswered() and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


def stop_all() -> None:
    """Stop every registered search (it then returns as soon as the solver notices)."""
    with _lock:
        entries = list(_active)
    for search, stop in entries:
        try:
            getattr(search, stop)()
        except Exception:  # a search that already ended
            pass


def _watch(fd: int) -> None:
    wanted = {int(signal.SIGINT), int(signal.SIGTERM)}
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        if wanted.intersection(data):
            stop_all()


def install() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt (the first of them; the later ones are
    ignored); running solver searches are stopped at once.

    Only from the main thread; a second call does nothing."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    install_handler()
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(r,), daemon=True, name="tabrecon-interrupts").start()
    _installed = True


def worker_init(parent: int | None = None, declared: tuple[str, ...] = ()) -> None:
    """In a worker process: leave interrupts to the parent, which terminates the worker; and end
    when ``parent`` (the process that made the pool) is gone. A parent killed with SIGKILL
    cannot terminate its workers, and a fork server's worker is not its child, so it would never
    see it go: the workers and the fork server were seen alive hours later. ``declared``: the
    declaration files the parent read (:mod:`tabrecon.tables.declaration`), registered here too,
    since a worker starts from a clean process."""
    if declared:
        from .tables.declaration import load_declaration

        for path in declared:
            load_declaration(path)
    if parent is not None:
        threading.Thread(target=_end_with, args=(parent,), daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread of the worker
        pass
    global _installed
    _installed = False


def _end_with(parent: int, every: float = 1.0) -> None:
    """End this process (at once, as SIGKILL would) once process ``parent`` no longer exists."""
    while True:
        time.sleep(every)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # it exists (another user's process cannot be the parent: rare)
            pass


def _context() -> multiprocessing.context.BaseContext:
    """Workers start from a clean process, never a fork of this one: a fork copies polars' (and
    OpenBLAS') thread pools with their locks held by threads that do not exist in the child, and
    the worker can hang for ever in its first query (seen: a claims worker stuck in a polars
    ``select`` after the parent had read and tabulated the real sample). forkserver forks each
    worker from a small server process that never ran any of that; spawn where it is missing.
    As with any non-fork start, a script that starts workers needs the usual
    ``if __name__ == "__main__":`` guard (the CLI has it)."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tabrecon.worker_boot"])  # quiet late workers of a dead pool
    return ctx


def _declared() -> tuple[str, ...]:
    """The declaration files this process read (none unless a command was given one)."""
    from .schema.registry import declarations

    return declarations()


@contextmanager
def process_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers leave interrupts to this process. Leaving the block normally
    waits for the workers; leaving it by an exception (an interrupt above all) terminates them at
    once instead of waiting for the units they are running."""
    ex = ProcessPoolExecutor(
        max_workers=workers,
        initializer=worker_init,
        initargs=(os.getpid(), _declared()),
        mp_context=_context(),
    )
    with _lock:
        _pools.add(ex)
    done = threading.Event()
    threading.Thread(
        target=_watch_pool, args=(ex, done), daemon=True, name="tabrecon-pool-watch"
    ).start()
    try:
        yield ex
    except BaseException:
        done.set()
        with shielded():  # a second Ctrl-C must not cut the clean-up short and leave workers
            terminate(ex)
        raise
    else:
        done.set()
        ex.shutdown(wait=True)
    finally:
        done.set()
        with _lock:
            _pools.discard(ex)


#: seconds a dead worker may go unnoticed by its pool before the pool is ended as broken
DEAD_WORKER_GRACE = 5.0


def _watch_pool(ex: ProcessPoolExecutor, done: threading.Event, every: float = 0.5) -> None:
    """End ``ex`` as broken when one of its workers died and the pool has not noticed.

    The pool notices a dead worker by itself unless the worker died while it was sending a
    result (the OOM killer, a SIGKILL): then the pool's manager thread reads the rest of that
    message for ever, the other workers wait for the result pipe's lock the dead one held, and
    every future waits too (seen once in the fault tests, both cores busy: gdb showed the manager
    in ``os.read`` of the result pipe). Ending the remaining workers and this process's write end
    of the pipe lets that read fail; the manager then fails every future with
    ``BrokenProcessPool``, which the runner reruns, each unit in a process of its own."""
    since: float | None = None
    while not done.wait(every):
        if getattr(ex, "_broken", False) or getattr(ex, "_shutdown_thread", False):
            return
        procs = list((getattr(ex, "_processes", None) or {}).values())
        if not any(p.exitcode not in (None, 0) for p in procs):
            since = None
            continue
        now = time.monotonic()
        since = now if since is None else since
        if now - since >= DEAD_WORKER_GRACE:
            _end_workers(procs, getattr(ex, "_result_queue", None))
            return


@contextmanager
def shielded() -> Iterator[None]:
    """Within the block (a few seconds of clean-up) SIGINT and SIGTERM do not interrupt; the
    first interrupt of the run, if it arrives then, is raised when the block ends normally (an
    exception leaving the block goes on instead, and the interrupt stays recorded for
    :func:`check`). Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        first_interrupt.record()
        held.append(signum)

    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {sig: signal.getsignal(sig) for sig in sigs}
    # the first interrupt is held, not dropped: a Ctrl-C that lands in a clean-up (a pool ended
    # after a unit's error) is the run's only one, and must still stop it
    first = all(old[sig] is interrupt_once for sig in sigs)
    for sig in sigs:
        signal.signal(sig, hold if first else signal.SIG_IGN)
    try:
        yield
    except BaseException:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        raise
    for sig, handler in old.items():
        signal.signal(sig, handler)
    if held:
        interrupt_once(held[0], None)


def terminate(ex: ProcessPoolExecutor) -> None:
    """Cancel a pool's queued work and end its worker processes now (SIGTERM, then SIGKILL)."""
    # concurrent.futures has no public handle on the processes before Python 3.14
    procs = list((getattr(ex, "_processes", None) or {}).values())
    results = getattr(ex, "_result_queue", None)  # shutdown forgets it
    manager = getattr(ex, "_executor_manager_thread", None)
    ex.shutdown(wait=False, cancel_futures=True)
    _end_workers(procs, results)
    # let the pool's manager thread see its dead workers and close its wake-up pipe now: if it is
    # still closing it when the interpreter exits, concurrent.futures' exit hook can write to the
    # pipe as it closes and print a traceback (a race in CPython's process pool)
    # an interrupt inside the pool's first submit can land after the manager thread is made and
    # before it has started (CPython starts it there): such a thread cannot be joined, and
    # trying raised RuntimeError in place of the interrupt (an interrupted audit then reported
    # 'every chunk failed', exit 2; seen in the suite with both cores busy)
    if manager is not None and manager is not threading.current_thread() and manager.is_alive():
        manager.join(timeout=5.0)
        # if it is still closing the pipe when the interpreter exits (a loaded machine: seen once
        # in CI), the exit hook's write to it fails with EBADF and prints a traceback; make that
        # one write quiet (the hook still joins the thread)
        import concurrent.futures.process as cfp

        wake = getattr(cfp, "_threads_wakeups", {}).get(manager)
        if wake is not None:
            wake.wakeup = _quiet(wake.wakeup)


def _end_workers(procs: list[Any], results: Any) -> None:
    """End a pool's worker processes ``procs`` (SIGTERM, then SIGKILL) and close this process's
    write end of the pool's result queue ``results``, so that a manager thread stuck reading a
    message a killed worker had begun to send sees end-of-file."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=2.0)
        if p.is_alive():
            p.kill()
            p.join(timeout=2.0)
    # A worker killed while it was sending a result leaves the pool's manager thread reading the
    # rest of that message for ever: this process holds a write end of the result pipe, so the
    # read never sees end-of-file, and the interpreter's exit joins that thread (seen: Ctrl-C
    # during a large tract's hand-over, the CLI never exited). This process never writes results;
    # closing its write end lets the read fail, and the manager ends the pool as broken.
    writer = getattr(results, "_writer", None)
    if writer is not None and not any(p.is_alive() for p in procs):
        try:
            writer.close()
        except OSError:
            pass


def _quiet(call):
    """``call`` with an OSError (a pipe closed under it) ignored."""

    def run() -> None:
        try:
            call()
        except OSError:
            pass

    return run


def terminate_all_pools() -> None:
    """End every live pool made by :func:`process_pool` (units isolated in pools of their own)."""
    with _lock:
        pools = list(_pools)
    for ex in pools:
        terminate(ex)
