// Driver layer pieces that need no driver: the CUresult table, UUID formatting, the probe protocol,
// and the deadline runner itself (with probe bodies that hang, crash or finish).
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <new>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/child_probe.hpp"
#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "gpu_api/cuda/api.hpp"
#include "gpu_api/library.hpp"
#include "gpu_api/queries.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace std::chrono_literals;

TEST(CudaAbi, ResultTableNamesAndExplainsCodes) {
    ASSERT_NE(find_cu_result(100), nullptr);
    EXPECT_STREQ(cu_result_name(100), "CUDA_ERROR_NO_DEVICE");
    EXPECT_NE(std::string(cu_result_meaning(100)).find("CUDA_VISIBLE_DEVICES"), std::string::npos);
    EXPECT_STREQ(cu_result_name(803), "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH");
    EXPECT_STREQ(cu_result_name(804), "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE");
    // 35 is the runtime's cudaErrorInsufficientDriver; cuda.h has no CUresult 35 (data/error-codes).
    EXPECT_STREQ(cu_result_name(35), "CUDA_ERROR_(unlisted)");
    EXPECT_STREQ(cu_result_name(12345), "CUDA_ERROR_(unlisted)");
    EXPECT_STREQ(nvml_return_name(18), "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
}

TEST(CudaAbi, CheckpointLayoutsMatchCudaH) {
    EXPECT_EQ(sizeof(CUcheckpointRestoreArgs), 64u);
    EXPECT_EQ(offsetof(CUcheckpointRestoreArgs, reserved), 12u);
    EXPECT_EQ(sizeof(CUcheckpointLockArgs), 64u);
    EXPECT_EQ(offsetof(CUcheckpointLockArgs, reserved1), 8u);
    EXPECT_EQ(sizeof(nvmlPciInfo_t), 68u);
    EXPECT_EQ(offsetof(nvmlPciInfo_t, busId), 36u);
    EXPECT_EQ(nvmlGpuFabricInfo_v2, 0x02000024u);
}

TEST(DriverProbe, FormatsUuidBytesLikeNvidiaSmi) {
    const unsigned char b[16] = {0x99, 0x2c, 0xb4, 0x70, 0x90, 0x27, 0x88, 0xf4,
                                 0x48, 0xa9, 0xa9, 0xa3, 0x29, 0xd6, 0x97, 0x8d};
    CUuuid u{};
    std::memcpy(u.bytes, b, sizeof b);
    EXPECT_EQ(format_gpu_uuid(u), "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
}

TEST(DriverProbe, ConsumesCompleteLinesAndKeepsThePartialOne) {
    ProbeOutcome out;
    std::string buf = "P nvmlInit_v2\nR {\"a\":1}\nP nvmlDeviceGetUUID(1)\nR {\"a\":";
    EXPECT_FALSE(consume_probe_lines(buf, out));
    EXPECT_EQ(out.last_call, "nvmlDeviceGetUUID(1)");
    ASSERT_TRUE(out.result);
    EXPECT_EQ((*out.result)["a"], 1);
    EXPECT_EQ(buf, "R {\"a\":");
    buf += "2}\nE\n";
    EXPECT_TRUE(consume_probe_lines(buf, out));
    EXPECT_EQ((*out.result)["a"], 2);
    EXPECT_TRUE(buf.empty());
}

TEST(DriverProbe, LanesInFlightNameTheHangBeforeTheMainThreadsLastCall) {
    ProbeOutcome out;
    std::string buf = "P nvmlDeviceGetCount_v2\nL 0 nvmlDeviceGetUUID(0)\nL 1 nvmlDeviceGetUUID(1)\n"
                      "L 1 nvmlDeviceGetFieldValues(1)\nL 0\nL x garbled\nL 7\n";
    EXPECT_FALSE(consume_probe_lines(buf, out));
    // Lane 0 finished; lane 1 is in its second call; a finished lane never seen busy is harmless.
    EXPECT_EQ(out.calls_in_flight(), std::vector<std::string>{"nvmlDeviceGetFieldValues(1)"});
    buf = "L 0 nvmlDeviceGetUUID(2)\n";
    consume_probe_lines(buf, out);
    EXPECT_EQ(out.calls_in_flight(), (std::vector<std::string>{"nvmlDeviceGetUUID(2)", "nvmlDeviceGetFieldValues(1)"}));
    buf = "L 0\nL 1\n";
    consume_probe_lines(buf, out);
    // No lane busy: the main thread's last call is the one in flight.
    EXPECT_EQ(out.calls_in_flight(), std::vector<std::string>{"nvmlDeviceGetCount_v2"});
}

TEST(DriverProbe, GarbledResultLineKeepsThePreviousResult) {
    ProbeOutcome out;
    std::string buf = "R {\"a\":1}\nR {not json\n";
    consume_probe_lines(buf, out);
    ASSERT_TRUE(out.result);
    EXPECT_EQ((*out.result)["a"], 1);
}

TEST(DriverProbe, HangingChildIsKilledAtTheDeadlineAndNamesTheCall) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<ProbeSpec> specs;
    specs.push_back({"hang", [](ProbeChannel& ch) {
                         ch.result({{"devices_done", 1}});
                         ch.progress("nvmlDeviceGetUUID(1)");
                         for (;;) ::pause();
                     },
                     300ms});
    // The quick one's deadline is no race: it answers at once, and waiting for it cannot hide the hang's cut.
    specs.push_back({"quick", [](ProbeChannel& ch) { ch.result({{"ok", true}}); }, 30000ms});
    auto out = run_probes(specs);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].end, ProbeEnd::timed_out);
    EXPECT_EQ(out[0].last_call, "nvmlDeviceGetUUID(1)");
    ASSERT_TRUE(out[0].result);  // what was sent before the hang survives
    EXPECT_EQ((*out[0].result)["devices_done"], 1);
    EXPECT_EQ(out[1].end, ProbeEnd::finished);
    EXPECT_EQ((*out[1].result)["ok"], true);
    // The hung body never returns, so coming back at all means it was cut; the bound leaves a loaded machine
    // its slack. A hung call is always given its whole deadline.
    EXPECT_LT(elapsed, 10.3);
    EXPECT_GE(elapsed, 0.3);
}

// Every child waits until all of them have started: run one after another, the first would wait alone until
// its deadline and time out, so each finishing shows they ran side by side, with no clock in the test.
TEST(DriverProbe, ProbesRunConcurrently) {
    constexpr int kProbes = 3;
    void* shared = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shared, MAP_FAILED);
    auto* started = new (shared) std::atomic<int>(0);
    std::vector<ProbeSpec> specs;
    for (int i = 0; i < kProbes; ++i)
        specs.push_back({"rendezvous", [started](ProbeChannel& ch) {
                             started->fetch_add(1);
                             while (started->load() < kProbes) std::this_thread::sleep_for(1ms);
                             ch.result({{"met", true}});
                         },
                         20000ms});
    auto out = run_probes(specs);
    ::munmap(shared, sizeof(std::atomic<int>));
    ASSERT_EQ(out.size(), static_cast<size_t>(kProbes));
    for (auto& o : out) EXPECT_EQ(o.end, ProbeEnd::finished) << o.message;
}

TEST(DriverProbe, CrashingChildIsReportedWithItsSignalAndLastCall) {
    std::vector<ProbeSpec> specs;
    specs.push_back({"crash", [](ProbeChannel& ch) {
                         ch.progress("cuDeviceGetPCIBusId(0)");
                         ::raise(SIGSEGV);
                     },
                     2000ms});
    auto out = run_probes(specs);
    EXPECT_EQ(out[0].end, ProbeEnd::died);
    EXPECT_EQ(out[0].last_call, "cuDeviceGetPCIBusId(0)");
    EXPECT_NE(out[0].message.find("signal 11"), std::string::npos) << out[0].message;
}

TEST(DriverLibraryLoad, MissingLibraryIsAnErrorNamingThePath) {
    auto lib = DriverLibrary::open("libnvidia-ml.so.1", std::string("/nonexistent-gpudx-dir"), "nvmlInit_v2");
    ASSERT_FALSE(lib);
    EXPECT_EQ(lib.error().path, "/nonexistent-gpudx-dir/libnvidia-ml.so.1");
}

TEST(DriverAnswers, RecordsTheUnfilteredCudaListForReplay) {
    NvmlLayer n;
    n.driver_version = "580.159.04";
    n.device_count = 1;
    NvmlDevice d;
    d.uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    d.bus_id = "00000000:00:06.0";
    n.devices.push_back(d);
    CudaLayer c;
    c.driver_version = 13000;
    c.caller.cuda_visible_devices = "1";
    c.caller.init_result = 0;
    CudaView all;
    all.init_result = 0;
    CudaDevice cd;
    cd.uuid = d.uuid;
    cd.bus_id = "0000:00:06.0";
    all.devices.push_back(cd);
    c.all = all;
    auto j = record_driver_answers(n, c);
    EXPECT_EQ(j["format"], "gpudx-driver-answers/1");
    EXPECT_EQ(j["nvml"]["driver_version"], "580.159.04");
    EXPECT_EQ(j["nvml"]["devices"][0]["bus_id"], "00000000:00:06.0");
    EXPECT_EQ(j["cuda"]["driver_version"], 13000);
    ASSERT_EQ(j["cuda"]["devices"].size(), 1u);
    EXPECT_EQ(j["cuda"]["devices"][0]["uuid"], "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
}

}  // namespace GPUDX_UNITY_ID
