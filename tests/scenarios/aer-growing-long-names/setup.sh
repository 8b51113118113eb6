#!/usr/bin/env bash
# As aer-growing, on a 4.19 kernel (or a distribution kernel built from it), whose aer_dev_* files name the errors
# in words with blanks (Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats): "Receiver Error 2",
# "Completion Timeout 0". 0000:00:06.0's receiver errors grow 2 -> 6 and its completion timeouts 1 -> 2 while
# gpudx watches (the later reading kept by gather under _samples/later).
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:06.0
later=_samples/later/sys/bus/pci/devices/0000:00:06.0
mkdir -p "$later"
uncor() {  # $1 = TOTAL line, $2 = Completion Timeout count
    printf 'Undefined 0\nData Link Protocol 0\nSurprise Down Error 0\nPoisoned TLP 0\nFlow Control Protocol 0\n'
    printf 'Completion Timeout %s\nCompleter Abort 0\nUnexpected Completion 0\nReceiver Overflow 0\n' "$2"
    printf 'Malformed TLP 0\nECRC 0\nUnsupported Request 0\nACS Violation 0\nUncorrectable Internal Error 0\n'
    printf 'MC Blocked TLP 0\nAtomicOp Egress Blocked 0\nTLP Prefix Blocked Error 0\n%s %s\n' "$1" "$2"
}
cor() {  # $1 = Receiver Error count
    printf 'Receiver Error %s\nBad TLP 0\nBad DLLP 0\nRELAY_NUM Rollover 0\nReplay Timer Timeout 0\n' "$1"
    printf 'Advisory Non-Fatal 0\nCorrected Internal Error 0\nHeader Log Overflow 0\nTOTAL_ERR_COR %s\n' "$1"
}
uncor TOTAL_ERR_FATAL 0 > "$dev/aer_dev_fatal"
uncor TOTAL_ERR_NONFATAL 1 > "$dev/aer_dev_nonfatal"
cor 2 > "$dev/aer_dev_correctable"
uncor TOTAL_ERR_FATAL 0 > "$later/aer_dev_fatal"
uncor TOTAL_ERR_NONFATAL 2 > "$later/aer_dev_nonfatal"
cor 6 > "$later/aer_dev_correctable"
