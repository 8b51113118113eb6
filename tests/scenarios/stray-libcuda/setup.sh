#!/usr/bin/env bash
# A vendor application's installer copied the libcuda.so.1 of its build machine (driver 550.54.15) into
# /usr/local/lib. ldconfig has not run since, so the loader still picks the driver's own copy; the stray
# one waits for the next `ldconfig` (or a job's LD_LIBRARY_PATH) to shadow the real driver.
set -euo pipefail
mkdir -p usr/local/lib
: > usr/local/lib/libcuda.so.550.54.15
ln -s libcuda.so.550.54.15 usr/local/lib/libcuda.so.1
