// The driver of a checkpoint: libcuda.so.1 (and NVML for memory) through their API tables, run in a supervised
// worker process so that a driver call that hangs or crashes fails its step instead of the command.
#include "actions/checkpoint.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "core/clock.hpp"
#include "core/pci_address.hpp"
#include "core/supervisor.hpp"
#include "core/text.hpp"
#include "model/json_support.hpp"
#include "gpu_api/cuda/api.hpp"
#include "gpu_api/nvml/api.hpp"

namespace gpudx {

using nlohmann::json;

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
}  // namespace

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
        auto start = SteadyClock::now();
        return finish(cuda_.checkpoint_lock(pid, &args), start);
    }
    CallResult checkpoint(int pid) override {
        if (!cuda_.checkpoint_checkpoint) return missing("cuCheckpointProcessCheckpoint");
        CUcheckpointCheckpointArgs args{};
        auto start = SteadyClock::now();
        return finish(cuda_.checkpoint_checkpoint(pid, &args), start);
    }
    CallResult restore(int pid, const std::vector<GpuPair>& pairs) override {
        if (!cuda_.checkpoint_restore) return missing("cuCheckpointProcessRestore");
        std::vector<CUcheckpointGpuPair> raw;
        for (const auto& p : pairs) {
            auto old_uuid = parse_gpu_uuid(p.old_uuid), new_uuid = parse_gpu_uuid(p.new_uuid);
            if (!old_uuid || !new_uuid) {
                CallResult bad = finish(CUDA_ERROR_INVALID_VALUE, SteadyClock::now());
                bad.meaning = "gpudx could not read the UUID pair " + p.old_uuid + "=" + p.new_uuid;
                return bad;
            }
            raw.push_back({*old_uuid, *new_uuid});
        }
        CUcheckpointRestoreArgs args{};
        args.gpuPairs = raw.empty() ? nullptr : raw.data();
        args.gpuPairsCount = static_cast<unsigned>(raw.size());
        auto start = SteadyClock::now();
        return finish(cuda_.checkpoint_restore(pid, &args), start);
    }
    CallResult unlock(int pid) override {
        if (!cuda_.checkpoint_unlock) return missing("cuCheckpointProcessUnlock");
        CUcheckpointUnlockArgs args{};
        auto start = SteadyClock::now();
        return finish(cuda_.checkpoint_unlock(pid, &args), start);
    }
    StateResult state(int pid) override {
        StateResult out;
        if (!cuda_.checkpoint_get_state) {
            out.call = missing("cuCheckpointProcessGetState");
            return out;
        }
        CUprocessState raw = CU_PROCESS_STATE_RUNNING;
        auto start = SteadyClock::now();
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
        auto start = SteadyClock::now();
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

    CallResult finish(CUresult code, SteadyClock::time_point start) const {
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
        auto start = SteadyClock::now();
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
        auto start = SteadyClock::now();
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
        auto until = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(deadline_s));
        std::optional<std::string> answer;
        size_t answers = 0;
        while (answers == 0) {
            if (SteadyClock::now() >= until) {
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

}  // namespace gpudx
