#!/usr/bin/python3
"""tandem.serve() and tandem.role(): one script on every host (issue 31).

    /usr/bin/python3 tests/python/serve_test.py --module-dir build/python --tandem build/tandem

- The one-script job under `tandem simulate --every-host`: 1 trainer host and 2 data hosts
  all run tests/python/one_script.py; the data hosts serve (serve() becomes tandem launch),
  the trainer's loss falls, it releases them, and every host exits 0.
- role() on a SageMaker root: a data host and a trainer host, the trainer's workers.
- hyperparameters.json under serve() is the script's: its tandem- keys are tandem's, the
  others are left to the script and named in the log; a tandem- key tandem does not know
  is an error naming it; plain `tandem launch` still refuses a key it does not know.
- A bad setting raises ValueError with tandem's message.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from workers import parse_args, require

ARGS = parse_args()
require("numpy")
import tandem  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def sagemaker_root(current, hyperparameters=None):
    """A SageMaker root of a job with a GPU group (algo-1) and a data group (algo-2, algo-3)."""
    root = tempfile.mkdtemp(prefix="tandem-serve-root-")
    os.makedirs(os.path.join(root, "input", "config"))
    groups = [("gpu_group", "ml.p4d.24xlarge", ["algo-1"]), ("data_group", "ml.c5.18xlarge", ["algo-2", "algo-3"])]
    group = next(g for g in groups if current in g[2])
    config = {"current_host": current, "current_group_name": group[0], "current_instance_type": group[1],
              "hosts": ["algo-1", "algo-2", "algo-3"], "network_interface_name": "eth0",
              "instance_groups": [{"instance_group_name": n, "instance_type": t, "hosts": h} for n, t, h in groups]}
    with open(os.path.join(root, "input", "config", "resourceconfig.json"), "w") as f:
        json.dump(config, f)
    if hyperparameters is not None:
        with open(os.path.join(root, "input", "config", "hyperparameters.json"), "w") as f:
            json.dump(hyperparameters, f)
    return root


HOSTS = ["algo-1=127.0.0.1:7101", "algo-2=127.0.0.1:7102", "algo-3=127.0.0.1:7103"]


class OneScriptTest(unittest.TestCase):
    def test_every_host_runs_the_script_the_trainer_learns_and_all_exit_0(self):
        env = dict(os.environ, PYTHONPATH=ARGS.module_dir)
        run = subprocess.run([ARGS.tandem, "simulate", "--every-host", "--worker-hosts", "2", "--data", "synthetic",
                              "--image-size", "16", "--num-classes", "4", "--timeout", "240", "--",
                              sys.executable, os.path.join(HERE, "one_script.py")],
                             env=env, capture_output=True, text=True, timeout=300)
        out = run.stdout + run.stderr
        self.assertEqual(run.returncode, 0, out[-6000:])
        table = re.findall(r"^(algo-\d)\s+(trainer|worker)\s+(.*)$", run.stdout, re.M)
        self.assertEqual(sorted(r for _, r, _ in table), ["trainer", "worker", "worker"], run.stdout)
        for host, role, status in table:
            self.assertEqual(status.strip(), "exited 0", f"{host} ({role}): {out[-4000:]}")
        m = re.search(r"one_script: 80 steps, loss ([\d.]+) -> ([\d.]+)", out)
        self.assertIsNotNone(m, out[-4000:])
        self.assertLess(float(m.group(2)), float(m.group(1)))
        self.assertEqual(out.count("shutdown requested by the trainer"), 2, "both data hosts were released")
        self.assertIn("summary.json", run.stdout, "the trainer host's feed wrote the run's summary")


class RoleTest(unittest.TestCase):
    def role(self, current, hyperparameters=None, **settings):
        return tandem.role(sagemaker_root=sagemaker_root(current, hyperparameters), host_map=HOSTS, **settings)

    def test_a_data_host_serves_and_a_trainer_host_dials_every_data_host(self):
        self.assertEqual(self.role("algo-2")["role"], "worker")
        trainer = self.role("algo-1")
        self.assertEqual(trainer["role"], "trainer")
        self.assertEqual(trainer["group"], "gpu_group")
        self.assertEqual(sorted(trainer["workers"]), ["127.0.0.1:7102", "127.0.0.1:7103"])
        self.assertFalse(trainer["ranks_started"])

    def test_hyperparameters_are_the_scripts_but_their_tandem_keys(self):
        hp = {"epochs": "3", "model_name": "resnet", "tandem-image-size": "32", "sagemaker_program": "train.py"}
        self.assertEqual(self.role("algo-2", hp)["role"], "worker")
        # A tandem- key tandem does not know is an error naming it.
        with self.assertRaisesRegex(ValueError, "tandem-image-sise"):
            self.role("algo-2", {"tandem-image-sise": "32"})
        # A typo of a tandem- key gets tandem's guess, with the prefix (as the same typo as a flag does).
        with self.assertRaisesRegex(ValueError, r"unknown setting 'tandem-io-thread'.*did you mean 'tandem-io-threads'"):
            self.role("algo-2", {"tandem-io-thread": "4"})
        with self.assertRaisesRegex(ValueError, r"did you mean 'tandem_io_threads'"):
            self.role("algo-2", {"tandem_io_thread": "4"})
        # A pipeline as a list, in either SDK's encoding (docs/configuration.md says a list works).
        steps = ["decode", "random_resized_crop(32)", "hflip"]
        for form in (json.dumps(steps), str(steps)):
            self.assertEqual(self.role("algo-2", {"tandem-pipeline": form})["role"], "worker", form)
        # A bad value of a tandem- key names it.
        with self.assertRaisesRegex(ValueError, "tandem-image-size"):
            self.role("algo-2", {"tandem-image-size": "big"})
        # Without serve(), hyperparameters.json is tandem's own, and a key it does not know is refused.
        root = sagemaker_root("algo-2", hp)
        run = subprocess.run([ARGS.tandem, "launch", "--role-only", "--sagemaker-root", root,
                              "--host-map", ",".join(HOSTS)], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if k != "TANDEM_SCRIPT_HYPERPARAMETERS"})
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("unknown setting 'model_name'", run.stdout + run.stderr)

    def test_the_scripts_keys_are_named_in_the_log(self):
        root = sagemaker_root("algo-2", {"epochs": "3", "model_name": "resnet", "tandem-data": "synthetic"})
        env = dict(os.environ, TANDEM_SCRIPT_HYPERPARAMETERS="1")
        run = subprocess.run([ARGS.tandem, "launch", "--role-only", "--sagemaker-root", root,
                              "--host-map", ",".join(HOSTS)], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertRegex(run.stdout, r"hyperparameters.json: epochs, model_name left to your script")

    def test_a_list_hyperparameter_in_either_form_through_inspect_and_launch(self):
        # The PyTorch estimator JSON-encodes a list; the generic Estimator sends str() of it.
        hosts = ["algo-1=127.0.0.1:7101", "algo-2=127.0.0.9:7102", "algo-3=127.0.0.9:7103"]
        for form in (json.dumps(hosts), str(hosts)):
            root = sagemaker_root("algo-1", {"host-map": form})
            inspect = subprocess.run([ARGS.tandem, "inspect", "--sagemaker-root", root], capture_output=True,
                                     text=True, timeout=60)
            self.assertEqual(inspect.returncode, 0, inspect.stdout + inspect.stderr)
            self.assertEqual(sorted(json.loads(inspect.stdout)["workers"]), ["127.0.0.9:7102", "127.0.0.9:7103"], form)
            launch = subprocess.run([ARGS.tandem, "launch", "--role-only", "--sagemaker-root", root],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(launch.returncode, 0, launch.stdout + launch.stderr)
            self.assertEqual(sorted(json.loads(launch.stdout.splitlines()[-1])["workers"]),
                             ["127.0.0.9:7102", "127.0.0.9:7103"], form)

    def test_a_bad_setting_raises_value_error_with_tandems_message(self):
        with self.assertRaisesRegex(ValueError, r"image-size"):
            self.role("algo-2", image_size="big")
        with self.assertRaisesRegex(ValueError, r"unknown|not-a-setting"):
            self.role("algo-2", not_a_setting=1)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
