"""Hugging Face model families (tiny configs, random weights, nothing
downloaded) through inferenceModel and trainingModel, against PyTorch on the
CPU; dropout on trains and is reproducible; data-dependent code in a model is
a tilefx.Error naming the op, the module and the source line."""

from __future__ import annotations

import copy
import os

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

import tilefx  # noqa: E402
from hf_families import FAMILIES, WITH_DROPOUT  # noqa: E402
from kernel_tolerance import assert_float32_close  # noqa: E402

RTOL = 1e-4


@pytest.mark.parametrize("name", list(FAMILIES))
def test_inference_matches_pytorch(name):
    fam = FAMILIES[name]
    model = fam.model().eval()
    x = fam.example(training=False)
    with torch.no_grad():
        ref = model(*x)
    out = tilefx.inferenceModel(model)(*x)
    torch.testing.assert_close(out, ref, rtol=RTOL, atol=1e-5)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_training_step_matches_pytorch(name):
    """One SGD step: the loss and every updated weight as PyTorch's."""
    fam = FAMILIES[name]
    model = fam.model().train()
    ref_model = copy.deepcopy(model)
    x = fam.example(training=True)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.5)
    ref_loss = ref_model(*x)
    ref_loss.backward()
    ref_opt.step()

    ipu = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    loss = ipu(*x)
    torch.testing.assert_close(loss, ref_loss.detach(), rtol=RTOL, atol=1e-6)
    moved = 0
    for (n, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=RTOL, atol=1e-5, msg=n)
        moved += bool(q.grad is not None and q.grad.abs().max() > 0)
    assert moved > 0


def _train(name: str, seed: int, steps: int = 3):
    fam = FAMILIES[name]
    model = fam.model(dropout=0.2).train()
    opts = tilefx.Options().randomSeed(seed)
    ipu = tilefx.trainingModel(model, opts, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    x = fam.example(training=True)
    losses = [float(ipu(*x)) for _ in range(steps)]
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", WITH_DROPOUT[:1])
def test_dropout_trains_and_is_reproducible(name):
    losses, weights = _train(name, seed=7)
    again, weights_again = _train(name, seed=7)
    assert losses == again  # same seed: the same masks, bit for bit
    for n in weights:
        assert torch.equal(weights[n], weights_again[n]), n
    # dropout is on: the first loss is not the dropout-free one
    fam = FAMILIES[name]
    plain = fam.model(dropout=0.0).train()
    with torch.no_grad():
        assert abs(float(plain(*fam.example())) - losses[0]) > 1e-6
    assert losses[-1] < losses[0]  # and it learns the batch


class _AskingLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.sum().item() > 0:  # a data-dependent question in Python
            h = -h
        return h


def test_data_dependent_code_names_op_module_and_line():
    model = torch.nn.Sequential()
    model.add_module("encoder", torch.nn.Sequential(torch.nn.Linear(4, 4), _AskingLayer()))
    with pytest.raises(tilefx.Error) as e:
        tilefx.inferenceModel(model)(torch.randn(2, 4))
    msg = str(e.value)
    assert "aten::_local_scalar_dense" in msg
    assert "encoder.1 (_AskingLayer)" in msg
    assert "test_hf_models.py" in msg and "h.sum().item() > 0" in msg


def test_data_dependent_shape_in_a_real_model_is_an_error():
    """BERT with a head that keeps the non-padding tokens (masked_select): the
    output shape depends on the mask."""
    fam = FAMILIES["bert"]

    class Selected(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = fam.model().model.bert

        def forward(self, ids, mask):
            h = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            return h[mask.bool()]

    ids, mask = fam.example(training=False)
    with pytest.raises(tilefx.Error) as e:
        tilefx.inferenceModel(Selected().eval())(ids, mask)
    assert "aten::" in str(e.value) and "test_hf_models.py" in str(e.value)


def test_hugging_face_model_called_with_keywords_returns_its_model_output():
    """No wrapper: keyword arguments in, the model's own ModelOutput out."""
    fam = FAMILIES["bert"]
    model = fam.build(0.0).eval()
    ids, mask, _ = fam.example()
    out = tilefx.inferenceModel(model)(input_ids=ids, attention_mask=mask)
    assert type(out).__name__ == "SequenceClassifierOutput"
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask)
    torch.testing.assert_close(out.logits, ref.logits, rtol=RTOL, atol=1e-5)


def test_causal_lm_called_directly_returns_its_cache():
    """The cache the model makes comes back as an object of its class holding
    the keys and values eager computes (it came back as None, and generate()
    then decoded every step without the prompt)."""
    fam = FAMILIES["llama"]
    model = fam.build(0.0).eval()
    ids = fam.example(training=False)[0]
    out = tilefx.inferenceModel(model)(input_ids=ids)
    with torch.no_grad():
        ref = model(input_ids=ids)
    torch.testing.assert_close(out.logits, ref.logits, rtol=RTOL, atol=1e-5)
    assert type(out.past_key_values) is type(ref.past_key_values)
    assert len(out.past_key_values.layers) == len(ref.past_key_values.layers) > 0
    for layer, ref_layer in zip(out.past_key_values.layers, ref.past_key_values.layers):
        torch.testing.assert_close(layer.keys, ref_layer.keys, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(layer.values, ref_layer.values, rtol=1e-5, atol=1e-6)
    assert out.past_key_values.get_seq_length() == ids.shape[1]


def _raises_naming(model, args: tuple, kwargs: dict, training: bool, *needles: str) -> None:
    model.train(training)
    with pytest.raises(tilefx.Error) as e:
        if training:
            tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))(*args, **kwargs)
        else:
            tilefx.inferenceModel(model)(*args, **kwargs)
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))


def test_moe_default_grouped_experts_name_the_custom_op():
    """Mixtral's default experts ("grouped_mm") run a transformers custom op
    over routing-sized groups; the error names it, the module and the line
    (the "batched_mm" experts run: the mixtral family)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    model = MixtralForCausalLM(MixtralConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                             num_local_experts=4, num_experts_per_tok=2))
    ids = FAMILIES["llama"].example(training=False)[0]
    _raises_naming(model, (), {"input_ids": ids}, False, "grouped_mm_fallback", "'transformers' library",
                   "MixtralExperts", "moe.py:")


def test_ctc_head_with_host_checks_names_the_line():
    """Wav2Vec2ForCTC checks labels.max() on the host and keeps the labels by a
    mask (a data-dependent length) before its CTC loss."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    from hf_families import _WAV2VEC2

    torch.manual_seed(0)
    model = Wav2Vec2ForCTC(Wav2Vec2Config(**_WAV2VEC2, pad_token_id=0))
    x = torch.randn(2, 160)
    labels = torch.randint(1, 64, (2, 3))
    _raises_naming(model, (), {"input_values": x, "labels": labels}, True, "aten::_local_scalar_dense",
                   "Wav2Vec2ForCTC", "modeling_wav2vec2.py:", "labels.max()")


def test_spec_augment_mask_passed_in_trains_like_pytorch():
    """HuBERT's SpecAugment writes its learned embedding through the time mask
    (`hidden[mask] = masked_spec_embed`, whose gradient torch takes by a
    data-dependent gather). With the mask passed in (`mask_time_indices`, a
    fresh one each step) training matches eager and moves the embedding."""
    from transformers import HubertConfig, HubertForSequenceClassification

    from hf_families import _WAV2VEC2

    config = dict(_WAV2VEC2, mask_time_prob=0.05, layerdrop=0.0, hidden_dropout=0.0, attention_dropout=0.0,
                  activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0)

    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = HubertForSequenceClassification(HubertConfig(**config))

        def forward(self, x, mask, y):
            return self.m(input_values=x, mask_time_indices=mask, labels=y).loss

    torch.manual_seed(0)
    model = Masked().train()
    ref = copy.deepcopy(model)
    start = model.m.hubert.masked_spec_embed.detach().clone()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    x, y = torch.randn(2, 400), torch.tensor([0, 2])
    for _ in range(3):
        mask = torch.rand(2, 39) < 0.4
        opt.zero_grad()
        want = ref(x, mask, y)
        want.backward()
        opt.step()
        torch.testing.assert_close(trainer(x, mask, y), want.detach(), rtol=RTOL, atol=1e-6)
    trainer.copyWeightsToHost()
    embed = model.m.hubert.masked_spec_embed.detach()
    torch.testing.assert_close(embed, ref.m.hubert.masked_spec_embed.detach(), rtol=RTOL, atol=1e-6)
    assert (embed - start).abs().max() > 1e-4


def test_sequence_classification_by_eos_token_names_the_op():
    """BART's classification head picks the <eos> positions by a boolean mask."""
    from transformers import BartConfig, BartForSequenceClassification

    from hf_families import _S2S

    torch.manual_seed(0)
    model = BartForSequenceClassification(BartConfig(**_S2S, num_labels=3))
    ids = FAMILIES["bert"].example(training=False)[0].clone()
    ids[:, -1] = 2  # the <eos> token
    _raises_naming(model, (), {"input_ids": ids}, False, "aten::unique_consecutive", "BartForSequenceClassification",
                   "modeling_bart.py:")


class _CachedBias(torch.nn.Module):
    """LeViT's pattern: eval mode caches a tensor computed from a parameter in
    a plain dict attribute."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(4))
        self.cache = {}

    def forward(self, x):
        if "cpu" not in self.cache:
            self.cache["cpu"] = self.bias * 2
        return x + self.cache["cpu"]


@pytest.mark.parametrize("filled", [False, True])
def test_tensor_cache_in_a_dict_is_a_constant_and_stays_real(filled):
    model = _CachedBias().eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        if filled:
            model(x)  # the eager run fills the cache
        ref = x + model.bias * 2
        out = tilefx.inferenceModel(model)(x)
    torch.testing.assert_close(out, ref)
    # the trace leaves no traced (fake) tensor in the model's dict
    assert list(model.cache) == (["cpu"] if filled else [])
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref)


def test_keywords_reach_the_model_as_keywords():
    """transformers' config-default decorator finds `use_cache` by its position
    in the wrapped function's variables: a call rebuilt positionally gave
    XGLM "multiple values for argument 'use_cache'"."""
    from transformers import XGLMConfig, XGLMForCausalLM

    torch.manual_seed(0)
    model = XGLMForCausalLM(XGLMConfig(vocab_size=64, d_model=16, num_layers=1, attention_heads=2, ffn_dim=32,
                                       max_position_embeddings=32, dropout=0.0, attention_dropout=0.0,
                                       activation_dropout=0.0)).eval()
    ids = FAMILIES["llama"].example(training=False)[0]
    out = tilefx.inferenceModel(model)(input_ids=ids, use_cache=False)
    with torch.no_grad():
        torch.testing.assert_close(out.logits, model(input_ids=ids, use_cache=False).logits, rtol=RTOL, atol=1e-5)


# -- gradient checkpointing (torch.utils.checkpoint) ------------------------------

def _tiny_bert_classifier():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, num_labels=3)
    return transformers.BertForSequenceClassification(cfg)


@pytest.mark.parametrize("opt,steps,reentrant", [("sgd", 3, False), ("adamw", 2, False), ("sgd", 2, True)])
def test_gradient_checkpointing_matches_pytorch_at_every_step(opt, steps, reentrant):
    """The checkpoint's recompute ran in the backward, after functional_call had
    put the real parameters back, so the trace captured them as constants: the
    gradients of step 2 on were those of the first weights."""
    model = _tiny_bert_classifier()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model.train()
    # the weights are checked by the float64 rule of tests/kernel_tolerance.py:
    # Adam divides each step by the root of the gradient's second moment, so
    # where a gradient is rounding noise (softmax ignores the key bias) or
    # nearly cancels, the float32 rounding of the gradient becomes a step of
    # about lr, and how it rounds depends on the CPU's kernels
    ref, ref64 = copy.deepcopy(model), copy.deepcopy(model).double()
    kw = dict(input_ids=torch.randint(3, 64, (2, 8)), labels=torch.tensor([0, 2]))
    if opt == "sgd":
        ref_opts = [torch.optim.SGD(r.parameters(), lr=0.5) for r in (ref, ref64)]
        ipu = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.5))
    else:
        ref_opts = [torch.optim.AdamW(r.parameters(), lr=1e-3) for r in (ref, ref64)]
        ipu = tilefx.trainingModel(model, optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-3))
    for step in range(steps):
        for r, r_opt in zip((ref, ref64), ref_opts):
            r_opt.zero_grad()
            r_loss = r(**kw).loss
            r_loss.backward()
            r_opt.step()
            if r is ref:
                ref_loss = r_loss.detach()
        loss = ipu(**kw).loss
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-7)
        for (n, p), q, q64 in zip(model.named_parameters(), ref.parameters(), ref64.parameters()):
            assert_float32_close(p.detach().numpy(), q.detach().numpy(), q64.detach().numpy(),
                                 what=f"step {step}: {n}")


class _Checkpointed(torch.nn.Module):
    def __init__(self, reentrant: bool):
        super().__init__()
        self.a = torch.nn.Linear(4, 8)
        self.b = torch.nn.Linear(8, 4)
        self.reentrant = reentrant

    def block(self, x):
        return self.b(torch.tanh(self.a(x)))

    def forward(self, x, y):
        h = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=self.reentrant)
        return torch.nn.functional.mse_loss(h, y)


@pytest.mark.parametrize("reentrant", [False, True])
def test_torch_checkpoint_in_a_plain_module_matches_pytorch(reentrant):
    torch.manual_seed(0)
    model = _Checkpointed(reentrant)
    ref = copy.deepcopy(model)
    x = torch.randn(3, 4, requires_grad=reentrant)  # reentrant: no input needing grad, no weight grads
    y = torch.randn(3, 4)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ipu = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    for step in range(3):
        ref_opt.zero_grad()
        ref_loss = ref(x, y)
        ref_loss.backward()
        ref_opt.step()
        loss = ipu(x, y)
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-5, atol=1e-7)
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-7, msg=f"step {step}: {n}")


# -- a key/value cache passed in (incremental decoding) ---------------------------

def _decoder(kind: str):
    torch.manual_seed(0)
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
            max_position_embeddings=32)).eval()
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32, bos_token_id=0,
            eos_token_id=0)).eval()
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0)).eval()


@pytest.mark.parametrize("kind", ["llama", "gpt2", "t5"])
def test_past_key_values_cache_passed_in_matches_pytorch(kind):
    """The cache reached the model as `past_key_values=` next to the bound default
    `cache=None`, and transformers' rename decorator kept `cache`: the logits were
    those of a call with no cache. The cache is also opened into graph inputs, so
    a second call with another cache object runs with its tensors."""
    model = _decoder(kind)
    x = torch.randint(3, 64, (2, 8))
    nxt = torch.tensor([[5], [7]])
    extra = {"decoder_input_ids": torch.randint(3, 64, (2, 4))} if kind == "t5" else {}
    step = {"input_ids": x, "decoder_input_ids": nxt} if kind == "t5" else {"input_ids": nxt}
    with torch.no_grad():
        past = model(input_ids=x, use_cache=True, **extra).past_key_values
        ref = model(**step, past_key_values=copy.deepcopy(past)).logits
        no_cache = model(**step).logits
    assert (ref - no_cache).abs().max() > 1e-3
    ipu = tilefx.inferenceModel(model)
    out = ipu(**step, past_key_values=copy.deepcopy(past)).logits
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)

    other = copy.deepcopy(past)
    caches = [other.self_attention_cache, other.cross_attention_cache] if kind == "t5" else [other]
    for c in caches:
        for layer in c.layers:
            layer.keys = layer.keys + 1.0
    with torch.no_grad():
        ref2 = model(**step, past_key_values=copy.deepcopy(other)).logits
    assert (ref2 - ref).abs().max() > 1e-4
    torch.testing.assert_close(ipu(**step, past_key_values=other).logits, ref2, rtol=1e-5, atol=1e-5)


def test_static_cache_passed_in_matches_pytorch_and_is_updated_in_place():
    model = _decoder("llama")
    cfg = model.config
    x, nxt, pos = torch.randint(3, 64, (2, 8)), torch.tensor([[5], [7]]), torch.tensor([8])
    cache = transformers.StaticCache(config=cfg, max_cache_len=16)
    with torch.no_grad():
        model(input_ids=x, past_key_values=cache, use_cache=True)
        ref_cache = copy.deepcopy(cache)
        ref = model(input_ids=nxt, past_key_values=ref_cache, cache_position=pos).logits
    out = tilefx.inferenceModel(model)(input_ids=nxt, past_key_values=cache, cache_position=pos).logits
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for layer, ref_layer in zip(cache.layers, ref_cache.layers):
        torch.testing.assert_close(layer.keys, ref_layer.keys, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(layer.values, ref_layer.values, rtol=1e-5, atol=1e-6)


def test_torch_checkpoint_region_becomes_an_ipu_recomputation_checkpoint():
    """The checkpoint runs once in the trace; its differentiable inputs are
    marked as recomputation checkpoints, so the machine model recomputes."""
    from tilefx.lowering.from_torch import trace

    torch.manual_seed(0)
    traced = trace(_Checkpointed(False), (torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)),
                   training=True)
    assert str(traced.module).count("ipu.recomputation_checkpoint") == 1


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_static_cache_filled_by_the_prompt_call_then_decoded_step_by_step(kind):
    """generate()'s static cache is allocated by the model's first call (lazily,
    inside the forward); that allocation stayed in the trace, so the decoding
    steps ran against an empty cache: wrong logits, no error."""
    model = _decoder(kind)
    x = torch.randint(3, 64, (2, 6))
    cache = transformers.StaticCache(config=model.config, max_cache_len=10)
    ref_cache = copy.deepcopy(cache)
    prefill, step = tilefx.inferenceModel(model), tilefx.inferenceModel(model)
    out = prefill(input_ids=x, past_key_values=cache, use_cache=True)
    with torch.no_grad():
        ref = model(input_ids=x, past_key_values=ref_cache, use_cache=True)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    assert out.past_key_values is cache  # the cache passed in, as eager returns it
    for nxt in ([[5], [7]], [[9], [3]]):
        nxt = torch.tensor(nxt)
        out = step(input_ids=nxt, past_key_values=cache)
        with torch.no_grad():
            ref = model(input_ids=nxt, past_key_values=ref_cache)
        torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    for layer, ref_layer in zip(cache.layers, ref_cache.layers):
        torch.testing.assert_close(layer.keys, ref_layer.keys, rtol=1e-5, atol=1e-6)
        assert int(layer.cumulative_length) == int(ref_layer.cumulative_length) == 8


@pytest.mark.parametrize("kind", ["llama", "t5"])
def test_dynamic_cache_passed_in_grows_in_place_as_in_eager(kind):
    """Eager transformers extends a DynamicCache passed in; a loop that passes
    the same object on relied on it and read a cache without the new tokens."""
    model = _decoder(kind)
    x = torch.randint(3, 64, (2, 8))
    extra = {"decoder_input_ids": torch.randint(3, 64, (2, 4))} if kind == "t5" else {}
    if kind == "t5":
        cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())
    else:
        cache = transformers.DynamicCache()
    ref_cache = copy.deepcopy(cache)
    out = tilefx.inferenceModel(model)(input_ids=x, past_key_values=cache, use_cache=True, **extra)
    with torch.no_grad():
        ref = model(input_ids=x, past_key_values=ref_cache, use_cache=True, **extra)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    assert out.past_key_values is cache
    pairs = [(cache.self_attention_cache, ref_cache.self_attention_cache),
             (cache.cross_attention_cache, ref_cache.cross_attention_cache)] if kind == "t5" else [(cache, ref_cache)]
    for mine, theirs in pairs:
        assert len(mine.layers) == len(theirs.layers) > 0
        for layer, ref_layer in zip(mine.layers, theirs.layers):
            torch.testing.assert_close(layer.keys, ref_layer.keys, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(layer.values, ref_layer.values, rtol=1e-5, atol=1e-6)
    assert cache.get_seq_length() == ref_cache.get_seq_length() > 0


def test_executable_cache_and_export_with_a_model_that_returns_its_cache(tmp_path):
    """The executable file keeps no Python cache objects: a program whose call
    passes or returns transformers caches is not stored in the executable
    cache (a hit returned the graph's raw outputs: a tuple, no logits) and
    compileAndExport says to pass use_cache=False, which exports and loads."""
    model = _decoder("gpt2")
    ids = torch.randint(3, 64, (2, 6))
    with torch.no_grad():
        ref = model(input_ids=ids)
    for _ in range(2):
        out = tilefx.inferenceModel(model, tilefx.Options().enableExecutableCaching(str(tmp_path / "c")))(
            input_ids=ids)
        torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
        assert out.past_key_values.get_seq_length() == 6
    with pytest.raises(tilefx.Error, match="use_cache=False"):
        tilefx.inferenceModel(model).compileAndExport(str(tmp_path / "m.tilefx"), input_ids=ids)
    tilefx.inferenceModel(model).compileAndExport(str(tmp_path / "m.tilefx"), input_ids=ids, use_cache=False)
    loaded = tilefx.inferenceModel(model)
    loaded.loadExecutable(str(tmp_path / "m.tilefx"))
    out = loaded(input_ids=ids, use_cache=False)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)


# -- the second sweep's families in docs/hf_families.md ---------------------------------

def _reformer():
    from transformers import ReformerConfig, ReformerModelWithLMHead

    torch.manual_seed(0)
    return ReformerModelWithLMHead(ReformerConfig(
        vocab_size=64, hidden_size=16, num_attention_heads=2, attention_head_size=8, feed_forward_size=32,
        attn_layers=["local", "local"], axial_pos_shape=[2, 4], axial_pos_embds_dim=[8, 8],
        max_position_embeddings=8, local_attn_chunk_length=4, is_decoder=True, hidden_dropout_prob=0.0,
        local_attention_probs_dropout_prob=0.0, pad_token_id=0))


def test_reformer_reversible_layers_train_as_pytorch():
    """Reformer's reversible layers differentiate themselves: a custom
    autograd.Function whose backward reruns each layer and calls backward()
    on it. Their weights were never trained (the second loss differed)."""
    model = _reformer().train()
    ref = copy.deepcopy(model)
    ids = FAMILIES["llama"].example(training=False)[0]
    opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    trainer = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    for _ in range(2):
        opt.zero_grad()
        want = ref(input_ids=ids, labels=ids).loss
        want.backward()
        opt.step()
        torch.testing.assert_close(trainer(input_ids=ids, labels=ids).loss, want.detach(), rtol=RTOL, atol=1e-6)
    trainer.copyWeightsToHost()
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p, q, rtol=RTOL, atol=1e-5, msg=n)


def test_reformer_inference_names_its_host_read():
    """In eval mode the axial position embeddings keep as many columns as
    `position_ids.max().item()` asks: a data-dependent shape."""
    ids = FAMILIES["llama"].example(training=False)[0]
    _raises_naming(_reformer(), (), {"input_ids": ids}, False, "aten::_local_scalar_dense",
                   "AxialPositionEmbeddings", "modeling_reformer.py:", "position_ids.max().item()")


def test_encodec_configuration_buffers_are_read_as_values():
    """Encodec's convolutions size their padding from `stride` and
    `kernel_size` kept in non-persistent buffers (`.item()` on the host): a
    data-dependent error before; now their compile-time values, as PopTorch."""
    from transformers import EncodecConfig, EncodecModel

    torch.manual_seed(0)
    model = EncodecModel(EncodecConfig(target_bandwidths=[8.0], sampling_rate=8000, audio_channels=1,
                                       hidden_size=8, num_filters=4, num_residual_layers=1,
                                       upsampling_ratios=[4, 2], codebook_size=16, codebook_dim=8,
                                       num_lstm_layers=1, kernel_size=3, last_kernel_size=3,
                                       residual_kernel_size=3)).eval()
    x = torch.randn(2, 1, 64)
    out = tilefx.inferenceModel(model)(input_values=x)
    with torch.no_grad():
        ref = model(input_values=x)
    assert torch.equal(out.audio_codes, ref.audio_codes)
    torch.testing.assert_close(out.audio_values, ref.audio_values, rtol=RTOL, atol=1e-5)
