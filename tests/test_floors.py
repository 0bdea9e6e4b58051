"""The floors of docs/ARCHITECTURE.md, held: no foxc module imports a module on a floor above its own.

The floors are read from ARCHITECTURE.md's table (never a copy of it here), and every module under
foxc/ is walked with `ast`: imports at module level, imports inside functions, and imports by
string (`importlib.import_module("foxc.x")`, a "foxc.x.y:attr" spec). A function-level import of a
foxc module is refused too, whatever its floor, unless ALLOWED_LOCAL names it: an import inside a
function is for an optional third-party dependency, not a way around the floors.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "foxc"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

# Function-level imports of foxc modules that stay, (importer, imported) -> why. As short as possible.
ALLOWED_LOCAL: dict[tuple[str, str], str] = {
    # the CUDA backend needs cuda-python, an optional dependency: importing it only when CUDA is
    # chosen keeps the reference backend working without it
    ("foxc.driver.backend", "foxc.driver.cuda_runtime"): "optional third-party dependency (cuda-python)",
    ("foxc.driver.backend", "foxc.driver.reference.runtime"): "the numpy backend's threadpoolctl, loaded when "
                                                              "chosen: tools/build_cubins.py --check needs neither",
}

_SPEC = re.compile(r"foxc(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")


def floors(text: str | None = None) -> list[list[str]]:
    """ARCHITECTURE.md's "Floors" table, top floor first: each floor's modules and packages as dotted
    names ("foxc.trainer", "foxc.cli")."""
    text = ARCHITECTURE.read_text() if text is None else text
    section = text.split("\n## Floors", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    found = []
    for line in rows[2:]:  # the header and its rule
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        paths = re.findall(r"`(foxc/[^`]*)`", cells[1])
        assert paths, f"a floor with no foxc path: {line}"
        found.append([p.rstrip("/").removesuffix(".py").replace("/", ".") for p in paths])
    return found


def floor_of(module: str, table: list[list[str]]) -> int | None:
    """The floor of a dotted module name, 0 the ground (None: on no floor). The longest name matches."""
    best, level = -1, None
    for i, names in enumerate(reversed(table)):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, level = len(name), i
    return level


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[str, int, str]]:
    """(imported foxc module, line, how) for each import in `source`; how is "module", "function" or "string"."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, local: bool) -> None:
        how = "function" if local else "module"
        if isinstance(node, ast.Import):
            found.extend((a.name, node.lineno, how) for a in node.names if a.name.split(".")[0] == "foxc")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] == "foxc":
                for a in node.names:  # `from foxc.x import y`: y may be a module of its own
                    sub = f"{base}.{a.name}"
                    found.append((sub if _is_module(sub) else base, node.lineno, how))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _SPEC.fullmatch(node.value):
            name = node.value.split(":")[0]
            if _is_module(name):
                found.append((name, node.lineno, "string"))
        inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(source: str, module: str, table: list[list[str]], is_package: bool = False) -> list[str]:
    """What in `source` (module `module`) breaks the floors of `table`."""
    own = floor_of(module, table)
    if own is None:
        return [f"{module}: on no floor of ARCHITECTURE.md's table"]
    found = []
    for target, line, how in imports(source, module, is_package):
        if target == "foxc" or target == module:
            continue
        level = floor_of(target, table)
        if level is None:
            found.append(f"{module}:{line}: imports {target}, on no floor")
        elif level > own:
            found.append(f"{module}:{line}: imports {target} ({how}), a floor above")
        elif how == "function" and (module, target) not in ALLOWED_LOCAL:
            found.append(f"{module}:{line}: imports {target} inside a function")
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def test_floors_are_read_from_the_architecture():
    table = floors()
    assert table[0][0] == "foxc.train" and "foxc.cli" in table[-1]
    assert floor_of("foxc.trainer.step", table) > floor_of("foxc.evaluate.runner", table) > floor_of("foxc.nn", table)
    assert floor_of("foxc.data.source", table) == floor_of("foxc.replay.buffer", table)


def test_no_module_imports_a_floor_above():
    table = floors()
    found = []
    for path in modules():
        found += violations(path.read_text(), module_name(path), table, path.name == "__init__.py")
    assert not found, "\n".join(found)


def test_allowed_local_imports_are_still_there():
    """An allow-list entry whose import is gone goes too."""
    table = floors()
    seen = set()
    for path in modules():
        name = module_name(path)
        seen |= {(name, t) for t, _, how in imports(path.read_text(), name, path.name == "__init__.py")
                 if how == "function"}
    assert not set(ALLOWED_LOCAL) - seen
    assert all(floor_of(b, table) <= floor_of(a, table) for a, b in ALLOWED_LOCAL)


def test_an_upward_import_is_reported():
    table = floors()
    module = "from ..trainer.run import Trainer\n"
    local = "def f():\n    from ..nn import model\n    from foxc.data import source\n"
    string = 'import importlib\nm = importlib.import_module("foxc.evaluate.runner")\nT = "foxc.trainer.fold:TRAINER"\n'
    assert any("foxc.trainer.run" in v for v in violations(module, "foxc.nn.heads", table))
    found = violations(local, "foxc.data.source", table)
    assert any("foxc.nn.model" in v and "floor above" in v for v in found)
    assert any("foxc.data.source" in v and "inside a function" in v for v in violations(local, "foxc.agent.actor", table))
    found = violations(string, "foxc.agent.actor", table)
    assert any("foxc.evaluate.runner" in v for v in found) and any("foxc.trainer.fold" in v for v in found)
    assert violations("from ..nn import model\nfrom . import layout\n", "foxc.agent.actor", table) == []


def test_no_two_packages_of_one_floor_import_each_other():
    """Within a floor one direction only (checkpoint imports isv's registry, so isv never imports checkpoint)."""
    edges = set()
    for path in modules():
        name = module_name(path)
        for target, _, _ in imports(path.read_text(), name, path.name == "__init__.py"):
            a, b = ".".join(name.split(".")[:2]), ".".join(target.split(".")[:2])
            if a != b and b != "foxc":
                edges.add((a, b))
    assert not sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
