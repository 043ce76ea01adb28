//===- FashionMnist.h - reading the Fashion-MNIST data set ------*- C++ -*-===//

#ifndef KILN_EXAMPLES_CPP_FASHIONMNIST_H
#define KILN_EXAMPLES_CPP_FASHIONMNIST_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::examples {

/// Images as f32 in [0, 1], row-major [count, 784]; labels 0..9.
struct Dataset {
  int64_t count = 0;
  std::vector<float> images;
  std::vector<int64_t> labels;
};

/// Reads `<dir>/<split>-images-idx3-ubyte.gz` and the matching labels, as
/// Debian's dataset-fashion-mnist installs them; split is "train" or "t10k".
llvm::Expected<Dataset> readFashionMnist(const std::string &dir,
                                         const std::string &split);

} // namespace kiln::examples

#endif // KILN_EXAMPLES_CPP_FASHIONMNIST_H
