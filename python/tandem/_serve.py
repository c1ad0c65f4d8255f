"""tandem.serve(): one script on every host, as SageMaker's training toolkit runs it.

The PyTorch estimator starts the same entry point on every host of every instance group.
serve() at the top of that script asks tandem which role this host has (`tandem launch
--role-only`: SageMaker's resourceconfig.json, SM_*, Slurm, JobSet, torchrun, flags), and
on a data-worker host becomes `tandem launch`, which serves batches until the trainers
release it and then exits 0, so the host finishes; on a trainer host it returns and the
script goes on with tandem.Feed().
"""
import json
import os
import sys

from . import _cli

# `tandem launch --role-only` waits at most --resolve-timeout (120 s) for host names.
_ROLE_TIMEOUT_S = 900


def _flags(args, config, settings):
    """tandem's command-line flags: args as given, --config, then the keyword settings
    (image_size=224 as --image-size=224; a list or tuple repeats the flag; a dict is JSON)."""
    flags = [str(a) for a in args]
    if config is not None:
        flags += ["--config", os.fspath(config)]
    for key, value in settings.items():
        if value is None:
            continue
        name = "--" + key.replace("_", "-")
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, dict):
                v = json.dumps(v)
            flags.append(f"{name}={v}")
    return flags


def _error(stdout, stderr):
    """tandem's error: a logged error line (its log goes to stdout) without the time and
    level, else the flag parser's last line on stderr ("tandem: ...")."""
    for line in reversed(stdout.splitlines()):
        if " error " in line:
            return line.split(" error ", 1)[1].strip()
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1].removeprefix("tandem: ") if lines else ""


def role(args=(), *, config=None, **settings):
    """This host's role, as tandem launch resolves it, without running anything: a dict with
    role ("trainer" or "worker"), host, group, instance_type, source, workers (those a trainer
    dials), trainer_hosts and worker_hosts, and ranks_started (torchrun started this process)."""
    import subprocess  # here: `import tandem` stays quick

    path = _cli.binary()
    env = _cli.environment()
    env["TANDEM_SCRIPT_HYPERPARAMETERS"] = "1"
    cmd = [path, "launch", "--role-only", *_flags(args, config, settings)]
    try:
        run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=_ROLE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"tandem launch --role-only gave no answer in {_ROLE_TIMEOUT_S} s: {' '.join(cmd)}") from None
    if run.returncode != 0:
        message = _error(run.stdout, run.stderr) or f"tandem launch --role-only exited {run.returncode}"
        raise ValueError(f"tandem.serve(): {message}")
    for line in reversed(run.stdout.splitlines()):  # the JSON line, after tandem's log lines
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"tandem launch --role-only printed no role: {run.stdout[-2000:]}")


def serve(args=(), *, config=None, **settings):
    """Serves data on a data-worker host; returns on a trainer host. Call it first in a script
    that runs on every host of the job (SageMaker's PyTorch estimator with instance_groups,
    a Slurm heterogeneous job, a JobSet):

        import tandem
        SETTINGS = dict(data="imagefolder", image_size=224, pipeline="...")
        tandem.serve(**SETTINGS)               # a data host serves here, then exits 0
        with tandem.Feed(batch_size=256, steps=1000, release_workers=True, **SETTINGS) as feed:
            for images, labels in feed: ...     # the trainer hosts train

    args: tandem command-line flags (e.g. ["--data", "imagefolder"]); config: a JSON
    settings file (--config); **settings: tandem's settings with '_' for '-' (as
    tandem.Feed takes them; a list repeats the flag). Under SageMaker, the keys of
    hyperparameters.json that start with tandem- (or tandem_) are tandem's too, the
    others the script's.

    On a data-worker host this process becomes `tandem launch` with those settings (os.exec:
    nothing after serve() runs there): it serves until the trainers release it (a Feed with
    release_workers=True, or tandem.shutdown_workers()), then exits 0, so the host ends.
    On a trainer host it returns what role() returns, and the script trains: tandem.Feed()
    finds the same workers (pass it the same data settings). Raises ValueError with
    tandem's message when the settings or the cluster's description are wrong."""
    place = role(args, config=config, **settings)
    if place["role"] != "worker":
        return place
    path = _cli.binary()
    env = _cli.environment()
    env["TANDEM_SCRIPT_HYPERPARAMETERS"] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(path, [path, "launch", *_flags(args, config, settings)], env)
