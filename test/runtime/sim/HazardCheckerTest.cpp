//===- HazardCheckerTest.cpp - races found among many accesses -----------===//

#include "runtime/sim/HazardChecker.h"

#include <gtest/gtest.h>

using namespace kiln;
using sim::HazardChecker;

namespace {

isa::AccessRegion sbuf(int64_t byteLo, int64_t byteHi) {
  return {isa::Memory::Sbuf, 0, 128, byteLo, byteHi};
}

isa::AccessRegion hbm(int64_t byteLo, int64_t byteHi) {
  return {isa::Memory::Hbm, 0, 1, byteLo, byteHi};
}

/// The (stream, index) of each earlier access `access` races with.
std::vector<std::pair<int, size_t>> racesOf(HazardChecker &checker,
                                            const HazardChecker::Access &access,
                                            std::vector<uint32_t> clock) {
  std::vector<std::pair<int, size_t>> found;
  checker.check(access, clock, [&](const HazardChecker::Access &earlier) {
    found.push_back({earlier.stream, earlier.index});
  });
  return found;
}

using Races = std::vector<std::pair<int, size_t>>;

TEST(HazardChecker, ReportsUnorderedOverlapsWithAWriteInRecordOrder) {
  HazardChecker checker(3);
  checker.record({0, 1, 0, sbuf(0, 1024), /*write=*/true});
  checker.record({1, 1, 0, sbuf(512, 2048), /*write=*/false});
  checker.record({0, 2, 1, sbuf(100000, 100100), /*write=*/true});
  checker.record({1, 2, 1, sbuf(0, 8), /*write=*/true});
  // Stream 2 has seen nothing: its write overlaps the first, second and
  // fourth accesses; the third is in another granule and bytes.
  EXPECT_EQ(racesOf(checker, {2, 1, 0, sbuf(0, 4096), true}, {0, 0, 1}),
            (Races{{0, 0}, {1, 0}, {1, 1}}));
  // A read races only with the writes.
  EXPECT_EQ(racesOf(checker, {2, 1, 0, sbuf(0, 4096), false}, {0, 0, 1}),
            (Races{{0, 0}, {1, 1}}));
  // Having seen stream 0's first instruction and stream 1's second orders
  // them all.
  EXPECT_EQ(racesOf(checker, {2, 1, 0, sbuf(0, 4096), true}, {1, 2, 1}),
            Races{});
  // A stream does not race with itself.
  EXPECT_EQ(racesOf(checker, {0, 3, 2, sbuf(0, 4096), true}, {3, 0, 0}),
            (Races{{1, 0}, {1, 1}}));
}

TEST(HazardChecker, WideRegionsMeetNarrowOnesBothWays) {
  HazardChecker checker(2);
  // 1 GB of HBM: more granules than a region is filed under one by one.
  checker.record({0, 1, 0, hbm(0, int64_t{1} << 30), /*write=*/true});
  checker.record({0, 2, 1, hbm(int64_t{3} << 30, (int64_t{3} << 30) + 64),
                  /*write=*/true});
  EXPECT_EQ(
      racesOf(checker, {1, 1, 0, hbm(500 << 20, 501 << 20), false}, {0, 1}),
      (Races{{0, 0}}));
  EXPECT_EQ(racesOf(checker,
                    {1, 1, 0, hbm(int64_t{2} << 30, int64_t{4} << 30), false},
                    {0, 1}),
            (Races{{0, 1}}));
  // Different memories never overlap.
  EXPECT_EQ(racesOf(checker, {1, 1, 0, sbuf(0, 4096), true}, {0, 1}), Races{});
}

TEST(HazardChecker, ForgetsOnlyWhatEveryRunningStreamHasSeen) {
  HazardChecker checker(3);
  checker.record({0, 1, 0, sbuf(0, 1024), /*write=*/true});
  checker.record({0, 2, 1, sbuf(0, 1024), /*write=*/true});
  // Stream 1 has seen both of stream 0's; stream 2 only the first.
  std::vector<std::vector<uint32_t>> clocks{{2, 0, 0}, {2, 5, 0}, {1, 0, 3}};
  bool running[] = {true, true, true};
  checker.forgetOrdered(clocks, running);
  // The second is kept: stream 2 may still race with it.
  EXPECT_EQ(racesOf(checker, {2, 4, 3, sbuf(0, 16), false}, {1, 0, 4}),
            (Races{{0, 1}}));
  // Once stream 2 has finished, nothing running can race with either.
  bool stream2Done[] = {true, true, false};
  checker.forgetOrdered(clocks, stream2Done);
  EXPECT_EQ(racesOf(checker, {2, 4, 3, sbuf(0, 16), false}, {0, 0, 4}),
            Races{});
}

} // namespace
