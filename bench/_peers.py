#!/usr/bin/python3
"""Shared helpers for the benchmark peer scripts (not a script itself)."""
import importlib
import os
import subprocess
import sys

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
