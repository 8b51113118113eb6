#!/usr/bin/env bash
# PCIe AER errors on GPU 1 (0000:00:07.0): a burst of corrected physical-layer errors, then an
# uncorrectable non-fatal transaction-layer error.
set -euo pipefail
cat >> _commands/dmesg.txt <<'LOG'
[  812.004410] pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:07.0
[  812.004432] nvidia 0000:00:07.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
[  812.004441] nvidia 0000:00:07.0:   device [10de:2335] error status/mask=00000001/0000e000
[  812.004449] nvidia 0000:00:07.0:    [ 0] RxErr                  (First)
[  813.117002] pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:07.0
[  813.117020] nvidia 0000:00:07.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
[  940.551230] pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:00:07.0
[  940.551260] nvidia 0000:00:07.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)
[  940.551268] nvidia 0000:00:07.0:   device [10de:2335] error status/mask=00004000/00400000
[  940.551275] nvidia 0000:00:07.0:    [14] CmpltTO                (First)
LOG
