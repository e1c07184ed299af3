#!/usr/bin/env bash
# Fuzz the HTTP API against its own OpenAPI document with schemathesis (issue 13, item 11).
#
# Starts `cpersona serve` from .venv on a free loopback port with a throwaway data dir, runs every
# schemathesis check against GET /openapi.json, stops the server and exits non-zero on any server error
# or any disagreement between the document and what the server does. schemathesis lives in its own venv
# (.venv-fuzz) so that its pins never move the project's.
#
#   benchmarks/fuzz.sh                      # what CI runs: seeded, so a failure repeats
#   FUZZ_SEED=random benchmarks/fuzz.sh     # unseeded: a new seed each run (printed at the end)
#   FUZZ_EXAMPLES=500 benchmarks/fuzz.sh    # more examples per operation
#
# Extra arguments go to `st run` (e.g. --include-path /v1/encode --phases coverage,fuzzing: a single
# operation has no links to follow, and schemathesis counts the empty stateful phase as an error).
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${FUZZ_EXAMPLES:-100}
SEED=${FUZZ_SEED:-13}
PYTHON=${PYTHON:-.venv/bin/python}
CPERSONA=${CPERSONA:-.venv/bin/cpersona}

if [[ ! -x .venv-fuzz/bin/st ]] || [[ "$(.venv-fuzz/bin/st --version)" != *"$SCHEMATHESIS_VERSION"* ]]; then
    python3.11 -m venv .venv-fuzz
    .venv-fuzz/bin/pip install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cpersona-fuzz.XXXXXX")
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
server=""
stop_server() {
    if [[ -n "$server" ]]; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop_server EXIT

# A throwaway data dir: the fuzzer writes thousands of odd records that nobody should keep. A default agent,
# so that a body without an agent_id is what the document says it is: optional (the X-Cpersona-Agent header
# or CPERSONA_DEFAULT_AGENT gives it; without both the server refuses naming agent_id, a rule across a
# header and a body that no schema can say).
CPERSONA_DATA_DIR="$work/data" CPERSONA_HOST=127.0.0.1 CPERSONA_PORT="$port" CPERSONA_DEFAULT_AGENT=fuzz \
    "$CPERSONA" serve >"$work/serve.log" 2>&1 &
server=$!
url="http://127.0.0.1:$port"
ready=""
for _ in $(seq 120); do
    if "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "$url/health" 2>/dev/null; then
        ready=yes
        break
    fi
    if ! kill -0 "$server" 2>/dev/null; then
        cat "$work/serve.log" >&2
        echo "fuzz: cpersona serve exited before answering /health" >&2
        exit 1
    fi
    sleep 0.5
done
if [[ -z "$ready" ]]; then
    cat "$work/serve.log" >&2
    echo "fuzz: cpersona serve did not answer /health within a minute" >&2
    exit 1
fi

seed_args=(--seed "$SEED")
if [[ "$SEED" == random ]]; then
    seed_args=()
fi

status=0
# --generation-database none: no example database carried between runs, so a seeded run is the same run.
# One worker: two made hypothesis fail inside itself (a SystemError in its AST handling), and the server
# has the other core. The hooks module (benchmarks/fuzz_hooks.py) is found through PYTHONPATH. Every check
# runs: fuzz.toml enables them all, so that an operation's own entry there can turn one off (a --checks
# on this line would override it).
PYTHONPATH=benchmarks .venv-fuzz/bin/st --config-file benchmarks/fuzz.toml run "$url/openapi.json" \
    --mode all --max-examples "$EXAMPLES" "${seed_args[@]}" \
    --workers 1 --generation-database none --no-color "$@" || status=$?

if grep -q "Traceback\|unhandled error" "$work/serve.log"; then
    grep -B2 -A30 "Traceback\|unhandled error" "$work/serve.log" | head -200 >&2
    echo "fuzz: the server logged an unhandled error" >&2
    status=1
fi
exit "$status"
