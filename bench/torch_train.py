#!/usr/bin/env python3
"""PyTorch's side of bench/train_table.sh: bench_train.cpp's configurations (same models, batches of the same real
Fashion-MNIST images held in memory, Adam 1e-3, cross-entropy, the same timing: median of 5 windows of 0.6 s after 5
warm-up steps) in today's PyTorch, eager or compiled.

    python bench/torch_train.py --config mlp-b64|mlp-b256|mlp-big|cnn-b64|cnn-bn-b64 --threads N
                                --mode eager|compile-model|compile-step [--adam fused|foreach|forloop]

compile-model compiles the model (torch.compile(model)); compile-step compiles the whole step, forward, backward
and the optimiser's update (torch.compile of a function calling loss.backward() and opt.step()). Prints one line:
framework config threads samples_per_s peak_rss_mib, framework being e.g. "pytorch-2.15.0-eager-fused".
"""
import argparse
import gzip
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"mlp-b64": (64, "mlp"), "mlp-b256": (256, "mlp"), "mlp-big": (256, "mlp-big"), "cnn-b64": (64, "cnn"),
           "cnn-bn-b64": (64, "cnn-bn")}


def read_idx_gz(path, count, item_bytes, header_bytes):
    with gzip.open(path, "rb") as f:
        f.read(header_bytes)
        return f.read(count * item_bytes)


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    if kind == "mlp-big":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 10))
    bn = kind == "cnn-bn"
    layers = [nn.Conv2d(1, 32, 5, padding=2)] + ([nn.BatchNorm2d(32)] if bn else [])
    layers += [nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5, padding=2)] + ([nn.BatchNorm2d(64)] if bn else [])
    layers += [nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10)]
    return nn.Sequential(*layers)


def throughput(batch, nbatches, step):
    for i in range(5):
        step(i % nbatches)
    rates, k = [], 0
    for _ in range(5):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.6:
            step(k % nbatches)
            k += 1
            n += 1
        rates.append(n * batch / (time.perf_counter() - t0))
    return statistics.median(rates)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="mlp-b64", choices=sorted(CONFIGS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--mode", default="eager", choices=["eager", "compile-model", "compile-step"])
    p.add_argument("--adam", default="foreach", choices=["fused", "foreach", "forloop"])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    batch, kind = CONFIGS[a.config]

    n = 10240
    x = torch.frombuffer(bytearray(read_idx_gz(a.data + "/train-images-idx3-ubyte.gz", n, 784, 16)), dtype=torch.uint8)
    y = torch.frombuffer(bytearray(read_idx_gz(a.data + "/train-labels-idx1-ubyte.gz", n, 1, 8)), dtype=torch.uint8)
    images = (x.float() / 255).reshape(-1, 1, 28, 28)
    labels = y.long()
    nb = n // batch
    xs = [images[i * batch:(i + 1) * batch].contiguous() for i in range(nb)]
    ys = [labels[i * batch:(i + 1) * batch].contiguous() for i in range(nb)]

    model = make_model(kind)
    adam = {"fused": {"fused": True}, "foreach": {"foreach": True}, "forloop": {"foreach": False}}[a.adam]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **adam)
    forward = torch.compile(model) if a.mode == "compile-model" else model

    def step_body(xb, yb):
        loss = F.cross_entropy(forward(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    body = torch.compile(step_body) if a.mode == "compile-step" else step_body
    rate = throughput(batch, nb, lambda i: body(xs[i], ys[i]))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pytorch-{torch.__version__.split('+')[0]}-{a.mode}-{a.adam} {a.config} {a.threads} {rate:.0f} {rss:.1f}")


if __name__ == "__main__":
    main()
