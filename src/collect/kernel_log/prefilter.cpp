// The prefilter (prefilter.hpp): the parser's own words with their fingerprints, the placement of the
// caller's extra words, and the block scanners (AVX2, SSSE3, portable) that find candidate lines.
#include "collect/kernel_log/prefilter.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GPUDX_X86 1
#endif

#include "collect/kernel_log/lexing.hpp"

namespace gpudx::kernel_log_prefilter {

using namespace kernel_log_lexing;

namespace {

// Buckets group patterns whose fingerprints share a byte, so the nibble tables admit few other pairs.
const PrefilterPattern kBuiltinPatterns[] = {
    {"amdgpu", 2, 0, false},       // dg
    {"dmar", 0, 0, false},         // dm
    {"iommu", 2, 0, false},        // mm
    {"kfd", 0, 1, true},           // kf
    {"lockdown", 3, 1, false},     // kd
    {"pcie", 2, 2, false},         // ie
    {"module verification", 10, 2, false},  // if
    {"unsigned module", 3, 2, false},       // ig
    {"-- boot", 0, 3, false},      // --  (journalctl boot separator)
    {"-- reboot --", 0, 3, false}, // --
    {"amd-vi", 3, 3, false},       // -v
    {"xid", 0, 4, true},           // xi
    {"sxid", 1, 4, true},          // xi (NVSwitch: "nvidia-nvswitch3: SXid (PCI:...)")
    {"linux version", 3, 4, false},  // ux (first line of every boot)
    {"nvrm", 1, 5, false},         // vr
    {"aer", 0, 6, true},           // ae
    {"fallen off the bus", 0, 6, false},  // fa
    {"key was rejected", 9, 7, false},    // ej
};

// How often a byte (folded with |0x20, as the lookup sees it) appears in kernel logs, roughly: letters by
// English frequency, blanks, digits and hex very often, rare punctuation seldom. Only the ranking matters.
double byte_weight(uint8_t c) {
    static constexpr double kLetters[26] = {8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.2, 0.8, 4.0, 2.4,
                                            6.7, 7.5, 1.9, 0.1, 6.0, 6.3, 9.1, 2.8, 1.0, 2.4, 0.2, 2.0, 0.1};
    if (c >= 'a' && c <= 'z') return kLetters[c - 'a'];
    if (c == ' ') return 16;
    if (c >= '0' && c <= '9') return 4;
    switch (c) {
        case ':': case '.': case ',': return 2;
        case '-': case '=': case '/': case '(': case ')': return 1;
        case '{': case '}': return 0.8;  // '[' and ']' folded
        default: return c >= 0x80 ? 0.05 : 0.2;
    }
}

}  // namespace

Prefilter::Prefilter(const std::vector<std::string>& extra_words) {
    for (auto& p : kBuiltinPatterns) add(p);
    // Words a built-in pattern already finds cost nothing more; the others get the fingerprint and bucket
    // that admit the fewest extra pairs, longest first (they have the most pairs to choose from).
    std::vector<std::string> extras;
    for (auto& w : extra_words) {
        std::string lw;
        for (char c : w) lw += lower(c);
        if (lw.size() < 2 || covered(lw) || std::find(extras.begin(), extras.end(), lw) != extras.end()) continue;
        extras.push_back(std::move(lw));
    }
    std::stable_sort(extras.begin(), extras.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
    for (auto& w : extras) add(place(w));
}

bool Prefilter::covered(std::string_view w) const {
    for (auto& p : kBuiltinPatterns)
        if (!p.whole_word && w.find(p.text) != std::string_view::npos) return true;
    return false;
}

double Prefilter::admitted(const uint8_t* l0, const uint8_t* h0, const uint8_t* l1, const uint8_t* h1,
                           uint8_t bit) const {
    double w0 = 0, w1 = 0;
    for (int c = 0; c < 256; c += 1) {
        if (c & 0x20) {
            if (l0[c & 15] & h0[c >> 4] & bit) w0 += byte_weight(static_cast<uint8_t>(c));
            if (l1[c & 15] & h1[c >> 4] & bit) w1 += byte_weight(static_cast<uint8_t>(c));
        }
    }
    return w0 * w1;
}

PrefilterPattern Prefilter::place(const std::string& w) const {
    PrefilterPattern best{w, 0, 0, false};
    double best_cost = -1;
    for (size_t off = 0; off + 1 < w.size() && off < 255; ++off) {
        uint8_t c0 = fold(w[off]), c1 = fold(w[off + 1]);
        for (uint8_t b = 0; b < 8; ++b) {
            uint8_t bit = static_cast<uint8_t>(1u << b);
            uint8_t l0[16], h0[16], l1[16], h1[16];
            std::memcpy(l0, lo0, 16), std::memcpy(h0, hi0, 16), std::memcpy(l1, lo1, 16), std::memcpy(h1, hi1, 16);
            double before = admitted(l0, h0, l1, h1, bit);
            l0[c0 & 15] |= bit, h0[c0 >> 4] |= bit, l1[c1 & 15] |= bit, h1[c1 >> 4] |= bit;
            double cost = admitted(l0, h0, l1, h1, bit) - before + 1e-3 * static_cast<double>(buckets[b].size());
            if (best_cost < 0 || cost < best_cost) {
                best_cost = cost;
                best.fingerprint_offset = static_cast<uint8_t>(off);
                best.bucket = b;
            }
        }
    }
    return best;
}

void Prefilter::add(const PrefilterPattern& p) {
    uint8_t c0 = fold(p.text[p.fingerprint_offset]), c1 = fold(p.text[p.fingerprint_offset + 1u]);
    uint8_t bit = static_cast<uint8_t>(1u << p.bucket);
    lo0[c0 & 15] |= bit;
    hi0[c0 >> 4] |= bit;
    lo1[c1 & 15] |= bit;
    hi1[c1 >> 4] |= bit;
    for (int c = 0; c < 256; ++c) {
        pair_buckets[c][0] = lo0[c & 15] & hi0[c >> 4];
        pair_buckets[c][1] = lo1[c & 15] & hi1[c >> 4];
    }
    buckets[p.bucket].push_back(p);
}

namespace {

inline bool pattern_at(const char* p, size_t n, size_t start, const PrefilterPattern& pat) {
    if (start + pat.text.size() > n) return false;
    for (size_t k = 0; k < pat.text.size(); ++k)
        if (lower(p[start + k]) != pat.text[k]) return false;
    if (pat.whole_word) {
        if (start > 0 && is_alnum(p[start - 1])) return false;
        size_t end = start + pat.text.size();
        if (end < n && is_alnum(p[end])) return false;
    }
    return true;
}

// A candidate pair at `pos` whose buckets are `buckets`: does a whole pattern sit there?
inline bool verify_candidate(const Prefilter& pf, const char* p, size_t n, size_t pos, unsigned buckets) {
    while (buckets) {
        unsigned b = static_cast<unsigned>(__builtin_ctz(buckets));
        buckets &= buckets - 1;
        for (auto& pat : pf.buckets[b]) {
            if (pos < pat.fingerprint_offset) continue;
            if (pattern_at(p, n, pos - pat.fingerprint_offset, pat)) return true;
        }
    }
    return false;
}

// Records the line around a verified match and returns where scanning may resume (after its newline).
inline size_t take_line(const char* p, size_t n, size_t pos, std::vector<LineRange>& lines) {
    const void* back = pos > 0 ? memrchr(p, '\n', pos) : nullptr;
    size_t begin = back ? static_cast<size_t>(static_cast<const char*>(back) - p) + 1 : 0;
    const void* fwd = std::memchr(p + pos, '\n', n - pos);
    size_t end = fwd ? static_cast<size_t>(static_cast<const char*>(fwd) - p) : n;
    lines.push_back({begin, end});
    return end + 1;
}

// Lines inside one vector are shorter than the vector, so only the first newline can end a long line.
inline void count_newlines(uint64_t mask, size_t i, int64_t base, size_t max_line, ScanTotals& t) {
    if (!mask) return;
    int64_t first = base + static_cast<int64_t>(i) + __builtin_ctzll(mask);
    if (first - t.last_newline - 1 > static_cast<int64_t>(max_line)) ++t.oversized;
    t.last_newline = base + static_cast<int64_t>(i) + (63 - __builtin_clzll(mask));
    t.newlines += static_cast<uint64_t>(__builtin_popcountll(mask));
}

// Positions [from, n): the part no vector loop covers (and the whole block on other CPUs).
void scan_scalar(const Prefilter& nt, const char* p, size_t n, size_t from, int64_t base, size_t max_line,
                 ScanTotals& t, std::vector<LineRange>& lines, size_t resume) {
    for (size_t i = from; i < n; ++i) {
        auto c = static_cast<uint8_t>(p[i]);
        if (c == '\n') {
            int64_t at = base + static_cast<int64_t>(i);
            if (at - t.last_newline - 1 > static_cast<int64_t>(max_line)) ++t.oversized;
            t.last_newline = at;
            ++t.newlines;
            continue;
        }
        if (i < resume || i + 1 >= n) continue;
        unsigned b = nt.pair_buckets[c | 0x20][0] & nt.pair_buckets[static_cast<uint8_t>(p[i + 1]) | 0x20][1];
        if (b && verify_candidate(nt, p, n, i, b)) resume = take_line(p, n, i, lines);
    }
}

#ifdef GPUDX_X86
__attribute__((target("avx2"))) void scan_avx2(const Prefilter& nt, const char* p, size_t n, int64_t base,
                                               size_t max_line, ScanTotals& t, std::vector<LineRange>& lines) {
    const __m256i lo0 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo0)));
    const __m256i hi0 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi0)));
    const __m256i lo1 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo1)));
    const __m256i hi1 = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi1)));
    const __m256i nib = _mm256_set1_epi8(0x0f), fold = _mm256_set1_epi8(0x20), nl = _mm256_set1_epi8('\n');
    const __m256i zero = _mm256_setzero_si256();
    size_t resume = 0, i = 0;
    for (; i + 33 <= n; i += 32) {
        __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
        __m256i v0 = _mm256_or_si256(raw, fold);
        __m256i v1 = _mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 1)), fold);
        __m256i r0 = _mm256_and_si256(_mm256_shuffle_epi8(lo0, _mm256_and_si256(v0, nib)),
                                      _mm256_shuffle_epi8(hi0, _mm256_and_si256(_mm256_srli_epi16(v0, 4), nib)));
        __m256i r1 = _mm256_and_si256(_mm256_shuffle_epi8(lo1, _mm256_and_si256(v1, nib)),
                                      _mm256_shuffle_epi8(hi1, _mm256_and_si256(_mm256_srli_epi16(v1, 4), nib)));
        __m256i r = _mm256_and_si256(r0, r1);
        uint32_t cand = ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(r, zero)));
        uint32_t nlmask = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(raw, nl)));
        count_newlines(nlmask, i, base, max_line, t);
        if (cand && i + 32 > resume) {
            alignas(32) uint8_t buckets[32];
            _mm256_store_si256(reinterpret_cast<__m256i*>(buckets), r);
            while (cand) {
                unsigned j = static_cast<unsigned>(__builtin_ctz(cand));
                cand &= cand - 1;
                size_t pos = i + j;
                if (pos < resume) continue;
                if (verify_candidate(nt, p, n, pos, buckets[j])) resume = take_line(p, n, pos, lines);
            }
        }
    }
    scan_scalar(nt, p, n, i, base, max_line, t, lines, resume);
}

__attribute__((target("ssse3"))) void scan_ssse3(const Prefilter& nt, const char* p, size_t n, int64_t base,
                                                 size_t max_line, ScanTotals& t, std::vector<LineRange>& lines) {
    const __m128i lo0 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo0));
    const __m128i hi0 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi0));
    const __m128i lo1 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.lo1));
    const __m128i hi1 = _mm_load_si128(reinterpret_cast<const __m128i*>(nt.hi1));
    const __m128i nib = _mm_set1_epi8(0x0f), fold = _mm_set1_epi8(0x20), nl = _mm_set1_epi8('\n');
    const __m128i zero = _mm_setzero_si128();
    size_t resume = 0, i = 0;
    for (; i + 17 <= n; i += 16) {
        __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        __m128i v0 = _mm_or_si128(raw, fold);
        __m128i v1 = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 1)), fold);
        __m128i r0 = _mm_and_si128(_mm_shuffle_epi8(lo0, _mm_and_si128(v0, nib)),
                                   _mm_shuffle_epi8(hi0, _mm_and_si128(_mm_srli_epi16(v0, 4), nib)));
        __m128i r1 = _mm_and_si128(_mm_shuffle_epi8(lo1, _mm_and_si128(v1, nib)),
                                   _mm_shuffle_epi8(hi1, _mm_and_si128(_mm_srli_epi16(v1, 4), nib)));
        __m128i r = _mm_and_si128(r0, r1);
        uint32_t cand = ~static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(r, zero))) & 0xffffu;
        uint32_t nlmask = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(raw, nl)));
        count_newlines(nlmask, i, base, max_line, t);
        if (cand && i + 16 > resume) {
            alignas(16) uint8_t buckets[16];
            _mm_store_si128(reinterpret_cast<__m128i*>(buckets), r);
            while (cand) {
                unsigned j = static_cast<unsigned>(__builtin_ctz(cand));
                cand &= cand - 1;
                size_t pos = i + j;
                if (pos < resume) continue;
                if (verify_candidate(nt, p, n, pos, buckets[j])) resume = take_line(p, n, pos, lines);
            }
        }
    }
    scan_scalar(nt, p, n, i, base, max_line, t, lines, resume);
}
#endif

void scan_portable(const Prefilter& nt, const char* p, size_t n, int64_t base, size_t max_line, ScanTotals& t,
                   std::vector<LineRange>& lines) {
    scan_scalar(nt, p, n, 0, base, max_line, t, lines, 0);
}

}  // namespace

BlockScanner pick_block_scanner() {
#ifdef GPUDX_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return scan_avx2;
    if (__builtin_cpu_supports("ssse3")) return scan_ssse3;
#endif
    return scan_portable;
}

}  // namespace gpudx::kernel_log_prefilter
