#!/usr/bin/python3
"""examples/sagemaker/pip/ as a user runs it, under `tandem simulate --job`, where every host
runs launcher.py as SageMaker's training toolkit does (SM_* environment, hyperparameters
JSON-encoded by the PyTorch estimator and passed as --key value through /bin/sh, the train
channel on the data group only, the token channel on every host, torchrun's 2 ranks on the
GPU host, /opt/ml/checkpoints restored from and synced to the checkpoint store):

- the job of launch_job.job_spec() (its groups, distribution and channels) on JPEGs in
  class folders made here, scaled down by hyperparameters only: every host exits 0, the
  loss falls, the model lands in SM_MODEL_DIR, the data hosts serve with the token;
- the same job again with the same checkpoints says it is complete and trains nothing;
  with more epochs it resumes;
- the Python dataset variant (class_folders.py on the data hosts) trains too;
- a checkpoint of another job (another model) is refused by name.

    /usr/bin/python3 tests/python/sagemaker_example_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when torch, torchvision or PIL is missing."""
import atexit
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from workers import parse_args, require

ARGS = parse_args()
require("numpy", "torch", "torchvision", "PIL")
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "sagemaker", "pip")
sys.path.insert(0, EXAMPLE)
import launch_job  # noqa: E402  (the example's own job, without the SDK)

# The job scaled down to this machine: hyperparameters only, the rest is the example's.
SMALL = {"epochs": 3, "batch-size": 16, "lr": 0.01, "model": "resnet18", "tandem-image-size": 32,
         "tandem-threads": 1, "tandem-python-procs": 1}



def scratch(prefix):
    """A temporary directory removed when the tests end (a run's is about 300 MB)."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d

def class_folders(n_classes=4, per_class=32, size=40):
    """JPEGs in one folder per class, each class its own colour (learnable in a few steps)."""
    root = scratch("tandem-sm-train-")
    rng = np.random.default_rng(0)
    for c in range(n_classes):
        os.makedirs(os.path.join(root, f"class{c}"))
        colour = np.array([255 * (c & 1), 255 * ((c >> 1) & 1), 128], np.float32)
        for i in range(per_class):
            pixels = np.clip(colour + rng.normal(0, 30, (size, size, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(os.path.join(root, f"class{c}", f"{i:03d}.jpg"), quality=90)
    return root


def token_channel():
    d = scratch("tandem-sm-token-")
    with open(os.path.join(d, "token"), "w") as f:
        f.write("b2c7a1e0f5d94e3c8a6b1d2e3f4a5b6c")
    return d


TRAIN = class_folders()
TOKEN = token_channel()


def simulate(checkpoints, python_dataset=False, **overrides):
    spec = launch_job.job_spec(TRAIN, checkpoints, TOKEN, python_dataset)
    job = launch_job.simulation_job(spec, gpus=2, **{**SMALL, **overrides})
    path = os.path.join(scratch("tandem-sm-job-"), "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    run_dir = scratch("tandem-sm-run-")
    env = dict(os.environ, PYTHONPATH=ARGS.module_dir, TANDEM_BINARY=ARGS.tandem)
    run = subprocess.run([ARGS.tandem, "simulate", "--job", path, "--run-dir", run_dir, "--timeout", "400"],
                         env=env, capture_output=True, text=True, timeout=480)
    return run.returncode, run.stdout + run.stderr, run_dir


def epoch_losses(out):
    return [float(m) for m in re.findall(r"epoch=\d+ loss=([\d.]+)", out)]


class SageMakerExampleTest(unittest.TestCase):
    def check_trained(self, code, out, run_dir, epochs):
        self.assertEqual(code, 0, out[-8000:])
        table = re.findall(r"^(algo-\d)\s+(trainer|worker)\s+(.*)$", out, re.M)
        self.assertEqual(sorted(r for _, r, _ in table), ["trainer", "worker", "worker"], out[-4000:])
        self.assertTrue(all(s.strip() == "exited 0" for _, _, s in table), table)
        losses = epoch_losses(out)
        self.assertEqual(len(losses), epochs, out[-4000:])
        self.assertLess(losses[-1], losses[0], out[-4000:])
        # 2 ranks under the toolkit's torchrun on the GPU host; the data hosts ran the script once.
        self.assertIn("[algo-2/1]", out)
        self.assertNotIn("[algo-1/", out)
        models = glob.glob(os.path.join(run_dir, "algo-*", "model", "model.pt"))
        self.assertEqual(len(models), 1, models)
        self.assertNotIn("THE DATA PLANE IS OPEN", out, "the token channel authenticates the job")

    def test_the_example_trains_on_the_cpp_pipeline_and_a_second_run_says_it_is_complete(self):
        checkpoints = scratch("tandem-sm-ckpt-")
        code, out, run_dir = simulate(checkpoints)
        self.check_trained(code, out, run_dir, 3)
        with open(os.path.join(run_dir, "algo-2", "output", "data", "summary.json")) as f:
            summary = json.load(f)
        self.assertRegex(summary["settings"]["pipeline"], r"random_resized_crop\(size=32", "the script's pipeline")
        self.assertEqual(summary["world_size"], 2, "both ranks trained")
        self.assertTrue(os.path.exists(os.path.join(checkpoints, "launcher.pt")), "synced to the checkpoint store")
        # The same job again: restored from the store, it is complete.
        code, out, run_dir = simulate(checkpoints)
        self.assertEqual(code, 0, out[-6000:])
        self.assertRegex(out, r"launcher\.pt is at epoch 3 of 3: training is complete")
        self.assertEqual(epoch_losses(out), [])
        self.assertEqual(len(glob.glob(os.path.join(run_dir, "algo-*", "model", "model.pt"))), 1)
        # More epochs: it resumes at epoch 3, and its checkpoint is what the store keeps (the
        # data hosts' untouched copies of the old one do not overwrite it).
        code, out, _ = simulate(checkpoints, epochs=4)
        self.assertEqual(code, 0, out[-6000:])
        self.assertEqual(len(epoch_losses(out)), 1, out[-4000:])
        self.assertIn("epoch=3 ", out)
        code, out, _ = simulate(checkpoints, epochs=4)
        self.assertEqual(code, 0, out[-6000:])
        self.assertRegex(out, r"launcher\.pt is at epoch 4 of 4: training is complete")
        # Another model on the same checkpoints: refused, naming the checkpoint.
        code, out, _ = simulate(checkpoints, epochs=5, model="resnet34")
        self.assertNotEqual(code, 0)
        self.assertRegex(out, r"launcher\.pt is a checkpoint of another job \(resnet18 on ")

    def test_the_example_trains_on_its_python_dataset(self):
        code, out, run_dir = simulate(scratch("tandem-sm-ckpt-"), python_dataset=True,
                                      **{"tandem-data-args": {"size": 32}})
        self.check_trained(code, out, run_dir, 3)
        # The report names the Python dataset, its fields and arguments, not "generated samples".
        with open(os.path.join(run_dir, "algo-2", "output", "data", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["settings"]["dataset"],
                         'class_folders.py:ClassFolders (fields image:uint8[3,32,32],label:int64[]; args {"size":32})')
        self.assertEqual(summary["settings"]["pipeline"], "the dataset's own __getitem__")
        with open(os.path.join(run_dir, "algo-2", "output", "data", "report.html")) as f:
            self.assertIn("class_folders.py:ClassFolders", f.read())
        # Its losses are window means (half the run each here), as the log smooths them.
        self.assertLess(summary["final_loss"], summary["first_loss"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
