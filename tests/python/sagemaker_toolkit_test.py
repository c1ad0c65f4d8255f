#!/usr/bin/python3
"""`tandem simulate --job` and `--every-host` give each host what SageMaker's training toolkit
gives it (docs/sagemaker.md, "simulate is the toolkit"): every host runs toolkit/probe.py, which
prints what it was given, and the test holds it to the toolkit's and the SDK's sources
(sagemaker-training-toolkit environment.py, mapping.py, process.py, torch_distributed.py;
sagemaker-python-sdk estimator.py):

- SM_HOSTS, SM_CURRENT_HOST, SM_CURRENT_INSTANCE_GROUP(_HOSTS), SM_INSTANCE_GROUPS(_DICT),
  SM_MODEL_DIR, SM_CHANNEL_*, SM_CHANNELS, SM_HPS, SM_HP_*, SM_USER_ARGS, SM_NUM_GPUS ...;
- hyperparameters.json JSON-encoded (the PyTorch estimator) or str()'d (the generic
  Estimator), and the script's argv as the toolkit builds it (sorted --key value, Python's
  str(), through /bin/sh);
- a channel given to one group only exists on that group's hosts;
- torch_distributed on the GPU group: 2 ranks there with torchrun's variables, the data
  hosts run once; without sagemaker_distribution_instance_groups every group runs torchrun;
- the checkpoints folder is restored to every host and what they wrote comes back;
- a hyperparameter the toolkit's unquoted shell line would break (a list's "[1, 2]", a
  pipeline's parentheses) is refused before any host starts, naming it.

    /usr/bin/python3 tests/python/sagemaker_toolkit_test.py --module-dir build/python --tandem build/tandem
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from workers import parse_args

ARGS = parse_args()
HERE = os.path.dirname(os.path.abspath(__file__))
HP = {"epochs": 3, "lr": 0.5, "name": "x", "flag": True, "tandem-data-args": {"size": 64},
      "sagemaker_distribution_instance_groups": ["dnn_group"]}


def job(estimator="PyTorch", hyperparameters=HP, checkpoints=None):
    train = tempfile.mkdtemp(prefix="tandem-probe-train-")
    return {"estimator": estimator, "job_name": "probe-job", "entry_point": "probe.py",
            "source_dir": os.path.join(HERE, "toolkit"),
            "instance_groups": [{"instance_group_name": "data_group", "instance_type": "ml.c5.xlarge", "instance_count": 2},
                                {"instance_group_name": "dnn_group", "instance_type": "ml.g5.12xlarge", "instance_count": 1}],
            "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": ["dnn_group"]},
            "hyperparameters": hyperparameters,
            "inputs": {"train": {"path": train, "input_mode": "FastFile", "instance_groups": ["data_group"]}},
            "checkpoint_dir": checkpoints or tempfile.mkdtemp(prefix="tandem-probe-ckpt-"),
            "gpus": {"dnn_group": 2}}


def simulate(spec):
    path = os.path.join(tempfile.mkdtemp(prefix="tandem-probe-job-"), "job.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    run = subprocess.run([ARGS.tandem, "simulate", "--job", path, "--timeout", "120"], capture_output=True, text=True,
                         timeout=180, env=dict(os.environ, PYTHONPATH=ARGS.module_dir))
    probes = {}
    for line in run.stdout.splitlines():
        if "PROBE " in line:
            name = line[1:line.index("]")]  # [algo-2/1] PROBE {...}
            probes[name] = json.loads(line.split("PROBE ", 1)[1])
    return run, probes


class ToolkitTest(unittest.TestCase):
    def test_each_host_gets_the_toolkits_environment_and_the_gpu_group_runs_two_ranks(self):
        spec = job()
        run, probes = simulate(spec)
        self.assertEqual(run.returncode, 0, run.stdout[-4000:] + run.stderr[-2000:])
        self.assertEqual(sorted(probes), ["algo-1", "algo-2/0", "algo-2/1", "algo-3"], run.stdout[-3000:])
        for name, p in probes.items():
            env, host = p["env"], name.split("/")[0]
            self.assertEqual(env["SM_CURRENT_HOST"], host)
            self.assertEqual(json.loads(env["SM_HOSTS"]), ["algo-1", "algo-2", "algo-3"])
            group = "dnn_group" if host == "algo-2" else "data_group"
            self.assertEqual(env["SM_CURRENT_INSTANCE_GROUP"], group)
            self.assertEqual(json.loads(env["SM_INSTANCE_GROUPS"]), ["data_group", "dnn_group"])
            self.assertEqual(sorted(json.loads(env["SM_INSTANCE_GROUPS_DICT"])), ["data_group", "dnn_group"])
            self.assertEqual(env["SM_IS_HETERO"], "true")
            self.assertEqual(json.loads(env["SM_DISTRIBUTION_INSTANCE_GROUPS"]), ["dnn_group"])
            self.assertEqual(env["SM_MODEL_DIR"].rsplit("/", 2)[-2:], [host, "model"])
            self.assertEqual(env["SM_USER_ENTRY_POINT"], "probe.py")
            self.assertEqual(env["SM_MODULE_NAME"], "probe")
            self.assertEqual(env["TRAINING_JOB_NAME"], "probe-job")
            # The hyperparameters as the toolkit decodes them, without the SDK's own keys.
            self.assertEqual(json.loads(env["SM_HPS"]), {k: v for k, v in HP.items() if not k.startswith("sagemaker_")})
            self.assertEqual(env["SM_HP_EPOCHS"], "3")
            self.assertEqual(env["SM_HP_NAME"], "x")
            self.assertEqual(env["SM_HP_FLAG"], "true")
            # SM_HP_TANDEM-DATA-ARGS is set, but no name with '-' survives the toolkit's /bin/sh
            # (dash drops it): a script reads such a hyperparameter from SM_HPS.
            self.assertNotIn("SM_HP_TANDEM-DATA-ARGS", env)
            expected_argv = ["--epochs", "3", "--flag", "True", "--lr", "0.5", "--name", "x",
                             "--tandem-data-args", "size=64"]  # sorted; Python's str(); a dict as k=v
            self.assertEqual(p["argv"], expected_argv)
            self.assertEqual(json.loads(env["SM_USER_ARGS"]), expected_argv)
            # hyperparameters.json as the PyTorch estimator writes it: every value json.dumps'ed.
            hp = p["hyperparameters_json"]
            self.assertEqual((hp["epochs"], hp["name"], hp["flag"]), ("3", '"x"', "true"))
            self.assertEqual(hp["tandem-data-args"], '{"size": 64}')
            self.assertEqual(hp["sagemaker_program"], '"probe.py"')
            self.assertEqual(p["cwd"], spec["source_dir"])
            if host == "algo-2":
                self.assertEqual(env["SM_NUM_GPUS"], "2")
                self.assertEqual(p["channels"], [], "the train channel goes to the data group only")
                self.assertNotIn("SM_CHANNEL_TRAIN", env)
                self.assertEqual((env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]), ("2", "2"))
                self.assertEqual(env["RANK"], name.split("/")[1])
            else:
                self.assertEqual(env["SM_NUM_GPUS"], "0")
                self.assertEqual(p["channels"], ["train"])
                self.assertTrue(os.path.isdir(env["SM_CHANNEL_TRAIN"]))
                self.assertEqual(json.loads(env["SM_CHANNELS"]), ["train"])
                self.assertNotIn("RANK", env, "the data group runs the script once, not under torchrun")
        # Every host's checkpoints went to the store; a second run finds them all on every host.
        self.assertEqual(sorted(os.listdir(spec["checkpoint_dir"])),
                         ["algo-1-rank-", "algo-2-rank0", "algo-2-rank1", "algo-3-rank-", "latest"])
        run, probes = simulate(job(checkpoints=spec["checkpoint_dir"]))
        self.assertEqual(run.returncode, 0, run.stdout[-3000:])
        for p in probes.values():
            self.assertEqual(len(p["found_checkpoints"]), 5, p["found_checkpoints"])
        # The trainer rewrote "latest"; the data hosts' untouched copies of the old one did not win.
        with open(os.path.join(spec["checkpoint_dir"], "latest")) as f:
            self.assertEqual(f.read(), "5")

    def test_the_generic_estimator_sends_str_and_the_script_gets_what_the_toolkit_makes_of_it(self):
        run, probes = simulate(job(estimator="Estimator", hyperparameters={**HP, "sizes": [1, 2]}))
        self.assertEqual(run.returncode, 0, run.stdout[-4000:] + run.stderr[-2000:])
        p = probes["algo-1"]
        hp = p["hyperparameters_json"]
        self.assertEqual((hp["epochs"], hp["flag"], hp["sizes"], hp["name"]), ("3", "True", "[1, 2]", "x"))
        self.assertEqual(hp["tandem-data-args"], "{'size': 64}")
        hps = json.loads(p["env"]["SM_HPS"])
        self.assertEqual((hps["flag"], hps["sizes"], hps["tandem-data-args"]), ("True", [1, 2], "{'size': 64}"))

    def test_without_the_groups_hyperparameter_every_group_runs_torchrun(self):
        hp = {k: v for k, v in HP.items() if k != "sagemaker_distribution_instance_groups"}
        run, probes = simulate(job(hyperparameters=hp))
        self.assertEqual(run.returncode, 0, run.stdout[-4000:])
        # The PyTorch estimator passes no groups to the container: each host's toolkit takes
        # its own, so the two data hosts are one torchrun job of 2 nodes, 1 process each.
        self.assertEqual(sorted(probes), ["algo-1/0", "algo-2/0", "algo-2/1", "algo-3/0"])
        self.assertEqual(probes["algo-1/0"]["env"]["WORLD_SIZE"], "2")
        self.assertEqual({probes["algo-1/0"]["env"]["RANK"], probes["algo-3/0"]["env"]["RANK"]}, {"0", "1"})

    def test_a_value_the_toolkits_shell_line_would_break_is_refused_before_any_host_starts(self):
        run, probes = simulate(job(hyperparameters={"tandem-pipeline": "decode,random_resized_crop(224),hflip"}))
        self.assertEqual(run.returncode, 3, run.stdout[-3000:] + run.stderr[-3000:])
        self.assertEqual(probes, {})
        out = run.stdout + run.stderr
        self.assertIn("'tandem-pipeline' = 'decode,random_resized_crop(224),hflip' ('(' is shell syntax)", out)
        self.assertIn("/bin/sh", out)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
