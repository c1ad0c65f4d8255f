"""Start the seed's job shape with AWS's PyTorch image and tandem's wheel: 2 x ml.c5.18xlarge
serve augmented ImageNet batches to 1 x ml.p4d.24xlarge, one script on every host
(launcher.py; docs/sagemaker.md, "With AWS's PyTorch image").

    python launch_job.py ROLE_ARN S3_TRAIN_PREFIX S3_CHECKPOINTS S3_TOKEN_PREFIX [--python-dataset]

  S3_TRAIN_PREFIX  s3://bucket/imagenet/train/ in class folders (the data group reads it)
  S3_CHECKPOINTS   s3://bucket/checkpoints/launcher/ (spot: the next run resumes from it)
  S3_TOKEN_PREFIX  s3://bucket/tandem/run-42/ holding one file, the job's token
                   (docs/security.md, "On SageMaker": the tandem-token channel)
  --python-dataset the data hosts run class_folders.py (a user's own PIL dataset) instead
                   of tandem's C++ decoder and augmentation

Put the wheel beside this file first (scripts/wheel writes dist/tandem-*.whl); the toolkit
installs requirements.txt on every host. Needs the SageMaker Python SDK v2 and credentials.

The same job runs on one machine, every host as SageMaker's training toolkit runs it
(tandem simulate --job; tests/python/sagemaker_example_test.py runs it in CI):

    python launch_job.py --simulate TRAIN_DIR CHECKPOINT_DIR TOKEN_DIR [--python-dataset] > job.json
    tandem simulate --job job.json

job_spec() holds the estimator's arguments once, as plain data: main() turns it into the
SDK's objects, simulation_job() into what `tandem simulate --job` reads, and
tests/python/sagemaker_estimator_test.py holds it to the SDK's own rules.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# torch_distributed needs a full version the SDK lists (fw_utils.py
# TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS: "2.8.0", not "2.8"), and the wheel
# (manylinux_2_34) needs glibc 2.34: AWS's PyTorch images from 2.4 on (Ubuntu 22.04).
FRAMEWORK_VERSION = "2.8.0"
PY_VERSION = "py312"


def job_spec(train, checkpoints, token, python_dataset=False):
    """The estimator's arguments as plain data: train, checkpoints and token are the S3
    prefixes (or, for simulation_job, the folders standing in for them)."""
    data_group = {"instance_group_name": "data_group", "instance_type": "ml.c5.18xlarge", "instance_count": 2}
    dnn_group = {"instance_group_name": "dnn_group", "instance_type": "ml.p4d.24xlarge", "instance_count": 1}
    hyperparameters = {"epochs": 90, "lr": 0.5, "batch-size": 256, "model": "resnet50",
                       # tandem's data settings, read by tandem.serve() on the data hosts and by
                       # tandem.Feed on the GPU host. The toolkit also passes every hyperparameter
                       # to the script as --key value on one unquoted /bin/sh line: keep values free
                       # of spaces and ( ) (launcher.py sets the pipeline itself).
                       "tandem-data": "imagefolder", "tandem-image-size": 224,
                       # torchrun on the GPU group only: the PyTorch estimator does not pass the
                       # distribution's instance_groups to the container, so without this key the
                       # toolkit starts torchrun on the data group too (sagemaker-training-toolkit
                       # environment.py, distribution_instance_groups).
                       "sagemaker_distribution_instance_groups": ["dnn_group"]}
    if python_dataset:
        hyperparameters.update({"tandem-data": "python:class_folders.py:ClassFolders",
                                "tandem-data-args": {"size": 224}, "tandem-python-procs": 70})
    return {
        "entry_point": "launcher.py",
        "source_dir": HERE,  # launcher.py, class_folders.py, requirements.txt, the wheel
        "framework_version": FRAMEWORK_VERSION,
        "py_version": PY_VERSION,
        "instance_groups": [data_group, dnn_group],
        # torchrun on the GPU group: one rank per GPU. The data group runs the script once per host.
        "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": ["dnn_group"]},
        "hyperparameters": hyperparameters,
        "checkpoint_s3_uri": checkpoints,
        "use_spot_instances": True,
        "max_run": 3 * 24 * 3600,
        "max_wait": 4 * 24 * 3600,
        "metric_definitions": [{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"}],
        "inputs": {
            # The images go to the data group only, streamed from S3 as they are read.
            "train": {"s3_data": train, "input_mode": "FastFile", "instance_groups": ["data_group"]},
            # The job's token, on every host (a channel naming groups must name them all).
            "tandem-token": {"s3_data": token, "input_mode": "File", "instance_groups": ["data_group", "dnn_group"]},
        },
    }


def simulation_job(spec, gpus=2, **overrides):
    """The job as `tandem simulate --job` reads it: the same groups, hyperparameters and
    distribution; folders for the channels and the checkpoints; `gpus` simulated GPUs (ranks)
    per GPU host. `overrides` replace hyperparameters (a small run of the same job)."""
    gpu_groups = [g["instance_group_name"] for g in spec["instance_groups"] if g["instance_type"].startswith(("ml.p", "ml.g"))]
    return {
        "estimator": "PyTorch",
        "job_name": "tandem-sagemaker-example",
        "entry_point": spec["entry_point"],
        "source_dir": spec["source_dir"],
        "instance_groups": spec["instance_groups"],
        "distribution": spec["distribution"],
        "hyperparameters": {**spec["hyperparameters"], **overrides},
        "inputs": {name: {"path": c["s3_data"], "input_mode": c["input_mode"], "instance_groups": c["instance_groups"]}
                   for name, c in spec["inputs"].items()},
        "checkpoint_dir": spec["checkpoint_s3_uri"],
        "gpus": {g: gpus for g in gpu_groups},
    }


def main(role, train, checkpoints, token, python_dataset=False):
    from sagemaker.inputs import TrainingInput
    from sagemaker.instance_group import InstanceGroup
    from sagemaker.pytorch import PyTorch

    spec = job_spec(train, checkpoints, token, python_dataset)
    groups = {g["instance_group_name"]: InstanceGroup(**g) for g in spec.pop("instance_groups")}
    inputs = {name: TrainingInput(c["s3_data"], input_mode=c["input_mode"], instance_groups=c["instance_groups"])
              for name, c in spec.pop("inputs").items()}
    # The SDK wants the distribution's groups as the same InstanceGroup objects.
    spec["distribution"]["instance_groups"] = [groups[n] for n in spec["distribution"]["instance_groups"]]
    PyTorch(role=role, instance_groups=list(groups.values()), **spec).fit(inputs)


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    python_dataset = "--python-dataset" in flags
    if "--simulate" in flags:
        train_dir, checkpoint_dir, token_dir = (os.path.abspath(a) for a in args[:3])
        print(json.dumps(simulation_job(job_spec(train_dir, checkpoint_dir, token_dir, python_dataset)), indent=2))
    else:
        main(*args[:4], python_dataset=python_dataset)
