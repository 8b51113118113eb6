#include "actions/accept.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/pci_address.hpp"
#include "core/supervisor.hpp"
#include "core/text.hpp"
#include "model/json_support.hpp"

namespace gpudx {

GPUDX_JSON(AcceptThresholds, min_d2d_gbps, min_h2d_gbps, min_d2h_gbps, min_p2p_gbps, min_p2p_pcie_gbps,
           min_memory_fraction, pairs)
GPUDX_JSON(AcceptGpu, ordinal, uuid, pci, name, total_memory, sm_count, cc_major, cc_minor)

namespace {

constexpr double kGB = 1e9;
using ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string utc_now_iso() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int status_rank(TestStatus s) {
    switch (s) {
    case TestStatus::pass: return 0;
    case TestStatus::warn: return 1;
    case TestStatus::not_run: return 2;
    case TestStatus::fail: return 3;
    }
    return 3;
}

std::string lower(std::string_view s) { return to_lower(s); }

bool looks_like_uuid(std::string_view s) {
    auto l = lower(s);
    return l.starts_with("gpu-") || l.starts_with("mig-");
}

std::string short_uuid(const std::string& uuid) { return uuid.size() > 12 ? uuid.substr(0, 12) : uuid; }

std::string join(const std::vector<std::string>& v, std::string_view sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        out += v[i];
    }
    return out;
}

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

// Rounds down to a 2 MiB multiple, the allocation granularity that keeps every copy aligned.
uint64_t round_2mib(uint64_t bytes) { return bytes & ~((2ull << 20) - 1); }

}  // namespace

// ---- names ---------------------------------------------------------------------------------------

const char* to_string(TestStatus s) {
    switch (s) {
    case TestStatus::pass: return "pass";
    case TestStatus::warn: return "warn";
    case TestStatus::fail: return "fail";
    case TestStatus::not_run: return "not_run";
    }
    return "fail";
}

std::optional<TestStatus> parse_test_status(std::string_view s) {
    for (auto st : {TestStatus::pass, TestStatus::warn, TestStatus::fail, TestStatus::not_run})
        if (s == to_string(st)) return st;
    return std::nullopt;
}

const char* to_string(MemoryPattern p) {
    switch (p) {
    case MemoryPattern::walking_ones: return "walking_ones";
    case MemoryPattern::walking_zeros: return "walking_zeros";
    case MemoryPattern::address: return "address";
    case MemoryPattern::random: return "random";
    }
    return "random";
}

const char* to_string(PeerLink l) {
    switch (l) {
    case PeerLink::nvlink: return "nvlink";
    case PeerLink::pcie_switch: return "pcie_switch";
    case PeerLink::pcie_host_bridge: return "pcie_host_bridge";
    case PeerLink::pcie_cross_root: return "pcie_cross_root";
    case PeerLink::unknown: return "unknown";
    }
    return "unknown";
}

std::string SubTest::key() const {
    std::string k = id;
    for (auto& s : subjects) k += " " + s;
    return k;
}

// ---- JSON ----------------------------------------------------------------------------------------

nlohmann::json sub_test_to_json(const SubTest& t) {
    nlohmann::json j;
    j["id"] = t.id;
    j["subjects"] = t.subjects;
    j["pci"] = t.pci;
    j["required"] = t.required;
    j["status"] = to_string(t.status);
    j["reason"] = t.reason;
    j["figures"] = nlohmann::json::object();
    for (auto& [k, v] : t.figures) j["figures"][k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    j["thresholds"] = t.thresholds;
    j["details"] = t.details;
    j["duration_ms"] = t.duration_ms;
    return j;
}

Result<SubTest> sub_test_from_json(const nlohmann::json& j) {
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's at() and get<> throw).
    try {
        SubTest t;
        t.id = j.at("id").get<std::string>();
        t.subjects = j.value("subjects", std::vector<std::string>{});
        t.pci = j.value("pci", std::vector<std::string>{});
        t.required = j.value("required", true);
        auto st = parse_test_status(j.value("status", std::string("not_run")));
        if (!st) return fail("unknown status \"" + j.value("status", std::string()) + "\" in test " + t.id);
        t.status = *st;
        t.reason = j.value("reason", std::string());
        if (j.contains("figures"))
            for (auto& [k, v] : j["figures"].items())
                if (v.is_number()) t.figures[k] = v.get<double>();
        t.thresholds = j.value("thresholds", std::map<std::string, double>{});
        t.details = j.value("details", std::map<std::string, std::string>{});
        t.duration_ms = j.value("duration_ms", 0.0);
        return t;
    } catch (const std::exception& e) {
        return fail(std::string("malformed test record: ") + e.what());
    }
}

nlohmann::json accept_report_to_json(const AcceptReport& r) {
    nlohmann::json j;
    j["kind"] = "gpudx-accept";
    j["schema_version"] = r.schema_version;
    j["gpudx_version"] = r.gpudx_version;
    j["started_at"] = r.started_at;
    j["node"] = r.node;
    j["kernel"] = r.kernel;
    j["module_version"] = r.module_version;
    j["driver_version"] = r.driver_version;
    j["cuda_driver_version"] = r.cuda_driver_version;
    j["driver_library"] = r.driver_library;
    j["image_digest"] = r.image_digest;
    j["mode"] = r.mode;
    j["gpus"] = r.gpus;
    j["thresholds"] = r.thresholds;
    j["thresholds_source"] = r.thresholds_source;
    j["allocation_source"] = r.allocation_source;
    j["allocation"] = r.allocation;
    j["tests"] = nlohmann::json::array();
    for (auto& t : r.tests) j["tests"].push_back(sub_test_to_json(t));
    j["verdict"] = r.verdict;
    j["exit_code"] = r.exit_code;
    j["wall_ms"] = r.wall_ms;
    return j;
}

Result<AcceptReport> accept_report_from_json(const nlohmann::json& input) {
    nlohmann::json j = input;
    if (auto bad = normalise_numbers(j)) return fail("malformed accept record: " + *bad);
    // Checked before reading: value() throws on a key of the wrong type.
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || j["kind"].get<std::string>() != "gpudx-accept")
        return fail("not a gpudx accept record (no \"kind\": \"gpudx-accept\")");
    if (j.contains("schema_version") && !j["schema_version"].is_number_integer())
        return fail("malformed accept record: schema_version is not an integer");
    int version = j.value("schema_version", 0);
    if (version > kAcceptSchemaVersion)
        return fail(fmt::format("accept record schema {} is newer than this gpudx understands ({})", version,
                                kAcceptSchemaVersion));
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's get<> throws on a wrong type).
    try {
        AcceptReport r;
        r.schema_version = version;
        r.gpudx_version = j.value("gpudx_version", std::string());
        r.started_at = j.value("started_at", std::string());
        r.node = j.value("node", std::string());
        r.kernel = j.value("kernel", std::string());
        r.module_version = j.value("module_version", std::string());
        r.driver_version = j.value("driver_version", std::string());
        if (j.contains("cuda_driver_version") && j["cuda_driver_version"].is_number_integer())
            r.cuda_driver_version = j["cuda_driver_version"].get<int>();
        r.driver_library = j.value("driver_library", std::string());
        r.image_digest = j.value("image_digest", std::string());
        r.mode = j.value("mode", std::string("quick"));
        if (j.contains("gpus")) r.gpus = j["gpus"].get<std::vector<AcceptGpu>>();
        if (j.contains("thresholds")) r.thresholds = j["thresholds"].get<AcceptThresholds>();
        r.thresholds_source = j.value("thresholds_source", std::string());
        r.allocation_source = j.value("allocation_source", std::string());
        r.allocation = j.value("allocation", std::vector<std::string>{});
        if (j.contains("tests"))
            for (auto& t : j["tests"]) {
                auto st = sub_test_from_json(t);
                if (!st) return std::unexpected(st.error());
                r.tests.push_back(std::move(*st));
            }
        r.verdict = j.value("verdict", std::string());
        r.exit_code = j.value("exit_code", 0);
        r.wall_ms = j.value("wall_ms", 0.0);
        return r;
    } catch (const std::exception& e) {
        return fail(std::string("malformed accept record: ") + e.what());
    }
}

Result<AcceptReport> load_accept_report(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail("cannot open: " + std::string(std::strerror(errno)), path, errno);
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().size() > 64u * 1024 * 1024) return fail("file too large for an accept record", path);
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) return fail("not valid JSON", path);
    auto r = accept_report_from_json(j);
    if (!r) return fail(r.error().message, path);
    return r;
}

// ---- judging -------------------------------------------------------------------------------------

TestStatus judge_floor(double value, std::optional<double> floor) {
    if (!floor) return TestStatus::pass;
    if (!std::isfinite(value) || value < *floor) return TestStatus::fail;
    if (value < *floor * (1.0 + kThresholdWarnMargin)) return TestStatus::warn;
    return TestStatus::pass;
}

TestStatus worse(TestStatus a, TestStatus b) { return status_rank(a) >= status_rank(b) ? a : b; }

void apply_verdict(AcceptReport& report) {
    bool failed = false, not_run = false, warned = false;
    for (auto& t : report.tests) {
        if (!t.required) continue;
        failed |= t.status == TestStatus::fail;
        not_run |= t.status == TestStatus::not_run;
        warned |= t.status == TestStatus::warn;
    }
    if (report.tests.empty()) not_run = true;
    if (failed) {
        report.verdict = "fail";
        report.exit_code = 1;
    } else if (not_run) {
        report.verdict = "fail";
        report.exit_code = 3;
    } else if (warned) {
        report.verdict = "warn";
        report.exit_code = 2;
    } else {
        report.verdict = "pass";
        report.exit_code = 0;
    }
}

namespace {

// Applies a floor to one figure: records the floor, and worsens the test with a reason.
void hold_to_floor(SubTest& t, const std::string& figure, std::optional<double> floor, const std::string& label) {
    if (!floor) return;
    t.thresholds[figure] = *floor;
    double v = t.figures.count(figure) ? t.figures[figure] : NAN;
    auto st = judge_floor(v, floor);
    if (st == TestStatus::pass) return;
    std::string why = st == TestStatus::fail
                          ? fmt::format("{} {:.1f} GB/s is below the floor of {:.1f} GB/s", label, v, *floor)
                          : fmt::format("{} {:.1f} GB/s is within 5 % of the floor of {:.1f} GB/s", label, v, *floor);
    t.status = worse(t.status, st);
    t.reason = t.reason.empty() ? why : t.reason + "; " + why;
}

void add_reason(SubTest& t, TestStatus st, const std::string& why) {
    t.status = worse(t.status, st);
    t.reason = t.reason.empty() ? why : t.reason + "; " + why;
}

double gbps(uint64_t bytes, unsigned reps, double seconds, double factor = 1.0) {
    if (seconds <= 0) return NAN;
    return factor * static_cast<double>(bytes) * reps / seconds / kGB;
}

}  // namespace

// ---- allocation, pairs, topology -----------------------------------------------------------------

std::optional<std::pair<std::string, std::vector<std::string>>> allocation_from_environment(
    const std::map<std::string, std::string>& env) {
    auto entries_of = [](std::string_view v) {
        std::vector<std::string> out;
        for (auto part : split(v, ',')) {
            auto p = trim(part);
            if (!p.empty()) out.emplace_back(p);
        }
        return out;
    };
    for (const char* name : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
        auto it = env.find(name);
        if (it == env.end()) continue;
        auto l = lower(trim(it->second));
        if (l.empty() || l == "all" || l == "none" || l == "void" || l == "nodevfiles") continue;
        auto entries = entries_of(it->second);
        if (!entries.empty()) return std::make_pair(std::string(name), entries);
    }
    return std::nullopt;
}

std::optional<size_t> find_gpu(std::string_view name, const std::vector<AcceptGpu>& gpus) {
    auto n = lower(trim(name));
    if (n.empty()) return std::nullopt;
    if (looks_like_uuid(n)) {
        std::optional<size_t> hit;
        for (size_t i = 0; i < gpus.size(); ++i) {
            auto u = lower(gpus[i].uuid);
            if (u == n) return i;
            if (u.starts_with(n)) {
                if (hit) return std::nullopt;  // ambiguous prefix
                hit = i;
            }
        }
        return hit;
    }
    if (auto pci = PciAddress::parse(n)) {
        for (size_t i = 0; i < gpus.size(); ++i)
            if (auto g = PciAddress::parse(gpus[i].pci); g && *g == *pci) return i;
        return std::nullopt;
    }
    if (auto ord = parse_uint(n)) {
        for (size_t i = 0; i < gpus.size(); ++i)
            if (static_cast<uint64_t>(gpus[i].ordinal) == *ord) return i;
    }
    return std::nullopt;
}

PairSelection select_pairs(std::string_view spec, const std::vector<AcceptGpu>& gpus) {
    PairSelection sel;
    auto s = lower(trim(spec));
    std::set<std::pair<int, int>> seen;
    auto add = [&](int a, int b) {
        if (a == b) return;
        auto p = std::minmax(a, b);
        if (seen.insert(p).second) sel.pairs.push_back(p);
    };
    if (s.empty() || s == "all") {
        for (size_t i = 0; i < gpus.size(); ++i)
            for (size_t k = i + 1; k < gpus.size(); ++k) add(gpus[i].ordinal, gpus[k].ordinal);
        return sel;
    }
    if (s == "none") return sel;
    for (auto part : split(spec, ',')) {
        auto p = trim(part);
        if (p.empty()) continue;
        // A PCI address holds ':' itself, so split at the ':' that leaves two parseable names.
        bool matched = false;
        for (size_t pos = p.find(':'); pos != std::string_view::npos; pos = p.find(':', pos + 1)) {
            auto a = find_gpu(p.substr(0, pos), gpus), b = find_gpu(p.substr(pos + 1), gpus);
            if (a && b) {
                add(gpus[*a].ordinal, gpus[*b].ordinal);
                matched = true;
                break;
            }
        }
        if (!matched) sel.unknown.emplace_back(p);
    }
    return sel;
}

PeerLink classify_pcie_paths(std::string_view a, std::string_view b) {
    auto components = [](std::string_view p) {
        std::vector<std::string_view> out;
        for (auto c : split(p, '/'))
            if (!c.empty()) out.push_back(c);
        return out;
    };
    auto ca = components(a), cb = components(b);
    // /sys/devices/pci<domain>:<bus>/<root port>/<switch up>/<switch down>/<gpu>
    auto root_of = [](const std::vector<std::string_view>& c) -> std::optional<size_t> {
        for (size_t i = 0; i < c.size(); ++i)
            if (c[i].starts_with("pci")) return i;
        return std::nullopt;
    };
    auto ra = root_of(ca), rb = root_of(cb);
    if (!ra || !rb || *ra + 1 >= ca.size() || *rb + 1 >= cb.size()) return PeerLink::unknown;
    if (ca[*ra] != cb[*rb]) return PeerLink::pcie_cross_root;
    // Devices below the host bridge in common, excluding the GPUs themselves.
    size_t common = 0;
    for (size_t i = *ra + 1, k = *rb + 1; i + 1 < ca.size() && k + 1 < cb.size() && ca[i] == cb[k]; ++i, ++k) ++common;
    // A shared root port alone is not a switch; a switch shows as a shared device below the root port.
    return common >= 2 ? PeerLink::pcie_switch : PeerLink::pcie_host_bridge;
}

// ---- options ------------------------------------------------------------------------------------

AcceptOptions default_accept_options(bool long_mode) {
    AcceptOptions o;
    o.long_mode = long_mode;
    if (long_mode) {
        o.memory.patterns = {MemoryPattern::walking_ones, MemoryPattern::walking_zeros, MemoryPattern::address,
                             MemoryPattern::random};
        o.memory.passes = 4;
        o.memory.fraction_of_free = 0.95;
        o.compute_repetitions = 200;
        o.d2d.repetitions = 200;
        o.host.repetitions = 20;
        o.p2p.repetitions = 50;
    }
    return o;
}

// ---- the run -------------------------------------------------------------------------------------

namespace {

class Acceptance {
public:
    Acceptance(AcceptDriver& d, const AcceptOptions& o, AcceptObserver* obs) : drv_(d), o_(o), obs_(obs) {}

    AcceptReport run() {
        auto t0 = Clock::now();
        r_.gpudx_version = GPUDX_VERSION;
        r_.started_at = utc_now_iso();
        r_.node = o_.node;
        r_.kernel = o_.kernel;
        r_.module_version = o_.module_version;
        r_.image_digest = o_.image_digest;
        r_.mode = o_.long_mode ? "long" : "quick";
        r_.thresholds = o_.thresholds;
        r_.thresholds_source = o_.thresholds_source;

        r_.tests.push_back(make("driver.init", {}));
        plan_changed();
        run_step(0, ms(60000), [&](SubTest& t) { init(t); });
        // A short count (--expect-gpus) fails driver.init, but the GPUs that are there still get tested.
        if (!r_.gpus.empty()) {
            plan_gpu_tests();
            plan_pairs_topology();
            plan_isolation();
            plan_changed();
            // A step may append steps (the pair tests follow the topology): copy it before running.
            for (size_t i = 1; i < steps_.size() + 1 && i < r_.tests.size(); ++i) {
                Step st = steps_[i - 1];
                run_step(i, st.deadline, st.body);
            }
        }
        apply_verdict(r_);
        r_.wall_ms = ms_since(t0);
        return r_;
    }

private:
    struct Step {
        ms deadline;
        std::function<void(SubTest&)> body;
    };

    SubTest make(std::string id, const std::vector<int>& ordinals, bool required = true) {
        SubTest t;
        t.id = std::move(id);
        t.required = required;
        t.reason = "not reached";
        for (int ord : ordinals)
            if (auto* g = gpu(ord)) {
                t.subjects.push_back(g->uuid);
                t.pci.push_back(g->pci);
            }
        return t;
    }

    const AcceptGpu* gpu(int ordinal) const {
        for (auto& g : r_.gpus)
            if (g.ordinal == ordinal) return &g;
        return nullptr;
    }

    void add_step(SubTest t, ms deadline, std::function<void(SubTest&)> body, std::vector<int> needs = {}) {
        r_.tests.push_back(std::move(t));
        steps_.push_back({deadline, [this, body = std::move(body), needs = std::move(needs)](SubTest& t) {
                              for (int ord : needs)
                                  if (broken_.count(ord)) {
                                      t.status = TestStatus::not_run;
                                      t.reason = broken_[ord];
                                      return;
                                  }
                              body(t);
                          }});
    }

    void plan_changed() {
        if (obs_) obs_->planned(r_.tests);
    }

    void run_step(size_t index, ms deadline, const std::function<void(SubTest&)>& body) {
        SubTest t = r_.tests[index];  // a copy: the body may grow r_.tests
        t.status = TestStatus::pass;
        t.reason.clear();
        if (obs_) obs_->started(t, deadline);
        auto t0 = Clock::now();
        // Fault-isolation boundary: each sub-test. One that throws fails, the rest of the plan still runs.
        try {
            body(t);
        } catch (const std::exception& e) {
            add_reason(t, TestStatus::fail, std::string("internal error: ") + e.what());
        }
        t.duration_ms = ms_since(t0);
        r_.tests[index] = t;
        if (obs_) obs_->finished(t);
    }

    void init(SubTest& t) {
        auto facts = drv_.open();
        if (!facts) {
            bool absent = facts.error().sys_errno == ENODEV;
            t.status = absent ? TestStatus::not_run : TestStatus::fail;
            t.reason = facts.error().message;
            if (!facts.error().path.empty()) t.details["call"] = facts.error().path;
            return;
        }
        r_.driver_library = facts->library_path;
        r_.cuda_driver_version = facts->cuda_driver_version;
        r_.driver_version = facts->driver_version;
        auto gpus = drv_.devices();
        if (!gpus) {
            t.status = TestStatus::fail;
            t.reason = gpus.error().message;
            return;
        }
        r_.gpus = *gpus;
        // The GPUs found are the record's "gpus"; no subjects here, so this test's key stays "driver.init".
        t.figures["gpus"] = static_cast<double>(r_.gpus.size());
        t.details["library"] = facts->library_path;
        if (r_.gpus.empty()) {
            t.status = TestStatus::not_run;
            t.reason = "no GPU visible to CUDA";
        } else if (o_.expect_gpus && r_.gpus.size() < *o_.expect_gpus) {
            add_reason(t, TestStatus::fail,
                       fmt::format("CUDA sees {} GPU(s), {} expected", r_.gpus.size(), *o_.expect_gpus));
        }
        if (obs_) obs_->header(r_);
    }

    // ---- per GPU

    void plan_gpu_tests() {
        for (auto& g : r_.gpus) {
            int ord = g.ordinal;
            add_step(make("gpu.context", {ord}), ms(60000), [this, ord](SubTest& t) {
                auto r = drv_.create_context(ord);
                if (!r) {
                    add_reason(t, TestStatus::fail, r.error().message);
                    broken_[ord] = "not run: context creation failed on this GPU";
                    return;
                }
                t.figures["context_ms"] = *r;
            });
            add_step(make("gpu.compute", {ord}), ms(20000 + 100 * o_.compute_repetitions),
                     [this, ord](SubTest& t) { compute(t, ord); }, {ord});
            uint64_t mem_est = g.total_memory ? g.total_memory : (80ull << 30);
            auto mem_deadline = ms(30000 + static_cast<long>(static_cast<double>(mem_est) * o_.memory.patterns.size() *
                                                             o_.memory.passes * 2 / 100e9 * 1000));
            add_step(make("gpu.d2d", {ord}), copy_deadline(sized(o_.d2d, g, 8), 1),
                     [this, ord](SubTest& t) { device_copy(t, ord); }, {ord});
            add_step(make("gpu.h2d", {ord}), copy_deadline(sized(o_.host, g, 4), 2),
                     [this, ord](SubTest& t) { host_copy(t, ord, true); }, {ord});
            add_step(make("gpu.d2h", {ord}), copy_deadline(sized(o_.host, g, 4), 2),
                     [this, ord](SubTest& t) { host_copy(t, ord, false); }, {ord});
            // The pattern test last: after it has taken and released most of the memory in chunks, new
            // allocations can land on fragmented physical memory, and a 4 GiB copy measured 0.87-0.9 of
            // the rate a fresh allocation reaches on an H200 (docs/device-runs/).
            add_step(make("gpu.memory", {ord}), mem_deadline, [this, ord](SubTest& t) { memory(t, ord); }, {ord});
        }
    }

    // A transfer size that fits the GPU: at most total/divisor, at least 2 MiB.
    CopyPlan sized(CopyPlan p, const AcceptGpu& g, unsigned divisor) const {
        if (g.total_memory) p.bytes = std::min<uint64_t>(p.bytes, g.total_memory / divisor);
        p.bytes = std::max<uint64_t>(round_2mib(p.bytes), 2ull << 20);
        return p;
    }

    static ms copy_deadline(const CopyPlan& p, unsigned directions) {
        // A slow link (PCIe gen3 x4, ~3 GB/s) still finishes well inside this.
        return ms(15000 + static_cast<long>(static_cast<double>(p.bytes) * p.repetitions * directions / 2e9 * 1000));
    }

    void compute(SubTest& t, int ord) {
        auto r = drv_.compute(ord, o_.compute_repetitions);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        t.figures["threads"] = static_cast<double>(r->threads);
        t.figures["wrong_values"] = static_cast<double>(r->wrong_values);
        t.figures["sms_seen"] = r->sms_seen;
        t.figures["sm_count"] = r->sm_count;
        t.figures["repetitions"] = r->repetitions;
        if (r->seconds > 0) t.figures["kernel_ms"] = r->seconds * 1000;
        if (r->threads == 0) add_reason(t, TestStatus::fail, "the compute kernel wrote no values");
        if (r->wrong_values)
            add_reason(t, TestStatus::fail,
                       fmt::format("{} of {} values differ from the known answer", r->wrong_values, r->threads));
        if (r->sm_count && r->sms_seen < r->sm_count)
            add_reason(t, TestStatus::fail,
                       fmt::format("only {} of {} multiprocessors ran a block", r->sms_seen, r->sm_count));
    }

    void memory(SubTest& t, int ord) {
        auto r = drv_.memory(ord, o_.memory);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        uint64_t errors = 0;
        for (auto& p : r->patterns) {
            errors += p.errors;
            std::string name = fmt::format("{}#{}", p.pattern, p.seed);
            t.details["pattern " + name] =
                p.errors ? fmt::format("{} bad words, first at byte offset {:#x}", p.errors, p.first_error_offset.value_or(0))
                         : "ok";
        }
        double fraction = r->free_bytes ? static_cast<double>(r->tested_bytes) / r->free_bytes : 0;
        t.figures["tested_gib"] = static_cast<double>(r->tested_bytes) / (1ull << 30);
        t.figures["free_gib"] = static_cast<double>(r->free_bytes) / (1ull << 30);
        t.figures["fraction_of_free"] = fraction;
        t.figures["chunks"] = r->chunks;
        t.figures["patterns"] = static_cast<double>(r->patterns.size());
        t.figures["errors"] = static_cast<double>(errors);
        if (r->write_seconds > 0) t.figures["write_gbps"] = r->written_bytes / r->write_seconds / kGB;
        if (r->read_seconds > 0) t.figures["read_gbps"] = r->read_bytes / r->read_seconds / kGB;
        if (r->tested_bytes == 0) add_reason(t, TestStatus::fail, "no memory could be allocated");
        if (r->patterns.empty()) add_reason(t, TestStatus::fail, "no pattern ran");
        if (errors)
            add_reason(t, TestStatus::fail,
                       fmt::format("{} wrong 8-byte words over {} tested", errors, gib(r->tested_bytes)));
        if (!r->released) add_reason(t, TestStatus::fail, "the tested memory was not released");
        if (auto floor = o_.thresholds.min_memory_fraction) {
            t.thresholds["fraction_of_free"] = *floor;
            if (fraction < *floor)
                add_reason(t, TestStatus::fail,
                           fmt::format("covered {:.0f} % of free memory, {:.0f} % required", fraction * 100, *floor * 100));
        }
    }

    void device_copy(SubTest& t, int ord) {
        auto plan = sized(o_.d2d, *gpu(ord), 8);
        auto r = drv_.device_copy(ord, plan);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        record_copy(t, "d2d", *r, 2.0);
        t.details["accounting"] = "bytes read + bytes written per second (2 x size x repetitions / time)";
        hold_to_floor(t, "d2d_gbps", o_.thresholds.min_d2d_gbps, "device-to-device copy");
    }

    void host_copy(SubTest& t, int ord, bool h2d) {
        if (!host_cache_.count(ord)) host_cache_.emplace(ord, drv_.host_copies(ord, sized(o_.host, *gpu(ord), 4)));
        auto& r = host_cache_.at(ord);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        const auto& f = h2d ? r->h2d : r->d2h;
        record_copy(t, h2d ? "h2d" : "d2h", f, 1.0);
        t.details["memory"] = "pinned (cuMemHostAlloc)";
        hold_to_floor(t, h2d ? "h2d_gbps" : "d2h_gbps", h2d ? o_.thresholds.min_h2d_gbps : o_.thresholds.min_d2h_gbps,
                      h2d ? "host-to-device copy" : "device-to-host copy");
    }

    static void record_copy(SubTest& t, const std::string& name, const CopyFigures& f, double factor) {
        t.figures[name + "_gbps"] = gbps(f.bytes, f.repetitions, f.seconds, factor);
        t.figures[name + "_bytes"] = static_cast<double>(f.bytes);
        t.figures[name + "_repetitions"] = f.repetitions;
        t.figures[name + "_mismatches"] = static_cast<double>(f.mismatches);
        if (f.bytes == 0 || f.repetitions == 0 || f.seconds <= 0)
            add_reason(t, TestStatus::fail, name + ": the copy was not timed");
        if (f.mismatches)
            add_reason(t, TestStatus::fail,
                       fmt::format("{}: {} of {} words arrived wrong", name, f.mismatches, f.bytes / 8));
    }

    // ---- pairs

    void plan_pairs_topology() {
        auto spec = o_.thresholds.pairs && o_.pairs == "all" ? *o_.thresholds.pairs : o_.pairs;
        auto sel = select_pairs(spec, r_.gpus);
        for (auto& name : sel.unknown) {
            auto t = make("pair.copy", {});
            t.details["pair"] = name;
            add_step(std::move(t), ms(1000), [name](SubTest& t) {
                t.status = TestStatus::not_run;
                t.reason = "the permitted pair \"" + name + "\" names a GPU that CUDA does not see on this node";
            });
        }
        if (sel.pairs.empty()) return;
        pairs_ = sel.pairs;
        std::vector<int> all;
        for (auto& [a, b] : pairs_) {
            all.push_back(a);
            all.push_back(b);
        }
        auto t = make("pairs.topology", {});
        t.details["pairs"] = std::to_string(pairs_.size());
        add_step(std::move(t), ms(20000), [this](SubTest& t) { topology(t); });
    }

    void topology(SubTest& t) {
        for (auto& [a, b] : pairs_) {
            auto r = drv_.peer_info(a, b);
            std::string label = short_uuid(gpu(a)->uuid) + " " + short_uuid(gpu(b)->uuid);
            if (!r) {
                add_reason(t, TestStatus::fail, label + ": " + r.error().message);
                peers_[{a, b}] = PeerInfo{};
                continue;
            }
            peers_[{a, b}] = *r;
            t.details[label] = std::string(to_string(r->link)) + (r->link_evidence.empty() ? "" : " (" + r->link_evidence + ")");
        }
        // NVLink first, then a shared switch, then the host bridge, then across root complexes.
        auto rank = [&](const std::pair<int, int>& p) { return static_cast<int>(peers_[p].link); };
        std::stable_sort(pairs_.begin(), pairs_.end(), [&](auto& x, auto& y) { return rank(x) < rank(y); });
        for (auto& p : pairs_) {
            auto [a, b] = p;
            auto access = make("pair.peer_access", {a, b});
            access.details["link"] = to_string(peers_[p].link);
            add_step(std::move(access), ms(1000), [this, p](SubTest& t) { peer_access(t, p); }, {a, b});
            auto copy = make("pair.copy", {a, b});
            copy.details["link"] = to_string(peers_[p].link);
            add_step(std::move(copy), copy_deadline(pair_plan(a, b), 2), [this, p](SubTest& t) { pair_copy(t, p); },
                     {a, b});
        }
        auto all = make("pairs.concurrent", {});
        for (auto& [a, b] : pairs_) all.details[short_uuid(gpu(a)->uuid) + " " + short_uuid(gpu(b)->uuid)] = "both ways";
        add_step(std::move(all), copy_deadline(pair_plan(pairs_[0].first, pairs_[0].second), 2 * pairs_.size()),
                 [this](SubTest& t) { concurrent(t); });
        // Isolation steps were planned before the pair steps existed; keep them last.
        std::rotate(r_.tests.begin() + 1 + isolation_begin_, r_.tests.begin() + 1 + isolation_begin_ + isolation_count_,
                    r_.tests.end());
        std::rotate(steps_.begin() + isolation_begin_, steps_.begin() + isolation_begin_ + isolation_count_, steps_.end());
        isolation_begin_ = steps_.size() - isolation_count_;
        plan_changed();
    }

    CopyPlan pair_plan(int a, int b) const {
        auto p = sized(o_.p2p, *gpu(a), 8);
        return sized(p, *gpu(b), 8);
    }

    std::optional<double> pair_floor(PeerLink link) const {
        return link == PeerLink::nvlink ? o_.thresholds.min_p2p_gbps : o_.thresholds.min_p2p_pcie_gbps;
    }

    void peer_access(SubTest& t, std::pair<int, int> p) {
        auto& info = peers_[p];
        t.figures["a_to_b"] = info.a_to_b;
        t.figures["b_to_a"] = info.b_to_a;
        t.details["link"] = to_string(info.link);
        if (!info.a_to_b || !info.b_to_a)
            add_reason(t, TestStatus::fail,
                       fmt::format("peer access not supported ({} -> {}: {}, {} -> {}: {})", short_uuid(gpu(p.first)->uuid),
                                   short_uuid(gpu(p.second)->uuid), info.a_to_b ? "yes" : "no",
                                   short_uuid(gpu(p.second)->uuid), short_uuid(gpu(p.first)->uuid),
                                   info.b_to_a ? "yes" : "no"));
    }

    void pair_copy(SubTest& t, std::pair<int, int> p) {
        auto [a, b] = p;
        auto plan = pair_plan(a, b);
        auto link = peers_[p].link;
        for (auto [src, dst, name] : {std::tuple{a, b, "a_to_b"}, std::tuple{b, a, "b_to_a"}}) {
            auto r = drv_.peer_copy(src, dst, plan);
            if (!r) {
                add_reason(t, TestStatus::fail, std::string(name) + ": " + r.error().message);
                continue;
            }
            record_copy(t, name, *r, 1.0);
            hold_to_floor(t, std::string(name) + "_gbps", pair_floor(link),
                          fmt::format("copy {} -> {}", short_uuid(gpu(src)->uuid), short_uuid(gpu(dst)->uuid)));
        }
        if (link == PeerLink::unknown && pair_floor(link))
            t.details["floor"] = "link class unknown: held to the PCIe floor";
    }

    void concurrent(SubTest& t) {
        std::vector<std::pair<int, int>> routes;
        for (auto& [a, b] : pairs_) {
            if (broken_.count(a) || broken_.count(b)) continue;
            routes.emplace_back(a, b);
            routes.emplace_back(b, a);
        }
        if (routes.empty()) {
            t.status = TestStatus::not_run;
            t.reason = "no pair with working contexts";
            return;
        }
        auto plan = pair_plan(routes[0].first, routes[0].second);
        auto r = drv_.peer_copy_concurrent(routes, plan);
        if (!r) return add_reason(t, TestStatus::fail, r.error().message);
        if (r->size() != routes.size()) return add_reason(t, TestStatus::fail, "the driver answered for fewer routes");
        double total_bytes = 0, longest = 0;
        for (size_t i = 0; i < routes.size(); ++i) {
            auto [src, dst] = routes[i];
            auto name = fmt::format("{}_to_{}", short_uuid(gpu(src)->uuid), short_uuid(gpu(dst)->uuid));
            record_copy(t, name, (*r)[i], 1.0);
            total_bytes += static_cast<double>((*r)[i].bytes) * (*r)[i].repetitions;
            longest = std::max(longest, (*r)[i].seconds);
            // Links shared by several routes (PCIe) are expected to slow down; NVLink routes are not shared.
            auto p = std::minmax(src, dst);
            if (peers_[p].link == PeerLink::nvlink)
                hold_to_floor(t, name + "_gbps", o_.thresholds.min_p2p_gbps, "concurrent copy " + name);
        }
        if (longest > 0) t.figures["aggregate_gbps"] = total_bytes / longest / kGB;
        t.figures["routes"] = static_cast<double>(routes.size());
    }

    // ---- isolation

    void plan_isolation() {
        isolation_begin_ = steps_.size();
        std::vector<std::string> entries = o_.allow;
        std::string source = o_.allow_source.empty() && !entries.empty() ? "--allow" : o_.allow_source;
        if (entries.empty())
            if (auto a = allocation_from_environment(o_.environment)) std::tie(source, entries) = *a;
        if (entries.empty()) {
            for (auto id : {"isolation.job", "isolation.disjoint"}) {
                add_step(make(id, {}, false), ms(1000), [](SubTest& t) {
                    t.status = TestStatus::not_run;
                    t.reason = "no allocation to check: pass --allow UUID,... or run inside the job "
                               "(CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES or SLURM_JOB_GPUS set)";
                });
            }
            isolation_count_ = 2;
            return;
        }
        r_.allocation_source = source;
        r_.allocation = entries;
        // Resolve the entries to GPUs. Under CUDA_VISIBLE_DEVICES, CUDA already renumbered: an index is
        // a position in the list, so entry k is ordinal k. Other indices are NVML's (PCI bus order).
        std::vector<const AcceptGpu*> by_pci;
        for (auto& g : r_.gpus) by_pci.push_back(&g);
        std::sort(by_pci.begin(), by_pci.end(), [](auto* x, auto* y) { return normalize_pci(x->pci) < normalize_pci(y->pci); });
        std::vector<std::string> unresolved;
        std::set<std::string> allocated;
        for (size_t k = 0; k < entries.size(); ++k) {
            const auto& e = entries[k];
            const AcceptGpu* hit = nullptr;
            if (auto idx = parse_uint(trim(e)); idx && !looks_like_uuid(e)) {
                if (source == "CUDA_VISIBLE_DEVICES") {
                    for (auto& g : r_.gpus)
                        if (static_cast<size_t>(g.ordinal) == k) hit = &g;
                } else if (*idx < by_pci.size()) {
                    hit = by_pci[*idx];
                }
            } else if (auto i = find_gpu(e, r_.gpus)) {
                hit = &r_.gpus[*i];
            }
            if (hit) allocated.insert(lower(hit->uuid));
            else unresolved.push_back(e);
        }
        std::vector<std::string> alloc_uuids, other_uuids;
        for (auto& g : r_.gpus) (allocated.count(lower(g.uuid)) ? alloc_uuids : other_uuids).push_back(g.uuid);

        auto job = make("isolation.job", {});
        job.subjects = alloc_uuids;
        job.details["allocation"] = join(entries, ",");
        job.details["source"] = source;
        add_step(std::move(job), ms(60000), [this, source, alloc_uuids, other_uuids, unresolved](SubTest& t) {
            if (!unresolved.empty())
                return add_reason(t, TestStatus::fail,
                                  "the allocation names " + join(unresolved, ", ") + ", which CUDA does not see on this node");
            auto env = o_.environment;
            if (source == "--allow") {
                env.erase("CUDA_DEVICE_ORDER");
                env["CUDA_VISIBLE_DEVICES"] = join(alloc_uuids, ",");
                env["NVIDIA_VISIBLE_DEVICES"] = join(alloc_uuids, ",");
            }
            t.details["child CUDA_VISIBLE_DEVICES"] = env.count("CUDA_VISIBLE_DEVICES") ? env["CUDA_VISIBLE_DEVICES"] : "<unset>";
            auto views = drv_.visible_in_children({env}, ms(30000));
            if (views.size() != 1) return add_reason(t, TestStatus::fail, "the child did not report");
            judge_view(t, "", views[0], alloc_uuids, other_uuids);
        });

        // Two children at once with disjoint allocations: the allocation and the rest of the node, or
        // the allocation split in two when it is the whole node.
        std::vector<std::string> a = alloc_uuids, b = other_uuids;
        if (b.empty() && a.size() >= 2) {
            b.assign(a.begin() + a.size() / 2, a.end());
            a.resize(a.size() / 2);
        }
        auto disjoint = make("isolation.disjoint", {}, !a.empty() && !b.empty());
        disjoint.subjects = a;
        disjoint.subjects.insert(disjoint.subjects.end(), b.begin(), b.end());
        add_step(std::move(disjoint), ms(60000), [this, a, b](SubTest& t) {
            if (a.empty() || b.empty()) {
                t.status = TestStatus::not_run;
                t.reason = "needs two GPUs to give two children disjoint allocations";
                return;
            }
            auto env_for = [&](const std::vector<std::string>& set) {
                auto env = o_.environment;
                env.erase("CUDA_DEVICE_ORDER");
                env["CUDA_VISIBLE_DEVICES"] = join(set, ",");
                env["NVIDIA_VISIBLE_DEVICES"] = join(set, ",");
                return env;
            };
            t.details["child A"] = join(a, ",");
            t.details["child B"] = join(b, ",");
            auto views = drv_.visible_in_children({env_for(a), env_for(b)}, ms(30000));
            if (views.size() != 2) return add_reason(t, TestStatus::fail, "the children did not report");
            judge_view(t, "child A: ", views[0], a, b);
            judge_view(t, "child B: ", views[1], b, a);
        });
        isolation_count_ = 2;
    }

    // A child must see exactly `expected` through CUDA and NVML, and none of `forbidden`.
    static void judge_view(SubTest& t, const std::string& who, const Result<VisibleView>& view,
                           const std::vector<std::string>& expected, const std::vector<std::string>& forbidden) {
        if (!view) return add_reason(t, TestStatus::fail, who + "the child failed: " + view.error().message);
        std::set<std::string> want;
        for (auto& u : expected) want.insert(lower(u));
        std::set<std::string> others;
        for (auto& u : forbidden) others.insert(lower(u));
        auto judge = [&](const char* api, const std::optional<std::vector<std::string>>& seen, const std::string& error) {
            if (!seen) {
                add_reason(t, TestStatus::not_run, who + api + " could not be asked in the child: " + error);
                return;
            }
            t.details[who + api + " sees"] = seen->empty() ? "nothing" : join(*seen, ",");
            std::set<std::string> got;
            for (auto& u : *seen) got.insert(lower(u));
            std::vector<std::string> missing, extra;
            for (auto& u : want)
                if (!got.count(u)) missing.push_back(u);
            for (auto& u : got)
                if (!want.count(u)) extra.push_back(u);
            if (!missing.empty())
                add_reason(t, TestStatus::fail, who + api + " does not show allocated " + join(missing, ","));
            if (!extra.empty()) {
                bool foreign = std::any_of(extra.begin(), extra.end(), [&](auto& u) { return others.count(u) > 0; });
                add_reason(t, TestStatus::fail,
                           who + api + " shows " + join(extra, ",") + (foreign ? " outside its allocation" : " (not allocated)") +
                               (std::string(api) == "NVML" ? ": devices are not confined (CUDA_VISIBLE_DEVICES only hides GPUs "
                                                             "from CUDA; confine /dev/nvidia* with cgroups, e.g. Slurm "
                                                             "ConstrainDevices=yes)"
                                                           : ""));
            }
        };
        judge("CUDA", view->cuda_uuids, view->cuda_error);
        judge("NVML", view->nvml_uuids, view->nvml_error);
    }

    AcceptDriver& drv_;
    const AcceptOptions& o_;
    AcceptObserver* obs_;
    AcceptReport r_;
    std::vector<Step> steps_;  // step i runs r_.tests[i + 1]
    std::map<int, std::string> broken_;
    std::map<int, Result<HostCopyFigures>> host_cache_;
    std::vector<std::pair<int, int>> pairs_;
    std::map<std::pair<int, int>, PeerInfo> peers_;
    size_t isolation_begin_ = 0, isolation_count_ = 0;
};

}  // namespace

AcceptReport run_acceptance(AcceptDriver& driver, const AcceptOptions& options, AcceptObserver* observer) {
    return Acceptance(driver, options, observer).run();
}

// ---- the watched run -----------------------------------------------------------------------------

namespace {

class PipeObserver : public AcceptObserver {
public:
    explicit PipeObserver(int fd) : fd_(fd) {}
    void send(const nlohmann::json& j) { write_all(fd_, json_line(j)); }
    void header(const AcceptReport& r) override { send({{"type", "header"}, {"report", accept_report_to_json(r)}}); }
    void planned(const std::vector<SubTest>& tests) override {
        nlohmann::json arr = nlohmann::json::array();
        for (auto& t : tests) arr.push_back(sub_test_to_json(t));
        send({{"type", "plan"}, {"tests", arr}});
    }
    void started(const SubTest& t, ms deadline) override {
        send({{"type", "start"}, {"key", t.key()}, {"deadline_ms", deadline.count()}});
    }
    void finished(const SubTest& t) override { send({{"type", "done"}, {"test", sub_test_to_json(t)}}); }

private:
    int fd_;
};

}  // namespace

AcceptReport run_acceptance_watched(const std::function<std::unique_ptr<AcceptDriver>()>& make_driver,
                                    const AcceptOptions& options, const WatchOptions& watch) {
    auto t0 = Clock::now();
    AcceptReport report;
    report.gpudx_version = GPUDX_VERSION;
    report.started_at = utc_now_iso();
    report.node = options.node;
    report.kernel = options.kernel;
    report.module_version = options.module_version;
    report.image_digest = options.image_digest;
    report.mode = options.long_mode ? "long" : "quick";
    report.thresholds = options.thresholds;
    report.thresholds_source = options.thresholds_source;

    auto give_up = [&](const std::string& why) {
        SubTest t;
        t.id = "driver.init";
        t.status = TestStatus::fail;
        t.reason = why;
        report.tests = {t};
        apply_verdict(report);
        report.wall_ms = ms_since(t0);
        return report;
    };

    auto child = Child::start([&](int fd) {
        PipeObserver obs(fd);
        auto driver = make_driver();
        auto r = run_acceptance(*driver, options, &obs);
        obs.send({{"type", "final"}, {"report", accept_report_to_json(r)}});
        return 0;
    });
    if (!child) {
        const Error& e = child.error();
        return give_up(e.path == "fork" ? "cannot fork the acceptance process: " + e.message
                                        : "cannot create a pipe: " + e.message);
    }
    const pid_t pid = child->pid();

    std::vector<SubTest> tests;
    std::optional<AcceptReport> final_report;
    std::string running;  // key of the sub-test in progress
    Clock::time_point running_deadline = Clock::time_point::max();
    auto overall_end = t0 + watch.overall;
    std::string stop_reason;
    bool child_gone = false;
    size_t done_count = 0;

    // The watchdog names the hung sub-test from these lines: past one it cannot read it could only guess, so it
    // stops the run there and says why.
    auto unreadable = [&](std::string_view line, std::string_view what) {
        stop_reason = fmt::format("the acceptance process wrote {} ({}): gpudx stopped it there", what, excerpt(line));
    };
    auto apply_line = [&](std::string_view line) {
        if (!stop_reason.empty() || final_report) return;  // the run is over: the final report is whole
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return unreadable(line, "a line that is not a JSON object");
        if (!j.contains("type") || !j["type"].is_string()) return unreadable(line, "a line without a type");
        auto type = j["type"].get<std::string>();
        if (type == "header") {
            auto r = accept_report_from_json(j["report"]);
            if (!r) return unreadable(line, "a malformed header: " + r.error().message);
            report.gpus = r->gpus;
            report.driver_version = r->driver_version;
            report.cuda_driver_version = r->cuda_driver_version;
            report.driver_library = r->driver_library;
        } else if (type == "plan") {
            std::map<std::string, SubTest> known;
            for (auto& t : tests) known[t.key()] = t;
            std::vector<SubTest> next;
            for (auto& tj : j["tests"]) {
                auto t = sub_test_from_json(tj);
                if (!t) return unreadable(line, "a plan with a malformed sub-test: " + t.error().message);
                auto it = known.find(t->key());
                next.push_back(it != known.end() && it->second.status != TestStatus::not_run ? it->second : *t);
            }
            tests = std::move(next);
        } else if (type == "start") {
            running = j.value("key", std::string());
            double scaled = j.value("deadline_ms", 60000.0) * watch.deadline_scale;
            running_deadline = Clock::now() + ms(static_cast<long>(std::max(scaled, 1.0)));
            if (watch.progress)
                for (auto& t : tests)
                    if (t.key() == running) watch.progress(t, done_count, tests.size());
        } else if (type == "done") {
            auto t = sub_test_from_json(j["test"]);
            if (!t) return unreadable(line, "a malformed result: " + t.error().message);
            ++done_count;
            bool placed = false;
            for (auto& x : tests)
                if (x.key() == t->key()) {
                    x = *t;
                    placed = true;
                }
            if (!placed) tests.push_back(*t);
            if (running == t->key()) {
                running.clear();
                running_deadline = Clock::time_point::max();
            }
        } else if (type == "final") {
            auto r = accept_report_from_json(j["report"]);
            if (!r) return unreadable(line, "a malformed final report: " + r.error().message);
            final_report = std::move(*r);
        } else {
            unreadable(line, "a line of an unknown type");
        }
    };

    while (!final_report && stop_reason.empty()) {
        auto now = Clock::now();
        auto until = std::min(overall_end, running_deadline);
        if (now >= until) {
            stop_reason = now >= overall_end && (running.empty() || overall_end <= running_deadline)
                              ? fmt::format("the whole acceptance ran past its {} s limit", watch.overall.count() / 1000)
                              : "no answer from the driver within the sub-test's deadline: a driver call hung";
            break;
        }
        auto got = child->read_until(until);
        if (got == Child::Read::nothing) continue;
        if (got == Child::Read::failed) {
            stop_reason = child->error();
            break;
        }
        if (got == Child::Read::closed) {
            child_gone = true;
            break;
        }
        split_lines(child->received(), apply_line);
    }
    // A child that died while writing a line leaves part of it: said beside how it died.
    std::string cut_off;
    if (child_gone && !child->received().empty())
        cut_off = fmt::format("; its last line was cut off after {} bytes ({})", child->received().size(),
                              excerpt(child->received()));

    auto ended = final_report || child_gone ? child->finish(ms(final_report ? 5000 : 2000)) : child->kill();
    bool reaped = ended.reaped();

    if (final_report) {
        report = std::move(*final_report);
    } else {
        std::string died;
        if (child_gone && reaped) {
            if (ended.signaled())
                died = fmt::format("the acceptance process died (signal {}: {})", ended.signal(), strsignal(ended.signal()));
            else died = fmt::format("the acceptance process exited ({}) without finishing", ended.exit_code());
        }
        if (!died.empty()) died += cut_off;
        std::string why = !stop_reason.empty() ? stop_reason : died;
        if (!stop_reason.empty() && !reaped)
            why += fmt::format("; process {} did not exit after SIGKILL (stuck in the kernel driver)", pid);
        if (tests.empty()) {
            SubTest t;
            t.id = "driver.init";
            tests.push_back(t);
            running = t.key();
        }
        std::string after;
        for (auto& t : tests) {
            if (t.key() == running) {
                t.status = TestStatus::fail;
                t.reason = why.empty() ? "the acceptance process stopped during this test" : why;
                after = t.key();
            } else if (t.reason == "not reached") {
                t.status = TestStatus::not_run;
                t.reason = after.empty() ? "not reached: " + (why.empty() ? std::string("the acceptance stopped") : why)
                                         : "not reached: the acceptance stopped at " + after;
            }
        }
        report.tests = std::move(tests);
    }
    apply_verdict(report);
    report.wall_ms = ms_since(t0);
    return report;
}

// ---- comparing -----------------------------------------------------------------------------------

std::vector<AcceptChange> compare_accept_reports(const AcceptReport& before, const AcceptReport& after) {
    std::vector<AcceptChange> out;
    auto field = [&](const char* name, const std::string& a, const std::string& b) {
        if (a != b) out.push_back({name, a.empty() ? "(unknown)" : a, b.empty() ? "(unknown)" : b, false});
    };
    field("node", before.node, after.node);
    field("kernel", before.kernel, after.kernel);
    field("module_version", before.module_version, after.module_version);
    field("driver_version", before.driver_version, after.driver_version);
    field("cuda_driver_version", before.cuda_driver_version ? std::to_string(*before.cuda_driver_version) : "",
          after.cuda_driver_version ? std::to_string(*after.cuda_driver_version) : "");
    field("image_digest", before.image_digest, after.image_digest);
    field("mode", before.mode, after.mode);

    std::map<std::string, const AcceptGpu*> gb, ga;
    for (auto& g : before.gpus) gb[lower(g.uuid)] = &g;
    for (auto& g : after.gpus) ga[lower(g.uuid)] = &g;
    for (auto& [u, g] : gb) {
        auto it = ga.find(u);
        if (it == ga.end()) out.push_back({"gpu " + g->uuid, g->pci, "(absent)", true});
        else if (normalize_pci(it->second->pci) != normalize_pci(g->pci))
            out.push_back({"gpu " + g->uuid + " pci", g->pci, it->second->pci, false});
    }
    for (auto& [u, g] : ga)
        if (!gb.count(u)) out.push_back({"gpu " + g->uuid, "(absent)", g->pci, false});

    if (before.verdict != after.verdict) {
        auto rank = [](const std::string& v) { return v == "pass" ? 0 : v == "warn" ? 1 : 2; };
        out.push_back({"verdict", before.verdict, after.verdict, rank(after.verdict) > rank(before.verdict)});
    }

    std::map<std::string, const SubTest*> tb, ta;
    for (auto& t : before.tests) tb[t.key()] = &t;
    for (auto& t : after.tests) ta[t.key()] = &t;
    for (auto& t : after.tests) {
        auto it = tb.find(t.key());
        if (it == tb.end()) {
            out.push_back({t.key(), "(absent)", to_string(t.status), false});
            continue;
        }
        const SubTest& old = *it->second;
        if (old.status != t.status)
            out.push_back({t.key(), to_string(old.status), std::string(to_string(t.status)) + (t.reason.empty() ? "" : ": " + t.reason),
                           status_rank(t.status) > status_rank(old.status)});
        for (auto& [name, v] : t.figures) {
            auto f = old.figures.find(name);
            if (f == old.figures.end()) continue;
            double was = f->second;
            if (name.ends_with("_gbps")) {
                if (was <= 0 || !std::isfinite(was) || !std::isfinite(v)) continue;
                double change = (v - was) / was;
                if (std::fabs(change) >= kThresholdWarnMargin)
                    out.push_back({t.key() + " " + name, fmt::format("{:.1f}", was),
                                   fmt::format("{:.1f} ({:+.1f} %)", v, change * 100), change <= -kThresholdWarnMargin});
            } else if (name == "errors" || name.ends_with("mismatches") || name == "wrong_values" || name == "gpus" ||
                       name == "sms_seen") {
                if (v != was) {
                    bool regress = name == "gpus" || name == "sms_seen" ? v < was : v > was;
                    out.push_back({t.key() + " " + name, fmt::format("{}", was), fmt::format("{}", v), regress});
                }
            }
        }
    }
    for (auto& t : before.tests)
        if (!ta.count(t.key())) out.push_back({t.key(), to_string(t.status), "(not in the new record)", true});
    return out;
}

std::string render_accept_comparison(const std::vector<AcceptChange>& changes) {
    if (changes.empty()) return "No changes against the earlier record.\n";
    std::string out;
    size_t worse_count = 0;
    for (auto& c : changes) worse_count += c.worse;
    out += fmt::format("{} change(s) against the earlier record, {} regression(s):\n", changes.size(), worse_count);
    for (auto& c : changes)
        out += fmt::format("  {} {}: {} -> {}\n", c.worse ? "WORSE  " : "changed", c.what, c.before, c.after);
    return out;
}

std::string render_accept_text(const AcceptReport& r, bool color, bool verbose) {
    auto paint = [&](TestStatus s, const std::string& text) {
        if (!color) return text;
        const char* code = s == TestStatus::pass ? "32" : s == TestStatus::warn ? "33" : s == TestStatus::fail ? "31" : "35";
        return fmt::format("\033[{}m{}\033[0m", code, text);
    };
    std::string out = fmt::format("gpudx accept ({}) on {} — kernel {}, driver {}, module {}\n", r.mode,
                                  r.node.empty() ? "?" : r.node, r.kernel.empty() ? "?" : r.kernel,
                                  r.driver_version.empty() ? "?" : r.driver_version,
                                  r.module_version.empty() ? "?" : r.module_version);
    for (auto& g : r.gpus)
        out += fmt::format("  GPU {} {} {} {} {} SMs, {}\n", g.ordinal, g.uuid, g.pci, g.name, g.sm_count, gib(g.total_memory));
    out += "\n";
    std::map<std::string, std::string> pci_of;
    for (auto& g : r.gpus) pci_of[g.uuid] = g.pci;
    for (auto& t : r.tests) {
        std::vector<std::string> subj;
        for (size_t i = 0; i < t.subjects.size() && i < 4; ++i)
            subj.push_back(short_uuid(t.subjects[i]) + (pci_of.count(t.subjects[i]) ? "(" + pci_of[t.subjects[i]] + ")" : ""));
        if (t.subjects.size() > 4) subj.push_back(fmt::format("+{}", t.subjects.size() - 4));
        std::string figs;
        for (auto& [k, v] : t.figures) {
            if (!(k.ends_with("_gbps") || k == "errors" || k == "wrong_values" || k == "sms_seen" || k == "tested_gib" ||
                  k == "context_ms" || k == "gpus"))
                continue;
            figs += fmt::format(" {}={:.4g}", k, v);
        }
        std::string status = fmt::format("{:<7}", to_string(t.status));
        out += fmt::format("  {} {:<18} {:<34}{}{}\n", paint(t.status, status), t.id, join(subj, " "), figs,
                           t.required ? "" : " (not required)");
        if (!t.reason.empty() && t.status != TestStatus::pass) out += "          " + t.reason + "\n";
        if (verbose)
            for (auto& [k, v] : t.details) out += "          " + k + ": " + v + "\n";
    }
    TestStatus overall = r.verdict == "pass" ? TestStatus::pass : r.verdict == "warn" ? TestStatus::warn : TestStatus::fail;
    out += fmt::format("\nverdict: {} (exit {}), {:.1f} s\n", paint(overall, r.verdict), r.exit_code, r.wall_ms / 1000);
    return out;
}

}  // namespace gpudx
