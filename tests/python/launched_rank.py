#!/usr/bin/python3
"""A rank for launch_script_test.py (not a test itself): joins the process group from the
environment `tandem launch` gives it, says "ready", then raises (--raise-rank) or waits.
On SIGTERM it writes TERM_DIR/term-RANK and exits --term-exit."""
import argparse
import os
import signal
import sys
import time

import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--raise-rank", type=int, default=-1)
p.add_argument("--term-dir", default="")
p.add_argument("--term-exit", type=int, default=0)
args = p.parse_args()


def on_term(signum, frame):
    if args.term_dir:
        with open(os.path.join(args.term_dir, f"term-{os.environ['RANK']}"), "w") as f:
            f.write("stopped\n")
    sys.exit(args.term_exit)


signal.signal(signal.SIGTERM, on_term)
dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"ready rank {rank} of {dist.get_world_size()} workers [{os.environ['TANDEM_WORKERS']}]", flush=True)
if rank == args.raise_rank:
    raise ValueError(f"boom from rank {rank}")
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(9)  # never reached in a test: a stop comes first
