// driver.* rules over hand-built snapshots shaped like the h200x2 capture.
#include <gtest/gtest.h>

#include <algorithm>

#include "checks/check_context.hpp"

using namespace gpudx;

namespace gpudx {
void check_driver(const CheckContext&, std::vector<Finding>&);
}

namespace {

const char* kUuid0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const char* kUuid1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

Snapshot h200_like() {
    Snapshot s;
    for (auto [addr, uuid, minor] : {std::tuple{"0000:00:06.0", kUuid0, 0u}, std::tuple{"0000:00:07.0", kUuid1, 1u}}) {
        PciDevice d;
        d.address = addr;
        d.vendor_id = 0x10de;
        d.class_code = 0x030200;
        d.is_gpu = true;
        s.pcie.devices.push_back(d);
        s.pcie.gpus.push_back(addr);
        NvidiaProcGpu g;
        g.address = addr;
        g.uuid = uuid;
        g.minor = minor;
        g.model = "NVIDIA H200";
        s.module.nvidia_gpus.push_back(g);
        NvmlDevice n;
        n.index = minor;
        n.uuid = uuid;
        n.bus_id = std::string("0000") + addr;
        n.pci = addr;
        n.minor = minor;
        n.persistence_mode = true;
        s.nvml.devices.push_back(n);
        CudaDevice c;
        c.ordinal = static_cast<int>(minor);
        c.uuid = uuid;
        c.bus_id = addr;
        c.pci = addr;
        s.cuda.caller.devices.push_back(c);
    }
    LoadedModule nvidia;
    nvidia.name = "nvidia";
    nvidia.state = "Live";
    s.module.loaded.push_back(nvidia);
    s.module.nvidia_driver_version = "580.159.04";
    s.nvml.driver_version = "580.159.04";
    s.nvml.init_result = 0;
    s.nvml.device_count = 2;
    s.cuda.caller.init_result = 0;
    s.cuda.caller.device_count = 2;
    s.cuda.caller.cuda_visible_devices = "<unset>";
    s.cuda.caller.cuda_device_order = "<unset>";
    for (auto name : {"pcie", "module", "devices", "nvml", "cuda"}) {
        CollectorStatus st;
        st.name = name;
        st.state = CollectorState::ok;
        s.collectors.push_back(st);
    }
    return s;
}

std::vector<Finding> run(const Snapshot& s) {
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_driver(ctx, out);
    return out;
}

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    auto it = std::find_if(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
    return it == fs.end() ? nullptr : &*it;
}

}  // namespace

TEST(DriverChecks, HealthyNodeHasNoFindings) { EXPECT_TRUE(run(h200_like()).empty()); }

TEST(DriverChecks, NvmlMissingGpuNamesTheAddressAndUuid) {
    auto s = h200_like();
    s.nvml.devices.pop_back();
    s.nvml.device_count = 1;
    auto fs = run(s);
    auto* f = find(fs, "driver.nvml_missing_gpu");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("NVML sees 1 GPU(s), PCIe has 2; missing: 0000:00:07.0"), std::string::npos) << f->message;
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].uuid, kUuid1);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:07.0");
}

TEST(DriverChecks, CuInitNoDeviceWithModuleUnloadedBlamesTheModuleLayer) {
    auto s = h200_like();
    s.module.loaded.clear();
    s.cuda.caller.devices.clear();
    s.cuda.caller.device_count.reset();
    s.cuda.caller.init_result = 100;
    s.cuda.caller.init_name = "CUDA_ERROR_NO_DEVICE";
    s.cuda.caller.init_meaning = "no CUDA-capable GPU visible";
    auto fs = run(s);
    auto* f = find(fs, "driver.cuda_init_failed");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("the module layer is the cause"), std::string::npos) << f->message;
    EXPECT_EQ(f->layer, Layer::driver);
}

TEST(DriverChecks, CuInitNoDeviceUnderAVisibleDevicesListIsAnAllocationFault) {
    auto s = h200_like();
    s.cuda.caller.devices.clear();
    s.cuda.caller.init_result = 100;
    s.cuda.caller.init_name = "CUDA_ERROR_NO_DEVICE";
    s.cuda.caller.cuda_visible_devices = "GPU-deadbeef";
    auto fs = run(s);
    auto* f = find(fs, "driver.cuda_init_failed");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->layer, Layer::allocation);
    EXPECT_NE(f->message.find("CUDA_VISIBLE_DEVICES=GPU-deadbeef hides every GPU"), std::string::npos) << f->message;
}

TEST(DriverChecks, SystemDriverMismatchPointsAtTheLibraries) {
    auto s = h200_like();
    s.cuda.caller.init_result = 803;
    s.cuda.caller.init_name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    s.cuda.library_path = "/usr/local/nvidia/lib64/libcuda.so.1";
    auto findings = run(s);
    auto* f = find(findings, "driver.cuda_init_failed");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->layer, Layer::libraries);
}

TEST(DriverChecks, TimedOutCallIsUnresponsiveAndNamesTheCall) {
    auto s = h200_like();
    s.nvml.timed_out_call = "nvmlDeviceGetUUID(1)";
    s.collectors[3].state = CollectorState::timed_out;
    s.collectors[3].message = "no answer within 500 ms";
    auto fs = run(s);
    auto* f = find(fs, "driver.unresponsive");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("nvmlDeviceGetUUID(1) never returned"), std::string::npos);
    EXPECT_EQ(f->evidence[0].source, "nvmlDeviceGetUUID(1)");
}

TEST(DriverChecks, UserSpaceVersionDifferentFromKernelIsALibrariesFinding) {
    auto s = h200_like();
    s.nvml.driver_version = "570.86.15";
    auto findings = run(s);
    auto* f = find(findings, "driver.version_mismatch");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->layer, Layer::libraries);
    EXPECT_NE(f->message.find("570.86.15"), std::string::npos);
    EXPECT_NE(f->message.find("580.159.04"), std::string::npos);
}

TEST(DriverChecks, MemoryHealthAndModes) {
    auto s = h200_like();
    s.nvml.devices[0].persistence_mode = false;
    s.nvml.devices[0].ecc_uncorrected_volatile = 3;
    s.nvml.devices[0].remapped_rows_failure = true;
    s.nvml.devices[1].remapped_rows_pending = true;
    s.nvml.devices[1].mig_mode = true;
    auto fs = run(s);
    auto* p = find(fs, "driver.persistence_off");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->severity, Severity::warning);
    EXPECT_EQ(p->subjects[0].uuid, kUuid0);
    ASSERT_NE(find(fs, "driver.ecc_uncorrected"), nullptr);
    EXPECT_EQ(find(fs, "driver.ecc_uncorrected")->severity, Severity::error);
    EXPECT_EQ(find(fs, "driver.remapped_rows_failure")->severity, Severity::error);
    EXPECT_EQ(find(fs, "driver.remapped_rows_pending")->severity, Severity::warning);
    EXPECT_EQ(find(fs, "driver.remapped_rows_pending")->subjects[0].pci, "0000:00:07.0");
    EXPECT_EQ(find(fs, "driver.mig_enabled")->severity, Severity::info);
}

TEST(DriverChecks, FabricStateMattersOnlyWithNvswitches) {
    auto s = h200_like();
    s.nvml.devices[0].fabric_state = 1;  // not started
    EXPECT_EQ(find(run(s), "driver.fabric_not_ready"), nullptr);
    s.pcie.nvswitches.push_back("0000:05:00.0");
    s.nvml.devices[1].fabric_state = 3;
    s.nvml.devices[1].fabric_status = 0;
    auto fs = run(s);
    auto* f = find(fs, "driver.fabric_not_ready");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:06.0");
    EXPECT_NE(f->message.find("not started"), std::string::npos);
    EXPECT_EQ(std::count_if(fs.begin(), fs.end(), [](auto& x) { return x.id == "driver.fabric_not_ready"; }), 1);
}

TEST(DriverChecks, GpuLostIsAnError) {
    auto s = h200_like();
    s.nvml.devices[1].errors.push_back("nvmlDeviceGetUUID: NVML_ERROR_GPU_IS_LOST (15, GPU is lost)");
    auto findings = run(s);
    auto* f = find(findings, "driver.gpu_lost");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subjects[0].uuid, kUuid1);
}
