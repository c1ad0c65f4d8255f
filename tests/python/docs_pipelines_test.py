#!/usr/bin/python3
"""Every --pipeline a user can copy from README.md, docs/ or examples/ runs on real images:
each is found in the text (`--pipeline ...`, `pipeline="..."`, `"pipeline": "..."`,
`"tandem-pipeline": ...`, a script's f-string) and made into samples by `tandem bench
pipeline` on PNG files in class folders written here (or on MNIST idx files when the line
says --data mnist). A pipeline tandem refuses fails the test with tandem's message and
where the pipeline was written.

    /usr/bin/python3 tests/python/docs_pipelines_test.py --tandem build/tandem
"""
import argparse
import glob
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MNIST = "/usr/share/datasets/fashion-mnist"
PATTERNS = [
    re.compile(r"""--pipeline[= ](?:"([^"]+)"|'([^']+)'|([^\s'"`]+))"""),
    re.compile(r"""\bpipeline=f?(?:"([^"]+)"|'([^']+)')"""),
    re.compile(r""""(?:tandem-)?pipeline":\s*f?"([^"]+)\""""),
]


def sources():
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for ext in ("py", "sh", "md", "yaml", "sbatch", "json"):
        files += sorted(glob.glob(os.path.join(ROOT, "examples", "**", f"*.{ext}"), recursive=True))
    return files


def pipelines():
    """(pipeline, where, line) for every pipeline written in the docs and examples."""
    found = []
    for path in sources():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for pattern in PATTERNS:
                    for m in pattern.finditer(line):
                        text = next(g for g in m.groups() if g)
                        if "decode" in text or any(c in text for c in ",()["):  # not prose ("--pipeline step")
                            found.append((text.replace("{size}", "32"), f"{os.path.relpath(path, ROOT)}:{number}", line))
    return found


def png(path, width, height, colour):
    """A PNG file of one colour with a little texture (no imaging library needed)."""
    rows = b"".join(b"\x00" + bytes((colour[c] + (x * 7 + y * 3) % 40) % 256 for x in range(width) for c in range(3))
                    for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image_folder():
    root = tempfile.mkdtemp(prefix="tandem-docs-pipelines-")
    for c in range(2):
        os.makedirs(os.path.join(root, f"class{c}"))
        for i in range(4):
            png(os.path.join(root, f"class{c}", f"{i}.png"), 300, 260, (200 * c, 90, 40 * i))
    return root


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", required=True)
    args = p.parse_args()
    args.tandem = os.path.abspath(args.tandem)
    work = tempfile.mkdtemp(prefix="tandem-docs-pipelines-run-")
    with open(os.path.join(work, "my_aug.py"), "w") as f:  # docs/datasets.md's python() step
        f.write("def augment(image):\n    return image\n")
    folder = image_folder()
    found = pipelines()
    assert len(found) >= 10, f"found only {len(found)} pipelines in the docs: the patterns are wrong"
    failures, checked = [], set()
    for text, where, line in found:
        mnist = "--data mnist" in line
        if (text, mnist) in checked:
            continue
        checked.add((text, mnist))
        data = f"mnist:{MNIST}" if mnist else f"imagefolder:{folder}"
        run = subprocess.run([args.tandem, "bench", "pipeline", "--data", data, "--pipeline", text, "--threads", "1",
                              "--batch-size", "2", "--seconds", "0.05", "--json"], cwd=work, capture_output=True,
                             text=True, timeout=120)
        if run.returncode != 0:
            failures.append(f"{where}: {text}\n    {(run.stderr.strip() or run.stdout.strip()).splitlines()[-1]}")
    print(f"{len(checked)} pipelines from {len(found)} places")
    if failures:
        print("pipelines in the docs that tandem refuses:\n" + "\n".join(failures))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
