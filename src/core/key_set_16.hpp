#pragma once
// A set of 16-bit keys as 65,536 bits: the one test a text search makes at each position (is there anything
// that starts with these two bytes?) before it looks at what does. The kernel-log prefilter's fingerprints, the
// word sets, the signature index and the result-code names each keep one.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace gpudx {

class KeySet16 {
public:
    static constexpr size_t kWords = 65536 / 64;

    void insert(uint16_t key) { words_[key >> 6] |= uint64_t{1} << (key & 63); }
    bool contains(uint16_t key) const { return words_[key >> 6] >> (key & 63) & 1; }
    // The keys of the set below `key` within its 64-bit word: with a count per word before it (word_count), the
    // index of `key` among the set's keys in order.
    size_t count_below_in_word(uint16_t key) const {
        return static_cast<size_t>(std::popcount(words_[key >> 6] & ((uint64_t{1} << (key & 63)) - 1)));
    }
    size_t word_count(size_t word) const { return static_cast<size_t>(std::popcount(words_[word])); }

private:
    std::array<uint64_t, kWords> words_{};
};

}  // namespace gpudx
