#!/usr/bin/python3
"""tandem.Feed as a launched training script meets it (issue 24), against real `tandem worker`
processes on loopback: a dataset learnt from the workers (no data on this host), a setting
that differs named, workers/rank/world/settings from tandem launch's environment or from a
SageMaker resourceconfig.json, a new epoch per pass, and the run's records.

    /usr/bin/python3 tests/python/feed_run_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) only when numpy or PIL is missing; the TandemDataset tests are skipped
alone without torch."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from contextlib import contextmanager

from workers import Workers, parse_args, require

ARGS = parse_args()
require("numpy", "PIL")
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import tandem  # noqa: E402

SYNTHETIC = dict(data="synthetic", image_size=16, dataset_size=64)
HAS_TORCH = importlib.util.find_spec("torch") is not None


def make_image_folder(root, classes=("cat", "dog"), per_class=6):
    rng = np.random.default_rng(0)
    for c in classes:
        os.makedirs(os.path.join(root, c))
        for i in range(per_class):
            pixels = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(root, c, f"{i}.png"))


def run_alone(script, cwd):
    """`script` in its own Python in `cwd`, outside any launcher or SageMaker root."""
    env = {**os.environ, "PYTHONPATH": ARGS.module_dir}
    for k in ("RANK", "WORLD_SIZE", "TANDEM_WORKERS", "TANDEM_SETTINGS", "TANDEM_SAGEMAKER_ROOT"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-c", script], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@contextmanager
def environment(**values):
    """os.environ with `values` set (None: unset), restored afterwards."""
    before = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def indices_of(feed):
    return [b.indices.tolist() for b in feed]


class LearnTest(unittest.TestCase):
    """Workers serve an image folder this process does not have."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        folder = os.path.join(cls.tmp.name, "train")
        make_image_folder(folder)
        cls.workers = Workers(ARGS.tandem, 1, data=f"imagefolder:{folder}", image_size=16)
        # data="imagefolder" reads <sagemaker_root>/input/data/train: not on this host.
        cls.here = dict(data="imagefolder", sagemaker_root=os.path.join(cls.tmp.name, "no-such-root"),
                        connect_timeout=60, batch_size=4)

    @classmethod
    def tearDownClass(cls):
        cls.workers.close()
        cls.tmp.cleanup()

    def test_the_dataset_is_learnt_from_the_workers(self):
        with tandem.Feed(self.workers.targets, steps=2, image_size=16, **self.here) as feed:
            self.assertEqual(feed.dataset["class_names"], ["cat", "dog"])
            batches = list(feed)
        self.assertEqual(len(batches), 2)
        self.assertEqual(batches[0]["image"].shape, (4, 3, 16, 16))

    def test_a_setting_that_differs_is_named(self):
        with self.assertRaisesRegex(ValueError, r"serves pipeline \.\.\.,random_resized_crop\(size=16,.*, this feed "
                                                r"expects \.\.\.,random_resized_crop\(size=24,.* \(--pipeline"):
            tandem.Feed(self.workers.targets, steps=2, image_size=24, **self.here)
        with self.assertRaisesRegex(ValueError, r"seed 0, this feed expects 7 \(--seed\)"):
            tandem.Feed(self.workers.targets, steps=2, image_size=16, seed=7, **self.here)

    def test_local_threads_without_the_data_is_one_clear_error(self):
        with self.assertRaisesRegex(ValueError, r"local_threads=1 make batches from this host's copy of --data "
                                                r"imagefolder, which is not here: .*local_threads=0"):
            tandem.Feed(self.workers.targets, steps=2, image_size=16, local_threads=1, **self.here)

    def test_each_epoch_has_its_own_augmentation(self):
        def images_by_index(epoch):
            with tandem.Feed(self.workers.targets, epoch=epoch, image_size=16, **self.here) as feed:
                return {int(i): b["image"][k].copy() for b in feed for k, i in enumerate(b.indices)}
        first, second, again = images_by_index(0), images_by_index(1), images_by_index(0)
        self.assertEqual(sorted(first), sorted(second))  # one pass over the same samples
        self.assertTrue(any(not np.array_equal(first[i], second[i]) for i in first), "epoch 1 crops as epoch 0 did")
        self.assertTrue(all(np.array_equal(first[i], again[i]) for i in first), "epoch 0 is not reproduced")

    @unittest.skipUnless(HAS_TORCH, "torch is missing")
    def test_tandem_dataset_learns_too(self):
        from tandem.torch import TandemDataset
        ds = TandemDataset(self.workers.targets, image_size=16, rank=0, world=1, **self.here)
        self.assertEqual(ds.dataset_info["num_classes"], 2)
        self.assertEqual(len(list(ds)), len(ds))


class SyntheticWorkerTest(unittest.TestCase):
    """One real worker serving SYNTHETIC for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.workers = Workers(ARGS.tandem, 1, **SYNTHETIC)

    @classmethod
    def tearDownClass(cls):
        cls.workers.close()


class PlaceTest(SyntheticWorkerTest):
    """Workers, rank, world and settings found without arguments."""

    def test_feed_takes_everything_from_tandem_launchs_environment(self):
        settings = {"data": "synthetic", "image-size": "16", "dataset-size": "64", "batch-size": "8", "steps": "3",
                    "lr": "0.5", "model": "resnet18"}  # the trainer's own are left out
        with environment(TANDEM_WORKERS=",".join(self.workers.targets), RANK="1", WORLD_SIZE="2",
                         TANDEM_SETTINGS=json.dumps(settings)):
            with tandem.Feed() as feed:
                self.assertEqual((len(feed), feed.batch_size), (3, 8))
                launched = indices_of(feed)
            with tandem.Feed(batch_size=4) as feed:  # a keyword argument wins
                self.assertEqual(feed.batch_size, 4)
        with tandem.Feed(self.workers.targets, rank=1, world=2, batch_size=8, steps=3, **SYNTHETIC) as feed:
            self.assertEqual(launched, indices_of(feed))

    def test_no_workers_anywhere_names_what_was_looked_at(self):
        with environment(TANDEM_WORKERS=None):
            with self.assertRaisesRegex(ValueError, r"no data workers for this feed: workers= was not given, "
                                                    r"\$TANDEM_WORKERS is not set .*has no data worker group"):
                tandem.Feed(None, **SYNTHETIC)
        with environment(TANDEM_WORKERS=""):
            with self.assertRaisesRegex(ValueError, r"tandem launch found no data workers for this job"):
                tandem.Feed(None, **SYNTHETIC)

    def test_a_sagemaker_script_finds_the_cpu_group_and_leaves_its_records(self):
        """A script on the GPU host of a two-group job, as SageMaker starts it: its own process."""
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "input", "config"))
            with open(os.path.join(root, "input", "config", "resourceconfig.json"), "w") as f:
                json.dump({"current_host": "algo-2", "current_group_name": "gpu", "hosts": ["algo-1", "algo-2"],
                           "current_instance_type": "ml.g5.xlarge",
                           "instance_groups": [
                               {"instance_group_name": "cpu", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
                               {"instance_group_name": "gpu", "instance_type": "ml.g5.xlarge", "hosts": ["algo-2"]}]},
                          f)
            script = textwrap.dedent(f"""
                import sys, tandem
                with tandem.Feed(None, sagemaker_root={root!r}, batch_size=4, steps=6, log_every=2,
                                 data="synthetic", image_size=16, dataset_size=64) as feed:
                    for i, batch in enumerate(feed):
                        feed.log(loss=1.0 / (i + 1), lr=0.1)
                    print(sorted(s["name"] for s in feed.stats()["sources"]))
                    try:
                        feed.log(accuracy=0.5)
                    except ValueError as e:
                        print(e, file=sys.stderr)
                """)
            env = {**os.environ, "PYTHONPATH": ARGS.module_dir, "TANDEM_HOST_MAP": f"algo-1={self.workers.targets[0]}"}
            for k in ("RANK", "WORLD_SIZE", "TANDEM_WORKERS", "TANDEM_SETTINGS"):
                env.pop(k, None)
            out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.strip(), str(self.workers.targets))
            # The trainer's metric line, so the documented metric definitions read a script's job.
            self.assertIn("step=2 loss=1.0000 samples_per_sec=", out.stderr)
            self.assertIn("feed.log() takes loss= and lr=", out.stderr)
            self.check_records(os.path.join(root, "output", "data"))

    def check_records(self, data):
        with open(os.path.join(data, "metrics.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([line["step"] for line in lines], [2, 4, 6])
        self.assertTrue(all(line["samples_per_sec"] > 0 and 0 <= line["data_wait_pct"] <= 100 for line in lines))
        self.assertEqual([line["lr"] for line in lines], [0.1, 0.1, 0.1])
        with open(os.path.join(data, "summary.json")) as f:
            summary = json.load(f)
        # What the script reported; what tandem does not know is null, not its own defaults.
        # Smoothed as the metric lines are: the means of the first and the last log_every (2) losses.
        self.assertEqual(summary["first_loss"], 0.75)
        self.assertAlmostEqual(summary["final_loss"], (1.0 / 5 + 1.0 / 6) / 2)
        self.assertIsNone(summary["settings"]["optimizer"])
        self.assertIsNone(summary["settings"]["mixup"])
        self.assertEqual(summary["settings"]["data"], "synthetic")
        self.assertGreater(summary["step_seconds"]["script"], 0)
        with open(os.path.join(data, "report.html")) as f:
            html = f.read()
        self.assertIn("the script's own (not known to tandem)", html)
        self.assertIn("the script's own work", html)
        self.assertNotIn("no price file", html)  # found beside the library the script loaded
        self.assertEqual((summary["steps"], summary["samples"]), (6, 24))
        self.assertGreater(summary["throughput"]["global_samples_per_sec"], 0)
        self.assertGreater(summary["step_seconds"]["data_wait"], 0)
        plan_inputs = summary["plan_inputs"]
        self.assertEqual(plan_inputs["trainer_instance_type"], "ml.g5.xlarge")
        self.assertEqual([w["address"] for w in plan_inputs["workers"]], self.workers.targets)
        self.assertTrue(os.path.getsize(os.path.join(data, "report.html")) > 0)
        plan = subprocess.run([ARGS.tandem, "plan", os.path.join(data, "summary.json"), "--worker-type",
                               "ml.c5.xlarge", "--json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        self.assertEqual(json.loads(plan.stdout)["worker"]["instance_type"], "ml.c5.xlarge")

    def test_records_go_only_where_told(self):
        # No summary_json and no SageMaker root: nothing is written where the script runs.
        with tempfile.TemporaryDirectory() as cwd:
            script = textwrap.dedent("""
                import tandem
                with tandem.Feed(local_threads=1, sagemaker_root="/nonexistent", batch_size=4, steps=3,
                                 data="synthetic", image_size=16) as feed:
                    for batch in feed:
                        pass
                """)
            out = run_alone(script, cwd)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(os.listdir(cwd), [], "a feed wrote into the script's folder")
            self.assertIn("pass summary_json=PATH", out.stderr)
            # Told where: the records are there.
            summary = os.path.join(cwd, "records", "summary.json")
            out = run_alone(script.replace('steps=3,', f'steps=3, summary_json={summary!r},'), cwd)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(sorted(os.listdir(os.path.dirname(summary))), ["metrics.jsonl", "report.html",
                                                                           "runs.jsonl", "summary.json",
                                                                           "tensorboard"])


    def test_rank_0_serves_its_gauges_for_an_autoscaler(self):
        # metrics_port: the script's rank 0 serves what a trainer's does, read mid-run.
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory() as cwd:
            script = textwrap.dedent(f"""
                import urllib.request
                import tandem
                with tandem.Feed(local_threads=1, batch_size=4, steps=40, log_every=2, metrics_port={port},
                                 metrics_bind="127.0.0.1", summary_json="records/summary.json", data="synthetic", image_size=16) as feed:
                    for i, batch in enumerate(feed):
                        if i == 30:
                            print(urllib.request.urlopen("http://127.0.0.1:{port}/metrics", timeout=10).read().decode())
                """)
            out = run_alone(script, cwd)
            self.assertEqual(out.returncode, 0, out.stderr)
            gauges = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()
                      if line.startswith("tandem_") and "{" not in line}
            self.assertGreater(float(gauges["tandem_samples_per_second"]), 0, out.stdout)
            self.assertGreaterEqual(float(gauges["tandem_step"]), 2, out.stdout)
            self.assertIn("tandem_requests_in_flight", gauges, out.stdout)
            # No worker's capacity is known (no workers): no sample, never NaN.
            self.assertNotIn("tandem_workers_wanted", gauges, out.stdout)
            self.assertNotIn("NaN", out.stdout.replace("Nan", "NaN"))
            self.assertIn(f"metrics for Prometheus at http://127.0.0.1:{port}/metrics", out.stderr)

    def test_the_summary_counts_the_ranks_that_trained(self):
        """Rank 1 of 2 exits at once (never runs here): the job's throughput is rank 0's alone;
        with both ranks feeding, twice that. Both ranks are children of this process, their
        launcher."""
        script = textwrap.dedent("""
            import os, sys, time, tandem
            if os.environ["RANK"] == "0" and os.environ["RANKS"] == "2":
                time.sleep(1)  # the other rank's first batch comes before this rank's first metrics line
            with tandem.Feed(batch_size=4, steps=12, log_every=4, sagemaker_root=sys.argv[1],
                             data="synthetic", image_size=16, dataset_size=64) as feed:
                for batch in feed:
                    time.sleep(0.05)
            """)
        for ranks in ([0], [0, 1]):
            with tempfile.TemporaryDirectory() as root:
                procs = []
                for r in ranks:
                    env = {**os.environ, "PYTHONPATH": ARGS.module_dir, "RANK": str(r), "WORLD_SIZE": "2",
                           "LOCAL_WORLD_SIZE": "2", "TANDEM_WORKERS": ",".join(self.workers.targets),
                           "RANKS": str(len(ranks))}
                    env.pop("TANDEM_SETTINGS", None)
                    procs.append(subprocess.Popen([sys.executable, "-c", script, root], env=env,
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
                for p in procs:
                    _, err = p.communicate(timeout=120)
                    self.assertEqual(p.returncode, 0, err)
                with open(os.path.join(root, "output", "data", "summary.json")) as f:
                    summary = json.load(f)
                self.assertEqual(summary["world_size"], len(ranks), summary)
                throughput = summary["throughput"]
                self.assertAlmostEqual(throughput["global_samples_per_sec"],
                                       throughput["per_rank_samples_per_sec"] * len(ranks), delta=0.01, msg=summary)
                with open(os.path.join(root, "output", "data", "metrics.jsonl")) as f:
                    line = json.loads(f.readline())
                self.assertAlmostEqual(line["samples_per_sec"], line["samples_per_sec_per_rank"] * len(ranks),
                                       delta=0.01, msg=line)


@unittest.skipUnless(HAS_TORCH, "torch is missing")
class EpochTest(SyntheticWorkerTest):

    def test_each_pass_is_a_new_epoch_and_set_epoch_reproduces_one(self):
        from tandem.torch import TandemDataset
        ds = TandemDataset(self.workers.targets, batch_size=8, rank=0, world=1, **SYNTHETIC)
        self.assertEqual(len(ds), 8)
        first, second = indices_of(ds), indices_of(ds)
        self.assertEqual(len(first), 8)
        self.assertNotEqual(first[0], second[0], "the second pass replays the first")
        self.assertEqual(sorted(sum(second, [])), list(range(64)))  # still one pass over the data
        ds.set_epoch(0)
        self.assertEqual(indices_of(ds), first)
        self.assertEqual(ds.epoch, 1)

    def test_the_step_form_refuses_to_replay(self):
        from tandem.torch import TandemDataset
        ds = TandemDataset(self.workers.targets, batch_size=8, steps=3, rank=0, world=1, **SYNTHETIC)
        self.assertEqual(len(indices_of(ds)), 3)
        with self.assertRaisesRegex(RuntimeError, "a second would replay the same batches"):
            indices_of(ds)
        with self.assertRaisesRegex(ValueError, "set_epoch.. belongs to the epoch form"):
            ds.set_epoch(1)

    def test_a_dataset_reports_the_scripts_loss_to_its_running_feed(self):
        from tandem.torch import TandemDataset
        with tempfile.TemporaryDirectory() as tmp:
            summary = os.path.join(tmp, "summary.json")
            ds = TandemDataset(self.workers.targets, batch_size=8, steps=4, rank=0, world=1, summary_json=summary,
                               **SYNTHETIC)
            with self.assertRaisesRegex(RuntimeError, "log.. between passes"):
                ds.log(loss=1.0)
            for i, _ in enumerate(ds):
                ds.log(loss=2.0 - i / 2, lr=0.05)
            with open(summary) as f:
                got = json.load(f)
            # Shorter than two log windows: the means of its first and last halves.
            self.assertEqual((got["first_loss"], got["final_loss"]), (1.75, 0.75))


if __name__ == "__main__":
    sys.argv = sys.argv[:1]
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
