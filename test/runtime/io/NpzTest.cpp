//===- NpzTest.cpp - .npy and .npz reading and writing -------------------===//

#include "runtime/io/Npz.h"
#include "test/support/TestSupport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <unistd.h>

using namespace kiln;

namespace {

using NpzTest = test::TempDirTest;

io::NpyArray array(std::string name, proto::DType dtype,
                   std::vector<int64_t> shape, std::string data) {
  io::NpyArray a;
  a.name = std::move(name);
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data = std::move(data);
  return a;
}

TEST_F(NpzTest, ArchiveRoundTripKeepsNamesShapesAndBytes) {
  std::vector<io::NpyArray> arrays = {
      array("w", proto::F32, {2, 2}, std::string(16, '\x01')),
      array("ids", proto::I64, {3}, std::string(24, '\x02')),
      array("mask", proto::I1, {2}, std::string("\x01\x00", 2)),
      array("scalar", proto::I32, {}, std::string(4, '\x03'))};
  ASSERT_FALSE(static_cast<bool>(io::writeArrays(path("a.npz"), arrays)));
  auto read = io::readArrays(path("a.npz"));
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  ASSERT_EQ(read->size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ((*read)[i].name, arrays[i].name);
    EXPECT_EQ((*read)[i].dtype, arrays[i].dtype);
    EXPECT_EQ((*read)[i].shape, arrays[i].shape);
    EXPECT_EQ((*read)[i].data, arrays[i].data);
  }
}

TEST_F(NpzTest, SameArraysGiveTheSameBytes) {
  std::vector<io::NpyArray> arrays = {
      array("a", proto::F32, {2}, std::string(8, 'x'))};
  ASSERT_FALSE(static_cast<bool>(io::writeArrays(path("1.npz"), arrays)));
  sleep(2); // zip timestamps have 2-second resolution
  ASSERT_FALSE(static_cast<bool>(io::writeArrays(path("2.npz"), arrays)));
  auto one = llvm::MemoryBuffer::getFile(path("1.npz"));
  auto two = llvm::MemoryBuffer::getFile(path("2.npz"));
  ASSERT_TRUE(one && two);
  EXPECT_EQ((*one)->getBuffer(), (*two)->getBuffer());
}

TEST_F(NpzTest, SingleNpyFileIsNamedAfterItsStem) {
  ASSERT_FALSE(static_cast<bool>(io::writeArrays(
      path("weights.npy"),
      {array("ignored", proto::F16, {3}, std::string(6, 'x'))})));
  auto read = io::readArrays(path("weights.npy"));
  ASSERT_TRUE(static_cast<bool>(read));
  EXPECT_EQ(read->front().name, "weights");
  EXPECT_EQ(read->front().dtype, proto::F16);
}

TEST_F(NpzTest, NpyHeaderIsWhatNumPyWrites) {
  std::string bytes =
      io::serializeNpy(array("a", proto::F32, {2, 3}, std::string(24, 0)));
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_NE(
      bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
      std::string::npos);
  EXPECT_EQ((bytes.size() - 24) % 64, 0u) << "data starts 64-byte aligned";
  std::string one =
      io::serializeNpy(array("a", proto::F32, {5}, std::string(20, 0)));
  EXPECT_NE(one.find("'shape': (5,)"), std::string::npos);
}

TEST_F(NpzTest, BadFilesGetClearErrors) {
  std::string good =
      io::serializeNpy(array("a", proto::F32, {4}, std::string(16, 0)));
  EXPECT_NE(
      test::errorOf(io::parseNpy(good.substr(0, good.size() - 3), "a.npy"))
          .find("data has 13 bytes, shape (4,) needs 16"),
      std::string::npos);
  std::string f64 = good;
  f64.replace(f64.find("<f4"), 3, "<f8");
  EXPECT_NE(test::errorOf(io::parseNpy(f64, "a.npy"))
                .find("dtype '<f8' is not one Kiln reads"),
            std::string::npos);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(
      test::errorOf(io::parseNpy(fortran, "a.npy")).find("Fortran-ordered"),
      std::string::npos);
  EXPECT_NE(test::errorOf(io::parseNpy("garbage", "a.npy"))
                .find("missing NumPy magic"),
            std::string::npos);
  writeBytes("junk.npz", "PK this is not a zip");
  EXPECT_NE(test::errorOf(io::readArrays(path("junk.npz")))
                .find("neither a .npy array nor a readable .npz archive"),
            std::string::npos);
  EXPECT_NE(
      test::errorOf(io::readArrays(path("absent.npz"))).find("cannot read"),
      std::string::npos);
}

} // namespace
