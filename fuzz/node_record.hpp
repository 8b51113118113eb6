#pragma once
// The node record of tests/fixtures/h200x2, for the targets that hold parsed input against a node.
#include "rules/comparisons/baseline.hpp"

namespace gpudx::fuzz {

inline NodeRecord h200x2_record() {
    NodeRecord r;
    r.hostname = "gpu-a17";
    r.kernel_release = "6.18.44-fc-v657-gpu";
    r.driver_version = "580.159.04";
    r.driver_branch = "580";
    r.module_file = "/lib/modules/6.18.44-fc-v657-gpu/kernel/drivers/video/nvidia.ko";
    r.module_file_version = "580.159.04";
    r.libraries.push_back({"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "580.159.04"});
    r.cuda_driver_version = 13000;
    RecordedGpu a;
    a.uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    a.pci = "0000:00:06.0";
    a.slot = "6";
    a.model = "NVIDIA H200 NVL";
    a.vbios = "96.00.a5.00.1a";
    a.link_max = {32.0, 16};
    a.link_current = {32.0, 16};
    a.numa_node = 0;
    a.minor = 0;
    RecordedGpu b = a;
    b.uuid = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";
    b.pci = "0000:00:07.0";
    b.slot = "7";
    b.minor = 1;
    r.gpus = {a, b};
    return r;
}

}  // namespace gpudx::fuzz
