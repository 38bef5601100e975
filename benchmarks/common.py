"""Helpers shared by the benchmarks: machine facts, peak memory, the real sample's location."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


def children_peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


class _Tee(io.TextIOBase):
    """Standard output that also keeps every line printed."""

    def __init__(self, out: io.TextIOBase) -> None:
        self.out, self.lines, self._part = out, [], ""

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
        "lines": [ln for ln in tee.lines + [tee._part] if ln.strip()],
    }
    if figures:  # the benchmark's own structured figures, beside the lines it printed
        doc["figures"] = figures
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"figures written to {path}")
