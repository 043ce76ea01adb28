//===- CacheCommand.h - kiln cache ... --------------------------*- C++ -*-===//

#ifndef KILN_TOOLS_KILN_CACHECOMMAND_H
#define KILN_TOOLS_KILN_CACHECOMMAND_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace kiln::tool {

/// Runs `kiln cache <argv...>`; returns the exit status.
int runCacheCommand(llvm::ArrayRef<std::string> argv);

struct Args;
/// `kiln cache <command>` on the remote tier at `url` (RemoteCacheCommand.cpp).
int runRemoteCacheCommand(llvm::StringRef command, llvm::StringRef url,
                          const Args &args);

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_CACHECOMMAND_H
