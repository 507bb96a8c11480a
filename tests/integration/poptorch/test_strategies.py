"""Multi-IPU strategies: every annotation and strategy form trains to the
same numbers as plain PyTorch; the rules raise tilefx.Error with the numbers;
the schedule has the documented shape."""

import copy
import re

import pytest
import torch
from torch import nn

import tilefx
from tilefx.api.enums import AutoStage, Liveness
from models import BlockCNN, Transformer, WithLoss, mnist_batches


def _train_and_compare(model, opts, steps=2, G=8, mb=2):
    ref, ours = copy.deepcopy(model), copy.deepcopy(model)
    return _compare_training(
        ref, ours, opts, mnist_batches(steps, G * mb),
        torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9),
        tilefx.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9))


def _compare_training(ref, ours, opts, batches, torch_opt, tilefx_opt):
    """Train `ref` with torch (one big batch per step) and `ours` with tilefx;
    the weights must agree at the end."""
    trainer = tilefx.trainingModel(ours, opts, optimizer=tilefx_opt)
    for x, y in batches:
        torch_opt.zero_grad()
        ref(x, y)[1].backward()
        torch_opt.step()
        trainer(x, y)
    for (n, p), q in zip(ref.named_parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    return trainer


def _opts(strategy=None, G=8):
    o = tilefx.Options()
    if strategy is not None:
        o.setExecutionStrategy(strategy)
    o.Training.gradientAccumulation(G)
    return o


STAGES = [tilefx.Stage(f"B{i + 1}").ipu(i) for i in range(4)]

STRATEGY_CASES = {
    "pipelined_stage_objects": (lambda: BlockCNN(), lambda: tilefx.PipelinedExecution(
        *[tilefx.Stage(f"B{i + 1}").ipu(i) for i in range(4)]), 4),
    "pipelined_block_ids": (lambda: BlockCNN(), lambda: tilefx.PipelinedExecution("B1", "B2", "B3", "B4"), 4),
    "pipelined_two_stages": (lambda: BlockCNN(), lambda: tilefx.PipelinedExecution(
        tilefx.Stage("B1", "B2").ipu(0), tilefx.Stage("B3", "B4").ipu(1)), 2),
    "pipelined_auto_increment": (lambda: BlockCNN(), lambda: tilefx.PipelinedExecution(
        AutoStage.AutoIncrement), 4),
    "default_same_as_ipu": (lambda: BlockCNN(ipus=(0, 1, 2, 3)), lambda: None, 4),
    "sharded": (lambda: BlockCNN(), lambda: tilefx.ShardedExecution(
        *[tilefx.Stage(f"B{i + 1}").ipu(i) for i in range(4)]), 4),
    "parallel_phased": (lambda: BlockCNN(), lambda: _parallel_phased(), 4),
}


def _parallel_phased():
    s = tilefx.ParallelPhasedExecution(
        tilefx.Phase(tilefx.Stage("B1"), tilefx.Stage("B2")),
        tilefx.Phase(tilefx.Stage("B3"), tilefx.Stage("B4")))
    s.phase(0).ipus(0, 2)
    s.phase(1).ipus(1, 3)
    return s


def _serial_phased():
    s = tilefx.SerialPhasedExecution(
        tilefx.Phase(tilefx.Stage("B1"), tilefx.Stage("B2")),
        tilefx.Phase(tilefx.Stage("B3"), tilefx.Stage("B4")))
    s.phase(0).ipus(0, 1)
    s.phase(1).ipus(0, 1)
    return s.useSeparateBackwardPhase().setTensorsLiveness(Liveness.OffChipAfterEachPhase)


STRATEGY_CASES["serial_phased"] = (lambda: BlockCNN(), _serial_phased, 2)


@pytest.mark.parametrize("case", STRATEGY_CASES)
def test_strategy_trains_like_pytorch(case):
    torch.manual_seed(0)
    make_model, make_strategy, num_ipus = STRATEGY_CASES[case]
    trainer = _train_and_compare(make_model(), _opts(make_strategy()))
    ir = trainer.ir("graph")
    assert ir.count("ipu.stage {") >= num_ipus
    assert "ipu.copy" in ir
    ipus = {s.ipu for s in trainer.schedule.steps}
    assert ipus == set(range(num_ipus))


def test_pipeline_schedule_fill_main_flush():
    torch.manual_seed(0)
    x, y = mnist_batches(1, 20)[0]
    # two forward stages: 3 pipeline stages in training
    two = tilefx.trainingModel(BlockCNN(), _opts(tilefx.PipelinedExecution(
        tilefx.Stage("B1", "B2").ipu(0), tilefx.Stage("B3", "B4").ipu(1)), G=10))
    two.compile(x, y)
    s = two.schedule
    assert s.num_stages == 3
    assert s.phases() == {"fill": 2, "main": 8, "flush": 2, "total": 12}
    # stage k runs micro-batch i at step i + k; backward of stage 0 on the IPU of forward stage 0
    for st in s.steps:
        assert st.time == st.micro_batch + st.stage
    assert {st.ipu for st in s.steps if st.stage == 2} == {0}
    assert {st.direction for st in s.steps if st.stage == 1} == {"fwd+bwd"}


def test_four_stage_inference_pipeline_with_ten_micro_batches():
    torch.manual_seed(0)
    model = BlockCNN()
    opts = tilefx.Options().deviceIterations(10).setExecutionStrategy(
        tilefx.PipelinedExecution("B1", "B2", "B3", "B4"))

    class Infer(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x, torch.zeros(x.shape[0], dtype=torch.int64))[0]

    inf = tilefx.inferenceModel(Infer(model), opts)
    x = torch.randn(20, 1, 28, 28)
    out = inf(x)
    torch.testing.assert_close(out, model(x, torch.zeros(20, dtype=torch.int64))[0], rtol=1e-5, atol=1e-5)
    assert inf.schedule.phases() == {"fill": 3, "main": 7, "flush": 3, "total": 13}
    assert inf.schedule.utilisation() == {i: 10 / 13 for i in range(4)}


def test_sharded_schedule_runs_one_ipu_at_a_time():
    torch.manual_seed(0)
    t = tilefx.trainingModel(BlockCNN(), _opts(tilefx.ShardedExecution("B1", "B2", "B3", "B4"), G=2))
    t.compile(*mnist_batches(1, 4)[0])
    times = [st.time for st in t.schedule.steps]
    assert len(times) == len(set(times)) == 2 * 7


def test_phased_schedule_has_loads_and_stores():
    torch.manual_seed(0)
    t = tilefx.trainingModel(BlockCNN(), _opts(_serial_phased(), G=2))
    t.compile(*mnist_batches(1, 4)[0])
    kinds = {st.kind for st in t.schedule.steps}
    assert kinds == {"load", "compute", "store"}


def test_gradient_accumulation_below_2p_minus_1_is_an_error():
    with pytest.raises(tilefx.Error, match=r"4 forward stages has 7 pipeline stages.*gradientAccumulation >= 7, got 4"):
        tilefx.trainingModel(BlockCNN(), _opts(tilefx.PipelinedExecution("B1", "B2", "B3", "B4"), G=4))(
            *mnist_batches(1, 8)[0])


def test_inference_needs_device_iterations_at_least_stages():
    opts = tilefx.Options().deviceIterations(2).setExecutionStrategy(
        tilefx.PipelinedExecution("B1", "B2", "B3", "B4"))
    model = tilefx.inferenceModel(BlockCNN(), opts)
    with pytest.raises(tilefx.Error, match=r"deviceIterations >= 4, got 2"):
        model(torch.randn(4, 1, 28, 28), torch.zeros(4, dtype=torch.int64))


def test_reservable_ipu_counts_are_powers_of_two_or_multiples_of_64():
    """PopTorch reserves "a power of 2 or a multiple of 64 IPUs": 192 IPUs
    (three POD64s) need no rounding, 100 round up to 128."""
    from tilefx.passes.assign_stages import ipu_count_error, reservable_ipus

    assert [reservable_ipus(n) for n in (1, 2, 3, 5, 64, 65, 100, 128, 192, 200)] == \
        [1, 2, 4, 8, 64, 128, 128, 128, 192, 256]
    assert ipu_count_error(192) is None and ipu_count_error(16) is None
    assert "minimum of 256" in ipu_count_error(200)


def test_ipu_count_must_be_a_power_of_two_unless_auto_rounded():
    strategy = lambda: tilefx.PipelinedExecution("B1", "B2", tilefx.Stage("B3", "B4").ipu(2))  # noqa: E731
    with pytest.raises(tilefx.Error, match=r".+The model specifies the use of 3 IPUs, however PopTorch must "
                                           r"reserve a minimum of 4 .*autoRoundNumIPUs\(True\)\.$"):
        tilefx.trainingModel(BlockCNN(), _opts(strategy()))(*mnist_batches(1, 16)[0])
    opts = _opts(strategy()).autoRoundNumIPUs(True)
    _train_and_compare(BlockCNN(), opts, steps=1)


def test_ipu_count_rule_only_binds_reserved_devices():
    """An offline target and the IPU Model reserve no IPUs: 3 IPUs compile
    (the offline target) and run (the IPU Model) without autoRoundNumIPUs."""
    strategy = lambda: tilefx.PipelinedExecution("B1", "B2", tilefx.Stage("B3", "B4").ipu(2))  # noqa: E731
    x, y = mnist_batches(1, 16)[0]
    offline = tilefx.trainingModel(BlockCNN(), _opts(strategy()).useOfflineIpuTarget())
    offline.compile(x, y)
    model = BlockCNN()
    ref = copy.deepcopy(model)
    ipu_model = tilefx.inferenceModel(model, _opts(strategy(), G=1).deviceIterations(4).useIpuModel(True))
    torch.testing.assert_close(ipu_model(x, y)[0], ref(x, y)[0])


def test_stage_ids_must_not_decrease_along_the_data_flow():
    with pytest.raises(tilefx.Error, match="must not decrease"):
        tilefx.trainingModel(BlockCNN(ipus=(1, 0, 2, 3)), _opts())(*mnist_batches(1, 16)[0])


def test_parallel_phased_even_phases_on_even_ipus():
    s = tilefx.ParallelPhasedExecution(tilefx.Phase(tilefx.Stage("B1", "B2")),
                                       tilefx.Phase(tilefx.Stage("B3", "B4")))
    s.phase(0).ipus(1)
    s.phase(1).ipus(0)
    with pytest.raises(tilefx.Error, match="phase 0 is even and must run on even IPUs"):
        tilefx.trainingModel(BlockCNN(), _opts(s))(*mnist_batches(1, 16)[0])


def test_same_as_ipu_needs_an_ipu_id():
    with pytest.raises(tilefx.Error, match="has no ipu_id"):
        tilefx.trainingModel(BlockCNN(), _opts())(*mnist_batches(1, 16)[0])


class ReturnsToIpu0(nn.Module):
    """The guide's AutoStage example (PopTorch user guide, 4.4.1 "Annotations"): three blocks without a
    user_id on IPUs 0, 1 and 0, made by BeginBlock or by `with Block(...)`."""

    def __init__(self, how="begin"):
        super().__init__()
        self.how = how
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        if how == "begin":
            self.a = tilefx.BeginBlock(self.a, ipu_id=0)
            self.b = tilefx.BeginBlock(self.b, ipu_id=1)
            self.c = tilefx.BeginBlock(self.c, ipu_id=0)

    def forward(self, x, y=None):
        if self.how == "begin":
            x = self.c(torch.relu(self.b(torch.relu(self.a(x)))))
        else:
            with tilefx.Block(ipu_id=0):
                x = torch.relu(self.a(x))
            with tilefx.Block(ipu_id=1):
                x = torch.relu(self.b(x))
            with tilefx.Block(ipu_id=0):
                x = self.c(x)
                if y is not None:  # the loss too: under AutoIncrement no op may follow the blocks
                    return x, nn.functional.mse_loss(x, y)
        return x if y is None else (x, nn.functional.mse_loss(x, y))


@pytest.mark.parametrize("how", ["begin", "block"])
def test_auto_increment_gives_blocks_without_ids_their_own_stages(how):
    """Id-less blocks get PopTorch's automatic ids "0", "1", "2" (not one block
    per IPU), so under AutoIncrement the third block is stage 2 on IPU 0 and
    the model computes torch's numbers, whatever Block.useAutoId() did before."""
    tilefx.Block.useAutoId()  # outside a trace: no state left behind
    torch.manual_seed(0)
    model, x = ReturnsToIpu0(how), torch.randn(8, 4)
    opts = tilefx.Options().deviceIterations(4).setExecutionStrategy(
        tilefx.PipelinedExecution(AutoStage.AutoIncrement))
    inference = tilefx.inferenceModel(model, opts)
    torch.testing.assert_close(inference(x), model(x), rtol=1e-5, atol=1e-6)
    ir = inference.ir("graph")
    for block, ipu, stage in (("0", 0, 0), ("1", 1, 1), ("2", 0, 2)):
        assert f'block = "{block}", ipu = {ipu}, stage = {stage}' in ir
    assert inference.schedule.num_stages == 3

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, 4, generator=g), torch.randn(16, 4, generator=g)) for _ in range(2)]
    ref, ours = ReturnsToIpu0(how), ReturnsToIpu0(how)
    ours.load_state_dict(ref.state_dict())
    _compare_training(ref, ours, _opts(tilefx.PipelinedExecution(AutoStage.AutoIncrement), G=8), batches,
                      torch.optim.SGD(ref.parameters(), lr=0.05), tilefx.optim.SGD(ours.parameters(), lr=0.05))


@pytest.mark.parametrize("how", ["begin", "block"])
def test_same_as_ipu_returning_to_an_ipu_is_an_error(how):
    """AutoStage.SameAsIpu (the default): the third block is stage 0 again,
    which the data flow from stage 1 forbids (PopTorch user guide, 4.4.1 "Annotations")."""
    opts = tilefx.Options().deviceIterations(4)
    with pytest.raises(tilefx.Error, match=r"must not decrease.*block '2' \(stage 0\).*block '1' \(stage 1\)"):
        tilefx.inferenceModel(ReturnsToIpu0(how), opts)(torch.randn(8, 4))


@pytest.mark.parametrize("make", [
    lambda: tilefx.PipelinedExecution(tilefx.Stage("A"), tilefx.Stage("A", "B")),
    lambda: tilefx.ShardedExecution(tilefx.Stage("A", "A")),
    lambda: tilefx.SerialPhasedExecution(tilefx.Phase(tilefx.Stage("A")), tilefx.Phase(tilefx.Stage("B", "A"))),
    lambda: tilefx.ParallelPhasedExecution(tilefx.Phase(tilefx.Stage("A"), tilefx.Stage("A"))),
], ids=["pipelined", "one_stage_twice", "serial_phased", "parallel_phased"])
def test_a_block_in_two_stages_is_an_error(make):
    """PopTorch: a block "associated with more than one stage" is an error,
    not a silent choice of one of them."""
    with pytest.raises(tilefx.Error, match="block 'A' is associated with more than one stage"):
        make()


def test_an_op_after_the_blocks_under_auto_increment_is_no_active_block():
    """AutoIncrement gives each block the next stage: an op computing on the
    last block's result outside every Block has none (PopTorch's "No active
    Block"). SameAsIpu places it with the block whose value it uses."""
    class Tail(nn.Module):
        def forward(self, x):
            with tilefx.Block(ipu_id=0):
                x = x * 4
            return x * 4

    x = torch.randn(2, 5)
    opts = tilefx.Options().deviceIterations(2)
    torch.testing.assert_close(tilefx.inferenceModel(Tail(), opts)(x), x * 16)
    opts = tilefx.Options().deviceIterations(2).setExecutionStrategy(
        tilefx.PipelinedExecution(AutoStage.AutoIncrement))
    with pytest.raises(tilefx.Error, match=r"No active Block: aten.mul.Tensor uses a value of block .0. after the last block ended"):
        tilefx.inferenceModel(Tail(), opts).compile(x)


def test_unknown_block_in_a_stage_is_an_error():
    with pytest.raises(tilefx.Error, match="names block 'B9'"):
        tilefx.trainingModel(BlockCNN(), _opts(tilefx.PipelinedExecution("B1", "B2", "B3", "B9")))(
            *mnist_batches(1, 16)[0])


def test_op_outside_every_block_is_an_error():
    class Leaky(BlockCNN):
        def forward(self, x, labels):
            with tilefx.Block("B1", ipu_id=0):
                x = self.layer1(x)
            x = self.layer2(x)  # a layer outside every block
            with tilefx.Block("B2", ipu_id=1):
                x = self.layer4(torch.relu(self.layer3(x.view(-1, 128))))
                return x, self.loss(x, labels)

    with pytest.raises(tilefx.Error, match="outside every block"):
        tilefx.trainingModel(Leaky(), _opts(G=4))(*mnist_batches(1, 8)[0])


def test_begin_block_rules_and_remove_blocks():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    tilefx.BeginBlock(m[0], "A", ipu_id=0)
    with pytest.raises(tilefx.Error, match="module has already been assigned to a block"):
        tilefx.BeginBlock(m[0], "A2", ipu_id=0)
    # declared in the wrong order: the later layer's BeginBlock first
    w = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tilefx.BeginBlock(w[1], "second", ipu_id=1)
    tilefx.BeginBlock(w[0], "first", ipu_id=0)
    opts = tilefx.Options().deviceIterations(2)
    with pytest.raises(tilefx.Error, match="different order"):
        tilefx.inferenceModel(w, opts)(torch.randn(4, 4))
    tilefx.removeBlocks(w)
    out = tilefx.inferenceModel(w, tilefx.Options().deviceIterations(2))(torch.randn(4, 4))
    assert out.shape == (4, 4)
    assert "block" not in tilefx.compile(w, torch.randn(2, 4)).ir("graph")


def test_block_function_and_auto_ids():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        @tilefx.BlockFunction("first", ipu_id=0)
        def first(self, x):
            return self.a(x)

        def forward(self, x):
            x = self.first(x)
            tilefx.Block.start("second", ipu_id=1)
            return self.b(x)

    torch.manual_seed(0)
    m = M()
    inf = tilefx.inferenceModel(m, tilefx.Options().deviceIterations(2))
    x = torch.randn(4, 4)
    torch.testing.assert_close(inf(x), m(x), rtol=1e-5, atol=1e-6)
    ir = inf.ir("graph")
    assert 'block = "first", ipu = 0' in ir and 'block = "second", ipu = 1' in ir


def test_transformer_with_begin_block_pipelined_over_four_ipus():
    torch.manual_seed(0)
    model = WithLoss(Transformer(layers=4), nn.CrossEntropyLoss())
    for i, layer in enumerate(model.model.layers):
        if i:
            tilefx.BeginBlock(layer, f"layer{i}", ipu_id=i)
    trainer = _train_and_compare_tokens(model, _opts(G=8))
    assert trainer.schedule.num_stages == 7


def _train_and_compare_tokens(model, opts, steps=2, mb=2):
    ref = copy.deepcopy(model)
    tilefx.removeBlocks(ref)
    G = opts.Training.gradient_accumulation
    g = torch.Generator().manual_seed(5)
    batches = [(torch.randint(0, 20, (G * mb, 6), generator=g), torch.randint(0, 20, (G * mb, 6), generator=g))
               for _ in range(steps)]
    return _compare_training(ref, model, opts, batches,
                             torch.optim.AdamW(ref.parameters(), lr=1e-2, eps=1e-3),
                             tilefx.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-3))


def test_strategy_from_a_config_file(tmp_path):
    f = tmp_path / "opts.conf"
    f.write_text('setExecutionStrategy(poptorch.PipelinedExecution("B1", "B2", "B3", "B4"))\n'
                 "Training.gradientAccumulation(8)\n")
    opts = tilefx.Options()
    opts.loadFromFile(str(f))
    assert isinstance(opts.execution_strategy, tilefx.PipelinedExecution)
    _train_and_compare(BlockCNN(), opts, steps=1)


def test_pipelined_with_replicas_device_iterations_and_output_mode_all():
    torch.manual_seed(0)
    model = BlockCNN()
    ref, ours = copy.deepcopy(model), copy.deepcopy(model)
    D, R, G, mb = 2, 2, 8, 1
    opts = tilefx.Options().deviceIterations(D).replicationFactor(R).outputMode(tilefx.OutputMode.All)
    opts.setExecutionStrategy(tilefx.PipelinedExecution("B1", "B2", "B3", "B4"))
    opts.Training.gradientAccumulation(G)
    trainer = tilefx.trainingModel(ours, opts, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.05))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    x, y = mnist_batches(1, D * R * G * mb)[0]
    out, loss = trainer(x, y)
    assert out.shape == (D * G * R * mb, 10) and loss.shape == (D * G * R,)
    xs, ys = x.reshape(D, G * R * mb, 1, 28, 28), y.reshape(D, G * R * mb)
    expected_out = []
    for d in range(D):
        opt.zero_grad()
        o, l = ref(xs[d], ys[d])
        expected_out.append(o.detach())
        l.backward()
        opt.step()
    torch.testing.assert_close(out, torch.cat(expected_out), rtol=1e-4, atol=1e-5)
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


def test_input_replica_grouping_shares_inputs_within_a_group():
    torch.manual_seed(0)
    model = BlockCNN(ipus=(0, 0, 1, 1))
    ref, ours = copy.deepcopy(model), copy.deepcopy(model)
    R, G, mb = 4, 4, 2
    opts = tilefx.Options().replicationFactor(R).inputReplicaGrouping(2, tilefx.CommGroupType.Consecutive)
    opts.Training.gradientAccumulation(G)
    trainer = tilefx.trainingModel(ours, opts, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.05))
    # N = D x (R / group size) x G = 1 x 2 x 4 micro-batches of 2
    x, y = mnist_batches(1, 2 * G * mb)[0]
    trainer(x, y)
    # replicas 0,1 and 2,3 see the same data: the mean over replicas is the mean over the 2 slices
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    ref(x, y)[1].backward()
    opt.step()
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


class _FStringPhases(nn.Module):
    """The guide's ParallelPhasedExecution example with f-string block names
    (PopTorch user guide, 4.4.1 "Annotations", Listing 4.11): two matmuls share phase 1, 3 and 5, so the two
    stages of those phases feed each other (phase1_ipu1 -> phase1_ipu0 and back)."""

    N, size = 3, 10

    def __init__(self):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.rand(self.size, self.size) * 0.3)
                                         for _ in range(self.N * 6)])

    def forward(self, in0, target=None):
        phase = 0
        weight = iter(self.weights)
        with tilefx.Block("phase0_ipu0"):
            ins = torch.split(in0, self.size)
        for n in range(self.N * 3):
            out = []
            for ipu in range(2):
                x = ins[ipu]
                with tilefx.Block(f"phase{phase}_ipu{ipu}"):
                    x = torch.matmul(next(weight), x)
                    out.append(torch.relu(x))
            ins = out[1], out[0]
            if n % 3 != 1:  # 2 matmuls in the same phase
                phase += 1
        with tilefx.Block(f"phase{self.N * 2 - 1}_ipu1"):
            res = ins[0] + ins[1]
        if target is None:
            return res
        return res, nn.L1Loss(reduction="mean")(res, target)


def test_guides_f_string_parallel_phased_example_trains_like_torch():
    """Stages of one phase exchanging values both ways were refused ("stage ids
    must not decrease along the data flow"); phased execution only needs phases
    not to decrease. Training equals torch's SGD step."""
    N = _FStringPhases.N
    torch.manual_seed(0)
    model = _FStringPhases()
    reference = copy.deepcopy(model)
    x, target = torch.rand(20, 1), torch.rand(10, 1)
    opts = tilefx.Options()
    phases = []
    for n in range(N):
        phases.append([tilefx.Stage(f"phase{2 * n}_ipu0").ipu(0), tilefx.Stage(f"phase{2 * n}_ipu1").ipu(2)])
        phases.append([tilefx.Stage(f"phase{2 * n + 1}_ipu0").ipu(1),
                       tilefx.Stage(f"phase{2 * n + 1}_ipu1").ipu(3)])
    opts.setExecutionStrategy(tilefx.ParallelPhasedExecution(*phases))
    training = tilefx.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.01))
    training.compile(x, target)
    _two_sgd_steps_like_torch(training, model, reference, x, target)
    assert training.profile.num_ipus == 4


def _two_sgd_steps_like_torch(training, model, reference, x, target):
    """Two steps of `training` (SGD, lr 0.01) and of eager `reference`: the
    outputs and losses of each step and the weights after them equal."""
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.01)
    for _ in range(2):
        out, loss = training(x, target)
        optimizer.zero_grad()
        want_out, want_loss = reference(x, target)
        want_loss.backward()
        optimizer.step()
        torch.testing.assert_close(loss, want_loss.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out, want_out.detach(), rtol=1e-5, atol=1e-6)
    training.copyWeightsToHost()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


class _InlinePhases(nn.Module):
    """PopTorch's inline 2x2 parallel phased model: the block of a phase is
    entered on two IPUs (`Block(f"{phase}", ipu_id=ipu)`, IPUs 0 and 2 in
    even phases, 1 and 3 in odd ones), and the strategy names the blocks only."""

    N, size = 3, 10

    def __init__(self):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.rand(self.size, self.size) * 0.3)
                                         for _ in range(self.N * 6)])

    def forward(self, in0, target=None):
        phase = 0
        with tilefx.Block("0", ipu_id=0):
            ins = torch.split(in0, self.size)
        weight = iter(self.weights)
        for n in range(self.N * 3):
            out = []
            for ipu in range(2):
                x = ins[ipu]
                with tilefx.Block(f"{phase}", ipu_id=(phase % 2) + ipu * 2):
                    x = torch.matmul(next(weight), x)
                    out.append(torch.relu(x))
            ins = out[1], out[0]
            if n % 3 != 1:  # 2 matmuls in the same phase
                phase += 1
        with tilefx.Block(f"{self.N * 2 - 1}", ipu_id=3):
            res = ins[0] + ins[1]
            if target is None:
                return res
            return res, nn.L1Loss(reduction="mean")(res, target)


def test_one_block_on_two_ipus_of_a_phase_keeps_each_op_on_its_ipu():
    """PopTorch's phased tests enter one block id with two ipu_ids and give
    ParallelPhasedExecution the block ids alone: each op keeps its IPU (its
    matmuls run on IPUs 0 and 2 in phase 0, 1 and 3 in phase 1). That was a
    placement error; it trains as torch's SGD does, and the stages follow the
    annotations. A Stage with an IPU of its own still moves all its ops there,
    and an annotation on an IPU of the wrong parity stays an error."""
    torch.manual_seed(0)
    model = _InlinePhases()
    reference = copy.deepcopy(model)
    x, target = torch.rand(20, 1), torch.rand(10, 1)
    opts = tilefx.Options().setExecutionStrategy(
        tilefx.ParallelPhasedExecution(*[f"{n}" for n in range(2 * _InlinePhases.N)]))
    training = tilefx.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.01))
    _two_sgd_steps_like_torch(training, model, reference, x, target)
    assert training.profile.num_ipus == 4
    fwd = {(int(ph), int(ipu)) for ipu, ph in re.findall(
        r'ipu\.stage \{stage = \d+ : i64, ipu = (\d+) : i64, phase = (\d+) : i64, direction = "fwd"',
        training.ir("graph"))}
    assert {ph % 2 == ipu % 2 for ph, ipu in fwd} == {True}
    assert {ipu for ph, ipu in fwd if ph == 0} == {0, 2} and {ipu for ph, ipu in fwd if ph == 1} == {1, 3}

    class Misplaced(_InlinePhases):
        def forward(self, in0, target=None):
            with tilefx.Block("0", ipu_id=0):
                a = in0 + 1
            with tilefx.Block("0", ipu_id=1):
                return a * 2

    with pytest.raises(tilefx.Error, match="phase 0 is even and must run on even IPUs, but a stage is on IPU 1"):
        tilefx.inferenceModel(Misplaced(), tilefx.Options().setExecutionStrategy(
            tilefx.ParallelPhasedExecution("0")))(torch.randn(2, 3))
    serial = tilefx.inferenceModel(Misplaced(), tilefx.Options().setExecutionStrategy(
        tilefx.SerialPhasedExecution(tilefx.Phase(tilefx.Stage("0").ipu(0)))))
    x = torch.randn(2, 3)
    torch.testing.assert_close(serial(x), (x + 1) * 2)
    assert serial.profile.num_ipus == 1


def test_a_value_from_a_later_phase_is_still_an_error():
    class Backwards(nn.Module):
        def forward(self, x):
            with tilefx.Block("A"):
                a = x + 1
            with tilefx.Block("B"):
                b = a * 2
            with tilefx.Block("C"):
                c = b - a
            return c

    opts = tilefx.Options().setExecutionStrategy(tilefx.SerialPhasedExecution(
        tilefx.Phase(tilefx.Stage("A").ipu(0)), tilefx.Phase(tilefx.Stage("C").ipu(0)),
        tilefx.Phase(tilefx.Stage("B").ipu(0))))
    with pytest.raises(tilefx.Error, match="phase ids must not decrease"):
        tilefx.inferenceModel(Backwards(), opts)(torch.randn(2, 3))


def test_strategy_stage_finds_the_stage_of_a_block():
    """PopTorch's `strategy.stage(block_id)`: the Stage holding the block, on
    phased strategies as on pipelined ones."""
    serial = tilefx.SerialPhasedExecution("B1", "B2", "B3")
    for b in ("B1", "B2", "B3"):
        serial.stage(b).ipu(0)
    assert [st._ipu for p in serial.phases for st in p.stages] == [0, 0, 0]
    pipe = tilefx.PipelinedExecution(tilefx.Stage("A", "B"), tilefx.Stage("C"))
    assert pipe.stage("B") is pipe.stages[0] and pipe.stage("C") is pipe.stages[1]
    with pytest.raises(tilefx.Error, match="no stage holds block 'Z'"):
        serial.stage("Z")

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(8, 7), nn.Linear(7, 6), nn.Linear(6, 5)

        def forward(self, x):
            with tilefx.Block("B1"):
                x = self.fc1(x)
            with tilefx.Block("B2"):
                x = self.fc2(x)
            with tilefx.Block("B3"):
                return self.fc3(x)

    model, x = Model(), torch.randn(8)
    out = tilefx.inferenceModel(model, tilefx.Options().setExecutionStrategy(serial))(x)
    torch.testing.assert_close(out, model(x))
