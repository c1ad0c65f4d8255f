"""Real `tandem worker` processes on loopback for the Python tests (not a test itself).

Every wait is bounded; readiness is a condition (the port accepts connections), not a
sleep. Workers are killed when their group is closed, whatever happened."""
import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--module-dir", required=True, help="build/python: holds the tandem package")
    p.add_argument("--tandem", required=True, help="the tandem binary (workers)")
    args = p.parse_args()
    args.module_dir, args.tandem = os.path.abspath(args.module_dir), os.path.abspath(args.tandem)
    sys.path.insert(0, args.module_dir)
    # A scratch working directory: nothing a test runs writes into the tree.
    scratch = tempfile.mkdtemp(prefix="tandem-pytest-")
    atexit.register(shutil.rmtree, scratch, True)
    os.chdir(scratch)
    return args


def require(*modules):
    """Exits SKIP naming what is missing when a module cannot be imported."""
    for m in modules:
        try:
            __import__(m)
        except ImportError as e:
            print(f"SKIPPED: {m} is missing ({e}): install python3-{m} (Debian) for {sys.executable}")
            sys.exit(SKIP)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _torchrun_can_rendezvous():
    """False where torchrun cannot start: its static rendezvous makes a TCPStore with libuv,
    which Debian's PyTorch 2.x (trixie's, in scripts/test-cuda's root) is built without."""
    import torch.distributed as dist
    try:
        dist.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True)
    except TypeError:
        return True  # PyTorch < 2.2: no libuv option, torchrun works
    except RuntimeError as e:
        return "libuv" not in str(e)
    return True


def torchrun(args, env, timeout):
    """Runs `python -m torch.distributed.run ARGS` in its own session, so that a timeout
    stops torchrun and every rank; exits the test with the output when it fails. Returns
    the output (stdout and stderr)."""
    import torch
    flags = []
    if int(torch.__version__.split(".")[0]) < 2:
        flags = ["--redirects", "1", "--tee", "1"]  # torch < 2 under Python 3.11 cannot parse the default
    argv = [sys.executable, "-m", "torch.distributed.run", "--master_port", str(free_ports(1)[0]), *flags, *args]
    if not _torchrun_can_rendezvous():
        print("skipped: this PyTorch was built without libuv, and torchrun's static rendezvous always asks "
              "for a libuv TCPStore (Debian's PyTorch 2.x); `tandem launch` ranks use USE_LIBUV=0 instead")
        sys.exit(77)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        print(out)
        raise SystemExit(f"torchrun did not finish within {timeout} s")
    if proc.returncode != 0:
        print(out)
        raise SystemExit(f"torchrun exited {proc.returncode}")
    return out


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout} s")
        time.sleep(0.02)


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Workers:
    """`n` workers serving the same data; `targets` are their addresses."""

    def __init__(self, tandem, n, *, env=None, threads=1, **data):
        self.ports = free_ports(n)
        self.targets = [f"127.0.0.1:{p}" for p in self.ports]
        self.procs = []
        self.logs = []
        flags = []
        for k, v in data.items():
            flags += [f"--{k.replace('_', '-')}", str(v)]
        try:
            for port in self.ports:
                argv = [tandem, "worker", "--port", str(port), "--bind", "127.0.0.1", "--threads", str(threads),
                        "--idle-timeout", "60", *flags]
                self.logs.append(tempfile.TemporaryFile())
                self.procs.append(subprocess.Popen(argv, stdout=self.logs[-1], stderr=subprocess.STDOUT,
                                                   env={**os.environ, **(env or {})}))
            for port, proc in zip(self.ports, self.procs):
                wait_until(lambda: accepts(port) or proc.poll() is not None, 30, f"worker on port {port} listening")
                if proc.poll() is not None:
                    raise RuntimeError(f"worker on port {port} exited {proc.returncode}: {self.log(port)}")
        except BaseException:
            self.close()
            raise

    def log(self, port):
        f = self.logs[self.ports.index(port)]
        f.seek(0)
        return f.read().decode(errors="replace")

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait(10)

    def wait_exit(self, i, timeout):
        return self.procs[i].wait(timeout)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(10)
        for f in self.logs:
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
