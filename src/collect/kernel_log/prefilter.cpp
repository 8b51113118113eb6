// The prefilter (prefilter.hpp): the parser's own words, the placement of every word's fingerprint in a bucket,
// and the block scanners (AVX2, SSSE3, portable) that find candidate lines.
#include "collect/kernel_log/prefilter.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GPUDX_X86 1
#endif

#include "collect/kernel_log/lexing.hpp"

namespace gpudx::kernel_log_prefilter {

using namespace kernel_log_lexing;

namespace {

// The parser's own topics (kernel_log_parse.hpp, classify_topic); whole words where a bare substring would
// catch unrelated words ("aerial", "xidx").
struct BuiltinWord {
    std::string_view text;
    bool whole_word;
};
constexpr BuiltinWord kBuiltinWords[] = {
    {"amdgpu", false}, {"dmar", false}, {"iommu", false}, {"kfd", true}, {"lockdown", false}, {"pcie", false},
    {"module verification", false}, {"unsigned module", false},
    {"-- boot", false}, {"-- reboot --", false},  // journalctl's boot separators
    {"amd-vi", false}, {"xid", true},
    {"sxid", true},  // NVSwitch: "nvidia-nvswitch3: SXid (PCI:...)"
    {"linux version", false},  // the first line of every boot
    {"nvrm", false}, {"aer", true}, {"fallen off the bus", false}, {"key was rejected", false},
};

struct PairFrequency {
    uint8_t byte0, byte1;
    uint32_t per_million;
};
#include "collect/kernel_log/log_frequencies.inc"

// How often a byte (folded with |0x20, as the lookup sees it), a pair and a triple of bytes occur in real kernel
// logs, per million bytes (log_frequencies.inc, from tools/kernel_log_pairs.py); a triple estimated from its
// pairs.
double byte_frequency(uint8_t c) { return kByteFrequency[c]; }
double pair_frequency(uint8_t c0, uint8_t c1) {
    static const auto sorted = [] {
        std::vector<std::pair<uint16_t, uint32_t>> v;
        for (auto& p : kCommonPairs) v.emplace_back(static_cast<uint16_t>(p.byte0 | p.byte1 << 8), p.per_million);
        std::sort(v.begin(), v.end());
        return v;
    }();
    auto key = static_cast<uint16_t>(c0 | c1 << 8);
    auto it = std::lower_bound(sorted.begin(), sorted.end(), std::pair<uint16_t, uint32_t>{key, 0});
    if (it != sorted.end() && it->first == key) return it->second;
    return std::size(kCommonPairs) ? std::end(kCommonPairs)[-1].per_million / 2.0 : 1.0;
}
double triple_frequency(uint8_t c0, uint8_t c1, uint8_t c2) {
    return pair_frequency(c0, c1) * pair_frequency(c1, c2) / std::max(1.0, byte_frequency(c1));
}

double folded_total() {
    double total = 0;
    for (unsigned c = 0; c < 256; ++c)
        if (c & 0x20) total += byte_frequency(static_cast<uint8_t>(c));
    return total;
}

}  // namespace

void FingerprintIndex::insert(uint16_t key, uint16_t pattern) {
    present_.insert(key);
    std::pair entry{key, pattern};
    entries_.insert(std::upper_bound(entries_.begin(), entries_.end(), entry), entry);
}

void FingerprintIndex::finish() {
    uint16_t keys = 0;
    for (size_t w = 0; w < KeySet16::kWords; ++w) {
        rank_[w] = keys;
        keys = static_cast<uint16_t>(keys + present_.word_count(w));
    }
    group_start_.clear();
    for (size_t i = 0; i < entries_.size(); ++i)
        if (i == 0 || entries_[i].first != entries_[i - 1].first) group_start_.push_back(static_cast<uint16_t>(i));
    group_start_.push_back(static_cast<uint16_t>(entries_.size()));
}

Prefilter::Prefilter(const std::vector<std::string>& extra_words) {
    // Words a built-in one (not whole-word) already finds cost nothing more. The others are placed fewest
    // choices first: a short word has few triples to choose from, a long one can still find a rare one.
    std::vector<std::pair<std::string, bool>> words;
    for (auto& b : kBuiltinWords) words.emplace_back(std::string(b.text), b.whole_word);
    for (auto& w : extra_words) {
        std::string lw;
        for (char c : w) lw += lower(c);
        if (lw.size() < 2 || covered(lw)) continue;
        if (std::find_if(words.begin(), words.end(), [&](auto& x) { return x.first == lw && !x.second; }) != words.end())
            continue;
        words.emplace_back(std::move(lw), false);
    }
    std::stable_sort(words.begin(), words.end(), [](auto& a, auto& b) { return a.first.size() < b.first.size(); });
    for (auto& [w, whole] : words) add(place(w, whole));
    triples.finish();
    pairs.finish();
}

bool Prefilter::covered(std::string_view w) const {
    for (auto& b : kBuiltinWords)
        if (!b.whole_word && w.find(b.text) != std::string_view::npos) return true;
    return false;
}

double Prefilter::newly_admitted(const uint8_t* lo, const uint8_t* hi, uint8_t c, uint8_t bit) {
    // Setting `bit` in lo[c & 15] and hi[c >> 4] admits, besides c, the bytes of c's column whose high nibble
    // the bucket already admits and those of c's row whose low nibble it does: nothing else changes.
    auto admitted = [&](unsigned x, bool after) {
        uint8_t l = lo[x & 15], h = hi[x >> 4];
        if (after) {
            if ((x & 15) == (c & 15u)) l |= bit;
            if ((x >> 4) == (c >> 4u)) h |= bit;
        }
        return (x & 0x20) && (l & h & bit);  // the lookup sees bytes folded with |0x20: no other ever arrives
    };
    double added = 0;
    for (unsigned k = 0; k < 16; ++k) {
        unsigned column = (k << 4) | (c & 15u), row = (c & 0xf0u) | k;
        if (admitted(column, true) && !admitted(column, false)) added += byte_frequency(static_cast<uint8_t>(column));
        if (row != column && admitted(row, true) && !admitted(row, false))
            added += byte_frequency(static_cast<uint8_t>(row));
    }
    return added;
}

PrefilterPattern Prefilter::place(const std::string& w, bool whole_word) const {
    PrefilterPattern best;
    best.text = w;
    best.whole_word = whole_word;
    if (w.size() == 2) {  // no triple: the pair, any third byte (its bucket admits every one)
        best.fingerprint_size = 2;
        unsigned fewest = bucket_size_[0];
        for (uint8_t b = 1; b < 8; ++b)
            if (bucket_size_[b] < fewest) fewest = bucket_size_[best.bucket = b];
        return best;
    }
    // Two costs per byte of log: every place the vector lookup admits costs an exact test of its triple, and
    // every place the fingerprint itself occurs costs comparing the word, the larger (kCompare times). The
    // rarest triples of a word are tried first; only those few are weighed against the buckets.
    constexpr double kCompare = 4;
    constexpr size_t kTried = 4;
    std::vector<std::pair<double, size_t>> offsets;
    for (size_t off = 0; off + 2 < w.size() && off < 255; ++off)
        offsets.emplace_back(triple_frequency(fold(w[off]), fold(w[off + 1]), fold(w[off + 2])), off);
    std::stable_sort(offsets.begin(), offsets.end(), [](auto& a, auto& b) { return a.first < b.first; });
    if (offsets.size() > kTried) offsets.resize(kTried);
    double best_cost = -1;
    for (auto [frequency, off] : offsets) {
        const uint8_t c[3] = {fold(w[off]), fold(w[off + 1]), fold(w[off + 2])};
        for (uint8_t b = 0; b < 8; ++b) {
            auto bit = static_cast<uint8_t>(1u << b);
            double before = 1, after = 1;
            for (int k = 0; k < 3; ++k) {
                before *= admitted_[b][k] / 1e6;
                after *= (admitted_[b][k] + newly_admitted(lo[k], hi[k], c[k], bit)) / 1e6;
            }
            double cost = kCompare * frequency + (after - before) * 1e6 + 1e-3 * bucket_size_[b];
            if (best_cost < 0 || cost < best_cost) {
                best_cost = cost;
                best.fingerprint_offset = static_cast<uint8_t>(off);
                best.bucket = b;
            }
        }
    }
    return best;
}

void Prefilter::add(PrefilterPattern p) {
    for (size_t k = 0; k < p.text.size() && k < 8; ++k) {
        auto c = static_cast<uint8_t>(p.text[k]);
        p.head |= uint64_t{c} << (8 * k);
        p.head_mask |= uint64_t{0xff} << (8 * k);
        if (c >= 'a' && c <= 'z') p.head_fold |= uint64_t{0x20} << (8 * k);
    }
    const auto bit = static_cast<uint8_t>(1u << p.bucket);
    const auto index = static_cast<uint16_t>(patterns.size());
    uint8_t c[3] = {};
    for (size_t k = 0; k < p.fingerprint_size; ++k) c[k] = fold(p.text[p.fingerprint_offset + k]);
    for (size_t k = 0; k < 3; ++k) {
        if (k < p.fingerprint_size) {
            admitted_[p.bucket][k] += newly_admitted(lo[k], hi[k], c[k], bit);
            lo[k][c[k] & 15] |= bit;
            hi[k][c[k] >> 4] |= bit;
        } else {  // a two-byte word: every third byte
            static const double total = folded_total();
            admitted_[p.bucket][k] = total;
            for (auto& n : lo[k]) n |= bit;
            for (auto& n : hi[k]) n |= bit;
        }
        for (unsigned x = 0; x < 256; ++x) byte_buckets[k][x] = lo[k][x & 15] & hi[k][x >> 4];
    }
    ++bucket_size_[p.bucket];
    if (p.fingerprint_size == 3) triples.insert(triple_key(c[0], c[1], c[2]), index);
    else pairs.insert(pair_key(c[0], c[1]), index);
    patterns.push_back(std::move(p));
}

namespace {

[[gnu::always_inline]] inline bool pattern_at(const char* p, size_t n, size_t start, const PrefilterPattern& pat) {
    if (start + pat.text.size() > n) return false;
    size_t k = 0;
    // Most candidates are false: one compare of the first 8 bytes rejects them (byte k is bits 8k..8k+7 of a
    // little-endian load).
    if (std::endian::native == std::endian::little && start + 8 <= n) {
        uint64_t word;
        std::memcpy(&word, p + start, 8);
        if (((word | pat.head_fold) & pat.head_mask) != pat.head) return false;
        k = std::min<size_t>(8, pat.text.size());
    }
    for (; k < pat.text.size(); ++k)
        if (lower(p[start + k]) != pat.text[k]) return false;
    if (pat.whole_word) {
        if (start > 0 && is_alnum(p[start - 1])) return false;
        size_t end = start + pat.text.size();
        if (end < n && is_alnum(p[end])) return false;
    }
    return true;
}

[[gnu::always_inline]] inline bool any_pattern_at(const Prefilter& pf, const char* p, size_t n, size_t pos,
                           std::span<const std::pair<uint16_t, uint16_t>> filed) {
    for (auto [key, index] : filed) {
        const PrefilterPattern& pat = pf.patterns[index];
        if (pos >= pat.fingerprint_offset && pattern_at(p, n, pos - pat.fingerprint_offset, pat)) return true;
    }
    return false;
}

// A candidate at `pos` (pos + 1 < n): does a whole pattern sit there? Its triple, then its pair when two-byte
// words exist, looked up exactly first.
[[gnu::always_inline]] inline bool verify_candidate(const Prefilter& pf, const char* p, size_t n, size_t pos) {
    const auto c0 = static_cast<uint8_t>(p[pos]), c1 = static_cast<uint8_t>(p[pos + 1]);
    if (pos + 2 < n) {
        uint16_t key = Prefilter::triple_key(c0, c1, static_cast<uint8_t>(p[pos + 2]));
        if (pf.triples.has(key) && any_pattern_at(pf, p, n, pos, pf.triples.find(key))) return true;
    }
    if (pf.pairs.empty()) return false;
    uint16_t key = Prefilter::pair_key(c0, c1);
    return pf.pairs.has(key) && any_pattern_at(pf, p, n, pos, pf.pairs.find(key));
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
void scan_scalar(const Prefilter& pf, const char* p, size_t n, size_t from, int64_t base, size_t max_line,
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
        // The last two positions have no third byte: only a two-byte word's bucket (every third byte) passes.
        unsigned third = i + 2 < n ? pf.byte_buckets[2][static_cast<uint8_t>(p[i + 2]) | 0x20] : 0xffu;
        unsigned b = pf.byte_buckets[0][c | 0x20] & pf.byte_buckets[1][static_cast<uint8_t>(p[i + 1]) | 0x20] & third;
        if (b && verify_candidate(pf, p, n, i)) resume = take_line(p, n, i, lines);
    }
}

#ifdef GPUDX_X86
// The candidates of the 32 (16) positions at i: the buckets admitting the bytes at i+k, k = 0..2, intersected.
#define GPUDX_TEDDY_BODY(V, load, set1, or_, and_, shuffle, srli, cmpeq, movemask, zero, width)                  \
    const V nib = set1(0x0f), fold = set1(0x20), nl = set1('\n'), none = zero();                                \
    V lo_t[3], hi_t[3];                                                                                          \
    for (int k = 0; k < 3; ++k) lo_t[k] = LOAD_TABLE(pf.lo[k]), hi_t[k] = LOAD_TABLE(pf.hi[k]);                  \
    size_t resume = 0, i = 0;                                                                                    \
    for (; i + (width) + 2 <= n; i += (width)) {                                                                 \
        V raw = load(reinterpret_cast<const V*>(p + i));                                                         \
        V r = none;                                                                                              \
        for (int k = 0; k < 3; ++k) {                                                                            \
            V v = k == 0 ? or_(raw, fold) : or_(load(reinterpret_cast<const V*>(p + i + k)), fold);              \
            V rk = and_(shuffle(lo_t[k], and_(v, nib)), shuffle(hi_t[k], and_(srli(v, 4), nib)));                \
            r = k == 0 ? rk : and_(r, rk);                                                                       \
        }                                                                                                        \
        uint32_t cand = ~static_cast<uint32_t>(movemask(cmpeq(r, none)));                                        \
        if constexpr ((width) == 16) cand &= 0xffffu;                                                            \
        count_newlines(static_cast<uint32_t>(movemask(cmpeq(raw, nl))), i, base, max_line, t);                   \
        if (cand && i + (width) > resume) {                                                                      \
            while (cand) {                                                                                       \
                size_t pos = i + static_cast<unsigned>(__builtin_ctz(cand));                                     \
                cand &= cand - 1;                                                                                \
                if (pos < resume) continue;                                                                      \
                if (verify_candidate(pf, p, n, pos)) resume = take_line(p, n, pos, lines);                       \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    scan_scalar(pf, p, n, i, base, max_line, t, lines, resume);

__attribute__((target("avx2,popcnt"))) void scan_avx2(const Prefilter& pf, const char* p, size_t n, int64_t base,
                                                      size_t max_line, ScanTotals& t, std::vector<LineRange>& lines) {
#define LOAD_TABLE(table) _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table)))
    GPUDX_TEDDY_BODY(__m256i, _mm256_loadu_si256, _mm256_set1_epi8, _mm256_or_si256, _mm256_and_si256,
                     _mm256_shuffle_epi8, _mm256_srli_epi16, _mm256_cmpeq_epi8, _mm256_movemask_epi8,
                     _mm256_setzero_si256, 32)
#undef LOAD_TABLE
}

__attribute__((target("ssse3,popcnt"))) void scan_ssse3(const Prefilter& pf, const char* p, size_t n, int64_t base,
                                                       size_t max_line, ScanTotals& t, std::vector<LineRange>& lines) {
#define LOAD_TABLE(table) _mm_load_si128(reinterpret_cast<const __m128i*>(table))
    GPUDX_TEDDY_BODY(__m128i, _mm_loadu_si128, _mm_set1_epi8, _mm_or_si128, _mm_and_si128, _mm_shuffle_epi8,
                     _mm_srli_epi16, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_setzero_si128, 16)
#undef LOAD_TABLE
}
#undef GPUDX_TEDDY_BODY
#endif

void scan_portable(const Prefilter& pf, const char* p, size_t n, int64_t base, size_t max_line, ScanTotals& t,
                   std::vector<LineRange>& lines) {
    scan_scalar(pf, p, n, 0, base, max_line, t, lines, 0);
}

}  // namespace

std::vector<std::string> builtin_words() {
    std::vector<std::string> out;
    for (auto& b : kBuiltinWords) out.emplace_back(b.text);
    return out;
}

std::vector<BlockScanner> usable_block_scanners() {
    std::vector<BlockScanner> out;
#ifdef GPUDX_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) out.push_back(scan_avx2);
    if (__builtin_cpu_supports("ssse3") && __builtin_cpu_supports("popcnt")) out.push_back(scan_ssse3);
#endif
    out.push_back(scan_portable);
    return out;
}

BlockScanner pick_block_scanner() { return usable_block_scanners().front(); }

}  // namespace gpudx::kernel_log_prefilter
