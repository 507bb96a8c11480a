"""Hugging Face model families at small but realistic sizes against PyTorch
eager on the same CPU: inference and one AdamW training step, alternating in
one process (as bench_speed.py), ratio = tilefx / torch. Random weights from
configs, nothing downloaded. The five models of bench_speed.py are the
speed table; these are what users bring (llama's inference
was 1.27x eager before elementwise fusion deferred to ATen's kernels).

    .venv/bin/python benchmarks/bench_hf_speed.py [--steps N] [--batch B] [name ...]
"""

from __future__ import annotations

import argparse
import copy
import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers as T  # noqa: E402

import tilefx  # noqa: E402
from bench_speed import alternate  # noqa: E402  (tilefx and torch alternating, one process)

SEQ, VOCAB = 128, 1000


def families(batch: int) -> dict:
    """name -> (model factory, inputs with labels, inputs for inference)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (batch, SEQ), generator=g)
    ones = torch.ones(batch, SEQ, dtype=torch.long)
    pixels = torch.randn(batch, 3, 64, 64, generator=g)
    return {
        "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(
            vocab_size=VOCAB, n_embd=256, n_layer=4, n_head=4, n_positions=256, resid_pdrop=0,
            embd_pdrop=0, attn_pdrop=0, bos_token_id=0, eos_token_id=0, use_cache=False)),
            dict(input_ids=ids, labels=ids), dict(input_ids=ids)),
        "bert": (lambda: T.BertForSequenceClassification(T.BertConfig(
            vocab_size=VOCAB, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=1024, hidden_dropout_prob=0, attention_probs_dropout_prob=0)),
            dict(input_ids=ids, attention_mask=ones, labels=torch.randint(0, 2, (batch,), generator=g)),
            dict(input_ids=ids, attention_mask=ones)),
        "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(
            vocab_size=VOCAB, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, use_cache=False)),
            dict(input_ids=ids, labels=ids), dict(input_ids=ids)),
        "t5": (lambda: T.T5ForConditionalGeneration(T.T5Config(
            vocab_size=VOCAB, d_model=256, d_kv=64, d_ff=1024, num_layers=2, num_heads=4, dropout_rate=0,
            decoder_start_token_id=0, pad_token_id=0, use_cache=False)),
            dict(input_ids=ids, labels=ids), dict(input_ids=ids, decoder_input_ids=ids)),
        "vit": (lambda: T.ViTForImageClassification(T.ViTConfig(
            image_size=64, patch_size=8, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=1024, hidden_dropout_prob=0, attention_probs_dropout_prob=0, num_labels=10)),
            dict(pixel_values=pixels, labels=torch.randint(0, 10, (batch,), generator=g)),
            dict(pixel_values=pixels)),
    }


def bench(make, train_in: dict, infer_in: dict, steps: int) -> dict:
    torch.manual_seed(0)
    base = make().eval()
    ours, ref = copy.deepcopy(base), copy.deepcopy(base)
    infer = tilefx.inferenceModel(ours)
    infer(**infer_in)

    def torch_infer():
        with torch.no_grad():
            ref(**infer_in)

    i_ours, i_ref = alternate(lambda: infer(**infer_in), torch_infer, steps)
    ours, ref = copy.deepcopy(base).train(), copy.deepcopy(base).train()
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-4)
    trainer = tilefx.trainingModel(ours, optimizer=tilefx.optim.AdamW(ours.parameters(), lr=1e-4))
    trainer(**train_in)

    def torch_train():
        opt.zero_grad()
        ref(**train_in).loss.backward()
        opt.step()

    t_ours, t_ref = alternate(lambda: trainer(**train_in), torch_train, steps)
    trainer.destroy()
    return {"infer": (i_ours, i_ref), "train": (t_ours, t_ref)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    logging.getLogger("tilefx").setLevel(logging.WARNING)
    print(f"batch {a.batch}, {SEQ} tokens (ViT: 64x64 images, 8x8 patches); ms tilefx / torch, "
          f"median of {a.steps} alternating steps; torch on {torch.get_num_threads()} threads")
    print("| model | inference | ratio | training step | ratio |\n|---|---|---|---|---|")
    for name, (make, train_in, infer_in) in families(a.batch).items():
        if a.names and name not in a.names:
            continue
        r = bench(make, train_in, infer_in, a.steps)
        (io, ir), (to, tr) = r["infer"], r["train"]
        print(f"| {name} | {1e3 * io:.1f} / {1e3 * ir:.1f} | {io / ir:.2f} | "
              f"{1e3 * to:.1f} / {1e3 * tr:.1f} | {to / tr:.2f} |", flush=True)


if __name__ == "__main__":
    main()
