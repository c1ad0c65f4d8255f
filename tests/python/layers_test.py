#!/usr/bin/python3
"""Includes only point down the layers (docs/architecture.md):

    common -> cluster, data, plan -> transport -> feed -> report -> training -> launch
           -> bench -> cli -> main.cc

A file under src/<layer>/ or include/tandem/<layer>/ may include tandem headers of its own
layer and of layers below it, never above or beside at the same height: a cycle would
tie the Torch-free core to training, or the transport to the command line.

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
    "transport": 2,
    "feed": 3,
    "report": 4,
    "training": 5,
    "launch": 6,
    "bench": 7,
    "cli": 8,
    "main.cc": 9,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(?:\.\./)*(?:src/|tandem/)?([a-z_0-9.]+)/', re.M)


def layer_of(path, base):
    first = os.path.relpath(path, base).split(os.sep)[0]
    return first


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
                    if theirs == mine or theirs == "v1":  # v1: the generated protocol, below everything
                        continue
                    if theirs not in HEIGHT:
                        continue
                    if HEIGHT[theirs] >= HEIGHT[mine]:
                        line = text[:m.start()].count("\n") + 1
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
            fh.write('#include "tandem/data/batching/batch.h"\n#include "tandem/training/trainer.h"\n')
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
