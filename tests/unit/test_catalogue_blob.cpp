// The built-in catalogues as the build compiled them (rules/reference/catalogue_blob.hpp) are exactly what the
// loaders make of data/ today, and a blob that is not this build's is refused, never misread.
#include <gtest/gtest.h>

#include "collect/kernel_log/prefilter_image.hpp"
#include "collect/kernel_log_parse.hpp"
#include "rules/reference/catalogue_blob.hpp"
#include "rules/reference/job_context.hpp"
#include "test_support.hpp"

namespace gpudx {
namespace {

using test::read_all;

std::string data_file(const std::string& name) { return read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/../data/" + name); }

TEST(CatalogueBlob, XidPolicyIsWhatTheLoaderMakesOfTheData) {
    auto parsed = parse_xid_policy(data_file("xid-policy.toml"), "built-in");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(*parsed, builtin_xid_policy());
    EXPECT_GT(builtin_xid_policy().rules.size(), 100u);
}

TEST(CatalogueBlob, SignaturesAreWhatTheLoaderMakesOfTheData) {
    auto parsed = parse_signature_catalogue(data_file("signatures.toml"), "built-in");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(*parsed, builtin_signature_catalogue());
    EXPECT_GT(builtin_signature_catalogue().signatures.size(), 40u);
}

TEST(CatalogueBlob, ResultCodeTablesAreWhatTheLoaderMakesOfTheData) {
    std::vector<ResultCodeTable> parsed;
    for (std::string name : {"cuda-driver", "cuda-runtime", "nvml", "nccl", "hip", "hsa"}) {
        std::string file = "error-codes/" + name + ".toml";
        auto t = parse_result_code_table(data_file(file), "built-in data/" + file);
        ASSERT_TRUE(t) << t.error().message;
        parsed.push_back(std::move(*t));
    }
    EXPECT_EQ(parsed, builtin_result_code_tables());
}

TEST(CatalogueBlob, WritesAndReadsBackEveryMember) {
    BuiltinCatalogues c{builtin_xid_policy(), builtin_signature_catalogue(), builtin_result_code_tables()};
    // Members a catalogue rarely sets, so that a reader skipping one would be seen.
    c.xid_policy.rules[79].repeats = 3;
    c.xid_policy.rules[79].within_s = 12.5;
    c.signatures.signatures.front().severity.reset();
    c.result_codes.front().codes.front().number = -7;
    std::string blob = write_catalogue_blob(c);  // the sections are views into it
    auto sections = catalogue_blob_sections(blob);
    ASSERT_TRUE(sections) << sections.error().message;
    EXPECT_EQ(read_xid_policy_section(sections->xid_policy).value(), c.xid_policy);
    EXPECT_EQ(read_signatures_section(sections->signatures).value(), c.signatures);
    EXPECT_EQ(read_result_codes_section(sections->result_codes).value(), c.result_codes);
}

TEST(CatalogueBlob, RefusesABlobThatIsNotThisBuilds) {
    std::string blob = write_catalogue_blob({builtin_xid_policy(), builtin_signature_catalogue(), {}});
    EXPECT_FALSE(catalogue_blob_sections(""));
    EXPECT_FALSE(catalogue_blob_sections("gpudx-catalogues-0\n" + blob.substr(blob.find('\n') + 1)));
    EXPECT_FALSE(catalogue_blob_sections(blob.substr(0, blob.size() - 1)));
    EXPECT_FALSE(catalogue_blob_sections(blob + "x"));
    auto sections = catalogue_blob_sections(blob);
    ASSERT_TRUE(sections);
    // A section cut short or with bytes left over is damaged, whatever it would otherwise read as.
    std::string_view policy = sections->xid_policy;
    EXPECT_FALSE(read_xid_policy_section(policy.substr(0, policy.size() / 2)));
    EXPECT_FALSE(read_xid_policy_section(std::string(policy) + '\0'));
    EXPECT_FALSE(read_signatures_section(policy));
    EXPECT_TRUE(read_result_codes_section(sections->result_codes).value().empty());
}

}  // namespace
}  // namespace gpudx

namespace gpudx {
namespace {

namespace kp = kernel_log_prefilter;

// The prefilters compiled in are the ones the constructor places for the words diagnose and explain ask for, and
// the scanner uses them for exactly those words only.
std::unique_ptr<kp::Prefilter> compiled_in(const std::vector<std::string>& words) {
    for (std::string_view image : kp::builtin_prefilter_images())
        if (auto p = kp::read_prefilter_image(image, words)) return p;
    return nullptr;
}

TEST(PrefilterImage, BuiltinImagesAreWhatTheConstructorPlaces) {
    ASSERT_EQ(kp::builtin_prefilter_images().size(), 2u);
    for (const auto& words : {kernel_log_text_words(builtin_signature_catalogue()),
                              explain_scan_words(builtin_signature_catalogue())}) {
        auto image = compiled_in(words);
        ASSERT_TRUE(image) << "no compiled-in prefilter for a built-in word list of " << words.size() << " words";
        EXPECT_TRUE(kp::same_prefilter(*image, kp::Prefilter(words)));
        EXPECT_TRUE(kp::same_prefilter(*kp::make_prefilter(words), kp::Prefilter(words)));
    }
}

TEST(PrefilterImage, OtherWordsArePlacedAtRunTime) {
    std::vector<std::string> words = kernel_log_text_words(builtin_signature_catalogue());
    std::vector<std::string> site = words;
    site.push_back("site-specific words");
    EXPECT_FALSE(compiled_in(site));
    std::vector<std::string> reordered(words.rbegin(), words.rend());
    EXPECT_FALSE(compiled_in(reordered));
    EXPECT_TRUE(kp::same_prefilter(*kp::make_prefilter(site), kp::Prefilter(site)));
    // An image cut short or of another layout is not read.
    std::string image(kp::builtin_prefilter_images()[0]);
    EXPECT_FALSE(kp::read_prefilter_image(image.substr(0, image.size() - 1), words));
    EXPECT_FALSE(kp::read_prefilter_image("gpudx-prefilter-0\n" + image.substr(image.find('\n') + 1), words));
}

TEST(PrefilterImage, ScannerFindsTheSameLinesWithTheImage) {
    std::vector<std::string> words = kernel_log_text_words(builtin_signature_catalogue());
    std::string text =
        "[    1.0] Linux version 6.8.0\n[    2.0] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.\n"
        "[    3.0] something quiet\n[    4.0] CUDA error: out of memory\n[    5.0] nvidia-peermem: failed -22\n";
    KernelLogScanOptions with_image;
    with_image.extra_words = words;
    KernelLogScanOptions placed = with_image;
    placed.extra_words.push_back("a word no line has");
    auto a = scan_kernel_log(text, with_image), b = scan_kernel_log(text, placed);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->lines.size(), b->lines.size());
    for (size_t i = 0; i < a->lines.size(); ++i) EXPECT_EQ(a->lines[i].text, b->lines[i].text);
    EXPECT_GE(a->lines.size(), 3u);  // the Xid, CUDA and nvidia-peermem lines
}

}  // namespace
}  // namespace gpudx
