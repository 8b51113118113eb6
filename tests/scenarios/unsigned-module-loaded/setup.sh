#!/usr/bin/env bash
# The kernel verifies module signatures but does not enforce them (no Secure Boot): the nvidia module, built
# without a signature, loaded and tainted the kernel. Nothing is broken now; with Secure Boot on, the same
# module would be refused.
set -euo pipefail
sed -i '/nvidia: loading out-of-tree module taints kernel/a [    0.481402] nvidia: module verification failed: signature and/or required key missing - tainting kernel' \
    _commands/dmesg.txt
grep -q 'module verification failed' _commands/dmesg.txt
