#!/usr/bin/env python3
"""Translate a CUDA source file for the minitensor CPU emulator.

    python3 tools/cu2emu.py src/map.cu build/emu/map.cpp

C++ cannot parse two pieces of CUDA syntax, so this script rewrites them and
leaves everything else to src/emu/emu.h:

  kernel<<<grid, block, shared, stream>>>(args)
      ->  ::mt_emu::launch("kernel", kernel, grid, block, shared, stream)(args)
  __shared__ float tile[32][33];
      ->  float (&tile)[32][33] = ::mt_emu::block_shared<float[32][33]>(__FILE__, __LINE__);
  __shared__ BlockScratch<float> scratch;
      ->  BlockScratch<float> &scratch = ::mt_emu::block_shared<BlockScratch<float>>(__FILE__, __LINE__);
  extern __shared__ float buf[];
      ->  float *const buf = ::mt_emu::dynamic_shared<float>();

Lines are rewritten in place (never added or removed) and a #line directive
names the original file, so compiler errors and gdb point at the .cu source.
Anything it cannot translate is an error with the file and line, never a
silent pass-through.
"""
import re
import sys

LAUNCH = re.compile(
    r"(?P<name>\b[A-Za-z_][\w:]*(?:\s*<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>)?)"
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


def strip_comments(line: str) -> str:
    """The code part of a line, for the leftover-syntax check."""
    return line.split("//", 1)[0]


def rewrite_launch(match: re.Match) -> str:
    name = match.group("name")
    label = " ".join(name.split())
    return f'::mt_emu::launch("{label}", {name}, {match.group("config")})('


def translate(text: str, path: str) -> str:
    text = LAUNCH.sub(rewrite_launch, text)
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        m = EXTERN_SHARED.match(line)
        if m:
            line = (f"{m['indent']}{m['type']} *const {m['name']} = "
                    f"::mt_emu::dynamic_shared<{m['type']}>();{m['rest']}")
        else:
            m = SHARED.match(line)
            if m:
                dims = m["dims"].strip()
                ref = f"(&{m['name']}){dims}" if dims else f"&{m['name']}"
                line = (f"{m['indent']}{m['type']} {ref} = "
                        f"::mt_emu::block_shared<{m['type']}{dims}>(__FILE__, __LINE__);{m['rest']}")
        code = strip_comments(line)
        if "__shared__" in code or "<<<" in code:
            raise SystemExit(
                f"{path}:{number}: cu2emu cannot translate this line for the emulator:\n  {line.strip()}\n"
                "Write shared memory as `__shared__ T name[N];` or `extern __shared__ T name[];` on one "
                "line, and launches as `kernel<<<grid, block>>>(args);`.")
        out.append(line)
    return f'#line 1 "{path}"\n' + "\n".join(out)


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
