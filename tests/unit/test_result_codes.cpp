#include <gtest/gtest.h>

#include <string>

#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "rules/reference/result_codes.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {

const ResultCodeTable& result_table(std::string_view name) {
    for (auto& t : builtin_result_code_tables())
        if (t.table == name) return t;
    throw std::runtime_error("no table " + std::string(name));
}

const ResultCode* result_code_numbered(const ResultCodeTable& t, long long n) {
    for (auto& c : t.codes)
        if (c.number == n) return &c;
    return nullptr;
}

std::vector<std::string> result_names(std::string_view line) {
    std::vector<std::string> out;
    for (auto& m : match_result_codes(line, builtin_result_code_tables())) out.push_back(m.code->name + "/" + m.how);
    return out;
}

}  // namespace

TEST(ResultCodes, EveryBuiltInTableParsesWithItsCodes) {
    const auto& tables = builtin_result_code_tables();
    ASSERT_EQ(tables.size(), 6u);
    for (auto& t : tables) {
        SCOPED_TRACE(t.table);
        EXPECT_GT(t.codes.size(), 5u);
        EXPECT_FALSE(t.version.empty());
    }
    EXPECT_EQ(result_code_numbered(result_table("CUresult"), 802)->name, "CUDA_ERROR_SYSTEM_NOT_READY");
    EXPECT_EQ(result_code_numbered(result_table("cudaError_t"), 2)->text, "out of memory");
    EXPECT_EQ(result_code_numbered(result_table("hsa_status_t"), 0x1008)->name, "HSA_STATUS_ERROR_OUT_OF_RESOURCES");
}

// The tables and the declarations gpudx calls the libraries with are one set of facts where they overlap.
TEST(ResultCodes, AgreeWithTheAbiDeclarationsGpudxCallsTheLibrariesWith) {
    const auto& cu = result_table("CUresult");
    for (auto& r : kCuResults) {
        SCOPED_TRACE(r.name);
        auto* c = result_code_numbered(cu, r.code);
        ASSERT_NE(c, nullptr) << "the table lacks CUresult " << r.code;
        EXPECT_EQ(c->name, r.name);
    }
    for (auto& c : result_table("nvmlReturn_t").codes) {
        std::string abi = nvml_return_name(static_cast<nvmlReturn_t>(c.number));
        if (abi == "NVML_ERROR_(unlisted)") continue;
        EXPECT_EQ(abi, c.name) << "nvmlReturn_t " << c.number;
    }
}

TEST(ResultCodes, IdsNameTheLibraryAndTheCode) {
    auto& cu = result_table("CUresult");
    EXPECT_EQ(result_code_id(cu, *result_code_numbered(cu, 802)), "cuda.CUDA_ERROR_SYSTEM_NOT_READY");
    auto& rt = result_table("cudaError_t");
    EXPECT_EQ(result_code_id(rt, *result_code_numbered(rt, 2)), "cudart.cudaErrorMemoryAllocation");
}

TEST(ResultCodes, ALineNamesACodeByNameTextOrNumber) {
    using V = std::vector<std::string>;
    // Names, whole words only, of every library.
    EXPECT_EQ(result_names("2024-01-01 failed call to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized"),
              V{"CUDA_ERROR_SYSTEM_NOT_READY/name"});
    EXPECT_EQ(result_names("HIP error: hipErrorNoBinaryForGpu"), V{"hipErrorNoBinaryForGpu/name"});
    EXPECT_EQ(result_names("hsa api call failure at: rocminfo.cc:1306 HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
              V{"HSA_STATUS_ERROR_OUT_OF_RESOURCES/name"});
    EXPECT_TRUE(result_names("xCUDA_ERROR_SYSTEM_NOT_READYx").empty());
    // Texts after CUDA's own words, the longest that fits.
    EXPECT_EQ(result_names("RuntimeError: CUDA error: out of memory"), V{"cudaErrorMemoryAllocation/text"});
    EXPECT_EQ(result_names("misc/argcheck.cc:39 NCCL WARN Cuda failure 'invalid argument'"),
              V{"cudaErrorInvalidValue/text"});
    // Numbers where the line speaks of CUDA.
    EXPECT_EQ(result_names("Check failed: e == cudaSuccess (803 vs. 0) CUDA"), V{"cudaErrorSystemDriverMismatch/number"});
    EXPECT_EQ(result_names("CUDA init failed with error 802"), V{"cudaErrorSystemNotReady/number"});
    EXPECT_EQ(result_names("CUDA error: unknown error"), V{"cudaErrorUnknown/text"});
    // Nothing without a code: a number without CUDA, CUDA without a code, a success.
    EXPECT_TRUE(result_names("error 802 in the flux capacitor").empty());
    EXPECT_TRUE(result_names("CUDA Version: 12.4").empty());
    EXPECT_TRUE(result_names("CUDA error: no error").empty());
    EXPECT_TRUE(result_names("cuInit returned CUDA_SUCCESS").empty());
}

TEST(ResultCodes, ABrokenTableIsRefusedWithItsFileAndLine) {
    const std::string head = "table = \"CUresult\"\nversion = \"1\"\n";
    const std::string code = "[[code]]\nname = \"A\"\nnumber = 1\nlayer = \"driver\"\nseverity = \"error\"\n"
                             "meaning = \"m\"\nnext_step = \"n\"\n";
    auto twice_name = parse_result_code_table(head + code + code, "site.toml");
    ASSERT_FALSE(twice_name);
    EXPECT_EQ(twice_name.error().message, "site.toml:10: A is already declared at line 3");
    std::string other_name = code;
    other_name.replace(other_name.find("\"A\""), 3, "\"B\"");
    auto twice_number = parse_result_code_table(head + code + other_name, "site.toml");
    ASSERT_FALSE(twice_number);
    EXPECT_EQ(twice_number.error().message, "site.toml:10: B has number 1, which line 3 already gave another code");
    auto bad_layer = parse_result_code_table(head + "[[code]]\nname = \"A\"\nnumber = 1\nlayer = \"moon\"\n"
                                                    "severity = \"error\"\nmeaning = \"m\"\nnext_step = \"n\"\n",
                                             "site.toml");
    ASSERT_FALSE(bad_layer);
    EXPECT_EQ(bad_layer.error().message, "site.toml:3: A: unknown layer \"moon\"");
    EXPECT_FALSE(parse_result_code_table("table = \"int\"\nversion = \"1\"\n" + code, "site.toml"));
    EXPECT_TRUE(parse_result_code_table(head + code, "site.toml"));
}

}  // namespace GPUDX_UNITY_ID
