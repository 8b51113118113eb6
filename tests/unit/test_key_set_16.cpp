// core/key_set_16.hpp: the two-byte pre-test of the kernel-log prefilter, the word sets, the signature index and
// the result-code names. Its rank finds a key's place among the set's keys, which the prefilter's lookup relies on.
#include <gtest/gtest.h>

#include <set>

#include "core/key_set_16.hpp"

namespace gpudx {
namespace {

TEST(KeySet16, HoldsExactlyTheKeysInsertedAtEveryBitOfAWord) {
    KeySet16 s;
    const std::set<uint16_t> keys = {0, 1, 63, 64, 127, 0x4e56 /* "VN" */, 65534, 65535};
    for (auto k : keys) s.insert(k);
    for (uint32_t k = 0; k < 65536; ++k)
        EXPECT_EQ(s.contains(static_cast<uint16_t>(k)), keys.count(static_cast<uint16_t>(k)) == 1) << k;
}

TEST(KeySet16, ARankOfWordCountsAndCountsBelowIsAKeysPlaceInOrder) {
    KeySet16 s;
    const std::set<uint16_t> keys = {3, 5, 64, 70, 200, 4096, 65535};
    for (auto k : keys) s.insert(k);
    size_t place = 0;
    for (auto k : keys) {
        size_t before = 0;
        for (size_t w = 0; w < static_cast<size_t>(k >> 6); ++w) before += s.word_count(w);
        EXPECT_EQ(before + s.count_below_in_word(k), place) << k;
        ++place;
    }
}

}  // namespace
}  // namespace gpudx
