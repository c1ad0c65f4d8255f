#!/usr/bin/python3
"""examples/sagemaker/pip/launch_job.py's estimator arguments against the SageMaker Python
SDK v2's own rules and AWS's images, read from their sources (no SDK needed here):

- aws/sagemaker-python-sdk src/sagemaker/fw_utils.py: validate_version_or_image_args
  (framework_version and py_version), validate_distribution (a heterogeneous estimator's
  distribution names exactly one of its instance groups), validate_torch_distributed_
  distribution (py_version with "py3", a GPU instance family, framework_version an exact
  member of TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS: "2.3" is refused, "2.3.0" not);
- src/sagemaker/image_uri_config/pytorch.json (training): the full versions and their
  py_versions an image exists for;
- aws/deep-learning-containers pytorch/training/buildspec-2-*-sm.yml: the image's Ubuntu,
  which must have glibc 2.34 for the manylinux_2_34 wheel (22.04 from PyTorch 2.4 on);
- CreateTrainingJob: when one channel names instance groups, every channel must, and the
  names must be the job's; spot training needs max_wait >= max_run;
- sagemaker-training-toolkit process.py: the hyperparameters reach the script on one
  unquoted /bin/sh line, so none may hold a space or shell syntax.

    /usr/bin/python3 tests/python/sagemaker_estimator_test.py
"""
import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "sagemaker", "pip"))
import launch_job  # noqa: E402

# fw_utils.py (SDK v2.257.6): TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS.
TORCH_DISTRIBUTED_GPU_VERSIONS = ["1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1",
                                  "2.5.1", "2.6.0", "2.7.1", "2.8.0"]
# image_uri_config/pytorch.json "training" (full version -> py_versions), with the Ubuntu of
# each SageMaker GPU image (deep-learning-containers buildspec-2-*-sm.yml).
IMAGES = {"2.3.0": (["py311"], "20.04"), "2.4.0": (["py311"], "22.04"), "2.5.1": (["py311"], "22.04"),
          "2.6.0": (["py312"], "22.04"), "2.7.1": (["py312"], "22.04"), "2.8.0": (["py312"], "22.04")}
# The Ubuntu releases whose glibc runs a manylinux_2_34 wheel (2.35 on 22.04; 20.04 has 2.31).
GLIBC = {"20.04": (2, 31), "22.04": (2, 35), "24.04": (2, 39)}
SHELL_SYNTAX = re.compile(r"[\s()'\"`$;&|<>*?\[\]{}\\#~]")


def is_gpu_instance(instance_type):
    """fw_utils._is_gpu_instance: an ml.p* or ml.g* family."""
    m = re.match(r"^ml[\._]([a-z\d\-]+)\.?\w*$", instance_type)
    return bool(m) and m.group(1).startswith(("p", "g"))


def toolkit_args(hyperparameters):
    """sagemaker-training-toolkit mapping.to_cmd_args of the decoded hyperparameters."""
    args = []
    for key in sorted(k for k in hyperparameters if not k.startswith("sagemaker_")):
        value = hyperparameters[key]
        args.append(("--" if len(key) > 1 else "-") + key)
        args.append(",".join(f"{k}={v}" for k, v in sorted(value.items())) if isinstance(value, dict) else str(value))
    return args


def wheel_glibc():
    with open(os.path.join(ROOT, "scripts", "wheel")) as f:
        m = re.search(r"manylinux_(\d+)_(\d+)", f.read())
    return int(m.group(1)), int(m.group(2))


class EstimatorArgumentsTest(unittest.TestCase):
    def specs(self):
        for python_dataset in (False, True):
            yield launch_job.job_spec("s3://b/train/", "s3://b/ckpt/", "s3://b/token/", python_dataset)

    def test_the_version_is_one_torch_distributed_accepts_and_an_image_exists_for(self):
        for spec in self.specs():
            version, py = spec["framework_version"], spec["py_version"]
            self.assertIn(version, TORCH_DISTRIBUTED_GPU_VERSIONS, "validate_torch_distributed_distribution")
            self.assertIn(version, IMAGES, "image_uris: no such PyTorch training image")
            self.assertIn(py, IMAGES[version][0])
            self.assertIn("py3", py)

    def test_the_image_runs_the_wheel(self):
        for spec in self.specs():
            ubuntu = IMAGES[spec["framework_version"]][1]
            self.assertGreaterEqual(GLIBC[ubuntu], wheel_glibc(),
                                    f"PyTorch {spec['framework_version']}'s image is Ubuntu {ubuntu}")

    def test_the_distribution_names_one_gpu_group_of_the_job(self):
        for spec in self.specs():
            groups = {g["instance_group_name"]: g["instance_type"] for g in spec["instance_groups"]}
            named = spec["distribution"]["instance_groups"]
            self.assertEqual(len(named), 1, "validate_distribution: one instance group name")
            self.assertIn(named[0], groups)
            self.assertTrue(is_gpu_instance(groups[named[0]]), "torch_distributed: GPU instances only")
            self.assertTrue(spec["distribution"]["torch_distributed"]["enabled"])
            # The toolkit runs torchrun only there when told (the estimator drops the groups).
            self.assertEqual(spec["hyperparameters"]["sagemaker_distribution_instance_groups"], named)

    def test_channels_name_groups_all_or_none_and_only_the_jobs(self):
        for spec in self.specs():
            groups = {g["instance_group_name"] for g in spec["instance_groups"]}
            named = [set(c.get("instance_groups") or []) for c in spec["inputs"].values()]
            self.assertTrue(all(named) or not any(named), "CreateTrainingJob: some channels assigned, others not")
            for n in named:
                self.assertLessEqual(n, groups)
            self.assertEqual(set(spec["inputs"]["tandem-token"]["instance_groups"]), groups, "the token: every host")
            self.assertEqual(spec["inputs"]["train"]["instance_groups"], ["data_group"])

    def test_spot_training_waits_at_least_as_long_as_it_runs(self):
        for spec in self.specs():
            self.assertTrue(spec["use_spot_instances"])
            self.assertGreaterEqual(spec["max_wait"], spec["max_run"])
            self.assertTrue(spec["checkpoint_s3_uri"])

    def test_every_hyperparameter_survives_the_toolkits_shell_line(self):
        for spec in self.specs():
            args = toolkit_args(spec["hyperparameters"])
            for name, value in zip(args[::2], args[1::2]):
                self.assertTrue(value and not SHELL_SYNTAX.search(value), f"{name} {value!r}")
            self.assertTrue(spec["entry_point"].endswith(".py"))

    def test_the_simulated_job_is_the_same_job(self):
        spec = next(self.specs())
        job = launch_job.simulation_job(spec, gpus=2)
        self.assertEqual(job["instance_groups"], spec["instance_groups"])
        self.assertEqual(job["distribution"], spec["distribution"])
        self.assertEqual(job["hyperparameters"], spec["hyperparameters"])
        self.assertEqual({n: c["instance_groups"] for n, c in job["inputs"].items()},
                         {n: c["instance_groups"] for n, c in spec["inputs"].items()})
        self.assertEqual(job["gpus"], {"dnn_group": 2})


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
