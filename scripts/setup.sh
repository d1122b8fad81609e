#!/usr/bin/env bash
# Everything `make demo` and `make test` need on a fresh Debian/Ubuntu machine:
# a JRE and ZooKeeper from apt (when missing), and .venv with the project and its
# test extras. Idempotent and quiet when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup: Python 3.11+ is needed (found: $("$PY" --version 2>&1))" >&2
    exit 1
fi

apt_missing=()
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || apt_missing+=(zookeeper)
command -v java >/dev/null 2>&1 || apt_missing+=(default-jre-headless)
"$PY" -c 'import ensurepip, venv' 2>/dev/null || apt_missing+=(python3-venv)
# `cluster up --netns` and its partitions (chaos/netns.py): iproute2's `ip` and nftables' `nft`.
PATH="$PATH:/usr/sbin:/sbin" command -v ip >/dev/null 2>&1 || apt_missing+=(iproute2)
PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null 2>&1 || apt_missing+=(nftables)
# chaos's expire-session fault (chaos/zk_cut.py) drops one process's ZooKeeper traffic with iptables.
PATH="$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null 2>&1 || apt_missing+=(iptables)
# kcat: the Kafka listener's tests (and the README) use it as a Kafka user would.
command -v kcat >/dev/null 2>&1 || apt_missing+=(kcat)
# The console's browser test (tests/integration/console/test_console_browser.py): Debian's chromium and its WebDriver.
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || apt_missing+=(chromium-driver)
if [ ${#apt_missing[@]} -gt 0 ]; then
    echo "setup: installing ${apt_missing[*]} with apt-get" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    "$PY" -m venv .venv
fi
# Reinstall only when the project's dependency list changed.
stamp=.venv/.minibroker-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing minibroker with all its extras and its test tools into .venv" >&2
    # pip's build chatter goes to a log, shown only when the install fails.
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e '.[all,test]'; } \
            > .venv/pip-install.log 2>&1; then
        cat .venv/pip-install.log >&2
        echo "setup: pip install failed (log above, also in .venv/pip-install.log)" >&2
        exit 1
    fi
    touch "$stamp"
fi
# Bytecode for the project's own packages: an editable install has none, and with PYTHONDONTWRITEBYTECODE=1
# every broker and controller start compiled all of them again (a quarter of its start-up CPU).
.venv/bin/python -m compileall -q -j 0 common broker client controller minibroker proto zk chaos spark_jobs console >/dev/null
