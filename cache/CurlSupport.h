//===- CurlSupport.h - what the remote tier's libcurl calls share -*- C++ -*-===//
//
// Private to cache/: Remote.cpp and AwsCredentials.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_CURLSUPPORT_H
#define KILN_CACHE_CURLSUPPORT_H

#include "llvm/ADT/StringRef.h"

#include <cstdlib>
#include <string>

namespace kiln::cache {

/// The environment variable `name`, or `otherwise` when unset or empty.
inline std::string environmentOr(const char *name,
                                 llvm::StringRef otherwise = "") {
  const char *value = std::getenv(name);
  return value && *value ? value : otherwise.str();
}

/// CURLOPT_WRITEFUNCTION appending the response body to a std::string
/// (CURLOPT_WRITEDATA).
inline size_t appendToString(char *data, size_t size, size_t count,
                             void *out) {
  static_cast<std::string *>(out)->append(data, size * count);
  return size * count;
}

} // namespace kiln::cache

#endif // KILN_CACHE_CURLSUPPORT_H
