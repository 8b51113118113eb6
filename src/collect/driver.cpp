// The driver layers under a deadline: NVML and CUDA each probed in a forked child (docs/driver-layers.md).
#include "gpu_api/queries.hpp"

#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "collect/collectors.hpp"
#include "core/child_probe.hpp"
#include "model/layer_json.hpp"

namespace gpudx {

namespace {

std::optional<std::string> env_value(const CollectOptions& o, const char* name) {
    auto it = o.environment.find(name);
    if (it == o.environment.end()) return std::nullopt;
    return it->second;
}

// Stand-in libraries replaying a capture find its recorded answers through this variable; the real
// libraries ignore it. Set only in the child, and only when reading a capture.
void point_standins_at_capture(const Root& root) {
    if (!root.is_live() && !std::getenv("GPUDX_STANDIN_ROOT"))
        ::setenv("GPUDX_STANDIN_ROOT", root.base().c_str(), 1);
}

template <class Layer>
void take_result(ProbeOutcome& out, Layer& layer) {
    if (!out.result) return;
    // Fault-isolation boundary: nlohmann's exceptions from a result that does not fit the layer (a child that
    // crashed while writing it, or one of another gpudx version) become a read problem; the layer keeps what
    // it had.
    try {
        layer_from_json(*out.result, layer);
    } catch (const std::exception& e) {
        out.read_problems.push_back(std::string("a result that does not fit the layer: ") + e.what());
    }
}

// `hung` is set when the probe was stopped at its deadline: the call it was inside, as `api`'s probe announced it.
CollectorStatus status_of(Collector collector, const ProbeOutcome& out, std::chrono::milliseconds deadline, DriverApi api,
                          std::optional<HungCall>& hung) {
    CollectorStatus st;
    st.name = to_string(collector);
    st.duration_ms = out.duration_ms;
    for (const auto& problem : out.read_problems) st.problems.push_back({"", "probe output: " + problem});
    // With lanes, several calls can be in flight: the first names the hang, the others are told.
    auto calls = out.calls_in_flight();
    std::string first = calls.empty() ? std::string() : calls.front();
    std::string others;
    for (size_t i = 1; i < calls.size(); ++i) others += (i == 1 ? "; also in flight: " : ", ") + calls[i];
    switch (out.end) {
        case ProbeEnd::timed_out: {
            st.state = CollectorState::timed_out;
            HungCall call = first.empty() ? HungCall{.api = api} : parse_hung_call(api, first);
            st.message = fmt::format("no answer within {} ms; the call that did not return: {}{}", deadline.count(),
                                     call.label(), others);
            st.path = call.label();
            hung = std::move(call);
            break;
        }
        case ProbeEnd::died:
            st.state = CollectorState::error;
            st.message = fmt::format("{} during {}{}", out.message, first.empty() ? "startup" : first, others);
            st.path = first;
            break;
        case ProbeEnd::not_started:
            st.state = CollectorState::error;
            st.message = "could not start the probe process: " + out.message;
            break;
        case ProbeEnd::finished:
            st.state = CollectorState::ok;
            break;
    }
    return st;
}

CollectorStatus rocm_smi_status(ProbeOutcome& out, std::chrono::milliseconds deadline, RocmSmiLayer& layer) {
    layer.probed = true;
    take_result(out, layer);
    auto st = status_of(Collector::rocm_smi, out, deadline, DriverApi::rocm_smi, layer.hung_call);
    if (st.state != CollectorState::ok) return st;
    if (!layer.load_error.empty()) {
        st.state = CollectorState::no_data;
        st.message = "librocm_smi64 not loaded: " + layer.load_error;
    } else if (!layer.init_error.empty()) {
        st.state = CollectorState::error;
        st.message = (layer.init_result && *layer.init_result != 0 ? "rsmi_init failed: " : "") + layer.init_error;
        st.path = layer.library_path;
    }
    return st;
}

}  // namespace

nlohmann::json record_driver_answers(const NvmlLayer& nvml, const CudaLayer& cuda, const RocmSmiLayer& rocm_smi) {
    nlohmann::json j;
    j["format"] = "gpudx-driver-answers/1";
    layer_to_json(j["nvml"], nvml);
    // The stand-in libcuda applies CUDA_VISIBLE_DEVICES itself, so it needs the unfiltered list.
    const CudaView& view = cuda.all ? *cuda.all : cuda.caller;
    nlohmann::json c;
    c["library_path"] = cuda.library_path;
    c["driver_version"] = cuda.driver_version ? nlohmann::json(*cuda.driver_version) : nlohmann::json(nullptr);
    nlohmann::json v;
    layer_to_json(v, cuda);
    c["init_result"] = v[cuda.all ? "all" : "caller"]["init_result"];
    c["devices"] = v[cuda.all ? "all" : "caller"]["devices"];
    if (!cuda.all && view.cuda_visible_devices)
        c["recorded_under_cuda_visible_devices"] = *view.cuda_visible_devices;
    j["cuda"] = std::move(c);
    if (rocm_smi.probed) layer_to_json(j["rocm_smi"], rocm_smi);
    return j;
}

// The KFD topology is where the amdgpu driver publishes its GPUs to ROCm: without it there is nothing for ROCm SMI
// to answer, so NVIDIA-only nodes do not pay for the probe or carry an empty layer.
constexpr std::string_view kKfdTopology = "/sys/class/kfd/kfd/topology/nodes";

// The children start_driver_probes forked, and which outcome is which layer's.
struct DriverProbes {
    RunningProbes running;
    // Where each probe's outcome is among the running ones.
    size_t nvml_probe = 0;
    std::optional<size_t> cuda_probe, all_devices_probe, rocm_smi_probe;
};

void DriverProbesDeleter::operator()(DriverProbes* p) const { delete p; }

StartedDriverProbes start_driver_probes(const CollectContext& ctx, bool ask_rocm_smi) {
    const auto& o = ctx.options;
    const Root& root = ctx.root;
    StartedDriverProbes started(new DriverProbes);
    std::vector<ProbeSpec> specs;

    NvmlQueryOptions nopts{o.driver_library_dir, o.health_interval_ms,
                           static_cast<unsigned>(o.driver_deadline.count())};
    started->nvml_probe = specs.size();
    specs.push_back({"nvml", [nopts, &root](ProbeChannel& ch) {
                         point_standins_at_capture(root);
                         query_nvml(nopts, ch);
                     },
                     o.driver_deadline});
    if (o.probe_cuda) {
        CudaQueryOptions caller{o.driver_library_dir, env_value(o, "CUDA_VISIBLE_DEVICES"),
                                env_value(o, "CUDA_DEVICE_ORDER")};
        started->cuda_probe = specs.size();
        specs.push_back({"cuda", [caller, &root](ProbeChannel& ch) {
                             point_standins_at_capture(root);
                             query_cuda(caller, ch);
                         },
                         o.driver_deadline});
        if (o.all_devices) {
            started->all_devices_probe = specs.size();
            CudaQueryOptions all{o.driver_library_dir, std::nullopt, std::nullopt};
            specs.push_back({"cuda(all)", [all, &root](ProbeChannel& ch) {
                                 point_standins_at_capture(root);
                                 query_cuda(all, ch);
                             },
                             o.driver_deadline});
        }
    }

    if (ask_rocm_smi && root.exists(kKfdTopology)) {
        started->rocm_smi_probe = specs.size();
        RocmSmiQueryOptions ropts{o.driver_library_dir, o.health_interval_ms,
                                  static_cast<unsigned>(o.driver_deadline.count())};
        specs.push_back({"rocm_smi", [ropts, &root](ProbeChannel& ch) {
                             point_standins_at_capture(root);
                             query_rocm_smi(ropts, ch);
                         },
                         o.driver_deadline});
    }

    started->running = start_probes(specs);
    return started;
}

std::vector<CollectorStatus> finish_driver_probes(const CollectContext& ctx, StartedDriverProbes started,
                                                  NvmlLayer& nvml, CudaLayer& cuda, RocmSmiLayer* rocm_smi) {
    const auto& o = ctx.options;
    auto outcomes = started->running.wait();
    // A caller that passes no RocmSmiLayer did not want it (start_driver_probes then asked nothing).
    std::optional<size_t> rocm_smi_probe;
    if (rocm_smi) rocm_smi_probe = started->rocm_smi_probe;
    const std::optional<size_t> all_devices_probe = started->all_devices_probe;
    std::vector<CollectorStatus> statuses;
    // Reported after NVML and CUDA.
    auto finish = [&] {
        if (rocm_smi_probe)
            statuses.push_back(rocm_smi_status(outcomes[*rocm_smi_probe], o.driver_deadline, *rocm_smi));
        return std::move(statuses);
    };

    auto& nvml_outcome = outcomes[started->nvml_probe];
    take_result(nvml_outcome, nvml);
    auto nst = status_of(Collector::nvml, nvml_outcome, o.driver_deadline, DriverApi::nvml, nvml.hung_call);
    if (nst.state == CollectorState::ok) {
        if (!nvml.load_error.empty()) {
            nst.state = CollectorState::no_data;
            nst.message = "libnvidia-ml.so.1 not loaded: " + nvml.load_error;
        } else if (nvml.init_result && *nvml.init_result != 0) {
            nst.state = CollectorState::error;
            nst.message = "nvmlInit_v2 failed: " + nvml.init_error;
            nst.path = nvml.library_path;
        } else if (!nvml.init_error.empty()) {
            nst.state = CollectorState::error;
            nst.message = nvml.init_error;
            nst.path = nvml.library_path;
        }
    }
    statuses.push_back(std::move(nst));

    if (!started->cuda_probe) {
        statuses.push_back(status_no_data(Collector::cuda, "CUDA driver not probed (--no-cuda)"));
        return finish();
    }
    auto& cuda_outcome = outcomes[*started->cuda_probe];
    take_result(cuda_outcome, cuda);
    auto cst = status_of(Collector::cuda, cuda_outcome, o.driver_deadline, DriverApi::cuda, cuda.hung_call);
    if (cst.state == CollectorState::ok) {
        if (!cuda.load_error.empty()) {
            cst.state = CollectorState::no_data;
            cst.message = "libcuda.so.1 not loaded: " + cuda.load_error;
        } else if (cuda.caller.init_result && *cuda.caller.init_result != 0) {
            cst.state = CollectorState::error;
            cst.message = fmt::format("cuInit failed: {} ({}): {}", cuda.caller.init_name, *cuda.caller.init_result,
                                      cuda.caller.init_meaning);
            cst.path = cuda.library_path;
        }
    }
    if (all_devices_probe) {
        auto& all_outcome = outcomes[*all_devices_probe];
        CudaLayer all_layer;
        take_result(all_outcome, all_layer);
        if (all_outcome.result) cuda.all = all_layer.caller;
        std::optional<HungCall> hung;
        auto ast = status_of(Collector::cuda, all_outcome, o.driver_deadline, DriverApi::cuda, hung);
        if (hung && !cuda.hung_call) {
            hung->scope = HungCall::Scope::all_devices;
            cuda.hung_call = std::move(hung);
        }
        if (ast.state != CollectorState::ok)
            cst.problems.push_back({ast.path, "--all-devices evaluation: " + ast.message});
        for (const auto& problem : ast.problems)
            cst.problems.push_back({problem.path, "--all-devices evaluation: " + problem.message});
    }
    statuses.push_back(std::move(cst));
    return finish();
}

std::vector<CollectorStatus> collect_driver(const CollectContext& ctx, NvmlLayer& nvml, CudaLayer& cuda,
                                            RocmSmiLayer* rocm_smi) {
    return finish_driver_probes(ctx, start_driver_probes(ctx, rocm_smi != nullptr), nvml, cuda, rocm_smi);
}

}  // namespace gpudx
