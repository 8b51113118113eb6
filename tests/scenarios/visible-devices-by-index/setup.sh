# A job pinned to GPUs by index, in reverse, without CUDA_DEVICE_ORDER=PCI_BUS_ID.
set -euo pipefail
printf 'CUDA_VISIBLE_DEVICES=1,0\nPATH=/usr/bin:/bin\n' > _commands/environment.txt
