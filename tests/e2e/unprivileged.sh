#!/usr/bin/env bash
# unprivileged.sh CASE GPUDX SOURCE_DIR STANDINS_DIR: gpudx run as an unprivileged user (docs/reliability.md).
# Needs root to switch to `nobody`; exits 77 (skipped) otherwise. Everything the user needs is copied into a
# private directory it owns, since the checkout may sit where `nobody` cannot read (e.g. under /root).
#   scenarios  every tests/scenarios case through run_scenario.py, as nobody: same findings, same golden JSON
#   mode000    a capture with a file and a device directory of mode 000: reported as unreadable
#              (Permission denied) where they are, and no finding guessed from their absence
#   live       snapshot, diagnose and ids of this machine as nobody: never a usage error or a crash, and
#              every collector that worked for root and not for nobody says it was denied
set -uo pipefail
case=$1 gpudx=$2 src=$3 standins=$4

if [[ $(id -u) -ne 0 ]]; then echo "not root: cannot switch to an unprivileged user"; exit 77; fi
if ! getent passwd nobody >/dev/null; then echo "no user nobody"; exit 77; fi
group=$(id -gn nobody 2>/dev/null || echo nogroup)
if command -v setpriv >/dev/null; then
    as_nobody() { setpriv --reuid=nobody --regid="$group" --clear-groups --reset-env -- env PATH=/usr/bin:/bin "$@"; }
elif command -v runuser >/dev/null; then
    as_nobody() { runuser -u nobody -- env -i PATH=/usr/bin:/bin "$@"; }
else
    echo "neither setpriv nor runuser"; exit 77
fi

work=$(mktemp -d /tmp/gpudx-unprivileged.XXXXXX)
trap 'chmod -R u+rwX "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/lib"
cp "$gpudx" "$work/bin/gpudx"
cp -L "$standins"/*.so.[0-9]* "$work/lib/" 2>/dev/null || true
cp -r "$src/tests/fixtures/h200x2" "$work/fixture"
# Driver scenarios copy the stand-ins' recorded answers from here (run_scenario.py's STANDIN_SCENARIOS).
mkdir -p "$work/standins" && cp -r "$src/tests/standins/scenarios" "$work/standins/"
# Scenarios with a `base` file start from another fixture beside it; some run the generator that built it.
cp -r "$src/tests/fixtures/mi300x8" "$work/mi300x8"
cp "$src/tests/fixtures/make_mi300x8.py" "$work/"
# The ib-* scenarios copy the InfiniBand tree of real hosts from here (tests/scenarios/ib-common.sh).
cp -r "$src/tests/fixtures/infiniband-procfs" "$work/infiniband-procfs"
chown -R nobody:"$group" "$work"
chmod 0755 "$work"
g=$work/bin/gpudx
fail=0
check() { if ! "$@"; then fail=1; fi; }

case $case in
scenarios)
    cp -r "$src/tests/scenarios" "$src/tests/golden" "$work/"
    cp "$src/tests/e2e/run_scenario.py" "$work/bin/"
    chown -R nobody:"$group" "$work"
    n=0
    for dir in "$work"/scenarios/*/; do
        [[ -f $dir/setup.sh ]] || continue
        name=$(basename "$dir")
        n=$((n + 1))
        if ! out=$(as_nobody python3 "$work/bin/run_scenario.py" --gpudx "$g" --scenario "$dir" \
            --fixture "$work/fixture" --golden "$work/golden" --work "$work/trees" --standins "$work/lib" 2>&1); then
            echo "FAIL as nobody: scenario $name"
            echo "$out" | head -40
            fail=1
        fi
    done
    echo "$n scenarios run as nobody"
    ;;
mode000)
    info=proc/driver/nvidia/gpus/0000:00:07.0/information
    chmod 000 "$work/fixture/$info"
    chmod 000 "$work/fixture/sys/devices/pci0000:00/0000:00:06.0"
    as_nobody "$g" snapshot --root "$work/fixture" --no-driver >"$work/snapshot.json" 2>"$work/stderr"
    rc=$?
    as_nobody "$g" diagnose --root "$work/fixture" --no-driver --format json >"$work/diagnose.json" 2>>"$work/stderr"
    drc=$?
    check python3 - "$work/snapshot.json" "$work/diagnose.json" "$rc" "$drc" "$info" <<'PY'
import json, sys
snap_path, diag_path, rc, drc, info = sys.argv[1:6]
snap, diag = json.load(open(snap_path)), json.load(open(diag_path))
problems = {c["name"]: c["problems"] for c in snap["collectors"]}
bad = []
def denied(collector, path_part):
    return any(path_part in p["path"] and "Permission denied" in p["message"] for p in problems.get(collector, []))
if rc != "0": bad.append(f"snapshot exited {rc}")
if not denied("module", info): bad.append(f"module layer does not say {info} was denied: {problems.get('module')}")
if not denied("pcie", "0000:00:06.0/"): bad.append(f"pcie layer does not say 0000:00:06.0 was denied: {problems.get('pcie')}")
ids = {f["id"] for f in diag["findings"]}
for guessed in ("module.gpu_not_in_driver", "pcie.no_gpu"):
    if guessed in ids: bad.append(f"diagnose guessed {guessed} from a file it could not read")
if int(drc) != diag["exit_code"]: bad.append(f"diagnose exited {drc}, its report says {diag['exit_code']}")
for b in bad: print("FAIL:", b)
print("mode 000 files reported as denied" if not bad else "")
sys.exit(1 if bad else 0)
PY
    ;;
live)
    for cmd in "snapshot --no-driver" "diagnose --no-driver --format json" "ids --no-driver --format json"; do
        name=${cmd%% *}
        "$g" $cmd >"$work/root-$name.json" 2>/dev/null
        as_nobody "$g" $cmd >"$work/nobody-$name.json" 2>"$work/nobody-$name.err"
        rc=$?
        if [[ $rc -eq 64 || $rc -gt 3 ]]; then
            echo "FAIL: gpudx $cmd as nobody exited $rc"; cat "$work/nobody-$name.err"; fail=1
        fi
    done
    check python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
bad = []
docs = {}
for who in ("root", "nobody"):
    for name in ("snapshot", "diagnose", "ids"):
        try:
            docs[who, name] = json.load(open(f"{work}/{who}-{name}.json"))
        except ValueError as e:
            bad.append(f"{name} as {who} is not valid JSON: {e}")
if not bad:
    root = {c["name"]: c for c in docs["root", "snapshot"]["collectors"]}
    for c in docs["nobody", "snapshot"]["collectors"]:
        r = root.get(c["name"])
        if not r or r["state"] != "ok" or c["state"] == "ok":
            continue
        # What root could read and nobody could not is said, with the reason, not left out.
        text = c["message"] + " ".join(p["message"] for p in c["problems"])
        if not any(w in text for w in ("Permission denied", "Operation not permitted", "not permitted", "denied")):
            bad.append(f"collector {c['name']}: {c['state']} as nobody without saying why: {c['message']!r}")
    kl = {c["name"]: c for c in docs["nobody", "snapshot"]["collectors"]}.get("kernel_log")
    print("kernel_log as nobody:", kl["state"], kl["message"][:120])
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
    ;;
*) echo "unknown case $case"; exit 64 ;;
esac
exit $fail
