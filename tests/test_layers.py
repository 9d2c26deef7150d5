"""The package's layers: no module imports from a layer above its own.

LAYERS lists the layers of minitensor/ from the bottom up (docs/architecture.md
draws them). Every module of the package must belong to one, and may import
only from its own layer and the ones below; imports inside functions count
too. The test reads the source (ast) and imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "minitensor"

# Bottom to top. A name covers the module of that name and, for a
# subpackage, every module inside it.
LAYERS: list[tuple[str, list[str]]] = [
    ("binding", ["minitensor._lib", "minitensor._errors", "minitensor._dtype", "minitensor._dlpack"]),
    ("array", ["minitensor._shape", "minitensor._storage", "minitensor._foreign", "minitensor._interop",
               "minitensor._array", "minitensor._views"]),
    ("ops", ["minitensor.ops", "minitensor.backends"]),
    ("autograd engine", ["minitensor.autograd.engine"]),
    ("gradient rules", ["minitensor.autograd"]),
    ("tensor", ["minitensor.tensor", "minitensor._nograd_ops", "minitensor._inplace", "minitensor._indexing",
                "minitensor._creation", "minitensor._functions", "minitensor._arithmetic", "minitensor._reductions"]),
    ("nn, optim, kernels", ["minitensor.nn", "minitensor.optim", "minitensor.kernels", "minitensor.utils",
                                   "minitensor.cuda", "minitensor.serialization",
                                   "minitensor.torch_ops", "minitensor.perf_model"]),
    ("distributed", ["minitensor.distributed"]),
    ("package", ["minitensor"]),
]


def layer_of(module: str) -> int:
    """The index in LAYERS of the most specific name that covers module."""
    best, best_len = -1, -1
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    if best < 0:
        raise KeyError(module)
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """Whether name is a module or package of minitensor/ (not a name inside one)."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module of minitensor) for every import in source, at any depth."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "minitensor"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "minitensor":
                continue
            for a in node.names:
                # `from . import ops` imports a module; `from .tensor import Tensor` a name.
                sub = f"{target}.{a.name}"
                found.append((node.lineno, sub if is_module(sub) else target))
    return found


def upward_imports(source: str, module: str, is_package: bool) -> list[str]:
    """What source imports from a layer above module's, as readable lines."""
    own = layer_of(module)
    problems = []
    for line, target in imported_modules(source, module, is_package):
        if layer_of(target) > own:
            problems.append(
                f"{module} (layer {LAYERS[own][0]!r}) imports {target} (layer "
                f"{LAYERS[layer_of(target)][0]!r}) at line {line}"
            )
    return problems


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_imports_from_a_layer_above(path: Path) -> None:
    module = module_name(path)
    try:
        layer_of(module)
    except KeyError:
        pytest.fail(f"{module} belongs to no layer: add it to LAYERS in tests/test_layers.py")
    problems = upward_imports(path.read_text(), module, path.name == "__init__.py")
    assert not problems, "\n".join(problems)


# How long a module may grow before it is split: every module one concern
# (tensor.py too, since its arithmetic and reductions moved to _arithmetic.py
# and _reductions.py, mixins of Tensor as _nograd_ops.py is).
MAX_LINES = 600


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_is_too_long(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines (at most {MAX_LINES}): split it"


# The autograd record and the Tensor API start at the autograd engine: below it
# (binding, array, ops) no module may name Tensor or Variable, nor read or
# write these attributes, even without importing anything (duck typing).
AUTOGRAD_NAMES = {"Tensor", "Variable"}
AUTOGRAD_ATTRIBUTES = {"requires_grad", "grad", "grad_fn", "_wrap", "new_empty", "_alias", "_new_like"}


@pytest.mark.parametrize(
    "path",
    [p for p in MODULES if layer_of(module_name(p)) < layer_of("minitensor.autograd.engine")],
    ids=lambda p: str(p.relative_to(PACKAGE.parent)),
)
def test_the_layers_below_autograd_know_nothing_of_it(path: Path) -> None:
    used = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in AUTOGRAD_ATTRIBUTES:
            used.append(f".{node.attr} at line {node.lineno}")
        elif isinstance(node, ast.Name) and node.id in AUTOGRAD_NAMES:
            used.append(f"{node.id} at line {node.lineno}")
    assert not used, f"{module_name(path)} uses " + ", ".join(used)


def test_the_check_sees_upward_imports_also_inside_functions() -> None:
    source = "from . import _lib\n\ndef f():\n    from .tensor import Tensor\n    return Tensor\n"
    problems = upward_imports(source, "minitensor.ops", False)
    assert len(problems) == 1 and "minitensor.tensor" in problems[0] and "line 4" in problems[0]
    assert upward_imports("from .. import ops\n", "minitensor.autograd.engine", False) == []
    assert upward_imports("from .elementwise import Add\n", "minitensor.autograd.engine", False)


# ---- kernel families ---------------------------------------------------------
#
# The op layers are sliced by kernel family as the C sources are: each family
# has a module of its name in the binding (minitensor/_lib/), in the ops layer
# (minitensor/ops/) and in the gradient rules (minitensor/autograd/), beside
# its src/*.cu files. Inside the
# ops layer the family modules come in this order, after core (the helpers
# every family uses): a module imports only from the ones before it.
OPS_ORDER = ["core", "reduce", "elementwise", "gather", "where", "softmax", "logsumexp", "cross_entropy", "norm",
             "attention", "perf_model_tree", "perf_model_roofline", "perf_model_conv", "perf_model",
             "autotune", "matmul", "conv_tf32", "conv", "pool", "optim"]
FAMILY_SOURCES: dict[str, list[str]] = {
    "reduce": ["src/reduce.cu", "src/reduce_ladder.cu", "src/reduce_index_rows.cu"],
    "elementwise": ["src/map.cu", "src/zip.cu", "src/new_output.cu", "src/copy_strided.cu"],
    "gather": ["src/gather.cu"],
    "where": ["src/where.cu"],
    "softmax": ["src/softmax.cu"],
    "logsumexp": ["src/logsumexp.cu"],
    "cross_entropy": ["src/cross_entropy.cu"],
    "norm": ["src/layernorm.cu", "src/layernorm_backward.cu", "src/batchnorm.cu"],
    "attention": ["src/attention.cu", "src/attention_warp.cu", "src/masked_softmax.cu", "src/attention_tiled.cu",
                  "src/attention_mma.cu", "src/attention_mma_backward.cu"],
    "matmul": ["src/matmul.cu"],  # and one src/matmul_<rung>.cu per rung
    "conv": ["src/conv.cu", "src/conv_implicit_gemm.cu", "src/conv_depthwise_backward.cu", "src/conv_igemm_pipelined.cu",
             "src/conv_depthwise.cu", "src/conv_direct.cu",
             "src/conv_igemm_tf32.cu",
             "src/conv_igemm_tf32_nhwc.cu", "src/conv_winograd.cu"],
    "pool": ["src/pool.cu", "src/pool_new.cu"],
    "optim": ["src/optim.cu", "src/optim_multi.cu"],
}
NO_GRADIENT = {"optim"}  # the optimizers' updates are not differentiated
# The .cu files of src/ that are no op family: the C API's checks, memory,
# streams and graphs, the op tables, the kernel policy and TMA's tensor maps.
NOT_A_FAMILY = {"errors.cu", "graph.cu", "library.cu", "memory.cu", "policy.cu", "stream.cu", "tma.cu",
                "validate.cu"}


@pytest.mark.parametrize("family", sorted(FAMILY_SOURCES))
def test_every_family_has_a_module_in_each_op_layer(family: str) -> None:
    root = PACKAGE.parent
    for source in FAMILY_SOURCES[family]:
        assert (root / source).is_file(), f"{family}: no {source}"
    assert (PACKAGE / "_lib" / f"{family}.py").is_file(), f"no minitensor/_lib/{family}.py"
    assert (PACKAGE / "ops" / f"{family}.py").is_file(), f"no minitensor/ops/{family}.py"
    if family not in NO_GRADIENT:
        assert (PACKAGE / "autograd" / f"{family}.py").is_file(), f"no minitensor/autograd/{family}.py"


def test_every_kernel_source_belongs_to_a_family() -> None:
    claimed = {Path(s).name for sources in FAMILY_SOURCES.values() for s in sources}
    for path in sorted((PACKAGE.parent / "src").glob("*.cu")):
        if path.name.startswith("matmul_"):
            continue  # a rung of the matmul ladder
        assert path.name in claimed | NOT_A_FAMILY, f"src/{path.name} belongs to no family: add it to FAMILY_SOURCES"


def test_the_ops_families_import_only_the_families_before_them() -> None:
    modules = sorted(p.stem for p in (PACKAGE / "ops").glob("*.py") if p.stem != "__init__")
    assert sorted(OPS_ORDER) == modules, "list every module of minitensor/ops/ in OPS_ORDER"
    problems = []
    for i, name in enumerate(OPS_ORDER):
        path = PACKAGE / "ops" / f"{name}.py"
        for line, target in imported_modules(path.read_text(), f"minitensor.ops.{name}", False):
            if target == "minitensor.ops" or target.startswith("minitensor.ops."):
                other = target.rpartition(".")[2]
                if target == "minitensor.ops" or OPS_ORDER.index(other) >= i:
                    problems.append(f"minitensor.ops.{name} imports {target} at line {line}")
    assert not problems, "\n".join(problems)


def test_the_binding_modules_import_only_the_loader() -> None:
    problems = []
    for path in sorted((PACKAGE / "_lib").glob("*.py")):
        if path.stem in ("__init__", "loader"):
            continue
        for line, target in imported_modules(path.read_text(), f"minitensor._lib.{path.stem}", False):
            if target.startswith("minitensor._lib") and target != "minitensor._lib.loader":
                problems.append(f"minitensor._lib.{path.stem} imports {target} at line {line}")
    assert not problems, "\n".join(problems)


def test_the_gradient_rules_import_no_other_rules() -> None:
    problems = []
    for path in sorted((PACKAGE / "autograd").glob("*.py")):
        if path.stem in ("__init__", "engine", "helpers"):
            continue
        for line, target in imported_modules(path.read_text(), f"minitensor.autograd.{path.stem}", False):
            if target.startswith("minitensor.autograd") and target not in (
                    "minitensor.autograd.engine", "minitensor.autograd.helpers"):
                problems.append(f"minitensor.autograd.{path.stem} imports {target} at line {line}")
    assert not problems, "\n".join(problems)


# ---- no import loops ---------------------------------------------------------


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of minitensor it imports (at any depth of its source)."""
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        module = module_name(path)
        targets = imported_modules(path.read_text(), module, path.name == "__init__.py")
        graph[module] = {t for _, t in targets if t != module}
    return graph


def find_loop(graph: dict[str, set[str]]) -> list[str]:
    """One import loop of graph as [a, b, ..., a], or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                loop = visit(target)
                if loop:
                    return loop
        path.pop()
        state[module] = 2
        return []

    for module in sorted(graph):
        if module not in state:
            loop = visit(module)
            if loop:
                return loop
    return []


def test_the_package_has_no_import_loop() -> None:
    loop = find_loop(import_graph())
    assert not loop, "import loop: " + " -> ".join(loop)


def test_the_loop_check_finds_a_loop() -> None:
    assert find_loop({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_loop({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
