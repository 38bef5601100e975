"""The project's habits, checked by the test command itself: lint, format, types, the
documentation site, the generated command reference, and the README's Python chain."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: run `bash scripts/setup-tests.sh` first")


def test_ruff_check_and_format_are_clean():
    _need("ruff")
    lint = _run(sys.executable, "-m", "ruff", "check", "src", "tests", "benchmarks", "scripts")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run(
        sys.executable, "-m", "ruff", "format", "--check", "src", "tests", "benchmarks", "scripts"
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    skips = [
        p
        for p in ROOT.glob("src/**/*.py")
        if "fmt: skip" in p.read_text() or "fmt: off" in p.read_text()
    ]
    assert not skips, f"formatting switched off in {skips}"


def test_mypy_passes_on_the_package():
    _need("mypy")
    r = _run(sys.executable, "-m", "mypy")
    assert r.returncode == 0, r.stdout + r.stderr


def test_documentation_site_builds_strictly(tmp_path):
    _need("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("evaluate_defense", "Defense", "reconstruct", "certify", "agree", "PrivacyCost"):
        assert name in api


def test_command_reference_is_current():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_commands_doc
    finally:
        sys.path.pop(0)
    page = (ROOT / "docs" / "commands.md").read_text()
    assert page == gen_commands_doc.render(), "run: python scripts/gen_commands_doc.py"
    from tabrecon.cli.app import app

    for c in app.registered_commands:
        assert f"`tabrecon {c.name or c.callback.__name__.replace('_', '-')}`" in page


def test_every_help_text_shows_as_written():
    """Rich renders help as markup with emoji codes: ``round:B:random`` printed as
    ``round🅱random`` and ``[word]`` vanished. Every command's and option's help, rendered as the
    terminal renders it, keeps every character but the markup written on purpose."""
    import inspect
    import typing

    from rich.text import Text

    from tabrecon.cli.app import app

    def commands(a, prefix=""):
        for c in a.registered_commands:
            yield prefix + (c.name or c.callback.__name__), c.callback
        for g in a.registered_groups:
            yield from commands(g.typer_instance, f"{prefix}{g.name} ")

    seen = 0
    for name, fn in commands(app):
        hints = typing.get_type_hints(fn, include_extras=True)
        texts = [inspect.getdoc(fn) or ""]
        for p in inspect.signature(fn).parameters:
            info = next(iter(getattr(hints.get(p), "__metadata__", ())), None)
            texts.append(getattr(info, "help", None) or "")
        for text in texts:
            written = re.sub(r"\[/?i\]", "", text).replace("\\[", "[")
            assert Text.from_markup(text).plain == written, f"{name}: {text[:60]}"
            seen += 1
    assert seen > 100


def test_readme_python_chain_runs():
    """The README's Python example (>>> lines) runs as a doctest: it cannot go stale."""
    text = (ROOT / "README.md").read_text()
    chain = [ln for ln in text.splitlines() if ln.startswith(">>> ")]
    assert 0 < len(chain) <= 10, "the README shows the whole chain in Python in at most 10 lines"
    res = doctest.testfile(
        str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert res.attempted >= len(chain) and res.failed == 0


def test_every_installed_optional_extra_imports():
    """An extra that is installed must import (a wheel that installs but cannot load, such as a
    libhighs clash, fails here rather than in a user's run)."""
    import importlib
    import importlib.metadata as md
    import re
    import tomllib

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    modules = md.packages_distributions()  # import name -> distributions providing it
    tried = []
    for extra, reqs in extras.items():
        for req in reqs:
            dist = re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0]
            try:
                md.distribution(dist)
            except md.PackageNotFoundError:
                continue  # not installed here: nothing to check
            norm = dist.lower().replace("-", "_")
            for mod, dists in modules.items():
                if any(d.lower().replace("-", "_") == norm for d in dists) and mod.isidentifier():
                    if mod.startswith("_"):
                        continue
                    importlib.import_module(mod)
                    tried.append(f"{extra}:{mod}")
    assert any(t.startswith("test:") for t in tried), tried


def test_the_readme_is_a_guide_not_a_diary():
    """Issue 91: the README is at most 15,000 bytes and carries no date nor commit hash (measured
    figures live in docs/figures.md with theirs, changes in CHANGELOG.md); it keeps the two
    set-up commands, the second being what .ci/run runs."""
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 15_000, len(text.encode())
    dated = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
    hashed = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
    found = [ln for ln in text.splitlines() if dated.search(ln) or hashed.search(ln)]
    assert not found, found
    demo, tests = (
        "pip install -e . && tabrecon demo",
        "bash scripts/setup-tests.sh && python -m pytest",
    )
    assert f"```bash\n{demo}\n```" in text and f"```bash\n{tests}\n```" in text
    assert (ROOT / ".ci" / "run").read_text().strip().endswith(tests)
