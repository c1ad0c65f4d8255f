"""Start the seed's job shape with AWS's PyTorch image and tandem's wheel: 2 x ml.c5.18xlarge
serve augmented ImageNet batches to 1 x ml.p4d.24xlarge, one script on every host
(launcher.py; docs/sagemaker.md, "With AWS's PyTorch image").

Usage: python launch_job.py ROLE_ARN S3_TRAIN_PREFIX S3_CHECKPOINTS
  S3_TRAIN_PREFIX  s3://bucket/imagenet/train/ in class folders (the data group reads it)
  S3_CHECKPOINTS   s3://bucket/checkpoints/launcher/ (spot: the next run resumes from it)
Put the wheel beside this file first (scripts/wheel writes dist/tandem-*.whl); the toolkit
installs requirements.txt on every host. Needs the SageMaker Python SDK and credentials.
"""
import os
import sys

from sagemaker.inputs import TrainingInput
from sagemaker.instance_group import InstanceGroup
from sagemaker.pytorch import PyTorch


def main(role: str, train: str, checkpoints: str) -> None:
    data_group = InstanceGroup("data_group", "ml.c5.18xlarge", 2)
    dnn_group = InstanceGroup("dnn_group", "ml.p4d.24xlarge", 1)
    estimator = PyTorch(
        entry_point="launcher.py",
        source_dir=os.path.dirname(os.path.abspath(__file__)),  # launcher.py, requirements.txt, the wheel
        framework_version="2.3",
        py_version="py311",
        role=role,
        instance_groups=[data_group, dnn_group],
        # torchrun on the GPU group only: one rank per GPU. The data group runs the script once.
        distribution={"torch_distributed": {"enabled": True}, "instance_groups": [dnn_group]},
        hyperparameters={"epochs": 90, "lr": 0.5, "batch-size": 256},
        checkpoint_s3_uri=checkpoints,
        use_spot_instances=True,
        max_run=3 * 24 * 3600,
        max_wait=4 * 24 * 3600,
        metric_definitions=[{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"}],
    )
    estimator.fit({
        # The images go to the data group only, streamed from S3 as they are read.
        "train": TrainingInput(train, input_mode="FastFile", instance_groups=["data_group"]),
    })


if __name__ == "__main__":
    main(*sys.argv[1:4])
