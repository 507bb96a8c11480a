"""One executor called from several threads: the calls are serialized, so
the weights equal the same steps run one after the other (never state
interleaved between two calls)."""

from __future__ import annotations

import threading

import torch

import tilefx as poptorch


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 8)
        self.loss = torch.nn.MSELoss()

    def forward(self, x, y):
        out = self.fc2(torch.relu(self.fc1(x)))
        return out, self.loss(out, y)


def _trained(steps_per_thread: int, threads: int):
    torch.manual_seed(0)
    net = _Net()
    ex = poptorch.trainingModel(net, optimizer=torch.optim.Adam(net.parameters(), lr=1e-2))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 64, generator=g), torch.randn(32, 8, generator=g)
    ex(x, y)  # compiled (and one step) before the threads start
    errors = []

    def work():
        try:
            for _ in range(steps_per_thread):
                ex(x, y)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    ex.copyWeightsToHost()
    return {n: p.detach().clone() for n, p in net.named_parameters()}


def test_calls_from_two_threads_equal_the_same_steps_in_sequence():
    together = _trained(20, threads=2)
    alone = _trained(40, threads=1)
    for n in alone:
        torch.testing.assert_close(together[n], alone[n], rtol=0, atol=0)
