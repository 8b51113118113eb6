// The API tables every feature reaches the driver libraries through (vendor/*/api.hpp), resolved against the
// stand-in libraries: newest version first, optional entry points null, the file the loader picked.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include "gpu_api/cuda/api.hpp"
#include "gpu_api/library.hpp"
#include "gpu_api/nvml/api.hpp"
#include "gpu_api/rocm_smi/api.hpp"

using namespace gpudx;

namespace {

const std::string kDir = GPUDX_STANDIN_LIB_DIR;

// The address `name` has in the library at `path` (already loaded by the table, so the same handle).
void* address_of(const std::string& path, const char* name) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return h ? ::dlsym(h, name) : nullptr;
}

template <class Fn>
void* as_address(Fn fn) {
    return reinterpret_cast<void*>(fn);
}

}  // namespace

TEST(VendorApi, NvmlTableTakesTheNewestVersionOfEachEntryPoint) {
    auto api = NvmlApi::open(kDir);
    ASSERT_TRUE(api) << api.error().message;
    const auto& path = api->library.path();
    EXPECT_EQ(path, kDir + "/libnvidia-ml.so.1");
    // The stand-in exports the plain, _v2 and _v3 spellings alike: the table holds the newest.
    ASSERT_NE(address_of(path, "nvmlInit"), address_of(path, "nvmlInit_v2"));
    EXPECT_EQ(as_address(api->init), address_of(path, "nvmlInit_v2"));
    EXPECT_EQ(as_address(api->pci), address_of(path, "nvmlDeviceGetPciInfo_v3"));
    EXPECT_EQ(as_address(api->handle_by_index), address_of(path, "nvmlDeviceGetHandleByIndex_v2"));
    EXPECT_EQ(as_address(api->processes), address_of(path, "nvmlDeviceGetComputeRunningProcesses_v3"));
    EXPECT_EQ(as_address(api->uuid), address_of(path, "nvmlDeviceGetUUID"));
    // Entry points this library lacks are null, not an error: each caller decides whether it needs them.
    EXPECT_EQ(api->p2p_status, nullptr);
    EXPECT_EQ(api->memory, nullptr);
    EXPECT_EQ(api->index, nullptr);
}

TEST(VendorApi, NvmlDescribesACodeWithTheLibrarysOwnText) {
    auto api = NvmlApi::open(kDir);
    ASSERT_TRUE(api);
    auto text = api->describe(NVML_ERROR_GPU_IS_LOST);
    EXPECT_EQ(text.rfind("NVML_ERROR_GPU_IS_LOST (15, ", 0), 0u) << text;
}

TEST(VendorApi, CudaTableResolvesTheProbesEntryPointsAndLeavesTheRestNull) {
    auto api = CudaApi::open(kDir);
    ASSERT_TRUE(api) << api.error().message;
    const auto& path = api->library.path();
    EXPECT_EQ(path, kDir + "/libcuda.so.1");
    EXPECT_EQ(as_address(api->init), address_of(path, "cuInit"));
    EXPECT_EQ(as_address(api->device_get_uuid), address_of(path, "cuDeviceGetUuid_v2"));
    EXPECT_EQ(as_address(api->device_total_mem), address_of(path, "cuDeviceTotalMem_v2"));
    // The probe's stand-in has neither the checkpoint API nor contexts.
    EXPECT_EQ(api->checkpoint_lock, nullptr);
    EXPECT_EQ(api->primary_ctx_retain, nullptr);
    EXPECT_EQ(api->error_name(CUDA_ERROR_NO_DEVICE), "CUDA_ERROR_NO_DEVICE");
}

TEST(VendorApi, RocmSmiTableFindsTheSonameOfItsGeneration) {
    auto api = RocmSmiApi::open(kDir);
    ASSERT_TRUE(api) << api.error().message;
    EXPECT_EQ(api->library.path(), kDir + "/librocm_smi64.so.7");
    EXPECT_NE(api->init, nullptr);
    EXPECT_NE(api->ecc_count, nullptr);
}

TEST(VendorApi, LibraryLookupFallsBackToOlderVersionsInTheOrderGiven) {
    auto lib = DriverLibrary::open("libnvidia-ml.so.1", kDir, "nvmlInit_v2");
    ASSERT_TRUE(lib);
    const auto& path = lib->path();
    // The stand-in has _v3 and _v2 but no plain nvmlDeviceGetPciInfo: the first spelling that exists is taken.
    ASSERT_NE(address_of(path, "nvmlDeviceGetPciInfo_v2"), nullptr);
    EXPECT_EQ(lib->symbol("nvmlDeviceGetPciInfo", {"_v9", "_v2", "_v3"}), address_of(path, "nvmlDeviceGetPciInfo_v2"));
    EXPECT_EQ(lib->symbol("nvmlDeviceGetPciInfo", {"", "_v3"}), address_of(path, "nvmlDeviceGetPciInfo_v3"));
    EXPECT_EQ(lib->symbol("nvmlDeviceGetPciInfo", {"", "_v9"}), nullptr);
    nvml::DeviceGetP2PStatus absent = reinterpret_cast<nvml::DeviceGetP2PStatus>(1);
    lib->bind(absent, "nvmlDeviceGetP2PStatus");
    EXPECT_EQ(absent, nullptr);
}

TEST(VendorApi, ALibraryThatIsNotThereIsAnErrorNamingThePath) {
    auto api = CudaApi::open(std::string("/nonexistent-gpudx-dir"));
    ASSERT_FALSE(api);
    EXPECT_EQ(api.error().path, "/nonexistent-gpudx-dir/libcuda.so.1");
    EXPECT_FALSE(NvmlApi::open(std::string("/nonexistent-gpudx-dir")));
    EXPECT_FALSE(RocmSmiApi::open(std::string("/nonexistent-gpudx-dir")));
}
