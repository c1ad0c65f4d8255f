#!/usr/bin/python3
"""How a script's feed ends, and what it takes from the SageMaker host (issue 48), with real
`tandem worker` processes and real signals:

- SIGTERM reaches the feed even when the script installed its own handler first: while
  the feed connects (Feed() raises tandem.Interrupted, exit 75, in seconds, not at the
  connect timeout), and while it iterates (the loop ends, the script's handler ran, the
  summary says interrupted); without a handler of the script's the process exits 75 and
  the summary says interrupted.
- The workers a feed releases hear why: finished, crashed (the exception), stopped.
- A Python dataset's arguments are part of what the feed checks against its workers.
- tandem.Feed on a SageMaker host takes the tandem- settings of hyperparameters.json
  (keyword arguments win), a pipeline given as a list included.

    /usr/bin/python3 tests/python/feed_ending_test.py --module-dir build/python --tandem build/tandem
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from workers import Workers, free_ports, parse_args, require

ARGS = parse_args()
require("numpy")
import tandem  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "python_datasets", "datasets.py")
DATA = dict(data="synthetic", image_size=8, num_classes=4)


def script(body):
    """A Python process running `body` with the tandem module; its output is read after it ends."""
    path = tempfile.mktemp(suffix=".py", prefix="tandem-feed-ending-")
    with open(path, "w") as f:
        f.write("import json, os, signal, sys, time\nimport tandem\n" + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=ARGS.module_dir)
    return subprocess.Popen([sys.executable, path], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def stop_when(proc, marker_file, timeout=60):
    """SIGTERM to `proc` once it has written `marker_file` (it reached the point under test)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(marker_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.communicate(timeout=10)[0] if proc.poll() is not None else "(still running)"
            raise AssertionError(f"the script never reached the marker: {out[-3000:]}")
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)


class SigtermTest(unittest.TestCase):
    def test_the_scripts_own_handler_does_not_hide_a_stop_while_the_feed_connects(self):
        marker = tempfile.mktemp()
        dead = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens: the feed waits for it
        proc = script(f"""
            stop = []
            signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # before Feed(): a common pattern
            open({marker!r}, "w").close()
            try:
                tandem.Feed([{dead!r}], batch_size=4, steps=5, connect_timeout=90, data="synthetic")
            except tandem.Interrupted as e:
                print("interrupted:", e, "handler ran:", bool(stop), flush=True)
                raise
        """)
        started = time.monotonic()
        stop_when(proc, marker)
        out = proc.communicate(timeout=30)[0]
        self.assertLess(time.monotonic() - started, 30, "the stop waited for the connect timeout")
        self.assertEqual(proc.returncode, 75, out)
        self.assertIn("handler ran: True", out)
        self.assertIn("SIGTERM while tandem.Feed connected", out)

    def run_until_stopped(self, handler):
        summary = os.path.join(tempfile.mkdtemp(), "summary.json")
        marker = tempfile.mktemp()
        install = "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))"
        proc = script(f"""
            stop = []
            {install if handler == "before" else ""}
            n = 0
            with tandem.Feed(local_threads=1, batch_size=4, steps=100000, emulate_step_ms=20,
                             summary_json={summary!r}, **{DATA!r}) as feed:
                {install if handler == "after" else ""}
                for images, labels in feed:
                    n += 1
                    feed.log(loss=1.0 / n)
                    if n == 10:
                        open({marker!r}, "w").close()
            print("loop ended after", n, "batches; handler ran:", bool(stop), flush=True)
        """)
        stop_when(proc, marker)
        out = proc.communicate(timeout=60)[0]
        with open(summary) as f:
            return proc.returncode, out, json.load(f)

    def test_the_scripts_own_handler_ends_the_loop_and_the_summary_says_interrupted(self):
        for handler in ("before", "after"):  # installed before Feed(), or after it opened
            code, out, summary = self.run_until_stopped(handler)
            self.assertEqual(code, 0, out)
            self.assertIn("handler ran: True", out, handler)
            self.assertTrue(summary["interrupted"], (handler, summary))
            self.assertGreaterEqual(summary["steps"], 10)

    def test_without_a_handler_the_process_exits_75_and_the_summary_says_interrupted(self):
        code, out, summary = self.run_until_stopped(handler=None)
        self.assertEqual(code, 75, out)
        self.assertNotIn("loop ended", out)
        self.assertTrue(summary["interrupted"], summary)


class WhyTheScriptEndedTest(unittest.TestCase):
    def test_released_workers_hear_that_the_script_crashed(self):
        with Workers(ARGS.tandem, 1, **DATA) as w:
            try:
                with tandem.Feed(w.targets, batch_size=4, steps=50, release_workers=True, **DATA) as feed:
                    next(iter(feed))
                    raise KeyError("no such column")
            except KeyError:
                pass
            self.assertEqual(w.wait_exit(0, 30), 0)
            log = w.log(w.ports[0])
        self.assertIn("training script crashed: KeyError", log)
        self.assertNotIn("training script finished", log)

    def test_released_workers_hear_that_the_script_finished(self):
        with Workers(ARGS.tandem, 1, **DATA) as w:
            with tandem.Feed(w.targets, batch_size=4, steps=3, release_workers=True, **DATA) as feed:
                for _ in feed:
                    pass
            self.assertEqual(w.wait_exit(0, 30), 0)
            self.assertIn("training script finished", w.log(w.ports[0]))


class PythonDatasetIdentityTest(unittest.TestCase):
    def test_a_feed_given_other_dataset_arguments_is_refused(self):
        served = dict(data=f"python:{FIXTURE}:Squares", data_args='{"n": 64, "size": 8}')
        with Workers(ARGS.tandem, 1, python="/usr/bin/python3", **served) as w:
            with self.assertRaisesRegex(ValueError, r"Python dataset arguments .*size.*8.*size.*4"):
                tandem.Feed(w.targets, batch_size=4, steps=2, connect_timeout=60,
                            data=served["data"], data_args='{"n": 64, "size": 4}')
            with tandem.Feed(w.targets, batch_size=4, steps=1, connect_timeout=60, data=served["data"],
                             data_args='{"size": 8, "n": 64}') as feed:  # the same, in another order
                self.assertEqual(next(iter(feed)).images.shape, (4, 3, 8, 8))


def sagemaker_root(hyperparameters):
    """A SageMaker host of a GPU group (algo-1) with hyperparameters.json as the PyTorch estimator writes it."""
    root = tempfile.mkdtemp(prefix="tandem-feed-root-")
    os.makedirs(os.path.join(root, "input", "config"))
    config = {"current_host": "algo-1", "current_group_name": "gpu", "current_instance_type": "ml.p4d.24xlarge",
              "hosts": ["algo-1"], "network_interface_name": "lo",
              "instance_groups": [{"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge",
                                   "hosts": ["algo-1"]}]}
    with open(os.path.join(root, "input", "config", "resourceconfig.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(root, "input", "config", "hyperparameters.json"), "w") as f:
        json.dump({k: json.dumps(v) for k, v in hyperparameters.items()}, f)
    return root


class HyperparametersTest(unittest.TestCase):
    def test_the_feed_takes_the_tandem_settings_of_hyperparameters_json(self):
        root = sagemaker_root({"epochs": 3, "tandem-data": "synthetic", "tandem-image-size": 8,
                               "tandem-num-classes": 4, "tandem-io-threads": 4})
        with tandem.Feed([], local_threads=1, batch_size=2, steps=1, sagemaker_root=root) as feed:
            self.assertEqual(feed.dataset["sample_shape"], [3, 8, 8])
            self.assertEqual(feed.dataset["num_classes"], 4)
        with tandem.Feed([], local_threads=1, batch_size=2, steps=1, sagemaker_root=root, image_size=12) as feed:
            self.assertEqual(feed.dataset["sample_shape"], [3, 12, 12], "a keyword argument wins")

    def test_a_pipeline_as_a_list(self):
        pipeline = ["decode", "random_resized_crop(8)", {"op": "hflip", "p": 0.5}]
        root = sagemaker_root({"tandem-data": "mnist:/usr/share/datasets/fashion-mnist", "tandem-pipeline": pipeline})
        with tandem.Feed([], local_threads=1, batch_size=2, steps=1, sagemaker_root=root) as feed:
            self.assertEqual(feed.dataset["sample_shape"], [1, 8, 8])
        with tandem.Feed([], local_threads=1, batch_size=2, steps=1, data="mnist:/usr/share/datasets/fashion-mnist", pipeline=pipeline) as feed:
            self.assertEqual(feed.dataset["sample_shape"], [1, 8, 8])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
