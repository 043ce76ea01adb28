#!/usr/bin/env python3
"""Reports C++ files and functions over the size limits of design/style.md.

    tools/source-sizes.py [--file-lines N] [--function-lines N] PATH...

Scans the .cpp and .h files under each PATH. A function is a definition
that starts at column 0 (LLVM style does not indent namespaces) and ends at
the next line that is a lone `}` at column 0; its length counts both. Prints
one line per file or function over its limit and exits 1 if there is any,
so a test can hold a folder to the limits.
"""

import argparse
import pathlib
import re
import sys

SIGNATURE_START = re.compile(r"^[A-Za-z_~][^;]*\(")
NOT_A_FUNCTION = re.compile(
    r"^(namespace|class|struct|enum|union|using|typedef|template|static_assert|#|//|extern)\b")


def functions(lines):
    """Yields (name, first line, length) of each column-0 definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if SIGNATURE_START.match(line) and not NOT_A_FUNCTION.match(line):
            start = i
            # The signature may run over several lines before its `{`.
            while i < len(lines) and not lines[i].rstrip().endswith("{"):
                # A declaration, or a definition on one line.
                if lines[i].rstrip().endswith((";", "}")):
                    break
                i += 1
            if i < len(lines) and lines[i].rstrip().endswith("{"):
                end = i + 1
                while end < len(lines) and lines[end].rstrip() != "}":
                    end += 1
                name = line.split("(")[0].split()[-1] if line.split("(")[0].split() else line
                yield name, start + 1, end - start + 1
                i = end
        i += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file-lines", type=int, default=800)
    parser.add_argument("--function-lines", type=int, default=150)
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    problems = 0
    for root in args.paths:
        base = pathlib.Path(root)
        if not base.exists():
            print(f"source-sizes: {root}: no such file or folder")
            return 2
        files = [base] if base.is_file() else sorted(
            p for p in base.rglob("*") if p.suffix in (".cpp", ".h"))
        for path in files:
            lines = path.read_text().splitlines()
            if len(lines) > args.file_lines:
                print(f"{path}: {len(lines)} lines (limit {args.file_lines})")
                problems += 1
            for name, first, length in functions(lines):
                if length > args.function_lines:
                    print(f"{path}:{first}: {name} is {length} lines "
                          f"(limit {args.function_lines})")
                    problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
