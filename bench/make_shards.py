#!/usr/bin/python3
"""Write WebDataset tar shards for the slow-storage and indexing benchmarks.

    bench/make_shards.py from-folder --folder DIR --out SHARDS [--per-shard 64]
        The image folder's files (classes sorted, files sorted within each, as
        `--data imagefolder:DIR` indexes them) as members CLASS/NAME.jpg + CLASS/NAME.cls, in
        that order, PER_SHARD samples a shard: the same samples as the folder, same bytes.

    bench/make_shards.py many --out SHARDS --jpeg FILE [--shards 1000] [--per-shard 128] [--member-kb 110]
        SHARDS shards of PER_SHARD samples each, for timing the index: every image member is
        FILE's bytes followed by a hole up to MEMBER_KB (a sparse file: ImageNet's member
        spacing, so a header walk makes one read per sample, without the disk space).

Only the standard library (tarfile).
"""
import argparse
import io
import os
import sys
import tarfile

def folder_samples(folder):
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)) and not d.startswith("."))
    for label, name in enumerate(classes):
        found = []
        for dirpath, dirnames, files in os.walk(os.path.join(folder, name)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for f in files:
                if not f.startswith(".") and f.lower().endswith((".jpg", ".jpeg", ".png")):
                    rel = os.path.relpath(os.path.join(dirpath, f), folder)
                    found.append((os.path.dirname(rel).encode(), f.encode(), rel))
        for _, _, rel in sorted(found):
            yield rel, label


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def from_folder(args):
    samples = list(folder_samples(args.folder))
    os.makedirs(args.out, exist_ok=True)
    for s in range(0, len(samples), args.per_shard):
        path = os.path.join(args.out, f"shard-{s // args.per_shard:06d}.tar")
        with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
            for rel, label in samples[s:s + args.per_shard]:
                add(tar, rel, open(os.path.join(args.folder, rel), "rb").read())
                add(tar, os.path.splitext(rel)[0] + ".cls", str(label).encode())
    print(f"{len(samples)} samples in {(len(samples) + args.per_shard - 1) // args.per_shard} shards under {args.out}")


def sparse_member(f, name, size, head):
    info = tarfile.TarInfo(name)
    info.size = size
    f.write(info.tobuf(format=tarfile.GNU_FORMAT))
    f.write(head)
    f.seek(size - len(head) + (-size) % 512, os.SEEK_CUR)  # a hole, read back as zeros


def many(args):
    os.makedirs(args.out, exist_ok=True)
    head = open(args.jpeg, "rb").read()  # decoders stop at its end marker: the hole after it is never read
    size = max(args.member_kb * 1000, len(head))
    for s in range(args.shards):
        with open(os.path.join(args.out, f"shard-{s:06d}.tar"), "wb") as f:
            for i in range(args.per_shard):
                key = f"s{s:06d}_{i:05d}"
                sparse_member(f, key + ".jpg", size, head)
                label = str(i % 1000).encode()
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(label)
                f.write(info.tobuf(format=tarfile.GNU_FORMAT) + label + b"\0" * ((-len(label)) % 512))
            f.write(b"\0" * 1024)
    print(f"{args.shards * args.per_shard} samples in {args.shards} shards under {args.out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("from-folder")
    a.add_argument("--folder", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--per-shard", type=int, default=64)
    b = sub.add_parser("many")
    b.add_argument("--out", required=True)
    b.add_argument("--shards", type=int, default=1000)
    b.add_argument("--per-shard", type=int, default=128)
    b.add_argument("--member-kb", type=int, default=110)
    b.add_argument("--jpeg", required=True, help="a JPEG file every image member starts with")
    args = p.parse_args()
    from_folder(args) if args.mode == "from-folder" else many(args)


if __name__ == "__main__":
    sys.exit(main())
