"""minitensor/cuda/_cu2emu.py: what it rewrites, what it leaves alone, and what it refuses.

The translator sees only code: a `__shared__` or a `<<<` inside a comment or
a string literal is neither a declaration nor a launch. Lines are never added
or removed, so compiler messages point at the right line of the .cu file.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "minitensor" / "cuda" / "_cu2emu.py"

_spec = importlib.util.spec_from_file_location("cu2emu", SCRIPT)
cu2emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cu2emu)


def translate(source: str) -> list[str]:
    """The translated lines, without the leading #line directive."""
    out = cu2emu.translate(source, "k.cu").split("\n")
    assert out[0] == '#line 1 "k.cu"'
    assert len(out) - 1 == len(source.split("\n")), "a line was added or removed"
    return out[1:]


def test_launch_is_rewritten():
    (line,) = translate("    scale<<<grid, block, 0, stream>>>(out, in, n);")
    assert line == '    ::mt_emu::launch("scale", scale, grid, block, 0, stream)(out, in, n);'


def test_template_and_qualified_launches():
    (line,) = translate("ns::fill<float, 4><<<g, b>>>(p);")
    assert line == '::mt_emu::launch("ns::fill<float, 4>", ns::fill<float, 4>, g, b)(p);'


@pytest.mark.parametrize("label", ["case 'a':", "case 'a': ", "case ':':", "case A:", "default:", "done:"])
def test_launch_after_a_label(label):
    (line,) = translate(f"{label}kernel<<<1, 32>>>(x); break;")
    assert line == f'{label}::mt_emu::launch("kernel", kernel, 1, 32)(x); break;'


def test_launch_over_several_lines_keeps_the_line_count():
    lines = translate("k<<<grid,\n   block>>>(a,\n b);\nint after;")
    assert lines[0].startswith('::mt_emu::launch("k", k, grid,')
    assert lines[3] == "int after;"


def test_shared_declarations():
    static, dynamic = translate("  __shared__ float tile[32][33]; // padded\n  extern __shared__ double buf[];")
    assert static == ('  const auto tile = ::mt_emu::shared_array<float[32][33]>("tile", __FILE__, __LINE__);'
                      " // padded")
    assert dynamic == '  const auto buf = ::mt_emu::dynamic_shared_array<double>("buf", __FILE__, __LINE__);'


def test_shared_struct_stays_a_reference():
    (line,) = translate("  __shared__ BlockScratch<float> scratch;")
    assert line == ('  BlockScratch<float> &scratch = ::mt_emu::block_shared<BlockScratch<float>>('
                    '"scratch", "BlockScratch<float>", __FILE__, __LINE__);')


def test_array_uses_carry_their_line_within_the_declaring_block():
    source = ("__global__ void k(S s) {\n"
              "    __shared__ float tile[4][4];\n"
              "    tile[0][1] = s.tile[2] + p->tile [3]; // tile[9]\n"
              "    { float x = tile [1][2]; }\n"
              "}\n"
              "void h() { tile[0] = 1; }")
    lines = translate(source)
    assert lines[2] == "    tile(__LINE__)[0][1] = s.tile[2] + p->tile [3]; // tile[9]"
    assert lines[3] == "    { float x = tile(__LINE__) [1][2]; }"
    assert lines[5] == "void h() { tile[0] = 1; }"


def test_vector_access_through_an_element_address_is_checked():
    source = ("__global__ void k(const float *in) {\n"
              "    __shared__ float tile[4][8];\n"
              "    *reinterpret_cast<Pack<float> *>(&tile[1][4]) = load(in);\n"
              "    const Pack<float> x = *reinterpret_cast < const Pack<float> * > ( & tile [0][0]);\n"
              "    const float4 *other = reinterpret_cast<const float4 *>(&in[0]);\n"
              "}")
    lines = translate(source)
    assert lines[2] == "    *::mt_emu::shared_cast<Pack<float>>(&tile(__LINE__)[1][4]) = load(in);"
    assert lines[3] == "    const Pack<float> x = *::mt_emu::shared_cast<const Pack<float>>(& tile(__LINE__) [0][0]);"
    assert lines[4] == "    const float4 *other = reinterpret_cast<const float4 *>(&in[0]);"


@pytest.mark.parametrize("source", [
    "/* tiles live in __shared__ memory */",
    "/* a launch looks like k<<<g, b>>>(args)\n   and __shared__ arrays\n   are per block */",
    "int x; // the __shared__ tile, filled by k<<<g, b>>>()",
    'const char *msg = "use __shared__ or k<<<g, b>>>(...)";',
    "char c = '<'; char d = '\\'';",
])
def test_comments_and_strings_are_left_alone(source):
    assert translate(source) == source.split("\n")


def test_a_comment_inside_a_declaration_line_is_kept():
    (line,) = translate("__shared__ int flags[8]; /* one per warp: __shared__ */")
    assert line.endswith("/* one per warp: __shared__ */")
    assert "shared_array<int[8]>" in line


@pytest.mark.parametrize("source, line", [
    ("int a;\n__shared__ float t[4]\n    [4];", 2),          # a declaration over two lines
    ("__shared__ float a[2], b[2];", 1),                   # two names in one declaration
    ("int a;\n/* never closed\n", 2),
])
def test_what_it_cannot_translate_is_an_error_with_the_line(source, line):
    with pytest.raises(SystemExit) as e:
        cu2emu.translate(source, "k.cu")
    assert str(e.value).startswith(f"k.cu:{line}: cu2emu")


def test_command_line(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float *p) { p[threadIdx.x] = 0; }\nvoid go(float *p) { k<<<1, 4>>>(p); }\n")
    dst = tmp_path / "k.cpp"
    subprocess.run([sys.executable, str(SCRIPT), str(src), str(dst)], check=True)
    assert '::mt_emu::launch("k", k, 1, 4)(p);' in dst.read_text()
    bad = tmp_path / "bad.cu"
    bad.write_text("__shared__ float a[2], b[2];\n")
    r = subprocess.run([sys.executable, str(SCRIPT), str(bad), str(tmp_path / "bad.cpp")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "bad.cu:1: cu2emu cannot translate" in r.stderr
