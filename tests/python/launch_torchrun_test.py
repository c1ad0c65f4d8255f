#!/usr/bin/python3
"""`tandem launch` as torchrun's program (--no_python): torchrun starts 2 ranks, each a
`tandem launch` that sees torchrun's variables, trains as the rank it was started as
(no processes of its own, no invented host names) with Gloo, pulls batches from 2 real
`tandem worker` processes named by --workers, and rank 0 releases them at the end.

    /usr/bin/python3 tests/python/launch_torchrun_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when torch (for torchrun) is missing."""
import json
import os
import tempfile

from workers import Workers, parse_args, require, torchrun

ARGS = parse_args()
require("torch")

# Enough steps, and a small window per worker (--inflight 2), that a worker whose stream
# opens a moment late under load still serves some of rank 0's batches.
STEPS = 48


def main():
    with Workers(ARGS.tandem, 2, data="synthetic", image_size=32) as w, tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        # No SageMaker root here: the summary goes where --summary-json says.
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TANDEM_SAGEMAKER_ROOT": os.path.join(tmp, "none")}
        out = torchrun(["--nproc_per_node", "2", "--no_python", os.path.abspath(ARGS.tandem), "launch",
                        "--workers", ",".join(w.targets), "--data", "synthetic", "--image-size", "32",
                        "--steps", str(STEPS), "--batch-size", "8", "--log-every", "8", "--local-workers", "0", "--inflight", "2",
                        "--summary-json", summary], env, 120)
        assert out.count("started by the launcher (torchrun environment") == 2, out
        assert "node-" not in out.replace("node-0 ", ""), f"no invented host name may be dialed:\n{out}"
        s = json.load(open(summary))
        assert s["steps"] == STEPS and s["global_batch"] == 16, s
        served = {x["address"]: x["batches"] for x in s["workers"]}
        assert sorted(served) == sorted(w.targets) and all(b > 0 for b in served.values()), s["workers"]
        # Rank 0 released the workers after the last step: both exit 0.
        assert [w.wait_exit(i, 15) for i in range(2)] == [0, 0], "workers were not released"
    print(f"OK: {STEPS} steps on 2 torchrun ranks, batches per worker {served}")


if __name__ == "__main__":
    main()
