#!/usr/bin/env bash
# An NVSwitch logs a non-fatal SXid and then a fatal one (the line forms of real HGX nodes:
# tests/corpus/real/nvswitch_*). The switch is named by its PCI address; the fatal one is an error.
set -euo pipefail
cat >> _commands/dmesg.txt <<'LOG'
[ 5120.000101] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)
[ 5120.000140] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Severity 0 Engine instance 46 Sub-engine instance 00
[ 5188.250001] nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up
LOG
