"""Reference behaviours built here: min_p and a stop at the end of the answer from the
command line, -1 = every held-out prompt, a resumed run rejoining its tracker run."""

from __future__ import annotations

import argparse

from agentrl.assembly.task import ANSWER_END, episode_config
from agentrl.config import add_config_arguments, config_from_args, resolve
from agentrl.data import PromptPool
from agentrl.data.prompt_pool import PromptSample
from agentrl.data.splits import build_fixed_eval_indices
from agentrl.observability import trackers as trackers_module
from agentrl.observability.trackers import Trackers, rejoin_arguments


def _parsed(*argv: str):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_min_p_and_the_answer_stop_come_from_the_command_line() -> None:
    config = _parsed("--min_p", "0.05", "--stop_at_answer_end", "1")
    sampling = episode_config(config).sampling
    assert sampling.min_p == 0.05 and sampling.stop == (ANSWER_END,) == ("</answer>",)
    default = episode_config(resolve()).sampling
    assert default.min_p == 0.0 and default.stop == ()


def test_minus_one_scores_every_held_out_prompt() -> None:
    pool = PromptPool.from_samples(
        [PromptSample([{"role": "user", "content": str(i)}], None, [str(i)]) for i in range(7)]
    )
    assert sorted(build_fixed_eval_indices(pool, -1)) == list(range(7))
    assert len(build_fixed_eval_indices(pool, 3)) == 3 and build_fixed_eval_indices(pool, 0) == []
    assert resolve(overrides={"eval_samples": -1}).eval_samples == -1


def test_a_resumed_run_rejoins_its_tracker_run(tmp_path, monkeypatch) -> None:
    first = rejoin_arguments("wandb", tmp_path, resumed=False)
    assert first["resume"] == "allow" and first["id"]
    assert rejoin_arguments("wandb", tmp_path, resumed=True) == first  # the same run
    assert rejoin_arguments("trackio", tmp_path, resumed=True) == {"resume": "allow"}
    assert rejoin_arguments("trackio", tmp_path, resumed=False) == {}
    assert rejoin_arguments("tensorboard", tmp_path, resumed=True) == {}
    seen = {}

    class Fake:
        def store_init_configuration(self, values):
            pass

    def start(name, run_name, log_dir, project, resumed=False):
        seen[name] = resumed
        return Fake()

    monkeypatch.setattr(trackers_module, "installed", lambda module: True)
    Trackers(["wandb"], run_name="r", log_dir=tmp_path, start=start, resumed=True)
    assert seen == {"wandb": True}
