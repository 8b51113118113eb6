#!/usr/bin/env bash
# Every output is safe (docs/reliability.md, "Files gpudx writes" and "Every output format escapes what it
# prints"): what gpudx prints, writes and reads through pipes, driven through the shipped binary.
#
#   output_safety.sh CASE GPUDX SOURCE_DIR WORK
#
#   terminal_controls  text from logs and input files reaches no text output with its terminal controls
#                      (ESC, OSC, BEL, CR): explain, events, status, xid, diagnose
#   stdout_errors      a failed write to standard output is exit 74 with one message; a closed pipe ends quietly
#   output_links       -o FILE refuses a link another user planted in a sticky world-writable directory
#   gather_faults      gather onto a full filesystem fails (74) naming the file and leaves no temporary folder;
#                      SIGINT, SIGTERM and SIGKILL leave none either; `gather -` writes the archive to stdout
#   kernel_log_pipes   --kernel-log and explain read a pipe, a FIFO, /dev/stdin and a socket on stdin
# Exit 77 (skipped) where a case needs root and is not run as root.
set -uo pipefail
case=$1 gpudx=$2 src=$3 work=$4/$1
rm -rf "$work" && mkdir -p "$work"
fixture=$src/tests/fixtures/h200x2

fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || { echo "SKIP: $case needs root" >&2; exit 77; }; }

# An Xid whose process name would set the terminal's title (OSC 0 ... BEL), clear the screen, and return the
# carriage to overwrite the line: what an attack put in a process name.
hostile_name=$'\e]0;owned\a\e[2J\r'
xid_line="NVRM: Xid (PCI:0000:00:06): 79, pid=4242, name=${hostile_name}x, GPU has fallen off the bus."
unknown_line="NVRM: something gpudx has never seen ${hostile_name}here"

# no_controls WHAT FILE: FILE holds no C0 control but the newline, no DEL and no C1 control (U+0080..U+009F).
no_controls() {
  python3 - "$1" "$2" <<'PY' || exit 1
import sys
what, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
text = data.decode("utf-8", "replace")
bad = [hex(ord(c)) for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
if bad:
    print(f"FAIL: {what} printed control characters {sorted(set(bad))}: {data[:600]!r}", file=sys.stderr)
    sys.exit(1)
if not text.strip():
    print(f"FAIL: {what} printed nothing", file=sys.stderr)
    sys.exit(1)
PY
}

# fake_agent PORT_FILE BODY_FILE...: an HTTP server on 127.0.0.1 answering every GET with the next BODY_FILE's
# bytes (the last one again when they run out), its port written to PORT_FILE; $fake_pid.
fake_agent() {
  local port_file=$1
  shift
  python3 - "$port_file" "$@" <<'PY' &
import http.server, sys
port_file, bodies = sys.argv[1], sys.argv[2:]
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = open(bodies[0] if len(bodies) == 1 else bodies.pop(0), "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if body.startswith(b"{") else "text/plain")
        self.send_header("X-Gpudx-Exit-Code", "1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
PY
  fake_pid=$!
  for _ in $(seq 200); do [[ -s $port_file ]] && return; sleep 0.05; done
  fail "the fake agent did not start"
}

case $case in
terminal_controls)
  # explain: a recognised Xid (its message quotes the line) and a line it does not recognise (printed back).
  "$gpudx" explain --text "$xid_line" > "$work/explain-xid.txt"; rc=$?
  [[ $rc == 1 ]] || fail "explain of an Xid 79 exited $rc"
  no_controls "explain (Xid line)" "$work/explain-xid.txt"
  printf '%s\n' "$unknown_line" > "$work/unknown.log"
  "$gpudx" explain "$work/unknown.log" > "$work/explain-unknown.txt"
  grep -q "does not recognise" "$work/explain-unknown.txt" || fail "explain did not list the unknown line: $(cat "$work/explain-unknown.txt")"
  no_controls "explain (unrecognised line)" "$work/explain-unknown.txt"

  # diagnose and its one-line formats over the same line in a kernel log.
  printf '[  100.000000] %s\n' "$xid_line" > "$work/kern.log"
  for format in text slurm nagios npd; do
    "$gpudx" diagnose --root "$fixture" --no-driver --kernel-log "$work/kern.log" --format $format -v \
      > "$work/diagnose-$format.txt"
    no_controls "diagnose --format $format" "$work/diagnose-$format.txt"
  done

  # events: the agent's event list (a message holding the line), rendered by the client.
  python3 - "$xid_line" > "$work/events.json" <<'PY'
import json, sys
print(json.dumps({"events": [{"id": 1, "time_ms": 1764633600000, "kind": "appeared", "severity": "error",
                              "finding": "kernel_log.xid", "gpu": {"uuid": "GPU-1\u001b]0;t\u0007", "pci": "0000:00:06.0"},
                              "message": sys.argv[1]}]}))
PY
  # status: an agent (or anything answering on its port) whose text report carries the same bytes.
  printf 'gpudx diagnose — node\n%s\n' "$xid_line" > "$work/status.txt"
  fake_agent "$work/port" "$work/events.json" "$work/status.txt"
  "$gpudx" events --url "http://127.0.0.1:$(cat "$work/port")" > "$work/events.txt"; rc=$?
  [[ $rc == 0 ]] || fail "events exited $rc"
  no_controls "events" "$work/events.txt"
  "$gpudx" status --url "http://127.0.0.1:$(cat "$work/port")" --no-fallback > "$work/status-out.txt"
  no_controls "status (text from an agent)" "$work/status-out.txt"
  kill "$fake_pid"

  # xid: a site policy's own words.
  printf 'version = "site\\u001b]0;t\\u0007"\n[xid.79]\nseverity = "error"\nmeaning = "gone\\u001b[2J\\r"\naction = "reset"\n' \
    > "$work/policy.toml"
  "$gpudx" xid 79 --xid-policy "$work/policy.toml" > "$work/xid.txt" || fail "xid with a site policy: exit $?"
  no_controls "xid" "$work/xid.txt"
  "$gpudx" xid --list --xid-policy "$work/policy.toml" > "$work/xid-list.txt" || fail "xid --list: exit $?"
  no_controls "xid --list" "$work/xid-list.txt"

  # JSON keeps the bytes, escaped by JSON's own rules.
  "$gpudx" explain --text "$xid_line" --format json > "$work/explain.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert "\x1b]0;owned\x07" in j["findings"][0]["message"], j' \
    "$work/explain.json" || fail "explain --format json lost the original bytes"
  no_controls "explain --format json" "$work/explain.json"
  ;;

stdout_errors)
  [[ -w /dev/full ]] || { echo "SKIP: no /dev/full" >&2; exit 77; }
  # Each command's output to a full device: exit 74 and one line naming standard output.
  check_full() {
    local what=$1
    shift
    "$@" > /dev/full 2> "$work/err"; local rc=$?
    [[ $rc == 74 ]] || fail "$what > /dev/full exited $rc: $(cat "$work/err")"
    grep -q "standard output" "$work/err" || fail "$what > /dev/full: no message naming standard output: $(cat "$work/err")"
    [[ $(wc -l < "$work/err") == 1 ]] || fail "$what > /dev/full: more than one line: $(cat "$work/err")"
  }
  check_full "rules" "$gpudx" rules
  check_full "rules --format json" "$gpudx" rules --format json
  check_full "xid --list" "$gpudx" xid --list
  check_full "explain" "$gpudx" explain --text "$xid_line"
  check_full "diagnose" "$gpudx" diagnose --root "$fixture" --no-driver
  check_full "diagnose --format prom" "$gpudx" diagnose --root "$fixture" --no-driver --format prom
  check_full "snapshot" "$gpudx" snapshot --root "$fixture" --no-driver
  check_full "ids" "$gpudx" ids --root "$fixture" --no-driver
  check_full "matrix validate" "$gpudx" matrix validate --matrix "$src/examples/matrix.toml"
  check_full "--help" "$gpudx" --help
  check_full "diagnose --help" "$gpudx" diagnose --help
  check_full "--version" "$gpudx" --version
  # -o /dev/full (a device, written in place) fails the same way.
  "$gpudx" rules -o /dev/full 2> "$work/err"; rc=$?
  [[ $rc == 74 ]] || fail "rules -o /dev/full exited $rc: $(cat "$work/err")"
  grep -q "/dev/full" "$work/err" || fail "rules -o /dev/full: the message does not name the file: $(cat "$work/err")"

  # Standard output closed: an error (74), never a report written into a file gpudx opened on descriptor 1.
  "$gpudx" diagnose --root "$fixture" --no-driver >&- 2> "$work/err"; rc=$?
  [[ $rc == 74 ]] || fail "diagnose with stdout closed exited $rc: $(cat "$work/err")"
  "$gpudx" rules -o "$work/rules.txt" >&- 2> "$work/err"; rc=$?
  [[ $rc == 0 ]] || fail "rules -o FILE with stdout closed exited $rc: $(cat "$work/err")"
  grep -q "gpudx" "$work/rules.txt" || fail "rules -o FILE with stdout closed wrote: $(head -c 300 "$work/rules.txt")"
  # Standard input closed: explain reads nothing and says so, naming stdin.
  "$gpudx" explain <&- > /dev/null 2> "$work/err"; rc=$?
  [[ $rc == 64 ]] && grep -q "standard input" "$work/err" || fail "explain with stdin closed: exit $rc: $(cat "$work/err")"

  # A reader that stopped reading (`| head`): no message, whether SIGPIPE kills gpudx or is ignored (as a
  # parent that ignores it leaves it) and the write fails with EPIPE.
  python3 - "$gpudx" <<'PY' || exit 1
import os, signal, subprocess, sys
gpudx = sys.argv[1]
for ignore in (False, True):
    r, w = os.pipe()
    os.close(r)  # the reader is gone before gpudx writes
    pre = (lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN)) if ignore else None
    p = subprocess.run([gpudx, "xid", "--list"], stdout=w, stderr=subprocess.PIPE, preexec_fn=pre,
                       restore_signals=not ignore)
    os.close(w)
    if p.stderr:
        sys.exit(f"FAIL: xid --list into a closed pipe (SIGPIPE {'ignored' if ignore else 'default'}) printed {p.stderr[:300]!r}")
    if p.returncode not in (-signal.SIGPIPE, 128 + signal.SIGPIPE):
        sys.exit(f"FAIL: xid --list into a closed pipe (SIGPIPE {'ignored' if ignore else 'default'}) exited {p.returncode}")
print("closed pipe: quiet, ended as by SIGPIPE")
PY
  out=$("$gpudx" xid --list 2> "$work/err" | head -1)
  [[ $out == "Xid policy"* && ! -s $work/err ]] || fail "xid --list | head -1: '$out', stderr: $(cat "$work/err")"
  ;;

output_links)
  need_root
  # A sticky world-writable directory (like /tmp) where another user planted a link to a root-only file.
  shared=$work/shared
  mkdir -p "$shared" && chmod 1777 "$shared"
  printf 'secret\n' > "$work/root-only" && chmod 600 "$work/root-only"
  ln -s "$work/root-only" "$shared/report.txt" && chown -h nobody "$shared/report.txt"
  "$gpudx" rules -o "$shared/report.txt" 2> "$work/err"; rc=$?
  [[ $rc == 64 ]] || fail "-o through another user's link in a sticky directory exited $rc"
  grep -q "report.txt" "$work/err" && grep -q "sticky" "$work/err" || fail "the refusal does not say why: $(cat "$work/err")"
  [[ $(cat "$work/root-only") == secret ]] || fail "the root-only file was overwritten"
  [[ $(stat -c %a "$work/root-only") == 600 ]] || fail "the root-only file's mode changed to $(stat -c %a "$work/root-only")"
  # The caller's own link there is followed, and the file it names keeps its mode.
  chown -h root "$shared/report.txt"
  "$gpudx" rules -o "$shared/report.txt" || fail "-o through the caller's own link exited $?"
  grep -q "gpudx" "$work/root-only" || fail "the caller's own link was not followed"
  [[ $(stat -c %a "$work/root-only") == 600 ]] || fail "the replaced file's mode widened to $(stat -c %a "$work/root-only")"
  ;;

gather_faults)
  # `gather -`: the archive on standard output, no folder named "-".
  (cd "$work" && "$gpudx" gather - --no-driver --no-commands 2> "$work/stdout-gather.err" > "$work/stdout.tar.gz")
  rc=$?
  [[ $rc == 0 ]] || fail "gather - exited $rc: $(cat "$work/stdout-gather.err")"
  [[ ! -e $work/- ]] || fail "gather - made a folder named -"
  tar -tzf "$work/stdout.tar.gz" > "$work/stdout.list" || fail "gather - wrote no archive tar can read"
  grep -q '_commands/README' "$work/stdout.list" || fail "gather - wrote an archive without the capture"
  # Not onto a terminal, as gzip refuses.
  python3 - "$gpudx" <<'PY' || exit 1
import os, pty, subprocess, sys
main, tty = pty.openpty()
p = subprocess.run([sys.argv[1], "gather", "-", "--no-driver", "--no-commands"], stdout=tty, stderr=subprocess.PIPE,
                   timeout=60)
os.close(tty)
os.close(main)
if p.returncode != 64 or b"terminal" not in p.stderr:
    sys.exit(f"FAIL: gather - onto a terminal: exit {p.returncode}: {p.stderr[:300]!r}")
PY
  # The archive to a full device: 74, naming it.
  "$gpudx" gather - --no-driver --no-commands > /dev/full 2> "$work/err"; rc=$?
  [[ $rc == 74 ]] || fail "gather - > /dev/full exited $rc: $(cat "$work/err")"
  [[ $(ls -a "$work" | grep -c gpudx-gather) == 0 ]] || fail "gather left a temporary folder: $(ls -a "$work")"

  # Killed: SIGINT to its process group (as Ctrl-C sends it), SIGTERM and SIGKILL to gpudx alone, while it waits
  # on a command that hangs. No temporary folder may stay, beside the output or in /tmp.
  mkdir -p "$work/bin"
  # A hanging nvidia-smi that says who it is, so that the test ends it (and only it) afterwards.
  printf '#!/bin/sh\necho $$ >> "%s/hung-pids"\nexec sleep 60\n' "$work" > "$work/bin/nvidia-smi"
  chmod +x "$work/bin/nvidia-smi"
  for signal in INT TERM KILL; do
    out=$work/killed-$signal
    mkdir -p "$out"
    ls -d /tmp/gpudx-gather-* 2>/dev/null | sort > "$work/tmp-before"
    # Job control on: the job gets a process group of its own, and SIGINT at its default (a script's background
    # jobs otherwise start with SIGINT ignored).
    set -m
    PATH=$work/bin:$PATH "$gpudx" gather "$out/capture.tar.gz" --no-driver 2>/dev/null &
    pid=$!
    set +m
    # Until the capture has started writing (its folder exists), then a moment into the hanging command.
    for _ in $(seq 400); do
      [[ -n $(ls -A "$out") || -n $(comm -13 "$work/tmp-before" <(ls -d /tmp/gpudx-gather-* 2>/dev/null | sort)) ]] && break
      sleep 0.05
    done
    sleep 0.5
    if [[ $signal == INT ]]; then kill -INT -- "-$pid"; else kill -"$signal" "$pid"; fi
    wait "$pid" 2>/dev/null
    left=
    for _ in $(seq 100); do
      left=$(ls -A "$out"; comm -13 "$work/tmp-before" <(ls -d /tmp/gpudx-gather-* 2>/dev/null | sort))
      [[ -z $left ]] && break
      sleep 0.1
    done
    [[ -f $work/hung-pids ]] && { xargs kill -KILL < "$work/hung-pids" 2>/dev/null; rm -f "$work/hung-pids"; }
    [[ -z $left ]] || fail "gather killed by SIG$signal left: $left"
  done

  # A full filesystem (a 1 MiB tmpfs): 74 and the file named, for the unpacked directory and the archive.
  need_root
  mnt=$work/full
  mkdir -p "$mnt"
  mount -t tmpfs -o size=1m gpudx-test-full "$mnt" || { echo "SKIP: cannot mount a tmpfs" >&2; exit 77; }
  trap 'umount "$mnt"' EXIT
  for target in "--dir $mnt/capture" "$mnt/capture.tar.gz"; do
    # shellcheck disable=SC2086
    "$gpudx" gather $target --no-driver --no-commands 2> "$work/err"; rc=$?
    [[ $rc == 74 ]] || fail "gather $target onto a full filesystem exited $rc: $(cat "$work/err")"
    grep -q "$mnt/" "$work/err" && grep -q "No space left on device" "$work/err" ||
      fail "gather $target onto a full filesystem: the message does not name the file: $(cat "$work/err")"
    [[ -z $(ls -A "$mnt") ]] || fail "gather $target onto a full filesystem left: $(ls -A "$mnt")"
  done
  ;;

kernel_log_pipes)
  printf '[  100.000000] %s\n' "NVRM: Xid (PCI:0000:00:06): 79, pid=4242, name=python3, GPU has fallen off the bus." \
    > "$work/kern.log"
  # read_kernel_log WHAT DIAGNOSE_OUTPUT: the Xid was read and judged.
  read_kernel_log() {
    grep -q '"kernel_log.xid' "$2" || grep -q 'xid' "$2" || fail "$1: the Xid was not read: $(head -c 600 "$2")"
  }
  diagnose=("$gpudx" diagnose --root "$fixture" --no-driver --format json)
  "${diagnose[@]}" --kernel-log /dev/stdin < "$work/kern.log" > "$work/regular-stdin.json" 2> "$work/err"
  read_kernel_log "--kernel-log /dev/stdin (a file)" "$work/regular-stdin.json"
  cat "$work/kern.log" | "${diagnose[@]}" --kernel-log /dev/stdin > "$work/pipe.json" 2> "$work/err"
  read_kernel_log "--kernel-log /dev/stdin (a pipe): $(cat "$work/err")" "$work/pipe.json"
  cat "$work/kern.log" | "${diagnose[@]}" --kernel-log - > "$work/dash.json" 2> "$work/err"
  read_kernel_log "--kernel-log - (a pipe): $(cat "$work/err")" "$work/dash.json"
  "${diagnose[@]}" --kernel-log <(cat "$work/kern.log") > "$work/procsub.json" 2> "$work/err"
  read_kernel_log "--kernel-log <(...): $(cat "$work/err")" "$work/procsub.json"
  mkfifo "$work/fifo"
  (cat "$work/kern.log" > "$work/fifo" &)
  "${diagnose[@]}" --kernel-log "$work/fifo" > "$work/fifo.json" 2> "$work/err"
  read_kernel_log "--kernel-log FIFO: $(cat "$work/err")" "$work/fifo.json"
  # A directory or a missing file is still a usage error that names it.
  "${diagnose[@]}" --kernel-log "$work" > /dev/null 2> "$work/err"; rc=$?
  [[ $rc == 64 ]] && grep -q "$work" "$work/err" || fail "--kernel-log DIRECTORY: exit $rc: $(cat "$work/err")"
  "${diagnose[@]}" --kernel-log "$work/missing" > /dev/null 2> "$work/err"; rc=$?
  [[ $rc == 64 ]] && grep -q "missing" "$work/err" || fail "--kernel-log MISSING: exit $rc: $(cat "$work/err")"

  # explain FILE: a FIFO, /dev/stdin as a pipe, and /dev/stdin as a socket (as some job runners hand it over).
  (cat "$work/kern.log" > "$work/fifo" &)
  "$gpudx" explain "$work/fifo" > "$work/explain-fifo.txt" 2> "$work/err"; rc=$?
  [[ $rc == 1 ]] && grep -q "Xid" "$work/explain-fifo.txt" || fail "explain FIFO: exit $rc: $(cat "$work/err")"
  cat "$work/kern.log" | "$gpudx" explain /dev/stdin > "$work/explain-stdin.txt" 2> "$work/err"; rc=$?
  [[ $rc == 1 ]] || fail "explain /dev/stdin (a pipe): exit $rc: $(cat "$work/err")"
  python3 - "$gpudx" "$work/kern.log" "$fixture" <<'PY' || exit 1
import socket, subprocess, sys, threading
gpudx, log, fixture = sys.argv[1:4]
for args in (["explain", "/dev/stdin"],
             ["diagnose", "--root", fixture, "--no-driver", "--format", "json", "--kernel-log", "/dev/stdin"]):
    ours, theirs = socket.socketpair()
    def feed():
        ours.sendall(open(log, "rb").read())
        ours.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=feed)
    t.start()
    p = subprocess.run([gpudx] + args, stdin=theirs, capture_output=True)
    t.join()
    theirs.close()
    ours.close()
    if b"Xid" not in p.stdout and b"xid" not in p.stdout:
        sys.exit(f"FAIL: {' '.join(args)} with a socket on stdin: exit {p.returncode}: {p.stderr[:300]!r}")
print("a socket on stdin is read")
PY
  ;;

*) fail "unknown case $case" ;;
esac
echo "ok: $case"
