#!/usr/bin/env python3
"""The layering check: fails when a project include crosses a forbidden edge.

The layers, from the ground up: runtime/core <- kernels <- runtime <- actors, topology <- launch.
An include may go from a higher layer to a lower one, never back (docs/architecture.md):

  kernels/                 includes only kernels/ and runtime/core/
  runtime/                 includes no actors/, launch/ or topology/
  actors/                  includes no launch/ (the command line)
  topology/                includes no launch/
  runtime/backend/cpu/  and  runtime/backend/cuda/  never include each other

Usage: check_layering.py [ROOT]   (default: the repository this script sits in). Reads every
.h/.hpp/.cpp/.cc/.cu/.cuh file under kernels/, runtime/, actors/, topology/ and launch/, prints
one line per forbidden include (file:line: what it includes, and the rule) and exits 1 when
there is any, 0 otherwise.
"""
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}
CHECKED_TOPS = ("kernels", "runtime", "actors", "topology", "launch")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# (files under this prefix, may not include paths under any of these prefixes, except these)
RULES = [
    ("kernels/", ("",), ("kernels/", "runtime/core/"),
     "kernels include only kernels/ and runtime/core/"),
    ("runtime/", ("actors/", "launch/", "topology/"), (),
     "the engine includes no role, transport, command line or topology"),
    ("actors/", ("launch/",), (), "roles and transports include no command line"),
    ("topology/", ("launch/",), (), "topology includes no command line"),
    ("runtime/backend/cpu/", ("runtime/backend/cuda/",), (),
     "the CPU and CUDA backends do not include each other"),
    ("runtime/backend/cuda/", ("runtime/backend/cpu/",), (),
     "the CPU and CUDA backends do not include each other"),
]


def violations(root: pathlib.Path):
    """Yields (file, line number, included path, rule) for every forbidden include."""
    for top in CHECKED_TOPS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if "/" not in target:  # a generated or same-folder header, not a layer edge
                    continue
                for prefix, banned, allowed, why in RULES:
                    if not rel.startswith(prefix):
                        continue
                    if any(target.startswith(a) for a in allowed):
                        continue
                    if any(target.startswith(b) for b in banned):
                        yield rel, number, target, why


def main(argv):
    root = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    if not (root / "runtime").is_dir():
        print(f"check_layering: {root} has no runtime/ folder; not a source tree", file=sys.stderr)
        return 2
    found = list(violations(root))
    for rel, number, target, why in found:
        print(f"{rel}:{number}: includes \"{target}\" ({why})")
    if found:
        print(f"check_layering: {len(found)} forbidden include(s)", file=sys.stderr)
        return 1
    print("check_layering: every include follows the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
