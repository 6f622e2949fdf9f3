"""The structure check: ``python -m lbreplay.devtools.imports`` (exit 1 with the violations, else a summary).

* The kernel (``lbreplay.kernel``) imports nothing of lbreplay outside the kernel except two leaf modules:
  ``lbreplay.errors`` (the typed errors whose exit codes the CLI and ``decide`` map; the kernel's parsers raise
  them with the JSON path or key at fault) and ``lbreplay.paths`` (where ``conf/pulsar/defaults.yaml``, the
  Pulsar defaults the kernel's config resolves against, lives). Both import nothing of lbreplay. Of third-party
  packages the kernel uses NumPy and PyYAML only (no Spark, pandas or Arrow).
* The recorder (``lbreplay.collect``, the bottom of the data path that ``lake`` reads) imports none of the layers
  above it (:data:`RECORDER_MAY_NOT_IMPORT`: ``lake``, ``replay``, ``report``, ``live_audit``, the CLI); the live
  audit's comparison lives in ``lbreplay.live_audit``, above ``lake`` and ``replay``.
* No import circle anywhere in ``lib/`` (function-level imports count: a lazy import is still an edge).
* ``jobs/`` and the CLI are thin: each job file only hands its arguments to ``lbreplay.cli``; each CLI
  function delegates (a few statements besides its imports and docstring).
* Sizes (always enforced, so a size regression fails ``make lint``): no module over 600 lines; functions over
  80 lines only where they mirror one Pulsar method of that length (:data:`LONG_PULSAR_METHODS`), at most 3.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "lbreplay"
LIB = Path(__file__).resolve().parents[2]  # lib/
JOBS = LIB.parent / "jobs"
KERNEL = f"{PACKAGE}.kernel"
KERNEL_MAY_IMPORT = {f"{PACKAGE}.errors", f"{PACKAGE}.paths"}
KERNEL_THIRD_PARTY = {"numpy", "yaml"}
RECORDER = f"{PACKAGE}.collect"
RECORDER_MAY_NOT_IMPORT = tuple(f"{PACKAGE}.{p}" for p in ("lake", "replay", "report", "live_audit", "cli", "demo"))
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_LONG_FUNCTIONS = 3
MAX_CLI_STATEMENTS = 3  # per CLI function, besides imports and the docstring
MAX_JOB_LINES = 15
# function (module:qualified name) -> the Pulsar method it mirrors line for line
LONG_PULSAR_METHODS = {
    "lbreplay.kernel.extensible.default_namespace_bundle_split_strategy:DefaultNamespaceBundleSplitStrategy."
    "find_bundles_to_split": "DefaultNamespaceBundleSplitStrategyImpl#findBundlesToSplit",
    "lbreplay.kernel.extensible.transfer_shedder:TransferShedder._find_current":
        "TransferShedder#findBundlesForUnloading",
}
STDLIB = set(sys.stdlib_module_names)


@dataclass
class Module:
    name: str
    path: Path
    lines: int
    imports: set[str] = field(default_factory=set)  # lbreplay modules
    third_party: set[str] = field(default_factory=set)  # top-level package names


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(name: str, known: set[str]) -> str | None:
    """The lbreplay module ``name`` refers to (a module, or the package of an imported attribute)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def load_modules() -> dict[str, Module]:
    paths = sorted((LIB / PACKAGE).rglob("*.py"))
    known = {_module_name(p) for p in paths}
    modules = {}
    for path in paths:
        name = _module_name(path)
        text = path.read_text(encoding="utf-8")
        mod = Module(name, path, len(text.splitlines()))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(text)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] if base.startswith(PACKAGE) else [base]
            for t in targets:
                if t == PACKAGE or t.startswith(f"{PACKAGE}."):
                    resolved = _resolve(t, known)
                    if resolved and resolved != name:
                        mod.imports.add(resolved)
                elif t and t.split(".")[0] not in STDLIB and t != "__future__":
                    mod.third_party.add(t.split(".")[0])
        modules[name] = mod
    return modules


def kernel_violations(modules: dict[str, Module]) -> list[str]:
    out = []
    for m in modules.values():
        if m.name != KERNEL and not m.name.startswith(f"{KERNEL}."):
            continue
        for imp in sorted(m.imports):
            if not (imp == KERNEL or imp.startswith(f"{KERNEL}.") or imp in KERNEL_MAY_IMPORT):
                out.append(f"{m.name}: the kernel imports {imp}")
        for pkg in sorted(m.third_party - KERNEL_THIRD_PARTY):
            out.append(f"{m.name}: the kernel imports the third-party package {pkg}")
    for leaf in sorted(KERNEL_MAY_IMPORT):
        if leaf in modules and modules[leaf].imports:
            out.append(f"{leaf}: must stay a leaf (imports {sorted(modules[leaf].imports)})")
    return out


def recorder_violations(modules: dict[str, Module]) -> list[str]:
    """The recorder package importing a layer above it (``lake`` imports the recorder: that would be a circle)."""
    return [f"{m.name}: the recorder imports {imp}" for m in sorted(modules.values(), key=lambda m: m.name)
            if m.name == RECORDER or m.name.startswith(f"{RECORDER}.")
            for imp in sorted(m.imports) if any(imp == up or imp.startswith(f"{up}.") for up in RECORDER_MAY_NOT_IMPORT)]


def import_cycles(modules: dict[str, Module]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(modules[v].imports):
            if w not in modules:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for name in sorted(modules):
        if name not in index:
            visit(name)
    return found


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def long_functions(modules: dict[str, Module]) -> list[tuple[str, int]]:
    out = []
    for m in modules.values():
        for qual, fn in _functions(ast.parse(m.path.read_text(encoding="utf-8"))):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append((f"{m.name}:{qual}", length))
    return sorted(out)


def size_violations(modules: dict[str, Module]) -> list[str]:
    out = [f"{m.name}: {m.lines} lines (max {MAX_MODULE_LINES})" for m in sorted(modules.values(), key=lambda m: m.name)
           if m.lines > MAX_MODULE_LINES]
    long = long_functions(modules)
    for name, length in long:
        if name not in LONG_PULSAR_METHODS:
            out.append(f"{name}: {length} lines (max {MAX_FUNCTION_LINES} unless it mirrors one Pulsar method)")
    if len(long) > MAX_LONG_FUNCTIONS:
        out.append(f"{len(long)} functions over {MAX_FUNCTION_LINES} lines (max {MAX_LONG_FUNCTIONS})")
    return out


def _is_docstring_or_import(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def thin_violations(modules: dict[str, Module]) -> list[str]:
    out = []
    cli = modules.get(f"{PACKAGE}.cli")
    if cli is not None:
        for qual, fn in _functions(ast.parse(cli.path.read_text(encoding="utf-8"))):
            body = [s for s in fn.body if not _is_docstring_or_import(s)]
            if len(body) > MAX_CLI_STATEMENTS and qual != "main":
                out.append(f"{PACKAGE}.cli:{qual}: {len(body)} statements (a command delegates to its module)")
    for job in sorted(JOBS.glob("*.py")) if JOBS.is_dir() else []:
        text = job.read_text(encoding="utf-8")
        tree = ast.parse(text)
        own = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if len(text.splitlines()) > MAX_JOB_LINES or own or not imported <= {f"{PACKAGE}.cli"}:
            out.append(f"jobs/{job.name}: a job only hands its arguments to {PACKAGE}.cli")
    return out


def main(argv: list[str] | None = None) -> int:
    """Exit 1 when a layering rule (kernel self-contained, no circle, thin jobs and cli) or a size limit is broken.
    ``--strict`` is accepted and changes nothing: the size limits are always enforced."""
    unknown = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--strict"]
    if unknown:
        print(f"usage: python -m lbreplay.devtools.imports [--strict] (unknown: {' '.join(unknown)})", file=sys.stderr)
        return 2
    modules = load_modules()
    problems = kernel_violations(modules) + recorder_violations(modules)
    problems += [f"import circle: {' -> '.join(c)}" for c in import_cycles(modules)]
    problems += thin_violations(modules)
    sizes = size_violations(modules)
    kernel = [m for m in modules if m == KERNEL or m.startswith(f"{KERNEL}.")]
    print(f"{len(modules)} modules ({len(kernel)} in the kernel), "
          f"{sum(len(m.imports) for m in modules.values())} internal imports")
    for name, length in long_functions(modules):
        print(f"long function: {name} {length} lines -> {LONG_PULSAR_METHODS.get(name, 'NOT a Pulsar method')}")
    largest = max(modules.values(), key=lambda m: m.lines)
    print(f"largest module: {largest.name} {largest.lines} lines")
    for p in problems + sizes:
        print(f"FAIL {p}")
    if not problems and not sizes:
        print("OK: kernel self-contained, no import circle, jobs and cli thin, sizes within limits")
    return 1 if problems or sizes else 0


if __name__ == "__main__":
    sys.exit(main())
