"""Imports point down: every module of agentrl imports only its own layer or lower ones.

The layers, high to low: the command line, the trainer, placement, the training pieces
and SFT, the configuration, the RL math and the rollout, the domain packages (tools,
rewards, models, chat, data, observability), and the base (errors, parsing, the Rust core,
utils). Every import counts, function-local and ``TYPE_CHECKING`` ones included: a lazy
import is still a dependency. ``agentrl.rl`` is pure tensor math on top of that: it imports
the standard library, torch, numpy, itself and ``agentrl.utils`` only.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "python" / "agentrl"

# High to low; a module belongs to the layer of its longest listed prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The package root is the front door: it re-exports the trainer (lazily).
    ("agentrl", "agentrl.cli", "agentrl.commands"),
    ("agentrl.trainer",),
    ("agentrl.placement",),
    # The one floor below the trainer that reads the whole run config and builds its parts.
    ("agentrl.assembly",),
    ("agentrl.sft",),
    ("agentrl.training",),
    ("agentrl.config",),
    # The endpoint stack of --agent sits on the rollout engine.
    ("agentrl.agents",),
    ("agentrl.rl", "agentrl.rollout"),
    (
        "agentrl.tools",
        "agentrl.rewards",
        "agentrl.models",
        "agentrl.chat",
        "agentrl.tool_formats",
        "agentrl.data",
        "agentrl.observability",
        "agentrl.envs",
    ),
    (
        "agentrl",
        "agentrl.errors",
        "agentrl.parsing",
        "agentrl._core",
        "agentrl.utils",
        "agentrl.trajectory",
    ),
)

PURE_PACKAGE = "agentrl.rl"
# The episode records (agentrl.trajectory) are stdlib-only dataclasses: what packing reads.
PURE_ALLOWED = ("agentrl.rl", "agentrl.utils", "agentrl.trajectory", "torch", "numpy")


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.imported}: {self.why}"


def module_name(path: Path, root: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str, root: Path) -> bool:
    base = root.joinpath(*name.split(".")[1:])
    # The Rust extension has no .py file; its type stub (_core.pyi) names it.
    stub_or_source = base.with_suffix(".py").is_file() or base.with_suffix(".pyi").is_file()
    return stub_or_source or (base / "__init__.py").is_file()


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, resolved to absolute module names."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                # `from agentrl import chat` depends on agentrl.chat, not the package root.
                candidate = f"{source}.{alias.name}"
                is_sub = source.split(".")[0] == root.name and _is_module(candidate, root)
                out.append((node.lineno, candidate if is_sub else source))
    return sorted(set(out))


def layer_of(module: str) -> int | None:
    """Index in LAYERS (0 is the highest) of an agentrl module; None when unlisted."""
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            # The package root ("agentrl", no dot) is one module, not a prefix of them all.
            covers = module == prefix or ("." in prefix and module.startswith(prefix + "."))
            if covers and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def _is_agentrl(module: str) -> bool:
    return module.split(".")[0] == "agentrl"


def _label(index: int) -> str:
    return "/".join(p.removeprefix("agentrl.") for p in LAYERS[index])


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _pure_import_allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top != "agentrl":
        return top in sys.stdlib_module_names or top in PURE_ALLOWED
    return _within(module, PURE_ALLOWED)


def _owner(name: str, modules: set[str]) -> str | None:
    """The module an imported name lives in (``a.b.f`` -> ``a.b``), None outside agentrl."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """module -> the agentrl modules it imports (every import, lazy and typing-only too)."""
    paths = sorted(root.rglob("*.py")) + sorted(root.rglob("*.pyi"))
    modules = {module_name(path, root) for path in paths}
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        source = module_name(path, root)
        targets = (_owner(t, modules) for _, t in imported_modules(path, root) if _is_agentrl(t))
        # The package root is the front door; a submodule that imports a sibling through it
        # (``from agentrl import _core``) resolves to the sibling above.
        graph[source] = {t for t in targets if t and t != source and t != root.name}
    return graph


def circles(root: Path = PACKAGE_ROOT) -> list[list[str]]:
    """Every set of modules that import each other in a circle (Tarjan's strongly connected
    components of more than one module), each sorted."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def unplaced_modules(root: Path = PACKAGE_ROOT) -> list[str]:
    """Modules under ``root`` that no entry of LAYERS covers."""
    names = (module_name(path, root) for path in sorted(root.rglob("*.py")))
    return [name for name in names if layer_of(name) is None]


def violations(root: Path = PACKAGE_ROOT) -> list[Violation]:
    """Every upward or impure import under ``root`` (modules in no layer are skipped)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source, relative = module_name(path, root), path.relative_to(root).as_posix()
        source_layer = layer_of(source)
        if source_layer is None:
            continue
        for line, target in imported_modules(path, root):
            if _within(source, (PURE_PACKAGE,)) and not _pure_import_allowed(target):
                why = "agentrl.rl is pure math (stdlib, torch, numpy, agentrl.rl, agentrl.utils)"
                found.append(Violation(relative, line, target, why))
                continue
            target_layer = layer_of(target) if _is_agentrl(target) else None
            if target_layer is not None and target_layer < source_layer:
                why = f"layer {_label(source_layer)} -> higher layer {_label(target_layer)}"
                found.append(Violation(relative, line, target, why))
    return found


def test_every_module_is_in_a_layer() -> None:
    unplaced = unplaced_modules()
    assert not unplaced, "add these modules to LAYERS: " + ", ".join(unplaced)


def test_imports_point_down() -> None:
    found = violations()
    assert not found, "imports that point up:\n" + "\n".join(map(str, found))


def test_no_import_circle() -> None:
    found = circles()
    assert not found, "modules that import each other, in a circle:\n" + "\n".join(
        " -> ".join(c) for c in found
    )


def test_the_checker_reports_an_upward_import_with_file_and_line(tmp_path: Path) -> None:
    fake = tmp_path / "agentrl"
    (fake / "rl").mkdir(parents=True)
    (fake / "data").mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "rl" / "__init__.py").write_text("")
    (fake / "data" / "__init__.py").write_text("")
    (fake / "data" / "loader.py").write_text(
        "import json\n\n\ndef load():\n    from agentrl.config import TrainConfig\n"
    )
    (fake / "rl" / "loss.py").write_text("import torch\nfrom agentrl.models import x\n")
    (fake / "data" / "typed.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from agentrl.rl import loss\n"
    )
    (fake / "rl" / "ok.py").write_text(
        "import math\nfrom . import loss\nfrom agentrl.utils import y\n"
    )
    (fake / "newcomer.py").write_text("")
    assert unplaced_modules(fake) == ["agentrl.newcomer"]
    found = sorted(map(str, violations(fake)))
    assert found == [
        "data/loader.py:5 imports agentrl.config: layer tools/rewards/models/chat/tool_formats/"
        "data/observability/envs -> higher layer config",
        "data/typed.py:4 imports agentrl.rl.loss: layer tools/rewards/models/chat/tool_formats/"
        "data/observability/envs -> higher layer rl/rollout",
        "rl/loss.py:2 imports agentrl.models: agentrl.rl is pure math (stdlib, torch, numpy, "
        "agentrl.rl, agentrl.utils)",
    ]


def test_the_checker_finds_a_circle_through_a_lazy_import(tmp_path: Path) -> None:
    fake = tmp_path / "agentrl"
    (fake / "data").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "data" / "__init__.py").write_text("")
    (fake / "data" / "a.py").write_text("from agentrl.data.b import f\n")
    (fake / "data" / "b.py").write_text("def f():\n    from agentrl.data import c\n")
    (fake / "data" / "c.py").write_text("from agentrl.data.a import g\n")
    (fake / "data" / "d.py").write_text("from agentrl.data.a import g\n")
    assert circles(fake) == [["agentrl.data.a", "agentrl.data.b", "agentrl.data.c"]]
