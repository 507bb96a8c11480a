"""The pipelining tutorial's data loaders as written (seed 003: top-level code,
``DataLoaderMode.Async``, ``num_workers=16``), in a script and in an
interactive session (code read from stdin, as a notebook cell runs: no
``__main__`` file to re-import), with a stand-in of MNIST's shape and size
(60000 x 1 x 28 x 28 float32): the loader must run without an
``if __name__ == "__main__":`` guard and yield the batches, in the order, of
the synchronous loader.  The time to the first batch is printed for
benchmarks/RESULTS.md, not asserted."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from repo_paths import REPO

ROOT = REPO

# The stand-in, a dataset class defined in the running code itself (as a
# notebook would define one), then the tutorial's hyperparameters and loader
# code unchanged.
TUTORIAL = textwrap.dedent("""
    import json
    import time
    import torch
    import poptorch

    class StandIn(torch.utils.data.Dataset):
        def __init__(self, images, labels):
            self.images, self.labels = images, labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, index):
            return self.images[index], self.labels[index]

    generator = torch.Generator().manual_seed(1)
    train_dataset = StandIn(torch.rand(60000, 1, 28, 28, generator=generator),
                            torch.randint(0, 10, (60000,), generator=generator))

    learning_rate = 0.001
    epochs = 3
    batch_size = 40
    test_batch_size = 8
    training_iterations = 10
    gradient_accumulation = 10
    inference_iterations = 100

    torch.manual_seed(0)
    start = time.perf_counter()

    train_opts = poptorch.Options()
    train_opts.deviceIterations(training_iterations)
    train_opts.Training.gradientAccumulation(gradient_accumulation)

    training_data = poptorch.DataLoader(
        train_opts,
        train_dataset,
        batch_size=batch_size,
        shuffle=True,
        mode=poptorch.DataLoaderMode.Async,
        num_workers=16,
    )

    def digest(batch):
        images, labels = batch
        return [labels.tolist(), float(images.double().sum())]

    batches = iter(training_data)
    first = next(batches)
    first_batch_s = time.perf_counter() - start
    got = [digest(first)] + [digest(b) for b in batches]
    training_data.terminate()

    # The synchronous loader: an Async loader's shuffle generator is seeded
    # with the global RNG's first draw at construction (docs/data_loading.md).
    torch.manual_seed(0)
    seed = int(torch.empty((), dtype=torch.int64).random_().item())
    sync = poptorch.DataLoader(
        train_opts, train_dataset, batch_size=batch_size, shuffle=True,
        generator=torch.Generator().manual_seed(seed))
    expected = [digest(b) for b in sync]
    print(json.dumps({"first_batch_s": first_batch_s, "same": got == expected,
                      "batches": len(got), "sync_batches": len(expected)}))
""")


def run(how, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if how == "script":
        path = tmp_path / "tutorial_data.py"
        path.write_text(TUTORIAL)
        args, stdin = [sys.executable, str(path)], None
    else:
        args, stdin = [sys.executable, "-"], TUTORIAL
    result = subprocess.run(args, input=stdin, env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["script", "notebook"])
def test_tutorial_loader_as_written(how, tmp_path):
    report = run(how, tmp_path)
    print(f"tutorial loader ({how}): first batch after {report['first_batch_s']:.2f} s")
    assert report["batches"] == report["sync_batches"] == 60000 // (40 * 10 * 10)
    assert report["same"]
