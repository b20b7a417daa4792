#!/usr/bin/env python3
"""The GPU comparison table: Ember's and PyTorch's JSON lines (ember_bench_gpu, torch_reference.py --json) side
by side, per config: median step time, samples/s, peak memory, and PyTorch's time over Ember's (> 1: Ember is
faster). Host -> device bandwidth rows last.
    python3 scripts/gpu_ratio.py ember.jsonl torch.jsonl"""
import json, sys

def rows(path):
    out = {}
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                out[d["config"]] = d
    except OSError:
        pass
    return out

ember, torch = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'config':<15}{'ember ms':>10}{'torch ms':>10}{'torch/ember':>12}{'ember MiB':>11}{'torch MiB':>11}")
for name in [c for c in ember if "median_step_ms" in ember[c]] + [c for c in torch if c not in ember]:
    e, t = ember.get(name, {}), torch.get(name, {})
    em, tm = e.get("median_step_ms"), t.get("median_step_ms")
    if em is None and tm is None:
        continue
    fmt = lambda v, f: format(v, f) if v is not None else "-"
    ratio = fmt(tm / em, ".2f") if em and tm else "-"
    mib = lambda d: d["peak_bytes"] / 2**20 if "peak_bytes" in d else None
    print(f"{name:<15}{fmt(em, '10.3f'):>10}{fmt(tm, '10.3f'):>10}{ratio:>12}{fmt(mib(e), '11.1f'):>11}"
          f"{fmt(mib(t), '11.1f'):>11}")
for name in sorted(set(ember) | set(torch)):
    if name.startswith("h2d-"):
        e, t = ember.get(name, {}).get("GBps"), torch.get(name, {}).get("GBps")
        print(f"{name:<22} ember {e if e is not None else '-':>8} GB/s   torch {t if t is not None else '-':>8} GB/s")
