"""The adapter contract's checks, on adapters made here (no framework needed): a point that needs an optional
hook its adapter lacks is refused before anything is read, and an `info` key the record does not know fails
where it is reported."""

import numpy as np
import pytest

from dlbench.frameworks import base
from dlbench.frameworks.caffe import CaffeAdapter
from dlbench.frameworks.stepped import SteppedAdapter
from dlbench.record.fields import InfoError
from dlbench.study.sweep import one_point


class Bare(SteppedAdapter):
    """A stepped adapter with the loop's required methods only: no early stopping, no augmented input."""

    calls: list

    def prepare(self):
        self.calls.append("prepare")

    def load(self):
        self.calls.append("load")
        raise AssertionError("a refused point reads no data")

    @staticmethod
    def versions():
        return {"framework_version": "0", "cuda_version": None, "cudnn_version": None}

    def info(self):
        return {"framework_version": "0"}

    def build(self): ...

    def train_step(self, batch, lr): ...

    def take_loss(self):
        return 0.0

    def evaluate(self, split="test"):
        return 0.0, 0.0

    def weights(self):
        return []

    @staticmethod
    def forward(layers, weights, x, y):
        return np.zeros((len(y), 10)), 0.0

    @staticmethod
    def params(layers, input_shape):
        return 0


class Stopping(Bare):
    def keep_best(self): ...

    def restore_best(self): ...


def adapter(cls, point, tmp_path):
    a = cls(point, tmp_path, base.Reporter(tmp_path / "events.jsonl"))
    a.calls = []
    return a


def test_a_point_that_validates_is_refused_before_prepare_by_an_adapter_without_early_stopping(tmp_path):
    point = one_point("pytorch", "theano", iterations=10)  # the Theano preset validates with early stopping
    assert point.get("validation")
    bare = adapter(Bare, point, tmp_path)
    with pytest.raises(base.Unavailable, match=r"^pytorch cannot run this point's validation with early stopping: "
                                               r"its adapter has no keep_best, restore_best"):
        bare.run()
    assert bare.calls == []  # neither prepared nor loaded
    stopping = adapter(Stopping, point, tmp_path)
    with pytest.raises(AssertionError, match="reads no data"):  # not refused: it goes on to read the data
        stopping.run()
    assert stopping.calls == ["prepare", "load"]


def test_an_augmenting_point_needs_set_train_data(tmp_path):
    point = one_point("pytorch", "caffe", iterations=10)
    point["input"] = {**point.get("input", {}), "flip": True}
    assert adapter(Bare, point, tmp_path).needs() == {"augmented input (a new view each epoch)": ("set_train_data",)}
    with pytest.raises(base.Unavailable, match="has no set_train_data"):
        adapter(Bare, point, tmp_path).run()
    assert adapter(Bare, one_point("pytorch", "caffe", iterations=10), tmp_path).needs() == {}


def test_every_adapter_says_whether_it_reads_its_weights_back():
    assert Bare.can("weights") and Stopping.can("keep_best") and not Bare.can("keep_best")
    assert not CaffeAdapter.can("weights")  # Caffe's weights are its snapshot's (dlbench.testing.trained)
    assert not base.Adapter.can("weights")


def test_a_misspelt_info_key_fails_where_it_is_reported(tmp_path):
    reporter = base.Reporter(tmp_path / "events.jsonl")
    reporter.emit("info", threads_in_effect=2, build={"x": 1})
    with pytest.raises(InfoError, match="'thread_in_effect' is no field of the record"):
        reporter.emit("info", thread_in_effect=2)
    reporter.close()
    assert (tmp_path / "events.jsonl").read_text().count('"e": "info"') == 1  # the bad one was not written
