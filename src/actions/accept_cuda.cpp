// The acceptance's GPU side over the dlopen'ed CUDA driver (and NVML for the link class and the
// isolation children). Runs inside the forked, watched acceptance process (run_acceptance_watched):
// a call that hangs here is killed from outside, never waited on.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/pci_address.hpp"
#include "core/root.hpp"
#include "core/spawn.hpp"
#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "gpu_api/cuda/api.hpp"
#include "gpu_api/nvml/api.hpp"
#include "actions/accept.hpp"
#include "actions/accept_kernels.hpp"

namespace gpudx {
namespace {

namespace k = accept_kernels;
using Clock = std::chrono::steady_clock;

Error cu_error(const char* call, CUresult rc) {
    return Error{fmt::format("{}: {} ({}): {}", call, cu_result_name(rc), rc, cu_result_meaning(rc)), call, 0};
}

#define CU_TRY(call, expr)                                                 \
    do {                                                                   \
        if (CUresult rc_ = (expr); rc_ != CUDA_SUCCESS)                    \
            return std::unexpected(cu_error(call, rc_));                   \
    } while (0)

// Every entry point the acceptance needs, or the first missing one.
Result<void> require_acceptance_entry_points(const CudaApi& api) {
    std::string missing;
    auto need = [&](auto fn, std::string_view name) {
        if (!fn && missing.empty()) missing = std::string(name);
    };
    need(api.init, "cuInit");
    need(api.driver_get_version, "cuDriverGetVersion");
    need(api.device_get_count, "cuDeviceGetCount");
    need(api.device_get, "cuDeviceGet");
    need(api.device_get_name, "cuDeviceGetName");
    need(api.device_get_uuid, "cuDeviceGetUuid");
    need(api.device_get_pci_bus_id, "cuDeviceGetPCIBusId");
    need(api.device_get_attribute, "cuDeviceGetAttribute");
    need(api.device_total_mem, "cuDeviceTotalMem");
    need(api.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    need(api.ctx_set_current, "cuCtxSetCurrent");
    need(api.ctx_enable_peer_access, "cuCtxEnablePeerAccess");
    need(api.device_can_access_peer, "cuDeviceCanAccessPeer");
    need(api.mem_alloc, "cuMemAlloc");
    need(api.mem_free, "cuMemFree");
    need(api.mem_get_info, "cuMemGetInfo");
    need(api.mem_host_alloc, "cuMemHostAlloc");
    need(api.mem_free_host, "cuMemFreeHost");
    need(api.memcpy_dtoh, "cuMemcpyDtoH");
    need(api.module_get_function, "cuModuleGetFunction");
    need(api.launch_kernel, "cuLaunchKernel");
    need(api.event_create, "cuEventCreate");
    need(api.event_record, "cuEventRecord");
    need(api.event_synchronize, "cuEventSynchronize");
    need(api.event_elapsed_time, "cuEventElapsedTime");
    need(api.event_destroy, "cuEventDestroy");
    need(api.module_load_data_ex, "cuModuleLoadDataEx");
    need(api.memcpy_dtod_async, "cuMemcpyDtoDAsync");
    need(api.memcpy_htod_async, "cuMemcpyHtoDAsync");
    need(api.memcpy_dtoh_async, "cuMemcpyDtoHAsync");
    need(api.memcpy_peer_async, "cuMemcpyPeerAsync");
    need(api.memset_d32, "cuMemsetD32");
    need(api.stream_create, "cuStreamCreate");
    need(api.stream_synchronize, "cuStreamSynchronize");
    if (!missing.empty())
        return fail(api.library.path() + " has no " + missing + " (driver too old, or not the NVIDIA driver)", missing);
    return {};
}

// NVML, for the link class and the isolation children: loaded and initialised, or why not.
struct AcceptNvml {
    std::optional<NvmlApi> api;  // set once nvmlInit succeeded
    std::string error;

    void open(const std::optional<std::string>& dir) {
        auto opened = NvmlApi::open(dir);
        if (!opened) {
            error = "libnvidia-ml.so.1 not loadable: " + opened.error().message;
            return;
        }
        if (!opened->init || !opened->count || !opened->handle_by_index || !opened->uuid) {
            error = opened->library.path() +
                    " lacks nvmlInit/nvmlDeviceGetCount/nvmlDeviceGetHandleByIndex/nvmlDeviceGetUUID";
            return;
        }
        if (nvmlReturn_t rc = opened->init(); rc != NVML_SUCCESS) {
            error = fmt::format("nvmlInit: {} ({})", nvml_return_name(rc), rc);
            return;
        }
        api = std::move(*opened);
    }
};

// Several host threads for checking a pinned buffer against its pattern (1 GiB in tens of ms).
uint64_t host_verify(const uint64_t* data, uint64_t words, uint64_t seed, bool repair) {
    unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    std::atomic<uint64_t> bad{0};
    std::vector<std::thread> pool;
    uint64_t per = (words + n - 1) / n;
    for (unsigned t = 0; t < n; ++t)
        pool.emplace_back([&, t] {
            uint64_t local = 0;
            uint64_t end = std::min(words, (t + 1) * per);
            auto* w = const_cast<uint64_t*>(data);
            for (uint64_t i = t * per; i < end; ++i) {
                uint64_t want = k::pattern_word(k::kRandom, i, 0, seed);
                if (w[i] != want) {
                    ++local;
                    if (repair) w[i] = want;
                }
            }
            bad += local;
        });
    for (auto& th : pool) th.join();
    return bad.load();
}

class CudaAcceptDriver final : public AcceptDriver {
public:
    explicit CudaAcceptDriver(CudaAcceptConfig c) : config_(std::move(c)) {}

    Result<DriverFacts> open() override {
        auto opened = CudaApi::open(config_.library_dir);
        if (!opened)
            return fail("no CUDA driver: libcuda.so.1 could not be loaded (" + opened.error().message + ")", "dlopen",
                        ENODEV);
        if (auto r = require_acceptance_entry_points(*opened); !r) return std::unexpected(r.error());
        api_ = std::move(*opened);
        DriverFacts facts;
        facts.library_path = api_.library.path();
        CUresult rc = api_.init(0);
        if (rc == CUDA_ERROR_NO_DEVICE) return fail(cu_error("cuInit", rc).message, "cuInit", ENODEV);
        if (rc != CUDA_SUCCESS) return std::unexpected(cu_error("cuInit", rc));
        int version = 0;
        if (api_.driver_get_version(&version) == CUDA_SUCCESS) facts.cuda_driver_version = version;
        nvml_.open(config_.library_dir);
        if (nvml_.api && nvml_.api->driver_version) {
            char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
            if (nvml_.api->driver_version(buf, sizeof buf) == NVML_SUCCESS) facts.driver_version = buf;
        }
        return facts;
    }

    Result<std::vector<AcceptGpu>> devices() override {
        int count = 0;
        CU_TRY("cuDeviceGetCount", api_.device_get_count(&count));
        std::vector<AcceptGpu> out;
        for (int i = 0; i < count; ++i) {
            Device d;
            CU_TRY("cuDeviceGet", api_.device_get(&d.dev, i));
            AcceptGpu g;
            g.ordinal = i;
            char name[256] = {};
            CU_TRY("cuDeviceGetName", api_.device_get_name(name, sizeof name - 1, d.dev));
            g.name = name;
            CUuuid u{};
            CU_TRY("cuDeviceGetUuid", api_.device_get_uuid(&u, d.dev));
            g.uuid = format_gpu_uuid(u);
            char bus[64] = {};
            CU_TRY("cuDeviceGetPCIBusId", api_.device_get_pci_bus_id(bus, sizeof bus - 1, d.dev));
            d.bus_id = bus;
            g.pci = normalize_pci(bus);
            size_t total = 0;
            CU_TRY("cuDeviceTotalMem_v2", api_.device_total_mem(&total, d.dev));
            g.total_memory = total;
            CU_TRY("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)",
                   api_.device_get_attribute(&g.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.dev));
            api_.device_get_attribute(&g.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.dev);
            api_.device_get_attribute(&g.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.dev);
            d.sm_count = g.sm_count;
            devs_.push_back(d);
            out.push_back(g);
        }
        return out;
    }

    Result<double> create_context(int ord) override {
        auto t0 = Clock::now();
        auto* d = dev(ord);
        if (!d) return fail(fmt::format("no device ordinal {}", ord));
        CU_TRY("cuDevicePrimaryCtxRetain", api_.primary_ctx_retain(&d->ctx, d->dev));
        CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(d->ctx));
        CU_TRY("cuStreamCreate", api_.stream_create(&d->stream, CU_STREAM_NON_BLOCKING));
        // A 4-byte allocation proves the context can take memory, not just exist.
        CUdeviceptr probe = 0;
        CU_TRY("cuMemAlloc_v2", api_.mem_alloc(&probe, 4));
        CU_TRY("cuMemFree_v2", api_.mem_free(probe));
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    }

    Result<ComputeFigures> compute(int ord, unsigned repetitions) override {
        auto d = ready(ord);
        if (!d) return std::unexpected(d.error());
        Device& dv = **d;
        ComputeFigures f;
        f.sm_count = static_cast<unsigned>(dv.sm_count);
        unsigned blocks = std::max(1, dv.sm_count) * k::kComputeBlocksPerSm;
        f.threads = static_cast<uint64_t>(blocks) * k::kComputeThreadsPerBlock;
        f.repetitions = std::max(1u, repetitions);
        Buffer values(api_), smids(api_);
        CU_TRY("cuMemAlloc_v2", values.alloc(f.threads * 4));
        CU_TRY("cuMemAlloc_v2", smids.alloc(uint64_t(blocks) * 4));
        uint32_t iterations = k::kComputeIterations;
        Events ev(api_);
        CU_TRY("cuEventCreate", ev.create());
        CU_TRY("cuEventRecord", api_.event_record(ev.start, dv.stream));
        for (unsigned rep = 0; rep < f.repetitions; ++rep) {
            CU_TRY("cuMemsetD32_v2", api_.memset_d32(smids.ptr, 0xFFFFFFFFu, blocks));
            void* args[] = {&values.ptr, &smids.ptr, &iterations};
            CU_TRY("cuLaunchKernel(gpudx_compute)",
                   api_.launch_kernel(dv.compute, blocks, 1, 1, k::kComputeThreadsPerBlock, 1, 1, 0, dv.stream, args, nullptr));
        }
        CU_TRY("cuEventRecord", api_.event_record(ev.end, dv.stream));
        CU_TRY("cuEventSynchronize (compute kernel)", api_.event_synchronize(ev.end));
        float elapsed = 0;
        if (api_.event_elapsed_time(&elapsed, ev.start, ev.end) == CUDA_SUCCESS) f.seconds = elapsed / 1000.0;
        std::vector<uint32_t> host_values(f.threads), host_smids(blocks);
        CU_TRY("cuMemcpyDtoH_v2", api_.memcpy_dtoh(host_values.data(), values.ptr, f.threads * 4));
        CU_TRY("cuMemcpyDtoH_v2", api_.memcpy_dtoh(host_smids.data(), smids.ptr, uint64_t(blocks) * 4));
        k::ComputeAnswer answer(iterations);
        for (uint64_t i = 0; i < f.threads; ++i)
            if (host_values[i] != answer.value(static_cast<uint32_t>(i))) ++f.wrong_values;
        std::set<uint32_t> seen;
        for (auto s : host_smids)
            if (s != 0xFFFFFFFFu) seen.insert(s);
        f.sms_seen = static_cast<unsigned>(seen.size());
        return f;
    }

    Result<MemoryFigures> memory(int ord, const MemoryPlan& plan) override {
        auto d = ready(ord);
        if (!d) return std::unexpected(d.error());
        Device& dv = **d;
        MemoryFigures f;
        Buffer counters(api_);
        CU_TRY("cuMemAlloc_v2", counters.alloc(16));
        size_t free_b = 0, total_b = 0;
        CU_TRY("cuMemGetInfo_v2", api_.mem_get_info(&free_b, &total_b));
        f.free_bytes = free_b;
        f.total_bytes = total_b;
        uint64_t target = static_cast<uint64_t>(static_cast<double>(free_b) * plan.fraction_of_free);
        if (free_b > plan.reserve_bytes) target = std::min<uint64_t>(target, free_b - plan.reserve_bytes);
        target &= ~((2ull << 20) - 1);

        struct Chunk {
            CUdeviceptr ptr;
            uint64_t bytes;
        };
        std::vector<Chunk> chunks;
        auto release = [&] {
            bool ok = true;
            for (auto& c : chunks) ok &= api_.mem_free(c.ptr) == CUDA_SUCCESS;
            chunks.clear();
            return ok;
        };
        uint64_t want = std::max<uint64_t>(plan.chunk_bytes, 2ull << 20);
        while (f.tested_bytes < target) {
            uint64_t size = std::min(want, target - f.tested_bytes);
            CUdeviceptr p = 0;
            CUresult rc = api_.mem_alloc(&p, size);
            if (rc == CUDA_ERROR_OUT_OF_MEMORY && want > (64ull << 20)) {
                want /= 2;  // fragmentation, or memory taken meanwhile: smaller chunks for the rest
                continue;
            }
            if (rc == CUDA_ERROR_OUT_OF_MEMORY) break;
            if (rc != CUDA_SUCCESS) {
                release();
                return std::unexpected(cu_error("cuMemAlloc_v2", rc));
            }
            chunks.push_back({p, size});
            f.tested_bytes += size;
        }
        f.chunks = static_cast<unsigned>(chunks.size());

        unsigned blocks = std::max(1, dv.sm_count) * k::kMemoryBlocksPerSm;
        auto run_pattern = [&](uint32_t kind, uint64_t seed, PatternOutcome& out) -> Result<void> {
            CU_TRY("cuMemsetD32_v2", api_.memset_d32(counters.ptr, 0, 2));
            CU_TRY("cuMemsetD32_v2", api_.memset_d32(counters.ptr + 8, 0xFFFFFFFFu, 2));
            Events ev(api_);
            CU_TRY("cuEventCreate", ev.create());
            CU_TRY("cuEventRecord", api_.event_record(ev.start, dv.stream));
            uint64_t base = 0;
            // Fill everything before verifying anything: a write that lands at a wrong address
            // then shows up in whichever chunk it hit.
            for (auto& c : chunks) {
                uint64_t words = c.bytes / 8;
                void* args[] = {&c.ptr, &words, &kind, &seed, &base};
                CU_TRY("cuLaunchKernel(gpudx_fill)",
                       api_.launch_kernel(dv.fill, blocks, 1, 1, k::kThreadsPerBlock, 1, 1, 0, dv.stream, args, nullptr));
                base += words;
            }
            CU_TRY("cuEventRecord", api_.event_record(ev.mid, dv.stream));
            base = 0;
            CUdeviceptr errors = counters.ptr, first = counters.ptr + 8;
            for (auto& c : chunks) {
                uint64_t words = c.bytes / 8;
                void* args[] = {&c.ptr, &words, &kind, &seed, &base, &errors, &first};
                CU_TRY("cuLaunchKernel(gpudx_verify)",
                       api_.launch_kernel(dv.verify, blocks, 1, 1, k::kThreadsPerBlock, 1, 1, 0, dv.stream, args, nullptr));
                base += words;
            }
            CU_TRY("cuEventRecord", api_.event_record(ev.end, dv.stream));
            CU_TRY("cuEventSynchronize (memory pattern kernels)", api_.event_synchronize(ev.end));
            float w = 0, r = 0;
            CU_TRY("cuEventElapsedTime", api_.event_elapsed_time(&w, ev.start, ev.mid));
            CU_TRY("cuEventElapsedTime", api_.event_elapsed_time(&r, ev.mid, ev.end));
            f.write_seconds += w / 1000.0;
            f.read_seconds += r / 1000.0;
            f.written_bytes += f.tested_bytes;
            f.read_bytes += f.tested_bytes;
            uint64_t host[2] = {};
            CU_TRY("cuMemcpyDtoH_v2", api_.memcpy_dtoh(host, counters.ptr, sizeof host));
            out.errors = host[0];
            if (host[0]) out.first_error_offset = host[1] * 8;
            return {};
        };
        for (unsigned pass = 0; pass < std::max(1u, plan.passes); ++pass) {
            for (auto pattern : plan.patterns) {
                PatternOutcome out;
                out.pattern = to_string(pattern);
                uint32_t kind = pattern == MemoryPattern::walking_ones    ? k::kWalkingOnes
                                : pattern == MemoryPattern::walking_zeros ? k::kWalkingZeros
                                : pattern == MemoryPattern::address       ? k::kAddress
                                                                          : k::kRandom;
                out.seed = pattern == MemoryPattern::random ? 0x5eed0000ull + pass : pass * 7;
                if (auto r = run_pattern(kind, out.seed, out); !r) {
                    release();
                    return std::unexpected(r.error());
                }
                f.patterns.push_back(out);
            }
        }
        bool freed = release();
        size_t free_after = 0;
        CU_TRY("cuMemGetInfo_v2", api_.mem_get_info(&free_after, &total_b));
        // The driver may keep a little for itself; 64 MiB of slack covers that.
        f.released = freed && free_after + (64ull << 20) >= free_b;
        return f;
    }

    Result<CopyFigures> device_copy(int ord, const CopyPlan& plan) override {
        auto d = ready(ord);
        if (!d) return std::unexpected(d.error());
        Device& dv = **d;
        Buffer src(api_), dst(api_);
        CU_TRY("cuMemAlloc_v2", src.alloc(plan.bytes));
        CU_TRY("cuMemAlloc_v2", dst.alloc(plan.bytes));
        const uint64_t seed = 0xd2d;
        if (auto r = fill(dv, src.ptr, plan.bytes, seed); !r) return std::unexpected(r.error());
        CopyFigures f{plan.bytes, plan.repetitions, 0, 0};
        auto timed = time_on(dv.stream, plan.repetitions, [&]() -> CUresult {
            return api_.memcpy_dtod_async(dst.ptr, src.ptr, plan.bytes, dv.stream);
        });
        if (!timed) return std::unexpected(timed.error());
        f.seconds = *timed;
        auto bad = verify(dv, dst.ptr, plan.bytes, seed);
        if (!bad) return std::unexpected(bad.error());
        f.mismatches = *bad;
        return f;
    }

    Result<HostCopyFigures> host_copies(int ord, const CopyPlan& plan) override {
        auto d = ready(ord);
        if (!d) return std::unexpected(d.error());
        Device& dv = **d;
        if (dv.host_bytes < plan.bytes) {
            // One pinned buffer per GPU, allocated in its own context as a framework's pinned tensor would
            // be: a single PORTABLE buffer made in the first GPU's context uploaded to the second GPU of a
            // 2xH200 VM at 0.63 of the speed PyTorch measured there.
            if (dv.host) api_.mem_free_host(dv.host);
            dv.host = nullptr;
            dv.host_bytes = 0;
            void* p = nullptr;
            CU_TRY("cuMemHostAlloc", api_.mem_host_alloc(&p, plan.bytes, 0));
            dv.host = static_cast<uint64_t*>(p);
            dv.host_bytes = plan.bytes;
        }
        uint64_t* host = dv.host;
        Buffer a(api_), b(api_);
        CU_TRY("cuMemAlloc_v2", a.alloc(plan.bytes));
        CU_TRY("cuMemAlloc_v2", b.alloc(plan.bytes));
        const uint64_t seed = 0x40d2 + static_cast<uint64_t>(ord);
        if (auto r = fill(dv, a.ptr, plan.bytes, seed); !r) return std::unexpected(r.error());
        HostCopyFigures f;
        f.d2h = {plan.bytes, plan.repetitions, 0, 0};
        auto d2h = time_on(dv.stream, plan.repetitions, [&]() -> CUresult {
            return api_.memcpy_dtoh_async(host, a.ptr, plan.bytes, dv.stream);
        });
        if (!d2h) return std::unexpected(d2h.error());
        f.d2h.seconds = *d2h;
        // Check on the host, and put the right pattern back so the upload is judged on its own.
        f.d2h.mismatches = host_verify(host, plan.bytes / 8, seed, true);
        f.h2d = {plan.bytes, plan.repetitions, 0, 0};
        auto h2d = time_on(dv.stream, plan.repetitions, [&]() -> CUresult {
            return api_.memcpy_htod_async(b.ptr, host, plan.bytes, dv.stream);
        });
        if (!h2d) return std::unexpected(h2d.error());
        f.h2d.seconds = *h2d;
        auto bad = verify(dv, b.ptr, plan.bytes, seed);
        if (!bad) return std::unexpected(bad.error());
        f.h2d.mismatches = *bad;
        return f;
    }

    Result<PeerInfo> peer_info(int a, int b) override {
        auto* da = dev(a);
        auto* db = dev(b);
        if (!da || !db) return fail("unknown device ordinal");
        PeerInfo info;
        int ab = 0, ba = 0;
        CU_TRY("cuDeviceCanAccessPeer", api_.device_can_access_peer(&ab, da->dev, db->dev));
        CU_TRY("cuDeviceCanAccessPeer", api_.device_can_access_peer(&ba, db->dev, da->dev));
        info.a_to_b = ab != 0;
        info.b_to_a = ba != 0;
        if (nvml_.api && nvml_.api->handle_by_pci && nvml_.api->p2p_status) {
            const NvmlApi& nvml = *nvml_.api;
            nvmlDevice_t ha = nullptr, hb = nullptr;
            int status = -1;
            if (nvml.handle_by_pci(da->bus_id.c_str(), &ha) == NVML_SUCCESS &&
                nvml.handle_by_pci(db->bus_id.c_str(), &hb) == NVML_SUCCESS &&
                nvml.p2p_status(ha, hb, NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_SUCCESS &&
                status == NVML_P2P_STATUS_OK) {
                info.link = PeerLink::nvlink;
                info.link_evidence = "nvmlDeviceGetP2PStatus(NVLINK) = OK";
                return info;
            }
        }
        Root root("/");
        auto pa = root.canonical("/sys/bus/pci/devices/" + normalize_pci(da->bus_id));
        auto pb = root.canonical("/sys/bus/pci/devices/" + normalize_pci(db->bus_id));
        if (pa && pb) {
            info.link = classify_pcie_paths(*pa, *pb);
            info.link_evidence = "sysfs " + *pa + " vs " + *pb + (nvml_.api ? ", no NVLink per NVML" : ", NVML unavailable");
        } else {
            info.link_evidence = "sysfs paths not readable";
        }
        return info;
    }

    Result<CopyFigures> peer_copy(int src, int dst, const CopyPlan& plan) override {
        auto r = peer_copy_concurrent({{src, dst}}, plan);
        if (!r) return std::unexpected(r.error());
        return r->at(0);
    }

    Result<std::vector<CopyFigures>> peer_copy_concurrent(const std::vector<std::pair<int, int>>& routes,
                                                          const CopyPlan& plan) override {
        struct Route {
            Device* src;
            Device* dst;
            std::unique_ptr<Buffer> from, to;
            CUstream stream = nullptr;
            std::unique_ptr<Events> ev;
            uint64_t seed;
        };
        std::vector<Route> rs;
        for (auto [s, t] : routes) {
            auto ds = ready(s), dt = ready(t);
            if (!ds) return std::unexpected(ds.error());
            if (!dt) return std::unexpected(dt.error());
            Route r{*ds, *dt, std::make_unique<Buffer>(api_), std::make_unique<Buffer>(api_), nullptr,
                    std::make_unique<Events>(api_), 0x9e900 + rs.size()};
            if (auto e = enable_peer(*r.src, *r.dst); !e) return std::unexpected(e.error());
            CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(r.dst->ctx));
            CU_TRY("cuMemAlloc_v2", r.to->alloc(plan.bytes));
            CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(r.src->ctx));
            CU_TRY("cuMemAlloc_v2", r.from->alloc(plan.bytes));
            if (auto f = fill(*r.src, r.from->ptr, plan.bytes, r.seed); !f) return std::unexpected(f.error());
            CU_TRY("cuStreamCreate", api_.stream_create(&r.stream, CU_STREAM_NON_BLOCKING));
            CU_TRY("cuEventCreate", r.ev->create());
            // One untimed copy first: the first peer transfer sets up mappings.
            CU_TRY("cuMemcpyPeerAsync",
                   api_.memcpy_peer_async(r.to->ptr, r.dst->ctx, r.from->ptr, r.src->ctx, plan.bytes, r.stream));
            CU_TRY("cuStreamSynchronize", api_.stream_synchronize(r.stream));
            rs.push_back(std::move(r));
        }
        // Issue every route's copies interleaved so that they run at the same time.
        for (auto& r : rs) {
            CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(r.src->ctx));
            CU_TRY("cuEventRecord", api_.event_record(r.ev->start, r.stream));
        }
        for (unsigned rep = 0; rep < plan.repetitions; ++rep)
            for (auto& r : rs) {
                CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(r.src->ctx));
                CU_TRY("cuMemcpyPeerAsync",
                       api_.memcpy_peer_async(r.to->ptr, r.dst->ctx, r.from->ptr, r.src->ctx, plan.bytes, r.stream));
            }
        for (auto& r : rs) {
            CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(r.src->ctx));
            CU_TRY("cuEventRecord", api_.event_record(r.ev->end, r.stream));
        }
        std::vector<CopyFigures> out;
        for (auto& r : rs) {
            CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(r.src->ctx));
            CU_TRY("cuEventSynchronize (peer copy)", api_.event_synchronize(r.ev->end));
            float elapsed = 0;
            CU_TRY("cuEventElapsedTime", api_.event_elapsed_time(&elapsed, r.ev->start, r.ev->end));
            CopyFigures f{plan.bytes, plan.repetitions, elapsed / 1000.0, 0};
            auto bad = verify(*r.dst, r.to->ptr, plan.bytes, r.seed);
            if (!bad) return std::unexpected(bad.error());
            f.mismatches = *bad;
            out.push_back(f);
        }
        return out;
    }

    std::vector<Result<VisibleView>> visible_in_children(const std::vector<std::map<std::string, std::string>>& envs,
                                                         std::chrono::milliseconds deadline) override {
        std::vector<Result<VisibleView>> out(envs.size(), fail("not started"));
        if (config_.probe_command.empty()) {
            for (auto& o : out) o = fail("no probe program configured");
            return out;
        }
        // One child per environment, all at once; each its own process group (SpawnedProgram), so a child hung
        // in the driver is killed with what it started and, if the kernel holds it, reaped later (core/reap.hpp):
        // accept never waits on a driver call.
        struct Probe {
            SpawnedProgram child;
            std::string text;
            bool done = false;
        };
        std::vector<Probe> probes(envs.size());
        for (size_t i = 0; i < envs.size(); ++i) {
            std::vector<std::string> env_text;
            for (auto& [k, v] : envs[i]) env_text.push_back(k + "=" + v);
            auto child = SpawnedProgram::start(
                config_.probe_command, {.stderr_to = SpawnOptions::Stderr::discard, .environment = std::move(env_text)});
            if (!child) {
                out[i] = fail(fmt::format("cannot start {}: {}", config_.probe_command[0], child.error().message));
                probes[i].done = true;
                continue;
            }
            probes[i].child = std::move(*child);
        }
        auto end = Clock::now() + deadline;
        while (true) {
            std::vector<pollfd> pfds;
            std::vector<size_t> which;
            for (size_t i = 0; i < probes.size(); ++i)
                if (!probes[i].done && probes[i].child.fd() >= 0) {
                    pfds.push_back({probes[i].child.fd(), POLLIN, 0});
                    which.push_back(i);
                }
            if (pfds.empty()) break;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
            if (left <= 0) break;
            int n = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::min<long>(left, 1000)));
            if (n < 0 && errno != EINTR) break;
            for (size_t p = 0; p < pfds.size(); ++p) {
                if (!(pfds[p].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                auto& c = probes[which[p]];
                auto got = c.child.read_available(c.text);
                if (c.text.size() > (1u << 20)) c.text.resize(1u << 20);
                if (got == SpawnedProgram::Read::closed || got == SpawnedProgram::Read::failed) c.done = true;
            }
        }
        for (size_t i = 0; i < probes.size(); ++i) {
            auto& c = probes[i];
            if (!c.child.running()) continue;  // never started: its error is already there
            if (!c.done) {
                c.child = SpawnedProgram();  // killed; reaped later if the driver holds it
                out[i] = fail(fmt::format("the child did not answer within {} s (a driver call hung)",
                                          deadline.count() / 1000));
                continue;
            }
            auto status = c.child.wait(std::chrono::seconds(1));
            auto j = nlohmann::json::parse(c.text, nullptr, false);
            if (j.is_discarded()) {
                out[i] = fail("the child printed no result (" +
                              (status ? describe_exit_status(*status) : std::string("still running")) + ")");
                continue;
            }
            out[i] = visible_view_from_json(j);
        }
        return out;
    }

private:
    struct Device {
        CUdevice dev = 0;
        std::string bus_id;
        int sm_count = 0;
        CUcontext ctx = nullptr;
        CUstream stream = nullptr;
        CUmodule module = nullptr;
        CUfunction fill = nullptr, verify = nullptr, compute = nullptr;
        std::optional<Error> jit_error;
        uint64_t* host = nullptr;  // pinned, for the host copies; kept for the run (the process exit frees it)
        uint64_t host_bytes = 0;
    };

    // Device memory freed when it goes out of scope (on the context current at that time).
    struct Buffer {
        explicit Buffer(CudaApi& a) : api(a) {}
        ~Buffer() {
            if (ptr) api.mem_free(ptr);
        }
        Buffer(const Buffer&) = delete;
        Buffer& operator=(const Buffer&) = delete;
        CUresult alloc(uint64_t bytes) { return api.mem_alloc(&ptr, bytes); }
        CudaApi& api;
        CUdeviceptr ptr = 0;
    };

    struct Events {
        explicit Events(CudaApi& a) : api(a) {}
        ~Events() {
            for (auto e : {start, mid, end})
                if (e) api.event_destroy(e);
        }
        Events(const Events&) = delete;
        Events& operator=(const Events&) = delete;
        CUresult create() {
            for (auto* e : {&start, &mid, &end})
                if (CUresult rc = api.event_create(e, CU_EVENT_DEFAULT); rc != CUDA_SUCCESS) return rc;
            return CUDA_SUCCESS;
        }
        CudaApi& api;
        CUevent start = nullptr, mid = nullptr, end = nullptr;
    };

    Device* dev(int ord) {
        if (ord < 0 || static_cast<size_t>(ord) >= devs_.size()) return nullptr;
        return &devs_[ord];
    }

    // The device with its context current and its kernels JIT-compiled.
    Result<Device*> ready(int ord) {
        auto* d = dev(ord);
        if (!d) return fail(fmt::format("no device ordinal {}", ord));
        if (!d->ctx) {
            if (auto r = create_context(ord); !r) return std::unexpected(r.error());
        }
        CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(d->ctx));
        if (d->jit_error) return std::unexpected(*d->jit_error);
        if (!d->module) {
            std::vector<char> log(16384, 0), info(4096, 0);
            CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                                        CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
            void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size() - 1)), info.data(),
                              reinterpret_cast<void*>(static_cast<uintptr_t>(info.size() - 1))};
            CUresult rc = api_.module_load_data_ex(&d->module, k::kPtx, 4, opts, values);
            if (rc != CUDA_SUCCESS) {
                d->module = nullptr;
                auto e = cu_error("cuModuleLoadDataEx (PTX JIT)", rc);
                if (log[0]) e.message += "; JIT log: " + std::string(log.data());
                d->jit_error = e;
                return std::unexpected(e);
            }
            for (auto [fn, name] : {std::pair{&d->fill, k::kFill}, std::pair{&d->verify, k::kVerify},
                                    std::pair{&d->compute, k::kCompute}}) {
                if (CUresult r = api_.module_get_function(fn, d->module, name); r != CUDA_SUCCESS) {
                    d->jit_error = cu_error("cuModuleGetFunction", r);
                    d->jit_error->message += std::string(" (") + name + ")";
                    return std::unexpected(*d->jit_error);
                }
            }
        }
        return d;
    }

    Result<void> enable_peer(Device& src, Device& dst) {
        int can = 0;
        CU_TRY("cuDeviceCanAccessPeer", api_.device_can_access_peer(&can, src.dev, dst.dev));
        if (!can) return {};  // cuMemcpyPeer stages through the host instead
        CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(src.ctx));
        CUresult rc = api_.ctx_enable_peer_access(dst.ctx, 0);
        if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
            return std::unexpected(cu_error("cuCtxEnablePeerAccess", rc));
        return {};
    }

    unsigned memory_blocks(const Device& d) const { return std::max(1, d.sm_count) * k::kMemoryBlocksPerSm; }

    Result<void> fill(Device& d, CUdeviceptr p, uint64_t bytes, uint64_t seed) {
        CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(d.ctx));
        uint64_t words = bytes / 8, base = 0;
        uint32_t kind = k::kRandom;
        void* args[] = {&p, &words, &kind, &seed, &base};
        CU_TRY("cuLaunchKernel(gpudx_fill)",
               api_.launch_kernel(d.fill, memory_blocks(d), 1, 1, k::kThreadsPerBlock, 1, 1, 0, d.stream, args, nullptr));
        CU_TRY("cuStreamSynchronize (fill)", api_.stream_synchronize(d.stream));
        return {};
    }

    // Wrong words in [p, p+bytes) against the random pattern of `seed`.
    Result<uint64_t> verify(Device& d, CUdeviceptr p, uint64_t bytes, uint64_t seed) {
        CU_TRY("cuCtxSetCurrent", api_.ctx_set_current(d.ctx));
        Buffer counters(api_);
        CU_TRY("cuMemAlloc_v2", counters.alloc(16));
        CU_TRY("cuMemsetD32_v2", api_.memset_d32(counters.ptr, 0, 2));
        CU_TRY("cuMemsetD32_v2", api_.memset_d32(counters.ptr + 8, 0xFFFFFFFFu, 2));
        uint64_t words = bytes / 8, base = 0;
        uint32_t kind = k::kRandom;
        CUdeviceptr errors = counters.ptr, first = counters.ptr + 8;
        void* args[] = {&p, &words, &kind, &seed, &base, &errors, &first};
        CU_TRY("cuLaunchKernel(gpudx_verify)",
               api_.launch_kernel(d.verify, memory_blocks(d), 1, 1, k::kThreadsPerBlock, 1, 1, 0, d.stream, args, nullptr));
        CU_TRY("cuStreamSynchronize (verify)", api_.stream_synchronize(d.stream));
        uint64_t host[2] = {};
        CU_TRY("cuMemcpyDtoH_v2", api_.memcpy_dtoh(host, counters.ptr, sizeof host));
        return host[0];
    }

    // Seconds for `reps` issues of `op` on `stream` after one untimed warm-up, timed with events.
    template <class Op>
    Result<double> time_on(CUstream stream, unsigned reps, Op op) {
        CU_TRY("copy (warm-up)", op());
        Events ev(api_);
        CU_TRY("cuEventCreate", ev.create());
        CU_TRY("cuEventRecord", api_.event_record(ev.start, stream));
        for (unsigned i = 0; i < reps; ++i) CU_TRY("copy", op());
        CU_TRY("cuEventRecord", api_.event_record(ev.end, stream));
        CU_TRY("cuEventSynchronize (copy)", api_.event_synchronize(ev.end));
        float elapsed = 0;
        CU_TRY("cuEventElapsedTime", api_.event_elapsed_time(&elapsed, ev.start, ev.end));
        return elapsed / 1000.0;
    }

    CudaAcceptConfig config_;
    CudaApi api_;
    AcceptNvml nvml_;
    std::vector<Device> devs_;
};

}  // namespace

std::unique_ptr<AcceptDriver> make_cuda_accept_driver(const CudaAcceptConfig& config) {
    return std::make_unique<CudaAcceptDriver>(config);
}

nlohmann::json visible_view_to_json(const VisibleView& v) {
    nlohmann::json j;
    j["cuda"] = v.cuda_uuids ? nlohmann::json(*v.cuda_uuids) : nlohmann::json(nullptr);
    j["cuda_error"] = v.cuda_error;
    j["nvml"] = v.nvml_uuids ? nlohmann::json(*v.nvml_uuids) : nlohmann::json(nullptr);
    j["nvml_error"] = v.nvml_error;
    return j;
}

Result<VisibleView> visible_view_from_json(const nlohmann::json& j) {
    if (!j.is_object()) return fail("the child's answer is not a JSON object");
    VisibleView v;
    // Fault-isolation boundary: a reader of a child's JSON answer (nlohmann's get<> throws on a wrong type).
    try {
        if (j.contains("cuda") && j["cuda"].is_array()) v.cuda_uuids = j["cuda"].get<std::vector<std::string>>();
        if (j.contains("nvml") && j["nvml"].is_array()) v.nvml_uuids = j["nvml"].get<std::vector<std::string>>();
        v.cuda_error = j.value("cuda_error", std::string());
        v.nvml_error = j.value("nvml_error", std::string());
    } catch (const std::exception& e) {
        return fail(std::string("malformed child answer: ") + e.what());
    }
    return v;
}

VisibleView probe_visible_devices(const std::optional<std::string>& library_dir) {
    VisibleView v;
    if (auto api = CudaApi::open(library_dir); !api) {
        v.cuda_error = "libcuda.so.1 not loadable: " + api.error().message;
    } else if (!api->init || !api->device_get_count || !api->device_get || !api->device_get_uuid) {
        v.cuda_error = api->library.path() + " lacks cuInit/cuDeviceGetCount/cuDeviceGet/cuDeviceGetUuid";
    } else if (CUresult rc = api->init(0); rc == CUDA_ERROR_NO_DEVICE) {
        v.cuda_uuids = std::vector<std::string>{};  // sees nothing: a valid answer for isolation
    } else if (rc != CUDA_SUCCESS) {
        v.cuda_error = cu_error("cuInit", rc).message;
    } else {
        int count = 0;
        if (CUresult c = api->device_get_count(&count); c != CUDA_SUCCESS) {
            v.cuda_error = cu_error("cuDeviceGetCount", c).message;
        } else {
            std::vector<std::string> uuids;
            for (int i = 0; i < count; ++i) {
                CUdevice d = 0;
                CUuuid u{};
                if (api->device_get(&d, i) == CUDA_SUCCESS && api->device_get_uuid(&u, d) == CUDA_SUCCESS)
                    uuids.push_back(format_gpu_uuid(u));
                else
                    uuids.push_back(fmt::format("ordinal-{}-unreadable", i));
            }
            v.cuda_uuids = uuids;
        }
    }
    AcceptNvml nvml;
    nvml.open(library_dir);
    if (!nvml.api) {
        v.nvml_error = nvml.error;
    } else {
        unsigned count = 0;
        if (nvmlReturn_t rc = nvml.api->count(&count); rc != NVML_SUCCESS) {
            v.nvml_error = fmt::format("nvmlDeviceGetCount: {} ({})", nvml_return_name(rc), rc);
        } else {
            std::vector<std::string> uuids;
            for (unsigned i = 0; i < count; ++i) {
                nvmlDevice_t h = nullptr;
                char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
                if (nvml.api->handle_by_index(i, &h) == NVML_SUCCESS && nvml.api->uuid(h, buf, sizeof buf) == NVML_SUCCESS)
                    uuids.emplace_back(buf);
                // A device NVML cannot open (cgroup-denied) is not visible to the job.
            }
            v.nvml_uuids = uuids;
        }
    }
    return v;
}

}  // namespace gpudx
