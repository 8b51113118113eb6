#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/root.hpp"
#include "capture/record.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {

const std::string kUuid0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";  // 0000:00:06.0, /dev/nvidia0
const std::string kUuid1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";  // 0000:00:07.0, /dev/nvidia1

const Snapshot& fixture() {
    static Snapshot s = [] {
        Root root(std::string(GPUDX_TEST_FIXTURES) + "/h200x2");
        CollectOptions o;
        o.probe_driver = false;
        return collect_gpu_inventory(root, o);
    }();
    return s;
}

FileReader no_files() {
    return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

AllocationRecord record(std::map<std::string, std::string> env, const Snapshot& s = fixture()) {
    return build_allocation_record(s, env, "node17", "2026-11-30T10:00:00Z", no_files());
}

}  // namespace

TEST(Record, SlurmJobGpusAreDeviceMinorsJoinedToUuidAndAddress) {
    auto r = record({{"SLURM_JOB_ID", "81723"}, {"SLURM_JOB_GPUS", "1"}, {"SLURM_JOB_USER", "alice"},
                     {"SLURM_SCRIPT_CONTEXT", "prolog_slurmd"}, {"CUDA_VISIBLE_DEVICES", "1"}});
    EXPECT_EQ(r.job_id, "81723");
    EXPECT_EQ(r.user, "alice");
    EXPECT_EQ(r.variable, "SLURM_JOB_GPUS");
    EXPECT_EQ(r.index_meaning, "device_minor");
    ASSERT_EQ(r.gpus.size(), 1u);
    EXPECT_EQ(r.gpus[0].local_ordinal, 0u);
    EXPECT_EQ(r.gpus[0].uuid, kUuid1);
    EXPECT_EQ(r.gpus[0].pci, "0000:00:07.0");
    EXPECT_EQ(r.gpus[0].minor, 1u);
}

TEST(Record, StepGpusWinOverARenumberedCudaVisibleDevices) {
    // Inside a step under ConstrainDevices, CUDA_VISIBLE_DEVICES=0 is the job's first card, not /dev/nvidia0.
    auto r = record({{"SLURM_STEP_GPUS", "1"}, {"SLURM_JOB_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0"},
                     {"SLURM_STEP_ID", "2"}});
    EXPECT_EQ(r.variable, "SLURM_STEP_GPUS");
    EXPECT_EQ(r.step_id, "2");
    ASSERT_EQ(r.gpus.size(), 1u);
    EXPECT_EQ(r.gpus[0].uuid, kUuid1);
}

TEST(Record, CudaVisibleDevicesByUuidKeepsItsOrder) {
    auto r = record({{"CUDA_VISIBLE_DEVICES", "GPU-40cd403d," + kUuid0}});
    EXPECT_EQ(r.index_meaning, "pci_order");
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.gpus[0].local_ordinal, 0u);
    EXPECT_EQ(r.gpus[0].pci, "0000:00:07.0");
    EXPECT_EQ(r.gpus[1].local_ordinal, 1u);
    EXPECT_EQ(r.gpus[1].pci, "0000:00:06.0");
}

TEST(Record, NoVariableMeansEveryGpuInPciOrder) {
    auto r = record({});
    EXPECT_EQ(r.variable, "");
    EXPECT_FALSE(r.job_id);
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.gpus[0].uuid, kUuid0);
    EXPECT_EQ(r.gpus[1].local_ordinal, 1u);
    auto j = allocation_record_to_json(r);
    EXPECT_TRUE(j["job_id"].is_null());
    EXPECT_TRUE(j["allocation"]["variable"].is_null());
}

TEST(Record, AnEntryNamingNoGpuHereIsKeptUnresolved) {
    auto r = record({{"SLURM_JOB_GPUS", "0,5"}});
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.gpus[0].uuid, kUuid0);
    EXPECT_EQ(r.gpus[1].entry, "5");
    EXPECT_EQ(r.gpus[1].uuid, "");
    EXPECT_FALSE(r.gpus[1].local_ordinal);
    auto j = allocation_record_to_json(r);
    EXPECT_TRUE(j["gpus"][1]["uuid"].is_null());
    EXPECT_TRUE(j["gpus"][1]["local_ordinal"].is_null());
    EXPECT_EQ(record({{"CUDA_VISIBLE_DEVICES", ""}}).gpus.size(), 0u);
}

TEST(Record, MigInstancesNameTheirParentGpu) {
    Snapshot s;
    NvmlDevice d;
    d.uuid = kUuid1;
    d.pci = "0000:00:07.0";
    d.minor = 1;
    d.mig_uuids = {"MIG-1f2d1a84-7b5c-5e2a-9d3e-0c4b5a6f7e81", "MIG-a0b1c2d3-e4f5-5a6b-8c7d-9e0f1a2b3c4d"};
    s.nvml.devices.push_back(d);
    auto r = record({{"CUDA_VISIBLE_DEVICES", "MIG-a0b1c2d3-e4f5-5a6b-8c7d-9e0f1a2b3c4d"}}, s);
    ASSERT_EQ(r.gpus.size(), 1u);
    EXPECT_EQ(r.gpus[0].uuid, kUuid1);
    EXPECT_EQ(r.gpus[0].pci, "0000:00:07.0");
    EXPECT_EQ(r.gpus[0].mig_uuid, "MIG-a0b1c2d3-e4f5-5a6b-8c7d-9e0f1a2b3c4d");
    EXPECT_EQ(r.gpus[0].local_ordinal, 0u);
}

TEST(Record, ContainerImageFromPyxisOrAnOciBundleElseNull) {
    const std::string digest = "sha256:" + std::string(64, 'a');
    auto pyxis = container_image_from(
        {{"SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image", "nvcr.io#nvidia/pytorch@" + digest}}, no_files());
    ASSERT_TRUE(pyxis);
    EXPECT_EQ(pyxis->digest, digest);
    EXPECT_EQ(pyxis->reference, "nvcr.io#nvidia/pytorch@" + digest);
    EXPECT_EQ(pyxis->source, "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image");
    // A tag alone names the image but no digest.
    auto tag = container_image_from({{"GPUDX_CONTAINER_IMAGE", "nvcr.io/nvidia/pytorch:24.05-py3"}}, no_files());
    ASSERT_TRUE(tag);
    EXPECT_EQ(tag->digest, "");
    FileReader bundle = [&](const std::string& p) -> std::optional<std::string> {
        if (p != "/run/slurm/oci/81723/config.json") return std::nullopt;
        return R"({"ociVersion":"1.0.2","annotations":{"org.opencontainers.image.ref.name":"pytorch:24.05",)"
               R"("io.containerd.image.digest":")" + digest + R"("}})";
    };
    auto oci = container_image_from({{"SLURM_CONTAINER", "/run/slurm/oci/81723"}}, bundle);
    ASSERT_TRUE(oci);
    EXPECT_EQ(oci->digest, digest);
    EXPECT_EQ(oci->reference, "pytorch:24.05");
    EXPECT_FALSE(container_image_from({{"SLURM_CONTAINER", "/nonexistent"}}, bundle));
    EXPECT_FALSE(container_image_from({}, no_files()));
    auto j = allocation_record_to_json(record({}));
    EXPECT_TRUE(j["container_image"].is_null());
}

TEST(Record, IsOneJsonLine) {
    auto r = record({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_USER", "bad\nuser\"\\"}, {"SLURM_JOB_GPUS", "0,1"}});
    auto line = allocation_record_to_json(r).dump();
    EXPECT_EQ(line.find('\n'), std::string::npos);
    auto back = nlohmann::json::parse(line);
    EXPECT_EQ(back["kind"], "gpudx-allocation-record");
    EXPECT_EQ(back["schema_version"], 1);
    EXPECT_EQ(back["job_id"], "7");
    EXPECT_EQ(back["user"], "bad\nuser\"\\");
    EXPECT_EQ(back["gpus"][1]["pci"], "0000:00:07.0");
}

TEST(Record, ConcurrentAppendsNeverInterleave) {
    auto dir = fs::path(GPUDX_TEST_BINARY_DIR) / "record-append";
    fs::remove_all(dir);
    auto file = (dir / "sub" / "allocations.jsonl").string();  // the parent is created
    constexpr int kProcs = 8, kLines = 200;
    std::vector<pid_t> kids;
    for (int p = 0; p < kProcs; ++p) {
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            for (int i = 0; i < kLines; ++i) {
                // Long lines, so a split write would show.
                std::string line = "{\"p\":" + std::to_string(p) + ",\"i\":" + std::to_string(i) + ",\"pad\":\"" +
                                   std::string(3000, static_cast<char>('a' + p)) + "\"}";
                if (!append_line(file, line, false)) ::_exit(1);
            }
            ::_exit(0);
        }
        kids.push_back(pid);
    }
    for (auto pid : kids) {
        int st = 0;
        ::waitpid(pid, &st, 0);
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    std::ifstream in(file);
    std::string line;
    std::set<std::pair<int, int>> seen;
    while (std::getline(in, line)) {
        auto j = nlohmann::json::parse(line);  // throws on an interleaved line
        int p = j["p"];
        EXPECT_EQ(j["pad"].get<std::string>(), std::string(3000, static_cast<char>('a' + p)));
        seen.insert({p, j["i"].get<int>()});
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(kProcs * kLines));
}

TEST(Record, AppendToAnUnwritablePlaceSaysWhy) {
    auto r = append_line("/proc/version/allocations.jsonl", "{}", false);
    ASSERT_FALSE(r);
    EXPECT_FALSE(r.error().message.empty());
}

}  // namespace GPUDX_UNITY_ID
