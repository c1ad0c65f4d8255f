#!/usr/bin/python3
"""Includes only point down the layers (docs/architecture.md):

    common -> cluster, data, plan -> report, transport -> feed -> training -> launch
           -> bench -> cli -> main.cc

and, inside data/, down its floors:

    io -> core, codecs -> python -> augment -> sources -> batching

A file under src/<layer>/ or include/tandem/<layer>/ may include tandem headers of its own
layer and of layers below it, never above or beside at the same height: a cycle would
tie the Torch-free core to training, or the transport to the command line. Inside data/
the same holds between its sub-folders (FLOOR), so the Dataset interface and its records
(data/core) never come to depend on a source, an augmentation or the batch path.

    python3 tests/python/layers_test.py [--root DIR]
"""
import argparse
import os
import re
import sys
import tempfile

HEIGHT = {
    "common": 0,
    "cluster": 1, "data": 1, "plan": 1,
    "report": 2, "transport": 2,
    "feed": 3,
    "training": 4,
    "launch": 5,
    "bench": 6,
    "cli": 7,
    "main.cc": 8, "thread_stack.cc": 8,
}
# data/'s floors: the read-ahead's engines; the Dataset interface, its records and the
# Batch, and the image codecs; Python's processes; augmentation; the sources; batching.
FLOOR = {
    "io": 0,
    "core": 1, "codecs": 1,
    "python": 2,
    "augment": 3,
    "sources": 4,
    "batching": 5,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:\.\./)*(?:src/|tandem/)?([a-z_0-9.]+)/(?:([a-z_0-9]+)/)?', re.M)


def layer_of(path, base):
    return os.path.relpath(path, base).split(os.sep)[0]


def floor_of(path, base):
    """The data/ sub-folder of `path` ("core"), or None outside data/ or at its top."""
    parts = os.path.relpath(path, base).split(os.sep)
    return parts[1] if parts[0] == "data" and len(parts) > 2 else None


def floor_problem(mine, theirs):
    """Why an include from data/<mine> of data/<theirs> runs against the floors, or None."""
    if mine is None or theirs is None or mine == theirs:
        return None
    for f in (mine, theirs):
        if f not in FLOOR:
            return f"data/{f} has no floor: add it to FLOOR"
    if FLOOR[theirs] >= FLOOR[mine]:
        return f"data/{mine} includes data/{theirs}, which is not below it"
    return None


def violations(root):
    out = []
    for base in (os.path.join(root, "src"), os.path.join(root, "include", "tandem")):
        for d, _, files in os.walk(base):
            for f in files:
                if not f.endswith((".cc", ".h")):
                    continue
                path = os.path.join(d, f)
                mine = layer_of(path, base)
                if mine not in HEIGHT:
                    out.append(f"{os.path.relpath(path, root)}: folder '{mine}' has no layer: add it to HEIGHT")
                    continue
                with open(path, errors="replace") as fh:
                    text = fh.read()
                for m in INCLUDE.finditer(text):
                    theirs = m.group(1)
                    line = text[:m.start()].count("\n") + 1
                    if theirs == mine == "data":
                        problem = floor_problem(floor_of(path, base), m.group(2))
                        if problem:
                            out.append(f"{os.path.relpath(path, root)}:{line}: {problem}")
                        continue
                    if theirs == mine or theirs == "v1":  # v1: the generated protocol, below everything
                        continue
                    if theirs not in HEIGHT:
                        continue
                    if HEIGHT[theirs] >= HEIGHT[mine]:
                        out.append(f"{os.path.relpath(path, root)}:{line}: {mine} includes {theirs}, "
                                   f"which is not below it")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = p.parse_args()
    bad = violations(args.root)
    # The check itself can fail: a training header pulled into the data layer is caught.
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "src", "data"))
        with open(os.path.join(tmp, "src", "data", "x.cc"), "w") as fh:
            fh.write('#include "tandem/data/core/batch.h"\n#include "tandem/training/trainer.h"\n')
        caught = violations(tmp)
        assert len(caught) == 1 and "data includes training" in caught[0], caught
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} includes run against the layers")
        return 1
    print("every include points down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
