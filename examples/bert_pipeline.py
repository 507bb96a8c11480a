"""BERT fine-tuned for sequence classification, pipelined over 4 simulated
IPUs the way optimum-graphcore does it (shared/optimum-graphcore `IPUConfig._to_options`).

The model is a `transformers` BertForSequenceClassification built from a
small config (random weights: nothing is downloaded). As optimum-graphcore's
`PipelinedBertForSequenceClassification.parallelize()` does, the embeddings
get a `BeginBlock` on IPU 0, the encoder layers are spread over the next
IPUs (`layers_per_ipu`), and the classifier head a `BeginBlock` on the last
IPU; the options are optimum's: `PipelinedExecution(AutoStage.AutoIncrement)`,
gradient accumulation (at least 2 x 4 - 1 micro-batches for a 4-stage
training pipeline), mean reduction, `OutputMode.Final`, a random seed.

The task it learns is synthetic: each sequence is 16 random "word" tokens
and the label says whether the "not" token (id 5) occurs anywhere in it. A
bag of tokens cannot be read off one position: the [CLS] token the pooler
classifies has to attend to the whole sequence, so the accuracy on held-out
sequences (50% by chance) shows the attention layers learnt.

    .venv/bin/python examples/bert_pipeline.py [--steps N] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification  # noqa: E402

import tilefx as poptorch  # noqa: E402

VOCAB, SEQ, NOT_TOKEN, CLS, FIRST_WORD = 64, 16, 5, 1, 10


class PipelinedBertForSequenceClassification(BertForSequenceClassification):
    """BertForSequenceClassification with optimum-graphcore's parallelize()."""

    def parallelize(self, layers_per_ipu: list[int]):
        self.bert.embeddings = poptorch.BeginBlock(self.bert.embeddings, "Embedding", ipu_id=0)
        layer_ipu = [ipu for ipu, n in enumerate(layers_per_ipu) for _ in range(n)]
        assert len(layer_ipu) == len(self.bert.encoder.layer), "layers_per_ipu must cover the layers"
        for index, layer in enumerate(self.bert.encoder.layer):
            self.bert.encoder.layer[index] = poptorch.BeginBlock(layer, f"Encoder{index}",
                                                                 ipu_id=layer_ipu[index])
        last_ipu = len(layers_per_ipu) - 1
        self.classifier = poptorch.BeginBlock(self.classifier, "Classifier Output", ipu_id=last_ipu)
        return self

    def forward(self, input_ids, attention_mask, token_type_ids, labels=None):
        # a tuple, as optimum-graphcore's models return: (loss, logits) or (logits,)
        return super().forward(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids, labels=labels, return_dict=False)


def make_data(n: int, generator: torch.Generator):
    """Sequences of [CLS] + 15 word tokens; label 1 when the "not" token is among them."""
    ids = torch.randint(FIRST_WORD, VOCAB, (n, SEQ), generator=generator)
    ids[:, 0] = CLS
    labels = torch.randint(0, 2, (n,), generator=generator)
    where = torch.randint(1, SEQ, (n,), generator=generator)
    ids[labels == 1, where[labels == 1]] = NOT_TOKEN
    return ids, torch.ones_like(ids), torch.zeros_like(ids), labels


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=90, help="training calls (weight updates)")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--gradient-accumulation", type=int, default=8)
    ap.add_argument("--learning-rate", type=float, default=2e-3)
    ap.add_argument("--test-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=SEQ, num_labels=2,
                        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = PipelinedBertForSequenceClassification(config).parallelize(layers_per_ipu=[0, 1, 1, 1])
    model.train()

    opts = poptorch.Options().deviceIterations(1).randomSeed(args.seed)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
    opts.outputMode(poptorch.OutputMode.Final)
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    training = poptorch.trainingModel(model, opts, optimizer=optimizer)

    g = torch.Generator().manual_seed(args.seed)
    batch = args.micro_batch * args.gradient_accumulation
    t0, losses = time.perf_counter(), []
    for step in range(args.steps):
        loss, _ = training(*make_data(batch, g))
        losses.append(float(loss))
        if step == 0:
            t_first = time.perf_counter() - t0
        if (step + 1) % max(1, args.steps // 6) == 0 or step + 1 == args.steps:
            recent = losses[-max(1, args.steps // 6):]
            print(f"step {step + 1}: loss {sum(recent) / len(recent):.4f}")
    t_train = time.perf_counter() - t0

    # inference on held-out sequences: a 4-stage pipeline needs >= 4 micro-batches per call
    model.eval()
    inf_opts = poptorch.Options().deviceIterations(4)
    inf_opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    inference = poptorch.inferenceModel(model, inf_opts)
    test = make_data(args.test_size, torch.Generator().manual_seed(args.seed + 1))
    correct = 0
    chunk = 4 * args.micro_batch
    for i in range(0, args.test_size - chunk + 1, chunk):
        (logits,) = inference(*[t[i:i + chunk] for t in test[:3]])
        correct += int((logits.argmax(-1) == test[3][i:i + chunk]).sum())
    evaluated = args.test_size // chunk * chunk
    accuracy = 100.0 * correct / evaluated
    print(f"accuracy on {evaluated} held-out sequences: {accuracy:.1f}% (chance: 50%)")

    print("Profile summary:")
    print(f"  compile (trace to ready executor): training {training.compile_seconds:.2f} s, "
          f"inference {inference.compile_seconds:.2f} s")
    print(f"  {args.steps} training calls of {batch} sequences in {t_train:.1f} s on the host "
          f"(first call, with compile: {t_first:.1f} s)")
    print("  training " + training.schedule.summary().replace("\n", "\n  "))
    print("  simulated " + training.profile.table().replace("\n", "\n  "))
    print("  inference " + inference.schedule.summary().replace("\n", "\n  "))
    return {"accuracy": accuracy, "losses": losses, "training": training, "inference": inference}


if __name__ == "__main__":
    main()
