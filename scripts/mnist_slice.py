#!/usr/bin/env python3
"""Writes a smaller copy of an MNIST-format folder: the whole test set and the first N training images and labels,
as valid gzipped IDX files (the header's count rewritten), so a run can carry Fashion-MNIST in ~9 MB.
    python3 scripts/mnist_slice.py SRC_DIR DST_DIR N"""
import gzip, os, shutil, struct, sys

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
    shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
    with gzip.open(os.path.join(src, name), "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    if count < n:
        sys.exit(f"{name} holds {count} items, fewer than {n}")
    item = 1
    for d in dims[1:]:
        item *= d
    header = struct.pack(">I", magic) + struct.pack(">" + "I" * ndim, n, *dims[1:])
    with gzip.open(os.path.join(dst, name), "wb") as f:
        f.write(header + data[4 + 4 * ndim:4 + 4 * ndim + n * item])
