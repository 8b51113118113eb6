#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "shim/shim_parse.hpp"

using namespace gpudx::shim;

namespace {
uint64_t parse(const std::string& s) { return parse_bus_id(s.data(), s.size()); }
std::string cuda(uint64_t a, int digits = 4) {
    char out[32];
    size_t n = format_cuda_bus_id(a, digits, out, sizeof out);
    return std::string(out, n);
}
}  // namespace

TEST(ShimParse, BusIdInEverySpellingTheStackUses) {
    uint64_t want = pack_address(0, 0, 6, 0);
    EXPECT_EQ(parse("0000:00:06.0"), want);       // CUDA
    EXPECT_EQ(parse("00000000:00:06.0"), want);   // NVML
    EXPECT_EQ(parse("00:06.0"), want);            // short
    EXPECT_EQ(parse("0000:00:06"), want);         // no function
    EXPECT_EQ(parse(" 0000.00.06.0 \n"), want);   // old procfs, blanks
    EXPECT_EQ(parse("0000:E3:00.0"), pack_address(0, 0xe3, 0, 0));
    EXPECT_EQ(parse("0001:e3:1f.7"), pack_address(1, 0xe3, 0x1f, 7));
}

TEST(ShimParse, RejectsWhatIsNotABusId) {
    EXPECT_EQ(parse(""), kNoAddress);
    EXPECT_EQ(parse("GPU-992cb470"), kNoAddress);
    EXPECT_EQ(parse("0000:00:20.0"), kNoAddress);  // device > 0x1f
    EXPECT_EQ(parse("0000:00:06.8"), kNoAddress);  // function > 7
    EXPECT_EQ(parse("0000:100:06.0"), kNoAddress);
    EXPECT_EQ(parse("0000::06.0"), kNoAddress);
    EXPECT_EQ(parse("0:0:0:0:0"), kNoAddress);
    EXPECT_EQ(parse_bus_id(nullptr, 3), kNoAddress);
}

TEST(ShimParse, FormatsLikeCudaAndNvml) {
    uint64_t a = pack_address(0, 0xe3, 0, 0);
    EXPECT_EQ(cuda(a), "0000:E3:00.0");
    EXPECT_EQ(cuda(a, 8), "00000000:E3:00.0");
    char out[32];
    ASSERT_EQ(format_nvml_bus_id(pack_address(0, 0, 7, 0), out, sizeof out), 16u);
    EXPECT_STREQ(out, "00000000:00:07.0");
    EXPECT_EQ(format_cuda_bus_id(a, 4, out, 12), 0u);  // too small: nothing written
    EXPECT_EQ(format_cuda_bus_id(kNoAddress, 4, out, sizeof out), 0u);
    EXPECT_EQ(domain_digits_of("00000000:00:07.0", 16), 8);
    EXPECT_EQ(domain_digits_of("0000:00:07.0", 12), 4);
}

TEST(ShimParse, UuidRoundTrip) {
    uint8_t u[16];
    const char* text = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    ASSERT_TRUE(parse_uuid(text, std::strlen(text), u));
    EXPECT_EQ(u[0], 0x99);
    EXPECT_EQ(u[15], 0x8d);
    char out[48];
    format_uuid(u, "GPU-", out, sizeof out);
    EXPECT_STREQ(out, text);
    format_uuid(u, "MIG-", out, sizeof out);
    EXPECT_STREQ(out, "MIG-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_FALSE(parse_uuid("GPU-992cb470", 12, u));
    EXPECT_FALSE(parse_uuid("GPU-992cb470-9027-88f4-48a9-a9a329d6978z", 40, u));
}

TEST(ShimParse, InformationFileOfTheH200Fixture) {
    std::string text =
        "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-40cd403d-66ba-4608-72b9-5be5031085dc\n"
        "Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nBus Location: \t 0000:00:07.0\nDevice Minor: \t 1\n";
    InformationFile info = parse_information(text.data(), text.size());
    ASSERT_TRUE(info.has_uuid);
    EXPECT_EQ(info.uuid[0], 0x40);
    EXPECT_EQ(info.location, pack_address(0, 0, 7, 0));
    std::string truncated = "GPU UUID: \t GPU-40cd40";
    info = parse_information(truncated.data(), truncated.size());
    EXPECT_FALSE(info.has_uuid);
    EXPECT_EQ(info.location, kNoAddress);
}

// fuzz_shim_parse, crash-9ec9ccae (" 2000c1:00.0\n", read as domain 0x2000c1): formatted in CUDA's four-digit
// spelling the domain lost its high digits and named another device. A domain above 0xffff (Intel VMD
// domains start at 0x10000) is always written with eight digits.
TEST(ShimParse, WideDomainIsNeverTruncated) {
    std::string in = " 2000c1:00.0\n";
    uint64_t a = parse_bus_id(in.data(), in.size());
    ASSERT_NE(a, kNoAddress);
    EXPECT_EQ(address_domain(a), 0x2000c1u);
    char out[32];
    size_t n = format_cuda_bus_id(a, 4, out, sizeof out);
    EXPECT_EQ(std::string(out, n), "002000C1:00:00.0");
    EXPECT_EQ(parse_bus_id(out, n), a);
    uint64_t vmd = pack_address(0x10000, 0x01, 0, 0);
    n = format_cuda_bus_id(vmd, 4, out, sizeof out);
    EXPECT_EQ(std::string(out, n), "00010000:01:00.0");
    // CUDA's 13-byte buffer cannot hold it: refused (the shim then returns the driver's own answer).
    EXPECT_EQ(format_cuda_bus_id(vmd, 4, out, 13), 0u);
}
