# nvidia_uvm is loaded but /dev/nvidia-uvm was never created (no nvidia-modprobe -u at boot):
# nvidia-smi works, cuInit fails.
set -euo pipefail
rm -f dev/nvidia-uvm.devnode dev/nvidia-uvm-tools.devnode
