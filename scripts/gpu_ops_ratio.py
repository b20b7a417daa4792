#!/usr/bin/env python3
"""Ember's and PyTorch's JSON lines from the op and model benchmarks (bench/bench_gpu_ops.cpp,
bench/bench_gpu_models.cpp, bench/torch_gpu_ops.py) side by side, per case: time, PyTorch's time over Ember's
(> 1: Ember is faster), each side's rate (TFLOP/s or GB/s; models: items/s, MFU, peak memory and Ember's plan).
A case one side skipped or failed shows its reason.
    python3 scripts/gpu_ops_ratio.py ember.jsonl torch.jsonl"""
import json, sys


def rows(path):
    out = {}
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                out[d["case"]] = d
    except (OSError, ValueError, KeyError):
        pass
    return out


def note(d):
    return d.get("skipped") or d.get("error") or "missing"


def fmt(v, f):
    return format(v, f) if v is not None else "-"


ember, torch = rows(sys.argv[1]), rows(sys.argv[2])
names = list(ember) + [c for c in torch if c not in ember]
models = [n for n in names if n.split("-")[0] in ("resnet50", "vit_b16", "gpt2")]
ops = [n for n in names if n not in models]
if ops:
    print(f"{'case':<44}{'ember ms':>10}{'torch ms':>10}{'torch/ember':>12}{'ember rate':>12}{'torch rate':>12}  unit")
    for n in ops:
        e, t = ember.get(n, {}), torch.get(n, {})
        em, tm = e.get("ms"), t.get("ms")
        ratio = fmt(tm / em, ".2f") if em and tm else "-"
        unit = e.get("unit") or t.get("unit") or ""
        print(f"{n:<44}{fmt(em, '.3f'):>10}{fmt(tm, '.3f'):>10}{ratio:>12}{fmt(e.get('rate'), '.2f'):>12}"
              f"{fmt(t.get('rate'), '.2f'):>12}  {unit}")
        for side, d, v in (("ember", e, em), ("torch", t, tm)):
            if v is None:
                print(f"    {side}: {note(d)[:150]}")
if models:
    print(f"{'model case':<36}{'ember ms':>10}{'torch ms':>10}{'torch/ember':>12}{'ember MFU':>10}{'torch MFU':>10}"
          f"{'ember MiB':>10}{'plan MiB':>10}{'torch MiB':>10}")
    mib = lambda d, k: d[k] / 2**20 if k in d else None
    for n in models:
        e, t = ember.get(n, {}), torch.get(n, {})
        em, tm = e.get("step_ms"), t.get("step_ms")
        ratio = fmt(tm / em, ".2f") if em and tm else "-"
        print(f"{n:<36}{fmt(em, '.1f'):>10}{fmt(tm, '.1f'):>10}{ratio:>12}{fmt(e.get('mfu'), '.3f'):>10}"
              f"{fmt(t.get('mfu'), '.3f'):>10}{fmt(mib(e, 'peak_bytes'), '.0f'):>10}"
              f"{fmt(mib(e, 'planned_peak_bytes'), '.0f'):>10}{fmt(mib(t, 'peak_bytes'), '.0f'):>10}")
        for side, d, v in (("ember", e, em), ("torch", t, tm)):
            if v is None:
                print(f"    {side}: {note(d)[:150]}")
