#!/usr/bin/python3
"""examples/python/train_ddp.py under torchrun: 2 ranks (Gloo on CPU) train a few steps
of resnet18 fed by 2 real `tandem worker` processes, and rank 0 releases the workers.

    /usr/bin/python3 tests/python/torchrun_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when torch or torchvision is missing."""
import json
import os
import re

from workers import Workers, parse_args, require, torchrun

ARGS = parse_args()
require("numpy", "torch", "torchvision")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = ["--data", "synthetic", "--image-size", "32"]


def main():
    with Workers(ARGS.tandem, 2, data="synthetic", image_size=32) as w:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(ARGS.module_dir), "OMP_NUM_THREADS": "1"}
        out = torchrun(["--nproc_per_node", "2", os.path.join(ROOT, "examples", "python", "train_ddp.py"),
                        "--workers", ",".join(w.targets), *DATA, "--steps", "6", "--batch-size", "16",
                        "--log-every", "2", "--release-workers"], env, 90)
        lines = [re.sub(r"^\[\w+\]:", "", line) for line in out.splitlines()]  # torchrun's --tee prefix
        summaries = [json.loads(line) for line in lines if line.startswith("{")]
        assert len(summaries) == 1, f"expected one summary line from rank 0:\n{out}"
        s = summaries[0]
        assert s["steps"] == 6 and s["world"] == 2 and s["finite"], s
        # Rank 0 released the workers after the barrier: both exit 0.
        assert [w.wait_exit(i, 15) for i in range(2)] == [0, 0], "workers were not released"
    print(f"OK: {s}")


if __name__ == "__main__":
    main()
