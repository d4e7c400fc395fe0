"""Type stubs for the Rust extension module `agentrl._core`."""

from typing import Any

__version__: str

class SafeEvalError(ValueError): ...

def canonicalize_expression(text: str) -> str: ...
def safe_eval(expr: str) -> float: ...
def format_number(value: float) -> str: ...
def extract_expressions(text: str, max_exprs: int = 8) -> list[str]: ...
def parse_tool_calls(text: str) -> list[dict[str, Any]]: ...
def json_dumps(obj: Any, *, sort_keys: bool = False, compact: bool = True) -> str: ...
def parse_message(
    text: str,
    tools: list[str] | None = None,
    formats: list[str] | None = None,
    param_types: dict[str, dict[str, str]] | None = None,
) -> tuple[str, str | None, list[dict[str, Any]], list[dict[str, Any]]]: ...

# Reward scoring (rust/src/bindings/reward.rs). Buffers hold native-endian float64 values,
# row-major: one row per record, one value per key.
def reward_score_batch(
    records: Any,
    config: dict[str, Any] | None = None,
    threads: int | None = None,
    explain: bool = False,
) -> tuple[int, bytearray, bytearray | None]: ...
def reward_score_lines(
    lines: list[str | bytes],
    config: dict[str, Any] | None = None,
    threads: int | None = None,
    explain: bool = False,
) -> tuple[int, bytearray, bytearray | None]: ...
def reward_detail_keys() -> list[str]: ...
def reward_term_keys() -> list[str]: ...
def reward_config_fields() -> list[tuple[str, str, Any]]: ...
def reward_resolve_threads(threads: int | None = None) -> int: ...
def reward_parallelism_disabled() -> bool: ...

# The function_call reward (rust/src/bindings/funcall.rs).
def function_call_score_batch(
    records: Any,
    config: dict[str, Any] | None = None,
    formats: list[str] | None = None,
    threads: int | None = None,
) -> tuple[int, bytearray]: ...
def function_call_score_lines(
    lines: list[str | bytes],
    config: dict[str, Any] | None = None,
    formats: list[str] | None = None,
    threads: int | None = None,
    render: bool = True,
) -> tuple[list[str | None], bytearray, list[tuple[int, str]]]: ...
def function_call_detail_keys() -> list[str]: ...
def function_call_term_keys() -> list[str]: ...

# File scoring (rust/src/bindings/scorefile.rs): src/dst are paths (str) or file objects.
# Returns lines, rewards (float64 bytes), skipped [(line, reason)], skipped_count,
# term_sums and explained [(line, reward, raw_reward, terms)].
def reward_score_file(
    src: Any,
    dst: Any,
    config: dict[str, Any] | None = None,
    threads: int | None = None,
    explain: bool = False,
) -> dict[str, Any]: ...

# The finite rewards of float64 bytes summarised: finite, mean, min, max, edges, counts
# (binned as numpy.histogram does).
def reward_histogram(rewards: bytes, bins: int) -> dict[str, Any]: ...
