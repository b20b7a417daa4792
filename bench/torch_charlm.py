# PyTorch's side of bench/charlm_table.sh: examples/charlm's GPT written in PyTorch (the venv's 2.x, or Debian's
# python3-torch 1.13), attention through scaled_dot_product_attention where PyTorch has it (2.x), else the usual
# composite softmax(q k^T / sqrt(d)) v; the same AdamW step on random token windows; prints tokens/s and the
# process's peak resident memory.
#   python3 bench/torch_charlm.py THREADS [STEPS] [BATCH] [CONTEXT] [D] [HEADS] [BLOCKS] [VOCAB]
import math, resource, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

args = [int(a) for a in sys.argv[1:]]
threads, steps, batch, context, d, heads, blocks, vocab = (args + [1, 10, 32, 128, 128, 4, 4, 96][len(args):])[:8]
torch.set_num_threads(threads)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer("causal", torch.ones(context, context, dtype=torch.bool).tril())

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2.x: its fused attention
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d)
        else:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(d // heads)
            s = s.masked_fill(~self.causal[:T, :T], float("-inf"))
            a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, d)
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(context, d))
        self.blocks = nn.ModuleList(Block() for _ in range(blocks))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        h = self.tok(idx) + self.pos[: idx.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.ln_f(h) @ self.tok.weight.t()


model = GPT()
nn.init.normal_(model.tok.weight, 0.0, 0.02)  # as the Ember model (GPT-2's initialisation)
nn.init.normal_(model.pos, 0.0, 0.02)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, vocab, (batch, context))
y = torch.randint(0, vocab, (batch, context))


def step():
    loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


for _ in range(3):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    last = step().item()
secs = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"pytorch tokens/s {steps * batch * context / secs:.0f} peak_rss_mib {rss:.1f} threads {torch.get_num_threads()} "
      f"loss {last:.4f} params {sum(p.numel() for p in model.parameters())}")
