"""The `tandem` command of the wheel (its console entry point) and where tandem.serve()
finds the binary.

The wheel holds the binary built without LibTorch (tandem/_bin/tandem, its shared
libraries in tandem/_libs, found through $ORIGIN). It runs it with two defaults of the
environment it was installed into: TANDEM_PYTHON, the Python that runs --data python:...
datasets and --script (this one, which has numpy and the user's packages), and
TANDEM_DATASET_WORKER, this package's _dataset_worker.py.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def binary():
    """The tandem binary: $TANDEM_BINARY, else the wheel's, else a build tree's (this package
    in build/python/tandem, the binary in build/)."""
    candidates = [os.environ.get("TANDEM_BINARY"), os.path.join(HERE, "_bin", "tandem"),
                  os.path.join(os.path.dirname(os.path.dirname(HERE)), "tandem")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("tandem's binary was not found: install the wheel (pip install tandem-*.whl), or set "
                            "TANDEM_BINARY to a built tandem (scripts/setup builds build/tandem)")


def environment(base=None):
    """The environment the binary runs in: base (os.environ) with the package's defaults."""
    env = dict(os.environ if base is None else base)
    env.setdefault("TANDEM_PYTHON", sys.executable)
    worker = os.path.join(HERE, "_dataset_worker.py")
    if os.path.isfile(worker):
        env.setdefault("TANDEM_DATASET_WORKER", worker)
    return env


def main():
    """`tandem ARGS...`: the binary, in place of this process (its exit code is the command's)."""
    path = binary()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(path, [path] + sys.argv[1:], environment())


if __name__ == "__main__":
    main()
