//===- Bundle.cpp - writing a cache bundle (a zip of artifacts) -----------===//

#include "cache/Bundle.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <zip.h>

namespace kiln::cache {

llvm::Expected<std::unique_ptr<BundleWriter>>
BundleWriter::create(llvm::StringRef file) {
  int error = 0;
  ::unlink(file.str().c_str());
  zip_t *archive =
      zip_open(file.str().c_str(), ZIP_CREATE | ZIP_EXCL, &error);
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
  // libzip reads the buffer when it writes the archive, and frees it then.
  void *copy = std::malloc(bytes.size());
  std::memcpy(copy, bytes.data(), bytes.size());
  zip_source_t *source =
      zip_source_buffer(archive, copy, bytes.size(), /*freep=*/1);
  if (!source || zip_file_add(archive, name.str().c_str(), source, 0) < 0) {
    if (source) {
      zip_source_free(source);
    } else {
      std::free(copy);
    }
    return failed(("add " + name + " to").str());
  }
  return llvm::Error::success();
}

llvm::Error BundleWriter::close() {
  if (zip_close(archive) != 0) {
    return failed("write");
  }
  archive = nullptr;
  return llvm::Error::success();
}

} // namespace kiln::cache
