#!/usr/bin/env bash
# A stand-in for Slurm's scontrol, for tests of `gpudx diagnose --drain` without a cluster. It keeps one
# node's state in files under $FAKE_SCONTROL_STATE: node (its name), state (e.g. IDLE), reason, and appends
# every call to calls. A file `fail` makes every call fail with its text; a file `hang` makes it hang; a file
# `hang_after_update` makes an update take effect, then hang (its PID in `hanging_pid`): a caller killed then
# has changed the node without hearing so.
set -u
d=${FAKE_SCONTROL_STATE:?FAKE_SCONTROL_STATE must name the fake scontrol state directory}
printf '%s\n' "$*" >> "$d/calls"
if [[ -f $d/hang ]]; then sleep 60; fi
if [[ -f $d/fail ]]; then cat "$d/fail" >&2; exit 1; fi
node=$(cat "$d/node" 2>/dev/null || echo node17)
state=$(cat "$d/state" 2>/dev/null || echo IDLE)
reason=$(cat "$d/reason" 2>/dev/null || true)

if [[ ${1:-} == show && ${2:-} == node ]]; then
  if [[ ${3:-} != "$node" ]]; then echo "Node ${3:-} not found"; exit 1; fi
  # The layout of Slurm 22.05's `scontrol show node NAME`.
  echo "NodeName=$node Arch=x86_64 CoresPerSocket=1 "
  echo "   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.00"
  echo "   NodeAddr=127.0.0.1 NodeHostName=$node Version=22.05.8"
  echo "   State=$state ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A"
  echo "   Partitions=debug "
  if [[ -n $reason ]]; then echo "   Reason=$reason [root@2026-11-30T10:06:26]"; fi
  exit 0
fi

if [[ ${1:-} == update ]]; then
  target="" new="" new_reason=""
  for arg in "${@:2}"; do
    case ${arg,,} in
      nodename=*) target=${arg#*=} ;;
      state=drain) new=drain ;;
      state=resume) new=resume ;;
      reason=*) new_reason=${arg#*=} ;;
      *) echo "scontrol: error: Invalid input: $arg"; exit 1 ;;
    esac
  done
  if [[ $target != "$node" ]]; then echo "slurm_update error: Invalid node name specified"; exit 1; fi
  base=${state%%+*}
  case $new in
    drain)
      if [[ -z $new_reason ]]; then echo "You must specify a reason when DOWNING or DRAINING a node. Request denied"; exit 1; fi
      echo "$base+DRAIN" > "$d/state"; printf '%s' "$new_reason" > "$d/reason" ;;
    resume)
      if [[ $state != *DRAIN* && $base != DOWN ]]; then echo "slurm_update error: Invalid node state specified"; exit 1; fi
      [[ $base == DOWN ]] && base=IDLE
      echo "$base" > "$d/state"; rm -f "$d/reason" ;;
    *) echo "scontrol: error: no state given"; exit 1 ;;
  esac
  if [[ -f $d/hang_after_update ]]; then echo $$ > "$d/hanging_pid"; sleep 60; fi
  exit 0
fi
echo "scontrol: fake: unsupported command: $*" >&2
exit 1
