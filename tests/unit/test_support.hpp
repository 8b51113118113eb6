#pragma once
// Helpers several unit tests share: files in a scratch folder, and the built gpudx run as a user would.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

namespace gpudx::test {

inline std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

// An empty folder of this test process's own under the temporary directory.
inline std::filesystem::path scratch(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() / ("gpudx-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

inline std::string write_file(const std::filesystem::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
    return p.string();
}

// The built binary with `args` (shell words), stdout and stderr together: (exit code, output).
inline std::pair<int, std::string> run_gpudx(const std::string& args) {
    std::string cmd = std::string(GPUDX_BINARY) + " " + args + " 2>&1";
    FILE* f = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    int status = ::pclose(f);
    return {WEXITSTATUS(status), out};
}

}  // namespace gpudx::test
