"""examples/bert_pipeline.py, shortened to two weight updates: BERT from a
config, pipelined over 4 IPUs as optimum-graphcore does (embeddings on IPU 0,
encoder layers on IPUs 1-3, the head on IPU 3), trains and evaluates."""

import importlib.util
import math
import os

import pytest

pytest.importorskip("transformers")
from repo_paths import REPO

ROOT = REPO


def test_bert_pipeline_example_runs_pipelined_over_four_ipus(capsys):
    spec = importlib.util.spec_from_file_location(
        "bert_pipeline", os.path.join(ROOT, "examples", "bert_pipeline.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.main(["--steps", "2", "--test-size", "32"])
    losses = result["losses"]
    assert len(losses) == 2 and all(abs(x - math.log(2)) < 0.15 for x in losses)
    assert 0.0 <= result["accuracy"] <= 100.0
    train_sched = result["training"].schedule
    assert train_sched.num_stages == 7  # 4 forward stages, 3 backward (+ the shared last)
    assert sorted(train_sched.per_ipu()) == [0, 1, 2, 3]
    assert sorted(result["inference"].schedule.per_ipu()) == [0, 1, 2, 3]
    out = capsys.readouterr().out
    assert "accuracy on 32 held-out sequences" in out and "Profile summary" in out
