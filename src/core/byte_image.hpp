#pragma once
// The byte format of the data the build compiles into the binary (the catalogue blob, rules/reference/
// catalogue_blob.hpp; the kernel-log prefilter image, collect/kernel_log/prefilter_image.hpp): numbers as 8 bytes,
// little-endian; text as its length, then its bytes. The reader never reads past its input: a short or corrupt image
// makes ok() false, and its owner refuses the whole image.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gpudx {

class ByteImageWriter {
public:
    std::string out;

    void number(uint64_t v) {
        for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i) & 0xff);
    }
    void text(std::string_view s) {
        number(s.size());
        out += s;
    }
    void bytes(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
};

class ByteImageReader {
public:
    explicit ByteImageReader(std::string_view in) : in_(in) {}
    bool ok() const { return ok_; }
    bool at_end() const { return pos_ == in_.size(); }

    uint64_t number() {
        if (!ok_ || left() < 8) return ok_ = false, 0;
        uint64_t v = 0;
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(&v, in_.data() + pos_, 8);  // one load: a compiled-in image is read at every start
        } else {
            for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(in_[pos_ + i])} << (8 * i);
        }
        pos_ += 8;
        return v;
    }
    std::string_view text() {
        uint64_t n = number();
        if (!ok_ || left() < n) return ok_ = false, std::string_view();
        auto s = in_.substr(pos_, n);
        pos_ += n;
        return s;
    }
    void bytes(void* p, size_t n) {
        if (!ok_ || left() < n) return void(ok_ = false);
        std::memcpy(p, in_.data() + pos_, n);
        pos_ += n;
    }
    // A list's length, bounded by what is left (each element of every list takes at least one number): a corrupt
    // count fails instead of reserving gigabytes.
    size_t count() {
        uint64_t n = number();
        if (n > left() / 8 + 1) return ok_ = false, 0;
        return n;
    }

private:
    size_t left() const { return in_.size() - pos_; }

    std::string_view in_;
    size_t pos_ = 0;
    bool ok_ = true;
};

}  // namespace gpudx
