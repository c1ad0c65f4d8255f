#!/usr/bin/python3
"""Shared helpers for the benchmark peer scripts (not a script itself)."""
import importlib
import os
import socket
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SYSTEM_PYTHON = "/usr/bin/python3"


def ensure_modules(*names):
    """Import `names`; when one is missing, re-run this script under Debian's
    /usr/bin/python3, and if it is missing there too, run bench/setup-peers once
    and re-run. Raises ImportError when that does not help."""
    try:
        for n in names:
            importlib.import_module(n)
        return
    except ImportError as e:
        err = e
    argv = [SYSTEM_PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:]
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.path.exists(SYSTEM_PYTHON):
        os.execv(SYSTEM_PYTHON, argv)
    if not os.environ.get("TANDEM_BENCH_SETUP_RAN"):
        os.environ["TANDEM_BENCH_SETUP_RAN"] = "1"
        subprocess.run([os.path.join(BENCH_DIR, "setup-peers")], check=True)
        os.execv(SYSTEM_PYTHON, argv)
    raise err


def write_reference(path, head, cases):
    """Writes a reference file for the C++ tests: the `head` fields, then "cases" with
    one case per line, which keeps the file small and still diff-able."""
    import json
    lines = ["{"] + [f"{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['"cases": [']
    lines.append(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
    lines.append("]}")
    text = "\n".join(lines) + "\n"
    json.loads(text)  # well-formed
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}: {len(cases)} cases, {len(text)} bytes")


def last_json_object(text):
    """The last line of `text` that is a JSON object, parsed; None when there is none."""
    import json
    obj = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            cand = json.loads(line)
        except ValueError:
            continue
        if isinstance(cand, dict):
            obj = cand
    return obj


def reference_args(doc, default_out):
    """The command line of a reference-file writer: --out FILE."""
    import argparse
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=default_out)
    return p.parse_args()


def free_port():
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout, what):
    """Polls condition() every 50 ms; exits naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"{os.path.basename(sys.argv[0])}: no {what} within {timeout} s")
        time.sleep(0.05)


def listens(port):
    """Whether something accepts connections on loopback `port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
