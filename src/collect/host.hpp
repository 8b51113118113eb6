#pragma once
// Pure parsers behind collect_host (collectors.hpp), exposed for unit tests.
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

// PRETTY_NAME from os-release text (quotes and escapes removed); NAME + VERSION when it is absent.
std::string parse_os_release_pretty_name(std::string_view text);
// The efivars SecureBoot variable: 4 attribute bytes, then one value byte (1 = enabled).
std::optional<bool> parse_secure_boot_efivar(std::string_view bytes);
// "#1 SMP PREEMPT_DYNAMIC ..." from /proc/version ("Linux version R (builder) (gcc ...) #1 SMP ..."), for
// roots that lack /proc/sys/kernel/version.
std::string parse_kernel_version_from_proc_version(std::string_view text);
// Release ("6.8.0-45-generic") from /proc/version.
std::string parse_kernel_release_from_proc_version(std::string_view text);

}  // namespace gpudx
