"""Reads an Ember SummaryWriter run back with TensorBoard's own event reader and checks what the C++ test wrote
(tests/logging/test_summary_writer.cpp, SummaryWriterTensorBoard): scalars, add_scalars' folders, a histogram, text.

usage: read_tensorboard.py LOGDIR     exit 0: all read back; 77: the tensorboard package is not importable
"""
import math
import os
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("read_tensorboard: the tensorboard package is not installed (make tensorboard installs it)")
    sys.exit(77)


def load(path):
    acc = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def main(logdir):
    acc = load(logdir)
    loss = [(e.step, e.value) for e in acc.Scalars("loss/train")]
    assert [s for s, _ in loss] == list(range(5)), loss
    assert all(abs(v - 1.0 / (s + 1)) < 1e-6 for s, v in loss), loss  # float32 values
    hist = acc.Histograms("weights")
    assert len(hist) == 1 and hist[0].step == 3, hist
    h = hist[0].histogram_value
    assert h.num == 1000 and h.min == 0.0 and abs(h.max - 0.999) < 1e-6, h  # float32 values
    assert abs(h.sum - sum(i / 1000 for i in range(1000))) < 1e-4, h.sum
    assert sum(h.bucket) == 1000, list(h.bucket)
    text = acc.Tensors("config/text_summary")
    assert len(text) == 1 and text[0].tensor_proto.string_val[0].decode() == "Adam lr 1e-3, batch 64", text
    for key, want in (("train", 0.5), ("test", 0.75)):
        sub = load(os.path.join(logdir, "acc_" + key))
        got = [(e.step, e.value) for e in sub.Scalars("acc")]
        assert len(got) == 1 and got[0][0] == 7 and math.isclose(got[0][1], want), (key, got)
    print("read_tensorboard: scalars, add_scalars folders, histogram and text read back by TensorBoard")


if __name__ == "__main__":
    main(sys.argv[1])
