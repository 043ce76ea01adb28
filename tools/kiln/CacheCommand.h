//===- CacheCommand.h - kiln cache ... --------------------------*- C++ -*-===//

#ifndef KILN_TOOLS_KILN_CACHECOMMAND_H
#define KILN_TOOLS_KILN_CACHECOMMAND_H

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace kiln::tool {

/// Runs `kiln cache <argv...>`; returns the exit status.
int runCacheCommand(llvm::ArrayRef<std::string> argv);

} // namespace kiln::tool

#endif // KILN_TOOLS_KILN_CACHECOMMAND_H
