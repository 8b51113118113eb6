// Stands in for libgpudx_shim.so in the checkpoint tests: only its name in /proc/PID/maps matters.
int gpudx_fake_shim_marker(void) { return 0; }
