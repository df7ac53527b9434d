#!/usr/bin/env python3
"""Split a delayq CPU profile into areas by call stack.

    python3 scripts/profile-areas.py BINARY PROFILE [AREA]

Each sample counts once, in the first area of RULES that any frame of its
stack matches, so an area holds the runtime work (allocation, map and
channel operations, system calls) its own code causes. A flat profile
puts that work under the runtime and hides who asked for it; this is how
docs/benchmarks.md ("where every aim ends") divides a put and a
reserve+delete. With AREA, the leaf functions of that area's samples are
listed too.

The profile comes from `delayq serve --debug-addr ADDR`:
    curl -o cpu.prof "http://ADDR/debug/pprof/profile?seconds=8"
"""
import collections
import re
import subprocess
import sys

RULES = [
    ("GC (background)", r"gcBgMarkWorker|bgsweep|bgscavenge"),
    ("Pebble: flush and compaction",
     r"^github\.com/cockroachdb/pebble/v2\.\(\*DB\)\.(flush|compact|runCompaction)"
     r"|^github\.com/cockroachdb/pebble/v2/internal/compact\."),
    ("Pebble: WAL writer", r"^github\.com/cockroachdb/pebble/v2/record\.\(\*LogWriter\)"),
    ("Pebble: commit and memtable", r"cockroachdb"),
    ("Go scheduler, idle", r"^runtime\.(mcall|schedule|findRunnable|park_m|goexit0|mstart)$"),
    ("reply write(2)", r"beanstalk\.\(\*conn\)\.flush|net/http\.\(\*response\)|bufio\.\(\*Writer\)\.Flush"),
    ("request read(2)", r"^internal/poll\.\(\*FD\)\.Read$"),
    ("store (delayq)", r"/internal/store/"),
    ("engine (delayq)", r"/internal/engine\."),
    ("protocol (delayq)", r"/internal/(beanstalk|httpapi|grpcapi)\."),
    ("other", r"."),
]


def samples(binary, profile):
    """Yields (value, frames leaf first) for each sample of the profile."""
    raw = subprocess.run(["go", "tool", "pprof", "-raw", binary, profile],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    stacks, locs, last = [], {}, None
    part = None
    for ln in raw:
        if ln in ("Samples:", "Locations", "Mappings"):
            part = ln
            continue
        if part == "Samples:":
            m = re.match(r"\s+\d+\s+(\d+): (.*)", ln)
            if m:
                stacks.append((int(m.group(1)), m.group(2).split()))
        elif part == "Locations":
            m = re.match(r"\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", ln)
            if m:
                last = m.group(1)
                locs[last] = [m.group(2)]
            elif last and ln.startswith("             "):
                locs[last].append(ln.split()[0])
    for value, ids in stacks:
        yield value, [f for i in ids for f in locs.get(i, [])]


def area(frames):
    for name, rx in RULES:
        if any(re.search(rx, f) for f in frames):
            return name
    return "other"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    want = sys.argv[3] if len(sys.argv) > 3 else None
    areas, leaves, total = collections.Counter(), collections.Counter(), 0
    for value, frames in samples(sys.argv[1], sys.argv[2]):
        total += value
        a = area(frames)
        areas[a] += value
        if a == want and frames:
            leaves[frames[0]] += value
    if not total:
        sys.exit("no samples")
    for name, v in areas.most_common():
        print(f"{name:<30} {100 * v / total:5.1f}%")
    if want:
        print(f"-- leaf functions of {want}")
        for name, v in leaves.most_common(20):
            print(f"{100 * v / total:5.1f}% {name}")


if __name__ == "__main__":
    main()
