//===- Bundle.cpp - writing a cache bundle (a zip of artifacts) -----------===//

#include "cache/Bundle.h"

#include "llvm/Support/raw_ostream.h"

#include <unistd.h>
#include <zip.h>

namespace kiln::cache {

llvm::Expected<std::unique_ptr<BundleWriter>>
BundleWriter::create(llvm::StringRef file) {
  int error = 0;
  // libzip writes a temporary file and renames it over `file` on close: a
  // bundle that fails leaves the one there before untouched.
  zip_t *archive =
      zip_open(file.str().c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (!archive) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, error);
    std::string why = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    return llvm::createStringError("cannot create '" + file + "': " + why);
  }
  return std::unique_ptr<BundleWriter>(new BundleWriter(archive, file.str()));
}

BundleWriter::~BundleWriter() {
  if (archive) {
    zip_discard(archive);
  }
  for (const std::string &part : parts) {
    ::unlink(part.c_str());
  }
}

llvm::Error BundleWriter::failed(llvm::StringRef what) {
  std::string why = zip_strerror(archive);
  zip_discard(archive);
  archive = nullptr;
  return llvm::createStringError("cannot " + what + " '" + file + "': " + why);
}

llvm::Error BundleWriter::addFile(llvm::StringRef name,
                                  const std::string &path) {
  zip_source_t *source = zip_source_file(archive, path.c_str(), 0, -1);
  if (!source || zip_file_add(archive, name.str().c_str(), source, 0) < 0) {
    if (source) {
      zip_source_free(source);
    }
    return failed("add '" + path + "' to");
  }
  return llvm::Error::success();
}

llvm::Error BundleWriter::addBytes(llvm::StringRef name,
                                   llvm::StringRef bytes) {
  // Staged in a file beside the bundle, which libzip reads when it writes
  // the archive: a whole tier's artifacts never sit in memory at once.
  std::string part =
      file + ".part-" + std::to_string(::getpid()) + "-" +
      std::to_string(parts.size());
  std::error_code ec;
  {
    llvm::raw_fd_ostream out(part, ec);
    if (!ec) {
      out << bytes;
      out.close();
      if (out.has_error()) {
        ec = out.error();
        out.clear_error();
      }
    }
  }
  parts.push_back(part);
  if (ec) {
    return llvm::createStringError("cannot stage " + name + " for '" + file +
                                   "' in '" + part + "': " + ec.message());
  }
  return addFile(name, part);
}

llvm::Error BundleWriter::close() {
  if (zip_close(archive) != 0) {
    return failed("write");
  }
  archive = nullptr;
  return llvm::Error::success();
}

} // namespace kiln::cache
