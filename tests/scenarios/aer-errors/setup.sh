#!/usr/bin/env bash
# 0000:00:06.0 logged uncorrectable PCIe errors: one fatal (data link protocol), two non-fatal (completion timeouts).
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:06.0
aer_file() {  # $1 = name of the TOTAL line, then NAME=COUNT pairs
    local total=$1; shift
    local sum=0
    for name in Undefined DLP SDES TLP FCP CmpltTO CmpltAbrt UnxCmplt RxOF MalfTLP ECRC UnsupReq ACSViol \
                UncorrIntErr BlockedTLP AtomicOpBlocked TLPBlockedErr PoisonTLPBlocked; do
        local n=0
        for kv in "$@"; do [[ ${kv%%=*} == "$name" ]] && n=${kv#*=}; done
        sum=$((sum + n))
        echo "$name $n"
    done
    echo "$total $sum"
}
aer_file TOTAL_ERR_FATAL DLP=1 > "$dev/aer_dev_fatal"
aer_file TOTAL_ERR_NONFATAL CmpltTO=2 > "$dev/aer_dev_nonfatal"
printf 'RxErr 0\nBadTLP 3\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 2\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 5\n' \
    > "$dev/aer_dev_correctable"
