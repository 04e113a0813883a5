"""The data boundary of the grader (mini_llm.grading.wire): plain data only, never pickles."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from mini_llm.grading import wire


def _round_trip(value):
    return wire.decode(wire.encode(value))


def test_plain_values_arrays_and_generators_cross_unchanged():
    value = {
        "ids": [1, 2.5, None, True, "x"],
        (0, 1): np.arange(6).reshape(2, 3),
        "scalar": np.float32(1.5),
        "set": {3, 4},
    }
    back = _round_trip(value)
    assert back["ids"] == [1, 2.5, None, True, "x"] and back["set"] == {3, 4}
    assert np.array_equal(back[(0, 1)], value[(0, 1)]) and back[(0, 1)].dtype == np.int64
    assert type(back["scalar"]) is np.float32
    assert _round_trip(np.array(2.0)).shape == ()
    generator = np.random.default_rng(7)
    twin = _round_trip(generator)
    assert twin.integers(1000, size=5).tolist() == generator.integers(1000, size=5).tolist()


def test_a_counter_defaultdict_or_list_subclass_crosses_as_the_plain_type():
    """A learner's correct answer may return a Counter: it must arrive as the dict it is,
    not as a handle to an object in the student's process (issue 31)."""
    from collections import Counter, OrderedDict, defaultdict

    class Ids(list):
        pass

    counts = Counter("abca")
    table = defaultdict(int, {("a", "b"): 2})
    for value, plain in ((counts, dict), (table, dict), (OrderedDict(x=1), dict), (Ids([1]), list)):
        back = _round_trip(value)
        assert type(back) is plain and back == plain(value)
    assert _round_trip({"nested": Counter("xx")}) == {"nested": {"x": 2}}


def test_torch_generators_cross_with_their_state():
    import torch

    generator = torch.Generator().manual_seed(3)
    torch.rand(5, generator=generator)  # not at its seed any more
    twin = _round_trip(generator)
    assert isinstance(twin, torch.Generator)
    assert torch.equal(torch.rand(4, generator=twin), torch.rand(4, generator=generator))
    for junk in (np.zeros(3, dtype=np.uint8), np.zeros((2, 2), dtype=np.uint8), np.arange(5.0)):
        with pytest.raises(wire.WireError):
            wire.decode({"$torchrng": wire.encode(junk)["$nd"]})


def test_objects_become_handles_or_are_refused():
    assert wire.encode(object(), ref=lambda obj: {"$ref": 1}) == {"$ref": 1}
    with pytest.raises(TypeError):
        wire.encode(np.array([object()], dtype=object))
    with pytest.raises(TypeError):
        wire.encode(lambda: None)


def test_a_pickled_array_is_refused():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(wire.WireError):
        wire.decode({"$nd": base64.b64encode(buffer.getvalue()).decode()})


@pytest.mark.parametrize(
    "junk",
    [{"$nd": 5}, {"$rng": {"bit_generator": "os.system"}}, {"$dict": [[1]]}, {"who": "knows"}],
)
def test_malformed_values_are_refused(junk):
    with pytest.raises(wire.WireError):
        wire.decode(junk)


def _lent_pair():
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    return model, torch.optim.Adam(model.parameters(), lr=0.1)


def test_a_lent_model_and_optimizer_take_back_their_state_from_plain_data():
    import torch

    from mini_llm.grading import lending

    model, optimizer = _lent_pair()
    twin, twin_optimizer = _lent_pair()  # stands for the copy in the student's process
    twin.eval()
    twin(torch.ones(1, 2)).sum().backward()
    twin_optimizer.step()
    weight = model[0].weight
    lending.restore(model, _round_trip(lending.state_of(twin)))
    lending.restore(optimizer, _round_trip(lending.state_of(twin_optimizer)))
    assert model[0].weight is weight and torch.equal(weight, twin[0].weight)
    assert torch.equal(weight.grad, twin[0].weight.grad) and not model[1].training
    assert torch.equal(
        optimizer.state[weight]["exp_avg"], twin_optimizer.state_dict()["state"][0]["exp_avg"]
    )


@pytest.mark.parametrize(
    "tamper",
    [
        lambda state: state["tensors"].pop("0.bias"),  # a parameter missing
        lambda state: state["tensors"].update({"0.weight": np.zeros((3, 3), np.float32)}),
        lambda state: state["grads"].update({"0.bias": "pickled bytes"}),
        lambda state: state["training"].update({"1": 1}),
        lambda state: state.update({"extra": 1}),
    ],
)
def test_a_model_state_that_is_more_than_new_numbers_is_refused(tamper):
    from mini_llm.grading import lending

    model, _ = _lent_pair()
    before = [p.detach().clone() for p in model.parameters()]
    state = _round_trip(lending.state_of(_lent_pair()[0]))
    tamper(state)
    with pytest.raises(ValueError):
        lending.restore(model, state)
    assert all(p.equal(b) for p, b in zip(model.parameters(), before))


@pytest.mark.parametrize(
    "tamper",
    [
        lambda groups: groups[0].update({"fused": True, "params": [0, 1]}),  # fused was None
        lambda groups: groups[0].update({"lr_schedule": "os.system"}),  # a key of its own
        lambda groups: groups.append(dict(groups[0])),  # another group
    ],
)
def test_an_optimizer_state_with_other_settings_is_refused(tamper):
    from mini_llm.grading import lending

    _, optimizer = _lent_pair()
    state = _round_trip(lending.state_of(optimizer))
    tamper(state["param_groups"])
    with pytest.raises(ValueError):
        lending.restore(optimizer, state)
    assert optimizer.param_groups[0]["fused"] is None and len(optimizer.param_groups) == 1
