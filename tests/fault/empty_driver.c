/* A library named like libcuda.so.1 / libnvidia-ml.so.1 that exports none of their symbols: what a broken
 * install, a wrong-architecture stub or a renamed file looks like to gpudx. */
int gpudx_fault_empty_driver_marker(void) { return 0; }
