"""Helpers shared by the benchmarks: machine facts, peak memory, the real sample's location."""

from __future__ import annotations

import contextlib
import datetime
import functools
import io
import json
import os
import platform
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "census2010_rhdf_28tracts.csv.gz"
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}"


def peak_rss_mib() -> float:
    """Peak resident memory of this process (and of waited-for children, reported separately)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class TreeSampler(threading.Thread):
    """Peak resident memory (MiB) of a process tree plus extra processes (Dask workers), sampled
    every ``interval`` seconds: the whole tree, the root process, and the largest other process.

    getrusage(RUSAGE_CHILDREN) cannot stand in for it: the pools' forkserver workers are the
    forkserver's children, never waited for by this process, so it printed a few MiB for workers
    that held hundreds."""

    def __init__(self, pid: int, extra: list[int] | None = None, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.extra, self.interval = pid, list(extra or []), interval
        self.peak_total = self.peak_main = self.peak_child = 0.0
        self.stop = False

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
            for e in self.extra:
                p = psutil.Process(e)
                procs += [p, *p.children(recursive=True)]
            rss = {}
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    rss[p.pid] = p.memory_info().rss / 2**20
        except psutil.Error:
            return
        self.peak_total = max(self.peak_total, sum(rss.values()))
        self.peak_main = max(self.peak_main, rss.get(self.pid, 0.0))
        others = [v for k, v in rss.items() if k != self.pid]
        self.peak_child = max(self.peak_child, max(others, default=0.0))

    def run(self) -> None:
        while not self.stop:
            self.sample()
            time.sleep(self.interval)


_SAMPLER: TreeSampler | None = None


def worker_peak_rss_mib() -> float:
    """Peak resident memory (MiB) of the largest process below this one (a pool worker, the
    forkserver) since :func:`record` started the benchmark; NaN outside :func:`record`."""
    if _SAMPLER is None:
        return float("nan")
    _SAMPLER.sample()
    return _SAMPLER.peak_child


class _Tee(io.TextIOBase):
    """Standard output that also keeps every line printed."""

    def __init__(self, out: io.TextIOBase) -> None:
        self.out, self._part = out, ""
        self.lines: list[str] = []

    def write(self, s: str) -> int:
        self.out.write(s)
        self._part += s
        *done, self._part = self._part.split("\n")
        self.lines += done
        return len(s)

    def flush(self) -> None:
        self.out.flush()


def record(name: str, main: Callable[[], dict | None]) -> None:
    """Run a benchmark's ``main`` and write what it printed -- its figures and ratios, measured
    side by side in this one run -- to ``benchmarks/results/<name>.json`` with the machine, the
    command, the date and the wall time, beside printing them; a dict ``main`` returns is kept
    as ``figures``."""
    global _SAMPLER
    _SAMPLER = TreeSampler(os.getpid())
    _SAMPLER.start()
    tee = _Tee(sys.stdout)  # type: ignore[arg-type]
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(tee):
        figures = main()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    doc = {
        "benchmark": name,
        "command": "python -m benchmarks.bench_" + name + " " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "started_utc": started,
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "peak_rss_tree_mib": round(_SAMPLER.peak_total, 1),
        "lines": [ln for ln in tee.lines + [tee._part] if ln.strip()],
    }
    if figures:  # the benchmark's own structured figures, beside the lines it printed
        doc["figures"] = figures
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"figures written to {path}")


def real_sample_tracts(n: int):
    """The real sample's persons in its first ``n`` tracts (by geoid), or None when the file is
    not beside the project (the benchmark then says it skipped)."""
    import numpy as np

    from tabrecon.schema import read_microdata

    if not REAL.exists():
        print(f"skipped: the real sample is not at {REAL}")
        return None
    md = read_microdata(REAL)
    tracts = sorted({g[:11] for g in md.geoids.tolist()})[:n]
    return md.take(np.isin(np.array([g[:11] for g in md.block_geoid.tolist()]), tracts))


def synthetic_and_real(
    doc: str, side_by_side: Callable[..., dict], persons: int, person_model: str | None = None
) -> dict:
    """A side-by-side benchmark's command line: ``side_by_side(microdata, rounds, label)`` on a
    synthetic county (``--synthetic N``, ``--seed``; 0: none) and, with ``--real``, on the real
    sample's 28 tracts; ``--rounds`` pairs of runs, alternating. With ``person_model`` (a git
    ref: the default of ``--person-model``) the ref given is passed as ``ref=``: the commit
    whose code the other side runs (:func:`worktree_of`)."""
    import argparse

    from tabrecon.records.synth import SynthConfig, synthesize

    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--synthetic", type=int, default=persons, help="synthetic persons (0: none)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2, help="pairs of runs, alternating")
    ap.add_argument("--real", action="store_true", help="the real sample (28 tracts) too")
    if person_model is not None:
        ap.add_argument(
            "--person-model", default=person_model, help="git ref of the code compared against"
        )
    args = ap.parse_args()
    if person_model is not None:
        side_by_side = functools.partial(side_by_side, ref=args.person_model)
    out = {}
    if args.synthetic:
        md = synthesize(SynthConfig(persons=args.synthetic), seed=args.seed)
        out["synthetic"] = side_by_side(md, args.rounds, "synthetic")
    if args.real and (md := real_sample_tracts(28)) is not None:
        out["real"] = side_by_side(md, args.rounds, "real sample")
    return out


@contextlib.contextmanager
def worktree_of(ref: str, flag: str = "--baseline"):
    """The code of git ``ref`` checked out in a temporary worktree (removed after): its ``src``
    folder, to run with ``PYTHONPATH`` pointing at it beside this code in one benchmark run.
    A ref that is no commit ends the run naming it (``flag``: the option that gave it)."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    sha = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if sha.returncode != 0:
        raise SystemExit(f"{flag} {ref!r}: not a commit of {root} ({sha.stderr.strip()})")
    tmp = Path(tempfile.mkdtemp(prefix="tabrecon-baseline-"))
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "--detach", "-q", str(tmp), sha.stdout.strip()],
        check=True,
    )
    try:
        print(f"{ref} ({sha.stdout.strip()[:10]}) from a temporary worktree")
        yield tmp / "src"
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tmp)])
