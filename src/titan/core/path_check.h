// Why a path a user named cannot be used, in words for an error line: a missing file, a dangling
// symbolic link, a symbolic link loop and an unreadable folder each read differently (a loop is
// not "does not exist").
#pragma once

#include <string>

namespace titan {

// "" when `path` resolves to something (a file or a folder); else "does not exist", "is a symbolic
// link to a missing target", "is a symbolic link loop", or the system's reason.
std::string path_problem(const std::string& path);

}  // namespace titan
