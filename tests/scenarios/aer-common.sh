#!/usr/bin/env bash
# Shared by aer-growing and aer-history: 0000:00:06.0's AER counters as a 6.x kernel writes them, read twice (the
# later reading kept by gather under _samples/later, docs/capture-format.md).
#   aer-common.sh NONFATAL_FIRST BADTLP_FIRST NONFATAL_LATER BADTLP_LATER
# NONFATAL: the completion timeouts (CmpltTO); BADTLP: the correctable Bad TLPs (2 advisory non-fatal beside them).
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:06.0
later=_samples/later/sys/bus/pci/devices/0000:00:06.0
mkdir -p "$later"
uncor() {  # $1 = TOTAL line, $2 = CmpltTO count: the names and order of a 6.x kernel's aer_dev_* files
    local n=0
    for name in Undefined DLP SDES TLP FCP CmpltTO CmpltAbrt UnxCmplt RxOF MalfTLP ECRC UnsupReq ACSViol \
                UncorrIntErr BlockedTLP AtomicOpBlocked TLPBlockedErr PoisonTLPBlocked; do
        [[ $name == CmpltTO ]] && n=$2 || n=0
        echo "$name $n"
    done
    echo "$1 $2"
}
cor() {  # $1 = BadTLP count
    printf 'RxErr 0\nBadTLP %s\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 2\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR %s\n' "$1" $(($1 + 2))
}
uncor TOTAL_ERR_FATAL 0 > "$dev/aer_dev_fatal"
uncor TOTAL_ERR_NONFATAL "$1" > "$dev/aer_dev_nonfatal"
cor "$2" > "$dev/aer_dev_correctable"
uncor TOTAL_ERR_FATAL 0 > "$later/aer_dev_fatal"
uncor TOTAL_ERR_NONFATAL "$3" > "$later/aer_dev_nonfatal"
cor "$4" > "$later/aer_dev_correctable"
