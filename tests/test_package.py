"""tabrecon as users install it: the wheel and the sdist built from the sources carry every data
file, and the wheel installed in a fresh environment outside the source tree runs
``tabrecon --version`` and ``tabrecon demo``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import tabrecon

ROOT = Path(__file__).resolve().parents[1]
DATA = sorted(
    p.relative_to(ROOT / "src").as_posix()
    for p in (ROOT / "src" / "tabrecon").rglob("*")
    if p.is_file() and (p.name == "py.typed" or "data" in p.relative_to(ROOT / "src").parts)
)


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """``args`` run as in a fresh shell: no PYTHONPATH (a suite run from a worktree sets one,
    which would put the sources before the installed wheel)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The wheel and the sdist, built offline (``--no-isolation``: the test extra installs the
    build backend) from a copy of the sources, so that nothing is written into the tree."""
    pytest.importorskip("build", reason="the test extra installs build")
    tmp = tmp_path_factory.mktemp("package")
    src = tmp / "src-copy"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    out = tmp / "dist"
    r = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), "."], src)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_wheel_and_the_sdist_carry_every_data_file(dist):
    assert DATA and "tabrecon/data/dhc_2020_layout.csv.gz" in DATA
    (wheel,) = dist.glob("tabrecon-*.whl")
    (sdist,) = dist.glob("tabrecon-*.tar.gz")
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert not [f for f in DATA if f not in in_wheel], "data files missing from the wheel"
    with tarfile.open(sdist) as t:
        in_sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert not [f for f in DATA if f"src/{f}" not in in_sdist], "data files missing from the sdist"
    meta = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in in_wheel if n.endswith(".dist-info/METADATA")))
        .decode()
    )
    assert f"Version: {tabrecon.__version__}" in meta and "License-Expression: Apache-2.0" in meta
    assert "Requires-Python: >=3.11" in meta and "Provides-Extra: maps" in meta


@pytest.mark.slow
def test_the_installed_wheel_runs_outside_the_source_tree(dist, tmp_path):
    """A fresh environment (its dependencies those of this one: the test runs offline) with the
    wheel installed, run from a folder that is not the source tree: the package imported is the
    installed one, ``--version`` prints its version, and a small demo writes its report."""
    (wheel,) = dist.glob("tabrecon-*.whl")
    env = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", "--system-site-packages", str(env)], tmp_path)
    assert r.returncode == 0, r.stderr
    py, exe = env / "bin" / "python", env / "bin" / "tabrecon"
    r = _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run([str(py), "-c", "import tabrecon; print(tabrecon.__file__)"], tmp_path)
    assert r.returncode == 0 and str(env) in r.stdout, r.stdout + r.stderr
    r = _run([str(exe), "--version"], tmp_path)
    assert r.returncode == 0 and tabrecon.__version__ in r.stdout, r.stdout + r.stderr
    r = _run([str(exe), "demo", "--persons", "600", "-o", "demo", "--quiet"], tmp_path, 900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "demo" / "report.html").stat().st_size > 10_000
