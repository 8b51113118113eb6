#!/usr/bin/env bash
# The 8×MI300X node as tests/fixtures/make_mi300x8.py writes it (built from the documented formats, no capture of
# real hardware): amdgpu 6.8.5, ROCm 6.2.0, every GPU in the KFD topology with its render node. Healthy.
true
