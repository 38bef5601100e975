"""The package's shape: imports run one way (no cycle, no private name across modules), no
module is over 800 lines, and the public Python API is what the README shows."""

from __future__ import annotations

import ast
from pathlib import Path

import tabrecon

SRC = Path(tabrecon.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, list[tuple[str, list[str], int]]]:
    """Per module: (imported tabrecon module, names taken from it, line) for every import,
    function-local ones included."""
    out: dict[str, list[tuple[str, list[str], int]]] = {}
    for path in SRC.rglob("*.py"):
        mod = _module_name(path)
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        edges: list[tuple[str, list[str], int]] = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.startswith("tabrecon"):
                    names = [a.name for a in node.names]
                    sub = [
                        f"{target}.{n}"
                        for n in names
                        if (SRC.parent / f"{target}.{n}".replace(".", "/")).exists()
                        or (SRC.parent / (f"{target}.{n}".replace(".", "/") + ".py")).exists()
                    ]
                    if sub:  # "from . import x" imports module x
                        edges += [(s, [], node.lineno) for s in sub]
                        names = [n for n in names if f"{target}.{n}" not in sub]
                    if names:
                        edges.append((target, names, node.lineno))
            elif isinstance(node, ast.Import):
                edges += [
                    (a.name, [], node.lineno) for a in node.names if a.name.startswith("tabrecon")
                ]
        out[mod] = edges
    return out


def test_no_private_name_crosses_a_module():
    bad = [
        f"{mod} line {line}: {name} from {target}"
        for mod, edges in _imports().items()
        for target, names, line in edges
        for name in names
        if name.startswith("_") and target != mod and not name.startswith("__")
    ]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_no_import_cycle():
    graph = {m: {t for t, _, _ in e if t != m} for m, e in _imports().items()}
    # a package's __init__ re-exports its modules; importing it is not a dependency back
    for m in graph:
        graph[m] = {t for t in graph[m] if t in graph and not (t == "tabrecon")}
    seen: dict[str, int] = {}
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        seen[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if seen.get(t) == 1:
                cycles.append(path[path.index(t) :] + [t])
            elif t not in seen:
                visit(t)
        path.pop()
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


#: the code written once over any schema: it may know a Schema, never a particular one (every
#: module of ``tabrecon.engine``, and these)
ENGINE = (
    "tabrecon.attacks.release",
    "tabrecon.attacks.claims.certified",
    "tabrecon.attacks.claims.block",
    "tabrecon.attacks.claims.tract",
    "tabrecon.attacks.claims.release",
    "tabrecon.audit.units",
    "tabrecon.tables.spec",
    "tabrecon.tables.layout",
    "tabrecon.schema.spec",
    "tabrecon.schema.registry",
)
#: the modules that declare one population (persons, housing units, group quarters, ...)
SCHEMA_SPECIFIC = (
    "tabrecon.populations.",
    "tabrecon.schema.catalog",
    "tabrecon.records.households",
    "tabrecon.tables.persons",
    "tabrecon.tables.published",
    "tabrecon.records.synth",
)


def test_the_engine_imports_no_schema_specific_module():
    imports = _imports()
    engine = [m for m in imports if m == "tabrecon.engine" or m.startswith("tabrecon.engine.")]
    assert len(engine) >= 4, engine
    bad = [
        f"{mod}:{line} imports {target}"
        for mod in (*engine, *ENGINE)
        for target, _, line in imports[mod]
        if target == "tabrecon.schema"  # the person schema's module
        or any(target == s or target.startswith(s) for s in SCHEMA_SPECIFIC)
    ]
    assert not bad, "the engine depends on a particular schema:\n" + "\n".join(bad)


def test_every_population_is_one_module_found_by_the_registry():
    from tabrecon.populations import available
    from tabrecon.schema.registry import names

    listed = set(names())
    assert listed <= set(available()), "a listed population is not named after its module"
    assert {"persons", "households", "group_quarters"} <= listed


#: The layers, lowest first: a module imports from its own layer and those below, never above.
#: Peers share a rank (attacks and defenses; metrics and lab).
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "vocab",
        "geo",
        "io",
        "provenance",
        "runner",
        "interrupts",
        "first_interrupt",
        "worker_boot",
        "shapes",
        "cache",
    ),
    ("schema",),
    ("records",),
    ("tables",),
    ("engine",),
    ("attacks", "defenses"),
    ("populations",),
    ("metrics", "lab"),
    ("audit",),
    ("report",),
    ("cli", "entry"),
)
#: Imports that go up a layer, each inside the function that needs it, and why. A new one fails
#: the test below: put the code where its layer is, or add it here with its reason.
UPWARD = {
    # the worker boot registers the parent's declared populations (a declaration is read by the
    # tables layer and registered in the schema registry)
    ("tabrecon.interrupts", "tabrecon.schema.registry"),
    ("tabrecon.interrupts", "tabrecon.tables.declaration"),
    # a cell looked up by id among every registered population's tables (the registry imports
    # the population modules on first use)
    ("tabrecon.tables.spec", "tabrecon.populations"),
    # the audit writes its report at the end of the run
    ("tabrecon.audit.run", "tabrecon.report.html"),
    ("tabrecon.audit.run", "tabrecon.report.maps"),
}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the package itself (its lazy public names)
    for rank, names in enumerate(LAYERS):
        if parts[1] in names:
            return rank
    raise AssertionError(f"{module}: in no layer of LAYERS")


def test_imports_run_down_the_layers():
    """records/schema -> tables -> engine -> attacks/defenses -> populations -> metrics -> audit
    -> report -> cli: no import goes up, but the few listed in UPWARD (with their reasons)."""
    up = set()
    for mod, edges in _imports().items():
        here = _layer(mod)
        for target, _, _line in edges:
            there = _layer(target)
            if here is not None and there is not None and there > here:
                up.add((mod, target))
    assert not (up - UPWARD), "imports that go up a layer:\n" + "\n".join(
        f"{a} -> {b}" for a, b in sorted(up - UPWARD)
    )
    assert not (UPWARD - up), f"listed in UPWARD but no longer imported: {sorted(UPWARD - up)}"


def test_closed_vocabularies_are_compared_by_member_not_by_text():
    """Levels and statuses are enums in ``tabrecon.vocab`` (issue 36 item 4): a comparison of a
    level, a unit's status or a solver status with a bare string ("block", "ok", "infeasible")
    is a word the type checker cannot see misspelt, and is refused here. Polars expressions over a
    table's column (``pl.col("status") == ...``) count too."""
    from tabrecon import vocab

    words = {
        m.value for e in (vocab.Geo, vocab.Level, vocab.UnitStatus, vocab.SolveStatus) for m in e
    }
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "vocab.py":
            continue
        for tree_node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(tree_node, ast.Compare):
                continue
            for op, right in zip(tree_node.ops, tree_node.comparators, strict=True):
                consts = (
                    [right]
                    if isinstance(right, ast.Constant)
                    else list(right.elts)
                    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple)
                    else []
                )
                for c in consts:
                    if isinstance(c, ast.Constant) and c.value in words:
                        found.append(f"{path.relative_to(SRC)}:{tree_node.lineno} {c.value!r}")
    assert not found, found


def test_every_run_over_units_takes_one_run_options_value():
    """How units of work run (workers, where results go, resume, progress) is one value,
    :class:`tabrecon.runner.RunOptions`, not four keywords repeated at every runner: a function
    that hands units to :func:`~tabrecon.runner.run_units` takes ``run`` and none of them (they
    had drifted: ``out`` a file at one runner and a folder at another, ``progress`` typed at
    some)."""
    loose = {"workers", "out", "resume", "progress"}
    runners, bad = [], []
    for path in SRC.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef) or path.name == "runner.py":
                continue
            calls = {
                c.func.id
                for c in ast.walk(fn)
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            if "run_units" not in calls:
                continue
            args = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
            runners.append(fn.name)
            if "run" not in args or args & loose:
                bad.append(f"{_module_name(path)}.{fn.name}: {sorted(args & (loose | {'run'}))}")
    assert len(runners) >= 4, runners  # reconstruct, claims (two), together
    assert not bad, bad


#: The longest a module of the package may be (issue 36: "modules over 800 lines split"): one job
#: a module, and a reader who can hold it.
MAX_MODULE_LINES = 800


def test_no_module_is_over_800_lines():
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines, to be split by job: {long}"


def test_modules_are_named_for_what_they_do():
    """No module is named ``unit_*`` ("unit" came to mean any population: the claims modules
    are named by algorithm, :mod:`tabrecon.attacks.claims`), and no two classes share a name
    in the package (two run classes named alike had different columns)."""
    unit = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("unit_*.py"))
    assert not unit, f"modules named unit_*: {unit}"
    where: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(_module_name(path))
    twice = {c: m for c, m in where.items() if len(m) > 1}
    assert not twice, f"public classes named alike in different modules: {twice}"


# -- sizes (issue 88 item 5): each rule holds for new code; what broke it when the rule came in is
# listed with its size then, and may only shrink (a split function leaves the list)

#: The longest a function may be (the brief: "functions short, <= 120 lines").
MAX_FUNCTION_LINES = 120

#: functions over MAX_FUNCTION_LINES when the rule came in, with their lengths then
LONG_FUNCTIONS = {
    "tabrecon.attacks.claims.certified:tract_claims": 156,
    "tabrecon.attacks.reidentify:truth_side": 140,
    "tabrecon.attacks.reidentify:reidentify": 143,
    "tabrecon.attacks.claims.tract:tract_verdicts": 147,
    "tabrecon.audit.run:audit": 327,
    "tabrecon.cli.commands.claims:claims": 215,
    "tabrecon.cli.commands.defend:frontier": 199,
    "tabrecon.engine.proofs:prove_forms": 141,
    "tabrecon.engine.reconstruct:reconstruct_units": 320,
    "tabrecon.records.households:synthesize_households": 150,
    "tabrecon.report.html:write_audit_report": 246,
    "tabrecon.runner:run_units": 122,
    "tabrecon.tables.declaration:load_declaration": 207,
    "tabrecon.tables.download:download": 126,
    "tabrecon.tables.reader:_checked": 152,
    "tabrecon.tables.reader:_rows_of_wide": 157,
}


def _functions() -> dict[str, int]:
    """Every function and method of the package (``module:Class.name``) with its length in
    lines, decorators and docstring included."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, mod: str, prefix: str) -> None:
        for n in ast.iter_child_nodes(node):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                assert n.end_lineno is not None
                out[f"{mod}:{prefix}{n.name}"] = n.end_lineno - n.lineno + 1
                walk(n, mod, f"{prefix}{n.name}.")
            elif isinstance(n, ast.ClassDef):
                walk(n, mod, f"{prefix}{n.name}.")

    for path in SRC.rglob("*.py"):
        walk(ast.parse(path.read_text()), _module_name(path), "")
    return out


def test_no_function_is_over_120_lines():
    sizes = _functions()
    new = {f: n for f, n in sizes.items() if n > MAX_FUNCTION_LINES and f not in LONG_FUNCTIONS}
    grown = {
        f: (LONG_FUNCTIONS[f], sizes[f])
        for f in LONG_FUNCTIONS
        if sizes.get(f, 0) > LONG_FUNCTIONS[f]
    }
    shorter = {f: (n, sizes[f]) for f, n in LONG_FUNCTIONS.items() if 0 < sizes.get(f, 0) < n}
    gone = [f for f in LONG_FUNCTIONS if sizes.get(f, 0) <= MAX_FUNCTION_LINES]
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines, to be split: {new}"
    assert not grown, f"listed long functions grown (listed, now): {grown}"
    assert not gone, f"split below {MAX_FUNCTION_LINES} lines: take them off LONG_FUNCTIONS: {gone}"
    assert not shorter, f"shorter than listed (listed, now): lower LONG_FUNCTIONS: {shorter}"


#: calls to the package's own functions with more than MAX_POSITIONAL positional arguments when
#: the rule came in (the brief: "calls by keyword beyond 4 arguments"); the count may only fall
MAX_POSITIONAL = 4
POSITIONAL_CALLS_THEN = 203


def _own_names() -> set[str]:
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(n.name)
    return names


def _positional_calls() -> list[str]:
    """Calls of a function or class the package defines (by name) with more than
    MAX_POSITIONAL positional arguments (a starred argument is not counted)."""
    own, found = _own_names(), []
    for path in SRC.rglob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            args = [a for a in n.args if not isinstance(a, ast.Starred)]
            if name in own and len(args) > MAX_POSITIONAL:
                found.append(f"{_module_name(path)}:{n.lineno} {name}({len(args)} positional)")
    return found


def test_calls_beyond_four_arguments_go_by_keyword():
    found = _positional_calls()
    assert len(found) <= POSITIONAL_CALLS_THEN, (
        f"{len(found)} calls pass more than {MAX_POSITIONAL} positional arguments (at most "
        f"{POSITIONAL_CALLS_THEN}); pass the rest by keyword:\n" + "\n".join(found[-20:])
    )
    assert len(found) == POSITIONAL_CALLS_THEN, (
        f"fewer such calls ({len(found)}): lower POSITIONAL_CALLS_THEN to it"
    )


#: function-local imports of the package's own modules when the rule came in; each was a way
#: around an import cycle or start-up time; the count may only fall
LOCAL_IMPORTS_THEN = 249


def test_function_local_imports_do_not_grow():
    n = 0
    for path in SRC.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for m in ast.walk(fn):
                if isinstance(m, ast.ImportFrom) and (
                    m.level or (m.module or "").startswith("tabrecon")
                ):
                    n += 1
                elif isinstance(m, ast.Import) and any(
                    a.name.startswith("tabrecon") for a in m.names
                ):
                    n += 1
    assert n <= LOCAL_IMPORTS_THEN, (
        f"{n} function-local imports of tabrecon (at most {LOCAL_IMPORTS_THEN})"
    )
    assert n == LOCAL_IMPORTS_THEN, f"fewer local imports ({n}): lower LOCAL_IMPORTS_THEN to it"


#: the layers below the entry points (issue 88: "nothing below the entry points looks a
#: population up by name"): they are handed the population (its declaration) instead
BELOW_ENTRY = ("tables", "engine", "attacks", "metrics", "defenses", "audit", "report")
#: where a name a user gives is resolved: the registry and the declaration files' reader
RESOLVERS = {"tabrecon.tables.declaration"}
#: the registry's lookups by name
LOOKUPS = {"of_schema", "population", "population_of_cells", "names"}
#: lookups by name below the entry points when the rule came in, per module; each may only fall
LOOKUPS_THEN: dict[str, int] = {
    "tabrecon.attacks.release": 1,  # the Python API's entry: the name a user passes
    "tabrecon.audit.run": 2,  # one the Python API's entry (audit(population=...))
    "tabrecon.report.claims": 1,  # the population a saved summary names (report from disk)
    "tabrecon.tables.download": 1,  # download(schema="persons"): the Python API's entry
    "tabrecon.tables.published": 1,  # read_tables(path): the Python API's person entry
    "tabrecon.tables.reader": 2,  # read_sf1(folder, "persons"); whose cells a refused file holds
    "tabrecon.tables.spec": 2,  # declare_tables' registration; tabulate(units): records' own
}


def _lookups() -> dict[str, int]:
    """Per module below the entry points: calls of the registry's lookups by name
    (``of_schema(schema)``, ``population("households")``, ``registry.names()``), under any
    name they are imported as (``population as registered``)."""
    found: dict[str, int] = {}
    for path in SRC.rglob("*.py"):
        mod = _module_name(path)
        if mod.count(".") < 1 or mod.split(".")[1] not in BELOW_ENTRY or mod in RESOLVERS:
            continue
        tree = ast.parse(path.read_text())
        called = set(LOOKUPS) | {
            a.asname
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            and (n.module or "").rsplit(".", 1)[-1] in ("registry", "declaration")
            for a in n.names
            if a.name in LOOKUPS and a.asname
        }
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                f = n.func
                name = (
                    f.id
                    if isinstance(f, ast.Name)
                    else f.attr
                    if isinstance(f, ast.Attribute)
                    else ""
                )
                if name in called:
                    found[mod] = found.get(mod, 0) + 1
    return found


def test_populations_are_handed_down_not_looked_up_by_name():
    """Below the entry points a population is a value passed down, not a name each layer
    resolves again: the lookups left from before the rule may only go."""
    found = _lookups()
    more = {m: (LOOKUPS_THEN.get(m, 0), n) for m, n in found.items() if n > LOOKUPS_THEN.get(m, 0)}
    fewer = {m: (n, found.get(m, 0)) for m, n in LOOKUPS_THEN.items() if found.get(m, 0) < n}
    assert not more, f"lookups of a population by name (allowed, found): {more}"
    assert not fewer, f"fewer lookups than listed (listed, found): lower LOOKUPS_THEN: {fewer}"
