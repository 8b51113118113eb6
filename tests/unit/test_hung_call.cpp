// The typed driver results of model/driver.hpp: a hung call read back from the label a probe announced (and
// written back byte for byte), and what the recorded return codes mean to the rules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "model/driver.hpp"
#include "model/layer_json.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {

struct Form {
    DriverApi api;
    std::string label;
    std::string function;
    std::optional<unsigned> device;
    std::string arguments;
    HungCall::Scope scope = HungCall::Scope::caller;
};

// Every form the probes (vendor/*/query.cpp) and collect/driver.cpp write.
const std::vector<Form> kForms = {
    {DriverApi::nvml, "(before the first call)", "", std::nullopt, ""},
    {DriverApi::nvml, "dlopen(libnvidia-ml.so.1)", "dlopen", std::nullopt, "libnvidia-ml.so.1"},
    {DriverApi::nvml, "nvmlInit_v2", "nvmlInit_v2", std::nullopt, ""},
    {DriverApi::nvml, "nvmlSystemGetDriverVersion", "nvmlSystemGetDriverVersion", std::nullopt, ""},
    {DriverApi::nvml, "nvmlSystemGetNVMLVersion", "nvmlSystemGetNVMLVersion", std::nullopt, ""},
    {DriverApi::nvml, "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion_v2", std::nullopt, ""},
    {DriverApi::nvml, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount_v2", std::nullopt, ""},
    {DriverApi::nvml, "nvmlDeviceGetHandleByIndex_v2(3)", "nvmlDeviceGetHandleByIndex_v2", 3u, ""},
    {DriverApi::nvml, "nvmlDeviceGetUUID(1)", "nvmlDeviceGetUUID", 1u, ""},
    {DriverApi::nvml, "nvmlDeviceGetPciInfo_v3(0)", "nvmlDeviceGetPciInfo_v3", 0u, ""},
    {DriverApi::nvml, "nvmlDeviceGetMigDeviceHandleByIndex(2)", "nvmlDeviceGetMigDeviceHandleByIndex", 2u, ""},
    {DriverApi::nvml, "nvmlDeviceGetFieldValues(7)", "nvmlDeviceGetFieldValues", 7u, ""},
    {DriverApi::nvml, "nvmlDeviceGetNvLinkState(2, link 17)", "nvmlDeviceGetNvLinkState", 2u, "link 17"},
    {DriverApi::nvml, "nvmlDeviceGetComputeRunningProcesses_v3(0)", "nvmlDeviceGetComputeRunningProcesses_v3", 0u, ""},
    {DriverApi::nvml, "nvmlSystemGetProcessName(4242)", "nvmlSystemGetProcessName", std::nullopt, "4242"},
    {DriverApi::cuda, "dlopen(libcuda.so.1)", "dlopen", std::nullopt, "libcuda.so.1"},
    {DriverApi::cuda, "cuDriverGetVersion", "cuDriverGetVersion", std::nullopt, ""},
    {DriverApi::cuda, "cuInit(0)", "cuInit", std::nullopt, "0"},
    {DriverApi::cuda, "cuDeviceGetCount", "cuDeviceGetCount", std::nullopt, ""},
    {DriverApi::cuda, "cuDeviceGet(5)", "cuDeviceGet", 5u, ""},
    {DriverApi::cuda, "cuDeviceGetUuid_v2(1)", "cuDeviceGetUuid_v2", 1u, ""},
    {DriverApi::cuda, "cuDeviceGetPCIBusId(0)", "cuDeviceGetPCIBusId", 0u, ""},
    {DriverApi::cuda, "cuDeviceGetAttribute(33, 1)", "cuDeviceGetAttribute", 1u, "33"},
    {DriverApi::cuda, "cuDeviceGetName(2)", "cuDeviceGetName", 2u, ""},
    {DriverApi::cuda, "cuDeviceTotalMem_v2(3)", "cuDeviceTotalMem_v2", 3u, ""},
    {DriverApi::cuda, "(all devices) cuDeviceGetPCIBusId(0)", "cuDeviceGetPCIBusId", 0u, "",
     HungCall::Scope::all_devices},
    {DriverApi::cuda, "(all devices) cuInit(0)", "cuInit", std::nullopt, "0", HungCall::Scope::all_devices},
    {DriverApi::cuda, "(all devices) (before the first call)", "", std::nullopt, "", HungCall::Scope::all_devices},
    {DriverApi::rocm_smi, "dlopen(librocm_smi64.so)", "dlopen", std::nullopt, "librocm_smi64.so"},
    {DriverApi::rocm_smi, "rsmi_init", "rsmi_init", std::nullopt, ""},
    {DriverApi::rocm_smi, "rsmi_version_get", "rsmi_version_get", std::nullopt, ""},
    {DriverApi::rocm_smi, "rsmi_version_str_get(RSMI_SW_COMP_DRIVER)", "rsmi_version_str_get", std::nullopt,
     "RSMI_SW_COMP_DRIVER"},
    {DriverApi::rocm_smi, "rsmi_num_monitor_devices", "rsmi_num_monitor_devices", std::nullopt, ""},
    {DriverApi::rocm_smi, "rsmi_dev_pci_id_get(4)", "rsmi_dev_pci_id_get", 4u, ""},
    {DriverApi::rocm_smi, "rsmi_dev_ecc_count_get(3, UMC)", "rsmi_dev_ecc_count_get", 3u, "UMC"},
};

}  // namespace

TEST(HungCall, EveryLabelTheProbesWriteReadsBackAsItsCall) {
    for (const auto& form : kForms) {
        SCOPED_TRACE(form.label);
        auto call = parse_hung_call(form.api, form.label);
        EXPECT_EQ(call.api, form.api);
        EXPECT_EQ(call.function, form.function);
        EXPECT_EQ(call.device, form.device);
        EXPECT_EQ(call.arguments, form.arguments);
        EXPECT_EQ(call.scope, form.scope);
        EXPECT_EQ(call.label(), form.label);
    }
}

TEST(HungCall, TheProbesLabelsAreBuiltWithTheDeviceWhereTheFunctionTakesIt) {
    EXPECT_EQ(driver_call_label("nvmlDeviceGetUUID", 1u), "nvmlDeviceGetUUID(1)");
    EXPECT_EQ(driver_call_label("nvmlDeviceGetNvLinkState", 2u, "link 17"), "nvmlDeviceGetNvLinkState(2, link 17)");
    EXPECT_EQ(driver_call_label("cuDeviceGetAttribute", 1u, "33"), "cuDeviceGetAttribute(33, 1)");
    EXPECT_EQ(driver_call_label("rsmi_dev_ecc_count_get", 3u, "UMC"), "rsmi_dev_ecc_count_get(3, UMC)");
    EXPECT_EQ(driver_call_label("nvmlSystemGetProcessName", std::nullopt, "4242"), "nvmlSystemGetProcessName(4242)");
    EXPECT_EQ(driver_call_label("nvmlInit_v2"), "nvmlInit_v2");
}

TEST(HungCall, ATextNoProbeWritesIsKeptWholeAndWrittenBackUnchanged) {
    for (std::string label : {"nvmlDeviceGetUUID(01)", "nvmlDeviceGetUUID(99999999)", "nvmlDeviceGetUUID()",
                              "garbled(", "cuDeviceGetAttribute(33,1)", "(all devices) ", "some note (in brackets)"}) {
        SCOPED_TRACE(label);
        auto call = parse_hung_call(DriverApi::nvml, label);
        EXPECT_EQ(call.label(), label);
        EXPECT_EQ(call.device, std::nullopt);
    }
    // A number past any device count is an argument, not a device.
    auto far = parse_hung_call(DriverApi::nvml, "nvmlDeviceGetUUID(99999999)");
    EXPECT_EQ(far.function, "nvmlDeviceGetUUID");
    EXPECT_EQ(far.arguments, "99999999");
}

TEST(HungCall, SnapshotStoresTheLabelUnderTimedOutCall) {
    NvmlLayer nvml;
    nlohmann::json j;
    layer_to_json(j, nvml);
    EXPECT_EQ(j["timed_out_call"], "");
    nvml.hung_call = parse_hung_call(DriverApi::nvml, "nvmlDeviceGetNvLinkState(2, link 17)");
    layer_to_json(j, nvml);
    EXPECT_EQ(j["timed_out_call"], "nvmlDeviceGetNvLinkState(2, link 17)");
    NvmlLayer back;
    layer_from_json(j, back);
    EXPECT_EQ(back.hung_call, nvml.hung_call);

    CudaLayer cuda;
    cuda.hung_call = parse_hung_call(DriverApi::cuda, "(all devices) cuDeviceGetAttribute(33, 1)");
    layer_to_json(j, cuda);
    EXPECT_EQ(j["timed_out_call"], "(all devices) cuDeviceGetAttribute(33, 1)");
    CudaLayer cuda_back;
    layer_from_json(j, cuda_back);
    ASSERT_TRUE(cuda_back.hung_call);
    EXPECT_EQ(cuda_back.hung_call->api, DriverApi::cuda);
    EXPECT_EQ(cuda_back.hung_call->scope, HungCall::Scope::all_devices);
    EXPECT_EQ(cuda_back.hung_call->device, 1u);

    RocmSmiLayer rocm;
    layer_from_json(nlohmann::json{{"timed_out_call", "rsmi_dev_ecc_count_get(3, UMC)"}}, rocm);
    ASSERT_TRUE(rocm.hung_call);
    EXPECT_EQ(rocm.hung_call->api, DriverApi::rocm_smi);
    // An older snapshot without the key, and one with "", hold no hung call.
    layer_from_json(nlohmann::json::object(), rocm);
    EXPECT_FALSE(rocm.hung_call);
    layer_from_json(nlohmann::json{{"timed_out_call", ""}}, back);
    EXPECT_FALSE(back.hung_call);
    EXPECT_THROW(layer_from_json(nlohmann::json{{"timed_out_call", 7}}, back), nlohmann::json::exception);
}

TEST(DriverOutcomes, NvmlInitCodesMeanWhatTheRulesAct) {
    NvmlLayer n;
    EXPECT_EQ(nvml_init(n), NvmlInit::not_attempted);
    const std::pair<int, NvmlInit> cases[] = {
        {NVML_SUCCESS, NvmlInit::succeeded},
        {NVML_ERROR_DRIVER_NOT_LOADED, NvmlInit::driver_not_loaded},
        {NVML_ERROR_LIB_RM_VERSION_MISMATCH, NvmlInit::library_version_mismatch},
        {NVML_ERROR_NO_PERMISSION, NvmlInit::no_permission},
        {NVML_ERROR_LIBRARY_NOT_FOUND, NvmlInit::other_failure},
        {NVML_ERROR_UNKNOWN, NvmlInit::other_failure},
    };
    for (auto [code, outcome] : cases) {
        SCOPED_TRACE(code);
        n.init_result = code;
        EXPECT_EQ(nvml_init(n), outcome);
    }
    EXPECT_EQ(nvml_code_name(NVML_ERROR_LIB_RM_VERSION_MISMATCH), "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
}

TEST(DriverOutcomes, CuInitCodesMeanWhatTheRulesAct) {
    CudaView v;
    EXPECT_EQ(cuda_init(v), CudaInit::not_attempted);
    const std::pair<int, CudaInit> cases[] = {
        {CUDA_SUCCESS, CudaInit::succeeded},
        {CUDA_ERROR_NO_DEVICE, CudaInit::no_device},
        {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, CudaInit::driver_mismatch},
        {CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, CudaInit::compat_not_supported},
        {CUDA_ERROR_STUB_LIBRARY, CudaInit::stub_library},
        {CUDA_ERROR_SYSTEM_NOT_READY, CudaInit::system_not_ready},
        {CUDA_ERROR_OPERATING_SYSTEM, CudaInit::access_denied},
        {CUDA_ERROR_NOT_PERMITTED, CudaInit::access_denied},
        {CUDA_ERROR_NOT_INITIALIZED, CudaInit::other_failure},
        {CUDA_ERROR_UNKNOWN, CudaInit::other_failure},
    };
    for (auto [code, outcome] : cases) {
        SCOPED_TRACE(code);
        v.init_result = code;
        EXPECT_EQ(cuda_init(v), outcome);
    }
}

TEST(DriverOutcomes, FabricStatesAndAFailedRegistration) {
    NvmlDevice d;
    EXPECT_EQ(fabric_state(d), std::nullopt);
    EXPECT_FALSE(fabric_failed(d));
    const std::pair<unsigned, FabricState> cases[] = {
        {NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, FabricState::not_supported},
        {NVML_GPU_FABRIC_STATE_NOT_STARTED, FabricState::not_started},
        {NVML_GPU_FABRIC_STATE_IN_PROGRESS, FabricState::in_progress},
        {NVML_GPU_FABRIC_STATE_COMPLETED, FabricState::completed},
        {7, FabricState::not_supported},
    };
    for (auto [state, meaning] : cases) {
        SCOPED_TRACE(state);
        d.fabric_state = state;
        EXPECT_EQ(fabric_state(d), meaning);
    }
    d.fabric_state = NVML_GPU_FABRIC_STATE_COMPLETED;
    d.fabric_status = NVML_SUCCESS;
    EXPECT_FALSE(fabric_failed(d));
    d.fabric_status = NVML_ERROR_UNKNOWN;
    EXPECT_TRUE(fabric_failed(d));
    d.fabric_state = NVML_GPU_FABRIC_STATE_IN_PROGRESS;
    EXPECT_FALSE(fabric_failed(d));  // not finished: not ready, not failed
}

TEST(DriverOutcomes, AGpuLostErrorIsRecognisedByItsCode) {
    EXPECT_TRUE(reports_gpu_lost("nvmlDeviceGetUUID: NVML_ERROR_GPU_IS_LOST (15, GPU is lost)"));
    EXPECT_FALSE(reports_gpu_lost("nvmlDeviceGetUUID: NVML_ERROR_UNKNOWN (999, Unknown Error)"));
    EXPECT_EQ(rocm_smi_code_name(8), "RSMI_STATUS_INIT_ERROR");
}

}  // namespace GPUDX_UNITY_ID
