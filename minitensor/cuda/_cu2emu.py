#!/usr/bin/env python3
"""Translate a CUDA source file for the minitensor CPU emulator.

    python3 minitensor/cuda/_cu2emu.py src/map.cu build/emu/map.cpp

C++ cannot parse two pieces of CUDA syntax, so this script rewrites them and
leaves everything else to src/emu/emu.h:

  kernel<<<grid, block, shared, stream>>>(args)
      ->  ::mt_emu::launch("kernel", kernel, grid, block, shared, stream)(args)
  __shared__ float tile[32][33];
      ->  const auto tile = ::mt_emu::shared_array<float[32][33]>("tile", __FILE__, __LINE__);
  __shared__ BlockScratch<float> scratch;
      ->  BlockScratch<float> &scratch = ::mt_emu::block_shared<BlockScratch<float>>(
              "scratch", "BlockScratch<float>", __FILE__, __LINE__);  (on one line)
  extern __shared__ float buf[];
      ->  const auto buf = ::mt_emu::dynamic_shared_array<float>("buf", __FILE__, __LINE__);

A __shared__ array becomes a view (src/emu/emu.h) that indexes like the
array and, under MINITENSOR_EMU_CHECK=full, checks bounds and races. A
__shared__ variable of another type is a reference to the block's memory
(in full mode at its raw address, where the fault handler checks each
access; docs/emulator.md). So that
a check can name the line of an access, every later `tile[` in the function
that declares the array becomes `tile(__LINE__)[`.

Lines are rewritten in place (never added or removed) and a #line directive
names the original file, so compiler errors and gdb point at the .cu source.
Anything it cannot translate is an error with the file and line, never a
silent pass-through.
"""
import re
import sys

LAUNCH = re.compile(
    # The kernel: a name, maybe qualified with `::` (never a single `:`, so a
    # `case X:` or `default:` label just before it is not taken for part of
    # the name), maybe with one level of nested template arguments.
    r"(?P<name>(?:::)?\b[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*"
    r"(?:\s*<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>)?)"
    r"\s*<<<(?P<config>.*?)>>>\s*\(",
    re.DOTALL,
)
SHARED = re.compile(
    r"^(?P<indent>\s*)(?:static\s+)?__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?"
    r"(?P<type>[^;\[\]]+?)\s+(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]+\]\s*)*);"
    r"(?P<rest>.*)$"
)
EXTERN_SHARED = re.compile(
    r"^(?P<indent>\s*)extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?"
    r"(?P<type>[^;\[\]]+?)\s+(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;(?P<rest>.*)$"
)


# A comment, or a string or character literal (with its escapes).
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def mask_non_code(text: str) -> str:
    """The text with every comment and literal blanked out (newlines kept).

    The result has the same length and the same line breaks as the text, so a
    match found in it has the same position in the original: the patterns
    below look only at code (a `__shared__` or `<<<` inside a comment or a
    string is no declaration or launch), while the rewrite keeps the
    comments of the original.
    """
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return NOT_CODE.sub(blank, text)


def unterminated_comment(masked: str) -> bool:
    return "/*" in masked


def scope_end(masked: str, start: int) -> int:
    """Where the block that contains position start closes (or the end)."""
    depth = 0
    for i in range(start, len(masked)):
        c = masked[i]
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i
            depth -= 1
    return len(masked)


def tag_array_uses(text: str, masked: str, names: list) -> str:
    """`name[` -> `name(__LINE__)[` after each array's declaration, up to the
    end of the block that declares it (code only; not `x.name[`, `p->name[`)."""
    edits = []
    for name, decl_end in names:
        end = scope_end(masked, decl_end)
        use = re.compile(r"(?<![\w.>:])" + re.escape(name) + r"(?=\s*\[)")
        for m in use.finditer(masked, decl_end, end):
            edits.append(m.end())
    for pos in sorted(edits, reverse=True):
        text = text[:pos] + "(__LINE__)" + text[pos:]
    return text


def cast_array_addresses(text: str, masked: str, names: list) -> str:
    """`reinterpret_cast<V *>(&name[` -> `::mt_emu::shared_cast<V>(&name[`
    for each __shared__ array name, so that a vector load or store through
    the address of an element is checked too (src/emu/emu.h)."""
    if not names:
        return text
    cast = re.compile(r"\breinterpret_cast\s*<(?P<type>[^;(){}]*?)\*\s*>\s*\(\s*&\s*(?:"
                      + "|".join(re.escape(n) for n in sorted(set(names))) + r")(?=\s*(?:\(__LINE__\)\s*)?\[)")
    for m in reversed(list(cast.finditer(masked))):
        vector_type = text[m.start("type"):m.end("type")].strip()
        head = f"::mt_emu::shared_cast<{vector_type}>(&"
        amp = m.end() - masked[m.start():m.end()][::-1].index("&") - 1
        text = text[:m.start()] + head + text[amp + 1:]
    return text


def translate(text: str, path: str) -> str:
    masked = mask_non_code(text)
    if unterminated_comment(masked):
        line = masked[:masked.index("/*")].count("\n") + 1
        raise SystemExit(f"{path}:{line}: cu2emu: this /* comment is never closed")
    # Launches, from the last to the first so that earlier positions hold.
    for m in reversed(list(LAUNCH.finditer(masked))):
        name = text[m.start("name"):m.end("name")]
        config = text[m.start("config"):m.end("config")]
        label = " ".join(name.split())
        replacement = f'::mt_emu::launch("{label}", {name}, {config})('
        # Keep the line count: a launch written over several lines stays so.
        replacement += "\n" * (text.count("\n", m.start(), m.end()) - replacement.count("\n"))
        text = text[:m.start()] + replacement + text[m.end():]
    masked = mask_non_code(text)
    out = []
    arrays = []  # (name, line of its declaration)
    for number, (line, code) in enumerate(zip(text.split("\n"), masked.split("\n")), start=1):
        m = EXTERN_SHARED.match(code)
        if m:
            line = (f"{m['indent']}const auto {m['name']} = ::mt_emu::dynamic_shared_array<{m['type']}>("
                    f"\"{m['name']}\", __FILE__, __LINE__);{line[m.start('rest'):]}")
            arrays.append((m["name"], number))
        else:
            m = SHARED.match(code)
            if m:
                dims = m["dims"].strip()
                if dims:
                    line = (f"{m['indent']}const auto {m['name']} = ::mt_emu::shared_array<{m['type']}{dims}>("
                            f"\"{m['name']}\", __FILE__, __LINE__);{line[m.start('rest'):]}")
                    arrays.append((m["name"], number))
                else:
                    type_text = " ".join(m["type"].split()).replace("\\", "\\\\").replace('"', '\\"')
                    line = (f"{m['indent']}{m['type']} &{m['name']} = "
                            f"::mt_emu::block_shared<{m['type']}>(\"{m['name']}\", \"{type_text}\", "
                            f"__FILE__, __LINE__);{line[m.start('rest'):]}")
            elif "__shared__" in code or "<<<" in code:
                raise SystemExit(
                    f"{path}:{number}: cu2emu cannot translate this line for the emulator:\n  {line.strip()}\n"
                    "Write shared memory as `__shared__ T name[N];` or `extern __shared__ T name[];` on one "
                    "line, and launches as `kernel<<<grid, block>>>(args);`.")
        out.append(line)
    text = "\n".join(out)
    if arrays:
        masked = mask_non_code(text)
        starts = [0]
        for ln in text.split("\n"):
            starts.append(starts[-1] + len(ln) + 1)
        text = tag_array_uses(text, masked, [(name, starts[number]) for name, number in arrays])
        text = cast_array_addresses(text, mask_non_code(text), [name for name, _ in arrays])
    return f'#line 1 "{path}"\n' + text


def main(argv: list) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    source, target = argv[1], argv[2]
    with open(source, encoding="utf-8") as f:
        text = f.read()
    translated = translate(text, source)
    with open(target, "w", encoding="utf-8") as f:
        f.write(translated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
