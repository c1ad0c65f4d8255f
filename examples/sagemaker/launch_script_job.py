"""Start a heterogeneous SageMaker training job that runs YOUR PyTorch script on the GPU
group, fed by tandem workers on the CPU group (docs/sagemaker.md, "Your own training
script on the GPU group").

Usage: python launch_script_job.py IMAGE_URI ROLE_ARN S3_CODE_PREFIX S3_TRAIN_PREFIX
  S3_CODE_PREFIX   s3://bucket/code/ holding train.py (the channel "code", GPU group only)
  S3_TRAIN_PREFIX  s3://bucket/imagenet/train/ in class folders (the channel "train", CPU group only)
Needs the SageMaker Python SDK (pip install sagemaker) and AWS credentials.
"""
import sys

from sagemaker.estimator import Estimator
from sagemaker.inputs import TrainingInput
from sagemaker.instance_group import InstanceGroup


def main(image_uri: str, role: str, code: str, train: str) -> None:
    data_group = InstanceGroup("data_group", "ml.c5.18xlarge", 2)
    dnn_group = InstanceGroup("dnn_group", "ml.p4d.24xlarge", 1)
    estimator = Estimator(
        image_uri=image_uri,
        role=role,
        instance_groups=[data_group, dnn_group],
        hyperparameters={
            # tandem's: the command on the GPU group, and the workers' data.
            "script": "/opt/ml/input/data/code/train.py",
            "script-args": ["--epochs", "90", "--lr", "0.5"],
            "data": "imagefolder",
            "image-size": 224,
            "batch-size": 256,
        },
    )
    estimator.fit({
        "code": TrainingInput(code, instance_groups=["dnn_group"]),
        "train": TrainingInput(train, instance_groups=["data_group"]),
    })


if __name__ == "__main__":
    main(*sys.argv[1:5])
