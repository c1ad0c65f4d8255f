#!/usr/bin/env python3
"""tandem's wheel in a root where tandem was never built (scripts/test-wheel runs it inside
each root, with the repository at /tandem):

    python3 tests/wheel/in_root.py dist/tandem-*.whl

1. pip installs the wheel into a virtual environment (seeing the root's numpy, torch);
2. every ELF file in the installed package loads only what the wheel bundles and glibc,
   libstdc++ and libgcc_s (ldd, as the root's loader resolves it); nothing is "not found";
   the gRPC and c-ares it bundles are the versions docs/security.md assesses (asked of
   the libraries themselves: grpc::Version(), ares_version());
3. a worker started by the wheel's `tandem` command feeds a tandem.Feed, which releases it;
4. the one-script job (tests/python/one_script.py) under `tandem simulate --every-host`:
   the data hosts serve, the trainer's loss falls, every host exits 0;
5. where torch imports: `tandem launch` runs examples/python/train_ddp.py as 2 DDP ranks
   (tandem simulate --procs-per-host 2), fed by a worker host; its loss falls.
Prints what it measured (import time, wheel size) and exits non-zero on the first failure.
"""
import ctypes
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
        "librt.so.1", "libresolv.so.2", "libutil.so.1", "libstdc++.so.6", "libgcc_s.so.1"}


def say(text):
    print(f"in_root: {text}", flush=True)


def fail(text):
    sys.exit(f"in_root: FAILED: {text}")


def run(cmd, timeout, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return r.returncode, r.stdout + r.stderr


def install(wheel, venv):
    code, out = run([sys.executable, "-m", "venv", "--system-site-packages", venv], 300)
    if code:
        fail(f"python3 -m venv: {out[-2000:]}")
    py = os.path.join(venv, "bin", "python")
    code, out = run([py, "-m", "pip", "install", "--no-index", "--no-deps", wheel], 300)
    if code:
        fail(f"pip install {wheel}: {out[-2000:]}")
    code, site = run([py, "-c", "import os, tandem; print(os.path.dirname(tandem.__file__))"], 60)
    if code:
        fail(f"import tandem: {site[-2000:]}")
    return py, site.strip().splitlines()[-1]


def elf_files(top):
    for base, _, files in os.walk(top):
        for f in files:
            path = os.path.join(base, f)
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    yield path


def check_loads(package):
    """Every library every ELF file of the package loads is the wheel's or the base's."""
    files = list(elf_files(package))
    libs = os.path.realpath(os.path.join(package, "_libs"))
    for path in files:
        code, out = run(["ldd", path], 60)
        if code:
            fail(f"ldd {path}: {out}")
        for line in out.splitlines():
            line = line.strip()
            if "not found" in line:
                fail(f"{path}: {line}")
            m = re.match(r"(\S+) => (\S+)", line)
            if not m:
                continue
            name, where = m.group(1), os.path.realpath(m.group(2))
            if name in BASE or os.path.basename(where) in BASE:
                continue
            if os.path.dirname(where) != libs:
                fail(f"{os.path.relpath(path, package)} loads {name} from {where}, not from the wheel")
    say(f"ldd: {len(files)} ELF files load only the wheel's libraries and glibc/libstdc++/libgcc_s")


def bundled_version(package, pattern, ask):
    """What the bundled library matching `pattern` says its version is."""
    found = glob.glob(os.path.join(package, "_libs", pattern))
    if len(found) != 1:
        fail(f"the wheel bundles {len(found)} libraries named {pattern}: {found}")
    return ask(ctypes.CDLL(found[0]))


def grpc_version(lib):
    # std::string grpc::Version(): returned through a hidden pointer to 32 bytes
    # (libstdc++'s string: data pointer, size, and its short-string buffer).
    f = getattr(lib, "_ZN4grpc7VersionB5cxx11Ev")
    f.restype, f.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    out = ctypes.create_string_buffer(32)
    f(out)
    data, size = ctypes.c_void_p.from_buffer(out).value, ctypes.c_size_t.from_buffer(out, 8).value
    return ctypes.string_at(data, size).decode()


def ares_version(lib):
    lib.ares_version.restype, lib.ares_version.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    return lib.ares_version(None).decode()


def check_bundled_versions(package):
    """The gRPC and c-ares in the wheel are the ones docs/security.md names and assesses."""
    grpc = bundled_version(package, "libgrpc++-*.so.*", grpc_version)
    ares = bundled_version(package, "libcares-*.so.*", ares_version)
    with open(os.path.join(REPO, "docs", "security.md")) as f:
        doc = f.read()
    m = re.search(r"bundles Debian bookworm's gRPC (\S+) .*?and c-ares (\S+)", doc, re.S)
    if not m:
        fail("docs/security.md no longer says which gRPC and c-ares the wheel bundles")
    if (grpc, ares) != (m.group(1), m.group(2)):
        fail(f"the wheel bundles gRPC {grpc} and c-ares {ares}; docs/security.md assesses gRPC {m.group(1)} and "
             f"c-ares {m.group(2)}: assess these versions' CVEs there")
    say(f"bundled: gRPC {grpc}, c-ares {ares}, as docs/security.md assesses")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_feeds(py, tandem):
    port = free_port()
    log = open(os.path.join(tempfile.gettempdir(), "in-root-worker.log"), "w+")
    worker = subprocess.Popen([tandem, "worker", "--port", str(port), "--bind", "127.0.0.1", "--data", "synthetic",
                               "--image-size", "16", "--threads", "1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        script = (f"import tandem\n"
                  f"n = 0\n"
                  f"with tandem.Feed(['127.0.0.1:{port}'], batch_size=8, steps=20, data='synthetic', image_size=16,"
                  f" connect_timeout=60, release_workers=True) as feed:\n"
                  f"    for images, labels in feed:\n"
                  f"        assert images.shape == (8, 3, 16, 16), images.shape\n"
                  f"        n += 1\n"
                  f"print('batches', n)\n")
        code, out = run([py, "-c", script], 180)
        if code or "batches 20" not in out:
            fail(f"tandem.Feed from the wheel's worker: {out[-3000:]}")
        if worker.wait(timeout=60) != 0:
            log.seek(0)
            fail(f"the worker exited {worker.returncode} after its release: {log.read()[-3000:]}")
    finally:
        if worker.poll() is None:
            worker.kill()
    say("a worker from the wheel's tandem fed tandem.Feed 20 batches and exited 0 when released")


def one_script(py, tandem):
    code, out = run([tandem, "simulate", "--every-host", "--worker-hosts", "2", "--data", "synthetic",
                     "--image-size", "16", "--num-classes", "4", "--timeout", "240", "--",
                     py, os.path.join(REPO, "tests", "python", "one_script.py")], 300)
    statuses = re.findall(r"^(algo-\d)\s+(trainer|worker)\s+(.*)$", out, re.M)
    if code or len(statuses) != 3 or any(s.strip() != "exited 0" for _, _, s in statuses):
        fail(f"the one-script job: exit {code}: {out[-4000:]}")
    loss = re.search(r"one_script: \d+ steps, loss [\d.]+ -> [\d.]+", out)
    say(f"one script on every host under simulate --every-host: every host exited 0; {loss.group(0)}")


def ddp_ranks(py, tandem):
    if run([py, "-c", "import torch"], 120)[0] != 0:
        say("no torch in this root: the 2-rank launch is left to the root with torch")
        return
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "s.json")
        code, out = run([tandem, "simulate", "--trainer-hosts", "1", "--procs-per-host", "2", "--worker-hosts", "1",
                         "--image-size", "32", "--batch-size", "16", "--steps", "30", "--timeout", "400",
                         "--summary-json", summary, "--", py, os.path.join(REPO, "examples", "python", "train_ddp.py")],
                        480, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if code:
            fail(f"tandem launch -- python train_ddp.py, 2 ranks: exit {code}: {out[-4000:]}")
        m = re.search(r"(\{\"steps\".*\})", out)  # rank 0's last line
        if not m:
            fail(f"train_ddp.py printed no result: {out[-4000:]}")
        result = json.loads(m.group(1))
        if result["world"] != 2 or not result["final_loss"] < result["first_loss"]:
            fail(f"train_ddp.py under tandem launch: {result}")
        say(f"tandem launch ran train_ddp.py as 2 DDP ranks fed by a worker host: {result['steps']} steps, loss "
            f"{result['first_loss']:.3f} -> {result['final_loss']:.3f}")


def main():
    wheel = os.path.abspath(sys.argv[1])
    say(f"Python {sys.version.split()[0]}, {os.path.basename(wheel)} ({os.path.getsize(wheel) / 2**20:.1f} MB)")
    with tempfile.TemporaryDirectory(prefix="tandem-wheel-venv-") as venv:
        py, package = install(wheel, venv)
        tandem = os.path.join(venv, "bin", "tandem")
        start = time.monotonic()
        code, out = run([py, "-c", "import tandem"], 60)
        say(f"installed in {package}; import tandem took {time.monotonic() - start:.2f} s (with the interpreter)")
        check_loads(package)
        check_bundled_versions(package)
        code, out = run([tandem, "--version"], 60)
        if code or "no LibTorch" not in out:
            fail(f"tandem --version: {out}")
        worker_feeds(py, tandem)
        one_script(py, tandem)
        ddp_ranks(py, tandem)
    say("passed")


if __name__ == "__main__":
    main()
