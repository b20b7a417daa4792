# PyTorch's side of bench_ops' BM_gelu_fwd_bwd and BM_layer_norm_fwd_bwd: forward + backward of GELU on
# [4096, 512] and LayerNorm(128) on [4096, 128], one thread, median of 5 timings of 20 iterations (ms).
# Run as: OMP_NUM_THREADS=1 taskset -c 0 /usr/bin/python3 bench/torch_ops_norm.py
import statistics
import time

import torch

torch.set_num_threads(1)
torch.manual_seed(0)


def median_ms(step, iters=20, reps=5):
    for _ in range(3):
        step()
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(iters):
            step()
        runs.append((time.perf_counter() - t) / iters * 1e3)
    return statistics.median(runs)


x = torch.randn(4096, 512, requires_grad=True)
g = torch.randn(4096, 512)


def gelu_step():
    torch.nn.functional.gelu(x).backward(g)
    x.grad = None


h = torch.randn(4096, 128, requires_grad=True)
gh = torch.randn(4096, 128)
ln = torch.nn.LayerNorm(128)


def ln_step():
    ln(h).backward(gh)
    h.grad = None


print(f"torch {torch.__version__} gelu fwd+bwd [4096, 512]: {median_ms(gelu_step):.3f} ms")
print(f"torch {torch.__version__} layer_norm fwd+bwd [4096, 128]: {median_ms(ln_step):.3f} ms")
