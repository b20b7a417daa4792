"""The reference side of the model parity tests (tests/models/test_*.cpp): builds a randomly initialised model with
the implementation users take pretrained weights from (timm for ResNet-50 and ViT, transformers for GPT-2 and BERT),
writes it in that implementation's own format, and writes an input and what the implementation computes from it:
the outputs and, for the small configurations, every parameter's gradient of sum(output * gy).

    python ref.py {resnet50,vit,gpt2,bert,resnet50-full,vit-full,gpt2-full} OUTDIR

OUTDIR gets: model.safetensors (the state dict by upstream names; for the Hugging Face models a save_pretrained
folder: config.json + model.safetensors), inputs.safetensors and expected.safetensors ("out", "grad.<name>",
"buffer.<name>", "generated"). Small configurations run in float64, the full-size forwards in float32. Run by the
venv of `make models-ref`.
"""
import sys

import torch
from safetensors.torch import save_file


def randomize(model, seed):
    """Every parameter and buffer drawn at random (the libraries' inits zero some of them: a zero residual branch
    would hide a wrong one), with scales that keep activations of order one."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or p.dim() == 1:
                base = 1.0 if (name.endswith("weight") and p.dim() == 1) else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / fan_in ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g, dtype=b.dtype))
            elif name.endswith("running_var"):
                b.copy_(1 + 0.5 * torch.rand(b.shape, generator=g, dtype=b.dtype))


def contiguous(d):
    return {k: v.detach().contiguous() for k, v in d.items()}


def grads_of(model, out, gy):
    (out * gy).sum().backward()
    return {"grad." + n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def vision(name, outdir, full):
    import timm
    from timm.models.vision_transformer import VisionTransformer

    dtype = torch.float32 if full else torch.float64
    torch.manual_seed(0)
    if name == "resnet50":
        model = timm.create_model("resnet50", pretrained=False, num_classes=1000 if full else 10)
        size, batch = (224, 1) if full else (64, 2)
    else:
        if full:
            model = timm.create_model("vit_base_patch16_224", pretrained=False)
        else:
            model = VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, mlp_ratio=4,
                                      num_classes=10, qkv_bias=True)
        size, batch = (224, 1) if full else (32, 2)
    model = model.to(dtype)
    randomize(model, 1)
    state = contiguous(model.state_dict())
    save_file(state, f"{outdir}/model.safetensors")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(batch, 3, size, size, generator=g, dtype=dtype)
    if full:
        model.eval()
        with torch.no_grad():
            out = model(x)
        save_file({"x": x}, f"{outdir}/inputs.safetensors")
        save_file(contiguous({"out": out}), f"{outdir}/expected.safetensors")
        return
    model.train()  # BatchNorm on batch statistics: its backward and its running-statistics update are compared too
    x.requires_grad_(True)
    out = model(x)
    gy = torch.randn(out.shape, generator=g, dtype=dtype)
    expected = {"out": out}
    expected.update(grads_of(model, out, gy))
    expected["grad.input"] = x.grad
    for n, b in model.named_buffers():
        expected["buffer." + n] = b
    save_file({"x": x.detach(), "gy": gy}, f"{outdir}/inputs.safetensors")
    save_file(contiguous(expected), f"{outdir}/expected.safetensors")


def gpt2(outdir, full):
    from transformers import GPT2Config, GPT2LMHeadModel

    dtype = torch.float32 if full else torch.float64
    torch.manual_seed(0)
    if full:
        config = GPT2Config()  # GPT-2 small, 124M
    else:
        config = GPT2Config(vocab_size=97, n_positions=48, n_embd=32, n_layer=2, n_head=4)
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
    model = GPT2LMHeadModel(config).to(dtype)
    randomize(model, 3)
    model.save_pretrained(outdir)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, config.vocab_size, (1 if full else 2, 64 if full else 11), generator=g)
    model.eval()
    if full:
        with torch.no_grad():
            out = model(ids).logits
        save_file({"ids": ids}, f"{outdir}/inputs.safetensors")
        save_file(contiguous({"out": out}), f"{outdir}/expected.safetensors")
        return
    out = model(ids).logits
    gy = torch.randn(out.shape, generator=g, dtype=dtype)
    expected = {"out": out}
    expected.update(grads_of(model, out, gy))
    with torch.no_grad():
        prompt = ids[:, :5]
        generated = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                   max_new_tokens=20, min_new_tokens=20, pad_token_id=0)
    expected["generated"] = generated
    save_file({"ids": ids, "gy": gy}, f"{outdir}/inputs.safetensors")
    save_file(contiguous(expected), f"{outdir}/expected.safetensors")


def bert(outdir):
    from transformers import BertConfig, BertModel

    dtype = torch.float64
    torch.manual_seed(0)
    config = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=40, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertModel(config).to(dtype)
    randomize(model, 5)
    model.save_pretrained(outdir)
    g = torch.Generator().manual_seed(6)
    ids = torch.randint(1, config.vocab_size, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[1, 5:] = 0  # the second sentence is two tokens shorter: padding
    ids[1, 5:] = 0
    model.eval()
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    gy = torch.randn(out.shape, generator=g, dtype=dtype)
    expected = {"out": out}
    expected.update({k: v for k, v in grads_of(model, out, gy).items() if not k.startswith("grad.pooler.")})
    save_file({"ids": ids, "mask": mask, "gy": gy}, f"{outdir}/inputs.safetensors")
    save_file(contiguous(expected), f"{outdir}/expected.safetensors")


def main():
    what, outdir = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    full = what.endswith("-full")
    family = what[:-5] if full else what
    if family in ("resnet50", "vit"):
        vision(family, outdir, full)
    elif family == "gpt2":
        gpt2(outdir, full)
    elif family == "bert":
        bert(outdir)
    else:
        sys.exit(f"ref.py: unknown model {what}")


if __name__ == "__main__":
    main()
