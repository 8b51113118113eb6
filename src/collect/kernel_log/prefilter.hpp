#pragma once
// The kernel-log scanner's prefilter: finds lines that hold one of the topic words anywhere in a buffer,
// without looking at most bytes twice. Each word has a three-byte fingerprint (a rare triple inside it, by how
// often triples occur in real kernel logs); a Teddy-style nibble lookup (pshufb) marks positions whose three
// bytes some bucket of fingerprints admits, an exact test of the triple rejects most of those, and only what
// passes is compared with the words whose fingerprint it is. Letters are folded with |0x20 in the lookup;
// the comparison is exact (ASCII, case-insensitive), and the grep pattern in bench/kernel_log_vs_grep.sh is the
// same word list (`gpudx explain --list --format json`, kernel_log_words).
//
// The scanner (scanner.cpp) picks one block scanner for the CPU it runs on and hands it whole blocks of
// complete lines; it gets back the lines a pattern sits in and the count of lines (and of oversized ones).
// Internal to collect/kernel_log/.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/key_set_16.hpp"

namespace gpudx::kernel_log_prefilter {

struct PrefilterPattern {
    std::string text;  // lower case
    bool whole_word = false;
    uint8_t fingerprint_offset = 0;
    uint8_t fingerprint_size = 3;  // 2 only for a two-byte word
    uint8_t bucket = 0;
    // The pattern's first 8 bytes (fewer when shorter) as one word, for a comparison that rejects a false
    // candidate at once: (the 8 input bytes | head_fold) & head_mask == head. head_fold has 0x20 in the
    // letters' bytes (folding the input's upper case), head_mask 0xff in the pattern's bytes. Set by add().
    uint64_t head = 0, head_fold = 0, head_mask = 0;
};

// Fingerprints looked up exactly: a 16-bit key (a hash of the folded bytes) in a bit set, and for a present key
// the patterns filed under it. A rank of the present keys (a count per 64-bit word plus a popcount) finds them
// without a search.
class FingerprintIndex {
public:
    void insert(uint16_t key, uint16_t pattern);
    void finish();  // after the last insert, before any find
    bool empty() const { return entries_.empty(); }
    bool has(uint16_t key) const { return present_.contains(key); }
    // Every (key, pattern) inserted, sorted: what a prebuilt image keeps (prefilter_image.hpp).
    std::span<const std::pair<uint16_t, uint16_t>> entries() const { return entries_; }
    // The patterns filed under `key`, a present one, as (key, index into Prefilter::patterns).
    // Inline, so that it takes the instructions of the block scanner it is called from (popcnt with AVX2).
    std::span<const std::pair<uint16_t, uint16_t>> find(uint16_t key) const {
        size_t group = rank_[key >> 6] + present_.count_below_in_word(key);
        return {entries_.data() + group_start_[group], entries_.data() + group_start_[group + 1]};
    }

private:
    KeySet16 present_;
    uint16_t rank_[KeySet16::kWords] = {};  // the present keys in the words before w
    std::vector<uint16_t> group_start_;
    std::vector<std::pair<uint16_t, uint16_t>> entries_;  // sorted
};

// A Teddy-style set: eight buckets of fingerprints, each admitted by the nibble tables of its bit. Built from
// the parser's own words and the caller's extra words.
class Prefilter {
public:
    explicit Prefilter(const std::vector<std::string>& extra_words);
    Prefilter() = default;  // empty, for a prebuilt image to fill (prefilter_image.hpp)

    // lo[k][n], hi[k][n]: the buckets whose fingerprints have low (high) nibble n at their byte k.
    alignas(16) uint8_t lo[3][16] = {}, hi[3][16] = {};
    uint8_t byte_buckets[3][256] = {};  // the same per whole byte, for the scalar path
    std::vector<PrefilterPattern> patterns;
    FingerprintIndex triples, pairs;  // three-byte fingerprints; two-byte words

    static uint16_t triple_key(uint8_t c0, uint8_t c1, uint8_t c2) {
        uint32_t v = static_cast<uint32_t>((c0 | 0x20) | (c1 | 0x20) << 8 | (c2 | 0x20) << 16);
        return static_cast<uint16_t>((v * 0x9E3779B1u) >> 16);
    }
    static uint16_t pair_key(uint8_t c0, uint8_t c1) { return static_cast<uint16_t>((c0 | 0x20) | (c1 | 0x20) << 8); }

private:
    bool covered(std::string_view w) const;
    static uint8_t fold(char c) { return static_cast<uint8_t>(static_cast<uint8_t>(c) | 0x20); }
    // How often (per million bytes of log) the bytes are that setting `bit` for byte c in a nibble table pair
    // would admit and that it does not admit yet.
    static double newly_admitted(const uint8_t* lo, const uint8_t* hi, uint8_t c, uint8_t bit);
    PrefilterPattern place(const std::string& w, bool whole_word) const;
    void add(PrefilterPattern p);

    unsigned bucket_size_[8] = {};
    double admitted_[8][3] = {};  // per bucket, how often the bytes are that its tables admit at each position
};

struct ScanTotals {
    uint64_t newlines = 0;
    uint64_t oversized = 0;
    int64_t last_newline = -1;  // absolute offset
};

struct LineRange {
    size_t begin, end;  // end excludes the newline
};

// Scans one block of whole lines starting at absolute offset `base`: counts its lines into the totals (a line
// longer than max_line as oversized) and appends the lines a pattern sits in.
using BlockScanner = void (*)(const Prefilter&, const char* p, size_t n, int64_t base, size_t max_line,
                              ScanTotals&, std::vector<LineRange>& lines);

// The parser's own topic words, lower case, as the prefilter looks for them.
std::vector<std::string> builtin_words();

// The fastest block scanner this CPU runs (AVX2, SSSE3, else portable); all find the same lines.
BlockScanner pick_block_scanner();
// Every block scanner this CPU can run, fastest first: for the tests that hold them to the same lines.
std::vector<BlockScanner> usable_block_scanners();

}  // namespace gpudx::kernel_log_prefilter
