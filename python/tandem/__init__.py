"""tandem's data plane for PyTorch training scripts (docs/python.md).

    import tandem
    with tandem.Feed(["10.0.0.5:6000", "10.0.0.6:6000"], batch_size=64, steps=1000,
                     rank=0, world=1, data="imagefolder:/data/train", image_size=224) as feed:
        for images, labels in feed:        # numpy arrays over tandem's own buffers
            x, y = torch.from_numpy(images), torch.from_numpy(labels)

Feed(workers=None, *, rank=0, world=1, local_threads=0, start_step=0,
     release_workers=False, **settings)
    Streams `steps` batches of `batch_size` samples: this rank's slice of every global
    batch, made by the data workers (`tandem worker`) and by `local_threads` threads of
    this process, in step order. The settings are tandem's own (`tandem trainer --help`),
    written with '_': data, seed, image_size, dataset_size, num_classes, wire_dtype,
    pipeline, split, channel, on_bad_sample, max_image_pixels, sagemaker_root,
    batch_size, steps, inflight, prefetch, connect_timeout, batch_timeout, token,
    token_file, job_name, tls_ca, tls_cert, tls_key, tls_server_name. The token
    defaults to $TANDEM_TOKEN.
    A bad setting raises ValueError with tandem's message; a feed that cannot go on
    (no worker answers, every source failed, --batch-timeout passed) raises RuntimeError.

tandem.serve(**settings), first in a script that runs on every host (SageMaker's PyTorch
estimator with instance_groups): on a data-worker host it serves batches until the
trainers release it, then exits 0; on a trainer host it returns and the script trains.
tandem.role() says which, running nothing.

tandem.plan(workers, **settings) is what a Feed with those arguments would deliver.

tandem.Image(path), a sample's image as a file for tandem to decode and augment in C++ with
the dataset's `transform` (docs/datasets.md).

tandem.sample_rng(), inside a Python dataset's __getitem__ run by a worker
(--data python:FILE:NAME, docs/datasets.md), is a numpy Generator keyed by the sample.

The PyTorch adapter, tandem.torch.TandemDataset (also tandem.TandemDataset), imports
torch only when used.
"""
import sys as _sys

from ._sample import Image, sample_rng

# A worker's Python dataset process (_dataset_worker.py) needs only sample_rng: it never
# loads the compiled module, which may not exist for its interpreter.
if not getattr(_sys.modules.get("__main__"), "_TANDEM_DATASET_CHILD", False):
    from ._serve import role, serve
    from ._tandem import Batch, Feed, Interrupted, __version__, plan, set_log_level, setting_names, shutdown_workers

__all__ = ["Batch", "Feed", "Image", "Interrupted", "TandemDataset", "plan", "role", "sample_rng", "serve", "set_log_level", "setting_names",
           "shutdown_workers"]


def __getattr__(name):
    if name == "TandemDataset":  # torch is imported only by those who use it
        from .torch import TandemDataset

        return TandemDataset
    raise AttributeError(f"module 'tandem' has no attribute '{name}'")
