#include "collect/kernel_log/prefilter_image.hpp"

#include <cstdint>
#include <cstring>

#include "core/byte_image.hpp"

namespace gpudx::kernel_log_prefilter {

namespace {

// Written first: an image of another layout is not read (the prefilter is then placed at run time).
constexpr std::string_view kMagic = "gpudx-prefilter-1\n";

using Writer = ByteImageWriter;
using Reader = ByteImageReader;

// The fingerprint entries of an index, in order.
void write_index(Writer& w, const FingerprintIndex& index) {
    auto entries = index.entries();
    w.number(entries.size());
    for (auto [key, pattern] : entries) {
        w.number(key);
        w.number(pattern);
    }
}

void read_index(Reader& r, FingerprintIndex& index) {
    size_t n = r.count();
    for (size_t i = 0; i < n && r.ok(); ++i) {
        auto key = static_cast<uint16_t>(r.number());
        auto pattern = static_cast<uint16_t>(r.number());
        index.insert(key, pattern);
    }
    index.finish();
}

bool same_pattern(const PrefilterPattern& a, const PrefilterPattern& b) {
    return a.text == b.text && a.whole_word == b.whole_word && a.fingerprint_offset == b.fingerprint_offset &&
           a.fingerprint_size == b.fingerprint_size && a.bucket == b.bucket && a.head == b.head &&
           a.head_fold == b.head_fold && a.head_mask == b.head_mask;
}

bool same_index(const FingerprintIndex& a, const FingerprintIndex& b) {
    auto x = a.entries(), y = b.entries();
    return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace

std::string write_prefilter_image(const std::vector<std::string>& extra_words, const Prefilter& p) {
    Writer w;
    w.out = kMagic;
    w.number(extra_words.size());
    for (auto& word : extra_words) w.text(word);
    w.bytes(p.lo, sizeof p.lo);
    w.bytes(p.hi, sizeof p.hi);
    w.bytes(p.byte_buckets, sizeof p.byte_buckets);
    w.number(p.patterns.size());
    for (auto& x : p.patterns) {
        w.text(x.text);
        for (uint64_t v : {uint64_t{x.whole_word}, uint64_t{x.fingerprint_offset}, uint64_t{x.fingerprint_size},
                           uint64_t{x.bucket}, x.head, x.head_fold, x.head_mask})
            w.number(v);
    }
    write_index(w, p.triples);
    write_index(w, p.pairs);
    return std::move(w.out);
}

std::unique_ptr<Prefilter> read_prefilter_image(std::string_view image, const std::vector<std::string>& extra_words) {
    if (!image.starts_with(kMagic)) return nullptr;
    Reader r(image.substr(kMagic.size()));
    // Placed for exactly these words, in this order (the fingerprints depend on the order of placement).
    if (r.count() != extra_words.size()) return nullptr;
    for (auto& word : extra_words)
        if (r.text() != word) return nullptr;
    auto p = std::make_unique<Prefilter>();
    r.bytes(p->lo, sizeof p->lo);
    r.bytes(p->hi, sizeof p->hi);
    r.bytes(p->byte_buckets, sizeof p->byte_buckets);
    size_t n = r.count();
    p->patterns.reserve(n);
    for (size_t i = 0; i < n && r.ok(); ++i) {
        auto& x = p->patterns.emplace_back();
        x.text = r.text();
        x.whole_word = r.number() != 0;
        x.fingerprint_offset = static_cast<uint8_t>(r.number());
        x.fingerprint_size = static_cast<uint8_t>(r.number());
        x.bucket = static_cast<uint8_t>(r.number());
        x.head = r.number();
        x.head_fold = r.number();
        x.head_mask = r.number();
    }
    read_index(r, p->triples);
    read_index(r, p->pairs);
    if (!r.ok() || !r.at_end()) return nullptr;
    return p;
}

bool same_prefilter(const Prefilter& a, const Prefilter& b) {
    return std::memcmp(a.lo, b.lo, sizeof a.lo) == 0 && std::memcmp(a.hi, b.hi, sizeof a.hi) == 0 &&
           std::memcmp(a.byte_buckets, b.byte_buckets, sizeof a.byte_buckets) == 0 &&
           std::equal(a.patterns.begin(), a.patterns.end(), b.patterns.begin(), b.patterns.end(), same_pattern) &&
           same_index(a.triples, b.triples) && same_index(a.pairs, b.pairs);
}

std::unique_ptr<Prefilter> make_prefilter(const std::vector<std::string>& extra_words) {
    for (std::string_view image : builtin_prefilter_images())
        if (auto p = read_prefilter_image(image, extra_words)) return p;
    return std::make_unique<Prefilter>(extra_words);
}

}  // namespace gpudx::kernel_log_prefilter
