#!/usr/bin/env bash
# 0000:00:07.0 stopped answering: config space reads all ones (sysfs still shows the vendor cached at boot),
# and the driver logged Xid 79.
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:07.0
head -c 256 /dev/zero | tr '\0' '\377' > "$dev/config"
echo "[ 5123.456789] NVRM: Xid (PCI:0000:00:07): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." \
    >> _commands/dmesg.txt
