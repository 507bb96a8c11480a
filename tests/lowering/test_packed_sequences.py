"""Packed sequences (`pack_padded_sequence` -> LSTM / GRU / RNN ->
`pad_packed_sequence`), the classic way to run an RNN over a padded batch:
static shapes on the IPU, eager's numbers (outputs, zeros past each length,
the state at each sequence's last step), inference and training."""

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

import tilefx


class Packed(nn.Module):
    def __init__(self, rnn, sorted_lengths=False, total_length=True, with_hx=False, on_data=False):
        super().__init__()
        self.rnn = rnn
        self.sorted_lengths = sorted_lengths
        self.total_length = total_length
        self.with_hx = with_hx
        self.on_data = on_data

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=self.sorted_lengths)
        if self.on_data:  # a pointwise op on the packed rows (their layout is torch's business)
            packed = PackedSequence(torch.tanh(packed.data), packed.batch_sizes, packed.sorted_indices,
                                    packed.unsorted_indices)
        hx = None
        if self.with_hx:
            layers = self.rnn.num_layers * (2 if self.rnn.bidirectional else 1)
            h0 = torch.ones(layers, x.shape[0], self.rnn.proj_size or self.rnn.hidden_size
                            if isinstance(self.rnn, nn.LSTM) else self.rnn.hidden_size) * 0.1
            hx = (h0, torch.ones(layers, x.shape[0], self.rnn.hidden_size) * -0.2) \
                if isinstance(self.rnn, nn.LSTM) else h0
        out, state = self.rnn(packed, hx)
        padded, lens = nn.utils.rnn.pad_packed_sequence(
            out, batch_first=True, padding_value=-1.0,
            total_length=x.shape[1] + 1 if self.total_length else None)
        h = state[0] if isinstance(state, tuple) else state
        return padded, h, lens


CASES = {
    "lstm_bidirectional_2_layers": lambda: Packed(nn.LSTM(4, 5, num_layers=2, batch_first=True,
                                                          bidirectional=True)),
    "lstm_bidirectional": lambda: Packed(nn.LSTM(4, 5, batch_first=True, bidirectional=True)),
    "lstm_proj_hx": lambda: Packed(nn.LSTM(4, 6, proj_size=3, batch_first=True), with_hx=True),
    "gru_sorted_hx": lambda: Packed(nn.GRU(4, 5, batch_first=True, bidirectional=True), sorted_lengths=True,
                                    with_hx=True),
    "rnn_relu_no_total_length": lambda: Packed(nn.RNN(4, 5, nonlinearity="relu", batch_first=True),
                                               total_length=False),
    "gru_on_data": lambda: Packed(nn.GRU(4, 5, num_layers=2, batch_first=True), on_data=True),
}


STEPS = 4


def _lengths(name):
    return torch.tensor([4, 3, 1]) if name == "gru_sorted_hx" else torch.tensor([3, 4, 2])


@pytest.mark.parametrize("name", CASES)
def test_packed_rnn_inference_matches_pytorch(name):
    torch.manual_seed(0)
    model = CASES[name]().eval()
    x, lengths = torch.randn(3, STEPS, 4), _lengths(name)
    with torch.no_grad():
        ref = model(x, lengths)
    out = tilefx.inferenceModel(model)(x, lengths)
    for got, want in zip(out, ref):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["lstm_bidirectional", "gru_sorted_hx"])
def test_packed_rnn_trains_as_pytorch(name):
    torch.manual_seed(0)

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = CASES[name]()

        def forward(self, x, lengths):
            padded, h, _ = self.m(x, lengths)
            return padded.pow(2).mean() + h.pow(2).mean()

    model = Loss().train()
    ref = copy.deepcopy(model)
    x, lengths = torch.randn(3, STEPS, 4), _lengths(name)
    opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    trainer = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    for _ in range(2):
        opt.zero_grad()
        want = ref(x, lengths)
        want.backward()
        opt.step()
        torch.testing.assert_close(trainer(x, lengths), want.detach(), rtol=1e-5, atol=1e-6)
    trainer.copyWeightsToHost()
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=n)


def test_lengths_are_data_the_program_reads_each_call():
    torch.manual_seed(0)
    model = CASES["gru_on_data"]().eval()
    ipu = tilefx.inferenceModel(model)
    x = torch.randn(3, STEPS, 4)
    for lengths in (torch.tensor([3, 4, 2]), torch.tensor([1, 4, 4])):
        with torch.no_grad():
            ref = model(x, lengths)
        for got, want in zip(ipu(x, lengths), ref):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_pad_with_total_length_takes_batches_shorter_than_it():
    torch.manual_seed(0)
    model = CASES["lstm_bidirectional"]().eval()
    x, lengths = torch.randn(3, STEPS, 4), torch.tensor([3, 1, 2])
    with torch.no_grad():
        ref = model(x, lengths)
    for got, want in zip(tilefx.inferenceModel(model)(x, lengths), ref):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_unsorted_lengths_with_enforce_sorted_fail_the_call():
    model = CASES["gru_sorted_hx"]().eval()
    ipu = tilefx.inferenceModel(model)
    with pytest.raises(tilefx.Error, match="sorted in decreasing order"):
        ipu(torch.randn(3, STEPS, 4), torch.tensor([2, 4, 3]))


def test_pad_without_total_length_shorter_than_the_batch_fails_the_call():
    """Eager returns max(lengths) steps: a shape the IPU cannot know before the data."""
    model = CASES["rnn_relu_no_total_length"]().eval()
    ipu = tilefx.inferenceModel(model)
    with pytest.raises(tilefx.Error, match="total_length"):
        ipu(torch.randn(3, STEPS, 4), torch.tensor([3, 3, 2]))
