"""What one host of a simulated SageMaker job was given (tests/python/sagemaker_toolkit_test.py):
one JSON line with its SM_* variables, torchrun's, its argv, its hyperparameters.json, its
channels and its working directory. Writes a checkpoint file named after itself, and says
which checkpoint files it found (restored from the store)."""
import json
import os
import sys

ckpt = os.path.join(os.path.dirname(os.environ["SM_MODEL_DIR"]), "checkpoints")
found = sorted(os.listdir(ckpt))
rank = os.environ.get("RANK", "-")
with open(os.path.join(ckpt, f"{os.environ['SM_CURRENT_HOST']}-rank{rank}"), "w") as f:
    f.write("x")
if os.environ["SM_CURRENT_HOST"] == "algo-2" and rank == "0":  # the trainer's own checkpoint, rewritten each run
    with open(os.path.join(ckpt, "latest"), "w") as f:
        f.write(str(len(found)))
with open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")) as f:
    hp = json.load(f)
data = os.path.join(os.path.dirname(os.environ["SM_MODEL_DIR"]), "input", "data")
print("PROBE " + json.dumps({
    "env": {k: v for k, v in os.environ.items() if k.startswith("SM_") or k in (
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
        "TRAINING_JOB_NAME", "CURRENT_HOST")},
    "argv": sys.argv[1:], "hyperparameters_json": hp, "cwd": os.getcwd(),
    "channels": sorted(os.listdir(data)) if os.path.isdir(data) else [], "found_checkpoints": found}), flush=True)
