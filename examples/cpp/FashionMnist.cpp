//===- FashionMnist.cpp - reading the Fashion-MNIST data set -------------===//

#include "examples/cpp/FashionMnist.h"

#include <zlib.h>

#include <memory>

namespace kiln::examples {

namespace {

/// The whole decompressed content of a .gz file.
llvm::Expected<std::string> readGzip(const std::string &path) {
  std::unique_ptr<gzFile_s, decltype(&gzclose)> file(gzopen(path.c_str(), "rb"),
                                                     &gzclose);
  if (!file) {
    return llvm::createStringError(
        "cannot open '" + path + "' (install Debian's dataset-fashion-mnist)");
  }
  std::string data;
  char chunk[1 << 16];
  int n;
  while ((n = gzread(file.get(), chunk, sizeof(chunk))) > 0) {
    data.append(chunk, n);
  }
  if (n < 0) {
    return llvm::createStringError("'" + path +
                                   "' is not a readable gzip file");
  }
  return data;
}

uint32_t bigEndian32(const std::string &data, size_t at) {
  auto byte = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(data[at + i]));
  };
  return (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3);
}

} // namespace

llvm::Expected<Dataset> readFashionMnist(const std::string &dir,
                                         const std::string &split) {
  std::string imagesPath = dir + "/" + split + "-images-idx3-ubyte.gz";
  std::string labelsPath = dir + "/" + split + "-labels-idx1-ubyte.gz";
  auto images = readGzip(imagesPath);
  if (!images) {
    return images.takeError();
  }
  auto labels = readGzip(labelsPath);
  if (!labels) {
    return labels.takeError();
  }
  if (images->size() < 16 || bigEndian32(*images, 0) != 0x803 ||
      labels->size() < 8 || bigEndian32(*labels, 0) != 0x801) {
    return llvm::createStringError("'" + imagesPath + "' or '" + labelsPath +
                                   "' is not an IDX file of the expected kind");
  }
  Dataset set;
  set.count = bigEndian32(*images, 4);
  uint32_t rows = bigEndian32(*images, 8), cols = bigEndian32(*images, 12);
  if (rows * cols != 784 || bigEndian32(*labels, 4) != set.count ||
      images->size() != 16 + set.count * 784 ||
      labels->size() != 8 + set.count) {
    return llvm::createStringError("'" + imagesPath + "' and '" + labelsPath +
                                   "' disagree on their sizes");
  }
  set.images.resize(set.count * 784);
  for (size_t i = 0; i < set.images.size(); ++i) {
    set.images[i] = static_cast<uint8_t>((*images)[16 + i]) / 255.0f;
  }
  set.labels.resize(set.count);
  for (int64_t i = 0; i < set.count; ++i) {
    set.labels[i] = static_cast<uint8_t>((*labels)[8 + i]);
  }
  return set;
}

} // namespace kiln::examples
