#include <gtest/gtest.h>

#include <string>

#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "rules/reference/result_codes.hpp"
#include "test_support.hpp"

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

// A site table over the built-in ones: it may say what a code means on its nodes and add a code (a newer library's),
// never rename one or renumber one; each refusal names the file and line.
TEST(ResultCodes, ASiteTableReplacesAndAddsButCannotRenameOrRenumber) {
    auto dir = test::scratch("site-codes");
    const std::string head = "table = \"nvmlReturn_t\"\nversion = \"site 1\"\n";
    auto code = [](std::string name, int number, std::string meaning) {
        return "\n[[code]]\nname = \"" + name + "\"\nnumber = " + std::to_string(number) +
               "\ntext = \"t\"\nlayer = \"driver\"\nseverity = \"error\"\nmeaning = \"" + meaning +
               "\"\nnext_step = \"call the on-call\"\n";
    };
    auto good = test::write_file(dir / "good.toml", head + code("NVML_ERROR_DRIVER_NOT_LOADED", 9, "our image lost it") +
                                                        code("NVML_ERROR_FROM_THE_FUTURE", 990, "new"));
    auto t = result_code_tables_with_site({good});
    ASSERT_TRUE(t) << t.error().message;
    const ResultCodeTable* nvml = nullptr;
    for (auto& x : *t)
        if (x.table == "nvmlReturn_t") nvml = &x;
    ASSERT_TRUE(nvml);
    EXPECT_NE(nvml->version.find("site 1"), std::string::npos) << nvml->version;
    size_t builtin_count = 0;
    for (auto& x : builtin_result_code_tables())
        if (x.table == "nvmlReturn_t") builtin_count = x.codes.size();
    EXPECT_EQ(nvml->codes.size(), builtin_count + 1);
    auto matches = match_result_codes("nvml error: NVML_ERROR_DRIVER_NOT_LOADED", *t);
    ASSERT_EQ(matches.size(), 1u);
    EXPECT_EQ(matches[0].code->meaning, "our image lost it");
    EXPECT_EQ(matches[0].code->origin, good);
    EXPECT_EQ(match_result_codes("NVML_ERROR_FROM_THE_FUTURE", *t).size(), 1u);
    // The built-in tables are untouched.
    EXPECT_NE(match_result_codes("NVML_ERROR_DRIVER_NOT_LOADED", builtin_result_code_tables())[0].code->meaning,
              "our image lost it");

    auto renumbered = test::write_file(dir / "renumbered.toml", head + code("NVML_ERROR_DRIVER_NOT_LOADED", 99, "m"));
    auto r = result_code_tables_with_site({renumbered});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(renumbered + ":4:"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("is 9"), std::string::npos) << r.error().message;

    auto renamed = test::write_file(dir / "renamed.toml", head + code("NVML_ERROR_NOT_LOADED_AT_ALL", 9, "m"));
    auto n = result_code_tables_with_site({renamed});
    ASSERT_FALSE(n);
    EXPECT_NE(n.error().message.find(renamed + ":4:"), std::string::npos) << n.error().message;
    EXPECT_NE(n.error().message.find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos) << n.error().message;

    auto twice = test::write_file(dir / "twice.toml", head + code("NVML_ERROR_FROM_THE_FUTURE", 990, "a") +
                                                          code("NVML_ERROR_FROM_THE_FUTURE", 991, "b"));
    auto d = result_code_tables_with_site({twice});
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().message.find(twice + ":13:"), std::string::npos) << d.error().message;

    auto missing = result_code_tables_with_site({(dir / "absent.toml").string()});
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("absent.toml"), std::string::npos);
}

// The same through the command: a bad site table is a usage error (64) that names the file and line.
TEST(ResultCodes, ExplainRefusesABadSiteTableWithItsLine) {
    auto dir = test::scratch("site-codes-cli");
    auto bad = test::write_file(dir / "bad.toml", "table = \"CUresult\"\nversion = \"1\"\n\n[[code]]\nname = "
                                                  "\"CUDA_ERROR_SYSTEM_NOT_READY\"\nnumber = 803\ntext = \"x\"\n"
                                                  "layer = \"driver\"\nseverity = \"error\"\nmeaning = \"m\"\n"
                                                  "next_step = \"n\"\n");
    auto [status, out] = test::run_gpudx("explain --error-codes " + bad + " --text 'CUDA error 802'");
    EXPECT_EQ(status, 64) << out;
    EXPECT_NE(out.find(bad + ":4:"), std::string::npos) << out;
}

}  // namespace GPUDX_UNITY_ID
