"""Packing rollout groups into tensors: layout, truncation, drop rules, EOS cut."""

from __future__ import annotations

import pytest
import torch
from agentrl.rl.pack import EmptyBatchError, cut_after_first_eos, pack_groups
from agentrl.trajectory import RolloutGroup, Trajectory

PAD, EOS = 0, 2


def traj(prompt: list[int], *segments: tuple[str, list[int]], version: int = 0) -> Trajectory:
    """A trajectory from ("gen", ids) / ("obs", ids) segments; generated logps are -0.1*k."""
    t = Trajectory("p", [], None, [], "", "", list(prompt), policy_version=version)
    k = 0
    for kind, ids in segments:
        for tok in ids:
            t.response_ids.append(tok)
            if kind == "gen":
                k += 1
                t.response_mask.append(1)
                t.response_logps.append(-0.1 * k)
                t.response_versions.append(version)
            else:
                t.response_mask.append(0)
                t.response_logps.append(0.0)
                t.response_versions.append(-1)
    return t


def close(actual: torch.Tensor, expected: list[list[float]]) -> None:
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype))


def group(*trajs: Trajectory, version: int = 0, index: int = 0) -> RolloutGroup:
    return RolloutGroup("p", index, version, list(trajs), 0.0)


def test_rows_are_prompt_then_response_in_the_shifted_layout() -> None:
    a = traj([5, 6, 7], ("gen", [8, 9]), version=3)
    b = traj([5, 6], ("gen", [10]), version=3)
    batch = pack_groups([group(a, b, version=3)], num_generations=2, max_total_len=16, pad_id=PAD)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 6, 10, PAD, PAD]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch.response_mask.tolist() == [[0, 0, 0, 1, 1], [0, 0, 1, 0, 0]]
    # Position t scores token t+1: the first response token (index 3) is scored at t=2.
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1], [0, 1, 0, 0]]
    close(batch.behavior_logps, [[0, 0, -0.1, -0.2], [0, -0.1, 0, 0]])
    assert batch.token_versions.tolist() == [[-1, -1, 3, 3], [-1, 3, -1, -1]]
    assert batch.seq_lens.tolist() == [5, 3]
    assert batch.group_ids.tolist() == [0, 0]
    assert batch.row_versions.tolist() == [3, 3]
    assert batch.dropped_groups == 0


def test_observation_tokens_are_in_the_sequence_but_not_in_the_loss() -> None:
    t = traj([1, 2], ("gen", [3]), ("obs", [4, 5]), ("gen", [6]))
    batch = pack_groups([group(t)], num_generations=1, max_total_len=16, pad_id=PAD)
    assert batch.input_ids.tolist() == [[1, 2, 3, 4, 5, 6]]
    assert batch.loss_mask.tolist() == [[0, 1, 0, 0, 1]]
    close(batch.behavior_logps, [[0, -0.1, 0, 0, -0.2]])


def test_long_sequence_keeps_its_last_tokens() -> None:
    t = traj([1, 2, 3, 4], ("gen", [5, 6]))
    batch = pack_groups([group(t)], num_generations=1, max_total_len=4, pad_id=PAD)
    # ids 1..6 cut to the last 4; shifted arrays [0,0,0,-.1,-.2] cut to their last 3.
    assert batch.input_ids.tolist() == [[3, 4, 5, 6]]
    assert batch.response_mask.tolist() == [[0, 0, 1, 1]]
    close(batch.behavior_logps, [[0, -0.1, -0.2]])
    assert batch.truncated_rows == 1


def test_group_with_one_unusable_trajectory_is_dropped_whole_when_strict() -> None:
    good = traj([1, 2], ("gen", [3]))
    no_prompt = traj([], ("gen", [3, 4]))
    kept = group(traj([1, 2], ("gen", [3])), traj([1, 2], ("gen", [4])), index=1)
    batch = pack_groups(
        [group(good, no_prompt), kept], num_generations=2, max_total_len=8, pad_id=PAD
    )
    assert batch.dropped_groups == 1
    assert batch.dropped_trajectories == 2
    assert batch.drop_reasons == {"empty_prompt": 1}
    assert [g.data_index for g in batch.groups] == [1]
    assert batch.num_rows == 2


def test_wrong_group_size_is_dropped_when_strict() -> None:
    g3 = group(*(traj([1, 2], ("gen", [3])) for _ in range(3)))
    g2 = group(*(traj([1, 2], ("gen", [3])) for _ in range(2)), index=7)
    batch = pack_groups([g3, g2], num_generations=2, max_total_len=8, pad_id=PAD)
    assert batch.drop_reasons == {"group_size": 1}
    assert batch.dropped_trajectories == 3
    assert batch.num_rows == 2


def test_non_strict_packing_keeps_the_usable_trajectories_of_a_group() -> None:
    only_obs = traj([1, 2], ("obs", [3, 4]))
    g0 = group(traj([1, 2], ("gen", [3])), only_obs, traj([1, 2], ("gen", [5])))
    g1 = group(traj([7, 8], ("gen", [9])), index=1)
    batch = pack_groups(
        [g0, g1], num_generations=2, max_total_len=8, pad_id=PAD, strict_group_packing=False
    )
    assert batch.group_ids.tolist() == [0, 0, 1]
    assert batch.dropped_groups == 0
    assert batch.dropped_trajectories == 1
    assert batch.drop_reasons == {"partial_no_response_tokens": 1}


def test_misaligned_trajectory_is_counted_not_packed() -> None:
    bad = traj([1, 2], ("gen", [3]))
    bad.response_logps.append(-1.0)  # one log-prob too many
    with pytest.raises(EmptyBatchError) as err:
        pack_groups([group(bad)], num_generations=1, max_total_len=8, pad_id=PAD)
    assert err.value.dropped_groups == 1
    assert err.value.reasons == {"misaligned": 1}


def test_response_truncated_to_nothing_is_dropped() -> None:
    # The last 3 tokens are all observation: nothing generated is left to learn from.
    t = traj([1, 2], ("gen", [3]), ("obs", [4, 5, 6]))
    with pytest.raises(EmptyBatchError, match="no_response_tokens"):
        pack_groups([group(t)], num_generations=1, max_total_len=3, pad_id=PAD)


def test_eos_cut_keeps_the_first_eos_of_a_turn_and_drops_what_follows() -> None:
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 1]])
    targets = torch.tensor([[4, EOS, 7, 8], [4, 5, 6, 7]])
    assert cut_after_first_eos(mask, targets, EOS).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


def test_eos_cut_is_per_turn_in_multi_turn_rows() -> None:
    # turn 1: E 3 3 (cut after E) | obs 9 | turn 2: 4 E 7 (cut after E)
    mask = torch.tensor([[1.0, 1, 1, 0, 1, 1, 1]])
    targets = torch.tensor([[EOS, 3, 3, 9, 4, EOS, 7]])
    assert cut_after_first_eos(mask, targets, EOS).tolist() == [[1, 0, 0, 0, 1, 1, 0]]
    # EOS inside an observation (mask 0) does not cut the next turn.
    mask2 = torch.tensor([[1.0, 0, 1]])
    assert cut_after_first_eos(mask2, torch.tensor([[3, EOS, 4]]), EOS).tolist() == [[1, 0, 1]]


def test_packing_applies_the_eos_cut_to_the_loss_mask() -> None:
    t = traj([1, 2], ("gen", [3, EOS, 7]))
    batch = pack_groups([group(t)], num_generations=1, max_total_len=8, pad_id=PAD, eos_id=EOS)
    assert batch.loss_mask.tolist() == [[0, 1, 1, 0]]
    assert batch.response_mask.tolist() == [[0, 0, 1, 1, 1]]


def test_batch_metrics_count_drops_and_staleness() -> None:
    g_old = group(traj([1, 2], ("gen", [3, 4]), version=1), version=1)
    g_new = group(traj([1, 2], ("gen", [5]), version=3), version=3, index=1)
    bad = group(traj([], ("gen", [3])), index=2)
    batch = pack_groups([g_old, g_new, bad], num_generations=1, max_total_len=8, pad_id=PAD)
    m = batch.metrics(current_version=3)
    assert m["pack/dropped_groups"] == 1.0
    # group gaps 3-1=2 and 3-3=0 ; trained tokens' gaps: 2, 2 (old row) and 0 (new row)
    assert m["async/staleness_group_mean"] == 1.0
    assert m["async/staleness_group_max"] == 2.0
    assert m["async/token_staleness_mean"] == pytest.approx(4 / 3)
    assert m["async/token_staleness_p50"] == 2.0
