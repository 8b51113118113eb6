#pragma once
// Every file, directory and link gpudx reads goes through a Root, so a captured node
// (`gpudx gather`, tests/fixtures/*) replays exactly like the live machine.
//
// Capture format understood here (docs/capture-format.md):
//  - a symbolic link may be recorded as a plain file holding the link's target text
//    (sysfs `driver`, `/sys/bus/pci/devices/*`), and is followed like a link;
//  - a device node `/dev/NAME` is recorded as `/dev/NAME.devnode` holding its mode
//    (`0o20666`), optionally followed by `MAJOR:MINOR` and the owner (`uid=0 gid=109`).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace gpudx {

enum class FileType { regular, directory, symlink, char_device, block_device, fifo, socket, other };

struct FileInfo {
    FileType type = FileType::other;
    uint32_t mode = 0;  // permission bits and type bits, as st_mode
    std::optional<uint32_t> major, minor;  // device nodes only
    std::optional<uint32_t> uid, gid;      // unknown in captures unless the devnode record carries them
    bool recorded_devnode = false;         // came from a NAME.devnode file
};

class Root {
public:
    static constexpr size_t kDefaultMaxBytes = 4 * 1024 * 1024;

    explicit Root(std::filesystem::path base = "/");
    virtual ~Root() = default;

    const std::filesystem::path& base() const { return base_; }
    // True when reading the machine gpudx runs on (base "/"): access checks and /proc/self are meaningful.
    bool is_live() const { return live_; }

    // Whole file, at most max_bytes (a larger file is an error naming the path, never a partial read).
    virtual Result<std::string> read_file(std::string_view path, size_t max_bytes = kDefaultMaxBytes) const;
    // Entry names, sorted, without "." and "..". `.devnode` records are listed under their device name.
    virtual Result<std::vector<std::string>> list_dir(std::string_view path) const;
    // Target text of a link (a real one, or one recorded as a file in a capture).
    virtual Result<std::string> read_link(std::string_view path) const;
    // Type, mode and device numbers; follows links. Knows `.devnode` records.
    virtual Result<FileInfo> stat(std::string_view path) const;
    bool exists(std::string_view path) const { return stat(path).has_value(); }

    // The tree under an in-root directory as a root of its own, read through this one's files: a process's
    // /proc/PID/root, live or in a capture. A recording root (gather) records what is read through it too.
    virtual std::shared_ptr<const Root> subroot(std::string_view path) const;

    // A reader that takes one fact from a large file it reads outside this API (a driver library's version, from
    // its bytes) hands over the bytes it used: a recording root (gpudx gather) keeps them as the file's content
    // instead of an empty placeholder, so the replay finds the same fact. Other roots ignore it.
    virtual void note_excerpt(std::string_view /*path*/, std::string_view /*excerpt*/) const {}

    // Counters judged by how they grow (AER, InfiniBand ports) are read twice, a moment apart. The first reading
    // is the file itself. The later one is the file again on the live machine; a replayed root does not change,
    // so its later reading is the one recorded under kLaterSampleDir (docs/capture-format.md), ENOENT when none
    // was. A recording root (gpudx gather) keeps what each reading saw, so the replay sees the same growth.
    static constexpr std::string_view kLaterSampleDir = "/_samples/later";
    enum class Sample { first, later };
    virtual Result<std::string> read_sample(std::string_view path, Sample which, size_t max_bytes = kDefaultMaxBytes) const;

    // The path on this machine where an in-root path lives after following links inside the root,
    // for libraries that want a real path (libkmod). Never escapes the root.
    Result<std::filesystem::path> host_path(std::string_view path) const;
    // The in-root absolute path after resolving every link (like realpath, inside the root).
    Result<std::string> canonical(std::string_view path) const;

private:
    Result<std::string> resolve(std::string_view path, bool follow_last, bool follow_recorded_last) const;
    std::filesystem::path base_;
    bool live_;
};

// Last path component of a link target ("../../../bus/pci/drivers/nvidia" -> "nvidia").
std::string link_basename(std::string_view target);

}  // namespace gpudx
