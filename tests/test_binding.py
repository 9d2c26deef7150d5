"""The ctypes binding against the C header (src/minitensor.h).

The header is parsed with regular expressions (prototypes, enums, #defines
and the mt_tensor struct) and every binding in minitensor/_lib.py is checked
against it: each function's restype and argtypes, each enum value, the ABI
version, the maximum rank and the struct layout. A `c_double` bound where C
takes a `float`, a forgotten function or a reordered enum fails here.
"""

from __future__ import annotations

import ast
import ctypes
import re
from ctypes import POINTER, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t, c_void_p
from pathlib import Path

import pytest

import minitensor as mt
from minitensor import _lib

HEADER = Path(__file__).resolve().parent.parent / "src" / "minitensor.h"


def _header_source() -> str:
    """minitensor.h with the headers it includes in place: src/minitensor_ops.h
    (the op lists), src/minitensor_streams.h (streams, events and graphs) and
    the family headers included at its end (src/batchnorm.h,
    src/attention_tiled.h, src/conv_igemm_tf32.h, src/conv_winograd.h, src/attention_mma.h,
    src/optim_list.h, src/matmul_tf32.h)."""
    text = HEADER.read_text()
    for part in ("minitensor_ops.h", "minitensor_streams.h", "batchnorm.h", "attention_tiled.h", "pool.h",
                 "conv_igemm_tf32.h", "conv_winograd.h",
                 "attention_mma.h", "optim_list.h", "matmul_tf32.h"):
        include = f'#include "{part}"'
        assert include in text, f"minitensor.h no longer includes {part}"
        text = text.replace(include, (HEADER.parent / part).read_text())
    return text

# C type (normalized spelling) -> the ctypes type the binding must use.
C_TO_CTYPES = {
    "void": None,
    "int": c_int,
    "mt_status": c_int,
    "mt_kernel_policy": c_int,
    "double": c_double,
    "float": c_float,
    "size_t": c_size_t,
    "int32_t": c_int32,
    "int64_t": c_int64,
    "const char *": c_char_p,
    "char *": c_char_p,
    "void *": c_void_p,
    "const void *": c_void_p,
    "void **": POINTER(c_void_p),
    "int64_t *": POINTER(c_int64),
    "size_t *": POINTER(c_size_t),
    "int *": POINTER(c_int),
    "float *": POINTER(c_float),
    "mt_tensor": _lib.MtTensor,
    "mt_tensor *": POINTER(_lib.MtTensor),
    "const mt_tensor *": POINTER(_lib.MtTensor),
}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", text)


def _normalize_type(c_type: str) -> str:
    c_type = " ".join(c_type.replace("*", " * ").split())
    return c_type.replace("* *", "**").replace(" *", " *").strip()


def _header() -> str:
    return _strip_comments(_header_source())


def parse_prototypes() -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, [parameter types]) of every mt_* function."""
    text = re.sub(r"^\s*#.*$", " ", _header(), flags=re.MULTILINE)
    text = re.sub(r"typedef\s+(enum|struct)\s*\{.*?\}\s*\w+\s*;", " ", text, flags=re.DOTALL)
    protos = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(mt_\w+)\s*\(([^()]*)\)\s*;", text):
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        ret = _normalize_type(ret.replace("extern", "").replace('"C"', ""))
        types = []
        if params and params != "void":
            for param in params.split(","):
                pm = re.match(r"^(.*?)(\w+)\s*$", param.strip())
                assert pm, f"cannot parse parameter {param!r} of {name}"
                types.append(_normalize_type(pm.group(1)))
        protos[name] = (ret, types)
    return protos


def _expand_op_lists(text: str) -> str:
    """Expands the header's X-macro op lists in enum bodies: with
    `#define MT_MAP_OPS(X) X(COPY, copy) X(NEG, neg)` and
    `#define MT_MAP_ID_(id, name) MT_MAP_##id,`, the enum body
    `MT_MAP_OPS(MT_MAP_ID_)` becomes `MT_MAP_COPY, MT_MAP_NEG,`."""
    text = text.replace("\\\n", " ")
    lists = {
        m.group(1): re.findall(r"\bX\(\s*(\w+)\s*,", m.group(2))
        for m in re.finditer(r"#define\s+(\w+)\(X\)(.*)", text)
    }
    prefixes = {
        m.group(1): m.group(2)
        for m in re.finditer(r"#define\s+(\w+)\(\s*id\s*,\s*name\s*(?:,\s*dtypes\s*)?\)\s*(\w+)##id\s*,", text)
    }

    def expand(m: re.Match) -> str:
        return "".join(f"{prefixes[m.group(2)]}{op_id}, " for op_id in lists[m.group(1)])

    return re.sub(r"\b(\w+)\((\w+)\)", lambda m: expand(m) if m.group(1) in lists and m.group(2) in prefixes else m.group(0), text)


def parse_enums() -> dict[str, dict[str, int]]:
    """typedef name -> {enumerator: value} of every enum in the header."""
    enums = {}
    body = _expand_op_lists(_header())
    for m in re.finditer(r"typedef\s+enum\s*\{(.*?)\}\s*(\w+)\s*;", body, flags=re.DOTALL):
        values: dict[str, int] = {}
        nxt = 0
        for entry in m.group(1).split(","):
            entry = entry.strip()
            if not entry:
                continue
            if "=" in entry:
                key, value = (s.strip() for s in entry.split("="))
                nxt = int(value, 0)
            else:
                key = entry
            values[key] = nxt
            nxt += 1
        enums[m.group(2)] = values
    return enums


def parse_defines() -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define\s+(MT_\w+)\s+(\d+)", _header())}


def parse_struct(name: str) -> list[tuple[str, str, int]]:
    """(field, type, array length or 0) of a typedef'd struct, in order."""
    m = re.search(r"typedef\s+struct\s*\{(.*?)\}\s*" + name + r"\s*;", _header(), flags=re.DOTALL)
    assert m, f"struct {name} not found in the header"
    defines = parse_defines()
    fields = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        fm = re.match(r"^(.*?)(\w+)\s*(?:\[(\w+)\])?$", decl)
        assert fm, f"cannot parse field {decl!r}"
        length = fm.group(3)
        n = 0 if length is None else (int(length) if length.isdigit() else defines[length])
        fields.append((fm.group(2), _normalize_type(fm.group(1)), n))
    return fields


PROTOTYPES = parse_prototypes()


def test_the_parser_found_the_header() -> None:
    assert len(PROTOTYPES) >= 20
    assert PROTOTYPES["mt_map"] == ("mt_status", ["int", "mt_tensor", "mt_tensor", "double"])


def test_every_header_function_is_bound_and_nothing_else() -> None:
    assert set(_lib.SIGNATURES) == set(PROTOTYPES)


@pytest.mark.parametrize("name", sorted(PROTOTYPES))
def test_binding_matches_header(name: str) -> None:
    ret, params = PROTOTYPES[name]
    restype, argtypes = _lib.SIGNATURES[name]
    assert restype is C_TO_CTYPES[ret], f"{name} returns {ret}"
    assert argtypes == [C_TO_CTYPES[p] for p in params], f"{name}({', '.join(params)})"
    # The loaded library's function objects carry exactly these declarations.
    fn = getattr(_lib.lib(), name)
    assert fn.restype is restype
    assert list(fn.argtypes) == argtypes


def test_abi_version_and_max_dims() -> None:
    defines = parse_defines()
    assert defines["MT_ABI_VERSION"] == _lib.ABI_VERSION
    assert defines["MT_MAX_DIMS"] == _lib.MAX_DIMS
    assert _lib.lib().mt_abi_version() == _lib.ABI_VERSION
    assert _lib.lib().mt_max_dims() == _lib.MAX_DIMS


def test_struct_layout() -> None:
    expected = []
    for field, c_type, n in parse_struct("mt_tensor"):
        base = C_TO_CTYPES[c_type]
        expected.append((field, base * n if n else base))
    got = [(f, t) for f, t in _lib.MtTensor._fields_]
    assert [f for f, _ in got] == [f for f, _ in expected]
    for (field, t), (_, e) in zip(got, expected):
        if issubclass(e, ctypes.Array):
            assert issubclass(t, ctypes.Array) and t._type_ is e._type_ and t._length_ == e._length_, field
        else:
            assert t is e, field


def test_status_enum() -> None:
    status = parse_enums()["mt_status"]
    assert status["MT_OK"] == _lib.MT_OK
    expected = {
        "MT_ERR_INVALID_ARGUMENT": mt.InvalidArgumentError,
        "MT_ERR_SHAPE": mt.ShapeError,
        "MT_ERR_DIM": mt.DimError,
        "MT_ERR_DTYPE": mt.DTypeError,
        "MT_ERR_OUT_OF_MEMORY": mt.OutOfMemoryError,
        "MT_ERR_CUDA": mt.CudaError,
        "MT_ERR_NO_DEVICE": mt.NoDeviceError,
        "MT_ERR_INTERRUPTED": KeyboardInterrupt,
        "MT_ERR_NOT_IMPLEMENTED": mt.TaskNotDoneError,
    }
    assert set(status) == set(expected) | {"MT_OK"}
    for name, cls in expected.items():
        assert _lib.STATUS_ERRORS[status[name]] is cls, name


def test_dtype_enum() -> None:
    dtypes = parse_enums()["mt_dtype"]
    assert dtypes["MT_FLOAT32"] == _lib.MT_FLOAT32 == mt.float32.code
    assert dtypes["MT_FLOAT64"] == _lib.MT_FLOAT64 == mt.float64.code
    assert dtypes["MT_INT64"] == _lib.MT_INT64 == mt.int64.code
    assert dtypes["MT_BOOL"] == _lib.MT_BOOL == mt.bool.code
    assert dtypes["MT_DTYPE_COUNT"] == 4


@pytest.mark.parametrize(
    "enum, prefix, family",
    [
        ("mt_map_op", "MT_MAP_", "map"),
        ("mt_zip_op", "MT_ZIP_", "zip"),
        ("mt_reduce_op", "MT_REDUCE_", "reduce"),
        ("mt_matmul_algo", "MT_MATMUL_", "matmul"),
        ("mt_reduce_algo", "MT_REDUCE_ALGO_", "reduce_algo"),
        ("mt_copy_algo", "MT_COPY_ALGO_", "copy_algo"),
        ("mt_epilogue_act", "MT_EPILOGUE_", "epilogue_act"),
    ],
)
def test_op_enums_match_tables(enum: str, prefix: str, family: str) -> None:
    table = _lib.op_names(family)  # read from the library at load
    values = parse_enums()[enum]
    count_key = [k for k in values if k.endswith("_COUNT")]
    assert len(count_key) == 1
    assert values.pop(count_key[0]) == len(table)
    names = {v: k[len(prefix) :].lower() for k, v in values.items()}
    assert [names[i] for i in range(len(table))] == list(table)


def test_library_names_match_tables() -> None:
    lib = _lib.lib()
    for family in _lib.OP_FAMILIES:
        table = _lib.op_names(family)
        assert lib.mt_op_count(family.encode()) == len(table)
        assert [lib.mt_op_name(family.encode(), i).decode() for i in range(len(table))] == list(table)
    assert lib.mt_op_count(b"nonsense") == -1
    assert lib.mt_op_name(b"map", len(_lib.op_names("map"))) is None
    with pytest.raises(ValueError, match="unknown op family"):
        _lib.op_names("nonsense")


def test_load_time_check_rejects_an_abi_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lib.loader, "ABI_VERSION", _lib.ABI_VERSION + 1)
    with pytest.raises(ImportError, match="ABI version"):
        _lib._verify(_lib.lib())


def parse_dtype_rules() -> dict[str, dict[str, str]]:
    """family -> {op name: dtype rule} of the op lists with a dtype column."""
    text = _header_source().replace("\\\n", " ")
    rules = {}
    for macro, family in (("MT_MAP_OPS", "map"), ("MT_ZIP_OPS", "zip"), ("MT_REDUCE_OPS", "reduce")):
        body = re.search(r"#define\s+" + macro + r"\(X\)(.*)", text).group(1)
        rules[family] = dict(re.findall(r'\bX\(\s*\w+\s*,\s*(\w+)\s*,\s*"([^"]*)"\s*\)', body))
    return rules


def test_dtype_rules_come_from_the_header_through_the_library() -> None:
    rules = parse_dtype_rules()
    lib = _lib.lib()
    for family, table in rules.items():
        assert list(table) == list(_lib.op_names(family))
        for op_id, (name, rule) in enumerate(table.items()):
            assert set(rule.partition(">")[0]) <= set("fib") and rule.partition(">")[2] in ("", "b", "i"), rule
            assert lib.mt_op_dtypes(family.encode(), op_id).decode() == rule
            assert _lib.op_dtypes(family, name) == tuple(rule.partition(">")[::2])
    assert lib.mt_op_dtypes(b"matmul", 0) is None and lib.mt_op_dtypes(b"nonsense", 0) is None
    assert _lib.op_dtypes("map", "exp") == ("f", "") and _lib.op_dtypes("zip", "eq") == ("fib", "b")


def op_tables(source: str, names: set[str]) -> list[str]:
    """The module-level assignments of source whose value holds several of names
    as string constants (a table: `_FLOAT_MAPS = frozenset(("exp", "log", ...))`);
    not __all__, which lists the module's public functions."""
    found = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            quoted = {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and c.value in names}
            if len(quoted) >= 2:
                found.append(f"line {node.lineno}: {', '.join(sorted(quoted))}")
    return found


def test_no_python_table_repeats_the_op_lists() -> None:
    """Each op's name and dtype rule is written once, in src/minitensor.h: no
    module of the package keeps a table of op names (the float-only maps, the
    comparisons, the ops it calls: _FLOAT_MAPS, COMPARISONS, REQUIRED_OPS were)."""
    names = set(_lib.op_names("map")) | set(_lib.op_names("zip"))
    package = Path(mt.__file__).resolve().parent
    tables = {str(p.relative_to(package)): op_tables(p.read_text(), names) for p in package.rglob("*.py")}
    assert not {path: found for path, found in tables.items() if found}
    assert op_tables('_FLOAT_MAPS = frozenset(("exp", "log"))\n', names)  # the check sees one


def test_an_op_the_library_lacks_is_an_error_naming_the_rebuild() -> None:
    with pytest.raises(ValueError, match="unknown map op 'no_such_op'.*make"):
        _lib.map_("no_such_op", mt.zeros(2), mt.zeros(2))
    with pytest.raises(ValueError, match="unknown zip op"):
        _lib.op_dtypes("zip", "no_such_op")


def test_failed_status_raises_with_the_library_message() -> None:
    x = mt.zeros(3)
    desc = x.descriptor()
    status = _lib.lib().mt_map(len(_lib.op_names("map")) + 5, desc, desc, 0.0)
    assert status != _lib.MT_OK
    with pytest.raises(mt.MinitensorError) as info:
        _lib.check(status, "mt_map")
    assert "mt_map" in str(info.value)
    assert len(str(info.value)) > len("mt_map: ")


def test_unknown_op_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown map op"):
        _lib.map_("no_such_op", mt.zeros(2), mt.zeros(2))
