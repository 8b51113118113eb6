#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "actions/accept.hpp"
#include "actions/accept_kernels.hpp"
#include "render/accept.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {

const std::string kGpu0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const std::string kGpu1 = "GPU-5a1e3f10-1111-2222-3333-444455556666";

// A GPU side that answers like a healthy 2xH200 unless told otherwise.
class FakeDriver : public AcceptDriver {
public:
    std::optional<Error> open_error;
    std::vector<AcceptGpu> gpus{{0, kGpu0, "0000:00:06.0", "NVIDIA H200", 1ull << 30, 132, 9, 0},
                                {1, kGpu1, "0000:00:07.0", "NVIDIA H200", 1ull << 30, 132, 9, 0}};
    uint64_t compute_wrong = 0;
    unsigned sms_seen = 132;
    uint64_t memory_errors = 0;
    double d2d_gbps = 4200, h2d_gbps = 55, d2h_gbps = 55, p2p_gbps = 390;
    uint64_t d2h_mismatches = 0, p2p_mismatches = 0;
    PeerLink link = PeerLink::nvlink;
    std::string hang_in;   // "memory": never returns from memory()
    std::string crash_in;  // "compute": abort()
    std::vector<VisibleView> views;  // answers for visible_in_children, one per child, across calls
    size_t next_view = 0;
    std::vector<std::map<std::string, std::string>> child_envs;
    std::vector<int> contexts;

    Result<DriverFacts> open() override {
        if (open_error) return std::unexpected(*open_error);
        return DriverFacts{"/fake/libcuda.so.1", 13000, "580.159.04"};
    }
    Result<std::vector<AcceptGpu>> devices() override { return gpus; }
    Result<double> create_context(int ord) override {
        contexts.push_back(ord);
        return 120.0;
    }
    Result<ComputeFigures> compute(int, unsigned reps) override {
        if (crash_in == "compute") ::abort();
        return ComputeFigures{132 * 16 * 128, compute_wrong, sms_seen, 132, reps, 0.001};
    }
    Result<MemoryFigures> memory(int, const MemoryPlan& plan) override {
        if (hang_in == "memory")
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        MemoryFigures f;
        f.free_bytes = 1ull << 30;
        f.total_bytes = 1ull << 30;
        f.tested_bytes = 900ull << 20;
        f.chunks = 1;
        for (auto p : plan.patterns) f.patterns.push_back({to_string(p), 0, 0, std::nullopt});
        if (memory_errors) f.patterns.back() = {"random", 7, memory_errors, 0x1000};
        f.written_bytes = f.read_bytes = f.tested_bytes * f.patterns.size();
        f.write_seconds = f.read_seconds = 0.001;
        f.released = true;
        return f;
    }
    static CopyFigures at(double gbps, const CopyPlan& p, double factor = 1.0, uint64_t bad = 0) {
        return CopyFigures{p.bytes, p.repetitions, factor * p.bytes * p.repetitions / (gbps * 1e9), bad};
    }
    Result<CopyFigures> device_copy(int, const CopyPlan& p) override { return at(d2d_gbps, p, 2.0); }
    Result<HostCopyFigures> host_copies(int, const CopyPlan& p) override {
        return HostCopyFigures{at(h2d_gbps, p), at(d2h_gbps, p, 1.0, d2h_mismatches)};
    }
    Result<PeerInfo> peer_info(int, int) override { return PeerInfo{true, true, link, "fake"}; }
    Result<CopyFigures> peer_copy(int, int, const CopyPlan& p) override { return at(p2p_gbps, p, 1.0, p2p_mismatches); }
    Result<std::vector<CopyFigures>> peer_copy_concurrent(const std::vector<std::pair<int, int>>& routes,
                                                          const CopyPlan& p) override {
        return std::vector<CopyFigures>(routes.size(), at(p2p_gbps, p));
    }
    std::vector<Result<VisibleView>> visible_in_children(const std::vector<std::map<std::string, std::string>>& envs,
                                                         std::chrono::milliseconds) override {
        std::vector<Result<VisibleView>> out;
        for (size_t i = 0; i < envs.size(); ++i) {
            child_envs.push_back(envs[i]);
            if (next_view < views.size()) out.push_back(views[next_view++]);
            else out.push_back(fail("no view configured"));
        }
        return out;
    }
};

const SubTest* find(const AcceptReport& r, const std::string& id, const std::string& subject = {}) {
    for (auto& t : r.tests)
        if (t.id == id && (subject.empty() || (!t.subjects.empty() && t.subjects[0] == subject))) return &t;
    return nullptr;
}

AcceptOptions quick() { return default_accept_options(false); }

}  // namespace

TEST(Accept, HealthyNodePassesEverySubTestOnBothGpus) {
    FakeDriver d;
    auto r = run_acceptance(d, quick());
    EXPECT_EQ(r.verdict, "pass");
    EXPECT_EQ(r.exit_code, 0);
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.driver_version, "580.159.04");
    for (auto* uuid : {&kGpu0, &kGpu1})
        for (auto id : {"gpu.context", "gpu.compute", "gpu.memory", "gpu.d2d", "gpu.h2d", "gpu.d2h"}) {
            auto* t = find(r, id, *uuid);
            ASSERT_NE(t, nullptr) << id << " " << *uuid;
            EXPECT_EQ(t->status, TestStatus::pass) << id << ": " << t->reason;
        }
    auto* compute = find(r, "gpu.compute", kGpu0);
    EXPECT_EQ(compute->pci[0], "0000:00:06.0");
    EXPECT_EQ(compute->figures.at("sms_seen"), 132);
    auto* d2d = find(r, "gpu.d2d", kGpu0);
    EXPECT_NEAR(d2d->figures.at("d2d_gbps"), 4200, 1);
    auto* copy = find(r, "pair.copy", kGpu0);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(copy->subjects, (std::vector<std::string>{kGpu0, kGpu1}));
    EXPECT_NEAR(copy->figures.at("a_to_b_gbps"), 390, 0.5);
    EXPECT_EQ(copy->details.at("link"), "nvlink");
    ASSERT_NE(find(r, "pairs.concurrent"), nullptr);
    EXPECT_EQ(find(r, "pairs.concurrent")->figures.at("routes"), 2);
    // Without an allocation the isolation check cannot run, and says so without failing the node.
    auto* iso = find(r, "isolation.job");
    ASSERT_NE(iso, nullptr);
    EXPECT_EQ(iso->status, TestStatus::not_run);
    EXPECT_FALSE(iso->required);
    EXPECT_NE(iso->reason.find("--allow"), std::string::npos);
    EXPECT_EQ(r.tests.back().id, "isolation.disjoint");  // isolation stays after the pair tests
}

TEST(Accept, WrongBytesFromADeviceToHostCopyFailThatTestOnly) {
    FakeDriver d;
    d.d2h_mismatches = 3;
    auto r = run_acceptance(d, quick());
    auto* d2h = find(r, "gpu.d2h", kGpu0);
    ASSERT_NE(d2h, nullptr);
    EXPECT_EQ(d2h->status, TestStatus::fail);
    EXPECT_NE(d2h->reason.find("3 of"), std::string::npos) << d2h->reason;
    EXPECT_EQ(find(r, "gpu.h2d", kGpu0)->status, TestStatus::pass);
    EXPECT_EQ(r.verdict, "fail");
    EXPECT_EQ(r.exit_code, 1);
}

TEST(Accept, MemoryErrorsAndWrongComputeAnswersFail) {
    FakeDriver d;
    d.memory_errors = 12;
    d.sms_seen = 100;
    auto r = run_acceptance(d, quick());
    auto* mem = find(r, "gpu.memory", kGpu1);
    EXPECT_EQ(mem->status, TestStatus::fail);
    EXPECT_EQ(mem->figures.at("errors"), 12);
    EXPECT_NE(mem->reason.find("12 wrong 8-byte words"), std::string::npos) << mem->reason;
    EXPECT_NE(mem->details.at("pattern random#7").find("0x1000"), std::string::npos);
    auto* compute = find(r, "gpu.compute", kGpu0);
    EXPECT_EQ(compute->status, TestStatus::fail);
    EXPECT_NE(compute->reason.find("only 100 of 132 multiprocessors"), std::string::npos) << compute->reason;
}

TEST(Accept, NoGpuIsNotRunAndANonZeroExit) {
    FakeDriver d;
    d.open_error = Error{"cuInit: CUDA_ERROR_NO_DEVICE (100)", "cuInit", ENODEV};
    auto r = run_acceptance(d, quick());
    ASSERT_EQ(r.tests.size(), 1u);
    EXPECT_EQ(r.tests[0].id, "driver.init");
    EXPECT_EQ(r.tests[0].status, TestStatus::not_run);
    EXPECT_NE(r.tests[0].reason.find("CUDA_ERROR_NO_DEVICE"), std::string::npos);
    EXPECT_EQ(r.verdict, "fail");
    EXPECT_EQ(r.exit_code, 3);
}

TEST(Accept, ADriverThatFailsToInitialiseFails) {
    FakeDriver d;
    d.open_error = Error{"cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)", "cuInit", 0};
    auto r = run_acceptance(d, quick());
    EXPECT_EQ(r.tests[0].status, TestStatus::fail);
    EXPECT_EQ(r.exit_code, 1);
}

TEST(Accept, FloorsFailBelowAndWarnWithinFivePercent) {
    EXPECT_EQ(judge_floor(47.9, 48.0), TestStatus::fail);
    EXPECT_EQ(judge_floor(50.0, 48.0), TestStatus::warn);  // < 48 * 1.05 = 50.4
    EXPECT_EQ(judge_floor(50.5, 48.0), TestStatus::pass);
    EXPECT_EQ(judge_floor(1.0, std::nullopt), TestStatus::pass);
    EXPECT_EQ(judge_floor(NAN, 48.0), TestStatus::fail);

    FakeDriver d;
    d.h2d_gbps = 50;
    auto o = quick();
    o.thresholds.min_h2d_gbps = 48;
    o.thresholds.min_d2h_gbps = 48;
    auto r = run_acceptance(d, o);
    auto* h2d = find(r, "gpu.h2d", kGpu0);
    EXPECT_EQ(h2d->status, TestStatus::warn);
    EXPECT_EQ(h2d->thresholds.at("h2d_gbps"), 48);
    EXPECT_NE(h2d->reason.find("within 5 %"), std::string::npos);
    EXPECT_EQ(r.verdict, "warn");
    EXPECT_EQ(r.exit_code, 2);

    d.h2d_gbps = 40;
    r = run_acceptance(d, o);
    EXPECT_EQ(find(r, "gpu.h2d", kGpu0)->status, TestStatus::fail);
    EXPECT_EQ(r.exit_code, 1);
}

TEST(Accept, PeerFloorFollowsTheLinkClass) {
    FakeDriver d;
    d.p2p_gbps = 50;
    auto o = quick();
    o.thresholds.min_p2p_gbps = 335;
    o.thresholds.min_p2p_pcie_gbps = 20;
    d.link = PeerLink::pcie_switch;
    auto r = run_acceptance(d, o);
    auto* copy = find(r, "pair.copy", kGpu0);
    EXPECT_EQ(copy->status, TestStatus::pass) << copy->reason;
    EXPECT_EQ(copy->thresholds.at("a_to_b_gbps"), 20);
    d.link = PeerLink::nvlink;
    r = run_acceptance(d, o);
    copy = find(r, "pair.copy", kGpu0);
    EXPECT_EQ(copy->status, TestStatus::fail);
    EXPECT_NE(copy->reason.find("below the floor of 335.0"), std::string::npos) << copy->reason;
}

TEST(Accept, PairsNoneAndUnknownPairs) {
    FakeDriver d;
    auto o = quick();
    o.pairs = "none";
    auto r = run_acceptance(d, o);
    EXPECT_EQ(find(r, "pair.copy"), nullptr);
    EXPECT_EQ(r.verdict, "pass");

    o.pairs = "GPU-992cb470:GPU-deadbeef";
    r = run_acceptance(d, o);
    auto* t = find(r, "pair.copy");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->status, TestStatus::not_run);
    EXPECT_TRUE(t->required);
    EXPECT_EQ(r.exit_code, 3);
}

TEST(Accept, IsolationFailsWhenNvmlShowsGpusOutsideTheAllocation) {
    FakeDriver d;
    d.views = {VisibleView{std::vector<std::string>{kGpu0}, "", std::vector<std::string>{kGpu0, kGpu1}, ""},
               // disjoint: child A (GPU0) and child B (GPU1), each confined
               VisibleView{std::vector<std::string>{kGpu0}, "", std::vector<std::string>{kGpu0}, ""}};
    auto o = quick();
    o.allow = {"GPU-992cb470"};
    auto r = run_acceptance(d, o);
    EXPECT_EQ(r.allocation_source, "--allow");
    auto* job = find(r, "isolation.job");
    ASSERT_NE(job, nullptr);
    EXPECT_TRUE(job->required);
    EXPECT_EQ(job->status, TestStatus::fail);
    EXPECT_NE(job->reason.find("NVML shows " + std::string("gpu-5a1e3f10")), std::string::npos) << job->reason;
    EXPECT_NE(job->reason.find("not confined"), std::string::npos);
    ASSERT_FALSE(d.child_envs.empty());
    EXPECT_EQ(d.child_envs[0].at("CUDA_VISIBLE_DEVICES"), kGpu0);
    EXPECT_EQ(r.exit_code, 1);
}

TEST(Accept, IsolationPassesWhenEachChildSeesExactlyItsGpus) {
    FakeDriver d;
    auto only = [](const std::string& u) {
        return VisibleView{std::vector<std::string>{u}, "", std::vector<std::string>{u}, ""};
    };
    d.views = {only(kGpu1)};
    auto o = quick();
    o.environment = {{"CUDA_VISIBLE_DEVICES", kGpu1}};
    auto r = run_acceptance(d, o);
    EXPECT_EQ(r.allocation_source, "CUDA_VISIBLE_DEVICES");
    EXPECT_EQ(find(r, "isolation.job")->status, TestStatus::pass) << find(r, "isolation.job")->reason;
    // Disjoint children got GPU1 (the allocation) and GPU0 (the rest); only one view was configured for
    // the pair call, so the second child "failed": the test must fail, not pass silently.
    auto* disjoint = find(r, "isolation.disjoint");
    EXPECT_EQ(disjoint->status, TestStatus::fail);

    FakeDriver d2;
    d2.views = {only(kGpu1), only(kGpu1), only(kGpu0)};
    r = run_acceptance(d2, o);
    EXPECT_EQ(find(r, "isolation.disjoint")->status, TestStatus::pass) << find(r, "isolation.disjoint")->reason;
    EXPECT_EQ(d2.child_envs[1].at("CUDA_VISIBLE_DEVICES"), kGpu1);
    EXPECT_EQ(d2.child_envs[2].at("CUDA_VISIBLE_DEVICES"), kGpu0);
    EXPECT_EQ(r.verdict, "pass");
}

TEST(Accept, IsolationNotRunWhenTheChildCannotAskNvml) {
    FakeDriver d;
    d.views = {VisibleView{std::vector<std::string>{kGpu0}, "", std::nullopt, "libnvidia-ml.so.1 not loadable"}};
    auto o = quick();
    o.allow = {kGpu0};
    o.pairs = "none";
    auto r = run_acceptance(d, o);
    auto* job = find(r, "isolation.job");
    EXPECT_EQ(job->status, TestStatus::not_run);
    EXPECT_NE(job->reason.find("NVML could not be asked"), std::string::npos);
    EXPECT_EQ(r.verdict, "fail");
}

TEST(Accept, AllocationFromSchedulerVariables) {
    EXPECT_FALSE(allocation_from_environment({{"CUDA_VISIBLE_DEVICES", "all"}}));
    EXPECT_FALSE(allocation_from_environment({{"NVIDIA_VISIBLE_DEVICES", "void"}}));
    auto a = allocation_from_environment({{"NVIDIA_VISIBLE_DEVICES", kGpu0 + "," + kGpu1}});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->first, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(a->second, (std::vector<std::string>{kGpu0, kGpu1}));
    a = allocation_from_environment({{"SLURM_JOB_GPUS", "0, 1"}, {"CUDA_VISIBLE_DEVICES", ""}});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->first, "SLURM_JOB_GPUS");
    EXPECT_EQ(a->second, (std::vector<std::string>{"0", "1"}));
}

TEST(Accept, SelectsPairsByUuidPciAddressOrOrdinal) {
    FakeDriver d;
    auto& g = d.gpus;
    auto s = select_pairs("0000:00:06.0:0000:00:07.0", g);
    ASSERT_EQ(s.pairs.size(), 1u);
    EXPECT_EQ(s.pairs[0], std::make_pair(0, 1));
    s = select_pairs("GPU-5a1e:GPU-992c", g);
    ASSERT_EQ(s.pairs.size(), 1u);
    EXPECT_EQ(s.pairs[0], std::make_pair(0, 1));
    s = select_pairs("0:1,1:0", g);
    EXPECT_EQ(s.pairs.size(), 1u);
    s = select_pairs("0:7", g);
    EXPECT_TRUE(s.pairs.empty());
    EXPECT_EQ(s.unknown, (std::vector<std::string>{"0:7"}));
    EXPECT_EQ(select_pairs("all", g).pairs.size(), 1u);
    EXPECT_FALSE(find_gpu("GPU-", g));  // ambiguous prefix
}

TEST(Accept, ClassifiesPcieRelationFromSysfsPaths) {
    EXPECT_EQ(classify_pcie_paths("/sys/devices/pci0000:00/0000:00:06.0", "/sys/devices/pci0000:00/0000:00:07.0"),
              PeerLink::pcie_host_bridge);
    EXPECT_EQ(classify_pcie_paths("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
                                  "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0"),
              PeerLink::pcie_switch);
    EXPECT_EQ(classify_pcie_paths("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
                                  "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0"),
              PeerLink::pcie_cross_root);
    EXPECT_EQ(classify_pcie_paths("garbage", "/sys/devices/pci0000:00/0000:00:07.0"), PeerLink::unknown);
}

TEST(Accept, RecordRoundTripsThroughJson) {
    FakeDriver d;
    auto o = quick();
    o.node = "gpu-node-17";
    o.kernel = "6.18.44";
    o.module_version = "580.159.04";
    o.image_digest = "sha256:abc";
    o.thresholds.min_p2p_gbps = 335;
    auto r = run_acceptance(d, o);
    auto j = accept_report_to_json(r);
    EXPECT_EQ(j["kind"], "gpudx-accept");
    EXPECT_EQ(j["gpus"][0]["uuid"], kGpu0);
    EXPECT_EQ(j["gpus"][0]["pci"], "0000:00:06.0");
    auto back = accept_report_from_json(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->node, "gpu-node-17");
    EXPECT_EQ(back->image_digest, "sha256:abc");
    EXPECT_EQ(back->thresholds.min_p2p_gbps, 335);
    ASSERT_EQ(back->tests.size(), r.tests.size());
    EXPECT_EQ(back->tests[3].key(), r.tests[3].key());
    EXPECT_EQ(back->tests[3].figures, r.tests[3].figures);
    EXPECT_TRUE(compare_accept_reports(r, *back).empty());
    EXPECT_FALSE(accept_report_from_json(nlohmann::json{{"kind", "something else"}}));
}

TEST(Accept, CompareShowsRegressionsAndChanges) {
    FakeDriver d;
    auto before = run_acceptance(d, quick());
    d.d2d_gbps = 3600;  // -14 %
    d.d2h_mismatches = 1;
    d.gpus.pop_back();
    auto after = run_acceptance(d, quick());
    after.driver_version = "580.170.01";
    auto changes = compare_accept_reports(before, after);
    auto has = [&](const std::string& what, bool worse) {
        for (auto& c : changes)
            if (c.what == what && c.worse == worse) return true;
        return false;
    };
    EXPECT_TRUE(has("driver_version", false));
    EXPECT_TRUE(has("gpu " + kGpu1, true));
    EXPECT_TRUE(has("gpu.d2d " + kGpu0 + " d2d_gbps", true));
    EXPECT_TRUE(has("gpu.d2h " + kGpu0, true));
    EXPECT_TRUE(has("verdict", true));
    auto text = render_accept_comparison(changes);
    EXPECT_NE(text.find("WORSE"), std::string::npos);
    EXPECT_NE(text.find("4200.0 -> 3600.0 (-14.3 %)"), std::string::npos) << text;
}

TEST(AcceptKernels, FastComputeAnswerMatchesTheReference) {
    accept_kernels::ComputeAnswer fast(4096);
    for (uint32_t gid : {0u, 1u, 1023u, 1024u, 99999u, 540671u})
        EXPECT_EQ(fast.value(gid), accept_kernels::compute_expected(gid, 4096)) << gid;
    // splitmix64 reference value (seed 0, index 0 is splitmix64(0) of the common definition).
    EXPECT_EQ(accept_kernels::pattern_word(accept_kernels::kRandom, 0, 0, 0), 0ull);
    EXPECT_EQ(accept_kernels::pattern_word(accept_kernels::kRandom, 0x9E3779B97F4A7C15ull, 0, 0),
              0xE220A8397B1DCDAFull);  // splitmix64 first output for state 0
    EXPECT_EQ(accept_kernels::pattern_word(accept_kernels::kWalkingOnes, 3, 0, 1), 1ull << 4);
    EXPECT_EQ(accept_kernels::pattern_word(accept_kernels::kWalkingZeros, 63, 0, 1), ~1ull);
    EXPECT_EQ(accept_kernels::pattern_word(accept_kernels::kAddress, 5, 0x7f0000001000, 9), 0x7f0000001000ull);
}

// ---- the watched run: a hang or a crash never hangs gpudx --------------------------------------

TEST(AcceptWatched, AHungDriverCallFailsItsTestAndTheRestIsNotRun) {
    auto o = quick();
    o.pairs = "none";
    WatchOptions w;
    // The memory test's 30 s deadline becomes ~3 s; the sub-tests that answer at once keep at least 1.5 s, so
    // only the hang is cut, however loaded the machine.
    w.deadline_scale = 0.1;
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_acceptance_watched(
        [] {
            auto d = std::make_unique<FakeDriver>();
            d->hang_in = "memory";
            return d;
        },
        o, w);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 20.0);  // the hung call never returns: ending at all means it was cut
    auto* mem = find(r, "gpu.memory", kGpu0);
    ASSERT_NE(mem, nullptr);
    EXPECT_EQ(mem->status, TestStatus::fail);
    EXPECT_NE(mem->reason.find("hung"), std::string::npos) << mem->reason;
    EXPECT_EQ(find(r, "gpu.compute", kGpu0)->status, TestStatus::pass);
    auto* later = find(r, "gpu.d2d", kGpu1);
    ASSERT_NE(later, nullptr);
    EXPECT_EQ(later->status, TestStatus::not_run);
    EXPECT_NE(later->reason.find("gpu.memory"), std::string::npos) << later->reason;
    EXPECT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.verdict, "fail");
    EXPECT_EQ(r.exit_code, 1);
}

TEST(AcceptWatched, ACrashInTheDriverFailsTheTestItHappenedIn) {
    auto r = run_acceptance_watched(
        [] {
            auto d = std::make_unique<FakeDriver>();
            d->crash_in = "compute";
            return d;
        },
        quick());
    auto* compute = find(r, "gpu.compute", kGpu0);
    ASSERT_NE(compute, nullptr);
    EXPECT_EQ(compute->status, TestStatus::fail);
    EXPECT_NE(compute->reason.find("signal"), std::string::npos) << compute->reason;
    EXPECT_EQ(r.exit_code, 1);
}

TEST(AcceptWatched, AHealthyRunComesBackWhole) {
    auto r = run_acceptance_watched([] { return std::make_unique<FakeDriver>(); }, quick());
    EXPECT_EQ(r.verdict, "pass");
    EXPECT_EQ(r.gpus.size(), 2u);
    ASSERT_NE(find(r, "pairs.concurrent"), nullptr);
    EXPECT_EQ(find(r, "pairs.concurrent")->status, TestStatus::pass);
}

// ---- the binary, without any driver --------------------------------------------------------------

TEST(AcceptCommand, NoDriverLibraryIsNotRunWithExitThree) {
    auto dir = std::filesystem::temp_directory_path() / ("gpudx-accept-nolib-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto out = dir / "accept.json";
    std::string cmd = std::string(GPUDX_BINARY) + " accept --format json --driver-lib-dir " + dir.string() + " -o " +
                      out.string() + " 2>/dev/null";
    int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc));
    EXPECT_EQ(WEXITSTATUS(rc), 3);
    auto r = load_accept_report(out.string());
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->tests.size(), 1u);
    EXPECT_EQ(r->tests[0].status, TestStatus::not_run);
    EXPECT_NE(r->tests[0].reason.find("libcuda.so.1"), std::string::npos) << r->tests[0].reason;
    EXPECT_EQ(r->verdict, "fail");
    EXPECT_FALSE(r->kernel.empty());

    // --from + --compare against itself: no changes, exit 0.
    std::string cmp = std::string(GPUDX_BINARY) + " accept --from " + out.string() + " --compare " + out.string() +
                      " > " + (dir / "cmp.txt").string();
    rc = std::system(cmp.c_str());
    EXPECT_EQ(WEXITSTATUS(rc), 0);
    std::ifstream in(dir / "cmp.txt");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("No changes"), std::string::npos) << text;
    std::filesystem::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
