"""The project's import graph, read from the source with `ast`: which module imports which at
module level (imports under `if TYPE_CHECKING:` are annotations only and left out), and
which imports sit inside functions. The architecture test checks it against the layers."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PACKAGE_DIRS: dict[str, str] = {
    "lossgrad_compiler": "lossgrad_compiler",
    "lossgrad_compiler.dialects": "dialects",
    "lossgrad_compiler.passes": "passes",
}
"""Installed package → its folder (pyproject.toml's package-dir)."""


@dataclass(frozen=True)
class LocalImport:
    """An import inside a function, and the comment beside it (same or previous line)."""

    module: str
    line: int
    imported: str
    comment: str


def module_files(
    root: Path = ROOT, package_dirs: Mapping[str, str] = PACKAGE_DIRS
) -> dict[str, Path]:
    """Module name → source file, for every .py file of the packages."""
    found: dict[str, Path] = {}
    for package, folder in package_dirs.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The project module `name` refers to (itself, or its closest enclosing package)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = _absolute(module, path, node)
    for alias in node.names:
        yield f"{base}.{alias.name}"  # a submodule, or a name of `base` (resolved below)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(
    nodes: Sequence[ast.stmt], in_function: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, and whether it runs inside a function."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
        elif isinstance(node, ast.If) and _is_type_checking(node):
            yield from _walk(node.orelse, in_function)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(node.body, True)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from _walk([c for c in children if isinstance(c, ast.stmt)], in_function)
                    for handler in children:
                        if isinstance(handler, ast.ExceptHandler):
                            yield from _walk(handler.body, in_function)


_PREAMBLE = ("#", "from ", "import ", "try:")


def _comment_above(lines: Sequence[str], index: int) -> str:
    """The comments on an import's line and on the comment, import and `try:` lines just
    above it (a comment may head a group of imports)."""
    comments = [lines[index].partition("#")[2].strip()] if "#" in lines[index] else []
    k = index - 1
    while k >= 0 and lines[k].strip().startswith(_PREAMBLE):
        if "#" in lines[k]:
            comments.append(lines[k].partition("#")[2].strip())
        k -= 1
    return " ".join(reversed(comments))


@dataclass(frozen=True)
class ImportGraph:
    edges: dict[str, set[str]]  # module-level imports between project modules
    local_imports: list[LocalImport]  # imports inside functions, project or not


def import_graph(modules: Mapping[str, Path]) -> ImportGraph:
    edges: dict[str, set[str]] = {m: set() for m in modules}
    local: list[LocalImport] = []
    for module, path in modules.items():
        text = path.read_text()
        lines = text.splitlines()
        for node, in_function in _walk(ast.parse(text).body, False):
            for name in _imported_names(module, path, node):
                target = _resolve(name, modules)
                if in_function:
                    comment = _comment_above(lines, node.lineno - 1)
                    local.append(LocalImport(module, node.lineno, name, comment))
                elif target is not None and target != module:
                    edges[module].add(target)
    return ImportGraph(edges, local)


def every_import(module: str, path: Path) -> list[tuple[int, str]]:
    """Every name a module imports, anywhere in it (module level, inside functions, under
    `if TYPE_CHECKING:`), with its line: relative imports made absolute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found += [(node.lineno, name) for name in _imported_names(module, path, node)]
    return found


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int:
    """The index of the layer whose longest matching prefix names `module`."""
    best, best_length = -1, -1
    for k, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = k, len(prefix)
    if best < 0:
        raise LookupError(f"{module} belongs to no layer")
    return best


def wrong_way(
    edges: Mapping[str, set[str]], layers: Sequence[tuple[str, Sequence[str]]]
) -> list[str]:
    """Every import of a module from a higher layer, as 'a (layer) imports b (layer)'."""
    problems = []
    for module in sorted(edges):
        own = layer_of(module, layers)
        for target in sorted(edges[module]):
            other = layer_of(target, layers)
            if other > own:
                problems.append(
                    f"{module} ({layers[own][0]}) imports {target} ({layers[other][0]})"
                )
    return problems
