"""Hugging Face models run the way PopTorch users run them, against eager
PyTorch: pipelined over 4 IPUs as optimum-graphcore's `parallelize()` does,
with the options its `IPUConfig._to_options` builds (optimum-graphcore `IPUConfig._to_options`, its calls as
written), and a model saved with `save_pretrained`, loaded, trained and
saved again (docs/hf_families.md, "The user flows")."""

from __future__ import annotations

import copy
import os
from tempfile import NamedTemporaryFile

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

import poptorch  # noqa: E402  (tilefx, as PopTorch code imports it)
import tilefx.popart as popart  # noqa: E402
from poptorch import OutputMode  # noqa: E402


def _to_options(cfg: dict, for_inference: bool = False) -> poptorch.Options:
    """optimum-graphcore's `IPUConfig._to_options`: `IPUConfig._to_options` with `self.x` read from `cfg`."""
    opts = poptorch.Options()
    opts.autoRoundNumIPUs(True)
    opts.replicationFactor(cfg["inference_replication_factor"] if for_inference else cfg["replication_factor"])
    opts.deviceIterations(cfg["inference_device_iterations"] if for_inference else cfg["device_iterations"])
    if not for_inference:
        opts.Training.gradientAccumulation(cfg["gradient_accumulation_steps"])
        opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
    output_mode_mapping = {"all": OutputMode.All, "sum": OutputMode.Sum, "final": OutputMode.Final,
                           "default": OutputMode.Default}
    opts.outputMode(OutputMode.All if for_inference else output_mode_mapping[cfg["output_mode"]])
    opts.randomSeed(42)
    opts.TensorLocations.setOptimizerLocation(
        poptorch.TensorLocationSettings()
        .useOnChipStorage(not cfg["optimizer_state_offchip"])
        .useReplicatedTensorSharding(False and opts.replication_factor > 1)
    )
    if for_inference:
        opts.setExecutionStrategy(poptorch.ShardedExecution(poptorch.AutoStage.AutoIncrement))
    else:
        opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
    opts.setAvailableMemoryProportion({f"IPU{i}": 0.2 for i in range(cfg["ipus_per_replica"])})
    opts.Precision.enableStochasticRounding(not for_inference)
    opts._Popart.set("disableGradAccumulationTensorStreams", True)
    opts._Popart.set("accumulateOuterFragmentSettings.schedule",
                     int(popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized))
    opts._Popart.set("accumulateOuterFragmentSettings.excludedVirtualGraphs", ["0"])
    opts._Popart.set("outlineThreshold", 10.0)
    opts._Popart.set("subgraphCopyingStrategy", int(popart.SubgraphCopyingStrategy.JustInTime))
    opts._Popart.set("scheduleNonWeightUpdateGradientConsumersEarly", True)
    opts._Popart.setPatterns({"TiedGather": True, "TiedGatherAccumulate": True,
                              "UpdateInplacePrioritiesForIpu": True})
    opts._Popart.set("saveInitializersToFile", NamedTemporaryFile().name)
    opts._Popart.set("engineOptions", {"opt.useAutoloader": "true", "target.syncReplicasIndependently": "true"})
    return opts


def _recomputation_checkpoint(module: torch.nn.Module):
    """optimum-graphcore's forward hook: the layer's outputs are checkpoints."""
    def hook(module, inputs, outputs):
        if isinstance(outputs, torch.Tensor):
            return poptorch.recomputationCheckpoint(outputs)
        return tuple(poptorch.recomputationCheckpoint(y) for y in outputs)
    return module.register_forward_hook(hook)


class _PipelinedBert(transformers.BertForSequenceClassification):
    def parallelize(self):
        self.bert.embeddings = poptorch.BeginBlock(self.bert.embeddings, "Embedding", ipu_id=0)
        for i, layer in enumerate(self.bert.encoder.layer):
            _recomputation_checkpoint(layer)
            self.bert.encoder.layer[i] = poptorch.BeginBlock(layer, f"Encoder{i}", ipu_id=i + 1)
        self.classifier = poptorch.BeginBlock(self.classifier, "Classifier", ipu_id=3)
        return self

    def forward(self, input_ids, attention_mask, token_type_ids, labels=None):
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               labels=labels, return_dict=False)


def _outline_attribute(module: torch.nn.Module, value: str):
    """optimum-graphcore's: the module's ops get the attribute PopART's outliner
    compares, through a poptorch.Attribute entered and left by hooks."""
    context = poptorch.Attribute(__outline={"layer": value})

    def enable(*args):
        context.__enter__()

    def disable(*args):
        context.__exit__(None, None, None)

    module.register_forward_pre_hook(enable)
    module.register_forward_hook(disable)


class _PipelinedGPT2(transformers.GPT2LMHeadModel):
    """The LM head shares the token embedding: it goes back to IPU 0."""

    def parallelize(self):
        _outline_attribute(self.transformer.ln_f, "LayerNorm")
        self.transformer.wte = poptorch.BeginBlock(self.transformer.wte, "Token embedding", ipu_id=0)
        self.transformer.wpe = poptorch.BeginBlock(self.transformer.wpe, "Position embedding", ipu_id=1)
        for i, layer in enumerate(self.transformer.h):
            _recomputation_checkpoint(layer)
            self.transformer.h[i] = poptorch.BeginBlock(layer, f"Layer{i}", ipu_id=i + 1)
        self.lm_head = poptorch.BeginBlock(self.lm_head, "LM head", ipu_id=0)
        return self

    def forward(self, input_ids, attention_mask, labels=None):
        hidden = self.transformer(input_ids, attention_mask=attention_mask)[0]
        logits = self.lm_head(hidden)
        if labels is None:
            return (logits,)
        labels = torch.roll(labels, -1, 1)  # optimum's shift, without slicing
        labels[:, -1] = -100
        return (torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1)),)


def _bert():
    torch.manual_seed(0)
    return _PipelinedBert(transformers.BertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3))


def _gpt2():
    torch.manual_seed(0)
    return _PipelinedGPT2(transformers.GPT2Config(
        vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))


def _batch(kind: str, n: int, g: torch.Generator) -> dict:
    ids = torch.randint(3, 64, (n, 8), generator=g)
    mask = torch.ones(n, 8, dtype=torch.long)
    for i, length in enumerate(torch.randint(4, 9, (n,), generator=g).tolist()):
        mask[i, length:] = 0  # real padding
    if kind == "bert":
        token_types = torch.zeros_like(ids)
        token_types[:, 4:] = 1
        return dict(input_ids=ids, attention_mask=mask, token_type_ids=token_types,
                    labels=torch.randint(0, 3, (n,), generator=g))
    labels = ids.clone()
    labels[mask == 0] = -100
    return dict(input_ids=ids, attention_mask=mask, labels=labels)


@pytest.mark.parametrize("kind,di,ga,rf,mode,ipus", [("bert", 1, 8, 2, "final", 4), ("gpt2", 2, 7, 1, "all", 3)])
def test_pipelined_training_with_optimum_options_matches_eager(kind, di, ga, rf, mode, ipus):
    model = _bert() if kind == "bert" else _gpt2()
    ref = copy.deepcopy(model)
    model.parallelize().train()
    cfg = dict(replication_factor=rf, device_iterations=di, gradient_accumulation_steps=ga, output_mode=mode,
               optimizer_state_offchip=True, inference_replication_factor=1, inference_device_iterations=4,
               ipus_per_replica=ipus)
    training = poptorch.trainingModel(model, _to_options(cfg),
                                      optimizer=poptorch.optim.AdamW(model.parameters(), lr=1e-3))
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    mb, g = 2, torch.Generator().manual_seed(1)
    batch = _batch(kind, di * ga * rf * mb, g)
    (loss,) = training(**batch)[:1]

    losses = []  # eager: one AdamW step per device iteration over ga x rf micro-batches, mean-reduced
    for it in range(di):
        ref_opt.zero_grad()
        for k in range(ga * rf):
            at = slice((it * ga * rf + k) * mb, (it * ga * rf + k + 1) * mb)
            micro = ref(**{n: v[at] for n, v in batch.items()})[0]
            (micro / (ga * rf)).backward()
            losses.append(micro.detach())
        ref_opt.step()
    losses = torch.stack(losses)
    expected = losses if mode == "all" else losses.view(di, ga, rf)[-1, -1]
    torch.testing.assert_close(loss, expected.reshape(loss.shape), rtol=1e-4, atol=1e-5)
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        # AdamW turns the key bias's rounding-noise gradient into a step of about lr
        atol = 1e-3 if n.endswith(("key.bias", "c_attn.bias")) else 2e-5
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-4, atol=atol, msg=n)
    assert sorted(training.schedule.per_ipu()) == list(range(ipus))
    if kind == "gpt2":  # optimum's outline attribute is on ln_f's ops, forward and backward, only
        marked = [line for line in training.ir("import").splitlines() if "__outline" in line]
        assert any("native_layer_norm\"" in line for line in marked)
        assert any("native_layer_norm_backward" in line for line in marked)
        assert all('layer = "LayerNorm"' in line and "ln_f" in line for line in marked), marked[:3]

    if kind == "bert":  # the seed's sharded inference of the trained model
        model.eval()
        ref.eval()
        inference = poptorch.inferenceModel(model, _to_options(cfg, for_inference=True))
        x = {n: v[:4 * mb] for n, v in _batch(kind, 4 * mb, g).items() if n != "labels"}
        with torch.no_grad():
            torch.testing.assert_close(inference(**x)[0], ref(**x)[0], rtol=1e-4, atol=1e-5)


def test_saved_model_loaded_trained_and_saved_again(tmp_path):
    """save_pretrained (safetensors) -> from_pretrained -> trainingModel ->
    inferenceModel (implicit weight sync) -> copyWeightsToHost ->
    save_pretrained -> from_pretrained: the weights eager training gives."""
    torch.manual_seed(0)
    transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0)).save_pretrained(tmp_path / "start")
    assert (tmp_path / "start" / "model.safetensors").exists()
    model = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "start").train()
    ref = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "start").train()
    ids, labels = torch.randint(3, 64, (2, 8)), torch.randint(3, 64, (2, 4))
    training = poptorch.trainingModel(model, optimizer=poptorch.optim.AdamW(model.parameters(), lr=1e-2))
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    for _ in range(2):
        out = training(input_ids=ids, labels=labels)
        ref_opt.zero_grad()
        ref_loss = ref(input_ids=ids, labels=labels).loss
        ref_loss.backward()
        ref_opt.step()
        torch.testing.assert_close(out.loss, ref_loss.detach(), rtol=1e-4, atol=1e-5)
    model.eval()
    ref.eval()
    x = dict(input_ids=ids, decoder_input_ids=labels)
    with torch.no_grad():
        torch.testing.assert_close(poptorch.inferenceModel(model)(**x).logits, ref(**x).logits,
                                   rtol=1e-4, atol=1e-5)
    training.copyWeightsToHost()
    model.save_pretrained(tmp_path / "trained")
    again = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "trained")
    for (n, p), q in zip(again.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q.detach(), rtol=1e-4, atol=1e-5, msg=n)


def test_attribute_values_are_checked():
    with pytest.raises(poptorch.Error, match="Attribute: __outline="):
        poptorch.Attribute(__outline={"layer": object()})



def _bert_eager_attention():
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3))
    model.config._attn_implementation = "eager"  # attention probabilities for output_attentions
    return model.eval()


def test_call_conventions_users_port(tmp_path):
    """A tokenizer's BatchEncoding (unpacked, and passed whole to a forward
    taking a dict), return_dict=False, hidden states and attentions,
    inputs_embeds: each as eager."""
    model = _bert_eager_attention()
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]
    (tmp_path / "vocab.txt").write_text("\n".join(words))
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt"))
    enc = tokenizer(["w1 w2 w3", "w4 w5 w6 w7 w8 w9"], padding="max_length", max_length=10, return_tensors="pt")
    assert int(enc["attention_mask"].sum()) < enc["attention_mask"].numel()  # real padding
    with torch.no_grad():
        ref = model(**enc, output_hidden_states=True, output_attentions=True)
        ref_embeds = model(inputs_embeds=model.bert.embeddings.word_embeddings(enc["input_ids"]),
                           attention_mask=enc["attention_mask"])
    out = poptorch.inferenceModel(model)(**enc, output_hidden_states=True, output_attentions=True)
    for key in ("logits", "hidden_states", "attentions"):
        torch.testing.assert_close(out[key], ref[key], rtol=1e-4, atol=1e-5, msg=key)
    logits, = poptorch.inferenceModel(model)(**enc, return_dict=False)
    torch.testing.assert_close(logits, ref.logits, rtol=1e-4, atol=1e-5)

    class TakesABatch(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, batch):
            return self.inner(**batch).logits

    torch.testing.assert_close(poptorch.inferenceModel(TakesABatch(model))(enc), ref.logits, rtol=1e-4, atol=1e-5)
    embeds = model.bert.embeddings.word_embeddings(enc["input_ids"]).detach()
    out = poptorch.inferenceModel(model)(inputs_embeds=embeds, attention_mask=enc["attention_mask"])
    torch.testing.assert_close(out.logits, ref_embeds.logits, rtol=1e-4, atol=1e-5)


def test_half_model_trains_with_loss_scaling_as_eager_fp16():
    """model.half() and SGD with loss_scaling: the loss and every weight as
    eager fp16 with the loss scaled and each gradient unscaled."""
    model = _bert_eager_attention().half().train()
    ref = copy.deepcopy(model)
    x = dict(input_ids=torch.randint(3, 64, (2, 8)), attention_mask=torch.ones(2, 8, dtype=torch.long),
             labels=torch.tensor([0, 2]))
    x["attention_mask"][0, 5:] = 0
    training = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1,
                                                                            loss_scaling=128.0))
    out = training(**x)
    ref_loss = ref(**x).loss
    (ref_loss * 128.0).backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= 0.1 * (p.grad / 128.0)
    assert out.loss.dtype == torch.float16
    torch.testing.assert_close(out.loss, ref_loss.detach(), rtol=1e-3, atol=1e-3)
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-3, atol=1e-4, msg=n)  # fp16: ~1e-3 relative
