#!/usr/bin/env python3
# The floors of docs/DESIGN.md "Rooms", checked: every project include must point down or sideways, never up.
"""Reads every C++/CUDA source under the project's rooms and checks each `#include "room/..."`
against the table ALLOWED below (the same table as docs/DESIGN.md "Rooms"), plus three rules:
  - a `*_internal.hpp` header is included only from its own folder;
  - nothing outside tests/ includes tests/;
  - cli/ holds only main.cpp, options.{hpp,cpp} and cmd_*.cpp;
  - every .cpp/.cu of a room is named in the CMakeLists.txt of its folder or a folder above
    (explicit source lists: a file no list names would silently not build, or a test not run).
Prints one line per violation (file:line: rule) and exits 1 if there is any, 0 otherwise.

usage: check_layers.py [ROOT]      (default: the checkout this file is in)
       check_layers.py --self-test (builds small trees that must pass and fail)
"""
import os
import re
import sys
import tempfile

# room -> rooms it may include (itself always). A room is a top folder, or runtime/<backend>.
ALLOWED = {
    "core": set(),
    "sim": {"core"},
    "kernels": {"core"},
    "runtime": {"core", "sim"},
    "runtime/cpu": {"core", "sim", "runtime"},
    "runtime/cuda": {"core", "sim", "runtime", "kernels"},
    "runtime/deepspeed": {"core", "sim", "runtime"},
    "reports": {"core", "sim", "runtime", "runtime/cpu", "runtime/cuda", "runtime/deepspeed"},
    "calib": {"core", "sim", "runtime", "runtime/cpu", "runtime/cuda", "runtime/deepspeed", "kernels", "reports"},
    "eval": {"core", "sim", "runtime", "runtime/cpu", "runtime/cuda", "runtime/deepspeed", "reports"},
    "bench": {"core", "sim", "runtime", "runtime/cpu", "runtime/cuda", "runtime/deepspeed", "kernels", "reports",
              "calib", "eval"},
    "cli": {"core", "sim", "runtime", "runtime/cpu", "runtime/cuda", "runtime/deepspeed", "kernels", "reports",
            "calib", "eval", "bench"},
}
# The one composition point of the backends: the registry may name every backend.
EXTRA = {"runtime/registry.cpp": {"runtime/cpu", "runtime/cuda", "runtime/deepspeed"}}
TESTS_MAY_NOT = {"tests/gpu": {"bench"}}
SOURCE = re.compile(r".*\.(c|cc|cpp|cu|h|hpp|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CLI_FILE = re.compile(r"^(main\.cpp|options\.(hpp|cpp)|cmd_[a-z_]+\.cpp|CMakeLists\.txt)$")


def room_of(path):
    """The room of a project-relative path, or None for files outside the rooms."""
    parts = path.split("/")
    if parts[0] == "runtime" and len(parts) > 2:
        return "runtime/" + parts[1]
    if parts[0] in ALLOWED or parts[0] == "tests":
        return parts[0] if parts[0] != "tests" else "/".join(parts[:2]) if len(parts) > 2 else "tests"
    return None


def listed(root, rel):
    """Whether a CMakeLists.txt in rel's folder or above (inside the room) names rel by its path from there."""
    parts = rel.split("/")
    for i in range(len(parts) - 1, 0, -1):
        cm = os.path.join(root, *parts[:i], "CMakeLists.txt")
        if os.path.exists(cm):
            name = "/".join(parts[i:])
            with open(cm, errors="replace") as fh:
                if re.search(r"(?<![\w/.])" + re.escape(name) + r"(?![\w.])", fh.read()):
                    return True
    return False


def check(root):
    bad = []
    for dirpath, dirnames, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build") and d != "out"]
        if rel_dir == "cli":
            for f in sorted(files):
                if not CLI_FILE.match(f) and not f.endswith(".md"):
                    bad.append(f"cli/{f}:0: cli/ holds only main.cpp, options.* and cmd_*.cpp (docs/DESIGN.md)")
        for f in sorted(files):
            if not SOURCE.match(f):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, f))
            me = room_of(rel)
            if me is None:
                continue
            if f.endswith((".cpp", ".cu")) and not listed(root, rel) and not rel.startswith("tests/fuzz/"):
                bad.append(f"{rel}:0: named by no CMakeLists.txt source list (its folder's or one above)")
            with open(os.path.join(dirpath, f), errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m or "/" not in m.group(1):
                        continue
                    inc = m.group(1)
                    target = room_of(inc)
                    if target is None:
                        continue  # a third-party or generated header
                    if inc.endswith("_internal.hpp") and os.path.dirname(inc) != os.path.dirname(rel):
                        bad.append(f"{rel}:{n}: includes {inc}, another folder's internal header")
                    if me.startswith("tests"):
                        if target in TESTS_MAY_NOT.get(me, set()) or any(
                                target.startswith(t + "/") or target == t for t in TESTS_MAY_NOT.get(me, set())):
                            bad.append(f"{rel}:{n}: {me} may not include {inc}")
                        continue
                    if target.startswith("tests"):
                        bad.append(f"{rel}:{n}: includes {inc}: only tests/ may include tests/")
                        continue
                    if target == me or target in ALLOWED[me] or target in EXTRA.get(rel, set()):
                        continue
                    bad.append(f"{rel}:{n}: {me}/ may not include {inc} (its floor is above or beside: docs/DESIGN.md)")
    return bad


def self_test():
    cases = [  # (files, expected violations)
        ({"core/a.hpp": "", "sim/b.cpp": '#include "core/a.hpp"\n', "sim/CMakeLists.txt": "b.cpp"}, 0),
        ({"core/a.hpp": '#include "sim/b.hpp"\n', "sim/b.hpp": ""}, 1),
        ({"kernels/k.cuh": '#include "runtime/layout.hpp"\n', "runtime/layout.hpp": ""}, 1),
        ({"runtime/cuda/x.cpp": '#include "runtime/cpu/y.hpp"\n', "runtime/cpu/y.hpp": "", "runtime/CMakeLists.txt": "cuda/x.cpp"}, 1),
        ({"runtime/registry.cpp": '#include "runtime/cpu/y.hpp"\n', "runtime/cpu/y.hpp": "", "runtime/CMakeLists.txt": "registry.cpp"}, 0),
        ({"tests/gpu/t.cpp": '#include "bench/attn/r.hpp"\n', "bench/attn/r.hpp": "", "tests/CMakeLists.txt": "gpu/t.cpp"}, 1),
        ({"bench/b.cpp": '#include "tests/sim/fixtures.hpp"\n', "tests/sim/fixtures.hpp": "", "bench/CMakeLists.txt": "b.cpp"}, 1),
        ({"cli/validation.cpp": "", "cli/cmd_x.cpp": "", "cli/CMakeLists.txt": "validation.cpp cmd_x.cpp"}, 1),
        ({"sim/a.cpp": "", "sim/CMakeLists.txt": "add_library(x b.cpp)"}, 1),
        ({"tests/sim/t.cpp": "", "tests/CMakeLists.txt": "set(S sim/t.cpp)"}, 0),
        ({"cli/cmd_x.cpp": '#include "sim/config_internal.hpp"\n', "sim/config_internal.hpp": "", "cli/CMakeLists.txt": "cmd_x.cpp"}, 1),
        ({"sim/a.cpp": '#include "sim/config_internal.hpp"\n', "sim/config_internal.hpp": "", "sim/CMakeLists.txt": "a.cpp"}, 0),
    ]
    failed = 0
    for files, want in cases:
        with tempfile.TemporaryDirectory() as d:
            for p, text in files.items():
                os.makedirs(os.path.join(d, os.path.dirname(p)), exist_ok=True)
                with open(os.path.join(d, p), "w") as fh:
                    fh.write(text)
            got = check(d)
            if len(got) != want:
                failed += 1
                print(f"self-test: {sorted(files)}: expected {want} violation(s), got {got}")
    print(f"self-test: {len(cases) - failed}/{len(cases)} cases as expected")
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) > 2:
        print("usage: check_layers.py [ROOT] | --self-test", file=sys.stderr)
        return 2
    root = sys.argv[1] if len(sys.argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    if not os.path.isdir(os.path.join(root, "sim")):
        print(f"check_layers: {root}: not a ulysses checkout (no sim/)", file=sys.stderr)
        return 2
    bad = check(root)
    for b in bad:
        print(b)
    print(f"layers: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
