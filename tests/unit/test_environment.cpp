#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rules/engine/diagnose.hpp"
#include "collect/collectors.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kGpu0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const std::string kGpu1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

fs::path scratch(const std::string& name) {
    auto p = fs::temp_directory_path() / ("gpudx-test-env-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

// The real capture with an environment: what diagnose says about it.
std::vector<Finding> diagnose_h200_with(std::map<std::string, std::string> env) {
    Root root(kH200);
    CollectOptions opts;
    opts.probe_driver = false;
    opts.environment = std::move(env);
    auto snap = take_snapshot(root, opts);
    DiagnoseOptions o;
    return diagnose(snap, o).findings;
}

const Finding* by_id(const std::vector<Finding>& fs, std::string_view id) {
    for (auto& f : fs)
        if (f.id == id) return &f;
    return nullptr;
}

// The same with NVML's answers for the capture's two GPUs, as a run with the driver layers gives them:
// 0000:00:07.0 in MIG mode with the given instances.
std::vector<Finding> diagnose_h200_with_nvml(std::map<std::string, std::string> env,
                                             std::vector<std::string> gpu1_migs) {
    Root root(kH200);
    CollectOptions opts;
    opts.probe_driver = false;
    opts.environment = std::move(env);
    auto snap = take_snapshot(root, opts);
    snap.nvml.init_result = 0;
    snap.nvml.device_count = 2;
    for (auto [i, pci, uuid] : {std::tuple{0u, "0000:00:06.0", kGpu0}, std::tuple{1u, "0000:00:07.0", kGpu1}}) {
        NvmlDevice d;
        d.index = i;
        d.pci = pci;
        d.bus_id = std::string("0000") + pci;
        d.uuid = uuid;
        d.minor = i;
        d.persistence_mode = true;
        if (i == 1) {
            d.mig_mode = true;
            d.mig_uuids = gpu1_migs;
        }
        snap.nvml.devices.push_back(d);
    }
    for (auto& c : snap.collectors)
        if (c.name == "nvml") c = status_ok(Collector::nvml);
    DiagnoseOptions o;
    return diagnose(snap, o).findings;
}
}  // namespace

TEST(Environment, LoadsTheCapturesRecordedEnvironment) {
    auto dir = scratch("load");
    write(dir / "_commands/environment.txt", "CUDA_VISIBLE_DEVICES=1,0\nNOEQUALS\n=bad\nPATH=/usr/bin:/bin\nEMPTY=\n");
    auto env = load_environment(Root(dir));
    EXPECT_EQ(env.size(), 3u);
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,0");
    EXPECT_EQ(env["EMPTY"], "");
    fs::remove_all(dir);
}

TEST(Environment, KeepsOnlyGpuVariablesAndDetectsContainers) {
    auto dir = scratch("container");
    write(dir / ".dockerenv", "");
    write(dir / "proc/1/cgroup",
          "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-"
          "abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd.scope\n");
    Root root(dir);
    CollectOptions opts;
    opts.environment = {{"CUDA_VISIBLE_DEVICES", "GPU-992cb470"}, {"HOME", "/root"},
                        {"KUBERNETES_PORT", "tcp://10.0.0.1:443"}, {"SLURM_JOB_GPUS", "0"}};
    CollectContext ctx{root, opts};
    EnvironmentLayer env;
    auto st = collect_environment(ctx, env);
    EXPECT_EQ(st.state, CollectorState::ok);
    EXPECT_EQ(env.variables.size(), 3u);
    EXPECT_EQ(env.variables.count("HOME"), 0u);
    EXPECT_EQ(env.variables["KUBERNETES_PORT"], "tcp://10.0.0.1:443");
    EXPECT_TRUE(env.container.in_container);
    EXPECT_EQ(env.container.runtime, "kubernetes");
    EXPECT_EQ(env.container.container_id, "abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd");
    EXPECT_EQ(env.container.evidence.size(), 2u);
    fs::remove_all(dir);
}

TEST(Environment, HostIsNotAContainer) {
    Root root(kH200);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    EnvironmentLayer env;
    collect_environment(ctx, env);
    EXPECT_FALSE(env.container.in_container);
    EXPECT_TRUE(env.container.evidence.empty());
}

TEST(AllocationRules, IndicesWithoutPciOrder) {
    auto f = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "1,0"}});
    auto* idx = by_id(f, "allocation.visible_by_index");
    ASSERT_NE(idx, nullptr);
    ASSERT_EQ(idx->subjects.size(), 2u);
    EXPECT_EQ(idx->subjects[0].uuid, kGpu1);
    EXPECT_EQ(idx->subjects[0].pci, "0000:00:07.0");
    EXPECT_NE(by_id(f, "allocation.index_without_pci_order"), nullptr);
    auto ordered = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "1,0"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});
    EXPECT_NE(by_id(ordered, "allocation.visible_by_index"), nullptr);
    EXPECT_EQ(by_id(ordered, "allocation.index_without_pci_order"), nullptr);
    auto uuids = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", kGpu1}});
    for (auto& x : uuids) EXPECT_NE(x.layer, Layer::allocation) << x.id;
}

TEST(AllocationRules, UuidNotOnNodeIsAnError) {
    auto f = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", kGpu0 + ",GPU-deadbeef-0000-0000-0000-000000000000"}});
    auto* u = by_id(f, "allocation.uuid_not_on_node");
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->severity, Severity::error);
    EXPECT_NE(u->message.find("GPU-deadbeef"), std::string::npos);
    EXPECT_NE(u->evidence[1].value.find(kGpu0), std::string::npos);
}

TEST(AllocationRules, StackedOnSlurm) {
    // Slurm gave GPU 1 (global index); the job script set CUDA_VISIBLE_DEVICES over it.
    auto f = diagnose_h200_with({{"SLURM_JOB_ID", "1234"}, {"SLURM_JOB_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    auto* s = by_id(f, "allocation.stacked_mappings");
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->subjects.size(), 1u);
    EXPECT_EQ(s->subjects[0].uuid, kGpu1);
    // Slurm's own export (global index) and its ConstrainDevices renumbering are both fine.
    EXPECT_EQ(by_id(diagnose_h200_with({{"SLURM_JOB_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", "1"}}),
                    "allocation.stacked_mappings"),
              nullptr);
    EXPECT_EQ(by_id(diagnose_h200_with({{"SLURM_JOB_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", "0"}}),
                    "allocation.stacked_mappings"),
              nullptr);
    // A UUID outside the allocation is stacked too.
    EXPECT_NE(by_id(diagnose_h200_with({{"SLURM_JOB_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", kGpu0}}),
                    "allocation.stacked_mappings"),
              nullptr);
}

TEST(AllocationRules, InvalidAndEmptyValues) {
    auto f = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "0,-1,1"}});
    auto* inv = by_id(f, "allocation.visible_devices_invalid");
    ASSERT_NE(inv, nullptr);
    EXPECT_NE(inv->message.find("\"-1\""), std::string::npos);
    EXPECT_NE(by_id(diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "3"}}), "allocation.visible_devices_invalid"), nullptr);
    EXPECT_NE(by_id(diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", ""}}), "allocation.no_visible_devices"), nullptr);
}

TEST(ContainerRules, VisibleAllInsideAJob) {
    auto f = diagnose_h200_with({{"NVIDIA_VISIBLE_DEVICES", "all"}, {"SLURM_JOB_ID", "99"}});
    auto* a = by_id(f, "container.visible_all");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->layer, Layer::container);
    EXPECT_EQ(by_id(diagnose_h200_with({{"NVIDIA_VISIBLE_DEVICES", "all"}}), "container.visible_all"), nullptr);
}

TEST(AllocationRules, InvalidEntryIsAnErrorOnlyWhenCudaDropsGpusNamedAfterIt) {
    // CUDA ignores the first entry naming no device and every entry after it.
    auto with_dropped = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "0,-1,1"}});
    auto* dropped = by_id(with_dropped, "allocation.visible_devices_invalid");
    ASSERT_NE(dropped, nullptr);
    EXPECT_EQ(dropped->severity, Severity::error);
    ASSERT_EQ(dropped->subjects.size(), 1u);
    EXPECT_EQ(dropped->subjects[0].uuid, kGpu1);
    EXPECT_EQ(dropped->subjects[0].pci, "0000:00:07.0");
    EXPECT_NE(dropped->message.find("it drops " + kGpu1 + " (0000:00:07.0)"), std::string::npos) << dropped->message;
    auto with_past_end = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "0,2,1"}});
    auto* past_end = by_id(with_past_end, "allocation.visible_devices_invalid");
    ASSERT_NE(past_end, nullptr);
    EXPECT_EQ(past_end->severity, Severity::error);
    // Nothing usable after the bad entry: the job still gets every GPU it named, a warning.
    for (auto cvd : {"0,1,-1", "0,1,2,3", "3", "0,0"}) {
        auto found = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", cvd}});
        auto* f = by_id(found, "allocation.visible_devices_invalid");
        ASSERT_NE(f, nullptr) << cvd;
        EXPECT_EQ(f->severity, Severity::warning) << cvd;
        EXPECT_TRUE(f->subjects.empty()) << cvd;
    }
    // A GPU UUID no GPU here has is uuid_not_on_node's (an error), reported once, not twice.
    auto fs = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "GPU-deadbeef-0000," + kGpu1}});
    EXPECT_NE(by_id(fs, "allocation.uuid_not_on_node"), nullptr);
    EXPECT_EQ(by_id(fs, "allocation.visible_devices_invalid"), nullptr);
    for (auto& f : fs) EXPECT_FALSE(f.id.starts_with("identity.visible_devices")) << f.id;
}

TEST(AllocationRules, MigUuidsAreJudgedWheneverNvmlWasRead) {
    const std::string stale = "MIG-0b8e2c47-3d19-5a6f-b1e4-7c2d90f31a58";
    const std::string live = "MIG-5f6c1a3e-1b2d-5c4e-9a8b-0123456789ab";
    // MIG on with no instance at all: nothing on this node can carry the UUID.
    auto none = diagnose_h200_with_nvml({{"CUDA_VISIBLE_DEVICES", stale}}, {});
    auto* u = by_id(none, "allocation.uuid_not_on_node");
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->severity, Severity::error);
    EXPECT_NE(u->message.find(stale), std::string::npos);
    // Instances re-created with new UUIDs: the old one is not on the node, the new one is.
    EXPECT_NE(by_id(diagnose_h200_with_nvml({{"CUDA_VISIBLE_DEVICES", stale}}, {live}), "allocation.uuid_not_on_node"),
              nullptr);
    EXPECT_EQ(by_id(diagnose_h200_with_nvml({{"CUDA_VISIBLE_DEVICES", live}}, {live}), "allocation.uuid_not_on_node"),
              nullptr);
}

TEST(AllocationRules, MigUuidsWithoutNvmlAreUnverifiedNotAbsent) {
    // --no-driver: procfs lists no MIG instance, so a MIG UUID can be neither confirmed nor refuted.
    auto fs = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "MIG-0b8e2c47-3d19-5a6f-b1e4-7c2d90f31a58"}});
    EXPECT_EQ(by_id(fs, "allocation.uuid_not_on_node"), nullptr);
    EXPECT_EQ(by_id(fs, "allocation.visible_devices_invalid"), nullptr);
    auto* f = by_id(fs, "allocation.mig_uuid_unverified");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::info);
    EXPECT_NE(f->message.find("cannot be checked"), std::string::npos) << f->message;
    for (auto& x : fs) EXPECT_NE(x.severity, Severity::error) << x.id << ": " << x.message;
    // The old form names its parent GPU, which procfs knows: still judged.
    auto old = diagnose_h200_with({{"CUDA_VISIBLE_DEVICES", "MIG-GPU-deadbeef-0000-0000-0000-000000000000/1/0"}});
    EXPECT_NE(by_id(old, "allocation.uuid_not_on_node"), nullptr);
}

// `gpudx ids` reports these allocation findings: a CUDA_VISIBLE_DEVICES naming a UUID no GPU here has is a
// disagreement (exit 1), as when the identity family reported it.
TEST(AllocationRules, IdsReportsAVisibleDevicesUuidNotOnThisNode) {
    Root root(kH200);
    CollectOptions opts;
    opts.probe_driver = false;
    opts.environment = {{"CUDA_VISIBLE_DEVICES", "GPU-deadbeef-0000-0000-0000-000000000000"}};
    auto snap = take_snapshot(root, opts);
    auto dir = scratch("ids");
    std::ofstream(dir / "node.json") << snapshot_to_json(snap).dump();
    std::string out;
    FILE* p = ::popen((std::string(GPUDX_BINARY) + " ids --format json --from " + (dir / "node.json").string() +
                       " 2>/dev/null").c_str(),
                      "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = ::pclose(p);
    fs::remove_all(dir);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 1) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["consistent"], false);
    bool found = false;
    for (auto& f : j["findings"]) {
        if (f["id"] == "allocation.uuid_not_on_node") found = true;
        EXPECT_FALSE(f["id"].get<std::string>().starts_with("identity.visible_devices")) << f.dump();
    }
    EXPECT_TRUE(found) << out;
}

}  // namespace GPUDX_UNITY_ID
