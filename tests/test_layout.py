"""The package laid out by job, imports pointing down only: the training plugin's core imports neither corpus
preparation nor the reference models and benchmark, and preparation imports neither of those."""

import ast
import os

from .conftest import ROOT

PACKAGE = os.path.join(ROOT, "fairseq_autoassist")
# The layer of each subpackage; every other module is the core (0).
LAYERS = {"corpus": 1, "reference": 2, "benchmark": 2}


def layer(module):
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def imported_modules(path, module):
    """The package modules that ``path`` (module ``module``) imports, relative imports resolved."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            names = [name] + [f"{name}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        yield from (name for name in names if name.startswith("fairseq_autoassist"))


def test_no_import_points_up():
    upward = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")
            for target in imported_modules(path, module):
                if layer(target) > layer(module):
                    upward.append(f"{module} imports {target}")
    assert upward == []
