// Why a path a user named cannot be used, in words for an error line: a missing file, a dangling
// symbolic link, a symbolic link loop and an unreadable folder each read differently (a loop is
// not "does not exist").
#pragma once

#include <string>

namespace titan {

// "" when `path` resolves to something (a file or a folder); else "does not exist", "is a symbolic
// link to a missing target", "is a symbolic link loop", or the system's reason.
std::string path_problem(const std::string& path);

// Opens `path` for reading without blocking on what is not a regular file: a FIFO would block
// open() until a writer comes, forever if none does. Returns the descriptor (blocking reads,
// close-on-exec), or -1 with `*problem` set: the system's reason (strerror) or "not a regular file
// (a FIFO, device, socket or folder)".
int open_regular_file(const std::string& path, std::string* problem);

}  // namespace titan
