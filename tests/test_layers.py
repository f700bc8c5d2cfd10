"""The layer rule of docs/architecture.md, checked on every import in ``src/surrealdocs``
(module level, inside functions and under ``TYPE_CHECKING`` alike): a module imports only
from its own layer or the layers below it, and no modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "surrealdocs"

# from the bottom up; a module's layer is the first entry its name starts with
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("surrealdocs.version", "surrealdocs.errors", "surrealdocs.config")),
    ("parts", ("surrealdocs.parts",)),
    ("models", ("surrealdocs.embed", "surrealdocs.chat", "surrealdocs.web",
                "surrealdocs.rerank")),
    ("store", ("surrealdocs.store",)),
    ("core", ("surrealdocs.core",)),
    ("faces", ("surrealdocs.faces", "surrealdocs.integrations",
               "surrealdocs.kreuzberg_surrealdb", "surrealdocs.__main__")),
    ("package", ("surrealdocs",)),  # the public names of surrealdocs/__init__.py
]


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py")


def _imports() -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports."""
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from package import module` names a module; `from module import name`
                # names the module itself
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("surrealdocs"):
                    found.add(target)
        out[name] = found
    return out


IMPORTS = _imports()


def test_every_module_is_in_a_layer():
    for name in IMPORTS:
        _layer(name)


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_no_module_imports_from_a_layer_above_its_own(module):
    upward = sorted(t for t in IMPORTS[module] if _layer(t) > _layer(module))
    assert not upward, (f"{module} ({LAYERS[_layer(module)][0]}) imports from above:"
                        f" {upward}")


def test_no_modules_import_each_other_in_a_circle():
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(IMPORTS[node]):
            if nxt == "surrealdocs" or _layer(nxt) == len(LAYERS) - 1:
                continue  # the package's own __init__ re-exports; nothing imports it
            if state.get(nxt) == 1:
                circle = [*path[path.index(nxt):], nxt]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(IMPORTS):
        if module not in state:
            visit(module)
