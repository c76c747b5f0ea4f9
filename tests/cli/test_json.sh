#!/usr/bin/env bash
# tests/cli/test_json.sh - the plan as JSON (`--dry-run --json`,
# docs/outputs.md "Plans as JSON"):
#   * stdout is one JSON object on one line and nothing else;
#   * every key docs/outputs.md's table documents is there with its
#     documented type, and no other key: the schema of tests/ref/json_plan_check.py is
#     written once and that table must list exactly its keys and types;
#   * the values agree with an independent account of each case: sizes
#     and input shapes from the input file (h5py), FLOPs from the formula,
#     output shapes and axes from docs/outputs.md, bytes as elements
#     times element size (of the maps, the tiles some query sees), the
#     variant from the options and the preset; and the shapes, axes, types
#     and chunks with those of a real run's output file;
#   * file, group and output names with quotes, backslashes, control
#     characters and UTF-8 come back intact; bytes that are not UTF-8 as
#     U+FFFD;
#   * --json without --dry-run is exit 2; a failed dry run leaves stdout
#     empty.
# The checks are in tests/ref/json_plan_check.py.
# Cases: the gpt2 fixture; a causal window over n = 600 stored as f16;
# GQA with RoPE, positions and an attention bias saving q, k, v; cross-
# attention with a mask in f64 stored as bf16; a rank-2 X; per-head 3-D
# weights with d_k != d_v; the qwen3 and bloom presets; --in-place.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_json.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 60)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "json: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-60}

SUITE="json"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup json numpy h5py

PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/json_plan_check.py" "$ATTNRUN" "$T" "$PWD/fixtures" "$TESTS/../docs/outputs.md" "$TIME_LIMIT" >"$T/json.log" 2>&1
report_verdicts "$T/json.log" $?
finish
