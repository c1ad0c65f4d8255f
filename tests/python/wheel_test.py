#!/usr/bin/python3
"""scripts/wheel on this build (ctest wheel): the wheel is made and checked (every ELF file's
DT_NEEDED bundled or glibc/libstdc++/libgcc_s, GLIBC_2.34 / GLIBCXX_3.4.30 / CXXABI_1.3.13
at most), and holds what pip needs: the package, the binary without LibTorch, the
console entry point, a RECORD whose hashes match. A wheel whose binary needs a newer
glibc symbol is refused (a file patched to ask for GLIBC_2.99 is planted and checked).

    tests/python/wheel_test.py --build build

Exits 77 (skipped) without patchelf. scripts/test-wheel installs the wheel in foreign roots.
"""
import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    args = p.parse_args()
    if not shutil.which("patchelf"):
        print("skipped: patchelf is missing (Debian's patchelf; scripts/setup installs it)")
        return 77
    tmp = tempfile.mkdtemp(prefix="tandem-wheel-test-")
    try:
        run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "wheel"), "--build", args.build,
                              "--out", tmp, "--no-build"], capture_output=True, text=True, timeout=280)
        print(run.stdout[-3000:], run.stderr[-3000:])
        assert run.returncode == 0, "scripts/wheel failed"
        assert "every DT_NEEDED bundled" in run.stdout, "scripts/wheel did not check the wheel it made"
        wheel = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        assert wheel == ["tandem-0.1.0-py3-none-manylinux_2_34_x86_64.whl"], wheel
        path = os.path.join(tmp, wheel[0])
        z = zipfile.ZipFile(path)
        names = set(z.namelist())
        for needed in ["tandem/__init__.py", "tandem/_tandem.py", "tandem/_serve.py", "tandem/_cli.py",
                       "tandem/libtandem_feed.so", "tandem/_bin/tandem", "tandem/share/tandem/sagemaker-prices.json",
                       "tandem-0.1.0.dist-info/WHEEL", "tandem-0.1.0.dist-info/METADATA",
                       "tandem-0.1.0.dist-info/RECORD", "tandem-0.1.0.dist-info/entry_points.txt"]:
            assert needed in names, f"{needed} missing from the wheel"
        assert "tandem = tandem._cli:main" in z.read("tandem-0.1.0.dist-info/entry_points.txt").decode()
        assert not any("libtorch" in n for n in names), "the wheel holds LibTorch"
        assert any(n.startswith("tandem/_libs/libgrpc-") for n in names), "gRPC is not bundled under a hashed name"
        # RECORD: every file, its hash and size, as pip checks them.
        for line in z.read("tandem-0.1.0.dist-info/RECORD").decode().splitlines():
            name, digest, size = line.rsplit(",", 2)
            if not digest:
                continue
            data = z.read(name)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == "sha256=" + want and int(size) == len(data), f"RECORD is wrong for {name}"
        # The console command keeps its executable bit.
        assert (z.getinfo("tandem/_bin/tandem").external_attr >> 16) & 0o111, "tandem/_bin/tandem is not executable"
        # A file that asks for a glibc newer than the ceiling is refused by --check.
        bad = os.path.join(tmp, "bad")
        z.extractall(bad)
        lib = os.path.join(bad, "tandem", "libtandem_feed.so")
        data = open(lib, "rb").read()
        assert b"GLIBC_2.34" in data
        open(lib, "wb").write(data.replace(b"GLIBC_2.34", b"GLIBC_2.99"))
        bad_wheel = os.path.join(tmp, "bad.whl")
        with zipfile.ZipFile(bad_wheel, "w") as out:
            for base, _, files in os.walk(bad):
                for f in files:
                    out.write(os.path.join(base, f), os.path.relpath(os.path.join(base, f), bad))
        refused = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "wheel"), "--check", bad_wheel],
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and "GLIBC_2.99" in refused.stderr, refused.stdout + refused.stderr
        print(f"ok: {wheel[0]}, {os.path.getsize(path) / 2**20:.1f} MB; a GLIBC_2.99 file is refused")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
