#!/usr/bin/env bash
# Make a separate virtual environment holding bfcl-eval, the Berkeley Function Calling
# Leaderboard's checker and data. Its pinned dependencies (an old numpy among them) clash with
# the project's, so it lives in `.venv-bfcl` beside `.venv` and is only ever run as a
# subprocess: by `agentrl eval --benchmark bfcl` (python/agentrl/assembly/bfcl_checker.py),
# tests/data/gen_function_call_golden.py, tests/rewards' live parity test and
# benches/bench_function_call.py.
#
#   scripts/bfcl_venv.sh            # creates .venv-bfcl in the repository root
#   BFCL_VENV=/tmp/bfcl scripts/bfcl_venv.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${BFCL_VENV:-$root/.venv-bfcl}"
python="${PYTHON:-python3}"
version="2026.3.23"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# soundfile: imported by one of bfcl-eval's dependencies without being declared.
"$venv/bin/python" -m pip install --quiet "bfcl-eval==$version" soundfile
"$venv/bin/python" -c "import bfcl_eval.eval_checker.ast_eval.ast_checker as c; print('bfcl-eval ready:', c.__name__)"
echo "$venv"
