#!/usr/bin/python3
"""examples/python-dataset's torchrun path, briefly, so that the example cannot rot: for the
segmenter and the detector, 2 real `tandem worker` processes serve shapes.py (a Python
dataset) and train_torchrun.py trains on 2 torchrun ranks (DDP, Gloo) from tandem.Feed's
dict batches; the loss falls, rank 0 releases the workers (both exit 0) and the saved
TorchScript module loads with its training_step.

    /usr/bin/python3 tests/python/example_datasets_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when numpy or torch is missing."""
import json
import os
import re
import tempfile

from workers import Workers, parse_args, require, torchrun

ARGS = parse_args()
require("numpy", "torch")
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "python-dataset")
TASKS = {"segmentation": "Segmentation", "detection": "Detection"}
DATA_ARGS = '{"n": 256, "size": 32}'
STEPS = 30


def train(task, out_dir):
    data = f"python:{os.path.join(EXAMPLE, 'shapes.py')}:{TASKS[task]}"
    with Workers(ARGS.tandem, 2, data=data, data_args=DATA_ARGS, python="/usr/bin/python3", python_procs=1) as w:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(ARGS.module_dir), "OMP_NUM_THREADS": "1"}
        saved = os.path.join(out_dir, f"{task}.pt")
        out = torchrun(["--nproc_per_node", "2", os.path.join(EXAMPLE, "train_torchrun.py"), "--task", task,
                        "--workers", ",".join(w.targets), "--data-args", DATA_ARGS, "--steps", str(STEPS),
                        "--batch-size", "8", "--log-every", "10", "--save", saved, "--release-workers"], env, 150)
        lines = [re.sub(r"^\[\w+\]:", "", line) for line in out.splitlines()]  # torchrun's --tee prefix
        summaries = [json.loads(line) for line in lines if line.startswith("{")]
        assert len(summaries) == 1, f"expected one summary line from rank 0:\n{out}"
        s = summaries[0]
        assert s["task"] == task and s["steps"] == STEPS and s["world"] == 2 and s["finite"], s
        first, last = sum(s["losses"][:5]) / 5, sum(s["losses"][-5:]) / 5
        assert last < 0.9 * first, f"{task}: the loss did not fall: {s['losses']}"
        assert any(line.startswith("batch: image uint8 [8, 3, 32, 32]") for line in lines), out
        # Rank 0 released the workers after the barrier: both exit 0.
        assert [w.wait_exit(i, 15) for i in range(2)] == [0, 0], "workers were not released"
    model = torch.jit.load(saved)
    assert hasattr(model, "training_step"), f"{saved} has no training_step"
    model(torch.zeros(2, 3, 32, 32, dtype=torch.uint8))
    print(f"OK {task}: loss {first:.3f} -> {last:.3f}")


def main():
    with tempfile.TemporaryDirectory() as out_dir:
        for task in TASKS:
            train(task, out_dir)


if __name__ == "__main__":
    main()
