#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checks/diagnose.hpp"
#include "collect/collectors.hpp"

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
