"""Start a heterogeneous SageMaker training job running tandem on every host.

Usage: python launch_job.py IMAGE_URI ROLE_ARN
Needs the SageMaker Python SDK (pip install sagemaker) and AWS credentials.
"""
import sys

from sagemaker.estimator import Estimator
from sagemaker.instance_group import InstanceGroup


def main(image_uri: str, role: str) -> None:
    data_group = InstanceGroup("data_group", "ml.c5.18xlarge", 2)
    dnn_group = InstanceGroup("dnn_group", "ml.p4d.24xlarge", 1)
    estimator = Estimator(
        image_uri=image_uri,
        role=role,
        instance_groups=[data_group, dnn_group],
        hyperparameters={"data": "blur-benchmark", "steps": 1000, "batch-size": 64},
        metric_definitions=[
            {"Name": "loss", "Regex": r"step=\d+ loss=([0-9.]+)"},
            {"Name": "samples_per_sec", "Regex": r"samples_per_sec=([0-9.]+)"},
            {"Name": "data_wait_pct", "Regex": r"data_wait_pct=([0-9.]+)"},
        ],
    )
    estimator.fit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
