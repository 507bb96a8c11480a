"""The ViT miss's breakdowns (benchmarks/vit_miss_validation.py,
docs/machine-validation.md "The ViT miss"): the step times the full
validation prints per training row, and an IPU's op cycles by class and its
micro-batch step by kind, on a small pipeline compiled compile-only."""

import os
import sys

import pytest
import torch

from repo_paths import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import machine_validation as mv  # noqa: E402
import vit_miss_validation as vm  # noqa: E402
from test_machine_validation import TinyBert  # noqa: E402  (two BERT layers over two IPUs)


def test_step_shapes_are_the_training_rows():
    """Every whole-model training row whose item is its micro-batch's has its
    replicas and micro-batch (SchNet counts molecules in packs of them)."""
    training = {r.key for r in mv.rows() if r.key != "matmul" and "infer" not in r.key}
    assert set(vm.STEP_SHAPES) == training - {"schnet-hydronet-pod16"}


def test_step_times_are_one_replicas_micro_batch_over_the_throughput():
    # ViT pre-training on a Bow Pod16: 4 replicas of micro-batch 8 at 7,615 img/s
    published, computed = vm.step_times(7615, 15230, 4, 8)
    assert published == pytest.approx(4.202e-3, rel=1e-3)
    assert computed == pytest.approx(published / 2)
    assert vm.published_step_cycles(7615, 4, 8, mv.BOW) == pytest.approx(published * 1.85e9)


@pytest.mark.parametrize("name, label", [
    ("aten.addmm", "linear products"), ("aten.mm", "linear products"), ("aten.bmm", "attention products"),
    ("aten._softmax_backward_data", "softmax"), ("aten.native_layer_norm", "layer norm"),
    ("aten.gelu_backward", "GELU"), ("aten.native_dropout", "dropout"),
    ("aten.clone", "copies, concatenations, casts"), ("ipu.lamb", "accumulation and optimizer"),
    ("ipu.accumulate", "accumulation and optimizer"), ("aten.add.Tensor", vm.OTHER),
    ("aten.mmx", vm.OTHER),  # a name is matched whole, a prefix only where it ends in "."
])
def test_op_classes(name, label):
    assert vm.op_class(name) == label


def test_class_cycles_and_step_parts_split_a_pipelines_profile():
    """The classes add up to the IPU's op cycles; a micro-batch's step on the
    first IPU holds its compute, the copy of its activations to IPU 1 and the
    input's host stream; every layer's products are linear products."""
    profiles = []
    mv.pipelined_throughput(TinyBert, lambda n: (mv._meta(n, 16, 64), mv._meta(n, dtype=torch.long)),
                            machine=mv.BOW, replicas=1, mb=2, accumulation=8, proportions=(0.3, 0.3),
                            optimizer="lamb", profiles=profiles)
    profile = profiles[0]
    for ipu in (0, 1):
        classes = vm.class_cycles(profile, ipu)
        assert sum(classes.values()) == sum(r.cost.cycles for r in profile.ops if r.ipu == ipu)
        assert classes["linear products"] > 0 and classes["attention products"] > 0
    parts = vm.step_parts(profile, 0)
    assert parts["compute"] > 0 and parts["IPU-Link copies"] > 0 and parts["host streams"] > 0
    per = vm.per_token_layer(parts, 2 * 16, 1)
    assert per["compute"] == pytest.approx(parts["compute"] / 32)


def test_vit_miss_checks_turn_recomputation_off_not_just_the_checkpoints(monkeypatch):
    """Without checkpoints PopTorch's default still recomputes each pipeline
    stage from its input; the check "no recomputation" sets PopART's
    autoRecomputation None (0), and the check without checkpoints is a
    separate one."""
    seen = []

    def record(build, inputs, **kw):
        seen.append((build().recompute, kw.get("recomputation")))
        return 1.0

    monkeypatch.setattr(mv, "pipelined_throughput", record)
    monkeypatch.setattr(mv, "vit", mv.vit.__wrapped__)  # not the cached compiles
    with torch.device("meta"):
        checks = dict(mv.vit_miss_checks())
    assert set(checks) >= {"no recomputation (autoRecomputation None)",
                           "no checkpoints (each stage recomputed from its input)"}
    assert (True, 0) in seen and (False, None) in seen and (True, None) in seen
