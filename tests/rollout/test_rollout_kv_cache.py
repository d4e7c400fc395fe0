"""Growing KV cache layers: appending in place gives exactly what transformers' plain layer
(which copies the whole cache at every step) gives, through growth, row selection and crops,
and generation with them is bit-for-bit the generation without them."""

from __future__ import annotations

import pytest
import torch
from agentrl.rollout import kv_cache
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.kv_cache import GrowingLayer, is_plain, with_room
from agentrl.rollout.sampling import SamplingParams
from transformers.cache_utils import DynamicLayer

from tests.fakes.models import tiny_model, tiny_tokenizer


def _states(rows: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 2, length, 8, generator=g), torch.randn(
        rows, 2, length, 4, generator=g
    )


@pytest.mark.parametrize("room", [0, 1, 3, 64])
def test_growing_layer_matches_the_plain_layer(room: int) -> None:
    plain, growing = DynamicLayer(), GrowingLayer(room)
    steps = [_states(3, 5, 0), _states(3, 1, 1), _states(3, 2, 2)]
    steps += [_states(3, 1, 3 + i) for i in range(7)]
    for keys, values in steps:
        want = plain.update(keys, values)
        got = growing.update(keys, values)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert growing.get_seq_length() == plain.get_seq_length() == 15
    # Rows kept, repeated and reordered, then more steps.
    index = torch.tensor([2, 0, 0])
    plain.batch_select_indices(index)
    growing.batch_select_indices(index)
    plain.crop(-3)
    growing.crop(-3)
    for seed in range(20, 25):
        keys, values = _states(3, 1, seed)
        want = plain.update(keys, values)
        got = growing.update(keys, values)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert growing.get_seq_length() == plain.get_seq_length() == 17


def test_appends_write_in_place_until_the_room_runs_out() -> None:
    layer = GrowingLayer.holding(*_states(2, 4, 0), room=2)
    buffer = layer.keys.data_ptr()
    layer.update(*_states(2, 1, 1))
    layer.update(*_states(2, 1, 2))
    assert layer.keys.data_ptr() == buffer  # no copy while there is room
    layer.update(*_states(2, 1, 3))
    assert layer.keys.data_ptr() != buffer and layer.get_seq_length() == 7


def test_only_plain_caches_are_converted() -> None:
    from transformers import DynamicCache

    layers = [_states(2, 3, 0), _states(2, 3, 1)]
    cache = DynamicCache(ddp_cache_data=layers)
    assert is_plain(cache)
    converted = with_room(cache, 8)
    assert all(isinstance(layer, GrowingLayer) for layer in converted.layers)
    assert torch.equal(converted.layers[1].keys, layers[1][0])
    sliding = DynamicCache(ddp_cache_data=[(*layers[0], torch.tensor(4))])
    assert not is_plain(sliding) and with_room(sliding, 8) is sliding


def test_generation_is_identical_with_and_without_growing_layers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tok = tiny_tokenizer()
    prompts = [list(range(20, 60)), list(range(30, 45)), [5, 6, 7]]
    params = SamplingParams(temperature=1.0, max_new_tokens=40)

    def generate() -> list[tuple[list[int], list[float]]]:
        engine = TorchEngine(tiny_model(seed=3), tok, kv_reuse=False)
        with torch.inference_mode():
            gens = engine.generate(prompts, params, num_samples=3, seed=7)
        return [(g.token_ids, g.logps) for g in gens]

    grown = generate()
    monkeypatch.setattr(kv_cache, "with_room", lambda cache, room: cache)
    assert generate() == grown
    assert sum(len(ids) for ids, _ in grown) > 100
