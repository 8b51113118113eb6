// The per-process view (`gpudx diagnose --pid`): its parsers on literal text, the collector on a captured tree and
// on real processes of this machine, and its rules.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "actions/slurm.hpp"
#include "collect/collectors.hpp"
#include "collect/process.hpp"
#include "fleet/fleet.hpp"
#include "rules/engine/diagnose.hpp"
#include "test_support.hpp"

namespace gpudx {
namespace {
namespace fs = std::filesystem;
using namespace std::string_literals;
using test::scratch;
using test::write_file;

TEST(ProcMaps, KeepsEachGpuLibraryOnceWithItsVersion) {
    auto mapped = parse_proc_maps(
        "7f1c00000000-7f1c00200000 r--p 00000000 fd:01 1234   /opt/my app/lib/libcuda.so.535.104.05\n"
        "7f1c00200000-7f1c00400000 r-xp 00200000 fd:01 1234   /opt/my app/lib/libcuda.so.535.104.05\n"
        "7f1c10000000-7f1c10100000 r--p 00000000 fd:01 99 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05 "
        "(deleted)\n"
        "7f1c20000000-7f1c20100000 r--p 00000000 fd:01 77 /usr/local/cuda-12.4/lib64/libcudart.so.12.4.127\n"
        "7f1c30000000-7f1c30100000 r--p 00000000 fd:01 78 /usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n"
        "7f1c40000000-7f1c40100000 r--p 00000000 fd:01 79 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f1c50000000-7f1c50100000 rw-p 00000000 00:00 0 \n"
        "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
        "garbage\n");
    ASSERT_EQ(mapped.size(), 4u);
    EXPECT_EQ(mapped[0].soname, "libcuda.so.1");
    EXPECT_EQ(mapped[0].path, "/opt/my app/lib/libcuda.so.535.104.05");
    EXPECT_EQ(mapped[0].version, "535.104.05");
    EXPECT_FALSE(mapped[0].deleted);
    EXPECT_EQ(mapped[1].soname, "libnvidia-ml.so.1");
    EXPECT_EQ(mapped[1].version, "580.95.05");
    EXPECT_TRUE(mapped[1].deleted);
    EXPECT_EQ(mapped[2].soname, "libcudart.so.12");
    EXPECT_EQ(mapped[2].version, "12.4.127");
    EXPECT_EQ(mapped[3].soname, "libnccl.so.2");
    EXPECT_EQ(mapped[3].version, "2.21.5");
}

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

TEST(ProcMaps, ALibcudaNamedOnlyBySonameHasNoVersion) {
    auto mapped = parse_proc_maps("7f00-7f01 r--p 00000000 fd:01 5 /app/libcuda.so.1\n");
    ASSERT_EQ(mapped.size(), 1u);
    EXPECT_EQ(mapped[0].version, "");
}

// A saved snapshot (--from) whose process state is no name gpudx writes is refused, naming the value: read back as
// "read", a process gpudx could not read would be judged as if it had been.
TEST(ProcessViewJson, AStateNoTableDeclaresIsRefusedByBothReaders) {
    Snapshot s;
    ProcessView v;
    v.pid = 7;
    v.state = ProcessViewState::denied;
    s.processes.push_back(v);
    auto j = snapshot_to_json(s);
    EXPECT_EQ(j["processes"][0]["state"], "denied");
    auto back = snapshot_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->processes.at(0).state, ProcessViewState::denied);

    j["processes"][0]["state"] = "zombie";
    auto full = snapshot_from_json(j);
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().message, "snapshot does not match the schema: \"zombie\" is not read, gone or denied");
    auto streamed = read_whole_snapshot(j.dump());
    ASSERT_FALSE(streamed);
    EXPECT_EQ(streamed.error().message,
              "snapshot does not match the schema: processes.state \"zombie\" is not read, gone or denied");
    auto file = write_file(scratch("process-state") / "node.json", j.dump());
    auto loaded = load_snapshot_file(file);
    ASSERT_FALSE(loaded);
    EXPECT_EQ(loaded.error().path, file);
}

TEST(ProcEnviron, SplitsOnNulAndTheFirstOfANameWins) {
    std::string text = "CUDA_VISIBLE_DEVICES=GPU-1\0LD_LIBRARY_PATH=/a:/b\0=bad\0NOVALUE\0CUDA_VISIBLE_DEVICES=2\0"s;
    auto env = parse_proc_environ(text);
    EXPECT_EQ(env.size(), 2u);
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-1");
    EXPECT_EQ(env["LD_LIBRARY_PATH"], "/a:/b");
}

TEST(ScontrolListpids, KeepsTheJobsRowsOnly) {
    auto pids = parse_scontrol_listpids(
        "PID      JOBID    STEPID   LOCALID GLOBALID\n"
        "1887     42       batch    0       0\n"
        "1886     42       0        0       0\n"
        "1886     42       0        0       0\n"
        "2001     42_3     0        0       0\n"
        "3000     420      0        0       0\n",
        "42");
    EXPECT_EQ(pids, (std::vector<int>{1886, 1887, 2001}));
    EXPECT_TRUE(parse_scontrol_listpids("PID JOBID STEPID LOCALID GLOBALID\n", "42").empty());
}

TEST(SlurmJobPids, FallsBackToTheJobsCgroup) {
    auto dir = scratch("slurm-cgroup");
    auto job = dir / "sys/fs/cgroup/system.slice/slurmstepd.scope/job_42";
    fs::create_directories(job / "step_0/user/task_0");
    write_file(job / "step_0/user/task_0/cgroup.procs", "1886\n1890\n");
    write_file(job / "cgroup.procs", "");
    fs::create_directories(dir / "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7");
    write_file(dir / "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/cgroup.procs", "5\n");
    Root root(dir);
    auto pids = slurm_job_pids(root, {"42", "scontrol", std::chrono::milliseconds(1000)});
    ASSERT_TRUE(pids) << pids.error().message;
    EXPECT_EQ(*pids, (std::vector<int>{1886, 1890}));
    auto none = slurm_job_pids(root, {"43", "scontrol", std::chrono::milliseconds(1000)});
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().message.find("no cgroup job_43"), std::string::npos) << none.error().message;
}

// A capture of one containerised process: its own libcuda 535 in the image, the host's module 580.
fs::path containerised_process_tree() {
    auto dir = scratch("process-tree");
    auto proc = dir / "proc/4242";
    fs::create_directories(proc / "fd");
    fs::create_directories(proc / "ns");
    write_file(proc / "status", "Name:\tpython3\nState:\tS (sleeping)\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\n");
    write_file(proc / "comm", "python3\n");
    write_file(proc / "cgroup",
               "0::/system.slice/docker-3f2a9c0d1e4b5a6978877665544332211aabbccddeeff0011223344556677889.scope\n");
    std::string environ_text = "CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000\0SLURM_JOB_ID=77\0"
                          "LD_LIBRARY_PATH=/opt/app/lib\0SECRET_TOKEN=x\0"s;
    write_file(proc / "environ", environ_text);
    write_file(proc / "maps", "7f00-7f01 r--p 00000000 fd:01 5 /opt/app/lib/libcuda.so.535.104.05\n");
    fs::create_symlink("/dev/nvidia0", proc / "fd/7");
    fs::create_symlink("/dev/nvidiactl", proc / "fd/8");
    fs::create_symlink("socket:[123]", proc / "fd/9");
    fs::create_symlink("mnt:[4026532999]", proc / "ns/mnt");
    fs::create_directories(dir / "proc/1/ns");
    fs::create_symlink("mnt:[4026531841]", dir / "proc/1/ns/mnt");
    fs::create_symlink("1", dir / "proc/self");
    fs::create_directories(dir / "etc");
    write_file(dir / "etc/passwd", "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n");
    auto own = proc / "root";
    fs::create_directories(own / "opt/app/lib");
    write_file(own / "opt/app/lib/libcuda.so.535.104.05", "");
    fs::create_symlink("libcuda.so.535.104.05", own / "opt/app/lib/libcuda.so.1");
    fs::create_directories(own / "dev");
    write_file(own / "dev/nvidia0.devnode", "0o20666 195:0");
    write_file(own / "dev/nvidiactl.devnode", "0o20666 195:255");
    write_file(own / ".dockerenv", "");
    return dir;
}

TEST(CollectProcess, ReadsItsViewThroughItsOwnRoot) {
    auto dir = containerised_process_tree();
    Root root(dir);
    auto v = collect_process(root, 4242);
    EXPECT_EQ(v.state, ProcessViewState::read) << v.problem;
    EXPECT_EQ(v.command, "python3");
    EXPECT_EQ(v.uid, 1000u);
    EXPECT_EQ(v.user, "alice");
    EXPECT_EQ(v.slurm_job_id, "77");
    EXPECT_EQ(v.own_mount_namespace, true);
    ASSERT_EQ(v.mapped.size(), 1u);
    EXPECT_EQ(v.mapped[0].version, "535.104.05");
    EXPECT_EQ(v.open_devices, (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl"}));
    EXPECT_TRUE(v.environment.container.in_container);
    EXPECT_EQ(v.environment.container.runtime, "docker");
    EXPECT_EQ(v.environment.container.container_id.substr(0, 12), "3f2a9c0d1e4b");
    EXPECT_EQ(v.environment.variables.count("SECRET_TOKEN"), 0u) << "only the GPU-related variables are kept";
    EXPECT_EQ(v.environment.variables["CUDA_VISIBLE_DEVICES"], "GPU-00000000-0000-0000-0000-000000000000");
    // Its loader's next pick, from its own LD_LIBRARY_PATH inside its own root.
    auto lib = std::find_if(v.libraries.libraries.begin(), v.libraries.libraries.end(),
                            [](auto& l) { return l.soname == "libcuda.so.1"; });
    ASSERT_NE(lib, v.libraries.libraries.end());
    ASSERT_TRUE(lib->chosen);
    EXPECT_EQ(lib->chosen->path, "/opt/app/lib/libcuda.so.1");
    EXPECT_EQ(lib->chosen->version, "535.104.05");
    EXPECT_EQ(v.device_nodes.size(), 2u);
}

TEST(CollectProcess, AMissingProcessIsGone) {
    auto dir = containerised_process_tree();
    auto v = collect_process(Root(dir), 999);
    EXPECT_EQ(v.state, ProcessViewState::gone);
    EXPECT_NE(v.problem.find("/proc/999/status"), std::string::npos) << v.problem;
}

TEST(CollectProcess, AZombieIsGone) {
    auto dir = containerised_process_tree();
    write_file(dir / "proc/4242/status", "Name:\tpython3\nState:\tZ (zombie)\nUid:\t1000\t1000\t1000\t1000\n");
    auto v = collect_process(Root(dir), 4242);
    EXPECT_EQ(v.state, ProcessViewState::gone);
    EXPECT_NE(v.problem.find("zombie"), std::string::npos) << v.problem;
}

Snapshot node_with_module(const std::string& version) {
    Snapshot s;
    s.module.nvidia_driver_version = version;
    NvidiaProcGpu g;
    g.address = "0000:18:00.0";
    g.uuid = "GPU-5b1c2d3e-0000-1111-2222-333344445555";
    g.minor = 0;
    s.module.nvidia_gpus.push_back(g);
    for (auto name : {"host", "pcie", "module", "kernel_log", "libraries", "devices", "environment"}) {
        CollectorStatus c;
        c.name = name;
        c.state = CollectorState::ok;
        s.collectors.push_back(c);
    }
    return s;
}

std::vector<const Finding*> with_id(const Diagnosis& d, std::string_view id) {
    std::vector<const Finding*> out;
    for (auto& f : d.findings)
        if (f.id == id) out.push_back(&f);
    return out;
}

// A process gpudx read whole, to be given the view a test is about.
ProcessView read_view(int pid, std::string command, bool own_mount_namespace) {
    ProcessView v;
    v.pid = pid;
    v.state = ProcessViewState::read;
    v.command = std::move(command);
    v.own_mount_namespace = own_mount_namespace;
    return v;
}

TEST(ProcessRules, JudgeTheContainerisedProcessAsItSeesTheStack) {
    auto dir = containerised_process_tree();
    Snapshot s = node_with_module("580.95.05");
    s.processes.push_back(collect_process(Root(dir), 4242));
    auto d = diagnose(s, {});
    EXPECT_EQ(d.exit_code, kExitErrors);
    auto mismatch = with_id(d, "process.libcuda_version_mismatch");
    ASSERT_EQ(mismatch.size(), 1u);
    const Finding& f = *mismatch[0];
    EXPECT_EQ(f.severity, Severity::error);
    EXPECT_NE(f.message.find("/opt/app/lib/libcuda.so.535.104.05"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("535.104.05"), std::string::npos);
    EXPECT_NE(f.message.find("580.95.05"), std::string::npos);
    ASSERT_TRUE(f.process);
    EXPECT_EQ(f.process->pid, 4242);
    EXPECT_EQ(f.process->command, "python3");
    EXPECT_EQ(f.process->user, "alice");
    EXPECT_EQ(f.process->container, "docker 3f2a9c0d1e4b");
    EXPECT_EQ(f.process->job, "77");
    // The loader's prediction for a library it has mapped is left to the mapped rule.
    EXPECT_TRUE(with_id(d, "libs.version_mismatch").empty());
    EXPECT_EQ(with_id(d, "process.image_driver_library").size(), 1u);
    // Its environment through the allocation rules: a UUID no GPU here has.
    auto uuid = with_id(d, "allocation.uuid_not_on_node");
    ASSERT_EQ(uuid.size(), 1u);
    ASSERT_TRUE(uuid[0]->process);
    EXPECT_EQ(uuid[0]->process->pid, 4242);
    auto open = with_id(d, "process.gpus_open");
    ASSERT_EQ(open.size(), 1u);
    ASSERT_EQ(open[0]->subjects.size(), 1u);
    EXPECT_EQ(open[0]->subjects[0].uuid, "GPU-5b1c2d3e-0000-1111-2222-333344445555");
    EXPECT_EQ(open[0]->subjects[0].pci, "0000:18:00.0");
    for (auto& finding : d.findings) {
        if (finding.id.starts_with("process.") || finding.id.starts_with("allocation.")) {
            EXPECT_TRUE(finding.process) << finding.id << " names no process";
        }
    }
}

TEST(ProcessRules, AProcessOnAnAmdNodeGoesThroughTheRocmRulesToo) {
    // The 8xMI300X tree; the process pins its GPUs by another node's ROCm UUIDs and can open /dev/kfd as a CUDA job.
    Root root(std::string(GPUDX_TEST_FIXTURES) + "/mi300x8");
    CollectOptions options;
    options.probe_driver = false;
    Snapshot s = take_snapshot(root, options);
    ProcessView v = read_view(31337, "hip_train", false);
    v.libraries = s.libraries;
    v.device_nodes = s.devices.nodes;
    v.environment.variables = {{"SLURM_JOB_ID", "90112"}, {"ROCR_VISIBLE_DEVICES", "GPU-5c6b9d1e2f3a4b7c"}};
    s.processes.push_back(v);
    auto d = diagnose(s, {});
    auto invalid = with_id(d, "allocation.rocm_visible_devices_invalid");
    ASSERT_EQ(invalid.size(), 1u);
    ASSERT_TRUE(invalid[0]->process);
    EXPECT_EQ(invalid[0]->process->pid, 31337);
    EXPECT_NE(invalid[0]->message.find("GPU-5c6b9d1e2f3a4b7c"), std::string::npos) << invalid[0]->message;
    // The node's own AMD findings are not said again for the process that sees the same node.
    for (auto& f : d.findings)
        if (f.process) EXPECT_NE(f.id, "pcie.mixed_vendors") << f.message;
}

TEST(ProcessRules, AProcessThatMappedTheToolkitsStubIsAnError) {
    Snapshot s = node_with_module("580.95.05");
    ProcessView v = read_view(12, "python3", true);
    v.mapped.push_back({"libcuda.so.1", "/usr/local/cuda-12.4/targets/x86_64-linux/lib/stubs/libcuda.so", "", false});
    s.processes.push_back(v);
    auto d = diagnose(s, {});
    auto stub = with_id(d, "process.stub_mapped");
    ASSERT_EQ(stub.size(), 1u);
    EXPECT_EQ(stub[0]->severity, Severity::error);
    EXPECT_NE(stub[0]->message.find("CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << stub[0]->message;
    EXPECT_TRUE(with_id(d, "process.library_not_hosts").empty()) << "the stub is said once, as what it is";
    EXPECT_EQ(d.exit_code, kExitErrors);
}

TEST(ProcessRules, AProcessOnTheHostsOwnLibcudaIsQuiet) {
    Snapshot s = node_with_module("580.95.05");
    ResolvedLibrary host;
    host.soname = "libcuda.so.1";
    host.chosen = LibraryCopy{"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                              "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", "580.95.05", "ld.so.cache", true};
    host.copies = {*host.chosen};
    s.libraries.libraries.push_back(host);
    ProcessView v = read_view(10, "train", false);
    v.mapped.push_back({"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", "580.95.05", false});
    v.libraries = s.libraries;
    s.processes.push_back(v);
    auto d = diagnose(s, {});
    for (auto& f : d.findings) EXPECT_FALSE(f.process) << f.id << ": " << f.message;
}

TEST(ProcessRules, AnUnreadableProcessSaysHowToReadIt) {
    Snapshot s = node_with_module("580.95.05");
    ProcessView v;
    v.pid = 11;
    v.state = ProcessViewState::denied;
    v.command = "train";
    v.problem = "/proc/11/environ: cannot open: Permission denied: run as its owner (alice) or root";
    s.processes.push_back(v);
    auto d = diagnose(s, {});
    auto denied = with_id(d, "process.denied");
    ASSERT_EQ(denied.size(), 1u);
    EXPECT_NE(denied[0]->message.find("run as its owner"), std::string::npos);
    EXPECT_EQ(denied[0]->process->pid, 11);
}

// A Root that ends the process it reads once gpudx reaches its maps: the process exits mid-read, for real.
class EndsProcessAtMaps : public Root {
public:
    explicit EndsProcessAtMaps(pid_t pid) : Root("/"), pid_(pid) {}
    Result<std::string> read_file(std::string_view p, size_t max) const override {
        if (p.ends_with("/maps") && !ended_) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            ::waitpid(pid_, &status, 0);  // reaped: /proc/PID is gone, not a zombie
            ended_ = true;
        }
        return Root::read_file(p, max);
    }
    bool ended() const { return ended_; }

private:
    pid_t pid_;
    mutable bool ended_ = false;
};

// A child that waits on a pipe until it is killed (no sleep: it blocks in read).
pid_t waiting_child(int& write_end) {
    int fds[2];
    if (::pipe(fds) != 0) return -1;
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[1]);
        char c;
        while (::read(fds[0], &c, 1) > 0) {
        }
        ::_exit(0);
    }
    ::close(fds[0]);
    write_end = fds[1];
    return pid;
}

TEST(CollectProcess, AProcessThatExitsMidReadIsReportedGone) {
    int pipe_write = -1;
    pid_t child = waiting_child(pipe_write);
    ASSERT_GT(child, 0);
    EndsProcessAtMaps root(child);
    auto v = collect_process(root, child);
    ::close(pipe_write);
    EXPECT_TRUE(root.ended());
    EXPECT_EQ(v.state, ProcessViewState::gone) << v.problem;
    EXPECT_NE(v.problem.find("exited while gpudx read it"), std::string::npos) << v.problem;
    EXPECT_FALSE(v.command.empty()) << "what was read before it exited is kept";
}

TEST(CollectProcess, ReadsALiveChildOfThisTest) {
    int pipe_write = -1;
    pid_t child = waiting_child(pipe_write);
    ASSERT_GT(child, 0);
    auto v = collect_process(Root("/"), child);
    ::close(pipe_write);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_EQ(v.state, ProcessViewState::read) << v.problem;
    EXPECT_EQ(v.uid, static_cast<uint32_t>(::getuid()));
    EXPECT_EQ(v.own_mount_namespace, false);
    EXPECT_FALSE(v.libraries.libraries.empty()) << "its loader view (its root is this test's own: read directly)";
}

}  // namespace
}  // namespace gpudx

}  // namespace GPUDX_UNITY_ID
