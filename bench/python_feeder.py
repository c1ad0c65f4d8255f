#!/usr/bin/python3
"""Python peer of the AWS heterogeneous-cluster PyTorch example
(amazon-sagemaker-examples/training/heterogeneous-clusters/pt.grpc.sagemaker):
a torch DataLoader (one worker process per core) makes "blur-benchmark" batches and a
grpcio server-streaming RPC sends each batch as raw float32 bytes + int64 labels;
a client in this script consumes the stream over loopback and measures images/s.

blur-benchmark sample i: torch.rand(3, S, S) from a generator seeded with i, label
i % 10, then 10 x torchvision.transforms.GaussianBlur(kernel_size=11, sigma=(0.1, 2.0)).

    bench/python_feeder.py --cores 2 --batch-size 32 --seconds 20 --json

--dataset python:FILE:NAME [--data-args JSON] serves a user's dataset instead, the one a
tandem worker's `--data python:FILE:NAME` serves (docs/datasets.md): FILE is imported,
NAME(**args) builds it, and each sample (a dict with "image" and "label", or an
(image, label) tuple) is batched by the DataLoader and sent in the image's own dtype
(uint8 for images), as the example sends whatever its Dataset returns.

The server runs in a child process (this script with --serve). Its DataLoader workers
are forked before any gRPC object exists (fork after gRPC has started threads is not
safe), and the RPC handler pulls batches from that iterator.
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import ensure_modules  # noqa: E402

ensure_modules("torch", "torchvision", "grpc")

import torch  # noqa: E402

METHOD = "/tandem.bench.PythonFeeder/StreamBatches"
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]
# Message: header <IIIII = batch, channels, height, width, pixel dtype (DTYPES); then
# batch x int64 labels; then batch*channels*height*width pixels (native little-endian, C order).
HEADER = struct.Struct("<IIIII")
DTYPES = [torch.float32, torch.uint8]


class BlurBenchmarkDataset(torch.utils.data.Dataset):
    def __init__(self, image_size, length=1 << 40):
        import torchvision.transforms as T

        self.image_size = image_size
        self.length = length
        self.blurs = T.Compose([T.GaussianBlur(kernel_size=11, sigma=(0.1, 2.0)) for _ in range(10)])

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, self.image_size, self.image_size, generator=g)
        return self.blurs(img), i % 10


def load_python_dataset(spec, args_json):
    """NAME(**args) from FILE, for --dataset python:FILE:NAME (as tandem's workers do)."""
    import importlib.util

    file, name = spec[len("python:"):].rsplit(":", 1)
    file = os.path.abspath(file)
    sys.path.insert(0, os.path.dirname(file))
    module_spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(file))[0], file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    return getattr(module, name)(**json.loads(args_json))


def make_dataset(args):
    if args.dataset == "blur-benchmark":
        return BlurBenchmarkDataset(args.image_size)
    return load_python_dataset(args.dataset, args.data_args)


def images_and_labels(batch):
    """The DataLoader's batch of a blur or a Python dataset: (images, labels) tensors."""
    if isinstance(batch, dict):
        return batch["image"], batch["label"]
    return batch[0], batch[1]


def _worker_init(_worker_id):
    torch.set_num_threads(1)


def default_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ----------------------------------------------------------------------------- server


def serve(args):
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(
        make_dataset(args),
        batch_size=args.batch_size,
        num_workers=args.cores,
        worker_init_fn=_worker_init,
        shuffle=args.dataset != "blur-benchmark",
    )
    state = {"batches": iter(loader)}  # forks the worker processes now, before gRPC exists
    lock = threading.Lock()

    import grpc
    from concurrent import futures

    def stream_batches(request, context):
        while context.is_active():
            with lock:
                images, labels = images_and_labels(next(state["batches"]))
            if images.dtype not in DTYPES:
                images = images.to(torch.float32)
            b, c, h, w = images.shape
            # one copy into the message; gRPC copies it again when sending
            yield b"".join(
                (
                    HEADER.pack(b, c, h, w, DTYPES.index(images.dtype)),
                    memoryview(labels.to(torch.int64).contiguous().numpy()).cast("B"),
                    memoryview(images.contiguous().numpy()).cast("B"),
                )
            )

    handler = grpc.method_handlers_generic_handler(
        METHOD.split("/")[1],
        {
            METHOD.split("/")[2]: grpc.unary_stream_rpc_method_handler(
                stream_batches, request_deserializer=None, response_serializer=None
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=GRPC_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    if port == 0:
        print(f"python_feeder: cannot bind 127.0.0.1:{args.port}", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print(f"PORT {port}", flush=True)
    # Also stop when the parent goes away (its end of our stdin closes).
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    server.stop(0)
    with lock:
        state.clear()  # the last reference to the iterator: shuts the DataLoader workers down
    return 0


# ----------------------------------------------------------------------------- client


def run_client(port, args):
    import grpc

    # the frames are read-only bytes; we only read them
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    stream = channel.unary_stream(METHOD, request_serializer=None, response_deserializer=None)
    call = stream(b"")
    n_workers = args.cores
    received = 0  # batches
    first_at = None
    t0 = None  # arrival time of the batch that opens the measured window
    opened_at_batch = 0
    images = 0
    now = time.monotonic()
    deadline = now + args.warmup + args.seconds + args.timeout
    try:
        for msg in call:
            now = time.monotonic()
            b, c, h, w, dtype = HEADER.unpack_from(msg, 0)
            off = HEADER.size
            labels = torch.frombuffer(msg, dtype=torch.int64, count=b, offset=off)
            off += 8 * b
            pixels = torch.frombuffer(msg, dtype=DTYPES[dtype], count=b * c * h * w, offset=off)
            pixels = pixels.view(b, c, h, w)
            if received == 0:
                first_at = now
                expect = torch.arange(b, dtype=torch.int64) % 10
                blur = args.dataset == "blur-benchmark"
                if blur and ((c, h, w) != (3, args.image_size, args.image_size) or not torch.equal(labels, expect)):
                    raise RuntimeError(f"unexpected first batch: shape {(b, c, h, w)}, labels {labels.tolist()}")
            received += 1
            if t0 is None:
                # warm-up: every worker has delivered a batch (and --warmup-batches in all)
                # and `warmup` seconds passed
                if received >= max(n_workers, args.warmup_batches) and now - first_at >= args.warmup:
                    t0, opened_at_batch = now, received
            else:
                images += b
                # close the window on whole rounds of the workers (DataLoader yields in
                # worker round-robin order) so bursts do not bias the rate
                if now - t0 >= args.seconds and (received - opened_at_batch) % n_workers == 0:
                    break
            if now > deadline:
                raise RuntimeError("timed out waiting for batches")
    finally:
        call.cancel()
        channel.close()
    elapsed = now - t0 if t0 is not None else 0.0
    return {
        "peer": "python_grpc_feeder",
        "images_per_sec": images / elapsed if elapsed > 0 else 0.0,
        "cores": args.cores,
        "batch_size": args.batch_size,
        "dtype": str(pixels.dtype).replace("torch.", "") if received else None,
        "dataset": args.dataset,
        "image_size": args.image_size,
        "seconds": elapsed,
        "images": images,
        "warmup_seconds": (t0 - first_at) if t0 is not None else None,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", type=int, default=default_cores(), help="DataLoader worker processes (default: all cores)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seconds", type=float, default=20.0, help="measured window")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds after the first batch before measuring")
    p.add_argument("--warmup-batches", type=int, default=0, help="batches taken before measuring, at least")
    p.add_argument("--timeout", type=float, default=120.0, help="extra seconds allowed before giving up")
    p.add_argument("--image-size", type=int, default=224, help="blur-benchmark's image size")
    p.add_argument("--dataset", default="blur-benchmark", help="blur-benchmark, or python:FILE:NAME (your dataset)")
    p.add_argument("--data-args", default="{}", help="python:FILE:NAME: NAME's keyword arguments, a JSON object")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.cores < 1 or args.batch_size < 1 or args.image_size < 11:
        p.error("--cores and --batch-size must be >= 1, --image-size >= 11")
    if args.dataset != "blur-benchmark" and not (args.dataset.startswith("python:") and args.dataset.count(":") >= 2):
        p.error(f"--dataset {args.dataset!r}: give blur-benchmark or python:FILE:NAME")

    if args.serve:
        return serve(args)

    cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--port", "0",
           "--cores", str(args.cores), "--batch-size", str(args.batch_size),
           "--image-size", str(args.image_size), "--dataset", args.dataset, "--data-args", args.data_args]
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    try:
        line = server.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            raise RuntimeError(f"server did not start (said {line!r})")
        result = run_client(int(line.split()[1]), args)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        try:  # the server and any DataLoader worker left behind
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait()

    if args.json:
        print(json.dumps(result))
    else:
        print(f"python_grpc_feeder: {result['images_per_sec']:.1f} images/s "
              f"({args.cores} DataLoader workers, batch {args.batch_size}, {args.dataset}, "
              f"{result['dtype']}, {result['images']} images in {result['seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
