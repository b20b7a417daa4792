#!/usr/bin/env python3
"""PyTorch's side of Ember's GPU benchmarks (issue 57): the op cases of bench/bench_gpu_ops.cpp and the full-size
models of bench/bench_gpu_models.cpp, same shapes, dtypes, timing and JSON keys. The models are written here in
plain PyTorch (the device's PyTorch has no torchvision or timm), with torchvision's ResNet-50 (v1.5), timm's
vit_base_patch16_224 and Hugging Face's GPT-2 124M layouts. PyTorch at its best on a GPU: cudnn.benchmark, the
fused AdamW, F.scaled_dot_product_attention's own choice of kernel (flash / cuDNN / memory-efficient); TF32 off.
    python3 bench/torch_gpu_ops.py --group ops|models [--device cuda|cpu] [--small] [--only PREFIX,...]
                                   [--reps 5] [--iters 3] [--steps 5] [--peak-tflops 989] [--json OUT.jsonl]
--small runs toy sizes on any device (a check of the script, not a figure)."""
import argparse, json, math, statistics, time
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt

p = argparse.ArgumentParser()
p.add_argument("--group", choices=["ops", "models"], default="ops")
p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
p.add_argument("--small", action="store_true")
p.add_argument("--only", default="")
p.add_argument("--reps", type=int, default=5)
p.add_argument("--iters", type=int, default=3)
p.add_argument("--steps", type=int, default=5)
p.add_argument("--peak-tflops", type=float, default=989.0)
p.add_argument("--json", default=None)
args = p.parse_args()
dev = torch.device(args.device)
cuda = dev.type == "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
impl = "pytorch-" + torch.__version__
device_name = torch.cuda.get_device_name() if cuda else "cpu"
out = open(args.json, "w") if args.json else None


def emit(d):
    print(json.dumps(d), flush=True)
    if out:
        out.write(json.dumps(d) + "\n")


def selected(name):
    return not args.only or any(name.startswith(p) for p in args.only.split(",") if p)


def sync():
    if cuda:
        torch.cuda.synchronize()


def leaf(t):
    return t.requires_grad_(True)


# ----------------------------------------------------------------------------------------------------- op cases
def op_cases():
    s = dict(tokens=16384, width=1024, ln_dim=768, vocab=50304, hidden=3072, conv_n=256, conv_c=64, conv_hw=56,
             seqs=[1024, 4096], head_dims=[64, 128])
    if args.small:
        s = dict(tokens=128, width=32, ln_dim=48, vocab=100, hidden=64, conv_n=2, conv_c=4, conv_hw=8, seqs=[32, 64],
                 head_dims=[16])
    bf16, f32 = dict(dtype=torch.bfloat16, device=dev), dict(device=dev)
    cases = []
    for d in s["head_dims"]:
        for t in s["seqs"]:
            for causal in (True, False):
                b, h = max(1, s["tokens"] // t), max(1, s["width"] // d)
                fwd = 4.0 * b * h * t * t * d * (0.5 if causal else 1.0)

                def make(b=b, h=h, t=t, d=d, causal=causal):
                    q, k, v = (leaf(torch.randn(b, h, t, d, **bf16)) for _ in range(3))
                    g = torch.randn(b, h, t, d, **bf16)
                    return lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                                       (q, k, v), g)
                cases.append((f"attn-bf16-d{d}-T{t}-b{b}h{h}-{'causal' if causal else 'full'}", make, 3.5 * fwd,
                              "TFLOP/s"))
    n, dm = s["tokens"], s["ln_dim"]

    def layernorm():
        x, w, b = leaf(torch.randn(n, dm, **f32)), leaf(torch.ones(dm, **f32)), leaf(torch.zeros(dm, **f32))
        g = torch.randn(n, dm, **f32)
        return lambda: torch.autograd.grad(F.layer_norm(x, (dm,), w, b), (x, w, b), g)
    cases.append((f"layernorm-f32-{n}x{dm}", layernorm, 5.0 * n * dm * 4, "GB/s"))
    cn, cc, hw = s["conv_n"], s["conv_c"], s["conv_hw"]
    act = cn * cc * hw * hw

    def batchnorm_relu():
        x, g = leaf(torch.randn(cn, cc, hw, hw, **bf16)), torch.randn(cn, cc, hw, hw, **bf16)
        w, b = leaf(torch.ones(cc, **f32)), leaf(torch.zeros(cc, **f32))
        rm, rv = torch.zeros(cc, **f32), torch.ones(cc, **f32)

        def step():
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                y = F.relu(F.batch_norm(x, rm, rv, w, b, training=True))
            return torch.autograd.grad(y, (x, w, b), g.to(y.dtype))
        return step
    cases.append((f"batchnorm-relu-bf16-{cn}x{cc}x{hw}", batchnorm_relu, 5.0 * act * 2, "GB/s"))
    v = s["vocab"]

    def cross_entropy():
        logits, y = leaf(torch.randn(n, v, **bf16)), torch.randint(0, v, (n,), device=dev)

        def step():
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(logits, y)
            return torch.autograd.grad(loss, (logits,))
        return step
    cases.append((f"cross-entropy-bf16-{n}x{v}", cross_entropy, 3.0 * n * v * 2, "GB/s"))
    hid = s["hidden"]

    def linear_gelu():
        x, w = leaf(torch.randn(n, dm, **bf16)), leaf(torch.randn(hid, dm, **bf16) * 0.03)
        b, g = leaf(torch.zeros(hid, **bf16)), torch.randn(n, hid, **bf16)
        return lambda: torch.autograd.grad(F.gelu(F.linear(x, w, b), approximate="tanh"), (x, w, b), g)
    cases.append((f"linear-gelu-bf16-{n}x{dm}x{hid}", linear_gelu, 3.0 * 2.0 * n * dm * hid, "TFLOP/s"))

    def mlp_gelu():
        x, w1 = leaf(torch.randn(n, dm, **bf16)), leaf(torch.randn(hid, dm, **bf16) * 0.03)
        b1, w2 = leaf(torch.zeros(hid, **bf16)), leaf(torch.randn(dm, hid, **bf16) * 0.02)
        b2, g = leaf(torch.zeros(dm, **bf16)), torch.randn(n, dm, **bf16)
        return lambda: torch.autograd.grad(
            F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2), (x, w1, b1, w2, b2), g)
    cases.append((f"mlp-gelu-bf16-{n}x{dm}x{hid}", mlp_gelu, 6.0 * 2.0 * n * dm * hid, "TFLOP/s"))
    conv_flops = 3.0 * 2.0 * act * cc * 9
    for fmt in ("nchw", "nhwc"):
        def conv(fmt=fmt):
            mf = torch.channels_last if fmt == "nhwc" else torch.contiguous_format
            x = leaf(torch.randn(cn, cc, hw, hw, **bf16).to(memory_format=mf))
            w = leaf((torch.randn(cc, cc, 3, 3, **bf16) * 0.05).to(memory_format=mf))
            g = torch.randn(cn, cc, hw, hw, **bf16).to(memory_format=mf)
            return lambda: torch.autograd.grad(F.conv2d(x, w, None, 1, 1), (x, w), g)
        cases.append((f"conv3x3-bf16-{cn}x{cc}x{hw}-{fmt}", conv, conv_flops, "TFLOP/s"))
    return cases


def time_ms(f):
    """The median over --reps of --iters back-to-back calls between two events (the host clock on the CPU)."""
    f(); f()
    per = []
    for _ in range(args.reps):
        sync()
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(args.iters):
                f()
            b.record(); b.synchronize()
            per.append(a.elapsed_time(b) / args.iters)
        else:
            t0 = time.perf_counter()
            for _ in range(args.iters):
                f()
            per.append(1000 * (time.perf_counter() - t0) / args.iters)
    return statistics.median(per)


def run_ops():
    failed = 0
    for name, make, work, unit in op_cases():
        if not selected(name):
            continue
        try:
            torch.manual_seed(0)
            ms = time_ms(make())
            emit({"impl": impl, "device": device_name, "case": name, "ms": ms, "work": work, "unit": unit,
                  "rate": work / (ms * 1e-3) / (1e12 if unit == "TFLOP/s" else 1e9)})
        except Exception as e:  # an OOM or an unsupported dtype is that case's row
            failed += 1
            emit({"impl": impl, "case": name, "error": str(e).splitlines()[0] if str(e) else type(e).__name__})
        if cuda:
            torch.cuda.empty_cache()
    return failed


# ------------------------------------------------------------------------------------------------------- models
class Bottleneck(nn.Module):  # torchvision's v1.5: the stride on the 3x3
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


class Attention(nn.Module):
    def __init__(self, dim, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):  # pre-norm transformer block: timm's ViT (exact GELU) or GPT-2's (tanh GELU, causal)
    def __init__(self, dim, heads, eps, gpt):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim, eps=eps), Attention(dim, heads, causal=gpt)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.gelu = "tanh" if gpt else "none"

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate=self.gelu))


class ViT(nn.Module):
    def __init__(self, image=224, patch=16, dim=768, depth=12, heads=12, classes=1000, checkpoint=False):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, 1e-6, gpt=False) for _ in range(depth))
        self.norm, self.head, self.checkpoint = nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, classes), checkpoint

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        for blk in self.blocks:
            x = ckpt.checkpoint(blk, x, use_reentrant=False) if self.checkpoint else blk(x)
        return self.head(self.norm(x)[:, 0])


class GPT2(nn.Module):
    def __init__(self, vocab=50257, positions=1024, dim=768, layers=12, heads=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(positions, dim)
        self.h = nn.ModuleList(Block(dim, heads, 1e-5, gpt=True) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.h:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # the head tied to the token embedding


def vit_forward_flops(image, patch, dim, depth):
    tokens = (image // patch) ** 2 + 1
    return 2 * depth * 12 * dim * dim * tokens + 2 * 3 * patch * patch * dim * (tokens - 1) + 4 * depth * tokens ** 2 * dim


def gpt2_forward_flops(vocab, dim, layers, t):
    return 2 * (layers * 12 * dim * dim + vocab * dim) + 4 * layers * t * dim


def model_cases():
    small = args.small
    rb, res = (2, 64) if small else (256, 224)
    resnet_fwd = 2 * 4.09e9 * res * res / (224 * 224)
    cases = []

    def images(n, r, classes):
        return lambda: (torch.randn(n, 3, r, r, device=dev), torch.randint(0, classes, (n,), device=dev))
    for fmt in ("nchw", "channels-last"):
        cases.append((f"resnet50-b{rb}-bf16-{fmt}", rb, rb, 3 * resnet_fwd * rb, ResNet50, images(rb, res, 1000),
                      False, fmt == "channels-last"))
    vit = dict(image=32, patch=8, dim=64, depth=2, heads=4, classes=10) if small else {}
    vc = dict(dict(image=224, patch=16, dim=768, depth=12, heads=12, classes=1000), **vit)
    vb = 2 if small else 128
    for c in (False, True):
        cases.append((f"vit_b16-b{vb}-bf16" + ("-checkpointed" if c else ""), vb, vb,
                      (4 if c else 3) * vit_forward_flops(vc["image"], vc["patch"], vc["dim"], vc["depth"]) * vb,
                      lambda c=c: ViT(**vc, checkpoint=c), images(vb, vc["image"], vc["classes"]), False, False))
    g = dict(vocab=100, positions=64, dim=32, layers=2, heads=2) if small else dict(vocab=50257, positions=1024,
                                                                                       dim=768, layers=12, heads=12)
    gb, gt = (2, 32) if small else (16, 1024)
    tokens = gb * gt
    cases.append((f"gpt2-{'small' if small else '124M'}-b{gb}-T{gt}-bf16", gb, tokens,
                  3 * gpt2_forward_flops(g["vocab"], g["dim"], g["layers"], gt) * tokens, lambda: GPT2(**g),
                  lambda: (torch.randint(0, g["vocab"], (gb, gt), device=dev),
                           torch.randint(0, g["vocab"], (gb, gt), device=dev)), True, False))
    return cases


def run_models():
    failed = 0
    for name, batch, items, flops, make_model, make_batch, seq, channels_last in model_cases():
        if not selected(name):
            continue
        try:
            if cuda:
                torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
            torch.manual_seed(0)
            model = make_model().to(dev)
            x, y = make_batch()
            if channels_last:
                model, x = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)

            def step():
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    o = model(x)
                    loss = F.cross_entropy(o.reshape(-1, o.shape[-1]), y.reshape(-1)) if seq else F.cross_entropy(o, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            step(); step()
            ms = []
            for _ in range(args.steps):
                if cuda:
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(); step(); b.record(); b.synchronize(); ms.append(a.elapsed_time(b))
                else:
                    t0 = time.perf_counter(); step(); ms.append(1000 * (time.perf_counter() - t0))
            sync()
            m = statistics.median(ms)
            emit({"impl": impl, "device": device_name, "case": name, "batch": batch, "items": items, "step_ms": m,
                  "items_per_s": items / (m * 1e-3), "mfu": flops / (m * 1e-3) / (args.peak_tflops * 1e12),
                  "peak_bytes": torch.cuda.max_memory_allocated() if cuda else 0})
            del model, opt, x, y
        except Exception as e:
            failed += 1
            emit({"impl": impl, "case": name, "error": str(e).splitlines()[0] if str(e) else type(e).__name__})
        if cuda:
            torch.cuda.empty_cache()
    return failed


raise SystemExit(1 if (run_ops() if args.group == "ops" else run_models()) else 0)
