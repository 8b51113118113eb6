#include "actions/checkpoint.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/pci_address.hpp"
#include "core/supervisor.hpp"
#include "core/text.hpp"
#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "model/json_support.hpp"
#include "vendor/cuda/api.hpp"
#include "vendor/nvml/api.hpp"
#include "identity/verify.hpp"

namespace gpudx {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {
double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Names and versions

std::string_view step_name(CheckpointStep step) {
    switch (step) {
        case CheckpointStep::lock: return "lock";
        case CheckpointStep::checkpoint: return "checkpoint";
        case CheckpointStep::restore: return "restore";
        case CheckpointStep::unlock: return "unlock";
    }
    return "?";
}

std::optional<CheckpointStep> parse_step(std::string_view name) {
    for (auto s : {CheckpointStep::lock, CheckpointStep::checkpoint, CheckpointStep::restore, CheckpointStep::unlock})
        if (step_name(s) == name) return s;
    return std::nullopt;
}

std::string_view state_name(ProcessState state) {
    switch (state) {
        case ProcessState::running: return "running";
        case ProcessState::locked: return "locked";
        case ProcessState::checkpointed: return "checkpointed";
        case ProcessState::failed: return "failed";
        case ProcessState::unknown: return "unknown";
    }
    return "unknown";
}

namespace {
ProcessState state_from_name(std::string_view name) {
    for (auto s : {ProcessState::running, ProcessState::locked, ProcessState::checkpointed, ProcessState::failed})
        if (state_name(s) == name) return s;
    return ProcessState::unknown;
}

ProcessState state_from_driver(int value) {
    switch (value) {
        case CU_PROCESS_STATE_RUNNING: return ProcessState::running;
        case CU_PROCESS_STATE_LOCKED: return ProcessState::locked;
        case CU_PROCESS_STATE_CHECKPOINTED: return ProcessState::checkpointed;
        case CU_PROCESS_STATE_FAILED: return ProcessState::failed;
        default: return ProcessState::unknown;
    }
}

std::string_view driver_call_name(CheckpointStep step) {
    switch (step) {
        case CheckpointStep::lock: return "cuCheckpointProcessLock";
        case CheckpointStep::checkpoint: return "cuCheckpointProcessCheckpoint";
        case CheckpointStep::restore: return "cuCheckpointProcessRestore";
        case CheckpointStep::unlock: return "cuCheckpointProcessUnlock";
    }
    return "?";
}
}  // namespace

std::optional<int> driver_branch(std::string_view version) {
    version = trim(version);
    auto dot = version.find('.');
    auto major = parse_uint(version.substr(0, dot));
    if (!major || *major == 0 || *major > 100000) return std::nullopt;
    return static_cast<int>(*major);
}

std::string parse_nvrm_version(std::string_view text) {
    for (auto line : split_lines(text)) {
        if (line.find("NVRM version:") == std::string_view::npos) continue;
        // The version is the first field shaped like digits.digits after "Kernel Module" (or "Open Kernel Module").
        auto fields = split_ws(line);
        for (size_t i = 0; i < fields.size(); ++i) {
            if (fields[i] != "Module" || i + 1 >= fields.size()) continue;
            auto v = fields[i + 1];
            if (v.find('.') != std::string_view::npos && driver_branch(v)) return std::string(v);
        }
        for (auto f : fields)
            if (f.find('.') != std::string_view::npos && f.size() > 4 && std::isdigit(static_cast<unsigned char>(f[0])) &&
                driver_branch(f))
                return std::string(f);
    }
    return {};
}

// The 580 branch (CUDA 13.0) brought GPU remapping on restore; the branch number is the authority,
// cuDriverGetVersion only when no version string could be read.
bool DriverInfo::can_remap() const {
    if (auto branch = driver_branch(driver_version)) return *branch >= 580;
    return cuda_version && *cuda_version >= 13000;
}

// ---------------------------------------------------------------------------------------------------------------
// The driver in this process: libcuda.so.1 (and NVML for memory), through their API tables.

namespace {
class CudaLibraryDriver final : public CheckpointDriver {
public:
    explicit CudaLibraryDriver(const DriverOptions& options) { load(options); }

    const DriverInfo& info() const override { return info_; }
    std::vector<CheckpointGpu> gpus() override { return gpus_; }

    MemoryHeld memory_held(const std::vector<int>& pids) override {
        if (!nvml_ || !nvml_->processes || !nvml_->handle_by_uuid) return std::nullopt;
        std::map<std::string, uint64_t> held;
        std::set<int> accounted;
        for (const auto& gpu : gpus_) {
            nvmlDevice_t device = nullptr;
            if (nvml_->handle_by_uuid(gpu.uuid.c_str(), &device) != NVML_SUCCESS) return std::nullopt;
            std::vector<nvmlProcessInfo_t> infos(64);
            unsigned count = static_cast<unsigned>(infos.size());
            auto rc = nvml_->processes(device, &count, infos.data());
            if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
                infos.resize(count + 16);
                count = static_cast<unsigned>(infos.size());
                rc = nvml_->processes(device, &count, infos.data());
            }
            if (rc != NVML_SUCCESS) return std::nullopt;
            for (unsigned i = 0; i < count && i < infos.size(); ++i) {
                int pid = static_cast<int>(infos[i].pid);
                if (std::find(pids.begin(), pids.end(), pid) == pids.end()) continue;
                // Inside VMs and containers without accounting.
                if (infos[i].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE) return std::nullopt;
                held[gpu.uuid] += infos[i].usedGpuMemory;
                accounted.insert(pid);
            }
        }
        if (accounted.size() != std::set<int>(pids.begin(), pids.end()).size()) return std::nullopt;
        return held;
    }

    CallResult lock(int pid, unsigned timeout_ms) override {
        if (!cuda_.checkpoint_lock) return missing("cuCheckpointProcessLock");
        CUcheckpointLockArgs args{};
        args.timeoutMs = timeout_ms;
        auto start = Clock::now();
        return finish(cuda_.checkpoint_lock(pid, &args), start);
    }
    CallResult checkpoint(int pid) override {
        if (!cuda_.checkpoint_checkpoint) return missing("cuCheckpointProcessCheckpoint");
        CUcheckpointCheckpointArgs args{};
        auto start = Clock::now();
        return finish(cuda_.checkpoint_checkpoint(pid, &args), start);
    }
    CallResult restore(int pid, const std::vector<GpuPair>& pairs) override {
        if (!cuda_.checkpoint_restore) return missing("cuCheckpointProcessRestore");
        std::vector<CUcheckpointGpuPair> raw;
        for (const auto& p : pairs) {
            auto old_uuid = parse_gpu_uuid(p.old_uuid), new_uuid = parse_gpu_uuid(p.new_uuid);
            if (!old_uuid || !new_uuid) {
                CallResult bad = finish(CUDA_ERROR_INVALID_VALUE, Clock::now());
                bad.meaning = "gpudx could not read the UUID pair " + p.old_uuid + "=" + p.new_uuid;
                return bad;
            }
            raw.push_back({*old_uuid, *new_uuid});
        }
        CUcheckpointRestoreArgs args{};
        args.gpuPairs = raw.empty() ? nullptr : raw.data();
        args.gpuPairsCount = static_cast<unsigned>(raw.size());
        auto start = Clock::now();
        return finish(cuda_.checkpoint_restore(pid, &args), start);
    }
    CallResult unlock(int pid) override {
        if (!cuda_.checkpoint_unlock) return missing("cuCheckpointProcessUnlock");
        CUcheckpointUnlockArgs args{};
        auto start = Clock::now();
        return finish(cuda_.checkpoint_unlock(pid, &args), start);
    }
    StateResult state(int pid) override {
        StateResult out;
        if (!cuda_.checkpoint_get_state) {
            out.call = missing("cuCheckpointProcessGetState");
            return out;
        }
        CUprocessState raw = CU_PROCESS_STATE_RUNNING;
        auto start = Clock::now();
        out.call = finish(cuda_.checkpoint_get_state(pid, &raw), start);
        if (out.call.ok()) out.state = state_from_driver(raw);
        return out;
    }

private:
    void load(const DriverOptions& options) {
        std::optional<std::string> directory;
        if (!options.library_dir.empty()) directory = options.library_dir;
        info_.library_path = directory ? *directory + "/libcuda.so.1" : "libcuda.so.1";
        auto opened = CudaApi::open(directory);
        if (!opened) {
            info_.load_error = opened.error().message;
            return;
        }
        cuda_ = std::move(*opened);
        info_.library_path = cuda_.library.path();
        if (!cuda_.init) {
            info_.load_error = info_.library_path + " has no cuInit: not a CUDA driver library";
            return;
        }
        auto start = Clock::now();
        info_.init = finish(cuda_.init(0), start);
        info_.init_seconds = info_.init->seconds;

        if (cuda_.driver_get_version) {
            int v = 0;
            if (cuda_.driver_get_version(&v) == CUDA_SUCCESS) info_.cuda_version = v;
        }
        for (auto [name, present] : {std::pair{"cuCheckpointProcessLock", cuda_.checkpoint_lock != nullptr},
                                     {"cuCheckpointProcessCheckpoint", cuda_.checkpoint_checkpoint != nullptr},
                                     {"cuCheckpointProcessRestore", cuda_.checkpoint_restore != nullptr},
                                     {"cuCheckpointProcessUnlock", cuda_.checkpoint_unlock != nullptr},
                                     {"cuCheckpointProcessGetState", cuda_.checkpoint_get_state != nullptr}})
            if (!present) info_.missing_entry_points.push_back(name);

        load_nvml(directory);
        if (info_.driver_version.empty()) {
            Root live("/");
            if (auto text = live.read_file("/proc/driver/nvidia/version")) info_.driver_version = parse_nvrm_version(*text);
        }
        if (info_.init->ok()) load_devices();
    }

    void load_nvml(const std::optional<std::string>& directory) {
        auto opened = NvmlApi::open(directory);
        if (!opened || !opened->init || opened->init() != NVML_SUCCESS) return;
        nvml_ = std::move(*opened);
        info_.nvml_loaded = true;
        if (nvml_->driver_version) {
            char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
            if (nvml_->driver_version(buf, sizeof buf) == NVML_SUCCESS) info_.driver_version = buf;
        }
    }

    void load_devices() {
        const CudaApi& cu = cuda_;
        int count = 0;
        if (!cu.device_get_count || !cu.device_get || !cu.device_get_uuid || cu.device_get_count(&count) != CUDA_SUCCESS)
            return;
        for (int ordinal = 0; ordinal < count; ++ordinal) {
            CUdevice dev = 0;
            if (cu.device_get(&dev, ordinal) != CUDA_SUCCESS) continue;
            CheckpointGpu gpu;
            gpu.index = ordinal;
            CUuuid uuid{};
            if (cu.device_get_uuid(&uuid, dev) != CUDA_SUCCESS) continue;
            gpu.uuid = format_gpu_uuid(uuid);
            char text[128] = {};
            if (cu.device_get_name && cu.device_get_name(text, sizeof text - 1, dev) == CUDA_SUCCESS) gpu.model = text;
            char bus[64] = {};
            if (cu.device_get_pci_bus_id && cu.device_get_pci_bus_id(bus, sizeof bus - 1, dev) == CUDA_SUCCESS)
                gpu.pci = normalize_pci(bus);
            size_t total = 0;
            if (cu.device_total_mem && cu.device_total_mem(&total, dev) == CUDA_SUCCESS) gpu.total_memory = total;
            nvmlDevice_t handle = nullptr;
            if (nvml_ && nvml_->handle_by_uuid && nvml_->handle_by_uuid(gpu.uuid.c_str(), &handle) == NVML_SUCCESS) {
                nvmlMemory_t memory{};
                if (nvml_->memory && nvml_->memory(handle, &memory) == NVML_SUCCESS) {
                    gpu.free_memory = memory.free;
                    gpu.total_memory = memory.total;
                }
                unsigned index = 0;
                if (nvml_->index && nvml_->index(handle, &index) == NVML_SUCCESS) gpu.index = static_cast<int>(index);
            }
            gpus_.push_back(std::move(gpu));
        }
        std::sort(gpus_.begin(), gpus_.end(), [](const CheckpointGpu& a, const CheckpointGpu& b) { return a.index < b.index; });
    }

    CallResult missing(const char* entry_point) const {
        CallResult r;
        r.code = kCallUnavailable;
        r.name = "GPUDX_ENTRY_POINT_MISSING";
        r.meaning = fmt::format("{} is not in {}: the checkpoint API needs driver 550 or newer", entry_point,
                                info_.library_path);
        return r;
    }

    CallResult finish(CUresult code, Clock::time_point start) const {
        CallResult r;
        r.seconds = seconds_since(start);
        r.wall_seconds = r.seconds;
        r.code = code;
        r.name = cuda_.error_name(code);
        r.meaning = cuda_.error_meaning(code);
        return r;
    }

    DriverInfo info_;
    std::vector<CheckpointGpu> gpus_;
    CudaApi cuda_;
    std::optional<NvmlApi> nvml_;  // set once nvmlInit succeeded
};

// ---------------------------------------------------------------------------------------------------------------
// The worker protocol: one JSON object per line each way.

json call_to_json(const CallResult& r) {
    return {{"code", r.code}, {"name", r.name}, {"meaning", r.meaning}, {"seconds", r.seconds}};
}
CallResult call_from_json(const json& j) {
    CallResult r;
    r.code = j.value("code", kCallWorkerLost);
    r.name = j.value("name", "");
    r.meaning = j.value("meaning", "");
    r.seconds = j.value("seconds", 0.0);
    return r;
}

json gpu_to_json(const CheckpointGpu& g) {
    json j = {{"index", g.index}, {"uuid", g.uuid}, {"pci", g.pci}, {"model", g.model}};
    j["free_memory"] = g.free_memory ? json(*g.free_memory) : json(nullptr);
    j["total_memory"] = g.total_memory ? json(*g.total_memory) : json(nullptr);
    return j;
}
CheckpointGpu gpu_from_json(const json& j) {
    CheckpointGpu g;
    g.index = j.value("index", 0);
    g.uuid = j.value("uuid", "");
    g.pci = j.value("pci", "");
    g.model = j.value("model", "");
    if (j.contains("free_memory") && j["free_memory"].is_number()) g.free_memory = j["free_memory"].get<uint64_t>();
    if (j.contains("total_memory") && j["total_memory"].is_number()) g.total_memory = j["total_memory"].get<uint64_t>();
    return g;
}

json info_to_json(const DriverInfo& d) {
    json j = {{"library_path", d.library_path},
              {"load_error", d.load_error},
              {"init_seconds", d.init_seconds},
              {"driver_version", d.driver_version},
              {"missing_entry_points", d.missing_entry_points},
              {"nvml_loaded", d.nvml_loaded}};
    j["init"] = d.init ? call_to_json(*d.init) : json(nullptr);
    j["cuda_version"] = d.cuda_version ? json(*d.cuda_version) : json(nullptr);
    return j;
}
DriverInfo info_from_json(const json& j) {
    DriverInfo d;
    d.library_path = j.value("library_path", "");
    d.load_error = j.value("load_error", "");
    d.init_seconds = j.value("init_seconds", 0.0);
    d.driver_version = j.value("driver_version", "");
    d.missing_entry_points = j.value("missing_entry_points", std::vector<std::string>{});
    d.nvml_loaded = j.value("nvml_loaded", false);
    if (j.contains("init") && j["init"].is_object()) d.init = call_from_json(j["init"]);
    if (j.contains("cuda_version") && j["cuda_version"].is_number()) d.cuda_version = j["cuda_version"].get<int>();
    return d;
}

// One request line answered. Runs in the worker only.
json answer(std::unique_ptr<CudaLibraryDriver>& driver, const DriverOptions& options, std::string_view line) {
    json request = json::parse(line, nullptr, false);
    std::string op = request.is_object() ? request.value("op", "") : "";
    int pid = request.is_object() ? request.value("pid", 0) : 0;
    if (op == "hello") {
        driver = std::make_unique<CudaLibraryDriver>(options);
        json reply = {{"info", info_to_json(driver->info())}, {"gpus", json::array()}};
        for (const auto& g : driver->gpus()) reply["gpus"].push_back(gpu_to_json(g));
        return reply;
    }
    if (!driver) return {{"error", "no hello yet"}};
    if (op == "held") {
        auto held = driver->memory_held(request.value("pids", std::vector<int>{}));
        return {{"held", held ? json(*held) : json(nullptr)}};
    }
    if (op == "lock") return {{"call", call_to_json(driver->lock(pid, request.value("timeout_ms", 0u)))}};
    if (op == "checkpoint") return {{"call", call_to_json(driver->checkpoint(pid))}};
    if (op == "restore") {
        std::vector<GpuPair> pairs;
        for (const auto& p : request.value("pairs", json::array())) pairs.push_back({p.at(0), p.at(1)});
        return {{"call", call_to_json(driver->restore(pid, pairs))}};
    }
    if (op == "unlock") return {{"call", call_to_json(driver->unlock(pid))}};
    if (op == "state") {
        auto s = driver->state(pid);
        return {{"call", call_to_json(s.call)}, {"state", state_name(s.state)}};
    }
    return {{"error", "unknown request"}};
}

// Answers requests until the parent closes its end. Runs in the forked worker only.
int serve_requests(int fd, const DriverOptions& options) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Every GPU of the node, in PCI order, whatever the caller's environment says.
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    std::unique_ptr<CudaLibraryDriver> driver;
    std::string buffer;
    char chunk[4096];
    for (;;) {
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        buffer.append(chunk, static_cast<size_t>(n));
        bool parent_listens = true;
        split_lines(buffer, [&](std::string_view line) {
            if (parent_listens) parent_listens = write_all(fd, json_line(answer(driver, options, line)));
        });
        if (!parent_listens) return 1;
    }
}

// The driver as gpudx uses it: every call made by a forked worker under a deadline.
class IsolatedDriver final : public CheckpointDriver {
public:
    explicit IsolatedDriver(const DriverOptions& options) : options_(options) {
        info_.library_path = options.library_dir.empty() ? "libcuda.so.1" : options.library_dir + "/libcuda.so.1";
        if (auto why = start(options_.init_deadline_s)) {
            info_.load_error = *why;
            return;
        }
    }
    // The worker exits when its channel closes; what cuInit took hold of is released then, under the same
    // deadline as taking it.
    ~IsolatedDriver() override { worker_.finish(deadline(options_.init_deadline_s)); }

    const DriverInfo& info() const override { return info_; }
    std::vector<CheckpointGpu> gpus() override { return gpus_; }

    MemoryHeld memory_held(const std::vector<int>& pids) override {
        CallResult failure;
        auto reply = ask({{"op", "held"}, {"pids", pids}}, options_.call_deadline_s, failure);
        if (!reply || !reply->contains("held") || !(*reply)["held"].is_object()) return std::nullopt;
        return (*reply)["held"].get<std::map<std::string, uint64_t>>();
    }
    CallResult lock(int pid, unsigned timeout_ms) override {
        return call({{"op", "lock"}, {"pid", pid}, {"timeout_ms", timeout_ms}},
                    options_.call_deadline_s + timeout_ms / 1000.0);
    }
    CallResult checkpoint(int pid) override { return call({{"op", "checkpoint"}, {"pid", pid}}, options_.call_deadline_s); }
    CallResult restore(int pid, const std::vector<GpuPair>& pairs) override {
        json list = json::array();
        for (const auto& p : pairs) list.push_back({p.old_uuid, p.new_uuid});
        return call({{"op", "restore"}, {"pid", pid}, {"pairs", list}}, options_.call_deadline_s);
    }
    CallResult unlock(int pid) override { return call({{"op", "unlock"}, {"pid", pid}}, options_.call_deadline_s); }
    StateResult state(int pid) override {
        StateResult out;
        auto start = Clock::now();
        auto reply = ask({{"op", "state"}, {"pid", pid}}, options_.call_deadline_s, out.call);
        if (reply) {
            out.call = call_from_json(reply->value("call", json::object()));
            out.state = state_from_name(reply->value("state", "unknown"));
        }
        out.call.wall_seconds = seconds_since(start);
        return out;
    }

private:
    static std::chrono::milliseconds deadline(double seconds) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
    }

    CallResult call(const json& request, double deadline_s) {
        CallResult out;
        auto start = Clock::now();
        auto reply = ask(request, deadline_s, out);
        if (reply) out = call_from_json(reply->value("call", json::object()));
        out.wall_seconds = seconds_since(start);
        return out;
    }

    // Forks the worker and waits for its hello; an error message, or nullopt when it is ready.
    std::optional<std::string> start(double deadline_s) {
        auto child = Child::start([this](int fd) { return serve_requests(fd, options_); }, ChannelKind::socket);
        if (!child) return fmt::format("{}: {}", child.error().path, child.error().message);
        worker_ = std::move(*child);
        CallResult failure;
        auto reply = exchange({{"op", "hello"}}, deadline_s, failure, "dlopen + cuInit");
        if (!reply) return failure.meaning;
        info_ = info_from_json(reply->value("info", json::object()));
        gpus_.clear();
        for (const auto& g : reply->value("gpus", json::array())) gpus_.push_back(gpu_from_json(g));
        return std::nullopt;
    }

    // Sends a request to a live worker (starting a fresh one after a lost one) and waits for the answer.
    std::optional<json> ask(const json& request, double deadline_s, CallResult& failure) {
        if (!worker_.running()) {
            if (deadlines_hit_ >= 2) {
                failure.code = kCallDeadlineExceeded;
                failure.name = "GPUDX_DEADLINE_EXCEEDED";
                failure.meaning = "not attempted: the driver already failed to answer twice (wedged driver?)";
                return std::nullopt;
            }
            // After a hang, the next worker gets a short leash: the answer matters less than not hanging.
            double init_deadline = deadlines_hit_ ? std::min(options_.init_deadline_s, 60.0) : options_.init_deadline_s;
            if (auto why = start(init_deadline)) {
                failure.code = kCallWorkerLost;
                failure.name = "GPUDX_WORKER_LOST";
                failure.meaning = "a fresh driver worker could not start: " + *why;
                return std::nullopt;
            }
        }
        if (deadlines_hit_) deadline_s = std::min(deadline_s, 60.0);
        std::string what = request.value("op", "");
        if (request.contains("pid")) what += fmt::format(" of pid {}", request["pid"].get<int>());
        return exchange(request, deadline_s, failure, what);
    }

    std::optional<json> exchange(const json& request, double deadline_s, CallResult& failure, const std::string& what) {
        if (!worker_.send(json_line(request))) return lost(failure, what);
        auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
        std::optional<std::string> answer;
        size_t answers = 0;
        while (answers == 0) {
            if (Clock::now() >= until) {
                ++deadlines_hit_;
                worker_.kill();
                failure.code = kCallDeadlineExceeded;
                failure.name = "GPUDX_DEADLINE_EXCEEDED";
                failure.meaning = fmt::format(
                    "the driver did not answer ({}) within {:.0f} s; gpudx killed the worker that was waiting (a "
                    "wedged driver: check the kernel log for Xid/NVRM messages)",
                    what, deadline_s);
                return std::nullopt;
            }
            auto got = worker_.read_until(until);
            if (got == Child::Read::closed || got == Child::Read::failed) return lost(failure, what);
            split_lines(worker_.received(), [&](std::string_view line) {
                if (answers++ == 0) answer.emplace(line);
            });
        }
        json reply = json::parse(*answer, nullptr, false);
        if (!reply.is_object()) return lost(failure, what, "its answer is not a JSON object: " + excerpt(*answer));
        // One request, one answer: anything else means the worker and gpudx no longer agree on which is which.
        if (answers > 1) return lost(failure, what, fmt::format("it answered {} times", answers));
        if (reply.contains("error")) return lost(failure, what, "it refused the request: " + reply["error"].dump());
        return reply;
    }

    // `how`: what was wrong with its answer, when it gave one; otherwise how it ended says what happened.
    std::optional<json> lost(CallResult& failure, const std::string& what, std::string how = {}) {
        const bool cut_off = !worker_.received().empty();
        const size_t cut_bytes = worker_.received().size();
        // A worker that answered nonsense may still be alive: killed first, so the wait cannot block.
        auto ended = worker_.kill();
        if (how.empty()) {
            if (ended.signaled()) how = fmt::format("it died of signal {} ({})", ended.signal(), strsignal(ended.signal()));
            else if (ended.reaped()) how = fmt::format("it exited with status {}", ended.exit_code());
            else how = "it closed the connection";
            if (cut_off) how += fmt::format("; its last line was cut off after {} bytes", cut_bytes);
        }
        failure.code = kCallWorkerLost;
        failure.name = "GPUDX_WORKER_LOST";
        failure.meaning = fmt::format("the driver worker gave no answer ({}): {}", what, how);
        return std::nullopt;
    }

    DriverOptions options_;
    DriverInfo info_;
    std::vector<CheckpointGpu> gpus_;
    Child worker_;
    int deadlines_hit_ = 0;
};

}  // namespace

std::unique_ptr<CheckpointDriver> open_isolated_driver(const DriverOptions& options) {
    return std::make_unique<IsolatedDriver>(options);
}

// ---------------------------------------------------------------------------------------------------------------
// Orchestration

CheckpointReport run_checkpoint_plan(const CheckpointPlan& plan, CheckpointDriver& driver) {
    CheckpointReport report;
    auto start = Clock::now();
    std::map<int, ProcessState> tracked;

    auto perform = [&](int pid, CheckpointStep step, bool rollback, const std::vector<GpuPair>& pairs) {
        StepRecord record{pid, step, {}, rollback};
        switch (step) {
            case CheckpointStep::lock: record.result = driver.lock(pid, plan.lock_timeout_ms); break;
            case CheckpointStep::checkpoint: record.result = driver.checkpoint(pid); break;
            case CheckpointStep::restore: record.result = driver.restore(pid, pairs); break;
            case CheckpointStep::unlock: record.result = driver.unlock(pid); break;
        }
        if (record.result.ok()) {
            static constexpr ProcessState after[] = {ProcessState::locked, ProcessState::checkpointed,
                                                     ProcessState::locked, ProcessState::running};
            tracked[pid] = after[static_cast<int>(step)];
        } else if (!report.failure) {
            report.failure = record;
        }
        report.steps.push_back(record);
        return record.result.ok();
    };

    // Step by step across all processes: every process is locked before any is checkpointed, and so on.
    bool failed = false;
    for (auto step : plan.steps) {
        for (int pid : plan.pids)
            if (!perform(pid, step, false, plan.pairs)) {
                failed = true;
                break;
            }
        if (failed) break;
    }

    if (failed && plan.rollback_on_failure) {
        // Back to running, in the same order: restore every checkpointed process onto its own GPUs, then unlock.
        std::map<int, ProcessState> now;
        for (int pid : plan.pids) {
            auto s = driver.state(pid);
            auto it = tracked.find(pid);
            now[pid] = s.call.ok() ? s.state : (it != tracked.end() ? it->second : ProcessState::unknown);
        }
        for (int pid : plan.pids)
            if (now[pid] == ProcessState::checkpointed && perform(pid, CheckpointStep::restore, true, {}))
                now[pid] = ProcessState::locked;
        if (plan.unlock_on_rollback)
            for (int pid : plan.pids)
                if (now[pid] == ProcessState::locked) perform(pid, CheckpointStep::unlock, true, {});
    }

    for (int pid : plan.pids) {
        auto s = driver.state(pid);
        ProcessOutcome outcome{pid, s.state, {}};
        if (!s.call.ok()) outcome.state_error = fmt::format("{} ({}): {}", s.call.name, s.call.code, s.call.meaning);
        report.final_states.push_back(outcome);
    }
    report.seconds = seconds_since(start);
    return report;
}

// ---------------------------------------------------------------------------------------------------------------
// Safety and identity

std::optional<unsigned> parse_status_uid(std::string_view status_text) {
    for (auto line : split_lines(status_text)) {
        if (!line.starts_with("Uid:")) continue;
        auto fields = split_ws(line.substr(4));
        if (fields.empty()) return std::nullopt;
        auto uid = parse_uint(fields[0]);
        if (!uid || *uid > 0xffffffffULL) return std::nullopt;
        return static_cast<unsigned>(*uid);
    }
    return std::nullopt;
}

Result<void> check_process_access(const Root& root, int pid, unsigned caller_uid) {
    if (pid <= 0) return fail(fmt::format("{} is not a process id", pid));
    std::string path = fmt::format("/proc/{}/status", pid);
    auto status = root.read_file(path);
    if (!status) return fail(fmt::format("no process {} ({})", pid, status.error().message), path);
    auto uid = parse_status_uid(*status);
    if (!uid) return fail(fmt::format("cannot tell who owns process {}: no Uid line in {}", pid, path), path);
    // Like ptrace's rule: a process one started that runs with other credentials (a setuid program) is not
    // one's own. Uid: real, effective, saved, filesystem.
    if (caller_uid != 0 && *uid == caller_uid) {
        for (auto line : split_lines(*status)) {
            if (!line.starts_with("Uid:")) continue;
            for (auto f : split_ws(line.substr(4)))
                if (auto u = parse_uint(f); !u || *u != caller_uid)
                    return fail(fmt::format("refusing process {}: it runs with the credentials of uid {} (a setuid "
                                            "program), not only yours (uid {}); run as root to act on it",
                                            pid, f, caller_uid),
                                path);
        }
    }
    if (caller_uid != 0 && *uid != caller_uid)
        return fail(fmt::format("refusing process {}: it belongs to uid {}, not to you (uid {}); run as root to act "
                                "on another user's process",
                                pid, *uid, caller_uid),
                    path);
    return {};
}

std::optional<std::string> find_loaded_shim(const Root& root, int pid) {
    auto maps = root.read_file(fmt::format("/proc/{}/maps", pid), 64 * 1024 * 1024);
    if (!maps) return std::nullopt;
    return shim_mapping(*maps);
}

// ---------------------------------------------------------------------------------------------------------------
// The command

namespace {

std::string_view command_name(CheckpointCommand c) {
    switch (c) {
        case CheckpointCommand::state: return "state";
        case CheckpointCommand::checkpoint: return "checkpoint";
        case CheckpointCommand::restore: return "restore";
        case CheckpointCommand::migrate: return "migrate";
        case CheckpointCommand::single_step: return "action";
    }
    return "?";
}

// Where the preload library most likely is, for the hint: beside the binary, or where install puts it.
std::string shim_hint() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        auto dir = exe.parent_path();
        for (auto candidate : {dir / "libgpudx_shim.so", dir / ".." / "lib" / "gpudx" / "libgpudx_shim.so"})
            if (std::filesystem::exists(candidate, ec)) return std::filesystem::weakly_canonical(candidate, ec).string();
    }
    return "/path/to/libgpudx_shim.so";
}

std::string describe_version(const DriverInfo& d) {
    std::string out = d.driver_version.empty() ? "driver version unknown" : "driver " + d.driver_version;
    if (d.cuda_version) out += fmt::format(", CUDA {}.{}", *d.cuda_version / 1000, (*d.cuda_version % 1000) / 10);
    return out;
}

// "412.3 ms" below a second, "9.512 s" above: lock and unlock take milliseconds, checkpoints seconds.
std::string format_duration(double seconds) {
    return seconds < 1.0 ? fmt::format("{:.1f} ms", seconds * 1000) : fmt::format("{:.3f} s", seconds);
}

const CheckpointGpu* gpu_by_uuid(const std::vector<CheckpointGpu>& gpus, const std::string& uuid) {
    for (const auto& g : gpus)
        if (g.uuid == uuid) return &g;
    return nullptr;
}

}  // namespace

CheckpointCommandResult run_checkpoint_command(const CheckpointRequest& request, const Root& root,
                                               CheckpointDriver* driver_override) {
    CheckpointCommandResult r;
    r.request = request;
    auto refuse = [&](std::string message) {
        r.exit_code = 64;
        r.usage_error = std::move(message);
        return r;
    };

    if (request.pids.empty()) return refuse("name at least one process id");
    std::set<int> seen;
    for (int pid : request.pids)
        if (!seen.insert(pid).second) return refuse(fmt::format("process {} is named twice", pid));
    bool restores = request.command == CheckpointCommand::restore || request.command == CheckpointCommand::migrate ||
                    (request.command == CheckpointCommand::single_step && request.action == CheckpointStep::restore);
    if (!request.device_map.empty() && !restores)
        return refuse("--device-map applies to restore and migrate only (the map is used when the process comes back)");
    if (request.command == CheckpointCommand::migrate && request.device_map.empty())
        return refuse("migrate needs --device-map (e.g. --device-map swap:0,1)");
    if (request.command == CheckpointCommand::single_step && !request.action)
        return refuse("--action needs one of lock, checkpoint, restore, unlock");
    // Only the processes named, and only one's own unless root: checked before the driver is touched.
    for (int pid : request.pids)
        if (auto ok = check_process_access(root, pid, ::geteuid()); !ok) return refuse(ok.error().message);

    std::unique_ptr<CheckpointDriver> owned;
    CheckpointDriver* driver = driver_override;
    if (!driver) {
        owned = open_isolated_driver(request.driver);
        driver = owned.get();
    }
    r.driver = driver->info();
    if (!r.driver.load_error.empty()) {
        r.exit_code = 3;
        r.notes.push_back("cannot use the CUDA driver: " + r.driver.load_error);
        return r;
    }
    if (!r.driver.usable()) {
        r.exit_code = 3;
        r.notes.push_back(fmt::format("cuInit failed in {}: {} ({}): {}", r.driver.library_path, r.driver.init->name,
                                      r.driver.init->code, r.driver.init->meaning));
        return r;
    }
    if (!r.driver.has_checkpoint_api()) {
        r.exit_code = 3;
        r.notes.push_back(fmt::format(
            "this driver has no checkpoint API ({} missing from {}; {}): cuCheckpointProcess* came with driver 550. "
            "Upgrade the driver to use checkpoint/restore",
            fmt::join(r.driver.missing_entry_points, ", "), r.driver.library_path, describe_version(r.driver)));
        return r;
    }
    r.gpus = driver->gpus();

    if (!request.device_map.empty()) {
        MemoryHeld held = driver->memory_held(request.pids);
        auto plan = plan_device_map(request.device_map, r.gpus, held);
        if (!plan) return refuse(plan.error().message);
        if (plan->remaps() && !r.driver.can_remap()) {
            r.exit_code = 3;
            r.notes.push_back(fmt::format(
                "this driver cannot restore onto other GPUs ({}): remapping on restore needs driver 580 or newer "
                "(CUDA 13.0). Nothing was locked",
                describe_version(r.driver)));
            return r;
        }
        if (plan->remaps()) r.pairs = plan->pairs;
        for (auto& n : plan->notes) r.notes.push_back(n);
    }

    if (request.command == CheckpointCommand::state) {
        auto start = Clock::now();
        for (int pid : request.pids) {
            auto s = driver->state(pid);
            ProcessOutcome o{pid, s.state, {}};
            if (!s.call.ok()) {
                o.state_error = fmt::format("{} ({}): {}", s.call.name, s.call.code, s.call.meaning);
                r.exit_code = 1;
            }
            r.report.final_states.push_back(o);
        }
        r.report.seconds = seconds_since(start);
        return r;
    }

    CheckpointPlan plan;
    plan.pids = request.pids;
    plan.lock_timeout_ms = request.lock_timeout_ms;
    plan.pairs = r.pairs;
    plan.unlock_on_rollback = !request.no_unlock;
    using S = CheckpointStep;
    switch (request.command) {
        case CheckpointCommand::checkpoint: plan.steps = {S::lock, S::checkpoint}; break;
        case CheckpointCommand::restore:
            plan.steps = {S::restore};
            if (!request.no_unlock) plan.steps.push_back(S::unlock);
            break;
        case CheckpointCommand::migrate:
            plan.steps = {S::lock, S::checkpoint, S::restore};
            if (!request.no_unlock) plan.steps.push_back(S::unlock);
            break;
        case CheckpointCommand::single_step:
            plan.steps = {*request.action};
            // One step at a time is for a person driving the sequence: report, do not undo.
            plan.rollback_on_failure = false;
            break;
        case CheckpointCommand::state: break;
    }
    r.report = run_checkpoint_plan(plan, *driver);
    r.exit_code = r.report.ok() ? 0 : 1;
    if (!r.report.ok() && plan.rollback_on_failure) {
        // What the operator does next for each process the undo could not bring back.
        for (const auto& o : r.report.final_states) {
            switch (o.state) {
                case ProcessState::running: break;
                case ProcessState::locked:
                    if (plan.unlock_on_rollback)
                        r.notes.push_back(fmt::format("process {} is left locked: `gpudx restore {} --action unlock` "
                                                      "resumes it",
                                                      o.pid, o.pid));
                    break;
                case ProcessState::checkpointed:
                    r.notes.push_back(fmt::format("process {} is left checkpointed (its GPU memory is in host memory): "
                                                  "`gpudx restore {}` puts it back on its own GPUs",
                                                  o.pid, o.pid));
                    break;
                case ProcessState::failed:
                    r.notes.push_back(fmt::format("process {} is in the driver's FAILED checkpoint state: its GPU work "
                                                  "cannot be resumed; check the kernel log (gpudx diagnose)",
                                                  o.pid));
                    break;
                case ProcessState::unknown:
                    r.notes.push_back(fmt::format("the state of process {} is unknown: check with `gpudx state {}`",
                                                  o.pid, o.pid));
                    break;
            }
        }
    }
    if (r.report.failure && r.report.failure->result.code == kCallDeadlineExceeded)
        r.notes.push_back("a driver call hung: see `gpudx diagnose` (driver layer, kernel log) before retrying");

    bool restored = std::find(plan.steps.begin(), plan.steps.end(), S::restore) != plan.steps.end();
    if (r.report.ok() && restored) {
        for (int pid : request.pids) {
            VerifyOutcome v;
            v.pid = pid;
            auto shim = find_loaded_shim(root, pid);
            if (shim) {
                // The shim's own account (gpudx verify): it refreshes when the process next asks the driver,
                // so right after a restore "unknown" or a stale state file is possible, not a failure.
                v.shim_path = *shim;
                auto checked = verify_process(root, pid, VerifyOptions{});
                if (checked) {
                    v.verdict = std::string(verdict_name(checked->verdict));
                    if (checked->verdict == IdentityVerdict::consistent || checked->verdict == IdentityVerdict::corrected)
                        v.consistent = true;
                    else if (checked->verdict == IdentityVerdict::inconsistent)
                        v.consistent = false;
                    v.detail = checked->summary;
                } else {
                    v.verdict = "unknown";
                    v.detail = "gpudx verify could not run: " + checked.error().message;
                }
                if (v.consistent == false)
                    r.notes.push_back(fmt::format("process {} reports an inconsistent GPU identity after the restore: "
                                                  "see `gpudx verify {}`",
                                                  pid, pid));
            } else if (!r.pairs.empty()) {
                v.detail = fmt::format(
                    "the gpudx shim is not loaded in process {}: after this remap it reports stale PCI addresses "
                    "(cuDeviceGetPCIBusId answers the old GPU's bus id, so NVML and NCCL resolve the wrong card or "
                    "none). Start such processes with LD_PRELOAD={} to keep their identity right",
                    pid, shim_hint());
                r.notes.push_back(v.detail);
            } else {
                v.detail = "restored onto the same GPUs: identity unchanged";
            }
            r.verify.push_back(v);
        }
    }
    return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Output

namespace {
json step_to_json(const StepRecord& s) {
    json j = {{"pid", s.pid},          {"step", step_name(s.step)},     {"call", driver_call_name(s.step)},
            {"ok", s.result.ok()},   {"code", s.result.code},         {"name", s.result.name},
            {"meaning", s.result.meaning}, {"seconds", s.result.seconds}, {"wall_seconds", s.result.wall_seconds},
            {"rollback", s.rollback}};
    if (!s.result.ok() && s.result.code > 0 && find_cu_result(s.result.code)) j["hint"] = cu_result_meaning(s.result.code);
    return j;
}
}  // namespace

json checkpoint_result_to_json(const CheckpointCommandResult& r) {
    json j;
    j["command"] = command_name(r.request.command);
    if (r.request.action) j["action"] = step_name(*r.request.action);
    j["pids"] = r.request.pids;
    j["ok"] = r.exit_code == 0;
    j["exit_code"] = r.exit_code;
    if (!r.usage_error.empty()) j["error"] = r.usage_error;
    json driver = info_to_json(r.driver);
    driver["checkpoint_api"] = r.driver.has_checkpoint_api();
    driver["can_remap"] = r.driver.can_remap();
    j["driver"] = driver;
    j["gpus"] = json::array();
    for (const auto& g : r.gpus) j["gpus"].push_back(gpu_to_json(g));
    j["device_map"] = {{"given", r.request.device_map}, {"pairs", json::array()}};
    for (const auto& p : r.pairs) {
        json pj = {{"old_uuid", p.old_uuid}, {"new_uuid", p.new_uuid}};
        if (auto* g = gpu_by_uuid(r.gpus, p.old_uuid)) pj["old_index"] = g->index, pj["old_pci"] = g->pci;
        if (auto* g = gpu_by_uuid(r.gpus, p.new_uuid)) pj["new_index"] = g->index, pj["new_pci"] = g->pci;
        j["device_map"]["pairs"].push_back(pj);
    }
    j["steps"] = json::array();
    for (const auto& s : r.report.steps) j["steps"].push_back(step_to_json(s));
    // Per process, seconds per step (the forward steps; rollback calls are in "steps").
    json timings = json::array();
    for (int pid : r.request.pids) {
        json t = {{"pid", pid}};
        for (const auto& s : r.report.steps)
            if (s.pid == pid && !s.rollback) t[std::string(step_name(s.step)) + "_s"] = s.result.seconds;
        timings.push_back(t);
    }
    j["timings"] = timings;
    j["failure"] = r.report.failure ? step_to_json(*r.report.failure) : json(nullptr);
    j["final_states"] = json::array();
    for (const auto& o : r.report.final_states) {
        json oj = {{"pid", o.pid}, {"state", state_name(o.state)}};
        if (!o.state_error.empty()) oj["error"] = o.state_error;
        j["final_states"].push_back(oj);
    }
    j["verify"] = json::array();
    for (const auto& v : r.verify) {
        json vj = {{"pid", v.pid}, {"shim_loaded", !v.shim_path.empty()}, {"detail", v.detail}};
        if (!v.shim_path.empty()) vj["shim_path"] = v.shim_path;
        if (v.consistent) vj["consistent"] = *v.consistent;
        if (!v.verdict.empty()) vj["verdict"] = v.verdict;
        j["verify"].push_back(vj);
    }
    j["notes"] = r.notes;
    j["seconds"] = r.report.seconds;
    repair_utf8(j);
    return j;
}

std::string render_checkpoint_text(const CheckpointCommandResult& r) {
    std::string out;
    std::string pids;
    for (int pid : r.request.pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    std::string what = r.request.command == CheckpointCommand::single_step && r.request.action
                           ? "--action " + std::string(step_name(*r.request.action))
                           : std::string(command_name(r.request.command));
    out += fmt::format("gpudx {}: process{} {}\n", what, r.request.pids.size() > 1 ? "es" : "", pids);
    if (!r.usage_error.empty()) {
        out += "refused: " + r.usage_error + "\n";
        return out;
    }
    if (r.driver.load_error.empty() && r.driver.init) {
        out += fmt::format("driver: {} ({}); checkpoint API {}; restore onto other GPUs {}\n", r.driver.library_path,
                           describe_version(r.driver), r.driver.has_checkpoint_api() ? "present" : "MISSING",
                           r.driver.can_remap() ? "supported" : "not supported (needs 580+)");
    }
    if (!r.pairs.empty()) {
        out += fmt::format("device map {} (every GPU, as given to the driver):\n", r.request.device_map);
        for (const auto& p : r.pairs) {
            auto* from = gpu_by_uuid(r.gpus, p.old_uuid);
            auto* to = gpu_by_uuid(r.gpus, p.new_uuid);
            out += fmt::format("  {} -> {}{}\n", from ? describe_gpu(*from) : p.old_uuid, to ? describe_gpu(*to) : p.new_uuid,
                               p.old_uuid == p.new_uuid ? " (stays)" : "");
        }
    }
    if (!r.report.steps.empty()) {
        std::vector<CheckpointStep> columns;
        for (const auto& s : r.report.steps)
            if (!s.rollback && std::find(columns.begin(), columns.end(), s.step) == columns.end()) columns.push_back(s.step);
        out += fmt::format("{:<12}", "step time");
        for (auto c : columns) out += fmt::format("{:>14}", step_name(c));
        out += "\n";
        for (int pid : r.request.pids) {
            out += fmt::format("{:<12}", fmt::format("pid {}", pid));
            for (auto c : columns) {
                std::string cell = "-";
                for (const auto& s : r.report.steps)
                    if (s.pid == pid && s.step == c && !s.rollback)
                        cell = s.result.ok() ? format_duration(s.result.seconds) : "FAILED";
                out += fmt::format("{:>14}", cell);
            }
            out += "\n";
        }
    }
    if (r.report.failure) {
        const auto& f = *r.report.failure;
        out += fmt::format("FAILED: {}(pid {}) returned {} ({}): {}\n", driver_call_name(f.step), f.pid, f.result.name,
                           f.result.code, f.result.meaning);
        // The driver's sentence is terse; gpudx's table says what usually causes it.
        if (f.result.code > 0 && find_cu_result(f.result.code))
            out += fmt::format("  which usually means: {}\n", cu_result_meaning(f.result.code));
        for (const auto& s : r.report.steps)
            if (s.rollback)
                out += fmt::format("  undo: {} pid {}: {}\n", step_name(s.step), s.pid,
                                   s.result.ok() ? fmt::format("ok ({})", format_duration(s.result.seconds))
                                                 : fmt::format("{} ({}): {}", s.result.name, s.result.code, s.result.meaning));
    }
    for (const auto& o : r.report.final_states) {
        if (o.state_error.empty())
            out += fmt::format("pid {}: {}\n", o.pid, state_name(o.state));
        else
            out += fmt::format("pid {}: state unknown: {}\n", o.pid, o.state_error);
    }
    for (const auto& v : r.verify)
        if (!v.shim_path.empty() || r.pairs.empty()) out += fmt::format("identity of pid {}{}: {}\n", v.pid,
                              v.verdict.empty() ? "" : " (gpudx verify: " + v.verdict + ")", v.detail);
    for (const auto& n : r.notes) out += "note: " + n + "\n";
    if (r.report.seconds > 0 && !r.report.steps.empty()) out += fmt::format("total {}\n", format_duration(r.report.seconds));
    return out;
}

}  // namespace gpudx
