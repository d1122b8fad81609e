#!/usr/bin/env bash
# Regenerates proto/minibroker_pb2.py, minibroker_pb2_grpc.py and their .pyi
# stubs from proto/minibroker.proto. The output is committed, so run this after
# every .proto edit; tests/unit/proto/test_proto_generated.py fails when it is stale.
#
# Usage: scripts/gen_proto.sh [OUT_ROOT]   (default: the repository root)
#
# protoc runs from the repository root with -I. so that generated imports read
# `from proto import minibroker_pb2`. The generated files embed the versions of
# grpcio-tools and mypy-protobuf, which pyproject.toml pins for that reason.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-.}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$out/proto"
# mypy-protobuf's protoc plugins (protoc-gen-mypy, protoc-gen-mypy_grpc) sit
# next to the interpreter, which need not be on PATH.
PATH="$(dirname "$py"):$PATH" "$py" -m grpc_tools.protoc -I. \
    --python_out="$out" --grpc_python_out="$out" \
    --mypy_out="$out" --mypy_grpc_out="$out" \
    proto/minibroker.proto
