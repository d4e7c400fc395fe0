"""`agentrl serve`: a policy behind an OpenAI-compatible server, for any client or harness.

``agentrl serve MODEL`` loads ``MODEL`` as `agentrl eval` loads ``--model`` (a run
directory's policy, a LoRA adapter on its base, a Hugging Face directory or Hub id, a GGUF
file) and serves it on ``http://127.0.0.1:8000/v1``: ``/v1/chat/completions`` (tools,
``tool_choice`` and ``tool_calls``, rendered with the model's chat template and parsed in
its family's call format exactly as in training), ``/v1/responses``, ``/v1/completions``,
``/v1/models`` and streaming, with concurrent requests batched through the engine. It is
the endpoint a run serves its ``--agent`` (`agentrl.agents.serving`). Every request needs the key
(``--api_key``, or ``AGENTRL_API_KEY``; without one a fresh key is made and printed).
SIGINT or SIGTERM stop it: exit 130 or 143.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from dataclasses import replace
from types import FrameType

from agentrl.commands.eval import POLICY_OPTIONS
from agentrl.config import TrainConfig, add_config_arguments, config_from_args
from agentrl.config.help import common
from agentrl.errors import UsageError, signal_exit_code

API_KEY_ENV = "AGENTRL_API_KEY"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The options that shape what is served: the policy, its template and call format, the
# device, and the sampling defaults and token limits every request is held to.
SERVE_OPTIONS = (
    *POLICY_OPTIONS,
    "max_context_len",
    "max_gen_len",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "stop_at_answer_end",
    "rollout_batch_rows",
    "rollout_batch_tokens",
)
# A served model reads longer prompts and writes longer replies than a training turn.
SERVE_DEFAULTS = {"max_context_len": 8192, "max_gen_len": 1024}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve a policy (a run's, a LoRA adapter, a Hugging Face model, a GGUF file) on an "
        "OpenAI-compatible endpoint: chat completions with tool calls rendered and parsed "
        "as in training, the Responses API, text completions, models, streaming. The same "
        "endpoint a run serves its --agent."
    )
    common(
        parser.add_argument(
            "model_spec",
            nargs="?",
            metavar="MODEL",
            default=None,
            help="the policy to serve, any --model spec (a run directory, an adapter, a "
            "model directory or Hub id, a .gguf file); or give --model",
        )
    )
    add_config_arguments(parser, SERVE_OPTIONS, defaults=SERVE_DEFAULTS)
    common(
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="the interface to listen on (default 127.0.0.1, this machine only; "
            "0.0.0.0 serves every interface)",
        )
    )
    common(
        parser.add_argument(
            "--port", type=int, default=8000, help="the port (default 8000; 0: any free port)"
        )
    )
    common(
        parser.add_argument(
            "--api_key",
            default=None,
            help=f"the key every request must carry (default: ${API_KEY_ENV}, else a fresh "
            "key, printed at start)",
        )
    )
    parser.add_argument(
        "--log_every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="print a throughput line (requests/s, tokens/s) this often while requests "
        "come (default 10)",
    )


def serve_config(args: argparse.Namespace) -> TrainConfig:
    """The config of a served policy: MODEL or --model (one of them), the serving
    defaults wherever neither the line nor a --config file sets them."""
    from agentrl.config import canonical_names, read_toml

    given = {k: v for k, v in vars(args).items() if k != "model_spec"}
    if args.model_spec is not None:
        if "model" in given:
            raise UsageError("give the model once: MODEL or --model, not both")
        given["model"] = args.model_spec
    try:
        in_file = canonical_names(read_toml(args.config)) if getattr(args, "config", None) else {}
    except ValueError as exc:  # as config_from_args reports a bad file
        raise UsageError(str(exc)) from exc
    if "model" not in given and "model" not in in_file:
        raise UsageError("name the model to serve: agentrl serve MODEL")
    for key, value in SERVE_DEFAULTS.items():
        if key not in given and key not in in_file:
            given[key] = value
    return config_from_args(argparse.Namespace(**given))


def api_key(given: str | None) -> tuple[str, bool]:
    """(the key requests must carry, whether it was made here): ``--api_key``, else
    ``$AGENTRL_API_KEY``, else a fresh one."""
    from agentrl.agents.server import new_api_key

    key = given or os.environ.get(API_KEY_ENV, "").strip()
    return (key, False) if key else (new_api_key(), True)


def listen_error(exc: OSError, host: str, port: int) -> UsageError:
    return UsageError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})")


def check_address(host: str, port: int) -> None:
    """A UsageError when ``host:port`` cannot be listened on (taken, no such interface)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise listen_error(exc, host, port) from None


def run(args: argparse.Namespace) -> int:
    from agentrl.agents.serving import ServedPolicy
    from agentrl.assembly.evaluation import load_policy_engine
    from agentrl.assembly.task import episode_config
    from agentrl.training.agent_source import limits_of, model_name

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: expected 0..65535")
    if args.log_every <= 0:
        raise UsageError(f"--log_every {args.log_every}: expected above 0")
    config = serve_config(args)
    key, made = api_key(args.api_key)
    check_address(args.host, args.port)  # before the model loads, which may take minutes
    spec, tokenizer, engine = load_policy_engine(config)
    limits = replace(limits_of(episode_config(config)), refuse_longer=True)
    try:
        served = ServedPolicy(
            engine,
            tokenizer,
            limits,
            model_name(spec),
            host=args.host,
            port=args.port,
            api_key=key,
            log_every=args.log_every,
            log=lambda line: print(line, flush=True),
        )
    except OSError as exc:  # taken since the check
        raise listen_error(exc, args.host, args.port) from None
    stopped = threading.Event()
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stopped.set()

    # An ignored SIGINT (a background job's) stays ignored, as in every command.
    wanted = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {signum: signal.signal(signum, stop) for signum in wanted}
    try:
        print(f"serving {spec} as model {served.server.model!r} on {served.url}", flush=True)
        if made:
            print(f"API key: {key} (set {API_KEY_ENV} or --api_key to choose one)", flush=True)
        print("SIGINT (Ctrl-C) or SIGTERM stops it", flush=True)
        while not stopped.wait(0.5):
            pass
    finally:
        served.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    name = signal.Signals(received[0]).name
    print(f"agentrl serve: stopped by {name}", file=sys.stderr, flush=True)
    return signal_exit_code(received[0])
