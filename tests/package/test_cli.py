"""The command line: one documented spelling (underscores), dashes accepted everywhere,
each command showing only its own options, and `--help` a page (the rest one flag away)."""

from __future__ import annotations

import argparse
import re

import pytest
from agentrl.cli import COMMANDS, command_parser, main, normalize_option_spelling
from agentrl.config import OPTION_NAMES, option_field, option_section

# The most lines `--help` may take at 80 columns.
HELP_PAGE_LINES = 100
# The commands whose options are the run config's, with `--help SECTION` and `--help_all`.
CONFIG_COMMANDS = ("train", "sft", "eval")

# A training-only option that a command other than `train` must not offer.
TRAINING_ONLY = ("--learning_rate", "--bc_coef", "--kl_target", "--lora_rank", "--beta_max")
# What the warm start shares with RL (the same option, the same name).
SHARED_WITH_SFT = ("--learning_rate", "--lora_rank")


def _long_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options that take part in a command line (not the help flags, which exit)."""
    return [
        a
        for a in parser._actions
        if any(s.startswith("--") for s in a.option_strings) and a.dest != argparse.SUPPRESS
    ]


def _sample_value(action: argparse.Action) -> list[str]:
    """A value the option accepts, as command-line tokens."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(next(iter(action.choices)))]
    if action.type in (int, float):
        return ["3"]
    if getattr(action.type, "__name__", "") == "str2bool":
        return ["1"]
    return ["x"]


def _positionals(name: str) -> list[str]:
    return {"score": ["in.jsonl"], "view": ["runs/x"]}.get(name, [])


def test_spelling_normalisation_touches_only_long_option_names() -> None:
    argv = ["--max-len", "5", "--eval-data=a-b.jsonl", "-n", "3", "x-y", "--", "--keep-me"]
    assert normalize_option_spelling(argv) == [
        "--max_len",
        "5",
        "--eval_data=a-b.jsonl",
        "-n",
        "3",
        "x-y",
        "--",
        "--keep-me",
    ]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_is_documented_with_underscores(name: str) -> None:
    parser, _ = command_parser(name)
    for action in _long_options(parser):
        for flag in (s for s in action.option_strings if s.startswith("--")):
            assert "-" not in flag.removeprefix("--"), f"agentrl {name}: {flag}"
    assert re.findall(r"--\w+-[\w-]+", parser.format_help()) == []


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_is_accepted_with_dashes_too(name: str) -> None:
    parser, _ = command_parser(name)
    checked = 0
    for action in _long_options(parser):
        flag = next(s for s in action.option_strings if s.startswith("--"))
        if "_" not in flag:
            continue
        value = _sample_value(action)
        dashed = "--" + flag[2:].replace("_", "-")
        with_underscores = parser.parse_args([*_positionals(name), flag, *value])
        with_dashes = parser.parse_args([*_positionals(name), dashed, *value])
        assert vars(with_dashes) == vars(with_underscores), f"agentrl {name} {dashed}"
        if value:  # the --name=value form too
            joined = parser.parse_args([*_positionals(name), f"{dashed}={value[0]}"])
            assert vars(joined) == vars(with_underscores)
        checked += 1
    assert checked > 0 or name in ("score", "view")  # their options are single words


@pytest.mark.parametrize("name", ["eval", "score", "gen-data", "sft"])
def test_commands_other_than_train_show_only_their_own_options(name: str) -> None:
    help_text = command_parser(name)[0].format_help()
    for flag in TRAINING_ONLY:
        if name == "sft" and flag in SHARED_WITH_SFT:
            continue
        assert flag not in help_text, f"agentrl {name} --help lists {flag}"


# The same concept under the same name in `agentrl sft` and `agentrl train`.
SHARED_CONCEPTS = (
    "--learning_rate",
    "--total_steps",
    "--save_dir",
    "--run_name",
    "--max_gen_len",
    "--model",
    "--warmup_steps",
    "--min_lr_ratio",
    "--accumulation_steps",
    "--grad_clip",
    "--from_resume",
    "--eval_samples",
    "--eval_data_path",
    "--max_total_len",
    "--seed",
    "--dtype",
    "--device",
)


@pytest.mark.parametrize("name", ["sft", "train"])
def test_sft_and_train_share_the_names_of_shared_concepts(name: str) -> None:
    help_text = command_parser(name)[0].format_help()
    for flag in SHARED_CONCEPTS:
        assert f"{flag} " in help_text or f"{flag}," in help_text, f"agentrl {name}: {flag}"


@pytest.mark.parametrize("name", ["sft", "train", "eval", "score", "gen-data", "view"])
def test_no_reference_trainer_path_in_help(name: str) -> None:
    help_text = command_parser(name)[0].format_help()
    for fragment in ("/workspace", "agentic_async", "MiniMind-Agentic", "internlm2", "../out"):
        assert fragment not in help_text, f"agentrl {name} --help shows {fragment}"


def test_sft_other_spellings_parse() -> None:
    from agentrl.commands.sft import options_from_args

    parser = command_parser("sft")[0]
    old = options_from_args(
        parser.parse_args(
            [
                "--lr",
                "1e-3",
                "--steps",
                "5",
                "--output",
                "out/x",
                "--resume",
                "--no_progress",
                "--grad_accum",
                "2",
                "--clip",
                "0.5",
                "--max_new_tokens",
                "20",
                "--eval_tasks",
                "7",
            ]
        )
    )
    new = options_from_args(
        parser.parse_args(
            [
                "--learning_rate",
                "1e-3",
                "--total_steps",
                "5",
                "--save_dir",
                "out",
                "--run_name",
                "x",
                "--from_resume",
                "true",
                "--progress",
                "0",
                "--accumulation_steps",
                "2",
                "--grad_clip",
                "0.5",
                "--max_gen_len",
                "20",
                "--eval_samples",
                "7",
            ]
        )
    )
    assert old == new
    assert (new.train.lr, new.train.steps, new.train.output_dir) == (1e-3, 5, "out/x")
    assert new.train.resume and not new.train.progress and new.eval_tasks == 7


def test_sft_reads_the_shared_options_of_a_toml_file(tmp_path) -> None:
    from agentrl.commands.sft import options_from_args

    path = tmp_path / "run.toml"
    path.write_text("[optim]\nlearning_rate = 0.002\n[bc]\nbc_coef = 0.0\n[run]\ntotal_steps = 9\n")
    options = options_from_args(command_parser("sft")[0].parse_args(["--config", str(path)]))
    assert (options.train.lr, options.train.steps) == (0.002, 9)


def test_eval_takes_max_gen_len() -> None:
    from agentrl.commands.eval import eval_config

    args = command_parser("eval")[0].parse_args(["--max_gen_len", "17"])
    assert eval_config(args).eval_max_gen_len == 17


def test_eval_offers_the_options_an_evaluation_reads() -> None:
    help_text = command_parser("eval")[0].format_help()
    for flag in (
        "--model",
        "--data",
        "--eval_samples",
        "--eval_temperature",
        "--max_turns",
        "--tool_subset",
        "--config",
        "--output",
    ):
        assert flag in help_text
    with pytest.raises(SystemExit):
        command_parser("eval")[0].parse_args(["--learning_rate", "1e-5"])


def test_train_keeps_every_option() -> None:
    help_text = command_parser("train")[0].format_help()
    assert all(flag in help_text for flag in TRAINING_ONLY)


def test_main_accepts_both_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--print-config", "--batch-size", "3"]) == 0
    dashed = capsys.readouterr().out
    assert main(["train", "--print_config", "--batch_size", "3"]) == 0
    assert capsys.readouterr().out == dashed and "batch_size = 3" in dashed


def _help(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``agentrl ARGV`` at 80 columns."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _flags_listed(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--\w+", text))


@pytest.mark.parametrize("name", CONFIG_COMMANDS)
def test_help_is_one_page_of_the_common_options_and_says_where_the_rest_is(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, page, _ = _help(capsys, [name, "--help"])
    assert code == 0
    lines = page.splitlines()
    assert len(lines) <= HELP_PAGE_LINES, f"agentrl {name} --help: {len(lines)} lines"
    words = " ".join(page.split())
    assert f"agentrl {name} --help SECTION" in words and f"agentrl {name} --help_all" in words
    assert _help(capsys, [name, "-h"])[1] == page
    parser = command_parser(name)[0]
    offered = {a.dest for a in parser._actions if a.dest in OPTION_NAMES}
    common = {n for n in offered if option_field(n).metadata.get("common")}
    shown = {n for n in offered if f"--{n} " in page or f"--{n}," in page or f"--{n}\n" in page}
    assert shown == common  # the front page is what the declarations mark, nothing else
    assert common, f"agentrl {name} --help shows no option"


def test_train_help_groups_the_common_options_by_section(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    page = _help(capsys, ["train", "--help"])[1]
    for flag in ("--model", "--data", "--total_steps", "--num_generations", "--reward_funcs"):
        assert flag in page
    for section in ("run", "model", "data", "rollout", "eval", "reward"):
        assert re.search(rf"^{section} options \(\d+ of \d+; all: --help {section}\):$", page, re.M)
    assert "--help_all" in page and "--print_config" in page
    assert "--kl_target" not in page and "--reward_base" not in page


@pytest.mark.parametrize("name", CONFIG_COMMANDS)
def test_help_all_lists_every_option(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = command_parser(name)[0]
    every = {s for a in _long_options(parser) for s in a.option_strings if s.startswith("--")}
    code, text, _ = _help(capsys, [name, "--help_all"])
    assert code == 0 and every <= _flags_listed(text)
    assert "Exit codes" in text
    assert _help(capsys, [name, "--help-all"])[1] == text  # the dashed spelling too
    if name == "train":
        assert {f"--{n}" for n in OPTION_NAMES} <= _flags_listed(text)


def test_help_section_lists_that_sections_options_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text, _ = _help(capsys, ["train", "--help", "rollout"])
    assert code == 0 and "rollout options:" in text
    rollout = {f"--{n}" for n in OPTION_NAMES if option_section(n) == "rollout"}
    assert rollout <= _flags_listed(text)
    others = {f"--{n}" for n in OPTION_NAMES if option_section(n) != "rollout"}
    assert not others & _flags_listed(text.split("rollout options:")[1])
    reward = _help(capsys, ["train", "--help", "reward"])[1]
    assert "--reward_base" in reward and "--judge_model" in reward
    assert "--num_demos" in _help(capsys, ["sft", "--help", "warm_start"])[1]
    assert "--resume" in _help(capsys, ["sft", "-h", "aliases"])[1]


def test_an_unknown_help_section_is_a_usage_error_naming_the_sections(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _help(capsys, ["train", "--help", "optimiser"])
    assert code == 2 and out == ""
    assert "unknown help section 'optimiser'" in err and "rollout" in err and "reward" in err
    code, _, err = _help(capsys, ["eval", "--help", "optim"])  # eval has no optim section
    assert code == 2 and "unknown help section 'optim'" in err


def test_print_config_takes_todays_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--print_config", "--total_steps", "7", "--epsilon", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "total_steps = 7" in out and "epsilon = 0.3" in out and "[reward]" in out
