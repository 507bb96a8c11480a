"""`generate()` on a wrapped Hugging Face model (api/generation.py): the
tokens and every step's logits as eager PyTorch's generate(), decoder-only
and encoder-decoder, with the static cache tilefx picks and the growing
DynamicCache; a training model says what to call instead."""

from __future__ import annotations

import os

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

import tilefx  # noqa: E402
from test_hf_models import _decoder  # noqa: E402


def _generate(model, **kw):
    kw = dict(max_new_tokens=5, do_sample=False, return_dict_in_generate=True, output_logits=True, **kw)
    return model.generate(torch.randint(3, 64, (2, 5), generator=torch.Generator().manual_seed(1)), **kw)


def _same(out, ref):
    assert torch.equal(out.sequences, ref.sequences), (out.sequences, ref.sequences)
    assert len(out.logits) == len(ref.logits) == 5
    for step, (a, b) in enumerate(zip(out.logits, ref.logits)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=f"step {step}")


@pytest.mark.parametrize("kind", ["gpt2", "llama", "t5"])
def test_generate_on_an_inference_model_matches_eager(kind):
    """A PoplarExecutor runs one call signature; generate() calls the model
    with the prompt, then token by token: it was a shape error on the second
    call. Now two programs (prompt, step) with a static cache, three for
    T5 (its encoder, which generate() runs through get_encoder())."""
    model = _decoder(kind)
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        ref = _generate(model)
    ipu = tilefx.inferenceModel(model)
    _same(_generate(ipu), ref)
    programs = sum(len(p.programs) for p in ipu._generate_steps.values())
    assert programs == (3 if kind == "t5" else 2)
    _same(_generate(ipu), ref)  # a second generate() reuses the programs
    assert sum(len(p.programs) for p in ipu._generate_steps.values()) == programs


def test_generate_with_the_growing_dynamic_cache_matches_eager():
    model = _decoder("gpt2")
    with torch.no_grad():
        ref = _generate(model)
    ipu = tilefx.inferenceModel(model)
    _same(_generate(ipu, cache_implementation="dynamic"), ref)
    assert len(ipu._generate_steps[id(model)].programs) == 5  # the cache grows: one program per step


def test_generate_sees_the_trained_weights():
    """generate() on the inference model of a model being trained uses the
    weights of the last training step (implicit weight sync)."""
    model = _decoder("llama")
    ids = torch.randint(3, 64, (2, 6))
    training = tilefx.trainingModel(model.train(), optimizer=torch.optim.SGD(model.parameters(), lr=1.0))
    inference = tilefx.inferenceModel(model)
    for _ in range(2):
        training(input_ids=ids, labels=ids)
        model.eval()
        with torch.no_grad():
            ref = _generate(model)
        _same(_generate(inference), ref)


def test_generate_on_a_training_model_says_what_to_call():
    model = _decoder("gpt2").train()
    ipu = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(tilefx.Error, match=r"generate\(\) runs the model for inference: call it on "
                                           r"poptorch.inferenceModel\(model\)"):
        ipu.generate(torch.randint(3, 64, (2, 5)), max_new_tokens=2)


def test_models_without_generate_get_no_generate():
    assert not hasattr(tilefx.inferenceModel(torch.nn.Linear(2, 2)), "generate")


def test_generate_on_a_sharded_model_with_optimum_options():
    """The programs take the executor's options and the model's blocks: GPT-2
    parallelized as optimum-graphcore does, sharded over 3 IPUs by optimum-graphcore's
    `IPUConfig._to_options`:
    inference options."""
    from test_hf_flows import _PipelinedGPT2, _to_options

    model = _decoder("gpt2")
    with torch.no_grad():
        ref = _generate(model)
    _PipelinedGPT2.parallelize(model)  # its blocks, on the plain GPT2LMHeadModel's forward
    opts = _to_options(dict(inference_replication_factor=1, inference_device_iterations=1, output_mode="all",
                            optimizer_state_offchip=True, ipus_per_replica=3), for_inference=True)
    ipu = tilefx.inferenceModel(model, opts)
    _same(_generate(ipu), ref)
    programs = list(ipu._generate_steps[id(model)].programs.values())
    assert len(programs) == 2 and all(sorted(p.schedule.per_ipu()) == [0, 1, 2] for p in programs)


def test_generate_after_new_weights_are_loaded_uses_them():
    """The programs generate() keeps are the executor's own: weights loaded
    with load_state_dict (or edited and sent with copyWeightsToDevice) reach
    them, as they reach the executor's program (they kept the weights of
    their first compile: other tokens, silently)."""
    import copy

    model = _decoder("llama")
    model.generation_config.pad_token_id = 0
    ref = copy.deepcopy(model)
    ipu = tilefx.inferenceModel(model)
    _generate(ipu)
    torch.manual_seed(9)
    new = {k: torch.randn_like(v) * 0.5 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    ipu.load_state_dict(new)
    ref.load_state_dict(new)
    with torch.no_grad():
        want = _generate(ref)
    _same(_generate(ipu), want)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
        for p in ref.parameters():
            p.mul_(0.5)
        want = _generate(ref)
    ipu.copyWeightsToDevice()
    _same(_generate(ipu), want)


def test_generate_with_device_iterations_matches_eager():
    """With deviceIterations > 1 each model call's batch is split as PopTorch
    splits inputs: the static cache's own tensors cannot be, so the growing
    cache is used (it was an AssertionError naming an internal cache tensor)."""
    model = _decoder("gpt2")
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        ref = _generate(model)
    ipu = tilefx.inferenceModel(model, tilefx.Options().deviceIterations(2))
    _same(_generate(ipu), ref)
