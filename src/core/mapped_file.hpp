#pragma once
// A whole regular file mapped read-only, for a large input of which a reader touches a few pages (pci.ids): no copy
// into the heap. Unmapped when it goes. (A file that may be truncated while it is read is better read by offset:
// a mapping past the new end raises SIGBUS.)
#include <cstddef>
#include <filesystem>
#include <string_view>

namespace gpudx {

class MappedFile {
public:
    // Maps `path` when it is a non-empty regular file of at most max_bytes; otherwise ok() is false.
    MappedFile(const std::filesystem::path& path, size_t max_bytes);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    bool ok() const { return data_ != nullptr; }
    std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

private:
    void* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace gpudx
