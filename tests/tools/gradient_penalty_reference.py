#!/usr/bin/env python3
"""PyTorch's numbers for tests/autograd/test_gradient_penalty.cpp: a WGAN-GP step with a convolutional critic, and a
gradient penalty through a transformer block, in float64, with parameters and inputs from a formula both sides
evaluate the same way. Prints, per case, the loss and each parameter's gradient summed and summed in squares.
    /usr/bin/python3 tests/tools/gradient_penalty_reference.py      (Debian's python3-torch, 1.13)"""
import math
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def fill(shape, seed, scale):
    n = math.prod(shape)
    v = [scale * math.sin(1.3 * i + seed) * math.cos(0.7 * i + 2.0 * seed) for i in range(n)]
    return torch.tensor(v).reshape(shape)


def param(shape, seed, scale):
    return fill(shape, seed, scale).requires_grad_(True)


def penalty(d, x):
    (g,) = torch.autograd.grad(d.sum(), x, create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def report(name, loss, params):
    loss.backward()
    print(f"{name} loss {loss.item():.17g}")
    for pname, p in params:
        print(f"{name} {pname} sum {p.grad.sum().item():.17g} sumsq {(p.grad ** 2).sum().item():.17g}")


def conv_critic():
    p = {
        "w1": param((6, 2, 3, 3), 1.0, 0.3), "b1": param((6,), 2.0, 0.1),
        "w2": param((8, 6, 3, 3), 3.0, 0.2), "b2": param((8,), 4.0, 0.1),
        "ln_w": param((8, 4, 4), 5.0, 0.5), "ln_b": param((8, 4, 4), 6.0, 0.1),
        "wo": param((1, 32), 7.0, 0.3), "bo": param((1,), 8.0, 0.1),
    }

    def D(x):
        h = F.avg_pool2d(F.leaky_relu(F.conv2d(x, p["w1"], p["b1"], padding=1), 0.2), 2)
        h = F.conv2d(h, p["w2"], p["b2"], stride=1, padding=1)
        h = F.leaky_relu(F.layer_norm(h, (8, 4, 4), p["ln_w"], p["ln_b"]), 0.2)
        h = F.max_pool2d(h, 2)
        return F.linear(h.flatten(1), p["wo"], p["bo"])

    real, fake = fill((4, 2, 8, 8), 11.0, 1.0), fill((4, 2, 8, 8), 12.0, 1.0)
    eps = fill((4, 1, 1, 1), 13.0, 0.5) + 0.5
    x_hat = (eps * real + (1 - eps) * fake).requires_grad_(True)
    loss = D(fake).mean() - D(real).mean() + 10.0 * penalty(D(x_hat), x_hat)
    report("conv", loss, list(p.items()))


def transformer():
    d, heads, hidden = 8, 2, 16
    p = {
        "ln1_w": param((d,), 1.5, 0.5), "ln1_b": param((d,), 2.5, 0.1),
        "wq": param((d, d), 3.5, 0.4), "wk": param((d, d), 4.5, 0.4), "wv": param((d, d), 5.5, 0.4),
        "wo": param((d, d), 6.5, 0.4), "ln2_w": param((d,), 7.5, 0.5), "ln2_b": param((d,), 8.5, 0.1),
        "w1": param((hidden, d), 9.5, 0.4), "c1": param((hidden,), 10.5, 0.1),
        "w2": param((d, hidden), 11.5, 0.3), "c2": param((d,), 12.5, 0.1), "wout": param((1, d), 13.5, 0.5),
    }

    def D(x):
        b, t, _ = x.shape
        h = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
        split = lambda m: m.reshape(b, t, heads, d // heads).transpose(1, 2)
        q, k, v = split(h @ p["wq"].T), split(h @ p["wk"].T), split(h @ p["wv"].T)
        s = q @ k.transpose(-2, -1) / math.sqrt(d // heads)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))  # causal
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, d) @ p["wo"].T
        x2 = x + a
        m = F.gelu(F.layer_norm(x2, (d,), p["ln2_w"], p["ln2_b"]) @ p["w1"].T + p["c1"]) @ p["w2"].T + p["c2"]
        return (x2 + m).mean(1) @ p["wout"].T

    x = fill((2, 5, d), 21.0, 1.0).requires_grad_(True)
    loss = D(x).mean() + 10.0 * penalty(D(x), x)
    report("transformer", loss, list(p.items()))


conv_critic()
transformer()
