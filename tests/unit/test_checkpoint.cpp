#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "actions/checkpoint.hpp"
#include "render/checkpoint.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::string kGpu0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const std::string kGpu1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

// A driver that keeps each process's state, records every call, and fails a chosen step.
class FakeDriver : public CheckpointDriver {
public:
    FakeDriver() {
        info_.library_path = "fake/libcuda.so.1";
        info_.init = CallResult{};
        info_.cuda_version = 13000;
        info_.driver_version = "580.159.04";
    }
    const DriverInfo& info() const override { return info_; }
    std::vector<CheckpointGpu> gpus() override {
        return {{0, kGpu0, "0000:00:06.0", "NVIDIA H200", 100ULL << 30, 141ULL << 30},
                {1, kGpu1, "0000:00:07.0", "NVIDIA H200", 100ULL << 30, 141ULL << 30}};
    }
    MemoryHeld memory_held(const std::vector<int>&) override { return std::nullopt; }

    CallResult lock(int pid, unsigned timeout_ms) override {
        return step("lock", pid, ProcessState::running, ProcessState::locked, std::to_string(timeout_ms));
    }
    CallResult checkpoint(int pid) override { return step("checkpoint", pid, ProcessState::locked, ProcessState::checkpointed); }
    CallResult restore(int pid, const std::vector<GpuPair>& pairs) override {
        return step("restore", pid, ProcessState::checkpointed, ProcessState::locked, std::to_string(pairs.size()));
    }
    CallResult unlock(int pid) override { return step("unlock", pid, ProcessState::locked, ProcessState::running); }
    StateResult state(int pid) override {
        StateResult s;
        s.state = states[pid];
        if (state_fails) {
            s.call.code = 999;
            s.call.name = "CUDA_ERROR_UNKNOWN";
        }
        return s;
    }

    std::map<int, ProcessState> states;
    std::vector<std::string> calls;  // "lock 11", "restore 12 pairs=2"
    std::string fail_step;
    int fail_pid = 0;  // 0: any
    int fail_code = 999;
    bool state_fails = false;
    DriverInfo info_;

private:
    CallResult step(const std::string& name, int pid, ProcessState from, ProcessState to, const std::string& arg = {}) {
        calls.push_back(name + " " + std::to_string(pid) + (arg.empty() ? "" : " " + arg));
        CallResult r;
        r.seconds = 0.25;
        r.wall_seconds = 0.26;
        if (name == fail_step && (fail_pid == 0 || fail_pid == pid)) {
            r.code = fail_code;
            r.name = "CUDA_ERROR_UNKNOWN";
            r.meaning = "unknown error";
        } else if (states[pid] != from) {
            r.code = 401;
            r.name = "CUDA_ERROR_ILLEGAL_STATE";
        } else {
            states[pid] = to;
        }
        return r;
    }
};

CheckpointPlan migrate_plan(std::vector<int> pids) {
    CheckpointPlan p;
    p.pids = std::move(pids);
    p.steps = {CheckpointStep::lock, CheckpointStep::checkpoint, CheckpointStep::restore, CheckpointStep::unlock};
    p.pairs = {{kGpu0, kGpu1}, {kGpu1, kGpu0}};
    return p;
}
}  // namespace

TEST(CheckpointPlan, EveryStepRunsForAllProcessesBeforeTheNext) {
    FakeDriver d;
    auto report = run_checkpoint_plan(migrate_plan({11, 12}), d);
    EXPECT_TRUE(report.ok());
    std::vector<std::string> want = {"lock 11 0",  "lock 12 0",     "checkpoint 11", "checkpoint 12",
                                     "restore 11 2", "restore 12 2", "unlock 11",     "unlock 12"};
    EXPECT_EQ(d.calls, want);
    ASSERT_EQ(report.final_states.size(), 2u);
    EXPECT_EQ(report.final_states[0].state, ProcessState::running);
    EXPECT_EQ(report.steps.size(), 8u);
    EXPECT_DOUBLE_EQ(report.steps[0].result.seconds, 0.25);
}

TEST(CheckpointPlan, FailedCheckpointUnlocksEveryLockedProcess) {
    FakeDriver d;
    d.fail_step = "checkpoint";
    d.fail_pid = 12;
    auto report = run_checkpoint_plan(migrate_plan({11, 12}), d);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.failure->pid, 12);
    EXPECT_EQ(report.failure->step, CheckpointStep::checkpoint);
    EXPECT_EQ(report.failure->result.name, "CUDA_ERROR_UNKNOWN");
    // 11 was checkpointed: it is restored onto its own GPUs (no pairs) and unlocked; 12 only unlocked.
    std::vector<std::string> want = {"lock 11 0", "lock 12 0", "checkpoint 11", "checkpoint 12",
                                     "restore 11 0", "unlock 11", "unlock 12"};
    EXPECT_EQ(d.calls, want);
    EXPECT_TRUE(report.steps[4].rollback);
    EXPECT_EQ(d.states[11], ProcessState::running);
    EXPECT_EQ(d.states[12], ProcessState::running);
    EXPECT_EQ(report.final_states[1].state, ProcessState::running);
}

TEST(CheckpointPlan, FailedLockUnlocksTheOnesAlreadyLocked) {
    FakeDriver d;
    d.fail_step = "lock";
    d.fail_pid = 12;
    auto report = run_checkpoint_plan(migrate_plan({11, 12}), d);
    EXPECT_FALSE(report.ok());
    std::vector<std::string> want = {"lock 11 0", "lock 12 0", "unlock 11"};
    EXPECT_EQ(d.calls, want);
}

TEST(CheckpointPlan, RollbackFallsBackToTrackedStateWhenTheDriverCannotSay) {
    FakeDriver d;
    d.fail_step = "checkpoint";
    d.state_fails = true;
    auto report = run_checkpoint_plan(migrate_plan({11}), d);
    std::vector<std::string> want = {"lock 11 0", "checkpoint 11", "unlock 11"};
    EXPECT_EQ(d.calls, want);
    EXPECT_NE(report.final_states[0].state_error.find("CUDA_ERROR_UNKNOWN"), std::string::npos);
}

TEST(CheckpointPlan, NoUnlockOnRollbackLeavesProcessesLocked) {
    FakeDriver d;
    d.fail_step = "restore";
    auto plan = migrate_plan({11});
    plan.unlock_on_rollback = false;
    auto report = run_checkpoint_plan(plan, d);
    EXPECT_FALSE(report.ok());
    // The undo restore fails too (same injected fault): the process stays checkpointed, nothing else is tried.
    std::vector<std::string> want = {"lock 11 0", "checkpoint 11", "restore 11 2", "restore 11 0"};
    EXPECT_EQ(d.calls, want);
    EXPECT_EQ(report.final_states[0].state, ProcessState::checkpointed);
}

TEST(CheckpointPlan, SingleStepWithoutRollbackOnlyReports) {
    FakeDriver d;
    d.states[11] = ProcessState::locked;
    d.fail_step = "checkpoint";
    CheckpointPlan plan;
    plan.pids = {11};
    plan.steps = {CheckpointStep::checkpoint};
    plan.rollback_on_failure = false;
    auto report = run_checkpoint_plan(plan, d);
    EXPECT_FALSE(report.ok());
    EXPECT_EQ(d.calls, std::vector<std::string>{"checkpoint 11"});
    EXPECT_EQ(report.final_states[0].state, ProcessState::locked);
}

TEST(CheckpointDriverInfo, RemapNeedsThe580Branch) {
    DriverInfo d;
    d.driver_version = "580.159.04";
    EXPECT_TRUE(d.can_remap());
    d.driver_version = "570.124.06";
    d.cuda_version = 13000;  // the branch wins over the CUDA version
    EXPECT_FALSE(d.can_remap());
    d.driver_version.clear();
    EXPECT_TRUE(d.can_remap());
    d.cuda_version = 12080;
    EXPECT_FALSE(d.can_remap());
    EXPECT_EQ(driver_branch("535.183.01"), 535);
    EXPECT_EQ(driver_branch("garbage"), std::nullopt);
}

TEST(CheckpointDriverInfo, ReadsTheVersionFromProcDriverNvidia) {
    EXPECT_EQ(parse_nvrm_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Wed Jan 14 2026\n"
                                 "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
              "580.159.04");
    EXPECT_EQ(parse_nvrm_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"),
              "570.86.15");
    EXPECT_EQ(parse_nvrm_version("nothing here"), "");
}

TEST(CheckpointSafety, ReadsTheRealUidFromProcStatus) {
    EXPECT_EQ(parse_status_uid("Name:\tsleep\nState:\tS (sleeping)\nUid:\t1000\t1001\t1002\t1003\nGid:\t0\t0\t0\t0\n"),
              1000u);
    EXPECT_EQ(parse_status_uid("Name:\tsleep\n"), std::nullopt);
    EXPECT_EQ(parse_status_uid("Uid:\tx\n"), std::nullopt);
}

TEST(CheckpointSafety, OwnProcessIsAllowedAndOthersRefusedUnlessRoot) {
    Root live("/");
    unsigned me = ::geteuid();
    EXPECT_TRUE(check_process_access(live, ::getpid(), me));
    auto refused = check_process_access(live, ::getpid(), me + 1);
    if (me + 1 != 0) {
        ASSERT_FALSE(refused);
        EXPECT_NE(refused.error().message.find("refusing process"), std::string::npos);
    }
    EXPECT_TRUE(check_process_access(live, ::getpid(), 0));  // root may
    EXPECT_FALSE(check_process_access(live, -5, 0));
}

TEST(CheckpointSafety, SetuidProcessOfTheCallerIsNotItsOwn) {
    // A process the caller started that runs as root (real uid the caller's, effective 0): refused like
    // ptrace would, unless the caller is root.
    auto dir = std::filesystem::temp_directory_path() / ("gpudx-setuid-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "proc/4242");
    std::ofstream(dir / "proc/4242/status") << "Name:\tpasswd\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
    std::filesystem::create_directories(dir / "proc/4243");
    std::ofstream(dir / "proc/4243/status") << "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\n";
    Root root(dir);
    auto refused = check_process_access(root, 4242, 1000);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("credentials of uid 0"), std::string::npos) << refused.error().message;
    EXPECT_TRUE(check_process_access(root, 4242, 0));
    EXPECT_TRUE(check_process_access(root, 4243, 1000));
    EXPECT_FALSE(check_process_access(root, 4243, 1001));
    std::filesystem::remove_all(dir);
}

TEST(CheckpointCommand, BadMapIsRefusedBeforeTheDriverLocksAnything) {
    FakeDriver d;
    CheckpointRequest rq;
    rq.command = CheckpointCommand::migrate;
    rq.pids = {::getpid()};
    rq.device_map = "0=1";
    auto r = run_checkpoint_command(rq, Root("/"), &d);
    EXPECT_EQ(r.exit_code, 64);
    EXPECT_NE(r.usage_error.find("not a permutation"), std::string::npos);
    EXPECT_TRUE(d.calls.empty());
}

TEST(CheckpointCommand, MissingEntryPointsMeanAnOldDriver) {
    FakeDriver d;
    d.info_.missing_entry_points = {"cuCheckpointProcessLock"};
    d.info_.driver_version = "535.183.01";
    CheckpointRequest rq;
    rq.command = CheckpointCommand::checkpoint;
    rq.pids = {::getpid()};
    auto r = run_checkpoint_command(rq, Root("/"), &d);
    EXPECT_EQ(r.exit_code, 3);
    ASSERT_FALSE(r.notes.empty());
    EXPECT_NE(r.notes[0].find("cuCheckpointProcessLock"), std::string::npos);
    EXPECT_NE(r.notes[0].find("driver 550"), std::string::npos);
    EXPECT_TRUE(d.calls.empty());
}

TEST(CheckpointCommand, JsonHasPerProcessTimingsAndTheFullPairList) {
    FakeDriver d;
    CheckpointRequest rq;
    rq.command = CheckpointCommand::migrate;
    rq.pids = {::getpid()};
    rq.device_map = "swap:0,1";
    auto r = run_checkpoint_command(rq, Root("/"), &d);
    ASSERT_EQ(r.exit_code, 0) << render_checkpoint_text(r);
    auto j = checkpoint_result_to_json(r);
    EXPECT_EQ(j["command"], "migrate");
    EXPECT_DOUBLE_EQ(j["timings"][0]["checkpoint_s"].get<double>(), 0.25);
    EXPECT_DOUBLE_EQ(j["steps"][0]["wall_seconds"].get<double>(), 0.26);
    ASSERT_EQ(j["device_map"]["pairs"].size(), 2u);
    EXPECT_EQ(j["device_map"]["pairs"][1]["old_uuid"], kGpu1);
    EXPECT_EQ(j["device_map"]["pairs"][1]["new_pci"], "0000:00:06.0");
    // This test process has no shim: the stale-address warning tells how to start one with it.
    ASSERT_EQ(j["verify"].size(), 1u);
    EXPECT_EQ(j["verify"][0]["shim_loaded"], false);
    auto text = render_checkpoint_text(r);
    EXPECT_NE(text.find("LD_PRELOAD="), std::string::npos) << text;
    EXPECT_NE(text.find("250.0 ms"), std::string::npos) << text;
}

}  // namespace GPUDX_UNITY_ID
