#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collect/ld_so_cache.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {

struct Lib {
    std::string name, path;
    int32_t flags = 0x0303;
    uint64_t hwcap = 0;
};

void put32(std::string& b, size_t off, uint32_t v) { std::memcpy(b.data() + off, &v, 4); }
void put64(std::string& b, size_t off, uint64_t v) { std::memcpy(b.data() + off, &v, 8); }

// Builds the new-format table ("glibc-ld.so.cache1.1") as ldconfig lays it out: header, entries, strings,
// with string offsets counted from the start of this table.
std::string new_table(const std::vector<Lib>& libs, uint8_t endian_flag = 2) {
    std::string b(48 + libs.size() * 24, '\0');
    std::memcpy(b.data(), "glibc-ld.so.cache1.1", 20);
    put32(b, 20, static_cast<uint32_t>(libs.size()));
    b[28] = static_cast<char>(endian_flag);
    std::string strings;
    std::vector<std::pair<uint32_t, uint32_t>> offs;
    for (auto& l : libs) {
        uint32_t k = static_cast<uint32_t>(b.size() + strings.size());
        strings += l.name + '\0';
        uint32_t v = static_cast<uint32_t>(b.size() + strings.size());
        strings += l.path + '\0';
        offs.emplace_back(k, v);
    }
    put32(b, 24, static_cast<uint32_t>(strings.size()));
    for (size_t i = 0; i < libs.size(); ++i) {
        size_t e = 48 + i * 24;
        put32(b, e, static_cast<uint32_t>(libs[i].flags));
        put32(b, e + 4, offs[i].first);
        put32(b, e + 8, offs[i].second);
        put64(b, e + 16, libs[i].hwcap);
    }
    return b + strings;
}

// The old "ld.so-1.7.0" table; string offsets count from the end of its entries.
std::string old_table(const std::vector<Lib>& libs, bool with_strings) {
    std::string b(16 + libs.size() * 12, '\0');
    std::memcpy(b.data(), "ld.so-1.7.0", 11);
    put32(b, 12, static_cast<uint32_t>(libs.size()));
    std::string strings;
    for (size_t i = 0; i < libs.size(); ++i) {
        uint32_t k = static_cast<uint32_t>(strings.size());
        strings += libs[i].name + '\0';
        uint32_t v = static_cast<uint32_t>(strings.size());
        strings += libs[i].path + '\0';
        put32(b, 16 + i * 12, static_cast<uint32_t>(libs[i].flags));
        put32(b, 16 + i * 12 + 4, k);
        put32(b, 16 + i * 12 + 8, v);
    }
    return with_strings ? b + strings : b;
}

const std::vector<Lib> kTwoCopies = {
    {"libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"},
    {"libcuda.so.1", "/lib/libcuda.so.1"},
    {"libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1", 0x0003},
};

}  // namespace

TEST(LdSoCache, ParsesTheNewFormatInFileOrder) {
    auto c = parse_ld_so_cache(new_table(kTwoCopies));
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->format, "glibc-ld.so.cache1.1");
    ASSERT_EQ(c->entries.size(), 3u);
    EXPECT_EQ(c->entries[0].name, "libcuda.so.1");
    EXPECT_EQ(c->entries[0].path, "/usr/local/nvidia/lib64/libcuda.so.1");
    EXPECT_EQ(c->entries[1].path, "/lib/libcuda.so.1");
    EXPECT_TRUE(ld_cache_entry_is_x86_64(c->entries[0].flags));
    EXPECT_FALSE(ld_cache_entry_is_x86_64(c->entries[2].flags));
    EXPECT_EQ(describe_ld_cache_flags(c->entries[0].flags), "libc6,x86-64");
    EXPECT_EQ(describe_ld_cache_flags(c->entries[2].flags), "libc6");
    EXPECT_TRUE(c->problems.empty());
}

TEST(LdSoCache, PrefersTheNewTableAfterAnOldOne) {
    // Old table names a stale path; glibc reads the aligned new table that follows.
    std::string old = old_table({{"libcuda.so.1", "/stale/libcuda.so.1"}}, false);
    while (old.size() % 8) old += '\0';
    auto c = parse_ld_so_cache(old + new_table(kTwoCopies));
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->format, "ld.so-1.7.0+glibc-ld.so.cache1.1");
    ASSERT_EQ(c->entries.size(), 3u);
    EXPECT_EQ(c->entries[0].path, "/usr/local/nvidia/lib64/libcuda.so.1");
}

TEST(LdSoCache, ParsesAnOldOnlyCache) {
    auto c = parse_ld_so_cache(old_table({{"libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1"}}, true));
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->format, "ld.so-1.7.0");
    ASSERT_EQ(c->entries.size(), 1u);
    EXPECT_EQ(c->entries[0].name, "libnvidia-ml.so.1");
    EXPECT_EQ(c->entries[0].path, "/usr/lib64/libnvidia-ml.so.1");
}

TEST(LdSoCache, KeepsHwcapOfGlibcHwcapsEntries) {
    auto c = parse_ld_so_cache(new_table({{"libz.so.1", "/usr/lib/glibc-hwcaps/x86-64-v3/libz.so.1", 0x0303,
                                            kLdCacheHwcapExtension | 1}}));
    ASSERT_TRUE(c);
    ASSERT_EQ(c->entries.size(), 1u);
    EXPECT_EQ(c->entries[0].hwcap, kLdCacheHwcapExtension | 1);
}

TEST(LdSoCache, TruncatedEntryTableIsAnError) {
    auto full = new_table(kTwoCopies);
    for (size_t len : {size_t{0}, size_t{5}, size_t{20}, size_t{47}, size_t{48 + 24 * 2}}) {
        auto c = parse_ld_so_cache(std::string_view(full).substr(0, len));
        EXPECT_FALSE(c) << "length " << len;
    }
}

TEST(LdSoCache, HugeEntryCountIsAnErrorNotAnOverflow) {
    auto b = new_table(kTwoCopies);
    put32(b, 20, 0xffffffffu);
    auto c = parse_ld_so_cache(b);
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("truncated"), std::string::npos);
    auto o = old_table(kTwoCopies, true);
    put32(o, 12, 0xfffffff0u);
    EXPECT_FALSE(parse_ld_so_cache(o));
}

TEST(LdSoCache, StringOffsetOutOfBoundsSkipsOnlyThatEntry) {
    auto b = new_table(kTwoCopies);
    put32(b, 48 + 24 + 8, 0x7fffffffu);  // second entry's path
    auto c = parse_ld_so_cache(b);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->entries.size(), 2u);
    ASSERT_EQ(c->problems.size(), 1u);
    EXPECT_NE(c->problems[0].find("entry 1"), std::string::npos);
}

TEST(LdSoCache, StringWithoutTerminatorIsRejected) {
    auto b = new_table({{"libcuda.so.1", "/lib/libcuda.so.1"}});
    b.pop_back();  // drop the final NUL: the path now runs off the end
    auto c = parse_ld_so_cache(b);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->entries.empty());
    EXPECT_EQ(c->problems.size(), 1u);
}

TEST(LdSoCache, BigEndianAndUnknownMagicAreErrors) {
    auto big = parse_ld_so_cache(new_table(kTwoCopies, 3));
    ASSERT_FALSE(big);
    EXPECT_NE(big.error().message.find("big-endian"), std::string::npos);
    EXPECT_FALSE(parse_ld_so_cache(new_table(kTwoCopies, 1)));
    EXPECT_FALSE(parse_ld_so_cache("\x7f" "ELF not a cache at all"));
    // Unset byte order (caches written before glibc 2.33) is read as this machine's.
    EXPECT_TRUE(parse_ld_so_cache(new_table(kTwoCopies, 0)));
}

TEST(LdSoCache, GarbageNeverCrashes) {
    std::string seed = new_table(kTwoCopies);
    uint32_t x = 12345;
    for (int round = 0; round < 2000; ++round) {
        std::string b = seed;
        for (int k = 0; k < 6; ++k) {
            x = x * 1103515245u + 12345u;
            b[(x >> 8) % b.size()] = static_cast<char>(x >> 24);
        }
        auto c = parse_ld_so_cache(b);
        if (!c) continue;
        for (auto& e : c->entries) EXPECT_LE(e.path.size(), b.size());
    }
}

TEST(LdconfigP, ParsesTheTextFormatOfTheH200Capture) {
    constexpr std::string_view text =
        "520 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1\n"
        "\tlibcuda.so.1 (libc6,x86-64) => /lib/libcuda.so.1\n"
        "\tlibz.so.1 (libc6,x86-64, hwcap: 0x0000000000000002) => /usr/lib/glibc-hwcaps/x86-64-v3/libz.so.1\n"
        "\tlibfoo.so.2 (libc6, OS ABI: Linux 3.2.0) => /usr/lib32/libfoo.so.2\n"
        "garbage line\n"
        "Cache generated by: ldconfig (Ubuntu GLIBC 2.39-0ubuntu8.9) stable release version 2.39\n";
    auto c = parse_ldconfig_p(text);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->format, "ldconfig -p");
    ASSERT_EQ(c->entries.size(), 4u);
    EXPECT_EQ(c->entries[0].path, "/usr/local/nvidia/lib64/libcuda.so.1");
    EXPECT_EQ(c->entries[1].path, "/lib/libcuda.so.1");
    EXPECT_EQ(c->entries[0].flags, 0x0303);
    EXPECT_EQ(c->entries[2].hwcap, 2u);
    EXPECT_EQ(c->entries[3].flags, 0x0003);
    ASSERT_EQ(c->problems.size(), 1u);
    EXPECT_NE(c->problems[0].find("line 6"), std::string::npos);
    EXPECT_FALSE(parse_ldconfig_p("hello\nworld\n"));
}

TEST(LdconfigP, RealCaptureListsBothLibcudaCopiesNvidiaFirst) {
    std::ifstream in(std::string(GPUDX_TEST_FIXTURES) + "/h200x2/_commands/ldconfig-p.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    auto c = parse_ldconfig_p(ss.str());
    ASSERT_TRUE(c);
    EXPECT_EQ(c->entries.size(), 520u);
    EXPECT_TRUE(c->problems.empty());
    std::vector<std::string> libcuda;
    for (auto& e : c->entries)
        if (e.name == "libcuda.so.1") libcuda.push_back(e.path);
    EXPECT_EQ(libcuda, (std::vector<std::string>{"/usr/local/nvidia/lib64/libcuda.so.1", "/lib/libcuda.so.1"}));
}

// Cross-check against glibc itself where a real cache and ldconfig exist (skipped elsewhere).
TEST(LdSoCache, AgreesWithLdconfigOnThisMachine) {
    std::ifstream in("/etc/ld.so.cache", std::ios::binary);
    if (!in) GTEST_SKIP() << "no /etc/ld.so.cache";
    std::stringstream ss;
    ss << in.rdbuf();
    auto bin = parse_ld_so_cache(ss.str());
    ASSERT_TRUE(bin) << bin.error().message;
    FILE* p = ::popen("ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null", "r");
    if (!p) GTEST_SKIP() << "no ldconfig";
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    ::pclose(p);
    auto txt = parse_ldconfig_p(text);
    if (!txt || txt->entries.empty()) GTEST_SKIP() << "ldconfig -p printed nothing";
    ASSERT_EQ(bin->entries.size(), txt->entries.size());
    for (size_t i = 0; i < bin->entries.size(); ++i) {
        EXPECT_EQ(bin->entries[i].name, txt->entries[i].name) << i;
        EXPECT_EQ(bin->entries[i].path, txt->entries[i].path) << i;
    }
}

TEST(LdSoConf, ReadsDirectoriesAndIncludes) {
    auto conf = parse_ld_so_conf("# comment\ninclude /etc/ld.so.conf.d/*.conf\n/usr/local/lib\n"
                                 "/opt/a:/opt/b,/opt/c=libc6   # trailing\nhwcap 0 nosegneg\n/usr/lib64/\n");
    EXPECT_EQ(conf.includes, (std::vector<std::string>{"/etc/ld.so.conf.d/*.conf"}));
    EXPECT_EQ(conf.dirs, (std::vector<std::string>{"/usr/local/lib", "/opt/a", "/opt/b", "/opt/c", "/usr/lib64"}));
}

TEST(LibraryVersion, ComesFromTheResolvedFileName) {
    EXPECT_EQ(library_version_from_name("libcuda.so.580.159.04", "libcuda.so.1", false), "580.159.04");
    EXPECT_EQ(library_version_from_name("libcudart.so.12.4.127", "libcudart.so.12", true), "12.4.127");
    EXPECT_EQ(library_version_from_name("libcuda.so.1", "libcuda.so.1", false), "");
    EXPECT_EQ(library_version_from_name("libcudart.so.13", "libcudart.so.13", true), "13");
    EXPECT_EQ(library_version_from_name("libnvidia-ml.so.575.57.08", "libnvidia-ml.so.1", false), "575.57.08");
    EXPECT_EQ(library_version_from_name("libcuda.so", "libcuda.so.1", false), "");
    EXPECT_EQ(library_version_from_name("libcudaXso.1", "libcuda.so.1", false), "");
    EXPECT_EQ(library_version_from_name("libcuda.so.1.bak", "libcuda.so.1", false), "");
}

}  // namespace GPUDX_UNITY_ID
