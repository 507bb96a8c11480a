"""The first compile in a fresh process loads no part of torch.compile
(torch._dynamo / torch._inductor cost ~2 s to import) and not
torch.distributed.tensor (~0.3 s), and a user who does use torch.compile or
DTensor in the same process, before or after, gets torch's own behaviour.
Each case runs in a process of its own: the property is about what a fresh
process imports. Assertions are on the module set, not on time.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap

import pytest

from repo_paths import REPO

ROOT = REPO


TIMEOUT = 600  # seconds for one case: generous on a loaded 2-core machine


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _result(returncode: int, stdout: str, stderr: str) -> dict:
    assert returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def _run(code: str) -> dict:
    """`code` run as `python -c code` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=_env(), cwd=ROOT, timeout=TIMEOUT)
    return _result(out.returncode, out.stdout, out.stderr)


# A process that has run `import torch` and nothing else. Each case whose code
# begins with `import torch` runs in a child forked from it: the child's modules
# are a fresh interpreter's after that line, and it runs the rest as `python -c`
# runs a program (in `__main__`'s namespace, exit handlers at the end), without
# paying torch's import (~2 s of CPU) again.
_FORK_SERVER = r"""
import atexit, json, os, sys, traceback
import torch

for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        sys.argv = ["-c"]
        code = 0
        try:
            exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


@pytest.fixture(scope="module")
def after_torch(tmp_path_factory):
    """run(code) for code that begins with `import torch`, forked from a
    process that has imported torch (above)."""
    server = subprocess.Popen([sys.executable, "-c", _FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=_env(), cwd=ROOT)
    work = tmp_path_factory.mktemp("forked")

    def run(code: str) -> dict:
        out, err = work / "stdout", work / "stderr"
        server.stdin.write(json.dumps({"code": textwrap.dedent(code), "stdout": str(out), "stderr": str(err)}) + "\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], TIMEOUT)
        assert ready, f"the case did not finish within {TIMEOUT} s"
        return _result(int(server.stdout.readline()), out.read_text(), err.read_text())

    yield run
    server.stdin.close()
    assert server.wait(timeout=60) == 0


_MODEL = """
    import json, sys
    import torch
    from torch import nn
    import tilefx

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3)
            self.bn = nn.BatchNorm2d(2)  # running statistics: buffers written in forward
            self.fc = nn.Linear(2 * 4 * 4, 3)
            self.loss = nn.CrossEntropyLoss()

        def forward(self, x, y):
            h = torch.relu(self.bn(self.conv(x)))
            out = self.fc(h.flatten(1))
            return out, self.loss(out, y)

    def compiler_modules():
        return sorted(m for m in sys.modules if m == "torch._dynamo" or m == "torch._inductor")

    def dtensor_loaded():
        return "torch.distributed.tensor" in sys.modules
"""


def test_first_compile_loads_no_compiler_and_trains_like_torch(after_torch):
    r = after_torch(_MODEL + """
    torch.manual_seed(0)
    model = Net()
    import copy
    ref = copy.deepcopy(model)
    x, y = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    t = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    out, loss = t(x, y)
    tilefx.inferenceModel(Net().eval())(x, y)
    compiler = compiler_modules()  # before the reference: torch.optim itself imports dynamo
    dtensor = dtensor_loaded()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref_out, ref_loss = ref(x, y)
    ref_opt.zero_grad(); ref_loss.backward(); ref_opt.step()
    t.copyWeightsToHost()
    weight_close = torch.allclose(model.fc.weight, ref.fc.weight, atol=1e-6)
    stats_close = torch.allclose(model.bn.running_mean, ref.bn.running_mean, atol=1e-6)
    print(json.dumps({"compiler": compiler, "dtensor": dtensor, "loss": float(loss), "ref": float(ref_loss),
                      "weights": weight_close, "stats": stats_close}))
    """)
    assert r["compiler"] == [] and not r["dtensor"]
    assert abs(r["loss"] - r["ref"]) < 1e-5
    assert r["weights"] and r["stats"]


def test_torch_compile_after_a_tilefx_compile_is_torch_s_own(after_torch):
    r = after_torch(_MODEL + """
    x, y = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    tilefx.inferenceModel(Net().eval())(x, y)
    tilefx.inferenceModel(Net().eval())(x, y)  # the second session reuses the flag tables
    before = sorted(m for m in sys.modules if m.startswith(("torch._dynamo", "torch._inductor")))
    # no function is left with the stand-in's cached `disable` (itself)
    from torch.fx.experimental.proxy_tensor import dispatch_trace
    leftover = getattr(dispatch_trace.__wrapped__, "__dynamo_disable", None) is not None
    import torch._dynamo, torch._inductor.config
    f = torch.compile(lambda a: torch.sin(a) * 2 + a.sum(), backend="eager", fullgraph=True)
    a = torch.randn(5)
    same = torch.allclose(f(a), torch.sin(a) * 2 + a.sum())
    # the wrapped functions now cache dynamo's real disable, as in a process without tilefx
    torch.fx.experimental.proxy_tensor.make_fx(lambda a: a + 1)(a)
    real = getattr(dispatch_trace.__wrapped__, "__dynamo_disable", None)
    # the real flag tables know their `# compile_ignored` flags (the sessions' copies
    # skip reading them) and torch's reader is its own again
    import torch.utils._config_module as cm
    ignored = {"dynamo": "verbose" in torch._dynamo.config._compile_ignored_keys,
               "reader": cm.get_assignments_with_compile_ignored_comments.__module__ == cm.__name__}
    print(json.dumps({"before": before, "leftover": leftover, "same": same,
                      "real_disable": real is not None and real is not dispatch_trace.__wrapped__,
                      "inductor_config": hasattr(torch._inductor, "config"), "ignored": ignored}))
    """)
    assert r["before"] == []
    assert not r["leftover"]
    assert r["same"] and r["real_disable"] and r["inductor_config"]
    assert r["ignored"] == {"dynamo": True, "reader": True}


def test_torch_compile_before_a_tilefx_compile_still_works(after_torch):
    r = after_torch(_MODEL + """
    f = torch.compile(lambda a: torch.cos(a) + 1, backend="eager")
    a = torch.randn(4)
    first = torch.allclose(f(a), torch.cos(a) + 1)
    x, y = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    out, _ = tilefx.inferenceModel(Net().eval())(x, y)
    again = torch.allclose(f(a + 1), torch.cos(a + 1) + 1)
    print(json.dumps({"first": first, "again": again, "dynamo": "torch._dynamo" in sys.modules,
                      "shape": list(out.shape)}))
    """)
    assert r["first"] and r["again"] and r["dynamo"] and r["shape"] == [2, 3]


def test_a_model_that_asks_dynamo_during_the_trace_gets_the_real_module(after_torch):
    r = after_torch(_MODEL + """
    class Asks(nn.Module):
        def forward(self, x):
            import torch._dynamo
            # a library asking the compiler something while tilefx traces
            return x * 2 if torch._dynamo.is_compiling() is not None else x
    out = tilefx.inferenceModel(Asks())(torch.ones(2, 3))
    print(json.dumps({"out": out.tolist(), "dynamo": "torch._dynamo" in sys.modules}))
    """)
    assert r["out"] == [[2.0] * 3] * 2 and r["dynamo"]


def test_a_tensor_constant_in_forward_traces_right(after_torch):
    # torch's fake tensors name a real tensor met in a forward through
    # torch._dynamo.source: the stand-in steps aside and the real one loads
    r = after_torch(_MODEL + """
    SCALE = torch.tensor([1.0, 2.0, 3.0])

    class Const(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x) * torch.tensor([2.0, 3.0, 4.0]) + SCALE

    torch.manual_seed(0)
    m = Const()
    x = torch.randn(2, 3)
    out = tilefx.inferenceModel(m)(x)
    f = torch.compile(lambda a: a * 3, backend="eager")
    print(json.dumps({"close": torch.allclose(out, m(x), atol=1e-6),
                      "compiled": torch.allclose(f(x), x * 3)}))
    """)
    assert r["close"] and r["compiled"]


def test_tilefx_opt_verifies_aten_ops_without_the_compiler():
    r = _run("""
    import json, sys
    from tilefx.tools.opt import main
    import tempfile, os
    src = '''
    func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> tensor<2x3xf32> {
      %0 = aten.add.Tensor %x, %y {alpha = 1 : i64} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
      %1 = aten.mul.Tensor %0, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
      func.return %1 : tensor<2x3xf32>
    }
    '''
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(src)
    sys.argv = ["tilefx-opt", f.name]
    code = main([f.name])
    os.unlink(f.name)
    print(json.dumps({"code": code, "torch": "torch" in sys.modules,
                      "compiler": sorted(m for m in sys.modules if m in ("torch._dynamo", "torch._inductor"))}))
    """)
    assert r["code"] == 0 and r["torch"] and r["compiler"] == []


def test_dtensor_after_a_tilefx_compile_takes_torch_s_own_route(after_torch):
    # the compile answers torch's C++ DTensor lookup without importing DTensor;
    # a DTensor made afterwards still dispatches through the C++ fast path
    # (its sharding cache is hit) and computes what it should
    r = after_torch(_MODEL + """
    x, y = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    tilefx.inferenceModel(Net().eval())(x, y)
    from tilefx.lowering import dtensor_lookup
    primed, loaded = dtensor_lookup._primed, dtensor_loaded()
    import torch.distributed as dist
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
    from torch.distributed.device_mesh import DeviceMesh
    t = torch.arange(12.0).reshape(3, 4)
    dt = distribute_tensor(t, DeviceMesh("cpu", [0]), [Shard(0)])
    before = torch._C._get_DTensor_sharding_propagator_cache_stats()
    for _ in range(5):
        out = (dt * 2 + 1).sum(0)
    after = torch._C._get_DTensor_sharding_propagator_cache_stats()

    print(json.dumps({"primed": primed, "loaded": loaded, "dtensor": isinstance(out, DTensor),
                      "value": out.full_tensor().tolist(), "want": (t * 2 + 1).sum(0).tolist(),
                      "hits": after[0] - before[0]}))
    dist.destroy_process_group()
    """)
    assert r["primed"] and not r["loaded"]
    assert r["dtensor"] and r["value"] == r["want"]
    assert r["hits"] > 0


def test_a_model_that_imports_dtensor_while_traced_gets_the_real_module(after_torch):
    r = after_torch(_MODEL + """
    class Asks(nn.Module):
        def forward(self, x):
            from torch.distributed.tensor import DTensor
            import torch.distributed.tensor._api as api
            return x * 2 if DTensor is api.DTensor and not isinstance(x, DTensor) else x
    out = tilefx.inferenceModel(Asks())(torch.ones(2, 3))
    import torch.distributed.tensor
    print(json.dumps({"out": out.tolist(), "real": hasattr(torch.distributed.tensor, "distribute_tensor")}))
    """)
    assert r["out"] == [[2.0] * 3] * 2 and r["real"]


def test_dtensor_loaded_before_the_compile_is_left_alone(after_torch):
    r = after_torch(_MODEL + """
    import torch.distributed.tensor
    from torch.distributed.tensor import DTensor
    x, y = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    out, _ = tilefx.inferenceModel(Net().eval())(x, y)
    from tilefx.lowering import dtensor_lookup
    print(json.dumps({"primed": dtensor_lookup._primed, "same": torch.distributed.tensor.DTensor is DTensor,
                      "shape": list(out.shape)}))
    """)
    assert not r["primed"] and r["same"] and r["shape"] == [2, 3]


def test_the_compile_pauses_the_garbage_collector_and_restores_it(after_torch):
    # gcpause.py: the collector is off while the model is traced, and as the
    # caller left it afterwards (on, or off if the caller turned it off)
    r = after_torch(_MODEL + """
    import gc
    seen = []

    class Probe(Net):
        def forward(self, x, y):
            seen.append(gc.isenabled())
            return super().forward(x, y)

    x, y = torch.randn(2, 1, 6, 6), torch.tensor([0, 2])
    tilefx.inferenceModel(Probe().eval()).compile(x, y)
    on_after = gc.isenabled()
    gc.disable()
    tilefx.inferenceModel(Probe().eval()).compile(x, y)
    off_after = gc.isenabled()
    gc.enable()
    print(json.dumps({"during": seen, "on_after": on_after, "off_after": off_after}))
    """)
    assert r["during"] and not any(r["during"])
    assert r["on_after"] and not r["off_after"]


def test_torch_imported_after_tilefx_gets_poptorch_s_additions():
    # the IR tools import tilefx without torch; a program that imports tilefx
    # first still finds `model.autocast()` once it imports torch, as PopTorch's
    # users do, and torch's own loader still answers for torch's source
    r = _run("""
    import inspect, json, sys
    import tilefx
    before = "torch" in sys.modules
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(4, 4)).autocast()
    x = torch.randn(2, 4)
    out = tilefx.inferenceModel(model)(x)
    print(json.dumps({"torch_before": before, "autocast": hasattr(nn.Module, "autocast"),
                      "source": len(inspect.getsource(torch)) > 0,
                      "dynamo": "torch._dynamo" in sys.modules,
                      "shape": list(out.shape)}))
    """)
    assert r == {"torch_before": False, "autocast": True, "source": True, "dynamo": False, "shape": [2, 4]}


def test_ipu_op_classes_are_built_as_a_compile_uses_them(after_torch):
    """The ipu dialect's op classes become IRDL ops when first used (~0.7 ms
    each): a training compile builds its stage, yield and update, not the
    CTC, dynamic-slice or custom ops; the dialect, asked for, has them all."""
    r = after_torch(_MODEL + """
    model = Net()
    t = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    t(torch.randn(2, 1, 6, 6), torch.tensor([0, 2]))
    import tilefx.dialects.ipu as ipu
    built = sorted(n for n in ipu._PLAIN if n in vars(ipu))
    from tilefx.dialects.ipu import IPU, CtcLossOp, StageOp
    print(json.dumps({"built": built, "all": len(ipu._PLAIN), "dialect": len(list(IPU.operations)),
                      "same": StageOp in list(IPU.operations) and ipu.StageOp is StageOp,
                      "ctc": CtcLossOp.name, "subclass": issubclass(StageOp, ipu._PLAIN["StageOp"])}))
    """)
    assert "StageOp" in r["built"] and "SGDOp" in r["built"]
    assert not {"CtcLossOp", "DynamicSliceOp", "CustomOp", "LambOp"} & set(r["built"])
    assert r["dialect"] == r["all"] == 22 and r["same"] and r["subclass"] and r["ctc"] == "ipu.ctc_loss"


def test_the_chunked_linear_cross_entropy_ops_load_only_for_a_model_that_uses_them(after_torch):
    """torch's chunked linear-cross-entropy module registers two custom ops on
    import (~30 ms): a compile that never calls F.linear_cross_entropy
    leaves it unloaded; a model that does, in the same process, loads it
    during the trace and gets the loss computed whole, as eager computes it,
    and torch's own chunked ops are back after the trace."""
    r = after_torch(_MODEL + """
    lce = "torch.nn.modules.linear_cross_entropy"
    model = Net()
    tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))(
        torch.randn(2, 1, 6, 6), torch.tensor([0, 2]))
    after_cnn = lce in sys.modules

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(5, 4))

        def forward(self, x, target):
            return torch.nn.functional.linear_cross_entropy(
                x, self.w, target, options=nn.LinearCrossEntropyOptions(batch_chunk_size=2))

    torch.manual_seed(0)
    head = Head()
    x, target = torch.randn(6, 4), torch.tensor([0, 4, 2, 1, 4, 3])
    out = tilefx.inferenceModel(head)(x, target)
    module = sys.modules[lce]
    restored = module._linear_cross_entropy_batch_chunked.__module__ != "tilefx.lowering.static_ops"
    ref = torch.nn.functional.cross_entropy(x @ head.w.t(), target)
    print(json.dumps({"after_cnn": after_cnn, "close": abs(float(out) - float(ref)) < 1e-5,
                      "restored": restored}))
    """)
    assert r == {"after_cnn": False, "close": True, "restored": True}
