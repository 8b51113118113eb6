// gpudx state/checkpoint/restore/migrate end to end, against the recording stand-in libcuda.so.1.
// Each test starts its own `sleep` processes as targets and reads the stand-in's call log.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

const std::string kGpu0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const std::string kGpu1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(line);
    return out;
}

// A target process this test owns: `sleep`, optionally with a library preloaded.
struct Target {
    pid_t pid = -1;
    explicit Target(const std::string& preload = {}) {
        pid = ::fork();
        if (pid == 0) {
            if (!preload.empty()) ::setenv("LD_PRELOAD", preload.c_str(), 1);
            ::execlp("sleep", "sleep", "120", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        // gpudx reads /proc/PID/maps: wait until it shows `sleep` (and the preload), however long that takes.
        std::string wanted = preload.empty() ? std::string() : fs::canonical(preload).string();
        while (!exec_done(wanted) && !exited()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    bool exec_done(const std::string& preload) const {
        std::error_code ec;
        auto exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
        if (ec || exe == fs::read_symlink("/proc/self/exe", ec)) return false;
        return preload.empty() || read_text("/proc/" + std::to_string(pid) + "/maps").find(preload) != std::string::npos;
    }
    bool exited() const {
        int status = 0;
        return ::waitpid(pid, &status, WNOHANG) == pid;
    }
    ~Target() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
    bool alive() const { return ::kill(pid, 0) == 0; }
};

struct GpudxRun {
    int exit_code = -1;
    std::string out, err;
    std::vector<std::string> log;  // the stand-in's calls
    double seconds = 0;
};

class CheckpointCli : public ::testing::Test {
protected:
    void SetUp() override {
        auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        work_ = fs::path(CKPT_WORK) / (std::string(info->name()) + "-" + std::to_string(::getpid()));
        fs::remove_all(work_);
        fs::create_directories(work_);
    }
    void TearDown() override { fs::remove_all(work_); }

    // Runs gpudx with the stand-in environment; `env` is extra "NAME=value" words.
    GpudxRun gpudx(const std::string& args, const std::string& env = {}, const std::string& lib = CKPT_LIB) {
        auto log = work_ / "calls.log", out = work_ / "out.txt", err = work_ / "err.txt";
        fs::remove(log);
        std::string command = "env -u CUDA_VISIBLE_DEVICES GPUDX_CKPT_LOG=" + log.string() + " " + env + " " +
                              GPUDX_BINARY + " " + args + " --driver-lib-dir " + lib + " >" + out.string() + " 2>" +
                              err.string();
        auto start = std::chrono::steady_clock::now();
        int status = std::system(command.c_str());
        GpudxRun r;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        r.out = read_text(out);
        r.err = read_text(err);
        r.log = lines_of(read_text(log));
        return r;
    }

    // The checkpoint calls in the log, without state queries and cuInit: "lock 12", "checkpoint 12", …
    static std::vector<std::string> steps(const GpudxRun& r) {
        std::vector<std::string> out;
        for (const auto& line : r.log) {
            for (auto [call, name] : {std::pair{"cuCheckpointProcessLock pid=", "lock"},
                                      {"cuCheckpointProcessCheckpoint pid=", "checkpoint"},
                                      {"cuCheckpointProcessRestore pid=", "restore"},
                                      {"cuCheckpointProcessUnlock pid=", "unlock"}}) {
                std::string prefix = call;
                if (line.rfind(prefix, 0) != 0) continue;
                auto pid = line.substr(prefix.size(), line.find(' ', prefix.size()) - prefix.size());
                out.push_back(std::string(name) + " " + pid);
            }
        }
        return out;
    }

    fs::path work_;
};

TEST_F(CheckpointCli, MigrateSwapGivesTheDriverEveryGpuAsAPair) {
    Target t;
    auto r = gpudx("migrate " + std::to_string(t.pid) + " --device-map swap:0,1");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string want = "cuCheckpointProcessRestore pid=" + std::to_string(t.pid) + " pairs=" + kGpu0 + "=" + kGpu1 +
                       "," + kGpu1 + "=" + kGpu0 + " -> 0";
    EXPECT_NE(std::find(r.log.begin(), r.log.end(), want), r.log.end()) << read_text(work_ / "calls.log");
    auto p = std::to_string(t.pid);
    EXPECT_EQ(steps(r), (std::vector<std::string>{"lock " + p, "checkpoint " + p, "restore " + p, "unlock " + p}));
    EXPECT_NE(r.out.find("GPU 0 (" + kGpu0 + ", 0000:00:06.0) -> GPU 1 (" + kGpu1 + ", 0000:00:07.0)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("pid " + p + ": running"), std::string::npos) << r.out;
    EXPECT_TRUE(t.alive());
}

TEST_F(CheckpointCli, PartialMapByPciAddressAddsIdentityPairsForTheOtherGpus) {
    Target t;
    std::string gpus =
        "GPU-00000000-0000-0000-0000-000000000000|0000:00:06.0|NVIDIA H200|100|200;"
        "GPU-11111111-1111-1111-1111-111111111111|0000:00:07.0|NVIDIA H200|100|200;"
        "GPU-22222222-2222-2222-2222-222222222222|0000:00:08.0|NVIDIA H200|100|200;"
        "GPU-33333333-3333-3333-3333-333333333333|0000:00:09.0|NVIDIA H200|100|200";
    auto r = gpudx("migrate " + std::to_string(t.pid) + " --device-map 0000:00:08.0=3,GPU-33333333-3333-3333-3333-333333333333=00000000:00:08.0",
                   "GPUDX_CKPT_GPUS='" + gpus + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string want = "cuCheckpointProcessRestore pid=" + std::to_string(t.pid) +
                       " pairs=GPU-00000000-0000-0000-0000-000000000000=GPU-00000000-0000-0000-0000-000000000000,"
                       "GPU-11111111-1111-1111-1111-111111111111=GPU-11111111-1111-1111-1111-111111111111,"
                       "GPU-22222222-2222-2222-2222-222222222222=GPU-33333333-3333-3333-3333-333333333333,"
                       "GPU-33333333-3333-3333-3333-333333333333=GPU-22222222-2222-2222-2222-222222222222 -> 0";
    EXPECT_NE(std::find(r.log.begin(), r.log.end(), want), r.log.end()) << read_text(work_ / "calls.log");
}

TEST_F(CheckpointCli, BadMapsExit64WithOneLineAndLockNothing) {
    Target t;
    auto p = std::to_string(t.pid);
    struct Case {
        std::string map, env, message;
    } cases[] = {
        {"0=5", "", "GPU index 5 does not exist on this node"},
        {"0=1", "", "not a permutation"},
        {"0=GPU-deadbeef-0000-0000-0000-000000000000", "", "no GPU with UUID GPU-deadbeef"},
        {"0000:00:0a.0=0", "", "no GPU at PCI address 0000:00:0a.0"},
        {"0=", "", "lacks a GPU on one side"},
        {"swap:0", "", "swap needs two GPUs"},
        {"swap:0,1",
         "GPUDX_CKPT_GPUS='GPU-00000000-0000-0000-0000-000000000000|0000:00:06.0|NVIDIA H200|100|200;"
         "GPU-11111111-1111-1111-1111-111111111111|0000:00:07.0|NVIDIA A100-SXM4-80GB|100|200'",
         "is a NVIDIA H200 but GPU 1"},
        {"swap:0,1", "GPUDX_CKPT_HELD=" + p + "@" + kGpu0 + "=200000000000", "has 139.80 GiB available"},
    };
    for (const auto& c : cases) {
        auto r = gpudx("migrate " + p + " --device-map " + c.map, c.env);
        EXPECT_EQ(r.exit_code, 64) << c.map << "\n" << r.out << r.err;
        auto err_lines = lines_of(r.err);
        ASSERT_EQ(err_lines.size(), 1u) << c.map << "\n" << r.err;
        EXPECT_NE(err_lines[0].find(c.message), std::string::npos) << c.map << ": " << err_lines[0];
        EXPECT_TRUE(steps(r).empty()) << c.map << ": something was locked";
    }
}

TEST_F(CheckpointCli, EnoughMemoryOnTheTargetPasses) {
    Target t;
    auto p = std::to_string(t.pid);
    // 8 GiB moves from GPU0 onto GPU1, which has 139.8 GiB free.
    auto r = gpudx("migrate " + p + " --device-map swap:0,1 --format json",
                   "GPUDX_CKPT_HELD=" + p + "@" + kGpu0 + "=8589934592");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    for (const auto& n : j["notes"]) EXPECT_EQ(n.get<std::string>().find("not checked"), std::string::npos) << n;
}

TEST_F(CheckpointCli, FailureAtCheckpointUnlocksAndReportsTheDriversError) {
    Target t;
    auto p = std::to_string(t.pid);
    auto r = gpudx("migrate " + p + " --device-map swap:0,1", "GPUDX_CKPT_FAIL=checkpoint:999");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(steps(r), (std::vector<std::string>{"lock " + p, "checkpoint " + p, "unlock " + p}));
    EXPECT_NE(r.out.find("FAILED: cuCheckpointProcessCheckpoint(pid " + p + ") returned CUDA_ERROR_UNKNOWN (999): unknown error"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("undo: unlock pid " + p + ": ok"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pid " + p + ": running"), std::string::npos) << r.out;
    EXPECT_TRUE(t.alive());
}

TEST_F(CheckpointCli, FailureAtRestoreOfTheSecondProcessBringsBothBack) {
    Target a, b;
    auto pa = std::to_string(a.pid), pb = std::to_string(b.pid);
    auto r = gpudx("migrate " + pa + " " + pb + " --device-map swap:0,1 --format json",
                   "GPUDX_CKPT_FAIL=restore@" + pb + ":2");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    // a was restored (onto the new GPUs) and is unlocked; b's remapped restore failed, so it comes back on its own GPUs.
    EXPECT_EQ(steps(r), (std::vector<std::string>{"lock " + pa, "lock " + pb, "checkpoint " + pa, "checkpoint " + pb,
                                                  "restore " + pa, "restore " + pb, "restore " + pb, "unlock " + pa}));
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["failure"]["name"], "CUDA_ERROR_OUT_OF_MEMORY");
    EXPECT_EQ(j["failure"]["pid"], b.pid);
    EXPECT_EQ(j["final_states"][0]["state"], "running");
    // b's undo restore is refused by the injected fault too: it stays checkpointed, and says so.
    EXPECT_EQ(j["final_states"][1]["state"], "checkpointed");
    EXPECT_EQ(j["failure"]["hint"], "the driver could not allocate memory; another process may hold the GPU's memory");
    bool told = false;
    for (const auto& n : j["notes"])
        told |= n.get<std::string>().find("process " + pb + " is left checkpointed") != std::string::npos &&
                n.get<std::string>().find("`gpudx restore " + pb + "`") != std::string::npos;
    EXPECT_TRUE(told) << j["notes"].dump();
}

TEST_F(CheckpointCli, SeveralProcessesGoStepByStep) {
    Target a, b;
    auto pa = std::to_string(a.pid), pb = std::to_string(b.pid);
    auto r = gpudx("migrate " + pa + " " + pb + " --device-map swap:0,1");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(steps(r), (std::vector<std::string>{"lock " + pa, "lock " + pb, "checkpoint " + pa, "checkpoint " + pb,
                                                  "restore " + pa, "restore " + pb, "unlock " + pa, "unlock " + pb}));
}

TEST_F(CheckpointCli, CheckpointThenRestoreInSeparateRuns) {
    Target t;
    auto p = std::to_string(t.pid);
    std::string state = "GPUDX_CKPT_STATE_DIR=" + work_.string();
    auto c = gpudx("checkpoint " + p + " --timeout 5000", state);
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    EXPECT_NE(std::find(c.log.begin(), c.log.end(), "cuCheckpointProcessLock pid=" + p + " timeoutMs=5000 -> 0"),
              c.log.end());
    EXPECT_NE(c.out.find("pid " + p + ": checkpointed"), std::string::npos) << c.out;
    auto s = gpudx("state " + p, state);
    EXPECT_EQ(s.exit_code, 0);
    EXPECT_NE(s.out.find("pid " + p + ": checkpointed"), std::string::npos) << s.out;
    auto r = gpudx("restore " + p + " --device-map " + kGpu0 + "=" + kGpu1 + "," + kGpu1 + "=" + kGpu0, state);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(steps(r), (std::vector<std::string>{"restore " + p, "unlock " + p}));
    EXPECT_NE(r.out.find("pid " + p + ": running"), std::string::npos) << r.out;
}

TEST_F(CheckpointCli, SingleActionDoesOneStepAndDoesNotUndo) {
    Target t;
    auto p = std::to_string(t.pid);
    std::string state = "GPUDX_CKPT_STATE_DIR=" + work_.string();
    auto lock = gpudx("checkpoint " + p + " --action lock", state);
    ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
    EXPECT_EQ(steps(lock), (std::vector<std::string>{"lock " + p}));
    auto fail = gpudx("checkpoint " + p + " --action checkpoint", state + " GPUDX_CKPT_FAIL=checkpoint:801");
    EXPECT_EQ(fail.exit_code, 1);
    EXPECT_EQ(steps(fail), (std::vector<std::string>{"checkpoint " + p}));
    EXPECT_NE(fail.out.find("pid " + p + ": locked"), std::string::npos) << fail.out;
    auto unlock = gpudx("restore " + p + " --action unlock", state);
    EXPECT_EQ(unlock.exit_code, 0) << unlock.out;
}

TEST_F(CheckpointCli, DriverWithoutCheckpointApiIsNamed) {
    Target t;
    auto r = gpudx("checkpoint " + std::to_string(t.pid), "", CKPT_LIB_OLD);
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    EXPECT_NE(r.out.find("cuCheckpointProcessLock"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("driver 550"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("driver 535.183.01"), std::string::npos) << r.out;
    EXPECT_TRUE(steps(r).empty());
}

TEST_F(CheckpointCli, RemapBefore580IsRefusedBeforeAnythingIsLocked) {
    Target t;
    auto r = gpudx("migrate " + std::to_string(t.pid) + " --device-map swap:0,1",
                   "GPUDX_CKPT_DRIVER_VERSION=570.124.06 GPUDX_CKPT_CUDA_VERSION=12080");
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    EXPECT_NE(r.out.find("needs driver 580 or newer"), std::string::npos) << r.out;
    EXPECT_TRUE(steps(r).empty());
    // Without a remap, the same driver checkpoints fine.
    auto c = gpudx("checkpoint " + std::to_string(t.pid), "GPUDX_CKPT_DRIVER_VERSION=570.124.06");
    EXPECT_EQ(c.exit_code, 0) << c.out;
}

TEST_F(CheckpointCli, JsonCarriesPerStepTimingsPerProcess) {
    Target a, b;
    auto r = gpudx("migrate " + std::to_string(a.pid) + " " + std::to_string(b.pid) + " --device-map swap:0,1 --format json");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["timings"].size(), 2u);
    for (const auto& t : j["timings"])
        for (auto key : {"lock_s", "checkpoint_s", "restore_s", "unlock_s"}) {
            ASSERT_TRUE(t.contains(key)) << t.dump();
            EXPECT_GE(t[key].get<double>(), 0.0);
        }
    EXPECT_EQ(j["steps"].size(), 8u);
    EXPECT_EQ(j["steps"][0]["call"], "cuCheckpointProcessLock");
    EXPECT_GE(j["steps"][0]["wall_seconds"].get<double>(), j["steps"][0]["seconds"].get<double>());
    EXPECT_EQ(j["device_map"]["pairs"][0]["old_pci"], "0000:00:06.0");
    EXPECT_EQ(j["device_map"]["pairs"][0]["new_pci"], "0000:00:07.0");
    EXPECT_EQ(j["driver"]["driver_version"], "580.159.04");
    EXPECT_EQ(j["driver"]["can_remap"], true);
}

TEST_F(CheckpointCli, HungDriverCallIsKilledReportedAndUndone) {
    Target t;
    auto p = std::to_string(t.pid);
    // The deadline covers each call that answers (the stand-in's take microseconds) on a loaded machine too;
    // the hung one never returns, so ending at all means it was cut, and the bound is only slack.
    auto r = gpudx("migrate " + p + " --device-map swap:0,1 --deadline 3 --format json",
                   "GPUDX_CKPT_HANG=checkpoint");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_GE(r.seconds, 3.0);
    EXPECT_LT(r.seconds, 25.0);
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["failure"]["name"], "GPUDX_DEADLINE_EXCEEDED");
    EXPECT_EQ(j["failure"]["step"], "checkpoint");
    // A fresh worker undid the lock (the stand-in's state is per worker, so it sees a running process;
    // with a state dir it would unlock). The hang itself is in the log.
    EXPECT_NE(std::find(r.log.begin(), r.log.end(), "cuCheckpointProcessCheckpoint pid=" + p + " -> (hang)"), r.log.end());
}

TEST_F(CheckpointCli, HungCheckpointIsUndoneByAFreshWorker) {
    Target t;
    auto p = std::to_string(t.pid);
    auto r = gpudx("checkpoint " + p + " --deadline 3", "GPUDX_CKPT_HANG=checkpoint GPUDX_CKPT_STATE_DIR=" + work_.string());
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(steps(r), (std::vector<std::string>{"lock " + p, "checkpoint " + p, "unlock " + p}));
    EXPECT_NE(r.out.find("GPUDX_DEADLINE_EXCEEDED"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pid " + p + ": running"), std::string::npos) << r.out;
}

TEST_F(CheckpointCli, DriverCrashingTheWorkerIsReportedAndUndone) {
    Target t;
    auto p = std::to_string(t.pid);
    auto r = gpudx("migrate " + p + " --device-map swap:0,1 --format json",
                   "GPUDX_CKPT_CRASH=restore GPUDX_CKPT_STATE_DIR=" + work_.string());
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["failure"]["name"], "GPUDX_WORKER_LOST");
    EXPECT_NE(j["failure"]["meaning"].get<std::string>().find("died of signal 6"), std::string::npos) << j["failure"];
    // The fresh worker finds the process checkpointed; its undo restore crashes too (same fault), so the
    // process is reported as left checkpointed with the command that brings it back.
    EXPECT_EQ(j["final_states"][0]["state"], "checkpointed");
    EXPECT_TRUE(t.alive());
}

TEST_F(CheckpointCli, RefusesAProcessOfAnotherUser) {
    if (::geteuid() == 0) {
        // As root, become nobody (65534) to ask for a process root owns.
        if (std::system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "no setpriv to drop root";
        Target t;
        fs::permissions(work_, fs::perms::all);
        auto r = gpudx("state " + std::to_string(t.pid), "setpriv --reuid=65534 --regid=65534 --clear-groups");
        EXPECT_EQ(r.exit_code, 64) << r.out << r.err;
        EXPECT_NE(r.err.find("refusing process " + std::to_string(t.pid) + ": it belongs to uid 0, not to you (uid 65534)"),
                  std::string::npos)
            << r.err;
        EXPECT_TRUE(r.log.empty()) << "the driver was loaded for a refused PID";
        return;
    }
    auto r = gpudx("state 1");
    EXPECT_EQ(r.exit_code, 64);
    EXPECT_NE(r.err.find("refusing process 1: it belongs to uid 0"), std::string::npos) << r.err;
    EXPECT_TRUE(r.log.empty()) << "the driver was loaded for a refused PID";
}

TEST_F(CheckpointCli, RefusesAProcessThatDoesNotExist) {
    auto r = gpudx("state 999999999");
    EXPECT_EQ(r.exit_code, 64);
    EXPECT_NE(r.err.find("no process 999999999"), std::string::npos) << r.err;
}

TEST_F(CheckpointCli, WarnsOfStalePciAddressesWithoutTheShim) {
    Target t;
    auto r = gpudx("migrate " + std::to_string(t.pid) + " --device-map swap:0,1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("the gpudx shim is not loaded"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("stale PCI addresses"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("LD_PRELOAD="), std::string::npos) << r.out;
}

TEST_F(CheckpointCli, FindsTheShimInTheTargetsMaps) {
    Target t(CKPT_FAKE_SHIM);
    auto r = gpudx("migrate " + std::to_string(t.pid) + " --device-map swap:0,1 --format json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["verify"].size(), 1u);
    EXPECT_EQ(j["verify"][0]["shim_loaded"], true);
    EXPECT_EQ(j["verify"][0]["shim_path"], fs::canonical(CKPT_FAKE_SHIM).string());
}

TEST_F(CheckpointCli, DeviceMapIsRefusedWhereNothingIsRestored) {
    Target t;
    auto r = gpudx("checkpoint " + std::to_string(t.pid) + " --device-map swap:0,1");
    EXPECT_EQ(r.exit_code, 64);
    EXPECT_NE(r.err.find("--device-map applies to restore and migrate only"), std::string::npos) << r.err;
}

}  // namespace
