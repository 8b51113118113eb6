// driver.* rules over hand-built snapshots shaped like the h200x2 capture.
#include <gtest/gtest.h>

#include <algorithm>

#include "rules/engine/check_context.hpp"

using namespace gpudx;

namespace gpudx {
void check_driver(const CheckContext&, std::vector<Finding>&);
}

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

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
    s.cuda.caller.cuda_visible_devices = std::nullopt;
    s.cuda.caller.cuda_device_order = std::nullopt;
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
    s.nvml.hung_call = parse_hung_call(DriverApi::nvml, "nvmlDeviceGetUUID(1)");
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

// ---- driver.nvml_missing_gpu judges only the GPUs NVML can list here.

TEST(DriverChecks, NvmlMissingGpuSkipsGpusOutsideAConfinedSlurmJob) {
    // Slurm gave the job GPU 0 (device minor 0) with ConstrainDevices=yes: NVML inside lists only that card.
    auto s = h200_like();
    s.nvml.devices.pop_back();
    s.nvml.device_count = 1;
    s.cuda.caller.devices.pop_back();
    s.cuda.caller.device_count = 1;
    s.environment.variables = {{"SLURM_JOB_ID", "8812"}, {"SLURM_JOB_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", "0"}};
    auto fs = run(s);
    EXPECT_EQ(find(fs, "driver.nvml_missing_gpu"), nullptr);
    EXPECT_EQ(find(fs, "driver.cuda_missing_gpu"), nullptr);
    // The job's own GPU missing from NVML is still an error, and the evidence says what was left out.
    s.environment.variables["SLURM_JOB_GPUS"] = "1";
    auto fs2 = run(s);
    auto* f = find(fs2, "driver.nvml_missing_gpu");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].uuid, kUuid1);
    auto skipped = std::find_if(f->evidence.begin(), f->evidence.end(),
                                [](auto& e) { return e.source.find("not judged") != std::string::npos; });
    ASSERT_NE(skipped, f->evidence.end());
    EXPECT_NE(skipped->value.find("0000:00:06.0 (not in this job's allocation, SLURM_JOB_GPUS=1)"), std::string::npos)
        << skipped->value;
}

TEST(DriverChecks, NvmlMissingGpuSkipsGpusAPodWasNotGiven) {
    // A Kubernetes pod given GPU-40cd... (0000:00:07.0) by the device plugin: NVML inside sees only that card.
    auto s = h200_like();
    s.nvml.devices.erase(s.nvml.devices.begin());
    s.nvml.devices[0].index = 0;
    s.nvml.device_count = 1;
    s.cuda.caller.devices.erase(s.cuda.caller.devices.begin());
    s.cuda.caller.devices[0].ordinal = 0;
    s.cuda.caller.device_count = 1;
    s.environment.container.in_container = true;
    s.environment.container.runtime = "kubernetes";
    s.environment.variables = {{"NVIDIA_VISIBLE_DEVICES", kUuid1}, {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
    auto fs = run(s);
    EXPECT_EQ(find(fs, "driver.nvml_missing_gpu"), nullptr);
    EXPECT_EQ(find(fs, "driver.cuda_missing_gpu"), nullptr);
    // Outside a container the variable selects nothing: the card is missing from NVML again.
    s.environment.container.in_container = false;
    EXPECT_NE(find(run(s), "driver.nvml_missing_gpu"), nullptr);
}

TEST(DriverChecks, NvmlMissingGpuSkipsGpusBoundToAnotherDriver) {
    // 0000:00:07.0 is reserved for a VM (vfio-pci): NVML cannot see it, by design.
    auto s = h200_like();
    s.pcie.devices[0].driver = "nvidia";
    s.pcie.devices[1].driver = "vfio-pci";
    s.module.nvidia_gpus.pop_back();
    s.nvml.devices.pop_back();
    s.nvml.device_count = 1;
    s.cuda.caller.devices.pop_back();
    s.cuda.caller.device_count = 1;
    EXPECT_EQ(find(run(s), "driver.nvml_missing_gpu"), nullptr);
    s.pcie.devices[1].driver = "nouveau";
    EXPECT_EQ(find(run(s), "driver.nvml_missing_gpu"), nullptr);
    // Bound to nvidia but absent from NVML is still missing.
    s.pcie.devices[1].driver = "nvidia";
    EXPECT_NE(find(run(s), "driver.nvml_missing_gpu"), nullptr);
}

// ---- A GPU NVML cannot get a handle for (GPU lost) is still named.

Snapshot with_lost_handle() {
    auto s = h200_like();
    auto& lost = s.nvml.devices[1];
    lost = NvmlDevice{};
    lost.index = 1;
    lost.errors.push_back("nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_GPU_IS_LOST (15, GPU is lost)");
    s.cuda.caller.devices.pop_back();
    s.cuda.caller.device_count = 1;
    return s;
}

TEST(DriverChecks, LostHandleIsAttributedToThePcieGpuNvmlDidNotAnswerFor) {
    auto fs = run(with_lost_handle());
    auto* lost = find(fs, "driver.gpu_lost");
    ASSERT_NE(lost, nullptr);
    ASSERT_EQ(lost->subjects.size(), 1u);
    EXPECT_EQ(lost->subjects[0].pci, "0000:00:07.0");
    EXPECT_EQ(lost->subjects[0].uuid, kUuid1);
    EXPECT_EQ(lost->message.find("unknown address"), std::string::npos) << lost->message;
    EXPECT_NE(lost->message.find(std::string(kUuid1) + " (0000:00:07.0)"), std::string::npos) << lost->message;

    auto* cuda = find(fs, "driver.cuda_missing_gpu");
    ASSERT_NE(cuda, nullptr);
    ASSERT_EQ(cuda->subjects.size(), 1u);
    EXPECT_EQ(cuda->subjects[0].pci, "0000:00:07.0");
    EXPECT_NE(cuda->message.find("missing: 0000:00:07.0"), std::string::npos) << cuda->message;

    auto* nvml = find(fs, "driver.nvml_missing_gpu");
    ASSERT_NE(nvml, nullptr);
    EXPECT_NE(nvml->message.find("NVML sees 1 GPU(s) (it counts 2; 1 gave no address), PCIe has 2; missing: "
                                 "0000:00:07.0"),
              std::string::npos)
        << nvml->message;
}

TEST(DriverChecks, LostHandleFallsBackToTheKernelLogsFallenOffGpu) {
    // Two cards without an NVML answer but only one device without a handle: the kernel log decides.
    auto s = with_lost_handle();
    PciDevice third;
    third.address = "0000:00:08.0";
    third.vendor_id = 0x10de;
    third.is_gpu = true;
    s.pcie.devices.push_back(third);
    EXPECT_TRUE(find(run(s), "driver.gpu_lost")->subjects.empty());
    EXPECT_NE(find(run(s), "driver.gpu_lost")->message.find("NVML device 1 (address unknown)"), std::string::npos);
    EXPECT_NE(find(run(s), "driver.cuda_missing_gpu")->message.find("missing: NVML device 1 (address unknown)"),
              std::string::npos);
    KernelLogTally t;
    t.kind = TallyKind::xid;
    t.code = 79;
    t.device = "0000:00:07.0";
    t.count = 1;
    s.kernel_log.tallies.push_back(t);
    auto fs = run(s);
    auto* lost = find(fs, "driver.gpu_lost");
    ASSERT_EQ(lost->subjects.size(), 1u);
    EXPECT_EQ(lost->subjects[0].pci, "0000:00:07.0");
    EXPECT_EQ(lost->subjects[0].uuid, kUuid1);
}

TEST(DriverChecks, UnresponsiveNamesTheGpuOfTheHungCall) {
    // NVML hung in nvmlDeviceGetUUID(1) after answering for device 0: device 1 is the second GPU in PCI order.
    auto s = h200_like();
    s.nvml.devices.pop_back();
    s.nvml.hung_call = parse_hung_call(DriverApi::nvml, "nvmlDeviceGetUUID(1)");
    s.collectors[3].state = CollectorState::timed_out;
    auto fs = run(s);
    auto* f = find(fs, "driver.unresponsive");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].uuid, kUuid1);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:07.0");
    // A call that names no device names no GPU.
    s.nvml.hung_call = parse_hung_call(DriverApi::nvml, "nvmlInit_v2");
    EXPECT_TRUE(find(run(s), "driver.unresponsive")->subjects.empty());
    // CUDA's ordinal is a GPU only where the order is known (PCI_BUS_ID, no CUDA_VISIBLE_DEVICES).
    auto c = h200_like();
    c.cuda.caller.devices.clear();
    c.cuda.hung_call = parse_hung_call(DriverApi::cuda, "cuDeviceGetAttribute(33, 1)");
    c.collectors[4].state = CollectorState::timed_out;
    EXPECT_TRUE(find(run(c), "driver.unresponsive")->subjects.empty());
    c.cuda.caller.cuda_device_order = "PCI_BUS_ID";
    auto cs = run(c);
    auto* g = find(cs, "driver.unresponsive");
    ASSERT_EQ(g->subjects.size(), 1u);
    EXPECT_EQ(g->subjects[0].pci, "0000:00:07.0");
    c.cuda.hung_call = parse_hung_call(DriverApi::cuda, "cuInit(0)");
    EXPECT_TRUE(find(run(c), "driver.unresponsive")->subjects.empty());
}

TEST(DriverChecks, SystemDriverMismatchSaysWhichSideMoved) {
    auto s = h200_like();
    s.cuda.caller.init_result = 803;
    s.cuda.caller.init_name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    s.cuda.library_path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
    ResolvedLibrary lib;
    lib.soname = "libcuda.so.1";
    lib.copies = {{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.172.08",
                   "580.172.08", "ld.so.cache", true}};
    lib.chosen = lib.copies[0];
    s.libraries.libraries.push_back(lib);
    auto with_newer = run(s);
    auto* newer = find(with_newer, "driver.cuda_init_failed");
    ASSERT_NE(newer, nullptr);
    EXPECT_EQ(newer->message.find("stale"), std::string::npos) << newer->message;
    EXPECT_NE(newer->message.find("libcuda 580.172.08"), std::string::npos) << newer->message;
    EXPECT_NE(newer->message.find("is newer than the kernel module 580.159.04"), std::string::npos) << newer->message;
    EXPECT_NE(newer->next_step.find("reboot"), std::string::npos);
    s.libraries.libraries[0].chosen->version = "575.57.08";
    auto with_older = run(s);
    auto* older = find(with_older, "driver.cuda_init_failed");
    EXPECT_NE(older->message.find("is older than the kernel module 580.159.04: a stale copy"), std::string::npos)
        << older->message;
}

}  // namespace GPUDX_UNITY_ID
