# shellcheck shell=bash
# Helpers shared by the integration and CLI test scripts (sourced, not run).
#
# skip_or_fail MESSAGE: a missing prerequisite. Exit 77 (ctest's SKIP_RETURN_CODE) so `make test` passes on a
# machine without the integration packages; with GPUDX_REQUIRE_INTEGRATION=1 (make test-integration) it is a
# failure instead, so CI cannot pass by skipping.
skip_or_fail() {
  if [[ ${GPUDX_REQUIRE_INTEGRATION:-0} == 1 ]]; then
    echo "FAIL: $* (GPUDX_REQUIRE_INTEGRATION=1: a missing prerequisite is a failure)" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit 77
}

# require_cmd CMD...: each must be on PATH (sbin included: daemons live there).
require_cmd() {
  local c
  for c in "$@"; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$c" >/dev/null 2>&1 || skip_or_fail "$c is not installed (bash scripts/install-deps.sh --with-integration)"
  done
}

# build_scenario FIXTURE SCENARIO_DIR OUT: a writable copy of the capture with the scenario's setup.sh applied,
# as tests/e2e/run_scenario.py builds it.
build_scenario() {
  local fixture scenario out=$3
  fixture=$(realpath "$1") scenario=$(realpath "$2")
  rm -rf "$out"
  mkdir -p "$(dirname "$out")"
  cp -a "$fixture" "$out"
  chmod -R u+w "$out"
  (cd "$out" && bash "$scenario/setup.sh") || { echo "FAIL: $scenario/setup.sh failed" >&2; exit 1; }
}

# free_port: a TCP port nothing listens on now (bound and released by the kernel's choice).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# wait_for SECONDS CMD...: polls CMD every 0.5 s until it succeeds; 1 when it never did.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  while ((SECONDS < deadline)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}
