//===- Bundle.h - writing a cache bundle (a zip of artifacts) ---*- C++ -*-===//
//
// `kiln cache export` writes a bundle from a directory (exportCache) or a
// remote tier (exportTier): a zip file of objects/<key>.kneff and
// graphs/<key>.kgraph.pb. readBundle (Maintenance.h) reads one back.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CACHE_BUNDLE_H
#define KILN_CACHE_BUNDLE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

struct zip;

namespace kiln::cache {

class BundleWriter {
public:
  /// Starts a new bundle at `file`, replacing any file there.
  static llvm::Expected<std::unique_ptr<BundleWriter>>
  create(llvm::StringRef file);
  /// Discards the bundle unless close() succeeded.
  ~BundleWriter();

  /// Adds the file at `path` (read when the bundle is closed) as `name`.
  llvm::Error addFile(llvm::StringRef name, const std::string &path);
  /// Adds `bytes` as `name` (staged in a file beside the bundle until it is
  /// closed).
  llvm::Error addBytes(llvm::StringRef name, llvm::StringRef bytes);
  /// Writes the bundle out.
  llvm::Error close();

private:
  BundleWriter(struct zip *archive, std::string file)
      : archive(archive), file(std::move(file)) {}
  llvm::Error failed(llvm::StringRef what);

  struct zip *archive;
  std::string file;
  std::vector<std::string> parts; // staged files, removed at the end
};

} // namespace kiln::cache

#endif // KILN_CACHE_BUNDLE_H
