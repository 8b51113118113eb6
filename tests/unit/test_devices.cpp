#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rules/engine/diagnose.hpp"
#include "collect/collectors.hpp"
#include "collect/proc_cgroup.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";

fs::path copy_of_h200(const std::string& name) {
    auto p = fs::temp_directory_path() / ("gpudx-test-dev-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::copy(kH200, p, fs::copy_options::recursive);
    return p;
}

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

const DeviceNode* node(const DevicesLayer& d, std::string_view path) {
    for (auto& n : d.nodes)
        if (n.path == path) return &n;
    return nullptr;
}

std::vector<Finding> diagnose_root(const fs::path& root_dir) {
    Root root(root_dir);
    CollectOptions opts;
    opts.probe_driver = false;
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

TEST(ProcParsers, StatusGivesUidStateAndName) {
    auto st = parse_proc_status("Name:\tpython3\nUmask:\t0022\nState:\tZ (zombie)\nTgid:\t4242\n"
                                "Uid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\n");
    EXPECT_EQ(st.name, "python3");
    EXPECT_EQ(st.state, "Z");
    ASSERT_TRUE(st.uid);
    EXPECT_EQ(*st.uid, 1000u);
    EXPECT_FALSE(parse_proc_status("Uid:\tbogus\n").uid);
    // PPid tells gpudx's own probe children apart from the node's GPU holders.
    auto child = parse_proc_status("Name:\tgpudx\nPid:\t5001\nPPid:\t5000\n");
    ASSERT_TRUE(child.ppid);
    EXPECT_EQ(*child.ppid, 5000u);
    EXPECT_FALSE(parse_proc_status("PPid:\t-1\n").ppid);
}

TEST(ProcParsers, CgroupV1AndV2) {
    auto v2 = parse_proc_cgroup("0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n");
    ASSERT_EQ(v2.size(), 1u);
    EXPECT_TRUE(v2[0].controllers.empty());
    EXPECT_EQ(cgroup_directory(v2).directory,
              "/sys/fs/cgroup/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope");
    EXPECT_EQ(cgroup_directory(v2, "/sys/fs/cgroup/unified").mount, "/sys/fs/cgroup/unified");
    auto owner = cgroup_owner(primary_cgroup_path(v2));
    EXPECT_EQ(owner.runtime, "docker");
    EXPECT_EQ(owner.container_id, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");

    auto v1 = parse_proc_cgroup("12:memory:/slurm/uid_1000/job_1234/step_0\n"
                                "11:devices:/slurm/uid_1000/job_1234/step_0/task_0\n"
                                "garbage\n1:name=systemd:/user.slice\n");
    ASSERT_EQ(v1.size(), 3u);
    EXPECT_EQ(primary_cgroup_path(v1), "/slurm/uid_1000/job_1234/step_0/task_0");
    EXPECT_EQ(cgroup_directory(v1).directory, "/sys/fs/cgroup/devices/slurm/uid_1000/job_1234/step_0/task_0");
    EXPECT_EQ(cgroup_directory(v1).mount, "/sys/fs/cgroup/devices");
    auto slurm = cgroup_owner(primary_cgroup_path(v1));
    EXPECT_EQ(slurm.runtime, "slurm");
    EXPECT_EQ(slurm.slurm_job_id, "1234");

    auto k8s = cgroup_owner("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
                            "cri-containerd-abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd.scope");
    EXPECT_EQ(k8s.runtime, "kubernetes");
    EXPECT_EQ(k8s.container_id, "abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd");
    EXPECT_EQ(cgroup_owner("/init.scope").runtime, "");
    EXPECT_EQ(cgroup_owner("/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").runtime, "docker");
    // 65 hex digits is not a container id.
    EXPECT_EQ(cgroup_owner("/x/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0").container_id, "");
}

TEST(Devices, H200CaptureNodes) {
    Root root(kH200);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    DevicesLayer d;
    auto st = collect_devices(ctx, d);
    EXPECT_EQ(st.state, CollectorState::ok);
    for (auto path : {"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
        auto* n = node(d, path);
        ASSERT_NE(n, nullptr) << path;
        EXPECT_EQ(n->type, "char") << path;
        EXPECT_EQ(n->mode, 0666u) << path;
        EXPECT_FALSE(n->caller_can_open) << "unknown when replaying: " << path;
    }
    auto* caps = node(d, "/dev/nvidia-caps");
    ASSERT_NE(caps, nullptr);
    EXPECT_EQ(caps->type, "directory");
    std::vector<std::string> order;
    for (auto& n : d.nodes) order.push_back(n.path);
    EXPECT_EQ(order, (std::vector<std::string>{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1",
                                               "/dev/nvidiactl", "/dev/nvidia-caps"}));
    EXPECT_TRUE(d.holders.empty());
    EXPECT_EQ(d.processes_scanned, 0u);
}

TEST(Devices, HoldersFromRecordedFdLinks) {
    auto dir = copy_of_h200("holders");
    write(dir / "proc/4242/comm", "python3\n");
    write(dir / "proc/4242/status", "Name:\tpython3\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\n");
    write(dir / "proc/4242/cgroup", "0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0\n");
    write(dir / "proc/4242/fd/3", "/dev/nvidia1");
    write(dir / "proc/4242/fd/4", "/dev/nvidiactl");
    write(dir / "proc/4242/fd/5", "/tmp/log.txt");
    write(dir / "proc/4242/fd/6", "/dev/nvidia1");
    write(dir / "proc/99/comm", "bash\n");
    write(dir / "proc/99/fd/0", "/dev/pts/0");
    write(dir / "proc/4343/status", "Name:\tworker\nState:\tZ (zombie)\nUid:\t0\t0\t0\t0\n");
    write(dir / "proc/4343/cgroup", "0::/system.slice\n");
    write(dir / "proc/4343/fd/9", "/dev/nvidia0");
    fs::create_directories(dir / "sys/fs/cgroup/system.slice");
    Root root(dir);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    DevicesLayer d;
    collect_devices(ctx, d);
    EXPECT_EQ(d.processes_scanned, 3u);
    ASSERT_EQ(d.holders.size(), 2u);
    EXPECT_EQ(d.holders[1].pid, 4343);
    EXPECT_EQ(d.holders[1].name, "worker");  // no comm file: the status Name
    EXPECT_EQ(d.holders[1].cgroup_exists, true);
    auto& h = d.holders[0];
    EXPECT_EQ(h.pid, 4242);
    EXPECT_EQ(h.name, "python3");
    EXPECT_EQ(h.uid, 1000u);
    EXPECT_EQ(h.state, "S");
    EXPECT_EQ(h.slurm_job_id, "77");
    EXPECT_EQ(h.devices, (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidiactl"}));
    ASSERT_TRUE(h.cgroup_exists);
    EXPECT_FALSE(*h.cgroup_exists);

    auto findings = diagnose_root(dir);
    auto* stuck = by_id(findings, "devices.stuck_holder");
    ASSERT_NE(stuck, nullptr);
    EXPECT_EQ(stuck->severity, Severity::error);
    ASSERT_EQ(stuck->subjects.size(), 1u);
    EXPECT_EQ(stuck->subjects[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_EQ(stuck->subjects[0].pci, "0000:00:07.0");
    EXPECT_NE(stuck->message.find("Slurm job 77"), std::string::npos);
    int stuck_count = 0;
    for (auto& f : findings)
        if (f.id == "devices.stuck_holder") {
            ++stuck_count;
            if (f.message.find("pid 4343") != std::string::npos) {
                EXPECT_NE(f.message.find("zombie"), std::string::npos);
                ASSERT_EQ(f.subjects.size(), 1u);
                EXPECT_EQ(f.subjects[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
            }
        }
    EXPECT_EQ(stuck_count, 2);
    fs::remove_all(dir);
}

TEST(Devices, MissingNodesAreErrorsNamingTheGpu) {
    auto dir = copy_of_h200("missing");
    fs::remove(dir / "dev/nvidia-uvm.devnode");
    fs::remove(dir / "dev/nvidia0.devnode");
    auto findings = diagnose_root(dir);
    auto* uvm = by_id(findings, "devices.uvm_missing");
    ASSERT_NE(uvm, nullptr);
    EXPECT_EQ(uvm->severity, Severity::error);
    EXPECT_NE(uvm->message.find("nvidia_uvm is loaded"), std::string::npos);
    auto* gpu = by_id(findings, "devices.gpu_node_missing");
    ASSERT_NE(gpu, nullptr);
    ASSERT_EQ(gpu->subjects.size(), 1u);
    EXPECT_EQ(gpu->subjects[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_EQ(gpu->subjects[0].pci, "0000:00:06.0");
    EXPECT_EQ(by_id(findings, "devices.ctl_missing"), nullptr);
    fs::remove_all(dir);
}

TEST(Devices, HealthyCaptureHasNoDeviceFindings) {
    auto findings = diagnose_root(kH200);
    for (auto& f : findings) EXPECT_NE(f.layer, Layer::devices) << f.id;
}

// ---- devices.not_accessible: asked of the live system only (access(2)), so tested on snapshots.

namespace {
const char* kGpu1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

// The capture's snapshot as the live node would give it to a user who may not open /dev/nvidia1.
Snapshot h200_where_nvidia1_is_closed() {
    Root root(kH200);
    CollectOptions opts;
    opts.probe_driver = false;
    auto snap = take_snapshot(root, opts);
    for (auto& n : snap.devices.nodes)
        if (n.type != "missing") n.caller_can_open = n.path != "/dev/nvidia1";
    return snap;
}
}  // namespace

TEST(Devices, NotAccessibleNamesTheGpuBehindTheNode) {
    auto snap = h200_where_nvidia1_is_closed();
    DiagnoseOptions o;
    auto findings = diagnose(snap, o).findings;
    ASSERT_EQ(std::count_if(findings.begin(), findings.end(), [](auto& f) { return f.id == "devices.not_accessible"; }),
              1);
    auto* f = by_id(findings, "devices.not_accessible");
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_EQ(f->layer, Layer::devices);
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].uuid, kGpu1);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:07.0");
    EXPECT_NE(f->message.find("/dev/nvidia1 exists but this user cannot open it"), std::string::npos) << f->message;
    EXPECT_EQ(f->evidence[0].source, "/dev/nvidia1");
    // MIG capability nodes are restricted on purpose: never a finding.
    for (auto& n : snap.devices.nodes)
        if (n.path.starts_with("/dev/nvidia-caps/")) n.caller_can_open = false;
    auto again = diagnose(snap, o).findings;
    EXPECT_EQ(std::count_if(again.begin(), again.end(), [](auto& f) { return f.id == "devices.not_accessible"; }), 1);
}

TEST(Devices, DiagnoseFromASavedSnapshotReportsANodeTheUserCannotOpen) {
    // A replayed tree cannot know who will open its nodes (caller_can_open stays unknown), so the end-to-end
    // path for this rule is `gpudx diagnose --from` a snapshot saved on the live node.
    auto dir = fs::temp_directory_path() / ("gpudx-test-dev-from-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto file = dir / "node.json";
    std::ofstream(file) << snapshot_to_json(h200_where_nvidia1_is_closed()).dump();
    std::string cmd = std::string(GPUDX_BINARY) + " diagnose --from " + file.string() + " --format json 2>/dev/null";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = ::pclose(p);
    fs::remove_all(dir);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 1) << out;  // an error finding
    auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    const nlohmann::json* found = nullptr;
    for (auto& f : j["findings"])
        if (f["id"] == "devices.not_accessible") found = &f;
    ASSERT_NE(found, nullptr) << out;
    EXPECT_EQ((*found)["severity"], "error");
    ASSERT_EQ((*found)["subjects"].size(), 1u);
    EXPECT_EQ((*found)["subjects"][0]["uuid"], kGpu1);
    EXPECT_EQ((*found)["subjects"][0]["pci"], "0000:00:07.0");
}

// ---- devices.gpu_node_missing inside a container judges only the GPUs it was given.

TEST(Devices, ContainerMissesNoNodeForAGpuItWasNotGiven) {
    auto dir = copy_of_h200("container");
    fs::remove(dir / "dev/nvidia0.devnode");  // the container got only /dev/nvidia1 (0000:00:07.0)
    Root root(dir);
    CollectOptions opts;
    opts.probe_driver = false;
    auto snap = take_snapshot(root, opts);
    fs::remove_all(dir);
    snap.environment.container.in_container = true;
    snap.environment.container.runtime = "kubernetes";
    snap.environment.variables["NVIDIA_VISIBLE_DEVICES"] = kGpu1;
    DiagnoseOptions o;
    EXPECT_EQ(by_id(diagnose(snap, o).findings, "devices.gpu_node_missing"), nullptr);
    // Given 0000:00:06.0 instead, its missing node is an error again.
    snap.environment.variables["NVIDIA_VISIBLE_DEVICES"] = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    auto findings = diagnose(snap, o).findings;
    auto* f = by_id(findings, "devices.gpu_node_missing");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:06.0");
    // On the host (no container) the variable selects nothing: every GPU's node is expected.
    snap.environment.container.in_container = false;
    snap.environment.variables["NVIDIA_VISIBLE_DEVICES"] = kGpu1;
    EXPECT_NE(by_id(diagnose(snap, o).findings, "devices.gpu_node_missing"), nullptr);
}

TEST(Devices, KfdMissingNamesTheAmdGpus) {
    Snapshot s;
    for (auto c : {Collector::pcie, Collector::module, Collector::devices}) s.collectors.push_back(status_ok(c));
    PciDevice amd;
    amd.address = "0000:c1:00.0";
    amd.vendor_id = 0x1002;
    amd.is_gpu = true;
    s.pcie.devices.push_back(amd);
    DeviceNode render;
    render.path = "/dev/dri/renderD128";
    render.type = "char";
    render.major = 226u;
    render.minor = 128u;
    render.mode = 0666u;
    s.devices.nodes.push_back(render);
    DiagnoseOptions o;
    auto findings = diagnose(s, o).findings;
    auto* f = by_id(findings, "devices.kfd_missing");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, "0000:c1:00.0");
    EXPECT_NE(f->message.find("0000:c1:00.0"), std::string::npos) << f->message;
}

}  // namespace GPUDX_UNITY_ID
