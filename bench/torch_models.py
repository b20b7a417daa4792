"""The PyTorch side of bench/models_table.sh: the same full-size models, steps and inputs as bench/bench_models.cpp,
from the implementations users take them from (timm's resnet50 and vit_base_patch16_224, transformers'
GPT2LMHeadModel), eager or under torch.compile. Prints "rate R unit U peak_rss_mib M" as the Ember side does.

    python torch_models.py --model resnet50|vit_b16|gpt2 [--mode train|infer|generate] [--batch B] [--seq T]
                           [--amp none|bf16] [--threads N] [--steps N] [--warmup N] [--new N] [--compile]
                           [--adam fused|foreach]
"""
import argparse
import contextlib
import resource
import time

import torch


def build(name):
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return GPT2LMHeadModel(config)
    import timm

    return timm.create_model("resnet50" if name == "resnet50" else "vit_base_patch16_224", pretrained=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--mode", default="train")
    p.add_argument("--amp", default="none")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--adam", default="fused")
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = build(a.model)
    gpt = a.model == "gpt2"
    if gpt:
        x = torch.randint(0, 50257, (a.batch, a.seq))
        y = torch.randint(0, 50257, (a.batch, a.seq))
        items = a.batch * a.seq
    else:
        x = torch.randn(a.batch, 3, 224, 224)
        y = torch.randint(0, 1000, (a.batch,))
        items = a.batch
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.amp == "bf16" else contextlib.nullcontext
    forward = model
    if a.compile and a.mode != "generate":
        forward = torch.compile(model)
    loss_fn = torch.nn.functional.cross_entropy

    if a.mode == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=a.adam == "fused", foreach=a.adam == "foreach")

        def step():
            with autocast():
                out = forward(x).logits if gpt else forward(x)
                loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1)) if gpt else loss_fn(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    elif a.mode == "infer":
        model.eval()

        def step():
            with torch.inference_mode(), autocast():
                forward(x)
    else:
        model.eval()
        prompt = x[:, : min(a.seq, 16)]
        items = a.batch * a.new

        def step():
            with torch.inference_mode():
                model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                               max_new_tokens=a.new, min_new_tokens=a.new, pad_token_id=0)

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    secs = (time.perf_counter() - t0) / a.steps
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if a.mode == "infer" and a.batch == 1:
        print(f"rate {secs * 1e3:.2f} unit ms peak_rss_mib {rss:.0f}")
    else:
        print(f"rate {items / secs:.2f} unit {'tokens/s' if gpt else 'images/s'} peak_rss_mib {rss:.0f}")


if __name__ == "__main__":
    main()
