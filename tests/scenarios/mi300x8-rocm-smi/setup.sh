#!/usr/bin/env bash
# The healthy 8×MI300X node with its driver layers asked: ROCm SMI (the stand-in librocm_smi64 serving the
# answers in the fixture's _driver/answers.json) lists all eight GPUs under the addresses, unique ids and render
# nodes sysfs gives them, with ECC on and no error counted.
true
