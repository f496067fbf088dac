"""Dataset parsers on real files (Fashion-MNIST, digits) and on small files in the real formats."""

import gzip
import io
import json
import tarfile

import numpy as np
import pytest

from dlbench.datasets import catalog, cifar, digits, idx, prepare, store


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
    with pytest.raises(prepare.DatasetError, match="no cifar-10-binary.tar.gz in it; .*give that archive"):
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
