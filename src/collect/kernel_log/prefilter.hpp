#pragma once
// The kernel-log scanner's prefilter: finds lines that hold one of the topic words anywhere in a buffer,
// without looking at most bytes twice. Each pattern has a two-byte fingerprint (a rare pair inside it); a Teddy-style nibble
// lookup (pshufb) marks positions whose pair belongs to some pattern's bucket, and only those positions
// are verified. Letters are folded with |0x20 in the lookup; verification compares exactly (ASCII,
// case-insensitive), and the grep pattern in bench/kernel_log_vs_grep.sh is the same word list.
//
// The scanner (scanner.cpp) picks one block scanner for the CPU it runs on and hands it whole blocks of
// complete lines; it gets back the lines a pattern sits in and the count of lines (and of oversized ones).
// Internal to collect/kernel_log/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx::kernel_log_prefilter {

struct PrefilterPattern {
    std::string text;  // lower case
    uint8_t fingerprint_offset;
    uint8_t bucket;
    bool whole_word;
};

// A Teddy-style set: per bucket, the patterns whose fingerprint pair sits in that bucket, and the nibble
// tables that admit those pairs. Built from the parser's own words and the caller's extra words.
class Prefilter {
public:
    explicit Prefilter(const std::vector<std::string>& extra_words);

    alignas(16) uint8_t lo0[16] = {}, hi0[16] = {}, lo1[16] = {}, hi1[16] = {};
    uint8_t pair_buckets[256][2] = {};  // scalar path: bucket bits for byte0 and byte1 separately
    std::vector<PrefilterPattern> buckets[8];

private:
    bool covered(std::string_view w) const;
    static uint8_t fold(char c) { return static_cast<uint8_t>(static_cast<uint8_t>(c) | 0x20); }
    // The weight of the pairs a bucket admits: every first byte its tables let through times every second.
    double admitted(const uint8_t* l0, const uint8_t* h0, const uint8_t* l1, const uint8_t* h1, uint8_t bit) const;
    PrefilterPattern place(const std::string& w) const;
    void add(const PrefilterPattern& p);
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

// The fastest block scanner this CPU runs (AVX2, SSSE3, else portable); all find the same lines.
BlockScanner pick_block_scanner();

}  // namespace gpudx::kernel_log_prefilter
