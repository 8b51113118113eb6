// Cause and effects in one pasted text (rules/reference/consequences.hpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/finding.hpp"
#include "rules/reference/consequences.hpp"

using namespace gpudx;

namespace {

Finding finding(std::string id, Severity severity, std::string message, std::string pci = {}) {
    Finding f;
    f.id = std::move(id);
    f.severity = severity;
    f.message = std::move(message);
    if (!pci.empty()) f.subjects.push_back({"", pci});
    f.evidence.push_back({"paste.txt", f.message});
    return f;
}

std::vector<std::string> ids(const std::vector<Finding>& fs) {
    std::vector<std::string> out;
    for (auto& f : fs) out.push_back(f.id);
    return out;
}

}  // namespace

TEST(Consequences, AnXid79AndWhatFollowedOnTheSameGpuAreOneFinding) {
    std::vector<Finding> fs = {
        finding("kernel_log.xid", Severity::error, "Xid 79 (GPU has fallen off the bus) on GPU at 0000:3b:00.0", "0000:3b:00.0"),
        finding("driver.gpu_handle_unknown_error", Severity::error, "NVML cannot reach GPU at 0000:3b:00.0: Unknown Error",
                "0000:3b:00.0"),
        finding("driver.gpu_handle_unknown_error", Severity::error, "NVML cannot reach GPU at 0000:86:00.0: Unknown Error",
                "0000:86:00.0"),
        finding("cudart.cudaErrorLaunchFailure", Severity::warning, "cudaError_t cudaErrorLaunchFailure (719): ..."),
        finding("container.cdi_unresolvable", Severity::error, "CDI device nvidia.com/gpu=all unresolvable"),
    };
    fold_consequences(fs);
    // The other GPU's error and the unrelated container finding stay; the rest is the Xid's story.
    EXPECT_EQ(ids(fs), (std::vector<std::string>{"kernel_log.xid", "driver.gpu_handle_unknown_error",
                                                  "container.cdi_unresolvable"}));
    EXPECT_EQ(fs[0].followed_by,
              (std::vector<std::string>{"driver.gpu_handle_unknown_error", "cudart.cudaErrorLaunchFailure"}));
    EXPECT_NE(fs[0].message.find("what followed in the same text"), std::string::npos);
    EXPECT_NE(fs[0].message.find("NVML cannot reach GPU at 0000:3b:00.0"), std::string::npos);
    EXPECT_EQ(fs[0].evidence.size(), 3u);
    EXPECT_EQ(fs[1].subjects[0].pci, "0000:86:00.0");
    EXPECT_TRUE(fs[1].followed_by.empty());
}

TEST(Consequences, AnEffectBeforeItsCauseAndAChainFoldIntoTheFirstCause) {
    std::vector<Finding> fs = {
        finding("kernel_log.fallen_off_bus", Severity::error, "PCI device 0000:3b:00.0 fell off the bus", "0000:3b:00.0"),
        finding("nvml.NVML_ERROR_GPU_IS_LOST", Severity::warning, "nvmlReturn_t NVML_ERROR_GPU_IS_LOST (15)"),
        finding("kernel_log.xid", Severity::error, "Xid 79 (GPU has fallen off the bus) on GPU at 0000:3b:00.0", "0000:3b:00.0"),
    };
    fold_consequences(fs);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"kernel_log.xid"});
    EXPECT_EQ(fs[0].followed_by,
              (std::vector<std::string>{"kernel_log.fallen_off_bus", "nvml.NVML_ERROR_GPU_IS_LOST"}));
}

TEST(Consequences, OnlyTheXidCodesThatCauseIt) {
    // Xid 13 is the program's own fault: a CUDA error after it is the same story; a GPU handle error is not.
    std::vector<Finding> fs = {
        finding("kernel_log.xid", Severity::warning, "Xid 13 (Graphics Engine Exception) on GPU at 0000:3b:00.0", "0000:3b:00.0"),
        finding("driver.gpu_handle_unknown_error", Severity::error, "NVML cannot reach GPU at 0000:3b:00.0", "0000:3b:00.0"),
        finding("cudart.cudaErrorIllegalAddress", Severity::warning, "cudaError_t cudaErrorIllegalAddress (700)"),
    };
    fold_consequences(fs);
    EXPECT_EQ(ids(fs), (std::vector<std::string>{"kernel_log.xid", "driver.gpu_handle_unknown_error"}));
    EXPECT_EQ(fs[0].followed_by, std::vector<std::string>{"cudart.cudaErrorIllegalAddress"});
    EXPECT_EQ(fs[0].severity, Severity::warning);
}

TEST(Consequences, TheCauseTakesTheHighestSeverityOfItsStory) {
    std::vector<Finding> fs = {
        finding("driver.fabric_manager_config_invalid", Severity::warning, "fabric manager config item invalid"),
        finding("driver.cuda_system_not_ready", Severity::error, "CUDA error 802: system not yet initialized"),
    };
    fold_consequences(fs);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].severity, Severity::error);
}

TEST(Consequences, FindingsWithoutACauseAreLeftAsTheyAre) {
    std::vector<Finding> fs = {
        finding("libs.nvml_version_mismatch", Severity::error, "NVML refuses to start"),
        finding("cudart.cudaErrorLaunchFailure", Severity::warning, "cudaError_t cudaErrorLaunchFailure (719)"),
    };
    auto before = fs;
    fold_consequences(fs);
    ASSERT_EQ(ids(fs), ids(before));
    EXPECT_EQ(fs[0].message, before[0].message);
    EXPECT_TRUE(fs[0].followed_by.empty() && fs[1].followed_by.empty());
}

TEST(Consequences, FollowedByIsWrittenAndReadBack) {
    Finding f = finding("libs.api_mismatch", Severity::error, "user-space driver 515.48.07 does not match");
    f.followed_by = {"libs.nvml_version_mismatch"};
    auto j = finding_to_json(f);
    EXPECT_EQ(j["followed_by"], nlohmann::json::array({"libs.nvml_version_mismatch"}));
    auto back = finding_from_json(j);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->followed_by, f.followed_by);
    EXPECT_FALSE(finding_to_json(finding("x.y", Severity::info, "m")).contains("followed_by"));
}

TEST(Consequences, TheXidCodeIsReadFromTheFindingsMessage) {
    EXPECT_EQ(finding_xid_code(finding("kernel_log.xid", Severity::error, "Xid 79 (GPU has fallen off the bus) on ...")), 79);
    EXPECT_EQ(finding_xid_code(finding("kernel_log.xid", Severity::error, "no code here")), std::nullopt);
}
