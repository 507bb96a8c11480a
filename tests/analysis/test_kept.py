"""analysis/kept.py: which slots stay a kernel provider's tensors."""

from tilefx.analysis.kept import NONE_KEPT, kept_values


def test_a_value_only_provider_steps_read_stays_a_tensor():
    # step 0 (provider) reads arg 0, writes 2; step 1 (numpy) reads 2, writes 3;
    # step 2 (provider) reads 3 and arg 1, writes 4 (returned)
    reads = [{0}, {2}, {3, 1}]
    kept = kept_values(reads, made={0: [2], 2: [4]}, passes={}, arg_slots=[0, 1], result_slots=[4])
    # 2 is read by a numpy step: an array; 3, which the numpy step writes, is
    # read by provider steps alone, which take an array or a tensor
    assert kept.slots == {0, 1, 3, 4}
    assert kept.args == {0, 1} and kept.results == (0,)


def test_a_clone_passes_a_tensor_on_only_when_its_result_stays_one():
    # step 0 provider writes 2; step 1 clones 2 into 3; step 2 (numpy) reads 3
    reads = [{0}, {2}, {3}]
    kept = kept_values(reads, made={0: [2]}, passes={1: (2, 3)}, arg_slots=[0], result_slots=[])
    assert 2 not in kept.slots and 3 not in kept.slots  # the clone's result is an array: so is its operand
    # the clone's result read by a provider step: both tensors
    kept = kept_values([{0}, {2}, {3}], made={0: [2], 2: [4]}, passes={1: (2, 3)}, arg_slots=[0],
                       result_slots=[4])
    assert {2, 3, 4} <= kept.slots


def test_nothing_is_kept_without_provider_steps():
    assert kept_values([{0}], made={}, passes={}, arg_slots=[0], result_slots=[1]) is NONE_KEPT
