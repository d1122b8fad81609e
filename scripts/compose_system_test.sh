#!/usr/bin/env bash
# The docker-compose system tests (tests/system/: test_compose.py, then the secure variant's
# test_compose_secure.py) with a container runtime:
# an engine already answering `docker info` (Docker, DOCKER_HOST), else the build machine's
# Podman-behind-the-Docker-API setup ($CONTAINER_RUNTIME_SCRIPT, ../shared/tools/container-runtime.sh
# by default), which also exports BASE_IMAGE (no registry there). Where no runtime can start,
# the test says so loudly and skips; this script then exits 0.
#
#   scripts/compose_system_test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "compose_system_test: $*" >&2; }

RUNTIME_SCRIPT=${CONTAINER_RUNTIME_SCRIPT:-../shared/tools/container-runtime.sh}
if ! docker info >/dev/null 2>&1; then
    if [ -x "$RUNTIME_SCRIPT" ] || [ -f "$RUNTIME_SCRIPT" ]; then
        log "no engine answers; preparing one with $RUNTIME_SCRIPT"
        if exports=$(bash "$RUNTIME_SCRIPT"); then
            eval "$exports"
        else
            log "$RUNTIME_SCRIPT failed: no container runtime"
        fi
    else
        log "no engine answers and no $RUNTIME_SCRIPT: no container runtime"
    fi
fi

# Podman's default OCI runtime (crun) refuses hosts with hybrid cgroups v1/v2 ("cgroups in hybrid
# mode not supported"); runc runs there. Serve the Docker API from a runc-backed Podman on a socket of
# our own for this run, leaving the shared service as it is.
runc_service=""
if command -v podman >/dev/null && docker info >/dev/null 2>&1 \
        && ! docker run --rm "${BASE_IMAGE:-python:3.11-slim-bookworm}" true >/dev/null 2>&1 \
        && command -v runc >/dev/null; then
    sock=/run/podman/minibroker-runc-$$.sock
    log "containers do not start with Podman's default runtime; serving $sock with runc"
    setsid podman --runtime runc system service --time=0 "unix://$sock" >/dev/null 2>&1 </dev/null &
    runc_service=$!
    trap 'kill "$runc_service" 2>/dev/null || true; rm -f "$sock"' EXIT
    for _ in $(seq 50); do curl -s --unix-socket "$sock" http://d/_ping 2>/dev/null | grep -q OK && break; sleep 0.2; done
    export DOCKER_HOST=unix://$sock
fi

[ -x .venv/bin/pytest ] || scripts/setup.sh
# -s: the figures (build time, up to healthy, failover and rejoin times) go to stderr as they happen.
.venv/bin/pytest -q -s -rs -p no:cacheprovider tests/system "$@"
